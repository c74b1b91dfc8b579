"""MaskBench: GRID, llguidance and xgrammar on JSON Schemas, same tokenizer, same run.

Data: ``../shared/data/maskbench/sample315`` (a stratified sample of 315 schemas
of JSONSchemaBench's MaskBench set; each file ``{schema, tests: [{valid, data}]}``).

Protocol (MaskBench's), per tokenizer (Llama-3, Qwen) and engine:

- **TTFM** (time to first mask): compiling the schema into a matcher and
  computing its first mask, the tokenizer already loaded (GRID: its token trie
  built once per tokenizer; llguidance: its ``LLTokenizer``; xgrammar: its
  ``TokenizerInfo``);
- a schema the engine refuses to compile is a **compile error** (declared
  unsupported);
- each test instance is serialized compactly (``json.dumps(data,
  separators=(",", ":"), ensure_ascii=False)``) and tokenized by the real
  tokenizer; at each token the engine computes its mask (timed) and the token
  must be in it, then the engine accepts it (timed); after the last token EOS
  must be in the mask. **TBM** (time between masks) is mask plus accept, for
  every token of every valid instance (p50/p90/p99 over all of them);
- a valid instance rejected is a **validation error**, an invalid instance
  whose every token and EOS are accepted an **invalidation error**;
- a schema **passes** when it compiles and has neither error.

Engines: GRID through :func:`grid_core.jsonschema.schema_grammar` (compact, the
schema's own semantics: ``strict=False``) and
:func:`grid_core.compile.compile_grammar` (the native guide, audit on, as the
adapters run it); llguidance's ``LLMatcher`` on ``grammar_from_json_schema``
with compact separators; xgrammar's ``compile_json_schema`` with
``any_whitespace=False, separators=(",", ":"), strict_mode=False`` (compact, the
schema's own semantics).

Output: ``bench/results/maskbench.json`` shaped ``{tokenizer: {engine: {schemas,
passing, compile_errors, validation_errors, invalidation_errors, tbm_p50_us,
tbm_p90_us, tbm_p99_us, ttfm_p50_ms}}}`` plus ``meta`` (the host, the load, how
many schemas, per-schema outcomes), rewritten after every schema so that a run
stopped early leaves a labelled partial result. Run: ``nox -s maskbench`` (the
``peers`` environment, numpy's and torch's thread pools held to one thread);
``--every K`` takes every K-th schema by file name (all sources, in
proportion), ``--limit N`` the first N of those. Each tokenizer runs in a fresh
process, so a schema's first compile under the second tokenizer finds no
pattern or grammar memoized by the first (TTFM is a first compile in both).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llguidance
import numpy as np
import torch
import xgrammar
from host import host_description
from llguidance._tokenizer import TokenizerWrapper
from mask_latency import percentile
from peers import VOCABS, _LLGuidanceVocab, real_tokenizer

from grid_core.compile import compile_grammar
from grid_core.errors import GridError, GuideError
from grid_core.jsonschema import schema_grammar
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench" / "sample315"
RESULTS = Path(__file__).resolve().parent / "results" / "maskbench.json"
ENGINES = ("grid", "llguidance", "xgrammar")
DEBUG = bool(os.environ.get("MASKBENCH_DEBUG"))


def has(words: np.ndarray[Any, Any], token: int) -> bool:
    return bool(int(words[token >> 5]) >> (token & 31) & 1)


class Matcher:
    """One engine's state over one instance: ``mask()`` fills ``words``, ``accept``."""

    words: np.ndarray[Any, Any]

    def mask(self) -> None: ...
    def accept(self, token: int) -> bool: ...


class GridMatcher(Matcher):
    def __init__(self, engine: Any) -> None:
        self.guide = engine.guide()
        self.words = np.zeros(engine.n_words, dtype=np.int32)

    def mask(self) -> None:
        self.guide.fill_next_token_bitmask(self.words)

    def accept(self, token: int) -> bool:
        try:
            self.guide.accept_token(token)
        except GuideError:
            return False
        return True


class LLGMatcher(Matcher):
    def __init__(self, template: Any, n_words: int) -> None:
        self.m = template.deep_copy()
        self.words = np.zeros(n_words, dtype=np.int32)

    def mask(self) -> None:
        self.m.unsafe_compute_mask_ptr(self.words.ctypes.data, self.words.nbytes)

    def accept(self, token: int) -> bool:
        return bool(self.m.consume_token(token)) and not self.m.is_error()


