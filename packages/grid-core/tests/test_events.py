"""Parse events (grid_core.events) on the CRUD toy grammar, against the specification.

- the stream at EOS equals the post-hoc sequence of the final sentence, as grid-core
  parses it and as grid-spec's lark tree gives it;
- every event is determined when emitted (sound: every sentence the shortest
  completions after each viable next byte reach has it) and was not determined
  one token earlier (zero late: its span was not yet written, or a sentence
  extending the previous prefix lacks it); each token here is one byte, so
  "one token earlier" is the previous byte;
- rollback drops the events of the rolled-back tokens, forks have their own stream;
- the Python and the native guide give the same stream;
- a spec naming an unknown symbol or a nullable rule is refused, naming it.
"""

from __future__ import annotations

from functools import cache

import pytest
from toy import CRUD, EOS, LEXICON, TOY, token

from grid_core.complete import shortest_completion, shortest_suffix
from grid_core.events import Event, EventGuide, EventSpec, EventSpecError, tracker
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_spec.spec import Language

SYMBOLS = {
    "start": "statement",
    "select_stmt": "select",
    "insert_stmt": "insert",
    "where_clause": "clause",
    "condition": "condition",
    "column_list": "columns",
    "value": "value",
    "TABLE_NAME": "table",
    "SELECT": "verb",
    "DELETE": "verb",
}
SPEC = EventSpec(tuple(SYMBOLS.items()))
SENTENCES = [
    b"select a, b from employees where x = 1 and y = 'z';",
    b"select * from orders;",
    b"select*from orders where a=1;",
    b"insert into orders (a, b) values (1, 'x');",
    b"delete from employees where id >= 10 -- done\n;",
    b"update orders set a = 1, b = 'it''s' where c <> 2.5;",
    b"select selection from employees_public where wherever = 'a';",
]


@cache
def engine() -> Engine:
    return Engine(CRUD, TOY, LEXICON)


@cache
def language() -> Language:
    return Language(CRUD.to_lark(), LEXICON)


def python_guide() -> EventGuide:
    return EventGuide(GridGuide(engine(), audit=False), tracker(engine(), SPEC))


def run(text: bytes) -> EventGuide:
    guide = python_guide()
    for b in text:
        guide.accept_token(b)
    guide.accept_token(EOS)
    return guide


def spec_events(w: bytes) -> list[tuple[str, str, int, int]] | None:
    return language().events(w, SYMBOLS)


@pytest.mark.parametrize("text", SENTENCES)
def test_stream_equals_post_hoc_parse(text: bytes) -> None:
    stream = [e.key for e in run(text).events()]
    assert stream == [e.key for e in tracker(engine(), SPEC).parse(text)]
    assert stream == spec_events(text)
    assert stream  # every sentence has a statement event


def completions(prefix: bytes) -> list[bytes]:
    """Sentences extending ``prefix``: its shortest completion, and the shortest
    completion after each byte that keeps it viable and after a blank and the
    shortest lexeme of each terminal."""
    lexer = engine().lexer
    config = lexer.advance(lexer.initial, prefix)
    assert config is not None
    lexemes = [shortest_suffix(engine(), 0, 0, t) for t in range(CRUD.n_terminals)]
    out = []
    extras = [b"", *(bytes([b]) for b in range(256)), *(b" " + x for x in lexemes if x)]
    for extra in extras:
        after = lexer.advance(config, extra) if extra else config
        if after is None or not lexer.is_viable(after):
            continue
        rest = shortest_completion(engine(), after)
        if rest is not None:
            out.append(prefix + extra + rest)
    return out


