"""GRID requests through vLLM's own Scheduler on CPU: whole decodes, failures, the defer.

The tests play the GPU worker: each step's sampled tokens are chosen by the
test (a real statement's tokens, checked to be admitted by the step's row).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip(
    "vllm.v1.structured_output", reason="vllm is not installed (`nox -s vllm` runs these tests)"
)

import numpy as np
from conftest import ANALYST, CLERK
from vllm.v1.engine import FinishReason
from vllm.v1.request import RequestStatus
from vllm_harness import (
    add,
    request,
    runner_output,
    scheduler,
    wait_grammar,
    wait_until,
)

from grid_serve.vllm import defer
from grid_serve.vllm.backend import MASK_WORKERS, GridGrammar


def admitted(bitmask: np.ndarray, row: int, token: int) -> bool:
    return bool(bitmask[row].view(np.uint32)[token >> 5] >> (token & 31) & 1)


def skipping(sched: Any, rid: str) -> bool:
    """Whether the defer made request ``rid`` skip this round (its row a placeholder)."""
    structured = sched.requests[rid].structured_output_request
    grammar = structured.grammar if structured is not None else None
    return isinstance(grammar, GridGrammar) and grammar.deferred


def step(sched: Any, tokens: dict[str, list[int]]) -> tuple[Any, dict[str, Any], set[str]]:
    """One engine step: schedule, the grammar bitmask, the sampled tokens of the scheduled
    requests (each checked against its row, unless its request skips the round), the
    scheduler's update. Returns the scheduler's output, the engine outputs by request
    id, and the requests that skipped the round at the bitmask."""
    out = sched.schedule()
    grammar = sched.get_grammar_bitmask(out)
    sampled = {r: tokens[r] for r in out.num_scheduled_tokens if r in tokens}
    skipped = {r for r in sampled if skipping(sched, r)}
    if grammar is not None:
        for row, rid in enumerate(grammar.structured_output_request_ids):
            if rid in sampled and rid not in skipped:
                assert admitted(grammar.grammar_bitmask, row, sampled[rid][0]), (rid, sampled[rid])
    outputs = sched.update_from_output(out, runner_output(out, sampled))
    by_id = {o.request_id: o for eco in outputs.values() for o in eco.outputs}
    return out, by_id, skipped


def test_two_roles_decode_to_their_stop(manager: Any, config: Any, tokenizer: Any) -> None:
    """Two GRID requests of two roles decode whole statements, each token admitted by its
    row, and stop at the model's EOS. Before each step the test waits (no clock: a
    condition with a generous timeout) until every unfinished request's next row is
    computed, so no round is deferred and each step samples each request's next planned
    token. Fails if a row refuses a statement token, a round is skipped, or a request
    does not finish with reason stop."""
    sched = scheduler(config, manager)
    statements = {
        "a": (ANALYST, "SELECT name FROM employees WHERE dept_id = 2;"),
        "c": (CLERK, "INSERT INTO orders (employee_id, total) VALUES (3, 9.5);"),
    }
    reqs = {rid: request(config, tokenizer, rid, spec) for rid, (spec, _) in statements.items()}
    add(manager, sched, *reqs.values())
    for r in reqs.values():
        wait_grammar(r)
    plans = {
        rid: [*tokenizer.encode(sql, add_special_tokens=False), 2]
        for rid, (_, sql) in statements.items()
    }
    grammars = {rid: r.structured_output_request.grammar for rid, r in reqs.items()}
    finished: dict[str, Any] = {}
    for _ in range(max(map(len, plans.values()))):
        live = [rid for rid in plans if rid not in finished]
        wait_until(lambda live=live: all(grammars[rid].mask_ready() for rid in live))
        nxt = {rid: [plans[rid][reqs[rid].num_output_tokens]] for rid in live}
        _, outs, skipped = step(sched, nxt)
        assert not skipped, skipped
        finished |= {rid: o for rid, o in outs.items() if o.finish_reason is not None}
    assert set(finished) == {"a", "c"}
    assert all(o.finish_reason == FinishReason.STOP for o in finished.values()), finished
    assert {rid: list(r.output_token_ids) for rid, r in reqs.items()} == plans


def test_a_compile_error_fails_only_its_request(manager: Any, config: Any, tokenizer: Any) -> None:
    """A spec naming a role the policy lacks passes the front door, fails at compile and
    finishes that request with the error, while the other is scheduled and samples.
    Fails if the engine raises, the bad request runs, or the message loses the cause."""
    sched = scheduler(config, manager)
    good = request(config, tokenizer, "good", ANALYST)
    bad = request(config, tokenizer, "bad", {**ANALYST, "role": "nobody"})
    add(manager, sched, good, bad)
    assert isinstance(wait_grammar(bad), Exception) and isinstance(wait_grammar(good), GridGrammar)
    select = tokenizer.encode("SELECT", add_special_tokens=False)
    out, outs, _ = step(sched, {"good": select})
    assert list(out.num_scheduled_tokens) == ["good"]
    assert bad.status == RequestStatus.FINISHED_ERROR
    assert "no role 'nobody' in the policy" in outs["bad"].error.message
    assert good.status == RequestStatus.RUNNING and list(good.output_token_ids) == select


def test_a_token_outside_the_mask_fails_only_its_request(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """If the worker returns a token the row refused (a broken sampler), vLLM finishes that
    request with an error on GRID's refusal; the co-tenant goes on. Fails otherwise."""
    sched = scheduler(config, manager)
    a = request(config, tokenizer, "a", ANALYST)
    b = request(config, tokenizer, "b", ANALYST)
    add(manager, sched, a, b)
    for r in (a, b):
        wait_grammar(r)
    select = tokenizer.encode("SELECT", add_special_tokens=False)
    out = sched.schedule()
    sched.get_grammar_bitmask(out)
    close = tokenizer.encode(")", add_special_tokens=False)
    sched.update_from_output(out, runner_output(out, {"a": close, "b": select}))
    assert a.status == RequestStatus.FINISHED_ERROR
    assert b.status == RequestStatus.RUNNING


