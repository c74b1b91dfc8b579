"""The grammar pipeline: lark grammar -> IR (L1) -> projection (L2).

A :class:`Grammar` is immutable and fingerprinted. Its terminals are numbered
once, when L1 is loaded, in lark's order; a projection keeps every terminal with
its number (projections subset productions, never renumber), so the byte lexer
is one union automaton shared by L1 and all its projections (DESIGN.md
section 3).

Symbols are integers: terminal ``t`` is ``t`` (``0 <= t < T``), ``$END`` is ``T``
and nonterminal ``i`` is ``T + 1 + i``. Rule 0 of the LALR input is the
augmented rule ``$start -> start``.

Names: lark gives generated symbols names that its own grammar syntax cannot
spell (``__ANON_0``, ``__start_star_0``); the IR renames them to ``X__ANON_0``
and ``x__start_star_0`` so that :meth:`Grammar.to_lark` round-trips and the
specification sees the very names (and so the very tie-break order) that the
engine uses.

Projection (``project``) keeps a subset of rules, then eliminates useless
symbols: first non-generating, then unreachable (the order matters; Hopcroft &
Ullman, *Introduction to Automata Theory*, Lemma 4.1/4.2). Reducedness is
load-bearing: it is what makes "the parser can shift t" imply "t extends to a
sentence", so masks never lead to dead ends.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate, chain
from typing import TYPE_CHECKING, NamedTuple

from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError
from lark.lexer import PatternStr
from lark.load_grammar import eval_escaping
from lark.load_grammar import load_grammar as lark_load_grammar
from lark.utils import get_regexp_width

from grid_core.errors import EmptyLanguageError, GrammarError, PatternError, UndefinedSymbolError
from grid_core.fingerprint import Encoded, Prefix
from grid_core.memo import ContentMemo
from grid_core.regex_bytes import compile_pattern

if TYPE_CHECKING:
    from grid_core.lalr import LalrTables


@lru_cache(maxsize=4096)
def _max_width(pattern: str) -> int:
    """lark's maximum width of ``pattern`` (``sre_parse``'s), memoized: a pure
    function of the text that grammars of one family share.

    lark parses the pattern with ``re``'s parser and takes ``getwidth``; so does
    :func:`~grid_core.regex_bytes.compile_pattern`, which keeps the width with
    the NFA it memoizes, so a pattern is parsed once. lark first rewrites
    ``\\p{...}`` categories (when the ``regex`` module is present): such a
    pattern, and one GRID refuses, is measured by lark itself.
    """
    if not _CATEGORY.search(pattern):
        try:
            return compile_pattern("WIDTH", pattern).max_width
        except PatternError:
            pass
    return int(get_regexp_width(pattern)[1])


_CATEGORY = re.compile(r"\\p{[A-Za-z_]+}")
"""lark's ``categ_pattern``: what it rewrites before measuring a pattern."""


@dataclass(frozen=True)
class Terminal:
    """A terminal: its name, its pattern over bytes (lark's regexp, flags inline).

    ``literal`` is true for a lark string literal (``"where"``, ``"where"i``):
    its pattern is then ``re.escape`` of the string, inside lark's flag groups.
    """

    name: str
    pattern: str
    priority: int
    ignored: bool
    literal: bool = False

    @cached_property
    def tie_key(self) -> tuple[int, int, int, int, str]:
        """This terminal's place in the pick order (:attr:`Grammar.pick_order`): lark's.

        Priority first (higher first). At equal priority a string literal comes
        before a pattern (lark's ``UnlessCallback``: a pattern's match that is
        also an equal-priority literal's text is that literal). Then lark's
        lexer order: greater maximum width (``sre_parse``'s, as lark computes
        it), then longer pattern text, then name.
        """
        return (
            -self.priority,
            0 if self.literal else 1,
            -_max_width(self.pattern),
            -len(self.pattern),
            self.name,
        )


