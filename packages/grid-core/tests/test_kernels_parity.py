"""grid-kernels against grid-core's Python path, bit for bit.

The pure-Python path is the reference (DESIGN.md section 1). At every
configuration below a native session (``grid_kernels.Session``, what
``Engine.guide()`` serves) and the Python :class:`GridGuide` of an engine with
no cache and no kernels, driven by the same tokens, must agree on the
configuration (stack and remainder: ``Parser.shift``/``Lexer.advance``), the
mask ids, the filled bitmask (``Engine.pack`` of the Python ids), the EOS gate,
the step's audit fields, and the next token's verdict; and the native root walk
(``EngineTables.walk``, also behind grid-core's native cold misses) must equal
``walk_from`` node for node, with the first CD class's sub-walks.

Matrix: grammars {CRUD analyst projection with its lexicon, the sqlite dialect
of grid-sql without lexicon (139 terminals: three-word bitsets)} x vocabularies
{toy, cl100k, Qwen}. Configurations come from

- scripted statements, cut at every token boundary of a greedy tokenization
  and one byte into every multi-byte token: mid-lexeme identifiers and
  keywords, runs of whitespace, inside string literals and comments, complete
  statements (EOS);
- seeded random replays driven by the session's own masks, biased towards
  printable multi-byte tokens, cut when a remainder grows long.

The whole sweep (every configuration) runs in ``nox -s differential``; the
default suite runs a seeded sample of it. Skips cleanly when the extension is
absent.
"""

from __future__ import annotations

import array
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import pytest

pytest.importorskip("grid_kernels._native")

from toy import ANALYST, LEXICON, TOY

import grid_kernels
from grid_core import vocab as vocab_module
from grid_core.errors import GuideError
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.kernels import KernelGuide, native_session
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_core.walk import walk_from

# ------------------------------------------------------------------ the matrix

CRUD_SCRIPTS = (
    b"select * from employees;",
    b"select sal, yer from orders where sal <> 'it''s a test' and yer >= 1.5;",
    b"select  yer\tfrom employees_public -- a note\n where sal=1;",
    b"select sal from orders where sal < 10 and yer > 2 and sal = 'x';",
)
SQLITE_SCRIPTS = (
    b"SELECT count(*) FROM singer;",
    b"SELECT name ,  country ,  age FROM singer ORDER BY age DESC;",
    b"SELECT avg(age) , min(age) FROM singer WHERE country  =  'France''s' -- x\n;",
    b"SELECT T1.name FROM stadium AS T1 JOIN concert AS T2 ON T1.id = T2.sid "
    b"GROUP BY T1.name HAVING count(*) > 1 LIMIT 3;",
    b'select "weird col", 1.5e3 from t where x in (1, 2) and y like "a%";',
)
SAMPLE = 32  # configurations per (grammar, vocabulary) in the default suite
REPLAYS, STEPS, MAX_REMAINDER = 10, 20, 12


@cache
def sqlite_grammar() -> Grammar:
    grid_sql_dialects = pytest.importorskip("grid_sql.dialects")
    return load_grammar(grid_sql_dialects.get_dialect("sqlite").grammar_text, "sqlite")


VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "toy": lambda: TOY,
    "cl100k": vocab_module.cl100k,
    "qwen": vocab_module.qwen,
}


@cache
def trie_tables(vocab: str) -> tuple[Vocabulary, TokenTrie, grid_kernels.TrieTables]:
    """One vocabulary, its Python trie and the kernels' copy (shared by grammars)."""
    v = VOCABS[vocab]()
    trie = build_trie(v)
    return v, trie, grid_kernels.trie_tables(trie, v)


