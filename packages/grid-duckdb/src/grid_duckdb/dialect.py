"""The DuckDB dialect: knobs over PostgreSQL's, and a grammar delta over it.

DuckDB's parser is PostgreSQL's (libpg_query), so the dialect is PostgreSQL's
grammar (grid-sql's base plus `postgres.lark`) with `duckdb.lark` on top:
FROM-first SELECTs (`FROM t SELECT a`) and what DuckDB refuses cut out. Checked
against DuckDB itself: every accept line of `corpus/duckdb.txt` is prepared by
DuckDB, every reject line is refused by DuckDB and by the grammar
(tests/test_dialect_duckdb.py). Decisions a reader should know:

- Functions: PostgreSQL's closed list minus the functions DuckDB lacks
  (measured with `duckdb_functions()`); the same reasoning about functions as
  exits from table policy applies (grid_sql.dialects.postgres). Their
  argument counts are DuckDB's own (`FUNCTION_ARITIES`), not PostgreSQL's:
  `string_agg(s)`, `min(x, 3)` and `make_date(d)` run in DuckDB, `length(s, 1)`
  and `lpad(s, 3)` do not.
- Identifiers compare case-insensitively, quoted or not (DuckDB preserves the
  case a name was created with and matches it in any case): `identifier_case`
  is "insensitive".
- Reserved words: PostgreSQL's and DuckDB's reserved key words (`duckdb_keywords()`,
  category "reserved") are never bare names; GRID quotes such schema names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from grid_sql.dialect import CompoundOrderTerms, IdentifierCase
from grid_sql.dialects.postgres import (
    FUNCTIONS as PG_FUNCTIONS,
)
from grid_sql.dialects.postgres import (
    KEYWORDS as PG_KEYWORDS,
)
from grid_sql.dialects.postgres import (
    RESERVED_WORDS as PG_RESERVED_WORDS,
)
from grid_sql.dialects.postgres import (
    TYPE_NAMES as PG_TYPE_NAMES,
)
from grid_sql.dialects.postgres import (
    UNSAFE_FUNCTIONS,
    PostgresDialect,
)

# PostgreSQL functions DuckDB does not have (duckdb_functions(), DuckDB 2.0).
MISSING_FUNCTIONS = frozenset((
    "div", "width_bucket", "btrim", "initcap", "to_char", "to_date", "to_number",
    "clock_timestamp", "make_interval", "justify_days", "justify_hours",
    "justify_interval", "every", "json_agg", "jsonb_agg", "percentile_cont",
    "percentile_disc", "json_build_object", "jsonb_build_object", "json_build_array",
    "to_jsonb",
))  # fmt: skip
FUNCTIONS = tuple(f for f in PG_FUNCTIONS if f not in MISSING_FUNCTIONS)
# The argument counts DuckDB accepts for PostgreSQL's arity table's functions that
# it has, as (name, least, most or None), for the SemanticChecker's
# wrong_argument_count. From duckdb_functions() (DuckDB 2.0.1): the least and most
# parameters over a function's overloads, no bound for varargs; window functions
# probed by preparing `f(x, 1, ...) OVER ()`, since their listed parameters include
# the optional ones. tests/test_dialect_duckdb.py derives it again from the DuckDB
# installed and replays the counts just outside each range against DuckDB.
# ARGUMENT_GAPS: the counts within a range that no overload has (make_date takes
# 1 or 3 arguments, make_timestamp 1 or 6), measured the same way.
FUNCTION_ARITIES = (
    ("abs", 1, 1), ("cbrt", 1, 1), ("ceil", 1, 1), ("ceiling", 1, 1), ("degrees", 1, 1),
    ("exp", 1, 1), ("floor", 1, 1), ("ln", 1, 1), ("log", 1, 2), ("log10", 1, 1),
    ("mod", 2, 2), ("pi", 0, 0), ("power", 2, 2), ("radians", 1, 1), ("random", 0, 0),
    ("round", 1, 2), ("sign", 1, 1), ("sqrt", 1, 1), ("trunc", 1, 2),
    ("ascii", 1, 1), ("char_length", 1, 1), ("character_length", 1, 1), ("chr", 1, 1),
    ("concat", 1, None), ("concat_ws", 2, None), ("format", 1, None), ("left", 2, 2),
    ("length", 1, 1), ("lower", 1, 1), ("lpad", 3, 3), ("ltrim", 1, 2), ("md5", 1, 1),
    ("octet_length", 1, 1), ("regexp_replace", 3, 4), ("repeat", 2, 2),
    ("replace", 3, 3), ("reverse", 1, 1), ("right", 2, 2), ("rpad", 3, 3),
    ("rtrim", 1, 2), ("split_part", 3, 3), ("starts_with", 2, 2), ("strpos", 2, 2),
    ("substr", 2, 3), ("translate", 3, 3), ("upper", 1, 1),
    ("to_timestamp", 1, 1), ("age", 1, 2), ("date_part", 2, 2), ("date_trunc", 2, 2),
    ("make_date", 1, 3), ("make_timestamp", 1, 6), ("now", 0, 0),
    ("array_agg", 1, 1), ("bit_and", 1, 1), ("bit_or", 1, 1), ("bool_and", 1, 1),
    ("bool_or", 1, 1), ("string_agg", 1, 2), ("stddev", 1, 1), ("stddev_pop", 1, 1),
    ("stddev_samp", 1, 1), ("variance", 1, 1), ("var_pop", 1, 1), ("var_samp", 1, 1),
    ("corr", 2, 2), ("covar_pop", 2, 2), ("covar_samp", 2, 2), ("regr_slope", 2, 2),
    ("row_number", 0, 0), ("ntile", 1, 1), ("lag", 1, 3), ("lead", 1, 3),
    ("first_value", 1, 1), ("last_value", 1, 1), ("nth_value", 2, 2),
    ("to_json", 0, None), ("sum", 1, 1), ("avg", 1, 1), ("min", 1, 2), ("max", 1, 2),
)  # fmt: skip
ARGUMENT_GAPS = (
    ("make_date", 2),
    *(("make_timestamp", n) for n in range(2, 6)),
)
# PostgreSQL's keywords less TIES (DuckDB has no FETCH ... WITH TIES; duckdb.lark).
KEYWORDS = tuple(k for k in PG_KEYWORDS if k != "ties")
# PostgreSQL type names DuckDB does not have.
TYPE_NAMES = tuple(t for t in PG_TYPE_NAMES if t not in {"money", "jsonb"})

# duckdb_keywords() where keyword_category = 'reserved' (DuckDB 2.0).
DUCKDB_RESERVED = frozenset((
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
    "both", "case", "cast", "check", "collate", "column", "constraint", "create",
    "default", "deferrable", "desc", "describe", "distinct", "do", "else", "end",
    "except", "false", "fetch", "for", "foreign", "from", "group", "having", "in",
    "initially", "intersect", "into", "lambda", "lateral", "leading", "limit", "not",
    "null", "offset", "on", "only", "or", "order", "pivot", "pivot_longer",
    "pivot_wider", "placing", "primary", "qualify", "references", "returning",
    "select", "show", "some", "summarize", "symmetric", "table", "then", "to",
    "trailing", "true", "union", "unique", "unpivot", "using", "variadic", "when",
    "where", "window", "with",
))  # fmt: skip
RESERVED_WORDS = PG_RESERVED_WORDS | DUCKDB_RESERVED
# Key words DuckDB takes as a table or column name but not as a bare alias: in
# `FROM t semi JOIN u` SEMI is the join's kind (so is ANTI, ASOF, POSITIONAL),
# `at` starts AT TIME ZONE, `glob` an operator, `unpack` a call. Read as
# aliases, `t semi JOIN u USING (c)` showed the checker u's columns, which a
# SEMI join hides: a bare name then read the enclosing query's denied column
# (a red team's, session 46). Measured: tests/test_dialect_duckdb.py.
NEVER_FREE_NAMES = frozenset(("anti", "asof", "at", "glob", "positional", "semi", "unpack"))


@dataclass(frozen=True, kw_only=True)
class DuckdbDialect(PostgresDialect):
    name: str = "duckdb"
    grammar_package: str = "grid_duckdb"
    grammar_layers: tuple[tuple[str, str], ...] = (("grid_sql.dialects", "postgres.lark"),)
    grammar_file: str = "duckdb.lark"
    corpus_file: str = "corpus/duckdb.txt"
    keywords: tuple[str, ...] = KEYWORDS
    reserved_words: frozenset[str] = RESERVED_WORDS
    never_identifiers: frozenset[str] = RESERVED_WORDS
    never_free_names: frozenset[str] = NEVER_FREE_NAMES
    # duckdb_columns, sqlite_master and pg_class are views of the catalog.
    catalog_prefixes: tuple[str, ...] = ("duckdb_", "sqlite_", "pg_", "pragma_")
    functions: tuple[str, ...] = FUNCTIONS
    unsafe_functions: tuple[tuple[str, str], ...] = UNSAFE_FUNCTIONS
    type_names: tuple[str, ...] = TYPE_NAMES
    identifier_case: IdentifierCase = "insensitive"
    from_first_native: bool = True
    insert_fills_defaults: bool = False  # "table t has 2 columns but 1 values were supplied"
    generated_take_default: bool = False  # "Cant update column"; "table t has 2 columns"
    star_only_aggregates: bool = False  # now(*) is now()
    compound_order_terms: CompoundOrderTerms = "any"  # ORDER BY -id binds
    unused_windows_unresolved: bool = True  # `WINDOW w AS (ORDER BY nope)` binds unused
    limit_reads_outer: bool = False  # "Correlated columns not supported in LIMIT"
    source_names_unique: bool = False  # `FROM u, u` binds (a column of both is ambiguous)
    whole_rows_after_columns: bool = False  # (SELECT s FROM dept AS s): dept's row, level first
    having_aggregates_see_aliases: bool = False  # HAVING max(x): x no alias
    # WITH c AS (... emp ...), emp AS (...): c reads the table emp, RECURSIVE or not
    cte_visibility: Literal["all", "earlier", "earlier-unless-recursive"] = "earlier"
    conflict_bare_names_target: bool = True  # DO UPDATE SET y = y + 1: the stored y
    nested_join_sees_outer: bool = True  # `FROM a JOIN (b JOIN c ON a.x = b.x) ON 1` binds
    comma_binds_loosest: bool = False  # `FROM a, b JOIN c ON a.x = c.x` binds
    result_aliases_in_expressions: bool = True  # `SELECT a AS x FROM t WHERE x > 0` binds
    from_subqueries_lateral: bool = True  # `FROM t AS b, (SELECT b) AS q` binds b
    values_column_names: Literal["column1", "col0"] = "col0"  # (VALUES (1)) v: v.col0
    duplicate_column_suffix: str = "_"  # (SELECT 1 AS a, 2 AS a) q: q.a, q.a_1
    expression_column_names: Literal["text", "postgres"] = "text"  # "CAST(x AS INTEGER)"
    function_arities: tuple[tuple[str, int, int | None], ...] = FUNCTION_ARITIES
    argument_gaps: tuple[tuple[str, int], ...] = ARGUMENT_GAPS
    description: str = "DuckDB 2.0: PostgreSQL's DML with FROM-first SELECT"


DUCKDB = DuckdbDialect()
