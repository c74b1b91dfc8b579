"""The skip-a-round defer: a request whose mask is not ready in time sits out the round.

Reference: DESIGN.md section 10 (the serving contract: one request's mask work
never stalls its co-tenants). In vLLM's engine step the scheduler launches the
forward pass, fills the bitmask (``StructuredOutputManager.grammar_bitmask``,
one request's row after another) while it runs, and samples when both are
done. A row that is still being computed (a schema no request has used before
has joined a warm batch) makes the whole batch wait for it. GRID computes each
request's next row ahead, on its backend's mask pool
(:mod:`grid_serve.vllm.rows`), and this patch makes a row that is late cost
only its own request a round.

The patch (:func:`install`) wraps three methods of vLLM's, the pieces of one
mechanism:

1. ``Scheduler.schedule``: a round starts; the backend's
   :class:`~grid_serve.vllm.rows.RoundClock` records it (its deadline for rows
   is the round's start plus 0.8 of the recent rounds' median time, an
   estimate of the forward pass). A request that skipped the previous round
   and whose row is still not computed is not scheduled this round either:
   ``next_decode_eligible_step`` is raised to ``current_step + 2``
   (``schedule()`` increments ``current_step`` before it reads it, so that
   skips this call alone; ``max`` keeps a longer wait set by vLLM's
   pipeline-parallel throttle; vLLM's ``DiffusionAsyncScheduler`` skips a
   request for a round the same way). It keeps its KV blocks and its place.
2. ``StructuredOutputManager.grammar_bitmask``: before the rows are filled,
   the patch waits, until the round's deadline, for each GRID request's row;
   a request whose row is still not computed then *skips the round*
   (:attr:`GridGrammar.deferred`): its row is a placeholder and nobody waits
   for its computation, which goes on. While the rows are filled the backend
   is marked :attr:`GridBackend.drafting`: the draft tokens vLLM accepts and
   rolls back there (speculative decoding) write no parse events.
3. ``Scheduler.update_from_output``: a skipping request's sampled token is
   dropped before vLLM sees it, and its ``num_computed_tokens`` goes back by
   one, so the next round computes the same position again (the forward pass
   it had this round is the round's cost to it). Its grammar has not moved.

So a late row delays its own request by whole rounds, never the batch: the
others are filled, sampled and accepted as if it were absent. What is never
deferred: a new request (its first row is computed with its grammar, before
vLLM schedules it at all), a request with draft tokens this round
(speculative decoding), any request under async scheduling (its grammar sees
each token a step late), and any request while a reasoning parser is
configured (its rows may not apply). ``GRID_VLLM_DEFER=0`` leaves vLLM
unpatched (:mod:`grid_serve.vllm.plugin`); then a late row is waited for, as
vLLM does for every backend.

The patch is idempotent; :func:`remove` restores vLLM's methods.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.structured_output import StructuredOutputManager

from grid_serve.vllm.backend import GridBackend, GridGrammar

__all__ = ["install", "installed", "remove"]

logger = logging.getLogger(__name__)

_ORIGINAL = "__grid_original__"


def _grid_grammar(request: Any) -> GridGrammar | None:
    structured = request.structured_output_request
    if structured is None or not structured.is_grammar_ready:
        return None
    grammar = structured.grammar
    return grammar if isinstance(grammar, GridGrammar) else None


def _start_round(scheduler: Any) -> None:
    """Wrapped before ``Scheduler.schedule``: the round starts; known-late rows sit out."""
    backend = scheduler.structured_output_manager.backend
    if not isinstance(backend, GridBackend):
        return
    backend.clock.start()
    for request in scheduler.running:
        grammar = _grid_grammar(request)
        if grammar is not None and grammar.skipped and not grammar.mask_ready():
            request.next_decode_eligible_step = max(
                request.next_decode_eligible_step, scheduler.current_step + 2
            )
            grammar.skipped += 1


def _defer_late_rows(
    manager: Any,
    requests: dict[str, Any],
    structured_output_request_ids: list[str],
    scheduled_spec_decode_tokens: dict[str, list[int]],
) -> None:
    """Wrapped before ``grammar_bitmask``: wait for rows until the deadline; mark the late."""
    grammars = {rid: _grid_grammar(requests[rid]) for rid in structured_output_request_ids}
    for grammar in grammars.values():
        if grammar is not None:
            grammar.deferred = False
    backend = manager.backend
    deadline = backend.clock.deadline() if isinstance(backend, GridBackend) else None
    if (
        deadline is None  # no round started: no scheduler drives this manager
        or manager.vllm_config.scheduler_config.async_scheduling
        or manager.reasoner_cls is not None
    ):
        return
    for rid, grammar in grammars.items():
        if grammar is None or scheduled_spec_decode_tokens.get(rid):
            continue
        if not grammar.wait_row(deadline - time.perf_counter()):
            grammar.deferred = True
            grammar.skipped += 1
            logger.debug("GRID defer: request %s skips this round", rid)


def _drop_deferred_tokens(scheduler: Any, scheduler_output: Any, model_runner_output: Any) -> None:
    """Wrapped before ``update_from_output``: a skipping request's token is dropped."""
    runner_output = model_runner_output
    sampled = runner_output.sampled_token_ids
    for rid in scheduler_output.num_scheduled_tokens:
        request = scheduler.requests.get(rid)
        grammar = _grid_grammar(request) if request is not None else None
        if grammar is None or not grammar.deferred:
            continue
        grammar.deferred = False
        index = runner_output.req_id_to_index[rid]
        if sampled and sampled[index]:
            sampled[index] = []
            request.num_computed_tokens -= 1