class Gate:
    """Every thread of a pool held until ``open()`` (nothing else changes)."""

    def __init__(self, pool: Any, threads: int = MASK_WORKERS) -> None:
        self.event = threading.Event()
        started = threading.Semaphore(0)

        def hold() -> None:
            started.release()
            self.event.wait()

        for _ in range(threads):
            pool.submit(hold)
        for _ in range(threads):
            assert started.acquire(timeout=60)

    def open(self) -> None:
        self.event.set()


def pending_b(manager: Any, config: Any, tokenizer: Any) -> tuple[Any, Any, Gate, list[int]]:
    """A scheduler with two rounds behind it (the clock has an estimate), running B
    (GRID, its next row held behind a blocked mask pool, its rows slow so far) and C
    (unconstrained)."""
    sched = scheduler(config, manager)
    b = request(config, tokenizer, "b", ANALYST)
    c = request(config, tokenizer, "c", None)
    add(manager, sched, b, c)
    grammar_b = wait_grammar(b)
    select, name = (tokenizer.encode(t, add_special_tokens=False) for t in ("SELECT", " name"))
    step(sched, {"b": select, "c": [42]})
    wait_until(grammar_b.mask_ready)
    gate = Gate(manager.backend.mask_pool)
    step(sched, {"b": name, "c": [43]})  # B's next row is submitted behind the gate
    # As after a cold row: B's queued row is not taken back by the filling thread.
    grammar_b.rows.last_seconds = 1.0
    assert not grammar_b.mask_ready()
    return sched, grammar_b, gate, [*select, *name]


