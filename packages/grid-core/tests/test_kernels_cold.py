"""The cold miss in Rust: entry ids byte-identical to grid-core's, parallel
walks bit-identical to one thread, and the GIL released while walking.

``EngineTables.register`` does a whole cache miss of ``Engine.walk`` in one
call: the key (``Engine.key``: the normal form of a root walk's remainder, a
sub-walk's raw tail; identifier or generic), the walk (a root walk spread over
a rayon pool), the CD classes, the payload encoding and the entry id. Its
handle must equal ``cache.make_entry`` of the pure-Python walk field for field
(kind, encoding, payload bytes, CD entries, entry id), for root walks and CD
sub-walks, identifier and generic positions, namespaces 0 and 3.

Configurations come from ``test_kernels_parity`` (scripted prefixes and seeded
replays); the default suite samples them, ``-m slow`` takes all.
"""

from __future__ import annotations

import array
import dataclasses
import functools
import random
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

pytest.importorskip("grid_kernels._native")

from test_kernels_parity import (
    SQLITE_SCRIPTS,
    Pair,
    configurations,
    greedy_tokens,
    pair,
    releases_the_gil,
    trie_tables,
)

import grid_kernels
from grid_core import kernels as kernels_module
from grid_core.cache import make_entry
from grid_core.guide import Engine
from grid_core.lexer import Config, Normal
from grid_core.walk import CDEntry, walk_from

SAMPLE = 12


@functools.cache
def reference_walk(
    engine: Engine, root: int, pending: bytes, a: int
) -> tuple[array.array[int], tuple[CDEntry, ...]]:
    """The pure-Python walk of ``(root, pending)`` under ``a``: its token ids (an
    int32 array, to keep the memo small) and its CD entries. The oracle is a pure
    function of its arguments (one engine per cell, from ``pair``), so it is
    computed once for the root walk's normal-form key, its raw key and both
    namespaces, and once for a walk the memo test repeats under another
    configuration; the kernels are asked afresh every time."""
    nodes, sub_cd = walk_from(engine.scanner, engine.trie, root, pending, a, root != 0)
    return array.array("i", engine.ids(nodes)), tuple(sub_cd)


@pytest.fixture(autouse=True, scope="module")
def _forget_reference_walks() -> Iterator[None]:
    """The memoized oracle holds Qwen-sized id arrays: freed with the module."""
    yield
    reference_walk.cache_clear()


def check_entry(
    p: Pair, namespace: int, root: int, pending: bytes, a: int, normal: Normal | None
) -> None:
    """The walk of ``(root, pending)`` under ``a``, keyed by ``normal`` (a root
    walk's normal form) or by its raw bytes (None), registered in Rust and
    through ``kernels.cold_entry``: both equal ``make_entry`` of the
    pure-Python walk, field for field."""
    engine, kernels = p.engine, p.kernels
    ids, sub_cd = reference_walk(engine, root, pending, a)
    form = pending if normal is None else normal
    key = dataclasses.replace(engine.key(root, form, a), namespace=namespace)
    expected = make_entry(key, ids, sub_cd, engine.vocab.n_vocab)
    got = kernels.register(namespace, root, pending, a, raw_key=normal is None)
    where = f"root {root} pending {pending!r} key {key}"
    assert (got.kind, got.encoding, got.payload) == (
        expected.kind,
        expected.encoding,
        expected.payload,
    ), where
    assert got.cd == expected.cd, where
    assert got.entry_id == expected.entry_id, where
    assert [t for t, _ in got.classes] == list(dict.fromkeys(t for _, t, _ in sub_cd))
    entry = kernels_module.cold_entry(SimpleNamespace(kernel=kernels), key, root, pending, a)
    assert (entry.kind, entry.encoding, entry.payload, entry.cd, entry.entry_id) == (
        expected.kind,
        expected.encoding,
        expected.payload,
        expected.cd,
        expected.entry_id,
    ), where


