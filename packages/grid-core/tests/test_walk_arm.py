"""The walk arm at default-suite size: 500 model-free generations, every stop in L.

``bench/walk_arm.py`` (its module header has the method) drives the decode
loop with a random sampler over the mask, over the SQLite dialect projected
for the example policy's four roles with their schema lexicons. The nox
``walk-arm`` session runs 10,000 generations; here 500, with cl100k's first
2,048 ids as the vocabulary (about a minute on a shared 2-core host; the full
cl100k mask costs some 30 times more per step in the pure-Python walk).
"""

from __future__ import annotations

import pytest
from bench_module import load_bench


@pytest.mark.parametrize("generation", ["full", "narrow"])
def test_walk_arm_500(generation: str) -> None:
    """Each role's whole language, and grid-sql's narrow generation profile (every stop
    in the profile's language and in the role's whole language)."""
    walk_arm = load_bench("walk_arm")
    summary = walk_arm.run(
        500, "cl100k:2048", seed=2026, max_budget=64, replay_every=25, generation=generation
    )
    assert summary["failures"] == []
    assert summary["in_language"] == 500
    for key in (
        "not_in_language",
        "outside_role_language",
        "dead_ends",
        "budget_overruns",
        "audit_invalid",
        "replay_diverged",
        "lark_disagrees",
        "checker_accepts_sqlite_refuses",
        "checker_refuses_sqlite_prepares",
    ):
        assert summary[key] == 0, key
    assert summary["replayed"] == 20
    assert summary["lark_ok"] > 0
    assert set(summary["stop_reasons"]) <= {"eos", "reserve"}
    assert all(r["generations"] == 125 for r in summary["roles"].values())
    native = summary["native_cache"]
    if native is not None:  # grid-kernels installed: the guides ran natively
        # one walk cached per miss (none evicted at this size); generations share them
        assert native["walk_misses"] == native["walks_held"] > 0
        assert native["walk_hits"] > 0
