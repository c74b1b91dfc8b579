"""grid-core uses the compiled kernels when installed, and GRID_KERNELS=0 turns them off.

Both paths must give the same masks and the same cache entries: the same
replays are run with and without the kernels, in two processes, on an engine
without cache and on one with its cache (where every miss is done in Rust when
the kernels are on), and their masks and the entry ids of every root walk
compared by digest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from toy import ANALYST, LEXICON, TOY

from grid_core.guide import Engine

TESTS = Path(__file__).parent
REPLAY = """
import hashlib, random, sys
sys.path.insert(0, {tests!r})
from grid_core.guide import Engine, GridGuide
from toy import ANALYST, LEXICON, TOY, EOS
engine = Engine(ANALYST, TOY, LEXICON, cache=False)
cached = Engine(ANALYST, TOY, LEXICON)
print("kernel" if engine.kernel is not None else "python")
digest = hashlib.blake2b()
for seed in range(25):
    rng, guide, other = random.Random(seed), GridGuide(engine), GridGuide(cached)
    for _ in range(30):
        ids = guide.mask_ids()
        assert other.mask_ids() == ids
        config = other.config
        key = cached.key(0, config.normal, cached.parser.allowed(config.node))
        digest.update(repr(ids).encode() + cached.t1.get(key).entry_id.encode())
        t = rng.choice(ids)
        if t == EOS:
            break
        guide.accept_token(t)
        other.accept_token(t)
print(digest.hexdigest())
"""


def run(kernels: str) -> list[str]:
    env = {**os.environ, "GRID_KERNELS": kernels}
    code = REPLAY.format(tests=str(TESTS))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.split()


def test_kernels_are_used_when_installed() -> None:
    assert Engine(ANALYST, TOY, LEXICON).kernel is not None


def test_the_switch_forces_python_and_masks_agree() -> None:
    with_kernels, without = run("1"), run("0")
    assert with_kernels[0] == "kernel" and without[0] == "python"
    assert with_kernels[1] == without[1]
