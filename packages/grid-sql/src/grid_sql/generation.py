"""The generation profile: the narrower language a model writes in (issue 16).

A role's projection (:mod:`grid_sql.projection`) with its lexicon is the language
the SemanticChecker and the database judge: the *checking* language. A small model
decoding inside it still writes SQL that fails to run (Spider dev, SmolLM2-135M:
72% of mode-1 statements in the role's language did not execute): comment lines
that eat the budget, 40-character invented aliases, qualifiers that name nothing.
The **narrow** generation profile is a sublanguage of the checking language that
leaves those out; every statement it admits is in the checking language, so every
guarantee stated for the role's language (soundness, completeness, termination,
the reserve) holds for the profile's engine with the profile's language in its
place.

What ``narrow`` leaves out of the role's language (a policy knob: a role's
``generation = "narrow"``, the default, or ``"full"``; docs/policy.md):

- **comments** (:data:`COMMENTS`): their terminals become lexicon categories with
  no word, so no comment lexeme is ever complete;
- **aliases** other than :data:`ALIASES` (``T1``-``T9``, ``t1``-``t9``, ``a``-``z``:
  what Spider's gold SQL and the models write), and an alias only after ``AS``
  (a bare alias is where a small model runs a keyword into a name:
  ``concert WHEREMusic_Name`` reads as ``concert AS WHEREMusic_Name``);
- **result-column aliases** (``count(*) AS total``): a result's name changes no
  row, and held to :data:`ALIASES` a model that means ``AS max_dept_id`` writes
  ``AS d`` and loops (SmolLM2 on the example database did);
- **qualifiers** other than an alias of :data:`ALIASES`, a granted relation or a
  CTE name of the role, each with its dot (``T1.``, ``employees.``): a qualifier
  that spells nothing the role can declare is never written. That the statement
  declares the alias it uses is not a regular property; the checker names an
  undeclared one;
- **a SELECT with no FROM** (a constant query: ``SELECT 1;``) and
  **bind parameters** (``?``: nothing binds them when the statement runs);
- **row values** (``(a, b)``, the ``row_constructor`` of ``base.lark``): SQLite
  takes one only where it is compared with a row of its width, which a mask
  cannot count, and SmolLM2 writes ``SELECT DISTINCT (a, b, b, b)`` and
  ``(a, a) IN (SELECT a ...)`` (6 of the 36 covering-language statements SQLite
  refused on the first 539 Spider dev questions). PostgreSQL and DuckDB take
  rows in more places; a role that needs them there has ``generation = "full"``.
- **calls outside their function's argument bounds** (:func:`typed_calls`):
  ``pow(id)``, ``abs(a, b)``, ``width_bucket(a, b, c)`` on PostgreSQL (2 or 4), a
  window function without OVER (``rank()``), OVER or FILTER after a scalar
  function, ``DISTINCT`` or ``*`` inside a call. SmolLM2
  wrote ``SIN( )``, ``pow(ID)`` and ``DENSE_RANK() - 1`` (45 of the 535 mode-1
  statements SQLite refused on the 972 Spider dev questions). The typed grammar
  has terminals the dialect lacks, so its engine has its own union DFA.
- **a window frame offset that is not a number** (:func:`literal_offsets`):
  ``ROWS id PRECEDING``; and **a window named by reference** (``OVER w``,
  :func:`written_rule`).

Precondition: the grammar is a dialect's (or a projection of it) with the terminal
names of ``base.lark`` (``ALIAS_NAME``, ``QUALIFIER``, ``LINE_COMMENT``,
``BLOCK_COMMENT``, ``PARAMETER``); a name the grammar lacks is left alone.

Not left out: an aggregate or a window call where SQL refuses one (``SUM(SUM(...``,
``WHERE count(*) > 1``, ``DENSE_RANK() OVER (PARTITION BY DENSE_RANK() OVER ...``:
16 of the 972 Spider dev mode-1 statements). :func:`placed_calls` leaves them out
of the covering and FROM-first languages, but in the narrow profile it would cost
a new role's build 9 ms more than #13's 5 ms allow (its copies of the expression
rules take SQLite's narrow grammar from 671 LALR states to 1,024: 5.8 ms to build
instead of 1.8, and the rewrite 5 ms, measured 2026-12-07).

Not bounded: runs of blanks. The blank terminal as a lexicon category (a space, a
line break and an indent) would bound them, but the reserve table
(:mod:`grid_core.reserve`) writes its completions with a space as the separator
that joins any blank before it into one ignored lexeme, which a finite blank
category refuses. Only the budget bounds them today.

Cost: no T2 entry is shared across roles (the walk arm's T2 hit rate: 0 in
narrow, 0.18 in the whole language); each role still caches its own masks. The
comment terminals are ignored terminals with words, so every mask key carries the
role's lexicon fingerprint; but with them unignored and unused instead (tried,
2026-12-03) the rate stayed 0: the alias and qualifier categories, allowed at
every expression start and after AS, key those positions by the fingerprint too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Final, Literal

from grid_core.dfa import ByteDFA
from grid_core.grammar import Grammar, Rule, TerminalSet
from grid_core.memo import ContentMemo
from grid_sql.dialect import Dialect, ascii_lower, word_alternatives

__all__ = [
    "ALIASES",
    "COMMENTS",
    "OFFSETS",
    "PLACED",
    "PROFILES",
    "TYPED",
    "Profile",
    "call_kind",
    "call_terminal",
    "function_terminals",
    "generation_language",
    "is_function_terminal",
    "literal_offsets",
    "narrow_grammar",
    "narrow_rule",
    "narrow_words",
    "placed_calls",
    "typed_calls",
    "written_forms",
    "written_rule",
]

Profile = Literal["narrow", "full"]
#: The generation profiles a role may name (``generation`` in the policy file).
PROFILES: Final[tuple[Profile, ...]] = ("narrow", "full")

#: The comment terminals the narrow profile silences (a lexicon category with no word).
COMMENTS: Final = frozenset({"LINE_COMMENT", "BLOCK_COMMENT"})
#: The aliases the narrow profile admits: of a table, a subquery, a DELETE or UPDATE
#: target, and a CTE's column list and a window's name (every ``ALIAS_NAME``).
ALIASES: Final[tuple[bytes, ...]] = (
    *(f"T{i}".encode() for i in range(1, 10)),
    *(f"t{i}".encode() for i in range(1, 10)),
    *(bytes([c]) for c in range(ord("a"), ord("z") + 1)),
)

_ALIAS = "ALIAS_NAME"
_QUALIFIER = "QUALIFIER"
_ROW = "row_constructor"


def written_rule(rule: Rule) -> bool:
    """Whether a generation language keeps ``rule`` as far as its spelling goes: no
    bare alias of a table, a DELETE or UPDATE target or a result column (an alias
    follows ``AS``), no bind parameter, no row value, no window named by reference
    (``OVER w``: that a WINDOW clause defines ``w`` is not a regular property, and
    SmolLM2 ended 11 of 972 Spider dev statements ``OVER a``). Shared by the narrow profile
    and the FROM-first and covering generation languages
    (:func:`grid_sql.column_scope.generation_rule`,
    :func:`grid_sql.column_scope.covering_rule`)."""
    ex = rule.expansion
    if "PARAMETER" in ex or rule.alias == _ROW:
        return False
    if rule.origin == "over_clause" and _ALIAS in ex:
        return False
    if _ALIAS not in ex or rule.origin not in ("table_alias", "target_alias", "result_column"):
        return True
    return not any(x == _ALIAS and (i == 0 or ex[i - 1] != "AS") for i, x in enumerate(ex))


def narrow_rule(rule: Rule) -> bool:
    """Whether the narrow profile keeps ``rule``: :func:`written_rule`, no result-column
    alias, and no SELECT core without a FROM clause."""
    ex = rule.expansion
    if rule.origin == "select_core" and ex[:1] == ("SELECT",) and "from_clause" not in ex:
        return False
    if rule.origin == "result_column" and _ALIAS in rule.expansion:
        return False
    return written_rule(rule)


def narrow_grammar(grammar: Grammar, role: str) -> Grammar:
    """``grammar`` (a role's projection) with the rules :func:`narrow_rule` cuts, reduced.
    Raises :class:`~grid_core.errors.EmptyLanguageError` naming ``role`` when nothing
    is left. Kept by the projection's content (:data:`NARROWED`)."""
    name = f"{role}-narrow"
    return NARROWED.get(grammar.content_key, lambda: grammar.project(narrow_rule, name)).renamed(
        name
    )


#: :func:`placed_calls`' grammars by the content of the grammar placed.
PLACED: ContentMemo[Grammar] = ContentMemo(256)

#: Narrowed grammars by the projection's content (its fingerprint and rule
#: aliases: all that :func:`narrow_rule` and the reduction read).
NARROWED: ContentMemo[Grammar] = ContentMemo(256)


def narrow_words(
    grammar: Grammar, dfa: ByteDFA, words: Mapping[str, Collection[bytes]]
) -> dict[str, list[bytes]]:
    """The lexicon words of the narrow profile: the role's ``words`` (category ->
    W_c, the dialect's categories), plus the comment, alias and qualifier
    categories (see the module header). A qualifier word is kept only where the
    qualifier pattern matches it (a relation named like a word the dialect refuses as
    a bare qualifier is written quoted, and its quoted spelling is kept)."""
    names = {t.name for t in grammar.terminals}
    out = {c: sorted(ws) for c, ws in words.items()}
    for name in COMMENTS & names:
        out[name] = []
    if _ALIAS in names:
        out[_ALIAS] = sorted(ALIASES)
    if _QUALIFIER in names:
        qualifier = grammar.terminal_id(_QUALIFIER)
        named = [*ALIASES, *words.get("TABLE_NAME", ()), *words.get("CTE_NAME", ())]
        out[_QUALIFIER] = sorted({w + b"." for w in named if dfa.matches(w + b".", qualifier)})
    return out


def generation_language(
    profile: Profile,
    grammar: Grammar,
    dialect: Dialect,
    words: Mapping[str, Collection[bytes]],
    role: str,
) -> tuple[Grammar, Mapping[str, Collection[bytes]], ByteDFA]:
    """The grammar, lexicon words and union DFA a model writes in under ``profile``,
    from the role's projection ``grammar`` (of ``dialect``) and its lexicon ``words``:
    themselves and the dialect's DFA for ``full``; for ``narrow``, :func:`written_forms`,
    then :func:`narrow_grammar` and :func:`narrow_words`, with the typed grammar's DFA
    (:func:`~grid_sql.projection.language_dfa`: it has terminals the dialect lacks)."""
    from grid_sql.projection import dialect_dfa, language_dfa  # policy imports this module

    if profile == "full":
        return grammar, words, dialect_dfa(dialect)
    written, typed_words = written_forms(grammar, dialect, words)
    narrow = narrow_grammar(written, role)
    dfa = language_dfa(narrow)
    return narrow, narrow_words(narrow, dfa, typed_words), dfa


# ---------------------------------------------------------------- typed calls

_ARGUMENTS: Final = "expr"
_LIST: Final = "expr_list"
_SUFFIXES: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "scalar": ((),),
    "aggregate": ((), ("filter_clause",), ("over_clause",), ("filter_clause", "over_clause")),
    "window": (("over_clause",),),
}


