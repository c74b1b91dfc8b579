"""Two FROM items of one name, against SQLite and a live PostgreSQL server.

- PostgreSQL refuses two tables of one FROM level with one name, alias or
  table name, an UPDATE's or DELETE's target included
  (`Dialect.source_names_unique`): `duplicate_name`.
- SQLite refuses an UPDATE whose FROM holds the target table again under the
  target's name (`Dialect.update_target_in_from`): `duplicate_name`.
- `*` over two tables of one name that share a column is `ambiguous_column`
  (SQLite tells a base table from a subquery or CTE there).

Each statement's kinds are exact, and each is replayed on its database:
flagged iff refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from pg_server import Server, running_server
from sqlite_prepare import memory_db, sqlite_error

from grid_sql.checker import SemanticChecker, full_grants
from grid_sql.dialects import POSTGRES

SCHEMA = {"t": ["a", "b"], "u": ["c", "d", "a"]}
GRANTS = {"all": full_grants(SCHEMA)}
SQLITE_CHECKER = SemanticChecker(SCHEMA, GRANTS)
PG_CHECKER = SemanticChecker(SCHEMA, GRANTS, dialect=POSTGRES)

# (statement, SQLite's kinds, PostgreSQL's kinds; None: outside that grammar)
CASES = [
    ("SELECT 1 FROM u, u", [], ["duplicate_name"]),
    ("SELECT 1 FROM u JOIN t AS u ON 1 = 1", [], ["duplicate_name"]),
    ("SELECT 1 FROM u AS x, t AS x", [], ["duplicate_name"]),
    ("SELECT 1 FROM u, (SELECT 1 AS k) AS u", [], ["duplicate_name"]),
    ("WITH x AS (SELECT 1 AS k) SELECT 1 FROM x, x", [], ["duplicate_name"]),
    ("SELECT 1 FROM u AS x, u AS y", [], []),
    ("SELECT 1 FROM u, (SELECT 1 AS k) AS v", [], []),
    ("SELECT * FROM u, u", ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("SELECT u.* FROM u, u", ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("SELECT * FROM u AS x, t AS x", ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("SELECT * FROM u JOIN u USING (c)",
     ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("SELECT * FROM u NATURAL JOIN u", [], ["duplicate_name"]),
    ("SELECT * FROM u, (SELECT 1 AS c) AS u", [], ["duplicate_name"]),
    ("SELECT * FROM (SELECT 1 AS c) AS u, (SELECT 2 AS c) AS u",
     ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("WITH x AS (SELECT 1 AS c) SELECT * FROM x, x",
     ["ambiguous_column"], ["ambiguous_column", "duplicate_name"]),
    ("SELECT * FROM u AS x, u AS y", [], []),
    ("UPDATE t SET a = 1 FROM t", ["duplicate_name"], ["duplicate_name"]),
    ("UPDATE t AS x SET a = 1 FROM t AS x", ["duplicate_name"], ["duplicate_name"]),
    ("UPDATE t SET a = 1 FROM u JOIN t ON u.c = 1", ["duplicate_name"], ["duplicate_name"]),
    ("UPDATE t SET a = 1 FROM u AS t", [], ["duplicate_name"]),
    ("UPDATE t AS x SET a = 1 FROM u AS x", [], ["duplicate_name"]),
    ("UPDATE t SET a = 1 FROM (SELECT 1 AS k) AS t", [], ["duplicate_name"]),
    ("UPDATE t SET a = 1 FROM t AS x", [], []),
    ("UPDATE t AS x SET a = 1 FROM t", [], []),
    ("DELETE FROM t USING t", None, ["duplicate_name"]),
    ("DELETE FROM t USING u AS t", None, ["duplicate_name"]),
    ("DELETE FROM t USING u", None, []),
]  # fmt: skip


def kinds(checker: SemanticChecker, sql: str) -> list[str]:
    return sorted(v.kind.value for v in checker.check(sql, "all"))


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return memory_db("t (a, b)", "u (c, d, a)")


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    ddl = "CREATE TABLE t (a int, b int); CREATE TABLE u (c int, d int, a int);"
    with running_server(ddl) as server:
        yield server


@pytest.mark.parametrize(("sql", "expected", "_"), CASES)
def test_sqlite(db: sqlite3.Connection, sql: str, expected: list[str] | None, _: object) -> None:
    if expected is None:
        return
    assert kinds(SQLITE_CHECKER, sql) == expected
    error = sqlite_error(db, sql)
    assert bool(error) == bool(expected), error or "SQLite prepares it"


def test_postgres(postgres: Server) -> None:
    wrong = []
    for sql, _, expected in CASES:
        found = kinds(PG_CHECKER, sql)
        error = postgres.run(f"PREPARE p AS {sql};\nDEALLOCATE p;\n").stderr.strip()
        if found != expected or bool(error) != bool(expected):
            wrong.append(f"{sql}: flagged {found}, expected {expected}, server {error!r}")
    assert not wrong, wrong


def test_the_messages_say_what_to_do() -> None:
    (v,) = PG_CHECKER.check("SELECT 1 FROM u, u", "all")
    assert v.message == "two tables here are named u; give one of them another alias (AS ...)"
    (v,) = SQLITE_CHECKER.check("UPDATE t SET a = 1 FROM t", "all")
    assert v.message == (
        "the FROM clause names t, this UPDATE's target, again; "
        "give the FROM table another alias (AS ...)"
    )
    (v,) = SQLITE_CHECKER.check("SELECT * FROM u, u", "all")
    assert v.message == (
        "* reads u.c, and two tables here are named u; give one of them another alias (AS ...)"
    )
