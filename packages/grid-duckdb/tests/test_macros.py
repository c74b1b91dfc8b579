"""DuckDB macros are routines a statement runs by the names it writes.

DuckDB binds a macro before the built-in function or operator it is named
like, so a role granted one table can read another through a macro the file
defines. The snapshot lists the file's macros (`SchemaSnapshot.routines`) and
the policy refuses a role that does not name each one (`routines`).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_duckdb.database import run_readonly
from grid_duckdb.schema import snapshot, snapshot_connection
from grid_sql.checker import SemanticChecker
from grid_sql.limits import Limits
from grid_sql.policy import PolicyBundle, PolicyReferenceError
from grid_sql.schema import Routine, SchemaSnapshot

TABLES = """
CREATE TABLE t (x VARCHAR, n INTEGER);
INSERT INTO t VALUES ('a', 1);
CREATE TABLE salaries (secret VARCHAR);
INSERT INTO salaries VALUES ('TOPSECRET');
"""
# Each macro shadows what a statement of a role granted only `t` writes.
MACROS = {
    "lower": "CREATE MACRO lower(x) AS (SELECT max(secret) FROM salaries)",
    "+": 'CREATE MACRO "+"(a, b) AS (SELECT max(secret) FROM salaries)',
    "~~": 'CREATE MACRO "~~"(a, b) AS (SELECT max(secret) FROM salaries) IS NOT NULL',
    "date_part": "CREATE MACRO date_part(a, b) AS (SELECT max(secret) FROM salaries)",
}
# What a role granted only `t` writes, the macro DuckDB runs for it, and the rows
# it gets then (`x LIKE 'b'` holds for 'a': the macro read `salaries`).
REACHED = (
    ("SELECT lower(x) FROM t;", "lower", [("TOPSECRET",)]),
    ("SELECT n + 1 FROM t;", "+", [("TOPSECRET",)]),
    ("SELECT x FROM t WHERE x LIKE 'b';", "~~", [("a",)]),
    ("SELECT EXTRACT(YEAR FROM DATE '2020-01-01') FROM t;", "date_part", [("TOPSECRET",)]),
)


def database(path: Path, *macros: str) -> Path:
    db = duckdb.connect(str(path))
    db.execute(TABLES)
    for name in macros:
        db.execute(MACROS[name])
    db.close()
    return path


def policy(role: str, schema: SchemaSnapshot) -> PolicyBundle:
    return PolicyBundle.loads(f"version = 1\n[roles.r]\n{role}\n", "p.toml", schema)


READER = 'verbs = ["SELECT"]\ntables = ["t"]'


@pytest.mark.parametrize(("sql", "macro", "rows"), REACHED)
def test_a_macro_reads_past_the_grants(
    tmp_path: Path, sql: str, macro: str, rows: list[tuple[str]]
) -> None:
    """The hole, run: the statement is the role's (the checker accepts it) and what
    DuckDB runs reads `salaries`, which the role is not granted."""
    path = database(tmp_path / "m.duckdb", macro)
    plain = database(tmp_path / "plain.duckdb")
    grants = policy(READER, snapshot(plain)).column_grants(snapshot(plain))
    assert SemanticChecker.for_schema(snapshot(plain), grants).check(sql, "r") == []
    assert run_readonly(plain, sql, Limits(), 5).rows != rows
    assert run_readonly(path, sql, Limits(), 5).rows == rows
    s = snapshot(path)
    assert s.routines == (Routine(f"main.{macro}", "macro", macro),)
    with pytest.raises(PolicyReferenceError, match=re.escape(f"macro main.{macro}. Name each")):
        policy(READER, s)


def test_the_snapshot_lists_every_macro(tmp_path: Path) -> None:
    """Every macro of the file, in any schema, scalar or table macro, and a
    connection's TEMP macros; DuckDB's own functions are not routines."""
    path = database(tmp_path / "m.duckdb", *MACROS)
    db = duckdb.connect(str(path))
    db.execute("CREATE SCHEMA other")
    db.execute("CREATE MACRO other.upper(x) AS 1")
    db.execute("CREATE MACRO rows_of() AS TABLE SELECT * FROM salaries")
    db.execute("CREATE TEMP MACRO abs(x) AS 42")
    live = snapshot_connection(db)
    db.close()
    names = {"main.lower", "main.+", "main.~~", "main.date_part", "other.upper", "main.rows_of"}
    assert {r.name for r in live.routines or ()} == names | {"temp.main.abs"}
    assert {r.name for r in snapshot(path).routines or ()} == names  # TEMP is gone
    assert snapshot(database(tmp_path / "plain.duckdb")).routines == ()
    assert SchemaSnapshot.from_json(live.to_json()).routines == live.routines


def test_a_role_names_the_macros_it_may_run(tmp_path: Path) -> None:
    s = snapshot(database(tmp_path / "m.duckdb", "lower", "+"))
    with pytest.raises(PolicyReferenceError, match=r"has 2 user-defined routines") as e:
        policy(READER, s)
    assert e.value.line == 2 and e.value.field == "roles.r.routines"
    with pytest.raises(PolicyReferenceError, match=r"macro main\.\+\. Name each"):
        policy(READER + '\nroutines = ["lower"]', s)
    policy(READER + '\nroutines = ["LOWER", "main.+"]', s)  # DuckDB folds case
    policy(READER + '\nroutines = "*"', s)
    with pytest.raises(PolicyReferenceError, match="no user-defined routine 'upper'") as e:
        policy(READER + '\nroutines = ["lower", "upper"]', s)
    assert e.value.line == 5
    # A macro stays in reach when the role is not granted the function it is named
    # like: DuckDB binds syntax to names (EXTRACT is date_part).
    with pytest.raises(PolicyReferenceError, match=r"macro main\.lower\. Name each"):
        policy(READER + '\nfunctions = ["upper"]\nroutines = ["+"]', s)


def test_the_cli_refuses_the_role(tmp_path: Path) -> None:
    """`grid check` (and so `grid ask`) refuses the policy before any statement runs;
    `grid policy init` lists the macros, so its starter names them for review."""
    from grid_core import cli

    path = database(tmp_path / "m.duckdb", "lower")
    given = tmp_path / "given.policy.toml"
    given.write_text(f"version = 1\n[roles.reader]\n{READER}\n", encoding="utf-8")
    args = ["--db", str(path), "--policy", str(given), "--role", "reader"]
    assert cli.main(["check", "SELECT lower(x) FROM t;", *args]) == 2
    starter = tmp_path / "m.policy.toml"
    assert cli.main(["policy", "init", "--db", str(path), "--out", str(starter)]) == 0
    assert '"main.lower",  # macro' in starter.read_text(encoding="utf-8")
    args = ["--db", str(path), "--policy", str(starter)]
    assert cli.main(["check", "SELECT lower(x) FROM t;", *args]) == 0


# Names a macro may take: function words of the dialect, operators DuckDB binds to
# functions, and names only quoting can write.
_NAMES = ("lower", "upper", "abs", "round", "+", "-", "~~", "||", "date_part", 'we"ird', "ü x")


@settings(max_examples=25, deadline=None)
@given(
    macros=st.sets(st.sampled_from(_NAMES), max_size=5),
    named=st.sets(st.sampled_from(_NAMES), max_size=5),
)
def test_a_role_passes_exactly_when_it_names_every_macro(macros: set[str], named: set[str]) -> None:
    """Random macros on a live DuckDB: the snapshot lists exactly them, and a role
    passes exactly when it names each (by word) and names nothing else."""
    db = duckdb.connect()
    db.execute(TABLES)
    for name in macros:
        quoted = '"' + name.replace('"', '""') + '"'
        db.execute(f"CREATE MACRO {quoted}(a, b) AS 1")
    s = snapshot_connection(db, name="m")
    db.close()
    assert {r.word for r in s.routines or ()} == macros
    assert {r.name for r in s.routines or ()} == {f"main.{m}" for m in macros}
    listed = ", ".join('"' + n.replace("\\", "\\\\").replace('"', '\\"') + '"' for n in named)
    role = f"{READER}\nroutines = [{listed}]"
    if named == macros:
        policy(role, s)
    else:
        with pytest.raises(PolicyReferenceError, match="user-defined routine"):
            policy(role, s)
