"""GridGuide: the per-request object, and the Engine of shared artifacts behind it.

An :class:`Engine` holds everything a guide reads and nobody writes: the
projected grammar, its LALR(1) tables, the union DFA, the lexicon, the
vocabulary and its token trie. It is built once per artifact set and shared by
every guide; a guide owns only its configuration history.

The mask of a configuration (DESIGN.md sections 4, 6 and 8):

1. A <- allowed terminals of the stack (memoized per interned node);
2. walk the trie from the remainder under A: CI ids and CD entries, through
   the cache (T1, then T2, then a fresh walk that is published:
   :mod:`grid_core.cache`);
3. group the CD entries by (stack, emitted terminal), one verdict class each:
   shift the terminal on the live stack, take A', walk each entry's subtree
   from its tail (cached too); repeat for CD entries found one shift deeper;
4. admit EOS iff the remainder finalizes and ``$END`` reaches ACCEPT.

An empty mask at a viable prefix is a bug: :class:`MaskError`, never a mask.

Guides are persistent: each step is a cell (configuration, previous cell,
the step's audit record), so ``fork()`` is O(1) and ``rollback(n)`` is n
pointer hops, records included.

:meth:`Engine.guide` is the one way adapters get a guide: the native session
(:class:`grid_core.kernels.KernelGuide`) when grid-kernels is loaded, else a
:class:`GridGuide`; both speak :class:`grid_core.protocol.Guide`.
"""

from __future__ import annotations

import array
import functools
import hashlib
import itertools
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from grid_core import kernels
from grid_core.audit import AuditLog, Kind, mask_entry_id
from grid_core.cache import (
    CDGroup,
    Entry,
    GenericKey,
    IdentKey,
    Key,
    MaskTable,
    SharedCache,
    Verdict,
    id_bits,
    make_entry,
)
from grid_core.dfa import ByteDFA, build_union_dfa
from grid_core.errors import EMPTY_MASK, GuideError, MaskError
from grid_core.events import EventGuide, EventSpec, tracker
from grid_core.grammar import Grammar
from grid_core.lexer import Config, Lexer, Normal, Scanner
from grid_core.lexicon import Lexicon, build_lexicon
from grid_core.parser import Node, Parser
from grid_core.protocol import Guide, accept_in_order, accepted_token, write_row
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_core.walk import CDEntry, walk_from


@dataclass(frozen=True)
class MaskResult:
    """One step's mask as token ids (CI part, CD part) plus the EOS verdict, with its cost.

    ``cd_classes`` counts the verdict classes evaluated: distinct (stack, emitted
    terminal) pairs, each decided by one shift on the live stack.
    """

    ci_ids: tuple[int, ...]
    cd_parts: tuple[tuple[int, ...], ...]
    """The CD ids, one tuple per class verdict (memoized tuples, never copied)."""
    eos: bool
    cd_entries: int
    cd_classes: int
    bits: int
    """CI and CD ids as one integer (bit ``i`` is token ``i``), EOS not included."""

    @functools.cached_property
    def cd_ids(self) -> tuple[int, ...]:
        """The ids the CD verdicts admit, class by class (built on first use)."""
        return tuple(itertools.chain.from_iterable(self.cd_parts))


def family_of(grammar: Grammar, dfa: ByteDFA, trie: TokenTrie) -> str:
    """The walk family of an engine over these artifacts. A walk at a generic
    position (no lexicon category allowed or ignored) reads the union DFA, the
    ignored terminals, the pick order among a lexeme's candidates and the trie,
    and nothing else of the engine; so engines of one family may share those
    walks under the same keys (T2, the tier on Redis). Two grammars with one
    DFA whose ``%ignore`` or terminal priorities differ are two families: their
    walks differ where a blank is ignored in one and a token in the other, or
    where a lexeme is picked as another terminal."""
    lexing = f"{sorted(grammar.ignored)}|{list(grammar.pick_order)}".encode()
    digest = hashlib.blake2b(lexing, digest_size=8).hexdigest()
    return f"{dfa.fingerprint}:{digest}:{trie.fingerprint}"


