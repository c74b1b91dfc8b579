"""Policy bundles: who may say what, read from a TOML file (the input of L2 and L3).

A :class:`PolicyBundle` names *roles*. A role has

- **verbs**: the statement forms it may use (``SELECT``, ``INSERT``, ``UPDATE``,
  ``DELETE``), enforced by the mask through the role projection (L2,
  :mod:`grid_sql.projection`);
- **banned clauses**: constructs cut from its grammar (``subquery``,
  ``set_operations``, ``cte``, ...; :data:`CLAUSES`), also L2;
- **table grants**: the relations it may name, enforced by the mask through
  the schema lexicon (L3, :mod:`grid_sql.lexicon`);
- **column grants**: per granted table, the columns it may use. No left-to-right
  mask can enforce them per table (the SELECT list precedes FROM; DESIGN.md
  section 7), so they are data for the post-parse SemanticChecker; the lexicon
  only narrows ``COLUMN_NAME`` to the union of the granted columns;
- **CTE names**: the words it may name a common table expression with;
- **functions**: the functions it may call, enforced by the mask through the
  lexicon (the dialect's ``FUNCTION_NAME`` class becomes a lexicon category,
  :mod:`grid_sql.lexicon`). Optional: ``functions = [...]`` lists them,
  ``"*"`` grants every function of the dialect, and a role that says nothing
  gets the dialect's safe default (``Dialect.default_functions``: every known
  function but the allocators over a size argument, such as ``randomblob``,
  ``zeroblob`` and ``printf`` in SQLite). No dialect has a function that reads
  files or loads code (``load_extension``, ``readfile``), granted or not;
- **execution limits** (:class:`~grid_sql.limits.Limits`): how long a
  statement it runs may take, how many rows and bytes it may return, how much
  SQLite heap it may use. Optional: ``[limits]`` sets them for every role,
  ``[roles.NAME.limits]`` per role (key by key over ``[limits]``), and what
  neither sets is :data:`~grid_sql.limits.DEFAULT_LIMITS`;
- **generation profile** (:mod:`grid_sql.generation`): the language a model
  writes in for the role. Optional: ``generation = "narrow"`` (the default: no
  comments, a finite alias set, no result-column alias, no constant query) or
  ``"full"`` (the role's whole language). The checker judges the whole language
  either way.

The file format is documented in ``docs/policy.md``; :data:`EXAMPLE` is the
policy of the demo schema (``examples/company.sql``).

Policy decisions:

- Validation is strict and happens on load: malformed TOML, an unknown or
  missing key, a value of the wrong type, an unknown verb or clause is a
  :class:`PolicyFileError` subclass whose message names the file, the line and
  the field (``company.policy.toml:14: roles.clerk.verbs[2]: unknown verb
  'UPSERT'``). Names of relations and columns are checked against a
  :class:`~grid_sql.schema.SchemaSnapshot` by :meth:`PolicyBundle.validate`
  (and by :meth:`PolicyBundle.load` when given one), with the dialect's
  identifier rule (SQLite: ASCII case-insensitive; PostgreSQL: exact catalog
  spelling).
- Line numbers: tomllib reports them for syntax errors only; for the others a
  small locator maps dotted key paths to the line that defines them (table
  headers, dotted keys, one level of array elements). It is a best effort: a
  key inside an inline table is reported at the line of the enclosing key.
- Verbs are case-insensitive and stored upper-case; clause names are
  lower-case, with the aliases ``union`` (``set_operations``) and ``with``
  (``cte``).
- The fingerprint covers the normalised content (roles, verbs, clauses,
  grants, CTE names, each role's limits when they are not the defaults, its
  functions when it lists them, and its generation profile when it is not
  ``narrow``), not the file's path, comments or layout. A file written before
  limits, functions or generation profiles existed keeps its fingerprint;
  spelling out the default limits changes nothing.
- Function names are ASCII case-insensitive and resolved against the dialect
  of the schema (:meth:`PolicyBundle.grants`): a name the dialect does not
  know is a :class:`PolicyReferenceError`.
- A CTE name must not be the name of a relation of the schema: the grammars let
  a ``CTE_NAME`` word stand in a table position without its ``WITH``, so such a
  word would open the relation to the role. A role that names no CTE gets
  ``cte``, or, when a relation is named ``cte``, the first of ``cte1``,
  ``cte2``, ... that names none (so such a table breaks no role).
- A role grants at least one verb and one relation: ``verbs = []`` and
  ``tables = []`` (or ``"*"`` over a schema without relations) are errors, not
  a role that can say nothing, or only ``SELECT 1``.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast

from grid_core.errors import LexiconError, PolicyError
from grid_core.files import read_bounded
from grid_core.fingerprint import fingerprint
from grid_sql.dialects import get_dialect
from grid_sql.generation import PROFILES, Profile
from grid_sql.limits import DEFAULT_LIMITS, LIMIT_KEYS, Limits, check_limit
from grid_sql.schema import Routine, SchemaSnapshot, ascii_lower, name_key
from grid_sql.write_effects import first_escape

__all__ = [
    "ALL",
    "CLAUSES",
    "CLAUSE_ALIASES",
    "DEFAULT_CTE_NAMES",
    "EXAMPLE",
    "ROLE_NAME",
    "VERBS",
    "MissingKeyError",
    "MissingPolicyError",
    "PolicyBundle",
    "PolicyFileError",
    "PolicyReferenceError",
    "PolicySyntaxError",
    "PolicyTypeError",
    "PolicyValueError",
    "Role",
    "RoleGrants",
    "UnknownKeyError",
    "UnknownRoleError",
    "example_policy",
]

VERBS: Final = ("SELECT", "INSERT", "UPDATE", "DELETE")

#: The clauses a role may ban, with what each cuts (per dialect: projection.CLAUSE_CUTS).
CLAUSES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "subquery": "a SELECT nested in an expression or in FROM: scalar, IN (...), EXISTS, "
        "ANY/ALL (...), derived tables, LATERAL; and SQLite's `x IN table`",
        "set_operations": "UNION, INTERSECT and EXCEPT",
        "cte": "WITH (common table expressions), and CTE names in FROM",
        "recursive_cte": "WITH RECURSIVE",
        "join": "more than one relation in one source list: JOIN, comma lists, "
        "UPDATE ... FROM, DELETE ... USING",
        "window": "window functions (OVER) and WINDOW clauses",
        "returning": "RETURNING (PostgreSQL)",
        "on_conflict": "conflict clauses: INSERT OR ..., REPLACE INTO and UPDATE OR ... (SQLite), "
        "ON CONFLICT (PostgreSQL)",
    }
)
CLAUSE_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {"union": "set_operations", "with": "cte"}
)
DEFAULT_CTE_NAMES: Final = ("cte",)
ALL: Final = "*"

EXAMPLE: Final = "company.policy.toml"
"""The example policy (package ``grid_sql.examples``), over ``company.sql``."""

_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ASCII_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)

MAX_POLICY_BYTES = 16 << 20
"""The largest policy file read (policies are a few kilobytes)."""
#: What a role's name must match (in full).
ROLE_NAME: Final = _ROLE_NAME
_TOP_KEYS = {"version": "int", "description": "str", "limits": "table", "roles": "table"}
_ROLE_KEYS = {
    "description": "str",
    "verbs": "array",
    "tables": "array or '*'",
    "banned_clauses": "array",
    "columns": "table",
    "cte_names": "array",
    "functions": "array or '*'",
    "limits": "table",
    "generation": "str",
    "triggers": "array or '*'",
    "routines": "array or '*'",
}
_LIMIT_KEYS = dict.fromkeys(LIMIT_KEYS, "number")
_REQUIRED_ROLE_KEYS = ("verbs", "tables")
FORMAT_VERSION = 1
_SHOWN_ROUTINES = 8  # a refusal names this many of the routines a role leaves out
_EXTENSION = "extension "  # a routines entry naming every routine of an extension

# ---------------------------------------------------------------- errors


class PolicyFileError(PolicyError):
    """A policy file is wrong at ``line`` (1-based; None if unknown), in ``field``."""

    def __init__(self, path: str, line: int | None, field: str, reason: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")


class PolicySyntaxError(PolicyFileError):
    """The file is not TOML (tomllib's message and line)."""


class UnknownKeyError(PolicyFileError):
    """A key the format does not define (a typo is never ignored)."""


class MissingKeyError(PolicyFileError):
    """A required key is absent."""


class PolicyTypeError(PolicyFileError):
    """A value has the wrong TOML type."""


class PolicyValueError(PolicyFileError):
    """A value of the right type that names no verb, clause or valid name."""


class PolicyReferenceError(PolicyFileError):
    """A relation or column that the schema snapshot does not have, or a CTE name it does."""


class MissingPolicyError(PolicyError):
    """A database (or schema snapshot) of the user's was named without a policy: the
    example policy is only for the example database, so GRID refuses to guess.
    ``source`` is the file, ``option`` the command-line option that named it."""

    def __init__(self, source: str, option: str = "--db") -> None:
        self.source = source
        self.option = option
        super().__init__(
            f"{option} {source} needs --policy FILE (the example policy is for the example "
            f"database only); write a starter policy with: grid policy init {option} {source}"
        )


class UnknownRoleError(PolicyError):
    """A role the bundle does not define."""

    def __init__(self, role: str, known: Sequence[str]) -> None:
        self.role = role
        self.known = tuple(known)
        super().__init__(f"no role {role!r} in the policy; roles: {', '.join(known)}")


# ---------------------------------------------------------------- roles


@dataclass(frozen=True)
class Role:
    """One role, as written in the policy (names not yet resolved against a schema).

    ``tables`` is :data:`ALL` or the granted relation names; ``columns`` maps a
    granted table to :data:`ALL` or its granted column names (a granted table
    absent from ``columns`` has all its columns). Names keep the file's order;
    :meth:`canonical` (and so the fingerprint) does not depend on it.
    """

    name: str
    verbs: frozenset[str]
    tables: tuple[str, ...] | Literal["*"]
    banned_clauses: frozenset[str] = frozenset()
    columns: Mapping[str, tuple[str, ...] | Literal["*"]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    cte_names: tuple[str, ...] = DEFAULT_CTE_NAMES
    description: str = ""
    limits: Limits = DEFAULT_LIMITS
    functions: tuple[str, ...] | Literal["*"] | None = None
    """The functions the role may call (lower case), ``*`` for all of the dialect's,
    None for the dialect's default (``Dialect.default_functions``)."""
    cte_names_given: bool = field(default=False, compare=False)
    """Whether the file named the CTE names (else a clash with a relation is avoided)."""
    generation: Profile = "narrow"
    """The language a model writes in for this role (:mod:`grid_sql.generation`):
    ``narrow``, the generation profile, or ``full``, the role's whole language."""
    triggers: tuple[str, ...] | Literal["*"] = ()
    """The triggers the role's writes may fire (:mod:`grid_sql.write_effects`),
    ``*`` for every one."""
    routines: tuple[str, ...] | Literal["*"] = ()
    """The user-defined routines the role's statements may run
    (``SchemaSnapshot.routines``: by full name or by the word a statement
    writes), ``*`` for every one."""

    def __hash__(self) -> int:  # ``columns`` is a mapping: hash the canonical content
        return hash(fingerprint(self.canonical()))

    def canonical(self) -> tuple[Any, ...]:
        """The role as fingerprintable data (sets sorted, ``*`` kept; limits only when
        they are not the defaults, so that fingerprints from before limits stand)."""
        tables = ALL if self.tables == ALL else sorted(self.tables)
        limits = () if self.limits == DEFAULT_LIMITS else (self.limits.canonical(),)
        generation = () if self.generation == "narrow" else (("generation", self.generation),)
        functions: tuple[Any, ...] = ()
        if self.functions is not None:
            listed = ALL if self.functions == ALL else sorted(self.functions)
            functions = (("functions", listed),)
        triggers: tuple[Any, ...] = ()
        if self.triggers:
            triggers = (("triggers", ALL if self.triggers == ALL else sorted(self.triggers)),)
        routines: tuple[Any, ...] = ()
        if self.routines:
            routines = (("routines", ALL if self.routines == ALL else sorted(self.routines)),)
        return (
            self.name,
            sorted(self.verbs),
            sorted(self.banned_clauses),
            tables,
            {t: ALL if c == ALL else sorted(c) for t, c in self.columns.items()},
            list(self.cte_names),
            *limits,
            *functions,
            *generation,
            *triggers,
            *routines,
        )


@dataclass(frozen=True)
class RoleGrants:
    """A role resolved against a schema: catalog spellings, every ``*`` expanded.

    ``columns`` maps each granted relation (catalog name) to its granted columns
    (catalog names, ordinal order); ``unrestricted`` holds the relations whose
    grant is every column. This is the data a SemanticChecker enforces.
    """

    role: str
    verbs: frozenset[str]
    banned_clauses: frozenset[str]
    columns: Mapping[str, tuple[str, ...]]
    unrestricted: frozenset[str]
    cte_names: tuple[str, ...]
    schema_fingerprint: str
    functions: tuple[str, ...] | None = None
    """The functions the role may call (the dialect's spelling, its order); None for
    every function of the dialect (no restriction)."""

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(self.columns)


# ---------------------------------------------------------------- the bundle


@dataclass(frozen=True, eq=False)
class PolicyBundle:
    """The roles of one policy file. Immutable; compare by ``fingerprint``.

    ``limits`` are the file's ``[limits]`` over the defaults (what a role without
    its own ``limits`` gets); each role's resolved limits are ``role(name).limits``.
    """

    roles: Mapping[str, Role]
    description: str = ""
    path: str = "<policy>"
    source: str = field(default="", repr=False)
    limits: Limits = DEFAULT_LIMITS

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint(
            ("grid.policy.v1", {name: role.canonical() for name, role in self.roles.items()})
        )

    def role(self, name: str) -> Role:
        try:
            return self.roles[name]
        except KeyError:
            raise UnknownRoleError(name, sorted(self.roles)) from None

    # ------------------------------------------------------------ loading

    @classmethod
    def load(cls, path: str | Path, schema: SchemaSnapshot | None = None) -> PolicyBundle:
        """Read and validate a policy file (and check its names against ``schema``)."""
        try:  # utf-8-sig: a byte-order mark (some editors write one) is not TOML
            text = read_bounded(path, MAX_POLICY_BYTES).decode("utf-8-sig")
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise PolicyFileError(str(path), None, "", f"cannot read the file: {e}") from None
        return cls.loads(text, str(path), schema)

    @classmethod
    def loads(
        cls, text: str, path: str = "<policy>", schema: SchemaSnapshot | None = None
    ) -> PolicyBundle:
        """Read and validate policy text; ``path`` is the name used in messages."""
        lines = _Locator(text)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            line = lines.syntax_error_line(str(e))
            raise PolicySyntaxError(path, line, lines.field_at(line), str(e)) from None
        except RecursionError:
            raise PolicySyntaxError(path, None, "", "it nests too deeply to be read") from None
        bundle = _Reader(path, lines).bundle(data, text)
        if schema is not None:
            bundle.validate(schema)
        return bundle

    # ------------------------------------------------------------ against a schema

    def validate(self, schema: SchemaSnapshot) -> None:
        """Check every relation, column and CTE name against ``schema``.

        Raises :class:`PolicyReferenceError` naming the file, line and field.
        """
        for role in self.roles.values():
            self._resolve(role, schema)

    def grants(self, role: str, schema: SchemaSnapshot) -> RoleGrants:
        """``role`` resolved against ``schema`` (validated on the way)."""
        return self._resolve(self.role(role), schema)

    def column_grants(self, schema: SchemaSnapshot) -> dict[str, dict[str, tuple[str, ...] | None]]:
        """role -> granted relation -> its granted columns, or None for all of them.

        Catalog spelling throughout: the shape of ``grid_sql.checker.Grants``.
        """
        out: dict[str, dict[str, tuple[str, ...] | None]] = {}
        for name in self.roles:
            g = self.grants(name, schema)
            out[name] = {t: None if t in g.unrestricted else c for t, c in g.columns.items()}
        return out

    def _resolve(self, role: Role, schema: SchemaSnapshot) -> RoleGrants:
        from grid_sql.lexicon import spellings  # the lexicon module imports this one

        base = ("roles", role.name)

        def error(path: tuple[str | int, ...], value: str | None, reason: str) -> PolicyFileError:
            full = (*base, *path)
            line = _Locator(self.source).line(full, value)  # read only on an error
            return PolicyReferenceError(self.path, line, _field_name(full), reason)

        if role.tables == ALL:
            relations = list(schema.tables)
            if not relations:
                raise error(("tables",), None, f"{schema.label} has no relation to grant")
        else:
            relations = []
            for i, name in enumerate(role.tables):
                table = schema.table(name)
                if table is None:
                    raise error(("tables", i), name, f"no relation {name!r} in {schema.label}")
                if table in relations:  # as duplicate verbs are: a slip worth naming
                    raise error(
                        ("tables", i), name, f"{name!r} names relation {table.name!r} again"
                    )
                relations.append(table)
        columns: dict[str, tuple[str, ...]] = {}
        unrestricted = set()
        for table in relations:
            grant: tuple[str, ...] | Literal["*"] = ALL
            keyed: str | None = None  # the columns key that names this relation
            for written, cols in role.columns.items():
                if schema.table(written) is not table:
                    continue
                if keyed is not None:  # two grants of one relation: neither may win silently
                    raise error(
                        ("columns", written),
                        None,
                        f"columns.{keyed} and columns.{written} both name relation "
                        f"{table.name!r}; give its columns once",
                    )
                grant, keyed = cols, written
            if grant == ALL:
                columns[table.name] = table.column_names
                unrestricted.add(table.name)
            else:
                keep = set()
                for i, col in enumerate(grant):
                    found = schema.column(table, col)
                    where = ("columns", _written_key(role, table.name, schema), i)
                    if found is None:
                        raise error(where, col, f"relation {table.name!r} has no column {col!r}")
                    if found.name in keep:
                        raise error(where, col, f"{col!r} names column {found.name!r} again")
                    keep.add(found.name)
                columns[table.name] = tuple(c for c in table.column_names if c in keep)
        for written in role.columns:
            if schema.table(written) is None:
                raise error(
                    ("columns", written), None, f"no relation {written!r} in {schema.label}"
                )
        relation_keys = {ascii_lower(t.name): t.name for t in schema.tables}
        ctes = role.cte_names
        if not role.cte_names_given:
            ctes = tuple(_free_cte_name(c, relation_keys) for c in ctes)
        dialect = get_dialect(schema.dialect)
        seen_ctes: dict[str, str] = {}
        for i, cte in enumerate(ctes):
            clash = relation_keys.get(ascii_lower(cte))
            if clash is not None:
                raise error(
                    ("cte_names", i),
                    cte,
                    f"CTE name {cte!r} is the name of relation {clash!r}: a CTE_NAME word "
                    "stands in table positions without its WITH",
                )
            system = dialect.catalog_prefix(cte)
            if system is not None:
                raise error(
                    ("cte_names", i),
                    cte,
                    f"CTE name {cte!r} starts with {system!r}, as the {dialect.name} "
                    "catalog's own relations do: a CTE_NAME word stands in table positions "
                    "without its WITH",
                )
            key = name_key(cte, dialect.identifier_case)
            if key in seen_ctes:
                raise error(("cte_names", i), cte, f"{cte!r} is {seen_ctes[key]!r} again")
            seen_ctes[key] = cte
            try:
                spellings(cte, dialect, "CTE_NAME")
            except LexiconError as e:
                raise error(("cte_names", i), cte, f"CTE name {cte!r}: {e.reason}") from None
        self._write_effects(role, schema, columns, error)
        functions = self._functions(role, schema, error)
        self._routines(role, schema, functions, error)
        return RoleGrants(
            role.name,
            role.verbs,
            role.banned_clauses,
            MappingProxyType(columns),
            frozenset(unrestricted),
            ctes,
            schema.fingerprint,
            functions,
        )

    @staticmethod
    def _write_effects(
        role: Role,
        schema: SchemaSnapshot,
        columns: Mapping[str, tuple[str, ...]],
        error: Callable[..., PolicyFileError],
    ) -> None:
        """The role's writes stay inside its grants (:mod:`grid_sql.write_effects`),
        and every trigger it names is one of the schema's."""
        triggers: set[tuple[str, str]] | None = None
        if role.triggers != ALL:
            triggers = set()
            case = schema.identifier_case
            for i, name in enumerate(role.triggers):
                key = name_key(name, case)
                found = {
                    (t.name, g.name)
                    for t in schema.tables
                    for g in t.triggers
                    if key in (name_key(g.name, case), name_key(f"{t.name}.{g.name}", case))
                }
                if not found:
                    raise error(("triggers", i), name, f"no trigger {name!r} in {schema.label}")
                if len({t for t, _ in found}) > 1:
                    tables = ", ".join(sorted(f"{t}.{g}" for t, g in found))
                    raise error(
                        ("triggers", i),
                        name,
                        f"{name!r} names a trigger of more than one relation ({tables}); "
                        "write the one meant",
                    )
                triggers |= found
        escape = first_escape(schema, role.verbs, columns, triggers)
        if escape is not None:
            raise error(("verbs",), None, escape)

    @staticmethod
    def _routines(
        role: Role,
        schema: SchemaSnapshot,
        functions: tuple[str, ...] | None,
        error: Callable[..., PolicyFileError],
    ) -> None:
        """The role names every user-defined routine its statements may run
        (``SchemaSnapshot.routines``), and each name it gives is one of them.

        A function named like a function of the dialect that the role is not
        granted (``functions``: None for every one) is out of the role's reach:
        its statements cannot write the call. Every other routine is in reach
        (an operator, a cast, a type, an operator family, a macro: DuckDB binds
        operators and syntax such as EXTRACT to functions by name)."""
        if role.routines == ALL:
            return
        if schema.routines is None:
            raise error(
                ("routines",),
                None,
                f"{schema.label} does not say which user-defined routines (functions, "
                "operators, casts, types, operator families, macros) its database has, "
                "which a statement may run by the names it writes: snapshot the database "
                "again",
            )
        routines = schema.routines
        case = schema.identifier_case
        named: set[Routine] = set()
        for i, entry in enumerate(role.routines):
            key = name_key(entry, case)
            extension = entry.removeprefix(_EXTENSION) if entry.startswith(_EXTENSION) else None
            found = {
                r
                for r in routines
                if key == name_key(r.name, case)
                or (r.word and key == name_key(r.word, case))
                or (extension and r.extension == extension)
            }
            if not found:
                raise error(
                    ("routines", i), entry, f"no user-defined routine {entry!r} in {schema.label}"
                )
            named |= found
        not_granted = set()
        if functions is not None:
            not_granted = set(get_dialect(schema.dialect).functions) - set(functions)
        missing = [
            r
            for r in routines
            if r not in named and not (r.kind == "function" and r.word in not_granted)
        ]
        if missing:
            shown = ", ".join(
                f"{r.kind} {r.name}" + (f" (extension {r.extension})" if r.extension else "")
                for r in missing[:_SHOWN_ROUTINES]
            )
            more = len(missing) - _SHOWN_ROUTINES
            raise error(
                ("routines",),
                None,
                f"{schema.label} has {len(missing)} user-defined routine"
                f"{'' if len(missing) == 1 else 's'} the role's statements may run "
                f"through the names they write, and the role does not name "
                f"{'it' if len(missing) == 1 else 'them'}: {shown}"
                f"{f' and {more} more' if more > 0 else ''}. Name each in routines "
                '(by its full name, its word, or "extension NAME" for all of an '
                "extension's) once you know what it does, or write "
                'routines = "*"; a function is out of reach where the role\'s functions '
                "leave its name out",
            )

    @staticmethod
    def _functions(
        role: Role, schema: SchemaSnapshot, error: Callable[..., PolicyFileError]
    ) -> tuple[str, ...] | None:
        """The role's functions in the schema's dialect (None: every one of them)."""
        dialect = get_dialect(schema.dialect)
        if role.functions == ALL:
            return None
        if role.functions is None:
            granted = set(dialect.default_functions)
        else:
            known = {ascii_lower(f): f for f in dialect.functions}
            granted = set()
            for i, name in enumerate(role.functions):
                found = known.get(ascii_lower(name))
                if found is None:
                    raise error(
                        ("functions", i),
                        name,
                        f"the {dialect.name} dialect has no function {name!r} "
                        f"(grid_sql.dialects.{dialect.name}.FUNCTIONS lists them)",
                    )
                granted.add(found)
        if granted >= set(dialect.functions):
            return None
        return tuple(f for f in dialect.functions if f in granted)


def _free_cte_name(name: str, relations: Mapping[str, str]) -> str:
    """``name``, or the first of ``name1``, ``name2``, ... that spells no relation."""
    n, out = 0, name
    while ascii_lower(out) in relations:
        n += 1
        out = f"{name}{n}"
    return out


def _written_key(role: Role, table: str, schema: SchemaSnapshot) -> str:
    resolved = schema.table(table)
    return next(w for w in role.columns if schema.table(w) is resolved)


def example_policy(schema: SchemaSnapshot | None = None) -> PolicyBundle:
    """The example policy shipped with grid-sql (roles analyst, clerk, admin, intern)."""
    text = resources.files("grid_sql.examples").joinpath(EXAMPLE).read_text(encoding="utf-8")
    return PolicyBundle.loads(text, f"grid_sql/examples/{EXAMPLE}", schema)


# ---------------------------------------------------------------- reading the TOML data


class _Reader:
    """Turns tomllib's dict into a bundle, raising located errors."""

    def __init__(self, path: str, locator: _Locator) -> None:
        self.path = path
        self.lines = locator

    def fail(
        self,
        kind: type[PolicyFileError],
        where: tuple[str | int, ...],
        reason: str,
        value: str | None = None,
    ) -> PolicyFileError:
        return kind(self.path, self.lines.line(where, value), _field_name(where), reason)

    def keys(
        self, data: Mapping[str, Any], where: tuple[str | int, ...], known: Mapping[str, str]
    ) -> None:
        for key in data:
            if key not in known:
                raise self.fail(
                    UnknownKeyError,
                    (*where, key),
                    f"unknown key {key!r} (known: {', '.join(known)})",
                )

    def typed(
        self, value: Any, where: tuple[str | int, ...], kind: type | tuple[type, ...], name: str
    ) -> Any:
        # bool is an int subclass: never accept it for a number
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(PolicyTypeError, where, f"expected {name}, got {_toml_type(value)}")
        return value

    def strings(self, value: Any, where: tuple[str | int, ...]) -> list[str]:
        items = self.typed(value, where, list, "an array of strings")
        seen: set[str] = set()
        for i, item in enumerate(items):
            self.typed(item, (*where, i), str, "a string")
            if not item:
                raise self.fail(PolicyValueError, (*where, i), "empty name")
            if item in seen:
                raise self.fail(PolicyValueError, (*where, i), f"{item!r} is listed twice", item)
            seen.add(item)
        return list(items)

    def strings_or_all(self, value: Any, where: tuple[str | int, ...]) -> list[str] | Literal["*"]:
        """An array of names, or ``"*"`` for all of them."""
        if value == ALL:
            return ALL
        if isinstance(value, str):
            raise self.fail(PolicyValueError, where, f"expected an array or '*', got {value!r}")
        return self.strings(value, where)

    def bundle(self, data: dict[str, Any], source: str) -> PolicyBundle:
        self.keys(data, (), _TOP_KEYS)
        if "version" not in data:
            raise self.fail(MissingKeyError, (), f"missing key 'version' (= {FORMAT_VERSION})")
        version = self.typed(data["version"], ("version",), int, "an integer")
        if version != FORMAT_VERSION:
            raise self.fail(
                PolicyValueError,
                ("version",),
                f"unsupported version {version} (this is {FORMAT_VERSION})",
            )
        description = self.typed(data.get("description", ""), ("description",), str, "a string")
        if "roles" not in data:
            raise self.fail(MissingKeyError, (), "missing table 'roles'")
        raw_roles = self.typed(data["roles"], ("roles",), dict, "a table of roles")
        if not raw_roles:
            raise self.fail(PolicyValueError, ("roles",), "no role is defined")
        limits = self.limits(data.get("limits", {}), ("limits",), DEFAULT_LIMITS)
        roles = {name: self.role(name, raw, limits) for name, raw in raw_roles.items()}
        return PolicyBundle(MappingProxyType(roles), description, self.path, source, limits)

    def limits(self, raw: Any, where: tuple[str | int, ...], base: Limits) -> Limits:
        """A ``limits`` table over ``base``: each key one limit, each value checked."""
        data = self.typed(raw, where, dict, "a table of limits")
        self.keys(data, where, _LIMIT_KEYS)
        for key, value in data.items():
            if key == "wall_time":
                self.typed(value, (*where, key), (int, float), "a number of seconds")
            else:
                self.typed(value, (*where, key), int, "an integer")
            try:
                check_limit(key, value)
            except ValueError as e:
                raise self.fail(PolicyValueError, (*where, key), f"{key} {e}") from None
        return base.replace(**data)

    def role(self, name: str, raw: Any, limits: Limits = DEFAULT_LIMITS) -> Role:
        where: tuple[str | int, ...] = ("roles", name)
        if not _ROLE_NAME.fullmatch(name):
            raise self.fail(
                PolicyValueError, where, f"role name {name!r} is not [A-Za-z_][A-Za-z0-9_-]*"
            )
        data = self.typed(raw, where, dict, "a table")
        self.keys(data, where, _ROLE_KEYS)
        for key in _REQUIRED_ROLE_KEYS:
            if key not in data:
                raise self.fail(MissingKeyError, where, f"missing key {key!r}")
        verbs = set()
        for i, verb in enumerate(self.strings(data["verbs"], (*where, "verbs"))):
            # ASCII case folding only: Unicode's makes "ſelect" SELECT and "ınsert" INSERT
            upper = verb.translate(_ASCII_UPPER)
            if upper not in VERBS:
                raise self.fail(
                    PolicyValueError,
                    (*where, "verbs", i),
                    f"unknown verb {verb!r} (known: {', '.join(VERBS)})",
                    verb,
                )
            if upper in verbs:
                raise self.fail(
                    PolicyValueError, (*where, "verbs", i), f"{verb!r} is listed twice", verb
                )
            verbs.add(upper)
        if not verbs:
            raise self.fail(
                PolicyValueError,
                (*where, "verbs"),
                f"no verb is granted: list at least one of {', '.join(VERBS)}",
            )
        tables: tuple[str, ...] | Literal["*"]
        if data["tables"] == ALL:
            tables = ALL
        elif isinstance(data["tables"], str):
            raise self.fail(
                PolicyValueError,
                (*where, "tables"),
                f"expected an array or '*', got {data['tables']!r}",
            )
        else:
            tables = tuple(self.strings(data["tables"], (*where, "tables")))
            if not tables:
                raise self.fail(
                    PolicyValueError,
                    (*where, "tables"),
                    "no relation is granted: list at least one, or '*' for every relation",
                )
        banned = set()
        for i, clause in enumerate(
            self.strings(data.get("banned_clauses", []), (*where, "banned_clauses"))
        ):
            canonical = CLAUSE_ALIASES.get(clause, clause)
            if canonical not in CLAUSES:
                raise self.fail(
                    PolicyValueError,
                    (*where, "banned_clauses", i),
                    f"unknown clause {clause!r} (known: {', '.join(CLAUSES)})",
                    clause,
                )
            banned.add(canonical)
        columns: dict[str, tuple[str, ...] | Literal["*"]] = {}
        raw_columns = self.typed(data.get("columns", {}), (*where, "columns"), dict, "a table")
        for table, cols in raw_columns.items():
            at = (*where, "columns", table)
            if tables != ALL and table not in tables:
                raise self.fail(
                    PolicyValueError, at, f"table {table!r} is not in this role's tables"
                )
            if cols == ALL:
                columns[table] = ALL
            elif isinstance(cols, str):
                raise self.fail(PolicyValueError, at, f"expected an array or '*', got {cols!r}")
            else:
                columns[table] = tuple(self.strings(cols, at))
        ctes = self.strings(data.get("cte_names", list(DEFAULT_CTE_NAMES)), (*where, "cte_names"))
        functions: tuple[str, ...] | Literal["*"] | None = None
        listed = self.strings_or_all(data.get("functions", []), (*where, "functions"))
        if listed == ALL:
            functions = ALL
        elif "functions" in data:
            seen: dict[str, int] = {}
            for i, function in enumerate(listed):
                if ascii_lower(function) in seen:
                    raise self.fail(
                        PolicyValueError,
                        (*where, "functions", i),
                        f"{function!r} is listed twice (function names ignore letter case)",
                        function,
                    )
                seen[ascii_lower(function)] = i
            functions = tuple(ascii_lower(f) for f in listed)
        description = self.typed(
            data.get("description", ""), (*where, "description"), str, "a string"
        )
        named = self.strings_or_all(data.get("triggers", []), (*where, "triggers"))
        triggers: tuple[str, ...] | Literal["*"] = ALL if named == ALL else tuple(named)
        named = self.strings_or_all(data.get("routines", []), (*where, "routines"))
        routines: tuple[str, ...] | Literal["*"] = ALL if named == ALL else tuple(named)
        generation = self.typed(
            data.get("generation", "narrow"), (*where, "generation"), str, "a string"
        )
        if generation not in PROFILES:
            raise self.fail(
                PolicyValueError,
                (*where, "generation"),
                f"unknown generation profile {generation!r} (known: {', '.join(PROFILES)})",
                generation,
            )
        return Role(
            name,
            frozenset(verbs),
            tables,
            frozenset(banned),
            MappingProxyType(columns),
            tuple(ctes),
            description,
            self.limits(data.get("limits", {}), (*where, "limits"), limits),
            functions,
            "cte_names" in data,
            cast(Profile, generation),
            triggers,
            routines,
        )


def _toml_type(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    names.update({list: "an array", dict: "a table"})
    return names.get(type(value), type(value).__name__)


def _field_name(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = (
                part
                if re.fullmatch(r"[A-Za-z0-9_-]+", part)
                else '"' + part.replace('"', '\\"') + '"'
            )
            out += ("." if out else "") + key
    return out


# ---------------------------------------------------------------- the line locator


class _Locator:
    """Maps dotted key paths to the 1-based line that defines them.

    Reads the source line by line: ``[table]`` headers set the current table,
    ``key = value`` lines define ``table + key``. Key text is decoded by tomllib
    itself (so quoted and dotted keys are read exactly as TOML reads them).
    """

    def __init__(self, text: str) -> None:
        self.text_lines = text.splitlines()
        self.where: dict[tuple[str, ...], int] = {}
        self.headers: list[tuple[int, tuple[str, ...]]] = []
        table: tuple[str, ...] = ()
        for number, raw in enumerate(self.text_lines, start=1):
            line = raw.strip()
            if line.startswith("["):
                header = _header_path(line)
                if header is not None:
                    table = header
                    self.where.setdefault(table, number)
                    self.headers.append((number, table))
                continue
            key = _key_path(line)
            if key is not None:  # a dotted key defines its prefixes too
                for n in range(1, len(key) + 1):
                    self.where.setdefault((*table, *key[:n]), number)

    def line(self, path: Sequence[str | int], value: str | None = None) -> int | None:
        """The line of the longest located prefix of ``path``.

        With ``value`` (an array element's string), the first line at or after
        the key's line that holds it as a TOML string.
        """
        keys = tuple(p for p in path if isinstance(p, str))
        for n in range(len(keys), -1, -1):
            found = self.where.get(keys[:n])
            if found is not None:
                break
        else:
            return None
        if value is not None:
            needles = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"', f"'{value}'")
            for number in range(found, min(found + 200, len(self.text_lines)) + 1):
                text = self.text_lines[number - 1]
                if number > found and (_key_path(text.strip()) or text.strip().startswith("[")):
                    break
                if any(n in _without_comment(text) for n in needles):
                    return number
        return found

    def syntax_error_line(self, message: str) -> int | None:
        m = re.search(r"\(at line (\d+), column \d+\)", message)
        if m:
            return int(m.group(1))
        if "at end of document" in message:
            return max(len(self.text_lines), 1)
        return None

    def field_at(self, line: int | None) -> str:
        """The dotted key a line belongs to (for syntax errors)."""
        if line is None:
            return ""
        table: tuple[str, ...] = ()
        for number, header in self.headers:
            if number <= line:
                table = header
        text = self.text_lines[line - 1].strip() if 0 < line <= len(self.text_lines) else ""
        key = _key_path(text) or ()
        return _field_name((*table, *key))


def _without_comment(line: str) -> str:
    """A TOML line up to its comment (a ``#`` outside a string), for finding a value on
    it: a name quoted in a comment is not the value."""
    quote, i = "", 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1  # the escaped character
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            return line[:i]
        i += 1
    return line


def _header_path(line: str) -> tuple[str, ...] | None:
    m = re.match(r"^\[\[?(.*?)\]\]?\s*(#.*)?$", line)
    if not m:
        return None
    try:
        data: Any = tomllib.loads(f"[{m.group(1)}]")
    except tomllib.TOMLDecodeError:
        return None
    return _single_path(data)


def _key_path(line: str) -> tuple[str, ...] | None:
    if not line or line.startswith("#"):
        return None
    quote = ""
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "=":
            try:
                data: Any = tomllib.loads(f"{line[:i]} = 0")
            except tomllib.TOMLDecodeError:
                return None
            return _single_path(data)
    return None


def _single_path(data: Any) -> tuple[str, ...]:
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        key = next(iter(data))
        path.append(key)
        data = data[key]
    return tuple(path)
