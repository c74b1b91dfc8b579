"""LALR(1) parse tables, computed by grid-core itself.

Purpose. Turn a context-free grammar, given as plain data (symbol ids and rules),
into flat LALR(1) ACTION/GOTO arrays that the pure-Python parser and, later, the
Rust kernel drive. grid-core never uses lark's parser tables: lark is what the
independent specification (grid-spec) parses with, so a differential test between
the two means something only if the tables are computed here.

Reference.
- LR(0) items, closure, goto and the canonical collection: Aho, Sethi & Ullman,
  *Compilers: Principles, Techniques, and Tools* (1986), section 4.7.
- Lookaheads: F. DeRemer & T. Pennello, "Efficient computation of LALR(1)
  look-ahead sets", ACM TOPLAS 4(4):615-649, 1982, over the LR(0) automaton:
  for every nonterminal transition x = (p, A),

      DR(x)     = terminals t with a shift on t out of goto(p, A)
      x reads y   iff  y = (goto(p, A), C) with C nullable
      Read(x)   = DR(x) U  U{ Read(y)   : x reads y }        (digraph)
      x includes y iff y = (p', B), B -> beta A gamma, gamma nullable, p' --beta--> p
      Follow(x) = Read(x) U U{ Follow(y) : x includes y }     (digraph)
      (q, A -> omega) lookback (p, A)  iff  p --omega--> q
      LA(q, A -> omega) = U{ Follow(x) : (q, A -> omega) lookback x }

  Both unions are solved by the digraph algorithm (Tarjan's SCC search, where
  every member of a strongly connected component gets the same set). Terminal
  sets are Python ints used as bitsets (bit t = terminal t, bit T = $END).
  Rule 0 carries no $END of its own: a virtual transition (0, $start) with
  DR = {$END} gives rule 0 its lookahead and, through *includes*, every symbol
  that can end a sentence.

Vocabulary. Symbols are ints: terminals 0..T-1, $END is T, nonterminal i is
T+1+i. Rule 0 is the augmented start rule ``$start -> S``; its left-hand side is
used nowhere else. An *item* is (rule, dot), encoded as one int (``items.base[r] +
dot``, so advancing the dot is ``+1``). A state's *kernel* is its items with
dot > 0 (plus item (0, 0) for state 0); a state is identified by its kernel. The
*accessing symbol* of a state is the symbol every transition into it reads.

Table encoding (all ``array('i')``, row-major, W = T + 1 columns in ACTION):

    action[s*W + t]   0        error
                      k > 0    shift, go to state k - 1
                      k < 0    reduce rule -k - 1; reduce rule 0 on $END (= -1 in
                               column T) is ACCEPT, and appears nowhere else
    goto[s*N + A]     state after reducing to nonterminal A in state s, or -1
    rule_lhs[r], rule_len[r]                  what a reduce pops and pushes
    rule_rhs[rule_rhs_start[r]:rule_rhs_start[r+1]]   the right-hand side
    state_symbol[s]   accessing symbol of s (-1 for state 0)
    kernel_rule/kernel_dot[kernel_start[s]:kernel_start[s+1]]   kernel of s

Policy.
- No default reductions: a reduce appears in a row only on its exact LALR(1)
  lookaheads (the union of the lookaheads of the canonical LR(1) states merged
  into that state), never on "any other terminal". A non-zero cell is still only
  necessary for a terminal to be viable on a given stack, not sufficient: after
  a merge, LALR(1) may reduce before it finds the error (it never shifts an
  erroneous terminal). Allowed sets therefore simulate the reduce chain
  (DESIGN section 5); the rows bound that simulation, they do not replace it.
- No precedence or associativity: any conflict raises
  :class:`~grid_core.errors.LALRConflictError`. Rows are filled in state order,
  shifts before reduces, reduces in rule order, lookaheads in id order; the first
  clash found is the one reported.
- Deterministic numbering: states are numbered in BFS order over the LR(0)
  automaton, successors taken in symbol-id order; state 0 is the start state.
- The fingerprint covers every array, the counts and all names (symbol and rule
  display names), with arrays serialized little-endian, so it is identical in
  any process on any machine.
"""

from __future__ import annotations

import functools
import operator
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, pairwise
from typing import Any, NamedTuple

