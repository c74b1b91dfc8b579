"""The parser's pieces by hand (issue 14's mutation campaign).

``test_parser.py`` checks allowed sets against lark on real grammars; these
checks pin ``grid_core.parser`` on a five-rule grammar small enough to run by
hand, in milliseconds. Terminals ``a b c`` are 0, 1, 2 and ``$END`` is 3;
nonterminals ``$start S A B`` are symbols 4..7::

    0  $start -> S          3  A -> a
    1  S -> A B c           4  B -> <empty>
    2  S -> A B             5  B -> b

Its states (BFS order): 0 the root, 1 after ``a``, 2 after ``S``, 3 after
``A``, 4 after ``A b``, 5 after ``A B``, 6 after ``A B c``. Shifting ``c`` on
the stack ``[a]`` reduces ``A -> a`` (the overlay holds ``A``), then the empty
``B`` on top of it (the goto is read from the overlay, not the stack), and
materializes ``A``, ``B``, ``c``. ``$END`` after ``[a]`` runs the whole chain
up to ACCEPT (rule 0), through rule 2 and the empty rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
from array import array
from typing import Any

import pytest

from grid_core.lalr import LalrTables, build_lalr
from grid_core.parser import Node, Parser

A, B, C, END = 0, 1, 2, 3
NT_A, NT_B = 6, 7  # base T + 1 = 4, plus the nonterminal's index
RULES = [(0, (5,)), (1, (6, 7, 2)), (1, (6, 7)), (2, (0,)), (3, ()), (3, (1,))]
TABLES = build_lalr(["a", "b", "c"], ["$start", "S", "A", "B"], RULES)


def bits(*terminals: int) -> int:
    return sum(1 << t for t in terminals)


def chain(node: Node) -> list[tuple[int, int]]:
    """(symbol, state) from the root up."""
    out = []
    cur: Node | None = node
    while cur is not None:
        out.append((cur.symbol, cur.state))
        cur = cur.parent
    return out[::-1]


def test_tables_are_the_ones_drawn_in_the_header() -> None:
    assert TABLES.n_states == 7
    rows = [[TABLES.action[s * 4 + t] for t in range(4)] for s in range(7)]
    assert rows == [
        [2, 0, 0, 0],
        [0, -4, -4, -4],
        [0, 0, 0, -1],
        [0, 5, -5, -5],
        [0, 0, -6, -6],
        [0, 0, 7, -3],
        [0, 0, 0, -2],
    ]


def test_root_and_row_terms() -> None:
    parser = Parser(TABLES)
    root = parser.root
    assert (root.parent, root.symbol, root.state, root.depth, root.hash) == (None, -1, 0, 0, 0)
    assert (parser.end, parser.width) == (3, 4)
    rows = ((A,), (B, C, END), (END,), (B, C, END), (C, END), (C, END), (END,))
    assert parser.tables.row_terms == rows
    assert [parser.terms(s) for s in (3, 0, 6)] == [(B, C, END), (A,), (END,)]  # computed lazily
    assert TABLES.shiftable == 1 << A | 1 << B | 1 << C  # by columns; $END is not a terminal


def test_allowed_sets_by_hand() -> None:
    parser = Parser(TABLES)
    root = parser.root
    assert parser.allowed(root) == bits(A)
    assert not parser.accepts(root)
    a = parser.shift(root, A)
    assert chain(a) == [(-1, 0), (A, 1)]
    # b and c after reducing A; $END through B -> <empty>, S -> A B and ACCEPT.
    assert parser.allowed(a) == bits(B, C, END)
    assert parser.accepts(a)
    ab = parser.shift(a, B)
    assert chain(ab) == [(-1, 0), (NT_A, 3), (B, 4)]
    assert parser.allowed(ab) == bits(C, END)
    ac = parser.shift(a, C)
    assert chain(ac) == [(-1, 0), (NT_A, 3), (NT_B, 5), (C, 6)]
    assert ac.states() == [0, 3, 5, 6]
    assert ac.depth == 3
    assert parser.allowed(ac) == bits(END)
    assert parser.accepts(ac)
    abc = parser.shift(ab, C)
    assert chain(abc) == [(-1, 0), (NT_A, 3), (NT_B, 5), (C, 6)]
    assert abc is ac  # the same cells, interned


def test_materialized_nonterminal_hash_by_hand() -> None:
    parser = Parser(TABLES)
    ac = parser.shift(parser.shift(parser.root, A), C)
    h = 0
    for symbol, state in chain(ac)[1:]:
        data = h.to_bytes(8, "little") + state.to_bytes(4, "little") + symbol.to_bytes(4, "little")
        h = int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")
    assert ac.hash == h


def test_shift_refuses_what_is_not_allowed() -> None:
    parser = Parser(TABLES)
    with pytest.raises(AssertionError, match=r"^shift of a terminal not allowed$"):
        parser.shift(parser.root, B)
    ac = parser.shift(parser.shift(parser.root, A), C)
    assert parser.accepts(ac)
    with pytest.raises(AssertionError, match=r"^shift of a terminal not allowed$"):
        parser.shift(ac, END)


def counting(parser: Parser, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    calls: list[tuple[int, bool]] = []
    run = parser._run

    def counted(node: Node, t: int, materialize: bool) -> Any:
        calls.append((t, materialize))
        return run(node, t, materialize)

    monkeypatch.setattr(parser, "_run", counted)
    return calls


def test_allowed_is_memoized_on_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = Parser(TABLES)
    a = parser.shift(parser.root, A)
    calls = counting(parser, monkeypatch)
    assert parser.allowed(a) == bits(B, C, END)
    assert calls == [(B, False), (C, False), (END, False)]
    assert a._allowed == bits(B, C, END)
    assert parser.allowed(a) == bits(B, C, END)
    assert len(calls) == 3


def test_shift_is_memoized_per_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = Parser(TABLES)
    a = parser.shift(parser.root, A)
    parser.allowed(a)
    calls = counting(parser, monkeypatch)
    ab = parser.shift(a, B)
    ac = parser.shift(a, C)
    assert calls == [(B, True), (C, True)]
    assert (ab.state, ac.state) == (4, 6)
    assert parser.shift(a, B) is ab
    assert parser.shift(a, C) is ac
    assert len(calls) == 2
    assert a._shifts == {B: ab, C: ac}


class _NoLock:
    def __enter__(self) -> None:
        raise AssertionError("the lock was taken")

    def __exit__(self, *exc: object) -> None:
        pass


def test_interned_cell_is_found_without_the_lock() -> None:
    parser = Parser(TABLES)
    node = parser.push(parser.root, A, 1)
    parser._lock = _NoLock()  # type: ignore[assignment]
    assert parser.push(parser.root, A, 1) is node


class _Raced:
    """An intern table whose first lookup misses: another thread interned the
    cell between the lock-free lookup and the lock."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.missed = False

    def get(self, key: Any) -> Any:
        if not self.missed:
            self.missed = True
            return None
        return self.inner.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.inner[key] = value


