"""GRID's sessions. Every session runs through uv, in the workspace's own locked
environment (``uv run --frozen``), so what a session tests is what uv.lock says.

    nox -s tests         every package's default suite, and the Rust crate's tests
    nox -s differential  the long bit-identity suites (fast path vs spec, ...) (-m slow)
    nox -s serve         grid-serve's tests with torch and SmolLM2 (its own environment)
    nox -s vllm          grid-serve's vLLM backend against vLLM's own code on CPU (its own env)
    nox -s lint          ruff + mypy --strict on the Python packages; cargo fmt + clippy
    nox -s docs          mkdocs build --strict
    nox -s bench         benchmarks under bench/ (results written to bench/results/)
    nox -s peers         GRID vs llguidance and xgrammar, per-token masks (its own environment)
    nox -s walk-arm      10,000 model-free generations through the decode loop, all in L
    nox -s r-harness     requirement R: guard cost against position, 16,000-token streams
    nox -s rbac          the exhaustive RBAC speller over Qwen (0 bypasses expected)
    nox -s smollm2-50    50 questions through SmolLM2, modes 1 and 2 vs unconstrained
    nox -s spider        Spider dev execution accuracy: unconstrained, mode 1, repair
    nox -s adversarial   issue 15's attacks put to grid ask with SmolLM2 (0 leaks expected)
    nox -s proofs        the Coq proofs (proofs/check.sh)
    nox -s mutation      mutmut over grid-core, cargo-mutants over the crate (hours; parts)
    nox -s ci            what CI runs: tests, serve, vllm, lint, docs, proofs
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["ci"]

PACKAGES = ["grid-spec", "grid-core", "grid-kernels", "grid-sql", "grid-duckdb", "grid-serve"]
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
    session.env["GRID_REQUIRE_REDIS"] = "1"  # likewise redis-server
    # Two workers, a test file to one worker (module fixtures are built once); servers
    # take free ports in their own directories, so workers never share one.
    pytest(session, "-n", "2", "--dist", "loadfile")
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
    # The kernels' fill into a CPU torch tensor needs torch: it runs here.
    session.run(
        *args,
        "pytest",
        "packages/grid-core/tests/test_kernels_session.py",
        "packages/grid-core/tests/test_guide_edges.py",
        "-k",
        "torch",
        external=True,
        env=env,
    )
    session.run(*args, "mypy", "--strict", "packages/grid-serve/src", external=True, env=env)


#: The vLLM release the `vllm` session tests (inside grid-serve[vllm]'s range).
VLLM = "vllm==0.33.0"
#: The requirements of vLLM that its config, sampling params, scheduler and
#: structured-output manager import on CPU (vLLM's own validation imports every
#: structured-output library it supports); their version specifiers are read from
#: the installed vLLM's metadata. The rest is left out: torch (pinned to another
#: release than the lock's, with its CUDA kernels: the workspace's locked torch is
#: used, and vLLM's compiled ops are never loaded on CPU), the GPU kernels
#: (flashinfer, cutlass, tilelang, ...), the audio/video stacks and the API server.
VLLM_CPU_REQUIREMENTS = [
    "aiohttp",
    "cachetools",
    "cbor2",
    "cloudpickle",
    "einops",
    "fastapi",
    "huggingface-hub",
    "llguidance",
    "lm-format-enforcer",
    "msgspec",
    "openai",
    "oss-harmony",
    "outlines-core",
    "partial-json-parser",
    "pillow",
    "prometheus-client",
    "py-cpuinfo",
    "pybase64",
    "pyzmq",
    "tokenizers",
    "transformers",
    "xgrammar",
]
_SELECT_REQUIREMENTS = """
import importlib.metadata, sys
from packaging.requirements import Requirement
want = set(sys.argv[1:])
for text in importlib.metadata.requires("vllm"):
    req = Requirement(text)
    if req.name.lower().replace("_", "-") in want and "extra" not in str(req.marker or ""):
        print(text)
