"""Candidate sentences of a role's language: derivations of its projected grammar, spelled.

Used by test_projection_inside_dialect.py to check L(role) ⊆ L(dialect) ⊆ what
the database parses (DESIGN.md section 11) on generated statements.

Nouns:

- **derivation**: the start symbol of a role's (reduced) grammar expanded rule
  by rule, leftmost first, into a string of terminals. At each nonterminal a
  production is picked with ``choose(n)`` (an index below n: a seeded RNG or a
  hypothesis draw, so hypothesis can shrink a failing statement). Once the
  derivation has made ``budget`` expansions, every nonterminal takes its
  production of shortest yield, so every derivation ends.
- **spelling**: each terminal written as one lexeme. Keywords in a drawn letter
  case; lexicon categories as words of the role's lexicon; free names
  (``ALIAS_NAME``, ``QUALIFIER``) from a pool that holds, on purpose, every
  keyword, reserved word and word-class word of the dialect, bare and quoted,
  beside plain names; literals from small tables (filtered through the
  terminal's own pattern), anything else as its shortest printable lexeme.
  Lexemes are separated by a blank.
- **candidate**: the spelled text. Only the role's own lexer decides whether a
  candidate is a sentence of L(role): a free name spelled like a keyword reads
  as the keyword where that is viable, and so the text may leave the language.
  A candidate that is in L(role) is what a role's mask can let a model write.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from grid_core.dfa import DEAD, ByteDFA
from grid_core.grammar import Grammar
from grid_sql.dialect import Dialect

Choose = Callable[[int], int]
"""``choose(n)`` -> an index in ``range(n)``."""

# Lexemes tried, in this order, for terminals by name; each is kept only where the
# dialect's pattern for the terminal takes it.
LITERALS: Mapping[str, tuple[str, ...]] = {
    "NUMBER": ("1", "0", "42", "3.5", ".5", "2e3", "0x1F"),
    "STRING": ("'x'", "''", "'it''s'", "'2024-01-01'", "'%a%'"),
    "DQ_STRING": ('"France"', '"x y"'),
    "BLOB": ("x'00ff'", "X''"),
    "PARAMETER": ("?", "?1", ":p", "@q", "$1", "$v"),
    "TYPED_STRING": ("date '2024-01-01'", "interval '1 day'", "timestamp '2024-01-01 10:00'"),
    "STAR": ("*",),
}

PLAIN_NAMES = ("a", "t1", "x", "total_count", "selection", "fromage", "union_all", "order_by")


def _fits(pattern: str, lexeme: str) -> bool:
    return re.fullmatch(pattern, lexeme, re.ASCII | re.DOTALL) is not None


def shortest_lexeme(dfa: ByteDFA, t: int) -> bytes:
    """The shortest printable lexeme of terminal ``t`` (letters tried first)."""
    order = [*range(0x61, 0x7B), *range(0x30, 0x3A), *range(0x21, 0x7F), 0x20]
    order = list(dict.fromkeys(order))
    seen = {0}
    frontier: deque[tuple[int, bytes]] = deque([(0, b"")])
    while frontier:
        q, s = frontier.popleft()
        for b in order:
            r = dfa.trans[q * 256 + b]
            if r == DEAD or r in seen or not dfa.live[r] >> t & 1:
                continue
            if dfa.accept[r] >> t & 1:
                return s + bytes([b])
            seen.add(r)
            frontier.append((r, s + bytes([b])))
    raise AssertionError(f"terminal {t} has no printable lexeme")


@dataclass
class Speller:
    """Spells the terminals of one dialect's grammars for one role's lexicon."""

    dialect: Dialect
    grammar: Grammar
    dfa: ByteDFA
    words: Mapping[str, Sequence[bytes]]
    free_names: list[bytes] = field(default_factory=list, init=False)
    """The pool of ALIAS_NAME (and, with a dot, QUALIFIER) lexemes."""
    _fixed: dict[str, tuple[bytes, ...]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        keywords = {w.upper() for w in self.dialect.keywords}
        free = sorted(
            {
                *PLAIN_NAMES,
                *(w.lower() for w in self.dialect.keywords),
                *self.dialect.reserved_words,
                *self.dialect.never_free_names,
                *self.dialect.type_names,
                *self.dialect.functions,
                *(w for _, ws in self.dialect.word_classes for w in ws),
            }
        )
        free = [w for w in free if " " not in w]
        quoted = [self.dialect.quote_identifier(w) for w in ("select", "union", "x y", "order")]
        self.free_names = [w.encode() for w in free + quoted]
        self._functions = sorted(self.dialect.functions)
        used = {s for r in self.grammar.rules for s in r.expansion}
        for t in self.grammar.terminals:
            if t.name in keywords or t.name not in used:
                continue
            options = tuple(x.encode() for x in LITERALS.get(t.name, ()) if _fits(t.pattern, x))
            if not options and t.name not in self._categories():
                options = (shortest_lexeme(self.dfa, self.grammar.terminal_id(t.name)),)
            self._fixed[t.name] = options

    def _categories(self) -> set[str]:
        d = self.dialect
        return {*d.lexicon_categories, d.alias_terminal, d.qualifier_terminal, d.function_category}

    def spell(self, name: str, choose: Choose) -> bytes:
        d = self.dialect
        if name in d.lexicon_categories:
            words = sorted(self.words.get(name, ()))
            assert words, f"{name} has no word: the projection should have cut it"
            return words[choose(len(words))]
        if name == d.alias_terminal:
            return self.free_names[choose(len(self.free_names))]
        if name == d.qualifier_terminal:
            names = [*sorted(self.words.get(d.table_category, ())), *self.free_names]
            return names[choose(len(names))] + b"."
        if name == d.function_category:  # the role's calls when its policy lists them
            calls = sorted(self.words.get(name, ())) or [f.encode() + b"(" for f in self._functions]
            return calls[choose(len(calls))]
        if name in self._fixed:
            options = self._fixed[name]
            return options[choose(len(options))]
        word = name.lower().encode()  # a keyword: in one of three letter cases
        return (word, word.upper(), word.capitalize())[choose(3)]


def shortest_yields(grammar: Grammar) -> dict[str, int]:
    """Nonterminal -> the fewest terminals it derives."""
    terminals = {t.name for t in grammar.terminals}
    best: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            if all(s in terminals or s in best for s in r.expansion):
                cost = sum(1 if s in terminals else best[s] for s in r.expansion)
                if cost < best.get(r.origin, 1 << 30):
                    best[r.origin] = cost
                    changed = True
    return best


@dataclass
class Generator:
    """Candidates of one role: derivations of ``grammar`` spelled by ``speller``."""

    grammar: Grammar
    speller: Speller
    budget: int = 40

    def __post_init__(self) -> None:
        self._terminals = {t.name for t in self.grammar.terminals}
        yields = shortest_yields(self.grammar)
        self._productions: dict[str, list[tuple[str, ...]]] = {}
        for r in self.grammar.rules:
            self._productions.setdefault(r.origin, []).append(r.expansion)
        self._shortest = {
            nt: min(ps, key=lambda p: sum(1 if s in self._terminals else yields[s] for s in p))
            for nt, ps in self._productions.items()
        }

    def terminals(self, choose: Choose) -> list[str]:
        """One derivation's terminal string."""
        out: list[str] = []
        todo: list[str] = [self.grammar.start]
        expansions = 0
        while todo:
            sym = todo.pop()
            if sym in self._terminals:
                out.append(sym)
                continue
            options = self._productions[sym]
            if expansions >= self.budget:
                production = self._shortest[sym]
            else:
                production = options[choose(len(options))]
            expansions += 1
            todo.extend(reversed(production))
        return out

    def candidate(self, choose: Choose) -> bytes:
        return b" ".join(self.speller.spell(t, choose) for t in self.terminals(choose))
