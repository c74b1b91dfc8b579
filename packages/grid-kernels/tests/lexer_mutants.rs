//! The lexer (`src/lexer.rs`: emission, advance, read, finalize, the EOS
//! gate) on a hand-checkable grammar, for the mutation campaign (issue 14).
//! Every expected value is worked out by hand from the tables below.
//!
//! Terminals: 0 `A` = "a", 1 `B` = "b", 2 `WS` = " +" (ignored), 3 `C` =
//! "abc" (no state of the grammar takes it); `$END` = 4. Grammar `start: A B`.
//!
//! ```text
//! DFA                       LALR (columns A B WS C $END)
//! 0 -a-> 1 {A}   live A C   s0: A->s1   (WS->s1 in the variant)   S->s3
//! 0 -b-> 2 {B}   live B     s1: B->s2
//! 0 -' '-> 3 {WS}           s2: $END reduce S -> A B
//! 3 -' '-> 3 {WS}           s3: $END accept
//! 1 -b-> 4 {}    live C
//! 4 -c-> 5 {C}
//! ```
//!
//! So "ab" scans to state 4 with its last accept "a" (length 1): read on, a
//! byte that kills it emits A and requeues "b"; finalized, it emits A then B.

use std::sync::Arc;

use grid_kernels::lexer::Config;
use grid_kernels::parser::{NodeId, StackArena};
use grid_kernels::scanner::{Scan, START};
use grid_kernels::{GrammarTables, RawGrammar};

const A: u64 = 1;
const B: u64 = 2;
const WS: u64 = 4;
const C: u64 = 8;

/// The grammar above; with `ws_shifts`, state 0 also shifts WS (an ignored
/// terminal the grammar names: the emission must still pick it).
fn grammar(ws_shifts: bool) -> Arc<GrammarTables> {
    let mut trans = vec![-1; 6 * 256];
    trans[b'a' as usize] = 1;
    trans[b'b' as usize] = 2;
    trans[b' ' as usize] = 3;
    trans[3 * 256 + b' ' as usize] = 3;
    trans[256 + b'b' as usize] = 4;
    trans[4 * 256 + b'c' as usize] = 5;
    let ws = if ws_shifts { 2 } else { 0 };
    #[rustfmt::skip]
    let action = vec![
        2, 0, ws, 0, 0,
        0, 3, 0, 0, 0,
        0, 0, 0, 0, -2,
        0, 0, 0, 0, -1,
    ];
    let raw = RawGrammar {
        n_terminals: 4,
        dfa_trans: trans,
        dfa_accept: vec![vec![0], vec![A], vec![B], vec![WS], vec![0], vec![C]],
        dfa_live: vec![
            vec![A | B | WS | C],
            vec![A | C],
            vec![B],
            vec![WS],
            vec![C],
            vec![C],
        ],
        action,
        goto: vec![-1, 3, -1, -1, -1, -1, -1, -1],
        n_nonterminals: 2,
        rule_lhs: vec![0, 1],
        rule_len: vec![1, 2],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1, 2, 3],
        ignored: vec![WS],
    };
    Arc::new(GrammarTables::new(raw).expect("valid grammar"))
}

fn scan(g: &GrammarTables, data: &[u8]) -> Scan {
    g.scan(data).expect("scans")
}

/// The arena and its stacks [0], [0 1], [0 1 2].
fn stacks(g: &Arc<GrammarTables>) -> (StackArena, [NodeId; 3]) {
    let mut arena = StackArena::new(Arc::clone(g));
    let s0 = arena.from_states(&[0]).unwrap();
    let s1 = arena.from_states(&[0, 1]).unwrap();
    let s2 = arena.from_states(&[0, 1, 2]).unwrap();
    (arena, [s0, s1, s2])
}

#[test]
fn the_tables_scan_as_drawn() {
    let g = grammar(false);
    let ab = scan(&g, b"ab");
    assert_eq!((ab.q, ab.la_len, ab.la_q), (4, 1, 1));
    let abc = scan(&g, b"abc");
    assert_eq!((abc.q, abc.la_len), (5, 3));
    assert_eq!(scan(&g, b"  ").la_len, 2);
    assert_eq!(g.scan(b"ba"), None);
}