from grid_core.errors import GrammarError, LALRConflictError
from grid_core.fingerprint import fingerprint as _fingerprint

__all__ = ["END_NAME", "LalrTables", "RuleArrays", "build_lalr"]

END_NAME = "$END"
_FINGERPRINT_TAG = "grid-core/lalr-tables/1"

MAX_TABLE_CELLS = 150_000_000
"""The most cells (states times terminals, $END and twice the nonterminals) the dense
tables may take (the kernels' ``lalr::MAX_TABLE_CELLS``): a larger grammar is a
:class:`GrammarError` before they are allocated, never a process out of memory."""


@dataclass(frozen=True, eq=False)
class LalrTables:
    """LALR(1) tables for one grammar; see the module header for the encoding.

    The arrays are shared, not copied: treat them as read-only (the fingerprint and
    ``check_invariants`` would no longer agree with a mutated table).
    """

    n_terminals: int
    n_nonterminals: int
    n_states: int
    action: array[int]
    goto: array[int]
    rule_lhs: array[int]
    rule_len: array[int]
    rule_rhs_start: array[int]
    rule_rhs: array[int]
    state_symbol: array[int]
    kernel_start: array[int]
    kernel_rule: array[int]
    kernel_dot: array[int]
    terminal_names: tuple[str, ...]
    nonterminal_names: tuple[str, ...]
    rule_names: tuple[str, ...] | None
    native: Any = field(default=None, compare=False, repr=False)
    """The kernels' ``Parsing`` of these tables when the kernels built them
    (``grid_kernels.lalr_tables``), else None: an engine's kernel tables take it
    as it is instead of reading the arrays back (``grid_core.kernels``)."""

    @property
    def n_rules(self) -> int:
        return len(self.rule_lhs)

    @functools.cached_property
    def fingerprint(self) -> str:
        """The fingerprint of the contents (every array, name and count), computed on
        first use: a BLAKE2b over the tables (about 1 ms for SQLite's), which an
        audit seal reads and a new role's build does not."""
        return self._compute_fingerprint()

    @functools.cached_property
    def shiftable(self) -> int:
        """Bitset of the terminals some state has an action on: the kernels' answer
        when they built the tables (:attr:`native`), else :meth:`_shiftable`."""
        if self.native is not None:
            got: int = self.native.shiftable()
            return got
        return self._shiftable()

    def _shiftable(self) -> int:
        """:attr:`shiftable` in Python, column by column (a column's slice is copied
        and scanned in C, and stops at its first action)."""
        action, w = self.action, self.n_terminals + 1
        return sum(1 << t for t in range(self.n_terminals) if any(action[t::w]))

    @functools.cached_property
    def row_terms(self) -> tuple[tuple[int, ...], ...]:
        """Per state, the symbols (terminals and ``$END``) with an action."""
        return tuple(self.terms(s) for s in range(self.n_states))

    def terms(self, state: int) -> tuple[int, ...]:
        """The symbols (terminals and ``$END``) with an action in ``state``, computed
        on first use: a parser visits few of a grammar's states (about 1.7 ms for
        all of SQLite's 624 at once), and the kernels keep their own."""
        rows = self._terms
        row = rows[state]
        if row is None:  # two threads may both compute it: the same tuple
            action, w = self.action, self.n_terminals + 1
            row = rows[state] = tuple(compress(range(w), action[state * w : (state + 1) * w]))
        return row

    @functools.cached_property
    def _terms(self) -> list[tuple[int, ...] | None]:
        return [None] * self.n_states

    def symbol_name(self, symbol: int) -> str:
        """Display name of a symbol id (terminal, $END or nonterminal)."""
        t = self.n_terminals
        if symbol < t:
            return self.terminal_names[symbol]
        if symbol == t:
            return END_NAME
        return self.nonterminal_names[symbol - t - 1]

    def rhs(self, rule: int) -> array[int]:
        return self.rule_rhs[self.rule_rhs_start[rule] : self.rule_rhs_start[rule + 1]]

    def item_str(self, rule: int, dot: int) -> str:
        """``lhs: X Y . Z`` (with `` -> name`` when the rule has its own display name)."""
        return _item_str(
            self.nonterminal_names,
            self.symbol_name,
            self.rule_lhs[rule],
            tuple(self.rhs(rule)),
            dot,
            None if self.rule_names is None else self.rule_names[rule],
        )

    def kernel(self, state: int) -> list[tuple[int, int]]:
        """The kernel items (rule, dot) of ``state``, in item order."""
        lo, hi = self.kernel_start[state], self.kernel_start[state + 1]
        return list(zip(self.kernel_rule[lo:hi], self.kernel_dot[lo:hi], strict=True))

    def check_invariants(self) -> None:
        """Assert the structural facts of the tables (the lookaheads are not recomputed).

        Shape of every array; rules well formed and rule 0 the augmented start rule;
        kernels distinct and state 0's kernel ``$start: . S``; for every state the
        LR(0) closure of its kernel predicts exactly its shifts and gotos, each to the
        state whose kernel is the advanced items and whose accessing symbol is the
        symbol read; every state discovered (BFS) from an earlier one; every reduce
        is of an item completed in that state; ACCEPT exactly on rule 0 + $END; the
        fingerprint matches the contents.
        """
        t, n, s_count = self.n_terminals, self.n_nonterminals, self.n_states
        w = t + 1
        n_rules = self.n_rules
        for arr in self._arrays():
            assert arr.typecode == "i"
        assert len(self.terminal_names) == t and len(self.nonterminal_names) == n
        assert self.rule_names is None or len(self.rule_names) == n_rules
        assert len(self.action) == s_count * w and len(self.goto) == s_count * n
        assert len(self.rule_len) == n_rules >= 1
        assert len(self.rule_rhs_start) == n_rules + 1 and self.rule_rhs_start[0] == 0
        assert self.rule_rhs_start[-1] == len(self.rule_rhs)
        rhs: list[tuple[int, ...]] = []
        for r in range(n_rules):
            assert 0 <= self.rule_lhs[r] < n
            body = tuple(self.rhs(r))
            assert len(body) == self.rule_len[r], f"rule {r}: length"
            assert all(0 <= x < t or t < x <= t + n for x in body), f"rule {r}"
            rhs.append(body)
        start_nt = self.rule_lhs[0]
        assert all(self.rule_lhs[r] != start_nt for r in range(1, n_rules))
        assert all(x != t + 1 + start_nt for body in rhs for x in body)
        rules_by_lhs: list[list[int]] = [[] for _ in range(n)]
        for r in range(n_rules):
            rules_by_lhs[self.rule_lhs[r]].append(r)

        assert s_count >= 1 and len(self.state_symbol) == s_count
        assert len(self.kernel_start) == s_count + 1 and self.kernel_start[0] == 0
        assert self.kernel_start[-1] == len(self.kernel_rule) == len(self.kernel_dot)
        kernels = [tuple(self.kernel(s)) for s in range(s_count)]
        assert len(set(kernels)) == s_count, "two states share a kernel"
        assert kernels[0] == ((0, 0),) and self.state_symbol[0] == -1

        discovered = [False] * s_count
        discovered[0] = True
        accepts = 0
        for s in range(s_count):
            assert discovered[s], f"state {s} is not reached from an earlier state"
            kernel = kernels[s]
            assert list(kernel) == sorted(kernel)
            assert s == 0 or all(0 < d <= len(rhs[r]) for r, d in kernel)
            closure = _closure_pairs(kernel, rhs, rules_by_lhs, t)
            advanced: dict[int, list[tuple[int, int]]] = {}
            complete: set[int] = set()
            for r, d in closure:
                if d < len(rhs[r]):
                    advanced.setdefault(rhs[r][d], []).append((r, d + 1))
                else:
                    complete.add(r)
            for x, targets in advanced.items():
                if x < t:
                    cell = self.action[s * w + x]
                    assert cell > 0, f"state {s}: no shift on {self.symbol_name(x)}"
                    target = cell - 1
                else:
                    target = self.goto[s * n + x - t - 1]
                assert 0 <= target < s_count, f"state {s}: transition out of range"
                assert kernels[target] == tuple(sorted(targets)), f"state {s} -> {target}"
                assert self.state_symbol[target] == x, f"state {target}: accessing symbol"
                if target > s:
                    discovered[target] = True
            for col in range(w):
                cell = self.action[s * w + col]
                if cell > 0:
                    assert col in advanced, f"state {s}: stray shift on column {col}"
                elif cell < 0:
                    r = -cell - 1
                    assert r < n_rules and r in complete, f"state {s}: stray reduce {r}"
                    assert r != 0 or col == t, "rule 0 reduced on a terminal"
                    accepts += r == 0
            if 0 in complete:
                assert self.action[s * w + t] == -1, f"state {s}: no ACCEPT"
            for a in range(n):
                if self.goto[s * n + a] != -1:
                    assert t + 1 + a in advanced, f"state {s}: stray goto on {a}"
        assert accepts >= 1, "no state accepts"
        assert self.fingerprint == self._compute_fingerprint(), "fingerprint mismatch"

    def _arrays(self) -> tuple[array[int], ...]:
        return (
            self.action,
            self.goto,
            self.rule_lhs,
            self.rule_len,
            self.rule_rhs_start,
            self.rule_rhs,
            self.state_symbol,
            self.kernel_start,
            self.kernel_rule,
            self.kernel_dot,
        )

    def _compute_fingerprint(self) -> str:
        return _fingerprint(
            (
                _FINGERPRINT_TAG,
                self.n_terminals,
                self.n_nonterminals,
                self.n_states,
                self.terminal_names,
                self.nonterminal_names,
                self.rule_names,
                [_le_bytes(a) for a in self._arrays()],
            )
        )