def test_defer_skips_only_the_request_whose_mask_is_late(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """B's row is late: at the bitmask B skips the round (its sampled token, here the stop
    id its placeholder row admits, is dropped and its position recomputed), and the next
    round B is not scheduled at all, while C and a new GRID request A run. Once the row
    is computed, B decodes on. Fails if B's token is kept (B would stop), B is scheduled
    while its row is still late, the bitmask waits for B, or anyone else is held back."""
    assert defer.installed()
    sched, grammar_b, gate, done = pending_b(manager, config, tokenizer)
    b = sched.requests["b"]
    computed = b.num_computed_tokens
    out, outs, skipped = step(sched, {"b": [2], "c": [44]})
    assert not grammar_b.mask_ready()  # the round is over: nobody waited for B's row
    assert set(out.num_scheduled_tokens) == {"b", "c"} and skipped == {"b"}
    assert list(b.output_token_ids) == done and b.num_computed_tokens == computed
    assert b.status == RequestStatus.RUNNING and outs["c"].new_token_ids == [44]
    a = request(config, tokenizer, "a", ANALYST)
    add(manager, sched, a)
    wait_grammar(a)
    select = tokenizer.encode("SELECT", add_special_tokens=False)
    out, _, skipped = step(sched, {"a": select, "b": [2], "c": [45]})
    assert set(out.num_scheduled_tokens) == {"a", "c"} and not skipped
    gate.open()
    grammar_a = sched.requests["a"].structured_output_request.grammar
    wait_until(lambda: grammar_b.mask_ready() and grammar_a.mask_ready())
    from_ = tokenizer.encode(" FROM", add_special_tokens=False)
    # after SELECT, ` FROM` starts only a free qualifier (`FROMx.`), which narrow has not
    name = tokenizer.encode(" name", add_special_tokens=False)
    out, _, skipped = step(sched, {"a": name, "b": from_, "c": [46]})
    assert set(out.num_scheduled_tokens) == {"a", "b", "c"} and not skipped
    assert list(b.output_token_ids) == [*done, *from_]


def test_without_the_defer_the_batch_waits_for_the_late_row(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """The control: with the patch removed, B's late row is waited for at the bitmask
    (here until another thread releases the pool), and B's token is kept. No clock is
    read: the releasing thread marks the release, and the bitmask must come back after
    it. Fails if the bitmask returned before the release or B skipped."""
    defer.remove()
    try:
        sched, _, gate, done = pending_b(manager, config, tokenizer)
        out = sched.schedule()
        assert set(out.num_scheduled_tokens) == {"b", "c"}
        released = threading.Event()

        def release() -> None:
            released.set()
            gate.open()

        threading.Timer(0.3, release).start()
        sched.get_grammar_bitmask(out)
        assert released.is_set(), "the bitmask came back before B's row could be computed"
        from_ = tokenizer.encode(" FROM", add_special_tokens=False)
        sched.update_from_output(out, runner_output(out, {"b": from_, "c": [44]}))
        assert list(sched.requests["b"].output_token_ids) == [*done, *from_]
    finally:
        defer.install()


def test_a_slow_compile_holds_back_only_its_request(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """A request whose grammar is still compiling (vLLM's compile pool held) waits while
    a running GRID request goes on decoding; compiled, it is scheduled with its first
    row ready. Fails if the running request waits for the compile or the new one runs
    without its grammar."""
    sched = scheduler(config, manager)
    a = request(config, tokenizer, "a", ANALYST)
    add(manager, sched, a)
    wait_grammar(a)
    select, name = (tokenizer.encode(t, add_special_tokens=False) for t in ("SELECT", " name"))
    step(sched, {"a": select})
    gate = Gate(manager.executor, manager.executor._max_workers)
    late = request(config, tokenizer, "late", CLERK)
    add(manager, sched, late)
    wait_until(a.structured_output_request.grammar.mask_ready)
    out, _, _ = step(sched, {"a": name})
    assert list(out.num_scheduled_tokens) == ["a"]
    assert late.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
    gate.open()
    assert (
        isinstance(wait_grammar(late), GridGrammar)
        and late.structured_output_request.grammar.mask_ready()
    )
    wait_until(a.structured_output_request.grammar.mask_ready)
    out, _, _ = step(
        sched, {"a": tokenizer.encode(" FROM", add_special_tokens=False), "late": select}
    )
    assert set(out.num_scheduled_tokens) == {"a", "late"}
