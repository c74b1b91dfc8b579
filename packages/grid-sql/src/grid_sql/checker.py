"""The SemanticChecker: column-level policy, verified after the parse.

Purpose. The mask enforces verb- and table-level policy; per-table column policy
is not enforceable by any left-to-right CFG mask, because the SELECT list comes
before FROM (docs/guarantees/index.md, theorem 5, `column_policy_not_maskable`).
It is checked here, on the parse of a completed statement, and the verdict feeds
the repair loop (`grid_sql.repair`).

Stages, each in its own section below:

1. **Parse** (`parse_statement`). The statement is lexed with GRID's own
   semantics (DESIGN.md section 3): grid-core's union DFA and maximal munch, the
   contextual pick by priority among the terminals the LALR(1) parser can shift,
   in free mode (no lexicon: every identifier category unrestricted). The picked
   tokens, with byte offsets, are fed to lark's interactive LALR parser over the
   same grammar text to build the tree. No lark lexer is involved, so the tree
   is the parse of exactly the token sequence GRID's guide would have produced.
   A missing closing ``;`` is supplied (zero width, at the end).
2. **Analysis** (`SemanticChecker.analyze`): an alias-aware walk that resolves
   every name as SQLite does and records what the statement touches: table uses
   (`TableUse`), base-table column accesses (`ColumnAccess`) and name-resolution
   violations (unknown table, unknown column, unknown qualifier, ambiguous
   column), then the statement rules a database enforces at prepare time: the
   column count of a subquery or compound SELECT (this walk) and the rules for
   calls (`grid_sql.call_rules`). It does not look at any role.
3. **Policy** (`SemanticChecker.check`): the accesses and table uses are held
   against one role's grants: `table_not_granted`, `column_not_granted`.

Name resolution follows SQLite 3.40 (resolve.c `lookupName`, select.c):

- Identifiers compare by ASCII case folding after unquoting (``"..."``,
  backquotes, ``[...]``). A CTE name shadows a schema table of the same name.
- A *scope* is one SELECT core: its FROM sources, the result aliases and its
  parent scope. An unqualified name is looked up in the innermost scope, then
  outward (correlated references). At one level: the FROM sources (two matches
  are ambiguous; the right-hand columns of USING and NATURAL joins are skipped),
  then the result aliases where SQLite allows them (WHERE, GROUP BY, HAVING, ON,
  ORDER BY), then the next scope out. A bare identifier as a whole ORDER BY term
  matches a result alias first.
- A qualified name ``q.c`` matches the source whose alias (or, unaliased, table
  or CTE name) is ``q``; ``q.*`` only in the current scope.
- A double-quoted name that resolves nowhere is a string literal (SQLite's
  fallback, which Spider's gold relies on); one that resolves is a column read
  and is checked. In free mode GRID lexes ``"x"`` in an expression as a column.
- Subqueries in FROM see the scopes outside the current SELECT, not its FROM.
  CTE bodies see no scope outside them (SQLite reads a body where the CTE is
  used): a name their own tables lack is refused, a double-quoted one too.
- ORDER BY of a compound SELECT: a bare name that is an output name of one of
  its SELECTs is an output reference; any other term is resolved in the scope of
  the first SELECT in which it resolves cleanly.
- ``rowid``, ``oid`` and ``_rowid_`` resolve to a base table's row id when no
  column takes the name, before result aliases, and only where one base table is
  in the scope (several: refused). The row id may alias a column (INTEGER
  PRIMARY KEY), so it is an access: to that column when `SemanticChecker` knows
  it, else to the pseudo-column ``rowid``, which a restricted grant must list to
  allow. One read in a subquery is charged to the enclosing scopes' tables too
  (a WITHOUT ROWID table passes the name outward).
- SQLite's ``TRUE`` and ``FALSE`` read a column so named when one is in scope.

What counts as a column access (checked against the grants): a resolved
reference to a base-table column anywhere in the statement; every column that
``*`` or ``q.*`` expands to; the columns a USING list or a NATURAL join compares,
on both sides; every column of the table in ``x IN table``; the columns an
INSERT or UPDATE writes (an INSERT without a column list writes all of them).
Columns of CTEs and FROM-subqueries are not base columns: what their bodies read
is checked where it is read. One grant set serves reads and writes.

Rules of the dialect grammar the walk relies on (the contract with
``dialects/*.lark``; anything else is walked generically, so a new expression
rule needs no change here): ``start``, ``statement``, ``select_stmt``,
``with_clause``, ``common_table``, ``alias_list``, ``compound_select``,
``select_core``, ``values_clause``, ``row_value``, ``result_columns``,
``result_column``, ``from_clause``, ``where_clause``, ``group_by_clause``,
``having_clause``, ``window_clause``, ``order_by_clause``, ``ordering_term``,
``limit_clause``, ``join_source``, ``table_or_subquery``, ``table_alias``,
``join_operator``, ``join_constraint``, ``column_list``, ``insert_stmt``,
``update_stmt``, ``assignment``, ``delete_stmt``, ``column_ref``, ``literal``,
``in_target`` (`CONTRACT_RULES`); terminals ``TABLE_NAME``, ``CTE_NAME``,
``COLUMN_NAME``, ``ALIAS_NAME``, ``QUALIFIER``, ``STAR``, ``AS``, ``DQ_STRING``,
``NATURAL``, ``RIGHT``, ``FULL``, ``USING`` and ``SEMICOLON``
(`CONTRACT_TERMINALS`). `contract_gaps` lists those a dialect lacks.

Spans are byte offsets ``(start, end)`` into the UTF-8 encoding of the statement.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from grid_core.dfa import build_union_dfa
from grid_core.errors import GridError, PolicyError
from grid_core.grammar import load_grammar
from grid_core.lexer import START, Scanner
from grid_core.lexicon import build_lexicon
from grid_core.parser import Parser
from grid_sql.call_rules import (
    Placement,
    aggregate_placements,
    call_violations,
    can_aggregate,
    unevaluated_nodes,
)
from grid_sql.dialect import Dialect, IdentifierCase, unquote
from grid_sql.dialects import get_dialect
from grid_sql.row_rules import (
    compared_operands,
    resolved_operands,
    row_values,
    row_violations,
    row_width,
)
from grid_sql.schema import SchemaSnapshot
from grid_sql.violations import AccessKind, Span, Violation, ViolationKind

Tree = Any  # lark.Tree (lark is untyped)
Token = Any  # lark.Token

Schema = Mapping[str, Sequence[str]]
"""Table name -> column names."""
Grants = Mapping[str, Mapping[str, Sequence[str] | None]]
"""Role -> table -> granted column names, or None for every column. A table the
role's mapping does not name is not granted."""

# The grammar contract (module header): rule and terminal names the walk relies on.
CONTRACT_RULES = (
    "start", "statement", "select_stmt", "with_clause", "common_table", "alias_list",
    "compound_select", "compound_operator", "select_core", "values_clause", "row_value",
    "result_columns", "result_column", "from_clause", "where_clause", "group_by_clause",
    "having_clause", "window_clause", "order_by_clause", "ordering_term", "limit_clause",
    "join_source", "table_or_subquery", "table_alias", "join_operator", "join_constraint",
    "column_list", "insert_stmt", "insert_source", "update_stmt", "assignment",
    "delete_stmt", "column_ref", "literal", "in_target",
)  # fmt: skip
CONTRACT_TERMINALS = (
    "TABLE_NAME", "CTE_NAME", "COLUMN_NAME", "ALIAS_NAME", "QUALIFIER", "STAR", "AS",
    "NATURAL", "RIGHT", "FULL", "USING", "SEMICOLON",
)  # fmt: skip
# Required besides of a dialect whose double-quoted words fall back to strings.
DQ_STRING = "DQ_STRING"


# ================================================================ errors


class CheckerError(GridError):
    """The checker was given a malformed schema or statement."""


class GrammarContractError(CheckerError):
    """The dialect's grammar breaks the checker's contract: it lacks rules or
    terminals the walk relies on (`contract_gaps`), or a parse tree has a shape
    the walk does not know. ``dialect`` names it; ``problem`` says what is wrong."""

    def __init__(self, dialect: str, problem: str) -> None:
        self.dialect = dialect
        self.problem = problem
        super().__init__(f"dialect {dialect!r} breaks the checker's grammar contract: {problem}")


class StatementTooDeepError(CheckerError):
    """The statement nests deeper than the checker's walk can follow (nested SELECTs
    recurse; Python's recursion limit bounds them). ``length`` is the statement's size
    in bytes. The checker cannot vouch for what it cannot read, so this is a refusal."""

    def __init__(self, length: int) -> None:
        self.length = length
        super().__init__(
            f"the statement ({length} bytes) nests too deeply for the checker to read "
            "(nested SELECTs beyond Python's recursion limit)"
        )


class StatementParseError(CheckerError):
    """The statement is not in the dialect's language L (free mode).

    ``offset`` is the byte offset of the lexeme that failed (or the end of the
    statement), ``lexeme`` its bytes and ``expected`` the terminals the parser
    could take there.
    """

    def __init__(self, offset: int, lexeme: bytes, expected: tuple[str, ...]) -> None:
        self.offset = offset
        self.lexeme = lexeme
        self.expected = expected
        shown = ", ".join(expected[:12]) + (", ..." if len(expected) > 12 else "")
        what = f"lexeme {lexeme.decode('utf-8', 'replace')!r}" if lexeme else "end of input"
        self.detail = f"{what}; expected: {shown}"
        super().__init__(f"statement does not parse at byte {offset} ({self.detail})")


class SchemaError(CheckerError):
    """Two tables, or two columns of one table, have the same name up to case; or
    (``missing``) the row-id aliases name a table or column the schema lacks."""

    def __init__(self, table: str, column: str | None = None, *, missing: bool = False) -> None:
        self.table = table
        self.column = column
        self.missing = missing
        what = f"column {column!r} of table {table!r}" if column else f"table {table!r}"
        if missing:
            super().__init__(f"rowid_aliases name {what}, which the schema lacks")
        else:
            super().__init__(f"schema names {what} twice (names compare case-insensitively)")


class GrantError(PolicyError):
    """Grants name a role, table or column that does not exist."""

    def __init__(self, role: str, table: str | None = None, column: str | None = None) -> None:
        self.role = role
        self.table = table
        self.column = column
        if table is None:
            message = f"no grants for role {role!r}"
        elif column is None:
            message = f"grants of role {role!r} name table {table!r}, which the schema lacks"
        else:
            message = (
                f"grants of role {role!r} name column {column!r} of table {table!r}, "
                "which the schema lacks"
            )
        super().__init__(message)


# ================================================================ results


@dataclass(frozen=True)
class TableUse:
    """A base table named in a table position (FROM, JOIN, IN, INSERT/UPDATE/DELETE)."""

    table: str
    span: Span


@dataclass(frozen=True)
class ColumnAccess:
    """A base-table column the statement reads or writes, how, and where."""

    table: str
    column: str
    span: Span
    via: AccessKind


@dataclass(frozen=True)
class Analysis:
    """What a statement touches, independent of any role."""

    tables: tuple[TableUse, ...]
    accesses: tuple[ColumnAccess, ...]
    violations: tuple[Violation, ...]
    """Name-resolution and statement-rule violations; no policy verdict."""


# ================================================================ names

_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """ASCII case folding, as SQLite compares identifiers."""
    return name.translate(_ASCII_FOLD)


def _text(token: Token) -> str:
    """A token's text: lark holds the latin-1 view of its bytes."""
    return str(token.value).encode("latin-1").decode("utf-8", "replace")


@dataclass(frozen=True)
class _Names:
    """A dialect's name resolution (`Dialect.identifier_case`, `rowid_names`,
    `dq_string_fallback`): the key under which a lexeme or a catalog name compares.

    Under "insensitive" (SQLite) every name folds; under "fold-lower" (PostgreSQL)
    a bare lexeme folds to lower case and a quoted one keeps its case, and catalog
    names are exact; under "sensitive" nothing folds."""

    case: IdentifierCase
    rowid: frozenset[str]
    dq_fallback: bool
    whole_row: bool
    boolean: bool

    @classmethod
    def of(cls, dialect: Dialect) -> _Names:
        rowid = frozenset(fold(w) for w in dialect.rowid_names)
        return cls(
            dialect.identifier_case,
            rowid,
            dialect.dq_string_fallback,
            dialect.whole_row_references,
            dialect.boolean_names,
        )

    def lexeme(self, spelling: str) -> str:
        """The key of an identifier lexeme (quoted or bare)."""
        word = unquote(spelling)
        if self.case == "insensitive" or (self.case == "fold-lower" and word == spelling):
            return fold(word)
        return word

    def catalog(self, name: str) -> str:
        """The key of a catalog name (a table or column as the schema spells it)."""
        return fold(name) if self.case == "insensitive" else name

    def token(self, token: Token) -> str:
        return self.lexeme(_text(token))


