"""Statement rules for row values: where SQLite refuses ``(x, y, ...)``, whatever the data.

Purpose. Of SmolLM2's repaired statements over the whole Spider dev set, the
checker accepted four that SQLite then refused, all for a row value: ``(id,
Episode) IS NULL``, a row of numbers as the whole WHERE condition (twice), and
``(a, b, c, d, e) NOT IN (1, 2, ...)``. SQLite takes a row value only where it
is compared with another row, so for a dialect with
`Dialect.row_values_compared_only` this module refuses (``misused_row_value``)
a ``row_constructor`` that is:

- an operand of a comparison (``=``, ``==``, ``!=``, ``<>``, ``<``, ``<=``,
  ``>``, ``>=``, ``IS [NOT]``, ``IS [NOT] DISTINCT FROM``) whose other operand
  is a row of another width, or neither a row nor a subquery ("row value
  misused");
- the left of ``[NOT] IN`` with a list that holds an element other than a row
  of its width ("IN(...) element has 1 term - expected n"), or an element of
  an IN list whose left is not a row of its width;
- the operand of ``LIKE``, ``GLOB``, ``ISNULL``, ``NOTNULL`` or ``NOT NULL``;
- an operand of ``[NOT] BETWEEN`` that the comparisons ``x >= lo`` and
  ``x <= hi`` refuse as above;
- anywhere else, except the places the database judges (not flagged): inside
  another row value, in CASE and its WHEN, an UPDATE assignment or a VALUES
  row. A row compared with a subquery is left to the checker's column counts.

Policy (as `grid_sql.call_rules`): flag only what SQLite 3.40 refuses at
prepare time; the tests replay every case, flagged or not, there.

Grammar contract: ``row_constructor`` (an ``expr`` and an ``expr_list``),
``predicate`` and ``comparison`` (operands, then ``equality_operator`` /
``comparison_operator`` or the keyword tokens), ``in_target``,
``scalar_subquery``, ``expr_list``.
"""

from __future__ import annotations

from typing import Any

from grid_sql.dialect import Dialect
from grid_sql.violations import Violation, ViolationKind

Tree = Any  # lark.Tree

__all__ = ["row_violations"]

_OPERATORS = ("equality_operator", "comparison_operator")
_POSTFIX = frozenset({"LIKE", "GLOB", "ISNULL", "NOTNULL", "NULL"})
# Where a row value is left to the database: nested rows, CASE, UPDATE's SET and
# VALUES rows.
_LEFT_ALONE = frozenset({"row_constructor", "case_expr", "when_clause", "assignment", "row_value"})
_NOT_COMPARED = "a row value is compared only with a row of its width"


def row_violations(tree: Tree, dialect: Dialect) -> list[Violation]:
    """The row values of ``tree`` that the module header refuses, in walk order;
    none unless ``dialect.row_values_compared_only``. An explicit stack, as the
    checker's: expression depth costs no Python stack."""
    if not dialect.row_values_compared_only:
        return []
    found: list[Violation] = []
    judged: set[int] = set()  # rows a comparison or IN has decided on
    todo: list[tuple[Tree, str | None, str | None]] = [(tree, None, None)]
    while todo:
        node, parent, grandparent = todo.pop()
        if not hasattr(node, "data"):
            continue
        if node.data in ("predicate", "comparison"):
            found += _operands(node, judged)
        elif node.data == "row_constructor" and id(node) not in judged:
            # Not an operand (those are judged): an element of a list is its
            # list's holder's business.
            holder = grandparent if parent == "expr_list" else parent
            if holder not in _LEFT_ALONE:
                found.append(_misused(node, "a row value is allowed only in a comparison"))
        todo.extend((child, node.data, parent) for child in reversed(node.children))
    return found


def _operands(node: Tree, judged: set[int]) -> list[Violation]:
    """Judge the row operands of one predicate or comparison node; mark them judged."""
    trees = [c for c in node.children if hasattr(c, "data") and c.data not in _OPERATORS]
    words = {c.type for c in node.children if not hasattr(c, "data")}
    compared = (
        any(hasattr(c, "data") and c.data in _OPERATORS for c in node.children) or "IS" in words
    ) and not words & _POSTFIX
    rows = [t for t in trees if t.data == "row_constructor"]
    judged.update(id(r) for r in rows)
    if "IN" in words and len(trees) == 2:
        elements = _in_list(trees[1])
        judged.update(id(e) for e in elements if hasattr(e, "data"))
        return _in(trees[0], elements)
    if not rows:
        return []
    if "BETWEEN" in words and len(trees) == 3:
        # x BETWEEN lo AND hi: the two comparisons x >= lo and x <= hi (a row x
        # that both refuse is one violation: equal violations are one key).
        x, lo, hi = trees
        return list(dict.fromkeys(v for v in (_compare(x, lo), _compare(x, hi)) if v))
    if compared and len(trees) == 2:
        found = _compare(*trees)
        return [found] if found else []
    return [_misused(row, _NOT_COMPARED) for row in rows]


def _compare(left: Tree, right: Tree) -> Violation | None:
    """The row misused in the comparison of ``left`` with ``right``, if any."""
    rows = [t for t in (left, right) if t.data == "row_constructor"]
    if len(rows) == 2:
        if _width(left) == _width(right):
            return None
        message = (
            f"a row of {_width(right)} values is compared with a row of {_width(left)}; "
            "compare rows of one width"
        )
        return _misused(right, message)
    if not rows or "scalar_subquery" in (left.data, right.data):
        return None  # no row, or a subquery's width: the checker's column counts
    return _misused(rows[0], _NOT_COMPARED)


def _in_list(target: Tree) -> list[Any]:
    """The elements of an ``in_target`` that is a list (none for a subquery or a table)."""
    lists = [c for c in target.children if hasattr(c, "data") and c.data == "expr_list"]
    return list(lists[0].children) if lists else []


def _in(left: Tree, elements: list[Any]) -> list[Violation]:
    """``left [NOT] IN (elements)``: a row on the left wants rows of its width, a
    value values."""
    width = _width(left) if left.data == "row_constructor" else 1
    for element in elements:
        got = _width(element) if getattr(element, "data", None) == "row_constructor" else 1
        if got != width:
            expected = f"a row of {width}" if width > 1 else "one value"
            return [
                _misused(
                    element,
                    f"this IN list element has {got} value{'s' if got > 1 else ''} where "
                    f"{expected} is expected",
                )
            ]
    return []


def _width(row: Tree) -> int:
    """How many values ``(x, y, ...)`` holds: its ``expr`` and its ``expr_list``'s."""
    return 1 + len(row.children[1].children)


def _misused(node: Tree, message: str) -> Violation:
    span = (int(node.meta.start_pos), int(node.meta.end_pos))
    return Violation(ViolationKind.MISUSED_ROW_VALUE, None, None, span, message)
