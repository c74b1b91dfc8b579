"""A guide's parse events as JSON lines, written as they are determined.

One event a line: the mapping an :class:`EventReader` gives
(`grid_sql.events.SqlEventReader` for SQL, `grid_core.json_events.JsonEventReader`
for JSON: kind, name, byte span, step and the resolved meaning), plus ``attempt`` (0 for
the first decode of a request, 1 for its retry). The stream holds the events of
accepted tokens only (``grid_core.events``): when a guide rolled back past
events already written, one line ``{"kind": "retract", "attempt": a, "count":
n}`` says that the last ``n`` written events of that attempt no longer hold;
events written after it replace them. ``flush`` is called whenever the caller
likes (each model call, the end of the decode): it writes what the guide has
determined since the last flush, so a reader sees the table set of a statement
before its end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from grid_core.events import Event, EventStream


class EventReader(Protocol):
    """Reads one stream's events in order, each as a JSON-ready mapping."""

    def read(self, event: Event, output: bytes) -> dict[str, Any]: ...


class EventLines:
    """Writes one guide's events to ``out`` (see the module header); ``new_reader``
    makes a fresh reader (a reader remembers what it has read, so a retract reads
    the kept events again with a new one)."""

    def __init__(
        self,
        guide: EventStream,
        new_reader: Callable[[], EventReader],
        out: TextIO,
        attempt: int = 0,
    ) -> None:
        self.guide = guide
        self.new_reader = new_reader
        self.reader = new_reader()
        self.out = out
        self.attempt = attempt
        self.written = 0

    def flush(self) -> None:
        """Write the events determined since the last flush (a retract line first
        when the guide rolled back past some already written)."""
        count = self.guide.event_count
        if count < self.written:
            line = {"kind": "retract", "attempt": self.attempt, "count": self.written - count}
            self.out.write(json.dumps(line) + "\n")
            self.written = count
            # the reader remembers what it read: read the kept events afresh
            self.reader = self.new_reader()
            output = self.guide.output()
            for event in self.guide.events()[:count]:
                self.reader.read(event, output)
        if count > self.written:
            output = self.guide.output()
            for event in self.guide.events(since=self.written):
                line = {**self.reader.read(event, output), "attempt": self.attempt}
                self.out.write(json.dumps(line) + "\n")
            self.written = count
        self.out.flush()
