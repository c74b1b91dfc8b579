"""Projection stays inside the dialect: L(role) ⊆ L(dialect) ⊆ what the database parses.

DESIGN.md section 11: "Cutting a production never turns a keyword into an
identifier." Issue 15 found the opposite: with set operations cut, the intern
role's language held `SELECT name FROM departments union;` (`union` read as a
table alias), which neither the dialect grammar nor SQLite reads, so `grid ask
--role intern` could fail on a statement its own mask produced. The dialects now
keep every keyword reserved (no identifier terminal takes one bare; see
`grid_sql.dialect`), and leave out what the databases refuse (`SELECT *` without
FROM, VALUES with ORDER BY/LIMIT in SQLite).

Roles: the example policy's four (analyst, clerk, admin, intern: the roles of
the walk-arm bench and the RBAC speller), and synthetic roles on every relation
of the example schema: one per verb, one per banned clause, one banning every
clause. Each role is compiled as the CLI compiles it (its schema lexicon, the
projection cut by that lexicon); membership is decided by grid-core's lexer and
parser, what the mask enforces.

- **Regressions**: the attacker's statements are in no role's language, not in
  L1, and the database refuses each of them.
- **Property** (hypothesis, derandomized): derivations of the role's grammar,
  spelled with keyword-spelled free names on purpose (`role_sentences.py`);
  every candidate in L(role) is in L1 (same lexicon), parses with the
  SemanticChecker's parser, and the database parses it: SQLite prepares it
  (`EXPLAIN` on an in-memory database with the example schema) and PostgreSQL
  plans it (`EXPLAIN` from a PL/pgSQL function that returns the SQLSTATE; the
  server is the one the other grid-sql tests start, see pg_server.py).

What "the database parses" means: preparing also resolves names and types, and
the generated statements name random columns and call functions with random
arguments, so a semantic error (no such column, wrong number of arguments, a
datatype mismatch) is a statement the database *parsed*. A parse-class error
fails the test: SQLSTATE 42601 (syntax_error) in PostgreSQL; in SQLite the
messages of its tokenizer and parser (`SQLITE_PARSE_ERRORS`), plus "no tables
specified", which SQLite raises for `SELECT *` without FROM. PostgreSQL's parse
analysis uses 42601 for a few refusals that depend on values, widths and names,
not on the shape of the text (`ORDER BY 3.5`, UNION operands or VALUES rows of
different widths, a two-column scalar subquery, `SET a = 1, a = 2`): those count
as parsed (`PG_ANALYSIS_ERRORS`).
"""

from __future__ import annotations

import dataclasses
import random
import sqlite3
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources

import pytest
from core_language import CoreLanguage
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pg_server import Server, running_server
from role_sentences import Generator, Speller

from grid_sql.checker import StatementParseError, parse_statement
from grid_sql.dialect import Dialect
from grid_sql.dialects import POSTGRES, SQLITE, get_dialect
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import CLAUSES, VERBS, PolicyBundle, example_policy
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar
from grid_sql.schema import SchemaSnapshot, example_schema

COMPANY_SQL = resources.files("grid_sql.examples").joinpath("company.sql").read_text("utf-8")
# The example schema's DDL for PostgreSQL (company.sql without its rows).
PG_SCHEMA = "\n".join(line for line in COMPANY_SQL.splitlines() if line.startswith("CREATE"))

SYNTHETIC_ROLES = {
    **{f"only_{v.lower()}": ([v], []) for v in VERBS},
    **{f"no_{c}": (list(VERBS), [c]) for c in CLAUSES},
    "no_clauses": (["SELECT"], list(CLAUSES)),
}
ROLES = ("admin", "analyst", "clerk", "intern", *SYNTHETIC_ROLES)


def _synthetic_policy() -> str:
    lines = ["version = 1"]
    for name, (verbs, banned) in SYNTHETIC_ROLES.items():
        lines += [
            f"[roles.{name}]",
            f"verbs = {verbs!r}".replace("'", '"'),
            'tables = "*"',
            f"banned_clauses = {banned!r}".replace("'", '"'),
        ]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class RoleCase:
    dialect: Dialect
    role: str
    banned: frozenset[str]
    language: CoreLanguage
    dialect_language: CoreLanguage
    generator: Generator


