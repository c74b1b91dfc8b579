//! Hand-checkable toy tables (no Python needed).
//!
//! Terminals: 0 `A` = "a", 1 `B` = "b", 2 `WS` = " +" (ignored); `$END` = 3.
//! Grammar: `start: A B` (rule 0 `$start -> S`, rule 1 `S -> A B`).
//!
//! ```text
//! DFA            LALR (columns A B WS $END)      trie (preorder)       ids
//! 0 -a-> 1 {A}   s0: A->s1           S->s3       0 root
//! 0 -b-> 2 {B}   s1: B->s2                       1 " "        2
//! 0 -' '-> 3     s2: $END reduce 1               2 "  "       5
//! 3 -' '-> 3     s3: $END accept                 3 "a"        0
//!                                                4 "a "       (inner)
//!                                                5 "a b"      4
//!                                                6 "ab"       3
//!                                                7 "b"        1
//!                                                8 "ba"       6
//! ```
//! EOS is id 7 (special: not in the trie); n_vocab = 8.

mod common;

use std::sync::Arc;

use common::{toy_grammar, toy_trie};
use grid_kernels::audit::Kind;
use grid_kernels::cache::Payload;
use grid_kernels::parser::StackArena;
use grid_kernels::scanner::START;
use grid_kernels::walk::walk_from;
use grid_kernels::{
    CdEntry, Engine, EngineTables, Filled, GrammarTables, KernelError, RawGrammar, Session,
    Threads, Trie, WalkOutput,
};

const A: u64 = 1;
const B: u64 = 2;
const WS: u64 = 4;
const END: u64 = 8;

fn engine() -> EngineTables {
    let g = GrammarTables::new(toy_grammar()).expect("toy grammar is valid");
    // Byte classes: 'a', 'b', ' ' and every other byte.
    assert_eq!(g.dfa().n_classes(), 4);
    assert_eq!(g.dfa().trans(3, b' '), 3);
    assert_eq!(g.dfa().trans(3, b'a'), -1);
    let t = Trie::new(toy_trie()).expect("toy trie is valid");
    assert_eq!(t.token_nodes(0), [1, 2, 3, 5, 6, 7, 8]);
    assert_eq!(t.token_nodes(3), [3, 5, 6]);
    assert_eq!(t.token_nodes(4), [5]);
    g.check_invariants();
    t.check_invariants();
    EngineTables::new(Arc::new(g), Arc::new(t))
}

fn entries(out: &WalkOutput) -> Vec<(u32, u32, Vec<u8>)> {
    out.cd
        .iter()
        .map(|e: &CdEntry| (e.node, e.terminal, out.tail(e).to_vec()))
        .collect()
}

#[test]
fn root_walk_splits_ci_and_cd() {
    let e = engine();
    let out = walk_from(&e.grammar, &e.trie, 0, b"", &[A], false);
    assert_eq!(out.ci, vec![1, 2, 3]);
    assert_eq!(
        entries(&out),
        vec![(4, 0, b" ".to_vec()), (6, 0, b"b".to_vec())]
    );
}

#[test]
fn walk_expecting_b() {
    let e = engine();
    // Stack [0, 1] expects B: "b" is live, " " is ignored, "a" is dead.
    let out = walk_from(&e.grammar, &e.trie, 0, b"", &[B], false);
    assert_eq!(out.ci, vec![1, 2, 7]);
    assert_eq!(entries(&out), vec![(8, 1, b"a".to_vec())]);
}

#[test]
fn pending_remainder_emits_at_once() {
    let e = engine();
    // The remainder "a" then the trie root's children: every first byte kills "a".
    let out = walk_from(&e.grammar, &e.trie, 0, b"a", &[A], false);
    assert!(out.ci.is_empty());
    let nodes: Vec<u32> = out.cd.iter().map(|x| x.node).collect();
    assert_eq!(nodes, vec![1, 3, 7]);
    assert!(out.cd.iter().all(|x| x.terminal == 0));
    assert_eq!(out.tail(&out.cd[1]), b"a");
    // A pending remainder the allowed set cannot pick is rejected whole.
    let dead = walk_from(&e.grammar, &e.trie, 0, b"b", &[A], false);
    assert_eq!(dead, WalkOutput::default());
}

