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
        "lexicon_words": [],
        "lexicon_categories": 0,
        "pick_order": (0, 1, 2),
        "ignored": WS,
    }
    fields.update(change)
    return EngineTables(**fields)


def test_module_reports_abi_and_exports() -> None:
    assert grid_kernels.ABI_VERSION == 12
    assert set(grid_kernels.__all__) >= {
        "EngineTables",
        "Entry",
        "Session",
        "SessionError",
        "TrieTables",
        "engine_tables",
        "thompson",
        "union_dfa",
    }


def test_union_dfa_of_one_word() -> None:
    # "ab": 0 -a-> 1 -b-> 2 (final); masks rows for {a} and {b}
    rows = (1 << ord("a")).to_bytes(32, "little") + (1 << ord("b")).to_bytes(32, "little")
    args = ([3], [0], [2], [0, 0, 0], [], [0, 1, -1], [1, 2, -1], rows)
    built = grid_kernels.union_dfa(*args, 10, [0])
    assert built is not None
    n, trans, accept, live = built
    assert (n, accept, live) == (3, [0, 0, 1], [1, 1, 1])
    table = array.array("i", trans)
    assert (table[ord("a")], table[256 + ord("b")], table[ord("b")]) == (1, 2, -1)
    assert grid_kernels.union_dfa(*args, 2, [0]) is None  # three subsets
    with pytest.raises(ValueError, match="edge target"):
        grid_kernels.union_dfa([3], [0], [2], [0, 0, 0], [], [0, 1, -1], [1, 3, -1], rows, 10, [0])
    with pytest.raises(ValueError, match="out of range"):
        grid_kernels.union_dfa([3], [0], [-2], [0, 0, 0], [], [0, 1, -1], [1, 2, -1], rows, 10, [0])
    with pytest.raises(ValueError, match="mask bases"):
        grid_kernels.union_dfa(*args, 10, [0, 0])
    with pytest.raises(ValueError, match="edge mask"):  # row 1 + 1 is past the rows
        grid_kernels.union_dfa(*args, 10, [1])


def test_union_dfa_counts_each_terminals_rows_from_its_mask_base() -> None:
    """Two one-byte terminals, each NFA with its own row 0: "a" (rows[0]) and
    "b" (rows[1], its mask_base)."""
    rows = (1 << ord("a")).to_bytes(32, "little") + (1 << ord("b")).to_bytes(32, "little")
    one = ([0, 0], [0, -1], [1, -1])  # eps_len, edge_mask, edge_target of 0 -x-> 1
    eps_len, edge_mask, edge_target = (one[i] * 2 for i in range(3))
    args = ([2, 2], [0, 0], [1, 1], eps_len, [], edge_mask, edge_target, rows, 10)
    built = grid_kernels.union_dfa(*args, [0, 1])
    assert built is not None
    n, trans, accept, _live = built
    table = array.array("i", trans)
    assert n == 3 and table[ord("a")] != table[ord("b")] != -1
    assert {accept[table[ord("a")]], accept[table[ord("b")]]} == {0b01, 0b10}
    same = grid_kernels.union_dfa(*args, [0, 0])  # both read row 0: "a" twice
    assert same is not None and same[0] == 2


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


def test_a_session_parses_and_lexes() -> None:
    """The session's configuration is the Python lexer's (``Lexer.advance``):
    "a b" shifts A and leaves "b" pending; EOS is legal only there."""
    s = toy_engine().session()
    assert s.config() == ([0], b"")
    assert not s.eos_allowed()
    assert s.validate_tokens([1]) == 0  # "b": A must come first
    assert s.validate_tokens([4, 7]) == 2  # "a b", then EOS
    s.accept_token(4, "sampled")
    assert s.config() == ([0, 1], b"b")
    assert s.eos_allowed()
    s.accept_token(7, "sampled")
    assert s.is_terminated() and not s.eos_allowed()


