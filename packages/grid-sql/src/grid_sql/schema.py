"""Schema snapshots: an immutable, fingerprinted picture of a database catalog.

Purpose: the input of the schema lexicon (layer L3 of DESIGN.md section 3) and
of policy validation. A :class:`SchemaSnapshot` lists the relations (tables and
views) of one database schema with their columns, in the database's own
spelling, and nothing else: no rows, no statistics.

Sources:

- a SQLite file, opened read-only (``mode=ro`` URI; the file is never written,
  so the shared Spider databases stay untouched): :meth:`SchemaSnapshot.from_sqlite`;
- SQLite DDL run in memory (``examples/company.sql``): :meth:`SchemaSnapshot.from_sqlite_ddl`;
- a PostgreSQL server through ``information_schema``, by running ``psql`` in a
  subprocess (no Python driver): :meth:`SchemaSnapshot.from_postgres`;
- a JSON snapshot file (format below): :meth:`SchemaSnapshot.from_json`.

Policy decisions:

- **Canonical order.** Relations are kept sorted by name (code point order);
  columns keep their ordinal order, which is catalog content (``INSERT INTO t
  VALUES (...)`` and ``SELECT *`` depend on it). So two snapshots of one catalog
  are equal and share a fingerprint whatever order the catalog listed them in.
- **Fingerprint** = :func:`grid_core.fingerprint.fingerprint` of the dialect and
  the relations (name, kind, columns as (name, declared type)). The snapshot's
  ``name`` is a label (a file stem, a database name) and is *not* fingerprinted:
  two databases with one catalog share every cached mask.
- **Names are compared the way the dialect compares identifiers**
  (``Dialect.identifier_case``): SQLite folds ASCII letters only (``Ä`` and
  ``ä`` are two names), PostgreSQL keeps catalog names exact (``"Foo"`` and
  ``foo`` are two relations). Two relations (or two columns of one relation)
  that the rule makes equal are a :class:`SchemaError`.
- SQLite's internal relations (``sqlite_%``) are left out; PostgreSQL
  snapshots cover one schema (default ``public``): the dialect grammars have no
  schema-qualified names. ``information_schema`` lists only what the connecting
  role may access, and no materialized views.

JSON format (``format`` is required and versioned; unknown keys are errors)::

    {
      "format": "grid.schema/1",
      "dialect": "sqlite",
      "name": "company",
      "tables": [
        {"name": "departments", "kind": "table",
         "columns": [{"name": "id", "type": "INTEGER"}, {"name": "name", "type": "TEXT"}]}
      ]
    }

``kind`` is ``"table"`` (default) or ``"view"``; a column's ``type`` is its
declared type as the catalog spells it (``""`` when none).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from grid_core import strict_json
from grid_core.errors import GridError
from grid_core.fingerprint import fingerprint
from grid_sql.dialect import IdentifierCase, ascii_lower
from grid_sql.dialects import get_dialect

__all__ = [
    "JSON_FORMAT",
    "Column",
    "RelationKind",
    "SchemaError",
    "SchemaSnapshot",
    "Table",
    "ascii_lower",
    "example_schema",
    "name_key",
]

JSON_FORMAT = "grid.schema/1"

RelationKind = Literal["table", "view"]


class SchemaError(GridError):
    """A catalog cannot be read, or a snapshot is malformed; ``source`` names where from."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"schema {source}: {reason}")


def name_key(name: str, case: IdentifierCase) -> str:
    """The key under which the dialect's identifier rule compares ``name``."""
    return ascii_lower(name) if case == "insensitive" else name


@dataclass(frozen=True)
class Column:
    """A column: its catalog name and declared type (``""`` when none).

    ``hidden``: a virtual table's hidden column (SQLite's FTS5 gives every table
    one named as the table, and ``rank``): read by name, as every column, but
    not part of ``*``, a NATURAL JOIN or an INSERT's implicit column list.
    ``generated``: computed from other columns (``GENERATED ALWAYS AS``): part
    of ``*``, not of an INSERT's implicit column list. Both are columns a
    statement can read, so grants cover them like any other.
    """

    name: str
    type: str = ""
    hidden: bool = False
    generated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The column's JSON object (the flags only when set)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.hidden:
            out["hidden"] = True
        if self.generated:
            out["generated"] = True
        return out


