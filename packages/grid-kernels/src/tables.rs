//! The grammar tables every kernel reads: built once from grid-core's artifacts,
//! validated once, then shared read-only (behind `Arc`) by every walk.
//!
//! The layouts are grid-core's, unchanged (`grid_core.dfa`, `grid_core.lalr`,
//! `grid_core.lexicon`); only the Python-int bitsets become
//! fixed-width word rows ([`crate::bits`]) and the lexicon trie is a sorted
//! CSR array (built here from the words, [`Lexicon::from_words`], or taken as
//! grid-core's trie, as the Rust tests' fixtures give it). Validation makes every later index in bounds, so the hot
//! path never panics on tables that passed [`GrammarTables::new`].
//!
//! - [`crate::trie::Trie`]: one per tokenizer (its own module);
//! - [`GrammarTables`]: one per (projected grammar, lexicon): union DFA, LALR(1)
//!   ACTION/GOTO, lexicon trie, pick order, ignored set.

use std::sync::Arc;

use crate::bits::{self, BitRows};
use crate::error::{bad_table, Result};

/// `ln` of a remainder no lexicon word continues (grid-core's `NO_NODE`).
pub const NO_NODE: i32 = -1;
/// A dead DFA transition (grid-core's `DEAD`).
pub const DEAD: i32 = -1;

// ---------------------------------------------------------------- grammar tables

/// One grammar's artifacts as grid-core hands them over. Every bitset has
/// `bits::width_for(n_terminals + 1)` words.
#[derive(Clone, Debug, Default)]
pub struct RawGrammar {
    pub n_terminals: usize,
    /// `ByteDFA.trans`: `n_states * 256`, -1 dead.
    pub dfa_trans: Vec<i32>,
    pub dfa_accept: Vec<Vec<u64>>,
    pub dfa_live: Vec<Vec<u64>>,
    /// `LalrTables.action`: `n_states * (T + 1)`.
    pub action: Vec<i32>,
    /// `LalrTables.goto`: `n_states * n_nonterminals`, -1 undefined.
    pub goto: Vec<i32>,
    pub n_nonterminals: usize,
    pub rule_lhs: Vec<i32>,
    pub rule_len: Vec<i32>,
    /// The lexicon as words (terminal id, W_c), built here
    /// ([`Lexicon::from_words`]); None: given as the trie's three fields below.
    pub lexicon_words: Option<Vec<(usize, Vec<Vec<u8>>)>>,
    /// `Lexicon.children`: per node, (byte, child) pairs in any order.
    pub lexicon_children: Vec<Vec<(u8, i32)>>,
    pub lexicon_prefix_cats: Vec<Vec<u64>>,
    pub lexicon_word_cats: Vec<Vec<u64>>,
    pub lexicon_categories: Vec<u64>,
    /// `Grammar.pick_order`: terminal ids, highest priority first.
    pub pick_order: Vec<i32>,
    /// The `%ignore`d terminals.
    pub ignored: Vec<u64>,
}

/// The union DFA (`grid_core.dfa.ByteDFA`), compressed for the walk.
///
/// grid-core's table has 256 columns per state; bytes that act alike in every
/// state (a byte class) share one column here, and each entry carries the
/// target's "accepts something" bit, so one step is one load from a table a
/// few times smaller (the sqlite dialect: 742 states x ~60 classes instead of
/// x 256) and no second load.
#[derive(Clone, Debug)]
pub struct Dfa {
    /// Byte -> its byte class.
    pub(crate) class_of: [u8; 256],
    pub(crate) n_classes: usize,
    /// `next[q * n_classes + class]`: `(target << 1) | accepting(target)`, or
    /// -1 (dead).
    pub(crate) next: Vec<i32>,
    pub(crate) accept: BitRows,
    pub(crate) live: BitRows,
}

impl Dfa {
    /// The 256-column transition of grid-core: next state or -1.
    pub fn trans(&self, q: usize, byte: u8) -> i32 {
        let e = self.next[q * self.n_classes + self.class_of[byte as usize] as usize];
        if e < 0 {
            DEAD
        } else {
            e >> 1
        }
    }

