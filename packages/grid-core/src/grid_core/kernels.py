"""The optional compiled kernels (grid-kernels), and the switch that turns them off.

grid-core works with no compiled extension. When ``grid_kernels`` is installed
every cache miss is done whole in Rust (:func:`cold_entry`: walk, verdict
classes, payload, entry id, with the GIL released); ``GRID_KERNELS=0`` in the
environment forces the pure-Python path, which stays the reference the kernels
are checked against bit for bit (``tests/test_kernels_parity.py``,
``tests/test_kernels_cold.py``). A build whose ``ABI_VERSION`` is not the one
this grid-core expects is refused with an error, never used.

Serving (:func:`session`): a :class:`KernelGuide` is the native implementation
of the guide protocol (:mod:`grid_core.protocol`) on a ``grid_kernels.Session``,
each step one call into Rust, audit records included; ``Engine.guide()``
returns one whenever the kernels are loaded. ``GridGuide`` stays the reference
and gives the same masks, records and seals bit for bit
(``tests/test_guide_protocol.py``). Its errors are grid-core's:
:class:`GuideError` for a token outside the mask or a step after EOS,
:class:`MaskError` for an empty mask; a bitmask of the wrong kind, shape or
dtype is a ``TypeError`` or ``ValueError``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from grid_core import shared_cache
from grid_core.audit import AuditLog, Kind
from grid_core.cache import Entry, Key, SharedCache
from grid_core.errors import GridError, GuideError, MaskError
from grid_core.events import Event, EventSpec
from grid_core.memo import ContentMemo
from grid_core.protocol import accept_in_order, is_tensor, tensor_view
from grid_core.reserve import INF, ReserveError, reserve_table

ABI_VERSION = 12


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
_parsings: ContentMemo[Any] = ContentMemo(32)
"""The kernels' LALR(1) tables (``grid_kernels.Parsing``) by the grammar's content
(:attr:`~grid_core.grammar.Grammar.content_key`, what its tables are built from):
one per projection, shared by its engines (a role's engine rebuilt for a new schema).
Tables the kernels built carry theirs (``LalrTables.native``); others are read in."""
_lexings: dict[tuple[str, int], Any] = {}
"""The kernels' DFA tables (``grid_kernels.Lexing``) by the union DFA's fingerprint
and the ignored terminals: one per dialect, shared by its projections' engines."""
_shared: weakref.WeakKeyDictionary[SharedCache, Any] = weakref.WeakKeyDictionary()
"""The native walk cache of each T2 (made on its first engine, gone with it)."""


def cache_caps() -> tuple[int, int, int] | None:
    """The memory caps ``GRID_CACHE_MB`` sets, in bytes: (walk cache, subtree memo,
    row memo) as 2/5, 2/5 and 1/5 of it; None when unset (the kernels' defaults:
    256, 256 and 128 MiB). A value that is no positive integer is a
    :class:`KernelsError`."""
    raw = os.environ.get("GRID_CACHE_MB", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) <= 0:
        raise KernelsError(f"GRID_CACHE_MB must be a positive number of MiB, not {raw!r}")
    total = int(raw) << 20
    return total * 2 // 5, total * 2 // 5, total // 5


def reserve_memo_bytes() -> int | None:
    """The cap of each of mode 1's five reserve memos (``grid_kernels.Reserve``):
    1/40 of ``GRID_CACHE_MB`` (an eighth in all, beside the caches of
    :func:`cache_caps`), or None when it is unset (the kernels' default, 8 MiB)."""
    caps = cache_caps()
    return None if caps is None else max(1, caps[2] // 8)


def engine_tables(engine: Any) -> Any:
    """The kernels' tables of an Engine, or None on the Python path.

    The trie tables (the large part) are built once per tokenizer trie and
    shared by every engine over it, the DFA's once per dialect (union DFA and
    ignored terminals) and shared by its projections, the LALR(1) tables' once
    per projection; the rest (the lexicon) is per engine, with
    their caches capped as :func:`cache_caps` says (least recently used evicted).
    An engine built with a :class:`~grid_core.cache.SharedCache` (T2) shares one
    native walk cache with every other engine built with it: T2 lives with the
    native tables, keyed as grid-core keys it. With ``GRID_SHARED_CACHE_URL``
    set, the family's shared tier on Redis sits behind it
    (:mod:`grid_core.shared_cache`).
    """
    native = load()
    if native is None:
        return None
    caps = cache_caps()
    trie = _tries.get(engine.trie.fingerprint)
    if trie is None:
        trie = _tries.setdefault(
            engine.trie.fingerprint, native.trie_tables(engine.trie, engine.vocab)
        )
    shared = None
    if engine.shared is not None:
        shared = _shared.get(engine.shared)
        if shared is None:
            shared = _shared.setdefault(engine.shared, native.SharedWalks(engine.shared.family))
    key = (engine.dfa.fingerprint, engine.scanner.ignored)
    lexing = _lexings.get(key)
    if lexing is None:
        lexing = _lexings.setdefault(key, native.lexing_of(engine))
    parsing = engine.tables.native or _parsings.get(
        engine.grammar.content_key, lambda: native.parsing_of(engine)
    )
    tables = native.engine_tables(engine, trie, shared=shared, lexing=lexing, parsing=parsing)
    if caps is not None:
        tables.set_caps(*caps)
    shared_cache.attach(native, tables, engine.family)
    return tables


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


def session(engine: Any, *, audit: bool = True, events: EventSpec | None = None) -> KernelGuide:
    """A :class:`KernelGuide` at the initial configuration of ``engine`` (a
    ``grid_core.guide.Engine`` built with the kernels loaded); ``audit`` turns
    its per-step records on; ``events`` its parse event stream, tracked natively
    (``grid_kernels`` ``events.rs``; the same stream as
    :class:`grid_core.events.EventTracker`)."""
    if engine.kernel is None:
        raise KernelsError(
            "this engine has no kernels (grid-kernels is not installed, or GRID_KERNELS=0)"
        )
    namespace = engine.shared.namespace if engine.shared is not None else 0
    if events is None:
        return KernelGuide(engine, native_session(engine.kernel, namespace, audit))
    tables, names = _event_tables(engine, events)
    native = native_session(engine.kernel, namespace, audit, tables)
    return KernelGuide(engine, native, (events, names))


def native_session(tables: Any, namespace: int = 0, audit: bool = True, events: Any = None) -> Any:
    """A ``grid_kernels.Session`` of the kernels' ``tables`` that speaks the guide
    protocol (what a :class:`KernelGuide` wraps): it raises :class:`GuideError` /
    :class:`MaskError` where the bare session raises ``SessionError``, and fills a
    CPU ``torch.int32`` tensor through its numpy view."""
    return tables.session(namespace, audit, events, errors=grid_error, views=_view)


_events: weakref.WeakKeyDictionary[Any, dict[EventSpec, tuple[Any, list[tuple[str, str]]]]] = (
    weakref.WeakKeyDictionary()
)


def _event_tables(engine: Any, spec: EventSpec) -> tuple[Any, list[tuple[str, str]]]:
    """The native event tables of ``spec`` over ``engine`` (made once per engine and
    spec) and the (kind, name) of each event code."""
    per_engine = _events.setdefault(engine, {})
    found = per_engine.get(spec)
    if found is None:
        rules, lexemes = spec.compile(engine)
        names: list[tuple[str, str]] = []
        codes: dict[tuple[str, str], int] = {}

        def code(kind_name: tuple[str, str]) -> int:
            if kind_name not in codes:
                codes[kind_name] = len(names)
                names.append(kind_name)
            return codes[kind_name]

        terminals = engine.grammar.terminals
        rule_codes = [
            code(rules[r]) if r in rules else -1 for r in range(len(engine.tables.rule_lhs))
        ]
        term_codes = [
            code((lexemes[t], terminals[t].name)) if t in lexemes else -1
            for t in range(len(terminals))
        ]
        tables = engine.kernel.event_tables(rule_codes, term_codes)
        found = per_engine.setdefault(spec, (tables, names))
    return found


class KernelGuide:
    """The native guide (:class:`grid_core.protocol.Guide`) on a ``grid_kernels.Session``.

    The session is made speaking the protocol (:func:`native_session`): it raises
    :class:`GuideError` / :class:`MaskError` itself and fills a CPU
    ``torch.int32`` tensor through its numpy view (kept while the same tensor is
    passed again). The two per-token verbs are the session's own methods, with
    no Python frame between a caller and Rust (on the serving path a fill runs
    right after a forward pass, with every cache cold, where each Python layer
    costs microseconds):

    - ``fill_next_token_bitmask(bitmask, row=0)``: write the mask into row
      ``row`` of ``bitmask`` (:mod:`grid_core.protocol`);
    - ``accept_token(token, kind="sampled")``: accept one token; a refused one
      raises :class:`GuideError`.

    The other verbs are one call into Rust each. Audit records are kept and
    chained natively; :meth:`audit_log` reads them out.
    """

    __slots__ = ("_events", "_native", "accept_token", "engine", "fill_next_token_bitmask")

    fill_next_token_bitmask: Callable[..., None]
    accept_token: Callable[..., None]

    def __init__(
        self,
        engine: Any,
        native: Any,
        events: tuple[EventSpec, list[tuple[str, str]]] | None = None,
    ) -> None:
        """``native``: a session made by :func:`native_session` (or forked from one)."""
        self.engine = engine
        self._native = native
        self._events = events
        self.fill_next_token_bitmask = native.fill_next_token_bitmask
        self.accept_token = native.accept_token

    # -- parse events (grid_core.events.EventStream) -----------------------------

    @property
    def spec(self) -> EventSpec | None:
        """The event spec of this guide's stream (None: events off)."""
        return None if self._events is None else self._events[0]

    def events(self, since: int = 0) -> list[Event]:
        """The events the accepted tokens determined, from index ``since`` on
        (docs/events.md); a guide made without events has none."""
        if self._events is None:
            raise GuideError(self.steps, None, "this guide was made without an event spec")
        names = self._events[1]
        out = []
        for code, start, end, step in self._native.events(since):
            kind, name = names[code]
            out.append(Event(kind, name, start, end, step))
        return out

    @property
    def event_count(self) -> int:
        """How many events are determined so far."""
        count: int | None = self._native.event_count
        if count is None:
            raise GuideError(self.steps, None, "this guide was made without an event spec")
        return count

    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
        steps: int = self._native.steps
        return steps

    @property
    def audited(self) -> bool:
        on: bool = self._native.audited
        return on

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

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int:
        """Accept in order up to the first refused token; how many were accepted."""
        return accept_in_order(self, tokens, kind)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many leading ``tokens`` would be accepted (the guide is unchanged)."""
        n: int = self._native.validate_tokens(list(tokens))
        return n

    def mask_ids(self) -> list[int]:
        """The admitted ids, ascending (EOS ids included when EOS is legal)."""
        ids: list[int] = self._native.mask_ids()
        return ids

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (and their records)."""
        self._native.rollback(n)

    def fork(self) -> KernelGuide:
        """An independent guide at the same point, with the same records."""
        return KernelGuide(self.engine, self._native.fork(), self._events)

    def is_terminated(self) -> bool:
        """EOS has been accepted."""
        done: bool = self._native.is_terminated()
        return done

    def eos_allowed(self) -> bool:
        """EOS is legal now."""
        ok: bool = self._native.eos_allowed()
        return ok

    def step_audit(self) -> tuple[int, str, int]:
        """(configuration hash, mask entry id, blocked count) of the current step's mask."""
        fields = self._native.step_audit()
        if fields is None:
            self.mask_ids()  # fills, and so computes them
            fields = self._native.step_audit()
            if fields is None:
                raise GuideError(self.steps, None, "this guide does not audit its steps")
        config_hash, entry_id, blocked = fields
        return config_hash, entry_id, blocked

    def audit_log(self) -> AuditLog:
        """The records of the steps so far, chained natively (unsealed)."""
        got = self._native.audit_lines()  # None: audit off
        if got is None:
            raise GuideError(self.steps, None, "this guide does not audit its steps")
        return AuditLog.of_lines(*got)

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog:
        """The records so far, sealed with the engine's fingerprints."""
        log = self.audit_log()
        log.close(stop_reason, self.engine.fingerprints(), mode)
        return log

    def output(self) -> bytes:
        """The bytes accepted so far (EOS excluded)."""
        out: bytes = self._native.output()
        return out

    def config(self) -> tuple[list[int], bytes]:
        """The current configuration: (LALR states bottom first, remainder)."""
        config: tuple[list[int], bytes] = self._native.config()
        return config

    def config_key(self) -> tuple[tuple[int, ...], int, int, bytes, bytes]:
        """A key of the current mask (protocol): the stack's states and the
        remainder's scanner normal form ``(q, ln, p, v)``. Equal keys, equal masks
        (OBL-KEY1); O(stack depth + |v|), so a row cache keyed by it stays O(1) per
        token inside a long string literal (requirement R)."""
        states, q, ln, p, v = self._native.mask_key()
        return tuple(states), q, ln, p, v

    @property
    def config_hash(self) -> int:
        """The configuration hash of the current step (``Config.hash``)."""
        h: int = self._native.config_hash
        return h

    def reserve_source(self) -> NativeReserve:
        """Where mode 1 reads this guide's reserve (:mod:`grid_core.decode`): in Rust."""
        return NativeReserve(self.engine, self._native)


class NativeReserve:
    """The reserve source (``grid_core.decode.ReserveSource``) of a native guide: the
    kernels' configuration advanced beside the session, priced by the engine's
    :class:`~grid_core.reserve.ReserveTable` in Rust (:meth:`ReserveTable.native`),
    the same reserve and completion as the Python table's at every configuration.
    A state is a ``grid_kernels.ReserveState``; each call is one call into Rust."""

    __slots__ = ("_native", "_session", "table")

    def __init__(self, engine: Any, session: Any) -> None:
        self.table = reserve_table(engine)
        self._native = self.table.native()
        self._session = session

    def start(self) -> Any:
        return self._native.start(self._session)

    def advance(self, state: Any, token: int) -> Any:
        after = self._native.advance(state, token)
        assert after is not None, "a token of the mask leaves the language"
        return after

    def reserve(self, state: Any) -> int:
        cost: int = self._native.reserve(state)
        if cost >= INF and not self.table.partial and state.remainder:
            raise ReserveError(f"no finish option for the remainder {state.remainder[-32:]!r}")
        return cost

    def completion(self, state: Any) -> list[int]:
        tokens: list[int] | None = self._native.completion(state)
        if tokens is None:
            rest: bytes = state.remainder
            if rest:
                raise ReserveError(f"no finish option for the remainder {rest[-32:]!r}")
            raise ReserveError("no completion of this stack writes only writable lexemes")
        return tokens


def fill_batch(
    guides: Sequence[KernelGuide],
    bitmask: Any,
    *,
    rows: Sequence[int] | None = None,
    threads: int = 1,
) -> list[Exception | None]:
    """Row ``rows[i]`` (default ``i``) of ``bitmask`` filled by ``guides[i]`` in one
    native call, the walks the GIL released, over ``threads`` threads
    (``grid_core.protocol.fill_rows``)."""
    import grid_kernels

    view = _view(bitmask)
    errors = grid_kernels.fill_next_token_bitmasks(
        [g._native for g in guides],
        bitmask if view is None else view,
        None if rows is None else list(rows),
        threads,
    )
    return [None if e is None else grid_error(e) for e in errors]


def _view(bitmask: Any) -> Any:
    """A native session's view of a bitmask that is no buffer: a CPU ``torch.int32``
    tensor's numpy view (:func:`~grid_core.protocol.tensor_view`), else None."""
    return tensor_view(bitmask) if is_tensor(bitmask) else None


def grid_error(e: Exception) -> Exception:
    """grid-core's error for a native ``SessionError`` (:class:`GuideError` or
    :class:`MaskError`); other errors unchanged."""
    import grid_kernels

    if not isinstance(e, grid_kernels.SessionError):
        return e
    if e.kind == "mask":
        return MaskError(e.step, e.reason)
    return GuideError(e.step, e.token, e.reason)
