//! The walk (`src/walk.rs`) against its definition, for the mutation
//! campaign (issue 14): every token of a subtree rescanned from scratch
//! (`common::reference_walk`), on the fixture's grammar and trie and on a
//! bigger vocabulary over the same grammar whose large subtrees the walk
//! takes whole (loops and runs: string bodies, identifiers, digits,
//! whitespace, UTF-8). The single-threaded walk, the parallel walk (2, 3, 5
//! threads), the walk in id mode and the walk through the subtree memo must
//! all give the reference, node for node.

mod common;

use grid_kernels::cache::Payload;
use grid_kernels::chunks::Chunks;
use grid_kernels::trie::WIDE_MIN;
use grid_kernels::walk::{nodes_stepped, walk_from, walk_into, walk_par, IdSet, WalkOutput};
use grid_kernels::EngineTables;

use common::{big_engine, fixture, fixture_engine, paths, reference_walk};

/// The remainders tried with every allowed set: the recorded one and a few
/// that end inside a string, an identifier, a number, whitespace, a comment.
const PENDING: [&[u8]; 9] = [
    b"", b"'", b"'it", b"sa", b"1", b"  ", b"-- x", b"'\xc3", b"sel",
];

fn check_all(e: &EngineTables, configs: &[common::Config], nodes: &[usize]) -> usize {
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let mut nonempty = 0;
    for c in configs {
        let mut pendings: Vec<&[u8]> = PENDING.to_vec();
        pendings.push(&c.remainder);
        for pending in pendings {
            for &node in nodes {
                for include_self in [false, true] {
                    let want =
                        reference_walk(g, t, &paths, node, pending, &c.allowed, include_self);
                    let got = walk_from(g, t, node, pending, &c.allowed, include_self);
                    let at = format!("node {node} pending {pending:?} self {include_self}");
                    assert_eq!(got, want, "{at}");
                    nonempty += usize::from(!want.ci.is_empty() || !want.cd.is_empty());
                }
            }
        }
    }
    nonempty
}

#[test]
fn fixture_walks_match_the_definition_below_every_large_node() {
    let (e, configs) = fixture_engine();
    let t = &e.trie;
    let nodes: Vec<usize> = (0..t.n_nodes()).filter(|&i| t.node(i).size >= 3).collect();
    assert!(nodes.len() > 5);
    let nonempty = check_all(&e, &configs[..20], &nodes);
    assert!(nonempty > 100, "{nonempty}");
}

#[test]
fn big_vocabulary_walks_match_the_definition() {
    let e = big_engine();
    let (_, _, configs) = fixture();
    let t = &e.trie;
    // Subtrees large enough for the uniform checks (loops, runs).
    let wide = (0..t.n_nodes())
        .filter(|&i| t.node(i).size >= 2 * WIDE_MIN)
        .count();
    assert!(wide > 10, "{wide}");
    let nodes: Vec<usize> = (0..t.n_nodes())
        .filter(|&i| t.node(i).size >= WIDE_MIN)
        .take(12)
        .collect();
    let nonempty = check_all(&e, &configs, &nodes);
    assert!(nonempty > 500, "{nonempty}");
}

#[test]
fn parallel_id_and_memo_walks_equal_the_plain_walk() {
    let e = big_engine();
    let (_, _, configs) = fixture();
    let (g, t) = (&e.grammar, &e.trie);
    let chunks = Chunks::new(4, 8, 1 << 30);
    for c in configs.iter().step_by(3) {
        for pending in [&c.remainder[..], b"", b"'", b"sa", b" "] {
            for node in [0usize, 1] {
                let plain = walk_from(g, t, node, pending, &c.allowed, node == 1);
                for threads in [2, 3, 5] {
                    let mut out = WalkOutput::default();
                    walk_par(
                        g,
                        t,
                        node,
                        pending,
                        &c.allowed,
                        node == 1,
                        None,
                        &mut out,
                        threads,
                    );
                    assert_eq!(out, plain, "{threads} threads");
                    let mut memo = WalkOutput::default();
                    let ch = Some(&chunks);
                    walk_par(
                        g,
                        t,
                        node,
                        pending,
                        &c.allowed,
                        node == 1,
                        ch,
                        &mut memo,
                        threads,
                    );
                    assert_eq!(memo, plain, "{threads} threads through the memo");
                }
                let mut ids = WalkOutput::ids(t);
                let mut a = g.allowed_sets(&c.allowed);
                walk_into(
                    g,
                    t,
                    node,
                    pending,
                    &mut a,
                    node == 1,
                    Some(&chunks),
                    &mut ids,
                );
                let got = ids.ids.take().expect("id mode").into_payload(t.n_vocab());
                assert_eq!(got, Payload::of_nodes(t, &plain.ci));
                assert_eq!((ids.cd, ids.tails), (plain.cd.clone(), plain.tails.clone()));
                // The same in id mode over threads, from the chunks made above.
                let mut par_ids = WalkOutput::ids(t);
                walk_par(
                    g,
                    t,
                    node,
                    pending,
                    &c.allowed,
                    node == 1,
                    Some(&chunks),
                    &mut par_ids,
                    4,
                );
                let got = par_ids
                    .ids
                    .take()
                    .expect("id mode")
                    .into_payload(t.n_vocab());
                assert_eq!(got, Payload::of_nodes(t, &plain.ci));
                assert_eq!(par_ids.cd, plain.cd);
            }
        }
    }
    let (hits, misses) = chunks.stats();
    assert!(hits > 0 && misses > 0, "{hits} {misses}");
}

#[test]
fn tails_and_entries_are_offsets_into_one_buffer() {
    // Walk with a pending "'it" from the root under every recorded allowed set:
    // each CD entry's tail is the bytes after the emitted lexeme, so the
    // pending bytes plus the entry's path end with it.
    let e = big_engine();
    let (_, _, configs) = fixture();
    let paths = paths(&e.trie);
    let mut seen = 0;
    for c in &configs {
        let out = walk_from(&e.grammar, &e.trie, 0, b"sal", &c.allowed, false);
        let mut prev_end = 0;
        for x in &out.cd {
            assert_eq!(x.tail_start, prev_end, "tails are consecutive");
            prev_end = x.tail_end;
            let mut whole = b"sal".to_vec();
            whole.extend_from_slice(&paths[x.node as usize]);
            assert!(whole.ends_with(out.tail(x)));
            assert!(out.tail(x).len() < whole.len(), "a lexeme was emitted");
            seen += 1;
        }
        assert_eq!(prev_end as usize, out.tails.len());
    }
    assert!(seen > 20, "{seen}");
}