"""


@nox.session(name="smollm2-50")
def smollm2_50(session: nox.Session) -> None:
    """50 questions through SmolLM2 (modes 1 and 2 vs unconstrained), in the serve
    session's environment; writes bench/results/smollm2_50.json."""
    env = {
        "UV_PROJECT_ENVIRONMENT": str(
            Path(session.create_tmp()).parent.parent / "serve" / "serve-venv"
        )
    }
    session.run(
        "uv",
        "run",
        "--frozen",
        "--group",
        "serve",
        "python",
        "bench/smollm2_50.py",
        *session.posargs,
        external=True,
        env=env,
    )


@nox.session
def spider(session: nox.Session) -> None:
    """Spider dev execution accuracy (bench/spider_ex.py): unconstrained, mode 1 and
    repair (grid ask's default language, with and without its repair pass) over the
    972 executable dev questions of ../shared/data/spider, in the serve
    session's environment with the ``gemma`` group (``-- --model gemma3-270m`` runs
    the second model; hours on 2 CPUs; ``-- --resume`` continues a run); writes
    bench/results/spider_ex/. The serve session runs its 10-question smoke."""
    env = {
        "UV_PROJECT_ENVIRONMENT": str(
            Path(session.create_tmp()).parent.parent / "serve" / "serve-venv"
        )
    }
    args = ("uv", "run", "--frozen", "--group", "serve", "--group", "gemma")
    args += ("python", "bench/spider_ex.py")
    session.run(*args, *session.posargs, external=True, env=env)


@nox.session
def adversarial(session: nox.Session) -> None:
    """The adversarial suite's model cases (bench/adversarial.py): grid ask with SmolLM2,
    each case in its own process, in the serve session's environment; writes
    bench/results/adversarial.json. The model-free cases are tests/test_adversarial.py."""
    env = {
        "UV_PROJECT_ENVIRONMENT": str(
            Path(session.create_tmp()).parent.parent / "serve" / "serve-venv"
        )
    }
    args = ("uv", "run", "--frozen", "--group", "serve", "python", "bench/adversarial.py")
    session.run(*args, *session.posargs, external=True, env=env)


@nox.session
def vllm(session: nox.Session) -> None:
    """grid-serve's vLLM backend driven by vLLM's own scheduler and structured-output
    manager on CPU (packages/grid-serve/tests/vllm, GRID_REQUIRE_VLLM=1: no skips).

    vLLM is not in uv.lock (the root pyproject excludes it: its pins of torch,
    transformers, xgrammar and llguidance clash with the workspace's, and it drags
    CUDA-only packages). Its own environment is the `serve` one (torch, transformers,
    SmolLM2), synced from the lock, plus vLLM installed without dependencies and
    :data:`VLLM_CPU_REQUIREMENTS` at the versions vLLM declares.
    """
    venv = Path(session.create_tmp()).parent / "vllm-venv"
    env = {"UV_PROJECT_ENVIRONMENT": str(venv)}
    python = str(venv / "bin" / "python")
    session.run("uv", "sync", "--frozen", "--group", "serve", external=True, env=env)
    # --no-config: the workspace's pyproject excludes vllm from every resolution.
    pip = ("uv", "pip", "install", "--no-config", "--python", python)
    session.run(*pip, "--no-deps", VLLM, external=True)
    selected = session.run(
        python, "-c", _SELECT_REQUIREMENTS, *VLLM_CPU_REQUIREMENTS, silent=True, external=True
    )
    requirements = [line for line in str(selected).splitlines() if line.strip()]
    if len(requirements) != len(VLLM_CPU_REQUIREMENTS):
        session.error(f"{VLLM} declares {requirements} of {VLLM_CPU_REQUIREMENTS}")
    session.run(*pip, *requirements, external=True)
    session.run(
        python,
        "-m",
        "pytest",
        "packages/grid-serve/tests/vllm",
        *session.posargs,
        external=True,
        env={"GRID_REQUIRE_VLLM": "1"},
    )
    # Type-checked against vLLM's own annotations (the lint session sees vllm as Any).
    session.run(python, "-m", "mypy", "--strict", "packages/grid-serve/src", external=True)


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
    # The crate's API docs: a broken intra-doc link is an error.
    session.run(
        "cargo",
        "doc",
        "--quiet",
        "--no-deps",
        "--manifest-path",
        CRATE,
        env={"RUSTDOCFLAGS": "-D warnings"},
        external=True,
    )


