"""Shortest legal completions in bytes, by uniform-cost search: a test oracle.

The decode loop does not use this module: it writes the completion of the
reserve table (:mod:`grid_core.reserve`), counted in vocabulary tokens and found
without search. This search is kept as an independent oracle for the tests
(no completion the table writes is shorter in bytes than the one found here).

``shortest_completion(engine, config)`` returns the fewest bytes ``s`` such that
the output extended by ``s`` is a sentence of L, found by Dijkstra's algorithm
over configurations (stack node, remainder), where an edge appends either

- the shortest *finisher* of the remainder for a terminal it is live for (the
  shortest string that makes the remainder a lexeme of that terminal: for a
  lexicon category its nearest word), or
- a separator byte and the shortest lexeme of an allowed terminal,

and every edge is taken through the real lexer (``Lexer.advance``), so each
completion found is checked by the same code that masks. The search is bounded
(``max_configs``); None means no completion was found within the bound.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from grid_core.dfa import DEAD
from grid_core.lexer import Config
from grid_core.lexicon import NO_NODE

if TYPE_CHECKING:
    from grid_core.guide import Engine


def shortest_suffix(engine: Engine, q: int, ln: int, t: int) -> bytes | None:
    """Fewest bytes taking a remainder in scan state (q, ln) to a lexeme of terminal ``t``."""
    lexicon = engine.lexicon
    if lexicon.categories >> t & 1:
        if ln == NO_NODE:
            return None
        todo: deque[tuple[int, bytes]] = deque([(ln, b"")])
        while todo:
            node, s = todo.popleft()
            if lexicon.word_cats[node] >> t & 1 and s:
                return s
            for b, child in sorted(lexicon.children[node].items()):
                if lexicon.prefix_cats[child] >> t & 1:
                    todo.append((child, s + bytes([b])))
        return None
    dfa = engine.dfa
    seen = {q}
    queue: deque[tuple[int, bytes]] = deque([(q, b"")])
    while queue:
        state, s = queue.popleft()
        if s and dfa.accept[state] >> t & 1:
            return s
        for b in range(256):
            nxt = dfa.trans[state * 256 + b]
            if nxt != DEAD and nxt not in seen and dfa.live[nxt] >> t & 1:
                seen.add(nxt)
                queue.append((nxt, s + bytes([b])))
    return None


def shortest_completion(
    engine: Engine, config: Config, max_configs: int = 20_000, separator: bytes = b" "
) -> bytes | None:
    """The shortest byte string that completes the output into a sentence of L."""
    lexer, parser, scanner = engine.lexer, engine.parser, engine.scanner
    n_terminals = engine.grammar.n_terminals
    suffixes: dict[tuple[int, int, int], bytes | None] = {}

    def suffix(q: int, ln: int, t: int) -> bytes | None:
        key = (q, ln, t)
        if key not in suffixes:
            suffixes[key] = shortest_suffix(engine, q, ln, t)
        return suffixes[key]

    counter = 0
    heap: list[tuple[int, int, bytes, Config]] = [(0, 0, b"", config)]
    seen: set[tuple[int, bytes]] = set()
    while heap and len(seen) < max_configs:
        _, _, text, c = heapq.heappop(heap)
        key = (id(c.node), c.remainder)
        if key in seen:
            continue
        seen.add(key)
        if lexer.eos_allowed(c):
            return text
        allowed = parser.allowed(c.node)
        # Edges: finish the pending lexeme; close it with a separator; start a lexeme.
        steps: list[bytes] = [separator] if c.remainder else []
        if c.remainder:
            q, ln, _, _ = c.scan
            steps += [
                s
                for t in range(n_terminals)
                if (allowed | scanner.ignored) >> t & 1 and (s := suffix(q, ln, t))
            ]
        steps += [s for t in range(n_terminals) if allowed >> t & 1 and (s := suffix(0, 0, t))]
        for s in steps:
            nxt = lexer.advance(c, s)
            if nxt is not None and lexer.is_viable(nxt):
                counter += 1
                heapq.heappush(heap, (len(text) + len(s), counter, text + s, nxt))
    return None
