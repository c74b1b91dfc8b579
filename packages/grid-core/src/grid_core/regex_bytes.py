"""Terminal patterns compiled to Thompson NFAs over bytes.

Purpose: give every terminal t of a dialect its regular language R_t as an
automaton over **bytes** (DESIGN.md section 3), the input of the union DFA in
:mod:`grid_core.dfa`.

Semantics (normative):

- A pattern is Python ``re`` syntax, as lark's ``PatternStr.to_regexp()`` and
  ``PatternRE.to_regexp()`` write it (flags as scoped groups, ``(?i:select)``).
  It is parsed by the standard library's own parser (``re._parser``, formerly
  ``sre_parse``), never by hand, so the syntax is exactly Python's. Two
  shortcuts give the same language without the parse: a plain literal, and a
  pattern a generator wrote as a tree beside its text (:class:`Written`,
  handed over by :func:`remember`: the keys of JSON objects).
- The pattern is read over the latin-1 view of bytes: one character is one byte
  0..255, so R_t is a set of byte strings. A character above U+00FF anywhere in
  the pattern (literally or through an escape) is a :class:`PatternError`.
- ASCII semantics, exactly as ``re.ASCII``: ``(?i)`` folds only ``A-Z``/``a-z``
  (``[^a]`` under ``(?i)`` excludes both ``a`` and ``A``); ``\\d`` = ``[0-9]``,
  ``\\w`` = ``[A-Za-z0-9_]``, ``\\s`` = ``[ \\t\\n\\r\\f\\v]``, their negations
  and their uses inside classes likewise; ``.`` is any byte but ``\\n`` unless
  the ``s`` flag is on. Inline flags: global ``(?i)``, ``(?s)``, ``(?x)`` and
  scoped ``(?i:...)``, ``(?-i:...)``. The ``m`` flag is harmless (anchors are
  rejected); ``a`` and ``u`` are ignored: the semantics are always ASCII.
- Supported: literals, escapes, classes (negated, ranges, categories), ``.``,
  capturing and non-capturing groups (for their language only), alternation,
  greedy and lazy quantifiers ``* + ? {m} {m,} {m,n}`` (a lazy quantifier has
  the same language as the greedy one).
- Rejected with a :class:`PatternError` naming the construct: anchors
  (``^ $ \\A \\Z \\b \\B``), lookarounds, backreferences, conditionals, atomic
  groups and possessive quantifiers (each changes or depends on more than the
  language of its parts); a class Python warns may change meaning (a
  ``FutureWarning``: ``[`` first in a class, as in the POSIX ``[[:alpha:]]``,
  which Python reads as a class of ``[:alph`` followed by ``]``, or a doubled
  ``-``, ``&``, ``~`` or ``|`` inside one) and a POSIX class anywhere in a
  class (``[^[:alpha:]]``, ``[a[:digit:]]``: Python reads them as characters,
  without a warning); a pattern whose language contains the empty string
  (maximal-munch lexing would not progress); a pattern whose language over bytes
  is empty (``[^\\x00-\\xff]``: a terminal that can never match is a grammar
  bug); a pattern whose NFA exceeds :data:`MAX_NFA_STATES` (huge counted
  repetitions). The whole pattern is checked, also parts that a ``{0}`` removes.

Construction (reference: K. Thompson, "Regular expression search algorithm",
CACM 11(6), 1968; the fragment form of Aho, Lam, Sethi, Ullman, *Compilers*,
section 3.7.4): each node of the parse tree becomes a fragment with one entry
and one exit state; a state has ε-edges and at most one byte edge, labelled by a
*byte set*. Counted repetition ``x{m,n}`` is expanded to ``m`` copies of ``x``
followed by ``n-m`` optional copies. The result is then *trimmed*: every state
is reachable from the start and reaches the final state, so a non-empty set of
NFA states always means "live" (some extension is in the language).

Two builders, one NFA: the validated parse tree is first written as a flat
*pattern program* (:class:`_Program`, the flags applied to every byte set),
which the reference builder here (:class:`_Thompson`) and the kernels'
``grid_kernels.thompson`` both read, allocating states in the same order; the
kernels' is used when they are loaded (``tests/test_nfa_native.py`` holds them
to the same arrays and the same refusals).

A **byte set** is a Python int used as a 256-bit set: bit ``b`` is set iff byte
``b`` is in the set.
"""

from __future__ import annotations

import array
import re
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from grid_core.errors import PatternError

