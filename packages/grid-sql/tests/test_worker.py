"""The statement worker (grid_sql.worker): limits enforced from outside the engine.

The runners below stand for an engine that does not look at its limits (a
function call SQLite's progress handler never interrupts, a DuckDB value its
memory_limit does not count): the worker must stop them at the deadline and
at the memory cap, and report the engine's refusals as the engine raised them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grid_sql import worker
from grid_sql.database import SQLITE_DATABASE
from grid_sql.execute import Result
from grid_sql.limits import LimitExceededError, Limits, value_bytes
from grid_sql.worker import GRACE, MEMORY_SLACK, Runner, WorkerError, run_isolated


def _sleeps(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    time.sleep(float(sql))
    return Result([], [], 0)


def _marks_and_sleeps(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    path.write_text("running")
    time.sleep(float(sql))
    return Result([], [], 0)


def _grows(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    held = []
    for _ in range(int(sql)):
        held.append(bytearray(1 << 20))  # touched: resident
        time.sleep(0.002)
    return Result(["mib"], [(len(held),)], 1)


def _dies(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    os.write(2, b"worker going down\n")
    os._exit(3)


def _prints(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    print("50% ████▌     ", flush=True)  # an engine's progress bar, say
    os.write(1, b"\x80\x04raw bytes")
    return Result(["x"], [(1,)], 1)


def _alarmed(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    if sql == "report":
        return Result(["left"], [(left,)], 1)
    os.kill(os.getpid(), signal.SIGALRM)  # as its backstop fires
    time.sleep(5)
    return Result([], [], 0)


class _Unpicklable(Exception):
    def __init__(self, words: str, *, lock: object) -> None:
        super().__init__(words)
        self.lock = lock


def _raises_unpicklable(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    import threading

    raise _Unpicklable("the engine's own words", lock=threading.Lock())


def _overflows(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    raise OverflowError("days=2000000000; must have magnitude <= 999999999")


def _refuses(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    raise sqlite3.OperationalError(sql)


def _limited(path: Path, sql: str, limits: Limits, keep: int) -> Result:
    raise LimitExceededError("max_rows", limits.max_rows, "the statement returns more")


ERRORS = (sqlite3.Error,)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("worker") / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER, b TEXT, c BLOB, d REAL)")
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        [(i, f"r{i}" if i % 3 else None, bytes([i % 256]) * 3, i / 7) for i in range(40)],
    )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    ("sql", "keep"),
    [
        ("SELECT * FROM t ORDER BY a", 10),
        ("SELECT b, count(*) FROM t GROUP BY b ORDER BY b", 100),
        ("SELECT a FROM t WHERE a < 0", 5),
        ("SELECT x'00ff', NULL, 1.5, 'é'", 1),
    ],
)
def test_a_worker_returns_what_the_engine_returns_here(db: Path, sql: str, keep: int) -> None:
    here = SQLITE_DATABASE.run(db, sql, Limits(), keep)
    assert SQLITE_DATABASE.run_isolated(db, sql, Limits(), keep) == here


@pytest.mark.parametrize(
    "sql", ["DELETE FROM t", "SELECT nothing FROM t", "ATTACH 'x.db' AS x", "SELEC 1"]
)
def test_an_engine_refusal_crosses_as_the_engine_raised_it(db: Path, sql: str) -> None:
    with pytest.raises(sqlite3.Error) as here:
        SQLITE_DATABASE.run(db, sql, Limits(), 1)
    with pytest.raises(sqlite3.Error) as there:
        SQLITE_DATABASE.run_isolated(db, sql, Limits(), 1)
    assert type(there.value) is type(here.value)
    assert str(there.value) == str(here.value)


def test_an_engine_limit_crosses_with_its_name_and_value(db: Path) -> None:
    with pytest.raises(LimitExceededError) as e:
        SQLITE_DATABASE.run_isolated(db, "SELECT * FROM t", Limits(max_rows=7), 1)
    assert (e.value.limit, e.value.value) == ("max_rows", 7)
    with pytest.raises(LimitExceededError) as e:
        run_isolated(_limited, ERRORS, db, "", Limits(max_rows=3), 1)
    assert (e.value.limit, e.value.value) == ("max_rows", 3)


def _named(module: str, name: str) -> Runner:
    """A runner the worker imports as ``module.name`` (not imported here)."""

    def stand_in(path: Path, sql: str, limits: Limits, keep: int) -> Result:
        raise AssertionError("runs in the worker only")

    stand_in.__module__, stand_in.__qualname__ = module, name
    return stand_in


def _start(db: Path) -> float:
    """Seconds a worker takes to start, run a trivial runner and reply, here and now."""
    t0 = time.monotonic()
    run_isolated(_sleeps, ERRORS, db, "0", Limits(), 1)
    return time.monotonic() - t0


def test_one_long_sqlite_call_is_stopped_at_its_deadline(db: Path) -> None:
    """Three ``%.1000000000c`` in one printf: one call SQLite's progress handler
    never interrupts (20-27 s in this process at a 1 s limit)."""
    sql = "SELECT length(printf('%.1000000000c%.1000000000c%.1000000000c'))"
    start = _start(db)
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError) as e:
        SQLITE_DATABASE.run_isolated(db, sql, Limits(wall_time=1.0), 1)
    assert e.value.limit == "wall_time"
    assert time.monotonic() - t0 < 2 * start + 1.0 + GRACE + 1.0


def test_the_documented_margins() -> None:
    """docs/policy.md, Execution limits, states these."""
    assert (GRACE, MEMORY_SLACK, worker.POLL_SECONDS) == (0.5, 64 << 20, 0.01)


def test_a_runner_that_ignores_its_deadline_is_stopped(db: Path) -> None:
    start = _start(db)
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError) as e:
        run_isolated(_sleeps, ERRORS, db, "60", Limits(wall_time=2.0), 1)
    assert (e.value.limit, e.value.value) == ("wall_time", 2.0)
    assert time.monotonic() - t0 < 2 * start + 2.0 + GRACE + 1.0
    assert run_isolated(_sleeps, ERRORS, db, "0.1", Limits(wall_time=2.0), 1).count == 0


def test_the_workers_own_alarm_is_set_and_read_as_its_deadline(db: Path) -> None:
    """The backstop for a caller whose thread does not run (the GIL held elsewhere):
    the worker's SIGALRM, at wall_time plus twice the grace."""
    [(left,)] = run_isolated(_alarmed, ERRORS, db, "report", Limits(wall_time=3.0), 1).rows
    assert 3.0 + GRACE < left <= 3.0 + 2 * GRACE
    with pytest.raises(LimitExceededError) as e:
        run_isolated(_alarmed, ERRORS, db, "", Limits(wall_time=3.0), 1)
    assert (e.value.limit, e.value.value) == ("wall_time", 3.0)


