"""A lexeme that several terminals match goes as lark says (``Terminal.tie_key``).

GRID's language against lark's own LALR parser (contextual lexer) on random
sentences of several grammars: derivations of the grammar, some of them with a
token replaced, every token separated by a blank so that lexeme boundaries are
the same under maximal munch and under lark's first-match lexer (where they
differ is ``docs/lark.md``). The grammars make the tie visible in acceptance:
a keyword written as a string literal against an ``IDENT`` pattern (the
ordinary lark SQL grammar, case-sensitive and ``"..."i``), two patterns at equal
priority (lark's order: maximum width, then pattern length, then name), and a
priority that overrides the literal rule.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError

from grid_core.compile import compile_grammar
from grid_core.dfa import build_union_dfa
from grid_core.errors import (
    GrammarError,
    LALRConflictError,
    PatternError,
    UndefinedSymbolError,
)
from grid_core.grammar import load_grammar
from grid_core.lexer import Lexer, Scanner
from grid_core.lexicon import build_lexicon
from grid_core.parser import Parser
from grid_core.vocab import Vocabulary

SQL = r"""
start: select
select: "select" cols "from" IDENT where? order?
cols: "*" | col ("," col)*
col: IDENT | IDENT "as" IDENT
where: "where" cond ("and" cond)*
cond: IDENT "=" value | IDENT "in" "(" value ("," value)* ")"
value: IDENT | NUMBER | STRING
order: "order" "by" IDENT
IDENT: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
STRING: /'[^']*'/
%ignore /[ ]+/
"""
SQL_SAMPLES = {
    "IDENT": ["t", "a", "name", "wherever", "select_", "from1", "order", "by", "as"],
    "NUMBER": ["0", "42"],
    "STRING": ["'x'", "'where'"],
}

SQL_FOLDED = (
    SQL.replace('"select"', '"SELECT"i')
    .replace('"where"', '"WHERE"i')
    .replace("/[a-z_][a-z0-9_]*/", "/[A-Za-z_][A-Za-z0-9_]*/")
)
FOLDED_SAMPLES = {**SQL_SAMPLES, "IDENT": ["t", "Where", "SELECTED", "From", "ORDER", "x"]}

PATTERNS = r"""
start: item+
item: HEX "," | DEC ";" | SHORT ":" | WORD "."
HEX: /[0-9a-f]+/
DEC: /[0-9]+/
SHORT: /[0-9]{1,3}/
WORD: /[a-z]+/
%ignore " "
"""
PATTERN_SAMPLES = {
    "HEX": ["12", "ab", "1f"],
    "DEC": ["12", "7"],
    "SHORT": ["12", "7", "123"],
    "WORD": ["ab", "abc", "zz"],
}

PRIORITY = r"""
start: stmt+
stmt: "let" NAME "=" NAME ";" | NAME ":"
NAME.1: /[a-z]+/
%ignore " "
"""
PRIORITY_SAMPLES = {"NAME": ["x", "let", "lets"]}

GRAMMARS = {
    "sql": (SQL, SQL_SAMPLES),
    "sql_folded": (SQL_FOLDED, FOLDED_SAMPLES),
    "patterns": (PATTERNS, PATTERN_SAMPLES),
    "priority": (PRIORITY, PRIORITY_SAMPLES),
}


class Both:
    """One grammar under lark (LALR, contextual lexer) and under GRID's lexer and parser."""

    def __init__(self, text: str, samples: dict[str, list[str]]) -> None:
        self.lark = Lark(text, parser="lalr", lexer="contextual")
        self.samples = samples
        grammar = load_grammar(text).project(lambda _: True, "reduced")
        dfa = build_union_dfa([(t.name, t.pattern) for t in grammar.terminals])
        scanner = Scanner(grammar, dfa, build_lexicon(grammar, dfa, {}))
        self.lexer = Lexer(scanner, Parser(grammar.lalr()))
        rules: dict[str, list[list[str]]] = {}
        for r in Lark(text, parser=None, lexer="basic").rules:
            rules.setdefault(str(r.origin.name), []).append([str(s.name) for s in r.expansion])
        self.rules = rules
        every = Lark(text, parser=None, lexer="basic")
        self.literals = {
            str(t.name): t.pattern.value
            for t in every.terminals
            if t.pattern.type == "str" and t.name not in every.ignore_tokens
        }
        self.tokens = sorted({*self.literals.values(), *(w for ws in samples.values() for w in ws)})

    def sentence(self, rng: random.Random, symbol: str = "start", depth: int = 0) -> list[str]:
        if symbol in self.literals:
            return [self.literals[symbol]]
        if symbol in self.samples:
            return [rng.choice(self.samples[symbol])]
        alts = self.rules[symbol]
        if depth > 6:  # the shortest alternative, to end the derivation
            alts = [min(alts, key=len)]
        return [w for s in rng.choice(alts) for w in self.sentence(rng, s, depth + 1)]

    def lark_accepts(self, text: str) -> bool:
        try:
            self.lark.parse(text)
        except LarkError:
            return False
        return True

    def grid_accepts(self, text: str) -> bool:
        config = self.lexer.advance(self.lexer.initial, text.encode())
        return config is not None and self.lexer.eos_allowed(config)


