"""``LalrTables``' accessors and ``check_invariants`` by hand (issue 14's mutation
campaign).

``test_lalr.py`` checks the construction against a reference and tampers with the
ACTION/GOTO cells; these checks pin what it leaves: each shape and range check of
``check_invariants`` on a table that breaks that one fact and nothing else (its
fingerprint refreshed, so no later check objects first), the display names of
``item_str`` and ``kernel``'s refusal of mismatched kernel arrays.
"""

from __future__ import annotations

import dataclasses
from array import array
from typing import Any

import pytest

from grid_core.lalr import LalrTables, build_lalr

# Symbols: a 0, $END 1, S 2, $start 3 (the start nonterminal has index 1, not 0).
# Rules: 0 $start -> S, 1 S -> a, 2 S -> a S (displayed as "pair").
PAIRS = (["a"], ["S", "$start"], [(1, (2,)), (0, (0,)), (0, (0, 2))], ["$start", "S", "pair"])


def tables() -> LalrTables:
    return build_lalr(*PAIRS)


def tampered(**changes: Any) -> LalrTables:
    """The tables with ``changes``, the fingerprint refreshed."""
    new = dataclasses.replace(tables(), **changes)
    object.__setattr__(new, "fingerprint", new._compute_fingerprint())
    return new


def test_the_tables_by_hand() -> None:
    t = tables()
    t.check_invariants()
    assert (t.n_terminals, t.n_nonterminals, t.n_states) == (1, 2, 4)
    assert list(t.rule_lhs) == [1, 0, 0]
    assert list(t.rule_rhs) == [2, 0, 0, 2] and list(t.rule_rhs_start) == [0, 1, 2, 4]
    assert [t.kernel(s) for s in range(4)] == [[(0, 0)], [(1, 1), (2, 1)], [(0, 1)], [(2, 2)]]


def test_item_str_names_the_rule_when_it_has_its_own_name() -> None:
    t = tables()
    assert t.item_str(2, 1) == "S: a . S -> pair"
    assert t.item_str(1, 1) == "S: a ."  # its name is its lhs'
    assert t.item_str(0, 0) == "$start: . S"
    plain = build_lalr(*PAIRS[:3])
    assert plain.item_str(2, 1) == "S: a . S"


def test_kernel_refuses_arrays_of_different_lengths() -> None:
    t = tables()
    short = dataclasses.replace(t, kernel_dot=array("i", t.kernel_dot[:-1]))
    assert short.kernel(0) == [(0, 0)]
    with pytest.raises(ValueError, match="shorter"):
        short.kernel(3)


def test_check_invariants_name_count() -> None:
    bad = tampered(nonterminal_names=("S", "$start", "T"))
    with pytest.raises(AssertionError):
        bad.check_invariants()


def test_check_invariants_goto_size() -> None:
    t = tables()
    bad = tampered(goto=array("i", [*t.goto, -1]))
    with pytest.raises(AssertionError):
        bad.check_invariants()


def test_check_invariants_first_rule_offset() -> None:
    # One unused symbol before the bodies: every offset one on, the first one not 0.
    t = tables()
    bad = tampered(
        rule_rhs=array("i", [0, *t.rule_rhs]),
        rule_rhs_start=array("i", [x + 1 for x in t.rule_rhs_start]),
    )
    assert [list(bad.rhs(r)) for r in range(3)] == [[2], [0], [0, 2]]
    with pytest.raises(AssertionError):
        bad.check_invariants()


def test_check_invariants_lhs_range() -> None:
    bad = tampered(rule_lhs=array("i", [1, 0, 2]))  # nonterminal 2 does not exist
    with pytest.raises(AssertionError):
        bad.check_invariants()


def test_check_invariants_end_in_a_body() -> None:
    t = tables()
    rhs = array("i", t.rule_rhs)
    rhs[3] = 1  # S -> a $END
    with pytest.raises(AssertionError, match=r"^rule 2$"):
        tampered(rule_rhs=rhs).check_invariants()


def test_check_invariants_start_symbol_on_a_left_side() -> None:
    # Rule 1 (S -> a) rewritten as $start -> a: the check on the left sides objects
    # first, with no message.
    with pytest.raises(AssertionError, match=r"\A\Z"):
        tampered(rule_lhs=array("i", [1, 1, 0])).check_invariants()


def test_check_invariants_start_symbol_in_a_body() -> None:
    t = tables()
    rhs = array("i", t.rule_rhs)
    rhs[3] = 3  # S -> a $start
    with pytest.raises(AssertionError, match=r"\A\Z"):
        tampered(rule_rhs=rhs).check_invariants()
