"""SmolLM2-135M-Instruct end to end: 50 questions over the example schema, four roles.

Purpose. The first real-model measurement of GRID (grid-serve's transformers
adapter): for each question, in one process and on one CPU thread,

1. **unconstrained**: ``model.generate`` (greedy) on the same prompt, no GRID;
   the SQL is read off the answer (up to the closing code fence) and judged by
   grid-spec's ``Language`` of the role (projected grammar + lexicon words);
2. **mode 2**: the same ``generate`` with :class:`GridLogitsProcessor`
   (exit-intent stop on);
3. **mode 1**: GRID's own loop (:func:`grid_core.decode.decode` through
   :func:`decode_with_model`: jump-forward, reserve trigger, exit-intent stop).

Every constrained output is checked with grid-spec (a sentence of the role's
language), its audit log verified and replayed, its SemanticChecker verdict
recorded, and, when the checker accepts it, it is run on the example database
opened read-only. Throughput is generated tokens per wall second of the whole
call (prompt prefill included), per question, summarised by median and by
aggregate (all tokens / all seconds). Mode 2's ``mask_ms_per_token_median``
is the processor's calls' own time (what ``generate`` waits for), per token,
median over questions; ``ahead_ms_per_token_median`` is the guide work the
processor's ``ahead`` criterion moved into the forward pass's shadow, on its
worker thread (the second core: the model runs on one). Mode 1's
``outside_model_ms_per_token_median`` is the decode's wall time less the
model's (``CausalLMLogits.seconds``), per token, median over questions.

Policy decisions:

- Greedy decoding, ``--max-new-tokens`` 48 for all three (mode 1: it is the
  budget, EOS included, with grid-core's default reserve safety of 24).
- Fixed order per question (unconstrained, mode 2, mode 1): the mask caches
  (T1 per role, T2 shared) warm up across the run; mode 1 meets masks mode 2
  has just computed. The first questions of each role are the coldest.
- Questions 11-13, 22-24, 46-47 and 50 ask for what the role may not have
  (a table, a column or a verb): the constrained outputs must still be
  sentences of the role's language; the unconstrained ones are counted when
  they leave it.

Run: ``uv run nox -s smollm2-50`` (the serve session's environment), or
``uv run --group serve python bench/smollm2_50.py`` (``--limit N`` for a quick look).
Writes ``bench/results/smollm2_50.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sqlite3
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers
from host import engine_source

from grid_core.audit import verify
from grid_core.replay import replay
from grid_serve.model import load_model
from grid_serve.text2sql import (
    RoleEngines,
    checker_verdict,
    example_database,
    prompt_ids,
    run_readonly,
    schema_ddl,
)
from grid_serve.transformers import constrained_generate, decode_with_model
from grid_spec.spec import Language
from grid_sql.checker import SemanticChecker, StatementParseError
from grid_sql.policy import example_policy
from grid_sql.schema import SchemaSnapshot

QUESTIONS: list[tuple[str, str]] = [
    ("analyst", "List the names of all employees."),
    ("analyst", "How many employees are there?"),
    ("analyst", "What is the budget of the Research department?"),
    ("analyst", "Which employees were hired after 2020?"),
    ("analyst", "List every department with its budget, largest first."),
    ("analyst", "How many employees work in each department?"),
    ("analyst", "What is the name of the department with the largest budget?"),
    ("analyst", "Who was hired most recently?"),
    ("analyst", "List the employees of the Sales department."),
    ("analyst", "What is the total budget of all departments?"),
    ("analyst", "What are the salaries of all employees?"),
    ("analyst", "Show the orders placed by Linus."),
    ("analyst", "Delete the employee named Ada."),
    ("clerk", "What is the total of all orders?"),
    ("clerk", "List all orders placed in May 2024."),
    ("clerk", "Which employee placed the largest order?"),
    ("clerk", "How many orders did each employee place?"),
    ("clerk", "Record a new order of 99.5 by employee 2 on 2024-07-01."),
    ("clerk", "Change the total of order 3 to 80."),
    ("clerk", "List the names of employees who placed orders."),
    ("clerk", "What is the average order total?"),
    ("clerk", "When were the employees hired?"),
    ("clerk", "Delete order 2."),
    ("clerk", "Show each employee's salary."),
    ("clerk", "Which orders are over 100?"),
    ("admin", "Show every order."),
    ("admin", "What is the highest salary?"),
    ("admin", "List employees with their salaries."),
    ("admin", "Give employee 1 a salary of 200000 since 2025-01-01."),
    ("admin", "Delete all orders placed before June 2024."),
    ("admin", "What is the total salary cost per department?"),
    ("admin", "Raise the budget of Support to 300000."),
    ("admin", "Which employee earns the least?"),
    ("admin", "How many orders were placed by the employees of each department?"),
    ("admin", "List the departments that have no employees."),
    ("admin", "Remove the employee named Barbara."),
    ("admin", "What is the average salary?"),
    ("admin", "Add a department named Marketing with a budget of 150000."),
    ("intern", "What is the budget of each department?"),
    ("intern", "How many departments are there?"),
    ("intern", "Which department has the smallest budget?"),
    ("intern", "List the department names in alphabetical order."),
    ("intern", "What is the total budget?"),
    ("intern", "Which departments have a budget over 300000?"),
    ("intern", "Show the department with id 2."),
    ("intern", "How many employees are in Research?"),
    ("intern", "List the departments and their employees."),
    ("intern", "What is the average budget?"),
    ("intern", "Show the departments whose name starts with S."),
    ("intern", "Delete the Support department."),
]


_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")
_TABLE_POSITION = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)
_VERB = re.compile(r"^\s*(SELECT|INSERT|REPLACE|UPDATE|DELETE|CREATE|ALTER|DROP|WITH)\b", re.I)


def outside_grants(sql: str, grants: Any) -> list[str]:
    """What a text names outside the role's grants, read off the text alone (it need not
    parse): words in table positions (after FROM, JOIN, INTO, UPDATE, TABLE) that are not
    granted tables, and a statement verb the role lacks (CREATE, ALTER and DROP never are).
    A heuristic for unconstrained text; on constrained output it must find nothing."""
    text = _STRING.sub("''", _COMMENT.sub(" ", sql))
    granted = {t.lower() for t in grants.tables} | {c.lower() for c in grants.cte_names}
    found = [f"table {m}" for m in _TABLE_POSITION.findall(text) if m.lower() not in granted]
    verb = _VERB.match(text)
    if verb is not None:
        v = verb.group(1).upper()
        v = {"REPLACE": "INSERT", "WITH": "SELECT"}.get(v, v)
        if v not in grants.verbs:
            found.append(f"verb {v}")
    return sorted(set(found))


def sql_of_answer(text: str) -> str:
    """The unconstrained answer's SQL: the text up to the closing code fence."""
    return text.split("```", 1)[0].strip()


