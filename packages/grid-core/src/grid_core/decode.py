"""The GRID-owned decode loop (mode 1): masked sampling, jump-forward, the reserve trigger.

Reference: DESIGN.md section 7 (termination, mode 1), section 8 (the hot path,
whose order each step follows) and section 9 (every step audited);
``proofs/Reserve.v`` (theorem 4) for the trigger.

Vocabulary:

- **budget**: the most token ids a generation may hold, its EOS included;
  ``left = budget - emitted - 1`` tokens may still come before EOS.
- **reserve** R(c): tokens of the completion the guide would write from
  configuration c (:mod:`grid_core.reserve`).
- **trigger**: at a step where ``left <= R(c) + safety`` the loop stops
  sampling and writes that completion and EOS (audit kind ``reserve``, then
  ``eos``); it never stops with a bare EOS away from ACCEPT.
- **forced span** (jump-forward): a mask of exactly one id is taken without
  consulting the model or the sampler (kind ``forced``), for at most
  ``jump_forward`` tokens in a row; the next step samples as usual.

Invariant, checked at every step: ``R(c) <= left``. It holds at the start (or
:class:`~grid_core.errors.GuideError` is raised: no sentence fits the budget),
and a token is only taken when ``R(next) <= left - 1``. With a safety margin at
least the largest one-token rise of the reserve, the trigger alone keeps it
(theorem 4: ``termination_with_reserve``); should a token rise further, the
loop does not take it but writes the completion from the current
configuration (an *early trigger*, counted in :class:`Generation`). So every
stop is EOS at a sentence of L within the budget, for any sampler: no
rollback, no search.

The loop drives any :class:`~grid_core.protocol.Guide` (the native session by
default, ``Engine.guide()``): it reads the mask as ids, accepts each token
with its kind, and the guide keeps the audit records; the loop seals them. The
reserve is read from a :class:`ReserveSource`, a configuration the loop
advances beside the guide (one lexer step per token, the reserve memoized per
stack node): a guide provides its own through a ``reserve_source()`` method
(the native guide's is in Rust, :class:`grid_core.kernels.NativeReserve`, a
few microseconds per token; grid-sql's column-scoped guide, whose lexicon
changes with the tables in scope, has its own), else the loop keeps a Python
configuration (:class:`EngineReserve`, the reference the native source is
tested against); the loop's invariant and its proof hold for any
source whose completion is written token by token through the guide's mask and
is exactly ``reserve`` tokens long.

The model is a callable from the token ids so far to next-step logits: any
sequence of floats, or anything with ``tolist()`` (a numpy array or a torch
tensor, 1-D or of shape (1, V)); grid-core imports neither. Sampling applies
the mask first (every id outside it is -inf), then temperature, top-k and
top-p over the admitted ids.
"""

from __future__ import annotations

import array
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from grid_core.audit import AuditLog, Kind
from grid_core.errors import GuideError, MaskError
from grid_core.guide import GridGuide
from grid_core.lexer import Config
from grid_core.protocol import Guide
from grid_core.reserve import DEFAULT_SAFETY, reserve_table

__all__ = [
    "DEFAULT_JUMP_FORWARD",
    "FINISH",
    "GREEDY",
    "EngineReserve",
    "Generation",
    "IdSampler",
    "LogitsFn",
    "Picker",
    "ReserveSource",
    "Sampling",
    "StepMask",
    "decode",
    "generate",
    "reserve_source",
]

#: The longest forced span taken in one go.
DEFAULT_JUMP_FORWARD = 32

#: What a chooser returns for "the model's answer ends here": the loop writes the
#: reserve's completion and EOS now (stop reason ``exit``), a sentence of L as always.
FINISH = -1

IdSampler = Callable[[Sequence[int], random.Random], int]
"""``sampler(mask_ids, rng) -> token``: picks one of the admitted ids (EOS included when legal)."""

LogitsFn = Callable[[Sequence[int]], Any]
"""``logits(token_ids_so_far) -> logits`` for the next step (a sequence, array or tensor)."""

Picker = Callable[[Any, "array.array[int]"], int | None]
"""``pick(logits, row) -> token | None``: a token chosen from ``logits`` under the packed
mask ``row``, or None to leave the choice to the sampling parameters."""


