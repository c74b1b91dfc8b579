//! The reserve of mode 1: completion cost in tokens and the completion itself.
//!
//! Mirrors the per-configuration half of `grid_core.reserve.ReserveTable`
//! (its module header defines every term used here: piece, token cost, cell
//! vector, finish option, lead discount), answer for answer: the same reserve
//! and the same completion token ids at every configuration (grid-core's
//! differential tests check it). The grammar-level half (each terminal's
//! piece and its tokens, the nonterminals' argmin rules, the kernel items
//! with their rest costs, the DFA's byte classes and separator-safe states)
//! is computed once per engine by grid-core and handed over as
//! [`RawReserve`]; what depends on the stack and the remainder is computed
//! here, memoized per interned stack node:
//!
//! - the **cell vector** of a node, by Dijkstra over its kernel items (the
//!   argmins are broken exactly as grid-core breaks them: items in their
//!   sorted order, the heap by (cost, symbol));
//! - the **finish options** of a scan state (q, ln), by breadth-first search
//!   over (DFA state, lexicon node) pairs, and the best option per (node, q,
//!   ln) under the node's allowed set;
//! - the **token cost** of a byte string, a shortest path over the trie.
//!
//! Two parts of the grammar-level half walk the vocabulary, so grid-core's
//! table calls them here: [`single_token_pieces`] (the compatible rows and
//! the pieces one token spells) and [`split`].
//!
//! Memory. Each memo is an [`Lru`] capped in bytes (by default
//! [`MEMO_BYTES`]); dropping an entry costs its recomputation, never another
//! answer (a cell whose ancestor's was evicted recomputes that one first).
//! Node memos belong to one arena generation ([`crate::engine`]): a node id
//! names a stack only within its generation, so they are emptied when a
//! configuration of another generation is asked about.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, Weak};

use crate::bits;
use crate::cache::FxMap;
use crate::engine::{lock, Stacks};
use crate::error::{bad_table, KernelError, Result};
use crate::lexer::Config;
use crate::lru::Lru;
use crate::parser::{NodeId, StackArena};
use crate::tables::{GrammarTables, NO_NODE};
use crate::trie::Trie;

/// Cost of what cannot be written at all (`grid_core.reserve.INF`).
pub const INF: u64 = 1 << 40;

/// Product states a finish-option search may visit (`_FINISH_LIMIT`).
const FINISH_LIMIT: usize = 50_000;

const SPACE: u8 = 0x20;
const NEWLINE: u8 = 0x0A;

/// The grammar-level reserve tables as grid-core computes them
/// (`ReserveTable`'s attributes of the same names).
#[derive(Clone, Debug, Default)]
pub struct RawReserve {
    /// Per terminal: the tokens of its piece, or `None` (no writable lexeme).
    pub term_tokens: Vec<Option<Vec<u32>>>,
    /// Per terminal: the tokens of its piece without the leading space when
    /// that is cheaper, else `term_tokens` (empty where there is no piece).
    pub lead_tokens: Vec<Vec<u32>>,
    /// Per nonterminal: the rule of its least-cost sentence, or -1.
    pub nt_rule: Vec<i32>,
    /// Per rule: its right-hand side (grid-core's symbol numbering).
    pub rhs: Vec<Vec<u32>>,
    /// The least cost of the start symbol's sentences.
    pub start_cost: u64,
    /// Per LALR state: its kernel items as (rest cost, rule, dot, lhs
    /// symbol), sorted.
    pub items: Vec<Vec<(u64, u32, u32, u32)>>,
    /// The DFA's byte classes as (representative, members).
    pub classes: Vec<(u8, Vec<u8>)>,
    /// The DFA states a following piece's space ends a lexeme from.
    pub safe: Vec<u32>,
    /// Per terminal: its piece without the leading space, as (first byte,
    /// tokens), or `None` (no piece, or no token spells it): what an abutting
    /// finish option writes next (`ReserveTable.bare_tokens`).
    pub bare: Vec<Option<(u8, Vec<u32>)>>,
}

/// A way to finish a remainder (`_Option`).
#[derive(Clone, Debug)]
struct Finish {
    suffix: Vec<u8>,
    cands: Vec<u64>,
    end: bool,
    joined: bool,
    /// The DFA state of the finished lexeme where whitespace would continue it
    /// (the next piece follows bare), else -1 (`_Option.abut`).
    abut: i32,
}

/// A cell vector: per symbol with a transition out of the node's state,
/// (G, rule, dot) of the argmin item, sorted by symbol.
type Cell = Vec<(u32, u64, i32, i32)>;

