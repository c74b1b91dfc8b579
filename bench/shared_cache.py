"""The shared tier of the mask cache on Redis: four replicas, with and without it.

Purpose (issue 20). What sharing the family's walk cache across replicas through
Redis (``GRID_SHARED_CACHE_URL``, :mod:`grid_core.shared_cache`) buys and costs,
on the serving path (the native guide, ``Engine.guide()``), the sqlite dialect
of grid-sql over cl100k, replaying Spider dev gold (``../shared/data/spider``,
else the vendored ``data/spider``): the distinct statements, shuffled with a
seed, cut into four disjoint shards (``i::4``), one per replica process. Each
replica replays its shard as a model would write it (at each step the admitted
token with the longest spelling that prefixes the rest), timing every
``fill_next_token_bitmask`` (``perf_counter_ns``, GC off) and noting how it was
served (``last_fill``: ``row``, ``classes`` or ``walked``) and whether its root
lookup was a remote hit (the tier's ``hits`` counter moved).

Phases (one throw-away ``redis-server`` on loopback, no persistence, at niceness
0 even when the bench runs under ``nice``: it stands for a Redis host of its
own; niced with the replicas on this shared 2-core host, its round trips took
4-9 ms whenever it waited for a core):

1. ``local``: the four replicas at once, no shared tier (each walks every
   configuration it meets itself);
2. ``shared``: Redis flushed, the four replicas at once with the tier;
3. ``restart``: four new replicas (empty local caches, as after a restart) with
   the tier, Redis warm from phase 2;
4. ``solo-local`` and ``solo-restart``: shard 0 alone, without the tier, then
   with Redis warm (the same comparison without the other replicas' load);
5. ``hit-path``: shard 0 in one process on three engines (no tier; the tier,
   entries walked here; the tier, entries read from Redis), cold once, then
   :data:`HIT_PASSES` warm passes interleaved: the warm fill (a local hit) with
   and without the tier, under the same load.

Measured: cold root walks per replica (walks of the family's walk cache done
locally: entries cached minus remote hits) and fills that walked anything
(root or CD verdict sub-walks, which stay per process: the tier holds root
walks only); p50/p99 fill latency per phase; the first request's p99 (each
replica's first ``--first`` statements) cold in ``local`` against after a
restart with a warm Redis; and the cost of a remote hit beside a local walk:
fills whose root walk was a remote hit and walked nothing else (``restart``)
against fills that walked their root walk locally (``local``), and warm fills
(``row``) with and without the tier (the hit path must not get slower).

Usage: ``nox -s shared-cache`` or ``uv run python bench/shared_cache.py
[--statements 400] [--out bench/results/shared_cache.json]``.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import gc
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from host import host_description

ROOT = Path(__file__).resolve().parents[1]
SPIDER_DEV = ROOT.parent / "shared/data/spider/dev_gold.sql"
if not SPIDER_DEV.is_file():
    SPIDER_DEV = ROOT / "data/spider/dev_gold.sql"
KEY = "bench deployment key, not a secret"
REPLICAS = 4
HIT_PASSES = 3


def statements(n: int, seed: int) -> list[bytes]:
    lines = [ln.partition("\t")[0].strip() for ln in SPIDER_DEV.read_text().splitlines()]
    stmts = sorted({(s if s.endswith(";") else s + ";").encode() for s in lines if s})
    random.Random(seed).shuffle(stmts)
    return stmts[:n]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


# ------------------------------------------------------------------ one replica


def replica(shard: list[bytes]) -> dict[str, Any]:
    """Replay ``shard`` in this process (the tier as the environment says)."""
    from grid_core import shared_cache
    from grid_core.grammar import load_grammar
    from grid_core.guide import Engine
    from grid_core.vocab import cl100k
    from grid_sql.dialects import SQLITE

    v = cl100k()
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(v.token_bytes):
        if b:
            spelled.setdefault(b, i)
    longest = max(map(len, spelled))
    engine = Engine(load_grammar(SQLITE.grammar_text, "sqlite"), v)
    tiers = shared_cache.tiers()
    tier = tiers[0] if tiers else None
    row = array.array("i", bytes(4 * engine.n_words))
    gc.disable()
    cold = replay(engine, shard, tier, row, spelled, longest, v.token_bytes)
    # The warm pass reads no counters: its fills are timed as served, nothing else.
    warm = replay(engine, shard, None, row, spelled, longest, v.token_bytes)
    gc.enable()
    metrics = tier.metrics() if tier else {}
    cached = engine.kernel.cached_walks
    return {
        "steps": cold,
        "warm_ns": [s[3] for s in warm],
        "cached_walks": cached,
        "cold_root_walks": cached - remote_hits(tier),
        "walked_fills": sum(1 for s in cold if s[1] == "walked"),
        "metrics": metrics,
    }


def replay(
    engine: Any,
    shard: list[bytes],
    tier: Any,
    row: array.array[int],
    spelled: dict[bytes, int],
    longest: int,
    token_bytes: list[bytes],
) -> list[tuple[int, str, bool, int]]:
    """Replay ``shard``, each statement in a new guide: per fill (statement, last_fill,
    remote hit, ns); ``tier`` None: no remote hit is looked for."""
    steps: list[tuple[int, str, bool, int]] = []

    def admitted(t: int) -> bool:
        return bool(row[t >> 5] >> (t & 31) & 1)

    for n, statement in enumerate(shard):
        guide: Any = engine.guide(audit=False)
        pos = 0
        while True:
            hits = remote_hits(tier)
            t0 = time.perf_counter_ns()
            guide.fill_next_token_bitmask(row)
            ns = time.perf_counter_ns() - t0
            remote = remote_hits(tier) > hits
            steps.append((n, guide.last_fill, remote, ns))
            if pos == len(statement):
                break
            rest = statement[pos : pos + longest]
            token = next(
                spelled[rest[:k]]
                for k in range(len(rest), 0, -1)
                if rest[:k] in spelled and admitted(spelled[rest[:k]])
            )
            guide.accept_token(token)
            pos += len(token_bytes[token])
    return steps


def remote_hits(tier: Any) -> int:
    """Root walks this process took from Redis so far (found, or found after a wait)."""
    if tier is None:
        return 0
    m = tier.metrics()
    return int(m["hits"] + m["wait_hits"])


def hit_path(shard: list[bytes], passes: int) -> dict[str, Any]:
    """The warm fill (a local hit) in one process on three engines, their passes
    interleaved: no tier, the tier with the entries it walked and published, the
    tier with the entries it read from Redis. Run with the tier configured."""
    from grid_core.grammar import load_grammar
    from grid_core.guide import Engine
    from grid_core.vocab import cl100k
    from grid_sql.dialects import SQLITE

    v = cl100k()
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(v.token_bytes):
        if b:
            spelled.setdefault(b, i)
    longest, grammar = max(map(len, spelled)), load_grammar(SQLITE.grammar_text, "sqlite")
    tier_env = {k: os.environ.pop(k) for k in ("GRID_SHARED_CACHE_URL", "GRID_SHARED_CACHE_KEY")}
    engines = {"no_tier": Engine(grammar, v)}
    os.environ.update(tier_env)
    engines["tier_published"] = Engine(grammar, v)
    engines["tier_remote_hits"] = Engine(grammar, v)
    row = array.array("i", bytes(4 * engines["no_tier"].n_words))
    for e in engines.values():  # cold, in this order: the third reads what the second wrote
        replay(e, shard, None, row, spelled, longest, v.token_bytes)
    times: dict[str, list[int]] = {k: [] for k in engines}
    gc.disable()
    for _ in range(passes):
        for name, e in engines.items():
            steps = replay(e, shard, None, row, spelled, longest, v.token_bytes)
            times[name] += [s[3] for s in steps]
    gc.enable()
    return {
        k: {"fills": len(t), "p50_us": percentile([x / 1000 for x in t], 50),
            "p90_us": percentile([x / 1000 for x in t], 90)}
        for k, t in times.items()
    }  # fmt: skip


# ------------------------------------------------------------------ the driver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_command(port: int, *args: str) -> bytes:
    request = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(a)}\r\n{a}\r\n".encode() for a in args
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        return s.recv(1 << 16)


def normal_priority() -> None:
    """Run at niceness 0 when allowed: the server stands for a Redis host of its own,
    not a process sharing the replicas' (possibly niced) share of these cores."""
    with contextlib.suppress(OSError):
        os.nice(-os.nice(0))


