"""The guide protocol (grid_core.protocol): one contract, two implementations, one result.

``Engine.guide()`` gives the native session when grid-kernels is loaded and the
Python ``GridGuide`` otherwise; both must produce the same masks, records and
seals (the per-step lockstep of masks and records is
``test_kernels_session.py``). Here, the whole mode-1 loop is run on both with
the same sampler and seed, on the toy vocabulary and on real ones, with budgets
that make the reserve trigger fire: every token, count, audit line and seal
hash must be equal, and the native log must replay against the Python
reference (``grid audit replay``).
"""

from __future__ import annotations

import array
import os
import random
from collections.abc import Sequence
from functools import cache

import pytest
from toy import ANALYST, EOS, LEXICON, TOY, analyst_engine

from grid_core import vocab as vocab_module
from grid_core.audit import verify
from grid_core.compile import compile_grammar
from grid_core.decode import generate
from grid_core.errors import EMPTY_MASK, GuideError, MaskError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.protocol import Guide
from grid_core.replay import replay
from grid_core.trie import build_trie

native = pytest.importorskip("grid_kernels._native")

from grid_core.kernels import KernelGuide  # noqa: E402

#: A schema lexicon for the sqlite dialect (its three lexicon categories), as a
#: deployment has: the reserve table needs a word per category.
SQLITE_LEXICON = {
    "TABLE_NAME": [b"employees", b"departments", b"singer", b"stadium", b"concert", b"t"],
    "COLUMN_NAME": [b"id", b"name", b"budget", b"country", b"age", b"sid", b"x", b"y"],
    "CTE_NAME": [b"recent"],
}


@cache
def sqlite_engine(vocab: str) -> Engine:
    dialects = pytest.importorskip("grid_sql.dialects")
    v = {"cl100k": vocab_module.cl100k, "qwen": vocab_module.qwen}[vocab]()
    grammar = load_grammar(dialects.SQLITE.grammar_text, "sqlite")
    return Engine(grammar, v, SQLITE_LEXICON, trie=build_trie(v))


def native_only() -> None:
    """Skip a test of the native session's own parts under ``GRID_KERNELS=0``."""
    if os.environ.get("GRID_KERNELS") == "0":
        pytest.skip("tests the native session: GRID_KERNELS=0 switches it off")


def test_engine_guide_is_native_when_the_kernels_are_loaded() -> None:
    """Fails if ``Engine.guide()`` hands out the Python guide while the kernels are
    loaded, or the native one on an engine without them (``GRID_KERNELS=0``)."""
    engine = analyst_engine()
    guide = engine.guide()
    if os.environ.get("GRID_KERNELS") == "0":  # forced off: the Python guide, audited
        assert engine.kernel is None and type(guide) is GridGuide and guide.audited
    else:
        assert engine.kernel is not None
        assert isinstance(guide, KernelGuide) and guide.audited
    assert isinstance(guide, Guide) and isinstance(GridGuide(engine), Guide)
    assert not engine.guide(audit=False).audited
    python = Engine(ANALYST, TOY, LEXICON)
    python.kernel = None
    assert type(python.guide()) is GridGuide


def uniform(ids: Sequence[int], rng: random.Random) -> int:
    return rng.choice(ids)


def biased(ids: Sequence[int], rng: random.Random) -> int:
    """Avoids EOS most of the time, so that budgets run out and the reserve writes."""
    others = [i for i in ids if i != EOS] or list(ids)
    return rng.choice(list(ids) if rng.random() < 0.1 else others)


def same_generation(engine: Engine, sampler: object, budget: int, seed: int) -> int:
    """Generate on both guides; fail on any difference; return the tokens."""
    runs = []
    for guide in (GridGuide(engine), engine.guide()):
        runs.append(generate(guide, sampler, budget, random.Random(seed)))  # type: ignore[arg-type]
    py, rs = runs
    where = f"budget {budget} seed {seed}"
    assert rs.tokens == py.tokens and rs.text == py.text, where
    assert (rs.stop_reason, rs.sampled, rs.forced, rs.reserve, rs.early_triggers) == (
        py.stop_reason,
        py.sampled,
        py.forced,
        py.reserve,
        py.early_triggers,
    ), where
    assert rs.audit.lines() == py.audit.lines(), where
    assert rs.audit.seal_hash == py.audit.seal_hash and verify(rs.audit.lines()).ok
    return len(rs.tokens)