@dataclass(frozen=True)
class Generation:
    """The outcome of a decode: output, token ids (EOS last), stop reason, sealed audit log.

    ``stop_reason`` is ``eos`` (EOS was sampled or forced), ``reserve`` (the
    budget's trigger: the guide wrote the completion and EOS) or ``exit`` (the
    model signalled the end of its answer before EOS was legal, and the guide wrote
    the completion and EOS). ``sampled``, ``forced`` and
    ``reserve`` count the steps of each kind (EOS not included);
    ``early_triggers`` is 1 when the completion was written because a sampled
    token would have raised the reserve past the budget; ``max_rise`` is the
    largest one-token rise of the reserve over the tokens taken freely.
    """

    text: bytes
    tokens: tuple[int, ...]
    stop_reason: str
    audit: AuditLog
    sampled: int = 0
    forced: int = 0
    reserve: int = 0
    early_triggers: int = 0
    max_rise: int = 0


@dataclass(frozen=True)
class Sampling:
    """Sampling over masked logits: ``temperature`` 0 is greedy (ties: lowest id);
    ``top_k`` 0 and ``top_p`` 1 are off. Non-finite logits count as -inf; if every
    admitted id is -inf the choice is uniform over the mask."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and self.top_k >= 0 and 0 < self.top_p <= 1):
            raise ValueError(f"invalid sampling parameters {self}")

    def choose(self, ids: Sequence[int], logits: Sequence[float], rng: random.Random) -> int:
        """One of ``ids``, drawn from their logits (``logits[i]`` belongs to ``ids[i]``)."""
        pairs = [(v, i) for v, i in zip(logits, ids, strict=True) if math.isfinite(v)]
        if not pairs:
            return ids[rng.randrange(len(ids))]
        if self.temperature == 0:
            return max(pairs, key=lambda p: (p[0], -p[1]))[1]
        pairs.sort(key=lambda p: (-p[0], p[1]))
        if self.top_k:
            pairs = pairs[: self.top_k]
        top = pairs[0][0]
        weights = [math.exp((v - top) / self.temperature) for v, _ in pairs]
        if self.top_p < 1:
            total, acc, keep = sum(weights), 0.0, 0
            while keep < len(weights) and acc < self.top_p * total:
                acc += weights[keep]
                keep += 1
            pairs, weights = pairs[:keep], weights[:keep]
        draw = rng.random() * sum(weights)
        for (_, i), w in zip(pairs, weights, strict=True):
            draw -= w
            if draw < 0:
                return i
        return pairs[-1][1]


GREEDY = Sampling(temperature=0.0)


def _width(logits: Any) -> int:
    """How many ids a row of logits scores: the last dimension of an array or
    tensor (1-D or of shape (1, V)), else the length of the sequence (or of its
    ``tolist()``)."""
    shape = getattr(logits, "shape", None)
    if shape is not None:
        return int(shape[-1])
    tolist = getattr(logits, "tolist", None)
    values = tolist() if callable(tolist) else logits
    if len(values) == 1 and isinstance(values[0], list | tuple):
        return len(values[0])
    return len(values)


def _gather(logits: Any, ids: Sequence[int], step: int) -> list[float]:
    """The logits of ``ids`` from a sequence, a numpy array or a torch tensor."""
    tolist = getattr(logits, "tolist", None)
    values = tolist() if callable(tolist) else logits
    if len(values) == 1 and isinstance(values[0], list | tuple):
        values = values[0]  # shape (1, V)
    if ids and len(values) <= ids[-1]:
        raise GuideError(step, None, f"logits of length {len(values)} miss token id {ids[-1]}")
    return [float(values[i]) for i in ids]


class StepMask:
    """One step's mask as the packed row the guide filled: its size, membership in
    O(1), and the ids only when a sampler asks for them (a mask can hold most of
    the vocabulary; building its id list is the costly part of a step)."""

    __slots__ = ("_guide", "_ids", "count", "row")

    def __init__(self, row: array.array[int], count: int, guide: Guide) -> None:
        self.row = row
        """The packed int32 row (bit ``i % 32`` of word ``i // 32`` is token ``i``)."""
        self.count = count
        """How many ids the mask admits (EOS ids included when EOS is legal)."""
        self._guide = guide
        self._ids: list[int] | None = None

    def admits(self, token: int) -> bool:
        return 0 <= token < 32 * len(self.row) and bool(self.row[token >> 5] >> (token & 31) & 1)

    def ids(self) -> list[int]:
        """The admitted ids, ascending (built once)."""
        if self._ids is None:
            self._ids = self._guide.mask_ids()
        return self._ids

    def only(self) -> int:
        """The one id of a singleton mask."""
        assert self.count == 1
        return int.from_bytes(self.row.tobytes(), sys.byteorder).bit_length() - 1


def configuration(guide: Guide) -> Config:
    """The Python configuration at a guide's current point: its own for a
    :class:`GridGuide`, else the lexer's over the guide's output (a configuration
    is a function of the bytes read, whatever their tokenization)."""
    if isinstance(guide, GridGuide):
        return guide.config
    lexer = guide.engine.lexer
    config = lexer.advance(lexer.initial, guide.output())
    assert config is not None, "a guide's output is a viable prefix"
    return config


class ReserveSource(Protocol):
    """Where the loop reads the reserve: a state beside the guide's, advanced token by
    token, with the reserve R of each state and the completion it counts.

    Obligations (what theorem 4 needs of the source): ``reserve(s) == 0`` iff EOS is
    legal at ``s``; ``completion(s)`` is exactly ``reserve(s)`` tokens, each admitted
    by the guide's mask in turn, ending where EOS is legal.
    """

    def start(self) -> object:
        """The state at the guide's current point."""
        ...

    def advance(self, state: object, token: int) -> object:
        """The state after ``token`` (one the guide's mask admits at ``state``)."""
        ...

    def reserve(self, state: object) -> int: ...

    def completion(self, state: object) -> list[int]: ...


class EngineReserve:
    """The reserve of a guide whose language is its engine's: a Python configuration
    of ``guide.engine`` and the engine's :class:`~grid_core.reserve.ReserveTable`."""

    def __init__(self, guide: Guide) -> None:
        self.guide = guide
        self.lexer = guide.engine.lexer
        self.table = reserve_table(guide.engine)
        self.spelling = guide.engine.vocab.token_bytes

    def start(self) -> Config:
        return configuration(self.guide)

    def advance(self, state: object, token: int) -> Config:
        assert isinstance(state, Config)
        after = self.lexer.advance(state, self.spelling[token])
        assert after is not None, "a token of the mask leaves the language"
        return after

    def reserve(self, state: object) -> int:
        assert isinstance(state, Config)
        return self.table.reserve(state)

    def completion(self, state: object) -> list[int]:
        assert isinstance(state, Config)
        return self.table.completion(state)


def reserve_source(guide: Guide) -> ReserveSource:
    """The guide's own source (``guide.reserve_source()``) when it has one, else
    :class:`EngineReserve`."""
    own = getattr(guide, "reserve_source", None)
    return own() if callable(own) else EngineReserve(guide)


class _Loop:
    """One mode-1 decode: the guide, the reserve state beside it, and the counts."""

    def __init__(self, guide: Guide, budget: int, safety: int, jump_forward: int) -> None:
        if guide.is_terminated():
            raise GuideError(guide.steps, None, "the guide has already accepted EOS")
        if safety < 0 or jump_forward < 0:
            raise ValueError("safety and jump_forward must be non-negative")
        if not guide.audited:
            raise GuideError(guide.steps, None, "mode 1 audits every step: the guide must audit")
        if guide.steps:  # the sealed log holds every record, the budget counts them
            raise GuideError(guide.steps, None, "mode 1 decodes from a fresh guide")
        self.guide, self.budget = guide, budget
        self.safety, self.jump_forward = safety, jump_forward
        engine = guide.engine
        self.engine, self.vocab, self.source = engine, engine.vocab, reserve_source(guide)
        self.eos = frozenset(self.vocab.eos_ids)
        self.tokens: list[int] = []
        self.counts = {"sampled": 0, "forced": 0, "reserve": 0, "early": 0, "rise": 0}
        self.state = self.source.start()
        self.reserve = self.source.reserve(self.state)
        if self.reserve + 1 > budget:
            raise GuideError(
                guide.steps,
                None,
                f"a budget of {budget} tokens cannot hold the shortest completion "
                f"({self.reserve} tokens and EOS)",
            )

    def take(self, token: int, kind: Kind, after: object | None) -> None:
        """Accept ``token`` (the guide records the step) and move the reserve state."""
        self.guide.accept_token(token, kind)
        self.tokens.append(token)
        if token in self.eos:
            return
        self.counts[kind] += 1
        self.state = self.source.advance(self.state, token) if after is None else after

    def write_completion(self) -> str:
        """Write the reserve's completion and EOS."""
        guide = self.guide
        for token in [*self.source.completion(self.state), self.vocab.eos_ids[0]]:
            try:
                self.take(token, "reserve", None)
            except GuideError:
                raise MaskError(
                    guide.steps, f"the reserve completion's token {token} is masked"
                ) from None
        assert len(self.tokens) <= self.budget
        return "reserve"

    def run(self, choose: Callable[[StepMask], int]) -> Generation:
        """Decode to the end. ``choose`` picks each free step's token from the mask, or
        returns :data:`FINISH`: the model signals the end of its answer where EOS is not
        yet legal, and the reserve's completion is written now (stop reason ``exit``)."""
        guide, source, spelling = self.guide, self.source, self.vocab.token_bytes
        row = array.array("i", bytes(4 * self.engine.n_words))
        span = 0
        while True:
            left = self.budget - len(self.tokens) - 1
            assert self.reserve <= left, "reserve invariant"
            if left <= self.reserve + self.safety:
                stop = self.write_completion()
                break
            guide.fill_next_token_bitmask(row)
            mask = StepMask(row, self.vocab.n_vocab - guide.step_audit()[2], guide)
            kind: Kind
            if mask.count == 1 and span < self.jump_forward:
                token, kind, span = mask.only(), "forced", span + 1
            else:
                token, kind, span = choose(mask), "sampled", 0
                if token == FINISH:
                    self.write_completion()
                    stop = "exit"
                    break
                if not mask.admits(token):
                    raise GuideError(guide.steps, token, "the sampler chose a masked token")
            if token in self.eos:
                self.take(token, kind, None)
                stop = "eos"
                break
            nxt = source.advance(self.state, token)
            after = source.reserve(nxt)
            if after > left - 1:
                self.counts["early"] += 1
                stop = self.write_completion()
                break
            self.take(token, kind, nxt)
            self.counts["rise"] = max(self.counts["rise"], after - self.reserve)
            self.reserve = after
        audit = guide.seal(
            stop,
            {
                "mode": 1,
                "budget": self.budget,
                "safety": self.safety,
                "jump_forward": self.jump_forward,
            },
        )
        text = b"".join(spelling[t] for t in self.tokens if t not in self.eos)
        c = self.counts
        return Generation(
            text,
            tuple(self.tokens),
            stop,
            audit,
            c["sampled"],
            c["forced"],
            c["reserve"],
            c["early"],
            c["rise"],
        )


def decode(
    guide: Guide,
    logits: LogitsFn,
    budget: int,
    sampling: Sampling = GREEDY,
    rng: random.Random | None = None,
    *,
    safety: int = DEFAULT_SAFETY,
    jump_forward: int = DEFAULT_JUMP_FORWARD,
    pick: Picker | None = None,
    finish: Callable[[Any], bool] | None = None,
) -> Generation:
    """Mode 1 with a model: ``logits(tokens so far)`` gives each sampled step's logits.

    Forced and reserve steps do not call the model. ``rng`` defaults to
    ``random.Random(0)``. ``pick(logits, row)``, when given, chooses first: a token
    from the logits under the step's packed mask row (a framework's own masked
    argmax, say: grid-serve's greedy one), which must be one the row admits, or
    None to leave the step to ``sampling``. ``finish(logits)``, when given, is asked
    first at each sampled step: True means the model's answer ends here, and the
    reserve's completion and EOS are written (stop reason ``exit``; grid-serve's
    exit-intent stop where EOS is not yet legal).
    """
    loop = _Loop(guide, budget, safety, jump_forward)
    draw = rng or random.Random(0)
    n_vocab = guide.engine.vocab.n_vocab

    def choose(mask: StepMask) -> int:
        values = logits(tuple(loop.tokens))
        width = _width(values)
        if width < n_vocab:  # a greedy pick would never score the ids past it (EOS too)
            raise GuideError(guide.steps, None, f"logits of length {width} for {n_vocab} ids")
        if finish is not None and finish(values):
            return FINISH
        if pick is not None:
            token = pick(values, mask.row)
            if token is not None:
                return token
        ids = mask.ids()
        return sampling.choose(ids, _gather(values, ids, guide.steps), draw)

    return loop.run(choose)


def generate(
    guide: Guide,
    sampler: IdSampler,
    budget: int,
    rng: random.Random,
    *,
    safety: int = DEFAULT_SAFETY,
    jump_forward: int = DEFAULT_JUMP_FORWARD,
) -> Generation:
    """Mode 1 with a sampler over mask ids, ``sampler(ids, rng) -> token`` (no model)."""
    loop = _Loop(guide, budget, safety, jump_forward)
    return loop.run(lambda mask: sampler(mask.ids(), rng))
