"""Statement rules for calls: what the database refuses in a call, whatever the data.

Purpose. A statement in the role's language can still fail to prepare. Among
SmolLM2's mode-1 statements on Spider the checker accepted, every one that
failed did so for a rule of this module or a column count (the walk's, in
`grid_sql.checker`): `SIN( )`, `PERCENT_RANK(1, 1)`, `DENSE_RANK()` without
OVER. These rules let the checker refuse them with a stated violation, which
the repair pass feeds back. They read the parse tree only (no schema, no role):

- ``wrong_argument_count``: a function of `Dialect.function_arities` called
  with a number of arguments outside its bounds. ``f(*)`` is a call with no
  argument (SQLite's and DuckDB's reading); where `Dialect.star_only_aggregates`
  (PostgreSQL: "now(*) specified, but now is not an aggregate function"), it
  is also refused for a known function that is neither an aggregate nor a
  window function.
- ``misused_window``: a function of `Dialect.window_functions` called without
  OVER; where `Dialect.over_needs_window_or_aggregate`, a known function that is
  neither a window function nor an aggregate called with OVER (``abs(a) OVER
  ()``, ``max(a, b) OVER ()``); a windowed call (one with OVER) in WHERE, GROUP
  BY, HAVING or an UPDATE's SET; ``OVER name`` where the WINDOW clause of its
  SELECT core defines no ``name`` (in a SELECT's ORDER BY: of any of its cores;
  SQLite compares names as written, the others unquoted).
- ``misused_aggregate``: an aggregate call (no OVER) inside the arguments of
  another aggregate call (no OVER), not through a subquery; an aggregate call
  in the WHERE, GROUP BY or ON of a *free* SELECT core, or in the WHERE or SET
  of a free UPDATE: one that no enclosing expression holds (the statement's
  own cores, FROM subqueries and CTE bodies), so the aggregate cannot belong
  to an outer query. Where
  `Dialect.order_by_aggregates_need_aggregation` (SQLite), also an aggregate
  call in the ORDER BY of a free SELECT of one core that aggregates nothing
  else: a FROM clause, no GROUP BY, no HAVING, no aggregate call in its select
  list and no subquery an expression holds (whose aggregate could be the
  SELECT's own: ``SELECT a, (SELECT count(t.b) FROM u) FROM t ORDER BY
  count(a)`` runs). A SELECT without FROM (SQLite takes ``SELECT 1 ORDER BY
  count(1)``) or with a compound body is left to the database.
  Where `Dialect.having_needs_aggregation` (SQLite), also a HAVING clause in a
  SELECT with no GROUP BY and no aggregate call in its select list (and no
  subquery there, whose aggregate could be the SELECT's own).

The module also finds what SQLite resolves but never evaluates
(:func:`unevaluated_nodes`: the ORDER BY of a SELECT that returns one row, the
select list and ORDER BY of an EXISTS body), where the checker's column counts
and `grid_sql.row_rules` judge only what SQLite refuses before evaluating.

Policy: each rule flags only what SQLite 3.40 refuses at prepare time (measured
with EXPLAIN; the tests replay every flagged case there), and leaves alone what
is refused only in some readings. So an aggregate in the WHERE of a subquery
inside an expression is not flagged (PostgreSQL reads ``max(t.x)`` of an outer
``t`` there as the outer query's aggregate), nor is a window call inside an
aggregate's arguments, nor ``DISTINCT`` with two arguments.

Grammar contract besides the checker's: ``function_call`` (a ``FUNCTION_NAME``
lexeme ``name(``, then ``function_arguments`` or ``expr_list``), ``aggregate_call``
with ``aggregate_head`` (``COUNT`` or ``aggregate_function``), ``over_clause``,
``where_clause``, ``group_by_clause``, ``having_clause``, ``join_constraint``,
``scalar_subquery``, ``exists`` and ``in_target``; for the ORDER BY rule, a
``select_stmt`` whose children are its ``select_core`` (one core) and its
``order_by_clause``, the core's ``from_clause`` and ``result_columns``. A
dialect whose grammar names them otherwise gets no call rule, never a false
one.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from grid_sql.dialect import Dialect
from grid_sql.violations import Span, Violation, ViolationKind

Tree = Any  # lark.Tree

__all__ = ["call_violations", "unevaluated_nodes"]

# A node's clause, for the placement rules.
_CLAUSES = {
    "where_clause": "WHERE",
    "group_by_clause": "GROUP BY",
    "having_clause": "HAVING",
    "join_constraint": "ON",
    "assignment": "SET",
}
_NO_WINDOW = ("WHERE", "GROUP BY", "HAVING", "SET")
_NO_AGGREGATE = ("WHERE", "GROUP BY", "ON", "SET")
# Expression nodes whose SELECT is bound (it may read the enclosing query).
_BOUND = ("scalar_subquery", "exists", "in_target")
_ALWAYS_AGGREGATE = frozenset({"count", "sum", "avg"})
_ONE_ARGUMENT_AGGREGATE = frozenset({"min", "max"})


class _Context(NamedTuple):
    clause: str | None  # the clause of the innermost SELECT core the node is in
    bound: bool  # inside a SELECT that an expression holds
    aggregate: str | None  # the aggregate call whose arguments hold the node
    # the window names an `OVER name` here may read (None: outside any SELECT)
    windows: frozenset[str] | None = None


class _Call(NamedTuple):
    name: str  # lower case
    arguments: int | None  # None: not counted (COUNT's own forms)
    windowed: bool
    span: Span
    star: bool = False  # written f(*)


def call_violations(
    tree: Tree, dialect: Dialect, skip: Collection[int] = frozenset()
) -> list[Violation]:
    """The statement rules of the module header broken in ``tree``, in walk order,
    outside the subtrees whose ids are in ``skip`` (the bodies of unused CTEs,
    which the database never resolves).

    The walk keeps its own stack, as the checker's does: expression depth costs
    no Python stack."""
    found: list[Violation] = []
    todo: list[tuple[Tree, _Context]] = [(tree, _Context(None, False, None))]
    while todo:
        node, context = todo.pop()
        if not hasattr(node, "data") or id(node) in skip:
            continue
        data = node.data
        if data == "over_clause" and context.windows is not None:
            found += _unknown_window(node, context.windows, dialect)
        elif data == "select_stmt":
            windows = _window_names(_cores(node), dialect)
            context = _Context(None, context.bound, None, windows)
            if dialect.order_by_aggregates_need_aggregation and not context.bound:
                found += _order_by_aggregates(node, dialect)
        elif data == "select_core":
            context = context._replace(windows=_window_names([node], dialect))
            if dialect.having_needs_aggregation:
                found += _having_without_aggregation(node, dialect)
        elif data in _BOUND:
            context = context._replace(bound=True)
        elif data in _CLAUSES:
            context = context._replace(clause=_CLAUSES[data])
        elif data in ("function_call", "aggregate_call"):
            call = _call(node)
            if call is not None:
                found += _judge(call, context, dialect)
                if _is_aggregate(call, dialect):
                    context = context._replace(aggregate=call.name)
        todo.extend((child, context) for child in reversed(node.children))
    return found


def _window_key(token: Any, dialect: Dialect) -> str:
    """How a window name compares: as written, ASCII case folded, where
    `Dialect.window_names_as_written` (SQLite: ``OVER "w"`` does not read
    ``WINDOW w``); else unquoted and case folded, a loose key (no two names a
    dialect tells apart by quoting are told apart, so none is refused wrongly)."""
    text = str(token)
    if dialect.window_names_as_written:
        return text.lower()
    if len(text) >= 2 and text[0] in '"`[' and text[-1] in '"`]':
        text = text[1:-1]
    return text.casefold()


def _cores(select: Tree) -> list[Tree]:
    """The SELECT cores of a ``select_stmt`` itself (its compound's), not of the
    SELECTs nested in them."""
    out, todo = [], [select]
    while todo:
        node = todo.pop()
        for child in node.children:
            if hasattr(child, "data") and child.data == "select_core":
                out.append(child)
            elif hasattr(child, "data") and child.data == "compound_select":
                todo.append(child)
    return out


def _window_names(cores: list[Tree], dialect: Dialect) -> frozenset[str]:
    """The window names the WINDOW clauses of ``cores`` define (keys)."""
    return frozenset(
        _window_key(t, dialect)
        for core in cores
        for clause in core.children
        if hasattr(clause, "data") and clause.data == "window_clause"
        for window in clause.children
        if hasattr(window, "data") and window.data == "named_window"
        for t in window.children
        if not hasattr(t, "data") and t.type == "ALIAS_NAME"
    )


def _unknown_window(over: Tree, windows: frozenset[str], dialect: Dialect) -> list[Violation]:
    """``OVER name`` where the WINDOW clause of its SELECT core defines no
    ``name`` (for the SELECT's ORDER BY: of any of its cores); SQLite "no such
    window", PostgreSQL and DuckDB "window does not exist"."""
    for t in over.children:
        if (
            not hasattr(t, "data")
            and t.type == "ALIAS_NAME"
            and _window_key(t, dialect) not in windows
        ):
            span = (int(t.start_pos), int(t.end_pos))
            return [
                _violation(
                    ViolationKind.MISUSED_WINDOW,
                    span,
                    f"no window named {t} is defined: define it in the SELECT's WINDOW "
                    f"clause ({t} AS (...)) or write OVER (...)",
                )
            ]
    return []


def _judge(call: _Call, context: _Context, dialect: Dialect) -> list[Violation]:
    out: list[Violation] = []
    name, span = call.name, call.span
    bounds = dialect.arities.get(name)
    if bounds is not None and call.arguments is not None and not _within(call.arguments, bounds):
        out.append(
            _violation(
                ViolationKind.WRONG_ARGUMENT_COUNT,
                span,
                f"{name}() takes {_takes(bounds)}; this call passes {_count(call.arguments)}",
            )
        )
    if (
        call.star
        and dialect.star_only_aggregates
        and name in dialect.arities
        and name not in dialect.window_functions
        and not _can_aggregate(name, dialect)
    ):
        out.append(
            _violation(
                ViolationKind.WRONG_ARGUMENT_COUNT,
                span,
                f"{name}(*): `*` is an argument of aggregate and window functions only; "
                f"call {name}() without it",
            )
        )
    if name in dialect.window_functions and not call.windowed:
        out.append(
            _violation(
                ViolationKind.MISUSED_WINDOW,
                span,
                f"{name}() is a window function: it needs an OVER clause, "
                f"e.g. {name}() OVER (ORDER BY ...)",
            )
        )
    elif (
        call.windowed
        and dialect.over_needs_window_or_aggregate
        and name in dialect.arities
        and name not in dialect.window_functions
        and not _is_aggregate(call._replace(windowed=False), dialect)
    ):
        out.append(
            _violation(
                ViolationKind.MISUSED_WINDOW,
                span,
                f"{name}() is neither a window function nor an aggregate: it takes no OVER clause",
            )
        )
    elif call.windowed and context.clause in _NO_WINDOW:
        out.append(
            _violation(
                ViolationKind.MISUSED_WINDOW,
                span,
                f"a window function ({name}() OVER ...) is not allowed in {context.clause}",
            )
        )
    if _is_aggregate(call, dialect):
        if context.aggregate is not None:
            out.append(
                _violation(
                    ViolationKind.MISUSED_AGGREGATE,
                    span,
                    f"the aggregate {name}() is inside the arguments of the aggregate "
                    f"{context.aggregate}(): aggregates do not nest",
                )
            )
        elif context.clause in _NO_AGGREGATE and not context.bound:
            hint = "; compare aggregates in HAVING" if context.clause == "WHERE" else ""
            out.append(
                _violation(
                    ViolationKind.MISUSED_AGGREGATE,
                    span,
                    f"the aggregate {name}() is not allowed in {context.clause}{hint}",
                )
            )
    return out


def _order_by_aggregates(stmt: Tree, dialect: Dialect) -> list[Violation]:
    """The aggregate calls in the ORDER BY of ``stmt`` (a free ``select_stmt``)
    when its one SELECT core aggregates nothing else (the module header)."""
    kids = {c.data: c for c in stmt.children if hasattr(c, "data")}
    core, order = kids.get("select_core"), kids.get("order_by_clause")
    if core is None or order is None:
        return []
    parts = {c.data: c for c in core.children if hasattr(c, "data")}
    if "from_clause" not in parts or {"group_by_clause", "having_clause"} & set(parts):
        return []
    nodes = [*_descendants(core), *_descendants(order)]
    if any(n.data in _BOUND for n in nodes):
        return []
    if any(_aggregate_at(n, dialect) for n in _descendants(parts.get("result_columns"))):
        return []
    return [
        _violation(
            ViolationKind.MISUSED_AGGREGATE,
            call.span,
            f"the aggregate {call.name}() in ORDER BY sorts a query that aggregates "
            "nothing: add GROUP BY, or aggregate in the select list",
        )
        for call in _sorting_aggregates(order, dialect)
    ]


def _having_without_aggregation(core: Tree, dialect: Dialect) -> list[Violation]:
    """HAVING in a SELECT ``core`` that neither groups nor aggregates in its select
    list (SQLite: "HAVING clause on a non-aggregate query", whatever HAVING holds).
    A select list with a subquery an expression holds is left alone: its aggregate
    may be this SELECT's (``SELECT (SELECT max(t.b) FROM u) FROM t HAVING 1`` runs)."""
    parts = {c.data: c for c in core.children if hasattr(c, "data")}
    having = parts.get("having_clause")
    if having is None or "group_by_clause" in parts:
        return []
    result = _descendants(parts.get("result_columns"), stop=_BOUND)
    if any(n.data in _BOUND or _aggregate_at(n, dialect) for n in result):
        return []
    span = (int(having.meta.start_pos), int(having.meta.end_pos))
    message = "HAVING filters groups: add GROUP BY, or aggregate in the select list"
    return [_violation(ViolationKind.MISUSED_AGGREGATE, span, message)]


def unevaluated_nodes(stmt: Tree, dialect: Dialect, *, exists: bool = False) -> set[int]:
    """The ids of the tree nodes of ``stmt`` (a ``select_stmt``; ``exists``: the
    body of EXISTS) that the database resolves but never evaluates, where
    `Dialect.unused_clauses_unevaluated` (SQLite). It still resolves their names
    and checks their calls and compared widths (``SELECT count(*) FROM t ORDER
    BY abs(1, 2)`` is refused), but what only evaluation refuses runs there
    (``SELECT count(*) FROM t ORDER BY (a, b)``). For a ``select_stmt`` of one
    core, the nodes of:

    - its ``order_by_clause`` when it returns one row: no GROUP BY, an aggregate
      call (no OVER) in the select list or HAVING outside any subquery, no call
      with OVER in the select list or the ORDER BY. A core whose only aggregate
      is inside a subquery (``SELECT (SELECT count(t.a)) FROM t``, the outer
      query's aggregate) is not taken for one: its clause is judged whole;
    - for the body of EXISTS, which SQLite reads as ``EXISTS (SELECT 1 ...)``:
      its ``order_by_clause``, and its ``result_columns`` unless one has a result
      alias or a GROUP BY term is a number (an alias or ``GROUP BY 1`` copies a
      result column's expression into a clause that is evaluated);

    save a call with OVER, and (but in the ORDER BY of EXISTS) an aggregate
    call, and everything below them: SQLite computes their arguments in the
    query's window or aggregate loop (``SELECT count(*) FROM t ORDER BY sum((a,
    b))`` is refused). A call inside a subquery of those clauses is the
    subquery's, which never runs (``ORDER BY (SELECT sum((c, d)) FROM u)``
    runs): neither it nor its arguments are evaluated. (An aggregate there
    over the outer query's columns only is the outer query's: left to the
    database, as in the module header.)"""
    if not dialect.unused_clauses_unevaluated:
        return set()
    kids = {c.data: c for c in stmt.children if hasattr(c, "data")}
    core, order = kids.get("select_core"), kids.get("order_by_clause")
    if core is None:
        return set()
    parts = {c.data: c for c in core.children if hasattr(c, "data")}
    result = parts.get("result_columns")
    if exists:
        copied = _aliased(result) or _by_position(parts.get("group_by_clause"))
        return _unevaluated_below(order, dialect, aggregates=False) | (
            set() if copied else _unevaluated_below(result, dialect)
        )
    if order is None or "group_by_clause" in parts:
        return set()
    # a call with OVER inside a subquery is the subquery's, not this SELECT's
    own_calls = (
        *_descendants(result, stop=("select_stmt",)),
        *_descendants(order, stop=("select_stmt",)),
    )
    if any(_windowed(n) for n in own_calls):
        return set()
    own = [
        *_descendants(result, stop=_BOUND),
        *_descendants(parts.get("having_clause"), stop=_BOUND),
    ]
    one_row = any(_aggregate_at(n, dialect) for n in own)
    return _unevaluated_below(order, dialect) if one_row else set()


def _unevaluated_below(
    clause: Tree | None, dialect: Dialect, *, aggregates: bool = True
) -> set[int]:
    """The ids of the nodes of ``clause`` outside its windowed calls and, where
    ``aggregates`` (they are evaluated), its aggregate calls. Those of a
    subquery in ``clause`` are its own, and never run: all of the subquery's
    nodes are listed."""
    out: set[int] = set()
    todo = [(clause, False)] if clause is not None else []
    while todo:
        n, nested = todo.pop()
        if not nested and (_windowed(n) or (aggregates and _aggregate_at(n, dialect))):
            continue
        out.add(id(n))
        inner = nested or n.data == "select_stmt"
        todo.extend((c, inner) for c in n.children if hasattr(c, "data"))
    return out


def _by_position(group_by: Tree | None) -> bool:
    """Whether a term of ``group_by`` (a ``group_by_clause``) is a number, signed or not."""
    terms = (
        [t for c in group_by.children if hasattr(c, "data") for t in c.children] if group_by else []
    )
    for term in terms:
        while hasattr(term, "data") and term.data == "unary":
            term = term.children[-1]
        if hasattr(term, "data") and term.data == "literal" and term.children[0].type == "NUMBER":
            return True
    return False


def _aliased(result: Tree | None) -> bool:
    """Whether a result column of ``result`` (a ``result_columns``) has an alias."""
    columns = [c for c in result.children if hasattr(c, "data")] if result is not None else []
    return any(
        not hasattr(t, "data") and t.type == "ALIAS_NAME" for c in columns for t in c.children
    )


def _windowed(node: Tree) -> bool:
    return node.data in ("function_call", "aggregate_call") and any(
        hasattr(c, "data") and c.data == "over_clause" for c in node.children
    )


def _descendants(node: Tree | None, stop: tuple[str, ...] = ()) -> list[Tree]:
    """``node`` and every tree node below it (no tokens), in document order; the
    nodes named in ``stop`` are listed but not entered."""
    out: list[Tree] = []
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        out.append(n)
        if n.data not in stop:
            todo.extend(c for c in reversed(n.children) if hasattr(c, "data"))
    return out


def _sorting_aggregates(order: Tree, dialect: Dialect) -> list[_Call]:
    """The aggregate calls in ``order`` that neither another aggregate call nor
    a call with OVER holds (the one query's own aggregates), in document order."""
    out: list[_Call] = []
    todo = [order]
    while todo:
        n = todo.pop()
        if n.data in ("function_call", "aggregate_call"):
            call = _call(n)
            if call is not None and _is_aggregate(call, dialect):
                out.append(call)
                continue
            if call is None or call.windowed:
                continue
        todo.extend(c for c in reversed(n.children) if hasattr(c, "data"))
    return out


def _aggregate_at(node: Tree, dialect: Dialect) -> _Call | None:
    """The call at ``node`` if it is an aggregate call (no OVER), else None."""
    if node.data not in ("function_call", "aggregate_call"):
        return None
    call = _call(node)
    return call if call is not None and _is_aggregate(call, dialect) else None


def _call(node: Tree) -> _Call | None:
    """The name, argument count and OVER of a call node; None when the node's
    shape is not the contract's (another dialect's grammar)."""
    children = [c for c in node.children if hasattr(c, "data")]
    windowed = any(c.data == "over_clause" for c in children)
    span = (int(node.meta.start_pos), int(node.meta.end_pos))
    if node.data == "function_call":
        head = node.children[0]
        if hasattr(head, "data") or head.type != "FUNCTION_NAME":
            return None
        name = str(head).rstrip("(").strip().lower()
        return _Call(name, _arguments(children), windowed, span, _star(children))
    head = next((c for c in children if c.data == "aggregate_head"), None)
    if head is None:
        return None
    first, rest = head.children[0], head.children[1:]
    if not hasattr(first, "data"):  # COUNT: the grammar's own forms
        return _Call(str(first).lower(), None, windowed, span)
    # aggregate_function (SUM | AVG | MIN | MAX), DISTINCT?, then an expr_list or one expr
    name = str(first.children[0]).lower()
    rest = [c for c in rest if hasattr(c, "data") or c.type != "DISTINCT"]
    lists = [c for c in rest if hasattr(c, "data") and c.data == "expr_list"]
    return _Call(name, len(lists[0].children) if lists else len(rest), windowed, span)


def _arguments(children: list[Any]) -> int:
    for child in children:
        if not hasattr(child, "data"):
            continue
        if child.data == "expr_list":
            return len(child.children)
        if child.data == "function_arguments":
            return _arguments(child.children)  # DISTINCT? expr_list | STAR (no argument)
    return 0


def _star(children: list[Any]) -> bool:
    """Whether a call's argument is ``*``."""
    for child in children:
        if hasattr(child, "data") and child.data == "function_arguments":
            return any(not hasattr(c, "data") and c.type == "STAR" for c in child.children)
    return False


def _can_aggregate(name: str, dialect: Dialect) -> bool:
    """Whether some call of ``name`` is an aggregate (MIN and MAX with one argument)."""
    return (
        name in _ALWAYS_AGGREGATE
        or name in _ONE_ARGUMENT_AGGREGATE
        or name in dialect.aggregate_functions
    )


def _is_aggregate(call: _Call, dialect: Dialect) -> bool:
    if call.windowed:
        return False
    if call.name in _ONE_ARGUMENT_AGGREGATE:
        return call.arguments == 1
    return call.name in _ALWAYS_AGGREGATE or call.name in dialect.aggregate_functions


def _within(count: int, bounds: tuple[int, int | None]) -> bool:
    least, most = bounds
    return count >= least and (most is None or count <= most)


def _count(n: int) -> str:
    return "no argument" if n == 0 else f"{n} argument" + ("s" if n > 1 else "")


def _takes(bounds: tuple[int, int | None]) -> str:
    least, most = bounds
    if most is None:
        return f"at least {_count(least)}" if least else "any number of arguments"
    if least == most:
        return _count(least) if least else "no argument"
    if most == least + 1:
        return f"{least} or {_count(most)}"
    return f"{least} to {_count(most)}"


def _violation(kind: ViolationKind, span: Span, message: str) -> Violation:
    return Violation(kind, None, None, span, message)
