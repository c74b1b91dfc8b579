"""The native covering guide against the reference, token for token.

:class:`grid_sql.native_scope.NativeScopedGuide` (grid-kernels' scoped session)
and :class:`grid_sql.column_scope.ScopedGuide` (the reference, Python) are driven
in lockstep over concert_singer's covering language (vendored): at every step
the two masks must be equal (ids, EOS included), a token one refuses the other
refuses and neither changes, and at the end their audit logs are equal line for
line. Driven by the Spider dev gold statements of the database and by random
walks over the mask with rollbacks and forks. ``bench/native_scope.py``
runs the same lockstep over every Spider dev database.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from test_column_scope import (
    check_reserve,
    covering_engines,
    engines,
    generation_engines,
    gold,
    steered,
    tokens,
    world,
)

from grid_core.decode import generate
from grid_core.errors import GuideError
from grid_core.reserve import INF
from grid_sql.column_scope import ScopedGuide, scoped_engines
from grid_sql.dialects import SQLITE
from grid_sql.native_scope import NativeScopedGuide

pytest.importorskip("grid_kernels._native", reason="grid-kernels is not installed")


def native(audit: bool = True) -> NativeScopedGuide:
    guide = covering_engines().guide(audit=audit)
    assert isinstance(guide, NativeScopedGuide), "the covering guide is native"
    return guide


def same_step(ref: ScopedGuide, nat: NativeScopedGuide) -> list[int]:
    """The two guides' masks and gates agree here; the mask."""
    mask = ref.mask_ids()
    assert nat.mask_ids() == mask, ref.output()
    assert nat.eos_allowed() == ref.eos_allowed()
    assert nat.steps == ref.steps and nat.output() == ref.output()
    assert nat.step_audit() == ref.step_audit(), ref.output()
    return mask


def accept_both(ref: ScopedGuide, nat: NativeScopedGuide, token: int) -> bool:
    """Accept ``token`` in both; whether they took it (they must agree)."""
    took = []
    for guide in (ref, nat):
        try:
            guide.accept_token(token)
            took.append(True)
        except GuideError:
            took.append(False)
    assert took[0] == took[1], (ref.output(), token)
    return took[0]


def test_gold_statements_read_alike() -> None:
    vocab, _ = world()
    read = 0
    for select_first, _ in gold("concert_singer"):
        ref, nat = ScopedGuide(covering_engines()), native()
        for token in [*tokens(select_first), vocab.eos_id]:
            same_step(ref, nat)
            if not accept_both(ref, nat, token):
                break
            read += 1
        assert nat.audit_log().lines() == ref.audit_log().lines(), select_first
    assert read > 300


@pytest.mark.parametrize("seed", range(4))
def test_random_walks_with_rollbacks_and_forks_read_alike(seed: int) -> None:
    """Each step: a token of the mask (EOS only sometimes), now and then a token
    outside it (refused by both), a rollback of up to 3 tokens, or a switch to a
    fork of each guide."""
    vocab, _ = world()
    rng = random.Random(seed)
    ref, nat = ScopedGuide(covering_engines()), native()
    eos = set(vocab.eos_ids)
    for _ in range(45):
        if ref.is_terminated():
            break
        mask = same_step(ref, nat)
        roll = rng.random()
        if roll < 0.1 and ref.steps:
            n = rng.randint(1, min(3, ref.steps))
            ref.rollback(n)
            nat.rollback(n)
            continue
        if roll < 0.2:
            ref, nat = ref.fork(), nat.fork()
        if roll < 0.3:
            outside = rng.choice([t for t in range(1000) if t not in set(mask)])
            assert not accept_both(ref, nat, outside)
            continue
        body = [t for t in mask if t not in eos]
        token = vocab.eos_id if (not body or rng.random() < 0.05) and ref.eos_allowed() else None
        if token is None:
            token = rng.choice(body)
        assert accept_both(ref, nat, token)
    assert nat.audit_log().lines() == ref.audit_log().lines()


def test_the_native_reserve_keeps_theorem_4s_obligations() -> None:
    """``reserve_source()`` mid-statement, natively: reserve 0 iff EOS is legal, the
    completion is that many tokens of the mask in turn, each step one less."""
    e = covering_engines()
    for prefix in ["SELECT name, ", "SELECT capacity FROM ", "SELECT singer.age FROM ", ""]:
        check_reserve(e, prefix, guide=native(audit=False))


@pytest.mark.parametrize("seed", range(4))
def test_the_native_reserve_is_the_references_at_every_step(seed: int) -> None:
    """Along a random walk over the mask, the native reserve source and the reference
    (``ScopedReserve``), each advanced by the walk's tokens, give the same reserve
    and the same completion at every state."""
    vocab, _ = world()
    rng = random.Random(seed)
    nat = native(audit=False)
    ref = ScopedGuide(covering_engines(), audit=False).reserve_source()
    source = nat.reserve_source()
    a, b = source.start(), ref.start()
    eos = set(vocab.eos_ids)
    for _ in range(40):
        assert source.reserve(a) == ref.reserve(b), nat.output()
        if ref.reserve(b) < INF:
            assert source.completion(a) == ref.completion(b), nat.output()
        body = [t for t in nat.mask_ids() if t not in eos]
        if not body:
            break
        token = rng.choice(body)
        nat.accept_token(token)
        a, b = source.advance(a, token), ref.advance(b, token)


