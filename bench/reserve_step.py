"""Mode 1's reserve check per token: the kernels' against grid-core's (issue #13).

The mode-1 loop (``grid_core.decode``) prices every token it may take: it
advances a configuration beside the guide by the token and reads the reserve
there. With the native guide that is ``grid_core.kernels.NativeReserve`` (one
call into Rust each); with the Python guide, ``grid_core.decode.EngineReserve``
(a Python lexer step and ``ReserveTable.reserve``). This bench times both, on
the same configurations, through those two sources (the calls the loop makes):

- each example role of the SQLite dialect over the example schema, with
  SmolLM2's vocabulary (the embedded model's);
- ``--walks`` seeded random walks of ``--steps`` tokens over the mask; at each
  configuration, up to ``--fan`` admitted tokens (evenly spaced ids): advance
  and reserve, timed per token, native then Python;
- two passes: *first sight* (the walk's first visit: memos empty, as a new
  request meets them) and *warm* (the same configurations again).

Every pair of answers must be equal (the run stops otherwise). Prints medians,
p90 and the Python/native ratio; writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from host import host_description, write_summary

from grid_core.decode import EngineReserve
from grid_core.guide import Engine, GridGuide
from grid_core.kernels import NativeReserve
from grid_core.lexer import Config
from grid_core.vocab import smollm2
from grid_serve.text2sql import RoleEngines, example_database
from grid_sql.database import database_for
from grid_sql.policy import example_policy


def quantiles(xs: Sequence[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"p50_us": statistics.median(s), "p90_us": s[int(0.9 * (len(s) - 1))]}


def measure(engine: Engine, walks: int, steps: int, fan: int) -> dict[str, list[float]]:
    """Times (µs) of advance + reserve per token, both sources, both passes."""
    eos, clock = set(engine.vocab.eos_ids), time.perf_counter
    out: dict[str, list[float]] = {
        f"{s}_{p}": [] for s in ("native", "python") for p in ("first", "warm")
    }
    python_src = EngineReserve(GridGuide(engine))
    native_src: NativeReserve | None = None
    points: list[tuple[Config, object, list[int]]] = []
    for w in range(walks):
        rng = random.Random(w)
        python, native = GridGuide(engine), engine.guide()
        source = native.reserve_source()
        assert isinstance(source, NativeReserve), "the native guide reads the reserve in Rust"
        native_src = native_src or source
        for _ in range(steps):
            ids = [i for i in python.mask_ids() if i not in eos]
            if not ids:
                break
            points.append((python.config, source.start(), ids[:: max(1, len(ids) // fan)]))
            t = rng.choice(ids)
            python.accept_token(t)
            native.accept_token(t)
    assert native_src is not None
    for phase in ("first", "warm"):
        for config, state, tokens in points:
            for t in tokens:
                t0 = clock()
                a = native_src.reserve(native_src.advance(state, t))
                t1 = clock()
                b = python_src.reserve(python_src.advance(config, t))
                t2 = clock()
                if a != b:
                    sys.exit(f"reserves differ after token {t}: native {a}, python {b}")
                out[f"native_{phase}"].append((t1 - t0) * 1e6)
                out[f"python_{phase}"].append((t2 - t1) * 1e6)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--walks", type=int, default=4)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--fan", type=int, default=40)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results/reserve_step.json")
    args = p.parse_args(argv)
    db = example_database(Path(tempfile.mkdtemp(prefix="grid-reserve-step-")))
    schema = database_for(db).snapshot(db)
    policy = example_policy(schema)
    engines = RoleEngines(schema, policy, smollm2())
    rows = []
    for role in sorted(policy.roles):
        engine = engines[role].engine
        assert engine.kernel is not None, "grid-kernels is not loaded (GRID_KERNELS=0?)"
        times = measure(engine, args.walks, args.steps, args.fan)
        row: dict[str, object] = {"role": role, "tokens": len(times["native_first"])}
        for phase in ("first", "warm"):
            nat, py = quantiles(times[f"native_{phase}"]), quantiles(times[f"python_{phase}"])
            row[phase] = {"native": nat, "python": py, "ratio_p50": py["p50_us"] / nat["p50_us"]}
            print(
                f"{role:8s} {phase:5s} native p50 {nat['p50_us']:6.2f} p90 {nat['p90_us']:7.2f} us"
                f" | python p50 {py['p50_us']:7.2f} p90 {py['p90_us']:8.2f} us"
                f" | python/native p50 {py['p50_us'] / nat['p50_us']:5.1f}x",
                flush=True,
            )
        rows.append(row)
    summary = {
        "benchmark": "reserve_step",
        "command": "uv run python bench/reserve_step.py " + " ".join(sys.argv[1:]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "vocab": "SmolLM2 (49,152 ids)",
        "host": host_description(),
        "rows": rows,
    }
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