def call_kind(dialect: Dialect, name: str) -> str:
    """How a call of ``name`` may end in a typed call (:func:`typed_calls`): a window
    function (``window``) needs its OVER clause; an aggregate among the dialect's
    functions (``aggregate``) may have FILTER and OVER; any other (``scalar``) has
    neither."""
    if name in dialect.window_functions:
        return "window"
    return "aggregate" if name in dialect.aggregate_functions else "scalar"


def call_terminal(dialect: Dialect, name: str) -> str | None:
    """The terminal a call of function ``name`` opens with in a typed grammar
    (:func:`typed_calls`): ``FUNCTION_NAME_<least>_<most>_<kind>`` (``N`` for no
    most; ``<most>`` followed by ``X<count>`` for each count between that it does not
    take, ``dialect.gaps``), None for a function with no argument bounds in
    ``dialect.arities`` (it stays ``FUNCTION_NAME``)."""
    bounds = dialect.arities.get(name)
    if bounds is None:
        return None
    least, most = bounds
    gaps = "".join(f"X{n}" for n in sorted(dialect.gaps.get(name, ())))
    kind = call_kind(dialect, name)
    upper = "N" if most is None else f"{most}{gaps}"
    return f"{dialect.function_category}_{least}_{upper}_{kind.upper()}"


