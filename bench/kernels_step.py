"""The serving step in Rust: warm accept + fill per token, and the cold miss.

Purpose. What grid-kernels' native session (``grid_kernels.Session``, wrapped
by ``grid_core.kernels.KernelGuide``) costs per decode step, on replays of the
SQL corpus (Spider dev gold, the sqlite dialect of grid-sql, free identifiers)
over real vocabularies (Qwen and Llama-3 by default), and what a cold cache
miss costs before and after moving it into Rust:

1. **first sight**: each statement is replayed once in a fresh guide from
   ``Engine.guide()`` (the native guide, audit on: the path the adapters run;
   a model writing the statement: at each step the admitted token whose
   spelling is the longest prefix of the rest); every step's fill is timed and
   classified by how it was served (``last_fill``): ``row`` (its walk cached
   and its stack seen before: one copy), ``classes`` (walks cached, CD
   verdicts evaluated against the live stack), ``walked`` (a walk was cold).
   The hit rate is the share of steps that walked nothing. A replay that gets
   stuck, or ends without EOS admitted, is *rejected* (a completeness bug).
2. **warm, audit on and off**: the same token sequences replayed ``--passes``
   times, each in fresh guides of four variants taking turns (rotating order,
   so that they share the host's load): the raw native session with audit off
   and on (``engine.kernel.session(0, audit)``: ``native_off``, ``native_on``)
   and the protocol guide (``engine.guide(audit=...)``: ``guide_off``,
   ``guide_on``, the headline). One warm serving step = ``fill_next_token_bitmask``
   then ``accept_token``, timed per token with ``perf_counter_ns`` (the GC off
   during a pass). After each audited replay its records are read once
   (native ``audit_lines()``; the guide's ``audit_log()``), timed and divided by
   its steps. Audit's cost per warm step = (``guide_on`` p50 - ``guide_off``
   p50) + the ``audit_log()`` read per step. Targets: ``guide_on`` p50 under
   5 us; audit's cost at most 0.5 us per step (issue #13). The Python
   ``GridGuide`` (same verbs, audit on, caches warm) runs on the first
   ``--python-replays`` statements for the ratio.
3. **warm, CPU caches cold**: on a server each fill and accept follows a
   forward pass that has streamed the model's weights through every cache.
   The first ``--cold-cache-replays`` sequences are replayed again (walks and
   rows all cached) with ``--flush-mb`` MiB of memory read before each fill
   and before each accept, in the raw native session (``native_on``) and
   through the protocol guide (``guide_on``), audit on, taking turns. What the
   guide adds over the session is its Python layer, if any.
4. **cold miss per entry**: root walks of ``--cold-configs`` configurations
   sampled from the replays, each a real miss: ``python`` (``walk_from`` +
   ``make_entry``, the pure-Python path), ``composed`` (the kernels' walk, then
   ``make_entry`` in Python: grid-core's miss path before this change) and
   ``rust`` (``EngineTables.register``: walk, classes, payload, entry id and
   publication in one call, a fresh namespace per call so that it misses, the
   subtree memo emptied before each call so that no subtree is found either)
   on 1 and 2 threads, and the kernels' walk alone (``walk``, its nodes returned
   to Python) on 1 and 2 threads; the kernel paths run 3 times interleaved,
   the fastest kept. The rayon speed-up is the ratio of the medians, over all
   configurations, over the slower half, and over the ``--largest`` root
   walks of all the replays' configurations (where a split has the most to
   share).

Times are wall clock on the calling thread (the cold walks on 2 threads use
two). The host is a shared 2-core machine: absolute times are noisy, compare
ratios from one run.

Run: ``cd /work/main && uv run python bench/kernels_step.py --help``.
"""

from __future__ import annotations

import argparse
import array
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from host import host_description, write_summary

from grid_core import kernels
from grid_core import vocab as vocab_module
from grid_core.cache import make_entry
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.lexer import Config
from grid_core.vocab import Vocabulary
from grid_core.walk import walk_from

ROOT = Path(__file__).resolve().parent.parent
SPIDER_DEV = ROOT.parent / "shared" / "data" / "spider" / "dev_gold.sql"
VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "qwen": vocab_module.qwen,
    "llama3": vocab_module.llama3,
    "cl100k": vocab_module.cl100k,
}


