"""Allowed terminals (``grid_core.parser``): A(stack) simulates the reduce chain.

The hand-checkable grammar below is LALR(1) only by merging: the states after
``a c`` and ``b c`` share the core ``e -> C .``, so the merged state reduces on
both ``X`` and ``Y``. Its raw row over-approximates: after ``a c`` only ``X`` can
follow (``Y`` reduces, then finds no action). A(stack) must simulate the
reductions on the live stack (DESIGN.md section 5), never read the raw row.

Also: the rolling node hash by hand, interning and the shift memo, and on the
toy CRUD grammar the stacks the lexer materializes, byte by byte, against
lark's own parser (through ``grid_spec``).
"""

from __future__ import annotations

import pytest
from toy import CRUD

from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.parser import Node
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


def test_node_hash_and_depth_by_hand() -> None:
    """DESIGN.md section 5's rolling hash, against values computed with hashlib
    directly (the crate's ``tests/hashes.rs`` checks the same two)."""
    root = Node(None, -1, 0)
    assert (root.hash, root.depth, root.states()) == (0, 0, [0])
    first = Node(root, 7, 3)
    assert first.hash == 0xFFBD_FF49_E408_3BCC and first.depth == 1
    second = Node(first, -1, 5)  # a label of -1 hashes as 2**32 - 1
    assert second.hash == 0x111D_DAF7_7C85_BD0E and second.depth == 2
    assert second.states() == [0, 3, 5] and second.parent is first and second.symbol == -1


def test_interning_and_shift_memo() -> None:
    """Pushing the same cell twice gives the same node; a shift is memoized."""
    parser = Engine(GRAMMAR, BYTES, cache=False).parser
    a = parser.push(parser.root, 1, 2)
    assert parser.push(parser.root, 1, 2) is a and parser.push(parser.root, 1, 3) is not a
    t = GRAMMAR.terminal_id("A")
    assert parser.allowed(parser.root) >> t & 1
    shifted = parser.shift(parser.root, t)
    assert parser.shift(parser.root, t) is shifted and shifted.parent is parser.root
    assert not parser.accepts(parser.root) and not parser.accepts(shifted)


#: Sentences of every verb of the toy CRUD grammar (reductions several levels
#: deep, lists, the final ACCEPT).
SENTENCES = [
    b"select name, id from employees where id = 1 and name <> 'x';",
    b"insert into orders (id, name) values (1, 'a');",
    b"update orders set id = 2, name = 'b' where id >= 3;",
    b"delete from orders;",
]


@pytest.mark.parametrize("text", SENTENCES)
def test_materialized_stacks_allow_what_the_spec_allows(text: bytes) -> None:
    """Byte by byte, the stack the lexer materializes (``Parser.shift``) allows
    exactly the terminals lark's parser accepts after the same lexemes, ``$END``
    included (``grid_spec``: no table of ours is read)."""
    spec = Language(CRUD.to_lark())
    engine = Engine(CRUD, BYTES, cache=False)
    engine.kernel = None
    parser, names = engine.parser, [t.name for t in CRUD.terminals]
    config = engine.lexer.initial
    for i in range(len(text) + 1):
        if i:
            after = engine.lexer.advance(config, text[i - 1 : i])
            assert after is not None
            config = after
        scanned = spec.scan(text[:i])
        assert scanned is not None
        a = parser.allowed(config.node)
        ours = {names[t] for t in range(len(names)) if a >> t & 1}
        ours |= {"$END"} if parser.accepts(config.node) else set()
        assert ours == scanned[0][1], text[:i]
    end = engine.lexer.finalize(config)
    assert end is not None and parser.accepts(end)
