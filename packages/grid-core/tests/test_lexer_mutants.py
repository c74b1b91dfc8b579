"""The lexer's pieces by hand (issue 14's mutation campaign).

``test_guide.py`` and ``test_cache.py`` check the lexer through masks and
replays; these checks pin each piece of ``grid_core.lexer`` to values worked
out by hand, in milliseconds, on the analyst projection of the toy CRUD grammar
(INSERT, UPDATE, DELETE dropped, so no stack takes INSERT, UPDATE, DELETE,
INTO, VALUES, SET, "(" or ")") with its TABLE_NAME lexicon (``employees``,
``employees_public``, ``orders``), and on a three-terminal grammar where a
remainder's accepted prefix is shorter than the remainder:

- the polynomial digest and the configuration hash from their formulas;
- the scanner: ignored set, candidates (a lexicon category only on its words),
  the pick order and its memo, liveness (a category through the lexicon only),
  one step (the last accept kept across non-accepting states), a whole scan;
- the lexer: the emittable set, the initial configuration, the normal form
  ``(q, ln, p, v)``, one emission (none, refused, ignored, shifted), advances
  (the shared buffer extended in place or copied, the digest, a fresh buffer
  after an emission), finalize with a requeued tail, the EOS gate, viability.
"""

from __future__ import annotations

import hashlib

import pytest
from toy import ANALYST, LEXICON, TOY

from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.lexer import (
    DIGEST_MODULUS,
    START,
    Config,
    Lexer,
    Scanner,
    ScanState,
    extend_digest,
)
from grid_core.lexicon import NO_NODE
from grid_core.parser import Node, Parser
from grid_core.vocab import Vocabulary

ENGINE = Engine(ANALYST, TOY, LEXICON, cache=False)
T = {t.name: i for i, t in enumerate(ANALYST.terminals)}
# Rebuilt for every test (``fresh``): a mutant of a constructor acts only on the
# objects built while it is active, not on those built when the module loads.
PARSER = Parser(ENGINE.tables)
SCANNER = Scanner(ANALYST, ENGINE.dfa, ENGINE.lexicon)
LEXER = Lexer(SCANNER, PARSER)
ROOT = PARSER.root


@pytest.fixture(autouse=True)
def fresh() -> None:
    global PARSER, SCANNER, LEXER, ROOT
    PARSER = Parser(ENGINE.tables)
    SCANNER = Scanner(ANALYST, ENGINE.dfa, ENGINE.lexicon)
    LEXER = Lexer(SCANNER, PARSER)
    ROOT = PARSER.root


def term(*names: str) -> int:
    return sum(1 << T[n] for n in names)


def scan(data: bytes) -> tuple[int, int, int, int]:
    s = SCANNER.scan(data)
    assert s is not None
    return s


def advance(text: bytes) -> Config:
    config = LEXER.advance(LEXER.initial, text)
    assert config is not None
    return config


# ------------------------------------------------------------------ digest, hash


def test_extend_digest_by_hand() -> None:
    assert DIGEST_MODULUS == 2**61 - 1
    assert extend_digest(0, b"") == 0
    assert extend_digest(5, b"") == 5
    assert extend_digest(0, b"ab") == 0x6162
    assert extend_digest(0x61, b"b") == 0x6162
    assert extend_digest(0, bytearray(b"\x00a")) == 0x61
    # 2^64 - 1 = 8 (2^61 - 1) + 7
    assert extend_digest(0, b"\xff" * 8) == 7
    assert extend_digest(2**61 - 2, b"\x00") == (2**61 - 2) * 256 % (2**61 - 1)


def test_config_hash_and_remainder_by_hand() -> None:
    config = advance(b"sel")
    assert config.remainder == b"sel"
    assert isinstance(config.remainder, bytes)
    assert config.digest == extend_digest(0, b"sel")
    data = (0).to_bytes(8, "little") + (3).to_bytes(8, "little")
    data += extend_digest(0, b"sel").to_bytes(8, "little")
    want = int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")
    assert config.hash == want
    after = advance(b"select se")
    data = after.node.hash.to_bytes(8, "little") + (2).to_bytes(8, "little")
    data += extend_digest(0, b"se").to_bytes(8, "little")
    want = int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")
    assert after.hash == want


# ------------------------------------------------------------------ scanner


def test_scanner_sets() -> None:
    assert SCANNER.grammar is ANALYST
    assert SCANNER.dfa is ENGINE.dfa
    assert SCANNER.lexicon is ENGINE.lexicon
    assert SCANNER._picks == {}
    assert SCANNER.ignored == term("WS", "COMMENT")
    assert SCANNER.order == ANALYST.pick_order
    assert SCANNER.lexicon.categories == term("TABLE_NAME")


