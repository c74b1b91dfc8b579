"""The generation profile: the narrower language a model writes in (issue 16).

A role's projection (:mod:`grid_sql.projection`) with its lexicon is the language
the SemanticChecker and the database judge: the *checking* language. A small model
decoding inside it still writes SQL that fails to run (Spider dev, SmolLM2-135M:
72% of mode-1 statements in the role's language did not execute): comment lines
that eat the budget, 40-character invented aliases, qualifiers that name nothing.
The **narrow** generation profile is a sublanguage of the checking language that
leaves those out; every statement it admits is in the checking language, so every
guarantee stated for the role's language (soundness, completeness, termination,
the reserve) holds for the profile's engine with the profile's language in its
place.

What ``narrow`` leaves out of the role's language (a policy knob: a role's
``generation = "narrow"``, the default, or ``"full"``; docs/policy.md):

- **comments** (:data:`COMMENTS`): their terminals become lexicon categories with
  no word, so no comment lexeme is ever complete;
- **aliases** other than :data:`ALIASES` (``T1``-``T9``, ``t1``-``t9``, ``a``-``z``:
  what Spider's gold SQL and the models write), and an alias only after ``AS``
  (a bare alias is where a small model runs a keyword into a name:
  ``concert WHEREMusic_Name`` reads as ``concert AS WHEREMusic_Name``);
- **result-column aliases** (``count(*) AS total``): a result's name changes no
  row, and held to :data:`ALIASES` a model that means ``AS max_dept_id`` writes
  ``AS d`` and loops (SmolLM2 on the example database did);
- **qualifiers** other than an alias of :data:`ALIASES`, a granted relation or a
  CTE name of the role, each with its dot (``T1.``, ``employees.``): a qualifier
  that spells nothing the role can declare is never written. That the statement
  declares the alias it uses is not a regular property; the checker names an
  undeclared one;
- **a SELECT with no FROM** (a constant query: ``SELECT 1;``) and
  **bind parameters** (``?``: nothing binds them when the statement runs);
- **row values** (``(a, b)``, the ``row_constructor`` of ``base.lark``): SQLite
  takes one only where it is compared with a row of its width, which a mask
  cannot count, and SmolLM2 writes ``SELECT DISTINCT (a, b, b, b)`` and
  ``(a, a) IN (SELECT a ...)`` (6 of the 36 covering-language statements SQLite
  refused on the first 539 Spider dev questions). PostgreSQL and DuckDB take
  rows in more places; a role that needs them there has ``generation = "full"``.

Precondition: the grammar is a dialect's (or a projection of it) with the terminal
names of ``base.lark`` (``ALIAS_NAME``, ``QUALIFIER``, ``LINE_COMMENT``,
``BLOCK_COMMENT``, ``PARAMETER``); a name the grammar lacks is left alone.

Not bounded: runs of blanks. The blank terminal as a lexicon category (a space, a
line break and an indent) would bound them, but the reserve table
(:mod:`grid_core.reserve`) writes its completions with a space as the separator
that joins any blank before it into one ignored lexeme, which a finite blank
category refuses. Only the budget bounds them today.

Cost: no T2 entry is shared across roles (the walk arm's T2 hit rate: 0 in
narrow, 0.18 in the whole language); each role still caches its own masks. The
comment terminals are ignored terminals with words, so every mask key carries the
role's lexicon fingerprint; but with them unignored and unused instead (tried,
2026-12-03) the rate stayed 0: the alias and qualifier categories, allowed at
every expression start and after AS, key those positions by the fingerprint too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final, Literal

from grid_core.dfa import ByteDFA
from grid_core.grammar import Grammar, Rule
from grid_core.memo import ContentMemo

__all__ = [
    "ALIASES",
    "COMMENTS",
    "PROFILES",
    "Profile",
    "generation_language",
    "narrow_grammar",
    "narrow_rule",
    "narrow_words",
    "written_rule",
]

Profile = Literal["narrow", "full"]
#: The generation profiles a role may name (``generation`` in the policy file).
PROFILES: Final[tuple[Profile, ...]] = ("narrow", "full")

#: The comment terminals the narrow profile silences (a lexicon category with no word).
COMMENTS: Final = frozenset({"LINE_COMMENT", "BLOCK_COMMENT"})
#: The aliases the narrow profile admits: of a table, a subquery, a DELETE or UPDATE
#: target, and a CTE's column list and a window's name (every ``ALIAS_NAME``).
ALIASES: Final[tuple[bytes, ...]] = (
    *(f"T{i}".encode() for i in range(1, 10)),
    *(f"t{i}".encode() for i in range(1, 10)),
    *(bytes([c]) for c in range(ord("a"), ord("z") + 1)),
)

_ALIAS = "ALIAS_NAME"
_QUALIFIER = "QUALIFIER"
_ROW = "row_constructor"


def written_rule(rule: Rule) -> bool:
    """Whether a generation language keeps ``rule`` as far as its spelling goes: no
    bare alias of a table, a DELETE or UPDATE target or a result column (an alias
    follows ``AS``), no bind parameter, no row value. Shared by the narrow profile
    and the FROM-first and covering generation languages
    (:func:`grid_sql.column_scope.generation_rule`,
    :func:`grid_sql.column_scope.covering_rule`)."""
    ex = rule.expansion
    if "PARAMETER" in ex or rule.alias == _ROW:
        return False
    if _ALIAS not in ex or rule.origin not in ("table_alias", "target_alias", "result_column"):
        return True
    return not any(x == _ALIAS and (i == 0 or ex[i - 1] != "AS") for i, x in enumerate(ex))


def narrow_rule(rule: Rule) -> bool:
    """Whether the narrow profile keeps ``rule``: :func:`written_rule`, no result-column
    alias, and no SELECT core without a FROM clause."""
    ex = rule.expansion
    if rule.origin == "select_core" and ex[:1] == ("SELECT",) and "from_clause" not in ex:
        return False
    if rule.origin == "result_column" and _ALIAS in rule.expansion:
        return False
    return written_rule(rule)


def narrow_grammar(grammar: Grammar, role: str) -> Grammar:
    """``grammar`` (a role's projection) with the rules :func:`narrow_rule` cuts, reduced.
    Raises :class:`~grid_core.errors.EmptyLanguageError` naming ``role`` when nothing
    is left. Kept by the projection's content (:data:`NARROWED`)."""
    name = f"{role}-narrow"
    return NARROWED.get(grammar.content_key, lambda: grammar.project(narrow_rule, name)).renamed(
        name
    )


#: Narrowed grammars by the projection's content (its fingerprint and rule
#: aliases: all that :func:`narrow_rule` and the reduction read).
NARROWED: ContentMemo[Grammar] = ContentMemo(256)


def narrow_words(
    grammar: Grammar, dfa: ByteDFA, words: Mapping[str, Collection[bytes]]
) -> dict[str, list[bytes]]:
    """The lexicon words of the narrow profile: the role's ``words`` (category ->
    W_c, the dialect's categories), plus the comment, alias and qualifier
    categories (see the module header). A qualifier word is kept only where the
    qualifier pattern matches it (a relation named like a word the dialect refuses as
    a bare qualifier is written quoted, and its quoted spelling is kept)."""
    names = {t.name for t in grammar.terminals}
    out = {c: sorted(ws) for c, ws in words.items()}
    for name in COMMENTS & names:
        out[name] = []
    if _ALIAS in names:
        out[_ALIAS] = sorted(ALIASES)
    if _QUALIFIER in names:
        qualifier = grammar.terminal_id(_QUALIFIER)
        named = [*ALIASES, *words.get("TABLE_NAME", ()), *words.get("CTE_NAME", ())]
        out[_QUALIFIER] = sorted({w + b"." for w in named if dfa.matches(w + b".", qualifier)})
    return out


def generation_language(
    profile: Profile,
    grammar: Grammar,
    dfa: ByteDFA,
    words: Mapping[str, Collection[bytes]],
    role: str,
) -> tuple[Grammar, Mapping[str, Collection[bytes]]]:
    """The grammar and lexicon words a model writes in under ``profile``, from the
    role's projection ``grammar`` and its lexicon ``words``: themselves for ``full``,
    :func:`narrow_grammar` and :func:`narrow_words` for ``narrow``."""
    if profile == "full":
        return grammar, words
    narrow = narrow_grammar(grammar, role)
    return narrow, narrow_words(narrow, dfa, words)
