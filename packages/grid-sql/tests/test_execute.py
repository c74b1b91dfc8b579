"""Execution limits on real SQLite (grid_sql.execute, grid_sql.limits).

Every runaway statement stops within its limit with a LimitExceededError that
names the limit and its value: an infinite recursive CTE and a cubic cross join
by wall time, a large cross join by rows, big values by result bytes, a big
allocation by the SQLite heap. SQLite's heap limit is process-wide and can only
be lowered (grid_sql.execute's header), so the tests that set a small one run
in a subprocess and leave this process's SQLite alone.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grid_core.errors import ExecutionError, GridError
from grid_sql import execute
from grid_sql.execute import run_readonly
from grid_sql.limits import DEFAULT_LIMITS, LimitExceededError, Limits, check_limit, value_bytes

RUNAWAY_CTE = (
    "WITH RECURSIVE cte(id) AS (SELECT 1 UNION ALL SELECT id+1 FROM cte) SELECT max(id) FROM cte;"
)
SLOW = 0.5  # seconds: the wall time of the tests that hit it
TICK = 0.001  # seconds the ticking clock advances per reading


class TickingClock:
    """A deterministic clock for ``grid_sql.execute``: every reading advances it by
    TICK, so a deadline falls after a fixed number of readings (progress-handler
    calls and fetched rows), whatever the machine's load. How long a statement
    runs is then counted in those readings, never measured."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += TICK
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> TickingClock:
    """``grid_sql.execute`` reads the ticking clock (this test only)."""
    ticking = TickingClock()
    monkeypatch.setattr(execute, "time", ticking)
    return ticking


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table ``t(a)`` of 1,000 integer rows."""
    path = tmp_path_factory.mktemp("limits") / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
    con.commit()
    con.close()
    return path


def hits(
    db: Path, sql: str, limits: Limits, clock: TickingClock
) -> tuple[LimitExceededError, float]:
    """The error ``sql`` stops with, and the ticking clock's time it took."""
    start = clock.now
    with pytest.raises(LimitExceededError) as info:
        run_readonly(db, sql, limits)
    return info.value, clock.now - start


def test_a_result_within_the_limits_is_returned(db: Path) -> None:
    result = run_readonly(db, "SELECT a FROM t ORDER BY a LIMIT 5", DEFAULT_LIMITS, keep=2)
    assert (result.columns, result.rows, result.count, result.more) == (
        ["a"],
        [(0,), (1,)],
        5,
        True,
    )


def test_the_recursive_cte_stops_at_the_time_limit(db: Path) -> None:
    """On the real clock: the statement never ends by itself, so ending at all is
    the interrupt's doing, and never before the limit (a lower bound no load can
    break; how far past it is counted on the ticking clock below)."""
    start = time.monotonic()
    with pytest.raises(LimitExceededError) as info:
        run_readonly(db, RUNAWAY_CTE, Limits(wall_time=SLOW))
    assert time.monotonic() - start >= SLOW
    error = info.value
    assert (error.limit, error.value) == ("wall_time", SLOW)
    assert str(error) == "limit wall_time = 0.5 s exceeded: the statement ran past 0.5 s"
    assert isinstance(error, ExecutionError) and isinstance(error, GridError)


def test_the_recursive_cte_stops_at_the_first_reading_past_the_limit(
    db: Path, clock: TickingClock
) -> None:
    error, took = hits(db, RUNAWAY_CTE, Limits(wall_time=SLOW), clock)
    assert (error.limit, error.value) == ("wall_time", SLOW)
    assert SLOW < took <= SLOW + 3 * TICK


def test_a_cubic_cross_join_stops_at_the_time_limit(db: Path, clock: TickingClock) -> None:
    error, took = hits(db, "SELECT count(*) FROM t a, t b, t c", Limits(wall_time=SLOW), clock)
    assert error.limit == "wall_time" and SLOW < took <= SLOW + 3 * TICK


def test_a_large_cross_join_hits_the_row_limit(db: Path, clock: TickingClock) -> None:
    """The 1,001st row stops it, long before the wall time would."""
    error, took = hits(db, "SELECT * FROM t a, t b", DEFAULT_LIMITS, clock)
    assert (error.limit, error.value) == ("max_rows", 1000)
    assert "more than 1000 rows" in str(error) and took < DEFAULT_LIMITS.wall_time / 2
    # exactly max_rows rows is within the limit
    assert run_readonly(db, "SELECT * FROM t", Limits(max_rows=1000)).count == 1000


