"""The mask cache: cache-on equals cache-off, mask for mask (OBL-KEY1), and its guards.

Differential replays: seeded random walks over the masks, each step's mask
computed by an engine without cache and by engines with T1 and a shared T2.
Two roles of one dialect share T2 (cross-role hits); a namespace rollover
happens mid-run; several threads publish concurrently.
"""

from __future__ import annotations

import random
import threading

import pytest
from toy import ANALYST, CRUD, EOS, LEXICON, TOY

from grid_core.cache import (
    CacheConsistencyError,
    GenericKey,
    IdentifierRuleError,
    IdentKey,
    SharedCache,
    make_entry,
)
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.vocab import Vocabulary
from grid_spec import Language

OFF_ANALYST = Engine(ANALYST, TOY, LEXICON, cache=False)
OFF_FULL = Engine(CRUD, TOY, LEXICON, cache=False)


def replay(engines: list[Engine], seed: int, steps: int = 40) -> int:
    """Drive one guide per engine with the same random tokens; return masks compared."""
    rng = random.Random(seed)
    guides = [GridGuide(e) for e in engines]
    compared = 0
    for _ in range(steps):
        masks = [g.mask_ids() for g in guides]
        assert all(m == masks[0] for m in masks), "cache-on differs from cache-off"
        compared += 1
        choice = rng.choice(masks[0])
        if choice == EOS:
            break
        for g in guides:
            g.accept_token(choice)
    return compared


def test_cache_on_equals_cache_off() -> None:
    shared = SharedCache(OFF_ANALYST.family)
    on = Engine(ANALYST, TOY, LEXICON, cache=shared, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie)
    compared = sum(replay([OFF_ANALYST, on], seed) for seed in range(60))
    assert compared > 600
    assert on.t1 is not None and on.t1.hits > 0  # the cache was exercised, not bypassed


def test_two_roles_share_t2() -> None:
    shared = SharedCache(OFF_ANALYST.family)
    analyst = Engine(
        ANALYST, TOY, LEXICON, cache=shared, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie
    )
    full = Engine(CRUD, TOY, LEXICON, cache=shared, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie)
    for seed in range(20):
        replay([OFF_ANALYST, analyst], seed)
    before = shared.table.hits
    for seed in range(20):
        replay([OFF_FULL, full], 1000 + seed)
    assert shared.table.hits > before  # the full role hit entries the analyst published


def test_namespace_rollover_mid_run() -> None:
    shared = SharedCache(OFF_ANALYST.family)
    on = Engine(ANALYST, TOY, LEXICON, cache=shared, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie)
    for seed in range(10):
        replay([OFF_ANALYST, on], seed)
    published = len(shared.table)
    assert shared.rollover() == 1
    assert len(shared.table) == 0 < published
    for seed in range(10):
        replay([OFF_ANALYST, on], seed)
    assert len(shared.table) > 0


def test_concurrent_publishers_agree() -> None:
    shared = SharedCache(OFF_ANALYST.family)
    engines = [
        Engine(ANALYST, TOY, LEXICON, cache=shared, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie)
        for _ in range(4)
    ]
    errors: list[BaseException] = []

    def run(engine: Engine) -> None:
        try:
            for seed in range(15):
                replay([OFF_ANALYST, engine], seed)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_racing_publish_with_a_different_payload_raises() -> None:
    shared = SharedCache("family")
    key = GenericKey(0, 0, b"", 0b1)
    shared.table.publish(key, make_entry(key, [1, 2], [], TOY.n_vocab))
    shared.table.publish(key, make_entry(key, [1, 2], [], TOY.n_vocab))  # idempotent
    with pytest.raises(CacheConsistencyError):
        shared.table.publish(key, make_entry(key, [1, 3], [], TOY.n_vocab))


def test_generic_entry_at_an_identifier_position_raises() -> None:
    engine = Engine(ANALYST, TOY, LEXICON, dfa=OFF_ANALYST.dfa, trie=OFF_ANALYST.trie)
    guide = GridGuide(engine)
    for b in b"select * from ":
        guide.accept_token(b)
    config = guide.config
    allowed = engine.parser.allowed(config.node)
    assert allowed & engine.lexicon.categories  # TABLE_NAME: an identifier position
    key = engine.key(0, config.normal, allowed)
    assert isinstance(key, IdentKey)
    forged = make_entry(
        GenericKey(key.namespace, key.root, key.remainder, key.allowed), [ord("s")], [], TOY.n_vocab
    )
    assert engine.t1 is not None
    engine.t1.inject(key, forged)
    with pytest.raises(IdentifierRuleError):
        guide.mask_ids()


def test_adaptive_encodings_round_trip() -> None:
    key = GenericKey(0, 0, b"", 1)
    few = make_entry(key, [5, 3, 260], [], TOY.n_vocab)
    many = make_entry(key, list(range(0, 250, 2)), [], TOY.n_vocab)
    assert (few.encoding, many.encoding) == (b"S", b"D")
    assert few.ids == (3, 5, 260) and many.ids == tuple(range(0, 250, 2))
    assert few.entry_id != make_entry(key, [3, 5], [], TOY.n_vocab).entry_id


def test_guides_with_and_without_cache_share_nothing_mutable() -> None:
    a: GridGuide = GridGuide(Engine(ANALYST, TOY, LEXICON))
    b: GridGuide = GridGuide(OFF_ANALYST)
    assert a.mask_ids() == b.mask_ids()


