"""Bitmask rows of one request: its stop ids, and rows computed ahead on a worker pool.

Reference: DESIGN.md sections 4 and 5 (the exact mask, the EOS gate) and 10
(the serving contract). Nothing here imports vLLM: the backend
(:mod:`grid_serve.vllm.backend`) is a thin adapter over it, and a simulator can
drive the same code without vLLM.

Nouns:

- a *row* is one request's packed bitmask over the model's vocabulary: int32
  words in the host's byte order, bit ``t % 32`` of word ``t // 32`` set iff
  token ``t`` is admitted (grid-core's packing, :meth:`grid_core.guide.Engine.pack`);
  it is always written whole, never patched in place in a shared tensor;
- the *stop ids* of a request are the ids its serving engine ends it on (vLLM:
  ``SamplingParams.all_stop_token_ids``, the model's EOS and the user's stop
  tokens).

Policy decisions:

- The EOS gate admits exactly the stop ids: a row admits every stop id where
  EOS is legal (the output is a sentence of L) and none elsewhere; the
  vocabulary's other EOS ids (an end-of-turn token the engine would not stop
  on) are never admitted. A stop id the guide accepts is the guide's EOS step
  (``vocab.eos_ids[0]``), whatever its spelling. When the stop ids are the
  vocabulary's EOS ids, a row equals the guide's own fill bit for bit. No
  stop ids (None or empty) means the vocabulary's EOS ids.
- A request is *warm* while its most recent row took less than
  :data:`STEAL_BELOW` seconds (a new request is warm), else *slow*.
- Rows of slow requests are computed ahead (:class:`RowsAhead`): after each
  accepted token (``ahead``) the row of the new configuration is submitted to a
  worker pool, so it is computed while the engine schedules and runs the
  forward pass; ``ready`` tells whether it is done, and ``wait`` waits for it
  until a deadline (the defer patch, :mod:`grid_serve.vllm.defer`, with a
  :class:`RoundClock`). A warm request's row is computed when it is asked for,
  in the asking thread (the bitmask, which a serving engine fills while the
  forward pass runs): a warm row costs microseconds, less than handing it to a
  pool thread (waking the thread and passing the GIL: about 17 us per
  submission on a 2-CPU host, paid in the serial part of the round where
  tokens are accepted). The price: a warm request that meets a configuration
  never filled walks in the filling thread (0.3-1.5 ms on the SQL grammars
  measured, ``docs/performance.md``), where the defer cannot skip it; if that
  took over :data:`STEAL_BELOW`, the request is slow from then on and its
  next rows go ahead. Rows are keyed by the guide's exact configuration key
  (``config_key()``: equal keys, equal masks), so a rollback returns to a key
  whose row is known.
- No head-of-line blocking: one request's slow row (a cold schema) must not
  hold back the warm rows queued behind it on the pool. A warm request's row
  that has not started when it is asked for is taken back from the pool and
  computed in the caller's thread; a slow request keeps its place in the queue
  and is waited for (``wait``: until a deadline).
- Thread use: one caller thread at a time per :class:`RowsAhead` (the engine's
  thread that drives the request); the pool's threads only compute rows, each
  on a fork of the guide taken at submission (engines are thread-safe: the
  native engine's arena and caches are locked, and a cold walk runs with the
  GIL released; the Python engine's interning and tables are locked, its
  memos idempotent). The request's own guide records each step when it
  accepts the token: its mask is the one the fork filled (a row-memo hit).
"""

from __future__ import annotations

import array
import statistics
import time
from collections import OrderedDict, deque
from collections.abc import Collection, Hashable
from concurrent.futures import Executor, Future

from grid_core.errors import GuideError, ServingError
from grid_core.protocol import Guide
from grid_core.vocab import Vocabulary

__all__ = ["STEAL_BELOW", "RoundClock", "RowsAhead", "StopSet"]

#: A request whose previous row took less than this (seconds) is warm: a row of
#: its that has not started on the pool is computed in the asking thread.
STEAL_BELOW = 0.005


