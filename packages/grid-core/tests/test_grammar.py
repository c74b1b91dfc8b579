"""The grammar pipeline: loading, projection, LALR(1), errors, fingerprints."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_core.dfa import ByteDFA, build_union_dfa
from grid_core.errors import (
    EmptyLanguageError,
    GrammarError,
    LALRConflictError,
    UndefinedSymbolError,
)
from grid_core.grammar import Grammar, Rule, Terminal, TerminalSet, load_grammar

CRUD = (Path(__file__).parent / "grammars" / "crud.lark").read_text()


@pytest.fixture(scope="module")
def crud() -> Grammar:
    return load_grammar(CRUD, "crud")


def test_terminal_numbering_is_frozen_across_projections(crud: Grammar) -> None:
    analyst = crud.drop_terminals(["INSERT", "UPDATE", "DELETE"], "analyst")
    assert analyst.terminals == crud.terminals
    assert analyst.terminal_id("INSERT") == crud.terminal_id("INSERT")
    assert len(analyst.rules) < len(crud.rules)
    assert analyst.fingerprint != crud.fingerprint


def test_projection_is_reduced(crud: Grammar) -> None:
    analyst = crud.drop_terminals(["INSERT", "UPDATE", "DELETE"], "analyst")
    assert "insert_stmt" not in analyst.nonterminals
    assert "assignment" not in analyst.nonterminals  # unreachable once update is gone
    # Every nonterminal left is generating and reachable: a second pass changes nothing.
    again = analyst.project(lambda r: True, "analyst")
    assert again.rules == analyst.rules
    analyst.check_invariants()


def test_dropping_a_rule_drops_what_only_it_generated(crud: Grammar) -> None:
    # Without `value: NUMBER | STRING`, conditions, inserts and updates cannot be finished.
    g = crud.project(lambda r: r.origin != "value", "no-values")
    assert "condition" not in g.nonterminals
    assert {r.origin for r in g.rules} >= {"select_stmt", "delete_stmt"}
    assert not any("where_clause" in r.expansion for r in g.rules)


def test_empty_projection_names_the_role(crud: Grammar) -> None:
    with pytest.raises(EmptyLanguageError) as info:
        crud.drop_terminals(["SEMICOLON"], "auditor")
    assert info.value.role == "auditor"
    assert "auditor" in str(info.value)


def test_undefined_symbol_is_named() -> None:
    with pytest.raises(UndefinedSymbolError) as info:
        load_grammar('start: item ";"\n')
    assert info.value.symbol == "item"
    assert info.value.rule == "start"


def test_a_start_symbol_that_says_nothing_is_refused_at_load() -> None:
    """An unknown start rule, or one with no terminating derivation, is a
    GrammarError naming it, not an engine whose first mask is empty."""
    with pytest.raises(GrammarError, match="no rule defines the start symbol 'nope'"):
        load_grammar('start: "a"\n', start="nope")
    with pytest.raises(GrammarError, match="the start symbol 'start' derives no sentence"):
        load_grammar('start: a\na: a "x"\n')
    assert len(load_grammar('start: "a" | b\nb: b "x"\n').rules) == 3  # b is useless, not fatal


def test_lalr_conflict_names_both_items_and_the_lookahead() -> None:
    dangling = """