def _name(token: Token) -> str:
    return unquote(_text(token))


# ================================================================ stage 1: parse


@dataclass(frozen=True, eq=False)
class _FrontEnd:
    scanner: Scanner
    parser: Parser
    lark: Any
    names: tuple[str, ...]  # grid-core terminal id -> lark terminal name
    semicolon: int  # terminal id of ";" or -1


@functools.lru_cache(maxsize=8)
def _front_end(dialect: Dialect) -> _FrontEnd:
    import lark
    from lark.lexer import Lexer

    class _Fed(Lexer):  # tokens are fed to the interactive parser; lark never lexes
        def __init__(self, lexer_conf: Any) -> None:
            pass

        def lex(self, *args: Any) -> Any:
            raise NotImplementedError("the SemanticChecker feeds GRID-lexed tokens")

    text = dialect.grammar_text
    grammar = load_grammar(text, dialect.name)
    dfa = build_union_dfa([(t.name, t.pattern) for t in grammar.terminals])
    scanner = Scanner(grammar, dfa, build_lexicon(grammar, dfa, {}))
    parser = Parser(grammar.lalr())
    every = lark.Lark(text, parser=None, lexer="basic")
    names = tuple(str(t.name) for t in every.terminals)
    assert len(names) == grammar.n_terminals
    tree_parser = lark.Lark(text, parser="lalr", lexer=_Fed, propagate_positions=True)
    semicolon = names.index("SEMICOLON") if "SEMICOLON" in names else -1
    return _FrontEnd(scanner, parser, tree_parser, names, semicolon)


def _token(name: str, data: bytes, start: int, end: int) -> Token:
    from lark import Token as LarkToken

    return LarkToken(name, data[start:end].decode("latin-1"), start, 1, start + 1, 1, end + 1, end)


def _expected(front: _FrontEnd, allowed: int) -> tuple[str, ...]:
    names = [front.names[t] for t in range(len(front.names)) if allowed >> t & 1]
    if allowed >> len(front.names) & 1:
        names.append("$END")
    return tuple(sorted(names))


def parse_statement(sql: str | bytes, dialect: str | Dialect = "sqlite") -> Tree:
    """The lark parse tree of one statement, lexed with GRID's semantics (free mode).

    Token positions (``start_pos``/``end_pos``, and ``meta`` of every subtree) are
    byte offsets. Raises `StatementParseError` when the statement is not in L.
    """
    front = _front_end(get_dialect(dialect) if isinstance(dialect, str) else dialect)
    data = sql.encode("utf-8") if isinstance(sql, str) else sql
    scanner, parser = front.scanner, front.parser
    node = parser.root
    tokens: list[Token] = []
    start = i = 0
    scan = START
    while True:
        if i < len(data):
            nxt = scanner.step(scan, i + 1 - start, data[i])
            if nxt is not None:
                scan, i = nxt, i + 1
                continue
        elif i == start:
            break
        # emission: the longest accepted prefix of the remainder, requeue the rest
        length, cands = scan[2], scan[3]
        allowed = parser.allowed(node)
        picked = scanner.pick(cands, allowed) if length else -1
        if picked < 0:
            end = start + max(length, 1)
            raise StatementParseError(start, data[start:end], _expected(front, allowed))
        if not scanner.ignored >> picked & 1:
            node = parser.shift(node, picked)
            tokens.append(_token(front.names[picked], data, start, start + length))
        start += length
        i, scan = start, START
    missing_semicolon = front.semicolon >= 0 and not parser.accepts(node)
    if missing_semicolon and parser.allowed(node) >> front.semicolon & 1:
        node = parser.shift(node, front.semicolon)
        tokens.append(_token("SEMICOLON", data, len(data), len(data)))
    if not parser.accepts(node):
        raise StatementParseError(len(data), b"", _expected(front, parser.allowed(node)))
    interactive = front.lark.parse_interactive("")
    for token in tokens:
        interactive.feed_token(token)
    return interactive.feed_eof(tokens[-1])


def contract_gaps(dialect: str | Dialect = "sqlite") -> tuple[str, ...]:
    """The contract's rule and terminal names that ``dialect``'s grammar lacks
    (`DQ_STRING` only where `Dialect.dq_string_fallback` is set)."""
    return _contract_gaps(get_dialect(dialect) if isinstance(dialect, str) else dialect)


@functools.cache
def _contract_gaps(value: Dialect) -> tuple[str, ...]:
    import lark

    every = lark.Lark(value.grammar_text, parser=None, lexer="basic")
    rules = {str(r.origin.name) for r in every.rules}
    terminals = {str(t.name) for t in every.terminals}
    needed = (*CONTRACT_TERMINALS, DQ_STRING) if value.dq_string_fallback else CONTRACT_TERMINALS
    return tuple(
        [r for r in CONTRACT_RULES if r not in rules] + [t for t in needed if t not in terminals]
    )


# ================================================================ catalog


@dataclass(frozen=True)
class _Table:
    key: str
    name: str
    columns: Mapping[str, str]  # key -> schema spelling, in schema order
    rowid: str | None = None  # key of the column the row id aliases, when known
    hidden: frozenset[str] = frozenset()  # keys read by name only: not in *, NATURAL, INSERT
    generated: frozenset[str] = frozenset()  # keys computed: not in INSERT's implicit list

    def implicit(self, generated: bool = False) -> list[str]:
        """The keys an INSERT without a column list writes, in order; ``generated``:
        the generated ones too (`Dialect.generated_take_default`: they take DEFAULT)."""
        return [
            k
            for k in self.columns
            if k not in self.hidden and (generated or k not in self.generated)
        ]


def _catalog(
    schema: Schema,
    rowid_aliases: Mapping[str, str],
    names: _Names,
    hidden: Mapping[str, Collection[str]],
    generated: Mapping[str, Collection[str]],
) -> dict[str, _Table]:
    aliases = {names.catalog(t): names.catalog(c) for t, c in rowid_aliases.items()}
    # table key -> (its name as given, column keys), as the catalog compares names
    flags: list[dict[str, tuple[str, frozenset[str]]]] = [{}, {}]
    for flagged, spelled in zip(flags, (hidden, generated), strict=True):
        for t, cs in spelled.items():
            if names.catalog(t) in flagged:  # two spellings of one table
                raise SchemaError(t)
            flagged[names.catalog(t)] = (t, frozenset(names.catalog(c) for c in cs))

    def keys(
        flagged: dict[str, tuple[str, frozenset[str]]], key: str, cols: Mapping[str, str]
    ) -> frozenset[str]:
        name, out = flagged.pop(key, ("", frozenset()))
        if not out <= cols.keys():
            raise SchemaError(name, next(iter(out - cols.keys())), missing=True)
        return out

    tables: dict[str, _Table] = {}
    for name, columns in schema.items():
        key = names.catalog(name)
        if key in tables:
            raise SchemaError(name)
        cols: dict[str, str] = {}
        for column in columns:
            if names.catalog(column) in cols:
                raise SchemaError(name, column)
            cols[names.catalog(column)] = column
        rowid = aliases.pop(key, None)
        if rowid is not None and rowid not in cols:
            raise SchemaError(name, rowid, missing=True)
        tables[key] = _Table(key, name, cols, rowid, *(keys(f, key, cols) for f in flags))
    if aliases:
        raise SchemaError(next(iter(aliases)), missing=True)
    for left in flags:  # hidden or generated columns of a table the schema does not have
        for given, _ in left.values():
            raise SchemaError(given, missing=True)
    return tables


_RoleGrants = dict[str, frozenset[str] | None]  # table key -> column keys (None: all)


def _role_grants(
    tables: Mapping[str, _Table], role: str, grants: Grants, names: _Names
) -> _RoleGrants:
    if role not in grants:
        raise GrantError(role)
    out: _RoleGrants = {}
    for table, columns in grants[role].items():
        entry = tables.get(names.catalog(table))
        if entry is None:
            raise GrantError(role, table)
        if columns is None:
            out[entry.key] = None
            continue
        for column in columns:
            key = names.catalog(column)
            if key not in entry.columns and fold(column) not in names.rowid:
                raise GrantError(role, table, column)
        out[entry.key] = frozenset(names.catalog(c) for c in columns)
    return out


def full_grants(schema: Schema) -> dict[str, Sequence[str] | None]:
    """One role's grants of every column of every table: ``{table: None, ...}``."""
    return dict.fromkeys(schema)


# ================================================================ stage 2: analysis


@dataclass(eq=False)
class _Source:
    """One FROM item of a scope: a base table, a CTE or a subquery."""

    name: str  # the key it is referred to by: alias, else table or CTE name
    label: str  # for messages: "employees AS e"
    columns: dict[str, str]  # key -> spelling
    table: _Table | None = None  # a base table
    hidden: set[str] = field(default_factory=set)  # USING/NATURAL right-hand columns
    opaque: bool = False  # columns unknown (unknown table, CTE cycle): takes any name
    # a base table renamed by a column list (``t AS q(a, b)``): each key the list
    # gives -> the table's columns it names (two where it repeats a later name)
    renamed: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def has(self, key: str, qualified: bool) -> bool:
        return self.opaque or (key in self.columns and (qualified or key not in self.hidden))

    def bases(self, key: str) -> tuple[str, ...]:
        """The base table's columns that ``key`` (a key of ``columns``) reads."""
        return self.renamed.get(key, (key,))

    def hides(self, key: str) -> bool:
        """``key`` is a base table's hidden column: read by name only."""
        return self.table is not None and any(b in self.table.hidden for b in self.bases(key))


@dataclass(eq=False)
class _Scope:
    parent: _Scope | None
    sources: list[_Source] = field(default_factory=list)
    aliases: set[str] = field(default_factory=set)
    aliases_visible: bool = False
    # the tree whose FROM the sources are (a select_core, an UPDATE or a DELETE)
    owner: Tree | None = None
    # where `Dialect.comma_binds_loosest`: the first source of the FROM item after
    # the last comma, the first a join condition sees
    group: int = 0
    # the first source after the last comma, in any dialect: where
    # `Dialect.using_left_spans_commas` is False, the first a USING or NATURAL
    # join's left side has
    after_comma: int = 0

    def alone(self) -> _Scope:
        """This scope without the enclosing ones (the same sources and aliases):
        what a clause that may not read outer queries resolves against."""
        return replace(self, parent=None)


@dataclass
class _Outputs:
    names: list[tuple[str, str]]  # (key, spelling) per result column
    opaque: bool = False

    def columns(self, suffix: str) -> dict[str, str]:
        """Distinct column names as the dialect derives them: a duplicate gets
        ``suffix`` and a count (`Dialect.duplicate_column_suffix`: SQLite ``a:1``,
        DuckDB ``a_1``; none: PostgreSQL keeps the name, and a duplicate adds no
        key, which the database refuses to name). SQLite's own rules
        (``sqlite3ColumnsFromExprList``), where the suffix is ``:``:
        a name ``true`` or ``false`` (any case) becomes ``column<i>`` (i from 1);
        a count replaces a ``:<digits>`` the name ends with (``a:1`` twice gives
        ``a:1, a:2``); and a fifth try takes a random count, a name the checker
        cannot know, so it is keyed as no column is named (a NUL-led key)."""
        out: dict[str, str] = {}
        for i, (key, spelling) in enumerate(self.names, 1):
            if suffix == ":" and key in ("true", "false"):
                key = spelling = f"column{i}"
            k, s, n = key, spelling, 0
            while k in out and suffix:
                n += 1
                if suffix != ":":
                    k, s = f"{key}{suffix}{n}", f"{spelling}{suffix}{n}"
                elif n > 4:
                    k, s = f"\0{i}", f"{_sqlite_stem(s)}:?"
                else:
                    k, s = f"{_sqlite_stem(k)}:{n}", f"{_sqlite_stem(s)}:{n}"
            out.setdefault(k, s)
        return out


def _sqlite_stem(name: str) -> str:
    """``name`` less a ``:<digits>`` it ends with (SQLite's duplicate names)."""
    j = len(name) - 1
    while j > 0 and "0" <= name[j] <= "9":
        j -= 1
    return name[:j] if j >= 0 and name[j] == ":" else name


@dataclass(eq=False)
class _Cte:
    name: str
    body: Tree
    env: _Env
    columns: dict[str, str] | None
    outer: _Scope | None  # the scope outside the statement that owns the WITH
    state: Literal["new", "walking", "done"] = "new"
    opaque: bool = False


@dataclass(eq=False)
class _Env:
    parent: _Env | None
    ctes: dict[str, _Cte] = field(default_factory=dict)

    def find(self, key: str) -> _Cte | None:
        env: _Env | None = self
        while env is not None:
            if key in env.ctes:
                return env.ctes[key]
            env = env.parent
        return None