class RuleArrays(NamedTuple):
    """Rules as flat ``array('i')``: rule ``r`` is ``lhs[r] -> rhs[rhs_start[r]:rhs_start[r + 1]]``
    (what :func:`build_lalr` reads, and what :class:`LalrTables` keeps)."""

    lhs: array[int]
    rhs_start: array[int]
    rhs: array[int]

    @classmethod
    def of(cls, rules: Sequence[tuple[int, Sequence[int]]]) -> RuleArrays:
        """The arrays of ``(lhs, rhs)`` pairs; a :class:`~grid_core.errors.GrammarError`
        names the first rule with an id that no int32 holds."""
        try:
            return cls(
                array("i", [lhs for lhs, _ in rules]),
                array("i", accumulate((len(body) for _, body in rules), initial=0)),
                array("i", [x for _, body in rules for x in body]),
            )
        except OverflowError:
            for r, (lhs, body) in enumerate(rules):
                if not all(-(2**31) <= x < 2**31 for x in (lhs, *body)):
                    raise GrammarError(f"rule {r}: a symbol id out of range") from None
            raise


def build_lalr(
    terminal_names: Sequence[str],
    nonterminal_names: Sequence[str],
    rules: Sequence[tuple[int, tuple[int, ...]]] | RuleArrays,
    rule_names: Sequence[str] | None = None,
) -> LalrTables:
    """Build LALR(1) tables, or raise :class:`LALRConflictError` at the first conflict.

    ``rules[r] = (lhs nonterminal index, rhs symbol ids)``, or the same as
    :class:`RuleArrays`; rule 0 must be the augmented start rule, whose lhs
    appears in no other rule. ``rule_names`` are optional display names (e.g.
    lark aliases), shown in conflict messages as ``-> name`` when they differ
    from the lhs name. Malformed input raises :class:`~grid_core.errors.GrammarError`.
    """
    if not isinstance(rules, RuleArrays):
        rules = RuleArrays.of(rules)
    g = _Grammar(terminal_names, nonterminal_names, rules, rule_names)
    from grid_core import kernels  # the kernels module sits above this one

    native = kernels.load()
    if native is None:
        g.validate()
        lr0 = _Lr0(g)
        states = len(lr0.kernels)
        cells = states * (g.t + 1 + 2 * g.n)
        if cells > MAX_TABLE_CELLS:
            raise GrammarError(
                f"the grammar is too large: its LALR(1) automaton has {states} states, whose "
                f"tables would take {cells} cells (at most {MAX_TABLE_CELLS})"
            )
        return _tables(g, lr0, _lalr_lookaheads(g, lr0))
    try:
        conflict, built = native.lalr_tables(g.t, g.n, *rules)
    except ValueError as e:  # the kernels' check: name what is wrong as grid-core does
        g.validate()
        raise GrammarError(f"malformed grammar: {e}") from None
    except MemoryError as e:  # the kernels' MAX_TABLE_CELLS, checked before allocating
        raise GrammarError(f"the grammar is too large: {e}") from None
    if conflict is not None:
        kind, state, symbol, first, reduce_item = conflict
        raise LALRConflictError(
            kind, state, g.symbol_name(symbol), g.item_str(first), g.item_str(reduce_item)
        )
    n_states, *arrays, parsing = built
    action, goto, state_symbol, kernel_start, kernel_rule, kernel_dot = (
        _from_le(raw) for raw in arrays
    )
    return _assemble(
        g, n_states, action, goto, state_symbol, (kernel_start, kernel_rule, kernel_dot), parsing
    )


