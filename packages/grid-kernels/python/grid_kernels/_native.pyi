"""Type stub for the private native module (checked with mypy.stubtest).

Vocabulary as in grid-core: a *stack* is its list of LALR states, bottom first;
a *remainder* is the bytes of the lexeme in progress; an *allowed set* is an
int bitset over terminals with bit T for ``$END``; a *CD entry* is ``(trie
node, emitted terminal, requeued tail bytes)``. Every caller mistake raises
``ValueError`` (bad values, sizes, ids, stacks) or ``TypeError`` (wrong kinds
of object, read-only or wrongly typed buffers) before anything is written.
"""

from collections.abc import Mapping, Sequence
from typing import final

from typing_extensions import Buffer

__all__ = ["ABI_VERSION", "EngineTables", "TrieTables"]

ABI_VERSION: int
"""Version of the table and buffer layout shared with grid_core."""

@final
class TrieTables:
    """A validated copy of a ``grid_core.trie.TokenTrie`` plus the vocabulary's
    size and EOS ids; one per tokenizer, shared by every :class:`EngineTables`."""

    def __new__(
        cls,
        *,
        edge: Sequence[int],
        token: Sequence[int],
        size: Sequence[int],
        alias_offset: Sequence[int],
        alias_ids: Sequence[int],
        n_vocab: int,
        eos_ids: Sequence[int],
    ) -> TrieTables: ...
    @property
    def n_nodes(self) -> int: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_words(self) -> int:
        """Words of a packed bitmask: ``ceil(n_vocab / 32)``."""
    @property
    def max_depth(self) -> int:
        """Bytes of the longest spelling."""
    @property
    def eos_ids(self) -> list[int]: ...

@final
class EngineTables:
    """One grammar's validated tables (union DFA, LALR(1), lexicon, pick order,
    ignored set) over a shared :class:`TrieTables`. Immutable; any number of
    threads may use one at once. Every walk releases the GIL."""

    def __new__(
        cls,
        *,
        trie: TrieTables,
        n_terminals: int,
        dfa_trans: Sequence[int],
        dfa_accept: Sequence[int],
        dfa_live: Sequence[int],
        action: Sequence[int],
        goto: Sequence[int],
        n_nonterminals: int,
        rule_lhs: Sequence[int],
        rule_len: Sequence[int],
        lexicon_children: Sequence[Mapping[int, int]],
        lexicon_prefix_cats: Sequence[int],
        lexicon_word_cats: Sequence[int],
        lexicon_categories: int,
        pick_order: Sequence[int],
        ignored: int,
    ) -> EngineTables: ...
    @property
    def trie(self) -> TrieTables: ...
    @property
    def n_terminals(self) -> int: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_words(self) -> int: ...
    def walk(
        self, node: int, pending: bytes, allowed: int, include_self: bool = False
    ) -> tuple[list[int], list[tuple[int, int, bytes]]]:
        """``grid_core.walk.walk_from``: CI trie nodes and CD entries of the
        subtree at ``node`` whose path ends ``pending``, under ``allowed``."""
    def allowed(self, states: Sequence[int]) -> int:
        """``Parser.allowed``: the terminals the stack can take after reductions."""
    def shift(self, states: Sequence[int], terminal: int) -> list[int]:
        """``Parser.shift``: the stack after reducing and shifting ``terminal``."""
    def advance(
        self, states: Sequence[int], remainder: bytes, data: bytes
    ) -> tuple[list[int], bytes] | None:
        """``Lexer.advance``: (stack, remainder) after reading ``data``, or None."""
    def eos_allowed(self, states: Sequence[int], remainder: bytes) -> bool:
        """``Lexer.eos_allowed``: the remainder finalizes and ``$END`` is accepted."""
    def compute_mask(
        self, states: Sequence[int], remainder: bytes
    ) -> tuple[list[int], list[int], bool, int, int]:
        """``Engine.compute_mask`` of an engine without cache, field for field:
        (ci_ids, cd_ids, eos, cd_entries, cd_classes). ``ci_ids`` are the root
        walk's ids ascending; ``cd_ids`` each CD sub-walk's ids ascending, in
        evaluation order."""
    def fill_bitmask(
        self, ci_ids: Sequence[int], cd_ids: Sequence[int], eos: bool, out: Buffer
    ) -> int:
        """Write the given token ids (and the EOS ids when ``eos``) into
        ``out``, clearing the rest: ``Engine.pack`` layout (bit i % 32 of
        word i // 32 is token i). ``out`` is a writable C-contiguous buffer of
        ``n_words`` native 4-byte ints or ``4 * n_words`` bytes. Returns the
        number of ids set."""
    def fill_next_token_bitmask(self, states: Sequence[int], remainder: bytes, out: Buffer) -> int:
        """:meth:`compute_mask` then :meth:`fill_bitmask`, without returning to
        Python in between. Returns the number of ids set (0: empty mask)."""