class TerminalSet(tuple[Terminal, ...]):
    """A grammar's terminals, with what is derived from them alone computed once:
    a dialect's projections and narrowings share one ``TerminalSet`` (``Grammar``
    makes any tuple of terminals one), so their ids, pick order and hash (the
    fingerprint memos key on it) are not recomputed per projection."""

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[TerminalSet], tuple[tuple[Terminal, ...]]]:
        return TerminalSet, (tuple(self),)  # not the cached values: str hashes are per process

    @cached_property
    def _hash(self) -> int:
        return tuple.__hash__(self)

    @cached_property
    def ids(self) -> dict[str, int]:
        """Terminal name -> id (read only)."""
        return {t.name: i for i, t in enumerate(self)}

    @cached_property
    def ignored(self) -> frozenset[int]:
        return frozenset(i for i, t in enumerate(self) if t.ignored)

    @cached_property
    def pick_order(self) -> tuple[int, ...]:
        return tuple(sorted(range(len(self)), key=lambda i: self[i].tie_key))


@lru_cache(maxsize=32)
def _fingerprint_prefix(start: str, terminals: TerminalSet) -> Prefix:
    """:attr:`Grammar.fingerprint` up to its rules, hashed once per start symbol and
    terminal set: a dialect's projections and narrowings keep its terminals (about
    100 KB of patterns)."""
    encoded = [(t.name, t.pattern, t.priority, t.ignored, t.literal) for t in terminals]
    return Prefix(4, "grid.grammar.v1", start, encoded)


@dataclass(frozen=True)
class Rule:
    """A BNF production ``origin -> expansion`` (symbol names)."""

    origin: str
    expansion: tuple[str, ...]
    alias: str | None = None

    def __str__(self) -> str:
        return f"{self.origin}: {' '.join(self.expansion) or '<empty>'}"

    @cached_property
    def encoded(self) -> Encoded:
        """``(origin, expansion)`` encoded once for grammar fingerprints: a
        projection keeps its parent's ``Rule`` objects, so a new projection's
        fingerprint encodes only the rules it rewrote."""
        return Encoded((self.origin, self.expansion))


def _spellable(name: str) -> str:
    if not name.startswith("__"):
        return name
    return ("X" if name.lstrip("_")[:1].isupper() else "x") + name


_UNDEFINED = re.compile(r"(?:Rule|Terminal) '?([^' ]+)'? used but not defined \(in rule ([^)]+)\)")


class _RuleIndex(NamedTuple):
    """What reduction (:meth:`Grammar.project`) reads of a grammar's rules, by rule index."""

    origins: tuple[str, ...]
    bodies: tuple[tuple[str, ...], ...]
    """The nonterminals of each expansion, in order."""
    lengths: tuple[int, ...]
    """``len(bodies[i])``."""
    uses: dict[str, list[int]]
    """Nonterminal -> the rules whose body has it, once per occurrence."""
    by_origin: dict[str, list[int]]
    leaves: tuple[int, ...]
    """The rules whose body has no nonterminal."""


