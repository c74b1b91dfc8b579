"""The operational Prefix(L) against the semantic one, on both SQL dialects.

The engine decides viability operationally (DESIGN.md section 3): the
incremental scan-and-shift of the output succeeds (``Lexer.advance``) and the
trailing remainder is live under the stack's allowed set (``Lexer.is_viable``).
The Coq theorems read Prefix(L) semantically: some extension is in L. Nothing
proves the two equal; proofs/Prefix.v shows, for a model of the maximal-munch
lexer, that a semantic prefix the engine rejects ends in a *dead-but-emittable*
remainder (dead under the allowed set, its longest accepted prefix still
picked), and that the other inclusion is exactly "every operationally viable
configuration has a completion". proofs/README.md ("The Prefix(L) gap")
states what would have to hold. This module checks both
directions on the free-mode sqlite and postgres dialects:

1. **semantic => operational** on sentences: every prefix of every gold
   statement (the dialect corpus's accept lines; for sqlite also the 1,034
   Spider dev gold queries, when the data is present) and of every generated statement is
   operationally viable, byte by byte, and the whole statement passes the EOS
   gate;
2. **operational => semantic** on a frontier: at two random cut points of
   each of those statements, every one-byte extension that is operationally
   viable (one byte per DFA byte class: bytes of a class move the automaton
   alike; about 10,000 prefixes per dialect) is extended to a sentence by the
   reserve table's written completion: the EOS gate accepts it, and for a
   fixed sample grid-spec (an implementation independent of the lexer, tables
   and walk) says it is in L.

Generated statements are random walks over operationally viable bytes (one
byte class at a time) closed by the written completion, and checked by
grid-spec too.

Known gap (pinned in ``KNOWN_GAPS``; the test fails if one disappears or a
new one appears). Postgres's ``TYPED_STRING`` (``date '2024-01-31'``) is ONE
terminal: a type word, whitespace, a string. After ``SELECT a.date `` the
remainder ``date `` is live only for ``TYPED_STRING``, which the stack does not
allow, so the prefix is not operationally viable (grid-spec agrees: it
executes the same definition); yet ``SELECT a.date FROM attendance a ...`` is
in L: the ``F`` kills the automaton and ``date`` is emitted as a column. The
mask therefore blocks the byte " " there (a byte-level tokenization of that
sentence cannot be decoded), while a token that spans the dead stretch
(`` FROM``) is admitted: the walk enters a subtree whose last accepted lexeme
still has a viable pick. proofs/README.md ("The Prefix(L) gap") states it.

The reserve table refuses a free-mode dialect: ``CTE_NAME`` and ``DQ_STRING``
have no lexeme picked as themselves in every parser row that can shift them
(``ReserveError``). ``_FreeTable`` gives each such terminal its shortest
lexeme. That can only make a completion fail (a wrong pick shows up as a
failed EOS gate or a grid-spec rejection), never make a non-extendable prefix
pass, so it cannot hide a gap.
"""

from __future__ import annotations

import os
import random
from functools import cache
from pathlib import Path

import pytest

from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.lexer import Config
from grid_core.reserve import ReserveError, ReserveTable
from grid_core.vocab import Vocabulary
from grid_spec import Language
from grid_sql.dialects import get_dialect

DIALECTS = ("sqlite", "postgres")
SPIDER = Path(
    os.environ.get("GRID_SPIDER_DIR", Path(__file__).resolve().parents[4] / "shared/data/spider")
)
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {256}, (256,))
CUTS = 2  # frontier cut points per statement (about 10,000 frontier prefixes per dialect)
SPEC_JUDGED = 48  # frontier completions per dialect that grid-spec judges too
GENERATED = 6  # random statements per dialect

# The first prefix that is not operationally viable, of each gold statement that has
# one: all four are a type word of TYPED_STRING followed by whitespace (module header).
KNOWN_GAPS: dict[str, set[bytes]] = {
    "sqlite": set(),
    "postgres": {
        b"SELECT a.date ",
        b"SELECT '1 day'::interval ",
        b"SELECT e.id, coalesce(sum(a.hours), 0) AS hours FROM employees e LEFT JOIN "
        b"attendance a ON a.employee_id = e.id AND a.date ",
        b"SELECT * FROM employees WHERE hire_date BETWEEN $1::date ",
    },
}

# Remainders the free-mode reserve table has no finish option for although the
# prefix is viable (ReserveError), by how the prefix ends. PostgreSQL: a cast's
# type written in mixed case, `now()::daT` (the remainder is live for the
# TYPED_STRING family above; found 2026-12-07 when a grammar change moved this
# test's random cuts; the same error on the grammar before it; open).
KNOWN_RESERVE_GAPS: dict[str, set[bytes]] = {"sqlite": set(), "postgres": set()}


class _FreeTable(ReserveTable):
    """The reserve table, with a fallback piece for terminals it finds no piece for."""

    def _choose_pieces(self, singles: dict[int, bytes]) -> dict[int, bytes]:
        found = super()._choose_pieces(singles)
        ignored = self.engine.scanner.ignored
        for t, rows in enumerate(self.compat):
            if rows and t not in found and not ignored >> t & 1:
                lexemes = self._short_lexemes(t)
                if lexemes:
                    found[t] = b" " + lexemes[0]
        return found