    pub fn n_states(&self) -> usize {
        self.accept.len()
    }

    /// Byte classes (columns of the compressed table).
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }
}

/// LALR(1) tables (`grid_core.lalr.LalrTables`) and, per state, the columns
/// that are not errors (the terminals whose reduce chains `allowed` simulates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lalr {
    pub(crate) n_states: usize,
    pub(crate) n_terminals: usize,
    pub(crate) n_nonterminals: usize,
    pub(crate) action: Vec<i32>,
    pub(crate) goto: Vec<i32>,
    pub(crate) rule_lhs: Vec<u32>,
    pub(crate) rule_len: Vec<u32>,
    pub(crate) row_start: Vec<u32>,
    pub(crate) row_terms: Vec<u32>,
    /// The accessing symbol of each state, grid-core's numbering: terminal
    /// `t` is `t`, nonterminal `n` is `n_terminals + 1 + n` (the start state
    /// has none: `u32::MAX`, grid-core's `-1` masked to 32 bits).
    pub(crate) access: Vec<u32>,
}

impl Lalr {
    /// The tables [`crate::lalr::build`] built, indexed without the checks of
    /// [`Self::new`] (the builder's tables are well formed by construction;
    /// `new` over the same arrays gives the same value: tested).
    pub fn from_built(
        t: usize,
        n: usize,
        lhs: &[u32],
        rhs: &[Vec<u32>],
        b: crate::lalr::Built,
    ) -> Self {
        let w = t + 1;
        let mut row_start = Vec::with_capacity(b.n_states + 1);
        let mut row_terms = Vec::new();
        for row in b.action.chunks(w) {
            row_start.push(row_terms.len() as u32);
            row_terms.extend((0..w as u32).filter(|&c| row[c as usize] != 0));
        }
        row_start.push(row_terms.len() as u32);
        Self {
            n_states: b.n_states,
            n_terminals: t,
            n_nonterminals: n,
            action: b.action,
            goto: b.goto,
            rule_lhs: lhs.to_vec(),
            rule_len: rhs.iter().map(|body| body.len() as u32).collect(),
            row_start,
            row_terms,
            access: b.state_symbol.iter().map(|&x| x as u32).collect(),
        }
    }

    /// Validate `raw`'s LALR(1) tables and index them (its other tables are
    /// not read).
    pub fn new(raw: &RawGrammar) -> Result<Self> {
        const L: &str = "LALR";
        let w = raw.n_terminals + 1;
        let n_states = raw.action.len() / w;
        let n_nt = raw.n_nonterminals;
        let n_rules = raw.rule_lhs.len();
        if n_states == 0 || raw.action.len() != n_states * w {
            return Err(bad_table(
                L,
                format!(
                    "action has {} cells, not a multiple of {w}",
                    raw.action.len()
                ),
            ));
        }
        if raw.goto.len() != n_states * n_nt {
            return Err(bad_table(
                L,
                format!(
                    "goto has {} cells, expected {}",
                    raw.goto.len(),
                    n_states * n_nt
                ),
            ));
        }
        if n_rules == 0 || raw.rule_len.len() != n_rules {
            return Err(bad_table(L, "rule_lhs and rule_len differ in length"));
        }
        for &a in &raw.action {
            let ok = match a {
                0 => true,
                k if k > 0 => ((k - 1) as usize) < n_states,
                k => ((-(k as i64) - 1) as usize) < n_rules,
            };
            if !ok {
                return Err(bad_table(L, format!("action cell {a} is out of range")));
            }
        }
        if let Some(bad) = raw.goto.iter().find(|&&g| g < -1 || g >= n_states as i32) {
            return Err(bad_table(L, format!("goto to state {bad} of {n_states}")));
        }
        let rule_lhs: Vec<u32> = raw
            .rule_lhs
            .iter()
            .map(|&x| {
                usize::try_from(x)
                    .ok()
                    .filter(|&x| x < n_nt)
                    .map(|x| x as u32)
            })
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(L, "a rule's left-hand side is out of range"))?;
        let rule_len: Vec<u32> = raw
            .rule_len
            .iter()
            .map(|&x| u32::try_from(x).ok())
            .collect::<Option<_>>()
            .ok_or_else(|| bad_table(L, "a negative rule length"))?;
        let mut row_start = Vec::with_capacity(n_states + 1);
        let mut row_terms = Vec::new();
        for s in 0..n_states {
            row_start.push(row_terms.len() as u32);
            row_terms.extend((0..w as u32).filter(|&t| raw.action[s * w + t as usize] != 0));
        }
        row_start.push(row_terms.len() as u32);
        let mut access = vec![u32::MAX; n_states];
        for s in 0..n_states {
            for t in 0..w {
                let a = raw.action[s * w + t];
                if a > 0 {
                    access[(a - 1) as usize] = t as u32;
                }
            }
            for n in 0..n_nt {
                let g = raw.goto[s * n_nt + n];
                if g >= 0 {
                    access[g as usize] = (raw.n_terminals + 1 + n) as u32;
                }
            }
        }
        Ok(Self {
            n_states,
            n_terminals: raw.n_terminals,
            n_nonterminals: n_nt,
            action: raw.action.clone(),
            goto: raw.goto.clone(),
            rule_lhs,
            rule_len,
            row_start,
            row_terms,
            access,
        })
    }
}