def test_scanner_refuses_another_grammars_dfa() -> None:
    other = load_grammar('start: A\nA: "a"\n', "other")
    with pytest.raises(AssertionError):
        Scanner(other, ENGINE.dfa, ENGINE.lexicon)


def test_candidates_by_hand() -> None:
    ident = term("TABLE_NAME", "COLUMN_NAME")
    words = SCANNER.lexicon
    employees, emp = scan(b"employees")[1], scan(b"emp")[1]
    assert words.word_cats[employees] == term("TABLE_NAME")
    assert SCANNER.candidates(ident, employees) == ident  # a word of TABLE_NAME
    assert SCANNER.candidates(ident, emp) == term("COLUMN_NAME")  # a prefix only
    assert SCANNER.candidates(ident, NO_NODE) == term("COLUMN_NAME")
    assert SCANNER.candidates(term("NUMBER"), NO_NODE) == term("NUMBER")
    assert SCANNER.candidates(term("SELECT", "COLUMN_NAME"), 0) == term("SELECT", "COLUMN_NAME")
    assert SCANNER.candidates(0, NO_NODE) == 0


@pytest.mark.parametrize(
    ("cands", "allowed", "picked"),
    [
        (("SELECT", "COLUMN_NAME"), ("SELECT", "COLUMN_NAME"), "SELECT"),  # priority 2
        (("SELECT", "COLUMN_NAME"), ("COLUMN_NAME",), "COLUMN_NAME"),
        (("TABLE_NAME", "COLUMN_NAME"), ("TABLE_NAME", "COLUMN_NAME"), "COLUMN_NAME"),  # name
        (("TABLE_NAME", "COLUMN_NAME"), ("TABLE_NAME",), "TABLE_NAME"),
        (("WS",), (), "WS"),  # ignored: always a pick
        (("COMMENT",), ("STAR",), "COMMENT"),
        (("STAR",), ("SELECT",), None),
        ((), ("SELECT",), None),
    ],
)
def test_pick_by_hand(cands: tuple[str, ...], allowed: tuple[str, ...], picked: str | None) -> None:
    scanner = Scanner(ANALYST, ENGINE.dfa, ENGINE.lexicon)
    want = -1 if picked is None else T[picked]
    assert scanner.pick(term(*cands), term(*allowed)) == want
    assert scanner._picks == {(term(*cands), term(*allowed)): want}
    assert scanner.pick(term(*cands), term(*allowed)) == want


def test_pick_is_memoized() -> None:
    scanner = Scanner(ANALYST, ENGINE.dfa, ENGINE.lexicon)
    scanner._picks[(term("STAR"), term("STAR"))] = T["NUMBER"]  # a planted memo entry
    assert scanner.pick(term("STAR"), term("STAR")) == T["NUMBER"]


@pytest.mark.parametrize(
    ("data", "allowed", "live"),
    [
        (b"sel", ("SELECT",), True),
        (b"sel", ("COLUMN_NAME",), True),
        (b"sel", ("STAR",), False),
        (b"sel", ("TABLE_NAME",), False),  # a category is live only on its words' prefixes
        (b"emp", ("TABLE_NAME",), True),
        (b"emp", ("STAR",), False),  # a word's prefix, but its category not allowed
        (b"emp", ("SEMICOLON",), False),
        (b"employees_", ("TABLE_NAME",), True),
        (b"employees_x", ("TABLE_NAME",), False),
        (b"employees_x", ("TABLE_NAME", "COLUMN_NAME"), True),
        (b"--", (), True),  # ignored
        (b" ", (), True),
        (b"1.", ("NUMBER",), True),
        (b"1.", ("STRING",), False),
        (b"'a", ("STRING",), True),
        (b"'a", (), False),
    ],
)
def test_live_by_hand(data: bytes, allowed: tuple[str, ...], live: bool) -> None:
    q, ln, _, _ = scan(data)
    assert SCANNER.live(q, ln, term(*allowed)) is live