/// Bytes each of a reserve's five memos holds by default before it evicts its
/// least recently used entries ([`crate::lru`]).
pub const MEMO_BYTES: usize = 8 << 20;

/// The memos of one arena generation.
struct NodeMemo {
    generation: Weak<Mutex<Stacks>>,
    cells: Lru<NodeId, Arc<Cell>>,
    /// (node, q, ln) -> (cost, option index, stack after the option).
    finish: Lru<(NodeId, u32, i32), (u64, usize, NodeId)>,
    discounts: Lru<NodeId, u64>,
}

impl NodeMemo {
    fn new(generation: Weak<Mutex<Stacks>>, cap: usize) -> Self {
        Self {
            generation,
            cells: Lru::new(cap),
            finish: Lru::new(cap),
            discounts: Lru::new(cap),
        }
    }
}

/// Memos that do not depend on stacks.
struct ScanMemo {
    options: Lru<(u32, i32), Arc<Vec<Finish>>>,
    split: Lru<Vec<u8>, Option<Arc<Vec<u32>>>>,
}

/// One engine's reserve (see the module header). Thread-safe: the memos are
/// behind locks, taken in the order node memo, scan memo, arena.
pub struct Reserve {
    grammar: Arc<GrammarTables>,
    trie: Arc<Trie>,
    raw: RawReserve,
    /// Per LALR state: (symbol, target state) of every shift and goto, by symbol.
    trans: Vec<Vec<(u32, u32)>>,
    base: u32,
    max_pop: usize,
    safe: Vec<bool>,
    nl_ok: bool,
    /// Each memo's cap in bytes.
    memo_bytes: usize,
    nodes: Mutex<NodeMemo>,
    scans: Mutex<ScanMemo>,
}

impl std::fmt::Debug for Reserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reserve(start cost {})", self.raw.start_cost)
    }
}

fn inconsistent(detail: impl Into<String>) -> KernelError {
    bad_table("reserve", detail)
}

impl Reserve {
    /// Check `raw` against the grammar and the trie it was computed for; each
    /// memo holds at most `memo_bytes`.
    pub fn new(
        grammar: Arc<GrammarTables>,
        trie: Arc<Trie>,
        raw: RawReserve,
        memo_bytes: usize,
    ) -> Result<Self> {
        let lalr = grammar.lalr();
        let t = grammar.n_terminals();
        let n_symbols = t + 1 + lalr.n_nonterminals;
        let n_vocab = trie.n_vocab() as u32;
        if raw.term_tokens.len() != t || raw.lead_tokens.len() != t || raw.bare.len() != t {
            return Err(inconsistent("one piece per terminal"));
        }
        let tokens_ok = |ts: &[u32]| ts.iter().all(|&x| x < n_vocab);
        for (a, b) in raw.term_tokens.iter().zip(&raw.lead_tokens) {
            if !a
                .as_deref()
                .map_or(b.is_empty(), |a| tokens_ok(a) && tokens_ok(b))
            {
                return Err(inconsistent("a piece's tokens are out of range"));
            }
        }
        if raw.bare.iter().flatten().any(|(_, ts)| !tokens_ok(ts)) {
            return Err(inconsistent("a bare piece's tokens are out of range"));
        }
        if raw.nt_rule.len() != lalr.n_nonterminals
            || raw.rhs.len() != lalr.rule_lhs.len()
            || raw
                .rhs
                .iter()
                .zip(&lalr.rule_len)
                .any(|(r, &n)| r.len() != n as usize)
            || raw.rhs.iter().flatten().any(|&x| x as usize >= n_symbols)
            || raw.nt_rule.iter().any(|&r| r >= raw.rhs.len() as i32)
            || raw.rhs.first().is_none_or(|r| r.is_empty())
        {
            return Err(inconsistent("rules do not match the grammar's"));
        }
        let n_states = lalr.n_states;
        if raw.items.len() != n_states {
            return Err(inconsistent("one item list per state"));
        }
        let items_ok = raw.items.iter().flatten().all(|&(_, r, d, lhs)| {
            (r as usize) < raw.rhs.len()
                && (d >= 1 || r == 0)
                && d as usize <= raw.rhs[r as usize].len()
                && lhs as usize == t + 1 + lalr.rule_lhs[r as usize] as usize
        });
        if !items_ok {
            return Err(inconsistent("kernel items out of range"));
        }
        let n_nt = lalr.n_nonterminals;
        let trans = (0..n_states)
            .map(|s| {
                let actions = &lalr.action[s * (t + 1)..s * (t + 1) + t];
                let gotos = &lalr.goto[s * n_nt..(s + 1) * n_nt];
                let shifts = (0..t).filter(|&x| actions[x] > 0);
                shifts
                    .map(|x| (x as u32, actions[x] as u32 - 1))
                    .chain(
                        (0..n_nt)
                            .filter(|&a| gotos[a] >= 0)
                            .map(|a| ((t + 1 + a) as u32, gotos[a] as u32)),
                    )
                    .collect()
            })
            .collect();
        let n_dfa = grammar.n_dfa_states();
        let mut safe = vec![false; n_dfa];
        for &q in &raw.safe {
            *safe
                .get_mut(q as usize)
                .ok_or_else(|| inconsistent("a safe state out of range"))? = true;
        }
        let dfa = grammar.dfa();
        let q_space = dfa.trans(0, SPACE);
        if q_space < 0 || !safe[q_space as usize] {
            return Err(inconsistent(
                "a space is not a separator that every piece ends",
            ));
        }
        let q_nl = dfa.trans(0, NEWLINE);
        let nl_ok = q_nl >= 0 && {
            let q = dfa.trans(q_nl as usize, SPACE);
            q >= 0 && safe[q as usize]
        };
        let max_pop = lalr.rule_len.iter().copied().max().unwrap_or(0) as usize;
        Ok(Self {
            trans,
            base: t as u32 + 1,
            grammar,
            trie,
            raw,
            max_pop,
            safe,
            nl_ok,
            memo_bytes,
            nodes: Mutex::new(NodeMemo::new(Weak::new(), memo_bytes)),
            scans: Mutex::new(ScanMemo {
                options: Lru::new(memo_bytes),
                split: Lru::new(memo_bytes),
            }),
        })
    }

