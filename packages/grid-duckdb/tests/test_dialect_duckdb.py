"""The duckdb dialect (a plug-in): its corpus against DuckDB, its catalog, its checker.

Only what is DuckDB's own; grid-sql's dialect kit (tests/test_dialect_kit.py)
runs on every registered dialect, this plug-in included (grammar build, every
corpus verdict under grid-spec, the fast path's masks against grid-spec's).

- DuckDB itself (the `duckdb` package, in process) prepares every accept line
  of `corpus/duckdb.txt` and refuses every reject line, over the PostgreSQL
  corpus schema (grid-sql's tests/test_dialect_postgres.py).
- GRID is narrower than DuckDB on purpose in the statements of `NARROWER`.
- Schema snapshots come from a live DuckDB file's catalog; the SemanticChecker
  reads every accept line with no name violation against that catalog, and
  holds column policy on FROM-first statements.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import duckdb
import pytest

from grid_duckdb.dialect import ARGUMENT_GAPS, DUCKDB, FUNCTION_ARITIES
from grid_duckdb.schema import snapshot, snapshot_connection
from grid_spec.spec import Language
from grid_sql.checker import SemanticChecker, StatementParseError, ViolationKind, contract_gaps
from grid_sql.dialects import ENTRY_POINT_GROUP, get_dialect
from grid_sql.lexicon import SchemaLexicon
from grid_sql.schema import SchemaError

CORPUS = DUCKDB.corpus()
# The PostgreSQL corpus schema (grid-sql's test_dialect_postgres.SCHEMA), in DuckDB.
SCHEMA = (Path(__file__).parent / "schema.sql").read_text(encoding="utf-8")

# Statements DuckDB takes and GRID refuses, on purpose (the reasons are the
# PostgreSQL dialect's: grid_sql.dialects.postgres and postgres.lark).
NARROWER = [
    "TRUNCATE employees;",  # DML only
    "SELECT 1; SELECT 2;",  # one statement per sentence
    "SELECT * FROM generate_series(1, 10);",  # table functions: an exit from table policy
    "SELECT * FROM 'employees';",  # DuckDB reads a file or table named by a string
    "SELECT E'\\x41';",  # lexed differently from a plain string
    "SELECT $$dollar$$;",
    "SELECT 1abc;",
    "SELECT first_name given, last_name family FROM employees;",  # aliases take AS
    "SELECT 1 AS delete;",  # keywords are reserved
]


def prepares(db: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """None when DuckDB prepares (parses and binds) ``sql``, else its error."""
    try:
        db.execute(f"PREPARE s AS {sql.rstrip().rstrip(';')}")
        db.execute("DEALLOCATE s")
    except duckdb.Error as e:
        return str(e).split("\n")[0]
    return None


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("duckdb") / "corpus.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute(SCHEMA)
        db.execute('CREATE TABLE "Audit" ("Who" VARCHAR, "When" DATE)')
        db.execute("CREATE VIEW payroll AS SELECT id, salary FROM employees")
    return path


@pytest.fixture(scope="module")
def db(database: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(database), read_only=True)


@pytest.fixture(scope="module")
def checker(database: Path) -> SemanticChecker:
    tables = {t.name: t.column_names for t in snapshot(database).tables}
    grants = {
        "admin": dict.fromkeys(tables),
        "clerk": {
            "employees": ("id", "first_name", "last_name", "department_id", "title"),
            "departments": None,
        },
    }
    return SemanticChecker(tables, grants, dialect="duckdb")


# ---------------------------------------------------------------- the plug-in route


def test_registered_through_the_entry_point_group() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                if e.name == "duckdb"]  # fmt: skip
    assert entry.dist is not None and entry.dist.name == "grid-duckdb"
    assert get_dialect("duckdb") is entry.load() is DUCKDB


def test_grammar_is_a_delta_over_postgres() -> None:
    postgres = get_dialect("postgres")
    assert DUCKDB.grammar_layers == (("grid_sql.dialects", "postgres.lark"),)
    base_and_postgres = postgres.grammar_text.split("// " + "-" * 64 + " generated")[0]
    assert DUCKDB.grammar_text.startswith(base_and_postgres.rstrip("\n"))
    DUCKDB.check_invariants()
    assert contract_gaps("duckdb") == ()


# ---------------------------------------------------------------- DuckDB's verdicts


def test_corpus_sizes() -> None:
    kinds = [e.kind for e in CORPUS]
    assert kinds.count("accept") >= 300
    assert kinds.count("reject") >= 50
    assert kinds.count("prefix") >= 30
    assert sum(e.text.startswith(b"FROM ") for e in CORPUS if e.kind == "accept") >= 10


def test_duckdb_prepares_every_accept_line(db: duckdb.DuckDBPyConnection) -> None:
    errors = []
    for entry in CORPUS:
        if entry.kind == "accept":
            error = prepares(db, entry.text.decode())
            if error is not None:
                errors.append(f"line {entry.line}: {entry.text.decode()}\n    {error}")
    assert not errors, "\n".join(errors)


def test_duckdb_refuses_every_reject_line(db: duckdb.DuckDBPyConnection) -> None:
    taken = [
        f"line {e.line}: {e.text.decode()}"
        for e in CORPUS
        if e.kind == "reject" and prepares(db, e.text.decode()) is None
    ]
    assert not taken, "\n".join(taken)


def test_grid_is_narrower_on_purpose(db: duckdb.DuckDBPyConnection) -> None:
    spec = Language(DUCKDB.grammar_text)
    for sql in NARROWER:
        assert prepares(db, sql) is None, sql
        assert not spec.in_language(sql.encode()), sql


# ---------------------------------------------------------------- catalog and checker


def test_snapshot_reads_the_live_catalog(database: Path, db: duckdb.DuckDBPyConnection) -> None:
    snap = snapshot(database)
    assert snap.dialect == "duckdb" and snap.name == "corpus"
    assert "employees" in snap.table_names and "Audit" in snap.table_names
    employees = snap.table("EMPLOYEES")  # DuckDB compares names in any case
    assert employees is not None and employees.column_names[0] == "id"
    payroll = snap.table("payroll")
    assert payroll is not None and payroll.kind == "view"
    assert payroll.column_names == ("id", "salary")
    assert snapshot_connection(db) == snap


def test_snapshot_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="no such file"):
        snapshot(tmp_path / "missing.duckdb")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a database")
    with pytest.raises(SchemaError, match=r"bad\.duckdb"):
        snapshot(bad)
    with (
        duckdb.connect(str(tmp_path / "ok.duckdb")) as db,
        pytest.raises(SchemaError, match="no schema named 'nope'"),
    ):
        snapshot_connection(db, "nope")


def test_lexicon_from_the_snapshot(database: Path) -> None:
    lexicon = SchemaLexicon.build(DUCKDB, snapshot(database))
    assert b"employees" in lexicon.words["TABLE_NAME"]
    assert b'"Audit"' in lexicon.words["TABLE_NAME"]
    spec = Language(DUCKDB.grammar_text, lexicon.word_lists())
    assert spec.in_language(b"FROM employees SELECT first_name;")
    assert not spec.in_language(b"FROM secrets SELECT first_name;")


def test_checker_resolves_every_accept_line(checker: SemanticChecker) -> None:
    names = {
        ViolationKind.UNKNOWN_TABLE,
        ViolationKind.UNKNOWN_COLUMN,
        ViolationKind.UNKNOWN_QUALIFIER,
        ViolationKind.AMBIGUOUS_COLUMN,
    }
    failures = []
    for entry in CORPUS:
        if entry.kind == "accept":
            found = [v for v in checker.analyze(entry.text).violations if v.kind in names]
            if found:
                failures.append(f"line {entry.line}: {entry.text.decode()}: {found[0].message}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("sql", "denied"),
    [
        ("FROM employees SELECT salary;", ["salary"]),
        ("FROM employees SELECT *;", ["salary", "hire_date"]),
        ("FROM employees e SELECT e.first_name WHERE e.salary > 1;", ["salary"]),
        ("FROM employees e SELECT e.first_name;", []),
        ("FROM EMPLOYEES SELECT First_Name;", []),  # any case, as DuckDB binds
        ("FROM salaries SELECT 1;", None),  # a table not granted
    ],
)
def test_column_policy_on_from_first_statements(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, denied: list[str] | None
) -> None:
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    if denied is None:
        assert [v.kind for v in found] == [ViolationKind.TABLE_NOT_GRANTED]
        return
    columns = {v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED}
    assert set(denied) <= columns and len(found) >= len(denied)
    assert all(v.kind == ViolationKind.COLUMN_NOT_GRANTED for v in found)


@pytest.mark.parametrize(
    ("sql", "denied"),
    [
        ("SELECT id FROM employees AS e(a, b, c, d, f, g, h, id);", ["salary"]),
        ("FROM employees AS e(a, b, c, d, f, g, h, id) SELECT e.id;", ["salary"]),
        ("SELECT x FROM employees AS e(x);", []),
        ("SELECT (SELECT first_name FROM employees AS q(a, b, c, d, f, g, h, first_name)"
         " LIMIT 1) FROM departments;", ["salary"]),
    ],
)  # fmt: skip
def test_a_column_list_renames_a_tables_columns_by_position(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, denied: list[str]
) -> None:
    """``t AS q(a, b)`` renames t's first columns: the checker once kept the table's
    own names, so a denied column renamed to a granted name was read unflagged
    (found by a red team, session 45)."""
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    assert [v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED] == denied
    assert len(found) == len(denied), found


@pytest.mark.parametrize(
    "sql",
    [
        # DuckDB binds a FROM subquery against the FROM items before it without
        # LATERAL: `budget` is the employees row here, not departments.budget (the
        # checker resolved it outward; a red team's, session 45)
        "SELECT (SELECT count(*) FROM employees AS budget, (SELECT budget) AS q) FROM departments;",
        "SELECT (SELECT count(*) FROM employees AS e, (SELECT salary) AS q) FROM departments;",
    ],
)
def test_a_from_subquery_sees_the_from_items_before_it(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    assert "salary" in {v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED}


@pytest.mark.parametrize(
    "sql",
    [
        # USING and NATURAL compare the join's own left operand: not the FROM items
        # outside its parentheses, nor those before a comma (a red team's, session 45)
        "WITH p(salary) AS (SELECT 1) SELECT e.first_name FROM p "
        "JOIN (employees AS e JOIN (SELECT 1 AS salary) AS q USING (salary)) ON true;",
        "WITH p(salary) AS (SELECT 1) SELECT e.first_name FROM p, employees AS e "
        "NATURAL JOIN (SELECT 1 AS salary) AS q;",
        # a CTE list shorter than its body: the rest keep the body's names
        "WITH cte(x) AS (SELECT 1, 2000 AS salary) "
        "SELECT e.first_name FROM employees e NATURAL JOIN cte;",
    ],
)
def test_a_using_join_compares_its_own_left_operand(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    assert "salary" in {v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED}


def test_what_a_renamed_column_reads_is_the_column_at_its_position(
    db: duckdb.DuckDBPyConnection,
) -> None:
    names = [c[0] for c in db.execute("DESCRIBE employees").fetchall()]
    assert names.index("salary") == 7
    renamed = db.execute("SELECT id FROM employees AS e(a, b, c, d, f, g, h, id)").description
    plain = db.execute("SELECT salary FROM employees").description
    assert renamed is not None and plain is not None and renamed[0][1] == plain[0][1]


@pytest.mark.parametrize(
    ("sql", "flagged"),
    [
        ("INSERT INTO departments VALUES (1);", True),  # DuckDB fills no defaults
        ("INSERT INTO departments (id, name) VALUES (1, 'a'), (2);", True),
        ("INSERT INTO departments (id) VALUES (1, 'a');", True),
        ("INSERT INTO departments (id, name) VALUES (1, 'a'), (2, 'b');", False),
        ("INSERT INTO departments (id) SELECT id FROM employees;", False),
    ],
)
def test_insert_widths_are_duckdbs(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, flagged: bool
) -> None:
    """The checker's VALUES and INSERT width rules flag what DuckDB refuses to prepare
    (unlike PostgreSQL, DuckDB gives missing columns no default)."""
    kinds = [v.kind for v in checker.check(sql, "admin")]
    assert (ViolationKind.COLUMN_COUNT in kinds) == flagged, kinds
    assert (prepares(db, sql) is not None) == flagged


def test_generated_columns_are_columns_no_insert_writes() -> None:
    """DuckDB leaves a generated column out of an INSERT without a column list, and
    ``*`` reads it; the snapshot flags it (``duckdb_columns().is_generated``), so the
    checker takes ``INSERT INTO t VALUES (1)`` (it flagged a column count) and a
    role granted ``a`` only may not read ``b``."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER, b INTEGER AS (a * 2))")
    snap = snapshot_connection(con)
    assert [(c.name, c.generated) for c in snap.tables[0].columns] == [("a", False), ("b", True)]
    checker = SemanticChecker.for_schema(snap, {"all": {"t": None}, "r": {"t": ["a"]}})
    for sql, kinds in (
        ("INSERT INTO t VALUES (1)", []),
        ("INSERT INTO t VALUES (1, 2)", ["column_count"]),
        ("UPDATE t SET b = DEFAULT", ["read_only_column"]),  # PostgreSQL takes it; DuckDB not
        ("SELECT * FROM t", []),
    ):
        assert sorted(v.kind.value for v in checker.check(sql, "all")) == kinds, sql
        assert (prepares(con, sql) is not None) == bool(kinds), sql
    assert [v.kind.value for v in checker.check("SELECT b FROM t", "r")] == ["column_not_granted"]


