"""A bounded memo of what is built from content: artifacts keyed by what determines them.

Building a role's language repeats work another role or schema already did: two
roles with the same verbs and clauses have the same projection, two schemas
under one role the same narrowed grammar, and a grammar's LALR(1) tables depend
only on its rules and terminals. :class:`ContentMemo` keeps the last ``size``
artifacts built, keyed by a value that determines them completely (the caller's
obligation, stated where each memo is declared), and evicts the least recently
used. An artifact must be immutable: every caller gets the same object.

Thread-safety: lookups and insertions hold a lock; a build runs outside it, so
two threads missing one key may both build, and the first insertion wins (both
artifacts are equal by the key's obligation). A build that raises caches
nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ContentMemo"]

T = TypeVar("T")


class ContentMemo(Generic[T]):
    """The last ``size`` artifacts built, by content key (see the module header)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo holds at least one artifact, not {size}")
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The artifact of ``key``: the one kept, else ``build()`` (kept)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
        built = build()
        with self._lock:
            kept = self._items.setdefault(key, built)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return kept

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
