"""The packed token trie: every token spelling of a vocabulary in one DFS array.

DESIGN.md section 6: one DFS-contiguous array of packed nodes (edge byte, token
id, subtree size) plus an alias table, one per tokenizer fingerprint. The trie
walk (a DFS carrying a scan state per frame) skips a rejected subtree whole by
jumping ``size[i]`` nodes ahead, which is why the layout is preorder.

Layout, for ``n`` nodes (node 0 is the root, the empty spelling):

- ``edge[i]``: the byte on the edge into node ``i`` (0 for the root);
- ``token[i]``: the smallest token id whose spelling is the path to ``i``, or -1;
- ``size[i]``: nodes in the subtree of ``i``, ``i`` included. The subtree of
  ``i`` is ``i .. i + size[i] - 1``; its children are ``c0 = i + 1``,
  ``c1 = c0 + size[c0]``, ... while ``c < i + size[i]``, sorted by edge byte
  ascending (so preorder is the lexicographic order of spellings);
- ``alias_ids[alias_offset[i]:alias_offset[i + 1]]``: every id spelled by the
  path to ``i``, ascending (the alias class of DESIGN.md section 2; empty for
  an inner node that spells no token).

Only non-special ids are in the trie, and each exactly once; special ids (whose
spelling is empty) never are. The arrays are flat machine integers so that a
native kernel can take them over without conversion.

Build: the distinct spellings sorted bytewise are the spelling-bearing nodes in
preorder; one pass with a stack of open ancestors emits the missing inner nodes
and closes each subtree (fixing its size) when the next spelling leaves it.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from grid_core.fingerprint import fingerprint
from grid_core.vocab import Vocabulary

__all__ = ["TokenTrie", "build_trie"]

# Bumped whenever the layout or the build order changes: part of the fingerprint.
_LAYOUT = "grid.token-trie/1"

assert array.array("i").itemsize == 4, "the packed trie needs a 32-bit C int"


def _le_bytes(a: array.array[int]) -> bytes:
    """The array's contents in little-endian order, whatever the host's order."""
    if sys.byteorder == "little":
        return a.tobytes()
    swapped = array.array(a.typecode, a)
    swapped.byteswap()
    return swapped.tobytes()


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """DFS-contiguous packed trie over the non-special, non-empty spellings.

    Node 0 is the root (empty spelling). See the module header for the layout.
    """

    edge: array.array[int]
    token: array.array[int]
    size: array.array[int]
    alias_offset: array.array[int]
    alias_ids: array.array[int]
    n_vocab: int
    vocab_fingerprint: str
    fingerprint: str

    @property
    def n_nodes(self) -> int:
        return len(self.edge)

    def ids_at(self, node: int) -> Sequence[int]:
        """Every token id spelled by the path to ``node``, ascending (empty if none)."""
        return self.alias_ids[self.alias_offset[node] : self.alias_offset[node + 1]]

    def children(self, node: int) -> Iterator[int]:
        """The children of ``node``, by edge byte ascending."""
        size = self.size
        child, end = node + 1, node + size[node]
        while child < end:
            yield child
            child += size[child]

    def child(self, node: int, byte: int) -> int:
        """The child of ``node`` along ``byte``, or -1."""
        edge, size = self.edge, self.size
        child, end = node + 1, node + size[node]
        while child < end:
            e = edge[child]
            if e == byte:
                return child
            if e > byte:
                break
            child += size[child]
        return -1

    def find(self, spelling: bytes) -> int:
        """The node whose path spells ``spelling`` (0 for ``b""``), or -1."""
        node = 0
        for byte in spelling:
            node = self.child(node, byte)
            if node < 0:
                return -1
        return node

    def spelling_of(self, node: int) -> bytes:
        """The path from the root to ``node`` (a walk down from the root: O(depth x fan-out))."""
        out = bytearray()
        current = 0
        while current != node:
            for c in self.children(current):
                if c <= node < c + self.size[c]:
                    out.append(self.edge[c])
                    current = c
                    break
            else:
                raise IndexError(f"node {node} is not in the trie")
        return bytes(out)

    def check_invariants(self, vocab: Vocabulary | None = None) -> None:
        """Assert the layout; with ``vocab``, also that it spells exactly that vocabulary.

        Checks DFS contiguity (every subtree nests in its parent's and the
        children of a node tile its subtree), children sorted strictly by byte,
        subtree sizes, the alias table (sorted, ``token`` is its minimum), and
        every id at most once. With ``vocab``: every non-special non-empty id
        appears exactly once, at the node spelling it, and no special id does.
        """
        n = len(self.edge)
        assert n >= 1
        assert len(self.token) == len(self.size) == n
        assert len(self.alias_offset) == n + 1
        assert self.alias_offset[0] == 0 and self.alias_offset[n] == len(self.alias_ids)
        assert self.edge[0] == 0 and self.size[0] == n
        assert self.token[0] == -1 and self.alias_offset[1] == 0, "the root spells no token"
        # Open ancestors: (node, end of its subtree, edge byte of its last child so far).
        stack: list[list[int]] = [[0, n, -1]]
        path = bytearray()
        seen = bytearray(self.n_vocab)
        spells = vocab.token_bytes if vocab is not None else None
        for i in range(1, n):
            while stack[-1][1] <= i:
                assert stack[-1][1] == i, "subtrees must tile their parent"
                stack.pop()
                path.pop()
            parent = stack[-1]
            byte, end = self.edge[i], i + self.size[i]
            assert self.size[i] >= 1 and end <= parent[1], f"node {i} overflows its parent"
            assert byte > parent[2], f"children of node {parent[0]} not sorted at {i}"
            parent[2] = byte
            stack.append([i, end, -1])
            path.append(byte)
            lo, hi = self.alias_offset[i], self.alias_offset[i + 1]
            assert lo <= hi
            if lo == hi:
                assert self.token[i] == -1
                assert self.size[i] > 1, f"leaf {i} spells no token"
                continue
            ids = self.alias_ids[lo:hi]
            assert self.token[i] == ids[0]
            for k, t in enumerate(ids):
                assert 0 <= t < self.n_vocab
                assert k == 0 or ids[k - 1] < t
                assert not seen[t], f"token {t} appears twice"
                seen[t] = 1
                if spells is not None:
                    assert spells[t] == path, f"token {t} misplaced at node {i}"
        while len(stack) > 1:
            assert stack[-1][1] == n
            stack.pop()
        if vocab is not None:
            assert self.vocab_fingerprint == vocab.fingerprint
            assert self.n_vocab == len(vocab.token_bytes)
            for t, b in enumerate(vocab.token_bytes):
                in_trie = bool(b) and t not in vocab.special_ids
                assert seen[t] == in_trie, f"token {t} {'missing' if in_trie else 'present'}"

    def __repr__(self) -> str:
        return (
            f"TokenTrie(n_nodes={len(self.edge)}, n_vocab={self.n_vocab}, "
            f"vocab_fingerprint={self.vocab_fingerprint!r}, fingerprint={self.fingerprint!r})"
        )


def build_trie(vocab: Vocabulary) -> TokenTrie:
    """Pack the non-special, non-empty spellings of ``vocab`` into a :class:`TokenTrie`.

    The packing runs in the kernels when they are loaded (``grid_kernels.pack_trie``,
    about 10x faster on a 150k vocabulary) and in :func:`pack_python` otherwise;
    both give the same arrays, bit for bit (``tests/test_trie.py``).
    """
    from grid_core import kernels  # the kernels module sits above this one

    native = kernels.load()
    if native is None:
        edge, token, size, alias_offset, alias_ids = pack_python(vocab)
    else:
        packed = native.pack_trie(list(vocab.token_bytes), sorted(vocab.special_ids))
        edge, token, size, alias_offset, alias_ids = (
            _from_le(code, raw) for code, raw in zip("Biiii", packed, strict=True)
        )
    digest = fingerprint(
        (
            _LAYOUT,
            vocab.fingerprint,
            _le_bytes(edge),
            _le_bytes(token),
            _le_bytes(size),
            _le_bytes(alias_offset),
            _le_bytes(alias_ids),
        )
    )
    return TokenTrie(
        edge=edge,
        token=token,
        size=size,
        alias_offset=alias_offset,
        alias_ids=alias_ids,
        n_vocab=len(vocab.token_bytes),
        vocab_fingerprint=vocab.fingerprint,
        fingerprint=digest,
    )


def _from_le(typecode: str, raw: bytes) -> array.array[int]:
    """An array of ``typecode`` from little-endian bytes, in the host's order."""
    a = array.array(typecode)
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def pack_python(
    vocab: Vocabulary,
) -> tuple[
    array.array[int], array.array[int], array.array[int], array.array[int], array.array[int]
]:
    """The trie's arrays ``(edge, token, size, alias_offset, alias_ids)``, in Python
    (the reference; see the module header's *Build*)."""
    groups: dict[bytes, list[int]] = {}
    specials = vocab.special_ids
    for t, b in enumerate(vocab.token_bytes):
        if b and t not in specials:
            groups.setdefault(b, []).append(t)

    edge = array.array("B", [0])
    token = array.array("i", [-1])
    size = array.array("i", [0])
    alias_offset = array.array("i", [0])
    alias_ids = array.array("i")
    # Open path: stack[d] is the node at depth d on the path of the previous spelling.
    stack = [0]
    prev = b""
    for spelling in sorted(groups):
        # Longest common prefix with the previous spelling (sorted: shared ancestors).
        limit = min(len(prev), len(spelling))
        common = 0
        while common < limit and prev[common] == spelling[common]:
            common += 1
        while len(stack) > common + 1:  # close the subtrees the new spelling leaves
            node = stack.pop()
            size[node] = len(edge) - node
        for byte in spelling[common:]:
            stack.append(len(edge))
            edge.append(byte)
            token.append(-1)
            size.append(0)
            alias_offset.append(len(alias_ids))
        ids = groups[spelling]
        token[-1] = ids[0]
        alias_ids.extend(ids)
        prev = spelling
    while stack:
        node = stack.pop()
        size[node] = len(edge) - node
    alias_offset.append(len(alias_ids))

    # alias_offset[i] was appended before node i's ids, so it is node i's start.
    return edge, token, size, alias_offset, alias_ids
