"""Schema lexicons (``grid_core.lexicon``): the L3 precondition is checked at build.

Every word of W_c must be in R_c (DESIGN.md section 3). The toy CRUD grammar's
``TABLE_NAME`` is ``/[a-z_][a-z0-9_]*/``; each rejected word below is one the
union automaton does not die on, so only the check against the category's own
pattern refuses it: a string literal, a number, a comment, a keyword-free
symbol, and an unfinished string (a live prefix, accepted by nothing).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toy import CRUD

from grid_core.dfa import build_union_dfa
from grid_core.errors import LexiconError
from grid_core.lexicon import NO_NODE, Lexicon, build_lexicon

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
    with pytest.raises(LexiconError) as caught:
        build_lexicon(CRUD, DFA, {"COLUMN_NAME": [b"id", b""]})
    error = caught.value
    assert (error.word, error.category) == (b"", "COLUMN_NAME")
    assert error.reason == "the empty word is not a lexeme"


def test_the_pattern_error_names_the_pattern() -> None:
    with pytest.raises(LexiconError) as caught:
        build_lexicon(CRUD, DFA, {"TABLE_NAME": [b"42"]})
    assert caught.value.reason == "not matched by the pattern of TABLE_NAME"


#: Two categories over one pattern, drawn as the lexicon trie (T = TABLE_NAME,
#: C = COLUMN_NAME; each node: prefix categories / whole-word categories)::
#:
#:     root  T|C / -
#:     |-a   T|C / C
#:     | `-b T|C / T|C
#:     `-b   T   / T
TWO = {"TABLE_NAME": [b"ab", b"b"], "COLUMN_NAME": [b"a", b"ab"]}


def test_two_categories_by_hand() -> None:
    lexicon = build_lexicon(CRUD, DFA, TWO)
    lexicon.check_invariants()
    t, c = 1 << CRUD.terminal_id("TABLE_NAME"), 1 << CRUD.terminal_id("COLUMN_NAME")
    assert lexicon.categories == t | c
    assert lexicon.words == {
        CRUD.terminal_id("TABLE_NAME"): {b"ab", b"b"},
        CRUD.terminal_id("COLUMN_NAME"): {b"a", b"ab"},
    }
    expected = {b"": (t | c, 0), b"a": (t | c, c), b"ab": (t | c, t | c), b"b": (t, t)}
    for path, (prefix, whole) in expected.items():
        node = lexicon.node_of(path)
        assert (lexicon.prefix_cats[node], lexicon.word_cats[node]) == (prefix, whole), path
    assert len(lexicon.children) == len(expected)
    assert lexicon.node_of(b"c") == lexicon.node_of(b"abc") == NO_NODE


def test_the_fingerprint_is_the_word_lists() -> None:
    """Stable under the order words are given in; another word, another fingerprint."""
    lexicon = build_lexicon(CRUD, DFA, TWO)
    assert isinstance(lexicon.fingerprint, str) and len(lexicon.fingerprint) >= 16
    reordered = {name: list(reversed(words)) for name, words in reversed(TWO.items())}
    assert build_lexicon(CRUD, DFA, reordered).fingerprint == lexicon.fingerprint
    other = {**TWO, "COLUMN_NAME": [b"a", b"ab", b"abc"]}
    assert build_lexicon(CRUD, DFA, other).fingerprint != lexicon.fingerprint


def replace(lexicon: Lexicon, **trie: Any) -> Lexicon:
    """A copy of ``lexicon`` with some of its trie's fields (built on first use, so
    not dataclass fields) replaced."""
    other = Lexicon(lexicon.words, lexicon.categories, lexicon.fingerprint)
    for name in ("children", "prefix_cats", "word_cats"):
        other.__dict__[name] = trie.get(name, getattr(lexicon, name))
    return other


def corruptions(lexicon: Lexicon) -> dict[str, Lexicon]:
    """One broken copy of ``lexicon`` per invariant ``check_invariants`` states."""
    prefix, words, kids = list(lexicon.prefix_cats), list(lexicon.word_cats), lexicon.children
    leaf = next(n for n, w in enumerate(words) if w)
    return {
        "short-prefix-table": replace(lexicon, prefix_cats=tuple(prefix[:-1])),
        "word-outside-prefix": replace(
            lexicon, word_cats=(*words[:leaf], words[leaf] | 1, *words[leaf + 1 :])
        ),
        "child-before-parent": replace(lexicon, children=({**kids[0], 0: 0}, *kids[1:])),
        "prefix-missing-a-category": replace(lexicon, prefix_cats=(0, *prefix[1:])),
        "prefix-with-an-extra-category": replace(lexicon, prefix_cats=(prefix[0] | 1, *prefix[1:])),
    }


@pytest.mark.parametrize(
    "broken",
    [
        "short-prefix-table",
        "word-outside-prefix",
        "child-before-parent",
        "prefix-missing-a-category",
        "prefix-with-an-extra-category",
    ],
)
def test_check_invariants_catches_corruption(broken: str) -> None:
    lexicon = build_lexicon(CRUD, DFA, {"TABLE_NAME": [b"orders", b"order_t"]})
    lexicon.check_invariants()
    with pytest.raises(AssertionError):
        corruptions(lexicon)[broken].check_invariants()


def native_trie(lexicon: Lexicon, n_terminals: int) -> tuple[list[Any], list[int], list[int]]:
    native = pytest.importorskip("grid_kernels")
    words = [(t, list(ws)) for t, ws in lexicon.words.items()]
    children, prefix, whole = native.lexicon_trie(words, n_terminals)
    return children, prefix, whole


def test_the_kernels_number_the_trie_alike() -> None:
    """The kernels build an engine's lexicon trie from its words
    (``EngineTables(lexicon_words=...)``); node numbers enter the cache keys of
    identifier positions, so theirs must be these, node for node."""
    lexicon = build_lexicon(CRUD, DFA, TWO)
    want = (list(lexicon.children), list(lexicon.prefix_cats), list(lexicon.word_cats))
    assert native_trie(lexicon, CRUD.n_terminals) == want


_WORD = st.from_regex(rb"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


@given(tables=st.lists(_WORD, max_size=12), columns=st.lists(_WORD, max_size=12))
def test_the_kernels_trie_equals_build_lexicons_on_any_words(
    tables: list[bytes], columns: list[bytes]
) -> None:
    lexicon = build_lexicon(CRUD, DFA, {"TABLE_NAME": tables, "COLUMN_NAME": columns})
    want = (list(lexicon.children), list(lexicon.prefix_cats), list(lexicon.word_cats))
    assert native_trie(lexicon, CRUD.n_terminals) == want