@pytest.mark.parametrize("text", SENTENCES[:4])
def test_each_event_emitted_at_the_first_step_that_determines_it(text: bytes) -> None:
    events = run(text).events()
    by_step: dict[int, list[Event]] = {}
    for event in events:
        by_step.setdefault(event.step, []).append(event)
    for step, emitted in by_step.items():
        if step > len(text):  # determined by EOS itself
            continue
        sentences = [spec_events(s) for s in completions(text[:step])]
        assert sentences
        for event in emitted:
            # sound: in every sentence reached from the prefix that emitted it
            assert all(s is not None and event.key in s for s in sentences), event
            # zero late: one step earlier its span was not yet written, or some
            # sentence extending that prefix lacks it
            if event.end > step - 1:
                continue
            earlier = [spec_events(s) for s in completions(text[: step - 1])]
            assert any(s is not None and event.key not in s for s in earlier), event


def test_statement_complete_before_eos() -> None:
    text = b"select * from orders;"
    (statement,) = [e for e in run(text).events() if e.kind == "statement"]
    assert statement.step == len(text)  # at ";", not at EOS


def test_rollback_and_fork_keep_independent_streams() -> None:
    guide = python_guide()
    for b in b"select * from orders ":
        guide.accept_token(b)
    before = guide.events()
    assert [e.kind for e in before] == ["verb", "table"]
    fork = guide.fork()
    for b in b"where a = 1;":
        guide.accept_token(b)
    assert len(guide.events()) > len(before)
    assert fork.events() == before
    guide.rollback(len(b"where a = 1;"))
    assert guide.events() == before
    assert guide.events(since=1) == before[1:]
    for b in b";":
        fork.accept_token(b)
    fork.accept_token(EOS)
    assert [e.key for e in fork.events()] == spec_events(b"select * from orders ;")


def test_multi_byte_tokens_and_native_guide_agree() -> None:
    tokens = [
        token(b"select"),
        token(b" *"),
        token(b" from"),
        token(b" emplo"),
        token(b"yees where"),
    ]
    tokens += [*b" a = 1;", EOS]
    python = python_guide()
    for t in tokens:
        python.accept_token(t)
    keys = [e.key for e in python.events()]
    assert keys == spec_events(b"select * from employees where a = 1;")
    assert [e.step for e in python.events()][:2] == [
        1,
        5,
    ]  # SELECT at once; the table at "yees where"
    if engine().kernel is None:
        pytest.skip("grid-kernels is not loaded (or GRID_KERNELS=0): no native guide")
    native = engine().guide(audit=False, events=SPEC)
    assert isinstance(native, EventGuide) and not isinstance(native.inner, GridGuide)
    for t in tokens:
        native.accept_token(t)
    assert native.events() == python.events()
    assert [e.step for e in native.events()] == [e.step for e in python.events()]


def test_events_off_is_the_plain_guide() -> None:
    assert not isinstance(engine().guide(audit=False), EventGuide)


def test_bad_specs_are_refused_naming_the_symbol() -> None:
    with pytest.raises(EventSpecError, match="'no_such_rule'"):
        tracker(engine(), EventSpec((("no_such_rule", "x"),)))
    nullable = load_grammar('start: a "x"\na: "y"?\n', "nullable")
    small = Engine(nullable, TOY)
    with pytest.raises(EventSpecError, match=r"'a'.*empty"):
        tracker(small, EventSpec((("a", "x"),)))


def test_fill_rows_fills_event_guides_as_their_inner_guides() -> None:
    """The batch fill takes an EventGuide's inner guide (the native batch path when
    native): rows equal one-by-one fills."""
    import array

    from grid_core.protocol import fill_rows

    guides = [engine().guide(audit=False, events=SPEC) for _ in range(2)]
    for b in b"select * from ":
        guides[1].accept_token(b)
    batch = array.array("i", bytes(4 * engine().n_words * 2))
    assert fill_rows(guides, memoryview(batch).cast("B").cast("i", (2, engine().n_words))) == [
        None,
        None,
    ]
    for i, guide in enumerate(guides):
        one = array.array("i", bytes(4 * engine().n_words))
        guide.fill_next_token_bitmask(one)
        assert batch[i * engine().n_words : (i + 1) * engine().n_words] == one
