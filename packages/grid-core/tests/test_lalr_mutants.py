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

from grid_core import kernels
from grid_core.errors import GrammarError
from grid_core.lalr import LalrTables, _le_bytes, build_lalr

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


# The tables of PAIRS: terminals a (0) and $END (1), so w = 2; nonterminals S (0) and
# $start (1). State 0 --a--> 1 --a--> 1, 0 --S--> 2, 1 --S--> 3; ACTION cells are
# target + 1 (shift), -(rule + 1) (reduce), 0 (error).


def test_the_action_and_goto_cells_by_hand() -> None:
    t = tables()
    assert list(t.action) == [2, 0, 2, -2, 0, -1, 0, -3]
    assert list(t.goto) == [2, -1, 3, -1, -1, -1, -1, -1]
    assert list(t.state_symbol) == [-1, 0, 2, 2]


def test_check_invariants_state_symbol_length() -> None:
    t = tables()
    with pytest.raises(AssertionError, match=r"\A\Z"):
        tampered(state_symbol=array("i", [*t.state_symbol, 2])).check_invariants()


def test_check_invariants_kernel_start_length() -> None:
    # One offset more, equal to the last: every kernel reads the same, only the
    # length is wrong.
    t = tables()
    bad = tampered(kernel_start=array("i", [*t.kernel_start, t.kernel_start[-1]]))
    assert [bad.kernel(s) for s in range(4)] == [t.kernel(s) for s in range(4)]
    with pytest.raises(AssertionError, match=r"\A\Z"):
        bad.check_invariants()


def test_check_invariants_two_states_share_a_kernel() -> None:
    t = tables()
    rule, dot = array("i", t.kernel_rule), array("i", t.kernel_dot)
    rule[-1], dot[-1] = 0, 1  # state 3's kernel made state 2's
    with pytest.raises(AssertionError, match=r"^two states share a kernel$"):
        tampered(kernel_rule=rule, kernel_dot=dot).check_invariants()


def test_check_invariants_state_0_has_no_accessing_symbol() -> None:
    t = tables()
    symbols = array("i", t.state_symbol)
    symbols[0] = 0
    with pytest.raises(AssertionError, match=r"\A\Z"):
        tampered(state_symbol=symbols).check_invariants()


def permuted(perm: list[int]) -> LalrTables:
    """The tables with state ``perm[i]`` renumbered ``i`` (a consistent renaming)."""
    t = tables()
    w, n = t.n_terminals + 1, t.n_nonterminals
    new = {old: i for i, old in enumerate(perm)}
    action = array("i")
    goto = array("i")
    kernel_start, kernel_rule, kernel_dot = array("i", [0]), array("i"), array("i")
    for old in perm:
        for cell in t.action[old * w : old * w + w]:
            action.append(new[cell - 1] + 1 if cell > 0 else cell)
        for target in t.goto[old * n : old * n + n]:
            goto.append(new[target] if target >= 0 else target)
        for r, d in t.kernel(old):
            kernel_rule.append(r)
            kernel_dot.append(d)
        kernel_start.append(len(kernel_rule))
    symbols = array("i", [t.state_symbol[old] for old in perm])
    return tampered(
        action=action,
        goto=goto,
        state_symbol=symbols,
        kernel_start=kernel_start,
        kernel_rule=kernel_rule,
        kernel_dot=kernel_dot,
    )


def test_check_invariants_states_are_discovered_in_order() -> None:
    permuted([0, 1, 2, 3]).check_invariants()
    # States 1 and 3 swapped: state 1 (S -> a S .) is reached only from state 3.
    bad = permuted([0, 3, 2, 1])
    assert list(bad.goto) == [2, -1, -1, -1, -1, -1, 1, -1]
    with pytest.raises(AssertionError, match=r"^state 1 is not reached from an earlier state$"):
        bad.check_invariants()


def test_check_invariants_a_shift_into_state_0() -> None:
    # A shift (or a goto) into state 0 is in range; its kernel is the wrong one.
    t = tables()
    action = array("i", t.action)
    action[0] = 1
    with pytest.raises(AssertionError, match=r"^state 0 -> 0$"):
        tampered(action=action).check_invariants()
    goto = array("i", t.goto)
    goto[0] = 0
    with pytest.raises(AssertionError, match=r"^state 0 -> 0$"):
        tampered(goto=goto).check_invariants()


