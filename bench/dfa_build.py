"""The union DFA built by the kernels against the Python stages, and what it does
to grammar compile time.

Part 1, construction alone: :func:`grid_core.dfa.union_of_nfas` (stages 2-4 of
``grid_core.dfa``, the tables and the fingerprint) from the same compiled NFAs
(stage 1, Python either way, timed once and reported beside), native
(``GRID_KERNELS=1``) and Python (``=0``), each the median of ``--repeat`` runs,
over the terminal sets of the sqlite and postgres dialects (grid-sql) and of
the grammars of the MaskBench sample (``../shared/data/maskbench/sample315``:
each file's ``schema`` through :func:`grid_core.jsonschema.schema_grammar`,
reduced as ``compile_grammar`` reduces it; a schema raising ``GridError`` is
skipped). Every pair of DFAs is compared: a fingerprint or table that differs
counts as a mismatch (must be 0).

Part 2, end to end: :func:`grid_core.compile.compile_grammar` of each schema's
grammar on the Qwen vocabulary (its trie built once), once per mode:
``python`` (``GRID_KERNELS=0``: everything in Python), ``before`` (kernels on,
the union DFA through the Python stages: this change's baseline) and ``after``
(kernels on, the DFA native: the default). Median and p90 per mode; a schema
whose grammar ``compile_grammar`` refuses (an LALR conflict) is left out and
listed.

Output: ``bench/results/dfa_build.json`` with the host description. Run:
``uv run --frozen python bench/dfa_build.py`` (``--every K`` takes every K-th
schema file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from host import host_description
from mask_latency import grid_kernels, percentile

from grid_core import dfa as dfa_module
from grid_core.compile import compile_grammar
from grid_core.dfa import MAX_DFA_STATES, ByteDFA, union_of_nfas
from grid_core.errors import GridError
from grid_core.grammar import Grammar, load_grammar
from grid_core.jsonschema import schema_grammar
from grid_core.regex_bytes import ByteNFA, compile_pattern
from grid_core.trie import build_trie
from grid_core.vocab import qwen
from grid_sql.dialects import get_dialect

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench" / "sample315"
RESULTS = Path(__file__).resolve().parent / "results" / "dfa_build.json"


def _python_union(
    native: ModuleType, names: tuple[str, ...], nfas: Sequence[ByteNFA], max_states: int
) -> ByteDFA:
    """The Python stages in place of the kernels' (the ``before`` mode)."""
    union = dfa_module._UnionNFA(nfas)
    classes = dfa_module._byte_classes([mask for mask, _ in union.edges if mask])
    rows, accepts = dfa_module._subset_construction(union, classes, max_states)
    rows, accepts, start = dfa_module._minimise(rows, accepts, len(classes))
    return dfa_module._tables(names, classes, rows, accepts, start)


@contextmanager
def dfa_in_python() -> Iterator[None]:
    native_union = dfa_module._native_union
    dfa_module._native_union = _python_union
    try:
        yield
    finally:
        dfa_module._native_union = native_union


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def identical(a: ByteDFA, b: ByteDFA) -> bool:
    return (
        a.fingerprint == b.fingerprint
        and a.n_states == b.n_states
        and a.trans == b.trans
        and a.accept == b.accept
        and a.live == b.live
    )


def construction(grammar: Grammar, repeat: int) -> dict[str, Any]:
    """Median seconds of the union from compiled NFAs, native and Python; identity."""
    names = [t.name for t in grammar.terminals]
    nfa_s, nfas = timed(lambda: [compile_pattern(t.name, t.pattern) for t in grammar.terminals])
    runs: dict[str, list[float]] = {"native": [], "python": []}
    built: dict[str, ByteDFA] = {}
    for _ in range(repeat):  # interleaved, so that load drifts hit both alike
        for mode in ("native", "python"):
            with grid_kernels(mode == "native"):
                s, built[mode] = timed(lambda: union_of_nfas(names, nfas, MAX_DFA_STATES))
            runs[mode].append(s)
    native_s, python_s = statistics.median(runs["native"]), statistics.median(runs["python"])
    return {
        "terminals": len(names),
        "nfa_states": sum(n.n_states for n in nfas),
        "dfa_states": built["native"].n_states,
        "nfa_s": nfa_s,
        "native_s": native_s,
        "python_s": python_s,
        "ratio": python_s / native_s,
        "identical": identical(built["native"], built["python"]),
    }


