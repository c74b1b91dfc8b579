"""``grid check`` and ``grid compile``: the SQL layer's subcommands of the ``grid`` command.

Both are entry points of the ``grid.commands`` group (``grid_core.cli``), so
installing grid-sql adds them. Their inputs are resolved the same way, with the
defaults ``grid ask`` uses:

- the **schema**: ``--db FILE`` (a SQLite database, opened read-only),
  ``--schema FILE`` (a JSON snapshot, ``grid.schema/1``), or by default the
  example schema (``examples/company.sql``), in the chosen dialect;
- the **dialect**: ``--dialect NAME`` (default: the schema's); it must be the
  schema's;
- the **policy**: ``--policy FILE`` (TOML, validated against the schema) or by
  default the example policy (``examples/company.policy.toml``). The default
  holds for the example schema only: ``--db`` or ``--schema`` without
  ``--policy`` is an error (:class:`~grid_sql.policy.MissingPolicyError`)
  that points at ``grid policy init`` (:mod:`grid_sql.policy_init`), never the
  example policy applied to a user's database.

``grid check SQL [--role NAME]`` gives two verdicts on one statement for one
role (default: :data:`DEFAULT_ROLE`, else the policy's first role):

1. **language**: whether the statement is a sentence of the role's language L
   (its projection, L2, and schema lexicon, L3; DESIGN.md section 3), i.e.
   whether a GRID mask could have produced it. Verb- and table-level policy and
   banned clauses live here. A statement without its closing ``;`` is read with
   one, as the SemanticChecker reads it. Otherwise the verdict names the first
   byte at which the statement stops being a viable prefix of L (the byte that
   kills a lexeme can come after the lexeme that is refused);
2. **checker**: the SemanticChecker's violations (column policy, name
   resolution), each with its byte span, the text there and a one-line message.
   A statement the checker's parser cannot read (not SQL of the dialect) is
   "outside the language at byte N", N the offset of the lexeme the parser
   refused; one nested deeper than its walk follows is refused as such.

Both verdicts are always given. Exit status 0 when the statement is in L and
the checker accepts it, 1 otherwise (a statement that does not parse included),
2 for bad input (a statement over :data:`MAX_STATEMENT_BYTES`, a dialect the
checker does not support, an unknown role, an unreadable schema, a missing or
malformed policy), printed by the ``grid`` command as one line on stderr.

``grid compile [--role NAME ...] [--vocab NAME]`` builds every artifact a GRID
engine reads for the policy's roles (default: all of them) and prints, one
plain line each, its fingerprint, its build time and a size: the L1 grammar,
the union DFA, the tokenizer and its token trie, then per role the projection
(L2 grammar), its LALR(1) tables, the schema lexicon, the engine around them
and its reserve table. The fingerprints are the ones an audit seal records
(``grammar`` is the role's projection, ``tables`` its LALR tables). On a
terminal a status line on stderr names the artifact being built. Times are for
this process: an artifact already built in it (the dialect's grammar and DFA are
cached per process) shows its lookup time.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import unicodedata
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TextIO, TypeVar

from grid_core.cli import VOCABULARIES, one_line
from grid_core.fingerprint import fingerprint
from grid_core.guide import Engine
from grid_core.lexer import Lexer, Scanner
from grid_core.parser import Parser
from grid_core.reserve import ReserveTable, reserve_table
from grid_core.trie import build_trie
from grid_sql.checker import (
    CheckerError,
    SemanticChecker,
    StatementParseError,
    StatementTooDeepError,
    Violation,
)
from grid_sql.database import database_for
from grid_sql.dialect import Dialect
from grid_sql.dialects import available_dialects, get_dialect
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import MissingPolicyError, PolicyBundle, example_policy
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar
from grid_sql.schema import SchemaError, SchemaSnapshot, example_schema, require_file

__all__ = [
    "DEFAULT_ROLE",
    "MAX_STATEMENT_BYTES",
    "check_command",
    "compile_command",
    "default_role",
    "format_violation",
    "language_verdict",
    "reserve_fingerprint",
    "role_language",
]

#: The role ``grid check`` and ``grid ask`` use when none is named (if the policy has it).
DEFAULT_ROLE = "analyst"

#: The longest statement ``grid check`` reads (UTF-8 bytes): its language verdict
#: steps the lexer byte by byte in Python.
MAX_STATEMENT_BYTES = 100_000

T = TypeVar("T")

# ================================================================ inputs


def _add_inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dialect",
        choices=available_dialects(),
        help="SQL dialect (default: the schema's; the example schema is sqlite)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--db", type=Path, help="SQLite database file (read-only)")
    source.add_argument("--schema", type=Path, help="JSON schema snapshot (grid.schema/1)")
    p.add_argument("--policy", type=Path, help="policy TOML (default: the example policy)")


def _inputs(args: argparse.Namespace) -> tuple[Dialect, SchemaSnapshot, PolicyBundle]:
    """The dialect, schema and policy of ``--dialect/--db/--schema/--policy``."""
    source = args.db if args.db is not None else args.schema
    if source is not None and args.policy is None:
        raise MissingPolicyError(str(source), "--db" if args.db is not None else "--schema")
    if args.db is not None:
        require_file(args.db)
        schema = database_for(args.db).snapshot(args.db)  # SQLite, or a plug-in's (DuckDB)
    elif args.schema is not None:
        schema = SchemaSnapshot.load(args.schema)
    else:
        example = example_schema()
        name = args.dialect or example.dialect
        # the example's tables in another dialect: no database, so no routines
        schema = SchemaSnapshot(name, example.tables, example.name, routines=())
    dialect = get_dialect(args.dialect or schema.dialect)
    if schema.dialect != dialect.name:
        raise SchemaError(
            schema.label, f"a {schema.dialect} schema cannot serve dialect {dialect.name}"
        )
    policy = PolicyBundle.load(args.policy, schema) if args.policy else example_policy(schema)
    return dialect, schema, policy


def role_language(
    schema: SchemaSnapshot, policy: PolicyBundle, role: str
) -> tuple[SchemaLexicon, RoleProjection]:
    """The role's schema lexicon (L3) and projection (L2) over ``schema``, in its dialect:
    what its mask admits. Raises the GridError that makes the role unusable (an unknown
    role or name, a word no quote form can hold, a language left empty, e.g. UPDATE with
    no column granted), so that a command can refuse it before any model work."""
    dialect = get_dialect(schema.dialect)
    lexicon = SchemaLexicon.build(dialect, schema, policy.grants(role, schema))
    projection = RoleProjection.compile(policy.role(role), dialect, words=lexicon.words)
    return lexicon, projection


def default_role(policy: PolicyBundle) -> str:
    """:data:`DEFAULT_ROLE` when the policy defines it, else the policy's first role."""
    return DEFAULT_ROLE if DEFAULT_ROLE in policy.roles else next(iter(policy.roles))