def test_a_runner_that_grows_past_its_memory_is_stopped(db: Path) -> None:
    """The cap is the worker's resident memory at its start plus max_memory plus the
    slack: just past it is stopped, just under it (start included) is not."""
    limits = Limits(max_memory=16 << 20, wall_time=30.0)
    cap_mib = (limits.max_memory + MEMORY_SLACK) >> 20
    with pytest.raises(LimitExceededError) as e:
        run_isolated(_grows, ERRORS, db, str(cap_mib + 16), limits, 1)
    assert (e.value.limit, e.value.value) == ("max_memory", 16 << 20)
    within = run_isolated(_grows, ERRORS, db, str(cap_mib - 24), limits, 1)
    assert within.rows == [(cap_mib - 24,)]


def test_what_the_engine_prints_cannot_break_the_reply(db: Path) -> None:
    assert run_isolated(_prints, ERRORS, db, "", Limits(), 1).rows == [(1,)]


def test_a_worker_that_does_not_start_is_given_up(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow_start.py").write_text(
        "import time\ntime.sleep(60)\ndef run(path, sql, limits, keep): pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(worker, "START_SECONDS", 1.0)
    t0 = time.monotonic()
    with pytest.raises(WorkerError, match="did not start in 1 s"):
        run_isolated(_named("slow_start", "run"), ERRORS, db, "", Limits(), 1)
    assert time.monotonic() - t0 < 10


def test_what_a_module_prints_at_import_cannot_stop_the_clock(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "noisy_start.py").write_text(
        "import time\nprint('plugin v1.2 loaded')\n"
        "def run(path, sql, limits, keep):\n    time.sleep(60)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(LimitExceededError, match="wall_time"):
        run_isolated(_named("noisy_start", "run"), ERRORS, db, "", Limits(wall_time=0.5), 1)


def test_the_callers_working_directory_is_not_on_the_workers_path(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "selectors.py").write_text("raise SystemExit(7)\n")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.chdir(tmp_path)
    assert SQLITE_DATABASE.run_isolated(db, "SELECT 1", Limits(), 1).rows == [(1,)]


def test_path_entries_that_are_not_text_are_left_out(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path, b"/tmp", 7])
    assert SQLITE_DATABASE.run_isolated(db, "SELECT 1", Limits(), 1).rows == [(1,)]


def test_no_worker_or_pipe_outlives_a_call(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipes are closed when the call ends, however it ends (no wait for the
    garbage collector), and a caller failing mid-watch kills its worker."""
    import gc

    fds = len(os.listdir("/proc/self/fd"))
    gc.disable()
    try:
        for sql in ("SELECT 1", "SELECT nothing FROM t"):
            for _ in range(10):
                with contextlib.suppress(sqlite3.Error):
                    SQLITE_DATABASE.run_isolated(db, sql, Limits(), 1)
        assert len(os.listdir("/proc/self/fd")) == fds
    finally:
        gc.enable()

    def broken(pid: int) -> int:
        raise RuntimeError("the caller failed")

    start = _start(db)
    monkeypatch.setattr(worker, "_resident", broken)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="the caller failed"):
        run_isolated(_sleeps, ERRORS, db, "60", Limits(wall_time=30.0), 1)
    assert time.monotonic() - t0 < 2 * start + 5.0  # killed, not waited for
    alive = [w for w in _children(os.getpid()) if _state(w) not in ("", "Z")]
    assert not alive


def test_other_failures_are_worker_errors_with_the_workers_words(db: Path) -> None:
    with pytest.raises(WorkerError, match="OverflowError: days=2000000000"):
        run_isolated(_overflows, ERRORS, db, "", Limits(), 1)
    with pytest.raises(WorkerError, match="status 3: worker going down"):
        run_isolated(_dies, ERRORS, db, "", Limits(), 1)
    with pytest.raises(WorkerError, match="OperationalError: boom"):
        run_isolated(_refuses, (LookupError,), db, "boom", Limits(), 1)
    with pytest.raises(sqlite3.OperationalError, match="boom"):
        run_isolated(_refuses, ERRORS, db, "boom", Limits(), 1)
    with pytest.raises(WorkerError, match="failed: _Unpicklable: the engine's own words"):
        run_isolated(_raises_unpicklable, (Exception,), db, "", Limits(), 1)


def test_nested_values_count_their_members() -> None:
    """DuckDB lists, structs and maps reach Python as lists, dicts and tuples."""
    assert value_bytes(["x" * 1000] * 30) == 8 + 30 * 1001
    assert value_bytes({"a": "x" * 10, "b": ["y" * 10]}) == 8 + (2 + 1 + 10) + (2 + 1 + 8 + 11)
    # members that count nothing alone count one byte each (NULLs in a list)
    assert value_bytes([None] * 4_000_000) == 8 + 4_000_000
    assert value_bytes(["", [], None]) == 8 + 1 + 1 + 8 + 1
    assert value_bytes((1, None, b"ab")) == 8 + 9 + 1 + 3
    assert value_bytes([[["é"]]]) == 8 + 1 + 8 + 1 + 8 + 1 + 2


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.isdigit() and int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def test_a_worker_dies_with_a_caller_killed_outright(tmp_path: Path) -> None:
    """A caller killed by SIGKILL runs no ``finally``: the kernel kills its worker
    (``PR_SET_PDEATHSIG``), which would otherwise sleep its 60 s."""
    mark = tmp_path / "running"
    code = (
        "import sys; sys.path[:0] = sys.argv[2:]\n"
        "from pathlib import Path\n"
        "from grid_sql.limits import Limits\n"
        "from grid_sql.worker import run_isolated\n"
        "from test_worker import _marks_and_sleeps\n"
        "run_isolated(_marks_and_sleeps, (), Path(sys.argv[1]), '60', "
        "Limits(wall_time=60.0), 1)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code, str(mark), *sys.path])
    try:
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(caller.pid)
        assert mark.exists() and workers, "the caller's worker did not start its statement"
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait()
        deadline = time.monotonic() + 5
        while any(os.path.exists(f"/proc/{w}") for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [w for w in workers if _state(w) not in ("", "Z")]
        assert not alive, f"worker {alive} outlived its caller"
    finally:
        caller.kill()
        caller.wait()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