def test_mode1_decode_is_the_same_on_both_guides_toy() -> None:
    """40 decodes of the CRUD analyst grammar with its lexicon: free runs, and
    budgets small enough that the reserve trigger writes the completion."""
    engine = analyst_engine()
    reserve_runs = 0
    for seed in range(20):
        same_generation(engine, uniform, 40, seed)
        out = generate(engine.guide(), biased, 12, random.Random(seed))
        reserve_runs += out.stop_reason == "reserve"
        same_generation(engine, biased, 12, seed)
    assert reserve_runs > 0, "no budget made the reserve write"


@pytest.mark.parametrize("vocab", ["cl100k", "qwen"])
def test_mode1_decode_is_the_same_on_both_guides_real_vocabularies(vocab: str) -> None:
    engine = sqlite_engine(vocab)
    for seed, budget in [(0, 24), (1, 40), (2, 16)]:
        assert same_generation(engine, uniform, budget, seed) > 1


def test_native_logs_replay_against_the_python_reference() -> None:
    """A native mode-1 log is re-derived record by record by ``replay`` (which runs
    the Python guide): fails if any field differs."""
    engine = sqlite_engine("cl100k")
    for seed in range(3):
        gen = generate(engine.guide(), uniform, 30, random.Random(seed))
        verdict = replay(gen.audit.lines(), engine)
        assert verdict.ok, verdict


def test_accept_validate_and_rollback_agree() -> None:
    """accept_tokens stops at the first refused token, validate_tokens leaves the
    guide (and its records) as they were, rollback drops records: alike on both."""
    engine = analyst_engine()
    statement = [t for t in generate(GridGuide(engine), uniform, 30, random.Random(3)).tokens]
    for guide in (GridGuide(engine), engine.guide()):
        assert guide.validate_tokens([*statement, EOS]) == len(statement)
        assert guide.steps == 0 and guide.audit_log().records == []
        bad = [statement[0], -1, statement[1]]
        assert guide.accept_tokens(bad) == 1 and guide.steps == 1
        guide.rollback(1)
        assert guide.accept_tokens(statement, "forced") == len(statement)
        assert guide.is_terminated()
        assert [r.kind for r in guide.audit_log().records][-1] == "eos"
        with pytest.raises(GuideError):
            guide.accept_token(statement[0])
        guide.rollback(2)
        assert len(guide.audit_log().records) == guide.steps == len(statement) - 2
    py, rs = GridGuide(engine), engine.guide()
    for g in (py, rs):
        g.accept_tokens(statement[:3], "forced")
    assert rs.audit_log().lines() == py.audit_log().lines()
    assert rs.step_audit() == py.step_audit()
    assert rs.output() == py.output()


def test_a_dead_end_of_a_user_grammar_is_the_same_mask_error_on_both_guides() -> None:
    """``start: "if" NAME ";"`` with no blank: after ``if`` every NAME byte runs
    into the keyword's lexeme (maximal munch), so the viable prefix ``if`` has no
    completion. Both guides raise MaskError with the one detail that says so."""
    v = vocab_module.cl100k()
    engine = compile_grammar('start: "if" NAME ";"\n%import common.CNAME -> NAME\n', v)
    token = v.token_bytes.index(b"if")
    for guide in (GridGuide(engine), engine.guide()):
        guide.accept_token(token)
        with pytest.raises(MaskError) as err:
            guide.fill_next_token_bitmask(array.array("i", [0] * engine.n_words))
        assert (err.value.step, err.value.detail) == (1, EMPTY_MASK)
        assert "docs/lark.md" in str(err.value)


