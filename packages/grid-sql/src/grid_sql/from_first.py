"""The FROM-first profile: generate `FROM t SELECT ...`, run `SELECT ... FROM t`.

In FROM-first SQL the tables of a SELECT are fixed before its select list, so a
left-to-right mask can know the tables in scope at every column position
(proofs/FromFirst.v: the premise of the column-policy impossibility, a state
merging prefixes that differ in a column read before the table, does not hold).
DuckDB parses FROM-first SELECTs itself (grid-duckdb's grammar has them).
SQLite and PostgreSQL do not: their FROM-first profiles (`FROM_FIRST`) are their
grammars plus a FROM-first SELECT core (`dialects/<name>_from_first.lark`), and a
statement accepted in a profile is rewritten SELECT-first (`to_select_first`)
before it runs.

The rewrite works on the profile's parse tree (`grid_sql.checker.parse_statement`)
and moves text, never re-spells it: every FROM-first SELECT core, nested ones
included, becomes `SELECT <quantifier> <columns> FROM <sources> <rest>`, where
every piece is the statement's own bytes. Each moved piece starts and ends at a
token, so a line comment never swallows what follows it; the blanks and
comments between the FROM clause and SELECT are dropped. `to_from_first` is the inverse, for
tests and benchmarks (a SELECT-first statement with its cores turned FROM-first).

Precondition: the statement is in the profile's language; a statement that is
not raises `StatementParseError`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grid_sql.checker import parse_statement
from grid_sql.dialect import Dialect
from grid_sql.dialects import POSTGRES, SQLITE

__all__ = ["FROM_FIRST", "from_first_of", "from_first_profile", "to_from_first", "to_select_first"]

Tree = Any  # lark.Tree


def from_first_profile(dialect: Dialect) -> Dialect:
    """``dialect`` with FROM-first SELECT cores (its `<name>_from_first.lark` delta)."""
    return dataclasses.replace(
        dialect,
        name=f"{dialect.name}_from_first",
        grammar_layers=(*dialect.grammar_layers, (dialect.grammar_package, dialect.grammar_file)),
        grammar_package="grid_sql.dialects",
        grammar_file=f"{dialect.name}_from_first.lark",
        corpus_file="",
    )


FROM_FIRST: dict[str, Dialect] = {d.name: from_first_profile(d) for d in (SQLITE, POSTGRES)}
"""The FROM-first profiles of the dialects that do not parse FROM-first SQL."""


def from_first_of(dialect: Dialect) -> Dialect | None:
    """The FROM-first profile of ``dialect``: itself when it parses FROM-first SQL
    (``Dialect.from_first_native``: DuckDB), its :data:`FROM_FIRST` profile, else None."""
    if dialect.from_first_native:
        return dialect
    return FROM_FIRST.get(dialect.name)


def _is_tree(node: Any) -> bool:
    return hasattr(node, "data")


def _span(node: Any) -> tuple[int, int]:
    if _is_tree(node):
        return int(node.meta.start_pos), int(node.meta.end_pos)
    return int(node.start_pos), int(node.end_pos)


def _joins(byte: bytes) -> bool:
    """Whether a lexeme starting with ``byte`` could run on from a word before it."""
    return bool(byte) and (byte.isalnum() or byte in b"_\"'`[$")


class _Renderer:
    """The statement's text with its SELECT cores reordered (see the module header)."""

    def __init__(self, data: bytes, from_first: bool) -> None:
        self.data = data
        self.from_first = from_first  # the direction: make cores FROM-first

    def node(self, tree: Tree) -> bytes:
        lo, hi = _span(tree)
        if tree.data == "select_core":
            kids = [c for c in tree.children if _is_tree(c) or c.type == "SELECT"]
            names = [c.data if _is_tree(c) else c.type for c in kids]
            if "from_clause" in names and "result_columns" in names:
                source = kids[names.index("from_clause")]
                columns = kids[names.index("result_columns")]
                select = kids[names.index("SELECT")]
                first = names.index("from_clause") == 0
                if first and not self.from_first:  # FROM s SELECT c REST -> SELECT c FROM s REST
                    head = self.range(tree, _span(select)[0], _span(columns)[1])
                    tail = self.range(tree, _span(columns)[1], hi)
                    if not tail and _joins(self.data[hi : hi + 1]):
                        # the core ended at ``c`` and what follows touched it
                        # (``f(x)EXCEPT``): the moved source must not touch it
                        tail = b" "
                    return head + b" " + self.node(source) + tail
                if not first and self.from_first:  # SELECT c FROM s REST -> FROM s SELECT c REST
                    head = self.range(tree, lo, _span(columns)[1])
                    tail = self.range(tree, _span(source)[1], hi)
                    return self.node(source) + b" " + head + tail
        return self.range(tree, lo, hi)

    def range(self, tree: Tree, lo: int, hi: int) -> bytes:
        out, pos = [], lo
        for child in tree.children:
            if not _is_tree(child) or child.meta.empty:
                continue  # a token, or a tree of anonymous tokens only (kept in the gaps)
            start, end = _span(child)
            if start < lo or end > hi or start == end:
                continue
            out += [self.data[pos:start], self.node(child)]
            pos = end
        out.append(self.data[pos:hi])
        return b"".join(out)


def _rewrite(sql: str, dialect: Dialect, from_first: bool) -> str:
    data = sql.encode("utf-8")
    tree = parse_statement(data, dialect)
    lo, hi = _span(tree)
    text = data[:lo] + _Renderer(data, from_first).node(tree) + data[hi:]
    return text.decode("utf-8")


def to_select_first(sql: str, dialect: str | Dialect) -> str:
    """``sql``, a statement of a FROM-first profile (`FROM_FIRST[name]`, or a dialect
    value with FROM-first cores), with every FROM-first SELECT core rewritten
    SELECT-first: a statement of the base dialect."""
    profile = FROM_FIRST[dialect] if isinstance(dialect, str) else dialect
    return _rewrite(sql, profile, from_first=False)


def to_from_first(sql: str, dialect: str | Dialect) -> str:
    """``sql``, a statement of a dialect, with every SELECT core that has a FROM
    clause rewritten FROM-first: a statement of the dialect's FROM-first profile."""
    profile = FROM_FIRST[dialect] if isinstance(dialect, str) else dialect
    return _rewrite(sql, profile, from_first=True)
