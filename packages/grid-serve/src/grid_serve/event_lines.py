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

    def fork(self) -> EventReader:
        """An independent reader that has read what this one has."""
        ...


class EventLines:
    """Writes one guide's events to ``out`` (see the module header) with
    ``new_reader()``'s reader, reading each event again only after a retract
    that resumes before it (at most a few times, however often the guide rolls
    back: ``tests/test_event_lines.py``).

    A reader remembers what it has read, so after a retract the reader must be
    the one that read the kept events only: each flush keeps a fork of the
    reader at the count it leaves (a mark), and a retract resumes from the last
    mark at or before the kept count, reading again only the events after it.
    A speculative round (drafts accepted, flushed, rolled back) so costs its
    drafts' events, not the statement's: reading every kept event again made a
    request's reads quadratic in its length.

    Precondition: the caller flushes after every rollback, before the guide
    accepts again (the vLLM backend flushes after each ``accept_tokens`` and
    ``rollback``). A rollback and new tokens between two flushes that leave the
    event count where it was would leave the written lines those of the old
    tokens: nothing here sees that the events changed.
    """

    def __init__(
        self,
        guide: EventStream,
        new_reader: Callable[[], EventReader],
        out: TextIO,
        attempt: int = 0,
    ) -> None:
        self.guide = guide
        self.reader = new_reader()
        self.out = out
        self.attempt = attempt
        # (events read, a fork of the reader that read them), counts increasing; the
        # last is at the count written
        self._marks: list[tuple[int, EventReader]] = [(0, self.reader.fork())]

    @property
    def written(self) -> int:
        """How many events the lines hold (retracted ones not counted)."""
        return self._marks[-1][0]

    def flush(self) -> None:
        """Write the events determined since the last flush (a retract line first
        when the guide rolled back past some already written)."""
        count, written = self.guide.event_count, self.written
        if count < written:
            line = {"kind": "retract", "attempt": self.attempt, "count": written - count}
            self.out.write(json.dumps(line) + "\n")
            while self._marks[-1][0] > count:
                self._marks.pop()
            read, mark = self._marks[-1]
            self.reader = mark.fork()
            if read < count:
                output = self.guide.output()
                for event in self.guide.events(since=read)[: count - read]:
                    self.reader.read(event, output)
                self._marks.append((count, self.reader.fork()))
        elif count > written:
            output = self.guide.output()
            for event in self.guide.events(since=written):
                line = {**self.reader.read(event, output), "attempt": self.attempt}
                self.out.write(json.dumps(line) + "\n")
            self._marks.append((count, self.reader.fork()))
        self.out.flush()