def _trees(node: Tree) -> list[Tree]:
    return [c for c in node.children if not _is_token(c)]


def _call_name(call: Tree) -> str:
    """The function a call tree calls, lower case (its first lexeme, `name(`);
    empty if it has none."""
    head = _first_token(call)
    return _text(head).split("(")[0].strip().strip('"').lower() if head else ""


def _compound(select: Tree) -> bool:
    """``select`` (a select_stmt) is a compound at its top (UNION, ...): the only
    form in which a common table reads itself recursively."""
    top = _child(select, "compound_select") or select
    return any(not _is_token(c) and c.data == "compound_operator" for c in top.children)


def _sets_default(assignment: Tree) -> bool:
    """``c = DEFAULT`` (PostgreSQL), not ``c = expr``."""
    return any(t.type == "DEFAULT" for t in _tokens(assignment))


def _tokens(node: Tree) -> list[Token]:
    return [c for c in node.children if _is_token(c)]


def _dml_tokens(node: Tree) -> list[Token]:
    """The tokens of an UPDATE or DELETE with those of its target's rules
    (``delete_from_clause``, ``target_alias``) in place."""
    out: list[Token] = []
    for c in node.children:
        if _is_token(c):
            out.append(c)
        elif c.data in ("delete_from_clause", "target_alias"):
            out += _dml_tokens(c)
    return out


def _is_token(node: Any) -> bool:
    return not hasattr(node, "data")


def _innermost(tree: Tree) -> Tree:
    """The FROM term in the parentheses around ``tree``'s (``tree`` itself when its
    only child is no term in parentheses): ``((s AS x))`` gives ``s AS x``."""
    while (
        len(tree.children) == 1
        and not _is_token(tree.children[0])
        and tree.children[0].data == "table_or_subquery"
    ):
        tree = tree.children[0]
    return tree


def _parenthesized_table(tree: Tree) -> Token | None:
    """The table of a FROM term that is one table in parentheses (``(s AS x)``,
    ``((s))``), else None."""
    inner = _innermost(tree)
    names = [t for t in _tokens(inner) if t.type == "TABLE_NAME"] if inner is not tree else []
    return names[0] if names else None


def _parenthesized_subquery(tree: Tree) -> Tree | None:
    """The innermost term of a FROM term that is one subquery in parentheses
    (``((SELECT ...) AS s)``, ``((SELECT ...))``), else None."""
    inner = _innermost(tree)
    if inner is tree or not any(c.data == "select_stmt" for c in _trees(inner)):
        return None
    return inner


def _child(node: Tree, data: str) -> Tree | None:
    return next((c for c in _trees(node) if c.data == data), None)


def _span(node: Tree | Token) -> Span:
    if _is_token(node):
        return int(node.start_pos), int(node.end_pos)
    return int(node.meta.start_pos), int(node.meta.end_pos)


