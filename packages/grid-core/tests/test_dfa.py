"""Tests of grid_core.dfa: the union DFA over bytes of all terminals.

Toy fixture (hand-checkable), terminals A = ``ab`` (bit 0) and B = ``a+`` (bit 1),
numbered breadth-first from the start state with bytes ascending::

    0 --a--> 1 --a--> 2 --a--> 2          state  accept  live
             1 --b--> 3                     0     {}      {A,B}
                                            1     {B}     {A,B}
    every other byte: DEAD                  2     {B}     {B}
                                            3     {A}     {A}

The oracle for the differential tests is Python: ``re.fullmatch(p, s, re.ASCII)``
for accept and ``regex.fullmatch(p, s, flags=regex.ASCII, partial=True)`` for
live, with byte strings read as latin-1 text.
"""

from __future__ import annotations

import array
import dataclasses
import json
import os
import random
import re
import subprocess
import sys

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_core.dfa import DEAD, ByteDFA, build_union_dfa
from grid_core.errors import GrammarError, PatternError

DERANDOMIZED = settings(derandomize=True, deadline=None, max_examples=80)
LATIN1 = st.characters(max_codepoint=0xFF)

# -- the differential table: SQL-like terminals and edge cases, in one union ---------

UNION: list[tuple[str, str]] = [
    ("KW_SELECT", r"(?i:select)"),
    ("KW_SELECTED", r"(?i:selected)"),
    ("KW_FROM", r"(?i:from)"),
    ("IDENT", r'[A-Za-z_][A-Za-z0-9_]*|"(?:[^"]|"")+"'),
    ("NUMBER", r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"),
    ("STRING", r"'(?:[^']|'')*'"),
    ("LINE_COMMENT", r"--[^\n]*"),
    ("BLOCK_COMMENT", r"/\*(?:[^*]|\*+[^*/])*\*+/"),
    ("WS", r"[ \t\r\n]+"),
    ("LE", r"<="),
    ("NE", r"<>|!="),
    ("LT", r"<"),
    ("MINUS", r"-"),
    ("STAR", r"\*"),
    ("NESTED", r"(a(b(c|d)*)+e)?f"),
    ("CLASSES", r"[a-fA-F0-9]{2,4}|[^a-z\d\s]+!"),
    ("FOLD_CLASS", r"(?i)[^a-c][x-z]"),
    ("UNFOLD", r"(?i)a(?-i:b)c"),
    ("DOT", r"<.>"),
    ("DOT_ALL", r"(?s)\[.\]"),
    ("HIGH", r"[\xc2-\xdf][\x80-\xbf]|\xff+"),
    ("COUNTED", r"(?:ab){1,3}c{2}d{2,}"),
    ("LAZY", r"x+?y{1,2}?"),
    ("CATEGORIES", r"\w\W\s\S\d\D"),
    ("LOOPS", r"(?:a|b?)+c|(?:x{0,2}){2,3}y|(?:(?:ab)?)*d"),
]


def strings_near(pattern: str) -> st.SearchStrategy[str]:
    """Latin-1 text in, just inside and just outside the language of ``pattern``."""
    member = st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True, alphabet=LATIN1)
    cut = st.tuples(member, st.integers(0, 30)).map(lambda m: m[0][: m[1]])
    twice = st.tuples(member, member).map("".join)
    edited = st.tuples(member, st.integers(0, 30), LATIN1, st.integers(0, 1)).map(
        lambda m: m[0][: m[1]] + m[2] + m[0][m[1] + m[3] :]
    )
    return st.one_of(member, cut, twice, edited, st.text(LATIN1, max_size=4))


def _greedy(p: str) -> str:
    """The same language with greedy quantifiers: ``regex``'s partial matching
    misreports lazy ones (``x+?y{1,2}?`` "partially matches" ``xX``; pinned in
    grid-spec's tests), so the liveness oracle reads the greedy spelling."""
    return p.replace("+?", "+").replace("}?", "}")


