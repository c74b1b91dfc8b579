"""Requirement R microharness: guard cost per token against position, at fixed depths.

Requirement R (DESIGN.md section 7): amortised O(1) guard cost per token; the
per-step worst case is bounded by nesting depth, never by the position n.
This harness measures it directly: for a stream of ``--n`` tokens that stays
at one nesting depth, the guard's cost at each position, and the OLS slope of
cost against position with its 95% confidence interval (target:
|slope| < 1e-4 us per position at every depth).

The **guard** of one token is what the decode loop (``grid_core.decode``)
does for it: the mask (``GridGuide.compute``: allowed set, cache lookups or
trie walk, CD verdicts, EOS gate), the reserve trigger
(``ReserveTable.reserve``), the audit record (configuration hash, packed
mask, entry id, chained append) and ``GridGuide.advance``. Sampling is not
part of it: the stream's tokens are given. With ``--guide native`` the guard
is what the loop does on the guide users get (``Engine.guide()``, the kernels'
session, audit on): the fill of the mask into a bitmask, the reserve of the
Python configuration the loop keeps beside the guide, the accept (the session
records the step) and that configuration's advance.

Streams (``kind-depth``), each opened at depth ``d`` and kept there:

- ``paren-d``: ``SELECT (((...1`` with d open parentheses, then random binary
  operations (``+ - * / % || < > = AND OR``) on random operands (numbers,
  column words, ``?``); the left-recursive operator levels keep the stack depth
  bounded by d;
- ``inlist-d``: ``SELECT 1 WHERE ((...1 IN (1`` then ``, operand`` forever: a
  long IN list at depth d;
- ``string``: ``SELECT '`` then text that never closes the literal: one
  pending lexeme that grows with n. The hot path never reads it whole: the
  cache key is the remainder's scanner normal form (which drops the bytes of
  a lexeme with no emittable prefix), the configuration hash folds each
  token's bytes into an incremental digest, and the lexeme's configurations
  share one append-only buffer.

Method: each stream is a byte string cut into the fewest tokens of the
vocabulary (``ReserveTable.split``), piece by piece. A **cold** pass feeds it
once (filling the interned stacks, memo tables and the mask cache), then the
**warm** pass feeds the same tokens to a fresh guide with the garbage
collector disabled and times every token (``time.perf_counter_ns``). Runs
differ by seed (operands and operators). Per depth the harness prints the
pooled OLS slope over every run's (position, cost) pairs with a 95% CI, the
mean of the per-run slopes with a t-interval, the p50 and p99 cost, and the
mask cache's hit rate over the warm pass (T1, and T2 when shared).

Vocabulary: ``cl100k:K`` (the first K ids of cl100k_base plus EOS) keeps a
pure-Python mask cheap enough for 16,000-token streams; the guard's
position-dependence does not depend on the vocabulary's size.

Run: ``uv run python bench/r_harness.py --help``; results go to
``bench/results/r_harness*.json``.
"""

from __future__ import annotations

import argparse
import array
import gc
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from host import host_description, write_summary

from grid_core.audit import AuditLog, mask_entry_id
from grid_core.cache import SharedCache
from grid_core.guide import Engine, GridGuide
from grid_core.reserve import reserve_table
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary, cl100k
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import example_schema

ROOT = Path(__file__).resolve().parent.parent
OPERATORS = (" + ", " - ", " * ", " / ", " % ", " || ", " < ", " > ", " = ", " AND ", " OR ")
# Student's t, two-sided 95%, by degrees of freedom (normal beyond 30).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
T95 |= {10: 2.23, 12: 2.18, 15: 2.13, 19: 2.09, 20: 2.09, 24: 2.06, 29: 2.05}


def t95(dof: int) -> float:
    if dof <= 0:
        return math.nan
    known = [k for k in T95 if k <= dof]
    return T95[max(known)] if dof < 30 else 1.96


def make_vocab(spec: str) -> Vocabulary:
    full = cl100k()
    if spec == "cl100k":
        return full
    n = int(spec.partition(":")[2])
    return Vocabulary.from_spellings(spec, [*full.token_bytes[:n], b""], {n}, (n,))


def build_engine(vocab: Vocabulary) -> Engine:
    """The example policy's admin role over SQLite, with a shared (T2) cache."""
    schema = example_schema()
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants("admin", schema))
    projection = RoleProjection.compile(policy.role("admin"), SQLITE, words=lexicon.words)
    dfa, trie = dialect_dfa(SQLITE), build_trie(vocab)
    shared = SharedCache()
    return Engine(projection.grammar, vocab, lexicon.lexicon, dfa=dfa, trie=trie, cache=shared)


