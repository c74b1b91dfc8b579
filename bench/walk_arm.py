"""Walk arm: model-free generations through GRID's decode loop; every stop must be in L.

Purpose. The termination guarantee of DESIGN.md section 7 (mode 1: every
non-error stop is a sentence of L, within the budget) checked at scale with no
model: a random sampler over the mask drives ``grid_core.decode.generate``
over the SQLite dialect, projected per role of grid-sql's example policy
(``analyst``, ``clerk``, ``admin``, ``intern``: ``RoleProjection``), each with
its schema lexicon over ``grid_sql/examples/company.sql`` (``SchemaLexicon``),
built as ``grid_sql.demo`` builds them (one shared T2 cache).

Every generation is checked for

- **in L**: grid-spec's ``Language.in_language`` on ``Grammar.to_lark()`` with
  the role's lexicons (the specification, which shares no code with grid-core);
  with ``--generation narrow``, L is the narrow profile's language, and each stop
  must also be in the role's whole language (``outside_role_language``);
- **lark**: lark's own LALR parser with its own contextual lexer on the same
  text. lark lexes differently from the union maximal munch of DESIGN.md
  section 3 (no lexicons, keyword-first), so a text lark rejects is counted as
  *lark lexes differently* when lark's token values differ from the
  specification's lexemes, and as a *disagreement* (a failure) otherwise;
- **dead ends**: a ``MaskError`` (empty mask at a viable prefix) is a failure;
- **budget**: more tokens than the budget (EOS included) is an overrun;
- **audit**: the sealed log verifies; every ``--replay-every``-th log is also
  replayed against the engine (``grid_core.replay``);
- **checker against SQLite**: the SemanticChecker with every column granted
  (so only its name resolution and statement rules speak) accepts the text iff
  SQLite prepares it (``EXPLAIN``, bind parameters bound to NULL) on the example
  database in memory. A disagreement either way is a failure: a statement the
  checker accepts and SQLite refuses breaks "after repair, every statement runs
  or is refused with a stated violation"; one it refuses and SQLite runs is a
  false refusal.

The sampler, per step: EOS with probability 0.3 when the mask offers it; else,
with probability 0.3, a uniform choice among the admitted "SQL-looking" tokens
(spelling, stripped and lower-cased, is a keyword, a schema word or a
punctuation mark, as ``grid_sql.demo`` defines them); else a uniform choice over
the whole mask. Budgets are drawn uniformly from [R0 + 1, ``--max-budget``]
where R0 is the empty output's reserve. Roles rotate per generation.

``--rise-configs N`` adds a sweep for the safety margin: along N configurations
of such walks, the reserve after *every* admitted token (not only the sampled
one) is computed and the largest one-token rise is reported.

Vocabulary: ``cl100k`` (tiktoken's cl100k_base) or ``cl100k:K``, its first K
ids (the 256 single bytes and the first K - 256 merges: byte-complete, a
smaller BPE vocabulary of the same family) plus EOS; the pure-Python mask is
the cost that decides how many generations fit.

Run: ``uv run python bench/walk_arm.py --help``; results go to
``bench/results/walk_arm*.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from host import host_description
from lark import Lark
from lark.exceptions import LarkError

from grid_core.audit import verify
from grid_core.cache import SharedCache
from grid_core.decode import DEFAULT_JUMP_FORWARD, generate
from grid_core.errors import MaskError
from grid_core.guide import Engine, GridGuide
from grid_core.replay import replay
from grid_core.reserve import DEFAULT_SAFETY, reserve_table
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary, cl100k
from grid_spec import Language
from grid_sql.checker import SemanticChecker, full_grants
from grid_sql.demo import PUNCTUATION
from grid_sql.dialects import SQLITE
from grid_sql.generation import PROFILES, Profile, generation_language
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection
from grid_sql.schema import example_schema

ROOT = Path(__file__).resolve().parent.parent
BINDINGS = re.compile(r"uses (\d+)")


class SqliteJudge:
    """The checker (every column granted) and SQLite (prepare only) on one text."""

    def __init__(self) -> None:
        schema = example_schema()
        tables = {t.name: t.column_names for t in schema.tables}
        self.checker = SemanticChecker.for_schema(schema, {"all": full_grants(tables)})
        self.db = sqlite3.connect(":memory:")
        self.db.text_factory = bytes  # EXPLAIN's p4 may hold a blob literal's bytes
        ddl = resources.files("grid_sql.examples").joinpath("company.sql").read_text()
        self.db.executescript(ddl)

    def verdict(self, text: bytes) -> tuple[bool, str]:
        """(the checker accepts it, SQLite's prepare-time error or "")."""
        sql = text.decode("utf-8")
        accepted = not self.checker.check(sql, "all")
        try:
            self.db.execute("EXPLAIN " + sql).fetchall()
        except sqlite3.ProgrammingError as e:  # bind parameters: prepare with NULLs
            n = BINDINGS.search(str(e))
            if n is None:
                return accepted, str(e)
            try:
                self.db.execute("EXPLAIN " + sql, [None] * int(n.group(1))).fetchall()
            except sqlite3.Error as e2:
                return accepted, str(e2)
        except sqlite3.Error as e:
            return accepted, str(e)
        return accepted, ""


LARK_COUNTS = {
    "ok": "lark_ok",
    "lexes-differently": "lark_lexes_differently",
    "disagrees": "lark_disagrees",
}


@functools.cache
def make_vocab(spec: str) -> Vocabulary:
    """``cl100k`` or ``cl100k:K`` (the first K ids of cl100k_base, plus EOS)."""
    full = cl100k()
    if spec == "cl100k":
        return full
    name, _, k = spec.partition(":")
    if name != "cl100k" or not k.isdigit() or not 256 <= int(k) < full.n_vocab:
        raise SystemExit(f"unknown vocabulary {spec!r} (cl100k or cl100k:K, 256 <= K)")
    n = int(k)
    return Vocabulary.from_spellings(spec, [*full.token_bytes[:n], b""], {n}, (n,))


@dataclass
class Arm:
    """One role: its engine, its specification and lark's own parser."""

    role: str
    engine: Engine
    spec: Language
    lark: Lark
    lark_lexer: Lark
    sqlish: frozenset[int]
    r0: int
    whole: Language
    """The role's whole language (its projection): every stop of a generation profile
    must be in it too."""


def build_arms(vocab: Vocabulary, generation: Profile = "full") -> list[Arm]:
    """One arm per role of the example policy, in the role's whole language (``full``)
    or its narrow generation profile (``narrow``, :mod:`grid_sql.generation`)."""
    schema = example_schema()
    policy = example_policy(schema)
    trie = build_trie(vocab)
    shared = SharedCache()
    arms = []
    for name in sorted(policy.roles):
        lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants(name, schema))
        projection = RoleProjection.compile(policy.role(name), SQLITE, words=lexicon.words)
        grammar, words, dfa = generation_language(
            generation, projection.grammar, SQLITE, lexicon.words, name
        )
        engine = Engine(grammar, vocab, words, dfa=dfa, trie=trie, cache=shared)
        text = grammar.to_lark()
        plausible = {w.lower() for ws in words.values() for w in ws}
        plausible |= {k.lower().encode() for k in SQLITE.keywords} | set(PUNCTUATION)
        sqlish = frozenset(
            i for i, b in enumerate(vocab.token_bytes) if b and b.strip().lower() in plausible
        )
        r0 = reserve_table(engine).reserve(engine.lexer.initial)
        spec = Language(text, {c: sorted(ws) for c, ws in words.items()})
        whole = spec
        if grammar is not projection.grammar:
            whole = Language(projection.grammar.to_lark(), lexicon.word_lists())
        arms.append(
            Arm(
                name,
                engine,
                spec,
                Lark(text, parser="lalr", lexer="contextual"),
                Lark(text, parser=None, lexer="basic"),
                sqlish,
                r0,
                whole,
            )
        )
    return arms


