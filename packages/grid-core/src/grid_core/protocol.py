"""The guide protocol: the serving verbs every adapter drives a guide through.

Reference: DESIGN.md section 8 (the per-token hot path) and section 11 (one
guide protocol). Two implementations stand behind ``Engine.guide()``:
:class:`grid_core.guide.GridGuide` (pure Python, the reference) and
:class:`grid_core.kernels.KernelGuide` (a native ``grid_kernels`` session, the
default whenever grid-kernels is installed; ``GRID_KERNELS=0`` forces
Python). They agree bit for bit: masks, errors, audit records and seals
(``tests/test_guide_protocol.py``).

Contract (a *step* is one accepted token, EOS included):

- ``fill_next_token_bitmask(bitmask, row=0)``: write the exact mask of the
  current configuration into one row of an int32 bitmask (bit ``i % 32`` of
  word ``i // 32`` is token ``i``; EOS ids iff EOS is legal); an empty mask
  at a viable prefix raises :class:`~grid_core.errors.MaskError`, after EOS
  :class:`~grid_core.errors.GuideError`. ``bitmask``: a writable C-contiguous,
  4-byte-aligned int32 buffer in this machine's byte order shaped
  ``(n_words,)`` or ``(batch, n_words)`` (numpy, ``array('i')``; not uint32,
  not ``>i4``) or a CPU ``torch.int32`` tensor (filled where its memory is
  now, after ``Tensor.set_`` too).
- ``mask_ids()``: the same mask as ascending token ids.
- ``accept_token(token, kind="sampled")``: take one token of the mask; a
  token outside it (any integer, ``numpy.int64`` or beyond 64 bits) raises
  :class:`~grid_core.errors.GuideError` and changes nothing. With audit on,
  the step's record is appended (``kind`` is ``sampled``, ``forced`` or
  ``reserve``, else ``ValueError`` before any other check; EOS is always
  recorded as ``eos``).
- ``accept_tokens(tokens, kind)``: accept in order, stopping at the first
  refused token (nothing of it is taken); returns how many were accepted.
- ``validate_tokens(tokens)``: how many leading tokens would be accepted; the
  guide (and its audit) is left unchanged.
- ``rollback(n)``: undo the last ``n`` steps and their records; ``fork()``:
  an independent guide at the same point with the same records.
- ``is_terminated()``: EOS was accepted; ``eos_allowed()``: EOS is legal now
  (not terminated, and the output is a sentence of L).
- ``step_audit()``: the audit fields of the current step's mask
  ``(config_hash, mask_entry_id, blocked_count)``; ``audit_log()``: the
  records so far, unsealed; ``seal(stop_reason, mode)``: those records sealed
  with the engine's fingerprints (DESIGN.md section 9). A guide made with
  ``audit=False`` has no log and no seal (:class:`~grid_core.errors.GuideError`);
  its ``step_audit()`` answers on the Python guide only (the parity tests
  read it), the native guide keeps no fields.
- ``output()``: the bytes accepted so far (EOS excluded); ``config_key()``:
  a hashable key of the current configuration, equal keys meaning equal
  masks (what a row cache keys on).

Parse events (off by default): ``Engine.guide(events=spec)`` returns a guide
of this protocol that is also a :class:`grid_core.events.EventStream`: it adds
``events(since=0)`` and ``event_count``, the parse events the accepted tokens
determine, rollback and fork included (docs/events.md). The native session
tracks them itself; on the Python path an :class:`grid_core.events.EventGuide`
wraps the guide.
"""

from __future__ import annotations

import ctypes
import json
import operator
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from grid_core.audit import AuditLog, Kind
from grid_core.errors import GuideError

if TYPE_CHECKING:
    from grid_core.guide import Engine

__all__ = ["Guide", "accept_in_order", "fill_rows", "write_row"]


