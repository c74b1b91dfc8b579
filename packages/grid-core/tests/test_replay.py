"""Hypothesis-driven random replays: sample any admitted token, advance, repeat.

Over the analyst projection of the CRUD grammar with a byte-complete toy
vocabulary: every step's mask is non-empty (GridGuide raises otherwise), every
admitted token advances, and every replay that ends in EOS is a sentence of L
according to grid-spec. The strategy draws an index into the mask at each step,
taking EOS with high probability when it is offered so that replays finish.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from toy import ANALYST, EOS, LEXICON, TOY, analyst_engine

from grid_core.guide import GridGuide
from grid_spec import Language
from grid_spec.properties import stop_in_language

ENGINE = analyst_engine()
SPEC = Language(ANALYST.to_lark(), LEXICON)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.data())
def test_random_replays_never_wedge_and_finish_in_l(data: st.DataObject) -> None:
    guide = GridGuide(ENGINE)
    text = b""
    for _ in range(60):
        ids = guide.mask_ids()  # raises MaskError if the mask were empty
        assert ids
        if EOS in ids and data.draw(st.integers(0, 3)) > 0:
            guide.accept_token(EOS)
            break
        # Prefer multi-byte tokens half the time, so replays make progress.
        pool = [i for i in ids if i != EOS]
        longer = [i for i in pool if len(TOY.token_bytes[i]) > 1]
        choice = data.draw(st.sampled_from(longer if longer and data.draw(st.booleans()) else pool))
        guide.accept_token(choice)
        text += TOY.token_bytes[choice]
    if guide.is_terminated():
        assert stop_in_language(SPEC, text) == []
    else:
        assert SPEC.is_viable_prefix(text)


def test_replays_can_finish() -> None:
    """The property above is not vacuous: a replay does reach EOS."""
    guide = GridGuide(ENGINE)
    for b in b"select * from orders;":
        guide.accept_token(b)
    assert EOS in guide.mask_ids()
