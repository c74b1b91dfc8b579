"""The host description every benchmark records beside its numbers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def host_description() -> dict[str, Any]:
    """Processor, CPU count, Python, load, and whether grid-kernels is in use."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from grid_core import kernels

    return {
        "processor": platform.processor() or "unknown",
        "cpu_model": model,
        "machine": platform.machine(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "loadavg_start": os.getloadavg(),
        "grid_kernels": kernels.load() is not None,
        "engine": engine_source(),
        "note": "shared 2-core machine: absolute times are noisy; compare ratios from one run",
    }


def engine_source() -> dict[str, Any]:
    """Where the measured engine came from: the grid-core package's directory, the
    loaded grid-kernels binary's digest, and the checkout's commit (a benchmark may
    run a clean export of a commit through PYTHONPATH while the tree is being edited)."""
    import grid_core

    out: dict[str, Any] = {"grid_core": str(Path(grid_core.__file__).parent)}
    try:
        import grid_kernels._native as native

        out["grid_kernels_so_sha256"] = hashlib.sha256(
            Path(native.__file__).read_bytes()
        ).hexdigest()
        out["grid_kernels_so"] = native.__file__
    except ImportError:
        pass
    with contextlib.suppress(OSError):
        out["checkout_head"] = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    out["export"] = os.environ.get("GRID_BENCH_EXPORT", "")
    return out


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """Write a benchmark's summary as indented JSON to ``out`` (its folder made)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}")