impl Lalr {
    /// Columns of ACTION: the terminals and `$END`.
    #[inline]
    pub fn width(&self) -> usize {
        self.n_terminals + 1
    }

    /// The non-error columns of `state`, ascending.
    #[inline]
    pub fn row_terms(&self, state: usize) -> &[u32] {
        &self.row_terms[self.row_start[state] as usize..self.row_start[state + 1] as usize]
    }

    pub fn n_states(&self) -> usize {
        self.n_states
    }
}

/// The schema lexicon (`grid_core.lexicon.Lexicon`): children as a sorted CSR.
#[derive(Clone, Debug)]
pub struct Lexicon {
    pub(crate) categories: Vec<u64>,
    pub(crate) start: Vec<u32>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) child: Vec<i32>,
    pub(crate) prefix_cats: BitRows,
    pub(crate) word_cats: BitRows,
}

impl Lexicon {
    /// The trie of `words` (terminal id, its words), numbered as grid-core's
    /// `build_lexicon` numbers it: terminals in increasing id, each one's words
    /// in increasing byte order, a node numbered when first reached (the root
    /// is node 0). Node numbers enter the cache keys of identifier positions,
    /// which the kernels and grid-core share, so the two numberings must agree
    /// (grid-core's differential tests check it). `categories`: the terminals
    /// with a lexicon (an empty W_c included).
    pub fn from_words(
        words: &[(usize, Vec<Vec<u8>>)],
        categories: Vec<u64>,
        n_terminals: usize,
        width: usize,
    ) -> Result<Self> {
        const X: &str = "lexicon";
        check_set(X, || "categories".into(), &categories, width, n_terminals)?;
        let mut order: Vec<&(usize, Vec<Vec<u8>>)> = words.iter().collect();
        order.sort_by_key(|(t, _)| *t);
        let mut kids: Vec<Vec<(u8, i32)>> = vec![Vec::new()];
        let mut prefix = vec![0u64; width];
        let mut whole = vec![0u64; width];
        for (k, (t, ws)) in order.iter().enumerate() {
            let t = *t;
            if t >= n_terminals || (k > 0 && order[k - 1].0 == t) {
                return Err(bad_table(
                    X,
                    format!("terminal {t} out of range or given twice"),
                ));
            }
            let (word, bit) = (t / 64, 1u64 << (t % 64));
            let mut sorted: Vec<&Vec<u8>> = ws.iter().collect();
            sorted.sort_unstable();
            sorted.dedup();
            if !sorted.is_empty() {
                prefix[word] |= bit;
            }
            for w in sorted {
                let mut node = 0usize;
                for &b in w {
                    let found = kids[node].iter().find(|(c, _)| *c == b).map(|&(_, n)| n);
                    node = match found {
                        Some(n) => n as usize,
                        None => {
                            let n = kids.len();
                            kids[node].push((b, n as i32));
                            kids.push(Vec::new());
                            prefix.resize(prefix.len() + width, 0);
                            whole.resize(whole.len() + width, 0);
                            n
                        }
                    };
                    prefix[node * width + word] |= bit;
                }
                whole[node * width + word] |= bit;
            }
        }
        let mut start = Vec::with_capacity(kids.len() + 1);
        let (mut bytes, mut child) = (Vec::new(), Vec::new());
        for row in &mut kids {
            start.push(bytes.len() as u32);
            row.sort_unstable();
            bytes.extend(row.iter().map(|&(b, _)| b));
            child.extend(row.iter().map(|&(_, c)| c));
        }
        start.push(bytes.len() as u32);
        Ok(Lexicon {
            categories,
            start,
            bytes,
            child,
            prefix_cats: BitRows::from_flat(width, prefix),
            word_cats: BitRows::from_flat(width, whole),
        })
    }