def check_entries(p: Pair, config: Config, namespace: int) -> int:
    """Root walk (keyed by its normal form, and by its raw bytes as
    ``Engine.walk(0, bytes)`` keys it) and the first CD class's sub-walks:
    Rust handle == make_entry."""
    engine = p.engine
    allowed = engine.parser.allowed(config.node)
    walks = [(0, config.remainder, allowed, config.normal), (0, config.remainder, allowed, None)]
    _, cd = reference_walk(engine, 0, config.remainder, allowed)
    if cd:
        after = engine.parser.allowed(engine.parser.shift(config.node, cd[0][1]))
        walks += [(n, tail, after, None) for n, t, tail in cd[:6] if t == cd[0][1]]
    for root, pending, a, normal in walks:
        check_entry(p, namespace, root, pending, a, normal)
    return len(walks)


CELLS = [
    pytest.param(g, v, id=f"{g}-{v}") for g in ("crud", "sqlite") for v in ("toy", "cl100k", "qwen")
]


def sample(grammar: str, vocab: str, slow: bool) -> list[Config]:
    p = pair(grammar, vocab)
    configs = [p.python(tokens).config for tokens, _ in configurations(grammar, vocab)]
    if slow:
        return configs
    return random.Random(f"cold/{grammar}/{vocab}").sample(configs, min(SAMPLE, len(configs)))


@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_registered_entries_equal_make_entry(grammar: str, vocab: str) -> None:
    """Fails if any field of a Rust-registered entry differs from grid-core's
    ``make_entry`` of the Python walk (a key field, the payload encoding, a CD
    entry, the hash input order)."""
    p = pair(grammar, vocab)
    walks = sum(
        check_entries(p, config, ns) for config in sample(grammar, vocab, False) for ns in (0, 3)
    )
    assert walks >= 2 * SAMPLE


def test_namespaces_past_i64_are_keyed_as_python_writes_them() -> None:
    """The native key wrote a namespace of 2^63 or more as a negative int
    (u64::MAX as "-1"): entry ids and shared-tier keys differed from Python's."""
    p = pair("sqlite", "cl100k")
    config = sample("sqlite", "cl100k", False)[0]
    for ns in (2**63, 2**64 - 1):
        check_entries(p, config, ns)


@pytest.mark.slow
@pytest.mark.parametrize(("grammar", "vocab"), CELLS)
def test_registered_entries_equal_make_entry_everywhere(grammar: str, vocab: str) -> None:
    p = pair(grammar, vocab)
    for config in sample(grammar, vocab, True):
        check_entries(p, config, 0)


def test_both_key_kinds_are_covered() -> None:
    """After ``from`` the CRUD analyst grammar is at an identifier position
    (TABLE_NAME is a lexicon category), after ``select`` it is not: both key
    encodings are checked by ``check_entries``. Fails if either is misjudged."""
    p = pair("crud", "cl100k")
    lexer, parser = p.engine.lexer, p.engine.parser
    for text, kind in [(b"select * from emplo", "ident"), (b"select sa", "generic")]:
        config = lexer.advance(lexer.initial, text)
        assert config is not None
        allowed = parser.allowed(config.node)
        assert p.kernels.register(0, 0, config.remainder, allowed).kind == kind
        assert check_entries(p, config, 0) >= 1


# ------------------------------------------------------------------ parallel walks


@pytest.mark.parametrize("vocab", ["cl100k", "qwen"])
def test_parallel_walks_equal_one_thread(vocab: str) -> None:
    """Root walks on 2, 3 and 8 threads equal the one-thread walk, CI nodes and
    CD entries in order; a registration on 2 threads has the one-thread entry
    id. Fails if the subtree split loses, duplicates or reorders anything."""
    p = pair("sqlite", vocab)
    _, _, shared = trie_tables(vocab)
    two = grid_kernels.engine_tables(p.engine, shared, threads=2)
    one = grid_kernels.engine_tables(p.engine, shared, threads=1)
    for config in sample("sqlite", vocab, False):
        allowed = p.engine.parser.allowed(config.node)
        single = p.kernels.walk(0, config.remainder, allowed, threads=1)
        for threads in (2, 3, 8, None):
            assert p.kernels.walk(0, config.remainder, allowed, threads=threads) == single
        a = one.register(0, 0, config.remainder, allowed)
        b = two.register(0, 0, config.remainder, allowed)
        assert a.entry_id == b.entry_id, config.remainder