class _Walker:
    """One statement's name resolution: fills table uses, accesses, violations."""

    def __init__(
        self,
        tables: Mapping[str, _Table],
        data: bytes,
        names: _Names,
        dialect: Dialect,
        placements: Mapping[int, Placement] | None = None,
    ) -> None:
        self.names = names
        self.dialect = dialect
        # the aggregate calls' owners, when known (a second walk: `analyze`)
        self.placements = placements
        self.tables = tables
        self.data = data
        self.uses: list[TableUse] = []
        self.accesses: list[ColumnAccess] = []
        self.violations: list[Violation] = []
        # subquery (id of its select_stmt) -> the columns it must give (None: any)
        self.widths: dict[int, int | None] = {}
        # `(SELECT ...) IN (SELECT ...)`: the right subquery -> the left, whose width it
        # must have; and the widths of the subqueries walked so far (not opaque)
        self.matched: dict[int, int] = {}
        # a subquery that is a value of a compared row -> the width its place wants
        self.paired: dict[int, int | None] = {}
        self.gave: dict[int, int] = {}
        # ids of the nodes the database never evaluates (call_rules.unevaluated_nodes)
        self.unevaluated: set[int] = set()
        self.ctes: list[_Cte] = []  # every CTE of the statement
        # The ids of the subtrees SQLite never resolves, so their errors are not
        # reported (what they would read still is): the left of `x IN ()`, and
        # after `statement` the bodies of the CTEs the statement never names
        # (`WITH c AS (SELECT zz) SELECT 1` runs), which it then walks for reads.
        self.unresolved: set[int] = set()
        self.exists_bodies: set[int] = set()  # ids of EXISTS bodies (select_stmt)
        self.root: Tree | None = None  # the statement's tree, once `statement` starts
        # column_ref (id) -> the id of the tree whose FROM resolved it (_Scope.owner)
        self.refs: dict[int, int] = {}
        self.window_references: set[str] | None = None  # see _window_references
        # CTE bodies being walked: SQLite resolves a name a body's tables lack
        # where the CTE is used, so inside one no name falls back to a string
        self.in_cte = 0

    # -- recording ------------------------------------------------------------

    def _violation(
        self,
        kind: ViolationKind,
        span: Span,
        message: str,
        table: str | None = None,
        column: str | None = None,
        candidates: tuple[str, ...] = (),
    ) -> None:
        self.violations.append(Violation(kind, table, column, span, message, None, candidates))

    def _access(self, table: _Table, key: str, span: Span, via: AccessKind) -> None:
        self.accesses.append(ColumnAccess(table.name, table.columns[key], span, via))

    def _mark(self) -> tuple[int, int, int]:
        return len(self.uses), len(self.accesses), len(self.violations)

    def _rollback(self, mark: tuple[int, int, int]) -> None:
        del self.uses[mark[0] :], self.accesses[mark[1] :], self.violations[mark[2] :]

    # -- statements -------------------------------------------------------------

    def statement(self, tree: Tree) -> None:
        self.root = tree
        env = _Env(None)
        todo = list(_trees(tree))
        while todo:
            node = todo.pop(0)
            if node.data == "statement":
                todo[:0] = _trees(node)
            elif node.data == "with_clause":
                env = self.with_clause(node, None, env)
            elif node.data == "select_stmt":
                self.select_stmt(node, None, env)
            elif node.data == "insert_stmt":
                self.insert_stmt(node, env)
            elif node.data == "update_stmt":
                self.update_stmt(node, env)
            elif node.data == "delete_stmt":
                self.delete_stmt(node, env)
            else:  # a statement form this walk does not know: resolve what it can
                self.expr(node, _Scope(None), env)
        self.unresolved |= {id(cte.body) for cte in self.ctes if cte.state == "new"}
        for cte in self.ctes:
            # What an unused CTE would read is still checked against the role's
            # grants; its errors are not reported: SQLite never resolves it.
            mark = len(self.violations)
            self._walk_cte(cte)
            del self.violations[mark:]

    def _target(self, token: Token, alias: Token | None) -> _Source | None:
        """The base table an INSERT/UPDATE/DELETE writes, as a source."""
        table = self.tables.get(self.names.token(token))
        span = _span(token)
        if table is None:
            self._unknown_table(token)
            return None
        self.uses.append(TableUse(table.name, span))
        name = self.names.token(alias) if alias is not None else table.key
        label = table.name + (f" AS {_name(alias)}" if alias is not None else "")
        return _Source(name, label, dict(table.columns), table)

    def insert_stmt(self, tree: Tree, env: _Env) -> None:
        token = next(t for t in _tokens(tree) if t.type == "TABLE_NAME")
        target = self._target(token, None)
        columns = _child(tree, "column_list")
        if target is not None and target.table is not None:
            if columns is None:
                for key in target.table.implicit():
                    self._access(target.table, key, _span(token), "insert")
            else:
                self._column_list(columns, target, "insert")
        source = _child(tree, "insert_source")
        if source is not None:
            for node in _trees(source):
                given = self.select_stmt(node, None, env)
                if target is not None and target.table is not None and not given.opaque:
                    self._insert_width(node, len(given.names), target.table, columns)
            if columns is not None and not _trees(source):  # DEFAULT VALUES
                n = len(_tokens(columns))
                self._violation(
                    ViolationKind.COLUMN_COUNT,
                    _span(source),
                    f"DEFAULT VALUES gives no value for the {n} column{'s' if n != 1 else ''} "
                    "this INSERT names; drop the column list, or give VALUES",
                )
        if target is None:
            return
        alias = next((t for t in _tokens(tree) if t.type == "ALIAS_NAME"), None)
        if alias is not None:
            target.name = self.names.token(alias)
        scope = _Scope(None)
        scope.sources.append(target)
        conflict = _child(tree, "on_conflict")
        if conflict is not None:
            self.on_conflict(conflict, target, scope, env)
        self.returning(tree, scope, env)

    def _insert_width(self, source: Tree, given: int, table: _Table, columns: Tree | None) -> None:
        """An INSERT's source must give one value per target column: per named column
        when the statement lists them, else per column of the table (a dialect with
        ``insert_fills_defaults`` takes fewer: the rest get their defaults)."""
        if columns is not None:
            expected, what = len(_tokens(columns)), "the columns it names"
        else:
            implicit = table.implicit(self.dialect.generated_take_default)
            expected, what = len(implicit), f"the columns of {table.name}"
            for key in implicit[:given]:
                if key in table.generated:  # a value where only DEFAULT goes (PostgreSQL)
                    self._read_only(_span(source), table, key, hidden=False)
            if given < expected and self.dialect.insert_fills_defaults:
                return
        if given != expected:
            self._violation(
                ViolationKind.COLUMN_COUNT,
                _span(source),
                f"this INSERT gives {given} value{'s' if given != 1 else ''} per row for "
                f"{expected} column{'s' if expected != 1 else ''} ({what}); give one value "
                "per column, or name the columns the values are for",
                table.name,
            )

    def on_conflict(self, tree: Tree, target: _Source, scope: _Scope, env: _Env) -> None:
        """ON CONFLICT (cols) DO UPDATE SET ... WHERE ...: the conflict columns are
        read, the SET columns written; `excluded` is the row proposed for insertion
        (the target's columns), so reading excluded.c reads the inserted value. A
        bare name is the target's where `Dialect.conflict_bare_names_target`, else
        ambiguous between the two."""
        inner = _Scope(None)
        inner.sources.append(target)
        if target.table is not None:
            columns = dict(target.table.columns)
            excluded = _Source("excluded", "excluded", columns)
            if self.dialect.conflict_bare_names_target:
                excluded.hidden = set(columns)  # read by `excluded.c` only
            inner.sources.append(excluded)
        for node in _trees(tree):
            if node.data == "conflict_target":
                for token in _tokens(_child(node, "column_list") or node):
                    self.column_ref(token, None, _span(token), scope, dq_fallback=False)
            elif node.data == "assignment":
                column = next(t for t in _tokens(node) if t.type == "COLUMN_NAME")
                self._write(target, column, "update", default=_sets_default(node))
                for expr in _trees(node):
                    self.expr(expr, inner, env)
            else:
                self.clause(node, inner, env)

    def returning(self, tree: Tree, scope: _Scope, env: _Env) -> None:
        """RETURNING reads what it names, as a SELECT list over the statement's scope."""
        clause = _child(tree, "returning_clause")
        if clause is None:
            return
        outputs = _Outputs([])
        for column in _trees(_child(clause, "result_columns") or clause):
            self.result_column(column, scope, env, outputs)

    def _dml_target(self, tree: Tree) -> tuple[_Scope, _Source | None]:
        """The scope of an UPDATE or DELETE: its target table (under its alias), if known."""
        tokens = _dml_tokens(tree)
        token = next(t for t in tokens if t.type == "TABLE_NAME")
        alias = next((t for t in tokens if t.type == "ALIAS_NAME"), None)
        scope = _Scope(None, owner=tree)
        target = self._target(token, alias)
        if target is not None:
            scope.sources.append(target)
        return scope, target

    def update_stmt(self, tree: Tree, env: _Env) -> None:
        scope, target = self._dml_target(tree)
        deferred: list[Tree] = []
        from_clause = _child(tree, "from_clause")
        if from_clause is not None:
            self.join_source(_trees(from_clause)[0], scope, env, deferred)
            self._source_names(scope.sources, from_clause)
            if target is not None and not self.dialect.update_target_in_from:
                self._target_in_from(target, scope.sources[1:], from_clause)
        for node in _trees(tree):
            if node.data == "assignment":
                column = next(t for t in _tokens(node) if t.type == "COLUMN_NAME")
                if target is not None:
                    self._write(target, column, "update", default=_sets_default(node))
                for expr in _trees(node):
                    self.expr(expr, scope, env)
        for expr in deferred:
            self.expr(expr, scope, env)
        where = _child(tree, "where_clause")
        if where is not None:
            self.clause(where, scope, env)
        self.returning(tree, scope, env)

    def delete_stmt(self, tree: Tree, env: _Env) -> None:
        scope, _ = self._dml_target(tree)
        deferred: list[Tree] = []
        using = _child(tree, "join_source") or _child(tree, "table_or_subquery")
        if using is not None:  # DELETE ... USING (PostgreSQL)
            self.join_source(using, scope, env, deferred)
            self._source_names(scope.sources, using)
        for expr in deferred:
            self.expr(expr, scope, env)
        where = _child(tree, "where_clause")
        if where is not None:
            self.clause(where, scope, env)
        self.returning(tree, scope, env)

    def _source_names(self, sources: Sequence[_Source], clause: Tree) -> None:
        """Where `Dialect.source_names_unique` (PostgreSQL: "table name specified
        more than once"), two FROM items of one level (with an UPDATE's or
        DELETE's target) may not have one name; a subquery without an alias
        has none."""
        if not self.dialect.source_names_unique:
            return
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                self._violation(
                    ViolationKind.DUPLICATE_NAME,
                    _span(clause),
                    f"two tables here are named {source.name}; give one of them another "
                    "alias (AS ...)",
                )
                return
            if source.name:
                seen.add(source.name)

    def _target_in_from(self, target: _Source, sources: Sequence[_Source], clause: Tree) -> None:
        """SQLite: an UPDATE's FROM may not hold its target table again under the
        target's name ("target object/alias may not appear in FROM clause")."""
        for source in sources:
            if source.table is not None and (source.table, source.name) == (
                target.table,
                target.name,
            ):
                self._violation(
                    ViolationKind.DUPLICATE_NAME,
                    _span(clause),
                    f"the FROM clause names {source.name}, this UPDATE's target, again; "
                    "give the FROM table another alias (AS ...)",
                )
                return

    def _column_list(self, tree: Tree, target: _Source, via: AccessKind) -> None:
        for token in _tokens(tree):
            if token.type == "COLUMN_NAME":
                self._write(target, token, via)

    def _read_only(self, span: Span, table: _Table, key: str, *, hidden: bool) -> None:
        """A value written to a column no statement writes (`read_only_column`)."""
        name = table.columns[key]
        if hidden:
            what = (
                f"{name} is a hidden column of {table.name}: no statement writes it (a write "
                "to it is a command to the virtual table, such as FTS5's 'delete-all')"
            )
        else:
            takes = "only DEFAULT" if self.dialect.generated_take_default else "no value"
            what = (
                f"{name} is a generated column of {table.name}: the database sets its value "
                f"and takes {takes} for it"
            )
        self._violation(ViolationKind.READ_ONLY_COLUMN, span, what, table.name, name)

    def _write(
        self, target: _Source, token: Token, via: AccessKind, *, default: bool = False
    ) -> None:
        """A column an INSERT list or SET names; ``default``: set to DEFAULT (PostgreSQL's
        ``SET c = DEFAULT``, which a generated column takes)."""
        key = self.names.token(token)
        if target.table is None:
            return  # an unknown target table is already a violation
        table = target.table
        takes_default = default and self.dialect.generated_take_default
        if key in table.hidden or (key in table.generated and not takes_default):
            self._read_only(_span(token), table, key, hidden=key in table.hidden)
        elif key in target.table.columns:
            self._access(target.table, key, _span(token), via)
        else:
            self._violation(
                ViolationKind.UNKNOWN_COLUMN,
                _span(token),
                f"no column named {_name(token)} in {target.table.name}; "
                f"columns: {', '.join(target.table.columns.values())}",
                target.table.name,
                _name(token),
            )

    # -- WITH ---------------------------------------------------------------------

    def with_clause(self, tree: Tree, outer: _Scope | None, env: _Env) -> _Env:
        frame = _Env(env)
        for table in _trees(tree):
            if table.data != "common_table":
                continue
            name = next(t for t in _tokens(table) if t.type == "CTE_NAME")
            alias_list = _child(table, "alias_list")
            columns = None
            if alias_list is not None:
                columns = {self.names.token(t): _name(t) for t in _tokens(alias_list)}
            body = _child(table, "select_stmt")
            cte = _Cte(_name(name), body, frame, columns, outer)
            if frame.ctes.setdefault(self.names.token(name), cte) is cte:
                self.ctes.append(cte)
                continue
            # A second body of one name is never read: it is refused, not walked.
            self._violation(
                ViolationKind.DUPLICATE_NAME,
                _span(name),
                f"this WITH clause already has a common table named "
                f"{frame.ctes[self.names.token(name)].name}; give {_name(name)} another name",
            )
        self._cte_envs(tree, frame)
        return frame

    def _cte_envs(self, tree: Tree, frame: _Env) -> None:
        """Give each common table of ``frame`` the environment its body sees
        (`Dialect.cte_visibility`): ``frame`` itself where it sees them all, else
        the ones before it (and, where recursion may see it, itself), over the
        environment outside the WITH."""
        visibility = self.dialect.cte_visibility
        recursive = any(t.type == "RECURSIVE" for t in _tokens(tree))
        if visibility == "all" or (recursive and visibility == "earlier-unless-recursive"):
            return
        seen: dict[str, _Cte] = {}
        for key, cte in frame.ctes.items():
            own = dict(seen)
            if recursive and _compound(cte.body):
                own[key] = cte
            cte.env = _Env(frame.parent, own)
            seen[key] = cte

    def _walk_cte(self, cte: _Cte) -> None:
        """Walk a CTE body once, on first need (a CTE may use one defined after it)."""
        if cte.state != "new":
            return
        cte.state = "walking"
        named = len(cte.columns) if cte.columns is not None else None
        mark = self._mark()
        outputs = self._cte_body(cte)
        if len(outputs.names) > MAX_WIDTH:
            # Refused, and read as having no known columns: a WITH nested in a
            # WITH can double a width at each level (`SELECT * FROM cte AS x, cte
            # AS y`), and the walk would follow it, in time and memory.
            self._violation(
                ViolationKind.COLUMN_COUNT,
                _span(cte.body),
                f"the common table {cte.name} gives {len(outputs.names):,} columns; "
                f"a table of a statement gives at most {MAX_WIDTH:,}",
            )
            cte.columns, cte.opaque, cte.state = {}, True, "done"
            return
        if cte.columns is None:
            cte.columns = outputs.columns(self.dialect.duplicate_column_suffix)
        elif not outputs.opaque and named is not None:
            # a list shorter than the body names its first columns; the rest keep
            # the body's names (PostgreSQL, DuckDB: NATURAL JOIN and USING see them)
            body = outputs.columns(self.dialect.duplicate_column_suffix)
            columns = _by_position(list(cte.columns.items()), body)
            if columns != cte.columns:
                # the body's own references to the CTE (a recursive part) see them
                # too: walked again, what the first walk found inside it dropped
                self._drop_within(mark, _span(cte.body))
                cte.columns = columns
                outputs = self._cte_body(cte)
            self._cte_width(cte, named, len(outputs.names))
        cte.opaque = cte.opaque or outputs.opaque
        cte.state = "done"

    def _cte_body(self, cte: _Cte) -> _Outputs:
        """Walk a CTE's body with no enclosing scope: SQLite reads a CTE body where
        the CTE is used, a name the body's own tables lack against that query's
        tables (not the ones around the WITH), so such a name is refused rather
        than resolved here."""
        self.in_cte += 1
        try:
            return self.select_stmt(cte.body, None, cte.env, cte)
        finally:
            self.in_cte -= 1

    def _drop_within(self, mark: tuple[int, int, int], span: Span) -> None:
        """Forget the uses, accesses and violations found since ``mark`` inside
        ``span`` (those of another CTE walked meanwhile, outside it, stay: it is
        not walked again)."""
        start, end = span

        def outside(found: TableUse | ColumnAccess | Violation) -> bool:
            return not (start <= found.span[0] and found.span[1] <= end)

        self.uses[mark[0] :] = [u for u in self.uses[mark[0] :] if outside(u)]
        self.accesses[mark[1] :] = [a for a in self.accesses[mark[1] :] if outside(a)]
        self.violations[mark[2] :] = [v for v in self.violations[mark[2] :] if outside(v)]

    def _cte_width(self, cte: _Cte, named: int, got: int) -> None:
        """A CTE's column list against what its body gives
        (`Dialect.cte_column_list`): as many (SQLite), at most as many
        (PostgreSQL: the rest keep their names), or any (DuckDB)."""
        rule = self.dialect.cte_column_list
        if got == named or rule == "any" or (rule == "at_most" and named < got):
            return
        self._violation(
            ViolationKind.COLUMN_COUNT,
            _span(cte.body),
            f"{cte.name} names {named} column{'s' if named != 1 else ''} and its body "
            f"gives {got}; name {_width_words(got)[1]}",
        )

    # -- SELECT -------------------------------------------------------------------

    def select_stmt(
        self, tree: Tree, outer: _Scope | None, env: _Env, cte: _Cte | None = None
    ) -> _Outputs:
        with_clause = _child(tree, "with_clause")
        if with_clause is not None:
            env = self.with_clause(with_clause, outer, env)
        body = next(c for c in _trees(tree) if c.data in ("select_core", "compound_select"))
        exists = id(tree) in self.exists_bodies
        self.unevaluated |= unevaluated_nodes(
            tree, self.dialect, exists=exists, placements=self.placements
        )
        cores: list[tuple[_Scope, _Outputs]] = []
        for index, core in enumerate(_flatten_compound(body)):
            cores.append(self.select_core(core, outer, env))
            if index == 0 and cte is not None and cte.columns is None:
                cte.columns = cores[0][1].columns(
                    self.dialect.duplicate_column_suffix
                )  # a recursive CTE's anchor names it
                cte.opaque = cores[0][1].opaque
        widths = sorted({len(out.names) for _, out in cores})
        if len(widths) > 1 and not any(out.opaque for _, out in cores):
            self._violation(
                ViolationKind.COLUMN_COUNT,
                _span(body),
                f"the SELECTs of this compound give {' and '.join(map(str, widths))} columns; "
                "each must give the same number",
            )
        order_by = _child(tree, "order_by_clause")
        if order_by is not None:
            grouped = [(self._grouping_scope(scope), out) for scope, out in cores]
            if len(cores) == 1:
                self.order_by(order_by, grouped[0][0], env)
            else:
                self.compound_order_by(order_by, grouped, env)
        handled = ("with_clause", "select_core", "compound_select", "order_by_clause")
        limit = _Scope(outer if self.dialect.limit_reads_outer else None)
        for node in _trees(tree):
            if node.data not in handled:  # LIMIT, OFFSET, FETCH: outside the SELECT's scope
                self.clause(node, limit, env)
        return cores[0][1]

    def select_core(self, tree: Tree, outer: _Scope | None, env: _Env) -> tuple[_Scope, _Outputs]:
        scope = _Scope(outer, owner=tree)
        values = _child(tree, "values_clause")
        if values is not None:
            rows = [r for r in _trees(values) if r.data == "row_value"]
            self.expr(values, scope, env)
            widths = [len(_trees(r)[0].children) if _trees(r) else 0 for r in rows]
            if len(set(widths)) > 1:
                counts = " and ".join(map(str, sorted(set(widths))))
                self._violation(
                    ViolationKind.COLUMN_COUNT,
                    _span(values),
                    f"the rows of this VALUES give {counts} values; each must give the same number",
                )
            width = widths[0] if widths else 0
            base, start = _VALUES_NAMES[self.dialect.values_column_names]
            names = [f"{base}{i}" for i in range(start, start + width)]
            return scope, _Outputs([(n, n) for n in names])
        deferred: list[Tree] = []
        from_clause = _child(tree, "from_clause")
        if from_clause is not None:
            self.join_source(_trees(from_clause)[0], scope, env, deferred)
            self._source_names(scope.sources, from_clause)
        result = _child(tree, "result_columns")
        columns = _trees(result) if result is not None else []
        for column in columns:
            alias = next((t for t in _tokens(column) if t.type == "ALIAS_NAME"), None)
            if alias is not None:
                scope.aliases.add(self.names.token(alias))
        outputs = _Outputs([])
        for column in columns:
            self.result_column(column, scope, env, outputs)
        scope.aliases_visible = self.dialect.result_aliases_in_expressions
        for expr in deferred:
            self.expr(expr, scope, env)
        handled = ("from_clause", "result_columns")
        for node in _trees(tree):
            if node.data == "window_clause":
                self.window_clause(node, tree, scope, env)
            elif node.data == "group_by_clause":
                self.group_by(node, self._grouping_scope(scope), env)
            elif node.data == "having_clause" and not self.dialect.having_aggregates_see_aliases:
                self.having(node, scope, env)
            elif node.data not in handled:  # WHERE, HAVING, ..., DISTINCT ON (...)
                self.clause(node, scope, env)
        return scope, outputs

    def group_by(self, tree: Tree, scope: _Scope, env: _Env) -> None:
        """GROUP BY: where result aliases are names only as whole terms
        (PostgreSQL), a bare name resolves against the level's sources, then its
        aliases, then the enclosing queries; any other term without aliases."""
        if self.dialect.result_aliases_in_expressions:
            self.clause(tree, scope, env)
            return
        bare = replace(scope, aliases_visible=True)
        for node in tree.iter_subtrees_topdown():
            if node.data == "expr_list":
                for term in node.children:
                    self.expr(term, bare if _bare_name(term) else scope, env)
                return
        self.clause(tree, scope, env)

    def having(self, tree: Tree, scope: _Scope, env: _Env) -> None:
        """HAVING where its aggregate calls do not see the result aliases
        (`Dialect.having_aggregates_see_aliases`): each call that may aggregate
        (its arguments, its FILTER) resolves without them, the rest as a clause."""
        self.expr(tree, scope, env, aggregates=replace(scope, aliases_visible=False))

    def _may_aggregate(self, call: Tree) -> bool:
        """``call`` (an aggregate_call or function_call tree) may be an aggregate."""
        return call.data == "aggregate_call" or can_aggregate(_call_name(call), self.dialect)

    def _grouping_scope(self, scope: _Scope) -> _Scope:
        """What a SELECT's ORDER BY and GROUP BY resolve against: its core's scope,
        without the enclosing queries' where not `Dialect.order_group_read_outer`."""
        return scope if self.dialect.order_group_read_outer else scope.alone()

    def window_clause(self, tree: Tree, core: Tree, scope: _Scope, env: _Env) -> None:
        """The named windows of a SELECT core. A name given twice is refused where
        `Dialect.window_names_unique`; else the last definition is the name's (as
        SQLite's). Where `Dialect.unused_windows_unresolved` (SQLite, DuckDB) a
        definition no ``OVER name`` of the core reads (nor of an ORDER BY of the
        statement, which may be its SELECT's) is never resolved: its errors are
        not reported, what it would read still is (as an unused CTE's)."""
        named = [w for w in _trees(tree) if w.data == "named_window"]
        keys = [self.names.token(_tokens(w)[0]) for w in named]
        read = self._window_references() | self._over_names(core)
        for i, window in enumerate(named):
            shadowed = keys[i] in keys[i + 1 :]
            if keys[i] in keys[:i] and self.dialect.window_names_unique:
                name = _tokens(window)[0]
                self._violation(
                    ViolationKind.DUPLICATE_NAME,
                    _span(name),
                    f"this WINDOW clause already defines a window named {_name(name)}; "
                    "give this one another name",
                )
            used = not shadowed and keys[i] in read
            # resolved as the select list is: the result aliases are not visible
            unaliased = replace(scope, aliases_visible=False)
            if used or not self.dialect.unused_windows_unresolved:
                self.clause(window, unaliased, env)
                continue
            mark = len(self.violations)
            self.unresolved.add(id(window))
            self.clause(window, unaliased, env)
            del self.violations[mark:]

    def _window_references(self) -> set[str]:
        """The window names an ``OVER name`` in some ORDER BY of the statement
        reads (keys)."""
        if self.window_references is None:
            assert self.root is not None, "set by statement() before any SELECT is walked"
            self.window_references = {
                name
                for clause in self.root.iter_subtrees()
                if clause.data == "order_by_clause"
                for name in self._over_names(clause)
            }
        return self.window_references

    def _over_names(self, tree: Tree) -> set[str]:
        """The window names the ``OVER name`` of ``tree`` read (keys), outside the
        SELECTs nested in it (which have windows of their own)."""
        found, todo = set(), list(_trees(tree))
        while todo:
            node = todo.pop()
            if node.data == "over_clause":
                found |= {self.names.token(t) for t in _tokens(node) if t.type == "ALIAS_NAME"}
            elif node.data != "select_stmt":
                todo += _trees(node)
        return found

    def result_column(self, tree: Tree, scope: _Scope, env: _Env, outputs: _Outputs) -> None:
        tokens = {t.type: t for t in _tokens(tree)}
        exprs = [c for c in tree.children if not _is_token(c) or c.type not in _RESULT_TOKENS]
        if "STAR" in tokens and not exprs:
            self.star(tokens["STAR"], tokens.get("QUALIFIER"), scope, outputs)
            return
        for expr in exprs:
            self.expr(expr, scope, env)
        alias = tokens.get("ALIAS_NAME")
        if alias is not None:
            outputs.names.append((self.names.token(alias), _name(alias)))
            return
        expr = exprs[0]
        while not _is_token(expr) and expr.data == "collated":
            expr = expr.children[0]  # SQLite names `x COLLATE c` as it names x
        if not _is_token(expr) and expr.data == "column_ref":
            column = _tokens(expr)[-1]
            outputs.names.append((self.names.token(column), _name(column)))
        elif self.dialect.expression_column_names == "postgres":
            outputs.names.append(self._postgres_name(expr, scope, env)[0])
        else:
            start, end = _span(expr)
            text = self.data[start:end].decode("utf-8", "replace")
            outputs.names.append((fold(text), text))

    def _postgres_name(
        self, expr: Tree | Token, scope: _Scope, env: _Env
    ) -> tuple[tuple[str, str], int]:
        """PostgreSQL's name of an unaliased result expression (its parser's
        FigureColname) as (key, spelling), and its strength: 2 for a name taken
        from a column, a call or a subquery's column, 1 for a type's or a
        keyword's, 0 for none ("?column?")."""
        if _is_token(expr):
            return ("?column?", "?column?"), 0
        data = expr.data
        if data == "column_ref":
            column = _tokens(expr)[-1]
            return (self.names.token(column), _name(column)), 2
        if data in ("typecast", "cast_expr"):
            inner = next(c for c in expr.children if not _is_token(c) or c.type not in _CAST_WORDS)
            named, strength = self._postgres_name(inner, scope, env)
            if strength > 1:
                return named, strength
            words = [
                t for t in _tokens(_child(expr, "type_name") or expr) if t.type != "TYPE_MODIFIER"
            ]
            written = " ".join(_text(words[0]).lower().split()) if words else "?column?"
            name = _PG_TYPE_NAMES.get(written, written)
            return (name, name), 1
        if data == "scalar_subquery":
            column = _first_result_column(expr)
            select = _child(expr, "select_stmt")
            if (column is None or "STAR" in {t.type for t in _tokens(column)}) and select:
                # `*`, `q.*`: the first column the star expands to, as walked
                mark = self._mark()
                try:
                    names = self.select_stmt(select, scope, env).names
                finally:
                    self._rollback(mark)
                return (names[0], 2) if names else (("?column?", "?column?"), 0)
            if column is None:
                return ("?column?", "?column?"), 0
            alias = next((t for t in _tokens(column) if t.type == "ALIAS_NAME"), None)
            if alias is not None:
                return (self.names.token(alias), _name(alias)), 2
            inner = [c for c in column.children if not _is_token(c) or c.type not in _RESULT_TOKENS]
            if not inner:
                return ("?column?", "?column?"), 0
            return self._postgres_name(inner[0], scope, env)
        if data in ("function_call", "special_call", "aggregate_call", "aggregate_head"):
            name = _call_name(expr) or "?column?"
            name = _PG_CALL_NAMES.get(name, name) if data == "special_call" else name
            return (name, name), 2
        if data == "case_expr":  # its ELSE's name if that is a strong one
            children = expr.children
            at = next((i for i, c in enumerate(children) if _is_token(c) and c.type == "ELSE"), -1)
            if at >= 0:
                named, strength = self._postgres_name(children[at + 1], scope, env)
                if strength > 1:
                    return named, strength
            return ("case", "case"), 1
        if data == "exists":
            return ("exists", "exists"), 2
        if data == "row_constructor":
            return ("row", "row"), 2
        if data == "extract_expr":
            return ("extract", "extract"), 2
        if data == "literal":  # TRUE and FALSE are constants: "?column?" (PostgreSQL 15)
            token = _tokens(expr)[0]
            if token.type.startswith(("CURRENT_", "LOCAL")):
                keyword = token.type.lower()
                return (keyword, keyword), 2
            if token.type == "TYPED_STRING":  # `date '...'`: a cast, named by its type
                word = _text(token).split()[0].lower()
                name = _PG_TYPE_NAMES.get(word, word)
                return (name, name), 1
        return ("?column?", "?column?"), 0

    def star(self, star: Token, qualifier: Token | None, scope: _Scope, outputs: _Outputs) -> None:
        """``*`` or ``q.*``: every column of the sources (``*`` skips USING/NATURAL
        right-hand columns, as SQLite does), each base column an access."""
        span = (_span(qualifier if qualifier is not None else star)[0], _span(star)[1])
        if qualifier is None:
            sources = scope.sources
        else:
            key = self.names.lexeme(_text(qualifier)[:-1])
            sources = [s for s in scope.sources if s.name == key]
            if not sources:
                self._unknown_qualifier(qualifier, span, scope)
                outputs.opaque = True
                return
        for source in sources:  # q.* is every source named q (SQLite expands them all)
            outputs.opaque = outputs.opaque or source.opaque
            for key, spelling in source.columns.items():
                if (qualifier is None and key in source.hidden) or source.hides(key):
                    continue
                outputs.names.append((key, spelling))
                self._read(source, key, span, "star")
            self._star_twins(source, scope, span)

    def _star_twins(self, source: _Source, scope: _Scope, span: Span) -> None:
        """``*`` reads each column of ``source`` as ``name.column``: where another
        source of the scope has the same name and that column, it is ambiguous
        (SQLite "ambiguous column name: main.u.c" for ``SELECT * FROM u, u``;
        DuckDB "Ambiguous reference to table"). SQLite tells a base table
        (``main.u``) from a subquery or CTE (``*.u``): only two of a kind clash."""
        twins = [
            s
            for s in scope.sources
            if s is not source
            and source.name
            and s.name == source.name
            and (s.table is None) == (source.table is None)  # SQLite: main.u.c, *.u.c
        ]
        for key, spelling in source.columns.items():
            if key in source.hidden or source.hides(key):
                continue
            hits = [
                s for s in twins if key in s.columns and key not in s.hidden and not s.hides(key)
            ]
            if hits:
                self._violation(
                    ViolationKind.AMBIGUOUS_COLUMN,
                    span,
                    f"* reads {source.name}.{spelling}, and two tables here are named "
                    f"{source.name}; give one of them another alias (AS ...)",
                    column=spelling,
                )
                return

    def _read(self, source: _Source, key: str, span: Span, via: AccessKind) -> None:
        """``key`` of ``source`` is read: where it is a base table's, the table's
        columns it names (:meth:`_Source.bases`) are accessed."""
        if source.table is not None:
            for base in source.bases(key):
                self._access(source.table, base, span, via)

    def star_of(self, source: _Source, span: Span, via: AccessKind) -> None:
        """Every base column of ``source`` is read (a whole-row reference)."""
        if source.table is not None:
            for key in source.table.columns:
                self._access(source.table, key, span, via)

    def order_by(self, tree: Tree, scope: _Scope, env: _Env) -> None:
        for term in _trees(tree):
            if term.data != "ordering_term":
                continue
            expr = term.children[0]
            if _bare_name(expr) and self.names.token(_tokens(expr)[0]) in scope.aliases:
                continue  # a whole-term identifier names a result alias first
            self.expr(term, scope, env)

    def compound_order_by(
        self, tree: Tree, cores: list[tuple[_Scope, _Outputs]], env: _Env
    ) -> None:
        names = {key for _, out in cores for key, _ in out.names}
        for term in _trees(tree):
            if term.data != "ordering_term":
                continue
            expr = term.children[0]
            if _bare_name(expr) and self.names.token(_tokens(expr)[0]) in names:
                continue
            first: tuple[list[TableUse], list[ColumnAccess], list[Violation]] | None = None
            for scope, _ in cores:
                mark = self._mark()
                self.expr(term, scope, env)
                if len(self.violations) == mark[2]:
                    break  # resolved cleanly in this SELECT
                attempt = (
                    self.uses[mark[0] :],
                    self.accesses[mark[1] :],
                    self.violations[mark[2] :],
                )
                self._rollback(mark)
                first = first or attempt
            else:
                assert first is not None
                self.uses += first[0]
                self.accesses += first[1]
                self.violations += first[2]  # report the attempt in the first SELECT

    def clause(self, tree: Tree, scope: _Scope, env: _Env) -> None:
        self.expr(tree, scope, env)

    # -- FROM -------------------------------------------------------------------

    def join_source(
        self, tree: Tree, scope: _Scope, env: _Env, deferred: list[Tree], joined: bool = False
    ) -> None:
        """Add the sources of a FROM item to ``scope``; ON conditions go to ``deferred``.
        ``joined``: the item follows a join operator (it is not its list's first)."""
        if tree.data == "table_or_subquery":
            scope.sources += self.table_or_subquery(tree, scope, env, deferred, joined)
            return
        if tree.data != "join_source":
            raise GrammarContractError(self.dialect.name, f"a FROM item is a {tree.data} tree")
        parts = _trees(tree)
        first = len(scope.sources)  # the sources before are not this join's left side
        self.join_source(parts[0], scope, env, deferred, joined)
        if not self.dialect.using_left_spans_commas:
            first = max(first, scope.after_comma)
        left = scope.sources[first:]
        operator = next((p for p in parts[1:] if p.data == "join_operator"), None)
        if operator is None:
            scope.after_comma = len(scope.sources)
            if self.dialect.comma_binds_loosest:  # `a, b JOIN c ON ...`
                scope.group = len(scope.sources)
        right_tree = next(p for p in parts[1:] if p.data in ("table_or_subquery", "join_source"))
        self.join_source(right_tree, scope, env, deferred, True)
        right = scope.sources[first + len(left) :]
        constraint = next((p for p in parts if p.data == "join_constraint"), None)
        words = {t.type for t in _tokens(operator)} if operator is not None else set()
        rightward = bool(words & {"RIGHT", "FULL"})
        if operator is not None and "NATURAL" in words:
            self.natural(operator, left, right, rightward)
        if constraint is None:
            return
        using = _child(constraint, "column_list")
        if using is not None and any(t.type == "USING" for t in _tokens(constraint)):
            for token in _tokens(using):
                self.using(token, left, right, rightward)
        elif self.dialect.join_condition_sees_right:
            deferred += _trees(constraint)
        else:  # the tables joined so far, none to its right (PostgreSQL, DuckDB)
            seen = replace(scope, sources=scope.sources[scope.group :])
            for expr in _trees(constraint):
                self.expr(expr, seen, env)

    def table_or_subquery(
        self, tree: Tree, scope: _Scope, env: _Env, deferred: list[Tree], joined: bool = False
    ) -> list[_Source]:
        alias_tree = _child(tree, "table_alias")
        alias = _tokens(alias_tree)[-1] if alias_tree is not None else None
        listed = _child(alias_tree, "alias_list") if alias_tree is not None else None
        names = [t for t in _tokens(tree) if t.type in ("TABLE_NAME", "CTE_NAME")]
        if names:
            source = self.named_source(names[0], alias, env)
            return [source if listed is None else self._renamed(source, listed)]
        inner = next(c for c in _trees(tree) if c.data != "table_alias")
        if inner.data == "select_stmt":
            lateral = self.dialect.from_subqueries_lateral or any(
                t.type == "LATERAL" for t in _tokens(tree)
            )
            outputs = self.select_stmt(inner, scope if lateral else scope.parent, env)
            name = self.names.token(alias) if alias is not None else ""
            label = f"(subquery) AS {_name(alias)}" if alias is not None else "(subquery)"
            columns = outputs.columns(self.dialect.duplicate_column_suffix)
            source = _Source(name, label, columns, opaque=outputs.opaque)
            return [source if listed is None else self._renamed(source, listed)]
        table = _parenthesized_table(tree)
        if joined and table is not None and self.dialect.joined_parentheses_drop_alias:
            return [self.named_source(table, None, env)]
        single = _parenthesized_subquery(tree)
        if single is not None:  # `((SELECT ...) AS s)`: the subquery in parentheses
            sources = self.table_or_subquery(single, scope, env, deferred)
            if joined and self.dialect.joined_parentheses_drop_alias:
                # after a join operator or a comma SQLite drops the alias inside
                return [replace(s, name="", label="(subquery)") for s in sources]
            return sources
        join = _child(_innermost(tree), "join_source")
        if not joined and self.dialect.first_parentheses_flatten and join is not None:
            # SQLite reads a first parenthesized join as unparenthesized: its ON
            # conditions see the whole FROM clause (deferred with the others).
            before = len(scope.sources)
            self.join_source(join, scope, env, deferred)
            added = scope.sources[before:]
            del scope.sources[before:]
            return added
        # A parenthesized join's conditions see its own tables (and, where the
        # dialect says so, the FROM clause's tables joined before it).
        outer = list(scope.sources) if self.dialect.nested_join_sees_outer else []
        nested = _Scope(scope.parent, list(outer), owner=scope.owner)
        own: list[Tree] = []
        self.join_source(inner, nested, env, own)
        for expr in own:
            self.expr(expr, nested, env)
        return nested.sources[len(outer) :]

    def named_source(self, token: Token, alias: Token | None, env: _Env) -> _Source:
        """A TABLE_NAME/CTE_NAME table position: the CTE in scope, else the schema table.

        A CTE's reference to itself before its columns are known (SQLite: a
        circular reference, an error) is read as the schema table if there is one.
        """
        key = self.names.token(token)
        name = self.names.token(alias) if alias is not None else key
        suffix = f" AS {_name(alias)}" if alias is not None else ""
        cte = env.find(key)
        if cte is not None and cte.state == "walking" and cte.columns is None:
            cte = None if key in self.tables else cte  # a non-recursive body reads the table
        if cte is not None:
            self._walk_cte(cte)
            if cte.columns is None:  # a reference cycle: the columns are unknown
                return _Source(name, cte.name + suffix, {}, opaque=True)
            return _Source(name, cte.name + suffix, dict(cte.columns), opaque=cte.opaque)
        table = self.tables.get(key)
        if table is None:
            self._unknown_table(token)
            return _Source(name, _name(token) + suffix, {}, opaque=True)
        self.uses.append(TableUse(table.name, _span(token)))
        return _Source(name, table.name + suffix, dict(table.columns), table)

    def _renamed(self, source: _Source, listed: Tree) -> _Source:
        """``source`` (a table or CTE) under ``AS q(a, b, ...)``: its first columns
        take the list's names, by position (PostgreSQL, DuckDB); a base table's
        renamed key reads the column at its position, and a name the list repeats
        from a later column reads both (a reference to it is ambiguous in SQL)."""
        if source.opaque:
            return source
        new = [(self.names.token(t), _name(t)) for t in _tokens(listed)][: len(source.columns)]
        columns = _by_position(new, source.columns)
        renamed: dict[str, tuple[str, ...]] = {}
        named = new + list(source.columns.items())[len(new) :]
        for (key, _), base in zip(named, source.columns, strict=True):
            renamed[key] = (*renamed.get(key, ()), base)
        if source.table is None:
            return replace(source, columns=columns)
        return replace(source, columns=columns, renamed=renamed)

    def natural(
        self, operator: Tree, left: list[_Source], right: list[_Source], rightward: bool
    ) -> None:
        """NATURAL JOIN: USING every column name the right side shares with the left."""
        span = _span(operator)
        for source in right:
            for key in list(source.columns):
                if key in source.hidden or source.hides(key):
                    continue
                others = [
                    s for s in left if key in s.columns and key not in s.hidden and not s.hides(key)
                ]
                if not others:
                    continue
                (others[0] if rightward else source).hidden.add(key)
                for side in (others[0], source):
                    self._read(side, key, span, "natural")

    def using(
        self, token: Token, left: list[_Source], right: list[_Source], rightward: bool
    ) -> None:
        """One USING column: it must be on both sides; the leftmost left-hand match
        joins (SQLite's tableAndColumnIndex). Both sides are read. Unqualified
        references then see one of the two: the left one, or for RIGHT joins the
        right one (SQLite 3.39+). A FULL join coalesces both (both are already
        accessed here); the reference is attributed to the right one."""
        key, span = self.names.token(token), _span(token)
        lefts = [s for s in left if s.has(key, False)]
        rights = [s for s in right if s.has(key, False)]
        for side, found in (("left", lefts), ("right", rights)):
            if not found:
                labels = ", ".join(s.label for s in (left if side == "left" else right))
                self._violation(
                    ViolationKind.UNKNOWN_COLUMN,
                    span,
                    f"USING column {_name(token)} is not a column of the {side} side ({labels})",
                    column=_name(token),
                )
                return
            if side == "right" and len(found) > 1:
                self._ambiguous(token, span, found)
                return
        (lefts[0] if rightward else rights[0]).hidden.add(key)
        for source in (lefts[0], rights[0]):
            if key in source.columns:
                self._read(source, key, span, "using")

    # -- expressions ----------------------------------------------------------------

    def expr(
        self, root: Tree | Token, scope: _Scope, env: _Env, aggregates: _Scope | None = None
    ) -> None:
        """Resolve every name inside an expression (any subtree, walked generically);
        the calls that may aggregate against ``aggregates`` when given (HAVING's,
        see :meth:`having`).

        The generic part of the walk keeps its own stack (pre-order, left to right, as
        a recursive walk would visit), so an expression's depth (``1+1+...+1``, deep
        parentheses) costs no Python stack; only nested SELECTs recurse."""
        todo: list[Any] = [root]
        dq = self.names.dq_fallback
        while todo:
            node = todo.pop()
            if isinstance(node, _Unresolved):  # the end of a subtree SQLite never resolves
                del self.violations[node.mark :]
                continue
            if _is_token(node):
                continue
            data = node.data
            calls = ("aggregate_call", "function_call")
            if aggregates is not None and data in calls and self._may_aggregate(node):
                self.expr(node, aggregates, env)
                continue
            dropped = _dropped_by_parser(node, self.dialect)
            if dropped:  # `x IN ()`, `0 AND x`: SQLite's parser drops x
                self.unresolved.update(id(t) for t in dropped)
                todo += [_Unresolved(len(self.violations)), *reversed(dropped)]
                continue
            self._expect_widths(node, root)
            if data == "column_ref":
                tokens = _tokens(node)
                qualifier = tokens[0] if len(tokens) == 2 else None
                level = self.column_ref(tokens[-1], qualifier, _span(node), scope, dq_fallback=dq)
                if level is not None and level.owner is not None:
                    self.refs[id(node)] = id(level.owner)
            elif data == "literal":
                token = node.children[0]
                if _is_token(token) and token.type == "DQ_STRING":
                    self.column_ref(token, None, _span(token), scope, dq_fallback=dq)
                elif _is_token(token) and token.type in ("TRUE", "FALSE") and self.names.boolean:
                    self._boolean_name(token, scope)
            elif data == "select_stmt":
                outputs = self.select_stmt(node, scope, env)
                self._check_width(node, outputs)
            elif data == "in_target" and _names_table(node):
                token = next(t for t in _tokens(node) if t.type == "TABLE_NAME")
                source = self.named_source(token, None, env)
                self._check_table_width(node, token, source)
                if source.table is not None:
                    for key in source.table.columns:
                        if not source.hides(key):
                            self._access(source.table, key, _span(token), "in_table")
            else:
                if data == "exists":
                    self.exists_bodies.add(id(_trees(node)[0]))
                todo.extend(reversed(node.children))

    def _expect_widths(self, node: Tree, root: Tree | Token) -> None:
        """Record how many columns each subquery among ``node``'s children (or
        ``node`` itself, the root of a walk) must give (``widths``, or ``matched``
        where it is another subquery's width):

        - an operand of a comparison or BETWEEN
          (`grid_sql.row_rules.compared_operands`): the width of the first row
          value compared (``(a, b) = (SELECT c, d ...)``), else one where a value
          is compared, else the first compared subquery's (``(SELECT a, b ...) =
          (SELECT c, d ...)``);
        - the subquery right of IN: the width of its left, a row value's, one for a
          value, the left subquery's for a subquery; that left subquery: any;
        - a subquery that is a value of a compared row: the width of the row at
          its place in the other row (``(a, (SELECT c, d ...)) = (1, (2, 3))``:
          two; `grid_sql.row_rules` judges the rows), else one;
        - any other: one.

        In a clause the database never evaluates (``unevaluated``), only the
        widths it compares when it resolves names: the compared operands, and the
        left of ``x IN (c)`` (`grid_sql.row_rules.resolved_operands`)."""
        children = [c for c in node.children if not _is_token(c)]
        unevaluated = id(node) in self.unevaluated
        if node is root and node.data == "scalar_subquery" and not unevaluated:
            self.widths.setdefault(id(_trees(node)[0]), 1)
        comparison = node.data in ("predicate", "comparison")
        group = compared_operands(node) if comparison else []
        # Unevaluated, only the rows' own widths are compared, not their values'.
        if len(group) == 2 and all(g.data == "row_constructor" for g in group) and not unevaluated:
            self._pair_values(*group)
        resolved = resolved_operands(node) if comparison and unevaluated else []
        # `x IN (SELECT ...)`, `x IN t`: x is a row as wide as the subquery or the table
        in_rows = any(
            c.data == "in_target" and (_child(c, "select_stmt") or _names_table(c))
            for c in children[1:]
        )
        for child in children:
            right_of_in = child.data == "in_target" and child is not children[0]
            if right_of_in and not unevaluated and _names_table(child):
                self._expect_like(id(child), children[0])  # `x IN t`
            select = _child(child, "select_stmt")
            if select is None:
                continue
            if any(child is g for g in group):
                self._expect_compared(select, group)
            elif child.data == "scalar_subquery":
                left_of_in = comparison and child is children[0] and in_rows
                unchecked = unevaluated and not any(r is child for r in resolved)
                width = self.paired.get(id(select), 1)
                self.widths[id(select)] = None if left_of_in or unchecked else width
            elif unevaluated:
                self.widths[id(select)] = None
            elif right_of_in:
                self._expect_like(id(select), children[0])

    def _pair_values(self, left: Tree, right: Tree) -> None:
        """Two compared rows, value by value: a subquery against a row must be as
        wide as the row (``paired``), against a subquery as wide as that one."""
        todo = [(left, right)]
        while todo:
            a, b = todo.pop()
            pair = [getattr(a, "data", None), getattr(b, "data", None)]
            if pair == ["row_constructor", "row_constructor"]:
                todo += zip(row_values(a), row_values(b), strict=False)
            elif pair == ["scalar_subquery", "scalar_subquery"]:
                first, second = _trees(a)[0], _trees(b)[0]
                self.paired[id(first)] = self.paired[id(second)] = None
                self.matched[id(second)] = id(first)
            elif "scalar_subquery" in pair and "row_constructor" in pair:
                sub, row = (a, b) if pair[0] == "scalar_subquery" else (b, a)
                self.paired[id(_trees(sub)[0])] = row_width(row)

    def _expect_like(self, key: int, left: Tree) -> None:
        """Record that ``key`` (the id of a subquery right of IN, or of an ``in_target``
        naming a table) must be as wide as ``left``, the left of IN: a row value's
        width, the left subquery's, else one."""
        if left.data == "row_constructor":
            self.widths[key] = row_width(left)
        elif left.data == "scalar_subquery":
            self.widths[key] = None
            self.matched[key] = id(_trees(left)[0])
        else:
            self.widths[key] = 1

    def _expect_compared(self, select: Tree, group: list[Tree]) -> None:
        """The width of ``select``, a subquery among the compared operands ``group``."""
        rows = [g for g in group if g.data == "row_constructor"]
        if rows:
            self.widths[id(select)] = row_width(rows[0])
        elif any(g.data != "scalar_subquery" for g in group):
            self.widths[id(select)] = 1
        else:
            self.widths[id(select)] = None
            first = _trees(group[0])[0]
            if first is not select:
                self.matched[id(select)] = id(first)

    def _check_width(self, select: Tree, outputs: _Outputs) -> None:
        got = len(outputs.names)
        if not outputs.opaque:
            self.gave[id(select)] = got
        expected = self._expected(select)
        if expected is None or outputs.opaque or got == expected:
            return
        what, columns = _width_words(expected)
        self._violation(
            ViolationKind.COLUMN_COUNT,
            _span(select),
            f"this subquery gives {got} column{'s' if got != 1 else ''} where {what} is expected; "
            f"select {columns}",
        )

    def _check_table_width(self, target: Tree, token: Token, source: _Source) -> None:
        """``x IN t`` (``target``, the ``in_target`` naming ``t``): SQLite reads it as
        ``x IN (SELECT * FROM t)``, so ``t`` must have as many columns as ``x`` is wide."""
        expected = self._expected(target)
        got = len([k for k in source.columns if not source.hides(k)])
        if expected is None or source.opaque or got == expected:
            return
        what, columns = _width_words(expected)
        self._violation(
            ViolationKind.COLUMN_COUNT,
            _span(token),
            f"the table {_name(token)} gives {got} column{'s' if got != 1 else ''} where {what} "
            f"is expected; write IN (SELECT ... FROM {_name(token)}) with {columns}",
        )

    def _expected(self, node: Tree) -> int | None:
        """The width recorded for ``node`` (a subquery or an ``IN t`` target) by
        :meth:`_expect_widths`, resolved if it is another subquery's; None: any."""
        expected = self.widths.pop(id(node), None)
        if id(node) in self.matched:
            expected = self.gave.get(self.matched.pop(id(node)))
        return expected

    def column_ref(
        self,
        column: Token,
        qualifier: Token | None,
        span: Span,
        scope: _Scope,
        *,
        dq_fallback: bool,
    ) -> _Scope | None:
        """Resolve a column reference; the scope level that resolved it (None: it
        names nothing, or is SQLite's string fallback)."""
        key = self.names.token(column)
        if qualifier is None:
            return self._unqualified(column, key, span, scope, dq_fallback)
        return self._qualified(column, key, qualifier, span, scope)

    def _unqualified(
        self, column: Token, key: str, span: Span, scope: _Scope, dq_fallback: bool
    ) -> _Scope | None:
        level: _Scope | None = scope
        rowids = False  # a row id name met at a level of several base tables
        # whole rows level by level, or after every level's columns
        rows_late = self.names.whole_row and self.dialect.whole_rows_after_columns
        while level is not None:
            hits = [s for s in level.sources if s.has(key, False)]
            hits = [s for s in hits if not s.opaque] or hits
            if len(hits) == 1:
                if key in hits[0].columns:
                    self._read(hits[0], key, span, "reference")
                return level
            if len(hits) > 1:
                self._ambiguous(column, span, hits)
                return level
            if self.names.whole_row and not rows_late and self._whole_row(key, span, level):
                return level
            bases = [s for s in level.sources if s.table is not None]
            if fold(key) in self.names.rowid and len(bases) == 1:
                # before result aliases (SQLite's order: `x AS rowid` hides no row id)
                self._rowid(bases[0], span)
                self._rowid_outward(level.parent, span)
                return level
            if fold(key) in self.names.rowid and bases:
                # Several base tables: SQLite refuses the name ("no such column"), or
                # reads the one with a row id where the others are WITHOUT ROWID, which
                # the checker cannot see: refused, never read from a result alias or
                # as a string.
                rowids = True
                break
            if level.aliases_visible and key in level.aliases:
                return level
            level = level.parent
        level = scope if rows_late else None
        while level is not None:
            if self._whole_row(key, span, level):
                return level
            level = level.parent
        if dq_fallback and _text(column).startswith('"') and not self.in_cte and not rowids:
            return None  # SQLite reads an unresolved "..." as a string literal
        in_scope = ", ".join(s.label for s in scope.sources) or "none"
        self._violation(
            ViolationKind.UNKNOWN_COLUMN,
            span,
            f"no column named {_name(column)} in any table in scope (sources: {in_scope})"
            + self._cte_note(),
            column=_name(column),
        )
        return None

    def _whole_row(self, key: str, span: Span, level: _Scope) -> bool:
        """A source of ``level`` named ``key`` read as a value: its whole row
        (`Dialect.whole_row_references`), every column an access."""
        rows = [s for s in level.sources if s.name == key]
        if rows:
            self.star_of(rows[0], span, "row")
        return bool(rows)

    def _cte_note(self) -> str:
        """Why a name in a CTE body does not reach the query around the WITH."""
        if not self.in_cte:
            return ""
        return (
            "; a common table's body is read where the table is used, so it may name "
            "only its own tables' columns (a string takes single quotes)"
        )

    def _qualified(
        self, column: Token, key: str, qualifier: Token, span: Span, scope: _Scope
    ) -> _Scope | None:
        qkey = self.names.lexeme(_text(qualifier)[:-1])
        matched: _Source | None = None
        level: _Scope | None = scope
        while level is not None:
            named = [s for s in level.sources if s.name == qkey]
            hits = [s for s in named if s.has(key, True)]
            if len(hits) == 1:
                if key in hits[0].columns:
                    self._read(hits[0], key, span, "reference")
                return level
            if len(hits) > 1:
                self._ambiguous(column, span, hits)
                return level
            if named and fold(key) in self.names.rowid and named[0].table is not None:
                self._rowid(named[0], span)
                self._rowid_outward(level.parent, span, qkey)
                return level
            matched = matched or (named[0] if named else None)
            level = level.parent
        if matched is None:
            self._unknown_qualifier(qualifier, span, scope)
            return None
        table = matched.table.name if matched.table is not None else None
        self._violation(
            ViolationKind.UNKNOWN_COLUMN,
            span,
            f"no column named {_name(column)} in {matched.label}; "
            f"its columns: {', '.join(matched.columns.values()) or 'none'}",
            table,
            _name(column),
        )
        return None

    def _boolean_name(self, token: Token, scope: _Scope) -> None:
        """SQLite's TRUE and FALSE are names first: a column so named in scope is read
        (and checked); with none they are 1 and 0."""
        key = self.names.token(token)
        level: _Scope | None = scope
        while level is not None:
            if any(s.has(key, False) for s in level.sources):
                self.column_ref(token, None, _span(token), scope, dq_fallback=False)
                return
            level = level.parent

    def _rowid_outward(self, level: _Scope | None, span: Span, qualifier: str = "") -> None:
        """A row id resolved in a nested scope is read from the enclosing scopes' base
        tables too (those named ``qualifier``, when it is qualified): where the table
        it resolved to is WITHOUT ROWID, which the checker cannot see, SQLite resolves
        the name outward."""
        while level is not None:
            for source in level.sources:
                if source.table is not None and (not qualifier or source.name == qualifier):
                    self._rowid(source, span)
            level = level.parent

    def _rowid(self, source: _Source, span: Span) -> None:
        """A row id read: the column it aliases when known, else the pseudo-column."""
        table = source.table
        if table is None:
            return
        if table.rowid is not None:
            self._access(table, table.rowid, span, "reference")
        else:
            self.accesses.append(ColumnAccess(table.name, "rowid", span, "rowid"))

    # -- violations -------------------------------------------------------------------

    def _unknown_table(self, token: Token) -> None:
        known = ", ".join(t.name for t in self.tables.values())
        self._violation(
            ViolationKind.UNKNOWN_TABLE,
            _span(token),
            f"no table named {_name(token)}; tables: {known or 'none'}",
            _name(token),
        )

    def _unknown_qualifier(self, qualifier: Token, span: Span, scope: _Scope) -> None:
        name = unquote(_text(qualifier)[:-1])
        names: list[str] = []
        level: _Scope | None = scope
        while level is not None:
            names += [s.label for s in level.sources if s.name]
            level = level.parent
        self._violation(
            ViolationKind.UNKNOWN_QUALIFIER,
            span,
            f"no table or alias named {name} in scope; in scope: {', '.join(names) or 'none'}"
            + self._cte_note(),
            name,
        )

    def _ambiguous(self, column: Token, span: Span, sources: Sequence[_Source]) -> None:
        name = _name(column)
        labels = tuple(s.label for s in sources)
        qualified = " or ".join(f"{s.label.split(' AS ')[-1]}.{name}" for s in sources)
        where = ", ".join(labels[:-1]) + " and " + labels[-1]
        self._violation(
            ViolationKind.AMBIGUOUS_COLUMN,
            span,
            f"column {name} is ambiguous: it is in {where}; qualify it as {qualified}",
            None,
            name,
            labels,
        )


