"""Hand-checkable fixtures shared by grid-core's tests.

The toy vocabulary is byte-complete (ids 0..255 are the single bytes) plus a
few multi-byte tokens that cross terminal boundaries, an alias pair, and two
specials (EOS last)::

    256 b"select"   257 b" *"     258 b" from"   259 b" emplo"   260 b"yees"
    261 b"yees where"            262 b"yer"     263 b"sal"      264 b"insert"
    265 b"1;"       266 b"')"     267 b" where"  268 b"employees"
    269 b" from"  (alias of 258)  270 <pad>      271 <eos>
"""

from __future__ import annotations

from pathlib import Path

from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary

CRUD = load_grammar((Path(__file__).parent / "grammars" / "crud.lark").read_text(), "crud")
ANALYST: Grammar = CRUD.drop_terminals(["INSERT", "UPDATE", "DELETE"], "analyst")
LEXICON = {"TABLE_NAME": [b"employees", b"employees_public", b"orders"]}

MULTI = [
    b"select",
    b" *",
    b" from",
    b" emplo",
    b"yees",
    b"yees where",
    b"yer",
    b"sal",
    b"insert",
    b"1;",
    b"')",
    b" where",
    b"employees",
    b" from",
]
SPELLINGS = [bytes([i]) for i in range(256)] + MULTI + [b"", b""]
PAD, EOS = len(SPELLINGS) - 2, len(SPELLINGS) - 1
TOY = Vocabulary.from_spellings("toy", SPELLINGS, frozenset({PAD, EOS}), (EOS,))


def token(spelling: bytes) -> int:
    """The smallest id spelled ``spelling``."""
    return SPELLINGS.index(spelling)


def analyst_engine() -> Engine:
    return Engine(ANALYST, TOY, LEXICON)
