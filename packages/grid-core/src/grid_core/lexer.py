"""The byte lexer: maximal munch over the union DFA, contextual pick, configurations.

Vocabulary (each noun is used in this sense throughout grid-core):

- **remainder** ``r``: the bytes of the one lexeme in progress, read since the
  last emission. The union automaton has not died on it.
- **scan state**: ``(q, ln, la_len, la_cands)`` for a remainder: the DFA state
  after ``r``, the lexicon node after ``r`` (``-1`` once no word continues), the
  length of the longest prefix of ``r`` accepted by some terminal (0 if none),
  and the candidate set of that prefix. Updated in O(1) per byte.
- **candidates** of a lexeme: the terminals whose language contains it, a
  lexicon category only if the lexeme is one of its words.
- **pick**: the first candidate in ``Grammar.pick_order`` (priority, then name)
  that is ignored or in the allowed set A; ``-1`` if none.
- **emission**: when a byte kills the automaton, the longest accepted prefix is
  emitted with its pick (an ignored pick is skipped, another is shifted) and the
  bytes after it are scanned again from the start state.
- **configuration**: (stack node, remainder, scan state), DESIGN.md section 5.

A remainder is **live** under A when it is empty, or it is a prefix of some
string of R_t (of W_t for a lexicon category) for a terminal t in A or ignored.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass

from grid_core.dfa import ByteDFA
from grid_core.grammar import Grammar
from grid_core.lexicon import NO_NODE, Lexicon
from grid_core.parser import Node, Parser

ScanState = tuple[int, int, int, int]
"""(DFA state, lexicon node, last-accept length, last-accept candidates)."""

START: ScanState = (0, 0, 0, 0)

Normal = tuple[int, int, int, bytes]
"""A remainder's scanner normal form (q, ln, p, v): see :attr:`Config.normal`."""


@dataclass(frozen=True, eq=False)
class Config:
    """A configuration: the stack, the remainder and the remainder's scan state.

    The remainder is the first ``size`` bytes of ``buffer``. Configurations of
    one lexeme share one append-only buffer (:meth:`Lexer.advance` extends it in
    place when nobody has extended it past ``size`` yet, else copies), so a
    guide's history of n steps inside one long lexeme holds O(n) bytes, not
    O(n^2), and an advance costs O(|token|). Bytes below ``size`` are never
    written again: a configuration is immutable.
    """

    node: Node
    buffer: bytes | bytearray
    size: int
    scan: ScanState
    digest: int
    """``extend_digest(0, remainder)``, maintained incrementally (see :attr:`hash`)."""
    normal: Normal
    """The remainder's scanner normal form ``(q, ln, p, v)`` (:meth:`Lexer.config`)."""

    @property
    def remainder(self) -> bytes:
        """The remainder's bytes (a copy: O(size); the hot path never needs it)."""
        return bytes(self.buffer[: self.size])

    @functools.cached_property
    def hash(self) -> int:
        """The configuration hash: the stack's rolling hash joined with the remainder.

        ``low64(BLAKE2b-128(H(stack) || u64(|r|) || u64(digest(r))))`` where
        ``digest`` is the remainder's polynomial hash (:func:`extend_digest`),
        kept incrementally by :meth:`Lexer.advance`: the hash binds the raw
        remainder, not only its normal form, at O(1) cost per token.
        """
        data = b"".join(
            (
                self.node.hash.to_bytes(8, "little"),
                self.size.to_bytes(8, "little"),
                self.digest.to_bytes(8, "little"),
            )
        )
        return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")


DIGEST_MODULUS = (1 << 61) - 1


def extend_digest(digest: int, data: bytes | bytearray) -> int:
    """The polynomial digest of ``r + data`` from that of ``r``: the bytes read as
    a base-256 number modulo 2^61 - 1 (the length, hashed beside it, tells leading
    zero bytes apart). O(|data|)."""
    m = DIGEST_MODULUS
    return (digest * pow(256, len(data), m) + int.from_bytes(data, "big")) % m


class Scanner:
    """Maximal-munch scanning over one grammar's union DFA and lexicon."""

    def __init__(self, grammar: Grammar, dfa: ByteDFA, lexicon: Lexicon) -> None:
        assert dfa.terminal_names == tuple(t.name for t in grammar.terminals)
        self.grammar = grammar
        self.dfa = dfa
        self.lexicon = lexicon
        self.ignored = 0
        for t in grammar.ignored:
            self.ignored |= 1 << t
        self.order = grammar.pick_order
        self._picks: dict[tuple[int, int], int] = {}

    def candidates(self, accept: int, ln: int) -> int:
        """The candidate set of a lexeme whose DFA accept set is ``accept``."""
        cats = self.lexicon.categories
        if not accept & cats:
            return accept
        words = self.lexicon.word_cats[ln] if ln != NO_NODE else 0
        return (accept & ~cats) | (accept & cats & words)

    def pick(self, cands: int, allowed: int) -> int:
        """The terminal picked among ``cands`` under allowed set ``allowed``, or -1."""
        key = (cands, allowed)
        t = self._picks.get(key)
        if t is None:
            ok = cands & (allowed | self.ignored)
            t = next((x for x in self.order if ok >> x & 1), -1)
            self._picks[key] = t
        return t

    def live(self, q: int, ln: int, allowed: int) -> bool:
        """The remainder with DFA state ``q`` and lexicon node ``ln`` is live under A.

        Precondition: the remainder is not empty (the empty remainder is live).
        """
        ok = allowed | self.ignored
        cats = self.lexicon.categories
        if self.dfa.live[q] & ok & ~cats:
            return True
        return ln != NO_NODE and bool(self.lexicon.prefix_cats[ln] & ok & cats)

    def step(self, scan: ScanState, length: int, byte: int) -> ScanState | None:
        """Scan one more byte of a remainder now ``length`` bytes long (byte included).

        None when the byte kills the automaton (an emission is due).
        """
        q, ln, la_len, la_cands = scan
        q = self.dfa.trans[q * 256 + byte]
        if q < 0:
            return None
        if ln != NO_NODE:
            ln = self.lexicon.children[ln].get(byte, NO_NODE)
        accept = self.dfa.accept[q]
        if accept:
            return q, ln, length, self.candidates(accept, ln)
        return q, ln, la_len, la_cands

    def scan(self, data: bytes) -> ScanState | None:
        """The scan state of ``data`` as one remainder, or None if it dies inside."""
        scan: ScanState | None = START
        for i, b in enumerate(data):
            assert scan is not None
            scan = self.step(scan, i + 1, b)
            if scan is None:
                return None
        return scan


