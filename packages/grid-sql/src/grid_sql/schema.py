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

**Write effects** (optional table keys, written only when present; not in the
fingerprint, since no mask reads them): what the database itself does when a
statement writes the table, which :meth:`grid_sql.policy.PolicyBundle.validate`
holds against each write role's grants (docs/policy.md, "What the schema does
on a write"):

- ``"foreign_keys"``: the table's foreign keys whose ``ON DELETE`` or ``ON
  UPDATE`` action writes it (``CASCADE``, ``SET NULL``, ``SET DEFAULT``):
  ``{"columns": [...], "parent": "t", "parent_columns": [...], "on_delete":
  "CASCADE", "on_update": "NO ACTION"}``; keys without such an action are left
  out (they only refuse a write);
- ``"triggers"``: what runs statements the snapshot does not follow, ``{"name":
  "n", "event": "INSERT" | "UPDATE" | "DELETE", "columns": [...], "kind":
  ...}`` (``columns``: an ``UPDATE OF`` list, ``[]`` for any column). ``kind``
  is ``"trigger"`` (the default), ``"rule"`` (PostgreSQL), ``"function"`` (a
  user function a DEFAULT, CHECK, index, policy or domain of the table calls,
  PostgreSQL) or ``"outside"`` (a write the database makes to a relation the
  snapshot does not hold: a key of another schema's table with a writing
  action, an inheriting table or a view's base table of another schema, a
  foreign table's server, named ``remote``);
- ``"on_conflict_replace": [...]``: the columns of the table's ``UNIQUE`` and
  ``PRIMARY KEY`` constraints that resolve a conflict by ``REPLACE`` (SQLite):
  a plain ``INSERT``, or an ``UPDATE`` of one of them, may delete rows;
- ``"writes_through": [{"relation": "r", "verbs": "same" | "rows" | "all"}]``:
  other relations of the snapshot that a write to this one writes: ``same``
  (the same verb: a view's base table, PostgreSQL), ``rows`` (the same verb
  for UPDATE and DELETE: an inheriting table, PostgreSQL) or ``all`` (any
  verb: a partition, where an UPDATE may move a row; a virtual table's shadow
  table, SQLite).

**Routines** (top-level ``"routines"``, not in the fingerprint): the
user-defined code a statement may run by the names it writes
(:class:`Routine`: ``{"name": ..., "kind": ..., "word": ...}``), which
:meth:`grid_sql.policy.PolicyBundle.validate` holds against every role
(docs/policy.md, "Routines"). Written for a dialect whose databases store
routines (``Dialect.stores_routines``), ``[]`` when there are none; absent
there, the snapshot does not say (``routines`` is None) and every role is
refused against it.

A snapshot's top-level ``"write_effects": true`` says that its tables list
their write effects (every reader here does). A JSON snapshot without it (one
written before write effects) does not say, and a write role is refused
against it (``write_effects`` is False).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from grid_core import strict_json
from grid_core.errors import GridError
from grid_core.files import read_bounded
from grid_core.fingerprint import fingerprint
from grid_sql.dialect import Dialect, IdentifierCase, ascii_lower
from grid_sql.dialects import get_dialect
from grid_sql.dialects.postgres import BOUND_FUNCTIONS, BOUND_OPERATORS, BOUND_TYPES

__all__ = [
    "JSON_FORMAT",
    "Column",
    "ForeignKey",
    "RelationKind",
    "Routine",
    "SchemaError",
    "SchemaSnapshot",
    "Table",
    "Through",
    "Trigger",
    "ascii_lower",
    "example_schema",
    "name_key",
    "require_file",
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


WRITING_ACTIONS = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})

MAX_SNAPSHOT_BYTES = 256 << 20
"""The largest JSON snapshot file read (a catalog of tens of thousands of tables)."""


def require_file(path: str | Path) -> None:
    """Raise SchemaError unless ``path`` names a regular file (or a link to one), its
    reason saying what is there instead: no such file, a directory, or another kind
    of file (a device, a FIFO). Every ``--db`` is checked with it before a backend
    is chosen (:func:`grid_sql.database.database_for` says only "no such file")."""
    p = Path(path)
    if p.is_file():
        return
    if p.is_dir():
        reason = "is a directory, not a database file"
    elif p.exists():
        reason = "is not a regular file (a device, a FIFO, a socket)"
    else:
        reason = "no such file"
    raise SchemaError(str(path), reason)


"""Foreign-key actions that write the referencing table (``NO ACTION`` and
``RESTRICT`` only refuse the parent's write)."""

WriteEvent = Literal["INSERT", "UPDATE", "DELETE"]


@dataclass(frozen=True)
class ForeignKey:
    """A foreign key of the table that holds it (the child) with a writing action.

    ``columns`` of the child reference ``parent_columns`` of ``parent`` (the
    parent's primary key when the DDL names none). ``on_delete`` and
    ``on_update`` are the actions, upper case (``"CASCADE"``, ``"SET NULL"``,
    ``"SET DEFAULT"``, ``"RESTRICT"``, ``"NO ACTION"``); at least one is in
    :data:`WRITING_ACTIONS`.
    """

    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    on_delete: str = "NO ACTION"
    on_update: str = "NO ACTION"

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "parent": self.parent,
            "parent_columns": list(self.parent_columns),
            "on_delete": self.on_delete,
            "on_update": self.on_update,
        }


TriggerKind = Literal["trigger", "rule", "function", "outside"]
TRIGGER_KINDS: tuple[TriggerKind, ...] = ("trigger", "rule", "function", "outside")


@dataclass(frozen=True)
class Trigger:
    """Statements the database runs when ``event`` writes the table, which the
    snapshot does not follow (``kind``: a trigger, a PostgreSQL rule, a user
    function in a DEFAULT, CHECK, index, policy or domain, or a write to a
    relation outside the snapshot).

    ``columns``: an ``UPDATE OF`` list (catalog names), ``()`` for any column.
    A write that fires it is allowed only where the policy names it
    (``triggers`` of a role).
    """

    name: str
    event: WriteEvent
    columns: tuple[str, ...] = ()
    kind: TriggerKind = "trigger"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "event": self.event,
            "columns": list(self.columns),
        }
        if self.kind != "trigger":
            out["kind"] = self.kind
        return out


ThroughVerbs = Literal["same", "rows", "all"]
THROUGH_VERBS: tuple[ThroughVerbs, ...] = ("same", "rows", "all")


@dataclass(frozen=True)
class Through:
    """A relation a write to the table writes too: with the same verb (``same``:
    a view's base table), with the same verb for rows that exist (``rows``: an
    UPDATE or DELETE reaches an inheriting table's rows, an INSERT does not), or
    with any (``all``: a partition, a shadow table)."""

    relation: str
    verbs: ThroughVerbs

    def to_dict(self) -> dict[str, Any]:
        return {"relation": self.relation, "verbs": self.verbs}


