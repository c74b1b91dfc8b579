"""GridGuide: the worked example, DESIGN.md section 5, rollback, fork, errors."""

from __future__ import annotations

import pytest
from toy import EOS, TOY, analyst_engine, token

from grid_core.errors import GuideError
from grid_core.guide import Engine, GridGuide

ENGINE = analyst_engine()


def guide_after(text: bytes, engine: Engine = ENGINE) -> GridGuide:
    """A guide that has read ``text`` one byte token at a time."""
    g = GridGuide(engine)
    for b in text:
        g.accept_token(b)
    return g


@pytest.mark.parametrize(
    ("prefix", "spelling", "admitted"),
    [
        pytest.param(b"select * from emplo", b"yees", True, id="completes-table-name"),
        pytest.param(b"select * from emplo", b"y", True, id="one-byte"),
        pytest.param(b"select * from emplo", b"yees where", True, id="crosses-terminal-boundary"),
        pytest.param(b"select * from emplo", b"yer", False, id="leaves-lexicon"),
        pytest.param(b"select * from ", b"sal", False, id="table-outside-lexicon"),
        pytest.param(b"", b"insert", False, id="insert-projected-out"),
        pytest.param(b"", b"u", False, id="update-projected-out"),
        pytest.param(b"", b"d", False, id="delete-projected-out"),
        pytest.param(b"", b"select", True, id="select-kept"),
    ],
)
def test_worked_example(prefix: bytes, spelling: bytes, admitted: bool) -> None:
    g = guide_after(prefix)
    assert (token(spelling) in g.mask_ids()) is admitted


def test_alias_ids_share_a_verdict() -> None:
    assert TOY.alias_classes() == {b" from": (258, 269)}
    ids = set(guide_after(b"select *").mask_ids())
    assert {258, 269} <= ids
    assert not {258, 269} & set(guide_after(b"select * from").mask_ids())


@pytest.mark.parametrize(
    ("prefix", "eos"),
    [
        pytest.param(b"select * from emplo", False, id="partial-table-name"),
        pytest.param(b"select * from employees", False, id="needs-semicolon"),
        pytest.param(b"select * from employees;", True, id="complete"),
        pytest.param(b"select * from employees; --done", True, id="trailing-comment"),
        # "-" is live (a prefix of a comment) but no lexeme: EOS waits for the lexeme.
        pytest.param(b"select * from employees; -", False, id="pending-comment-opener"),
        pytest.param(b"select * from employees;\n", True, id="trailing-newline"),
        pytest.param(b"select * from employees where", False, id="dangling-where"),
    ],
)
def test_eos_iff_complete(prefix: bytes, eos: bool) -> None:
    g = guide_after(prefix)
    assert g.eos_allowed() is eos
    assert (EOS in g.mask_ids()) is eos
    assert g.is_complete() is eos


def test_eos_terminates_and_nothing_follows() -> None:
    g = guide_after(b"select * from orders;")
    g.accept_token(EOS)
    assert g.is_terminated()
    with pytest.raises(GuideError):
        g.accept_token(token(b" "))
    with pytest.raises(GuideError):
        g.mask_ids()


def test_token_outside_mask_raises_and_changes_nothing() -> None:
    g = guide_after(b"select * from ")
    before = g.config
    with pytest.raises(GuideError):
        g.accept_token(token(b"sal"))
    with pytest.raises(GuideError):
        g.accept_token(EOS)
    with pytest.raises(GuideError):
        g.accept_token(10**6)
    assert g.config is before


def test_rollback_and_fork_are_persistent() -> None:
    g = guide_after(b"select * from")
    fork = g.fork()
    g.accept_token(token(b" emplo"))
    g.accept_token(token(b"yees"))
    assert g.steps == len(b"select * from") + 2
    assert fork.steps == len(b"select * from")
    g.rollback(2)
    assert g.config is fork.config
    assert g.mask_ids() == fork.mask_ids()
    with pytest.raises(GuideError):
        g.rollback(g.steps + 1)


def test_interned_stacks_make_equal_prefixes_identical() -> None:
    a = guide_after(b"select * from orders")
    b = guide_after(b"select  *  from orders")
    assert a.config.node is b.config.node
    assert a.config.node.hash == b.config.node.hash != 0


def test_packed_bitmask_layout() -> None:
    g = guide_after(b"select * from employees;")
    words = g.mask()
    assert len(words) == (TOY.n_vocab + 31) // 32
    admitted = {i for i in range(TOY.n_vocab) if words[i // 32] >> (i % 32) & 1}
    assert admitted == set(g.mask_ids())
    assert EOS in admitted