@cache
def schema(dialect: str) -> SchemaSnapshot:
    return dataclasses.replace(example_schema(), dialect=dialect)


@cache
def policy(dialect: str) -> tuple[PolicyBundle, PolicyBundle]:
    synthetic = PolicyBundle.loads(_synthetic_policy(), "synthetic.policy.toml", schema(dialect))
    return example_policy(schema(dialect)), synthetic


@cache
def role_case(dialect_name: str, role: str) -> RoleCase:
    dialect = get_dialect(dialect_name)
    bundle = next(p for p in policy(dialect_name) if role in p.roles)
    snapshot = schema(dialect_name)
    lexicon = SchemaLexicon.build(dialect, snapshot, bundle.grants(role, snapshot))
    words = dict(lexicon.words)
    projection = RoleProjection.compile(bundle.role(role), dialect, words=words)
    grammar = projection.grammar
    speller = Speller(dialect, grammar, dialect_dfa(dialect), words)
    return RoleCase(
        dialect,
        role,
        projection.banned_clauses,
        CoreLanguage(grammar, dialect, words),
        CoreLanguage(dialect_grammar(dialect), dialect, words),
        Generator(grammar, speller),
    )


# ---------------------------------------------------------------- the databases

# The messages of SQLite's tokenizer and parser (tokenize.c, parse.y), and the one
# select.c raises for `*` with no FROM: a statement that draws one is not SQL to it.
SQLITE_PARSE_ERRORS = (
    "syntax error",
    "incomplete input",
    "unrecognized token",
    "should come after",  # ORDER BY / LIMIT placement in a compound
    "no tables specified",
)


@cache
def sqlite_db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.executescript(COMPANY_SQL)
    return db


def sqlite_verdict(sql: bytes) -> str | None:
    """None when SQLite parses ``sql`` (prepared by EXPLAIN, never run), else its message.
    A semantic error (no such column, ...) counts as parsed (see the module header)."""
    try:
        sqlite_db().execute("EXPLAIN " + sql.decode("utf-8"))
    except sqlite3.Error as err:
        message = str(err)
        return message if any(m in message for m in SQLITE_PARSE_ERRORS) else None
    return None


PG_PARSE = """
CREATE FUNCTION grid_parse(q text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE 'EXPLAIN ' || q;
  RETURN '';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END $f$;
"""


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(PG_SCHEMA + PG_PARSE) as server:
        yield server


# SQLSTATE 42601 messages that PostgreSQL's parse analysis raises on values and
# counts, not on the shape of the text: a statement that draws one was parsed.
PG_ANALYSIS_ERRORS = (
    "non-integer constant in",  # ORDER BY 3.5, GROUP BY 'x'
    "query must have the same number of columns",  # each UNION query ...
    "subquery must return only one column",  # (SELECT 1, 2) + 1
    "VALUES lists must all be the same length",
    "multiple assignments to same column",  # SET a = 1, a = 2
)


def postgres_verdicts(server: Server, statements: list[bytes]) -> list[str | None]:
    """Per statement: None when PostgreSQL parses it (EXPLAIN, never run; a semantic
    error counts as parsed), else its syntax error (SQLSTATE 42601). One psql run."""
    rows = ", ".join(
        f"({i}, '{s.decode('utf-8').rstrip().removesuffix(';').replace(chr(39), chr(39) * 2)}')"
        for i, s in enumerate(statements)
    )
    script = f"SELECT i, grid_parse(q) FROM (VALUES {rows}) AS v(i, q) ORDER BY i;\n"
    out = server.run(script, "-F", "\t")
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    verdicts: list[str | None] = [None] * len(statements)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == len(statements), out.stdout
    for line in lines:
        index, _, message = line.partition("\t")
        refused = message.startswith("42601") and not any(m in message for m in PG_ANALYSIS_ERRORS)
        verdicts[int(index)] = message if refused else None
    return verdicts