def function_terminals(grammar: Grammar, dialect: Dialect) -> frozenset[str]:
    """The terminals of ``grammar`` a function call opens with: ``FUNCTION_NAME`` and,
    in a typed grammar (:func:`typed_calls`), its typed calls' terminals."""
    return frozenset(t.name for t in grammar.terminals if is_function_terminal(t.name, dialect))


def is_function_terminal(name: str, dialect: Dialect) -> bool:
    """Whether terminal (or lexicon category) ``name`` opens a function call:
    ``FUNCTION_NAME`` or a typed call's terminal (:func:`call_terminal`)."""
    category = dialect.function_category
    return name == category or name.startswith(f"{category}_")


def written_forms(
    grammar: Grammar, dialect: Dialect, words: Mapping[str, Collection[bytes]]
) -> tuple[Grammar, dict[str, list[bytes]]]:
    """The rewrites every generation language takes before its rule cuts:
    :func:`typed_calls`, then :func:`literal_offsets`."""
    typed, typed_words = typed_calls(grammar, dialect, words)
    return literal_offsets(typed), typed_words


def typed_calls(
    grammar: Grammar, dialect: Dialect, words: Mapping[str, Collection[bytes]]
) -> tuple[Grammar, dict[str, list[bytes]]]:
    """``grammar`` (a role's projection of ``dialect``) with every call of a function
    that has argument bounds (``dialect.arities``) written with a number of
    arguments it takes (within them, none of its gaps: ``dialect.takes``), and
    ``words`` with the lexicon categories that says it in.

    A function with bounds ``(least, most)`` opens its call with its own terminal
    (:func:`call_terminal`), one per (bounds, gaps, kind) of the dialect's functions,
    whose pattern is ``FUNCTION_NAME``'s over those functions alone (so the typed
    terminals' patterns are disjoint, and lark reads the grammar as GRID does). Its
    rules: ``least`` to ``most`` expressions separated by commas, no count of its
    gaps (an expression list past ``least - 1`` of them when there is no most); then
    nothing (a scalar function), FILTER and OVER as the grammar has them (an
    aggregate), or OVER (a window function: SQLite refuses ``rank()`` without one).
    No ``DISTINCT`` and no ``*`` argument. ``FUNCTION_NAME`` keeps the functions with
    no bounds (PostgreSQL's ordered-set aggregates) and its rules; with none, its
    rules go and it is a lexicon category with no word.

    Where the role's functions are a lexicon category (``FUNCTION_NAME`` in
    ``words``: it is granted some), each typed terminal is a category too, of the
    role's call lexemes of its functions; a role granted every function gets no
    such category, as before.

    The result is a sublanguage of ``grammar``'s (each typed rule spells what a
    ``FUNCTION_NAME`` rule does) with terminals the dialect lacks: its engine needs
    its own DFA (:func:`~grid_sql.projection.language_dfa`). ``grammar`` and
    ``words`` come back unchanged where the grammar has no function call. Kept by
    the grammar's content (:data:`TYPED`).
    """
    category = dialect.function_category
    out = {c: sorted(ws) for c, ws in words.items()}
    if "function_call" not in grammar.nonterminals:
        return grammar, out
    functions: dict[str, list[str]] = {}  # terminal -> the dialect's functions
    for name in sorted(set(dialect.functions)):
        functions.setdefault(call_terminal(dialect, name) or category, []).append(name)
    untyped = functions.pop(category, [])
    granted = words.get(category)
    if granted is not None:
        split: dict[str, list[bytes]] = {}
        for word in granted:
            name = ascii_lower(word.decode("utf-8").removesuffix("("))
            split.setdefault(call_terminal(dialect, name) or category, []).append(word)
        out.update((t, sorted(split.get(t, []))) for t in [category, *functions])
    elif not untyped:
        out[category] = []
    generic = bool(untyped) and out.get(category) != []
    key = (grammar.content_key, dialect.name, generic)
    return TYPED.get(key, lambda: _typed(grammar, dialect, functions, untyped, generic)), out