@nox.session
def docs(session: nox.Session) -> None:
    uv_run(session, "mkdocs", "build", "--strict", "--site-dir", session.create_tmp() + "/site")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; they print medians and ratios and write JSON under bench/results/."""
    uv_run(session, "python", "bench/mask_latency.py", *session.posargs)


@nox.session
def peers(session: nox.Session) -> None:
    """GRID against llguidance and xgrammar (bench/peers.py), in its own environment:
    xgrammar requires torch, which the main one stays free of."""
    env = {"UV_PROJECT_ENVIRONMENT": str(Path(session.create_tmp()).parent / "peers-venv")}
    args = ("uv", "run", "--frozen", "--group", "peers", "python", "bench/peers.py")
    session.run(*args, *session.posargs, external=True, env=env)


@nox.session
def maskbench(session: nox.Session) -> None:
    """MaskBench's JSON Schemas: GRID, llguidance and xgrammar (bench/maskbench.py), in the
    peers environment."""
    peers_venv = Path(session.create_tmp()).parent.parent / "peers" / "peers-venv"
    env = {"UV_PROJECT_ENVIRONMENT": str(peers_venv), "PYTHONUNBUFFERED": "1"}
    env |= {pool: "1" for pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    args = ("uv", "run", "--frozen", "--group", "peers", "python", "bench/maskbench.py")
    session.run(*args, *session.posargs, external=True, env=env)


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
    """Requirement R: guard cost per token against position at fixed nesting depths
    (20 runs x 16,000 tokens per stream, about 9 minutes here). The native guide's
    arm: ``nox -s r-harness -- --guide native --out bench/results/r_harness_native.json``."""
    uv_run(
        session,
        "python",
        "bench/r_harness.py",
        "--out",
        "bench/results/r_harness.json",
        *session.posargs,
    )


@nox.session(name="shared-cache")
def shared_cache(session: nox.Session) -> None:
    """The shared tier on Redis (issue 20): four replica processes on disjoint shards of
    Spider dev, with and without it (bench/shared_cache.py; needs redis-server)."""
    session.run("bash", "scripts/system-deps.sh", external=True)
    uv_run(
        session,
        "python",
        "bench/shared_cache.py",
        "--out",
        "bench/results/shared_cache.json",
        *session.posargs,
    )


@nox.session
def rbac(session: nox.Session) -> None:
    """RBAC at mask level: the exhaustive speller over Qwen, every role of the example
    policy, with SQLite's authorizer on the witnesses (about 5 minutes here)."""
    uv_run(
        session,
        "python",
        "bench/rbac_speller.py",
        "--out",
        "bench/results/rbac_speller.json",
        *session.posargs,
    )


@nox.session
def mutation(session: nox.Session) -> None:
    """The mutation campaign (bench/mutation.py): mutmut 3 over grid-core's modules on the
    Python path, cargo-mutants over the crate; results under bench/results/mutation/.
    The whole campaign takes hours on 2 cores: --modules / --rust-files run a part."""
    session.run("cargo", "install", "--locked", "--quiet", "cargo-mutants", external=True)
    uv_run(session, "--with", "mutmut==3.8.1", "python", "bench/mutation.py", *session.posargs)


@nox.session
def proofs(session: nox.Session) -> None:
    session.run("bash", "proofs/check.sh", external=True)


@nox.session
def ci(session: nox.Session) -> None:
    """What .ci/run runs: the default tests, grid-serve with its model and with vLLM, lint,
    docs, proofs."""
    for name in ("tests", "serve", "vllm", "lint", "docs", "proofs"):
        session.notify(name)
