"""``grid check`` and ``grid compile`` (grid_sql.cli), through the ``grid`` command.

- ``grid check``: the two verdicts (the role's language, the SemanticChecker) on
  statements of the example policy, exit 0 only when both accept; violations
  carry their byte span and the text there; bad input is one line and exit 2.
  Once through a real process: ``uv run --frozen grid check``.
- ``grid compile``: one line per artifact, and the fingerprints are the ones an
  engine built independently reports (what an audit seal records); the reserve
  table's fingerprint is deterministic; a terminal gets a status line on stderr,
  a pipe nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from grid_core.cli import main
from grid_core.guide import Engine
from grid_core.trie import build_trie
from grid_core.vocab import cl100k
from grid_sql.cli import language_verdict
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import example_schema

REPO = Path(__file__).resolve().parents[3]


def grid(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    """``grid ARGV`` in process, through the entry points: (exit status, stdout lines, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


# ================================================================ grid check

IN_DEPARTMENTS = "in any table in scope (sources: departments)"
HEADER = {
    "analyst": "role analyst on company (sqlite; tables: departments, employees)",
    "clerk": "role clerk on company (sqlite; tables: orders, employees)",
    "intern": "role intern on company (sqlite; tables: departments)",
}


def test_check_accepts_a_granted_statement(capsys: pytest.CaptureFixture[str]) -> None:
    """Fails if a granted statement is refused, or the default role is not analyst."""
    code, lines, err = grid(["check", "SELECT name FROM employees WHERE dept_id = 1;"], capsys)
    assert (code, err) == (0, "")
    assert lines == [HEADER["analyst"], "language: in the role's language", "checker: accepted"]


def test_check_reads_a_missing_semicolon_like_the_checker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fails if ``grid check`` calls a statement without its ``;`` incomplete."""
    code, lines, _ = grid(["check", "SELECT count(*) FROM departments"], capsys)
    assert code == 0 and lines[1] == "language: in the role's language"


def test_check_quotes_each_violation_with_its_span(capsys: pytest.CaptureFixture[str]) -> None:
    """clerk may not read employees.hired, and ``*`` expands to it: exit 1, the span of ``*``."""
    code, lines, _ = grid(["check", "SELECT * FROM employees;", "--role", "clerk"], capsys)
    assert code == 1
    assert lines[:3] == [
        HEADER["clerk"],
        "language: in the role's language",
        "checker: REFUSED (1 violation)",
    ]
    assert lines[3].startswith("  bytes 7-8 `*`: column_not_granted: * expands to column hired")
    assert len(lines) == 4


def test_check_lists_every_violation_in_span_order(capsys: pytest.CaptureFixture[str]) -> None:
    """Two unknown names, each on its own line, in the order they occur; fails if one is
    dropped or the spans are not byte offsets into the statement."""
    sql = "SELECT hired, dept_id FROM departments;"
    code, lines, _ = grid(["check", sql, "--role", "analyst"], capsys)
    assert code == 1 and lines[2] == "checker: REFUSED (2 violations)"
    assert lines[3:] == [
        f"  bytes 7-12 `hired`: unknown_column: no column named hired {IN_DEPARTMENTS}",
        f"  bytes 14-21 `dept_id`: unknown_column: no column named dept_id {IN_DEPARTMENTS}",
    ]


@pytest.mark.parametrize(
    ("role", "sql", "verdict"),
    [
        pytest.param(
            "analyst",
            "DELETE FROM employees;",
            "language: leaves the role's language at byte 0 (`DELETE FROM employees;`)",
            id="verb",
        ),
        pytest.param(
            "intern",
            "SELECT d.name FROM departments d JOIN departments e ON d.id = e.id;",
            "language: leaves the role's language at byte 33 (`JOIN departments e ON d.`)",
            id="banned-clause",
        ),
    ],
)
def test_check_refuses_what_the_mask_would_never_produce(
    capsys: pytest.CaptureFixture[str], role: str, sql: str, verdict: str
) -> None:
    """The checker has no verb or clause policy; the language verdict does. Fails if a
    statement outside the role's language exits 0 or the first bad byte moves."""
    code, lines, _ = grid(["check", sql, "--role", role], capsys)
    assert code == 1 and lines[1] == verdict


def test_language_verdict_agrees_with_the_engine_prefix_by_prefix() -> None:
    """The offset is the first byte after which the statement is no viable prefix: every
    shorter prefix is one (complete or incomplete). Subqueries are banned for intern, and
    the space after ``(SELECT`` is what kills that lexeme (``SELECT`` could still begin a
    free identifier). Fails if ``language_verdict`` stops early or late."""
    schema = example_schema()
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants("intern", schema))
    projection = RoleProjection.compile(policy.role("intern"), SQLITE, words=lexicon.words)
    sql = b"SELECT name FROM departments WHERE budget > (SELECT 1);"

    def verdict(data: bytes) -> int | None:
        return language_verdict(projection, lexicon, SQLITE, data)

    bad = verdict(sql)
    assert bad == sql.index(b" 1);")
    assert all(verdict(sql[:k]) in (None, k) for k in range(bad + 1))
    assert verdict(sql[: bad + 1]) == bad
    assert verdict(b"SELECT name FROM") == len(b"SELECT name FROM")  # incomplete
    assert verdict(b"SELECT name FROM departments WHERE budget > (1)") is None


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _database(path: Path, ddl: str) -> Path:
    db = sqlite3.connect(path)
    try:
        db.executescript(ddl)
    finally:
        db.close()
    return path


