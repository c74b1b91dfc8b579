"""The mask cache's pieces by hand (issue 14's mutation campaign).

``test_cache.py`` checks the cache end to end (cache-on equals cache-off);
these checks pin each piece of ``grid_core.cache`` to values worked out by
hand, in milliseconds, so that a mutant of the encodings, the entry id, the
hit and miss counters, the guards' errors or the namespace rollover is caught
without a replay: the payload encodings of a 32-token toy vocabulary (4 bytes
dense), the sparse/dense boundary (4 bytes per id against ``ceil(n / 8)``), and
the entry id recomputed from its documented preimage.
"""

from __future__ import annotations

import array
import hashlib

import pytest

from grid_core.cache import (
    DENSE,
    SPARSE,
    CacheConsistencyError,
    CDGroup,
    GenericKey,
    IdentifierRuleError,
    IdentKey,
    MaskTable,
    SharedCache,
    _decode,
    id_bits,
    make_entry,
)
from grid_core.errors import GridError
from grid_core.fingerprint import canonical

GENERIC = GenericKey(namespace=2, root=5, remainder=(3, 0, b"ab"), allowed=0b1011)
IDENT = IdentKey(namespace=2, root=5, remainder=(3, 7, 0, b"ab"), allowed=0b1011, schema="s1")


@pytest.mark.parametrize(
    ("ids", "bits"),
    [
        ([], 0),
        ([0], 1),
        ([7], 0x80),
        ([8], 0x100),
        ([7, 8], 0x180),
        ([1, 2, 3], 0b1110),
        ([9, 0], 0x201),
        ([64], 1 << 64),
        ([5, 5], 1 << 5),
    ],
)
def test_id_bits(ids: list[int], bits: int) -> None:
    assert id_bits(ids) == bits
    assert id_bits(ids) == sum(1 << i for i in set(ids))


def test_id_bits_of_many_ids_is_their_bitset() -> None:
    ids = [0, 3, 8, 15, 16, 31, 63, 64, 100, 257]
    assert id_bits(ids) == sum(1 << i for i in ids)
    assert id_bits(tuple(reversed(ids))) == sum(1 << i for i in ids)


def test_decode_sparse_and_dense_by_hand() -> None:
    sparse = array.array("i", [2, 9, 300]).tobytes()
    assert _decode(SPARSE, sparse) == (2, 9, 300)
    assert _decode(SPARSE, b"") == ()
    # Dense: byte 0 = 0b1000_0101 -> ids 0, 2, 7; byte 2 = 0b0000_0011 -> ids 16, 17.
    assert _decode(DENSE, bytes([0b1000_0101, 0, 0b11])) == (0, 2, 7, 16, 17)
    assert _decode(DENSE, bytes([0xFF])) == tuple(range(8))
    assert _decode(DENSE, bytes(4)) == ()


def expected_id(
    fields: tuple[object, ...], encoding: bytes, payload: bytes, cd: list[list[object]]
) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(canonical(fields))
    digest.update(encoding)
    digest.update(canonical((payload, cd)))
    return digest.hexdigest()


def test_sparse_entry_by_hand() -> None:
    cd = [(4, 1, b"x"), (6, 2, b"")]
    e = make_entry(GENERIC, [9, 1], cd, n_vocab=1000)  # 8 bytes sparse <= 125 bytes dense
    assert e.kind == "generic"
    assert e.encoding == SPARSE
    assert e.payload == array.array("i", [1, 9]).tobytes()
    assert e.cd == tuple(cd)
    assert e.ids == (1, 9)
    assert e.bits == (1 << 1) | (1 << 9)
    fields = ("generic", 2, 5, (3, 0, b"ab"), 0b1011)
    assert e.entry_id == expected_id(fields, SPARSE, e.payload, [[4, 1, b"x"], [6, 2, b""]])


def test_dense_entry_by_hand() -> None:
    e = make_entry(IDENT, [17, 0, 2, 7, 16], [], n_vocab=32)  # 20 bytes sparse > 4 dense
    assert e.kind == "ident"
    assert e.encoding == DENSE
    assert e.payload == bytes([0b1000_0101, 0, 0b11, 0])
    assert e.ids == (0, 2, 7, 16, 17)
    assert e.bits == (1 << 0) | (1 << 2) | (1 << 7) | (1 << 16) | (1 << 17)
    fields = ("ident", 2, 5, (3, 7, 0, b"ab"), 0b1011, "s1")
    assert e.entry_id == expected_id(fields, DENSE, e.payload, [])


@pytest.mark.parametrize(
    ("n_ids", "n_vocab", "encoding"),
    [
        (1, 32, SPARSE),  # 4 <= 4
        (2, 32, DENSE),  # 8 > 4
        (1, 25, SPARSE),  # 4 <= ceil(25 / 8) = 4
        (1, 24, DENSE),  # 4 > 3
        (2, 57, SPARSE),  # 8 <= 8
        (2, 56, DENSE),  # 8 > 7
        (0, 8, SPARSE),  # 0 <= 1
        (0, 1, SPARSE),
    ],
)
def test_the_smaller_encoding_is_chosen(n_ids: int, n_vocab: int, encoding: bytes) -> None:
    ids = list(range(n_ids))
    e = make_entry(GENERIC, ids, [], n_vocab)
    assert e.encoding == encoding
    assert e.ids == tuple(ids)
    assert e.bits == id_bits(ids)
    size = 4 * n_ids if encoding == SPARSE else (n_vocab + 7) // 8
    assert len(e.payload) == size


