"""OBL-KEY1 directly: configurations that share a cache key share their walk.

DESIGN.md section 6: two configurations sharing a key must produce byte-identical
CI masks. This test does not trust the key; it collects configurations reached
on a real corpus and checks the obligation group by group:

- **corpus**: Spider's dev gold statements of two databases (two schemas),
  read by three roles of one policy (their projections differ: SELECT only,
  SELECT without joins, subqueries, set operations, CTEs or windows, and
  every verb), each role with its schema lexicon (table, column and CTE
  categories), all engines of a vocabulary in one dialect family (one DFA and
  trie, so one T2 would serve them all);
- **tokens**: each statement is read token by token, the longest token of the
  vocabulary that spells the text ahead and that the guide accepts (as a
  tokenizer would, with the mask as its only judge), until the role's language
  ends (a statement a role cannot say is read as far as it stays viable);
  four real vocabularies;
- **check**: every configuration reached is keyed as the engine keys its root
  walk (``Engine.key`` over the scanner normal form and the allowed set; an
  ``IdentKey`` carries the schema), the configurations are grouped by key, and
  in every group of two or more the *uncached* walk of each member (from its
  raw remainder) must be identical within the group: the same CI trie nodes
  in the same order and the same CD entries (node, terminal, tail). An entry's
  bytes (encoding, payload, CD) are a function of that walk over the one trie,
  so identical walks are byte-identical entries.

Kernels loaded, the uncached walks are the kernels' (``Engine._walk_from``);
with ``GRID_KERNELS=0`` they are the Python reference walk, on cl100k only and
three statements per database (the Python walk of a 100k-token trie takes
tenths of a second). Numbers (kernels, the 2-core box): about 2,000
configurations and 18,000 to 27,000 keys per vocabulary (400 of them root
keys), 13,000 to 21,000 keys shared by two or more walks, nearly all of them
across engines (roles or schemas), 5,000 to 6,000 of those identifier keys
(roles of one schema); 40 s for the four vocabularies.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from grid_core import kernels
from grid_core import vocab as vocabularies
from grid_core.cache import Key
from grid_core.grammar import Grammar
from grid_core.guide import Engine, GridGuide
from grid_core.lexer import Config
from grid_core.lexicon import Lexicon
from grid_core.parser import Node
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import PolicyBundle
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import SchemaSnapshot

SPIDER = Path(__file__).resolve().parents[3] / "shared" / "data" / "spider"
DATABASES = ("concert_singer", "pets_1")
POLICY = """
version = 1

[roles.reader]
verbs = ["SELECT"]
tables = "*"

[roles.simple]
verbs = ["SELECT"]
tables = "*"
banned_clauses = ["subquery", "set_operations", "cte", "join", "window"]

[roles.admin]
verbs = ["SELECT", "INSERT", "UPDATE", "DELETE"]
tables = "*"
"""
VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocabularies.cl100k,
    "qwen": vocabularies.qwen,
    "llama3": vocabularies.llama3,
    "smollm2": vocabularies.smollm2,
}
pytestmark = pytest.mark.skipif(
    not (SPIDER / "database").is_dir(), reason=f"the Spider databases are not at {SPIDER}"
)


@cache
def corpus(db: str) -> tuple[bytes, ...]:
    out = []
    for line in (SPIDER / "dev_gold.sql").read_text().splitlines():
        query, _, db_id = line.partition("\t")
        if db_id.strip() == db:
            query = query.strip()
            out.append((query if query.endswith(";") else query + ";").encode())
    return tuple(dict.fromkeys(out))


@cache
def deployments() -> tuple[tuple[str, Grammar, Lexicon], ...]:
    """(label, role grammar, schema lexicon) for every (schema, role)."""
    out = []
    for db in DATABASES:
        schema = SchemaSnapshot.from_sqlite(SPIDER / "database" / db / f"{db}.sqlite", db)
        policy = PolicyBundle.loads(POLICY, "obl-key1.toml", schema)
        for role in ("reader", "simple", "admin"):
            lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants(role, schema))
            projection = RoleProjection.compile(policy.role(role), SQLITE, words=lexicon.words)
            out.append((f"{db}/{role}", projection.grammar, lexicon.lexicon))
    return tuple(out)


def engines(vocab: Vocabulary) -> list[tuple[str, Engine]]:
    """(label, engine) for every (schema, role), in one dialect family."""
    dfa, trie = dialect_dfa(SQLITE), build_trie(vocab)
    out = [
        (label, Engine(grammar, vocab, lexicon, dfa=dfa, trie=trie, cache=False))
        for label, grammar, lexicon in deployments()
    ]
    families = {e.family for _, e in out}
    assert len(families) == 1, "one dialect family: one T2 would serve every engine"
    return out


def configurations(engine: Engine, text: bytes, spelled: dict[bytes, int]) -> list[Config]:
    """The configurations a guide passes through reading ``text``, longest token first."""
    guide = GridGuide(engine, audit=False)
    out = [guide.config]
    longest = max(map(len, spelled))
    i = 0
    while i < len(text):
        for n in range(min(longest, len(text) - i), 0, -1):
            t = spelled.get(text[i : i + n])
            if t is None:
                continue
            if guide.validate_tokens([t]) == 1:
                guide.accept_token(t)
                out.append(guide.config)
                i += n
                break
        else:
            break  # the role's language ends here
    return out


Walk = tuple[int, bytes, int]
"""A walk's inputs: (trie node it starts at, pending bytes, allowed set)."""


