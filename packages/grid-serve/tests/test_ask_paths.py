"""``grid ask``'s files: what it writes (``--audit``, its retry log, ``--events``) is
checked with every other option, before any model work, against what it reads
(``--db``, ``--policy``, ``--examples``, ``--model``) and against each other; an
existing file is replaced only with ``--force`` (a retry log left by an earlier run
then removed); ``--examples`` is read with a bound and strict JSON; SIGTERM cleans
up as Ctrl-C does.

Each bad command line is run in its own process and must be one line, exit 2,
nothing on stdout, and every file it was given left as it was.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from grid_core.audit import verify_file
from grid_serve import ask

Q = "How many employees are there?"
EXAMPLE_POLICY = resources.files("grid_sql.examples").joinpath("company.policy.toml")
HAS_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
EXAMPLE = '{"question": "How many departments?", "sql": "SELECT count(*) FROM departments;"}'

#: argv (``{name}`` a file of :func:`files`) -> the error's words.
BAD_PATHS = {
    "audit-is-the-db": (
        [Q, "--db", "{db}", "--policy", "{policy}", "--audit", "{db}"],
        "--audit {db} is the file of --db ({db}): name another file",
    ),
    "events-is-the-db": (
        [Q, "--db", "{db}", "--policy", "{policy}", "--events", "{db}"],
        "--events {db} is the file of --db ({db})",
    ),
    "audit-is-the-db-by-another-name": (
        [Q, "--db", "{db}", "--policy", "{policy}", "--audit", "{link}"],
        "--audit {link} is the file of --db ({db})",
    ),
    "audit-is-the-policy": (
        [Q, "--policy", "{policy}", "--audit", "{policy}"],
        "--audit {policy} is the file of --policy ({policy})",
    ),
    "retry-log-is-the-policy": (
        [Q, "--policy", "{dir}/p.retry.toml", "--audit", "{dir}/p.toml"],
        "--audit's retry log {dir}/p.retry.toml is the file of --policy",
    ),
    "audit-is-the-examples": (
        [Q, "--examples", "{examples}", "--audit", "{examples}"],
        "--audit {examples} is the file of --examples ({examples})",
    ),
    "events-is-the-audit": (
        [Q, "--audit", "{dir}/new.jsonl", "--events", "{dir}/new.jsonl"],
        "--events {dir}/new.jsonl is the file of --audit ({dir}/new.jsonl)",
    ),
    "events-is-the-retry-log": (
        [Q, "--audit", "{dir}/new.jsonl", "--events", "{dir}/new.retry.jsonl"],
        "--events {dir}/new.retry.jsonl is the file of --audit's retry log",
    ),
    "retry-log-is-a-directory": (
        [Q, "--audit", "{dir}/r.jsonl"],
        "--audit's retry log {dir}/r.retry.jsonl is a directory; name a file in it",
    ),
    "audit-exists": (
        [Q, "--audit", "{dir}/old.jsonl"],
        "--audit {dir}/old.jsonl exists (an earlier run's?); name a new file, or pass --force",
    ),
    "retry-log-exists": (
        [Q, "--audit", "{dir}/s.jsonl"],
        "--audit's retry log {dir}/s.retry.jsonl exists (an earlier run's?)",
    ),
    "events-exists": ([Q, "--events", "{dir}/old.jsonl"], "--events {dir}/old.jsonl exists"),
    "force-is-no-licence-to-clobber-an-input": (
        [Q, "--policy", "{policy}", "--audit", "{policy}", "--force"],
        "--audit {policy} is the file of --policy",
    ),
    "examples-key-twice": (
        [Q, "--examples", "{twice}"],
        "{twice}:1: the key 'sql' is given twice",
    ),
    "examples-too-large": (
        [Q, "--examples", "{large}"],
        "examples file {large}: it holds more than 1,048,576 bytes, the most read",
    ),
    "db-is-a-directory": (
        [Q, "--db", "{dir}", "--policy", "{policy}"],
        "schema {dir}: is a directory, not a database file",
    ),
}


def files(tmp: Path) -> dict[str, Path]:
    """The files the bad command lines name: a database (and a link to it), a copy of
    the example policy, examples, an earlier run's logs, a directory where a retry log
    would go; and ``{dir}``, the directory itself."""
    db = tmp / "shop.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (a INTEGER)")
    (tmp / "link.sqlite").symlink_to(db)
    (tmp / "policy.toml").write_text(EXAMPLE_POLICY.read_text())
    (tmp / "p.retry.toml").write_text(EXAMPLE_POLICY.read_text())
    (tmp / "examples.jsonl").write_text(EXAMPLE + "\n")
    (tmp / "twice.jsonl").write_text(EXAMPLE[:-1] + ', "sql": "SELECT 1;"}\n')
    (tmp / "large.jsonl").write_text("\n" * (1 << 20) + EXAMPLE)  # MAX_EXAMPLES_BYTES
    (tmp / "old.jsonl").write_text("an earlier run's log\n")
    (tmp / "s.retry.jsonl").write_text("an earlier run's retry log\n")
    (tmp / "r.retry.jsonl").mkdir()
    return {
        "{db}": db,
        "{link}": tmp / "link.sqlite",
        "{policy}": tmp / "policy.toml",
        "{examples}": tmp / "examples.jsonl",
        "{twice}": tmp / "twice.jsonl",
        "{large}": tmp / "large.jsonl",
        "{dir}": tmp,
    }


def contents(tmp: Path) -> dict[str, bytes | None]:
    """Every entry under ``tmp``: a file's bytes, None for a directory or a link."""
    return {
        str(p): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(tmp.rglob("*"))
    }