def quantiles(xs: Sequence[float]) -> dict[str, float]:
    s = sorted(xs)
    if not s:
        return {"n": 0}
    pick = lambda p: s[min(len(s) - 1, int(p * len(s)))]  # noqa: E731
    return {"n": len(s), "p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": s[-1]}


def corpus(grammar: Grammar, engine: Engine, n: int, seed: int) -> list[bytes]:
    """Distinct dev gold statements in L, shuffled with ``seed``, the first ``n``."""
    lines = [ln.partition("\t")[0].strip() for ln in SPIDER_DEV.read_text().splitlines()]
    stmts = sorted({(s if s.endswith(";") else s + ";").encode() for s in lines if s})
    random.Random(seed).shuffle(stmts)
    out = []
    lexer = engine.lexer
    for s in stmts:
        config = lexer.advance(lexer.initial, s)
        if config is not None and lexer.eos_allowed(config):
            out.append(s)
        if len(out) == n:
            break
    return out


def admitted(row: array.array[int], t: int) -> bool:
    return bool(row[t >> 5] >> (t & 31) & 1)


def first_sight(
    engine: Engine, stmts: list[bytes]
) -> tuple[list[list[int]], dict[str, list[float]], int]:
    """Replay each statement once: token sequences, fill times (us) by how the
    fill was served, and the number of rejected replays."""
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(engine.vocab.token_bytes):
        if b:
            spelled.setdefault(b, i)
    longest = max(map(len, spelled))
    eos = engine.vocab.eos_id
    row = array.array("i", bytes(4 * engine.n_words))
    seqs: list[list[int]] = []
    by_kind: dict[str, list[float]] = {"row": [], "classes": [], "walked": []}
    rejected = 0
    for stmt in stmts:
        s = engine.guide()  # the native guide, audit on: what the adapters run
        assert isinstance(s, kernels.KernelGuide) and s.audited
        seq: list[int] = []
        pos = 0
        while True:
            t0 = time.perf_counter_ns()
            s.fill_next_token_bitmask(row)
            by_kind[s.last_fill or "walked"].append((time.perf_counter_ns() - t0) / 1e3)
            if pos == len(stmt):
                if not admitted(row, eos):
                    rejected += 1
                    seq = []
                break
            rest = stmt[pos : pos + longest]
            token = next(
                (
                    spelled[rest[:k]]
                    for k in range(len(rest), 0, -1)
                    if rest[:k] in spelled and admitted(row, spelled[rest[:k]])
                ),
                None,
            )
            if token is None:
                rejected += 1
                seq = []
                break
            s.accept_token(token)
            seq.append(token)
            pos += len(engine.vocab.token_bytes[token])
        if seq:
            seqs.append([*seq, eos])
    return seqs, by_kind, rejected


VARIANTS = ("native_off", "native_on", "guide_off", "guide_on")


def warm_audit(engine: Engine, seqs: list[list[int]], passes: int) -> dict[str, Any]:
    """Warm steps, audit off and on: fill + accept per token, in us, on the raw
    native session (``engine.kernel.session(0, audit)``) and through the protocol
    guide (``engine.guide(audit=...)``, what the adapters call). The four variants
    replay each sequence in turn (the order rotating), so that they share the
    host's load. After each audited replay the records are read once: the native
    ``audit_lines()`` and the guide's ``audit_log()`` (the lines into an
    ``AuditLog``, parsed on first use), timed and divided by the replay's steps."""
    row = array.array("i", bytes(4 * engine.n_words))
    out: dict[str, Any] = {v: [] for v in VARIANTS}
    out |= {f"{v}_fill": [] for v in VARIANTS} | {f"{v}_accept": [] for v in VARIANTS}
    out |= {"records_us_per_step": [], "audit_log_us_per_step": [], "not_row": 0}
    records_total = [0.0, 0]  # us, steps
    audit_log_total = [0.0, 0]
    clock = time.perf_counter_ns
    k = engine.kernel
    n = 0
    for _ in range(passes):
        gc.collect()
        gc.disable()
        try:
            for seq in seqs:
                n += 1
                order = VARIANTS[n % 4 :] + VARIANTS[: n % 4]
                for v in order:
                    audit = v.endswith("_on")
                    g: Any = (
                        k.session(0, audit) if v.startswith("native") else engine.guide(audit=audit)
                    )
                    step, fill, accept = out[v], out[f"{v}_fill"], out[f"{v}_accept"]
                    for t in seq:
                        t0 = clock()
                        g.fill_next_token_bitmask(row)
                        t1 = clock()
                        g.accept_token(t)
                        t2 = clock()
                        step.append((t2 - t0) / 1e3)
                        fill.append((t1 - t0) / 1e3)
                        accept.append((t2 - t1) / 1e3)
                        if g.last_fill != "row":
                            out["not_row"] += 1
                    if v == "native_on":
                        t0 = clock()
                        lines, _head = g.audit_lines()
                        us = (clock() - t0) / 1e3
                        assert lines.count(b"\n") + 1 == len(seq)
                        out["records_us_per_step"].append(us / len(seq))
                        records_total[0] += us
                        records_total[1] += len(seq)
                    elif v == "guide_on":
                        t0 = clock()
                        log = g.audit_log()
                        us = (clock() - t0) / 1e3
                        assert len(log) == len(seq)
                        out["audit_log_us_per_step"].append(us / len(seq))
                        audit_log_total[0] += us
                        audit_log_total[1] += len(seq)
                    else:
                        assert v.endswith("_off") and not g.audited
        finally:
            gc.enable()
    out["records_us_per_step_total"] = records_total[0] / max(1, records_total[1])
    out["audit_log_us_per_step_total"] = audit_log_total[0] / max(1, audit_log_total[1])
    return out


