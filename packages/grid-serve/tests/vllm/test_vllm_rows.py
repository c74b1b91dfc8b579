"""Bitmask rows under stop ids, computed ahead (grid_serve.vllm.rows): no vLLM needed.

SmolLM2's GGUF vocabulary has one EOS id (2, ``<|im_end|>``); id 0
(``<|endoftext|>``) is special there.
"""

from __future__ import annotations

import array
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from grid_core.guide import Engine, GridGuide
from grid_core.vocab import Vocabulary
from grid_serve.vllm.rows import STEAL_BELOW, RoundClock, RowsAhead, StopSet
from grid_serve.vllm.spec import EngineCompiler, GridSpec


@pytest.fixture(scope="module")
def engine(vocab: Vocabulary) -> Engine:
    return EngineCompiler(vocab).engine(GridSpec("sqlite", "analyst", "example"))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as p:
        yield p


def ids_of(vocab: Vocabulary, text: bytes) -> int:
    return vocab.token_bytes.index(text)


def advanced(engine: Engine, *pieces: bytes) -> GridGuide:
    guide = GridGuide(engine)
    for piece in pieces:
        guide.accept_token(ids_of(engine.vocab, piece))
    return guide


def bits(row: bytes) -> set[int]:
    words = array.array("I")
    words.frombytes(row)
    return {32 * w + b for w, word in enumerate(words) for b in range(32) if word >> b & 1}


def test_rows_under_the_eos_ids_equal_the_guide_mask(engine: Engine) -> None:
    """Along a statement, fails if a row differs from GridGuide.mask() in any bit."""
    stops = StopSet(engine.vocab, None)
    guide = GridGuide(engine)
    for piece in (b"SELECT", b" name", b" FROM", b" departments", b";"):
        assert stops.row(guide) == guide.mask().tobytes()
        guide.accept_token(ids_of(engine.vocab, piece))
    assert guide.eos_allowed() and stops.row(guide) == guide.mask().tobytes()


def test_stop_ids_are_the_eos_gate(engine: Engine) -> None:
    """A stop id is admitted exactly where EOS is legal, a text stop id never inside the
    statement; fails if a stop bit leaks or is missing, or the guide's mask is altered."""
    vocab = engine.vocab
    semi = ids_of(vocab, b";")
    stops = StopSet(vocab, {0, semi})  # <|endoftext|> and ';' stop, <|im_end|> does not
    in_string = advanced(engine, b"SELECT", b" '")  # ';' is string content here
    assert semi in guide_ids(in_string) and not in_string.eos_allowed()
    assert bits(stops.row(in_string)) == guide_ids(in_string) - {semi}
    done = advanced(engine, b"SELECT", b" name", b" FROM", b" departments", b";")
    assert done.eos_allowed()
    assert bits(stops.row(done)) == (guide_ids(done) - {2}) | {0, semi}
    assert bits(stops.stop_row()) == {0, semi}


def guide_ids(guide: GridGuide) -> set[int]:
    return bits(guide.mask().tobytes())


def test_accept_refuses_without_moving_the_guide(engine: Engine) -> None:
    """Fails if a refused token moves the guide or a stop id is not its EOS step."""
    vocab = engine.vocab
    stops = StopSet(vocab, {0})
    guide = advanced(engine, b"SELECT")
    for refused in (0, 2, 1, vocab.n_vocab, ids_of(vocab, b")")):
        assert not stops.accept(guide, refused)
        assert guide.steps == 1
    guide = advanced(engine, b"SELECT", b" name", b" FROM", b" departments", b";")
    assert stops.accept(guide, 0) and guide.is_terminated()


def test_stop_ids_outside_the_vocabulary_are_refused(vocab: Vocabulary) -> None:
    """Fails if a stop id past the vocabulary is taken silently."""
    with pytest.raises(Exception, match="outside the vocabulary"):
        StopSet(vocab, {vocab.n_vocab + 5})


