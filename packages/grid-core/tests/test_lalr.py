"""Tests of grid_core.lalr: toy automata checked by hand, an exact reference, lark.

Three kinds of evidence:

1. Hand-checkable toy grammars, whose LR(0) automaton (BFS numbering, successors in
   symbol-id order) is drawn in a comment beside the expected ACTION rows.
2. An exact reference: canonical LR(1) item sets (Knuth), merged by core, give the
   LALR(1) rows by definition; on random small grammars (hypothesis) our tables must
   equal them cell for cell, and we must raise exactly when they have a conflict.
3. Differential against lark's own LALR(1) parser on grammars written in lark syntax:
   random derivations and mutations of them must get the same verdict, the same
   error position and, after every shift, the same set of terminals with an action.

In the toy grammars, words that appear on a left-hand side are nonterminals, every
other word is a terminal (numbered in order of first appearance), ``ε`` is the empty
right-hand side, and rule 0 ``$start -> <first lhs>`` is added in front.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.resources
import json
import os
import random
import subprocess
import sys
from array import array
from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer

from grid_core.errors import GrammarError, LALRConflictError
from grid_core.lalr import END_NAME, LalrTables, _digraph, build_lalr

# --------------------------------------------------------------------------- fixtures


class Grammar(NamedTuple):
    """build_lalr's input, as plain data."""

    terminals: list[str]
    nonterminals: list[str]
    rules: list[tuple[int, tuple[int, ...]]]
    rule_names: list[str] | None = None

    def build(self) -> LalrTables:
        tables = build_both(self.terminals, self.nonterminals, self.rules, self.rule_names)
        tables.check_invariants()
        return tables