def stream_pieces(kind: str, depth: int, rng: random.Random) -> tuple[list[bytes], Any]:
    """The opening pieces of a stream and a generator of the pieces that follow."""
    columns = ("amount", "id", "total", "budget", "name")

    def operand() -> str:
        x = rng.random()
        if x < 0.5:
            return str(rng.randint(0, 999))
        return rng.choice(columns) if x < 0.9 else "?"

    def more() -> Any:
        while True:
            if kind == "paren":
                yield (rng.choice(OPERATORS) + operand()).encode()
            elif kind == "inlist":
                yield (", " + operand()).encode()
            else:
                yield rng.choice([b"lorem ", b"ipsum ", b"dolor ", b"sit ", b"amet, "])

    if kind == "paren":
        opening = [b"SELECT ", b"(" * depth, b"1"]
    elif kind == "inlist":
        opening = [b"SELECT 1 WHERE ", b"(" * (depth - 1), b"1 IN (1"]
    else:
        opening = [b"SELECT '"]
    return opening, more()


def stream_tokens(
    engine: Engine, kind: str, depth: int, n: int, seed: int
) -> tuple[list[int], list[int]]:
    """Tokens of the opening, and exactly ``n`` tokens after it (pieces cut fewest-first)."""
    table = reserve_table(engine)
    rng = random.Random(seed)
    opening, more = stream_pieces(kind, depth, rng)
    head: list[int] = []
    for piece in opening:
        head += table.split(piece) or ()
    tail: list[int] = []
    while len(tail) < n:
        tail += table.split(next(more)) or ()
    return head, tail[:n]


class Stream:
    """One run's stream under the guard: its guide, its audit log, its position.

    ``native``: the guide is ``Engine.guide()`` (the kernels' session, audit on),
    and the guard is what the decode loop does for a token on it: fill the mask
    into a bitmask, look up the reserve of the Python configuration the loop
    keeps beside the guide, accept the token (the native session records the
    step) and advance that configuration.
    """

    def __init__(
        self, engine: Engine, head: Sequence[int], tail: Sequence[int], native: bool = False
    ) -> None:
        self.engine, self.table = engine, reserve_table(engine)
        self.head, self.tail, self.native = head, tail, native
        self.bitmask = array.array("i", bytes(4 * engine.n_words))
        self.restart()

    def restart(self) -> None:
        """A fresh guide and audit log, fed the opening (untimed)."""
        # The Python guide: the guard below reads its configuration and compute();
        # the records are kept here, so the guide's own audit is off.
        engine = self.engine
        self.guide: Any = engine.guide() if self.native else GridGuide(engine, audit=False)
        self.config = self.engine.lexer.initial
        self.audit, self.position = AuditLog(), 0
        for t in self.head:
            self.guard(t)

    def guard(self, t: int) -> None:
        """What the decode loop does for one token (see the module header)."""
        engine, guide = self.engine, self.guide
        if self.native:
            guide.fill_next_token_bitmask(self.bitmask)
            self.table.reserve(self.config)
            guide.accept_token(t)
            after = engine.lexer.advance(self.config, engine.vocab.token_bytes[t])
            assert after is not None
            self.config = after
            return
        config = guide.config
        result = guide.compute()
        self.table.reserve(config)
        packed = engine.pack_result(result)
        admitted = int.from_bytes(packed.tobytes(), "little").bit_count()
        entry = mask_entry_id(packed.tobytes())
        self.audit.append(config.hash, entry, t, engine.vocab.n_vocab - admitted, "sampled")
        guide.accept_token(t)

    def step(self) -> tuple[int, float, float]:
        """Guard the token at the current position: (position, CPU us, wall us)."""
        if self.position == len(self.tail):
            self.restart()
        p = self.position
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        self.guard(self.tail[p])
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        self.position += 1
        return p, (c1 - c0) / 1000, (w1 - w0) / 1000


