"""GrammarRegistry: single-flight builds, shared exceptions, negative caching with a TTL."""

from __future__ import annotations

import threading

import pytest

from grid_core.errors import GrammarError
from grid_core.grammar import load_grammar
from grid_core.registry import GrammarRegistry


def test_concurrent_waiters_share_one_build() -> None:
    """The build returns only once every asker has called ``get`` (a handshake, not a
    sleep): whichever thread builds, the others ask while it runs or after."""
    registry: GrammarRegistry[object] = GrammarRegistry()
    started = threading.Barrier(8)
    arrived = threading.Semaphore(0)
    calls = []

    def build() -> object:
        calls.append(1)
        for _ in range(8):
            assert arrived.acquire(timeout=60)
        return object()

    results: list[object] = []

    def ask() -> None:
        started.wait()
        arrived.release()
        results.append(registry.get("fp", build))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_a_failing_build_gives_every_waiter_the_same_exception() -> None:
    """As above, on a clock that stands still: a late asker is inside the failure's
    TTL however late it runs."""
    registry: GrammarRegistry[object] = GrammarRegistry(clock=lambda: 0.0)
    started = threading.Barrier(6)
    arrived = threading.Semaphore(0)
    errors: list[BaseException] = []

    def build() -> object:
        for _ in range(6):
            assert arrived.acquire(timeout=60)
        return load_grammar('start: missing ";"\n')  # raises UndefinedSymbolError

    def ask() -> None:
        started.wait()
        arrived.release()
        try:
            registry.get("bad", build)
        except GrammarError as e:
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 6 and all(e is errors[0] for e in errors)
    assert registry.builds == 1


def test_failures_are_negatively_cached_until_the_ttl() -> None:
    now = [0.0]
    registry: GrammarRegistry[int] = GrammarRegistry(failure_ttl=10.0, clock=lambda: now[0])
    attempts = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise GrammarError("first build fails")
        return 42

    with pytest.raises(GrammarError):
        registry.get("k", flaky)
    now[0] = 5.0
    with pytest.raises(GrammarError):  # within the TTL: no rebuild
        registry.get("k", flaky)
    assert len(attempts) == 1
    now[0] = 10.5
    assert registry.get("k", flaky) == 42
    assert registry.get("k", flaky) == 42
    assert len(attempts) == 2
