"""Reading a caller's files with a bound: one helper for every layer.

A file named on a command line or in a configuration may be the wrong one (a
database given as a policy) or a device (``/dev/zero``). Each reader sets the
most it reads; nothing larger is ever held in memory.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "read_bounded"]

#: The most bytes read of a file a command takes whole (an audit log, a grammar,
#: a lexicon): 256 MiB, far above a real one.
MAX_FILE_BYTES = 256 << 20


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The bytes of the file at ``path``, read at most ``limit`` of them; ``ValueError``
    for a file that holds more: nothing larger is ever held in memory. ``OSError``
    as ``open`` raises it."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"it holds more than {limit:,} bytes, the most read")
    return data