_COMPILED = [
    (re.compile(p, re.ASCII), regex.compile(_greedy(p), flags=regex.ASCII)) for _, p in UNION
]


def assert_agrees_with_python(dfa: ByteDFA, text: str) -> None:
    """For every terminal: accept and live after ``text`` equal Python's verdicts."""
    state = dfa.run(0, text.encode("latin-1"))
    accept = dfa.accept[state] if state != DEAD else 0
    live = dfa.live[state] if state != DEAD else 0
    for t, (plain, partial) in enumerate(_COMPILED):
        name = dfa.terminal_names[t]
        assert bool(accept >> t & 1) == (plain.fullmatch(text) is not None), (name, text)
        assert bool(live >> t & 1) == (partial.fullmatch(text, partial=True) is not None), (
            name,
            text,
        )


@pytest.fixture(scope="module")
def union_dfa() -> ByteDFA:
    dfa = build_union_dfa(UNION)
    dfa.check_invariants()
    return dfa


@pytest.mark.parametrize("pattern", [pytest.param(p, id=n) for n, p in UNION])
@DERANDOMIZED
@given(data=st.data())
def test_union_agrees_with_python(union_dfa: ByteDFA, pattern: str, data: st.DataObject) -> None:
    assert_agrees_with_python(union_dfa, data.draw(strings_near(pattern)))


def test_union_agrees_with_python_seeded(union_dfa: ByteDFA) -> None:
    rng = random.Random(1_000_003)
    pieces = [
        "select", "SeLeCTed", "from", "x_1", '"a""b"', "12", ".5", "e-3", "'", "''", "--",
        "/*", "*", "*/", "\n", " ", "<", "=", ">", "!", "ab", "cc", "dd", "f", "e", "[",
        "]", "\xc3", "\xa9", "\xff",
    ]  # fmt: skip
    for _ in range(1500):
        text = "".join(
            rng.choice(pieces) if rng.random() < 0.8 else chr(rng.randrange(256))
            for _ in range(rng.randrange(6))
        )
        assert_agrees_with_python(union_dfa, text)


def test_union_reports_every_candidate(union_dfa: ByteDFA) -> None:
    names = union_dfa.terminal_names

    def accepted(text: bytes) -> set[str]:
        state = union_dfa.run(0, text)
        bits = union_dfa.accept[state] if state != DEAD else 0
        return {n for t, n in enumerate(names) if bits >> t & 1}

    assert accepted(b"SeLeCt") == {"KW_SELECT", "IDENT"}
    assert accepted(b"selected") == {"KW_SELECTED", "IDENT"}
    assert accepted(b"selectx") == {"IDENT"}
    assert accepted(b"<") == {"LT"}
    assert accepted(b"<=") == {"LE"}
    assert accepted(b"'it''s'") == {"STRING"}
    assert union_dfa.run(0, b"'it''s' ") == DEAD


# -- the toy fixture of the module header ------------------------------------------------


def test_toy_tables_by_hand() -> None:
    dfa = build_union_dfa([("A", "ab"), ("B", "a+")])
    dfa.check_invariants()
    assert dfa.n_states == 4
    assert dfa.accept == (0b00, 0b10, 0b10, 0b01)
    assert dfa.live == (0b11, 0b11, 0b10, 0b01)
    a, b = ord("a"), ord("b")
    expected = {(0, a): 1, (1, a): 2, (1, b): 3, (2, a): 2}
    for s in range(4):
        for byte in range(256):
            assert dfa.step(s, byte) == expected.get((s, byte), DEAD)
    assert dfa.trans.typecode == "i" and len(dfa.trans) == 4 * 256
    # a golden value: the fingerprint must not move across processes, machines or versions
    assert dfa.fingerprint == "74ed62c92f7fc3532c2482cf3bc81c8f"