@cache
def compiled(name: str) -> tuple[Engine, _FreeTable, Language, list[int]]:
    """Engine (byte vocabulary), completion table, grid-spec and one byte per DFA class."""
    grammar = load_grammar(get_dialect(name).grammar_text, name)
    engine = Engine(grammar, BYTES, cache=False)
    classes: dict[tuple[int, ...], int] = {}
    for b in range(256):
        classes.setdefault(tuple(engine.dfa.trans[b::256]), b)
    return engine, _FreeTable(engine), Language(grammar.to_lark()), sorted(classes.values())


def written(table: _FreeTable, config: Config) -> bytes:
    return b"".join(BYTES.token_bytes[t] for t in table.completion(config))


def viable_steps(engine: Engine, reps: list[int], config: Config) -> list[tuple[int, Config]]:
    """(byte, configuration) for each class representative that keeps the prefix viable."""
    lexer, out = engine.lexer, []
    for b in reps:
        nxt = lexer.advance(config, bytes([b]))
        if nxt is not None and lexer.is_viable(nxt):
            out.append((b, nxt))
    return out


def non_viable_prefixes(engine: Engine, text: bytes) -> list[bytes]:
    """The prefixes of ``text`` that are not operationally viable (the first one ends it)."""
    lexer = engine.lexer
    config = lexer.initial
    for i in range(len(text)):
        nxt = lexer.advance(config, text[i : i + 1])
        if nxt is None or not lexer.is_viable(nxt):
            return [text[: i + 1]]
        config = nxt
    return [] if lexer.eos_allowed(config) else [text + b" <no EOS>"]


@cache
def generated(name: str) -> tuple[bytes, ...]:
    """Random statements: a walk over viable byte classes, closed by the written completion."""
    engine, table, spec, reps = compiled(name)
    rng = random.Random(name)
    out = []
    for _ in range(GENERATED):
        config, text = engine.lexer.initial, b""
        for _ in range(rng.randint(4, 40)):
            steps = viable_steps(engine, reps, config)
            if not steps:
                break
            b, config = rng.choice(steps)
            text += bytes([b])
        sentence = text + written(table, config)
        assert spec.in_language(sentence), sentence
        out.append(sentence)
    return tuple(out)


def gold(name: str) -> list[bytes]:
    accepts = [e.text for e in get_dialect(name).corpus() if e.kind == "accept"]
    return [t if isinstance(t, bytes) else t.encode() for t in accepts]


@pytest.mark.parametrize("name", DIALECTS)
def test_every_prefix_of_gold_and_generated_statements_is_viable(name: str) -> None:
    engine, _, spec, _ = compiled(name)
    statements = gold(name) + list(generated(name))
    assert statements
    bad = {p for s in statements for p in non_viable_prefixes(engine, s)}
    assert bad == KNOWN_GAPS[name]
    # Each known gap is a real one: grid-spec agrees the prefix is not viable
    # (same operational definition) while the statement it cuts is in L.
    # Each is dead but emittable, the only kind proofs/Prefix.v allows
    # (prefix_gap_dead_emittable): a remainder that is not live while its
    # longest accepted prefix has a pick under the stack's allowed set.
    lexer, scanner = engine.lexer, engine.scanner
    for p in bad:
        assert not spec.is_viable_prefix(p)
        assert any(s.startswith(p) and spec.in_language(s) for s in statements)
        config = lexer.advance(lexer.initial, p)
        assert config is not None and config.size and not lexer.is_viable(config)
        _, _, la_len, la_cands = config.scan
        assert la_len and scanner.pick(la_cands, engine.parser.allowed(config.node)) >= 0


def test_every_prefix_of_spider_dev_gold_is_viable() -> None:
    path = SPIDER / "dev_gold.sql"
    if not path.exists():  # a user's clone: the copy vendored with its licence (data/README.md)
        path = Path(__file__).resolve().parents[3] / "data" / "spider" / "dev_gold.sql"
    engine = compiled("sqlite")[0]
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        query = line.rpartition("\t")[0].strip()
        if query:
            queries.append((query if query.endswith(";") else query + ";").encode())
    assert len(queries) == 1034
    bad = [p for q in queries for p in non_viable_prefixes(engine, q)]
    assert bad == []


@pytest.mark.parametrize("name", DIALECTS)
def test_no_viable_prefix_fails_to_extend(name: str) -> None:
    engine, table, spec, reps = compiled(name)
    lexer = engine.lexer
    rng = random.Random(len(name))
    statements = gold(name) + list(generated(name))
    cuts = [s[: rng.randint(0, len(s))] for s in statements for _ in range(CUTS)]
    stuck: list[bytes] = []
    completed: list[bytes] = []
    for w in cuts:
        config = lexer.advance(lexer.initial, w)
        if config is None or not lexer.is_viable(config):
            assert any(w.startswith(p) for p in KNOWN_GAPS[name]), w
            continue
        for b, nxt in viable_steps(engine, reps, config):
            try:
                tail = written(table, nxt)
            except ReserveError:
                assert any((w + bytes([b])).endswith(g) for g in KNOWN_RESERVE_GAPS[name]), w
                continue
            end = lexer.advance(nxt, tail)
            if end is None or not lexer.eos_allowed(end):
                stuck.append(w + bytes([b]))
            else:
                completed.append(w + bytes([b]) + tail)
    assert stuck == []
    assert len(completed) >= 20 * len(cuts)
    judged = rng.sample(completed, SPEC_JUDGED)
    assert [s for s in judged if not spec.in_language(s)] == []
