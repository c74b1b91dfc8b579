"""Schema lexicons (L3): a role's relation, column, CTE and function names as lexicon words.

A :class:`SchemaLexicon` turns a :class:`~grid_sql.schema.SchemaSnapshot` and a
role's grants (:class:`~grid_sql.policy.RoleGrants`) into the finite word sets
W_c of the dialect's lexicon categories (DESIGN.md section 3)::

    {"TABLE_NAME": {b"employees", ...}, "COLUMN_NAME": {...}, "CTE_NAME": {...}}

and builds them into a validated :class:`grid_core.lexicon.Lexicon` over the
dialect's union DFA (shared by L1 and every projection).

- ``TABLE_NAME``: the relations the role may touch (table-level policy is
  enforced by the mask through this set).
- ``COLUMN_NAME``: the union of the role's granted columns over those relations.
  Per-table column policy is not a mask property (DESIGN.md section 7): the
  SemanticChecker enforces it after the parse; this set only keeps columns that
  no granted relation grants out of the mask.
- ``CTE_NAME``: the role's CTE names (none when the role bans ``cte``). They must
  not spell a relation of the catalog: the grammars read a CTE name in a table
  position without checking its WITH (a :class:`LexiconError` otherwise).
- ``FUNCTION_NAME`` (``Dialect.function_category``): the functions the role may
  call (DESIGN.md section 11, "functions are policy"), each as its call lexeme
  ``name(`` in three case forms (``substr(``, ``SUBSTR(``, ``Substr(``): the
  dialect reads function names case-insensitively, and every case mix would
  make W_c exponential. A role granted every function of the dialect gets no
  such category: the word class itself is then the exact set (in any letter
  case), and the lexicon stays what it was before functions were policy. A role
  granted none has an empty category, so the projection cuts function calls.

**Spelling** (``spellings``). A catalog name is admitted as the lexemes that the
database resolves to it, spelled with the dialect's rules
(``Dialect.bare_identifier``, ``quoted_words``, ``identifier_quotes``):

- *case*: the catalog spelling plus its lower-case, upper-case and capitalised
  forms (ASCII letters only: both SQLite and PostgreSQL fold ASCII only). On
  Spider's gold SQL (dev + train) these four forms cover 99.66% of the 56,401
  identifier occurrences that name a schema object (catalog 63.9%, lower 30.8%,
  upper 3.7%, capitalised 1.3%); the remaining 0.34% mix case inside the word
  (``facID`` for ``FacID``). Admitting every case mix would make W_c exponential.
  In SQLite (ASCII case-insensitive) every form is admitted, quoted when it is
  not a bare identifier; in PostgreSQL (``fold-lower``) only forms that fold to
  the catalog spelling are admitted bare, so a name with an upper-case letter is
  admitted quoted only (``"Employees"``); a ``sensitive`` dialect admits the
  catalog spelling alone.
- *quoting*: a form that is not a bare identifier, or spells a keyword or a
  reserved word of the database, is admitted in the dialect's first quote form
  that holds it (``Official_ratings_(millions)`` -> ``"Official_ratings_(millions)"``);
  the quoted catalog spelling is always admitted too (``"name"``; in SQLite a
  double-quoted word that names a column is that column, which is SQLite's own
  rule).
- a name no quote form can hold (empty, NUL) or that is not valid Unicode text
  is a build error: :class:`~grid_core.errors.LexiconError` naming it.

Every word is validated at build against its category's pattern
(:func:`grid_core.lexicon.build_lexicon`): a violation is a ``LexiconError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Final, Literal

from grid_core.errors import LexiconError
from grid_core.lexicon import Lexicon, build_lexicon, check_words, lexicon_fingerprint
from grid_sql.dialect import Dialect, DialectDefinitionError
from grid_sql.policy import ALL, DEFAULT_CTE_NAMES, RoleGrants
from grid_sql.projection import dialect_dfa, dialect_grammar
from grid_sql.schema import SchemaError, SchemaSnapshot, ascii_lower

__all__ = [
    "DEFAULT_CASE_FORMS",
    "FUNCTION_CASE_FORMS",
    "CaseForm",
    "SchemaLexicon",
    "case_form",
    "full_grants",
    "spellings",
]

CaseForm = Literal["catalog", "lower", "upper", "capitalized"]
DEFAULT_CASE_FORMS: Final[tuple[CaseForm, ...]] = ("catalog", "lower", "upper", "capitalized")
#: The case forms of a granted function's call lexeme (the dialect's names are lower case).
FUNCTION_CASE_FORMS: Final[tuple[CaseForm, ...]] = ("lower", "upper", "capitalized")

_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def case_form(name: str, form: CaseForm) -> str:
    """``name`` in one case form (ASCII letters only change)."""
    if form == "lower":
        return ascii_lower(name)
    if form == "upper":
        return name.translate(_ASCII_UPPER)
    if form == "capitalized":
        return name[:1].translate(_ASCII_UPPER) + ascii_lower(name[1:])
    return name


@lru_cache(maxsize=64)
def _call_words(functions: tuple[str, ...]) -> dict[bytes, frozenset[str]]:
    """The ``FUNCTION_NAME`` words of ``functions``: each name in every
    :data:`FUNCTION_CASE_FORMS`, then ``(``, with the names it spells (kept per
    function list: most roles of a dialect share one)."""
    calls: dict[bytes, set[str]] = {}
    for name in functions:
        for form in FUNCTION_CASE_FORMS:
            calls.setdefault(case_form(name, form).encode() + b"(", set()).add(name)
    return {w: frozenset(n) for w, n in calls.items()}


def _bare(dialect: Dialect, word: str) -> bool:
    return (
        re.fullmatch(dialect.bare_identifier, word, re.ASCII) is not None
        and ascii_lower(word) not in dialect.quoted_words
    )


def spellings(
    name: str,
    dialect: Dialect,
    category: str,
    forms: Iterable[CaseForm] = DEFAULT_CASE_FORMS,
) -> tuple[bytes, ...]:
    """The lexemes admitted for catalog name ``name`` (see the module header).

    Raises :class:`LexiconError` (naming ``name`` and ``category``) when the
    dialect cannot spell it.
    """

    def fail(reason: str) -> LexiconError:
        return LexiconError(name.encode("utf-8", "backslashreplace"), category, reason)

    def quote(word: str) -> str:
        try:
            return dialect.quote_identifier(word)
        except DialectDefinitionError:
            raise fail(f"no quote form of {dialect.name} can hold {word!r}") from None

    if not name:
        raise fail("the empty name cannot be spelled")
    out: list[str] = []
    variants = list(dict.fromkeys(case_form(name, f) for f in forms))
    if dialect.identifier_case == "insensitive":
        out += [v if _bare(dialect, v) else quote(v) for v in variants]
    elif dialect.identifier_case == "fold-lower":
        out += [v for v in variants if _bare(dialect, v) and ascii_lower(v) == name]
    elif _bare(dialect, name):
        out.append(name)
    out.append(quote(name))
    try:
        return tuple(dict.fromkeys(w.encode("utf-8") for w in out))
    except UnicodeEncodeError as e:
        raise fail(f"not valid Unicode text: {e.reason}") from None


def full_grants(
    schema: SchemaSnapshot, cte_names: tuple[str, ...] = DEFAULT_CTE_NAMES
) -> RoleGrants:
    """Every verb on every relation and column of ``schema``, every function (role ``*``)."""
    return RoleGrants(
        ALL,
        frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"}),
        frozenset(),
        MappingProxyType({t.name: t.column_names for t in schema.tables}),
        frozenset(schema.table_names),
        cte_names,
        schema.fingerprint,
    )


@dataclass(frozen=True, eq=False)
class SchemaLexicon:
    """One role's lexicon words over one schema, validated. Compare by ``fingerprint``."""

    role: str
    dialect: str
    words: Mapping[str, frozenset[bytes]]
    """Category terminal -> W_c."""
    origins: Mapping[str, Mapping[bytes, frozenset[str]]]
    """Category -> word -> the catalog names it spells (for the SemanticChecker)."""
    quoted: frozenset[str]
    """Catalog names admitted in quoted form only (no bare spelling resolves to them)."""
    schema_fingerprint: str
    fingerprint: str
    """The fingerprint of :attr:`lexicon` (``grid_core.lexicon.lexicon_fingerprint``)."""
    _dialect: Dialect = field(repr=False)

    @cached_property
    def lexicon(self) -> Lexicon:
        """The grid-core lexicon (one trie over all categories), built on first use:
        a role's engine builds its own over its generation profile's words, so the
        serving path never needs this one. Its words were validated by :meth:`build`."""
        dialect = self._dialect
        lexicon = build_lexicon(dialect_grammar(dialect), dialect_dfa(dialect), self.words)
        lexicon.check_invariants()
        assert lexicon.fingerprint == self.fingerprint
        return lexicon

    def word_lists(self) -> dict[str, list[bytes]]:
        """``{category: sorted words}``: the mapping ``build_lexicon`` and ``Engine`` take."""
        return {c: sorted(ws) for c, ws in self.words.items()}

    @classmethod
    def build(
        cls,
        dialect: Dialect,
        schema: SchemaSnapshot,
        grants: RoleGrants | None = None,
        *,
        forms: Iterable[CaseForm] = DEFAULT_CASE_FORMS,
    ) -> SchemaLexicon:
        """The lexicon of ``grants`` (default: :func:`full_grants`) over ``schema``."""
        if schema.dialect != dialect.name:
            raise SchemaError(
                schema.label, f"a {schema.dialect} snapshot cannot feed a {dialect.name} lexicon"
            )
        grants = grants or full_grants(schema)
        if grants.schema_fingerprint != schema.fingerprint:
            raise SchemaError(schema.label, f"role {grants.role!r} was resolved on another schema")
        forms = tuple(forms)
        origins: dict[str, dict[bytes, set[str]]] = {c: {} for c in dialect.lexicon_categories}
        quoted: set[str] = set()

        opens = tuple(q.open.encode() for q in dialect.identifier_quotes)

        def admit(category: str, names: Iterable[str]) -> None:
            for name in names:
                words = spellings(name, dialect, category, forms)
                if all(w.startswith(opens) for w in words):
                    quoted.add(name)
                for word in words:
                    origins[category].setdefault(word, set()).add(name)

        if grants.functions is not None:
            calls = _call_words(grants.functions)
            origins[dialect.function_category] = {w: set(n) for w, n in calls.items()}
        admit(dialect.table_category, grants.columns)
        admit(dialect.column_category, {c for cols in grants.columns.values() for c in cols})
        if "cte" not in grants.banned_clauses:
            relations = {ascii_lower(t): t for t in schema.table_names}
            for cte in grants.cte_names:
                if ascii_lower(cte) in relations:
                    raise LexiconError(
                        cte.encode("utf-8", "backslashreplace"),
                        dialect.cte_category,
                        f"spells relation {relations[ascii_lower(cte)]!r} of the schema",
                    )
                system = dialect.catalog_prefix(cte)
                if system is not None:
                    raise LexiconError(
                        cte.encode("utf-8", "backslashreplace"),
                        dialect.cte_category,
                        f"starts with {system!r}, as the {dialect.name} catalog's own "
                        "relations do, which a bare name can reach",
                    )
            admit(dialect.cte_category, grants.cte_names)
        words = {c: frozenset(ws) for c, ws in origins.items()}
        grammar = dialect_grammar(dialect)
        by_id = check_words(grammar, dialect_dfa(dialect), words)  # LexiconError for a bad word
        return cls(
            grants.role,
            dialect.name,
            MappingProxyType(words),
            MappingProxyType(
                {
                    c: MappingProxyType({w: frozenset(n) for w, n in ws.items()})
                    for c, ws in origins.items()
                }
            ),
            frozenset(quoted),
            schema.fingerprint,
            lexicon_fingerprint(grammar, by_id),
            dialect,
        )