EXAMPLE_POLICY = str(resources.files("grid_sql.examples").joinpath("company.policy.toml"))

BAD_CHECK = {
    "unknown-role": (["SELECT 1;", "--role", "janitor"], "no role 'janitor' in the policy"),
    "empty-role": (["SELECT 1;", "--role", ""], "no role '' in the policy"),
    "db-path-too-long": (
        ["SELECT 1;", "--db", "x" * 300, "--policy", EXAMPLE_POLICY],
        "File name too long: xxx",
    ),
    "missing-db": (
        ["SELECT 1;", "--db", "/nonexistent/x.sqlite", "--policy", EXAMPLE_POLICY],
        "no such file",
    ),
    "not-a-database": (
        ["SELECT 1;", "--db", "{db}", "--policy", EXAMPLE_POLICY],
        "file is not a database",
    ),
    "db-is-a-directory": (
        ["SELECT 1;", "--db", "/", "--policy", EXAMPLE_POLICY],
        "schema /: is a directory, not a database file",
    ),
    "db-is-a-device": (
        ["SELECT 1;", "--db", "/dev/null", "--policy", EXAMPLE_POLICY],
        "schema /dev/null: is not a regular file",
    ),
    "db-without-policy": (
        ["SELECT 1;", "--db", "{company}"],
        "needs --policy FILE (the example policy is for the example database only); write "
        "a starter policy with: grid policy init --db ",
    ),
    "schema-without-policy": (
        ["SELECT 1;", "--schema", "/nonexistent.json"],
        "--schema /nonexistent.json needs --policy FILE",
    ),
    "missing-policy": (["SELECT 1;", "--policy", "/nonexistent.toml"], "cannot read the file"),
    "policy-is-a-directory": (["SELECT 1;", "--policy", "/"], "cannot read the file"),
    "statement-too-long": (["SELECT " + "1+" * 50_000 + "1;"], "grid check reads at most 100000"),
    "not-utf-8": (["SELECT '\udcff';"], "SQL is not valid UTF-8 (byte 8 of the argument)"),
    "unknown-option": (["SELECT 1;", "--bogus"], "unrecognized arguments: --bogus"),
    "missing-value": (["SELECT 1;", "--role"], "argument --role: expected one argument"),
    "malformed-policy": (["SELECT 1;", "--policy", "{policy}"], "bad.policy.toml:1"),
    "policy-names-no-such-table": (
        ["SELECT 1;", "--policy", "{unknown-table}"],
        "unknown.policy.toml:4: roles.x.tables[0]",
    ),
    "dialect-of-another-schema": (
        ["SELECT 1;", "--db", "{company}", "--dialect", "postgres", "--policy", EXAMPLE_POLICY],
        "a sqlite schema cannot serve dialect postgres",
    ),
}


@pytest.mark.parametrize(("argv", "message"), list(BAD_CHECK.values()), ids=list(BAD_CHECK))
def test_check_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Fails if bad input exits other than 2, prints to stdout or more than one line."""
    paths = {
        "{policy}": _write(tmp_path / "bad.policy.toml", "roles = [unclosed\n"),
        "{unknown-table}": _write(
            tmp_path / "unknown.policy.toml",
            'version = 1\n[roles.x]\nverbs = ["SELECT"]\ntables = ["nowhere"]\n',
        ),
        "{db}": _write(tmp_path / "text.sqlite", "not a database\n" * 100),
        "{company}": str(_database(tmp_path / "company.sqlite", "CREATE TABLE t (a INTEGER);")),
    }
    code, lines, err = grid(["check", *(paths.get(a, a) for a in argv)], capsys)
    assert (code, lines) == (2, [])
    assert err.count("\n") == 1 and err.startswith(("grid check: error: ", "grid: error: ")), err
    assert message in err


def test_check_shows_a_catalog_name_with_a_newline_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table named with a newline (or a terminal escape) came out raw: the header
    and a violation split into two lines."""
    schema = tmp_path / "s.json"
    schema.write_text(
        '{"format": "grid.schema/1", "dialect": "sqlite", "name": "n", "tables": '
        '[{"name": "t\\nx\\u001b[2J", "columns": [{"name": "c", "type": "TEXT"}]}]}'
    )
    policy = _write(
        tmp_path / "p.toml", 'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\n'
    )
    code, lines, _ = grid(
        ["check", "SELECT c FROM nope;", "--schema", str(schema), "--policy", policy], capsys
    )
    assert code == 1
    assert lines[0] == "role r on n (sqlite; tables: t\\nx\\x1b[2J)"
    assert lines[-1].endswith("no table named nope; tables: t\\nx\\x1b[2J")
    assert len(lines) == 4