CACHE_VARIANTS = ("native_on", "guide_on")


def cold_cache(engine: Engine, seqs: list[list[int]], flush_mb: int) -> dict[str, Any]:
    """Warm steps with the CPU caches flushed before each fill and each accept (a read
    of ``flush_mb`` MiB of real memory: not zero pages, which all map one page):
    the raw native session and the protocol guide, audit on, in turn; us."""
    junk = b"\x00\x02" * (flush_mb << 19)
    row = array.array("i", bytes(4 * engine.n_words))
    out: dict[str, list[float]] = {}
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for n, seq in enumerate(seqs):
            for v in CACHE_VARIANTS[n % 2 :] + CACHE_VARIANTS[: n % 2]:
                g: Any = engine.kernel.session(0, True) if v == "native_on" else engine.guide()
                fill, accept = out.setdefault(f"{v}_fill", []), out.setdefault(f"{v}_accept", [])
                for t in seq:
                    junk.find(b"\x01")
                    t0 = clock()
                    g.fill_next_token_bitmask(row)
                    t1 = clock()
                    junk.find(b"\x01")
                    t2 = clock()
                    g.accept_token(t)
                    t3 = clock()
                    fill.append((t1 - t0) / 1e3)
                    accept.append((t3 - t2) / 1e3)
    finally:
        gc.enable()
    q = {k: quantiles(xs) for k, xs in out.items()}
    for v in CACHE_VARIANTS:
        steps = [f + a for f, a in zip(out[f"{v}_fill"], out[f"{v}_accept"], strict=True)]
        q[f"{v}_step"] = quantiles(steps)
    return {
        "flush_mb": flush_mb,
        "us": q,
        "guide_over_native_p50": {
            part: q[f"guide_on_{part}"]["p50"] / q[f"native_on_{part}"]["p50"]
            for part in ("fill", "accept", "step")
        },
    }


def warm_python(engine: Engine, seqs: list[list[int]]) -> list[float]:
    """Warm steps of the Python reference ``GridGuide`` (audit on, through the protocol:
    ``fill_next_token_bitmask`` + ``accept_token``), second pass, in us."""
    row = array.array("i", bytes(4 * engine.n_words))
    out: list[float] = []
    clock = time.perf_counter_ns
    for timed in (False, True):
        gc.collect()
        for seq in seqs:
            g = GridGuide(engine)
            for t in seq:
                t0 = clock()
                g.fill_next_token_bitmask(row)
                g.accept_token(t)
                if timed:
                    out.append((clock() - t0) / 1e3)
    return out


def all_configs(engine: Engine, seqs: list[list[int]]) -> list[Config]:
    """The distinct configurations along the replays, in order."""
    seen: dict[tuple[tuple[int, ...], bytes], Config] = {}
    for seq in seqs:
        g = GridGuide(engine, audit=False)
        for t in seq[:-1]:
            c = g.config
            seen.setdefault((tuple(c.node.states()), c.remainder), c)
            g.accept_token(t)
    return list(seen.values())