_RESULT_TOKENS = frozenset({"STAR", "QUALIFIER", "AS", "ALIAS_NAME"})


def _width_words(n: int) -> tuple[str, str]:
    """How a column-count message names a width ``n``: what is expected, what to write."""
    return ("one value", "one column") if n == 1 else (f"a row of {n} values", f"{n} columns")


@dataclass(frozen=True)
class _Unresolved:
    """A mark in :meth:`_Walker.expr`'s stack: the violations from ``mark`` on are
    of a subtree SQLite never resolves (what it would read is still recorded)."""

    mark: int


def _dropped_by_parser(node: Tree, dialect: Dialect) -> list[Tree]:
    """The subtrees of ``node`` that SQLite's parser replaces by a constant before
    it resolves any name (nothing else of ``node`` is resolved): the left operand
    of ``x [NOT] IN ()``; with `Dialect.and_zero_folds`, both operands of an AND
    one of which is the integer literal 0 (``0 AND x`` becomes 0, see
    :func:`_folds_to_zero`). None for any other node."""
    left = _left_of_empty_in(node)
    if left is not None:
        return [left]
    if node.data == "and_expr" and dialect.and_zero_folds and _folds_to_zero(node):
        return _trees(node)
    return []


def _left_of_empty_in(node: Tree) -> Tree | None:
    """The left operand of ``x [NOT] IN ()``; None for any other node."""
    if node.data != "predicate":
        return None
    trees = _trees(node)
    if len(trees) == 2 and trees[1].data == "in_target" and not trees[1].children:
        return trees[0]
    return None