@pytest.mark.parametrize(
    ("sql", "flagged"),
    [
        ("WITH c AS (SELECT 1), C AS (SELECT 2) SELECT * FROM departments;", True),
        ("WITH c AS (SELECT 1), d AS (SELECT 2) SELECT * FROM departments;", False),
        ("SELECT sum(id) OVER w FROM departments WINDOW w AS (ORDER BY id), w AS (ORDER BY name);",
         True),
    ],
)  # fmt: skip
def test_duplicate_names_are_refused(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, flagged: bool
) -> None:
    kinds = [v.kind for v in checker.check(sql, "admin")]
    assert (ViolationKind.DUPLICATE_NAME in kinds) == flagged, kinds
    assert (prepares(db, sql) is not None) == flagged


def test_windows_are_duckdbs(db: duckdb.DuckDBPyConnection, checker: SemanticChecker) -> None:
    """An unknown window name is refused; an unused named window is never bound."""
    for unknown in (
        "SELECT sum(id) OVER x FROM departments;",
        "SELECT (SELECT sum(id) OVER w FROM departments LIMIT 1) FROM departments "
        "WINDOW w AS (ORDER BY id);",
    ):
        assert [v.kind for v in checker.check(unknown, "admin")] == [ViolationKind.MISUSED_WINDOW]
        assert prepares(db, unknown) is not None, unknown
    unused = "SELECT id FROM departments WINDOW w AS (ORDER BY nope);"
    assert checker.check(unused, "admin") == []
    assert prepares(db, unused) is None


