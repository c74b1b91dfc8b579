"""``grid ask --events`` in the covering language: an :class:`EventGuide` around the
covering guide, its tracker the covering grammar's over every scope's words
(``ScopedEngines.tracking_engine``). The tracker must follow every statement the covering
guide admits (a scope's lexer and the base's must cut the same lexemes) and stream,
token by token, the events a post-hoc parse of the statement gives. Random walks
over the covering guide (native when grid-kernels is installed) on the example
database and on Spider's vendored concert_singer, model-free."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from grid_core.decode import generate
from grid_core.events import EventGuide, tracker
from grid_core.vocab import smollm2
from grid_serve import text2sql
from grid_sql.dialects import get_dialect
from grid_sql.events import event_spec
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.policy_init import starter_policy
from grid_sql.schema import SchemaSnapshot

CONCERT = Path(__file__).resolve().parents[3] / "data/spider/database/concert_singer"


@pytest.fixture(scope="module")
def coverings(company_db: Path) -> list[tuple[str, Any]]:
    """(name, the covering engines) of analyst on the example database and of the
    starter role on concert_singer."""
    vocab = smollm2()
    company = SchemaSnapshot.from_sqlite(company_db)
    out = [("company", text2sql.RoleEngines(company, example_policy(company), vocab))]
    concert = SchemaSnapshot.from_sqlite(CONCERT / "concert_singer.sqlite")
    policy = PolicyBundle.loads(starter_policy(concert, "reader"), schema=concert)
    out.append(("concert_singer", text2sql.RoleEngines(concert, policy, vocab)))
    roles = {"company": "analyst", "concert_singer": "reader"}
    return [(name, engines.scoped(roles[name], covering=True)) for name, engines in out]


def random_walk(
    guide: EventGuide, eos: set[int], streamed: list[list[Any]]
) -> Callable[[Sequence[int], random.Random], int]:
    """A random admitted token, EOS with odds 1 in 4 once admitted and 12 tokens in;
    each call first keeps the events streamed so far in ``streamed``."""

    def sample(ids: Sequence[int], r: random.Random) -> int:
        streamed.append([e.key for e in guide.events()])
        done = [t for t in ids if t in eos]
        words = [t for t in ids if t not in eos]
        if done and (not words or (guide.steps >= 12 and r.random() < 0.25)):
            return done[0]
        return r.choice(words)

    return sample


@pytest.mark.parametrize("seed", range(6))
def test_covering_events_stream_the_statements_parse(
    coverings: list[tuple[str, Any]], seed: int
) -> None:
    """Each walk: a mode-1 decode of random admitted tokens (EOS taken with odds 1
    in 4 once admitted and 12 tokens in) whose budget, 24 to 48 tokens, makes the
    reserve finish the statement: it ends at EOS, a sentence of the covering
    language. At every sampled step the events streamed so far are a prefix of the
    final parse's, and at EOS they are exactly the post-hoc parse of the statement
    written. Fails if the tracker refuses a token the covering guide admitted."""
    rng = random.Random(seed)
    for name, covering in coverings:
        base = covering.tracking_engine()
        spec = event_spec(get_dialect("sqlite"), base.grammar)
        events = tracker(base, spec)
        eos = set(base.vocab.eos_ids)
        for _ in range(5):
            guide = EventGuide(covering.guide(), events)
            streamed: list[list[Any]] = []
            sample = random_walk(guide, eos, streamed)
            gen = generate(guide, sample, rng.randrange(24, 49), rng)
            assert gen.stop_reason in ("eos", "reserve"), (name, gen.stop_reason)
            assert guide.is_terminated(), (name, gen.stop_reason)
            text = guide.inner.output()
            final = [e.key for e in events.parse(text)]
            assert [e.key for e in guide.events()] == final, (name, text)
            assert final and final[-1][0] == "statement", (name, text, final)
            for i, seen in enumerate(streamed):
                assert seen == final[: len(seen)], (name, text, i)
            assert len(streamed) > 1, (name, text)
