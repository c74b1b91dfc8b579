"""The native serving session against the Python GridGuide, bit for bit.

``kernels.session(engine)`` (a ``grid_kernels.Session`` behind a thin wrapper)
runs each step in one call into Rust; ``GridGuide`` is the reference. Two
checks, both on real vocabularies:

- **corpus replays**: every differential corpus of grid-core (the scripts of
  ``test_kernels_parity``, the statements and generated statements of
  ``test_differential`` with their lexicon, and a seeded sample of Spider's dev
  gold for the sqlite dialect) is replayed as a model would write it (at each
  step the admitted token whose spelling is the longest prefix of the rest),
  and at every step the session's bitmask row must equal the reference's
  packed mask, word for word, up to EOS;
- **lockstep fuzz**: seeded random replays drive a session and a guide side
  by side through random admitted tokens, refused tokens (both must refuse and
  stay put), speculative drafts accepted then rejected (rollback), plain
  rollbacks, forks (both halves checked) and finishing the statement (its
  shortest completion, ``grid_core.complete``, token by token, then EOS, then
  both must refuse to go on); after every operation masks, configurations,
  step counts, EOS verdicts and terminations must agree.

References: a pure-Python engine (its kernels switched off) wherever it is
fast enough (the toy vocabulary, corpus replays); for the fuzz on real
vocabularies, the composed path (grid-core's classes, cache and EOS gate over
the kernels' walks, themselves checked against ``walk_from`` node for node in
``test_kernels_parity``). Reference rows are packed by ``Engine.pack`` (toy)
or by the kernels' ``fill_bitmask`` of the reference's ids (real
vocabularies; checked against ``Engine.pack`` in ``test_kernels_parity``).

A divergence fails with the cell, seed, operation and configuration. The full
corpus and 200 fuzz seeds per real-vocabulary cell run with ``-m slow``
(``nox -s differential``); the default suite runs 200 toy seeds and samples.
"""

from __future__ import annotations

import array
import random
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grid_kernels._native")

from test_differential import LEXICON as DIFF_LEXICON
from test_differential import STATEMENTS, generated_statements
from test_kernels_parity import CRUD_SCRIPTS, SQLITE_SCRIPTS
from toy import ANALYST, LEXICON, TOY

import grid_kernels
from grid_core import kernels
from grid_core import vocab as vocab_module
from grid_core.audit import verify
from grid_core.complete import shortest_completion
from grid_core.errors import GuideError
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.lexer import Config
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary

SPIDER_DEV = Path(__file__).resolve().parents[3].parent / "shared/data/spider/dev_gold.sql"
if not SPIDER_DEV.is_file():  # a user's clone: the copy vendored with its licence (data/README.md)
    SPIDER_DEV = Path(__file__).resolve().parents[3] / "data/spider/dev_gold.sql"

VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "toy": lambda: TOY,
    "cl100k": vocab_module.cl100k,
    "qwen": vocab_module.qwen,
}


@cache
def sqlite_grammar() -> Grammar:
    dialects = pytest.importorskip("grid_sql.dialects")
    return load_grammar(dialects.SQLITE.grammar_text, "sqlite")


@cache
def vocabulary(name: str) -> tuple[Vocabulary, TokenTrie]:
    v = VOCABS[name]()
    return v, build_trie(v)


def grammar_of(name: str) -> tuple[Grammar, dict[str, list[bytes]] | None]:
    if name == "crud":
        return ANALYST, LEXICON
    if name == "crud-diff":
        return ANALYST, DIFF_LEXICON
    return sqlite_grammar(), None


@dataclass
class Cell:
    """One (grammar, vocabulary): the kernels' engine and the reference's."""

    name: str
    engine: Engine
    reference: Engine
    spelled: dict[bytes, int]
    longest: int

    def session(self) -> kernels.KernelGuide:
        return kernels.session(self.engine)

    def row(self, s: kernels.KernelGuide) -> array.array[int]:
        out = array.array("i", [-1]) * self.engine.n_words
        s.fill_next_token_bitmask(out)
        return out

    def reference_row(self, g: GridGuide) -> array.array[int]:
        return g.mask()


