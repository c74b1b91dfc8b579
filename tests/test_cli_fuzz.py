"""Fuzzing the ``grid`` command's arguments: no input gives a traceback.

``grid check``, ``grid compile``, ``grid audit`` and ``grid ask`` are called in
process (``grid_core.cli.main(argv)``) with argument lists drawn by Hypothesis
from each command's options, values that are nearly right (real files of every
kind, numbers at and past their bounds, known roles and vocabularies) and junk
(any text, bytes that are not UTF-8 as the operating system hands them to
Python, control characters). The property: ``main`` returns an exit status and
never raises; nothing on stderr is a traceback; exit 2 (bad input) is exactly
one line on stderr.

No model is loaded and no heavy artifact is built: the step after a command's
validation is replaced by one that raises :class:`Reached` (``grid ask``: the
check that torch is installed, so validation runs whole; ``grid compile`` and
``grid audit replay``: the vocabulary loaders). A run that gets there counts as
validated. Hypothesis is derandomized (STYLE.md): the same examples every run;
``GRID_FUZZ_EXAMPLES=N`` runs N examples per command instead of 40.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from grid_core.audit import AuditLog
from grid_core.cli import VOCABULARIES, main
from grid_serve import ask
from grid_serve.text2sql import example_database
from grid_sql.schema import example_schema

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(
    derandomize=True,
    deadline=None,
    max_examples=int(os.environ.get("GRID_FUZZ_EXAMPLES", "40")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Reached(Exception):
    """The command got past its validation to the work it was stopped before."""


def _reached(*_: object, **__: object) -> None:
    raise Reached


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Real inputs of every kind, and wrong ones: name -> path."""
    root = tmp_path_factory.mktemp("fuzz")
    log = AuditLog()
    log.close("eos", {"grammar": "0" * 32}, {"mode": 1})
    log.write(root / "audit.jsonl")
    example_schema().save(root / "schema.json")
    (root / "bad.policy.toml").write_text("roles = [unclosed\n")
    (root / "text.txt").write_text("not a database\n" * 50)
    (root / "lexicon.json").write_text(json.dumps({"TABLE_NAME": ["orders"]}))
    (root / "binary.bin").write_bytes(bytes(range(256)))
    policy = resources.files("grid_sql.examples").joinpath("company.policy.toml")
    grammar = ROOT / "packages/grid-core/tests/grammars/crud.lark"
    return {
        "db": str(example_database(root)),
        "policy": str(policy),
        "grammar": str(grammar),
        "log": str(root / "audit.jsonl"),
        "schema": str(root / "schema.json"),
        "bad-policy": str(root / "bad.policy.toml"),
        "text": str(root / "text.txt"),
        "lexicon": str(root / "lexicon.json"),
        "binary": str(root / "binary.bin"),
        "dir": str(root),
        "missing": str(root / "missing" / "file"),
    }


@pytest.fixture(scope="module")
def stopped() -> Iterator[None]:
    """Every step after validation that would load a model or a vocabulary raises Reached."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ask, "require_framework", _reached)
        mp.setattr(ask, "load_framework", _reached)
        for name in list(VOCABULARIES):
            mp.setitem(VOCABULARIES, name, _reached)
        yield


def run(argv: list[str]) -> int | None:
    """``grid ARGV`` in process: the exit status, or None when it reached the stopped step.
    Fails on an exception out of ``main``, a traceback on stderr, or an exit-2 message
    that is not one line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except Reached:
            if currently_in_test_context():
                event("reached the stopped step")
            return None
    text = err.getvalue()
    assert isinstance(code, int), (argv, code)
    if currently_in_test_context():
        event(f"exit {code}")
    assert "Traceback" not in text, (argv, text)
    if code == 2:
        assert text.count("\n") == 1 and ": error: " in text, (argv, text)
    return code


# ---------------------------------------------------------------- strategies

#: Argument bytes as Python receives them (PEP 383: non-UTF-8 bytes as lone surrogates).
os_text = (
    st.binary(max_size=16)
    .filter(lambda b: b"\x00" not in b)
    .map(lambda b: b.decode("utf-8", "surrogateescape"))
)
any_text = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=24
)
numbers = st.sampled_from(
    ["0", "1", "-1", "2", "96", "4096", "4097", "1e6", "1.5", "nan", "inf", "-inf", "1e309",
     "99999999999999999999", "0x10", " 3", "", "abc"]
)  # fmt: skip
junk = st.one_of(os_text, any_text, numbers)


def sql_strategy() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(
            [
                "SELECT 1;",
                "SELECT name FROM employees",
                "SELECT * FROM employees;",
                "DELETE FROM orders;",
                "SELEC name FROM employees;",
                "SELECT " + "+".join(["1"] * 1000) + ";",
                "SELECT " + "(" * 500 + "1" + ")" * 500,
                "SELECT " + "(SELECT " * 200 + "1" + ")" * 200,
                "SELECT '\x01\x1b[2J';",
                "",
            ]
        ),
        junk,
    )


