"""The reserve table: per-configuration completion cost in vocabulary tokens.

Reference: DESIGN.md section 7 (termination, mode 1) and section 8 step 3;
``proofs/Reserve.v`` (theorem 4): the loop terminates with any reserve whose
written completion is legal and no longer than it; a safety margin of at least
the largest one-token rise of the reserve keeps the early trigger from firing
(``termination_with_reserve``).

Vocabulary (used in this sense throughout):

- **token cost** of a byte string: the fewest vocabulary tokens whose
  spellings concatenate to it (a shortest path over the token trie,
  :meth:`ReserveTable.split`). One identifier may cost several tokens.
- **piece** of a terminal t: ``b" " + x`` for one lexeme ``x`` of t (for a
  lexicon category, one of its words) chosen so that, wherever t can be
  shifted, ``x`` lexes alone and is picked as t: t comes first in pick order
  among the candidates of ``x`` that can share a parser row with t (or are
  ignored), a following space kills ``x``, and ``x``'s first byte kills the
  whitespace before it. ``cost(t)`` is the token cost of its piece.
- **cost(A)** of a nonterminal: the least sum of terminal costs over the
  sentences A derives (Knuth's generalisation of Dijkstra's algorithm, "A
  generalization of Dijkstra's algorithm", IPL 6(1), 1977); ``rest(item)`` of
  an LR(0) item ``A -> alpha . beta`` is the cost of ``beta``.
- **cell vector** of a stack node m: for every symbol X with a transition out
  of m's state, ``G(m, X)``, the least cost to complete the sentence once X is
  pushed on m. With ``s' = goto(state(m), X)``, every kernel item of s' has X
  before its dot, and

      G(m, X) = min over kernel items (A -> alpha X . beta) of s' of
                rest(item) + G(ancestor(m, |alpha|), A)     (0 for rule 0)

  (an item with ``|alpha| = 0`` refers to m's own vector: those unit edges are
  solved by Dijkstra inside the cell). Kernel items of the state a stack
  reaches are valid for it (every one extends the stack's viable prefix to a
  sentential form), and every completion is an LR parse that pops the top
  cell through one of them, so this is the least cost over all completions.
  A vector reads the vectors of at most ``max rule length - 1`` ancestors and
  is memoized per interned node (nodes are immutable): the stack's reserve
  costs O(1) amortized per new node, never a walk of the stack.
- **reserve** of a configuration (node, remainder r): 0 when EOS is legal;
  otherwise the least, over the **finish options** of r, of the token cost of
  the option's suffix plus the node reserve of the stack it leaves. A finish
  option is the shortest byte string s (per candidate set reached) that makes
  ``r + s`` a whole lexeme that a following piece's space ends (or that a
  following space joins into one ignored lexeme, or that a newline ends, or,
  where whitespace would continue it, that the next piece written without its
  space ends: an *abutting* option, PostgreSQL's ``CAST(x AS date`` whose
  ``date`` a space would carry on into ``date '2024-01-31'``; kept apart, so
  it shadows no other option of its candidates), found by a breadth-first
  search over (DFA state, lexicon node) pairs from r's scan state, memoized
  per pair; the pick is then the scanner's own under the stack's exact allowed
  set. Where the output is empty or ends in
  whitespace that the next space would join, the first piece drops its leading
  space when that saves a token (the *lead discount*).

Exact and upper bound. ``G`` and the node reserve are *exact* minima over
every derivation, for the additive cost model (terminal t costs ``cost(t)``).
The model itself is an upper bound on the true fewest tokens: each lexeme is
written as its own piece with a leading space (no token spans two lexemes, no
separator is dropped), a terminal's piece is the cheapest among the single-
token pieces of the vocabulary and a bounded list of short candidates (exact
when some token spells a whole piece, i.e. when the cost is 1), a finish
option is the shortest suffix in bytes rather than in tokens. The completion
the table writes (:meth:`ReserveTable.completion`) follows the same argmins,
so its length equals the reserve, and every token of it is in the mask: the
written bytes are a sentence of the grammar whose every lexeme is picked as
planned and every intermediate remainder is a prefix of a planned lexeme.
Theorem 4's hypotheses are tested, not proved, for this table
(``tests/test_reserve.py``): reserve 0 iff EOS is legal; every suffix of a
written completion is priced at most its length (the reserve is met one token
at a time); the one-token rise stays within ``DEFAULT_SAFETY``.

Native. :meth:`ReserveTable.native` hands the grammar-level half (pieces and
their tokens, argmin rules, kernel items, byte classes, separator-safe states)
to the kernels (``grid_kernels`` ``reserve.rs``), which compute the
per-configuration half (cells, finish options, token costs) the same way; the
native guide's mode-1 loop reads that (:class:`grid_core.kernels.NativeReserve`),
and ``tests/test_reserve.py`` checks both give the same reserve and completion
at every configuration of random walks and after every token admitted there.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grid_core.dfa import DEAD
from grid_core.errors import GridError
from grid_core.lexer import Config
from grid_core.lexicon import NO_NODE
from grid_core.parser import Node

if TYPE_CHECKING:
    from grid_core.guide import Engine

__all__ = [
    "DEFAULT_SAFETY",
    "INF",
    "ReserveError",
    "ReserveTable",
    "reserve_table",
]

#: Cost of what cannot be written at all.
INF = 1 << 40

#: The trigger's default safety margin. The largest one-token rise of the
#: reserve measured on the SQLite dialect's example roles is 8 with cl100k
#: (every admitted token at 600 walk configurations) and 11 with cl100k's first
#: 2,048 ids (bench/walk_arm.py); a rise beyond the margin is still caught by
#: the decode loop's early trigger (grid_core.decode), so the margin is a
#: tuning choice, not a soundness condition.
DEFAULT_SAFETY = 16

#: Candidate lexemes tried per terminal when no single token spells a piece.
_CANDIDATES = 24
#: Product states a finish-option search may visit.
_FINISH_LIMIT = 50_000

_SPACE, _NEWLINE = 0x20, 0x0A


class ReserveError(GridError):
    """The reserve cannot be computed: a terminal has no writable lexeme, or the
    grammar lexes no space as an ignored separator (the message names which)."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"reserve table: {what}")