@cache
def cell(grammar: str, vocab: str, pure: bool) -> Cell:
    """``pure``: the reference engine has its kernels switched off."""
    v, trie = vocabulary(vocab)
    g, lexicon = grammar_of(grammar)
    engine = Engine(g, v, lexicon, trie=trie)
    reference = Engine(g, v, lexicon, dfa=engine.dfa, trie=trie)
    if pure:
        reference.kernel = None
    assert engine.kernel is not None
    spelled: dict[bytes, int] = {}
    for i, b in enumerate(v.token_bytes):
        if b:
            spelled.setdefault(b, i)
    return Cell(f"{grammar}/{vocab}", engine, reference, spelled, max(map(len, spelled)))


def where(c: Cell, g: GridGuide, what: str) -> str:
    return f"{c.name} {what}: stack {g.config.node.states()} remainder {g.config.remainder!r}"


def check_same(c: Cell, g: GridGuide, s: kernels.KernelGuide, what: str) -> array.array[int]:
    """Masks, configuration (and its hash), steps, EOS verdict, termination and
    the audit records so far agree; the row."""
    assert s.steps == g.steps, where(c, g, what)
    assert s.is_terminated() == g.is_terminated(), where(c, g, what)
    assert s.eos_allowed() == g.eos_allowed(), where(c, g, what)
    assert s.config() == (g.config.node.states(), g.config.remainder), where(c, g, what)
    assert s.config_hash == g.config.hash, where(c, g, what)
    assert s.output() == g.output(), where(c, g, what)
    assert s.audit_log().lines() == g.audit_log().lines(), where(c, g, f"{what}: audit records")
    if g.is_terminated():
        return array.array("i")
    row = c.row(s)
    assert row == c.reference_row(g), where(c, g, what)
    assert s.step_audit() == g.step_audit(), where(c, g, f"{what}: the step's audit fields")
    return row


def check_seals(c: Cell, g: GridGuide, s: kernels.KernelGuide) -> None:
    """Both guides' records sealed alike: the same lines, the same anchor, and
    the Python verifier accepts the native log."""
    mode = {"mode": 2, "budget": 64}
    stop = "eos" if g.is_terminated() else "truncated"
    native, python = s.seal(stop, mode), g.seal(stop, mode)
    assert native.lines() == python.lines(), c.name
    assert native.seal_hash == python.seal_hash
    assert verify(native.lines(), anchor=python.seal_hash).ok


def admitted(row: array.array[int], token: int) -> bool:
    return bool(row[token >> 5] >> (token & 31) & 1)


# ------------------------------------------------------------------ corpus replays


def spider_statements(n: int, seed: int) -> list[bytes]:
    """``n`` seeded Spider dev gold statements (``../shared``'s, else the vendored copy)."""
    lines = [ln.partition("\t")[0].strip() for ln in SPIDER_DEV.read_text().splitlines()]
    stmts = sorted({(s if s.endswith(";") else s + ";").encode() for s in lines if s})
    return random.Random(seed).sample(stmts, n)


def corpus(grammar: str, slow: bool) -> list[bytes]:
    if grammar == "crud":
        return list(CRUD_SCRIPTS)
    if grammar == "crud-diff":
        return STATEMENTS + generated_statements(60 if slow else 4, seed=7)
    if not slow:
        return list(SQLITE_SCRIPTS[:2]) + spider_statements(1, seed=11)
    return list(SQLITE_SCRIPTS) + spider_statements(60, seed=11)


def replay(c: Cell, statement: bytes) -> int:
    """Replay ``statement`` greedily in a session and a reference guide, checking
    every step; returns the tokens taken. The statement must be in L."""
    g, s = GridGuide(c.reference), c.session()
    pos = 0
    while True:
        row = check_same(c, g, s, f"replay {statement!r} at byte {pos}")
        if pos == len(statement):
            eos = c.engine.vocab.eos_id
            assert admitted(row, eos), where(c, g, f"EOS after {statement!r}")
            g.accept_token(eos)
            s.accept_token(eos)
            check_same(c, g, s, "after EOS")
            check_seals(c, g, s)
            return g.steps
        rest = statement[pos : pos + c.longest]
        token = next(
            (
                c.spelled[rest[:k]]
                for k in range(len(rest), 0, -1)
                if rest[:k] in c.spelled and admitted(row, c.spelled[rest[:k]])
            ),
            None,
        )
        assert token is not None, where(c, g, f"stuck in {statement!r} at byte {pos}")
        g.accept_token(token)
        s.accept_token(token)
        pos += len(c.engine.vocab.token_bytes[token])