#[test]
fn emissions_pick_the_last_accept_under_the_stack() {
    let g = grammar(false);
    let (mut arena, [s0, s1, s2]) = stacks(&g);
    let pick =
        |arena: &mut StackArena, n, data: &[u8]| g.emit_pick(arena, n, &scan(&g, data)).unwrap();
    assert_eq!(pick(&mut arena, s0, b"a"), Some((s1, 0)));
    assert_eq!(pick(&mut arena, s0, b"ab"), Some((s1, 0)));
    assert_eq!(pick(&mut arena, s1, b"b"), Some((s2, 1)));
    // An ignored pick leaves the stack as it is.
    assert_eq!(pick(&mut arena, s0, b" "), Some((s0, 2)));
    assert_eq!(pick(&mut arena, s2, b"  "), Some((s2, 2)));
    // Not allowed: B at [0], A at [0 1], C anywhere; no accept at all.
    assert_eq!(pick(&mut arena, s0, b"b"), None);
    assert_eq!(pick(&mut arena, s1, b"a"), None);
    assert_eq!(pick(&mut arena, s0, b"abc"), None);
    assert_eq!(g.emit_pick(&mut arena, s0, &START).unwrap(), None);
    // emit: the same stacks.
    assert_eq!(g.emit(&mut arena, s0, &scan(&g, b"a")).unwrap(), Some(s1));
    assert_eq!(g.emit(&mut arena, s1, &scan(&g, b" ")).unwrap(), Some(s1));
    assert_eq!(g.emit(&mut arena, s1, &scan(&g, b"a")).unwrap(), None);
    assert_eq!(g.emit(&mut arena, s0, &START).unwrap(), None);
}

#[test]
fn an_ignored_terminal_the_stack_also_takes_is_still_ignored() {
    // With WS in [0]'s allowed set, " " at [0] is still an ignored pick.
    let g = grammar(true);
    let (mut arena, [s0, s1, _]) = stacks(&g);
    assert_eq!(arena.allowed(s0).unwrap(), &[A | WS]);
    let sp = scan(&g, b" ");
    assert_eq!(g.emit_pick(&mut arena, s0, &sp).unwrap(), Some((s0, 2)));
    assert_eq!(g.emit_pick(&mut arena, s1, &sp).unwrap(), Some((s1, 2)));
}

/// `read_with` of `buf[from..]` from `(node, buf[start..from], scan)`: the
/// result and the emissions (a runaway loop fails instead of hanging).
#[allow(clippy::type_complexity)]
fn read(
    g: &GrammarTables,
    arena: &mut StackArena,
    node: NodeId,
    buf: &[u8],
    start: usize,
    from: usize,
) -> (Option<(NodeId, usize, Scan)>, Vec<(u32, usize, usize)>) {
    let sc = scan(g, &buf[start..from]);
    let mut seen = Vec::new();
    let got = g
        .read_with(arena, node, sc, buf, start, from, |t, a, b| {
            assert!(seen.len() < 50, "runaway emissions");
            seen.push((t, a, b));
        })
        .unwrap();
    (got, seen)
}

