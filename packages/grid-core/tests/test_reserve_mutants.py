"""The reserve table's pieces by hand (issue 14's mutation campaign).

``test_reserve.py`` checks theorem 4's assumptions through random walks and the
SQLite dialect with cl100k (tens of seconds); these checks pin each piece of
``grid_core.reserve`` on the analyst projection of the toy CRUD grammar with the
toy vocabulary of ``toy.py`` (its table builds in milliseconds), either to
values worked out by hand or against a reference that recomputes the same
quantity the slow, obvious way:

- ``split`` against a dynamic program over the spellings themselves;
- the compatible rows from the ACTION table; the pieces, their token costs and
  lead tokens, the short lexemes, the byte classes and the separator-safe
  states by hand;
- nonterminal costs against a Bellman-Ford fixpoint over the rules; ``rest``,
  the kernel items and the transitions from the tables;
- the node reserve of every stack reached by a seeded walk against Dijkstra
  over the parser's own shifts (cost of a terminal: ``term_cost``), and the
  node plan's terminals shifted to ACCEPT at exactly that cost;
- finish options, reserves and written completions of remainders by hand,
  each completion lexed to a complete sentence of exactly the reserve's length;
- the errors, ``partial`` tables and ``check_invariants`` on corrupted tables.
"""

from __future__ import annotations

import heapq
import random
import signal
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from toy import ANALYST, LEXICON, TOY, token

from grid_core import reserve
from grid_core.dfa import DEAD
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.lexer import Config
from grid_core.parser import Node
from grid_core.reserve import INF, ReserveError, ReserveTable, _Option, reserve_table
from grid_core.vocab import Vocabulary

ENGINE = Engine(ANALYST, TOY, LEXICON, cache=False)
# Built for every test (``fresh``), never when the module loads: a mutant acts only
# on tables built while it is active, and a table built at import would run a
# mutant's endless loop outside the watchdog.
TABLE: ReserveTable


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """A fresh table, and a watchdog: each test here takes milliseconds, so one still
    running after 10 s is in an endless loop (a mutant's), stopped as a failure."""
    global TABLE

    def stop(signum: int, frame: object) -> None:
        raise AssertionError("still running after 10 s: an endless loop")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    try:
        TABLE = ReserveTable(ENGINE)
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


TABLES, PARSER, LEXER = ENGINE.tables, ENGINE.parser, ENGINE.lexer
T = {name: i for i, name in enumerate(TABLES.terminal_names)}
NT = {name: i for i, name in enumerate(TABLES.nonterminal_names)}


def term(*names: str) -> int:
    return sum(1 << T[n] for n in names)


def config(text: bytes) -> Config:
    c = LEXER.advance(LEXER.initial, text)
    assert c is not None
    return c


# ------------------------------------------------------------------ tokens


def ref_split_cost(data: bytes) -> int:
    """Fewest tokens spelling ``data``: a DP over the (non-special) spellings."""
    spellings = {s for i, s in enumerate(TOY.token_bytes) if s and i not in TOY.special_ids}
    best = [0] + [INF] * len(data)
    for j in range(1, len(data) + 1):
        for i in range(j):
            if data[i:j] in spellings and best[i] + 1 < best[j]:
                best[j] = best[i] + 1
    return best[-1]


SPLITS = [b"", b"a", b" ", b"select", b"select *", b" employees", b" employees where", b"yees"]
SPLITS += [b"yees where", b" from employees", b"sal yer", b"1;", b"')", b" emplo", b"insert"]
SPLITS += [b"selectselect", b"\x00\xff", b"employeesyees where"]


@pytest.mark.parametrize("data", SPLITS)
def test_split_is_the_fewest_tokens(data: bytes) -> None:
    table = ReserveTable(ENGINE)
    tokens = table.split(data)
    assert tokens is not None
    assert len(tokens) == ref_split_cost(data) == table.token_cost(data)
    assert b"".join(TOY.token_bytes[t] for t in tokens) == data
    # The smallest id per spelling: " from" is 258, not its alias 269.
    assert all(t == token(TOY.token_bytes[t]) for t in tokens)
    assert table._split_memo[data] == tokens
    assert table.split(data) is tokens
    assert table._split(data) == tokens  # the Python reference (split may be native)


@pytest.mark.parametrize("split", ["split", "_split"])
def test_split_by_hand(split: str) -> None:
    f = getattr(TABLE, split)
    assert f(b"") == ()
    assert f(b" from") == (258,)
    assert f(b"yees where") == (261,)
    assert f(b" employees where") == (259, 261)
    assert f(b"select *") == (256, 257)
    assert f(b"ab") == (97, 98)


def test_split_of_an_unspellable_string() -> None:
    words = [b"a", b"b", b"ab", b" ", b""]
    vocab = Vocabulary.from_spellings("ab", words, frozenset({4}), (4,))
    grammar = load_grammar('start: A+\nA: "a" | "ab"\nWS: " "\n%ignore WS\n', "ab")
    table = ReserveTable(Engine(grammar, vocab, cache=False))
    assert table.split(b"c") is None
    assert table.split(b"ac") is None
    assert table.token_cost(b"c") == INF
    assert table._split_memo[b"c"] is None
    assert table.split(b"c") is None
    assert table.split(b"aab") == (0, 2)
    assert table.split(b"abab") == (2, 2)
    assert table.split(b"ba") == (1, 0)
    for data in [b"c", b"ac", b"aab", b"abab", b"ba"]:
        assert table._split(data) == table.split(data)


# ------------------------------------------------------------------ terminals


def test_compatible_rows_from_the_action_table() -> None:
    w = TABLES.n_terminals + 1
    want = [0] * TABLES.n_terminals
    for s in range(TABLES.n_states):
        row = {t for t in range(TABLES.n_terminals) if TABLES.action[s * w + t]}
        for t in row:
            want[t] |= sum(1 << u for u in row)
    assert TABLE.compat == want == TABLE._compatible_rows()
    assert TABLE.compat[T["SELECT"]] == term("SELECT")
    assert TABLE.compat[T["STAR"]] == term("STAR", "COLUMN_NAME")
    assert TABLE.compat[T["INSERT"]] == 0


PIECES = {
    "SELECT": (b" select", (32, 256), (256,)),
    "FROM": (b" from", (258,), (258,)),
    "WHERE": (b" where", (267,), (267,)),
    "AND": (b" and", (32, 97, 110, 100), (97, 110, 100)),
    "STAR": (b" *", (257,), (257,)),
    "TABLE_NAME": (b" employees", (32, 268), (268,)),
    # "from" lexes as COLUMN_NAME where a column can stand (FROM shares no row with it).
    "COLUMN_NAME": (b" from", (258,), (258,)),
    "NUMBER": (b" 0", (32, 48), (48,)),
    "STRING": (b" ''", (32, 39, 39), (39, 39)),
    "SEMICOLON": (b" ;", (32, 59), (59,)),
    "COMMA": (b" ,", (32, 44), (44,)),
    "EQUAL": (b" =", (32, 61), (61,)),
    "LESSTHAN": (b" <", (32, 60), (60,)),
    "MORETHAN": (b" >", (32, 62), (62,)),
    "X__ANON_0": (b" <=", (32, 60, 61), (60, 61)),
    "X__ANON_1": (b" >=", (32, 62, 61), (62, 61)),
    "X__ANON_2": (b" <>", (32, 60, 62), (60, 62)),
}


