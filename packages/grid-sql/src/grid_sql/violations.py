"""What the SemanticChecker reports: one `Violation` per problem, of a `ViolationKind`.

Four families of kinds, each from one stage of `grid_sql.checker`:

- **names** (the analysis): a table, column or qualifier that resolves nowhere,
  or a column two sources have;
- **statement rules** (the analysis, `grid_sql.call_rules` and the walk's
  column counts): what the database refuses at prepare time whatever the data,
  a call with the wrong number of arguments, a window function without OVER,
  an aggregate where none may be, a row value where none may be
  (`grid_sql.row_rules`), a subquery or compound SELECT with the wrong number
  of columns;
- **writes** (the analysis): a column no statement writes, generated or a
  virtual table's hidden column (`read_only_column`);
- **policy** (`SemanticChecker.check`): a table or column the role is not granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Span = tuple[int, int]
"""Byte offsets ``(start, end)`` into the UTF-8 encoding of the statement."""


class ViolationKind(StrEnum):
    UNKNOWN_TABLE = "unknown_table"
    """A table position names neither a schema table nor a CTE in scope."""
    UNKNOWN_COLUMN = "unknown_column"
    """A column reference resolves nowhere (also: a USING column missing on one side)."""
    UNKNOWN_QUALIFIER = "unknown_qualifier"
    """``q.c`` or ``q.*`` where no source in scope is named ``q``."""
    AMBIGUOUS_COLUMN = "ambiguous_column"
    """An unqualified column (or USING column) that two sources of one scope have."""
    WRONG_ARGUMENT_COUNT = "wrong_argument_count"
    """A known function called with a number of arguments it does not take."""
    CONSTANT_ARGUMENT = "constant_argument"
    """An argument the database reads as a constant when it prepares the statement is
    not one it takes (SQLite's ``likelihood(X, Y)``: Y a float literal from 0.0 to 1.0)."""
    MISUSED_WINDOW = "misused_window"
    """A window-only function without OVER, or a window call in WHERE, GROUP BY or HAVING."""
    MISUSED_AGGREGATE = "misused_aggregate"
    """An aggregate inside another aggregate's arguments, or in the WHERE or GROUP BY
    of a SELECT it cannot belong to another SELECT from."""
    MISUSED_ROW_VALUE = "misused_row_value"
    """A row value ``(x, y, ...)`` where the dialect takes none: not compared with a
    row of its width (SQLite, `grid_sql.row_rules`)."""
    COLUMN_COUNT = "column_count"
    """A subquery that must give one column (or a row of n) gives another number, or
    the SELECTs of a compound give different numbers."""
    DUPLICATE_NAME = "duplicate_name"
    """A name given twice where each must be new: two common tables of one WITH clause."""
    TABLE_NOT_GRANTED = "table_not_granted"
    """The role has no grant on a table the statement uses."""
    COLUMN_NOT_GRANTED = "column_not_granted"
    """The statement reads or writes a column the role is not granted."""
    READ_ONLY_COLUMN = "read_only_column"
    """An INSERT column list or UPDATE SET names a column no statement writes: a
    generated column (SQLite and DuckDB refuse it) or a virtual table's hidden
    column (SQLite's FTS5 runs a write to it as a command: ``'delete-all'``
    empties the table, so a role with INSERT alone would delete)."""


STATEMENT_RULES = frozenset({
    ViolationKind.WRONG_ARGUMENT_COUNT,
    ViolationKind.CONSTANT_ARGUMENT,
    ViolationKind.MISUSED_WINDOW,
    ViolationKind.MISUSED_AGGREGATE,
    ViolationKind.MISUSED_ROW_VALUE,
    ViolationKind.COLUMN_COUNT,
    ViolationKind.DUPLICATE_NAME,
})  # fmt: skip
"""The kinds a database refuses whatever the names and grants (the module header)."""


AccessKind = Literal[
    "reference", "star", "row", "using", "natural", "in_table", "insert", "update", "rowid"
]


@dataclass(frozen=True)
class Violation:
    """One problem, with the byte span it is about and a one-line message.

    ``table`` and ``column`` are spelled as the schema spells them when they
    exist, as the statement spells them otherwise; None when not applicable.
    ``candidates`` lists the sources an ambiguous column could come from.
    """

    kind: ViolationKind
    table: str | None
    column: str | None
    span: Span
    message: str
    via: AccessKind | None = None
    candidates: tuple[str, ...] = ()


__all__ = ["STATEMENT_RULES", "AccessKind", "Span", "Violation", "ViolationKind"]
