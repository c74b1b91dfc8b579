"""``grid policy init``: a starter policy for a user's own database.

GRID never applies its example policy to a database of the user's (``--db``
without ``--policy`` is a :class:`~grid_sql.policy.MissingPolicyError`). This
command writes the policy to start from, so that a database works in two
commands::

    grid policy init --db shop.sqlite          # writes shop.policy.toml
    grid ask "How many orders are there?" --db shop.sqlite --policy shop.policy.toml

``grid policy init (--db FILE | --schema FILE) [--out PATH] [--role NAME] [--force]``
reads the schema (a SQLite file, opened read-only, or a ``grid.schema/1``
snapshot) and writes one role (default ``reader``) that may ``SELECT`` from
every relation, listed by name, with the default execution limits spelled out
in a ``[limits]`` table (docs/policy.md). ``--out`` defaults to the source's
path with the suffix ``.policy.toml``; ``-`` prints the policy instead. An
existing file is kept unless ``--force``.

Policy decisions:

- Relations are listed, not granted with ``*``: a table added to the database
  later is not granted until someone adds it.
- A SQLite file's shadow tables (the tables behind a virtual table: FTS5's
  ``docs_content`` holds a copy of ``docs``' text, R*Tree's ``r_node`` its
  nodes; ``PRAGMA table_list`` type ``shadow``) are left out and named in a
  comment: granted, they would keep exposing a virtual table's data after
  someone removed that table from the role. A snapshot file says nothing of
  shadow tables; its relations are all listed, and so are the shadow tables
  of a virtual-table module this SQLite does not have (an extension such as
  sqlite-vec, not loaded): SQLite cannot tell them from tables.
- The database's user-defined routines (``SchemaSnapshot.routines``: a
  PostgreSQL function named like a built-in, an operator or a cast; a DuckDB
  macro) are listed in the role's ``routines``, one a line with its kind
  (an extension's as one ``extension NAME`` line with their count), under a
  comment that asks for each to be read: the policy refuses a role
  that leaves one of them out, and the starter is to validate as written.
  A snapshot that does not say which routines its database has (no
  ``routines`` key) is refused as the fault it is, naming the ``--schema``
  file: no starter policy over it validates.
- The text is validated (:meth:`PolicyBundle.loads` against the schema) before
  it is written; a CTE name that would clash with a relation is avoided.
- Names are written as TOML basic strings with every character TOML requires
  escaped, so any catalog name round-trips.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from grid_core.cli import one_line
from grid_core.errors import PolicyError
from grid_sql.database import SQLITE_DATABASE, database_for
from grid_sql.limits import DEFAULT_LIMITS, LIMIT_KEYS
from grid_sql.policy import DEFAULT_CTE_NAMES, ROLE_NAME, PolicyBundle
from grid_sql.schema import SchemaError, SchemaSnapshot, ascii_lower, require_file

__all__ = [
    "DEFAULT_STARTER_ROLE",
    "policy_command",
    "shadow_tables",
    "starter_policy",
    "toml_string",
]

#: The role ``grid policy init`` writes when ``--role`` names none.
DEFAULT_STARTER_ROLE = "reader"


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (quote, backslash and control characters escaped)."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def shadow_tables(path: Path) -> frozenset[str]:
    """The shadow tables of the SQLite file at ``path`` (none where SQLite predates
    ``pragma_table_list``, 3.37). Raises SchemaError if the file cannot be read."""
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise SchemaError(str(path), str(e)) from None
    try:
        rows = db.execute(
            "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'shadow'"
        ).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # SQLite before 3.37
            return frozenset()
        raise SchemaError(str(path), str(e)) from None
    except (sqlite3.Error, UnicodeDecodeError) as e:
        raise SchemaError(str(path), str(e)) from None
    finally:
        db.close()
    return frozenset(str(name) for (name,) in rows)


def starter_policy(
    schema: SchemaSnapshot,
    role: str = DEFAULT_STARTER_ROLE,
    shadow: frozenset[str] = frozenset(),
) -> str:
    """The text of a starter policy over ``schema``: one read-only role over every relation
    but the ``shadow`` tables (named in a comment), the default limits spelled out. Raises
    PolicyError for a schema without relations to grant or a role name the format does
    not allow."""
    if not ROLE_NAME.fullmatch(role):
        raise PolicyError(f"role name {role!r} is not {ROLE_NAME.pattern}")
    granted = [t for t in schema.tables if t.name not in shadow]
    if not granted:
        raise PolicyError(f"{schema.label} has no tables or views: there is nothing to grant")
    relations = {ascii_lower(t.name) for t in schema.tables}
    cte = next(
        name
        for name in (*DEFAULT_CTE_NAMES, *(f"cte{i}" for i in range(1, len(relations) + 2)))
        if name not in relations
    )
    limits = "\n".join(
        f"{key} = {getattr(DEFAULT_LIMITS, key)!r}"
        + ("  # seconds" if key == "wall_time" else "")
        + ("  # bytes of SQLite heap" if key == "max_memory" else "")
        for key in LIMIT_KEYS
    )
    tables = ",\n".join(f"    {toml_string(t.name)}" for t in granted)
    left_out = sorted(t.name for t in schema.tables if t.name in shadow)
    shadow_note = (
        "# Left out: the shadow tables behind virtual tables (a copy of their data),\n"
        f"# {one_line(', '.join(left_out))}.\n"
        if left_out
        else ""
    )
    cte_line = "" if cte == DEFAULT_CTE_NAMES[0] else f"cte_names = [{toml_string(cte)}]\n"
    routines = ""
    if schema.routines:
        extensions = Counter(r.extension for r in schema.routines if r.extension)
        listed = ",\n".join(
            [
                *(
                    f"    {toml_string('extension ' + x)},  # its {n} routine{'s' * (n != 1)}"
                    for x, n in sorted(extensions.items())
                ),
                *(
                    f"    {toml_string(r.name)},  # {r.kind}"
                    for r in schema.routines
                    if not r.extension
                ),
            ]
        )
        routines = (
            "# User-defined routines the database runs where a statement writes their\n"
            "# names (a function named like a built-in, an operator, a cast, a DuckDB\n"
            "# macro): GRID cannot see what they do. Read each; keep here only those this\n"
            "# role may run (without one, the policy refuses the role: drop the routine\n"
            "# from the database, or a function's name from the role's functions).\n"
            f"routines = [\n{listed}\n]\n"
        )
    return (
        f"# GRID policy for {one_line(schema.label)}, written by `grid policy init` "
        "(docs/policy.md).\n"
        "version = 1\n"
        f"description = {toml_string(f'Starter policy for {schema.label}: one read-only role')}\n"
        "\n"
        "# Limits on every statement GRID runs for any role (the defaults, spelled out);\n"
        "# a role may override them in its own [roles.NAME.limits] table.\n"
        "[limits]\n"
        f"{limits}\n"
        "\n"
        "# Read-only: SELECT on every relation of the database. Remove the tables this\n"
        '# role must not see, or restrict columns: columns.TABLE = ["col", ...].\n'
        f"{shadow_note}"
        f"[roles.{role}]\n"
        'description = "SELECT on every relation"\n'
        'verbs = ["SELECT"]\n'
        f"tables = [\n{tables},\n]\n"
        f"{cte_line}"
        f"{routines}"
        "# The language a model writes in for this role (the checker judges all of SQL):\n"
        '# "narrow" leaves out comments, aliases other than T1-T9, t1-t9 and a-z, result\n'
        '# column aliases and queries with no FROM; "full" is all the role may run.\n'
        'generation = "narrow"\n'
    )


def policy_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("policy", help="policy file tools")
    verbs = p.add_subparsers(dest="verb", required=True)
    init = verbs.add_parser(
        "init",
        help="write a starter policy for a database: one read-only role over every table",
        description="Write a starter policy for a SQLite database or schema snapshot: one "
        "read-only role over every table, with the default execution limits.",
    )
    source = init.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", type=Path, help="SQLite database file (read-only)")
    source.add_argument("--schema", type=Path, help="JSON schema snapshot (grid.schema/1)")
    init.add_argument(
        "--out",
        help="where to write it (default: the source's path with suffix .policy.toml; - prints it)",
    )
    init.add_argument(
        "--role",
        default=DEFAULT_STARTER_ROLE,
        help=f"the role's name (default: {DEFAULT_STARTER_ROLE})",
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=_init)


def _init(args: argparse.Namespace) -> int:
    if args.out == "":  # Path("") is "."
        raise PolicyError("--out names no file (give a path, or - for stdout)")
    shadow: frozenset[str] = frozenset()
    if args.db is not None:
        require_file(args.db)
        database = database_for(args.db)  # SQLite, or a plug-in's (DuckDB)
        schema, source, option = database.snapshot(args.db), args.db, "--db"
        if database is SQLITE_DATABASE:
            shadow = shadow_tables(args.db)
    else:
        schema, source, option = SchemaSnapshot.load(args.schema), args.schema, "--schema"
    if schema.routines is None:  # a snapshot without "routines": no starter can be valid
        raise SchemaError(
            str(source),
            "the snapshot does not say which user-defined routines its database has (no "
            '"routines" key), which the policy must list or refuse: snapshot the '
            "database again",
        )
    out = Path(args.out) if args.out not in (None, "-") else None
    if out is None and args.out is None:
        out = source.with_name(f"{source.stem}.policy.toml")
    text = starter_policy(schema, args.role, shadow)
    policy = PolicyBundle.loads(text, str(out or "<stdout>"), schema)  # valid, or a bug here
    if out is None:
        sys.stdout.write(text)
        return 0
    if out.exists() and out.samefile(source):
        raise PolicyError(f"--out {out} is the {option} file it reads: name another file")
    if out.exists() and not args.force:
        raise PolicyError(f"{out} exists; pass --force to overwrite it")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot write {out}: {e.strerror or e}") from None
    n = len(policy.grants(args.role, schema).tables)
    sys.stdout.write(
        f"wrote {out}: role {args.role} may SELECT from {n} relation{'s' * (n != 1)} of "
        f"{schema.label}"
        + (f" ({k} shadow table{'s' * (k != 1)} left out)" if (k := len(shadow)) else "")
        + (
            f"; it names {k} user-defined routine{'s' * (k != 1)} (read them in the file)"
            if (k := len(schema.routines or ()))
            else ""
        )
        + f"\nnext: grid ask QUESTION {option} {source} --policy {out}\n"
    )
    return 0
