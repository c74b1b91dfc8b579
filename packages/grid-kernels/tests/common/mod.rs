//! Shared by the `*_mutants.rs` suites: the golden fixture's tables
//! (`fixtures/analyst_toy.txt`, see `fixture.rs`), a bigger vocabulary packed
//! over its grammar, and brute-force references computed by scanning every
//! token from scratch.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use grid_kernels::scanner::Rescan;
use grid_kernels::walk::WalkOutput;
use grid_kernels::{bits, EngineTables, GrammarTables, RawGrammar, RawTrie, Trie};

const FIXTURE: &str = include_str!("../fixtures/analyst_toy.txt");

/// One recorded configuration: LALR states, remainder, allowed set, and every
/// field of its block as written (the expected walks, masks and advances).
pub struct Config {
    pub states: Vec<i64>,
    pub remainder: Vec<u8>,
    pub allowed: Vec<u64>,
    pub fields: HashMap<&'static str, Vec<&'static str>>,
}

impl Config {
    /// A field's tokens (none when the block lacks it).
    pub fn get(&self, key: &str) -> &[&'static str] {
        self.fields.get(key).map(Vec::as_slice).unwrap_or(&[])
    }
}

pub fn hex_set(s: &str, width: usize) -> Vec<u64> {
    let mut bytes: Vec<u8> = Vec::new();
    let digits: Vec<u8> = s.bytes().rev().collect();
    for pair in digits.chunks(2) {
        let lo = (pair[0] as char).to_digit(16).expect("hex digit");
        let hi = pair
            .get(1)
            .map_or(0, |&c| (c as char).to_digit(16).expect("hex digit"));
        bytes.push((hi * 16 + lo) as u8);
    }
    bits::from_le_bytes(&bytes, width).expect("set fits its width")
}

pub fn hex_bytes(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex byte"))
        .collect()
}

pub fn ints<T: std::str::FromStr>(tokens: &[&str]) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    tokens.iter().map(|t| t.parse().expect("int")).collect()
}

pub fn states(s: &str) -> Vec<i64> {
    s.split(',').map(|x| x.parse().expect("state")).collect()
}

/// The fixture's grammar, its trie, and its configurations.
pub fn fixture() -> (RawGrammar, RawTrie, Vec<Config>) {
    let mut lines = FIXTURE.lines();
    assert_eq!(lines.next(), Some("grid-kernels fixture v1"));
    let mut head: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut blocks: Vec<HashMap<&str, Vec<&str>>> = Vec::new();
    let mut current: Option<HashMap<&str, Vec<&str>>> = None;
    for line in lines {
        let mut tokens = line.split(' ').filter(|t| !t.is_empty());
        let key = tokens.next().expect("a key");
        let rest: Vec<&str> = tokens.collect();
        match (key, current.as_mut()) {
            ("config", _) => current = Some(HashMap::from([("config", rest)])),
            ("end", Some(_)) => blocks.push(current.take().expect("open block")),
            (_, Some(c)) => {
                c.insert(key, rest);
            }
            (_, None) => {
                head.insert(key, rest);
            }
        }
    }
    let one = |k: &str| -> usize { head[k][0].parse().expect("count") };
    let t = one("n_terminals");
    let w = bits::width_for(t + 1);
    let sets = |k: &str| -> Vec<Vec<u64>> { head[k].iter().map(|s| hex_set(s, w)).collect() };
    let mut trans = vec![-1; one("dfa_states") * 256];
    for pair in &head["dfa_trans_sparse"] {
        let (i, q) = pair.split_once(':').expect("i:q");
        trans[i.parse::<usize>().unwrap()] = q.parse().unwrap();
    }
    let children = head["lexicon_children"]
        .iter()
        .map(|node| {
            if *node == "-" {
                return Vec::new();
            }
            node.split(',')
                .map(|e| {
                    let (b, c) = e.split_once(':').expect("b:c");
                    (b.parse().unwrap(), c.parse().unwrap())
                })
                .collect()
        })
        .collect();
    let raw = RawGrammar {
        n_terminals: t,
        dfa_trans: trans,
        dfa_accept: sets("dfa_accept"),
        dfa_live: sets("dfa_live"),
        action: ints(&head["action"]),
        goto: ints(&head["goto"]),
        n_nonterminals: one("n_nonterminals"),
        rule_lhs: ints(&head["rule_lhs"]),
        rule_len: ints(&head["rule_len"]),
        lexicon_words: None,
        lexicon_children: children,
        lexicon_prefix_cats: sets("lexicon_prefix_cats"),
        lexicon_word_cats: sets("lexicon_word_cats"),
        lexicon_categories: hex_set(head["lexicon_categories"][0], w),
        pick_order: ints(&head["pick_order"]),
        ignored: hex_set(head["ignored"][0], w),
    };
    let trie = RawTrie {
        edge: ints(&head["trie_edge"]),
        token: ints(&head["trie_token"]),
        size: ints(&head["trie_size"]),
        alias_offset: ints(&head["trie_alias_offset"]),
        alias_ids: ints(&head["trie_alias_ids"]),
        n_vocab: one("n_vocab"),
        eos_ids: ints(&head["eos_ids"]),
    };
    let configs = blocks
        .iter()
        .map(|b| {
            let c = &b["config"];
            Config {
                states: states(c[0]),
                remainder: hex_bytes(c[1]),
                allowed: hex_set(b["allowed"][0], w),
                fields: b.clone(),
            }
        })
        .collect();
    (raw, trie, configs)
}