    /// Per node: (byte, child) pairs in byte order.
    pub fn edges(&self, node: usize) -> impl Iterator<Item = (u8, i32)> + '_ {
        let (lo, hi) = (self.start[node] as usize, self.start[node + 1] as usize);
        self.bytes[lo..hi]
            .iter()
            .copied()
            .zip(self.child[lo..hi].iter().copied())
    }

    pub fn prefix_cats(&self, node: usize) -> &[u64] {
        self.prefix_cats.row(node)
    }

    pub fn word_cats(&self, node: usize) -> &[u64] {
        self.word_cats.row(node)
    }

    /// The node after `byte`, or [`NO_NODE`] once no word continues.
    #[inline]
    pub fn step(&self, node: i32, byte: u8) -> i32 {
        if node == NO_NODE {
            return NO_NODE;
        }
        let n = node as usize;
        let (lo, hi) = (self.start[n] as usize, self.start[n + 1] as usize);
        match self.bytes[lo..hi].binary_search(&byte) {
            Ok(k) => self.child[lo + k],
            Err(_) => NO_NODE,
        }
    }

    pub fn n_nodes(&self) -> usize {
        self.start.len() - 1
    }
}

/// What the walk reads of the union DFA and the ignored terminals: the same
/// for every projection of a dialect (they keep its terminals), so it is
/// built once per dialect and shared (`Arc`) by each projection's
/// [`GrammarTables`] ([`GrammarTables::with_parts`]).
#[derive(Clone, Debug)]
pub struct Lexing {
    pub(crate) n_terminals: usize,
    pub(crate) ignored: Vec<u64>,
    pub(crate) dfa: Dfa,
    /// Per DFA state: the walk below a remainder in this state may read its
    /// last accept (pick among its candidates) before the next accept
    /// replaces it.
    pub(crate) la_read: Vec<bool>,
    /// Per DFA state: the bytes that lead back to it (a 256-bit set).
    pub(crate) loops: Vec<[u64; 4]>,
    /// Per DFA state: the one state every valid multi-byte UTF-8 character
    /// leads it to, with no byte dying on the way (`u32::MAX`: none). The
    /// states in between hold its live set (the DFA's live sets shrink along
    /// transitions). A **text state** leads back to itself: the body of a
    /// string literal or a comment over UTF-8 text.
    pub(crate) text_next: Vec<u32>,
    /// Per DFA state `q`: its successors, each with the bytes that lead `q`
    /// to it (a 256-bit set), at `succ[succ_at[q]..succ_at[q + 1]]`.
    pub(crate) succ: Vec<(u32, [u64; 4])>,
    pub(crate) succ_at: Vec<u32>,
    /// Per DFA state: the bytes that kill the automaton there.
    pub(crate) dead: Vec<[u64; 4]>,
}