def start_redis(base: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=normal_priority,
    )  # fmt: skip
    for _ in range(500):
        try:
            if redis_command(port, "PING").startswith(b"+PONG"):
                return proc, port
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("redis-server did not start")


def run_phase(shards: list[list[bytes]], url: str | None, workdir: Path, name: str) -> list[Any]:
    """The replicas of one phase, at once; their results."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_SHARED_CACHE")}
    if url is not None:
        env |= {"GRID_SHARED_CACHE_URL": url, "GRID_SHARED_CACHE_KEY": KEY}
    procs = []
    for i, shard in enumerate(shards):
        path = workdir / f"{name}-{i}.json"
        (workdir / f"{name}-{i}.in").write_bytes(b"\n".join(shard))
        procs.append(
            (path, subprocess.Popen(
                [sys.executable, __file__, "--replica", str(workdir / f"{name}-{i}.in"), str(path)],
                env=env,
            ))
        )  # fmt: skip
    results = []
    for path, p in procs:
        if p.wait() != 0:
            raise RuntimeError(f"replica {path} failed")
        results.append(json.loads(path.read_text()))
    return results


def paired(local: list[Any], restart: list[Any]) -> tuple[list[float], list[float]]:
    """The same fills (replica, step) of two phases, in us: walked locally in
    ``local``; their root walk a remote hit and nothing walked in ``restart``."""
    pairs = [
        (a[3] / 1000, b[3] / 1000)
        for ra, rb in zip(local, restart, strict=True)
        for a, b in zip(ra["steps"], rb["steps"], strict=True)
        if a[1] == "walked" and b[2] and b[1] == "classes"
    ]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def dist(values: list[float]) -> dict[str, float]:
    """n, p50, p90, p99 and the total (ms) of fill times in us."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "total_ms": round(sum(values) / 1000, 1),
    }


