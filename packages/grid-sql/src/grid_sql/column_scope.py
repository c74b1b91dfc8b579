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
select list's names, which this scope does not model); no SQLite ``"x"``
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
  and LIMIT see every core's). A SELECT-first core's select list precedes its
  FROM clause: there its own tables are unknown and any column could resolve to
  them, so no column is admitted there (nor inside subqueries of it) unless a
  core nested deeper resolves it.
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
mixed-case aliases are compared folded); SQLite 3.39 or later (an ON clause may
not name a table to its right).

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

Known limits: Python only (no native session; each step rescans the pending
lexeme, O(|lexeme|), so requirement R does not hold inside long lexemes). The
audit records (``accept_token(..., audit=True)``: configuration hash of the
scope engine's configuration, mask entry id, token, blocked count) chain like a
guide's (:meth:`ScopedGuide.audit_log`), but the scope is not a field of the
record and ``grid audit verify`` cannot replay this guide: exact audit of the
scope switch is left undone.
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from grid_core.audit import AuditLog, Kind, mask_entry_id
from grid_core.cache import MaskTable, SharedCache, id_bits
from grid_core.dfa import DEAD
from grid_core.errors import GuideError, MaskError
from grid_core.grammar import Grammar, Rule
from grid_core.guide import Engine, MaskResult
from grid_core.kernels import engine_tables
from grid_core.lexer import START, Config, Lexer, Scanner, extend_digest
from grid_core.lexicon import Lexicon, build_lexicon
from grid_core.parser import Node
from grid_core.trie import TokenTrie
from grid_core.vocab import Vocabulary
from grid_sql.dialect import Dialect
from grid_sql.events import SqlEventReader
from grid_sql.lexicon import DEFAULT_CASE_FORMS, SchemaLexicon, case_form, spellings
from grid_sql.policy import RoleGrants
from grid_sql.projection import dialect_dfa, dialect_grammar
from grid_sql.schema import SchemaSnapshot, ascii_lower

__all__ = [
    "ColumnSpelling",
    "ScopeState",
    "ScopedEngines",
    "ScopedGuide",
    "scoped_engines",
    "scoped_grammar",
    "scoped_rule",
    "spell_columns",
]

Phase = Literal["select", "from", "post", "order"]
QUALIFIER = "QUALIFIER"

_CUT_SYMBOLS = frozenset(
    {"starred_columns", "NATURAL", "USING", "DQ_STRING", "with_clause", "CTE_NAME", "LATERAL"}
)


def scoped_rule(rule: Rule) -> bool:
    """Whether the scoped language keeps ``rule`` (see the module header)."""
    if _CUT_SYMBOLS.intersection(rule.expansion):
        return False
    if rule.origin == "statement":
        return tuple(rule.expansion) == ("select_stmt",)
    if rule.origin == "in_target" and "TABLE_NAME" in rule.expansion:
        return False
    return not (rule.origin == "table_or_subquery" and "select_stmt" in rule.expansion)


def scoped_grammar(grammar: Grammar, role: str = "scoped") -> Grammar:
    """``grammar`` (a FROM-first profile's, or a role projection of it) narrowed to
    the scoped language: :func:`scoped_rule`, then reduced."""
    return grammar.project(scoped_rule, role)


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

    lpar = {ids["LPAR"]}
    if dialect.function_category in ids:
        lpar.add(ids[dialect.function_category])
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
    role's granted columns); every scope's engine is ``base`` with the
    ``COLUMN_NAME`` and ``QUALIFIER`` words of that scope.
    """

    def __init__(
        self,
        base: Engine,
        dialect: Dialect,
        schema: SchemaSnapshot,
        grants: RoleGrants,
        lexicon: SchemaLexicon,
    ) -> None:
        if grants.verbs - {"SELECT"}:
            raise ValueError(f"role {grants.role!r}: the column scope is for SELECT-only roles")
        empty = [t for t, cols in grants.columns.items() if not cols]
        if empty:
            raise ValueError(f"role {grants.role!r}: tables without a granted column: {empty}")
        self.base = base
        self.dialect = dialect
        self.schema = schema
        self.grants = grants
        self.role_lexicon = lexicon
        self.terms = _terms(base, dialect)
        self.reader = SqlEventReader(dialect)
        self._engines: dict[tuple[frozenset[bytes], frozenset[bytes]], Engine] = {}
        self._scopes: dict[ScopeState, tuple[frozenset[bytes], frozenset[bytes]]] = {}
        self._steps: dict[tuple[ScopeState, int, bytes, Node], ScopeState] = {}
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
        self._column_id = base.grammar.terminal_id(dialect.column_category)

    # -------------------------------------------------------- words of a scope

    def _is_qualifier(self, word: bytes) -> bool:
        """``word`` is a lexeme of the QUALIFIER pattern."""
        dfa = self.base.dfa
        q = dfa.run(0, word)
        return q != DEAD and bool(dfa.accept[q] >> self._qualifier_id & 1)

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
        condition) sees it the same way."""
        return [f.visible for f in reversed(state.frames)]

    def words(self, state: ScopeState) -> tuple[frozenset[bytes], frozenset[bytes]]:
        """(``COLUMN_NAME`` words, ``QUALIFIER`` words) of the next lexeme."""
        got = self._scopes.get(state)
        if got is not None:
            return got
        frames = self._visible(state)
        if state.qualifier is not None:
            columns = self._qualified(frames, state.qualifier)
        else:
            columns = self._unqualified(frames)
        spelled = frozenset(
            w for c in columns for w in spellings(c, self.dialect, self.dialect.column_category)
        )
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

    def _qualified(self, frames: list[tuple[Ref, ...] | None], name: str) -> list[str]:
        """Catalog names of the columns a qualifier admits (innermost frame naming it)."""
        for refs in frames:
            if refs is None:
                return []
            tables = {r.table for r in refs if name in r.names}
            if tables:
                common = frozenset.intersection(*(self._granted[t] for t in tables))
                first = sorted(tables)[0]
                return sorted(self._catalog[first][c] for c in common)
        return []

    def _unqualified(self, frames: list[tuple[Ref, ...] | None]) -> list[str]:
        """Catalog names of the columns an unqualified reference admits."""
        out: list[str] = []
        decided: set[str] = set()
        for refs in frames:
            if refs is None:
                break
            tables = {r.table for r in refs}
            here: dict[str, list[str]] = {}
            for t in tables:
                for c in self._catalog[t]:
                    if c not in decided:
                        here.setdefault(c, []).append(t)
            for c, having in here.items():
                if all(c in self._granted[t] for t in having):
                    out.append(self._catalog[having[0]][c])
            decided |= here.keys()
        return sorted(out)

    # -------------------------------------------------------- engines

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
        key = (columns, qualifiers)
        e = self._engines.get(key)
        if e is None:
            words = {c: set(ws) for c, ws in self.role_lexicon.words.items()}
            words[self.dialect.column_category] = set(key[0])
            words[QUALIFIER] = set(key[1])
            lexicon = build_lexicon(self.base.grammar, self.base.dfa, words)
            e = self._engines.setdefault(key, _with_lexicon(self.base, lexicon))
        return e

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
        return ScopeState(tuple(frames), depth, qualifier, alias_for)


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
    """A guide over the scoped language (the module header): masks, accept, EOS,
    rollback, fork, output and audit records, in Python."""

    def __init__(self, engines: ScopedEngines, _cell: _Cell | None = None) -> None:
        self.engines = engines
        base = engines.base
        self._cell = _cell or _Cell(base.parser.root, b"", ScopeState(), None, 0)

    # -------------------------------------------------------- lexing

    @property
    def steps(self) -> int:
        return self._cell.count

    @property
    def scope(self) -> ScopeState:
        return self._cell.scope

    def engine(self) -> Engine:
        """The engine of the pending lexeme's scope."""
        cell = self._cell
        return self.engines.engine(cell.scope, self.engines.base.parser.allowed(cell.node))

    def config(self) -> Config:
        """The configuration in :meth:`engine` (its lexicon scans the remainder)."""
        cell = self._cell
        e = self.engine()
        scan = e.scanner.scan(cell.remainder)
        assert scan is not None, "a pending remainder scans"
        rem = cell.remainder
        return e.lexer.config(cell.node, rem, len(rem), scan, extend_digest(0, rem))

    def advance(
        self, node: Node, remainder: bytes, scope: ScopeState, data: bytes
    ) -> tuple[Node, bytes, ScopeState] | None:
        """The scoped lexer: read ``data`` after (node, remainder, scope); None when the
        output leaves the language (a dead scan, or a remainder live for nothing)."""
        engines = self.engines
        parser = engines.base.parser
        e = engines.engine(scope, parser.allowed(node))
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
            e = engines.engine(scope, parser.allowed(node))
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
        parser = self.engines.base.parser
        t = e.scanner.pick(la_cands, parser.allowed(node))
        if t < 0:
            return None
        if e.scanner.ignored >> t & 1:
            return node, scope
        shifted = parser.shift(node, t)
        return shifted, self.engines.after(scope, t, text, shifted)

    def _finalize(self, node: Node, remainder: bytes, scope: ScopeState) -> Node | None:
        while remainder:
            e = self.engines.engine(scope, self.engines.base.parser.allowed(node))
            scan = e.scanner.scan(remainder)
            if scan is None:
                return None
            got = self._emit(e, node, scope, scan, remainder[: scan[2]])
            if got is None:
                return None
            node, scope = got
            after = self.advance(node, b"", scope, remainder[scan[2] :])
            if after is None:
                return None
            node, remainder, scope = after
        return node

    def eos_allowed(self) -> bool:
        cell = self._cell
        if cell.terminated:
            return False
        node = self._finalize(cell.node, cell.remainder, cell.scope)
        return node is not None and self.engines.base.parser.accepts(node)

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
        e = self.engine()
        ci, bits, group = e.root_walk(self.config())
        cd_parts: list[tuple[int, ...]] = []
        entries, classes = len(group.entries), 0
        spelling = _Spellings(e)
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
                lexeme = _last_lexeme(engines.base, text[:ending])
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
            raise MaskError(self.steps, "empty mask at a viable prefix")
        return result

    def mask_ids(self) -> list[int]:
        """The admitted token ids, ascending, EOS ids included when EOS is legal."""
        result = self.compute()
        ids = set(result.ci_ids) | set(result.cd_ids)
        if result.eos:
            ids |= set(self.engines.base.vocab.eos_ids)
        return sorted(ids)

    def mask(self) -> array.array[int]:
        result = self.compute()
        return self.engines.base.pack_result(result)

    # -------------------------------------------------------- accepting

    def _audit(self) -> tuple[int, str, int]:
        base = self.engines.base
        packed = self.mask()
        result_ids = sum(bin(w & 0xFFFFFFFF).count("1") for w in packed)
        return self.config().hash, mask_entry_id(packed.tobytes()), base.vocab.n_vocab - result_ids

    def accept_token(self, token_id: int, kind: Kind = "sampled", *, audit: bool = False) -> None:
        """Accept one token; a token outside the mask raises :class:`GuideError`."""
        cell = self._cell
        vocab = self.engines.base.vocab
        if cell.terminated:
            raise GuideError(self.steps, token_id, "the guide has already accepted EOS")
        record = None
        if audit:
            config_hash, entry, blocked = self._audit()
            record = (config_hash, entry, token_id, blocked, kind)
        if token_id in vocab.eos_ids:
            if not self.eos_allowed():
                raise GuideError(self.steps, token_id, "EOS before the output is a sentence")
            self._cell = replace(
                cell,
                previous=cell,
                count=cell.count + 1,
                token=token_id,
                terminated=True,
                record=record,
            )
            return
        if token_id in vocab.special_ids or not 0 <= token_id < vocab.n_vocab:
            raise GuideError(self.steps, token_id, "not a text token")
        got = self.advance(cell.node, cell.remainder, cell.scope, vocab.token_bytes[token_id])
        if got is None:
            spelled = vocab.token_bytes[token_id]
            raise GuideError(self.steps, token_id, f"{spelled!r} is not in the mask")
        node, rest, scope = got
        self._cell = _Cell(node, rest, scope, cell, cell.count + 1, token_id, False, record)

    def accepts(self, token_id: int) -> bool:
        """Whether the scoped lexer takes ``token_id`` here (the reference for the mask)."""
        cell = self._cell
        vocab = self.engines.base.vocab
        if token_id in vocab.eos_ids:
            return self.eos_allowed()
        if token_id in vocab.special_ids:
            return False
        data = vocab.token_bytes[token_id]
        return self.advance(cell.node, cell.remainder, cell.scope, data) is not None

    def rollback(self, n: int = 1) -> None:
        if not 0 <= n <= self.steps:
            raise GuideError(self.steps, None, f"cannot roll back {n} of {self.steps} tokens")
        cell = self._cell
        for _ in range(n):
            assert cell.previous is not None
            cell = cell.previous
        self._cell = cell

    def fork(self) -> ScopedGuide:
        return ScopedGuide(self.engines, self._cell)

    def output(self) -> bytes:
        spelled = self.engines.base.vocab.token_bytes
        parts, cell = [], self._cell
        while cell.previous is not None:
            if not cell.terminated:
                parts.append(spelled[cell.token])
            cell = cell.previous
        return b"".join(reversed(parts))

    def audit_log(self) -> AuditLog:
        """The audited steps' records, chained (steps accepted with ``audit=True``)."""
        records = []
        cell: _Cell | None = self._cell
        while cell is not None and cell.previous is not None:
            if cell.record is None:
                raise GuideError(self.steps, None, "a step was accepted without audit")
            records.append(cell.record)
            cell = cell.previous
        log = AuditLog()
        for config_hash, entry, token, blocked, kind in reversed(records):
            log.append(config_hash, entry, token, blocked, kind)
        return log


class _Spellings:
    """Trie paths, memoized (``TokenTrie.spelling_of`` walks down from the root)."""

    def __init__(self, engine: Engine) -> None:
        self.trie = engine.trie
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
) -> ScopedEngines:
    """The scoped engines of a role: ``dialect`` is the base dialect (``sqlite``,
    ``postgres``: its schema snapshots and lexicons), the grammar its FROM-first
    profile's (``grammar``, e.g. a role projection of the profile, else the
    profile's L1), narrowed by :func:`scoped_grammar`."""
    from grid_sql.from_first import FROM_FIRST, from_first_profile

    profile = FROM_FIRST.get(dialect.name) or from_first_profile(dialect)
    lexicon = SchemaLexicon.build(dialect, schema, grants)
    words: dict[str, list[bytes]] = lexicon.word_lists()
    words[QUALIFIER] = []
    g = scoped_grammar(grammar or dialect_grammar(profile), grants.role)
    dfa = dialect_dfa(profile)
    base = Engine(g, vocab, build_lexicon(g, dfa, words), dfa=dfa, trie=trie, cache=cache)
    return ScopedEngines(base, dialect, schema, grants, lexicon)


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
    guide0 = ScopedGuide(engines)

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
    probe = ScopedGuide(engines)

    def admitted(state: _State, tid: int) -> _State | None:
        if state not in masks:
            masks[state] = frozenset(ScopedGuide(engines, _Cell(*state, None, 0)).mask_ids())
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