def _folds_to_zero(node: Tree | Token) -> bool:
    """SQLite's parser (``sqlite3ExprAnd``) makes ``x AND y`` the literal 0 when
    ``x`` or ``y`` is one: an integer literal of value 0 (``0``, ``00``; not
    ``0.0``, ``-0`` or FALSE, which it reads as a name), ``x IN ()`` (which its
    parser makes the literal 0; ``x NOT IN ()`` is 1), or such an AND.
    Parentheses are not in the tree. An explicit stack: a chain of ANDs costs
    no Python stack."""
    todo = [node]
    while todo:
        here = todo.pop()
        if _is_token(here):
            continue
        if here.data == "literal":
            token = here.children[0]
            if _is_token(token) and token.type == "NUMBER" and set(str(token)) == {"0"}:
                return True
        elif here.data == "and_expr":
            todo += _trees(here)
        elif _left_of_empty_in(here) is not None and "NOT" not in {t.type for t in _tokens(here)}:
            return True  # `x IN ()`
    return False


def _names_table(target: Tree) -> bool:
    """Whether an ``in_target`` is a table (``x IN t``)."""
    return any(t.type == "TABLE_NAME" for t in _tokens(target))


#: `Dialect.values_column_names` -> (prefix, first number) of a VALUES list's names.
_VALUES_NAMES = {"column1": ("column", 1), "col0": ("col", 0)}

