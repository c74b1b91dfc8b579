"""`EventLines` under speculative rounds: what a reader of the lines resolves equals
one straight pass, and each event is read a bounded number of times.

The guide is driven as vLLM's speculative decoding drives a grammar: each round
accepts the real token, then drafts one at a time (a flush after each, as the vLLM
backend flushes after every ``accept_tokens``) and rolls them back. Both readers:
SQL (`grid_sql.events.SqlEventReader`, whose aliases resolve qualified columns, so a
reader state wrong after a retract shows in the lines) and JSON
(`grid_core.json_events.JsonEventReader`, whose pointers need the open containers).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid_core.compile import compile_grammar
from grid_core.events import Event, EventStream
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.json_events import JsonEventReader, json_event_spec
from grid_core.jsonschema import schema_grammar
from grid_core.vocab import Vocabulary
from grid_serve.event_lines import EventLines
from grid_sql.dialects import get_dialect
from grid_sql.events import SqlEventReader, event_spec

EOS = 256
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {EOS}, (EOS,))

SQL = (
    b"SELECT e.name, d.title, e.salary, d.budget, e.hired, d.city, e.id "
    b"FROM employees AS e JOIN departments AS d ON e.dept = d.id "
    b"WHERE e.salary > 1000 AND d.budget < 5000 AND e.name LIKE 'A%' "
    b"ORDER BY e.name, d.title;"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "tags": {"type": "array"}},
            },
        }
    },
}
JSON = json.dumps(
    {"rows": [{"id": i, "tags": ["a", [i], {"k": i}]} for i in range(8)]}, separators=(",", ":")
).encode()


class Counted:
    """A reader that counts, in a list shared with its forks, the events it reads."""

    def __init__(self, inner: Any, reads: list[int]) -> None:
        self.inner, self.reads = inner, reads

    def read(self, event: Event, output: bytes) -> dict[str, Any]:
        self.reads[0] += 1
        return dict(self.inner.read(event, output))

    def fork(self) -> Counted:
        return Counted(self.inner.fork(), self.reads)


@cache
def sql_case() -> tuple[Engine, Any, Callable[[], Any], bytes]:
    dialect = get_dialect("sqlite")
    engine = Engine(load_grammar(dialect.grammar_text, "sqlite"), BYTES)
    return engine, event_spec(dialect, engine.grammar), lambda: SqlEventReader(dialect), SQL


@cache
def json_case() -> tuple[Engine, Any, Callable[[], Any], bytes]:
    engine = compile_grammar(schema_grammar(SCHEMA), BYTES)
    return engine, json_event_spec(engine.grammar), JsonEventReader, JSON


def resolved(text: str) -> list[dict[str, Any]]:
    """The lines a consumer keeps: each retract drops the last ``count`` kept."""
    kept: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = json.loads(raw)
        if line["kind"] == "retract":
            assert 0 < line["count"] <= len(kept)
            del kept[len(kept) - line["count"] :]
        else:
            kept.append(line)
    return kept


def counted(case: Callable[[], Any]) -> tuple[Any, EventLines, list[int], io.StringIO]:
    """A fresh events guide of the case, its EventLines into a string and the count of
    events its readers read."""
    engine, spec, new_reader, _ = case()
    guide = engine.guide(audit=False, events=spec)
    assert isinstance(guide, EventStream)
    reads = [0]
    out = io.StringIO()
    return guide, EventLines(guide, lambda: Counted(new_reader(), reads), out), reads, out


def run(
    case: Callable[[], Any], drafts: int, back: int = 0
) -> tuple[list[dict[str, Any]], int, int]:
    """The resolved lines, the events read, and the retract lines of one decode of the
    case's text with ``drafts`` draft tokens per round, flushed one at a time; with
    ``back``, the drafts are flushed once, all accepted, and ``back`` of them rolled
    back (the rest stay: the next round starts after them)."""
    guide, lines, reads, out = counted(case)
    tokens = [*case()[3], EOS]
    n = 0
    while n < len(tokens):
        guide.accept_token(tokens[n])
        lines.flush()
        n += 1
        ahead = tokens[n : n + drafts]
        for draft in ahead:
            guide.accept_token(draft)
            if not back:
                lines.flush()
        if back:
            lines.flush()
            undone = min(back, len(ahead))
            guide.rollback(undone)
            lines.flush()
            n += len(ahead) - undone
        elif ahead:
            guide.rollback(len(ahead))
            lines.flush()
    retracts = sum(json.loads(x)["kind"] == "retract" for x in out.getvalue().splitlines())
    return resolved(out.getvalue()), reads[0], retracts


@pytest.mark.parametrize("case", [sql_case, json_case], ids=["sql", "json"])
def test_speculative_rounds_resolve_to_the_straight_pass_reading_each_event_boundedly(
    case: Callable[[], Any],
) -> None:
    """Fails if a retract leaves the reader in a state other than the kept events'
    (an alias or pointer resolved differently from the straight pass), or if a retract
    reads the kept events again (the reads then grow with the square of the length:
    783 for the SQL case's 40 events with one draft a round, 8,605 for the JSON case's
    159, against at most 4 per event here), or resumes from a mark older than the last
    retract (16 tokens flushed at once, 8 rolled back: 2,803 reads of the JSON case's
    159 events without a mark at each retract)."""
    straight, straight_reads, none = run(case, 0)
    assert none == 0 and straight_reads == len(straight)
    assert straight[-1]["kind"] in ("statement", "value")
    for drafts, back in ((1, 0), (3, 0), (8, 4), (16, 8)):
        lines, reads, retracts = run(case, drafts, back)
        assert lines == straight
        assert retracts > 3, "the drafts determined events that were retracted"
        assert reads <= 4 * len(straight), (drafts, back, reads, len(straight))


@pytest.mark.parametrize("case", [sql_case, json_case], ids=["sql", "json"])
def test_a_fork_reads_on_from_its_parent_and_neither_sees_the_others_reads(
    case: Callable[[], Any],
) -> None:
    """The parent and a fork taken halfway read the second half alike, whichever reads
    first (shared JSON containers would be closed under the parent); a column read
    by the parent after its fork read the aliases is still unresolved (a shared SQL
    name table would resolve it)."""
    engine, spec, new_reader, text = case()
    guide = engine.guide(audit=False, events=spec)
    assert isinstance(guide, EventStream)
    for token in [*text, EOS]:
        guide.accept_token(token)
    events, output = guide.events(), guide.output()
    half = len(events) // 2
    reader = new_reader()
    for event in events[:half]:
        reader.read(event, output)
    fork = reader.fork()
    rest = [fork.read(e, output) for e in events[half:]]
    assert rest == [reader.read(e, output) for e in events[half:]]
    if case is sql_case:
        first_table = next(i for i, e in enumerate(events) if e.kind == "table")
        at = next(i for i, e in enumerate(events) if e.kind == "column")
        qualified = events[at - 1 : at + 1]  # the select list's first: qualifier `e.`, `name`
        assert [e.kind for e in qualified] == ["qualifier", "column"]
        parent = new_reader()
        for event in events[:first_table]:
            parent.read(event, output)
        child = parent.fork()
        for event in events[first_table:]:
            child.read(event, output)
        assert [child.read(e, output) for e in qualified][1]["table"] == "employees"
        assert [parent.read(e, output) for e in qualified][1]["table"] is None


A = b"SELECT e.name, d.title FROM employees AS e JOIN departments AS d ON e.dept = d.id;"
B = b"SELECT e.name, d.title FROM departments AS x JOIN employees AS d ON e.id = d.dept;"
SHARED = next(i for i, (x, y) in enumerate(zip(A, B, strict=False)) if x != y)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.integers(1, 40), st.booleans()),
        st.tuples(st.just("back"), st.integers(1, 40), st.booleans()),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_any_accepts_rollbacks_and_flushes_resolve_to_the_straight_pass(ops: Any) -> None:
    """Random decodes over two statements that share a prefix (alias ``d`` names
    another table in each; ``e`` is declared in one only): tokens accepted with a
    flush after each or once at the end, rollbacks (each flushed, the precondition)
    that may go back into the shared prefix and go on with the other statement.
    The lines a consumer resolves equal a straight pass of the statement decoded;
    the events read are at most twice the event lines written. Fails if a retract
    leaves the reader in another state (an alias resolved to the other statement's
    table) or re-reads past the last mark."""
    guide, lines, reads, out = counted(sql_case)
    text, n = A, 0
    for op, k, flag in ops:
        if op == "advance":
            for b in text[n : n + k]:
                guide.accept_token(b)
                n += 1
                if flag:
                    lines.flush()
            lines.flush()
        elif n:
            j = min(k, n)
            guide.rollback(j)
            n -= j
            lines.flush()
            if flag and n <= SHARED:
                text = B if text is A else A
    for b in [*text[n:], EOS]:
        guide.accept_token(b)
    lines.flush()
    straight = [{**line, "attempt": 0} for line in straight_lines(text)]
    assert resolved(out.getvalue()) == straight
    written = sum(json.loads(x)["kind"] != "retract" for x in out.getvalue().splitlines())
    assert reads[0] <= 2 * written, (reads[0], written)


def straight_lines(text: bytes) -> list[dict[str, Any]]:
    """The lines of ``text`` then EOS decoded straight, read by a fresh reader."""
    engine, spec, new_reader, _ = sql_case()
    guide = engine.guide(audit=False, events=spec)
    for b in [*text, EOS]:
        guide.accept_token(b)
    reader, output = new_reader(), guide.output()
    return [dict(reader.read(event, output)) for event in guide.events()]