def test_rows_ahead_are_computed_on_the_pool_and_kept_per_configuration(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    """While the pool is busy a submitted row is not ready; once done it stays known for
    its configuration, also after a rollback returns to it. Fails if readiness is wrong
    or a known row is computed again (the pool is blocked when it is asked for)."""
    stops = StopSet(engine.vocab, None)
    rows = RowsAhead(stops, pool)
    guide = advanced(engine, b"SELECT")
    gate = threading.Event()
    pool.submit(gate.wait)
    assert not rows.ready(guide)
    gate.set()
    assert rows.row(guide) == guide.mask().tobytes()
    assert rows.ready(guide)
    guide.accept_token(ids_of(engine.vocab, b" name"))
    assert rows.row(guide) == guide.mask().tobytes()  # nothing submitted: computed here
    gate.clear()
    pool.submit(gate.wait)
    guide.rollback(1)
    assert rows.ready(guide)  # the row of "SELECT" is known: the blocked pool is not needed
    gate.set()


def test_round_clock_deadline_is_the_expected_forward_pass() -> None:
    """The deadline is the round's start plus 0.8 of the median recent round time, an
    idle gap counted as at most a second. Fails on any other deadline."""
    clock = RoundClock()
    assert clock.deadline() is None
    clock.start(10.0)
    assert clock.deadline() == 10.0  # no estimate yet: no wait
    for t in (10.02, 10.04, 10.07):
        clock.start(t)
    assert clock.deadline() == pytest.approx(10.07 + 0.8 * 0.02)
    clock.start(100.0)  # after an idle engine
    clock.start(100.03)
    assert clock.deadline() == pytest.approx(100.03 + 0.8 * 0.03)  # the gap is one round of 1 s


def test_a_warm_requests_queued_row_is_computed_by_the_asker(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    """With the pool busy (a slow row ahead in its queue), a warm request's row that has
    not started is computed by the asking thread at once; a request whose last row was
    slow keeps its place and is waited for until the deadline. Fails if a warm row waits
    behind the queue or a slow one is taken out of it."""
    stops = StopSet(engine.vocab, None)
    gate = threading.Event()
    pool.submit(gate.wait)
    warm = RowsAhead(stops, pool)
    guide = advanced(engine, b"SELECT")
    assert warm.last_seconds < STEAL_BELOW
    assert warm.wait(guide, 0.0)  # queued behind the gate: computed here instead
    assert warm.row(guide) == guide.mask().tobytes()
    slow = RowsAhead(stops, pool)
    slow.last_seconds = 1.0  # as after a cold row
    other = advanced(engine, b"SELECT", b" name")
    assert not slow.wait(other, 0.05)
    gate.set()
    assert slow.wait(other, 60.0) and slow.row(other) == other.mask().tobytes()


class CountingPool(ThreadPoolExecutor):
    """A one-thread pool that counts the tasks submitted to it."""

    def __init__(self) -> None:
        super().__init__(1)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_only_a_slow_requests_row_is_computed_ahead(engine: Engine) -> None:
    """After a token (``ahead``), a warm request hands nothing to the pool (waking its
    thread costs more than the row) and its row is computed when asked for; a slow
    request's row is submitted at once and is the guide's mask. Fails if a warm
    request submits, a slow one does not, or either row differs from the mask."""
    with CountingPool() as pool:
        warm = RowsAhead(StopSet(engine.vocab, None), pool)
        guide = advanced(engine, b"SELECT")
        assert warm.warm
        warm.ahead(guide)
        assert pool.submitted == 0
        assert warm.wait(guide, 0.0) and pool.submitted == 0  # computed here, at once
        assert warm.row(guide) == guide.mask().tobytes()
        slow = RowsAhead(StopSet(engine.vocab, None), pool)
        slow.last_seconds = STEAL_BELOW  # as after a cold row
        assert not slow.warm
        slow.ahead(guide)
        assert pool.submitted == 1
        assert slow.wait(guide, 60.0) and slow.row(guide) == guide.mask().tobytes()
        assert pool.submitted == 1
