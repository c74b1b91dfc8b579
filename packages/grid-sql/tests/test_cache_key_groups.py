"""OBL-KEY1 directly: every configuration a cache key stands for walks alike.

The cache is sound when the key of a walk determines the walk (DESIGN.md
section 6; proofs/Cache.v ``key_serves``). The replay tests of grid-core
(``test_cache.py``) check a consequence (cache-on masks equal cache-off
masks along seeded replays); this module checks the obligation itself, on
real parts:

- **configurations reached on real corpora**: every byte prefix of a corpus
  of SQL statements (reads, writes, joins, subqueries, strings, comments,
  quoted names), for every engine of one walk family, as long as the
  prefix stays operationally viable in that engine's language. A token
  boundary of any tokenization is such a byte prefix;
- **one T2 shared by eight engines**: the four roles of the example policy
  (analyst, clerk, admin, intern) over two schemas with the same tables and
  different columns, so identifier positions carry two lexicon categories
  (tables and columns) and two schema fingerprints;
- **four real vocabularies** (cl100k, Qwen, Llama 3, SmolLM2).

Three tests per vocabulary:

- the corpus is not vacuous: keys shared across roles, generic keys shared
  across schemas (the identifier rule), keys whose members have different
  remainders or allowed sets (the normal form), identifier keys in both
  lexicon categories;
- **grid-core's key** (:meth:`grid_core.guide.Engine.key`: the normal form,
  the allowed set, the schema at identifier positions), root walks grouped
  by it: the members of each shared key have byte-identical *uncached* walks
  (``Engine._walk_from``, no T1, no T2: encoding, payload and CD entries).
  With the kernels loaded the walks are native and every member is checked;
  on the Python path (``GRID_KERNELS=0``: Python walks, about 0.1 s each on
  these vocabularies) :data:`PER_KEY` members of each key a coarse key could
  confuse, and of one key in eight of the others;
- **the kernels' key**, root walks and CD sub-walks one shift deeper (keyed
  by their raw tails): each member is looked up in the native cache the
  family shares (``EngineTables.register``, which walks only on a miss). A
  hit serves another member's entry, which must equal this member's own
  uncached native walk; every entry's id must be ``cache.entry_id`` under
  grid-core's key, so the two keys serialize alike.

Planted faults in grid-core's key (the allowed set dropped, the schema
dropped, the post-accept suffix ``v`` dropped) are caught here
(``grid-core/tests/test_planted_faults.py``), on the Python path.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from grid_core import vocab as vocabularies
from grid_core.cache import SPARSE, Entry, IdentKey, Key, SharedCache, entry_id, make_entry
from grid_core.guide import Engine
from grid_core.lexer import Config
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import SchemaSnapshot, example_schema

VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocabularies.cl100k,
    "qwen": vocabularies.qwen,
    "llama3": vocabularies.llama3,
    "smollm2": vocabularies.smollm2,
}
ROLES = ("analyst", "clerk", "admin", "intern")

#: The example schema's tables with other columns (``employees`` keeps the
#: columns the clerk's grant names).
OTHER_SCHEMA = """
CREATE TABLE departments (id INTEGER PRIMARY KEY, title TEXT, budget INTEGER, region TEXT);
CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER, hired TEXT,
                        email TEXT, manager_id INTEGER);
CREATE TABLE salaries (employee_id INTEGER, amount INTEGER, since TEXT, currency TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, employee_id INTEGER, total REAL, placed TEXT,
                     status TEXT);
