"""JSON read strictly: an object that gives one key twice is an error, and so is
``NaN``, ``Infinity`` or ``-Infinity``, which Python's ``json`` reads but JSON has not.

Python's ``json`` keeps the last of two equal keys. A file that decides what
GRID admits or records (an audit line, a schema snapshot, a lexicon) must not
be read otherwise than its author reads it, so every such reader uses
:func:`loads`, which refuses the second key by name.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKeyError", "loads"]


class DuplicateKeyError(ValueError):
    """A JSON object gives ``key`` twice."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"the key {key!r} is given twice")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> Any:
    """``json.loads`` refusing a repeated key (:class:`DuplicateKeyError`, a
    ``ValueError``, as a syntax error is) and ``NaN``/``Infinity`` (a ``ValueError``)."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
