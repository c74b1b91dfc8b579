"""``grid demo`` (grid_sql.demo): every role of the example policy, arguments checked
before anything is printed (bad ones one line, exit 2, nothing on stdout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_core.cli import main
from grid_sql.policy import example_policy
from grid_sql.schema import example_schema


def test_the_demo_generates_for_every_role_of_the_example_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One statement per role, each log verified (intern was left out)."""
    roles = list(example_policy(example_schema()).roles)
    assert main(["demo", "--count", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("role ")] == [
        f"role {name}" for name in roles
    ]
    assert f"policy {len(roles)} roles" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{r}-0.jsonl" for r in roles)
    assert out.count(": VALID: ") == len(roles)


BAD_DEMO = {
    "zero-budget": (["--budget", "0"], "argument --budget: must be in [1, 4096], not 0"),
    "budget-under-a-statement": (
        ["--budget", "3"],
        "argument --budget: 3 tokens cannot hold the shortest statement of role analyst (4 "
        "tokens with EOS)",
    ),
    "negative-count": (["--count", "-1"], "argument --count: must be in [1, 1000], not -1"),
    "zero-count": (["--count", "0"], "argument --count: must be in [1, 1000], not 0"),
    "count-not-a-number": (["--count", "x"], "argument --count: not an integer: 'x'"),
}


@pytest.mark.parametrize(("argv", "message"), list(BAD_DEMO.values()), ids=list(BAD_DEMO))
def test_bad_arguments_are_one_line_before_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Fails if anything reaches stdout first (``--budget 0`` printed the header and a
    role, then failed at step 0) or a bad count is taken (``-1`` printed roles)."""
    code = main(["demo", "--out", str(tmp_path), *argv])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"grid demo: error: {message}\n"
    assert list(tmp_path.iterdir()) == []
