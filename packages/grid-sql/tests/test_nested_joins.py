"""Join conditions inside a parenthesized join (``FROM a JOIN (b JOIN c ON ...)``),
judged by the SemanticChecker and by SQLite's prepare and a real PostgreSQL's.

SQLite and PostgreSQL resolve the names of a condition written inside the
parentheses against the tables joined there (and the enclosing statements), not
against the FROM clause around them: ``FROM a JOIN (b JOIN c ON a.x = b.x) ON 1``
is "no such column: a.x" in SQLite and "invalid reference to FROM-clause entry
for table a" in PostgreSQL. The covering language's Spider run had two such
statements the checker accepted and SQLite refused. DuckDB binds them
(``Dialect.nested_join_sees_outer``; grid-duckdb's tests check it there). And
SQLite's one table in parentheses after a join operator loses the alias written
inside them (the run's third such statement: ``JOIN (Sizes AS s) ON ... s.size_code``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg_server import Server, running_server
from sqlite_prepare import memory_db, sqlite_error

from grid_sql.checker import SemanticChecker, full_grants
from grid_sql.dialects import POSTGRES, SQLITE

SCHEMA = {"a": ["x", "ax"], "b": ["x", "bx"], "c": ["x", "cx"], "d": ["x", "dx"]}
GRANTS = {"all": full_grants(SCHEMA)}
DDL = "".join(f"CREATE TABLE {t} ({' int, '.join(cols)} int);" for t, cols in SCHEMA.items())

# (statement, the kinds the checker reports in SQLite and PostgreSQL alike)
CASES = [
    ("SELECT * FROM a JOIN (b JOIN c ON a.x = b.x) ON 1 = 1", ["unknown_qualifier"]),
    ("SELECT * FROM a JOIN (b JOIN c ON ax = b.x) ON 1 = 1", ["unknown_column"]),
    ("SELECT * FROM a, (b JOIN c ON a.x = b.x)", ["unknown_qualifier"]),
    ("SELECT * FROM a JOIN (b JOIN c ON b.x = c.x) ON a.x = b.x", []),
    ("SELECT * FROM a JOIN (b JOIN c ON cx = bx) ON a.x = c.x", []),
    ("SELECT * FROM a JOIN (b AS q JOIN c ON q.x = c.x) ON a.x = q.x", []),
    (
        "SELECT * FROM a JOIN (b JOIN (c JOIN d ON b.x = c.x) ON 1 = 1) ON 1 = 1",
        ["unknown_qualifier"],
    ),
    ("SELECT * FROM a JOIN (b JOIN (c JOIN d ON c.x = d.x) ON b.x = d.x) ON a.x = c.x", []),
    # the enclosing statement's tables stay visible (a correlated reference)
    ("SELECT (SELECT 1 FROM b JOIN (c JOIN d ON a.x = c.x) ON 1 = 1 LIMIT 1) FROM a", []),
    ("SELECT a.x FROM a WHERE EXISTS (SELECT 1 FROM b JOIN (c JOIN d ON ax = c.x) ON 1 = 1)", []),
]


# SQLite alone writes one table in parentheses (``(s AS x)``): after a join operator
# it is named by its table, the alias inside dropped
# (``Dialect.joined_parentheses_drop_alias``); as the first term it keeps the alias.
SQLITE_CASES = [
    ("SELECT a.x, q.x FROM (b AS q) JOIN a ON 1 = 1", []),
    ("SELECT b.x FROM (b AS q) JOIN a ON 1 = 1", ["unknown_qualifier"]),
    ("SELECT q.x FROM a JOIN (b AS q) ON 1 = 1", ["unknown_qualifier"]),
    ("SELECT * FROM a JOIN (b AS q) ON a.x = q.x", ["unknown_qualifier"]),
    ("SELECT b.x FROM a JOIN (b AS q) ON a.x = b.x", []),
    ("SELECT q.x FROM a, (b AS q)", ["unknown_qualifier"]),
    ("SELECT b.x FROM a LEFT JOIN ((b AS q)) ON 1 = 1", []),
    ("SELECT q.x FROM a JOIN ((b AS q)) ON 1 = 1", ["unknown_qualifier"]),
    ("SELECT q.x FROM a JOIN (b AS q JOIN c ON 1 = 1) ON 1 = 1", []),
    ("SELECT q.x FROM (b AS q)", []),
]


# A join condition sees the tables joined before it in PostgreSQL (and DuckDB), and in
# SQLite every table of its FROM clause, those joined to its right too
# (``Dialect.join_condition_sees_right``): (statement, SQLite's kinds, PostgreSQL's).
RIGHTWARD = [
    ("SELECT * FROM a JOIN b ON c.x = a.x JOIN c ON 1 = 1", [], ["unknown_qualifier"]),
    ("SELECT * FROM a JOIN b ON cx = 1 JOIN c ON 1 = 1", [], ["unknown_column"]),
    ("SELECT * FROM a JOIN b ON a.x = b.x JOIN c ON a.x = c.x", [], []),
    ("SELECT * FROM a, b JOIN c ON a.x = c.x", [], ["unknown_qualifier"]),
    ("SELECT * FROM a JOIN b ON a.x = b.x, c JOIN d ON b.x = d.x", [], ["unknown_qualifier"]),
    ("SELECT * FROM a, b JOIN c ON b.x = c.x JOIN d ON dx = bx", [], []),
    ("SELECT * FROM a JOIN b ON bx = ax JOIN c ON cx = bx", [], []),
]


def kinds(checker: SemanticChecker, sql: str) -> list[str]:
    return [str(v.kind) for v in checker.check(sql, "all")]


@pytest.mark.parametrize(("sql", "expected"), CASES + SQLITE_CASES)
def test_sqlite(sql: str, expected: list[str]) -> None:
    assert kinds(SemanticChecker(SCHEMA, GRANTS, dialect=SQLITE), sql) == expected
    error = sqlite_error(memory_db(*(f"{t} ({', '.join(c)})" for t, c in SCHEMA.items())), sql)
    assert bool(error) == bool(expected), error


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(DDL) as server:
        yield server


@pytest.mark.parametrize(("sql", "expected"), CASES)
def test_postgres(postgres: Server, sql: str, expected: list[str]) -> None:
    assert kinds(SemanticChecker(SCHEMA, GRANTS, dialect=POSTGRES), sql) == expected
    run = postgres.run(f"PREPARE s AS {sql};\nDEALLOCATE s;\n")
    assert ("ERROR" in run.stderr) == bool(expected), run.stderr


@pytest.mark.parametrize(("sql", "sqlite", "postgres_kinds"), RIGHTWARD)
def test_a_condition_sees_the_tables_joined_before_it(
    postgres: Server, sql: str, sqlite: list[str], postgres_kinds: list[str]
) -> None:
    assert kinds(SemanticChecker(SCHEMA, GRANTS, dialect=SQLITE), sql) == sqlite
    error = sqlite_error(memory_db(*(f"{t} ({', '.join(c)})" for t, c in SCHEMA.items())), sql)
    assert bool(error) == bool(sqlite), error
    assert kinds(SemanticChecker(SCHEMA, GRANTS, dialect=POSTGRES), sql) == postgres_kinds
    run = postgres.run(f"PREPARE s AS {sql};\nDEALLOCATE s;\n")
    assert ("ERROR" in run.stderr) == bool(postgres_kinds), run.stderr