def test_pieces_and_their_tokens_by_hand() -> None:
    assert {TABLES.terminal_names[t]: p for t, p in TABLE.pieces.items()} == {
        n: p[0] for n, p in PIECES.items()
    }
    for name, (_, tokens, lead) in PIECES.items():
        t = T[name]
        assert TABLE.term_tokens[t] == tokens
        assert TABLE.term_cost[t] == len(tokens)
        assert TABLE.lead_tokens[t] == lead
    for name in ("INSERT", "UPDATE", "DELETE", "INTO", "VALUES", "SET", "WS", "COMMENT"):
        t = T[name]
        assert (TABLE.term_cost[t], TABLE.term_tokens[t], TABLE.lead_tokens[t]) == (INF, (), ())
    assert TABLE.q_space == ENGINE.dfa.trans[32] != DEAD
    assert TABLE.n_terminals == len(T) and TABLE.base == len(T) + 1


@pytest.mark.parametrize(
    ("name", "x", "ok"),
    [
        ("SELECT", b"select", True),
        ("COLUMN_NAME", b"from", True),
        ("COLUMN_NAME", b"select", True),  # SELECT shares no row with COLUMN_NAME
        ("FROM", b"from", True),
        ("TABLE_NAME", b"employees", True),
        ("TABLE_NAME", b"emp", False),  # not a word
        ("COLUMN_NAME", b"", False),
        ("STAR", b" *", False),  # the space would join the whitespace before it
        ("NUMBER", b"0", True),
        ("NUMBER", b"0.", False),  # not a lexeme of NUMBER
        ("STRING", b"'a", False),
        ("LESSTHAN", b"<", True),
        ("EQUAL", b"<", False),  # a lexeme of another terminal
        ("COMMENT", b"--", False),  # "-- " goes on: a space does not end it
    ],
)
def test_lexeme_ok_by_hand(name: str, x: bytes, ok: bool) -> None:
    assert TABLE._lexeme_ok(T[name], x) is ok


def test_short_lexemes_by_hand() -> None:
    assert TABLE._short_lexemes(T["NUMBER"]) == [b"0", b"00", b"0.0", b"000", b"0.00", b"00.0"]
    assert TABLE._short_lexemes(T["STRING"]) == [b"''", b"'\t'", b"'\n'"]
    assert TABLE._short_lexemes(T["STAR"]) == [b"*"]
    star = TABLE._short_lexemes(T["SELECT"])
    assert star == [b"select", b"SELECT"]


def test_short_lexemes_of_an_identifier() -> None:
    # Shortlex over class representatives, at most three strings per DFA state, each
    # with its lower- and upper-case forms, until a level ends with 24 or more.
    assert TABLE._short_lexemes(T["COLUMN_NAME"]) == [
        *(b"_", b"a", b"A", b"c", b"C", b"d", b"D", b"e", b"E", b"f", b"F", b"i", b"I"),
        *(b"s", b"S", b"u", b"U", b"v", b"V", b"w", b"W", b"an", b"AN", b"de", b"DE"),
        *(b"fr", b"FR", b"in", b"IN", b"se", b"SE", b"up", b"UP", b"va", b"VA", b"wh", b"WH"),
    ]


def test_byte_classes_by_hand() -> None:
    classes = TABLE._classes
    assert [rep for rep, _ in classes] == sorted(rep for rep, _ in classes)
    members = sorted(b for _, m in classes for b in m)
    assert members == list(range(256))
    by_rep = dict(classes)
    assert by_rep[9] == (9, 32)  # tab and space: no printable member
    assert by_rep[10] == (10,)
    assert by_rep[39] == (39,)
    assert 0 in by_rep[33] and 33 in by_rep[33]  # "!" represents the bytes no lexeme starts
    assert len(classes) == 34
    for rep, m in classes:
        assert rep in m
        assert all(b < 0x21 or b > 0x7E for b in m) or 0x21 <= rep <= 0x7E


def test_separator_safe_states_by_hand() -> None:
    assert TABLE._safe == frozenset({TABLE.q_space})
    firsts = {p[1] for p in TABLE.pieces.values()}
    assert TABLE._separator_safe_states(firsts) == TABLE._safe
    # Nothing ends whitespace that a piece could start with a blank.
    assert TABLE._separator_safe_states(firsts | {32}) == frozenset()


# ------------------------------------------------------------------ grammar


def test_nonterminal_costs_are_the_least_fixpoint() -> None:
    cost = [INF] * TABLES.n_nonterminals
    changed = True
    while changed:
        changed = False
        for r in range(TABLES.n_rules):
            total = 0
            for x in TABLES.rhs(r):
                c = TABLE.term_cost[x] if x < TABLE.n_terminals else cost[x - TABLE.base]
                total = min(INF, total + c)
            a = TABLES.rule_lhs[r]
            if total < cost[a]:
                cost[a], changed = total, True
    assert TABLE.nt_cost == cost
    by_name = dict(zip(TABLES.nonterminal_names, TABLE.nt_cost, strict=True))
    # " select * from employees ;": 2 + 1 + 1 + 2 + 2 tokens
    assert by_name["start"] == by_name["$start"] == TABLE.start_cost == 8
    assert by_name["select_list"] == 1  # " *"
    assert by_name["condition"] == 5  # " from" (a column) " =" " 0"
    assert by_name["where_clause"] == 6
    for a, r in enumerate(TABLE.nt_rule):
        assert TABLES.rule_lhs[r] == a
        assert sum(TABLE._symbol_cost(x) for x in TABLES.rhs(r)) == cost[a]


def test_rest_items_and_transitions_from_the_tables() -> None:
    w, n_nt = TABLES.n_terminals + 1, TABLES.n_nonterminals
    for r in range(TABLES.n_rules):
        rhs = list(TABLES.rhs(r))
        for d in range(len(rhs) + 1):
            want = min(INF, sum(TABLE._symbol_cost(x) for x in rhs[d:]))
            assert TABLE.rest(r, d) == want
    for s in range(TABLES.n_states):
        items = sorted(
            (TABLE.rest(r, d), r, d, TABLE.base + TABLES.rule_lhs[r]) for r, d in TABLES.kernel(s)
        )
        assert list(TABLE._items[s]) == items
        shifts = [(t, TABLES.action[s * w + t] - 1) for t in range(TABLES.n_terminals)]
        gotos = [(TABLE.base + a, TABLES.goto[s * n_nt + a]) for a in range(n_nt)]
        want_trans = [(t, q) for t, q in shifts if q >= 0] + [(x, q) for x, q in gotos if q >= 0]
        assert list(TABLE._transitions(s)) == want_trans
    assert TABLE.max_pop == max(TABLES.rule_len[r] for r in range(TABLES.n_rules)) == 5


def test_expand_by_hand() -> None:
    names = TABLES.terminal_names
    start = TABLE.base + NT["start"]
    assert [names[t] for t in TABLE.expand([start])] == [
        "SELECT",
        "STAR",
        "FROM",
        "TABLE_NAME",
        "SEMICOLON",
    ]
    cond = TABLE.base + NT["condition"]
    assert [names[t] for t in TABLE.expand([T["AND"], cond])] == [
        "AND",
        "COLUMN_NAME",
        "EQUAL",
        "NUMBER",
    ]
    assert TABLE.expand([]) == []


# ------------------------------------------------------------------ stacks


def ref_node_reserve(node: Node) -> int:
    """Dijkstra over the parser's shifts: the cheapest terminals to ACCEPT."""
    done: set[Node] = set()
    heap: list[tuple[int, int, Node]] = [(0, 0, node)]
    tie = 0
    while heap:
        c, _, n = heapq.heappop(heap)
        if n in done:
            continue
        done.add(n)
        if PARSER.accepts(n):
            return c
        allowed = PARSER.allowed(n)
        for t in range(TABLES.n_terminals):
            if allowed >> t & 1 and TABLE.term_cost[t] < INF:
                tie += 1
                heapq.heappush(heap, (c + TABLE.term_cost[t], tie, PARSER.shift(n, t)))
    return INF