def _typed(
    grammar: Grammar,
    dialect: Dialect,
    functions: Mapping[str, list[str]],
    untyped: list[str],
    generic: bool,
) -> Grammar:
    category = dialect.function_category
    (call,) = (t for t in grammar.terminals if t.name == category)
    fold = dialect.keyword_case == "insensitive"

    def pattern(names: list[str]) -> str:
        body = f"(?:{word_alternatives(names)})\\("
        return f"(?i:{body})" if fold else body

    have = set(grammar.nonterminals)
    rules = [r for r in grammar.rules if generic or category not in r.expansion]
    for t, names in functions.items():
        least, most = dialect.arities[names[0]]
        for args in _argument_lists(least, most, dialect.gaps.get(names[0], frozenset())):
            for suffix in _SUFFIXES[call_kind(dialect, names[0])]:
                if have.issuperset(suffix):
                    rules.append(Rule("function_call", (t, *args, "RPAR", *suffix)))
    kept = replace(call, pattern=pattern(untyped)) if untyped else call
    terminals = TerminalSet(
        (
            *(kept if x is call else x for x in grammar.terminals),
            *(replace(call, name=t, pattern=pattern(names)) for t, names in functions.items()),
        )
    )
    out = Grammar(f"{grammar.name}-typed", terminals, tuple(rules), grammar.start)
    return out.project(lambda r: True, out.name)