def schema_grammars(every: int) -> Iterator[tuple[str, str, Grammar]]:
    for path in sorted(DATA.glob("*.json"))[::every]:
        try:
            text = schema_grammar(json.loads(path.read_text())["schema"])
            grammar = load_grammar(text, "user").project(lambda _: True, "user")
        except GridError:
            continue
        yield path.name, text, grammar


def dist(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "p90": percentile(values, 90),
        "sum": sum(values),
        "n": len(values),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=1, help="every K-th schema file")
    parser.add_argument("--repeat", type=int, default=3, help="runs per DFA (median)")
    parser.add_argument("--no-compile", action="store_true", help="skip part 2")
    args = parser.parse_args(argv)
    host = host_description()
    assert host["grid_kernels"], "grid-kernels is not loaded: nothing to compare"

    dialects = {}
    for name in ("sqlite", "postgres"):
        grammar = load_grammar(get_dialect(name).grammar_text, name)
        dialects[name] = construction(grammar, max(args.repeat, 5))
        shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in dialects[name].items()}
        print(name, shown)

    schemas: dict[str, dict[str, Any]] = {}
    texts: dict[str, str] = {}
    for name, text, grammar in schema_grammars(args.every):
        schemas[name] = construction(grammar, args.repeat)
        texts[name] = text
    rows = list(schemas.values())
    mismatches = [n for n, r in schemas.items() if not r["identical"]]
    mismatches += [n for n, r in dialects.items() if not r["identical"]]
    dfa_summary = {
        "schemas": len(rows),
        "native_s": dist([r["native_s"] for r in rows]),
        "python_s": dist([r["python_s"] for r in rows]),
        "nfa_s": dist([r["nfa_s"] for r in rows]),
        "ratio_median": statistics.median(r["ratio"] for r in rows),
        "ratio_of_sums": sum(r["python_s"] for r in rows) / sum(r["native_s"] for r in rows),
        "mismatches": len(mismatches),
        "mismatched": mismatches,
    }
    print("schemas", json.dumps(dfa_summary, indent=1))

    compile_summary: dict[str, Any] = {}
    if not args.no_compile:
        vocab = qwen()
        trie = build_trie(vocab)
        modes: dict[str, list[float]] = {"python": [], "before": [], "after": []}
        refused: list[str] = []
        for name, text in texts.items():
            times = {}
            try:
                for mode in modes:
                    with grid_kernels(mode != "python"), ExitStack() as stack:
                        if mode == "before":
                            stack.enter_context(dfa_in_python())
                        t0 = time.perf_counter()
                        compile_grammar(text, vocab, trie=trie)
                        times[mode] = time.perf_counter() - t0
            except GridError:  # an LALR conflict: refused in every mode alike
                refused.append(name)
                continue
            for mode, s in times.items():
                modes[mode].append(s)
        compile_summary = {mode: dist(v) for mode, v in modes.items()}
        compile_summary["refused"] = refused
        compile_summary["ratio_median_before_after"] = statistics.median(
            b / a for b, a in zip(modes["before"], modes["after"], strict=True)
        )
        compile_summary["ratio_median_python_after"] = statistics.median(
            b / a for b, a in zip(modes["python"], modes["after"], strict=True)
        )
        print("compile_grammar (qwen)", json.dumps(compile_summary, indent=1))

    host["loadavg_end"] = os.getloadavg()
    RESULTS.write_text(
        json.dumps(
            {
                "meta": {"host": host, "argv": sys.argv[1:], "repeat": args.repeat},
                "dialects": dialects,
                "schemas": dfa_summary,
                "compile_grammar_qwen": compile_summary,
                "per_schema": schemas,
            },
            indent=1,
        )
        + "\n"
    )
    print("wrote", RESULTS)


if __name__ == "__main__":
    main()
