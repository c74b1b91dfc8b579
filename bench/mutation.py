"""Mutation campaign (issue 14): mutmut over grid-core's modules, cargo-mutants over the crate.

Python: each module is mutated alone by mutmut 3 in a scratch copy of its
package (``src/grid_core`` and its ``tests/``; grid-sql's modules, named
``sql.<module>``, likewise), on the Python path (``GRID_KERNELS=0``), judged by
the test files named in :data:`MODULES` and :data:`SQL_MODULES` (mutmut runs, per mutant, only
the selected tests that reach the mutated function). Rust: cargo-mutants over
the named source files of the crate, judged by the crate's own ``cargo test``
(Rust tests need no Python). Results: ``mutmut.json`` and ``cargo-mutants.json``
under ``--out`` (per module: mutants, killed, survived, timed out, no tests, and
the survivors' names), and a ``README.md`` table of both.

Run through ``nox -s mutation`` (it provides mutmut and cargo-mutants); a whole
campaign takes hours on a 2-core box, so ``--modules`` and ``--rust-files``
pick a part, and the JSON of a part is merged into what earlier runs wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "packages" / "grid-core"
CRATE = ROOT / "packages" / "grid-kernels"

#: grid-core module -> the test files (under packages/grid-core/tests) that judge it.
MODULES: dict[str, list[str]] = {
    "cache": ["test_cache_mutants.py", "test_cache.py"],
    "lexer": [
        "test_lexer_mutants.py",
        "test_guide.py",
        "test_lexicon.py",
        "test_parser.py",
        "test_cache.py",
    ],
    "parser": ["test_parser_mutants.py", "test_parser.py", "test_guide.py"],
    "lalr": ["test_lalr_mutants.py", "test_lalr.py"],
    "walk": ["test_walk_mutants.py", "test_guide.py", "test_parser.py", "test_cache.py"],
    # test_guide_protocol.py skips its native-only tests under GRID_KERNELS=0.
    "guide": [
        "test_guide_mutants.py",
        "test_guide.py",
        "test_cache.py",
        "test_guide_protocol.py",
    ],
    "reserve": ["test_reserve_mutants.py", "test_reserve.py"],
    "audit": ["test_audit_mutants.py", "test_audit.py"],
    # test_replay_mutants.py: test_replay_audit.py's tests less its bench/ campaign
    # (bench/ is not in the scratch copy).
    "replay": ["test_replay_mutants.py", "test_replay.py"],
    "lexicon": ["test_lexicon_mutants.py", "test_lexicon.py", "test_guide.py"],
}
#: grid-sql module -> the test files (under packages/grid-sql/tests) that judge it;
#: named ``sql.<module>`` on the command line and in ``mutmut.json``.
SQL_MODULES: dict[str, list[str]] = {
    "projection": ["test_projection_mutants.py", "test_projection.py"],
    "lexicon": ["test_lexicon_mutants.py", "test_lexicon.py"],
    "checker": ["test_checker_mutants.py", "test_checker.py"],
}
#: The crate's files the issue names, lexer and audit (the 90% target names them), and
#: lru and engine (the memory caps, the walk and row memo keys).
RUST_FILES = [
    "walk", "cache", "chunks", "session", "parser", "scanner", "trie", "lexer", "audit",
    "lru", "engine",
]  # fmt: skip

STATUS = {1: "killed", 3: "killed", 37: "killed", 0: "survived", 5: "no tests", 33: "no tests"}
STATUS |= {k: "timeout" for k in (36, 24, -24, 152, 255)}


def run_for(
    command: list[str],
    cwd: Path,
    limit: float | None,
    env: dict[str, str] | None = None,
    memory: int | None = None,
) -> float:
    """Run ``command`` in its own process group, stopped whole after ``limit``
    seconds (None: no limit; its partial results stay where it wrote them), each of
    its processes held to ``memory`` bytes of address space (a mutant that appends
    forever then fails with MemoryError instead of filling a shared box); the
    seconds it ran."""

    def cap() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    start = time.monotonic()
    run = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=cap,
    )
    try:
        run.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGTERM)
        run.wait()
    return time.monotonic() - start


def run_mutmut(
    module: str,
    tests: list[str],
    limit: float | None,
    timeout_multiplier: float = 4.0,
    package: tuple[Path, str] = (CORE, "grid_core"),
) -> dict[str, object]:
    """mutmut over ``<package>/<module>.py`` (grid-core's unless ``package`` names
    another distribution's folder and import name) in a scratch copy; its counts. Past
    ``limit`` seconds the run is stopped: mutants it did not reach count as ``not
    checked``. A mutant's CPU-time limit is mutmut's ``2 * timeout_multiplier *
    (1 s + the covering tests' time)`` (mutmut's default multiplier, 15, lets an
    endless loop under a 60 s test selection run for half an hour)."""
    folder, name = package
    with tempfile.TemporaryDirectory(prefix=f"mutmut-{module}-") as scratch:
        work = Path(scratch)
        shutil.copytree(
            folder / "src" / name,
            work / "src" / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        shutil.copytree(
            folder / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__")
        )
        selection = "\n".join(f"    tests/{t}" for t in tests)
        (work / "setup.cfg").write_text(
            "[mutmut]\nsource_paths=src\n"
            f"only_mutate=src/{name}/{module}.py\n"
            f"timeout_multiplier={timeout_multiplier}\n"
            f"pytest_add_cli_args_test_selection=\n{selection}\n"
        )
        seconds = run_for(
            [sys.executable, "-m", "mutmut", "run", "--max-children", "2"],
            work,
            limit,
            env={**os.environ, "GRID_KERNELS": "0", "GRID_MUTATION": "1"},
            memory=4 << 30,
        )
        meta_file = work / "mutants" / "src" / name / f"{module}.py.meta"
        meta = json.loads(meta_file.read_text())
    by_key = {
        k: "not checked" if code is None else STATUS.get(code, "suspicious")
        for k, code in meta["exit_code_by_key"].items()
    }
    counts = Counter(by_key.values())
    return {
        "tests": tests,
        "mutants": len(by_key),
        "killed": counts["killed"],
        "survived": counts["survived"],
        "timeout": counts["timeout"],
        "no tests": counts["no tests"],
        "not checked": counts["not checked"],
        "other": sum(v for k, v in counts.items() if k not in {*STATUS.values(), "not checked"}),
        "score": round(
            counts["killed"] / max(1, len(by_key) - counts["no tests"] - counts["not checked"]), 3
        ),
        "seconds": round(seconds),
        "survivors": sorted(k for k, v in by_key.items() if v in ("survived", "no tests")),
        "untested": sorted(k for k, v in by_key.items() if v == "no tests"),
        "timeouts": sorted(k for k, v in by_key.items() if v == "timeout"),
    }


def run_cargo_mutants(
    name: str,
    limit: float | None,
    timeout: float = 300,
    resume: Path | None = None,
    seconds_before: float = 0,
) -> dict[str, object]:
    """cargo-mutants over ``src/<name>.rs``, judged by ``cargo test``; its counts. Past
    ``limit`` seconds the run is stopped: mutants it did not reach count as ``not
    checked``; a mutant whose tests run past ``timeout`` seconds counts as timed out.

    With ``resume`` (a folder holding an earlier run's ``mutants.out`` of this file),
    the run goes on from there with ``--iterate`` (the mutants it caught or found
    unviable are skipped; survivors, timeouts and the mutants it did not reach are
    run, under today's tests) and the counts are over both runs' outcomes, a
    mutant's later outcome winning; ``seconds_before`` is the earlier run's time."""
    listed = subprocess.run(
        ["cargo", "mutants", "--list", "--file", f"src/{name}.rs"],
        cwd=CRATE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    earlier: list[dict[str, Any]] = []
    if resume is not None:
        old_file = resume / "mutants.out" / "outcomes.json"
        earlier = json.loads(old_file.read_text()).get("outcomes", [])
    with tempfile.TemporaryDirectory(prefix=f"mutants-{name}-") as scratch:
        iterate: tuple[str, ...] = ()
        if resume is not None:
            shutil.copytree(resume / "mutants.out", Path(scratch) / "mutants.out")
            iterate = ("--iterate",)
        seconds = run_for(
            [
                *("cargo", "mutants", "--file", f"src/{name}.rs", "--jobs", "1", *iterate),
                *("--timeout", str(timeout), "--output", scratch, "--no-shuffle"),
            ],
            CRATE,
            limit,
        )
        outcomes_file = Path(scratch) / "mutants.out" / "outcomes.json"
        outcomes = json.loads(outcomes_file.read_text()) if outcomes_file.exists() else {}
    latest: dict[str, dict[str, Any]] = {}
    for o in [*earlier, *outcomes.get("outcomes", [])]:
        if o["scenario"] != "Baseline":
            latest[o["scenario"]["Mutant"]["name"]] = o
    results = list(latest.values())
    seconds += seconds_before
    summary = Counter(o["summary"] for o in results)
    checked = len(results) - summary["Unviable"]
    return {
        "mutants": len(listed),
        "killed": summary["CaughtMutant"],
        "survived": summary["MissedMutant"],
        "timeout": summary["Timeout"],
        "unviable": summary["Unviable"],
        "not checked": len(listed) - len(results),
        "score": round(summary["CaughtMutant"] / max(1, checked), 3),
        "seconds": round(seconds),
        "survivors": sorted(
            mutant_name(o["scenario"]["Mutant"]) for o in results if o["summary"] == "MissedMutant"
        ),
        "timeouts": sorted(
            mutant_name(o["scenario"]["Mutant"]) for o in results if o["summary"] == "Timeout"
        ),
    }


def mutant_name(m: dict[str, Any]) -> str:
    """The name a survivor is recorded under: file, line, function, genre, replacement."""
    where = f"{m['file']}:{m['span']['start']['line']}"
    function = (m.get("function") or {}).get("function_name", "")
    return f"{where}: {function}: {m['genre']} {m.get('replacement', '')}"


def rust_regex_escape(text: str) -> str:
    """``text`` as a literal of Rust's regex syntax (which ``--re`` takes)."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$#&-~" else c for c in text)


def listing(name: str) -> list[dict[str, Any]]:
    """cargo-mutants' mutants of ``src/<name>.rs``, in its listing order."""
    listed = subprocess.run(
        ["cargo", "mutants", "--list", "--json", "--file", f"src/{name}.rs"],
        cwd=CRATE,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(listed.stdout))


def run_selected(
    names: list[str], chosen: list[str], limit: float | None, timeout: float
) -> tuple[float, dict[str, Any]]:
    """Run cargo-mutants over the named mutants of the files ``src/<name>.rs`` only
    (one run, one job, listing order); the seconds it ran and its ``outcomes.json``
    (empty if none)."""
    files = [a for name in names for a in ("--file", f"src/{name}.rs")]
    res = [a for text in chosen for a in ("--re", f"^{rust_regex_escape(text)}$")]
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        seconds = run_for(
            [
                *("cargo", "mutants", *files, "--jobs", "1", *res),
                *("--timeout", str(timeout), "--output", scratch, "--no-shuffle"),
            ],
            CRATE,
            limit,
        )
        outcomes_file = Path(scratch) / "mutants.out" / "outcomes.json"
        outcomes = json.loads(outcomes_file.read_text()) if outcomes_file.exists() else {}
    return seconds, outcomes


def together_cargo_mutants(
    plans: dict[str, tuple[str, dict[str, Any]]], limit: float | None, timeout: float = 300
) -> dict[str, dict[str, Any]]:
    """Go on from recorded cargo-mutants results, several files in one run (one
    baseline build): ``plans`` maps a file to its mode and recorded result;
    returns each file's new result.

    - ``"recheck"`` reruns the recorded survivors (less those written down as
      equivalent) and timeouts after new tests: a survivor now caught counts
      as killed, one that now times out as timed out (:func:`fold_recheck`);
    - ``"rest"`` runs the mutants a limited run did not reach: that run tested
      them in listing order (``--no-shuffle``, one job), so it reached the first
      ``mutants - not checked`` of today's listing. Valid only while the
      file's listing is what the recorded run saw;
    - ``"rest+recheck"`` does both."""
    chosen: dict[str, list[str]] = {}
    rest_count: dict[str, int] = {}
    rest_names: dict[str, set[str]] = {}
    for name, (mode, old) in plans.items():
        mutants = listing(name)
        chosen[name] = []
        if "rest" in mode.split("+"):
            assert len(mutants) == old["mutants"], f"the listing of {name} changed"
            rest = mutants[old["mutants"] - old["not checked"] :]
            chosen[name] += [m["name"] for m in rest]
            rest_count[name] = len(rest)
            rest_names[name] = {m["name"] for m in rest}
        if "recheck" in mode.split("+"):
            # Survivors written down as equivalent are not rerun (no test kills them).
            wanted = set(old.get("survivors", ())) - set(old.get("equivalent", {}))
            wanted |= set(old.get("timeouts", ()))
            before = mutants[: old["mutants"] - old.get("not checked", 0)]
            chosen[name] += [m["name"] for m in before if mutant_name(m) in wanted]
    selected = [t for names in chosen.values() for t in names]
    seconds, outcomes = run_selected(list(plans), selected, limit, timeout) if selected else (0, {})
    done = [o for o in outcomes.get("outcomes", []) if o["scenario"] != "Baseline"]
    results = {}
    for name, (mode, old) in plans.items():
        mine = [o for o in done if o["scenario"]["Mutant"]["file"] == f"src/{name}.rs"]
        new = {**old, "survivors": list(old.get("survivors", ()))}
        new["timeouts"] = list(old.get("timeouts", ()))
        fresh = rest_names.get(name, set())
        fold_recheck(new, [o for o in mine if o["scenario"]["Mutant"]["name"] not in fresh])
        mine = [o for o in mine if o["scenario"]["Mutant"]["name"] in fresh]
        if name in rest_count:
            summary = Counter(o["summary"] for o in mine)
            new["killed"] += summary["CaughtMutant"]
            new["survived"] += summary["MissedMutant"]
            new["timeout"] += summary["Timeout"]
            new["unviable"] += summary["Unviable"]
            new["not checked"] = rest_count[name] - len(mine)
            for o in mine:
                key = mutant_name(o["scenario"]["Mutant"])
                if o["summary"] == "MissedMutant":
                    new["survivors"].append(key)
                elif o["summary"] == "Timeout":
                    new["timeouts"].append(key)
        checked = new["mutants"] - new.get("unviable", 0) - new.get("not checked", 0)
        new["score"] = round(new["killed"] / max(1, checked), 3)
        new["seconds"] = old.get("seconds", 0) + round(seconds)
        new[f"{mode} seconds".replace("+", " and ")] = round(seconds)
        new["survivors"].sort()
        new["timeouts"].sort()
        results[name] = new
    return results


def fold_recheck(new: dict[str, Any], outcomes: list[dict[str, Any]]) -> None:
    """Fold a recheck's outcomes into ``new``: each rerun mutant recorded as a
    survivor (or a timeout) moves to what it is now. Names are not unique (file,
    line, function, genre, replacement), so a name is moved once per recorded
    occurrence; a rerun mutant whose name was recorded as neither (one killed
    before that shares a survivor's name) changes nothing."""
    now_of = {"CaughtMutant": "killed", "Timeout": "timeout", "MissedMutant": "survived"}
    for o in outcomes:
        key, summary = mutant_name(o["scenario"]["Mutant"]), o["summary"]
        if key in new["survivors"]:
            was = "survived"
        elif key in new["timeouts"]:
            was = "timeout"
        else:
            continue
        if summary not in now_of or now_of[summary] == was:
            continue
        now = now_of[summary]
        new[was] -= 1
        new[now] += 1
        new["survivors" if was == "survived" else "timeouts"].remove(key)
        if now != "killed":
            new["survivors" if now == "survived" else "timeouts"].append(key)


def keep_equivalent(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Carry the hand-written ``equivalent`` map (survivor -> why it is equivalent)
    of an earlier run over to ``new``, for the survivors that still survive, and
    score ``new`` without them."""
    survivors = set(new.get("survivors", ()))
    equivalent = {k: v for k, v in old.get("equivalent", {}).items() if k in survivors}
    if not equivalent:
        return
    new["equivalent"] = dict(sorted(equivalent.items()))
    score_without_equivalent(new)


def score_without_equivalent(r: dict[str, Any]) -> None:
    """Set ``r``'s score without its equivalent survivors: killed / (checked -
    equivalent), where an equivalent mutant no test reaches (``untested``) is
    already out of ``checked``. Names are not unique: a name recorded twice
    among the survivors is two equivalent mutants."""
    checked = r["mutants"] - r.get("no tests", 0) - r.get("not checked", 0) - r.get("unviable", 0)
    untested = set(r.get("untested", ()))
    equivalent = r.get("equivalent", {})
    counted = sum(1 for k in r["survivors"] if k in equivalent and k not in untested)
    r["score without equivalent"] = round(r["killed"] / max(1, checked - counted), 3)


@contextlib.contextmanager
def locked(out: Path) -> Any:
    """Hold ``out/.lock`` exclusively: concurrent runs (one per module) merge
    into the same JSON files and README one at a time."""
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def merge(
    path: Path, tool: str, version: str, results: dict[str, dict[str, object]]
) -> dict[str, Any]:
    """Merge ``results`` into the JSON at ``path`` (the caller holds :func:`locked`)."""
    data = json.loads(path.read_text()) if path.exists() else {"modules": {}}
    data |= {
        "tool": tool,
        "version": version,
        "host": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs)",
    }
    for module, result in results.items():
        keep_equivalent(data["modules"].get(module, {}), result)
    data["modules"] |= results
    path.write_text(json.dumps(data, indent=2) + "\n")
    return data


def readme(out: Path) -> None:
    lines = [
        "# Mutation campaign (issue 14)",
        "",
        "Written by `bench/mutation.py` (`nox -s mutation`). Python modules: mutmut 3 on",
        "the Python path (`GRID_KERNELS=0`), judged by the test files listed in",
        "`mutmut.json`; Rust files: cargo-mutants, judged by `cargo test`. Score:",
        "killed / (mutants - no tests - not checked - unviable). Only the modules",
        "listed were run, some of them partly (`not checked`: the run's time limit",
        "came first); see `mutmut.json` and `cargo-mutants.json` for every survivor.",
        "",
        "| tool | module | mutants | killed | survived | timed out | no tests / unviable "
        "| not checked | score | without equivalents | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tool, file in (("mutmut", "mutmut.json"), ("cargo-mutants", "cargo-mutants.json")):
        if not (out / file).exists():
            continue
        for module, r in sorted(json.loads((out / file).read_text())["modules"].items()):
            skipped = r.get("no tests", r.get("unviable", 0))
            without = r.get("score without equivalent")
            equivalent = "–" if without is None else f"{without:.0%}"
            lines.append(
                f"| {tool} | {module} | {r['mutants']} | {r['killed']} | {r['survived']} "
                f"| {r['timeout']} | {skipped} | {r.get('not checked', 0)} "
                f"| {r['score']:.0%} | {equivalent} | {r['seconds']} |"
            )
    notes = ""  # a hand-written "## Notes" section of the README survives a rewrite
    if (out / "README.md").exists():
        old = (out / "README.md").read_text()
        if "\n## Notes\n" in old:
            notes = "\n## Notes\n" + old.split("\n## Notes\n", 1)[1]
    (out / "README.md").write_text("\n".join(lines) + "\n" + notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--modules",
        default=",".join([*MODULES, *(f"sql.{m}" for m in SQL_MODULES)]),
        help="grid-core modules, and grid-sql's as sql.<module>",
    )
    parser.add_argument("--rust-files", default=",".join(RUST_FILES), help="crate src/*.rs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mutation")
    parser.add_argument(
        "--module-limit", type=float, default=None, help="seconds per Python module (partial run)"
    )
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=4.0,
        help="mutmut's timeout_multiplier (a mutant's CPU limit: 2 x this x covering tests' time)",
    )
    parser.add_argument(
        "--rust-limit", type=float, default=None, help="seconds per Rust file (partial run)"
    )
    parser.add_argument(
        "--rust-timeout", type=float, default=300, help="cargo-mutants' limit per mutant (s)"
    )
    parser.add_argument(
        "--rust-resume",
        type=Path,
        default=None,
        help="go on from the earlier runs kept in DIR/<file>/mutants.out (--iterate)",
    )
    parser.add_argument(
        "--rust-recheck",
        action="store_true",
        help="rerun only the Rust files' recorded survivors and timeouts (after new tests)",
    )
    parser.add_argument(
        "--rust-together",
        default="",
        help="FILE:MODE,... (recheck, rest or rest+recheck): those files in one cargo-mutants run",
    )
    parser.add_argument(
        "--rust-rest",
        action="store_true",
        help="run only the mutants a recorded limited run did not reach, adding to its counts",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    modules = [m for m in args.modules.split(",") if m]
    for module in modules:
        if module.startswith("sql."):
            name = module.removeprefix("sql.")
            result = run_mutmut(
                name,
                SQL_MODULES[name],
                args.module_limit,
                args.timeout_multiplier,
                (ROOT / "packages" / "grid-sql", "grid_sql"),
            )
        else:
            result = run_mutmut(module, MODULES[module], args.module_limit, args.timeout_multiplier)
        print(f"mutmut {module}: { ({k: v for k, v in result.items() if k != 'survivors'}) }")
        with locked(args.out):
            merge(args.out / "mutmut.json", "mutmut", metadata.version("mutmut"), {module: result})
            readme(args.out)
    if args.rust_together:
        recorded = json.loads((args.out / "cargo-mutants.json").read_text())["modules"]
        plans = {
            name: (mode, recorded[name])
            for name, mode in (p.split(":") for p in args.rust_together.split(","))
        }
        version = subprocess.run(
            ["cargo", "mutants", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        results = together_cargo_mutants(plans, args.rust_limit, args.rust_timeout)
        for name, result in results.items():
            print(
                f"cargo-mutants {name}: { ({k: v for k, v in result.items() if k != 'survivors'}) }"
            )
        with locked(args.out):
            merge(args.out / "cargo-mutants.json", "cargo-mutants", version, results)
            readme(args.out)
        return
    for name in [f for f in args.rust_files.split(",") if f]:
        if args.rust_recheck or args.rust_rest:
            old = json.loads((args.out / "cargo-mutants.json").read_text())["modules"][name]
            mode = "recheck" if args.rust_recheck else "rest"
            plan = {name: (mode, old)}
            result = together_cargo_mutants(plan, args.rust_limit, args.rust_timeout)[name]
        elif args.rust_resume is not None:
            old = json.loads((args.out / "cargo-mutants.json").read_text())["modules"][name]
            result = run_cargo_mutants(
                name,
                args.rust_limit,
                args.rust_timeout,
                resume=args.rust_resume / name,
                seconds_before=old["seconds"],
            )
        else:
            result = run_cargo_mutants(name, args.rust_limit, args.rust_timeout)
        print(f"cargo-mutants {name}: { ({k: v for k, v in result.items() if k != 'survivors'}) }")
        version = subprocess.run(
            ["cargo", "mutants", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        with locked(args.out):
            merge(args.out / "cargo-mutants.json", "cargo-mutants", version, {name: result})
            readme(args.out)


if __name__ == "__main__":
    main()
