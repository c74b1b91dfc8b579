"""The trie walk's pieces by hand (issue 14's mutation campaign).

``test_cache.py`` and ``test_guide.py`` check the walk end to end, through
masks and replays; these checks pin ``grid_core.walk`` directly, in a second:

- ``rescan`` on remainders worked out by hand on the toy CRUD grammar (the
  three outcomes: still on the stack, an emission that shifts, a failed
  emission; ignored lexemes skipped inline);
- ``walk_from`` against its definition, token by token: the token at trie node
  ``c`` is CI iff scanning ``pending + path(c)`` from the start state, under A,
  stays on the stack with an empty or live remainder; ``c`` is a CD entry
  ``(c, t, tail)`` iff that scan shifts ``t`` (leaving ``tail``) at the byte
  into ``c`` and the scan to ``c``'s parent does not; nothing else is reported.
  The reference below scans every path from scratch (no frames, no pruning,
  no shared prefixes), over a vocabulary whose spellings cross lexemes (a
  keyword into whitespace into a keyword, a comment, a string with a doubled
  quote, a number with a fraction, two-byte operators), under the allowed sets
  of real stacks and seeded random ones, from the root and from inner nodes;
  and over two small grammars for the corners CRUD lacks (a dead remainder
  whose accepted prefix is still emitted, an ignored lexeme ended bytes late
  with its tail rescanned inside the walk, token id 0, an inner node with no
  token, a DFA whose start state loops, a token longer than the path buffer);
- the work done: ``rescan`` steps each byte once per lexeme it is scanned in,
  and the walk reads each trie edge at most once (a scan or a walk that does
  not advance fails there instead of hanging).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from toy import CRUD, LEXICON

from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.lexer import START, Scanner, ScanState
from grid_core.trie import TokenTrie
from grid_core.vocab import Vocabulary
from grid_core.walk import CDEntry, rescan, walk_from

MULTI = [
    b"select",
    b"select *",
    b"select * from",
    b"select *from",
    b" from employees",
    b" from  orders;",
    b"employees",
    b"employees_public",
    b"employ",
    b"emp ",
    b"orders where",
    b"where id",
    b"id = 1;",
    b"id<=2",
    b"id <> 'a''b'",
    b"'a''",
    b"''",
    b"1.5 ",
    b"1.",
    b"12;",
    b"--c\nselect",
    b"-- x",
    b" --c",
    b"\n\nfrom",
    b"<>",
    b"<=",
    b"<>1",
    b"*,",
    b";;",
    b"x'",
    b"and a",
    b"s",
    b"se",
]
SPELLINGS = [bytes([i]) for i in range(256)] + MULTI + [b""]
EOS = len(SPELLINGS) - 1
VOCAB = Vocabulary.from_spellings("walk-mutants", SPELLINGS, frozenset({EOS}), (EOS,))
ENGINE = Engine(CRUD, VOCAB, LEXICON, cache=False)
SCANNER, TRIE = ENGINE.scanner, ENGINE.trie
T = {t.name: i for i, t in enumerate(CRUD.terminals)}
EVERY = (1 << (ENGINE.parser.end + 1)) - 1

# The corners CRUD has no lexeme for. Terminal 0 (``A``) is accepted inside a
# remainder that only a terminal not allowed (``ABC``) continues: the remainder
# is dead under {A}, yet its subtree is not rejected (a later byte emits ``a``).
# The ignored ``#`` is a prefix of ``#azz``, so a byte can end ``#`` two bytes
# late, and the requeued tail (``ab``, ``azx``) is rescanned inside the walk.
# Token 0 is `` a``: whitespace, then a token that stays live.
CORNERS = load_grammar(
    r"""