    /// The reserve of `config` in the arena generation `stacks`: 0 where EOS
    /// is legal, [`INF`] where no completion is writable (`ReserveTable.reserve`).
    pub fn reserve(&self, stacks: &Arc<Mutex<Stacks>>, config: &Config) -> Result<u64> {
        self.query(stacks, |q| q.reserve(config))
    }

    /// The token ids of the completion [`Self::reserve`] counts (EOS not
    /// included; `ReserveTable.completion`); `None` where there is none.
    pub fn completion(
        &self,
        stacks: &Arc<Mutex<Stacks>>,
        config: &Config,
    ) -> Result<Option<Vec<u32>>> {
        self.query(stacks, |q| q.completion(config))
    }

    /// The suffixes of the finish options of a remainder in scan state
    /// `(q, ln)`, in their order (`ReserveTable.finish_options`).
    pub fn finish_suffixes(&self, stacks: &Arc<Mutex<Stacks>>, q: u32, ln: i32) -> Vec<Vec<u8>> {
        self.query(stacks, |qr| {
            qr.finish_options(q, ln)
                .iter()
                .map(|o| o.suffix.clone())
                .collect()
        })
    }

    /// Run `ask` with the memos and the generation's arena locked, in that order.
    fn query<T>(&self, stacks: &Arc<Mutex<Stacks>>, ask: impl FnOnce(&mut Query) -> T) -> T {
        let mut nodes = self.node_memo(stacks);
        let mut scans = lock(&self.scans);
        let mut generation = lock(stacks);
        ask(&mut Query {
            r: self,
            nodes: &mut nodes,
            scans: &mut scans,
            arena: &mut generation.arena,
        })
    }

    /// (bytes held, cap, evicted) of each memo: cells, finishes, discounts,
    /// finish options, token splits.
    pub fn usage(&self) -> [(usize, usize, u64); 5] {
        let nodes = lock(&self.nodes);
        let scans = lock(&self.scans);
        [
            nodes.cells.usage(),
            nodes.finish.usage(),
            nodes.discounts.usage(),
            scans.options.usage(),
            scans.split.usage(),
        ]
    }

    /// The node memo, emptied first if it belongs to another generation.
    fn node_memo(&self, stacks: &Arc<Mutex<Stacks>>) -> std::sync::MutexGuard<'_, NodeMemo> {
        let mut memo = lock(&self.nodes);
        let same = memo
            .generation
            .upgrade()
            .is_some_and(|g| Arc::ptr_eq(&g, stacks));
        if !same {
            *memo = NodeMemo::new(Arc::downgrade(stacks), self.memo_bytes);
        }
        memo
    }
}