class XGRMatcher(Matcher):
    def __init__(self, compiled: Any, n_words: int) -> None:
        self.m = xgrammar.GrammarMatcher(compiled)
        self.words = np.zeros(n_words, dtype=np.int32)
        self.tensor = torch.from_numpy(self.words).view(1, n_words)

    def mask(self) -> None:
        self.m.fill_next_token_bitmask(self.tensor)

    def accept(self, token: int) -> bool:
        return bool(self.m.accept_token(token))


class Backend:
    """How one engine compiles a schema and starts a matcher on it."""

    def __init__(self, name: str, vocab: Vocabulary, encode: Callable[[str], list[int]]) -> None:
        self.name = name
        self.n_words = (vocab.n_vocab + 31) // 32
        self.eos = vocab.eos_id
        if name == "grid":
            self.trie = build_trie(vocab)
            self.vocab = vocab
        elif name == "llguidance":
            wrapper = TokenizerWrapper(_LLGuidanceVocab(vocab, encode))
            self.lltok = llguidance.LLTokenizer(
                wrapper, n_vocab=vocab.n_vocab, eos_token=list(vocab.eos_ids)
            )
        else:
            info = xgrammar.TokenizerInfo(
                list(vocab.token_bytes),
                xgrammar.VocabType.RAW,
                vocab_size=vocab.n_vocab,
                stop_token_ids=list(vocab.eos_ids),
            )
            self.compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

    def compile(self, schema: Any) -> Any:
        """The compiled artifact, or raise ``Refused`` with the engine's reason."""
        if self.name == "grid":
            try:
                return compile_grammar(schema_grammar(schema), self.vocab, trie=self.trie)
            except GridError as e:
                raise Refused(str(e)) from None
        if self.name == "llguidance":
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                schema,
                defaults={
                    "whitespace_flexible": False,
                    "item_separator": ",",
                    "key_separator": ":",
                },
            )
            m = llguidance.LLMatcher(self.lltok, grammar, log_level=0)
            if m.is_error():
                raise Refused(m.get_error())
            return m
        try:
            return self.compiler.compile_json_schema(
                json.dumps(schema),
                any_whitespace=False,
                separators=(",", ":"),
                strict_mode=False,
            )
        except Exception as e:  # xgrammar raises plain RuntimeError/ValueError
            raise Refused(str(e)) from None

    def matcher(self, artifact: Any) -> Matcher:
        if self.name == "grid":
            return GridMatcher(artifact)
        if self.name == "llguidance":
            return LLGMatcher(artifact, self.n_words)
        return XGRMatcher(artifact, self.n_words)


class Refused(Exception):
    pass


def run_instance(
    backend: Backend, artifact: Any, ids: list[int], tbm: list[float] | None, debug: bool = False
) -> bool:
    """Replay ``ids`` then EOS; True when every token and EOS were admitted and accepted."""
    m = backend.matcher(artifact)
    done: list[int] = []
    for token in ids:
        t0 = time.perf_counter_ns()
        m.mask()
        ok = has(m.words, token) and m.accept(token)
        if tbm is not None:
            tbm.append((time.perf_counter_ns() - t0) / 1000)
        if not ok:
            if debug:
                print(f"  {backend.name} refuses token {len(done)} {token}", done[-30:])
            return False
        done.append(token)
    m.mask()
    if debug and not has(m.words, backend.eos):
        print(f"  {backend.name} refuses EOS {backend.eos}")
    return has(m.words, backend.eos)


def summary(stats: dict[str, dict[str, Any]], schemas: int) -> dict[str, Any]:
    """The result row of every engine over the first ``schemas`` schemas."""
    out: dict[str, Any] = {}
    for name, s in stats.items():
        tbm, ttfm = sorted(s["tbm"]), sorted(s["ttfm"])
        out[name] = {
            "schemas": schemas,
            "passing": s["pass"],
            "compile_errors": s["compile"],
            "validation_errors": s["val"],
            "invalidation_errors": s["inval"],
            "tbm_p50_us": percentile(tbm, 50) if tbm else None,
            "tbm_p90_us": percentile(tbm, 90) if tbm else None,
            "tbm_p99_us": percentile(tbm, 99) if tbm else None,
            "ttfm_p50_ms": percentile(ttfm, 50) if ttfm else None,
            "tokens_timed": len(tbm),
        }
    return out


