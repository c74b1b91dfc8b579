"""The union DFA over bytes of all terminals of a grammar.

Purpose: the scanner automaton of DESIGN.md section 3 ("lexing is maximal munch
over the union automaton of all terminals") and the O(1)-updatable scan state of
the trie walk (section 6). One DFA recognises every terminal language R_t at
once; a state tells, for the bytes read since the lexeme began,

- ``accept[s]``: the terminals t whose language contains them (bit t), and
- ``live[s]``: the terminals t such that some extension of them, possibly
  empty, is in R_t (the remainder r is *live* for t).

Contract: state 0 is the start state (the empty remainder). Every state is live
for some terminal; a byte that leaves every language dead leads to
:data:`DEAD` (``-1``), which is absorbing. ``accept[s]`` is a subset of
``live[s]``.

Construction, in four stages:

1. Each pattern becomes a trimmed Thompson NFA (:mod:`grid_core.regex_bytes`);
   the union NFA puts them side by side, each final state labelled by its
   terminal id (the index in the input sequence).
2. **Byte classes**: the coarsest partition of 0..255 that every edge's byte
   set respects; bytes of one class act identically everywhere, so the next
   stages work over classes (for a SQL lexicon about 60 instead of 256).
3. **Subset construction** (Rabin and Scott, 1959; Aho, Lam, Sethi, Ullman,
   *Compilers*, section 3.7.1) over ε-closures. Because the NFAs are trimmed,
   a non-empty subset is live for the terminals of its states and the empty
   subset is exactly DEAD.
4. **Minimisation** (J. Hopcroft, "An n log n algorithm for minimizing states in
   a finite automaton", 1971) from the initial partition by accept bitset, with
   DEAD as an explicit sink. Two states are merged only if every suffix gives
   them the same accept bitset, hence also the same live bitset.

Where the stages run: stage 1 always in Python. Stages 2-4, the numbering and
the tables run in Rust (``grid_kernels.union_dfa``, ``grid-kernels``
``src/dfa.rs``, the GIL released) whenever :func:`grid_core.kernels.load`
returns the kernels, else in Python here: the Python stages stay the reference,
and both give the same tables byte for byte (``tests/test_dfa_native.py``; by
the numbering policy below, identity is well defined). ``GRID_KERNELS=0``
forces Python. The fingerprint is computed here either way.

Numbering policy: states are numbered by breadth-first search from the start
state, trying bytes in ascending order. The minimal DFA is unique up to
isomorphism and this numbering is canonical, so the tables, and therefore the
fingerprint, depend only on the terminal names and languages: not on the
process, the machine, the hash seed or how a pattern was spelled.

Layout: flat tables a native kernel can take over as they are. ``trans`` is one
``int32`` array of ``n_states * 256`` entries (row-major by state);
``accept`` and ``live`` are per-state bitsets (Python ints, bit t for terminal t).
"""

from __future__ import annotations

import array
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from grid_core.errors import GrammarError
from grid_core.fingerprint import fingerprint
from grid_core.regex_bytes import ALL_BYTES, ByteNFA, compile_pattern

__all__ = ["DEAD", "MAX_DFA_STATES", "ByteDFA", "build_union_dfa", "union_of_nfas"]

#: The absorbing "no terminal can match any more" state.
DEAD = -1

#: Upper bound on the states of a union DFA (subset construction can blow up).
MAX_DFA_STATES = 200_000
MAX_TERMINALS = 12_000
"""The most terminals a union DFA takes (its accept and live sets are ints written
in decimal into its fingerprint, which Python limits to 4,300 digits)."""

