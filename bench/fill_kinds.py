"""First-sight fills by kind, with the CPU caches cold: the A/B harness of issue #13's tail.

Purpose. ``bench/peers.py`` times GRID's first-sight fills between
llguidance's; this script times them alone, split by how each was served,
so that two builds of grid-kernels can be compared on the fills the
first-sight p50, p90 and p99 fall among. For each pass a fresh engine of
``bench/peers.py``'s grammar (``free`` or ``lexicon``) over a real vocabulary
replays the first ``--statements`` statements of that target's corpus (those
in the language), each in a fresh ``Engine.guide()`` (the native guide when
grid-kernels is installed, audit on), feeding the tokenizer's own ids then
EOS. Before each fill ``--flush-mb`` MiB of memory are read, as a peer's
mask computation or a forward pass empties the per-core caches. Each fill is
timed with ``perf_counter_ns`` and classified by ``last_fill``:

- ``row``: a kept row, one copy (the walk cached, the stack seen before);
- ``classes``: the walks cached, the CD verdicts gathered against a new stack;
- ``walked``: some walk (the root walk or a verdict's) was cold.

Printed per pass: the milliseconds of all fills, the p50 and p90 over all
fills, and per kind its count, p50 and p90. Counts are a property of the
build and the corpus; times are of this host at this moment. Compare builds
by alternating them (``PYTHONPATH`` at a copy of ``grid_kernels``), one
process each, and look at ratios, not absolute times.

Runs in the ``peers`` environment (``bench/peers.py`` imports llguidance):
``UV_PROJECT_ENVIRONMENT=... uv run --group peers python bench/fill_kinds.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import peers  # bench/ is on the path of a script run from it

from grid_core.trie import TokenTrie
from grid_core.vocab import Vocabulary


def percentile(sorted_us: list[float], q: float) -> float:
    return sorted_us[min(len(sorted_us) - 1, int(len(sorted_us) * q))]


def one_pass(
    target: peers.Target,
    vocab: Vocabulary,
    trie: TokenTrie,
    ids: list[list[int]],
    flush: np.ndarray,
) -> dict[str, list[float]]:
    """Fill times in µs by kind (``"all"`` too) over one fresh engine."""
    engine = target.build(vocab, trie)
    words = np.zeros(engine.n_words, dtype=np.int32)
    kinds: dict[str, list[float]] = {"all": []}
    for tokens in ids:
        guide = engine.guide(audit=True)
        for token in [*tokens, vocab.eos_id]:
            flush.sum()
            t0 = time.perf_counter_ns()
            guide.fill_next_token_bitmask(words)
            us = (time.perf_counter_ns() - t0) / 1e3
            kinds.setdefault(guide.last_fill, []).append(us)
            kinds["all"].append(us)
            guide.accept_token(token)
    return kinds


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", choices=("free", "lexicon"), default="lexicon")
    p.add_argument("--vocab", choices=sorted(peers.VOCABS), default="qwen")
    p.add_argument("--statements", type=int, default=54, help="corpus statements replayed")
    p.add_argument("--flush-mb", type=int, default=16, help="MiB read before each fill")
    p.add_argument("--passes", type=int, default=2, help="fresh engines, one after the other")
    args = p.parse_args(argv)
    target = peers.free_target(0) if args.target == "free" else peers.lexicon_target()
    vocab = peers.VOCABS[args.vocab]()
    encode = peers.real_tokenizer(args.vocab)
    trie = peers.build_trie(vocab)
    probe = target.build(vocab, trie)
    stmts = [s for _, s in target.corpus if peers.in_language(probe, s)][: args.statements]
    ids = [encode(s.decode()) for s in stmts]
    flush = np.ones(args.flush_mb << 20, dtype=np.uint8)
    flushed = f"{args.flush_mb} MiB read before each fill"
    print(f"{args.target} {args.vocab}: {len(stmts)} statements, {flushed}")
    for n in range(args.passes):
        kinds = {k: sorted(v) for k, v in one_pass(target, vocab, trie, ids, flush).items()}
        every = kinds.pop("all")
        parts = [
            f"{k} n={len(v)} p50 {percentile(v, 0.5):.1f} p90 {percentile(v, 0.9):.1f}"
            for k, v in sorted(kinds.items())
        ]
        print(
            f"pass {n}: fills {sum(every) / 1e3:.1f} ms, p50 {percentile(every, 0.5):.1f} "
            f"p90 {percentile(every, 0.9):.1f} µs | " + " | ".join(parts)
        )


if __name__ == "__main__":
    main()