def options(
    files: dict[str, str], table: dict[str, st.SearchStrategy[str]]
) -> st.SearchStrategy[list[str]]:
    """Lists of option tokens. Half the time only ``--option value`` pairs with values of
    the option's kind (command lines that are nearly right); else pairs whose value may be
    a file of another kind or junk, and lone tokens."""
    path = st.sampled_from(sorted(files.values()))

    def pairs(wild: bool) -> st.SearchStrategy[list[str]]:
        return st.sampled_from(sorted(table)).flatmap(
            lambda opt: st.tuples(
                st.just(opt), st.one_of(table[opt], path, junk) if wild else table[opt]
            ).map(list)
        )

    lone = st.one_of(st.sampled_from([*sorted(table), "--help", "-", "--"]), junk).map(
        lambda t: [t]
    )
    nearly_right = st.lists(pairs(False), max_size=3)
    wild = st.lists(st.one_of(pairs(False), pairs(True), lone), max_size=4)
    return st.one_of(nearly_right, wild).map(
        lambda groups: [token for group in groups for token in group]
    )


def inputs(files: dict[str, str]) -> dict[str, st.SearchStrategy[str]]:
    """The options check, compile and ask share, with values of their kind."""
    return {
        "--db": st.sampled_from([files["db"], files["text"], files["missing"], files["dir"]]),
        "--schema": st.sampled_from([files["schema"], files["binary"], files["missing"]]),
        "--policy": st.sampled_from([files["policy"], files["bad-policy"], files["dir"]]),
        "--role": st.sampled_from(["analyst", "clerk", "admin", "intern", "janitor", "x y"]),
        "--dialect": st.sampled_from(["sqlite", "postgres", "mysql"]),
    }


# ---------------------------------------------------------------- the properties


@FUZZ
@given(data=st.data())
def test_grid_check_never_tracebacks(
    files: dict[str, str], stopped: None, data: st.DataObject
) -> None:
    tokens = data.draw(options(files, inputs(files)))
    sql = data.draw(sql_strategy())
    at = data.draw(st.integers(0, len(tokens)))
    code = run(["check", *tokens[:at], sql, *tokens[at:]])
    assert code in (0, 1, 2)


@FUZZ
@given(data=st.data())
def test_grid_compile_never_tracebacks(
    files: dict[str, str], stopped: None, data: st.DataObject
) -> None:
    table = inputs(files) | {"--vocab": st.sampled_from([*sorted(VOCABULARIES), "gpt2"])}
    code = run(["compile", *data.draw(options(files, table))])
    assert code in (None, 0, 2)


@FUZZ
@given(data=st.data())
def test_grid_audit_never_tracebacks(
    files: dict[str, str], stopped: None, data: st.DataObject
) -> None:
    verb = data.draw(st.sampled_from(["verify", "replay", "bogus"]))
    table = {
        "--anchor": st.one_of(st.just("0" * 64), st.text("0123456789abcdef", max_size=70)),
        "--grammar": st.sampled_from([files["grammar"], files["binary"], files["dir"]]),
        "--start": st.sampled_from(["start", "statement", "nope"]),
        "--drop": st.sampled_from(["SEMICOLON", "STAR", "NOPE"]),
        "--lexicon": st.sampled_from([files["lexicon"], files["text"], files["binary"]]),
        "--vocab": st.sampled_from([*sorted(VOCABULARIES), "gpt2"]),
    }
    log = data.draw(st.one_of(st.just(files["log"]), st.sampled_from(sorted(files.values())), junk))
    code = run(["audit", verb, log, *data.draw(options(files, table))])
    assert code in (None, 0, 1, 2)


@FUZZ
@given(data=st.data())
def test_grid_ask_validates_before_any_model_work(
    files: dict[str, str], stopped: None, data: st.DataObject
) -> None:
    """Every run ends in the validation's verdict: one line and exit 2, or Reached (the
    model would load next); never a traceback, never a model."""
    count = st.one_of(numbers, junk)
    table = inputs(files) | {
        "--model": st.sampled_from([files["missing"], files["binary"]]),
        "--max-tokens": count,
        "--threads": count,
        "--temperature": count,
        "--seed": count,
        "--max-rows": count,
        "--audit": st.sampled_from([files["dir"], files["missing"], files["dir"] + "/a.jsonl"]),
        "--limit-wall-time": count,
        "--limit-rows": count,
        "--limit-result-bytes": count,
        "--limit-memory": count,
    }
    question = data.draw(
        st.one_of(
            st.sampled_from(["How many employees are there?", " ", "x" * 4001, "\x01\x02"]),
            junk,
        )
    )
    tokens = data.draw(options(files, table))
    tokens += data.draw(st.lists(st.sampled_from(["--quiet", "--no-repair", "--no-exit-stop"])))
    code = run(["ask", question, *tokens])
    assert code in (None, 0, 2)


def test_the_fuzzed_commands_reach_their_work(files: dict[str, str], stopped: None) -> None:
    """The stops are where the work starts: fails if a valid command line does not get
    there (so that the properties above are not vacuous)."""
    assert run(["ask", "How many employees are there?", "--db", files["db"], "--policy",
                files["policy"], "--limit-rows", "5", "--temperature", "0.7"]) is None  # fmt: skip
    assert run(["compile", "--role", "intern"]) is None
    assert run(["audit", "replay", files["log"], "--grammar", files["grammar"],
                "--vocab", "cl100k"]) is None  # fmt: skip
    assert run(["audit", "verify", files["log"]]) == 0
    assert run(["check", "SELECT name FROM employees;"]) == 0
