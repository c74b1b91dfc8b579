"""Parse events (issue 19): their per-token cost, and how early a statement's tables are known.

Purpose. ``Engine.guide(events=spec)`` gives the native session with its own
event tracker (``grid_kernels`` ``events.rs``; docs/events.md). This measures, on
Spider dev gold statements (grid-sql's sqlite dialect, no lexicon, a real
vocabulary), through the public calls the adapters make, audit on:

1. **cost**: each statement is first replayed once (``kernels_step.first_sight``:
   the native guide, greedy longest admitted token; this warms the caches and
   gives the token sequences), then ``--passes`` warm passes replay every
   sequence in fresh guides of three variants taking turns (rotating order, so
   that they share the host's load): ``off`` = ``engine.guide()`` (the native
   session, exactly what a caller gets without events), ``on`` = the same with
   the sqlite dialect's event spec, and ``on_read`` = ``on`` plus what a
   consumer does each step (``event_count``, and ``events(since)`` when it
   grew: what ``grid_serve.event_lines`` reads). One warm step =
   ``fill_next_token_bitmask`` then ``accept_token``, timed per token with
   ``perf_counter_ns``, the GC off. Target (issue 19): ``on`` at most +10% over
   ``off`` (p50 and mean): the guide's cost; ``on_read`` adds the consumer's.
2. **tables known before EOS**: in each ``on`` replay, the step of the last
   ``table`` event (the statement's table set complete in the stream) and the
   step of EOS; *lead* = EOS step - that step, in tokens. Reported as median,
   quantiles and a histogram. Statements with no table are counted apart.
   Every stream is also checked equal to the post-hoc events of its statement.

3. **events off, before and after** (``--off-only``): the ``off`` variant
   alone, so that it can run on an older grid-core (a ``git archive`` of
   ``packages/grid-core/src`` put first on ``PYTHONPATH``; that grid-core has
   no events) and on this one: the warm step of a guide without events must
   not change (``results/events_off_before.json``, ``events_off_after.json``).

Times are wall clock on one thread of a shared 2-core host: compare the two
variants of one run, not absolute times across runs.

Run: ``cd /work/main && uv run python bench/events.py --help``.
"""

from __future__ import annotations

import argparse
import array
import gc
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from host import host_description, write_summary
from kernels_step import VOCABS, corpus, first_sight, quantiles

import grid_core
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_sql.dialects import SQLITE

ROOT = Path(__file__).resolve().parent.parent


def replay(guide: Any, seq: list[int], row: array.array[int], times: list[float]) -> None:
    for token in seq:
        t0 = time.perf_counter_ns()
        guide.fill_next_token_bitmask(row)
        guide.accept_token(token)
        times.append((time.perf_counter_ns() - t0) / 1e3)


