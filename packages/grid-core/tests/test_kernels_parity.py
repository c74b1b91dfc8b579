"""grid-kernels against grid-core's Python path, bit for bit.

The pure-Python path is the reference (DESIGN.md section 1): for every
configuration below, the kernels' allowed set, root walk (CI trie nodes and CD
entries, in order), whole mask (``Engine.compute_mask`` of an engine without
cache, field for field), lexer advance and filled bitmask (equal to
``Engine.pack`` of the Python ids) must equal the Python results.

Matrix: grammars {CRUD analyst projection with its lexicon, the sqlite dialect
of grid-sql without lexicon (139 terminals: three-word bitsets)} x vocabularies
{toy, cl100k, Qwen}. Configurations come from

- scripted statements, cut at every token boundary of a greedy tokenization
  and at a few mid-token bytes: mid-lexeme identifiers and keywords, runs of
  whitespace, inside string literals and comments, complete statements (EOS);
- seeded random replays driven by the kernels' own masks (each step checked
  against Python before it is taken), biased towards printable multi-byte
  tokens, cut when a remainder grows long.

The whole sweep (every configuration) runs in ``nox -s differential``; the
default suite runs a seeded sample of it. Skips cleanly when the extension is
absent.
"""

from __future__ import annotations

import array
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import pytest

pytest.importorskip("grid_kernels._native")

from toy import ANALYST, LEXICON, TOY

import grid_kernels
from grid_core import vocab as vocab_module
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.lexer import Config
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
    """The Python reference engine and the kernels' tables for one cell."""

    engine: Engine
    kernels: grid_kernels.EngineTables


@cache
def pair(grammar: str, vocab: str) -> Pair:
    v, trie, shared = trie_tables(vocab)
    if grammar == "crud":
        engine = Engine(ANALYST, v, LEXICON, trie=trie, cache=False)
    else:
        engine = Engine(sqlite_grammar(), v, trie=trie, cache=False)
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


def token_prefixes(engine: Engine, text: bytes) -> Iterator[bytes]:
    """Prefixes of ``text`` at the boundaries of a greedy longest-token
    tokenization, plus one byte into every multi-byte token (mid-token)."""
    pos = 0
    yield b""
    for token in greedy_tokens(engine, text):
        n = len(engine.vocab.token_bytes[token])
        if n > 1:
            yield text[: pos + 1]
        pos += n
        yield text[:pos]


@cache
def configurations(grammar: str, vocab: str) -> tuple[tuple[Config, bytes], ...]:
    """(configuration, bytes of a token in its mask) pairs, deduplicated, in a
    fixed order: scripted prefixes first, then random replays."""
    p = pair(grammar, vocab)
    engine, kernels = p.engine, p.kernels
    lexer, vocab_bytes = engine.lexer, engine.vocab.token_bytes
    seen: set[tuple[tuple[int, ...], bytes]] = set()
    out: list[tuple[Config, bytes]] = []

    def add(config: Config, data: bytes) -> None:
        key = (tuple(config.node.states()), config.remainder)
        if key not in seen:
            seen.add(key)
            out.append((config, data))

    for script in CRUD_SCRIPTS if grammar == "crud" else SQLITE_SCRIPTS:
        prefixes = list(token_prefixes(engine, script))
        for a, b in zip(prefixes, [*prefixes[1:], script], strict=True):
            config = lexer.advance(lexer.initial, a)
            assert config is not None and lexer.is_viable(config), (script, a)
            add(config, b[len(a) :])
    rng = random.Random(f"{grammar}/{vocab}")
    eos = set(engine.vocab.eos_ids)
    for _ in range(REPLAYS):
        config = lexer.initial
        for _ in range(STEPS):
            if len(config.remainder) > MAX_REMAINDER:
                break
            ci, cd, _, _, _ = kernels.compute_mask(config.node.states(), config.remainder)
            ids = [i for i in [*ci, *cd] if i not in eos]
            printable = [i for i in ids if all(0x20 <= c < 0x7F for c in vocab_bytes[i])]
            longer = [i for i in printable if len(vocab_bytes[i]) > 1]
            choice = rng.choice(longer if longer and rng.random() < 0.6 else printable or ids)
            add(config, vocab_bytes[choice])
            nxt = lexer.advance(config, vocab_bytes[choice])
            assert nxt is not None
            config = nxt
    return tuple(out)


def sample(grammar: str, vocab: str, slow: bool) -> list[tuple[Config, bytes]]:
    configs = list(configurations(grammar, vocab))
    if slow:
        return configs
    rng = random.Random(f"sample/{grammar}/{vocab}")
    return rng.sample(configs, min(SAMPLE, len(configs)))


# ------------------------------------------------------------------ the checks


