"""Parse events of UPDATE and DELETE targets: the target's alias is an `alias` event
(`target_alias`) on both dialects, and DELETE's FROM part closes
(`delete_from_clause`) before what follows it. Streams equal lark's trees."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from grid_core.events import tracker
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary
from grid_spec.spec import Language
from grid_sql.dialects import get_dialect
from grid_sql.events import SqlEventReader, event_spec

EOS = 256
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {EOS}, (EOS,))


@cache
def compiled(name: str) -> tuple[Engine, Language]:
    dialect = get_dialect(name)
    return Engine(load_grammar(dialect.grammar_text, name), BYTES), Language(dialect.grammar_text)


def read(name: str, text: bytes) -> list[dict[str, Any]]:
    """``text`` then EOS byte by byte through the engine's guide with the dialect's
    events, each read as it arrives; the stream checked against lark's tree and
    grid-core's post-hoc parse."""
    engine, language = compiled(name)
    dialect = get_dialect(name)
    spec = event_spec(dialect, engine.grammar)
    guide: Any = engine.guide(audit=False, events=spec)
    reader, out = SqlEventReader(dialect), []
    for b in [*text, EOS]:
        seen = guide.event_count
        guide.accept_token(b)
        out += [reader.read(e, guide.output()) for e in guide.events(since=seen)]
    keys = [e.key for e in guide.events()]
    assert keys == language.events(text, dict(dialect.events))
    assert keys == [e.key for e in tracker(engine, spec).parse(text)]
    return out


CASES = [
    ("sqlite", b"UPDATE employees AS e SET name = 'x' WHERE e.id = 1;", "employees", "e"),
    ("sqlite", b"DELETE FROM employees AS e WHERE e.id = 1;", "employees", "e"),
    (
        "postgres",
        b"UPDATE employees e SET name = 'x' WHERE e.id = 1 RETURNING e.id;",
        "employees",
        "e",
    ),
    ("postgres", b"DELETE FROM orders AS o WHERE o.id = 1;", "orders", "o"),
]


@pytest.mark.parametrize(("name", "text", "table", "alias"), CASES)
def test_the_target_alias_is_an_alias_event(name: str, text: bytes, table: str, alias: str) -> None:
    out = read(name, text)
    aliases = [(r["alias"], r["table"]) for r in out if r["kind"] == "alias"]
    assert aliases == [(alias, table)]
    # the alias then qualifies the target's columns
    columns = [(r["column"], r["qualifier"], r["table"]) for r in out if r["kind"] == "column"]
    assert ("id", alias, table) in columns
    # known at the token after the alias, long before EOS
    step = next(r["step"] for r in out if r["kind"] == "alias")
    assert step == text.index(b" ", text.index(b" " + alias.encode() + b" ") + 1) + 1


@pytest.mark.parametrize("name", ["sqlite", "postgres"])
def test_delete_from_closes_before_what_follows(name: str) -> None:
    text = b"DELETE FROM employees WHERE id = 1;"
    out = read(name, text)
    kinds = [(r["kind"], r.get("clause")) for r in out]
    assert kinds.index(("clause_open", "FROM")) < kinds.index(
        ("clause_close", "delete_from_clause")
    )
    assert kinds.index(("clause_close", "delete_from_clause")) < kinds.index(
        ("clause_open", "WHERE")
    )
    close = next(r for r in out if r.get("clause") == "delete_from_clause")
    assert (close["start"], close["end"]) == (7, len(b"DELETE FROM employees"))
    # determined once a byte rules out an alias (SQLite: the W, since its alias
    # needs AS), at the latest with WHERE (the token after it: WHERE could grow)
    where = next(r for r in out if r.get("clause") == "WHERE")
    assert len(b"DELETE FROM employees ") < close["step"] <= where["step"] <= len(text)
    if name == "sqlite":
        assert close["step"] == len(b"DELETE FROM employees W")


def test_postgres_delete_using_and_a_bare_alias() -> None:
    text = b"DELETE FROM employees e USING departments d WHERE e.department_id = d.id;"
    out = read("postgres", text)
    assert [(r["alias"], r["table"]) for r in out if r["kind"] == "alias"] == [
        ("e", "employees"),
        ("d", "departments"),
    ]
    close = next(r for r in out if r.get("clause") == "delete_from_clause")
    assert text[close["start"] : close["end"]] == b"FROM employees e"
    departments = next(r for r in out if r.get("table") == "departments")
    assert close["step"] <= departments["step"]
    columns = [(r["column"], r["table"]) for r in out if r["kind"] == "column"]
    assert columns == [("department_id", "employees"), ("id", "departments")]