def stacks(table: ReserveTable) -> list[Node]:
    """The stacks of seeded random walks over writable terminals (and every prefix)."""
    rng = random.Random(14)
    out: dict[int, Node] = {}
    for _ in range(40):
        n = PARSER.root
        for _ in range(14):
            out[id(n)] = n
            allowed = PARSER.allowed(n)
            ts = [t for t in range(TABLES.n_terminals) if allowed >> t & 1]
            ts = [t for t in ts if table.term_cost[t] < INF]
            if not ts:
                break
            n = PARSER.shift(n, rng.choice(ts))
    return list(out.values())


def test_node_reserve_is_the_cheapest_completion() -> None:
    table = ReserveTable(ENGINE)
    nodes = stacks(table)
    assert len(nodes) == 31
    for node in nodes:
        want = ref_node_reserve(node)
        assert table.node_reserve(node) == want
        plan = table.node_plan(node)
        assert sum(table.term_cost[t] for t in plan) == want
        end = node
        for t in plan:
            end = PARSER.shift(end, t)
        assert PARSER.accepts(end)


def test_cells_are_memoized_per_node() -> None:
    table = ReserveTable(ENGINE)
    node = stacks(table)[-1]
    cell = table.cell(node)
    assert table.cell(node) is cell
    assert table._cells[node] is cell
    # Ancestors were computed first, and kept.
    parent = node.parent
    while parent is not None:
        assert parent in table._cells
        parent = parent.parent
    table._cells[PARSER.root] = {T["SELECT"]: (99, 0, 1)}  # a planted cell
    assert ReserveTable.node_reserve(table, PARSER.shift(PARSER.root, T["SELECT"])) == 99


def test_cells_by_hand() -> None:
    root = PARSER.root
    cell = TABLE.cell(root)
    # From the root: SELECT (2) is followed by " * from employees ;" (6 tokens).
    assert cell[T["SELECT"]][0] == 6
    select = PARSER.shift(root, T["SELECT"])
    assert TABLE.node_reserve(select) == 6
    assert TABLE.node_reserve(root) == TABLE.start_cost == 8
    where = config(b"select * from employees where ")
    assert TABLE.node_reserve(where.node) == 7  # " from = 0 ;": 1 + 2 + 2 + 2
    plan = [TABLES.terminal_names[t] for t in TABLE.node_plan(where.node)]
    assert plan == ["COLUMN_NAME", "EQUAL", "NUMBER", "SEMICOLON"]


# ------------------------------------------------------------------ remainders


KEYWORDS = ("AND", "SET", "FROM", "INTO", "WHERE", "DELETE", "INSERT", "SELECT", "UPDATE")
KEYWORDS += ("VALUES",)


def test_finish_options_by_hand() -> None:
    table = ReserveTable(ENGINE)
    q, ln = config(b"'a").scan[:2]
    options = table.finish_options(q, ln)
    assert options == (
        _Option(b"'", term("STRING"), True),
        _Option(b"'", term("STRING"), False),
    )
    assert table._options[(q, ln)] is options
    assert table.finish_options(q, ln) is options
    # "emp": a column now, or the TABLE_NAME word "employees" five bytes on.
    q, ln = config(b"emp").scan[:2]
    assert table.finish_options(q, ln) == (
        _Option(b"", term("COLUMN_NAME"), True),
        _Option(b"loyees", term("TABLE_NAME", "COLUMN_NAME"), True),
        _Option(b"", term("COLUMN_NAME"), False),
        _Option(b"loyees", term("TABLE_NAME", "COLUMN_NAME"), False),
    )
    # An open comment: a newline ends it; a space would join it.
    q, ln = config(b"--").scan[:2]
    assert table.finish_options(q, ln) == (
        _Option(b"", term("COMMENT"), True),
        _Option(b"\n", term("COMMENT"), False),
    )
    # Pending whitespace: the next space joins it.
    q, ln = config(b" ").scan[:2]
    assert table.finish_options(q, ln) == (
        _Option(b"", term("WS"), True),
        _Option(b"", term("WS"), False, True),
    )
    # "se": a column now, SET one byte on, SELECT four.
    q, ln = config(b"se").scan[:2]
    se = table.finish_options(q, ln)
    assert [(o.suffix, o.cands, o.end) for o in se] == [
        (b"", term("COLUMN_NAME"), True),
        (b"t", term("SET", "COLUMN_NAME"), True),
        (b"lect", term("SELECT", "COLUMN_NAME"), True),
        (b"", term("COLUMN_NAME"), False),
        (b"t", term("SET", "COLUMN_NAME"), False),
        (b"lect", term("SELECT", "COLUMN_NAME"), False),
    ]
    q, ln = config(b"<").scan[:2]
    assert [(o.suffix, o.cands) for o in table.finish_options(q, ln)][:3] == [
        (b"", term("LESSTHAN")),
        (b"=", term("X__ANON_0")),
        (b">", term("X__ANON_2")),
    ]
    q, ln = config(b"employees_").scan[:2]
    assert [(o.suffix, o.cands) for o in table.finish_options(q, ln)][:2] == [
        (b"", term("COLUMN_NAME")),
        (b"public", term("TABLE_NAME", "COLUMN_NAME")),
    ]
    # From the start: the first shortest lexeme per candidate set, in step order
    # (lexicon children first, then class representatives: tab before space).
    start = table.finish_options(0, 0)
    assert len(start) == 54
    ends = {o.cands: o.suffix for o in start if o.end}
    assert ends == {
        term("COLUMN_NAME"): b"e",
        term("WS"): b"\t",
        term("LPAR"): b"(",
        term("RPAR"): b")",
        term("STAR"): b"*",
        term("COMMA"): b",",
        term("NUMBER"): b"0",
        term("SEMICOLON"): b";",
        term("LESSTHAN"): b"<",
        term("EQUAL"): b"=",
        term("MORETHAN"): b">",
        term("STRING"): b"''",
        term("COMMENT"): b"--",
        term("X__ANON_0"): b"<=",
        term("X__ANON_2"): b"<>",
        term("X__ANON_1"): b">=",
        **{term(k, "COLUMN_NAME"): k.lower().encode() for k in KEYWORDS},
        term("TABLE_NAME", "COLUMN_NAME"): b"orders",
    }
    conts = {o.cands: (o.suffix, o.joined) for o in start if not o.end}
    assert conts[term("WS")] == (b"\t", True)
    assert conts[term("COMMENT")] == (b"--\n", False)
    assert conts[term("STRING")] == (b"''", False)
    assert len(conts) == 27
    # "1.": a digit makes it a NUMBER again.
    q, ln = config(b"1.").scan[:2]
    assert table.finish_options(q, ln) == (
        _Option(b"0", term("NUMBER"), True),
        _Option(b"0", term("NUMBER"), False),
    )


RESERVES = [
    (b"", 7, b"select * from employees ;"),
    (b"select", 6, b" * from employees ;"),
    (b"sel", 9, b"ect * from employees ;"),  # no token spells "ect"
    (b"select * from emplo", 3, b"yees ;"),
    (b"select * from employees", 2, b" ;"),
    (b"select * from employees;", 0, b""),
    (b"select * from employees ;", 0, b""),
    (b"select * from orders where x", 6, b" = 0 ;"),
    (b"select * from orders where x = '", 3, b"' ;"),
    (b"select * from orders where x = 'ab", 3, b"' ;"),
    (b"select * from orders where x = 1.", 3, b"0 ;"),
    (b"select * from orders where x <", 4, b" 0 ;"),
    (b"select * from orders --", 3, b"\n ;"),
    (b"select * from orders ", 1, b";"),
    (b"select * from orders  ", 1, b";"),
    (b"select x", 5, b" from employees ;"),
    (b"select * from orders where x = 1 and", 7, b" from = 0 ;"),
    (b"select *", 5, b" from employees ;"),
    (b"select * ", 5, b" from employees ;"),  # no token spells "from": no discount
]


