"""The executable specification of GRID's language, prefixes and mask.

This module *is* the definition that every fast path is checked against
(DESIGN.md sections 3 and 4). It is written to be obviously right, not fast:
brute force over the vocabulary, lark's interactive LALR parser as the parser
oracle, the ``regex`` package as the oracle for terminal languages. It shares no
code or tables with grid-core.

Definitions, in the order the code follows them:

* **Bytes as text.** A byte string is viewed as latin-1 text, one character per
  byte, so a terminal's pattern denotes a set of byte strings exactly. Patterns
  are compiled with ASCII semantics (case folding, ``\\d``, ``\\w``, ``\\s``).
* **Terminals.** Every terminal the grammar defines takes part in lexing, used
  by a rule or not (terminal numbering is frozen at L1; a projection only cuts
  rules). ``%ignore``d terminals are skipped.
* **Lexing** is maximal munch over the union of all terminal languages R_t. The
  automaton reads the pending text; while the text is a prefix of some string of
  some R_t it stays pending. When it dies (or input is finalized) the lexeme is
  the longest prefix in some R_t; the bytes after it are requeued. Lexeme
  boundaries therefore do not depend on the parser.
* **Picking.** A lexeme's candidates are the terminals whose language contains
  it (for a lexicon terminal, only if the lexeme is one of its words). The pick
  is the first candidate in lark's order that is ``%ignore``d (skipped) or that
  the parser can shift after reductions. No such candidate is an error. Lark's
  order: priority (higher first); at equal priority a string literal before a
  pattern (lark's ``UnlessCallback``); then greater maximum width, longer
  pattern text, name (lark's ``BasicLexer`` sort).
* **Prefix(L)**: the scan-and-pick of ``w`` succeeds and the pending remainder
  ``r`` is empty or is a prefix of some string of R_t (of W_t for a lexicon
  terminal) for some terminal t that the parser can shift or that is ignored.
* **L**: the scan succeeds, the remainder finalizes (is lexed to the end with
  successful picks) and the parser then accepts ``$END``.
* **Oracle limit.** ``regex``'s partial matching misreports lazy quantifiers
  (``x+?y{1,2}?`` "partially matches" ``xX``), so grammars given to the
  specification spell quantifiers greedily (same language); this is checked.
* **Mask** M(w) = {t not special, bytes(t) non-empty : w.bytes(t) in Prefix(L)}
  plus EOS iff w is in L.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import regex
from lark import Lark, Token
from lark.exceptions import UnexpectedInput

END = "$END"
LAZY = regex.compile(r"(?<!\\)[*+?}]\?")  # a quantifier followed by "?"

Parser = Any  # lark's InteractiveParser (untyped)
State = tuple[Parser, frozenset[str]]  # a parser and the terminals it can shift


def text(b: bytes) -> str:
    """The latin-1 view of a byte string: one character per byte."""
    return b.decode("latin-1")


def _tie_key(t: Any) -> tuple[int, bool, int, int, str]:
    """Lark's order of a terminal among the candidates of one lexeme (see the header)."""
    p = t.pattern
    return (-t.priority, p.type == "re", -p.max_width, -len(p.to_regexp()), str(t.name))


