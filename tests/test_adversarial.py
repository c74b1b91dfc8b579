"""The adversarial suite, model-free: issue 15's attacks on ``grid check``, ``grid ask``
and the read-only run, each a case that states what must hold. A failing case is a leak.

What an attacker tried against the embedded default (issue 15), and what must now be
true, in four groups:

- **language** (:data:`OUTSIDE`, :data:`INSIDE`): statements the mask must never
  offer a role (a keyword read as an alias, ``SELECT *`` without FROM, SQLite's
  side doors ``sqlite_master``, pragmas, ``load_extension``, a function outside the
  role's grant, a second statement, a verb or table without grant) are outside the
  role's language L: :func:`grid_sql.cli.language_verdict`, the verdict ``grid
  check`` prints, over the role's projection and lexicon, which are exactly what
  its mask admits. Positive controls (granted statements, in L and prepared by
  SQLite) keep the group from passing vacuously.
- **execution** (:data:`LIMITED`): statements that run forever or allocate a
  gigabyte stop with :class:`~grid_sql.limits.LimitExceededError` naming the
  limit, under :func:`grid_sql.execute.run_readonly` (the run of ``grid ask``).
- **bad input** (:data:`BAD_INPUT`): ``grid check``, ``grid ask`` and ``grid
  policy init`` on inputs built to break them (a 100 KB statement or question,
  bytes that are not UTF-8, control bytes, a negative temperature, a database
  without a policy, ``tables = []``, a table named ``cte``, tables named like
  keywords, a table with an empty name): exit 2 with one line naming what is
  wrong, or the command works; never a traceback. ``grid ask`` is stopped after
  its validation (no model is loaded: the model cases are ``nox -s
  adversarial``, bench/adversarial.py).
- **process** (:func:`test_process_attacks`): the real ``grid`` executable with
  arguments that are not UTF-8 and a reader that closes the pipe.

Everything runs on grid-sql's example schema and policy (roles analyst, clerk,
admin, intern); about 20 s on the shared 2-core host.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import pytest

from grid_core.cli import main
from grid_serve import ask
from grid_serve.text2sql import example_database
from grid_sql.checker import SemanticChecker, StatementParseError
from grid_sql.cli import language_verdict
from grid_sql.dialects import SQLITE
from grid_sql.execute import run_readonly
from grid_sql.lexicon import SchemaLexicon
from grid_sql.limits import LimitExceededError, Limits
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection
from grid_sql.schema import example_schema

ROLES = ("analyst", "clerk", "admin", "intern")
EVERY = ROLES
NOT_ADMIN = ("analyst", "clerk", "intern")


@dataclass(frozen=True)
class Language:
    """The role's projection and lexicon: the language its mask admits."""

    projection: RoleProjection
    lexicon: SchemaLexicon

    def leaves(self, sql: str) -> int | None:
        """None when ``sql`` is in L; else the byte where it leaves (or its length)."""
        return language_verdict(self.projection, self.lexicon, SQLITE, sql.encode())


@cache
def language(role: str) -> Language:
    schema = example_schema()
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants(role, schema))
    projection = RoleProjection.compile(policy.role(role), SQLITE, words=lexicon.words)
    return Language(projection, lexicon)


# ================================================================ language

