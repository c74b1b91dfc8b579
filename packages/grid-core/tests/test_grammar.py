"""The grammar pipeline: loading, projection, LALR(1), errors, fingerprints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grid_core.dfa import ByteDFA, build_union_dfa
from grid_core.errors import EmptyLanguageError, LALRConflictError, UndefinedSymbolError
from grid_core.grammar import Grammar, load_grammar

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