class Engine:
    """Shared, immutable artifacts for one (grammar, lexicon, vocabulary), and their caches.

    ``cache``: True (default) gives the engine its own T1 table; a
    :class:`SharedCache` adds T2, shared with the other engines of the dialect
    family (same terminals, same vocabulary); False computes every walk afresh
    (the reference the cache is tested against).
    """

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        lexicon: Mapping[str, Collection[bytes]] | Lexicon | None = None,
        *,
        dfa: ByteDFA | None = None,
        trie: TokenTrie | None = None,
        cache: bool | SharedCache = True,
    ) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.tables = grammar.lalr()
        self.dfa = dfa or build_union_dfa([(t.name, t.pattern) for t in grammar.terminals])
        if not isinstance(lexicon, Lexicon):
            lexicon = build_lexicon(grammar, self.dfa, lexicon or {})
        self.lexicon = lexicon
        self.trie = trie or build_trie(vocab)
        assert self.trie.vocab_fingerprint == vocab.fingerprint
        self.scanner = Scanner(grammar, self.dfa, lexicon)
        self.parser = Parser(self.tables)
        self.lexer = Lexer(self.scanner, self.parser)
        self.n_words = (vocab.n_vocab + 31) // 32
        self.t1 = MaskTable() if cache is not False else None
        self.shared = cache if isinstance(cache, SharedCache) else None
        if self.shared is not None:
            self.shared.bind(self.family)
        self.kernel = kernels.engine_tables(self)

    @functools.cached_property
    def family(self) -> str:
        """The walk family (:func:`family_of`): engines of one family share T2
        and the shared tier on Redis."""
        return family_of(self.grammar, self.dfa, self.trie)

    def fingerprints(self) -> dict[str, str]:
        return {
            "grammar": self.grammar.fingerprint,
            "tables": self.tables.fingerprint,
            "dfa": self.dfa.fingerprint,
            "lexicon": self.lexicon.fingerprint,
            "tokenizer": self.vocab.fingerprint,
            "trie": self.trie.fingerprint,
        }

    def guide(self, *, audit: bool = True, events: EventSpec | None = None) -> Guide:
        """A guide at the initial configuration: the native session when the
        kernels are loaded (``self.kernel``), else the Python :class:`GridGuide`.
        ``audit`` turns the per-step records on (DESIGN.md section 9); an
        ``events`` spec gives it a parse event stream (off by default:
        ``grid_core.events``), tracked natively in the session, or on the Python
        path by an :class:`~grid_core.events.EventGuide` around the guide."""
        if self.kernel is not None:
            return kernels.session(self, audit=audit, events=events)
        inner = GridGuide(self, audit=audit)
        if events is None:
            return inner
        return EventGuide(inner, tracker(self, events))

    def walk(
        self, root: int, pending: bytes, allowed: int
    ) -> tuple[tuple[int, ...], tuple[CDEntry, ...]]:
        """CI ids and CD entries of a walk from trie node ``root`` over ``pending``,
        through T1 and T2 keyed by the raw bytes (a root walk of a configuration goes
        through :meth:`root_walk`, keyed by its normal form)."""
        if self.t1 is None:
            nodes, cd = self._walk_from(root, pending, allowed)
            return tuple(sorted(self.ids(nodes))), tuple(cd)
        entry = self._cached_walk(self.key(root, pending, allowed), root, pending, allowed)
        return entry.ids, entry.cd

    def _cached_walk(self, key: Key, root: int, pending: bytes | Config, allowed: int) -> Entry:
        """The cache entry of a walk: T1, then T2 (copied into T1), else walked and
        published. ``pending`` may be the configuration itself: its remainder is read
        only on a miss."""
        assert self.t1 is not None
        entry = self.t1.get(key)
        if entry is None and self.shared is not None:
            entry = self.shared.table.get(key)
            if entry is not None:
                self.t1.publish(key, entry)
        if entry is None:
            if isinstance(pending, Config):
                pending = pending.remainder
            if self.kernel is not None:  # the whole miss in Rust, the GIL released
                entry = kernels.cold_entry(self, key, root, pending, allowed)
            else:
                nodes, cd = self._walk_from(root, pending, allowed)
                entry = make_entry(key, self.ids(nodes), cd, self.vocab.n_vocab)
            if self.shared is not None:
                entry = self.shared.table.publish(key, entry)
            entry = self.t1.publish(key, entry)
        return entry

    def key(self, root: int, form: bytes | Normal, allowed: int) -> Key:
        """The cache key of a walk (see ``grid_core.cache``): ``form`` is a root walk's
        normal form (:attr:`Config.normal`) or a sub-walk's raw tail. An
        :class:`IdentKey` at an identifier position, else a :class:`GenericKey`
        (which drops the normal form's lexicon state)."""
        namespace = self.shared.namespace if self.shared is not None else 0
        if (allowed | self.scanner.ignored) & self.lexicon.categories:
            return IdentKey(namespace, root, form, allowed, self.lexicon.fingerprint)
        generic = form if isinstance(form, bytes) else (form[0], *form[2:])
        return GenericKey(namespace, root, generic, allowed)

    def _walk_from(
        self, root: int, pending: bytes, allowed: int
    ) -> tuple[list[int], list[CDEntry]]:
        """One uncached walk: the compiled kernel when loaded, else the Python reference."""
        if self.kernel is not None:
            nodes, cd = self.kernel.walk(root, pending, allowed, root != 0)
            return list(nodes), [(n, t, bytes(tail)) for n, t, tail in cd]
        return walk_from(self.scanner, self.trie, root, pending, allowed, root != 0)

    def compute_mask(self, config: Config) -> MaskResult:
        """The exact mask of a configuration (see the module header)."""
        parser = self.parser
        ci, bits, group = self.root_walk(config)
        cd_parts: list[tuple[int, ...]] = []
        entries, classes = len(group.entries), 0
        level: dict[Node, list[CDGroup]] = {config.node: [group]} if group.entries else {}
        while level:
            deeper: dict[Node, list[CDGroup]] = {}
            for node, groups in level.items():
                # Groups that land on one stack are decided together (rare: a fresh merge).
                merged = (
                    groups[0] if len(groups) == 1 else CDGroup(sum((g.entries for g in groups), ()))
                )
                classes += len(merged.classes)
                for index, (t, _) in enumerate(merged.classes):
                    shifted = parser.shift(node, t)
                    more_ci, more_bits, more = self.verdict(merged, index, parser.allowed(shifted))
                    if more_ci:
                        cd_parts.append(more_ci)
                    bits |= more_bits
                    if more is not None:
                        entries += len(more.entries)
                        deeper.setdefault(shifted, []).append(more)
            level = deeper
        eos = self.lexer.eos_allowed(config)
        return MaskResult(ci, tuple(cd_parts), eos, entries, classes, bits)

    def root_walk(self, config: Config) -> tuple[tuple[int, ...], int, CDGroup]:
        """CI ids (as a tuple and as bits) and the CD group of a configuration's walk
        (cached, keyed by its normal form)."""
        allowed = self.parser.allowed(config.node)
        if self.t1 is None:
            ci, cd = self.walk(0, config.remainder, allowed)
            return ci, id_bits(ci), CDGroup(cd)
        entry = self._cached_walk(self.key(0, config.normal, allowed), 0, config, allowed)
        return entry.ids, entry.bits, entry.group

    def verdict(self, group: CDGroup, index: int, allowed: int) -> Verdict:
        """A class's verdict under the allowed set after its shift: the CI ids its
        entries' sub-walks admit and the CD entries they find one shift deeper."""
        memo_key = (index, allowed, self.lexicon.fingerprint)
        if self.t1 is not None:
            hit = group.verdicts.get(memo_key)
            if hit is not None:
                return hit
        ci: list[int] = []
        cd: list[CDEntry] = []
        for trie_node, _, tail in group.classes[index][1]:
            more_ci, more_cd = self.walk(trie_node, tail, allowed)
            ci += more_ci
            cd += more_cd
        result = (tuple(ci), id_bits(ci), CDGroup(tuple(cd)) if cd else None)
        if self.t1 is not None:
            result = group.verdicts.setdefault(memo_key, result)
        return result

    def ids(self, nodes: Iterable[int]) -> list[int]:
        """Every token id spelled at the given trie nodes (alias classes expanded)."""
        off, ids = self.trie.alias_offset, self.trie.alias_ids
        out: list[int] = []
        for n in nodes:
            out.extend(ids[off[n] : off[n + 1]])
        return out

    def pack(self, token_ids: Iterable[int]) -> array.array[int]:
        """Packed int32 bitmask: bit ``i % 32`` of word ``i // 32`` is token ``i``."""
        raw = bytearray(self.n_words * 4)
        for i in token_ids:
            raw[i >> 3] |= 1 << (i & 7)
        return self._words(bytes(raw))

    def pack_result(self, result: MaskResult) -> array.array[int]:
        """The packed bitmask of a mask (EOS ids included when EOS is legal), from its
        bits: O(V / 64) machine words, no per-id work."""
        bits = result.bits | self._eos_bits if result.eos else result.bits
        return self._words(bits.to_bytes(self.n_words * 4, "little"))

    @functools.cached_property
    def _eos_bits(self) -> int:
        return id_bits(self.vocab.eos_ids)

    @staticmethod
    def _words(raw: bytes) -> array.array[int]:
        words = array.array("i")
        words.frombytes(raw)
        if sys.byteorder != "little":
            words.byteswap()
        return words