def walk_sampler(arm: Arm) -> Any:
    eos = frozenset(arm.engine.vocab.eos_ids)

    def sample(ids: Sequence[int], rng: random.Random) -> int:
        x = rng.random()
        if x < 0.3:
            offered = [i for i in ids if i in eos]
            if offered:
                return offered[0]
        if x < 0.6:
            good = [i for i in ids if i in arm.sqlish]
            if good:
                return rng.choice(good)
        pool = [i for i in ids if i not in eos]
        return rng.choice(pool or list(ids))

    return sample


def lark_verdict(arm: Arm, text: bytes) -> str:
    """``ok``, ``lexes-differently`` or ``disagrees`` (see the module header)."""
    s = text.decode("latin-1")
    try:
        arm.lark.parse(s)
        return "ok"
    except LarkError:
        pass
    try:
        theirs = [str(tok) for tok in arm.lark_lexer.lex(s)]
    except LarkError:
        return "lexes-differently"
    lexed = arm.spec.lex(s, final=True)
    assert lexed is not None
    ignored = [arm.spec.regex[t] for t in arm.spec.ignored]
    ours = [x for x in lexed[0] if not any(r.fullmatch(x) for r in ignored)]
    return "lexes-differently" if ours != theirs else "disagrees"


def native_cache_stats(arms: list[Arm]) -> dict[str, Any] | None:
    """The native guide's caches over the run (None on the Python guide): the
    walk cache the roles' engines share (one family, one cache: its counts are
    read once) and the subtree memos, summed over the engines. The
    ``cache_t1_hit_rate`` / ``cache_t2_hit_rate`` beside them count grid-core's
    Python tiers, which the native guide's fills do not go through."""
    kernels = [a.engine.kernel for a in arms if a.engine.kernel is not None]
    if not kernels:
        return None
    held, hits, misses = kernels[0].walk_stats
    memo = [k.memo_stats for k in kernels]
    memo_hits, memo_misses = sum(m[1] for m in memo), sum(m[2] for m in memo)
    return {
        "walks_held": held,
        "walk_hits": hits,
        "walk_misses": misses,
        "walk_hit_rate": hits / (hits + misses) if hits + misses else None,
        "memo_chunks_held": sum(m[0] for m in memo),
        "memo_hit_rate": memo_hits / (memo_hits + memo_misses) if memo_hits + memo_misses else None,
    }


