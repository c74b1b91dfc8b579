"""The SQLite dialect (3.40): knobs for `sqlite.lark`.

Coverage target: every Spider dev gold query and at least 99% of train gold, in
free mode (see bench/results/dialect_coverage/). Decisions a reader should know:

- A double-quoted token is a column when the column lexicon admits it and a
  string (DQ_STRING) otherwise: SQLite's own fallback rule, which Spider's gold
  relies on (`WHERE country = "France"`). The SemanticChecker must treat a
  DQ_STRING as a possible column reference: SQLite resolves it against the
  catalog at run time, whatever the mask's lexicon said.
- Scalar functions open with the lexeme `name(` (no blank before the
  parenthesis); the five standard aggregates are keywords (`count (*)` is fine).
- Bare identifiers are ASCII (`[A-Za-z_][A-Za-z0-9_$]*`); other names are quoted.
- Keywords are reserved: a keyword of the grammar, or a word SQLite never reads
  as a name (`NEVER_IDENTIFIERS`), is no bare identifier anywhere; the words of
  `NEVER_FREE_NAMES` are no bare alias or qualifier. SQLite itself accepts some
  keywords as names (its `%fallback ID`: `first`, `rows`, `replace`, ...); GRID
  does not, so that no role projection can read a keyword as a name
  (DESIGN.md section 11). Such names are written quoted.
- `*` and `q.*` need a FROM clause (SQLite: "no tables specified").
- Functions are policy: a role calls the functions its policy grants, by default
  `FUNCTIONS` minus `UNSAFE_FUNCTIONS` (allocators over a size argument).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from grid_sql.dialect import STATEMENT_EVENTS, CompoundOrderTerms, Dialect, QuoteForm
from grid_sql.projection_rules import STATEMENT_FORMS, WINDOW_CUTS, Cut, ProjectionRules

KEYWORDS = (
    "abort", "all", "and", "as", "asc", "avg", "between", "by", "case", "cast",
    "collate", "count", "cross", "current", "current_date", "current_time",
    "current_timestamp", "default", "delete", "desc", "distinct", "else", "end",
    "escape", "except", "exists", "fail", "false", "filter", "first", "following",
    "from", "full", "glob", "group", "groups", "having", "ignore", "in", "inner",
    "insert", "intersect", "into", "is", "isnull", "join", "last", "left", "like",
    "limit", "max", "min", "natural", "not", "notnull", "null", "nulls", "offset",
    "on", "or", "order", "outer", "over", "partition", "preceding", "range",
    "recursive", "replace", "right", "rollback", "row", "rows", "select", "set",
    "sum", "then", "true", "unbounded", "union", "update", "using", "values", "when",
    "where", "window", "with",
)  # fmt: skip

# sqlite.org/lang_keywords.html (3.40): the words SQLite's tokenizer knows as keywords.
RESERVED_WORDS = frozenset((
    "abort", "action", "add", "after", "all", "alter", "always", "analyze", "and", "as",
    "asc", "attach", "autoincrement", "before", "begin", "between", "by", "cascade", "case",
    "cast", "check", "collate", "column", "commit", "conflict", "constraint", "create",
    "cross", "current", "current_date", "current_time", "current_timestamp", "database",
    "default", "deferrable", "deferred", "delete", "desc", "detach", "distinct", "do",
    "drop", "each", "else", "end", "escape", "except", "exclude", "exclusive", "exists",
    "explain", "fail", "filter", "first", "following", "for", "foreign", "from", "full",
    "generated", "glob", "group", "groups", "having", "if", "ignore", "immediate", "in",
    "index", "indexed", "initially", "inner", "insert", "instead", "intersect", "into",
    "is", "isnull", "join", "key", "last", "left", "like", "limit", "match", "materialized",
    "natural", "no", "not", "nothing", "notnull", "null", "nulls", "of", "offset", "on",
    "or", "order", "others", "outer", "over", "partition", "plan", "pragma", "preceding",
    "primary", "query", "raise", "range", "recursive", "references", "regexp", "reindex",
    "release", "rename", "replace", "restrict", "returning", "right", "rollback", "row",
    "rows", "savepoint", "select", "set", "table", "temp", "temporary", "then", "ties",
    "to", "transaction", "trigger", "unbounded", "union", "unique", "update", "using",
    "vacuum", "values", "view", "virtual", "when", "where", "window", "with", "without",
))  # fmt: skip

# Keywords SQLite 3.40 never reads as a bare name: outside parse.y's `%fallback ID`
# list (and not admitted by `nm`/`ids` otherwise), or, like CAST and RAISE, taken as
# the start of their construct. Measured with Python's sqlite3 (3.40.1): each word
# refused bare as a table, a column, an alias and a qualifier.
NEVER_IDENTIFIERS = frozenset((
    "add", "all", "alter", "and", "as", "autoincrement", "between", "case", "cast",
    "check", "collate", "commit", "constraint", "create", "default", "deferrable",
    "delete", "distinct", "drop", "else", "escape", "except", "exists", "foreign", "from",
    "group", "having", "in", "index", "insert", "intersect", "into", "is", "isnull",
    "join", "limit", "not", "nothing", "notnull", "null", "on", "or", "order", "primary",
    "raise", "references", "returning", "select", "set", "table", "then", "to",
    "transaction", "union", "unique", "update", "using", "values", "when", "where",
))  # fmt: skip

# Words SQLite reads as a bare table or column name but refuses as a bare alias
# (`SELECT 1 match`: the JOIN_KW and LIKE_KW tokens, INDEXED) or as a qualifier
# (`current_date.x`), measured as above. Most are keywords of the grammar anyway.
NEVER_FREE_NAMES = frozenset((
    "cross", "current_date", "current_time", "current_timestamp", "full", "glob",
    "indexed", "inner", "left", "like", "match", "natural", "outer", "regexp", "right",
))  # fmt: skip

FUNCTIONS = (
    # core scalar functions (sqlite.org/lang_corefunc.html)
    "abs", "changes", "char", "coalesce", "format", "hex", "ifnull", "iif", "instr",
    "last_insert_rowid", "length", "likelihood", "likely", "lower", "ltrim", "nullif",
    "printf", "quote", "random", "randomblob", "replace", "round", "rtrim", "sign",
    "soundex", "substr", "substring", "total_changes", "trim", "typeof", "unicode",
    "unlikely", "upper", "zeroblob",
    # date and time
    "date", "time", "datetime", "julianday", "unixepoch", "strftime",
    # math (SQLITE_ENABLE_MATH_FUNCTIONS, on in the CPython build)
    "acos", "asin", "atan", "atan2", "ceil", "ceiling", "cos", "degrees", "exp",
    "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power", "radians",
    "sin", "sqrt", "tan", "trunc",
    # aggregates other than the five keywords
    "group_concat", "total",
    # window functions
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag",
    "lead", "first_value", "last_value", "nth_value",
    # JSON
    "json", "json_array", "json_array_length", "json_extract", "json_object",
    "json_type", "json_valid",
)  # fmt: skip

# The argument counts SQLite 3.40 takes, measured: `EXPLAIN SELECT f(1, ..., 1)` with
# 0 to 8 arguments (OVER () for the window functions); "wrong number of arguments"
# for every other count. None: every count from the least up to 8 prepares (SQLite
# caps them at 127 or none). `f(*)` is a call with no argument. The test
# test_call_rules.py::test_function_arities_are_sqlites measures them again.
FUNCTION_ARITIES = (
    ("abs", 1, 1), ("changes", 0, 0), ("char", 0, None), ("coalesce", 2, None),
    ("format", 0, None), ("hex", 1, 1), ("ifnull", 2, 2), ("iif", 3, 3), ("instr", 2, 2),
    ("last_insert_rowid", 0, 0), ("length", 1, 1), ("likelihood", 2, 2), ("likely", 1, 1),
    ("lower", 1, 1), ("ltrim", 1, 2), ("nullif", 2, 2), ("printf", 0, None),
    ("quote", 1, 1), ("random", 0, 0), ("randomblob", 1, 1), ("replace", 3, 3),
    ("round", 1, 2), ("rtrim", 1, 2), ("sign", 1, 1), ("soundex", 1, 1), ("substr", 2, 3),
    ("substring", 2, 3), ("total_changes", 0, 0), ("trim", 1, 2), ("typeof", 1, 1),
    ("unicode", 1, 1), ("unlikely", 1, 1), ("upper", 1, 1), ("zeroblob", 1, 1),
    ("date", 0, None), ("time", 0, None), ("datetime", 0, None), ("julianday", 0, None),
    ("unixepoch", 0, None), ("strftime", 0, None),
    ("acos", 1, 1), ("asin", 1, 1), ("atan", 1, 1), ("atan2", 2, 2), ("ceil", 1, 1),
    ("ceiling", 1, 1), ("cos", 1, 1), ("degrees", 1, 1), ("exp", 1, 1), ("floor", 1, 1),
    ("ln", 1, 1), ("log", 1, 2), ("log10", 1, 1), ("log2", 1, 1), ("mod", 2, 2),
    ("pi", 0, 0), ("pow", 2, 2), ("power", 2, 2), ("radians", 1, 1), ("sin", 1, 1),
    ("sqrt", 1, 1), ("tan", 1, 1), ("trunc", 1, 1),
    ("group_concat", 1, 2), ("total", 1, 1),
    ("row_number", 0, 0), ("rank", 0, 0), ("dense_rank", 0, 0), ("percent_rank", 0, 0),
    ("cume_dist", 0, 0), ("ntile", 1, 1), ("lag", 1, 3), ("lead", 1, 3),
    ("first_value", 1, 1), ("last_value", 1, 1), ("nth_value", 2, 2),
    ("json", 1, 1), ("json_array", 0, None), ("json_array_length", 1, 2),
    ("json_extract", 0, None), ("json_object", 0, None), ("json_type", 1, 2),
    ("json_valid", 1, 1),
    # the keyword aggregates (COUNT's forms are the grammar's); MIN and MAX with two
    # or more arguments are the scalar functions
    ("sum", 1, 1), ("avg", 1, 1), ("min", 1, None), ("max", 1, None),
)  # fmt: skip

WINDOW_FUNCTIONS = frozenset((
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag",
    "lead", "first_value", "last_value", "nth_value",
))  # fmt: skip

# Functions a role's default function grant leaves out (docs/policy.md, "Functions").
# Functions that read files or load code (load_extension, readfile, writefile, edit,
# fts3_tokenizer, ...) are in no list: GRID's SQLite dialect has no such word at all.
UNSAFE_FUNCTIONS = (
    ("randomblob", "allocates a blob of its argument's size (randomblob(1e9): 1 GB)"),
    ("zeroblob", "allocates a blob of its argument's size (zeroblob(1e9): 1 GB)"),
    ("printf", "a width or precision argument pads to any size (printf('%.*c', 1e9, 'x'))"),
    ("format", "printf under another name: a width or precision pads to any size"),
)

TYPE_NAMES = (
    "integer", "int", "tinyint", "smallint", "mediumint", "bigint", "int2", "int8",
    "unsigned big int", "real", "double", "double precision", "float", "numeric",
    "decimal", "boolean", "date", "datetime", "timestamp", "text", "character",
    "varchar", "varying character", "nchar", "native character", "nvarchar", "clob",
    "blob",
)  # fmt: skip


# What a role's verbs and banned clauses cut (grid_sql.projection_rules).
PROJECTION = ProjectionRules(
    statement="statement",
    verb_forms=STATEMENT_FORMS,
    clauses=MappingProxyType(
        {
            "subquery": (
                Cut("table_or_subquery", "select_stmt"),
                Cut("in_target", "select_stmt"),
                Cut("in_target", "TABLE_NAME"),  # `x IN t` reads t like a subquery
                Cut("primary", "select_stmt"),  # scalar subquery and EXISTS
            ),
            "set_operations": (
                Cut("compound_select", "compound_operator"),
                Cut("compound_values", "compound_operator"),  # ... UNION VALUES (1)
            ),
            "cte": (Cut("with_clause"), Cut("table_or_subquery", "CTE_NAME")),
            "recursive_cte": (Cut("with_clause", "RECURSIVE"),),
            "join": (Cut("join_source", "join_source"), Cut("update_stmt", "from_clause")),
            "window": WINDOW_CUTS,
            "returning": (),
            "on_conflict": (
                Cut("insert_verb", "OR"),
                Cut("insert_verb", "REPLACE"),
                Cut("update_stmt", "OR"),
            ),
        }
    ),
    requirements=(
        (Cut("insert_verb", "REPLACE"), frozenset({"DELETE"})),
        (Cut("conflict_action", "REPLACE"), frozenset({"DELETE"})),
    ),
)


@dataclass(frozen=True, kw_only=True)
class SqliteDialect(Dialect):
    name: str = "sqlite"
    grammar_file: str = "sqlite.lark"
    corpus_file: str = "corpus/sqlite.txt"
    keywords: tuple[str, ...] = KEYWORDS
    reserved_words: frozenset[str] = RESERVED_WORDS
    never_identifiers: frozenset[str] = NEVER_IDENTIFIERS
    never_free_names: frozenset[str] = NEVER_FREE_NAMES
    # dbstat: every table's pages, by name (when SQLite is built with it, as Python's is)
    catalog_prefixes: tuple[str, ...] = ("sqlite_", "pragma_", "dbstat")
    functions: tuple[str, ...] = FUNCTIONS
    # REPLACE starts `REPLACE INTO` and ends `INSERT OR REPLACE`, never before "(".
    keyword_functions: frozenset[str] = frozenset({"replace"})
    unsafe_functions: tuple[tuple[str, str], ...] = UNSAFE_FUNCTIONS
    function_arities: tuple[tuple[str, int, int | None], ...] = FUNCTION_ARITIES
    window_functions: frozenset[str] = WINDOW_FUNCTIONS
    aggregate_functions: frozenset[str] = frozenset({"group_concat", "total"})
    over_needs_window_or_aggregate: bool = True
    cte_column_list: Literal["exact", "at_most", "any"] = "exact"
    type_names: tuple[str, ...] = TYPE_NAMES
    word_classes: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("COLLATION_NAME", ("binary", "nocase", "rtrim")),
    )
    projection: ProjectionRules | None = PROJECTION
    dq_string_fallback: bool = True
    boolean_names: bool = True
    row_values_compared_only: bool = True
    probability_arguments: frozenset[tuple[str, int]] = frozenset({("likelihood", 1)})
    update_from_selects: bool = True
    order_by_aggregates_need_aggregation: bool = True
    compound_order_terms: CompoundOrderTerms = "written"
    having_needs_aggregation: bool = True
    unused_clauses_unevaluated: bool = True
    and_zero_folds: bool = True
    unused_windows_unresolved: bool = True
    window_names_unique: bool = False
    window_names_as_written: bool = True
    order_group_read_outer: bool = False
    limit_reads_outer: bool = False
    aggregates_placed_where_written: bool = True
    update_target_in_from: bool = False
    joined_parentheses_drop_alias: bool = True  # `o JOIN (s AS x)` is s, not x
    first_parentheses_flatten: bool = True  # `FROM (a JOIN b ON x), c`: x sees c
    rowid_names: frozenset[str] = frozenset({"rowid", "oid", "_rowid_"})
    identifier_quotes: tuple[QuoteForm, ...] = (
        QuoteForm(open='"', close='"'),
        QuoteForm(open="`", close="`"),
        QuoteForm(open="[", close="]", doubling=False),
    )
    events: tuple[tuple[str, str], ...] = (*STATEMENT_EVENTS, ("insert_verb", "verb"))
    description: str = "SQLite 3.40: SELECT/INSERT/UPDATE/DELETE, CTEs, window functions"


SQLITE = SqliteDialect()