start: stmt
stmt: IF COND stmt | IF COND stmt ELSE stmt | OTHER
IF: "if"
ELSE: "else"
COND: "c"
OTHER: "x"
"""
    with pytest.raises(LALRConflictError) as info:
        load_grammar(dangling).lalr()
    e = info.value
    assert e.kind == "shift/reduce"
    assert e.lookahead == "ELSE"
    assert "IF COND stmt ." in e.item1 + e.item2
    assert "IF COND stmt . ELSE stmt" in e.item1 + e.item2


def test_to_lark_round_trips(crud: Grammar) -> None:
    again = load_grammar(crud.to_lark(), "crud")
    assert again.fingerprint == crud.fingerprint
    tricky = load_grammar(
        'start: A B C D\nA: /[\\/]+\\//\nB: "\\t\\n"\nC: /\\x41\\u0042[^\\n]/\nD: /a\\\\b/\n'
    )
    again = load_grammar(tricky.to_lark())
    # The spelling of a pattern may change ("\\<tab>" becomes a tab), its language may not:
    # the minimal union DFA's fingerprint depends only on names and languages.
    assert _dfa(again).fingerprint == _dfa(tricky).fingerprint
    assert load_grammar(again.to_lark()).fingerprint == again.fingerprint


def _dfa(g: Grammar) -> ByteDFA:
    return build_union_dfa([(t.name, t.pattern) for t in g.terminals])


CRUD_PATH = str(Path(__file__).parent / "grammars" / "crud.lark")
_PRINT_FINGERPRINTS = f"""
from pathlib import Path
from grid_core.grammar import load_grammar
g = load_grammar(Path({CRUD_PATH!r}).read_text(), "crud")
a = g.drop_terminals(["INSERT"], "analyst")
print(g.fingerprint, a.fingerprint, g.lalr().fingerprint, a.lalr().fingerprint)
"""


def test_fingerprints_are_stable_across_processes(crud: Grammar) -> None:
    analyst = crud.drop_terminals(["INSERT"], "analyst")
    here = f"{crud.fingerprint} {analyst.fingerprint} {crud.lalr().fingerprint} "
    here += analyst.lalr().fingerprint
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", _PRINT_FINGERPRINTS],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        )
        assert out.stdout.strip() == here


def _reduced_by_fixpoint(g: Grammar, rules: list[Rule]) -> tuple[Rule, ...] | None:
    """The reduced rules as the definition states them (generating, then reachable
    from start), by naive fixpoints; None when start generates nothing."""
    terminals = {t.name for t in g.terminals}
    generating: set[str] = set()
    while True:
        more = {
            r.origin for r in rules if all(s in terminals or s in generating for s in r.expansion)
        }
        if more <= generating:
            break
        generating |= more
    if g.start not in generating:
        return None
    rules = [
        r
        for r in rules
        if all(s in terminals or s in generating for s in r.expansion) and r.origin in generating
    ]
    reachable = {g.start}
    while True:
        more = {s for r in rules if r.origin in reachable for s in r.expansion} - terminals
        if more <= reachable:
            break
        reachable |= more
    return tuple(r for r in rules if r.origin in reachable)


_SYMBOLS = ["start", "a", "b", "c", "d", "X", "Y"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_SYMBOLS[:5]), st.lists(st.sampled_from(_SYMBOLS), max_size=3)),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_projection_reduces_like_the_naive_fixpoints(
    productions: list[tuple[str, list[str]]], data: st.DataObject
) -> None:
    """Grammar.project's linear-time generating and reachable sets give the rules the
    naive fixpoints give, in the same order (cycles, unproductive and unreachable
    rules, rules the projection drops), and so does a projection of that
    projection (reduced over the first grammar's rule index, not its own)."""
    terminals = (Terminal("X", "x", 0, False), Terminal("Y", "y", 0, False))
    rules = tuple(Rule(o, tuple(e)) for o, e in productions)
    g = Grammar("g", terminals, rules, "start")
    for level in ("role", "narrow"):
        keep = [data.draw(st.booleans()) for _ in g.rules]
        kept = {id(r) for r, k in zip(g.rules, keep, strict=True) if k}
        expected = _reduced_by_fixpoint(g, [r for r in g.rules if id(r) in kept])
        if expected is None:
            with pytest.raises(EmptyLanguageError):
                g.project(lambda r, kept=kept: id(r) in kept, level)
            return
        g = g.project(lambda r, kept=kept: id(r) in kept, level)
        assert g.rules == expected
        assert all(x is y for x, y in zip(g.rules, expected, strict=True))


def test_a_grammars_terminals_are_one_terminal_set(crud: Grammar) -> None:
    """Any tuple of terminals becomes a ``TerminalSet`` that hashes and compares as
    the tuple (memos key on it) and pickles without its per-process hash; its
    projections share it."""
    plain = tuple(crud.terminals)
    g = Grammar("g", plain, crud.rules, crud.start)
    assert type(g.terminals) is TerminalSet and g.terminals == plain
    assert hash(g.terminals) == hash(plain) and g.terminal_id(plain[3].name) == 3
    assert crud.drop_terminals(["INSERT"], "analyst").terminals is crud.terminals
    copy = pickle.loads(pickle.dumps(crud.terminals))
    assert type(copy) is TerminalSet and copy == crud.terminals
    assert "_hash" not in copy.__dict__ and hash(copy) == hash(plain)


def test_shiftable_by_columns_is_the_union_of_the_rows(crud: Grammar) -> None:
    """``LalrTables.shiftable`` scans the action table column by column; it is the
    set of terminals in some state's row (``terms``, computed per state on use)."""
    for grammar in (crud, crud.drop_terminals(["INSERT"], "analyst")):
        tables = grammar.lalr()
        rows = [tables.terms(s) for s in range(tables.n_states)]
        assert tuple(rows) == tables.row_terms
        union = {t for row in rows for t in row if t < tables.n_terminals}
        assert tables.shiftable == sum(1 << t for t in union)


def test_imports_read_lark_library_grammars_only() -> None:
    """``%import`` of anything but lark's own grammars is refused by name before it is
    read (it opened files relative to the serving process's directory: a
    FileNotFoundError or lark's AssertionError); ``common`` still imports."""
    for module in ("foo.bar", "tests.grammars.crud.x", "os.path"):
        with pytest.raises(GrammarError, match=f"%import {module}: only lark's own"):
            load_grammar(f"start: X\n%import {module}\n")
    grammar = load_grammar('start: NUMBER "!"\n%import common.NUMBER\n')
    assert "NUMBER" in [t.name for t in grammar.terminals]


def test_a_grammar_too_deep_or_too_wide_is_a_grammar_error() -> None:
    """A thousand nested groups (a RecursionError in lark's reader) and a choice of
    more terminals than a union DFA's fingerprint can write (a ValueError from int
    to str) are GrammarErrors naming the problem."""
    from grid_core.dfa import MAX_TERMINALS

    with pytest.raises(GrammarError, match="nests too deeply"):
        load_grammar("start: " + "(" * 1000 + '"a"' + ")" * 1000 + "\n")
    terminals = [(f"T{i}", f"w{i}") for i in range(MAX_TERMINALS + 1)]
    with pytest.raises(GrammarError, match="terminals: a union DFA takes at most"):
        build_union_dfa(terminals)