# --------------------------------------------------------------------------- grammar


class Items(NamedTuple):
    """The item tables: item ``base[r] + dot`` is rule ``rule[i]`` with its dot
    at ``dot[i]``; ``next[i]`` is the symbol after the dot, or -1."""

    base: list[int]
    rule: list[int]
    dot: list[int]
    next: list[int]


class _Grammar:
    """A grammar with its item tables, nullability and left corners (each built on
    first use). :meth:`validate` checks the rules; the kernels check them too, so
    the native path runs it only to name what they refused."""

    def __init__(
        self,
        terminal_names: Sequence[str],
        nonterminal_names: Sequence[str],
        rules: RuleArrays,
        rule_names: Sequence[str] | None,
    ) -> None:
        self.terminal_names = tuple(terminal_names)
        self.nonterminal_names = tuple(nonterminal_names)
        self.rule_names = None if rule_names is None else tuple(rule_names)
        self.rules = rules
        self.t = len(self.terminal_names)
        self.n = len(self.nonterminal_names)
        names = (*self.terminal_names, END_NAME, *self.nonterminal_names)
        if len(set(names)) != len(names):
            dup = sorted({x for x in names if names.count(x) > 1})
            raise GrammarError(f"symbol names must be distinct (and not {END_NAME}): {dup}")
        if not rules.lhs:
            raise GrammarError("a grammar needs at least the augmented start rule")
        if self.rule_names is not None and len(self.rule_names) != len(rules.lhs):
            raise GrammarError(f"{len(self.rule_names)} rule names for {len(rules.lhs)} rules")

    def validate(self) -> None:
        """Raise :class:`~grid_core.errors.GrammarError` for a left-hand side that is
        no nonterminal, a right-hand side symbol out of range (or ``$END``), rule
        arrays that do not line up, or a start rule whose lhs is used again."""
        t, n, (lhs, start, rhs) = self.t, self.n, self.rules
        if (
            len(start) != len(lhs) + 1
            or start[0] != 0
            or start[-1] != len(rhs)
            or any(a > b for a, b in pairwise(start))
        ):
            raise GrammarError(f"rhs_start does not delimit {len(lhs)} right-hand sides")
        for r, body in enumerate(self.rhs):
            if not 0 <= lhs[r] < n:
                raise GrammarError(f"rule {r}: lhs {lhs[r]} is not a nonterminal index")
            for x in body:
                if not (0 <= x < t or t < x <= t + n):
                    what = END_NAME if x == t else str(x)
                    raise GrammarError(f"rule {r}: rhs symbol {what} is out of range")
            if (r > 0 and lhs[r] == lhs[0]) or t + 1 + lhs[0] in body:
                raise GrammarError(
                    f"rule 0 must be the augmented start rule, but its lhs "
                    f"{self.nonterminal_names[lhs[0]]} is used again in rule {r}"
                )

    @functools.cached_property
    def lhs(self) -> list[int]:
        return self.rules.lhs.tolist()

    @functools.cached_property
    def rhs(self) -> list[tuple[int, ...]]:
        rhs = self.rules.rhs
        return [tuple(rhs[a:b]) for a, b in pairwise(self.rules.rhs_start)]

    @functools.cached_property
    def rules_by_lhs(self) -> list[list[int]]:
        by_lhs: list[list[int]] = [[] for _ in range(self.n)]
        for r, lhs in enumerate(self.lhs):
            by_lhs[lhs].append(r)
        return by_lhs

    @functools.cached_property
    def items(self) -> Items:
        """The item tables (:class:`Items`), built on first use: the native
        builder needs them only to name the items of a conflict."""
        items = Items([], [], [], [])
        for r, body in enumerate(self.rhs):
            items.base.append(len(items.rule))
            for d in range(len(body) + 1):
                items.rule.append(r)
                items.dot.append(d)
                items.next.append(body[d] if d < len(body) else -1)
        return items

    @functools.cached_property
    def nullable(self) -> list[bool]:
        """``nullable[symbol]`` for every symbol id (terminals and $END never are)."""
        t, n = self.t, self.n
        nullable = [False] * (t + 1 + n)
        changed = True
        while changed:
            changed = False
            for r, body in enumerate(self.rhs):
                x = t + 1 + self.lhs[r]
                if not nullable[x] and all(nullable[y] for y in body):
                    nullable[x] = changed = True
        return nullable

    @functools.cached_property
    def closure_items(self) -> list[tuple[int, ...]]:
        """Left corners: the dot-0 items the LR(0) closure adds for a nonterminal."""
        t, n = self.t, self.n
        first_nts: list[set[int]] = [set() for _ in range(n)]
        for r, body in enumerate(self.rhs):
            if body and body[0] > t:
                first_nts[self.lhs[r]].add(body[0] - t - 1)
        closure_items: list[tuple[int, ...]] = []
        for a in range(n):
            seen = {a}
            todo = [a]
            while todo:
                for b in first_nts[todo.pop()]:
                    if b not in seen:
                        seen.add(b)
                        todo.append(b)
            closure_items.append(
                tuple(self.items.base[r] for b in sorted(seen) for r in self.rules_by_lhs[b])
            )
        return closure_items

    def item_str(self, item: int) -> str:
        r = self.items.rule[item]
        return _item_str(
            self.nonterminal_names,
            self.symbol_name,
            self.lhs[r],
            self.rhs[r],
            self.items.dot[item],
            None if self.rule_names is None else self.rule_names[r],
        )

    def symbol_name(self, symbol: int) -> str:
        if symbol < self.t:
            return self.terminal_names[symbol]
        if symbol == self.t:
            return END_NAME
        return self.nonterminal_names[symbol - self.t - 1]