#[test]
fn id_sets_hold_what_was_added() {
    // 40 ids: 2 words; a list holds up to 2 ids, then bitmask words.
    let mut s = IdSet::new(2);
    s.add(&[39]);
    s.add(&[0]);
    let p = s.clone().into_payload(40);
    assert_eq!(p.ids(), vec![0, 39]);
    s.add(&[7]);
    let mut other = IdSet::new(2);
    other.add(&[33]);
    s.union(&other);
    let mut bits = IdSet::new(2);
    bits.or(&[1 << 5, 1 << 2]);
    s.union(&bits);
    assert_eq!(s.into_payload(40).ids(), vec![0, 5, 7, 33, 34, 39]);
}

#[test]
fn the_walks_node_is_a_memo_point_when_large_enough() {
    // tests/toy.rs's tables: pending "a" under A = {A} makes the root's frame
    // (DFA state 1, 9 nodes) a memo point; node 3 "a" (4 nodes) is below
    // min_nodes 5, so the root's chunk is the only one, looked up once per
    // walk, whether the walk is plain or parallel.
    let e = common::toy();
    let (g, t) = (&e.grammar, &e.trie);
    let plain = walk_from(g, t, 0, b"a", &[1], false);
    assert_eq!(
        plain.cd.iter().map(|x| x.node).collect::<Vec<_>>(),
        vec![1, 3, 7]
    );
    let chunks = Chunks::new(5, 1 << 20, 1 << 20);
    let mut a = g.allowed_sets(&[1]);
    let mut out = WalkOutput::default();
    walk_into(g, t, 0, b"a", &mut a, false, Some(&chunks), &mut out);
    assert_eq!(out, plain);
    assert_eq!((chunks.stats(), chunks.len()), ((0, 1), 1));
    for threads in [1, 2] {
        let mut out = WalkOutput::default();
        walk_par(g, t, 0, b"a", &[1], false, Some(&chunks), &mut out, threads);
        assert_eq!(out, plain);
    }
    assert_eq!((chunks.stats(), chunks.len()), ((2, 1), 1));
    // A leaf is never a memo point, even with min_nodes 1: nothing below it.
    let leaf = Chunks::new(1, 1 << 20, 1 << 20);
    for threads in [1, 2] {
        let mut out = WalkOutput::default();
        walk_par(g, t, 2, b"a", &[1], true, Some(&leaf), &mut out, threads);
        assert_eq!(out, walk_from(g, t, 2, b"a", &[1], true));
    }
    assert_eq!((leaf.stats(), leaf.len()), ((0, 0), 0));
}

#[test]
fn id_sets_stay_lists_up_to_their_word_count() {
    // A list of up to n_words ids (what a sparse payload can hold at most),
    // words past that.
    let mut s = IdSet::new(3);
    s.add(&[5, 6, 7]);
    assert!(format!("{s:?}").contains("words: None"), "{s:?}");
    s.add(&[8]);
    assert!(format!("{s:?}").contains("words: Some"), "{s:?}");
    assert_eq!(s.into_payload(96).ids(), vec![5, 6, 7, 8]);
}

#[test]
fn toy_walks_match_the_definition_with_and_without_an_ignored_terminal() {
    // Without an ignored terminal, the start state is dead under {$END}: an
    // empty remainder is still judged live (nothing is pending), a
    // non-empty one is not.
    let with_ws = common::toy();
    let mut raw = common::toy_grammar();
    raw.ignored = vec![0];
    let g = grid_kernels::GrammarTables::new(raw).unwrap();
    let no_ws = EngineTables::new(std::sync::Arc::new(g), std::sync::Arc::clone(&with_ws.trie));
    let allowed: Vec<common::Config> = [0u64, 1, 2, 3, 4, 8, 15]
        .iter()
        .map(|&a| common::Config {
            states: vec![0],
            remainder: b"a ".to_vec(),
            allowed: vec![a],
            fields: Default::default(),
        })
        .collect();
    let all: Vec<usize> = (0..9).collect();
    assert!(check_all(&with_ws, &allowed, &all) > 20);
    assert!(check_all(&no_ws, &allowed, &all) > 10);
    // By hand: from "a" (node 3), nothing pending, only $END allowed, no
    // ignored terminal: the token "a" itself is judged with nothing pending.
    let out = walk_from(&no_ws.grammar, &no_ws.trie, 3, b"", &[8], true);
    assert_eq!((out.ci, out.cd), (vec![3], vec![]));
    let out = walk_from(&no_ws.grammar, &no_ws.trie, 3, b"b", &[8], true);
    assert_eq!(out, WalkOutput::default());
}

/// Two terminals (0 and 1; bits 1 and 2) over the DFA `trans` (256 entries a
/// state) with these accept and live sets, and the grammar `start: T0`:
///
/// ```text
/// LALR (columns T0 T1 $END)    GOTO (S)
/// s0: T0 -> s1                 s0: S -> s2
/// s1: $END reduce S -> T0
/// s2: $END accept
/// ```
fn start_a(
    trans: Vec<i32>,
    accept: Vec<Vec<u64>>,
    live: Vec<Vec<u64>>,
) -> grid_kernels::GrammarTables {
    let raw = grid_kernels::RawGrammar {
        n_terminals: 2,
        dfa_trans: trans,
        dfa_accept: accept,
        dfa_live: live,
        action: vec![2, 0, 0, 0, 0, -2, 0, 0, -1],
        goto: vec![-1, 2, -1, -1, -1, -1],
        n_nonterminals: 2,
        rule_lhs: vec![0, 1],
        rule_len: vec![1, 1],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1],
        ignored: vec![0],
    };
    grid_kernels::GrammarTables::new(raw).unwrap()
}