@pytest.mark.parametrize(("prefix", "reserve", "written"), RESERVES)
def test_reserve_and_completion_by_hand(prefix: bytes, reserve: int, written: bytes) -> None:
    table = ReserveTable(ENGINE)
    c = config(prefix)
    tokens = table.completion(c)
    assert table.reserve(c) == reserve == len(tokens)
    assert b"".join(TOY.token_bytes[t] for t in tokens) == written
    end = LEXER.advance(c, written)
    assert end is not None and LEXER.eos_allowed(end)
    assert table.reserve(c) == reserve  # memoized: the same


def test_lead_discount_by_hand() -> None:
    table = ReserveTable(ENGINE)
    root = PARSER.root
    assert table._lead_discount(root) == 1  # "select" without its space: one token less
    assert table._discounts[root] == 1
    star = config(b"select *").node
    assert table._lead_discount(star) == 0  # " from" is one token either way
    done = config(b"select * from employees ;").node
    done = LEXER.finalize(config(b"select * from employees ;"))
    assert done is not None and table.node_plan(done) == [] and table._lead_discount(done) == 0
    table._discounts[root] = 5  # a planted memo entry
    assert table._lead_discount(root) == 5
    assert table._plan_tokens(star, True) == table._plan_tokens(star, False)
    assert table._plan_tokens(root, True)[:2] == [256, 257]
    assert table._plan_tokens(root, False)[:3] == [32, 256, 257]


def test_finish_is_memoized_per_node_and_state() -> None:
    table = ReserveTable(ENGINE)
    c = config(b"select * from emplo")
    best = table._finish(c)
    assert best[0] == 3 and best[1] is not None and best[1].suffix == b"yees"
    assert table._finish_memo[c.node][c.scan[:2]] is best
    assert table._finish(c) is best
    table._finish_memo[c.node][c.scan[:2]] = (1, best[1], best[2])  # planted
    assert table.reserve(c) == 1


# ------------------------------------------------------------------ errors, partial


def test_reserve_error_fields() -> None:
    err = ReserveError("no space")
    assert err.what == "no space"
    assert str(err) == "reserve table: no space"


def test_no_finish_option_is_an_error() -> None:
    table = ReserveTable(ENGINE)
    c = config(b"select * from sal")  # no TABLE_NAME word starts "sal"
    with pytest.raises(
        ReserveError, match=r"^reserve table: no finish option for the remainder b'sal'$"
    ):
        table.reserve(c)
    with pytest.raises(
        ReserveError, match=r"^reserve table: no finish option for the remainder b'sal'$"
    ):
        table.completion(c)
    partial = ReserveTable(ENGINE, partial=True)
    assert partial.reserve(c) == INF


ORDERS_ONLY = {"TABLE_NAME": [b"orders"]}


def test_partial_table_prices_unwritable_terminals_inf() -> None:
    words = [bytes([i]) for i in range(256) if bytes([i]) not in (b"o",)] + [b""]
    vocab = Vocabulary.from_spellings("no-o", words, frozenset({len(words) - 1}), (len(words) - 1,))
    engine = Engine(ANALYST, vocab, ORDERS_ONLY, cache=False)
    with pytest.raises(
        ReserveError,
        match=r"^reserve table: no writable lexeme for terminal\(s\) FROM, TABLE_NAME$",
    ):
        ReserveTable(engine)
    table = ReserveTable(engine, partial=True)
    assert table.term_cost[T["TABLE_NAME"]] == INF
    assert table.start_cost == INF
    assert table.reserve(engine.lexer.initial) == INF
    with pytest.raises(
        ReserveError,
        match=r"^reserve table: no completion of this stack writes only writable lexemes$",
    ):
        table.completion(engine.lexer.initial)


AB = [b"a", b" ", b"  ", b"b", b""]
AB_VOCAB = Vocabulary.from_spellings("ab", AB, frozenset({4}), (4,))


def test_a_space_must_lex_as_an_ignored_lexeme() -> None:
    grammar = load_grammar('start: A+\nA: "a"\n', "no-space")
    with pytest.raises(
        ReserveError, match=r"^reserve table: a space does not lex as an ignored lexeme$"
    ) as err:
        ReserveTable(Engine(grammar, AB_VOCAB, cache=False))
    assert err.value.what == "a space does not lex as an ignored lexeme"
    grammar = load_grammar('start: (A | SP)+\nA: "a"\nSP: " "\n', "space-not-ignored")
    with pytest.raises(ReserveError, match="a space does not lex as an ignored lexeme"):
        ReserveTable(Engine(grammar, AB_VOCAB, cache=False))


def test_a_space_must_be_a_separator() -> None:
    # " " is both SP (priority 3, picked first) and WS (ignored): not a pure separator.
    text = 'start: (A | SP)+\nA: "a"\nSP.3: " "\nWS: " "+\n%ignore WS\n'
    grammar = load_grammar(text, "space-first")
    with pytest.raises(
        ReserveError, match=r"^reserve table: a space is not a separator that every piece ends$"
    ):
        ReserveTable(Engine(grammar, AB_VOCAB, cache=False))


def test_reserve_table_is_built_once_per_engine_and_mode() -> None:
    engine = Engine(ANALYST, TOY, LEXICON, cache=False)
    table = reserve_table(engine)
    assert reserve_table(engine) is table
    assert not table.partial
    partial = reserve_table(engine, partial=True)
    assert partial is not table and partial.partial
    assert reserve_table(engine, partial=True) is partial


def test_check_invariants_catches_corrupted_tables() -> None:
    table = ReserveTable(ENGINE)
    table.check_invariants()
    a = NT["start"]  # checked first: its own rule shows it
    table.nt_cost[a] += 1
    with pytest.raises(AssertionError, match=rf"^nonterminal {a} is not at its fixpoint$"):
        table.check_invariants()
    table = ReserveTable(ENGINE)
    table.pieces[T["STAR"]] = b" x"
    with pytest.raises(AssertionError, match=rf"^piece b' x' of terminal {T['STAR']}$"):
        table.check_invariants()
    table = ReserveTable(ENGINE)
    table.term_tokens[T["STAR"]] = (32, 42)
    with pytest.raises(AssertionError):
        table.check_invariants()
    table = ReserveTable(ENGINE)
    rule = {(TABLES.rule_lhs[r], tuple(TABLES.rhs(r))): r for r in range(TABLES.n_rules)}
    table.nt_rule[NT["compare"]] = rule[(NT["compare"], (T["LESSTHAN"],))]  # 2 tokens too: a tie
    table.check_invariants()
    table.nt_rule[NT["compare"]] = rule[(NT["compare"], (T["X__ANON_0"],))]  # "<=" costs 3, not 2
    with pytest.raises(AssertionError):
        table.check_invariants()


# ------------------------------------------------------------------ small grammars

BYTES = Vocabulary.from_spellings(
    "bytes", [bytes([i]) for i in range(256)] + [b""], frozenset({256}), (256,)
)


