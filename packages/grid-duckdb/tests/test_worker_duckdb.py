"""DuckDB statements in GRID's worker (grid_sql.worker): what DuckDB's own limits miss.

DuckDB's `memory_limit` does not count a scalar value (`repeat('x', 1e9)`)
nor the conversion of a result to Python, and its interrupt is not seen inside
one function over one vector of rows; the worker stops both from outside. A
nested value counts its members toward `max_result_bytes`, and a value Python
cannot hold is the worker's error, not a traceback.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

from grid_duckdb.database import DUCKDB_DATABASE, run_readonly
from grid_sql.limits import LimitExceededError, Limits
from grid_sql.worker import GRACE, WorkerError

#: Seconds a worker may take to start on a loaded machine, on top of its limits.
START = 5.0


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("worker") / "t.duckdb"
    db = duckdb.connect(str(out))
    db.execute("CREATE TABLE emp AS SELECT i AS id, 'name' || i AS name FROM range(1000) t(i)")
    db.close()
    return out


def test_nested_values_count_toward_the_result_bytes(path: Path) -> None:
    sql = "SELECT [repeat('x', 100000) FOR i IN range(30)] AS l"
    with pytest.raises(LimitExceededError, match="max_result_bytes"):
        run_readonly(path, sql, Limits(max_result_bytes=64 << 10), 1)
    sql = "SELECT {'a': repeat('x', 100000), 'b': [repeat('y', 100000)]} AS s"
    with pytest.raises(LimitExceededError, match="max_result_bytes"):
        run_readonly(path, sql, Limits(max_result_bytes=64 << 10), 1)
    # a list of NULLs counted 8 bytes whatever its length (a red team's, session 45)
    sql = "SELECT array_agg(NULL) FROM emp AS a, emp AS b WHERE a.id < 100"
    with pytest.raises(LimitExceededError, match="max_result_bytes"):
        run_readonly(path, sql, Limits(max_result_bytes=64 << 10), 1)
    small = run_readonly(path, "SELECT list(name) FROM emp WHERE id < 3", Limits(), 1)
    assert sorted(small.rows[0][0]) == ["name0", "name1", "name2"]


def test_work_past_the_memory_limit_is_refused_not_spilled_to_disk(tmp_path: Path) -> None:
    """DuckDB's default spills a join, sort or aggregate larger than
    `memory_limit` into `<db>.tmp` beside the file, without bound (each of these
    runs there at 32 MiB, leaving the directory); GRID's connection has no
    temporary directory, so each stops at `max_memory` and nothing is written.
    The same join over fewer rows runs."""
    path = tmp_path / "wide.duckdb"
    db = duckdb.connect(str(path))
    db.execute("CREATE TABLE w AS SELECT i AS a, md5(i::VARCHAR) AS b FROM range(1000000) t(i)")
    db.close()
    limits = Limits(max_memory=32 << 20, wall_time=30.0)
    for sql in (
        "SELECT count(*) FROM w AS x JOIN w AS y ON x.b = y.b",
        "SELECT count(*) FROM (SELECT b FROM w ORDER BY b OFFSET 5)",
        "SELECT count(DISTINCT b) FROM w",
    ):
        with pytest.raises(LimitExceededError) as e:
            run_readonly(path, sql, limits, 1)
        assert e.value.limit == "max_memory", sql
    small = "SELECT count(*) FROM w AS x JOIN w AS y ON x.b = y.b WHERE x.a < 1000"
    assert run_readonly(path, small, limits, 1).rows == [(1000,)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.duckdb"]


def test_a_memory_limit_too_small_to_open_the_file_is_the_memory_limit(path: Path) -> None:
    """Below what DuckDB takes to open a file (about 256 KiB) the connection itself
    runs out of memory: reported as ``max_memory``, as inside a statement (it was
    DuckDB's raw OutOfMemoryException, "duckdb refused it")."""
    with pytest.raises(LimitExceededError) as e:
        run_readonly(path, "SELECT 1", Limits(max_memory=64 << 10), 1)
    assert e.value.limit == "max_memory"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT length(repeat('x', 1000000000))",  # ~2 GiB in this process
        "SELECT length(repeat(name, 20000000)) FROM emp WHERE id < 3",
        "SELECT range(10000000) AS l",  # the conversion to Python
    ],
)
def test_memory_duckdb_does_not_count_stops_the_worker(path: Path, sql: str) -> None:
    with pytest.raises(LimitExceededError) as e:
        DUCKDB_DATABASE.run_isolated(path, sql, Limits(max_memory=32 << 20, wall_time=30.0), 1)
    assert e.value.limit == "max_memory"


def test_a_vector_duckdb_does_not_interrupt_stops_at_the_deadline(path: Path) -> None:
    sql = (
        "SELECT count(*) FROM range(2048) t(i) "
        "WHERE jaro_similarity(repeat('a', 20000) || i, repeat('b', 20000)) > 2"
    )
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError) as e:
        DUCKDB_DATABASE.run_isolated(path, sql, Limits(wall_time=1.0), 1)
    assert e.value.limit == "wall_time"
    assert time.monotonic() - t0 < 1.0 + GRACE + START


def test_a_value_python_cannot_hold_is_a_worker_error(path: Path) -> None:
    with pytest.raises(WorkerError, match="OverflowError"):
        DUCKDB_DATABASE.run_isolated(path, "SELECT INTERVAL 2000000000 DAYS", Limits(), 1)
    with pytest.raises(duckdb.Error):
        DUCKDB_DATABASE.run_isolated(path, "DELETE FROM emp", Limits(), 1)
    assert DUCKDB_DATABASE.run_isolated(path, "SELECT count(*) FROM emp", Limits(), 1).rows == [
        (1000,)
    ]
