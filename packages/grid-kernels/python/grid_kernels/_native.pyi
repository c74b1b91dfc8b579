"""Type stub for the private native module (checked with mypy.stubtest).

Vocabulary as in grid-core: a *stack* is its list of LALR states, bottom first;
a *remainder* is the bytes of the lexeme in progress; an *allowed set* is an
int bitset over terminals with bit T for ``$END``; a *CD entry* is ``(trie
node, emitted terminal, requeued tail bytes)``. Every caller mistake raises
``ValueError`` (bad values, sizes, ids, stacks) or ``TypeError`` (wrong kinds
of object, read-only or wrongly typed buffers) before anything is written; a
:class:`Session` driven against its contract raises :class:`SessionError`.

*Logits* (what :func:`apply_token_bitmask`, :class:`BitmaskApplier`,
:func:`masked_argmax` and :func:`first_argmax` read) are float32: a C-contiguous
float32 buffer (numpy), or a ``torch.Tensor`` (that class exactly) on the CPU,
float32, strided, contiguous, not requiring grad and without a lazy negation,
read through ``data_ptr()`` with the GIL held (no numpy view is made: after a
CPU forward pass ``Tensor.numpy()`` costs about 20 µs cold). Any other object
raises :class:`LogitsError` (a ``TypeError``) before anything is read or written.
"""

from collections.abc import Callable, Sequence
from typing import Any, Literal, final

from typing_extensions import Buffer

__all__ = [
    "ABI_VERSION",
    "BitmaskApplier",
    "EngineTables",
    "Entry",
    "EventTables",
    "Lexing",
    "LogitsError",
    "Parsing",
    "RemoteWalks",
    "Reserve",
    "ReserveState",
    "ScopedEngines",
    "ScopedReserve",
    "ScopedSession",
    "ScopedState",
    "Session",
    "SessionError",
    "SharedWalks",
    "TrieTables",
    "_probe_arm",
    "_probe_disarm",
    "_probe_reached",
    "_probe_release",
    "apply_token_bitmask",
    "attach_remote",
    "fill_next_token_bitmasks",
    "first_argmax",
    "lalr_tables",
    "lexicon_trie",
    "masked_argmax",
    "pack_trie",
    "thompson",
    "union_dfa",
]

ABI_VERSION: int
"""Version of the table and buffer layout shared with grid_core."""

@final
class TrieTables:
    """A validated copy of a ``grid_core.trie.TokenTrie`` plus the vocabulary's
    size and EOS ids; one per tokenizer, shared by every :class:`EngineTables`."""

    def __new__(
        cls,
        *,
        edge: Sequence[int],
        token: Sequence[int],
        size: Sequence[int],
        alias_offset: Sequence[int],
        alias_ids: Sequence[int],
        n_vocab: int,
        eos_ids: Sequence[int],
    ) -> TrieTables: ...
    @property
    def n_nodes(self) -> int: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_words(self) -> int:
        """Words of a packed bitmask: ``ceil(n_vocab / 32)``."""
    @property
    def max_depth(self) -> int:
        """Bytes of the longest spelling."""
    @property
    def eos_ids(self) -> list[int]: ...
    def token_bytes(self, id: int) -> bytes:
        """``Vocabulary.token_bytes[id]``, read off the trie paths (``b""`` for a
        special id: exactly the ids the trie does not spell)."""

@final
class SharedWalks:
    """The walk cache the engines of one walk family share (grid-core's T2,
    ``SharedCache``): generic keys are shared by every engine of the family,
    identifier keys and verdicts by the engines of one lexicon."""

    def __new__(cls, family: str) -> SharedWalks: ...
    @property
    def family(self) -> str: ...
    @property
    def cached_walks(self) -> int: ...

@final
class RemoteWalks:
    """A walk family's shared tier on Redis: entries checked (HMAC under the
    deployment ``key``, entry id) before use; failures cost local walks."""

    def __new__(cls, url: str, key: bytes, family: str) -> RemoteWalks: ...
    @property
    def prefix(self) -> str: ...
    def metrics(self) -> dict[str, int]: ...
    def next_event(self, timeout: float) -> str | None: ...

def attach_remote(tables: EngineTables, remote: RemoteWalks, family: str) -> bool: ...