_FRAMES: Final = frozenset({"frame_spec", "frame_preceding", "frame_end", "frame_following"})
_OFFSET: Final = "sum_expr"
_NUMBER: Final = "NUMBER"


def literal_offsets(grammar: Grammar) -> Grammar:
    """``grammar`` with every window frame offset (``n PRECEDING``, ``n FOLLOWING``) a
    number literal, not any expression. SQLite never resolves an offset that is not
    constant (it prepares ``ROWS sum(x) OVER w PRECEDING`` with no window ``w``) and
    refuses it when the statement runs ("frame starting offset must be a non-negative
    integer"). A generation language's rewrite like :func:`typed_calls`: the result
    is a sublanguage with ``grammar``'s terminals (its DFA too). Kept by content
    (:data:`OFFSETS`); ``grammar`` itself where it has no frame offset or no
    ``NUMBER``."""
    names = {t.name for t in grammar.terminals}
    if _NUMBER not in names or not any(
        r.origin in _FRAMES and _OFFSET in r.expansion for r in grammar.rules
    ):
        return grammar

    def build() -> Grammar:
        rules = tuple(
            Rule(r.origin, tuple(_NUMBER if x == _OFFSET else x for x in r.expansion), r.alias)
            if r.origin in _FRAMES
            else r
            for r in grammar.rules
        )
        out = Grammar(f"{grammar.name}-offsets", grammar.terminals, rules, grammar.start)
        return out.project(lambda r: True, out.name)

    return OFFSETS.get(grammar.content_key, build)


# ---------------------------------------------------------------- call placement