@dataclass(frozen=True, eq=False)
class Grammar:
    """An L1 grammar or a projection of it. Immutable; compare by ``fingerprint``.

    Invariants (``check_invariants``): terminal names are unique; every symbol of
    every rule is a terminal or has a rule; for a projection, the grammar is
    reduced (every nonterminal is reachable from ``start`` and generating).
    """

    name: str
    terminals: TerminalSet
    """Given as any tuple of terminals; kept as a :class:`TerminalSet`."""
    rules: tuple[Rule, ...]
    start: str

    def __post_init__(self) -> None:
        if type(self.terminals) is not TerminalSet:  # any tuple of terminals is taken
            object.__setattr__(self, "terminals", TerminalSet(self.terminals))

    @property
    def _ids(self) -> dict[str, int]:
        """Terminal name -> id (the terminal set's)."""
        return self.terminals.ids

    # -- symbols -------------------------------------------------------------

    @property
    def n_terminals(self) -> int:
        return len(self.terminals)

    @property
    def end(self) -> int:
        """The symbol id of ``$END``."""
        return len(self.terminals)

    def terminal_id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise GrammarError(f"grammar {self.name!r} has no terminal {name!r}") from None

    @cached_property
    def nonterminals(self) -> tuple[str, ...]:
        """Nonterminal names, ``start`` first, then in order of first definition."""
        names = dict.fromkeys([self.start, *(r.origin for r in self.rules)])
        return tuple(names)

    @property
    def ignored(self) -> frozenset[int]:
        return self.terminals.ignored

    @property
    def pick_order(self) -> tuple[int, ...]:
        """Terminal ids in the order the contextual pick tries them (:attr:`Terminal.tie_key`)."""
        return self.terminals.pick_order

    @cached_property
    def fingerprint(self) -> str:
        # fingerprint(("grid.grammar.v1", start, terminals' fields, [(origin, expansion)...]))
        prefix = _fingerprint_prefix(self.start, self.terminals)
        return prefix.fingerprint(Encoded.sequence([r.encoded for r in self.rules]))

    # -- pipeline ------------------------------------------------------------

    @cached_property
    def _lineage(self) -> tuple[Grammar, tuple[int, ...]]:
        """The grammar this one was projected from, first of its line (its *root*),
        and the indices there of this grammar's rules: a projection of a projection
        is reduced over the root's :attr:`_rule_index`, built once."""
        return self, tuple(range(len(self.rules)))

    @cached_property
    def _rule_index(self) -> _RuleIndex:
        ids = self._ids
        bodies = [tuple(s for s in r.expansion if s not in ids) for r in self.rules]
        uses: dict[str, list[int]] = {}
        by_origin: dict[str, list[int]] = {}
        for i, (r, body) in enumerate(zip(self.rules, bodies, strict=True)):
            by_origin.setdefault(r.origin, []).append(i)
            for s in body:
                uses.setdefault(s, []).append(i)
        return _RuleIndex(
            origins=tuple(r.origin for r in self.rules),
            bodies=tuple(bodies),
            lengths=tuple(map(len, bodies)),
            uses=uses,
            by_origin=by_origin,
            leaves=tuple(i for i, body in enumerate(bodies) if not body),
        )

    def project(self, keep: Callable[[Rule], bool], role: str) -> Grammar:
        """L2: keep the rules ``keep`` selects, then make the grammar reduced.

        Raises :class:`EmptyLanguageError` naming ``role`` when nothing is left.
        """
        root, where = self._lineage
        index = root._rule_index
        # Generating symbols, the least fixpoint, in time linear in the rules: a
        # kept rule's count is its occurrences of symbols not yet known to generate
        # (a rule not kept starts at -1, so it never reaches 0); a rule whose count
        # reaches 0 has only generating symbols.
        pending = [-1] * len(root.rules)
        for i, r in zip(where, self.rules, strict=True):
            if keep(r):
                pending[i] = index.lengths[i]
        origins, uses = index.origins, index.uses
        generating: set[str] = set()
        ready = [i for i in index.leaves if pending[i] == 0]
        while ready:
            origin = origins[ready.pop()]
            if origin in generating:
                continue
            generating.add(origin)
            for i in uses.get(origin, ()):
                pending[i] -= 1
                if pending[i] == 0:
                    ready.append(i)
        if self.start not in generating:
            raise EmptyLanguageError(role, f"start symbol {self.start!r} derives no sentence")
        reachable, todo = {self.start}, [self.start]
        while todo:
            for i in index.by_origin.get(todo.pop(), ()):
                if pending[i] == 0:
                    for s in index.bodies[i]:
                        if s not in reachable:
                            reachable.add(s)
                            todo.append(s)
        useful = tuple(i for i in where if pending[i] == 0 and origins[i] in reachable)
        out = Grammar(role, self.terminals, tuple(root.rules[i] for i in useful), self.start)
        out.__dict__["_lineage"] = (root, useful)
        return out

    def drop_terminals(self, names: Iterable[str], role: str) -> Grammar:
        """Project away every rule that uses one of the terminals ``names``."""
        banned = set(names)
        for n in banned:
            self.terminal_id(n)
        return self.project(lambda r: banned.isdisjoint(r.expansion), role)

    def renamed(self, name: str) -> Grammar:
        """This grammar under ``name`` (the role its errors name), with what was
        already derived from its content (fingerprint, symbol orders) carried over:
        a projection kept for one role serves another at no cost."""
        if name == self.name:
            return self
        other = Grammar(name, self.terminals, self.rules, self.start)
        for key in _CONTENT_DERIVED:
            if key in self.__dict__:
                other.__dict__[key] = self.__dict__[key]
        return other

    def lalr(self) -> LalrTables:
        """LALR(1) tables of this grammar (grid-core's own construction), built once
        per content: grammars with the same start, terminals, rules and rule aliases
        (:attr:`content_key`) share one set of tables (:data:`LALR_TABLES`)."""
        return LALR_TABLES.get(self.content_key, self._build_lalr)

    @cached_property
    def content_key(self) -> tuple[str, tuple[str | None, ...]]:
        """The fingerprint and the rule aliases: all that the LALR(1) construction
        and a rule filter read (the key of :data:`LALR_TABLES` and of the memos of
        what is derived from a grammar's content)."""
        return (self.fingerprint, tuple(r.alias for r in self.rules))

    def _build_lalr(self) -> LalrTables:
        from grid_core.lalr import RuleArrays, build_lalr

        nts = {n: i for i, n in enumerate(self.nonterminals)}
        t = self.n_terminals
        sym = dict(self._ids)  # symbol name -> id: terminals, then nonterminals after $END
        sym.update((n, t + 1 + i) for n, i in nts.items())
        # Rule 0 is $start -> start; the rules' symbols are mapped in one pass (flat).
        bodies = [r.expansion for r in self.rules]
        rules = RuleArrays(
            array("i", [len(nts), *map(nts.__getitem__, [r.origin for r in self.rules])]),
            array("i", [0, *accumulate(map(len, bodies), initial=1)]),
            array("i", [t + 1 + nts[self.start], *map(sym.__getitem__, chain(*bodies))]),
        )
        return build_lalr(
            [x.name for x in self.terminals],
            [*self.nonterminals, "$start"],
            rules,
            ["$start", *(r.alias or r.origin for r in self.rules)],
        )

    def check_invariants(self) -> None:
        assert len(self._ids) == len(self.terminals), "terminal names are not unique"
        defined = set(self.nonterminals)
        for r in self.rules:
            for s in r.expansion:
                assert s in self._ids or s in defined, f"{s} in {r} is undefined"

    def to_lark(self) -> str:
        """This grammar in lark syntax, every terminal kept (for the specification)."""
        lines = [f"// {self.name}: generated by grid_core.grammar (fingerprint {self.fingerprint})"]
        for nt in self.nonterminals:
            alts = [" ".join(r.expansion) for r in self.rules if r.origin == nt]
            lines.append(f"{nt}: " + "\n    | ".join(alts))
        for t in self.terminals:
            body = lark_literal(t.pattern) if t.literal else f"/{lark_regex(t.pattern)}/"
            lines.append(f"{t.name}.{t.priority}: {body}")
        lines += [f"%ignore {t.name}" for t in self.terminals if t.ignored]
        return "\n".join(lines) + "\n"