@dataclass
class Pair:
    """The Python reference engine (no cache, no kernels) and the kernels'
    tables for one cell."""

    engine: Engine
    kernels: grid_kernels.EngineTables

    def python(self, tokens: Sequence[int]) -> GridGuide:
        guide = GridGuide(self.engine, audit=False)  # step_audit() still answers
        for t in tokens:
            guide.accept_token(t)
        return guide

    def native(self, tokens: Sequence[int]) -> KernelGuide:
        guide = KernelGuide(self.engine, native_session(self.kernels, 0, True))
        for t in tokens:
            guide.accept_token(t)
        return guide


@cache
def pair(grammar: str, vocab: str) -> Pair:
    v, trie, shared = trie_tables(vocab)
    if grammar == "crud":
        engine = Engine(ANALYST, v, LEXICON, trie=trie, cache=False)
    else:
        engine = Engine(sqlite_grammar(), v, trie=trie, cache=False)
    engine.kernel = None  # the reference: Python walks only
    return Pair(engine, grid_kernels.engine_tables(engine, shared))


def greedy_tokens(engine: Engine, text: bytes) -> list[int]:
    """A greedy longest-token tokenization of ``text`` (the smallest id of
    each spelling; no special ids)."""
    spell: dict[bytes, int] = {}
    for i, b in enumerate(engine.vocab.token_bytes):
        if b and i not in engine.vocab.special_ids:
            spell.setdefault(b, i)
    longest = max(len(b) for b in spell)
    tokens: list[int] = []
    pos = 0
    while pos < len(text):
        widths = range(min(longest, len(text) - pos), 0, -1)
        n = next(k for k in widths if text[pos : pos + k] in spell)
        tokens.append(spell[text[pos : pos + n]])
        pos += n
    return tokens


def token_cuts(engine: Engine, text: bytes) -> Iterator[tuple[list[int], int]]:
    """(tokens of a prefix, the next token) at every boundary of a greedy
    tokenization of ``text``, plus one byte into every multi-byte token."""
    tokens = greedy_tokens(engine, text)
    spell = engine.vocab.token_bytes
    for k, token in enumerate(tokens):
        yield tokens[:k], token
        if len(spell[token]) > 1:
            head, rest = greedy_tokens(engine, spell[token][:1]), spell[token][1:]
            yield tokens[:k] + head, greedy_tokens(engine, rest)[0]
    yield tokens, engine.vocab.eos_id


@cache
def configurations(grammar: str, vocab: str) -> tuple[tuple[tuple[int, ...], int], ...]:
    """(tokens reaching a configuration, a token of its mask) pairs, one per
    configuration, in a fixed order: scripted cuts first, then random replays."""
    p = pair(grammar, vocab)
    engine, vocab_bytes = p.engine, p.engine.vocab.token_bytes
    seen: set[tuple[tuple[int, ...], bytes]] = set()
    out: list[tuple[tuple[int, ...], int]] = []

    def add(guide: KernelGuide, tokens: Sequence[int], token: int) -> None:
        states, remainder = guide.config()
        if (tuple(states), remainder) not in seen:
            seen.add((tuple(states), remainder))
            out.append((tuple(tokens), token))

    for script in CRUD_SCRIPTS if grammar == "crud" else SQLITE_SCRIPTS:
        for tokens, token in token_cuts(engine, script):
            add(p.native(tokens), tokens, token)
    rng = random.Random(f"{grammar}/{vocab}")
    eos = set(engine.vocab.eos_ids)
    for _ in range(REPLAYS):
        guide, tokens = p.native(()), []
        for _ in range(STEPS):
            if len(guide.config()[1]) > MAX_REMAINDER:
                break
            ids = [i for i in guide.mask_ids() if i not in eos]
            printable = [i for i in ids if all(0x20 <= c < 0x7F for c in vocab_bytes[i])]
            longer = [i for i in printable if len(vocab_bytes[i]) > 1]
            choice = rng.choice(longer if longer and rng.random() < 0.6 else printable or ids)
            add(guide, tokens, choice)
            guide.accept_token(choice)
            tokens.append(choice)
    return tuple(out)