# --------------------------------------------------------------------------- LR(0)


class _Lr0:
    """The LR(0) automaton (ASU 4.7): kernels, closures and transitions, BFS-numbered."""

    def __init__(self, g: _Grammar) -> None:
        t = g.t
        item_next = g.items.next
        self.kernels: list[tuple[int, ...]] = [(g.items.base[0],)]
        self.closures: list[tuple[int, ...]] = []
        self.trans: list[dict[int, int]] = []
        index: dict[tuple[int, ...], int] = {self.kernels[0]: 0}
        s = 0
        while s < len(self.kernels):
            kernel = self.kernels[s]
            nts = {item_next[i] - t - 1 for i in kernel if item_next[i] > t}
            closure = list(kernel)
            if nts:
                seen: set[int] = set()
                for a in sorted(nts):
                    seen.update(g.closure_items[a])
                closure.extend(sorted(seen))
            groups: dict[int, list[int]] = {}
            for i in closure:
                x = item_next[i]
                if x >= 0:
                    groups.setdefault(x, []).append(i + 1)
            row: dict[int, int] = {}
            for x in sorted(groups):
                succ = tuple(sorted(groups[x]))
                target = index.get(succ)
                if target is None:
                    target = index[succ] = len(self.kernels)
                    self.kernels.append(succ)
                row[x] = target
            self.closures.append(tuple(closure))
            self.trans.append(row)
            s += 1