# ================================================================ grid check


def check_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "check",
        help="is a statement in a role's language, and does the SemanticChecker accept it",
        description="Check one SQL statement for one role: membership in the role's language "
        "(what GRID's mask admits) and the SemanticChecker's verdict (defaults: the example "
        "schema and policy).",
    )
    p.add_argument("sql", metavar="SQL", help="one SQL statement")
    p.add_argument("--role", help=f"role of the policy (default: {DEFAULT_ROLE}, else the first)")
    _add_inputs(p)
    p.set_defaults(func=_check)


def language_verdict(
    projection: RoleProjection, lexicon: SchemaLexicon, dialect: Dialect, sql: bytes
) -> int | None:
    """None when ``sql`` is in the role's language L (a missing closing ``;`` supplied);
    else the offset of the first byte after which it is no viable prefix of L
    (``len(sql)`` when every byte is, but the statement is incomplete)."""
    grammar = projection.grammar
    lexer = Lexer(Scanner(grammar, dialect_dfa(dialect), lexicon.lexicon), Parser(grammar.lalr()))
    config = lexer.initial
    for i in range(len(sql)):
        after = lexer.advance(config, sql[i : i + 1])
        if after is None or not lexer.is_viable(after):
            return i
        config = after
    if lexer.eos_allowed(config):
        return None
    closed = lexer.advance(config, b";")
    return None if closed is not None and lexer.eos_allowed(closed) else len(sql)