/// A grammar whose remainder can be dead while its last accept is still
/// viable: terminals A = "a", AB = "abc"; `start: A`. After "ab" only AB
/// can follow (not allowed under {A}), but the accepted "a" can still be
/// emitted, so the walk goes on below "ab" to the byte that ends it.
///
/// ```text
/// DFA                       LALR (columns A AB $END)    GOTO (S)
/// 0 -a-> 1 {A}              s0: A -> s1                  s0: S -> s2
/// 1 -b-> 2 (live {AB})      s1: $END reduce S -> A
/// 2 -c-> 3 {AB}             s2: $END accept
/// ```
fn late_accept() -> EngineTables {
    let mut trans = vec![-1; 4 * 256];
    trans[b'a' as usize] = 1;
    trans[256 + b'b' as usize] = 2;
    trans[2 * 256 + b'c' as usize] = 3;
    let g = start_a(
        trans,
        vec![vec![0], vec![1], vec![0], vec![2]],
        vec![vec![3], vec![3], vec![2], vec![2]],
    );
    let words: [&[u8]; 8] = [b"a", b"ab", b"abc", b"abx", b"abxy", b"b", b"x", b"abcx"];
    let t = grid_kernels::Trie::new(grid_kernels::RawTrie::pack(&words, &[false; 8])).unwrap();
    EngineTables::new(std::sync::Arc::new(g), std::sync::Arc::new(t))
}

#[test]
fn a_dead_remainder_with_a_viable_accept_is_walked_on() {
    let e = late_accept();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    // By hand, under {A} from the root: "a" is CI; "ab" is not (only AB
    // follows) but is walked on: "abx" ends the accepted "a" at 'x' (CD,
    // tail "bx"), "abc" accepts AB (not allowed, dead).
    let out = walk_from(g, t, 0, b"", &[1], false);
    let node = |s: &[u8]| paths.iter().position(|p| p == s).unwrap() as u32;
    assert_eq!(out.ci, vec![node(b"a")]);
    let cd: Vec<(u32, u32, &[u8])> = out
        .cd
        .iter()
        .map(|x| (x.node, x.terminal, out.tail(x)))
        .collect();
    assert_eq!(cd, vec![(node(b"abx"), 0, &b"bx"[..])]);
    // Pending "ab": every child of the root ends the accepted "a".
    let out = walk_from(g, t, 0, b"ab", &[1], false);
    assert_eq!(out.cd.len(), 3);
    assert!(out.cd.iter().all(|x| x.terminal == 0));
    assert_eq!(out.tail(&out.cd[0]), b"ba");
    let configs: Vec<common::Config> = [1u64, 2, 3, 4]
        .iter()
        .map(|&a| common::Config {
            states: vec![0],
            remainder: b"abc".to_vec(),
            allowed: vec![a],
            fields: Default::default(),
        })
        .collect();
    let all: Vec<usize> = (0..t.n_nodes()).collect();
    assert!(check_all(&e, &configs, &all) > 10);
}

/// The fixture's grammar over a vocabulary of every string of up to three
/// symbols (ASCII from both 64-byte halves, a two-byte character, a lone
/// lead byte) after each of a few prefixes that put the scanner in a loop or
/// a run (a number, an identifier, a string, a comment, whitespace, an
/// operator): large subtrees, mostly admitted whole, each with paths that die
/// or leave the state somewhere inside.
fn dense_engine() -> EngineTables {
    let (g, raw, _) = fixture();
    let mut words = common::spellings(&raw);
    let eos = words.pop().unwrap();
    let symbols: [&[u8]; 9] = [
        b"1",
        b"a",
        b"'",
        b" ",
        b"\n",
        b".",
        "é".as_bytes(),
        b"E",
        b"\xc3",
    ];
    let mut tails: Vec<Vec<u8>> = vec![Vec::new()];
    let mut last: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..3 {
        let next: Vec<Vec<u8>> = last
            .iter()
            .flat_map(|w| symbols.iter().map(move |s| [&w[..], s].concat()))
            .collect();
        tails.extend(next.iter().cloned());
        last = next;
    }
    for prefix in [&b"1"[..], b"sa", b"'x", b"-- ", b"  ", b"<"] {
        for t in &tails {
            let w = [prefix, &t[..]].concat();
            if !words.contains(&w) {
                words.push(w);
            }
        }
    }
    words.push(eos);
    let n = words.len();
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let mut special = vec![false; n];
    special[n - 1] = true;
    let mut raw = grid_kernels::RawTrie::pack(&refs, &special);
    raw.eos_ids = vec![(n - 1) as i32];
    let g = grid_kernels::GrammarTables::new(g).unwrap();
    EngineTables::new(
        std::sync::Arc::new(g),
        std::sync::Arc::new(grid_kernels::Trie::new(raw).unwrap()),
    )
}

#[test]
fn subtrees_taken_whole_match_the_definition() {
    let e = dense_engine();
    let (_, _, configs) = fixture();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let big = (0..t.n_nodes()).filter(|&i| t.node(i).size >= 100).count();
    assert!(big >= 6, "{big}");
    let mut nonempty = 0;
    for c in &configs {
        for pending in [&b""[..], b"1", b"'", b"x"] {
            let want = reference_walk(g, t, &paths, 0, pending, &c.allowed, false);
            let got = walk_from(g, t, 0, pending, &c.allowed, false);
            assert_eq!(got, want, "pending {pending:?}");
            nonempty += usize::from(!want.ci.is_empty());
        }
    }
    assert!(nonempty > 100, "{nonempty}");
}

/// A counted run: A = "a", AB = "a" [b-q]{1,4} "!"; `start: A`. Under {A}
/// the frame after "a" is live, the frames below it (inside AB) are not, yet
/// no byte of [b-q] kills them: a run check must find them dead, not admit
/// their subtrees whole.
fn counted_run() -> EngineTables {
    let mut trans = vec![-1; 7 * 256];
    trans[b'a' as usize] = 1;
    for q in 1..5 {
        for b in b'b'..=b'q' {
            trans[q * 256 + b as usize] = q as i32 + 1;
        }
    }
    for q in 2..6 {
        trans[q * 256 + b'!' as usize] = 6;
    }
    let g = start_a(
        trans,
        vec![
            vec![0],
            vec![1],
            vec![0],
            vec![0],
            vec![0],
            vec![0],
            vec![2],
        ],
        vec![
            vec![3],
            vec![3],
            vec![2],
            vec![2],
            vec![2],
            vec![2],
            vec![2],
        ],
    );
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"x".to_vec()];
    for x in b'b'..=b'q' {
        words.push(vec![b'a', x]);
        for y in b'b'..=b'q' {
            words.push(vec![b'a', x, y]);
        }
    }
    engine_over(g, &words)
}