@lru_cache(maxsize=4096)
def lark_regex(pattern: str) -> str:
    """Spell ``pattern`` inside lark's ``/.../`` so that lark reads back the same language.

    lark evaluates ``\\n \\t \\x.. \\u..`` in a regexp literal as Python escapes and
    keeps other backslash pairs. Raw characters that are not printable ASCII are
    written as ``\\xNN`` (lark turns them back into the raw character); a
    backslash escape whose meaning lark would evaluate is replaced by the raw
    character it denotes, re-escaped when it is a regex metacharacter; ``/`` is
    escaped as ``\\/``; ``"`` is written ``\\x22`` (lark reads ``\\"`` in a
    regexp as ``"``, so an escaped backslash before a quote would lose its
    backslash).
    """
    return _LARK_TOKEN.sub(_lark_token, pattern)


# One token of a pattern: a run of printable ASCII that lark keeps as it is (no
# backslash, "/" or '"'), an escape lark evaluates, another backslash pair, or
# any other single character.
_LARK_TOKEN = re.compile(
    r"([ !#-.0-\[\]-~]+)|\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[nftr])|\\(.)|(.)",
    re.DOTALL,
)


def _lark_token(m: re.Match[str]) -> str:
    run, evaluated, pair, single = m.groups()
    if run is not None:
        return run
    if evaluated is not None:
        raw = {"n": "\n", "f": "\f", "t": "\t", "r": "\r"}.get(evaluated, "")
        raw = raw or chr(int(evaluated[1:], 16))
        return "\\" + raw if raw in ".^$*+?{}[]()|\\-/" else _raw(raw)
    if pair is not None:
        assert pair not in "xuU", f"bad escape \\{pair} in {m.string!r}"
        return "\\" + pair if " " <= pair <= "~" else _raw(pair)  # "\\<tab>" is a tab
    return "\\/" if single == "/" else "\\x22" if single == '"' else _raw(single)


