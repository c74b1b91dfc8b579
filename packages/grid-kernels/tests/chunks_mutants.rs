//! The subtree memo (`src/chunks.rs`) by hand on `tests/toy.rs`'s tables,
//! for the mutation campaign (issue 14): which frames are memo points, the
//! bytes a chunk and its key take, hits and misses, the bitmask of a chunk's
//! fixed CI ids, caps and clearing; and the walk through the memo against
//! the plain walk on the fixture's grammar with every subtree a memo point.

mod common;

use grid_kernels::cache::Payload;
use grid_kernels::chunks::{Chunks, BITS_MIN, CAP_BYTES, MIN_NODES};
use grid_kernels::walk::{walk_from, walk_into, WalkOutput};

use common::toy;

const A: u64 = 1;
const B: u64 = 2;

fn walk_memo(chunks: &Chunks, pending: &[u8], allowed: u64, ids: bool) -> WalkOutput {
    let e = toy();
    let mut out = if ids {
        WalkOutput::ids(&e.trie)
    } else {
        WalkOutput::default()
    };
    let mut a = e.grammar.allowed_sets(&[allowed]);
    walk_into(
        &e.grammar,
        &e.trie,
        0,
        pending,
        &mut a,
        false,
        Some(chunks),
        &mut out,
    );
    out
}

#[test]
fn defaults_and_bounds() {
    assert_eq!((MIN_NODES, BITS_MIN, CAP_BYTES), (256, 1024, 256 << 20));
    let d = Chunks::default();
    assert_eq!((d.min_nodes(), d.bits_min()), (256, 1024));
    assert_eq!(d.usage(), (0, 256 << 20, 0));
    assert!(d.is_empty());
    assert_eq!(d.len(), 0);
    // Zero bounds are raised to 1.
    let z = Chunks::new(0, 0, 10);
    assert_eq!((z.min_nodes(), z.bits_min()), (1, 1));
}

#[test]
fn one_memo_point_by_hand() {
    // min_nodes 3: the root (START: its R holds every emittable terminal,
    // not a memo point) and node 3 "a" (4 nodes) are large enough; nodes 1
    // and 7 (2 nodes) are not. Under A = {A}, the frame after "a" (DFA
    // state 1, R = {A}) is one: its chunk holds the children of node 3 walked
    // from "a": " " kills "a" -> CD (4, A, " "), "b" kills "a" -> CD (6, A,
    // "b"), both tails starting at the frame's last accept (v = "", flagged).
    let chunks = Chunks::new(3, 1 << 20, 1 << 20);
    let out = walk_memo(&chunks, b"", A, false);
    let plain = {
        let e = toy();
        walk_from(&e.grammar, &e.trie, 0, b"", &[A], false)
    };
    assert_eq!(out, plain);
    assert_eq!(out.ci, vec![1, 2, 3]);
    assert_eq!(chunks.stats(), (0, 1));
    assert_eq!(chunks.len(), 1);
    assert!(!chunks.is_empty());
    // Bytes: the output part (no CI node: 0; two CD entries of 16 bytes; 2
    // tail bytes) + 2 flags; no bitmask; key 4 (node) + 4 (q) + 4 (ln) + 8
    // (p) + 8 (A & R) bytes.
    assert_eq!(std::mem::size_of::<grid_kernels::CdEntry>(), 16);
    assert_eq!(chunks.usage(), (34 + 2 + 28, 1 << 20, 0));
    // The same walk again: a hit, nothing new.
    assert_eq!(walk_memo(&chunks, b"", A, false), plain);
    assert_eq!(chunks.stats(), (1, 1));
    // Under A = {B} the frame after "a" is not live ("a" is not allowed) and
    // its pick is not allowed: the walk never reaches it.
    let out_b = walk_memo(&chunks, b"", B, false);
    assert_eq!(out_b.ci, vec![1, 2, 7]);
    assert_eq!(chunks.stats(), (1, 1));
    // Pending "a": the root's frame is the frame after "a" (a memo point at
    // node 0, 9 nodes): its chunk replays the CD entries with the frame's v.
    let pend = walk_memo(&chunks, b"a", A, false);
    let e = toy();
    assert_eq!(pend, walk_from(&e.grammar, &e.trie, 0, b"a", &[A], false));
    assert_eq!(chunks.stats(), (1, 2));
    assert_eq!(chunks.len(), 2);
    // A cap below what is held empties the memo; clearing keeps the counters.
    chunks.set_cap(10);
    assert_eq!(chunks.len(), 0);
    assert_eq!(chunks.usage().1, 10);
    chunks.set_cap(1 << 20);
    walk_memo(&chunks, b"", A, false);
    assert_eq!(chunks.len(), 1);
    chunks.clear();
    assert!(chunks.is_empty());
    assert_eq!(chunks.stats(), (1, 3));
}