"""

CORPUS = [
    b"SELECT * FROM employees;",
    b"SELECT name FROM employees WHERE dept_id = 1;",
    b"SELECT id, name, hired FROM employees ORDER BY hired DESC LIMIT 5;",
    b"SELECT dept_id, count(*) FROM employees GROUP BY dept_id;",
    b"SELECT name, budget FROM departments WHERE budget > 300000 ORDER BY budget DESC;",
    b"SELECT title, region FROM departments WHERE region LIKE 'E%';",
    b"SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.dept_id = d.id;",
    b"SELECT name FROM departments WHERE id IN (SELECT dept_id FROM employees);",
    b"SELECT name, email FROM employees WHERE manager_id IS NOT NULL;",
    b'SELECT "name", "budget" FROM "departments" WHERE "budget" IS NOT NULL;',
    b"SELECT name FROM employees WHERE name = 'O''Brien' -- the one\n;",
    b"SELECT id FROM employees UNION SELECT id FROM departments;",
    b"WITH cte AS (SELECT * FROM employees) SELECT count(*) FROM cte;",
    b"SELECT total, placed FROM orders WHERE total >= 10.5 /* big */ ;",
    b"SELECT status FROM orders WHERE placed > '2024-01-01';",
    b"INSERT INTO orders (id, employee_id, total) VALUES (7, 3, 99.5);",
    b"UPDATE orders SET total = total * 2 WHERE id = 7;",
    b"UPDATE employees SET name = 'Ada' WHERE id = 1;",
    b"DELETE FROM salaries WHERE amount < 1000;",
    b"SELECT amount, currency FROM salaries WHERE since < '2024-01-01';",
]

#: Members checked per key on the Python path (the most different first).
PER_KEY = 2
#: CD sub-walks taken below each configuration (spread over its CD entries).
SUBWALKS = 3


@dataclass(frozen=True)
class Member:
    """One walk of one engine: what its key stands for."""

    engine: int
    root: int
    pending: bytes
    allowed: int
    config: Config | None = field(default=None, compare=False)
    """The configuration of a root walk (None for a CD sub-walk)."""


@dataclass
class Family:
    """Engines of one walk family sharing one T2, and the labels of each."""

    engines: list[Engine]
    labels: list[tuple[str, str]]  # (schema, role)

    @functools.cached_property
    def alias(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The shared trie's alias offsets and ids, as numpy arrays."""
        trie = self.engines[0].trie
        return np.asarray(trie.alias_offset, np.int64), np.asarray(trie.alias_ids, np.int64)


@pytest.fixture(autouse=True, scope="module")
def _release() -> Iterator[None]:
    """Drop the engines and their native caches (hundreds of MB) after the module."""
    yield
    for cached in (family, roots, groups):
        cached.cache_clear()


@functools.cache
def family(name: str) -> Family:
    vocab = VOCABS[name]()
    trie, dfa = build_trie(vocab), dialect_dfa(SQLITE)
    shared = SharedCache()
    engines, labels = [], []
    for schema in (example_schema(), SchemaSnapshot.from_sqlite_ddl(OTHER_SCHEMA, "company_b")):
        policy = example_policy(schema)
        for role in ROLES:
            lex = SchemaLexicon.build(SQLITE, schema, policy.grants(role, schema))
            projected = RoleProjection.compile(policy.role(role), SQLITE, words=lex.words)
            engines.append(
                Engine(projected.grammar, vocab, lex.lexicon, dfa=dfa, trie=trie, cache=shared)
            )
            labels.append((schema.label, role))
    return Family(engines, labels)


@functools.cache
def roots(name: str) -> tuple[tuple[Member, ...], ...]:
    """Per engine, the root walk of every distinct configuration reached by a viable
    byte prefix of the corpus (the configuration's remainder and allowed set)."""
    out = []
    for engine in family(name).engines:
        lexer, parser = engine.lexer, engine.parser
        members: dict[tuple[object, bytes], Member] = {}
        for statement in CORPUS:
            config = lexer.initial
            for i in range(len(statement)):
                nxt = lexer.advance(config, statement[i : i + 1])
                if nxt is None or not lexer.is_viable(nxt):
                    break
                config = nxt
                members.setdefault(
                    (config.node, config.remainder),
                    Member(len(out), 0, config.remainder, parser.allowed(config.node), config),
                )
        out.append(tuple(members.values()))
    return tuple(out)


@functools.cache
def groups(name: str) -> dict[Key, list[Member]]:
    """The root-walk members of each grid-core key."""
    fam = family(name)
    out: dict[Key, list[Member]] = defaultdict(list)
    for members in roots(name):
        for m in members:
            out[fam.engines[m.engine].key(0, m.config.normal, m.allowed)].append(m)
    return out