def test_single_token_pieces_by_hand() -> None:
    # Single tokens after a space, id 0 among them. Walked from the highest edge: " ~"
    # (no lexeme: skipped), " select", " employees_public", " emp", " 7", " 5", " 12".
    extra = [b" 5", b" ~", b" 12", b" 7", b" #", b" employees_public", b" select", b" emp"]
    spellings = [*extra, *(bytes([i]) for i in range(256)), *TOY.token_bytes[256:270], b""]
    eos = len(spellings) - 1
    vocab = Vocabulary.from_spellings("single", spellings, frozenset({eos}), (eos,))
    table = ReserveTable(Engine(ANALYST, vocab, LEXICON, cache=False))
    pieces = {TABLES.terminal_names[t]: p for t, p in table.pieces.items()}
    assert pieces["NUMBER"] == b" 5"  # the shortest, then the least: id 0, not " 7" or " 12"
    assert table.term_tokens[T["NUMBER"]] == (0,)
    assert pieces["COLUMN_NAME"] == b" emp"  # shorter than " from"
    assert pieces["SELECT"] == b" select" and table.term_tokens[T["SELECT"]] == (6,)
    assert pieces["TABLE_NAME"] == b" employees_public"  # the one word a token spells
    assert table.term_tokens[T["TABLE_NAME"]] == (5,)
    assert pieces["STAR"] == b" *" and pieces["STRING"] == b" ''"
    assert len(pieces) == 17
    singles = table._single_token_pieces()  # the Python walk (the table's may be native)
    assert {TABLES.terminal_names[t]: p for t, p in singles.items()} == {
        name: pieces[name]
        for name in ["NUMBER", "COLUMN_NAME", "SELECT", "TABLE_NAME", "STAR", "FROM", "WHERE"]
    }
    if table.engine.kernel is not None:
        _, native = table.engine.kernel.reserve_pieces()
        assert {t: b" " + x for t, x in enumerate(native) if x is not None} == singles


def test_terminal_zero_as_the_ignored_space() -> None:
    grammar = load_grammar('WS: " "+\nstart: A+\nA: "a"\n%ignore WS\n', "ws-first")
    assert grammar.terminal_id("WS") == 0
    vocab = Vocabulary.from_spellings("a", [b"a", b" ", b"  ", b" a", b""], frozenset({4}), (4,))
    table = ReserveTable(Engine(grammar, vocab, cache=False))
    assert table.pieces == {1: b" a"}
    assert table._safe == frozenset({table.q_space})
    assert table.start_cost == 1


def test_space_first_terminal_is_not_a_separator() -> None:
    # SP (terminal 0, priority 3) and the ignored WS both lex " ": SP is picked first.
    text = 'start: (SP | A)+\nSP.3: " "\nA: "a"\nWS: " "+\n%ignore WS\n'
    grammar = load_grammar(text, "sp-first")
    assert grammar.terminal_id("SP") == 0
    vocab = Vocabulary.from_spellings("a", [b"a", b" ", b"  ", b" a", b""], frozenset({4}), (4,))
    with pytest.raises(
        ReserveError, match=r"^reserve table: a space is not a separator that every piece ends$"
    ):
        ReserveTable(Engine(grammar, vocab, cache=False))
    grammar = load_grammar('start: (SP | A)+\nSP: " "\nA: "a"\n', "sp-only")
    with pytest.raises(
        ReserveError, match=r"^reserve table: a space does not lex as an ignored lexeme$"
    ):
        ReserveTable(Engine(grammar, vocab, cache=False))


def test_start_without_a_finite_sentence() -> None:
    # load_grammar refuses such a grammar; the table's own check is for any other
    # way one reaches it: built here without the loader's check.
    base = load_grammar('start: "a" start | "b"\nWS: " "\n%ignore WS\n', "endless")
    rules = tuple(r for r in base.rules if "B" not in r.expansion)
    grammar = Grammar(base.name, base.terminals, rules, base.start)
    vocab = Vocabulary.from_spellings("a", [b"a", b" ", b" a", b""], frozenset({3}), (3,))
    with pytest.raises(
        ReserveError, match=r"^reserve table: the start symbol derives no writable sentence$"
    ):
        ReserveTable(Engine(grammar, vocab, cache=False))
    table = ReserveTable(Engine(grammar, vocab, cache=False), partial=True)
    assert table.start_cost == INF


def test_plan_through_a_second_alternative() -> None:
    # Rules: 0 $start -> start, 1 start -> x, 2 start -> y, 3 x -> "a", 4 y -> "b".
    grammar = load_grammar('start: x | y\nx: "a"\ny: "b"\nWS: " "\n%ignore WS\n', "alts")
    vocab = Vocabulary.from_spellings("ab", [b"a", b"b", b" ", b" a", b""], frozenset({4}), (4,))
    engine = Engine(grammar, vocab, cache=False)
    table = ReserveTable(engine)
    parser = engine.parser
    for letter in ("A", "B"):
        node = parser.shift(parser.root, grammar.terminal_id(letter))
        assert table.node_plan(node) == []
        assert table.node_reserve(node) == 0


def test_split_by_hand_without_single_bytes() -> None:
    words = [b"a", b"b", b"c", b"d", b"e", b"abc", b"cde", b"de", b"xyz", b" ", b" a", b""]
    vocab = Vocabulary.from_spellings("split", words, frozenset({11}), (11,))
    grammar = load_grammar('start: A+\nA: /[a-e]+/ | "xyz"\nWS: " "\n%ignore WS\n', "split")
    table = ReserveTable(Engine(grammar, vocab, cache=False))
    # "abc" then "de": found after "a" "b" "cde", one token shorter.
    assert table.split(b"abcde") == (5, 7)
    # Position 1 cannot be reached ("x" is no token); position 3 can.
    assert table.split(b"xyzb") == (8, 1)
    assert table.split(b"xy") is None
    table._split_memo[b"ab"] = None  # a planted memo entry
    assert table.split(b"ab") is None


ORDERS_NO_O = Vocabulary.from_spellings(
    "no-o",
    [bytes([i]) for i in range(256) if i != ord("o")] + [b""],
    frozenset({255}),
    (255,),
)


def test_partial_table_marks_what_cannot_be_written() -> None:
    engine = Engine(ANALYST, ORDERS_NO_O, ORDERS_ONLY, cache=False)
    table = ReserveTable(engine, partial=True)
    for a in range(TABLES.n_nonterminals):
        assert (table.nt_cost[a] >= INF) == (table.nt_rule[a] < 0), a
    assert table.nt_cost[NT["start"]] == INF and table.nt_cost[NT["condition"]] < INF
    with pytest.raises(
        AssertionError, match=r"^expanding a nonterminal that derives no writable sentence$"
    ):
        table.expand([table.base + NT["select_stmt"]])
    select = engine.parser.shift(engine.parser.root, T["SELECT"])
    assert table.cell(engine.parser.root)[T["SELECT"]] == (INF, -1, -1)
    with pytest.raises(AssertionError, match=r"^no completion through this cell$"):
        table.node_plan(select)


def test_messages_name_the_last_32_bytes() -> None:
    table = ReserveTable(ENGINE)
    c = config(b"select * from " + b"s" * 40)
    want = "reserve table: no finish option for the remainder " + repr(b"s" * 32)
    with pytest.raises(ReserveError) as err:
        table.reserve(c)
    assert str(err.value) == want
    with pytest.raises(ReserveError) as err:
        table.completion(c)
    assert str(err.value) == want


def test_completion_checks_its_length() -> None:
    table = ReserveTable(ENGINE)
    c = config(b"select * from emplo")
    best = table._finish(c)
    table._finish_memo[c.node][c.scan[:2]] = (best[0] + 1, best[1], best[2])  # planted
    with pytest.raises(
        AssertionError, match=r"^the written completion disagrees with the reserve$"
    ):
        table.completion(c)


