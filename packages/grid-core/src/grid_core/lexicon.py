"""Schema lexicons (L3): finite word lists W_c for identifier categories.

A lexicon maps some terminals (the *categories*, e.g. ``TABLE_NAME``) to finite
sets of words. All words of all categories live in one byte trie whose nodes
carry two bitsets over terminal ids:

- ``prefix_cats[n]``: the categories c for which the path to n is a prefix of
  some word of W_c (the remainder is *live* for c), and
- ``word_cats[n]``: the categories c for which the path is a whole word of W_c
  (c is a *candidate* for the lexeme).

The scanner runs this trie beside the union DFA: the pair (DFA state, lexicon
node) is the O(1)-updatable scan state. The DFA decides where lexemes end
(maximal munch over the regular languages R_t); the lexicon decides which
categories are candidates and which remainders are live (DESIGN.md section 3).

Precondition checked at build, never assumed: every word of W_c is in R_c. A
violation raises :class:`~grid_core.errors.LexiconError` naming the word and the
category.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache

from grid_core.dfa import ByteDFA
from grid_core.errors import LexiconError
from grid_core.fingerprint import Encoded, Prefix
from grid_core.grammar import Grammar, TerminalSet

NO_NODE = -1


@dataclass(frozen=True, eq=False)
class Lexicon:
    """Word lists per category terminal, as one trie. Node 0 is the root (empty word).

    The trie (``children``, ``prefix_cats``, ``word_cats``) is built on first use:
    the kernels build their own from ``words``, numbered alike
    (``grid_kernels.lexicon_trie``), so an engine on the native path never needs
    this one unless a Python-side lexer runs."""

    words: Mapping[int, frozenset[bytes]]
    """Terminal id -> W_c."""
    categories: int
    """Bitset of the terminals that have a lexicon (restricted categories)."""
    fingerprint: str

    @cached_property
    def _trie(self) -> tuple[tuple[Mapping[int, int], ...], tuple[int, ...], tuple[int, ...]]:
        return _build_trie(self.words)

    @cached_property
    def children(self) -> tuple[Mapping[int, int], ...]:
        """Per node: byte -> child node."""
        return self._trie[0]

    @cached_property
    def prefix_cats(self) -> tuple[int, ...]:
        return self._trie[1]

    @cached_property
    def word_cats(self) -> tuple[int, ...]:
        return self._trie[2]

    def step(self, node: int, byte: int) -> int:
        """The node after ``byte``, or NO_NODE once no word continues."""
        if node == NO_NODE:
            return NO_NODE
        return self.children[node].get(byte, NO_NODE)

    def node_of(self, data: bytes) -> int:
        node = 0
        for b in data:
            node = self.step(node, b)
        return node

    def check_invariants(self) -> None:
        assert len(self.children) == len(self.prefix_cats) == len(self.word_cats)
        for n, kids in enumerate(self.children):
            assert self.word_cats[n] & ~self.prefix_cats[n] == 0
            below = self.word_cats[n]
            for child in kids.values():
                assert child > n
                below |= self.prefix_cats[child]
            assert below == self.prefix_cats[n]


@lru_cache(maxsize=16)
def _fingerprint_prefix(terminals: TerminalSet) -> Prefix:
    """:func:`lexicon_fingerprint` up to its words, hashed once per terminal set:
    every lexicon of a dialect's projections fingerprints the same patterns."""
    return Prefix(3, "grid.lexicon.v1", [(t.name, t.pattern) for t in terminals])


def check_words(
    grammar: Grammar, dfa: ByteDFA, words: Mapping[str, Collection[bytes]]
) -> dict[int, frozenset[bytes]]:
    """``words`` (terminal name -> W_c) by terminal id, validated: raises
    :class:`LexiconError` for an empty word, or a word that the category's own
    pattern does not match (the error names both)."""
    by_id: dict[int, frozenset[bytes]] = {}
    for name, ws in words.items():
        t = grammar.terminal_id(name)
        by_id[t] = frozenset(ws)
        bad = _first_bad_word(dfa, t, by_id[t])
        if bad == b"":
            raise LexiconError(bad, name, "the empty word is not a lexeme")
        if bad is not None:
            raise LexiconError(bad, name, f"not matched by the pattern of {name}")
    return by_id


@lru_cache(maxsize=256)
def _first_bad_word(dfa: ByteDFA, terminal: int, words: frozenset[bytes]) -> bytes | None:
    """The least word of ``words`` that is no lexeme of ``terminal`` (the empty word
    first), or None. Remembered: a role's words are checked by its schema lexicon
    and again by its engine, and a role rebuilt has the same words."""
    for w in sorted(words):
        if not w or not dfa.matches(w, terminal):
            return w
    return None


def lexicon_fingerprint(grammar: Grammar, by_id: Mapping[int, Collection[bytes]]) -> str:
    """The fingerprint of the lexicon of ``by_id`` (terminal id -> W_c) over
    ``grammar``'s terminals, as :func:`build_lexicon` gives it."""
    # Keyed on the terminal set, not the grammar: one lexicon serves L1 and every projection.
    # fingerprint(("grid.lexicon.v1", [(name, pattern)...], {name: sorted words}))
    return _fingerprint_prefix(grammar.terminals).fingerprint(
        {grammar.terminals[t].name: Encoded.byte_strings(sorted(ws)) for t, ws in by_id.items()}
    )


def build_lexicon(
    grammar: Grammar, dfa: ByteDFA, words: Mapping[str, Collection[bytes]]
) -> Lexicon:
    """Build and validate a lexicon; ``words`` maps terminal names to W_c.

    Raises :class:`LexiconError` for an empty word, or a word that the
    category's own pattern does not match (the error names both).
    """
    by_id = check_words(grammar, dfa, words)
    categories = 0
    for t in by_id:
        categories |= 1 << t
    return Lexicon(by_id, categories, lexicon_fingerprint(grammar, by_id))


def _build_trie(
    by_id: Mapping[int, Collection[bytes]],
) -> tuple[tuple[dict[int, int], ...], tuple[int, ...], tuple[int, ...]]:
    """The trie of a lexicon's words (terminal id -> W_c): children, prefix
    categories and word categories per node, numbered as the node is first
    reached, terminals in increasing id and each one's words in byte order (the
    kernels' ``lexicon_trie`` numbers alike: cache keys carry node numbers)."""
    children: list[dict[int, int]] = [{}]
    prefix: list[int] = [0]
    whole: list[int] = [0]
    for t, ws in sorted(by_id.items()):
        bit = 1 << t
        for w in sorted(ws):
            node = 0
            prefix[0] |= bit
            for b in w:
                nxt = children[node].get(b)
                if nxt is None:
                    nxt = len(children)
                    children[node][b] = nxt
                    children.append({})
                    prefix.append(0)
                    whole.append(0)
                node = nxt
                prefix[node] |= bit
            whole[node] |= bit
    return tuple(children), tuple(prefix), tuple(whole)