def run(
    vocab_name: str,
    files: list[Path],
    progress: Callable[[dict[str, Any]], None] | None = None,
    engines: Sequence[str] = ENGINES,
) -> dict[str, Any]:
    vocab = VOCABS[vocab_name]()
    encode = real_tokenizer(vocab_name)
    outcomes: dict[str, dict[str, str]] = {}
    backends = {name: Backend(name, vocab, encode) for name in engines}
    stats = {
        name: {"compile": 0, "val": 0, "inval": 0, "pass": 0, "ttfm": [], "tbm": []}
        for name in engines
    }
    for k, path in enumerate(files):
        doc = json.loads(path.read_text())
        tests = []
        for t in doc["tests"]:
            text = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
            ids = encode(text)
            if b"".join(vocab.token_bytes[i] for i in ids) != text.encode():
                continue
            tests.append((bool(t["valid"]), ids))
        for name, backend in backends.items():
            s: dict[str, Any] = stats[name]
            t0 = time.perf_counter_ns()
            try:
                artifact = backend.compile(doc["schema"])
                backend.matcher(artifact).mask()
            except Refused as e:
                s["compile"] += 1
                outcomes.setdefault(path.stem, {})[name] = "compile error: " + str(e)[:160]
                continue
            s["ttfm"].append((time.perf_counter_ns() - t0) / 1e6)
            val = inval = 0
            for valid, ids in tests:
                timed = s["tbm"] if valid else None
                accepted = run_instance(backend, artifact, ids, timed, DEBUG and valid)
                val += valid and not accepted
                inval += (not valid) and accepted
            s["val"] += val
            s["inval"] += inval
            s["pass"] += val == 0 and inval == 0
            verdict = "pass" if val == inval == 0 else f"{val} validation, {inval} invalidation"
            outcomes.setdefault(path.stem, {})[name] = verdict
        print(
            f"{vocab_name} {k + 1}/{len(files)} {path.stem}: {outcomes.get(path.stem)}", flush=True
        )
        if progress is not None:
            progress({**summary(stats, k + 1), "outcomes": outcomes})
    out = summary(stats, len(files))
    out["outcomes"] = outcomes
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="llama3,qwen")
    ap.add_argument("--limit", type=int, default=None, help="the first N schemas by file name")
    ap.add_argument("--every", type=int, default=1, help="every K-th schema by file name")
    ap.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help="a subset of grid,llguidance,xgrammar (write a partial run elsewhere with --out)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        raise SystemExit(f"MaskBench data not found at {DATA} (../shared/data/maskbench)")
    files = sorted(DATA.glob("*.json"))[:: args.every][: args.limit]
    load_before = os.getloadavg()
    result: dict[str, Any] = {}
    outcomes: dict[str, Any] = {}

    def write(name: str, partial: dict[str, Any]) -> None:
        outcomes[name] = partial.pop("outcomes")
        result[name] = partial
        result["meta"] = {
            "schemas_run": {
                k: next(iter(v.values()))["schemas"] for k, v in result.items() if k != "meta"
            },
            "of": len(list(DATA.glob("*.json"))),
            "host": host_description(),
            "load_before": load_before,
            "load_now": os.getloadavg(),
            "outcomes": outcomes,
            "argv": sys.argv[1:],
        }
        args.out.write_text(json.dumps(result, indent=1) + "\n")

    engines = [e for e in args.engines.split(",") if e]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        raise SystemExit(f"unknown engines {unknown}: choose from {', '.join(ENGINES)}")
    tokenizers = [t for t in args.tokenizers.split(",") if t]
    if len(tokenizers) == 1:
        name = tokenizers[0]

        def progress(partial: dict[str, Any]) -> None:
            write(name, partial)

        write(name, run(name, files, progress, engines))
    else:  # each tokenizer in a fresh process: no compile memo carried across
        for name in tokenizers:
            part = args.out.with_name(f".{args.out.stem}.{name}.json")
            child = [sys.executable, __file__, "--tokenizers", name, "--every", str(args.every)]
            child += ["--engines", args.engines, "--out", str(part)]
            child += ["--limit", str(args.limit)] if args.limit is not None else []
            subprocess.run(child, check=True)
            done = json.loads(part.read_text())
            write(name, {**done[name], "outcomes": done["meta"]["outcomes"][name]})
            part.unlink()
    print(json.dumps({k: v for k, v in result.items() if k != "meta"}, indent=1))


if __name__ == "__main__":
    main()
