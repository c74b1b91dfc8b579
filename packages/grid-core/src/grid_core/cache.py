"""The configuration-keyed mask cache (DESIGN.md section 6, OBL-KEY1).

What is cached is one **walk**: the CI token ids and the CD entries of the trie
subtree at ``root`` for a remainder under an allowed set A (``walk.walk_from``).
The CD entries are structure (trie node, emitted terminal, tail), a function of
the key like the CI ids; their *verdicts* depend on the live stack and are
never cached: each step decides them by shifting each class's terminal on the
live stack and walking (cached, under the new allowed set) again.

Keys. A root walk is keyed by its configuration's **scanner normal form**
(:attr:`grid_core.lexer.Config.normal`: the DFA state q and lexicon node ln
after the remainder, the candidate set p of its longest emittable prefix and
the post-accept suffix ``v = r[la_len:]``; p = 0 and v empty when no prefix can
be emitted), never by the raw remainder r: the walk reads r only through these
(a new accept inside the walk measures the tail from the path, an old one from
v), so the form is a sound key (OBL-KEY1), and its size does not grow with a
long pending lexeme (requirement R). A CD sub-walk (from a trie node, after an
emission) is keyed by its raw tail, which is at most v plus one token.

A walk is at an **identifier position** when a lexicon category is in A or
ignored: then the lexicon (the schema) shapes liveness and candidates, and the
key is an :class:`IdentKey` carrying the schema fingerprint and the full form
(q, ln, p, v). Otherwise the lexicon cannot matter (a category outside A |
ignored is never live and never picked) and the key is a :class:`GenericKey`,
which drops ln (the lexicon-visibility guard) and is shared by every schema.
The two are distinct types; an entry remembers the kind of key it was
published under, and consulting a generic entry at an identifier position
raises :class:`IdentifierRuleError` in every build (the identifier composition
rule).

Two tiers, write-back, one key for both: **T1** per engine (one grammar
projection), **T2** shared by every role and schema of a walk family (one
union DFA with its ignored terminals and pick order, one token trie); a T2
hit is copied into T1. DESIGN.md section 6 keys T1 by the raw r; the normal
form is the same key made O(1) in size (two remainders with one form have one
walk), so GRID uses it in both tiers.

Entries are immutable and content-addressed: ``entry_id = BLAKE2b-128(key ||
encoding tag || payload)``. Publishing is idempotent; a racing publish of the
same key with a different payload raises :class:`CacheConsistencyError`.
Payloads are adaptive: a dense bitmask over the vocabulary when the CI set is
large, a sparse sorted id list when it is small (the smaller of the two).
Namespaces roll over (``rollover``) when a grammar is superseded: entries of an
old namespace are never consulted again.
"""

from __future__ import annotations

import array
import hashlib
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from grid_core.errors import GridError
from grid_core.fingerprint import canonical
from grid_core.walk import CDEntry

DENSE, SPARSE = b"D", b"S"


class CacheConsistencyError(GridError):
    """Two different payloads were published for one key (OBL-KEY1 broken)."""

    def __init__(self, key: object, first: str, second: str) -> None:
        self.key, self.first, self.second = key, first, second
        super().__init__(f"cache key {key} published twice: entry {first} then {second}")


class IdentifierRuleError(GridError):
    """A generic entry was consulted at an identifier position."""

    def __init__(self, key: object) -> None:
        self.key = key
        super().__init__(f"identifier composition rule: generic entry consulted for {key}")


@dataclass(frozen=True)
class GenericKey:
    """A walk key where no lexicon category is visible (shared by all schemas)."""

    namespace: int
    root: int
    remainder: object  # the normal form (q, p, v) of a root walk, or a sub-walk's raw tail
    allowed: int

    kind = "generic"


@dataclass(frozen=True)
class IdentKey:
    """A walk key at an identifier position: the schema is part of the key."""

    namespace: int
    root: int
    remainder: object  # the normal form (q, ln, p, v) of a root walk, or a sub-walk's raw tail
    allowed: int
    schema: str

    kind = "ident"


Key = GenericKey | IdentKey


@dataclass(frozen=True, eq=False)
class Entry:
    """One cached walk. Immutable; ``entry_id`` addresses its key and content."""

    kind: str
    encoding: bytes
    payload: bytes
    cd: tuple[CDEntry, ...]
    entry_id: str

    @cached_property
    def ids(self) -> tuple[int, ...]:
        """The CI token ids, ascending."""
        return _decode(self.encoding, self.payload)

    @cached_property
    def bits(self) -> int:
        """The CI token ids as one integer: bit ``i`` is token ``i``."""
        if self.encoding == DENSE:
            return int.from_bytes(self.payload, "little")
        return id_bits(self.ids)

    @cached_property
    def group(self) -> CDGroup:
        """The entry's CD entries as one group, with its verdict classes."""
        return CDGroup(self.cd)


