//! Golden parity: the kernels against grid-core's Python path, without Python.
//!
//! `fixtures/analyst_toy.txt` was written by `make_fixture.py` from grid-core
//! (the analyst projection of the CRUD grammar, its lexicon, the toy
//! vocabulary) and records, per configuration reached by replays, the allowed
//! set, the root walk, the whole mask and one lexer advance. Every one must come
//! out of the kernels identically. A change in grid-core's semantics shows up
//! here as a diff of the regenerated fixture.

mod common;

use std::sync::Arc;

use common::{hex_bytes, hex_set, ints, states, Config};
use grid_kernels::cache::Payload;
use grid_kernels::chunks::Chunks;
use grid_kernels::walk::{walk_from, walk_into, WalkOutput};
use grid_kernels::{EngineTables, GrammarTables, Trie};

/// The fixture's tables, checked, and its configurations (`common::fixture`).
fn load() -> (EngineTables, Vec<Config>) {
    let (raw, trie, configs) = common::fixture();
    let trans = raw.dfa_trans.clone();
    let g = GrammarTables::new(raw).expect("fixture grammar is valid");
    // The compressed DFA answers every transition as grid-core's table does.
    let dfa = g.dfa();
    assert!(dfa.n_classes() < 256);
    for (i, &q) in trans.iter().enumerate() {
        assert_eq!(dfa.trans(i / 256, (i % 256) as u8), q);
    }
    let trie = Trie::new(trie).expect("fixture trie is valid");
    g.check_invariants();
    trie.check_invariants();
    (EngineTables::new(Arc::new(g), Arc::new(trie)), configs)
}

#[test]
fn fixture_covers_eos_cd_and_wide_masks() {
    let (_, configs) = load();
    assert!(configs.len() >= 100, "{} configurations", configs.len());
    assert!(configs.iter().any(|c| c.get("mask_meta")[0] == "1"));
    assert!(configs.iter().any(|c| c.get("mask_meta")[2] != "0"));
    assert!(configs.iter().any(|c| c.get("walk_cd").is_empty()));
}

#[test]
fn allowed_sets_match() {
    let (e, configs) = load();
    let w = e.grammar.width();
    let mut arena = e.arena();
    for c in &configs {
        let node = arena.from_states(&states(c.get("config")[0])).unwrap();
        let expected = hex_set(c.get("allowed")[0], w);
        assert_eq!(
            arena.allowed(node).unwrap(),
            expected.as_slice(),
            "{:?}",
            c.get("config")
        );
    }
    arena.check_invariants();
}

#[test]
fn root_walks_match() {
    let (e, configs) = load();
    let w = e.grammar.width();
    for c in &configs {
        let remainder = hex_bytes(c.get("config")[1]);
        let allowed = hex_set(c.get("allowed")[0], w);
        let out = walk_from(&e.grammar, &e.trie, 0, &remainder, &allowed, false);
        assert_eq!(walk_shape(&out), expected_walk(c), "{:?}", c.get("config"));
    }
}

/// The root walk the fixture records for `c`.
fn expected_walk(c: &Config) -> (Vec<u32>, Vec<String>) {
    let cd = c.get("walk_cd").iter().map(|s| s.to_string()).collect();
    (ints::<u32>(c.get("walk_ci")), cd)
}

/// A walk in the fixture's notation: CI nodes and `node:terminal:tail`.
fn walk_shape(out: &grid_kernels::walk::WalkOutput) -> (Vec<u32>, Vec<String>) {
    let cd = out
        .cd
        .iter()
        .map(|x| {
            let tail: String = out.tail(x).iter().map(|b| format!("{b:02x}")).collect();
            let tail = if tail.is_empty() { "-".into() } else { tail };
            format!("{}:{}:{}", x.node, x.terminal, tail)
        })
        .collect();
    (out.ci.clone(), cd)
}