def test_python_fill_writes_one_row_like_the_native_fill() -> None:
    """GridGuide's fill (protocol.write_row) and the kernels' write the same row of a
    two-row buffer and nothing else; bad buffers are refused alike."""
    engine = analyst_engine()
    n = engine.n_words
    for guide in (GridGuide(engine), engine.guide()):
        buf = array.array("i", [7]) * (2 * n)
        np = pytest.importorskip("numpy")
        rows = np.frombuffer(buf, dtype=np.int32).reshape(2, n)
        guide.fill_next_token_bitmask(rows, 1)
        assert list(rows[0]) == [7] * n
        assert bytes(rows[1].tobytes()) == GridGuide(engine).mask().tobytes()
        with pytest.raises(ValueError, match="out of range"):
            guide.fill_next_token_bitmask(rows, 2)
        with pytest.raises(ValueError):
            guide.fill_next_token_bitmask(array.array("i", [0]) * (n + 1))
        with pytest.raises(TypeError):
            guide.fill_next_token_bitmask(array.array("q", [0]) * n)


def test_an_unaudited_guide_cannot_drive_mode_1() -> None:
    engine = analyst_engine()
    for guide in (GridGuide(engine, audit=False), engine.guide(audit=False)):
        with pytest.raises(GuideError, match="audit"):
            generate(guide, uniform, 20, random.Random(0))


def spelled_tokens(engine: Engine, statement: bytes) -> list[int]:
    """The tokens a model writing ``statement`` takes (at each step the admitted token
    whose spelling is the longest prefix of the rest), EOS last."""
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(engine.vocab.token_bytes):
        if b:
            spelled.setdefault(b, i)
    guide, out, pos = engine.guide(audit=False), [], 0
    while pos < len(statement):
        ids = set(guide.mask_ids())
        rest = statement[pos : pos + 32]
        token = next(
            spelled[rest[:k]]
            for k in range(len(rest), 0, -1)
            if rest[:k] in spelled and spelled[rest[:k]] in ids
        )
        guide.accept_token(token)
        out.append(token)
        pos += len(engine.vocab.token_bytes[token])
    return [*out, engine.vocab.eos_id]


@pytest.mark.parametrize(("threads", "reverse"), [(1, False), (2, False), (1, True)])
def test_batch_fill_equals_row_by_row(threads: int, reverse: bool) -> None:
    """``fill_rows`` over native guides (one kernels call, GIL released, on 1 and 2
    threads; guide ``i`` to row ``i`` or, ``reverse``, to the mirrored row) writes,
    at every step of every replay of the corpora, exactly the rows the guides
    write one by one; a terminated guide's entry is its error and its row is left
    as it was. Fails on any differing word."""
    np = pytest.importorskip("numpy")
    from test_differential import STATEMENTS
    from test_kernels_parity import SQLITE_SCRIPTS

    from grid_core.protocol import fill_rows

    cells = [(sqlite_engine("cl100k"), list(SQLITE_SCRIPTS)), (analyst_engine(), STATEMENTS)]
    for engine, statements in cells:
        seqs = [spelled_tokens(engine, s) for s in statements]
        guides = [engine.guide() for _ in seqs]
        n = engine.n_words
        for step in range(max(map(len, seqs)) + 1):
            batch = np.full((len(guides), n), 7, dtype=np.int32)
            rows = [len(guides) - 1 - i if reverse else i for i in range(len(guides))]
            errors = fill_rows(guides, batch, rows=rows if reverse else None, threads=threads)
            for i, (guide, error) in enumerate(zip(guides, errors, strict=True)):
                if guide.is_terminated():
                    assert isinstance(error, GuideError)
                    assert (batch[rows[i]] == 7).all()
                    continue
                assert error is None
                one = np.zeros(n, dtype=np.int32)
                guide.fill_next_token_bitmask(one)
                assert (batch[rows[i]] == one).all(), (engine, i, step)
                guide.accept_token(seqs[i][step])
        assert all(g.is_terminated() for g in guides)
        for g, seq in zip(guides, seqs, strict=True):
            assert [r.token for r in g.audit_log().records] == seq


def test_batch_fill_refuses_bad_batches_before_writing() -> None:
    native_only()
    np = pytest.importorskip("numpy")
    from grid_core.protocol import fill_rows

    engine = analyst_engine()
    g = engine.guide()
    batch = np.full((2, engine.n_words), 7, dtype=np.int32)
    with pytest.raises(ValueError, match="out of range"):
        fill_rows([g, engine.guide(), engine.guide()], batch)
    with pytest.raises(ValueError, match="1 rows for 2 guides"):
        fill_rows([g, engine.guide()], batch, rows=[0])
    import grid_kernels

    with pytest.raises(ValueError, match="two sessions"):
        grid_kernels.fill_next_token_bitmasks(
            [engine.guide()._native, engine.guide()._native], batch, [1, 1]
        )
    assert (batch == 7).all()