def test_cache_on_equals_cache_off_on_a_real_vocabulary() -> None:
    from grid_core.vocab import cl100k

    vocab = cl100k()
    off = Engine(ANALYST, vocab, LEXICON, cache=False)
    shared = SharedCache(off.family)
    on = Engine(ANALYST, vocab, LEXICON, cache=shared, dfa=off.dfa, trie=off.trie)
    rng = random.Random(7)
    for _ in range(3):
        g_off, g_on = GridGuide(off), GridGuide(on)
        text = b"select name from employees where id = 'x';"
        while text:  # follow a SQL statement, token by token, as a model would
            m_off, m_on = g_off.mask_ids(), g_on.mask_ids()
            assert m_off == m_on
            fits = [i for i in m_on if i != vocab.eos_id and text.startswith(vocab.token_bytes[i])]
            t = (
                max(fits, key=lambda i: len(vocab.token_bytes[i]))
                if rng.random() < 0.7
                else min(fits)
            )
            g_off.accept_token(t)
            g_on.accept_token(t)
            text = text[len(vocab.token_bytes[t]) :]
    assert on.t1 is not None and on.t1.hits > 0


#: Two lexicon categories over one regex, with a word in both: which one a
#: configuration allows is what its identifier key must tell apart.
TWO_CATEGORIES = {
    "TABLE_NAME": [b"employees", b"orders", b"notes"],
    "COLUMN_NAME": [b"id", b"name", b"orders", b"notes_id"],
}


@pytest.mark.parametrize("path", ["python", "kernels"])
def test_cache_on_equals_cache_off_with_two_lexicon_categories(path: str) -> None:
    """OBL-KEY1 on each backend by itself (``python``: the kernels switched off, as
    ``GRID_KERNELS=0`` does): 60 seeded replays of the full CRUD grammar with two
    lexicon categories, every mask of the cached engine (T1 and a shared T2) equal
    to the uncached one's. Fails if an identifier key forgets what separates two
    configurations (dropping the allowed set from ``IdentKey`` is caught here)."""
    off = Engine(CRUD, TOY, TWO_CATEGORIES, cache=False)
    on = Engine(
        CRUD, TOY, TWO_CATEGORIES, cache=SharedCache(off.family), dfa=off.dfa, trie=off.trie
    )
    if path == "python":
        off.kernel = on.kernel = None
    elif on.kernel is None:
        pytest.skip("grid-kernels is not installed")
    compared = sum(replay([off, on], seed) for seed in range(60))
    assert compared > 600
    assert on.t1 is not None and on.t1.hits > 0


#: Two schemas of one walk family (same DFA, ignored terminals, pick order and trie: one T2):
#: an identifier entry one publishes must never serve the other.
OTHER_SCHEMA = {
    "TABLE_NAME": [b"invoices", b"orders", b"emp"],
    "COLUMN_NAME": [b"total", b"id", b"ordered_at"],
}


@pytest.mark.parametrize("path", ["python", "kernels"])
def test_two_schemas_share_t2_but_no_identifier_entry(path: str) -> None:
    """Two schemas share one T2 (generic entries are hit across them), and every mask
    of each equals its own uncached engine's: an identifier key must carry the
    schema fingerprint (a T2 hit across schemas is caught here, on each backend)."""
    offs = [Engine(CRUD, TOY, words, cache=False) for words in (TWO_CATEGORIES, OTHER_SCHEMA)]
    shared = SharedCache(offs[0].family)
    assert offs[1].family == shared.family
    ons = [Engine(CRUD, TOY, off.lexicon, cache=shared, dfa=off.dfa, trie=off.trie) for off in offs]
    if path == "python":
        for e in (*offs, *ons):
            e.kernel = None
    elif ons[0].kernel is None:
        pytest.skip("grid-kernels is not installed")
    for seed in range(12):
        replay([offs[0], ons[0]], seed)
    before = shared.table.hits
    for seed in range(12):
        replay([offs[1], ons[1]], seed)
    assert shared.table.hits > before  # the second schema hit entries the first published


#: A hand-checkable grammar where the normal form's ``v`` (the bytes after the
#: last accepted prefix) is not determined by the DFA state: after ``ab`` and
#: ``abb`` the automaton is in one state (inside ``C``), the last accept is ``a``
#: in both, and only ``v`` (``b`` or ``bb``) tells whether ``x`` or ``y`` follows.
V_GRAMMAR = """
start: A B X | A B B Y | C
A: "a"
B: "b"
C: /ab+c/
X: "x"
Y: "y"
"""
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {256}, (256,))


@pytest.mark.parametrize("path", ["python", "kernels"])
def test_the_normal_form_key_keeps_v(path: str) -> None:
    """``ab`` admits ``x`` and ``abb`` admits ``y`` (the specification's masks), with
    the cache on and off, in either order: a key that dropped ``v`` would hand the
    first configuration's walk to the second."""
    grammar = load_grammar(V_GRAMMAR, "v")
    spec = Language(grammar.to_lark())
    off = Engine(grammar, BYTES, cache=False)
    on = Engine(grammar, BYTES, cache=SharedCache(off.family), dfa=off.dfa, trie=off.trie)
    if path == "python":
        off.kernel = on.kernel = None
    elif on.kernel is None:
        pytest.skip("grid-kernels is not installed")
    for text in (b"ab", b"abb", b"abbb", b"ab"):
        expected = sorted(spec.mask(BYTES.token_bytes, BYTES.special_ids, 256, text))
        for engine in (off, on):
            guide = GridGuide(engine)
            for b in text:
                guide.accept_token(b)
            assert guide.mask_ids() == expected, (text, engine.t1 is not None)
    assert spec.mask(BYTES.token_bytes, {256}, 256, b"ab") == set(b"bcx")
    assert spec.mask(BYTES.token_bytes, {256}, 256, b"abb") == set(b"bcy")