#[test]
fn small_subtrees_are_not_memo_points() {
    // min_nodes 5: only the root (9 nodes) is large enough, and from the
    // start state it is no memo point.
    let chunks = Chunks::new(5, 1, 1 << 20);
    walk_memo(&chunks, b"", A, false);
    assert_eq!((chunks.stats(), chunks.len()), ((0, 0), 0));
    // min_nodes 4: node 3 (exactly 4 nodes) is one.
    let chunks = Chunks::new(4, 1, 1 << 20);
    walk_memo(&chunks, b"", A, false);
    assert_eq!((chunks.stats(), chunks.len()), ((0, 1), 1));
}

#[test]
fn chunk_bitmasks_hold_the_fixed_ids() {
    // Pending " " under A = {A, B}: the root frame (state 3, R = {WS}) is a
    // memo point; its chunk's fixed CI nodes are those of the whitespace
    // run: node 1 " " and 2 "  " (ids 2 and 5) stay in the run; the others
    // end it (holes: the requeued tail is walked on under the replaying A).
    for bits_min in [1, 2, 3] {
        let chunks = Chunks::new(1, bits_min, 1 << 20);
        let e = toy();
        let plain = walk_from(&e.grammar, &e.trie, 0, b" ", &[A | B], false);
        let ids = Payload::of_nodes(&e.trie, &plain.ci).ids();
        for round in 0..2 {
            let mut out = walk_memo(&chunks, b" ", A | B, true);
            let got = out.ids.take().unwrap().into_payload(8).ids();
            assert_eq!(got, ids, "bits_min {bits_min} round {round}");
            assert_eq!(
                (out.cd.clone(), out.tails.clone()),
                (plain.cd.clone(), plain.tails.clone())
            );
            let nodes = walk_memo(&chunks, b" ", A | B, false);
            assert_eq!(nodes, plain, "bits_min {bits_min} round {round}");
        }
        // Held bytes grow by one word (4 bytes) for a chunk with a bitmask.
        let (held, _, _) = chunks.usage();
        let plain_memo = Chunks::new(1, 1 << 20, 1 << 20);
        walk_memo(&plain_memo, b" ", A | B, true);
        walk_memo(&plain_memo, b" ", A | B, false);
        assert_eq!(plain_memo.len(), chunks.len());
        let (held_plain, _, _) = plain_memo.usage();
        assert!(
            held >= held_plain + 4 * usize::from(bits_min <= 2),
            "{held} {held_plain}"
        );
    }
}

#[test]
fn memo_walks_equal_plain_walks_on_the_fixture() {
    let (e, configs) = common::fixture_engine();
    let (g, t) = (&e.grammar, &e.trie);
    for (min_nodes, bits_min) in [(1, 1), (3, 2), (5, 64)] {
        let chunks = Chunks::new(min_nodes, bits_min, 1 << 30);
        for round in 0..2 {
            for c in &configs {
                for pending in [&c.remainder[..], b"'", b"s", b" "] {
                    let plain = walk_from(g, t, 0, pending, &c.allowed, false);
                    let mut a = g.allowed_sets(&c.allowed);
                    let mut out = WalkOutput::default();
                    walk_into(g, t, 0, pending, &mut a, false, Some(&chunks), &mut out);
                    assert_eq!(out, plain, "{min_nodes} {bits_min} {round}");
                    let mut ids = WalkOutput::ids(t);
                    walk_into(g, t, 0, pending, &mut a, false, Some(&chunks), &mut ids);
                    let got = ids.ids.take().unwrap().into_payload(t.n_vocab());
                    assert_eq!(got, Payload::of_nodes(t, &plain.ci));
                    assert_eq!(ids.cd, plain.cd);
                    assert_eq!(ids.tails, plain.tails);
                }
            }
        }
    }
}

