"""Statement rules (grid_sql.call_rules and the checker's column counts), against SQLite.

- The SQLite dialect's arity table is SQLite's: measured again here, count by
  count, for every known function and the keyword aggregates.
- Fixed cases: each statement's exact rule violations; every statement flagged
  is one SQLite refuses (EXPLAIN), and the ones left unflagged by policy are
  named (the module header's list).
- Hypothesis over generated calls in every placement: a statement-rule
  violation is only ever reported where SQLite refuses the statement (no false
  refusal), and where SQLite refuses it for an argument count or a column count
  the checker reports it (completeness for those two rules).
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlite_prepare import memory_db, sqlite_error

from grid_sql.checker import SemanticChecker, StatementParseError, full_grants
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.violations import STATEMENT_RULES

SCHEMA = {"t": ["a", "b"], "u": ["c", "d"]}
CHECKER = SemanticChecker(SCHEMA, {"all": full_grants(SCHEMA)})
KEYWORD_AGGREGATES = ("sum", "avg", "min", "max")


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return memory_db("t (a, b)", "u (c, d)")


def rule_kinds(sql: str) -> list[str]:
    return [v.kind.value for v in CHECKER.check(sql, "all") if v.kind in STATEMENT_RULES]


def test_function_arities_are_sqlites(db: sqlite3.Connection) -> None:
    """For 0 to 8 arguments: a count is one the dialect takes (within the table's
    bounds, no gap) iff SQLite does not say "wrong number of arguments" (any other
    error means the count was taken)."""
    names = (*SQLITE.functions, *KEYWORD_AGGREGATES)
    assert set(SQLITE.arities) == set(names), "every known function has its arity"
    wrong = []
    for name in names:
        over = " OVER ()" if name in SQLITE.window_functions else ""
        for n in range(9):
            error = sqlite_error(db, f"SELECT {name}({', '.join(['1'] * n)}){over}")
            taken = "wrong number of arguments" not in error
            if taken != SQLITE.takes(name, n):
                wrong.append(f"{name} with {n}: SQLite {'takes' if taken else 'refuses'} it")
    assert not wrong, wrong


def test_over_is_flagged_iff_sqlite_refuses_it(db: sqlite3.Connection) -> None:
    """Every known function called with OVER at each count SQLite takes (up to 3):
    `misused_window` iff SQLite says it "may not be used as a window function"."""
    wrong = []
    for name, (least, most) in SQLITE.arities.items():
        for n in range(least, min(most if most is not None else 3, 3) + 1):
            args = ", ".join(["1"] * n) if n or name != "count" else "*"
            sql = f"SELECT {name}({args}) OVER () FROM t"
            refused = "may not be used as a window function" in sqlite_error(db, sql)
            if refused != ("misused_window" in rule_kinds(sql)):
                wrong.append(f"{sql}: SQLite {'refuses' if refused else 'takes'} it")
    assert not wrong, wrong


CASES = [
    ("SELECT sin() FROM t", ["wrong_argument_count"]),
    ("SELECT SIN( ) FROM t", ["wrong_argument_count"]),
    ("SELECT substr(a) FROM t", ["wrong_argument_count"]),
    ("SELECT abs(*) FROM t", ["wrong_argument_count"]),
    ("SELECT random(*), substr(a, 1), round(a, 1) FROM t", []),
    ("SELECT sum(a, b) FROM t", ["wrong_argument_count"]),
    ("SELECT min(a, b, 1), max(a) FROM t", []),
    ("SELECT percent_rank(1, 1) FROM t", ["misused_window", "wrong_argument_count"]),
    ("SELECT dense_rank() FROM t", ["misused_window"]),
    ("SELECT DISTINCT (a) FROM t WHERE (DENSE_RANK() - 1) > 1", ["misused_window"]),
    ("SELECT dense_rank() OVER (ORDER BY a) FROM t", []),
    ("SELECT abs(a) OVER () FROM t", ["misused_window"]),
    ("WITH c AS (SELECT abs(1, 2), rank()) SELECT a FROM t", []),  # c is never named
    ("WITH c AS (SELECT abs(1, 2)) SELECT * FROM c", ["wrong_argument_count"]),
    ("SELECT max(a, b) OVER (ORDER BY a) FROM t", ["misused_window"]),
    ("SELECT min(a) OVER (), group_concat(a, ',') OVER (), total(a) OVER () FROM t", []),
    ("SELECT a FROM t WHERE rank() OVER () > 1", ["misused_window"]),
    ("SELECT a FROM t GROUP BY a HAVING rank() OVER () > 1", ["misused_window"]),
    ("SELECT count(*) FROM t GROUP BY a ORDER BY rank() OVER ()", []),
    ("SELECT a FROM t WHERE count(*) > 1", ["misused_aggregate"]),
    ("SELECT a FROM t GROUP BY count(*)", ["misused_aggregate"]),
    ("SELECT a FROM t JOIN u ON sum(c) > 1", ["misused_aggregate"]),
    ("UPDATE t SET a = 1 WHERE max(b) > 1", ["misused_aggregate"]),
    ("UPDATE t SET a = max(b)", ["misused_aggregate"]),
    ("UPDATE t SET b = 1, a = count(*) + 1", ["misused_aggregate"]),
    ("UPDATE t SET a = sum(b) OVER ()", ["misused_window"]),
    ("UPDATE t SET a = (SELECT max(c) FROM u)", []),
    ("SELECT * FROM (SELECT a FROM t WHERE count(*) > 1)", ["misused_aggregate"]),
    ("WITH x AS (SELECT a FROM t WHERE sum(a) > 1) SELECT * FROM x", ["misused_aggregate"]),
    ("SELECT sum(sum(a)) FROM t GROUP BY b", ["misused_aggregate"]),
    ("SELECT a FROM t GROUP BY a HAVING max(count(b)) > 1", ["misused_aggregate"]),
    ("SELECT sum(sum(a)) OVER () FROM t GROUP BY b", []),
    ("SELECT max(a, sum(b)) FROM t", []),
    ("SELECT a FROM t GROUP BY a HAVING count(*) > (SELECT max(c) FROM u)", []),
    ("SELECT (SELECT c, d FROM u) FROM t", ["column_count"]),
    ("SELECT a FROM t WHERE a = (SELECT c, d FROM u)", ["column_count"]),
    ("SELECT * FROM t WHERE a NOT IN (SELECT * FROM u)", ["column_count"]),
    ("SELECT * FROM t WHERE (a, b) IN (SELECT c FROM u)", ["column_count"]),
    ("SELECT * FROM t WHERE (a, b) IN (SELECT * FROM u)", []),
    ("SELECT 1 FROM t WHERE (a, b) = (SELECT c, d FROM u)", []),
    ("SELECT 1 FROM t WHERE (1, 2) = (SELECT c FROM u)", ["column_count"]),
    ("SELECT 1 FROM t WHERE (1, 2, 3) < (SELECT * FROM u)", ["column_count"]),
    ("SELECT 1 FROM t WHERE (SELECT c, d FROM u) = (SELECT 1)", ["column_count"]),
    ("SELECT 1 FROM t WHERE (SELECT c, d FROM u) IS NOT (SELECT 1, 2)", []),
    ("SELECT 1 FROM t WHERE (a, b) BETWEEN (SELECT 1, 2) AND (SELECT 3)", ["column_count"]),
    ("SELECT 1 FROM t WHERE (SELECT c, d FROM u) BETWEEN (1, 2) AND (3, 4)", []),
    ("SELECT 1 FROM t WHERE (SELECT c, d FROM u) IS NULL", ["column_count"]),
    ("SELECT 1 FROM t WHERE a IN u", ["column_count"]),
    ("SELECT 1 FROM t WHERE (a, b, a) NOT IN u", ["column_count"]),
    ("SELECT 1 FROM t WHERE (SELECT c FROM u) IN t", ["column_count"]),
    ("SELECT 1 FROM t WHERE (a, b) IN u", []),
    ("SELECT 1 FROM t WHERE (SELECT c, d FROM u) NOT IN t", []),
    ("SELECT 1 FROM t WHERE EXISTS (SELECT c, d FROM u)", []),
    ("SELECT a FROM t UNION SELECT c, d FROM u", ["column_count"]),
    ("SELECT a FROM t WHERE a IN (SELECT c FROM u EXCEPT SELECT c, d FROM u)", ["column_count"]),
    ("SELECT a, b FROM t UNION SELECT * FROM u", []),
    # the widths of VALUES rows and of an INSERT's source (checker.py)
    ("INSERT INTO t VALUES (1, 2), (3)", ["column_count"]),
    ("INSERT INTO t (a) DEFAULT VALUES", ["column_count"]),
    ("WITH c(x, y) AS (SELECT 1) SELECT * FROM c", ["column_count"]),
    ("WITH c(x) AS (VALUES (1, 2)) SELECT * FROM c", ["column_count"]),
    ("WITH c(x, y) AS (SELECT 1) SELECT a FROM t", []),  # c is never named
    ("INSERT INTO t DEFAULT VALUES", []),
    ("INSERT INTO t (a) VALUES (1, 2)", ["column_count"]),
    ("INSERT INTO t (a, b) VALUES (1)", ["column_count"]),
    ("INSERT INTO t VALUES (1)", ["column_count"]),
    ("INSERT INTO t SELECT c FROM u", ["column_count"]),
    ("INSERT INTO t (b) SELECT * FROM u", ["column_count"]),
    ("SELECT * FROM (VALUES (1), (2, 3))", ["column_count"]),
    ("INSERT INTO t VALUES (1, 2), (3, 4)", []),
    ("INSERT INTO t (b) VALUES (1), (2)", []),
    ("INSERT INTO t SELECT * FROM u", []),
    ("INSERT INTO t (b, a) SELECT c, d FROM u UNION SELECT 1, 2", []),
    ("SELECT * FROM (VALUES (1, 2), (3, 4))", []),
    # an aggregate sorting a SELECT that aggregates nothing else (SQLite's "misuse of aggregate")
    ("SELECT * FROM t ORDER BY count(a)", ["misused_aggregate"]),
    ("SELECT a FROM t ORDER BY count(a) DESC LIMIT 1", ["misused_aggregate"]),
    ("SELECT DISTINCT a FROM t ORDER BY a, abs(sum(b))", ["misused_aggregate"]),
    ("SELECT max(a) OVER () FROM t ORDER BY max(a)", ["misused_aggregate"]),
    ("SELECT a FROM t ORDER BY count(a) + max(b)", ["misused_aggregate", "misused_aggregate"]),
    ("WITH x AS (SELECT a FROM t ORDER BY count(*)) SELECT * FROM x", ["misused_aggregate"]),
    ("SELECT * FROM (SELECT a FROM t ORDER BY avg(a))", ["misused_aggregate"]),
    ("SELECT count(*) FROM t ORDER BY count(a)", []),
    ("SELECT upper(group_concat(a)) FROM t ORDER BY count(a)", []),
    ("SELECT a FROM t GROUP BY a ORDER BY count(b)", []),
    ("SELECT a FROM t ORDER BY count(a) OVER (), max(a, b)", []),
    ("SELECT a, (SELECT count(t.b) FROM u) FROM t ORDER BY count(a)", []),
    ("SELECT 1 ORDER BY count(1)", []),
    # HAVING in a SELECT that neither groups nor aggregates in its select list
    ("SELECT a FROM t HAVING count(*) > 1", ["misused_aggregate"]),
    ("SELECT max(a) OVER () FROM t HAVING 1", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE EXISTS (SELECT c FROM u HAVING 1)", ["misused_aggregate"]),
    ("SELECT count(*) FROM t HAVING a", []),
    ("SELECT a FROM t GROUP BY a HAVING 1", []),
    ("SELECT a, (SELECT max(t.b) FROM u) FROM t HAVING 1", []),
    # a window name no WINDOW clause of the statement defines
    ("SELECT sum(a) OVER x FROM t", ["misused_window"]),
    ("SELECT sum(a) OVER x FROM t WINDOW w AS (ORDER BY b)", ["misused_window"]),
    ("SELECT sum(a) OVER W FROM t WINDOW w AS (ORDER BY b)", []),
    ("SELECT 0 AND sum(a) OVER x FROM t", []),  # folded: never resolved
    # a window is its SELECT core's (the SELECT's ORDER BY reads its cores'), as written
    ("SELECT (SELECT sum(c) OVER w FROM u) FROM t WINDOW w AS (ORDER BY a)", ["misused_window"]),
    ("SELECT sum(a) OVER w FROM (SELECT a FROM t WINDOW w AS (ORDER BY a))", ["misused_window"]),
    (
        "SELECT sum(a) OVER w FROM t WINDOW w AS (ORDER BY b) UNION SELECT sum(c) OVER w FROM u",
        ["misused_window"],
    ),
    ("SELECT a FROM t WINDOW w AS (ORDER BY b) ORDER BY sum(a) OVER w", []),
    ("SELECT * FROM (SELECT sum(a) OVER w FROM t WINDOW w AS (ORDER BY a))", []),
    ('SELECT sum(a) OVER "w" FROM t WINDOW w AS (ORDER BY b)', ["misused_window"]),
    ('SELECT sum(a) OVER "W" FROM t WINDOW "w" AS (ORDER BY b)', []),
    # an aggregate over an enclosing query's columns is that query's (SQLite also
    # refuses one written in WHERE, GROUP BY or ON whoever owns it)
    ("SELECT a FROM t WHERE a = (SELECT 1 FROM u WHERE c = max(t.b))", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE (SELECT max(t.b) FROM u) > 0", ["misused_aggregate"]),
    ("SELECT a, (SELECT max(t.b) FROM u) FROM t", []),
    # ... and one a subquery's ORDER BY sorts by is its own (SQLite's ORDER BY
    # reads no enclosing query)
    ("SELECT a FROM t WHERE a IN (SELECT c FROM u ORDER BY count(c))", ["misused_aggregate"]),
    ("SELECT a FROM t WHERE a IN (SELECT max(c) FROM u ORDER BY count(c))", []),
    # SQLite computes the SET of an UPDATE with FROM as a select list
    ("UPDATE t SET a = sum(u.c) FROM u", []),
    ("UPDATE t SET a = row_number() OVER () FROM u WHERE t.b = u.d", []),
    ("UPDATE t SET a = sum(b)", ["misused_aggregate"]),
    ("UPDATE t SET a = 1 FROM u WHERE sum(c) > 0", ["misused_aggregate"]),
    ("UPDATE t SET a = sum(sum(c)) FROM u", ["misused_aggregate"]),
    # a window call inside an aggregate's or a window call's arguments, or in a
    # window definition (not inside a SELECT nested there)
    ("SELECT sum(row_number() OVER ()) FROM t", ["misused_window"]),
    ("SELECT min(abs(row_number() OVER ())) FROM t", ["misused_window"]),
    ("SELECT count(*) FILTER (WHERE row_number() OVER () > 1) FROM t", ["misused_window"]),
    ("SELECT first_value(row_number() OVER ()) OVER () FROM t", ["misused_window"]),
    ("SELECT first_value(a) OVER (PARTITION BY row_number() OVER ()) FROM t", ["misused_window"]),
    ("SELECT max(sum(a) OVER ()) FROM t", ["misused_window"]),
    ("SELECT a FROM t WHERE EXISTS (SELECT max(row_number() OVER ()) FROM u)", ["misused_window"]),
    ("SELECT min(a, row_number() OVER ()), abs(row_number() OVER ()) FROM t", []),
    ("SELECT min((SELECT row_number() OVER () FROM u)) FROM t", []),
    ("SELECT sum(a) OVER (PARTITION BY sum(b)) FROM t", []),
    # a RANGE frame with an offset needs one ORDER BY term
    ("SELECT sum(a) OVER (RANGE 1 PRECEDING) FROM t", ["misused_window"]),
    (
        "SELECT sum(a) OVER (ORDER BY a, b RANGE BETWEEN CURRENT ROW AND 1 FOLLOWING) FROM t",
        ["misused_window"],
    ),
    ("SELECT sum(a) OVER w FROM t WINDOW w AS (RANGE 1 PRECEDING)", ["misused_window"]),
    ("SELECT sum(a) OVER (ORDER BY a RANGE 1 PRECEDING) FROM t", []),
    ("SELECT sum(a) OVER (RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM t", []),
    ("SELECT sum(a) OVER (ROWS 1 PRECEDING) FROM t", []),
    # a compound's ORDER BY names result columns (as SQLite compares them)
    ("SELECT a FROM t UNION SELECT c FROM u ORDER BY count(a)", ["column_count"]),
    ("SELECT a FROM t UNION SELECT c FROM u ORDER BY b", ["column_count"]),
    ("SELECT a + 1 FROM t UNION SELECT c FROM u ORDER BY a + 2", ["column_count"]),
    ("SELECT b FROM t UNION SELECT d FROM u ORDER BY lower(d)", ["column_count"]),
    ("SELECT 'X' FROM t UNION SELECT d FROM u ORDER BY 'x'", ["column_count"]),
    ("SELECT (SELECT a FROM t UNION SELECT c FROM u ORDER BY b) FROM t", ["column_count"]),
    (
        "SELECT avg(a) FROM t GROUP BY a HAVING avg(a) EXCEPT SELECT max(c) FROM u "
        "ORDER BY min(abs(1))",
        ["column_count"],
    ),
    ("SELECT a FROM t UNION SELECT c FROM u ORDER BY a, 1, t.a, A COLLATE NOCASE", []),
    ("SELECT a AS x FROM t UNION SELECT c FROM u ORDER BY x, c", []),
    ("SELECT a + 1 FROM t UNION SELECT c FROM u ORDER BY a + 1", []),
    ("SELECT lower(b) FROM t UNION SELECT d FROM u ORDER BY LOWER(b)", []),
    ("SELECT a FROM t EXCEPT SELECT max(c) FROM u ORDER BY max(c)", []),
    ("SELECT 'X' FROM t UNION SELECT d FROM u ORDER BY 'X'", []),
    # left to the database by policy (call_rules' header): refused by SQLite, not flagged
    ("SELECT group_concat(DISTINCT a, b) FROM t", []),
    ("SELECT (SELECT max(c) FROM u) FROM t ORDER BY count(a)", []),
    ("SELECT a FROM t ORDER BY sum(count(a)) OVER ()", []),
    ("SELECT * FROM t UNION SELECT c, d FROM u ORDER BY count(a)", []),
]
LEFT_TO_THE_DATABASE = {sql for sql, _ in CASES[-4:]}


@pytest.mark.parametrize(("sql", "kinds"), CASES)
def test_statement_rules(db: sqlite3.Connection, sql: str, kinds: list[str]) -> None:
    assert sorted(rule_kinds(sql)) == kinds
    error = sqlite_error(db, sql)
    if kinds or sql in LEFT_TO_THE_DATABASE:
        assert error, "SQLite prepares a statement the checker refuses"
    else:
        assert not error, error


def test_an_aggregate_query_by_its_order_by_alone_is_postgresqls() -> None:
    """PostgreSQL and DuckDB read an aggregate in ORDER BY as making the query an
    aggregate one (`SELECT 1 FROM t ORDER BY count(a)` runs there): only a dialect
    with `order_by_aggregates_need_aggregation` (SQLite) refuses it."""
    assert SQLITE.order_by_aggregates_need_aggregation
    assert not POSTGRES.order_by_aggregates_need_aggregation
    pg = SemanticChecker(SCHEMA, {"all": full_grants(SCHEMA)}, dialect=POSTGRES)
    for sql in ("SELECT 1 FROM t ORDER BY count(a)", "SELECT * FROM t ORDER BY count(a)"):
        assert rule_kinds(sql) == ["misused_aggregate"]
        assert [v.kind for v in pg.check(sql, "all") if v.kind in STATEMENT_RULES] == [], sql
    (v,) = CHECKER.check("SELECT a FROM t ORDER BY count(a) DESC", "all")
    assert v.message == (
        "the aggregate count() in ORDER BY sorts a query that aggregates nothing: "
        "add GROUP BY, or aggregate in the select list"
    )


def test_messages_name_the_call_and_the_counts() -> None:
    messages = {v.kind.value: v.message for v in CHECKER.check("SELECT substr(a) FROM t", "all")}
    assert messages == {
        "wrong_argument_count": "substr() takes 2 or 3 arguments; this call passes 1 argument"
    }
    sql = "SELECT * FROM t WHERE a IN (SELECT * FROM u)"
    (v,) = CHECKER.check(sql, "all")
    assert v.message == (
        "this subquery gives 2 columns where one value is expected; select one column"
    )
    assert sql[v.span[0] : v.span[1]] == "SELECT * FROM u"


# ---------------------------------------------------------------- generated calls

NAMES = sorted((*SQLITE.arities, "count"))


@st.composite
def calls(draw: st.DrawFn, depth: int = 0) -> str:
    name = draw(st.sampled_from(NAMES))
    n = draw(st.integers(0, 4))
    leaves = st.sampled_from(["a", "b", "1", "(SELECT c FROM u)", "(SELECT c, d FROM u)"])
    args = [
        draw(calls(depth + 1)) if depth < 2 and draw(st.booleans()) else draw(leaves)
        for _ in range(n)
    ]
    if name == "count":
        args = args[:1] or ["*"]
    over = draw(st.sampled_from(["", " OVER ()", " OVER (ORDER BY a)"]))
    return f"{name}({', '.join(args)}){over}"


PLACES = [
    "SELECT {} FROM t",
    "SELECT a FROM t WHERE {} > 0",
    "SELECT a FROM t GROUP BY a HAVING {} > 0",
    "SELECT a FROM t GROUP BY {}",
    "SELECT a FROM t WHERE a IN (SELECT {} FROM u)",
    "SELECT (SELECT {} FROM u) FROM t",
    "SELECT a FROM t ORDER BY {}",
    "SELECT count(*) FROM t ORDER BY {}",
    "SELECT a FROM t WHERE EXISTS (SELECT {} FROM u)",
    "SELECT * FROM (SELECT a FROM t ORDER BY {})",
    "SELECT a FROM t JOIN u ON {} = c",
    "SELECT a FROM t WHERE {} NOT IN u",
    "SELECT {} FROM t UNION SELECT c, d FROM u",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=st.sampled_from(PLACES), call=calls())
def test_rules_flag_only_what_sqlite_refuses(place: str, call: str) -> None:
    db = memory_db("t (a, b)", "u (c, d)")
    sql = place.format(call)
    try:
        kinds = rule_kinds(sql)
    except StatementParseError:
        return  # outside GRID's grammar (a form of COUNT it does not have)
    error = sqlite_error(db, sql)
    assert not kinds or error, f"{sql}: flagged {kinds}, SQLite prepares it"
    counted = ("wrong number of arguments", "sub-select returns", "do not have the same number")
    if any(m in error for m in counted) and "row value" not in error:
        assert kinds, f"{sql}: SQLite says {error!r}, the checker nothing"


PROBABILITIES = [
    "0.5", "1.0", "1", "0", ".5", "1.", "1e0", "5e-1", "1.5", "-0.5", "(0.5)", "+0.5",
    "0.5 + 0", "a", "NULL", "'0.5'", "0x1", "1.0000001", "00.5", "(((0.25)))", "0.0",
]  # fmt: skip


@pytest.mark.parametrize("arg", PROBABILITIES)
def test_likelihood_takes_what_sqlite_takes(db: sqlite3.Connection, arg: str) -> None:
    """likelihood(X, Y) is constant_argument iff SQLite refuses Y when it prepares
    the statement (a float literal from 0.0 to 1.0, parentheses aside)."""
    sql = f"SELECT likelihood(a, {arg}) FROM t"
    assert (rule_kinds(sql) == ["constant_argument"]) == bool(sqlite_error(db, sql)), arg
    assert rule_kinds(f"SELECT a FROM t WHERE likely({arg})") == []  # no second argument