#[test]
fn allowed_sets_and_shift() {
    let e = engine();
    let mut arena = e.arena();
    let s0 = arena.from_states(&[0]).unwrap();
    assert_eq!(arena.allowed(s0).unwrap(), &[A]);
    let s1 = arena.shift(s0, 0).unwrap();
    assert_eq!(arena.states(s1), vec![0, 1]);
    assert_eq!(arena.allowed(s1).unwrap(), &[B]);
    let s2 = arena.shift(s1, 1).unwrap();
    assert_eq!(arena.allowed(s2).unwrap(), &[END]);
    assert!(arena.accepts(s2).unwrap());
    // Interning: the same stack is the same node.
    assert_eq!(arena.from_states(&[0, 1]).unwrap(), s1);
    assert!(matches!(
        arena.shift(s0, 1),
        Err(KernelError::InvalidTerminal { .. })
    ));
    assert!(matches!(
        arena.from_states(&[0, 9]),
        Err(KernelError::InvalidStack { .. })
    ));
    assert!(matches!(
        arena.from_states(&[]),
        Err(KernelError::InvalidStack { .. })
    ));
    arena.check_invariants();
}

#[test]
fn lexer_advance_and_eos() {
    let e = engine();
    let g = &e.grammar;
    let mut arena = e.arena();
    let start = e.config(&mut arena, &[0], b"").unwrap();
    let c = g.advance(&mut arena, &start, b"a  b").unwrap().unwrap();
    assert_eq!(arena.states(c.node), vec![0, 1]);
    assert_eq!(c.remainder, b"b");
    assert!(g.eos_allowed(&mut arena, &c).unwrap());
    assert!(!g.eos_allowed(&mut arena, &start).unwrap());
    assert!(g.advance(&mut arena, &start, b"bb").unwrap().is_none());
    assert_eq!(g.scan(b""), Some(START));
    assert!(matches!(
        e.config(&mut arena, &[0], b"ab"),
        Err(KernelError::InvalidRemainder { .. })
    ));
}

#[test]
fn whole_mask_and_fill() {
    let e = engine();
    let mut arena = e.arena();
    let config = e.config(&mut arena, &[0], b"").unwrap();
    let m = e.compute_mask(&mut arena, &config).unwrap();
    assert_eq!(m.ci_nodes, vec![1, 2, 3]);
    assert_eq!(m.cd_nodes, vec![5, 6]);
    assert_eq!((m.cd_entries, m.cd_classes, m.eos), (2, 1, false));
    assert_eq!(m.ci_ids(&e.trie), vec![0, 2, 5]);
    assert_eq!(m.cd_ids(&e.trie), vec![4, 3]);
    let mut words = vec![u32::MAX; 1];
    assert_eq!(e.fill_mask(&m, &mut words).unwrap(), 5);
    assert_eq!(words, vec![0b0011_1101]);
    assert_eq!(e.fill_ids(&[&[0, 2], &[5]], true, &mut words).unwrap(), 4);
    assert_eq!(words, vec![0b1010_0101]);
    // Every check happens before a write.
    let mut wrong = vec![7u32; 2];
    assert!(matches!(
        e.fill_ids(&[&[1]], false, &mut wrong),
        Err(KernelError::BufferSize {
            expected: 1,
            got: 2,
            ..
        })
    ));
    assert_eq!(wrong, vec![7, 7]);
    assert!(matches!(
        e.fill_ids(&[&[8]], false, &mut words),
        Err(KernelError::TokenOutOfRange { token: 8, .. })
    ));
    assert_eq!(words, vec![0b1010_0101]);
}

#[test]
fn checked_walk_rejects_bad_input() {
    let e = engine();
    assert!(matches!(
        e.walk(9, b"", &[A], false),
        Err(KernelError::NodeOutOfRange {
            node: 9,
            n_nodes: 9
        })
    ));
    assert!(matches!(
        e.walk(-1, b"", &[A], false),
        Err(KernelError::NodeOutOfRange { .. })
    ));
    assert!(matches!(
        e.walk(0, b"", &[16], false),
        Err(KernelError::InvalidAllowed {
            bit_len: 5,
            n_bits: 4
        })
    ));
    assert_eq!(e.walk(3, b"a", &[A], true).unwrap().ci, vec![3]);
}