RoutineKind = Literal["function", "operator", "cast", "type", "operator family", "macro"]
ROUTINE_KINDS: tuple[RoutineKind, ...] = (
    "function",
    "operator",
    "cast",
    "type",
    "operator family",
    "macro",
)


@dataclass(frozen=True, order=True)
class Routine:
    """User-defined code that a statement may run without naming it in full
    (``SchemaSnapshot.routines``). PostgreSQL: a function or aggregate named
    like a function the dialect calls, an operator named like one the grammar
    writes or looks up, a cast with a function, a type named like one of the
    grammar's type names or like a function (a one-argument call is a cast to
    it), an operator family a user made or added to (its
    support functions run for ORDER BY, DISTINCT, GROUP BY, UNION and index
    scans, whatever its operators are named). DuckDB: a macro, which DuckDB
    binds before a built-in of its name, operators included (``+``, ``~~``).

    ``name`` is the full name (``public.lower(integer)``,
    ``public.=(integer, numeric)``, ``CAST (integer AS mood)``,
    ``public.text``, ``public.varchar_ops USING btree``, ``main.lower``);
    ``word`` what a statement writes to reach it (``lower``, ``=``, ``text``;
    ``""`` for a cast or an operator family); ``extension`` the PostgreSQL
    extension it belongs to (``""``: none). A role's statements run it only
    where the policy names it (``routines`` of a role: the name, the word, or
    ``extension NAME``).
    """

    name: str
    kind: RoutineKind
    word: str = ""
    extension: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "word": self.word}
        if self.extension:
            out["extension"] = self.extension
        return out


