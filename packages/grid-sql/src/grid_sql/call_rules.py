"""Statement rules for calls: what the database refuses in a call, whatever the data.

Purpose. A statement in the role's language can still fail to prepare. Among
SmolLM2's mode-1 statements on Spider the checker accepted, every one that
failed did so for a rule of this module or a column count (the walk's, in
`grid_sql.checker`): `SIN( )`, `PERCENT_RANK(1, 1)`, `DENSE_RANK()` without
OVER. These rules let the checker refuse them with a stated violation, which
the repair pass feeds back. They read the parse tree (and, to place an
aggregate, the checker's name resolution; no schema, no role):

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
  BY, HAVING or an UPDATE's SET (not where `Dialect.update_from_selects` and
  the UPDATE has a FROM clause: SQLite computes that SET as a select list);
  ``OVER name`` where the WINDOW clause of its
  SELECT core defines no ``name`` (in a SELECT's ORDER BY: of any of its cores;
  SQLite compares names as written, the others unquoted); a windowed call inside
  the arguments (or FILTER) of an aggregate or of another windowed call, or in a
  window definition, not through a subquery (``sum(row_number() OVER ())``:
  "misuse of window function"); a RANGE frame with an offset bound (``1
  PRECEDING``) in a window whose ORDER BY has not exactly one term.
- ``constant_argument``: an argument ``Dialect.probability_arguments`` names
  (SQLite's ``likelihood(X, Y)``: Y) that is not a float literal from 0.0 to
  1.0; SQLite refuses it when it prepares the statement.
- ``misused_aggregate``: an aggregate call (no OVER) inside the arguments of
  another aggregate call (no OVER), not through a subquery; an aggregate call
  in a clause where its *owner* may not aggregate: the WHERE, GROUP BY or ON
  of a SELECT core, LIMIT and OFFSET, the WHERE or SET of an UPDATE, the
  WHERE of a DELETE. The
  owner is the query whose rows the call aggregates
  (:func:`aggregate_placements`, from the checker's name resolution): the
  innermost query a column of its arguments resolves to, else the query it
  is written in. So ``(SELECT max(t.b) FROM u)`` in the WHERE of the query
  over ``t`` is refused, and in its select list is that query's aggregate; an
  enclosing query's aggregate inside the arguments of that query's own
  aggregate nests. Where `Dialect.aggregates_placed_where_written` (SQLite),
  a call written in such a clause is refused whoever owns it; SQLite never
  evaluates an EXISTS body's select list and ORDER BY, so an enclosing
  query's aggregate there is left to it, unless it sits in that query's GROUP
  BY (SQLite refuses ``GROUP BY EXISTS (SELECT sum(t.a) FROM u)``, and runs
  the same EXISTS in a WHERE). A call whose arguments read no
  column but hold a SELECT is placed by no rule (DuckDB keeps it where it is
  written, SQLite and PostgreSQL may move it out): judged where it is written,
  in a free SELECT only. Where
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
- ``column_count``: an ORDER BY term of a compound SELECT that is not a
  position, and, per `Dialect.compound_order_terms`, neither an output name nor
  an expression one of its SELECTs writes as a result column (SQLite: ``...
  UNION SELECT c FROM u ORDER BY count(a)``, "1st ORDER BY term does not match
  any column in the result set"), or not a bare name (PostgreSQL: ``ORDER BY
  id + 1``, "invalid UNION/INTERSECT/EXCEPT ORDER BY clause");
  :func:`_compound_order_unmatched`.

The module also finds what SQLite resolves but never evaluates
(:func:`unevaluated_nodes`: the ORDER BY of a SELECT that returns one row, the
select list and ORDER BY of an EXISTS body), where the checker's column counts
and `grid_sql.row_rules` judge only what SQLite refuses before evaluating.

Policy: each rule flags only what SQLite 3.40 refuses at prepare time (measured
with EXPLAIN; the tests replay every flagged case there), and leaves alone what
is refused only in some readings. So ``DISTINCT`` with two arguments is not
flagged, nor an aggregate
over an enclosing query's columns in the ORDER BY of that query when it
aggregates nothing else (SQLite refuses ``SELECT b FROM t ORDER BY (SELECT
sum(t.b) FROM u)``).

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

from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from grid_sql.dialect import Dialect, ascii_lower, unquote
from grid_sql.violations import Span, Violation, ViolationKind

Tree = Any  # lark.Tree

__all__ = ["Placement", "aggregate_placements", "call_violations", "unevaluated_nodes"]

# A node's clause, for the placement rules.
_CLAUSES = {
    "where_clause": "WHERE",
    "group_by_clause": "GROUP BY",
    "having_clause": "HAVING",
    "join_constraint": "ON",
    "assignment": "SET",
    "limit_clause": "LIMIT",
    "offset_clause": "OFFSET",
}
_NO_WINDOW = ("WHERE", "GROUP BY", "HAVING", "SET")
_NO_AGGREGATE = ("WHERE", "GROUP BY", "ON", "SET", "LIMIT", "OFFSET")
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
    exists: bool = False  # the node is the body of EXISTS
    # where a window call may not be written: the arguments of an aggregate or a
    # window call, or a window definition (what holds the node, for the message)
    nests: str | None = None
    # inside an UPDATE whose SET is a SELECT's list (`Dialect.update_from_selects`)
    update_from: bool = False


class Placement(NamedTuple):
    """Where an aggregate call (no OVER) is evaluated: its *owner*, the query
    whose rows it aggregates (:func:`aggregate_placements`)."""

    owner: int  # id of the owner's tree: a select_stmt, an UPDATE or a DELETE
    outer: bool  # the owner encloses the query the call is written in
    clause: str | None  # the owner's clause that holds the call (_CLAUSES), if any
    inside: str | None  # the owner's aggregate call whose arguments hold the call
    # between the owner and the call, the select list or ORDER BY of an EXISTS body
    hidden: bool


_UNPLACED = Placement(0, False, None, None, False)


class _Level(NamedTuple):
    """One query on the way down to a node: a select_stmt (its cores' ids) or
    an UPDATE or DELETE (its own id), with the clause and the aggregate call of
    that query which hold the node."""

    tree: int
    cores: frozenset[int]  # ids of the trees whose FROM it resolves against
    clause: str | None = None
    aggregate: str | None = None
    exists_body: bool = False
    hidden: bool = False  # in the select list or ORDER BY of an EXISTS body


def aggregate_placements(
    tree: Tree, dialect: Dialect, refs: Mapping[int, int]
) -> dict[int, Placement]:
    """The owner of every aggregate call (no OVER) of ``tree``, by the call's id.

    ``refs`` maps a ``column_ref`` node's id to the id of the tree whose FROM
    resolved it (a ``select_core``, an UPDATE or a DELETE: the checker's name
    resolution). SQL's rule (PostgreSQL's manual, SQLite's resolver): a call's
    owner is the innermost query that a column reference of its arguments
    resolves to; a call whose arguments read no column is its own query's.
    Only the references outside the SELECTs nested in the arguments count:
    DuckDB does not look into them, and SQLite and PostgreSQL would move
    ``sum((SELECT t.b))`` out, so a call whose arguments read nothing directly
    but hold a SELECT gets no placement (left alone)."""
    out: dict[int, Placement] = {}
    todo: list[tuple[Tree, tuple[_Level, ...], bool]] = [(tree, (), False)]
    while todo:
        node, chain, exists = todo.pop()
        if not hasattr(node, "data"):
            continue
        data = node.data
        if data == "select_stmt":
            cores = frozenset(id(c) for c in _cores(node))
            # SQLite drops the select list and ORDER BY of a one-core EXISTS body
            # only (a compound body's are evaluated), and not when a GROUP BY term
            # or an alias copies a result column into an evaluated clause.
            hidden = exists and len(cores) == 1 and not _copied(_cores(node)[0])
            chain = (*chain, _Level(id(node), cores, exists_body=hidden))
        elif data in ("update_stmt", "delete_stmt"):
            chain = (*chain, _Level(id(node), frozenset({id(node)})))
        elif chain and data == "select_core":
            chain = (*chain[:-1], chain[-1]._replace(clause=None, aggregate=None))
        elif chain and data in _CLAUSES:
            chain = (*chain[:-1], chain[-1]._replace(clause=_CLAUSES[data]))
        elif chain and data in ("result_columns", "order_by_clause") and chain[-1].exists_body:
            chain = (*chain[:-1], chain[-1]._replace(hidden=True))
        elif chain and data in ("function_call", "aggregate_call"):
            call = _aggregate_at(node, dialect)
            if call is not None:
                placed = _placement(node, chain, refs)
                if placed is not None:
                    out[id(node)] = placed
                chain = (*chain[:-1], chain[-1]._replace(aggregate=call.name))
        todo.extend((c, chain, data == "exists") for c in reversed(node.children))
    return out


def _placement(call: Tree, chain: tuple[_Level, ...], refs: Mapping[int, int]) -> Placement | None:
    """The placement of an aggregate ``call`` written in the last query of
    ``chain`` (:func:`aggregate_placements`)."""
    read = {refs[id(n)] for n in _descendants(call, stop=("select_stmt",)) if id(n) in refs}
    written = chain[-1]
    if not read and any(n.data == "select_stmt" for n in _descendants(call)):
        return None
    at = len(chain) - 1
    for index in reversed(range(len(chain))):
        if chain[index].cores & read:
            at = index
            break
    owner, below = chain[at], chain[at + 1 :]
    hidden = any(level.hidden for level in below)
    return Placement(owner.tree, owner is not written, owner.clause, owner.aggregate, hidden)


class _Call(NamedTuple):
    name: str  # lower case
    arguments: int | None  # None: not counted (COUNT's own forms)
    windowed: bool
    span: Span
    star: bool = False  # written f(*)


def call_violations(
    tree: Tree,
    dialect: Dialect,
    skip: Collection[int] = frozenset(),
    placements: Mapping[int, Placement] | None = None,
) -> list[Violation]:
    """The statement rules of the module header broken in ``tree``, in walk order,
    outside the subtrees whose ids are in ``skip`` (the bodies of unused CTEs,
    which the database never resolves). ``placements`` are the aggregate calls'
    owners (:func:`aggregate_placements`, from the checker's name resolution);
    an aggregate with none is judged where it is written, in a free SELECT only.

    The walk keeps its own stack, as the checker's does: expression depth costs
    no Python stack."""
    placements = placements or {}
    found: list[Violation] = []
    unevaluated: set[int] = set()  # nodes the database does not evaluate
    inserted: set[int] = set()  # the VALUES cores that are an INSERT's whole source
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
            # a check SQLite makes only where it evaluates the ORDER BY
            evaluated = id(node) not in unevaluated and not context.exists
            if dialect.order_by_aggregates_need_aggregation and evaluated:
                found += _order_by_aggregates(node, dialect, placements, context.bound)
            unevaluated |= unevaluated_nodes(node, dialect, exists=context.exists)
            found += _grouped_by_position(node, dialect, placements)
            found += _ordered_by_position(node)
            if dialect.compound_order_terms != "any":
                found += _compound_order_unmatched(node, dialect.compound_order_terms)
            context = _Context(None, context.bound, None, windows)
        elif data == "select_core":
            context = context._replace(windows=_window_names([node], dialect))
            if dialect.having_needs_aggregation:
                found += _having_without_aggregation(node, dialect)
            found += _values_calls(node, dialect, id(node) in inserted, placements)
        elif data == "insert_source":
            stmt = _part(node, "select_stmt")
            cores = _cores(stmt) if stmt is not None else []
            if len(cores) == 1:
                inserted.add(id(cores[0]))
        elif data in _BOUND:
            context = context._replace(bound=True, exists=data == "exists")
        elif data == "update_stmt":
            froms = dialect.update_from_selects and _part(node, "from_clause") is not None
            context = context._replace(update_from=froms)
        elif data in _CLAUSES:
            listed = data == "assignment" and context.update_from  # a select list
            context = context._replace(clause=None if listed else _CLAUSES[data])
        elif data == "window_spec":
            found += _range_offsets(node)
            context = context._replace(nests=context.nests or "a window definition")
        elif data in ("function_call", "aggregate_call"):
            call = _call(node)
            if call is not None:
                found += _judge(call, context, dialect, placements.get(id(node)))
                found += _probabilities(call, node, dialect)
                if _is_aggregate(call, dialect):
                    context = context._replace(aggregate=call.name)
                if call.windowed or _is_aggregate(call, dialect):
                    kind = "window function" if call.windowed else "aggregate"
                    context = context._replace(nests=f"the {kind} {call.name}()")
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


def _judge(
    call: _Call, context: _Context, dialect: Dialect, placed: Placement | None
) -> list[Violation]:
    out: list[Violation] = []
    name, span = call.name, call.span
    bounds = dialect.arities.get(name)
    if (
        bounds is not None
        and call.arguments is not None
        and not dialect.takes(name, call.arguments)
    ):
        takes = _takes(bounds, dialect.gaps.get(name, frozenset()))
        out.append(
            _violation(
                ViolationKind.WRONG_ARGUMENT_COUNT,
                span,
                f"{name}() takes {takes}; this call passes {_count(call.arguments)}",
            )
        )
    if (
        call.star
        and dialect.star_only_aggregates
        and name in dialect.arities
        and name not in dialect.window_functions
        and not can_aggregate(name, dialect)
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
    elif call.windowed and context.nests is not None:
        out.append(
            _violation(
                ViolationKind.MISUSED_WINDOW,
                span,
                f"a window function ({name}() OVER ...) is inside {context.nests}: window "
                "calls do not nest there; compute it in a subquery",
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
        else:
            out += _misplaced(call, context, dialect, placed)
    return out


def _misplaced(
    call: _Call, context: _Context, dialect: Dialect, placed: Placement | None
) -> list[Violation]:
    """An aggregate call in a clause its owner query may not aggregate in
    (``_NO_AGGREGATE``), or inside the arguments of another aggregate of that
    query. Where `Dialect.aggregates_placed_where_written` (SQLite), also one
    written in such a clause, whoever owns it. SQLite never evaluates an EXISTS
    body's select list and ORDER BY, so there an enclosing query's aggregate
    is left to it, except in that query's GROUP BY: SQLite refuses a GROUP BY
    term holding an aggregate of its query anywhere, evaluated or not.
    Unplaced (no resolution, or a SELECT in its arguments), a call is judged
    where it is written, in a free SELECT only."""
    name, written = call.name, context.clause
    hint = "; compare aggregates in HAVING" if written == "WHERE" else ""
    if written in _NO_AGGREGATE and (
        dialect.aggregates_placed_where_written
        or (placed is None and not context.bound)
        or (placed is not None and not placed.outer)
    ):
        message = f"the aggregate {name}() is not allowed in {written}{hint}"
        return [_violation(ViolationKind.MISUSED_AGGREGATE, call.span, message)]
    if placed is None or not placed.outer:
        return []
    if placed.hidden and dialect.unused_clauses_unevaluated and placed.clause != "GROUP BY":
        return []
    owner = "it reads only an enclosing query's columns, so it is that query's aggregate"
    if placed.clause in _NO_AGGREGATE:
        hint = "; compare aggregates in HAVING" if placed.clause == "WHERE" else ""
        message = f"the aggregate {name}(): {owner}, and this sits in its {placed.clause}{hint}"
    elif placed.inside is not None:
        message = (
            f"the aggregate {name}(): {owner}, inside the arguments of its aggregate "
            f"{placed.inside}(): aggregates do not nest"
        )
    else:
        return []
    return [_violation(ViolationKind.MISUSED_AGGREGATE, call.span, message)]


def _order_by_aggregates(
    stmt: Tree, dialect: Dialect, placements: Mapping[int, Placement], bound: bool
) -> list[Violation]:
    """The aggregate calls in the ORDER BY of ``stmt`` (a ``select_stmt``) when
    its one SELECT core aggregates nothing else (the module header). In a
    ``bound`` SELECT (an expression holds it), only the calls ``placements``
    gives to ``stmt`` itself: another could be an enclosing query's."""
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
        for node, call in _sorting_aggregates(order, dialect)
        if not bound or placements.get(id(node), _UNPLACED).owner == id(stmt)
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


def unevaluated_nodes(
    stmt: Tree,
    dialect: Dialect,
    *,
    exists: bool = False,
    placements: Mapping[int, Placement] | None = None,
) -> set[int]:
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
    runs): neither it nor its arguments are evaluated.

    ``placements`` (:func:`aggregate_placements`) amend both: an aggregate call
    whose owner is a query enclosing the clause is evaluated there when the
    owner may aggregate where it holds the call (``ORDER BY (SELECT sum((t.a,
    t.b)) FROM u)``, ``t`` the outer table, is refused), and never when it may
    not (its WHERE: ``WHERE EXISTS (SELECT sum((t.a, t.b)) FROM u)`` runs)."""
    owned = placements or {}
    if not dialect.unused_clauses_unevaluated:
        return set()
    kids = {c.data: c for c in stmt.children if hasattr(c, "data")}
    core, order = kids.get("select_core"), kids.get("order_by_clause")
    if core is None:
        return set()
    parts = {c.data: c for c in core.children if hasattr(c, "data")}
    result = parts.get("result_columns")
    if exists:
        return _unevaluated_below(order, dialect, owned, aggregates=False) | (
            set() if _copied(core) else _unevaluated_below(result, dialect, owned)
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
    return _unevaluated_below(order, dialect, owned) if one_row else set()


def _unevaluated_below(
    clause: Tree | None,
    dialect: Dialect,
    placements: Mapping[int, Placement],
    *,
    aggregates: bool = True,
) -> set[int]:
    """The ids of the nodes of ``clause`` outside its windowed calls and, where
    ``aggregates`` (they are evaluated), its aggregate calls. Those of a
    subquery in ``clause`` are its own, and never run: all of the subquery's
    nodes are listed. An aggregate call that ``placements`` gives to a query
    outside ``clause`` is evaluated (not listed, nor what it holds) exactly
    when that query may aggregate where it holds the call."""
    out: set[int] = set()
    inner_stmts: set[int] = set()  # the subqueries of clause seen so far
    todo = [(clause, False)] if clause is not None else []
    while todo:
        n, nested = todo.pop()
        placed = placements.get(id(n)) if aggregates else None
        if placed is not None and placed.outer and placed.owner not in inner_stmts:
            if placed.clause not in _NO_AGGREGATE:
                continue  # an enclosing query's aggregate, evaluated there
        elif not nested and (_windowed(n) or (aggregates and _aggregate_at(n, dialect))):
            continue
        out.add(id(n))
        if n.data == "select_stmt":
            inner_stmts.add(id(n))
        inner = nested or n.data == "select_stmt"
        todo.extend((c, inner) for c in n.children if hasattr(c, "data"))
    return out


def _grouped_by_position(
    stmt: Tree, dialect: Dialect, placements: Mapping[int, Placement]
) -> list[Violation]:
    """The GROUP BY terms of ``stmt``'s cores (a ``select_stmt``) that are integers,
    each naming the result column it copies (``GROUP BY 1``; SQLite, PostgreSQL
    and DuckDB alike), refused where that column cannot be grouped by: a
    position outside the select list (``column_count``), a result column
    holding an aggregate call of ``stmt`` itself (``misused_aggregate``:
    "aggregate functions are not allowed in the GROUP BY clause", even inside a
    subquery whose call ``stmt`` owns), or a call with OVER outside any
    subquery (``misused_window``). A core with a ``*`` in its select list is
    left alone: its positions are not known here."""
    out: list[Violation] = []
    for core in _cores(stmt):
        group_by = _part(core, "group_by_clause")
        columns = _positions(core)
        if group_by is None or columns is None:
            continue
        for term in _group_terms(group_by):
            k = _position(term)
            if k is None:
                continue
            span = (int(term.meta.start_pos), int(term.meta.end_pos))
            if not 1 <= k <= len(columns):
                out.append(_out_of_range("GROUP BY", k, len(columns), span))
                continue
            column = columns[k - 1]
            own = {id(n) for n in _descendants(column, stop=("select_stmt",))}
            for n in _descendants(column):
                call = _aggregate_at(n, dialect)
                placed = placements.get(id(n))
                if _windowed(n) and id(n) in own:
                    kind, what = ViolationKind.MISUSED_WINDOW, "a window function"
                elif call is not None and placed is not None and placed.owner == id(stmt):
                    kind, what = ViolationKind.MISUSED_AGGREGATE, f"the aggregate {call.name}()"
                else:
                    continue
                message = f"GROUP BY {k} copies result column {k}, which holds {what}"
                out.append(_violation(kind, span, message))
                break
    return out


def _ordered_by_position(stmt: Tree) -> list[Violation]:
    """The ORDER BY terms of ``stmt`` (a ``select_stmt``) that are integers outside
    its select list's range (``column_count``: "ORDER BY term out of range" in
    SQLite, PostgreSQL and DuckDB alike, even where SQLite never evaluates the
    ORDER BY). ``+1`` is not read as a position (:func:`_position`); a select list
    with ``*`` is left alone."""
    order, cores = _part(stmt, "order_by_clause"), _cores(stmt)
    columns = _positions(cores[0]) if cores else None
    if order is None or columns is None:
        return []
    out: list[Violation] = []
    for term in order.children:
        if not hasattr(term, "data") or term.data != "ordering_term":
            continue
        k = _position(term.children[0])
        if k is not None and not 1 <= k <= len(columns):
            span = (int(term.meta.start_pos), int(term.meta.end_pos))
            out.append(_out_of_range("ORDER BY", k, len(columns), span))
    return out


def _compound_order_unmatched(stmt: Tree, terms: str) -> list[Violation]:
    """The ORDER BY terms of ``stmt`` (a ``select_stmt`` whose body is a compound)
    that name no result column (``column_count``), per ``terms``
    (``Dialect.compound_order_terms``); a position is :func:`_ordered_by_position`'s.
    ``"names"`` (PostgreSQL: "invalid UNION/INTERSECT/EXCEPT ORDER BY clause"): a
    term is a bare name (which output name it matches, the checker's resolution
    and the server judge). ``"written"`` (SQLite: "1st ORDER BY term does not
    match any column in the result set"): a term, less a COLLATE, is an output
    name (a result alias or column name) or an expression one SELECT of the
    compound writes as a result column. Expressions are compared with their
    column references' qualifiers dropped and names folded, as SQLite compares
    them after resolving (``t.a`` is ``a``): looser than SQLite where two tables
    have the column, never stricter. A select list with ``*`` is left alone."""
    order, cores = _part(stmt, "order_by_clause"), _cores(stmt)
    lists = [_positions(core) for core in cores]
    if order is None or len(cores) < 2 or any(c is None for c in lists):
        return []
    written: set[tuple[object, ...]] = set()  # a result's expression, and its name
    for column in (c for columns in lists for c in columns or ()):
        written.add(_shape(column.children[0]))
        alias = column.children[-1] if len(column.children) > 1 else None
        if alias is not None:
            written.add(("column", ascii_lower(unquote(str(alias)))))
    out: list[Violation] = []
    for term in order.children:
        if not hasattr(term, "data") or term.data != "ordering_term":
            continue
        expr = term.children[0]
        while terms == "written" and getattr(expr, "data", None) == "collated":
            expr = expr.children[0]
        bare = getattr(expr, "data", None) == "column_ref" and len(expr.children) == 1
        if _position(expr) is not None or (bare if terms == "names" else _shape(expr) in written):
            continue
        span = (int(term.meta.start_pos), int(term.meta.end_pos))
        message = "this ORDER BY term of a compound SELECT " + (
            "is an expression: order by a result column's position or its name"
            if terms == "names"
            else "names no result column: order by a result column's position, its "
            "name, or an expression the select list writes"
        )
        out.append(_violation(ViolationKind.COLUMN_COUNT, span, message))
    return out


def _shape(node: Any) -> tuple[object, ...]:
    """``node``'s tree with a column reference as its column's folded name and other
    words folded (string literals kept): what makes two expressions the same one."""
    if not hasattr(node, "data"):
        text = str(node)
        return (text if text[:1] in "'xX" and "'" in text else ascii_lower(text),)
    if node.data == "column_ref":
        return ("column", ascii_lower(unquote(str(node.children[-1]))))
    return (node.data, *(_shape(c) for c in node.children))


def _values_calls(
    core: Tree, dialect: Dialect, inserted: bool, placements: Mapping[int, Placement]
) -> list[Violation]:
    """The calls a VALUES core (a ``select_core`` with a ``values_clause``) may not
    hold, outside its subqueries: an aggregate (no OVER) where it has more than one
    row or is an INSERT's whole source (``inserted``), and a call with OVER in the
    latter ("misuse of aggregate", "aggregate functions are not allowed in VALUES"
    in SQLite, PostgreSQL and DuckDB alike). An enclosing query's aggregate is
    that query's (PostgreSQL and DuckDB run it), except where
    `Dialect.aggregates_placed_where_written` (SQLite refuses it). SQLite reads a
    one-row VALUES elsewhere as a SELECT without FROM (``VALUES (count(*))`` runs
    there), so that one is left alone."""
    values = _part(core, "values_clause")
    if values is None:
        return []
    rows = [c for c in values.children if hasattr(c, "data") and c.data == "row_value"]
    if len(rows) < 2 and not inserted:
        return []
    out: list[Violation] = []
    for n in _descendants(values, stop=("select_stmt",)):
        call = _call(n) if n.data in ("function_call", "aggregate_call") else None
        if call is None:
            continue
        if call.windowed and inserted:
            message = f"a window function ({call.name}() OVER ...) is not allowed in VALUES"
            out.append(_violation(ViolationKind.MISUSED_WINDOW, call.span, message))
        elif not call.windowed and _is_aggregate(call, dialect):
            placed = placements.get(id(n))
            if placed is not None and placed.outer and not dialect.aggregates_placed_where_written:
                continue
            message = f"the aggregate {call.name}() is not allowed in VALUES"
            out.append(_violation(ViolationKind.MISUSED_AGGREGATE, call.span, message))
    return out


def _part(node: Tree, name: str) -> Tree | None:
    """The child tree of ``node`` named ``name``, if any."""
    return next((c for c in node.children if hasattr(c, "data") and c.data == name), None)


def _positions(core: Tree) -> list[Tree] | None:
    """The result columns a position in ``core`` (a ``select_core``) names, in order;
    None where that is not known here (no select list, or a ``*`` in it)."""
    result = _part(core, "result_columns")
    columns = [c for c in result.children if hasattr(c, "data")] if result is not None else []
    if not columns or any(
        not hasattr(t, "data") and t.type == "STAR" for c in columns for t in c.children
    ):
        return None
    return columns


def _out_of_range(clause: str, k: int, n: int, span: Span) -> Violation:
    columns = f"{n} column" + ("" if n == 1 else "s")
    message = f"{clause} {k}: the select list has {columns}"
    return _violation(ViolationKind.COLUMN_COUNT, span, message)


def _group_terms(group_by: Tree) -> list[Any]:
    """The terms of a ``group_by_clause``."""
    return [t for c in group_by.children if hasattr(c, "data") for t in c.children]


def _position(term: Any) -> int | None:
    """The integer a GROUP BY term is (negated or not, in parentheses or not), else
    None. ``+1`` is left out: SQLite reads it as a position, PostgreSQL and DuckDB
    as a constant."""
    sign = 1
    while hasattr(term, "data") and term.data == "unary" and len(term.children) == 2:
        op = term.children[0]
        if str(op.children[0] if hasattr(op, "data") else op) != "-":
            return None
        sign, term = -sign, term.children[-1]
    if not (hasattr(term, "data") and term.data == "literal" and term.children[0].type == "NUMBER"):
        return None
    text = str(term.children[0]).lower()
    if text.isdigit():
        return sign * int(text)
    if text.startswith("0x") and len(text) > 2 and all(c in "0123456789abcdef" for c in text[2:]):
        return sign * int(text, 16)
    return None


def _copied(core: Tree) -> bool:
    """Whether ``core`` (a ``select_core``) copies a result column into an evaluated
    clause: a result alias, or a GROUP BY term that is a number."""
    parts = {c.data: c for c in core.children if hasattr(c, "data")}
    return _aliased(parts.get("result_columns")) or _by_position(parts.get("group_by_clause"))


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


def _sorting_aggregates(order: Tree, dialect: Dialect) -> list[tuple[Tree, _Call]]:
    """The aggregate calls in ``order`` that neither another aggregate call nor
    a call with OVER holds, with their nodes, in document order."""
    out: list[tuple[Tree, _Call]] = []
    todo = [order]
    while todo:
        n = todo.pop()
        if n.data in ("function_call", "aggregate_call"):
            call = _call(n)
            if call is not None and _is_aggregate(call, dialect):
                out.append((n, call))
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


def _range_offsets(spec: Tree) -> list[Violation]:
    """A RANGE frame with an offset bound (``1 PRECEDING``, not ``UNBOUNDED
    PRECEDING`` or ``CURRENT ROW``) in a window ``spec`` whose ORDER BY has not
    exactly one term: SQLite, PostgreSQL and DuckDB refuse it ("RANGE with offset
    PRECEDING/FOLLOWING requires one ORDER BY expression")."""
    frame = _part(spec, "frame_spec")
    unit = _part(frame, "frame_unit") if frame is not None else None
    if frame is None or unit is None or not _tokens_of(unit, "RANGE") or not _offset(frame):
        return []
    order = _part(spec, "order_by_clause")
    terms = [] if order is None else [c for c in order.children if _is(c, "ordering_term")]
    if len(terms) == 1:
        return []
    span = (int(frame.meta.start_pos), int(frame.meta.end_pos))
    return [
        _violation(
            ViolationKind.MISUSED_WINDOW,
            span,
            f"a RANGE frame with an offset needs exactly one ORDER BY term in its window; "
            f"this one has {len(terms)}",
        )
    ]


def _offset(frame: Tree) -> bool:
    """Whether a frame has a bound ``x PRECEDING`` or ``x FOLLOWING`` (not UNBOUNDED)."""
    todo = [frame]
    while todo:
        node = todo.pop()
        kids = node.children
        for i, c in enumerate(kids):
            if hasattr(c, "data"):
                todo.append(c)
            elif c.type in ("PRECEDING", "FOLLOWING"):
                before = kids[i - 1] if i else None
                if before is None or hasattr(before, "data") or before.type != "UNBOUNDED":
                    return True
    return False


def _is(node: Any, data: str) -> bool:
    return hasattr(node, "data") and node.data == data


def _tokens_of(node: Tree, kind: str) -> bool:
    return any(not hasattr(c, "data") and c.type == kind for c in node.children)


def _probabilities(call: _Call, node: Tree, dialect: Dialect) -> list[Violation]:
    """``Dialect.probability_arguments`` of ``call`` that are not a float literal
    from 0.0 to 1.0 (SQLite reads ``likelihood(X, Y)``'s Y when it prepares the
    statement: ``0.5``, ``(1.0)``, ``.5`` and ``5e-1`` pass; ``1``, ``-0.5``,
    ``1.5`` and a column do not)."""
    out = []
    for name, index in sorted(dialect.probability_arguments):
        if name != call.name:
            continue
        given = _argument_nodes(node)
        if index < len(given) and not _probability(given[index]):
            out.append(
                _violation(
                    ViolationKind.CONSTANT_ARGUMENT,
                    call.span,
                    f"argument {index + 1} of {name}() must be a number written with a "
                    "point from 0.0 to 1.0 (a probability, e.g. 0.5)",
                )
            )
    return out


def _argument_nodes(node: Tree) -> list[Any]:
    """The argument expressions of a ``function_call`` node (none for ``f(*)``)."""
    for child in node.children:
        if hasattr(child, "data") and child.data == "function_arguments":
            return _argument_nodes(child)
        if hasattr(child, "data") and child.data == "expr_list":
            return [c for c in child.children if hasattr(c, "data") or c.type != "COMMA"]
    return []


def _probability(arg: Any) -> bool:
    """Whether ``arg`` is a float literal from 0.0 to 1.0 (SQLite's ``TK_FLOAT``)."""
    if not hasattr(arg, "data") or arg.data != "literal" or len(arg.children) != 1:
        return False
    token = arg.children[0]
    text = str(token)
    if getattr(token, "type", None) != "NUMBER" or text[:2].lower() == "0x":
        return False
    return any(c in text for c in ".eE") and float(text) <= 1.0


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


def can_aggregate(name: str, dialect: Dialect) -> bool:
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


def _count(n: int) -> str:
    return "no argument" if n == 0 else f"{n} argument" + ("s" if n > 1 else "")


def _takes(bounds: tuple[int, int | None], gaps: frozenset[int] = frozenset()) -> str:
    least, most = bounds
    if gaps and most is not None:
        counts = [str(n) for n in range(least, most + 1) if n not in gaps]
        return f"{', '.join(counts[:-1])} or {counts[-1]} arguments"
    if most is None:
        return f"at least {_count(least)}" if least else "any number of arguments"
    if least == most:
        return _count(least) if least else "no argument"
    if most == least + 1:
        return f"{least} or {_count(most)}"
    return f"{least} to {_count(most)}"


def _violation(kind: ViolationKind, span: Span, message: str) -> Violation:
    return Violation(kind, None, None, span, message)
