"""``grid demo``: model-free, constrained random generation of SQL per role.

For each role of the example policy over the example schema (``examples/
company.sql``), a random sampler picks tokens from GRID's mask for a while, then
the decode loop writes the shortest legal completion and EOS. Every statement is
printed with the verdict of its audit chain, and the logs are written as JSON
Lines. No model is involved: the point is that whatever the sampler does, the
output is a sentence of the role's language.

Roles (until policy bundles land, they are defined here):

- ``analyst``: SELECT only, on ``departments`` and ``employees``;
- ``clerk``: SELECT, INSERT and UPDATE on ``orders`` and ``employees``;
- ``admin``: every statement on every table.
"""

from __future__ import annotations

import argparse
import random
import re
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path

from grid_core.audit import verify_file
from grid_core.decode import generate
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary, cl100k
from grid_sql.dialects import get_dialect


@dataclass(frozen=True)
class Role:
    name: str
    verbs: frozenset[str]
    tables: frozenset[str]


ROLES = (
    Role("analyst", frozenset({"SELECT"}), frozenset({"departments", "employees"})),
    Role("clerk", frozenset({"SELECT", "INSERT", "UPDATE"}), frozenset({"orders", "employees"})),
    Role(
        "admin",
        frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"}),
        frozenset({"departments", "employees", "salaries", "orders"}),
    ),
)
# Each verb is a statement form of the dialect (``REPLACE INTO`` is an insert form).
STATEMENT_FORMS = {
    "SELECT": "select_stmt",
    "INSERT": "insert_stmt",
    "UPDATE": "update_stmt",
    "DELETE": "delete_stmt",
}
PUNCTUATION = (b"*", b",", b"(", b")", b"=", b"<", b">", b";", b"0", b"1", b"10", b".")
READABLE = re.compile(rb" ?[A-Za-z0-9_,*()=<>.';]+")


def example_schema() -> dict[str, list[str]]:
    """Table -> columns of the example database (built in memory from its DDL)."""
    ddl = resources.files("grid_sql.examples").joinpath("company.sql").read_text()
    db = sqlite3.connect(":memory:")
    db.executescript(ddl)
    tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
    return {t: [r[1] for r in db.execute(f"pragma table_info({t})")] for t in tables}


def role_grammar(dialect: Grammar, role: Role) -> Grammar:
    """L2: drop the statement forms of the verbs the role may not use.

    A form is cut where ``statement`` derives it; reduction then removes
    everything only that form could reach.
    """
    banned = {form for verb, form in STATEMENT_FORMS.items() if verb not in role.verbs}
    return dialect.project(
        lambda r: r.origin != "statement" or banned.isdisjoint(r.expansion), role.name
    )


def sampler(ids: Sequence[int], rng: random.Random, vocab: Vocabulary, words: set[bytes]) -> int:
    """Random over the mask: EOS when offered, else mostly SQL-looking tokens.

    A token is SQL-looking when its spelling, stripped and lower-cased, is a
    keyword, a schema word or a punctuation mark. The choice is always inside
    the mask; the preference only makes the demo readable.
    """
    eos = [i for i in ids if i in vocab.eos_ids]
    if eos and rng.random() < 0.5:
        return eos[0]
    plausible = [
        i
        for i in ids
        if READABLE.fullmatch(vocab.token_bytes[i])
        and vocab.token_bytes[i].strip().lower() in words
    ]
    if plausible and rng.random() < 0.97:
        return rng.choice(plausible)
    readable = [
        i for i in ids if i not in vocab.eos_ids and READABLE.fullmatch(vocab.token_bytes[i])
    ]
    return rng.choice(readable or list(ids))


def run(count: int, seed: int, budget: int, out: Path) -> int:
    t0 = time.perf_counter()
    sqlite = get_dialect("sqlite")
    dialect = load_grammar(sqlite.grammar_text, "sqlite")
    vocab = cl100k()
    schema = example_schema()
    print(
        f"dialect sqlite ({dialect.n_terminals} terminals, {len(dialect.rules)} rules), "
        f"vocabulary {vocab.name} ({vocab.n_vocab} ids), loaded in {time.perf_counter() - t0:.1f}s"
    )
    rng = random.Random(seed)
    failures = 0
    for role in ROLES:
        t1 = time.perf_counter()
        words = {
            "TABLE_NAME": [t.encode() for t in sorted(role.tables)],
            "COLUMN_NAME": sorted({c.encode() for t in role.tables for c in schema[t]}),
            "CTE_NAME": [b"cte"],
        }
        engine = Engine(role_grammar(dialect, role), vocab, words)
        plausible = {w.lower() for ws in words.values() for w in ws}
        plausible |= {k.lower().encode() for k in sqlite.keywords} | set(PUNCTUATION)
        print(
            f"\nrole {role.name}: verbs {', '.join(sorted(role.verbs))}; "
            f"tables {', '.join(sorted(role.tables))} (built in {time.perf_counter() - t1:.1f}s)"
        )
        for n in range(count):
            gen = generate(
                engine.guide(), partial(sampler, vocab=vocab, words=plausible), budget, rng
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
    p.add_argument("--count", type=int, default=3, help="statements per role")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--budget", type=int, default=40, help="token budget per statement")
    p.add_argument("--out", type=Path, default=None, help="directory for the audit logs")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    out = args.out or Path(tempfile.mkdtemp(prefix="grid-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    return run(args.count, args.seed, args.budget, out)
