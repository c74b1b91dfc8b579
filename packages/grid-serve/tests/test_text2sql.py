"""grid_serve.text2sql: what the model is shown, the checker verdict, read-only runs (no model)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_serve.text2sql import (
    ANSWER_PREFIX,
    chat_messages,
    checker_verdict,
    format_table,
    run_readonly,
    schema_ddl,
)
from grid_sql.checker import ViolationKind
from grid_sql.policy import PolicyBundle
from grid_sql.schema import SchemaSnapshot


def test_the_prompt_shows_granted_tables_and_columns_only(
    schema: SchemaSnapshot, policy: PolicyBundle
) -> None:
    clerk = schema_ddl(schema, policy.grants("clerk", schema))
    assert clerk.splitlines() == [
        "CREATE TABLE employees (id INTEGER, name TEXT, dept_id INTEGER);",
        "CREATE TABLE orders (id INTEGER, employee_id INTEGER, total REAL, placed TEXT);",
    ]
    admin = schema_ddl(schema, policy.grants("admin", schema))
    assert "salaries" in admin and "salaries" not in clerk and "hired" not in clerk
    user = chat_messages("How many?", clerk)[-1]
    assert user["role"] == "user" and clerk in user["content"] and "How many?" in user["content"]
    assert ANSWER_PREFIX.startswith("```")


@pytest.mark.parametrize(
    ("role", "sql", "kinds"),
    [
        pytest.param("analyst", "SELECT name FROM employees;", [], id="granted"),
        pytest.param(
            "clerk", "SELECT hired FROM employees;", [ViolationKind.COLUMN_NOT_GRANTED], id="column"
        ),
        pytest.param(
            "clerk", "SELECT * FROM employees;", [ViolationKind.COLUMN_NOT_GRANTED], id="star"
        ),
        pytest.param(
            "analyst", "SELECT budget FROM employees;", [ViolationKind.UNKNOWN_COLUMN], id="name"
        ),
    ],
)
def test_checker_verdict(
    schema: SchemaSnapshot, policy: PolicyBundle, role: str, sql: str, kinds: list[ViolationKind]
) -> None:
    assert [v.kind for v in checker_verdict(schema, policy.grants(role, schema), sql)] == kinds


def test_run_readonly_reads_and_never_writes(company_db: Path) -> None:
    columns, rows, more = run_readonly(company_db, "SELECT name FROM departments ORDER BY id;", 2)
    assert (columns, rows, more) == (["name"], [("Research",), ("Sales",)], True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        run_readonly(company_db, "DELETE FROM orders;")
    assert run_readonly(company_db, "SELECT count(*) FROM orders;")[1] == [(3,)]


def test_format_table() -> None:
    assert format_table(["id", "name"], [(1, "Ada"), (22, None)]).splitlines() == [
        "id | name",
        "---+-----",
        "1  | Ada",
        "22 | NULL",
    ]


def test_the_prompt_spells_hostile_names_as_one_quoted_name() -> None:
    """A table and columns whose names hold a semicolon, quotes and a comment
    marker, and a declared type that is SQL of its own: the prompt quotes each name
    as a statement must spell it and leaves the type out, so no line carries a
    second statement. Fails if a name is shown bare."""
    from grid_sql.policy import RoleGrants

    schema = SchemaSnapshot.from_sqlite_ddl(
        'CREATE TABLE "semi; DROP TABLE x" ("a""b" INTEGER, "c -- d" "TEXT); DROP TABLE y; --", '
        "ok VARCHAR(10));"
    )
    table = schema.tables[0].name
    grants = RoleGrants(
        role="r",
        verbs=frozenset({"select"}),
        banned_clauses=frozenset(),
        columns={table: ('a"b', "c -- d", "ok")},
        unrestricted=frozenset({table}),
        cte_names=(),
        schema_fingerprint=schema.fingerprint,
    )
    assert schema_ddl(schema, grants) == (
        'CREATE TABLE "semi; DROP TABLE x" ("a""b" INTEGER, "c -- d", ok VARCHAR(10));'
    )
