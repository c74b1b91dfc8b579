"""The transformers processor without the model: smollm2_50's mode-2 statements replayed.

Purpose. Separate GRID's own cost per token in ``GridLogitsProcessor`` (issue
13's 0.05 ms target) from what running beside a CPU model does to it. Each
mode-2 statement of ``bench/results/smollm2_50.json`` is tokenized
longest-match over SmolLM2's vocabulary and fed, token by token, through a
fresh processor of its role's engine (the example schema and policy, one
``RoleEngines`` for the run, native guide, audit on, exit-intent stop on)
with random logits, in two settings:

- **warm**: nothing between two calls (the caches keep GRID's, numpy's and
  the interpreter's working sets);
- **evicted**: a 300 MB float32 array summed before each call, which evicts
  the caches and TLBs as a forward pass of SmolLM2-135M (540 MB of float32
  weights) does.

Per setting: the call's p50 and mean, the median and minimum over questions
of the processor's time per token (``mask_ms_per_token_median``'s
definition), and, in the evicted setting, the time of a call that does
nothing and of a warm row's native fill, for scale. The questions run in
smollm2_50's order, warm setting first: its first questions of each role meet
configurations never filled (first sight, as in smollm2_50), the evicted
setting then meets them filled, so its excess over the warm one is eviction
alone.

Run: ``uv run --group serve python bench/processor_replay.py [--out FILE]``.
Writes ``bench/results/processor_replay.json`` unless ``--out`` names another file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from grid_core.vocab import smollm2
from grid_serve.text2sql import RoleEngines, example_database
from grid_serve.transformers import GridLogitsProcessor
from grid_sql.policy import example_policy
from grid_sql.schema import SchemaSnapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import host_description
from serving_sim import longest_match

RESULTS = Path(__file__).resolve().parent / "results"
EVICT_FLOATS = 75_000_000  # 300 MB


def replay(engines: RoleEngines, questions: list[dict[str, Any]], evict: Any) -> dict[str, Any]:
    """Every statement through a fresh processor; ``evict`` (or None) runs before each call."""
    vocab = engines.vocab
    spellings = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
    longest = max(map(len, spellings))
    calls: list[float] = []
    per_question: list[float] = []
    generator = torch.Generator().manual_seed(0)
    for q in questions:
        engine = engines[q["role"]].engine
        proc = GridLogitsProcessor([engine.guide()], stop_on_exit=True)
        ids = torch.zeros((1, 4), dtype=torch.long)
        spent = 0.0
        n = 0
        for token in longest_match(spellings, q["mode2"]["sql"].encode(), longest):
            scores = torch.randn((1, vocab.n_vocab), generator=generator)
            if evict is not None:
                evict()
            t0 = time.perf_counter()
            proc(ids, scores)
            calls.append(time.perf_counter() - t0)
            spent += calls[-1]
            n += 1
            if not torch.isfinite(scores[0, token]):
                break  # the longest-match spelling leaves the role's language here
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        per_question.append(1e3 * spent / max(1, n))
    return {
        "calls": len(calls),
        "call_p50_us": round(1e6 * statistics.median(calls), 1),
        "call_mean_us": round(1e6 * statistics.fmean(calls), 1),
        "mask_ms_per_token_median": round(statistics.median(per_question), 4),
        "mask_ms_per_token_min": round(min(per_question), 4),
    }


def scale(engines: RoleEngines, evict: Any) -> dict[str, float]:
    """With the caches evicted before each: a call that does nothing, a warm native fill."""
    engine = engines["analyst"].engine
    guide = engine.guide()
    words = torch.zeros((1, engine.n_words), dtype=torch.int32).numpy()
    guide.fill_next_token_bitmask(words, 0)  # warm
    ops = {"nothing_us": lambda: None, "warm_fill_us": lambda: guide.fill_next_token_bitmask(words)}
    out: dict[str, list[float]] = {k: [] for k in ops}
    for _ in range(100):
        for key, op in ops.items():
            evict()
            t0 = time.perf_counter()
            op()
            out[key].append(time.perf_counter() - t0)
    return {k: round(1e6 * statistics.median(v), 1) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "processor_replay.json")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    host = host_description()
    questions = json.loads((RESULTS / "smollm2_50.json").read_text())["questions"]
    db = example_database(Path(tempfile.mkdtemp(prefix="processor-replay-")))
    schema = SchemaSnapshot.from_sqlite(db)
    # The replayed statements were written in the roles' whole language (comments,
    # bare aliases): the engines must be of that language, not the narrow profile.
    policy = example_policy(schema)
    roles = {n: dataclasses.replace(r, generation="full") for n, r in policy.roles.items()}
    engines = RoleEngines(schema, dataclasses.replace(policy, roles=roles), smollm2())
    big = torch.ones(EVICT_FLOATS)

    def evict() -> None:
        big.sum()

    result = {
        "bench": "processor_replay",
        "host": host,
        "statements": len(questions),
        "warm": replay(engines, questions, None),
        "evicted": replay(engines, questions, evict),
        "evicted_scale": scale(engines, evict),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "host"}, indent=1))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