def test_wide_rows_hit_the_result_byte_limit(db: Path, clock: TickingClock) -> None:
    limits = Limits(max_result_bytes=10_000)
    error, _ = hits(db, "SELECT hex(randomblob(500)) FROM t", limits, clock)
    assert (error.limit, error.value) == ("max_result_bytes", 10_000)
    assert "the first 11 rows hold more than 10000 bytes" in str(error)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT randomblob(1e9)",
        "SELECT length(randomblob(1e9))",
        "SELECT zeroblob(1e9)",
        "SELECT length(zeroblob(1e9))",
    ],
)
def test_a_gigabyte_value_hits_the_result_byte_limit(
    db: Path, sql: str, clock: TickingClock
) -> None:
    error, took = hits(db, sql, DEFAULT_LIMITS, clock)
    assert error.limit == "max_result_bytes" and took < DEFAULT_LIMITS.wall_time / 2
    assert "string or blob too big" in str(error)


def test_a_long_table_definition_does_not_lower_the_byte_limit(tmp_path: Path) -> None:
    """SQLite's length limit bounds every string it holds, the schema's CREATE
    statements and the statement's text included: set to a ``max_result_bytes`` below
    the longest CREATE (a wide table the statement never reads), every statement on
    the database failed as a value grown too big. The limit is raised to that length;
    results are still held to ``max_result_bytes`` by the fetch loop, and a value past
    both is still stopped while it is computed."""
    path = tmp_path / "wide.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE small (a INTEGER)")
        con.executemany("INSERT INTO small VALUES (?)", [(1,), (2,)])
        columns = ", ".join(f"column_with_a_long_name_{i} TEXT" for i in range(100))
        con.execute(f"CREATE TABLE wide ({columns})")
    con.close()
    limits = Limits(max_result_bytes=2000)
    assert run_readonly(path, "SELECT count(*) FROM small", limits).rows == [(2,)]
    tiny = Limits(max_result_bytes=16)  # shorter than the statement itself
    assert run_readonly(path, "SELECT a FROM small ORDER BY a", tiny).rows == [(1,), (2,)]
    with pytest.raises(LimitExceededError, match="hold more than 2000 bytes"):
        run_readonly(path, "SELECT hex(randomblob(1250))", limits)  # 2,500 bytes returned
    with pytest.raises(LimitExceededError, match="string or blob too big"):
        run_readonly(path, "SELECT length(zeroblob(100000))", limits)


def test_printf_of_a_gigabyte_ends_cleanly(db: Path) -> None:
    """SQLite 3.40's printf pads one character at a time inside one function call, where
    no progress handler runs: it ends (about 5 s) with a limit or a NULL, never a hang."""
    sql = "SELECT printf('%.*c', 1000000000, 'x')"
    try:
        result = run_readonly(db, sql, Limits(wall_time=SLOW))
    except LimitExceededError as e:
        assert e.limit in ("wall_time", "max_result_bytes", "max_memory")
    else:
        assert result.rows in ([(None,)], [("",)])


