"""Shared fixtures: the example database and policy, and (when torch is installed) SmolLM2.

The model is loaded once per test session (about a second from the conversion
cache; the first run of a machine converts the GGUF file, about 25 s). Torch
runs on one CPU thread in the tests: greedy decoding is then deterministic
(reduction order does not depend on the thread count) and the OpenMP workers do
not spin against GRID's mask work on small CI machines.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from grid_core.vocab import ByteIncompleteWarning
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.schema import SchemaSnapshot

HAS_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))


@pytest.fixture(scope="session")
def company_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grid_serve.text2sql import example_database

    return example_database(tmp_path_factory.mktemp("company"))


@pytest.fixture(scope="session")
def schema(company_db: Path) -> SchemaSnapshot:
    return SchemaSnapshot.from_sqlite(company_db)


@pytest.fixture(scope="session")
def policy(schema: SchemaSnapshot) -> PolicyBundle:
    return example_policy(schema)


@pytest.fixture(scope="session")
def lm() -> Iterator[Any]:
    """SmolLM2-135M-Instruct (a :class:`grid_serve.model.LoadedModel`)."""
    if not HAS_TORCH:
        pytest.skip("torch and transformers are not installed (the `serve` dependency group)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    from grid_serve.model import load_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield load_model()
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def engines(lm: Any, schema: SchemaSnapshot, policy: PolicyBundle) -> Any:
    """The example policy's role engines over SmolLM2's vocabulary (one shared trie and T2)."""
    from grid_serve.text2sql import RoleEngines

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ByteIncompleteWarning)
        return RoleEngines(schema, policy, lm.vocab)


@pytest.fixture(scope="session")
def writes() -> Callable[[Any, bytes], bool]:
    """``writes(engine, sql)``: whether a fresh guide of ``engine`` takes ``sql`` one
    byte token at a time and may then end (EOS legal): ``sql`` is a statement of the
    engine's language. The vocabulary must spell every byte of ``sql`` alone."""

    def check(engine: Any, sql: bytes) -> bool:
        ids = {b: i for i, b in enumerate(engine.vocab.token_bytes) if len(b) == 1}
        guide = engine.guide(audit=False)
        tokens = [ids[bytes([c])] for c in sql]
        if guide.validate_tokens(tokens) != len(tokens):
            return False
        guide.accept_tokens(tokens)
        return bool(guide.eos_allowed())

    return check


@pytest.fixture
def answer_with(lm: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``answer_with(sql)``: ``grid ask`` loads the test's model and, in place of
    the model's statement, gets ``sql`` as its one attempt, with an empty sealed
    audit log (so what follows the decode, checking and running, is tested)."""
    from types import SimpleNamespace

    import grid_serve.model
    from grid_core.audit import AuditLog
    from grid_serve import text2sql

    def answer(sql: str) -> None:
        def fixed(decode: Any, engines: Any, role: str, retries: int = 1) -> tuple[Any, ...]:
            log = AuditLog()
            log.close("eos", engines[role].engine.fingerprints(), {"mode": 1})
            return (text2sql.Attempt(SimpleNamespace(audit=log), sql, ()),)  # type: ignore[arg-type]

        monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
        monkeypatch.setattr(text2sql, "answer", fixed)  # the role's language
        monkeypatch.setattr(text2sql, "answer_covering", fixed)  # the default's, where it serves

    return answer


@pytest.fixture(scope="session")
def scripted() -> Callable[[bytes, Any], Any]:
    """``scripted(target, vocab)``: logits that write ``target`` under greedy
    decoding (:func:`scripted_logits`)."""
    return scripted_logits


def scripted_logits(target: bytes, vocab: Any) -> Any:
    """Logits that write ``target`` under greedy decoding: each token whose spelling is a
    prefix of what is left scores its length, EOS wins once nothing is left, every other
    token is -inf (a given first statement, decoded under the real guide; never a
    stand-in for the model)."""
    spell, eos = vocab.token_bytes, set(vocab.eos_ids)

    def logits(tokens: Sequence[int]) -> list[float]:
        rest = target[len(b"".join(spell[t] for t in tokens if t not in eos)) :]
        if not rest:
            return [1.0 if i in eos else -math.inf for i in range(vocab.n_vocab)]
        return [
            float(len(spell[i])) if i not in eos and rest.startswith(spell[i]) else -math.inf
            for i in range(vocab.n_vocab)
        ]

    return logits