CORPUS_CELLS = [
    pytest.param("crud", "toy", id="crud-toy"),
    pytest.param("crud", "cl100k", id="crud-cl100k"),
    pytest.param("crud-diff", "cl100k", id="crud-diff-cl100k"),
    pytest.param("crud-diff", "qwen", id="crud-diff-qwen"),
    pytest.param("sqlite", "cl100k", id="sqlite-cl100k"),
    pytest.param("sqlite", "qwen", id="sqlite-qwen"),
]


@pytest.mark.parametrize(("grammar", "vocab"), CORPUS_CELLS)
def test_session_masks_equal_the_reference_on_the_corpora(grammar: str, vocab: str) -> None:
    """Fails if any session row differs from the pure-Python guide's mask at any
    step of any replay, or a replay gets stuck or misses EOS at its end."""
    c = cell(grammar, vocab, pure=True)
    steps = sum(replay(c, stmt) for stmt in corpus(grammar, slow=False))
    assert steps > 10


@pytest.mark.slow
@pytest.mark.parametrize(("grammar", "vocab"), CORPUS_CELLS)
def test_session_masks_equal_the_reference_on_the_whole_corpora(grammar: str, vocab: str) -> None:
    c = cell(grammar, vocab, pure=True)
    for stmt in corpus(grammar, slow=True):
        replay(c, stmt)


# ------------------------------------------------------------------ lockstep fuzz


def choose(c: Cell, rng: random.Random, ids: list[int]) -> int:
    """An admitted token: EOS half of the time it is admitted, a statement's
    closing ``;`` a tenth of the time one is, else one biased towards printable
    multi-byte spellings."""
    eos = c.engine.vocab.eos_id
    if eos in ids and rng.random() < 0.5:
        return eos
    spell = c.engine.vocab.token_bytes
    ends = [i for i in ids if spell[i].strip() == b";"]
    if ends and rng.random() < 0.1:
        return rng.choice(ends)
    longer = [i for i in ids if len(spell[i]) > 1 and all(0x20 <= b < 0x7F for b in spell[i])]
    return rng.choice(longer if longer and rng.random() < 0.7 else ids)


def mask_ids(g: GridGuide) -> list[int]:
    r = g.compute()
    return [*r.ci_ids, *r.cd_ids, *(g.engine.vocab.eos_ids if r.eos else ())]


def completion(c: Cell, config: Config) -> bytes | None:
    """``shortest_completion`` of ``config`` on the reference engine, once per
    (stack, remainder): the search is a pure function of the two (stack nodes are
    interned), and the seeds reach the same configurations again (223 searches
    over 88 configurations on crud/toy)."""
    key = (tuple(config.node.states()), config.remainder)
    found = _COMPLETIONS.get((c.reference, *key))
    if found is None:
        found = _COMPLETIONS[(c.reference, *key)] = (shortest_completion(c.reference, config),)
    return found[0]


_COMPLETIONS: dict[tuple[object, ...], tuple[bytes | None]] = {}