def test_writes_still_fail_read_only(db: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        run_readonly(db, "DELETE FROM t")
    with pytest.raises(sqlite3.OperationalError):
        run_readonly(db, f"ATTACH '{db}' AS other")
    assert run_readonly(db, "SELECT count(*) FROM t").rows == [(1000,)]


_CHILD = """
import json, sys
from pathlib import Path
from grid_sql import execute
from grid_sql.execute import run_readonly
from grid_sql.limits import LimitExceededError, Limits
out = []
for sql in sys.argv[2:]:
    try:
        out.append(["ok", run_readonly(Path(sys.argv[1]), sql, Limits(**LIMITS)).rows])
    except LimitExceededError as e:
        out.append([e.limit, e.value, str(e)])
print(json.dumps(out))
"""


def run_in_child(db: Path, limits: dict[str, int | float], *sql: str) -> list[list[object]]:
    code = _CHILD.replace("LIMITS", repr(limits))
    done = subprocess.run(
        [sys.executable, "-c", code, str(db), *sql], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: list[list[object]] = json.loads(done.stdout)
    return result


def test_big_allocations_hit_the_memory_limit(db: Path) -> None:
    """With the byte limit above them, 100 MB values hit an 8 MiB SQLite heap."""
    limits = {"max_memory": 8 << 20, "max_result_bytes": 500_000_000, "wall_time": 20.0}
    out = run_in_child(
        db,
        limits,
        "SELECT length(randomblob(1e8))",
        "SELECT length(printf('%.*c', 100000000, 'x'))",
        "SELECT 1",
    )
    for row in out[:2]:
        assert row[:2] == ["max_memory", 8 << 20]
        assert "SQLite ran out of its 8388608 byte heap" in str(row[2])
    assert out[2] == ["ok", [[1]]]  # the connection after a failed allocation is fine


def test_a_sort_past_the_heap_is_refused_not_spilled_to_disk(tmp_path: Path) -> None:
    """A sort larger than the heap does not spill to a temporary file (SQLite's
    default: an unbounded file under /var/tmp); it stops at the memory limit,
    while the same sort over fewer rows runs."""
    path = tmp_path / "wide.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE w (a INTEGER, b TEXT)")
    con.execute(
        "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < 199999) "
        "INSERT INTO w SELECT i, hex(randomblob(32)) FROM r"
    )
    con.commit()
    con.close()
    limits = {"max_memory": 8 << 20, "wall_time": 30.0}
    sort = "SELECT count(*) FROM (SELECT b, a FROM w {} ORDER BY b LIMIT -1 OFFSET 5)"
    big, small = run_in_child(path, limits, sort.format(""), sort.format("WHERE a < 1000"))
    assert big[:2] == ["max_memory", 8 << 20]
    assert small == ["ok", [[995]]]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("wall_time", 0, "must be a number of seconds in (0, 86400], not 0"),
        ("wall_time", float("nan"), "not nan"),
        ("wall_time", float("inf"), "not inf"),
        ("wall_time", "5", "must be a number of seconds"),
        ("max_rows", 0, "must be an integer in [1, 2**62], not 0"),
        ("max_rows", True, "must be a number, not a boolean"),
        ("max_memory", 1.5, "must be an integer"),
        ("max_result_bytes", 2**63, "must be an integer in [1, 2**62]"),
        ("max_cpu", 1, "unknown limit 'max_cpu'"),
    ],
)
def test_check_limit_refuses_bad_values(name: str, value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        check_limit(name, value)
    assert message in str(info.value)


def test_limits_helpers() -> None:
    assert Limits(5.0, 1000, 1 << 20, 64 << 20) == DEFAULT_LIMITS
    assert DEFAULT_LIMITS.replace(max_rows=5, wall_time=None).max_rows == 5
    assert DEFAULT_LIMITS.describe() == (
        "wall_time 5 s, max_rows 1000 rows, max_result_bytes 1048576 bytes, "
        "max_memory 67108864 bytes"
    )
    assert Limits(wall_time=0.25).postgres_settings() == {"statement_timeout": "250ms"}
    assert [value_bytes(v) for v in (None, 3, 2.5, "hé", b"\x00\x01")] == [0, 8, 8, 3, 2]
    with pytest.raises(ValueError):
        Limits(max_rows=-1)


def test_postgres_statement_timeout_stops_the_runaway_cte() -> None:
    """``Limits.postgres_settings()`` on the PostgreSQL server CI starts: the session's
    ``statement_timeout`` cancels the recursive CTE of issue 15 (SQLSTATE 57014) within
    about its wall time, and a statement inside the limit runs. GRID has no PostgreSQL
    run path of its own: this is the setting a caller's session takes."""
    from pg_server import running_server

    settings = Limits(wall_time=0.25).postgres_settings()
    assert settings == {"statement_timeout": "250ms"}
    sets = "".join(f"SET {key} = '{value}';\n" for key, value in settings.items())
    with running_server("SELECT 1;") as server:
        t0 = time.monotonic()
        done = server.run(sets + RUNAWAY_CTE + "\n", "-v", "VERBOSITY=verbose")
        elapsed = time.monotonic() - t0
        assert "57014" in done.stderr and "statement timeout" in done.stderr, done.stderr
        assert elapsed < 10, f"the timeout did not stop the statement ({elapsed:.1f} s)"
        fine = server.run(sets + "SELECT count(*) FROM generate_series(1, 1000);\n")
        assert fine.stdout.strip() == "1000" and fine.stderr == "", fine.stderr