#[test]
fn reads_emit_at_each_death_and_requeue() {
    let g = grammar(false);
    let (mut arena, [s0, s1, s2]) = stacks(&g);
    // "ab " from [0]: ' ' kills state 4: A [0, 1); "b" again, ' ' kills it:
    // B [1, 2); the remainder " " (WS) at [0 1 2].
    let (got, seen) = read(&g, &mut arena, s0, b"ab ", 0, 0);
    assert_eq!(got, Some((s2, 2, scan(&g, b" "))));
    assert_eq!(seen, [(0, 0, 1), (1, 1, 2)]);
    // The same bytes after two others, from offset 2.
    let (got, seen) = read(&g, &mut arena, s0, b"zzab ", 2, 2);
    assert_eq!(got, Some((s2, 4, scan(&g, b" "))));
    assert_eq!(seen, [(0, 2, 3), (1, 3, 4)]);
    // A remainder "a" already scanned, then " b": A [0, 1), WS [1, 2)
    // (ignored: the stack stays [0 1]), the remainder "b".
    let (got, seen) = read(&g, &mut arena, s0, b"a b", 0, 1);
    assert_eq!(got, Some((s1, 2, scan(&g, b"b"))));
    assert_eq!(seen, [(0, 0, 1), (2, 1, 2)]);
    // Offsets past the start: "x" + remainder "a" + "  b".
    let (got, seen) = read(&g, &mut arena, s0, b"xa  b", 1, 2);
    assert_eq!(got, Some((s1, 4, scan(&g, b"b"))));
    assert_eq!(seen, [(0, 1, 2), (2, 2, 4)]);
    // Nothing to read: the configuration as it is.
    let (got, seen) = read(&g, &mut arena, s1, b"xb", 1, 2);
    assert_eq!(got, Some((s1, 1, scan(&g, b"b"))));
    assert!(seen.is_empty());
    // "ba" from [0]: 'a' kills "b", and B is not allowed there.
    let (got, seen) = read(&g, &mut arena, s0, b"ba", 0, 0);
    assert_eq!(got, None);
    assert!(seen.is_empty());
    // read is read_with without the reports.
    assert_eq!(
        g.read(&mut arena, s0, START, b"zzab ", 2, 2).unwrap(),
        Some((s2, 4, scan(&g, b" ")))
    );
    assert_eq!(g.read(&mut arena, s0, START, b"ba", 0, 0).unwrap(), None);
}

#[test]
fn advance_keeps_the_remainder_after_the_last_emission() {
    let g = grammar(false);
    let (mut arena, [s0, s1, s2]) = stacks(&g);
    let start = Config {
        node: s0,
        remainder: Vec::new(),
        scan: START,
    };
    let c = g.advance(&mut arena, &start, b"ab").unwrap().unwrap();
    assert_eq!(
        (c.node, &c.remainder[..], c.scan),
        (s0, &b"ab"[..], scan(&g, b"ab"))
    );
    let c = g.advance(&mut arena, &c, b" b").unwrap().unwrap();
    assert_eq!(
        (c.node, &c.remainder[..], c.scan),
        (s2, &b"b"[..], scan(&g, b"b"))
    );
    let c = Config {
        node: s0,
        remainder: b"a".to_vec(),
        scan: scan(&g, b"a"),
    };
    let d = g.advance(&mut arena, &c, b"  b").unwrap().unwrap();
    assert_eq!(
        (d.node, &d.remainder[..], d.scan),
        (s1, &b"b"[..], scan(&g, b"b"))
    );
    assert_eq!(g.advance(&mut arena, &start, b"ba").unwrap(), None);
    // "a" then "a": A, and the second "a" stays (liveness is not asked).
    let d = g.advance(&mut arena, &c, b"a").unwrap().unwrap();
    assert_eq!(
        (d.node, &d.remainder[..], d.scan),
        (s1, &b"a"[..], scan(&g, b"a"))
    );
    // At [0 1], " " after "a" emits A, which the stack refuses.
    let c1 = Config { node: s1, ..c };
    assert_eq!(g.advance(&mut arena, &c1, b" ").unwrap(), None);
}

