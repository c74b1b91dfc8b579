"""The native session against the specification, with no Python guide in between.

Every other kernels test compares the native path with the Python one; a fault
both share, or one the Python side masks, passes them. Here the packed row a
native session writes (``fill_next_token_bitmask``: CI, CD and the EOS bits) is
compared with ``grid_spec.Language.mask`` at prefixes of the toy analyst
language, reached by accepting tokens and by rolling back. The toy vocabulary
is small enough for the brute-force specification to run in milliseconds.

Kills the native planted faults ``fill-skips-eos`` and
``rollback-keeps-one-cell`` (``test_planted_faults.py``) on the native path
alone.
"""

from __future__ import annotations

import array

import pytest
from toy import ANALYST, EOS, LEXICON, TOY

from grid_core.guide import Engine
from grid_spec import Language

pytest.importorskip("grid_kernels._native")

from grid_core.kernels import KernelGuide, session

SPEC = Language(ANALYST.to_lark(), LEXICON)
STATEMENT = b"select name from employees where name = 'it''s' and id >= 12 -- x\n;"
#: Cuts of STATEMENT: statement head, mid-keyword, mid-identifier, inside a
#: string, inside a comment, right before and after the final ``;``.
CUTS = [0, 3, 7, 18, 23, 44, 47, 60, 64, len(STATEMENT) - 1, len(STATEMENT)]


def native_mask(guide: KernelGuide) -> set[int]:
    row = array.array("i", bytes(4 * guide.n_words))
    guide.fill_next_token_bitmask(row)
    return {i for i in range(TOY.n_vocab) if row[i // 32] >> (i % 32) & 1}


def spec_mask(prefix: bytes) -> set[int]:
    return SPEC.mask(TOY.token_bytes, TOY.special_ids, EOS, prefix)


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine(ANALYST, TOY, LEXICON)
    if engine.kernel is None:
        pytest.skip("the kernels are switched off (GRID_KERNELS=0)")
    return engine


def test_session_fill_equals_the_spec(engine: Engine) -> None:
    """Byte by byte along STATEMENT, every row equals the spec's mask (EOS included
    exactly at the complete statement)."""
    guide = session(engine)
    for i, b in enumerate(STATEMENT):
        assert native_mask(guide) == spec_mask(STATEMENT[:i]), STATEMENT[:i]
        guide.accept_token(b)
    assert native_mask(guide) == spec_mask(STATEMENT)
    assert EOS in spec_mask(STATEMENT)


@pytest.mark.parametrize("cut", CUTS)
def test_session_fill_after_rollback_equals_the_spec(engine: Engine, cut: int) -> None:
    """Read three bytes past ``cut``, roll them back: the row is the spec's mask at
    ``cut`` (a rollback that kept a cell would show the mask one byte later)."""
    guide = session(engine)
    ahead = STATEMENT[: cut + 3]
    for b in ahead:
        guide.accept_token(b)
    guide.rollback(len(ahead) - cut)
    assert guide.steps == cut
    assert native_mask(guide) == spec_mask(STATEMENT[:cut]), STATEMENT[:cut]
