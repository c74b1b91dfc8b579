"""grid_core.fingerprint: the canonical encoding, byte for byte (worked out by hand)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def reference(value: object) -> bytes:
    """The encoding as the module header states it, with no fast path."""
    if value is None:
        return b"N"
    if value is True or value is False:
        return b"T" if value else b"F"
    if isinstance(value, int):
        body = str(value).encode()
        return b"i" + length(len(body), 4) + body
    if isinstance(value, str):
        return b"s" + length(len(value.encode())) + value.encode()
    if isinstance(value, bytes):
        return b"b" + length(len(value)) + value
    if isinstance(value, tuple | list):
        return b"l" + length(len(value)) + b"".join(reference(v) for v in value)
    if isinstance(value, frozenset):
        items = sorted(reference(v) for v in value)
        return b"S" + length(len(items)) + b"".join(items)
    assert isinstance(value, dict)
    pairs = sorted((reference(k), reference(v)) for k, v in value.items())
    return b"D" + length(len(pairs)) + b"".join(k + v for k, v in pairs)


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.binary(max_size=4)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.frozensets(_scalars, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_the_fast_paths_write_the_reference_bytes(value: object) -> None:
    """Nested sequences take _encode_sequence's inline cases; every value's bytes are
    still the header's encoding."""
    assert canonical(value) == reference(value)


def test_a_grammars_fingerprint_is_that_of_its_plain_value() -> None:
    """Grammar.fingerprint encodes its terminals once per terminal set; the digest is
    the one of the plain (start, terminals, rules) value."""
    from grid_core.grammar import Grammar, load_grammar

    def plain(g: Grammar) -> object:
        return (
            "grid.grammar.v1",
            g.start,
            [(t.name, t.pattern, t.priority, t.ignored, t.literal) for t in g.terminals],
            [(r.origin, r.expansion) for r in g.rules],
        )

    g = load_grammar('start: A B?\nA: "a"\nB: /b+/\n%ignore " "\n', "toy")
    assert g.fingerprint == fingerprint(plain(g))
    assert g.renamed("other").fingerprint == g.fingerprint
    # A projection reuses its parent's rules and their encodings (Rule.encoded).
    projected = g.drop_terminals(["B"], "no-b")
    assert projected.fingerprint == fingerprint(plain(projected)) != g.fingerprint


@given(st.lists(_values, max_size=6), st.integers(0, 6))
def test_a_prefix_then_its_tail_is_the_whole_tuples_fingerprint(
    items: list[object], cut: int
) -> None:
    """``Prefix`` keeps the hash state after a tuple's first items; with the rest
    appended, the digest is the whole tuple's (grammar and lexicon fingerprints
    rely on it to hash a dialect's terminals once)."""
    from grid_core.fingerprint import Prefix

    cut = min(cut, len(items))
    prefix = Prefix(len(items), *items[:cut])
    assert prefix.fingerprint(*items[cut:]) == fingerprint(tuple(items))
    assert prefix.fingerprint(*items[cut:]) == prefix.fingerprint(*items[cut:])  # reusable


def test_a_lexicons_fingerprint_is_that_of_its_plain_value() -> None:
    """The lexicon's fingerprint hashes its terminals once per terminal set; the
    digest is the one of the plain (tag, [(name, pattern)...], {name: words}) value."""
    from grid_core.dfa import build_union_dfa
    from grid_core.grammar import load_grammar
    from grid_core.lexicon import build_lexicon

    g = load_grammar('start: "select" NAME\nNAME: /[a-z]+/\n%ignore " "\n', "toy")
    dfa = build_union_dfa([(t.name, t.pattern) for t in g.terminals])
    lexicon = build_lexicon(g, dfa, {"NAME": [b"users", b"orders"]})
    plain = (
        "grid.lexicon.v1",
        [(t.name, t.pattern) for t in g.terminals],
        {"NAME": [b"orders", b"users"]},
    )
    assert lexicon.fingerprint == fingerprint(plain)


@given(st.lists(_values, max_size=8))
def test_a_sequence_of_encoded_values_is_the_lists_encoding(items: list[object]) -> None:
    """``Encoded.sequence`` joins its items' bytes into the list's own encoding
    (``Grammar.fingerprint`` relies on it for its rules)."""
    from grid_core.fingerprint import Encoded, canonical

    joined = Encoded.sequence([Encoded(x) for x in items])
    assert joined.data == canonical(list(items)) == canonical(tuple(items))
    assert fingerprint(("tag", joined)) == fingerprint(("tag", list(items)))


@given(st.lists(st.binary(max_size=300), max_size=12))
def test_byte_strings_are_the_lists_encoding(items: list[bytes]) -> None:
    """``Encoded.byte_strings`` writes a list of bytes as ``canonical`` does, words
    of 256 bytes and more and the empty word included (``lexicon_fingerprint``
    relies on it for its word lists)."""
    from grid_core.fingerprint import Encoded

    assert Encoded.byte_strings(items).data == canonical(items) == canonical(tuple(items))
