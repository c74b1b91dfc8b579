"""Requirement R, structurally: nothing in the hot loop reads state proportional to n.

DESIGN.md section 7: amortised O(1) guard cost per token, the per-step worst case
bounded by nesting depth, never by the position n. Timing it is the job of
``bench/r_harness.py`` (16,000-token streams, OLS slope per depth); these tests
check the mechanisms it relies on, on streams long enough that an O(n) key or
copy would show, and fail if one comes back:

- inside one long lexeme (an open string literal) the cache key (the normal
  form) stays constant, so after the first token every mask is a T1 hit; the
  configurations of the lexeme share one append-only buffer, so the guide's
  history holds O(n) bytes and not O(n^2); the configuration hash still tells
  two different remainders apart;
- on a stream at fixed depth (a long ``AND`` chain), after one round of warm-up
  there are no more cache misses, no new interned stack nodes, and the stack
  depth stays bounded.

With the raw remainder as the key (the pre-R code) the first test sees one miss
per token; with per-step copies of the remainder it sees thousands of buffers.
"""

from __future__ import annotations

from toy import LEXICON, TOY, analyst_engine, token

from grid_core.guide import Engine, GridGuide


def feed(guide: GridGuide, spellings: list[bytes]) -> None:
    for s in spellings:
        guide.mask_ids()
        guide.accept_token(token(s))


def history(guide: GridGuide) -> list[GridGuide]:
    out = []
    while guide.steps:
        out.append(guide.fork())
        guide.rollback()
    return out


def test_open_string_literal_is_constant_work_per_token() -> None:
    engine = analyst_engine()
    guide = GridGuide(engine)
    feed(guide, [b"select", b" *", b" from", b" ", *[bytes([c]) for c in b"orders where id = '"]])
    opened = guide.steps
    feed(guide, [b"a", b"b"])
    assert engine.t1 is not None
    misses, normal = engine.t1.misses, guide.config.normal
    assert normal[2:] == (0, b""), "an open string has no emittable prefix: v is dropped"
    n = 3_000
    feed(guide, [bytes([b"abc xyz"[i % 7]]) for i in range(n)])
    assert guide.config.size == n + 3  # the quote, "ab", and n bytes
    assert engine.t1.misses == misses, "a mask inside the literal missed the cache"
    assert guide.config.normal == normal
    inside = history(guide.fork())[: n + 2]
    buffers = {id(g.config.buffer) for g in inside}
    assert len(buffers) == 1, f"{len(buffers)} buffers for one lexeme's {n} configurations"
    assert len({g.config.hash for g in inside}) == len(inside), "config hashes collide"
    assert guide.steps - opened == n + 2


def test_forks_inside_a_lexeme_never_see_each_others_bytes() -> None:
    engine = analyst_engine()
    guide = GridGuide(engine)
    feed(guide, [b"select", b" *", b" from", b" ", *[bytes([c]) for c in b"orders where id = 'ab"]])
    left, right = guide.fork(), guide.fork()
    feed(left, [b"x", b"y"])
    feed(right, [b"z"])
    assert left.config.remainder == b"'abxy"
    assert right.config.remainder == b"'abz"
    assert guide.config.remainder == b"'ab"
    feed(right, [b"'", b";"])
    assert right.is_complete() and not left.is_complete()


def test_fixed_depth_stream_stops_missing_and_interning() -> None:
    engine = Engine(analyst_engine().grammar, TOY, LEXICON)
    guide = GridGuide(engine)
    feed(guide, [b"select", b" *", b" from", b" ", *[bytes([c]) for c in b"orders where a = 1"]])
    clause = [bytes([c]) for c in b" and b < 22 and c = 'q'"]
    feed(guide, clause * 3)  # warm-up: every configuration of a round is seen
    assert engine.t1 is not None
    misses, nodes = engine.t1.misses, len(engine.parser._interned)
    depths = []
    for _ in range(100):
        feed(guide, clause)
        depths.append(guide.config.node.depth)
    assert engine.t1.misses == misses, "a warm round missed the cache"
    assert len(engine.parser._interned) == nodes, "a warm round interned new stack nodes"
    assert max(depths) == min(depths), f"stack depth drifts with n: {depths[:3]}..{depths[-3:]}"
