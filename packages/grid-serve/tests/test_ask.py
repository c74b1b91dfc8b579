"""``grid ask``: bad input fails fast with one line and exit 2; a real run prints SQL,
verdict, rows and a sealed audit log; a refused statement gets one constrained retry
(the repair pass of ``grid_serve.text2sql.answer``), with the real model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from grid_core.audit import verify_file
from grid_core.cli import main as grid
from grid_core.decode import Generation
from grid_core.decode import decode as decode_loop
from grid_core.guide import Engine
from grid_core.replay import replay as replay_lines
from grid_core.replay import replay_file
from grid_serve import ask, text2sql
from grid_sql.checker import ViolationKind
from grid_sql.policy import PolicyBundle
from grid_sql.schema import SchemaSnapshot

Q = "How many employees are there?"
EXAMPLE_POLICY = str(resources.files("grid_sql.examples").joinpath("company.policy.toml"))
BAD_INPUT = {
    "missing-db": (
        [Q, "--db", "/nonexistent/x.sqlite", "--policy", EXAMPLE_POLICY],
        "no such file",
    ),
    "not-a-database": ([Q, "--db", "{policy}", "--policy", EXAMPLE_POLICY], "not a database"),
    "db-without-policy": (
        [Q, "--db", "/nonexistent/x.sqlite"],
        "--db /nonexistent/x.sqlite needs --policy FILE (the example policy is for the example "
        "database only); write a starter policy with: grid policy init --db /nonexistent/x.sqlite",
    ),
    "unknown-role": ([Q, "--role", "janitor"], "no role 'janitor' in the policy"),
    "malformed-policy": ([Q, "--policy", "{policy}"], "policy.toml:1"),
    "missing-policy": ([Q, "--policy", "/nonexistent.toml"], "cannot read the file"),
    "non-positive-budget": ([Q, "--max-tokens", "0"], "argument --max-tokens: must be in [1, "),
    "budget-over-the-cap": ([Q, "--max-tokens", "99999"], "must be in [1, 4096], not 99999"),
    "negative-sample-rows": ([Q, "--sample-rows", "-1"], "argument --sample-rows: must be in [0, "),
    "budget-not-a-number": ([Q, "--max-tokens", "ten"], "--max-tokens: not an integer: 'ten'"),
    "negative-temperature": ([Q, "--temperature", "-1"], "--temperature: must be a finite"),
    "nan-temperature": ([Q, "--temperature", "nan"], "must be a finite number >= 0, not nan"),
    "low-penalty": ([Q, "--repetition-penalty", "0.5"], "must be a finite number >= 1, not 0.5"),
    "word-penalty": ([Q, "--repetition-penalty", "lots"], "--repetition-penalty: not a number"),
    "zero-threads": ([Q, "--threads", "0"], "argument --threads: must be in [1, 1024], not 0"),
    "negative-max-rows": ([Q, "--max-rows", "-1"], "argument --max-rows: must be in [0, "),
    "zero-wall-time": ([Q, "--limit-wall-time", "0"], "--limit-wall-time: must be a number of"),
    "zero-row-limit": ([Q, "--limit-rows", "0"], "--limit-rows: must be an integer in [1, "),
    "bad-byte-limit": ([Q, "--limit-result-bytes", "1e6"], "not an integer: '1e6'"),
    "bad-memory-limit": ([Q, "--limit-memory", "-5"], "--limit-memory: must be an integer in"),
    "empty-question": ([" "], "the question is empty"),
    "long-question": (["x" * 4001], "the question is 4001 characters; grid ask takes at most"),
    "binary-question": (["\x01\x02\x7f"], "the question holds control character U+0001"),
    "missing-model": ([Q, "--model", "/nonexistent/m.gguf"], "no model at /nonexistent/m.gguf"),
    "audit-is-a-directory": ([Q, "--audit", "/"], "--audit / is a directory"),
    "audit-in-no-directory": ([Q, "--audit", "/nonexistent/a.jsonl"], "no directory /nonexistent"),
    "events-is-a-directory": ([Q, "--events", "/"], "--events / is a directory"),
    "events-in-no-directory": ([Q, "--events", "/nonexistent/e"], "no directory /nonexistent"),
    "audit-unwritable": ([Q, "--audit", "/proc/a.jsonl"], "--audit /proc/a.jsonl: the file cannot"),
    "events-unwritable": ([Q, "--events", "/proc/e.jsonl"], "--events /proc/e.jsonl: the file"),
    "empty-role": ([Q, "--role", ""], "no role '' in the policy"),
    "path-too-long": ([Q, "--audit", "x" * 300], "File name too long"),
    "unknown-option": ([Q, "--temprature", "1"], "unrecognized arguments: --temprature 1"),
    "from-first-with-events": (
        [Q, "--language", "from-first", "--events", "-"],
        "--events is not offered with --language from-first",
    ),
    "missing-examples": ([Q, "--examples", "/nonexistent/e.jsonl"], "examples file /nonexist"),
    "malformed-examples": ([Q, "--examples", "{policy}"], "policy.toml:1: not JSON"),
    "from-first-with-examples": (
        [Q, "--language", "from-first", "--examples", "/nonexistent/e.jsonl"],
        "--examples is not offered with --language from-first",
    ),
    "from-first-writer-role": (
        [Q, "--language", "from-first", "--role", "clerk"],
        "--language from-first: role 'clerk' may do more than SELECT",
    ),
    "unknown-language": ([Q, "--language", "narrow"], "--language: invalid choice: 'narrow'"),
    "covering-writer-role": (
        [Q, "--language", "covering", "--role", "clerk"],
        "--language covering: role 'clerk' may do more than SELECT",
    ),
    "covering-empty-table": (
        [Q, "--language", "covering", "--policy", "{empty}"],
        "--language covering: role 'analyst' has tables without a granted column: departments",
    ),
}


#: A policy whose analyst is granted a table with no column.
EMPTY_TABLE = """version = 1
[roles.analyst]
verbs = ["SELECT"]
tables = ["departments", "employees"]
columns.departments = []
"""


def run_ask(argv: list[str]) -> tuple[int, str, str]:
    """``python -m grid_serve.ask ARGV`` in a subprocess: (exit status, stdout, stderr)."""
    out = subprocess.run(
        [sys.executable, "-m", "grid_serve.ask", *argv], capture_output=True, text=True
    )
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize(("argv", "message"), list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    policy, empty = tmp_path / "policy.toml", tmp_path / "empty.toml"
    policy.write_text("roles = [unclosed\n")
    empty.write_text(EMPTY_TABLE)
    files = {"{policy}": str(policy), "{empty}": str(empty)}
    code, stdout, stderr = run_ask([files.get(a, a) for a in argv])
    assert code == 2
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("grid ask: error: ", "grid: error: "))
    assert message in lines[0]


def test_a_question_that_is_not_utf_8_is_one_line() -> None:
    """Argument bytes that are not UTF-8 (a real process's argv, not a str)."""
    out = subprocess.run(
        [sys.executable.encode(), b"-m", b"grid_serve.ask", b"caf\xe9 \xff?"],
        capture_output=True,
    )
    assert (out.returncode, out.stdout) == (2, b"")
    assert out.stderr == (
        b"grid ask: error: QUESTION is not valid UTF-8 (byte 3 of the argument)\n"
    )


def test_limits_come_from_the_policy_and_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role's limits from the policy file, each overridden by its --limit-* option."""
    from grid_core.cli import Parser
    from grid_sql.limits import Limits

    policy = tmp_path / "p.toml"
    policy.write_text(
        Path(EXAMPLE_POLICY).read_text()
        + "\n[limits]\nmax_rows = 10\n[roles.x]\nverbs = ['SELECT']\ntables = '*'\n"
        + "limits.wall_time = 1.5\n"
    )
    parser = Parser(prog="grid")
    ask.ask_command(parser.add_subparsers(dest="command"))

    def limits(*argv: str) -> Limits:
        args = parser.parse_args(["ask", "q?", "--policy", str(policy), *argv])
        return ask.inputs(args, tmp_path).limits

    monkeypatch.setattr(ask, "require_framework", lambda: None)  # torch or not

    assert limits() == Limits(max_rows=10)
    assert limits("--role", "x") == Limits(wall_time=1.5, max_rows=10)
    assert limits("--role", "x", "--limit-rows", "7", "--limit-memory", "1000000") == Limits(
        wall_time=1.5, max_rows=7, max_memory=1_000_000
    )
    assert limits("--limit-wall-time", "0.25", "--limit-result-bytes", "99") == Limits(
        wall_time=0.25, max_rows=10, max_result_bytes=99
    )


def test_the_default_language_is_covering_where_it_serves_the_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--language auto`` (the default) picks the covering language for a SELECT-only
    role granted a column of each table whose policy keeps the narrow generation
    profile (``--events`` included: the covering guide streams them); otherwise the
    role's own language, the reason naming what ruled covering out. A named language
    is taken as named."""
    from grid_core.cli import Parser

    policy, empty = tmp_path / "p.toml", tmp_path / "empty.toml"
    policy.write_text(Path(EXAMPLE_POLICY).read_text() + '\ngeneration = "full"\n')  # intern's
    empty.write_text(EMPTY_TABLE)
    parser = Parser(prog="grid")
    ask.ask_command(parser.add_subparsers(dest="command"))
    monkeypatch.setattr(ask, "require_framework", lambda: None)  # torch or not

    def language(*argv: str) -> tuple[str, str]:
        given = ask.inputs(parser.parse_args(["ask", "q?", *argv]), tmp_path)
        return given.language, given.why

    covering = ("covering", "the role may only SELECT and is granted a column of each table")
    assert language() == language("--role", "intern") == covering
    assert language("--role", "clerk") == (
        "role",
        "no covering language: role 'clerk' may do more than SELECT; the column scope is "
        "for SELECT-only roles",
    )
    assert language("--role", "admin")[0] == "role"
    assert language("--events", "-") == covering  # the covering guide streams events too
    assert language("--policy", str(empty)) == (
        "role",
        "no covering language: role 'analyst' has tables without a granted column: departments",
    )
    assert language("--policy", str(policy)) == covering
    assert language("--policy", str(policy), "--role", "intern") == (
        "role",
        "role 'intern' decodes in its whole language (generation = \"full\")",
    )
    for named in text2sql.LANGUAGES:
        assert language("--language", named) == (named, f"--language {named}")
    assert language("--role", "clerk", "--language", "role")[0] == "role"


@pytest.mark.parametrize(
    "argv",
    [["--role", "janitor"], ["--temperature", "-1"], ["--limit-rows", "0"], ["--db", "x.db"]],
)
def test_bad_input_never_loads_torch(argv: list[str]) -> None:
    code = (
        "import sys; from grid_serve import ask\n"
        f"rc = ask.main(['q', *{argv!r}, '--quiet'])\n"
        "print(rc, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["2", "False"]


def test_ask_registers_a_subcommand() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="grid")
    ask.ask_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ask", "q?", "--role", "clerk", "--max-tokens", "40"])
    assert (args.question, args.role, args.max_tokens, args.db) == ("q?", "clerk", 40, None)
    assert args.func is not None and args.no_repair is False
    assert parser.parse_args(["ask", "q?", "--no-repair"]).no_repair is True


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
@pytest.mark.parametrize("language", ["covering", "role"])
def test_ask_events_are_the_statements_parse_events(
    lm: Any,
    engines: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
) -> None:
    """``--events FILE``: one JSON line an event, each attempt's stream equal to the
    post-hoc events of the statement it wrote, its tables resolved with the grant; in
    the covering language (the default) those of the covering grammar
    (``ScopedEngines.tracking_engine``), in the role's those of its own."""
    import grid_serve.model
    from grid_core.events import tracker
    from grid_sql.dialects import get_dialect
    from grid_sql.events import event_spec

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    events = tmp_path / "events.jsonl"
    argv = ["How many departments are there?", "--quiet", "--no-repair", "--events", str(events)]
    named = [] if language == "covering" else ["--language", language]
    ask.main([*argv, *named, "--audit", str(tmp_path / "audit.jsonl")])
    assert capsys.readouterr().out.splitlines()[0].endswith(f"; language {language}")
    seal = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["language"] == language
    statement = seal["mode"]["statement"].encode()  # the statement as written, every line
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines and all(line["attempt"] == 0 for line in lines)
    assert lines[-1]["kind"] == "statement" and lines[-1]["complete"] is True
    written = [(line["kind"], line["name"], line["start"], line["end"]) for line in lines]
    tables = [line for line in lines if line["kind"] == "table"]
    assert tables and all(t["granted"] is True for t in tables)
    assert all(statement[line["start"] : line["end"]].decode() == line["text"] for line in lines)
    if language == "covering":
        engine = engines.scoped("analyst", covering=True).tracking_engine()
    else:
        engine = engines["analyst"].engine
    spec = event_spec(get_dialect(text2sql.DIALECT), engine.grammar)
    assert written == [e.key for e in tracker(engine, spec).parse(statement)]


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_ask_end_to_end_on_the_defaults(
    lm: Any,
    engines: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped defaults (example database and policy, SmolLM2: the session's model):
    analyst writes in the covering language, on the native guide and reserve when
    grid-kernels is installed, and the log replays against a fresh covering guide."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    if importlib.util.find_spec("grid_kernels") is not None:
        from grid_core import decode
        from grid_core.guide import GridGuide
        from grid_sql.column_scope import ScopedGuide, ScopedReserve

        def python_guide(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("grid ask ran on the Python guide with grid-kernels installed")

        monkeypatch.setattr(GridGuide, "__init__", python_guide)

        def python_reserve(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("grid ask read the reserve in Python with grid-kernels installed")

        monkeypatch.setattr(decode.EngineReserve, "__init__", python_reserve)
        monkeypatch.setattr(ScopedGuide, "__init__", python_guide)
        monkeypatch.setattr(ScopedReserve, "__init__", python_reserve)
    log = tmp_path / "audit.jsonl"
    code = ask.main(["How many departments are there?", "--audit", str(log)])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("-- role analyst on company.sqlite")
    assert lines[0].endswith("; language covering")
    assert "language covering: the role may only SELECT and is granted a column of each" in err
    end = next(i for i, line in enumerate(lines) if line.startswith("checker: "))
    statement = "\n".join(lines[1:end])  # the statement, on as many lines as it was written
    assert statement.rstrip().endswith(";")
    if lines[end] == "checker: accepted":
        assert "repair: not engaged (the checker accepted the statement)" in lines
    else:  # SmolLM2 answers `SELECT DISTINCT MAX(dept_id) ... FROM departments;` (greedy)
        assert any(line.startswith("repair: engaged: ") for line in lines)
        assert verify_file(tmp_path / "audit.retry.jsonl").ok
    final = [line for line in lines if line.startswith("checker: ")][-1]
    ran = any(line.endswith(" row)") or line.endswith(" rows)") for line in lines)
    assert (code == 0) == (final == "checker: accepted" and ran)
    assert any(line.startswith(f"audit: {log} (") for line in lines)
    assert verify_file(log).ok
    seal = json.loads(log.read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["mode"] == 1 and seal["stop_reason"] in ("eos", "reserve", "exit")
    # The seal records the outcome: role, the question's hash, the statement, the
    # checker's verdict and how it ran (each decode's log, whatever happened after it).
    mode = seal["mode"]
    question = hashlib.blake2b(b"How many departments are there?", digest_size=16).hexdigest()
    assert (mode["role"], mode["question_blake2b"]) == ("analyst", question)
    assert mode["language"] == "covering" and "column_scope" in seal["fingerprints"]
    covering = engines.scoped("analyst", covering=True)
    assert replay_file(log, covering.base, guide=covering.guide(audit=False)).ok
    assert grid(["audit", "replay", str(log), "--vocab", "smollm2"]) == 0  # from the seal
    assert mode["statement"].strip() == statement.strip()
    assert mode["verdict"] == "accepted" or mode["verdict"].startswith("refused: ")
    final_run = json.loads(
        (log if lines[end] == "checker: accepted" else tmp_path / "audit.retry.jsonl")
        .read_text()
        .splitlines()[-1]
    )["seal"]["mode"]["run"]
    assert final_run.startswith("ok: ") == ran
    assert final_run.startswith(("ok: ", "not run", "sqlite refused: ", "stopped: "))
    assert "generating (budget 96 tokens)" in err  # progress, plain lines (not a terminal)
    assert "not byte-complete" in err
    # the time from the command to the first output token, on the first decode's line
    (first,) = re.findall(r"stop: \w+ \(first token (\d+\.\d)s after the command\), ", err)
    assert 0 < float(first) < 600


def ask_scoped(
    lm: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
) -> tuple[int, list[str], dict[str, Any], Path]:
    """``grid ask --language LANGUAGE`` (a column-scoped one) on the example database:
    (exit status, stdout lines, the seal, the log's path), after the checks both
    languages share: a retry log exactly when the repair pass engaged, exit 0 or 1,
    the language and the column scope's fingerprint in the seal."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    log = tmp_path / "audit.jsonl"
    question = "How many employees are in each department?"
    code = ask.main([question, "--language", language, "--audit", str(log)])
    lines = capsys.readouterr().out.splitlines()
    engaged = any(line.startswith("repair: engaged") for line in lines)
    assert (tmp_path / "audit.retry.jsonl").exists() == engaged
    assert code in (0, 1)
    seal: dict[str, Any] = json.loads(log.read_text().splitlines()[-1])["seal"]
    assert "column_scope" in seal["fingerprints"]
    assert seal["mode"]["language"] == language and lines[0].endswith(f"; language {language}")
    return code, lines, seal, log


def test_ask_from_first_end_to_end(
    lm: Any,
    engines: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--language from-first``: the statement is decoded FROM-first under the role's scoped
    guide (column policy in the mask), printed as decoded and as it runs (rewritten
    SELECT-first), judged by the checker, never repaired; its sealed log carries the
    column scope's fingerprint and replays against a fresh scoped guide."""
    _code, lines, seal, log = ask_scoped(lm, tmp_path, monkeypatch, capsys, "from-first")
    assert not (tmp_path / "audit.retry.jsonl").exists()
    assert lines[1] == "-- FROM-first, as decoded:"
    assert lines[2].lstrip().upper().startswith("FROM ")
    k = lines.index("-- as it runs:")
    assert lines[k + 1].lstrip().upper().startswith("SELECT ")
    assert "repair: off (--language from-first: the column policy is the mask's)" in lines
    assert seal["mode"]["decoded_from_first"].strip() == "\n".join(lines[2:k]).strip()
    scoped = engines.scoped("analyst")
    verdict = replay_file(log, scoped.base, guide=scoped.guide(audit=False))
    assert verdict.ok, verdict
    assert grid(["audit", "replay", str(log), "--vocab", "smollm2"]) == 0
    # the role's own (SELECT-first) engine cannot replay it
    assert not replay_file(log, engines["analyst"].engine).ok


def test_ask_covering_end_to_end(
    lm: Any,
    engines: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--language covering``: the statement is decoded SELECT-first under the role's covering
    guide and judged by the checker (a refusal retried under the same guide,
    :func:`test_a_covering_retry_stays_in_the_covering_language`); its sealed log
    carries the column scope's fingerprint and replays against a fresh covering
    guide, not against the FROM-first one."""
    _code, lines, _seal, log = ask_scoped(lm, tmp_path, monkeypatch, capsys, "covering")
    assert lines[1].lstrip().upper().startswith("SELECT ")
    assert not any(line.startswith("repair: off") for line in lines)
    covering = engines.scoped("analyst", covering=True)
    verdict = replay_file(log, covering.base, guide=covering.guide(audit=False))
    assert verdict.ok, verdict
    from_first = engines.scoped("analyst")
    assert not replay_file(log, from_first.base, guide=from_first.guide(audit=False)).ok


def test_no_statement_within_the_budget(
    lm: Any,
    engines: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A budget below the shortest statement of the role's language: one line, exit 2,
    and a sealed empty log whose seal says why and replays against that language's
    guide: the covering one by default, the role's with ``--language role``. Fails if
    the decode is attempted, the log is missing or its seal does not name the budget
    and the shortest."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    covering = engines.scoped("analyst", covering=True)
    role = engines["analyst"].engine
    for language, served, replays in [
        ([], covering, lambda log: replay_file(log, covering.base, guide=covering.guide())),
        (["--language", "role"], role, lambda log: replay_file(log, role)),
    ]:
        log = tmp_path / f"audit{len(language)}.jsonl"
        named = "role" if language else "covering"
        argv = ["How many departments?", "--max-tokens", "2", "--quiet", "--audit", str(log)]
        assert ask.main([*argv, *language]) == 2
        out, err = capsys.readouterr()
        shortest = text2sql.shortest_statement(served)
        assert out == "" and shortest > 2
        assert err.count("\n") == 1 and err.startswith(
            "grid ask: error: no statement within the budget: the shortest statement of role "
            f"analyst in the {named} language takes {shortest} tokens with EOS, --max-tokens is 2; "
            f"audit log {log} sealed '{text2sql.NO_STATEMENT}' ("
        )
        assert verify_file(log).ok
        seal = json.loads(log.read_text().splitlines()[-1])["seal"]
        assert seal["stop_reason"] == text2sql.NO_STATEMENT and seal["record_count"] == 0
        flags = {"role": "analyst", "language": named}
        assert seal["mode"] == {"mode": 1, "budget": 2, "shortest": shortest, **flags}
        assert replays(log).ok
        assert ("column_scope" in seal["fingerprints"]) == (served is covering)


def test_the_grid_command_loads_ask_from_its_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What grid-serve's ``grid.commands`` entry point gives the ``grid`` command."""
    from importlib.metadata import EntryPoint

    from grid_core import cli

    ep = EntryPoint(name="ask", value="grid_serve.ask:ask_command", group=cli.GROUP)
    monkeypatch.setattr(cli, "entry_points", lambda group: [ep])
    assert cli.main(["ask", "Who?", "--role", "janitor"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("grid ask: error: no role 'janitor'")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_progress_is_a_status_line_on_a_terminal_and_plain_lines_otherwise(tty: bool) -> None:
    stream = FakeTerminal() if tty else io.StringIO()
    progress = ask.Progress(stream)
    progress.start("generating")
    progress.update("3 tokens")
    progress.done("5 tokens")
    text = stream.getvalue()
    if tty:
        assert text.startswith("\r\033[Kgenerating ...\r\033[Kgenerating: 3 tokens")
        assert text.endswith("\r\033[Kgenerating: 5 tokens, 0.0s\n") and text.count("\n") == 1
    else:
        assert text.splitlines() == [
            "grid ask: generating ...",
            "grid ask: generating: 5 tokens, 0.0s",
        ]


# ================================================================ the repair pass


@pytest.mark.parametrize("at", [0, 7, 12, 27])
def test_a_retry_never_follows_the_rejected_statement_past_its_violation(
    lm: Any, engines: Any, scripted: Callable[[bytes, Any], Any], at: int
) -> None:
    """``DivergeLogits``: a model that wants to write the rejected statement again, word for
    word (the scripted logits), writes the same bytes up to the violation's start at
    most, then something else; a sentence of the role, its log replaying. Fails if the
    retry reproduces the statement or the divergence leaves the language."""
    import torch

    from grid_core.decode import GREEDY
    from grid_serve.transformers import DivergeLogits

    role = engines["analyst"]
    rejected = b"SELECT name FROM employees WHERE id = 1;"
    guide = role.engine.guide()
    want = scripted(rejected, lm.vocab)
    diverge = DivergeLogits(
        lambda tokens: torch.tensor(want(tokens)), guide, text2sql.Avoid(rejected, at)
    )
    gen = decode_loop(guide, diverge, 64, GREEDY)
    assert gen.text != rejected and not gen.text.startswith(rejected[: at + 1])
    assert gen.text.startswith(rejected[:at]) or diverge.blocked == 0
    assert diverge.blocked > 0 and gen.tokens[-1] in lm.vocab.eos_ids
    assert replay_lines(gen.audit.lines(), role.engine).ok


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_a_covering_retry_stays_in_the_covering_language(
    lm: Any, engines: Any, schema: SchemaSnapshot, scripted: Callable[[bytes, Any], Any]
) -> None:
    """``grid ask --language covering``'s repair pass (:func:`text2sql.answer_covering`): a given
    first statement of the covering language that the checker refuses for a statement
    rule (an aggregate in the ORDER BY of a query that aggregates nothing, which SQLite
    refuses and the language does not place: ``placed_calls``); the retry, decoded
    by the real model, gets a fresh guide of the same covering language, the checker's
    feedback, and the obligation to leave the refused statement by its violation.
    Fails if the retry runs under another guide, the feedback does not reach it, it
    writes the refused statement again, or its log does not replay against the
    covering guide; with ``retries=0`` there is one attempt."""
    from grid_serve.transformers import decode_with_model

    covering = engines.scoped("analyst", covering=True)
    ddl = text2sql.schema_ddl(schema, engines["analyst"].grants)
    question = "What is the largest budget of a department?"
    first = b"SELECT name FROM departments ORDER BY max(budget);"
    calls: list[tuple[Any, str, text2sql.Avoid | None]] = []

    def decode(guide: Any, feedback: str, avoid: text2sql.Avoid | None) -> Generation:
        calls.append((guide, feedback, avoid))
        if not feedback:
            return decode_loop(guide, scripted(first, lm.vocab), 96)
        ids = text2sql.prompt_ids(lm.tokenizer, question, ddl, feedback=feedback)
        gen, _ = decode_with_model(lm.model, guide, ids, 96, stop_on_exit=True, avoid=avoid)
        return gen

    attempts = text2sql.answer_covering(decode, engines, "analyst")
    assert len(attempts) == 2 and attempts[0].sql == first.decode()
    assert [v.kind for v in attempts[0].violations] == [ViolationKind.MISUSED_AGGREGATE]
    feedback = attempts[1].feedback
    assert [c[1] for c in calls] == ["", feedback] and "max" in feedback
    assert all(c[0].engines is covering for c in calls) and calls[0][0] is not calls[1][0]
    assert [c[2] for c in calls] == [None, text2sql.Avoid(first, 38)]  # the max
    assert not attempts[1].sql.encode().startswith(first[:39])
    lines = attempts[1].generation.audit.lines()
    assert replay_lines(lines, covering.base, guide=covering.guide(audit=False)).ok
    calls.clear()
    assert len(text2sql.answer_covering(decode, engines, "analyst", retries=0)) == 1


AUDITOR = """version = 1
[roles.auditor]
verbs = ["SELECT"]
tables = ["departments", "employees"]
columns.departments = ["id", "budget"]
"""


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_the_retry_quotes_the_violations_and_drops_the_denied_column(
    lm: Any, schema: SchemaSnapshot, tmp_path: Path, scripted: Callable[[bytes, Any], Any]
) -> None:
    """A given first statement reads departments.name, which auditor may not; the retry,
    decoded by the real model, is prompted with the checker's feedback and decoded under
    a lexicon without ``name`` (over-restricting employees.name, as documented). Fails if
    the feedback does not reach the prompt, the retry runs under the role's own guide, its
    statement reads ``name`` or its audit log does not replay against the tightened engine.
    """
    from grid_serve.transformers import decode_with_model

    policy = PolicyBundle.loads(AUDITOR, "auditor.toml", schema)
    engines = text2sql.RoleEngines(schema, policy, lm.vocab)
    role = engines["auditor"]
    ddl = text2sql.schema_ddl(schema, role.grants)
    question = "What are the names of the departments?"
    first = b"SELECT name FROM departments;"
    prompts: list[str] = []
    used: list[Engine] = []
    avoids: list[text2sql.Avoid | None] = []

    def decode(feedback: str, engine: Engine, avoid: text2sql.Avoid | None) -> Generation:
        prompts.append(feedback)
        used.append(engine)
        avoids.append(avoid)
        if not feedback:
            return decode_loop(engine.guide(), scripted(first, lm.vocab), 96)
        ids = text2sql.prompt_ids(lm.tokenizer, question, ddl, feedback=feedback)
        gen, _ = decode_with_model(
            lm.model, engine.guide(), ids, 96, stop_on_exit=True, avoid=avoid
        )
        return gen

    attempts = text2sql.answer(decode, engines, "auditor")
    assert len(attempts) == 2 and attempts[0].sql == first.decode()
    assert [v.kind for v in attempts[0].violations] == [ViolationKind.COLUMN_NOT_GRANTED]
    assert attempts[0].feedback == "" and used[0] is role.engine
    feedback = attempts[1].feedback
    assert prompts == ["", feedback]
    assert "1. bytes 7-11 `name`: column name of departments is not granted" in feedback
    assert "- departments: id, budget" in feedback
    assert attempts[1].removed == ("name",) and attempts[1].star
    assert avoids == [None, text2sql.Avoid(first, 7)]  # the violation at `name`
    assert not attempts[1].sql.encode().startswith(first[:8])
    retry_engine = used[1]
    assert retry_engine is not role.engine
    assert b"name" in role.lexicon.word_lists()["COLUMN_NAME"]
    assert retry_engine.lexicon.fingerprint != role.engine.lexicon.fingerprint
    checker = text2sql.checker_for(schema, role.grants)
    # The tighter lexicon cannot spell `name`; a `*` may still expand to it (the checker's
    # business, and the next retry's `star=False`).
    spelled = {a.column for a in checker.analyze(attempts[1].sql).accesses if a.via != "star"}
    assert "name" not in spelled, attempts[1].sql
    path = tmp_path / "retry.jsonl"
    attempts[1].generation.audit.write(path)
    assert replay_file(path, retry_engine).ok
    assert not replay_file(path, role.engine).ok  # another lexicon: another artifact


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_ask_repairs_a_star_for_a_restricted_role(
    lm: Any,
    engines: Any,
    schema: SchemaSnapshot,
    policy: PolicyBundle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """clerk may not read employees.hired; asked for all employees, SmolLM2 writes
    ``SELECT * FROM employees ...`` (greedy, one thread). ``grid ask`` quotes the violation
    back and retries under a guide without ``*`` result columns: the output shows both
    statements, both verdicts and the before/after counts, and both audit logs are written,
    verify, and replay against the engine each was decoded under. Fails if repair is not
    engaged, the retry may still write ``*``, a log is missing, or the exit status does not
    follow the retry's verdict."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    log = tmp_path / "audit.jsonl"
    code = ask.main(["Show all employees.", "--role", "clerk", "--audit", str(log)])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].endswith("; language role")  # clerk may INSERT: no covering language
    assert lines[1].startswith("SELECT * FROM employees WHERE id = ") and lines[1].endswith(";")
    assert lines[2:4] == [
        "checker: REFUSED (1 violation)",
        "  - bytes 7-8 `*`: column_not_granted: * expands to column hired of employees, which "
        "is not granted to role clerk; granted: id, name, dept_id; list granted columns instead",
    ]
    assert lines[4] == (
        "repair: engaged: the 1 violation quoted back to the model for one constrained retry "
        "under a guide with no `*` result column"
    )
    assert lines[5] == "-- retry"
    end = next(i for i in range(6, len(lines)) if lines[i].startswith("checker: "))
    retry_sql = "\n".join(lines[6:end])
    assert "*" not in retry_sql
    verdict = next(line for line in lines[7:] if line.startswith("repair: "))
    after = len(text2sql.checker_verdict(schema, policy.grants("clerk", schema), retry_sql))
    outcome = "failed" if after else "fixed"
    assert verdict == f"repair: {outcome}: a new statement; violations: 1 before, {after} after"
    if after:
        assert code == 1 and "the refused statement is not run" in lines
    else:  # run read-only: exit 1 only when SQLite refuses it
        assert (code == 1) == any(line.startswith("sqlite refused it") for line in lines)
    retry_log = tmp_path / "audit.retry.jsonl"
    assert lines[-2].startswith(f"audit: {log} (") and lines[-1].startswith(
        f"audit (retry): {retry_log} ("
    )
    assert verify_file(log).ok and verify_file(retry_log).ok
    assert replay_file(log, engines["clerk"].engine).ok
    assert replay_file(retry_log, engines.retry_engine("clerk", star=False)).ok
    assert json.loads(retry_log.read_text().splitlines()[-1])["seal"]["mode"]["star"] is False
    for path in (log, retry_log):  # the retry's guide rebuilt from its seal's flags
        assert grid(["audit", "replay", str(path), "--vocab", "smollm2"]) == 0
    assert "retrying with the checker's feedback (budget 96 tokens)" in err


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_no_repair_reports_the_refusal_without_a_retry(
    lm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--no-repair``: one attempt, one log, exit 1. Fails if a retry happens anyway."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    log = tmp_path / "audit.jsonl"
    argv = ["Show all employees.", "--role", "clerk", "--audit", str(log), "--no-repair"]
    assert ask.main([*argv, "--quiet"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[4:6] == ["repair: off (--no-repair)", "the refused statement is not run"]
    assert lines[-1].startswith(f"audit: {log} (")
    assert not (tmp_path / "audit.retry.jsonl").exists()


RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c;"


@pytest.mark.parametrize(
    ("sql", "argv", "line"),
    [
        (
            RUNAWAY,
            ["--limit-wall-time", "0.5"],
            "stopped: limit wall_time = 0.5 s exceeded: the statement ran past 0.5 s",
        ),
        (
            "SELECT name FROM employees;",
            ["--limit-rows", "2"],
            "stopped: limit max_rows = 2 rows exceeded: the statement returns more than 2 rows",
        ),
        (
            "SELECT length(zeroblob(1000000000)) FROM departments;",
            [],
            "stopped: limit max_result_bytes = 1048576 bytes exceeded: a value grew past 1048576 "
            "bytes (SQLite: string or blob too big)",
        ),
        (
            # One SQLite call its progress handler never interrupts: the worker's
            # deadline stops it (grid_sql.worker).
            "SELECT length(printf('%.1000000000c%.1000000000c%.1000000000c')) FROM departments;",
            ["--limit-wall-time", "1"],
            "stopped: limit wall_time = 1 s exceeded: the statement ran past 1 s (its worker "
            "was stopped)",
        ),
    ],
    ids=["wall-time", "rows", "result-bytes", "one-long-call"],
)
def test_a_statement_over_its_limits_is_stopped_with_one_line(
    answer_with: Callable[[str], None],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sql: str,
    argv: list[str],
    line: str,
) -> None:
    """The execution step of ``grid ask`` under the role's limits and the --limit-* options:
    the accepted statement (fixed here, in place of the model's) stops at its limit, one
    line on stdout naming it, exit 1, the audit log still written."""
    answer_with(sql)
    audit = tmp_path / "audit.jsonl"
    code = ask.main(["Count to infinity.", *argv, "--quiet", "--audit", str(audit)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[1:4] == [sql, "checker: accepted", "repair: not engaged (the checker accepted "
                        "the statement)"]  # fmt: skip
    assert out[4] == line and out[5].startswith(f"audit: {audit} (0 records, sealed ")
    assert verify_file(audit).ok


def test_the_prompt_must_fit_the_cap_and_the_context() -> None:
    """A prompt over MAX_PROMPT_TOKENS, or one that with the budget exceeds the model's
    context (``max_position_embeddings``), is a ServingError naming both numbers."""
    import argparse
    from types import SimpleNamespace

    from grid_core.errors import ServingError

    loaded = SimpleNamespace(
        name="tiny", model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=100))
    )
    budget = argparse.Namespace(max_tokens=20)
    ask._check_prompt(loaded, [0] * 80, budget)  # 80 + 20 fits exactly
    with pytest.raises(ServingError, match=r"prompt is 81 tokens and --max-tokens is 20: "):
        ask._check_prompt(loaded, [0] * 81, budget)
    huge = SimpleNamespace(name="big", model=SimpleNamespace(config=SimpleNamespace()))
    with pytest.raises(ServingError, match=f"prompts with at most {ask.MAX_PROMPT_TOKENS}"):
        ask._check_prompt(huge, [0] * (ask.MAX_PROMPT_TOKENS + 1), budget)


def test_a_model_name_passes_the_input_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model gemma3-270m`` is a name (grid_serve.model_files), not a missing path: the
    inputs pass and the name reaches ``load_model`` (after torch: the serve session)."""
    pytest.importorskip("torch")
    import grid_serve.model
    from grid_core.errors import ServingError

    seen: list[object] = []

    def load(source: object = None) -> Any:
        seen.append(source)
        raise ServingError("stopped here")

    monkeypatch.setattr(grid_serve.model, "load_model", load)
    assert ask.main(["How many?", "--quiet", "--model", "gemma3-270m"]) == 2
    assert seen == [Path("gemma3-270m")]
    assert ask.main(["How many?", "--quiet", "--model", "no-such-model"]) == 2
    assert len(seen) == 1  # a name that is neither a model nor a path stops before
