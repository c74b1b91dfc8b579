"""The dialect registry: a plain dict of the built-ins, plus plug-ins.

`DIALECTS` maps a dialect name to its `Dialect` value. Third-party dialects plug
in through the entry-point group `grid.dialects`: each entry point names a
`Dialect` instance (or a `Dialect` subclass, instantiated with no argument) and
its entry-point name must equal the dialect's `name`. Plug-ins are loaded once,
on the first `get_dialect`/`available_dialects` call; a plug-in may not replace
a built-in or another plug-in with a different value (`DialectDefinitionError`).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from grid_sql.dialect import Dialect, DialectDefinitionError, UnknownDialectError
from grid_sql.dialects.postgres import POSTGRES
from grid_sql.dialects.sqlite import SQLITE

ENTRY_POINT_GROUP = "grid.dialects"

DIALECTS: dict[str, Dialect] = {SQLITE.name: SQLITE, POSTGRES.name: POSTGRES}

_plugins_loaded = False


def load_plugins() -> None:
    """Register the dialects of the `grid.dialects` entry-point group (idempotent)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dialect: Any = ep.load()
        if isinstance(dialect, type) and issubclass(dialect, Dialect):
            factory: Any = dialect  # a subclass whose fields all have defaults
            dialect = factory()
        if not isinstance(dialect, Dialect):
            raise DialectDefinitionError(ep.name, f"entry point {ep.value} is not a Dialect")
        if dialect.name != ep.name:
            raise DialectDefinitionError(
                ep.name, f"entry point {ep.value} provides a dialect named {dialect.name!r}"
            )
        known = DIALECTS.get(dialect.name)
        if known is not None and known != dialect:
            raise DialectDefinitionError(
                ep.name, f"entry point {ep.value} clashes with an already registered dialect"
            )
        DIALECTS[dialect.name] = dialect
    _plugins_loaded = True


def available_dialects() -> tuple[str, ...]:
    """Names of every dialect, built-in and plug-in, sorted."""
    load_plugins()
    return tuple(sorted(DIALECTS))


def get_dialect(name: str) -> Dialect:
    """The dialect registered under `name`."""
    load_plugins()
    try:
        return DIALECTS[name]
    except KeyError:
        raise UnknownDialectError(name, tuple(sorted(DIALECTS))) from None


__all__ = [
    "DIALECTS",
    "ENTRY_POINT_GROUP",
    "POSTGRES",
    "SQLITE",
    "available_dialects",
    "get_dialect",
    "load_plugins",
]
