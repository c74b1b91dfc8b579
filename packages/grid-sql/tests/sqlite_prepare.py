"""SQLite at prepare time, for the statement-rule tests: an in-memory database
of given tables, and what ``EXPLAIN`` says of a statement."""

from __future__ import annotations

import sqlite3


def memory_db(*tables: str) -> sqlite3.Connection:
    """An in-memory database with the ``CREATE TABLE`` bodies ``tables``
    (``"t (a, b)"``)."""
    con = sqlite3.connect(":memory:")
    for table in tables:
        con.execute(f"CREATE TABLE {table}")
    return con


def sqlite_error(con: sqlite3.Connection, sql: str) -> str:
    """SQLite's prepare-time error for ``sql`` ("" when it prepares); its ``?``
    parameters bound to NULL."""
    try:
        con.execute("EXPLAIN " + sql, (None,) * sql.count("?")).fetchall()
    except sqlite3.Error as e:
        return str(e)
    return ""