start: item+
item: A | ABC | X | HAZZ
A: "a"
ABC: "abc"
X: /x*y/
HAZZ: "#azz"
HASH: "#"
WS: " "+
%ignore WS
%ignore HASH
""",
    "walk-corners",
)
CORNER_MULTI = [b"ab", b"abx", b"abc", b"abcx", b"a b", b"#ab", b"#abx", b"#azx", b"#azz"]
CORNER_MULTI += [b"#azza", b"#a", b" #a", b"xxy a", b"#azb", b"#azbx"]
CORNER_VOCAB = Vocabulary.from_spellings(
    "walk-corners",
    [b" a"] + [bytes([i]) for i in range(256)] + CORNER_MULTI + [b""],
    frozenset({258 + len(CORNER_MULTI) - 1}),
    (258 + len(CORNER_MULTI) - 1,),
)
CORNER_ENGINE = Engine(CORNERS, CORNER_VOCAB, cache=False)

# Every terminal starts with x*: the minimal DFA's start state loops on x, so a
# transition into state 0 is a live one. A 257-byte token outgrows the walk's
# first path buffer.
LOOP = load_grammar("start: (P | Q)+\nP: /x*a/\nQ: /x*b/\n", "walk-loop")
LOOP_MULTI = [b"xa", b"xxa", b"xxb", b"xxxb", b"xab", b"x" * 256 + b"a", b"x" * 256 + b"b"]
LOOP_VOCAB = Vocabulary.from_spellings(
    "walk-loop",
    [bytes([i]) for i in range(256)] + LOOP_MULTI + [b""],
    frozenset({256 + len(LOOP_MULTI)}),
    (256 + len(LOOP_MULTI),),
)
LOOP_ENGINE = Engine(LOOP, LOOP_VOCAB, cache=False)


def term(*names: str) -> int:
    return sum(1 << T[n] for n in names)


def ref_rescan(
    scanner: Scanner, data: bytes, allowed: int
) -> tuple[str, ScanState, bytes] | tuple[str, int, bytes] | None:
    """Maximal munch from scratch: ("scan", state, remainder) or ("shift", t, tail)."""
    start = 0
    while True:
        scan: ScanState = START
        i = start
        while i < len(data):
            nxt = scanner.step(scan, i + 1 - start, data[i])
            if nxt is None:
                break
            scan, i = nxt, i + 1
        if i == len(data):
            return "scan", scan, data[start:]
        if scan[2] == 0:
            return None
        t = scanner.pick(scan[3], allowed)
        if t < 0:
            return None
        if not scanner.ignored >> t & 1:
            return "shift", t, data[start + scan[2] :]
        start += scan[2]


def paths(trie: TokenTrie, node: int) -> dict[int, tuple[int, bytes]]:
    """Every node of the subtree at ``node``: (parent, path from ``node``)."""
    out = {node: (-1, b"")}
    stack = [node]
    while stack:
        n = stack.pop()
        for c in trie.children(n):
            out[c] = (n, out[n][1] + bytes([trie.edge[c]]))
            stack.append(c)
    return out


def reference(
    engine: Engine, node: int, pending: bytes, allowed: int, include_self: bool
) -> tuple[list[int], list[CDEntry]]:
    scanner, trie = engine.scanner, engine.trie
    ci: list[int] = []
    cd: list[CDEntry] = []
    results = {}
    for c, (parent, path) in sorted(paths(trie, node).items()):
        r = results[c] = ref_rescan(scanner, pending + path, allowed)
        if r is None:
            continue
        if r[0] == "shift":
            if parent < 0 or results[parent] is None or results[parent][0] != "shift":
                assert isinstance(r[1], int)
                cd.append((c, r[1], r[2]))
            continue
        if c == node and not include_self:
            continue
        scan = r[1]
        assert isinstance(scan, tuple)
        if trie.token[c] >= 0 and (not r[2] or scanner.live(scan[0], scan[1], allowed)):
            ci.append(c)
    return ci, cd


def node_of(trie: TokenTrie, spelling: bytes) -> int:
    n = 0
    for b in spelling:
        n = trie.child(n, b)
        assert n >= 0
    return n


def test_rescan_by_hand() -> None:
    sel = SCANNER.scan(b"select")
    assert sel is not None and sel[2] == 6
    assert rescan(SCANNER, b"", EVERY) == (START, b"")
    assert rescan(SCANNER, b"select", term("SELECT")) == (sel, b"select")
    # The space kills "select": SELECT shifts, the tail keeps the space.
    assert rescan(SCANNER, b"select *", term("SELECT")) == (T["SELECT"], b" *")
    # Not allowed, not ignored: the emission fails.
    assert rescan(SCANNER, b"select *", term("STAR")) is None
    # Whitespace and a comment are skipped inline: the scan restarts after them.
    assert rescan(SCANNER, b"  sel", 0) == (SCANNER.scan(b"sel"), b"sel")
    assert rescan(SCANNER, b"--c\nse", 0) == (SCANNER.scan(b"se"), b"se")
    assert rescan(SCANNER, b" ;x", term("STAR")) is None
    # A byte that no lexeme starts with: nothing accepted, no emission.
    assert rescan(SCANNER, b"#", EVERY) is None
    assert rescan(SCANNER, b" #", EVERY) is None
    # Maximal munch: "<=" (lark's X__ANON_0) is one lexeme, not "<" then "=".
    assert rescan(SCANNER, b"<=1", EVERY) == (T["X__ANON_0"], b"1")
    assert rescan(SCANNER, b"<1", EVERY) == (T["LESSTHAN"], b"1")


def test_rescan_picks_the_first_allowed_candidate() -> None:
    # "employees" is a TABLE_NAME word and a COLUMN_NAME; only the allowed one shifts.
    for name in ("TABLE_NAME", "COLUMN_NAME"):
        assert rescan(SCANNER, b"employees ", term(name)) == (T[name], b" ")
    # A keyword outranks the identifiers when it is allowed.
    assert rescan(SCANNER, b"from ", term("FROM", "TABLE_NAME")) == (T["FROM"], b" ")
    assert rescan(SCANNER, b"from ", term("TABLE_NAME")) is None  # not a TABLE_NAME word


def allowed_sets() -> list[int]:
    sets = {EVERY, 0, term("SELECT"), term("TABLE_NAME"), term("COLUMN_NAME", "STAR")}
    lexer = ENGINE.lexer
    for text in (b"", b"select ", b"select * from ", b"select * from employees where id "):
        config = lexer.advance(lexer.initial, text)
        assert config is not None
        sets.add(ENGINE.parser.allowed(config.node))
    rng = random.Random(14)
    sets |= {rng.getrandbits(ENGINE.parser.end + 1) for _ in range(6)}
    return sorted(sets)


CRUD_PENDING = [b"", b"s", b"sel", b"select", b"employees", b"emp", b"'a", b"'a'", b"--"]
CRUD_PENDING += [b" ", b"1", b"1.", b"<", b"*", b"x'"]


def subsets(n: int) -> list[int]:
    return list(range(1 << n))


CASES = [
    (
        "crud",
        ENGINE,
        [b"", b"select", b"employ", b"'a''", b"1.", b"<>"],
        CRUD_PENDING,
        allowed_sets(),
    ),
    (
        "corners",
        CORNER_ENGINE,
        [b"", b" a", b"#az", b"ab", b"#"],
        [b"", b"a", b"ab", b"#", b"#a", b" ", b"x", b"abc"],
        subsets(4),
    ),
    ("loop", LOOP_ENGINE, [b"", b"x", b"xx"], [b"", b"x", b"xx", b"a"], subsets(2)),
]


@pytest.mark.parametrize(
    ("engine", "roots", "pendings", "alloweds"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_walk_from_matches_the_definition(
    engine: Engine, roots: list[bytes], pendings: list[bytes], alloweds: list[int]
) -> None:
    for root in roots:
        node = node_of(engine.trie, root)
        for pending in pendings:
            for allowed in alloweds:
                full = pending + root
                got = walk_from(engine.scanner, engine.trie, node, full, allowed, node != 0)
                want = reference(engine, node, full, allowed, node != 0)
                assert got == want, (pending, root, allowed)


class _CountingScanner(Scanner):
    """A scanner that counts its steps and stops a scan that never ends."""

    def __init__(self, engine: Engine, limit: int) -> None:
        super().__init__(engine.grammar, engine.dfa, engine.lexicon)
        self.steps, self.limit = 0, limit

    def step(self, scan: ScanState, length: int, byte: int) -> ScanState | None:
        self.steps += 1
        assert self.steps <= self.limit, "the scan does not advance"
        return super().step(scan, length, byte)


@pytest.mark.parametrize(
    ("data", "steps"),
    [
        (b"select", 6),
        (b"select *", 7),  # the space kills "select": SELECT shifts
        (b"  sel", 6),  # "  s" kills the blanks (3 steps), then "sel" (3)
        (b"--c\nse", 8),  # "\n" ends the comment (4), "s" the newline (2), then "se" (2)
    ],
)
def test_rescan_steps_each_byte_once_per_lexeme(data: bytes, steps: int) -> None:
    scanner = _CountingScanner(ENGINE, 100)
    rescan(scanner, data, term("SELECT"))
    assert scanner.steps == steps


class _CountingReads(list[int]):
    """A trie array that counts reads and stops a walk that revisits nodes."""

    def __init__(self, values: object, limit: int) -> None:
        super().__init__(values)  # type: ignore[call-overload]
        self.reads, self.limit = 0, limit

    def __getitem__(self, i: object) -> object:  # type: ignore[override]
        self.reads += 1
        assert self.reads <= self.limit, "the walk revisits a node"
        return super().__getitem__(i)  # type: ignore[index]


@pytest.mark.parametrize("root", [b"", b"sel", b"employ"])
def test_walk_reads_each_edge_at_most_once(root: bytes) -> None:
    node = node_of(TRIE, root)
    for pending in (b"", b"s", b" "):
        edge = _CountingReads(TRIE.edge, TRIE.size[node])
        trie = dataclasses.replace(TRIE, edge=edge)  # type: ignore[arg-type]
        want = walk_from(SCANNER, TRIE, node, pending + root, EVERY, node != 0)
        assert walk_from(SCANNER, trie, node, pending + root, EVERY, node != 0) == want
        assert edge.reads < TRIE.size[node]