def _fill_round(manager: Any, *args: Any, **kwargs: Any) -> AbstractContextManager[None]:
    """Wrapped around ``grammar_bitmask``: the late rows deferred first; while vLLM
    fills, the GRID backend is :attr:`~GridBackend.drafting` (each grammar's
    ``accept_tokens`` there takes a speculative draft, rolled back before the fill
    returns: its events are not written)."""
    _defer_late_rows(manager, *args, **kwargs)
    backend = manager.backend
    return _drafting(backend) if isinstance(backend, GridBackend) else nullcontext()


@contextmanager
def _drafting(backend: GridBackend) -> Iterator[None]:
    backend.drafting = True
    try:
        yield
    finally:
        backend.drafting = False


def _around(
    owner: type, name: str, hook: Callable[..., AbstractContextManager[None] | None]
) -> None:
    """Wrap ``owner.name``: ``hook`` runs first, and the call runs inside the
    context manager it returns (if any)."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with hook(self, *args, **kwargs) or nullcontext():
            return original(self, *args, **kwargs)

    setattr(wrapper, _ORIGINAL, original)
    setattr(owner, name, wrapper)


_PATCHES: tuple[tuple[type, str, Callable[..., AbstractContextManager[None] | None]], ...] = (
    (Scheduler, "schedule", lambda self, *a, **k: _start_round(self)),
    (StructuredOutputManager, "grammar_bitmask", _fill_round),
    (Scheduler, "update_from_output", _drop_deferred_tokens),
)


def installed() -> bool:
    return all(hasattr(getattr(owner, name), _ORIGINAL) for owner, name, _ in _PATCHES)


def install() -> None:
    """Wrap vLLM's three methods (idempotent)."""
    for owner, name, hook in _PATCHES:
        if not hasattr(getattr(owner, name), _ORIGINAL):
            _around(owner, name, hook)


def remove() -> None:
    """Restore vLLM's methods."""
    for owner, name, _ in _PATCHES:
        current = getattr(owner, name)
        if hasattr(current, _ORIGINAL):
            setattr(owner, name, getattr(current, _ORIGINAL))
