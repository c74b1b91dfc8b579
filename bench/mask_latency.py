"""Cold mask latency of grid-core's pure-Python fast path, per vocabulary.

Purpose. The baseline every later speed-up (mask cache T1/T2, grid-kernels) is
measured against: for one grammar and each real vocabulary,

1. the build time of each artifact (grammar load, projection, LALR(1) tables,
   union DFA, lexicon, vocabulary, token trie, and ``Engine`` construction as a
   whole), the median of ``--build-repeats`` runs;
2. the latency of ``GridGuide.mask_ids()`` per decode step, **cold**: grid-core
   has no mask cache yet, so every mask is a fresh trie walk (only the per-node
   allowed-set memo and the scanner's pick memo persist, as they do in serving);
3. the CD statistics of every step (``MaskResult.cd_entries``/``cd_classes``),
   the "measured classes per step" the cache design needs.

A *replay* of a corpus statement mimics a model that writes that statement: at
each step the mask is computed (timed), the admitted token whose spelling is the
longest prefix of the remaining statement bytes is chosen and advanced; at the
end of the statement one more mask is computed (timed: the step where a model
samples EOS), EOS must be in it and ``eos_allowed()`` must hold. A replay is
*stuck* when no admitted token is a prefix of the remaining bytes: for a
statement in L and a byte-complete vocabulary that is a completeness bug
(DESIGN.md section 7), so it is reported with the statement and byte position.
A ``GuideError``/``MaskError`` is a bug too and is reported the same way.

Policy decisions:

- Only statements in L are replayed: each corpus statement is first lexed and
  parsed whole (``Lexer.advance`` + ``eos_allowed``, no vocabulary involved);
  the ones outside L are counted and listed as grammar-coverage gaps, not as
  stuck replays.
- The timed region is exactly what ``GridGuide.mask_ids()`` does (``compute()``,
  alias expansion, EOS ids, sort), inlined so that the same ``MaskResult`` also
  yields the CD statistics without walking twice; ``compute_ms`` is the walk +
  EOS gate part alone. Packing into a bitmask (``GridGuide.mask()``) is not timed.
- Spider's dev gold is de-duplicated, then sampled with ``random.Random(seed)``;
  statements get a closing ``;`` if they lack one.
- Ratios are taken within one run (same process, same machine load); absolute
  times on a shared 2-core host are noisy, ratios less so.

Run: ``cd /work/main && uv run python bench/mask_latency.py --help``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from host import host_description

from grid_core import vocab as vocab_module
from grid_core.dfa import build_union_dfa
from grid_core.errors import GridError
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine, GridGuide, MaskResult
from grid_core.lexer import Lexer, Scanner
from grid_core.lexicon import Lexicon, build_lexicon
from grid_core.parser import Parser
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_core.walk import walk_from

ROOT = Path(__file__).resolve().parent.parent
CRUD_GRAMMAR = ROOT / "packages/grid-core/tests/grammars/crud.lark"
SPIDER_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider" / "dev_gold.sql"
VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocab_module.cl100k,
    "qwen": vocab_module.qwen,
    "llama3": vocab_module.llama3,
    "smollm2": vocab_module.smollm2,
}

# A hand-written corpus for the CRUD toy grammar, with the lexicon it is written against.
CRUD_LEXICON: dict[str, list[bytes]] = {
    "TABLE_NAME": [b"users", b"orders", b"products", b"order_items"],
    "COLUMN_NAME": [
        b"id",
        b"name",
        b"email",
        b"age",
        b"user_id",
        b"total",
        b"status",
        b"price",
        b"quantity",
        b"created_at",
    ],
}
CRUD_CORPUS: tuple[str, ...] = (
    "select * from users;",
    "select id, name from users where id = 1;",
    "select name, email from users where age >= 21 and name <> 'bob';",
    "select id, total from orders where user_id = 42 and status = 'it''s shipped';",
    "insert into users (id, name, email) values (7, 'ann', 'ann@example.com');",
    "insert into order_items (id, quantity, price) values (1, 3, 19.99);",
    "update users set name = 'x', age = 30 where id = 7;",
    "update products set price = 12.5 where id = 3 and quantity < 10;",
    "delete from orders where total < 10.5;",
    "delete from users;",
    "select created_at from orders where id > 100 -- recent\n;",
    "select   quantity ,price  from   order_items where quantity<=2;",
)

T = TypeVar("T")


# ------------------------------------------------------------------ helpers


@contextmanager
def grid_kernels(enabled: bool) -> Iterator[None]:
    """Build GRID engines with (default) or without (``GRID_KERNELS=0``) the kernels."""
    old = os.environ.get("GRID_KERNELS")
    os.environ["GRID_KERNELS"] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["GRID_KERNELS"]
        else:
            os.environ["GRID_KERNELS"] = old


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99, mean, max and count of a list of numbers."""
    if not values:
        return {"count": 0}
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
        "max": max(values),
        "count": len(values),
    }