@dataclass(frozen=True)
class Table:
    """A relation: a table or a view, with its columns in ordinal order.

    ``foreign_keys``, ``triggers``, ``replace_columns`` (JSON
    ``on_conflict_replace``) and ``writes_through`` are its write effects
    (module docstring); they are empty where the source has none (DuckDB has
    neither actions nor triggers) or does not say (see
    ``SchemaSnapshot.write_effects``).
    """

    name: str
    columns: tuple[Column, ...]
    kind: RelationKind = "table"
    foreign_keys: tuple[ForeignKey, ...] = ()
    triggers: tuple[Trigger, ...] = ()
    replace_columns: tuple[str, ...] = ()
    writes_through: tuple[Through, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def effects_dict(self) -> dict[str, Any]:
        """The write effects as JSON keys (only those present)."""
        out: dict[str, Any] = {}
        if self.foreign_keys:
            out["foreign_keys"] = [k.to_dict() for k in self.foreign_keys]
        if self.triggers:
            out["triggers"] = [t.to_dict() for t in self.triggers]
        if self.replace_columns:
            out["on_conflict_replace"] = list(self.replace_columns)
        if self.writes_through:
            out["writes_through"] = [w.to_dict() for w in self.writes_through]
        return out


@dataclass(frozen=True)
class SchemaSnapshot:
    """One schema's relations and columns. Immutable; relations sorted by name.

    Invariants (``check_invariants``): relations sorted and unique under the
    dialect's identifier rule; columns unique within a relation.
    """

    dialect: str
    tables: tuple[Table, ...]
    name: str = field(default="", compare=False)
    write_effects: bool = True
    """Whether the tables list their write effects (a JSON snapshot written
    before them does not say: False)."""
    routines: tuple[Routine, ...] | None = None
    """The user-defined routines a statement may reach by name (:class:`Routine`,
    sorted, by name first); None where the source does not say (the default, and a
    JSON snapshot written before they were read). A snapshot of a dialect whose
    databases store routines (``Dialect.stores_routines``) that does not say
    fails every role; for any other, None is read as ``()``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", tuple(sorted(self.tables, key=lambda t: t.name)))
        if self.routines is None and not self.stores_routines:
            object.__setattr__(self, "routines", ())
        if self.routines is not None:
            for r in self.routines:
                if not r.name or r.kind not in ROUTINE_KINDS:
                    raise SchemaError(
                        self.label,
                        f"routine {r.name!r}: an empty name or an unknown kind {r.kind!r} "
                        f"(one of {', '.join(ROUTINE_KINDS)})",
                    )
            object.__setattr__(self, "routines", tuple(sorted(set(self.routines))))
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
        for t in self.tables:
            self._check_effects(t)

    def _check_effects(self, t: Table) -> None:
        """Every name a write effect gives is a relation or column of this snapshot."""
        case = self.identifier_case

        def columns(of: Table, names: tuple[str, ...], what: str) -> None:
            known = {name_key(c, case) for c in of.column_names}
            for c in names:
                if name_key(c, case) not in known:
                    raise SchemaError(
                        self.label,
                        f"relation {t.name!r}: {what} names no column {c!r} of {of.name!r}",
                    )

        for k in t.foreign_keys:
            parent = self._by_key.get(name_key(k.parent, case))
            if parent is None:
                raise SchemaError(
                    self.label,
                    f"relation {t.name!r}: a foreign key references no relation {k.parent!r}",
                )
            if not k.columns or len(k.columns) != len(k.parent_columns):
                raise SchemaError(
                    self.label,
                    f"relation {t.name!r}: a foreign key to {k.parent!r} pairs "
                    f"{len(k.columns)} columns with {len(k.parent_columns)}",
                )
            columns(t, k.columns, "a foreign key")
            columns(parent, k.parent_columns, "a foreign key")
            for action in (k.on_delete, k.on_update):
                if action not in _ACTIONS:
                    raise SchemaError(
                        self.label,
                        f"relation {t.name!r}: unknown foreign-key action {action!r} "
                        f"(one of {', '.join(sorted(_ACTIONS))})",
                    )
        for trigger in t.triggers:
            if trigger.event not in ("INSERT", "UPDATE", "DELETE"):
                raise SchemaError(
                    self.label,
                    f"relation {t.name!r}: trigger {trigger.name!r} has no event INSERT, "
                    f"UPDATE or DELETE ({trigger.event!r})",
                )
            if trigger.kind not in TRIGGER_KINDS:
                raise SchemaError(
                    self.label,
                    f"relation {t.name!r}: trigger {trigger.name!r} has an unknown kind "
                    f"{trigger.kind!r} (one of {', '.join(TRIGGER_KINDS)})",
                )
            columns(t, trigger.columns, f"trigger {trigger.name!r}")
        columns(t, t.replace_columns, "on_conflict_replace")
        for through in t.writes_through:
            if (
                name_key(through.relation, case) not in self._by_key
                or through.verbs not in THROUGH_VERBS
            ):
                raise SchemaError(
                    self.label,
                    f"relation {t.name!r}: writes_through names no relation {through.relation!r} "
                    f"or verbs {through.verbs!r} is not one of {', '.join(THROUGH_VERBS)}",
                )

    # ------------------------------------------------------------ queries

    @property
    def label(self) -> str:
        return self.name or f"<{self.dialect} snapshot>"

    def _dialect(self) -> Dialect:
        try:
            return get_dialect(self.dialect)
        except GridError as e:
            raise SchemaError(self.label, str(e)) from None

    @property
    def identifier_case(self) -> IdentifierCase:
        """How the snapshot's database compares names (from its dialect)."""
        return self._dialect().identifier_case

    @property
    def stores_routines(self) -> bool:
        """Whether the snapshot's database may store routines (from its dialect)."""
        return self._dialect().stores_routines

    @cached_property
    def _by_key(self) -> dict[str, Table]:
        return {name_key(t.name, self.identifier_case): t for t in self.tables}

    def table(self, name: str) -> Table | None:
        """The relation the database resolves ``name`` to, or None."""
        return self._by_key.get(name_key(name, self.identifier_case))

    @cached_property
    def _referencing(self) -> dict[str, tuple[tuple[Table, ForeignKey], ...]]:
        out: dict[str, list[tuple[Table, ForeignKey]]] = {}
        for child in self.tables:
            for key in child.foreign_keys:
                out.setdefault(name_key(key.parent, self.identifier_case), []).append((child, key))
        return {parent: tuple(keys) for parent, keys in out.items()}

    def keys_to(self, table: Table) -> tuple[tuple[Table, ForeignKey], ...]:
        """The foreign keys that reference ``table``, each with the table holding it
        (snapshot order)."""
        return self._referencing.get(name_key(table.name, self.identifier_case), ())

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
        head: dict[str, Any] = {"format": JSON_FORMAT, "dialect": self.dialect, "name": self.name}
        if self.write_effects:
            head["write_effects"] = True
        if self.routines is not None and (self.routines or self.stores_routines):
            head["routines"] = [r.to_dict() for r in self.routines]
        return {
            **head,
            "tables": [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "columns": [c.to_dict() for c in t.columns],
                    **t.effects_dict(),
                }
                for t in self.tables
            ],
        }

    def to_json(self) -> str:
        """The snapshot as JSON text (stable: same snapshot, same text), one column a line."""

        def dump(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False)

        data = self.to_dict()
        head = [
            f"  {dump(k)}: {dump(data[k])},"
            for k in ("format", "dialect", "name", "write_effects")
            if k in data
        ]
        if "routines" in data:
            listed = ",\n".join(f"    {dump(r)}" for r in data["routines"])
            head.append(f'  "routines": [\n{listed}\n  ],' if listed else '  "routines": [],')
        tables = []
        for t in data["tables"]:
            cols = ",\n".join(f"      {dump(c)}" for c in t["columns"])
            body = f"[\n{cols}\n    ]" if cols else "[]"
            effects = "".join(f", {dump(k)}: {dump(t[k])}" for k in _EFFECT_KEYS if k in t)
            tables.append(
                f'    {{"name": {dump(t["name"])}, "kind": {dump(t["kind"])}, '
                f'"columns": {body}{effects}}}'
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
        except RecursionError:
            raise SchemaError(source, "it nests too deeply to be read") from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<json>") -> SchemaSnapshot:
        obj = _object(
            data,
            source,
            "snapshot",
            {"format", "dialect", "name", "tables", "write_effects", "routines"},
        )
        if obj.get("format") != JSON_FORMAT:
            raise SchemaError(source, f"format must be {JSON_FORMAT!r}, not {obj.get('format')!r}")
        dialect = _string(obj.get("dialect"), source, "dialect")
        name = _string(obj.get("name", ""), source, "name")
        effects = obj.get("write_effects", False)
        if not isinstance(effects, bool):
            raise SchemaError(source, f"write_effects must be true or false, not {effects!r}")
        tables = []
        raw_tables = obj.get("tables")
        if not isinstance(raw_tables, list):
            raise SchemaError(source, "tables must be a list")
        for i, raw in enumerate(raw_tables):
            where = f"tables[{i}]"
            t = _object(raw, source, where, {"name", "kind", "columns", *_EFFECT_KEYS})
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
            tables.append(
                Table(
                    _string(t.get("name"), source, f"{where}.name"),
                    tuple(cols),
                    kind,
                    *_effects(t, source, where),
                )
            )
        return cls(dialect, tuple(tables), name, effects, _routines(obj, source))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SchemaSnapshot:
        """Read a JSON snapshot file."""
        try:
            text = read_bounded(path, MAX_SNAPSHOT_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise SchemaError(str(path), str(e)) from None
        return cls.from_json(text, str(path))

    # ------------------------------------------------------------ SQLite

    @classmethod
    def from_sqlite(cls, path: str | Path, name: str | None = None) -> SchemaSnapshot:
        """Snapshot a SQLite database file, opened read-only (never written)."""
        p = Path(path)
        require_file(p)
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
        try:
            shadows = _sqlite_shadows(db)
        except sqlite3.Error as e:
            raise SchemaError(source, str(e)) from None
        tables = []
        for rel, kind in rows:
            # table_xinfo, not table_info: generated columns (hidden 2 and 3) and
            # virtual tables' hidden columns (1) are columns a statement can read.
            try:
                info = db.execute(
                    "SELECT name, type, hidden FROM pragma_table_xinfo(?) ORDER BY cid", (rel,)
                ).fetchall()
                effects = _sqlite_effects(db, str(rel), [str(c) for c, _, _ in info])
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
            through = tuple(Through(shadow, "all") for shadow in shadows.get(str(rel), ()))
            tables.append(
                Table(str(rel), cols, "view" if kind == "view" else "table", *effects, through)
            )
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
        quoted = schema.replace("'", "''")
        for query in (_PG_QUERY, _PG_EFFECTS, _PG_CALLS):
            argv += ["-c", query.format(schema=quoted)]
        argv += ["-c", _PG_ROUTINES]
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
        tables, routines = _pg_tables(run.stdout.splitlines(), source, schema)
        return cls("postgres", tables, dbname or "", routines=routines)


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


def _hex(expr: str) -> str:
    return f"encode(convert_to({expr}, 'UTF8'), 'hex')"


def _names_of(key: str, relation: str) -> str:
    """SQL: the hex names of attribute numbers ``key`` (an array) of ``relation``."""
    return (
        f"(SELECT string_agg({_hex('a.attname')}, ',' ORDER BY k.i) "
        f"FROM unnest({key}) WITH ORDINALITY k(n, i) "
        f"JOIN pg_attribute a ON a.attrelid = {relation} AND a.attnum = k.n)"
    )


# One row of 9 fields per write effect, tagged (`fk`, `tg`, `ru`, `in`, `vw`, `fn`: not
# hex, so these rows never read as relation rows). The relation written is in the
# schema; what it reaches may be in another (its schema's name comes with it).
_PG_EFFECTS = f"""\
SELECT 'fk', {_hex("cn.nspname")}, {_hex("c.relname")}, {_hex("p.relname")},
       {_hex("con.conname")}, con.confdeltype::text, con.confupdtype::text,
       {_names_of("con.conkey", "con.conrelid")}, {_names_of("con.confkey", "con.confrelid")}
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace
JOIN pg_class p ON p.oid = con.confrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace
WHERE con.contype = 'f' AND pn.nspname = '{{schema}}'
  AND (con.confdeltype IN ('c', 'n', 'd') OR con.confupdtype IN ('c', 'n', 'd'))
UNION ALL
SELECT 'tg', {_hex("c.relname")}, {_hex("t.tgname")}, t.tgtype::text,
       coalesce({_names_of("t.tgattr::int2[]", "t.tgrelid")}, ''), '', '', '', ''
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT t.tgisinternal AND n.nspname = '{{schema}}'
UNION ALL
SELECT 'ru', {_hex("c.relname")}, {_hex("r.rulename")}, r.ev_type::text, '', '', '', '', ''
FROM pg_rewrite r
JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE r.rulename <> '_RETURN' AND r.ev_type IN ('2', '3', '4') AND n.nspname = '{{schema}}'
UNION ALL
SELECT 'in', {_hex("p.relname")}, {_hex("cn.nspname")}, {_hex("c.relname")},
       p.relkind::text, '', '', '', ''
FROM pg_inherits i
JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace pn ON pn.oid = p.relnamespace
JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace
WHERE pn.nspname = '{{schema}}' AND c.relkind IN ('r', 'p', 'f')
UNION ALL
SELECT DISTINCT 'vw', {_hex("v.relname")}, {_hex("bn.nspname")}, {_hex("b.relname")},
       '', '', '', '', ''
FROM pg_rewrite r
JOIN pg_class v ON v.oid = r.ev_class AND v.relkind = 'v'
JOIN pg_namespace vn ON vn.oid = v.relnamespace
JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
 AND d.refclassid = 'pg_class'::regclass
JOIN pg_class b ON b.oid = d.refobjid AND b.oid <> v.oid AND b.relkind IN ('r', 'p', 'v', 'f')
JOIN pg_namespace bn ON bn.oid = b.relnamespace
WHERE r.rulename = '_RETURN' AND vn.nspname = '{{schema}}'"""

# The functions a write to a relation of the schema may call: one `fn` row each (the
# same 9 fields). From the relation, pg_depend is followed to what it is made of
# (what depends on it automatically or internally: its defaults, constraints,
# indexes, partitions, policies, a view's query, a domain's constraints, an
# operator family's functions), to the keys that reference it and their tables
# (a DELETE or key UPDATE checks the child through the key's operators and the
# child's indexes; from the written relation only: a relation read elsewhere
# checks no key), and to what all those use (types, operators, casts,
# functions, the relations and views a policy reads, ...). Not followed: a
# trigger (read as such), a key's parent (its actions are read as such), a
# relation's own relation dependencies (a partition's parent, an index's table:
# back where the walk came from) and partition dependencies (`P`, `S`: a
# partition's constraint on the parent's, and from there every partition), and
# the start's own view query's base relations (written through). A function is
# kept when a user made it (its oid past the built-in range) or when it is a
# built-in with an effect past the row:
# a volatile one but the few that only make values (`nextval`, `random`, ...),
# or one that reads what the role may not (`table_to_xml`, server files).
# Built-ins leave no pg_depend row, so the node trees of the expressions
# reached are read for them. `via` is how the first step left the relation:
# `row` for a default or a CHECK (INSERT and UPDATE), else `any` (an index, a
# type's functions, a policy, a view's query, a referencing key: every write).
# No backslash in a string here: `standard_conforming_strings = off` reads one.
_PG_CALLS = """\
WITH RECURSIVE
rels AS (
  SELECT c.oid AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = '{schema}' AND c.relkind IN ('r', 'p', 'v', 'f', 'm')
),
edges(fc, fo, tc, tobj, label, owner) AS (
  SELECT d.refclassid, d.refobjid, d.classid, d.objid,
         CASE WHEN d.classid = 'pg_attrdef'::regclass
                OR (d.classid = 'pg_constraint'::regclass
                    AND EXISTS (SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid
                                AND k.contype = 'c'))
              THEN 'row' ELSE 'any' END, 0::oid
  FROM pg_depend d
  WHERE d.deptype IN ('a', 'i')
    AND d.classid NOT IN ('pg_trigger'::regclass, 'pg_rewrite'::regclass)
  UNION
  SELECT 'pg_class'::regclass, r.ev_class, 'pg_rewrite'::regclass, r.oid, 'any', 0::oid
  FROM pg_rewrite r WHERE r.rulename = '_RETURN'
  UNION
  SELECT 'pg_class'::regclass, k.confrelid, 'pg_constraint'::regclass, k.oid, 'key', 0::oid
  FROM pg_constraint k WHERE k.contype = 'f'
  UNION
  SELECT d.classid, d.objid, d.refclassid, d.refobjid, 'any',
         CASE WHEN d.classid = 'pg_rewrite'::regclass
              THEN (SELECT r.ev_class FROM pg_rewrite r WHERE r.oid = d.objid) ELSE 0::oid END
  FROM pg_depend d
  WHERE d.classid <> 'pg_trigger'::regclass AND d.deptype NOT IN ('P', 'S')
    AND NOT (d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass)
    AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE d.classid = 'pg_constraint'::regclass
                    AND k.oid = d.objid AND k.contype = 'f'
                    AND d.refobjid IN (k.confrelid, k.conindid))
),
reach(rel, via, c, o) AS (
  SELECT rel, 'any', 'pg_class'::regclass, rel FROM rels
  UNION
  SELECT r.rel,
         CASE WHEN r.c = 'pg_class'::regclass AND r.o = r.rel
              THEN replace(e.label, 'key', 'any') ELSE r.via END,
         e.tc, e.tobj
  FROM reach r JOIN edges e ON e.fc = r.c AND e.fo = r.o AND e.owner <> r.rel
   AND (e.label <> 'key' OR r.o = r.rel)
),
trees(c, o, tree) AS (
  SELECT 'pg_attrdef'::regclass, oid, adbin::text FROM pg_attrdef
  UNION ALL
  SELECT 'pg_constraint'::regclass, oid, conbin::text FROM pg_constraint WHERE conbin IS NOT NULL
  UNION ALL
  SELECT 'pg_policy'::regclass, oid, coalesce(polqual::text, '') || coalesce(polwithcheck::text, '')
  FROM pg_policy
  UNION ALL
  SELECT 'pg_rewrite'::regclass, oid, ev_action::text || coalesce(ev_qual::text, '') FROM pg_rewrite
  UNION ALL
  SELECT 'pg_type'::regclass, oid, typdefaultbin::text FROM pg_type WHERE typdefaultbin IS NOT NULL
  UNION ALL
  SELECT 'pg_class'::regclass, indexrelid,
         coalesce(indexprs::text, '') || coalesce(indpred::text, '')
  FROM pg_index
  UNION ALL
  SELECT 'pg_class'::regclass, partrelid, coalesce(partexprs::text, '') FROM pg_partitioned_table
),
called(rel, via, fn) AS (
  SELECT r.rel, r.via, r.o FROM reach r WHERE r.c = 'pg_proc'::regclass AND r.o >= 16384
  UNION
  SELECT r.rel, r.via, m[1]::oid
  FROM reach r JOIN trees t ON t.c = r.c AND t.o = r.o,
       regexp_matches(t.tree, ':(?:funcid|opfuncid) ([0-9]+)', 'g') m
)
SELECT DISTINCT 'fn', encode(convert_to(c.relname, 'UTF8'), 'hex'),
       encode(convert_to(p.pronamespace::regnamespace::text || '.' || p.proname || '('
                         || pg_get_function_identity_arguments(p.oid) || ')', 'UTF8'), 'hex'),
       k.via, '', '', '', '', ''
FROM called k JOIN pg_proc p ON p.oid = k.fn JOIN pg_class c ON c.oid = k.rel
WHERE p.oid >= 16384
   OR (p.provolatile = 'v' AND p.proname NOT IN (
         'nextval', 'currval', 'lastval', 'random', 'gen_random_uuid', 'clock_timestamp',
         'timeofday'))
   OR p.proname ~ '^(query|cursor|table|schema|database)_to_xml'
   OR p.proname ~ '^(lo_|pg_read_|pg_ls_|pg_file_|pg_stat_file|dblink)'"""


def _sql_names(names: Iterable[str]) -> str:
    return "ARRAY[" + ", ".join("'" + n.replace("'", "''") + "'" for n in names) + "]::name[]"


def _sql_extension(catalog: str, oid: str) -> str:
    """The name of the extension the object ``oid`` of ``catalog`` belongs to, or ''."""
    return (
        "coalesce((SELECT x.extname::text FROM pg_depend d JOIN pg_extension x "
        f"ON x.oid = d.refobjid WHERE d.classid = '{catalog}'::regclass AND d.objid = {oid} "
        "AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' LIMIT 1), '')"
    )


# The routines of the database a statement may run by a name it writes (`rt`
# rows, the same 9 fields: full name, kind, word, extension): functions and aggregates
# named like a function the dialect calls, operators named like one a statement
# writes or looks up (`BOUND_FUNCTIONS`, `BOUND_OPERATORS`), casts that call a
# function, types named like the grammar's (a search path with a user's schema
# before pg_catalog resolves `CAST(x AS text)` to a user's domain `text`) or like
# a function (a one-argument call no function matches exactly is a cast to a
# type of its name: `upper(id)` to a domain `upper`, its CHECK run) whose
# conversion can run a user's code (a domain, a base, range or multirange type,
# a composite with a field of a user's type; not an enum, nor a table's row of
# built-in types), and operator families with a class, operator or support
# function a user made
# (a default class of a built-in type, or an index's, runs its functions for
# ORDER BY, DISTINCT, GROUP BY, UNION and index scans, whatever its operators
# are named). Made by a user or an extension (oid past the built-in range), in
# any schema: which schemas an executor's search path holds is not the
# snapshot's to know. Each with the extension it belongs to, if any (a family:
# its own; a built-in family a user or an extension added to belongs to none,
# so naming an extension never covers another's addition).
_PG_ROUTINES = f"""\
SELECT 'rt', encode(convert_to(p.pronamespace::regnamespace::text || '.' || p.proname || '('
                               || pg_get_function_identity_arguments(p.oid) || ')', 'UTF8'), 'hex'),
       'function', encode(convert_to(p.proname, 'UTF8'), 'hex'),
       {_hex(_sql_extension("pg_proc", "p.oid"))}, '', '', '', ''
FROM pg_proc p
WHERE p.oid >= 16384 AND p.prokind <> 'p' AND p.proname = ANY ({_sql_names(BOUND_FUNCTIONS)})
UNION ALL
SELECT 'rt', encode(convert_to(o.oprnamespace::regnamespace::text || '.' || o.oprname || '('
                               || CASE WHEN o.oprleft = 0 THEN 'NONE'
                                       ELSE format_type(o.oprleft, NULL) END
                               || ', ' || format_type(o.oprright, NULL) || ')', 'UTF8'), 'hex'),
       'operator', encode(convert_to(o.oprname, 'UTF8'), 'hex'),
       {_hex(_sql_extension("pg_operator", "o.oid"))}, '', '', '', ''
FROM pg_operator o
WHERE o.oid >= 16384 AND o.oprname = ANY ({_sql_names(BOUND_OPERATORS)})
UNION ALL
SELECT 'rt', encode(convert_to('CAST (' || format_type(c.castsource, NULL) || ' AS '
                               || format_type(c.casttarget, NULL) || ')', 'UTF8'), 'hex'),
       'cast', '', {_hex(_sql_extension("pg_cast", "c.oid"))}, '', '', '', ''
FROM pg_cast c WHERE c.oid >= 16384 AND c.castfunc <> 0
UNION ALL
SELECT 'rt', encode(convert_to(t.typnamespace::regnamespace::text || '.' || quote_ident(t.typname),
                               'UTF8'), 'hex'),
       'type', encode(convert_to(t.typname, 'UTF8'), 'hex'),
       {_hex(_sql_extension("pg_type", "t.oid"))}, '', '', '', ''
FROM pg_type t
WHERE t.oid >= 16384 AND t.typname = ANY ({_sql_names(BOUND_TYPES + BOUND_FUNCTIONS)})
  AND (t.typtype IN ('b', 'd', 'r', 'm')
       OR (t.typtype = 'c' AND EXISTS (
             SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0
             AND NOT a.attisdropped AND a.atttypid >= 16384)))
UNION ALL
SELECT 'rt', encode(convert_to(f.opfnamespace::regnamespace::text || '.' || quote_ident(f.opfname)
                               || ' USING ' || a.amname, 'UTF8'), 'hex'),
       'operator family', '', {_hex(_sql_extension("pg_opfamily", "f.oid"))}, '', '', '', ''
FROM pg_opfamily f JOIN pg_am a ON a.oid = f.opfmethod
WHERE f.oid >= 16384
   OR EXISTS (SELECT 1 FROM pg_opclass k WHERE k.opcfamily = f.oid AND k.oid >= 16384)
   OR EXISTS (SELECT 1 FROM pg_amop o WHERE o.amopfamily = f.oid AND o.oid >= 16384)
   OR EXISTS (SELECT 1 FROM pg_amproc p WHERE p.amprocfamily = f.oid AND p.oid >= 16384)"""

_PG_ACTIONS = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}
_PG_RULE_EVENTS: dict[str, WriteEvent] = {"2": "UPDATE", "3": "INSERT", "4": "DELETE"}
# pg_trigger.tgtype bits of the write events (TRUNCATE, 32, is no statement GRID speaks)
_PG_TRIGGER_BITS: tuple[tuple[int, WriteEvent], ...] = (
    (4, "INSERT"),
    (16, "UPDATE"),
    (8, "DELETE"),
)
_PG_FUNCTION_EVENTS: dict[str, tuple[WriteEvent, ...]] = {
    "row": ("INSERT", "UPDATE"),  # computed from a row written: defaults, checks, keys...
    "any": ("INSERT", "UPDATE", "DELETE"),  # a policy, a view's query: every write
}
_ALL_WRITES: tuple[WriteEvent, ...] = ("INSERT", "UPDATE", "DELETE")


def _pg_tables(
    lines: Iterable[str], source: str, schema: str
) -> tuple[tuple[Table, ...], tuple[Routine, ...]]:
    rels: dict[str, tuple[RelationKind, list[tuple[int, Column]]]] = {}
    effects: list[list[str]] = []
    foreign: set[str] = set()
    routines: list[Routine] = []
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 9 and fields[0] == "rt":
            _, name, routine_kind, word, ext, *_ = fields
            if routine_kind not in ROUTINE_KINDS:
                raise SchemaError(source, f"unexpected psql output line {line!r}")
            name, word, ext = (_unhex(x, source) for x in (name, word, ext))
            routines.append(Routine(name, routine_kind, word, ext))
            continue
        if fields[0] in _PG_TAGS and len(fields) == 9:
            effects.append(fields)
            continue
        if len(fields) != 6:
            raise SchemaError(source, f"unexpected psql output line {line!r}")
        rel_hex, rel_type, col_hex, ordinal, type_hex, generated = fields
        rel = _unhex(rel_hex, source)
        kind: RelationKind = "view" if rel_type == "VIEW" else "table"
        if rel_type == "FOREIGN":
            foreign.add(rel)
        _, cols = rels.setdefault(rel, (kind, []))
        if col_hex:
            column = Column(
                _unhex(col_hex, source), _unhex(type_hex, source), generated=generated == "g"
            )
            cols.append((int(ordinal), column))
    found = _PgEffects(
        source, schema, {r: {c.name for _, c in cols} for r, (_, cols) in rels.items()}
    )
    for fields in effects:
        found.add(fields)
    for rel in foreign:  # its rows are another server's
        for event in _ALL_WRITES:
            found.trigger(rel, Trigger("remote", event, (), "outside"))
    tables = tuple(
        Table(
            rel,
            tuple(c for _, c in sorted(cols, key=lambda p: p[0])),
            kind,
            tuple(found.keys.get(rel, ())),
            tuple(found.triggers.get(rel, ())),
            (),
            tuple(found.through.get(rel, ())),
        )
        for rel, (kind, cols) in rels.items()
    )
    return tables, tuple(routines)


_PG_TAGS = frozenset({"fk", "tg", "ru", "in", "vw", "fn"})


class _PgEffects:
    """The `_PG_EFFECTS` and `_PG_CALLS` rows of one snapshot, by the relation a
    write to which has them. ``known``: the relations the snapshot holds, with
    their columns (``information_schema`` shows only those the connecting role
    may access). What a write reaches outside them (another schema, a relation
    or column hidden from the role) is an ``outside`` trigger: the snapshot
    cannot follow it. An effect of a relation outside them is dropped: no role
    names that relation."""

    def __init__(self, source: str, schema: str, known: Mapping[str, set[str]]) -> None:
        self.source, self.schema, self.known = source, schema, known
        self.keys: dict[str, list[ForeignKey]] = {}
        self.triggers: dict[str, list[Trigger]] = {}
        self.through: dict[str, list[Through]] = {}

    def add(self, fields: list[str]) -> None:
        tag, a, b, c, d, e, f, g, h = fields
        if tag == "fk":
            nsp, child, parent, constraint = (self._text(x) for x in (a, b, c, d))
            on_delete, on_update = _PG_ACTIONS.get(e, e), _PG_ACTIONS.get(f, f)
            parent_cols = self._names(h)
            if parent not in self.known:
                return
            cols = self._names(g)
            seen = (
                nsp == self.schema
                and child in self.known
                and set(cols) <= self.known[child]
                and set(parent_cols) <= self.known[parent]
            )
            if seen:
                key = ForeignKey(cols, parent, parent_cols, on_delete, on_update)
                self.keys.setdefault(child, []).append(key)
                return
            name = f"{nsp}.{child}.{constraint}"
            on = parent_cols if set(parent_cols) <= self.known[parent] else ()
            if on_delete in WRITING_ACTIONS:
                self.trigger(parent, Trigger(name, "DELETE", (), "outside"))
            if on_update in WRITING_ACTIONS:
                self.trigger(parent, Trigger(name, "UPDATE", on, "outside"))
        elif tag in ("in", "vw"):
            rel, nsp, other = (self._text(x) for x in (a, b, c))
            if rel not in self.known:
                return
            # a partition takes every verb (an UPDATE may move a row); an inheriting
            # table the parent's UPDATE and DELETE (an INSERT stays in the parent)
            verbs: ThroughVerbs = "same" if tag == "vw" else "all" if d == "p" else "rows"
            if nsp == self.schema and other in self.known:
                self.through.setdefault(rel, []).append(Through(other, verbs))
                return
            events = ("UPDATE", "DELETE") if verbs == "rows" else _ALL_WRITES
            for event in events:
                self.trigger(rel, Trigger(f"{nsp}.{other}", event, (), "outside"))
        elif tag == "tg":
            rel, name = self._text(a), self._text(b)
            for bit, event in _PG_TRIGGER_BITS:
                if int(c) & bit:
                    on = self._names(d) if event == "UPDATE" else ()
                    if rel in self.known and not set(on) <= self.known[rel]:
                        on = ()  # a column hidden from the snapshot's user: any column
                    self.trigger(rel, Trigger(name, event, on))
        elif tag == "ru":
            self.trigger(self._text(a), Trigger(self._text(b), _PG_RULE_EVENTS[c], (), "rule"))
        else:  # fn
            rel, name = self._text(a), self._text(b)
            for event in _PG_FUNCTION_EVENTS[c]:
                self.trigger(rel, Trigger(name, event, (), "function"))

    def _text(self, hex_text: str) -> str:
        return _unhex(hex_text, self.source)

    def trigger(self, rel: str, trigger: Trigger) -> None:
        if rel in self.known and trigger not in self.triggers.get(rel, ()):
            self.triggers.setdefault(rel, []).append(trigger)

    def _names(self, text: str) -> tuple[str, ...]:
        return tuple(_unhex(h, self.source) for h in text.split(",") if h)


_ACTIONS = frozenset({"CASCADE", "SET NULL", "SET DEFAULT", "RESTRICT", "NO ACTION"})
_EFFECT_KEYS = ("foreign_keys", "triggers", "on_conflict_replace", "writes_through")


def _sqlite_effects(
    db: sqlite3.Connection, rel: str, columns: list[str]
) -> tuple[tuple[ForeignKey, ...], tuple[Trigger, ...], tuple[str, ...]]:
    """A SQLite relation's write effects: its foreign keys with a writing action,
    its triggers (with their event read from the DDL), and the columns of its
    ``ON CONFLICT REPLACE`` constraints; ``columns``: the relation's own. Where
    the DDL cannot be read, a trigger fires on every event and a REPLACE
    constraint covers every column (more refusals, never fewer)."""
    grouped: dict[int, list[tuple[Any, ...]]] = {}
    for row in db.execute(
        'SELECT id, "table", "from", "to", on_update, on_delete '
        "FROM pragma_foreign_key_list(?) ORDER BY id, seq",
        (rel,),
    ):
        grouped.setdefault(int(row[0]), []).append(row)
    keys = []
    for rows in grouped.values():
        parent, on_update, on_delete = str(rows[0][1]), str(rows[0][4]), str(rows[0][5])
        if not {on_update.upper(), on_delete.upper()} & WRITING_ACTIONS:
            continue
        found = db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE",
            (parent,),
        ).fetchone()
        if found is None:  # a dangling reference: no write reaches through it
            continue
        parent = str(found[0])
        parent_columns = {
            ascii_lower(str(c)): str(c)
            for (c,) in db.execute("SELECT name FROM pragma_table_xinfo(?)", (parent,))
        }
        to = [r[3] for r in rows]
        if any(t is None for t in to):  # REFERENCES parent: its primary key
            to = [
                r[0]
                for r in db.execute(
                    "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", (parent,)
                )
            ]
        to = [parent_columns.get(ascii_lower(str(t))) for t in to]  # the catalog's spelling
        if len(to) != len(rows) or None in to:  # SQLite reports a mismatch, writes nothing
            continue
        keys.append(
            ForeignKey(
                tuple(str(r[2]) for r in rows),
                parent,
                tuple(str(t) for t in to),
                on_delete.upper(),
                on_update.upper(),
            )
        )
    column_keys = {ascii_lower(c): c for c in columns}
    triggers: list[Trigger] = []
    for name, sql in db.execute(  # TEMP triggers too: on this connection, they fire
        "SELECT name, sql FROM (SELECT * FROM sqlite_master UNION ALL "
        "SELECT * FROM sqlite_temp_master) "
        "WHERE type = 'trigger' AND tbl_name = ? COLLATE NOCASE ORDER BY name",
        (rel,),
    ):
        for event, cols in _trigger_events(str(sql or "")):
            on = tuple(column_keys[c] for c in map(ascii_lower, cols) if c in column_keys)
            triggers.append(Trigger(str(name), event, on if len(on) == len(cols) else ()))
    (ddl,) = db.execute(
        "SELECT coalesce(sql, '') FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')",
        (rel,),
    ).fetchone() or ("",)
    replace = []
    for name in _replace_columns(str(ddl)):
        found = column_keys.get(ascii_lower(name))
        if found is None:  # unreadable: every column (more refusals, never fewer)
            replace = list(column_keys.values())
            break
        if found not in replace:
            replace.append(found)
    return tuple(keys), tuple(triggers), tuple(replace)