BOTH = {name: Both(*g) for name, g in GRAMMARS.items()}


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@settings(max_examples=150, deadline=None)
@given(rng=st.randoms(use_true_random=False), mutate=st.integers(0, 2))
def test_grid_accepts_what_lark_accepts(name: str, rng: random.Random, mutate: int) -> None:
    both = BOTH[name]
    words = both.sentence(rng)
    for _ in range(mutate):
        words[rng.randrange(len(words))] = rng.choice(both.tokens)
    text = " ".join(words)
    assert both.grid_accepts(text) == both.lark_accepts(text), text


@pytest.mark.parametrize(
    ("name", "text", "accepted"),
    [
        ("sql", "select a from t where a = 1", True),  # "where" is WHERE, not IDENT
        ("sql", "select where from t", True),  # only IDENT can follow "select"
        ("sql", "select a from where where where = 1", True),  # where IDENT can, it is IDENT
        ("sql", "select a from t where", False),
        ("sql_folded", "SeLeCt a from t WHERE a = 'x'", True),
        ("patterns", "12 ,", True),  # HEX before DEC: same width, longer pattern
        ("patterns", "12 ;", False),
        ("patterns", "12 :", False),  # SHORT's maximum width 3 loses to DEC's and HEX's
        ("priority", "let : x :", True),  # NAME.1 beats the literal "let"
        ("priority", "let x = y ;", False),
    ],
)
def test_ties_by_hand(name: str, text: str, accepted: bool) -> None:
    both = BOTH[name]
    assert both.lark_accepts(text) == accepted
    assert both.grid_accepts(text) == accepted


BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {256}, (256,))


def test_compile_grammar_masks_a_user_grammar() -> None:
    engine = compile_grammar(SQL, BYTES)
    guide = engine.guide()
    guide.accept_tokens(list(b"select a from t wher"))
    assert ord("e") in guide.mask_ids()
    guide.accept_tokens(list(b"e a = 1"))
    assert guide.eos_allowed()


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("start: a\na: B\n", UndefinedSymbolError, "B"),
        ("start: A\n%declare A\n", UndefinedSymbolError, "A"),
        ('start: a | b\na.2: "x"\nb: "y"\n', GrammarError, "priority 2"),
        ("start: A\nA: /^x/\n", PatternError, "A"),
        ('start: a | b\na: "x"\nb: "x"\n', LALRConflictError, "reduce/reduce"),
        ('start: a\na: a "x"\n', GrammarError, "start"),
        ("start: (\n", GrammarError, "user"),
    ],
)
def test_compile_grammar_refuses_with_a_typed_error(
    text: str, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error) as info:
        compile_grammar(text, BYTES)
    assert needle in str(info.value)