@pytest.mark.parametrize(
    ("sql", "language", "checker"),
    [
        (
            "SELEC name FROM employees;",
            "language: leaves the role's language at byte 5 (`name FROM employees;`)",
            "checker: outside the language at byte 0 (lexeme 'SELEC'; expected: DELETE, INSERT, "
            "REPLACE, SELECT, UPDATE, VALUES, WITH)",
        ),
        (
            "",
            "language: an incomplete statement of the role's language",
            "checker: outside the language at byte 0 (end of input; expected: DELETE, INSERT, "
            "REPLACE, SELECT, UPDATE, VALUES, WITH)",
        ),
        (
            "SELECT \x00\x01 FROM employees;",
            "language: leaves the role's language at byte 7 (`\\x00\\x01 FROM employees;`)",
            "checker: outside the language at byte 7 (lexeme '\\x00'; expected: ",
        ),
    ],
    ids=["misspelt-verb", "empty", "binary"],
)
def test_check_gives_both_verdicts_on_what_does_not_parse(
    capsys: pytest.CaptureFixture[str], sql: str, language: str, checker: str
) -> None:
    """A statement the checker's parser cannot read is outside the language at a byte:
    both verdicts, exit 1 (never exit 2, which is for bad input)."""
    code, lines, err = grid(["check", sql], capsys)
    assert (code, err) == (1, "")
    assert lines[0] == HEADER["analyst"] and lines[1] == language
    assert lines[2].startswith(checker) and len(lines) == 3


def test_check_reads_deep_expressions_and_refuses_too_deep_nesting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """1,000 and 20,000 terms of ``1+1+...`` (a RecursionError once), 2,000 parentheses:
    both verdicts accept; 300 nested SELECTs: the checker refuses, one line, exit 1."""
    for sql in (
        "SELECT " + "+".join(["1"] * 1000) + ";",
        "SELECT " + "+".join(["1"] * 20_000) + ";",
        "SELECT " + "(" * 2000 + "1" + ")" * 2000 + ";",
    ):
        code, lines, err = grid(["check", sql], capsys)
        assert (code, err) == (0, "")
        assert lines[1:] == ["language: in the role's language", "checker: accepted"]
    nested = "SELECT " + "(SELECT " * 300 + "1" + ")" * 300 + ";"
    code, lines, err = grid(["check", nested], capsys)
    assert (code, err) == (1, "")
    assert lines[2].startswith("checker: REFUSED (the statement (")
    assert "nests too deeply for the checker to read" in lines[2] and len(lines) == 3


def test_check_into_a_closed_pipe_is_quiet() -> None:
    """``grid check ... | head``: the reader is gone before the output is written. No
    traceback, no 'Exception ignored' at exit, exit 141 (as a process killed by SIGPIPE)."""
    code = "import sys; from grid_core.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, "check", "SELECT * FROM employees", "--role", "clerk"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 141 and err == ""


def test_check_reads_a_database_and_a_schema_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--db`` and ``--schema`` replace the example schema; fails if either is ignored."""
    db = _database(
        tmp_path / "shop.sqlite",
        "CREATE TABLE departments (id, name, budget);"
        "CREATE TABLE employees (id, name, dept_id, hired);"
        "CREATE TABLE orders (id, employee_id, total, placed, note);",
    )
    argv = ["check", "SELECT note FROM orders;", "--role", "clerk", "--policy", EXAMPLE_POLICY]
    code, lines, _ = grid([*argv, "--db", str(db)], capsys)
    assert code == 0 and lines[0] == "role clerk on shop (sqlite; tables: orders, employees)"
    snapshot = tmp_path / "company.json"
    example_schema().save(snapshot)
    code, lines, _ = grid([*argv, "--schema", str(snapshot)], capsys)
    assert code == 1 and "unknown_column: no column named note" in lines[3]


def test_grid_check_as_a_command() -> None:
    """The installed ``grid`` command (``uv run --frozen grid check``) registers ``check``
    through grid-sql's entry point; fails if it is not registered or exits 0 on a violation."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    out = subprocess.run(
        [uv, "run", "--frozen", "grid", "check", "SELECT * FROM employees", "--role", "clerk"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=600,
    )
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines()[2:] == [
        "checker: REFUSED (1 violation)",
        "  bytes 7-8 `*`: column_not_granted: * expands to column hired of employees, which is "
        "not granted to role clerk; granted: id, name, dept_id; list granted columns instead",
    ]


