"""The packages' imports point only down the layering of DESIGN.md section 1.

grid-spec imports nothing of ours; grid-core may use grid-kernels (optional);
grid-kernels' Python shim imports nothing of ours; grid-sql builds on grid-core;
grid-serve builds on grid-core and may use grid-sql (a serving request names its
dialect, role and schema; DESIGN.md forbids only the upward imports: nothing of
ours in grid-spec, no grid-sql or grid-serve in grid-core). Checked over every
module's AST, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"grid_spec", "grid_core", "grid_kernels", "grid_sql", "grid_serve"}
ALLOWED = {
    "grid_spec": set(),
    "grid_core": {"grid_kernels"},
    "grid_kernels": set(),
    "grid_sql": {"grid_core"},
    "grid_serve": {"grid_core", "grid_sql"},
}
SOURCES = {
    "grid_spec": ROOT / "packages/grid-spec/src/grid_spec",
    "grid_core": ROOT / "packages/grid-core/src/grid_core",
    "grid_kernels": ROOT / "packages/grid-kernels/python/grid_kernels",
    "grid_sql": ROOT / "packages/grid-sql/src/grid_sql",
    "grid_serve": ROOT / "packages/grid-serve/src/grid_serve",
}


def top_level_imports(path: Path) -> set[str]:
    """Every top-level package a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def imported_packages(path: Path) -> set[str]:
    return top_level_imports(path) & OURS


@pytest.mark.parametrize("package", sorted(SOURCES))
def test_imports_point_down_the_layering(package: str) -> None:
    bad = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) - ALLOWED[package] - {package})
        for path in sorted(SOURCES[package].rglob("*.py"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from grid_sql import x\n")
    assert imported_packages(module) == {"grid_sql"}


def test_heavy_frameworks_stay_out_of_core() -> None:
    heavy = {"torch", "transformers", "vllm", "numpy"}
    for package in ("grid_spec", "grid_core"):
        for path in SOURCES[package].rglob("*.py"):
            assert not top_level_imports(path) & heavy, path