def obligation(name: str, statements_per_db: int | None) -> dict[str, int]:
    """Collect, group and check; the counts, for the record."""
    vocab = VOCABS[name]()
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(vocab.token_bytes):
        if b and i not in vocab.special_ids:
            spelled.setdefault(b, i)
    groups: dict[Key, dict[tuple[str, Walk], Engine]] = defaultdict(dict)
    reached = 0
    for label, engine in engines(vocab):
        db = label.split("/")[0]
        seen: set[tuple[Node, bytes]] = set()
        for text in corpus(db)[:statements_per_db]:
            for config in configurations(engine, text, spelled):
                if (config.node, config.remainder) in seen:
                    continue  # the same configuration again: nothing new to compare
                seen.add((config.node, config.remainder))
                reached += 1
                allowed = engine.parser.allowed(config.node)
                root: Walk = (0, config.remainder, allowed)
                groups[engine.key(0, config.normal, allowed)][(label, root)] = engine
                # The CD sub-walks one shift deeper, keyed by their raw tails.
                _, cd = engine._walk_from(*root)
                for node, t, tail in cd:
                    after = engine.parser.allowed(engine.parser.shift(config.node, t))
                    groups[engine.key(node, tail, after)][(label, (node, tail, after))] = engine
    shared = [g for g in groups.values() if len(g) > 1]
    bad = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        walks = [engine._walk_from(*walk) for (_, walk), engine in members.items()]
        if any(walk != walks[0] for walk in walks[1:]):
            bad.append(f"{key}: {[member for member in members][:4]}")
    assert bad == [], f"{len(bad)} keys shared by walks with different results: {bad[:3]}"
    return {
        "configurations": reached,
        "keys": len(groups),
        "root keys": sum(key.root == 0 for key in groups),
        "shared keys": len(shared),
        "walks in shared keys": sum(map(len, shared)),
        "keys shared across engines": sum(len({lb for lb, _ in g}) > 1 for g in shared),
        "identifier keys shared across engines": sum(
            len({lb for lb, _ in g}) > 1 and key.kind == "ident"
            for key, g in groups.items()
            if len(g) > 1
        ),
    }


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_configurations_sharing_a_key_share_their_walk(name: str) -> None:
    """Fails if any key is shared by two walks with different results. Kills the
    planted ``ident-key-drops-allowed`` and ``t2-hit-across-schemas`` faults; the
    ``normal-form-key-drops-v`` one survives it (no walk of this corpus reads
    ``v``: see ``test_cache.test_the_normal_form_key_keeps_v``)."""
    start = time.monotonic()
    if kernels.load() is None and name != "cl100k":
        pytest.skip("the Python reference walk runs on one vocabulary (GRID_KERNELS=0)")
    counts = obligation(name, None if kernels.load() is not None else 3)
    print(f"{name}: {counts} in {time.monotonic() - start:.1f} s")
    assert counts["keys shared across engines"] > 0
    assert counts["identifier keys shared across engines"] > 0
