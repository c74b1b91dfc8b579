"""The error hierarchy of GRID.

One root, :class:`GridError`, with a subclass per phase. Errors carry structure
(the rule, the word, the role, the step), not just a message, so that callers can
act on them and tests can assert on fields rather than on wording.

Policy: user input that is wrong raises one of these with a message that names
the offending thing; a broken internal invariant is an ``assert``.
"""

from __future__ import annotations


class GridError(Exception):
    """Root of every error GRID raises on purpose."""


class GrammarError(GridError):
    """A grammar (L1) or a projection of it (L2) cannot be built."""


class UndefinedSymbolError(GrammarError):
    """A rule refers to a symbol that no rule or terminal defines."""

    def __init__(self, symbol: str, rule: str) -> None:
        self.symbol = symbol
        self.rule = rule
        super().__init__(f"undefined symbol {symbol!r} used in rule {rule}")


class EmptyLanguageError(GrammarError):
    """A projection leaves no sentence at all: the role can say nothing."""

    def __init__(self, role: str, detail: str = "") -> None:
        self.role = role
        suffix = f": {detail}" if detail else ""
        super().__init__(f"the projected language of role {role!r} is empty{suffix}")


class LALRConflictError(GrammarError):
    """The grammar is not LALR(1): two items clash on one lookahead in one state."""

    def __init__(self, kind: str, state: int, lookahead: str, item1: str, item2: str) -> None:
        self.kind = kind  # "shift/reduce" or "reduce/reduce"
        self.state = state
        self.lookahead = lookahead
        self.item1 = item1
        self.item2 = item2
        super().__init__(
            f"{kind} conflict in LALR(1) state {state} on lookahead {lookahead}:\n"
            f"  {item1}\n  {item2}"
        )


class PatternError(GrammarError):
    """A terminal's pattern uses a construct that has no byte-automaton meaning."""

    def __init__(self, terminal: str, pattern: str, reason: str) -> None:
        self.terminal = terminal
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"terminal {terminal}: pattern {pattern!r}: {reason}")


class LexiconError(GridError):
    """A schema word cannot be admitted by its identifier category."""

    def __init__(self, word: bytes, category: str, reason: str) -> None:
        self.word = word
        self.category = category
        self.reason = reason
        super().__init__(f"lexicon word {word!r} in category {category}: {reason}")


class TokenizerError(GridError):
    """A vocabulary file cannot be read into token spellings."""


#: :class:`MaskError`'s detail for an empty mask (the native session's, word for word).
EMPTY_MASK = (
    "empty mask at a viable prefix: no continuation completes it (a user grammar whose"
    " lexemes run together under maximal munch, see docs/lark.md; otherwise a bug)"
)


class MaskError(GridError):
    """An inconsistency surfaced while computing a mask (never a wrong mask).

    An empty mask at a viable prefix (detail :data:`EMPTY_MASK`), or a reserve
    completion the mask refuses. With grid-sql's dialects either is a bug. A
    user grammar reaches the first where its lexemes run together (``start:
    "if" NAME`` with no blank between them: maximal munch reads ``iffy`` as one
    ``NAME``), so that a prefix the scan accepts has no completion;
    ``compile_grammar`` does not detect that.
    """

    def __init__(self, step: int, detail: str) -> None:
        self.step = step
        self.detail = detail
        super().__init__(f"step {step}: {detail}")


class GuideError(GridError):
    """A guide was driven against its contract (a token outside the mask, after EOS).

    ``token`` is the offending token id (None when the call took no token).
    """

    def __init__(self, step: int, token: int | None, reason: str) -> None:
        self.step = step
        self.token = token
        self.reason = reason
        prefix = f"step {step}" + ("" if token is None else f", token {token}")
        super().__init__(f"{prefix}: {reason}")


class AuditError(GridError):
    """An audit log is malformed or fails verification."""


class ArtifactsError(AuditError):
    """The artifacts a replay source rebuilds from the command line cannot be a log's
    own (the seal's language cannot be built from that database and policy): the
    replay diverges at the artifacts (exit 1), as when their fingerprints differ."""


class PolicyError(GridError):
    """A policy bundle is malformed or names something that does not exist."""


class ExecutionError(GridError):
    """Running a statement on a database was stopped by GRID (a limit was exceeded)."""


class ServingError(GridError):
    """A serving-layer request failed; sticky on the request, never thrown into a batch."""