def test_check_invariants_a_shift_past_the_last_state() -> None:
    t = tables()
    action = array("i", t.action)
    action[0] = t.n_states + 1
    with pytest.raises(AssertionError, match=r"^state 0: transition out of range$"):
        tampered(action=action).check_invariants()


def test_check_invariants_a_stray_shift_into_state_0() -> None:
    # State 2 ($start: S .) shifts nothing: a shift on a (column 0) to state 0 is stray.
    t = tables()
    action = array("i", t.action)
    action[2 * 2 + 0] = 1
    with pytest.raises(AssertionError, match=r"^state 2: stray shift on column 0$"):
        tampered(action=action).check_invariants()


def test_check_invariants_rule_0_reduced_on_a_terminal() -> None:
    t = tables()
    action = array("i", t.action)
    action[2 * 2 + 0] = -1
    with pytest.raises(AssertionError, match=r"^rule 0 reduced on a terminal$"):
        tampered(action=action).check_invariants()


def test_check_invariants_fingerprint_mismatch() -> None:
    bad = dataclasses.replace(tables())
    bad.__dict__["fingerprint"] = "0" * 32
    with pytest.raises(AssertionError, match=r"^fingerprint mismatch$"):
        bad.check_invariants()


# ------------------------------------------------------------------ the grammar's errors


def test_grammar_errors_by_hand() -> None:
    a, s = ["a", "b"], ["S", "$start"]
    rules = [(1, (3,)), (0, (0,))]
    with pytest.raises(GrammarError) as err:
        build_lalr(["a", "b", "a", "b", "b", "c"], s, rules)
    assert str(err.value) == "symbol names must be distinct (and not $END): ['a', 'b']"
    with pytest.raises(GrammarError) as err:
        build_lalr(["$END"], s, rules)
    assert str(err.value) == "symbol names must be distinct (and not $END): ['$END']"
    with pytest.raises(GrammarError) as err:
        build_lalr(a, s, [])
    assert str(err.value) == "a grammar needs at least the augmented start rule"
    with pytest.raises(GrammarError) as err:
        build_lalr(a, s, rules, ["x"])
    assert str(err.value) == "1 rule names for 2 rules"


def test_an_empty_lookahead_is_no_error() -> None:
    # S -> A C | b, C -> C c, A -> a: C derives no sentence, so A (rule 3, and rule 1
    # in the second numbering) is followed by nothing: its reduce has no lookahead,
    # which is not rule 0's missing $END.
    terms, nts = ["a", "b", "c"], ["S", "A", "C", "$start"]
    S, A, C = 4, 5, 6
    rules = [(3, (S,)), (0, (A, C)), (0, (1,)), (1, (0,)), (2, (C, 2))]
    t = build_lalr(terms, nts, rules)
    t.check_invariants()
    a_state = t.action[0 * 4 + 0] - 1
    assert list(t.action[a_state * 4 : a_state * 4 + 4]) == [0, 0, 0, 0]
    swapped = [(3, (S,)), (1, (0,)), (0, (1,)), (0, (A, C)), (2, (C, 2))]
    t = build_lalr(terms, nts, swapped)
    a_state = t.action[0 * 4 + 0] - 1
    assert list(t.action[a_state * 4 : a_state * 4 + 4]) == [0, 0, 0, 0]


def test_build_lalr_takes_the_kernels_tables_when_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    py = tables()
    calls: list[tuple[Any, ...]] = []

    class Native:
        def lalr_tables(self, t: int, n: int, lhs: Any, rhs_start: Any, rhs: Any) -> Any:
            calls.append((t, n, list(lhs), list(rhs_start), list(rhs)))
            arrays = [py.action, py.goto, py.state_symbol]
            arrays += [py.kernel_start, py.kernel_rule, py.kernel_dot]
            return None, (py.n_states, *(_le_bytes(a) for a in arrays), parsing)

    parsing = object()  # the kernels' Parsing of the tables, kept as given
    monkeypatch.setattr(kernels, "load", Native)
    got = build_lalr(*PAIRS)
    assert calls == [(1, 2, [1, 0, 0], [0, 1, 2, 4], [2, 0, 0, 2])]
    assert got.fingerprint == py.fingerprint
    assert got.native is parsing
