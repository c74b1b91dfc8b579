"""GrammarRegistry: single-flight builds, shared exceptions, negative caching with a TTL."""

from __future__ import annotations

import threading
import time

import pytest

from grid_core.errors import GrammarError
from grid_core.grammar import load_grammar
from grid_core.registry import GrammarRegistry


def test_concurrent_waiters_share_one_build() -> None:
    registry: GrammarRegistry[object] = GrammarRegistry()
    started = threading.Barrier(8)
    calls = []

    def build() -> object:
        calls.append(1)
        time.sleep(0.2)
        return object()

    results: list[object] = []

    def ask() -> None:
        started.wait()
        results.append(registry.get("fp", build))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_a_failing_build_gives_every_waiter_the_same_exception() -> None:
    registry: GrammarRegistry[object] = GrammarRegistry()
    started = threading.Barrier(6)
    errors: list[BaseException] = []

    def build() -> object:
        time.sleep(0.1)
        return load_grammar('start: missing ";"\n')  # raises UndefinedSymbolError

    def ask() -> None:
        started.wait()
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
