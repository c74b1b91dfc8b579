"""``grid ask``: bad input fails fast with one line and exit 2; a real run prints SQL,
verdict, rows and a sealed audit log."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grid_core.audit import verify_file
from grid_serve import ask

Q = "How many employees are there?"
BAD_INPUT = {
    "missing-db": ([Q, "--db", "/nonexistent/x.sqlite"], "no such file"),
    "not-a-database": ([Q, "--db", "{policy}"], "file is not a database"),
    "unknown-role": ([Q, "--role", "janitor"], "no role 'janitor' in the policy"),
    "malformed-policy": ([Q, "--policy", "{policy}"], "policy.toml:1"),
    "non-positive-budget": ([Q, "--max-tokens", "0"], "--max-tokens must be positive"),
    "empty-question": ([" "], "the question is empty"),
    "missing-model": ([Q, "--model", "/nonexistent/m.gguf"], "no model at /nonexistent/m.gguf"),
}


def run_ask(argv: list[str]) -> tuple[int, str, str]:
    """``python -m grid_serve.ask ARGV`` in a subprocess: (exit status, stdout, stderr)."""
    out = subprocess.run(
        [sys.executable, "-m", "grid_serve.ask", *argv], capture_output=True, text=True
    )
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize(("argv", "message"), list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("roles = [unclosed\n")
    code, stdout, stderr = run_ask([a.replace("{policy}", str(policy)) for a in argv])
    assert code == 2
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("grid ask: error: "), stderr
    assert message in lines[0]


def test_bad_input_never_loads_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from grid_serve import ask\n"
        "rc = ask.main(['q', '--role', 'janitor', '--quiet'])\n"
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
    assert args.func is not None


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_ask_end_to_end_on_the_defaults(
    lm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped defaults (example database and policy, SmolLM2: the session's model)."""
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    log = tmp_path / "audit.jsonl"
    code = ask.main(["How many departments are there?", "--audit", str(log)])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("-- role analyst on company.sqlite")
    assert lines[1].rstrip().endswith(";")
    assert lines[2] in ("checker: accepted", lines[2]) and lines[2].startswith("checker: ")
    assert code == (0 if lines[2] == "checker: accepted" else 1)
    assert lines[-1].startswith(f"audit: {log} (")
    assert verify_file(log).ok
    seal = json.loads(log.read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["mode"] == 1 and seal["stop_reason"] in ("eos", "reserve")
    assert "generating (budget 96 tokens)" in err  # progress, plain lines (not a terminal)
    assert "not byte-complete" in err


def test_no_statement_within_the_budget(
    lm: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import grid_serve.model

    monkeypatch.setattr(grid_serve.model, "load_model", lambda source=None: lm)
    assert ask.main(["How many departments are there?", "--max-tokens", "2", "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "cannot hold the shortest completion" in err


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