_FINGERPRINT_TAG = "grid_core.dfa.ByteDFA/1"


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """Union DFA over bytes for terminals 0..T-1; state 0 is the start state."""

    terminal_names: tuple[str, ...]
    n_states: int
    trans: array.array[int]
    """Typecode ``'i'``, length ``n_states*256``: ``trans[s*256+b]`` = next state or DEAD."""
    accept: tuple[int, ...]
    """Per state: bitset of the terminals whose language contains the bytes read so far."""
    live: tuple[int, ...]
    """Per state: bitset of the terminals t such that some extension is in R_t."""
    fingerprint: str
    """:func:`grid_core.fingerprint.fingerprint` of the tables."""

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte`` (0..255) from ``state``; DEAD stays DEAD."""
        if state == DEAD:
            return DEAD
        return self.trans[state * 256 + byte]

    def run(self, state: int, data: bytes) -> int:
        """The state after reading ``data`` from ``state``; DEAD as soon as it dies."""
        trans = self.trans
        for byte in data:
            if state == DEAD:
                return DEAD
            state = trans[state * 256 + byte]
        return state

    def matches(self, data: bytes, terminal: int) -> bool:
        """Whether ``data``, read whole from the start state, is a lexeme of ``terminal``.
        (The state ``data`` leads to is remembered: a schema's words are checked
        by every lexicon built over them.)"""
        state = _end_state(self, bytes(data))
        return state != DEAD and bool(self.accept[state] >> terminal & 1)

    def check_invariants(self) -> None:
        """Raise AssertionError unless the tables satisfy the module's contract.

        Checks: shapes and typecode; every transition in range; every state live
        for some terminal and accepting only what it is live for; ``live`` solves
        ``live[s] = accept[s] | OR(live[t] for s -> t)``; the numbering is the
        canonical breadth-first one (so every state is reachable); the
        fingerprint matches the tables.
        """
        n, n_terms = self.n_states, len(self.terminal_names)
        _require(n_terms >= 1, "no terminals")
        _require(len(set(self.terminal_names)) == n_terms, "duplicate terminal names")
        _require(n >= 1, "no start state")
        _require(self.trans.typecode == "i", f"trans typecode {self.trans.typecode!r}")
        _require(len(self.trans) == n * 256, "trans has the wrong length")
        _require(len(self.accept) == n and len(self.live) == n, "accept/live length")
        _require(all(DEAD <= t < n for t in self.trans), "a transition is out of range")
        every = (1 << n_terms) - 1
        for s in range(n):
            acc, live = self.accept[s], self.live[s]
            _require(live != 0, f"state {s} is dead but not collapsed into DEAD")
            _require(live & ~every == 0, f"state {s} is live for an unknown terminal")
            _require(acc & ~live == 0, f"state {s} accepts a terminal it is not live for")
            below = acc
            for t in self.trans[s * 256 : s * 256 + 256]:
                if t != DEAD:
                    below |= self.live[t]
            _require(live == below, f"state {s}: live is not accept | live of successors")
        _require(_bfs_order(self.trans, n) == list(range(n)), "numbering is not canonical BFS")
        _require(
            self.fingerprint
            == _fingerprint(self.terminal_names, self.trans, self.accept, self.live),
            "fingerprint does not match the tables",
        )


@lru_cache(maxsize=1 << 16)
def _end_state(dfa: ByteDFA, data: bytes) -> int:
    """``dfa.run(0, data)``, remembered (a DFA is immutable; keyed by identity)."""
    return dfa.run(0, data)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(f"ByteDFA invariant: {message}")


def build_union_dfa(
    terminals: Sequence[tuple[str, str]], *, max_states: int = MAX_DFA_STATES
) -> ByteDFA:
    """The minimal union DFA of ``terminals``, a sequence of (name, regex source).

    The index of a pair in the sequence is its terminal id (its bit in
    ``accept``/``live``). Preconditions: at least one terminal, distinct names.
    Raises :class:`PatternError` for a pattern :mod:`grid_core.regex_bytes`
    rejects and :class:`GrammarError` for a bad sequence or more than
    ``max_states`` subset states.
    """
    names = [name for name, _ in terminals]
    return union_of_nfas(
        names, [compile_pattern(name, pattern) for name, pattern in terminals], max_states
    )


def union_of_nfas(
    names: Sequence[str], nfas: Sequence[ByteNFA], max_states: int = MAX_DFA_STATES
) -> ByteDFA:
    """The minimal union DFA of already compiled terminal NFAs (see :func:`build_union_dfa`)."""
    if not names:
        raise GrammarError("a union DFA needs at least one terminal")
    if len(names) > MAX_TERMINALS:
        raise GrammarError(
            f"{len(names):,} terminals: a union DFA takes at most {MAX_TERMINALS:,} (a choice "
            "or enum of this many strings is better a pattern)"
        )
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise GrammarError(f"duplicate terminal names: {', '.join(dup)}")
    assert len(names) == len(nfas)
    from grid_core import kernels  # the kernels module sits above this one

    native = kernels.load()
    if native is not None:
        return _native_union(native, tuple(names), nfas, max_states)
    union = _UnionNFA(nfas)
    classes = _byte_classes([mask for mask, _ in union.edges if mask])
    rows, accepts = _subset_construction(union, classes, max_states)
    rows, accepts, start = _minimise(rows, accepts, len(classes))
    return _tables(tuple(names), classes, rows, accepts, start)


# -- stages 2-4 by the kernels ------------------------------------------------------


def _native_union(
    native: ModuleType, names: tuple[str, ...], nfas: Sequence[ByteNFA], max_states: int
) -> ByteDFA:
    """Stages 2-4 and the tables by the kernels, from the NFAs' flat arrays side
    by side (the layout of ``grid_kernels.union_dfa``: local state ids, each
    NFA's byte-set rows after the previous NFA's, counted from its ``mask_base``)."""
    eps_len, eps_targets = array.array("i"), array.array("i")
    edge_mask, edge_target = array.array("i"), array.array("i")
    mask_base: list[int] = []
    rows = 0
    for nfa in nfas:
        eps_len.extend(nfa.eps_len)
        eps_targets.extend(nfa.eps_targets)
        edge_mask.extend(nfa.edge_mask)
        edge_target.extend(nfa.edge_target)
        mask_base.append(rows)
        rows += len(nfa.mask_rows) // 32
    built = native.union_dfa(
        [nfa.n_states for nfa in nfas],
        [nfa.start for nfa in nfas],
        [nfa.final for nfa in nfas],
        eps_len,
        eps_targets,
        edge_mask,
        edge_target,
        b"".join(nfa.mask_rows for nfa in nfas),
        max_states,
        mask_base,
    )
    if built is None:
        raise GrammarError(f"the union DFA needs more than {max_states} states")
    n_states, raw, accept_list, live_list = built
    trans = array.array("i")
    trans.frombytes(raw)
    if sys.byteorder != "little":
        trans.byteswap()
    accept, live = tuple(accept_list), tuple(live_list)
    return ByteDFA(
        terminal_names=names,
        n_states=n_states,
        trans=trans,
        accept=accept,
        live=live,
        fingerprint=_fingerprint(names, trans, accept, live),
    )


# -- stage 1: the union NFA ------------------------------------------------------


class _UnionNFA:
    """The terminal NFAs side by side in one numbering, with ε-closures.

    A *core* state has a byte edge or is final; DFA states are sets of core
    states (the other states only relay ε-moves).
    """

    def __init__(self, nfas: Sequence[ByteNFA]) -> None:
        self.eps: list[tuple[int, ...]] = []
        self.edges: list[tuple[int, int]] = []  # (byte set, target); (0, -1) if none
        self.final_bit: list[int] = []  # 1 << terminal for a final state, else 0
        self.starts: list[int] = []
        for t, nfa in enumerate(nfas):
            base = len(self.eps)
            self.starts.append(base + nfa.start)
            for q in range(nfa.n_states):
                self.eps.append(tuple(base + r for r in nfa.eps[q]))
                e = nfa.edge[q]
                self.edges.append((e[0], base + e[1]) if e is not None else (0, -1))
                self.final_bit.append(1 << t if q == nfa.final else 0)
        self._closures: dict[int, frozenset[int]] = {}

    def core_closure(self, q: int) -> frozenset[int]:
        """The core states in the ε-closure of ``q`` (memoised)."""
        found = self._closures.get(q)
        if found is None:
            seen = {q}
            stack = [q]
            while stack:
                for r in self.eps[stack.pop()]:
                    if r not in seen:
                        seen.add(r)
                        stack.append(r)
            found = frozenset(r for r in seen if self.edges[r][0] or self.final_bit[r])
            self._closures[q] = found
        return found


# -- stage 2: byte classes -----------------------------------------------------------


def _byte_classes(masks: Sequence[int]) -> list[int]:
    """The coarsest partition of 0..255 refining every mask, ordered by least byte."""
    blocks = [ALL_BYTES]
    for mask in set(masks):
        refined = []
        for block in blocks:
            inside, outside = block & mask, block & ~mask
            refined += [part for part in (inside, outside) if part]
        blocks = refined
    return sorted(blocks, key=_least_byte)


def _least_byte(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


# -- stage 3: subset construction ------------------------------------------------------


def _subset_construction(
    union: _UnionNFA, classes: list[int], max_states: int
) -> tuple[list[list[int]], list[int]]:
    """Class-level transition rows (DEAD for the empty subset) and accept bitsets."""
    # For each core state with an edge: the classes it moves on and where to.
    moves: dict[int, tuple[list[int], frozenset[int]]] = {}
    for q, (mask, target) in enumerate(union.edges):
        if mask:
            on = [c for c, block in enumerate(classes) if block & mask]
            moves[q] = (on, union.core_closure(target))
    start: frozenset[int] = frozenset().union(*(union.core_closure(s) for s in union.starts))
    index = {start: 0}
    subsets = [start]
    rows: list[list[int]] = []
    accepts: list[int] = []
    n_classes = len(classes)
    for subset in subsets:  # grows while iterating: breadth-first
        buckets: list[set[int]] = [set() for _ in range(n_classes)]
        accept = 0
        for q in subset:
            accept |= union.final_bit[q]
            move = moves.get(q)
            if move is not None:
                for c in move[0]:
                    buckets[c] |= move[1]
        row = []
        for bucket in buckets:
            if not bucket:
                row.append(DEAD)
                continue
            key = frozenset(bucket)
            j = index.get(key)
            if j is None:
                if len(subsets) >= max_states:
                    raise GrammarError(f"the union DFA needs more than {max_states} states")
                j = index[key] = len(subsets)
                subsets.append(key)
            row.append(j)
        rows.append(row)
        accepts.append(accept)
    return rows, accepts


# -- stage 4: Hopcroft minimisation ------------------------------------------------------


def _minimise(
    rows: list[list[int]], accepts: list[int], n_classes: int
) -> tuple[list[list[int]], list[int], int]:
    """Merge equivalent states (Hopcroft). Returns quotient rows, accepts, start block.

    DEAD becomes the explicit sink ``n``, a block of its own (every other state
    is live); in the result it is DEAD again.
    """
    n = len(rows)
    sink = n
    delta = [list(row) for row in rows] + [[sink] * n_classes]
    for row in delta:
        for c, t in enumerate(row):
            if t == DEAD:
                row[c] = sink
    inverse: list[dict[int, list[int]]] = [{} for _ in range(n_classes)]
    for s, row in enumerate(delta):
        for c, t in enumerate(row):
            inverse[c].setdefault(t, []).append(s)

    by_accept: dict[int, list[int]] = {}
    for s in range(n + 1):
        by_accept.setdefault(accepts[s] if s < n else 0, []).append(s)
    blocks: list[set[int]] = [set(members) for members in by_accept.values()]
    block_of = [0] * (n + 1)
    for b, members in enumerate(blocks):
        for s in members:
            block_of[s] = b
    pending = list(range(len(blocks)))  # splitters still to apply
    in_pending = set(pending)

    while pending:
        splitter = pending.pop()
        in_pending.discard(splitter)
        targets = list(blocks[splitter])
        for inv in inverse:
            hit: dict[int, list[int]] = {}
            for t in targets:
                for s in inv.get(t, ()):
                    hit.setdefault(block_of[s], []).append(s)
            for b, inside in hit.items():
                if len(inside) == len(blocks[b]):
                    continue
                fresh = len(blocks)
                blocks.append(set(inside))
                blocks[b].difference_update(inside)
                for s in inside:
                    block_of[s] = fresh
                if b in in_pending or len(inside) <= len(blocks[b]):
                    pending.append(fresh)
                    in_pending.add(fresh)
                else:
                    pending.append(b)
                    in_pending.add(b)

    dead_block = block_of[sink]
    assert blocks[dead_block] == {sink}, "a live state is equivalent to DEAD"
    out_rows: list[list[int]] = []
    out_accepts: list[int] = []
    for b, members in enumerate(blocks):
        rep = min(members)
        out_rows.append([DEAD if block_of[t] == dead_block else block_of[t] for t in delta[rep]])
        out_accepts.append(accepts[rep] if b != dead_block else 0)
    # The dead block stays in the list (never reached); _tables drops it.
    return out_rows, out_accepts, block_of[0]


# -- canonical numbering and the flat tables -------------------------------------------


def _tables(
    names: tuple[str, ...],
    classes: list[int],
    rows: list[list[int]],
    accepts: list[int],
    start: int,
) -> ByteDFA:
    """Renumber by BFS from ``start`` and expand class rows to 256-byte rows.

    Classes are ordered by least byte, so visiting classes in order discovers
    successors in the same order as visiting bytes 0..255 would.
    """
    number = {start: 0}
    order = [start]
    for s in order:  # grows while iterating
        for t in rows[s]:
            if t != DEAD and t not in number:
                number[t] = len(order)
                order.append(t)
    class_of = [0] * 256
    for c, block in enumerate(classes):
        for b in range(256):
            if block >> b & 1:
                class_of[b] = c
    trans: array.array[int] = array.array("i")
    for s in order:
        row = [DEAD if t == DEAD else number[t] for t in rows[s]]
        trans.extend([row[c] for c in class_of])
    accept = tuple(accepts[s] for s in order)
    live = _live(trans, accept)
    assert all(live), "a reachable state is dead: a terminal NFA was not trimmed"
    return ByteDFA(
        terminal_names=names,
        n_states=len(order),
        trans=trans,
        accept=accept,
        live=live,
        fingerprint=_fingerprint(names, trans, accept, live),
    )


def _live(trans: array.array[int], accept: tuple[int, ...]) -> tuple[int, ...]:
    """Least solution of ``live[s] = accept[s] | OR(live[t] for s -> t)`` (worklist)."""
    n = len(accept)
    pred: list[set[int]] = [set() for _ in range(n)]
    for s in range(n):
        for t in set(trans[s * 256 : s * 256 + 256]):
            if t != DEAD:
                pred[t].add(s)
    live = list(accept)
    work = deque(range(n))
    while work:
        t = work.popleft()
        for s in pred[t]:
            merged = live[s] | live[t]
            if merged != live[s]:
                live[s] = merged
                work.append(s)
    return tuple(live)


def _bfs_order(trans: array.array[int], n: int) -> list[int]:
    """States in breadth-first order from 0, bytes ascending."""
    seen = {0}
    order = [0]
    for s in order:
        for t in trans[s * 256 : s * 256 + 256]:
            if t != DEAD and t not in seen:
                seen.add(t)
                order.append(t)
    return order


def _fingerprint(
    names: tuple[str, ...], trans: array.array[int], accept: tuple[int, ...], live: tuple[int, ...]
) -> str:
    """Fingerprint of the tables; ``trans`` is encoded as little-endian int32."""
    assert trans.itemsize == 4, "array typecode 'i' must be 32 bits"
    if sys.byteorder == "little":
        raw = trans.tobytes()
    else:
        swapped = array.array("i", trans)
        swapped.byteswap()
        raw = swapped.tobytes()
    return fingerprint((_FINGERPRINT_TAG, names, len(accept), raw, accept, live))