def test_memory_caps_hold_with_masks_unchanged() -> None:
    """An adversarial run (40 random generations, every mask compared) on an engine
    whose caches are capped at 1 MiB each stays under every cap, evicts, and fills
    the same rows as an uncapped engine; then a small repeated corpus on a fresh
    capped engine is served from the row memo at every step of its second pass
    (hit rate 100%). Fails on a cap passed, no eviction, a differing row or a miss."""
    native_only()
    np = pytest.importorskip("numpy")
    capped, free = sqlite_engine_fresh(), sqlite_engine("cl100k")
    cap = 1 << 20
    capped.kernel.set_caps(cap, cap, cap)
    rng = random.Random(7)
    n = capped.n_words
    for _ in range(40):
        a, b = capped.guide(audit=False), free.guide(audit=False)
        for _ in range(24):
            ra, rb = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32)
            a.fill_next_token_bitmask(ra)
            b.fill_next_token_bitmask(rb)
            assert (ra == rb).all()
            ids = np.flatnonzero(np.unpackbits(ra.view(np.uint8), bitorder="little"))
            t = int(rng.choice(ids))
            if t in capped.vocab.eos_ids:
                break
            a.accept_token(t)
            b.accept_token(t)
    memory = capped.kernel.memory()
    assert all(held <= limit for held, limit, _ in memory.values()), memory
    assert sum(evicted for _, _, evicted in memory.values()) > 0, memory

    from test_kernels_parity import SQLITE_SCRIPTS

    fresh = sqlite_engine_fresh()
    fresh.kernel.set_caps(8 << 20, 8 << 20, 8 << 20)
    seqs = [spelled_tokens(fresh, s) for s in SQLITE_SCRIPTS[:3]]
    row = np.zeros(fresh.n_words, dtype=np.int32)
    served = []
    for _ in range(2):
        served = []
        for seq in seqs:
            g = fresh.guide()
            for t in seq:
                g.fill_next_token_bitmask(row)
                served.append(g.last_fill)
                g.accept_token(t)
    assert served and all(s == "row" for s in served), served


def sqlite_engine_fresh() -> Engine:
    """A new sqlite/cl100k engine (its own kernel caches), sharing the trie."""
    engine = sqlite_engine("cl100k")
    return Engine(engine.grammar, engine.vocab, engine.lexicon, dfa=engine.dfa, trie=engine.trie)


def test_cache_caps_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    native_only()
    from grid_core.kernels import KernelsError, cache_caps

    monkeypatch.delenv("GRID_CACHE_MB", raising=False)
    assert cache_caps() is None
    monkeypatch.setenv("GRID_CACHE_MB", "10")
    assert cache_caps() == (4 << 20, 4 << 20, 2 << 20)
    engine = Engine(ANALYST, TOY, LEXICON)
    assert {k: v[1] for k, v in engine.kernel.memory().items()} == {
        "walks": 4 << 20,
        "chunks": 4 << 20,
        "rows": 2 << 20,
    }
    monkeypatch.setenv("GRID_CACHE_MB", "-1")
    with pytest.raises(KernelsError, match="GRID_CACHE_MB"):
        cache_caps()


def test_batch_fill_of_python_guides_writes_the_given_rows() -> None:
    """``fill_rows`` over Python guides fills row by row into ``rows``: the same
    words as the native batch, nothing written to the rows it was not given."""
    np = pytest.importorskip("numpy")
    from grid_core.protocol import fill_rows

    engine = analyst_engine()
    batch = np.full((3, engine.n_words), 7, dtype=np.int32)
    assert fill_rows([GridGuide(engine), GridGuide(engine)], batch, rows=[2, 0]) == [None, None]
    native = np.zeros(engine.n_words, dtype=np.int32)
    engine.guide().fill_next_token_bitmask(native)
    assert (batch[0] == native).all() and (batch[2] == native).all()
    assert (batch[1] == 7).all()


#: A second schema of the toy family, with two lexicon categories sharing a word.
TWO_CATEGORIES = {
    "TABLE_NAME": [b"employees", b"orders", b"notes"],
    "COLUMN_NAME": [b"id", b"name", b"orders", b"notes_id"],
}