# --------------------------------------------------------------------------- lookaheads


def _lalr_lookaheads(g: _Grammar, lr0: _Lr0) -> dict[tuple[int, int], int]:
    """LA(q, rule) as a terminal bitset, for every completed item, by DeRemer-Pennello."""
    t = g.t
    trans = lr0.trans
    # Nonterminal transitions x = (p, A), plus a virtual (0, $start) whose Follow is
    # {$END}: it gives rule 0 its lookahead and seeds the includes of rule 0's body.
    nt_from: list[int] = []
    nt_sym: list[int] = []
    nt_index: list[dict[int, int]] = []
    for p, row in enumerate(trans):
        ids: dict[int, int] = {}
        for x in row:
            if x > t:
                ids[x] = len(nt_from)
                nt_from.append(p)
                nt_sym.append(x)
        nt_index.append(ids)
    start_sym = t + 1 + g.lhs[0]
    virtual = len(nt_from)
    nt_index[0][start_sym] = virtual
    nt_from.append(0)
    nt_sym.append(start_sym)
    n_trans = len(nt_from)

    shift_mask = [sum(1 << x for x in row if x < t) for row in trans]
    direct = [0] * n_trans
    reads: list[list[int]] = [[] for _ in range(n_trans)]
    nullable = g.nullable
    for x in range(virtual):
        q = trans[nt_from[x]][nt_sym[x]]
        direct[x] = shift_mask[q]
        reads[x] = [nt_index[q][c] for c in trans[q] if c > t and nullable[c]]
    direct[virtual] = 1 << t
    read = _digraph(reads, direct)

    includes: list[list[int]] = [[] for _ in range(n_trans)]
    lookback: dict[tuple[int, int], list[int]] = {}
    for x in range(n_trans):
        p, a = nt_from[x], nt_sym[x]
        for r in g.rules_by_lhs[a - t - 1]:
            body = g.rhs[r]
            path = [p]
            q = p
            for y in body:
                q = trans[q][y]
                path.append(q)
            lookback.setdefault((q, r), []).append(x)
            for i in range(len(body) - 1, -1, -1):
                y = body[i]
                if y > t:
                    includes[nt_index[path[i]][y]].append(x)
                if not nullable[y]:
                    break
    follow = _digraph(includes, read)

    lookaheads: dict[tuple[int, int], int] = {}
    for key, xs in lookback.items():
        mask = 0
        for x in xs:
            mask |= follow[x]
        lookaheads[key] = mask
    return lookaheads