def fill(text: str, named: dict[str, Path]) -> str:
    for key, path in named.items():
        text = text.replace(key, str(path))
    return text


@pytest.mark.parametrize(("argv", "message"), list(BAD_PATHS.values()), ids=list(BAD_PATHS))
def test_a_bad_file_is_refused_before_anything_runs(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    """Fails if the command runs (``--audit`` naming the database overwrote it with the
    log, exit 0), prints to stdout, or changes any file it was given."""
    named = files(tmp_path)
    before = contents(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "grid_serve.ask", *(fill(a, named) for a in argv)],
        capture_output=True,
        text=True,
    )
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("grid ask: error: ")
    assert fill(message, named) in out.stderr, out.stderr
    assert contents(tmp_path) == before


@pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")
def test_force_replaces_the_log_and_removes_an_earlier_retry_log(
    answer_with: Callable[[str], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force``: the earlier run's log is replaced by this run's, and its retry log,
    which this run (no retry) did not write, is removed rather than left beside it."""
    answer_with("SELECT count(*) FROM departments;")
    audit, retry, events = (tmp_path / n for n in ("a.jsonl", "a.retry.jsonl", "e.jsonl"))
    for path in (audit, retry, events):
        path.write_text("an earlier run's\n")
    argv = [Q, "--quiet", "--audit", str(audit), "--events", str(events)]
    assert ask.main(argv) == 2  # without --force: nothing runs, nothing changes
    assert capsys.readouterr().out == ""
    assert {p.read_text() for p in (audit, retry, events)} == {"an earlier run's\n"}
    assert ask.main([*argv, "--force"]) == 0
    out = capsys.readouterr().out
    assert f"audit: {audit} (0 records, sealed " in out and "audit (retry)" not in out
    assert verify_file(audit).ok and not retry.exists()
    seal = json.loads(audit.read_text().splitlines()[-1])["seal"]
    assert seal["mode"]["statement"] == "SELECT count(*) FROM departments;"
    assert events.read_text() == ""  # the fixed statement was not decoded: no events


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch: its import is the window to signal in")
def test_sigterm_removes_the_temporary_database(tmp_path: Path) -> None:
    """SIGTERM while ``grid ask`` loads torch (its example database already written to a
    temporary directory): the directory is removed, one line, exit 143 (it was left
    behind: SIGTERM's default action skips every cleanup)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "grid_serve.ask", Q, "--audit", str(tmp_path / "a.jsonl")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("grid-ask-db-*/*.sqlite")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (143, ""), err
    assert err.endswith("grid ask: terminated\n"), err
    assert list(tmp_path.glob("grid-ask-db-*")) == []
