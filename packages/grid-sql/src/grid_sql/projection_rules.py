"""What a role's verbs and banned clauses cut in one dialect's grammar: data.

A dialect carries its :class:`ProjectionRules` (`Dialect.projection`), so a
plug-in dialect is projected like a built-in one (`grid_sql.projection` does
the cutting; its module header describes verbs, requirements and clauses). A
:class:`Cut` selects productions by their left-hand side and, optionally, one
symbol of their right-hand side; nothing is cut at a terminal (cutting the
``INSERT`` terminal alone would leave SQLite's ``REPLACE INTO`` open).

Invariant (`ProjectionRules.check`, run when a projection is compiled): every
verb form is an alternative of the statement rule and every :class:`Cut`
selects at least one L1 production, so a renamed rule cannot silently leave a
clause open. Clause names are checked against `grid_sql.policy.CLAUSES` where
a projection is compiled (`grid_sql.projection`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from grid_core.grammar import Grammar, Rule
from grid_sql.dialect import DialectDefinitionError

__all__ = ["STATEMENT_FORMS", "WINDOW_CUTS", "Cut", "ProjectionRules"]


@dataclass(frozen=True)
class Cut:
    """The productions of ``origin`` whose right-hand side uses ``uses`` (all when None)."""

    origin: str
    uses: str | None = None

    def selects(self, rule: Rule) -> bool:
        return rule.origin == self.origin and (self.uses is None or self.uses in rule.expansion)

    def __str__(self) -> str:
        return self.origin if self.uses is None else f"{self.origin} -> ... {self.uses} ..."


@dataclass(frozen=True)
class ProjectionRules:
    """What a role's verbs and banned clauses cut in one dialect's grammar."""

    statement: str
    """The nonterminal whose alternatives are the statement forms."""
    verb_forms: Mapping[str, str]
    """Verb -> the statement-form nonterminal it names."""
    clauses: Mapping[str, tuple[Cut, ...]]
    """Clause (a key of ``policy.CLAUSES``) -> the productions it cuts."""
    requirements: tuple[tuple[Cut, frozenset[str]], ...] = ()
    """Productions that also need the given verbs."""

    def __hash__(self) -> int:  # a Dialect holding these rules is hashed (memo keys)
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(
            (
                self.statement,
                tuple(sorted(self.verb_forms.items())),
                tuple(sorted(self.clauses.items())),
                self.requirements,
            )
        )

    def cuts(self) -> tuple[Cut, ...]:
        return (
            *(c for cuts in self.clauses.values() for c in cuts),
            *(c for c, _ in self.requirements),
        )

    def check(self, dialect: str, grammar: Grammar) -> None:
        """Every verb form and cut selects an L1 production (see the module header)."""
        statements = [r for r in grammar.rules if r.origin == self.statement]
        for verb, form in self.verb_forms.items():
            if not any(form in r.expansion for r in statements):
                raise DialectDefinitionError(
                    dialect, f"{self.statement} derives no {form} (the form of {verb})"
                )
        for cut in self.cuts():
            if not any(cut.selects(r) for r in grammar.rules):
                raise DialectDefinitionError(dialect, f"projection cut {cut} selects no rule")


STATEMENT_FORMS: Mapping[str, str] = MappingProxyType(
    {
        "SELECT": "select_stmt",
        "INSERT": "insert_stmt",
        "UPDATE": "update_stmt",
        "DELETE": "delete_stmt",
    }
)
"""The verb -> statement-form map of the base grammar (`dialects/base.lark`)."""

WINDOW_CUTS = (Cut("over_clause"), Cut("window_clause"))
"""The `window` clause's cuts in the base grammar."""