@dataclass(frozen=True)
class Table:
    """A relation: a table or a view, with its columns in ordinal order."""

    name: str
    columns: tuple[Column, ...]
    kind: RelationKind = "table"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class SchemaSnapshot:
    """One schema's relations and columns. Immutable; relations sorted by name.

    Invariants (``check_invariants``): relations sorted and unique under the
    dialect's identifier rule; columns unique within a relation.
    """

    dialect: str
    tables: tuple[Table, ...]
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", tuple(sorted(self.tables, key=lambda t: t.name)))
        case = self.identifier_case
        seen: dict[str, str] = {}
        for t in self.tables:
            if not t.name:
                raise SchemaError(self.label, "a relation has an empty name")
            for name in (t.name, *t.column_names):
                if not _is_text(name):
                    raise SchemaError(
                        self.label,
                        f"relation {t.name!r}: the name {name!r} is not valid Unicode text",
                    )
            key = name_key(t.name, case)
            if key in seen:
                raise SchemaError(
                    self.label,
                    f"relations {seen[key]!r} and {t.name!r} are one name in {case} case",
                )
            seen[key] = t.name
            cols: dict[str, str] = {}
            for c in t.columns:
                ck = name_key(c.name, case)
                if not c.name or ck in cols:
                    raise SchemaError(
                        self.label, f"relation {t.name!r}: empty or duplicate column {c.name!r}"
                    )
                cols[ck] = c.name

    # ------------------------------------------------------------ queries

    @property
    def label(self) -> str:
        return self.name or f"<{self.dialect} snapshot>"

    @property
    def identifier_case(self) -> IdentifierCase:
        """How the snapshot's database compares names (from its dialect)."""
        try:
            return get_dialect(self.dialect).identifier_case
        except GridError as e:
            raise SchemaError(self.label, str(e)) from None

    @cached_property
    def _by_key(self) -> dict[str, Table]:
        return {name_key(t.name, self.identifier_case): t for t in self.tables}

    def table(self, name: str) -> Table | None:
        """The relation the database resolves ``name`` to, or None."""
        return self._by_key.get(name_key(name, self.identifier_case))

    def column(self, table: Table, name: str) -> Column | None:
        """The column of ``table`` the database resolves ``name`` to, or None."""
        key = name_key(name, self.identifier_case)
        return next(
            (c for c in table.columns if name_key(c.name, self.identifier_case) == key), None
        )

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint(
            (
                "grid.schema.v1",
                self.dialect,
                [(t.name, t.kind, [(c.name, c.type) for c in t.columns]) for t in self.tables],
            )
        )

    def check_invariants(self) -> None:
        names = [t.name for t in self.tables]
        assert names == sorted(names), "relations are not in canonical order"
        keys = {name_key(n, self.identifier_case) for n in names}
        assert len(keys) == len(names), "two relations share a name"

    # ------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": JSON_FORMAT,
            "dialect": self.dialect,
            "name": self.name,
            "tables": [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "columns": [c.to_dict() for c in t.columns],
                }
                for t in self.tables
            ],
        }

    def to_json(self) -> str:
        """The snapshot as JSON text (stable: same snapshot, same text), one column a line."""

        def dump(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False)

        data = self.to_dict()
        head = [f"  {dump(k)}: {dump(data[k])}," for k in ("format", "dialect", "name")]
        tables = []
        for t in data["tables"]:
            cols = ",\n".join(f"      {dump(c)}" for c in t["columns"])
            body = f"[\n{cols}\n    ]" if cols else "[]"
            tables.append(
                f'    {{"name": {dump(t["name"])}, "kind": {dump(t["kind"])}, "columns": {body}}}'
            )
        listing = "[\n" + ",\n".join(tables) + "\n  ]" if tables else "[]"
        return "{\n" + "\n".join(head) + f'\n  "tables": {listing}\n}}\n'

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> SchemaSnapshot:
        """Read a snapshot from JSON text; raises :class:`SchemaError` naming ``source``."""
        try:
            data = strict_json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(source, f"line {e.lineno}: {e.msg}") from None
        except (strict_json.DuplicateKeyError, ValueError) as e:  # ValueError: a huge number
            raise SchemaError(source, str(e)) from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<json>") -> SchemaSnapshot:
        obj = _object(data, source, "snapshot", {"format", "dialect", "name", "tables"})
        if obj.get("format") != JSON_FORMAT:
            raise SchemaError(source, f"format must be {JSON_FORMAT!r}, not {obj.get('format')!r}")
        dialect = _string(obj.get("dialect"), source, "dialect")
        name = _string(obj.get("name", ""), source, "name")
        tables = []
        raw_tables = obj.get("tables")
        if not isinstance(raw_tables, list):
            raise SchemaError(source, "tables must be a list")
        for i, raw in enumerate(raw_tables):
            where = f"tables[{i}]"
            t = _object(raw, source, where, {"name", "kind", "columns"})
            kind = t.get("kind", "table")
            if kind not in ("table", "view"):
                raise SchemaError(source, f"{where}.kind must be 'table' or 'view', not {kind!r}")
            raw_cols = t.get("columns")
            if not isinstance(raw_cols, list):
                raise SchemaError(source, f"{where}.columns must be a list")
            cols = []
            for j, rc in enumerate(raw_cols):
                at = f"{where}.columns[{j}]"
                c = _object(rc, source, at, {"name", "type", "hidden", "generated"})
                flags = {k: c.get(k, False) for k in ("hidden", "generated")}
                for k, v in flags.items():
                    if not isinstance(v, bool):
                        raise SchemaError(source, f"{at}.{k} must be true or false, not {v!r}")
                cols.append(
                    Column(
                        _string(c.get("name"), source, f"{at}.name"),
                        _string(c.get("type", ""), source, f"{at}.type"),
                        **flags,
                    )
                )
            tables.append(Table(_string(t.get("name"), source, f"{where}.name"), tuple(cols), kind))
        return cls(dialect, tuple(tables), name)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SchemaSnapshot:
        """Read a JSON snapshot file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SchemaError(str(path), str(e)) from None
        return cls.from_json(text, str(path))

    # ------------------------------------------------------------ SQLite

    @classmethod
    def from_sqlite(cls, path: str | Path, name: str | None = None) -> SchemaSnapshot:
        """Snapshot a SQLite database file, opened read-only (never written)."""
        p = Path(path)
        if not p.is_file():
            raise SchemaError(str(path), "no such file")
        uri = p.resolve().as_uri() + "?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as e:
            raise SchemaError(str(path), str(e)) from None
        try:
            return cls._from_connection(db, str(path), p.stem if name is None else name)
        finally:
            db.close()

    @classmethod
    def from_sqlite_ddl(cls, ddl: str, name: str = "") -> SchemaSnapshot:
        """Run a SQLite script (DDL, and whatever else it holds) in memory and snapshot it."""
        db = sqlite3.connect(":memory:")
        try:
            try:
                db.executescript(ddl)
            except sqlite3.Error as e:
                raise SchemaError(name or "<ddl>", str(e)) from None
            return cls._from_connection(db, name or "<ddl>", name)
        finally:
            db.close()

    @classmethod
    def _from_connection(cls, db: sqlite3.Connection, source: str, name: str) -> SchemaSnapshot:
        try:
            rows = db.execute(
                "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            ).fetchall()
        except sqlite3.Error as e:
            raise SchemaError(source, str(e)) from None
        except UnicodeDecodeError as e:
            raise SchemaError(source, f"a relation's name is not UTF-8 ({e.reason})") from None
        tables = []
        for rel, kind in rows:
            # table_xinfo, not table_info: generated columns (hidden 2 and 3) and
            # virtual tables' hidden columns (1) are columns a statement can read.
            try:
                info = db.execute(
                    "SELECT name, type, hidden FROM pragma_table_xinfo(?) ORDER BY cid", (rel,)
                ).fetchall()
            except sqlite3.Error as e:
                raise SchemaError(source, f"relation {rel!r}: {e}") from None
            except UnicodeDecodeError as e:
                raise SchemaError(
                    source, f"relation {rel!r}: a name is not UTF-8 ({e.reason})"
                ) from None
            cols = tuple(
                Column(str(c), str(t or ""), hidden=h == 1, generated=h in (2, 3))
                for c, t, h in info
            )
            tables.append(Table(str(rel), cols, "view" if kind == "view" else "table"))
        return cls("sqlite", tuple(tables), name)

    # ------------------------------------------------------------ PostgreSQL

    @classmethod
    def from_postgres(
        cls,
        *,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        dbname: str | None = None,
        schema: str = "public",
        psql: str = "psql",
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
    ) -> SchemaSnapshot:
        """Snapshot one schema of a PostgreSQL database through ``information_schema``.

        Runs ``psql -X -At -F '\\t'`` (from ``PATH`` unless ``psql`` is a path);
        ``dbname`` may be a connection URI. A password comes the usual libpq way
        (``PGPASSWORD`` in ``env``, ``~/.pgpass``). Names travel hex-encoded, so a
        tab or newline inside a name cannot break the parse.
        """
        argv = [psql, "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1"]
        for flag, value in (("-h", host), ("-p", port), ("-U", user), ("-d", dbname)):
            if value is not None:
                argv += [flag, str(value)]
        argv += ["-c", _PG_QUERY.format(schema=schema.replace("'", "''"))]
        source = f"postgres:{dbname or ''}/{schema}"
        try:
            run = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=None if env is None else dict(env),
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SchemaError(source, f"cannot run psql: {e}") from None
        if run.returncode != 0:
            raise SchemaError(source, f"psql exited with {run.returncode}: {run.stderr.strip()}")
        return cls("postgres", _pg_tables(run.stdout.splitlines(), source), dbname or "")


# One row per (relation, column); a relation without columns has one row of blanks.
# A column is generated when computed (GENERATED ALWAYS AS (...) STORED) or an
# identity GENERATED ALWAYS: the server takes only DEFAULT for either.
_PG_QUERY = """\
SELECT encode(convert_to(t.table_name, 'UTF8'), 'hex'), t.table_type,
       coalesce(encode(convert_to(c.column_name, 'UTF8'), 'hex'), ''),
       coalesce(c.ordinal_position::text, ''),
       coalesce(encode(convert_to(c.data_type, 'UTF8'), 'hex'), ''),
       CASE WHEN c.is_generated = 'ALWAYS' OR c.identity_generation = 'ALWAYS'
            THEN 'g' ELSE '' END
