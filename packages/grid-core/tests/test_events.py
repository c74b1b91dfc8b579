"""Parse events (grid_core.events) on the CRUD toy grammar, against the specification.

- the stream at EOS equals the post-hoc sequence of the final sentence, as grid-core
  parses it and as grid-spec's lark tree gives it;
- every event is determined when emitted (sound: every sentence the shortest
  completions after each viable next byte reach has it) and was not determined
  one token earlier (zero late: its span was not yet written, or a sentence
  extending the previous prefix lacks it); each token here is one byte, so
  "one token earlier" is the previous byte;
- rollback drops the events of the rolled-back tokens, forks have their own stream;
- the Python and the native guide give the same stream, each checked against the
  specification on its own (``backend`` parametrises the spec tests) and against
  each other in seeded lockstep runs with multi-byte tokens, rollback and forks;
- a spec naming an unknown symbol or a nullable rule is refused, naming it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from toy import CRUD, EOS, LEXICON, TOY, token

from grid_core.complete import shortest_completion, shortest_suffix
from grid_core.errors import GuideError
from grid_core.events import Event, EventGuide, EventSpec, EventSpecError, EventStream, tracker
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


def native_guide(audit: bool = False) -> Any:
    if engine().kernel is None:
        pytest.skip("grid-kernels is not loaded (or GRID_KERNELS=0): no native guide")
    guide = engine().guide(audit=audit, events=SPEC)
    assert not isinstance(guide, EventGuide), "the native session tracks its own events"
    assert isinstance(guide, EventStream) and guide.spec == SPEC
    return guide


BACKENDS = ["python", "native"]


def guide_of(backend: str) -> Any:
    return python_guide() if backend == "python" else native_guide()


def run(text: bytes, backend: str = "python") -> Any:
    guide = guide_of(backend)
    for b in text:
        guide.accept_token(b)
    guide.accept_token(EOS)
    return guide


@cache  # the spec's answers are shared by the backends' checks
def spec_events(w: bytes) -> list[tuple[str, str, int, int]] | None:
    return language().events(w, SYMBOLS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", SENTENCES)
def test_stream_equals_post_hoc_parse(text: bytes, backend: str) -> None:
    stream = [e.key for e in run(text, backend).events()]
    assert stream == [e.key for e in tracker(engine(), SPEC).parse(text)]
    assert stream == spec_events(text)
    assert stream  # every sentence has a statement event


#: shortest_completion by (stack node, remainder): the search is a pure function of
#: the two (nodes are interned; the config kept here keeps its node's id taken).
#: Prefixes one byte apart reach the same configurations: 300 searches, 204 distinct.
_COMPLETIONS: dict[tuple[int, bytes], tuple[Any, bytes | None]] = {}


def completion(config: Any) -> bytes | None:
    key = (id(config.node), bytes(config.remainder))
    if key not in _COMPLETIONS:
        _COMPLETIONS[key] = (config, shortest_completion(engine(), config))
    return _COMPLETIONS[key][1]


@cache
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
        rest = completion(after)
        if rest is not None:
            out.append(prefix + extra + rest)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", SENTENCES[:4])
def test_each_event_emitted_at_the_first_step_that_determines_it(text: bytes, backend: str) -> None:
    events = run(text, backend).events()
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_statement_complete_before_eos(backend: str) -> None:
    text = b"select * from orders;"
    (statement,) = [e for e in run(text, backend).events() if e.kind == "statement"]
    assert statement.step == len(text)  # at ";", not at EOS


@pytest.mark.parametrize("backend", BACKENDS)
def test_rollback_and_fork_keep_independent_streams(backend: str) -> None:
    guide = guide_of(backend)
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
    native = native_guide()
    for t in tokens:
        native.accept_token(t)
    assert native.events() == python.events()
    assert [e.step for e in native.events()] == [e.step for e in python.events()]


def test_an_event_stream_starts_at_the_start_of_a_statement() -> None:
    """Wrapping a guide already underway would track the statement from its middle:
    refused, naming the tokens accepted; the guide is unchanged."""
    inner = GridGuide(engine(), audit=False)
    inner.accept_token(inner.mask_ids()[0])
    with pytest.raises(ValueError, match="has accepted 1 tokens"):
        EventGuide(inner, tracker(engine(), SPEC))
    assert inner.steps == 1


def test_events_off_is_the_plain_guide() -> None:
    guide = engine().guide(audit=False)
    assert not isinstance(guide, EventGuide)
    assert getattr(guide, "spec", None) is None


@pytest.mark.parametrize("seed", range(40))
def test_native_and_python_streams_agree_in_lockstep(seed: int) -> None:
    """Seeded runs: random admitted tokens (multi-byte ones favoured), rollbacks,
    validate_tokens and forks, audit on; after every verb the native stream equals
    the Python one, event for event and step for step, and the audit records stay
    equal (events change nothing of the step)."""
    import random

    rng = random.Random(seed)
    native, python = (
        native_guide(audit=True),
        EventGuide(GridGuide(engine()), tracker(engine(), SPEC)),
    )
    pairs = [(native, python)]
    for _ in range(60):
        n, p = pairs[-1] if rng.random() < 0.8 else rng.choice(pairs)
        if n.is_terminated():
            continue
        ids = p.mask_ids()
        assert n.mask_ids() == ids
        roll = rng.random()
        if roll < 0.1 and p.steps:
            k = rng.randint(1, min(4, p.steps))
            n.rollback(k)
            p.rollback(k)
        elif roll < 0.15:
            pairs.append((n.fork(), p.fork()))
        elif roll < 0.2:
            draft = [rng.choice(ids) for _ in range(3)]
            assert n.validate_tokens(draft) == p.validate_tokens(draft)
        else:
            multi = [t for t in ids if t >= 256 and t != EOS]
            eos = [EOS] if EOS in ids and rng.random() < 0.05 else []
            pick = rng.choice(eos or (multi if multi and rng.random() < 0.5 else ids))
            n.accept_token(pick)
            p.accept_token(pick)
        for a, b in pairs:
            assert a.events() == b.events()
            assert [e.step for e in a.events()] == [e.step for e in b.events()]
            assert a.event_count == b.event_count
            assert a.audit_log().records == b.audit_log().records


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


def test_eos_where_the_output_is_no_sentence_is_a_guide_error() -> None:
    """A caller that forces EOS (a failed row ended with EOS) before a sentence: the
    tracker once reduced ``$END`` as far as the tables allowed and said the stream was
    finished, so an EventStreamer lost the error (found by a review, session 45)."""
    t = tracker(engine(), SPEC)
    partial = t.advance(t.start(), b"select a from")
    with pytest.raises(GuideError, match="EOS before the output is a sentence"):
        t.finish(partial)
    done = t.finish(t.advance(t.start(), SENTENCES[1]))
    assert done.terminated