#[test]
fn runs_through_dead_states_are_walked_not_admitted() {
    let e = counted_run();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    // Under {A}: "a" is CI; below it every token is inside AB (not allowed),
    // and each of its 16 subtrees (17 nodes) ends the accepted "a" nowhere
    // (no byte kills): nothing else.
    let out = walk_from(g, t, 0, b"", &[1], false);
    assert_eq!(out.ci, vec![1]);
    assert!(out.cd.is_empty());
    // Under {AB}: "a" and every token below it (AB can still be completed).
    let out = walk_from(g, t, 0, b"", &[2], false);
    assert_eq!(out.ci.len(), 1 + 16 * 17, "\"a\" and every token below it");
    for allowed in [0u64, 1, 2, 3, 4] {
        for pending in [&b""[..], b"a", b"ab", b"abc"] {
            for node in [0usize, 1, 2] {
                for include_self in [false, true] {
                    let want =
                        reference_walk(g, t, &paths, node, pending, &[allowed], include_self);
                    let got = walk_from(g, t, node, pending, &[allowed], include_self);
                    assert_eq!(got, want, "{allowed} {pending:?} {node} {include_self}");
                }
            }
        }
    }
}

/// Text after a word: A = "a", T = "a" X* "!" with X a letter of [b-q] or a
/// UTF-8 character (checked: a stray continuation byte dies), U = "a" [b-q]*
/// "0"; `start: A`.
///
/// ```text
/// 0 -a-> 1 {A}   live A T U     2 -[b-q]-> 2, 2 -!-> 6 {T}
/// 1 -[b-q]-> 2   live T U (2-5) 1, 2 -0-> 7 {U} (live U; 6 lives T)
///                               1, 2 -[C2-DF]-> 3 -[80-BF]-> 2
///                               1, 2 -[E0-EF]-> 4 -[80-BF]-> 3
///                               1, 2 -[F0-F4]-> 5 -[80-BF]-> 4
/// ```
///
/// Every UTF-8 character leads 1 and 2 to 2 (a text state), which lives
/// under {T} and {U}, not {A}. Below "a" three subtrees of 16 nodes or more: "a\xc3"
/// with 16 continuations (its lead byte in the top word of bytes, the
/// continuations in the word below, no bit in common), "a" then eight
/// "\u{145}" (c5 85: bit 5 of both words) and "ab" with 16 letters and a
/// stray continuation byte (not UTF-8). Under {A} none may be taken whole
/// (their states are not live); under {T} only the last holds a path that
/// dies.
fn text_run() -> EngineTables {
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"x".to_vec()];
    for c in 0x90..=0x9f {
        words.push(vec![b'a', 0xc3, c]);
    }
    for k in 1..=8 {
        words.push([&b"a"[..], &"\u{145}".repeat(k).into_bytes()].concat());
    }
    words.push(b"ab".to_vec());
    for x in b'b'..=b'q' {
        words.push(vec![b'a', b'b', x]);
    }
    words.push(b"ab\x90".to_vec());
    text_engine(&words)
}

/// [`text_run`]'s grammar over `words`.
fn text_engine(words: &[Vec<u8>]) -> EngineTables {
    let mut trans = vec![-1; 8 * 256];
    trans[b'a' as usize] = 1;
    for q in [1usize, 2] {
        for b in b'b'..=b'q' {
            trans[q * 256 + b as usize] = 2;
        }
        trans[q * 256 + b'0' as usize] = 7;
        for (lo, hi, to) in [(0xc2, 0xdf, 3), (0xe0, 0xef, 4), (0xf0, 0xf4, 5)] {
            for b in lo..=hi {
                trans[q * 256 + b] = to;
            }
        }
    }
    trans[2 * 256 + b'!' as usize] = 6;
    for (q, to) in [(3usize, 2), (4, 3), (5, 4)] {
        for b in 0x80..=0xbf {
            trans[q * 256 + b] = to;
        }
    }
    let raw = grid_kernels::RawGrammar {
        n_terminals: 3,
        dfa_trans: trans,
        dfa_accept: vec![
            vec![0],
            vec![1],
            vec![0],
            vec![0],
            vec![0],
            vec![0],
            vec![2],
            vec![4],
        ],
        dfa_live: vec![
            vec![7],
            vec![7],
            vec![6],
            vec![6],
            vec![6],
            vec![6],
            vec![2],
            vec![4],
        ],
        action: vec![2, 0, 0, 0, 0, 0, 0, -2, 0, 0, 0, -1],
        goto: vec![-1, 2, -1, -1, -1, -1],
        n_nonterminals: 2,
        rule_lhs: vec![0, 1],
        rule_len: vec![1, 1],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1, 2],
        ignored: vec![0],
    };
    let g = grid_kernels::GrammarTables::new(raw).unwrap();
    g.check_invariants();
    engine_over(g, words)
}

#[test]
fn text_subtrees_are_taken_whole_only_where_every_path_lives() {
    let e = text_run();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let node = |p: &[u8]| (0..t.n_nodes()).find(|&i| paths[i] == p).unwrap();
    let (a, c3, c5, ab) = (node(b"a"), node(b"a\xc3"), node(b"a\xc5"), node(b"ab"));
    for n in [c3, c5, ab] {
        assert!(t.node(n).size >= 16, "{n}");
    }
    // Under {A}: "a" (every path below it is inside T), and "ab\x90" dies
    // at its last byte: A, the last accept, is emitted with the tail "b\x90".
    let out = walk_from(g, t, 0, b"", &[1], false);
    assert_eq!(out.ci, vec![a as u32]);
    assert_eq!(out.cd.len(), 1);
    let e0 = out.cd[0];
    assert_eq!((e0.node as usize, e0.terminal), (node(b"ab\x90"), 0));
    assert_eq!(out.tail(&e0), b"b\x90");
    // Under {T}: "a" and every token below it (16 + 8 + 1 + 16) but
    // "ab\x90" (dead at its last byte; A is not allowed): nothing else.
    let out = walk_from(g, t, 0, b"", &[2], false);
    assert!(!out.ci.contains(&(node(b"ab\x90") as u32)));
    assert_eq!(out.ci.len(), 1 + 16 + 8 + 1 + 16);
    assert!(out.cd.is_empty());
    for allowed in [0u64, 1, 2, 3, 4, 7] {
        for pending in [&b""[..], b"a", b"ab", b"a\xc3"] {
            for n in [0, a, c3, c5, ab] {
                for include_self in [false, true] {
                    let want = reference_walk(g, t, &paths, n, pending, &[allowed], include_self);
                    let got = walk_from(g, t, n, pending, &[allowed], include_self);
                    assert_eq!(got, want, "{allowed} {pending:?} {n} {include_self}");
                }
            }
        }
    }
}