@runtime_checkable
class Guide(Protocol):
    """One request's guide (see the module header)."""

    engine: Engine

    @property
    def steps(self) -> int: ...

    @property
    def audited(self) -> bool: ...

    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None: ...

    def mask_ids(self) -> list[int]: ...

    def accept_token(self, token: int, kind: Kind = "sampled") -> None: ...

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int: ...

    def validate_tokens(self, tokens: Sequence[int]) -> int: ...

    def rollback(self, n: int = 1) -> None: ...

    def fork(self) -> Guide: ...

    def is_terminated(self) -> bool: ...

    def eos_allowed(self) -> bool: ...

    def step_audit(self) -> tuple[int, str, int]: ...

    def audit_log(self) -> AuditLog: ...

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog: ...

    def output(self) -> bytes: ...

    def config_key(self) -> Hashable: ...


def accepted_token(token_id: int, kind: str) -> int:
    """The first check of every ``accept_token``: ``token_id`` as an int (any integer,
    ``numpy.int64`` from ``argmax`` included; anything else a ``TypeError``) and
    ``kind`` one of sampled, forced or reserve (else a ``ValueError``), before any
    other check (as the native guide's)."""
    token_id = operator.index(token_id)
    if kind not in ("sampled", "forced", "reserve"):
        raise ValueError(
            f"an audit kind is 'sampled', 'forced' or 'reserve', not {json.dumps(kind)}"
        )
    return token_id


def accept_in_order(guide: Guide, tokens: Sequence[int], kind: Kind = "sampled") -> int:
    """``guide.accept_tokens``: accept ``tokens`` in order up to the first one the
    guide refuses (which changes nothing); how many were accepted."""
    for n, token in enumerate(tokens):
        try:
            guide.accept_token(token, kind)
        except GuideError:
            return n
    return len(tokens)


#: The most threads a batch fill spreads over: the kernels' bound
#: (``grid_kernels`` refuses more; ``test_guide_edges`` holds both to it).
MAX_THREADS = 256


def fill_rows(
    guides: Sequence[Guide],
    bitmask: Any,
    *,
    rows: Sequence[int] | None = None,
    threads: int = 1,
) -> list[Exception | None]:
    """Fill row ``rows[i]`` (default ``i``) of ``bitmask`` with ``guides[i]``'s mask,
    for every guide: the batch form of ``fill_next_token_bitmask``. Native guides
    are filled in one call into the kernels: the rows that need no walk at once,
    the GIL held (a warm row costs about a microsecond, less than handing the
    GIL over), then the rows that must walk with the GIL released, shared out
    over ``threads`` threads (1 to 256); any other guide row by row. Bit-identical to
    filling the rows one by one. A guide's failure does not stop the others: one
    entry per guide, None or the error its fill raised (its row untouched), as
    grid-core's error classes (a bug inside a guide included: it is that row's).
    One guide given for two rows is a ``ValueError`` (a guide is one request's),
    before any row is written."""
    from grid_core import kernels  # the kernels module imports this one
    from grid_core.events import EventGuide

    if rows is not None and len(rows) != len(guides):
        raise ValueError(f"{len(rows)} rows for {len(guides)} guides")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be from 1 to {MAX_THREADS}, not {threads!r}")
    guides = [g.inner if isinstance(g, EventGuide) else g for g in guides]  # same masks
    if len({id(g) for g in guides}) != len(guides):
        raise ValueError("one guide is given for two rows: each row is a request of its own")
    native = [g for g in guides if isinstance(g, kernels.KernelGuide)]
    if native and len(native) == len(guides):
        return kernels.fill_batch(native, bitmask, rows=rows, threads=threads)
    targets = list(range(len(guides)) if rows is None else rows)
    if guides:  # as the kernels' batch fill: before a row is written
        _check_rows(bitmask, targets, guides[0].engine.n_words)
    out: list[Exception | None] = []
    for guide, row in zip(guides, targets, strict=True):
        try:
            guide.fill_next_token_bitmask(bitmask, row)
        except Exception as e:  # a bug inside a guide fails its row, not the batch
            out.append(e)
        else:
            out.append(None)
    return out


