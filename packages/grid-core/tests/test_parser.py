"""Allowed terminals (``grid_core.parser``): A(stack) simulates the reduce chain.

The hand-checkable grammar below is LALR(1) only by merging: the states after
``a c`` and ``b c`` share the core ``e -> C .``, so the merged state reduces on
both ``X`` and ``Y``. Its raw row over-approximates: after ``a c`` only ``X`` can
follow (``Y`` reduces, then finds no action). A(stack) must simulate the
reductions on the live stack (DESIGN.md section 5), never read the raw row.
"""

from __future__ import annotations

import pytest

from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.vocab import Vocabulary
from grid_spec import Language

MERGED = """
start: A e X | B e Y
e: C
A: "a"
B: "b"
C: "c"
X: "x"
Y: "y"
"""
GRAMMAR = load_grammar(MERGED, "merged")
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {256}, (256,))


@pytest.mark.parametrize(
    ("prefix", "follows", "raw_extra"), [(b"ac", b"x", b"y"), (b"bc", b"y", b"x")]
)
def test_allowed_simulates_the_reduce_chain(
    prefix: bytes, follows: bytes, raw_extra: bytes
) -> None:
    engine = Engine(GRAMMAR, BYTES, cache=False)
    engine.kernel = None
    guide = GridGuide(engine)
    for b in prefix:
        guide.accept_token(b)
    # ``c`` is still pending (a longer lexeme could follow): shift it as its emission would.
    assert guide.config.remainder == b"c"
    parser, tables = engine.parser, engine.tables
    node = parser.shift(guide.config.node, GRAMMAR.terminal_id("C"))
    ids = {name: GRAMMAR.terminal_id(name) for name in ("X", "Y")}
    want, extra = ids[follows.upper().decode()], ids[raw_extra.upper().decode()]
    # The raw row has an action on both (the merge), so the test tells the two apart.
    assert tables.action[node.state * parser.width + extra] != 0
    assert parser.allowed(node) == 1 << want
    spec = Language(GRAMMAR.to_lark())
    assert (
        guide.mask_ids() == sorted(spec.mask(BYTES.token_bytes, {256}, 256, prefix)) == [follows[0]]
    )
