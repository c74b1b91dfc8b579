"""grid-serve is an empty layer so far: it imports, and it keeps torch optional."""

import subprocess
import sys


def test_importing_grid_serve_does_not_import_torch() -> None:
    code = "import sys, grid_serve; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
