"""When SQL parse events are emitted, against the specification, on a seeded sample
of statements (the accept corpora of both dialects and Spider's dev gold).

Each statement is fed one byte a token through the engine's guide with the
dialect's events. For every event emitted at step k (before EOS):

- *sound*: it is in lark's post-hoc events of every sentence the oracle reaches
  from the prefix ``w_k``: the shortest completion (``grid_core.complete``) of
  ``w_k`` and of ``w_k`` extended by each viable byte and by a blank and each
  terminal's shortest lexeme;
- *zero late*: its span was not yet written at ``w_{k-1}``, or one sentence the
  oracle reaches from ``w_{k-1}`` lacks it.

The oracle completes each distinct (parser stack, scanner normal form) once:
extensions of one length that reach the same configuration complete alike, to
sentences with the same lexemes and spans, so with the same events.
*Sound* is checked on the shortest completion and two seeded extensions per
event (twelve in the slow run), *zero late* on all of them until a witness.
The completion search is bounded (2000 configurations): an event none of whose
sound extensions completes, or without a witness while some extension of
``w_{k-1}`` did not complete (inside a CTE's body), is counted unchecked, and at
most one in twenty may be. ``test_timing_on_a_sample`` takes 30 statements of
at most 90 bytes without a CTE; ``test_timing_on_a_larger_sample`` (slow:
``nox -s differential``) 300 of any kind and length.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from grid_core.complete import shortest_completion, shortest_suffix
from grid_core.errors import GuideError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary
from grid_spec.spec import Language
from grid_sql.dialects import get_dialect
from grid_sql.events import event_spec

ROOT = Path(__file__).resolve().parents[3]
SPIDER_DEV = ROOT.parent / "shared/data/spider/dev_gold.sql"
if not SPIDER_DEV.exists():
    SPIDER_DEV = ROOT / "data/spider/dev_gold.sql"
EOS = 256
BYTES = Vocabulary.from_spellings("bytes", [bytes([i]) for i in range(256)] + [b""], {EOS}, (EOS,))
Key = tuple[str, str, int, int]


class Oracle:
    """Sentences of one dialect's language that extend a prefix, and their events."""

    def __init__(self, name: str) -> None:
        dialect = get_dialect(name)
        self.engine = Engine(load_grammar(dialect.grammar_text, name), BYTES)
        self.language = Language(dialect.grammar_text)
        self.symbols = dict(dialect.events)
        self.spec = event_spec(dialect, self.engine.grammar)
        n = self.engine.grammar.n_terminals
        lexemes = [shortest_suffix(self.engine, 0, 0, t) for t in range(n)]
        # letters and digits first: a witness that an event was not yet determined
        # most often grows the lexeme just written (maximal munch)
        by_kind = sorted(range(256), key=lambda b: not bytes([b]).isalnum())
        self.extras = [*(bytes([b]) for b in by_kind), *(b" " + x for x in lexemes if x)]
        self._completed: dict[tuple[int, bytes, int], bytes | None] = {}
        self._events: dict[bytes, list[Key] | None] = {}

    def stream(self, text: bytes) -> list[Any]:
        guide: Any = self.engine.guide(audit=False, events=self.spec)
        for b in text:
            guide.accept_token(b)
        guide.accept_token(EOS)
        events: list[Any] = guide.events()
        return events

    def extensions(self, prefix: bytes) -> list[bytes]:
        """``b""``, then each viable byte and each blank-and-lexeme after ``prefix``,
        one per configuration reached (module header)."""
        lexer = self.engine.lexer
        config = lexer.advance(lexer.initial, prefix)
        assert config is not None
        out = []
        reached: set[tuple[int, int, Any]] = set()
        for extra in [b"", *self.extras]:
            after = lexer.advance(config, extra) if extra else config
            if after is None or not lexer.is_viable(after):
                continue
            same = (len(extra), id(after.node), after.normal)
            if same not in reached:
                reached.add(same)
                out.append(extra)
        return out

    def events(self, prefix: bytes, extra: bytes, max_configs: int = 2000) -> list[Key] | None:
        """The post-hoc events of the shortest sentence through ``prefix + extra``
        (None: the search bounded by ``max_configs`` finds none)."""
        lexer = self.engine.lexer
        after = lexer.advance(lexer.initial, prefix + extra)
        assert after is not None
        key = (id(after.node), bytes(after.remainder), max_configs)
        if key not in self._completed:
            self._completed[key] = shortest_completion(self.engine, after, max_configs)
        rest = self._completed[key]
        if rest is None:
            return None
        sentence = prefix + extra + rest
        if sentence not in self._events:
            self._events[sentence] = self.language.events(sentence, self.symbols)
        return self._events[sentence]


