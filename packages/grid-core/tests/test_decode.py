"""The GRID-owned decode loop (grid_core.decode): trigger, jump-forward, sampling, audit.

Fixtures: the CRUD analyst engine with the toy vocabulary (``toy.py``), and a
hand-checkable "abc" grammar whose vocabulary spells every lexeme one way
only, so that every mask is a single id and every step is forced::

    start: "a" "b" "c" ";"      vocabulary: 0 b" a"  1 b" b"  2 b" c"  3 b" ;"  4 <eos>
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest
from toy import ANALYST, EOS, LEXICON, TOY, analyst_engine, token

from grid_core.audit import verify
from grid_core.decode import GREEDY, Sampling, decode, generate
from grid_core.errors import GuideError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.replay import replay
from grid_core.reserve import DEFAULT_SAFETY, reserve_table
from grid_core.vocab import Vocabulary
from grid_spec import Language

ENGINE = analyst_engine()
SPEC = Language(ANALYST.to_lark(), LEXICON)

ABC = load_grammar('start: "a" "b" "c" ";"\nWS: / +/\n%ignore WS\n', "abc")
ABC_VOCAB = Vocabulary.from_spellings("abc", [b" a", b" b", b" c", b" ;", b""], {4}, (4,))
ABC_ENGINE = Engine(ABC, ABC_VOCAB)


def never(ids: Sequence[int], rng: random.Random) -> int:
    raise AssertionError("the sampler was consulted at a forced step")


def uniform(ids: Sequence[int], rng: random.Random) -> int:
    return rng.choice(ids)


def kinds(gen: Any) -> list[str]:
    return [r.kind for r in gen.audit.records]


# -- jump-forward and the trigger on the abc grammar ------------------------------------


def test_singleton_masks_are_forced_without_the_sampler() -> None:
    gen = generate(GridGuide(ABC_ENGINE), never, 20, random.Random(0), safety=0)
    assert gen.text == b" a b c ;"
    assert kinds(gen) == ["forced"] * 4 + ["eos"]
    assert (gen.stop_reason, gen.forced, gen.sampled, gen.reserve) == ("eos", 4, 0, 0)


def test_forced_span_is_bounded() -> None:
    calls: list[Sequence[int]] = []

    def spy(ids: Sequence[int], rng: random.Random) -> int:
        calls.append(ids)
        return ids[0]

    gen = generate(GridGuide(ABC_ENGINE), spy, 20, random.Random(0), safety=0, jump_forward=2)
    assert kinds(gen) == ["forced", "forced", "sampled", "forced", "eos"]
    assert calls == [[2]]


def test_trigger_writes_the_completion_and_eos() -> None:
    assert reserve_table(ABC_ENGINE).reserve(GridGuide(ABC_ENGINE).config) == 4
    gen = generate(GridGuide(ABC_ENGINE), never, 5, random.Random(0), safety=0)
    assert kinds(gen) == ["reserve"] * 4 + ["eos"]
    assert (gen.stop_reason, gen.text, len(gen.tokens)) == ("reserve", b" a b c ;", 5)


def test_budget_below_the_shortest_completion_raises() -> None:
    with pytest.raises(GuideError, match="budget of 4"):
        generate(GridGuide(ABC_ENGINE), never, 4, random.Random(0))


def test_terminated_guide_raises() -> None:
    g = GridGuide(ABC_ENGINE)
    for t in (0, 1, 2, 3, 4):
        g.accept_token(t)
    with pytest.raises(GuideError, match="already accepted EOS"):
        generate(g, never, 10, random.Random(0))


# -- the toy CRUD grammar ---------------------------------------------------------------


@pytest.mark.parametrize("budget", [8, 9, 12, 20, 40, 80])
@pytest.mark.parametrize("seed", range(6))
def test_every_stop_is_in_l_within_budget(budget: int, seed: int) -> None:
    gen = generate(GridGuide(ENGINE), uniform, budget, random.Random(seed), safety=3)
    assert gen.stop_reason in ("eos", "reserve")
    assert len(gen.tokens) <= budget
    assert gen.tokens[-1] == EOS
    assert SPEC.in_language(gen.text)
    assert verify(gen.audit.lines()).ok
    assert replay(gen.audit.lines(), ENGINE).ok
    seen = kinds(gen)
    assert seen[-1] == "eos" and "eos" not in seen[:-1]
    if "reserve" in seen:  # the completion is written last, nothing sampled after it
        assert all(k in ("reserve", "eos") for k in seen[seen.index("reserve") :])
    assert gen.sampled + gen.forced + gen.reserve + 1 == len(gen.tokens)


def test_early_trigger_when_a_token_rises_past_the_budget() -> None:
    """At the empty output the reserve is 7; b"s" makes it 11 (b"elect" costs five
    byte tokens). With 9 tokens of budget and no margin the loop does not take
    b"s": it writes the completion from where it is."""
    table = reserve_table(ENGINE)
    start = GridGuide(ENGINE).config
    after = ENGINE.lexer.advance(start, b"s")
    assert after is not None
    assert (table.reserve(start), table.reserve(after)) == (7, 11)
    gen = generate(GridGuide(ENGINE), lambda ids, rng: token(b"s"), 9, random.Random(0), safety=0)
    assert (gen.stop_reason, gen.early_triggers, gen.sampled) == ("reserve", 1, 0)
    assert gen.text == b"select * from employees ;" and len(gen.tokens) == 8


def test_demo_call_shape() -> None:
    """``grid_sql.demo`` calls ``generate(guide, partial(sampler, ...), budget, rng)``."""

    def sampler(ids: Sequence[int], rng: random.Random, prefer: bytes) -> int:
        good = [i for i in ids if TOY.token_bytes[i] == prefer]
        return good[0] if good else rng.choice(ids)

    gen = generate(GridGuide(ENGINE), partial(sampler, prefer=b"select"), 40, random.Random(1))
    assert SPEC.in_language(gen.text) and len(gen.tokens) <= 40
    assert gen.audit.seal is not None
    assert gen.audit.seal["mode"] == {
        "mode": 1,
        "budget": 40,
        "safety": DEFAULT_SAFETY,
        "jump_forward": 32,
    }


def test_sampler_choosing_a_masked_token_raises() -> None:
    with pytest.raises(GuideError, match="masked token"):
        generate(GridGuide(ENGINE), lambda ids, rng: token(b"insert"), 40, random.Random(0))


# -- decode(): logits from a model --------------------------------------------------------


class Row:
    """A stand-in for a numpy array / torch tensor of shape (1, V)."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def tolist(self) -> list[list[float]]:
        return [self.values]


