"""Role projection (L2): a policy role compiled to a reduced grammar.

A :class:`RoleProjection` is the dialect grammar (L1) with the productions the
role may not use cut, then reduced by :meth:`grid_core.grammar.Grammar.project`
(useless-symbol elimination and the non-empty check: DESIGN.md section 3). The
projection keeps L1's terminals and their numbering, so one union DFA and one
lexicon serve L1 and every role.

What is cut, per dialect, is data the dialect carries
(`Dialect.projection`, a :class:`grid_sql.projection_rules.ProjectionRules`). A
:class:`~grid_sql.projection_rules.Cut` selects productions by their left-hand
side and, optionally, one symbol of their right-hand side; nothing is cut at a
terminal (cutting the ``INSERT`` terminal alone would leave SQLite's ``REPLACE
INTO`` open).

- **Verbs** are cut at the statement forms: a verb the role lacks removes the
  alternatives of ``statement`` that derive its form (``with_clause
  insert_stmt`` too); reduction then removes whatever only that form reached.
  ``REPLACE INTO`` and ``INSERT OR REPLACE`` are insert forms.
- **Verb requirements**: a few productions do the work of a second verb and
  are cut unless the role has it too. SQLite's ``REPLACE`` conflict resolution
  (``REPLACE INTO``, ``INSERT OR REPLACE``, ``UPDATE OR REPLACE``) deletes the
  rows it conflicts with, so it needs ``DELETE``; PostgreSQL's ``INSERT ... ON
  CONFLICT ... DO UPDATE`` updates, so it needs ``UPDATE`` (PostgreSQL's own
  privilege rule).
- **Banned clauses** (:data:`grid_sql.policy.CLAUSES`) cut their productions.
  A clause a dialect does not have (``returning`` in SQLite) cuts nothing.

- **Empty lexicon categories** (when the role's lexicon is given): a category
  with no word (no table granted, no CTE name) cuts every production that uses
  it, so that the mask never walks into a position no word can fill.

Invariant (checked when a projection is compiled): every cut of the dialect's
rules selects at least one L1 production, so a renamed rule in a grammar cannot
silently leave a clause open, and every clause it names is one of
:data:`grid_sql.policy.CLAUSES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache

from grid_core.dfa import ByteDFA, build_union_dfa
from grid_core.errors import EmptyLanguageError, PolicyError
from grid_core.grammar import Grammar, Rule, TerminalSet, load_grammar
from grid_core.memo import ContentMemo
from grid_sql.dialect import Dialect, DialectDefinitionError
from grid_sql.policy import CLAUSES, VERBS, Role
from grid_sql.projection_rules import Cut, ProjectionRules

__all__ = [
    "RoleProjection",
    "dialect_dfa",
    "dialect_grammar",
    "language_dfa",
    "project_role",
]


@cache
def dialect_grammar(dialect: Dialect) -> Grammar:
    """The dialect's L1 grammar (compiled once per dialect value)."""
    return load_grammar(dialect.grammar_text, dialect.name)


@cache
def dialect_dfa(dialect: Dialect) -> ByteDFA:
    """The union DFA of the dialect's terminals, shared by L1 and every projection."""
    return language_dfa(dialect_grammar(dialect))


def language_dfa(grammar: Grammar) -> ByteDFA:
    """The union DFA of ``grammar``'s terminals, built once per terminal set: the
    dialect's for L1 and its projections, its own for a generation language whose
    calls are typed (:func:`grid_sql.generation.typed_calls`)."""
    return _terminals_dfa(grammar.terminals)


@lru_cache(maxsize=32)
def _terminals_dfa(terminals: TerminalSet) -> ByteDFA:
    return build_union_dfa([(t.name, t.pattern) for t in terminals])


