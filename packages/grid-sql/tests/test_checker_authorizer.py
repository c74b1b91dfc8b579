"""The SemanticChecker against SQLite's own account of what a statement reads.

SQLite's authorizer reports every column a statement reads (``SQLITE_READ``) as it
compiles it: the oracle here. For each statement of
``fixtures/authorizer/statements.sql`` (a red-team corpus: CTE bodies read where
they are used, ``q.*`` over two sources named ``q``, result aliases named
``rowid``, a WITHOUT ROWID table passing ``rowid`` outward, SQLite's ``TRUE`` and
``FALSE`` reading columns so named, named windows, quoting, NATURAL/USING, ...),
the checker may accept it only if SQLite compiles it and reads no column the role
is denied. A refusal is never wrong here (the checker may be stricter than
SQLite); an acceptance of a denied read is a hole. Reads inside the view ``v_emp``
are the view's (a view is checked as a table).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.checker import SemanticChecker, StatementParseError
from grid_sql.policy import PolicyBundle
from grid_sql.schema import SchemaSnapshot

HERE = Path(__file__).parent / "fixtures" / "authorizer"
ROLE = "r"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("authorizer") / "db.sqlite"
    with sqlite3.connect(path) as con:
        con.executescript((HERE / "schema.sql").read_text())
    con.close()
    return path


def statements() -> list[str]:
    lines = (HERE / "statements.sql").read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("--")]


def denied_reads(path: Path, sql: str, granted: dict[str, set[str] | None]) -> set[str]:
    """The columns SQLite reads compiling ``sql`` that the grants deny ("table.column");
    raises ``sqlite3.Error`` when SQLite refuses it."""
    reads: set[tuple[str, str, str | None]] = set()

    def authorize(
        action: int, a1: str | None, a2: str | None, db: str | None, inner: str | None
    ) -> int:
        if action == sqlite3.SQLITE_READ and a1 and a2:
            reads.add((a1, a2, inner))
        return sqlite3.SQLITE_OK

    con = sqlite3.connect(path)
    try:
        con.set_authorizer(authorize)
        con.execute("EXPLAIN " + sql).fetchall()
    finally:
        con.close()
    out = set()
    for table, column, inner in reads:
        if inner == "v_emp" or table == "sqlite_master":
            continue
        allowed = granted.get(table.lower(), set())
        if allowed is not None and column.lower() not in allowed:
            out.add(f"{table}.{column}")
    return out


def test_the_checker_accepts_no_statement_that_reads_a_denied_column(database: Path) -> None:
    schema = SchemaSnapshot.from_sqlite(database)
    policy = PolicyBundle.load(HERE / "policy.toml", schema)
    grants = policy.column_grants(schema)
    checker = SemanticChecker.for_schema(schema, grants)
    granted = {
        t.lower(): None if cols is None else {c.lower() for c in cols}
        for t, cols in grants[ROLE].items()
    }
    holes, accepted, refused = [], 0, 0
    for sql in statements():
        try:
            violations = checker.check(sql, ROLE)
        except StatementParseError:
            continue  # not in the dialect's language: never run
        if violations:
            refused += 1
            continue
        accepted += 1
        try:
            leaked = denied_reads(database, sql, granted)
        except sqlite3.Error:
            continue  # SQLite refuses it: it reads nothing
        if leaked:
            holes.append(f"{sql}  reads {sorted(leaked)}")
    assert not holes, "the checker accepts denied reads:\n" + "\n".join(holes)
    # the corpus exercises both sides: statements it must refuse, and ones it accepts
    assert accepted >= 20 and refused >= 100, (accepted, refused)
