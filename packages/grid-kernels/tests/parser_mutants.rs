//! The stack arena (`src/parser.rs`) for the mutation campaign (issue 14):
//! allowed sets and shifts of every stack reached on the fixture's grammar
//! against a plain LR driver over the raw ACTION/GOTO tables (reduce on
//! explicit state lists, nothing interned); the toy's node hashes against
//! Python's hashlib; counts, range checks and the error of an undefined goto.

mod common;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use grid_kernels::parser::StackArena;
use grid_kernels::{GrammarTables, KernelError, RawGrammar};

/// What the LR driver does with terminal `t` (T = `$END`) on `states`.
#[derive(Debug, PartialEq)]
enum Step {
    Shift(Vec<u32>),
    Accept,
    Error,
}

fn drive(g: &RawGrammar, states: &[u32], t: usize) -> Step {
    let w = g.n_terminals + 1;
    let mut stack = states.to_vec();
    loop {
        let top = *stack.last().unwrap() as usize;
        let a = g.action[top * w + t];
        if a > 0 {
            stack.push((a - 1) as u32);
            return Step::Shift(stack);
        }
        if a == 0 {
            return Step::Error;
        }
        let rule = (-a - 1) as usize;
        if rule == 0 {
            return if t == g.n_terminals {
                Step::Accept
            } else {
                Step::Error
            };
        }
        let n = g.rule_len[rule] as usize;
        stack.truncate(stack.len() - n);
        let top = *stack.last().unwrap() as usize;
        let to = g.goto[top * g.n_nonterminals + g.rule_lhs[rule] as usize];
        assert!(to >= 0);
        stack.push(to as u32);
    }
}

/// Every stack reached from `[0]` (breadth first, at most 400): its allowed
/// set, acceptance and shifts against [`drive`]; the number of stacks seen.
fn check_against_driver(raw: &RawGrammar) -> usize {
    let g = Arc::new(GrammarTables::new(raw.clone()).unwrap());
    let t_end = raw.n_terminals;
    let mut arena = StackArena::new(Arc::clone(&g));
    assert!(arena.is_empty());
    let mut seen: BTreeSet<Vec<u32>> = BTreeSet::new();
    let mut queue: VecDeque<Vec<u32>> = VecDeque::from([vec![0]]);
    let mut accepting = 0;
    while let Some(states) = queue.pop_front() {
        if seen.len() >= 400 || !seen.insert(states.clone()) {
            continue;
        }
        let as_i64: Vec<i64> = states.iter().map(|&s| i64::from(s)).collect();
        let node = arena.from_states(&as_i64).unwrap();
        assert_eq!(arena.states(node), states);
        let allowed = arena.allowed(node).unwrap().to_vec();
        for t in 0..=t_end {
            let want = drive(raw, &states, t);
            let bit = allowed[t / 64] >> (t % 64) & 1 == 1;
            assert_eq!(bit, want != Step::Error, "{states:?} terminal {t}");
            if t == t_end {
                assert_eq!(arena.accepts(node).unwrap(), want == Step::Accept);
                accepting += usize::from(want == Step::Accept);
                continue;
            }
            match want {
                Step::Shift(next) => {
                    let n = arena.shift(node, t).unwrap();
                    assert_eq!(arena.states(n), next, "{states:?} shift {t}");
                    assert_eq!(arena.shift(node, t).unwrap(), n, "memoized");
                    if next.len() <= 24 {
                        queue.push_back(next);
                    }
                }
                _ => assert!(matches!(
                    arena.shift(node, t),
                    Err(KernelError::InvalidTerminal { .. })
                )),
            }
        }
    }
    assert!(accepting > 0);
    assert!(arena.len() >= seen.len());
    arena.check_invariants();
    seen.len()
}

#[test]
fn allowed_sets_and_shifts_match_an_lr_driver() {
    let (raw, _, _) = common::fixture();
    assert!(check_against_driver(&raw) >= 40);
    assert_eq!(check_against_driver(&common::toy_grammar()), 3);
}

/// `S -> X a | Y b; X -> c; Y -> c` (terminals a 0, b 1, c 2, `$END` 3): after
/// "c" the parser reduces by X on `a` and by Y on `b`, two rules in one row.
fn two_reductions() -> RawGrammar {
    let mut trans = vec![-1; 4 * 256];
    trans[b'a' as usize] = 1;
    trans[b'b' as usize] = 2;
    trans[b'c' as usize] = 3;
    #[rustfmt::skip]
    let action = vec![
        0, 0, 2, 0,
        -4, -5, 0, 0,
        0, 0, 0, -1,
        6, 0, 0, 0,
        0, 7, 0, 0,
        0, 0, 0, -2,
        0, 0, 0, -3,
    ];
    let mut goto = vec![-1; 7 * 4];
    goto[1..4].copy_from_slice(&[2, 3, 4]);
    RawGrammar {
        n_terminals: 3,
        dfa_trans: trans,
        dfa_accept: vec![vec![0], vec![1], vec![2], vec![4]],
        dfa_live: vec![vec![7], vec![1], vec![2], vec![4]],
        action,
        goto,
        n_nonterminals: 4,
        rule_lhs: vec![0, 1, 1, 2, 3],
        rule_len: vec![1, 2, 2, 1, 1],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1, 2],
        ignored: vec![0],
    }
}

