"""RBAC at mask level: the exhaustive speller over Qwen's vocabulary, every role.

Purpose. Issue 5's last item: for each role of grid-sql's example policy
(``examples/company.policy.toml``) over the example schema
(``examples/company.sql``), in the SQLite dialect projected for the role
(``RoleProjection``, with its ``SchemaLexicon``), reach every identifier and verb
position of the role's LALR tables and try to spell every relation without
grant (bare, in each identifier quote, as a string literal, as a qualifier; any
letter case), every verb the role lacks and, at every position where a function
call may stand, every function its policy does not grant (issue 15; the example
roles get the SQLite dialect's default: randomblob, zeroblob, printf and format
are out) with every token path Qwen's 151,851-token vocabulary offers; the same
search must complete the allowed names and calls (positive controls). Forbidden
names the grammar reads as something else (an alias, a string, a qualifier) are
completed into sentences and compiled by SQLite with an authorizer, which must
see no table without grant, no write with a verb the role lacks and no call of
a function without grant. The method and its nouns: ``grid_sql.speller``.

Engines are built as ``grid_sql.demo`` and ``bench/walk_arm.py`` build them (one
shared T2 cache); masks are grid-core's (grid-kernels when built).

Exit status 1 when any role has a bypass, a mask/lexer disagreement, a goal no
position hits, a state that shifts a verb the role lacks, a positive control not
reached, or an oracle violation.

Run: ``uv run python bench/rbac_speller.py`` (or ``nox -s rbac``); results go to
``bench/results/rbac_speller.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from host import host_description

from grid_core.cache import SharedCache
from grid_core.guide import Engine
from grid_core.trie import build_trie
from grid_core.vocab import qwen
from grid_sql.dialects import SQLITE
from grid_sql.generation import PROFILES, Profile, generation_language
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection
from grid_sql.schema import example_schema
from grid_sql.speller import GLUES, Oracle, RoleProbe, TokenIndex, probe_role

ROOT = Path(__file__).resolve().parent.parent


def failures(probe: RoleProbe) -> int:
    """What makes a role fail: each list is expected empty, each control reached."""
    return (
        len(probe.bypasses)
        + len(probe.disagreements)
        + len(probe.goals_missed)
        + len(probe.forbidden_verb_goals)
        + len(probe.controls_missing)
        + len(probe.witness_violations)
    )


def run(
    roles: Sequence[str] | None,
    glues: Sequence[bytes],
    oracle: bool,
    generation: Profile = "full",
) -> dict[str, Any]:
    t0 = time.perf_counter()
    schema = example_schema()
    policy = example_policy(schema)
    vocab = qwen()
    trie = build_trie(vocab)
    index = TokenIndex.build(vocab)
    shared = SharedCache()
    build_s = time.perf_counter() - t0
    print(f"vocabulary {vocab.name} ({vocab.n_vocab} ids) and index built in {build_s:.1f} s")
    names = list(roles) if roles else sorted(policy.roles)
    out: list[dict[str, Any]] = []
    bad = 0
    for name in names:
        grants = policy.grants(name, schema)
        lexicon = SchemaLexicon.build(SQLITE, schema, grants)
        projection = RoleProjection.compile(policy.role(name), SQLITE, words=lexicon.words)
        grammar, words, dfa = generation_language(
            generation, projection.grammar, SQLITE, lexicon.words, name
        )
        engine = Engine(grammar, vocab, words, dfa=dfa, trie=trie, cache=shared)
        probe = probe_role(
            engine,
            SQLITE,
            schema,
            grants,
            index,
            glues=glues,
            oracle=Oracle.example() if oracle else None,
        )
        report(probe)
        bad += failures(probe)
        out.append(dataclasses.asdict(probe))
    return {
        "vocab": vocab.name,
        "n_vocab": vocab.n_vocab,
        "dialect": SQLITE.name,
        "policy": policy.fingerprint,
        "schema": schema.fingerprint,
        "glues": [g.decode() for g in glues],
        "generation": generation,
        "oracle": oracle,
        "roles": out,
        "totals": {
            k: sum(r[k] for r in out)
            for k in (
                "positions",
                "function_positions",
                "searches",
                "trials",
                "paths",
                "cut",
                "masks",
                "controls_expected",
                "controls_reached",
                "witnesses",
                "oracle_controls_expected",
                "oracle_controls_seen",
            )
        }
        | {
            k: sum(len(r[k]) for r in out)
            for k in (
                "bypasses",
                "disagreements",
                "goals_missed",
                "forbidden_verb_goals",
                "witness_violations",
            )
        }
        | {"failures": bad},
        "build_s": round(build_s, 2),
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "host": host_description(),
    }


def report(p: RoleProbe) -> None:
    goals = p.identifier_goals + p.keyword_goals
    print(f"\nrole {p.role}: verbs {', '.join(p.verbs)}; tables {', '.join(p.tables)}")
    print(
        f"  positions {p.positions} ({p.relation_positions} relation, "
        f"{p.keyword_positions} keyword, {p.function_positions} call) "
        f"hit {goals - len(p.goals_missed)}/{goals} goals of {p.lalr_states} LALR states "
        f"({p.identifier_goals} identifier, {p.keyword_goals} keyword); forbidden verbs "
        f"shifted in {len(p.forbidden_verb_goals)} states"
    )
    print(
        f"  targets {len(p.targets_forbidden)} forbidden, {len(p.targets_allowed)} allowed; "
        f"{p.searches} searches, {p.trials} tokens tried, {p.paths} paths "
        f"({p.cut} cut), {p.masks} masks"
    )
    print(
        f"  bypasses {len(p.bypasses)}, mask/lexer disagreements {len(p.disagreements)}; "
        f"positive controls reached {p.controls_reached}/{p.controls_expected} "
        f"({p.control_spellings} spellings: {p.control_forms})"
    )
    print(
        f"  witnesses {p.witnesses} {p.witness_readings} ({p.witnesses_compiled} compiled), "
        f"violations {len(p.witness_violations)}; oracle controls seen "
        f"{p.oracle_controls_seen}/{p.oracle_controls_expected}; {p.seconds} s"
    )
    fails = (*p.bypasses, *p.disagreements, *p.goals_missed, *p.forbidden_verb_goals)
    for line in (*fails, *p.controls_missing)[:20]:
        print(f"  FAIL {line}")
    for line in p.witness_violations[:20]:
        print(f"  FAIL {line}")
    for line in p.oracle_controls_unseen:
        print(f"  unseen control: {line}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--roles", default="", help="comma-separated roles (default: all)")
    p.add_argument("--no-oracle", action="store_true", help="skip the SQLite witnesses")
    p.add_argument(
        "--glues", choices=("all", "space"), default="all", help="'space': a quicker run"
    )
    p.add_argument(
        "--generation",
        choices=PROFILES,
        default="full",
        help="the roles' language: full (default) or the narrow generation profile",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/rbac_speller.json")
    args = p.parse_args(argv)
    glues = GLUES if args.glues == "all" else (b" ",)
    roles = [r for r in args.roles.split(",") if r] or None
    summary = run(roles, glues, not args.no_oracle, args.generation)
    summary["argv"] = list(argv) if argv is not None else sys.argv[1:]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(f"\ntotals {json.dumps(summary['totals'], sort_keys=True)}; {summary['elapsed_s']} s")
    return 1 if summary["totals"]["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