@pytest.mark.parametrize(
    "family",
    [
        pytest.param([("crud", LEXICON), ("analyst", LEXICON)], id="two-roles"),
        pytest.param([("crud", LEXICON), ("crud", TWO_CATEGORIES)], id="two-schemas"),
        pytest.param(
            [("analyst", LEXICON), ("crud", TWO_CATEGORIES), ("analyst", TWO_CATEGORIES)],
            id="roles-and-schemas",
        ),
    ],
)
def test_native_t2_is_one_cache_for_the_family(family: list[tuple[str, dict]]) -> None:
    """T2 lives with the native tables: engines built with one ``SharedCache`` share
    one native walk cache. Along 30 seeded replays per engine (native guides, audit
    on), every mask equals the Python reference's without any cache; the engines
    after the first find walks the first published (the family's native cache
    grows by fewer walks than the same replays add to a fresh cache); identifier
    walks and verdicts are never served across lexicons (the two-schemas cases
    would fail on a mask). Fails on any differing mask or if nothing is shared."""
    native_only()
    from toy import CRUD

    from grid_core.cache import SharedCache
    from grid_core.kernels import _shared

    grammars = {"crud": CRUD, "analyst": ANALYST}
    base = Engine(CRUD, TOY, LEXICON, cache=False)

    def build(shared: SharedCache) -> list[Engine]:
        return [
            Engine(grammars[g], TOY, words, cache=shared, dfa=base.dfa, trie=base.trie)
            for g, words in family
        ]

    refs = [Engine(grammars[g], TOY, words, cache=False) for g, words in family]
    for ref in refs:
        ref.kernel = None  # the Python reference, uncached

    def replays(engine: Engine, ref: Engine) -> None:
        for seed in range(30):
            rng = random.Random(seed)
            guide, python = engine.guide(), GridGuide(ref)
            assert isinstance(guide, KernelGuide)
            for _ in range(25):
                mask = guide.mask_ids()
                assert mask == python.mask_ids(), (seed, guide.output())
                token = rng.choice(mask)
                guide.accept_token(token)
                python.accept_token(token)
                if token == EOS:
                    break

    shared = SharedCache(base.family)
    engines = build(shared)
    walks = _shared[shared]
    grown = []
    for engine, ref in zip(engines, refs, strict=True):
        before = walks.cached_walks
        replays(engine, ref)
        grown.append(walks.cached_walks - before)
    alone = []
    for i, ref in enumerate(refs):
        fresh = SharedCache(base.family)
        engine = build(fresh)[i]
        replays(engine, ref)
        alone.append(_shared[fresh].cached_walks)
    assert grown[0] == alone[0]
    assert sum(grown[1:]) < sum(alone[1:]), (grown, alone)


def test_config_key_is_a_mask_key_of_bounded_size() -> None:
    """The native guide's ``config_key`` (what the vLLM rows are cached by): over 40
    seeded replays, configurations with equal keys have equal masks; inside an open
    string literal 3,000 bytes long the key holds none of the literal's bytes (its
    ``v`` is empty), so a row cache keyed by it stays O(1) per token (requirement
    R). Fails if the key is the raw remainder, or drops a field two masks differ by."""
    native_only()
    engine = sqlite_engine("cl100k")
    seen: dict[object, list[int]] = {}
    for seed in range(40):
        rng = random.Random(seed)
        guide = engine.guide()
        for _ in range(30):
            mask = guide.mask_ids()
            assert seen.setdefault(guide.config_key(), mask) == mask, (seed, guide.output())
            token = rng.choice([t for t in mask if t not in engine.vocab.eos_ids] or mask)
            if token in engine.vocab.eos_ids:
                break
            guide.accept_token(token)
    assert len(seen) > 300
    trie = engine.trie
    byte = {b: trie.ids_at(trie.find(bytes([b])))[0] for b in b"SELECT 'ab "}
    guide = engine.guide()
    for b in b"SELECT '" + b"ab " * 1000:
        guide.accept_token(byte[b])
    states, _q, _ln, p, v = guide.config_key()  # type: ignore[misc]
    assert v == b"" and len(p) <= 64 and len(states) < 10