_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]):(.*)\)", re.DOTALL)


def lark_literal(pattern: str) -> str:
    """Spell a string literal's pattern (``re.escape`` inside flag groups) as lark's ``"..."``."""
    flags = ""
    while m := _FLAG_GROUP.fullmatch(pattern):
        flags, pattern = m.group(1) + flags, m.group(2)
    text = re.sub(r"\\(.)", r"\1", pattern, flags=re.DOTALL)
    body = "".join(
        "\\" + c
        if c in '"\\'
        else c
        if " " <= c <= "~"
        else f"\\x{ord(c):02x}"
        if ord(c) < 256
        else f"\\u{ord(c):04x}"
        for c in text
    )
    return f'"{body}"{flags}'


def _raw(c: str) -> str:
    return c if " " <= c <= "~" and c != "/" else f"\\x{ord(c):02x}" if ord(c) < 256 else c


#: Cached properties of :class:`Grammar` that depend on its content (and lineage)
#: only, not its name (what :meth:`Grammar.renamed` carries over).
_CONTENT_DERIVED = (
    "fingerprint",
    "nonterminals",
    "_lineage",
    "content_key",
)

#: LALR(1) tables by grammar content (:meth:`Grammar.lalr`): a role's projection
#: rebuilt for a new schema, or a second role with the same verbs and clauses, finds
#: its tables here.
LALR_TABLES: ContentMemo[LalrTables] = ContentMemo(32)


class GrammarText(str):
    """Lark grammar text written by GRID (:mod:`grid_core.jsonschema`) that also
    carries the IR lark would read it to, so :func:`load_grammar` skips lark's
    own parser (most of a JSON Schema's compile time). A plain ``str`` to every
    other reader.

    Built from BNF: ``terminals`` as ``(name, lark spelling)`` in definition
    order, ``rules`` as ``(name, alternatives, alias)`` with ``start`` first;
    ``patterns``: for some spellings, the pattern lark reads them to, when the
    writer spelled both at once (:meth:`~grid_core.regex_bytes.Written.render`).
    :meth:`ir` does what lark's ``Grammar.compile`` does to such text: patterns
    read as lark reads its literals, an alternative written twice kept once,
    unused rules dropped (``test_jsonschema`` checks the result equal to lark's
    on every MaskBench schema).
    """

    terminals: tuple[tuple[str, str], ...]
    rules: tuple[tuple[str, tuple[tuple[str, ...], ...], str | None], ...]
    patterns: Mapping[str, str]

    def __new__(
        cls,
        text: str,
        terminals: tuple[tuple[str, str], ...],
        rules: tuple[tuple[str, tuple[tuple[str, ...], ...], str | None], ...],
        patterns: Mapping[str, str] | None = None,
    ) -> GrammarText:
        self = super().__new__(cls, text)
        self.terminals, self.rules, self.patterns = terminals, rules, patterns or {}
        return self

    def ir(self, name: str) -> Grammar:
        """The grammar ``load_grammar(str(self), name)`` returns."""
        terminals = tuple(
            _terminal(n, spelling, self.patterns.get(spelling)) for n, spelling in self.terminals
        )
        rules: list[Rule] = []
        for origin, alternatives, alias in self.rules:
            for alt in dict.fromkeys(alternatives):  # lark keeps one of equal alternatives
                rules.append(Rule(origin, alt, alias))
        start = self.rules[0][0]
        while True:  # lark drops rules no other rule uses
            used = {s for r in rules for s in r.expansion if s != r.origin} | {start}
            kept = [r for r in rules if r.origin in used]
            if len(kept) == len(rules):
                break
            rules = kept
        grammar = Grammar(name, TerminalSet(terminals), tuple(rules), start)
        grammar.check_invariants()
        return grammar