def _excerpt(data: bytes, start: int, end: int) -> str:
    """The text of ``data[start:end]`` for one line: blanks folded, control characters
    escaped (a statement's bytes never drive the terminal), invalid UTF-8 replaced."""
    text = " ".join(data[start:end].decode("utf-8", "replace").split())
    return (
        "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in text)
        or "<end of statement>"
    )


def format_violation(sql: bytes, v: Violation) -> str:
    """One line: the violation's byte span, the text there (blanks folded), kind, message."""
    start, end = v.span
    return f"bytes {start}-{end} `{_excerpt(sql, start, end)}`: {v.kind}: {v.message}"


def _check(args: argparse.Namespace) -> int:
    dialect, schema, policy = _inputs(args)
    role = args.role if args.role is not None else default_role(policy)
    grants = policy.grants(role, schema)  # UnknownRoleError for a bad name
    checker = SemanticChecker.for_schema(schema, policy.column_grants(schema), dialect=dialect)
    data = args.sql.encode("utf-8")
    if len(data) > MAX_STATEMENT_BYTES:
        raise CheckerError(
            f"the statement is {len(data)} bytes; grid check reads at most {MAX_STATEMENT_BYTES}"
        )
    unread = ""
    try:
        violations = checker.check(data, role)
    except StatementParseError as e:  # not SQL of the dialect: outside every role's language
        violations, unread = [], f"outside the language at byte {e.offset} ({e.detail})"
    except StatementTooDeepError as e:
        violations, unread = [], f"REFUSED ({e})"
    lexicon, projection = role_language(schema, policy, role)
    leaves = language_verdict(projection, lexicon, dialect, data)

    out = sys.stdout
    granted = ", ".join(grants.tables)
    # Catalog names come from the database: a control character in one (a
    # newline, a terminal escape) is shown escaped, as every line here is one line.
    header = f"role {role} on {schema.label} ({dialect.name}; tables: {granted})"
    out.write(f"{one_line(header)}\n")
    if leaves is None:
        out.write("language: in the role's language\n")
    elif leaves == len(data):
        out.write("language: an incomplete statement of the role's language\n")
    else:
        shown = _excerpt(data, leaves, leaves + 24)
        out.write(f"language: leaves the role's language at byte {leaves} (`{shown}`)\n")
    if unread:
        out.write(f"checker: {unread}\n")
    elif violations:
        plural = "" if len(violations) == 1 else "s"
        out.write(f"checker: REFUSED ({len(violations)} violation{plural})\n")
        out.writelines(f"  {one_line(format_violation(data, v))}\n" for v in violations)
    else:
        out.write("checker: accepted\n")
    return 0 if leaves is None and not violations and not unread else 1


# ================================================================ grid compile


def compile_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compile",
        help="build and fingerprint the artifacts of a dialect, policy, schema and tokenizer",
        description="Build every artifact of GRID's engines for the policy's roles and print "
        "each one's fingerprint and build time (defaults: sqlite, the example schema and "
        "policy, every role, the smollm2 tokenizer).",
    )
    p.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME",
        help="a role to compile (repeatable; default: every role of the policy)",
    )
    p.add_argument(
        "--vocab",
        choices=sorted(VOCABULARIES),
        default="smollm2",
        help="tokenizer (default: smollm2, the model of grid ask)",
    )
    _add_inputs(p)
    p.set_defaults(func=_compile)


def reserve_fingerprint(table: ReserveTable) -> str:
    """A content fingerprint of a reserve table's grammar-level part: each terminal's
    piece and tokens, each nonterminal's cost and argmin rule (the per-configuration
    memos are derived from these and the engine's artifacts)."""
    return fingerprint(
        (
            "grid.reserve.v1",
            dict(table.pieces),
            [list(tokens) for tokens in table.term_tokens],
            list(table.nt_cost),
            list(table.nt_rule),
        )
    )


