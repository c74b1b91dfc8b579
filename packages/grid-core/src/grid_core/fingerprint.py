"""Deterministic content fingerprints for every immutable artifact.

``fingerprint(obj)`` is the BLAKE2b-128 hex digest of a canonical, injective
encoding of ``obj``: the same value gives the same fingerprint in any process on
any machine (no ``hash()``, no dict order, no ``repr`` of floats). Supported
values are ``None``, ``bool``, ``int``, ``str``, ``bytes``, and tuples, lists,
frozensets, sets and dicts of them (sets and dict keys are sorted by their
encoding).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any


class Encoded:
    """A value encoded once (``canonical(value)``): inside another value it encodes
    as those bytes, so a large part that many fingerprints share (a grammar's
    terminal patterns) is encoded once. The fingerprint is the value's own."""

    __slots__ = ("data",)

    def __init__(self, value: Any) -> None:
        self.data = canonical(value)

    @classmethod
    def sequence(cls, items: Sequence[Encoded]) -> Encoded:
        """The list of ``items``' values, encoded: ``canonical`` of that list, the
        same bytes, joined from the items' own (a grammar's rules, encoded once
        each, are about 400 of them)."""
        out = cls.__new__(cls)
        out.data = b"l" + len(items).to_bytes(8, "big") + b"".join(i.data for i in items)
        return out

    @classmethod
    def byte_strings(cls, items: Sequence[bytes]) -> Encoded:
        """The list ``items`` (of ``bytes``), encoded: ``canonical(list(items))``,
        written without a Python step per item (a lexicon's word lists, hundreds of
        words, are fingerprinted per role)."""
        parts: list[bytes] = [b""] * (2 * len(items))
        parts[0::2] = map(_BYTES_HEADS.__getitem__, map(len, items))
        parts[1::2] = items
        out = cls.__new__(cls)
        out.data = b"l" + len(items).to_bytes(8, "big") + b"".join(parts)
        return out


class Prefix:
    """The first items of a tuple fingerprinted many times with different tails
    (a dialect's terminals, about 100 KB encoded, ahead of each projection's
    rules or lexicon): the hash state after them is kept, so that
    ``Prefix(n, *head).fingerprint(*tail) == fingerprint((*head, *tail))`` for
    ``n == len(head) + len(tail)`` hashes only the tail's bytes."""

    __slots__ = ("_length", "_state")

    def __init__(self, length: int, *head: Any) -> None:
        self._length = length
        self._state = hashlib.blake2b(
            b"l" + length.to_bytes(8, "big") + b"".join(canonical(x) for x in head),
            digest_size=16,
        )
        self._length -= len(head)

    def fingerprint(self, *tail: Any) -> str:
        assert len(tail) == self._length, "the tail completes the tuple the prefix began"
        state = self._state.copy()
        for item in tail:
            state.update(_written(item))
        return state.hexdigest()


class _BytesHeads(dict[int, bytes]):
    """``n`` -> what ``canonical`` writes ahead of ``n`` bytes, made on first use."""

    def __missing__(self, n: int) -> bytes:
        self[n] = head = b"b" + n.to_bytes(8, "big")
        return head


_BYTES_HEADS = _BytesHeads()


def canonical(obj: Any) -> bytes:
    """Injective, type-tagged, length-prefixed encoding of ``obj``."""
    if type(obj) is str:  # the same bytes as _encode's str case, without its dispatch:
        body: bytes = obj.encode("utf-8")  # dict keys and seal fields are mostly strings
        return b"s" + len(body).to_bytes(8, "big") + body
    out = bytearray()
    _encode(obj, out)
    return bytes(out)


def _encode(obj: Any, out: bytearray) -> None:
    if obj is None:
        out += b"N"
    elif type(obj) is Encoded:
        out += obj.data
    elif obj is True or obj is False:
        out += b"T" if obj else b"F"
    elif isinstance(obj, int):
        body = str(obj).encode()
        out += b"i" + len(body).to_bytes(4, "big") + body
    elif isinstance(obj, str):
        body = obj.encode("utf-8")
        out += b"s" + len(body).to_bytes(8, "big") + body
    elif isinstance(obj, bytes | bytearray | memoryview):
        body = bytes(obj)
        out += b"b" + len(body).to_bytes(8, "big")
        out += body
    elif isinstance(obj, tuple | list):
        _encode_sequence(obj, out)
    elif isinstance(obj, set | frozenset):
        items = sorted(canonical(x) for x in obj)
        out += b"S" + len(items).to_bytes(8, "big")
        for item in items:
            out += item
    elif isinstance(obj, Mapping):
        pairs = sorted((canonical(k), canonical(v)) for k, v in obj.items())
        out += b"D" + len(pairs).to_bytes(8, "big")
        for k, v in pairs:
            out += k + v
    else:
        raise TypeError(f"cannot fingerprint a value of type {type(obj).__name__}")


def _encode_sequence(obj: tuple[Any, ...] | list[Any], out: bytearray) -> None:
    """_encode's tuple and list case."""
    out += b"l" + len(obj).to_bytes(8, "big")
    for item in obj:
        # The int, str, bytes and sequence cases inline (the same bytes as
        # _encode's branches): tables are long lists of ints, grammars lists of
        # (name, (names...)) pairs.
        kind = type(item)
        if kind is str:
            body = item.encode("utf-8")
            out += b"s" + len(body).to_bytes(8, "big") + body
        elif kind is int:
            body = str(item).encode()
            out += b"i" + len(body).to_bytes(4, "big") + body
        elif kind is tuple or kind is list:
            _encode_sequence(item, out)
        elif kind is bytes:  # a lexicon's word lists, tables' arrays (no copy joined)
            out += b"b" + len(item).to_bytes(8, "big")
            out += item
        else:
            _encode(item, out)


def fingerprint(obj: Any) -> str:
    """BLAKE2b-128 hex digest of ``canonical(obj)``."""
    return hashlib.blake2b(_written(obj), digest_size=16).hexdigest()


def _written(obj: Any) -> bytes | bytearray:
    """``canonical(obj)``'s bytes, for a hash to read where they were written (a
    table's arrays are hundreds of KB: no copy into a ``bytes``)."""
    if type(obj) is str:
        return canonical(obj)
    out = bytearray()
    _encode(obj, out)
    return out