/// Subtrees below "ac" (the text state 2, which loops on [b-q] and UTF-8
/// characters and lives under {T}) that a closure test must not take whole:
/// "acb" (letters of the loop, then "!" and a letter: "!" leaves the loop),
/// "acr" ("r" dies at once) and "ac!" (every ASCII byte but the loop's
/// letters: exactly the bytes that do not loop, all dead after "!"); and
/// below "a" (state 1) "ad" and "ae", runs of letters into the text state
/// with one ASCII byte that dies: NUL (the low word of bytes) below "ad",
/// "r" (the high word) below "ae"; "ach" and "ac\xc3\x80" followed by
/// exactly the bytes of one word that die in state 2; "a\xd0" then lead
/// bytes (the top word only, dead after a lead byte); "af", letters and "0" (into U, not
/// live under {T}: the only byte of the low word, and the only one that
/// leads to state 7).
#[test]
fn subtrees_leaving_a_text_loop_are_walked() {
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ac".to_vec(), b"acb".to_vec()];
    for x in b'b'..=b'q' {
        words.push(vec![b'a', b'c', b'b', x]);
    }
    words.push(b"acb!".to_vec());
    words.push(b"acb!b".to_vec());
    for x in b'b'..=b'h' {
        words.push(vec![b'a', b'c', b'r', x]);
    }
    words.push(b"ac!".to_vec());
    for x in (0u8..128).filter(|x| !(b'b'..=b'q').contains(x) && *x != b'!') {
        words.push(vec![b'a', b'c', b'!', x]);
    }
    // "ach" then every low-word byte that dies in state 2 (all but "0" and
    // "!"); "ac\xc3\x80" (a character) then every high-word byte that dies
    // there (all but the loop's letters).
    words.push(b"ach".to_vec());
    for x in (0u8..64).filter(|&x| x != b'0' && x != b'!') {
        words.push(vec![b'a', b'c', b'h', x]);
    }
    words.push(b"ac\xc3".to_vec());
    words.push(b"ac\xc3\x80".to_vec());
    for x in (64u8..128).filter(|x| !(b'b'..=b'q').contains(x)) {
        words.push(vec![b'a', b'c', 0xc3, 0x80, x]);
    }
    // "a\xd0" then lead bytes only (dead after a lead byte).
    for x in 0xc2..=0xc9 {
        words.push(vec![b'a', 0xd0, x]);
    }
    for (d, last) in [(b'd', 0u8), (b'e', b'r'), (b'f', b'0')] {
        words.push(vec![b'a', d]);
        for x in b'b'..=b'q' {
            words.push(vec![b'a', d, x]);
        }
        words.push(vec![b'a', d, last]);
    }
    let e = text_engine(&words);
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let node = |p: &[u8]| (0..t.n_nodes()).find(|&i| paths[i] == p).unwrap();
    let (ac, acb, acr, bang) = (node(b"ac"), node(b"acb"), node(b"acr"), node(b"ac!"));
    let (ad, ae, af) = (node(b"ad"), node(b"ae"), node(b"af"));
    let (ach, c3, d0) = (node(b"ach"), node(b"ac\xc3"), node(b"a\xd0"));
    assert_eq!(
        (t.node(ach).size, t.node(c3).size, t.node(d0).size),
        (63, 50, 9)
    );
    assert_eq!(t.node(acr).size, 8);
    assert_eq!(
        (t.node(ad).size, t.node(ae).size, t.node(af).size),
        (18, 18, 18)
    );
    assert_eq!(t.node(bang).size, 1 + 128 - 16 - 1);
    // Under {T}: "a", "ac", "acb" and its 16 letters, "acb!", "ac!"; dead
    // after "!" (the last accept T is allowed: a CD entry of T): "acb!b"
    // and every "ac!" + byte; "acr" dies at "r" (its last accept, A, is not
    // allowed): nothing; "ad", "ae", "af" and their 16 letters each, not
    // "ad\0" nor "aer" (dead, A not allowed) nor "af0" (in U); "ach",
    // "ac\xc3" and "ac\xc3\x80", not the bytes after them (dead, A not
    // allowed).
    let out = walk_from(g, t, 0, b"", &[2], false);
    assert_eq!(out.ci.len(), 1 + 1 + 1 + 16 + 1 + 1 + 3 * 17 + 3);
    assert_eq!(out.cd.len(), 1 + 111);
    assert!(out.cd.iter().all(|e| e.terminal == 1));
    for allowed in [0u64, 1, 2, 3, 4, 6, 7] {
        for pending in [&b""[..], b"a", b"ac", b"acb", b"af"] {
            for n in [0, ac, acb, acr, bang, ad, ae, af, ach, c3, d0] {
                for include_self in [false, true] {
                    let want = reference_walk(g, t, &paths, n, pending, &[allowed], include_self);
                    let got = walk_from(g, t, n, pending, &[allowed], include_self);
                    assert_eq!(got, want, "{allowed} {pending:?} {n} {include_self}");
                }
            }
        }
    }
}

/// A = "a", T = "a" [b-q]+, U = "a" [b-q]* "0"+; `start: A`. State 1 (after
/// "a") and 2 (after letters) have two successors each, 2 by a letter and
/// 7 by "0", and no other byte leads anywhere: the subtree "af" (letters and
/// "0") reaches 7, not live under {T}, only by "0", the only byte of its
/// low word, which no other successor takes; the subtree "ag" (letters, "0",
/// then "b", dead in 7) lives for one byte, not for two.
fn digit_run() -> EngineTables {
    let mut trans = vec![-1; 8 * 256];
    trans[b'a' as usize] = 1;
    for q in [1usize, 2] {
        for b in b'b'..=b'q' {
            trans[q * 256 + b as usize] = 2;
        }
        trans[q * 256 + b'0' as usize] = 7;
    }
    trans[7 * 256 + b'0' as usize] = 7;
    let raw = grid_kernels::RawGrammar {
        n_terminals: 3,
        dfa_trans: trans,
        dfa_accept: vec![
            vec![0],
            vec![1],
            vec![2],
            vec![0],
            vec![0],
            vec![0],
            vec![0],
            vec![4],
        ],
        dfa_live: vec![
            vec![7],
            vec![7],
            vec![6],
            vec![0],
            vec![0],
            vec![0],
            vec![0],
            vec![4],
        ],
        action: vec![2, 0, 0, 0, 0, 0, 0, -2, 0, 0, 0, -1],
        goto: vec![-1, 2, -1, -1, -1, -1],
        n_nonterminals: 2,
        rule_lhs: vec![0, 1],
        rule_len: vec![1, 1],
        lexicon_words: None,
        lexicon_children: vec![vec![]],
        lexicon_prefix_cats: vec![vec![0]],
        lexicon_word_cats: vec![vec![0]],
        lexicon_categories: vec![0],
        pick_order: vec![0, 1, 2],
        ignored: vec![0],
    };
    let g = grid_kernels::GrammarTables::new(raw).unwrap();
    g.check_invariants();
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"af".to_vec(), b"af0".to_vec()];
    words.extend([b"ag".to_vec(), b"ag0".to_vec(), b"ag0b".to_vec()]);
    for x in b'b'..=b'q' {
        words.push(vec![b'a', b'f', x]);
        words.push(vec![b'a', b'g', x]);
    }
    engine_over(g, &words)
}

