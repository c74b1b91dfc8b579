"""``grid audit replay LOG`` without ``--grammar`` on ``grid ask``'s logs
(:mod:`grid_serve.ask_replay`, the ``grid.replay`` entry point), model-free: logs
decoded here under the engines ``grid ask`` builds, sealed with ``grid ask``'s
flags, replayed from the command line. The model's own runs are replayed in
``test_ask.py`` (the default language, a repaired retry, FROM-first)."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from grid_core.audit import AuditLog, reseal
from grid_core.cli import main as grid
from grid_core.decode import decode as decode_loop
from grid_core.vocab import smollm2
from grid_serve import ask, text2sql
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.schema import SchemaSnapshot

#: departments.name is denied to auditor while employees.name is granted: a retry
#: drops the word ``name`` from its lexicon (``removed``).
AUDITOR = """version = 1
[roles.auditor]
verbs = ["SELECT"]
tables = ["departments", "employees"]
columns.departments = ["id", "budget"]
"""


@pytest.fixture(scope="module")
def vocab() -> Any:
    return smollm2()


def sealed(gen_audit: AuditLog, flags: dict[str, Any], path: Path) -> Path:
    """``gen_audit`` resealed with ``grid ask``'s outcome flags, written to ``path``."""
    outcome = {"question_blake2b": "0" * 32, "verdict": "accepted", "run": "not run", **flags}
    reseal(gen_audit, outcome).write(path)
    return path