#[test]
fn chunks_are_shared_by_remainders_with_other_unaccepted_bytes() {
    // Remainders whose last accept is before their end (a `v` after it),
    // every one a memo point's frame: remainders in the same state with the
    // same candidates share a chunk whatever their `v`, so a chunk's stored
    // tails must leave `v` out and take the replaying frame's.
    let (e, configs) = common::fixture_engine();
    let (g, t) = (&e.grammar, &e.trie);
    let alphabet = b"1.5eE+-a'x/*";
    let mut pendings: Vec<Vec<u8>> = vec![Vec::new()];
    let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..4 {
        let mut next = Vec::new();
        for p in &frontier {
            for &b in alphabet {
                let q = [&p[..], &[b]].concat();
                if g.scan(&q).is_some() {
                    next.push(q);
                }
            }
        }
        pendings.extend(next.iter().cloned());
        frontier = next;
    }
    let split: Vec<Vec<u8>> = pendings
        .into_iter()
        .filter(|p| {
            let s = g.scan(p).unwrap();
            s.la_len > 0 && (s.la_len as usize) < p.len()
        })
        .collect();
    assert!(split.len() >= 10, "{}", split.len());
    let mut shared = 0;
    for c in configs.iter().step_by(4) {
        let chunks = Chunks::new(1, 1 << 20, 1 << 30);
        for p in &split {
            let plain = walk_from(g, t, 0, p, &c.allowed, false);
            let before = chunks.stats().0;
            let mut a = g.allowed_sets(&c.allowed);
            let mut out = WalkOutput::default();
            walk_into(g, t, 0, p, &mut a, false, Some(&chunks), &mut out);
            assert_eq!(out, plain, "{p:?}");
            shared += usize::from(chunks.stats().0 > before);
        }
    }
    assert!(shared > 10, "{shared}");
}

/// Terminals A = "a", AB = "ab+c", X = "x"; `start: A X | AB`. After "ab" or
/// "abb" (one DFA state, the last accept "a"), the frame is a memo point
/// (X is emittable but not in its R) whose `v` ("b", "bb") differs.
///
/// ```text
/// DFA                     LALR (columns A AB X $END)       GOTO (S)
/// 0 -a-> 1 {A}            s0: A -> s1, AB -> s2            s0: S -> s3
/// 1 -b-> 2                s1: X -> s4
/// 2 -b-> 2, 2 -c-> 3 {AB} s2: $END reduce S -> AB
/// 0 -x-> 4 {X}            s3: $END accept; s4: $END reduce S -> A X
/// ```
fn long_remainders() -> grid_kernels::EngineTables {
    let mut trans = vec![-1; 5 * 256];
    trans[b'a' as usize] = 1;
    trans[b'x' as usize] = 4;
    trans[256 + b'b' as usize] = 2;
    trans[2 * 256 + b'b' as usize] = 2;
    trans[2 * 256 + b'c' as usize] = 3;
    #[rustfmt::skip]
    let action = vec![
        2, 3, 0, 0,
        0, 0, 5, 0,
        0, 0, 0, -3,
        0, 0, 0, -1,
        0, 0, 0, -2,
    ];
    let raw = grid_kernels::RawGrammar {
        n_terminals: 3,
        dfa_trans: trans,
        dfa_accept: vec![vec![0], vec![1], vec![0], vec![2], vec![4]],
        dfa_live: vec![vec![7], vec![3], vec![2], vec![2], vec![4]],
        action,
        goto: vec![-1, 3, -1, -1, -1, -1, -1, -1, -1, -1],
        n_nonterminals: 2,
        rule_lhs: vec![0, 1, 1],
        rule_len: vec![1, 2, 1],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1, 2],
        ignored: vec![0],
    };
    let g = grid_kernels::GrammarTables::new(raw).unwrap();
    let words: [&[u8]; 8] = [b"a", b"b", b"c", b"x", b"bc", b"bx", b"xx", b"ab"];
    let t = grid_kernels::Trie::new(grid_kernels::RawTrie::pack(&words, &[false; 8])).unwrap();
    grid_kernels::EngineTables::new(std::sync::Arc::new(g), std::sync::Arc::new(t))
}