def summarize(results: list[Any], first: int) -> dict[str, Any]:
    every = [s[3] / 1000 for r in results for s in r["steps"]]
    firsts = [s[3] / 1000 for r in results for s in r["steps"] if s[0] < first]
    warm = [ns / 1000 for r in results for ns in r["warm_ns"]]
    return {
        "cold_root_walks_per_replica": [r["cold_root_walks"] for r in results],
        "walked_fills_per_replica": [r["walked_fills"] for r in results],
        "fills": len(every),
        "p50_us": percentile(every, 50),
        "p99_us": percentile(every, 99),
        "first_requests_p99_us": percentile(firsts, 99),
        "warm_pass_p50_us": percentile(warm, 50),
        "warm_pass_p99_us": percentile(warm, 99),
        "metrics_per_replica": [r["metrics"] for r in results],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--statements", type=int, default=400, help="split over the 4 replicas")
    ap.add_argument(
        "--first", type=int, default=5, help="statements per replica in 'first request'"
    )
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--out", default="bench/results/shared_cache.json")
    ap.add_argument("--replica", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replica:
        shard = Path(args.replica[0]).read_bytes().split(b"\n")
        work = hit_path(shard, HIT_PASSES) if "hit-path" in args.replica[0] else replica(shard)
        Path(args.replica[1]).write_text(json.dumps(work))
        return
    host = host_description()
    stmts = statements(args.statements, args.seed)
    shards = [stmts[i::REPLICAS] for i in range(REPLICAS)]
    workdir = Path(tempfile.mkdtemp(prefix="grid-shared-bench-"))
    proc, port = start_redis(workdir)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        t0 = time.time()
        local = run_phase(shards, None, workdir, "local")
        redis_command(port, "FLUSHALL")
        shared = run_phase(shards, url, workdir, "shared")
        restart = run_phase(shards, url, workdir, "restart")
        # One replica alone (shard 0), cold without the tier, then new with Redis warm:
        # the remote hit's cost against the local walk without the other replicas' load.
        solo_local = run_phase(shards[:1], None, workdir, "solo-local")
        solo_restart = run_phase(shards[:1], url, workdir, "solo-restart")
        redis_command(port, "FLUSHALL")
        hit = run_phase(shards[:1], url, workdir, "hit-path")[0]
        info = redis_command(port, "DBSIZE")
        elapsed = time.time() - t0
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    phases = {
        "local": summarize(local, args.first),
        "shared": summarize(shared, args.first),
        "restart_warm_redis": summarize(restart, args.first),
    }
    local_walk, remote_hit = paired(local, restart)
    solo_walk, solo_hit = paired(solo_local, solo_restart)
    mean = statistics.fmean
    out = {
        "issue": 20,
        "what": "4 replica processes, disjoint shards of Spider dev gold (sqlite dialect, "
        "cl100k), native guide; fill latency per step",
        "statements": len(stmts),
        "cold_walks_per_replica_local": mean(phases["local"]["cold_root_walks_per_replica"]),
        "cold_walks_per_replica_shared": mean(phases["shared"]["cold_root_walks_per_replica"]),
        "cold_walks_per_replica_restart": mean(
            phases["restart_warm_redis"]["cold_root_walks_per_replica"]
        ),
        "p99_us_local": phases["local"]["p99_us"],
        "p99_us_shared": phases["shared"]["p99_us"],
        "first_request_p99_us_cold_local": phases["local"]["first_requests_p99_us"],
        "first_request_p99_us_restart_warm_redis": phases["restart_warm_redis"][
            "first_requests_p99_us"
        ],
        "remote_hit_vs_local_walk": "the same fills: walked locally (phase local) and "
        "served by a remote hit with nothing walked (phase restart)",
        "remote_hit_fill_us": dist(remote_hit),
        "local_walk_fill_us": dist(local_walk),
        "solo_remote_hit_fill_us": dist(solo_hit),
        "solo_local_walk_fill_us": dist(solo_walk),
        "solo_where_the_local_walk_took_over_1ms": {
            "local_walk": dist([w for w, h in zip(solo_walk, solo_hit, strict=True) if w > 1000]),
            "remote_hit": dist([h for w, h in zip(solo_walk, solo_hit, strict=True) if w > 1000]),
        },
        "warm_pass_p50_us_local": phases["local"]["warm_pass_p50_us"],
        "warm_pass_p50_us_shared": phases["shared"]["warm_pass_p50_us"],
        "hit_path_interleaved": hit,
        "redis_dbsize_reply": info.decode().strip(),
        "phases": phases,
        "elapsed_s": round(elapsed, 1),
        "host": host | {"loadavg_end": os.getloadavg()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    for k, v in out.items():
        if not isinstance(v, dict):
            print(f"{k}: {v}")
    print(f"hit path: {hit}")
    for k in ["remote_hit_fill_us", "local_walk_fill_us", "solo_remote_hit_fill_us",
              "solo_local_walk_fill_us", "solo_where_the_local_walk_took_over_1ms"]:  # fmt: skip
        print(f"{k}: {out[k]}")


if __name__ == "__main__":
    main()