@pytest.mark.parametrize(
    ("sql", "flagged"),
    [
        # LIMIT reads no enclosing query ("Correlated columns not supported in LIMIT")
        ("SELECT (SELECT name FROM departments LIMIT e.id) FROM employees e;", True),
        ("SELECT (SELECT name FROM departments LIMIT 1) FROM employees e;", False),
        # ORDER BY and GROUP BY do
        ("SELECT (SELECT name FROM departments ORDER BY e.salary LIMIT 1) FROM employees e;",
         False),
        # an aggregate over the enclosing query's columns is that query's
        ("SELECT id FROM employees e WHERE (SELECT max(e.salary) FROM departments) > 1;", True),
        ("SELECT id FROM employees e WHERE EXISTS (SELECT max(e.salary) FROM departments);",
         True),
        ("SELECT (SELECT max(e.salary) FROM departments) FROM employees e;", False),
        ("SELECT (SELECT 1 FROM departments WHERE max(e.salary) > 1) FROM employees e;", False),
        ("SELECT (SELECT 1 FROM departments WHERE max(budget) > 1) FROM employees e;", True),
        ("SELECT id FROM employees e WHERE (SELECT max(budget) FROM departments) > 1;", False),
        # arguments that read nothing but a SELECT: left where written (DuckDB's reading)
        ("SELECT id FROM employees e WHERE (SELECT max((SELECT e.salary)) FROM departments) > 1;",
         False),
    ],
)  # fmt: skip
def test_outer_references_are_duckdbs(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, flagged: bool
) -> None:
    """`Dialect.limit_reads_outer` and aggregate placement
    (grid_sql.call_rules.aggregate_placements), against DuckDB itself."""
    assert bool(checker.check(sql, "admin")) == flagged
    assert (prepares(db, sql) is not None) == flagged