#[test]
fn invalid_tables_are_refused() {
    let mut t = toy_trie();
    t.size[3] = 9;
    assert!(matches!(
        Trie::new(t),
        Err(KernelError::InvalidTables { table: "trie", .. })
    ));
    let mut t = toy_trie();
    t.size[2] = 0;
    assert!(Trie::new(t).is_err());
    let mut t = toy_trie();
    t.edge.swap(3, 7);
    assert!(Trie::new(t).is_err());
    let mut t = toy_trie();
    t.alias_ids[0] = 8;
    assert!(Trie::new(t).is_err());
    let mut t = toy_trie();
    t.token[4] = 1;
    assert!(Trie::new(t).is_err());

    let mut g = toy_grammar();
    g.dfa_trans[5] = 4;
    assert!(matches!(
        GrammarTables::new(g),
        Err(KernelError::InvalidTables { table: "DFA", .. })
    ));
    let mut g = toy_grammar();
    g.action[0] = 9;
    assert!(GrammarTables::new(g).is_err());
    let mut g = toy_grammar();
    g.dfa_accept[1] = vec![END];
    assert!(GrammarTables::new(g).is_err());
    let mut g = toy_grammar();
    g.pick_order = vec![0, 0, 1];
    assert!(GrammarTables::new(g).is_err());
    let mut g = toy_grammar();
    g.lexicon_children = vec![vec![(b'a', 0)]];
    assert!(GrammarTables::new(g).is_err());
    let mut g = toy_grammar();
    g.goto[1] = 4;
    assert!(GrammarTables::new(g).is_err());
}

#[test]
fn errors_read_well() {
    let e = KernelError::BufferSize {
        expected: 4,
        got: 3,
        unit: "32-bit words",
    };
    assert_eq!(
        e.to_string(),
        "bitmask buffer has 3 32-bit words, expected 4 32-bit words"
    );
    let e = KernelError::InvalidRemainder {
        remainder: b"a\x00".to_vec(),
    };
    assert!(e.to_string().contains("b'a\\x00'"));
}

#[test]
fn tables_are_shared_across_threads() {
    let e = Arc::new(engine());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                let mut arena: StackArena = e.arena();
                let c = e.config(&mut arena, &[0], b"").unwrap();
                e.compute_mask(&mut arena, &c).unwrap()
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}

/// The toy grammar with its terminals renumbered into a 131-terminal space
/// (A = 0, B = 70, WS = 130): three words per set, bits in every word.
fn wide_engine() -> EngineTables {
    const MAP: [usize; 4] = [0, 70, 130, 131];
    let width = 3;
    let widen = |set: &Vec<u64>| {
        let mut out = vec![0u64; width];
        for (t, &to) in MAP.iter().enumerate() {
            if set[0] >> t & 1 == 1 {
                out[to / 64] |= 1 << (to % 64);
            }
        }
        out
    };
    let narrow = toy_grammar();
    let mut action = vec![0; 4 * 132];
    for s in 0..4 {
        for (t, &to) in MAP.iter().enumerate() {
            action[s * 132 + to] = narrow.action[s * 4 + t];
        }
    }
    let raw = RawGrammar {
        n_terminals: 131,
        dfa_accept: narrow.dfa_accept.iter().map(widen).collect(),
        dfa_live: narrow.dfa_live.iter().map(widen).collect(),
        action,
        lexicon_prefix_cats: vec![vec![0; width]],
        lexicon_word_cats: vec![vec![0; width]],
        lexicon_categories: vec![0; width],
        pick_order: vec![0, 70, 130],
        ignored: widen(&vec![WS]),
        ..narrow
    };
    let g = GrammarTables::new(raw).expect("wide toy grammar is valid");
    g.check_invariants();
    EngineTables::new(Arc::new(g), Arc::new(Trie::new(toy_trie()).unwrap()))
}