# ---------------------------------------------------------------- regressions

# Found in L(intern) of the example policy (issue 15) or in L1 (every dialect), with
# the databases whose parser refuses each. GRID is stricter than a database where
# that database reads a keyword as a name (SQLite's contextual WINDOW, PostgreSQL's
# column labels after AS): a keyword is reserved everywhere. `departments.*`
# without FROM is refused by both, after the parse ("no such table", "missing
# FROM-clause entry").
BOTH = ("sqlite", "postgres")
ATTACKS: dict[bytes, tuple[str, ...]] = {
    b"SELECT name FROM departments union;": BOTH,
    b"SELECT name FROM departments join;": BOTH,
    b"SELECT name FROM departments window;": ("postgres",),
    b"SELECT name FROM departments intersect;": BOTH,
    b"SELECT name FROM departments order;": BOTH,
    b"SELECT * ;": BOTH,
    b"SELECT *;": BOTH,
    b"SELECT departments.* ;": (),
    b"SELECT 1 AS delete;": ("sqlite",),
    b"SELECT 1 delete;": ("sqlite",),
    b"SELECT name AS from FROM departments;": ("sqlite",),
    b"SELECT DISTINCT.name FROM departments;": BOTH,
    b"SELECT select.name FROM departments AS select;": BOTH,
    b"SELECT name FROM departments AS where;": BOTH,
    b"SELECT From FROM departments;": BOTH,
}
DIALECT_ATTACKS: dict[str, tuple[bytes, ...]] = {
    "sqlite": (
        b"VALUES (1) ORDER BY 1;",
        b"VALUES (1) LIMIT 1;",
        b"SELECT 1 UNION VALUES (2) LIMIT 1;",
        b"SELECT 1 match;",  # a table name for SQLite, never a bare alias
        b"SELECT name FROM departments AS table;",
    ),
    "postgres": (
        b"SELECT 1 year;",  # PostgreSQL takes `year` as a column label only after AS
        b"SELECT name FROM departments AS user;",
    ),
}
ATTACK_CASES = [pytest.param(d, s, id=f"{d}-{s.decode()}") for d in BOTH for s in ATTACKS] + [
    pytest.param(d, s, id=f"{d}-{s.decode()}") for d, ss in DIALECT_ATTACKS.items() for s in ss
]


def refused_by(database: str) -> list[bytes]:
    return [s for s, dbs in ATTACKS.items() if database in dbs] + list(DIALECT_ATTACKS[database])


@pytest.mark.parametrize(("dialect", "sql"), ATTACK_CASES)
def test_attacks_are_in_no_role_language(dialect: str, sql: bytes) -> None:
    admitted = [r for r in ROLES if role_case(dialect, r).language.accepts(sql)]
    assert admitted == [], f"{sql!r} is in L of {admitted}"
    assert not role_case(dialect, "admin").dialect_language.accepts(sql)
    with pytest.raises(StatementParseError):
        parse_statement(sql, dialect)


@pytest.mark.parametrize("sql", refused_by("sqlite"), ids=bytes.decode)
def test_sqlite_refuses_the_attacks(sql: bytes) -> None:
    """The premise: SQLite's parser refuses these (so L must not hold them)."""
    assert sqlite_verdict(sql) is not None


def test_postgres_refuses_the_attacks(postgres: Server) -> None:
    attacks = refused_by("postgres")
    verdicts = postgres_verdicts(postgres, attacks)
    assert [s for s, v in zip(attacks, verdicts, strict=True) if v is None] == []


@pytest.mark.parametrize("dialect", BOTH)
def test_a_parenthesised_join_is_a_join(dialect: str) -> None:
    """A role that bans `join` has no join in parentheses either (PostgreSQL's
    grammar has a rule of its own for it, `joined_table`, cut with the clause)."""
    sql = b"SELECT id FROM (departments JOIN employees ON true);"
    banning = [r for r in ROLES if "join" in role_case(dialect, r).banned]
    assert set(banning) == {"intern", "no_join", "no_clauses"}
    assert [r for r in banning if role_case(dialect, r).language.accepts(sql)] == []
    assert role_case(dialect, "admin").language.accepts(sql)