def _sqlite_shadows(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Virtual table -> its shadow tables, which a write to it writes (FTS5's
    ``docs_content``, ...): ``pragma_table_list``'s ``shadow`` tables, each under
    the virtual table whose name and ``_`` start it (the longest such)."""
    virtual = [
        str(n)
        for (n,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND upper(substr(ltrim(sql), 1, 20)) = 'CREATE VIRTUAL TABLE'"
        )
    ]
    if not virtual:
        return {}
    try:
        shadows = [
            str(n)
            for (n,) in db.execute("SELECT name FROM pragma_table_list WHERE type = 'shadow'")
        ]
    except sqlite3.Error:  # before SQLite 3.37: every table named after a virtual one
        shadows = [
            str(n)
            for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if any(ascii_lower(str(n)).startswith(ascii_lower(v) + "_") for v in virtual)
        ]
    out: dict[str, list[str]] = {}
    for shadow in shadows:
        owners = [v for v in virtual if ascii_lower(shadow).startswith(ascii_lower(v) + "_")]
        if owners:
            out.setdefault(max(owners, key=len), []).append(shadow)
    return out


def _replace_columns(ddl: str) -> list[str]:
    """The columns of a ``CREATE TABLE``'s ``UNIQUE`` and ``PRIMARY KEY`` constraints
    that say ``ON CONFLICT REPLACE`` (a ``NOT NULL ... REPLACE`` deletes nothing: it
    writes the default). A constraint it cannot read gives the name ``""``."""
    tokens = _sql_tokens(ddl)
    try:
        start = tokens.index(("punct", "("))
    except ValueError:
        return []
    items: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for token in tokens[start + 1 :]:
        if token == ("punct", "("):
            depth += 1
        elif token == ("punct", ")"):
            depth -= 1
            if depth < 0:
                break
        elif token == ("punct", ",") and depth == 0:
            items.append([])
            continue
        items[-1].append(token)
    out: list[str] = []
    for item in items:
        words = [t.upper() if k == "word" else None for k, t in item]
        for i in range(len(words) - 2):
            if words[i : i + 3] != ["ON", "CONFLICT", "REPLACE"]:
                continue
            kind = next(
                (w for w in reversed(words[:i]) if w in ("UNIQUE", "PRIMARY", "NULL")), None
            )
            if kind in ("NULL", None):  # NOT NULL writes the default; CHECK ignores it
                continue
            if words[0] in ("CONSTRAINT", "PRIMARY", "UNIQUE"):  # a table constraint: (a, b)
                out += _listed(item, words.index(kind) if kind in words else 0)
            else:
                out.append(item[0][1] if item and item[0][0] in ("word", "name") else "")
    return out


def _listed(item: list[tuple[str, str]], after: int) -> list[str]:
    """The first name of each part of the first parenthesized list after ``after``."""
    try:
        i = item.index(("punct", "("), after) + 1
    except ValueError:
        return [""]
    out: list[str] = []
    first = True
    for kind, text in item[i:]:
        if (kind, text) == ("punct", ")"):
            return out
        if (kind, text) == ("punct", ","):
            first = True
        elif first:
            out.append(text if kind in ("word", "name") else "")
            first = False
    return [""]


def _sql_tokens(sql: str) -> list[tuple[str, str]]:
    """SQLite DDL as ``(kind, text)`` tokens: ``word`` (a bare word), ``name`` (a
    quoted identifier, unquoted), ``string``, ``punct``; comments and blanks skipped."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(sql)
    closing = {'"': '"', "`": "`", "[": "]", "'": "'"}
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in closing:
            close, j, text = closing[ch], i + 1, []
            while j < n:
                if sql[j] == close:
                    if close != "]" and sql.startswith(close * 2, j):
                        text.append(close)
                        j += 2
                        continue
                    break
                text.append(sql[j])
                j += 1
            out.append(("string" if ch == "'" else "name", "".join(text)))
            i = j + 1
        elif ch.isalnum() or ch in "_$" or ord(ch) > 127:
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$" or ord(sql[j]) > 127):
                j += 1
            out.append(("word", sql[i:j]))
            i = j
        else:
            out.append(("punct", ch))
            i += 1
    return out


_ALL_EVENTS: tuple[tuple[WriteEvent, tuple[str, ...]], ...] = (
    ("INSERT", ()),
    ("UPDATE", ()),
    ("DELETE", ()),
)


def _trigger_events(sql: str) -> tuple[tuple[WriteEvent, tuple[str, ...]], ...]:
    """The event of a ``CREATE TRIGGER`` statement and its ``UPDATE OF`` columns:
    ``CREATE [TEMP] TRIGGER [IF NOT EXISTS] [schema.]name [BEFORE | AFTER |
    INSTEAD OF] event [OF col, ...] ON table``. Every event when it cannot be read."""
    tokens = _sql_tokens(sql)
    words = [t.upper() if k == "word" else None for k, t in tokens]
    try:
        i = words.index("TRIGGER") + 1
        if words[i : i + 3] == ["IF", "NOT", "EXISTS"]:
            i += 3
        i += 3 if tokens[i + 1] == ("punct", ".") else 1  # the (qualified) name
        if words[i] in ("BEFORE", "AFTER"):
            i += 1
        elif words[i : i + 2] == ["INSTEAD", "OF"]:
            i += 2
        event = words[i]
        if event == "UPDATE" and words[i + 1] == "OF":
            cols, i = [], i + 2
            while True:
                kind, text = tokens[i]
                if kind not in ("word", "name"):
                    return _ALL_EVENTS
                cols.append(text)
                if tokens[i + 1] != ("punct", ","):
                    break
                i += 2
            return (("UPDATE", tuple(cols)),)
        if event in ("INSERT", "UPDATE", "DELETE"):
            return ((event, ()),)  # type: ignore[return-value]  # checked just above
    except (ValueError, IndexError):
        pass
    return _ALL_EVENTS


def _effects(
    t: Mapping[str, Any], source: str, where: str
) -> tuple[tuple[ForeignKey, ...], tuple[Trigger, ...], tuple[str, ...], tuple[Through, ...]]:
    """A JSON table's write effects (module docstring); names are checked by the snapshot."""

    def names(value: Any, at: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise SchemaError(source, f"{at} must be a list of strings")
        return tuple(_string(v, source, f"{at}[{i}]") for i, v in enumerate(value))

    def entries(key: str, fields: set[str]) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """``(where, object)`` of each entry of the list under ``key``."""
        raw = t.get(key, [])
        if not isinstance(raw, list):
            raise SchemaError(source, f"{where}.{key} must be a list")
        for i, entry in enumerate(raw):
            at = f"{where}.{key}[{i}]"
            yield at, _object(entry, source, at, fields)

    keys = []
    for at, k in entries(
        "foreign_keys", {"columns", "parent", "parent_columns", "on_delete", "on_update"}
    ):
        keys.append(
            ForeignKey(
                names(k.get("columns"), f"{at}.columns"),
                _string(k.get("parent"), source, f"{at}.parent"),
                names(k.get("parent_columns"), f"{at}.parent_columns"),
                _string(k.get("on_delete", "NO ACTION"), source, f"{at}.on_delete"),
                _string(k.get("on_update", "NO ACTION"), source, f"{at}.on_update"),
            )
        )
    triggers = []
    for at, g in entries("triggers", {"name", "event", "columns", "kind"}):
        kind = g.get("kind", "trigger")
        if kind not in TRIGGER_KINDS:
            raise SchemaError(source, f"{at}.kind must be one of {', '.join(TRIGGER_KINDS)}")
        event = g.get("event")
        if event not in ("INSERT", "UPDATE", "DELETE"):
            raise SchemaError(
                source, f"{at}.event must be 'INSERT', 'UPDATE' or 'DELETE', not {event!r}"
            )
        triggers.append(
            Trigger(
                _string(g.get("name"), source, f"{at}.name"),
                event,
                names(g.get("columns", []), f"{at}.columns"),
                kind,
            )
        )
    replace = names(t.get("on_conflict_replace", []), f"{where}.on_conflict_replace")
    through = []
    for at, w in entries("writes_through", {"relation", "verbs"}):
        verbs = w.get("verbs")
        if verbs not in THROUGH_VERBS:
            raise SchemaError(
                source, f"{at}.verbs must be one of {', '.join(THROUGH_VERBS)}, not {verbs!r}"
            )
        through.append(Through(_string(w.get("relation"), source, f"{at}.relation"), verbs))
    return tuple(keys), tuple(triggers), replace, tuple(through)


def _unhex(text: str, source: str) -> str:
    try:
        return bytes.fromhex(text).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise SchemaError(source, f"bad hex name {text!r} from psql") from None


def _routines(obj: Mapping[str, Any], source: str) -> tuple[Routine, ...] | None:
    """The snapshot's ``routines`` list (None when absent)."""
    if "routines" not in obj:
        return None
    raw = obj["routines"]
    if not isinstance(raw, list):
        raise SchemaError(source, "routines must be a list")
    out = []
    for i, item in enumerate(raw):
        at = f"routines[{i}]"
        r = _object(item, source, at, {"name", "kind", "word", "extension"})
        kind = r.get("kind")
        if kind not in ROUTINE_KINDS:
            raise SchemaError(source, f"{at}.kind must be one of {', '.join(ROUTINE_KINDS)}")
        out.append(
            Routine(
                _string(r.get("name"), source, f"{at}.name"),
                kind,
                _string(r.get("word", ""), source, f"{at}.word"),
                _string(r.get("extension", ""), source, f"{at}.extension"),
            )
        )
    return tuple(out)


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
