"""The worked example of the workspace issue, verdict by verdict, on the spec.

Grammar: ``grammars/crud.lark`` projected to role ``analyst`` (only ``select``),
W_TABLE = {employees, employees_public, orders}; ``salaries`` exists but is not
in the lexicon.
"""

from __future__ import annotations

import pytest
from sql_corpus import GRAMMARS

from grid_spec import Language

LEXICON = {"TABLE_NAME": [b"employees", b"employees_public", b"orders"]}


@pytest.fixture(scope="module")
def analyst() -> Language:
    return Language((GRAMMARS / "crud_analyst.lark").read_text(), LEXICON)


@pytest.mark.parametrize(
    ("prefix", "token", "admitted"),
    [
        pytest.param(b"select * from emplo", b"yees", True, id="completes-table-name"),
        pytest.param(b"select * from emplo", b"y", True, id="one-byte-step"),
        pytest.param(b"select * from emplo", b"yees where", True, id="crosses-terminal-boundary"),
        pytest.param(b"select * from emplo", b"yer", False, id="leaves-lexicon"),
        pytest.param(b"select * from ", b"sal", False, id="table-outside-lexicon"),
        pytest.param(b"", b"insert", False, id="verb-insert-projected-out"),
        pytest.param(b"", b"update", False, id="verb-update-projected-out"),
        pytest.param(b"", b"delete", False, id="verb-delete-projected-out"),
        pytest.param(b"", b"select", True, id="verb-select-kept"),
        pytest.param(b"select * from ", b"ord", True, id="other-table-in-lexicon"),
    ],
)
def test_token_verdicts(analyst: Language, prefix: bytes, token: bytes, admitted: bool) -> None:
    vocab = [token, b"<eos>"]
    assert (0 in analyst.mask(vocab, {1}, 1, prefix)) is admitted
    assert analyst.is_viable_prefix(prefix + token) is admitted


@pytest.mark.parametrize(
    ("prefix", "eos"),
    [
        pytest.param(b"select * from emplo", False, id="mid-identifier"),
        pytest.param(b"select * from employees", False, id="needs-semicolon"),
        pytest.param(b"select * from employees;", True, id="complete"),
        pytest.param(b"select * from employees; ", True, id="trailing-whitespace"),
        pytest.param(b"select * from employees where", False, id="dangling-where"),
    ],
)
def test_eos_verdicts(analyst: Language, prefix: bytes, eos: bool) -> None:
    assert (1 in analyst.mask([b"x", b"<eos>"], {1}, 1, prefix)) is eos
    assert analyst.in_language(prefix) is eos


def test_full_grammar_admits_every_verb() -> None:
    full = Language((GRAMMARS / "crud.lark").read_text(), LEXICON)
    for verb in (b"select", b"insert", b"update", b"delete"):
        assert full.is_viable_prefix(verb)
    assert full.in_language(b"delete from orders;")
    assert not full.in_language(b"delete from salaries;")