def largest_walks(engine: Engine, configs: list[Config], n: int) -> dict[str, Any]:
    """The rayon speed-up where a split has the most to share: the ``n``
    configurations whose cold registration on one thread is slowest, each then
    registered on 1 and 2 threads (5 interleaved runs, the fastest kept)."""
    k = engine.kernel
    namespace = 10**6
    one: list[tuple[float, Config]] = []
    for c in configs:
        namespace += 1
        allowed = engine.parser.allowed(c.node)
        k.clear_memo()
        t0 = time.perf_counter()
        k.register(namespace, 0, c.remainder, allowed, threads=1)
        one.append((time.perf_counter() - t0, c))
    one.sort(key=lambda x: -x[0])
    best: dict[str, list[float]] = {"rust_1t": [], "rust_2t": []}
    for _, c in one[:n]:
        allowed = engine.parser.allowed(c.node)
        laps: dict[str, float] = {}
        for _ in range(5):
            for threads, name in ((1, "rust_1t"), (2, "rust_2t")):
                namespace += 1
                k.clear_memo()
                t0 = time.perf_counter()
                k.register(namespace, 0, c.remainder, allowed, threads=threads)
                lap(laps, name, t0)
        for name, ms in laps.items():
            best[name].append(ms)
    med = {name: statistics.median(xs) for name, xs in best.items()}
    return {
        "configs": n,
        "of": len(configs),
        "median_ms": med,
        "rayon_speedup_register": med["rust_1t"] / med["rust_2t"],
    }


REPEATS = 3


def lap(best: dict[str, float], name: str, t0: float) -> None:
    """Keep the fastest time (ms) of ``name`` since ``t0``."""
    ms = (time.perf_counter() - t0) * 1e3
    best[name] = min(ms, best.get(name, ms))