def uncached_entry(fam: Family, key: Key, m: Member) -> tuple[bytes, bytes, tuple[object, ...]]:
    """The member's uncached walk (``Engine._walk_from``) as an entry: (encoding,
    payload, CD)."""
    engine = fam.engines[m.engine]
    nodes, cd = engine._walk_from(m.root, m.pending, m.allowed)
    entry = make_entry(key, engine.ids(nodes), cd, engine.vocab.n_vocab)
    return entry.encoding, entry.payload, entry.cd


def spread(fam: Family, members: list[Member], k: int) -> list[Member]:
    """Up to ``k`` members, each next one differing most from those taken:
    another schema, then another role, then another remainder or allowed set."""
    taken = [members[0]]
    rest = members[1:]
    while rest and len(taken) < k:

        def novelty(m: Member) -> tuple[int, int, int]:
            schema, role = fam.labels[m.engine]
            return (
                all(fam.labels[t.engine][0] != schema for t in taken),
                all(fam.labels[t.engine][1] != role for t in taken),
                all((t.pending, t.allowed) != (m.pending, m.allowed) for t in taken),
            )

        best = max(rest, key=novelty)
        taken.append(best)
        rest.remove(best)
    return taken


def shared_keys(name: str) -> list[tuple[Key, list[Member]]]:
    """Keys with two or more members, in a fixed order."""
    return [(key, ms) for key, ms in groups(name).items() if len(ms) > 1]


def labels(fam: Family, members: list[Member], which: int) -> set[str]:
    return {fam.labels[m.engine][which] for m in members}


def at_risk(fam: Family, key: Key, members: list[Member]) -> bool:
    """Members a coarse key could confuse: different remainders or allowed sets,
    or, at an identifier position, different lexicons (schemas, grants). (A
    generic key is shared across lexicons by design: one in eight is checked.)"""
    return len({(m.pending, m.allowed) for m in members}) > 1 or (
        isinstance(key, IdentKey)
        and len({fam.engines[m.engine].lexicon.fingerprint for m in members}) > 1
    )


@pytest.mark.parametrize("name", list(VOCABS))
def test_the_corpus_reaches_keys_a_bug_would_confuse(name: str) -> None:
    """Not vacuous: keys shared across roles, generic keys shared across schemas
    (the identifier rule), keys whose members have different remainders or
    allowed sets (the normal form), identifier keys in both lexicon categories."""
    fam, keys = family(name), shared_keys(name)
    categories_of = fam.engines[0].lexicon.categories
    cross_role = [k for k, ms in keys if len(labels(fam, ms, 1)) > 1]
    cross_schema = [k for k, ms in keys if len(labels(fam, ms, 0)) > 1]
    distinct = [k for k, ms in keys if len({(m.pending, m.allowed) for m in ms}) > 1]
    categories = {
        c
        for k in groups(name)
        if isinstance(k, IdentKey)
        for c in range(k.allowed.bit_length())
        if k.allowed >> c & categories_of >> c & 1
    }
    assert len(cross_role) >= 100, len(cross_role)
    assert len(cross_schema) >= 100, len(cross_schema)
    assert all(not isinstance(k, IdentKey) for k in cross_schema)
    assert len(distinct) >= 40, len(distinct)
    assert len(categories) >= 2, categories


@pytest.mark.parametrize("name", list(VOCABS))
def test_members_of_a_grid_core_key_walk_alike(name: str) -> None:
    """grid-core's key (``Engine.key``) on root walks: members of a shared key walk
    alike (uncached, ``Engine._walk_from``: native walks when the kernels are
    loaded, bound to the spec by ``test_differential.py``; else Python's).
    Checked: :data:`PER_KEY` members, the most different, of each key a coarse
    key could confuse, and of one key in eight of the others (a cold walk at an
    identifier position costs tens of milliseconds even natively)."""
    fam = family(name)
    compared = 0
    for i, (key, members) in enumerate(shared_keys(name)):
        if not (at_risk(fam, key, members) or i % 8 == 0):
            continue
        chosen = spread(fam, members, PER_KEY)
        first = uncached_entry(fam, key, chosen[0])
        for m in chosen[1:]:
            assert uncached_entry(fam, key, m) == first, (key, chosen[0], m)
            compared += 1
    assert compared >= 80, compared