#[test]
fn a_shared_chunk_takes_each_frames_v() {
    let e = long_remainders();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = common::paths(t);
    let node = |s: &[u8]| paths.iter().position(|p| p == s).unwrap() as u32;
    for allowed in [0b011u64, 0b001] {
        let chunks = Chunks::new(1, 1 << 20, 1 << 20);
        for (k, pending) in [&b"ab"[..], b"abb", b"abbb", b"ab"].into_iter().enumerate() {
            let plain = walk_from(g, t, 0, pending, &[allowed], false);
            let mut a = g.allowed_sets(&[allowed]);
            let mut out = WalkOutput::default();
            walk_into(g, t, 0, pending, &mut a, false, Some(&chunks), &mut out);
            assert_eq!(out, plain, "{pending:?} under {allowed:b}");
            // By hand: "a", "bx" and "x" (with "xx" below it) end the accepted
            // "a" (CD entries with tail v + the token); "b", "bc", "c" stay in AB
            // (CI only where AB is allowed).
            let v = &pending[1..];
            let cd: Vec<(u32, u32, Vec<u8>)> = out
                .cd
                .iter()
                .map(|x| (x.node, x.terminal, out.tail(x).to_vec()))
                .collect();
            let with = |s: &[u8]| [v, s].concat();
            assert_eq!(
                cd,
                vec![
                    (node(b"a"), 0, with(b"a")),
                    (node(b"bx"), 0, with(b"bx")),
                    (node(b"x"), 0, with(b"x")),
                ],
                "{pending:?} under {allowed:b}"
            );
            // The root's frame and the frame below "b" are memo points, made
            // by the first walk; each later walk is one hit at the root.
            assert_eq!(
                chunks.stats(),
                (k as u64, 2),
                "{pending:?} under {allowed:b}"
            );
        }
    }
}

#[test]
fn holes_and_sub_chunks_count_their_bytes() {
    // Pending " " under {A}, min_nodes 3: the root's frame (WS pending, its
    // last accept " ") is a memo point; its chunk: an output part with CI
    // nodes 1 and 2 (4 bytes each, no CD entry, no flag), then "a" and "b"
    // end the whitespace: ignored picks, two holes of 16 + 1 tail byte
    // each; key 28 bytes: 8 + 34 + 28 = 70. Filling the hole at "a" walks
    // the frame after "a", a memo point too: 64 bytes (see above).
    let chunks = Chunks::new(3, 1 << 20, 1 << 20);
    let e = toy();
    let plain = walk_from(&e.grammar, &e.trie, 0, b" ", &[A], false);
    assert_eq!(walk_memo(&chunks, b" ", A, false), plain);
    assert_eq!(chunks.stats(), (0, 2));
    assert_eq!(chunks.usage().0, 70 + 64);
    // min_nodes 1: node 1 (" ", 2 nodes) is a memo point as well: the root's
    // chunk holds an output part with CI node 1 (4), then its sub-chunk (32 +
    // an empty v), then the holes (34); key 28: 98. Node 1's chunk: CI node
    // 2 (4) + key 28 = 32; the frame after "a": 64.
    let chunks = Chunks::new(1, 1 << 20, 1 << 20);
    assert_eq!(walk_memo(&chunks, b" ", A, false), plain);
    assert_eq!(chunks.stats(), (0, 3));
    assert_eq!(chunks.usage().0, 98 + 32 + 64);
}

#[test]
fn a_sub_chunk_counts_its_v() {
    // long_remainders, pending "ab" under {A, AB}, min_nodes 1: the root's
    // frame (state 2, last accept "a"). Its chunk: "a" ends "a" (CD entry,
    // flagged tail "a"), "b" stays in AB (CI) and enters the frame below "b",
    // a memo point: output part 4 + 16 + 1 + 1 flag = 22; the sub-chunk with
    // v = "b": 32 + 1 = 33; "c" (CI) and "x" (CD, flagged tail "x"): 22; key
    // 28: 105. The frame below "b": "bc" CI, "bx" CD with flagged tail "x":
    // 22 + key 28 = 50.
    let e = long_remainders();
    let (g, t) = (&e.grammar, &e.trie);
    let chunks = Chunks::new(1, 1 << 20, 1 << 20);
    let mut a = g.allowed_sets(&[0b011]);
    let mut out = WalkOutput::default();
    walk_into(g, t, 0, b"ab", &mut a, false, Some(&chunks), &mut out);
    assert_eq!(out, walk_from(g, t, 0, b"ab", &[0b011], false));
    assert_eq!(chunks.stats(), (0, 2));
    assert_eq!(chunks.usage().0, 105 + 50);
}