def test_words_duckdb_refuses_as_a_bare_alias_are_no_free_name(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker
) -> None:
    """Every DuckDB key word that is no bare table alias (`FROM t w`, read as
    `w.c`) is out of GRID's free names, so GRID never reads it as one. SEMI was:
    `orders SEMI JOIN (...) AS x USING (id)` parsed as `orders AS semi JOIN`, the
    checker saw x's columns, and a bare `hired` read the enclosing query's
    denied employees.hired (a red team's, session 46); it is refused now."""
    words = [w for (w,) in db.execute("SELECT keyword_name FROM duckdb_keywords()").fetchall()]
    assert len(words) > 400
    no_alias = [w for w in words if prepares(db, f"SELECT {w}.id FROM employees {w};")]
    assert no_alias and sorted(set(no_alias) - DUCKDB.reserved_free_names) == []
    semi = (
        "SELECT id, (SELECT salary FROM departments SEMI JOIN (SELECT 1 AS salary, 1 AS id) "
        "AS x USING (id) LIMIT 1) AS leaked FROM employees;"
    )
    assert prepares(db, semi) is None  # DuckDB runs it, reading employees.salary
    with pytest.raises(StatementParseError):
        checker.check(semi, "clerk")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT first_name FROM employees WHERE EXISTS "
        "(SELECT count(*) AS salary FROM departments HAVING max(salary) > 150000);",
        "SELECT first_name FROM employees WHERE EXISTS (SELECT count(*) AS salary "
        "FROM departments HAVING count(*) FILTER (WHERE salary > 150000) > 0);",
        "SELECT first_name FROM employees, (SELECT count(*) AS salary FROM departments "
        "HAVING max(salary) > 150000) AS q;",
    ],
)
def test_having_aggregates_do_not_see_result_aliases(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    """DuckDB resolves the arguments (and FILTER) of an aggregate in HAVING
    without the SELECT's aliases: `salary` there is the enclosing query's
    employees.salary, which the checker read as the alias (a red team's,
    session 46; `Dialect.having_aggregates_see_aliases`)."""
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    assert ("employees", "salary") in {(v.table, v.column) for v in found}, found
    with duckdb.connect() as live:  # the alias is not what max() reads
        live.execute("CREATE TABLE e (salary INTEGER); INSERT INTO e VALUES (111111)")
        live.execute("CREATE TABLE d (id INTEGER); INSERT INTO d VALUES (7)")
        got = live.execute(
            "SELECT (SELECT count(*) AS salary FROM d HAVING max(salary) > 100000) FROM e"
        ).fetchall()
        assert got == [(1,)]


@pytest.mark.parametrize(
    "sql",
    [
        "WITH cte AS (SELECT id FROM departments) SELECT id, "
        "(WITH cte AS (SELECT * FROM cte) SELECT salary FROM cte LIMIT 1) FROM employees;",
        "WITH employees(id, salary) AS (SELECT id, salary FROM employees) "
        "SELECT id FROM employees WHERE salary > 0;",
        "WITH RECURSIVE employees(id, salary) AS (SELECT id, salary FROM employees) "
        "SELECT id FROM employees WHERE salary > 0;",
        "WITH c AS (SELECT id, salary FROM employees), "
        "employees AS (SELECT id, 0 AS salary FROM departments) SELECT * FROM c;",
    ],
)
def test_a_with_body_sees_only_the_common_tables_before_it(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    """DuckDB's WITH bodies see the common tables before them (RECURSIVE or
    not); their own name, or a later one's, is the one outside the WITH: here
    the table employees, read for its salary (the checker read the table being
    defined; a red team's, session 46; `Dialect.cte_visibility`)."""
    assert prepares(db, sql) is None
    found = checker.check(sql, "clerk")
    assert ("employees", "salary") in {(v.table, v.column) for v in found}, found


def test_an_inner_whole_row_comes_before_an_outer_column(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker
) -> None:
    """DuckDB resolves a bare name level by level: the FROM item `salary` of the
    subquery is its row (a struct), not employees.salary, so clerk may read it
    (`Dialect.whole_rows_after_columns` is False; PostgreSQL reads the column)."""
    sql = "SELECT (SELECT salary FROM departments AS salary LIMIT 1) FROM employees;"
    assert prepares(db, sql) is None and checker.check(sql, "clerk") == []
    with duckdb.connect() as live:
        live.execute("CREATE TABLE e (salary INTEGER); INSERT INTO e VALUES (111111)")
        live.execute("CREATE TABLE d (id INTEGER); INSERT INTO d VALUES (7)")
        row = live.execute("SELECT (SELECT salary FROM d AS salary) FROM e").fetchone()
        assert row == ({"id": 7},)


def test_a_bare_name_in_do_update_is_the_stored_rows(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker
) -> None:
    """DuckDB reads a bare column in ON CONFLICT ... DO UPDATE (SET values, WHERE)
    as the stored row's, `excluded.c` as the proposed row's
    (`Dialect.conflict_bare_names_target`). The checker called the bare name
    ambiguous (PostgreSQL's reading), refusing statements DuckDB runs; a role
    denied salary is now refused for reading it, not for an ambiguity."""
    upsert = (
        "INSERT INTO employees (id, first_name, last_name, salary) VALUES (1, 'a', 'b', 7) "
        "ON CONFLICT (id) DO UPDATE SET title = 'raised', salary = salary + 100 "
        "WHERE salary > 0;"
    )
    fine = "INSERT INTO employees (id, first_name, last_name) VALUES (1, 'a', 'b') " + (
        "ON CONFLICT (id) DO UPDATE SET title = title || excluded.first_name;"
    )
    assert prepares(db, upsert) is None and prepares(db, fine) is None
    assert checker.check(upsert, "admin") == [] and checker.check(fine, "clerk") == []
    refused = checker.check(upsert, "clerk")
    assert refused and {(v.kind, v.table, v.column) for v in refused} == {
        (ViolationKind.COLUMN_NOT_GRANTED, "employees", "salary")
    }
    with duckdb.connect() as live:  # the stored row is the one read
        live.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, y INTEGER)")
        live.execute("INSERT INTO t VALUES (1, 0)")
        live.execute("INSERT INTO t VALUES (1, 7) ON CONFLICT (id) DO UPDATE SET y = y + 100")
        live.execute("INSERT INTO t VALUES (1, 7) ON CONFLICT (id) DO UPDATE SET y = 1 WHERE y < 0")
        assert live.execute("SELECT y FROM t").fetchall() == [(100,)]


@pytest.mark.parametrize(
    ("sql", "flagged"),
    [
        ("SELECT 1 FROM departments, departments;", False),
        ("SELECT 1 FROM departments AS d, employees AS d;", False),
        ("SELECT * FROM departments, departments;", True),
        ("SELECT * FROM departments AS d, employees AS d;", True),
        ("SELECT * FROM departments AS d, employees AS e;", False),
        ("UPDATE employees SET title = 'x' FROM employees;", False),
    ],
)  # fmt: skip
def test_from_names_are_duckdbs(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, flagged: bool
) -> None:
    """Two tables of one name bind (`source_names_unique` is off), but `*` over
    them is ambiguous."""
    assert bool(checker.check(sql, "admin")) == flagged
    assert (prepares(db, sql) is not None) == flagged


@pytest.mark.parametrize(
    ("sql", "flagged"),
    [
        (
            "SELECT * FROM employees e JOIN (departments d JOIN salaries s "
            "ON e.id = s.employee_id) ON 1 = 1;",
            False,
        ),
        ("SELECT * FROM employees e, (departments d JOIN salaries s ON d.id = e.id);", False),
        (
            "SELECT * FROM employees e, departments d JOIN salaries s ON e.id = s.employee_id;",
            False,
        ),
        (
            "SELECT * FROM employees e JOIN departments d ON s.employee_id = e.id "
            "JOIN salaries s ON 1 = 1;",
            True,
        ),
        (
            "SELECT * FROM employees e JOIN departments d ON amount = 1 JOIN salaries s ON 1 = 1;",
            True,
        ),
    ],
)
def test_a_join_condition_sees_the_tables_joined_before_it(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str, flagged: bool
) -> None:
    """DuckDB binds a join condition against every table joined before it, those
    outside its parentheses (`nested_join_sees_outer`) and before a comma
    (`comma_binds_loosest` off) included, which SQLite and PostgreSQL refuse
    (grid-sql's test_nested_joins.py), and no table joined to its right."""
    assert bool(checker.check(sql, "admin")) == flagged
    assert (prepares(db, sql) is not None) == flagged


def test_star_calls_are_zero_argument_calls(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker
) -> None:
    """DuckDB reads ``f(*)`` as ``f()`` (SQLite's reading, not PostgreSQL's)."""
    sql = "SELECT now(*), random(*), row_number(*) OVER () FROM employees;"
    assert prepares(db, sql) is None
    assert checker.check(sql, "admin") == []


def measured_arities(db: duckdb.DuckDBPyConnection) -> tuple[tuple[str, int, int | None], ...]:
    """DuckDB's argument counts for the names of PostgreSQL's arity table that DuckDB
    has, derived as `grid_duckdb.dialect.FUNCTION_ARITIES` says."""
    from grid_sql.dialects.postgres import FUNCTION_ARITIES as PG_ARITIES

    listed: dict[str, list[tuple[str, int, bool]]] = {}
    query = "SELECT function_name, function_type, parameters, varargs FROM duckdb_functions()"
    for name, kind, parameters, varargs in db.execute(query).fetchall():
        listed.setdefault(name, []).append((kind, len(parameters), bool(varargs)))
    out: list[tuple[str, int, int | None]] = []
    for name, _, _ in PG_ARITIES:
        overloads = listed.get(name)
        if overloads is None:
            continue
        if any(kind == "window" for kind, _, _ in overloads):
            counts = {k for k in range(6) if prepares(db, window_call(name, k)) is None}
            unbounded = False
        else:
            counts = {n for _, n, _ in overloads}
            unbounded = any(v for _, _, v in overloads)
        out.append((name, min(counts), None if unbounded else max(counts)))
    return tuple(out)


def measured_gaps(db: duckdb.DuckDBPyConnection) -> tuple[tuple[str, int], ...]:
    """The counts within each bounded range of `measured_arities` that DuckDB takes
    for no overload of the function (window functions: probed as there)."""
    listed: dict[str, set[int]] = {}
    query = "SELECT function_name, parameters FROM duckdb_functions()"
    for name, parameters in db.execute(query).fetchall():
        listed.setdefault(name, set()).add(len(parameters))
    out: list[tuple[str, int]] = []
    for name, least, most in measured_arities(db):
        if most is None:
            continue
        for k in range(least, most + 1):
            if name in DUCKDB.window_functions:
                taken = prepares(db, window_call(name, k)) is None
            else:
                taken = k in listed[name]
            if not taken:
                out.append((name, k))
    return tuple(out)


def window_call(name: str, k: int) -> str:
    args = ", ".join(["id", *["1"] * (k - 1)][:k])
    return f"SELECT {name}({args}) OVER () FROM employees"


def test_arities_are_duckdbs(db: duckdb.DuckDBPyConnection) -> None:
    """The vendored tables are what the installed DuckDB says (regenerate them with
    `measured_arities` and `measured_gaps` when DuckDB changes), and they are
    DuckDB's, not PostgreSQL's."""
    from grid_sql.dialects.postgres import POSTGRES

    assert DUCKDB.function_arities == measured_arities(db)
    assert DUCKDB.function_arities != POSTGRES.function_arities
    assert DUCKDB.argument_gaps == measured_gaps(db)


KEYWORD_AGGREGATES = frozenset(("sum", "avg", "min", "max"))


def test_typed_calls_take_what_duckdb_takes(db: duckdb.DuckDBPyConnection) -> None:
    """The narrow DuckDB language (grid_sql.generation.typed_calls) writes a call of
    each function with argument bounds, with 0 to 4 ``NULL`` arguments, with and
    without OVER, exactly where DuckDB binds it. ``NULL`` binds to any parameter
    type, so "No function matches" says no overload has that many arguments; a call
    DuckDB refuses for another reason is not this test's. grid-spec's Language
    judges membership."""
    from grid_sql.generation import call_terminal, generation_language
    from grid_sql.policy import Role
    from grid_sql.projection import RoleProjection

    words = {"TABLE_NAME": [b"employees"], "COLUMN_NAME": [b"id", b"title"]}
    reader = Role("reader", frozenset({"SELECT"}), "*")
    full = RoleProjection.compile(reader, DUCKDB, words=words)
    narrow, typed, _ = generation_language("narrow", full.grammar, DUCKDB, words, "reader")
    language = Language(narrow.to_lark(), typed)
    refusals = (
        "No function matches the given name and argument types",
        "is not an aggregate function",
        "Window functions are not supported here",
    )
    checked = refused = 0
    for name in sorted(DUCKDB.arities):
        if name in KEYWORD_AGGREGATES or call_terminal(DUCKDB, name) is None:
            continue
        for n in range(5):
            for over in ("", " OVER ()"):
                sql = f"SELECT {name}({', '.join(['NULL'] * n)}){over} FROM employees;"
                error = prepares(db, sql)
                arity = error is not None and any(why in error for why in refusals)
                if error is not None and not arity:
                    continue  # refused for another reason (not this test's)
                checked += 1
                refused += arity
                assert language.in_language(sql.encode()) == (error is None), (sql, error)
    assert checked > 500 and refused > 400, (checked, refused)


def _call(name: str, k: int) -> str:
    if name in DUCKDB.window_functions:
        return window_call(name, k) + ";"
    return f"SELECT {name}({', '.join(['salary'] * k)}) FROM employees;"


@pytest.mark.parametrize(
    ("name", "k"),
    [
        *(
            (name, k)
            for name, least, most in FUNCTION_ARITIES
            for k in ([least - 1] if least else []) + ([most + 1] if most is not None else [])
        ),
        *ARGUMENT_GAPS,
    ],
)
def test_a_count_outside_the_range_is_flagged_and_refused(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, name: str, k: int
) -> None:
    """Every count just outside a function's range, and every gap inside one: DuckDB
    refuses the call, and the checker says wrong_argument_count (so no flag is a
    false one, and none is missed at the edges). SUM, AVG, MIN and MAX are keywords
    whose one argument the grammar fixes: other counts are outside the language."""
    sql = _call(name, k)
    assert prepares(db, sql) is not None, sql
    if name in KEYWORD_AGGREGATES:
        with pytest.raises(StatementParseError):
            checker.check(sql, "admin")
        return
    kinds = [v.kind for v in checker.check(sql, "admin")]
    assert ViolationKind.WRONG_ARGUMENT_COUNT in kinds, (sql, kinds)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT string_agg(title) FROM employees;",
        "SELECT make_date(id) FROM employees;",
        "SELECT lag(salary) OVER (), lead(salary, 1, 0) OVER () FROM employees;",
        "SELECT regexp_replace(title, 'a', 'b', 'g') FROM employees;",
    ],
)
def test_duckdb_only_counts_are_not_flagged(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    """Calls DuckDB runs though PostgreSQL would refuse their counts (the table used to
    be PostgreSQL's, and flagged each of these)."""
    assert prepares(db, sql) is None
    assert checker.check(sql, "admin") == []


# ---------------------------------------------------------------- the database backend


def test_backend_owns_duckdb_files_only(database: Path, tmp_path: Path) -> None:
    from grid_duckdb.database import DUCKDB_DATABASE, owns
    from grid_sql.database import database_for

    assert owns(database) and database_for(database) is DUCKDB_DATABASE
    other = tmp_path / "t.sqlite"
    other.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert not owns(other) and database_for(other).name == "sqlite"


def test_backend_runs_read_only_under_limits(database: Path, tmp_path: Path) -> None:
    import shutil

    from grid_duckdb.database import run_readonly
    from grid_sql.limits import LimitExceededError, Limits

    # A copy: DuckDB refuses a second connection, with another configuration, to a
    # file this process holds open (the module's `db` fixture).
    database = Path(shutil.copy(database, tmp_path / "copy.duckdb"))

    result = run_readonly(database, "FROM employees SELECT count(*);", Limits(), 5)
    assert len(result.columns) == 1 and result.count == 1
    with pytest.raises(duckdb.Error):
        run_readonly(database, "DELETE FROM employees;", Limits(), 5)
    with pytest.raises(duckdb.Error, match="disabled"):
        run_readonly(database, "SELECT * FROM read_csv('/etc/hostname');", Limits(), 5)
    with pytest.raises(LimitExceededError, match="max_rows"):
        run_readonly(database, "SELECT * FROM range(5000);", Limits(max_rows=100), 5)
    with pytest.raises(LimitExceededError, match="max_result_bytes"):
        run_readonly(database, "SELECT repeat('x', 5000);", Limits(max_result_bytes=1000), 5)
    with pytest.raises(LimitExceededError, match="wall_time"):
        run_readonly(
            database, "SELECT count(*) FROM range(10000000000000);", Limits(wall_time=0.2), 5
        )


def test_the_cli_reads_a_duckdb_file(database: Path, tmp_path: Path) -> None:
    """`grid policy init`, `grid check` and `grid compile` take a DuckDB file as
    `grid ask` does (grid_sql.database.database_for), not only SQLite files."""
    from grid_core import cli

    policy = tmp_path / "corpus.policy.toml"
    assert cli.main(["policy", "init", "--db", str(database), "--out", str(policy)]) == 0
    assert "version = 1" in policy.read_text(encoding="utf-8")
    given = ["--db", str(database), "--policy", str(policy)]
    assert cli.main(["check", "SELECT name FROM departments;", *given]) == 0
    assert cli.main(["check", "SELECT nope FROM departments;", *given]) == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sum(salary) FROM employees GROUP BY 1",
        "SELECT count(*) FROM employees GROUP BY (1)",
        "SELECT sum(salary) OVER () FROM employees GROUP BY 1",
        "SELECT id FROM employees GROUP BY 2",
        "SELECT id, sum(salary) FROM employees GROUP BY 1",
        "SELECT sum(salary) FROM employees GROUP BY +1",  # a constant in DuckDB
        "SELECT id FROM employees ORDER BY 2",
        "SELECT id, salary FROM employees ORDER BY 2, -1",
        "SELECT id FROM employees ORDER BY +2",
        "INSERT INTO employees (id) VALUES (max(1))",
        "INSERT INTO employees (id) VALUES (1), (2)",
        "VALUES (1), (sum(2))",
    ],
)
def test_positions_and_values_are_duckdbs(
    db: duckdb.DuckDBPyConnection, checker: SemanticChecker, sql: str
) -> None:
    """A GROUP BY or ORDER BY term that is a number names a result column, flagged
    exactly when DuckDB refuses it (an aggregate or a window there, a position out
    of range); an aggregate in a VALUES of several rows or an INSERT's VALUES too."""
    rules = {
        ViolationKind.MISUSED_AGGREGATE,
        ViolationKind.MISUSED_WINDOW,
        ViolationKind.COLUMN_COUNT,
    }
    flagged = [v for v in checker.analyze(sql.encode()).violations if v.kind in rules]
    assert bool(flagged) == (prepares(db, sql) is not None), (flagged, prepares(db, sql))


def test_values_and_duplicate_output_names_are_duckdbs() -> None:
    """DuckDB names a VALUES list's columns col0, col1, ... and a duplicate output
    name a_1: the checker used SQLite's column1 and a:1, so a NATURAL JOIN with a
    VALUES list compared a denied column named col0 unflagged (a red team's,
    session 45)."""
    db = duckdb.connect()
    db.execute("CREATE TABLE imp2 (id INTEGER, col0 INTEGER); INSERT INTO imp2 VALUES (1, 2000)")
    checker = SemanticChecker(
        {"imp2": ["id", "col0"]}, {"clerk": {"imp2": ["id"]}}, dialect="duckdb"
    )
    sql = "SELECT id FROM imp2 NATURAL JOIN (VALUES ({})) AS v"
    assert db.execute(sql.format(2000)).fetchall() == [(1,)]
    assert db.execute(sql.format(7)).fetchall() == []  # DuckDB compares imp2.col0
    found = checker.check(sql.format(1), "clerk")
    assert [v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED] == ["col0"]
    names = [d[0] for d in db.execute("SELECT * FROM (SELECT 1 AS a, 2 AS a) AS q").description]
    assert names == ["a", "a_1"]