class CDGroup:
    """CD entries to be decided on one live stack, split into verdict classes.

    A **class** is the entries that emit one terminal: they share one shift on
    the live stack, hence one allowed set A' after it. Given A', the class's
    verdict (the CI ids its entries' sub-walks admit, and the CD entries they
    find one shift deeper) is a function of the entries, A' and the lexicon,
    so it is memoized here (``verdicts``) and each step pays one lookup per
    class, not one walk per entry. Groups are compared by identity; the memo
    is filled idempotently (two threads compute the same value).
    """

    __slots__ = ("classes", "entries", "verdicts")

    def __init__(self, entries: tuple[CDEntry, ...]) -> None:
        self.entries = entries
        by_terminal: dict[int, list[CDEntry]] = {}
        for entry in entries:
            by_terminal.setdefault(entry[1], []).append(entry)
        self.classes = tuple((t, tuple(group)) for t, group in by_terminal.items())
        self.verdicts: dict[tuple[int, int, str], Verdict] = {}


Verdict = tuple[tuple[int, ...], int, CDGroup | None]
"""A class's verdict: the CI ids its sub-walks admit, the same as bits, the group deeper."""


def _decode(encoding: bytes, payload: bytes) -> tuple[int, ...]:
    if encoding == SPARSE:
        ids = array.array("i")
        ids.frombytes(payload)
        if sys.byteorder != "little":
            ids.byteswap()
        return tuple(ids)
    out = []
    for i, byte in enumerate(payload):
        while byte:
            low = byte & -byte
            out.append(i * 8 + low.bit_length() - 1)
            byte ^= low
    return tuple(out)


def id_bits(ids: Sequence[int]) -> int:
    """Token ids as one integer (bit ``i`` is token ``i``), in O(len(ids) + max id / 8)."""
    if not ids:
        return 0
    raw = bytearray((max(ids) >> 3) + 1)
    for i in ids:
        raw[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(raw, "little")


def make_entry(key: Key, ids: Sequence[int], cd: Sequence[CDEntry], n_vocab: int) -> Entry:
    """Encode a walk's result, choosing the smaller payload encoding."""
    ids = sorted(ids)
    if len(ids) * 4 <= (n_vocab + 7) // 8:
        sparse = array.array("i", ids)
        if sys.byteorder != "little":
            sparse.byteswap()
        encoding, payload = SPARSE, sparse.tobytes()
    else:
        dense = bytearray((n_vocab + 7) // 8)
        for i in ids:
            dense[i >> 3] |= 1 << (i & 7)
        encoding, payload = DENSE, bytes(dense)
    cd_t = tuple(cd)
    return Entry(key.kind, encoding, payload, cd_t, entry_id(key, encoding, payload, cd_t))


def entry_id(key: Key, encoding: bytes, payload: bytes, cd: Sequence[CDEntry]) -> str:
    """``BLAKE2b-128(key || encoding tag || payload and CD entries)``, hex: the
    content address of an entry (the kernels compute it byte for byte alike)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(canonical(_key_fields(key)))
    digest.update(encoding)
    digest.update(canonical((payload, [list(e) for e in cd])))
    return digest.hexdigest()


def _key_fields(key: Key) -> tuple[object, ...]:
    if isinstance(key, IdentKey):
        return ("ident", key.namespace, key.root, key.remainder, key.allowed, key.schema)
    return ("generic", key.namespace, key.root, key.remainder, key.allowed)


class MaskTable:
    """One tier: key -> entry, published idempotently, thread-safe."""

    def __init__(self) -> None:
        self._entries: dict[Key, Entry] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        if key.kind == "ident" and entry.kind != "ident":
            raise IdentifierRuleError(key)
        self.hits += 1
        return entry

    def publish(self, key: Key, entry: Entry) -> Entry:
        """Store ``entry`` under ``key`` unless present; the same key must get the same id."""
        with self._lock:
            existing = self._entries.setdefault(key, entry)
        if existing.entry_id != entry.entry_id:
            raise CacheConsistencyError(key, existing.entry_id, entry.entry_id)
        return existing

    def inject(self, key: Key, entry: Entry) -> None:
        """Store an entry without checks: for tests that must see the guards fire."""
        self._entries[key] = entry


class SharedCache:
    """T2: shared by the engines of one walk family (:func:`grid_core.guide.family_of`:
    the same union DFA, ignored terminals, pick order and trie, all a generic walk reads).

    ``family`` names it; None takes the family of the first engine built with
    it (:meth:`bind`). ``namespace`` is part of every key; ``rollover()``
    starts a new one when a grammar is superseded, so nothing published before
    is consulted again.
    """

    def __init__(self, family: str | None = None) -> None:
        self.family = family
        self.namespace = 0
        self.table = MaskTable()
        self._lock = threading.Lock()

    def bind(self, family: str) -> None:
        """Check that an engine of ``family`` may use this cache (the first one
        names it when none was given); raises ValueError for another family,
        whose walks may differ under the same keys."""
        with self._lock:
            if self.family is None:
                self.family = family
        if self.family != family:
            raise ValueError(
                f"a shared cache serves one walk family: this cache's is {self.family}, "
                f"the engine's {family} (another DFA, ignored set, pick order or trie)"
            )

    def rollover(self) -> int:
        self.namespace += 1
        self.table = MaskTable()
        return self.namespace
