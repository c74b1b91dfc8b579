"""GrammarRegistry: one build per artifact fingerprint, shared by every waiter.

``get(key, build)`` returns the artifact for ``key`` (a fingerprint), building it
with ``build()`` at most once however many threads ask at the same time
(single-flight): the first caller builds, the others wait and share its result
or its very exception. A failed build is negatively cached for ``failure_ttl``
seconds: callers within that window get the same exception without a rebuild;
after it, the next caller tries again. Successful builds are kept until
``evict``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    done: threading.Event = field(default_factory=threading.Event)
    value: T | None = None
    error: BaseException | None = None
    failed_at: float = 0.0


class GrammarRegistry(Generic[T]):
    """Single-flight, negatively cached builds keyed by artifact fingerprint."""

    def __init__(self, failure_ttl: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.failure_ttl = failure_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight[T]] = {}
        self.builds = 0

    def get(self, key: str, build: Callable[[], T]) -> T:
        with self._lock:
            flight = self._flights.get(key)
            stale = (
                flight is not None
                and flight.done.is_set()
                and flight.error is not None
                and self.clock() - flight.failed_at >= self.failure_ttl
            )
            owner = flight is None or stale
            if owner:
                flight = _Flight()
                self._flights[key] = flight
                self.builds += 1
        assert flight is not None
        if owner:
            try:
                flight.value = build()
            except BaseException as e:
                flight.error = e
                flight.failed_at = self.clock()
            finally:
                flight.done.set()
        flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return flight.value  # type: ignore[return-value]

    def evict(self, key: str) -> None:
        with self._lock:
            self._flights.pop(key, None)
