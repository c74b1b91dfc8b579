//! The mask cache (`src/cache.rs`) by hand, for the mutation campaign
//! (issue 14): grid-core's payload encodings and their boundary (sparse iff
//! `4 * ids <= ceil(n_vocab / 8)`), payload bytes both ways with every
//! rejection of `from_bytes`, verdict classes and their interning, the
//! verdict memo's byte accounting (seen through its evictions), entry sizes
//! (seen through the walk cache's bytes held), entry ids against Python's
//! hashlib, and FxHash against its formula.

use std::hash::Hasher;
use std::sync::Arc;

use grid_kernels::cache::{
    group, Classes, Entry, FxHasher, Payload, Verdict, WalkCache, DENSE, SPARSE,
    VERDICT_MEMO_BYTES, WALK_CACHE_BYTES,
};
use grid_kernels::{CdEntry, RawTrie, Trie};

fn sparse(ids: &[u32]) -> Payload {
    Payload {
        encoding: SPARSE,
        data: ids.into(),
    }
}

fn words_of(ids: &[u32], n_words: usize) -> Vec<u32> {
    let mut w = vec![0u32; n_words];
    for &i in ids {
        w[i as usize / 32] |= 1 << (i % 32);
    }
    w
}

#[test]
fn encodings_switch_at_grid_cores_boundary() {
    // n_vocab 100: ceil(100 / 8) = 13 bytes; 3 ids (12 bytes) sparse, 4 dense.
    for (n_vocab, most) in [
        (100usize, 3usize),
        (96, 3),
        (97, 3),
        (128, 4),
        (129, 4),
        (8, 0),
    ] {
        let ids: Vec<u32> = (0..most as u32 + 1)
            .map(|i| (i * 7) % n_vocab as u32)
            .collect();
        let (few, many) = (&ids[..most], &ids[..]);
        assert_eq!(
            Payload::of_ids(n_vocab, few.to_vec()).encoding,
            SPARSE,
            "{n_vocab}"
        );
        assert_eq!(
            Payload::of_ids(n_vocab, many.to_vec()).encoding,
            DENSE,
            "{n_vocab}"
        );
        let n_words = n_vocab.div_ceil(32);
        let w = Payload::of_words(words_of(few, n_words), n_vocab);
        assert_eq!((w.encoding, w.ids()), (SPARSE, few.to_vec()));
        let w = Payload::of_words(words_of(many, n_words), n_vocab);
        assert_eq!(w.encoding, DENSE);
        assert_eq!(w.data.len(), n_words);
        let mut sorted = many.to_vec();
        sorted.sort();
        assert_eq!(w.ids(), sorted);
    }
}

#[test]
fn payloads_of_trie_nodes_count_alias_classes() {
    // 100 ids: "a" spelled by ids 1 and 2 (an alias class), "b" by 3, "c" by 4.
    let mut spellings: Vec<&[u8]> = vec![b""; 100];
    spellings[1] = b"a";
    spellings[2] = b"a";
    spellings[3] = b"b";
    spellings[4] = b"c";
    let mut special = vec![false; 100];
    special[0] = true;
    let t = Trie::new(RawTrie::pack(&spellings, &special)).unwrap();
    assert_eq!(t.n_nodes(), 4);
    assert_eq!(t.ids_at(1), [1, 2]);
    // Nodes 1 and 2: 3 ids (12 bytes <= 13): sparse, ascending.
    let p = Payload::of_nodes(&t, &[2, 1]);
    assert_eq!((p.encoding, &*p.data), (SPARSE, &[1, 2, 3][..]));
    assert_eq!(p.size(), 12);
    // All three nodes: 4 ids: dense, 4 words.
    let p = Payload::of_nodes(&t, &[1, 2, 3]);
    assert_eq!((p.encoding, &*p.data), (DENSE, &[0b11110, 0, 0, 0][..]));
    assert_eq!(p.size(), 16);
    assert_eq!(p.ids(), vec![1, 2, 3, 4]);
    let none = Payload::of_nodes(&t, &[]);
    assert_eq!((none.encoding, none.data.len()), (SPARSE, 0));
    assert!(none.is_empty());
}

