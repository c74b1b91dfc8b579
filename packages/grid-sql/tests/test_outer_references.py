"""What a subquery may read of the queries around it, against the databases.

- A subquery's ORDER BY and GROUP BY resolve against its own FROM only on
  SQLite (`Dialect.order_group_read_outer`), LIMIT and OFFSET against no table
  on SQLite and DuckDB (`Dialect.limit_reads_outer`); PostgreSQL reads the
  enclosing queries there.
- An aggregate call belongs to the innermost query a column of its arguments
  resolves to (`grid_sql.call_rules.aggregate_placements`): in that query's
  WHERE, GROUP BY or ON it is `misused_aggregate`; in a clause SQLite never
  evaluates it is evaluated by its owner all the same.

Fixed cases replayed on SQLite (flagged iff refused, with the kinds named) and
on a live PostgreSQL server (tests/pg_server.py; flagged only where refused),
and a hypothesis property over generated nestings on SQLite: a flag only where
SQLite refuses, and every "no such column" and misplaced aggregate SQLite
reports is flagged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import Server, running_server
from sqlite_prepare import memory_db, sqlite_error

from grid_sql.checker import SemanticChecker, full_grants
from grid_sql.dialects import POSTGRES, SQLITE

SCHEMA = {"t": ["a", "b"], "u": ["c", "d"]}
GRANTS = {"all": full_grants(SCHEMA)}
CHECKER = SemanticChecker(SCHEMA, GRANTS)
PG_CHECKER = SemanticChecker(SCHEMA, GRANTS, dialect=POSTGRES)

# (statement, the kinds SQLite's checker reports); every flagged statement is one
# SQLite refuses, every other one it prepares
CASES = [
    # ORDER BY, GROUP BY: the subquery's own FROM and result aliases only
    ("SELECT (SELECT c FROM u ORDER BY t.b) FROM t", ["unknown_qualifier"]),
    ("SELECT (SELECT c FROM u ORDER BY c + b) FROM t", ["unknown_column"]),
    ("SELECT (SELECT c FROM u ORDER BY (SELECT t.b)) FROM t", ["unknown_qualifier"]),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM u ORDER BY t.a)", ["unknown_qualifier"]),
    ("SELECT 1 FROM t WHERE a IN (SELECT c FROM u GROUP BY t.b)", ["unknown_qualifier"]),
    (
        "SELECT (SELECT c FROM u UNION SELECT d FROM u ORDER BY t.b) FROM t",
        ["column_count", "unknown_qualifier"],
    ),
    ("SELECT (SELECT c FROM u ORDER BY (SELECT u.c)) FROM t", []),
    ("SELECT (SELECT t.b AS z FROM u ORDER BY z) FROM t", []),
    ("SELECT (SELECT c FROM u GROUP BY c HAVING t.b > 0) FROM t", []),
    ("SELECT (SELECT c FROM u WHERE t.b > 0) FROM t", []),
    ("SELECT (SELECT sum(c) OVER (ORDER BY t.b) FROM u) FROM t", []),
    ("SELECT (SELECT c FROM u WINDOW w AS (ORDER BY t.b)) FROM t", []),
    ("SELECT (SELECT d FROM u AS t ORDER BY t.d) FROM t", []),
    # LIMIT, OFFSET: no table at all
    ("SELECT (SELECT c FROM u LIMIT t.a) FROM t", ["unknown_qualifier"]),
    ("SELECT (SELECT c FROM u LIMIT 1 OFFSET b) FROM t", ["unknown_column"]),
    ("SELECT (SELECT c FROM u LIMIT (SELECT count(*) FROM u)) FROM t", []),
    # an aggregate over the enclosing query's columns is that query's
    ("SELECT a FROM t WHERE (SELECT sum(t.b) FROM u) > 1", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE (SELECT sum(b) FROM u) > 1", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE (SELECT (SELECT sum(t.b)) FROM u) > 1", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE a IN (SELECT sum(t.b) FROM u)", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE (SELECT sum(t.b) + c FROM u) > 1", ["misused_aggregate"]),
    ("SELECT a FROM t GROUP BY a, (SELECT sum(t.b) FROM u)", ["misused_aggregate"]),
    ("SELECT t.a FROM t JOIN u ON (SELECT sum(t.b)) > 1", ["misused_aggregate"]),
    ("UPDATE t SET a = (SELECT sum(t.b) FROM u)", ["misused_aggregate"]),
    ("DELETE FROM t WHERE (SELECT sum(t.b) FROM u) > 1", ["misused_aggregate"]),
    ("SELECT sum((SELECT max(t.b) FROM u)) FROM t", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE (SELECT sum(t.b + c) FROM u) > 1", []),
    ("SELECT a FROM t WHERE (SELECT sum(c) FROM u) > 1", []),
    ("SELECT a FROM t WHERE (SELECT count(*) FROM u) > 1", []),
    ("SELECT a FROM t WHERE (SELECT sum(t.b) OVER () FROM u) > 1", []),
    ("SELECT a FROM t WHERE (SELECT (SELECT sum(c)) FROM u) > 1", []),
    ("SELECT (SELECT sum(t.b) FROM u) FROM t", []),
    ("SELECT a FROM t GROUP BY a HAVING (SELECT sum(t.b) FROM u) > 1", []),
    ("SELECT (SELECT max(c) FROM u WHERE (SELECT sum(t.b)) > 0) FROM t", []),
    ("SELECT sum((SELECT sum(c) FROM u)) FROM t", []),
    ("UPDATE t SET a = (SELECT sum(c) FROM u)", []),
    # SQLite: written in WHERE, GROUP BY or ON, whoever owns it
    ("SELECT (SELECT 1 FROM u WHERE sum(t.b) > 0) FROM t", ["misused_aggregate"]),
    ("SELECT (SELECT 1 FROM u WHERE sum(c) > 0) FROM t", ["misused_aggregate"]),
    ("SELECT (SELECT 1 FROM u WHERE sum(1) > 0) FROM t", ["misused_aggregate"]),
    ("SELECT (SELECT 1 FROM u GROUP BY sum(c)) FROM t", ["misused_aggregate"]),
    ("SELECT (SELECT 1 FROM u JOIN t AS v ON sum(t.b) > 0) FROM t", ["misused_aggregate"]),
    # clauses SQLite never evaluates: an enclosing query's aggregate is evaluated
    # where that query may aggregate, and not at all where it may not
    ("SELECT count(*) FROM t ORDER BY (SELECT sum((t.a, t.b)) FROM u)", ["misused_row_value"]),
    ("SELECT count(*) FROM t ORDER BY (SELECT (SELECT sum((b, 1))) FROM u)", ["misused_row_value"]),
    ("SELECT count(*) FROM t ORDER BY (SELECT max((t.a, c)) FROM u)", []),
    ("SELECT count(*) FROM t ORDER BY (SELECT (SELECT sum((c, 1))) FROM u)", []),
    ("SELECT EXISTS (SELECT sum((t.a, t.b)) FROM u) FROM t", ["misused_row_value"]),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT sum((t.a, t.b)) FROM u)", []),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT (SELECT sum((t.a, t.b))) FROM u)", []),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT sum(t.a) FROM u)", []),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM u WHERE (SELECT sum(t.a)))",
     ["misused_aggregate"]),
    ("SELECT 1 FROM t JOIN u ON EXISTS (SELECT sum(t.a) FROM u)", []),
    # but SQLite refuses a GROUP BY term that holds its query's aggregate anywhere
    ("SELECT 1 FROM t GROUP BY EXISTS (SELECT sum(t.a) FROM u)", ["misused_aggregate"]),
    ("SELECT 1 FROM t GROUP BY b, NOT EXISTS (SELECT max(t.a) FROM u)", ["misused_aggregate"]),
    ("SELECT 1 FROM t GROUP BY (SELECT 1 FROM u WHERE EXISTS (SELECT sum(t.a) FROM u))",
     ["misused_aggregate"]),
    ("SELECT 1 FROM t GROUP BY (SELECT 1 FROM u GROUP BY EXISTS (SELECT sum(u.c) FROM t AS z))",
     ["misused_aggregate"]),
    ("SELECT 1 FROM t GROUP BY EXISTS (SELECT sum(u.c) FROM u)", []),
    ("SELECT 1 FROM t GROUP BY (SELECT 1 FROM u WHERE EXISTS (SELECT sum(u.c) FROM t AS z))", []),
    ("SELECT 1 FROM t GROUP BY a HAVING EXISTS (SELECT sum(t.a) FROM u)", []),
    ("SELECT a FROM t GROUP BY a HAVING sum(EXISTS (SELECT max(t.a) FROM u)) > 0", []),
    # a compound EXISTS body's select lists are evaluated
    ("SELECT a FROM t WHERE EXISTS (SELECT sum(t.a) FROM u UNION SELECT 1)", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u UNION SELECT sum(t.a) FROM u)",
     ["misused_aggregate"]),
    # a GROUP BY term that is a number copies its result column (all three databases)
    ("SELECT sum(a) FROM t GROUP BY 1", ["misused_aggregate"]),
    ("SELECT b, sum(a) + 1 FROM t GROUP BY 2", ["misused_aggregate"]),
    ("SELECT count(*) FROM t GROUP BY (1)", ["misused_aggregate"]),
    ("SELECT (SELECT sum(t.a) FROM u) FROM t GROUP BY 1", ["misused_aggregate"]),
    ("SELECT EXISTS (SELECT sum(t.a) FROM u) FROM t GROUP BY 1", ["misused_aggregate"]),
    ("SELECT c FROM u UNION SELECT sum(a) FROM t GROUP BY 1", ["misused_aggregate"]),
    ("SELECT sum(a) OVER () FROM t GROUP BY 1", ["misused_window"]),
    ("SELECT sum(a) FROM t GROUP BY 2", ["column_count"]),
    ("SELECT b FROM t GROUP BY 0", ["column_count"]),
    ("SELECT b FROM t GROUP BY -1", ["column_count"]),
    ("SELECT b, sum(a) FROM t GROUP BY 1", []),
    ("SELECT (SELECT sum(c) FROM u) FROM t GROUP BY 1", []),
    ("SELECT sum(a) FROM t UNION SELECT c FROM u GROUP BY 1", []),
    ("SELECT *, b FROM t GROUP BY 3", []),
    # an ORDER BY term that is a number names a result column too
    ("SELECT a FROM t ORDER BY 2", ["column_count"]),
    ("SELECT a FROM t UNION SELECT c FROM u ORDER BY -1", ["column_count"]),
    ("SELECT count(*) FROM t ORDER BY (0)", ["column_count"]),
    ("SELECT a FROM t WHERE EXISTS (SELECT c FROM u ORDER BY 2)", ["column_count"]),
    ("SELECT a, b FROM t ORDER BY 2 DESC, 1", []),
    ("SELECT * FROM t ORDER BY 2", []),
    # VALUES: no aggregate in a VALUES of several rows or an INSERT's whole VALUES
    # (nor a window call there); SQLite reads a one-row VALUES elsewhere as a SELECT
    ("VALUES (1), (sum(2))", ["misused_aggregate"]),
    ("INSERT INTO t (a) VALUES (min(abs(1)))", ["misused_aggregate"]),
    ("INSERT INTO t (a) VALUES (row_number() OVER ())", ["misused_window"]),
    ("SELECT a FROM t WHERE a IN (VALUES (1), (max(1)))", ["misused_aggregate"]),
    ("SELECT (SELECT 1 FROM (VALUES (1), (sum(t.a))) AS v) FROM t", ["misused_aggregate"]),
    ("VALUES (sum(2))", []),
    ("VALUES (1), (row_number() OVER ())", []),
    ("INSERT INTO t (a) VALUES (1), ((SELECT max(c) FROM u))", []),
    ("INSERT INTO t (a) SELECT 1 UNION VALUES (sum(1))", []),
    # and copies it into an evaluated clause: an EXISTS body's select list is read
    ("SELECT a FROM t WHERE EXISTS (SELECT sum(t.a) FROM u GROUP BY 1)", ["misused_aggregate"]),
]  # fmt: skip

# Refused by PostgreSQL, and flagged by its checker
PG_FLAGGED = [
    "SELECT a FROM t WHERE (SELECT sum(t.b) FROM u) > 1",
    "SELECT a FROM t GROUP BY a, (SELECT sum(t.b) FROM u)",
    "UPDATE t SET a = (SELECT sum(t.b) FROM u)",
    "SELECT sum((SELECT max(t.b) FROM u)) FROM t",
    "SELECT 1 FROM t WHERE EXISTS (SELECT sum(t.a) FROM u)",
    "SELECT (SELECT 1 FROM u WHERE sum(c) > 0) FROM t",
    "SELECT (SELECT 1 FROM u WHERE sum(1) > 0) FROM t",
    "SELECT sum(a) FROM t GROUP BY 1",
    "VALUES (1), (sum(2))",
    "INSERT INTO t (a) VALUES (min(abs(1)))",
]
# Prepared by PostgreSQL, and accepted by its checker
PG_ACCEPTED = [
    "SELECT (SELECT c FROM u ORDER BY t.b LIMIT 1) FROM t",
    "SELECT (SELECT c FROM u LIMIT t.a) FROM t",
    "SELECT (SELECT 1 FROM u WHERE sum(t.b) > 0) FROM t",
    "SELECT (SELECT 1 FROM u GROUP BY sum(t.b)) FROM t",
    "SELECT sum(a) FROM t GROUP BY +1",  # a constant there, a position in SQLite
]


def kinds(checker: SemanticChecker, sql: str) -> list[str]:
    return sorted(v.kind.value for v in checker.check(sql, "all"))


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return memory_db("t (a, b)", "u (c, d)")


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server("CREATE TABLE t (a int, b int); CREATE TABLE u (c int, d int);") as s:
        yield s


def pg_error(server: Server, sql: str) -> str:
    run = server.run(f"PREPARE p AS {sql};\nDEALLOCATE p;\n")
    return run.stderr.strip()


def test_the_dialects_say_what_they_read() -> None:
    assert not SQLITE.order_group_read_outer and not SQLITE.limit_reads_outer
    assert SQLITE.aggregates_placed_where_written
    assert POSTGRES.order_group_read_outer and POSTGRES.limit_reads_outer
    assert not POSTGRES.aggregates_placed_where_written


@pytest.mark.parametrize(("sql", "expected"), CASES)
def test_flagged_iff_sqlite_refuses(db: sqlite3.Connection, sql: str, expected: list[str]) -> None:
    assert kinds(CHECKER, sql) == expected
    error = sqlite_error(db, sql)
    assert bool(error) == bool(expected), error or "SQLite prepares a statement the checker refuses"


def test_postgres_reads_outer_columns_and_places_aggregates(postgres: Server) -> None:
    """On a live server: every statement of CASES that the PostgreSQL checker
    flags, the server refuses; the named ones are flagged or accepted as the
    server does."""
    wrong = []
    for sql in [s for s, _ in CASES] + PG_ACCEPTED:
        flagged, error = kinds(PG_CHECKER, sql), pg_error(postgres, sql)
        if flagged and not error:
            wrong.append(f"false refusal {flagged}: {sql}")
        if sql in PG_FLAGGED and not (flagged == ["misused_aggregate"] and error):
            wrong.append(f"not flagged as the server refuses it ({error!r}): {sql}")
        if sql in PG_ACCEPTED and (flagged or error):
            wrong.append(f"refused ({flagged}, {error!r}): {sql}")
    assert not wrong, wrong


def test_the_message_names_the_owner() -> None:
    (v,) = CHECKER.check("SELECT a FROM t WHERE (SELECT sum(t.b) FROM u) > 1", "all")
    assert v.message == (
        "the aggregate sum(): it reads only an enclosing query's columns, so it is "
        "that query's aggregate, and this sits in its WHERE; compare aggregates in HAVING"
    )


# ---------------------------------------------------------------- generated nestings

ARGUMENTS = ["t.b", "b", "c", "u.c", "1", "t.a + c", "(t.a, t.b)"]
CALLS = ["sum({})", "max({})", "count({})", "{}"]
INNER = [
    "SELECT {x} FROM u",
    "SELECT 1 FROM u WHERE {x} > 0",
    "SELECT c FROM u GROUP BY c HAVING {x} > 0",
    "SELECT c FROM u ORDER BY {x}",
    "SELECT c FROM u GROUP BY {x}",
    "SELECT c FROM u LIMIT {x}",
]
OUTER = [
    "SELECT ({s}) FROM t",
    "SELECT EXISTS ({s}) FROM t",
    "SELECT a FROM t WHERE ({s}) > 0",
    "SELECT a FROM t WHERE EXISTS ({s})",
    "SELECT a FROM t GROUP BY a HAVING ({s}) > 0",
    "SELECT count(*) FROM t ORDER BY ({s})",
    "SELECT a FROM t GROUP BY ({s})",
    "SELECT a FROM t GROUP BY EXISTS ({s})",
    "UPDATE t SET a = ({s})",
]
MISPLACED = ("misuse of aggregate", "aggregate functions are not allowed")


@st.composite
def nestings(draw: st.DrawFn) -> str:
    x = draw(st.sampled_from(CALLS)).format(draw(st.sampled_from(ARGUMENTS)))
    inner = draw(st.sampled_from(INNER)).format(x=x)
    return str(draw(st.sampled_from(OUTER)).format(s=inner))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sql=nestings())
def test_generated_nestings_against_sqlite(db: sqlite3.Connection, sql: str) -> None:
    """No flag where SQLite prepares the statement; SQLite's "no such column" and
    misplaced aggregates are flagged as such."""
    found = kinds(CHECKER, sql)
    error = sqlite_error(db, sql)
    assert error or not found, f"false refusal {found}"
    if "no such column" in error:
        assert {"unknown_column", "unknown_qualifier"} & set(found), error
    if any(m in error for m in MISPLACED):
        assert "misused_aggregate" in found, error
