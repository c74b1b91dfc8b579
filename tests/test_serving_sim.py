"""The serving simulator (``bench/serving_sim.py``) runs end to end at a small size.

The benchmark's committed results come from its full run (``docs/serve.md``);
this smoke run keeps the script working on the code it measures: the vLLM
backend's row code (``RowsAhead``: a warm request's row at the bitmask, a slow
one's ahead) and its audit thread. Inside the run every sampled token is
checked against its row, every request's sealed log is verified and holds one
record per token, and the batch fill's three ways must write identical rows.
It reads Spider's ``concert_singer`` from ``../shared/data``, else the copy
vendored under ``data/spider`` (the cold-schema arm, which needs ``pets_1``,
is not run here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_serving_sim_runs_and_verifies_every_log(tmp_path: Path) -> None:
    """Fails if the simulator raises (a token outside its row, a log that does not
    verify or lacks a record, rows that differ between fill strategies) or if a
    request's log is missing from the counts."""
    out = tmp_path / "serving_sim.json"
    cmd = [sys.executable, str(ROOT / "bench" / "serving_sim.py"), "--sizes", "1,8"]
    cmd += ["--repeats", "1", "--cold-repeats", "0", "--batch-sizes", "8", "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert [w["audit_logs_verified"] for w in result["warm"]] == [1, 8]
    assert all(w["grid_rounds_skipped"] == 0 for w in result["warm"])
    (fill,) = result["batch_fill"]
    assert fill["batch"] == 8 and fill["audit_logs_verified"] == 8 * 5