def test_step_by_hand() -> None:
    s = SCANNER.step(START, 1, ord("s"))
    assert s is not None and s[1:] == (NO_NODE, 1, term("COLUMN_NAME"))
    e = SCANNER.step(START, 1, ord("e"))
    assert e is not None and e[1:] == (
        SCANNER.lexicon.children[0][ord("e")],
        1,
        term("COLUMN_NAME"),
    )
    # A length the caller passes is the accepted length recorded.
    s7 = SCANNER.step(START, 7, ord("s"))
    assert s7 is not None and s7[2] == 7
    one = scan(b"1")
    assert one[2:] == (1, term("NUMBER"))
    dot = SCANNER.step(one, 2, ord("."))
    assert dot is not None and dot[2:] == (1, term("NUMBER"))  # not accepting: kept
    assert SCANNER.step(one, 2, ord("x")) is None
    assert SCANNER.step(START, 1, ord("#")) is None
    quote = scan(b"'a")
    assert quote[2:] == (0, 0)
    closed = SCANNER.step(quote, 3, ord("'"))
    assert closed is not None and closed[2:] == (3, term("STRING"))
    # A lexicon node with no child on the byte: the lexicon path ends.
    orders = scan(b"orders")
    assert orders[1] != NO_NODE
    more = SCANNER.step(orders, 7, ord("x"))
    assert more is not None and more[1] == NO_NODE


def stepped(data: bytes) -> tuple[int, int, int, int] | None:
    """``data`` scanned one ``step`` at a time."""
    state: tuple[int, int, int, int] | None = START
    for n, b in enumerate(data, 1):
        assert state is not None
        state = SCANNER.step(state, n, b)
        if state is None:
            return None
    return state


def test_scan_by_hand() -> None:
    assert SCANNER.scan(b"") == START
    for data in (b"s", b"select", b"employees", b"emp", b"1.", b"'a'", b"--c", b"  "):
        assert SCANNER.scan(data) == stepped(data)
    select = stepped(b"select")
    assert select is not None and select[1:] == (NO_NODE, 6, term("SELECT", "COLUMN_NAME"))
    employees = stepped(b"employees")
    assert employees is not None and employees[2:] == (9, term("TABLE_NAME", "COLUMN_NAME"))
    assert SCANNER.scan(b"select *") is None
    assert SCANNER.scan(b"*a") is None
    assert SCANNER.scan(b"#") is None


# ------------------------------------------------------------------ lexer


def test_emittable_and_initial() -> None:
    # Only INSERT takes "(" and ")".
    dropped = term("INSERT", "UPDATE", "DELETE", "INTO", "VALUES", "SET", "LPAR", "RPAR")
    every = (1 << len(T)) - 1
    assert LEXER.emittable == every & ~dropped
    assert (LEXER.scanner, LEXER.parser) == (SCANNER, PARSER)
    assert not LEXER._append.locked()
    initial = LEXER.initial
    assert initial.hash == LEXER.config(ROOT, b"", 0, START, 0).hash
    assert (initial.node, initial.buffer, initial.size, initial.scan, initial.digest) == (
        ROOT,
        b"",
        0,
        START,
        0,
    )
    assert initial.normal == (0, 0, 0, b"")


def test_normal_form_by_hand() -> None:
    s = scan(b"1.")
    config = LEXER.config(ROOT, bytearray(b"1.5x"), 2, s, 7)
    assert (config.size, config.digest, config.scan) == (2, 7, s)
    assert config.normal == (s[0], NO_NODE, term("NUMBER"), b".")
    assert isinstance(config.normal[3], bytes)
    # No accepted prefix: v is dropped.
    q = scan(b"'a")
    assert LEXER.config(ROOT, b"'a", 2, q, 0).normal == (q[0], NO_NODE, 0, b"")
    # A candidate no stack takes is not part of p: "insert" is a COLUMN_NAME here.
    ins = scan(b"insert")
    assert ins[3] == term("INSERT", "COLUMN_NAME")
    assert LEXER.config(ROOT, b"insert", 6, ins, 0).normal[2:] == (term("COLUMN_NAME"), b"")
    # An accepted prefix that only an undroppable candidate has: p empty, v dropped.
    into = (ins[0], ins[1], 4, term("INTO"))
    assert LEXER.config(ROOT, b"into_x", 6, into, 0).normal == (ins[0], ins[1], 0, b"")


def test_emit_by_hand() -> None:
    assert LEXER._emit(ROOT, START) is None  # nothing accepted
    assert LEXER._emit(ROOT, scan(b"1")) is None  # NUMBER: not allowed at the root
    assert LEXER._emit(ROOT, scan(b"  ")) is ROOT  # ignored: the stack is unchanged
    assert LEXER._emit(ROOT, scan(b"--c")) is ROOT
    # STRING (14) is shifted, though WS (15) is ignored.
    cond = advance(b"select * from orders where x = ").node
    string = LEXER._emit(cond, scan(b"'a'"))
    assert string is not None and string.symbol == T["STRING"]
    assert string is PARSER.shift(cond, T["STRING"])
    node = LEXER._emit(ROOT, scan(b"select"))
    assert isinstance(node, Node)
    assert (node.parent, node.symbol) == (ROOT, T["SELECT"])
    assert node is PARSER.shift(ROOT, T["SELECT"])


