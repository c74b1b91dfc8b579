"""Fixtures of the vLLM backend tests: vLLM's engine pieces on CPU over SmolLM2.

vLLM is not in the workspace's lock (see the root pyproject); ``nox -s vllm``
installs it in its own environment and sets ``GRID_REQUIRE_VLLM=1``, which
makes a vLLM that cannot be imported an error here instead of a skip. Without
it, the test modules that need vLLM skip themselves (``VLLM_SKIP``); the
modules of the vLLM-free parts (``spec``, ``rows``) run everywhere.

vLLM is told to use its CPU platform (``VLLM_TARGET_DEVICE=cpu``) and never to
reach the Hub (``HF_HUB_OFFLINE=1``), before anything imports it.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grid_core.vocab import ByteIncompleteWarning, Vocabulary, smollm2

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Each request's sealed audit log goes to GRID_AUDIT_DIR: a temporary one here.
os.environ.setdefault("GRID_AUDIT_DIR", tempfile.mkdtemp(prefix="grid-audit-"))

try:
    import vllm.v1.structured_output  # noqa: F401
except ImportError as e:
    VLLM_MISSING = f"vllm is not importable ({e}); `nox -s vllm` installs it and runs these tests"
else:
    VLLM_MISSING = ""

if VLLM_MISSING and os.environ.get("GRID_REQUIRE_VLLM") == "1":
    raise RuntimeError(f"GRID_REQUIRE_VLLM=1, but {VLLM_MISSING}")

ANALYST = {"dialect": "sqlite", "role": "analyst", "schema": "example"}
CLERK = {"dialect": "sqlite", "role": "clerk", "schema": "example"}
INTERN = {"dialect": "sqlite", "role": "intern", "schema": "example"}


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    """SmolLM2's GRID vocabulary from its GGUF file (not byte-complete: warned once)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ByteIncompleteWarning)
        return smollm2()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's config and tokenizer as a model directory (about 30 s: GGUF parsing)."""
    from vllm_harness import write_model_dir

    return write_model_dir(tmp_path_factory.mktemp("smollm2"))


@pytest.fixture(scope="session")
def registered() -> None:
    """The GRID plugin registered (what vLLM's plugin loader does at start-up)."""
    from grid_serve.vllm.plugin import register

    register()


@pytest.fixture(scope="session")
def config(model_dir: Path, registered: None) -> Any:
    """The engine config: backend ``grid``, no speculative decoding."""
    from vllm_harness import vllm_config

    return vllm_config(model_dir)


@pytest.fixture(scope="session")
def spec_config(model_dir: Path, registered: None) -> Any:
    """The engine config: backend ``grid``, two speculative draft tokens."""
    from vllm_harness import vllm_config

    return vllm_config(model_dir, speculative=2)


@pytest.fixture
def manager(config: Any) -> Iterator[Any]:
    """A fresh ``StructuredOutputManager`` (its GRID backend is built by the first request)."""
    from vllm.v1.structured_output import StructuredOutputManager

    m = StructuredOutputManager(config)
    yield m
    m.clear_backend()


@pytest.fixture
def tokenizer(manager: Any) -> Any:
    """vLLM's tokenizer of the model (the one the backend reads)."""
    return manager.tokenizer