impl Lexing {
    /// Validate `raw`'s DFA and ignored set and derive the walk's tables from
    /// them (its other tables are not read).
    pub fn new(raw: &RawGrammar) -> Result<Self> {
        let t = raw.n_terminals;
        if t == 0 {
            return Err(bad_table("grammar", "no terminals"));
        }
        let width = bits::width_for(t + 1);
        let dfa = GrammarTables::build_dfa(raw, width)?;
        check_set("grammar", || "ignored".into(), &raw.ignored, width, t)?;
        let la_read = la_reads(&dfa, &raw.ignored);
        let loops = (0..dfa.accept.len())
            .map(|q| {
                let mut set = [0u64; 4];
                for b in 0..256usize {
                    let e = dfa.next[q * dfa.n_classes + dfa.class_of[b] as usize];
                    if e >= 0 && (e >> 1) as usize == q {
                        set[b / 64] |= 1 << (b % 64);
                    }
                }
                set
            })
            .collect();
        let text_next = (0..dfa.accept.len()).map(|q| text_end(&dfa, q)).collect();
        let (succ, succ_at, dead) = successors(&dfa);
        Ok(Self {
            n_terminals: t,
            ignored: raw.ignored.clone(),
            dfa,
            la_read,
            loops,
            text_next,
            succ,
            succ_at,
            dead,
        })
    }

    pub fn n_terminals(&self) -> usize {
        self.n_terminals
    }
}

/// Everything the scanner and the parser read for one (grammar, lexicon).
#[derive(Clone, Debug)]
pub struct GrammarTables {
    pub(crate) width: usize,
    pub(crate) n_terminals: usize,
    /// The dialect's union DFA and what the walk derives from it (shared).
    pub(crate) lexing: Arc<Lexing>,
    /// The LALR(1) tables (shared by the engines of one projection).
    pub(crate) lalr: Arc<Lalr>,
    pub(crate) lexicon: Lexicon,
    /// Position of each terminal in the pick order (`u32::MAX`: never picked).
    pub(crate) rank: Vec<u32>,
    pub(crate) order: Vec<u32>,
    /// Per DFA state: it accepts a lexicon category.
    pub(crate) accepts_category: Vec<bool>,
    /// Terminals some LALR state can take, and the ignored ones: the only
    /// picks there are (`Lexer.emittable`).
    pub(crate) emittable: Vec<u64>,
}

/// [`GrammarTables::succ`], [`GrammarTables::succ_at`] and
/// [`GrammarTables::dead`] of every state, one byte class at a time.
#[allow(clippy::type_complexity)]
fn successors(dfa: &Dfa) -> (Vec<(u32, [u64; 4])>, Vec<u32>, Vec<[u64; 4]>) {
    let nc = dfa.n_classes;
    let mut class_bytes = vec![[0u64; 4]; nc];
    for b in 0..256usize {
        class_bytes[dfa.class_of[b] as usize][b / 64] |= 1 << (b % 64);
    }
    let n = dfa.accept.len();
    let (mut succ, mut succ_at, mut dead) = (Vec::new(), vec![0u32], vec![[0u64; 4]; n]);
    for (q, dead_q) in dead.iter_mut().enumerate() {
        let first = succ.len();
        for (c, bytes) in class_bytes.iter().enumerate() {
            let e = dfa.next[q * nc + c];
            let into = if e < 0 {
                &mut *dead_q
            } else {
                let t = (e >> 1) as u32;
                match succ[first..].iter().position(|(s, _)| *s == t) {
                    Some(i) => &mut succ[first + i].1,
                    None => {
                        succ.push((t, [0u64; 4]));
                        &mut succ.last_mut().expect("pushed").1
                    }
                }
            };
            for (x, y) in into.iter_mut().zip(bytes) {
                *x |= y;
            }
        }
        succ_at.push(succ.len() as u32);
    }
    (succ, succ_at, dead)
}

/// [`GrammarTables::text_next`] of state `q`: each multi-byte character
/// shape (lead byte, then its continuation ranges) is followed one byte class
/// at a time.
fn text_end(dfa: &Dfa, q: usize) -> u32 {
    let mut end = u32::MAX;
    for shape in UTF8_SHAPES {
        let mut states = vec![q];
        for &(lo, hi) in shape {
            let mut next: Vec<usize> = Vec::new();
            let mut last_class = usize::MAX;
            for b in lo..=hi {
                let c = dfa.class_of[b as usize] as usize;
                if c == last_class {
                    continue;
                }
                last_class = c;
                for &s in &states {
                    let e = dfa.next[s * dfa.n_classes + c];
                    if e < 0 {
                        return u32::MAX;
                    }
                    let t = (e >> 1) as usize;
                    if !next.contains(&t) {
                        next.push(t);
                    }
                }
            }
            states = next;
        }
        match (states.as_slice(), end) {
            ([t], u32::MAX) => end = *t as u32,
            ([t], e) if *t as u32 == e => {}
            _ => return u32::MAX,
        }
    }
    end
}

