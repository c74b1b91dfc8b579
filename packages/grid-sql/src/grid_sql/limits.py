"""Execution limits: how long a statement may run, how much it may return, how much memory.

GRID's mask decides *what* a role may say; these limits bound what running it
may cost. Every statement GRID executes (``grid ask``, through
:func:`grid_sql.execute.run_readonly`) runs under one :class:`Limits`:

- ``wall_time`` (seconds): wall-clock time of the whole run, preparation,
  stepping and fetching included. SQLite: a progress handler that interrupts
  the statement once the deadline has passed (checked every
  :data:`PROGRESS_STEPS` virtual-machine instructions). PostgreSQL's
  equivalent is ``statement_timeout`` (:meth:`Limits.postgres_settings`);
  GRID has no PostgreSQL execution path of its own today.
- ``max_rows``: rows the statement may return; the row after the last one
  allowed stops the run.
- ``max_result_bytes``: bytes of the result, summed over every value returned
  (:func:`value_bytes`); also SQLite's ``SQLITE_LIMIT_LENGTH`` for the run, so
  one string or blob may not grow past it while it is computed
  (``randomblob(1e9)``, ``zeroblob(1e9)``), unless the database's longest
  ``CREATE`` statement or the statement itself is longer (the limit bounds
  those too): then past that length.
- ``max_memory`` (bytes): SQLite's heap (``PRAGMA hard_heap_limit``; the soft
  limit, at half of it, makes SQLite shed cache first), temporary results
  included: a backend keeps them in memory rather than spilling them to disk
  (SQLite ``PRAGMA temp_store = MEMORY``, DuckDB no ``temp_directory``).

Exceeding a limit raises :class:`LimitExceededError`, which names the limit
and its value; it is an :class:`~grid_core.errors.ExecutionError`, so the
``grid`` command prints it as one line.

Policy decisions:

- The defaults (:data:`DEFAULT_LIMITS`) are safe for an interactive question
  over a local database: 5 s, 1,000 rows, 1 MiB of result, 64 MiB of SQLite
  heap. A policy file may set any of them for all its roles (``[limits]``) and
  per role (``[roles.NAME.limits]``; docs/policy.md); ``grid ask`` overrides
  them on its command line.
- Every limit is positive and finite; a limit is never "off" (raise it instead).
- A row is refused on the row after the limit, so a result of exactly
  ``max_rows`` rows is returned whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from grid_core.errors import ExecutionError

__all__ = [
    "DEFAULT_LIMITS",
    "LIMIT_KEYS",
    "MAX_COUNT",
    "MAX_WALL_TIME",
    "PROGRESS_STEPS",
    "LimitExceededError",
    "Limits",
    "check_limit",
    "format_limit",
    "value_bytes",
]

#: The largest ``wall_time`` (seconds: a day) and the largest count of rows or bytes.
MAX_WALL_TIME: Final = 86_400.0
MAX_COUNT: Final = 2**62

#: Virtual-machine instructions between two looks at the clock (SQLite progress handler).
PROGRESS_STEPS: Final = 1_000


@dataclass(frozen=True)
class Limits:
    """What one statement may cost. Invariant: every field is positive and finite."""

    wall_time: float = 5.0
    max_rows: int = 1_000
    max_result_bytes: int = 1 << 20
    max_memory: int = 64 << 20

    def __post_init__(self) -> None:
        for name in LIMIT_KEYS:
            check_limit(name, getattr(self, name))

    def replace(self, **changes: Any) -> Limits:
        """These limits with ``changes`` (None values ignored), validated."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def canonical(self) -> dict[str, str | int]:
        """The limits as fingerprintable data (``wall_time`` as the repr of a float)."""
        data: dict[str, str | int] = {name: getattr(self, name) for name in LIMIT_KEYS}
        data["wall_time"] = repr(float(self.wall_time))
        return data

    def describe(self) -> str:
        """One line: ``wall_time 5 s, max_rows 1000, ...``."""
        return ", ".join(f"{name} {format_limit(name, getattr(self, name))}" for name in LIMIT_KEYS)

    def postgres_settings(self) -> dict[str, str]:
        """The PostgreSQL session settings for ``wall_time`` (``SET statement_timeout``).
        Rows and bytes are counted by the client; PostgreSQL has no per-statement heap cap."""
        return {"statement_timeout": f"{max(1, math.ceil(self.wall_time * 1000))}ms"}


#: The limit names, in the order messages and documents list them.
LIMIT_KEYS: Final = ("wall_time", "max_rows", "max_result_bytes", "max_memory")
assert tuple(f.name for f in fields(Limits)) == LIMIT_KEYS

_UNITS = {
    "wall_time": " s",
    "max_rows": " rows",
    "max_result_bytes": " bytes",
    "max_memory": " bytes",
}


def format_limit(name: str, value: float) -> str:
    """``5 s``, ``1000 rows``, ``1048576 bytes``."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{shown}{_UNITS[name]}"


def check_limit(name: str, value: object) -> None:
    """Raise ValueError unless ``value`` is a valid value of limit ``name``: a positive
    finite number of seconds for ``wall_time``, a positive integer for the others
    (never a bool). The ValueError's message is a predicate without the name
    (``must be positive ...``): callers prefix the name their user wrote and turn it
    into their own typed error."""
    if name not in _UNITS:
        raise ValueError(f"unknown limit {name!r} (known: {', '.join(LIMIT_KEYS)})")
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    if name == "wall_time":
        if not isinstance(value, int | float):
            raise ValueError("must be a number of seconds")
        if not math.isfinite(value) or not 0 < value <= MAX_WALL_TIME:
            raise ValueError(f"must be a number of seconds in (0, {MAX_WALL_TIME:g}], not {value}")
    else:
        if not isinstance(value, int):
            raise ValueError("must be an integer")
        if not 0 < value <= MAX_COUNT:
            raise ValueError(f"must be an integer in [1, 2**62], not {value}")


def value_bytes(value: object) -> int:
    """The bytes one result value counts for: a text's UTF-8 length, a blob's length,
    8 for a number, 0 for NULL; a nested value (DuckDB's lists, structs and maps,
    read as lists, tuples and dicts) 8 plus, per member, one more than the member
    counts (a list of a million NULLs or empty strings is a megabyte, not 8 bytes:
    ``array_agg(NULL)`` over a cross join once passed a 1 KiB limit at 4 million
    members)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, list | tuple | set | frozenset):
        return 8 + sum(1 + value_bytes(v) for v in value)
    if isinstance(value, dict):
        return 8 + sum(2 + value_bytes(k) + value_bytes(v) for k, v in value.items())
    return 8


#: The limits of a role whose policy sets none.
DEFAULT_LIMITS: Final = Limits()


class LimitExceededError(ExecutionError):
    """A statement went past one of its :class:`Limits`.

    ``limit`` is the limit's name (one of :data:`LIMIT_KEYS`), ``value`` its
    value and ``detail`` what the statement did.
    """

    def __init__(self, limit: str, value: float, detail: str) -> None:
        self.limit = limit
        self.value = value
        self.detail = detail
        super().__init__(f"limit {limit} = {format_limit(limit, value)} exceeded: {detail}")