def test_lexeme_ok_refuses_dead_and_outranked_lexemes() -> None:
    for t in TABLE.pieces:
        assert not TABLE._lexeme_ok(t, b"\x00")  # no lexeme at all
    text = 'start: (KW | NAME)+\nKW: "if"i\nNAME: /[a-z]+/\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "kw")
    vocab = Vocabulary.from_spellings("kw", [b"i", b"f", b" ", b" if", b""], frozenset({4}), (4,))
    table = ReserveTable(Engine(grammar, vocab, cache=False))
    kw, name = grammar.terminal_id("KW"), grammar.terminal_id("NAME")
    assert table._lexeme_ok(kw, b"if")
    assert not table._lexeme_ok(name, b"if")  # KW shares its rows and is picked first
    assert table._lexeme_ok(name, b"ff")
    # Per accepted string x (class representatives, "I" < "i"): x, its lower and upper
    # case, each triple without repeats.
    want = [b"IF", b"if", b"If", b"if", b"IF", b"iF", b"if", b"IF", b"if", b"IF"]
    assert table._short_lexemes(kw) == want


def test_lexeme_must_end_the_whitespace_before_it() -> None:
    # "_" both continues WS and starts NAME: NAME has no piece.
    text = 'start: (name | A)+\nname: NAME\nNAME: /_[a-z]+/\nA: "a"\nWS: /[ _]+/\n%ignore WS\n'
    grammar = load_grammar(text, "underscore")
    engine = Engine(grammar, BYTES, cache=False)
    with pytest.raises(ReserveError, match="NAME"):
        ReserveTable(engine)
    table = ReserveTable(engine, partial=True)
    assert not table._lexeme_ok(grammar.terminal_id("NAME"), b"_ab")
    assert table._lexeme_ok(grammar.terminal_id("A"), b"a")
    name = engine.tables.nonterminal_names.index("name")
    assert (table.nt_cost[name], table.nt_rule[name]) == (INF, -1)  # only NAME derives it


def test_finish_options_through_the_lexicon_only() -> None:
    # NAME's regex is live only through its one word "ab"; "~" sorts after the letters.
    text = 'start: (NAME | T)+\nNAME: /[a-z]+/\nT: "~"\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "names")
    engine = Engine(grammar, BYTES, {"NAME": [b"ab"]}, cache=False)
    table = ReserveTable(engine)
    name, tilde, ws = (1 << grammar.terminal_id(n) for n in ("NAME", "T", "WS"))
    assert table.finish_options(0, 0) == (
        _Option(b" ", ws, True),
        _Option(b"~", tilde, True),
        _Option(b"ab", name, True),
        _Option(b" ", ws, False),
        _Option(b"~", tilde, False),
        _Option(b"ab", name, False),
    )
    a = engine.scanner.scan(b"a")
    assert a is not None
    assert table.finish_options(a[0], a[1]) == (
        _Option(b"b", name, True),
        _Option(b"b", name, False),
    )


def test_an_end_option_completes_the_sentence() -> None:
    grammar = load_grammar('start: X\nX: /x+y/\nWS: " "\n%ignore WS\n', "xy")
    vocab = Vocabulary.from_spellings("xy", [b"x", b"y", b" ", b" x", b""], frozenset({4}), (4,))
    engine = Engine(grammar, vocab, cache=False)
    table = ReserveTable(engine)
    c = engine.lexer.advance(engine.lexer.initial, b"xx")
    assert c is not None
    cost, option, _ = table._finish(c)
    assert (cost, option) == (1, _Option(b"y", 1 << grammar.terminal_id("X"), True))
    assert table.reserve(c) == 1 and table.completion(c) == [1]


def test_word_order_among_equal_costs() -> None:
    # No single token after a space: each word costs 2 (" ", then the word's token);
    # the shorter word comes first, then the least.
    words = [bytes([i]) for i in range(256)] + [b"orders", b"employees", b"zz", b""]
    vocab = Vocabulary.from_spellings("words", words, frozenset({259}), (259,))
    lexicon = {"TABLE_NAME": [b"employees", b"orders", b"zzz"]}
    table = ReserveTable(Engine(ANALYST, vocab, lexicon, cache=False))
    assert table.pieces[T["TABLE_NAME"]] == b" orders"
    assert table.term_cost[T["TABLE_NAME"]] == 2


def test_an_ignored_terminal_gets_no_piece() -> None:
    # A block comment (terminal 0) is a lexeme a space ends and whose first byte ends
    # whitespace, and it is picked (it is ignored): still no piece, it has no row.
    text = 'CMT: "/*" /[a-z]*/ "*/"\nstart: A+\nA: "a"\nWS: " "+\n%ignore WS\n%ignore CMT\n'
    grammar = load_grammar(text, "block-comment")
    assert grammar.terminal_id("CMT") == 0
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    assert table.pieces == {grammar.terminal_id("A"): b" a"}


def test_every_separator_state_is_safe() -> None:
    # TB's state ("\t", not ignored) is numbered before NL's and WS's: both are safe.
    text = 'start: (A | TB)+\nTB: "\\t"\nA: "a"\nWS: " "+\nNL: "\\n"+\n%ignore WS\n%ignore NL\n'
    grammar = load_grammar(text, "two-blanks")
    engine = Engine(grammar, BYTES, cache=False)
    table = ReserveTable(engine)
    q_tab, q_nl = (engine.dfa.trans[b] for b in (9, 10))
    assert q_tab < q_nl and q_tab < table.q_space
    assert table._safe == frozenset({q_nl, table.q_space})


def test_a_unit_item_does_not_hide_a_longer_one() -> None:
    # After "y x" the kernel holds a -> x . (rest 0, a unit item, sorted first) and
    # start -> "y" "x" . "z" (rest 1): " z" (1 token) beats a's " q" (2 tokens).
    grammar = load_grammar('start: "y" "x" "z" | "y" a "q"\na: "x"\nWS: " "\n%ignore WS\n', "unit")
    words = [b"x", b"y", b"z", b"q", b" ", b" x", b" y", b" z", b""]
    vocab = Vocabulary.from_spellings("unit", words, frozenset({8}), (8,))
    engine = Engine(grammar, vocab, cache=False)
    table = ReserveTable(engine)
    parser = engine.parser
    yx = parser.shift(parser.shift(parser.root, grammar.terminal_id("Y")), grammar.terminal_id("X"))
    assert [item[:3] for item in table._items[yx.state]] == [(0, 3, 1), (1, 1, 2)]
    assert table.node_reserve(yx) == 1
    assert table.node_plan(yx) == [grammar.terminal_id("Z")]


def options_after(table: ReserveTable, prefix: bytes) -> tuple[_Option, ...]:
    """``table.finish_options`` at the scan state ``prefix`` leaves."""
    scan = table.engine.scanner.scan(prefix)
    assert scan is not None
    return table.finish_options(scan[0], scan[1])


def test_no_newline_option_without_a_newline_lexeme() -> None:
    # "#c" is a comment that a space continues and a newline ends, but no lexeme
    # starts with a newline here: the comment can only be the last lexeme.
    text = 'start: A+\nA: "a"\nWS: " "\nCMT: /#[^\\n]*/\n%ignore WS\n%ignore CMT\n'
    grammar = load_grammar(text, "hash-comment")
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    cmt = 1 << grammar.terminal_id("CMT")
    options = options_after(table, b"#c")
    assert [o for o in options if o.abut < 0] == [_Option(b"", cmt, True)]
    # and an abutting option (the next piece right after the comment), which no
    # piece takes: only a newline ends the comment
    assert [(o.suffix, o.cands, o.end) for o in options if o.abut >= 0] == [(b"", cmt, False)]
    config = table.engine.lexer.advance(table.engine.lexer.initial, b"a#c")
    assert config is not None and table.reserve(config) == 0


# ------------------------------------------------------------------ ties and bounds


def spelled(*extra: bytes) -> Vocabulary:
    """Every single byte, then ``extra``, then EOS."""
    words = [bytes([i]) for i in range(256)] + list(extra) + [b""]
    return Vocabulary.from_spellings(
        "spelled", words, frozenset({len(words) - 1}), (len(words) - 1,)
    )


