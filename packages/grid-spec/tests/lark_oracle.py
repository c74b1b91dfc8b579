"""An independent oracle for L and Prefix(L), built on lark alone.

It never calls grid-spec's lexer: membership is ``lark.parse`` with lark's
contextual lexer, and a prefix is viable when some bounded completion makes it a
sentence lark accepts. The completion search is the one the workspace issue
describes: first finish the trailing partial lexeme (the rest of some sample
lexeme whose beginning ends the prefix, or nothing), then let lark's
interactive parser find the shortest sequence of sample lexemes to ``$END``.

Where lark and the specification disagree, the cause is a lexing-semantics
corner (lark's lexers are not union maximal munch); ``glued_keyword`` names the
one that this grammar exhibits.
"""

from __future__ import annotations

import functools
import itertools

from lark import Lark, Token
from lark.exceptions import LarkError

SAMPLES = {
    "TABLE_NAME": ["employees", "orders", "a"],
    "COLUMN_NAME": ["id", "a"],
    "NUMBER": ["1", "1.5"],
    "STRING": ["'x'", "''"],
    "WS": [" "],
    "COMMENT": ["--c\n"],
}


class LarkOracle:
    def __init__(self, grammar: str) -> None:
        self.lark = Lark(grammar, parser="lalr", lexer="contextual")
        self.samples: dict[str, list[str]] = {}
        for t in self.lark.terminals:
            lit = t.pattern.value if t.pattern.type == "str" else None
            self.samples[t.name] = [lit] if lit is not None else SAMPLES[t.name]

    def in_language(self, w: str) -> bool:
        try:
            self.lark.parse(w)
        except LarkError:
            return False
        return True

    @functools.lru_cache(maxsize=100_000)  # noqa: B019 - one oracle per test module
    def _completion_from(self, stack: tuple[int, ...], text: str) -> str | None:
        """Shortest sample-lexeme completion to $END from lark's state after ``text``."""
        ip = self.lark.parse_interactive(text)
        ip.exhaust_lexer()
        frontier, seen = [(ip, "")], {stack}
        for _ in range(16):
            nxt = []
            for p, tail in frontier:
                accepts = p.accepts()
                if "$END" in accepts:
                    return tail
                for t in sorted(accepts):
                    q = p.copy()
                    q.feed_token(Token(t, self.samples[t][0]))
                    key = tuple(q.parser_state.state_stack)
                    if key not in seen:
                        seen.add(key)
                        nxt.append((q, f"{tail}\n{self.samples[t][0]}"))
            frontier = nxt
        return None

    def completions(self, w: str) -> list[str]:
        """Candidate ways to finish the trailing partial lexeme of ``w``."""
        out = ["", "'", "\n", "0"]  # nothing; close a string, end a comment, finish a number
        for samples in self.samples.values():
            for s in samples:
                out += [s[j:] for j in range(1, len(s)) if w.endswith(s[:j])]
        return out

    def witness(self, w: str, hint: str | None = None) -> str | None:
        """A sentence lark accepts that extends ``w`` (trying ``w + hint`` first), or None."""
        if hint is not None and self.in_language(w + hint):
            return w + hint
        for x in self.completions(w):
            try:
                ip = self.lark.parse_interactive(w + x)
                ip.exhaust_lexer()
            except LarkError:
                continue
            tail = self._completion_from(tuple(ip.parser_state.state_stack), w + x)
            if tail is not None and self.in_language(w + x + tail):
                return w + x + tail
        return None

    def glued_keyword(self, w: str) -> bool:
        """lark's lexer split an identifier-shaped run into a keyword and more.

        Union maximal munch reads ``fromorders`` as one identifier; lark's
        lexers match the keyword ``from`` first. Detected on lark's own tokens
        of the longest lexable prefix: two adjacent tokens, the first a keyword,
        with nothing between them and an identifier-shaped concatenation.
        """
        tokens = []
        try:
            for tok in self.lark.parse_interactive(w).iter_parse():
                tokens.append(tok)
        except LarkError:
            pass
        for a, b in itertools.pairwise(tokens):
            word = a.value + b.value
            if (
                a.end_pos == b.start_pos
                and a.value.isalpha()
                and a.type == a.value.upper()
                and (word.replace("_", "a").isalnum())
            ):
                return True
        return False
