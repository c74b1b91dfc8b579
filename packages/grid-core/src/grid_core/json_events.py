"""JSON parse events: the event symbols of a JSON grammar and their meaning.

The grammars of :mod:`grid_core.jsonschema` (``schema_grammar``,
``json_object_grammar``) declare their event symbols in
:data:`grid_core.jsonschema.JSON_EVENTS` (the JSON analogue of a SQL dialect's
``Dialect.events``): the ``{`` and ``[`` terminals, the ``json_key`` rule around
each member name, ``json_object`` / ``json_array`` (an object or array closed)
and the ``json_value`` rule around each value where it is written (a member's
value, an item, the root). :func:`json_event_spec` is their
``grid_core.events.EventSpec`` for one grammar; ``Engine.guide(events=spec)``
streams them, each at the first token that determines it (docs/events.md).

:class:`JsonEventReader` reads one stream's events in order and gives each as
one JSON-ready mapping with the JSON pointer (RFC 6901: ``~`` written ``~0``,
``/`` written ``~1``) of the value it concerns:

- ``object_open`` / ``array_open``: ``{"pointer": p}``, the container at ``p``
  has begun (an empty ``{}`` or ``[]`` is one lexeme: it has no open event);
- ``key``: ``{"pointer": p, "key": name}``, ``p`` the pointer of the member's
  value, ``name`` the decoded member name;
- ``object_close`` / ``array_close``: ``{"pointer": p}``;
- ``value``: ``{"pointer": p, "type": t}``, ``t`` one of ``null``, ``boolean``,
  ``number``, ``string``, ``object``, ``array``; a scalar also has ``value``
  (decoded; a number a double cannot hold, ``1e400`` or an integer past
  Python's digit limit, is its text, so that every event line stays JSON).
  A container's ``value`` follows its close event. An ``enum`` or
  ``const`` value that is an object or array is one lexeme: only its ``value``.

Every mapping also has ``kind``, ``name`` (the symbol), ``start``, ``end``
(the byte span of the output) and ``step`` (the token step that determined it).
A stream is a prefix of the post-order of the JSON text (opens and keys where
they are written, closes and values after their contents), so the reader keeps
a stack of the open containers and needs no other parse of the output.
"""

from __future__ import annotations

import json
import math
from typing import Any

from grid_core.events import Event, EventSpec
from grid_core.grammar import Grammar
from grid_core.jsonschema import JSON_EVENTS

__all__ = ["JsonEventReader", "json_event_spec", "pointer_token"]

_TYPES = {ord("{"): "object", ord("["): "array", ord('"'): "string", ord("n"): "null"}
_TYPES |= {ord("t"): "boolean", ord("f"): "boolean"}


def json_event_spec(grammar: Grammar) -> EventSpec:
    """The JSON event symbols ``grammar`` has (:data:`~grid_core.jsonschema.JSON_EVENTS`;
    a grammar without arrays has no ``[``, a regex or choice grammar none)."""
    names = {t.name for t in grammar.terminals}
    names |= {r.alias or r.origin for r in grammar.rules}
    return EventSpec(tuple((s, k) for s, k in JSON_EVENTS if s in names))


def pointer_token(key: str | int) -> str:
    """One reference token of a JSON pointer (RFC 6901)."""
    return str(key).replace("~", "~0").replace("/", "~1")


def _number(text: bytes) -> int | float | str:
    """A JSON number's value, or its text when no finite double or int holds it."""
    try:
        value = json.loads(text)
    except ValueError:  # an integer past the interpreter's digit limit
        return text.decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return text.decode("ascii")
    assert isinstance(value, (int, float))
    return value


class JsonEventReader:
    """Resolves one stream's events in order (it keeps the open containers)."""

    def __init__(self) -> None:
        # per open container: [kind, start offset, its pointer, member name or item index]
        self._open: list[list[Any]] = []

    def fork(self) -> JsonEventReader:
        """An independent reader that has read what this one has (O(open containers))."""
        other = JsonEventReader()
        other._open = [list(entry) for entry in self._open]
        return other

    def read(self, event: Event, output: bytes) -> dict[str, Any]:
        """The event with its pointer (see the module header). ``output`` holds at
        least the event's span."""
        out = event.mapping()
        kind, stack = event.kind, self._open
        if kind in ("object_open", "array_open"):
            pointer = self._child()
            stack.append([kind[:-5], event.start, pointer, None if kind[0] == "o" else 0])
            out["pointer"] = pointer
        elif kind == "key":
            key = json.loads(output[event.start : event.end])
            assert stack and stack[-1][0] == "object", "a key inside an open object"
            stack[-1][3] = key
            out["pointer"] = f"{stack[-1][2]}/{pointer_token(key)}"
            out["key"] = key
        elif kind in ("object_close", "array_close"):
            top = stack[-1] if stack else None
            if top is not None and top[1] == event.start and top[0] == kind[:-6]:
                out["pointer"] = top[2]
                stack.pop()
            else:  # "{}" or "[]": one lexeme, never opened
                out["pointer"] = self._child()
        elif kind == "value":
            text = output[event.start : event.end]
            out["pointer"] = self._child()
            out["type"] = _TYPES.get(text[0], "number")
            if out["type"] == "number":
                out["value"] = _number(text)
            elif out["type"] not in ("object", "array"):
                out["value"] = json.loads(text)
            if stack and stack[-1][0] == "array":
                stack[-1][3] += 1
        return out

    def _child(self) -> str:
        """The pointer of the value being written now: the open container's pointer
        with the member name or the next item index ("" at the root)."""
        if not self._open:
            return ""
        _, _, pointer, at = self._open[-1]
        return f"{pointer}/{pointer_token(at)}"