#[test]
fn finalizing_emits_every_lexeme_left() {
    let g = grammar(false);
    let (mut arena, [s0, s1, s2]) = stacks(&g);
    // "ab" at [0]: A [0, 1), then "b" is read again: B [1, 2).
    let ab = scan(&g, b"ab");
    assert_eq!(g.finalize(&mut arena, s0, &ab, b"ab").unwrap(), Some(s2));
    let mut seen = Vec::new();
    let ok = g
        .finalize_with(&mut arena, s0, ab, b"ab", 0, |t, a, b| {
            assert!(seen.len() < 50, "runaway emissions");
            seen.push((t, a, b));
        })
        .unwrap();
    assert!(ok);
    assert_eq!(seen, [(0, 0, 1), (1, 1, 2)]);
    // The same remainder from offset 1 of "xab".
    let mut seen = Vec::new();
    let ok = g
        .finalize_with(&mut arena, s0, ab, b"xab", 1, |t, a, b| {
            seen.push((t, a, b))
        })
        .unwrap();
    assert!(ok);
    assert_eq!(seen, [(0, 1, 2), (1, 2, 3)]);
    // Nothing left: done at once, nothing emitted.
    let mut seen = Vec::new();
    let ok = g
        .finalize_with(&mut arena, s1, START, b"x", 1, |t, a, b| {
            seen.push((t, a, b))
        })
        .unwrap();
    assert!(ok && seen.is_empty());
    assert_eq!(g.finalize(&mut arena, s1, &START, b"").unwrap(), Some(s1));
    // "ab" at [0 1]: A is not allowed; "abc" (C) nowhere.
    let none = |_: u32, _: usize, _: usize| {};
    assert!(!g.finalize_with(&mut arena, s1, ab, b"ab", 0, none).unwrap());
    assert_eq!(g.finalize(&mut arena, s1, &ab, b"ab").unwrap(), None);
    let abc = scan(&g, b"abc");
    assert!(!g
        .finalize_with(&mut arena, s0, abc, b"abc", 0, none)
        .unwrap());
    assert_eq!(g.finalize(&mut arena, s0, &abc, b"abc").unwrap(), None);
    // "a" at [0]: A alone (a stack that does not accept yet).
    let a = scan(&g, b"a");
    assert_eq!(g.finalize(&mut arena, s0, &a, b"a").unwrap(), Some(s1));
    // "  " at [0 1 2]: the ignored WS, the stack kept.
    let sp = scan(&g, b"  ");
    assert_eq!(g.finalize(&mut arena, s2, &sp, b"  ").unwrap(), Some(s2));
}

#[test]
fn viability_and_the_eos_gate() {
    let g = grammar(false);
    let (mut arena, [s0, s1, s2]) = stacks(&g);
    let (a, ab, b) = (scan(&g, b"a"), scan(&g, b"ab"), scan(&g, b"b"));
    // An empty remainder is viable anywhere; else its state must be live.
    assert!(g.is_viable(&mut arena, s1, &a, true).unwrap());
    assert!(g.is_viable(&mut arena, s0, &a, false).unwrap());
    assert!(!g.is_viable(&mut arena, s1, &a, false).unwrap());
    assert!(
        !g.is_viable(&mut arena, s0, &ab, false).unwrap(),
        "only C lives"
    );
    assert!(g.is_viable(&mut arena, s1, &b, false).unwrap());
    // EOS: the remainder finalizes and $END reaches accept.
    let config = |node, r: &[u8], scan| Config {
        node,
        remainder: r.to_vec(),
        scan,
    };
    assert!(g.eos_allowed(&mut arena, &config(s0, b"ab", ab)).unwrap());
    assert!(g.eos_allowed(&mut arena, &config(s1, b"b", b)).unwrap());
    assert!(g.eos_allowed(&mut arena, &config(s2, b"", START)).unwrap());
    assert!(!g.eos_allowed(&mut arena, &config(s0, b"a", a)).unwrap());
    assert!(!g.eos_allowed(&mut arena, &config(s0, b"", START)).unwrap());
    assert!(!g.eos_allowed(&mut arena, &config(s1, b"ab", ab)).unwrap());
    assert!(g.eos_allowed_at(&mut arena, s0, &ab, b"ab").unwrap());
    assert!(g.eos_allowed_at(&mut arena, s2, &START, b"").unwrap());
    assert!(!g.eos_allowed_at(&mut arena, s1, &START, b"").unwrap());
    assert!(!g.eos_allowed_at(&mut arena, s1, &a, b"a").unwrap());
}