def run(
    n: int,
    vocab: str = "cl100k:4096",
    seed: int = 0,
    max_budget: int = 80,
    safety: int = DEFAULT_SAFETY,
    replay_every: int = 0,
    progress: bool = False,
    generation: Profile = "full",
) -> dict[str, Any]:
    """``n`` generations; returns the summary (see the module header)."""
    t_build = time.perf_counter()
    arms = build_arms(make_vocab(vocab), generation)
    build_s = time.perf_counter() - t_build
    rng = random.Random(seed)
    samplers = [walk_sampler(a) for a in arms]
    judge = SqliteJudge()
    stops: dict[str, int] = {}
    failures: list[dict[str, Any]] = []
    counts = dict.fromkeys(
        [
            "in_language",
            "not_in_language",
            "outside_role_language",
            "dead_ends",
            "budget_overruns",
            "audit_invalid",
            "replayed",
            "replay_diverged",
            "lark_ok",
            "lark_lexes_differently",
            "lark_disagrees",
            "checker_accepts_sqlite_refuses",
            "checker_refuses_sqlite_prepares",
            "early_triggers",
            "sampled",
            "forced",
            "reserve",
        ],
        0,
    )
    tokens: list[int] = []
    max_rise = 0
    per_role: dict[str, int] = {}
    t0 = time.perf_counter()
    for k in range(n):
        arm = arms[k % len(arms)]
        budget = rng.randint(arm.r0 + 1, max_budget)
        try:
            gen = generate(arm.engine.guide(), samplers[k % len(arms)], budget, rng, safety=safety)
        except MaskError as e:
            counts["dead_ends"] += 1
            failures.append({"k": k, "role": arm.role, "error": str(e)})
            continue
        per_role[arm.role] = per_role.get(arm.role, 0) + 1
        stops[gen.stop_reason] = stops.get(gen.stop_reason, 0) + 1
        tokens.append(len(gen.tokens))
        for key in ("sampled", "forced", "reserve"):
            counts[key] += getattr(gen, key)
        counts["early_triggers"] += gen.early_triggers
        max_rise = max(max_rise, gen.max_rise)
        bad: list[str] = []
        if len(gen.tokens) > budget:
            counts["budget_overruns"] += 1
            bad.append("budget")
        if arm.spec.in_language(gen.text):
            counts["in_language"] += 1
        else:
            counts["not_in_language"] += 1
            bad.append("not in L")
        if arm.whole is not arm.spec and not arm.whole.in_language(gen.text):
            counts["outside_role_language"] += 1
            bad.append("outside the role's whole language")
        verdict = lark_verdict(arm, gen.text)
        counts[LARK_COUNTS[verdict]] += 1
        if verdict == "disagrees":
            bad.append("lark disagrees")
        accepted, error = judge.verdict(gen.text)
        if accepted and error:
            counts["checker_accepts_sqlite_refuses"] += 1
            bad.append(f"the checker accepts it, SQLite refuses it: {error}")
        elif not accepted and not error:
            counts["checker_refuses_sqlite_prepares"] += 1
            bad.append("the checker refuses it, SQLite prepares it")
        lines = gen.audit.lines()
        if not verify(lines).ok:
            counts["audit_invalid"] += 1
            bad.append("audit")
        if replay_every and k % replay_every == 0:
            counts["replayed"] += 1
            if not replay(lines, arm.engine).ok:
                counts["replay_diverged"] += 1
                bad.append("replay")
        if bad:
            failures.append({"k": k, "role": arm.role, "why": bad, "text": gen.text.hex()})
        if progress and (k + 1) % 500 == 0:
            dt = time.perf_counter() - t0
            print(f"  {k + 1}/{n} generations, {dt:.0f} s, failures {len(failures)}", flush=True)
    elapsed = time.perf_counter() - t0
    t1 = [a.engine.t1 for a in arms if a.engine.t1 is not None]
    hits, misses = sum(t.hits for t in t1), sum(t.misses for t in t1)
    t2 = arms[0].engine.shared.table if arms[0].engine.shared is not None else None
    t2_total = t2.hits + t2.misses if t2 is not None else 0
    native = native_cache_stats(arms)
    return {
        "n": n,
        "vocab": vocab,
        "n_vocab": arms[0].engine.vocab.n_vocab,
        "seed": seed,
        "max_budget": max_budget,
        "safety": safety,
        "jump_forward": DEFAULT_JUMP_FORWARD,
        "roles": {a.role: {"generations": per_role.get(a.role, 0), "r0": a.r0} for a in arms},
        "stop_reasons": stops,
        **counts,
        "tokens_mean": statistics.fmean(tokens) if tokens else 0.0,
        "tokens_max": max(tokens, default=0),
        "max_rise_taken": max_rise,
        "cache_t1_hit_rate": hits / (hits + misses) if hits + misses else None,
        "cache_t2_hit_rate": t2.hits / t2_total if t2 is not None and t2_total else None,
        "native_cache": native,
        "failures": failures[:50],
        "build_s": round(build_s, 2),
        "elapsed_s": round(elapsed, 1),
        "ms_per_generation": round(1000 * elapsed / max(n, 1), 1),
        "host": host_description(),
    }