#[test]
fn more_than_64_terminals_walk_the_same() {
    let e = wide_engine();
    assert_eq!(e.grammar.width(), 3);
    let mut arena = e.arena();
    let s0 = arena.from_states(&[0]).unwrap();
    assert_eq!(arena.allowed(s0).unwrap(), &[1, 0, 0]);
    let s1 = arena.shift(s0, 0).unwrap();
    assert_eq!(arena.allowed(s1).unwrap(), &[0, 1 << 6, 0]);
    let s2 = arena.shift(s1, 70).unwrap();
    assert_eq!(arena.allowed(s2).unwrap(), &[0, 0, 1 << 3]);
    let out = walk_from(&e.grammar, &e.trie, 0, b"", &[0, 1 << 6, 0], false);
    assert_eq!(out.ci, vec![1, 2, 7]);
    assert_eq!(entries(&out), vec![(8, 70, b"a".to_vec())]);
    let config = e.config(&mut arena, &[0], b"").unwrap();
    let m = e.compute_mask(&mut arena, &config).unwrap();
    assert_eq!((m.ci_nodes, m.cd_nodes), (vec![1, 2, 3], vec![5, 6]));
    let config = e.config(&mut arena, &[0, 1, 2], b" ").unwrap();
    assert!(e.compute_mask(&mut arena, &config).unwrap().eos);
}

// ------------------------------------------------------------------ sessions

fn serving() -> Arc<Engine> {
    Arc::new(Engine::new(engine(), Threads::Global, "toy", None))
}

/// The reference: `compute_mask` of the session's configuration on a fresh
/// arena, filled (what `GridGuide.mask` packs).
fn reference_fill(e: &EngineTables, states: &[u32], remainder: &[u8]) -> Vec<u32> {
    let mut arena = e.arena();
    let states: Vec<i64> = states.iter().map(|&s| i64::from(s)).collect();
    let config = e.config(&mut arena, &states, remainder).unwrap();
    let m = e.compute_mask(&mut arena, &config).unwrap();
    let mut words = vec![0u32; 1];
    e.fill_mask(&m, &mut words).unwrap();
    words
}

#[test]
fn session_fills_match_compute_mask_on_every_short_replay() {
    // Every sequence of up to four admitted tokens, breadth first: at each
    // step the session's fill equals the uncached reference, and a token is
    // accepted iff it is in that mask.
    let engine = serving();
    let mut frontier = vec![Session::new(Arc::clone(&engine), 0, true).unwrap()];
    let mut checked = 0;
    for _ in 0..4 {
        let mut next = Vec::new();
        for s in &mut frontier {
            let mut row = vec![u32::MAX; 1];
            assert_ne!(s.fill(&mut row, true).unwrap(), Filled::Cold);
            let (states, remainder) = s.config();
            assert_eq!(row, reference_fill(&engine.tables, &states, &remainder));
            checked += 1;
            for t in 0..8i64 {
                let mut f = s.fork();
                let admitted = row[0] >> t & 1 == 1;
                assert_eq!(
                    f.accept_token(t, Kind::Sampled).is_ok(),
                    admitted,
                    "token {t} at {states:?}"
                );
                f.check_invariants();
                if !admitted {
                    assert_eq!(f.config(), s.config(), "a refused token changes nothing");
                } else if !f.is_terminated() {
                    next.push(f);
                }
            }
        }
        frontier = next;
    }
    assert!(checked > 20, "{checked}");
}

#[test]
fn spellings_come_off_the_trie() {
    let t = Trie::new(toy_trie()).unwrap();
    let spelled: Vec<&[u8]> = (0..8).map(|i| t.spelling(i)).collect();
    assert_eq!(
        spelled,
        vec![&b"a"[..], b"b", b" ", b"ab", b"a b", b"  ", b"ba", b""]
    );
    let mut twice = toy_trie();
    twice.alias_offset = vec![0, 0, 1, 2, 3, 3, 4, 5, 6, 8];
    twice.alias_ids = vec![2, 5, 0, 4, 3, 1, 6, 4];
    assert!(matches!(
        Trie::new(twice),
        Err(KernelError::InvalidTables { table: "trie", .. })
    ));
}