#: Where a clause holds expressions with no aggregate and no window call
#: (:func:`placed_calls`), and where expressions with no window call.
_PLAIN_CLAUSES: Final = frozenset(
    {
        "where_clause",
        "group_by_clause",
        "join_constraint",
        "limit_clause",
        "filter_clause",
        "row_value",
        "assignment",
    }
)
_UNWINDOWED_CLAUSES: Final = frozenset({"having_clause", "over_clause", "named_window"})
_PLAIN: Final = "plain"
_UNWINDOWED: Final = "unwindowed"
_WINDOWS: Final = frozenset({"over_clause"})
_CALL: Final = "FUNCTION_NAME"


def _call_use(rule: Rule) -> str | None:
    """``"window"`` for a call that computes over a window (a window function, or any
    call with an OVER clause), ``"aggregate"`` for an aggregate call without one (a
    keyword aggregate, a typed aggregate, any call with FILTER), None for any other
    rule. A ``FUNCTION_NAME`` call without FILTER or OVER is None: its function has
    no argument bounds, and its kind is not known (a routine's, or one of
    PostgreSQL's ordered-set aggregates)."""
    if rule.origin not in ("function_call", "aggregate_call"):
        return None
    head = rule.expansion[0]
    if _WINDOWS.intersection(rule.expansion) or head.endswith("_WINDOW"):
        return "window"
    if rule.origin == "aggregate_call" or head.endswith("_AGGREGATE"):
        return "aggregate"
    return "aggregate" if "filter_clause" in rule.expansion else None


def placed_calls(grammar: Grammar) -> Grammar:
    """``grammar`` (a generation language's, after its rule cuts) with aggregate and
    window calls only where SQL places them: no aggregate and no window call in a
    WHERE, GROUP BY, ON, LIMIT or FILTER clause, a VALUES row or an UPDATE's SET,
    nor inside an aggregate's arguments (``sum(sum(x))``); no window call in HAVING,
    in a window's PARTITION BY or ORDER BY (``rank() OVER (PARTITION BY rank() OVER
    ...)``), nor inside a window function's arguments. SQLite, PostgreSQL and DuckDB
    refuse each of them ("misuse of aggregate", "aggregate functions are not
    allowed in WHERE"), but SQLite's UPDATE with FROM, which takes an aggregate
    in its SET (``Dialect.update_from_selects``; left out all the same). SmolLM2
    wrote them in 11 of the 972 Spider dev statements decoded in the covering
    language (and in 16 of mode 1's).

    The expression nonterminals (those ``expr`` reaches without a subquery: a
    subquery places its own calls) get up to two copies, ``<name>_plain`` (no
    aggregate, no window call) and ``<name>_unwindowed`` (no window call), made only
    for those that reach such a call; the clauses above and the calls' own argument
    lists, FILTER and OVER clauses read them. A copy's rules are its original's with
    the calls left out, each named (``Rule.alias``) as the original, so the trees
    read alike. Not placed: an aggregate in the ORDER BY of a query that aggregates
    nothing else (``Dialect.order_by_aggregates_need_aggregation``: whether the
    query aggregates is not known where ORDER BY is written), nor the arguments of
    a call without argument bounds (``FUNCTION_NAME``: a routine's, PostgreSQL's
    ordered-set aggregates), read before its FILTER or OVER, if any, says what it
    is; and a window over an aggregate (``sum(count(*)) OVER ()`` runs) is left
    out (its arguments are plain). The result is a sublanguage of ``grammar``'s
    with its terminals (its DFA too); kept by content (:data:`PLACED`); ``grammar``
    itself where nothing is displaced.
    Used by the covering and FROM-first languages
    (:func:`grid_sql.column_scope.scoped_grammar`), not by the narrow profile (see
    the module header: what it costs a new role)."""
    return PLACED.get(grammar.content_key, lambda: _placed(grammar)).renamed(grammar.name)


