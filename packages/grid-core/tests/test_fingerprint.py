"""grid_core.fingerprint: the canonical encoding, byte for byte (worked out by hand)."""

from __future__ import annotations

import pytest

from grid_core.fingerprint import canonical, fingerprint


def length(n: int, width: int = 8) -> bytes:
    return n.to_bytes(width, "big")


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        (None, b"N"),
        (True, b"T"),
        (0, b"i" + length(1, 4) + b"0"),
        (-12, b"i" + length(3, 4) + b"-12"),
        ("é", b"s" + length(2) + "é".encode()),
        (b"\x00", b"b" + length(1) + b"\x00"),
        # A list's ints are written inline (the fast path): the same bytes as alone;
        # a bool in a list stays a bool, an int subclass goes through the general path.
        (
            [7, True, -1, None],
            b"l" + length(4) + b"i" + length(1, 4) + b"7" + b"T"
            + b"i" + length(2, 4) + b"-1" + b"N",
        ),
        # A list's strs too; a str subclass goes through the general path, alike.
        (
            ("ab", type("Name", (str,), {})("é"), 5),
            b"l" + length(3) + b"s" + length(2) + b"ab" + b"s" + length(2) + "é".encode()
            + b"i" + length(1, 4) + b"5",
        ),
        ((1 << 64,), b"l" + length(1) + b"i" + length(20, 4) + str(1 << 64).encode()),
        ([[3]], b"l" + length(1) + b"l" + length(1) + b"i" + length(1, 4) + b"3"),
        ({"a": 1}, b"D" + length(1) + b"s" + length(1) + b"a" + b"i" + length(1, 4) + b"1"),
        (
            frozenset({2, 1}),
            b"S" + length(2) + b"i" + length(1, 4) + b"1" + b"i" + length(1, 4) + b"2",
        ),
    ],
)  # fmt: skip
def test_encoding(value: object, encoding: bytes) -> None:
    assert canonical(value) == encoding


def test_tuples_and_lists_encode_alike_and_types_are_refused() -> None:
    assert canonical((1, 2)) == canonical([1, 2])
    assert fingerprint((1, 2)) != fingerprint((1, True))
    with pytest.raises(TypeError, match="float"):
        canonical([1, 2.0])