/// The multi-byte UTF-8 character shapes: a lead byte range, then the ranges
/// of its continuation bytes.
const UTF8_SHAPES: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

/// [`GrammarTables::la_read`] of every DFA state: the least fixpoint of
/// `read[q] = q has a dead byte, or some non-accepting successor s may be
/// not live or has read[s]` (a pick happens at a death, and where a remainder
/// is not live the walk asks whether its last accept could still be picked).
/// A state whose live set holds an ignored terminal is live under every
/// allowed set.
fn la_reads(dfa: &Dfa, ignored: &[u64]) -> Vec<bool> {
    let (n, nc) = (dfa.accept.len(), dfa.n_classes);
    let row = |q: usize| &dfa.next[q * nc..(q + 1) * nc];
    let mut read: Vec<bool> = (0..n).map(|q| row(q).iter().any(|&e| e < 0)).collect();
    let may_die: Vec<bool> = (0..n)
        .map(|q| !bits::intersects(dfa.live.row(q), ignored))
        .collect();
    loop {
        let mut changed = false;
        for q in 0..n {
            if read[q] {
                continue;
            }
            let reads = row(q).iter().any(|&e| {
                let s = (e >> 1) as usize;
                e >= 0 && e & 1 == 0 && (may_die[s] || read[s])
            });
            if reads {
                read[q] = true;
                changed = true;
            }
        }
        if !changed {
            return read;
        }
    }
}

fn check_set(
    table: &'static str,
    what: impl Fn() -> String,
    set: &[u64],
    width: usize,
    n_bits: usize,
) -> Result<()> {
    if set.len() != width {
        return Err(bad_table(
            table,
            format!("{} has {} words, expected {width}", what(), set.len()),
        ));
    }
    if bits::bit_len(set) > n_bits {
        return Err(bad_table(
            table,
            format!("{} names a terminal past {n_bits}", what()),
        ));
    }
    Ok(())
}

fn rows(
    table: &'static str,
    what: &str,
    sets: &[Vec<u64>],
    width: usize,
    n_bits: usize,
) -> Result<BitRows> {
    for (i, s) in sets.iter().enumerate() {
        check_set(table, || format!("{what}[{i}]"), s, width, n_bits)?;
    }
    Ok(BitRows::from_rows(width, sets).expect("widths checked"))
}

impl GrammarTables {
    /// Validate and take over one grammar's artifacts (see [`RawGrammar`]).
    pub fn new(raw: RawGrammar) -> Result<Self> {
        let lexing = Arc::new(Lexing::new(&raw)?);
        let lalr = Arc::new(Lalr::new(&raw)?);
        Self::with_parts(raw, lexing, lalr)
    }