def build_both(
    terminals: Sequence[str],
    nonterminals: Sequence[str],
    rules: Sequence[tuple[int, tuple[int, ...]]],
    rule_names: Sequence[str] | None = None,
) -> LalrTables:
    """``build_lalr`` by the kernels (when loaded) and in Python (``GRID_KERNELS=0``):
    both must give the same tables, every array and the fingerprint, or raise the
    same error with the same message. Every test here builds through this, so the
    whole module is a differential of the two constructions."""
    outcomes: list[LalrTables | Exception] = []
    for switch in ("1", "0"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GRID_KERNELS", switch)
            try:
                outcomes.append(build_lalr(terminals, nonterminals, rules, rule_names))
            except (GrammarError, LALRConflictError) as e:
                outcomes.append(e)
    native, python = outcomes
    if isinstance(python, Exception):
        assert type(native) is type(python) and str(native) == str(python)
        raise python
    assert isinstance(native, LalrTables)
    assert native.fingerprint == python.fingerprint
    for name in ("action", "goto", "state_symbol", "kernel_start", "kernel_rule", "kernel_dot"):
        assert getattr(native, name) == getattr(python, name), name
    return python


def toy(text: str) -> Grammar:
    """``A -> x B | ε`` lines to plain data (see the module docstring)."""
    lines = [line.split("->") for line in text.strip().splitlines()]
    nonterminals = ["$start"] + [lhs.strip() for lhs, _ in lines]
    terminals: list[str] = []
    for _, rhs in lines:
        for word in rhs.split():
            if word not in nonterminals and word not in ("|", "ε") and word not in terminals:
                terminals.append(word)
    t = len(terminals)

    def sym(word: str) -> int:
        return terminals.index(word) if word in terminals else t + 1 + nonterminals.index(word)

    rules: list[tuple[int, tuple[int, ...]]] = [(0, (t + 2,))]
    for a, (_, rhs) in enumerate(lines, start=1):
        for alt in rhs.split("|"):
            rules.append((a, tuple(sym(w) for w in alt.split() if w != "ε")))
    return Grammar(terminals, nonterminals, rules)


def rows(tables: LalrTables) -> list[dict[str, str]]:
    """ACTION rows by column name: ``s<k>`` shift, ``r<rule>`` reduce, ``acc``."""
    w = tables.n_terminals + 1
    out = []
    for s in range(tables.n_states):
        row = {}
        for col in range(w):
            cell = tables.action[s * w + col]
            if cell:
                text = f"s{cell - 1}" if cell > 0 else "acc" if cell == -1 else f"r{-cell - 1}"
                row[tables.symbol_name(col)] = text
        out.append(row)
    return out


def gotos(tables: LalrTables) -> dict[int, dict[str, int]]:
    n = tables.n_nonterminals
    out: dict[int, dict[str, int]] = {}
    for s in range(tables.n_states):
        for a in range(n):
            if tables.goto[s * n + a] >= 0:
                out.setdefault(s, {})[tables.nonterminal_names[a]] = tables.goto[s * n + a]
    return out


ACCEPT = -1


def lr_run(tables: LalrTables, tokens: Sequence[int]) -> tuple[int, list[int]]:
    """Table-driven LR parse of terminal ids.

    Returns (ACCEPT, or the index of the first token with no action, len(tokens)
    meaning $END), and the top state after each shift.
    """
    w, n, end = tables.n_terminals + 1, tables.n_nonterminals, tables.n_terminals
    stack = [0]
    tops: list[int] = []
    i = 0
    while True:
        col = tokens[i] if i < len(tokens) else end
        cell = tables.action[stack[-1] * w + col]
        if cell > 0:
            stack.append(cell - 1)
            tops.append(cell - 1)
            i += 1
        elif cell < 0:
            rule = -cell - 1
            if rule == 0:
                assert col == end
                return ACCEPT, tops
            if tables.rule_len[rule]:
                del stack[-tables.rule_len[rule] :]
            stack.append(tables.goto[stack[-1] * n + tables.rule_lhs[rule]])
            assert stack[-1] >= 0
        else:
            return i, tops


def accepts(tables: LalrTables, g: Grammar, sentence: str) -> bool:
    return lr_run(tables, [g.terminals.index(w) for w in sentence.split()])[0] == ACCEPT


# --------------------------------------------------------------------------- toy grammars

# The classic LALR(1)-but-not-SLR(1) grammar (ASU example 4.39 / 4.48).
# Terminals = 0, * 1, id 2; $END 3. Rules: 0 $start -> S, 1 S -> L = R, 2 S -> R,
# 3 L -> * R, 4 L -> id, 5 R -> L.
#
#   0  $start -> . S           *  -> 1   id -> 2   S -> 3   L -> 4   R -> 5
#   1  L -> * . R              *  -> 1   id -> 2   L -> 6   R -> 7
#   2  L -> id .
#   3  $start -> S .
#   4  S -> L . = R | R -> L . =  -> 8
#   5  S -> R .
#   6  R -> L .
#   7  L -> * R .
#   8  S -> L = . R            *  -> 1   id -> 2   L -> 6   R -> 9
#   9  S -> L = R .
#
# SLR puts R -> L . on FOLLOW(R) = {=, $END} in state 4 and clashes with the shift on
# =; the LALR(1) lookahead of R -> L . in state 4 is {$END} only.
LR_EQ = toy("""
S -> L = R | R
L -> * R | id
R -> L
""")
LR_EQ_ROWS = [
    {"*": "s1", "id": "s2"},
    {"*": "s1", "id": "s2"},
    {"=": "r4", "$END": "r4"},
    {"$END": "acc"},
    {"=": "s8", "$END": "r5"},
    {"$END": "r2"},
    {"=": "r5", "$END": "r5"},
    {"=": "r3", "$END": "r3"},
    {"*": "s1", "id": "s2"},
    {"$END": "r1"},
]
LR_EQ_GOTOS = {0: {"S": 3, "L": 4, "R": 5}, 1: {"L": 6, "R": 7}, 8: {"L": 6, "R": 9}}


def test_lalr_not_slr_classic() -> None:
    tables = LR_EQ.build()
    assert tables.n_states == 10
    assert rows(tables) == LR_EQ_ROWS
    assert gotos(tables) == LR_EQ_GOTOS
    assert tables.kernel(4) == [(1, 1), (5, 1)]
    assert [tables.item_str(r, d) for r, d in tables.kernel(4)] == ["S: L . = R", "R: L ."]
    for good in ["id", "* id", "id = id", "* * id = * id"]:
        assert accepts(tables, LR_EQ, good), good
    for bad in ["", "=", "id =", "id = id = id", "* = id"]:
        assert not accepts(tables, LR_EQ, bad), bad


def test_rows_are_necessary_not_sufficient() -> None:
    """After "id = * id" the stack is 0 4 8 1 2; state 2 reduces L -> id on "=", and
    the reduce chain (R -> L, L -> * R, R -> L, then S -> L = R . in state 9) only
    then meets the error. An allowed set must simulate the chain (DESIGN section 5)."""
    tables = LR_EQ.build()
    tokens = [LR_EQ.terminals.index(w) for w in ["id", "=", "*", "id", "="]]
    verdict, tops = lr_run(tables, tokens)
    assert verdict == 4 and tops == [2, 8, 1, 2]
    assert rows(tables)[2]["="] == "r4"


# Another grammar that SLR(1) rejects and LALR(1) accepts (ASU exercise 4.7.x).
# Terminals a 0, b 1, c 2, d 3; $END 4. Rules: 0 $start -> S, 1 S -> A a,
# 2 S -> b A c, 3 S -> d c, 4 S -> b d a, 5 A -> d. FOLLOW(A) = {a, c}.
#
#   0  $start -> . S           b -> 1   d -> 2   S -> 3   A -> 4
#   1  S -> b . A c | S -> b . d a          d -> 5   A -> 6
#   2  S -> d . c | A -> d .   c -> 7        (SLR: reduce on c clashes; LALR: {a})
#   3  $start -> S .
#   4  S -> A . a              a -> 8
#   5  S -> b d . a | A -> d . a -> 9        (SLR: reduce on a clashes; LALR: {c})
#   6  S -> b A . c            c -> 10
#   7  S -> d c .     8  S -> A a .     9  S -> b d a .     10  S -> b A c .
SLR_CONFLICT = toy("""
S -> A a | b A c | d c | b d a
A -> d
""")
SLR_CONFLICT_ROWS = [
    {"b": "s1", "d": "s2"},
    {"d": "s5"},
    {"a": "r5", "c": "s7"},
    {"$END": "acc"},
    {"a": "s8"},
    {"a": "s9", "c": "r5"},
    {"c": "s10"},
    {"$END": "r3"},
    {"$END": "r1"},
    {"$END": "r4"},
    {"$END": "r2"},
]


def test_slr_conflict_resolved_by_lalr() -> None:
    tables = SLR_CONFLICT.build()
    assert rows(tables) == SLR_CONFLICT_ROWS
    for good in ["d a", "b d c", "d c", "b d a"]:
        assert accepts(tables, SLR_CONFLICT, good), good
    for bad in ["d", "b d", "a", "b d a a", "d c c"]:
        assert not accepts(tables, SLR_CONFLICT, bad), bad


# Epsilon rules. Terminals c 0, a 1, b 2; $END 3. Rules: 0 $start -> S,
# 1 S -> A B c, 2 A -> a, 3 A -> ε, 4 B -> b, 5 B -> ε.
#
#   0  $start -> . S   (+ S -> . A B c, A -> . a, A -> .)   a -> 1  S -> 2  A -> 3
#   1  A -> a .
#   2  $start -> S .
#   3  S -> A . B c    (+ B -> . b, B -> .)                b -> 4  B -> 5
#   4  B -> b .
#   5  S -> A B . c                                        c -> 6
#   6  S -> A B c .
#
# LA(0, A -> .) = {b, c}: b is read directly out of state 3, c is read through the
# nullable B (the *reads* relation: (0, A) reads (3, B)).
EPSILON = toy("""
S -> A B c
A -> a | ε
B -> b | ε
""")
EPSILON_ROWS = [
    {"a": "s1", "b": "r3", "c": "r3"},
    {"b": "r2", "c": "r2"},
    {"$END": "acc"},
    {"b": "s4", "c": "r5"},
    {"c": "r4"},
    {"c": "s6"},
    {"$END": "r1"},
]


def test_epsilon_rules() -> None:
    tables = EPSILON.build()
    assert rows(tables) == EPSILON_ROWS
    assert gotos(tables) == {0: {"S": 2, "A": 3}, 3: {"B": 5}}
    for good in ["c", "a c", "b c", "a b c"]:
        assert accepts(tables, EPSILON, good), good
    for bad in ["", "a", "a b", "b a c", "c c"]:
        assert not accepts(tables, EPSILON, bad), bad


# Nullable suffixes feed the *includes* relation: in S -> x A B C, with B and C
# nullable, (state after x, A) includes (0, S), so A -> z . gets $END as well as the
# first terminals of B and C. An empty start symbol accepts the empty input.
NULLABLE_SUFFIX = toy("""
S -> x A B C | ε
A -> z
B -> y | ε
C -> w | ε
""")


def test_nullable_suffix_and_empty_sentence() -> None:
    tables = NULLABLE_SUFFIX.build()
    assert rows(tables)[0] == {"x": "s1", "$END": "r2"}  # S -> ε on $END only
    a_state = next(s for s in range(tables.n_states) if tables.kernel(s) == [(3, 1)])
    assert rows(tables)[a_state] == {"y": "r3", "w": "r3", "$END": "r3"}
    for good in ["", "x z", "x z y", "x z w", "x z y w"]:
        assert accepts(tables, NULLABLE_SUFFIX, good), good
    for bad in ["x", "z", "x z w y", "x z y y"]:
        assert not accepts(tables, NULLABLE_SUFFIX, bad), bad


# LR(1) but not LALR(1) (ASU example 4.44): the LR(1) states {E -> e ., F -> e .}
# after "a e" (E on c, F on d) and after "b e" (E on d, F on c) share a core, and
# merging them gives both reductions both lookaheads.
NOT_LALR = toy("""
S -> a E c | a F d | b F c | b E d
E -> e
F -> e
""")


def test_lr1_but_not_lalr1_raises_reduce_reduce() -> None:
    with pytest.raises(LALRConflictError) as info:
        NOT_LALR.build()
    err = info.value
    assert err.kind == "reduce/reduce"
    assert err.lookahead in ("c", "d")
    assert {err.item1, err.item2} == {"E: e .", "F: e ."}


DANGLING_ELSE = toy("""
S -> if E then S | if E then S else S | other
E -> cond
""")


def test_dangling_else_raises_shift_reduce() -> None:
    with pytest.raises(LALRConflictError) as info:
        DANGLING_ELSE.build()
    err = info.value
    assert (err.kind, err.lookahead) == ("shift/reduce", "else")
    assert err.item1 == "S: if E then S . else S"
    assert err.item2 == "S: if E then S ."
    message = str(err)
    for part in ("shift/reduce", f"state {err.state}", "else", err.item1, err.item2):
        assert part in message


def test_conflict_message_uses_rule_names() -> None:
    names = ["$start", "if_then", "if_then_else", "S", "E"]
    g = DANGLING_ELSE._replace(rule_names=names)
    with pytest.raises(LALRConflictError) as info:
        g.build()
    assert info.value.item1 == "S: if E then S . else S -> if_then_else"
    assert info.value.item2 == "S: if E then S . -> if_then"


SQL_TOY = toy("""
select_stmt -> SELECT column_list FROM table_name | SELECT opt_all column_list FROM table_name
column_list -> NAME
table_name -> NAME
opt_all -> ALL | ε
""")


def test_item_strings_read_like_the_grammar() -> None:
    g = SQL_TOY._replace(rules=SQL_TOY.rules[:2] + SQL_TOY.rules[3:5])  # no opt_all
    tables = g.build()
    assert tables.item_str(1, 1) == "select_stmt: SELECT . column_list FROM table_name"
    assert tables.item_str(1, 4) == "select_stmt: SELECT column_list FROM table_name ."
    assert tables.item_str(2, 0) == "column_list: . NAME"


def test_conflict_on_an_empty_rule_names_both_items() -> None:
    with pytest.raises(LALRConflictError) as info:
        SQL_TOY.build()
    err = info.value
    assert (err.kind, err.lookahead) == ("shift/reduce", "NAME")
    assert (err.item1, err.item2) == ("column_list: . NAME", "opt_all: .")
    assert "column_list: . NAME" in str(err) and "opt_all: ." in str(err)


# One terminal "a" (0), $END 1, $start 2, S 3; the start rule $start -> S is (0, (3,)).
BAD_INPUTS = {
    "no rules": ((["a"], ["$start"], []), "at least the augmented start rule"),
    "lhs out of range": ((["a"], ["$start"], [(1, ())]), "lhs 1"),
    "rhs out of range": ((["a"], ["$start", "S"], [(0, (3,)), (1, (9,))]), "rhs symbol 9"),
    "$END in a rhs": ((["a"], ["$start", "S"], [(0, (3,)), (1, (1,))]), r"rhs symbol \$END"),
    "start lhs reused": ((["a"], ["$start", "S"], [(0, (3,)), (0, (0,))]), "in rule 1"),
    "start symbol in a rhs": ((["a"], ["$start", "S"], [(0, (3,)), (1, (2,))]), "in rule 1"),
    "duplicate names": ((["a", "a"], ["$start"], [(0, ())]), "distinct"),
    "name clash with $END": (([END_NAME], ["$start"], [(0, ())]), "distinct"),
    "an id no int32 holds": ((["a"], ["$start", "S"], [(0, (3,)), (1, (2**40,))]), "rule 1"),
    "a negative lhs": ((["a"], ["$start", "S"], [(0, (3,)), (-1, (0,))]), "lhs -1"),
}


def test_malformed_rule_arrays_are_named() -> None:
    """Offsets that do not delimit one right-hand side per rule: a GrammarError on
    both paths (the kernels refuse them too)."""
    from grid_core.lalr import RuleArrays

    rules = RuleArrays(array("i", [0, 1]), array("i", [0, 1, 3]), array("i", [3, 0]))
    with pytest.raises(GrammarError, match="rhs_start does not delimit 2"):
        build_both(["a"], ["$start", "S"], rules)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_malformed_input_raises_grammar_error(case: str) -> None:
    (terminals, nonterminals, rules), message = BAD_INPUTS[case]
    with pytest.raises(GrammarError, match=message):
        build_both(terminals, nonterminals, rules)  # type: ignore[arg-type]


def test_rule_names_length_is_checked() -> None:
    with pytest.raises(GrammarError):
        build_both(*LR_EQ[:3], rule_names=["x"])


def test_start_rule_alone_accepts_only_the_empty_input() -> None:
    tables = build_both(["a"], ["$start"], [(0, ())])
    tables.check_invariants()
    assert rows(tables) == [{"$END": "acc"}]
    assert lr_run(tables, []) == (ACCEPT, [])
    assert lr_run(tables, [0]) == (0, [])


# --------------------------------------------------------------------------- exact reference

Core = frozenset[tuple[int, int]]
Row = dict[int, set[tuple[str, Any]]]


def reference_lalr(g: Grammar) -> dict[Core, Row]:
    """LALR(1) rows by definition: canonical LR(1) item sets merged by core.

    Keys are LR(0) kernels (rule, dot); a cell holds every action the merged items
    ask for (``("s", target kernel)`` or ``("r", rule)``), so a conflict is a cell
    with two actions.
    """
    t = len(g.terminals)
    n = len(g.nonterminals)
    rhs = [body for _, body in g.rules]
    by_lhs: list[list[int]] = [[] for _ in range(n)]
    for r, (lhs, _) in enumerate(g.rules):
        by_lhs[lhs].append(r)
    nullable = [False] * n
    first: list[set[int]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for lhs, body in g.rules:
            for x in body:
                add = {x} if x < t else first[x - t - 1]
                if not add <= first[lhs]:
                    first[lhs] |= add
                    changed = True
                if x < t or not nullable[x - t - 1]:
                    break
            else:
                if not nullable[lhs]:
                    nullable[lhs] = changed = True

    def first_of(seq: Sequence[int], la: int) -> set[int]:
        out: set[int] = set()
        for x in seq:
            if x < t:
                return out | {x}
            out |= first[x - t - 1]
            if not nullable[x - t - 1]:
                return out
        return out | {la}

    def closure(items: set[tuple[int, int, int]]) -> frozenset[tuple[int, int, int]]:
        todo = list(items)
        while todo:
            r, d, la = todo.pop()
            if d < len(rhs[r]) and rhs[r][d] > t:
                for b in first_of(rhs[r][d + 1 :], la):
                    for r2 in by_lhs[rhs[r][d] - t - 1]:
                        if (r2, 0, b) not in items:
                            items.add((r2, 0, b))
                            todo.append((r2, 0, b))
        return frozenset(items)

    def core(state: frozenset[tuple[int, int, int]]) -> Core:
        return frozenset((r, d) for r, d, _ in state if d > 0 or r == 0)

    start = closure({(0, 0, t)})
    seen = {start}
    todo = [start]
    merged: dict[Core, Row] = {}
    while todo:
        state = todo.pop()
        row = merged.setdefault(core(state), {})
        for r, d, la in state:
            if d == len(rhs[r]):
                row.setdefault(la, set()).add(("r", r))
        for x in sorted({rhs[r][d] for r, d, _ in state if d < len(rhs[r])}):
            succ = closure(
                {(r, d + 1, la) for r, d, la in state if d < len(rhs[r]) and rhs[r][d] == x}
            )
            if x < t:
                row.setdefault(x, set()).add(("s", core(succ)))
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    return merged


def our_rows(tables: LalrTables) -> dict[Core, Row]:
    w = tables.n_terminals + 1
    out: dict[Core, Row] = {}
    for s in range(tables.n_states):
        row: Row = {}
        for col in range(w):
            cell = tables.action[s * w + col]
            if cell > 0:
                row[col] = {("s", frozenset(tables.kernel(cell - 1)))}
            elif cell < 0:
                row[col] = {("r", -cell - 1)}
        out[frozenset(tables.kernel(s))] = row
    return out


def lr0_kernels(g: Grammar) -> list[tuple[tuple[int, int], ...]]:
    """The LR(0) kernels in the BFS order the module promises (textbook closure/goto)."""
    t = len(g.terminals)
    rhs = [body for _, body in g.rules]
    by_lhs: dict[int, list[int]] = {}
    for r, (lhs, _) in enumerate(g.rules):
        by_lhs.setdefault(lhs, []).append(r)
    kernels: list[tuple[tuple[int, int], ...]] = [((0, 0),)]
    for kernel in kernels:  # grows while we walk it: BFS
        items = list(kernel)
        for r, d in items:
            if d < len(rhs[r]) and rhs[r][d] > t:
                items.extend(
                    (r2, 0) for r2 in by_lhs.get(rhs[r][d] - t - 1, []) if (r2, 0) not in items
                )
        for x in sorted({rhs[r][d] for r, d in items if d < len(rhs[r])}):
            succ = tuple(sorted((r, d + 1) for r, d in items if d < len(rhs[r]) and rhs[r][d] == x))
            if succ not in kernels:
                kernels.append(succ)
    return kernels


def check_against_reference(g: Grammar) -> bool:
    """Assert our tables equal the reference, or that both see a conflict; True if built.

    The grammar must have no unproductive nonterminal: canonical LR(1) closure adds
    no item under an empty FIRST set, so its cores would miss LR(0) states.
    """
    reference = reference_lalr(g)
    kernels = lr0_kernels(g)
    assert {frozenset(k) for k in kernels} == set(reference)
    try:
        tables = g.build()
    except LALRConflictError as err:
        col = [*g.terminals, END_NAME].index(err.lookahead)
        cell = reference[frozenset(kernels[err.state])][col]
        assert len(cell) > 1, "we report a conflict the reference lacks"
        return False
    assert [tuple(tables.kernel(s)) for s in range(tables.n_states)] == kernels
    assert our_rows(tables) == reference
    return True


relations = st.integers(1, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.lists(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n),
        st.lists(st.integers(0, 255), min_size=n, max_size=n),
    )
)


@settings(derandomize=True, max_examples=500, deadline=None)
@given(relations)
def test_digraph_is_the_union_over_reachable_nodes(case: tuple[list[list[int]], list[int]]) -> None:
    """DeRemer-Pennello's digraph: F(x) = OR of base(y) over every y reachable from x.

    Random relations have cycles through every visiting order, which the grammars
    above rarely produce (a wrong SCC step survives all of the grammar tests).
    """
    relation, base = case
    expected = []
    for x in range(len(base)):
        seen, todo = {x}, [x]
        while todo:
            for y in relation[todo.pop()]:
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        mask = 0
        for y in seen:
            mask |= base[y]
        expected.append(mask)
    assert _digraph(relation, base) == expected


@pytest.mark.parametrize(
    "g",
    [LR_EQ, SLR_CONFLICT, EPSILON, NULLABLE_SUFFIX, NOT_LALR, DANGLING_ELSE, SQL_TOY],
    ids=["lr_eq", "slr_conflict", "epsilon", "nullable_suffix", "not_lalr", "dangling", "sql"],
)
def test_toys_match_the_reference(g: Grammar) -> None:
    check_against_reference(g)


@st.composite
def small_grammars(draw: st.DrawFn) -> Grammar:
    t = draw(st.integers(1, 4))
    n = draw(st.integers(1, 5))
    symbols = list(range(t)) + [t + 2 + a for a in range(n)]  # never $END or $start
    rules: list[tuple[int, tuple[int, ...]]] = [(0, (t + 2,))]
    for a in range(1, n + 1):
        # The first rule of N_a uses only terminals and later nonterminals, so every
        # nonterminal is productive (see check_against_reference).
        grounded = list(range(t)) + [t + 1 + b for b in range(a + 1, n + 1)]
        rules.append((a, tuple(draw(st.lists(st.sampled_from(grounded), max_size=3)))))
        for _ in range(draw(st.integers(0, 3))):
            rules.append((a, tuple(draw(st.lists(st.sampled_from(symbols), max_size=4)))))
    return Grammar([f"t{i}" for i in range(t)], ["$start"] + [f"N{a}" for a in range(n)], rules)


@settings(derandomize=True, max_examples=600, deadline=None)
@given(small_grammars())
def test_random_grammars_match_the_reference(g: Grammar) -> None:
    check_against_reference(g)


def test_random_grammars_cover_both_outcomes() -> None:
    """The property above is not vacuous: many random grammars build, many conflict."""
    rng = random.Random(20240611)
    built = 0
    for _ in range(300):
        t, n = rng.randint(1, 4), rng.randint(1, 5)
        symbols = list(range(t)) + [t + 2 + a for a in range(n)]
        rules: list[tuple[int, tuple[int, ...]]] = [(0, (t + 2,))]
        for a in range(1, n + 1):
            grounded = list(range(t)) + [t + 1 + b for b in range(a + 1, n + 1)]
            rules.append((a, tuple(rng.choices(grounded, k=rng.randint(0, 3)))))
            for _ in range(rng.randint(0, 3)):
                rules.append((a, tuple(rng.choices(symbols, k=rng.randint(0, 4)))))
        g = Grammar([f"t{i}" for i in range(t)], ["$start"] + [f"N{a}" for a in range(n)], rules)
        built += check_against_reference(g)
    assert 60 <= built <= 240, built


@settings(derandomize=True, max_examples=200, deadline=None)
@given(small_grammars(), st.integers(0, 3))
def test_unproductive_symbols_still_build_soundly(g: Grammar, extra: int) -> None:
    """Useless symbols are the projection's business; the builder must not break on them."""
    n = len(g.nonterminals)
    t = len(g.terminals)
    loops = [(a, (t + 1 + a,)) for a in range(1, min(n, extra + 1))]  # N -> N alone
    g = g._replace(nonterminals=[*g.nonterminals, "DEAD"], rules=[*g.rules, *loops])
    g = g._replace(rules=[*g.rules, (1, (t + 1 + n,))])  # N0 -> DEAD, DEAD has no rule
    with contextlib.suppress(LALRConflictError):
        g.build()


# --------------------------------------------------------------------------- lark differential

EXPR = r"""
?start: expr
?expr: expr "+" term | expr "-" term | term
?term: term "*" factor | term "/" factor | term "%" factor | factor
?factor: "-" factor | "+" factor | power
?power: call ["**" factor]
?call: atom | call "(" [args] ")" | call "[" expr "]" | call "." NAME
?atom: NUMBER | NAME | "(" expr ")" | "[" [args] "]"
args: expr ("," expr)* [","]
%import common.NUMBER
%import common.CNAME -> NAME
%ignore " "
"""

SQL_SELECT = r"""
start: select_stmt (UNION [ALL] select_stmt)* [";"]
select_stmt: select_core join_clause* where_clause? group_clause? order_clause? limit_clause?
select_core: SELECT [DISTINCT] select_list FROM table_list
select_list: STAR | select_item ("," select_item)*
select_item: expr [[AS] NAME]
table_list: table_ref ("," table_ref)*
table_ref: NAME [[AS] NAME] | "(" select_stmt ")" [AS] NAME
join_clause: [join_kind] JOIN table_ref ON expr
join_kind: INNER | LEFT [OUTER]
where_clause: WHERE expr
group_clause: GROUP BY expr ("," expr)* [HAVING expr]
order_clause: ORDER BY order_item ("," order_item)*
order_item: expr [ASC | DESC]
limit_clause: LIMIT NUMBER [OFFSET NUMBER]
?expr: and_expr (OR and_expr)*
?and_expr: not_expr (AND not_expr)*
?not_expr: NOT not_expr | predicate
?predicate: sum
    | sum COMP_OP sum -> comparison
    | sum IS [NOT] NULL -> is_null
    | sum [NOT] IN "(" (expr_list | select_stmt) ")" -> in_list
    | sum [NOT] BETWEEN sum AND sum -> between
    | sum [NOT] LIKE sum -> like
expr_list: expr ("," expr)*
?sum: product ((PLUS | MINUS) product)*
?product: unary ((STAR | SLASH) unary)*
?unary: MINUS unary -> neg | atom
?atom: NUMBER | STRING | NULL | column_ref | function_call | "(" expr ")"
    | "(" select_stmt ")" -> subquery | case_expr
column_ref: NAME ["." NAME]
function_call: NAME "(" [DISTINCT] (expr_list | STAR) ")" | NAME "(" ")"
case_expr: CASE when_clause+ [ELSE expr] END
when_clause: WHEN expr THEN expr
COMP_OP: "=" | "<>" | "<" | ">" | "<=" | ">="
PLUS: "+"
MINUS: "-"
STAR: "*"
SLASH: "/"
SELECT: "select"i
DISTINCT: "distinct"i
FROM: "from"i
AS: "as"i
JOIN: "join"i
ON: "on"i
INNER: "inner"i
LEFT: "left"i
OUTER: "outer"i
WHERE: "where"i
GROUP: "group"i
BY: "by"i
HAVING: "having"i
ORDER: "order"i
ASC: "asc"i
DESC: "desc"i
LIMIT: "limit"i
OFFSET: "offset"i
OR: "or"i
AND: "and"i
NOT: "not"i
IS: "is"i
NULL: "null"i
IN: "in"i
BETWEEN: "between"i
LIKE: "like"i
UNION: "union"i
ALL: "all"i
CASE: "case"i
WHEN: "when"i
THEN: "then"i
ELSE: "else"i
END: "end"i
NAME: /[a-z_][a-z0-9_]*/i
NUMBER: /[0-9]+/
STRING: /'[^']*'/
%ignore /\s+/
"""

JSON = r"""
?start: value
?value: object | array | STRING | NUMBER | "true" -> true | "false" -> false | "null" -> null
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
%import common.ESCAPED_STRING -> STRING
%import common.SIGNED_NUMBER -> NUMBER
%ignore " "
"""

# Nullable everywhere: optional and repeated parts, empty statements, a nullable
# prefix before a nonterminal that must look through it (the reads relation).
NULLABLE = r"""
start: decl* stmt_list [tail]
decl: VAR NAME [":" type] [init] ";"
init: "=" NAME
type: NAME ["[" [NUMBER] "]"]
stmt_list: (stmt? ";")*
stmt: [label] [NAME "="] call | block
label: NAME ":"
call: NAME "(" [NAME ("," NAME)*] ")"
block: "{" stmt_list "}"
tail: "end" [NAME]
VAR: "var"
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""

# lark's own grammar of its grammar syntax: a real, LALR(1), third-party grammar.
LARK_LARK = (importlib.resources.files("lark") / "grammars" / "lark.lark").read_text()

LARK_GRAMMARS = {
    "expr": EXPR,
    "sql_select": SQL_SELECT,
    "json": JSON,
    "nullable": NULLABLE,
    "lark_lark": LARK_LARK,
}


class LarkCase(NamedTuple):
    parser: lark.Lark
    grammar: Grammar
    tables: LalrTables
    used: list[int]  # terminal ids that occur in some rule


@cache
def lark_case(name: str) -> LarkCase:
    parser = lark_lalr(LARK_GRAMMARS[name])
    g = from_lark(parser)
    used = sorted({x for _, body in g.rules for x in body if x < len(g.terminals)})
    return LarkCase(parser, g, g.build(), used)


class _TablesOnly(Lexer):
    """A lexer that never lexes: lark's strict mode wants the optional ``interegular``
    package for its regex-collision check, which a custom lexer skips."""

    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, lexer_state: Any, parser_state: Any) -> Any:
        raise NotImplementedError


def lark_lalr(text: str) -> lark.Lark:
    """lark's LALR(1) parser for ``text``, once lark's strict mode has confirmed that
    the grammar has no conflict (by default lark resolves shift/reduce as shift)."""
    lark.Lark(text, parser="lalr", lexer=_TablesOnly, strict=True)
    return lark.Lark(text, parser="lalr")


def from_lark(parser: lark.Lark) -> Grammar:
    """lark's compiled BNF to build_lalr's input, with ``$start -> start`` as rule 0."""
    terminals = [t.name for t in parser.terminals]
    for rule in parser.rules:
        terminals += [s.name for s in rule.expansion if s.is_term and s.name not in terminals]
    nonterminals = ["$start"]
    for rule in parser.rules:
        if rule.origin.name not in nonterminals:
            nonterminals.append(rule.origin.name)
    t = len(terminals)

    def sym(s: Any) -> int:
        return terminals.index(s.name) if s.is_term else t + 1 + nonterminals.index(s.name)

    (start,) = parser.options.start
    rules: list[tuple[int, tuple[int, ...]]] = [(0, (t + 1 + nonterminals.index(start),))]
    names = ["$start"]
    for rule in parser.rules:
        rules.append((nonterminals.index(rule.origin.name), tuple(sym(s) for s in rule.expansion)))
        names.append(str(rule.alias or rule.origin.name))
    return Grammar(terminals, nonterminals, rules, names)


def lark_run(parser: lark.Lark, names: Sequence[str]) -> tuple[int, list[frozenset[str]]]:
    """lark's verdict on a token sequence, as lr_run's: (ACCEPT or error index, choices).

    choices[k] is the set of terminals with an action in lark's state after token k.
    """
    ip: Any = parser.parse_interactive("")  # lark's interactive parser is untyped
    seen: list[frozenset[str]] = []
    for i, name in enumerate(names):
        try:
            ip.feed_token(lark.Token(name, name))
        except UnexpectedToken:
            return i, seen
        seen.append(frozenset(k for k in ip.choices() if k.isupper() or k == END_NAME))
    try:
        ip.feed_eof()
    except UnexpectedToken:
        return len(names), seen
    return ACCEPT, seen


def our_choices(tables: LalrTables, state: int) -> frozenset[str]:
    w = tables.n_terminals + 1
    row = tables.action[state * w : (state + 1) * w]
    return frozenset(tables.symbol_name(col) for col in range(w) if row[col])


def compare_with_lark(case: LarkCase, tokens: Sequence[int]) -> int:
    """Both parsers agree on verdict, error position and every row they pass through."""
    names = [case.grammar.terminals[x] for x in tokens]
    ours, tops = lr_run(case.tables, tokens)
    theirs, choices = lark_run(case.parser, names)
    assert ours == theirs, (names, ours, theirs)
    assert [our_choices(case.tables, s) for s in tops] == choices, names
    return ours


def min_heights(g: Grammar) -> list[int]:
    """Per rule, the height of its shortest derivation tree (every symbol is productive)."""
    t = len(g.terminals)
    big = 1 << 30
    nt_height = [big] * len(g.nonterminals)
    rule_height = [big] * len(g.rules)
    changed = True
    while changed:
        changed = False
        for r, (lhs, body) in enumerate(g.rules):
            h = 1 + max((nt_height[x - t - 1] for x in body if x > t), default=0)
            if h < rule_height[r]:
                rule_height[r] = h
                changed = True
            if h < nt_height[lhs]:
                nt_height[lhs] = h
    assert max(rule_height) < big, "unproductive rule"
    return rule_height


def derive(g: Grammar, rng: random.Random, max_depth: int, max_len: int = 40) -> list[int]:
    """A random sentence: shortest rules once deep or long; before that, a uniform
    choice, half the time among the rules that do not close the tree fastest."""
    t = len(g.terminals)
    heights = min_heights(g)
    by_lhs: dict[int, list[int]] = {}
    for r, (lhs, _) in enumerate(g.rules):
        by_lhs.setdefault(lhs, []).append(r)
    out: list[int] = []

    def expand(symbol: int, depth: int) -> None:
        if symbol < t:
            out.append(symbol)
            return
        choices = by_lhs[symbol - t - 1]
        if depth >= max_depth or len(out) >= max_len:
            best = min(heights[r] for r in choices)
            choices = [r for r in choices if heights[r] == best]
        elif rng.random() < 0.5:
            best = min(heights[r] for r in choices)
            choices = [r for r in choices if heights[r] > best] or choices
        for x in g.rules[rng.choice(choices)][1]:
            expand(x, depth + 1)

    for x in g.rules[0][1]:
        expand(x, 0)
    return out


def mutate(rng: random.Random, tokens: Sequence[int], alphabet: Sequence[int]) -> list[int]:
    """One to three token insertions, deletions, adjacent swaps or replacements."""
    out = list(tokens)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        if op == 0 or not out:
            out.insert(rng.randint(0, len(out)), rng.choice(alphabet))
        elif op == 1:
            del out[rng.randrange(len(out))]
        elif op == 2 and len(out) > 1:
            i = rng.randrange(len(out) - 1)
            out[i], out[i + 1] = out[i + 1], out[i]
        else:
            out[rng.randrange(len(out))] = rng.choice(alphabet)
    return out


def test_lark_conversion_of_the_sql_subset() -> None:
    case = lark_case("sql_select")
    g, tables = case.grammar, case.tables
    assert g.rules[0] == (0, (len(g.terminals) + 1 + g.nonterminals.index("start"),))
    assert len(g.rules) == 141 and tables.n_states == 233
    text = (
        "select a, count(*) from t join u on t.x = u.y where a between 1 and 2 and b not in "
        "(select c from d) order by a desc limit 3;"
    )
    tokens = [g.terminals.index(tok.type) for tok in case.parser.lex(text)]
    assert compare_with_lark(case, tokens) == ACCEPT
    assert compare_with_lark(case, tokens[:-2]) == len(tokens) - 2  # "limit" needs NUMBER


def test_lark_nullable_grammar_has_empty_rules() -> None:
    g = lark_case("nullable").grammar
    empty = [g.nonterminals[lhs] for lhs, body in g.rules if not body]
    assert empty, "lark compiled no empty rule; the nullable fixture lost its point"


@pytest.mark.parametrize("name", list(LARK_GRAMMARS))
@settings(derandomize=True, max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**64 - 1))
def test_differential_against_lark(name: str, seed: int) -> None:
    case = lark_case(name)
    rng = random.Random(seed)
    sentence = derive(case.grammar, rng, max_depth=rng.randint(2, 12))
    assert compare_with_lark(case, sentence) == ACCEPT
    for _ in range(15):
        compare_with_lark(case, mutate(rng, sentence, case.used))


@pytest.mark.parametrize("name", list(LARK_GRAMMARS))
def test_seeded_mutations_against_lark(name: str) -> None:
    """A fixed batch, tallied, so that we know both verdicts are well exercised."""
    case = lark_case(name)
    rng = random.Random(f"grid-core/lalr/{name}")
    verdicts = {"accept": 0, "reject": 0}
    for _ in range(100):
        sentence = derive(case.grammar, rng, max_depth=rng.randint(2, 10))
        for _ in range(10):
            result = compare_with_lark(case, mutate(rng, sentence, case.used))
            verdicts["accept" if result == ACCEPT else "reject"] += 1
    assert verdicts["accept"] >= 20 and verdicts["reject"] >= 500, verdicts


# --------------------------------------------------------------------------- fingerprint

FINGERPRINT_SCRIPT = """
import json, sys
from grid_core.lalr import build_lalr
terminals, nonterminals, rules, names = json.load(sys.stdin)
rules = [(lhs, tuple(body)) for lhs, body in rules]
print(build_lalr(terminals, nonterminals, rules, names).fingerprint)
"""


def test_fingerprint_is_identical_across_processes() -> None:
    case = lark_case("sql_select")
    payload = json.dumps(list(case.grammar))
    seen = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", FINGERPRINT_SCRIPT],
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        seen.add(done.stdout.strip())
    assert seen == {case.tables.fingerprint}


def test_fingerprint_golden_and_sensitivity() -> None:
    base = LR_EQ.build().fingerprint
    # Golden: a change here means every cached artifact keyed on tables is invalidated.
    assert base == LR_EQ_FINGERPRINT
    assert LR_EQ.build().fingerprint == base
    renamed = LR_EQ._replace(terminals=["==", "*", "id"])
    named = LR_EQ._replace(rule_names=["$start", "assign", "S", "L", "L", "R"])
    extra = LR_EQ._replace(rules=[*LR_EQ.rules, (3, (2, 2))])  # R -> id id
    others = {g.build().fingerprint for g in (renamed, named, extra)}
    assert base not in others and len(others) == 3


LR_EQ_FINGERPRINT = "fd381b752e83d74628a7ce74a46bf849"


def _tamper_cell(field: str, index: Any, value: int) -> Any:
    def tamper(tables: LalrTables) -> LalrTables:
        arr = array("i", getattr(tables, field))
        w, n = tables.n_terminals + 1, tables.n_nonterminals
        arr[index(w, n)] = value
        changes: dict[str, Any] = {field: arr}
        return dataclasses.replace(tables, **changes)

    return tamper


# LR_EQ columns: = 0, * 1, id 2, $END 3; nonterminals $start 0, S 1, L 2, R 3.
TAMPERING = {
    "shift to the wrong state": (_tamper_cell("action", lambda w, n: 0 * w + 1, 3), "0 -> 2"),
    "shift on $END": (_tamper_cell("action", lambda w, n: 0 * w + 3, 2), "stray shift"),
    "stray shift": (_tamper_cell("action", lambda w, n: 2 * w + 1, 2), "stray shift"),
    "no shift": (_tamper_cell("action", lambda w, n: 8 * w + 2, 0), "no shift on id"),
    "reduce of an incomplete item": (_tamper_cell("action", lambda w, n: 0 * w + 0, -2), "stray"),
    "reduce of a missing rule": (_tamper_cell("action", lambda w, n: 2 * w + 0, -99), "stray"),
    "accept removed": (_tamper_cell("action", lambda w, n: 3 * w + 3, 0), "no ACCEPT"),
    "accept on a terminal": (_tamper_cell("action", lambda w, n: 3 * w + 0, -1), "rule 0"),
    "goto to the wrong state": (_tamper_cell("goto", lambda w, n: 0 * n + 2, 6), "0 -> 6"),
    "stray goto": (_tamper_cell("goto", lambda w, n: 2 * n + 1, 3), "stray goto"),
    "goto out of range": (_tamper_cell("goto", lambda w, n: 0 * n + 1, 99), "out of range"),
    "accessing symbol": (_tamper_cell("state_symbol", lambda w, n: 5, 0), "5: accessing symbol"),
    "rule length": (_tamper_cell("rule_len", lambda w, n: 3, 1), "rule 3: length"),
}


@pytest.mark.parametrize("case", list(TAMPERING), ids=list(TAMPERING))
def test_check_invariants_catches_tampering(case: str) -> None:
    tamper, message = TAMPERING[case]
    tables = tamper(LR_EQ.build())
    # Refresh the fingerprint, so that the structural check itself has to object.
    object.__setattr__(tables, "fingerprint", tables._compute_fingerprint())
    with pytest.raises(AssertionError, match=message):
        tables.check_invariants()


def test_check_invariants_catches_a_stale_fingerprint() -> None:
    tables = dataclasses.replace(LR_EQ.build())  # a fresh copy: its fingerprint unread
    tables.__dict__["fingerprint"] = "0" * 32  # as if read before the arrays changed
    with pytest.raises(AssertionError, match="fingerprint"):
        tables.check_invariants()


def test_builds_of_the_sql_subset_are_reproducible() -> None:
    """A guard against an accidental blow-up that no load can trip: rebuilt, the
    tables are the same, state for state (233 states: a canonical LR(1) or a
    lost merge would show here). How long a build takes is a benchmark's business,
    never a test's (a time bound fails on a busy machine)."""
    g = lark_case("sql_select").grammar
    first, second = build_both(*g), build_both(*g)
    assert first.n_states == second.n_states == 233
    assert first.fingerprint == second.fingerprint


@pytest.mark.parametrize("dialect", ["SQLITE", "POSTGRES"])
def test_the_sql_dialects_build_alike_natively_and_in_python(dialect: str) -> None:
    """The real grammars (the two SQL dialects, and a role projection of each that
    drops the writing verbs): the kernels' construction gives the Python one's
    tables, array for array."""
    dialects = pytest.importorskip("grid_sql.dialects")
    pytest.importorskip("grid_kernels")
    from grid_core.grammar import load_grammar

    grammar = load_grammar(getattr(dialects, dialect).grammar_text, dialect.lower())
    names = {t.name for t in grammar.terminals}
    drop = [t for t in ("INSERT", "UPDATE", "DELETE", "DROP", "CREATE") if t in names]
    for g in (grammar, grammar.drop_terminals(drop, "reader")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GRID_KERNELS", "0")
            python = g.lalr()
        native = g.lalr()
        assert native.fingerprint == python.fingerprint and native.n_states > 100


@pytest.mark.parametrize("dialect", ["SQLITE", "POSTGRES"])
def test_shiftable_from_the_kernels_is_the_pythons(dialect: str) -> None:
    """``LalrTables.shiftable`` read from the kernels' ``Parsing`` equals the Python
    column scan, on a dialect and on a projection that drops terminals' rules."""
    dialects = pytest.importorskip("grid_sql.dialects")
    pytest.importorskip("grid_kernels")
    from grid_core.grammar import load_grammar

    grammar = load_grammar(getattr(dialects, dialect).grammar_text, dialect.lower())
    for g in (grammar, grammar.drop_terminals(["INSERT", "UPDATE", "DELETE"], "reader")):
        tables = g._build_lalr()  # not the memo: built by the kernels when loaded
        if tables.native is None:
            pytest.skip("the kernels are off (GRID_KERNELS=0): no native tables")
        assert tables.shiftable == tables._shiftable() != 0


def test_tables_too_large_are_refused_before_they_are_allocated() -> None:
    """``S -> A0 ... A(k-1)``, ``Ai -> ai``: about 2k states of 3k cells each. Past
    ``MAX_TABLE_CELLS`` both constructions refuse it with one message, before the dense
    tables exist (a JSON Schema of 6,000 properties aborted the process in the
    kernels' allocation)."""
    from grid_core.lalr import MAX_TABLE_CELLS

    k = 5_200
    terminals = [f"a{i}" for i in range(k)]
    nonterminals = ["S'", "S", *(f"A{i}" for i in range(k))]
    nt = len(terminals) + 1  # nonterminal symbol ids follow the terminals and $END
    rules = [(0, (nt + 1,)), (1, tuple(nt + 2 + i for i in range(k)))]
    rules += [(2 + i, (i,)) for i in range(k)]
    with pytest.raises(GrammarError, match="too large") as info:
        build_both(terminals, nonterminals, rules)
    assert f"(at most {MAX_TABLE_CELLS})" in str(info.value)