def test_a_session_masks_and_fills() -> None:
    """The initial mask: CI "a", " ", "  " and CD "a b", "ab"; no EOS."""
    s = toy_engine().session()
    assert s.mask_ids() == [0, 2, 3, 4, 5]
    out = array.array("i", [-1])
    s.fill_next_token_bitmask(out)
    assert out.tolist() == [0b0011_1101]
    s.accept_token(3, "sampled")  # "ab": A shifted, "b" pending
    s.fill_next_token_bitmask(out)
    assert out.tolist() == [0b1010_0100]  # EOS or ignored blanks: "b" is complete


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: array.array("i", [0]), id="array-i"),
        pytest.param(lambda: memoryview(bytearray(4)).cast("i"), id="memoryview-i"),
        pytest.param(lambda: memoryview(bytearray(12)).cast("i", (3, 1)), id="2d"),
    ],
)
def test_fill_writes_int32_buffers_row_by_row(make: Callable[[], Any]) -> None:
    out = make()
    rows = len(bytes(out)) // 4
    s = toy_engine().session()
    s.fill_next_token_bitmask(out, rows - 1)
    words = array.array("i", bytes(out)).tolist()
    assert words == [0] * (rows - 1) + [0b0011_1101]


def test_fill_into_numpy_if_present() -> None:
    np = pytest.importorskip("numpy")
    out = np.zeros((2, 1), dtype=np.int32)
    toy_engine().session().fill_next_token_bitmask(out, 1)
    assert out.tolist() == [[0], [0b0011_1101]]


@pytest.mark.parametrize(
    ("out", "row", "error", "message"),
    [
        pytest.param(
            memoryview(bytearray(8)).cast("i", (1, 2)),
            0,
            ValueError,
            "2 32-bit words per row",
            id="wide",
        ),
        pytest.param(array.array("i"), 0, ValueError, "is empty", id="empty"),
        pytest.param(
            memoryview(bytearray(8)).cast("i", (2, 1)),
            2,
            ValueError,
            "row 2 is out of range",
            id="row",
        ),
        pytest.param(array.array("i", [0]), -1, ValueError, "row -1 is out of range", id="neg"),
        pytest.param(array.array("q", [0]), 0, TypeError, "8-byte 'q'", id="int64"),
        pytest.param(bytearray(4), 0, TypeError, "buffer of int32", id="bytes-buffer"),
        pytest.param(b"\0\0\0\0", 0, TypeError, "buffer of int32", id="bytes"),
        pytest.param([0], 0, TypeError, "not list", id="list"),
        pytest.param(
            memoryview(bytearray(16)).cast("i")[::2], 0, ValueError, "C-contiguous", id="strided"
        ),
    ],
)
def test_fill_rejects_bad_buffers_before_writing(
    out: Any, row: int, error: type[Exception], message: str
) -> None:
    before = bytes(out) if not isinstance(out, list) else None
    with pytest.raises(error, match=message):
        toy_engine().session().fill_next_token_bitmask(out, row)
    if before is not None:
        assert bytes(out) == before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda e: e.walk(9, b"", A), "trie node 9 is out of range 0..9", id="node"),
        pytest.param(lambda e: e.walk(-1, b"", A), "trie node -1", id="negative-node"),
        pytest.param(lambda e: e.walk(0, b"", 1 << 4), "allowed set has bit 4", id="allowed"),
        pytest.param(lambda e: e.walk(0, b"", -1), "negative", id="negative-allowed"),
        # Past the sets' one word: below 2^128 (read by C calls), and above.
        pytest.param(lambda e: e.walk(0, b"", 1 << 64 | A), "has bit 64 set", id="bit-64"),
        pytest.param(lambda e: e.walk(0, b"", 1 << 130 | A), "has bit 130 set", id="bit-130"),
        pytest.param(
            lambda e: e.session().accept_token(8, "sampled"), "outside the vocabulary", id="token"
        ),
        pytest.param(
            lambda e: e.session().accept_token(1, "sampled"), "not in the mask", id="refused"
        ),
        pytest.param(lambda e: e.session().rollback(1), "roll back", id="rollback"),
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


def toy_parts() -> tuple[Any, Any, dict[str, None]]:
    """The toy's DFA and LALR tables as shared parts, and the raw fields they replace."""
    trans = array.array("i", [-1] * (4 * 256))
    trans[ord("a")], trans[ord("b")], trans[ord(" ")] = 1, 2, 3
    trans[3 * 256 + ord(" ")] = 3
    lexing = grid_kernels.Lexing(
        n_terminals=3,
        dfa_trans=trans,
        dfa_accept=(0, A, B, WS),
        dfa_live=(A | B | WS, A, B, WS),
        ignored=WS,
    )
    parsing = grid_kernels.Parsing(
        n_terminals=3,
        action=array.array("i", [2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, -2, 0, 0, 0, -1]),
        goto=[-1, 3, -1, -1, -1, -1, -1, -1],
        n_nonterminals=2,
        rule_lhs=[0, 1],
        rule_len=[1, 2],
    )
    replaced = dict.fromkeys(
        ("dfa_trans", "dfa_accept", "dfa_live", "action", "goto", "n_nonterminals", "rule_lhs")
    )
    return lexing, parsing, {**replaced, "rule_len": None}