#: The words of a cast that are no operand (``CAST(x AS t)``).
_CAST_WORDS = frozenset({"CAST", "AS", "LPAR", "RPAR"})

#: PostgreSQL's own names of the SQL type words (a cast's column name).
#: The most columns a common table may give (SQLite's default SQLITE_MAX_COLUMN;
#: PostgreSQL's target lists stop at 1,664): past it the statement is refused.
MAX_WIDTH = 2000

# Calls PostgreSQL's grammar rewrites, by the name of the function it calls:
# `trim(x)` is btrim(x) (LEADING and TRAILING, which the grammar here lacks,
# would be ltrim and rtrim).
_PG_CALL_NAMES = {"trim": "btrim"}

_PG_TYPE_NAMES = {
    "int": "int4", "integer": "int4", "smallint": "int2", "bigint": "int8",
    "real": "float4", "float": "float8", "double precision": "float8",
    "boolean": "bool", "decimal": "numeric", "char": "bpchar", "character": "bpchar",
    "character varying": "varchar", "time with time zone": "timetz",
    "time without time zone": "time", "timestamp with time zone": "timestamptz",
    "timestamp without time zone": "timestamp",
}  # fmt: skip


def _by_position(new: list[tuple[str, str]], columns: dict[str, str]) -> dict[str, str]:
    """``columns`` (key -> spelling, in order) renamed by a column list ``new``: the
    first columns take its names, the rest keep theirs; a key given twice names
    its first position (SQL calls a reference to it ambiguous). A list longer than
    the columns keeps its extra names too (where the dialect refuses that, a
    violation says so elsewhere)."""
    out: dict[str, str] = {}
    for key, spelling in new + list(columns.items())[len(new) :]:
        out.setdefault(key, spelling)
    return out