@final
class Lexing:
    """A dialect's union DFA (``grid_core.dfa.ByteDFA``'s tables) and ignored
    terminals, validated, with what the walk derives from them: built once and
    shared by the :class:`EngineTables` of every projection of the dialect
    (``EngineTables(lexing=...)``). Immutable."""

    def __new__(
        cls,
        *,
        n_terminals: int,
        dfa_trans: Sequence[int],
        dfa_accept: Sequence[int],
        dfa_live: Sequence[int],
        ignored: int,
    ) -> Lexing: ...
    @property
    def n_terminals(self) -> int: ...

@final
class Parsing:
    """A projection's LALR(1) tables (``grid_core.lalr.LalrTables``' arrays),
    validated and indexed: built once and shared by the :class:`EngineTables` of
    every engine of the projection (``EngineTables(parsing=...)``). Immutable."""

    def __new__(
        cls,
        *,
        n_terminals: int,
        action: Sequence[int],
        goto: Sequence[int],
        n_nonterminals: int,
        rule_lhs: Sequence[int],
        rule_len: Sequence[int],
    ) -> Parsing: ...
    def shiftable(self) -> int:
        """The terminals some state has an action on (``LalrTables.shiftable``)."""

@final
class EngineTables:
    """One grammar's validated tables (union DFA, LALR(1), lexicon, pick order,
    ignored set) over a shared :class:`TrieTables`. Immutable; any number of
    threads may use one at once. Every walk releases the GIL."""

    def __new__(
        cls,
        *,
        trie: TrieTables,
        n_terminals: int,
        lexicon_words: Sequence[tuple[int, Sequence[bytes]]],
        lexicon_categories: int,
        pick_order: Sequence[int],
        ignored: int,
        action: Sequence[int] | None = None,
        goto: Sequence[int] | None = None,
        n_nonterminals: int | None = None,
        rule_lhs: Sequence[int] | None = None,
        rule_len: Sequence[int] | None = None,
        parsing: Parsing | None = None,
        dfa_trans: Sequence[int] | None = None,
        dfa_accept: Sequence[int] | None = None,
        dfa_live: Sequence[int] | None = None,
        lexing: Lexing | None = None,
        schema: str | None = None,
        threads: int | None = 1,
        shared: SharedWalks | None = None,
        family: str | None = None,
    ) -> EngineTables:
        """The lexicon is given as ``lexicon_words`` (terminal id, its words): the
        trie is built here, numbered as :func:`lexicon_trie` numbers it.
        The union DFA is given either as ``lexing`` (built once per dialect, its
        terminal count and ``ignored`` must be these) or as ``dfa_trans``,
        ``dfa_accept`` and ``dfa_live``; the LALR(1) tables either as ``parsing``
        or as ``action``, ``goto``, ``n_nonterminals``, ``rule_lhs`` and
        ``rule_len`` (a ``TypeError`` otherwise; a ``ValueError`` for parts of
        another terminal set).
        ``schema``: the lexicon's fingerprint (identifier keys carry it; None:
        the empty string).
        ``threads``: the pool cold walks are spread over (1: the calling
        thread, at most 256; None: rayon's global pool). Pools of the four
        most recently used sizes are kept between calls.
        ``shared``: the walk cache of the engine's walk family, shared with
        the family's other engines; ``family`` must be its family (else a
        ``ValueError``). None: the engine's own cache."""
    @property
    def trie(self) -> TrieTables: ...
    @property
    def n_terminals(self) -> int: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_words(self) -> int: ...
    @property
    def cached_walks(self) -> int:
        """Walks in the engine's cache (shared by its sessions, and by its
        family's engines when built with a :class:`SharedWalks`)."""
    @property
    def walk_stats(self) -> tuple[int, int, int]:
        """The walk cache's (walks held, hits, misses): lookups of fills and
        registrations answered from it, and those that walked (or read the
        shared tier). A family's engines share one cache and its counts."""
    @property
    def memo_stats(self) -> tuple[int, int, int]:
        """The subtree memo's (chunks held, hits, misses): cold walks of this
        engine are assembled from memoized subtrees (``walk`` is not)."""
    def clear_memo(self) -> None:
        """Empty the subtree memo (for benchmarks of cold walks; the walk
        cache is kept)."""
    def walk(
        self,
        node: int,
        pending: bytes,
        allowed: int,
        include_self: bool = False,
        threads: int | None = 1,
    ) -> tuple[list[int], list[tuple[int, int, bytes]]]:
        """``grid_core.walk.walk_from``: CI trie nodes and CD entries of the
        subtree at ``node`` whose path ends ``pending``, under ``allowed``.
        The node's children are shared out over ``threads`` threads (None: the
        engine's pool); the result is the same node for node."""
    def register(
        self,
        namespace: int,
        root: int,
        pending: bytes,
        allowed: int,
        raw_key: bool = False,
        threads: int | None = None,
    ) -> Entry:
        """The cold miss of ``Engine.walk`` in one call, with the GIL released:
        the key (``Engine.key``: the normal form of a root walk's remainder,
        or its raw bytes with ``raw_key``; a sub-walk's raw tail), the walk (a
        root walk over ``threads`` threads,
        None: the engine's pool), the CD classes, the payload, the entry id
        (``make_entry``'s, byte for byte) and publication in this engine's
        cache, where sessions find it. An entry already cached is returned."""
    def set_caps(self, walks: int, chunks: int, rows: int) -> None:
        """Set the memory caps in bytes of the walk cache, the subtree memo and the
        row memo; each evicts its least recently used entries when full (at once
        if it holds more). Masks are unchanged: every cache is a memo."""
    def memory(self) -> dict[str, tuple[int, int, int]]:
        """``{"walks" | "chunks" | "rows": (bytes held, cap, evicted so far)}``."""
    def session(
        self,
        namespace: int = 0,
        audit: bool = False,
        events: EventTables | None = None,
        errors: Callable[[SessionError], BaseException] | None = None,
        views: Callable[[Any], Any] | None = None,
    ) -> Session:
        """A new :class:`Session` at the initial configuration; its walks are
        cached in this engine under ``namespace`` (grid-core's cache namespace);
        ``audit`` turns its record chain on (``grid_core.audit``); ``events``
        (from :meth:`event_tables` of this engine) its parse event stream.
        ``errors`` and ``views`` make it speak a caller's protocol (grid-core's
        guide protocol): ``errors(e)`` is raised instead of each
        :class:`SessionError` ``e`` the session (and its forks) raise, and a
        bitmask that is no buffer is filled through ``views(bitmask)`` (a
        buffer, or None to refuse it), the last view kept while the same
        bitmask is passed again with the same memory (a torch tensor's
        ``data_ptr()``, shape and contiguity: one given new storage by
        ``Tensor.set_`` is viewed anew)."""
    def event_tables(self, rule_codes: list[int], term_codes: list[int]) -> EventTables:
        """Which rules and terminals of this engine's grammar are parse events:
        per rule and per terminal an event code (an index into the caller's
        table of kinds and names) or -1 (``grid_core.events.EventSpec.compile``)."""
    def reserve_pieces(self) -> tuple[list[int], list[bytes | None]]:
        """Per terminal: its compatible parser rows (the union of the rows in which
        it has an action) and its single-token lexeme x (``b" " + x`` is one token
        and a valid piece: ``ReserveTable._single_token_pieces``), or None."""
    def token_splits(self, data: list[bytes]) -> list[list[int] | None]:
        """The fewest token ids spelling each string (smallest id per spelling), or
        None (``ReserveTable.split``)."""
    def reserve(
        self,
        term_tokens: list[list[int] | None],
        lead_tokens: list[list[int]],
        nt_rule: list[int],
        rhs: list[list[int]],
        start_cost: int,
        items: list[list[tuple[int, int, int, int]]],
        classes: list[tuple[int, bytes]],
        safe: list[int],
        bare: list[tuple[int, list[int]] | None],
        memo_bytes: int | None = None,
    ) -> Reserve:
        """This engine's mode-1 reserve over the grammar-level tables grid-core's
        ``ReserveTable`` computed (its attributes of the same names; ``bare`` per
        terminal: its piece's first lexeme byte and ``bare_tokens``); each of its
        five memos holds at most ``memo_bytes`` (default 8 MiB, least recently
        used evicted). Tables that do not fit the grammar raise ``ValueError``."""