def replay_reading(guide: Any, seq: list[int], row: array.array[int], times: list[float]) -> None:
    """``replay``, reading the new events after each token as a consumer does."""
    seen = 0
    for token in seq:
        t0 = time.perf_counter_ns()
        guide.fill_next_token_bitmask(row)
        guide.accept_token(token)
        count = guide.event_count
        if count != seen:
            guide.events(since=min(seen, count))
            seen = count
        times.append((time.perf_counter_ns() - t0) / 1e3)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--vocab", default="qwen", choices=sorted(VOCABS))
    p.add_argument("--replays", type=int, default=300, help="Spider dev statements replayed")
    p.add_argument("--passes", type=int, default=3, help="warm passes over the replays")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/events.json")
    p.add_argument("--off-only", action="store_true", help="time the guide without events only")
    args = p.parse_args(argv)
    if args.off_only:
        return off_only(args)
    host = host_description()
    print(f"host: {host['cpu_model'] or host['machine']}, load {host['loadavg_start']}")

    from grid_core.events import EventStream, tracker
    from grid_sql.events import event_spec

    grammar = load_grammar(SQLITE.grammar_text, "sqlite")
    engine = Engine(grammar, VOCABS[args.vocab]())
    assert engine.kernel is not None, "grid-kernels is not loaded (GRID_KERNELS=0?)"
    spec = event_spec(SQLITE, grammar)
    stmts = corpus(grammar, engine, args.replays, args.seed)
    seqs, _, rejected = first_sight(engine, stmts)
    row = array.array("i", bytes(4 * engine.n_words))

    times: dict[str, list[float]] = {"off": [], "on": [], "on_read": []}
    leads: list[int] = []
    no_table = mismatched = 0
    post_hoc = tracker(engine, spec)
    gc.disable()
    try:
        for n in range(args.passes):
            for i, seq in enumerate(seqs):
                variants = ("off", "on", "on_read")
                k = (i + n) % 3
                for variant in variants[k:] + variants[:k]:
                    guide = engine.guide(events=None if variant == "off" else spec)
                    if variant == "on_read":
                        replay_reading(guide, seq, row, times[variant])
                    else:
                        replay(guide, seq, row, times[variant])
                    if variant != "on" or n:
                        continue
                    assert isinstance(guide, EventStream)
                    events = guide.events()
                    written = guide.output()
                    if [e.key for e in events] != [e.key for e in post_hoc.parse(written)]:
                        mismatched += 1
                    tables = [e.step for e in events if e.kind == "table"]
                    if tables:
                        leads.append(len(seq) - max(tables))
                    else:
                        no_table += 1
    finally:
        gc.enable()

    cost = {v: quantiles(ts) | {"mean": statistics.fmean(ts)} for v, ts in times.items()}
    overhead = {
        variant: {
            stat: cost[variant][stat] / cost["off"][stat] - 1 for stat in ("p50", "p90", "mean")
        }
        for variant in ("on", "on_read")
    }
    lead_q = quantiles(leads)
    histogram = Counter(min(x, 20) for x in leads)
    summary = {
        "benchmark": "events",
        "command": "uv run python bench/events.py " + " ".join(sys.argv[1:]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "grammar": "sqlite (grid-sql), no lexicon; corpus: Spider dev gold",
        "audit": True,
        "host": host | {"loadavg_end": host_description()["loadavg_start"]},
        "statements": len(seqs),
        "rejected_replays": rejected,
        "streams_unequal_to_post_hoc": mismatched,
        "warm_step_us": cost,
        "events_overhead": overhead,
        "target_overhead": 0.10,
        "tables_known_tokens_before_eos": {
            "median": statistics.median(leads) if leads else None,
            "mean": statistics.fmean(leads) if leads else None,
            "quantiles": lead_q,
            "p10": sorted(leads)[len(leads) // 10] if leads else None,
            "p25": sorted(leads)[len(leads) // 4] if leads else None,
            "min": min(leads, default=None),
            "histogram_capped_at_20": {str(k): histogram[k] for k in sorted(histogram)},
            "statements_without_table": no_table,
        },
    }
    print(json.dumps({k: summary[k] for k in ("warm_step_us", "events_overhead")}, indent=1))
    print(json.dumps(summary["tables_known_tokens_before_eos"], indent=1))
    write_summary(args.out, summary)
    return 0


def off_only(args: argparse.Namespace) -> int:
    """The warm step of ``engine.guide(audit=False)`` alone (works on a grid-core
    without events)."""
    host = host_description()
    grammar = load_grammar(SQLITE.grammar_text, "sqlite")
    engine = Engine(grammar, VOCABS[args.vocab]())
    assert engine.kernel is not None, "grid-kernels is not loaded (GRID_KERNELS=0?)"
    seqs, _, rejected = first_sight(engine, corpus(grammar, engine, args.replays, args.seed))
    row = array.array("i", bytes(4 * engine.n_words))
    times: list[float] = []
    gc.disable()
    try:
        for _ in range(args.passes):
            for seq in seqs:
                replay(engine.guide(audit=False), seq, row, times)
    finally:
        gc.enable()
    summary = {
        "benchmark": "events --off-only",
        "command": "uv run python bench/events.py " + " ".join(sys.argv[1:]),
        "grid_core": grid_core.__file__,
        "host": host | {"loadavg_end": host_description()["loadavg_start"]},
        "statements": len(seqs),
        "rejected_replays": rejected,
        "warm_step_us": quantiles(times) | {"mean": statistics.fmean(times)},
    }
    print(json.dumps(summary["warm_step_us"]))
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