@dataclass(frozen=True, eq=False)
class RoleProjection:
    """A role's L2 grammar. Compare by ``fingerprint`` (the grammar's: two roles
    with the same verbs and clauses share one projection and its cached masks)."""

    role: str
    dialect: str
    verbs: frozenset[str]
    banned_clauses: frozenset[str]
    grammar: Grammar
    cut: tuple[Rule, ...] = field(repr=False)
    """The L1 productions the policy cut (reduction then removed more)."""

    @property
    def fingerprint(self) -> str:
        return self.grammar.fingerprint

    @classmethod
    def compile(
        cls,
        role: Role,
        dialect: Dialect,
        *,
        grammar: Grammar | None = None,
        rules: ProjectionRules | None = None,
        words: Mapping[str, Collection[bytes]] | None = None,
    ) -> RoleProjection:
        """Project ``dialect``'s grammar (or ``grammar``, an L1 of it) for ``role``.

        ``words`` (the role's lexicon, category -> W_c, e.g. ``SchemaLexicon.words``)
        cuts every production that uses a category whose W_c is empty: a role
        granted no table has no FROM clause. Without it, such a production stays
        in L2 and the mask meets a dead end there (an empty mask at a viable
        prefix), which is exactly what reducedness is meant to exclude.

        Raises :class:`EmptyLanguageError` naming the role when it can say
        nothing, :class:`PolicyError` for a verb or clause the rules do not know.
        """
        if rules is None:
            if dialect.projection is None:
                raise PolicyError(
                    f"role {role.name!r}: no projection rules for dialect {dialect.name!r} "
                    "(give its Dialect value a projection: grid_sql.projection_rules)"
                )
            rules = dialect.projection
        unknown_verbs = sorted(role.verbs - set(VERBS))
        if unknown_verbs:
            raise PolicyError(f"role {role.name!r}: unknown verbs {unknown_verbs}")
        unknown_clauses = sorted(role.banned_clauses - set(CLAUSES))
        if unknown_clauses:
            raise PolicyError(f"role {role.name!r}: unknown clauses {unknown_clauses}")
        empty = frozenset(c for c, ws in (words or {}).items() if not ws)
        if grammar is not None or rules is not dialect.projection:
            return cls._compile(role, dialect, grammar or dialect_grammar(dialect), rules, empty)
        key = (dialect, role.verbs, role.banned_clauses, empty)
        kept = PROJECTIONS.get(
            key, lambda: cls._compile(role, dialect, dialect_grammar(dialect), rules, empty)
        )
        return dataclasses.replace(kept, role=role.name, grammar=kept.grammar.renamed(role.name))

    @classmethod
    def _compile(
        cls,
        role: Role,
        dialect: Dialect,
        l1: Grammar,
        rules: ProjectionRules,
        empty: frozenset[str],
    ) -> RoleProjection:
        """:meth:`compile` once its arguments are checked (see there)."""
        CHECKED_RULES.get((rules, l1.fingerprint), lambda: _checked(rules, dialect.name, l1))
        unknown = sorted(set(rules.clauses) - set(CLAUSES))
        if unknown:
            raise DialectDefinitionError(
                dialect.name, f"projection rules for unknown clauses {unknown}"
            )
        banned_forms = {f for v, f in rules.verb_forms.items() if v not in role.verbs}
        cuts = [c for clause in sorted(role.banned_clauses) for c in rules.clauses.get(clause, ())]
        cuts += [c for c, needs in rules.requirements if not needs <= role.verbs]
        for category in empty:
            l1.terminal_id(category)  # a GrammarError for a category the dialect lacks

        cuts_by_origin: dict[str, list[Cut]] = {}
        for c in cuts:  # a cut selects only rules of its origin
            cuts_by_origin.setdefault(c.origin, []).append(c)

        def cut(rule: Rule) -> bool:
            if rule.origin == rules.statement and not banned_forms.isdisjoint(rule.expansion):
                return True
            if empty and not empty.isdisjoint(rule.expansion):
                return True
            selecting = cuts_by_origin.get(rule.origin)
            return selecting is not None and any(c.selects(rule) for c in selecting)

        removed = tuple(r for r in l1.rules if cut(r))
        gone = {id(r) for r in removed}
        try:
            projected = l1.project(lambda r: id(r) not in gone, role.name)
        except EmptyLanguageError:
            raise EmptyLanguageError(
                role.name,
                f"verbs {sorted(role.verbs)}, banned clauses {sorted(role.banned_clauses)}"
                + (f" and empty lexicon categories {sorted(empty)}" if empty else "")
                + f" leave no statement in {dialect.name}",
            ) from None
        return cls(
            role.name,
            dialect.name,
            role.verbs,
            role.banned_clauses,
            projected,
            removed,
        )


#: Projection rules whose ``ProjectionRules.check`` passed, by (rules, L1
#: fingerprint): the check reads nothing else, and a dialect checks one L1.
CHECKED_RULES: ContentMemo[ProjectionRules] = ContentMemo(64)


def _checked(rules: ProjectionRules, dialect: str, l1: Grammar) -> ProjectionRules:
    rules.check(dialect, l1)
    return rules


#: Projections by what determines them: the dialect (its L1 grammar and projection
#: rules), the role's verbs and banned clauses, and the lexicon categories left
#: empty. A second role with the same verbs and clauses, or the same role over
#: another schema, gets the kept projection under its own name.
PROJECTIONS: ContentMemo[RoleProjection] = ContentMemo(256)


def project_role(
    role: Role, dialect: Dialect, words: Mapping[str, Collection[bytes]] | None = None
) -> Grammar:
    """Shorthand: the L2 grammar of ``role`` in ``dialect`` (see ``RoleProjection.compile``)."""
    return RoleProjection.compile(role, dialect, words=words).grammar
