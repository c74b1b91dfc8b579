"""The DuckDB dialect: knobs over PostgreSQL's, and a grammar delta over it.

DuckDB's parser is PostgreSQL's (libpg_query), so the dialect is PostgreSQL's
grammar (grid-sql's base plus `postgres.lark`) with `duckdb.lark` on top:
FROM-first SELECTs (`FROM t SELECT a`) and what DuckDB refuses cut out. Checked
against DuckDB itself: every accept line of `corpus/duckdb.txt` is prepared by
DuckDB, every reject line is refused by DuckDB and by the grammar
(tests/test_dialect_duckdb.py). Decisions a reader should know:

- Functions: PostgreSQL's closed list minus the functions DuckDB lacks
  (measured with `duckdb_functions()`); the same reasoning about functions as
  exits from table policy applies (grid_sql.dialects.postgres).
- Identifiers compare case-insensitively, quoted or not (DuckDB preserves the
  case a name was created with and matches it in any case): `identifier_case`
  is "insensitive".
- Reserved words: PostgreSQL's and DuckDB's reserved key words (`duckdb_keywords()`,
  category "reserved") are never bare names; GRID quotes such schema names.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid_sql.dialect import IdentifierCase
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
    functions: tuple[str, ...] = FUNCTIONS
    unsafe_functions: tuple[tuple[str, str], ...] = UNSAFE_FUNCTIONS
    type_names: tuple[str, ...] = TYPE_NAMES
    identifier_case: IdentifierCase = "insensitive"
    from_first_native: bool = True
    insert_fills_defaults: bool = False  # "table t has 2 columns but 1 values were supplied"
    star_only_aggregates: bool = False  # now(*) is now()
    description: str = "DuckDB 2.0: PostgreSQL's DML with FROM-first SELECT"


DUCKDB = DuckdbDialect()