def ols(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """(slope, intercept, standard error of the slope)."""
    n = len(xs)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    ssr = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, intercept, math.sqrt(ssr / (n - 2) / sxx)


def cache_counts(engine: Engine) -> tuple[int, int, int, int]:
    t1 = engine.t1
    t2 = engine.shared.table if engine.shared is not None else None
    return (
        t1.hits if t1 else 0,
        t1.misses if t1 else 0,
        t2.hits if t2 else 0,
        t2.misses if t2 else 0,
    )


def measure(
    engine: Engine, kind: str, depth: int, n: int, runs: int, seed: int, native: bool = False
) -> dict[str, Any]:
    streams = []
    for run in range(runs):
        head, tail = stream_tokens(engine, kind, depth, n, seed * 1000 + run)
        cold = Stream(engine, head, tail, native)
        for _ in range(n):
            cold.step()  # cold pass: fills the interned stacks, memo tables and cache
        streams.append(Stream(engine, head, tail, native))
    # Warm pass, interleaved: at tick k run r guards position (k + r n / runs) mod n,
    # so that load drift on a shared host is spread over every position.
    for r, stream in enumerate(streams):
        for _ in range(r * n // runs):
            stream.step()
    per_run: list[list[tuple[int, float, float]]] = [[] for _ in streams]
    c0 = cache_counts(engine)
    gc.collect()
    gc.disable()
    try:
        for _ in range(n):
            for r, stream in enumerate(streams):
                per_run[r].append(stream.step())
    finally:
        gc.enable()
    c1 = cache_counts(engine)
    t1h, t1m, t2h, t2m = (b - a for a, b in zip(c0, c1, strict=True))
    xs = [float(p) for samples in per_run for p, _, _ in samples]
    ys = [cpu for samples in per_run for _, cpu, _ in samples]
    walls = [wall for samples in per_run for _, _, wall in samples]
    slopes = [ols([float(p) for p, _, _ in s], [c for _, c, _ in s])[0] for s in per_run]
    p50s = [statistics.median(c for _, c, _ in s) for s in per_run]
    slope, intercept, se = ols(xs, ys)
    mean_slope = statistics.fmean(slopes)
    half = t95(runs - 1) * statistics.stdev(slopes) / math.sqrt(runs) if runs > 1 else math.nan
    # Robust view: the median cost of each bin of positions (all runs), then OLS.
    width = max(1, n // 64)
    bins: dict[int, list[float]] = {}
    for x, y in zip(xs, ys, strict=True):
        bins.setdefault(int(x) // width, []).append(y)
    centres = [(b + 0.5) * width for b in sorted(bins)]
    medians = [statistics.median(bins[b]) for b in sorted(bins)]
    b_slope, _, b_se = ols(centres, medians)
    b_half = t95(len(centres) - 2) * b_se
    ys_sorted = sorted(ys)
    return {
        "stream": f"{kind}-{depth}" if kind != "string" else "string",
        "n": n,
        "runs": runs,
        "clock": "thread CPU time (time.thread_time_ns), us",
        "pooled_slope_us_per_pos": slope,
        "pooled_slope_ci95": [slope - 1.96 * se, slope + 1.96 * se],
        "pooled_intercept_us": intercept,
        "mean_run_slope_us_per_pos": mean_slope,
        "mean_run_slope_ci95": [mean_slope - half, mean_slope + half],
        "binned_median_slope_us_per_pos": b_slope,
        "binned_median_slope_ci95": [b_slope - b_half, b_slope + b_half],
        "bin_width": width,
        "p50_us": statistics.median(ys),
        "p99_us": ys_sorted[int(0.99 * (len(ys_sorted) - 1))],
        "wall_p50_us": statistics.median(walls),
        "p50_first_1000_us": statistics.median(
            [y for x, y in zip(xs, ys, strict=True) if x < 1000]
        ),
        "p50_last_1000_us": statistics.median(
            [y for x, y in zip(xs, ys, strict=True) if x >= n - 1000]
        ),
        "run_p50_us": p50s,
        "warm_t1_hit_rate": t1h / (t1h + t1m) if t1h + t1m else None,
        "warm_t2_hit_rate": t2h / (t2h + t2m) if t2h + t2m else None,
        "target_met": abs(slope) < 1e-4,
        "target_met_ci95": slope - 1.96 * se > -1e-4 and slope + 1.96 * se < 1e-4,
        "target_met_binned": b_slope - b_half > -1e-4 and b_slope + b_half < 1e-4,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16_000, help="timed tokens per stream")
    p.add_argument("--runs", type=int, default=20, help="seeded runs per stream")
    p.add_argument("--depths", default="1,8,32", help="paren depths")
    p.add_argument("--inlist-depths", default="1,8", help="IN-list depths")
    p.add_argument("--no-string", action="store_true", help="skip the open-string stream")
    p.add_argument("--vocab", default="cl100k:2048")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--guide",
        choices=("python", "native"),
        default="python",
        help="the Python GridGuide, or Engine.guide()'s native session (audit on)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/r_harness.json")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    engine = build_engine(make_vocab(args.vocab))
    print(f"engine built in {time.perf_counter() - t0:.1f} s; vocabulary {args.vocab}", flush=True)
    plan = [("paren", int(d), args.n, args.runs) for d in args.depths.split(",") if d]
    plan += [("inlist", int(d), args.n, args.runs) for d in args.inlist_depths.split(",") if d]
    if not args.no_string:
        plan.append(("string", 0, args.n, args.runs))
    results = []
    for kind, depth, n, runs in plan:
        t1 = time.perf_counter()
        r = measure(engine, kind, depth, n, runs, args.seed, args.guide == "native")
        r["elapsed_s"] = round(time.perf_counter() - t1, 1)
        results.append(r)
        lo, hi = r["pooled_slope_ci95"]
        blo, bhi = r["binned_median_slope_ci95"]
        hit = r["warm_t1_hit_rate"]
        print(
            f"{r['stream']:>10}: OLS slope {r['pooled_slope_us_per_pos']:+.2e} us/pos "
            f"[{lo:+.2e}, {hi:+.2e}]; binned medians {r['binned_median_slope_us_per_pos']:+.2e} "
            f"[{blo:+.2e}, {bhi:+.2e}]; p50 {r['p50_us']:.0f} us "
            f"(first 1k {r['p50_first_1000_us']:.0f}, last 1k {r['p50_last_1000_us']:.0f}), "
            f"T1 hit {'n/a' if hit is None else f'{hit:.3f}'}, "
            f"{runs} runs x {n} tokens, {r['elapsed_s']} s",
            flush=True,
        )
    summary = {
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "vocab": args.vocab,
        "guide": args.guide,
        "seed": args.seed,
        "results": results,
        "host": host_description(),
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