#: name -> (statement, the roles whose language must not hold it, what must hold).
OUTSIDE: dict[str, tuple[str, tuple[str, ...], str]] = {
    "union as an alias": (
        "SELECT name FROM departments union;", EVERY,
        "a keyword cut from a role's grammar is never read as an alias",
    ),
    "join as an alias": (
        "SELECT name FROM departments join;", EVERY, "JOIN is never an alias",
    ),
    "window as an alias": (
        "SELECT name FROM departments window;", EVERY, "WINDOW is never an alias",
    ),
    "star without FROM": ("SELECT * ;", EVERY, "SELECT * needs FROM (SQLite refuses it)"),
    "star without FROM, glued": ("SELECT *;", EVERY, "SELECT * needs FROM"),
    "keyword as a bare alias": ("SELECT 1 AS delete;", EVERY, "DELETE is no alias"),
    "keyword as a qualifier": (
        "SELECT DISTINCT.name FROM departments;", EVERY, "DISTINCT is no qualifier",
    ),
    "sqlite_master": ("SELECT * FROM sqlite_master;", EVERY, "SQLite's catalog is no table"),
    "sqlite_schema": ("SELECT name FROM sqlite_schema;", EVERY, "SQLite's catalog is no table"),
    "sqlite_master quoted": (
        'SELECT sql FROM "sqlite_master";', EVERY, "no quoting opens the catalog",
    ),
    "schema-qualified table": (
        "SELECT * FROM main.departments;", EVERY, "no schema qualifier reaches a table",
    ),
    "pragma statement": ("PRAGMA table_info(employees);", EVERY, "no PRAGMA statement"),
    "pragma function": (
        "SELECT * FROM pragma_table_info('employees');", EVERY, "no table-valued pragma",
    ),
    "load_extension": (
        "SELECT load_extension('/tmp/evil.so');", EVERY, "no function loads code",
    ),
    "readfile": ("SELECT readfile('/etc/passwd');", EVERY, "no function reads files"),
    "sqlite_version": ("SELECT sqlite_version();", EVERY, "only listed functions"),
    "attach": ("ATTACH DATABASE '/tmp/x.db' AS x;", EVERY, "no ATTACH"),
    "randomblob of a gigabyte": (
        "SELECT randomblob(1000000000);", EVERY,
        "the default function grant leaves out allocators over a size",
    ),
    "randomblob in another case": (
        "SELECT name, RandomBlob(1000) FROM departments;", EVERY,
        "a function outside the grant is out in every letter case",
    ),
    "zeroblob of a gigabyte": ("SELECT zeroblob(1000000000);", EVERY, "zeroblob is out"),
    "printf padding a gigabyte": (
        "SELECT printf('%.*c', 1000000000, 'x');", EVERY, "printf is out",
    ),
    "format padding a gigabyte": (
        "SELECT FORMAT('%.*c', 1000000000, 'x');", EVERY, "format (printf) is out",
    ),
    "two statements": (
        "SELECT 1; DELETE FROM employees;", EVERY, "one statement per sentence",
    ),
    "a statement after a comment": (
        "SELECT 1; /* */ SELECT 2;", EVERY, "nothing but blanks after the closing ;",
    ),
    "DDL": ("DROP TABLE employees;", EVERY, "no DDL"),
    "create": ("CREATE TABLE x (a);", EVERY, "no DDL"),
    "vacuum into": ("VACUUM INTO '/tmp/copy.db';", EVERY, "no VACUUM"),
    "delete without the verb": (
        "DELETE FROM orders;", NOT_ADMIN, "a verb the role lacks is out of its language",
    ),
    "update without the verb": (
        "UPDATE departments SET budget = 0;", ("analyst", "intern"), "no UPDATE for readers",
    ),
    "replace without delete": (
        "REPLACE INTO orders VALUES (9, 1, 1.0, '2024-01-01');", ("analyst", "clerk", "intern"),
        "REPLACE deletes: it needs DELETE",
    ),
    "insert or replace without delete": (
        "INSERT OR REPLACE INTO orders VALUES (9, 1, 1.0, '2024-01-01');", ("clerk",),
        "INSERT OR REPLACE deletes: it needs DELETE",
    ),
    "a table without grant": (
        "SELECT amount FROM salaries;", NOT_ADMIN, "salaries is granted to admin only",
    ),
    "a table without grant, quoted": (
        'SELECT * FROM "salaries";', NOT_ADMIN, "no quote form opens a table",
    ),
    "a table without grant, bracketed": (
        "SELECT * FROM [salaries];", NOT_ADMIN, "no quote form opens a table",
    ),
    "a table without grant, as a string": (
        "SELECT * FROM 'salaries';", NOT_ADMIN, "SQLite reads FROM 'x' as a table",
    ),
    "a table without grant in IN": (
        "SELECT 1 WHERE 1 IN salaries;", NOT_ADMIN, "x IN t reads the table",
    ),
    "a table without grant in a join": (
        "SELECT * FROM departments NATURAL JOIN salaries;", NOT_ADMIN, "no join reaches it",
    ),
    "recursive CTE for a role without CTEs": (
        "WITH RECURSIVE cte(id) AS (SELECT 1 UNION ALL SELECT id+1 FROM cte) "
        "SELECT max(id) FROM cte;", ("intern",), "intern bans cte and set operations",
    ),
    "a cross join for a role without joins": (
        "SELECT a.name FROM departments a CROSS JOIN departments b;", ("intern",),
        "intern bans join",
    ),
    "a union for a role without set operations": (
        "SELECT name FROM departments UNION SELECT name FROM departments;", ("intern",),
        "intern bans set operations",
    ),
}  # fmt: skip

