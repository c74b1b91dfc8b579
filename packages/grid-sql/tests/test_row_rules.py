"""Row values (grid_sql.row_rules), against SQLite.

- Fixed cases: each statement's row-value violations, and for every one of
  them whether SQLite refuses it at prepare time (EXPLAIN): a statement is
  flagged iff SQLite refuses it, save the cases the module header leaves to
  the database (a table on the right of IN), listed here.
- The four statements of the Spider run that the checker accepted and SQLite
  refused are refused now, and the repair pass's headline names the rule.
- Hypothesis over generated row values in every placement: a row value is only
  ever flagged where SQLite refuses the statement (no false refusal).
- Dialects without `row_values_compared_only` (PostgreSQL, DuckDB) flag none.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlite_prepare import memory_db, sqlite_error

from grid_sql.checker import SemanticChecker, StatementParseError, full_grants
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.repair import feedback_text
from grid_sql.violations import ViolationKind

SCHEMA = {"t": ["a", "b", "c"], "u": ["a", "b"]}
CHECKER = SemanticChecker(SCHEMA, {"all": full_grants(SCHEMA)})
PG_CHECKER = SemanticChecker(SCHEMA, {"all": full_grants(SCHEMA)}, dialect=POSTGRES)


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return memory_db("t (a, b, c)", "u (a, b)")


def rows_flagged(sql: str, checker: SemanticChecker = CHECKER) -> int:
    return sum(v.kind is ViolationKind.MISUSED_ROW_VALUE for v in checker.check(sql, "all"))


# (statement, row values flagged)
CASES = [
    ("SELECT * FROM t WHERE (a, b) = (1, 2)", 0),
    ("SELECT * FROM t WHERE (a, b) < (1, 2) OR (a, b) >= (3, 4)", 0),
    ("SELECT * FROM t WHERE (a, b) IS (1, 2) AND (a, b) IS NOT (1, 2)", 0),
    ("SELECT * FROM t WHERE (a, b) IS NOT DISTINCT FROM (1, 2)", 0),
    ("SELECT * FROM t WHERE (a, b) IN (SELECT a, b FROM u)", 0),
    ("SELECT * FROM t WHERE (a, b) NOT IN ((1, 2), (3, 4))", 0),
    ("SELECT * FROM t WHERE (a, b) IN ()", 0),
    ("SELECT * FROM t WHERE (a, b) = (SELECT a, b FROM u)", 0),
    ("SELECT * FROM t WHERE (SELECT a, b FROM u) = (1, 2)", 0),
    ("SELECT * FROM t WHERE (a, (b, c)) = (1, (2, 3))", 0),
    ("SELECT * FROM t WHERE ((a, b)) = (1, 2) = 1", 0),
    ("SELECT (a, b) = (1, 2), NOT (a, b) <> (3, 4) FROM t", 0),
    ("SELECT CASE (a, b) WHEN (1, 2) THEN 1 END FROM t", 0),
    ("SELECT * FROM t JOIN u ON (t.a, t.b) = (u.a, u.b)", 0),
    ("SELECT * FROM t WHERE a IN (1, 2)", 0),
    ("SELECT * FROM t WHERE (a, b) = 1", 1),
    ("SELECT * FROM t WHERE 1 = (a, b)", 1),
    ("SELECT * FROM t WHERE (a, b) = (1, 2, 3)", 1),
    ("SELECT * FROM t WHERE (a, b) IS NULL", 1),
    ("SELECT * FROM t WHERE (a, b) ISNULL OR (a, b) NOTNULL OR (a, b) NOT NULL", 3),
    ("SELECT * FROM t WHERE (a, b) LIKE 'x' OR (a, b) GLOB 'x'", 2),
    ("SELECT * FROM t WHERE (a, b) IN ((1, 2), 3)", 1),
    ("SELECT * FROM t WHERE a IN ((1, 2))", 1),
    ("SELECT * FROM t WHERE (a, b)", 1),
    ("SELECT * FROM t WHERE NOT (a, b)", 1),
    ("SELECT * FROM t WHERE (a, b) = (1, 2) AND (a, b)", 1),
    ("SELECT (a, b), (a, b) + 1, abs((a, b)), count((a, b)) FROM t", 4),
    ("SELECT a FROM t GROUP BY (a, b) ORDER BY (a, b)", 2),
    ("SELECT * FROM t WHERE (a, b) BETWEEN (1, 2) AND (3, 4)", 0),
    ("SELECT * FROM t WHERE (a, b) NOT BETWEEN (SELECT 1, 2) AND (3, 4)", 0),
    ("SELECT * FROM t WHERE a BETWEEN (SELECT 1) AND 2", 0),
    ("SELECT * FROM t WHERE (a, b) BETWEEN 1 AND 2", 1),
    ("SELECT * FROM t WHERE a BETWEEN (1, 2) AND 3", 1),
    ("SELECT * FROM t WHERE (a, b) BETWEEN (1, 2) AND 3", 1),
    ("SELECT * FROM t WHERE (a, b) BETWEEN (1, 2, 3) AND (3, 4, 5)", 2),
    # VALUES rows and UPDATE's SET take values, not rows
    ("VALUES ((1, 2))", 1),
    ("VALUES (1), ((3, 4))", 1),
    ("INSERT INTO t VALUES ((1, 2), 3, 4)", 1),
    ("INSERT INTO t VALUES (1, 2, (3, 4))", 1),
    ("SELECT * FROM (VALUES ((1, 2)))", 1),
    ("SELECT * FROM t WHERE a IN (VALUES ((1, 2)))", 1),
    ("SELECT * FROM t WHERE (a, b) IN (VALUES (1, 2))", 0),
    ("UPDATE t SET a = (1, 2)", 1),
    ("UPDATE t SET a = 1, b = (2, 3)", 1),
    # CASE: results are values; `CASE x WHEN y` compares x = y
    ("SELECT CASE (a, b) WHEN (1, 2) THEN 1 END FROM t", 0),
    ("SELECT CASE (a, b) WHEN (1, 2) THEN 1 WHEN (3, 4) THEN 2 ELSE 3 END FROM t", 0),
    ("SELECT CASE (a, b) WHEN (SELECT 1, 2) THEN 1 END FROM t", 0),
    ("SELECT CASE (a, b) WHEN 1 THEN 1 END FROM t", 1),
    ("SELECT CASE (a, b) WHEN (1, 2, 3) THEN 1 END FROM t", 1),
    ("SELECT CASE (a, b) WHEN (1, 2) THEN 1 WHEN 5 THEN 2 END FROM t", 1),
    ("SELECT CASE a WHEN (1, 2) THEN 1 END FROM t", 1),
    ("SELECT CASE WHEN (a, b) THEN 1 END FROM t", 1),
    ("SELECT CASE WHEN 1 THEN (a, b) END FROM t", 1),
    ("SELECT CASE WHEN 1 THEN 2 ELSE (a, b) END FROM t", 1),
    ("SELECT * FROM t WHERE CASE WHEN (a, b) = (1, 2) THEN 1 END", 0),
    ("SELECT CASE ? WHEN (1, 2) THEN ? ELSE ? END FROM t", 1),
    ("SELECT CASE (a, b) WHEN ? THEN 1 END FROM t", 1),
    ("SELECT CASE ? WHEN ? THEN ? END FROM t", 0),
    # a parameter is one value (these raised AttributeError before)
    ("SELECT * FROM t WHERE (a, b) IN (?)", 1),
    ("SELECT * FROM t WHERE (a, b) IN ((1, 2), ?)", 1),
    ("SELECT count(*) FROM t ORDER BY CASE WHEN 1 THEN (a, b) END", 0),
    ("SELECT count(*) FROM t ORDER BY CASE (a, b) WHEN 1 THEN 2 END", 0),
    # a row inside a row: only in a WHERE or ON term `=` / `IS` against one shape
    ("SELECT * FROM t WHERE (a, (b, c)) IS NOT DISTINCT FROM (1, (2, 3))", 0),
    ("SELECT * FROM t WHERE a = 1 AND ((a, (b, c)) == (1, (2, 3)))", 0),
    ("SELECT * FROM t JOIN u ON (t.a, (t.b, c)) = (1, (2, 3))", 0),
    ("UPDATE t SET a = 1 WHERE (a, (b, (c, 1))) = (1, (2, (3, 4)))", 0),
    ("SELECT * FROM t WHERE (a, (b, c)) = (1, (SELECT 2, 3))", 0),
    ("SELECT * FROM t WHERE (a, (SELECT a, b FROM u)) = (1, (2, 3))", 0),
    ("SELECT count(*) FROM t ORDER BY (a, (b, c))", 0),
    ("SELECT * FROM t WHERE (a, (b, c)) = (1, 2)", 1),
    ("SELECT * FROM t WHERE ((a, b), c) = (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) <> (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) IS NOT (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) IS DISTINCT FROM (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE a = 1 OR (a, (b, c)) = (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE NOT (a, (b, c)) = (1, (2, 3))", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) = (1, (2, 3)) IS 1", 2),
    ("SELECT a FROM t GROUP BY a HAVING (a, (b, c)) = (1, (2, 3))", 2),
    # A HAVING term of constants and GROUP BY columns moves into the WHERE, where
    # its rows split (found by a hunt at 5,000 examples of the property below).
    ("SELECT a FROM t GROUP BY a HAVING (1, (2, 3)) = (1, (2, 3))", 0),
    ("SELECT a FROM t GROUP BY a HAVING (a, (a, 3)) IS (1, (2, 3))", 0),
    ("SELECT a FROM t GROUP BY a, b HAVING count(*) > 0 AND (A, (b, 3)) = (1, (2, 3))", 0),
    ("SELECT a FROM t GROUP BY a HAVING ((1, (2, a)), a) = ((1, (2, a)), a)", 0),
    ("SELECT a FROM t GROUP BY a HAVING NOT ((1, (2, 3)) = (1, (2, 3)))", 2),
    ("SELECT a FROM t GROUP BY a HAVING a = 1 OR (1, (2, 3)) = (1, (2, 3))", 2),
    ("SELECT count(*) FROM t HAVING (1, (2, 3)) = (1, (2, 3))", 2),
    ("SELECT a FROM t GROUP BY a COLLATE nocase HAVING (a, (a, 3)) = (1, (2, 3))", 2),
    ("SELECT a FROM t GROUP BY a HAVING (a, (count(*), 3)) = (1, (2, 3))", 2),
    ("SELECT a FROM t GROUP BY a HAVING (a, ((SELECT 2), 3)) = (1, (2, 3))", 2),
    ("SELECT (a, (b, c)) = (1, (2, 3)) FROM t", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) IN ((1, (2, 3)))", 2),
    ("SELECT * FROM t WHERE (a, (b, c)) = (SELECT 1, 2)", 1),
    ("SELECT CASE (a, b) WHEN (1, (2, 3)) THEN 1 END FROM t", 1),
    ("VALUES ((1, (2, 3)))", 2),
]
# Not this module's (not flagged whatever SQLite says): the checker's column
# counts judge a table on the right of IN.
LEFT_ALONE = ["SELECT * FROM t WHERE (a, b) IN u"]


@pytest.mark.parametrize(("sql", "flagged"), CASES)
def test_a_row_value_is_flagged_iff_sqlite_refuses_it(
    sql: str, flagged: int, db: sqlite3.Connection
) -> None:
    assert rows_flagged(sql) == flagged
    error = sqlite_error(db, sql)
    assert bool(error) == (flagged > 0), error
    if error:
        assert "row value misused" in error or "IN(...) element" in error, error


@pytest.mark.parametrize("sql", LEFT_ALONE)
def test_what_the_module_leaves_to_the_database(sql: str) -> None:
    assert rows_flagged(sql) == 0


SPIDER = [  # bench/results/spider_ex: accepted, then refused by SQLite (2026-12-05)
    "SELECT * FROM airlines WHERE (Airline, Airline, Abbreviation, Country, 2) NOT IN "
    "(1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, uid ) ;",
    "SELECT DISTINCT (id) * 1000000000000 FROM TV_series WHERE (id, Episode) IS NULL;",
    "SELECT * FROM TV_series WHERE (18.0, 18.0, 18.0, 18.0, 18.0 ) ;",
    "SELECT id FROM TV_series WHERE (1000,1,1,1,1,1,1,1,1,1,1,1,1, ID ) ;",
]


def test_the_spider_statements_sqlite_refused_are_refused() -> None:
    schema = {
        "airlines": ["uid", "Airline", "Abbreviation", "Country"],
        "TV_series": ["id", "Episode"],
    }
    checker = SemanticChecker(schema, {"all": full_grants(schema)})
    for sql in SPIDER:
        found = checker.check(sql, "all")
        assert [v.kind for v in found] == [ViolationKind.MISUSED_ROW_VALUE], sql
        assert "row value (x, y, ...)" in feedback_text(sql, "all", found, checker)


def test_dialects_that_take_rows_elsewhere_flag_none() -> None:
    assert not POSTGRES.row_values_compared_only and SQLITE.row_values_compared_only
    parsed = 0
    for sql, _ in CASES:
        try:
            assert rows_flagged(sql, PG_CHECKER) == 0, sql
        except StatementParseError:
            continue  # outside PostgreSQL's grammar (`IS (1, 2)`, GLOB, ISNULL)
        parsed += 1
    assert parsed > 20


VALUES = st.sampled_from(["a", "b", "1", "'x'", "NULL", "?", "(SELECT a FROM u)"])
# what a row holds: values, and now and then a row ((SELECT a, b ...) stands for one)
ROW_VALUES = st.one_of(VALUES, st.sampled_from(["(b, 1)", "(1, (2, a))", "(SELECT a, b FROM u)"]))


@st.composite
def rows(draw: st.DrawFn, width: int | None = None) -> str:
    n = width if width is not None else draw(st.integers(2, 3))
    return "(" + ", ".join(draw(ROW_VALUES) for _ in range(n)) + ")"


@st.composite
def placements(draw: st.DrawFn) -> str:
    r = draw(rows())
    other = draw(st.one_of(rows(), VALUES, st.just("(SELECT a, b FROM u)")))
    op = draw(st.sampled_from(["=", "==", "<>", "<", ">=", "IS", "IS NOT"]))
    listed = ", ".join(draw(st.lists(st.one_of(rows(), VALUES), min_size=1, max_size=3)))
    values_row = ", ".join([r, *(draw(VALUES) for _ in range(draw(st.integers(0, 1))))])
    return draw(
        st.sampled_from(
            [
                f"SELECT * FROM t WHERE {r} {op} {other}",
                f"SELECT * FROM t WHERE {other} {op} {r}",
                f"SELECT * FROM t WHERE a = 1 AND {r} {op} {other}",
                f"SELECT * FROM t JOIN u ON {r} {op} {other}",
                f"SELECT a FROM t GROUP BY a HAVING {r} {op} {other}",
                f"SELECT * FROM t WHERE {r} IN ({listed})",
                f"SELECT * FROM t WHERE a NOT IN ({listed})",
                f"SELECT {r} FROM t",
                f"SELECT * FROM t WHERE {r} IS NULL OR a = 1",
                f"SELECT * FROM t ORDER BY {r}",
                f"SELECT count(*) FROM t ORDER BY {r}, {r} {op} {other}",
                f"SELECT a FROM t WHERE EXISTS (SELECT {r}, {other} FROM u ORDER BY {r})",
                f"SELECT max({r}) FROM t",
                f"SELECT * FROM t WHERE {r} BETWEEN {other} AND {draw(st.one_of(rows(), VALUES))}",
                f"VALUES ({values_row})",
                f"INSERT INTO u VALUES (1, {r})",
                f"UPDATE t SET a = {r}",
                f"SELECT CASE {r} WHEN {other} THEN 1 END FROM t",
                f"SELECT CASE {other} WHEN {r} THEN 1 ELSE 2 END FROM t",
                f"SELECT CASE WHEN {r} THEN {other} END FROM t",
                f"SELECT count(*) FROM t ORDER BY CASE WHEN a THEN {r} ELSE {other} END",
            ]
        )
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placements())
def test_a_flagged_row_value_is_one_sqlite_refuses(sql: str) -> None:
    con = memory_db("t (a, b, c)", "u (a, b)")
    if rows_flagged(sql):
        assert sqlite_error(con, sql), f"flagged, but SQLite prepares it: {sql}"
