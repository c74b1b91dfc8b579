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
- in CASE: a result (THEN, ELSE) or, with no operand, a WHEN condition; with
  an operand, the operand or a WHEN value where the two are not rows of one
  width (SQLite compares them as ``operand = value``);
- anywhere else (an UPDATE's ``SET c = (x, y)``, an element of a VALUES row, a
  select-list column, a call's argument, ...);
- inside another row value, unless the outermost row is an operand of ``=``,
  ``==``, ``IS`` or ``IS NOT DISTINCT FROM`` that is a term of a WHERE or ON
  clause (the whole condition, or one side of its ANDs) and the other operand
  is a row of the same shape: rows at the same places, of the same widths, a
  subquery standing for a row of its width. SQLite splits such a term into one
  comparison per value; anywhere else it refuses a row inside a row (``(a, (b,
  c)) = (1, (2, 3))`` runs as a WHERE term, not in a select list, under OR or
  NOT, or with ``<>``).

A row compared with a subquery is left to the checker's column counts.

SQLite refuses most of these only when it evaluates the statement; it
compares widths when it resolves names (the operands of a comparison, not
``x IS [NOT] NULL``, which it reads as ISNULL; of BETWEEN; the left of ``x IN
(c)``, which its parser makes ``x = +c`` for one constant element ``c``) and
checks an IN list against a row on its left when it parses. In a clause it
never evaluates (`grid_sql.call_rules.unevaluated_nodes`: ``SELECT count(*)
FROM t ORDER BY (a, b)`` runs) only those are refused, and the checker's column
counts there likewise judge only :func:`resolved_operands`.

Policy (as `grid_sql.call_rules`): flag only what SQLite 3.40 refuses at
prepare time; the tests replay every case, flagged or not, there.

Grammar contract: ``row_constructor`` (an ``expr`` and an ``expr_list``),
``predicate`` and ``comparison`` (operands, then ``equality_operator`` /
``comparison_operator`` or the keyword tokens), ``in_target``,
``scalar_subquery``, ``expr_list``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from grid_sql.call_rules import Placement, unevaluated_nodes
from grid_sql.dialect import Dialect, ascii_lower
from grid_sql.violations import Violation, ViolationKind

Tree = Any  # lark.Tree

__all__ = ["compared_operands", "resolved_operands", "row_values", "row_violations", "row_width"]

_OPERATORS = ("equality_operator", "comparison_operator")
_POSTFIX = frozenset({"LIKE", "GLOB", "ISNULL", "NOTNULL", "NULL"})
_NOT_COMPARED = "a row value is compared only with a row of its width"
_ONE_VALUE = "a row value is allowed only in a comparison"
_NESTED = (
    "a row inside a row value is allowed only in a WHERE or ON term `(...) = (...)` "
    "or `IS`, against a row of the same shape"
)
# Where a term of a WHERE or ON clause begins, and what keeps it one (AND).
_TERM_CLAUSES = frozenset({"where_clause", "join_constraint"})


def row_violations(
    tree: Tree,
    dialect: Dialect,
    skip: Collection[int] = frozenset(),
    placements: Mapping[int, Placement] | None = None,
) -> list[Violation]:
    """The row values of ``tree`` that the module header refuses, in walk order,
    outside the subtrees whose ids are in ``skip`` (the bodies of unused CTEs);
    none unless ``dialect.row_values_compared_only``. ``placements`` are the
    aggregate calls' owners (`grid_sql.call_rules.aggregate_placements`): an
    enclosing query may evaluate its aggregates inside a clause that is never
    evaluated. An explicit stack, as the checker's: expression depth
    costs no Python stack."""
    if not dialect.row_values_compared_only:
        return []
    found: list[Violation] = []
    judged: set[int] = set()  # rows a comparison or IN has decided on
    nested_ok: set[int] = set()  # rows inside rows that a WHERE or ON term compares
    unevaluated: set[int] = set()  # nodes the database does not evaluate
    moved: set[int] = set()  # HAVING terms SQLite moves into its WHERE
    # (node, its parent's data, its grandparent's, whether it is a WHERE or ON term)
    todo: list[tuple[Tree, str | None, str | None, bool]] = [(tree, None, None, False)]
    while todo:
        node, parent, grandparent, term = todo.pop()
        if not hasattr(node, "data") or id(node) in skip:
            continue
        term = term or id(node) in moved
        if node.data == "select_core":
            moved |= _having_terms_moved(node)
        evaluated = id(node) not in unevaluated
        if node.data in ("predicate", "comparison"):
            found += _operands(node, judged, evaluated)
            if term:
                nested_ok |= _nested_compared(node)
        elif node.data == "case_expr":
            found += _case(node, judged, evaluated)
        elif node.data == "row_constructor" and evaluated:
            # An operand is judged by its comparison; an element of a list is its
            # list's holder's business, and a row inside a row is judged here.
            holder = grandparent if parent == "expr_list" else parent
            if holder == "row_constructor":
                if id(node) not in nested_ok:
                    found.append(_misused(node, _NESTED))
            elif id(node) not in judged:
                found.append(_misused(node, _ONE_VALUE))
        if node.data == "select_stmt":
            exists = parent == "exists"
            unevaluated |= unevaluated_nodes(node, dialect, exists=exists, placements=placements)
        starts = node.data in _TERM_CLAUSES or (term and node.data == "and_expr")
        todo.extend((c, node.data, parent, starts) for c in reversed(node.children))
    return found


def _having_terms_moved(core: Tree) -> set[int]:
    """The AND terms of ``core``'s HAVING that SQLite moves into its WHERE, where it
    splits a compared row as in any WHERE term (``havingToWhere``: under a GROUP BY,
    a term that reads only constants and GROUP BY terms). Taken here: a term that
    reads no column but one the GROUP BY lists as a plain column reference (the
    same spelling, ASCII case folded), and holds no call, subquery, ``"x"``
    (possibly a string), LIKE, GLOB or CURRENT_* (a conservative subset: a term
    left out keeps its rows refused)."""
    clauses = {c.data: c for c in core.children if hasattr(c, "data")}
    group, having = clauses.get("group_by_clause"), clauses.get("having_clause")
    if group is None or having is None:
        return set()
    keys = {
        _column_key(e)
        for e in group.children[-1].children
        if getattr(e, "data", None) == "column_ref"
    } - {None}
    terms, todo = [], [having.children[-1]]
    while todo:
        node = todo.pop()
        if getattr(node, "data", None) == "and_expr":
            todo += [c for c in node.children if hasattr(c, "data")]
        else:
            terms.append(node)
    return {id(t) for t in terms if _constant(t, keys)}


def _column_key(ref: Tree) -> str | None:
    """A column reference's spelling, ASCII case folded; None for a ``"x"``."""
    words = list(ref.scan_values(lambda _: True))
    if any(getattr(w, "type", None) in _NOT_CONSTANT_WORDS for w in words):
        return None
    return ascii_lower("".join(str(w) for w in words))


def _constant(tree: Tree, keys: Collection[str | None] = frozenset()) -> bool:
    """Whether ``tree`` is constant to SQLite, but for the column references whose
    :func:`_column_key` is in ``keys``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if not hasattr(node, "data"):
            if node.type in _NOT_CONSTANT_WORDS:
                return False
            continue
        if node.data == "column_ref":
            if _column_key(node) not in keys:
                return False
            continue
        if node.data in _NOT_CONSTANT or _values_subquery(node):
            return False
        todo.extend(node.children)
    return True


def _nested_compared(node: Tree) -> set[int]:
    """The rows inside the row operands of ``node`` (a predicate or comparison that
    is a WHERE or ON term) that SQLite takes: it splits ``(a, (b, c)) = (1, (2,
    3))`` (or ``IS``, ``IS NOT DISTINCT FROM``) into one term per value when the
    two rows have one shape (a subquery stands for a row of its width)."""
    trees, words, _ = _shape(node)
    operators = {
        str(t) for c in node.children if getattr(c, "data", None) == "equality_operator"
        for t in c.children
    }  # fmt: skip
    equal = operators <= {"=", "=="} and (
        bool(operators) != ("IS" in words)
        and ("DISTINCT" in words) == ("NOT" in words)
        and not words & _POSTFIX
    )
    if not equal or len(trees) != 2 or not all(_is_row(t) for t in trees):
        return set()
    if not _same_shape(*trees):
        return set()
    rows: set[int] = set()
    todo = [c for t in trees for c in row_values(t)]
    while todo:
        element = todo.pop()
        if _is_row(element):
            rows.add(id(element))
            todo += row_values(element)
    return rows


def row_values(row: Tree) -> list[Any]:
    """The values of a ``row_constructor``, in order."""
    return [row.children[0], *row.children[1].children]


def _same_shape(left: Any, right: Any) -> bool:
    """Whether two rows hold rows at the same places, of the same widths (a
    subquery against a row: its width is the column counts' business)."""
    if _is_row(left) and _is_row(right):
        pairs = zip(row_values(left), row_values(right), strict=False)
        return row_width(left) == row_width(right) and all(_same_shape(a, b) for a, b in pairs)
    if _is_row(left) or _is_row(right):
        other = right if _is_row(left) else left
        return getattr(other, "data", None) == "scalar_subquery"
    return True


def compared_operands(node: Tree) -> list[Tree]:
    """The operands of a ``predicate`` or ``comparison`` node that SQLite compares
    as rows of one width, which it checks when it resolves names: a comparison's
    two (not ``x IS [NOT] NULL``'s, which it reads as a test of one value) and
    BETWEEN's three. None for any other node."""
    trees, words, compared = _shape(node)
    if "IN" in words:
        return []
    if "BETWEEN" in words and len(trees) == 3:
        return trees
    if compared and len(trees) == 2 and not ("IS" in words and _null(trees[1])):
        return trees
    return []


def resolved_operands(node: Tree) -> list[Tree]:
    """The operands of a ``predicate`` or ``comparison`` node whose widths SQLite
    compares when it resolves names (the module header): :func:`compared_operands`,
    and the left of ``x [NOT] IN (c)`` with one constant element ``c``."""
    trees, words, _ = _shape(node)
    if "IN" in words and len(trees) == 2:
        elements = _in_list(trees[1])
        single = len(elements) == 1 and hasattr(elements[0], "data") and _constant(elements[0])
        return [trees[0]] if single else []
    return compared_operands(node)


def _shape(node: Tree) -> tuple[list[Tree], set[str], bool]:
    """A predicate or comparison node's operand trees, keyword tokens, and whether
    it compares its two operands (an operator, or IS; not a postfix test)."""
    trees = [c for c in node.children if hasattr(c, "data") and c.data not in _OPERATORS]
    words = {c.type for c in node.children if not hasattr(c, "data")}
    compared = (
        any(hasattr(c, "data") and c.data in _OPERATORS for c in node.children) or "IS" in words
    ) and not words & _POSTFIX
    return trees, words, compared


def _operands(node: Tree, judged: set[int], evaluated: bool) -> list[Violation]:
    """Judge the row operands of one predicate or comparison node; mark them judged.
    Where the database does not evaluate it (``evaluated`` false) only what it
    refuses before: :func:`resolved_operands`, and an IN list against a row."""
    trees, words, compared = _shape(node)
    rows = [t for t in trees if t.data == "row_constructor"]
    judged.update(id(r) for r in rows)
    if "IN" in words and len(trees) == 2:
        elements = _in_list(trees[1])
        judged.update(id(e) for e in elements if hasattr(e, "data"))
        if not evaluated and trees[0].data != "row_constructor":
            return []  # `x IN ((1, 2))`: x = +(1, 2), a width of one
        return _in(trees[0], elements)
    if not rows:
        return []
    if "BETWEEN" in words and len(trees) == 3:
        # x BETWEEN lo AND hi: the two comparisons x >= lo and x <= hi (a row x
        # that both refuse is one violation: equal violations are one key).
        x, lo, hi = trees
        return list(dict.fromkeys(v for v in (_compare(x, lo), _compare(x, hi)) if v))
    if compared and len(trees) == 2 and (evaluated or resolved_operands(node)):
        found = _compare(*trees)
        return [found] if found else []
    return [_misused(row, _NOT_COMPARED) for row in rows] if evaluated else []


def _case(node: Tree, judged: set[int], evaluated: bool) -> list[Violation]:
    """Judge the row values a ``case_expr`` holds directly; mark them judged. SQLite
    checks them only when it evaluates the CASE (``evaluated``): a result is one
    value; without an operand so is a condition; with one, ``CASE x WHEN y``
    compares ``x = y``."""
    operand, otherwise, whens, after_else = None, None, [], False
    for c in node.children:  # CASE operand? when_clause+ (ELSE otherwise)? END
        if not hasattr(c, "data") and c.type in ("CASE", "ELSE", "END"):
            after_else = after_else or c.type == "ELSE"
        elif hasattr(c, "data") and c.data == "when_clause":
            whens.append(c)
        elif after_else:
            otherwise = c
        else:
            operand = c
    conditions = [w.children[1] for w in whens]  # WHEN condition THEN result
    results = [w.children[3] for w in whens] + ([otherwise] if otherwise is not None else [])
    held = [t for t in [operand, *conditions, *results] if t is not None]
    judged.update(id(t) for t in held if _is_row(t))
    if not evaluated:
        return []
    alone = results if operand is not None else results + conditions
    found = [_misused(t, _ONE_VALUE) for t in alone if _is_row(t)]
    if operand is not None:
        found += [v for v in (_compare(operand, c) for c in conditions) if v]
    return list(dict.fromkeys(found))


def _null(operand: Tree) -> bool:
    """Whether ``operand`` is the literal NULL (parentheses are not in the tree)."""
    return operand.data == "literal" and any(
        not hasattr(c, "data") and c.type == "NULL" for c in operand.children
    )


# What SQLite's parser does not take for a constant (sqlite3ExprIsConstant):
# names, calls, subqueries; a double-quoted word may be a column, CURRENT_DATE is a call.
_NOT_CONSTANT = frozenset(
    {"column_ref", "function_call", "aggregate_call", "scalar_subquery", "exists", "select_stmt"}
)
# LIKE and GLOB are calls of like() and glob() when SQLite parses them: not constant
# (`(SELECT c, d FROM u) IN (0 LIKE 0)` stays an IN; with `(1)` it becomes `= 1`).
_NOT_CONSTANT_WORDS = frozenset(
    {"DQ_STRING", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP", "LIKE", "GLOB"}
)


def _values_subquery(node: Tree) -> bool:
    """Whether ``node`` is ``(a, b) [NOT] IN (list)``, which SQLite's parser turns
    into an IN of a VALUES subquery (not constant: `x IN ((1, 2) IN ((1, 2)))`
    stays an IN)."""
    if node.data not in ("predicate", "comparison"):
        return False
    trees, words, _ = _shape(node)
    return "IN" in words and len(trees) == 2 and _is_row(trees[0]) and bool(_in_list(trees[1]))


def _is_row(node: Tree | Any) -> bool:
    """Whether an expression (a tree, or a token such as a parameter) is a row value."""
    return getattr(node, "data", None) == "row_constructor"


def _compare(left: Tree, right: Tree) -> Violation | None:
    """The row misused in the comparison of ``left`` with ``right`` (trees, or
    tokens standing for a value), if any."""
    rows = [t for t in (left, right) if _is_row(t)]
    if len(rows) == 2:
        if row_width(left) == row_width(right):
            return None
        message = (
            f"a row of {row_width(right)} values is compared with a row of {row_width(left)}; "
            "compare rows of one width"
        )
        return _misused(right, message)
    if not rows or "scalar_subquery" in (getattr(left, "data", None), getattr(right, "data", None)):
        return None  # no row, or a subquery's width: the checker's column counts
    return _misused(rows[0], _NOT_COMPARED)


def _in_list(target: Tree) -> list[Any]:
    """The elements of an ``in_target`` that is a list (none for a subquery or a table)."""
    lists = [c for c in target.children if hasattr(c, "data") and c.data == "expr_list"]
    return list(lists[0].children) if lists else []


def _in(left: Tree, elements: list[Any]) -> list[Violation]:
    """``left [NOT] IN (elements)``: a row on the left wants rows of its width, a
    value values."""
    width = row_width(left) if left.data == "row_constructor" else 1
    for element in elements:
        got = row_width(element) if getattr(element, "data", None) == "row_constructor" else 1
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


def row_width(row: Tree) -> int:
    """How many values ``(x, y, ...)`` holds: its ``expr`` and its ``expr_list``'s."""
    return 1 + len(row.children[1].children)


def _misused(node: Tree | Any, message: str) -> Violation:
    """The violation of a misused row value or element (a tree, or a token such as
    a parameter)."""
    at = node.meta if hasattr(node, "data") else node
    span = (int(at.start_pos), int(at.end_pos))
    return Violation(ViolationKind.MISUSED_ROW_VALUE, None, None, span, message)
