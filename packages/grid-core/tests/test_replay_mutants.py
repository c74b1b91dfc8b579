"""The judges of ``grid_core.replay`` in issue 14's mutation campaign.

mutmut runs the selected test files in a scratch copy of grid-core, without the
repository's ``bench/`` directory; ``test_replay_audit.py``'s tamper campaign
loads a script from there, so that file cannot be selected whole. Under
``bench/mutation.py`` (``GRID_MUTATION=1``) this module collects its other
tests (re-exported under the same names; the default suite runs them once, in
their own module), which are the ones that drive :func:`grid_core.replay.replay`
and :func:`~grid_core.replay.replay_file`; it then pins what they leave: whole
verdicts (every field, every reason), the forced-span count of the jump-forward
policy, the budget's bound and ``replay_file``'s anchor and guide.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_replay_audit import (
    ENGINE,
    RESERVE,
    SEAL,
    SELECT_LOG,
    AuditLog,
    R,
    drive,
    edited,
    relog,
)
from toy import ANALYST, TOY

from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.replay import ReplayVerdict, replay, replay_file
from grid_core.vocab import Vocabulary

if os.environ.get("GRID_MUTATION") == "1":
    # Under bench/mutation.py only: the default suite runs these in their own module.
    from test_replay_audit import (  # noqa: F401
        test_chain_failure_is_reported_as_such,
        test_eos_stop_with_reserve_steps,
        test_forced_steps_at_singleton_masks_replay,
        test_forgeries_pass_verify_but_not_replay,
        test_generated_logs_replay_bit_identical,
        test_hand_driven_log_replays,
        test_jump_forward_is_rederived,
        test_missing_fingerprint_is_named,
        test_other_artifacts_are_named,
        test_read_of_replayed_log_matches,
        test_replay_does_not_depend_on_the_cache,
        test_replay_verdict_strings,
        test_reserve_tail_replays_and_guards_sampled_steps,
    )


def test_whole_verdict_of_a_chain_failure() -> None:
    lines = SELECT_LOG.lines()
    verdict = replay([lines[0], lines[2], *lines[3:]], ENGINE)
    assert verdict == ReplayVerdict(False, 1, 1, "expected step 1, found 2", "chain")


def test_whole_verdict_of_a_record_after_eos() -> None:
    lines = relog([*R, edited(R[-1], step=len(R))], SEAL)
    verdict = replay(lines, ENGINE)
    n = len(R)
    assert verdict == ReplayVerdict(False, n, n, "a record follows EOS", "replay", "token")


def test_whole_verdict_of_differing_artifacts() -> None:
    real = ENGINE.fingerprints()
    fps = {**real, "dfa": "x", "zz": "y"}
    verdict = replay(relog(R, SEAL, fingerprints=fps), ENGINE)
    detail = f"dfa: log x, engine {real['dfa']}; zz: log y, engine absent"
    assert verdict == ReplayVerdict(
        False, 0, None, f"artifact fingerprints differ ({detail})", "artifacts", None, ("dfa", "zz")
    )


def test_whole_verdicts_of_the_seal() -> None:
    n = len(R)
    verdict = replay(relog(R, SEAL, stop_reason="budget"), ENGINE)
    reason = "stop reason 'budget' denies EOS, the log ends in EOS"
    assert verdict == ReplayVerdict(False, n, None, reason, "seal")
    over = replay(relog(R, SEAL, mode={"mode": 1, "budget": n - 1}), ENGINE)
    assert over == ReplayVerdict(
        False, n, None, f"{n} records exceed the budget of {n - 1}", "seal"
    )


def test_eos_stop_with_reserve_steps_whole_reason() -> None:
    seal = RESERVE.audit.seal or {}
    verdict = replay(relog(RESERVE.audit.records, seal, stop_reason="eos"), ENGINE)
    reason = "stop reason 'eos' but the log has reserve steps"
    assert verdict == ReplayVerdict(False, len(RESERVE.audit.records), None, reason, "seal")


def test_a_log_of_exactly_the_budget_replays() -> None:
    assert replay(relog(R, SEAL, mode={"mode": 1, "budget": len(R)}), ENGINE).ok


ABC = Engine(
    load_grammar('start: "abc" NAME ";"\nNAME: /[xy]+/\n', "abc"),
    Vocabulary.from_spellings(
        "abc", [b"a", b"b", b"c", b"x", b"y", b";", b""], frozenset({6}), (6,)
    ),
)


def abc_lines(kinds: list[str], jump: int) -> list[str]:
    """``abc x ;`` EOS: the masks at steps 0, 1 and 2 are singletons."""
    log: AuditLog = drive(ABC, [0, 1, 2, 3, 5, 6], [*kinds, "sampled", "sampled", "eos"])
    log.close("eos", ABC.fingerprints(), {"mode": 1, "jump_forward": jump})
    return log.lines()


@pytest.mark.parametrize(
    ("kinds", "jump"),
    [
        # A sampled step ends the forced span: the next forced step starts a new one.
        (["forced", "sampled", "forced"], 1),
        # Two forced steps are a span of two.
        (["forced", "forced", "sampled"], 2),
    ],
)
def test_forced_spans_are_counted_from_each_sampled_step(kinds: list[str], jump: int) -> None:
    verdict = replay(abc_lines(kinds, jump), ABC)
    assert verdict == ReplayVerdict(True, 6), verdict


def test_replay_file_passes_the_anchor_and_the_guide(tmp_path: Path) -> None:
    path = tmp_path / "select.jsonl"
    SELECT_LOG.write(path)
    wrong = replay_file(path, ENGINE, "0" * 64)
    assert not wrong.ok and wrong.stage == "chain"
    other: Any = GridGuide(Engine(ANALYST, TOY, {"TABLE_NAME": [b"orders"]}, cache=False))
    verdict = replay_file(path, ENGINE, guide=other)
    assert verdict.stage == "artifacts" and verdict.artifacts
