"""Planted faults: the default suite kills a fixed, named set of bugs (issue 14).

A guarantee is only as good as the test that fails when it breaks. Each
:class:`Fault` below is one small bug, named after what it breaks, with the
default-suite tests that must catch it. For each fault the test applies it
alone, runs its catchers in a subprocess and asserts they fail; a control run
of every catcher on the same machinery without any fault asserts they pass
(so a failure is the fault's doing, not the harness's).

Mechanism, and why:

- **Python faults** are a one-place source edit (``old`` -> ``new``) applied to
  a temporary copy of the package, which is put first on ``PYTHONPATH``; the
  catchers run with ``GRID_KERNELS=0``, so the Python path is caught by itself,
  never only by a native-vs-Python parity test. ``old`` must occur exactly once:
  when the code moves, the fault fails loudly instead of silently planting
  nothing. A textual edit reads like the bug it is (a mutant); monkeypatching
  would need a copy of each whole function.
- **Native faults** cannot be edited into a copy without a rebuild per fault
  (minutes each, with LTO). They are compiled in once instead: the cargo
  feature ``planted-faults`` (never in a wheel; without it
  ``grid_kernels::planted`` is a constant ``false``) makes ``planted(name)``
  read ``GRID_PLANTED_FAULT``. This module builds that extension once per run
  (a debug build into ``target/planted``: about 40 s cold on the 2-core box,
  seconds when incremental) and puts it first on ``PYTHONPATH``; each fault is
  then one environment variable. The trade-off: the fault sites are named
  ``if`` s in the crate's source (two, in ``session.rs``), and the build costs
  CI time once; in exchange every native fault is one legible line and all of
  them share one build. Their catchers compare the native session with
  ``grid_spec`` (``test_kernels_spec.py``), not with the Python path.

The table (seconds: the catchers' subprocess with the fault applied, most of it
interpreter and pytest start-up; the 2-core box, under load from other jobs;
the whole module, build incremental, about 75 s). Catchers are in
``packages/grid-core/tests/``:

============================== ====== ====================================================== ===
fault                          path   caught by                                              s
============================== ====== ====================================================== ===
ident-key-drops-allowed        python test_cache ..._with_two_lexicon_categories[python]     4.0
cd-entry-cached-as-ci          python test_guide test_worked_example                         2.7
eos-admitted-mid-lexeme        python test_guide test_eos_iff_complete                       2.8
reduce-chain-from-raw-rows     python test_parser test_allowed_simulates_the_reduce_chain    2.9
audit-field-left-out-of-hash   python test_audit test_every_logged_record_parses_back,       4.8
                                      test_tampering_is_reported[blocked_count]
reserve-off-by-one             python test_reserve test_toy_reserve_and_completion           4.7
lexicon-word-outside-its-regex python test_lexicon test_a_word_outside_its_pattern_...       3.9
alias-class-collapsed          python test_guide test_alias_ids_share_a_verdict              4.0
rollback-keeps-one-cell        python test_guide test_rollback_and_fork_are_persistent       3.5
normal-form-key-drops-v        python test_cache test_the_normal_form_key_keeps_v            5.0
t2-hit-across-schemas          python test_cache test_two_schemas_share_t2_but_no_...        6.1
ident-key-drops-allowed-       python test_cache_key_groups (grid-sql)                      7.8
key-groups                            ..._grid_core_key_walk_alike[smollm2]
t2-hit-across-schemas-         python the same                                               8.2
key-groups
normal-form-key-drops-v-       python the same                                               8.8
key-groups
fill-skips-eos                 native test_kernels_spec test_session_fill_equals_the_spec    5.5
rollback-keeps-one-cell        native test_kernels_spec ..._after_rollback_equals_...        3.3
============================== ====== ====================================================== ===

Catchers added with this module (for the raw-row, two-schema and ``v`` faults
no existing catcher was found in their module's tests; the full suite was not
run per fault): ``test_parser.py``
(a grammar LALR(1) only by merging, whose raw row over-approximates),
``test_lexicon.py``, ``test_kernels_spec.py`` (the native row against the
spec), the ``pending-comment-opener`` EOS case, and in ``test_cache.py`` two
schemas sharing T2 and a grammar whose DFA state does not determine ``v``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TESTS = "packages/grid-core/tests"
CORE = ROOT / "packages" / "grid-core" / "src" / "grid_core"
CRATE = ROOT / "packages" / "grid-kernels"
GROUPS = "packages/grid-sql/tests/test_cache_key_groups.py"


@dataclass(frozen=True)
class Fault:
    """One planted bug and the tests that must catch it.

    ``file`` (relative to ``grid_core``) and ``old`` -> ``new`` for a Python
    fault; ``file`` empty for a native one (its name is the ``planted()`` site).
    ``catchers`` are pytest node ids under ``packages/grid-core/tests``, or from
    the repository root when they start with ``packages/``.
    """

    name: str
    catchers: tuple[str, ...]
    file: str = ""
    old: str = ""
    new: str = ""

    @property
    def native(self) -> bool:
        return not self.file

    def nodeids(self) -> list[str]:
        """Catchers as node ids from the repository root (one that names its
        package, ``packages/...``, is taken as it is)."""
        return [c if c.startswith("packages/") else f"{TESTS}/{c}" for c in self.catchers]


FAULTS = [
    Fault(
        "ident-key-drops-allowed",
        ("test_cache.py::test_cache_on_equals_cache_off_with_two_lexicon_categories[python]",),
        "guide.py",
        "IdentKey(namespace, root, form, allowed, self.lexicon.fingerprint)",
        "IdentKey(namespace, root, form, 0, self.lexicon.fingerprint)",
    ),
    Fault(
        "cd-entry-cached-as-ci",
        ("test_guide.py::test_worked_example",),
        "walk.py",
        "        if not ignored >> t & 1:\n            cd.append((c, t, tail))",
        "        if not ignored >> t & 1:\n            ci.append(c)",
    ),
    Fault(
        "eos-admitted-mid-lexeme",
        ("test_guide.py::test_eos_iff_complete",),
        "lexer.py",
        "        node = self.finalize(config)\n",
        "        node = self.finalize(config) or (config.node if config.size else None)\n",
    ),
    Fault(
        "reduce-chain-from-raw-rows",
        ("test_parser.py::test_allowed_simulates_the_reduce_chain",),
        "parser.py",
        "                if self._run(node, t, False):",
        "                if True:  # the raw row: every non-error action",
    ),
    Fault(
        "audit-field-left-out-of-hash",
        (
            "test_audit.py::test_every_logged_record_parses_back",
            "test_audit.py::test_tampering_is_reported",
        ),
        "audit.py",
        '                self.token.to_bytes(4, "big"),\n'
        '                self.blocked_count.to_bytes(4, "big"),\n',
        '                self.token.to_bytes(4, "big"),\n',
    ),
    Fault(
        "reserve-off-by-one",
        ("test_reserve.py::test_toy_reserve_and_completion",),
        "reserve.py",
        "return INF if cost >= INF else cost - self._lead_discount(config.node)",
        "return INF if cost >= INF else cost - self._lead_discount(config.node) - 1",
    ),
    Fault(
        "lexicon-word-outside-its-regex",
        ("test_lexicon.py",),
        "dfa.py",
        "return state != DEAD and bool(self.accept[state] >> terminal & 1)",
        "return state != DEAD",
    ),
    Fault(
        "alias-class-collapsed",
        ("test_guide.py::test_alias_ids_share_a_verdict",),
        "guide.py",
        "out.extend(ids[off[n] : off[n + 1]])",
        "out.extend(ids[off[n] : off[n] + 1])",
    ),
    Fault(
        "rollback-keeps-one-cell",
        ("test_guide.py::test_rollback_and_fork_are_persistent",),
        "guide.py",
        "        for _ in range(n):\n            assert step.previous is not None",
        "        for _ in range(max(n - 1, 0)):\n            assert step.previous is not None",
    ),
    Fault(
        "normal-form-key-drops-v",
        ("test_cache.py::test_the_normal_form_key_keeps_v[python]",),
        "guide.py",
        "        namespace = self.shared.namespace if self.shared is not None else 0\n",
        "        namespace = self.shared.namespace if self.shared is not None else 0\n"
        "        form = form if isinstance(form, bytes) else (*form[:3], b'')\n",
    ),
    Fault(
        "t2-hit-across-schemas",
        ("test_cache.py::test_two_schemas_share_t2_but_no_identifier_entry[python]",),
        "guide.py",
        "IdentKey(namespace, root, form, allowed, self.lexicon.fingerprint)",
        "IdentKey(namespace, root, form, allowed, '')",
    ),
    # The same three key faults, caught by OBL-KEY1 itself: configurations of
    # real corpora grouped by key, the members' uncached walks compared.
    *(
        Fault(
            f"{name}-key-groups",
            (f"{GROUPS}::test_members_of_a_grid_core_key_walk_alike[smollm2]",),
            "guide.py",
            old,
            new,
        )
        for name, old, new in (
            (
                "ident-key-drops-allowed",
                "IdentKey(namespace, root, form, allowed, self.lexicon.fingerprint)",
                "IdentKey(namespace, root, form, 0, self.lexicon.fingerprint)",
            ),
            (
                "t2-hit-across-schemas",
                "IdentKey(namespace, root, form, allowed, self.lexicon.fingerprint)",
                "IdentKey(namespace, root, form, allowed, '')",
            ),
            (
                "normal-form-key-drops-v",
                "        namespace = self.shared.namespace if self.shared is not None else 0\n",
                "        namespace = self.shared.namespace if self.shared is not None else 0\n"
                "        form = form if isinstance(form, bytes) else (*form[:3], b'')\n",
            ),
        )
    ),
    Fault("fill-skips-eos", ("test_kernels_spec.py::test_session_fill_equals_the_spec",)),
    Fault(
        "rollback-keeps-one-cell",
        ("test_kernels_spec.py::test_session_fill_after_rollback_equals_the_spec",),
    ),
]


def fault_id(fault: Fault) -> str:
    return f"{fault.name}-native" if fault.native else fault.name


def plant(fault: Fault | None, into: Path) -> Path:
    """A copy of grid_core under ``into`` with ``fault`` applied; the directory
    to put first on ``PYTHONPATH``."""
    shutil.copytree(CORE, into / "grid_core", ignore=shutil.ignore_patterns("__pycache__"))
    if fault is not None:
        target = into / "grid_core" / fault.file
        source = target.read_text()
        assert source.count(fault.old) == 1, f"{fault.name}: its site moved in {fault.file}"
        target.write_text(source.replace(fault.old, fault.new))
    return into


@pytest.fixture(scope="module")
def planted_kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """grid_kernels built with the ``planted-faults`` feature (debug), as a package
    directory to put first on ``PYTHONPATH``."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build the planted-faults kernels")
    target = CRATE / "target" / "planted"
    env = {**os.environ, "PYO3_PYTHON": sys.executable}
    subprocess.run(
        [
            *("cargo", "build", "--quiet", "--lib", "--features", "python,planted-faults"),
            *("--target-dir", str(target)),
        ],
        cwd=CRATE,
        env=env,
        check=True,
    )
    out = tmp_path_factory.mktemp("planted-kernels")
    package = out / "grid_kernels"
    shutil.copytree(
        CRATE / "python" / "grid_kernels",
        package,
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )
    shutil.copy(target / "debug" / "libgrid_kernels.so", package / "_native.abi3.so")
    return out