if TYPE_CHECKING:  # typeshed describes the parser under its pre-3.11 names
    import sre_constants as _c
    import sre_parse as _parser
else:  # the same modules; importing sre_parse itself warns since 3.11
    from re import _constants as _c
    from re import _parser

__all__ = [
    "ALL_BYTES",
    "MAX_NFA_STATES",
    "ByteNFA",
    "Written",
    "alt",
    "byteset",
    "chars",
    "compile_pattern",
    "literal",
    "parsed",
    "remember",
    "seq",
    "star",
]

#: Upper bound on the states of one pattern's NFA (before trimming).
MAX_NFA_STATES = 100_000

#: The byte set of all 256 bytes.
ALL_BYTES = (1 << 256) - 1


def byteset(data: Iterable[int]) -> int:
    """The byte set holding exactly the given byte values (each in 0..255)."""
    mask = 0
    for b in data:
        assert 0 <= b <= 0xFF, b
        mask |= 1 << b
    return mask


def _span(lo: int, hi: int) -> int:
    """The byte set of ``lo..hi`` inclusive (empty if ``hi < lo``)."""
    return ((1 << (hi - lo + 1)) - 1) << lo if hi >= lo else 0


_NEWLINE = 1 << 0x0A
_DIGIT = _span(0x30, 0x39)
_WORD = _span(0x41, 0x5A) | _span(0x61, 0x7A) | _DIGIT | 1 << 0x5F
_SPACE = _span(0x09, 0x0D) | 1 << 0x20  # \t \n \v \f \r and space, as re.ASCII
_LETTERS_26 = (1 << 26) - 1

_CATEGORIES: dict[int, int] = {
    _c.CATEGORY_DIGIT: _DIGIT,
    _c.CATEGORY_NOT_DIGIT: ALL_BYTES & ~_DIGIT,
    _c.CATEGORY_WORD: _WORD,
    _c.CATEGORY_NOT_WORD: ALL_BYTES & ~_WORD,
    _c.CATEGORY_SPACE: _SPACE,
    _c.CATEGORY_NOT_SPACE: ALL_BYTES & ~_SPACE,
}


def _ascii_fold(mask: int) -> int:
    """Close a byte set under ASCII case: add ``A`` for ``a`` and ``a`` for ``A``."""
    letters = ((mask >> 0x41) | (mask >> 0x61)) & _LETTERS_26
    return mask | letters << 0x41 | letters << 0x61


_ANCHORS: dict[int, str] = {
    _c.AT_BEGINNING: "the anchor ^",
    _c.AT_BEGINNING_LINE: "the anchor ^",
    _c.AT_BEGINNING_STRING: "the anchor \\A",
    _c.AT_END: "the anchor $",
    _c.AT_END_LINE: "the anchor $",
    _c.AT_END_STRING: "the anchor \\Z",
    _c.AT_BOUNDARY: "the anchor \\b",
    _c.AT_NON_BOUNDARY: "the anchor \\B",
}