#[test]
fn session_replay_eos_rollback_and_fork() {
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 0, true).unwrap();
    let mut row = vec![0u32; 1];
    s.fill(&mut row, true).unwrap();
    assert_eq!(row, vec![0b0011_1101]);
    assert!(!s.eos_allowed().unwrap());
    s.accept_token(3, Kind::Sampled).unwrap(); // "ab": A shifted, "b" pending
    assert_eq!(s.config(), (vec![0, 1], b"b".to_vec()));
    assert!(s.eos_allowed().unwrap());
    let mut other = s.fork();
    s.fill(&mut row, true).unwrap();
    assert_eq!(row[0] >> 7 & 1, 1, "EOS admitted after \"ab\"");
    s.accept_token(7, Kind::Sampled).unwrap();
    assert!(s.is_terminated() && !s.eos_allowed().unwrap());
    assert_eq!(s.steps(), 2);
    s.rollback(2).unwrap();
    assert_eq!((s.steps(), s.config()), (0, (vec![0], Vec::new())));
    // The fork did not move.
    assert_eq!(other.config(), (vec![0, 1], b"b".to_vec()));
    other.accept_token(2, Kind::Sampled).unwrap(); // " ": B emitted and shifted, " " pending
    assert_eq!(other.config(), (vec![0, 1, 2], b" ".to_vec()));
    other.rollback(1).unwrap();
    assert_eq!(other.config(), (vec![0, 1], b"b".to_vec()));
    s.check_invariants();
    other.check_invariants();
}

#[test]
fn session_contract_errors_change_nothing() {
    let engine = serving();
    let mut s = Session::new(engine, 0, true).unwrap();
    let guide = |r: Result<(), KernelError>| match r {
        Err(KernelError::Guide {
            step,
            token,
            reason,
        }) => (step, token, reason),
        other => panic!("expected a guide error, got {other:?}"),
    };
    assert_eq!(
        guide(s.accept_token(8, Kind::Sampled)),
        (0, Some(8), "outside the vocabulary".into())
    );
    assert_eq!(
        guide(s.accept_token(-1, Kind::Sampled)).2,
        "outside the vocabulary"
    );
    assert_eq!(
        guide(s.accept_token(7, Kind::Sampled)).2,
        "EOS before the output is a sentence"
    );
    assert_eq!(
        guide(s.accept_token(1, Kind::Sampled)).2,
        "b'b' is not in the mask"
    );
    assert_eq!(
        guide(s.rollback(1)),
        (0, None, "cannot roll back 1 of 0 tokens".into())
    );
    let mut wrong = vec![9u32; 2];
    assert!(matches!(
        s.fill(&mut wrong, true),
        Err(KernelError::BufferSize {
            expected: 1,
            got: 2,
            ..
        })
    ));
    assert_eq!(wrong, vec![9, 9]);
    s.accept_token(4, Kind::Sampled).unwrap(); // "a b"
    s.accept_token(7, Kind::Sampled).unwrap();
    assert_eq!(
        guide(s.accept_token(0, Kind::Sampled)),
        (2, Some(0), "the guide has already accepted EOS".into())
    );
    let mut row = vec![9u32; 1];
    assert!(matches!(
        s.fill(&mut row, true),
        Err(KernelError::Guide {
            step: 2,
            token: None,
            ..
        })
    ));
    assert_eq!(row, vec![9], "no write on an error");
}

#[test]
fn warm_fills_need_no_walk() {
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 0, true).unwrap();
    let mut row = vec![0u32; 1];
    assert_eq!(s.fill(&mut row, false).unwrap(), Filled::Cold);
    assert_eq!(row, vec![0], "a cold miss writes nothing");
    assert_eq!(s.fill(&mut row, true).unwrap(), Filled::Walked);
    let cached = engine.shared.cache.len();
    assert!(
        cached >= 1,
        "the root walk is cached (small CD sub-walks walk in place)"
    );
    let mut again = Session::new(Arc::clone(&engine), 0, true).unwrap();
    let mut row2 = vec![0u32; 1];
    assert_eq!(again.fill(&mut row2, false).unwrap(), Filled::Row);
    assert_eq!((row2, engine.shared.cache.len()), (row.clone(), cached));
    // Another namespace is another key.
    let mut other = Session::new(Arc::clone(&engine), 1, false).unwrap();
    assert_eq!(other.fill(&mut row, false).unwrap(), Filled::Cold);
}