def run_catchers(nodeids: list[str], path: Path, env: dict[str, str]) -> tuple[int, str, float]:
    """Run the given tests in a fresh interpreter with ``path`` first on the import
    path: (pytest's exit code, its output's tail, seconds)."""
    env = {**os.environ, **env, "PYTHONPATH": str(path)}
    env.pop("PYTEST_ADDOPTS", None)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *nodeids],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, (done.stdout + done.stderr)[-3000:], time.monotonic() - start


def check_planted_copy(path: Path, module: str) -> None:
    """The subprocess imports ``module`` from ``path``, not from the installed tree."""
    probe = subprocess.run(
        [sys.executable, "-c", f"import {module}; print({module}.__file__)"],
        env={**os.environ, "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip().startswith(str(path)), probe.stdout


def test_the_faults_are_a_fixed_named_set() -> None:
    assert len(FAULTS) >= 12
    assert len({fault_id(f) for f in FAULTS}) == len(FAULTS)
    assert {f.native for f in FAULTS} == {False, True}


@pytest.mark.parametrize("backend", ["python", "native"])
def test_the_catchers_pass_without_a_fault(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Control: on the same machinery (a copied grid_core, the planted-faults
    build), with no fault switched on, every catcher passes."""
    faults = [f for f in FAULTS if f.native == (backend == "native")]
    nodeids = list(dict.fromkeys(n for f in faults for n in f.nodeids()))
    if backend == "python":
        path, env = plant(None, tmp_path), {"GRID_KERNELS": "0"}
        check_planted_copy(path, "grid_core")
    else:
        path, env = request.getfixturevalue("planted_kernels"), {"GRID_KERNELS": "1"}
        check_planted_copy(path, "grid_kernels._native")
    code, tail, _ = run_catchers(nodeids, path, env)
    assert code == 0, tail


@pytest.mark.parametrize("fault", FAULTS, ids=fault_id)
def test_the_planted_fault_is_caught(
    fault: Fault, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """With ``fault`` applied alone, its catchers fail (pytest exit code 1: tests
    failed, not an error collecting or running them)."""
    if fault.native:
        path = request.getfixturevalue("planted_kernels")
        env = {"GRID_KERNELS": "1", "GRID_PLANTED_FAULT": fault.name}
    else:
        path, env = plant(fault, tmp_path), {"GRID_KERNELS": "0"}
    code, tail, seconds = run_catchers(fault.nodeids(), path, env)
    print(f"{fault_id(fault)}: caught in {seconds:.1f} s")
    assert code == 1, f"{fault_id(fault)} survived its catchers (exit {code}):\n{tail}"