def fuzz(c: Cell, seed: int, steps: int) -> dict[str, int]:
    """One seeded lockstep run; returns how often each operation ran."""
    rng = random.Random(f"{c.name}/{seed}")
    pairs = [(GridGuide(c.reference), c.session())]
    ops = dict.fromkeys(("accept", "refuse", "draft", "rollback", "fork", "eos"), 0)
    n_vocab = c.engine.vocab.n_vocab
    for _ in range(steps):
        g, s = rng.choice(pairs)
        row = check_same(c, g, s, f"seed {seed}")
        if g.is_terminated():
            with pytest.raises(GuideError):
                s.fill_next_token_bitmask(array.array("i", bytes(4 * c.engine.n_words)))
            with pytest.raises(GuideError):
                s.accept_token(0)
            g.rollback(1)
            s.rollback(1)
            ops["rollback"] += 1
            continue
        if len(g.config.remainder) > 24:  # keep replays in varied territory
            n = rng.randint(1, g.steps)
            g.rollback(n)
            s.rollback(n)
            ops["rollback"] += 1
            continue
        ids = mask_ids(g)
        op = rng.random()
        if op < 0.08 and g.steps:
            n = rng.randint(1, g.steps)
            g.rollback(n)
            s.rollback(n)
            ops["rollback"] += 1
        elif op < 0.14 and len(pairs) < 4:
            pairs.append((g.fork(), s.fork()))
            ops["fork"] += 1
        elif op < 0.24:
            refused = [t for t in rng.sample(range(n_vocab), 50) if not admitted(row, t)]
            refused += [-1, n_vocab]
            t = rng.choice(refused)
            before = s.config()
            with pytest.raises(GuideError) as py_err:
                g.accept_token(t)
            with pytest.raises(GuideError) as rs_err:
                s.accept_token(t)
            assert (rs_err.value.step, rs_err.value.token) == (py_err.value.step, t)
            assert s.config() == before
            ops["refuse"] += 1
        elif op < 0.40:
            # Speculative decoding: accept a draft, check each step, reject a tail.
            k = rng.randint(2, 4)
            taken = 0
            for _ in range(k):
                if g.is_terminated():
                    break
                t = choose(c, rng, mask_ids(g))
                g.accept_token(t, "forced")
                s.accept_token(t, "forced")
                taken += 1
                if rng.random() < 0.5:  # else the next record's mask is the guide's own fill
                    check_same(c, g, s, f"seed {seed} draft")
            reject = rng.randint(1, taken)
            g.rollback(reject)
            s.rollback(reject)
            ops["draft"] += 1
        elif op < 0.46 and (suffix := completion(c, g.config)) is not None:
            # Finish the statement (when the bounded search finds how): its
            # shortest completion, token by token, then EOS.
            pos = 0
            while pos < len(suffix):
                row = check_same(c, g, s, f"seed {seed} finish")
                rest = suffix[pos : pos + c.longest]
                t = next(
                    c.spelled[rest[:k]]
                    for k in range(len(rest), 0, -1)
                    if rest[:k] in c.spelled and admitted(row, c.spelled[rest[:k]])
                )
                g.accept_token(t, "reserve")
                s.accept_token(t, "reserve")
                pos += len(c.engine.vocab.token_bytes[t])
            check_same(c, g, s, f"seed {seed} finished")
            g.accept_token(c.engine.vocab.eos_id)
            s.accept_token(c.engine.vocab.eos_id)
            ops["eos"] += 1
        else:
            t = choose(c, rng, ids)
            g.accept_token(t)
            s.accept_token(t)
            ops["eos" if g.is_terminated() else "accept"] += 1
    for g, s in pairs:
        check_same(c, g, s, f"seed {seed} end")
        check_seals(c, g, s)
    return ops


def run_fuzz(c: Cell, seeds: range, steps: int) -> dict[str, int]:
    total: dict[str, int] = {}
    for seed in seeds:
        for op, n in fuzz(c, seed, steps).items():
            total[op] = total.get(op, 0) + n
    print(c.name, f"{len(seeds)} seeds, zero divergence:", total)
    return total


def test_lockstep_fuzz_toy_200_seeds() -> None:
    """200 seeds on the CRUD analyst grammar with its lexicon and the toy
    vocabulary against the pure-Python guide. Fails on any divergence, and if
    some operation (refusal, draft, rollback, fork, EOS) never ran."""
    total = run_fuzz(cell("crud", "toy", pure=True), range(200), 20)
    assert all(n > 0 for n in total.values()), total