def test_step_and_run_on_dead() -> None:
    dfa = build_union_dfa([("A", "ab"), ("B", "a+")])
    assert dfa.step(0, ord("b")) == DEAD
    assert dfa.step(DEAD, ord("a")) == DEAD
    assert dfa.run(0, b"ba") == DEAD
    assert dfa.run(DEAD, b"") == DEAD
    assert dfa.run(1, b"aaa") == 2


def test_minimisation_merges_equivalent_states() -> None:
    # After "a" and after "c" the NFA sets differ but the futures are equal.
    dfa = build_union_dfa([("T", "ab|cb")])
    assert dfa.n_states == 3
    assert dfa.run(0, b"a") == dfa.run(0, b"c") == 1


def test_minimisation_keeps_different_accept_sets_apart() -> None:
    dfa = build_union_dfa([("A", "xa"), ("B", "ya"), ("AB", "[xy]a")])
    after_x, after_y = dfa.run(0, b"x"), dfa.run(0, b"y")
    assert after_x != after_y
    assert dfa.live[after_x] == 0b101 and dfa.live[after_y] == 0b110


# -- fingerprints ---------------------------------------------------------------------


def test_fingerprint_depends_on_language_not_spelling() -> None:
    first = build_union_dfa([("T", "[ab]c+"), ("U", "(?i:x)")])
    second = build_union_dfa([("T", "(?:a|b)cc*"), ("U", "[xX]")])
    assert first.fingerprint == second.fingerprint
    renamed = build_union_dfa([("T2", "[ab]c+"), ("U", "(?i:x)")])
    assert renamed.fingerprint != first.fingerprint
    swapped = build_union_dfa([("U", "(?i:x)"), ("T", "[ab]c+")])
    assert swapped.fingerprint != first.fingerprint


def test_sql_union_fingerprint_is_stable_across_processes(sql_dfa: ByteDFA) -> None:
    again = build_union_dfa(sql_terminals())
    assert again.fingerprint == sql_dfa.fingerprint
    assert again.trans == sql_dfa.trans and again.accept == sql_dfa.accept
    code = (
        "import json, sys\n"
        "from grid_core.dfa import build_union_dfa\n"
        "terminals = [tuple(t) for t in json.loads(sys.stdin.read())]\n"
        "print(build_union_dfa(terminals).fingerprint)\n"
    )
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(sql_terminals()),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        assert out.stdout.strip() == sql_dfa.fingerprint


# -- the SQL-like lexicon at full size ---------------------------------------------------

_KEYWORD_TEXT = """
select from where group by having order limit offset insert into values update set delete
create table drop alter add column primary key foreign references unique not null default
check index view trigger begin commit rollback transaction savepoint release as distinct all
union intersect except join inner left right full outer cross natural on using and or in is
like glob between exists case when then else end cast collate asc desc nulls first last with
recursive returning conflict do nothing replace ignore abort fail raise temp temporary if
vacuum analyze explain query plan pragma attach detach database schema rename to
autoincrement constraint deferrable deferred immediate exclusive initially match regexp
escape isnull notnull filter over partition window range rows groups unbounded preceding
following current row exclude others ties generated always stored virtual without rowid
strict true false current_date current_time current_timestamp integer text real blob numeric
boolean varchar char date time timestamp interval lateral fetch next only percent some any
grant revoke privileges user role function procedure returns language
"""
KEYWORDS = _KEYWORD_TEXT.split()

PUNCTUATION = [
    "(", ")", ",", ";", ".", "*", "+", "-", "/", "%", "=", "==", "!=", "<>", "<", "<=", ">",
    ">=", "||", "?", "::", "[", "]", "&", "|", "~", "<<", ">>", "->", "->>",
]  # fmt: skip


