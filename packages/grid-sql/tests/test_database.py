"""Database backends (`grid_sql.database`): SQLite built in, plug-ins by file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.database import SQLITE_DATABASE, database_for
from grid_sql.limits import Limits
from grid_sql.schema import SchemaError


def test_a_sqlite_file_is_sqlites(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (a INTEGER)")
        db.execute("INSERT INTO t VALUES (1), (2)")
    db.close()
    database = database_for(path)
    assert database is SQLITE_DATABASE and database.dialect == "sqlite"
    assert database.snapshot(path).table_names == ("t",)
    result = database.run(path, "SELECT a FROM t ORDER BY a", Limits(), 1)
    assert (result.rows, result.count) == ([(1,)], 2)
    with pytest.raises(database.errors):
        database.run(path, "DELETE FROM t", Limits(), 1)


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="no such file"):
        database_for(tmp_path / "missing.db")


def test_a_file_no_plugin_owns_falls_to_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database")
    assert database_for(path) is SQLITE_DATABASE
    with pytest.raises(SchemaError):
        SQLITE_DATABASE.snapshot(path)