def _terminal(name: str, spelling: str, pattern: str | None = None) -> Terminal:
    """A terminal as lark reads ``NAME: spelling`` (a ``"..."`` or ``/.../`` literal,
    no flags); ``pattern``: that reading, where the caller has it."""
    if pattern is None:
        pattern = read_literal(spelling)
    return Terminal(name, pattern, 0, False, spelling[0] == '"')


@lru_cache(maxsize=4096)
def read_literal(spelling: str) -> str:
    """The pattern lark reads a ``"..."`` or ``/.../`` literal (no flags) to."""
    body: str = eval_escaping(spelling[1:-1])  # type: ignore[no-untyped-call]
    if spelling[0] == '"':
        return re.escape(body.replace("\\\\", "\\"))
    return body


_IMPORT = re.compile(r"^[ \t]*%import[ \t]+([\w.]+)", re.M)
_LARK_LIBRARY = frozenset({"common", "lark", "python", "unicode"})
"""The grammars lark ships (``%import common.NUMBER``): the only imports read, so a
grammar cannot make the reader open files of the serving process's directory."""


def load_grammar(text: str, name: str = "L1", start: str = "start") -> Grammar:
    """Read a lark grammar into the IR (L1). Terminal numbering is frozen here.

    Raises :class:`UndefinedSymbolError` for a rule or terminal used but not
    defined (a ``%declare``d terminal included: it has no pattern to lex with),
    :class:`GrammarError` for a start symbol no rule defines or that derives no
    sentence, for a rule priority (an LALR(1) parser has no use for it) and for
    any other problem lark reports.
    """
    if isinstance(text, GrammarText) and start == text.rules[0][0]:
        return text.ir(name)
    for module in _IMPORT.findall(text):
        if module.split(".")[0] not in _LARK_LIBRARY:
            raise GrammarError(
                f"grammar {name!r}: %import {module}: only lark's own grammars "
                f"({', '.join(sorted(_LARK_LIBRARY))}) may be imported; paste the rules here"
            )
    try:
        # lark's grammar front end alone: Lark(text, parser=None) would also build a
        # regex lexer GRID never uses (about half the load of a JSON Schema grammar).
        ebnf, _ = lark_load_grammar(text, "<grammar>", None, False)  # type: ignore[no-untyped-call]
        lark_terminals, lark_rules, ignore_tokens = ebnf.compile([start], "*")
    except LarkGrammarError as e:
        m = _UNDEFINED.search(str(e))
        if m:
            raise UndefinedSymbolError(m.group(1), m.group(2)) from None
        raise GrammarError(f"grammar {name!r}: {e}") from None
    except (LarkError, OSError, AssertionError) as e:  # a bad %import: lark's own
        raise GrammarError(f"grammar {name!r}: {e or type(e).__name__}") from None
    except RecursionError:
        raise GrammarError(f"grammar {name!r}: it nests too deeply to be read") from None
    defined = {t.name for t in lark_terminals}
    for r in lark_rules:
        if r.options.priority is not None:
            raise GrammarError(
                f"grammar {name!r}: rule {r.origin.name} has priority {r.options.priority}; "
                "an LALR(1) parser has no use for rule priorities"
            )
        for s in r.expansion:
            if s.is_term and s.name not in defined:
                raise UndefinedSymbolError(str(s.name), str(r.origin.name))
    ignored = set(ignore_tokens)
    terminals = tuple(
        Terminal(
            _spellable(str(t.name)),
            t.pattern.to_regexp(),
            t.priority,
            t.name in ignored,
            isinstance(t.pattern, PatternStr),
        )
        for t in lark_terminals
    )
    rules = tuple(
        Rule(
            _spellable(str(r.origin.name)),
            tuple(_spellable(str(s.name)) for s in r.expansion),
            None if r.alias is None else str(r.alias),
        )
        for r in lark_rules
    )
    if not any(r.origin == start for r in rules):
        raise GrammarError(f"grammar {name!r}: no rule defines the start symbol {start!r}")
    grammar = Grammar(name, TerminalSet(terminals), rules, start)
    grammar.check_invariants()
    try:
        grammar.project(lambda _: True, name)  # the reduction finds a start that ends nowhere
    except EmptyLanguageError:
        raise GrammarError(
            f"grammar {name!r}: the start symbol {start!r} derives no sentence"
        ) from None
    return grammar
