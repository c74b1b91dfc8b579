"""The SemanticChecker on PostgreSQL: a live server's catalog, its name resolution.

A module fixture starts a real PostgreSQL server (tests/pg_server.py; skipped
without the binaries unless GRID_REQUIRE_POSTGRES=1) with the corpus schema of
test_dialect_postgres plus a table with quoted mixed-case names. The checker's
schema is the server's catalog (`SchemaSnapshot.from_postgres`).

- Agreement with the server: every accept line of `corpus/postgres.txt`, which
  the server prepares (test_dialect_postgres), resolves in the checker with no
  name violation (unknown table, column or qualifier, ambiguous column).
- Column policy on PostgreSQL's own constructs: RETURNING, ON CONFLICT DO
  UPDATE (and `excluded`), DELETE ... USING, LATERAL, DISTINCT ON, LIMIT and
  FETCH subqueries, join alias lists; each statement is prepared by the server
  first, so the verdicts are about statements PostgreSQL takes.
- Name resolution: a bare name folds to lower case, a quoted one keeps its case.
- Bad statements are typed errors (`CheckerError`), never asserts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg_server import Server, running_server
from test_dialect_postgres import SCHEMA

from grid_sql.checker import (
    CheckerError,
    GrammarContractError,
    SemanticChecker,
    StatementParseError,
    ViolationKind,
    contract_gaps,
)
from grid_sql.dialects import POSTGRES
from grid_sql.schema import SchemaSnapshot
from grid_sql.violations import STATEMENT_RULES

EXTRA = 'CREATE TABLE "Audit" ("Who" text, who text, "When" date);\n'
NAME_KINDS = {
    ViolationKind.UNKNOWN_TABLE,
    ViolationKind.UNKNOWN_COLUMN,
    ViolationKind.UNKNOWN_QUALIFIER,
    ViolationKind.AMBIGUOUS_COLUMN,
}


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(SCHEMA + EXTRA) as server:
        yield server


@pytest.fixture(scope="module")
def checker(postgres: Server) -> SemanticChecker:
    snapshot = SchemaSnapshot.from_postgres(
        host="127.0.0.1", port=postgres.port, user="postgres", dbname="postgres", psql=postgres.psql
    )
    schema = {t.name: t.column_names for t in snapshot.tables}
    grants = {
        "admin": dict.fromkeys(schema),
        # employees without salary; salaries not granted
        "clerk": {
            "employees": ("id", "first_name", "last_name", "department_id", "title"),
            "departments": None,
            "Audit": ("Who",),
        },
    }
    return SemanticChecker(schema, grants, dialect="postgres")


def prepared(server: Server, sql: str) -> None:
    run = server.run(f"PREPARE s AS {sql}\nDEALLOCATE s;\n")
    assert "ERROR" not in run.stderr, f"{sql}\n{run.stderr}"


def test_contract_holds() -> None:
    assert contract_gaps("postgres") == ()


def test_every_accept_line_resolves_as_the_server_resolves_it(checker: SemanticChecker) -> None:
    failures = []
    for entry in POSTGRES.corpus():
        if entry.kind != "accept":
            continue
        found = [v for v in checker.analyze(entry.text).violations if v.kind in NAME_KINDS]
        if found:
            failures.append(f"line {entry.line}: {entry.text.decode()}\n    {found[0].message}")
    assert not failures, "\n".join(failures)


DENIED = [
    ("SELECT first_name FROM employees ORDER BY id LIMIT (SELECT max(salary) FROM employees);",
     "salary"),
    ("SELECT first_name FROM employees "
     "OFFSET (SELECT count(*) FROM employees WHERE salary > 1) ROWS;", "salary"),
    ("SELECT to_json(e) FROM employees e;", "salary"),
    ("SELECT DISTINCT ON (salary) first_name FROM employees ORDER BY salary;", "salary"),
    ("UPDATE employees SET title = 'x' WHERE id = 1 RETURNING salary;", "salary"),
    ("DELETE FROM employees WHERE id = 1 RETURNING *;", "salary"),
    ("INSERT INTO employees (id, first_name, last_name) VALUES (9, 'a', 'b') "
     "ON CONFLICT (id) DO UPDATE SET title = excluded.title RETURNING salary;", "salary"),
    ("INSERT INTO employees (id, first_name, last_name) VALUES (9, 'a', 'b') "
     "ON CONFLICT (id) DO UPDATE SET salary = 1;", "salary"),
    ("DELETE FROM departments d USING employees e WHERE e.department_id = d.id AND e.salary > 9;",
     "salary"),
    ("SELECT d.name, x.s FROM departments d, "
     "LATERAL (SELECT e.salary AS s FROM employees e WHERE e.department_id = d.id) AS x;",
     "salary"),
    ("SELECT q.a FROM (SELECT salary FROM employees) AS q(a);", "salary"),
    ('SELECT who FROM "Audit";', "who"),
    ('SELECT "When" FROM "Audit";', "When"),
]  # fmt: skip

ALLOWED = [
    "SELECT first_name FROM employees ORDER BY id FETCH FIRST 3 ROWS ONLY;",
    "UPDATE employees SET title = 'x' WHERE id = 1 RETURNING id, title;",
    "INSERT INTO employees (id, first_name, last_name) VALUES (9, 'a', 'b') "
    "ON CONFLICT (id) DO UPDATE SET title = excluded.title RETURNING id;",
    "SELECT d.name, x.t FROM departments d, "
    "LATERAL (SELECT e.title AS t FROM employees e WHERE e.department_id = d.id) AS x;",
    "SELECT q.a FROM (SELECT title FROM employees) AS q(a) WHERE q.a IS NOT NULL;",
    'SELECT "Who" FROM "Audit";',
    "SELECT e.first_name FROM employees e NATURAL JOIN departments d;",
]


@pytest.mark.parametrize("sql, column", DENIED, ids=range(len(DENIED)))
def test_denied_columns(postgres: Server, checker: SemanticChecker, sql: str, column: str) -> None:
    prepared(postgres, sql)
    found = checker.check(sql, "clerk")
    assert any(v.kind == ViolationKind.COLUMN_NOT_GRANTED and v.column == column for v in found), (
        found
    )
    assert not [v for v in found if v.kind in NAME_KINDS], found


@pytest.mark.parametrize("sql", ALLOWED, ids=range(len(ALLOWED)))
def test_allowed(postgres: Server, checker: SemanticChecker, sql: str) -> None:
    prepared(postgres, sql)
    assert checker.check(sql, "clerk") == []


def test_case_rules(checker: SemanticChecker) -> None:
    """A bare name folds to lower case: `Audit` is the table audit, which does not
    exist; "Audit" is the table; `WHO` is who, "Who" the other column."""
    kinds = [v.kind for v in checker.analyze("SELECT who FROM Audit;").violations]
    assert kinds == [ViolationKind.UNKNOWN_TABLE]
    accesses = checker.analyze('SELECT WHO, "Who" FROM "Audit";').accesses
    assert [a.column for a in accesses] == ["who", "Who"]


@pytest.mark.parametrize(
    "sql",
    ["SELECT FROM;", "SELECT * FROM employees WHERE;", "DELETE employees;", "", "SELECT 1 year;"],
)
def test_bad_statements_are_typed_errors(checker: SemanticChecker, sql: str) -> None:
    with pytest.raises(StatementParseError):
        checker.check(sql, "clerk")


def test_a_dialect_off_the_contract_is_refused() -> None:
    import dataclasses

    broken = dataclasses.replace(POSTGRES, name="broken", dq_string_fallback=True)
    with pytest.raises(GrammarContractError, match="DQ_STRING"):
        SemanticChecker({}, {}, dialect=broken)
    assert issubclass(GrammarContractError, CheckerError)


# ---------------------------------------------------------------- statement rules

RULE_CASES = [
    ("SELECT abs() FROM employees;", ["wrong_argument_count"]),
    ("SELECT left(first_name) FROM employees;", ["wrong_argument_count"]),
    ("SELECT round(id, 2, 3) FROM employees;", ["wrong_argument_count"]),
    ("SELECT lag(id, 1, 0, 0) OVER (ORDER BY id) FROM employees;", ["wrong_argument_count"]),
    ("SELECT ntile(2) FROM employees;", ["misused_window"]),
    ("SELECT id FROM employees WHERE row_number() OVER () > 1;", ["misused_window"]),
    ("SELECT id FROM employees WHERE count(*) > 1;", ["misused_aggregate"]),
    ("SELECT sum(avg(id)) FROM employees GROUP BY title;", ["misused_aggregate"]),
    ("SELECT string_agg(title, ',') FROM employees GROUP BY array_agg(id);", [
        "misused_aggregate"
    ]),
    ("SELECT id FROM employees WHERE id IN (SELECT id, title FROM employees);", [
        "column_count"
    ]),
    ("SELECT id FROM employees UNION SELECT id, title FROM employees;", ["column_count"]),
    ("SELECT id FROM employees WHERE (id, title) = (SELECT id FROM employees LIMIT 1);", [
        "column_count"
    ]),
    ("SELECT now(*) FROM employees;", ["wrong_argument_count"]),
    ("SELECT abs(id) OVER () FROM employees;", ["misused_window"]),
    ("UPDATE employees SET id = max(id);", ["misused_aggregate"]),
    ("WITH c(a, b) AS (SELECT 1) SELECT * FROM c;", ["column_count"]),
    ("UPDATE employees SET id = rank() OVER ();", ["misused_window"]),
    ("INSERT INTO employees (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET id = max(1);", [
        "misused_aggregate"
    ]),
    ("SELECT random(*) FROM employees;", ["wrong_argument_count"]),
    ("INSERT INTO employees (id, title) VALUES (1, 'a'), (2);", ["column_count"]),
    ("INSERT INTO employees (id) VALUES (1, 2);", ["column_count"]),
    ("INSERT INTO employees (id, title) SELECT id FROM employees;", ["column_count"]),
    ("INSERT INTO employees VALUES (1, 'a', 'b', 'c', 2, 3, NULL, 4, 'h', true, 5);", [
        "column_count"
    ]),
    ("WITH c AS (SELECT 1), C AS (SELECT 2) SELECT * FROM employees;", ["duplicate_name"]),
    ("SELECT sum(id) OVER x FROM employees;", ["misused_window"]),
    ("SELECT (SELECT sum(id) OVER w FROM employees LIMIT 1) FROM employees "
     "WINDOW w AS (ORDER BY id);", ["misused_window"]),
    ("SELECT sum(id) OVER w FROM employees WINDOW w AS (ORDER BY id), w AS (ORDER BY title);",
     ["duplicate_name"]),
    # controls: the server prepares each
    # a quoted name is another name
    ('WITH c AS (SELECT 1), "C" AS (SELECT 2) SELECT * FROM employees;', []),
    ("SELECT concat(first_name, ' ', title), round(id, 2), now() FROM employees;", []),
    ("SELECT lag(id, 1, 0) OVER (ORDER BY id), sum(sum(id)) OVER () FROM employees "
     "GROUP BY id;", []),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY id) FROM employees;", []),
    ("SELECT max(id) OVER (), string_agg(title, ',') OVER () FROM employees;", []),
    ("SELECT 1 FROM employees HAVING true;", []),  # the whole table is one group
    ("WITH c(a) AS (SELECT 1, 2) SELECT * FROM c;", []),  # the second keeps its name
    ("SELECT id FROM employees WHERE (id, title) IN (SELECT id, title FROM employees);", []),
    ("INSERT INTO employees VALUES (1);", []),  # the other columns take their defaults
    ("SELECT row_number(*) OVER (), rank(*) OVER (), count(*) FROM employees;", []),
    ("INSERT INTO employees (id, title) VALUES (1, 'a'), (2, 'b');", []),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "kinds"), RULE_CASES, ids=range(len(RULE_CASES)))
def test_statement_rules_flag_what_the_server_refuses(
    postgres: Server, checker: SemanticChecker, sql: str, kinds: list[str]
) -> None:
    found = sorted(v.kind.value for v in checker.check(sql, "admin") if v.kind in STATEMENT_RULES)
    assert found == kinds
    run = postgres.run(f"PREPARE s AS {sql}\nDEALLOCATE s;\n")
    assert ("ERROR" in run.stderr) == bool(kinds), run.stderr


def test_an_unused_window_is_resolved(postgres: Server, checker: SemanticChecker) -> None:
    """Unlike SQLite and DuckDB, PostgreSQL resolves a named window no OVER reads."""
    sql = "SELECT id FROM employees WINDOW w AS (ORDER BY nope);"
    assert [v.kind for v in checker.check(sql, "admin")] == [ViolationKind.UNKNOWN_COLUMN]
    assert "ERROR" in postgres.run(f"PREPARE s AS {sql}\nDEALLOCATE s;\n").stderr


def test_function_arities_are_the_servers(postgres: Server) -> None:
    """The dialect's arity bounds, window-only and aggregate sets are pg_proc's."""
    names = (*POSTGRES.functions, "sum", "avg", "min", "max")
    listed = ", ".join(f"'{n}'" for n in names)
    out = postgres.run(
        "SELECT p.proname, p.prokind, p.pronargs, p.pronargdefaults, p.provariadic <> 0, "
        "coalesce(a.aggkind, '') FROM pg_proc p LEFT JOIN pg_aggregate a ON a.aggfnoid = p.oid "
        f"WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname IN ({listed});"
    ).stdout
    overloads: dict[str, list[tuple[str, int, int, bool, str]]] = {}
    for line in out.strip().splitlines():
        name, kind, nargs, defaults, variadic, aggkind = line.split("|")
        overloads.setdefault(name, []).append(
            (kind, int(nargs), int(defaults), variadic == "t", aggkind)
        )
    assert set(overloads) == set(names)
    apart = {n for n, rows in overloads.items() if any(r[4] in ("o", "h") for r in rows)}
    expected = {
        name: (
            min(n - d for _, n, d, _, _ in rows),
            None if any(v for _, _, _, v, _ in rows) else max(n for _, n, _, _, _ in rows),
        )
        for name, rows in overloads.items()
        if name not in apart
    }
    assert POSTGRES.arities == expected
    windows = {n for n, rows in overloads.items() if {r[0] for r in rows} == {"w"}}
    assert POSTGRES.window_functions == windows
    aggregates = {n for n, rows in overloads.items() if {r[0] for r in rows} == {"a"}}
    assert POSTGRES.aggregate_functions == aggregates - {"sum", "avg", "min", "max"}