@pytest.mark.parametrize(
    ("grammar", "vocab"),
    [
        pytest.param("sqlite", "cl100k", id="sqlite-cl100k"),
        pytest.param("crud", "qwen", id="crud-qwen"),
    ],
)
def test_lockstep_fuzz_real_vocabularies_sample(grammar: str, vocab: str) -> None:
    run_fuzz(cell(grammar, vocab, pure=False), range(4), 12)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("grammar", "vocab"),
    [
        pytest.param("sqlite", "cl100k", id="sqlite-cl100k"),
        pytest.param("crud", "qwen", id="crud-qwen"),
    ],
)
def test_lockstep_fuzz_real_vocabularies_200_seeds(grammar: str, vocab: str) -> None:
    total = run_fuzz(cell(grammar, vocab, pure=False), range(200), 20)
    assert all(n > 0 for n in total.values()), total


# ------------------------------------------------------------------ bad input


def numpy_or_skip() -> Any:
    return pytest.importorskip("numpy")


def test_bad_input_raises_and_writes_nothing() -> None:
    """Each mistake raises a clear error, leaves the row (and every other row)
    as it was and the session where it was. Fails on a crash, a silent write,
    or an accepted mistake."""
    c = cell("sqlite", "cl100k", pure=False)
    n_words, n_vocab = c.engine.n_words, c.engine.vocab.n_vocab
    s = c.session()
    start = s.config()

    def untouched(buf: Any, fill: Callable[[], None], exc: type[Exception], match: str) -> None:
        before = bytes(memoryview(buf).cast("B"))
        with pytest.raises(exc, match=match):
            fill()
        assert bytes(memoryview(buf).cast("B")) == before

    small = array.array("i", [7]) * (n_words - 1)
    untouched(small, lambda: s.fill_next_token_bitmask(small), ValueError, f"expected {n_words}")
    wide = array.array("q", [7]) * n_words
    untouched(wide, lambda: s.fill_next_token_bitmask(wide), TypeError, "8-byte 'q'")
    unsigned = array.array("I", [7]) * n_words
    untouched(unsigned, lambda: s.fill_next_token_bitmask(unsigned), TypeError, "int32")
    raw = bytearray(4 * n_words)
    untouched(raw, lambda: s.fill_next_token_bitmask(raw), TypeError, "int32")
    with pytest.raises(TypeError, match="read-only"):
        s.fill_next_token_bitmask(memoryview(array.array("i", bytes(4 * n_words))).toreadonly())
    with pytest.raises(TypeError, match="int32"):
        s.fill_next_token_bitmask([0] * n_words)
    strided = array.array("i", [7]) * (2 * n_words)
    untouched(
        strided,
        lambda: s.fill_next_token_bitmask(memoryview(strided)[::2]),
        ValueError,
        "C-contiguous",
    )
    two = array.array("i", [7]) * (2 * n_words)
    two_rows = memoryview(two).cast("B").cast("i", (2, n_words))
    untouched(two, lambda: s.fill_next_token_bitmask(two_rows, 2), ValueError, "row 2")
    untouched(two, lambda: s.fill_next_token_bitmask(two_rows, -1), ValueError, "row -1")
    cube = memoryview(two).cast("B").cast("i", (1, 2, n_words))
    untouched(two, lambda: s.fill_next_token_bitmask(cube), ValueError, "3-D")
    # A good 2-D call writes its row and nothing else.
    s.fill_next_token_bitmask(two_rows, 1)
    assert two[:n_words] == array.array("i", [7]) * n_words
    assert two[n_words:] == c.reference_row(GridGuide(c.reference))

    for token, reason in [
        (-1, "outside the vocabulary"),
        (n_vocab, "outside the vocabulary"),
        (c.engine.vocab.eos_id, "EOS before the output is a sentence"),
        (c.spelled[b")"], r"b'\)' is not in the mask"),
    ]:
        with pytest.raises(GuideError, match=reason) as err:
            s.accept_token(token)
        assert (err.value.step, err.value.token) == (0, token)
        assert s.config() == start
    specials = sorted(c.engine.vocab.special_ids - set(c.engine.vocab.eos_ids))
    if specials:
        with pytest.raises(GuideError, match="special tokens are never admitted"):
            s.accept_token(specials[0])
    with pytest.raises(GuideError, match="cannot roll back 1 of 0 tokens"):
        s.rollback(1)
    with pytest.raises(GuideError, match="cannot roll back -1 of 0 tokens"):
        s.rollback(-1)

    for piece in [b"SELECT", b" ", b"1", b";"]:
        s.accept_token(c.spelled[piece])
    s.accept_token(c.engine.vocab.eos_id)
    assert s.is_terminated() and not s.eos_allowed()
    with pytest.raises(GuideError, match="already accepted EOS"):
        s.accept_token(c.spelled[b" "])
    done = array.array("i", [7]) * n_words
    untouched(done, lambda: s.fill_next_token_bitmask(done), GuideError, "no next mask")