/// The fewest token ids spelling `data`, smallest id per spelling
/// (`ReserveTable.split`): a shortest path over the trie.
pub fn split(trie: &Trie, data: &[u8]) -> Option<Vec<u32>> {
    let n = data.len();
    let mut best = vec![INF; n + 1];
    let mut back = vec![0usize; n + 1];
    let mut tok = vec![0u32; n + 1];
    best[0] = 0;
    for i in 0..n {
        if best[i] >= INF {
            continue;
        }
        let mut node = child(trie, 0, data[i]);
        let mut j = i;
        while let Some(at) = node {
            j += 1;
            let tn = trie.node(at);
            if tn.token >= 0 && best[i] + 1 < best[j] {
                best[j] = best[i] + 1;
                back[j] = i;
                tok[j] = tn.token as u32;
            }
            if j == n {
                break;
            }
            node = child(trie, at, data[j]);
        }
    }
    if best[n] >= INF {
        return None;
    }
    let mut out = Vec::new();
    let mut j = n;
    while j > 0 {
        out.push(tok[j]);
        j = back[j];
    }
    out.reverse();
    Some(out)
}

/// The grammar-level part of the reserve tables that walks the vocabulary
/// (`ReserveTable._compatible_rows` and the single-token half of
/// `ReserveTable._choose_pieces`, answer for answer):
///
/// - per terminal t, the union of the parser rows in which t has an action
///   (`compat`);
/// - per terminal t with a row that is not ignored, the shortest, then
///   bytewise least, x such that one token spells `b" " + x` and x is a valid
///   lexeme for t's piece (`_lexeme_ok`), or `None`.
pub fn single_token_pieces(
    g: &GrammarTables,
    trie: &Trie,
) -> (Vec<Vec<u64>>, Vec<Option<Vec<u8>>>) {
    let lalr = g.lalr();
    let (t_count, w) = (g.n_terminals(), g.width());
    let mut compat = vec![vec![0u64; w]; t_count];
    for s in 0..lalr.n_states {
        let row_at = &lalr.action[s * (t_count + 1)..s * (t_count + 1) + t_count];
        let mut row = vec![0u64; w];
        for (t, &a) in row_at.iter().enumerate() {
            if a != 0 {
                bits::set(&mut row, t);
            }
        }
        for (t, &a) in row_at.iter().enumerate() {
            if a != 0 {
                compat[t].iter_mut().zip(&row).for_each(|(c, r)| *c |= r);
            }
        }
    }
    let ignored = &g.lexing().ignored;
    let mut wanted = vec![0u64; w];
    for (t, c) in compat.iter().enumerate() {
        if !bits::is_empty(c) && !bits::test(ignored, t) {
            bits::set(&mut wanted, t);
        }
    }
    let dfa = g.dfa();
    let q_space = dfa.trans(0, SPACE);
    let mut best: Vec<Option<Vec<u8>>> = vec![None; t_count];
    let Some(top) = child(trie, 0, SPACE) else {
        return (compat, best);
    };
    let ok_for =
        |t: usize| -> Vec<u64> { compat[t].iter().zip(ignored).map(|(c, i)| c | i).collect() };
    let end = top + trie.node(top).size as usize;
    let mut stack: Vec<(usize, u32, i32, Vec<u8>)> = Vec::new();
    let mut c = top + 1;
    while c < end {
        stack.push((c, 0, 0, Vec::new()));
        c += trie.node(c).size as usize;
    }
    while let Some((node, q, ln, mut x)) = stack.pop() {
        let tn = trie.node(node);
        let q2 = dfa.trans(q as usize, tn.edge);
        if q2 < 0 {
            continue;
        }
        let q2 = q2 as u32;
        let ln2 = g.lexicon.step(ln, tn.edge);
        x.push(tn.edge);
        let accept = dfa.accept.row(q2 as usize);
        if tn.token >= 0 && bits::intersects(accept, &wanted) {
            let cands = g.candidates_at(q2 as usize, ln2);
            // _lexeme_ok's conditions that do not depend on t.
            let ok = (q_space < 0 || dfa.trans(q_space as usize, x[0]) < 0)
                && dfa.trans(q2 as usize, SPACE) < 0;
            for (i, (&cw, &ww)) in cands.iter().zip(&wanted).enumerate() {
                let mut m = cw & ww;
                while m != 0 {
                    let t = i * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    let shorter = best[t]
                        .as_ref()
                        .is_none_or(|b| (x.len(), &x) < (b.len(), b));
                    if shorter && ok && g.pick_among(&cands, &ok_for(t)) == Some(t as u32) {
                        best[t] = Some(x.clone());
                    }
                }
            }
        }
        let end = node + tn.size as usize;
        let mut c = node + 1;
        while c < end {
            stack.push((c, q2, ln2, x.clone()));
            c += trie.node(c).size as usize;
        }
    }
    (compat, best)
}