#[test]
fn ids_write_and_or_by_hand() {
    let dense = Payload {
        encoding: DENSE,
        data: vec![1 << 31 | 1, 0, 1 << 5].into(),
    };
    assert_eq!(dense.ids(), vec![0, 31, 69]);
    assert!(!dense.is_empty());
    assert!(Payload {
        encoding: DENSE,
        data: vec![0, 0].into()
    }
    .is_empty());
    assert!(!sparse(&[0]).is_empty());
    assert!(sparse(&[]).is_empty());
    let mut row = vec![u32::MAX; 3];
    dense.write(&mut row);
    assert_eq!(row, vec![1 << 31 | 1, 0, 1 << 5]);
    sparse(&[33, 64]).write(&mut row);
    assert_eq!(row, vec![0, 2, 1]);
    sparse(&[0, 95]).or_into(&mut row);
    assert_eq!(row, vec![1, 2, 1 | 1 << 31]);
    dense.or_into(&mut row);
    assert_eq!(row, vec![1 | 1 << 31, 2, 1 | 1 << 31 | 1 << 5]);
    assert_eq!(sparse(&[9, 8]).ids(), vec![9, 8], "sparse data as stored");
}

#[test]
fn payload_bytes_both_ways() {
    // Sparse over 100 ids: at most 13 bytes, a multiple of 4, ascending, < 100.
    let s = Payload::of_ids(100, vec![99, 3, 5]);
    let bytes = s.to_bytes(100);
    assert_eq!(bytes, [3, 0, 0, 0, 5, 0, 0, 0, 99, 0, 0, 0]);
    assert_eq!(Payload::from_bytes(SPARSE, &bytes, 100), Some(s));
    assert_eq!(Payload::from_bytes(SPARSE, &[], 100), Some(sparse(&[])));
    assert_eq!(
        Payload::from_bytes(SPARSE, &bytes[..11], 100),
        None,
        "not 4k bytes"
    );
    assert_eq!(
        Payload::from_bytes(SPARSE, &bytes[..8], 100),
        Some(sparse(&[3, 5]))
    );
    let four = [bytes.to_vec(), vec![120, 0, 0, 0]].concat();
    assert_eq!(
        Payload::from_bytes(SPARSE, &four, 100),
        None,
        "16 > 13 bytes"
    );
    assert_eq!(
        Payload::from_bytes(SPARSE, &four, 128),
        Some(sparse(&[3, 5, 99, 120]))
    );
    assert_eq!(
        Payload::from_bytes(SPARSE, &four[..12], 99),
        None,
        "id 99 of 99"
    );
    assert_eq!(
        Payload::from_bytes(SPARSE, &[5, 0, 0, 0, 5, 0, 0, 0], 100),
        None
    );
    assert_eq!(
        Payload::from_bytes(SPARSE, &[5, 0, 0, 0, 3, 0, 0, 0], 100),
        None
    );
    // Dense over 100 ids: exactly 13 bytes, nothing past id 99, more than 3 ids.
    let d = Payload::of_ids(100, vec![0, 9, 33, 99]);
    let bytes = d.to_bytes(100);
    assert_eq!(bytes, [1, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 8]);
    assert_eq!(Payload::from_bytes(DENSE, &bytes, 100), Some(d));
    assert_eq!(Payload::from_bytes(DENSE, &bytes[..12], 100), None);
    assert_eq!(
        Payload::from_bytes(DENSE, &[bytes.to_vec(), vec![0]].concat(), 100),
        None
    );
    let mut past = bytes;
    past[12] = 0x18; // id 100
    assert_eq!(Payload::from_bytes(DENSE, &past, 100), None);
    past[12] = 0x10; // id 100 alone, 0 and 9 and 33 still set
    assert_eq!(Payload::from_bytes(DENSE, &past, 100), None);
    let three = [1, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        Payload::from_bytes(DENSE, &three, 100),
        None,
        "3 ids are sparse"
    );
    // 64 ids: 8 bytes, no bits past the end to check; 3 ids are dense (12 > 8).
    let full = [7, 0, 0, 0, 0, 0, 0, 0x80];
    let p = Payload::from_bytes(DENSE, &full, 64).unwrap();
    assert_eq!(p.ids(), vec![0, 1, 2, 63]);
    assert_eq!(p.to_bytes(64), full);
    assert_eq!(
        Payload::from_bytes(DENSE, &[3, 0, 0, 0, 0, 0, 0, 0], 64),
        None
    );
    // A byte in the middle of a word lands at its shift.
    let mid = [0, 0, 0x81, 0, 0, 1, 0, 0];
    assert_eq!(
        Payload::from_bytes(DENSE, &mid, 64).unwrap().ids(),
        vec![16, 23, 40]
    );
    assert_eq!(Payload::from_bytes(b'X', &[], 100), None);
    assert_eq!(Payload::from_bytes(b'X', &full, 64), None);
}

