//! The engine (`src/engine.rs`) without Python, for the mutation campaign
//! (issue 14): a cold walk is the reference walk (a root walk from its
//! remainder without its own token, a sub-walk from its tail with it), a
//! root walk is keyed by its remainder's normal form and any other walk by
//! its bytes, a miss counts one walk and a hit none, and `usage` reports the
//! caps set and the bytes each memo holds (a row counts its ids and 128).
//! What only grid-core's tests reach (the shared tier's keys and waits,
//! thread pools) is judged there.

mod common;

use std::sync::Arc;

use grid_kernels::engine::{Form, Lookup, ARENA_CAP, PAR_VERDICT_NODES};
use grid_kernels::scanner::START;
use grid_kernels::walk::{walk_from, WalkOutput};
use grid_kernels::{Engine, EngineTables, GrammarTables, RawTrie, Session, Threads, Trie};

use common::fixture_engine;

/// The bitmask of a walk's CI part, in node mode or id mode alike.
fn ci_words(trie: &Trie, w: &WalkOutput) -> Vec<u32> {
    let mut words = vec![0u32; trie.n_words()];
    match &w.ids {
        Some(set) => set.clone().into_payload(trie.n_vocab()).write(&mut words),
        None => {
            for &node in &w.ci {
                for &id in trie.ids_at(node as usize) {
                    words[id as usize / 32] |= 1 << (id % 32);
                }
            }
        }
    }
    words
}

fn cd(w: &WalkOutput) -> Vec<(u32, u32, Vec<u8>)> {
    w.cd.iter()
        .map(|e| (e.node, e.terminal, w.tail(e).to_vec()))
        .collect()
}

#[test]
fn cold_walks_are_the_reference_walks() {
    let (tables, configs) = fixture_engine();
    let engine = Engine::new(tables, Threads::Pool(1), "fixture", None);
    let (g, trie) = (&*engine.tables.grammar, &*engine.tables.trie);
    let mut arena = engine.tables.arena();
    let (mut subs, mut own_tokens) = (0, 0);
    for c in configs.iter().take(60) {
        let root = engine.cold_walk(0, &c.remainder, &c.allowed, None);
        let want = walk_from(g, trie, 0, &c.remainder, &c.allowed, false);
        assert_eq!(ci_words(trie, &root), ci_words(trie, &want));
        assert_eq!(cd(&root), cd(&want));
        // Each CD entry's sub-walk, from its tail under the allowed set after
        // its terminal's shift, with its own token.
        let stack = arena.from_states(&c.states).unwrap();
        for (node, terminal, tail) in cd(&want).into_iter().take(8) {
            let shifted = arena.shift(stack, terminal as usize).unwrap();
            let allowed = arena.allowed(shifted).unwrap().to_vec();
            let got = engine.cold_walk(node, &tail, &allowed, None);
            let want = walk_from(g, trie, node as usize, &tail, &allowed, true);
            let words = ci_words(trie, &want);
            assert_eq!(ci_words(trie, &got), words, "node {node}");
            assert_eq!(cd(&got), cd(&want), "node {node}");
            let own = trie.ids_at(node as usize);
            own_tokens += usize::from(
                own.iter()
                    .any(|&id| words[id as usize / 32] >> (id % 32) & 1 == 1),
            );
            subs += 1;
        }
    }
    assert!(
        subs > 20 && own_tokens >= 2,
        "{subs} sub-walks, {own_tokens} admitting their own token"
    );
}

#[test]
fn a_root_walk_is_keyed_by_its_normal_form_and_any_other_by_its_bytes() {
    let (tables, configs) = fixture_engine();
    let engine = Engine::new(tables, Threads::Pool(1), "fixture", None);
    let c = configs
        .iter()
        .find(|c| !c.remainder.is_empty())
        .expect("a configuration with a remainder");
    let key = |root, raw| {
        engine
            .key_of(root, &c.remainder, None, &c.allowed, raw)
            .unwrap()
    };
    assert!(matches!(key(0, false).form, Form::Normal { .. }));
    assert_eq!(key(0, true).form, Form::Raw(&c.remainder));
    assert_eq!(key(3, false).form, Form::Raw(&c.remainder));
    assert_eq!(key(3, true).form, Form::Raw(&c.remainder));
    assert!((0..4).all(|r| key(r, false).root == r));
}