/// The child of trie node `at` along `byte`.
fn child(trie: &Trie, at: usize, byte: u8) -> Option<usize> {
    let end = at + trie.node(at).size as usize;
    let mut c = at + 1;
    while c < end {
        let node = trie.node(c);
        if node.edge == byte {
            return Some(c);
        }
        if node.edge > byte {
            return None;
        }
        c += node.size as usize;
    }
    None
}

/// One question to a [`Reserve`], with its memos and the arena locked.
struct Query<'a> {
    r: &'a Reserve,
    nodes: &'a mut NodeMemo,
    scans: &'a mut ScanMemo,
    arena: &'a mut StackArena,
}

impl<'a> Query<'a> {
    fn g(&self) -> &'a GrammarTables {
        &self.r.grammar
    }

    fn split(&mut self, data: &[u8]) -> Option<Arc<Vec<u32>>> {
        if let Some(hit) = self.scans.split.get(data) {
            return hit.clone();
        }
        let out = split(&self.r.trie, data).map(Arc::new);
        let size = 64 + data.len() + out.as_ref().map_or(0, |t| 4 * t.len());
        self.scans.split.insert(data.to_vec(), out.clone(), size);
        out
    }

    fn token_cost(&mut self, data: &[u8]) -> u64 {
        self.split(data).map_or(INF, |t| t.len() as u64)
    }

    // -- stacks ---------------------------------------------------------------

    /// The cell vector of `m` (memoized; computes missing ancestors first,
    /// top down, so each reads its ancestors' from the memo).
    fn cell(&mut self, m: NodeId) -> Result<Arc<Cell>> {
        if let Some(c) = self.nodes.cells.get(&m) {
            return Ok(Arc::clone(c));
        }
        let mut chain = Vec::new();
        let mut node = Some(m);
        while let Some(n) = node {
            if self.nodes.cells.get(&n).is_some() {
                break;
            }
            chain.push(n);
            node = self.arena.parent(n);
        }
        let mut last = None;
        for &n in chain.iter().rev() {
            let c = Arc::new(self.compute_cell(n)?);
            let size = 64 + 24 * c.len();
            self.nodes.cells.insert(n, Arc::clone(&c), size);
            last = Some(c);
        }
        Ok(last.expect("m itself is in the chain"))
    }

    fn compute_cell(&mut self, m: NodeId) -> Result<Cell> {
        let r = self.r;
        let mut ancestors = vec![m];
        let mut node = m;
        for _ in 0..r.max_pop {
            let Some(p) = self.arena.parent(node) else {
                break;
            };
            node = p;
            ancestors.push(node);
        }
        let state = self.arena.state(m) as usize;
        let trans = &r.trans[state];
        let mut dist: Cell = Vec::with_capacity(trans.len());
        let mut edges: FxMap<u32, Vec<(usize, u64, i32, i32)>> = FxMap::default();
        for (k, &(_, target)) in trans.iter().enumerate() {
            let mut best = (INF, -1i32, -1i32);
            for &(rest, rule, dot, lhs) in &r.raw.items[target as usize] {
                if rest >= INF {
                    continue;
                }
                let value = if rule == 0 {
                    rest
                } else if dot == 1 {
                    edges
                        .entry(lhs)
                        .or_default()
                        .push((k, rest, rule as i32, dot as i32));
                    continue;
                } else {
                    let anc = *ancestors
                        .get(dot as usize - 1)
                        .ok_or_else(|| inconsistent("a kernel item deeper than its stack"))?;
                    // Computed before m (`cell`), unless evicted since.
                    let cell = match self.nodes.cells.get(&anc) {
                        Some(c) => Arc::clone(c),
                        None => self.cell(anc)?,
                    };
                    (rest + lookup(&cell, lhs)?.0).min(INF)
                };
                if value < best.0 {
                    best = (value, rule as i32, dot as i32);
                }
            }
            dist.push((trans[k].0, best.0, best.1, best.2));
        }
        let mut heap: BinaryHeap<Reverse<(u64, u32, usize)>> = dist
            .iter()
            .enumerate()
            .filter(|(_, d)| d.1 < INF)
            .map(|(k, d)| Reverse((d.1, d.0, k)))
            .collect();
        while let Some(Reverse((v, _, k))) = heap.pop() {
            if v > dist[k].1 {
                continue;
            }
            let Some(out) = edges.get(&dist[k].0) else {
                continue;
            };
            for &(x, rest, rule, dot) in out {
                if v + rest < dist[x].1 {
                    dist[x] = (dist[x].0, v + rest, rule, dot);
                    heap.push(Reverse((v + rest, dist[x].0, x)));
                }
            }
        }
        Ok(dist)
    }

    fn symbol_of(&self, node: NodeId) -> u32 {
        self.g().lalr().access[self.arena.state(node) as usize]
    }

    fn node_reserve(&mut self, node: NodeId) -> Result<u64> {
        match self.arena.parent(node) {
            None => Ok(self.r.raw.start_cost),
            Some(p) => {
                let x = self.symbol_of(node);
                let cell = self.cell(p)?;
                Ok(lookup(&cell, x)?.0)
            }
        }
    }

    fn expand(&self, symbols: &[u32], out: &mut Vec<u32>) -> Result<()> {
        let r = self.r;
        let raw = &r.raw;
        let t = self.g().n_terminals() as u32;
        let mut todo: Vec<u32> = symbols.iter().rev().copied().collect();
        while let Some(x) = todo.pop() {
            if x < t {
                out.push(x);
                continue;
            }
            let rule = raw.nt_rule[(x - self.r.base) as usize];
            if rule < 0 {
                return Err(inconsistent(
                    "expanding a nonterminal that derives no writable sentence",
                ));
            }
            todo.extend(raw.rhs[rule as usize].iter().rev());
        }
        Ok(())
    }

    fn node_plan(&mut self, node: NodeId) -> Result<Vec<u32>> {
        let r = self.r;
        let raw = &r.raw;
        let mut out = Vec::new();
        let Some(mut m) = self.arena.parent(node) else {
            self.expand(&raw.rhs[0][..1], &mut out)?;
            return Ok(out);
        };
        let mut x = self.symbol_of(node);
        loop {
            let cell = self.cell(m)?;
            let (_, rule, dot) = lookup(&cell, x)?;
            if rule < 0 {
                return Err(inconsistent("no completion through this cell"));
            }
            self.expand(&raw.rhs[rule as usize][dot as usize..], &mut out)?;
            if rule == 0 {
                return Ok(out);
            }
            for _ in 1..dot {
                m = self
                    .arena
                    .parent(m)
                    .ok_or_else(|| inconsistent("a cell's argmin pops past the bottom"))?;
            }
            x = self.r.base + self.g().lalr().rule_lhs[rule as usize];
        }
    }

    fn lead_discount(&mut self, node: NodeId) -> Result<u64> {
        if let Some(&d) = self.nodes.discounts.get(&node) {
            return Ok(d);
        }
        let plan = self.node_plan(node)?;
        let raw = &self.r.raw;
        let d = plan.first().map_or(0, |&t| {
            let full = raw.term_tokens[t as usize].as_ref().map_or(0, Vec::len);
            full.saturating_sub(raw.lead_tokens[t as usize].len()) as u64
        });
        self.nodes.discounts.insert(node, d, 32);
        Ok(d)
    }

    fn plan_tokens(&mut self, node: NodeId, lead: bool, out: &mut Vec<u32>) -> Result<()> {
        let r = self.r;
        let raw = &r.raw;
        for (i, t) in self.node_plan(node)?.into_iter().enumerate() {
            let t = t as usize;
            if lead && i == 0 {
                out.extend(&raw.lead_tokens[t]);
            } else {
                out.extend(raw.term_tokens[t].iter().flatten());
            }
        }
        Ok(())
    }

    // -- remainders -----------------------------------------------------------

    /// The first of `cands` in pick order that `allowed` admits or that is
    /// ignored (`Scanner.pick`).
    fn pick(&self, cands: &[u64], allowed: &[u64]) -> Option<u32> {
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&self.g().lexing().ignored)
            .map(|(a, i)| a | i)
            .collect();
        self.g().pick_among(cands, &ok)
    }

    fn finish_options(&mut self, q0: u32, ln0: i32) -> Arc<Vec<Finish>> {
        if let Some(hit) = self.scans.options.get(&(q0, ln0)) {
            return Arc::clone(hit);
        }
        let r = self.r;
        let g = self.g();
        let dfa = g.dfa();
        let lexicon = &g.lexicon;
        let cats = &lexicon.categories;
        let mut ends: Vec<Finish> = Vec::new();
        let mut conts: Vec<Finish> = Vec::new();
        // Apart: an abutting option shadows no other of its candidates.
        let mut abuts: Vec<Finish> = Vec::new();
        let add = |list: &mut Vec<Finish>, f: Finish| {
            if !list.iter().any(|o| o.cands == f.cands) {
                list.push(f);
            }
        };
        let mut seen: FxMap<(u32, i32), ()> = FxMap::default();
        seen.insert((q0, ln0), ());
        let mut level: Vec<(u32, i32, Vec<u8>)> = vec![(q0, ln0, Vec::new())];
        while !level.is_empty() && seen.len() < FINISH_LIMIT {
            let mut next = Vec::new();
            for (q, ln, s) in level {
                let qu = q as usize;
                if !bits::is_empty(dfa.accept.row(qu)) {
                    let cands = g.candidates_at(qu, ln);
                    if !bits::is_empty(&cands) {
                        add(
                            &mut ends,
                            Finish {
                                suffix: s.clone(),
                                cands: cands.clone(),
                                end: true,
                                joined: false,
                                abut: -1,
                            },
                        );
                        let q_sp = dfa.trans(qu, SPACE);
                        if q_sp < 0 {
                            add(
                                &mut conts,
                                Finish {
                                    suffix: s.clone(),
                                    cands,
                                    end: false,
                                    joined: false,
                                    abut: -1,
                                },
                            );
                        } else if r.safe[q_sp as usize] {
                            let joined = g.candidates_at(q_sp as usize, lexicon.step(ln, SPACE));
                            add(
                                &mut conts,
                                Finish {
                                    suffix: s.clone(),
                                    cands: joined,
                                    end: false,
                                    joined: true,
                                    abut: -1,
                                },
                            );
                        } else if r.nl_ok && dfa.trans(qu, NEWLINE) < 0 {
                            let mut suffix = s.clone();
                            suffix.push(NEWLINE);
                            add(
                                &mut conts,
                                Finish {
                                    suffix,
                                    cands,
                                    end: false,
                                    joined: false,
                                    abut: -1,
                                },
                            );
                        } else {
                            add(
                                &mut abuts,
                                Finish {
                                    suffix: s.clone(),
                                    cands,
                                    end: false,
                                    joined: false,
                                    abut: q as i32,
                                },
                            );
                        }
                    }
                }
                let kids: Vec<(u8, i32)> = if ln == NO_NODE {
                    Vec::new()
                } else {
                    lexicon.edges(ln as usize).collect()
                };
                let mut steps = kids.clone();
                for (rep, members) in &r.raw.classes {
                    let in_kids = |b: u8| kids.iter().any(|&(k, _)| k == b);
                    let b = if !in_kids(*rep) {
                        Some(*rep)
                    } else {
                        members.iter().copied().find(|&c| !in_kids(c))
                    };
                    if let Some(b) = b {
                        steps.push((b, NO_NODE));
                    }
                }
                for (b, ln2) in steps {
                    let q2 = dfa.trans(qu, b);
                    if q2 < 0 || seen.contains_key(&(q2 as u32, ln2)) {
                        continue;
                    }
                    let live = dfa
                        .live
                        .row(q2 as usize)
                        .iter()
                        .zip(cats)
                        .any(|(l, c)| l & !c != 0)
                        || (ln2 != NO_NODE && !bits::is_empty(lexicon.prefix_cats(ln2 as usize)));
                    if !live {
                        continue;
                    }
                    seen.insert((q2 as u32, ln2), ());
                    let mut s2 = s.clone();
                    s2.push(b);
                    next.push((q2 as u32, ln2, s2));
                }
            }
            level = next;
        }
        ends.extend(conts);
        ends.extend(abuts);
        let out = Arc::new(ends);
        let size = 64
            + out
                .iter()
                .map(|o| 48 + o.suffix.len() + 8 * o.cands.len())
                .sum::<usize>();
        self.scans.options.insert((q0, ln0), Arc::clone(&out), size);
        out
    }

    /// (reserve, option index, stack after it) of a non-empty remainder.
    fn finish(&mut self, node: NodeId, q: u32, ln: i32) -> Result<(u64, usize, NodeId)> {
        if let Some(&hit) = self.nodes.finish.get(&(node, q, ln)) {
            return Ok(hit);
        }
        let options = self.finish_options(q, ln);
        let allowed = self.arena.allowed(node)?.to_vec();
        let mut best = (INF, usize::MAX, node);
        for (k, option) in options.iter().enumerate() {
            let Some(u) = self.pick(&option.cands, &allowed) else {
                continue;
            };
            let after = if self.g().is_ignored(u as usize) {
                node
            } else {
                self.arena.shift(node, u as usize)?
            };
            let cost = if option.end {
                if !self.arena.accepts(after)? {
                    continue;
                }
                self.token_cost(&option.suffix)
            } else {
                let mut rest = if option.abut >= 0 {
                    self.abutting(option.abut as usize, after)?.0
                } else {
                    self.node_reserve(after)?
                };
                if rest >= INF {
                    continue;
                }
                if option.joined {
                    rest -= self.lead_discount(after)?;
                }
                (self.token_cost(&option.suffix) + rest).min(INF)
            };
            if cost < best.0 {
                best = (cost, k, after);
            }
        }
        self.nodes.finish.insert((node, q, ln), best, 48);
        Ok(best)
    }

    /// (cost, first terminal) of the least completion of stack `node` whose
    /// first piece is written bare right after a lexeme in DFA state `q`: over
    /// the terminals `node` allows whose bare piece's first byte ends that
    /// lexeme (the least id among equals), the bare piece's tokens plus the
    /// node reserve after shifting it; `(INF, u32::MAX)` where there is none
    /// (`ReserveTable._abutting`).
    fn abutting(&mut self, q: usize, node: NodeId) -> Result<(u64, u32)> {
        let allowed = self.arena.allowed(node)?.to_vec();
        let mut best = (INF, u32::MAX);
        for t in 0..self.r.raw.bare.len() {
            let Some((first, tokens)) = &self.r.raw.bare[t] else {
                continue;
            };
            if !bits::test(&allowed, t) || self.g().dfa().trans(q, *first) >= 0 {
                continue;
            }
            let n = tokens.len() as u64;
            let after = self.arena.shift(node, t)?;
            let cost = (n + self.node_reserve(after)?).min(INF);
            if cost < best.0 {
                best = (cost, t as u32);
            }
        }
        Ok(best)
    }

    // -- configurations -------------------------------------------------------

    fn reserve(&mut self, config: &Config) -> Result<u64> {
        if self.g().eos_allowed(self.arena, config)? {
            return Ok(0);
        }
        if config.remainder.is_empty() {
            let cost = self.node_reserve(config.node)?;
            if cost >= INF {
                return Ok(INF);
            }
            return Ok(cost - self.lead_discount(config.node)?);
        }
        Ok(self.finish(config.node, config.scan.q, config.scan.ln)?.0)
    }

    fn completion(&mut self, config: &Config) -> Result<Option<Vec<u32>>> {
        if self.g().eos_allowed(self.arena, config)? {
            return Ok(Some(Vec::new()));
        }
        let mut tokens = Vec::new();
        let cost = if config.remainder.is_empty() {
            let cost = self.reserve(config)?;
            if cost >= INF {
                return Ok(None);
            }
            self.plan_tokens(config.node, true, &mut tokens)?;
            cost
        } else {
            let (cost, k, after) = self.finish(config.node, config.scan.q, config.scan.ln)?;
            if cost >= INF {
                return Ok(None);
            }
            let option = self.finish_options(config.scan.q, config.scan.ln)[k].clone();
            tokens.extend(self.split(&option.suffix).iter().flat_map(|t| t.iter()));
            if option.abut >= 0 {
                let first = self.abutting(option.abut as usize, after)?.1 as usize;
                if let Some((_, bare)) = &self.r.raw.bare[first] {
                    tokens.extend(bare);
                }
                let next = self.arena.shift(after, first)?;
                self.plan_tokens(next, false, &mut tokens)?;
            } else if !option.end {
                self.plan_tokens(after, option.joined, &mut tokens)?;
            }
            cost
        };
        if tokens.len() as u64 != cost {
            return Err(inconsistent(
                "the written completion disagrees with the reserve",
            ));
        }
        Ok(Some(tokens))
    }
}

/// The entry of symbol `x` in a cell vector.
fn lookup(cell: &Cell, x: u32) -> Result<(u64, i32, i32)> {
    cell.binary_search_by_key(&x, |e| e.0)
        .map(|k| (cell[k].1, cell[k].2, cell[k].3))
        .map_err(|_| inconsistent("a symbol with no transition out of its parent's state"))
}