class StopSet:
    """The stop ids of a request over a vocabulary, and rows under them (module header)."""

    def __init__(self, vocab: Vocabulary, stop_ids: Collection[int] | None = None) -> None:
        ids = frozenset(stop_ids) if stop_ids else frozenset(vocab.eos_ids)
        outside = sorted(i for i in ids if not 0 <= i < vocab.n_vocab)
        if outside:
            raise ServingError(
                f"stop token ids {outside} are outside the vocabulary {vocab.name!r} "
                f"(ids 0..{vocab.n_vocab - 1})"
            )
        self.vocab = vocab
        self.ids = ids
        self.eos_step = vocab.eos_ids[0]
        """The token the guide accepts for a stop id (its EOS step)."""
        eos = frozenset(vocab.eos_ids)
        self._clear = sorted(eos | ids) if ids != eos else []
        self._stops = sorted(ids)

    def row(self, guide: Guide) -> bytes:
        """The row of the guide's configuration (the guide must not be terminated)."""
        packed = array.array("i", bytes(4 * ((self.vocab.n_vocab + 31) // 32)))
        guide.fill_next_token_bitmask(packed)
        if not self._clear:
            return packed.tobytes()
        words = array.array("I")
        words.frombytes(packed.tobytes())
        for i in self._clear:
            words[i >> 5] &= ~(1 << (i & 31))
        if guide.eos_allowed():
            for i in self._stops:
                words[i >> 5] |= 1 << (i & 31)
        return words.tobytes()

    def stop_row(self) -> bytes:
        """The row that admits the stop ids only (a terminated or failed request's)."""
        words = array.array("I", bytes(4 * ((self.vocab.n_vocab + 31) // 32)))
        for i in self._stops:
            words[i >> 5] |= 1 << (i & 31)
        return words.tobytes()

    def accept(self, guide: Guide, token: int) -> bool:
        """Advance ``guide`` by ``token`` if the stop rule and the grammar admit it.

        A stop id is the guide's EOS step, admitted only where EOS is legal; an
        EOS id that is not a stop id is refused; any other token must be in the
        guide's mask. Returns False (the guide unchanged) for a refused token.
        """
        if token in self.ids:
            if not guide.eos_allowed():
                return False
            guide.accept_token(self.eos_step)
            return True
        if token in self.vocab.eos_ids:
            return False
        try:
            guide.accept_token(token)
        except GuideError:
            return False
        return True


class RowsAhead:
    """Rows of one request's configurations, computed ahead on a pool (module header).

    ``keep`` bounds how many configurations' rows are remembered (the current
    one, and the draft positions of a speculative step).
    """

    def __init__(self, stops: StopSet, pool: Executor, keep: int = 16) -> None:
        self.stops = stops
        self.pool = pool
        self.keep = keep
        self._rows: OrderedDict[Hashable, Future[bytes]] = OrderedDict()
        self.last_seconds = 0.0
        """How long the request's most recent row took to compute."""

    @property
    def warm(self) -> bool:
        """Whether the request's most recent row took less than :data:`STEAL_BELOW`."""
        return self.last_seconds < STEAL_BELOW

    def ahead(self, guide: Guide) -> None:
        """The guide moved (a token accepted, a reset): a slow request's next row is
        submitted to the pool; a warm request's waits to be asked for (module header)."""
        if not self.warm:
            self.submit(guide)

    def submit(self, guide: Guide) -> Future[bytes]:
        """The row of the guide's configuration, submitted to the pool unless known."""
        known = self._lookup(guide)
        if known is not None:
            return known
        return self._remember(guide.config_key(), self.pool.submit(self._compute, guide.fork()))

    def ready(self, guide: Guide) -> bool:
        """Whether the row of the guide's configuration is computed (it is submitted if not)."""
        return self.submit(guide).done()

    def row(self, guide: Guide) -> bytes:
        """The row of the guide's configuration: computed here if nothing was submitted
        or a warm request's row has not started (module header), else waited for.

        Raises what computing the row raised.
        """
        known = self._lookup(guide)
        if known is None or (self.warm and known.cancel()):
            known = self._here(guide)
        return known.result()

    def wait(self, guide: Guide, timeout: float) -> bool:
        """Whether the row of the guide's configuration is computed within ``timeout``
        seconds: a warm request's row that is not known or has not started is computed
        here (module header), anything else is waited for on the pool."""
        known = self._lookup(guide)
        if self.warm and (known is None or known.cancel()):
            self._here(guide)
            return True
        if known is None:
            known = self.submit(guide)
        if known.done():
            return True
        try:
            known.exception(max(timeout, 0.0))
        except TimeoutError:
            return False
        return True

    def _compute(self, guide: Guide) -> bytes:
        t0 = time.perf_counter()
        try:
            return self.stops.row(guide)
        finally:
            self.last_seconds = time.perf_counter() - t0

    def _here(self, guide: Guide) -> Future[bytes]:
        done: Future[bytes] = Future()
        try:
            done.set_result(self._compute(guide))
        except Exception as e:
            done.set_exception(e)
        return self._remember(guide.config_key(), done)

    def clear(self) -> None:
        for future in self._rows.values():
            future.cancel()
        self._rows.clear()

    def _lookup(self, guide: Guide) -> Future[bytes] | None:
        key = guide.config_key()
        hit = self._rows.get(key)
        if hit is None:
            return None
        self._rows.move_to_end(key)
        return hit

    def _remember(self, key: Hashable, future: Future[bytes]) -> Future[bytes]:
        self._rows[key] = future
        while len(self._rows) > self.keep:
            _, old = self._rows.popitem(last=False)
            old.cancel()
        return future


class RoundClock:
    """When a round's rows are due: the round's start plus the forward pass's expected time.

    A serving engine fills the bitmask while the forward pass runs and samples
    when both are done, so a row computed before the forward pass ends costs
    the batch nothing. The forward pass's time is estimated as ``share`` of the
    median of the last ``window`` round times (from one round's start to the
    next, each capped at ``cap`` seconds so that an idle engine does not count).
    Before two rounds have started there is no estimate and the deadline is the
    round's start.
    """

    def __init__(self, share: float = 0.8, window: int = 8, cap: float = 1.0) -> None:
        self.share = share
        self.cap = cap
        self._rounds: deque[float] = deque(maxlen=window)
        self._start: float | None = None

    def start(self, now: float | None = None) -> None:
        """A round starts (``now``: ``time.perf_counter()`` by default)."""
        now = time.perf_counter() if now is None else now
        if self._start is not None:
            self._rounds.append(min(now - self._start, self.cap))
        self._start = now

    def deadline(self) -> float | None:
        """The current round's deadline for rows (``time.perf_counter()`` time); None
        before any round has started."""
        if self._start is None:
            return None
        if not self._rounds:
            return self._start
        return self._start + self.share * statistics.median(self._rounds)
