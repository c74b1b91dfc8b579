"""The optional compiled kernels (grid-kernels), and the switch that turns them off.

grid-core works with no compiled extension. When ``grid_kernels`` is installed
every cache miss is done whole in Rust (:func:`cold_entry`: walk, verdict
classes, payload, entry id, with the GIL released); ``GRID_KERNELS=0`` in the
environment forces the pure-Python path, which stays the reference the kernels
are checked against bit for bit (``tests/test_kernels_parity.py``,
``tests/test_kernels_cold.py``). A build whose ``ABI_VERSION`` is not the one
this grid-core expects is refused with an error, never used.

Serving (:func:`session`): a :class:`KernelGuide` is ``GridGuide``'s serving
surface (accept a token, fill a bitmask row, rollback, fork) on a native
``grid_kernels.Session``, each step one call into Rust. It is for guides with
audit off; ``GridGuide`` stays the reference and gives the same masks bit for
bit (``tests/test_kernels_session.py``). Its errors are grid-core's:
:class:`GuideError` for a token outside the mask or a step after EOS,
:class:`MaskError` for an empty mask; a bitmask of the wrong kind, shape or
dtype is a ``TypeError`` or ``ValueError``.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from grid_core.cache import Entry, Key
from grid_core.errors import GridError, GuideError, MaskError

ABI_VERSION = 2


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


def cold_entry(engine: Any, key: Key, root: int, pending: bytes, allowed: int) -> Entry:
    """A cache miss of ``Engine.walk`` (``engine.kernel`` loaded), whole in Rust: the
    entry ``make_entry(key, ...)`` of the walk would give, byte for byte, also
    published in the kernels' own cache (where sessions find it).

    ``key`` is ``engine.key(root, form, allowed)``: a root walk keyed by its
    normal form or by its raw bytes, a sub-walk by its tail.
    """
    raw_key = root == 0 and isinstance(key.remainder, bytes)
    handle = engine.kernel.register(key.namespace, root, pending, allowed, raw_key)
    assert handle.kind == key.kind, "the kernels judged the identifier position otherwise"
    return Entry(handle.kind, handle.encoding, handle.payload, handle.cd, handle.entry_id)


def session(engine: Any) -> KernelGuide:
    """A :class:`KernelGuide` at the initial configuration of ``engine`` (a
    ``grid_core.guide.Engine`` built with the kernels loaded)."""
    if engine.kernel is None:
        raise KernelsError(
            "this engine has no kernels (grid-kernels is not installed, or GRID_KERNELS=0)"
        )
    namespace = engine.shared.namespace if engine.shared is not None else 0
    return KernelGuide(engine.kernel.session(namespace))


class KernelGuide:
    """``GridGuide`` with audit off, on a native session (see the module header).

    The methods are ``GridGuide``'s serving verbs; each is one call into Rust
    plus this thin layer, which maps the native ``SessionError`` to
    :class:`GuideError` / :class:`MaskError` and views a CPU ``torch.int32``
    bitmask as the int32 buffer the kernels write.
    """

    __slots__ = ("_native", "_tensor", "_view")

    def __init__(self, native: Any) -> None:
        self._native = native
        self._tensor: Any = None
        self._view: Any = None

    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
        steps: int = self._native.steps
        return steps

    @property
    def n_words(self) -> int:
        """Words of one bitmask row: ``ceil(n_vocab / 32)``."""
        n: int = self._native.n_words
        return n

    @property
    def last_fill(self) -> str | None:
        """How the last fill was served: ``"row"``, ``"classes"`` or ``"walked"``
        (see ``grid_kernels.Session.last_fill``)."""
        last: str | None = self._native.last_fill
        return last

    def accept_token(self, token_id: int) -> None:
        """Accept one token (``GridGuide.advance``); a refused one raises :class:`GuideError`."""
        try:
            self._native.accept_token(token_id)
        except Exception as e:
            raise _grid_error(e) from None

    advance = accept_token

    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask`` (bit ``i % 32`` of word
        ``i // 32`` is token ``i``; the row overwritten, nothing else touched).

        ``bitmask``: a writable C-contiguous int32 buffer shaped ``(n_words,)``
        or ``(batch, n_words)`` (numpy ``int32``, ``array('i')``), or a CPU
        ``torch.int32`` tensor of that shape (viewed, not copied).
        """
        if bitmask is not self._tensor and _is_tensor(bitmask):
            self._tensor, self._view = bitmask, _tensor_view(bitmask)
        buffer = self._view if bitmask is self._tensor else bitmask
        try:
            self._native.fill_next_token_bitmask(buffer, row)
        except Exception as e:
            raise _grid_error(e) from None

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens."""
        try:
            self._native.rollback(n)
        except Exception as e:
            raise _grid_error(e) from None

    def fork(self) -> KernelGuide:
        """An independent guide at the same point."""
        return KernelGuide(self._native.fork())

    def is_terminated(self) -> bool:
        """EOS has been accepted."""
        done: bool = self._native.is_terminated()
        return done

    def eos_allowed(self) -> bool:
        """EOS is legal now."""
        ok: bool = self._native.eos_allowed()
        return ok

    def config(self) -> tuple[list[int], bytes]:
        """The current configuration: (LALR states bottom first, remainder)."""
        config: tuple[list[int], bytes] = self._native.config()
        return config


def _grid_error(e: Exception) -> Exception:
    """grid-core's error for a native ``SessionError``; other errors unchanged."""
    import grid_kernels

    if not isinstance(e, grid_kernels.SessionError):
        return e
    if e.kind == "mask":
        return MaskError(e.step, e.reason)
    return GuideError(e.step, e.token, e.reason)


def _is_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _tensor_view(tensor: Any) -> Any:
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