Record = tuple[int, str, int, int, Kind]
"""A step's audit fields before chaining: (config hash, mask entry id, token, blocked, kind)."""


@dataclass(frozen=True, eq=False)
class _Step:
    """One cell of a guide's persistent history: the configuration after the
    step's token, and the record of taking it (None at the start or with audit off)."""

    config: Config
    previous: _Step | None
    count: int
    terminated: bool = False
    record: Record | None = None
    token: int = -1


class GridGuide:
    """The Python guide (:class:`grid_core.protocol.Guide`; DESIGN.md section 8):
    masks, accept, EOS, rollback, fork and the audit records, the reference the
    native guide is checked against."""

    def __init__(self, engine: Engine, _step: _Step | None = None, *, audit: bool = True) -> None:
        self.engine = engine
        self.audited = audit
        self._step = _step or _Step(engine.lexer.initial, None, 0)
        self._audit_memo: tuple[_Step, tuple[int, str, int]] | None = None

    @property
    def config(self) -> Config:
        return self._step.config

    @property
    def steps(self) -> int:
        """Tokens accepted so far (EOS included)."""
        return self._step.count

    def is_terminated(self) -> bool:
        """EOS has been accepted."""
        return self._step.terminated

    def eos_allowed(self) -> bool:
        return not self.is_terminated() and self.engine.lexer.eos_allowed(self.config)

    def is_complete(self) -> bool:
        """The output so far is a sentence of L."""
        return self.engine.lexer.eos_allowed(self.config)

    def compute(self) -> MaskResult:
        if self.is_terminated():
            raise GuideError(self.steps, None, "the guide has accepted EOS; it has no next mask")
        result = self.engine.compute_mask(self.config)
        if not (result.bits or result.eos):
            raise MaskError(self.steps, EMPTY_MASK)
        return result

    def mask_ids(self) -> list[int]:
        """The admitted token ids, ascending, EOS ids included when EOS is legal."""
        return self.mask_and_ids()[0]

    def mask_and_ids(self) -> tuple[list[int], MaskResult]:
        """The admitted token ids (as :meth:`mask_ids`) with the mask they come from."""
        result = self.compute()
        ids = [*result.ci_ids, *result.cd_ids]
        if result.eos:
            ids += self.engine.vocab.eos_ids
        return sorted(ids), result

    def mask(self) -> array.array[int]:
        """The mask as a packed int32 bitmask over the vocabulary."""
        return self._packed(self.compute())

    def _packed(self, result: MaskResult) -> array.array[int]:
        """``result`` packed, remembering its audit fields for this step."""
        packed = self.engine.pack_result(result)
        if self.audited and (self._audit_memo is None or self._audit_memo[0] is not self._step):
            ids = result.bits.bit_count() + (len(self.engine.vocab.eos_ids) if result.eos else 0)
            blocked = self.engine.vocab.n_vocab - ids
            fields = (self.config.hash, mask_entry_id(packed.tobytes()), blocked)
            self._audit_memo = (self._step, fields)
        return packed

    def fill_next_token_bitmask(self, bitmask: object, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask`` (:mod:`grid_core.protocol`)."""
        write_row(bitmask, row, self.engine.n_words, lambda: self.mask().tobytes())

    def step_audit(self) -> tuple[int, str, int]:
        """(configuration hash, mask entry id, blocked count) of the current step's
        mask. The reference answers even without audit (the parity tests read an
        unaudited guide's fields); the native guide keeps none then and raises
        :class:`GuideError`, as both do for :meth:`audit_log` and :meth:`seal`."""
        memo = self._audit_memo
        if memo is None or memo[0] is not self._step:
            audited, self.audited = self.audited, True
            try:
                self.mask()
            finally:
                self.audited = audited
            memo = self._audit_memo
            assert memo is not None
        return memo[1]

    def accept_token(self, token_id: int, kind: Kind = "sampled") -> None:
        """Accept one token. A token outside the mask raises :class:`GuideError`;
        with audit on, the step's record is kept (EOS recorded as ``eos``). Any
        integer is taken as one (``numpy.int64`` from ``argmax`` included); a
        ``kind`` other than sampled, forced or reserve is a ``ValueError``,
        before anything else is checked (as the native guide's)."""
        token_id = accepted_token(token_id, kind)
        vocab = self.engine.vocab
        if self.is_terminated():
            raise GuideError(self.steps, token_id, "the guide has already accepted EOS")
        if not 0 <= token_id < vocab.n_vocab:
            raise GuideError(self.steps, token_id, "outside the vocabulary")
        if token_id in vocab.eos_ids:
            if not self.engine.lexer.eos_allowed(self.config):
                raise GuideError(self.steps, token_id, "EOS before the output is a sentence")
            record = self._record(token_id, "eos")
            self._step = _Step(self.config, self._step, self.steps + 1, True, record, token_id)
            return
        if token_id in vocab.special_ids:
            raise GuideError(self.steps, token_id, "special tokens are never admitted")
        nxt = self.engine.lexer.advance(self.config, vocab.token_bytes[token_id])
        if nxt is None or not self.engine.lexer.is_viable(nxt):
            spelling = vocab.token_bytes[token_id]
            raise GuideError(self.steps, token_id, f"{spelling!r} is not in the mask")
        record = self._record(token_id, kind)
        self._step = _Step(nxt, self._step, self.steps + 1, False, record, token_id)

    def _record(self, token: int, kind: Kind) -> Record | None:
        if not self.audited:
            return None
        config_hash, entry_id, blocked = self.step_audit()
        return (config_hash, entry_id, token, blocked, kind)

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int:
        """Accept in order up to the first refused token; how many were accepted."""
        return accept_in_order(self, tokens, kind)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many leading ``tokens`` would be accepted (the guide is unchanged)."""
        probe = GridGuide(self.engine, self._step, audit=False)
        return probe.accept_tokens(tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (and their records)."""
        if not 0 <= n <= self.steps:
            raise GuideError(self.steps, None, f"cannot roll back {n} of {self.steps} tokens")
        step = self._step
        for _ in range(n):
            assert step.previous is not None
            step = step.previous
        self._step = step

    def fork(self) -> GridGuide:
        """An independent guide at the same point, sharing all history (O(1))."""
        return GridGuide(self.engine, self._step, audit=self.audited)

    def config_key(self) -> Config:
        """The configuration itself (immutable; hashed by identity)."""
        return self.config

    def output(self) -> bytes:
        """The bytes accepted so far (EOS excluded)."""
        spelling, parts = self.engine.vocab.token_bytes, []
        step = self._step
        while step.previous is not None:
            if not step.terminated:
                parts.append(spelling[step.token])
            step = step.previous
        return b"".join(reversed(parts))

    def audit_log(self) -> AuditLog:
        """The records of the steps so far, chained (unsealed); a guide made
        without audit has none (:class:`GuideError`)."""
        if not self.audited:
            raise GuideError(self.steps, None, "this guide does not audit its steps")
        records: list[Record] = []
        step: _Step | None = self._step
        while step is not None and step.previous is not None:
            if step.record is None:
                raise GuideError(self.steps, None, "this guide does not audit its steps")
            records.append(step.record)
            step = step.previous
        log = AuditLog()
        for config_hash, entry_id, token, blocked, kind in reversed(records):
            log.append(config_hash, entry_id, token, blocked, kind)
        return log

    def fingerprints(self) -> dict[str, str]:
        """The artifacts the records depend on: the engine's."""
        return self.engine.fingerprints()

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog:
        """The records so far, sealed with :meth:`fingerprints`."""
        log = self.audit_log()
        log.close(stop_reason, self.fingerprints(), mode)
        return log
