"""The `Dialect` base: a SQL dialect of GRID as a small set of declarative knobs.

A dialect (layer L1 of DESIGN.md section 3) is a known set of files: a lark
grammar `dialects/<name>.lark`, a subclass of `Dialect` in `dialects/<name>.py`
whose fields are data (keywords, known functions and types, identifier quote
forms, the names of the lexicon categories), an accept/reject corpus under
`dialects/corpus/` and one test module. Adding a dialect needs no reading of the
engine.

Nouns used here:

- *keyword*: a word the grammar uses as a terminal of its own, case-insensitive
  under the ASCII folding of GRID's lexing (`keyword_case`). Keyword terminals
  are generated from `keywords` (name `WORD.upper()`, priority 4), so the word
  list is the single source of truth; the `.lark` file only uses them.
- *word class*: a closed set of words with one terminal (priority 3): the
  known scalar functions (`FUNCTION_NAME`, whose lexeme is the name *and* its
  opening parenthesis, e.g. `substr(`), the type names of CAST (`TYPE_NAME`,
  multi-word names allowed) and dialect extras (`COLLATION_NAME`, ...).
- *lexicon category*: an identifier terminal whose words are restricted to an
  allow-list from the catalog in deployment (table, column, CTE names). The mask
  enforces table-level policy through them.
- *function category* (`function_category`, `FUNCTION_NAME`): the word class of
  the known functions is also a lexicon category when a role's policy grants
  only some of them (DESIGN.md section 11, "functions are policy";
  `grid_sql.lexicon`). `unsafe_functions` names the functions the policy's
  default leaves out, each with its reason (`default_functions` is the rest).

Policy decisions:

- The grammar text a consumer compiles is `Dialect.grammar_text`: the `.lark`
  file followed by the generated keyword and word-class terminals, in a fixed
  order, so terminal numbering is stable for a given dialect value.
- A keyword must not be a function name, except for words listed in
  `keyword_functions`: keywords that the grammar never lets an opening
  parenthesis follow (SQLite's REPLACE, PostgreSQL's LEFT/RIGHT), so the
  keyword lexeme `left` and the function lexeme `left(` never collide.
- **Keywords are reserved** (DESIGN.md section 11: "cutting a production never
  turns a keyword into an identifier"). The bare form of every identifier
  terminal is generated from data: `bare_identifier` minus `reserved_identifiers`
  (every keyword of the grammar and the database's `never_identifiers`) for
  `_BARE_IDENT`, used by the lexicon categories; minus `reserved_free_names`
  (those and the database's `never_free_names`) for `_BARE_FREE_NAME`, used by
  the free names `ALIAS_NAME` and `QUALIFIER`. So a keyword-spelled word is a
  keyword everywhere, in L1 and in every role projection: a role whose
  projection cut `UNION` cannot write `FROM t union;` with `union` read as an
  alias, which L1 and the database would refuse. The exclusion is a regular
  language written out as a trie-shaped regex (`_bare_pattern`): GRID's
  patterns have no lookarounds. A reserved word stays available quoted.
- **Parse events** (`events`, DESIGN.md section 8, docs/events.md): the grammar
  symbols whose completion is an event of the stream `grid_core.events` emits,
  each with its kind: a rule by its tree name (a reduction), a terminal by its
  name (each lexeme). The kinds `grid_sql.events` resolves are `verb`, `table`,
  `alias`, `qualifier`, `column`, `clause_open`, `clause_close` and
  `statement`. `STATEMENT_EVENTS` is the set both built-in grammars share.
- Identifiers are spelled with `spell_identifier`: bare when the word is a bare
  identifier and neither a keyword of the grammar nor a reserved word of the
  database, else in the first quote form that can hold it (the bare form of a
  keyword is in no identifier terminal's language, so a lexicon word spelled
  like one would fail the build).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from grid_core.errors import GrammarError

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(name: str) -> str:
    """``name`` with ASCII letters lower-cased (SQLite's and PostgreSQL's folding)."""
    return name.translate(_ASCII_LOWER)


_QUOTES = {'"': '"', "`": "`", "[": "]"}


def unquote(spelling: str) -> str:
    """An identifier lexeme without its quotes (``"a""b"`` -> ``a"b``)."""
    if len(spelling) >= 2 and spelling[0] in _QUOTES and spelling[-1] == _QUOTES[spelling[0]]:
        close = _QUOTES[spelling[0]]
        inner = spelling[1:-1]
        return inner if close == "]" else inner.replace(close * 2, close)
    return spelling


if TYPE_CHECKING:
    from grid_sql.projection_rules import ProjectionRules

BASE_PACKAGE = "grid_sql.dialects"
KEYWORD_PRIORITY = 4
WORD_CLASS_PRIORITY = 3

# The blank that may separate the words of a multi-word type name (`double precision`).
_BLANK = r"[ \t\n\r\f]+"
# Terminals every dialect grammar defines: the lexicon categories and the free names.
REQUIRED_TERMINALS = ("TABLE_NAME", "COLUMN_NAME", "CTE_NAME", "ALIAS_NAME", "QUALIFIER")

# Parse events of every built-in SQL grammar: (symbol, kind); see `Dialect.events`.
STATEMENT_EVENTS: tuple[tuple[str, str], ...] = (
    ("SELECT", "verb"),
    ("UPDATE", "verb"),
    ("DELETE", "verb"),
    ("TABLE_NAME", "table"),
    ("CTE_NAME", "table"),
    ("table_alias", "alias"),
    ("target_alias", "alias"),
    ("QUALIFIER", "qualifier"),
    ("COLUMN_NAME", "column"),
    *((word, "clause_open") for word in ("WITH", "FROM", "WHERE", "GROUP", "HAVING")),
    *((word, "clause_open") for word in ("ORDER", "LIMIT", "WINDOW")),
    *(
        (f"{name}_clause", "clause_close")
        for name in ("with", "from", "where", "group_by", "having", "order_by", "limit", "window")
    ),
    ("delete_from_clause", "clause_close"),
    ("start", "statement"),
)

KeywordCase = Literal["insensitive", "sensitive"]
IdentifierCase = Literal["insensitive", "fold-lower", "sensitive"]
CompoundOrderTerms = Literal["any", "written", "names"]
"""What an ORDER BY term of a compound SELECT may be (``Dialect.compound_order_terms``)."""


class UnknownDialectError(GrammarError):
    """A dialect name that neither the built-ins nor an installed plug-in provides."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown SQL dialect {name!r}; known: {', '.join(known)}")


class DialectDefinitionError(GrammarError):
    """A dialect's knobs contradict each other or its grammar."""

    def __init__(self, dialect: str, problem: str) -> None:
        self.dialect = dialect
        self.problem = problem
        super().__init__(f"dialect {dialect!r}: {problem}")


CorpusKind = Literal["accept", "reject", "prefix"]
_CORPUS_MARKERS: dict[str, CorpusKind] = {"! ": "reject", "~ ": "prefix"}


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus line: `accept` (in L), `reject` (not a viable prefix) or `prefix`
    (a viable prefix that is not in L); `line` is its 1-based line number."""

    kind: CorpusKind
    text: bytes
    line: int


def parse_corpus(source: str) -> list[CorpusEntry]:
    """Read a corpus: one statement per line; "! " marks a reject, "~ " a viable
    prefix, "#" a comment; blank lines are skipped; anything else is an accept."""
    entries = []
    for number, raw in enumerate(source.split("\n"), start=1):
        if not raw.strip() or raw.startswith("#"):
            continue
        kind: CorpusKind = _CORPUS_MARKERS.get(raw[:2], "accept")
        body = raw if kind == "accept" else raw[2:]
        entries.append(CorpusEntry(kind, body.encode("utf-8"), number))
    return entries


@dataclass(frozen=True, kw_only=True)
class QuoteForm:
    """One way to quote an identifier: `open` word `close`, where a `close` inside
    the word is written twice when `doubling` (else the word may not contain it)."""

    open: str
    close: str
    doubling: bool = True

    def quote(self, word: str) -> str | None:
        """The quoted spelling of `word`, or None when this form cannot hold it
        (the empty word and NUL are never held)."""
        if not word or "\x00" in word:
            return None
        if self.close in word:
            if not self.doubling:
                return None
            word = word.replace(self.close, self.close * 2)
        return f"{self.open}{word}{self.close}"


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """Declarative knobs of one SQL dialect; subclasses give every field a value."""

    name: str
    # The dialect's delta over `base_grammar` (new rules, `%override`, `%extend`).
    grammar_file: str
    grammar_package: str = "grid_sql.dialects"
    # The base grammar in grid_sql.dialects the delta applies to; "" when
    # `grammar_file` is a whole grammar of its own.
    base_grammar: str = "base.lark"
    # Deltas applied between the base and `grammar_file`, as (package, file): a
    # dialect that is a delta over another dialect (DuckDB over PostgreSQL) names
    # that dialect's delta here.
    grammar_layers: tuple[tuple[str, str], ...] = ()
    # Accept/reject/prefix corpus inside grammar_package (see `parse_corpus`); "" for none.
    corpus_file: str = ""
    keywords: tuple[str, ...]
    keyword_case: KeywordCase = "insensitive"
    # The database's own keywords: a schema word spelled like one is quoted.
    reserved_words: frozenset[str] = frozenset()
    # Words the database never reads as a bare identifier (table, column, alias or
    # qualifier), keywords of the grammar or not; a subset of `reserved_words`.
    never_identifiers: frozenset[str] = frozenset()
    # Words the database reads as a bare table or column name but refuses as a bare
    # alias or qualifier (SQLite's `SELECT 1 match`, PostgreSQL's `SELECT 1 year`).
    never_free_names: frozenset[str] = frozenset()
    # Prefixes (ASCII lower case) of the relations a bare name can reach in the
    # database's own catalog, which no snapshot lists (SQLite's `sqlite_master`
    # and eponymous `pragma_table_list`, PostgreSQL's `pg_stats` ahead of the
    # search path): a role's CTE name may not start with one, since the mask
    # admits a CTE name where a table goes, without its WITH.
    catalog_prefixes: tuple[str, ...] = ()
    functions: tuple[str, ...]
    keyword_functions: frozenset[str] = frozenset()
    # Functions of `functions` that a role's default function grant leaves out, each
    # with the reason (an allocator over a size argument, ...); see `default_functions`.
    unsafe_functions: tuple[tuple[str, str], ...] = ()
    type_names: tuple[str, ...]
    word_classes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    bare_identifier: str = r"[A-Za-z_][A-Za-z0-9_$]*"
    identifier_quotes: tuple[QuoteForm, ...]
    # How the database compares unquoted identifiers; data for the lexicon builder.
    identifier_case: IdentifierCase = "insensitive"
    table_category: str = "TABLE_NAME"
    column_category: str = "COLUMN_NAME"
    cte_category: str = "CTE_NAME"
    function_category: str = "FUNCTION_NAME"
    alias_terminal: str = "ALIAS_NAME"
    qualifier_terminal: str = "QUALIFIER"
    # Parse events: (grammar symbol, kind) pairs (see the module header).
    events: tuple[tuple[str, str], ...] = STATEMENT_EVENTS
    # What a role's verbs and banned clauses cut (grid_sql.projection_rules); None:
    # the dialect cannot be projected for a role.
    projection: ProjectionRules | None = None
    # Name resolution, for the SemanticChecker (with `identifier_case`): whether a
    # double-quoted word that names no column is a string literal (SQLite's
    # fallback; the grammar then has the terminal DQ_STRING), the words that name a
    # table's row id when no column takes them, and whole-row references;
    # `boolean_names`: TRUE and FALSE read a column of that name where one is in
    # scope, and are 1 and 0 only where none is (SQLite).
    dq_string_fallback: bool = False
    rowid_names: frozenset[str] = frozenset()
    boolean_names: bool = False
    # Calls, for the SemanticChecker's statement rules (grid_sql.call_rules): the
    # argument counts each function takes, as (name, least, most or None for no
    # bound), the five keyword aggregates' included; the functions that are only
    # window functions (they need OVER); and the aggregates among `functions`
    # (COUNT, SUM and AVG always are; MIN and MAX are with one argument). A
    # function with no arity entry is not counted. `argument_gaps`: the counts
    # within a function's bounds that no overload takes, as (name, count)
    # (PostgreSQL's width_bucket takes 2 or 4, not 3).
    function_arities: tuple[tuple[str, int, int | None], ...] = ()
    argument_gaps: tuple[tuple[str, int], ...] = ()
    window_functions: frozenset[str] = frozenset()
    aggregate_functions: frozenset[str] = frozenset()
    # Whether a bare name that is no column but names a FROM source is that
    # source's whole row (PostgreSQL: `SELECT to_json(e) FROM employees e`).
    whole_row_references: bool = False
    # Where whole rows are references: whether a bare name is a column of any
    # enclosing level before it is a source's whole row (PostgreSQL: in `(SELECT
    # salary FROM dept AS salary)` inside a query over employees, `salary` is
    # employees.salary), rather than level by level, the innermost level's whole
    # row first (DuckDB: there it is dept's row).
    whole_rows_after_columns: bool = False
    # Where result aliases are names in expressions: whether HAVING's aggregate
    # calls (their arguments, FILTER) see them too (SQLite), or not, a name there
    # resolving past the aliases to the enclosing queries (DuckDB: `SELECT id AS
    # x ... HAVING max(x) > 0` is "column x not found").
    having_aggregates_see_aliases: bool = True
    # Which common tables of one WITH clause a body sees: "all" (SQLite: every
    # one, itself included: a recursive part, else "circular reference");
    # "earlier" (DuckDB: those before it, and itself only as the recursive part
    # of a WITH RECURSIVE compound); "earlier-unless-recursive" (PostgreSQL:
    # those before it, every one under WITH RECURSIVE). A name a body does not
    # see is resolved outside the WITH: an enclosing common table, else the
    # schema's table (`WITH emp(id, salary) AS (SELECT id, salary FROM emp)`
    # reads the table emp).
    cte_visibility: Literal["all", "earlier", "earlier-unless-recursive"] = "all"
    # Whether an INSERT with no column list may give fewer values than the table has
    # columns, the rest taking their defaults (PostgreSQL); SQLite and DuckDB refuse it.
    insert_fills_defaults: bool = False
    # Whether a generated column takes DEFAULT (PostgreSQL): `SET c = DEFAULT`
    # runs, and an INSERT with no column list counts the generated columns among
    # the table's ("cannot insert a non-DEFAULT value into column" for a value
    # there). SQLite and DuckDB refuse any write to one and leave them out.
    generated_take_default: bool = False
    # Whether `f(*)` is refused for a function that is neither an aggregate nor a
    # window function (PostgreSQL); SQLite and DuckDB read it as `f()`.
    star_only_aggregates: bool = False
    # (function, argument index) pairs the dialect reads when it prepares the
    # statement as a probability: a float literal (with a point or an exponent,
    # parentheses aside) from 0.0 to 1.0 (SQLite's likelihood(X, Y): "second
    # argument to likelihood() must be a constant between 0.0 and 1.0").
    # grid_sql.call_rules refuses any other argument there (constant_argument).
    probability_arguments: frozenset[tuple[str, int]] = frozenset()
    # Whether an UPDATE with a FROM clause computes its SET over a SELECT of the
    # join (SQLite): an aggregate or a window call there is taken (`UPDATE t SET
    # a = sum(u.c) FROM u` prepares); PostgreSQL and DuckDB refuse both in SET.
    update_from_selects: bool = False
    # Whether a row value `(x, y, ...)` is taken only where it is compared with a
    # row of its width, or is the left of IN (SQLite); grid_sql.row_rules refuses
    # it anywhere else. PostgreSQL and DuckDB take rows in more places.
    row_values_compared_only: bool = False
    # Whether an aggregate in the ORDER BY of a SELECT that aggregates nothing
    # else (no GROUP BY, no HAVING, no aggregate in its select list) is refused
    # (SQLite: "misuse of aggregate"); PostgreSQL and DuckDB make that SELECT an
    # aggregate query instead (`SELECT 1 FROM t ORDER BY count(a)` runs).
    # grid_sql.call_rules refuses it where this holds.
    order_by_aggregates_need_aggregation: bool = False
    # What an ORDER BY term of a compound SELECT may be besides a position:
    # "written", an output name or an expression one of its SELECTs writes as a
    # result column (SQLite: "1st ORDER BY term does not match any column in the
    # result set", even for `... UNION SELECT b FROM u ORDER BY min(a)`); "names",
    # a bare name, no expression (PostgreSQL: "invalid UNION/INTERSECT/EXCEPT
    # ORDER BY clause", even for `ORDER BY -id`); "any", not judged.
    # grid_sql.call_rules refuses the other terms.
    compound_order_terms: CompoundOrderTerms = "any"
    # Whether HAVING is refused in a SELECT with no GROUP BY whose select list
    # aggregates nothing (SQLite: "HAVING clause on a non-aggregate query", even
    # `SELECT a FROM t HAVING count(*) > 1`); PostgreSQL and DuckDB group the
    # whole table instead. grid_sql.call_rules refuses it where this holds.
    having_needs_aggregation: bool = False
    # How many columns a CTE's column list may name against what its body gives:
    # "exact" (SQLite: "table c has 1 values for 2 columns"), "at_most"
    # (PostgreSQL: the unnamed ones keep their names), "any" (DuckDB). The
    # checker's column counts refuse the others.
    cte_column_list: Literal["exact", "at_most", "any"] = "any"
    # Whether OVER is refused on a call of a known function (`function_arities`)
    # that is neither a window function nor an aggregate (SQLite: "abs() may not be
    # used as a window function"; PostgreSQL alike). Needs `aggregate_functions`
    # complete for the arity table; grid_sql.call_rules refuses it where this holds.
    over_needs_window_or_aggregate: bool = False
    # Whether the database resolves, but never evaluates, the clauses whose value
    # cannot matter (SQLite): the ORDER BY of a SELECT that returns one row, and
    # the select list and ORDER BY of a one-core EXISTS body. What only
    # evaluation refuses (a row value standing alone, a subquery's column count)
    # runs there: `SELECT count(*) FROM t ORDER BY (a, b)`. The checker's column
    # counts and grid_sql.row_rules judge there only what is refused before
    # evaluation (grid_sql.call_rules.unevaluated_nodes).
    unused_clauses_unevaluated: bool = False
    # Whether the parser folds an AND with the integer literal 0 as an operand
    # (`0 AND x`, `x AND 0`) into 0 before any name is resolved (SQLite's
    # sqlite3ExprAnd): what x names is never looked up, so the checker reports
    # no error inside it (what it would read is still checked against the grants).
    and_zero_folds: bool = False
    # Whether a named window that no `OVER name` reads is never resolved (SQLite,
    # DuckDB: `WINDOW w AS (ORDER BY nope)` runs unused); PostgreSQL resolves it.
    unused_windows_unresolved: bool = False
    # Whether one WINDOW clause may not define a name twice (PostgreSQL, DuckDB:
    # "window "w" is already defined"); SQLite takes the last definition.
    window_names_unique: bool = True
    # Whether `OVER name` reads a window whose name is written the same (ASCII
    # case aside), quotes included (SQLite: `OVER "w"` does not read `WINDOW
    # w`); else names compare as identifiers.
    window_names_as_written: bool = False
    # Whether a subquery's ORDER BY and GROUP BY may read the columns of the
    # enclosing queries (PostgreSQL, DuckDB). SQLite resolves them against the
    # subquery's own FROM and result aliases only ("The ORDER BY and GROUP BY
    # clauses may not refer to terms in outer queries": `SELECT (SELECT c FROM u
    # ORDER BY t.b) FROM t` is "no such column: t.b"), subqueries inside them
    # included. The checker resolves them so where this is False.
    order_group_read_outer: bool = True
    # Whether LIMIT and OFFSET may read the enclosing queries' columns
    # (PostgreSQL); SQLite resolves them against no table at all, DuckDB refuses
    # correlated columns there. The checker resolves them so where this is False.
    limit_reads_outer: bool = True
    # Whether an aggregate call written in a WHERE, GROUP BY or ON clause is
    # refused even when its arguments read only an enclosing query's columns, so
    # that it is that query's aggregate (SQLite: "misuse of aggregate function"
    # for `SELECT (SELECT 1 FROM u WHERE sum(t.b) > 0) FROM t`); PostgreSQL and
    # DuckDB evaluate it in the enclosing query. grid_sql.call_rules.
    aggregates_placed_where_written: bool = False
    # Whether the FROM items of one level (with an UPDATE's or DELETE's target)
    # must have distinct names, aliases or table names (PostgreSQL: "table name
    # "t" specified more than once"); SQLite and DuckDB take them (a column
    # both have is then ambiguous). The checker refuses them as duplicate_name.
    source_names_unique: bool = False
    # Whether an UPDATE's FROM may name its target table again under the
    # target's own name (SQLite refuses `UPDATE t SET ... FROM t`: "target
    # object/alias may not appear in FROM clause"; under another alias it runs).
    update_target_in_from: bool = True
    # Whether a bare column name in ON CONFLICT ... DO UPDATE (its SET values and
    # WHERE) is the target row's (DuckDB: `SET y = y + 1` adds to the stored y);
    # where False it is ambiguous between the target and `excluded` (PostgreSQL:
    # "column reference "y" is ambiguous"). `excluded.y` is the proposed row's.
    conflict_bare_names_target: bool = False
    # Whether a join condition's names resolve against every table of its FROM
    # clause, those joined to its right included (SQLite: `FROM a JOIN b ON x = 1
    # JOIN c` reads c.x, or is ambiguous), rather than the tables to its left and
    # then the enclosing statements (PostgreSQL, DuckDB). grid_sql.column_scope
    # resolves no name past a FROM clause still being written where it is True.
    join_condition_sees_right: bool = True
    # Whether a join condition inside a parenthesized join also sees the tables of
    # the FROM clause outside the parentheses (DuckDB binds `FROM a JOIN (b JOIN c
    # ON a.x = b.x) ON ...`; SQLite says "no such column: a.x", PostgreSQL "invalid
    # reference to FROM-clause entry"). Where False the checker resolves its names
    # against the parenthesized join's own tables and the enclosing statements.
    nested_join_sees_outer: bool = False
    # Whether a comma binds looser than JOIN where join conditions see no table to
    # their right (PostgreSQL: in `FROM a, b JOIN c ON a.x = c.x` the condition
    # cannot see a, "invalid reference to FROM-clause entry"; DuckDB binds it).
    comma_binds_loosest: bool = False
    # Whether one table in parentheses that follows a join operator is named by its
    # table, its alias inside the parentheses dropped (SQLite: `FROM o JOIN (s AS x)
    # ON ...` reads s.c, and x.c is "no such column"; a first term keeps it). Only
    # SQLite's grammar has such a term.
    joined_parentheses_drop_alias: bool = False
    # SQLite's parser reads a parenthesized join that is the first term of a FROM
    # clause as if unparenthesized (`FROM (a JOIN b ON x), c`: the ON sees c).
    first_parentheses_flatten: bool = False
    # Whether a SELECT's result aliases are names in its WHERE, HAVING, ON and
    # expressions of GROUP BY and ORDER BY (SQLite, DuckDB: after the FROM
    # sources, before the enclosing queries). PostgreSQL takes one only as a
    # whole GROUP BY or ORDER BY term; elsewhere the name resolves to the
    # enclosing queries' columns (`WHERE salary = q.id` under `q.id AS salary`
    # reads the outer salary), or is "column does not exist".
    result_aliases_in_expressions: bool = True
    # The name of a VALUES list's first column (the rest count up from it):
    # "column1" (SQLite, PostgreSQL), "col0" (DuckDB); and the suffix that tells a
    # subquery's duplicate output name apart before its count: ":" (SQLite's
    # `a:1`, with SQLite's own rules: `_Outputs.columns`), "_" (DuckDB's `a_1`),
    # "" for none (PostgreSQL keeps both names: a reference to it, USING or
    # NATURAL JOIN on it is refused as ambiguous). NATURAL JOIN and USING see
    # these names.
    values_column_names: Literal["column1", "col0"] = "column1"
    duplicate_column_suffix: str = ":"
    # Whether the left side of a USING or NATURAL join is every FROM item before
    # it, past commas (SQLite: `FROM p, e JOIN q USING (c)` joins the leftmost
    # with c), or only those after the last comma (PostgreSQL, DuckDB: e). Never
    # an UPDATE's or DELETE's target, nor the FROM items outside parentheses.
    using_left_spans_commas: bool = True
    # Whether a subquery in FROM sees the FROM items before it without LATERAL
    # (DuckDB binds `FROM employees AS b, (SELECT b) AS q` to the employees row);
    # SQLite and PostgreSQL resolve its names against the enclosing queries only.
    from_subqueries_lateral: bool = False
    # How a result column without alias that is no column reference is named, as
    # NATURAL JOIN, USING and a qualified reference to its subquery see it:
    # "text", its source text (SQLite, DuckDB); "postgres", PostgreSQL's
    # FigureColname (a cast or a scalar subquery takes its operand's name, a call
    # its function's, anything else "?column?").
    expression_column_names: Literal["text", "postgres"] = "text"
    # Whether the dialect's own grammar has FROM-first SELECT cores (DuckDB): it is
    # its own FROM-first profile (grid_sql.from_first.from_first_of), and a
    # FROM-first statement runs as written.
    from_first_native: bool = False
    # Whether a database of the dialect stores user-defined routines that a
    # statement reaches by the names it writes (PostgreSQL: functions named like
    # the dialect's, operators, casts; DuckDB: macros, which shadow built-ins and
    # operators). A snapshot then lists them (SchemaSnapshot.routines) and a role
    # runs none its policy does not name (grid_sql.policy, ``routines``); a
    # snapshot that does not say which there are refuses every role. SQLite
    # stores none (an application's own functions live on its connection).
    stores_routines: bool = False
    description: str = field(default="", compare=False)

    # ------------------------------------------------------------ derived data
    # (the word sets are built once per dialect object: the lexicon asks for them
    # once per schema word and spelling, a few hundred times per role)

    def catalog_prefix(self, name: str) -> str | None:
        """The first of `catalog_prefixes` that ``name`` starts with, ASCII case
        folded (a name that may reach the database's own catalog), or None."""
        folded = ascii_lower(name)
        return next((p for p in self.catalog_prefixes if folded.startswith(p)), None)

    @property
    def lexicon_categories(self) -> tuple[str, ...]:
        """Terminal names whose words come from an allow-list in deployment."""
        return (self.table_category, self.column_category, self.cte_category)

    @cached_property
    def default_functions(self) -> tuple[str, ...]:
        """The functions a role may call when its policy names none: `functions` minus
        `unsafe_functions` (docs/policy.md, "Functions")."""
        unsafe = {name for name, _ in self.unsafe_functions}
        return tuple(f for f in self.functions if f not in unsafe)

    @cached_property
    def arities(self) -> dict[str, tuple[int, int | None]]:
        """`function_arities` as a mapping: name -> (least, most or None)."""
        return {name: (least, most) for name, least, most in self.function_arities}

    @cached_property
    def gaps(self) -> dict[str, frozenset[int]]:
        """`argument_gaps` as a mapping: name -> the counts within its bounds it does
        not take (absent: none)."""
        out: dict[str, set[int]] = {}
        for name, count in self.argument_gaps:
            out.setdefault(name, set()).add(count)
        return {name: frozenset(counts) for name, counts in out.items()}

    def takes(self, name: str, count: int) -> bool:
        """Whether function `name` (with an arity entry) takes `count` arguments:
        within its bounds and no gap."""
        least, most = self.arities[name]
        gaps = self.gaps.get(name, frozenset())
        return count >= least and (most is None or count <= most) and count not in gaps

    @cached_property
    def quoted_words(self) -> frozenset[str]:
        """Words a schema name is never spelled bare as: the database's reserved
        words and this grammar's keywords, lower case (see `spell_identifier`)."""
        return frozenset(w.lower() for w in (*self.reserved_words, *self.keywords))

    @cached_property
    def reserved_identifiers(self) -> frozenset[str]:
        """Words no identifier terminal takes bare, lower case: every keyword of the
        grammar and the database's `never_identifiers` (see the module header)."""
        return frozenset(w.lower() for w in (*self.keywords, *self.never_identifiers))

    @cached_property
    def reserved_free_names(self) -> frozenset[str]:
        """Words no free name (alias, qualifier) takes bare, lower case:
        `reserved_identifiers` and the database's `never_free_names`."""
        return self.reserved_identifiers | {w.lower() for w in self.never_free_names}

    @property
    def grammar_text(self) -> str:
        """The complete grammar: the base grammar (`base_grammar`, unless ""), the
        `grammar_layers`, the dialect's delta (`grammar_file`) and the generated
        terminals, in that order.
        The delta's `%override` and `%extend` act on the base's rules (lark's
        semantics: the composed text is what every reader compiles)."""
        parts = []
        if self.base_grammar:
            parts.append(resources.files(BASE_PACKAGE).joinpath(self.base_grammar))
        parts += [resources.files(pkg).joinpath(file) for pkg, file in self.grammar_layers]
        parts.append(resources.files(self.grammar_package).joinpath(self.grammar_file))
        texts = [part.read_text(encoding="utf-8").rstrip("\n") for part in parts]
        return "\n\n".join([*texts, self.generated_terminals()])

    def corpus(self) -> tuple[CorpusEntry, ...]:
        """The dialect's accept/reject/viable-prefix corpus (empty when it has none)."""
        if not self.corpus_file:
            return ()
        source = resources.files(self.grammar_package).joinpath(self.corpus_file)
        return tuple(parse_corpus(source.read_text(encoding="utf-8")))

    def generated_terminals(self) -> str:
        """Keyword, word-class and bare-identifier terminal definitions, in lark syntax."""
        flag = "i" if self.keyword_case == "insensitive" else ""
        first, rest = self._identifier_classes()
        fold = self.keyword_case == "insensitive"
        lines = [
            f"// {'-' * 64} generated from {type(self).__name__}",
            "// bare identifiers: bare_identifier minus the reserved words (any letter case",
            "// when keywords are case-insensitive); quoted forms are in the .lark file",
            f"_BARE_IDENT: /{_bare_pattern(first, rest, self.reserved_identifiers, fold)}/",
            f"_BARE_FREE_NAME: /{_bare_pattern(first, rest, self.reserved_free_names, fold)}/",
            f"// keywords (priority {KEYWORD_PRIORITY})",
        ]
        for word in sorted(set(self.keywords)):
            lines.append(f'{word.upper()}.{KEYWORD_PRIORITY}: "{word.lower()}"{flag}')
        lines.append(f"// word classes (priority {WORD_CLASS_PRIORITY})")
        classes = [
            ("FUNCTION_NAME", self.functions, r"\("),
            ("TYPE_NAME", self.type_names, ""),
            *((name, words, "") for name, words in self.word_classes),
        ]
        for terminal, words, suffix in classes:
            lines.append(
                f"{terminal}.{WORD_CLASS_PRIORITY}: /(?:{word_alternatives(words)}){suffix}/{flag}"
            )
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ identifiers

    def _identifier_classes(self) -> tuple[int, int]:
        """The byte sets (as ints) of `bare_identifier`, which must read `[F][R]*`."""
        m = re.fullmatch(r"\[([^\]]+)\]\[([^\]]+)\]\*", self.bare_identifier)
        if m is None:
            raise DialectDefinitionError(
                self.name, f"bare_identifier {self.bare_identifier!r} is not of the form [F][R]*"
            )
        sets = []
        for body in m.groups():
            cls = re.compile(f"[{body}]", re.ASCII)
            sets.append(sum(1 << b for b in range(256) if cls.fullmatch(chr(b))))
        return sets[0], sets[1]

    def is_bare_identifier(self, word: str) -> bool:
        """True when `word` may be written without quotes in every identifier position."""
        return (
            re.fullmatch(self.bare_identifier, word, re.ASCII) is not None
            and word.lower() not in self.quoted_words
            and (self.identifier_case != "fold-lower" or word == word.lower())
        )

    def quote_identifier(self, word: str) -> str:
        """`word` in the first quote form that can hold it."""
        for form in self.identifier_quotes:
            quoted = form.quote(word)
            if quoted is not None:
                return quoted
        raise DialectDefinitionError(self.name, f"no quote form can hold the word {word!r}")

    def spell_identifier(self, word: str) -> str:
        """The spelling of a schema word as a lexeme: bare if possible, else quoted."""
        return word if self.is_bare_identifier(word) else self.quote_identifier(word)

    # ------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        """Check the knobs against each other and against the grammar.

        Raises `DialectDefinitionError` naming the first problem. Builds the grammar
        with lark (LALR(1), strict: a shift/reduce conflict is an error too).
        """
        lowered = [w.lower() for w in self.keywords]
        if len(set(lowered)) != len(lowered):
            raise DialectDefinitionError(self.name, "a keyword is listed twice")
        for word in lowered:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", word):
                raise DialectDefinitionError(self.name, f"keyword {word!r} is not a plain word")
        clash = {f.lower() for f in self.functions} & set(lowered)
        if not clash <= self.keyword_functions:
            raise DialectDefinitionError(
                self.name,
                f"function names {sorted(clash - self.keyword_functions)} are keywords",
            )
        unknown = sorted({n for n, _ in self.unsafe_functions} - set(self.functions))
        if unknown:
            raise DialectDefinitionError(
                self.name, f"unsafe_functions {unknown} are not in functions"
            )
        import lark  # deferred: only the checks need the parser generator

        try:
            parser = build_lalr(self.grammar_text)
        except lark.exceptions.GrammarError as err:
            raise DialectDefinitionError(self.name, f"grammar does not build: {err}") from err
        names = {t.name for t in parser.terminals}
        for required in REQUIRED_TERMINALS:
            if required not in names:
                raise DialectDefinitionError(self.name, f"grammar lacks terminal {required}")
        stray = sorted(set(self.never_identifiers) - set(self.reserved_words))
        if stray:
            raise DialectDefinitionError(
                self.name, f"never_identifiers {stray} are not reserved_words (spelled bare)"
            )
        unused = sorted(w for w in lowered if w.upper() not in names)
        if unused:
            raise DialectDefinitionError(self.name, f"keywords no rule uses: {unused}")
        # Every terminal takes part in GRID's lexing, used by a rule or not; lark's
        # lexer-only mode is the one that keeps them all.
        every = lark.Lark(self.grammar_text, parser=None, lexer="basic")
        for terminal in every.terminals:
            regexp = terminal.pattern.to_regexp()
            if any(ord(ch) > 0xFF for ch in regexp):
                raise DialectDefinitionError(
                    self.name, f"terminal {terminal.name} has a character above U+00FF"
                )
            flags = re.ASCII | (re.IGNORECASE if "i" in terminal.pattern.flags else 0)
            if re.fullmatch(regexp, "", flags) is not None:
                raise DialectDefinitionError(
                    self.name, f"terminal {terminal.name} matches the empty string"
                )
        self._check_events(parser, names)
        ident = re.compile(
            next(t for t in parser.terminals if t.name == self.table_category).pattern.to_regexp()
        )
        for form in self.identifier_quotes:
            sample = form.quote('odd "name` (x)')
            if sample is not None and ident.fullmatch(sample) is None:
                raise DialectDefinitionError(
                    self.name, f"quote form {form.open}...{form.close} is not in the grammar"
                )

    def _check_events(self, parser: Any, terminals: set[str]) -> None:
        """Every event symbol is a terminal or a rule lark's tree keeps (neither
        inlined by ``?`` nor by a leading ``_``), so the post-hoc sequence of a
        statement is defined by its tree."""
        kept: set[str] = set()
        inlined: set[str] = set()
        for rule in parser.rules:
            origin = str(rule.origin.name)
            if rule.alias is not None:
                kept.add(str(rule.alias))
            elif rule.options.expand1 or origin.startswith("_"):
                inlined.add(origin)
            else:
                kept.add(origin)
        for symbol, kind in self.events:
            if not kind:
                raise DialectDefinitionError(self.name, f"event symbol {symbol} has no kind")
            if symbol in terminals or (symbol in kept and symbol not in inlined):
                continue
            raise DialectDefinitionError(
                self.name, f"event symbol {symbol} is no terminal nor a rule the tree keeps"
            )


def build_lalr(grammar_text: str) -> Any:
    """Build `grammar_text` with lark's LALR(1) analysis in strict mode.

    Lark resolves a shift/reduce conflict as a shift unless `strict=True`, and its
    strict basic lexer wants the optional `interegular` package to look for regex
    collisions (which GRID's lexing resolves by design). A stand-in lexer keeps
    the strict LALR analysis and skips the collision check. Raises lark's
    `GrammarError` on any conflict.
    """
    import lark
    from lark.lexer import Lexer

    class _NoLexer(Lexer):
        def __init__(self, lexer_conf: Any) -> None:
            pass

        def lex(self, lexer_state: Any, parser_state: Any) -> Any:
            raise NotImplementedError("GRID lexes; this parser is for its tables only")

    return lark.Lark(grammar_text, parser="lalr", lexer=_NoLexer, strict=True)


def _bare_pattern(first: int, rest: int, words: frozenset[str], fold: bool) -> str:
    """A regex for the words of `[first][rest]*` that are not in `words`.

    `first` and `rest` are byte sets (bit b set iff byte b is in the class);
    `words` are lower case; with `fold`, a word is excluded in every ASCII letter
    case (the pattern is then one `(?i:...)` group). The words are laid out as a
    trie, and an identifier that is not one of them either *leaves* the trie (it
    follows trie edges, then takes a byte of its class that no edge takes, then
    runs free) or *stays* in it (it follows trie edges and ends at a node that
    ends no excluded word): `LEAVE [rest]* | STAY`. Every leaving path shares the
    one free tail, so the automaton has about one state per trie node. A word
    outside `[first][rest]*` excludes nothing. Written without lookarounds, which
    GRID's patterns do not have (grid_core.regex_bytes).
    """
    trie: dict[str, Any] = {}
    for word in sorted(words):
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}  # the end of an excluded word

    def edge(ch: str) -> int:
        bits = 1 << ord(ch)
        if fold and ch.isascii() and ch.isalpha():
            bits |= 1 << ord(ch.swapcase())
        return bits

    def edges(node: dict[str, Any], cls: int) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for ch in sorted(k for k in node if k):
            if edge(ch) & cls == edge(ch):  # else the word leaves [first][rest]*
                out.append((edge(ch), node[ch]))
        return out

    def group(alternatives: list[str], optional: bool) -> str:
        if len(alternatives) == 1 and not optional:
            return alternatives[0]
        return f"(?:{'|'.join(alternatives)})" + ("?" if optional else "")

    def leave(node: dict[str, Any], depth: int) -> str | None:
        cls = first if depth == 0 else rest
        alternatives, taken = [], 0
        for bits, child in edges(node, cls):
            taken |= bits
            sub = leave(child, depth + 1)
            if sub is not None:
                alternatives.append(_byte_class(bits, fold) + sub)
        if cls & ~taken:
            alternatives.append(_byte_class(cls & ~taken, fold))
        return group(alternatives, False) if alternatives else None

    def stay(node: dict[str, Any], depth: int) -> str | None:
        cls = first if depth == 0 else rest
        alternatives = []
        for bits, child in edges(node, cls):
            sub = stay(child, depth + 1)
            if sub is not None:
                alternatives.append(_byte_class(bits, fold) + sub)
        may_end = depth > 0 and "" not in node
        if not alternatives:
            return "" if may_end else None
        return group(alternatives, may_end)

    parts = []
    left = leave(trie, 0)
    if left is not None:
        parts.append(left + _byte_class(rest, fold) + "*")
    stayed = stay(trie, 0)
    if stayed:
        parts.append(stayed)
    assert parts, "an identifier language minus finitely many words is never empty"
    pattern = group(parts, False)
    return f"(?i:{pattern})" if fold else pattern


_UPPER = sum(1 << b for b in range(65, 91))


def _byte_class(bits: int, fold: bool) -> str:
    """A regex class for a byte set, as ranges (a literal for one letter or digit).
    With `fold` the set is closed under ASCII case and is read under `(?i)`, so its
    upper-case letters are left out. Only literals and ranges, no categories such
    as `\\w`: every reader of the grammar must take the pattern, the peer-grammar
    translation of bench/peer_grammars.py included."""
    if fold:
        bits &= ~_UPPER
    return _positive_class(bits)


def _positive_class(bits: int) -> str:
    members = [b for b in range(256) if bits >> b & 1]
    if len(members) == 1 and chr(members[0]).isascii() and chr(members[0]).isalnum():
        return chr(members[0])
    return f"[{_ranges(bits)}]"


def _ranges(bits: int) -> str:
    """The inside of a regex class holding exactly the bytes of `bits`."""
    runs: list[tuple[int, int]] = []
    for b in range(256):
        if not bits >> b & 1:
            continue
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))

    def char(b: int) -> str:
        c = chr(b)
        if c in "\\]^-[/":
            return "\\" + c
        return c if 0x21 <= b <= 0x7E else f"\\x{b:02x}"

    return "".join(
        char(a) if a == b else char(a) + char(b) if b == a + 1 else f"{char(a)}-{char(b)}"
        for a, b in runs
    )


def word_alternatives(words: Iterable[str]) -> str:
    """The regex alternation of a word class's entries, longest first: the body of
    its generated terminal (``Dialect.generated_terminals``)."""
    return "|".join(sorted({_word_pattern(w) for w in words}, key=lambda p: (-len(p), p)))


def _word_pattern(word: str) -> str:
    """A regex for one word-class entry; blanks between words may be any blank run."""
    return _BLANK.join(re.escape(part) for part in word.split())
