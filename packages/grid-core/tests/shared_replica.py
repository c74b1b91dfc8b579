"""A replica for the shared-tier tests: the sqlite dialect over cl100k, replaying
Spider dev gold statements through the native guide.

Imported by ``test_shared_cache`` (:func:`engine`, :func:`replay`) and run by it
as a separate process (``python shared_replica.py N SEED``: replays N seeded
statements with the shared tier the environment configures, and prints one
JSON object: the masks' digest, the steps and the tier's metrics).
"""

from __future__ import annotations

import array
import hashlib
import json
import random
import sys
from functools import cache
from pathlib import Path
from typing import Any

from grid_core import shared_cache
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary, cl100k

SPIDER_DEV = Path(__file__).resolve().parents[3].parent / "shared/data/spider/dev_gold.sql"
if not SPIDER_DEV.is_file():  # a user's clone: the copy vendored with its licence (data/README.md)
    SPIDER_DEV = Path(__file__).resolve().parents[3] / "data/spider/dev_gold.sql"


@cache
def grammar() -> Grammar:
    from grid_sql.dialects import SQLITE

    return load_grammar(SQLITE.grammar_text, "sqlite")


@cache
def vocabulary() -> tuple[Vocabulary, dict[bytes, int], int]:
    v = cl100k()
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(v.token_bytes):
        if b:
            spelled.setdefault(b, i)
    return v, spelled, max(map(len, spelled))


def engine() -> Engine:
    """A new engine (its own local cache); the shared tier as the environment says."""
    return Engine(grammar(), vocabulary()[0])


def statements(n: int, seed: int) -> list[bytes]:
    """``n`` seeded Spider dev gold statements."""
    lines = [ln.partition("\t")[0].strip() for ln in SPIDER_DEV.read_text().splitlines()]
    stmts = sorted({(s if s.endswith(";") else s + ";").encode() for s in lines if s})
    return random.Random(seed).sample(stmts, n)


def next_token(row: array.array[int], statement: bytes, pos: int) -> int:
    """The admitted token with the longest spelling that prefixes ``statement[pos:]``."""
    _, spelled, longest = vocabulary()
    rest = statement[pos : pos + longest]
    return next(
        spelled[rest[:k]]
        for k in range(len(rest), 0, -1)
        if rest[:k] in spelled and row[spelled[rest[:k]] >> 5] >> (spelled[rest[:k]] & 31) & 1
    )


def replay(e: Engine, statement: bytes) -> list[bytes]:
    """Every mask row (bytes) of ``statement`` replayed greedily (:func:`next_token`),
    EOS last. In L, or it fails."""
    v = vocabulary()[0]
    guide: Any = e.guide(audit=False)
    rows, pos = [], 0
    row = array.array("i", bytes(4 * e.n_words))
    while True:
        guide.fill_next_token_bitmask(row)
        rows.append(row.tobytes())
        if pos == len(statement):
            assert row[v.eos_id >> 5] >> (v.eos_id & 31) & 1, f"EOS refused after {statement!r}"
            return rows
        token = next_token(row, statement, pos)
        guide.accept_token(token)
        pos += len(v.token_bytes[token])


def digest(rows: list[bytes]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for r in rows:
        h.update(r)
    return h.hexdigest()


def main() -> None:
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    e = engine()
    rows = [r for s in statements(n, seed) for r in replay(e, s)]
    tiers = shared_cache.tiers()
    metrics = tiers[0].metrics() if tiers else {}
    print(json.dumps({"digest": digest(rows), "steps": len(rows), "metrics": metrics}))


if __name__ == "__main__":
    main()