def test_a_lexeme_of_two_adjacent_terminals_is_a_piece_of_both() -> None:
    # "abcdefg" lexes as A (0) and B (1), which share no row; " abcdefg" is the only
    # token a piece of either can be written with (no letter is a token alone): one
    # visit of its trie node gives it to both.
    text = 'start: "X" A | "Y" B\nA: /[a-g]+/\nB: /[a-z]+/\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "adjacent")
    assert (grammar.terminal_id("A"), grammar.terminal_id("B")) == (0, 1)
    words = [b" ", b"X", b"Y", b" X", b" Y", b" abcdefg", b""]
    vocab = Vocabulary.from_spellings("adjacent", words, frozenset({6}), (6,))
    table = ReserveTable(Engine(grammar, vocab, cache=False))
    assert table.pieces[0] == table.pieces[1] == b" abcdefg"
    assert table.term_tokens[0] == table.term_tokens[1] == (5,)


def test_byte_class_representatives_are_printable_ascii() -> None:
    # Classes {1, 127} (no printable member: DEL is not one) and {2, 126} ("~" is).
    text = 'start: (T | U)+\nT: /[\\x01\\x7f]/\nU: /[\\x02~]/\nWS: " "\n%ignore WS\n'
    table = ReserveTable(Engine(load_grammar(text, "edges"), BYTES, cache=False))
    classes = dict(table._classes)
    assert classes[1] == (1, 127)
    assert classes[126] == (2, 126)


def tie_engine(text: str, name: str, extra: bytes) -> tuple[Engine, ReserveTable]:
    engine = Engine(load_grammar(text, name), spelled(extra), cache=False)
    return engine, ReserveTable(engine)


def test_a_tie_between_items_keeps_the_first() -> None:
    # After "y p": start -> "y" "p" . Z (rule 1) and start -> "y" "p" . W (rule 2) both
    # cost 2 (" z" is " " "z"; " ww" is " w" "w"); the first kernel item is kept, and
    # its piece drops the space after whitespace: "z" alone, one token.
    text = 'start: "y" "p" Z | "y" "p" W\nZ: "z"\nW: "ww"\nWS: " "+\n%ignore WS\n'
    engine, table = tie_engine(text, "item-tie", b" w")
    z, w = (engine.tables.terminal_names.index(n) for n in ("Z", "W"))
    assert (table.term_cost[z], table.term_cost[w]) == (2, 2)
    c = engine.lexer.advance(engine.lexer.initial, b"y p ")
    assert c is not None
    assert [item[:3] for item in table._items[c.node.state]] == [(2, 1, 2), (2, 2, 2)]
    assert table.node_plan(c.node) == [z]
    assert table.reserve(c) == 1
    assert table.completion(c) == [ord("z")]


def test_a_tie_through_a_unit_item_keeps_the_direct_item() -> None:
    # After "y x": start -> "y" "x" . Z costs 2, and so does a -> "x" . then "qq"; the
    # item found first (Z's) stays; after whitespace "z" alone is one token.
    text = 'start: "y" "x" Z | "y" a Q\na: "x"\nZ: "z"\nQ: "qq"\nWS: " "+\n%ignore WS\n'
    engine, table = tie_engine(text, "unit-tie", b" q")
    z, q = (engine.tables.terminal_names.index(n) for n in ("Z", "Q"))
    assert (table.term_cost[z], table.term_cost[q]) == (2, 2)
    c = engine.lexer.advance(engine.lexer.initial, b"y x ")
    assert c is not None
    assert table.node_plan(c.node) == [z]
    assert table.reserve(c) == 1
    assert table.completion(c) == [ord("z")]


def test_an_unfinishable_option_does_not_end_the_search() -> None:
    # "a" ends X, after which only Q ("q", no token spells it) can come: the option
    # is skipped, and "b" (Y) then " z" is taken: 3 tokens.
    text = 'start: X Q | Y Z\nX: "a"\nY: "ab"\nQ: "q"\nZ: "z"\nWS: " "\n%ignore WS\n'
    words = [bytes([i]) for i in range(256) if i != ord("q")] + [b""]
    vocab = Vocabulary.from_spellings("no-q", words, frozenset({255}), (255,))
    engine = Engine(load_grammar(text, "unfinishable"), vocab, cache=False)
    table = ReserveTable(engine, partial=True)
    c = engine.lexer.advance(engine.lexer.initial, b"a")
    assert c is not None
    assert table.reserve(c) == 3
    assert [vocab.token_bytes[t] for t in table.completion(c)] == [b"b", b" ", b"z"]


def test_joined_whitespace_before_an_unwritable_stack() -> None:
    # "select " with no "o" to write: the pending space's options lead to a stack
    # that cannot be completed; the reserve is INF, and no plan is asked of it.
    table = ReserveTable(Engine(ANALYST, ORDERS_NO_O, ORDERS_ONLY, cache=False), partial=True)
    c = table.engine.lexer.advance(table.engine.lexer.initial, b"select ")
    assert c is not None and c.size == 1
    assert table.finish_options(*c.scan[:2])[-1] == _Option(b"", term("WS"), False, True)
    assert table.reserve(c) == INF


def test_a_category_state_is_no_separator() -> None:
    # A space lexes as the ignored WS (first) and as the category NAME: not a pure
    # ignored lexeme, so not a separator.
    text = 'start: NAME+\nNAME: /[a-z]+| /\nWS.2: " "\n%ignore WS\n'
    engine = Engine(load_grammar(text, "category-space"), BYTES, {"NAME": [b"ab"]}, cache=False)
    with pytest.raises(ReserveError, match="a space is not a separator"):
        ReserveTable(engine)


def fake_short_lexemes(
    n_states: int, edges: dict[tuple[int, int], int], accepting: set[int], dead: set[int]
) -> list[bytes]:
    """``_short_lexemes`` of terminal 0 over a made-up DFA: ``edges`` (state, byte) ->
    state, every byte its own class; states in ``dead`` are not live for terminal 0."""
    trans = [DEAD] * (n_states * 256)
    for (q, b), q2 in edges.items():
        trans[q * 256 + b] = q2
    table = ReserveTable(ENGINE)
    table.engine = SimpleNamespace(  # type: ignore[assignment]
        dfa=SimpleNamespace(
            trans=trans,
            accept=[int(q in accepting) for q in range(n_states)],
            live=[int(q not in dead) for q in range(n_states)],
        )
    )
    bytes_used = sorted({b for _, b in edges})
    table._classes = [(b, (b,)) for b in bytes_used]
    return table._short_lexemes(0)


def test_short_lexemes_stop_at_24() -> None:
    # A chain of 13 accepting states on "a": each level adds "a" * k and its upper case;
    # the search stops after the level that reaches 24.
    chain = {(k, ord("a")): k + 1 for k in range(13)}
    out = fake_short_lexemes(14, chain, set(range(1, 14)), set())
    assert out == [s for k in range(1, 13) for s in (b"a" * k, b"A" * k)]


def test_short_lexemes_stop_at_20000_states() -> None:
    # 160 states, then 160 * 124 more: 20,000 states seen after two levels, and the
    # search stops before the third, whose states accept.
    edges = {(0, b): 1 + b for b in range(160)}
    for i in range(160):
        for b in range(124):
            edges[(1 + i, b)] = 161 + i * 124 + b
    final = 161 + 160 * 124
    edges |= {(q, 0): final for q in range(161, final)}
    assert fake_short_lexemes(final + 1, edges, {final}, set()) == []