#[test]
fn classes_group_intern_and_remember() {
    let table = Classes::default();
    assert!(table.is_empty());
    let classes = group(
        [
            (5, 2, &b"x"[..]),
            (7, 1, &b""[..]),
            (9, 2, &b"yz"[..]),
            (11, 1, &b"w"[..]),
        ],
        &table,
    );
    assert_eq!(classes.len(), 2);
    let (c0, c1) = (&classes[0], &classes[1]);
    assert_eq!(
        (c0.terminal, c0.members.len(), c1.terminal, c1.members.len()),
        (2, 2, 1, 2)
    );
    let m: Vec<(u32, Vec<u8>)> = c0.members.iter().map(|(n, t)| (n, t.to_vec())).collect();
    assert_eq!(m, vec![(5, b"x".to_vec()), (9, b"yz".to_vec())]);
    let m: Vec<(u32, Vec<u8>)> = c1.members.iter().map(|(n, t)| (n, t.to_vec())).collect();
    assert_eq!(m, vec![(7, vec![]), (11, b"w".to_vec())]);
    assert!(!c0.members.is_empty());
    assert_eq!(table.len(), 2);
    assert!(!table.is_empty());
    // The same nodes with other tails, or the same tails cut elsewhere, are
    // other members.
    let other_tails = group([(5, 2, &b"x"[..]), (9, 2, &b"yy"[..])], &table);
    assert!(!Arc::ptr_eq(&other_tails[0].members, &c0.members));
    let other_cut = group([(5, 2, &b"xy"[..]), (9, 2, &b"z"[..])], &table);
    assert!(!Arc::ptr_eq(&other_cut[0].members, &c0.members));
    let other_nodes = group([(5, 2, &b"x"[..]), (8, 2, &b"yz"[..])], &table);
    assert!(!Arc::ptr_eq(&other_nodes[0].members, &c0.members));
    let same = group([(5, 4, &b"x"[..]), (9, 4, &b"yz"[..])], &table);
    assert!(Arc::ptr_eq(&same[0].members, &c0.members));
    assert_eq!(table.len(), 5);
    // Dropped lists are no longer counted (held weakly).
    drop((other_tails, other_cut, other_nodes));
    assert_eq!(table.len(), 2);
    // Many short-lived lists: the table keeps counting only the live ones.
    for i in 0..3000u32 {
        let tail = i.to_le_bytes();
        let g = group([(i, 0, &tail[..])], &table);
        assert_eq!(g[0].members.len(), 1);
    }
    assert_eq!(table.len(), 2);
    let kept: Vec<_> = (0..1500u32)
        .map(|i| group([(i, 0, &b"k"[..])], &table))
        .collect();
    assert_eq!(table.len(), 1502);
    let again = group([(7, 0, &b"k"[..])], &table);
    assert!(Arc::ptr_eq(&again[0].members, &kept[7][0].members));
    // A verdict already remembered wins.
    let v1 = c0.members.remember(
        &[3],
        Verdict {
            ci: sparse(&[1]),
            deeper: vec![],
        },
    );
    let v2 = c0.members.remember(
        &[3],
        Verdict {
            ci: sparse(&[2]),
            deeper: vec![],
        },
    );
    assert!(Arc::ptr_eq(&v1, &v2));
    assert_eq!(&*c0.members.verdict(&[3]).unwrap().ci.data, &[1]);
    assert!(c0.members.verdict(&[3, 0]).is_none());
}

/// A verdict whose memo size (`64 + 8 * key words + 4 * ids + 16 * deeper`)
/// is `bytes`, with `deeper` classes.
fn verdict_of(bytes: usize, key_words: usize, deeper: Vec<grid_kernels::cache::Class>) -> Verdict {
    let fixed = 64 + 8 * key_words + 16 * deeper.len();
    assert_eq!((bytes - fixed) % 4, 0);
    let ids: Vec<u32> = (0..((bytes - fixed) / 4) as u32).collect();
    Verdict {
        ci: sparse(&ids),
        deeper,
    }
}

