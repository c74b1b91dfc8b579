//! The token trie (`src/trie.rs`) against brute force, for the mutation
//! campaign (issue 14): `RawTrie::pack` against the vocabulary it packs
//! (every spelling read back, alias classes, node count = distinct
//! prefixes, preorder, depths), each subtree's `Wide` record against its
//! paths (edge bytes, height, UTF-8 validity by `std::str::from_utf8`), and
//! every rejection of `Trie::new` with its message.

mod common;

use std::collections::BTreeSet;

use grid_kernels::trie::{Wide, WIDE_MIN};
use grid_kernels::{KernelError, RawTrie, Trie};

fn vocab() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = Vec::new();
    for s in [
        "a", "ab", "abc", "abd", "b", "ba", "bé", "é", "éa", "中", "中文", "x", "xy",
    ] {
        v.push(s.as_bytes().to_vec());
    }
    v.push(b"\xc3".to_vec()); // a lone lead byte
    v.push(b"\xc3A".to_vec()); // invalid
    v.push(b"\xe0\x80".to_vec()); // invalid second byte
    v.push(b"\xa9".to_vec()); // a lone continuation byte
    v.push(b"\xf0\x9f\x98\x80".to_vec()); // an emoji
    v.push(b"\xf0\x9f".to_vec());
    v.push(b"\xf4\x8f\xbf\xbf".to_vec()); // U+10FFFF
    v.push(b"\xed\x9f\xbf".to_vec()); // U+D7FF
    for k in 1..=20 {
        v.push("q".repeat(k).into_bytes());
    }
    for x in b"abcdefghij" {
        v.push(vec![b'z', *x]);
        v.push(vec![b'z', *x, b'!']);
    }
    v.push(Vec::new()); // special (EOS)
    v.push(b"ab".to_vec()); // an alias of "ab"
    v.push(b"b".to_vec()); // another alias, of "b"
    v
}

fn packed() -> (Vec<Vec<u8>>, Trie) {
    let v = vocab();
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    let mut special = vec![false; v.len()];
    special[1] = true; // "ab" with id 1 is special: only its alias is spelled
    let mut raw = RawTrie::pack(&refs, &special);
    assert!(raw.eos_ids.is_empty());
    raw.eos_ids = vec![(v.len() - 3) as i32];
    let t = Trie::new(raw).expect("a packed trie is valid");
    t.check_invariants();
    (v, t)
}

#[test]
fn packing_reads_back_every_spelling() {
    let (v, t) = packed();
    let special = |i: usize| i == 1 || v[i].is_empty();
    assert_eq!(t.n_vocab(), v.len());
    assert_eq!(t.n_words(), v.len().div_ceil(32));
    assert_eq!(t.eos_ids(), [(v.len() - 3) as u32]);
    for (i, s) in v.iter().enumerate() {
        let want: &[u8] = if special(i) { b"" } else { s };
        assert_eq!(t.spelling(i), want, "id {i}");
    }
    // Nodes: the root plus every distinct prefix of a spelled word.
    let mut prefixes = BTreeSet::new();
    for (i, s) in v.iter().enumerate() {
        if !special(i) {
            for k in 1..=s.len() {
                prefixes.insert(s[..k].to_vec());
            }
        }
    }
    assert_eq!(t.n_nodes(), prefixes.len() + 1);
    let paths = common::paths(&t);
    // Preorder is the bytewise order of the paths.
    let sorted: Vec<Vec<u8>> = prefixes.iter().cloned().collect();
    assert_eq!(&paths[1..], &sorted[..]);
    assert_eq!(t.max_depth(), 20);
    for (n, p) in paths.iter().enumerate() {
        let mut ids: Vec<u32> = (0..v.len())
            .filter(|&i| !special(i) && v[i] == *p && n > 0)
            .map(|i| i as u32)
            .collect();
        ids.sort();
        assert_eq!(t.ids_at(n), &ids[..], "node {n}");
        assert_eq!(t.node(n).token, ids.first().map_or(-1, |&i| i as i32));
        let size = (n..t.n_nodes())
            .take_while(|&m| paths[m].starts_with(p))
            .count();
        assert_eq!(t.node(n).size as usize, size, "node {n}");
        assert_eq!(t.node(n).edge, p.last().copied().unwrap_or(0));
        let tokens: Vec<u32> = (n..n + size)
            .filter(|&m| t.node(m).token >= 0)
            .map(|m| m as u32)
            .collect();
        assert_eq!(t.token_nodes(n), &tokens[..]);
    }
    // The alias of "b" (id len - 1) shares node "b" with id 4.
    let b = paths.iter().position(|p| p == b"b").unwrap();
    assert_eq!(t.ids_at(b), [4, (v.len() - 1) as u32]);
}

