"""Persistent, interned LALR(1) parser stacks and their allowed-terminal sets.

A stack is a chain of immutable :class:`Node` objects: each holds its parent,
the symbol that was pushed and the LALR state reached. Nodes are *structurally
interned*: pushing the same (parent, symbol, state) twice yields the same
object, so equal stacks are identical objects and anything memoized on a node
(its allowed set) is shared by every request that reaches it. Push and pop are
O(1); rollback is keeping a reference.

Each node carries the rolling configuration hash of DESIGN.md section 5:
``H(node) = low64(BLAKE2b-128(H(parent) || u32(state) || u32(symbol)))`` with
``H(root) = 0`` (little-endian; the symbol is the goto label), never the hash
of the whole stack.

Allowed terminals A(node) are computed by *simulating* the reduce chain for
each terminal on a virtual overlay above the node (nothing is interned while
simulating), with the exact LALR(1) rows: a terminal is allowed iff the parser
can shift it after reductions, and ``$END`` iff the parser reaches ACCEPT. By
the correct-prefix property of LR parsers (Aho & Johnson, "LR Parsing", 1974)
that is exactly viability.
"""

from __future__ import annotations

import hashlib
import threading
import weakref

from grid_core.lalr import LalrTables


class Node:
    """One stack cell. Immutable after construction; compare by identity."""

    __slots__ = (
        "__weakref__",
        "_allowed",
        "_shifts",
        "depth",
        "hash",
        "parent",
        "state",
        "symbol",
    )

    def __init__(self, parent: Node | None, symbol: int, state: int) -> None:
        self.parent = parent
        self.symbol = symbol
        self.state = state
        self.depth: int = 0 if parent is None else parent.depth + 1
        if parent is None:
            self.hash = 0
        else:
            data = (
                parent.hash.to_bytes(8, "little")
                + state.to_bytes(4, "little")
                + (symbol & 0xFFFFFFFF).to_bytes(4, "little")
            )
            digest = hashlib.blake2b(data, digest_size=16).digest()
            self.hash = int.from_bytes(digest[:8], "little")
        self._allowed: int | None = None
        self._shifts: dict[int, Node] | None = None

    def states(self) -> list[int]:
        """The LALR states from the bottom of the stack to this node (for tests)."""
        out: list[int] = []
        node: Node | None = self
        while node is not None:
            out.append(node.state)
            node = node.parent
        return out[::-1]


class Parser:
    """LALR(1) driver over interned stacks for one set of tables.

    Thread-safety: interning is guarded by a lock, so two threads interning the
    same cell get the same node; allowed sets are idempotent to memoize.
    """

    def __init__(self, tables: LalrTables) -> None:
        self.tables = tables
        self.end = tables.n_terminals
        self.width = tables.n_terminals + 1
        self._interned: weakref.WeakValueDictionary[tuple[Node, int, int], Node] = (
            weakref.WeakValueDictionary()
        )
        self._lock = threading.Lock()
        self.root = Node(None, -1, 0)
        self.terms = tables.terms
        """``terms(state)``: the symbols (terminals and ``$END``) with an action."""

    def push(self, parent: Node, symbol: int, state: int) -> Node:
        key = (parent, symbol, state)
        node = self._interned.get(key)
        if node is None:
            with self._lock:
                node = self._interned.get(key)
                if node is None:
                    node = Node(parent, symbol, state)
                    self._interned[key] = node
        return node

    def _run(self, node: Node, t: int, materialize: bool) -> Node | bool:
        """Reduce, then shift ``t``: the new node (``materialize``) or whether it shifts.

        Without ``materialize`` the reductions run on a virtual overlay of
        states above ``node`` and nothing is interned.
        """
        tb = self.tables
        action, goto, lhs, length = tb.action, tb.goto, tb.rule_lhs, tb.rule_len
        n_nt, w, base = tb.n_nonterminals, self.width, self.end + 1
        overlay: list[tuple[int, int]] = []  # (state, symbol) above `node`
        state = node.state
        while True:
            a = action[state * w + t]
            if a > 0:
                if not materialize:
                    return True
                for s, sym in overlay:
                    node = self.push(node, sym, s)
                return self.push(node, t, a - 1)
            if a == 0:
                return False
            rule = -a - 1
            if rule == 0:
                return not materialize and t == self.end
            n = length[rule]
            if n <= len(overlay):
                del overlay[len(overlay) - n :]
            else:
                for _ in range(n - len(overlay)):
                    assert node.parent is not None, "reduce popped past the root"
                    node = node.parent
                overlay.clear()
            top = overlay[-1][0] if overlay else node.state
            nt = lhs[rule]
            state = goto[top * n_nt + nt]
            assert state >= 0, "goto on a reduced nonterminal is undefined"
            overlay.append((state, base + nt))

    def allowed(self, node: Node) -> int:
        """A(node): bitset of the terminals (bit T = ``$END``) the parser can take."""
        a = node._allowed
        if a is None:
            a = 0
            for t in self.terms(node.state):
                if self._run(node, t, False):
                    a |= 1 << t
            node._allowed = a
        return a

    def shift(self, node: Node, t: int) -> Node:
        """The stack after reducing and shifting terminal ``t``; ``t`` must be allowed.

        Memoized per node: a CD verdict class shifts the same terminal on the
        same live stack at every step that reaches it, so the shift (and the
        allowed set memoized on its result) is computed once. The memo holds
        its results strongly: a node reached by a shift lives as long as the
        node it was shifted from (memory grows with the distinct stacks seen,
        like the mask cache, never with the output's length).
        """
        memo = node._shifts
        if memo is None:
            memo = node._shifts = {}
        result = memo.get(t)
        if result is None:
            assert t != self.end and self.allowed(node) >> t & 1, "shift of a terminal not allowed"
            shifted = self._run(node, t, True)
            assert isinstance(shifted, Node)
            result = memo.setdefault(t, shifted)
        return result

    def accepts(self, node: Node) -> bool:
        """``$END`` reaches ACCEPT from this stack."""
        return bool(self.allowed(node) >> self.end & 1)
