"""The kernels' subtree memo: cold walks assembled from memoized subtrees equal
grid-core's walks, entry for entry.

A cold walk of the kernels (``EngineTables.register``, every session miss)
goes through a memo of large trie subtrees keyed by what the subtree reads of
the allowed set (``grid_kernels`` ``chunks.rs``): chunks with holes at ignored
picks, sub-chunks, and tails stored without the bytes after the frame's last
accept. Here every root walk is registered under a fresh namespace, so the walk
cache misses and the walk is assembled from the chunks earlier walks made,
under its own allowed set and under the allowed sets of other
configurations (same subtrees, other stacks: the reuse the memo exists for).
Each handle must equal ``make_entry`` of the pure-Python walk
(``test_kernels_cold.check_entry``).

The statements are chosen for the memo's hard cases: comments after ``/`` and
numbers inside an exponent (``2.5e-``: a last accept the walk below may still
pick, with bytes after it that the tails of its deaths carry, also inside
sub-chunks),
string literals and quoted identifiers after an escaped quote, whitespace runs
(chunks of holes), the analyst lexicon (categories in the key: each identifier
position is walked again with no category and with each one alone).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

pytest.importorskip("grid_kernels._native")

from test_kernels_cold import check_entry, reference_walk
from test_kernels_parity import Pair, pair, token_cuts

from grid_core.lexer import Config

STATEMENTS = {
    "sqlite": (
        b"SELECT a /* it's a 'note' */ FROM t WHERE b = 'it''s' AND c = \"x\"\"y\" -- end\n;",
        b"SELECT 'a''b''c', \"q\"\"r\" FROM t /* x */  /* y */ WHERE d = 'e''' ;",
        b"SELECT x FROM t WHERE y > 2.5e-1 OR z < 1e+2 AND w = 3.E+4 AND b = x'0a1B' OR b = X'ff';",
    ),
    "crud": (
        b"select sal from orders where sal = 'it''s' -- a note\n and yer = 'x''y';",
        b"select  yer\tfrom employees_public -- c\n where sal='a''b';",
    ),
}
CELLS = [
    pytest.param("sqlite", "qwen", id="sqlite-qwen"),
    pytest.param("crud", "cl100k", id="crud-cl100k"),
]
OTHER_STACKS = 3


@pytest.fixture(autouse=True, scope="module")
def _forget_reference_walks() -> Iterator[None]:
    """``check_entry``'s memoized Python oracle (half of the walks below repeat an
    earlier one's remainder and allowed set) holds Qwen-sized arrays: freed here."""
    yield
    reference_walk.cache_clear()


def configs(p: Pair, grammar: str) -> list[Config]:
    return [
        p.python(tokens).config
        for statement in STATEMENTS[grammar]
        for tokens, _ in token_cuts(p.engine, statement)
    ]


@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_memoized_walks_equal_make_entry(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    engine, kernels = p.engine, p.kernels
    found = configs(p, grammar)
    stacks = [c.node for c in found]
    namespaces = itertools.count(1000)
    _, hits0, misses0 = kernels.memo_stats
    walks = 0
    cats = engine.scanner.lexicon.categories
    for i, config in enumerate(found):
        others = [stacks[(i * 7 + k * 13) % len(stacks)] for k in range(OTHER_STACKS)]
        sets = [engine.parser.allowed(node) for node in [config.node, *others]]
        if sets[0] & cats:
            # The same stack with no lexicon category, then with each one alone:
            # allowed sets that differ in their categories only.
            bits = [1 << t for t in range(cats.bit_length()) if cats >> t & 1]
            sets += [sets[0] & ~cats | b for b in [0, *bits]]
        for allowed in sets:
            check_entry(p, next(namespaces), 0, config.remainder, allowed, config.normal)
            walks += 1
    chunks, hits, misses = kernels.memo_stats
    assert walks >= 100 and chunks > 0
    # Subtrees were found, not walked: the test exercises the memo.
    assert hits - hits0 > 1000 and misses - misses0 > 0, (hits - hits0, misses - misses0)