#[test]
fn walks_through_the_subtree_memo_match() {
    // Every subtree a memo point (min_nodes 1), then only larger ones; every
    // chunk with a bitmask of its ids (bits_min 1), then larger ones only;
    // each configuration walked twice in each mode (nodes, ids), so later
    // walks are assembled from the memo earlier ones filled.
    let (e, configs) = load();
    let w = e.grammar.width();
    for (min_nodes, bits_min) in [(1, 1), (2, 16), (8, 1 << 20)] {
        let chunks = Chunks::new(min_nodes, bits_min, 1 << 30);
        let mut after_first = (0, 0);
        for round in 0..2 {
            for c in &configs {
                let remainder = hex_bytes(c.get("config")[1]);
                let allowed = hex_set(c.get("allowed")[0], w);
                let mut a = e.grammar.allowed_sets(&allowed);
                let expected = expected_walk(c);
                let at = format!(
                    "min_nodes {min_nodes}, bits_min {bits_min}, round {round}: {:?}",
                    c.get("config")
                );
                let ch = Some(&chunks);
                let mut out = WalkOutput::default();
                walk_into(
                    &e.grammar, &e.trie, 0, &remainder, &mut a, false, ch, &mut out,
                );
                assert_eq!(walk_shape(&out), expected, "{at}");
                let mut ids = WalkOutput::ids(&e.trie);
                walk_into(
                    &e.grammar, &e.trie, 0, &remainder, &mut a, false, ch, &mut ids,
                );
                let got = ids.ids.take().unwrap().into_payload(e.trie.n_vocab());
                assert_eq!(got, Payload::of_nodes(&e.trie, &expected.0), "{at}");
                assert_eq!(walk_shape(&ids).1, expected.1, "{at}");
            }
            if round == 0 {
                after_first = chunks.stats();
            }
        }
        let (hits, misses) = chunks.stats();
        assert!(after_first.1 > 0, "min_nodes {min_nodes}: nothing memoized");
        assert_eq!(
            misses, after_first.1,
            "min_nodes {min_nodes}: the second round walked a memoized subtree again"
        );
        assert!(
            hits > after_first.0,
            "min_nodes {min_nodes}: the memo unused"
        );
    }
}

#[test]
fn whole_masks_and_fills_match() {
    let (e, configs) = load();
    for c in &configs {
        let mut arena = e.arena();
        let config = e
            .config(
                &mut arena,
                &states(c.get("config")[0]),
                &hex_bytes(c.get("config")[1]),
            )
            .unwrap();
        let m = e.compute_mask(&mut arena, &config).unwrap();
        let ci: Vec<u32> = ints(c.get("mask_ci"));
        let cd: Vec<u32> = ints(c.get("mask_cd"));
        assert_eq!(m.ci_ids(&e.trie), ci, "{:?}", c.get("config"));
        assert_eq!(m.cd_ids(&e.trie), cd, "{:?}", c.get("config"));
        let meta: Vec<usize> = ints(c.get("mask_meta"));
        assert_eq!(
            (usize::from(m.eos), m.cd_entries, m.cd_classes),
            (meta[0], meta[1], meta[2])
        );
        // The fill from nodes equals the fill from grid-core's ids.
        let mut from_nodes = vec![0u32; e.trie.n_words()];
        let mut from_ids = vec![0u32; e.trie.n_words()];
        let n = e.fill_mask(&m, &mut from_nodes).unwrap();
        let k = e.fill_ids(&[&ci, &cd], m.eos, &mut from_ids).unwrap();
        assert_eq!(from_nodes, from_ids);
        assert_eq!(n, k);
        arena.check_invariants();
    }
}

#[test]
fn lexer_advances_match() {
    let (e, configs) = load();
    for c in &configs {
        let mut arena = e.arena();
        let config = e
            .config(
                &mut arena,
                &states(c.get("config")[0]),
                &hex_bytes(c.get("config")[1]),
            )
            .unwrap();
        let adv = c.get("advance");
        let after = e
            .grammar
            .advance(&mut arena, &config, &hex_bytes(adv[0]))
            .unwrap()
            .expect("the recorded token was in the mask");
        let got: Vec<i64> = arena
            .states(after.node)
            .into_iter()
            .map(i64::from)
            .collect();
        assert_eq!(got, states(adv[1]));
        assert_eq!(after.remainder, hex_bytes(adv[2]));
    }
}