class Language:
    """The language L of a (projected) lark grammar with lexicons, and its prefixes.

    ``lexicons`` maps a terminal name to its finite word set W_t; terminals not
    named there are unrestricted. The grammar must be LALR(1) for lark.
    """

    def __init__(
        self,
        grammar: str,
        lexicons: Mapping[str, Collection[bytes]] | None = None,
        start: str = "start",
    ) -> None:
        every = Lark(grammar, parser=None, lexer="basic")  # lexer-only mode keeps all terminals
        self.lark = Lark(
            grammar, parser="lalr", lexer="basic", start=start, propagate_positions=True
        )
        self.ignored = frozenset(every.ignore_tokens)
        self.regex = {
            t.name: regex.compile(t.pattern.to_regexp(), regex.A) for t in every.terminals
        }
        self.order = [t.name for t in sorted(every.terminals, key=_tie_key)]
        self.lexicons = {n: frozenset(map(text, ws)) for n, ws in (lexicons or {}).items()}
        lazy = [t.name for t in every.terminals if LAZY.search(t.pattern.to_regexp())]
        assert not lazy, f"lazy quantifiers (see the module header) in {lazy}"
        unknown = set(self.lexicons) - set(self.regex)
        assert not unknown, f"lexicons name terminals the grammar lacks: {sorted(unknown)}"
        union = "|".join(f"(?:{t.pattern.to_regexp()})" for t in every.terminals)
        self.union = regex.compile(union, regex.A)
        self.longest = regex.compile(union, regex.A | regex.POSIX)  # leftmost-longest
        self._accepts: dict[tuple[int, ...], frozenset[str]] = {}

    # -- lexing (independent of the parser) ---------------------------------

    def lex(self, r: str, final: bool = False) -> tuple[list[str], str] | None:
        """Split pending text into emitted lexemes and the new pending remainder.

        With ``final`` the input has ended and everything is emitted. None when
        the automaton dies with no accepted prefix.
        """
        lexemes = []
        while r and (final or not self.union.fullmatch(r, partial=True)):
            m = self.longest.match(r)
            if m is None or m.end() == 0:
                return None
            lexemes.append(r[: m.end()])
            r = r[m.end() :]
        return lexemes, r

    # -- parsing --------------------------------------------------------------

    def start_state(self) -> State:
        p = self.lark.parse_interactive("")
        return p, self.shiftable(p)

    def shiftable(self, p: Parser) -> frozenset[str]:
        """lark's ``accepts()`` of ``p``: a function of its LALR state stack alone
        (the value stack only holds trees), so memoized by that stack."""
        key = tuple(p.parser_state.state_stack)
        found = self._accepts.get(key)
        if found is None:
            found = self._accepts[key] = frozenset(p.accepts())
        return found

    def pick(self, shiftable: frozenset[str], lexeme: str) -> str | None:
        """The terminal picked for ``lexeme`` (an ignored one included), or None."""
        for t in self.order:
            if not self.regex[t].fullmatch(lexeme):
                continue
            if t in self.lexicons and lexeme not in self.lexicons[t]:
                continue
            if t in self.ignored or t in shiftable:
                return t
        return None

    def feed(self, state: State, lexeme: str) -> State | None:
        """Pick a terminal for ``lexeme`` and shift it; None if no candidate is viable."""
        p, shiftable = state
        t = self.pick(shiftable, lexeme)
        if t is None:
            return None
        if t in self.ignored:
            return state
        p = p.copy()
        try:
            p.feed_token(Token(t, lexeme))
        except UnexpectedInput:  # pragma: no cover - accepts() said it shifts
            raise AssertionError(f"lark refused {t} after accepts() admitted it") from None
        return p, self.shiftable(p)

    def live(self, state: State, r: str) -> bool:
        """The pending remainder can still become a lexeme the parser takes (or skips)."""
        if not r:
            return True
        for t in state[1] | self.ignored:
            if t == END:
                continue
            if t in self.lexicons:
                if any(w.startswith(r) for w in self.lexicons[t]):
                    return True
            elif self.regex[t].fullmatch(r, partial=True) is not None:
                return True
        return False

    def scan(self, w: bytes, final: bool = False) -> tuple[State, str] | None:
        """Incremental scan-and-shift of ``w``: the parser state and remainder, or None."""
        lexed = self.lex(text(w), final)
        if lexed is None:
            return None
        state: State | None = self.start_state()
        for lexeme in lexed[0]:
            state = self.feed(state, lexeme) if state else None
        return (state, lexed[1]) if state else None

    # -- parse events (grid_core.events) --------------------------------------------

    def events(
        self, w: bytes, symbols: Mapping[str, str]
    ) -> list[tuple[str, str, int, int]] | None:
        """The post-hoc event sequence of a sentence ``w`` (None if ``w`` is not in L):
        ``(kind, name, start, end)`` for every node of lark's parse tree whose
        rule name and every token whose terminal name ``symbols`` maps to a kind,
        in post-order (the order an LR parser completes them)."""
        lexed = self.lex(text(w), final=True)
        if lexed is None:
            return None
        # One parser fed in place: a copied parser's tokens lose their end positions.
        parser: Parser = self.lark.parse_interactive("")
        at = 0
        for lexeme in lexed[0]:
            t = self.pick(self.shiftable(parser), lexeme)
            if t is None:
                return None
            if t not in self.ignored:
                parser.feed_token(_token(t, lexeme, at))
            at += len(lexeme)
        if END not in self.shiftable(parser):
            return None
        tree = parser.feed_eof()
        out: list[tuple[str, str, int, int]] = []

        def visit(node: Any) -> None:
            for child in node.children:
                if isinstance(child, Token):
                    if child.type in symbols:
                        end = int(child.end_pos or 0)
                        out.append((symbols[child.type], child.type, end - len(child), end))
                elif child is not None:
                    visit(child)
            if node.data in symbols and not node.meta.empty:
                meta = node.meta
                out.append((symbols[node.data], str(node.data), meta.start_pos, meta.end_pos))

        visit(tree)
        return out

    # -- the three definitions ---------------------------------------------------

    def is_viable_prefix(self, w: bytes) -> bool:
        """w is in Prefix(L) (DESIGN.md section 3, operational definition)."""
        scanned = self.scan(w)
        return scanned is not None and self.live(*scanned)

    def in_language(self, w: bytes) -> bool:
        """w is in L: it scans, its remainder finalizes, and the parser accepts $END."""
        scanned = self.scan(w, final=True)
        return scanned is not None and END in scanned[0][1]

    def mask(
        self, vocab: Sequence[bytes], specials: Collection[int], eos_id: int, w: bytes
    ) -> set[int]:
        """M(w) by trial parse of every token (DESIGN.md section 4).

        Lexing is left to right, so lex(w.t) = lexemes of w, then lex(r.t) for
        the remainder r of w; parser states are memoized on the lexeme sequence.
        """
        out: set[int] = {eos_id} if self.in_language(w) else set()
        scanned = self.scan(w)
        if scanned is None:
            return out
        base, r0 = scanned
        memo: dict[tuple[str, ...], State | None] = {(): base}

        def state_after(lexemes: tuple[str, ...]) -> State | None:
            if lexemes not in memo:
                prev = state_after(lexemes[:-1])
                memo[lexemes] = self.feed(prev, lexemes[-1]) if prev else None
            return memo[lexemes]

        for i, t in enumerate(vocab):
            if i in specials or not t:
                continue
            lexed = self.lex(r0 + text(t))
            if lexed is None:
                continue
            state = state_after(tuple(lexed[0]))
            if state is not None and self.live(state, lexed[1]):
                out.add(i)
        return out


def _token(t: str, lexeme: str, at: int) -> Token:
    """A lark token of terminal ``t`` spelling ``lexeme`` at byte offset ``at``."""
    return Token(
        t,
        lexeme,
        start_pos=at,
        line=1,
        column=at + 1,
        end_line=1,
        end_column=at + len(lexeme) + 1,
        end_pos=at + len(lexeme),
    )
