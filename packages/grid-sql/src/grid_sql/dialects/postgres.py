"""The PostgreSQL dialect (15): knobs for `postgres.lark`.

Checked against a real PostgreSQL 15 parser: every accept line of
`corpus/postgres.txt` is prepared by the server (tests/test_dialect_postgres.py).
Decisions a reader should know:

- The function list is closed and conservative on purpose: a function is an
  exit from the mask's table-level policy when it can read data by name
  (`query_to_xml('select * from t', ...)`, `dblink`, `pg_read_file`, `lo_import`,
  `current_setting`, ...) or has side effects (`nextval`, `set_config`,
  `pg_sleep`). None of those is here; add a function only after asking that.
  Functions are policy besides: a role calls the functions its policy grants, by
  default `FUNCTIONS` minus `UNSAFE_FUNCTIONS` (allocators over a size argument).
- Scalar functions open with the lexeme `name(` (no blank before "("); the five
  standard aggregates are keywords.
- `date '...'`, `interval '...'` are single TYPED_STRING lexemes (see the grammar).
- Unquoted identifiers fold to lower case in PostgreSQL (`identifier_case`): a
  lexicon builder must admit the spelling the model is to write.
- Keywords are reserved: a keyword of the grammar or a reserved key word of
  PostgreSQL (`never_identifiers`) is no bare identifier anywhere, so that no
  role projection can read a keyword as a name (DESIGN.md section 11).
  PostgreSQL itself accepts its non-reserved key words as names (`first`,
  `rows`, ...); GRID writes such names quoted.
- A column alias takes AS (`SELECT 1 AS year`): PostgreSQL refuses some bare
  column labels (`SELECT 1 year`, the "requires AS" key words).
- `*` and `q.*` need a FROM clause in a SELECT (RETURNING * needs none).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from grid_sql.dialect import (
    STATEMENT_EVENTS,
    CompoundOrderTerms,
    Dialect,
    IdentifierCase,
    QuoteForm,
)
from grid_sql.projection_rules import STATEMENT_FORMS, WINDOW_CUTS, Cut, ProjectionRules

KEYWORDS = (
    "all", "and", "any", "as", "asc", "avg", "between", "by", "case", "cast",
    "conflict", "count", "cross", "current", "current_date", "current_time",
    "current_timestamp", "default", "delete", "desc", "distinct", "do", "else", "end",
    "escape", "except", "exists", "extract", "false", "fetch", "filter", "first",
    "following", "from", "full", "group", "groups", "having", "ilike", "in", "inner",
    "insert", "intersect", "into", "is", "isnull", "join", "last", "lateral", "left",
    "like", "limit", "localtime", "localtimestamp", "materialized", "max", "min",
    "natural", "next", "not", "nothing", "notnull", "null", "nulls", "offset", "on",
    "only", "or", "order", "outer", "over", "partition", "preceding", "range",
    "recursive", "returning", "right", "row", "rows", "select", "set", "similar",
    "some", "sum", "then", "ties", "to", "true", "unbounded", "union", "unknown",
    "update", "using", "values", "when", "where", "window", "with", "within",
)  # fmt: skip

# PostgreSQL's reserved key words (SQL Key Words appendix, PostgreSQL 15: "reserved"
# and "reserved (can be function or type)").
RESERVED_WORDS = frozenset((
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
    "authorization", "binary", "both", "case", "cast", "check", "collate", "collation",
    "column", "concurrently", "constraint", "create", "cross", "current_catalog",
    "current_date", "current_role", "current_schema", "current_time", "current_timestamp",
    "current_user", "default", "deferrable", "desc", "distinct", "do", "else", "end",
    "except", "false", "fetch", "for", "foreign", "freeze", "from", "full", "grant",
    "group", "having", "ilike", "in", "initially", "inner", "intersect", "into", "is",
    "isnull", "join", "lateral", "leading", "left", "like", "limit", "localtime",
    "localtimestamp", "natural", "not", "notnull", "null", "offset", "on", "only", "or",
    "order", "outer", "overlaps", "placing", "primary", "references", "returning", "right",
    "select", "session_user", "similar", "some", "symmetric", "system_user", "table",
    "tablesample", "then", "to", "trailing", "true", "union", "unique", "user", "using",
    "variadic", "verbose", "when", "where", "window", "with",
))  # fmt: skip

FUNCTIONS = (
    # math
    "abs", "cbrt", "ceil", "ceiling", "degrees", "div", "exp", "floor", "ln", "log",
    "log10", "mod", "pi", "power", "radians", "random", "round", "sign", "sqrt",
    "trunc", "width_bucket",
    # strings
    "ascii", "btrim", "char_length", "character_length", "chr", "concat", "concat_ws",
    "format", "initcap", "left", "length", "lower", "lpad", "ltrim", "md5",
    "octet_length", "regexp_replace", "repeat", "replace", "reverse", "right", "rpad",
    "rtrim", "split_part", "starts_with", "strpos", "substr", "translate",
    "upper",
    # formatting and date/time
    "to_char", "to_date", "to_number", "to_timestamp", "age", "clock_timestamp",
    "date_part", "date_trunc", "make_date", "make_interval", "make_timestamp", "now",
    "justify_days", "justify_hours", "justify_interval",
    # aggregates other than the five keywords
    "array_agg", "bit_and", "bit_or", "bool_and", "bool_or", "every", "json_agg",
    "jsonb_agg", "string_agg", "stddev", "stddev_pop", "stddev_samp", "variance",
    "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "regr_slope",
    # ordered-set aggregates (with WITHIN GROUP)
    "percentile_cont", "percentile_disc", "mode",
    # window functions
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag",
    "lead", "first_value", "last_value", "nth_value",
    # JSON construction
    "json_build_object", "jsonb_build_object", "json_build_array", "to_json", "to_jsonb",
)  # fmt: skip

# The argument counts PostgreSQL 15 takes, from pg_proc: over a name's overloads, the
# fewest (arguments less defaults) to the most (None: a variadic overload); counts in
# between that no overload has are ARGUMENT_GAPS (width_bucket: 2 or 4). The ordered-set and
# hypothetical-set aggregates (percentile_cont, mode, rank(x) WITHIN GROUP, ...)
# count their direct arguments apart: not counted. test_checker_postgres.py reads
# pg_proc again.
FUNCTION_ARITIES = (
    ("abs", 1, 1), ("cbrt", 1, 1), ("ceil", 1, 1), ("ceiling", 1, 1), ("degrees", 1, 1),
    ("div", 2, 2), ("exp", 1, 1), ("floor", 1, 1), ("ln", 1, 1), ("log", 1, 2),
    ("log10", 1, 1), ("mod", 2, 2), ("pi", 0, 0), ("power", 2, 2), ("radians", 1, 1),
    ("random", 0, 0), ("round", 1, 2), ("sign", 1, 1), ("sqrt", 1, 1), ("trunc", 1, 2),
    ("width_bucket", 2, 4),
    ("ascii", 1, 1), ("btrim", 1, 2), ("char_length", 1, 1), ("character_length", 1, 1),
    ("chr", 1, 1), ("concat", 1, None), ("concat_ws", 2, None), ("format", 1, None),
    ("initcap", 1, 1), ("left", 2, 2), ("length", 1, 2), ("lower", 1, 1), ("lpad", 2, 3),
    ("ltrim", 1, 2), ("md5", 1, 1), ("octet_length", 1, 1), ("regexp_replace", 3, 6),
    ("repeat", 2, 2), ("replace", 3, 3), ("reverse", 1, 1), ("right", 2, 2),
    ("rpad", 2, 3), ("rtrim", 1, 2), ("split_part", 3, 3), ("starts_with", 2, 2),
    ("strpos", 2, 2), ("substr", 2, 3), ("translate", 3, 3), ("upper", 1, 1),
    ("to_char", 2, 2), ("to_date", 2, 2), ("to_number", 2, 2), ("to_timestamp", 1, 2),
    ("age", 1, 2), ("clock_timestamp", 0, 0), ("date_part", 2, 2), ("date_trunc", 2, 3),
    ("make_date", 3, 3), ("make_interval", 0, 7), ("make_timestamp", 6, 6), ("now", 0, 0),
    ("justify_days", 1, 1), ("justify_hours", 1, 1), ("justify_interval", 1, 1),
    ("array_agg", 1, 1), ("bit_and", 1, 1), ("bit_or", 1, 1), ("bool_and", 1, 1),
    ("bool_or", 1, 1), ("every", 1, 1), ("json_agg", 1, 1), ("jsonb_agg", 1, 1),
    ("string_agg", 2, 2), ("stddev", 1, 1), ("stddev_pop", 1, 1), ("stddev_samp", 1, 1),
    ("variance", 1, 1), ("var_pop", 1, 1), ("var_samp", 1, 1), ("corr", 2, 2),
    ("covar_pop", 2, 2), ("covar_samp", 2, 2), ("regr_slope", 2, 2),
    ("row_number", 0, 0), ("ntile", 1, 1), ("lag", 1, 3), ("lead", 1, 3),
    ("first_value", 1, 1), ("last_value", 1, 1), ("nth_value", 2, 2),
    ("json_build_object", 0, None), ("jsonb_build_object", 0, None),
    ("json_build_array", 0, None), ("to_json", 1, 1), ("to_jsonb", 1, 1),
    ("sum", 1, 1), ("avg", 1, 1), ("min", 1, 1), ("max", 1, 1),
)  # fmt: skip
ARGUMENT_GAPS = (("width_bucket", 3),)

# pg_proc's prokind 'w' only (rank and its kin are hypothetical-set aggregates too).
WINDOW_FUNCTIONS = frozenset(
    ("row_number", "ntile", "lag", "lead", "first_value", "last_value", "nth_value")
)
# prokind 'a' among FUNCTIONS (the five keyword aggregates are the checker's own).
AGGREGATE_FUNCTIONS = frozenset((
    "array_agg", "bit_and", "bit_or", "bool_and", "bool_or", "every", "json_agg",
    "jsonb_agg", "string_agg", "stddev", "stddev_pop", "stddev_samp", "variance",
    "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "regr_slope",
    "percentile_cont", "percentile_disc", "mode",
))  # fmt: skip

# Functions a role's default function grant leaves out (docs/policy.md, "Functions").
UNSAFE_FUNCTIONS = (
    ("repeat", "allocates a string of its count argument's size (repeat('x', 1e9): 1 GB)"),
    ("lpad", "pads to its length argument (lpad('', 1e9): 1 GB)"),
    ("rpad", "pads to its length argument (rpad('', 1e9): 1 GB)"),
    ("format", "a width argument pads to any size (format('%1000000000s', 'x'))"),
)

# Type names by the modifiers PostgreSQL 15 takes after them (measured with CAST on a
# server): none (TYPE_NAME), one (SIZED_TYPE_NAME: `varchar(20)`), one or two
# (SCALED_TYPE_NAME: `numeric(10,2)`).
TYPE_NAMES = (
    "smallint", "integer", "int", "bigint", "int2", "int4", "int8", "real",
    "double precision", "float4", "float8", "money", "text", "boolean", "bool", "date",
    "time with time zone", "time without time zone", "timestamp with time zone",
    "timestamp without time zone", "uuid", "json", "jsonb", "bytea",
)  # fmt: skip
SIZED_TYPE_NAMES = (
    "float", "varchar", "character varying", "char", "character", "time", "timestamp",
    "timestamptz", "interval",
)  # fmt: skip
SCALED_TYPE_NAMES = ("decimal", "numeric")

# The names a statement of the grammar makes PostgreSQL resolve over the search
# path, where a user's function or operator of the name can win over the
# built-in (an exact match beats one that needs a cast: `lower(integer)`,
# `=(integer, numeric)`); grid_sql.schema reads them as routines. The function
# words (the trims among them), the keyword aggregates and substring's call
# form; the grammar's operators and those its syntax looks up: LIKE (~~, !~~),
# ILIKE (~~*, !~~*), SIMILAR TO (~, !~), = (IN, CASE, IS DISTINCT FROM,
# NULLIF), < and > (ORDER BY, BETWEEN, GREATEST, LEAST through the type's
# ordering).
BOUND_FUNCTIONS = (*FUNCTIONS, "count", "sum", "avg", "min", "max", "substring")
BOUND_OPERATORS = (
    "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "^", "||",
    "~~", "!~~", "~~*", "!~~*", "~", "!~",
)  # fmt: skip
# The type names a statement writes (CAST, `::`, `date '...'`): a user's type or
# domain of such a name wins where the search path puts its schema before
# pg_catalog (a type named like a function wins a one-argument call too:
# grid_sql.schema).
BOUND_TYPES = (*TYPE_NAMES, *SIZED_TYPE_NAMES, *SCALED_TYPE_NAMES)

# Functions that are key words in PostgreSQL with a syntax of their own (gram.y's
# func_expr_common_subexpr): a plain argument list and nothing after the call.
SPECIAL_FUNCTIONS = ("coalesce(", "nullif(", "greatest(", "least(", "substring(", "trim(")

DATETIME_FIELDS = (
    "century", "day", "decade", "dow", "doy", "epoch", "hour", "isodow", "isoyear",
    "julian", "microseconds", "millennium", "milliseconds", "minute", "month",
    "quarter", "second", "timezone", "timezone_hour", "timezone_minute", "week", "year",
)  # fmt: skip


# What a role's verbs and banned clauses cut (grid_sql.projection_rules).
PROJECTION = ProjectionRules(
    statement="statement",
    verb_forms=STATEMENT_FORMS,
    clauses=MappingProxyType(
        {
            "subquery": (
                Cut("table_or_subquery", "select_stmt"),  # derived tables, LATERAL
                Cut("in_target", "select_stmt"),
                Cut("comparison", "select_stmt"),  # = ANY (SELECT ...)
                Cut("primary", "select_stmt"),  # scalar subquery and EXISTS
            ),
            "set_operations": (Cut("compound_select", "compound_operator"),),
            "cte": (Cut("with_clause"), Cut("table_or_subquery", "CTE_NAME")),
            "recursive_cte": (Cut("with_clause", "RECURSIVE"),),
            "join": (
                Cut("join_source", "join_source"),
                Cut("table_or_subquery", "joined_table"),  # a join in parentheses
                Cut("update_stmt", "from_clause"),
                Cut("delete_stmt", "USING"),
            ),
            "window": WINDOW_CUTS,
            "returning": (Cut("returning_clause"),),
            "on_conflict": (Cut("on_conflict"),),
        }
    ),
    requirements=((Cut("on_conflict", "UPDATE"), frozenset({"UPDATE"})),),
)


@dataclass(frozen=True, kw_only=True)
class PostgresDialect(Dialect):
    name: str = "postgres"
    grammar_file: str = "postgres.lark"
    corpus_file: str = "corpus/postgres.txt"
    keywords: tuple[str, ...] = KEYWORDS
    reserved_words: frozenset[str] = RESERVED_WORDS
    never_identifiers: frozenset[str] = RESERVED_WORDS
    catalog_prefixes: tuple[str, ...] = ("pg_",)  # pg_catalog is searched first
    functions: tuple[str, ...] = FUNCTIONS
    # LEFT and RIGHT name joins and never precede "(" there; left( and right( are calls.
    keyword_functions: frozenset[str] = frozenset({"left", "right"})
    unsafe_functions: tuple[tuple[str, str], ...] = UNSAFE_FUNCTIONS
    function_arities: tuple[tuple[str, int, int | None], ...] = FUNCTION_ARITIES
    argument_gaps: tuple[tuple[str, int], ...] = ARGUMENT_GAPS
    window_functions: frozenset[str] = WINDOW_FUNCTIONS
    aggregate_functions: frozenset[str] = AGGREGATE_FUNCTIONS
    over_needs_window_or_aggregate: bool = True
    cte_column_list: Literal["exact", "at_most", "any"] = "at_most"
    compound_order_terms: CompoundOrderTerms = "names"
    type_names: tuple[str, ...] = TYPE_NAMES
    word_classes: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("DATETIME_FIELD", DATETIME_FIELDS),
        ("SIZED_TYPE_NAME", SIZED_TYPE_NAMES),
        ("SCALED_TYPE_NAME", SCALED_TYPE_NAMES),
        ("SPECIAL_FUNCTION_NAME", SPECIAL_FUNCTIONS),
    )
    projection: ProjectionRules | None = PROJECTION
    identifier_quotes: tuple[QuoteForm, ...] = (QuoteForm(open='"', close='"'),)
    identifier_case: IdentifierCase = "fold-lower"
    whole_row_references: bool = True
    whole_rows_after_columns: bool = True
    cte_visibility: Literal["all", "earlier", "earlier-unless-recursive"] = (
        "earlier-unless-recursive"
    )
    source_names_unique: bool = True
    stores_routines: bool = True
    events: tuple[tuple[str, str], ...] = (
        *STATEMENT_EVENTS,
        ("INSERT", "verb"),
        ("RETURNING", "clause_open"),
        ("returning_clause", "clause_close"),
    )
    join_condition_sees_right: bool = False
    comma_binds_loosest: bool = True
    result_aliases_in_expressions: bool = False
    using_left_spans_commas: bool = False
    expression_column_names: Literal["text", "postgres"] = "postgres"
    duplicate_column_suffix: str = ""  # (SELECT 1 AS a, 2 AS a) q: a twice, q.a ambiguous
    insert_fills_defaults: bool = True
    generated_take_default: bool = True
    star_only_aggregates: bool = True
    description: str = "PostgreSQL 15: SELECT/INSERT/UPDATE/DELETE, RETURNING, ON CONFLICT"


POSTGRES = PostgresDialect()