def unconstrained(lm: Any, ids: list[int], budget: int) -> tuple[list[int], str, float]:
    """Plain greedy ``generate`` on the prompt, no GRID: the new token ids, their text
    and the wall seconds."""
    t = time.perf_counter()
    with torch.inference_mode():
        out = lm.model.generate(
            torch.tensor([ids]),
            max_new_tokens=budget,
            do_sample=False,
            eos_token_id=list(lm.vocab.eos_ids),
            pad_token_id=lm.vocab.eos_ids[0],
        )
    new = out[0, len(ids) :].tolist()
    return new, lm.tokenizer.decode(new, skip_special_tokens=True), time.perf_counter() - t


def judge(
    sql: bytes, lang: Language, schema: SchemaSnapshot, grants: Any, db: Path
) -> dict[str, Any]:
    """In the role's language? Tables used outside the grants? Checker verdict, run result."""
    out: dict[str, Any] = {"in_language": lang.in_language(sql)}
    out["outside_grants"] = outside_grants(sql.decode("utf-8", "replace"), grants)
    try:
        used = {u.table for u in SemanticChecker.for_schema(schema, {}).analyze(sql).tables}
        out["tables_outside_grants"] = sorted(used - set(grants.tables))
    except StatementParseError:
        out["tables_outside_grants"] = None  # not SQL the dialect grammar parses
    if not out["in_language"]:
        return out
    text = sql.decode("utf-8", "replace")
    violations = checker_verdict(schema, grants, text)
    out["checker"] = [str(v.kind) for v in violations]
    if not violations:
        try:
            _, rows, _ = run_readonly(db, text, 5)
            out["run"] = f"ok, {len(rows)} row(s)"
        except sqlite3.Error as e:
            out["run"] = f"sqlite: {e}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=ap_fmt())
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--limit", type=int, default=len(QUESTIONS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("bench/results/smollm2_50.json"))
    ap.add_argument(
        "--resummarize",
        action="store_true",
        help="recompute the text-derived fields and the summary of --out (no model run)",
    )
    args = ap.parse_args()
    if args.resummarize:
        resummarize(args.out)
        return
    torch.set_num_threads(args.threads)
    uptime_start = os.popen("uptime").read().strip()
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    warnings.simplefilter("ignore")
    budget = args.max_new_tokens

    t0 = time.perf_counter()
    lm = load_model()
    load_s = time.perf_counter() - t0
    print(f"model {lm.name}: loaded in {load_s:.1f}s (converted: {lm.converted})", flush=True)
    db = example_database(Path(tempfile.mkdtemp(prefix="smollm2-50-")))
    schema = SchemaSnapshot.from_sqlite(db)
    policy = example_policy(schema)
    engines = RoleEngines(schema, policy, lm.vocab)
    langs: dict[str, Language] = {}
    records = []
    for n, (role_name, question) in enumerate(QUESTIONS[: args.limit], start=1):
        role = engines[role_name]
        if role_name not in langs:
            langs[role_name] = Language(
                role.projection.grammar.to_lark(), role.lexicon.word_lists()
            )
        lang = langs[role_name]
        ids = prompt_ids(lm.tokenizer, question, schema_ddl(schema, role.grants))
        rec: dict[str, Any] = {"n": n, "role": role_name, "question": question}

        new, answer, secs = unconstrained(lm, ids, budget)
        sql = sql_of_answer(answer)
        rec["unconstrained"] = {
            "tokens": len(new),
            "seconds": secs,
            "text": answer,
            "sql": sql,
            **judge(sql.encode(), lang, schema, role.grants, db),
        }

        t = time.perf_counter()
        (row,), proc = constrained_generate(
            lm.model, [role.engine.guide()], [ids], budget, stop_on_exit=True
        )
        secs = time.perf_counter() - t
        lines = row.audit.lines()
        rec["mode2"] = {
            "tokens": len(row.tokens),
            "seconds": secs,
            "mask_seconds": proc.mask_seconds,
            "ahead_seconds": proc.ahead_seconds,
            "stop": row.stop_reason,
            "error": None if row.error is None else str(row.error),
            "sql": row.text.decode("utf-8", "replace"),
            "audit_verifies": verify(lines).ok,
            "audit_replays": replay(lines, role.engine).ok,
            "viable_prefix": lang.is_viable_prefix(row.text),
            **judge(row.text, lang, schema, role.grants, db),
        }

        t = time.perf_counter()
        gen, model = decode_with_model(
            lm.model, role.engine.guide(), ids, budget, stop_on_exit=True
        )
        secs = time.perf_counter() - t
        lines = gen.audit.lines()
        rec["mode1"] = {
            "tokens": len(gen.tokens),
            "seconds": secs,
            "model_seconds": model.seconds,
            "stop": gen.stop_reason,
            "sampled": gen.sampled,
            "forced": gen.forced,
            "reserve": gen.reserve,
            "early_triggers": gen.early_triggers,
            "sql": gen.text.decode("utf-8", "replace"),
            "audit_verifies": verify(lines).ok,
            "audit_replays": replay(lines, role.engine).ok,
            **judge(gen.text, lang, schema, role.grants, db),
        }
        records.append(rec)
        m2, m1 = rec["mode2"], rec["mode1"]
        print(
            f"[{n:2}] {role_name:7} {question}\n"
            f"     free : {sql!r:.90} (in L: {rec['unconstrained']['in_language']})\n"
            f"     mode2: {m2['sql']!r:.90} [{m2['stop']}, in L: {m2['in_language']}, "
            f"checker {m2.get('checker')}, run {m2.get('run')}]\n"
            f"     mode1: {m1['sql']!r:.90} [{m1['stop']}, in L: {m1['in_language']}]",
            flush=True,
        )

    summary = summarize(records)
    result = {
        "bench": "smollm2_50",
        "host": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": args.threads,
            "date": time.strftime("%Y-%m-%d"),
            "uptime_start": uptime_start,
            "uptime_end": os.popen("uptime").read().strip(),
            "engine": engine_source(),
        },
        "settings": {"max_new_tokens": budget, "greedy": True, "stop_on_exit": True},
        "model": {"name": lm.name, "load_seconds": load_s, "converted": lm.converted},
        "summary": summary,
        "questions": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"written {args.out}")