#[test]
fn a_miss_counts_one_walk_and_a_hit_none() {
    let (tables, configs) = fixture_engine();
    let engine = Engine::new(tables, Threads::Pool(1), "fixture", None);
    let c = &configs[0];
    let mut ctx = Lookup {
        cold: false,
        ..Lookup::default()
    };
    let lookup = |ctx: &mut Lookup| {
        engine
            .entry(ctx, 0, &c.remainder, None, &c.allowed)
            .unwrap()
    };
    assert!(lookup(&mut ctx).is_none(), "a miss that may not walk");
    assert_eq!(ctx.walks, 0);
    ctx.cold = true;
    let walked = lookup(&mut ctx).expect("walked");
    assert_eq!(ctx.walks, 1);
    let found = lookup(&mut ctx).expect("found");
    assert_eq!(ctx.walks, 1, "a hit walks nothing");
    assert!(Arc::ptr_eq(&walked, &found));
    // Another namespace is another cache key.
    ctx.namespace = 5;
    lookup(&mut ctx).expect("walked");
    assert_eq!(ctx.walks, 2);
}

#[test]
fn usage_reports_the_caps_and_what_each_memo_holds() {
    let engine = Arc::new(Engine::new(common::toy(), Threads::Pool(1), "toy", None));
    engine.set_caps(1 << 20, 2 << 20, 3 << 20);
    let caps = engine.usage().map(|(_, cap, evicted)| (cap, evicted));
    assert_eq!(caps, [(1 << 20, 0), (2 << 20, 0), (3 << 20, 0)]);
    assert_eq!(engine.usage()[0].0, 0, "nothing walked yet");
    let mut s = Session::new(Arc::clone(&engine), 0, false).unwrap();
    let mut row = vec![0u32; 1];
    s.fill(&mut row, true).unwrap();
    assert!(engine.usage()[0].0 > 0, "the root walk's entry is held");
    // The row memo holds the start's row: its ids and 128 bytes.
    let stacks = engine.stacks();
    let mut stacks = stacks.lock().unwrap();
    assert_eq!(stacks.rows(), 1);
    let node = stacks.arena.from_states(&[0]).unwrap();
    let allowed = stacks.arena.allowed(node).unwrap().to_vec();
    let mut ctx = Lookup::default();
    let root = engine
        .entry(&mut ctx, 0, b"", Some(&START), &allowed)
        .unwrap()
        .expect("cached by the fill");
    let kept = stacks.row(&root, node).expect("the start's row");
    let held = kept.row.ids.size() + 128;
    assert_eq!(stacks.usage(), (held, 3 << 20, 0));
    drop(stacks);
    assert_eq!(engine.usage()[2], (held, 3 << 20, 0));
    // A second configuration, a second row.
    s.accept_token(0, grid_kernels::audit::Kind::Sampled)
        .unwrap();
    s.fill(&mut row, true).unwrap();
    assert_eq!(engine.stacks().lock().unwrap().rows(), 2);
}

#[test]
fn canonical_keys_tell_walks_apart() {
    let (tables, configs) = fixture_engine();
    let engine = Engine::new(tables, Threads::Pool(1), "fixture", None);
    let mut seen = std::collections::HashMap::new();
    for c in configs.iter().take(30) {
        for (namespace, root, raw) in [(0, 0, false), (1, 0, false), (0, 0, true), (0, 2, false)] {
            let key = engine
                .key_of(root, &c.remainder, None, &c.allowed, raw)
                .unwrap();
            let mut lookup = Vec::new();
            engine.walk_key(&mut lookup, namespace, &key, &c.allowed);
            let canonical = engine.canonical_key(namespace, &key, &c.allowed);
            assert_eq!(canonical, engine.canonical_key(namespace, &key, &c.allowed));
            // One lookup key, one canonical key: distinct walks, distinct keys.
            let before = seen.insert(canonical.clone(), lookup.clone());
            assert!(before.is_none_or(|l| l == lookup), "{canonical:?}");
        }
    }
    assert!(seen.len() > 60, "{} distinct keys", seen.len());
}

#[test]
fn a_shared_tier_is_attached_once() {
    let shared = grid_kernels::engine::Shared::new("family");
    assert!(shared.remote().is_none());
    let tier = |port: u16| {
        let url = format!("redis://127.0.0.1:{port}/");
        Arc::new(grid_kernels::remote::Remote::new(&url, &[7; 32], "family").unwrap())
    };
    let (first, second) = (tier(1), tier(2));
    assert!(shared.attach(Arc::clone(&first)));
    assert!(!shared.attach(second), "a second tier is refused");
    assert!(
        shared.attach(Arc::clone(&first)),
        "the same one again is no change"
    );
    assert!(Arc::ptr_eq(shared.remote().unwrap(), &first));
}