@final
class Entry:
    """A cached walk: the fields of ``grid_core.cache.Entry``, read out on demand."""

    @property
    def kind(self) -> Literal["ident", "generic"]: ...
    @property
    def entry_id(self) -> str:
        """BLAKE2b-128 of key, encoding tag, payload and CD entries (32 hex digits)."""
    @property
    def encoding(self) -> bytes:
        """``b"D"`` (dense bitmask) or ``b"S"`` (sparse ids)."""
    @property
    def payload(self) -> bytes: ...
    @property
    def cd(self) -> tuple[tuple[int, int, bytes], ...]:
        """The CD entries ``(trie node, terminal, tail)`` in walk order."""
    @property
    def classes(self) -> list[tuple[int, int]]:
        """The CD verdict classes ``(terminal, entries)``, in order of first appearance."""

class LogitsError(TypeError):
    """*Logits* the kernels do not read (module header): another device, dtype
    or layout, a tensor that needs grad, not a buffer of float32. Raised before
    anything is read or written; the caller may mask them with its framework.
    Any other mistake (a bad bitmask) raises as usual."""

class SessionError(ValueError):
    """A session driven against its contract: a token outside the vocabulary
    or the mask, a special token, EOS before a sentence, anything after EOS, a
    rollback past the start (``kind == "guide"``), or an empty mask at a
    viable prefix (``kind == "mask"``, a bug). Nothing was changed or written."""

    step: int
    token: int | None
    reason: str
    kind: Literal["guide", "mask"]