/// The spellings of a raw trie's ids (empty for the ids it does not spell).
pub fn spellings(raw: &RawTrie) -> Vec<Vec<u8>> {
    let t = Trie::new(raw.clone()).expect("valid trie");
    (0..raw.n_vocab).map(|i| t.spelling(i).to_vec()).collect()
}

/// The fixture's vocabulary plus words that make large subtrees the walk can
/// take whole or along runs: string-literal bodies (ASCII and UTF-8), long
/// identifiers, digit runs, whitespace runs, a comment, and every pair of a
/// few bytes. EOS stays the last id, special.
pub fn big_vocab() -> (Vec<Vec<u8>>, Vec<bool>) {
    let (_, raw, _) = fixture();
    let mut words = spellings(&raw);
    let eos = words.pop().expect("EOS is the last id");
    assert!(eos.is_empty());
    let mut more: Vec<Vec<u8>> = Vec::new();
    for body in ["ab", "xyz", "a b", "it", "é", "aé", "zz"] {
        for k in 1..=4 {
            let s = body.repeat(k);
            more.push(format!("'{s}").into_bytes());
            more.push(format!("'{s}'").into_bytes());
            more.push(format!("{s}'").into_bytes());
        }
    }
    for k in 2..=12 {
        more.push("a".repeat(k).into_bytes());
        more.push("s".repeat(k).into_bytes());
        more.push("1".repeat(k).into_bytes());
        more.push(" ".repeat(k).into_bytes());
        more.push(format!("sa{}", "l".repeat(k)).into_bytes());
        more.push(format!("-- {}", "x".repeat(k)).into_bytes());
    }
    for w in [
        "select",
        "from",
        "where",
        "employees",
        "orders",
        "sal",
        "yer",
        "1.5e",
    ] {
        for cut in 1..=w.len() {
            more.push(w.as_bytes()[..cut].to_vec());
            more.push(format!(" {}", &w[..cut]).into_bytes());
        }
    }
    let few = b"as1' ;,(*\xc3\xa9\n-";
    for &x in few {
        for &y in few {
            more.push(vec![x, y]);
        }
    }
    more.sort();
    more.dedup();
    for m in more {
        if !words.contains(&m) {
            words.push(m);
        }
    }
    let mut special = vec![false; words.len() + 1];
    words.push(Vec::new());
    *special.last_mut().unwrap() = true;
    (words, special)
}

/// The fixture's grammar over the [`big_vocab`] trie.
pub fn big_engine() -> EngineTables {
    let (g, _, _) = fixture();
    let (words, special) = big_vocab();
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let mut raw = RawTrie::pack(&refs, &special);
    raw.eos_ids = vec![(words.len() - 1) as i32];
    let trie = Trie::new(raw).expect("packed trie is valid");
    trie.check_invariants();
    let g = GrammarTables::new(g).expect("fixture grammar");
    EngineTables::new(Arc::new(g), Arc::new(trie))
}

/// The fixture's own engine.
pub fn fixture_engine() -> (EngineTables, Vec<Config>) {
    let (g, t, configs) = fixture();
    let g = GrammarTables::new(g).expect("fixture grammar");
    let t = Trie::new(t).expect("fixture trie");
    (EngineTables::new(Arc::new(g), Arc::new(t)), configs)
}

/// The path bytes of every trie node (the root's is empty).
pub fn paths(trie: &Trie) -> Vec<Vec<u8>> {
    let n = trie.n_nodes();
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); n];
    let mut open: Vec<usize> = Vec::new();
    for i in 1..n {
        while let Some(&top) = open.last() {
            if i < top + trie.node(top).size as usize {
                break;
            }
            open.pop();
        }
        let mut p = open.last().map_or(Vec::new(), |&a| out[a].clone());
        p.push(trie.node(i).edge);
        out[i] = p;
        open.push(i);
    }
    out
}