def _digraph(relation: Sequence[Sequence[int]], base: Sequence[int]) -> list[int]:
    """F(x) = base(x) U U{ F(y) : x R y }, by DeRemer-Pennello's digraph (iterative).

    Tarjan's SCC search: ``depth[x]`` is 0 before x is visited, its stack height while
    it is open (lowered to the lowest height it reaches), and ``done`` after its
    component is closed, when every member carries the root's set.
    """
    n = len(base)
    result = list(base)
    depth = [0] * n
    done = n + 1
    stack: list[int] = []
    for root in range(n):
        if depth[root]:
            continue
        stack.append(root)
        depth[root] = len(stack)
        work = [root]  # the open path, as in the recursive formulation
        heights = [len(stack)]
        cursor = [0]
        while work:
            x = work[-1]
            edges = relation[x]
            i = cursor[-1]
            if i < len(edges):
                cursor[-1] = i + 1
                y = edges[i]
                if depth[y] == 0:
                    stack.append(y)
                    depth[y] = len(stack)
                    work.append(y)
                    heights.append(len(stack))
                    cursor.append(0)
                else:
                    if depth[y] < depth[x]:
                        depth[x] = depth[y]
                    result[x] |= result[y]
                continue
            work.pop()
            cursor.pop()
            if depth[x] == heights.pop():
                fx = result[x]
                while True:
                    z = stack.pop()
                    depth[z] = done
                    result[z] = fx
                    if z == x:
                        break
            if work:
                parent = work[-1]
                if depth[x] < depth[parent]:
                    depth[parent] = depth[x]
                result[parent] |= result[x]
    return result


# --------------------------------------------------------------------------- tables