#[test]
fn parallel_walks_equal_one_thread() {
    let e = engine();
    let engine = Engine::new(e.clone(), Threads::Pool(3), "toy", None);
    for (pending, allowed) in [(&b""[..], A), (b"", B), (b"a", A), (b" ", A | B)] {
        let one = walk_from(&e.grammar, &e.trie, 0, pending, &[allowed], false);
        // A cold walk gathers token ids: those of the CI nodes.
        let ids = Payload::of_nodes(&e.trie, &one.ci);
        let cold = |threads: Option<&Threads>| {
            let mut out = engine.cold_walk(0, pending, &[allowed], threads);
            let got = out.ids.take().unwrap().into_payload(e.trie.n_vocab());
            (got, out)
        };
        let expected = (
            ids,
            WalkOutput {
                ci: vec![],
                ..one.clone()
            },
        );
        for threads in [Threads::Pool(1), Threads::Pool(2), Threads::Pool(4)] {
            let t = Some(&threads);
            assert_eq!(engine.walk(0, pending, &[allowed], false, t).unwrap(), one);
            assert_eq!(cold(t), expected);
        }
        assert_eq!(cold(None), expected);
    }
}

#[test]
fn session_audit_records_each_accepted_token() {
    // Each record carries the mask its step filled (entry id over the row,
    // blocked = vocabulary - admitted), the configuration hash of that step
    // and the token; rollback drops records, a refused token adds none.
    use grid_kernels::audit::{config_hash, extend_digest, mask_entry_id};
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 0, true).unwrap();
    let mut rows = Vec::new();
    let mut tokens_taken = Vec::new();
    for kind in [Kind::Forced, Kind::Sampled, Kind::Reserve] {
        let mut row = vec![0u32; 1];
        s.fill(&mut row, true).unwrap();
        let (h, id, blocked) = s.step_audit().unwrap();
        assert_eq!(h, s.config_hash());
        assert_eq!(id, mask_entry_id(&row));
        assert_eq!(blocked, 8 - row[0].count_ones());
        let admitted = |t: i64| row[0] >> t & 1 == 1;
        if let Some(refused) = (0..7).find(|&t| !admitted(t)) {
            assert!(s.accept_token(refused, Kind::Sampled).is_err());
        }
        let token = (0..7).find(|&t| admitted(t)).expect("a non-EOS token");
        rows.push(row);
        s.accept_token(token, kind).unwrap();
        tokens_taken.push(token as u32);
    }
    let (_, remainder) = s.config();
    assert_eq!(s.config_hash(), {
        let stack = {
            let mut arena = engine.tables.arena();
            let (states, _) = s.config();
            let states: Vec<i64> = states.into_iter().map(i64::from).collect();
            let node = arena.from_states(&states).unwrap();
            arena.hash(node)
        };
        config_hash(stack, remainder.len() as u64, extend_digest(0, &remainder))
    });
    let chain = s.chain().unwrap();
    assert_eq!(chain.len(), 3);
    let kinds: Vec<Kind> = chain.records().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![Kind::Forced, Kind::Sampled, Kind::Reserve]);
    let tokens: Vec<u32> = chain.records().iter().map(|r| r.token).collect();
    assert_eq!(tokens, tokens_taken);
    for (r, row) in chain.records().iter().zip(&rows) {
        assert_eq!(r.entry_id, mask_entry_id(row));
    }
    let before = chain.hashes().to_vec();
    s.rollback(2).unwrap();
    assert_eq!(s.chain().unwrap().len(), 1);
    assert_eq!(s.chain().unwrap().hashes()[0], before[0]);
    // No fill before this accept: the record's mask is filled into scratch.
    s.accept_token(i64::from(tokens_taken[1]), Kind::Sampled)
        .unwrap();
    assert_eq!(
        s.chain().unwrap().records()[1].entry_id,
        mask_entry_id(&rows[1])
    );
    assert_eq!(s.chain().unwrap().hashes()[1], before[1]);
    s.check_invariants();
    let off = Session::new(engine, 0, false).unwrap();
    assert!(off.step_audit().is_none());
}
