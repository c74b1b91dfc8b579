"""The transformers processor with and without its work ahead of the forward pass.

Purpose. ``constrained_generate`` passes ``GridLogitsProcessor.ahead()`` to
``generate``: each step's catch-up and fill run on the processor's worker
thread during the next forward pass (DESIGN section 10), so the processor's
call only waits for them and applies the mask. This bench measures what that
saves and what it costs, paired per question: smollm2_50's first ``--limit``
questions (example schema and policy, SmolLM2-135M-Instruct, one torch
thread, greedy, 48 tokens, exit-intent stop, audit on), each decoded twice in
mode 2 by ``constrained_generate`` in alternating order:

- **ahead**: as shipped;
- **inline**: the criterion made inert (``_prefetch`` does nothing), so the
  call does the catch-up and fill itself, as before the change.

Per arm, medians over questions of: wall milliseconds per generated token
(the whole ``generate``), the processor's calls' own time per token
(``mask_seconds``: what ``generate`` waits for) and the work done ahead per
token (``ahead_seconds``, on the worker). Then the median and mean over
questions of the paired wall-time ratio ahead / inline (below 1: faster), and
whether both arms wrote the same tokens (they must: the same guide calls in
the same order).

Run: ``uv run --group serve python bench/processor_ahead.py``. Writes
``bench/results/processor_ahead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import host_description
from smollm2_50 import QUESTIONS

from grid_serve.model import load_model
from grid_serve.text2sql import RoleEngines, example_database, prompt_ids, schema_ddl
from grid_serve.transformers import GridLogitsProcessor, constrained_generate
from grid_sql.policy import example_policy
from grid_sql.schema import SchemaSnapshot

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("ahead", "inline")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    torch.set_num_threads(1)
    host = host_description()
    lm = load_model()
    db = example_database(Path(tempfile.mkdtemp(prefix="processor-ahead-")))
    schema = SchemaSnapshot.from_sqlite(db)
    engines = RoleEngines(schema, example_policy(schema), lm.vocab)
    prefetch = GridLogitsProcessor._prefetch
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for n, (role_name, question) in enumerate(QUESTIONS[: args.limit]):
        role = engines[role_name]
        ids = prompt_ids(lm.tokenizer, question, schema_ddl(schema, role.grants))
        for arm in ARMS if n % 2 == 0 else ARMS[::-1]:
            inert = lambda self, input_ids: None  # noqa: E731
            GridLogitsProcessor._prefetch = prefetch if arm == "ahead" else inert  # type: ignore[method-assign]
            t0 = time.perf_counter()
            (row,), proc = constrained_generate(
                lm.model, [role.engine.guide()], [ids], args.max_new_tokens, stop_on_exit=True
            )
            tokens = max(1, len(row.tokens))
            rows[arm].append(
                {
                    "tokens": list(row.tokens),
                    "wall_ms_per_token": 1e3 * (time.perf_counter() - t0) / tokens,
                    "mask_ms_per_token": 1e3 * proc.mask_seconds / tokens,
                    "ahead_ms_per_token": 1e3 * proc.ahead_seconds / tokens,
                }
            )
    GridLogitsProcessor._prefetch = prefetch  # type: ignore[method-assign]
    keys = ("wall_ms_per_token", "mask_ms_per_token", "ahead_ms_per_token")
    ratios = [
        a["wall_ms_per_token"] / b["wall_ms_per_token"]
        for a, b in zip(rows["ahead"], rows["inline"], strict=True)
    ]
    result = {
        "bench": "processor_ahead",
        "host": host,
        "questions": args.limit,
        "medians": {
            arm: {k: round(statistics.median(r[k] for r in rows[arm]), 4) for k in keys}
            for arm in ARMS
        },
        "wall_ratio_ahead_over_inline": {
            "median": round(statistics.median(ratios), 4),
            "mean": round(statistics.fmean(ratios), 4),
        },
        "same_tokens": all(
            a["tokens"] == b["tokens"] for a, b in zip(rows["ahead"], rows["inline"], strict=True)
        ),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "host"}, indent=1))
    (RESULTS / "processor_ahead.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