def _placed(grammar: Grammar) -> Grammar:
    rules: dict[str, list[Rule]] = {}
    for r in grammar.rules:
        rules.setdefault(r.origin, []).append(r)
    # The expression nonterminals: what expr reaches short of a subquery.
    expression: set[str] = set()
    todo = ["expr"] if "expr" in rules else []
    while todo:
        name = todo.pop()
        if name in expression or name not in rules or name == "select_stmt":
            continue
        expression.add(name)
        for r in rules[name]:
            todo += [x for x in r.expansion if x in rules]
    bad: dict[str, Callable[[Rule], bool]] = {
        _PLAIN: lambda r: _call_use(r) is not None,
        _UNWINDOWED: lambda r: _call_use(r) == "window",
    }
    # Per kind, the expression nonterminals that reach a call it leaves out.
    reaching: dict[str, set[str]] = {}
    for kind, leaves_out in bad.items():
        found = {n for n in expression if any(leaves_out(r) for r in rules[n])}
        changed = True
        while changed:
            changed = False
            for n in expression - found - _PLAIN_CLAUSES - _UNWINDOWED_CLAUSES:
                if any(x in found for r in rules[n] for x in r.expansion):
                    found.add(n)
                    changed = True
        reaching[kind] = found - _PLAIN_CLAUSES - _UNWINDOWED_CLAUSES

    def kind_of(rule: Rule, kind: str | None, child: str) -> str | None:
        if rule.origin in _PLAIN_CLAUSES:
            return _PLAIN
        if rule.origin in _UNWINDOWED_CLAUSES:
            return _UNWINDOWED
        use = _call_use(rule)
        if use is not None and rule.expansion[0].endswith("_WINDOW"):
            return _UNWINDOWED  # a window function's arguments
        if use is not None and child not in _WINDOWS and rule.expansion[0] != _CALL:
            # An aggregate's arguments (an OVER clause fixes its own). A FUNCTION_NAME
            # call's are read before its FILTER or OVER, if any, says what it is.
            return _PLAIN
        return kind

    def named(child: str, kind: str | None) -> str:
        return f"{child}_{kind}" if kind is not None and child in reaching[kind] else child

    def rewritten(rule: Rule, kind: str | None, origin: str) -> Rule:
        ex = tuple(named(x, kind_of(rule, kind, x)) for x in rule.expansion)
        if kind is None and ex == rule.expansion:
            return rule
        return Rule(origin, ex, rule.alias or (rule.origin if kind is not None else None))

    out = [rewritten(r, None, r.origin) for r in grammar.rules]
    if all(a is b for a, b in zip(out, grammar.rules, strict=True)):
        return grammar
    copies = [
        rewritten(r, kind, f"{n}_{kind}")
        for kind, names in reaching.items()
        for n in sorted(names)
        for r in rules[n]
        if not bad[kind](r)
    ]
    placed = Grammar(grammar.name, grammar.terminals, (*out, *copies), grammar.start)
    return placed.project(lambda r: True, placed.name)


def _argument_lists(
    least: int, most: int | None, gaps: frozenset[int] = frozenset()
) -> list[tuple[str, ...]]:
    """The argument lists of a call with ``least`` to ``most`` arguments, none of
    ``gaps`` (counts within bounds; a function with no most has none)."""
    assert most is not None or not gaps, "gaps are counts within finite bounds"

    def exactly(n: int) -> tuple[str, ...]:
        return tuple(x for i in range(n) for x in (("COMMA",) if i else ()) + (_ARGUMENTS,))

    if most is not None:
        return [exactly(n) for n in range(least, most + 1) if n not in gaps]
    if least == 0:
        return [(), (_LIST,)]
    return [(*exactly(least - 1), *(("COMMA",) if least > 1 else ()), _LIST)]


#: Typed grammars by the projection's content, the dialect, and whether ``FUNCTION_NAME``
#: keeps its rules.
TYPED: ContentMemo[Grammar] = ContentMemo(64)
#: Grammars with literal frame offsets, by the typed grammar's content.
OFFSETS: ContentMemo[Grammar] = ContentMemo(64)