class Lexer:
    """Advances configurations: the scanner driving the parser (DESIGN.md section 8, step 7)."""

    def __init__(self, scanner: Scanner, parser: Parser) -> None:
        self.scanner = scanner
        self.parser = parser
        self.emittable = parser.tables.shiftable | scanner.ignored
        """Terminals some stack can take, and the ignored ones: the only picks there are."""
        self.initial = self.config(parser.root, b"", 0, START, 0)
        self._append = threading.Lock()

    def config(
        self, node: Node, buffer: bytes | bytearray, size: int, scan: ScanState, digest: int
    ) -> Config:
        """A configuration, with its remainder's scanner normal form ``(q, ln, p, v)``.

        ``q`` and ``ln`` are the DFA and lexicon states after the remainder; ``p``
        is the candidate set of its longest accepted prefix restricted to
        :attr:`emittable`, and ``v`` the bytes after that prefix (``r[la_len:]``),
        the only bytes a later emission rescans. When ``p`` is empty the prefix
        can never be emitted (its pick is -1 under every allowed set: lark
        fragments such as ``_UTF8_NOT_DQ`` are terminals that no rule takes), so
        ``v`` is dropped: the bytes of a pending lexeme with no emittable prefix
        (an open string literal) are not part of the form at all.

        Invariant (OBL-KEY1): the walk, the EOS gate and which bytes later
        advances accept depend on the remainder only through this form (and the
        stack), so the mask cache is keyed by it (``grid_core.cache``). Its size
        is O(|v|), never O(|r|), which keeps a long pending lexeme O(1) per
        token (requirement R); ``v`` is long only inside a lexeme whose first
        bytes are themselves a lexeme (``/*`` of a block comment).
        """
        q, ln, la_len, la_cands = scan
        p = la_cands & self.emittable
        v = bytes(buffer[la_len:size]) if p else b""
        return Config(node, buffer, size, scan, digest, (q, ln, p, v))

    def _emit(self, node: Node, scan: ScanState) -> Node | None:
        """Emit the last accepted lexeme of a remainder: the new stack, or None on error."""
        _, _, la_len, la_cands = scan
        if la_len == 0:
            return None
        t = self.scanner.pick(la_cands, self.parser.allowed(node))
        if t < 0:
            return None
        if self.scanner.ignored >> t & 1:
            return node
        return self.parser.shift(node, t)

    def advance(self, config: Config, data: bytes) -> Config | None:
        """The configuration after reading ``data``, or None if it leaves the language."""
        node, scan, size = config.node, config.scan, config.size
        buf = config.buffer
        with self._append:
            if isinstance(buf, bytearray) and len(buf) == size:
                buf += data  # nobody has read past ``size``: extend the shared buffer
            else:
                buf = bytearray(buf[:size]) + data
        start, i, end = 0, size, size + len(data)
        step = self.scanner.step
        while i < end:
            nxt = step(scan, i + 1 - start, buf[i])
            if nxt is not None:
                scan = nxt
                i += 1
                continue
            emitted = self._emit(node, scan)
            if emitted is None:
                return None
            node = emitted
            start += scan[2]
            i, scan = start, START
        if start == 0:
            return self.config(node, buf, end, scan, extend_digest(config.digest, data))
        # After an emission the remainder restarts in a fresh buffer: O(|rest|), and
        # rest lies within v + data.
        rest = bytearray(buf[start:end])
        return self.config(node, rest, len(rest), scan, extend_digest(0, rest))

    def finalize(self, config: Config) -> Node | None:
        """The stack once the remainder is lexed to the end of input, or None on error."""
        while config.size:
            emitted = self._emit(config.node, config.scan)
            if emitted is None:
                return None
            tail = bytes(config.buffer[config.scan[2] : config.size])
            after = self.advance(self.config(emitted, b"", 0, START, 0), tail)
            if after is None:
                return None
            config = after
        return config.node

    def eos_allowed(self, config: Config) -> bool:
        """EOS gate: the remainder finalizes and ``$END`` then reaches ACCEPT."""
        node = self.finalize(config)
        return node is not None and self.parser.accepts(node)

    def is_viable(self, config: Config) -> bool:
        """The configuration's remainder is live under its stack's allowed set."""
        if not config.size:
            return True
        q, ln, _, _ = config.scan
        return self.scanner.live(q, ln, self.parser.allowed(config.node))