def test_short_lexemes_count_only_live_states() -> None:
    # 20,099 states not live for the terminal are never entered, so they do not spend
    # the 20,000-state budget: "\0\0\0" is found on the third level.
    edges = {(0, 0): 1, (1, 0): 2, (2, 0): 3}
    dead = set()
    for b in range(1, 200):
        edges[(0, b)] = 3 + b
        dead.add(3 + b)
        for c in range(100):
            edges[(3 + b, c)] = 203 + (b - 1) * 100 + c
            dead.add(203 + (b - 1) * 100 + c)
    n = 203 + 199 * 100
    assert fake_short_lexemes(n, edges, {3}, dead) == [b"\x00\x00\x00"]


def test_no_newline_option_when_a_newline_and_a_space_do_not_join() -> None:
    # A newline lexes (NL) but a space after it starts another lexeme: a newline is
    # not a separator that the next piece's space joins, so "#c" can only end the text.
    text = 'start: A+\nA: "a"\nWS: " "\nNL: "\\n"\nCMT: /#[^\\n]*/\n'
    text += "%ignore WS\n%ignore NL\n%ignore CMT\n"
    grammar = load_grammar(text, "newline-apart")
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    cmt = 1 << grammar.terminal_id("CMT")
    options = options_after(table, b"#c")
    assert [o for o in options if o.abut < 0] == [_Option(b"", cmt, True)]
    # and an abutting option (the next piece right after the comment), which no
    # piece takes: only a newline ends the comment
    assert [(o.suffix, o.cands, o.end) for o in options if o.abut >= 0] == [(b"", cmt, False)]
    config = table.engine.lexer.advance(table.engine.lexer.initial, b"a#c")
    assert config is not None and table.reserve(config) == 0


def test_newline_option_needs_a_newline_to_end_the_lexeme() -> None:
    # WS takes spaces, newlines and byte 0xF6 (so the state before "#c"'s has a
    # transition on 0xF6 = 256 - 10); a newline ends "#c", a space does not.
    text = 'start: A+\nA: "a"\nWS: /[ \\n\\xf6]+/\nCMT: /#[^\\n]*/\n%ignore WS\n%ignore CMT\n'
    grammar = load_grammar(text, "newline-ends")
    engine = Engine(grammar, BYTES, cache=False)
    table = ReserveTable(engine)
    scan = engine.scanner.scan(b"#c")
    assert scan is not None
    assert engine.dfa.trans[(scan[0] - 1) * 256 + 0xF6] != DEAD
    cmt = 1 << grammar.terminal_id("CMT")
    assert table.finish_options(scan[0], scan[1]) == (
        _Option(b"", cmt, True),
        _Option(b"\n", cmt, False),
    )


def test_one_continuation_per_candidate_set() -> None:
    # "#" goes on with " a" (a space would continue it, a newline ends it), and "# a"
    # ends before a space: both continue as CMT, and the first found (the newline) stays.
    text = 'start: A+\nA: "a"\nWS: /[ \\n]+/\nCMT: /#( [a-z]+)?/\n%ignore WS\n%ignore CMT\n'
    grammar = load_grammar(text, "comment-then-word")
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    cmt = 1 << grammar.terminal_id("CMT")
    assert options_after(table, b"#") == (
        _Option(b"", cmt, True),
        _Option(b"\n", cmt, False),
    )


def test_one_continuation_per_candidate_set_after_a_join() -> None:
    # A tab that a space joins (the joined option, first), or "\tx" that a space ends:
    # both continue as CMT, and the joined option stays.
    text = 'start: A+\nA: "a"\nWS: " "+\nCMT: /\\t+ *|\\tx/\n%ignore WS\n%ignore CMT\n'
    grammar = load_grammar(text, "tab-then-x")
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    cmt = 1 << grammar.terminal_id("CMT")
    assert options_after(table, b"\t") == (
        _Option(b"", cmt, True),
        _Option(b"", cmt, False, True),
    )


def test_finish_options_step_with_a_class_representative() -> None:
    # The class of "!" holds byte 0 too; "!" represents it: "<" finishes as "<!>".
    text = 'start: TAG+\nTAG: /<[^> ]+>/\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "tag")
    table = ReserveTable(Engine(grammar, BYTES, cache=False))
    assert dict(table._classes)[33][:2] == (0, 1)
    tag = 1 << grammar.terminal_id("TAG")
    assert options_after(table, b"<") == (
        _Option(b"!>", tag, True),
        _Option(b"!>", tag, False),
    )


def test_finish_options_leave_the_lexicon_with_another_class_member() -> None:
    # NAME (a category, word "<!>") and TAG lex the same strings. From "<", "!" follows
    # the word; the class of "!" leaves the lexicon with its first other member, byte 0:
    # TAG alone is then reached as "\0>", two bytes on.
    text = 'start: (NAME | TAG)+\nNAME: /<[^> ]+>/\nTAG: /<[^> ]+>/\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "tag-word")
    engine = Engine(grammar, BYTES, {"NAME": [b"<!>"]}, cache=False)
    table = ReserveTable(engine)
    both, tag = 0b11, 1 << grammar.terminal_id("TAG")
    assert grammar.terminal_id("NAME") == 0
    assert options_after(table, b"<") == (
        _Option(b"!>", both, True),
        _Option(b"\x00>", tag, True),
        _Option(b"!>", both, False),
        _Option(b"\x00>", tag, False),
    )


def test_finish_options_skip_a_class_that_is_all_lexicon() -> None:
    # The word "< >": after "<" the space's class (the space alone) is all lexicon, so
    # it gives no step off the lexicon; TAG alone is reached through "!" as "!>".
    text = 'start: (NAME | TAG)+\nNAME: /<[^>]+>/\nTAG: /<[^>]+>/\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "spaced-word")
    engine = Engine(grammar, BYTES, {"NAME": [b"< >"]}, cache=False)
    table = ReserveTable(engine)
    assert dict(table._classes)[32] == (32,)
    both, tag = 0b11, 1 << grammar.terminal_id("TAG")
    assert options_after(table, b"<") == (
        _Option(b" >", both, True),
        _Option(b"!>", tag, True),
        _Option(b" >", both, False),
        _Option(b"!>", tag, False),
    )


def test_finish_options_stop_at_the_state_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # The grammar of test_finish_options_through_the_lexicon_only. From the start
    # state, level 1 holds "a" (in the lexicon), " " and "~"; "b" (NAME with no word
    # left) is pruned and not counted: 4 states seen. Level 2 adds "ab": 5. With a
    # limit of 5, level 1 is searched (4 < 5) and level 2 is not (5 states seen), so
    # the word "ab" is not found; with 6 it is. Had "b" been counted, level 1 would
    # not have been searched at 5.
    text = 'start: (NAME | T)+\nNAME: /[a-z]+/\nT: "~"\nWS: " "\n%ignore WS\n'
    grammar = load_grammar(text, "names")
    engine = Engine(grammar, BYTES, {"NAME": [b"ab"]}, cache=False)
    name, tilde, ws = (1 << grammar.terminal_id(n) for n in ("NAME", "T", "WS"))
    monkeypatch.setattr(reserve, "_FINISH_LIMIT", 5)
    assert ReserveTable(engine).finish_options(0, 0) == (
        _Option(b" ", ws, True),
        _Option(b"~", tilde, True),
        _Option(b" ", ws, False),
        _Option(b"~", tilde, False),
    )
    monkeypatch.setattr(reserve, "_FINISH_LIMIT", 6)
    assert ReserveTable(engine).finish_options(0, 0) == (
        _Option(b" ", ws, True),
        _Option(b"~", tilde, True),
        _Option(b"ab", name, True),
        _Option(b" ", ws, False),
        _Option(b"~", tilde, False),
        _Option(b"ab", name, False),
    )