#[test]
fn a_successor_reached_by_one_byte_is_checked() {
    let e = digit_run();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let node = |p: &[u8]| (0..t.n_nodes()).find(|&i| paths[i] == p).unwrap();
    let (af, ag) = (node(b"af"), node(b"ag"));
    assert_eq!((t.node(af).size, t.node(ag).size), (18, 19));
    // Under {T}: "a", "af", "ag" and their 16 letters each; not "af0", "ag0"
    // (in U) nor "ag0b" (dead in 7; U, its last accept, is not allowed).
    let out = walk_from(g, t, 0, b"", &[2], false);
    assert_eq!(out.ci.len(), 1 + 2 * 17);
    assert!(out.cd.is_empty());
    // Under {U}: also "af0" and "ag0" (every letter run can still reach
    // "0"); "ag0b" ends U: a CD entry with the tail "b". The subtree "ag"
    // keeps every state live for one byte, not for two.
    let out = walk_from(g, t, 0, b"", &[4], false);
    assert_eq!(out.ci.len(), 1 + 2 * 18);
    assert_eq!(out.cd.len(), 1);
    assert_eq!(
        (out.cd[0].node as usize, out.cd[0].terminal),
        (node(b"ag0b"), 2)
    );
    assert_eq!(out.tail(&out.cd[0]), b"b");
    for allowed in 0u64..8 {
        for pending in [&b""[..], b"a", b"af", b"ag0"] {
            for n in [0, 1, af, ag] {
                for include_self in [false, true] {
                    let want = reference_walk(g, t, &paths, n, pending, &[allowed], include_self);
                    let got = walk_from(g, t, n, pending, &[allowed], include_self);
                    assert_eq!(got, want, "{allowed} {pending:?} {n} {include_self}");
                }
            }
        }
    }
}

