"""What a new role or schema specialization costs to build (issue #13: at most 5 ms
once the dialect's and the tokenizer's artifacts exist).

The path measured is the one `grid ask` and the transformers adapters run:
``grid_serve.text2sql.RoleEngines(schema, policy, vocab, trie)[role]`` (grants,
schema lexicon, projection, generation language, ``Engine`` with its kernels'
tables). The union DFA (``grid_sql.projection.dialect_dfa``) and the token trie
(SmolLM2's) are built once, before anything is timed: they are the dialect's and
the tokenizer's artifacts.

Three specializations, each built ``--builds`` times in a fresh ``RoleEngines`` (so
nothing of the role's own is reused; what the process has cached across roles is
reused, as in a server):

- ``new_role``: each role of the example policy over the example schema, in turn;
- ``new_schema``: the analyst role over a copy of the example schema whose tables
  and columns are renamed (``<name>_<k>``, k = the build's number): a new lexicon
  and a new catalog every build, the same verbs and clauses;
- ``new_projection``: ``new_role`` with the process's memos of projections,
  narrowed grammars and LALR(1) tables emptied before each build
  (``grid_sql.projection.PROJECTIONS``, ``grid_sql.generation.NARROWED``,
  ``grid_core.grammar.LALR_TABLES``, the kernels' ``Parsing`` memo): a role
  whose verbs and banned clauses no earlier role of the process had.

Each build is split into stages by timing the same calls ``RoleEngines._build``
makes; the medians are printed and written to ``--out`` (JSON). Absolute times on
the shared 2-core host are noisy: compare stages within one run.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from host import host_description, write_summary

from grid_core import kernels
from grid_core.grammar import LALR_TABLES
from grid_core.trie import build_trie
from grid_core.vocab import smollm2
from grid_serve.text2sql import RoleEngines, example_database
from grid_sql.database import database_for
from grid_sql.dialects import get_dialect
from grid_sql.generation import NARROWED
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.projection import PROJECTIONS, RoleProjection, dialect_dfa
from grid_sql.schema import SchemaSnapshot

TARGET_MS = 5.0

#: The example policy's analyst over a renamed schema (see ``renamed``).
ANALYST = """version = 1
[roles.analyst]
verbs = ["SELECT"]
tables = ["departments_{k}", "employees_{k}"]
"""


def renamed(schema: SchemaSnapshot, k: int) -> SchemaSnapshot:
    """``schema`` with its name and every table and column name suffixed ``_k``."""
    raw = json.loads(schema.to_json())

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: walk(value) if key != "name" else f"{value}_{k}" for key, value in node.items()
            }
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return SchemaSnapshot.from_json(json.dumps(walk(raw)))


def stages(engines: RoleEngines, role: str) -> dict[str, float]:
    """One build of ``role`` (``RoleEngines._build``'s calls), ms per stage."""
    clock = time.perf_counter
    out: dict[str, float] = {}
    t = clock()
    dialect = get_dialect(engines.schema.dialect)
    grants = engines.policy.grants(role, engines.schema)
    out["grants"], t = (clock() - t) * 1e3, clock()
    lexicon = SchemaLexicon.build(dialect, engines.schema, grants)
    out["lexicon"], t = (clock() - t) * 1e3, clock()
    projection = RoleProjection.compile(engines.policy.role(role), dialect, words=lexicon.words)
    out["projection"], t = (clock() - t) * 1e3, clock()
    grammar, words = engines._language(role, projection.grammar, lexicon.words)
    out["generation_language"], t = (clock() - t) * 1e3, clock()
    engine = engines._engine(grammar, words)
    out["engine"] = (clock() - t) * 1e3
    assert engine.kernel is not None, "grid-kernels is not loaded (GRID_KERNELS=0?)"
    out["total"] = sum(out.values())
    return out


def run(builds: int, make: Callable[[int], tuple[RoleEngines, str]]) -> dict[str, dict[str, float]]:
    rows: list[dict[str, float]] = []
    for k in range(builds):
        engines, role = make(k)
        gc.collect()
        rows.append(stages(engines, role))
    keys = rows[0].keys()
    return {
        key: {
            "median": statistics.median(r[key] for r in rows),
            "min": min(r[key] for r in rows),
            "p90": sorted(r[key] for r in rows)[int(0.9 * (len(rows) - 1))],
        }
        for key in keys
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builds", type=int, default=40, help="builds per specialization")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results/role_build.json")
    args = p.parse_args(argv)
    host = host_description()
    tmp = Path(__import__("tempfile").mkdtemp(prefix="grid-role-build-"))
    db = example_database(tmp)
    schema = database_for(db).snapshot(db)
    policy = example_policy(schema)
    vocab = smollm2()
    t0 = time.perf_counter()
    trie = build_trie(vocab)
    dialect_dfa(get_dialect(schema.dialect))
    RoleEngines(schema, policy, vocab, trie)["analyst"]  # the process's one-time work
    setup_s = time.perf_counter() - t0
    roles = sorted(policy.roles)

    def new_role(k: int) -> tuple[RoleEngines, str]:
        return RoleEngines(schema, policy, vocab, trie), roles[k % len(roles)]

    def new_schema(k: int) -> tuple[RoleEngines, str]:
        other = renamed(schema, k)
        policy = PolicyBundle.loads(ANALYST.format(k=k), "<bench>", other)
        return RoleEngines(other, policy, vocab, trie), "analyst"

    def new_projection(k: int) -> tuple[RoleEngines, str]:
        for memo in (PROJECTIONS, NARROWED, LALR_TABLES, kernels._parsings):
            memo.clear()
        return new_role(k)

    results = {
        "new_role": run(args.builds, new_role),
        "new_schema": run(args.builds, new_schema),
        "new_projection": run(args.builds, new_projection),
    }
    for name, r in results.items():
        parts = ", ".join(f"{k} {v['median']:.2f}" for k, v in r.items() if k != "total")
        total = r["total"]["median"]
        verdict = "met" if total <= TARGET_MS else "NOT met"
        print(
            f"{name}: {total:.2f} ms median, {r['total']['min']:.2f} min "
            f"(target {TARGET_MS} ms: {verdict}); {parts}",
            flush=True,
        )
    summary = {
        "benchmark": "role_build",
        "command": "uv run python bench/role_build.py " + " ".join(sys.argv[1:]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "vocab": "SmolLM2 (49,152 ids)",
        "setup_s": setup_s,
        "roles": roles,
        "host": host,
        "target_ms": TARGET_MS,
        "ms": results,
    }
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