def test_the_native_reserve_refuses_what_is_not_its_own() -> None:
    """A token id past the vocabulary, or a state of another reserve source
    (another ScopedEngines: its stack nodes name other stacks), panicked inside
    the kernels (an index out of bounds); both are a ValueError now."""
    vocab, _ = world()
    source, start = native(audit=False)._native.reserve_source()
    for token in (vocab.n_vocab, 2**32 - 1):
        with pytest.raises(ValueError, match=r"vocabulary|range"):
            source.advance(start, token)
    fresh = covering_engines.__wrapped__()  # engines of their own: another arena
    other = fresh.guide(audit=False)._native.reserve_source()[1]
    for call in (source.reserve, source.completion, lambda s: source.advance(s, 0)):
        with pytest.raises(ValueError, match="another reserve source"):
            call(other)
    assert source.reserve(start) < INF  # its own state still priced


@pytest.mark.parametrize("seed", range(6))
def test_mode1_decodes_alike(seed: int) -> None:
    """Mode 1 (``generate``) over the native guide and over the reference, with the
    same sampler and seed: the same tokens, stop, reserve counts and sealed log."""
    e = covering_engines()
    runs = []
    for guide in (native(), ScopedGuide(e)):
        rng = random.Random(seed)
        target = rng.choice(gold("concert_singer"))[0].encode()
        runs.append(generate(guide, steered(guide, target, rng), 40, rng))
    got, want = runs
    assert got.audit.lines() == want.audit.lines()
    # tokens, stop reason, step kinds, early triggers, rise (the logs compared above)
    assert dataclasses.replace(got, audit=want.audit) == want


def test_audit_off_keeps_no_records() -> None:
    guide = native(audit=False)
    assert not guide.audited
    guide.accept_tokens(tokens("SELECT name"))
    assert guide.step_audit()[2] > 0  # the step's fields are known all the same
    with pytest.raises(GuideError, match="does not audit"):
        guide.audit_log()


def test_accept_token_checks_kind_and_type_first() -> None:
    """Both guides, as every guide of the protocol: a ``kind`` other than sampled,
    forced or reserve is a ``ValueError`` before anything else is checked (a refused
    token and EOS included) and changes nothing; a ``numpy.int64`` is a token id
    like any int (their audit logs stay equal); a float is a ``TypeError``."""
    np = pytest.importorskip("numpy")
    first = tokens("SELECT name")[0]
    refused = tokens(";")[0]
    guides = (native(), ScopedGuide(covering_engines()))
    for guide in guides:
        for token in (first, refused, covering_engines().base.vocab.eos_id):
            for kind in ("bogus", "eos"):
                with pytest.raises(ValueError, match="audit kind"):
                    guide.accept_token(token, kind)  # type: ignore[arg-type]
        assert guide.steps == 0
        with pytest.raises(TypeError):
            guide.accept_token(float(first))  # type: ignore[arg-type]
        guide.accept_token(np.int64(first))
        guide.accept_token(np.int32(tokens("SELECT name")[1]), "forced")
    nat, ref = guides
    assert nat.steps == ref.steps == 2
    assert nat.audit_log().lines() == ref.audit_log().lines()


def test_grid_kernels_off_gives_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GRID_KERNELS=0``: covering engines built then have no native tables, and their
    guide is the Python reference; with the kernels on it is the native one."""
    vocab, trie = world()
    e = covering_engines()
    assert type(e.guide()) is NativeScopedGuide
    monkeypatch.setenv("GRID_KERNELS", "0")
    off = scoped_engines(SQLITE, e.schema, e.grants, vocab, trie=trie, covering=True)
    assert off.native() is None
    assert type(off.guide()) is ScopedGuide


def test_fills_write_the_row_asked_for() -> None:
    """``fill_next_token_bitmask`` into row 1 of a two-row int32 buffer (and of a CPU
    ``torch.int32`` tensor where torch is installed) writes the mask there, row 0
    untouched, equal to the reference's packed mask."""
    np = pytest.importorskip("numpy")
    guide, ref = native(), ScopedGuide(covering_engines())
    for g in (guide, ref):
        g.accept_tokens(tokens("SELECT name FROM singer WHERE"))
    want = np.frombuffer(ref.mask().tobytes(), dtype=np.int32)
    rows = np.full((2, want.size), -7, dtype=np.int32)
    guide.fill_next_token_bitmask(rows, 1)
    assert (rows[1] == want).all() and (rows[0] == -7).all()
    torch = pytest.importorskip("torch")
    tensor = torch.full((2, want.size), -7, dtype=torch.int32)
    guide.fill_next_token_bitmask(tensor, 1)
    assert (tensor[1].numpy() == want).all() and (tensor[0] == -7).all()


@pytest.mark.parametrize("language", ["scoped", "generation"])
def test_only_the_covering_language_has_a_native_spec(language: str) -> None:
    """The others alias with any identifier; the native scope machine reads aliases
    from a finite table, so their scope spec is refused, not built wrong."""
    e = engines("concert_singer") if language == "scoped" else generation_engines()
    with pytest.raises(ValueError, match="the covering language only"):
        e.scope_spec()
