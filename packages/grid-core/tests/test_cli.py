"""``grid audit verify`` and ``grid audit replay``: verdict lines and exit statuses.

Exit status 0 valid, 1 invalid or divergent, 2 for an error from GRID (an
unreadable log, grammar or lexicon). Tested in process through
``grid_core.cli.main`` and once through a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from toy import LEXICON, TOY, analyst_engine

from grid_core import cli, files
from grid_core.audit import AuditLog, mask_entry_id
from grid_core.decode import generate
from grid_core.guide import Engine, GridGuide
from grid_core.vocab import cl100k

GRAMMAR = Path(__file__).parent / "grammars" / "crud.lark"
PROJECTION = ["--drop", "INSERT", "--drop", "UPDATE", "--drop", "DELETE"]
ENGINE = analyst_engine()


@pytest.fixture(scope="module")
def log() -> AuditLog:
    return generate(GridGuide(ENGINE), lambda ids, r: r.choice(ids), 30, random.Random(5)).audit


@pytest.fixture
def log_path(tmp_path: Path, log: AuditLog) -> Path:
    path = tmp_path / "run.jsonl"
    log.write(path)
    return path


@pytest.fixture
def tampered(tmp_path: Path, log: AuditLog) -> Path:
    objs = [json.loads(line) for line in log.lines()]
    objs[2]["token"] = (objs[2]["token"] + 1) % TOY.n_vocab
    path = tmp_path / "tampered.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in objs) + "\n")
    return path


@pytest.fixture
def lexicon(tmp_path: Path) -> Path:
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({c: [w.decode() for w in ws] for c, ws in LEXICON.items()}))
    return path


@pytest.fixture
def toy_vocab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.VOCABULARIES, "toy", lambda: TOY)


# -------------------------------------------------------------- verify


def test_verify_valid(log_path: Path, log: AuditLog, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", "verify", str(log_path)]) == 0
    out = capsys.readouterr().out
    assert out == f"{log_path}: VALID: {len(log.records)} records, sealed\n"


def test_verify_invalid_names_step_and_reason(
    tampered: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["audit", "verify", str(tampered)]) == 1
    out = capsys.readouterr().out
    assert out == f"{tampered}: INVALID at step 2: the record's hash does not match its fields\n"


def test_verify_anchor(log_path: Path, log: AuditLog, capsys: pytest.CaptureFixture[str]) -> None:
    assert log.seal_hash is not None
    assert cli.main(["audit", "verify", str(log_path), "--anchor", log.seal_hash]) == 0
    assert "anchor matches" in capsys.readouterr().out
    assert cli.main(["audit", "verify", str(log_path), "--anchor", "0" * 64]) == 1
    assert "INVALID at the seal: the seal's hash is not the anchored one" in (
        capsys.readouterr().out
    )


def test_verify_anchor_in_upper_case(log_path: Path, log: AuditLog) -> None:
    assert log.seal_hash is not None
    assert cli.main(["audit", "verify", str(log_path), "--anchor", log.seal_hash.upper()]) == 0


def test_verify_a_file_name_that_is_not_utf_8(
    log_path: Path, log: AuditLog, tmp_path: Path
) -> None:
    """A valid log under a name whose bytes are not UTF-8, stdout strict UTF-8 (most
    locales): VALID, the name escaped, not a traceback and exit 1."""
    odd = os.fsencode(tmp_path) + b"/\xff.jsonl"
    Path(os.fsdecode(odd)).write_bytes(log_path.read_bytes())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    run = [sys.executable.encode(), b"-m", b"grid_core.cli", b"audit", b"verify", odd]
    out = subprocess.run(run, capture_output=True, env=env, check=False)
    assert (out.returncode, out.stderr) == (0, b""), out.stderr
    n = len(log.records)
    assert out.stdout.endswith(f"/\\udcff.jsonl: VALID: {n} records, sealed\n".encode())


def test_a_verdict_quoting_the_log_stays_one_line(tmp_path: Path) -> None:
    """A repeated JSON key holding a newline, a terminal escape and a lone surrogate,
    stdout strict UTF-8: one INVALID line, the key quoted and escaped, exit 1 (the
    newline forged a second verdict line, the surrogate was a traceback)."""
    key = '"x\\nVALID: 99 records, sealed\\u001b[2K\\udcff"'
    bad = tmp_path / "dup.jsonl"
    bad.write_text(f"{{{key}: 1, {key}: 2}}\n")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    run = [sys.executable, "-m", "grid_core.cli", "audit", "verify", str(bad)]
    out = subprocess.run(run, capture_output=True, env=env, check=False)
    assert (out.returncode, out.stderr) == (1, b""), out.stderr
    assert out.stdout.count(b"\n") == 1 and b"\x1b" not in out.stdout, out.stdout
    assert b"repeats the key 'x\\nVALID" in out.stdout, out.stdout


def test_verify_unreadable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", "verify", str(tmp_path / "missing.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("grid audit: error: cannot read audit log")


def test_verify_garbage_is_invalid_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(b"\x00\xff not a log\n")
    assert cli.main(["audit", "verify", str(path)]) == 1
    assert "INVALID at step 0: line 1 is not UTF-8" in capsys.readouterr().out


def test_verify_through_a_subprocess(log_path: Path, tampered: Path) -> None:
    run = [sys.executable, "-m", "grid_core.cli", "audit", "verify"]
    ok = subprocess.run([*run, str(log_path)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"{log_path}: VALID: ")
    bad = subprocess.run([*run, str(tampered)], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "INVALID at step 2: the record's hash does not match its fields" in bad.stdout
    missing = subprocess.run(
        [*run, "/nonexistent/log"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2 and "cannot read audit log" in missing.stderr


# -------------------------------------------------------------- replay


@pytest.mark.usefixtures("toy_vocab")
def test_replay_valid(
    log_path: Path, lexicon: Path, log: AuditLog, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["audit", "replay", str(log_path), "--grammar", str(GRAMMAR), *PROJECTION]
    argv += ["--lexicon", str(lexicon), "--vocab", "toy", "--anchor", str(log.seal_hash)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{log_path}: REPLAYS: {len(log.records)} records bit-identical against the artifacts\n"
    )


@pytest.mark.usefixtures("toy_vocab")
def test_replay_divergence_and_artifacts(
    tmp_path: Path, log: AuditLog, lexicon: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A forger rewrote the chain: a different config hash at step 1, resealed.
    forged = AuditLog()
    for r in log.records:
        h = 0 if r.step == 1 else int(r.config_hash, 16)
        forged.append(h, r.mask_entry_id, r.token, r.blocked_count, r.kind)  # type: ignore[arg-type]
    assert log.seal is not None
    forged.close(log.seal["stop_reason"], log.seal["fingerprints"], log.seal["mode"])
    path = tmp_path / "forged.jsonl"
    forged.write(path)
    base = ["audit", "replay", str(path), "--grammar", str(GRAMMAR), "--vocab", "toy"]
    assert cli.main([*base, *PROJECTION, "--lexicon", str(lexicon)]) == 1
    out = capsys.readouterr().out
    assert "DIVERGES at step 1 (replay): config_hash: log 0000000000000000, replay " in out
    # Without the projection and the lexicon: other artifacts, named.
    assert cli.main(base) == 1
    out = capsys.readouterr().out
    assert "DIVERGES at the artifacts (artifacts): artifact fingerprints differ (grammar: " in out
    for name in ("grammar", "tables", "lexicon"):
        assert f"{name}: log " in out


@pytest.mark.usefixtures("toy_vocab")
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(["--grammar", "/nonexistent.lark"], "cannot read grammar", id="no-grammar"),
        pytest.param(
            ["--grammar", str(GRAMMAR), "--drop", "NOPE"], "has no terminal 'NOPE'", id="drop"
        ),
        pytest.param(["--grammar", str(GRAMMAR), "--lexicon", "BAD"], "lexicon", id="lexicon"),
        pytest.param(
            ["--grammar", str(GRAMMAR), "--lexicon", "SURROGATE"],
            "the TABLE_NAME word '\\ud800' holds a lone surrogate",
            id="lexicon-surrogate",
        ),
        pytest.param(
            ["--grammar", str(GRAMMAR), "--start", "nope"],
            "no rule defines the start symbol 'nope'",
            id="start",
        ),
        pytest.param(["--grammar", "LONG"], "File name too long", id="long-path"),
        pytest.param(
            ["--grammar", str(GRAMMAR), "--lexicon", "TWICE"],
            "the key 'TABLE_NAME' is given twice",
            id="lexicon-duplicate-key",
        ),
        # Without --grammar a replay source (another layer's, grid.replay) must know
        # the seal; a plain decode's seal is no source's.
        pytest.param(
            [],
            "no --grammar, and no installed replay source knows this log's seal",
            id="no-grammar-no-source",
        ),
        pytest.param(
            ["--drop", "INSERT"], "--start, --drop and --lexicon go with --grammar", id="drop-alone"
        ),
    ],
)
def test_replay_errors_exit_2(
    log_path: Path,
    tmp_path: Path,
    extra: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"TABLE_NAME": "orders"}')
    surrogate = tmp_path / "surrogate.json"
    surrogate.write_text('{"TABLE_NAME": ["\\ud800"]}')
    twice = tmp_path / "twice.json"
    twice.write_text('{"TABLE_NAME": ["a"], "TABLE_NAME": ["b"]}')
    files = {"BAD": str(bad), "SURROGATE": str(surrogate), "LONG": "x" * 300, "TWICE": str(twice)}
    extra = [files.get(x, x) for x in extra]
    assert cli.main(["audit", "replay", str(log_path), "--vocab", "toy", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grid audit: error: ") and message in err


def test_replay_rejects_unknown_vocabulary(
    log_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["audit", "replay", str(log_path), "--grammar", str(GRAMMAR), "--vocab", "x"]
    assert cli.main(argv) == 2  # one line, no usage text, no SystemExit
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("grid audit replay: error: argument --vocab")


def test_replay_with_a_real_vocabulary(
    tmp_path: Path, lexicon: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end with cl100k: a short hand-driven log replays from the command line."""
    vocab = cl100k()
    engine = Engine(ENGINE.grammar, vocab, LEXICON)
    guide, log, rest = GridGuide(engine), AuditLog(), b"select * from orders;"
    while not guide.is_terminated():
        ids = guide.mask_ids()
        fits = [i for i in ids if i not in vocab.eos_ids and rest.startswith(vocab.token_bytes[i])]
        t = max(fits, key=lambda i: len(vocab.token_bytes[i])) if rest else vocab.eos_ids[0]
        entry = mask_entry_id(engine.pack(ids).tobytes())
        kind = "eos" if t in vocab.eos_ids else "sampled"
        log.append(guide.config.hash, entry, t, vocab.n_vocab - len(ids), kind)
        guide.accept_token(t)
        rest = rest[len(vocab.token_bytes[t]) :]
    log.close("eos", engine.fingerprints(), {"mode": 1})
    path = tmp_path / "cl100k.jsonl"
    log.write(path)
    argv = ["audit", "replay", str(path), "--grammar", str(GRAMMAR), *PROJECTION]
    argv += ["--lexicon", str(lexicon), "--vocab", "cl100k"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"REPLAYS: {len(log.records)} records bit-identical" in out
    assert len(log.records) <= 8


# -------------------------------------------------------------- bounded reads, closed streams


@pytest.mark.usefixtures("toy_vocab")
@pytest.mark.parametrize("which", ["verify", "replay-log", "grammar", "lexicon"])
def test_every_file_is_read_with_a_bound(
    log_path: Path,
    lexicon: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    which: str,
) -> None:
    """A log, grammar or lexicon over ``files.MAX_FILE_BYTES`` is one line and exit 2, read no
    further (``/dev/zero`` was a MemoryError traceback); under the bound, the same
    command works. The bound is lowered here to the size of the smallest file."""
    limit = min(p.stat().st_size for p in (log_path, lexicon, GRAMMAR)) - 1
    replay = ["audit", "replay", str(log_path), "--vocab", "toy", "--grammar", str(GRAMMAR)]
    argv = {
        "verify": ["audit", "verify", str(log_path)],
        "replay-log": replay,
        "grammar": replay,
        "lexicon": [*replay, *PROJECTION, "--lexicon", str(lexicon)],
    }[which]
    assert cli.main(argv) in (0, 1)  # read whole, a verdict
    capsys.readouterr()
    monkeypatch.setattr(files, "MAX_FILE_BYTES", limit)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"holds more than {limit:,} bytes, the most read" in err, err
    assert err.startswith("grid audit: error: cannot read "), err


def test_verify_dev_zero_is_one_line() -> None:
    """The reviewer's case: a device that never ends is refused at the bound."""
    run = [sys.executable, "-m", "grid_core.cli", "audit", "verify", "/dev/zero"]
    out = subprocess.run(run, capture_output=True, text=True, check=False, timeout=120)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"grid audit: error: cannot read audit log /dev/zero: it holds more than "
        f"{files.MAX_FILE_BYTES:,} bytes, the most read\n"
    )


CLOSED = {
    "stdout": (">&-", "{log}", 141, ""),
    "stdout-bad-log": (">&-", "/nonexistent/log", 2, "grid audit: error: cannot read audit log"),
    "both": (">&- 2>&-", "{log}", 141, ""),
    "stderr-bad-log": ("2>&-", "/nonexistent/log", 2, ""),
}


@pytest.mark.parametrize(("redirect", "target", "code", "err"), CLOSED.values(), ids=list(CLOSED))
def test_a_process_started_with_a_closed_stream_is_quiet(
    log_path: Path, redirect: str, target: str, code: int, err: str
) -> None:
    """``grid audit verify LOG >&-`` (Python's ``sys.stdout`` is None) ends as into a
    closed pipe, quietly with exit 141 (it was an AttributeError traceback); an error
    is still its one line on stderr, exit 2. With ``2>&-`` the error line is dropped,
    never written to stdout."""
    script = f'"$0" -m grid_core.cli audit verify "$1" {redirect}'
    out = subprocess.run(
        ["sh", "-c", script, sys.executable, target.replace("{log}", str(log_path))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (out.returncode, out.stdout) == (code, ""), out.stderr
    assert out.stderr.startswith(err) and out.stderr.count("\n") == (1 if err else 0), out.stderr
