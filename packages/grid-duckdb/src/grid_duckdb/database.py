"""DuckDB as a database backend of GRID (`grid.databases` entry point).

`DUCKDB_DATABASE` owns a file whose header carries DuckDB's magic bytes
("DUCK" at offset 8), snapshots it with `grid_duckdb.schema.snapshot` and runs
one statement on it read-only under :class:`~grid_sql.limits.Limits`:

- the connection is opened `read_only`, with external access off (no file,
  URL or extension reads: `enable_external_access = false`), DuckDB's
  `memory_limit` set to `max_memory`, no temporary directory (`temp_directory`
  empty: a join, sort or aggregate past `max_memory` is refused at the limit
  instead of spilling into an unbounded `<database>.tmp` directory beside the
  file), and the configuration locked;
- a timer interrupts the statement past `wall_time`;
- rows and result bytes are counted as rows are fetched, so a result too long
  or too large stops at the first row over a limit.

A limit hit raises `LimitExceededError`; any other refusal by DuckDB raises
`duckdb.Error`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import duckdb

from grid_duckdb.schema import snapshot
from grid_sql.database import Database
from grid_sql.execute import Result
from grid_sql.limits import LimitExceededError, Limits, value_bytes

__all__ = ["DUCKDB_DATABASE", "owns", "run_readonly"]

_MAGIC = b"DUCK"
_MAGIC_OFFSET = 8
_BATCH = 64


def owns(path: Path) -> bool:
    """Whether ``path`` is a DuckDB database file (by its header)."""
    try:
        with path.open("rb") as f:
            head = f.read(_MAGIC_OFFSET + len(_MAGIC))
    except OSError:
        return False
    return head[_MAGIC_OFFSET:] == _MAGIC


def run_readonly(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    """Run ``sql`` on the DuckDB file ``path`` read-only under ``limits`` (module header)."""
    config: dict[str, str | bool | int | float | list[str]] = {
        "enable_external_access": False,
        "memory_limit": f"{int(limits.max_memory)}B",
        "temp_directory": "",
        "lock_configuration": True,
    }
    try:
        db = duckdb.connect(str(path), read_only=True, config=config)
    except duckdb.OutOfMemoryException as e:  # a limit below what opening the file takes
        raise _out_of_memory(limits, e) from None
    timer = threading.Timer(limits.wall_time, db.interrupt)
    deadline = time.monotonic() + limits.wall_time
    try:
        timer.start()
        try:
            cursor = db.execute(sql)
            columns = [d[0] for d in cursor.description or ()]
            rows: list[tuple[Any, ...]] = []
            count = size = 0
            while batch := cursor.fetchmany(_BATCH):
                for row in batch:
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
                            f"the first {count} rows hold more than "
                            f"{limits.max_result_bytes} bytes",
                        )
                    if len(rows) < keep:
                        rows.append(tuple(row))
                if time.monotonic() > deadline:
                    raise _too_long(limits)
        except duckdb.InterruptException:
            raise _too_long(limits) from None
        except duckdb.OutOfMemoryException as e:
            raise _out_of_memory(limits, e) from None
        return Result(columns, rows, count)
    finally:
        timer.cancel()
        db.close()


def _out_of_memory(limits: Limits, e: Exception) -> LimitExceededError:
    return LimitExceededError("max_memory", limits.max_memory, f"DuckDB ran out of memory ({e})")


def _too_long(limits: Limits) -> LimitExceededError:
    return LimitExceededError(
        "wall_time", limits.wall_time, f"the statement ran past {limits.wall_time:g} s"
    )


DUCKDB_DATABASE = Database("duckdb", "duckdb", owns, snapshot, run_readonly, (duckdb.Error,))