    /// [`Self::new`] over a dialect's [`Lexing`] and a projection's [`Lalr`],
    /// built before: `raw`'s DFA and LALR fields are not read (they may be
    /// empty). The terminal count and ignored set must be the lexing's, the
    /// terminal count the LALR tables'.
    pub fn with_parts(raw: RawGrammar, lexing: Arc<Lexing>, lalr: Arc<Lalr>) -> Result<Self> {
        let t = raw.n_terminals;
        if t != lexing.n_terminals || raw.ignored != lexing.ignored {
            return Err(bad_table(
                "grammar",
                format!(
                    "its {t} terminals and ignored set are not those of the shared DFA tables ({})",
                    lexing.n_terminals
                ),
            ));
        }
        if t != lalr.n_terminals {
            return Err(bad_table(
                "grammar",
                format!(
                    "its {t} terminals are not the {} of the shared LALR tables",
                    lalr.n_terminals
                ),
            ));
        }
        let width = bits::width_for(t + 1);
        let lexicon = Self::build_lexicon(&raw, width)?;
        let mut rank = vec![u32::MAX; t];
        let mut order = Vec::with_capacity(raw.pick_order.len());
        for (k, &x) in raw.pick_order.iter().enumerate() {
            let x = usize::try_from(x)
                .ok()
                .filter(|&x| x < t)
                .ok_or_else(|| bad_table("pick order", format!("terminal {x} out of range")))?;
            if rank[x] != u32::MAX {
                return Err(bad_table(
                    "pick order",
                    format!("terminal {x} appears twice"),
                ));
            }
            rank[x] = k as u32;
            order.push(x as u32);
        }
        let dfa = &lexing.dfa;
        let accepts_category = (0..dfa.accept.len())
            .map(|q| bits::intersects(dfa.accept.row(q), &lexicon.categories))
            .collect();
        let mut emittable = raw.ignored.clone();
        for &c in &lalr.row_terms {
            if (c as usize) < t {
                bits::set(&mut emittable, c as usize);
            }
        }
        Ok(Self {
            accepts_category,
            emittable,
            width,
            n_terminals: t,
            lexing,
            lalr,
            lexicon,
            rank,
            order,
        })
    }

    /// These tables with another lexicon over the same terminals and
    /// categories (a scope's words: [`crate::scoped`]); the DFA and LALR
    /// tables are shared.
    pub fn with_lexicon(&self, lexicon: Lexicon) -> Result<Self> {
        if lexicon.categories != self.lexicon.categories {
            return Err(bad_table(
                "lexicon",
                "a scope's lexicon has the base lexicon's categories",
            ));
        }
        Ok(Self {
            lexicon,
            ..self.clone()
        })
    }

    /// The lexicon's category terminals.
    pub fn lexicon_categories(&self) -> &[u64] {
        &self.lexicon.categories
    }

    fn build_dfa(raw: &RawGrammar, width: usize) -> Result<Dfa> {
        const D: &str = "DFA";
        let n = raw.dfa_accept.len();
        if n == 0 || raw.dfa_trans.len() != n * 256 || raw.dfa_live.len() != n {
            return Err(bad_table(
                D,
                format!(
                    "{} accept rows, {} live rows and {} transitions do not describe the same states",
                    n,
                    raw.dfa_live.len(),
                    raw.dfa_trans.len()
                ),
            ));
        }
        if let Some(bad) = raw.dfa_trans.iter().find(|&&q| q < DEAD || q >= n as i32) {
            return Err(bad_table(D, format!("transition to state {bad} of {n}")));
        }
        let accept = rows(D, "accept", &raw.dfa_accept, width, raw.n_terminals)?;
        let live = rows(D, "live", &raw.dfa_live, width, raw.n_terminals)?;
        // Byte classes: identical columns of the 256-wide table, numbered in
        // order of their least byte.
        let column =
            |b: usize| -> Vec<i32> { (0..n).map(|q| raw.dfa_trans[q * 256 + b]).collect() };
        let mut classes: std::collections::HashMap<Vec<i32>, u8> = std::collections::HashMap::new();
        let mut class_of = [0u8; 256];
        let mut firsts: Vec<usize> = Vec::new();
        for (b, slot) in class_of.iter_mut().enumerate() {
            let next_id = classes.len();
            *slot = *classes.entry(column(b)).or_insert_with(|| {
                firsts.push(b);
                next_id as u8
            });
        }
        let n_classes = firsts.len();
        let mut next = Vec::with_capacity(n * n_classes);
        for q in 0..n {
            for &b in &firsts {
                let target = raw.dfa_trans[q * 256 + b];
                next.push(if target < 0 {
                    -1
                } else {
                    target << 1 | i32::from(!bits::is_empty(accept.row(target as usize)))
                });
            }
        }
        Ok(Dfa {
            class_of,
            n_classes,
            next,
            accept,
            live,
        })
    }