def test_advance_inside_one_lexeme_shares_the_buffer() -> None:
    first = advance(b"sel")
    assert isinstance(first.buffer, bytearray)
    assert (first.remainder, first.size, first.node) == (b"sel", 3, ROOT)
    second = LEXER.advance(first, b"ect")
    assert second is not None
    assert second.buffer is first.buffer  # extended in place
    assert first.remainder == b"sel" and second.remainder == b"select"
    assert second.digest == extend_digest(0, b"select")
    assert second.scan == scan(b"select")
    # first's buffer is now longer than its remainder: the next advance copies.
    third = LEXER.advance(first, b"f")
    assert third is not None
    assert third.buffer is not first.buffer
    assert third.remainder == b"self" and second.remainder == b"select"
    assert bytes(first.buffer) == b"select"
    assert third.digest == extend_digest(0, b"self")
    same = LEXER.advance(second, b"")
    assert same is not None and same.remainder == b"select" and same.digest == second.digest


def test_advance_across_emissions() -> None:
    config = advance(b"select *")
    select = PARSER.shift(ROOT, T["SELECT"])
    assert config.node is select  # SELECT shifted, the blank skipped
    assert config.remainder == b"*" and config.size == 1
    assert bytes(config.buffer) == b"*"
    assert config.digest == extend_digest(0, b"*") == 42
    assert config.scan == scan(b"*")
    # Continued from a remainder: the emission restarts after the accepted prefix.
    sel = advance(b"select")
    after = LEXER.advance(sel, b"  *")
    assert after is not None
    assert after.node is select and after.remainder == b"*"
    # "employees_x" dies at the blank with TABLE_NAME not a word: COLUMN_NAME.
    column = advance(b"select employees_x ")
    assert column.node.symbol == T["COLUMN_NAME"] and column.node.parent is select
    assert column.remainder == b" "
    assert advance(b"select * from employees_x").remainder == b"employees_x"
    assert LEXER.advance(LEXER.initial, b"select * from employees_x ") is None


def path(node: Node) -> list[Node]:
    out: list[Node] = []
    cur: Node | None = node
    while cur is not None:
        out.append(cur)
        cur = cur.parent
    return out[::-1]


def test_advance_refuses() -> None:
    assert LEXER.advance(LEXER.initial, b"* ") is None  # STAR not allowed at the root
    assert LEXER.advance(LEXER.initial, b"#") is None  # no lexeme
    assert LEXER.advance(advance(b"select"), b"#") is None
    # Not refused while the lexeme is still open, even if no stack could take it.
    assert advance(b"*").remainder == b"*"


@pytest.mark.parametrize(
    ("text", "finalized", "eos"),
    [
        (b"", True, False),
        (b"select", True, False),
        (b"select * from employees", True, False),
        (b"select * from employees;", True, True),
        (b"select * from employees ;  ", True, True),
        (b"select * from employees where id = 'a", False, False),
        (b"select * from employees where id = 1.", False, False),
        (b"select * from employees where id = 1.5;", True, True),
        (b"select * from employees;;", False, False),  # the second ";" does not shift
    ],
)
def test_finalize_and_eos_by_hand(text: bytes, finalized: bool, eos: bool) -> None:
    config = LEXER.advance(LEXER.initial, text)
    if config is None:
        assert not finalized
        return
    node = LEXER.finalize(config)
    assert (node is not None) is finalized
    assert LEXER.eos_allowed(config) is eos


def test_finalize_shifts_the_remainder() -> None:
    config = advance(b"select * from employees")
    node = LEXER.finalize(config)
    assert node is not None and node.symbol == T["TABLE_NAME"]
    assert node.parent is config.node
    assert LEXER.finalize(LEXER.initial) is ROOT


@pytest.mark.parametrize(
    ("text", "viable"),
    [
        (b"", True),
        (b"sel", True),
        (b"ins", False),  # INSERT dropped, and no COLUMN_NAME at the root
        (b"  ", True),
        (b"select * from emp", True),
        (b"select * from sal", False),  # not a prefix of a TABLE_NAME word
        (b"select ", True),
    ],
)
def test_is_viable_by_hand(text: bytes, viable: bool) -> None:
    assert LEXER.is_viable(advance(text)) is viable