def test_numpy_rows_are_filled_in_place() -> None:
    """A (batch, n_words) numpy int32 array: each session fills its own row, the
    others stay; a wrong dtype or a strided view is refused."""
    np = numpy_or_skip()
    c = cell("sqlite", "cl100k", pure=False)
    a, b = c.session(), c.session()
    b.accept_token(c.spelled[b"SELECT"])
    batch = np.full((3, c.engine.n_words), 7, dtype=np.int32)
    a.fill_next_token_bitmask(batch, 0)
    b.fill_next_token_bitmask(batch, 2)
    assert (batch[1] == 7).all()
    g = GridGuide(c.reference)
    assert batch[0].tobytes() == c.reference_row(g).tobytes()
    g.accept_token(c.spelled[b"SELECT"])
    assert batch[2].tobytes() == c.reference_row(g).tobytes()
    with pytest.raises(TypeError, match="int32"):
        a.fill_next_token_bitmask(np.zeros((1, c.engine.n_words), dtype=np.int64))
    with pytest.raises(ValueError, match="C-contiguous"):
        a.fill_next_token_bitmask(np.zeros((1, 2 * c.engine.n_words), dtype=np.int32)[:, ::2])


def test_a_session_holds_no_buffer_after_its_fill() -> None:
    """A buffer given as such is exported at each fill and released after it (a
    held export once missed a reshape in place, and numpy's
    ``resize(refcheck=False)`` frees memory an export points at). Whichever
    buffer comes, its own row is written and no other, checked against its
    shape now."""
    np = numpy_or_skip()
    c = cell("sqlite", "cl100k", pure=False)
    n_words = c.engine.n_words
    s = c.session()
    a = np.full((2, n_words), 7, dtype=np.int32)
    b = np.full((1, n_words), 7, dtype=np.int32)
    alone_a, alone_b = sys.getrefcount(a), sys.getrefcount(b)
    g = GridGuide(c.reference)
    s.fill_next_token_bitmask(a, 1)
    s.fill_next_token_bitmask(a, 1)
    assert sys.getrefcount(a) == alone_a, "no export is held after the fill"
    assert (a[0] == 7).all() and a[1].tobytes() == c.reference_row(g).tobytes()
    a.resize((3, n_words))  # nothing holds it
    a[2] = 7
    s.fill_next_token_bitmask(a, 2)
    assert a[2].tobytes() == a[1].tobytes()
    for piece in (b"SELECT", b" "):
        s.accept_token(c.spelled[piece])
        g.accept_token(c.spelled[piece])
    s.fill_next_token_bitmask(b)
    assert b[0].tobytes() == c.reference_row(g).tobytes() != a[1].tobytes()
    with pytest.raises(ValueError, match="row 1"):
        s.fill_next_token_bitmask(b, 1)
    s.fill_next_token_bitmask(a, 0)
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() != b[0].tobytes()
    assert (sys.getrefcount(a), sys.getrefcount(b)) == (alone_a, alone_b)


