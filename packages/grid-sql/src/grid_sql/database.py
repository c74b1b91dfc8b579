"""Database backends: where a statement of a dialect runs, found by its file.

A `Database` is what `grid ask --db FILE` needs of a database besides its
dialect: whether it owns a file, the file's schema (read-only), and a read-only
run of one statement under :class:`~grid_sql.limits.Limits`, in this process
or (``Database.run_isolated``, for a statement a model wrote) in a worker
process killed at its limits. SQLite is built
in (`SQLITE_DATABASE`: `grid_sql.execute`); other databases plug in through
the entry-point group `grid.databases` (each entry point names a `Database`
instance), as dialects do through `grid.dialects`. `database_for(path)` picks
the first plug-in, in name order, whose `owns` accepts the file, else SQLite
(which reports a file that is no SQLite database itself, as before).

Invariant: a backend's `dialect` is a registered dialect, and its snapshots
carry that dialect's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from grid_sql.execute import Result
from grid_sql.execute import run_readonly as sqlite_run_readonly
from grid_sql.limits import Limits
from grid_sql.schema import SchemaError, SchemaSnapshot
from grid_sql.worker import run_isolated

__all__ = ["DATABASE_ENTRY_POINT_GROUP", "SQLITE_DATABASE", "Database", "database_for"]

DATABASE_ENTRY_POINT_GROUP = "grid.databases"

_SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of a SQLite file


@dataclass(frozen=True)
class Database:
    """One database engine's file access for GRID.

    ``owns(path)`` says whether the file is this engine's; ``snapshot(path)`` reads
    its schema read-only; ``run(path, sql, limits, keep)`` runs one statement
    read-only in this process (``run_isolated`` runs it in a worker), keeping the
    first ``keep`` rows, raising :class:`~grid_sql.limits.LimitExceededError` past
    a limit and one of ``errors`` when the engine refuses the statement."""

    name: str
    dialect: str
    owns: Callable[[Path], bool]
    snapshot: Callable[[Path], SchemaSnapshot]
    run: Callable[[Path, str, Limits, int], Result]
    errors: tuple[type[Exception], ...]

    def run_isolated(self, path: Path, sql: str, limits: Limits, keep: int) -> Result:
        """``run`` in a worker process killed at ``limits`` (:mod:`grid_sql.worker`):
        how a statement GRID did not write (a model's) runs. Raises as ``run`` does,
        or :class:`~grid_sql.worker.WorkerError` when the worker fails otherwise."""
        return run_isolated(self.run, self.errors, path, sql, limits, keep)


def _sqlite_owns(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _sqlite_run(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    return sqlite_run_readonly(path, sql, limits, keep)


def _sqlite_errors() -> tuple[type[Exception], ...]:
    import sqlite3

    return (sqlite3.Error,)


SQLITE_DATABASE = Database(
    "sqlite", "sqlite", _sqlite_owns, SchemaSnapshot.from_sqlite, _sqlite_run, _sqlite_errors()
)


def database_for(path: Path) -> Database:
    """The backend that owns the file at ``path`` (see the module header)."""
    if not path.is_file():
        raise SchemaError(str(path), "no such file")
    plugins = sorted(entry_points(group=DATABASE_ENTRY_POINT_GROUP), key=lambda e: e.name)
    for ep in plugins:
        database = ep.load()
        if not isinstance(database, Database):
            raise SchemaError(str(path), f"entry point {ep.value} is not a Database")
        if database.owns(path):
            return database
    return SQLITE_DATABASE