#[test]
fn verdict_memo_counts_its_bytes() {
    // The memo holds 1 MiB: four verdicts of 256 KiB fit exactly; a fifth,
    // however small, evicts down to 3/4 of the cap first (the two least
    // recently used go).
    assert_eq!(VERDICT_MEMO_BYTES, 1 << 20);
    assert_eq!(std::mem::size_of::<grid_kernels::cache::Class>(), 16);
    for (key_words, n_deeper) in [(1, 0), (2, 3), (3, 1)] {
        let table = Classes::default();
        let members = group([(1, 0, &b"m"[..])], &table).remove(0).members;
        let deeper = || group([(2, 1, &b""[..])], &table);
        let key = |i: u64| -> Vec<u64> { (0..key_words as u64).map(|w| i * 10 + w).collect() };
        for i in 0..4 {
            let d: Vec<_> = (0..n_deeper).flat_map(|_| deeper()).collect();
            members.remember(&key(i), verdict_of(1 << 18, key_words, d));
        }
        for i in 0..4 {
            assert!(
                members.verdict(&key(i)).is_some(),
                "{key_words} {n_deeper}: {i} of 4 kept"
            );
        }
        let d: Vec<_> = (0..n_deeper).flat_map(|_| deeper()).collect();
        members.remember(
            &key(4),
            verdict_of(64 + 8 * key_words + 16 * n_deeper, key_words, d),
        );
        let kept: Vec<bool> = (0..5).map(|i| members.verdict(&key(i)).is_some()).collect();
        assert_eq!(
            kept,
            [false, false, true, true, true],
            "{key_words} {n_deeper}"
        );
    }
}

fn entry(table: &Classes) -> Entry {
    // ci: ids 3 and 70 over 100 (sparse, 8 bytes); CD (5, 2, "x"), (6, 2, ""),
    // (8, 1, "yz"): two classes.
    let cd = vec![
        CdEntry {
            node: 5,
            terminal: 2,
            tail_start: 0,
            tail_end: 1,
        },
        CdEntry {
            node: 6,
            terminal: 2,
            tail_start: 1,
            tail_end: 1,
        },
        CdEntry {
            node: 8,
            terminal: 1,
            tail_start: 1,
            tail_end: 3,
        },
    ];
    Entry::new(
        Payload::of_ids(100, vec![70, 3]),
        cd,
        b"xyz".to_vec(),
        table,
    )
}

#[test]
fn entries_sizes_and_the_walk_cache() {
    let table = Classes::default();
    let e = entry(&table);
    assert_eq!(e.classes.len(), 2);
    assert_eq!(e.tail(&e.cd[2]), b"yz");
    let shape: Vec<(u32, Vec<u32>)> = e
        .classes
        .iter()
        .map(|c| (c.terminal, c.members.iter().map(|(n, _)| n).collect()))
        .collect();
    assert_eq!(shape, vec![(2, vec![5, 6]), (1, vec![8])]);
    // 64 + 8 (ids) + 3 * 16 (CD entries) + 3 (tails) + 2 * 16 (classes).
    assert_eq!(e.size(), 64 + 8 + 48 + 3 + 32);
    let later = entry(&table);
    assert!(later.serial > e.serial);
    assert_eq!(WalkCache::default().usage(), (0, WALK_CACHE_BYTES, 0));
    assert_eq!(WALK_CACHE_BYTES, 256 << 20);
    let cache = WalkCache::new(1000);
    assert!(cache.is_empty());
    let first = cache.publish(b"key1", e);
    assert_eq!(cache.usage(), (155 + 4, 1000, 0));
    // A racing publisher of the same key gets the entry that won.
    let raced = cache.publish(b"key1", later);
    assert!(Arc::ptr_eq(&first, &raced));
    assert!(Arc::ptr_eq(&cache.get(b"key1").unwrap(), &first));
    assert!(cache.get(b"key2").is_none());
    assert_eq!(cache.len(), 1);
    assert!(!cache.is_empty());
    // An entry larger than the cap is returned, not kept.
    let small = WalkCache::new(100);
    let big = small.publish(b"k", entry(&table));
    assert_eq!(big.cd.len(), 3);
    assert!(small.is_empty() && small.get(b"k").is_none());
    assert_eq!(small.usage(), (0, 100, 0));
    // Lowering the cap evicts at once.
    cache.publish(b"key2", entry(&table));
    assert_eq!((cache.len(), cache.usage().0), (2, 2 * 159));
    cache.set_cap(200);
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.usage(), (0, 200, 2));
    // An entry of a walk: CI nodes packed into ids.
    let mut spellings: Vec<&[u8]> = vec![b""; 100];
    spellings[1] = b"a";
    spellings[2] = b"a";
    spellings[3] = b"b";
    let t = Trie::new(RawTrie::pack(&spellings, &[false; 100])).unwrap();
    let walk = grid_kernels::WalkOutput {
        ci: vec![1, 2],
        ..Default::default()
    };
    let w = Entry::of_walk(&t, walk, &table);
    assert_eq!((w.ci.encoding, &*w.ci.data), (SPARSE, &[1, 2, 3][..]));
    let mut ids = grid_kernels::WalkOutput::ids(&t);
    ids.ids.as_mut().unwrap().add(&[9, 4]);
    let w = Entry::of_walk(&t, ids, &table);
    assert_eq!(&*w.ci.data, &[4, 9]);
}