class _Report:
    """The artifact lines on ``out``; on a terminal, a status line on ``status``."""

    def __init__(self, out: TextIO, status: TextIO) -> None:
        self.out, self.status = out, status
        self.tty = status.isatty()
        self.t0 = time.perf_counter()

    def build(self, name: str, what: Callable[[], T]) -> tuple[T, float]:
        if self.tty:
            self.status.write(f"\r\033[Kbuilding {name} ...")
            self.status.flush()
        t = time.perf_counter()
        value = what()
        seconds = time.perf_counter() - t
        if self.tty:
            self.status.write("\r\033[K")
            self.status.flush()
        return value, seconds

    def line(self, name: str, fp: str, seconds: float | str, detail: str) -> None:
        took = seconds if isinstance(seconds, str) else f"{seconds:.3f}"
        self.out.write(f"{name:<22} {fp:<32} {took:>8}  {detail}\n")
        self.out.flush()


def _compile(args: argparse.Namespace) -> int:
    # The table is written when every artifact is built: an error (exit 2) leaves
    # stdout empty. The status line on a terminal shows the progress meanwhile.
    table = io.StringIO()
    report = _Report(table, sys.stderr)
    dialect, schema, policy = _inputs(args)
    roles = args.role or list(policy.roles)
    grants = {role: policy.grants(role, schema) for role in roles}  # UnknownRoleError
    report.out.write(
        f"dialect {dialect.name}; schema {schema.label} ({len(schema.tables)} relations); "
        f"policy {policy.path} ({len(policy.roles)} roles); tokenizer {args.vocab}\n"
    )
    report.line("artifact", "fingerprint", "seconds", "detail")
    report.line("schema", schema.fingerprint, "-", f"{len(schema.tables)} relations")
    report.line("policy", policy.fingerprint, "-", f"{len(policy.roles)} roles")

    grammar, s = report.build("the dialect grammar", lambda: dialect_grammar(dialect))
    detail = f"L1 {dialect.name}: {len(grammar.rules)} rules, {grammar.n_terminals} terminals"
    report.line("grammar", grammar.fingerprint, s, detail)
    dfa, s = report.build("the union DFA", lambda: dialect_dfa(dialect))
    report.line("dfa", dfa.fingerprint, s, f"{dfa.n_states} states")
    vocab, s = report.build("the tokenizer", VOCABULARIES[args.vocab])
    report.line("tokenizer", vocab.fingerprint, s, f"{vocab.name}: {vocab.n_vocab} ids")
    trie, s = report.build("the token trie", lambda: build_trie(vocab))
    report.line("trie", trie.fingerprint, s, f"{trie.n_nodes} nodes")

    for role in roles:
        build_lexicon = partial(SchemaLexicon.build, dialect, schema, grants[role])
        lexicon, s_lex = report.build(f"{role}: lexicon", build_lexicon)
        words = sum(len(ws) for ws in lexicon.words.values())
        report.line(f"{role} lexicon", lexicon.fingerprint, s_lex, f"{words} words")
        project = partial(RoleProjection.compile, policy.role(role), dialect, words=lexicon.words)
        projection, s = report.build(f"{role}: projection", project)
        verbs = ", ".join(sorted(projection.verbs))
        detail = f"{len(projection.grammar.rules)} rules ({verbs})"
        report.line(f"{role} projection", projection.fingerprint, s, detail)
        tables, s = report.build(f"{role}: LALR(1) tables", projection.grammar.lalr)
        report.line(f"{role} lalr", tables.fingerprint, s, f"{tables.n_states} states")
        build_engine = partial(
            Engine, projection.grammar, vocab, lexicon.lexicon, dfa=dfa, trie=trie, cache=False
        )
        engine, s = report.build(f"{role}: engine", build_engine)
        assert engine.tables.fingerprint == tables.fingerprint, "LALR construction is stable"
        report.line(f"{role} engine", "-", s, "scanner, parser, kernel tables (LALR again)")
        reserve, s = report.build(f"{role}: reserve table", partial(reserve_table, engine))
        shortest = reserve.reserve(engine.lexer.initial)
        detail = f"shortest statement: {shortest} tokens + EOS"
        report.line(f"{role} reserve", reserve_fingerprint(reserve), s, detail)
    report.out.write(f"total {time.perf_counter() - report.t0:.2f}s\n")
    sys.stdout.write(table.getvalue())
    return 0
