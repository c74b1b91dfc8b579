"""Schema lexicons (``grid_core.lexicon``): the L3 precondition is checked at build.

Every word of W_c must be in R_c (DESIGN.md section 3). The toy CRUD grammar's
``TABLE_NAME`` is ``/[a-z_][a-z0-9_]*/``; each rejected word below is one the
union automaton does not die on, so only the check against the category's own
pattern refuses it: a string literal, a number, a comment, a keyword-free
symbol, and an unfinished string (a live prefix, accepted by nothing).
"""

from __future__ import annotations

import pytest
from toy import CRUD

from grid_core.dfa import build_union_dfa
from grid_core.errors import LexiconError
from grid_core.lexicon import build_lexicon

DFA = build_union_dfa([(t.name, t.pattern) for t in CRUD.terminals])


@pytest.mark.parametrize("word", [b"'x'", b"42", b"--c", b"*", b"'x", b"a-b", b"Emp"])
def test_a_word_outside_its_pattern_is_a_build_error(word: bytes) -> None:
    with pytest.raises(LexiconError) as caught:
        build_lexicon(CRUD, DFA, {"TABLE_NAME": [b"orders", word]})
    assert caught.value.word == word and caught.value.category == "TABLE_NAME"


def test_words_inside_their_pattern_build() -> None:
    """Keywords are words of TABLE_NAME's pattern too: the pick order, not the
    lexicon, keeps ``select`` a keyword."""
    lexicon = build_lexicon(CRUD, DFA, {"TABLE_NAME": [b"orders", b"select", b"_t0"]})
    lexicon.check_invariants()
    t = CRUD.terminal_id("TABLE_NAME")
    assert lexicon.words[t] == {b"orders", b"select", b"_t0"}


def test_the_empty_word_is_a_build_error() -> None:
    with pytest.raises(LexiconError):
        build_lexicon(CRUD, DFA, {"COLUMN_NAME": [b""]})