/// `walk_from` by its definition: every node of the subtree at `node` is
/// rescanned from scratch (`pending` then its path below `node`) under the
/// allowed set. A node is CI iff it spells a token, no shallower node of the
/// walk emitted or died, and the scan stays on the stack with an empty or
/// live remainder; it is a CD entry (with the requeued tail) iff its bytes
/// are the first to emit a terminal that is not ignored; a death rejects it
/// and its subtree.
pub fn reference_walk(
    g: &GrammarTables,
    trie: &Trie,
    paths: &[Vec<u8>],
    node: usize,
    pending: &[u8],
    allowed: &[u64],
    include_self: bool,
) -> WalkOutput {
    let mut out = WalkOutput::default();
    let mut a = g.allowed_sets(allowed);
    let end = node + trie.node(node).size as usize;
    let depth = paths[node].len();
    // Nodes whose subtree is decided (emitted or died), as [start, end).
    let mut closed_until = node;
    #[allow(clippy::needless_range_loop)]
    for m in node..end {
        if m < closed_until {
            continue;
        }
        let mut data = pending.to_vec();
        data.extend_from_slice(&paths[m][depth..]);
        match g.rescan(&data, &mut a) {
            Rescan::Dead => {
                closed_until = m + trie.node(m).size as usize;
            }
            Rescan::Emit { terminal, tail } => {
                let e = grid_kernels::CdEntry {
                    node: m as u32,
                    terminal,
                    tail_start: out.tails.len() as u32,
                    tail_end: (out.tails.len() + data.len() - tail) as u32,
                };
                out.tails.extend_from_slice(&data[tail..]);
                out.cd.push(e);
                closed_until = m + trie.node(m).size as usize;
            }
            Rescan::Stay { scan, start } => {
                let live = start == data.len() || g.live(scan.q, scan.ln, &a);
                let judged = m != node || include_self;
                if judged && live && trie.node(m).token >= 0 {
                    out.ci.push(m as u32);
                }
            }
        }
    }
    out
}

/// `tests/toy.rs`'s hand-checkable tables (drawn in its header): terminals
/// 0 `A` = "a", 1 `B` = "b", 2 `WS` = " +" (ignored), `$END` = 3; grammar
/// `start: A B`; trie nodes 0 root, 1 " ", 2 "  ", 3 "a", 4 "a " (inner),
/// 5 "a b", 6 "ab", 7 "b", 8 "ba"; ids "a" 0, "b" 1, " " 2, "ab" 3, "a b" 4,
/// "  " 5, "ba" 6, EOS 7.
pub fn toy() -> EngineTables {
    let g = GrammarTables::new(toy_grammar()).expect("toy grammar");
    let t = Trie::new(toy_trie()).expect("toy trie");
    EngineTables::new(Arc::new(g), Arc::new(t))
}

/// The toy grammar's raw tables (see [`toy`]).
pub fn toy_grammar() -> RawGrammar {
    const A: u64 = 1;
    const B: u64 = 2;
    const WS: u64 = 4;
    let mut trans = vec![-1; 4 * 256];
    trans[b'a' as usize] = 1;
    trans[b'b' as usize] = 2;
    trans[b' ' as usize] = 3;
    trans[3 * 256 + b' ' as usize] = 3;
    #[rustfmt::skip]
    let action = vec![
        2, 0, 0, 0,
        0, 3, 0, 0,
        0, 0, 0, -2,
        0, 0, 0, -1,
    ];
    RawGrammar {
        n_terminals: 3,
        dfa_trans: trans,
        dfa_accept: vec![vec![0], vec![A], vec![B], vec![WS]],
        dfa_live: vec![vec![A | B | WS], vec![A], vec![B], vec![WS]],
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
        pick_order: vec![0, 1, 2],
        ignored: vec![WS],
    }
}

/// The toy trie's raw arrays (see [`toy`]).
pub fn toy_trie() -> RawTrie {
    RawTrie {
        edge: vec![0, b' ', b' ', b'a', b' ', b'b', b'b', b'b', b'a'],
        token: vec![-1, 2, 5, 0, -1, 4, 3, 1, 6],
        size: vec![9, 2, 1, 4, 2, 1, 1, 2, 1],
        alias_offset: vec![0, 0, 1, 2, 3, 3, 4, 5, 6, 7],
        alias_ids: vec![2, 5, 0, 4, 3, 1, 6],
        n_vocab: 8,
        eos_ids: vec![7],
    }
}