def cold_miss(engine: Engine, configs: list[Config], python_n: int) -> dict[str, Any]:
    """Per configuration, the root walk's cold miss on each path, in ms (the
    fastest of ``REPEATS`` interleaved runs for the kernel paths; one run of
    the pure-Python walk)."""
    k, n_vocab = engine.kernel, engine.vocab.n_vocab
    times: dict[str, list[float]] = {
        "python": [],
        "composed": [],
        "rust_1t": [],
        "rust_2t": [],
        "walk_1t": [],
        "walk_2t": [],
    }
    namespace = 1000
    for i, c in enumerate(configs):
        allowed = engine.parser.allowed(c.node)
        key = engine.key(0, c.normal, allowed)
        r = c.remainder
        if i < python_n:
            t0 = time.perf_counter()
            nodes, cd = walk_from(engine.scanner, engine.trie, 0, r, allowed, False)
            py = make_entry(key, engine.ids(nodes), cd, n_vocab)
            times["python"].append((time.perf_counter() - t0) * 1e3)
        best: dict[str, float] = {}
        for _ in range(REPEATS):  # interleaved; the fastest of each is kept
            t0 = time.perf_counter()
            nodes, cd_raw = k.walk(0, r, allowed, False, 1)
            cd_entries = [(n, t, bytes(x)) for n, t, x in cd_raw]
            composed = make_entry(key, engine.ids(nodes), cd_entries, n_vocab)
            lap(best, "composed", t0)
            for threads, name in ((1, "rust_1t"), (2, "rust_2t")):
                namespace += 1
                k.clear_memo()  # cold: neither the walk nor its subtrees seen
                t0 = time.perf_counter()
                handle = k.register(namespace, 0, r, allowed, threads=threads)
                lap(best, name, t0)
                assert handle.payload == composed.payload and handle.cd == composed.cd
            for threads, name in ((1, "walk_1t"), (2, "walk_2t")):
                t0 = time.perf_counter()
                k.walk(0, r, allowed, False, threads)
                lap(best, name, t0)
        for name, ms in best.items():
            times[name].append(ms)
        if i < python_n:
            assert py.entry_id == composed.entry_id
    med = {name: statistics.median(xs) for name, xs in times.items() if xs}
    # The slower half of the walks (by one-thread registration): where a split pays.
    order = sorted(range(len(configs)), key=lambda i: times["rust_1t"][i])
    slow = order[len(order) // 2 :]
    slow_med = {
        name: statistics.median(times[name][i] for i in slow)
        for name in ("rust_1t", "rust_2t", "walk_1t", "walk_2t")
    }
    return {
        "configs": len(configs),
        "python_configs": min(python_n, len(configs)),
        "median_ms": med,
        "quantiles_ms": {name: quantiles(xs) for name, xs in times.items()},
        "composed_over_rust_1t": med["composed"] / med["rust_1t"],
        "python_over_rust_1t": med.get("python", float("nan")) / med["rust_1t"],
        "rayon_speedup_register": med["rust_1t"] / med["rust_2t"],
        "rayon_speedup_walk": med["walk_1t"] / med["walk_2t"],
        "slower_half_median_ms": slow_med,
        "rayon_speedup_register_slower_half": slow_med["rust_1t"] / slow_med["rust_2t"],
        "rayon_speedup_walk_slower_half": slow_med["walk_1t"] / slow_med["walk_2t"],
    }


def run_vocab(name: str, grammar: Grammar, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    engine = Engine(grammar, VOCABS[name]())
    build_s = time.perf_counter() - t0
    assert engine.kernel is not None, "grid-kernels is not loaded (GRID_KERNELS=0?)"
    stmts = corpus(grammar, engine, args.replays, args.seed)
    seqs, sight, rejected = first_sight(engine, stmts)
    steps = sum(len(v) for v in sight.values())
    hit_rate = (len(sight["row"]) + len(sight["classes"])) / steps
    warm = warm_audit(engine, seqs, args.passes)
    cached = cold_cache(engine, seqs[: args.cold_cache_replays], args.flush_mb)
    python = warm_python(engine, seqs[: args.python_replays])
    every = all_configs(engine, seqs)
    configs = random.Random(args.seed).sample(every, min(args.cold_configs, len(every)))
    cold = cold_miss(engine, configs, args.python_cold)
    cold["largest_walks"] = largest_walks(engine, every, args.largest)
    q = {v: quantiles(warm[v]) for v in VARIANTS}
    native = q["guide_on"]  # the headline: the protocol guide, audit on
    delta = {
        "native_p50": q["native_on"]["p50"] - q["native_off"]["p50"],
        "guide_p50": q["guide_on"]["p50"] - q["guide_off"]["p50"],
        "native_mean": statistics.fmean(warm["native_on"]) - statistics.fmean(warm["native_off"]),
        "guide_mean": statistics.fmean(warm["guide_on"]) - statistics.fmean(warm["guide_off"]),
    }
    read = {
        "native_records_median": statistics.median(warm["records_us_per_step"]),
        "native_records_total": warm["records_us_per_step_total"],
        "guide_audit_log_median": statistics.median(warm["audit_log_us_per_step"]),
        "guide_audit_log_total": warm["audit_log_us_per_step_total"],
    }
    # Audit's cost per warm step: the on-off difference of the fill + accept p50, plus
    # the records read once at the end, amortized over the steps (the median over the
    # replays: a preempted read is the host's, not the audit's): through the protocol
    # guide (``audit_log()``) and on the raw session (``audit_lines()``).
    audit_cost = max(0.0, delta["guide_p50"]) + read["guide_audit_log_median"]
    audit_cost_native = max(0.0, delta["native_p50"]) + read["native_records_median"]
    out = {
        "n_vocab": engine.vocab.n_vocab,
        "n_words": engine.n_words,
        "engine_build_s": build_s,
        "statements": len(stmts),
        "rejected_replays": rejected,
        "tokens": sum(len(s) for s in seqs),
        "first_sight_fill_us": {kind: quantiles(xs) for kind, xs in sight.items()},
        "first_sight_hit_rate": hit_rate,
        "warm_step_us": {
            **q,
            **{f"{v}_fill": quantiles(warm[f"{v}_fill"]) for v in VARIANTS},
            **{f"{v}_accept": quantiles(warm[f"{v}_accept"]) for v in VARIANTS},
            "python_guide": quantiles(python),
            "warm_fills_not_from_row_memo": warm["not_row"],
        },
        "warm_caches_cold": cached,
        "audit_on_minus_off_us": delta,
        "audit_read_us_per_step": read,
        "audit_cost_us_per_step": audit_cost,
        "audit_cost_native_us_per_step": audit_cost_native,
        "target_audit_cost_at_most_0_5us": audit_cost <= 0.5,
        "python_over_native_p50": statistics.median(python) / native["p50"],
        "target_warm_p50_under_5us": native["p50"] < 5.0,
        "cold_miss": cold,
    }
    print(
        f"{name}: {len(stmts)} statements, {out['tokens']} tokens, {rejected} rejected; "
        f"first sight hit rate {hit_rate:.3f}; build {build_s:.1f} s\n"
        "  warm step p50/p90/p99 us (fill + accept): "
        + "; ".join(f"{v} {q[v]['p50']:.2f}/{q[v]['p90']:.2f}/{q[v]['p99']:.2f}" for v in VARIANTS)
        + f"\n  audit on - off: p50 native {delta['native_p50']:+.3f}, guide "
        f"{delta['guide_p50']:+.3f} us (means {delta['native_mean']:+.3f}, "
        f"{delta['guide_mean']:+.3f}); records read per step (median over replays): native "
        f"{read['native_records_median']:.3f} us, audit_log() {read['guide_audit_log_median']:.3f}"
        f" us; audit cost per step {audit_cost:.3f} us (native {audit_cost_native:.3f}; "
        "target <= 0.5: "
        f"{'met' if audit_cost <= 0.5 else 'NOT met'})\n"
        f"  caches cold ({args.flush_mb} MiB read before each call), p50/p90 us: "
        + "; ".join(
            f"{k} {v['p50']:.1f}/{v['p90']:.1f}"
            for k, v in cached["us"].items()
            if k.endswith(("_fill", "_step"))
        )
        + "; guide/native p50 "
        + ", ".join(f"{k} {v:.2f}" for k, v in cached["guide_over_native_p50"].items())
        + "\n"
        f"  Python guide p50 {statistics.median(python):.0f} us "
        f"({out['python_over_native_p50']:.0f}x)\n"
        "  first sight fill p50 us: "
        + ", ".join(
            f"{k} {v['p50']:.1f} (n={v['n']})"
            for k, v in out["first_sight_fill_us"].items()
            if v["n"]
        )
        + "\n  cold miss median ms: "
        + ", ".join(f"{k} {v:.2f}" for k, v in cold["median_ms"].items())
        + f"\n  composed/rust {cold['composed_over_rust_1t']:.2f}x, python/rust "
        f"{cold['python_over_rust_1t']:.0f}x, rayon 2 threads: register "
        f"{cold['rayon_speedup_register']:.2f}x, walk {cold['rayon_speedup_walk']:.2f}x "
        f"(slower half: register {cold['rayon_speedup_register_slower_half']:.2f}x, walk "
        f"{cold['rayon_speedup_walk_slower_half']:.2f}x; the {args.largest} largest of "
        f"{len(every)} root walks: register "
        + " -> ".join(f"{v:.2f}" for v in cold["largest_walks"]["median_ms"].values())
        + f" ms, {cold['largest_walks']['rayon_speedup_register']:.2f}x)",
        flush=True,
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--vocab", default="qwen,llama3", help="comma-separated: " + ",".join(VOCABS))
    p.add_argument("--replays", type=int, default=60, help="statements replayed")
    p.add_argument("--passes", type=int, default=3, help="warm passes over the replays")
    p.add_argument("--python-replays", type=int, default=10, help="replays on the Python guide")
    p.add_argument(
        "--cold-cache-replays", type=int, default=12, help="replays with the caches flushed"
    )
    p.add_argument("--flush-mb", type=int, default=64, help="MiB read before each call")
    p.add_argument("--cold-configs", type=int, default=40, help="configurations for cold misses")
    p.add_argument("--python-cold", type=int, default=12, help="of which on the pure-Python walk")
    p.add_argument("--largest", type=int, default=8, help="largest root walks, for rayon")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/kernels_step.json")
    args = p.parse_args(argv)
    names = [v.strip() for v in args.vocab.split(",") if v.strip()]
    unknown = [v for v in names if v not in VOCABS]
    if unknown:
        p.error(f"unknown vocabulary {unknown}; known: {', '.join(VOCABS)}")
    host = host_description()
    print(
        f"host: {host['cpu_model'] or host['machine']}, {host['cpu_count']} CPUs, "
        f"load {host['loadavg_start']}"
    )
    from grid_sql.dialects import SQLITE

    grammar = load_grammar(SQLITE.grammar_text, "sqlite")
    results = {name: run_vocab(name, grammar, args) for name in names}
    summary = {
        "benchmark": "kernels_step",
        "command": "uv run python bench/kernels_step.py " + " ".join(sys.argv[1:]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "grammar": "sqlite (grid-sql), no lexicon; corpus: Spider dev gold",
        "host": host,
        "results": results,
    }
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