# A remainder whose last accepted prefix is shorter than itself: "ab" accepts "a"
# (A) and is a prefix of "abc" (ABC); at the end of input "a" shifts, then the
# requeued "b" is lexed as B.
MINI = load_grammar('start: (A | ABC | B)+\nA: "a"\nABC: "abc"\nB: "b"\n', "lexer-mini")
MINI_VOCAB = Vocabulary.from_spellings(
    "lexer-mini", [bytes([i]) for i in range(256)] + [b""], frozenset({256}), (256,)
)
MINI_ENGINE = Engine(MINI, MINI_VOCAB, cache=False)


def test_finalize_lexes_the_requeued_tail() -> None:
    lexer = Lexer(Scanner(MINI, MINI_ENGINE.dfa, MINI_ENGINE.lexicon), MINI_ENGINE.parser)
    a, b = MINI.terminal_id("A"), MINI.terminal_id("B")
    config = lexer.advance(lexer.initial, b"bab")
    assert config is not None
    assert config.remainder == b"ab" and config.scan[2] == 1
    assert config.normal[2:] == (1 << a, b"b")
    node = lexer.finalize(config)
    assert node is not None
    ba = lexer.finalize(lexer.advance(lexer.initial, b"ba"))  # type: ignore[arg-type]
    assert ba is not None
    assert node is MINI_ENGINE.parser.shift(ba, b)
    assert ba.symbol == a
    assert lexer.eos_allowed(config)
    assert lexer.is_viable(config)  # a prefix of ABC
    # "abx": x kills "ab"; A shifts and "bx" is rescanned: "x" is no lexeme.
    assert lexer.advance(config, b"x") is None
    again = lexer.advance(config, b"b")
    assert again is not None and again.remainder == b"b"


# A lexicon category that is terminal 0.
NAMES = load_grammar('start: NAME+\nNAME: /[a-z]+/\nWS: " "\n%ignore WS\n', "lexer-names")
NAMES_ENGINE = Engine(NAMES, MINI_VOCAB, {"NAME": [b"ab"]}, cache=False)


def test_candidates_of_category_zero() -> None:
    scanner = Scanner(NAMES, NAMES_ENGINE.dfa, NAMES_ENGINE.lexicon)
    assert NAMES.terminal_id("NAME") == 0 and scanner.lexicon.categories == 1
    assert scanner.candidates(1, NO_NODE) == 0  # not a word
    ab = scanner.scan(b"ab")
    assert ab is not None and ab[1] != NO_NODE and scanner.candidates(1, ab[1]) == 1
    abc = scanner.scan(b"abc")
    assert abc is not None and abc[1:] == (NO_NODE, 3, 0)  # a NAME, but no word


# Every terminal starts with x*: the minimal DFA's start state loops on "x", so a
# step into state 0 is a live one, not a death.
LOOP = load_grammar("start: (P | Q)+\nP: /x*a/\nQ: /x*b/\n", "lexer-loop")
LOOP_ENGINE = Engine(LOOP, MINI_VOCAB, cache=False)


def test_step_into_the_start_state() -> None:
    scanner = Scanner(LOOP, LOOP_ENGINE.dfa, LOOP_ENGINE.lexicon)
    assert scanner.step(START, 1, ord("x")) == (0, NO_NODE, 0, 0)  # no lexicon: no word
    assert scanner.scan(b"xxx") == (0, NO_NODE, 0, 0)
    xa = scanner.scan(b"xxa")
    assert xa is not None and xa[2:] == (3, 1 << LOOP.terminal_id("P"))


class _CountingScanner(Scanner):
    """A scanner that counts its steps and stops a scan that never ends."""

    steps = 0

    def step(self, scan: ScanState, length: int, byte: int) -> ScanState | None:
        self.steps += 1
        assert self.steps <= 100, "the scan does not advance"
        return super().step(scan, length, byte)


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        (b"select", 6),
        # " " kills "select" (7), is rescanned (8), "*" kills the blank (9), is rescanned (10)
        (b"select *", 10),
        # 24 bytes, and each of the 7 bytes that ends a lexeme is scanned twice
        (b"select * from employees;", 24 + 7),
    ],
)
def test_advance_steps_each_byte_once_per_lexeme(text: bytes, steps: int) -> None:
    scanner = _CountingScanner(ANALYST, ENGINE.dfa, ENGINE.lexicon)
    lexer = Lexer(scanner, PARSER)
    assert lexer.advance(lexer.initial, text) is not None
    assert scanner.steps == steps
