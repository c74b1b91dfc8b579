"""GRID's grammar IR in the peers' formats: llguidance's Lark dialect and xgrammar's EBNF.

Purpose. ``bench/peers.py`` runs GRID, llguidance and xgrammar on one grammar; the
peers cannot read GRID's grammar, so it is translated here from the IR
(:class:`grid_core.grammar.Grammar`: BNF rules over numbered terminals, each a
Python regex over bytes), never rewritten by hand. ``write_grammars`` puts the
translations under ``bench/grammars/`` so that a reader can see exactly what each
peer was given.

How. Rules are copied one for one (an IR rule is one BNF alternative; a rule
with an empty alternative becomes ``( ... )?``). Terminals are parsed with
Python's own regex parser (``re._parser``) into a small regex tree and printed in
each peer's syntax: a Rust ``regex`` literal ``/.../`` for llguidance, an EBNF
rule body for xgrammar. A lexicon category (``TABLE_NAME`` ...) with words is
the alternation of its words, spelled literally.

Policy decisions (every translation is a superset of GRID's language, so the
peers accept whatever GRID accepts; none is narrower):

- **Bytes to characters.** GRID's patterns denote bytes (latin-1 view); the
  peers read characters of UTF-8 text. The one non-ASCII construct of the SQL
  dialects, the alternation of every well-formed UTF-8 multibyte sequence
  (:data:`UTF8_MULTIBYTE`, the Unicode Standard's Table 3-7, as grid-sql spells
  it in ``_UTF8_MB``), becomes the class of every non-ASCII character: the same
  byte language. It is recognized in the parsed pattern, as the options of an
  alternation; any other byte above 0x7F is refused (:class:`TranslationError`).
- **Case folding.** ``(?i:...)`` becomes ASCII classes (``[sS]``), since both
  SQLite and PostgreSQL fold ASCII only (Rust's ``(?i)`` would also admit ``ſ``
  for ``s``).
- **Priorities** are dropped: llguidance does not support terminal priorities
  (its Earley parser with a dynamic lexer keeps every reading of an ambiguous
  lexeme, e.g. ``from`` as keyword and as identifier), and xgrammar has no lexer.
- **Unused terminals** are dropped (SQLite's ``MALFORMED_NUMBER``: in GRID it
  makes ``1abc`` one dead lexeme by maximal munch; without it the peers may read
  ``1`` ``abc``).
- **llguidance ignores between lexemes only**: the ignored terminals before the
  first lexeme and after the last are spelled out (``start: SKIPPED? grid_start
  SKIPPED?``).
- **xgrammar has no lexer**: every terminal is a rule ``NAME ::= sp body``,
  where ``sp`` is any run of the ignored terminals, and ``root ::= start sp``.
  Word boundaries are not enforced (``selectx`` also reads as ``select x``).
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grid_core.grammar import Grammar, load_grammar
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection
from grid_sql.schema import example_schema

GRAMMARS = Path(__file__).resolve().parent / "grammars"
UTF8_MULTIBYTE = (
    "[\\xc2-\\xdf][\\x80-\\xbf]|\\xe0[\\xa0-\\xbf][\\x80-\\xbf]|[\\xe1-\\xec\\xee\\xef][\\x80-\\xbf]{2}"
    "|\\xed[\\x80-\\x9f][\\x80-\\xbf]|\\xf0[\\x90-\\xbf][\\x80-\\xbf]{2}|[\\xf1-\\xf3][\\x80-\\xbf]{3}"
    "|\\xf4[\\x80-\\x8f][\\x80-\\xbf]{2}"
)
"""Every well-formed UTF-8 sequence of two to four bytes, as a regex over bytes
(latin-1 characters), alternative for alternative as grid-sql's ``_UTF8_MB``."""
_MULTIBYTE_OPTIONS = frozenset(repr(o) for o in sre_parse.parse(UTF8_MULTIBYTE)[0][1][1])


class TranslationError(ValueError):
    """A terminal pattern uses a construct that has no equivalent in the peers' syntax."""

    def __init__(self, terminal: str, reason: str) -> None:
        self.terminal = terminal
        super().__init__(f"terminal {terminal}: {reason}")


# ------------------------------------------------------------------ regex tree


@dataclass(frozen=True)
class Chars:
    """One character from ``ranges`` (inclusive code point pairs), or, when
    ``negated``, one character outside them (any code point, multibyte included)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    item: Node
    low: int
    high: int | None  # None: unbounded


Node = Chars | Seq | Alt | Repeat
NON_ASCII = Chars(((0, 0x7F),), negated=True)


def parse_pattern(terminal: str, pattern: str) -> Node:
    """The regex tree of one IR terminal pattern (see the module header)."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as e:
        raise TranslationError(terminal, f"not a regex ({e})") from None
    return _tree(terminal, list(parsed), icase=False)