def resummarize(path: Path) -> None:
    """Recompute ``outside_grants`` of every output and the summary of a results file."""
    result = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        schema = SchemaSnapshot.from_sqlite(example_database(Path(tmp)))
    policy = example_policy(schema)
    for rec in result["questions"]:
        grants = policy.grants(rec["role"], schema)
        for mode in ("unconstrained", "mode2", "mode1"):
            rec[mode]["outside_grants"] = outside_grants(rec[mode]["sql"], grants)
    result["summary"] = summarize(result["questions"])
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(records)}
    for mode in ("unconstrained", "mode2", "mode1"):
        rs = [r[mode] for r in records]
        tokens = sum(r["tokens"] for r in rs)
        seconds = sum(r["seconds"] for r in rs)
        out[mode] = {
            "tokens_per_s_median": statistics.median(r["tokens"] / r["seconds"] for r in rs),
            "tokens_per_s_aggregate": tokens / seconds,
            "tokens_mean": tokens / len(rs),
            "in_language": sum(r["in_language"] for r in rs),
            "names_table_outside_grants": sum(bool(r["tables_outside_grants"]) for r in rs),
            "outside_grants_textual": sum(bool(r["outside_grants"]) for r in rs),
            "checker_accepts": sum(r.get("checker") == [] for r in rs),
            "runs_ok": sum(str(r.get("run", "")).startswith("ok") for r in rs),
        }
        if mode != "unconstrained":
            out[mode]["stops"] = {
                s: sum(r["stop"] == s for r in rs) for s in sorted({r["stop"] for r in rs})
            }
            out[mode]["audits_replay"] = sum(r["audit_replays"] for r in rs)
    m2 = [r["mode2"] for r in records]
    out["mode2"]["mask_ms_per_token_median"] = statistics.median(
        1000 * r["mask_seconds"] / max(1, r["tokens"]) for r in m2
    )
    out["mode2"]["ahead_ms_per_token_median"] = statistics.median(
        1000 * r.get("ahead_seconds", 0.0) / max(1, r["tokens"]) for r in m2
    )
    m1 = [r["mode1"] for r in records]
    out["mode1"]["outside_model_ms_per_token_median"] = statistics.median(
        1000 * (r["seconds"] - r["model_seconds"]) / max(1, r["tokens"]) for r in m1
    )
    free = out["unconstrained"]["tokens_per_s_aggregate"]
    out["ratio_mode2_vs_unconstrained"] = out["mode2"]["tokens_per_s_aggregate"] / free
    out["ratio_mode1_vs_unconstrained"] = out["mode1"]["tokens_per_s_aggregate"] / free
    return out


def ap_fmt() -> Any:
    return argparse.RawDescriptionHelpFormatter


if __name__ == "__main__":
    main()