QUOTED = {
    "sqlite": (
        b'SELECT 1 AS "delete";',
        b'SELECT "union".name FROM departments AS "union";',
        b"SELECT name FROM departments AS [join];",
        b"SELECT * FROM departments;",
        b"SELECT departments.* FROM departments;",
        b"SELECT 1 WHERE 1;",
        b"VALUES (1);",
        b"VALUES (2) UNION SELECT 1 ORDER BY 1;",
    ),
    "postgres": (
        b'SELECT 1 AS "delete";',
        b'SELECT "union".name FROM departments AS "union";',
        b"SELECT 1 AS year;",
        b"SELECT * FROM departments;",
        b"VALUES (1) ORDER BY 1 LIMIT 1;",
    ),
}


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [pytest.param(d, s, id=f"{d}-{s.decode()}") for d, ss in QUOTED.items() for s in ss],
)
def test_quoted_keywords_and_starred_selects_stay_in(dialect: str, sql: bytes) -> None:
    """The fix is no wider than the rule: a quoted keyword is a name, `*` with FROM is fine."""
    assert role_case(dialect, "admin").language.accepts(sql)
    parse_statement(sql, dialect)
    if dialect == "sqlite":
        assert sqlite_verdict(sql) is None


# Name positions, each with the DDL that makes the name resolvable when it parses.
NAME_POSITIONS = {
    "table": ('CREATE TABLE "{w}" (x)', "SELECT x FROM {w}"),
    "column": ('CREATE TABLE "t_{w}" ("{w}")', 'SELECT {w} FROM "t_{w}"'),
    "alias after AS": ("", "SELECT 1 AS {w}"),
    "bare alias": ("", "SELECT 1 {w}"),
    "bare table alias": ("", "SELECT * FROM t {w}"),
    "qualifier": ("", 'SELECT {w}.x FROM t AS "{w}"'),
}


def sqlite_refusals(word: str) -> set[str]:
    """The name positions where SQLite refuses ``word`` bare."""
    out = set()
    for position, (ddl, sql) in NAME_POSITIONS.items():
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE t (x)")
        if ddl:
            db.execute(ddl.format(w=word))
        try:
            db.execute("EXPLAIN " + sql.format(w=word))
        except sqlite3.Error:
            out.add(position)
    return out


def test_sqlite_reserved_word_data_is_measured() -> None:
    """`never_identifiers` are refused as a table or column, `never_free_names` as a
    bare alias or qualifier only, and SQLite's other key words nowhere (so the lists
    are SQLite's behaviour, not a copy of its keyword list)."""
    free = {"alias after AS", "bare alias", "bare table alias", "qualifier"}
    for word in sorted(SQLITE.reserved_words | set(SQLITE.keywords)):
        refused = sqlite_refusals(word)
        if word in SQLITE.never_identifiers:
            assert refused & {"table", "column"}, word
        elif word in SQLITE.never_free_names:
            assert refused and refused <= free, (word, refused)
        elif word not in SQLITE.keywords:
            assert not refused, (word, refused)


def test_postgres_never_identifiers_are_refused_as_names(postgres: Server) -> None:
    """PostgreSQL's reserved key words are no table alias (a ColId: no table or
    column name either; `FROM current_date` is a function call, hence the alias)."""
    words = sorted(POSTGRES.never_identifiers - {"system_user"})  # reserved from PostgreSQL 16
    verdicts = postgres_verdicts(
        postgres, [f"SELECT 1 FROM departments AS {w};".encode() for w in words]
    )
    assert [w for w, v in zip(words, verdicts, strict=True) if v is None] == []


def test_reserved_words_are_data() -> None:
    """Every keyword of a dialect is out of every identifier terminal, by the data."""
    for dialect in (SQLITE, POSTGRES):
        assert {w.lower() for w in dialect.keywords} <= dialect.reserved_identifiers
        assert dialect.reserved_identifiers <= dialect.reserved_free_names
        assert dialect.never_identifiers <= dialect.reserved_words


# ---------------------------------------------------------------- the property