/// Tails that hold whole lexemes: A = "a", B = "b", WS = " " (one space,
/// ignored), L = "  x", M = " " "a"+ "!". Scanning " a..." or "  " passes
/// the accepted WS into M's or L's prefix; a byte that kills it picks WS
/// and requeues the rest, which may emit at once (" aab": A, then "b"
/// kills "a") or start after another WS ("  b": WS, then "b" stays).
///
/// ```text
/// 0 -a-> 1 {A}   0 -' '-> 3 {WS}   3 -' '-> 4 -x-> 5 {L}
/// 0 -b-> 2 {B}   3 -a-> 6 -a-> 6   6 -!-> 7 {M}
/// ```
fn spaced() -> EngineTables {
    let mut trans = vec![-1; 8 * 256];
    trans[b'a' as usize] = 1;
    trans[b'b' as usize] = 2;
    trans[b' ' as usize] = 3;
    trans[3 * 256 + b' ' as usize] = 4;
    trans[4 * 256 + b'x' as usize] = 5;
    trans[3 * 256 + b'a' as usize] = 6;
    trans[6 * 256 + b'a' as usize] = 6;
    trans[6 * 256 + b'!' as usize] = 7;
    #[rustfmt::skip]
    let action = vec![
        2, 0, 0, 0, 0, 0,
        0, 3, 0, 0, 0, 0,
        0, 0, 0, 0, 0, -2,
        0, 0, 0, 0, 0, -1,
    ];
    let raw = grid_kernels::RawGrammar {
        n_terminals: 5,
        dfa_trans: trans,
        dfa_accept: vec![
            vec![0],
            vec![1],
            vec![2],
            vec![4],
            vec![0],
            vec![8],
            vec![0],
            vec![16],
        ],
        dfa_live: vec![
            vec![31],
            vec![1],
            vec![2],
            vec![4 | 8 | 16],
            vec![8],
            vec![8],
            vec![16],
            vec![16],
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
        pick_order: vec![0, 1, 2, 3, 4],
        ignored: vec![4],
    };
    let g = grid_kernels::GrammarTables::new(raw).unwrap();
    g.check_invariants();
    let words: [&[u8]; 18] = [
        b"a", b"b", b" ", b"  ", b"  x", b"  a", b"  ab", b"  aa", b"ab", b"b ", b" a", b" aa",
        b" aab", b" aa!", b"aab", b" b", b"  b", b"  ba",
    ];
    let t = grid_kernels::Trie::new(grid_kernels::RawTrie::pack(&words, &[false; 18])).unwrap();
    EngineTables::new(std::sync::Arc::new(g), std::sync::Arc::new(t))
}

#[test]
fn requeued_tails_that_emit_or_restart_match_the_definition() {
    let e = spaced();
    let (g, t) = (&e.grammar, &e.trie);
    let paths = paths(t);
    let node = |p: &[u8]| (0..t.n_nodes()).find(|&i| paths[i] == p).unwrap() as u32;
    // Under {A}: " aab" passes WS into M (" aa"), "b" kills it: WS is
    // picked, "aab" requeued: "a" (A), then "a" kills it: a CD entry of A
    // with the tail "ab".
    let out = walk_from(g, t, 0, b"", &[1], false);
    let cd: Vec<(u32, u32, Vec<u8>)> = out
        .cd
        .iter()
        .map(|x| (x.node, x.terminal, out.tail(x).to_vec()))
        .collect();
    assert!(cd.contains(&(node(b" aab"), 0, b"ab".to_vec())), "{cd:?}");
    // "  ab": "  " (L's prefix) killed by "a": WS, requeued " a" (M's
    // prefix again); "b" kills it: WS, requeued "ab": A, then "b": the tail "b".
    assert!(cd.contains(&(node(b"  ab"), 0, b"b".to_vec())), "{cd:?}");
    // Under {B}: "  b": "  " killed by "b": WS, requeued " b": WS again,
    // then "b" stays (B live: CI); "  ba": "a" kills "b": B with the tail "a".
    let out = walk_from(g, t, 0, b"", &[2], false);
    assert!(out.ci.contains(&node(b"  b")));
    let cd: Vec<(u32, u32, Vec<u8>)> = out
        .cd
        .iter()
        .map(|x| (x.node, x.terminal, out.tail(x).to_vec()))
        .collect();
    assert!(cd.contains(&(node(b"  ba"), 1, b"a".to_vec())), "{cd:?}");
    let long = [&b" "[..], &[b'a'; 9]].concat();
    for allowed in 0u64..32 {
        for pending in [&b""[..], b" ", b"  ", b" a", b" aa", &long[..]] {
            for n in [0, node(b" ") as usize, node(b"  ") as usize] {
                for include_self in [false, true] {
                    let want = reference_walk(g, t, &paths, n, pending, &[allowed], include_self);
                    let got = walk_from(g, t, n, pending, &[allowed], include_self);
                    assert_eq!(got, want, "{allowed} {pending:?} {n} {include_self}");
                    // Through the memo, every subtree a memo point: holes
                    // at the ignored picks, filled on replay.
                    let chunks = Chunks::new(1, 1 << 20, 1 << 20);
                    for _ in 0..2 {
                        let mut a = g.allowed_sets(&[allowed]);
                        let mut memo = WalkOutput::default();
                        walk_into(
                            g,
                            t,
                            n,
                            pending,
                            &mut a,
                            include_self,
                            Some(&chunks),
                            &mut memo,
                        );
                        assert_eq!(memo, want, "memo {allowed} {pending:?} {n} {include_self}");
                    }
                }
            }
        }
    }
}

/// The engine of `g` over a trie of `words` (no special tokens).
fn engine_over(g: grid_kernels::GrammarTables, words: &[Vec<u8>]) -> EngineTables {
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let t = grid_kernels::Trie::new(grid_kernels::RawTrie::pack(&refs, &vec![false; refs.len()]))
        .unwrap();
    EngineTables::new(std::sync::Arc::new(g), std::sync::Arc::new(t))
}

/// The nodes a walk from the root steps (its shortcuts take the rest whole:
/// [`nodes_stepped`]), after checking its output against the definition.
fn stepped(e: &EngineTables, allowed: u64) -> u64 {
    let (g, t) = (&e.grammar, &e.trie);
    let want = reference_walk(g, t, &paths(t), 0, b"", &[allowed], false);
    let before = nodes_stepped();
    let got = walk_from(g, t, 0, b"", &[allowed], false);
    let n = nodes_stepped() - before;
    assert_eq!(got, want, "{allowed}");
    n
}

/// The shortcuts are taken where they apply, counted in nodes stepped (the
/// walk's cost: a shortcut turned off, or refused where it holds, gives the
/// same output and steps more). Counts worked by hand from each fixture's
/// comment.
#[test]
fn runs_are_taken_whole_where_every_path_lives() {
    // counted_run under {AB}: "a" and "x" are stepped; the 16 subtrees of
    // 17 nodes below "a" are runs into states live under {AB}. Under {A}
    // those states are dead: every node is stepped (1 + 16 * 17 + 1).
    let e = counted_run();
    assert_eq!(stepped(&e, 2), 2);
    assert_eq!(stepped(&e, 1), 274);
    // text_run under {T}: "a\xc3" and "a\xc5" (17 and 16 nodes, UTF-8
    // characters into the text state) are taken whole; "ab" holds a stray
    // continuation byte (not UTF-8): it and its 17 children are stepped,
    // with "a" and "x".
    assert_eq!(stepped(&text_run(), 2), 20);
    // fanned under {AB}: "a" is stepped; "ab" (17 nodes) is a run through
    // state 1, which has 16 successors.
    assert_eq!(stepped(&fanned(), 2), 1);
}

/// Loops are taken whole at any size from [`WIDE_MIN`] (runs only from 16
/// nodes): below "ab" (the text state 2 of [`text_engine`]), "abb" (10
/// nodes, letters that loop) and "ab\xc3" (10 nodes, UTF-8 characters that
/// lead 2 back to 2); "ab" itself holds "ab\x90" (a stray continuation
/// byte) and is stepped, as are "a", "x" and "ab\x90".
#[test]
fn loops_are_taken_whole_from_the_smallest_wide_subtree() {
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"x".to_vec(), b"ab".to_vec()];
    words.push(b"abb".to_vec());
    for x in b'b'..=b'j' {
        words.push(vec![b'a', b'b', b'b', x]);
    }
    let e_acute = "é".as_bytes();
    let chain: Vec<u8> = [&b"ab"[..], &e_acute.repeat(5)].concat();
    for k in 3..=chain.len() {
        words.push(chain[..k].to_vec());
    }
    words.push(b"ab\x90".to_vec());
    let e = text_engine(&words);
    let t = &e.trie;
    let paths = paths(t);
    let node = |p: &[u8]| (0..t.n_nodes()).find(|&i| paths[i] == p).unwrap();
    assert_eq!(t.node(node(b"abb")).size, 10);
    assert_eq!(t.node(node(b"ab\xc3")).size, 10);
    const { assert!(WIDE_MIN <= 10) };
    assert_eq!(stepped(&e, 2), 4);
}

/// A walk over one thread stays on the calling thread; over several, its
/// runs go to rayon's pool (the caller, outside the pool, steps none).
#[test]
fn parallel_walks_share_their_children_out() {
    let e = big_engine();
    let (_, _, configs) = fixture();
    let (g, t) = (&e.grammar, &e.trie);
    let c = &configs[0];
    let before = nodes_stepped();
    let plain = walk_from(g, t, 0, b"", &c.allowed, false);
    let alone = nodes_stepped() - before;
    assert!(alone > 100, "{alone}");
    for (threads, on_caller) in [(1, alone), (4, 0)] {
        let mut out = WalkOutput::default();
        let before = nodes_stepped();
        walk_par(g, t, 0, b"", &c.allowed, false, None, &mut out, threads);
        assert_eq!(nodes_stepped() - before, on_caller, "{threads} threads");
        assert_eq!(out, plain);
    }
}