@dataclass(frozen=True, eq=False)
class ByteNFA:
    """A trimmed Thompson NFA over bytes: one start state, one final state.

    Invariants: every state is reachable from ``start`` and reaches ``final``;
    ``final`` has no outgoing edge; the language is non-empty and does not
    contain the empty string (``final`` is not in the ε-closure of ``start``).

    Stored flat (int32 arrays and bytes: a memo of thousands of NFAs costs the
    garbage collector nothing), the layout of ``grid_kernels.union_dfa``;
    :attr:`eps` and :attr:`edge` are the same NFA as tuples.
    """

    n_states: int
    start: int
    final: int
    eps_len: array.array[int]
    """``eps_len[q]``: how many ε-successors state ``q`` has (they follow in ``eps_targets``)."""
    eps_targets: array.array[int]
    edge_mask: array.array[int]
    """``edge_mask[q]``: the row of ``mask_rows`` of ``q``'s byte edge, or -1."""
    edge_target: array.array[int]
    """``edge_target[q]``: the target of ``q``'s byte edge, or -1."""
    mask_rows: bytes
    """The edges' distinct byte sets, 32 little-endian bytes each, in order of first use."""
    max_width: int
    """The pattern's maximum width as ``re``'s parser computes it (``getwidth``):
    lark orders terminals by it (``grid_core.grammar.Terminal.tie_key``)."""

    @cached_property
    def eps(self) -> tuple[tuple[int, ...], ...]:
        """``eps[q]``: the ε-successors of state ``q``."""
        out, at = [], 0
        for n in self.eps_len:
            out.append(tuple(self.eps_targets[at : at + n]))
            at += n
        return tuple(out)

    @cached_property
    def edge(self) -> tuple[tuple[int, int] | None, ...]:
        """``edge[q]``: ``(byte set, target)`` of the one byte edge of ``q``, or None."""
        rows = self.mask_rows
        masks = [int.from_bytes(rows[i : i + 32], "little") for i in range(0, len(rows), 32)]
        return tuple(
            None if m < 0 else (masks[m], t)
            for m, t in zip(self.edge_mask, self.edge_target, strict=True)
        )

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        """The ε-closure of ``states``."""
        seen = set(states)
        stack = list(seen)
        while stack:
            for r in self.eps[stack.pop()]:
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        return frozenset(seen)

    def _run(self, data: bytes) -> frozenset[int]:
        current = self.closure((self.start,))
        for b in data:
            bit = 1 << b
            moved = []
            for q in current:
                e = self.edge[q]
                if e is not None and e[0] & bit:
                    moved.append(e[1])
            if not moved:
                return frozenset()
            current = self.closure(moved)
        return current

    def fullmatch(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (reference simulation, not fast)."""
        return self.final in self._run(data)

    def is_live(self, data: bytes) -> bool:
        """Whether some extension of ``data`` (possibly empty) is in the language."""
        return bool(self._run(data))


def compile_pattern(terminal: str, pattern: str) -> ByteNFA:
    """Compile one terminal's pattern to a trimmed :class:`ByteNFA`.

    ``terminal`` only names the pattern in errors. Raises :class:`PatternError`
    for every rejection listed in the module header. The NFA is a function of
    the pattern alone and immutable, so compiled patterns are memoized (least
    recently used, :data:`PATTERN_CACHE` of them, as ``re`` memoizes its own):
    grammars of one family, JSON Schema grammars above all, share most of theirs.
    """
    with _compiled_lock:
        nfa = _compiled.get(pattern)
        if nfa is not None:
            _compiled.move_to_end(pattern)
            return nfa
    nfa = _compile(terminal, pattern)
    with _compiled_lock:
        _compiled[pattern] = nfa
        while len(_compiled) > PATTERN_CACHE:
            _compiled.popitem(last=False)
    return nfa


PATTERN_CACHE = 4096
"""How many compiled patterns :func:`compile_pattern` keeps."""
_compiled: OrderedDict[str, ByteNFA] = OrderedDict()
_compiled_lock = threading.Lock()


def _compile(terminal: str, pattern: str) -> ByteNFA:
    for pos, ch in enumerate(pattern):
        if ord(ch) > 0xFF:
            raise PatternError(
                terminal,
                pattern,
                f"character U+{ord(ch):04X} at position {pos} is above U+00FF; "
                "patterns are read over bytes (latin-1), spell it as UTF-8 bytes",
            )
    program = _program(terminal, pattern)
    from grid_core import kernels  # the kernels module sits above this one

    native = kernels.load()
    if native is None:
        return _Thompson(program).build()
    rows = b"".join(mask.to_bytes(32, "little") for mask in program.masks)
    built = native.thompson(program.code, rows, MAX_NFA_STATES)
    if isinstance(built, str):
        raise program.error(_REFUSALS[built])
    start, final, *arrays, mask_rows = built
    eps_len, eps_targets, edge_mask, edge_target = map(_int32s, arrays)
    return ByteNFA(
        len(eps_len),
        start,
        final,
        eps_len,
        eps_targets,
        edge_mask,
        edge_target,
        mask_rows,
        program.max_width,
    )


def _program(terminal: str, pattern: str) -> _Program:
    """The pattern program of ``pattern``: the one its generator wrote with it
    (:func:`remember`), written directly for a plain literal (:func:`_literal`:
    the keys and keywords of a grammar, most of its patterns), else from
    ``re``'s parse tree. A plain literal's is the same program: ``re`` parses it
    to one ``LITERAL`` per character, under no flag that changes a literal. A
    remembered one has the same language, hence the same minimal union DFA."""
    with _compiled_lock:
        written = _written.get(pattern)
    if written is None and (plain := _literal(pattern)) is not None:
        written = literal(plain)
    if written is not None:
        program = _Program(terminal, pattern, 0)
        program.max_width = written.sequence(program)
        return program
    try:
        tree = _parse(pattern)
    except re.error as exc:
        raise PatternError(terminal, pattern, f"not a Python regular expression: {exc}") from None
    except FutureWarning as exc:
        raise PatternError(
            terminal,
            pattern,
            f"{exc}: Python reads this class otherwise than it may mean (a POSIX class such "
            "as [[:alpha:]] is not supported; a '[' first in a class, or a doubled -, &, ~ "
            "or | inside one, is reserved for nested sets): escape the character",
        ) from None
    program = _Program(terminal, pattern, int(tree.getwidth()[1]))
    program.validate(tree)
    program.sequence(tree, tree.state.flags)
    return program


#: A plain literal: characters that are not special in ``re`` and escapes of
#: ASCII punctuation, space and the controls ``\t\n\v\f\r`` (what
#: ``re.escape`` writes), at least one.
_PLAIN = re.compile(r"(?:[^.^$*+?{}\[\]\\|()]|\\[!-/:-@\[-`{-~ \t-\r])+")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class Written:
    """A regex written as the nodes of its pattern program, with its text spelled
    on demand (:meth:`render`), so that a generated pattern (thousands of
    characters: the keys an object does not declare, written as a trie) is
    neither parsed back character by character nor copied at every level of
    its nesting.

    Build one with :func:`chars`, :func:`literal`, :func:`parsed`, :func:`seq`,
    :func:`alt` and :func:`star`; each says how it is spelled. Obligation of the
    writer (held by ``tests/test_regex_bytes.py``): the program's language is
    the text's (:func:`chars` is the one leaf whose two spellings are given
    separately).
    """

    __slots__ = ("arg", "kind")

    def __init__(self, kind: int, arg: Any) -> None:
        self.kind = kind
        self.arg = arg

    @property
    def text(self) -> str:
        """The regex in ``re`` syntax."""
        return self.render(_same)[0]

    def render(self, *leaves: Callable[[str], str]) -> tuple[str, ...]:
        """The text once per function of ``leaves``, with every leaf's spelling
        ``s`` written ``leaf(s)`` (the groups, bars and stars between them as
        they are), in one walk of the tree: how a caller respells a long pattern
        from a few memoized leaves (as lark writes it, as lark reads it back)
        without scanning it whole."""
        out: list[str | tuple[str]] = []  # a leaf's spelling as a 1-tuple
        self._render(out, False)
        return tuple("".join(t if type(t) is str else leaf(t[0]) for t in out) for leaf in leaves)

    def _render(self, out: list[str | tuple[str]], in_seq: bool) -> None:
        """Append the spelling; ``in_seq``: inside a sequence, where a parsed
        leaf (which may be a bare alternation) is grouped."""
        kind, arg = self.kind, self.arg
        if kind == _W_LEAF:
            if in_seq and arg[0] == _W_PARSED:
                out.extend(("(?:", (arg[1],), ")"))
            else:
                out.append((arg[1],))
        elif kind == _W_SEQ:
            for part in arg:
                part._render(out, True)
        elif kind == _W_ALT:
            out.append("(?:")
            for i, part in enumerate(arg):
                if i:
                    out.append("|")
                part._render(out, False)
            out.append(")")
        else:
            atom = arg.kind == _W_ALT or (arg.kind == _W_LEAF and arg.arg[0] == _W_CHARS)
            if not atom:
                out.append("(?:")
            arg._render(out, False)
            out.append("*" if atom else ")*")

    def node(self, program: _Program) -> int:
        """Write this regex as one node of ``program``; its ``re`` maximum
        width (``getwidth``)."""
        kind, arg = self.kind, self.arg
        code = program.code
        if kind == _W_LEAF:
            how, _, value = arg
            if how == _W_CHARS:
                program.byte_edge(value)
                return 1
            if how == _W_LITERAL:
                code.extend((_SEQ, len(value)))
                rows = program.rows
                for ch in value:
                    code.extend((_BYTE, rows.setdefault(1 << ord(ch), len(rows))))
                return len(value)
            program.sequence(value, value.state.flags)
            return int(value.getwidth()[1])
        if kind == _W_SEQ:
            code.extend((_SEQ, len(arg)))
            width = 0
            for part in arg:
                width += part.node(program)
            return min(width, _UNBOUNDED)
        if kind == _W_ALT:
            code.extend((_BRANCH, len(arg)))
            width = 0
            for part in arg:
                width = max(width, part.sequence(program))
            return width
        code.extend((_REPEAT, 0, -1))
        return _UNBOUNDED if arg.sequence(program) else 0

    def sequence(self, program: _Program) -> int:
        """Write this regex as a ``SEQ`` (what a program, an alternative and a
        repeated part are); its maximum width."""
        if self.kind != _W_SEQ and (self.kind != _W_LEAF or self.arg[0] == _W_CHARS):
            program.code.extend((_SEQ, 1))
        return self.node(program)


# Written node kinds, and the kinds of leaf (arg: (how, spelling, value)).
_W_LEAF, _W_SEQ, _W_ALT, _W_STAR = range(4)
_W_CHARS, _W_LITERAL, _W_PARSED = range(3)


def _same(text: str) -> str:
    return text


_UNBOUNDED = int(_parser.parse("a*").getwidth()[1])
"""``re``'s maximum width of an unbounded pattern (the version's ``MAXWIDTH``)."""


def chars(mask: int, text: str) -> Written:
    """One byte of the set ``mask``, spelled ``text`` (a class or an escape)."""
    return Written(_W_LEAF, (_W_CHARS, text, mask))


def literal(chars_: str) -> Written:
    """The latin-1 characters ``chars_`` in turn, spelled ``re.escape(chars_)``."""
    return Written(_W_LEAF, (_W_LITERAL, re.escape(chars_), chars_))


def parsed(text: str) -> Written:
    """``text`` as ``re`` parses it (once: for the constant pieces of a generator),
    spelled ``text``, or ``(?:text)`` inside a sequence."""
    return Written(_W_LEAF, (_W_PARSED, text, _parsed(text)))


#: Text in which ``re``'s parser may warn of a class whose meaning may change.
_MAY_WARN = re.compile(r"\[\[|--|&&|~~|\|\|")
_warn_lock = threading.Lock()
#: A POSIX bracket expression's class, collating symbol or equivalence class.
_POSIX = re.compile(r"\[([:.=])[^\]]*?\1\]")


#: A group's opening with inline flags: ``(?x:``, ``(?-x:``, ``(?ax-s:``.
_FLAGS_GROUP = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]*))?:")


def _posix_in_class(pattern: str) -> re.Match[str] | None:
    """A POSIX ``[:name:]``, ``[.x.]`` or ``[=x=]`` inside a class of ``pattern``
    (Python reads it as characters: ``[^[:alpha:]]`` is a class of ``[:alph`` and
    ``^`` negated, then a ``]``, and Python warns only where the ``[`` comes first).
    Comments are skipped as Python skips them: ``(?#...)``, and in verbose mode
    (``(?x)`` at the start, or a ``(?x:...)`` group) ``#`` to the end of the line."""
    if not _POSIX.search(pattern):
        return None
    verbose = [re.match(r"\(\?[aiLmsu]*x[aiLmsux]*\)", pattern) is not None]  # per open group
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[" and (m := _POSIX.match(pattern, i)):
                return m
            i += 1
        elif c == "[":
            in_class = True
            i += 1 + (pattern.startswith("^", i + 1))
            if pattern.startswith("]", i):  # a ']' first in a class is itself
                i += 1
        elif pattern.startswith("(?#", i):
            end = pattern.find(")", i)
            i = n if end < 0 else end + 1
        elif c == "#" and verbose[-1]:
            end = pattern.find("\n", i)
            i = n if end < 0 else end + 1
        else:
            if c == "(":
                flags = _FLAGS_GROUP.match(pattern, i)
                on, off = (flags.group(1), flags.group(2) or "") if flags else ("", "")
                verbose.append(("x" in on or verbose[-1]) and "x" not in off)
            elif c == ")" and len(verbose) > 1:
                verbose.pop()
            i += 1
    return None


def _parse(pattern: str) -> Any:
    """``re``'s parse of ``pattern``; a class its parser warns about (a
    ``FutureWarning`` "Possible nested set" or "Possible set ...") is raised as
    that warning instead, and so is a POSIX class anywhere in a class, which
    Python reads as characters without a warning (:func:`_posix_in_class`).

    Warnings are recorded (``warnings.catch_warnings`` is process-wide state)
    only for text that may hold such a class, under a lock, and only the
    parser's own messages count: another thread's warning in that moment is
    not raised (it is recorded and not shown, the price of the check).
    """
    if (posix := _posix_in_class(pattern)) is not None:
        raise FutureWarning(f"Possible POSIX class {posix.group()} at position {posix.start()}")
    if not _MAY_WARN.search(pattern):
        return _parser.parse(pattern)
    with _warn_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        tree = _parser.parse(pattern)
    for w in caught:
        if issubclass(w.category, FutureWarning) and str(w.message).startswith("Possible "):
            raise FutureWarning(str(w.message))
    return tree


@lru_cache(maxsize=64)
def _parsed(text: str) -> Any:
    tree = _parse(text)
    _Program("", text, 0).validate(tree)
    return tree


def seq(*parts: Written) -> Written:
    """The parts in turn, spelled one after the other."""
    return Written(_W_SEQ, parts)


def alt(*parts: Written) -> Written:
    """One of the parts, spelled ``(?:a|b|...)``; no parts is the empty string
    (spelled ``""``), which is also how :func:`seq` of no parts is spelled."""
    if not parts:
        return seq()
    return Written(_W_ALT, parts)


def star(part: Written) -> Written:
    """``part`` any number of times, spelled ``part*`` where ``part`` is one atom
    (a :func:`chars` or an :func:`alt`), else ``(?:part)*``."""
    return Written(_W_STAR, part)


def remember(pattern: str, written: Written) -> None:
    """Compile ``pattern`` from ``written``'s program instead of parsing it.

    Precondition: ``pattern`` has ``written``'s language (it is ``written.text``,
    or what lark reads back from it). Kept like compiled patterns (the
    :data:`PATTERN_CACHE` most recent)."""
    with _compiled_lock:
        if pattern in _compiled:
            return
        _written[pattern] = written
        _written.move_to_end(pattern)
        while len(_written) > PATTERN_CACHE:
            _written.popitem(last=False)


_written: OrderedDict[str, Written] = OrderedDict()


def _literal(pattern: str) -> str | None:
    """The characters ``pattern`` matches when it is a plain literal, else None."""
    if _PLAIN.fullmatch(pattern) is None:
        return None
    return _ESCAPE.sub(r"\1", pattern)


def _int32s(data: bytes) -> array.array[int]:
    out = array.array("i")
    out.frombytes(data)
    if sys.byteorder != "little":
        out.byteswap()
    return out


_REFUSALS = {
    "states": f"the pattern needs more than {MAX_NFA_STATES} NFA states",
    "empty string": "the pattern matches the empty string",
    "empty language": "the pattern matches no byte string (its language is empty)",
}

# Node tags of the pattern program (grid-kernels' nfa.rs).
_BYTE, _SEQ, _BRANCH, _REPEAT = 0, 1, 2, 3


class _Program:
    """A validated parse tree as a *pattern program*: the flat int32 form that
    both NFA builders read (:class:`_Thompson` here, ``grid_kernels.thompson``).

    Nodes: ``BYTE m`` (byte set ``masks[m]``), ``SEQ n node*``, ``BRANCH k seq*``,
    ``REPEAT low high seq`` (``high`` -1: unbounded). The flags are applied here,
    so every byte set is final. A count past :data:`MAX_NFA_STATES` is written
    as ``MAX_NFA_STATES + 1``: each copy takes at least one state, so the
    refusal is the same.
    """

    def __init__(self, terminal: str, pattern: str, max_width: int) -> None:
        self.terminal = terminal
        self.pattern = pattern
        self.max_width = max_width
        self.code = array.array("i")
        self.rows: dict[int, int] = {}  # byte set -> its index in masks

    @property
    def masks(self) -> list[int]:
        return list(self.rows)

    def error(self, reason: str) -> PatternError:
        return PatternError(self.terminal, self.pattern, reason)

    # -- validation: the constructs without a byte-automaton meaning ------------

    def validate(self, sub: Any) -> None:
        """Reject every unsupported construct in the parse tree ``sub``."""
        for op, av in sub:
            if op is _c.AT:
                raise self.error(f"{_ANCHORS.get(av, 'an anchor')} is not supported")
            if op is _c.ASSERT or op is _c.ASSERT_NOT:
                kind = "lookahead" if av[0] == 1 else "lookbehind"
                sign = "negative " if op is _c.ASSERT_NOT else ""
                raise self.error(f"a {sign}{kind} assertion is not supported")
            if op is _c.GROUPREF:
                raise self.error("a backreference is not supported")
            if op is _c.GROUPREF_EXISTS:
                raise self.error("a conditional group (?(id)yes|no) is not supported")
            if op is _c.ATOMIC_GROUP:
                raise self.error("an atomic group (?>...) is not supported")
            if op is _c.POSSESSIVE_REPEAT:
                raise self.error("a possessive quantifier (*+, ++, ?+, {m,n}+) is not supported")
            if op is _c.LITERAL or op is _c.NOT_LITERAL:
                self._check_char(av)
            elif op is _c.IN:
                for item_op, item_av in av:
                    if item_op is _c.LITERAL:
                        self._check_char(item_av)
                    elif item_op is _c.RANGE:
                        self._check_char(item_av[1])
            elif op is _c.BRANCH:
                for alternative in av[1]:
                    self.validate(alternative)
            elif op is _c.SUBPATTERN:
                self.validate(av[3])
            elif op is _c.MAX_REPEAT or op is _c.MIN_REPEAT:
                self.validate(av[2])
            elif op is not _c.ANY:
                raise self.error(f"the construct {op} is not supported")

    def _check_char(self, code: int) -> None:
        if code > 0xFF:
            raise self.error(
                f"character U+{code:04X} is above U+00FF; patterns are read over bytes (latin-1)"
            )

    # -- the program -----------------------------------------------------------

    def sequence(self, sub: Any, flags: int) -> None:
        """Write the parsed sequence ``sub`` under ``flags`` as a ``SEQ``."""
        self.code.extend((_SEQ, len(sub)))
        for op, av in sub:
            self.node(op, av, flags)

    def node(self, op: Any, av: Any, flags: int) -> None:
        """Write one parse-tree node (validated beforehand)."""
        fold = bool(flags & _c.SRE_FLAG_IGNORECASE)
        if op is _c.LITERAL:
            self.byte_edge(_ascii_fold(1 << av) if fold else 1 << av)
        elif op is _c.NOT_LITERAL:
            self.byte_edge(ALL_BYTES & ~(_ascii_fold(1 << av) if fold else 1 << av))
        elif op is _c.ANY:
            self.byte_edge(ALL_BYTES if flags & _c.SRE_FLAG_DOTALL else ALL_BYTES & ~_NEWLINE)
        elif op is _c.IN:
            self.byte_edge(self.charset(av, fold))
        elif op is _c.BRANCH:
            self.code.extend((_BRANCH, len(av[1])))
            for alternative in av[1]:
                self.sequence(alternative, flags)
        elif op is _c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            self.sequence(sub, (flags | add_flags) & ~del_flags)
        else:
            assert op is _c.MAX_REPEAT or op is _c.MIN_REPEAT, op
            low, high, sub = av
            cap = MAX_NFA_STATES + 1
            self.code.extend(
                (_REPEAT, min(low, cap), -1 if high == _c.MAXREPEAT else min(high, cap))
            )
            self.sequence(sub, flags)

    def byte_edge(self, mask: int) -> None:
        self.code.extend((_BYTE, self.rows.setdefault(mask, len(self.rows))))

    def charset(self, items: Any, fold: bool) -> int:
        """The byte set of a class ``[...]`` (sre's rule: fold, then negate)."""
        negate = False
        mask = 0
        for op, av in items:
            if op is _c.NEGATE:
                negate = True
            elif op is _c.LITERAL:
                mask |= 1 << av
            elif op is _c.RANGE:
                mask |= _span(av[0], av[1])
            elif op is _c.CATEGORY:
                if av not in _CATEGORIES:
                    raise self.error(f"the class category {av} is not supported")
                mask |= _CATEGORIES[av]
            else:
                raise self.error(f"the class item {op} is not supported")
        if fold:
            mask = _ascii_fold(mask)
        return ALL_BYTES & ~mask if negate else mask


class _Thompson:
    """The reference builder: a pattern program's NFA, fragment by fragment (Thompson).

    ``grid_kernels.thompson`` (``nfa.rs``) builds the same NFA, state for state;
    its module header states the construction.
    """

    def __init__(self, program: _Program) -> None:
        self.program = program
        self.code = program.code
        self.masks = program.masks
        self.eps: list[list[int]] = []
        self.edge: list[tuple[int, int] | None] = []

    def build(self) -> ByteNFA:
        start, exit_, end = self.sequence(0)
        assert end == len(self.code), "a program is one sequence"
        final = self.state()  # a fresh final state, so that it has no outgoing edge
        self.eps[exit_].append(final)
        return self.finish(start, final)

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise self.program.error(_REFUSALS["states"])
        self.eps.append([])
        self.edge.append(None)
        return len(self.eps) - 1

    def skip(self, pos: int) -> int:
        """The position after the node at ``pos``."""
        op = self.code[pos]
        if op == _BYTE:
            return pos + 2
        if op == _REPEAT:
            return self.skip(pos + 3)
        end = pos + 2
        for _ in range(self.code[pos + 1]):
            end = self.skip(end)
        return end

    def sequence(self, pos: int) -> tuple[int, int, int]:
        """Fragment ``(entry, exit)`` of the ``SEQ`` at ``pos``, and the position after it."""
        assert self.code[pos] == _SEQ
        entry = exit_ = self.state()
        at = pos + 2
        for _ in range(self.code[pos + 1]):
            first, last, at = self.node(at)
            self.eps[exit_].append(first)
            exit_ = last
        return entry, exit_, at

    def node(self, pos: int) -> tuple[int, int, int]:
        op = self.code[pos]
        if op == _BYTE:
            entry, exit_ = self.state(), self.state()
            self.edge[entry] = (self.masks[self.code[pos + 1]], exit_)
            return entry, exit_, pos + 2
        if op == _SEQ:
            return self.sequence(pos)
        if op == _BRANCH:
            entry, exit_ = self.state(), self.state()
            at = pos + 2
            for _ in range(self.code[pos + 1]):
                first, last, at = self.sequence(at)
                self.eps[entry].append(first)
                self.eps[last].append(exit_)
            return entry, exit_, at
        assert op == _REPEAT, op
        return self.repeat(pos)

    def repeat(self, pos: int) -> tuple[int, int, int]:
        """``sub{low,high}`` as copies of ``sub``'s fragment (``high`` -1: unbounded)."""
        low, high, sub = self.code[pos + 1], self.code[pos + 2], pos + 3
        end = self.skip(sub)
        entry = exit_ = self.state()
        for _ in range(low):
            first, last, _ = self.sequence(sub)
            self.eps[exit_].append(first)
            exit_ = last
        if high == -1:  # x*: hub --ε--> x --ε--> hub, leave from the hub
            hub = self.state()
            first, last, _ = self.sequence(sub)
            self.eps[exit_].append(hub)
            self.eps[hub].append(first)
            self.eps[last].append(hub)
            return entry, hub, end
        done = self.state()  # (x(x(x)?)?)? flattened: each optional copy may skip to done
        for _ in range(high - low):
            first, last, _ = self.sequence(sub)
            self.eps[exit_] += (done, first)
            exit_ = last
        self.eps[exit_].append(done)
        return entry, done, end

    def finish(self, start: int, final: int) -> ByteNFA:
        """Check emptiness, trim to the useful states and renumber them in order."""
        n = len(self.eps)
        succ: list[list[int]] = [list(self.eps[q]) for q in range(n)]
        for q, e in enumerate(self.edge):
            if e is not None and e[0]:
                succ[q].append(e[1])
        pred: list[list[int]] = [[] for _ in range(n)]
        for q in range(n):
            for r in succ[q]:
                pred[r].append(q)
        if final in _reach(start, self.eps):
            raise self.program.error(_REFUSALS["empty string"])
        reachable = _reach(start, succ)
        if final not in reachable:
            raise self.program.error(_REFUSALS["empty language"])
        useful = _reach(final, pred) & reachable
        order = sorted(useful)
        new = {q: i for i, q in enumerate(order)}
        eps_len, eps_targets = array.array("i"), array.array("i")
        edge_mask, edge_target = array.array("i"), array.array("i")
        rows: dict[int, int] = {}
        for q in order:
            kept = [new[r] for r in self.eps[q] if r in new]
            eps_len.append(len(kept))
            eps_targets.extend(kept)
            e = self.edge[q]
            if e is not None and e[0] != 0 and e[1] in new:
                edge_mask.append(rows.setdefault(e[0], len(rows)))
                edge_target.append(new[e[1]])
            else:
                edge_mask.append(-1)
                edge_target.append(-1)
        mask_rows = b"".join(mask.to_bytes(32, "little") for mask in rows)
        return ByteNFA(
            len(order),
            new[start],
            new[final],
            eps_len,
            eps_targets,
            edge_mask,
            edge_target,
            mask_rows,
            self.program.max_width,
        )


def _reach(origin: int, succ: Sequence[Sequence[int]]) -> set[int]:
    seen = {origin}
    stack = [origin]
    while stack:
        for r in succ[stack.pop()]:
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return seen
