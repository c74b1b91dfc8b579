"""A GRID-owned decode loop (mode 1), audited step by step.

``generate`` drives a guide with any ``sampler(mask_ids, rng) -> token`` under a
token budget. Every step is audited (DESIGN.md section 9): the configuration
hash, the content address of the mask, the token, how many ids were blocked, and
the kind of step. When the budget left is no more than ``reserve`` tokens, the
loop stops sampling and writes the shortest legal completion
(:func:`grid_core.complete.shortest_completion`) followed by EOS, each token
audited as ``reserve``: it never stops with a bare EOS away from ACCEPT. The
completion search is bounded; when it finds nothing, the loop rolls back one
sampled token at a time (dropping its audit record) until it does, and the seal
counts the rollbacks.

This is the loop the model-free demo uses; the token-denominated reserve table
and jump-forward of the termination issue refine its trigger.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from grid_core.audit import AuditLog, Kind, mask_entry_id
from grid_core.complete import shortest_completion
from grid_core.guide import GridGuide

Sampler = Callable[[Sequence[int], random.Random], int]


@dataclass(frozen=True)
class Generation:
    text: bytes
    tokens: tuple[int, ...]
    stop_reason: str
    audit: AuditLog


def _step(guide: GridGuide, audit: AuditLog, choose: Callable[[list[int]], int], kind: Kind) -> int:
    ids = guide.mask_ids()
    packed = guide.engine.pack(ids).tobytes()
    token = choose(ids)
    config_hash = guide.config.hash
    guide.advance(token)
    blocked = guide.engine.vocab.n_vocab - len(ids)
    audit.append(
        config_hash, mask_entry_id(packed), token, blocked, "eos" if guide.is_terminated() else kind
    )
    return token


def generate(
    guide: GridGuide, sampler: Sampler, budget: int, rng: random.Random, reserve: int = 24
) -> Generation:
    """Sample until EOS or until ``reserve`` tokens of budget are left, then complete."""
    vocab = guide.engine.vocab
    eos = set(vocab.eos_ids)
    audit, tokens = AuditLog(), list[int]()
    while not guide.is_terminated() and budget - len(tokens) > reserve:
        tokens.append(_step(guide, audit, lambda ids: sampler(ids, rng), "sampled"))
    stop, rollbacks = "eos", 0
    if not guide.is_terminated():
        completion = shortest_completion(guide.engine, guide.config)
        while completion is None and tokens:
            # The search is bounded: back off one sampled token at a time (the audit
            # log keeps exactly the records of the tokens that remain).
            guide.rollback(1)
            tokens.pop()
            audit.truncate(len(tokens))
            rollbacks += 1
            completion = shortest_completion(guide.engine, guide.config, max_configs=2_000)
        if completion is None:
            stop = "no-completion"
        else:
            stop = "reserve"
            while completion and len(tokens) < budget:

                def longest(ids: list[int], rest: bytes = completion) -> int:
                    fits = [
                        i for i in ids if i not in eos and rest.startswith(vocab.token_bytes[i])
                    ]
                    return max(fits, key=lambda i: (len(vocab.token_bytes[i]), -i))

                t = _step(guide, audit, longest, "reserve")
                tokens.append(t)
                completion = completion[len(vocab.token_bytes[t]) :]
            if len(tokens) < budget:
                tokens.append(_step(guide, audit, lambda ids: min(set(ids) & eos), "reserve"))
            else:
                stop = "budget"
    text = b"".join(vocab.token_bytes[t] for t in tokens if t not in eos)
    audit.close(
        stop, guide.engine.fingerprints(), {"mode": 1, "budget": budget, "rollbacks": rollbacks}
    )
    return Generation(text, tuple(tokens), stop, audit)