#[test]
fn memo_keys_keep_the_lexicon_categories() {
    // Frames under allowed sets that differ only in lexicon categories must
    // not share a chunk unless the frame cannot tell them apart: walked in
    // turn through one memo, every walk equals the plain walk.
    let (raw, _, _) = common::fixture();
    let cats = raw.lexicon_categories.clone();
    assert!(
        cats.iter().any(|&w| w != 0),
        "the fixture has lexicon categories"
    );
    let (e, configs) = common::fixture_engine();
    let (g, t) = (&e.grammar, &e.trie);
    let chunks = Chunks::new(1, 1, 1 << 30);
    let variants = |a: &[u64]| -> Vec<Vec<u64>> {
        let with =
            |f: &dyn Fn(u64, u64) -> u64| a.iter().zip(&cats).map(|(&a, &c)| f(a, c)).collect();
        vec![
            a.to_vec(),
            with(&|a, c| a & !c),
            with(&|a, c| a | c),
            with(&|a, c| a ^ c),
        ]
    };
    let mut compared = 0;
    for round in 0..2 {
        for c in &configs {
            for allowed in variants(&c.allowed) {
                if allowed.iter().all(|&w| w == 0) {
                    continue;
                }
                // "employees" is a whole word and the prefix of another word
                // of its category ("employees_public"): the last accept and
                // the lexicon node both name the category.
                for pending in [
                    &c.remainder[..],
                    b"s",
                    b"a",
                    b"'",
                    b"employees",
                    b"employees_",
                ] {
                    let plain = walk_from(g, t, 0, pending, &allowed, false);
                    let mut a = g.allowed_sets(&allowed);
                    let mut out = WalkOutput::default();
                    walk_into(g, t, 0, pending, &mut a, false, Some(&chunks), &mut out);
                    assert_eq!(out, plain, "round {round}, {pending:?}");
                    compared += 1;
                }
            }
        }
    }
    // After "employees", a whole word and the prefix of another word of its
    // category ("employees_public"), the last accept (p) and the lexicon node
    // both name the category. In the fixture the name terminal outranks the
    // category in the pick order, so the category never decides a walk the
    // name terminal could make; with the order reversed, A = {name,
    // category} picks the category and A = {name} the name: one memo must
    // keep them apart.
    let mut swapped = raw.clone();
    let cat = (0..raw.n_terminals)
        .find(|&k| cats[k / 64] >> (k % 64) & 1 == 1)
        .unwrap() as i32;
    swapped.pick_order.retain(|&x| x != cat);
    swapped.pick_order.insert(0, cat);
    let sg = grid_kernels::GrammarTables::new(swapped).unwrap();
    sg.check_invariants();
    let memo = Chunks::new(1, 1, 1 << 30);
    let mut differ = 0;
    for k in (0..raw.n_terminals).filter(|&k| k as i32 != cat) {
        let mut one = vec![0u64; cats.len()];
        one[k / 64] |= 1 << (k % 64);
        let with: Vec<u64> = one.iter().zip(&cats).map(|(&a, &c)| a | c).collect();
        for pending in [&b"employees"[..], b"employees_", b"orders", b"emp"] {
            let mut outs = Vec::new();
            for allowed in [&with, &one] {
                let plain = walk_from(&sg, t, 0, pending, allowed, false);
                let mut a = sg.allowed_sets(allowed);
                let mut out = WalkOutput::default();
                walk_into(&sg, t, 0, pending, &mut a, false, Some(&memo), &mut out);
                assert_eq!(out, plain, "terminal {k}, {allowed:x?}, {pending:?}");
                outs.push(plain);
                compared += 1;
            }
            differ += usize::from(outs[0] != outs[1] && !outs[1].cd.is_empty());
        }
    }
    assert!(
        differ > 0,
        "a name terminal alone walks otherwise than with the category"
    );
    assert!(compared > 50, "{compared}");
}