fn hex(id: [u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn entry_ids_match_hashlib() {
    // python: blake2b(key + b"S" + canonical([payload bytes, [[5, 2, b"x"]]]),
    //         digest_size=16), payload = ids 3 and 70 as little-endian int32.
    let table = Classes::default();
    let e = Entry::new(
        Payload::of_ids(100, vec![70, 3]),
        vec![CdEntry {
            node: 5,
            terminal: 2,
            tail_start: 0,
            tail_end: 1,
        }],
        b"x".to_vec(),
        &table,
    );
    assert_eq!(
        hex(e.entry_id(b"key", 100)),
        "0fb2297b2354d4960f4b0e9e6ae900a2"
    );
    // Computed once: a later call with another key returns the first id.
    assert_eq!(
        hex(e.entry_id(b"other", 100)),
        "0fb2297b2354d4960f4b0e9e6ae900a2"
    );
    // Dense (ids 0, 9, 33, 99: 13 bytes), two CD entries, an empty tail.
    let e = Entry::new(
        Payload::of_ids(100, vec![0, 9, 33, 99]),
        vec![
            CdEntry {
                node: 7,
                terminal: 1,
                tail_start: 0,
                tail_end: 0,
            },
            CdEntry {
                node: 12,
                terminal: 2,
                tail_start: 0,
                tail_end: 2,
            },
        ],
        b"ab".to_vec(),
        &table,
    );
    assert_eq!(
        hex(e.entry_id(b"K2", 100)),
        "5ad23ed2e1d2ad14381f2edf84691417"
    );
}

#[test]
fn fx_hash_follows_its_formula() {
    // python: h = ((rotl(h, 5) ^ w) * 0x517cc1b727220a95) mod 2^64 per
    // little-endian 8-byte word, then per remaining byte.
    let mut h = FxHasher::default();
    h.write(&(1..12).collect::<Vec<u8>>());
    assert_eq!(h.finish(), 0xede5_c486_be7e_46de);
    let mut h = FxHasher::default();
    h.write(b"abc");
    h.write(b"defghijk");
    assert_eq!(h.finish(), 0x07aa_b3a0_8eae_b528);
    assert_eq!(FxHasher::default().finish(), 0);
}

/// Two member lists in one bucket of the intern table (their FxHashes made
/// equal: the second list's 8 tail bytes are chosen to cancel the
/// difference its node makes) stay two lists.
#[test]
fn member_lists_with_equal_hashes_stay_apart() {
    let state = |node: u32| {
        let mut h = FxHasher::default();
        for n in [&[node][..], &[8][..]] {
            h.write_usize(n.len());
            for &x in n {
                h.write_u32(x);
            }
        }
        h.finish()
    };
    let tails1 = *b"abcdefgh";
    let w1 = u64::from_le_bytes(tails1);
    let w2 = state(5).rotate_left(5) ^ w1 ^ state(6).rotate_left(5);
    let tails2 = w2.to_le_bytes();
    let full = |node: u32, tails: &[u8]| {
        let mut h = FxHasher::default();
        for n in [&[node][..], &[8][..]] {
            h.write_usize(n.len());
            for &x in n {
                h.write_u32(x);
            }
        }
        h.write(tails);
        h.finish()
    };
    assert_eq!(full(5, &tails1), full(6, &tails2), "one bucket");
    let table = Classes::default();
    let one = group([(5, 0, &tails1[..])], &table);
    let two = group([(6, 0, &tails2[..])], &table);
    assert!(!Arc::ptr_eq(&one[0].members, &two[0].members));
    let got: Vec<(u32, Vec<u8>)> = two[0]
        .members
        .iter()
        .map(|(n, t)| (n, t.to_vec()))
        .collect();
    assert_eq!(got, vec![(6, tails2.to_vec())]);
    assert_eq!(table.len(), 2);
    // The same list again is the interned one.
    let again = group([(6, 0, &tails2[..])], &table);
    assert!(Arc::ptr_eq(&again[0].members, &two[0].members));
}
