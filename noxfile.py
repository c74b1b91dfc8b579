"""GRID's sessions. Every session runs through uv, in the workspace's own locked
environment (``uv run --frozen``), so what a session tests is what uv.lock says.

    nox -s tests         every package's default suite, and the Rust crate's tests
    nox -s differential  the long bit-identity suites (fast path vs spec, ...) (-m slow)
    nox -s serve         grid-serve's tests with torch and SmolLM2 (its own environment)
    nox -s lint          ruff + mypy --strict on the Python packages; cargo fmt + clippy
    nox -s docs          mkdocs build --strict
    nox -s bench         benchmarks under bench/ (results written to bench/results/)
    nox -s proofs        the Coq proofs (proofs/check.sh)
    nox -s ci            what CI runs: tests, serve, lint, docs, proofs
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["ci"]

PACKAGES = ["grid-spec", "grid-core", "grid-kernels", "grid-sql", "grid-serve"]
PYTHON_SOURCES = [f"packages/{p}/src" for p in PACKAGES if p != "grid-kernels"]
CRATE = "packages/grid-kernels/Cargo.toml"


def uv_run(session: nox.Session, *args: str) -> None:
    session.run("uv", "run", "--frozen", *args, external=True)


def pytest(session: nox.Session, *extra: str) -> None:
    for package in PACKAGES:
        uv_run(session, "pytest", f"packages/{package}/tests", *extra, *session.posargs)
    uv_run(session, "pytest", "tests", *extra, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's default test suite, then the crate's Rust tests."""
    session.run("bash", "scripts/system-deps.sh", external=True)
    session.env["GRID_REQUIRE_POSTGRES"] = "1"  # installed above: a missing server fails
    pytest(session)
    session.run("cargo", "test", "--quiet", "--manifest-path", CRATE, external=True)


@nox.session
def serve(session: nox.Session) -> None:
    """grid-serve with the real model stack (torch, transformers, SmolLM2), in its own
    environment so that the main one stays free of torch."""
    env = {"UV_PROJECT_ENVIRONMENT": str(Path(session.create_tmp()).parent / "serve-venv")}
    args = ("uv", "run", "--frozen", "--group", "serve")
    session.run(
        *args, "pytest", "packages/grid-serve/tests", *session.posargs, external=True, env=env
    )
    session.run(*args, "mypy", "--strict", "packages/grid-serve/src", external=True, env=env)


@nox.session
def differential(session: nox.Session) -> None:
    """The long cross-implementation suites (marked slow)."""
    pytest(session, "-m", "slow")


@nox.session
def lint(session: nox.Session) -> None:
    uv_run(session, "ruff", "check", "packages", "tests", "bench", "noxfile.py")
    uv_run(session, "ruff", "format", "--check", "packages", "tests", "bench", "noxfile.py")
    for src in PYTHON_SOURCES:
        uv_run(session, "mypy", "--strict", src)
    uv_run(session, "mypy", "--strict", "packages/grid-kernels/python")
    uv_run(session, "python", "-m", "mypy.stubtest", "grid_kernels._native")
    session.run("cargo", "fmt", "--check", "--manifest-path", CRATE, external=True)
    session.run(
        "cargo",
        "clippy",
        "--quiet",
        "--manifest-path",
        CRATE,
        "--all-targets",
        "--",
        "-D",
        "warnings",
        external=True,
    )


@nox.session
def docs(session: nox.Session) -> None:
    uv_run(session, "mkdocs", "build", "--strict", "--site-dir", session.create_tmp() + "/site")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; they print medians and ratios and write JSON under bench/results/."""
    uv_run(session, "python", "bench/mask_latency.py", *session.posargs)


@nox.session(name="walk-arm")
def walk_arm(session: nox.Session) -> None:
    """Termination at scale: 10,000 model-free generations, every stop in L."""
    uv_run(
        session,
        "python",
        "bench/walk_arm.py",
        "--n",
        "10000",
        "--vocab",
        "cl100k:4096",
        "--replay-every",
        "100",
        "--rise-configs",
        "600",
        "--rise-vocab",
        "cl100k",
        "--out",
        "bench/results/walk_arm.json",
        *session.posargs,
    )


@nox.session(name="r-harness")
def r_harness(session: nox.Session) -> None:
    """Requirement R: guard cost per token against position at fixed nesting depths."""
    uv_run(
        session,
        "python",
        "bench/r_harness.py",
        "--runs",
        "8",
        "--depths",
        "1,8,32",
        "--inlist-depths",
        "8",
        "--string-n",
        "16000",
        "--string-runs",
        "1",
        "--out",
        "bench/results/r_harness.json",
        *session.posargs,
    )


@nox.session
def proofs(session: nox.Session) -> None:
    session.run("bash", "proofs/check.sh", external=True)


@nox.session
def ci(session: nox.Session) -> None:
    """What .ci/run runs: the default tests, grid-serve with its model, lint, docs, proofs."""
    for name in ("tests", "serve", "lint", "docs", "proofs"):
        session.notify(name)