#: name -> (statement, the roles whose language must hold it): positive controls.
INSIDE: dict[str, tuple[str, tuple[str, ...]]] = {
    "departments and budgets": (
        "SELECT name, budget FROM departments;", ("analyst", "admin", "intern"),
    ),
    "granted functions, any of three cases": (
        "SELECT upper(name), ROUND(budget / 3.0, 2), Length(name) FROM departments;",
        ("analyst", "admin", "intern"),
    ),
    "a star with FROM": ("SELECT * FROM orders;", ("clerk", "admin")),
    "a keyword column, quoted": ('SELECT 1 AS "delete";', EVERY),
    "the recursive CTE of the issue": (
        "WITH RECURSIVE cte(id) AS (SELECT 1 UNION ALL SELECT id+1 FROM cte) "
        "SELECT max(id) FROM cte;",
        ("analyst", "clerk", "admin"),
    ),
    "a 14-way self cross join": (
        "SELECT count(*) FROM " + ", ".join(f"employees e{i}" for i in range(14)) + ";",
        ("analyst", "clerk", "admin"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", OUTSIDE, ids=str)
def test_outside_the_language(name: str) -> None:
    sql, roles, must = OUTSIDE[name]
    for role in roles:
        leaves = language(role).leaves(sql)
        assert leaves is not None, f"LEAK ({role}): {must}: {sql!r} is in the role's language"


@pytest.mark.parametrize("name", INSIDE, ids=str)
def test_controls_inside_the_language_and_sqlite(name: str) -> None:
    """Granted statements are in the role's language, read by the checker's parser and
    prepared by SQLite: the OUTSIDE cases fail for the reason they state."""
    sql, roles = INSIDE[name]
    schema = example_schema()
    checker = SemanticChecker.for_schema(schema, example_policy(schema).column_grants(schema))
    for role in roles:
        assert language(role).leaves(sql) is None, f"{role}: {sql!r} should be in L"
        try:
            checker.check(sql.encode(), role)
        except StatementParseError as e:  # pragma: no cover - a failure's message
            pytest.fail(f"{role}: the checker cannot parse {sql!r}: {e}")
    db = sqlite3.connect(":memory:")
    db.executescript(example_ddl())
    db.execute("EXPLAIN " + sql)  # prepared, not run


@cache
def example_ddl() -> str:
    return resources.files("grid_sql.examples").joinpath("company.sql").read_text()


# ================================================================ execution limits

#: name -> (statement, the limit that must stop it, its limits).
FAST = Limits(wall_time=0.5)
LIMITED: dict[str, tuple[str, str, Limits]] = {
    "recursive CTE that never ends": (
        INSIDE["the recursive CTE of the issue"][0], "wall_time", FAST,
    ),
    "14-way cross join counting 268M rows": (
        INSIDE["a 14-way self cross join"][0], "wall_time", FAST,
    ),
    "6-way cross join returning 4,096 rows": (
        "SELECT e0.id FROM " + ", ".join(f"employees e{i}" for i in range(6)) + ";",
        "max_rows", FAST,
    ),
    "randomblob of a gigabyte": ("SELECT randomblob(1000000000);", "max_result_bytes", FAST),
    "zeroblob of a gigabyte": ("SELECT zeroblob(1000000000);", "max_result_bytes", FAST),
    "a string grown by nested replace": (
        "SELECT " + "replace(" * 7 + "'x'" + ", 'x', 'xxxxxxxxxx')" * 7 + ";",
        "max_result_bytes", FAST,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def company(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_database(tmp_path_factory.mktemp("company"))


@pytest.mark.parametrize("name", LIMITED, ids=str)
def test_execution_stops_at_a_named_limit(name: str, company: Path) -> None:
    """Each must stop with LimitExceededError naming the limit, within about its wall
    time (a statement that runs unbounded or allocates a gigabyte is a leak)."""
    sql, limit, limits = LIMITED[name]
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError) as info:
        run_readonly(company, sql, limits)
    elapsed = time.monotonic() - t0
    assert info.value.limit == limit, f"LEAK: {name}: stopped by {info.value}"
    assert f"limit {limit} = " in str(info.value)
    assert elapsed < limits.wall_time + 5, f"LEAK: {name}: ran {elapsed:.1f} s"


# ================================================================ bad input


class Reached(Exception):
    """``grid ask`` got past its validation (where it would load the model)."""


def _reached(*_: object, **__: object) -> None:
    raise Reached


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Databases and policies built to break the commands: name -> path."""
    root = tmp_path_factory.mktemp("adversarial")

    def database(name: str, ddl: str) -> str:
        path = root / f"{name}.sqlite"
        with sqlite3.connect(path) as db:
            db.executescript(ddl)
        db.close()
        return str(path)

    def policy(name: str, text: str) -> str:
        path = root / f"{name}.policy.toml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    one_role = 'version = 1\n[roles.reader]\nverbs = ["SELECT"]\n'
    return {
        "{company}": str(example_database(root)),
        "{cte-db}": database("cte", "CREATE TABLE cte (id INTEGER); CREATE TABLE t (a INTEGER);"),
        "{keywords-db}": database(
            "keywords", 'CREATE TABLE "select" (id INTEGER); CREATE TABLE "order" ("from" TEXT);'
        ),
        "{empty-name-db}": database("empty", 'CREATE TABLE "" (id INTEGER);'),
        "{functions-db}": database(
            "functions", "CREATE TABLE date (datetime TEXT, upper TEXT, randomblob INTEGER);"
        ),
        "{no-tables-db}": database("none", "PRAGMA user_version = 1;"),
        "{all}": policy("all", one_role + 'tables = "*"\n'),
        "{no-table}": policy("no-table", one_role + "tables = []\n"),
        "{no-column}": policy(
            "no-column",
            'version = 1\n[roles.u]\nverbs = ["UPDATE"]\ntables = ["orders"]\n'
            "columns.orders = []\n",
        ),
        "{no-verb}": policy("no-verb", 'version = 1\n[roles.r]\nverbs = []\ntables = "*"\n'),
        "{cte-listed}": policy("cte-listed", one_role + 'tables = "*"\ncte_names = ["cte"]\n'),
        "{load-extension}": policy(
            "load-extension", one_role + 'tables = "*"\nfunctions = ["load_extension"]\n'
        ),
        "{example-policy}": str(
            resources.files("grid_sql.examples").joinpath("company.policy.toml")
        ),
        "{out}": str(root / "out.policy.toml"),
    }


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``grid ask`` stops where it would import torch and load the model."""
    monkeypatch.setattr(ask, "require_framework", _reached)
    monkeypatch.setattr(ask, "load_framework", _reached)
    yield


HUGE = "x" * 100_001
INVALID_UTF8 = b"SELECT \xff\xfe;".decode("utf-8", "surrogateescape")  # as argv hands it over

#: name -> (argv, the exit status that must come (None: validation passed), what stderr
#: must say (exit 2) or stdout must hold (otherwise)).
BAD_INPUT: dict[str, tuple[list[str], int | None, str]] = {
    "check: a 100 KB statement": (
        ["check", HUGE], 2, "grid check reads at most 100000",
    ),
    "check: not UTF-8": (["check", INVALID_UTF8], 2, "not valid UTF-8"),
    "check: control bytes": (
        ["check", "SELECT \x00\x01 FROM employees;"], 1, "outside the language at byte 7",
    ),
    "check: 1,000 terms": (
        ["check", "SELECT " + "+".join(["1"] * 1000) + ";"], 0, "checker: accepted",
    ),
    "check: 300 nested SELECTs": (
        ["check", "SELECT " + "(SELECT " * 300 + "1" + ")" * 300 + ";"], 1,
        "nests too deeply for the checker to read",
    ),
    "check: union as an alias": (
        ["check", "SELECT name FROM departments union;", "--role", "intern"], 1,
        "checker: outside the language at byte 34",
    ),
    "check: --db without --policy": (
        ["check", "SELECT 1;", "--db", "{company}"], 2, "grid policy init --db",
    ),
    "check: a policy that does not fit the database": (
        ["check", "SELECT 1;", "--db", "{cte-db}", "--policy", "{example-policy}"], 2,
        "roles.analyst.tables[0]: no relation 'departments' in cte",
    ),
    "check: tables = []": (
        ["check", "SELECT 1;", "--policy", "{no-table}"], 2,
        "roles.reader.tables: no relation is granted",
    ),
    "check: verbs = []": (
        ["check", "SELECT 1;", "--policy", "{no-verb}"], 2, "roles.r.verbs: no verb is granted",
    ),
    "check: a role whose language is empty": (
        ["check", "SELECT 1;", "--policy", "{no-column}"], 2,
        "empty lexicon categories ['COLUMN_NAME'] leave no statement",
    ),
    "check: a function that loads code": (
        ["check", "SELECT 1;", "--policy", "{load-extension}"], 2,
        "the sqlite dialect has no function 'load_extension'",
    ),
    "check: a table named cte": (
        ["check", "SELECT * FROM cte;", "--db", "{cte-db}", "--policy", "{all}"], 0,
        "language: in the role's language",
    ),
    "check: cte listed beside a table named cte": (
        ["check", "SELECT 1;", "--db", "{cte-db}", "--policy", "{cte-listed}"], 2,
        "CTE name 'cte' is the name of relation 'cte'",
    ),
    "check: tables named like keywords": (
        ["check", 'SELECT "from" FROM "order";', "--db", "{keywords-db}", "--policy", "{all}"],
        0, "checker: accepted",
    ),
    "check: names that spell functions and types": (
        ["check", "SELECT datetime, upper(upper), randomblob FROM date;", "--db",
         "{functions-db}", "--policy", "{all}"], 0, "checker: accepted",
    ),
    "check: a keyword table unquoted": (
        ["check", "SELECT * FROM select;", "--db", "{keywords-db}", "--policy", "{all}"], 1,
        "language: leaves the role's language",
    ),
    "check: a table with an empty name": (
        ["check", "SELECT 1;", "--db", "{empty-name-db}", "--policy", "{all}"], 2,
        "a relation has an empty name",
    ),
    "check: a database without tables": (
        ["check", "SELECT 1;", "--db", "{no-tables-db}", "--policy", "{all}"], 2,
        "has no relation to grant",
    ),
    "policy init: a database without tables": (
        ["policy", "init", "--db", "{no-tables-db}", "--out", "{out}"], 2,
        "there is nothing to grant",
    ),
    "policy init: a table with an empty name": (
        ["policy", "init", "--db", "{empty-name-db}", "--out", "{out}"], 2,
        "a relation has an empty name",
    ),
    "ask: a 100 KB question": (["ask", HUGE], 2, "the question is"),
    "ask: binary bytes in the question": (["ask", "how many\x00\x01?"], 2, "control character"),
    "ask: not UTF-8": (["ask", INVALID_UTF8], 2, "not valid UTF-8"),
    "ask: a negative temperature": (["ask", "How many?", "--temperature", "-1"], 2, "temperature"),
    "ask: a budget of zero": (["ask", "How many?", "--max-tokens", "0"], 2, "max-tokens"),
    "ask: --db without --policy": (
        ["ask", "How many?", "--db", "{company}"], 2, "needs --policy FILE",
    ),
    "ask: a policy that does not fit the database": (
        ["ask", "How many?", "--db", "{cte-db}", "--policy", "{example-policy}"], 2,
        "no relation 'departments' in cte",
    ),
    "ask: tables = []": (
        ["ask", "How many?", "--policy", "{no-table}"], 2, "no relation is granted",
    ),
    "ask: a role whose language is empty": (
        ["ask", "How many?", "--policy", "{no-column}"], 2,
        "the projected language of role 'u' is empty",
    ),
    "ask: a table named cte": (
        ["ask", "How many?", "--db", "{cte-db}", "--policy", "{all}"], None, "",
    ),
    "ask: a negative row limit": (["ask", "How many?", "--limit-rows", "-5"], 2, "limit"),
}  # fmt: skip


@pytest.mark.parametrize("name", BAD_INPUT, ids=str)
def test_bad_input_is_one_line_never_a_traceback(
    name: str, files: dict[str, str], stopped: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, want, says = BAD_INPUT[name]
    argv = [files.get(a, a) for a in argv]
    try:
        code: int | None = main(argv)
    except Reached:
        code = None
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out, f"LEAK: {name}: {err}"
    assert code == want, f"LEAK: {name}: exit {code}, not {want}: {err.strip() or out}"
    if want == 2:
        assert err.count("\n") == 1 and out == "", f"LEAK: {name}: not one line: {err!r}"
        assert says in err, f"{name}: {err!r} does not say {says!r}"
    else:
        assert says in out, f"{name}: {out!r} does not hold {says!r}"


# ================================================================ the real process


def test_process_attacks(tmp_path: Path) -> None:
    """The ``grid`` executable: an argument that is not UTF-8 (as the operating system
    hands it over) is exit 2 in one line; output into a pipe its reader closed is exit
    141 with nothing on stderr. Either way, never a traceback."""
    code = "import sys; from grid_core.cli import main; sys.exit(main(sys.argv[1:]))"
    bad = subprocess.run(
        [sys.executable.encode(), b"-c", code.encode(), b"check", b"SELECT \xff;"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    err = bad.stderr.decode("utf-8", "replace")
    assert bad.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    argv = [sys.executable, "-c", code, "check", "SELECT * FROM employees", "--role", "clerk"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before anything is written
        stderr = proc.stderr.read().decode("utf-8", "replace")
        assert proc.wait(timeout=120) == 141 and stderr == "", stderr