CI = settings(
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAIN_ROLES = ("admin", "analyst", "clerk", "intern")


def _choose(data: st.DataObject) -> Callable[[int], int]:
    """Production and lexeme choices drawn by hypothesis (so a failure shrinks)."""
    return lambda n: data.draw(st.integers(0, n - 1)) if n > 1 else 0


def _check_inside(case: RoleCase, sql: bytes) -> None:
    assert case.dialect_language.accepts(sql), f"in L({case.role}), not in L1: {sql!r}"
    parse_statement(sql, case.dialect)  # raises StatementParseError


@pytest.mark.parametrize("role", ROLES)
@settings(CI, max_examples=60)
@given(data=st.data())
def test_sqlite_role_sentences_are_sqlite(role: str, data: st.DataObject) -> None:
    case = role_case("sqlite", role)
    sql = case.generator.candidate(_choose(data))
    assume(case.language.accepts(sql))
    _check_inside(case, sql)
    assert sqlite_verdict(sql) is None, f"in L({role}), SQLite: {sqlite_verdict(sql)}: {sql!r}"


BATCH = 25


@pytest.mark.parametrize("role", ROLES)
@settings(CI, max_examples=4)
@given(seed=st.integers(0, 2**32 - 1))
def test_postgres_role_sentences_are_postgres(postgres: Server, role: str, seed: int) -> None:
    """One psql run per example: a batch of candidates from a drawn seed."""
    case = role_case("postgres", role)
    rng = random.Random(seed)
    batch = [case.generator.candidate(rng.randrange) for _ in range(BATCH)]
    batch = [s for s in batch if case.language.accepts(s)]
    for sql in batch:
        _check_inside(case, sql)
    refused = [(v, s) for s, v in zip(batch, postgres_verdicts(postgres, batch), strict=True) if v]
    assert refused == [], f"in L({role}), PostgreSQL refuses: {refused}"


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize("role", MAIN_ROLES)
def test_the_generator_reaches_the_language(dialect: str, role: str) -> None:
    """The property is not vacuous: a fair share of candidates are sentences of the
    role, and keyword-spelled free names are among the candidates tried."""
    case = role_case(dialect, role)
    rng = random.Random(15)
    candidates = [case.generator.candidate(rng.randrange) for _ in range(200)]
    inside = [s for s in candidates if case.language.accepts(s)]
    assert len(inside) >= 60, (role, len(inside))
    free_names = {w.decode().lower() for w in case.generator.speller.free_names}
    assert {w.lower() for w in case.dialect.keywords} <= free_names


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize("role", ROLES)
def test_many_role_sentences_stay_inside(
    dialect: str, role: str, request: pytest.FixtureRequest
) -> None:
    """A longer seeded run of the same property (nox -s differential: `-m slow`)."""
    case = role_case(dialect, role)
    rng = random.Random(2026)
    inside = [
        s
        for s in (case.generator.candidate(rng.randrange) for _ in range(2000))
        if case.language.accepts(s)
    ]
    for sql in inside:
        _check_inside(case, sql)
    if dialect == "sqlite":
        assert [(s, sqlite_verdict(s)) for s in inside if sqlite_verdict(s)] == []
    else:
        server = request.getfixturevalue("postgres")
        verdicts = postgres_verdicts(server, inside)
        assert [(v, s) for s, v in zip(inside, verdicts, strict=True) if v] == []


def test_postgres_verdicts_tell_syntax_from_semantics(postgres: Server) -> None:
    verdicts = postgres_verdicts(
        postgres,
        [b"SELECT 1;", b"SELECT nope FROM departments;", b"SELECT FROM FROM;", b"SELECT 'it''s';"],
    )
    assert verdicts[0] is None and verdicts[1] is None and verdicts[3] is None
    assert verdicts[2] is not None and verdicts[2].startswith("42601")


def test_sqlite_verdicts_tell_syntax_from_semantics() -> None:
    assert sqlite_verdict(b"SELECT nope FROM departments;") is None  # semantic: parsed
    assert sqlite_verdict(b"SELECT FROM FROM;") is not None
