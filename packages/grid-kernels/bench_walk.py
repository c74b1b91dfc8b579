"""Cold walk latency: grid-kernels (Rust) against grid-core's Python path.

Per configuration, on the same configurations for both, timed in one process:
the root trie walk of a configuration (``grid_core.walk.walk_from`` vs
``EngineTables.walk``, what grid-core's native cold misses run), CI nodes and CD
entries, no cache. Whole-mask latency on the served path (a native session,
audit on) is ``bench/kernels_step.py`` and ``bench/peers.py``.

Configurations: statements of the Spider dev gold set (sqlite dialect of
grid-sql, free identifiers: no lexicon), deduplicated and shuffled with a seed,
replayed as a model would write them: at every step the admitted token whose
spelling is the longest prefix of the rest is taken. Each configuration is
timed once per implementation, Python and Rust interleaved, after one warm-up
mask (cold means no mask cache: the CPU caches are whatever the previous step
left). Results are checked equal while timing. Medians and ratios come from
one run and are taken over the calling thread's CPU time (the kernels do not
spawn threads), which a loaded shared host perturbs far less than wall time;
wall medians are printed beside them.

Run: ``cd /work/main && uv run python packages/grid-kernels/bench_walk.py --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grid_kernels
from grid_core import vocab as vocab_module
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.kernels import KernelGuide, native_session
from grid_core.lexer import Config
from grid_core.vocab import Vocabulary
from grid_core.walk import walk_from

SPIDER_DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "spider" / "dev_gold.sql"
FALLBACK = (
    b"SELECT count(*) FROM singer;",
    b"SELECT name ,  country ,  age FROM singer ORDER BY age DESC;",
    b"SELECT avg(age) ,  min(age) ,  max(age) FROM singer WHERE country  =  'France';",
    b"SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = "
    b"T2.singer_id GROUP BY T1.singer_id HAVING count(*) > 1;",
)
VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocab_module.cl100k,
    "qwen": vocab_module.qwen,
    "llama3": vocab_module.llama3,
    "smollm2": vocab_module.smollm2,
}


def statements(n: int, seed: int) -> list[bytes]:
    if not SPIDER_DEV.exists():
        return list(FALLBACK[:n])
    seen: dict[bytes, None] = {}
    for line in SPIDER_DEV.read_text(encoding="utf-8").splitlines():
        query = line.partition("\t")[0].strip()
        if query:
            seen.setdefault((query if query.endswith(";") else query + ";").encode(), None)
    corpus = list(seen)
    random.Random(seed).shuffle(corpus)
    return corpus[:n]


def replay(engine: Engine, kernels: grid_kernels.EngineTables, text: bytes) -> list[Config]:
    """The configurations of writing ``text`` with the longest admitted token each
    step (the admitted tokens read off a native session)."""
    lexer, spell = engine.lexer, engine.vocab.token_bytes
    guide = KernelGuide(engine, native_session(kernels, audit=False))
    config, out = lexer.initial, []
    rest = text
    while rest:
        out.append(config)
        best = max(
            (i for i in guide.mask_ids() if rest.startswith(spell[i])), key=lambda i: len(spell[i])
        )
        guide.accept_token(best)
        nxt = lexer.advance(config, spell[best])
        assert nxt is not None
        config, rest = nxt, rest[len(spell[best]) :]
    out.append(config)  # the EOS step
    return out


def clock(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """The result, wall ms and this thread's CPU ms (the kernels run on the
    calling thread, so its CPU time excludes only time spent descheduled)."""
    c0, t0 = time.thread_time(), time.perf_counter()
    result = fn(*args)
    return result, (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3


def pct(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q / 100 * len(ys)))]


def bench_vocab(name: str, grammar: Any, texts: list[bytes]) -> dict[str, Any]:
    vocab = VOCABS[name]()
    engine = Engine(grammar, vocab, cache=False)
    kernels, build_ms, _ = clock(grid_kernels.engine_tables, engine)
    lexer = engine.lexer
    configs: list[Config] = []
    for text in texts:
        whole = lexer.advance(lexer.initial, text)
        if whole is None or not lexer.eos_allowed(whole):
            print(f"  skipped (not in L): {text[:60]!r}", file=sys.stderr)
            continue
        configs += replay(engine, kernels, text)
    keys = ("py_walk", "rs_walk")
    wall: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}

    def timed(key: str, fn: Callable[..., Any], *args: Any) -> Any:
        result, w, c = clock(fn, *args)
        wall[key].append(w)
        cpu[key].append(c)
        return result

    for config in configs:
        rem = config.remainder
        allowed = engine.parser.allowed(config.node)
        py = timed("py_walk", walk_from, engine.scanner, engine.trie, 0, rem, allowed, False)
        rs = timed("rs_walk", kernels.walk, 0, rem, allowed)
        assert rs == py, (config.node.states(), rem)
    med = {k: statistics.median(v) for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "vocab": name,
        "n_vocab": vocab.n_vocab,
        "trie_nodes": engine.trie.n_nodes,
        "configurations": len(configs),
        "kernel_tables_build_ms": build_ms,
        "median_wall_ms": med,
        "median_cpu_ms": med_cpu,
        "p90_cpu_ms": {k: pct(v, 90) for k, v in cpu.items()},
        "max_cpu_ms": {k: max(v) for k, v in cpu.items()},
        "ratio_walk_cpu": med_cpu["py_walk"] / med_cpu["rs_walk"],
        "ratio_walk_wall": med["py_walk"] / med["rs_walk"],
        "median_per_config_ratio_walk_cpu": statistics.median(
            p / r for p, r in zip(cpu["py_walk"], cpu["rs_walk"], strict=True)
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="cl100k,qwen", help="comma-separated: " + ",".join(VOCABS))
    ap.add_argument("--statements", type=int, default=8, help="Spider dev statements replayed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    from grid_sql.dialects import get_dialect

    grammar = load_grammar(get_dialect("sqlite").grammar_text, "sqlite")
    texts = statements(args.statements, args.seed)
    host = {
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        ),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"host: {host}")
    print(f"grammar sqlite ({grammar.n_terminals} terminals), {len(texts)} statements")
    results = []
    for name in args.vocab.split(","):
        r = bench_vocab(name, grammar, texts)
        results.append(r)
        m, c, p = r["median_wall_ms"], r["median_cpu_ms"], r["p90_cpu_ms"]
        print(
            f"{name:8} {r['configurations']:4} configurations (trie {r['trie_nodes']} nodes)\n"
            f"  root walk  CPU median py {c['py_walk']:8.2f}  rs {c['rs_walk']:6.2f} ms  "
            f"x{r['ratio_walk_cpu']:<5.0f} p90 py {p['py_walk']:8.2f}  rs {p['rs_walk']:6.2f}  "
            f"(wall median py {m['py_walk']:.2f} rs {m['rs_walk']:.2f})\n"
            f"  per-configuration ratio median: "
            f"x{r['median_per_config_ratio_walk_cpu']:.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"host": host, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