def _check_rows(bitmask: Any, rows: Sequence[int], n_words: int) -> None:
    """Refuse a batch as ``grid_kernels.fill_next_token_bitmasks`` does, before any
    row is written: a bitmask of the wrong kind or shape, rows out of its range or
    repeated."""
    total = _bitmask_rows(bitmask, n_words)
    given: set[int] = set()
    for r in rows:
        if not 0 <= r < total:
            raise ValueError(f"row {r} is out of range 0..{total} of the bitmask")
        if r in given:
            raise ValueError(f"row {r} is given to two sessions")
        given.add(r)


def _bitmask_view(bitmask: Any) -> memoryview:
    """``bitmask``'s memory (a CPU int32 tensor's through numpy), or ``TypeError``."""
    if is_tensor(bitmask):
        bitmask = tensor_view(bitmask)
    try:
        return memoryview(bitmask)
    except TypeError:
        raise TypeError(
            f"the bitmask must be a buffer of int32, not {type(bitmask).__name__}"
        ) from None


def _bitmask_rows(bitmask: Any, n_words: int) -> int:
    """How many rows ``bitmask`` has, after the kernels' checks: a writable
    C-contiguous, 4-byte-aligned buffer of int32 in this machine's byte order, or
    a CPU ``torch.int32`` tensor, one or two dimensions, rows of ``n_words`` words."""
    with _bitmask_view(bitmask) as view:
        if view.readonly:
            raise TypeError("the bitmask buffer is read-only")
        native = "<" if sys.byteorder == "little" else ">"
        code = view.format[1:] if view.format[:1] in ("@", "=", native) else view.format
        if view.itemsize != 4 or code not in ("i", "l"):
            raise TypeError(f"the bitmask must be int32, not items of format {view.format!r}")
        if not view.c_contiguous:
            raise ValueError("the bitmask buffer must be C-contiguous")
        if view.nbytes and ctypes.addressof(ctypes.c_char.from_buffer(view)) % 4:
            raise ValueError("the bitmask buffer is not 4-byte aligned")
        if view.ndim not in (1, 2):
            raise ValueError(
                f"the bitmask must be shaped (n_words,) or (batch, n_words), not {view.ndim}-D"
            )
        rows, width = (1, view.shape[0]) if view.ndim == 1 else view.shape  # type: ignore[index, misc]
        if width != n_words:
            raise ValueError(  # the kernels' message, word for word
                f"bitmask buffer has {width} 32-bit words per row,"
                f" expected {n_words} 32-bit words per row"
            )
        return int(rows)


def write_row(bitmask: Any, row: int, n_words: int, words: Callable[[], bytes]) -> None:
    """Write ``words()`` (one packed row: ``n_words * 4`` bytes, little-endian
    words) into row ``row`` of a caller's bitmask: the Python guide's fill. The
    bitmask and the row are checked first, as the kernels' fill checks them
    (:func:`_bitmask_rows`), and only then is ``words`` called, so a bad buffer
    is refused alike whatever the guide's state (after EOS too)."""
    row = operator.index(row)
    rows = _bitmask_rows(bitmask, n_words)
    if not 0 <= row < rows:
        raise ValueError(f"row {row} is out of range 0..{rows} of the bitmask")
    packed = words()
    assert len(packed) == n_words * 4, (len(packed), n_words)
    with _bitmask_view(bitmask) as view, view.cast("B") as flat:
        flat[row * len(packed) : (row + 1) * len(packed)] = packed


def is_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def tensor_view(tensor: Any) -> Any:
    """A CPU int32 tensor's memory as a numpy array (shared, not copied)."""
    if tensor.device.type != "cpu":
        raise ValueError(
            f"the bitmask tensor is on {tensor.device}; fill a CPU tensor and copy it over"
        )
    if str(tensor.dtype) != "torch.int32":
        raise TypeError(f"the bitmask tensor must be torch.int32, not {tensor.dtype}")
    if not tensor.is_contiguous():
        raise ValueError("the bitmask tensor must be contiguous")
    return tensor.numpy()