fn utf8_prefix(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

#[test]
fn wide_records_match_their_subtrees() {
    let (_, t) = packed();
    let paths = common::paths(&t);
    let mut seen = 0;
    let mut utf8_false = 0;
    for n in 0..t.n_nodes() {
        let node = t.node(n);
        if node.size < WIDE_MIN {
            continue;
        }
        seen += 1;
        let depth = paths[n].len().saturating_sub(1);
        let below: Vec<&[u8]> = (n..n + node.size as usize)
            .map(|m| &paths[m][depth..])
            .collect();
        let mut bytes = [0u64; 4];
        for p in &below {
            for &b in p.iter() {
                bytes[b as usize / 64] |= 1 << (b % 64);
            }
        }
        let height = below.iter().map(|p| p.len()).max().unwrap() as u16;
        let utf8 = below.iter().all(|p| utf8_prefix(p));
        utf8_false += usize::from(!utf8);
        let want = Wide {
            bytes,
            utf8,
            height: if n == 0 { height + 1 } else { height },
        };
        let got = *t.wide(&node);
        if n == 0 {
            // The root's edge is the byte 0 by convention.
            assert_eq!((got.bytes[0] & !1, got.utf8), (want.bytes[0], want.utf8));
            assert_eq!(&got.bytes[1..], &want.bytes[1..]);
            assert_eq!(got.height, 21);
        } else {
            assert_eq!(got, want, "node {n} {:?}", paths[n]);
        }
    }
    assert!(seen >= 4 && utf8_false >= 1, "{seen} {utf8_false}");
    // A subtree of only valid UTF-8: "q" * k (20 nodes deep, height 20).
    let q = paths.iter().position(|p| p == b"q").unwrap();
    let w = t.wide(&t.node(q));
    assert_eq!((w.height, w.utf8), (20, true));
    assert_eq!(w.bytes, [0, 1 << (b'q' - 64), 0, 0]);
    let z = paths.iter().position(|p| p == b"z").unwrap();
    let w = t.wide(&t.node(z));
    assert_eq!((w.height, w.utf8, t.node(z).size), (3, true, 21));
}

#[test]
fn utf8_records_by_hand() {
    // Each vocabulary alone under one lead byte, 8 nodes or more.
    let cases: [(&[&[u8]], bool); 6] = [
        (
            &[
                b"\xc3\xa9",
                b"\xc3\xa8",
                b"\xc3\xa7",
                b"\xc3\xa6",
                b"\xc3\xa5",
                b"\xc3\xa4",
                b"\xc3\xa3",
            ],
            true,
        ),
        (
            &[
                b"\xc3\xa9",
                b"\xc3\xa8",
                b"\xc3\xa7",
                b"\xc3\xa6",
                b"\xc3\xa5",
                b"\xc3\xa4",
                b"\xc3A",
            ],
            false,
        ),
        (
            &[
                b"\xe0\xa0\x80",
                b"\xe0\xa0\x81",
                b"\xe0\xa0\x82",
                b"\xe0\xa0\x83",
                b"\xe0\xa0\x84",
                b"\xe0\xa0\x85",
            ],
            true,
        ),
        (
            &[
                b"\xe0\xa0\x80",
                b"\xe0\xa0\x81",
                b"\xe0\xa0\x82",
                b"\xe0\xa0\x83",
                b"\xe0\xa0\x84",
                b"\xe0\x80\x85",
            ],
            false,
        ),
        (
            &[
                b"\xf4\x8f\x80\x80",
                b"\xf4\x8f\x80\x81",
                b"\xf4\x8f\x80\x82",
                b"\xf4\x8f\x80\x83",
                b"\xf4\x8f\x80\x84",
            ],
            true,
        ),
        (
            &[
                b"\xf4\x8f\x80\x80",
                b"\xf4\x8f\x80\x81",
                b"\xf4\x8f\x80\x82",
                b"\xf4\x8f\x80\x83",
                b"\xf4\x90\x80\x84",
            ],
            false,
        ),
    ];
    for (words, utf8) in cases {
        let raw = RawTrie::pack(words, &vec![false; words.len()]);
        let t = Trie::new(raw).unwrap();
        assert!(t.node(1).size >= WIDE_MIN);
        assert_eq!(t.wide(&t.node(1)).utf8, utf8, "{words:?}");
        let all = words.iter().all(|w| utf8_prefix(w));
        assert_eq!(all, utf8);
    }
}

fn refused(raw: RawTrie) -> String {
    match Trie::new(raw) {
        Err(KernelError::InvalidTables {
            table: "trie",
            detail,
        }) => detail,
        other => panic!("expected a trie error, got {other:?}"),
    }
}

#[test]
fn invalid_tries_are_refused_with_the_reason() {
    assert!(Trie::new(common::toy_trie()).is_ok());
    assert_eq!(Trie::new(common::toy_trie()).unwrap().max_depth(), 3);
    type Corrupt = Box<dyn Fn(&mut RawTrie)>;
    let cases: Vec<(Corrupt, &str)> = vec![
        (Box::new(|r| *r = RawTrie::default()), "no root node"),
        (
            Box::new(|r| r.token.pop().map(drop).unwrap()),
            "edge/token/size lengths differ: 9/8/9",
        ),
        (
            Box::new(|r| r.size.push(1)),
            "edge/token/size lengths differ: 9/9/10",
        ),
        (
            Box::new(|r| r.alias_offset.push(7)),
            "alias_offset must have 10 entries",
        ),
        (Box::new(|r| r.size[2] = 0), "a subtree size is below 1"),
        (Box::new(|r| r.size[2] = -1), "a subtree size is below 1"),
        (
            Box::new(|r| r.size[0] = 8),
            "the root's subtree is not the whole trie",
        ),
        (
            Box::new(|r| r.alias_offset[3] = -1),
            "a negative alias offset",
        ),
        (
            Box::new(|r| r.alias_offset[0] = 1),
            "alias_offset does not span alias_ids",
        ),
        (
            Box::new(|r| r.alias_offset[9] = 6),
            "alias_offset does not span alias_ids",
        ),
        (
            Box::new(|r| r.alias_ids[1] = 8),
            "an alias id is outside the vocabulary",
        ),
        (
            Box::new(|r| r.alias_ids[1] = -1),
            "an alias id is outside the vocabulary",
        ),
        (
            Box::new(|r| r.eos_ids = vec![8]),
            "an EOS id is outside the vocabulary",
        ),
        (
            Box::new(|r| r.eos_ids = vec![-2]),
            "an EOS id is outside the vocabulary",
        ),
        (
            Box::new(|r| r.alias_offset[4] = 1),
            "alias_offset decreases at node 3",
        ),
        (
            Box::new(|r| r.token[4] = 4),
            "token[4] is not the first id of its alias class",
        ),
        (
            Box::new(|r| r.token[3] = -1),
            "token[3] is not the first id of its alias class",
        ),
        (Box::new(|r| r.size[3] = 7), "node 3 overflows its parent"),
        (Box::new(|r| r.size[2] = 2), "node 2 overflows its parent"),
        (
            Box::new(|r| r.edge[7] = b'a'),
            "children not sorted at node 7",
        ),
        (
            Box::new(|r| r.edge[6] = b' '),
            "children not sorted at node 6",
        ),
        (
            Box::new(|r| {
                r.token[0] = 7;
                r.alias_offset = vec![0, 1, 2, 3, 4, 4, 5, 6, 7, 8];
                r.alias_ids = vec![7, 2, 5, 0, 4, 3, 1, 6];
            }),
            "the root spells a token (the empty spelling)",
        ),
        (
            Box::new(|r| {
                r.alias_offset = vec![0, 0, 1, 2, 3, 3, 4, 5, 6, 8];
                r.alias_ids = vec![2, 5, 0, 4, 3, 1, 6, 4];
            }),
            "token 4 is spelled twice",
        ),
    ];
    for (k, (corrupt, reason)) in cases.into_iter().enumerate() {
        let mut raw = common::toy_trie();
        corrupt(&mut raw);
        assert_eq!(refused(raw), reason, "case {k}");
    }
    // The boundary cases that are valid: siblings with consecutive bytes, a
    // last child that ends exactly with its parent, an empty EOS list.
    let mut raw = common::toy_trie();
    raw.edge[7] = b'b';
    raw.edge[3] = b'!';
    raw.eos_ids.clear();
    let t = Trie::new(raw).unwrap();
    assert!(t.eos_ids().is_empty());
    assert_eq!(t.spelling(0), b"!");
}
