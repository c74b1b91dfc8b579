"""``grid demo``: model-free, constrained random generation of SQL per role.

For each role of the example policy (``examples/company.policy.toml``) over the
example schema (``examples/company.sql``), a random sampler picks tokens from
GRID's mask for a while, then the decode loop writes the shortest legal
completion and EOS. Every statement is printed with the verdict of its audit
chain, and the logs are written as JSON Lines. No model is involved: the point
is that whatever the sampler does, the output is a sentence of the role's
language (its verbs, its tables, the schema's names).

The arguments are checked before anything is printed: ``--count`` 1 to
:data:`MAX_COUNT`, ``--budget`` 1 to :data:`MAX_BUDGET` and at least every
role's shortest statement with EOS (the engines are built first, silently).
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from grid_core.audit import verify_file
from grid_core.cache import SharedCache
from grid_core.cli import UsageError, int_in
from grid_core.decode import generate, reserve_source
from grid_core.guide import Engine
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary, cl100k
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import example_schema

#: The most statements per role and tokens per statement ``grid demo`` takes.
MAX_COUNT = 1_000
MAX_BUDGET = 4_096

PUNCTUATION = (b"*", b",", b"(", b")", b"=", b"<", b">", b";", b"0", b"1", b"10", b".")
READABLE = re.compile(rb" ?[A-Za-z0-9_,*()=<>.';]+")


def _starts_a_word(spelling: bytes, words: set[bytes]) -> bool:
    """A keyword or schema word after a blank, or a punctuation mark."""
    word = spelling.strip().lower()
    if word in PUNCTUATION:
        return spelling.lstrip(b" ") == word
    return word in words and spelling.lower() == b" " + word


def sampler(ids: Sequence[int], rng: random.Random, vocab: Vocabulary, words: set[bytes]) -> int:
    """Random over the mask: EOS when offered, else mostly SQL-looking tokens.

    A token is SQL-looking when its spelling, stripped and lower-cased, is a
    keyword, a schema word or a punctuation mark. The choice is always inside
    the mask; the preference only makes the demo readable.
    """
    eos = [i for i in ids if i in vocab.eos_ids]
    if eos and rng.random() < 0.5:
        return eos[0]
    plausible = [i for i in ids if _starts_a_word(vocab.token_bytes[i], words)]
    if plausible and rng.random() < 0.97:
        return rng.choice(plausible)
    readable = [i for i in ids if READABLE.fullmatch(vocab.token_bytes[i]) and i not in eos]
    return rng.choice(readable or list(ids))


@dataclass(frozen=True)
class _Role:
    """A role of the example policy, its engine built, ready to sample."""

    name: str
    engine: Engine
    words: set[bytes]
    header: str


def _roles(vocab: Vocabulary) -> list[_Role]:
    """Every role of the example policy, in the policy's order, each with its engine
    over ``vocab`` (one shared trie, DFA and cache) and its header line."""
    schema = example_schema()
    policy = example_policy(schema)
    trie, dfa = build_trie(vocab), dialect_dfa(SQLITE)
    shared = SharedCache()  # the family of the first engine (the dialect's)
    out = []
    for name in policy.roles:
        t1 = time.perf_counter()
        role = policy.role(name)
        grants = policy.grants(name, schema)
        lexicon = SchemaLexicon.build(SQLITE, schema, grants)
        projection = RoleProjection.compile(role, SQLITE, words=lexicon.words)
        engine = Engine(
            projection.grammar, vocab, lexicon.lexicon, dfa=dfa, trie=trie, cache=shared
        )
        words = {w.lower() for ws in lexicon.words.values() for w in ws}
        words |= {k.lower().encode() for k in SQLITE.keywords} | set(PUNCTUATION)
        header = (
            f"role {name}: verbs {', '.join(sorted(role.verbs))}; tables "
            f"{', '.join(sorted(grants.columns))} (built in {time.perf_counter() - t1:.1f}s)"
        )
        out.append(_Role(name, engine, words, header))
    return out


def _shortest(engine: Engine) -> int:
    """Tokens of the shortest statement of ``engine``, EOS included (what a budget
    must hold for the decode loop to start)."""
    source = reserve_source(engine.guide(audit=False))
    return source.reserve(source.start()) + 1


def run(count: int, seed: int, budget: int, out: Path) -> int:
    """Print ``count`` statements of each role, their logs written to ``out``; exit
    status 1 if a log does not verify. UsageError, before anything is printed, when
    ``budget`` cannot hold a role's shortest statement."""
    t0 = time.perf_counter()
    vocab = cl100k()
    roles = _roles(vocab)
    for role in roles:
        if (shortest := _shortest(role.engine)) > budget:
            raise UsageError(
                "grid demo",
                f"argument --budget: {budget} tokens cannot hold the shortest statement of "
                f"role {role.name} ({shortest} tokens with EOS)",
            )
    print(
        f"dialect sqlite, policy {len(roles)} roles, vocabulary {vocab.name} "
        f"({vocab.n_vocab} ids), loaded in {time.perf_counter() - t0:.1f}s"
    )
    rng = random.Random(seed)
    failures = 0
    for role in roles:
        print(f"\n{role.header}")
        for n in range(count):
            gen = generate(
                role.engine.guide(), partial(sampler, vocab=vocab, words=role.words), budget, rng
            )
            log = out / f"{role.name}-{n}.jsonl"
            gen.audit.write(log)
            verdict = verify_file(log)
            failures += not verdict.ok
            sql = gen.text.decode("utf-8", "replace")
            print(f"  [{gen.stop_reason}, {len(gen.tokens)} tokens] {sql}")
            print(f"      audit {log.name}: {verdict}")
    print(f"\naudit logs in {out}")
    return 1 if failures else 0


def demo_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("demo", help="model-free constrained generation for each role")
    p.add_argument(
        "--count",
        type=int_in(1, MAX_COUNT),
        default=3,
        help=f"statements per role (default: 3; 1 to {MAX_COUNT})",
    )
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument(
        "--budget",
        type=int_in(1, MAX_BUDGET),
        default=40,
        help=f"token budget per statement (default: 40; at most {MAX_BUDGET}, at least each "
        "role's shortest statement)",
    )
    p.add_argument("--out", type=Path, default=None, help="directory for the audit logs")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    out = args.out or Path(tempfile.mkdtemp(prefix="grid-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    return run(args.count, args.seed, args.budget, out)