@pytest.mark.parametrize("vocab", ["cl100k", "qwen"])
def test_parallel_verdicts_equal_one_thread(vocab: str) -> None:
    """Sessions on tables with 1 and 3 threads fill the same mask at every
    step of the scripted statements (greedy tokens). After an identifier or a
    keyword, the class of tokens that end it spans about half the trie: on 3
    threads its verdict is walked run by run (``PAR_VERDICT_NODES``). Fails if
    the runs lose or add a token (their order reaches no mask: the runs keep
    it anyway, so equal classes keep meeting one verdict memo)."""
    p = pair("sqlite", vocab)
    _, _, shared = trie_tables(vocab)
    one = grid_kernels.engine_tables(p.engine, shared, threads=1)
    three = grid_kernels.engine_tables(p.engine, shared, threads=3)
    n_words = p.engine.n_words
    walked = 0
    for text in SQLITE_SCRIPTS:
        sessions = (one.session(0), three.session(0))
        for token in greedy_tokens(p.engine, text):
            rows = [array.array("i", bytes(4 * n_words)) for _ in sessions]
            for s, row in zip(sessions, rows, strict=True):
                s.fill_next_token_bitmask(row)
            assert rows[0] == rows[1], (text, token)
            walked += sessions[1].last_fill == "walked"
            for s in sessions:
                s.accept_token(token)
    assert walked > 0


# ------------------------------------------------------------------ bad input


def test_register_rejects_bad_input() -> None:
    p = pair("sqlite", "cl100k")
    allowed = p.engine.parser.allowed(p.engine.parser.root)
    n_nodes = p.engine.trie.n_nodes
    with pytest.raises(ValueError, match=f"trie node {n_nodes} is out of range"):
        p.kernels.register(0, n_nodes, b"", allowed)
    with pytest.raises(ValueError, match="the automaton dies inside it"):
        p.kernels.register(0, 0, b"\xff\xfe", allowed)
    with pytest.raises(ValueError, match="has bit"):
        p.kernels.register(0, 0, b"", 1 << 4000)
    with pytest.raises(ValueError, match="threads must be from 1 to 256"):
        p.kernels.register(0, 0, b"", allowed, threads=0)
    with pytest.raises(OverflowError):
        p.kernels.register(-1, 0, b"", allowed)


# ------------------------------------------------------------------ the GIL


@pytest.mark.parametrize("call", ["register", "session fill", "batch fill"])
def test_cold_misses_release_the_gil(call: str) -> None:
    """A cold miss (on a fresh table set, so it walks: ``register``, a session's
    first fill, or a batch fill) runs with the GIL released: checked by the
    kernels' probe, deterministically (``test_kernels_parity.releases_the_gil``).
    """
    p = pair("sqlite", "qwen")
    _, _, shared = trie_tables("qwen")
    config = p.engine.lexer.advance(p.engine.lexer.initial, b"SELECT a")
    assert config is not None
    allowed = p.engine.parser.allowed(config.node)
    tables = grid_kernels.engine_tables(p.engine, shared, threads=1)
    row = array.array("i", bytes(4 * p.engine.n_words))
    spelling = p.engine.vocab.token_bytes
    session = tables.session()
    for t in [spelling.index(b"SELECT"), spelling.index(b" a")]:
        session.accept_token(t)

    def miss() -> None:
        if call == "register":
            tables.register(0, 0, config.remainder, allowed)
        elif call == "session fill":
            session.fill_next_token_bitmask(row)
            assert session.last_fill == "walked"
        else:
            (error,) = grid_kernels.fill_next_token_bitmasks([session], row)
            assert error is None and session.last_fill == "walked"

    releases_the_gil(miss)