def sql_terminals() -> list[tuple[str, str]]:
    """About 200 terminals: case-insensitive keywords, lexemes and punctuation."""
    terminals = [(f"KW_{k.upper()}", f"(?i:{k})") for k in KEYWORDS]
    terminals += [
        ("IDENT", r'[A-Za-z_][A-Za-z0-9_]*|"(?:[^"]|"")+"'),
        ("NUMBER", r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"),
        ("STRING", r"'(?:[^']|'')*'"),
        ("LINE_COMMENT", r"--[^\n]*"),
        ("BLOCK_COMMENT", r"/\*(?:[^*]|\*+[^*/])*\*+/"),
        ("WS", r"[ \t\r\n]+"),
        ("PARAM", r"[:@$][A-Za-z_][A-Za-z0-9_]*"),
    ]
    terminals += [(f"P{i}", re.escape(p)) for i, p in enumerate(PUNCTUATION)]
    return terminals


@pytest.fixture(scope="module")
def sql_dfa() -> ByteDFA:
    return build_union_dfa(sql_terminals())


def test_sql_union_tables(sql_dfa: ByteDFA) -> None:
    sql_dfa.check_invariants()
    names = sql_dfa.terminal_names
    bit = {name: 1 << t for t, name in enumerate(names)}
    assert len(names) == len(KEYWORDS) + 7 + len(PUNCTUATION)
    assert sql_dfa.n_states < 2000
    select = sql_dfa.run(0, b"SeLeCt")
    assert sql_dfa.accept[select] == bit["KW_SELECT"] | bit["IDENT"]
    comment = sql_dfa.run(0, b"/* x ** y *")
    assert sql_dfa.accept[comment] == 0 and sql_dfa.live[comment] == bit["BLOCK_COMMENT"]
    assert sql_dfa.accept[sql_dfa.run(comment, b"/")] == bit["BLOCK_COMMENT"]
    assert sql_dfa.run(0, b"-- to the end\n") == DEAD
    assert sql_dfa.accept[sql_dfa.run(0, b"->>")] == bit[f"P{PUNCTUATION.index('->>')}"]


# -- check_invariants catches broken tables -----------------------------------------------


def test_check_invariants_rejects_broken_tables() -> None:
    dfa = build_union_dfa([("A", "ab"), ("B", "a+")])
    broken_trans = array.array("i", dfa.trans)
    broken_trans[5] = 7
    cases = [
        dataclasses.replace(dfa, trans=broken_trans),
        dataclasses.replace(dfa, accept=(0b10, *dfa.accept[1:])),  # accepts B on the empty string
        dataclasses.replace(dfa, accept=(*dfa.accept[:3], 0b11)),  # accept not within live
        dataclasses.replace(dfa, live=(0b11, 0b11, 0b11, 0b01)),  # live too large
        dataclasses.replace(dfa, fingerprint="0" * 32),
        dataclasses.replace(dfa, terminal_names=("A", "A")),
    ]
    for case in cases:
        with pytest.raises(AssertionError, match="ByteDFA invariant"):
            case.check_invariants()


# -- errors ---------------------------------------------------------------------------


def test_pattern_errors_name_the_terminal() -> None:
    with pytest.raises(PatternError, match="KW_END"):
        build_union_dfa([("IDENT", "[a-z]+"), ("KW_END", r"end\b")])


@pytest.mark.parametrize(
    ("terminals", "message"),
    [
        pytest.param([], "at least one terminal", id="no_terminals"),
        pytest.param([("A", "a"), ("A", "b")], "duplicate terminal names: A", id="duplicate"),
    ],
)
def test_bad_terminal_sequences(terminals: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        build_union_dfa(terminals)


def test_state_blow_up_is_bounded() -> None:
    # The classic exponential case: the 12th byte from the end must be an 'a'.
    with pytest.raises(GrammarError, match="more than 1000 states"):
        build_union_dfa([("T", "[ab]*a[ab]{11}")], max_states=1000)
    assert build_union_dfa([("T", "[ab]*a[ab]{5}")]).n_states == 2**6