#[test]
fn a_full_arena_generation_gives_way_to_a_fresh_one() {
    let engine = Engine::new(common::toy(), Threads::Pool(1), "toy", None);
    engine.set_caps(1 << 20, 1 << 20, 5 << 20);
    let first = engine.stacks();
    // A chain of ARENA_CAP nodes: full, not over.
    let top = first
        .lock()
        .unwrap()
        .arena
        .from_states(&vec![0; ARENA_CAP])
        .unwrap();
    assert_eq!(first.lock().unwrap().arena.len(), ARENA_CAP);
    assert!(
        Arc::ptr_eq(&first, &engine.stacks()),
        "a full generation still serves"
    );
    first.lock().unwrap().arena.push(top, 0);
    let second = engine.stacks();
    assert!(
        !Arc::ptr_eq(&first, &second),
        "one node over: a new generation"
    );
    let fresh = second.lock().unwrap();
    assert_eq!((fresh.arena.len(), fresh.usage()), (0, (0, 5 << 20, 0)));
}

/// The fixture's grammar over its vocabulary plus every " xyz" of three
/// lowercase letters: a class of tokens after an identifier whose members'
/// subtrees hold more than [`PAR_VERDICT_NODES`] nodes.
fn wide_engine(threads: usize) -> Engine {
    let (g, raw, _) = common::fixture();
    let mut words = common::spellings(&raw);
    words.pop(); // EOS, put back last
    for a in b'a'..=b'z' {
        for b in b'a'..=b'z' {
            for c in b'a'..=b'z' {
                let w = vec![b' ', a, b, c];
                if !words.contains(&w) {
                    words.push(w);
                }
            }
        }
    }
    words.push(Vec::new());
    let mut special = vec![false; words.len()];
    *special.last_mut().unwrap() = true;
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let mut trie = RawTrie::pack(&refs, &special);
    trie.eos_ids = vec![(words.len() - 1) as i32];
    let tables = EngineTables::new(
        Arc::new(GrammarTables::new(g).unwrap()),
        Arc::new(Trie::new(trie).unwrap()),
    );
    Engine::new(tables, Threads::Pool(threads), "wide", None)
}

#[test]
fn a_verdict_walked_on_threads_is_the_one_walked_alone() {
    let (one, two) = (wide_engine(1), wide_engine(2));
    let (_, _, configs) = common::fixture();
    let trie = &*one.tables.trie;
    let (mut compared, mut wide, mut walked) = (0, 0, 0);
    for c in &configs {
        let root = |e: &Engine| {
            let mut ctx = Lookup {
                cold: true,
                ..Lookup::default()
            };
            e.entry(&mut ctx, 0, &c.remainder, None, &c.allowed)
                .unwrap()
                .unwrap()
        };
        let (r1, r2) = (root(&one), root(&two));
        let mut arena = one.tables.arena();
        let node = arena.from_states(&c.states).unwrap();
        for (k1, k2) in r1.classes.iter().zip(&r2.classes) {
            let Ok(shifted) = arena.shift(node, k1.terminal as usize) else {
                continue;
            };
            let mut key = Vec::new();
            one.verdict_key_into(arena.allowed(shifted).unwrap(), &mut key);
            let nodes: usize = k1
                .members
                .iter()
                .map(|(n, _)| trie.node(n as usize).size as usize)
                .sum();
            let mut verdict = |e: &Engine, k: &grid_kernels::cache::Class| {
                let mut ctx = Lookup {
                    cold: true,
                    ..Lookup::default()
                };
                let v = e.verdict(&mut ctx, &k.members, &key).unwrap().unwrap();
                let computed = ctx.walks; // 1, or 0 when another class computed it
                let again = e.verdict(&mut ctx, &k.members, &key).unwrap().unwrap();
                assert!(Arc::ptr_eq(&v, &again), "memoized");
                assert_eq!(ctx.walks, computed, "a memoized verdict walks nothing");
                walked += computed;
                let deeper: Vec<_> = v
                    .deeper
                    .iter()
                    .map(|d| {
                        (
                            d.terminal,
                            d.members
                                .iter()
                                .map(|(n, t)| (n, t.to_vec()))
                                .collect::<Vec<_>>(),
                        )
                    })
                    .collect();
                (v.ci.clone(), deeper)
            };
            assert_eq!(
                verdict(&one, k1),
                verdict(&two, k2),
                "terminal {}",
                k1.terminal
            );
            compared += 1;
            wide += usize::from(nodes >= PAR_VERDICT_NODES);
            if wide >= 3 && compared >= 30 {
                assert!(
                    walked > compared,
                    "{walked} verdicts computed of {compared}, twice each"
                );
                return;
            }
        }
    }
    panic!("only {compared} verdicts, {wide} of them on threads");
}