def _tables(g: _Grammar, lr0: _Lr0, lookaheads: dict[tuple[int, int], int]) -> LalrTables:
    t, n = g.t, g.n
    w = t + 1
    n_states = len(lr0.kernels)
    action = array("i", [0]) * (n_states * w)
    goto = array("i", [-1]) * (n_states * n)
    item_next, item_rule = g.items.next, g.items.rule
    for s, row in enumerate(lr0.trans):
        for x, target in row.items():
            if x < t:
                action[s * w + x] = target + 1
            else:
                goto[s * n + x - t - 1] = target
    for s, closure in enumerate(lr0.closures):
        complete = sorted(item_rule[i] for i in closure if item_next[i] < 0)
        for r in complete:
            assert (s, r) in lookaheads, f"state {s}: rule {r} completes with no lookback"
            mask = lookaheads[(s, r)]
            assert mask or r != 0, "rule 0 without $END"
            while mask:
                low = mask & -mask
                mask ^= low
                col = low.bit_length() - 1
                cell = action[s * w + col]
                if cell == 0:
                    action[s * w + col] = -r - 1
                    continue
                reduce_item = g.item_str(g.items.base[r] + len(g.rhs[r]))
                if cell > 0:
                    shift_item = next(i for i in closure if item_next[i] == col)
                    kind, first = "shift/reduce", g.item_str(shift_item)
                else:
                    other = -cell - 1
                    kind, first = (
                        "reduce/reduce",
                        g.item_str(g.items.base[other] + len(g.rhs[other])),
                    )
                raise LALRConflictError(kind, s, g.symbol_name(col), first, reduce_item)

    state_symbol = array("i", [-1]) * n_states
    for row in lr0.trans:
        for x, target in row.items():
            state_symbol[target] = x
    kernel_start = array("i", [0])
    kernel_rule = array("i")
    kernel_dot = array("i")
    for kernel in lr0.kernels:
        for i in kernel:
            kernel_rule.append(item_rule[i])
            kernel_dot.append(g.items.dot[i])
        kernel_start.append(len(kernel_rule))
    return _assemble(
        g, n_states, action, goto, state_symbol, (kernel_start, kernel_rule, kernel_dot)
    )


def _assemble(
    g: _Grammar,
    n_states: int,
    action: array[int],
    goto: array[int],
    state_symbol: array[int],
    kernels: tuple[array[int], array[int], array[int]],
    native: Any = None,
) -> LalrTables:
    """The tables of an automaton (built in Python or by the kernels, with their
    ``Parsing`` as ``native``), with the arrays read off the rules."""
    kernel_start, kernel_rule, kernel_dot = kernels
    lhs, rhs_start, rhs = g.rules
    return LalrTables(
        n_terminals=g.t,
        n_nonterminals=g.n,
        n_states=n_states,
        action=action,
        goto=goto,
        rule_lhs=lhs,
        rule_len=array("i", map(operator.sub, rhs_start[1:], rhs_start)),
        rule_rhs_start=rhs_start,
        rule_rhs=rhs,
        state_symbol=state_symbol,
        kernel_start=kernel_start,
        kernel_rule=kernel_rule,
        kernel_dot=kernel_dot,
        terminal_names=g.terminal_names,
        nonterminal_names=g.nonterminal_names,
        rule_names=g.rule_names,
        native=native,
    )


# --------------------------------------------------------------------------- helpers


def _closure_pairs(
    kernel: Sequence[tuple[int, int]],
    rhs: Sequence[tuple[int, ...]],
    rules_by_lhs: Sequence[Sequence[int]],
    t: int,
) -> list[tuple[int, int]]:
    """LR(0) closure of a kernel given as (rule, dot) pairs (the plain textbook form)."""
    out = list(kernel)
    added: set[int] = set()
    k = 0
    while k < len(out):
        r, d = out[k]
        k += 1
        if d < len(rhs[r]) and rhs[r][d] > t and rhs[r][d] not in added:
            added.add(rhs[r][d])
            out.extend((r2, 0) for r2 in rules_by_lhs[rhs[r][d] - t - 1])
    return out


def _item_str(
    nonterminal_names: Sequence[str],
    symbol_name: Callable[[int], str],
    lhs: int,
    body: Sequence[int],
    dot: int,
    rule_name: str | None,
) -> str:
    words = [symbol_name(x) for x in body]
    words.insert(dot, ".")
    lhs_name = nonterminal_names[lhs]
    text = f"{lhs_name}: {' '.join(words)}"
    if rule_name and rule_name != lhs_name:
        text += f" -> {rule_name}"
    return text


def _from_le(raw: bytes) -> array[int]:
    """An int32 array from little-endian bytes, in the host's order."""
    a = array("i")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _le_bytes(a: array[int]) -> bytes:
    """The array's contents as little-endian 32-bit ints, whatever the host."""
    assert a.itemsize == 4, "array('i') is expected to hold 32-bit ints"
    if sys.byteorder == "little":
        return a.tobytes()
    b = array("i", a)
    b.byteswap()
    return b.tobytes()
