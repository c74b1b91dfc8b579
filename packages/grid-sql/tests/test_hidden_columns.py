"""Columns ``pragma_table_info`` does not list: generated columns and a virtual
table's hidden columns, against SQLite.

SQLite resolves ``"band"`` (a generated column) and ``"docs"`` (FTS5's column named
as its table: ``docs = 'q'`` is a full-text match over every column) by name.
A snapshot that left them out let the checker read them as SQLite's double-quoted
string fallback, so a role granted ``salaries.employee_id`` read ``band`` (computed
from the ungranted ``amount``) and a role granted ``docs.title`` searched ``body``.
Now the snapshot reads ``pragma_table_xinfo``, flags them, and the checker treats
them as columns: grants cover them; ``*``, NATURAL JOIN, ``x IN t`` and an INSERT
without a column list see them as SQLite does. Each statement is replayed on
SQLite: accepted iff it prepares (and reads only granted columns).
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_prepare import sqlite_error

from grid_sql.checker import SemanticChecker
from grid_sql.schema import Column, SchemaSnapshot

DDL = """
CREATE TABLE salaries (employee_id INTEGER, amount INTEGER, since TEXT,
                       band INTEGER GENERATED ALWAYS AS (amount / 1000) VIRTUAL,
                       grade INTEGER AS (amount / 50000) STORED);
CREATE VIRTUAL TABLE docs USING fts5(title, body);
"""


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.executescript(DDL)
    return con


@pytest.fixture(scope="module")
def schema() -> SchemaSnapshot:
    return SchemaSnapshot.from_sqlite_ddl(DDL)


def test_the_snapshot_lists_and_flags_them(schema: SchemaSnapshot) -> None:
    tables = {t.name: t.columns for t in schema.tables}
    assert tables["salaries"] == (
        Column("employee_id", "INTEGER"),
        Column("amount", "INTEGER"),
        Column("since", "TEXT"),
        Column("band", "INTEGER", generated=True),
        Column("grade", "INTEGER", generated=True),
    )
    assert tables["docs"] == (
        Column("title"),
        Column("body"),
        Column("docs", hidden=True),
        Column("rank", hidden=True),
    )
    again = SchemaSnapshot.from_json(schema.to_json())
    assert again == schema
    assert '"hidden": true' in schema.to_json() and '"generated": true' in schema.to_json()
    assert '{"name": "title", "type": ""}' in schema.to_json()  # no flags: as before


GRANTED = {"r": {"salaries": ["employee_id", "since"], "docs": ["title"]}}
EVERYTHING = {"all": {"salaries": None, "docs": None}}

# (statement, kinds for the role r, kinds with every column granted)
CASES = [
    ('SELECT employee_id, "band" FROM salaries', ["column_not_granted"], []),
    ("SELECT employee_id FROM salaries WHERE grade > 1", ["column_not_granted"], []),
    ("SELECT title FROM docs WHERE \"docs\" = 'body: layoffs'", ["column_not_granted"], []),
    ("SELECT title FROM docs ORDER BY rank", ["column_not_granted"], []),
    ("SELECT title FROM docs", [], []),
    ("SELECT * FROM docs", ["column_not_granted"], []),  # title and body, not docs or rank
    ("SELECT * FROM salaries", ["column_not_granted"], []),
    ("SELECT title FROM docs WHERE (title, body) IN (SELECT * FROM docs)",
     ["column_not_granted"], []),
    ("SELECT title FROM docs WHERE (title, body, rank) IN (SELECT * FROM docs)",
     ["column_count", "column_not_granted"], ["column_count"]),
    ("SELECT title FROM docs WHERE (title, body) IN docs", ["column_not_granted"], []),
    ("INSERT INTO docs VALUES ('a', 'b')", ["column_not_granted"], []),
    ("INSERT INTO docs VALUES ('a', 'b', 'c')",
     ["column_count", "column_not_granted"], ["column_count"]),
    ("INSERT INTO salaries VALUES (1, 2, 'x')", ["column_not_granted"], []),
    ("INSERT INTO salaries VALUES (1, 2, 'x', 4, 5)",
     ["column_count", "column_not_granted"], ["column_count"]),
    ("SELECT d.title FROM docs AS d NATURAL JOIN docs", ["column_not_granted"], []),
    # FTS5 runs a write to its hidden column as a command: 'delete-all' empties the table
    ("INSERT INTO docs (docs) VALUES ('delete-all')", ["read_only_column"], ["read_only_column"]),
    ("UPDATE salaries SET band = 1", ["read_only_column"], ["read_only_column"]),
    ("INSERT INTO salaries (employee_id, grade) VALUES (1, 2)",
     ["read_only_column"], ["read_only_column"]),
]  # fmt: skip


def kinds(checker: SemanticChecker, role: str, sql: str) -> list[str]:
    return sorted({v.kind.value for v in checker.check(sql, role)})


@pytest.mark.parametrize(("sql", "for_r", "for_all"), CASES, ids=[c[0] for c in CASES])
def test_grants_cover_them_and_shapes_follow_sqlite(
    schema: SchemaSnapshot, db: sqlite3.Connection, sql: str, for_r: list[str], for_all: list[str]
) -> None:
    granted = SemanticChecker.for_schema(schema, GRANTED)
    everything = SemanticChecker.for_schema(schema, EVERYTHING)
    assert kinds(granted, "r", sql) == for_r
    assert kinds(everything, "all", sql) == for_all
    refused = sqlite_error(db, sql)
    writes_a_command = "docs (docs)" in sql  # SQLite runs it: only GRID refuses it
    assert bool(refused) == (bool(for_all) and not writes_a_command), refused


def test_flags_name_tables_as_the_catalog_compares_names() -> None:
    """``hidden={"DOCS": ...}`` for table ``docs`` was dropped without a word (the
    write check lost), and a flagged table the schema lacks was no error, where
    ``rowid_aliases`` folds names and refuses an unknown table."""
    from grid_sql.checker import SchemaError, check_statement

    tables = {"docs": ["title", "body", "docs"]}
    grants = {"w": {"docs": None}}
    write = "UPDATE docs SET docs = 'delete-all';"
    for table in ("docs", "DOCS"):
        kinds = [
            v.kind for v in check_statement(write, tables, grants, "w", hidden={table: ["DOCS"]})
        ]
        assert [str(k) for k in kinds] == ["read_only_column"], table
    for flag in ("hidden", "generated"):
        with pytest.raises(SchemaError, match="nosuch"):
            SemanticChecker(tables, grants, **{flag: {"nosuch": ["x"]}})
        with pytest.raises(SchemaError, match="x"):
            SemanticChecker(tables, grants, **{flag: {"Docs": ["x"]}})
        with pytest.raises(SchemaError, match="DOCS"):  # one table twice: a flag was lost
            SemanticChecker(tables, grants, **{flag: {"docs": ["docs"], "DOCS": ["body"]}})