# ================================================================ grid compile


def _columns(lines: list[str]) -> dict[str, tuple[str, str]]:
    """artifact name -> (fingerprint, detail), from the fixed-width artifact lines."""
    table = {}
    for line in lines[2:-1]:
        name, fp, seconds, detail = line[:22].strip(), line[23:55].strip(), line[56:64], line[66:]
        assert seconds.strip() == "-" or float(seconds) >= 0, line
        table[name] = (fp, detail)
    return table


def test_compile_prints_the_fingerprints_an_engine_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fails if a printed fingerprint differs from the engine's own (the seal's) or a role's
    artifact line is missing."""
    code, lines, err = grid(["compile", "--vocab", "cl100k", "--role", "clerk"], capsys)
    assert (code, err) == (0, "")  # stderr is not a terminal: no status line
    assert lines[0] == (
        "dialect sqlite; schema company (4 relations); policy "
        "grid_sql/examples/company.policy.toml (4 roles); tokenizer cl100k"
    )
    assert lines[1].split() == ["artifact", "fingerprint", "seconds", "detail"]
    assert lines[-1].startswith("total ")
    table = _columns(lines)
    expected = [
        "schema", "policy", "grammar", "dfa", "tokenizer", "trie",
        "clerk lexicon", "clerk projection", "clerk lalr", "clerk engine", "clerk reserve",
    ]  # fmt: skip
    assert list(table) == expected

    schema = example_schema()
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants("clerk", schema))
    projection = RoleProjection.compile(policy.role("clerk"), SQLITE, words=lexicon.words)
    vocab = cl100k()
    engine = Engine(projection.grammar, vocab, lexicon.lexicon, dfa=dialect_dfa(SQLITE))
    seal = engine.fingerprints()
    assert table["clerk projection"][0] == seal["grammar"]
    assert table["clerk lalr"][0] == seal["tables"]
    assert table["clerk lexicon"][0] == seal["lexicon"]
    assert table["dfa"][0] == seal["dfa"]
    assert table["tokenizer"][0] == seal["tokenizer"]
    assert table["trie"][0] == build_trie(vocab).fingerprint == seal["trie"]
    assert table["schema"][0] == schema.fingerprint
    assert table["policy"][0] == policy.fingerprint
    rules = len(projection.grammar.rules)
    assert table["clerk projection"][1] == f"{rules} rules (INSERT, SELECT, UPDATE)"
    assert table["clerk reserve"][1].startswith("shortest statement: ")


def test_compile_is_deterministic_and_covers_every_role(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every role by default; the same inputs give the same fingerprints twice (the reserve
    table's included); fails on a missing role or a fingerprint that drifts."""
    runs = []
    for _ in range(2):
        code, lines, _ = grid(["compile", "--vocab", "cl100k"], capsys)
        assert code == 0
        runs.append({n: fp for n, (fp, _) in _columns(lines).items()})
    assert runs[0] == runs[1]
    roles = {name.split()[0] for name in runs[0] if " " in name}
    assert roles == {"analyst", "clerk", "admin", "intern"}
    reserves = {runs[0][f"{r} reserve"] for r in roles}
    assert len(reserves) == 4 and all(len(fp) == 32 for fp in reserves)


def test_compile_postgres(capsys: pytest.CaptureFixture[str]) -> None:
    """The example schema in the PostgreSQL dialect; fails if the dialect is not applied."""
    argv = ["compile", "--dialect", "postgres", "--role", "intern", "--vocab", "cl100k"]
    code, lines, _ = grid(argv, capsys)
    assert code == 0 and lines[0].startswith("dialect postgres;")
    assert _columns(lines)["grammar"][1].startswith("L1 postgres: ")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_compile_shows_a_status_line_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a terminal stderr names each artifact while it builds and clears the line; stdout
    stays plain lines. Fails if the status leaks into stdout or is never cleared."""
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code = main(["compile", "--vocab", "cl100k", "--role", "intern"])
    out = capsys.readouterr().out
    status = terminal.getvalue()
    assert code == 0 and "\033" not in out and "building" not in out
    assert "\r\033[Kbuilding the token trie ..." in status
    assert "\r\033[Kbuilding intern: reserve table ..." in status
    assert status.endswith("\r\033[K") and "\n" not in status


def test_compile_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown role is one line and exit 2; fails if compile builds anything first."""
    code, lines, err = grid(["compile", "--role", "janitor"], capsys)
    assert (code, lines) == (2, [])
    roles = "admin, analyst, clerk, intern"
    assert err == f"grid compile: error: no role 'janitor' in the policy; roles: {roles}\n"