FROM information_schema.tables t
LEFT JOIN information_schema.columns c
  ON c.table_catalog = t.table_catalog AND c.table_schema = t.table_schema
 AND c.table_name = t.table_name
WHERE t.table_schema = '{schema}' AND t.table_type IN ('BASE TABLE', 'VIEW', 'FOREIGN')"""


def _pg_tables(lines: Iterable[str], source: str) -> tuple[Table, ...]:
    rels: dict[str, tuple[RelationKind, list[tuple[int, Column]]]] = {}
    for line in lines:
        fields = line.split("\t")
        if len(fields) != 6:
            raise SchemaError(source, f"unexpected psql output line {line!r}")
        rel_hex, rel_type, col_hex, ordinal, type_hex, generated = fields
        rel = _unhex(rel_hex, source)
        kind: RelationKind = "view" if rel_type == "VIEW" else "table"
        _, cols = rels.setdefault(rel, (kind, []))
        if col_hex:
            column = Column(
                _unhex(col_hex, source), _unhex(type_hex, source), generated=generated == "g"
            )
            cols.append((int(ordinal), column))
    return tuple(
        Table(rel, tuple(c for _, c in sorted(cols, key=lambda p: p[0])), kind)
        for rel, (kind, cols) in rels.items()
    )


def _unhex(text: str, source: str) -> str:
    try:
        return bytes.fromhex(text).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise SchemaError(source, f"bad hex name {text!r} from psql") from None


def _object(data: Any, source: str, where: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise SchemaError(source, f"{where} must be an object")
    unknown = sorted(set(data) - keys)
    if unknown:
        raise SchemaError(source, f"{where}: unknown keys {unknown}")
    return data


def _is_text(name: str) -> bool:
    """``name`` is Unicode text: it has a UTF-8 spelling (no lone surrogate, which
    a JSON ``\\udXXX`` escape can give)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string(value: Any, source: str, where: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(source, f"{where} must be a string")
    if not _is_text(value):
        raise SchemaError(source, f"{where} is not valid Unicode text: {value!r}")
    return value


def example_schema() -> SchemaSnapshot:
    """The demo schema (``examples/company.sql``), run in memory."""
    ddl = resources.files("grid_sql.examples").joinpath("company.sql").read_text(encoding="utf-8")
    return SchemaSnapshot.from_sqlite_ddl(ddl, "company")