@final
class Reserve:
    """One engine's mode-1 reserve (``grid_core.reserve.ReserveTable.reserve`` and
    ``.completion``, answer for answer) over configurations of its sessions."""

    def start(self, session: Session) -> ReserveState:
        """The configuration ``session`` is at (a session of this engine)."""
    def advance(self, state: ReserveState, token: int) -> ReserveState | None:
        """The configuration after ``token``'s bytes, or None if they leave the language."""
    def reserve(self, state: ReserveState) -> int:
        """Tokens of the shortest completion the guide writes (EOS not counted);
        ``grid_core.reserve.INF`` where none is writable."""
    def completion(self, state: ReserveState) -> list[int] | None:
        """The token ids of that completion, or None where there is none."""
    def usage(self) -> list[tuple[int, int, int]]:
        """(bytes held, cap, evicted) of each memo: cells, finishes, discounts,
        finish options, token splits."""

@final
class ReserveState:
    """A configuration (stack node, remainder, scan state) of a session's arena."""

    @property
    def remainder(self) -> bytes:
        """The remainder's bytes."""

@final
class ScopedEngines:
    """grid-sql's scoped engines (``grid_sql.column_scope.ScopedEngines``) of the
    covering language, natively: the base engine's tables with each scope's lexicon."""

    def __new__(
        cls,
        base: EngineTables,
        spec: dict[str, object],
        words: Sequence[tuple[int, Sequence[bytes]]],
        reserve: Callable[[list[tuple[int, list[bytes]]]], tuple[Any, ...]] | None = None,
    ) -> ScopedEngines: ...
    def session(self, namespace: int = 0, audit: bool = True) -> ScopedSession:
        """A session at the start of a statement."""
    @property
    def engines_built(self) -> int:
        """Distinct scope lexicons built so far."""