def timed(fn: Callable[[], T], repeats: int) -> tuple[T, dict[str, Any]]:
    """Run ``fn`` ``repeats`` times: the last result, median wall and CPU ms, every wall ms."""
    times: list[float] = []
    cpu: list[float] = []
    result: T | None = None
    for _ in range(max(1, repeats)):
        c0, t0 = time.thread_time(), time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
    assert result is not None
    return result, {
        "median_ms": statistics.median(times),
        "median_cpu_ms": statistics.median(cpu),
        "runs_ms": times,
    }


# ------------------------------------------------------------------ grammar and corpus


@dataclass
class Target:
    """A grammar with its corpus and lexicon words."""

    name: str
    text: str
    corpus: list[tuple[str, bytes]]  # (label, statement bytes)
    lexicon_words: dict[str, list[bytes]]
    corpus_source: str


def sqlite_target(seed: int) -> Target:
    from grid_sql.dialects import SQLITE

    seen: dict[bytes, str] = {}
    for n, line in enumerate(SPIDER_DEV.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        query, _, db_id = line.partition("\t")
        query = query.strip()
        if not query.endswith(";"):
            query += ";"
        seen.setdefault(query.encode("utf-8"), f"dev_gold.sql:{n} ({db_id.strip()})")
    corpus = [(label, stmt) for stmt, label in seen.items()]
    random.Random(seed).shuffle(corpus)
    return Target(
        "sqlite",
        SQLITE.grammar_text,
        corpus,
        {},
        f"{SPIDER_DEV} (deduplicated, shuffled with seed {seed})",
    )


def crud_target() -> Target:
    corpus = [(f"crud:{i + 1}", s.encode()) for i, s in enumerate(CRUD_CORPUS)]
    words = {k: list(v) for k, v in CRUD_LEXICON.items()}
    text = CRUD_GRAMMAR.read_text(encoding="utf-8")
    return Target("crud", text, corpus, words, "bench/mask_latency.py CRUD_CORPUS")


def grammar_builds(target: Target, repeats: int) -> tuple[Grammar, Any, Lexicon, dict[str, Any]]:
    """Time the vocabulary-independent artifacts; return the projected grammar and co."""
    builds: dict[str, Any] = {}
    l1, builds["grammar_load"] = timed(lambda: load_grammar(target.text, target.name), repeats)
    # No role policy yet: the identity projection (keep every rule, then reduce).
    grammar, builds["projection"] = timed(lambda: l1.project(lambda r: True, "all"), repeats)
    _tables, builds["lalr_tables"] = timed(grammar.lalr, repeats)
    pairs = [(t.name, t.pattern) for t in grammar.terminals]
    dfa, builds["union_dfa"] = timed(lambda: build_union_dfa(pairs), repeats)
    lexicon, builds["lexicon"] = timed(
        lambda: build_lexicon(grammar, dfa, target.lexicon_words), repeats
    )
    return grammar, dfa, lexicon, builds


def in_language(grammar: Grammar, dfa: Any, lexicon: Lexicon, stmt: bytes) -> bool:
    """The whole statement lexes and parses to ACCEPT (no vocabulary involved)."""
    lexer = _lexer(grammar, dfa, lexicon)
    config = lexer.advance(lexer.initial, stmt)
    return config is not None and lexer.eos_allowed(config)


@functools.cache
def _lexer(grammar: Grammar, dfa: Any, lexicon: Lexicon) -> Lexer:
    return Lexer(Scanner(grammar, dfa, lexicon), Parser(grammar.lalr()))


# ------------------------------------------------------------------ replay


@dataclass
class Step:
    mask_ms: float
    mask_cpu_ms: float
    compute_ms: float
    ci_walk_ms: float | None
    admitted: int
    cd_entries: int
    cd_classes: int


@dataclass
class Replay:
    label: str
    statement: str
    steps: list[Step] = field(default_factory=list)
    tokens: int = 0
    outcome: str = "ok"  # ok | stuck | truncated | eos-missing | error
    detail: str = ""


def timed_mask(guide: GridGuide) -> tuple[list[int], MaskResult, float, float, float]:
    """``guide.mask_ids()`` inlined: (ids, result, wall ms, compute wall ms, CPU ms)."""
    engine = guide.engine
    c0 = time.thread_time()
    t0 = time.perf_counter()
    result = guide.compute()
    t1 = time.perf_counter()
    ids = [*result.ci_ids, *result.cd_ids]
    if result.eos:
        ids += engine.vocab.eos_ids
    ids.sort()
    t2 = time.perf_counter()
    c2 = time.thread_time()
    return ids, result, (t2 - t0) * 1e3, (t1 - t0) * 1e3, (c2 - c0) * 1e3


def longest_admitted(trie: TokenTrie, admitted: set[int], rest: bytes) -> int:
    """The admitted id whose spelling is the longest prefix of ``rest``, or -1."""
    best, node = -1, 0
    for byte in rest:
        node = trie.child(node, byte)
        if node < 0:
            break
        for i in trie.ids_at(node):
            if i in admitted:
                best = i
                break
    return best


def ci_walk_ms(engine: Engine, guide: GridGuide) -> float:
    """The root walk alone (CI nodes + first-level CD entries): the cacheable part."""
    config = guide.config
    allowed = engine.parser.allowed(config.node)  # memoized already by the mask
    t0 = time.perf_counter()
    walk_from(engine.scanner, engine.trie, 0, config.remainder, allowed, False)
    return (time.perf_counter() - t0) * 1e3


def replay(engine: Engine, label: str, stmt: bytes, max_tokens: int, split: bool) -> Replay:
    rec = Replay(label, stmt.decode("utf-8", "replace"))
    guide = GridGuide(engine)  # the Python guide (compute() is timed), whatever the kernels
    vocab, trie = engine.vocab, engine.trie
    pos = 0
    try:
        while True:
            ids, result, ms, cms, cpu = timed_mask(guide)
            ci = ci_walk_ms(engine, guide) if split else None
            rec.steps.append(Step(ms, cpu, cms, ci, len(ids), result.cd_entries, result.cd_classes))
            if pos >= len(stmt):
                if not (result.eos and vocab.eos_id in ids and guide.eos_allowed()):
                    rec.outcome, rec.detail = "eos-missing", "EOS not admitted at the end"
                else:
                    guide.accept_token(vocab.eos_id)
                return rec
            if rec.tokens >= max_tokens:
                rec.outcome, rec.detail = "truncated", f"stopped at byte {pos} (--max-tokens)"
                return rec
            best = longest_admitted(trie, set(ids), stmt[pos:])
            if best < 0:
                rec.outcome = "stuck"
                rec.detail = (
                    f"byte {pos}: no admitted token is a prefix of "
                    f"{stmt[pos : pos + 24]!r} after {stmt[:pos][-40:]!r}"
                )
                return rec
            guide.accept_token(best)
            rec.tokens += 1
            pos += len(vocab.token_bytes[best])
    except GridError as e:
        rec.outcome = "error"
        rec.detail = f"{type(e).__name__} at byte {pos} (token {rec.tokens}): {e}"
        return rec


# ------------------------------------------------------------------ one vocabulary


def build_vocab(
    name: str, grammar: Grammar, lexicon: Lexicon, repeats: int
) -> tuple[Engine, dict[str, Any]]:
    """Time the vocabulary load, its trie and a whole Engine; return the last Engine."""
    loader = VOCABS[name]
    builds: dict[str, Any] = {}

    def load() -> Vocabulary:
        loader.cache_clear()  # type: ignore[attr-defined]  # functools.cache: time the first call
        return loader()

    words = {grammar.terminals[t].name: ws for t, ws in lexicon.words.items()}
    vocab, builds["vocab_load"] = timed(load, repeats)
    _trie, builds["trie"] = timed(lambda: build_trie(vocab), repeats)
    engine, builds["engine"] = timed(lambda: Engine(grammar, vocab, words, cache=False), repeats)
    print(
        f"  {name}: n_vocab={vocab.n_vocab} trie_nodes={engine.trie.n_nodes} "
        f"byte_complete={vocab.is_byte_complete()}  builds: "
        + ", ".join(f"{k} {v['median_ms']:.0f} ms" for k, v in builds.items()),
        flush=True,
    )
    return engine, builds


def summarize(
    engine: Engine, builds: dict[str, Any], replays: list[Replay], args: argparse.Namespace
) -> dict[str, Any]:
    """The statistics of one vocabulary's replays (and the raw per-step numbers)."""
    vocab = engine.vocab
    wall = sum(s.mask_ms for r in replays for s in r.steps) / 1e3
    steps = [s for r in replays for s in r.steps]
    ok = [r for r in replays if r.outcome == "ok"]
    out: dict[str, Any] = {
        "n_vocab": vocab.n_vocab,
        "trie_nodes": engine.trie.n_nodes,
        "byte_complete": vocab.is_byte_complete(),
        "fingerprints": engine.fingerprints(),
        "builds": builds,
        "replays": len(replays),
        "replays_ok": len(ok),
        "stuck": sum(r.outcome == "stuck" for r in replays),
        "truncated": sum(r.outcome == "truncated" for r in replays),
        "eos_missing": sum(r.outcome == "eos-missing" for r in replays),
        "errors": sum(r.outcome == "error" for r in replays),
        "problems": [
            {"label": r.label, "statement": r.statement, "outcome": r.outcome, "detail": r.detail}
            for r in replays
            if r.outcome != "ok"
        ],
        "tokens_per_statement": statistics.fmean(r.tokens for r in ok) if ok else None,
        "bytes_per_token": (
            sum(len(r.statement.encode()) for r in ok) / max(1, sum(r.tokens for r in ok))
        ),
        "mask_steps": len(steps),
        "mask_wall_s": wall,
        "mask_ms": summary([s.mask_ms for s in steps]),
        "mask_cpu_ms": summary([s.mask_cpu_ms for s in steps]),
        "compute_ms": summary([s.compute_ms for s in steps]),
        "admitted": summary([float(s.admitted) for s in steps]),
        "ci_walk_ms": summary([s.ci_walk_ms for s in steps if s.ci_walk_ms is not None]),
        "ci_walk_share": (
            sum(s.ci_walk_ms for s in steps if s.ci_walk_ms is not None)
            / sum(s.compute_ms for s in steps)
        )
        if args.split_ci and steps
        else None,
        "cd_entries": {
            "median": percentile([s.cd_entries for s in steps], 50),
            "p90": percentile([s.cd_entries for s in steps], 90),
            "max": max((s.cd_entries for s in steps), default=0),
        },
        "cd_classes": {
            "median": percentile([s.cd_classes for s in steps], 50),
            "p90": percentile([s.cd_classes for s in steps], 90),
            "max": max((s.cd_classes for s in steps), default=0),
        },
        "per_replay": [
            {
                "label": r.label,
                "tokens": r.tokens,
                "outcome": r.outcome,
                "mask_ms": [round(s.mask_ms, 3) for s in r.steps],
                "mask_cpu_ms": [round(s.mask_cpu_ms, 3) for s in r.steps],
                "admitted": [s.admitted for s in r.steps],
                "cd_entries": [s.cd_entries for s in r.steps],
                "cd_classes": [s.cd_classes for s in r.steps],
                **(
                    {"ci_walk_ms": [round(s.ci_walk_ms or 0.0, 3) for s in r.steps]}
                    if args.split_ci
                    else {}
                ),
            }
            for r in replays
        ],
    }
    m = out["mask_ms"]
    print(
        f"  {vocab.name}: {len(replays)} replays, {len(steps)} masks ({wall:.0f} s): mask_ids p50 "
        f"{m.get('p50', 0):.1f} ms p90 {m.get('p90', 0):.1f} p99 {m.get('p99', 0):.1f} "
        f"max {m.get('max', 0):.1f}; tokens/stmt {out['tokens_per_statement'] or 0:.1f}; "
        f"cd_classes median {out['cd_classes']['median']} max {out['cd_classes']['max']}; "
        f"stuck {out['stuck']} errors {out['errors']}",
        flush=True,
    )
    if args.split_ci and steps:
        c = out["ci_walk_ms"]
        print(
            f"    root (CI) walk alone: p50 {c['p50']:.1f} ms p90 {c['p90']:.1f}; "
            f"{100 * out['ci_walk_share']:.0f}% of compute time",
            flush=True,
        )
    return out


# ------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--grammar",
        choices=("sqlite", "crud"),
        default="sqlite",
        help="sqlite: grid-sql's dialect over Spider dev gold, free identifiers; "
        "crud: grid-core's toy grammar, hand-written corpus, small lexicon",
    )
    p.add_argument(
        "--vocab",
        default="cl100k,qwen,llama3,smollm2",
        help="comma-separated subset of " + ",".join(VOCABS),
    )
    p.add_argument(
        "--replays",
        type=int,
        default=30,
        help="statements replayed per vocabulary (sqlite: sampled from dev gold)",
    )
    p.add_argument("--max-tokens", type=int, default=256, help="token cap per replay")
    p.add_argument("--seed", type=int, default=0, help="sampling seed for the Spider corpus")
    p.add_argument(
        "--build-repeats",
        type=int,
        default=3,
        help="runs per artifact build (the median is reported)",
    )
    p.add_argument(
        "--split-ci",
        action="store_true",
        help="also time the root (CI) walk alone after each mask, untimed in "
        "mask_ms: how much of a cold mask a CI cache could save",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/mask_latency.json")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [v.strip() for v in args.vocab.split(",") if v.strip()]
    unknown = [v for v in names if v not in VOCABS]
    if unknown:
        raise SystemExit(f"unknown vocabulary {unknown}; known: {', '.join(VOCABS)}")
    host = host_description()
    print(
        f"host: {host['cpu_model'] or host['processor'] or host['machine']}, "
        f"{host['cpu_count']} CPUs, Python {host['python']}, load {host['loadavg_start']}"
    )
    print(f"      ({host['note']})")

    target = sqlite_target(args.seed) if args.grammar == "sqlite" else crud_target()
    grammar, dfa, lexicon, gbuilds = grammar_builds(target, args.build_repeats)
    tables = grammar.lalr()
    print(
        f"grammar {target.name}: {grammar.n_terminals} terminals, {len(grammar.rules)} rules, "
        f"{tables.n_states} LALR states, {dfa.n_states} DFA states; builds: "
        + ", ".join(f"{k} {v['median_ms']:.1f} ms" for k, v in gbuilds.items())
    )

    corpus: list[tuple[str, bytes]] = []
    outside: list[dict[str, str]] = []
    for label, stmt in target.corpus:
        if len(corpus) >= args.replays:
            break
        if in_language(grammar, dfa, lexicon, stmt):
            corpus.append((label, stmt))
        else:
            outside.append({"label": label, "statement": stmt.decode("utf-8", "replace")})
    for o in outside:
        print(f"  not in L (skipped): {o['label']}: {o['statement']!r}")
    mean_bytes = statistics.fmean(len(s) for _, s in corpus)
    print(
        f"corpus: {len(corpus)} statements, mean {mean_bytes:.0f} bytes, "
        f"from {target.corpus_source}",
        flush=True,
    )

    engines: dict[str, tuple[Engine, dict[str, Any]]] = {}
    for name in names:
        engines[name] = build_vocab(name, grammar, lexicon, args.build_repeats)
    # Interleaved: statement by statement, every vocabulary in turn, so that a change in
    # the machine's load during the run hits every vocabulary alike.
    replays: dict[str, list[Replay]] = {name: [] for name in names}
    for k, (label, stmt) in enumerate(corpus, 1):
        line = []
        for name in names:
            rec = replay(engines[name][0], label, stmt, args.max_tokens, args.split_ci)
            replays[name].append(rec)
            if rec.outcome != "ok":
                print(f"    {name} {rec.outcome}: {label}: {rec.statement!r}: {rec.detail}")
            p50 = statistics.median(s.mask_ms for s in rec.steps)
            line.append(f"{name} {rec.tokens} tok p50 {p50:.0f} ms")
        print(f"  [{k}/{len(corpus)}] {label}: " + "; ".join(line), flush=True)
    results: dict[str, Any] = {}
    for name in names:
        engine, builds = engines[name]
        results[name] = summarize(engine, builds, replays[name], args)

    base = names[0] if "cl100k" not in names else "cl100k"
    ratios: dict[str, dict[str, float]] = {}
    for name, r in results.items():
        b = results[base]
        ratios[name] = {
            f"{k}_vs_{base}": r["mask_ms"][k] / b["mask_ms"][k]
            for k in ("p50", "p90", "p99", "mean")
            if r["mask_ms"].get(k) and b["mask_ms"].get(k)
        }
        if r["mask_cpu_ms"].get("p50") and b["mask_cpu_ms"].get("p50"):
            ratios[name][f"cpu_p50_vs_{base}"] = r["mask_cpu_ms"]["p50"] / b["mask_cpu_ms"]["p50"]
        ratios[name]["engine_build_vs_" + base] = (
            r["builds"]["engine"]["median_ms"] / b["builds"]["engine"]["median_ms"]
        )
        ratios[name]["mask_p50_us_per_1k_trie_nodes"] = (
            r["mask_ms"].get("p50", 0) * 1e3 / (r["trie_nodes"] / 1e3)
        )

    print()
    print(
        f"{'vocab':<8} {'n_vocab':>7} {'tok/stmt':>8} {'p50 ms':>8} {'p90 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8} {'cpu p50':>8} {'p50/' + base:>12} {'cdE med/max':>12} "
        f"{'cdC med/max':>12} {'stuck':>5} {'engine ms':>9}"
    )
    for name, r in results.items():
        m = r["mask_ms"]
        tps = r["tokens_per_statement"]
        print(
            f"{name:<8} {r['n_vocab']:>7} {tps if tps is None else round(tps, 1)!s:>8} "
            f"{m.get('p50', 0):>8.1f} {m.get('p90', 0):>8.1f} {m.get('p99', 0):>8.1f} "
            f"{m.get('max', 0):>8.1f} {r['mask_cpu_ms'].get('p50', 0):>8.1f} "
            f"{ratios[name].get('p50_vs_' + base, 0):>12.2f} "
            f"{r['cd_entries']['median']:>5.0f}/{r['cd_entries']['max']:<6} "
            f"{r['cd_classes']['median']:>5.0f}/{r['cd_classes']['max']:<6} "
            f"{r['stuck']:>5} {r['builds']['engine']['median_ms']:>9.0f}"
        )

    host["loadavg_end"] = os.getloadavg()
    report = {
        "benchmark": "mask_latency (cold, pure-Python grid-core)",
        "command": " ".join(
            ["uv run python bench/mask_latency.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "host": host,
        "grammar": {
            "name": target.name,
            "fingerprint": grammar.fingerprint,
            "terminals": grammar.n_terminals,
            "rules": len(grammar.rules),
            "lalr_states": tables.n_states,
            "dfa_states": dfa.n_states,
            "lexicon_categories": sorted(target.lexicon_words),
            "builds": gbuilds,
        },
        "corpus": {
            "source": target.corpus_source,
            "replayed": len(corpus),
            "mean_bytes": mean_bytes,
            "outside_L": outside,
        },
        "baseline_vocab": base,
        "ratios": ratios,
        "vocabularies": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    bad = sum(r["stuck"] + r["errors"] + r["eos_missing"] for r in results.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
