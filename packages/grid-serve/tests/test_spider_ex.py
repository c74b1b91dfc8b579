"""The Spider benchmark's smoke (bench/spider_ex.py, issue #16): the first 10 questions of
the vendored ``concert_singer`` database through the three arms, with SmolLM2.

It runs the benchmark's own code and checks what must hold whatever the model
answers: every constrained statement is a sentence of the role's language and its
audit log verifies, the shapes of ``summary.json`` and ``report.json``, and the gold
queries are judged correct against themselves. Accuracy is measured by the
``spider`` nox session, never asserted here.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
VENDORED = ROOT / "data" / "spider"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spider_ex", ROOT / "bench" / "spider_ex.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gold_queries_match_themselves_and_a_wrong_answer_does_not() -> None:
    """The judge itself: a gold query's rows equal themselves (in order when it orders),
    another query's do not, and a failing statement does not execute."""
    sx = bench()
    qs = sx.questions(VENDORED)
    assert len(qs) == 45 and {q["db_id"] for q in qs} == {"concert_singer"}
    db = sx.database(VENDORED, "concert_singer")
    for q in qs:
        rows, error = sx.execute(db, q["gold"])
        assert rows is not None, (q["gold"], error)
        assert sx.same_result(rows, rows, bool(sx.ORDER_BY.search(q["gold"])))
    count, _ = sx.execute(db, "SELECT count(*) FROM singer")
    names, _ = sx.execute(db, "SELECT name FROM singer")
    assert count is not None and names is not None and not sx.same_result(count, names, False)
    assert sx.same_result([(1,), (2,)], [(2,), (1,)], False)
    assert not sx.same_result([(1,), (2,)], [(2,), (1,)], True)
    rows, error = sx.execute(db, "SELECT no_column FROM singer")
    assert rows is None and "no such column" in error


def test_a_gold_query_runs_past_the_served_row_limit(tmp_path: Path) -> None:
    """The reference is not a served statement: a gold query of 1,500 rows is judged
    whole, where the same statement written by an arm is refused by the row limit
    (Spider's world_1 has such gold queries; the full run stopped at one)."""
    import sqlite3

    sx = bench()
    db = tmp_path / "big.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (x INTEGER)")
        c.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1500)])
    rows, error = sx.execute(db, "SELECT x FROM t", gold=True)
    assert rows is not None and len(rows) == 1500, error
    rows, error = sx.execute(db, "SELECT x FROM t")
    assert rows is None and "LimitExceededError" in error


def test_a_statement_nested_deeper_than_the_stack_is_judged() -> None:
    """``in_language`` judges every statement: ``abs(`` 20 deep exceeds the default
    recursion limit in lark's parser (SmolLM2 wrote ``SUM(SUM(...`` 19 deep on
    world_1), and is judged on a deeper stack, in the language or not; the
    interpreter's recursion limit is restored after."""
    import sys

    import pytest

    from grid_core.vocab import smollm2

    sx = bench()
    ctx = sx.Context(sx.database(VENDORED, "concert_singer"), smollm2())
    deep = "SELECT " + "abs(" * 20 + "1" + ")" * 20 + " FROM singer;"
    with pytest.raises(RecursionError):
        ctx.lang.in_language(deep.encode())
    limit = sys.getrecursionlimit()
    assert sx.in_language(ctx.lang, deep) is True
    assert sx.in_language(ctx.lang, deep.replace(" FROM", ") FROM")) is False
    assert sx.in_language(ctx.lang, "SELECT name FROM singer;") is True
    assert sys.getrecursionlimit() == limit


def test_ten_questions_through_the_three_arms(lm: Any, tmp_path: Path) -> None:
    sx = bench()
    out = tmp_path / "spider_ex"
    code = sx.main(
        ["--data", str(VENDORED), "--limit", "10", "--max-new-tokens", "32", "--out", str(out)]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == [lm.name]
    arms = summary[lm.name]
    assert set(arms) == {"unconstrained", "mode1", "repair"}
    for stats in arms.values():
        assert stats["n"] == 10 and set(stats) == {"n", "ex", "executes", "in_language"}
        assert 0 <= stats["ex"] <= stats["executes"] <= 1
    assert arms["mode1"]["in_language"] == 1.0 and arms["repair"]["in_language"] == 1.0
    records = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert len(records) == 10
    for r in records:
        for arm in ("mode1", "repair"):
            assert r[arm]["audit_verifies"] and r[arm]["tokens"] <= 32 * r[arm]["attempts"]
            assert r[arm]["language"] == "covering"  # grid ask's default for the starter role
        assert r["repair"]["attempts"] in (1, 2)
    report = json.loads((out / "report.json").read_text())
    assert set(report["paired_gain"]) == {
        "mode1_vs_unconstrained",
        "repair_vs_unconstrained",
        "repair_vs_mode1",
    }
    assert report["per_database"]["concert_singer"]["n"] == 10


def test_three_questions_in_the_roles_language(lm: Any, tmp_path: Path) -> None:
    """``--arms role,role_repair`` (``grid ask --language role`` and its repair pass):
    every statement is a sentence of the role's language whose audit log verifies,
    the repair arm's first decode is the role arm's, and the report has both arms and
    the repair pass's counts; a repair arm without its first arm is refused."""
    sx = bench()
    assert sx.main(["--data", str(VENDORED), "--arms", "role_repair"]) == 2
    out = tmp_path / "role"
    args = ["--data", str(VENDORED), "--limit", "3", "--max-new-tokens", "32", "--out", str(out)]
    assert sx.main([*args, "--arms", "role,role_repair"]) == 0
    arms = json.loads((out / "summary.json").read_text())[lm.name]
    assert set(arms) == {"role", "role_repair"}
    assert arms["role"]["in_language"] == arms["role_repair"]["in_language"] == 1.0
    for line in (out / "questions.jsonl").read_text().splitlines():
        r = json.loads(line)
        assert r["role"]["attempts"] == 1 and r["role_repair"]["attempts"] in (1, 2)
        assert r["role"]["audit_verifies"] and r["role_repair"]["audit_verifies"]
        assert "language" not in r["role"]
        if r["role_repair"]["attempts"] == 1:
            assert r["role_repair"]["sql"] == r["role"]["sql"]
    report = json.loads((out / "report.json").read_text())
    assert set(report["paired_gain"]) == {"role_repair_vs_role"}
    assert 0 <= report["role_repair"]["executable_or_refused"] <= 1