def sample(grammar: str, vocab: str, slow: bool) -> list[tuple[tuple[int, ...], int]]:
    configs = list(configurations(grammar, vocab))
    if slow:
        return configs
    rng = random.Random(f"sample/{grammar}/{vocab}")
    return rng.sample(configs, min(SAMPLE, len(configs)))


# ------------------------------------------------------------------ the checks


def check_configuration(p: Pair, tokens: Sequence[int], token: int) -> None:
    engine = p.engine
    py, native = p.python(tokens), p.native(tokens)
    config = py.config
    states, remainder = config.node.states(), config.remainder
    where = f"stack {states} remainder {remainder!r}"
    assert native.config() == (states, remainder), where

    allowed = engine.parser.allowed(config.node)
    ci, cd = walk_from(engine.scanner, engine.trie, 0, remainder, allowed, False)
    assert p.kernels.walk(0, remainder, allowed) == (ci, cd), where
    # The first CD class's sub-walks, node for node (the rest via the mask).
    if cd:
        t = cd[0][1]
        after = engine.parser.allowed(engine.parser.shift(config.node, t))
        for node, term, tail in cd[:8]:
            if term == t:
                expected = walk_from(engine.scanner, engine.trie, node, tail, after, True)
                assert p.kernels.walk(node, tail, after, True) == expected, (where, node)

    assert native.mask_ids() == py.mask_ids(), where
    assert native.eos_allowed() == py.eos_allowed(), where
    out = array.array("i", [-1]) * engine.n_words
    native.fill_next_token_bitmask(out)
    assert out == py.mask(), where
    config_hash, entry_id, blocked = py.step_audit()
    assert native.step_audit() == (config_hash, entry_id, blocked), where

    assert native.validate_tokens([token]) == py.validate_tokens([token]) == 1, (where, token)
    py.accept_token(token)
    native.accept_token(token)
    if py.is_terminated():
        assert native.is_terminated(), where
    else:
        after_states, after_remainder = py.config.node.states(), py.config.remainder
        assert native.config() == (after_states, after_remainder), (where, token)
    record = native.audit_log().records[-1]
    kind = "eos" if token in engine.vocab.eos_ids else "sampled"
    assert record.fields()[1:-1] == (
        len(tokens),
        f"{config_hash:016x}",
        entry_id,
        token,
        blocked,
        kind,
    ), where


CELLS = [
    pytest.param(g, v, id=f"{g}-{v}") for g in ("crud", "sqlite") for v in ("toy", "cl100k", "qwen")
]