def test_torch_cpu_tensors_are_filled_in_place() -> None:
    """A CPU torch.int32 tensor is viewed, not copied; another dtype or a
    non-CPU tensor is refused with a message naming it."""
    torch = pytest.importorskip("torch")
    c = cell("sqlite", "cl100k", pure=False)
    s = c.session()
    t = torch.full((2, c.engine.n_words), 7, dtype=torch.int32)
    s.fill_next_token_bitmask(t, 1)
    assert bool((t[0] == 7).all())
    assert t[1].numpy().tobytes() == c.reference_row(GridGuide(c.reference)).tobytes()
    # The view of the last tensor is kept while that tensor comes again; another
    # tensor (a fork's fill too) is filled through its own view, never the last.
    other = torch.full((1, c.engine.n_words), 7, dtype=torch.int32)
    s.fork().fill_next_token_bitmask(other)
    assert other[0].numpy().tobytes() == t[1].numpy().tobytes()
    s.accept_token(c.spelled[b"SELECT"])
    s.fill_next_token_bitmask(other)
    s.fill_next_token_bitmask(t, 0)
    assert t[0].numpy().tobytes() == other[0].numpy().tobytes() != t[1].numpy().tobytes()
    with pytest.raises(TypeError, match=r"torch\.int32"):
        s.fill_next_token_bitmask(torch.zeros((1, c.engine.n_words), dtype=torch.int64))
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU tensor"):
            s.fill_next_token_bitmask(
                torch.zeros((1, c.engine.n_words), dtype=torch.int32, device="cuda")
            )


def test_the_per_token_verbs_are_the_sessions_own() -> None:
    """A native guide's ``fill_next_token_bitmask`` and ``accept_token`` (its
    forks' too) are the session's own methods: no Python frame between a caller
    and Rust. They still raise the protocol's errors; a bare session (made
    without the protocol) raises the kernels' ``SessionError``."""
    c = cell("sqlite", "cl100k", pure=False)
    s = c.session()
    for g in (s, s.fork()):
        for verb in ("fill_next_token_bitmask", "accept_token"):
            method = getattr(g, verb)
            assert isinstance(method, types.BuiltinMethodType), verb
            assert method.__self__ is g._native, verb
        with pytest.raises(GuideError, match="not in the mask") as err:
            g.accept_token(c.spelled[b")"])
        assert type(err.value) is GuideError
    bare = c.engine.kernel.session(0, True)
    with pytest.raises(grid_kernels.SessionError, match="not in the mask"):
        bare.accept_token(c.spelled[b")"])


def test_sessions_share_the_engine_cache() -> None:
    """A second session over one engine walks nothing new for the same steps
    (fails if sessions copied or re-keyed the cache)."""
    c = cell("crud", "toy", pure=True)
    first = c.session()
    for piece in [b"select", b" *", b" from"]:
        first.fill_next_token_bitmask(array.array("i", bytes(4 * c.engine.n_words)))
        first.accept_token(c.spelled[piece])
    cached, hits, misses = c.engine.kernel.walk_stats
    assert cached == c.engine.kernel.cached_walks == misses > 0  # each miss walked one
    second = c.session()
    for piece in [b"select", b" *", b" from"]:
        second.fill_next_token_bitmask(array.array("i", bytes(4 * c.engine.n_words)))
        second.accept_token(c.spelled[piece])
    assert c.engine.kernel.cached_walks == cached
    _, hits_after, misses_after = c.engine.kernel.walk_stats
    assert (hits_after, misses_after) == (hits + 3, misses)  # each fill found its walk


def test_the_switch_refuses_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRID_KERNELS", "0")
    engine = Engine(ANALYST, TOY, LEXICON)
    with pytest.raises(kernels.KernelsError, match="GRID_KERNELS=0"):
        kernels.session(engine)


@pytest.mark.parametrize("vocab", ["toy", "cl100k", "qwen"])
def test_trie_spellings_are_the_vocabulary(vocab: str) -> None:
    """The session reads each token's bytes off the kernels' trie: they must be
    ``Vocabulary.token_bytes`` for every id (``b""`` exactly for specials)."""
    c = cell("crud", vocab, pure=False)
    trie = c.engine.kernel.trie
    v = c.engine.vocab
    assert all(trie.token_bytes(i) == v.token_bytes[i] for i in range(v.n_vocab))
    with pytest.raises(ValueError, match="out of range"):
        trie.token_bytes(v.n_vocab)