@dataclass(frozen=True)
class _Option:
    """One way to finish a remainder: append ``suffix``; the lexeme gets ``cands``.

    ``end``: usable only as the last lexeme before EOS (nothing follows);
    otherwise a piece may follow (its leading space ends or joins the lexeme).
    ``joined``: the lexeme is ignored whitespace that a following space would
    join, so the next piece may drop its leading space.
    ``abut``: the DFA state of ``r + suffix`` when whitespace would continue the
    lexeme (-1 otherwise): the next piece follows without its leading space, and
    only where its first byte kills that state.
    """

    suffix: bytes
    cands: int
    end: bool
    joined: bool = False
    abut: int = -1


Item = tuple[int, int, int, int]
"""A kernel item as (rest cost, rule, dot, lhs symbol)."""

Cell = dict[int, tuple[int, int, int]]
"""A cell vector: symbol X -> (G(m, X), rule, dot) of the argmin item."""


class ReserveTable:
    """Completion costs and shortest completions for one engine (see the module header).

    Built once per engine (:func:`reserve_table`); thread-compatible (memo
    tables are idempotent). ``check_invariants`` asserts the grammar-level facts.

    ``partial``: a terminal the grammar uses but no lexeme writes (a lexicon
    category with no word in this engine, such as the column names of an empty
    column scope, :mod:`grid_sql.column_scope`) costs :data:`INF` instead of
    raising :class:`ReserveError`; the table completes around it where the
    grammar allows, and :meth:`reserve` is :data:`INF` (:meth:`completion`
    raises) where it cannot.
    """

    def __init__(self, engine: Engine, *, partial: bool = False) -> None:
        self.engine = engine
        self.partial = partial
        tables, scanner, dfa = engine.tables, engine.scanner, engine.dfa
        self.n_terminals = tables.n_terminals
        self.base = tables.n_terminals + 1  # symbol id of nonterminal 0
        trie = engine.trie
        self._root_kids = [-1] * 256
        for c in trie.children(0):
            self._root_kids[trie.edge[c]] = c
        self._split_memo: dict[bytes, tuple[int, ...] | None] = {}

        q_space = dfa.trans[_SPACE]
        if q_space == DEAD or scanner.pick(dfa.accept[q_space], 0) < 0:
            raise ReserveError("a space does not lex as an ignored lexeme")
        self.q_space = q_space

        self._classes = self._byte_classes()
        if engine.kernel is not None:
            compat, singles = engine.kernel.reserve_pieces()
            self.compat: list[int] = compat
            found = {t: b" " + x for t, x in enumerate(singles) if x is not None}
        else:
            self.compat = self._compatible_rows()
            found = self._single_token_pieces()
        self.pieces = self._choose_pieces(found)
        firsts = {p[1] for p in self.pieces.values()}
        self._safe = self._separator_safe_states(firsts)
        if q_space not in self._safe:
            raise ReserveError("a space is not a separator that every piece ends")
        self.term_cost = [INF] * self.n_terminals
        self.term_tokens: list[tuple[int, ...]] = [() for _ in range(self.n_terminals)]
        self.lead_tokens: list[tuple[int, ...]] = [() for _ in range(self.n_terminals)]
        self.bare_tokens: list[tuple[int, ...] | None] = [None] * self.n_terminals
        """Per terminal: the tokens of its piece without the leading space (an
        abutting option's next piece), or None."""
        for t, piece in self.pieces.items():
            tokens = self.split(piece)
            assert tokens is not None
            self.term_cost[t] = len(tokens)
            self.term_tokens[t] = tokens
            bare = self.split(piece[1:])
            self.bare_tokens[t] = bare
            self.lead_tokens[t] = bare if bare is not None and len(bare) < len(tokens) else tokens
        used = {x for r in range(tables.n_rules) for x in tables.rhs(r) if x < self.n_terminals}
        missing = sorted(tables.terminal_names[t] for t in used if t not in self.pieces)
        if missing and not partial:
            raise ReserveError(f"no writable lexeme for terminal(s) {', '.join(missing)}")

        self.nt_cost, self.nt_rule = self._nonterminal_costs()
        self.max_pop = max(tables.rule_len[r] for r in range(tables.n_rules))
        self._items = self._kernel_items()
        self._trans: list[tuple[tuple[int, int], ...] | None] = [None] * tables.n_states
        self._cells: weakref.WeakKeyDictionary[Node, Cell] = weakref.WeakKeyDictionary()
        self._finish_memo: weakref.WeakKeyDictionary[
            Node, dict[tuple[int, int], tuple[int, _Option | None, Node | None]]
        ] = weakref.WeakKeyDictionary()
        self._options: dict[tuple[int, int], tuple[_Option, ...]] = {}
        self._discounts: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()
        self.start_cost = self._symbol_cost(tables.rhs(0)[0])
        self._native: Any = None
        if self.start_cost >= INF and not partial:
            raise ReserveError("the start symbol derives no writable sentence")

    # -- tokens ---------------------------------------------------------------

    def split(self, data: bytes) -> tuple[int, ...] | None:
        """The fewest token ids spelling ``data`` (smallest id per spelling), or None;
        memoized, in the kernels when the engine has them (the same answer as
        :meth:`_split`: ``tests/test_reserve.py``)."""
        cached = self._split_memo.get(data)
        if cached is not None or data in self._split_memo:
            return cached
        kernel = self.engine.kernel
        if kernel is None:
            result = self._split(data)
        else:
            got = kernel.token_splits([data])[0]
            result = None if got is None else tuple(got)
        self._split_memo[data] = result
        return result

    def _split(self, data: bytes) -> tuple[int, ...] | None:
        """:meth:`split` in Python: a shortest path over the token trie."""
        trie = self.engine.trie
        edge, token, size = trie.edge, trie.token, trie.size
        n = len(data)
        best = [INF] * (n + 1)
        back = [0] * (n + 1)
        tok = [-1] * (n + 1)
        best[0] = 0
        for i in range(n):
            if best[i] >= INF:
                continue
            node = self._root_kids[data[i]]
            j = i
            while node >= 0:
                j += 1
                if token[node] >= 0 and best[i] + 1 < best[j]:
                    best[j], back[j], tok[j] = best[i] + 1, i, token[node]
                if j == n:
                    break
                b, child, end = data[j], node + 1, node + size[node]
                node = -1
                while child < end:
                    e = edge[child]
                    if e == b:
                        node = child
                        break
                    if e > b:
                        break
                    child += size[child]
        result: tuple[int, ...] | None = None
        if best[n] < INF:
            out: list[int] = []
            j = n
            while j > 0:
                out.append(tok[j])
                j = back[j]
            result = tuple(reversed(out))
        return result

    def token_cost(self, data: bytes) -> int:
        tokens = self.split(data)
        return INF if tokens is None else len(tokens)

    # -- terminals ------------------------------------------------------------

    def _compatible_rows(self) -> list[int]:
        """Per terminal t: the union of the parser rows in which t has an action."""
        tables = self.engine.tables
        w = tables.n_terminals + 1
        action = tables.action
        compat = [0] * tables.n_terminals
        for s in range(tables.n_states):
            row = 0
            for t in range(tables.n_terminals):
                if action[s * w + t]:
                    row |= 1 << t
            t_bits = row
            while t_bits:
                low = t_bits & -t_bits
                compat[low.bit_length() - 1] |= row
                t_bits ^= low
        return compat

    def _lexeme_ok(self, t: int, x: bytes) -> bool:
        """``x`` is a valid lexeme for t's piece (see the module header)."""
        dfa, scanner, lexicon = self.engine.dfa, self.engine.scanner, self.engine.lexicon
        if not x or dfa.trans[self.q_space * 256 + x[0]] != DEAD:
            return False
        q = dfa.run(0, x)
        if q == DEAD or not dfa.accept[q] >> t & 1 or dfa.trans[q * 256 + _SPACE] != DEAD:
            return False
        cands = scanner.candidates(dfa.accept[q], lexicon.node_of(x))
        return bool(cands >> t & 1) and scanner.pick(cands, self.compat[t]) == t

    def _wanted(self) -> int:
        """The terminals that need a piece: those with a parser row, not ignored."""
        wanted, ignored = 0, self.engine.scanner.ignored
        for t, c in enumerate(self.compat):
            if c and not ignored >> t & 1:
                wanted |= 1 << t
        return wanted

    def _single_token_pieces(self) -> dict[int, bytes]:
        """Per terminal that needs a piece: the shortest, then bytewise least, valid
        piece ``b" " + x`` that one token spells, if any (the kernels compute the same
        in ``reserve_pieces``: ``tests/test_reserve.py``)."""
        engine = self.engine
        dfa, scanner, lexicon, trie = engine.dfa, engine.scanner, engine.lexicon, engine.trie
        wanted = self._wanted()
        found: dict[int, bytes] = {}
        # Walk the trie below b" " with the scan state of x.
        top = self._root_kids[_SPACE]
        if top >= 0:
            trans, accept = dfa.trans, dfa.accept
            token, size, edge = trie.token, trie.size, trie.edge
            stack: list[tuple[int, int, int, bytes]] = []
            for c in trie.children(top):
                stack.append((c, 0, 0, b""))
            while stack:
                node, q, ln, path = stack.pop()
                b = edge[node]
                q2 = trans[q * 256 + b]
                if q2 == DEAD:
                    continue
                ln2 = lexicon.step(ln, b)
                x = path + bytes([b])
                acc = accept[q2]
                if acc & wanted and token[node] >= 0:
                    cands = scanner.candidates(acc, ln2) & wanted
                    while cands:
                        low = cands & -cands
                        t = low.bit_length() - 1
                        cands ^= low
                        best = found.get(t)
                        if (best is None or (len(x), x) < (len(best) - 1, best[1:])) and (
                            self._lexeme_ok(t, x)
                        ):
                            found[t] = b" " + x
                end = node + size[node]
                child = node + 1
                while child < end:
                    stack.append((child, q2, ln2, x))
                    child += size[child]
        return found

    def _choose_pieces(self, singles: dict[int, bytes]) -> dict[int, bytes]:
        """Per terminal that needs a piece: its piece ``b" " + x`` of least token
        cost, one token where ``singles`` has one (:meth:`_single_token_pieces`)."""
        lexicon = self.engine.lexicon
        wanted, found = self._wanted(), dict(singles)
        # Otherwise: lexicon words, or short lexemes of the terminal's language.
        for t in range(self.n_terminals):
            if not wanted >> t & 1 or t in found:
                continue
            if lexicon.categories >> t & 1:
                candidates = sorted(lexicon.words.get(t, ()), key=lambda w: (len(w), w))
            else:
                candidates = self._short_lexemes(t)
            best_cost, best_piece = INF, b""
            for x in candidates:
                if self._lexeme_ok(t, x):
                    cost = self.token_cost(b" " + x)
                    if cost < best_cost:
                        best_cost, best_piece = cost, b" " + x
            if best_cost < INF:
                found[t] = best_piece
        return found

    def _short_lexemes(self, t: int) -> list[bytes]:
        """Up to ``_CANDIDATES`` short lexemes of terminal t (shortlex over the DFA,
        at most three strings kept per state), with their lower- and upper-case forms."""
        dfa = self.engine.dfa
        trans, accept, live = dfa.trans, dfa.accept, dfa.live
        out: list[bytes] = []
        seen: dict[int, int] = {}
        level: list[tuple[int, bytes]] = [(0, b"")]
        while level and len(out) < _CANDIDATES and len(seen) < 20_000:
            nxt: list[tuple[int, bytes]] = []
            for q, s in level:
                for b, _ in self._classes:
                    q2 = trans[q * 256 + b]
                    if q2 == DEAD or not live[q2] >> t & 1:
                        continue
                    if seen.get(q2, 0) >= 3:
                        continue
                    seen[q2] = seen.get(q2, 0) + 1
                    x = s + bytes([b])
                    if accept[q2] >> t & 1:
                        out.extend(dict.fromkeys([x, x.lower(), x.upper()]))
                    nxt.append((q2, x))
            level = nxt
        return out

    def _separator_safe_states(self, firsts: set[int]) -> frozenset[int]:
        """DFA states of a pure ignored lexeme that every piece's first byte ends."""
        dfa, scanner = self.engine.dfa, self.engine.scanner
        cats = self.engine.lexicon.categories
        safe: set[int] = set()
        for q in range(dfa.n_states):
            acc = dfa.accept[q]
            if not acc or acc & cats:
                continue
            first = scanner.pick(acc, 0)
            if first < 0 or scanner.pick(acc, (1 << self.n_terminals) - 1) != first:
                continue  # no ignored candidate, or a non-ignored one comes first
            if all(dfa.trans[q * 256 + b] == DEAD for b in firsts):
                safe.add(q)
        return frozenset(safe)

    # -- grammar ---------------------------------------------------------------

    def _symbol_cost(self, x: int) -> int:
        if x < self.n_terminals:
            return self.term_cost[x]
        return self.nt_cost[x - self.base]

    def _nonterminal_costs(self) -> tuple[list[int], list[int]]:
        """Knuth's algorithm: least cost and a well-founded argmin rule per nonterminal."""
        tables = self.engine.tables
        n_nt = tables.n_nonterminals
        cost, rule_of = [INF] * n_nt, [-1] * n_nt
        waiting = [0] * tables.n_rules
        partial = [0] * tables.n_rules
        uses: list[list[int]] = [[] for _ in range(n_nt)]
        heap: list[tuple[int, int, int]] = []
        for r in range(tables.n_rules):
            for x in tables.rhs(r):
                if x < self.n_terminals:
                    partial[r] = min(INF, partial[r] + self.term_cost[x])
                else:
                    waiting[r] += 1
                    uses[x - self.base].append(r)
            if waiting[r] == 0 and partial[r] < INF:
                heapq.heappush(heap, (partial[r], r, tables.rule_lhs[r]))
        done = [False] * n_nt
        while heap:
            c, r, a = heapq.heappop(heap)
            if done[a]:
                continue
            done[a], cost[a], rule_of[a] = True, c, r
            for r2 in uses[a]:
                partial[r2] = min(INF, partial[r2] + c)
                waiting[r2] -= 1
                if waiting[r2] == 0 and partial[r2] < INF:
                    heapq.heappush(heap, (partial[r2], r2, tables.rule_lhs[r2]))
        return cost, rule_of

    def rest(self, rule: int, dot: int) -> int:
        """Cost of the symbols after the dot of item (rule, dot)."""
        total = 0
        for x in self.engine.tables.rhs(rule)[dot:]:
            total = min(INF, total + self._symbol_cost(x))
        return total

    def _kernel_items(self) -> list[tuple[Item, ...]]:
        tables = self.engine.tables
        out: list[tuple[Item, ...]] = []
        for s in range(tables.n_states):
            items = [
                (self.rest(r, d), r, d, self.base + tables.rule_lhs[r]) for r, d in tables.kernel(s)
            ]
            out.append(tuple(sorted(items)))
        return out

    def _transitions(self, s: int) -> tuple[tuple[int, int], ...]:
        """State s's (symbol, target state) for every shift and goto, memoized (the
        kernels derive their own from the same tables)."""
        row = self._trans[s]
        if row is None:
            tables = self.engine.tables
            w, n_nt, t_count = tables.n_terminals + 1, tables.n_nonterminals, tables.n_terminals
            actions = tables.action[s * w : s * w + t_count]
            gotos = tables.goto[s * n_nt : (s + 1) * n_nt]
            row = tuple(
                [(t, a - 1) for t, a in enumerate(actions) if a > 0]
                + [(self.base + a, g) for a, g in enumerate(gotos) if g >= 0]
            )
            self._trans[s] = row
        return row

    def expand(self, symbols: Sequence[int]) -> list[int]:
        """The terminals of the least-cost sentence that ``symbols`` derive."""
        out: list[int] = []
        todo = list(reversed(symbols))
        tables = self.engine.tables
        while todo:
            x = todo.pop()
            if x < self.n_terminals:
                out.append(x)
                continue
            r = self.nt_rule[x - self.base]
            assert r >= 0, "expanding a nonterminal that derives no writable sentence"
            todo.extend(reversed(tables.rhs(r)))
        return out

    # -- stacks -------------------------------------------------------------

    def cell(self, m: Node) -> Cell:
        """The cell vector of node ``m`` (memoized; computes missing ancestors first)."""
        cell = self._cells.get(m)
        if cell is not None:
            return cell
        chain: list[Node] = []
        node: Node | None = m
        while node is not None and node not in self._cells:
            chain.append(node)
            node = node.parent
        for n in reversed(chain):
            self._cells[n] = self._compute_cell(n)
        return self._cells[m]

    def _compute_cell(self, m: Node) -> Cell:
        ancestors: list[Node] = [m]
        node = m
        for _ in range(self.max_pop):
            if node.parent is None:
                break
            node = node.parent
            ancestors.append(node)
        cells = self._cells
        dist: dict[int, tuple[int, int, int]] = {}
        edges: dict[int, list[tuple[int, int, int, int]]] = {}
        for x, target in self._transitions(m.state):
            best = (INF, -1, -1)
            for rest, r, d, lhs in self._items[target]:
                if rest >= INF:
                    continue
                if r == 0:
                    value = rest
                elif d == 1:
                    edges.setdefault(lhs, []).append((x, rest, r, d))
                    continue
                else:
                    value = min(INF, rest + cells[ancestors[d - 1]][lhs][0])
                if value < best[0]:
                    best = (value, r, d)
            dist[x] = best
        heap = [(v[0], x) for x, v in dist.items() if v[0] < INF]
        heapq.heapify(heap)
        while heap:
            v, y = heapq.heappop(heap)
            if v > dist[y][0]:
                continue
            for x, rest, r, d in edges.get(y, ()):
                if v + rest < dist[x][0]:
                    dist[x] = (v + rest, r, d)
                    heapq.heappush(heap, (v + rest, x))
        return dist

    def node_reserve(self, node: Node) -> int:
        """Least cost to complete a stack whose remainder is empty."""
        if node.parent is None:
            return self.start_cost
        return self.cell(node.parent)[node.symbol][0]

    def node_plan(self, node: Node) -> list[int]:
        """The terminals of the least-cost completion of a stack (argmins of the cells)."""
        tables = self.engine.tables
        if node.parent is None:
            return self.expand([tables.rhs(0)[0]])
        out: list[int] = []
        m, x = node.parent, node.symbol
        for _ in range(1 << 20):
            _, r, d = self.cell(m)[x]
            assert r >= 0, "no completion through this cell"
            out += self.expand(tables.rhs(r)[d:])
            if r == 0:
                return out
            for _ in range(d - 1):
                assert m.parent is not None
                m = m.parent
            x = self.base + tables.rule_lhs[r]
        raise AssertionError("the argmins of the cells form a cycle")

    # -- remainders -----------------------------------------------------------

    def _byte_classes(self) -> list[tuple[int, tuple[int, ...]]]:
        """DFA byte classes as (representative, members); printable representatives first."""
        dfa = self.engine.dfa
        groups: dict[tuple[int, ...], list[int]] = {}
        for b in range(256):
            groups.setdefault(tuple(dfa.trans[b::256]), []).append(b)
        out = []
        for members in groups.values():
            printable = [b for b in members if 0x21 <= b <= 0x7E]
            out.append(((printable or members)[0], tuple(members)))
        return sorted(out)

    def finish_options(self, q0: int, ln0: int) -> tuple[_Option, ...]:
        """Finish options of a remainder in scan state (q0, ln0) (see the module header)."""
        key = (q0, ln0)
        cached = self._options.get(key)
        if cached is not None:
            return cached
        dfa, scanner, lexicon = self.engine.dfa, self.engine.scanner, self.engine.lexicon
        trans, accept, live = dfa.trans, dfa.accept, dfa.live
        cats = lexicon.categories
        safe, q_nl = self._safe, dfa.trans[_NEWLINE]
        nl_ok = q_nl != DEAD and dfa.trans[q_nl * 256 + _SPACE] in safe
        ends: dict[int, _Option] = {}
        conts: dict[int, _Option] = {}
        abuts: dict[int, _Option] = {}  # apart: an abutting option shadows no other
        seen = {key}
        level: list[tuple[int, int, bytes]] = [(q0, ln0, b"")]
        while level and len(seen) < _FINISH_LIMIT:
            nxt: list[tuple[int, int, bytes]] = []
            for q, ln, s in level:
                acc = accept[q]
                if acc:
                    cands = scanner.candidates(acc, ln)
                    if cands:
                        ends.setdefault(cands, _Option(s, cands, True))
                        q_sp = trans[q * 256 + _SPACE]
                        if q_sp == DEAD:
                            conts.setdefault(cands, _Option(s, cands, False))
                        elif q_sp in safe:
                            joined = scanner.candidates(accept[q_sp], lexicon.step(ln, _SPACE))
                            conts.setdefault(joined, _Option(s, joined, False, True))
                        elif nl_ok and trans[q * 256 + _NEWLINE] == DEAD:
                            conts.setdefault(cands, _Option(s + b"\n", cands, False))
                        else:
                            abuts.setdefault(cands, _Option(s, cands, False, abut=q))
                kids = lexicon.children[ln] if ln != NO_NODE else {}
                steps = [(b, kids[b]) for b in sorted(kids)]
                for rep, members in self._classes:
                    b = rep if rep not in kids else next((c for c in members if c not in kids), -1)
                    if b >= 0:
                        steps.append((b, NO_NODE))
                for b, ln2 in steps:
                    q2 = trans[q * 256 + b]
                    if q2 == DEAD or (q2, ln2) in seen:
                        continue
                    if not (live[q2] & ~cats or (ln2 != NO_NODE and lexicon.prefix_cats[ln2])):
                        continue
                    seen.add((q2, ln2))
                    nxt.append((q2, ln2, s + bytes([b])))
            level = nxt
        options = tuple(ends.values()) + tuple(conts.values()) + tuple(abuts.values())
        self._options[key] = options
        return options

    def _finish(self, config: Config) -> tuple[int, _Option | None, Node | None]:
        """(reserve, option, stack after the option) for a non-empty remainder."""
        node = config.node
        q, ln = config.scan[0], config.scan[1]
        memo = self._finish_memo.get(node)
        if memo is None:
            memo = {}
            self._finish_memo[node] = memo
        hit = memo.get((q, ln))
        if hit is not None:
            return hit
        parser, scanner = self.engine.parser, self.engine.scanner
        allowed = parser.allowed(node)
        best: tuple[int, _Option | None, Node | None] = (INF, None, None)
        for option in self.finish_options(q, ln):
            u = scanner.pick(option.cands, allowed)
            if u < 0:
                continue
            after = node if scanner.ignored >> u & 1 else parser.shift(node, u)
            if option.end:
                if not parser.accepts(after):
                    continue
                cost = self.token_cost(option.suffix)
            else:
                if option.abut >= 0:
                    rest = self._abutting(option.abut, after)[0]
                else:
                    rest = self.node_reserve(after)
                if rest >= INF:
                    continue
                if option.joined:
                    rest -= self._lead_discount(after)
                cost = min(INF, self.token_cost(option.suffix) + rest)
            if cost < best[0]:
                best = (cost, option, after)
        memo[(q, ln)] = best
        return best

    def _abutting(self, q: int, node: Node) -> tuple[int, int]:
        """(cost, first terminal) of the least completion of stack ``node`` whose first
        piece is written bare, right after a lexeme in DFA state ``q``: over the
        terminals ``node`` allows whose bare piece's first byte ends that lexeme
        (the least id among equals), the bare piece's tokens plus the node reserve
        after shifting it; (INF, -1) where there is none."""
        parser, trans = self.engine.parser, self.engine.dfa.trans
        allowed = parser.allowed(node)
        best = (INF, -1)
        for t, bare in enumerate(self.bare_tokens):
            if bare is None or not allowed >> t & 1:
                continue
            if trans[q * 256 + self.pieces[t][1]] != DEAD:
                continue
            cost = min(INF, len(bare) + self.node_reserve(parser.shift(node, t)))
            if cost < best[0]:
                best = (cost, t)
        return best

    # -- configurations -------------------------------------------------------

    def _lead_discount(self, node: Node) -> int:
        """Tokens saved when the first piece of the node's plan needs no leading space."""
        d = self._discounts.get(node)
        if d is None:
            plan = self.node_plan(node)
            d = len(self.term_tokens[plan[0]]) - len(self.lead_tokens[plan[0]]) if plan else 0
            self._discounts[node] = d
        return d

    def _plan_tokens(self, node: Node, lead: bool) -> list[int]:
        """The tokens of the node's plan; with ``lead`` the first piece drops its space
        when that is cheaper (the output ends with whitespace, or is empty)."""
        tokens: list[int] = []
        for i, t in enumerate(self.node_plan(node)):
            tokens += self.lead_tokens[t] if lead and i == 0 else self.term_tokens[t]
        return tokens

    def reserve(self, config: Config) -> int:
        """Tokens the shortest completion the guide writes takes (EOS not counted)."""
        if self.engine.lexer.eos_allowed(config):
            return 0
        if not config.size:
            cost = self.node_reserve(config.node)
            return INF if cost >= INF else cost - self._lead_discount(config.node)
        cost = self._finish(config)[0]
        if cost >= INF and self.partial:
            return INF
        if cost >= INF:
            raise ReserveError(f"no finish option for the remainder {config.remainder[-32:]!r}")
        return cost

    def completion(self, config: Config) -> list[int]:
        """The token ids of the completion the reserve counts (EOS not included)."""
        if self.engine.lexer.eos_allowed(config):
            return []
        if config.size:
            cost, option, after = self._finish(config)
            if option is None or after is None:
                raise ReserveError(f"no finish option for the remainder {config.remainder[-32:]!r}")
            tokens = list(self.split(option.suffix) or ())
            if option.abut >= 0:
                first = self._abutting(option.abut, after)[1]
                tokens += self.bare_tokens[first] or ()
                tokens += self._plan_tokens(self.engine.parser.shift(after, first), False)
            elif not option.end:
                tokens += self._plan_tokens(after, option.joined)
        else:
            cost = self.reserve(config)
            if cost >= INF:
                raise ReserveError("no completion of this stack writes only writable lexemes")
            tokens = self._plan_tokens(config.node, True)
        assert len(tokens) == cost, "the written completion disagrees with the reserve"
        return tokens

    def native(self) -> Any:
        """This table in the kernels (``grid_kernels`` ``Reserve``, built once): the
        grammar-level tables computed here, handed over; the per-configuration half
        (cells, finish options, token costs) is computed in Rust, answer for answer
        as :meth:`reserve` and :meth:`completion` (``tests/test_reserve.py``), in
        memos capped by ``GRID_CACHE_MB`` (:func:`grid_core.kernels.reserve_memo_bytes`).
        Precondition: the engine has kernels (``engine.kernel``)."""
        if self._native is None:
            from grid_core.kernels import reserve_memo_bytes  # the kernels sit above

            self._native = self.engine.kernel.reserve(*self.raw(), memo_bytes=reserve_memo_bytes())
        return self._native

    def raw(self) -> tuple[Any, ...]:
        """The grammar-level tables the kernels' ``Reserve`` takes, in its argument
        order (``EngineTables.reserve``): pieces' tokens, lead tokens, argmin rules,
        right-hand sides, start cost, kernel items, byte classes, safe states, bare
        pieces."""
        tables, has = self.engine.tables, self.pieces
        return (
            [list(self.term_tokens[t]) if t in has else None for t in range(self.n_terminals)],
            [list(self.lead_tokens[t]) for t in range(self.n_terminals)],
            self.nt_rule,
            [list(tables.rhs(r)) for r in range(tables.n_rules)],
            self.start_cost,
            [list(items) for items in self._items],
            [(rep, bytes(members)) for rep, members in self._classes],
            sorted(self._safe),
            [
                None if bare is None else (self.pieces[t][1], list(bare))
                for t, bare in enumerate(self.bare_tokens)
            ],
        )

    def check_invariants(self) -> None:
        """Grammar-level facts: costs are fixpoints and every argmin is consistent."""
        tables = self.engine.tables
        for t, piece in self.pieces.items():
            assert self._lexeme_ok(t, piece[1:]), f"piece {piece!r} of terminal {t}"
            assert self.split(piece) == self.term_tokens[t]
        for a in range(tables.n_nonterminals):
            best = min(
                (
                    sum(self._symbol_cost(x) for x in tables.rhs(r))
                    for r in range(tables.n_rules)
                    if tables.rule_lhs[r] == a
                ),
                default=INF,
            )
            assert min(best, INF) == self.nt_cost[a], f"nonterminal {a} is not at its fixpoint"
            r = self.nt_rule[a]
            if r >= 0:
                plan = self.expand([self.base + a])
                assert sum(self.term_cost[t] for t in plan) == self.nt_cost[a]


_TABLES: dict[bool, weakref.WeakKeyDictionary[Engine, ReserveTable]] = {
    False: weakref.WeakKeyDictionary(),
    True: weakref.WeakKeyDictionary(),
}


def reserve_table(engine: Engine, *, partial: bool = False) -> ReserveTable:
    """The reserve table of an engine, built on first use and kept as long as the engine
    (``partial``: see :class:`ReserveTable`)."""
    tables = _TABLES[partial]
    table = tables.get(engine)
    if table is None:
        table = ReserveTable(engine, partial=partial)
        tables[engine] = table
    return table
