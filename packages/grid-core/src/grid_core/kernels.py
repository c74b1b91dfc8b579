"""The optional compiled kernels (grid-kernels), and the switch that turns them off.

grid-core works with no compiled extension. When ``grid_kernels`` is installed
its trie walk is used for every cache miss; ``GRID_KERNELS=0`` in the
environment forces the pure-Python path, which stays the reference the kernels
are checked against bit for bit (``tests/test_kernels_parity.py``). A build
whose ``ABI_VERSION`` is not the one this grid-core expects is refused with an
error, never used.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from grid_core.errors import GridError

ABI_VERSION = 1


class KernelsError(GridError):
    """The installed grid-kernels build does not match this grid-core."""


def enabled() -> bool:
    """The kernels are wanted (``GRID_KERNELS`` is not ``0``)."""
    return os.environ.get("GRID_KERNELS", "1") != "0"


def load() -> ModuleType | None:
    """The ``grid_kernels`` module, or None when disabled or not installed."""
    if not enabled():
        return None
    try:
        import grid_kernels
    except ImportError:
        return None
    if grid_kernels.ABI_VERSION != ABI_VERSION:
        raise KernelsError(
            f"grid-kernels ABI {grid_kernels.ABI_VERSION} does not match grid-core's "
            f"{ABI_VERSION}: rebuild grid-kernels, or set GRID_KERNELS=0"
        )
    return grid_kernels


_tries: dict[str, Any] = {}


def engine_tables(engine: Any) -> Any:
    """The kernels' tables of an Engine, or None on the Python path.

    The trie tables (the large part) are built once per tokenizer trie and
    shared by every engine over it; the grammar tables are per engine.
    """
    native = load()
    if native is None:
        return None
    trie = _tries.get(engine.trie.fingerprint)
    if trie is None:
        trie = _tries.setdefault(
            engine.trie.fingerprint, native.trie_tables(engine.trie, engine.vocab)
        )
    return native.engine_tables(engine, trie)