def test_the_entry_id_covers_every_key_field() -> None:
    ids, cd = [1, 2], [(3, 1, b"")]
    base = make_entry(IDENT, ids, cd, 64).entry_id
    variants: list[GenericKey | IdentKey] = [
        IdentKey(3, 5, (3, 7, 0, b"ab"), 0b1011, "s1"),
        IdentKey(2, 6, (3, 7, 0, b"ab"), 0b1011, "s1"),
        IdentKey(2, 5, (3, 7, 0, b"ac"), 0b1011, "s1"),
        IdentKey(2, 5, (3, 7, 0, b"ab"), 0b1111, "s1"),
        IdentKey(2, 5, (3, 7, 0, b"ab"), 0b1011, "s2"),
        GenericKey(2, 5, (3, 7, 0, b"ab"), 0b1011),
    ]
    others = {make_entry(k, ids, cd, 64).entry_id for k in variants}
    assert base not in others and len(others) == len(variants)
    assert make_entry(IDENT, [1, 3], cd, 64).entry_id != base
    assert make_entry(IDENT, ids, [(3, 2, b"")], 64).entry_id != base
    assert make_entry(IDENT, ids, cd, 64).entry_id == base  # a function of key and content


def test_cd_group_splits_by_emitted_terminal_in_order() -> None:
    a, b, c, d = (1, 7, b""), (2, 3, b"x"), (3, 7, b"y"), (4, 3, b"")
    group = make_entry(GENERIC, [], [a, b, c, d], 64).group
    assert isinstance(group, CDGroup)
    assert group.entries == (a, b, c, d)
    assert group.classes == ((7, (a, c)), (3, (b, d)))
    assert group.verdicts == {}
    assert CDGroup(()).classes == ()


def test_mask_table_counts_hits_and_misses() -> None:
    table = MaskTable()
    assert len(table) == 0
    assert table.get(GENERIC) is None
    assert table.get(GENERIC) is None
    assert (table.hits, table.misses) == (0, 2)
    entry = make_entry(GENERIC, [1], [], 64)
    assert table.publish(GENERIC, entry) is entry
    assert len(table) == 1
    assert table.get(GENERIC) is entry
    assert table.get(GENERIC) is entry
    assert table.get(GENERIC) is entry
    assert (table.hits, table.misses) == (3, 2)


def test_an_ident_entry_serves_both_kinds_of_key() -> None:
    table = MaskTable()
    entry = make_entry(IDENT, [1], [], 64)
    table.inject(GENERIC, entry)
    table.inject(IDENT, entry)
    assert table.get(GENERIC) is entry
    assert table.get(IDENT) is entry
    assert (table.hits, table.misses) == (2, 0)


def test_generic_entry_at_an_identifier_position_raises() -> None:
    table = MaskTable()
    table.inject(IDENT, make_entry(GENERIC, [1], [], 64))
    with pytest.raises(IdentifierRuleError) as caught:
        table.get(IDENT)
    assert caught.value.key == IDENT
    assert isinstance(caught.value, GridError)
    assert str(caught.value) == f"identifier composition rule: generic entry consulted for {IDENT}"
    assert (table.hits, table.misses) == (0, 0)


def test_publish_is_idempotent_and_keeps_the_first() -> None:
    table = MaskTable()
    first = make_entry(GENERIC, [1], [], 64)
    again = make_entry(GENERIC, [1], [], 64)
    assert first is not again and first.entry_id == again.entry_id
    assert table.publish(GENERIC, first) is first
    assert table.publish(GENERIC, again) is first
    assert len(table) == 1
    other = make_entry(GENERIC, [2], [], 64)
    with pytest.raises(CacheConsistencyError) as caught:
        table.publish(GENERIC, other)
    e = caught.value
    assert (e.key, e.first, e.second) == (GENERIC, first.entry_id, other.entry_id)
    assert isinstance(e, GridError)
    assert str(e) == (
        f"cache key {GENERIC} published twice: entry {first.entry_id} then {other.entry_id}"
    )
    assert table.get(GENERIC) is first


def test_rollover_starts_a_new_namespace_and_table() -> None:
    shared = SharedCache("fam")
    assert (shared.family, shared.namespace, len(shared.table)) == ("fam", 0, 0)
    first = shared.table
    first.publish(GENERIC, make_entry(GENERIC, [1], [], 64))
    assert shared.rollover() == 1
    assert shared.namespace == 1
    assert shared.table is not first and len(shared.table) == 0
    assert isinstance(shared.table, MaskTable)
    assert shared.rollover() == 2
    assert shared.namespace == 2
    assert len(first) == 1  # the old namespace's table is dropped, not cleared
