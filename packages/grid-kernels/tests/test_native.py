"""The binding layer on hand-checkable toy tables (no grid-core needed).

The toy is the one drawn in ``tests/toy.rs``: terminals A = "a", B = "b",
WS = " +" (ignored), ``$END`` = 3; grammar ``start: A B``; a nine-node trie over
the spellings " ", "  ", "a", "a b", "ab", "b", "ba" with ids 2, 5, 0, 4, 3, 1, 6
and EOS id 7. These tests check conversions and error reporting; bit-identity
with grid-core is checked in ``packages/grid-core/tests/test_kernels_parity.py``.
"""

from __future__ import annotations

import array
import threading
from collections.abc import Callable
from typing import Any

import pytest

import grid_kernels
from grid_kernels import EngineTables, TrieTables

A, B, WS, END = 1, 2, 4, 8


def toy_trie() -> TrieTables:
    return TrieTables(
        edge=array.array("B", [0, 32, 32, 97, 32, 98, 98, 98, 97]),
        token=array.array("i", [-1, 2, 5, 0, -1, 4, 3, 1, 6]),
        size=[9, 2, 1, 4, 2, 1, 1, 2, 1],
        alias_offset=[0, 0, 1, 2, 3, 3, 4, 5, 6, 7],
        alias_ids=[2, 5, 0, 4, 3, 1, 6],
        n_vocab=8,
        eos_ids=[7],
    )


def toy_engine(trie: TrieTables | None = None, **change: Any) -> EngineTables:
    trans = array.array("i", [-1] * (4 * 256))
    trans[ord("a")], trans[ord("b")], trans[ord(" ")] = 1, 2, 3
    trans[3 * 256 + ord(" ")] = 3
    fields: dict[str, Any] = {
        "trie": trie or toy_trie(),
        "n_terminals": 3,
        "dfa_trans": trans,
        "dfa_accept": (0, A, B, WS),
        "dfa_live": (A | B | WS, A, B, WS),
        "action": array.array("i", [2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, -2, 0, 0, 0, -1]),
        "goto": [-1, 3, -1, -1, -1, -1, -1, -1],
        "n_nonterminals": 2,
        "rule_lhs": [0, 1],
        "rule_len": [1, 2],
        "lexicon_children": ({},),
        "lexicon_prefix_cats": (0,),
        "lexicon_word_cats": (0,),
        "lexicon_categories": 0,
        "pick_order": (0, 1, 2),
        "ignored": WS,
    }
    fields.update(change)
    return EngineTables(**fields)


def test_module_reports_abi_and_exports() -> None:
    assert grid_kernels.ABI_VERSION == 3
    assert set(grid_kernels.__all__) >= {
        "EngineTables",
        "Entry",
        "Session",
        "SessionError",
        "TrieTables",
        "engine_tables",
        "union_dfa",
    }


def test_union_dfa_of_one_word() -> None:
    # "ab": 0 -a-> 1 -b-> 2 (final); masks rows for {a} and {b}
    rows = (1 << ord("a")).to_bytes(32, "little") + (1 << ord("b")).to_bytes(32, "little")
    args = ([3], [0], [2], [0, 0, 0], [], [0, 1, -1], [1, 2, -1], rows)
    built = grid_kernels.union_dfa(*args, 10)
    assert built is not None
    n, trans, accept, live = built
    assert (n, accept, live) == (3, [0, 0, 1], [1, 1, 1])
    table = array.array("i", trans)
    assert (table[ord("a")], table[256 + ord("b")], table[ord("b")]) == (1, 2, -1)
    assert grid_kernels.union_dfa(*args, 2) is None  # three subsets
    with pytest.raises(ValueError, match="edge target"):
        grid_kernels.union_dfa([3], [0], [2], [0, 0, 0], [], [0, 1, -1], [1, 3, -1], rows, 10)
    with pytest.raises(ValueError, match="out of range"):
        grid_kernels.union_dfa([3], [0], [-2], [0, 0, 0], [], [0, 1, -1], [1, 2, -1], rows, 10)


def test_tables_describe_themselves() -> None:
    engine = toy_engine()
    trie = engine.trie
    assert (trie.n_nodes, trie.n_vocab, trie.n_words, trie.max_depth) == (9, 8, 1, 3)
    assert trie.eos_ids == [7]
    assert (engine.n_terminals, engine.n_vocab, engine.n_words) == (3, 8, 1)
    assert "n_terminals=3" in repr(engine)


def test_walk_returns_ci_nodes_and_cd_entries() -> None:
    engine = toy_engine()
    assert engine.walk(0, b"", A) == ([1, 2, 3], [(4, 0, b" "), (6, 0, b"b")])
    assert engine.walk(0, b"", B) == ([1, 2, 7], [(8, 1, b"a")])
    assert engine.walk(3, b"a", A, include_self=True) == ([3], [(4, 0, b" "), (6, 0, b"b")])


def test_parser_and_lexer() -> None:
    engine = toy_engine()
    assert engine.allowed([0]) == A
    assert engine.shift([0], 0) == [0, 1]
    assert engine.allowed([0, 1, 2]) == END
    assert engine.advance([0], b"", b"a  b") == ([0, 1], b"b")
    assert engine.advance([0], b"", b"bb") is None
    assert engine.eos_allowed([0, 1], b"b")
    assert not engine.eos_allowed([0], b"")