@pytest.mark.parametrize("name", list(VOCABS))
def test_members_of_a_native_key_walk_alike(name: str) -> None:
    """The kernels' key, on the root walks of grid-core's shared keys (a cold
    root walk costs tens of milliseconds: the singletons are left out) and CD
    sub-walks below them: each member is looked up in the native cache the
    family shares (``EngineTables.register``: a walk
    only on a miss). A hit serves another member's entry: it must equal this
    member's own uncached native walk. Every entry's id must be ``make_entry``'s
    under grid-core's key (the two keys serialize alike)."""
    fam = family(name)
    if fam.engines[0].kernel is None:
        pytest.skip("grid-kernels is not installed (or GRID_KERNELS=0)")
    hits: list[tuple[Member, ...]] = []
    owner: dict[Key, Member] = {}
    for key, members in shared_keys(name):
        for m in members:
            engine = fam.engines[m.engine]
            assert m.config is not None
            entry = served(fam, key, m, owner, hits)
            for trie_node, t, tail in entry.cd[:: max(1, len(entry.cd) // SUBWALKS)][:SUBWALKS]:
                below = engine.parser.allowed(engine.parser.shift(m.config.node, t))
                sub = Member(m.engine, trie_node, bytes(tail), below)
                served(fam, engine.key(trie_node, sub.pending, below), sub, owner, hits)
    cross_role = [h for h in hits if len(labels(fam, list(h), 1)) > 1]
    cross_schema = [h for h in hits if len(labels(fam, list(h), 0)) > 1]
    assert len(hits) >= 1000 and len(cross_role) >= 200 and len(cross_schema) >= 200, (
        len(hits),
        len(cross_role),
        len(cross_schema),
    )


def served(
    fam: Family, key: Key, m: Member, owner: dict[Key, Member], hits: list[tuple[Member, ...]]
) -> Entry:
    """Look ``m`` up natively and check what is served (see the test above). A hit
    is told by the native cache not growing (an eviction can only make a miss
    look like a hit). A hit is compared with the member's own walk when its
    grid-core key is new (the native key would be coarser), when it could be
    confused with the key's first member (:func:`at_risk`), and one in eight
    otherwise."""
    engine = fam.engines[m.engine]
    kernel = engine.kernel
    before = kernel.cached_walks
    handle = kernel.register(key.namespace, m.root, m.pending, m.allowed, False)
    entry = Entry(handle.kind, handle.encoding, handle.payload, tuple(handle.cd), handle.entry_id)
    assert entry_id(key, entry.encoding, entry.payload, entry.cd) == entry.entry_id
    first = owner.setdefault(key, m)
    if kernel.cached_walks != before:
        return entry
    hits.append((first, m))
    if first is m or at_risk(fam, key, [first, m]) or len(hits) % 8 == 0:
        nodes, cd = kernel.walk(m.root, m.pending, m.allowed, m.root != 0)
        assert np.array_equal(served_ids(entry), walked_ids(fam, nodes)), (key, first, m)
        assert entry.cd == tuple((n, t, bytes(x)) for n, t, x in cd), (key, first, m)
    return entry


def served_ids(entry: Entry) -> np.ndarray[Any, Any]:
    """An entry's CI token ids, ascending (numpy: a dense entry of a 150k vocabulary
    decoded in microseconds)."""
    if entry.encoding == SPARSE:
        return np.frombuffer(entry.payload, dtype="<i4").astype(np.int64)
    raw = np.frombuffer(entry.payload, dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little"))


def walked_ids(fam: Family, nodes: list[int]) -> np.ndarray[Any, Any]:
    """The token ids spelled at trie ``nodes`` (alias classes expanded), ascending:
    ``Engine.ids``, vectorized."""
    offset, ids = fam.alias
    at = np.asarray(nodes, dtype=np.int64)
    starts, lengths = offset[at], offset[at + 1] - offset[at]
    firsts = np.cumsum(lengths) - lengths
    positions = np.repeat(starts - firsts, lengths) + np.arange(int(lengths.sum()))
    return np.sort(ids[positions])
