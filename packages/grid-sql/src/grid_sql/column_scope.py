"""Column policy inside the mask, for FROM-first SQL (issue 17, item 4).

DESIGN.md section 7 states that per-table column policy is not enforceable by a
left-to-right mask: in SELECT-first SQL the select list precedes FROM, so the
tables whose grants decide a column are not known where the column is written.
In a FROM-first statement (`FROM t SELECT a, b`, the profiles of
:mod:`grid_sql.from_first`) they are (proofs/FromFirst.v). This module builds
the mask that uses it.

**The scoped language.** :func:`scoped_grammar` is the FROM-first profile's
grammar (or a role projection of it) narrowed to what a column scope can
decide: SELECT statements only; no ``*`` select list (``count(*)`` stays: it
reads no column); no NATURAL join and no USING (they read columns that are
never written); no derived table and no CTE (their columns are the inner
select list's names, which this scope does not model); no table alias with
a column list (PostgreSQL's and DuckDB's ``t AS q(a, b)`` renames the
table's columns by position: ``b`` then reads the second column, whatever
its name); no SQLite ``"x"``
string fallback (SQLite reads ``"x"`` as a column when one of that name is in
scope, a granted one or not); no SQLite ``x IN t``. The lexicon
of a lexeme is then chosen by the **scope** of the position where it starts:

- ``COLUMN_NAME`` written unqualified: the catalog columns ``c`` whose
  resolution is a granted column. Resolution is SQL's: the innermost enclosing
  SELECT core whose visible tables have a column ``c``; every visible table of
  that core that has ``c`` must grant it (two would be ambiguous: an error in
  both databases). A core's visible tables are those its FROM clause declared
  so far (a join condition sees the tables to its left; the select list,
  WHERE, GROUP BY, HAVING and WINDOW see all of them; the statement's ORDER BY
  and LIMIT see every core's). In SQLite a join condition's names also
  resolve against the tables joined later to its right, so there no name
  resolves past a FROM clause still being written (to an enclosing core): a
  later join could capture it (``Dialect.join_condition_sees_right``). A
  SELECT-first core's select list precedes its FROM clause: there its own
  tables are unknown and any column could resolve to them, so no column is
  admitted there (nor inside subqueries of it) unless a core nested deeper
  resolves it.
- ``COLUMN_NAME`` after a qualifier: the columns granted on the qualifier's
  table (on every table it may name, when it names more than one).
- ``QUALIFIER`` (a lexicon category here, where it is a free name in the
  dialect): the visible references, each by its alias (in four case forms when
  bare) or, when it has none, by its table's spellings, resolved innermost
  first (an inner alias shadows an outer one); only those whose table grants a
  column.
- ``TABLE_NAME`` and ``FUNCTION_NAME``: the role's, as in
  :class:`~grid_sql.lexicon.SchemaLexicon`.

**What is enforced** (soundness of :class:`ScopedGuide` against this
language): every ``COLUMN_NAME`` lexeme of an accepted output is a spelling of
a column that the role is granted on the table SQL resolves it to: an
unqualified column on the table of the innermost core that has it, a
qualified one on the qualifier's table. Every column an accepted statement
reads is such a lexeme (``*``, NATURAL and USING are not in the language).
Preconditions: the role's verbs are SELECT only; every granted table grants at
least one column; identifier case folds ASCII (SQLite; PostgreSQL's quoted
mixed-case aliases are compared folded).

**The mechanism.** One engine per (role, scope lexicon): the role's engine with
its ``COLUMN_NAME`` and ``QUALIFIER`` words replaced (:meth:`ScopedEngines.engine`),
sharing the role engine's LALR tables, parser (so stacks are shared), union
DFA, token trie and T2 (:class:`~grid_core.cache.SharedCache`). The scope is in
every cache key that depends on it: a walk at an identifier position is keyed
by an :class:`~grid_core.cache.IdentKey` that carries the lexicon's
fingerprint, which is a function of the scope's words; a walk where no lexicon
category is visible is keyed generically and shared (the lexicon cannot
matter there). :class:`ScopeState` is the scope after a sequence of emitted
lexemes (a persistent value; it reads the LALR kernel of the state each
terminal is shifted into, so ``FROM`` of a from clause is told from
``IS DISTINCT FROM`` or ``EXTRACT(... FROM``). A token may straddle lexemes
whose scopes differ (``x.name``: the qualifier, then a column under the
qualifier's scope), so the mask is the engine's mask computed level by level
(:meth:`grid_core.guide.Engine.compute_mask`'s CI walk and CD classes) with
each level's walk done by the engine of the scope after that level's emission:
the same walks the scoped lexer (:meth:`ScopedGuide.advance`) performs, hence
exact (``tests/test_column_scope.py`` checks the mask against the lexer on
every token of a real vocabulary).

The column speller (:func:`spell_columns`) is :mod:`grid_sql.speller`'s search
for columns: forbidden columns spelled token by token at column positions,
straddling tokens included, with positive controls.

**Serving.** :class:`ScopedGuide` speaks the serving verbs of
:class:`grid_core.protocol.Guide` (``ScopedEngines.guide()``), so grid-core's
mode-1 loop and grid-serve's adapters drive it as any guide; its reserve is
:class:`ScopedReserve` (the loop reads it through ``reserve_source()``). Every
step is audited as a guide's is: the record's configuration hash is the scope
engine's configuration's (the scope itself is a function of the tokens), and
the seal's fingerprints add ``column_scope`` (the grants and catalog that
decide each scope's words). A log replays with
``grid_core.replay.replay(lines, engines.base, guide=engines.guide(audit=False))``.

**Native.** In the covering language :meth:`ScopedEngines.guide` is the native
guide (:class:`~grid_sql.native_scope.NativeScopedGuide`: grid-kernels' scoped
session, built from :meth:`ScopedEngines.scope_spec`, its reserve simulated in
Rust from :meth:`ScopedEngines.reserve_raw`) whenever grid-kernels is loaded;
:class:`ScopedGuide` and :class:`ScopedReserve` are its reference, and the two
agree token for token (``tests/test_native_scope.py``,
``bench/native_scope.py``).

Known limits: the scoped and generation languages are Python only, their
reserve included (their aliases are any identifier; the native scope reads
aliases from a finite set). A step rescans or keys the pending lexeme,
O(|lexeme|), so requirement R does not hold inside long lexemes; a Python mask
costs milliseconds. ``grid audit replay`` rebuilds the scoped guide of a
``grid ask`` log from its seal (grid-serve's replay source).
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from grid_core.audit import AuditLog, Kind, mask_entry_id
from grid_core.cache import MaskTable, SharedCache, id_bits
from grid_core.errors import EMPTY_MASK, GuideError, MaskError
from grid_core.fingerprint import fingerprint
from grid_core.grammar import Grammar, Rule
from grid_core.guide import Engine, MaskResult
from grid_core.kernels import engine_tables
from grid_core.kernels import load as load_kernels
from grid_core.lexer import START, Config, Lexer, Scanner, extend_digest
from grid_core.lexicon import Lexicon, build_lexicon
from grid_core.parser import Node
from grid_core.protocol import accept_in_order, accepted_token, write_row
from grid_core.reserve import INF, ReserveError, ReserveTable, reserve_table
from grid_core.trie import TokenTrie
from grid_core.vocab import Vocabulary
from grid_sql.dialect import Dialect
from grid_sql.events import SqlEventReader
from grid_sql.generation import (
    ALIASES,
    COMMENTS,
    function_terminals,
    is_function_terminal,
    placed_calls,
    written_forms,
    written_rule,
)
from grid_sql.lexicon import DEFAULT_CASE_FORMS, SchemaLexicon, case_form, spellings
from grid_sql.policy import RoleGrants
from grid_sql.projection import dialect_grammar, language_dfa
from grid_sql.schema import SchemaSnapshot, ascii_lower

if TYPE_CHECKING:
    from grid_sql.native_scope import NativeScopedGuide

__all__ = [
    "ColumnSpelling",
    "ScopeState",
    "ScopedEngines",
    "ScopedGuide",
    "ScopedReserve",
    "generation_rule",
    "scoped_engines",
    "scoped_grammar",
    "scoped_rule",
    "spell_columns",
]

Phase = Literal["select", "from", "post", "order"]
State = tuple[Node, bytes, "ScopeState"]
"""A point of the scoped lexer: (stack, pending remainder, scope)."""

#: Entries each memo of :class:`ScopedEngines` keeps (:class:`ScopedReserve`'s
#: completions, :meth:`ScopedEngines.last_lexeme`); a memo is emptied when full.
MEMO_STATES = 100_000
#: The longest scoped completion :class:`ScopedReserve` writes before it gives up.
MAX_COMPLETION = 4_096
#: Pending lexemes :class:`ScopedReserve` ends in a row, waiting for a scope whose
#: words complete the statement, before it gives up.
MAX_ENDED = 4
QUALIFIER = "QUALIFIER"
_ALIAS = "ALIAS_NAME"


_CUT_SYMBOLS = frozenset(
    {
        "starred_columns",
        "NATURAL",
        "USING",
        "DQ_STRING",
        "with_clause",
        "CTE_NAME",
        "LATERAL",
        "alias_list",
    }
)


_JOINED = frozenset({"join_source", "joined_table"})
"""What a parenthesized join holds (SQLite's grammar, PostgreSQL's)."""


def scoped_rule(rule: Rule) -> bool:
    """Whether the scoped language keeps ``rule`` (see the module header)."""
    if _CUT_SYMBOLS.intersection(rule.expansion):
        return False
    if rule.origin == "statement":
        return tuple(rule.expansion) == ("select_stmt",)
    if rule.origin == "in_target" and "TABLE_NAME" in rule.expansion:
        return False
    return not (rule.origin == "table_or_subquery" and "select_stmt" in rule.expansion)


def generation_rule(rule: Rule) -> bool:
    """Whether the FROM-first *generation* language keeps ``rule``: :func:`scoped_rule`,
    and no SELECT-first core (with a FROM clause its select list could name no column
    in the scoped language, and a model that starts ``SELECT`` out of habit would be
    held to columnless lists; without one it is a constant query, which the profile
    leaves out): every core is FROM-first or VALUES, so the mask's first word is
    ``FROM`` (or ``VALUES``). A table or result alias needs ``AS``, and no bind
    parameter (:func:`grid_sql.generation.written_rule`). :func:`scoped_engines`
    with ``generation`` also silences comments (:data:`grid_sql.generation.COMMENTS`),
    which eat a small model's budget, and admits a column or qualifier only where it
    names one reference (:attr:`ScopedEngines.unambiguous`)."""
    if rule.origin == "select_core" and rule.expansion[:1] == ("SELECT",):
        return False
    return written_rule(rule) and scoped_rule(rule)


def covering_rule(rule: Rule) -> bool:
    """Whether the SELECT-first *covering* generation language keeps ``rule``
    (:attr:`ScopedEngines.covering`): :func:`scoped_rule` and
    :func:`~grid_sql.generation.written_rule`, SELECT-first cores only, each with a
    FROM clause (a select list written before FROM names columns its FROM clause
    must then have; with none, no column could resolve), no VALUES core, no
    result-column alias (a result's name changes no row; ``ALIAS_NAME`` is a finite
    category here, :data:`~grid_sql.generation.ALIASES`, which a model naming a
    result loops on), no call without arguments (SmolLM2 writes ``SIN( )`` and
    ``SUBSTR( * )``, which SQLite refuses; ``f(*)`` is a call with none in SQLite's
    reading; ``count(*)`` stays; the functions that take none are not spelled,
    :func:`cut_functions`), and no parenthesized join (``FROM (t)``, ``JOIN (a
    JOIN b ON ...)``: it changes no row of an inner join, SQL resolves the names
    of a condition inside it against other tables than the scope's, and SmolLM2
    looped on ``JOIN ( ( ( (`` in 161 of the 972 Spider dev statements, 23 of
    which did not run)."""
    ex = rule.expansion
    if rule.origin == "select_core" and (ex[:1] != ("SELECT",) or "from_clause" not in ex):
        return False
    if rule.origin == "values_core":  # SQLite's VALUES core (built as a select_core)
        return False
    if rule.origin == "table_or_subquery" and _JOINED.intersection(ex):
        return False
    if rule.origin == "result_column" and _ALIAS in ex:
        return False
    if rule.origin == "function_call" and ex[1:2] == ("RPAR",):
        return False
    if rule.origin == "function_arguments" and ex == ("STAR",):
        return False
    return written_rule(rule) and scoped_rule(rule)


def scoped_grammar(
    grammar: Grammar,
    role: str = "scoped",
    *,
    generation: bool = False,
    covering: bool = False,
    commas: bool = True,
) -> Grammar:
    """``grammar`` (a FROM-first profile's, or a role projection of it) narrowed to
    the scoped language: :func:`scoped_rule` (with ``generation``,
    :func:`generation_rule`: FROM-first cores only, what ``grid ask --from-first``
    decodes; with ``covering``, :func:`covering_rule`: SELECT-first cores with a
    FROM clause, what ``grid ask --covering`` decodes), then reduced; in a generation
    language, calls placed (:func:`~grid_sql.generation.placed_calls`). Without
    ``commas``, no comma join (``Dialect.comma_binds_loosest``, PostgreSQL: a join
    condition after a comma sees only the FROM item after it, and a name missing
    there is the enclosing query's, which the scope does not model; ``CROSS JOIN``
    stays)."""
    assert not (generation and covering), "one generation language at a time"
    keep = covering_rule if covering else generation_rule if generation else scoped_rule

    def kept(rule: Rule) -> bool:
        if not commas and rule.origin == "join_source" and "COMMA" in rule.expansion:
            return False
        return keep(rule)

    scoped = grammar.project(kept, role)
    return placed_calls(scoped) if generation or covering else scoped


# ---------------------------------------------------------------- the scope


@dataclass(frozen=True)
class Ref:
    """One table reference of a FROM clause: its table and the qualifiers naming it."""

    table: str
    names: frozenset[str]
    """Folded qualifier names (the alias, else the table's name)."""
    words: tuple[bytes, ...]
    """The qualifier lexemes that name it (``T1.``, ``t1.``, ``singer.``...)."""


@dataclass(frozen=True)
class Frame:
    """One SELECT statement being written (a subquery or the top level)."""

    depth: int
    """Parenthesis depth of the statement's keywords."""
    phase: Phase
    core: tuple[Ref, ...] = ()
    """The current core's references, declared so far."""
    statement: tuple[Ref, ...] = ()
    """Every core's references (the statement's ORDER BY and LIMIT see them)."""
    pending: frozenset[str] = frozenset()
    """The folded columns the core's select list named before its FROM clause
    (:attr:`ScopedEngines.covering`): its FROM clause is to have them."""
    said: frozenset[str] = frozenset()
    """The folded columns the core's select list wrote before its FROM clause at its
    own depth (not inside a call or parentheses), bare or qualified
    (:attr:`ScopedEngines.covering`): not written there again (``SELECT id, id,
    id, ...`` is how a small model loops)."""
    named: str | None = None
    """The granted table a qualifier of the core's select list named before its FROM
    clause (:attr:`ScopedEngines.covering`): its FROM clause's first table is that
    table, under its own name."""
    bare_on: frozenset[str] = frozenset()
    """The folded columns written bare in the core's join conditions, resolved
    against its tables (:attr:`ScopedEngines.unambiguous`, where
    `Dialect.join_condition_sees_right`: SQLite): no table that has one joins the
    core later (:meth:`ScopedEngines.tables`), since SQLite resolves a join
    condition's names against the tables joined to its right too (``FROM stadium
    JOIN singer ON stadium_id = 1 JOIN concert``: "ambiguous column name")."""

    @property
    def visible(self) -> tuple[Ref, ...] | None:
        """The references a column here resolves against; None where unknown."""
        if self.phase == "select":
            return None
        return self.statement if self.phase == "order" else self.core


@dataclass(frozen=True)
class ScopeState:
    """The scope after the lexemes emitted so far (a persistent value)."""

    frames: tuple[Frame, ...] = ()
    depth: int = 0
    qualifier: str | None = None
    """The folded qualifier just emitted (the next column is its table's)."""
    alias_for: int = 0
    """1 right after a table reference (an alias may follow), 2 after its AS."""

    def __hash__(self) -> int:
        """Computed once: a scope keys several memos at every CD entry of a mask."""
        got: int | None = self.__dict__.get("_hash")
        if got is None:
            got = hash((self.frames, self.depth, self.qualifier, self.alias_for))
            object.__setattr__(self, "_hash", got)
        return got


@dataclass(frozen=True)
class _Terms:
    """Terminal ids and LALR states the scope reads."""

    lpar: frozenset[int]
    rpar: int
    table: int
    alias: int
    qualifier: int
    as_: int
    from_states: frozenset[int]
    select_first_states: frozenset[int]
    select_after_from_states: frozenset[int]
    order_states: frozenset[int]
    post: frozenset[int]
    """WHERE, GROUP, HAVING, WINDOW: they end a SELECT-first core's FROM clause."""
    limit: frozenset[int]
    values: int


def _terms(engine: Engine, dialect: Dialect) -> _Terms:
    grammar, tables = engine.grammar, engine.tables
    ids = {t.name: i for i, t in enumerate(grammar.terminals)}
    names = tables.rule_names or ()

    def states(rule_name: str, dot: int, first: str | None = None) -> frozenset[int]:
        out = set()
        for s in range(tables.n_states):
            for r, d in tables.kernel(s):
                if names[r] != rule_name or d != dot:
                    continue
                rhs = tables.rhs(r)
                if first is None or (rhs and tables.symbol_name(rhs[0]) == first):
                    out.add(s)
        return frozenset(out)

    lpar = {ids["LPAR"], *(ids[t] for t in function_terminals(grammar, dialect))}
    return _Terms(
        frozenset(lpar),
        ids["RPAR"],
        ids[dialect.table_category],
        ids["ALIAS_NAME"],
        ids[QUALIFIER],
        ids["AS"],
        states("from_clause", 1),
        states("select_core", 1, "SELECT"),
        states("select_core", 2, "from_clause"),
        states("order_by_clause", 1),
        frozenset(ids[k] for k in ("WHERE", "GROUP", "HAVING", "WINDOW") if k in ids),
        frozenset(ids[k] for k in ("LIMIT", "OFFSET", "FETCH") if k in ids),
        ids["VALUES"],
    )


# ---------------------------------------------------------------- the engines


class ScopedEngines:
    """The role's scoped engines: one per scope lexicon, sharing one parser.

    ``base`` is the role's engine over :func:`scoped_grammar` with the role's
    :class:`SchemaLexicon` (its ``COLUMN_NAME`` words are the union of the
    role's granted columns; a generation language's silenced and cut words already
    taken out); every scope's engine is ``base`` with the ``COLUMN_NAME`` and
    ``QUALIFIER`` words of that scope (in a generation language, its
    ``TABLE_NAME`` words too, and in the covering language its ``ALIAS_NAME``
    words).
    """

    def __init__(
        self,
        base: Engine,
        dialect: Dialect,
        schema: SchemaSnapshot,
        grants: RoleGrants,
        lexicon: SchemaLexicon,
        unambiguous: bool = False,
        covering: bool = False,
    ) -> None:
        assert unambiguous or not covering, "the covering language is a generation language"
        if grants.verbs - {"SELECT"}:
            raise ValueError(f"role {grants.role!r}: the column scope is for SELECT-only roles")
        empty = [t for t, cols in grants.columns.items() if not cols]
        if empty:
            raise ValueError(f"role {grants.role!r}: tables without a granted column: {empty}")
        self.base = base
        self.dialect = dialect
        self.schema = schema
        self.grants = grants
        self.unambiguous = unambiguous
        """Admit a column or qualifier only where it names one reference, and no table a
        reference of the core already answers to (the generation language: a column
        two references have, or a qualifier two answer to, is an error in SQL)."""
        self.terms = _terms(base, dialect)
        self.reader = SqlEventReader(dialect)
        self.spellings = _Spellings(base.trie)
        """The trie paths the masks' CD levels read (every scope engine shares the trie)."""
        self._lexemes: dict[bytes, bytes] = {}
        self._engines: dict[
            tuple[
                frozenset[bytes], frozenset[bytes], frozenset[bytes] | None, frozenset[bytes] | None
            ],
            Engine,
        ] = {}
        self._scopes: dict[ScopeState, tuple[frozenset[bytes], frozenset[bytes]]] = {}
        self._steps: dict[tuple[ScopeState, int, bytes, Node], ScopeState] = {}
        self._native: Any = None
        self._tracking: Engine | None = None
        self.completions: dict[State, tuple[int, ...] | None] = {}
        """:class:`ScopedReserve`'s memo: the scoped completion of each state (None:
        none can be written)."""
        granted = {ascii_lower(t): (t, cols) for t, cols in grants.columns.items()}
        self._granted = {t: frozenset(ascii_lower(c) for c in cols) for t, cols in granted.values()}
        self._catalog: dict[str, dict[str, str]] = {}
        for t, _ in granted.values():
            table = schema.table(t)
            assert table is not None, f"granted table {t!r} is in the schema"
            self._catalog[t] = {ascii_lower(c): c for c in table.column_names}
        self._table_of = {
            w: sorted(names) for w, names in lexicon.origins[dialect.table_category].items()
        }
        self._qualifier_id = base.grammar.terminal_id(QUALIFIER)
        self._table_id = base.grammar.terminal_id(dialect.table_category)
        self._column_id = base.grammar.terminal_id(dialect.column_category)
        self._joins_see_right = unambiguous and dialect.join_condition_sees_right
        self.covering = covering
        """A SELECT-first core's select list, written before its FROM clause, names
        columns granted on every granted table that has them (whichever table SQL
        resolves one to grants it), bare, and all of one table
        (:meth:`_before_from`); or, once it has qualified one with a granted table's
        name (``employees.id``), columns granted on that table, bare or under that
        qualifier only; no column twice at the list's own depth (:attr:`Frame.said`).
        Its FROM clause's first table is then one that has them
        (:meth:`tables`): the qualifier's table, aliased by its own name or not at
        all (:meth:`aliases`). Aliases are :data:`~grid_sql.generation.ALIASES`.
        The SELECT-first generation language (:func:`covering_rule`,
        ``grid ask --covering``)."""
        safe = [
            self._catalog[t][c]
            for t, cols in sorted(self._granted.items())
            for c in sorted(cols)
            if all(c in self._granted[u] for u, have in self._catalog.items() if c in have)
        ]
        self._safe = {ascii_lower(c): c for c in safe}
        self._word_columns = {
            w: frozenset.intersection(*(frozenset(self._catalog[t]) for t in tables))
            for w, tables in self._table_of.items()
        }
        """The folded catalog columns every table a ``TABLE_NAME`` word names has."""
        self._alias_id = base.grammar.terminal_id(_ALIAS)
        self._by_fold = {ascii_lower(t): t for t in self._granted}
        self._alias_names: dict[str, list[bytes]] = {}
        """:data:`~grid_sql.generation.ALIASES` by folded name (``T1`` and ``t1`` fold
        alike)."""
        for a in ALIASES:
            self._alias_names.setdefault(ascii_lower(a.decode("ascii")), []).append(a)
        self._own_alias: dict[str, tuple[frozenset[bytes], frozenset[bytes]]] = {}
        """Per granted table that a qualifier may name before FROM (covering):
        (its qualifier words, its names as an alias). A table no alias can spell is
        left out: its FROM clause could alias it away from the qualifier."""
        for w, names in self._table_of.items() if covering else ():
            if names[0] not in self._own_alias:
                words = frozenset(self.ref(w).words)
                aliases = frozenset(
                    q[:-1] for q in words if base.dfa.matches(q[:-1], self._alias_id)
                )
                if words and aliases:
                    self._own_alias[names[0]] = (words, aliases)

    # -------------------------------------------------------- words of a scope

    def _is_qualifier(self, word: bytes) -> bool:
        """``word`` is a lexeme of the QUALIFIER pattern."""
        return self.base.dfa.matches(word, self._qualifier_id)

    def fold(self, word: str) -> str:
        return ascii_lower(self.reader.unquote(word))

    def ref(self, table_word: bytes) -> Ref:
        """The reference of a table lexeme (catalog name, qualifier spellings)."""
        table = self._table_of[table_word][0]
        words = tuple(
            w + b"."
            for w in spellings(table, self.dialect, QUALIFIER)
            if self._is_qualifier(w + b".")
        )
        return Ref(table, frozenset({ascii_lower(table)}), words)

    def aliased(self, ref: Ref, alias: bytes) -> Ref:
        """``ref`` named by ``alias`` only."""
        text = alias.decode("utf-8")
        forms = {text}
        if self.reader.unquote(text) == text:  # bare: the database folds its case
            forms |= {case_form(text, f) for f in DEFAULT_CASE_FORMS}
        words = tuple(sorted(w for f in forms if self._is_qualifier(w := f.encode("utf-8") + b".")))
        return Ref(ref.table, frozenset({self.fold(text)}), words)

    def _visible(self, state: ScopeState) -> list[tuple[Ref, ...] | None]:
        """Per enclosing frame, innermost first: its visible references (None: unknown).

        A frame whose FROM clause is open sees only what it declared so far; a
        nested statement inside that FROM clause (a subquery in a join
        condition) sees it the same way. Where the dialect's join conditions see
        the tables joined to their right (``Dialect.join_condition_sees_right``:
        SQLite), no name resolves past such a frame: a table joined there later
        would capture it (``FROM o SELECT ... (FROM a JOIN b ON x = 1 JOIN c ...)``
        reads c.x, not o.x, in SQLite), so the frames beyond are not listed."""
        out: list[tuple[Ref, ...] | None] = []
        for f in reversed(state.frames):
            out.append(f.visible)
            if f.phase == "from" and self.dialect.join_condition_sees_right:
                break
        return out

    def words(self, state: ScopeState) -> tuple[frozenset[bytes], frozenset[bytes]]:
        """(``COLUMN_NAME`` words, ``QUALIFIER`` words) of the next lexeme."""
        got = self._scopes.get(state)
        if got is not None:
            return got
        frames = self._visible(state)
        if self.covering and frames and frames[0] is None:
            got = self._scopes[state] = self._before_from(state)
            return got
        if state.qualifier is not None:
            columns = self._qualified(frames, state.qualifier)
        else:
            columns = self._unqualified(frames)
        spelled = self._spelled(columns)
        qualifiers: set[bytes] = set()
        seen: set[str] = set()
        for refs in frames:
            if refs is None:
                break
            names = {n for r in refs for n in r.names}
            for r in refs:
                if r.names & seen:
                    continue
                if self._qualified(frames, next(iter(r.names))):
                    qualifiers.update(r.words)
            seen |= names
        got = (spelled, frozenset(qualifiers))
        self._scopes[state] = got
        return got

    def _before_from(self, state: ScopeState) -> tuple[frozenset[bytes], frozenset[bytes]]:
        """(``COLUMN_NAME`` words, ``QUALIFIER`` words) in a select list written before
        its FROM clause (:attr:`covering`), its frame having named ``pending`` bare and
        ``named`` as a qualifier; at the list's own depth, none it has ``said``. After
        a qualifier: the columns granted on its table. Once a qualifier is named: its
        table's granted columns, bare, and its qualifier words. Before: the safe
        columns of the tables that have every pending one and it, so that one table can
        still have them all (the FROM clause's first, :meth:`tables`), and the
        qualifier words of those tables."""
        frame = state.frames[-1]
        said = frame.said if state.depth == frame.depth else frozenset()
        table = self._by_fold[state.qualifier] if state.qualifier is not None else frame.named
        if table is not None:
            names = self._catalog[table]
            columns = self._spelled(names[c] for c in self._granted[table] - said)
            return columns, frozenset() if state.qualifier else self._own_alias[table][0]
        having = [t for t, cols in self._catalog.items() if frame.pending <= cols.keys()]
        safe = {c for t in having for c in self._catalog[t].keys() & self._safe.keys() - said}
        qualifiers = frozenset(
            w for t in having if t in self._own_alias for w in self._own_alias[t][0]
        )
        return self._spelled(self._safe[c] for c in safe), qualifiers

    def _spelled(self, columns: Iterable[str]) -> frozenset[bytes]:
        """The ``COLUMN_NAME`` words of catalog ``columns``."""
        category = self.dialect.column_category
        return frozenset(w for c in columns for w in spellings(c, self.dialect, category))

    def _qualified(self, frames: list[tuple[Ref, ...] | None], name: str) -> list[str]:
        """Catalog names of the columns a qualifier admits (innermost frame naming it)."""
        for refs in frames:
            if refs is None:
                return []
            named = [r for r in refs if name in r.names]
            tables = {r.table for r in named}
            if self.unambiguous and len(named) > 1:
                return []  # two references answer to the name: SQL calls it ambiguous
            if tables:
                common = frozenset.intersection(*(self._granted[t] for t in tables))
                first = sorted(tables)[0]
                return sorted(self._catalog[first][c] for c in common)
        return []

    def _unqualified(self, frames: list[tuple[Ref, ...] | None]) -> list[str]:
        """Catalog names of the columns an unqualified reference admits. A name
        that a frame's references answer to (an alias, an unaliased table's name)
        resolves at that frame, never past it: where no column of the frame takes
        it, DuckDB and PostgreSQL read the reference's whole row, so a granted
        column of that name further out is not admitted (DuckDB's ``FROM
        employees AS budget SELECT budget`` is every column of employees)."""
        out: list[str] = []
        decided: set[str] = set()
        for refs in frames:
            if refs is None:
                break
            here: dict[str, list[str]] = {}
            for r in refs:
                for c in self._catalog[r.table]:
                    if c not in decided:
                        here.setdefault(c, []).append(r.table)
            for c, having in here.items():
                if self.unambiguous and len(having) > 1:
                    continue  # two references have it: SQL calls it ambiguous
                if all(c in self._granted[t] for t in having):
                    out.append(self._catalog[having[0]][c])
            decided |= here.keys() | {n for r in refs for n in r.names}
        return sorted(out)

    # -------------------------------------------------------- the native machine

    def scope_spec(self) -> dict[str, object]:
        """What grid-kernels' scope machine (the scope machine of this class,
        natively: :meth:`after`, :meth:`words`, :meth:`tables`, :meth:`aliases`;
        built by ``grid_kernels._native.ScopedEngines``) reads: the terminals
        and LALR states of :class:`_Terms`, the flags, and the meaning of every
        word whose text a step reads (a table's reference, an alias's names, a
        qualifier's or column's folded name), folded here by :meth:`fold`, so
        the machine never folds text. Granted tables are listed in catalog-name
        order (the machine's table ids).

        Raises ``ValueError`` outside the covering language: the scoped and the
        generation languages take any identifier as an alias, and the machine
        reads each alias from a finite table (the covering language's
        :data:`~grid_sql.generation.ALIASES`)."""
        if not self.covering:
            raise ValueError(
                "the native column scope reads aliases from ALIASES: the covering "
                "language only (the scoped and generation languages alias with any name)"
            )
        terms = self.terms
        order = sorted(self._granted)
        index = {t: i for i, t in enumerate(order)}
        refs, aliases, qualifier_words = self._spec_words()
        tables = [
            (
                ascii_lower(t),
                [(c, sorted(self._spelled([name]))) for c, name in self._catalog[t].items()],
                sorted(self._granted[t]),
            )
            for t in order
        ]
        column_words = sorted(
            {w for t in order for name in self._catalog[t].values() for w in self._spelled([name])}
        )

        def fold(word: bytes) -> str:
            return self.fold(word.decode("utf-8"))

        return {
            "lpar": sorted(terms.lpar),
            "rpar": terms.rpar,
            "table": terms.table,
            "alias": terms.alias,
            "qualifier": terms.qualifier,
            "as": terms.as_,
            "column": self._column_id,
            "values": terms.values,
            "post": sorted(terms.post),
            "limit": sorted(terms.limit),
            "from_states": sorted(terms.from_states),
            "select_first_states": sorted(terms.select_first_states),
            "select_after_from_states": sorted(terms.select_after_from_states),
            "order_states": sorted(terms.order_states),
            "covering": self.covering,
            "unambiguous": self.unambiguous,
            "joins_see_right": self.dialect.join_condition_sees_right,
            "tables": tables,
            "table_words": [
                (w, [index[t] for t in names], list(refs[w].words))
                for w, names in sorted(self._table_of.items())
            ],
            "alias_words": [(a, next(iter(r.names)), list(r.words)) for a, r in aliases.items()],
            "qualifier_words": [(q, fold(q.rstrip()[:-1])) for q in qualifier_words],
            "column_words": [(w, fold(w)) for w in column_words],
            "safe": [(c, sorted(self._spelled([name]))) for c, name in sorted(self._safe.items())],
            "own_alias": [
                (index[t], sorted(words), sorted(names))
                for t, (words, names) in sorted(self._own_alias.items())
            ],
            "alias_names": [(n, list(ws)) for n, ws in self._alias_names.items()],
        }

    def _spec_words(self) -> tuple[dict[bytes, Ref], dict[bytes, Ref], list[bytes]]:
        """(each table word's reference, each alias word's reference, every qualifier
        word) of the covering language: the words :meth:`scope_spec` lists."""
        refs = {w: self.ref(w) for w in self._table_of}
        own = {a for _, names in self._own_alias.values() for a in names}
        aliases = {a: self.aliased(next(iter(refs.values())), a) for a in sorted({*ALIASES, *own})}
        qualifier_words = sorted({q for r in [*refs.values(), *aliases.values()] for q in r.words})
        return refs, aliases, qualifier_words

    # -------------------------------------------------------- engines

    def tracking_engine(self) -> Engine:
        """The covering grammar over every word a scope may write: the base's words,
        ``QUALIFIER`` every qualifier word and the alias category every alias word of
        :meth:`scope_spec` (:data:`~grid_sql.generation.ALIASES` and the granted
        tables' own names). Each scope's lexicon is a subset of these words, so a
        statement the covering guide admits is one this engine's lexer and parser
        read the same way, tree included: its parse events
        (:class:`grid_core.events.EventTracker`) are the statement's (``grid ask
        --events``; ``tests/test_covering_events.py`` walks it). Built once; covering
        language only (``ValueError`` otherwise)."""
        if self._tracking is None:
            if not self.covering:
                raise ValueError("the tracking engine is the covering language's")
            _, aliases, qualifier_words = self._spec_words()
            terminals = self.base.grammar.terminals
            words = {terminals[c].name: set(ws) for c, ws in self.base.lexicon.words.items()}
            words[QUALIFIER] = set(qualifier_words)
            words[_ALIAS] = set(aliases)
            lexicon = build_lexicon(self.base.grammar, self.base.dfa, words)
            self._tracking = _with_lexicon(self.base, lexicon)
        return self._tracking

    def engine(self, state: ScopeState, allowed: int) -> Engine:
        """The engine that scans a lexeme starting in ``state`` under allowed set
        ``allowed``: the scope's ``COLUMN_NAME`` and ``QUALIFIER`` words where those
        terminals are allowed, none where they are not (a category outside the
        allowed set is never live and never picked, so its words cannot matter;
        leaving them out keeps one engine per scope that matters, not one per
        alias a CD entry might emit). Built once per distinct words."""
        columns, qualifiers = self.words(state)
        if not allowed >> self._column_id & 1:
            columns = frozenset()
        if not allowed >> self._qualifier_id & 1:
            qualifiers = frozenset()
        tables = None
        if self.unambiguous and allowed >> self._table_id & 1:
            tables = self.tables(state)
        aliases = None
        if self.covering and allowed >> self._alias_id & 1:
            aliases = self.aliases(state)
        key = (columns, qualifiers, tables, aliases)
        e = self._engines.get(key)
        if e is None:
            terminals = self.base.grammar.terminals
            words = {terminals[c].name: set(ws) for c, ws in self.base.lexicon.words.items()}
            words[self.dialect.column_category] = set(columns)
            words[QUALIFIER] = set(qualifiers)
            if tables is not None:
                words[self.dialect.table_category] = set(tables)
            if aliases is not None:
                words[_ALIAS] = set(aliases)
            lexicon = build_lexicon(self.base.grammar, self.base.dfa, words)
            e = self._engines.setdefault(key, _with_lexicon(self.base, lexicon))
        return e

    def tables(self, state: ScopeState) -> frozenset[bytes]:
        """The ``TABLE_NAME`` words of the generation language in ``state``: the role's,
        less the tables whose name a reference of the current core already answers
        to (``FROM pets JOIN pets``: every name either one resolves is ambiguous in
        SQL, even one written in an ON clause before the second came) and those
        with a column an earlier join condition of the core wrote bare
        (:attr:`Frame.bare_on`). Where that leaves none: those without such a
        column (an alias can still tell a taken table apart; the bare column is
        already written), else those not taken, else all (a JOIN always has a
        table to name)."""
        frame = state.frames[-1] if state.frames else None
        taken = {n for r in frame.core for n in r.names} if frame is not None else set()
        bare = frame.bare_on if frame is not None else frozenset()
        untaken = {
            w
            for w, names in self._table_of.items()
            if not any(ascii_lower(t) in taken for t in names)
        }
        clear = {
            w
            for w, names in self._table_of.items()
            if not any(bare & self._catalog[t].keys() for t in names)
        }
        free = frozenset(untaken & clear) or frozenset(clear) or frozenset(untaken)
        if self.covering and frame is not None and (frame.pending or frame.named):
            free = self._covering(frame, free)
        # Every table taken: leave them all, or a JOIN would have no table to name
        # (a prefix with no sentence; the SQL is then ambiguous, never stuck).
        return free or frozenset(self._table_of)

    def aliases(self, state: ScopeState) -> frozenset[bytes] | None:
        """The ``ALIAS_NAME`` words of the covering language in ``state``, None for
        :data:`~grid_sql.generation.ALIASES`: after the FROM clause's first table when
        the select list qualified a column with its name (:attr:`Frame.named`), that
        name only, so the qualifier still names it; else the aliases no earlier
        reference of the core answers to (``singer AS d JOIN stadium AS d`` leaves
        ``d.`` ambiguous, and SQLite refuses some nested joins that repeat an alias:
        seen on Spider, "ambiguous column name: main.d.address_id")."""
        frame = state.frames[-1] if state.frames else None
        if frame is None or not state.alias_for:
            return None
        if frame.named is not None and len(frame.core) == 1 and frame.core[0].table == frame.named:
            return self._own_alias[frame.named][1]
        taken = {n for r in frame.core[:-1] for n in r.names} & self._alias_names.keys()
        if not taken:
            return None
        return frozenset(w for n, ws in self._alias_names.items() if n not in taken for w in ws)

    def _covering(self, frame: Frame, free: frozenset[bytes]) -> frozenset[bytes]:
        """Of ``free``, the tables a FROM clause after a select list naming
        ``frame.pending`` is best continued with (:attr:`covering`): the first table
        has them all, else some; a later one has none its core's tables already
        have (SQL would call them ambiguous) and, preferably, some they lack.
        Never empty when ``free`` is not."""
        have: set[str] = set()
        for r in frame.core:
            have |= self._catalog[r.table].keys()
        if not frame.core and frame.named is not None:
            return frozenset(w for w in free if self._table_of[w][0] == frame.named) or free
        if not frame.core:
            pending = frame.pending
            return (
                frozenset(w for w in free if pending <= self._word_columns[w])
                or frozenset(w for w in free if pending & self._word_columns[w])
                or free
            )
        clash, missing = frame.pending & have, frame.pending - have
        ok = frozenset(w for w in free if not clash & self._word_columns[w])
        return frozenset(w for w in ok if missing & self._word_columns[w]) or ok or free

    def last_lexeme(self, data: bytes) -> bytes:
        """:func:`_last_lexeme` of ``data``, memoized (the same CD entries recur from
        step to step; the memo is emptied when it holds :data:`MEMO_STATES`)."""
        got = self._lexemes.get(data)
        if got is None:
            if len(self._lexemes) >= MEMO_STATES:
                self._lexemes.clear()
            got = self._lexemes[data] = _last_lexeme(self.base, data)
        return got

    @property
    def engines_built(self) -> int:
        return len(self._engines)

    # -------------------------------------------------------- the scope's steps

    def after(self, state: ScopeState, t: int, text: bytes, node: Node) -> ScopeState:
        """The scope after terminal ``t`` (lexeme ``text``) shifted, giving ``node``."""
        key = (state, t, text, node)
        got = self._steps.get(key)
        if got is None:
            got = self._steps.setdefault(key, self._after(state, t, text, node))
        return got

    def _after(self, state: ScopeState, t: int, text: bytes, node: Node) -> ScopeState:
        terms = self.terms
        frames = list(state.frames)
        depth = state.depth
        qualifier = None
        alias_for = 0
        top = frames[-1] if frames else None
        if t in terms.lpar:
            depth += 1
        elif t == terms.rpar:
            depth -= 1
            while frames and frames[-1].depth > depth:
                frames.pop()
        elif t == terms.qualifier:
            qualifier = self.fold(text.decode("utf-8").rstrip()[:-1])
            if self.covering and top is not None and top.phase == "select":
                frames[-1] = replace(top, named=self._by_fold[qualifier])
        elif node.state in terms.from_states:
            if top is not None and top.depth == depth and top.phase == "select":
                frames[-1] = replace(top, phase="from")
            elif top is not None and top.depth == depth:  # the next core of a compound
                frames[-1] = Frame(depth, "from", (), top.statement)
            else:
                frames.append(Frame(depth, "from"))
        elif node.state in terms.select_first_states:
            if top is not None and top.depth == depth:
                frames[-1] = Frame(depth, "select", (), top.statement)
            else:
                frames.append(Frame(depth, "select"))
        elif t == terms.values:  # a VALUES core: no table of its own
            if top is not None and top.depth == depth:
                frames[-1] = Frame(depth, "post", (), top.statement)
            else:
                frames.append(Frame(depth, "post"))
        elif node.state in terms.select_after_from_states:
            assert top is not None and top.phase == "from"
            frames[-1] = replace(top, phase="post")
        elif top is not None and top.depth == depth:
            if node.state in terms.order_states or t in terms.limit:
                frames[-1] = replace(top, phase="order")
            elif t in terms.post and top.phase == "from":
                frames[-1] = replace(top, phase="post")
        if t == terms.table and top is not None and frames[-1].phase == "from":
            ref = self.ref(text)
            f = frames[-1]
            frames[-1] = replace(f, core=(*f.core, ref), statement=(*f.statement, ref))
            alias_for = 1
        elif t == terms.as_ and state.alias_for == 1:
            alias_for = 2
        elif t == terms.alias and state.alias_for and frames:
            f = frames[-1]
            ref = self.aliased(f.core[-1], text)
            frames[-1] = replace(f, core=(*f.core[:-1], ref), statement=(*f.statement[:-1], ref))
        elif self.covering and t == self._column_id and frames and frames[-1].phase == "select":
            f, name = frames[-1], self.fold(text.decode("utf-8"))
            frames[-1] = replace(
                f,
                pending=f.pending if state.qualifier else f.pending | {name},
                said=f.said | {name} if depth == f.depth else f.said,
            )
        if t == self._column_id and state.qualifier is None and self._joins_see_right:
            self._note_bare(frames, self.fold(text.decode("utf-8")))
        return ScopeState(tuple(frames), depth, qualifier, alias_for)

    def _note_bare(self, frames: list[Frame], name: str) -> None:
        """Record the bare column ``name`` in :attr:`Frame.bare_on` of the frame whose
        open FROM clause it resolves against, if any: innermost first, past the
        frames whose references do not have it (in place)."""
        for i in reversed(range(len(frames))):
            f = frames[i]
            if f.phase == "from":
                frames[i] = replace(f, bare_on=f.bare_on | {name})
                return
            refs = f.visible
            if refs is None or any(name in self._catalog[r.table] for r in refs):
                return

    # -------------------------------------------------------- the scoped lexer

    def state_engine(self, state: State) -> Engine:
        """The engine that scans the pending lexeme of ``state``."""
        node, _, scope = state
        return self.engine(scope, self.base.parser.allowed(node))

    def state_config(self, state: State) -> Config:
        """``state`` as a configuration of :meth:`state_engine` (its lexicon scans the
        remainder)."""
        node, rem, _ = state
        e = self.state_engine(state)
        scan = e.scanner.scan(rem)
        assert scan is not None, "a pending remainder scans"
        return e.lexer.config(node, rem, len(rem), scan, extend_digest(0, rem))

    def advance(self, state: State, data: bytes) -> State | None:
        """The scoped lexer: read ``data`` after ``state``; None when the output leaves
        the language (a dead scan, or a remainder live for nothing)."""
        node, remainder, scope = state
        parser = self.base.parser
        e = self.engine(scope, parser.allowed(node))
        buf = remainder + data
        scan, start, i = START, 0, 0
        while i < len(buf):
            nxt = e.scanner.step(scan, i + 1 - start, buf[i])
            if nxt is not None:
                scan, i = nxt, i + 1
                continue
            got = self._emit(e, node, scope, scan, buf[start : start + scan[2]])
            if got is None:
                return None
            node, scope = got
            e = self.engine(scope, parser.allowed(node))
            start += scan[2]
            i, scan = start, START
        rest = buf[start:]
        if rest and not e.scanner.live(scan[0], scan[1], parser.allowed(node)):
            return None
        return node, rest, scope

    def _emit(
        self, e: Engine, node: Node, scope: ScopeState, scan: tuple[int, int, int, int], text: bytes
    ) -> tuple[Node, ScopeState] | None:
        _, _, la_len, la_cands = scan
        if la_len == 0:
            return None
        parser = self.base.parser
        t = e.scanner.pick(la_cands, parser.allowed(node))
        if t < 0:
            return None
        if e.scanner.ignored >> t & 1:
            return node, scope
        shifted = parser.shift(node, t)
        return shifted, self.after(scope, t, text, shifted)

    def _finalize(self, state: State) -> Node | None:
        node, remainder, scope = state
        while remainder:
            e = self.engine(scope, self.base.parser.allowed(node))
            scan = e.scanner.scan(remainder)
            if scan is None:
                return None
            got = self._emit(e, node, scope, scan, remainder[: scan[2]])
            if got is None:
                return None
            node, scope = got
            after = self.advance((node, b"", scope), remainder[scan[2] :])
            if after is None:
                return None
            node, remainder, scope = after
        return node

    def eos_allowed(self, state: State) -> bool:
        """Whether the output of ``state`` is a sentence of the scoped language."""
        node = self._finalize(state)
        return node is not None and self.base.parser.accepts(node)

    # -------------------------------------------------------- guides and audit

    def guide(self, *, audit: bool = True) -> ScopedGuide | NativeScopedGuide:
        """A guide at the start of a statement (audit on by default, as
        :meth:`grid_core.guide.Engine.guide`): in the covering language with
        grid-kernels loaded, the native one
        (:class:`~grid_sql.native_scope.NativeScopedGuide`, the same masks and
        records), else :class:`ScopedGuide`."""
        native = self.native()
        if native is None:
            return ScopedGuide(self, audit=audit)
        from grid_sql.native_scope import NativeScopedGuide

        return NativeScopedGuide(self, native.session(0, audit))

    def native(self) -> Any:
        """The native scoped engines (``grid_kernels.ScopedEngines``) of the covering
        language, built once; None in the other languages, or where grid-kernels is
        not loaded (``GRID_KERNELS=0``)."""
        native = load_kernels()
        if not self.covering or self.base.kernel is None or native is None:
            return None
        if self._native is None:
            words = [(t, sorted(ws)) for t, ws in sorted(self.base.lexicon.words.items())]
            self._native = native.ScopedEngines(
                self.base.kernel, self.scope_spec(), words, self.reserve_raw
            )
        return self._native

    def reserve_raw(self, words: Sequence[tuple[int, Sequence[bytes]]]) -> tuple[Any, ...]:
        """The grammar-level reserve tables (``ReserveTable.raw()``, partial: see
        :class:`ScopedReserve`) of the engine with lexicon ``words`` (per category
        terminal): what the native reserve asks for once per scope lexicon."""
        terminals = self.base.grammar.terminals
        by_name = {terminals[t].name: set(ws) for t, ws in words}
        lexicon = build_lexicon(self.base.grammar, self.base.dfa, by_name)
        return reserve_table(_with_lexicon(self.base, lexicon), partial=True).raw()

    def start(self) -> State:
        """The state at the start of a statement."""
        return (self.base.parser.root, b"", ScopeState())

    def fingerprints(self) -> dict[str, str]:
        """The base engine's artifacts, and ``column_scope``: what decides each scope's
        words beyond them (the dialect, the catalog's columns of the granted tables,
        the columns granted on each)."""
        grants = {t: sorted(c) for t, c in sorted(self._granted.items())}
        catalog = {t: sorted(c) for t, c in sorted(self._catalog.items())}
        scope = fingerprint(("grid.column_scope/1", self.dialect.name, grants, catalog))
        return {**self.base.fingerprints(), "column_scope": scope}


def _with_lexicon(base: Engine, lexicon: Lexicon) -> Engine:
    """``base`` with another lexicon: its grammar, tables, parser (stacks are shared),
    DFA, trie and shared cache; its own scanner, lexer and T1."""
    e = Engine.__new__(Engine)
    e.grammar, e.vocab, e.tables, e.dfa = base.grammar, base.vocab, base.tables, base.dfa
    e.lexicon = lexicon
    e.trie = base.trie
    e.scanner = Scanner(base.grammar, base.dfa, lexicon)
    e.parser = base.parser
    e.lexer = Lexer(e.scanner, e.parser)
    e.n_words = base.n_words
    e.t1 = MaskTable() if base.t1 is not None else None
    e.shared = base.shared
    e.kernel = engine_tables(e)
    return e


# ---------------------------------------------------------------- the guide


@dataclass(frozen=True, eq=False)
class _Cell:
    node: Node
    remainder: bytes
    scope: ScopeState
    previous: _Cell | None
    count: int
    token: int = -1
    terminated: bool = False
    record: tuple[int, str, int, int, Kind] | None = None


class ScopedGuide:
    """A guide over the scoped language (the module header): the serving verbs of
    :class:`grid_core.protocol.Guide` (masks, accept, EOS, rollback, fork, output,
    audit records and seal), in Python, and the decode loop's reserve
    (:meth:`reserve_source`). ``engine`` is the base engine (vocabulary,
    fingerprints); :meth:`scope_engine` the engine of the pending lexeme's scope.
    Build it with :meth:`ScopedEngines.guide`."""

    def __init__(
        self, engines: ScopedEngines, _cell: _Cell | None = None, *, audit: bool = True
    ) -> None:
        self.engines = engines
        self.engine = engines.base
        self.audited = audit
        self._cell = _cell or _Cell(engines.base.parser.root, b"", ScopeState(), None, 0)
        self._memo: tuple[_Cell, MaskResult, array.array[int]] | None = None

    # -------------------------------------------------------- lexing

    @property
    def steps(self) -> int:
        return self._cell.count

    @property
    def scope(self) -> ScopeState:
        return self._cell.scope

    def scope_engine(self) -> Engine:
        """The engine of the pending lexeme's scope."""
        return self.engines.state_engine(self._state())

    def config(self) -> Config:
        """The configuration in :meth:`scope_engine` (its lexicon scans the remainder)."""
        return self.engines.state_config(self._state())

    def _state(self) -> State:
        cell = self._cell
        return (cell.node, cell.remainder, cell.scope)

    def advance(
        self, node: Node, remainder: bytes, scope: ScopeState, data: bytes
    ) -> tuple[Node, bytes, ScopeState] | None:
        """The scoped lexer (:meth:`ScopedEngines.advance`)."""
        return self.engines.advance((node, remainder, scope), data)

    def eos_allowed(self) -> bool:
        cell = self._cell
        return not cell.terminated and self.engines.eos_allowed(self._state())

    def is_terminated(self) -> bool:
        return self._cell.terminated

    # -------------------------------------------------------- the mask

    def compute(self) -> MaskResult:
        """The exact mask: level by level, each walk in its scope's engine."""
        cell = self._cell
        if cell.terminated:
            raise GuideError(self.steps, None, "the guide has accepted EOS; it has no next mask")
        engines = self.engines
        parser = engines.base.parser
        e = self.scope_engine()
        ci, bits, group = e.root_walk(self.config())
        cd_parts: list[tuple[int, ...]] = []
        entries, classes = len(group.entries), 0
        spelling = engines.spellings
        # A level: CD entries to decide on one stack, each with the bytes its walk
        # started from (the remainder at the root, a tail below) and its start node.
        level: list[tuple[Node, ScopeState, int, bytes, tuple[int, int, bytes]]] = [
            (cell.node, cell.scope, 0, cell.remainder, entry) for entry in group.entries
        ]
        while level:
            deeper: list[tuple[Node, ScopeState, int, bytes, tuple[int, int, bytes]]] = []
            by_class: dict[tuple[Node, int, ScopeState, Node], list[tuple[int, bytes]]] = {}
            for node, scope, root, pending, (trie_node, t, tail) in level:
                text = pending + spelling.below(root, trie_node)
                ending = len(text) - len(tail)
                lexeme = engines.last_lexeme(text[:ending])
                shifted = parser.shift(node, t)
                after = engines.after(scope, t, lexeme, shifted)
                by_class.setdefault((node, t, after, shifted), []).append((trie_node, tail))
            classes += len(by_class)
            for (_, _, after, shifted), items in by_class.items():
                allowed = parser.allowed(shifted)
                e2 = engines.engine(after, allowed)
                for trie_node, tail in items:
                    more_ci, more_cd = e2.walk(trie_node, tail, allowed)
                    if more_ci:
                        cd_parts.append(more_ci)
                        bits |= id_bits(more_ci)
                    entries += len(more_cd)
                    deeper += [(shifted, after, trie_node, tail, entry) for entry in more_cd]
            level = deeper
        eos = self.eos_allowed()
        result = MaskResult(ci, tuple(cd_parts), eos, entries, classes, bits)
        if not (result.bits or result.eos):
            raise MaskError(self.steps, EMPTY_MASK)
        return result

    def _computed(self) -> tuple[MaskResult, array.array[int]]:
        """The current step's mask and its packed row (computed once per step)."""
        memo = self._memo
        if memo is None or memo[0] is not self._cell:
            result = self.compute()
            memo = self._memo = (self._cell, result, self.engine.pack_result(result))
        return memo[1], memo[2]

    def mask_ids(self) -> list[int]:
        """The admitted token ids, ascending, EOS ids included when EOS is legal."""
        return self.mask_and_ids()[0]

    def mask_and_ids(self) -> tuple[list[int], MaskResult]:
        result = self._computed()[0]
        ids = set(result.ci_ids) | set(result.cd_ids)
        if result.eos:
            ids |= set(self.engine.vocab.eos_ids)
        return sorted(ids), result

    def mask(self) -> array.array[int]:
        """The mask as a packed int32 bitmask over the vocabulary."""
        return self._computed()[1]

    def fill_next_token_bitmask(self, bitmask: object, row: int = 0) -> None:
        """Write the mask into row ``row`` of ``bitmask`` (:mod:`grid_core.protocol`)."""
        write_row(bitmask, row, self.engine.n_words, lambda: self.mask().tobytes())

    def step_audit(self) -> tuple[int, str, int]:
        """(configuration hash, mask entry id, blocked count) of the current step's mask.
        The hash is the scope engine's configuration's: the scope is not hashed, it is
        a function of the tokens, which the replay (:func:`grid_core.replay.replay`
        with this guide) re-derives."""
        packed = self.mask().tobytes()
        blocked = self.engine.vocab.n_vocab - int.from_bytes(packed, "little").bit_count()
        return self.config().hash, mask_entry_id(packed), blocked

    # -------------------------------------------------------- accepting

    def accept_token(self, token_id: int, kind: Kind = "sampled") -> None:
        """Accept one token; a token outside the mask raises :class:`GuideError` and
        changes nothing. With audit on, the step's record is kept (EOS as ``eos``).
        Any integer is taken as one; a ``kind`` other than sampled, forced or reserve
        is a ``ValueError``, before anything else is checked (as every guide's)."""
        token_id = accepted_token(token_id, kind)
        cell = self._cell
        vocab = self.engine.vocab
        if cell.terminated:
            raise GuideError(self.steps, token_id, "the guide has already accepted EOS")
        if not 0 <= token_id < vocab.n_vocab:
            raise GuideError(self.steps, token_id, "outside the vocabulary")
        is_eos = token_id in vocab.eos_ids
        if is_eos:
            if not self.eos_allowed():
                raise GuideError(self.steps, token_id, "EOS before the output is a sentence")
            got = None
        else:
            if token_id in vocab.special_ids:
                raise GuideError(self.steps, token_id, "special tokens are never admitted")
            got = self.engines.advance(self._state(), vocab.token_bytes[token_id])
            if got is None:
                spelled = vocab.token_bytes[token_id]
                raise GuideError(self.steps, token_id, f"{spelled!r} is not in the mask")
        record = None
        if self.audited:
            config_hash, entry, blocked = self.step_audit()
            record = (config_hash, entry, token_id, blocked, "eos" if is_eos else kind)
        if got is None:
            self._cell = replace(
                cell,
                previous=cell,
                count=cell.count + 1,
                token=token_id,
                terminated=True,
                record=record,
            )
            return
        node, rest, scope = got
        self._cell = _Cell(node, rest, scope, cell, cell.count + 1, token_id, False, record)

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int:
        """Accept in order up to the first refused token; how many were accepted."""
        return accept_in_order(self, tokens, kind)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many leading ``tokens`` would be accepted (the guide is unchanged)."""
        return ScopedGuide(self.engines, self._cell, audit=False).accept_tokens(tokens)

    def accepts(self, token_id: int) -> bool:
        """Whether the scoped lexer takes ``token_id`` here (the reference for the mask)."""
        vocab = self.engine.vocab
        if token_id in vocab.eos_ids:
            return self.eos_allowed()
        if token_id in vocab.special_ids:
            return False
        return self.engines.advance(self._state(), vocab.token_bytes[token_id]) is not None

    def rollback(self, n: int = 1) -> None:
        if not 0 <= n <= self.steps:
            raise GuideError(self.steps, None, f"cannot roll back {n} of {self.steps} tokens")
        cell = self._cell
        for _ in range(n):
            assert cell.previous is not None
            cell = cell.previous
        self._cell = cell

    def fork(self) -> ScopedGuide:
        return ScopedGuide(self.engines, self._cell, audit=self.audited)

    def config_key(self) -> tuple[Node, bytes, ScopeState, bool]:
        """The configuration with its scope (equal keys, equal masks)."""
        cell = self._cell
        return (cell.node, cell.remainder, cell.scope, cell.terminated)

    def output(self) -> bytes:
        spelled = self.engine.vocab.token_bytes
        parts, cell = [], self._cell
        while cell.previous is not None:
            if not cell.terminated:
                parts.append(spelled[cell.token])
            cell = cell.previous
        return b"".join(reversed(parts))

    def audit_log(self) -> AuditLog:
        """The records of the steps so far, chained (unsealed)."""
        records = []
        cell: _Cell | None = self._cell
        while cell is not None and cell.previous is not None:
            if cell.record is None:
                raise GuideError(self.steps, None, "this guide does not audit its steps")
            records.append(cell.record)
            cell = cell.previous
        log = AuditLog()
        for config_hash, entry, token, blocked, kind in reversed(records):
            log.append(config_hash, entry, token, blocked, kind)
        return log

    def fingerprints(self) -> dict[str, str]:
        """The artifacts the records depend on (:meth:`ScopedEngines.fingerprints`)."""
        return self.engines.fingerprints()

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog:
        """The records so far, sealed with :meth:`fingerprints`."""
        log = self.audit_log()
        log.close(stop_reason, self.fingerprints(), mode)
        return log

    def reserve_source(self) -> ScopedReserve:
        """The decode loop's reserve for this language (:class:`ScopedReserve`)."""
        return ScopedReserve(self.engines, self._state())


class ScopedReserve:
    """The decode loop's reserve over the scoped language
    (:class:`grid_core.decode.ReserveSource`; states are ``(node, remainder, scope)``).

    A scope engine's reserve table prices a completion in that scope's words, but
    the scope changes while the completion is written (a FROM clause adds tables,
    a closing subquery takes its tables away), so its plan may write a column that
    is no longer in scope. The completion of a state is therefore *simulated*
    through the scoped lexer: the plan of the state's scope engine (its partial
    :class:`~grid_core.reserve.ReserveTable`: a category with no word in the scope
    costs INF, so the plan writes around it), token by token; where the scoped
    lexer refuses a token of the plan, the plan is recomputed from the state
    reached, in that state's scope engine (when the refused token is the plan's
    first, a piece whose space ends the pending lexeme, the space is written
    alone first: the lexeme's emission is what changed the scope; where the
    scope's table cannot complete at all because the pending lexeme's emission
    brings the words, :meth:`_end_pending` finishes that lexeme with a blank
    first). The reserve is the length of that completion, which is exactly
    what the loop writes: theorem 4's obligation
    (the written completion is legal and as long as the reserve) holds by
    construction, and ``reserve == 0`` iff EOS is legal. Memoized per state (on
    the :class:`ScopedEngines`). A state from which no recomputed plan makes
    progress, or whose completion passes :data:`MAX_COMPLETION` tokens, has no
    completion: its reserve is :data:`~grid_core.reserve.INF`, so the loop never
    takes a token into it (it writes the completion of the state it is in), and
    :meth:`completion` raises :class:`~grid_core.reserve.ReserveError`.
    """

    def __init__(self, engines: ScopedEngines, start: State) -> None:
        self.engines = engines
        self._start = start
        self._spelling = engines.base.vocab.token_bytes

    def start(self) -> State:
        return self._start

    def advance(self, state: object, token: int) -> State:
        after = self.engines.advance(_as_state(state), self._spelling[token])
        assert after is not None, "a token of the mask leaves the language"
        return after

    def reserve(self, state: object) -> int:
        """The completion's length; :data:`~grid_core.reserve.INF` for a state whose
        completion cannot be written (the loop then never takes the token that leads
        there: it writes the completion of the state it is in)."""
        got = self._completion(_as_state(state))
        return INF if got is None else len(got)

    def completion(self, state: object) -> list[int]:
        got = self._completion(_as_state(state))
        if got is None:
            raise ReserveError("no scoped completion from this state")
        return list(got)

    def _completion(self, st: State) -> tuple[int, ...] | None:
        memo = self.engines.completions
        if st not in memo:
            if len(memo) >= MEMO_STATES:
                memo.clear()
            try:
                memo[st] = self._simulate(st)
            except ReserveError:
                memo[st] = None
        return memo[st]

    def _simulate(self, state: State) -> tuple[int, ...]:
        engines, spelling = self.engines, self._spelling
        out: list[int] = []
        ended_in_a_row = 0
        while not engines.eos_allowed(state):
            table = reserve_table(engines.state_engine(state), partial=True)
            config = engines.state_config(state)
            if table.reserve(config) >= INF:
                ended = self._end_pending(table, config, state)
                ended_in_a_row += 1
                if ended is None or ended_in_a_row > MAX_ENDED:
                    raise ReserveError(f"no completion in the scope after {len(out)} tokens")
                tokens, state = ended
                out += tokens
                continue
            ended_in_a_row = 0
            taken = 0
            for token in table.completion(config):
                after = engines.advance(state, spelling[token])
                if after is None and not taken and spelling[token][:1] == b" ":
                    # The piece's space ends the pending lexeme, whose emission changes
                    # the scope its next word is judged in (``t1.`` then a column of
                    # t1's table): write the space alone, then plan in the new scope.
                    token = table.split(b" ")[0]  # type: ignore[index]
                    after = engines.advance(state, spelling[token])
                if after is None:
                    break
                out.append(token)
                state, taken = after, taken + 1
            if not taken or len(out) > MAX_COMPLETION:
                raise ReserveError(
                    f"the scoped completion makes no progress after {len(out)} tokens"
                )
        return tuple(out)

    def _end_pending(
        self, table: ReserveTable, config: Config, state: State
    ) -> tuple[list[int], State] | None:
        """Finish the pending lexeme and end it with a blank, when the scope's own words
        cannot complete the statement but the lexeme's emission changes the scope
        (``Has_Pet.`` pending where no unqualified column is unambiguous: its
        columns come with the qualifier's scope). The tokens and the state after
        them, or None when no finish option of the remainder is written that way."""
        if not config.size:
            return None
        engines, spelling = self.engines, self._spelling
        for option in table.finish_options(config.scan[0], config.scan[1]):
            for blank in (b" ", b"\n"):
                tokens = table.split(option.suffix + blank)
                if tokens is None:
                    continue
                at: State | None = state
                for token in tokens:
                    at = engines.advance(at, spelling[token]) if at is not None else None
                if at is not None:
                    return list(tokens), at
        return None


def _as_state(state: object) -> State:
    assert isinstance(state, tuple) and len(state) == 3, "a scoped reserve state"
    return state


class _Spellings:
    """Trie paths, memoized (``TokenTrie.spelling_of`` walks down from the root, half
    of a covering mask's time before the memo outlived one mask). At most one entry
    per trie node."""

    def __init__(self, trie: TokenTrie) -> None:
        self.trie = trie
        self._memo: dict[int, bytes] = {0: b""}

    def of(self, node: int) -> bytes:
        got = self._memo.get(node)
        if got is None:
            got = self._memo[node] = self.trie.spelling_of(node)
        return got

    def below(self, root: int, node: int) -> bytes:
        """The path from ``root`` down to ``node`` (``root`` is on it)."""
        full, head = self.of(node), self.of(root)
        assert full.startswith(head)
        return full[len(head) :]


def _last_lexeme(engine: Engine, data: bytes) -> bytes:
    """The last lexeme of ``data``, which ends at a lexeme's end (ignored ones before it).
    Lexeme boundaries are the union DFA's (maximal munch): any lexicon gives them."""
    scanner = engine.scanner
    scan, start, i = START, 0, 0
    while i < len(data):
        nxt = scanner.step(scan, i + 1 - start, data[i])
        if nxt is not None:
            scan, i = nxt, i + 1
            continue
        if not scan[2]:
            break
        start += scan[2]
        i, scan = start, START
    return data[start:]


def scoped_engines(
    dialect: Dialect,
    schema: SchemaSnapshot,
    grants: RoleGrants,
    vocab: Vocabulary,
    *,
    grammar: Grammar | None = None,
    trie: TokenTrie | None = None,
    cache: bool | SharedCache = True,
    generation: bool = False,
    covering: bool = False,
) -> ScopedEngines:
    """The scoped engines of a role: ``dialect`` is the base dialect (``sqlite``,
    ``postgres``: its schema snapshots and lexicons), the grammar its FROM-first
    profile's (``grammar``, e.g. a role projection of the profile, else the
    profile's L1), narrowed by :func:`scoped_grammar`."""
    from grid_sql.from_first import from_first_of, from_first_profile

    profile = from_first_of(dialect) or from_first_profile(dialect)
    lexicon = SchemaLexicon.build(dialect, schema, grants)
    words: dict[str, list[bytes]] = lexicon.word_lists()
    words[QUALIFIER] = []
    writing = generation or covering
    g = grammar or dialect_grammar(profile)
    if writing:
        g, words = written_forms(g, profile, words)
    g = scoped_grammar(
        g,
        grants.role,
        generation=generation,
        covering=covering,
        commas=not dialect.comma_binds_loosest,
    )
    silenced = COMMENTS & {t.name for t in g.terminals} if writing else frozenset()
    for name in silenced:
        words[name] = []
    if covering:
        cut = cut_functions(words, dialect)
        for category in function_terminals(g, profile) & words.keys():
            words[category] = [w for w in words[category] if w not in cut]
        words[_ALIAS] = list(ALIASES)
    dfa = language_dfa(g)
    base = Engine(g, vocab, build_lexicon(g, dfa, words), dfa=dfa, trie=trie, cache=cache)
    return ScopedEngines(base, dialect, schema, grants, lexicon, writing, covering)


def cut_functions(words: Mapping[str, Collection[bytes]], dialect: Dialect) -> frozenset[bytes]:
    """The function words of ``words`` (each a name and its ``(``, in any case form or
    quoted) the covering language does not spell: the dialect's window functions
    (``Dialect.window_functions``: each needs an OVER clause, which a small model
    leaves out, and SQLite then refuses the statement) and the functions that take
    no argument (``Dialect.function_arities``: the language has no call without
    one, :func:`covering_rule`)."""
    arities = dialect.arities
    cut = set(dialect.window_functions) | {f for f, (_, most) in arities.items() if most == 0}
    fn = [w for c, ws in words.items() if is_function_terminal(c, dialect) for w in ws]
    return frozenset(
        w for w in fn if ascii_lower(w.decode("utf-8").split("(")[0].strip().strip('"')) in cut
    )


# ---------------------------------------------------------------- the column speller


@dataclass
class ColumnSpelling:
    """The counts of :func:`spell_columns` (the JSON record of a column probe)."""

    positions: int = 0
    targets: int = 0
    searches: int = 0
    trials: int = 0
    """(state, token) pairs checked against the mask and the scoped lexer."""
    bypasses: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    controls_expected: int = 0
    controls_reached: int = 0
    controls_missing: list[str] = field(default_factory=list)


_State = tuple[Node, bytes, ScopeState]

_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def spell_columns(
    engines: ScopedEngines,
    contexts: Mapping[str, frozenset[str]],
    *,
    glues: tuple[bytes, ...] = (b" ", b""),
) -> ColumnSpelling:
    """The RBAC speller's search (:mod:`grid_sql.speller`) for columns in the scoped
    language: at each context (a prefix after which a column may be written), every
    column of the granted tables in each case form and quoted is spelled token by
    token over the vocabulary, from every byte boundary of the context's tail
    (tokens that straddle the context and the column) and after each glue. A token
    is followed when the mask admits it; the mask's verdict is checked against the
    scoped lexer's on every token tried. A spelling complete with reading
    ``COLUMN_NAME`` is a **bypass** when the column (case-folded) is not in the
    context's expected set ``contexts[context]``, and reaches a **positive
    control** when it is (bare catalog spelling)."""
    vocab = engines.base.vocab
    spelled = vocab.token_bytes
    ordered = sorted((b, i) for i, b in enumerate(spelled) if b and i not in vocab.special_ids)
    keys = [b for b, _ in ordered]
    longest = max(len(b) for b in keys)
    column = engines.base.grammar.terminal_id(engines.dialect.column_category)
    out = ColumnSpelling()
    names = sorted({c for cols in engines._catalog.values() for c in cols.values()})
    guide0 = ScopedGuide(engines, audit=False)

    def starting(prefix: bytes) -> list[int]:
        k = bisect.bisect_left(keys, prefix)
        got = []
        while k < len(keys) and keys[k].startswith(prefix):
            got.append(ordered[k][1])
            k += 1
        return got

    for context, expected in contexts.items():
        out.positions += 1
        masks: dict[_State, frozenset[int]] = {}
        for glue in glues:
            pre = context.encode() + glue
            at = guide0.advance(engines.base.parser.root, b"", ScopeState(), pre)
            assert at is not None, f"context {pre!r} is in the language"
            straddles: dict[int, _State | None] = {}
            for name in names:
                forms = {case_form(name, f).encode() for f in DEFAULT_CASE_FORMS}
                forms |= set(spellings(name, engines.dialect, engines.dialect.column_category))
                allowed = ascii_lower(name) in expected
                for word in sorted(forms):
                    if glue == b"" and word[0] in _NAME_BYTES and pre[-1] in _NAME_BYTES:
                        continue  # the word would continue the context's last lexeme
                    out.targets += 1
                    out.searches += 1
                    reached = _spell(
                        engines, pre, word, longest, starting, column, out, masks, straddles
                    )
                    label = f"{name} as {word!r} after {pre!r}"
                    if reached and not allowed:
                        out.bypasses.append(label)
                    if allowed and word == name.encode():
                        out.controls_expected += 1
                        out.controls_reached += reached
                        if not reached:
                            out.controls_missing.append(label)
    return out


def _spell(
    engines: ScopedEngines,
    pre: bytes,
    word: bytes,
    longest: int,
    starting: Callable[[bytes], list[int]],
    column: int,
    out: ColumnSpelling,
    masks: dict[_State, frozenset[int]],
    straddles: dict[int, _State | None],
) -> bool:
    """Whether some admitted token path spells ``word`` after ``pre``, read as a column."""
    spelled = engines.base.vocab.token_bytes
    root = engines.base.parser.root
    probe = ScopedGuide(engines, audit=False)

    def admitted(state: _State, tid: int) -> _State | None:
        if state not in masks:
            masks[state] = frozenset(
                ScopedGuide(engines, _Cell(*state, None, 0), audit=False).mask_ids()
            )
        out.trials += 1
        ok = tid in masks[state]
        nxt = probe.advance(*state, spelled[tid])
        if ok != (nxt is not None):
            out.disagreements.append(f"{spelled[tid]!r} after {pre!r}: mask={ok}")
        return nxt if ok else None

    def reads_column(state: _State) -> bool:
        node, rem, scope = state
        if rem != word:
            return False
        e = engines.engine(scope, engines.base.parser.allowed(node))
        scan = e.scanner.scan(rem)
        if scan is None or scan[2] != len(rem):
            return False
        return e.scanner.pick(scan[3], engines.base.parser.allowed(node)) == column

    seen: set[tuple[_State, int]] = set()

    def visit(state: _State, prefix: bytes, done: int) -> bool:
        """Follow tokens spelling ``prefix`` then ``word[done:]`` onwards."""
        for k in range(done + 1, len(word) + 1):
            for tid in starting(prefix + word[done:k]):
                tail = spelled[tid][len(prefix) :]
                if len(tail) > k - done and tail[k - done] in _NAME_BYTES:
                    continue  # a longer lexeme, another name
                if len(tail) > k - done and k < len(word):
                    continue  # the token leaves the word before its end
                key = (state, tid)
                if key in seen:
                    continue
                seen.add(key)
                nxt = admitted(state, tid)
                if nxt is None:
                    continue
                if k == len(word):
                    if len(tail) > k - done:
                        # the token ends the word: it was emitted; read it before the end
                        before = probe.advance(*state, spelled[tid][: len(prefix) + k - done])
                        if before is not None and reads_column(before):
                            return True
                    elif reads_column(nxt):
                        return True
                elif visit(nxt, b"", k):
                    return True
        return False

    start = probe.advance(root, b"", ScopeState(), pre)
    assert start is not None
    if visit(start, b"", 0):
        return True
    for j in range(max(0, len(pre) - longest), len(pre)):
        if not starting(pre[j:] + word[:1]):
            continue
        if j not in straddles:
            straddles[j] = probe.advance(root, b"", ScopeState(), pre[:j])
        straddle = straddles[j]
        if straddle is not None and visit(straddle, pre[j:], 0):
            return True
    return False