def test_shared_dfa_and_lalr_parts_walk_as_the_raw_tables() -> None:
    """Tables over a dialect's shared ``Lexing`` and a projection's shared ``Parsing``
    walk and fill exactly as tables built from the raw arrays; parts of another
    terminal set, or both forms at once, are refused by name."""
    trie = toy_trie()
    lexing, parsing, raw = toy_parts()
    own = toy_engine(trie)
    shared = [toy_engine(trie, **raw, lexing=lexing, parsing=parsing) for _ in range(2)]
    for node, pending, allowed in [(0, b"", A), (0, b"", B | WS), (0, b" ", A | B), (3, b"a", B)]:
        expected = own.walk(node, pending, allowed)
        assert [s.walk(node, pending, allowed) for s in shared] == [expected] * 2
    rows = [array.array("i", [0]) for _ in range(2)]
    for tables, row in zip((own, shared[0]), rows, strict=True):
        tables.session().fill_next_token_bitmask(row)
    assert rows[0] == rows[1] and rows[0][0] != 0
    with pytest.raises(TypeError, match="either as lexing="):
        toy_engine(trie, lexing=lexing)  # the raw DFA too
    with pytest.raises(TypeError, match="either as parsing="):
        toy_engine(trie, **{**raw, "rule_len": [1, 2]}, lexing=lexing, parsing=parsing)
    with pytest.raises(ValueError, match="not those of the shared DFA tables"):
        toy_engine(trie, **raw, lexing=lexing, parsing=parsing, ignored=0)
    with pytest.raises(ValueError, match="invalid LALR table"):
        grid_kernels.Parsing(
            n_terminals=3, action=[0] * 5, goto=[], n_nonterminals=2, rule_lhs=[0], rule_len=[1]
        )


def test_walks_run_in_parallel_threads() -> None:
    engine = toy_engine()
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(engine.walk(0, b"", A))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [([1, 2, 3], [(4, 0, b" "), (6, 0, b"b")])] * 4


def test_a_held_bitmask_applies_as_the_function() -> None:
    """``BitmaskApplier`` (the processor's held rows and exit intent) masks and
    decides exactly as ``apply_token_bitmask`` given the same buffers, on random
    batches with NaN, ties and rows whose exit intent fires; it sees later writes
    to its rows (it holds the buffer, not a copy). Bad rows raise at construction."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(3)
    exits = 0
    for trial in range(40):
        n_words, rows = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        width = 32 * n_words + (7 if trial % 2 else 0)
        eos = int(rng.integers(32 * n_words))
        eos_row = np.zeros(n_words, dtype=np.int32)
        eos_row[eos // 32] = np.int32(np.uint32(1 << (eos % 32)).view(np.int32))
        held = np.zeros((rows, n_words), dtype=np.int32)
        applier = grid_kernels.BitmaskApplier(held, eos, eos_row)
        for _ in range(3):
            words = rng.integers(-(2**31), 2**31, size=(rows, n_words), dtype=np.int32)
            logits = rng.standard_normal((rows, width), dtype=np.float32)
            logits[0, int(rng.integers(width))] = np.nan
            held[:] = words
            expected, expected_words = logits.copy(), words.copy()
            grid_kernels.apply_token_bitmask(expected, expected_words, eos, eos_row)
            applier.apply(logits)
            assert np.array_equal(held, expected_words), trial
            assert np.array_equal(logits, expected, equal_nan=True), trial
            exits += int((expected_words != words).any(axis=1).sum())
    assert exits > 5
    plain = grid_kernels.BitmaskApplier(np.full((1, 1), -1, dtype=np.int32))
    logits = np.arange(40, dtype=np.float32)
    with pytest.raises(ValueError, match="logits shaped"):
        plain.apply(logits)  # 1-D logits for a 2-D bitmask
    with pytest.raises(TypeError, match="int32"):
        grid_kernels.BitmaskApplier(np.zeros(3, dtype=np.float64))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        grid_kernels.BitmaskApplier(np.zeros((1, 1, 1), dtype=np.int32))
    with pytest.raises(TypeError, match="both"):
        grid_kernels.BitmaskApplier(np.zeros(3, dtype=np.int32), 5)