@final
class ScopedSession:
    """One request's scoped guide (``grid_sql.column_scope.ScopedGuide``), natively."""

    def accept_token(self, token: int, kind: str = "sampled") -> None:
        """Accept one token; with audit on, its record."""
    def fill_next_token_bitmask(self, bitmask: Buffer, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask``."""
    def mask_ids(self) -> list[int]:
        """The admitted ids, ascending (EOS ids when EOS is legal)."""
    def eos_allowed(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens."""
    def fork(self) -> ScopedSession: ...
    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
    @property
    def n_words(self) -> int: ...
    def config(self) -> tuple[list[int], bytes]:
        """(LALR states bottom first, remainder)."""
    def reserve_source(self) -> tuple[ScopedReserve, ScopedState]:
        """Mode 1's reserve source, and its start: this session's configuration."""
    @property
    def scope(self) -> int:
        """The scope of the pending lexeme (the native scope machine's ids)."""
    def output(self) -> bytes: ...
    @property
    def audited(self) -> bool: ...
    def step_audit(self) -> tuple[int, str, int] | None:
        """(configuration hash, mask entry id, blocked count) once filled."""
    def audit_lines(self) -> tuple[bytes, str] | None:
        """The records as ``AuditLog.lines()`` writes them, and the head hash."""

@final
class ScopedReserve:
    """Mode 1's reserve over the scoped language (``ScopedReserve``), natively."""

    def advance(self, state: ScopedState, token: int) -> ScopedState | None:
        """The state after ``token``; None where the scoped lexer refuses it."""
    def reserve(self, state: ScopedState) -> int:
        """Tokens of the simulated completion; ``INF`` where none is written."""
    def completion(self, state: ScopedState) -> list[int] | None:
        """That completion's token ids, or None."""

@final
class ScopedState:
    """A state of the scoped lexer that a ``ScopedReserve`` prices."""

    @property
    def remainder(self) -> bytes: ...
    @property
    def scope(self) -> int: ...

@final
class EventTables:
    """The parse event codes of one engine's grammar (``EngineTables.event_tables``)."""

@final
class Session:
    """One request's guide (``grid_core.guide.GridGuide``), each step one call
    into Rust, its audit records included. It shares its engine's tables, walk
    cache and interned stacks; it owns its history (the accepted bytes, one
    small record per step and, with audit on, one audit record per step)."""

    def accept_token(
        self, token: int, kind: Literal["sampled", "forced", "reserve"] = "sampled"
    ) -> None:
        """``GridGuide.accept_token``: lexer advance and shift/reduce, and with
        audit on the step's record (EOS recorded as ``eos``). A refused token
        raises :class:`SessionError` and changes nothing; a kind that is not
        one of the three raises ``ValueError``."""
    def validate_tokens(self, tokens: list[int]) -> int:
        """How many leading ``tokens`` would be accepted; nothing changes."""
    def output(self) -> bytes:
        """The bytes accepted so far (EOS excluded)."""
    def mask_ids(self) -> list[int]:
        """The current mask as ascending token ids (EOS ids when legal)."""
    @property
    def audited(self) -> bool:
        """Audit is on."""
    @property
    def config_hash(self) -> int:
        """The current configuration's hash (``Config.hash``)."""
    def step_audit(self) -> tuple[int, str, int] | None:
        """(configuration hash, mask entry id, blocked count) of the current
        step's mask once a fill with audit on computed them, else None."""
    def audit_lines(self) -> tuple[bytes, str] | None:
        """The audit records so far as ``grid_core.audit.AuditLog.lines()``
        writes them, joined by ``\\n`` (chained here; ASCII bytes), and the
        chain's head hash; None with audit off."""
    def fill_next_token_bitmask(self, bitmask: Buffer, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask``: bit ``i % 32`` of
        word ``i // 32`` is token ``i`` (``GridGuide.mask``), the whole row
        overwritten, nothing else touched. ``bitmask`` is a writable,
        C-contiguous, 4-byte-aligned int32 buffer (numpy ``int32``,
        ``array('i')``) in this machine's byte order (``>i4`` is refused),
        shaped ``(n_words,)`` or ``(batch, n_words)``. A row, like a token
        id or a count, beyond 64 bits is out of range (``ValueError``), not
        an ``OverflowError``. A buffer is exported at every fill and released
        after it (a shape or dtype assigned in place between fills is seen);
        a CPU ``torch.int32`` tensor's view is kept while the tensor keeps its
        memory, shape and dtype. A ctypes ``c_int32`` array (format ``'<i'``)
        is a buffer too. A warm fill holds the GIL (microseconds); one that
        must walk releases it."""
    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens."""
    def fork(self) -> Session:
        """An independent session at the same point."""
    def is_terminated(self) -> bool:
        """EOS has been accepted."""
    def eos_allowed(self) -> bool:
        """EOS is legal now: not terminated, and the output is a sentence."""
    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
    @property
    def n_words(self) -> int:
        """Words of one bitmask row: ``ceil(n_vocab / 32)``."""
    @property
    def last_fill(self) -> Literal["row", "classes", "walked"] | None:
        """How the last fill was served: ``"row"`` (its walk cached and its
        stack seen before: one copy), ``"classes"`` (walks cached, the CD
        verdicts evaluated against the stack), ``"walked"`` (some walk was
        cold), None before any fill."""
    def config(self) -> tuple[list[int], bytes]:
        """The current configuration: (LALR states bottom first, remainder)."""
    def events(self, since: int = 0) -> list[tuple[int, int, int, int]]:
        """The parse events determined so far, from index ``since`` on, each
        ``(code, start, end, step)`` (``grid_core.events``); empty with events
        off. A negative ``since`` is a ``ValueError``."""
    @property
    def event_count(self) -> int | None:
        """How many parse events are determined so far (None: events off)."""
    def mask_key(self) -> tuple[list[int], int, int, bytes, bytes]:
        """A key of the current step's mask: (LALR states, q, ln, p, v), the
        remainder's scanner normal form (``Config.normal``; ``p`` as
        little-endian words). Equal keys, equal masks; O(stack depth + |v|)."""

def fill_next_token_bitmasks(
    sessions: list[Session], bitmask: Buffer, rows: list[int] | None = None, threads: int = 1
) -> list[SessionError | None]:
    """Fill many sessions' rows in one call, the GIL released, over ``threads``
    threads (1 to 256; bit-identical to filling them one by one): session ``i`` writes row
    ``rows[i]`` (default ``i``) of a ``(batch, n_words)`` int32 buffer. One entry
    per session: None, or the error its fill raised (that row untouched, the
    others filled). A session given twice, a row given twice or out of range,
    or sessions of different widths raise before anything is written."""

def apply_token_bitmask(
    logits: object,
    bitmask: Buffer,
    exit_token: int | None = None,
    exit_row: Buffer | None = None,
) -> None:
    """Set every logit whose token ``bitmask`` does not admit to -inf, in place
    (the GIL released for a buffer): ``logits`` writable *logits* (module
    header) shaped ``(width,)`` or ``(batch, width)``, ``bitmask`` an int32 buffer
    shaped ``(n_words,)`` or ``(batch, n_words)`` with as many rows. Columns at
    or past ``32 * n_words`` are blocked; admitted logits are left bit for bit,
    except in a row where none of them is finite (-inf, +inf or NaN): there each
    becomes 0.0, a choice uniform over the mask (mode 1's rule).

    With ``exit_token`` and ``exit_row`` (an int32 buffer of ``n_words``), each
    row first takes its exit intent: where its mask admits ``exit_token`` and
    refuses the row's own top token (its first maximum before masking, a NaN
    counting as the maximum: numpy's ``argmax``), its row of ``bitmask`` (then
    writable) becomes ``exit_row``. The argmax is read only in rows whose mask
    admits ``exit_token``."""

@final
class BitmaskApplier:
    """:func:`apply_token_bitmask` with its bitmask and exit intent held (the
    bitmask's buffer export is taken once and pins its memory while this object
    lives, against numpy's own resizes; not against ``resize(refcheck=False)``,
    which numpy documents as unsafe): what a logits processor applies at every
    step. A bitmask of no words is a ``ValueError`` at ``apply``."""

    def __new__(
        cls, bitmask: Buffer, exit_token: int | None = None, exit_row: Buffer | None = None
    ) -> BitmaskApplier: ...
    def apply(self, logits: object) -> None:
        """``apply_token_bitmask(logits, bitmask, exit_token, exit_row)`` with the
        held ones. Precondition: nothing writes the bitmask during the call."""

def masked_argmax(logits: object, bitmask: Buffer) -> int | None:
    """Greedy choice under a mask, the logits untouched: the admitted column of
    the highest logit (``logits`` one row of *logits*; ``bitmask`` a
    C-contiguous int32 buffer of its words), the lowest among ties, NaN never
    chosen; None when no admitted logit is finite. Columns at or past
    ``32 * n_words`` are not admitted."""

def first_argmax(logits: object) -> int | None:
    """The first maximum of one row of *logits*, a NaN counting
    as above every number (numpy's and torch's ``argmax``); None when empty."""

def lalr_tables(
    n_terminals: int,
    n_nonterminals: int,
    rule_lhs: Sequence[int],
    rhs_start: Sequence[int],
    rhs: Sequence[int],
) -> tuple[
    tuple[str, int, int, int, int] | None,
    tuple[int, bytes, bytes, bytes, bytes, bytes, bytes, Parsing] | None,
]:
    """grid-core's ``build_lalr`` automaton, array for array, the GIL released:
    ``(None, (n_states, action, goto, state_symbol, kernel_start, kernel_rule,
    kernel_dot, parsing))`` (little-endian int32 bytes, and the
    :class:`Parsing` of those tables, built from them natively), or ``((kind, state, symbol,
    first_item, reduce_item), None)`` at the first conflict. Rule ``r`` is
    ``rule_lhs[r] -> rhs[rhs_start[r]:rhs_start[r + 1]]`` (grid-core's
    ``RuleArrays``); symbols are numbered as grid-core numbers them (rule 0 the
    augmented start rule). A symbol out of range, or offsets that do not
    delimit one right-hand side per rule, is a ``ValueError``."""

def lexicon_trie(
    words: Sequence[tuple[int, Sequence[bytes]]], n_terminals: int
) -> tuple[list[dict[int, int]], list[int], list[int]]:
    """The lexicon trie ``EngineTables(lexicon_words=words)`` builds, as grid-core's
    ``Lexicon`` holds it: children (byte -> node), prefix categories and word
    categories per node, numbered as grid-core's ``build_lexicon`` numbers them
    (terminals in increasing id, each one's words in byte order, a node when
    first reached). A terminal out of range or given twice is a ``ValueError``."""

def pack_trie(
    token_bytes: list[bytes], special_ids: list[int]
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """grid-core's ``build_trie`` arrays for a vocabulary, bit for bit: ``(edge,
    token, size, alias_offset, alias_ids)`` as little-endian bytes (uint8 edges,
    int32 for the rest). Empty spellings and ``special_ids`` are left out; a
    special id outside the vocabulary is a ``ValueError``."""

def union_dfa(
    sizes: Sequence[int],
    starts: Sequence[int],
    finals: Sequence[int],
    eps_len: Sequence[int],
    eps_targets: Sequence[int],
    edge_mask: Sequence[int],
    edge_target: Sequence[int],
    masks: bytes,
    max_states: int,
    mask_base: Sequence[int],
) -> tuple[int, bytes, list[int], list[int]] | None:
    """grid-core's minimal union DFA of the terminal NFAs (stages 2-4 of
    ``grid_core.dfa`` and its tables), byte for byte, the GIL released.

    The trimmed NFAs as flat arrays (``array('i')`` or sequences of ints): per
    terminal its NFA's ``sizes``, ``starts`` and ``finals`` (local state ids);
    per state, terminal after terminal, ``eps_len`` (how many ε-successors),
    ``edge_mask`` (its byte edge's set: a 32-byte little-endian row of
    ``masks`` counted from its terminal's ``mask_base`` row, or -1) and
    ``edge_target`` (local id, or -1); ``eps_targets`` the ε-successors (local
    ids), state after state. Returns ``(n_states,
    trans, accept, live)``: ``trans`` the ``n_states * 256`` int32 table
    (DEAD = -1) as little-endian bytes, ``accept``/``live`` the per-state
    terminal bitsets; None when the subset construction needs more than
    ``max_states`` states. Malformed or untrimmed NFAs are a ``ValueError``."""

def thompson(
    program: Sequence[int], masks: bytes, max_states: int
) -> tuple[int, int, bytes, bytes, bytes, bytes, bytes] | str:
    """The trimmed Thompson NFA of one pattern program (``grid_core.regex_bytes``
    writes it; the construction is its reference builder's, state for state), the
    GIL released. ``masks``: the program's byte sets as 32-byte little-endian
    rows. Returns ``(start, final, eps_len, eps_targets, edge_mask, edge_target,
    mask_rows)`` (``ByteNFA``'s flat layout, the arrays as little-endian int32
    bytes), or the refusal: ``"states"`` (more than ``max_states`` states),
    ``"empty string"`` or ``"empty language"``. A malformed program is a
    ``ValueError``."""

def _probe_arm() -> None:
    """Tests only: arm the GIL probe. The GIL-free part of the next cold walk
    (``EngineTables.walk``), cold session fill or batch fill waits until a Python
    thread calls :func:`_probe_release` (at most 30 s)."""

def _probe_reached() -> bool:
    """A call is waiting at the armed probe."""

def _probe_release() -> None:
    """Let the waiting call go on."""

def _probe_disarm() -> bool:
    """Disarm the probe; True if a call timed out waiting (it held the GIL)."""