def _first_token(tree: Tree) -> Token | None:
    """The first token of ``tree`` in reading order."""
    for child in tree.children:
        found = child if _is_token(child) else _first_token(child)
        if found is not None:
            return found
    return None


def _first_result_column(tree: Tree) -> Tree | None:
    """The first result column of the first SELECT core under ``tree`` (a scalar
    subquery), its WITH clause and nested subqueries aside; None for ``*``."""
    node: Tree | None = tree
    while node is not None and node.data not in ("select_core", "result_columns"):
        node = next((c for c in _trees(node) if c.data != "with_clause"), None)
    if node is not None and node.data == "select_core":
        node = _child(node, "result_columns")
    return None if node is None else next(iter(_trees(node)), None)


def _bare_name(expr: Tree | Token) -> bool:
    """An unqualified column reference standing alone (SQLite's TK_ID term)."""
    return not _is_token(expr) and expr.data == "column_ref" and len(expr.children) == 1


def _flatten_compound(tree: Tree) -> Iterator[Tree]:
    if tree.data == "compound_select":
        for child in _trees(tree):
            if child.data != "compound_operator":
                yield from _flatten_compound(child)
    else:
        yield tree


# ================================================================ stage 3: policy


class SemanticChecker:
    """Checks statements against one schema and the grants of its roles.

    ``schema`` maps each table to its columns; ``grants`` maps each role to the
    tables it may use and, per table, the granted columns (None: all). Names are
    compared by ASCII case folding. Grants naming a table or column the schema
    lacks raise `GrantError`; a schema naming one thing twice raises `SchemaError`,
    as do ``rowid_aliases`` naming a table or column the schema lacks.

    ``hidden`` and ``generated`` map a table to its columns of those kinds
    (:class:`~grid_sql.schema.Column`'s flags; :meth:`for_schema` passes them):
    a hidden column is read by name only (not by ``*``, NATURAL JOIN, ``x IN t``
    or an INSERT without a column list), a generated one is not written by an
    INSERT without a column list. Both are columns, and grants cover them.

    ``rowid_aliases`` maps a table to the column its row id aliases (SQLite's
    INTEGER PRIMARY KEY), when known: reading ``rowid`` then reads that column.
    For any other table, ``rowid`` is a pseudo-column: granted by a grant of every
    column (None) or by a grant that lists ``rowid`` itself.
    """

    def __init__(
        self,
        schema: Schema,
        grants: Grants,
        *,
        dialect: str | Dialect = "sqlite",
        rowid_aliases: Mapping[str, str] | None = None,
        hidden: Mapping[str, Collection[str]] | None = None,
        generated: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.dialect = get_dialect(dialect) if isinstance(dialect, str) else dialect
        gaps = contract_gaps(self.dialect)
        if gaps:
            raise GrammarContractError(self.dialect.name, f"its grammar lacks {', '.join(gaps)}")
        self._names = _Names.of(self.dialect)
        self._tables = _catalog(
            schema, rowid_aliases or {}, self._names, hidden or {}, generated or {}
        )
        self._grants = {
            role: _role_grants(self._tables, role, grants, self._names) for role in grants
        }

    @classmethod
    def for_schema(
        cls, schema: SchemaSnapshot, grants: Grants, *, dialect: str | Dialect | None = None
    ) -> SemanticChecker:
        """The checker of a snapshot's relations and columns, its hidden and
        generated columns flagged (``dialect``: the snapshot's by default)."""

        def flagged(flag: str) -> dict[str, list[str]]:
            return {t.name: [c.name for c in t.columns if getattr(c, flag)] for t in schema.tables}

        tables = {t.name: t.column_names for t in schema.tables}
        return cls(
            tables,
            grants,
            dialect=dialect if dialect is not None else schema.dialect,
            hidden=flagged("hidden"),
            generated=flagged("generated"),
        )

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self._grants)

    def granted_columns(self, role: str, table: str) -> tuple[str, ...] | None:
        """The columns of ``table`` granted to ``role`` in schema order; every
        column when the grant is None; () when the table is not granted."""
        grants = self._role(role)
        entry = self._tables.get(self._names.catalog(table))
        if entry is None or entry.key not in grants:
            return ()
        allowed = grants[entry.key]
        return tuple(n for k, n in entry.columns.items() if allowed is None or k in allowed)

    def granted_tables(self, role: str) -> tuple[str, ...]:
        """The tables granted to ``role``, in schema order."""
        grants = self._role(role)
        return tuple(t.name for t in self._tables.values() if t.key in grants)

    def table_columns(self, table: str) -> tuple[str, ...]:
        """The schema's columns of ``table`` (() when it has no such table)."""
        entry = self._tables.get(self._names.catalog(table))
        return tuple(entry.columns.values()) if entry is not None else ()

    def analyze(self, sql: str | bytes) -> Analysis:
        """Resolve every name of one statement (stage 2); no role is involved."""
        data = sql.encode("utf-8") if isinstance(sql, str) else sql
        walker = _Walker(self._tables, data, self._names, self.dialect)
        try:
            tree = parse_statement(data, self.dialect)
            walker.statement(tree)
        except RecursionError:
            raise StatementTooDeepError(len(data)) from None
        placed = aggregate_placements(tree, self.dialect, walker.refs)
        if any(p.outer for p in placed.values()):
            # An enclosing query's aggregate decides what its own clauses evaluate
            # (`EXISTS (SELECT sum(t.a + (SELECT c, d ...)) ...)` evaluates none of
            # it): walk again knowing the owners, which name resolution found.
            walker = _Walker(self._tables, data, self._names, self.dialect, placed)
            walker.statement(tree)
        skip = walker.unresolved
        walker.violations += call_violations(tree, self.dialect, skip, placed)
        walker.violations += row_violations(tree, self.dialect, skip, placed)
        return Analysis(
            tuple(walker.uses), tuple(walker.accesses), tuple(_sorted(walker.violations))
        )

    def check(self, sql: str | bytes, role: str) -> list[Violation]:
        """Every violation of one statement for ``role``, sorted by span.

        Raises `StatementParseError` if the statement does not parse,
        `StatementTooDeepError` if it nests deeper than the walk can follow and
        `GrantError` for a role without grants.
        """
        grants = self._role(role)
        analysis = self.analyze(sql)
        found = list(analysis.violations)
        refused: set[str] = set()
        for use in analysis.tables:
            key = self._names.catalog(use.table)
            if key not in grants:
                refused.add(key)
                granted = ", ".join(self.granted_tables(role)) or "none"
                found.append(
                    Violation(
                        ViolationKind.TABLE_NOT_GRANTED,
                        use.table,
                        None,
                        use.span,
                        f"table {use.table} is not granted to role {role}; "
                        f"granted tables: {granted}",
                    )
                )
        for access in analysis.accesses:
            key = self._names.catalog(access.table)
            if key in refused:
                continue  # reported once, as the table
            allowed = grants[key]
            if allowed is None or self._names.catalog(access.column) in allowed:
                continue
            if access.via == "rowid" and {fold(c) for c in allowed} & self._names.rowid:
                continue
            found.append(
                Violation(
                    ViolationKind.COLUMN_NOT_GRANTED,
                    access.table,
                    access.column,
                    access.span,
                    self._message(access, role),
                    access.via,
                )
            )
        return _sorted(found)

    def _role(self, role: str) -> _RoleGrants:
        try:
            return self._grants[role]
        except KeyError:
            raise GrantError(role) from None

    def _message(self, access: ColumnAccess, role: str) -> str:
        column, table = access.column, access.table
        granted = ", ".join(self.granted_columns(role, table) or ()) or "none"
        what = {
            "reference": f"column {column} of {table}",
            "star": f"* expands to column {column} of {table}, which",
            "row": f"the whole-row reference to {table} reads its column {column}, which",
            "using": f"USING compares column {column} of {table}, which",
            "natural": f"NATURAL JOIN compares column {column} of {table}, which",
            "in_table": f"IN {table} reads every column of {table}, including {column}, which",
            "insert": f"INSERT writes column {column} of {table}, which",
            "update": f"UPDATE writes column {column} of {table}, which",
            "rowid": f"the row id of {table}, which may alias a restricted column,",
        }[access.via]
        hint = "; list granted columns instead" if access.via == "star" else ""
        return f"{what} is not granted to role {role}; granted: {granted}{hint}"


def _sorted(violations: Iterable[Violation]) -> list[Violation]:
    unique = dict.fromkeys(violations)
    return sorted(unique, key=lambda v: (v.span, v.kind, v.table or "", v.column or ""))


def check_statement(
    sql: str | bytes,
    schema: Schema,
    grants: Grants,
    role: str,
    *,
    dialect: str | Dialect = "sqlite",
    rowid_aliases: Mapping[str, str] | None = None,
    hidden: Mapping[str, Collection[str]] | None = None,
    generated: Mapping[str, Collection[str]] | None = None,
) -> list[Violation]:
    """One-shot form of `SemanticChecker.check` (the keywords are its constructor's)."""
    checker = SemanticChecker(
        schema,
        grants,
        dialect=dialect,
        rowid_aliases=rowid_aliases,
        hidden=hidden,
        generated=generated,
    )
    return checker.check(sql, role)


__all__ = [
    "CONTRACT_RULES",
    "CONTRACT_TERMINALS",
    "AccessKind",
    "Analysis",
    "CheckerError",
    "ColumnAccess",
    "GrammarContractError",
    "GrantError",
    "Grants",
    "Schema",
    "SchemaError",
    "SemanticChecker",
    "StatementParseError",
    "StatementTooDeepError",
    "TableUse",
    "Violation",
    "ViolationKind",
    "check_statement",
    "contract_gaps",
    "fold",
    "full_grants",
    "parse_statement",
    "unquote",
]