def _fold(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """ASCII case folding of a set of ranges."""
    out = list(ranges)
    for lo, hi in ranges:
        for a, z, shift in ((97, 122, -32), (65, 90, 32)):
            x, y = max(lo, a), min(hi, z)
            if x <= y:
                out.append((x + shift, y + shift))
    return tuple(sorted(set(out)))


def _tree(terminal: str, items: list[Any], icase: bool) -> Node:
    nodes = [_node(terminal, op, av, icase) for op, av in items]
    return nodes[0] if len(nodes) == 1 else Seq(tuple(nodes))


def _node(terminal: str, op: Any, av: Any, icase: bool) -> Node:
    if op in (sre.LITERAL, sre.NOT_LITERAL):
        return _chars(terminal, ((av, av),), op is sre.NOT_LITERAL, icase)
    if op is sre.IN:
        negated = bool(av) and av[0][0] is sre.NEGATE
        ranges: list[tuple[int, int]] = []
        for kind, value in av[1:] if negated else av:
            if kind is sre.LITERAL:
                ranges.append((value, value))
            elif kind is sre.RANGE:
                ranges.append(value)
            else:
                raise TranslationError(terminal, f"class member {kind} is not supported")
        return _chars(terminal, tuple(ranges), negated, icase)
    if op is sre.BRANCH:
        options = av[1]
        reprs = [repr(o) for o in options]
        if _MULTIBYTE_OPTIONS.issubset(reprs):
            first = min(i for i, r in enumerate(reprs) if r in _MULTIBYTE_OPTIONS)
            keep = [
                _tree(terminal, list(o), icase)
                for o, r in zip(options, reprs, strict=True)
                if r not in _MULTIBYTE_OPTIONS
            ]
            nodes = [*keep[:first], NON_ASCII, *keep[first:]]
            return nodes[0] if len(nodes) == 1 else Alt(tuple(nodes))
        return Alt(tuple(_tree(terminal, list(o), icase) for o in options))
    if op is sre.SUBPATTERN:
        _, add, remove, body = av
        if (add | remove) & ~(re.IGNORECASE | re.UNICODE):
            raise TranslationError(terminal, "only the i flag is supported")
        icase = (icase or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE
        return _tree(terminal, list(body), icase)
    if op is sre.MAX_REPEAT:
        low, high, body = av
        return Repeat(
            _tree(terminal, list(body), icase), low, None if high is sre.MAXREPEAT else high
        )
    raise TranslationError(terminal, f"{op} is not supported (lazy repeat, anchor, any-char ...)")


def _chars(terminal: str, ranges: tuple[tuple[int, int], ...], negated: bool, icase: bool) -> Chars:
    if any(hi > 0x7F for _, hi in ranges):
        raise TranslationError(terminal, "a byte above 0x7F outside a UTF-8 multibyte sequence")
    if negated:
        raise TranslationError(terminal, "a negated class (one byte, not one character)")
    return Chars(_fold(ranges) if icase else ranges, negated)


def literal(word: str) -> Node:
    """The regex tree of a literal word (a lexicon word)."""
    return Seq(tuple(Chars(((ord(c), ord(c)),)) for c in word))


# ------------------------------------------------------------------ printers


def _is_char(node: Node) -> bool:
    return isinstance(node, Chars) and not node.negated and node.ranges[0][0] == node.ranges[-1][1]


_RUST_META = set("\\.+*?()|[]{}^$#&-~")
_RUST_CLASS_META = set("\\[]^-&~")


def _rust_char(c: int, meta: set[str]) -> str:
    ch = chr(c)
    if ch == "/" or not " " <= ch <= "~":
        return f"\\x{{{c:02X}}}"
    return "\\" + ch if ch in meta else ch


def rust_regex(node: Node) -> str:
    """``node`` in Rust ``regex`` syntax (llguidance), ``/`` never raw."""
    if isinstance(node, Chars):
        if _is_char(node):
            return _rust_char(node.ranges[0][0], _RUST_META)
        body = "".join(
            _rust_char(lo, _RUST_CLASS_META)
            + ("" if lo == hi else "-" + _rust_char(hi, _RUST_CLASS_META))
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Seq):
        return "".join(
            f"(?:{rust_regex(n)})" if isinstance(n, Alt) else rust_regex(n) for n in node.items
        )
    if isinstance(node, Alt):
        return "|".join(rust_regex(n) for n in node.options)
    inner = rust_regex(node.item)
    if not (isinstance(node.item, Chars)):
        inner = f"(?:{inner})"
    return inner + _quantifier(node)


def _quantifier(node: Repeat) -> str:
    low, high = node.low, node.high
    if (low, high) == (0, None):
        return "*"
    if (low, high) == (1, None):
        return "+"
    if (low, high) == (0, 1):
        return "?"
    if high is None:
        return f"{{{low},}}"
    return f"{{{low}}}" if low == high else f"{{{low},{high}}}"


def _ebnf_char(c: int, meta: str) -> str:
    ch = chr(c)
    if " " <= ch <= "~":
        return "\\" + ch if ch in meta else ch
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"


def ebnf(node: Node) -> str:
    """``node`` as an xgrammar EBNF expression."""
    if isinstance(node, Chars):
        if _is_char(node):
            return '"' + _ebnf_char(node.ranges[0][0], '"\\') + '"'
        body = "".join(
            _ebnf_char(lo, "\\]^-") + ("" if lo == hi else "-" + _ebnf_char(hi, "\\]^-"))
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Seq):
        parts: list[str] = []
        run: list[int] = []
        for n in (*node.items, None):
            if n is not None and _is_char(n):
                assert isinstance(n, Chars)
                run.append(n.ranges[0][0])
                continue
            if run:
                parts.append('"' + "".join(_ebnf_char(c, '"\\') for c in run) + '"')
                run = []
            if n is not None:
                parts.append(f"({ebnf(n)})" if isinstance(n, Alt) else ebnf(n))
        return " ".join(parts)
    if isinstance(node, Alt):
        return " | ".join(ebnf(n) for n in node.options)
    inner = ebnf(node.item)
    if not (isinstance(node.item, Chars)):
        inner = f"({inner})"
    return inner + _quantifier(node)


# ------------------------------------------------------------------ grammars


@dataclass(frozen=True)
class Translation:
    """One grammar in both peers' formats, with the terminal trees they were printed from."""

    lark: str
    ebnf: str
    terminals: Mapping[str, Node]
    ignored: tuple[str, ...]


def translate(
    grammar: Grammar, words: Mapping[str, Collection[bytes]] | None = None, title: str = ""
) -> Translation:
    """Translate ``grammar`` (with ``words`` for its lexicon categories, if any).

    Raises :class:`TranslationError` for a pattern the peers cannot express, and
    for a category that a rule uses but whose word set is empty.
    """
    words = {c: ws for c, ws in (words or {}).items() if ws is not None}
    names = {t.name for t in grammar.terminals}
    used = {s for r in grammar.rules for s in r.expansion if s in names}
    ignored = tuple(t.name for t in grammar.terminals if t.ignored)
    trees: dict[str, Node] = {}
    for t in grammar.terminals:
        if t.name not in used and not t.ignored:
            continue
        if t.name in words:
            ws = sorted(w.decode("utf-8") for w in words[t.name])
            if not ws:
                raise TranslationError(t.name, "a rule uses this category but it has no word")
            trees[t.name] = Alt(tuple(literal(w) for w in ws))
        else:
            trees[t.name] = parse_pattern(t.name, t.pattern)
    header = f"{title or grammar.name}: generated by bench/peer_grammars.py from GRID's grammar IR"
    header += f" (fingerprint {grammar.fingerprint})"
    alternatives = {
        nt: [r.expansion for r in grammar.rules if r.origin == nt] for nt in grammar.nonterminals
    }
    lark = [f"// {header}", "// llguidance Lark dialect; see the module header for what differs."]
    # llguidance applies %ignore between lexemes only: the ignored text before the
    # first lexeme and after the last is spelled out (SKIPPED).
    body = grammar.start
    if ignored:
        body = "grid_start"
        assert body not in alternatives and "SKIPPED" not in names, "name clash"
        lark.append(f"start: SKIPPED? {body} SKIPPED?")
    for nt, alts in alternatives.items():
        head = body if nt == grammar.start else nt
        renamed = [tuple(body if s == grammar.start else s for s in a) for a in alts]
        lark.append(f"{head}: {_alternatives(renamed)}")
    for name, tree in trees.items():
        lark.append(f"{name}: /{rust_regex(tree)}/")
    if ignored:
        lark.append(f"SKIPPED: ({' | '.join(ignored)})+")
    lark += [f"%ignore {name}" for name in ignored]
    sp = " | ".join(ignored)
    out = [f"# {header}", "# xgrammar EBNF; see the module header for what differs."]
    out.append(f"root ::= {grammar.start} sp")
    out.append(f"sp ::= ({sp})*" if ignored else 'sp ::= ""')
    for nt, alts in alternatives.items():
        out.append(f"{nt} ::= {_alternatives(alts)}")
    for name, tree in trees.items():
        if name in ignored:
            # sp repeats its members already: x+ inside (...)* would be ambiguous.
            single = tree.item if isinstance(tree, Repeat) and tree.low == 1 else tree
            out.append(f"{name} ::= {ebnf(single)}")
        else:
            out.append(f"{name} ::= sp ({ebnf(tree)})")
    return Translation("\n".join(lark) + "\n", "\n".join(out) + "\n", trees, ignored)


Family = tuple[tuple[str, bool], ...]
"""A factored alternative: symbols, each with whether it is optional."""


def factor(alts: Sequence[tuple[str, ...]]) -> list[Family]:
    """Fold one rule's BNF alternatives back into alternatives with optional symbols.

    lark expands ``a b? c?`` into the four alternatives ``a b c | a b | a c | a``;
    an Earley parser (both peers) predicts every one of them, so the IR's
    expansion would slow the peers down for nothing. Greedy: the longest
    remaining alternative is a family head; a position is optional when the
    head without it is an alternative too, and the set of optional positions is
    shrunk until every combination is present. The families generate exactly
    ``alts`` (asserted).
    """
    remaining = list(dict.fromkeys(alts))
    families: list[Family] = []
    while remaining:
        head = max(remaining, key=len)
        present = set(remaining)
        optional = [i for i in range(len(head)) if head[:i] + head[i + 1 :] in present]
        while optional and not _expansions(head, optional) <= present:
            # drop the position whose removal leaves the most covered combinations
            optional.remove(
                max(
                    optional,
                    key=lambda i: len(_expansions(head, [j for j in optional if j != i]) & present),
                )
            )
        covered = _expansions(head, optional)
        families.append(tuple((sym, i in optional) for i, sym in enumerate(head)))
        remaining = [a for a in remaining if a not in covered]
    assert set().union(*(_expansions_of(f) for f in families)) == set(alts)
    return families


def _expansions(head: tuple[str, ...], optional: Sequence[int]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = {()}
    for i, sym in enumerate(head):
        out = {(*o, sym) for o in out} | (out if i in optional else set())
    return out


def _expansions_of(family: Family) -> set[tuple[str, ...]]:
    return _expansions(tuple(s for s, _ in family), [i for i, (_, o) in enumerate(family) if o])


def _alternatives(alts: Sequence[tuple[str, ...]]) -> str:
    """One rule's body: its factored alternatives (an all-optional one may be empty)."""
    families = factor(alts)
    body = " | ".join(" ".join(s + "?" if o else s for s, o in f) for f in families if f)
    return body if all(families) else f"({body})?"


ROLE = "analyst"
"""The role of the ``lexicon`` grammar (example policy, example schema)."""


def measured_grammars() -> dict[str, tuple[Grammar, dict[str, list[bytes]], str]]:
    """The grammars ``bench/peers.py`` measures: name -> (GRID grammar, lexicon words,
    title). ``free``: SQLite L1, no lexicon; ``lexicon``: the ``analyst`` role's
    projection over the example schema's lexicon."""
    schema = example_schema()
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants(ROLE, schema))
    role = RoleProjection.compile(policy.role(ROLE), SQLITE, words=lexicon.words).grammar
    return {
        "free": (load_grammar(SQLITE.grammar_text, "sqlite"), {}, "sqlite, free identifiers"),
        "lexicon": (
            role,
            lexicon.word_lists(),
            f"sqlite, role {ROLE}, example schema lexicon",
        ),
    }


def grammar_files(name: str) -> tuple[Path, Path]:
    """``bench/grammars/sqlite_<name>.lark`` and ``.ebnf``: the translations committed."""
    return GRAMMARS / f"sqlite_{name}.lark", GRAMMARS / f"sqlite_{name}.ebnf"


def write_grammars(name: str, translation: Translation) -> tuple[Path, Path]:
    """Write the translation of grammar ``name`` to :func:`grammar_files`; return both paths."""
    GRAMMARS.mkdir(exist_ok=True)
    lark, gbnf = grammar_files(name)
    lark.write_text(translation.lark, encoding="utf-8")
    gbnf.write_text(translation.ebnf, encoding="utf-8")
    return lark, gbnf


def main() -> None:
    """Write every measured grammar's translation under ``bench/grammars/``."""
    for name, (grammar, words, title) in measured_grammars().items():
        for path in write_grammars(name, translate(grammar, words, title)):
            print(path)


if __name__ == "__main__":
    main()