def check_configuration(p: Pair, config: Config, data: bytes) -> None:
    engine, kernels = p.engine, p.kernels
    states, remainder = config.node.states(), config.remainder
    where = f"stack {states} remainder {remainder!r}"

    allowed = engine.parser.allowed(config.node)
    assert kernels.allowed(states) == allowed, where

    ci, cd = walk_from(engine.scanner, engine.trie, 0, remainder, allowed, False)
    assert kernels.walk(0, remainder, allowed) == (ci, cd), where
    # The first CD class's sub-walks, node for node (the rest via compute_mask).
    if cd:
        t = cd[0][1]
        after = engine.parser.allowed(engine.parser.shift(config.node, t))
        assert kernels.allowed(kernels.shift(states, t)) == after, where
        for node, term, tail in cd[:8]:
            if term == t:
                expected = walk_from(engine.scanner, engine.trie, node, tail, after, True)
                assert kernels.walk(node, tail, after, True) == expected, (where, node)

    result = engine.compute_mask(config)
    got = kernels.compute_mask(states, remainder)
    assert got == (
        list(result.ci_ids),
        list(result.cd_ids),
        result.eos,
        result.cd_entries,
        result.cd_classes,
    ), where
    assert kernels.eos_allowed(states, remainder) == engine.lexer.eos_allowed(config), where

    ids = [*result.ci_ids, *result.cd_ids, *(engine.vocab.eos_ids if result.eos else ())]
    packed = engine.pack(ids)
    out = array.array("i", [-1]) * engine.n_words
    assert kernels.fill_next_token_bitmask(states, remainder, out) == len(set(ids)), where
    assert out == packed, where
    raw = bytearray(4 * engine.n_words)
    kernels.fill_bitmask(result.ci_ids, result.cd_ids, result.eos, raw)
    assert bytes(raw) == packed.tobytes(), where

    nxt = engine.lexer.advance(config, data)
    expected_adv = None if nxt is None else (nxt.node.states(), nxt.remainder)
    assert kernels.advance(states, remainder, data) == expected_adv, (where, data)


CELLS = [
    pytest.param(g, v, id=f"{g}-{v}") for g in ("crud", "sqlite") for v in ("toy", "cl100k", "qwen")
]


@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_kernels_match_python_on_a_sample(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    for config, data in sample(grammar, vocab, slow=False):
        check_configuration(p, config, data)


@pytest.mark.slow
@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_kernels_match_python_everywhere(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    for config, data in sample(grammar, vocab, slow=True):
        check_configuration(p, config, data)


def test_the_matrix_reaches_the_positions_it_claims() -> None:
    """Scripted prefixes reach mid-lexeme, whitespace, string, comment and EOS
    configurations, and there are a few hundred configurations overall."""
    crud = [c for c, _ in configurations("crud", "cl100k")]
    remainders = [c.remainder for c in crud + [c for c, _ in configurations("sqlite", "qwen")]]
    assert any(r.startswith(b"emplo") for r in remainders)  # mid-identifier
    assert any(r.startswith(b"'") and len(r) > 2 for r in remainders)  # inside a string
    assert any(r.startswith(b"--") for r in remainders)  # inside a comment
    assert any(r.isspace() and len(r) > 1 for r in remainders)  # whitespace run
    assert any(pair("crud", "cl100k").engine.lexer.eos_allowed(c) for c in crud)  # complete
    total = sum(len(configurations(g, v)) for g in ("crud", "sqlite") for v in VOCABS)
    assert total >= 300, total


# ------------------------------------------------------------------ bad input


def test_bad_input_raises_on_real_tables() -> None:
    p = pair("sqlite", "cl100k")
    kernels, n_words = p.kernels, p.engine.n_words
    allowed = p.engine.parser.allowed(p.engine.parser.root)
    n_nodes = p.engine.trie.n_nodes
    with pytest.raises(ValueError, match=f"trie node {n_nodes} is out of range"):
        kernels.walk(n_nodes, b"", allowed)
    with pytest.raises(ValueError, match="expected"):
        kernels.fill_next_token_bitmask([0], b"", array.array("i", bytes(4 * (n_words - 1))))
    with pytest.raises(ValueError, match="expected"):
        kernels.fill_bitmask([], [], True, bytearray(4 * n_words + 4))
    with pytest.raises(TypeError, match="8-byte items"):
        kernels.fill_next_token_bitmask([0], b"", array.array("q", bytes(8 * n_words)))
    with pytest.raises(TypeError, match="read-only"):
        kernels.fill_bitmask([], [], True, bytes(4 * n_words))
    with pytest.raises(ValueError, match="out of range"):
        kernels.fill_bitmask([p.engine.vocab.n_vocab], [], False, bytearray(4 * n_words))
    with pytest.raises(ValueError, match="state"):
        kernels.compute_mask([0, p.engine.tables.n_states], b"")


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
