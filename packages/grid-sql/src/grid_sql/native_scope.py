"""The covering guide on grid-kernels: :class:`NativeScopedGuide`.

:class:`grid_sql.column_scope.ScopedGuide` is the reference: the covering
language's mask computed level by level in Python, each level's walk in the
engine of its scope. :class:`NativeScopedGuide` speaks the same verbs
(:class:`grid_core.protocol.Guide`) over a ``grid_kernels.ScopedSession``:
the scope machine, the scoped lexer, the level-by-level mask and the audit
records in Rust (``scope.rs``, ``scoped.rs``), one call per verb. Its masks,
EOS gates, refusals and audit records are the reference's, token for token
(``tests/test_native_scope.py``; ``bench/native_scope.py`` over
Spider). :meth:`ScopedEngines.guide <grid_sql.column_scope.ScopedEngines.guide>`
returns it for the covering language whenever grid-kernels is loaded
(``GRID_KERNELS=0``: the reference).

Its reserve (:meth:`reserve_source`) is native too
(:class:`NativeScopedReserve`): the reference's
:class:`~grid_sql.column_scope.ScopedReserve` simulation in Rust, each scope
lexicon's reserve tables computed once by grid-core's ``ReserveTable``.
"""

from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from grid_core.audit import AuditLog, Kind
from grid_core.errors import GuideError
from grid_core.kernels import grid_error
from grid_core.protocol import accept_in_order, is_tensor, tensor_view
from grid_core.reserve import ReserveError

if TYPE_CHECKING:
    from grid_core.guide import Engine
    from grid_sql.column_scope import ScopedEngines


class NativeScopedGuide:
    """The covering language's guide on a native scoped session (the module header).
    Build it with :meth:`ScopedEngines.guide <grid_sql.column_scope.ScopedEngines.guide>`."""

    __slots__ = ("_native", "engine", "engines")

    def __init__(self, engines: ScopedEngines, native: Any) -> None:
        """``native``: a ``grid_kernels.ScopedSession`` of ``engines.native()``."""
        self.engines = engines
        self.engine: Engine = engines.base
        self._native = native

    # -------------------------------------------------------- the protocol

    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
        n: int = self._native.steps
        return n

    @property
    def audited(self) -> bool:
        on: bool = self._native.audited
        return on

    def accept_token(self, token_id: int, kind: Kind = "sampled") -> None:
        """Accept one token; a token outside the mask raises :class:`GuideError` and
        changes nothing. With audit on, the step's record is kept (EOS as ``eos``)."""
        try:
            self._native.accept_token(token_id, kind)
        except ValueError as e:
            raise grid_error(e) from None

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int:
        """Accept in order up to the first refused token; how many were accepted."""
        return accept_in_order(self, tokens, kind)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many leading ``tokens`` would be accepted (the guide is unchanged)."""
        probe = NativeScopedGuide(self.engines, self._native.fork())
        return probe.accept_tokens(tokens)

    def mask_ids(self) -> list[int]:
        """The admitted ids, ascending (EOS ids included when EOS is legal)."""
        try:
            ids: list[int] = self._native.mask_ids()
        except ValueError as e:
            raise grid_error(e) from None
        return ids

    def mask(self) -> array.array[int]:
        """The mask as a packed int32 bitmask over the vocabulary."""
        row = array.array("i", bytes(4 * self._native.n_words))
        try:
            self._native.fill_next_token_bitmask(row)
        except ValueError as e:
            raise grid_error(e) from None
        return row

    def fill_next_token_bitmask(self, bitmask: object, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask`` (:mod:`grid_core.protocol`:
        an int32 buffer, or a CPU ``torch.int32`` tensor through its numpy view),
        natively, with no copy between."""
        target = tensor_view(bitmask) if is_tensor(bitmask) else bitmask
        try:
            self._native.fill_next_token_bitmask(target, row)
        except ValueError as e:
            raise grid_error(e) from None

    def eos_allowed(self) -> bool:
        """EOS is legal now."""
        ok: bool = self._native.eos_allowed()
        return ok

    def is_terminated(self) -> bool:
        done: bool = self._native.is_terminated()
        return done

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (and their records)."""
        try:
            self._native.rollback(n)
        except ValueError as e:
            raise grid_error(e) from None

    def fork(self) -> NativeScopedGuide:
        """An independent guide at the same point, with the same records."""
        return NativeScopedGuide(self.engines, self._native.fork())

    def output(self) -> bytes:
        """The bytes accepted so far (EOS excluded)."""
        out: bytes = self._native.output()
        return out

    def config_key(self) -> tuple[tuple[int, ...], bytes, int, bool]:
        """The configuration with its scope (equal keys, equal masks): the stack's
        states, the remainder, the scope (an id of this guide's engines) and whether
        EOS was accepted."""
        states, remainder = self._native.config()
        return tuple(states), remainder, self._native.scope, self.is_terminated()

    # -------------------------------------------------------- audit

    def step_audit(self) -> tuple[int, str, int]:
        """(configuration hash, mask entry id, blocked count) of the current step's mask."""
        fields = self._native.step_audit()
        if fields is None:
            self.mask_ids()  # fills, and so computes them
            fields = self._native.step_audit()
        config_hash, entry_id, blocked = fields
        return config_hash, entry_id, blocked

    def audit_log(self) -> AuditLog:
        """The records of the steps so far, chained natively (unsealed)."""
        got = self._native.audit_lines()
        if got is None:
            raise GuideError(self.steps, None, "this guide does not audit its steps")
        return AuditLog.of_lines(*got)

    def fingerprints(self) -> dict[str, str]:
        """The artifacts the records depend on (``ScopedEngines.fingerprints``)."""
        return self.engines.fingerprints()

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog:
        """The records so far, sealed with :meth:`fingerprints`."""
        log = self.audit_log()
        log.close(stop_reason, self.fingerprints(), mode)
        return log

    # -------------------------------------------------------- mode 1

    def reserve_source(self) -> NativeScopedReserve:
        """Where mode 1 reads this guide's reserve: in Rust, from its configuration."""
        source, start = self._native.reserve_source()
        return NativeScopedReserve(source, start)


class NativeScopedReserve:
    """The decode loop's reserve source (``grid_core.decode.ReserveSource``) of a native
    scoped guide: :class:`~grid_sql.column_scope.ScopedReserve`'s simulation, natively
    (grid-kernels' ``scoped_reserve.rs``; each scope lexicon's reserve tables are
    computed by :meth:`ScopedEngines.reserve_raw
    <grid_sql.column_scope.ScopedEngines.reserve_raw>` once). A state is a
    ``grid_kernels.ScopedState``; each call is one call into Rust."""

    __slots__ = ("_native", "_start")

    def __init__(self, native: Any, start: Any) -> None:
        self._native = native
        self._start = start

    def start(self) -> Any:
        return self._start

    def advance(self, state: Any, token: int) -> Any:
        after = self._native.advance(state, token)
        assert after is not None, "a token of the mask leaves the language"
        return after

    def reserve(self, state: Any) -> int:
        """The completion's length; ``INF`` where none can be written."""
        cost: int = self._native.reserve(state)
        return cost

    def completion(self, state: Any) -> list[int]:
        got: list[int] | None = self._native.completion(state)
        if got is None:
            raise ReserveError("no scoped completion from this state")
        return got
