"""Load a script of the repository's ``bench/`` directory as a module, for the tests
that run a benchmark at default-suite size.

A script run as ``python bench/x.py`` has ``bench/`` on ``sys.path`` (that is how it
imports ``host``); loaded from a file location it does not, so it is added here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load_bench(name: str) -> ModuleType:
    """The module ``bench/<name>.py``, executed once per call under ``sys.modules[name]``."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
