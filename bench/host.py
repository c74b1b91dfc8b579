"""The host description every benchmark records beside its numbers."""

from __future__ import annotations

import os
import platform
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
        "note": "shared 2-core machine: absolute times are noisy; compare ratios from one run",
    }