def rise_sweep(
    vocab: str, configs: int, seed: int = 1, generation: Profile = "full"
) -> dict[str, Any]:
    """The largest one-token rise of the reserve over every admitted token of
    ``configs`` configurations visited by walks (see the module header)."""
    arms = build_arms(make_vocab(vocab), generation)
    rng = random.Random(seed)
    worst: tuple[int, str, str, str] = (-(10**9), "", "", "")
    evaluated, visited = 0, 0
    histogram: dict[int, int] = {}
    t0 = time.perf_counter()
    while visited < configs:
        arm = arms[visited % len(arms)]
        engine, table = arm.engine, reserve_table(arm.engine)
        spelling, eos = engine.vocab.token_bytes, set(engine.vocab.eos_ids)
        sample = walk_sampler(arm)
        guide = GridGuide(engine)  # its Python configuration is read below
        for _ in range(rng.randint(1, 40)):
            if visited >= configs:
                break
            ids = guide.mask_ids()
            config = guide.config
            r = table.reserve(config)
            visited += 1
            for t in ids:
                if t in eos:
                    continue
                nxt = engine.lexer.advance(config, spelling[t])
                assert nxt is not None
                rise = table.reserve(nxt) - r
                evaluated += 1
                histogram[rise] = histogram.get(rise, 0) + 1
                if rise > worst[0]:
                    worst = (rise, arm.role, repr(config.remainder[-24:]), repr(spelling[t]))
            t = sample(ids, rng)
            if t in eos:
                break
            guide.accept_token(t)
    return {
        "vocab": vocab,
        "configs": visited,
        "tokens_evaluated": evaluated,
        "max_rise": worst[0],
        "worst": {"role": worst[1], "remainder_tail": worst[2], "token": worst[3]},
        "rise_histogram": {str(k): v for k, v in sorted(histogram.items())},
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000, help="generations")
    p.add_argument("--vocab", default="cl100k:4096", help="cl100k or cl100k:K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-budget", type=int, default=80)
    p.add_argument("--safety", type=int, default=DEFAULT_SAFETY)
    p.add_argument("--replay-every", type=int, default=100)
    p.add_argument("--rise-configs", type=int, default=0, help="configurations to sweep")
    p.add_argument("--rise-vocab", default="cl100k", help="vocabulary of the rise sweep")
    p.add_argument(
        "--generation",
        choices=PROFILES,
        default="full",
        help="the roles' language: full (default) or the narrow generation profile",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/walk_arm.json")
    args = p.parse_args(argv)
    summary = run(
        args.n,
        args.vocab,
        args.seed,
        args.max_budget,
        args.safety,
        args.replay_every,
        True,
        args.generation,
    )
    summary["argv"] = list(argv) if argv is not None else sys.argv[1:]
    summary["generation"] = args.generation
    if args.rise_configs:
        summary["rise_sweep"] = rise_sweep(
            args.rise_vocab, args.rise_configs, args.seed + 1, args.generation
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    shown = {k: v for k, v in summary.items() if k not in ("failures", "host")}
    print(json.dumps(shown, indent=2, sort_keys=True))
    bad = (
        summary["not_in_language"]
        + summary["dead_ends"]
        + summary["budget_overruns"]
        + summary["audit_invalid"]
        + summary["replay_diverged"]
        + summary["lark_disagrees"]
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