@cache
def oracle(name: str) -> Oracle:
    return Oracle(name)


def check_timing(name: str, text: bytes, width: int | None) -> tuple[int, int]:
    """Check every event of ``text`` (module header): (events checked, events left
    unchecked because the bounded search completes no extension of the prefix, or
    finds no witness and gives up on some extension, as inside a CTE's body).
    *Sound* is checked on the shortest completion and
    ``width`` other extensions of the prefix (seeded; None: all); *zero late*
    looks for a witness among all of them."""
    o = oracle(name)
    events = o.stream(text)
    assert [e.key for e in events] == o.language.events(text, o.symbols)
    rng = random.Random(text)
    checked = unchecked = 0
    for event in events:
        if event.step > len(text):  # determined by EOS itself
            continue
        prefix = text[: event.step]
        extensions = o.extensions(prefix)
        if width is not None and len(extensions) > width + 1:
            extensions = [b"", *rng.sample(extensions[1:], width)]
        completed = 0
        for extra in extensions:
            found = o.events(prefix, extra)
            assert found is None or event.key in found, ("early", text, event, extra)
            completed += found is not None
        if event.end <= event.step - 1:
            before = text[: event.step - 1]
            # a witness, or else every extension completes (a search that gives
            # up on one, as inside a CTE's body, leaves the event unchecked)
            missed = witness = False
            for extra in o.extensions(before):
                found = o.events(before, extra)
                missed |= found is None
                if found is not None and event.key not in found:
                    witness = True
                    break
            assert witness or missed, ("late", text, event)
            completed *= witness
        if completed:
            checked += 1
        else:
            unchecked += 1
    return checked, unchecked


def sample(
    n: int, seed: int, longest: int | None = None, ctes: bool = True
) -> list[tuple[str, bytes]]:
    """``n`` statements of at most ``longest`` bytes, seeded: a third from each accept
    corpus and from Spider's dev gold (SQLite), each with its closing ``;``;
    without ``ctes``, none that opens with WITH (the bounded search gives up inside
    a CTE's body, after 2000 configurations each time: minutes a statement)."""
    rng = random.Random(seed)
    pools: list[tuple[str, list[bytes]]] = []
    for name in ("sqlite", "postgres"):
        pools.append((name, [e.text for e in get_dialect(name).corpus() if e.kind == "accept"]))
    lines = SPIDER_DEV.read_text(encoding="utf-8").splitlines()
    spider = [line.split("\t")[0].strip() for line in lines if line.strip()]
    pools.append(("sqlite", [(s if s.endswith(";") else s + ";").encode() for s in spider]))
    out = []
    for i, (name, pool) in enumerate(pools):
        pool = [text for text in pool if longest is None or len(text) <= longest]
        pool = [text for text in pool if ctes or text[:4].upper() != b"WITH"]
        share = n // 3 + (1 if i < n % 3 else 0)
        out += [(name, text) for text in rng.sample(pool, min(share, len(pool)))]
    return out


def run_sample(
    n: int, seed: int, width: int | None, longest: int | None = None, ctes: bool = True
) -> tuple[int, int, int]:
    """(statements checked, events checked, events unchecked). A statement the guide
    refuses (a mask bug, not an event's: see test_events.test_corpus_streams_equal_
    lark_trees) is left out; at most a tenth may be."""
    statements = checked = unchecked = 0
    chosen = sample(n, seed, longest, ctes)
    for name, text in chosen:
        try:
            done, left = check_timing(name, text, width)
        except GuideError:
            continue
        statements += 1
        checked += done
        unchecked += left
    assert statements >= len(chosen) * 0.9
    return statements, checked, unchecked


def test_timing_on_a_sample() -> None:
    statements, checked, unchecked = run_sample(30, seed=19, width=2, longest=90, ctes=False)
    assert statements >= 27 and checked >= 200 and unchecked <= checked // 20


@pytest.mark.slow
def test_timing_on_a_larger_sample() -> None:
    statements, checked, unchecked = run_sample(300, seed=1919, width=12)
    assert statements >= 270 and unchecked <= checked // 20
