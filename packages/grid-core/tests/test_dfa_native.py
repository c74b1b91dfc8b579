"""The union DFA built by the kernels (``grid_kernels.union_dfa``) against the
Python stages of :mod:`grid_core.dfa`: the same tables byte for byte.

Every case compiles its terminal NFAs once and builds the union twice, with
``GRID_KERNELS=1`` and ``=0``; the two :class:`ByteDFA` must agree on
``n_states``, ``trans``, ``accept``, ``live`` and the fingerprint, or both
raise the same :class:`GrammarError`. Cases: the differential union and the
SQL-like lexicon of ``test_dfa``, the toy CRUD grammar, the JSON-schema
grammars of ``test_jsonschema`` (and ``json_object``), both SQL dialects (when
grid-sql is installed), random regex sets from hypothesis, and the
``max_states`` bound at its exact threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_dfa import UNION, sql_terminals
from test_jsonschema import SCHEMAS
from toy import CRUD

from grid_core import kernels
from grid_core.dfa import MAX_DFA_STATES, ByteDFA, _byte_classes, _subset_construction, _UnionNFA
from grid_core.dfa import union_of_nfas as union_dfa
from grid_core.errors import GrammarError, PatternError
from grid_core.grammar import Grammar, load_grammar
from grid_core.jsonschema import json_object_grammar, schema_grammar
from grid_core.regex_bytes import ByteNFA, compile_pattern

try:
    import grid_kernels
except ImportError:  # pragma: no cover - depends on the environment
    grid_kernels = None

pytestmark = pytest.mark.skipif(
    grid_kernels is None, reason="grid-kernels is not installed: no native DFA to compare"
)


def build_both(
    names: Sequence[str], nfas: Sequence[ByteNFA], max_states: int = MAX_DFA_STATES
) -> ByteDFA:
    """The union by the kernels and by Python: identical tables (returned), or the
    same error (raised)."""
    outcomes: list[ByteDFA | GrammarError] = []
    for switch in ("1", "0"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GRID_KERNELS", switch)
            assert (kernels.load() is not None) == (switch == "1")
            try:
                outcomes.append(union_dfa(names, nfas, max_states))
            except GrammarError as e:
                outcomes.append(e)
    native, python = outcomes
    if isinstance(python, GrammarError):
        assert type(native) is type(python) and str(native) == str(python)
        raise python
    assert isinstance(native, ByteDFA)
    assert native.n_states == python.n_states
    assert native.trans.typecode == python.trans.typecode == "i"
    assert native.trans == python.trans
    assert native.accept == python.accept
    assert native.live == python.live
    assert native.fingerprint == python.fingerprint
    native.check_invariants()
    return python


def compiled(terminals: Sequence[tuple[str, str]]) -> tuple[list[str], list[ByteNFA]]:
    return [n for n, _ in terminals], [compile_pattern(n, p) for n, p in terminals]


def of_grammar(grammar: Grammar) -> ByteDFA:
    """The union DFA of ``grammar``'s terminals (as ``Engine`` builds it)."""
    return build_both(*compiled([(t.name, t.pattern) for t in grammar.terminals]))


def test_the_differential_union() -> None:
    assert build_both(*compiled(UNION)).n_states > 100


def test_the_sql_like_lexicon() -> None:
    assert build_both(*compiled(sql_terminals())).n_states > 500


def test_the_toy_crud_grammar() -> None:
    assert of_grammar(CRUD).n_states > 10


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_grammars(name: str) -> None:
    text = schema_grammar(SCHEMAS[name])
    of_grammar(load_grammar(text, "user").project(lambda _: True, "user"))


def test_json_object_grammar() -> None:
    of_grammar(load_grammar(json_object_grammar(whitespace=2), "user"))


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_sql_dialects(dialect: str) -> None:
    dialects = pytest.importorskip("grid_sql.dialects", reason="grid-sql is not installed")
    grammar = load_grammar(dialects.get_dialect(dialect).grammar_text, dialect)
    assert grammar.n_terminals > 100
    assert of_grammar(grammar).n_states > 500


# -- random regex sets -------------------------------------------------------------------

ATOMS = st.sampled_from(
    [
        "a", "b", "c", "x", r"\.", "[a-c]", "[^ab]", "[b-y]", r"\d", r"\w", r"\s", ".",
        r"\xff", r"[\x80-\xbf]", "(?i:a)", "(?i:[k-m])", "(?s:.)",
    ]
)  # fmt: skip
REGEXES = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "+?"])).map(
            lambda p: f"(?:{p[0]}){p[1]}"
        ),
    ),
    max_leaves=8,
)


@settings(derandomize=True, deadline=None, max_examples=150)
@given(patterns=st.lists(REGEXES, min_size=1, max_size=8))
def test_random_regex_sets(patterns: list[str]) -> None:
    nfas = []
    for pattern in patterns:
        try:
            nfas.append(compile_pattern(f"T{len(nfas)}", pattern))
        except PatternError:  # matches the empty string
            continue
    assume(nfas)
    build_both([f"T{i}" for i in range(len(nfas))], nfas)


# -- the max_states bound ------------------------------------------------------------------


def subset_count(nfas: Sequence[ByteNFA]) -> int:
    """States of the subset construction (before minimisation): what ``max_states`` bounds."""
    union = _UnionNFA(nfas)
    classes = _byte_classes([mask for mask, _ in union.edges if mask])
    return len(_subset_construction(union, classes, MAX_DFA_STATES)[0])


@pytest.mark.parametrize(
    "terminals",
    [
        pytest.param([("T", "[ab]*a[ab]{5}")], id="blow_up"),
        pytest.param([("T", "ab|cb")], id="merged_by_minimisation"),
        pytest.param(UNION, id="union"),
    ],
)
def test_max_states_at_its_threshold(terminals: list[tuple[str, str]]) -> None:
    names, nfas = compiled(terminals)
    count = subset_count(nfas)
    assert build_both(names, nfas, max_states=count).n_states <= count
    with pytest.raises(GrammarError, match=rf"^the union DFA needs more than {count - 1} states$"):
        build_both(names, nfas, max_states=count - 1)


def test_state_blow_up_is_the_same_error() -> None:
    with pytest.raises(GrammarError, match=r"^the union DFA needs more than 1000 states$"):
        build_both(*compiled([("T", "[ab]*a[ab]{11}")]), max_states=1000)
