"""Run one statement read-only on a SQLite file, under :class:`~grid_sql.limits.Limits`.

:func:`run_readonly` is where GRID executes SQL on SQLite (``grid ask``,
through ``grid_serve.text2sql`` and a worker process, :mod:`grid_sql.worker`).
The connection is

- opened ``mode=ro`` (a write fails in SQLite instead of writing), with
  ``PRAGMA query_only`` and no attached databases (``SQLITE_LIMIT_ATTACHED`` 0);
- bounded in time by a progress handler that interrupts the statement past its
  deadline (``wall_time``);
- bounded in value size by ``SQLITE_LIMIT_LENGTH`` = ``max_result_bytes``,
  raised to the length of the database's longest ``CREATE`` statement and of
  the statement itself when either is longer (the limit bounds every string
  SQLite holds, those included: a lower one refused every statement on a
  database with one long table definition);
- bounded in memory by SQLite's heap limit (``PRAGMA hard_heap_limit`` =
  ``max_memory``, ``soft_heap_limit`` at half of it);
- kept off the disk: temporary tables, indices and a sort's spilled runs live in
  memory (``PRAGMA temp_store = MEMORY``), under the heap limit, instead of in
  an unbounded file under ``/var/tmp``.

Rows are fetched one at a time while the totals are counted, so a result too
long or too large stops at the first row over a limit; the caller keeps the
first ``keep`` rows. A limit hit raises
:class:`~grid_sql.limits.LimitExceededError`; any other refusal by SQLite
raises :class:`sqlite3.Error` as before.

Policy decisions:

- SQLite keeps one heap per process, and ``PRAGMA hard_heap_limit`` can only
  lower its limit: after a run the process keeps the smallest ``max_memory``
  any run asked for (SQLite's memory use counts every connection of the
  process). A statement a model wrote runs in a worker process of its own
  (:mod:`grid_sql.worker`, ``Database.run_isolated``), so there this is the
  statement's limit, and the worker is also killed at limits this function
  cannot see (one long function call).
- SQLite reports a failed allocation as ``SQLITE_NOMEM``, which Python's
  ``sqlite3`` raises as :class:`MemoryError`; it is read as the memory limit.
  ``SQLITE_TOOBIG`` (:class:`sqlite3.DataError`, "string or blob too big") is
  read as ``max_result_bytes``; an interrupt after the deadline as
  ``wall_time``.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grid_sql.limits import DEFAULT_LIMITS, PROGRESS_STEPS, LimitExceededError, Limits, value_bytes

__all__ = ["Result", "connect_readonly", "run_readonly"]

_INT_MAX = 2**31 - 1  # a C int: sqlite3_limit's argument (SQLite clamps it lower still)
_OWN_SQL_BYTES = 256  # the longest statement this module runs itself (its PRAGMAs)


@dataclass(frozen=True)
class Result:
    """A statement's result: its column names, the first rows kept, and the row count
    (every row of the result; ``len(rows) <= count``)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    count: int

    @property
    def more(self) -> bool:
        """Whether the result has rows beyond those kept."""
        return self.count > len(self.rows)


def connect_readonly(
    db_path: Path, limits: Limits = DEFAULT_LIMITS, statement_bytes: int = 0
) -> sqlite3.Connection:
    """A read-only connection to ``db_path`` with the memory and length limits set and
    temporary storage in memory (the time limit is per statement: :func:`run_readonly`),
    for statements of at most ``statement_bytes`` bytes (see the module header)."""
    uri = db_path.resolve().as_uri() + "?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    try:
        (schema_bytes,) = db.execute(
            "SELECT coalesce(max(length(CAST(sql AS BLOB))), 0) FROM sqlite_master"
        ).fetchone()
        length = max(limits.max_result_bytes, schema_bytes, statement_bytes, _OWN_SQL_BYTES)
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(length, _INT_MAX))
        db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        db.execute("PRAGMA query_only = 1")
        db.execute(f"PRAGMA hard_heap_limit = {int(limits.max_memory)}")
        db.execute(f"PRAGMA soft_heap_limit = {int(limits.max_memory) // 2}")
        db.execute("PRAGMA temp_store = MEMORY")
    except BaseException:
        db.close()
        raise
    return db


def run_readonly(
    db_path: Path, sql: str, limits: Limits = DEFAULT_LIMITS, keep: int | None = None
) -> Result:
    """Run ``sql`` on the database opened read-only, under ``limits``; keep the first
    ``keep`` rows (default: every row, at most ``limits.max_rows``).

    Raises :class:`~grid_sql.limits.LimitExceededError` when a limit is exceeded and
    :class:`sqlite3.Error` when the database refuses the statement.
    """
    keep = limits.max_rows if keep is None else keep
    deadline = time.monotonic() + limits.wall_time

    def late() -> bool:
        return time.monotonic() > deadline

    def too_long() -> LimitExceededError:
        return LimitExceededError(
            "wall_time", limits.wall_time, f"the statement ran past {limits.wall_time:g} s"
        )

    try:
        db = connect_readonly(db_path, limits, len(sql.encode("utf-8", "surrogatepass")))
    except MemoryError:
        raise _out_of_memory(limits) from None
    try:
        db.set_progress_handler(late, PROGRESS_STEPS)
        try:
            cursor = db.execute(sql)
            columns = [d[0] for d in cursor.description or ()]
            rows: list[tuple[Any, ...]] = []
            count = size = 0
            for row in cursor:
                count += 1
                if count > limits.max_rows:
                    raise LimitExceededError(
                        "max_rows",
                        limits.max_rows,
                        f"the statement returns more than {limits.max_rows} rows",
                    )
                size += sum(value_bytes(v) for v in row)
                if size > limits.max_result_bytes:
                    raise LimitExceededError(
                        "max_result_bytes",
                        limits.max_result_bytes,
                        f"the first {count} rows hold more than {limits.max_result_bytes} bytes",
                    )
                if late():  # the Python side of the fetch loop counts too
                    raise too_long()
                if len(rows) < keep:
                    rows.append(tuple(row))
        except MemoryError:
            raise _out_of_memory(limits) from None
        except sqlite3.DataError as e:
            if "too big" in str(e):
                raise LimitExceededError(
                    "max_result_bytes",
                    limits.max_result_bytes,
                    f"a value grew past {limits.max_result_bytes} bytes (SQLite: {e})",
                ) from None
            raise
        except sqlite3.OperationalError as e:
            if "interrupted" in str(e) and late():
                raise too_long() from None
            raise
        return Result(columns, rows, count)
    finally:
        db.close()


def _out_of_memory(limits: Limits) -> LimitExceededError:
    return LimitExceededError(
        "max_memory",
        limits.max_memory,
        f"SQLite ran out of its {limits.max_memory} byte heap",
    )