#[test]
fn terminals_reducing_by_different_rules_are_simulated_apart() {
    let raw = two_reductions();
    assert_eq!(check_against_driver(&raw), 4);
    let mut arena = StackArena::new(Arc::new(GrammarTables::new(raw).unwrap()));
    let c = arena.from_states(&[0, 1]).unwrap();
    assert_eq!(arena.allowed(c).unwrap(), [0b11], "a (via X) and b (via Y)");
    let (via_y, via_x) = (arena.shift(c, 1).unwrap(), arena.shift(c, 0).unwrap());
    assert_eq!(arena.states(via_y), [0, 4, 6]);
    assert_eq!(arena.states(via_x), [0, 3, 5]);
}

#[test]
fn toy_hashes_counts_and_range_checks() {
    let e = common::toy();
    let mut arena = StackArena::new(Arc::clone(&e.grammar));
    assert_eq!((arena.len(), arena.is_empty()), (0, true));
    let s0 = arena.from_states(&[0]).unwrap();
    assert_eq!((arena.len(), arena.is_empty()), (1, false));
    assert_eq!(arena.hash(s0), 0, "the bottom hashes to 0");
    // python: low64(blake2b(u64 parent || u32 state || u32 symbol, 16)):
    // state 1 is reached on A (symbol 0), state 2 on B (1), state 3 on S
    // (T + 1 + 1 = 5).
    let s1 = arena.shift(s0, 0).unwrap();
    assert_eq!(arena.hash(s1), 0x40f5_9993_2aff_4e84);
    let s2 = arena.shift(s1, 1).unwrap();
    assert_eq!(arena.hash(s2), 0xc515_fbd3_beb4_8c22);
    let s3 = arena.from_states(&[0, 3]).unwrap();
    assert_eq!(arena.hash(s3), 0x0edd_37be_71dd_e821);
    assert_eq!(arena.len(), 4);
    assert_eq!(arena.from_states(&[0, 1]).unwrap(), s1);
    assert_eq!(arena.len(), 4);
    assert_eq!(format!("{arena:?}"), "StackArena(4 nodes)");
    assert_eq!((arena.parent(s1), arena.parent(s0)), (Some(s0), None));
    // States 0..4: 4 is out of range, 3 is not.
    match arena.from_states(&[0, 4]) {
        Err(KernelError::InvalidStack { detail }) => {
            assert_eq!(detail, "state 4 is out of range 0..4")
        }
        other => panic!("{other:?}"),
    }
    assert!(arena.from_states(&[3]).is_ok());
    assert!(arena.from_states(&[-1]).is_err());
    match arena.shift(s0, 3) {
        Err(KernelError::InvalidTerminal {
            terminal: 3,
            detail,
        }) => {
            assert_eq!(detail, "out of range 0..3")
        }
        other => panic!("{other:?}"),
    }
    assert!(arena.accepts(s3).unwrap());
    assert_eq!(arena.allowed(s2).unwrap(), [8]);
    assert!(arena.accepts(s2).unwrap() && !arena.accepts(s1).unwrap());
    arena.check_invariants();
}

#[test]
fn an_undefined_goto_is_an_error_not_a_state() {
    // The toy with goto(0, S) undefined: reducing S -> A B from [0, 1, 2]
    // lands in state 0 with no goto.
    let mut raw = common::toy_grammar();
    raw.goto[1] = -1;
    let g = Arc::new(GrammarTables::new(raw).unwrap());
    let mut arena = StackArena::new(g);
    let node = arena.from_states(&[0, 1, 2]).unwrap();
    match arena.allowed(node) {
        Err(KernelError::InvalidStack { detail }) => assert_eq!(
            detail,
            "goto from state 0 on a reduced nonterminal is undefined"
        ),
        other => panic!("{other:?}"),
    }
    // Popping past the bottom: [2] alone reduces two states.
    let bottom = arena.from_states(&[2]).unwrap();
    match arena.allowed(bottom) {
        Err(KernelError::InvalidStack { detail }) => {
            assert_eq!(detail, "a reduction pops past the bottom of the stack")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_goto_into_state_0_is_followed() {
    // The toy with goto(0, S) = 0: reducing S -> A B from [0, 1, 2] lands in
    // state 0 again, which takes only A: $END is not allowed there.
    let mut raw = common::toy_grammar();
    raw.goto[1] = 0;
    let g = GrammarTables::new(raw).expect("a goto into state 0 passes validation");
    let mut arena = StackArena::new(Arc::new(g));
    let node = arena.from_states(&[0, 1, 2]).unwrap();
    assert_eq!(arena.allowed(node).unwrap(), [0]);
}