def writer(target: bytes, wrap: bool) -> Any:
    """A model that wants to write ``target`` byte by byte, then EOS."""

    def logits(tokens: Sequence[int]) -> Any:
        done = b"".join(TOY.token_bytes[t] for t in tokens)
        values = [-1.0] * TOY.n_vocab
        if target.startswith(done) and len(done) < len(target):
            values[target[len(done)]] = 5.0
        values[EOS] = 4.0
        return Row(values) if wrap else values

    return logits


@pytest.mark.parametrize("wrap", [False, True], ids=["list", "tolist"])
def test_greedy_decode_follows_the_model_inside_the_mask(wrap: bool) -> None:
    target = b"select * from orders;"
    gen = decode(GridGuide(ENGINE), writer(target, wrap), 60, GREEDY)
    assert gen.text == target and gen.stop_reason == "eos"
    assert gen.sampled + gen.forced == len(target) and gen.forced > 0  # lexicon words force


@pytest.mark.parametrize("make", [GridGuide, Engine.guide], ids=["python", "default"])
def test_finish_writes_the_completion_where_the_model_ends(make: Any) -> None:
    """``finish`` True once the output is ``select * from`` (EOS not legal there): the
    loop writes the reserve's completion and EOS, stop reason ``exit``; the output is a
    sentence of L within the budget and its log replays. Fails if the model is asked
    on after finishing, or the statement stops short of L."""
    guide = make(ENGINE)
    asked: list[bytes] = []

    def finish(values: Any) -> bool:
        asked.append(guide.output())
        return guide.output() == b"select * from"

    gen = decode(guide, writer(b"select * from orders;", False), 60, GREEDY, finish=finish)
    assert gen.stop_reason == "exit" and gen.reserve > 0 and asked[-1] == b"select * from"
    assert gen.text.startswith(b"select * from ") and SPEC.in_language(gen.text)
    assert kinds(gen)[-1] == "eos" and set(kinds(gen)[-gen.reserve - 1 : -1]) == {"reserve"}
    assert replay(gen.audit.lines(), ENGINE).ok and verify(gen.audit.lines()).ok