@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_kernels_match_python_on_a_sample(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    for tokens, token in sample(grammar, vocab, slow=False):
        check_configuration(p, tokens, token)


@pytest.mark.slow
@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_kernels_match_python_everywhere(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    for tokens, token in sample(grammar, vocab, slow=True):
        check_configuration(p, tokens, token)


def test_the_matrix_reaches_the_positions_it_claims() -> None:
    """Scripted cuts reach mid-lexeme, whitespace, string, comment and EOS
    configurations, and there are a few hundred configurations overall."""
    crud, sqlite = pair("crud", "cl100k"), pair("sqlite", "qwen")
    guides = [crud.python(t) for t, _ in configurations("crud", "cl100k")]
    remainders = [g.config.remainder for g in guides] + [
        sqlite.python(t).config.remainder for t, _ in configurations("sqlite", "qwen")
    ]
    assert any(r.startswith(b"emplo") for r in remainders)  # mid-identifier
    assert any(r.startswith(b"'") and len(r) > 2 for r in remainders)  # inside a string
    assert any(r.startswith(b"--") for r in remainders)  # inside a comment
    assert any(r.isspace() and len(r) > 1 for r in remainders)  # whitespace run
    assert any(g.eos_allowed() for g in guides)  # complete
    total = sum(len(configurations(g, v)) for g in ("crud", "sqlite") for v in VOCABS)
    assert total >= 300, total


# ------------------------------------------------------------------ bad input


def test_bad_input_raises_on_real_tables() -> None:
    p = pair("sqlite", "cl100k")
    n_words, guide = p.engine.n_words, p.native(())
    allowed = p.engine.parser.allowed(p.engine.parser.root)
    n_nodes = p.engine.trie.n_nodes
    with pytest.raises(ValueError, match=f"trie node {n_nodes} is out of range"):
        p.kernels.walk(n_nodes, b"", allowed)
    with pytest.raises(ValueError, match=f"{n_words - 1} 32-bit words per row"):
        guide.fill_next_token_bitmask(array.array("i", bytes(4 * (n_words - 1))))
    with pytest.raises(TypeError, match="8-byte 'q'"):
        guide.fill_next_token_bitmask(array.array("q", bytes(8 * n_words)))
    with pytest.raises(GuideError, match="outside the vocabulary"):
        guide.accept_token(p.engine.vocab.n_vocab)
    assert guide.steps == 0


# ------------------------------------------------------------------ the GIL


def releases_the_gil(call: Callable[[], object]) -> None:
    """Fail unless ``call``, run on a worker thread, releases the GIL while it walks.

    Deterministic, no timing: the kernels' GIL probe (armed here) makes the
    GIL-free part of a cold call wait until a Python thread releases it; this
    thread, running Python, releases it as soon as it sees the call waiting.
    Had the call kept the GIL, this thread could not run: the wait times out
    (30 s) and the probe reports it.
    """
    import grid_kernels._native as native

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            call()
        except BaseException as e:
            errors.append(e)

    native._probe_arm()
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        while not native._probe_reached() and thread.is_alive():
            time.sleep(0.001)  # runs only while the worker leaves the GIL free
        reached = native._probe_reached()
        native._probe_release()
        thread.join(60)
    finally:
        timed_out = native._probe_disarm()
    assert not errors, errors
    assert reached, "the call never reached the probe: it did not walk"
    assert not timed_out, "the call held the GIL while it walked"


def test_cold_walks_release_the_gil() -> None:
    """A cold walk (``EngineTables.walk``) runs with the GIL released."""
    p = pair("sqlite", "qwen")
    config = p.engine.lexer.advance(p.engine.lexer.initial, b"SELECT a -- every token fits")
    assert config is not None
    allowed = p.engine.parser.allowed(config.node)
    releases_the_gil(lambda: p.kernels.walk(0, config.remainder, allowed))


# ------------------------------------------------------------------ runs in strings

RUN_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "tag": {"type": "string", "pattern": "^[a-z0-9._-]{2,}$"},
        "note": {"type": "string"},
    },
    "required": ["name"],
}
RUN_TEXT = '{"name":"Ada Lovelace, 中文 ok","tag":"x.y-1","note":"héllo","extra":"k"}'.encode()


def test_walks_through_counted_strings_match_python() -> None:
    """Inside strings whose union state is a counter (``maxLength``), a pattern
    and plain text side by side, the native walk (which takes whole subtrees
    along such runs, ``Walker::run_lives``) equals ``walk_from`` node for node,
    and the mask the Python guide computes, at every token boundary of an
    instance, on cl100k."""
    from grid_core.jsonschema import schema_grammar

    v, trie, shared = trie_tables("cl100k")
    engine = Engine(load_grammar(schema_grammar(RUN_SCHEMA), "runs"), v, trie=trie, cache=False)
    engine.kernel = None
    p = Pair(engine, grid_kernels.engine_tables(engine, shared))
    cuts = list(token_cuts(engine, RUN_TEXT))
    inside = [c for c in cuts if p.python(c[0]).config.remainder.startswith(b'"')]
    assert len(inside) >= 12, len(inside)
    for tokens, token in inside[::2]:
        check_configuration(p, tokens, token)
