"""grid-serve imports without torch: only the framework adapters (torch.py, transformers.py,
model.py) import it, and only when they are imported."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["grid_serve", "grid_serve.ask", "grid_serve.ask_replay", "grid_serve.text2sql"]
)
def test_importing_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
