"""The kernels' Thompson builder (``grid_kernels.thompson``) against grid-core's.

``grid_core.regex_bytes`` writes each pattern as a *pattern program* and builds
its NFA with the kernels when they are loaded, else with the Python reference
builder (``_Thompson``). The two must give the same NFA, state for state (the
flat arrays, the byte-set rows, the start, the final state and the width), or
the same refusal with the same message: the union DFA, its fingerprint and
every error a user sees then cannot depend on which builder ran.

The patterns: the hand-picked ones of ``test_regex_bytes.py``, refusals, the
terminals of the JSON grammars, and random patterns with counted repeats,
classes, folds and alternations. ``test_regex_bytes.py`` checks the language of
the NFAs against Python's ``re`` (on whichever builder the environment has).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark.utils import get_regexp_width
from test_regex_bytes import PATTERNS

from grid_core import regex_bytes
from grid_core.errors import PatternError
from grid_core.grammar import load_grammar
from grid_core.jsonschema import json_object_grammar, schema_grammar

grid_kernels = pytest.importorskip("grid_kernels", reason="grid-kernels is not installed")


def built(pattern: str, native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The uncached NFA of ``pattern`` by one builder, as plain values, or its error's text."""
    monkeypatch.setenv("GRID_KERNELS", "1" if native else "0")
    try:
        nfa = regex_bytes._compile("T", pattern)
    except PatternError as e:
        return str(e)
    arrays = (nfa.eps_len, nfa.eps_targets, nfa.edge_mask, nfa.edge_target)
    assert all(a.typecode == "i" for a in arrays)
    return (
        nfa.n_states,
        nfa.start,
        nfa.final,
        *(a.tolist() for a in arrays),
        nfa.mask_rows,
        nfa.max_width,
    )


def assert_same(pattern: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    native = built(pattern, True, monkeypatch)
    python = built(pattern, False, monkeypatch)
    assert native == python, pattern
    return native


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_hand_picked_patterns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = assert_same(PATTERNS[name], monkeypatch)
    assert not isinstance(out, str)


REFUSED = {
    "a*": "the pattern matches the empty string",
    "(?:ab|c?)": "the pattern matches the empty string",
    r"[^\x00-\xff]": "the pattern matches no byte string (its language is empty)",
    r"a[^\x00-\xff]b": "the pattern matches no byte string (its language is empty)",
    "a{50000}": f"the pattern needs more than {regex_bytes.MAX_NFA_STATES} NFA states",
    "(?:[ab]{400}){300}": f"the pattern needs more than {regex_bytes.MAX_NFA_STATES} NFA states",
    "x{4000000000}": f"the pattern needs more than {regex_bytes.MAX_NFA_STATES} NFA states",
    r"a{2,4000000000}": f"the pattern needs more than {regex_bytes.MAX_NFA_STATES} NFA states",
}


@pytest.mark.parametrize("pattern", sorted(REFUSED))
def test_refusals_are_the_same(pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = assert_same(pattern, monkeypatch)
    assert isinstance(out, str) and out.endswith(REFUSED[pattern]), out


def test_dead_edges_are_trimmed_by_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """``a[^\\x00-\\xff]b|ac``: the first alternative dies after ``a``; its ``b`` edge
    is trimmed and its byte set is not among the rows."""
    *_head, rows, width = assert_same(r"a[^\x00-\xff]b|ac", monkeypatch)
    masks = {int.from_bytes(rows[i : i + 32], "little") for i in range(0, len(rows), 32)}
    assert masks == {1 << ord("a"), 1 << ord("c")}
    assert width == 3


def test_json_grammar_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "tags": {"type": "array", "items": {"enum": ["a", "b\u00e9", "c"]}},
            "n": {"type": "integer", "minimum": 3, "maximum": 1200},
        },
        "additionalProperties": {"type": "number"},
    }
    terminals = [
        t.pattern
        for text in (json_object_grammar(whitespace=2), schema_grammar(schema))
        for t in load_grammar(text, "user").terminals
    ]
    assert len(terminals) > 10
    for pattern in terminals:
        assert not isinstance(assert_same(pattern, monkeypatch), str)


ATOMS = st.sampled_from(
    [
        "a", "b", r"\.", "[a-c]", "[^ab]", r"\d", r"\w", r"\s", ".", r"\xff",
        r"[\x80-\xbf]", "(?i:a)", "(?i:[k-m])", "(?s:.)", "[^\\x00-\\xff]", "(?:)",
    ]
)  # fmt: skip
QUANTIFIERS = ["*", "+", "?", "{2}", "{1,3}", "{0,2}", "+?", "{0}", "{3,}", "{2,2}"]
REGEXES = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]}|{p[2]})"),
        st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda p: f"(?:{p[0]}){p[1]}"),
        inner.map(lambda p: f"(?i:{p})"),
        inner.map(lambda p: f"({p})"),
    ),
    max_leaves=10,
)


@settings(derandomize=True, deadline=None, max_examples=300)
@given(pattern=REGEXES)
def test_random_patterns(pattern: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        assert_same(pattern, mp)


@settings(derandomize=True, deadline=None, max_examples=100)
@given(pattern=REGEXES)
def test_width_is_larks(pattern: str) -> None:
    """The width kept with the NFA is lark's (``Terminal.tie_key`` reads it)."""
    try:
        nfa = regex_bytes.compile_pattern("T", pattern)
    except PatternError:
        return
    assert nfa.max_width == int(get_regexp_width(pattern)[1])


@pytest.mark.parametrize(
    "program",
    [
        [1, 2, 0, 0],  # a sequence of two nodes holding one
        [1, 1, 0, 1],  # a mask row past the table
        [1, 1, 9, 0],  # an unknown node
        [1, 1, 0, 0, 0, 0],  # nodes after the pattern's sequence
        [0, 0],  # not a sequence
        [1, 1, 3, 2, 1, 1, 0],  # a repeat {2,1}
        [1, -1],  # a negative length
    ],
)
def test_a_malformed_program_is_a_value_error(program: list[int]) -> None:
    row = (1 << ord("a")).to_bytes(32, "little")
    with pytest.raises(ValueError, match="pattern program"):
        grid_kernels.thompson(program, row, 100)
    with pytest.raises(ValueError, match="32-byte rows"):
        grid_kernels.thompson([1, 1, 0, 0], row[:31], 100)