def test_whole_mask_and_fill() -> None:
    engine = toy_engine()
    assert engine.compute_mask([0], b"") == ([0, 2, 5], [4, 3], False, 2, 1)
    out = array.array("i", [-1])
    assert engine.fill_next_token_bitmask([0], b"", out) == 5
    assert out.tolist() == [0b0011_1101]
    assert engine.fill_bitmask([0, 2, 5], [4, 3], True, out) == 6
    assert out.tolist() == [0b1011_1101]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: array.array("i", [0]), id="array-i"),
        pytest.param(lambda: array.array("I", [0]), id="array-I"),
        pytest.param(lambda: bytearray(4), id="bytearray"),
        pytest.param(lambda: array.array("B", bytes(4)), id="array-B"),
        pytest.param(lambda: memoryview(bytearray(4)).cast("i"), id="memoryview-i"),
    ],
)
def test_fill_accepts_int32_and_byte_buffers(make: Callable[[], Any]) -> None:
    engine = toy_engine()
    out = make()
    engine.fill_bitmask([0], [6], True, out)
    assert bytes(out) == (0b1100_0001).to_bytes(4, "little")


def test_fill_into_numpy_if_present() -> None:
    np = pytest.importorskip("numpy")
    out = np.zeros(1, dtype=np.int32)
    toy_engine().fill_bitmask([0], [], False, out)
    assert out.tolist() == [1]


@pytest.mark.parametrize(
    ("out", "error", "message"),
    [
        pytest.param(array.array("i", [0, 0]), ValueError, "2 32-bit words, expected 1", id="long"),
        pytest.param(array.array("i"), ValueError, "0 32-bit words, expected 1", id="empty"),
        pytest.param(bytearray(3), ValueError, "3 bytes, expected 4", id="short-bytes"),
        pytest.param(array.array("q", [0]), TypeError, "8-byte items", id="int64"),
        pytest.param(array.array("h", [0, 0]), TypeError, "2-byte items", id="int16"),
        pytest.param(array.array("f", [0]), TypeError, "format 'f'", id="float32"),
        pytest.param(b"\0\0\0\0", TypeError, "read-only", id="bytes"),
        pytest.param([0], TypeError, "writable buffer", id="list"),
        pytest.param(
            memoryview(bytearray(16)).cast("i")[::2], ValueError, "C-contiguous", id="strided"
        ),
    ],
)
def test_fill_rejects_bad_buffers_before_writing(
    out: Any, error: type[Exception], message: str
) -> None:
    engine = toy_engine()
    before = bytes(out) if not isinstance(out, list) else None
    with pytest.raises(error, match=message):
        engine.fill_bitmask([0], [], False, out)
    if before is not None:
        assert bytes(out) == before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda e: e.walk(9, b"", A), "trie node 9 is out of range 0..9", id="node"),
        pytest.param(lambda e: e.walk(-1, b"", A), "trie node -1", id="negative-node"),
        pytest.param(lambda e: e.walk(0, b"", 1 << 4), "allowed set has bit 4", id="allowed"),
        pytest.param(lambda e: e.walk(0, b"", -1), "negative", id="negative-allowed"),
        pytest.param(lambda e: e.allowed([]), "at least its bottom state", id="empty-stack"),
        pytest.param(lambda e: e.allowed([0, 7]), "state 7 is out of range", id="bad-state"),
        pytest.param(lambda e: e.shift([0], 1), "cannot shift", id="shift-error"),
        pytest.param(lambda e: e.shift([0], 3), "out of range", id="shift-end"),
        pytest.param(lambda e: e.compute_mask([0], b"ab"), "dies inside", id="remainder"),
        pytest.param(
            lambda e: e.fill_bitmask([8], [], False, bytearray(4)), "token id 8", id="token"
        ),
    ],
)
def test_bad_input_raises_value_error(call: Callable[[EngineTables], Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(toy_engine())


def test_bad_tables_raise_value_error() -> None:
    with pytest.raises(ValueError, match="invalid trie table"):
        TrieTables(
            edge=[0, 97],
            token=[-1, 0],
            size=[2, 2],
            alias_offset=[0, 0, 1],
            alias_ids=[0],
            n_vocab=1,
            eos_ids=[],
        )
    with pytest.raises(ValueError, match="invalid DFA table"):
        toy_engine(dfa_trans=[0] * 255)
    with pytest.raises(ValueError, match="names a terminal past 3"):
        toy_engine(dfa_accept=(0, A, B, END))
    with pytest.raises(ValueError, match=r"edge\[1\] = 300"):
        TrieTables(
            edge=[0, 300],
            token=[-1, 0],
            size=[2, 1],
            alias_offset=[0, 0, 1],
            alias_ids=[0],
            n_vocab=1,
            eos_ids=[],
        )
    with pytest.raises(TypeError, match="int bitset"):
        toy_engine(ignored="ws")


def test_one_trie_serves_many_grammars() -> None:
    trie = toy_trie()
    first, second = toy_engine(trie), toy_engine(trie)
    assert first.trie is trie and second.trie is trie


def test_walks_run_in_parallel_threads() -> None:
    engine = toy_engine()
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(engine.compute_mask([0], b"")))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [([0, 2, 5], [4, 3], False, 2, 1)] * 4