def test_interning_rechecks_under_the_lock() -> None:
    parser = Parser(TABLES)
    node = parser.push(parser.root, A, 1)
    parser._interned = _Raced(parser._interned)  # type: ignore[assignment]
    assert parser.push(parser.root, A, 1) is node
    assert parser.push(parser.root, B, 4) is parser.push(parser.root, B, 4)


def corrupted(**arrays: list[tuple[int, int]]) -> LalrTables:
    changed = {}
    for name, cells in arrays.items():
        a = array("i", getattr(TABLES, name))
        for i, v in cells:
            a[i] = v
        changed[name] = a
    return dataclasses.replace(TABLES, **changed)


def test_reduce_past_the_root_is_an_internal_error() -> None:
    # The root reduces A -> a on b: there is nothing to pop.
    parser = Parser(corrupted(action=[(0 * 4 + B, -4)]))
    with pytest.raises(AssertionError, match=r"^reduce popped past the root$"):
        parser.allowed(parser.root)


def test_undefined_goto_is_an_internal_error() -> None:
    parser = Parser(corrupted(goto=[(0 * 4 + 2, -1)]))  # goto(root, A) removed
    a = parser.shift(parser.root, A)
    with pytest.raises(AssertionError, match=r"^goto on a reduced nonterminal is undefined$"):
        parser.allowed(a)


def test_error_found_after_a_reduce() -> None:
    # State 3 (after A) loses its shift on b: [a] still reduces A -> a on b (row 1),
    # then finds no action, as after an LALR merge; b is not allowed.
    parser = Parser(corrupted(action=[(3 * 4 + B, 0)]))
    a = parser.shift(parser.root, A)
    assert parser.allowed(a) == bits(C, END)