/// A = "a", AB = "a" X "!" with X a letter of [b-q] then any run of "b" and
/// digits: state 1 (after "a") has 16 successors, one per letter (b -> 2,
/// c -> 3, ..., q -> 17; digits also lead to 2), 2 loops on "b" and
/// digits, 2-17 -!-> 18 {AB}. Trie: "a", then "ab" with "ab0".."ab9", "abb"
/// and "abb0".."abb4" (17 nodes).
fn fanned() -> EngineTables {
    let mut trans = vec![-1; 19 * 256];
    trans[b'a' as usize] = 1;
    for (i, x) in (b'b'..=b'q').enumerate() {
        trans[256 + x as usize] = 2 + i as i32;
        trans[(2 + i) * 256 + b'!' as usize] = 18;
    }
    for d in b'0'..=b'9' {
        trans[256 + d as usize] = 2;
        trans[2 * 256 + d as usize] = 2;
    }
    trans[2 * 256 + b'b' as usize] = 2;
    let mut accept = vec![vec![0]; 19];
    accept[1] = vec![1];
    accept[18] = vec![2];
    let mut live = vec![vec![2]; 19];
    live[0] = vec![3];
    live[1] = vec![3];
    let g = start_a(trans, accept, live);
    g.check_invariants();
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ab".to_vec(), b"abb".to_vec()];
    for d in b'0'..=b'9' {
        words.push(vec![b'a', b'b', d]);
    }
    for d in b'0'..=b'4' {
        words.push(vec![b'a', b'b', b'b', d]);
    }
    let e = engine_over(g, &words);
    assert_eq!(e.trie.node(2).size, 17);
    e
}

/// A = "x"* "y" ["x" "y"]* "b", C = "x"* "a"; `start: A`. Reading "x" leaves
/// the union's future unchanged, so the minimal DFA's "x" edge leads the
/// start state back to itself: 0 -x-> 0, 0 -a-> 1 {C}, 0 -y-> 2, 2 -[xy]-> 2,
/// 2 -b-> 3 {A}. Trie: every word over {x, y} that starts with "x", of one
/// to four bytes, and "xxxxx" (16 nodes below the root, which has the one
/// child "x").
#[test]
fn a_run_may_start_on_an_edge_into_the_start_state() {
    let mut trans = vec![-1; 4 * 256];
    trans[b'x' as usize] = 0;
    trans[b'a' as usize] = 1;
    trans[b'y' as usize] = 2;
    trans[2 * 256 + b'x' as usize] = 2;
    trans[2 * 256 + b'y' as usize] = 2;
    trans[2 * 256 + b'b' as usize] = 3;
    let g = start_a(
        trans,
        vec![vec![0], vec![2], vec![0], vec![1]],
        vec![vec![3], vec![2], vec![1], vec![1]],
    );
    g.check_invariants();
    let mut words: Vec<Vec<u8>> = vec![b"x".to_vec()];
    let mut last = vec![b"x".to_vec()];
    for _ in 0..3 {
        last = last
            .iter()
            .flat_map(|w| [[&w[..], b"x"].concat(), [&w[..], b"y"].concat()])
            .collect();
        words.extend(last.iter().cloned());
    }
    words.push(b"xxxxx".to_vec());
    let e = engine_over(g, &words);
    assert_eq!(e.trie.node(1).size, 16);
    // Under {A}: every token lives (a prefix of A), the subtree "x" is one run.
    assert_eq!(stepped(&e, 1), 0);
    // Under {C}: state 2 (after a "y") is dead, so no run: stepped are "x",
    // "xx" (8 nodes, below RUN_MIN), "xxx", "xxxx", "xxxxx", "xxxy", "xxy"
    // and "xy"; the subtrees below a "y" are skipped whole.
    assert_eq!(stepped(&e, 2), 8);
}

/// The fan bytes of [`fan`]: "b" first, then letters, digits and signs
/// (neither "a" nor "!").
fn fan_bytes() -> Vec<u8> {
    let mut bytes: Vec<u8> = (b'b'..=b'z').chain(b'A'..=b'Z').collect();
    bytes.extend(b'0'..=b'9');
    bytes.extend(b"#$%&*+");
    bytes
}

/// A = "a", AB = "a" X+ "!" with X any of `n` fan bytes: state 1 (after "a")
/// has `n` successors, 1 -x_j-> 2 + j, and every state 2 + j -x-> 2 (any
/// fan byte), -!-> F {AB}. Trie: "a", "ab" and "ab" x_i for the next `k - 1`
/// fan bytes, so a run check of "ab" (`k` nodes) from state 1 reaches `k`
/// states after one byte, then state 2 alone.
fn fan(n: usize, k: usize) -> EngineTables {
    let bytes = fan_bytes();
    assert!(k <= n && n <= bytes.len());
    let f = n + 2;
    let mut trans = vec![-1; (f + 1) * 256];
    trans[b'a' as usize] = 1;
    for (j, &x) in bytes[..n].iter().enumerate() {
        trans[256 + x as usize] = 2 + j as i32;
        for q in 2..f {
            trans[q * 256 + x as usize] = 2;
            trans[q * 256 + b'!' as usize] = f as i32;
        }
    }
    let mut accept = vec![vec![0]; f + 1];
    accept[1] = vec![1];
    accept[f] = vec![2];
    let mut live = vec![vec![2]; f + 1];
    live[0] = vec![3];
    live[1] = vec![3];
    let g = start_a(trans, accept, live);
    g.check_invariants();
    let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ab".to_vec()];
    for &x in &bytes[1..k] {
        words.push(vec![b'a', b'b', x]);
    }
    let e = engine_over(g, &words);
    assert_eq!(e.trie.node(2).size as usize, k);
    e
}

/// A run check follows at most 32 states at one length through states of at
/// most 64 successors (counted strings beside the literal keys of a JSON
/// object). Under {AB}, "a" is always stepped; "ab" is a run, or it and its
/// `k - 1` children are stepped.
#[test]
fn run_checks_follow_32_states_of_64_successors() {
    assert_eq!(stepped(&fan(64, 16), 2), 1, "64 successors");
    assert_eq!(stepped(&fan(65, 16), 2), 1 + 16, "65 successors");
    assert_eq!(stepped(&fan(40, 32), 2), 1, "32 states");
    assert_eq!(stepped(&fan(40, 33), 2), 1 + 33, "33 states");
}