    fn build_lexicon(raw: &RawGrammar, width: usize) -> Result<Lexicon> {
        const X: &str = "lexicon";
        if let Some(words) = &raw.lexicon_words {
            let categories = raw.lexicon_categories.clone();
            return Lexicon::from_words(words, categories, raw.n_terminals, width);
        }
        let n = raw.lexicon_children.len();
        let t = raw.n_terminals;
        if n == 0 || raw.lexicon_prefix_cats.len() != n || raw.lexicon_word_cats.len() != n {
            return Err(bad_table(X, "children, prefix_cats and word_cats must describe the same nodes (at least the root)"));
        }
        check_set(X, || "categories".into(), &raw.lexicon_categories, width, t)?;
        let mut start = Vec::with_capacity(n + 1);
        let mut bytes = Vec::new();
        let mut child = Vec::new();
        for (i, kids) in raw.lexicon_children.iter().enumerate() {
            start.push(bytes.len() as u32);
            let mut kids = kids.clone();
            kids.sort_unstable();
            for (k, &(b, c)) in kids.iter().enumerate() {
                if k > 0 && kids[k - 1].0 == b {
                    return Err(bad_table(
                        X,
                        format!("node {i} has two children on byte {b}"),
                    ));
                }
                if c <= 0 || c as usize >= n {
                    return Err(bad_table(X, format!("node {i} has child {c} of {n}")));
                }
                bytes.push(b);
                child.push(c);
            }
        }
        start.push(bytes.len() as u32);
        Ok(Lexicon {
            categories: raw.lexicon_categories.clone(),
            start,
            bytes,
            child,
            prefix_cats: rows(X, "prefix_cats", &raw.lexicon_prefix_cats, width, t)?,
            word_cats: rows(X, "word_cats", &raw.lexicon_word_cats, width, t)?,
        })
    }

    pub fn n_terminals(&self) -> usize {
        self.n_terminals
    }

    /// Words of every terminal set (allowed sets included: bit T is `$END`).
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn dfa(&self) -> &Dfa {
        &self.lexing.dfa
    }

    /// The dialect's DFA tables this grammar's tables share.
    pub fn lexing(&self) -> &Arc<Lexing> {
        &self.lexing
    }

    pub fn lalr(&self) -> &Lalr {
        &self.lalr
    }

    pub fn n_dfa_states(&self) -> usize {
        self.lexing.dfa.accept.len()
    }

    /// `t` is `%ignore`d.
    #[inline]
    pub fn is_ignored(&self, t: usize) -> bool {
        bits::test(&self.lexing.ignored, t)
    }

    /// Assert the invariants [`GrammarTables::new`] establishes (for tests).
    pub fn check_invariants(&self) {
        let n = self.n_dfa_states();
        let dfa = &self.lexing.dfa;
        assert_eq!(dfa.next.len(), n * dfa.n_classes);
        assert!(dfa.class_of.iter().all(|&c| (c as usize) < dfa.n_classes));
        for &e in &dfa.next {
            assert!(e == -1 || (e >= 0 && ((e >> 1) as usize) < n));
            if e >= 0 {
                let accepting = !bits::is_empty(dfa.accept.row((e >> 1) as usize));
                assert_eq!(e & 1 == 1, accepting, "accept bit of an entry");
            }
        }
        for q in 0..n {
            for b in 0..=255u8 {
                assert!((DEAD..n as i32).contains(&dfa.trans(q, b)));
            }
        }
        for s in 0..n {
            let (acc, live) = (dfa.accept.row(s), dfa.live.row(s));
            assert!(
                acc.iter().zip(live).all(|(a, l)| a & !l == 0),
                "state {s} accepts past live"
            );
        }
        let lx = &self.lexicon;
        for i in 0..lx.n_nodes() {
            let (lo, hi) = (lx.start[i] as usize, lx.start[i + 1] as usize);
            assert!(lx.bytes[lo..hi].windows(2).all(|w| w[0] < w[1]));
            assert!(lx.child[lo..hi].iter().all(|&c| c as usize > i));
        }
        let lalr = &self.lalr;
        assert_eq!(lalr.row_start.len(), lalr.n_states + 1);
        for (k, &t) in self.order.iter().enumerate() {
            assert_eq!(self.rank[t as usize], k as u32);
        }
    }
}