def replay(path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = grid(["audit", "replay", str(path), "--vocab", "smollm2", *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_each_language_replays_and_another_policy_does_not(
    company_db: Path,
    schema: SchemaSnapshot,
    vocab: Any,
    scripted: Callable[[bytes, Any], Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A log of each of ``grid ask``'s languages (analyst: covering, FROM-first, its
    own) replays on the example defaults and on ``--db``/``--policy`` naming them; a
    log without the seal's ``language`` is of the role's language; the same log
    against a policy with other grants, or one under which the role may write (no
    covering or FROM-first language for it), is reported as diverging at its
    artifacts (exit 1), never replayed against them."""
    engines = text2sql.RoleEngines(schema, example_policy(schema), vocab)
    statement = b"SELECT name FROM departments WHERE budget > 10;"
    guides = {
        "covering": engines.scoped("analyst", covering=True).guide(),
        "from-first": engines.scoped("analyst").guide(),
        "role": engines["analyst"].engine.guide(),
    }
    other = tmp_path / "other.toml"
    other.write_text('version = 1\n[roles.analyst]\nverbs = ["SELECT"]\ntables = ["departments"]\n')
    writer = tmp_path / "writer.toml"
    writer.write_text(
        'version = 1\n[roles.analyst]\nverbs = ["SELECT", "INSERT"]\n'
        'tables = ["departments", "employees"]\n'
    )
    example = str(resources.files("grid_sql.examples").joinpath("company.policy.toml"))
    for language, guide in guides.items():
        gen = decode_loop(guide, scripted(statement, vocab), 40)
        log = sealed(gen.audit, {"role": "analyst", "language": language}, tmp_path / "a.jsonl")
        code, out, _ = replay(log, capsys)
        assert (code, out.split(": ")[1]) == (0, "REPLAYS"), (language, out)
        named = ("--db", str(company_db), "--policy", example)
        assert replay(log, capsys, *named)[0] == 0
        code, out, _ = replay(log, capsys, "--db", str(company_db), "--policy", str(other))
        assert code == 1 and "DIVERGES at the artifacts" in out, (language, out)
        # a policy under which analyst may INSERT has no covering or FROM-first
        # language for it: the log's artifacts cannot be built, it diverges there too
        code, out, _ = replay(log, capsys, "--db", str(company_db), "--policy", str(writer))
        assert code == 1 and "DIVERGES at the artifacts" in out, (language, out)
        if language != "role":
            assert f"the log is in the {language} language" in out, out
            assert "may do more than SELECT" in out and "--language" not in out, out
        if language == "role":  # a log sealed before grid ask had languages
            old = sealed(gen.audit, {"role": "analyst"}, tmp_path / "old.jsonl")
            assert replay(old, capsys)[0] == 0
        else:  # the language in the seal picks the guide: not the role's own engine
            wrong = sealed(gen.audit, {"role": "analyst", "language": "role"}, tmp_path / "w")
            assert replay(wrong, capsys)[0] == 1


def test_a_tightened_retry_replays_from_its_seal_flags(
    company_db: Path,
    schema: SchemaSnapshot,
    vocab: Any,
    scripted: Callable[[bytes, Any], Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The repair pass's retry of auditor (a denied ``name`` read through ``*``, so
    its guide has neither the word ``name`` nor ``*`` result columns): sealed with
    ``grid ask``'s flags (``ask._tightened``: ``removed``, ``star``), it replays
    against the engine rebuilt from them; without either flag the rebuilt engine is
    another one (exit 1)."""
    policy_file = tmp_path / "auditor.toml"
    policy_file.write_text(AUDITOR)
    engines = text2sql.RoleEngines(schema, PolicyBundle.loads(AUDITOR, "a.toml", schema), vocab)
    first = b"SELECT * FROM departments;"
    logs = []

    def decode(feedback: str, engine: Any, avoid: Any) -> Any:
        text = first if not feedback else b"SELECT id, budget FROM departments;"
        return decode_loop(engine.guide(), scripted(text, vocab), 40)

    attempts = text2sql.answer(decode, engines, "auditor")
    retry = attempts[-1]
    assert len(attempts) == 2 and retry.removed == ("name",) and not retry.star
    flags = ask._tightened(retry)
    assert flags == {"removed": '["name"]', "star": False}
    named = ("--db", str(company_db), "--policy", str(policy_file))
    for drop in ((), ("removed",), ("star",)):
        kept = {k: v for k, v in flags.items() if k not in drop}
        path = tmp_path / f"retry{len(logs)}.jsonl"
        logs.append(path)
        sealed(retry.generation.audit, {"role": "auditor", "language": "role", **kept}, path)
        code, out, _ = replay(path, capsys, *named)
        assert code == (0 if not drop else 1), (drop, out)
    assert ask._tightened(attempts[0]) == {}  # the role's own guide: no flag


def test_budget_refusals_replay(
    schema: SchemaSnapshot, vocab: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sealed empty log of a budget too small for any statement (``grid ask``
    writes it with the role and the language) replays against that language."""
    engines = text2sql.RoleEngines(schema, example_policy(schema), vocab)
    for language, served in [
        ("covering", engines.scoped("analyst", covering=True)),
        ("role", engines["analyst"].engine),
    ]:
        log = text2sql.budget_refusal(served, 2, {"role": "analyst", "language": language})
        path = tmp_path / f"{language}.jsonl"
        log.write(path)
        assert replay(path, capsys)[0] == 0, language


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--db", "{db}"], "--db {db} needs --policy FILE"),
        (["--drop", "SELECT"], "--start, --drop and --lexicon go with --grammar"),
        (["--grammar", "{log}", "--db", "{db}"], "--db: not with --grammar"),
        (
            ["--db", "{dir}", "--policy", "{policy}"],
            "schema {dir}: is a directory, not a database file",
        ),
    ],
    ids=["db-without-policy", "drop-without-grammar", "db-with-grammar", "db-is-a-directory"],
)
def test_bad_replay_arguments_are_one_line(
    company_db: Path,
    schema: SchemaSnapshot,
    vocab: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    engines = text2sql.RoleEngines(schema, example_policy(schema), vocab)
    log = text2sql.budget_refusal(engines["analyst"].engine, 2, {"role": "analyst"})
    path = tmp_path / "a.jsonl"
    log.write(path)
    example = str(resources.files("grid_sql.examples").joinpath("company.policy.toml"))
    filled = {"{db}": str(company_db), "{log}": str(path), "{dir}": str(tmp_path)}
    filled["{policy}"] = example
    code, out, err = replay(path, capsys, *[filled.get(a, a) for a in argv])
    assert (code, out) == (2, "")
    assert err.startswith("grid audit: error: ") and "\n" not in err
    assert message.replace("{db}", str(company_db)).replace("{dir}", str(tmp_path)) in err


def test_a_role_the_policy_lacks_diverges_at_the_artifacts(
    company_db: Path, schema: SchemaSnapshot, vocab: Any, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A log whose seal names a role the policy does not have cannot have been made
    from that policy's artifacts: ``DIVERGES at the artifacts``, exit 1 (docs/cli.md),
    on the example defaults and with ``--db``/``--policy`` (it was exit 2, "no role")."""
    engines = text2sql.RoleEngines(schema, example_policy(schema), vocab)
    log = text2sql.budget_refusal(engines["analyst"].engine, 2, {"role": "janitor"})
    path = tmp_path / "a.jsonl"
    log.write(path)
    other = tmp_path / "other.toml"
    other.write_text('version = 1\n[roles.reader]\nverbs = ["SELECT"]\ntables = ["orders"]\n')
    for argv in ((), ("--db", str(company_db), "--policy", str(other))):
        code, out, err = replay(path, capsys, *argv)
        assert (code, err) == (1, ""), err
        assert out.startswith(f"{path}: DIVERGES at the artifacts (artifacts): "), out
        assert "the log's role 'janitor' is not in the policy " in out, out


def test_a_log_no_source_knows_needs_its_grammar(
    schema: SchemaSnapshot,
    vocab: Any,
    scripted: Callable[[bytes, Any], Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A log whose seal is not ``grid ask``'s (no role: a bare decode loop's) is an
    error without ``--grammar`` (exit 2, one line); an invalid log is invalid (exit
    1) whatever its seal."""
    engines = text2sql.RoleEngines(schema, example_policy(schema), vocab)
    gen = decode_loop(engines["analyst"].engine.guide(), scripted(b"SELECT 1;", vocab), 20)
    path = tmp_path / "bare.jsonl"
    gen.audit.write(path)
    code, out, err = replay(path, capsys)
    assert (code, out) == (2, "")
    assert err == (
        "grid audit: error: no --grammar, and no installed replay source knows this log's "
        "seal (grid-serve's replays grid ask's logs)"
    )
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["token"] += 1
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    code, out, _ = replay(path, capsys)
    assert code == 1 and "INVALID" in out