def test_masked_logits_are_minus_infinity() -> None:
    """The model prefers b"insert" (projected out): greedy never takes it."""

    def logits(tokens: Sequence[int]) -> list[float]:
        values = [0.0] * TOY.n_vocab
        values[token(b"insert")] = 100.0
        return values

    gen = decode(GridGuide(ENGINE), logits, 30, GREEDY)
    assert token(b"insert") not in gen.tokens
    assert SPEC.in_language(gen.text)


def test_short_logits_raise() -> None:
    with pytest.raises(GuideError, match="logits of length"):
        decode(GridGuide(ENGINE), lambda tokens: [0.0] * 10, 30)


@pytest.mark.parametrize(
    "sampling",
    [Sampling(top_k=1), Sampling(top_p=1e-9), Sampling(temperature=1e-6)],
    ids=["top-k-1", "tiny-top-p", "cold"],
)
def test_sampling_degenerates_to_greedy(sampling: Sampling) -> None:
    ids, rng = [3, 5, 9, 11], random.Random(0)
    assert GREEDY.choose(ids, [0.5, 2.0, 2.0, -1.0], rng) == 5  # ties: the lowest id
    assert all(sampling.choose(ids, [0.5, 2.0, 1.9, -1.0], rng) == 5 for _ in range(20))


def test_sampling_stays_on_finite_logits_and_falls_back_to_uniform() -> None:
    rng = random.Random(0)
    ids = [1, 2, 3]
    picks = {Sampling(top_k=2).choose(ids, [1.0, math.nan, 0.5], rng) for _ in range(200)}
    assert picks == {1, 3}
    inf = -math.inf
    assert {Sampling().choose(ids, [inf, inf, inf], rng) for _ in range(200)} == {1, 2, 3}
    top_p = {Sampling(top_p=0.5).choose(ids, [3.0, 0.0, 0.0], rng) for _ in range(200)}
    assert top_p == {1}


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(-1.0, 0, 1.0), (1.0, -1, 1.0), (1.0, 0, 0.0), (1.0, 0, 1.5)],
)
def test_invalid_sampling_parameters(temperature: float, top_k: int, top_p: float) -> None:
    with pytest.raises(ValueError):
        Sampling(temperature, top_k, top_p)


def test_temperature_sampling_decodes_into_l() -> None:
    rng = random.Random(3)

    def logits(tokens: Sequence[int]) -> list[float]:
        return [rng.gauss(0.0, 2.0) for _ in range(TOY.n_vocab)]

    for seed in range(5):
        gen = decode(GridGuide(ENGINE), logits, 30, Sampling(0.8, 50, 0.95), random.Random(seed))
        assert SPEC.in_language(gen.text) and len(gen.tokens) <= 30


def test_mode_1_decodes_from_a_fresh_guide() -> None:
    """A guide that holds steps would seal records the budget does not count: its
    log would fail its own replay (found by a review)."""
    for guide in (GridGuide(ENGINE), ENGINE.guide()):
        guide.accept_token(token(b"select"))
        with pytest.raises(GuideError, match="mode 1 decodes from a fresh guide"):
            generate(guide, lambda ids, rng: ids[0], 30, random.Random(0))


@pytest.mark.parametrize("pick", [None, "first"])
def test_logits_narrower_than_the_vocabulary_are_refused_at_once(pick: str | None) -> None:
    """A greedy pick over a row narrower than the vocabulary never scores the ids past
    it (EOS among them): refused at the first sampled step, with or without a pick."""

    def first(values: Any, row: Any) -> int | None:
        return None

    narrow = [0.0] * (TOY.n_vocab - 1)
    with pytest.raises(GuideError, match=f"logits of length {TOY.n_vocab - 1} for"):
        decode(ENGINE.guide(), lambda tokens: narrow, 30, pick=first if pick else None)
    wide = [0.0] * (TOY.n_vocab + 7)  # models pad their embedding rows: wider is fine
    assert decode(ENGINE.guide(), lambda tokens: [wide], 30).stop_reason in ("eos", "reserve")
