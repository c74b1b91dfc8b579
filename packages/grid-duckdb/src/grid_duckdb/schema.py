"""Schema snapshots from a live DuckDB catalog.

`snapshot` opens a DuckDB database file read-only (or takes an open
connection) and reads one schema's tables and views with their columns in
ordinal order from `duckdb_tables()`, `duckdb_views()` and `duckdb_columns()`:
the catalog DuckDB itself binds names against. Internal views (DuckDB's own
`information_schema` and `pg_catalog` ones) are left out. The file's macros,
in any of its schemas, are its routines (`SchemaSnapshot.routines`): DuckDB
binds a macro before the built-in function or operator it is named like. A
file that is not a DuckDB database, or a schema that does not exist, is a
`SchemaError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from grid_sql.schema import Column, Routine, SchemaError, SchemaSnapshot, Table

__all__ = ["snapshot", "snapshot_connection"]

_RELATIONS = """
SELECT table_name, 'table' FROM duckdb_tables()
WHERE schema_name = ? AND database_name = current_database()
UNION ALL
SELECT view_name, 'view' FROM duckdb_views()
WHERE schema_name = ? AND database_name = current_database() AND NOT internal
"""
# The macros of the file (in any of its schemas) and the connection's TEMP
# ones: DuckDB binds a macro before a built-in function or operator of its name
# (`lower`, `+`, `~~` for LIKE), so a statement may run one without naming it in
# full.
_MACROS = """
SELECT DISTINCT database_name, schema_name, function_name FROM duckdb_functions()
WHERE NOT internal AND database_name IN (current_database(), 'temp')
"""
_COLUMNS = """
SELECT column_name, data_type, is_generated FROM duckdb_columns()
WHERE schema_name = ? AND table_name = ? AND database_name = current_database()
ORDER BY column_index
"""


def snapshot(path: str | Path, schema: str = "main", name: str | None = None) -> SchemaSnapshot:
    """Snapshot one schema of the DuckDB database file ``path``, opened read-only."""
    p = Path(path)
    if not p.is_file():
        raise SchemaError(str(path), "no such file")
    try:
        db = duckdb.connect(str(p), read_only=True)
    except duckdb.Error as e:
        raise SchemaError(str(path), str(e).split("\n")[0]) from None
    try:
        return snapshot_connection(db, schema, p.stem if name is None else name, str(path))
    finally:
        db.close()


def snapshot_connection(
    db: duckdb.DuckDBPyConnection, schema: str = "main", name: str = "", source: str = "<duckdb>"
) -> SchemaSnapshot:
    """Snapshot one schema of an open DuckDB connection."""
    try:
        relations = db.execute(_RELATIONS, [schema, schema]).fetchall()
        if (
            not relations
            and not db.execute(
                "SELECT 1 FROM duckdb_schemas() WHERE schema_name = ?", [schema]
            ).fetchall()
        ):
            raise SchemaError(source, f"no schema named {schema!r}")
        tables = []
        for relation, kind in relations:
            rows = db.execute(_COLUMNS, [schema, relation]).fetchall()
            columns = tuple(Column(str(c), str(t), generated=bool(g)) for c, t, g in rows)
            tables.append(Table(str(relation), columns, "view" if kind == "view" else "table"))
        macros = db.execute(_MACROS).fetchall()
    except duckdb.Error as e:
        raise SchemaError(source, str(e).split("\n")[0]) from None
    routines = tuple(
        Routine(f"{'temp.' if d == 'temp' else ''}{s}.{m}", "macro", str(m)) for d, s, m in macros
    )
    return SchemaSnapshot("duckdb", tuple(tables), name, routines=routines)
