//! The minimal union DFA over bytes of a grammar's terminals: stages 2-4 of
//! grid-core's `grid_core.dfa` and its flat tables, byte for byte the same.
//!
//! Input: the terminal NFAs (stage 1, built in Python by
//! `grid_core.regex_bytes`), side by side in one numbering ([`UnionNfa`]). Each
//! is a trimmed Thompson NFA: one start and one final state, every state
//! reachable and co-reachable, every state with at most one byte edge. A *core*
//! state has a byte edge or is final; DFA states are sets of core states.
//!
//! Stages, as in grid-core's module header:
//!
//! 2. **Byte classes**: the coarsest partition of 0..=255 that every edge's
//!    byte set respects (partition refinement, one mask at a time), classes
//!    numbered by least byte.
//! 3. **Subset construction** (Rabin and Scott, 1959) over ε-closures
//!    restricted to core states, breadth-first from the start subset. The empty
//!    subset is DEAD. More than `max_states` subsets is an outcome, not an
//!    error: [`build`] returns `Ok(None)` (grid-core raises its `GrammarError`).
//! 4. **Minimisation** (J. Hopcroft, "An n log n algorithm for minimizing
//!    states in a finite automaton", 1971) from the partition by accept bitset,
//!    DEAD an explicit sink; of a split block the smaller part becomes the new
//!    block and is queued (the classic rule, both halves stay queued when the
//!    block was).
//!
//! Then the canonical numbering (breadth-first from the start state, classes,
//! hence bytes, ascending), the `n * 256` int32 transition table (DEAD = -1)
//! and the live bitsets (least solution of `live[s] = accept[s] | OR(live[t] :
//! s -> t)`, a worklist).
//!
//! Identity with grid-core: the minimal DFA of a Moore machine is unique up to
//! isomorphism and the numbering is canonical, so the tables do not depend on
//! the order in which the stages visit states, classes or splitters; the
//! subset count that `max_states` bounds is the number of reachable subsets,
//! the same in any order.
//!
//! Input checks: malformed arrays are [`KernelError::InvalidTables`]; so is an
//! NFA that turns out not to be trimmed (a reachable subset dead for every
//! terminal), which grid-core's Python path only asserts.

use std::collections::VecDeque;

use crate::bits;
use crate::cache::FxMap;
use crate::error::{KernelError, Result};

/// The absorbing "no terminal can match any more" state.
pub const DEAD: i32 = -1;

/// The terminal NFAs as flat arrays, numbered per terminal (local ids) in the
/// order grid-core's `ByteNFA` numbers them; terminal `t` is bit `t`.
#[derive(Clone, Debug, Default)]
pub struct RawUnion {
    /// States of each terminal's NFA.
    pub sizes: Vec<u32>,
    /// Start state of each terminal's NFA (local id).
    pub starts: Vec<u32>,
    /// Final state of each terminal's NFA (local id).
    pub finals: Vec<u32>,
    /// Per state (all terminals, in order): how many ε-successors it has.
    pub eps_len: Vec<u32>,
    /// The ε-successors (local ids), state after state.
    pub eps_targets: Vec<u32>,
    /// Per state: index of its byte edge's set in `masks` (plus its terminal's
    /// `mask_base`), or -1 for none.
    pub edge_mask: Vec<i32>,
    /// Per state: its byte edge's target (local id), or -1 for none.
    pub edge_target: Vec<i32>,
    /// Byte sets, 32 bytes each, byte `b` at bit `b % 8` of byte `b / 8`.
    pub masks: Vec<u8>,
    /// Per terminal: the row of `masks` its edge indices count from (each NFA's
    /// own rows, side by side); empty: every index counts from row 0.
    pub mask_base: Vec<u32>,
}

/// A validated union NFA in one global numbering.
#[derive(Clone, Debug)]
pub struct UnionNfa {
    n_terminals: usize,
    /// `eps_targets[eps_offsets[q]..eps_offsets[q + 1]]`: the ε-successors of `q`.
    eps_offsets: Vec<u32>,
    eps_targets: Vec<u32>,
    /// Per state: `(mask index, target)` of its byte edge.
    edge: Vec<Option<(u32, u32)>>,
    /// Per state: the terminal it is final for.
    final_of: Vec<Option<u32>>,
    starts: Vec<u32>,
    masks: Vec<[u64; 4]>,
}

fn invalid(detail: String) -> KernelError {
    KernelError::InvalidTables {
        table: "union NFA",
        detail,
    }
}

impl UnionNfa {
    /// Check `raw` and number its states globally (terminal after terminal).
    pub fn new(raw: RawUnion) -> Result<Self> {
        let n_terminals = raw.sizes.len();
        if n_terminals == 0 {
            return Err(invalid("no terminals".into()));
        }
        if raw.starts.len() != n_terminals
            || raw.finals.len() != n_terminals
            || !(raw.mask_base.is_empty() || raw.mask_base.len() == n_terminals)
        {
            return Err(invalid(format!(
                "{} sizes, {} starts, {} finals, {} mask bases",
                n_terminals,
                raw.starts.len(),
                raw.finals.len(),
                raw.mask_base.len()
            )));
        }
        let n: usize = raw.sizes.iter().map(|&s| s as usize).sum();
        if raw.eps_len.len() != n || raw.edge_mask.len() != n || raw.edge_target.len() != n {
            return Err(invalid(format!(
                "{n} states but {} eps lengths, {} edge masks, {} edge targets",
                raw.eps_len.len(),
                raw.edge_mask.len(),
                raw.edge_target.len()
            )));
        }
        if raw.eps_len.iter().map(|&l| l as usize).sum::<usize>() != raw.eps_targets.len() {
            return Err(invalid(
                "eps lengths do not add up to the eps targets".into(),
            ));
        }
        if n >= u32::MAX as usize || !raw.masks.len().is_multiple_of(32) {
            return Err(invalid(
                "too many states, or masks not in 32-byte rows".into(),
            ));
        }
        let masks: Vec<[u64; 4]> = raw
            .masks
            .chunks_exact(32)
            .map(|row| {
                std::array::from_fn(|w| {
                    u64::from_le_bytes(row[8 * w..8 * w + 8].try_into().expect("8 bytes"))
                })
            })
            .collect();
        if let Some(i) = masks.iter().position(|m| m == &[0; 4]) {
            return Err(invalid(format!("mask {i} is the empty byte set")));
        }
        let mut nfa = UnionNfa {
            n_terminals,
            eps_offsets: Vec::with_capacity(n + 1),
            eps_targets: Vec::with_capacity(raw.eps_targets.len()),
            edge: Vec::with_capacity(n),
            final_of: vec![None; n],
            starts: Vec::with_capacity(n_terminals),
            masks,
        };
        nfa.eps_offsets.push(0);
        let (mut base, mut eps_at) = (0usize, 0usize);
        for t in 0..n_terminals {
            let size = raw.sizes[t] as usize;
            let local = |q: i64, what: &str| -> Result<u32> {
                if q < 0 || q >= size as i64 {
                    return Err(invalid(format!(
                        "terminal {t}: {what} {q} is outside its {size} states"
                    )));
                }
                Ok((base + q as usize) as u32)
            };
            let mask_base = raw.mask_base.get(t).map_or(0, |&b| i64::from(b));
            nfa.starts.push(local(raw.starts[t].into(), "start")?);
            nfa.final_of[local(raw.finals[t].into(), "final state")? as usize] = Some(t as u32);
            for q in base..base + size {
                let len = raw.eps_len[q] as usize;
                for &r in &raw.eps_targets[eps_at..eps_at + len] {
                    nfa.eps_targets.push(local(r.into(), "eps target")?);
                }
                eps_at += len;
                nfa.eps_offsets.push(nfa.eps_targets.len() as u32);
                let row = i64::from(raw.edge_mask[q]) + mask_base;
                nfa.edge.push(match (raw.edge_mask[q], raw.edge_target[q]) {
                    (-1, -1) => None,
                    (m, target) if m >= 0 && (row as usize) < nfa.masks.len() => {
                        Some((row as u32, local(target.into(), "edge target")?))
                    }
                    (m, _) => return Err(invalid(format!("state {q} has edge mask {m}"))),
                });
            }
            base += size;
        }
        Ok(nfa)
    }

    fn is_core(&self, q: usize) -> bool {
        self.edge[q].is_some() || self.final_of[q].is_some()
    }

    /// Append the core states in the ε-closure of `q` to `out`, in no
    /// particular order. `stamp[r] == gen` marks the states seen: each call
    /// takes a fresh `gen`.
    fn core_closure(&self, q: u32, stamp: &mut [u32], gen: u32, out: &mut Vec<u32>) {
        let mut stack = vec![q];
        stamp[q as usize] = gen;
        while let Some(p) = stack.pop() {
            if self.is_core(p as usize) {
                out.push(p);
            }
            let (lo, hi) = (
                self.eps_offsets[p as usize],
                self.eps_offsets[p as usize + 1],
            );
            for &r in &self.eps_targets[lo as usize..hi as usize] {
                if stamp[r as usize] != gen {
                    stamp[r as usize] = gen;
                    stack.push(r);
                }
            }
        }
    }
}

/// The minimal union DFA in grid-core's layout (`grid_core.dfa.ByteDFA`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnionDfa {
    pub n_states: usize,
    /// `trans[s * 256 + b]`: the state after byte `b` from `s`, or [`DEAD`].
    pub trans: Vec<i32>,
    /// Words per bitset row ([`bits::width_for`] of the terminal count).
    pub width: usize,
    /// Row `s` (`width` words): the terminals whose language holds the bytes read.
    pub accept: Vec<u64>,
    /// Row `s`: the terminals some extension of the bytes read is in.
    pub live: Vec<u64>,
}

/// The minimal union DFA of `nfa`, canonically numbered; `Ok(None)` when the
/// subset construction reaches more than `max_states` subsets.
pub fn build(nfa: &UnionNfa, max_states: usize) -> Result<Option<UnionDfa>> {
    let classes = ByteClasses::new(&nfa.masks);
    let Some(subsets) = subset_construction(nfa, &classes, max_states) else {
        return Ok(None);
    };
    let (quotient, start) = minimise(&subsets, classes.n)?;
    Ok(Some(tables(&classes, &quotient, start)?))
}

// -- stage 2: byte classes --------------------------------------------------------

/// The coarsest partition of the bytes refining every mask, numbered by least byte.
struct ByteClasses {
    n: usize,
    class_of: [u16; 256],
    /// Per mask: the classes inside it, ascending.
    on: Vec<Vec<u16>>,
}

impl ByteClasses {
    fn new(masks: &[[u64; 4]]) -> Self {
        let has = |m: &[u64; 4], b: usize| m[b / 64] >> (b % 64) & 1 == 1;
        let mut class_of = [0u16; 256];
        let mut n = 1usize;
        let mut split_to: Vec<Option<u16>> = Vec::new();
        for mask in masks {
            // A class with bytes on both sides of the mask gives its inside bytes
            // a fresh class.
            let (mut inside, mut outside) = (vec![false; n], vec![false; n]);
            for (b, &c) in class_of.iter().enumerate() {
                if has(mask, b) {
                    inside[c as usize] = true;
                } else {
                    outside[c as usize] = true;
                }
            }
            split_to.clear();
            split_to.resize(n, None);
            for (c, to) in split_to.iter_mut().enumerate() {
                if inside[c] && outside[c] {
                    *to = Some(n as u16);
                    n += 1;
                }
            }
            for (b, c) in class_of.iter_mut().enumerate() {
                if let (true, Some(fresh)) = (has(mask, b), split_to[*c as usize]) {
                    *c = fresh;
                }
            }
        }
        let mut by_least = vec![u16::MAX; n];
        let mut next = 0u16;
        for c in class_of.iter_mut() {
            if by_least[*c as usize] == u16::MAX {
                by_least[*c as usize] = next;
                next += 1;
            }
            *c = by_least[*c as usize];
        }
        let mut least = vec![0usize; n];
        for b in (0..256).rev() {
            least[class_of[b] as usize] = b;
        }
        let on = masks
            .iter()
            .map(|m| {
                (0..n as u16)
                    .filter(|&c| has(m, least[c as usize]))
                    .collect()
            })
            .collect();
        ByteClasses { n, class_of, on }
    }
}

// -- stage 3: subset construction ----------------------------------------------------

/// A DFA over byte classes: `rows[s * n_classes + c]` is a state or [`DEAD`].
struct ClassDfa {
    n_states: usize,
    rows: Vec<i32>,
    width: usize,
    accepts: Vec<u64>,
}

fn subset_construction(
    nfa: &UnionNfa,
    classes: &ByteClasses,
    max_states: usize,
) -> Option<ClassDfa> {
    let n_nfa = nfa.edge.len();
    let mut stamp = vec![0u32; n_nfa];
    let mut gen = 0u32;
    // The core closure of every edge target, flat.
    let mut closure_at: Vec<Option<(usize, usize)>> = vec![None; n_nfa];
    let mut closures: Vec<u32> = Vec::new();
    for &(_, target) in nfa.edge.iter().flatten() {
        if closure_at[target as usize].is_none() {
            gen += 1;
            let lo = closures.len();
            nfa.core_closure(target, &mut stamp, gen, &mut closures);
            closures[lo..].sort_unstable();
            closure_at[target as usize] = Some((lo, closures.len()));
        }
    }
    let closure = |q: u32| {
        let (lo, hi) = closure_at[q as usize].expect("every edge target's closure is built");
        &closures[lo..hi]
    };

    let mut start = Vec::new();
    for &s in &nfa.starts {
        gen += 1;
        nfa.core_closure(s, &mut stamp, gen, &mut start);
    }
    start.sort_unstable();
    start.dedup();

    let k = classes.n;
    let width = bits::width_for(nfa.n_terminals);
    let mut index: FxMap<Box<[u32]>, i32> = FxMap::default();
    let mut items: Vec<u32> = start.clone();
    let mut offsets: Vec<usize> = vec![0, start.len()];
    index.insert(start.into_boxed_slice(), 0);
    let mut rows: Vec<i32> = Vec::new();
    let mut accepts: Vec<u64> = Vec::new();
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); k];
    let mut s = 0;
    while s + 1 < offsets.len() {
        // grows while we walk it: breadth-first
        let mut accept = vec![0u64; width];
        for &q in &items[offsets[s]..offsets[s + 1]] {
            let q = q as usize;
            if let Some(t) = nfa.final_of[q] {
                bits::set(&mut accept, t as usize);
            }
            if let Some((mask, target)) = nfa.edge[q] {
                let to = closure(target);
                for &c in &classes.on[mask as usize] {
                    buckets[c as usize].extend_from_slice(to);
                }
            }
        }
        for bucket in buckets.iter_mut() {
            if bucket.is_empty() {
                rows.push(DEAD);
                continue;
            }
            bucket.sort_unstable();
            bucket.dedup();
            let j = match index.get(&bucket[..]) {
                Some(&j) => j,
                None => {
                    let j = offsets.len() - 1;
                    if j >= max_states {
                        return None;
                    }
                    items.extend_from_slice(bucket);
                    offsets.push(items.len());
                    index.insert(bucket[..].into(), j as i32);
                    j as i32
                }
            };
            rows.push(j);
            bucket.clear();
        }
        accepts.extend_from_slice(&accept);
        s += 1;
    }
    Some(ClassDfa {
        n_states: s,
        rows,
        width,
        accepts,
    })
}

// -- stage 4: Hopcroft minimisation ----------------------------------------------------

/// A refinable partition of `0..n`: block `b` is `elems[start[b]..end[b]]`,
/// its marked members first (`marked[b]` of them).
struct Partition {
    elems: Vec<u32>,
    loc: Vec<u32>,
    block: Vec<u32>,
    start: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
    touched: Vec<u32>,
}

impl Partition {
    /// Blocks of states with equal keys, in order of first appearance.
    fn by_key(keys: &[&[u64]]) -> Self {
        let mut first: FxMap<&[u64], u32> = FxMap::default();
        let block: Vec<u32> = keys
            .iter()
            .map(|&key| {
                let fresh = first.len() as u32;
                *first.entry(key).or_insert(fresh)
            })
            .collect();
        let n_blocks = first.len();
        let mut end = vec![0u32; n_blocks];
        for &b in &block {
            end[b as usize] += 1;
        }
        let mut start = vec![0u32; n_blocks];
        let mut at = 0;
        for b in 0..n_blocks {
            start[b] = at;
            at += end[b];
            end[b] = start[b];
        }
        let mut elems = vec![0u32; block.len()];
        let mut loc = vec![0u32; block.len()];
        for (s, &b) in block.iter().enumerate() {
            let i = end[b as usize];
            elems[i as usize] = s as u32;
            loc[s] = i;
            end[b as usize] += 1;
        }
        Partition {
            elems,
            loc,
            block,
            start,
            end,
            marked: vec![0; n_blocks],
            touched: Vec::new(),
        }
    }

    fn n_blocks(&self) -> usize {
        self.start.len()
    }

    fn members(&self, b: u32) -> &[u32] {
        &self.elems[self.start[b as usize] as usize..self.end[b as usize] as usize]
    }

    fn mark(&mut self, s: u32) {
        let b = self.block[s as usize] as usize;
        let (i, j) = (self.loc[s as usize], self.start[b] + self.marked[b]);
        if i < j {
            return; // marked already
        }
        let other = self.elems[j as usize];
        self.elems.swap(i as usize, j as usize);
        self.loc[other as usize] = i;
        self.loc[s as usize] = j;
        if self.marked[b] == 0 {
            self.touched.push(b as u32);
        }
        self.marked[b] += 1;
    }

    /// Split every block with marked and unmarked members; the smaller part
    /// becomes a new block, passed to `fresh`.
    fn split(&mut self, mut fresh: impl FnMut(u32)) {
        for b in std::mem::take(&mut self.touched) {
            let b = b as usize;
            let (lo, hi) = (self.start[b], self.end[b]);
            let mid = lo + std::mem::take(&mut self.marked[b]);
            if mid == hi {
                continue;
            }
            let new = self.start.len() as u32;
            let (new_lo, new_hi) = if mid - lo <= hi - mid {
                self.start[b] = mid;
                (lo, mid)
            } else {
                self.end[b] = mid;
                (mid, hi)
            };
            self.start.push(new_lo);
            self.end.push(new_hi);
            self.marked.push(0);
            for &s in &self.elems[new_lo as usize..new_hi as usize] {
                self.block[s as usize] = new;
            }
            fresh(new);
        }
    }
}

/// The quotient of `dfa` by Hopcroft's coarsest stable partition, and its
/// start block. DEAD is the explicit sink `n` during refinement; its block
/// stays in the rows (unreachable, every row says DEAD instead) and
/// [`tables`] drops it.
fn minimise(dfa: &ClassDfa, k: usize) -> Result<(ClassDfa, usize)> {
    let (n, w) = (dfa.n_states, dfa.width);
    let sink = n as u32;
    let target = |s: usize, c: usize| -> u32 {
        if s == n {
            return sink;
        }
        match dfa.rows[s * k + c] {
            DEAD => sink,
            t => t as u32,
        }
    };
    // Predecessors by target: (class, state) pairs, CSR.
    let mut pred_at = vec![0u32; n + 2];
    for s in 0..=n {
        for c in 0..k {
            pred_at[target(s, c) as usize + 1] += 1;
        }
    }
    for t in 0..=n {
        pred_at[t + 1] += pred_at[t];
    }
    let mut fill = pred_at.clone();
    let mut preds = vec![(0u32, 0u32); pred_at[n + 1] as usize];
    for s in 0..=n {
        for c in 0..k {
            let t = target(s, c) as usize;
            preds[fill[t] as usize] = (c as u32, s as u32);
            fill[t] += 1;
        }
    }

    let zero = vec![0u64; w];
    let keys: Vec<&[u64]> = (0..=n)
        .map(|s| {
            if s < n {
                &dfa.accepts[s * w..(s + 1) * w]
            } else {
                &zero[..]
            }
        })
        .collect();
    let mut part = Partition::by_key(&keys);
    let mut pending: Vec<u32> = (0..part.n_blocks() as u32).collect();
    let mut splitter: Vec<u32> = Vec::new();
    let mut by_class: Vec<Vec<u32>> = vec![Vec::new(); k];
    while let Some(b) = pending.pop() {
        splitter.clear();
        splitter.extend_from_slice(part.members(b));
        for &t in &splitter {
            for &(c, s) in &preds[pred_at[t as usize] as usize..pred_at[t as usize + 1] as usize] {
                by_class[c as usize].push(s);
            }
        }
        for states in by_class.iter_mut() {
            for &s in states.iter() {
                part.mark(s);
            }
            states.clear();
            // The new block is the smaller part: queue it; the old one stays
            // queued if it was (Hopcroft's rule).
            part.split(|new| pending.push(new));
        }
    }

    let dead = part.block[n];
    if part.members(dead).len() != 1 {
        return Err(invalid(
            "a reachable subset is dead: a terminal NFA was not trimmed".into(),
        ));
    }
    let n_blocks = part.n_blocks();
    let mut rows = Vec::with_capacity(n_blocks * k);
    let mut accepts = Vec::with_capacity(n_blocks * w);
    for b in 0..n_blocks as u32 {
        let rep = part.members(b)[0] as usize;
        for c in 0..k {
            let t = part.block[target(rep, c) as usize];
            rows.push(if t == dead { DEAD } else { t as i32 });
        }
        accepts.extend_from_slice(keys[rep]);
    }
    let quotient = ClassDfa {
        n_states: n_blocks,
        rows,
        width: w,
        accepts,
    };
    Ok((quotient, part.block[0] as usize))
}

// -- canonical numbering and the flat tables ---------------------------------------------

/// Renumber `quotient` breadth-first from `start`, expand class rows to byte
/// rows and compute the live sets.
fn tables(classes: &ByteClasses, quotient: &ClassDfa, start: usize) -> Result<UnionDfa> {
    let (k, w) = (classes.n, quotient.width);
    let mut number = vec![DEAD; quotient.n_states];
    number[start] = 0;
    let mut order = vec![start];
    let mut i = 0;
    while i < order.len() {
        // grows while we walk it; classes are ordered by least byte, so this is
        // the breadth-first order over bytes ascending
        let s = order[i];
        for &t in &quotient.rows[s * k..(s + 1) * k] {
            if t != DEAD && number[t as usize] == DEAD {
                number[t as usize] = order.len() as i32;
                order.push(t as usize);
            }
        }
        i += 1;
    }
    let n = order.len();
    let mut trans = Vec::with_capacity(n * 256);
    let mut accept = Vec::with_capacity(n * w);
    for &s in &order {
        let row = &quotient.rows[s * k..(s + 1) * k];
        trans.extend(classes.class_of.iter().map(|&c| match row[c as usize] {
            DEAD => DEAD,
            t => number[t as usize],
        }));
        accept.extend_from_slice(&quotient.accepts[s * w..(s + 1) * w]);
    }
    let live = live(&trans, &accept, w);
    if live.chunks_exact(w).any(bits::is_empty) {
        return Err(invalid(
            "a reachable state is dead: a terminal NFA was not trimmed".into(),
        ));
    }
    Ok(UnionDfa {
        n_states: n,
        trans,
        width: w,
        accept,
        live,
    })
}

/// Least solution of `live[s] = accept[s] | OR(live[t] : s -> t)` (worklist).
fn live(trans: &[i32], accept: &[u64], w: usize) -> Vec<u64> {
    let n = trans.len() / 256;
    let mut seen = vec![u32::MAX; n];
    let mut edges: Vec<(u32, u32)> = Vec::new(); // (target, source), each pair once
    for s in 0..n {
        for &t in &trans[s * 256..(s + 1) * 256] {
            if t != DEAD && seen[t as usize] != s as u32 {
                seen[t as usize] = s as u32;
                edges.push((t as u32, s as u32));
            }
        }
    }
    edges.sort_unstable();
    let mut pred_at = vec![0usize; n + 1];
    for &(t, _) in &edges {
        pred_at[t as usize + 1] += 1;
    }
    for t in 0..n {
        pred_at[t + 1] += pred_at[t];
    }
    let mut live = accept.to_vec();
    let mut work: VecDeque<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    while let Some(t) = work.pop_front() {
        queued[t] = false;
        for &(_, s) in &edges[pred_at[t]..pred_at[t + 1]] {
            let s = s as usize;
            let mut changed = false;
            for i in 0..w {
                let merged = live[s * w + i] | live[t * w + i];
                changed |= merged != live[s * w + i];
                live[s * w + i] = merged;
            }
            if changed && !queued[s] {
                queued[s] = true;
                work.push_back(s);
            }
        }
    }
    live
}

#[cfg(test)]
mod tests {
    //! Hand-made NFAs, each a chain of steps (a byte set, repeated or not:
    //! `[ab]+` is `(b"ab", true)`) or written out state by state; the oracle
    //! simulates the NFAs themselves.

    use super::*;

    /// One terminal's NFA: `edge[q] = (bytes, target)`, `eps[q]` successors.
    struct Nfa {
        start: u32,
        fin: u32,
        eps: Vec<Vec<u32>>,
        edge: Vec<Option<(Vec<u8>, u32)>>,
    }

    /// `steps` in sequence: state `i` reads step `i` into `i + 1`, which loops
    /// back to `i` by ε when the step repeats.
    fn chain(steps: &[(&[u8], bool)]) -> Nfa {
        let m = steps.len();
        let mut nfa = Nfa {
            start: 0,
            fin: m as u32,
            eps: vec![Vec::new(); m + 1],
            edge: vec![None; m + 1],
        };
        for (i, &(bytes, plus)) in steps.iter().enumerate() {
            nfa.edge[i] = Some((bytes.to_vec(), i as u32 + 1));
            if plus {
                nfa.eps[i + 1].push(i as u32);
            }
        }
        nfa
    }

    fn word(w: &[u8]) -> Nfa {
        let steps: Vec<(&[u8], bool)> = w.chunks(1).map(|b| (b, false)).collect();
        chain(&steps)
    }

    /// `ab|cb` with its two branches kept apart (ε from the start).
    fn ab_or_cb() -> Nfa {
        let e = |b: u8, t: u32| Some((vec![b], t));
        Nfa {
            start: 0,
            fin: 5,
            eps: vec![vec![1, 3], vec![], vec![], vec![], vec![], vec![]],
            edge: vec![None, e(b'a', 2), e(b'b', 5), e(b'c', 4), e(b'b', 5), None],
        }
    }

    fn raw(nfas: &[Nfa]) -> RawUnion {
        let mut raw = RawUnion::default();
        let mut masks: Vec<[u8; 32]> = Vec::new();
        for nfa in nfas {
            raw.sizes.push(nfa.eps.len() as u32);
            raw.starts.push(nfa.start);
            raw.finals.push(nfa.fin);
            for (succ, edge) in nfa.eps.iter().zip(&nfa.edge) {
                raw.eps_len.push(succ.len() as u32);
                raw.eps_targets.extend(succ);
                let Some((bytes, target)) = edge else {
                    raw.edge_mask.push(-1);
                    raw.edge_target.push(-1);
                    continue;
                };
                let mut mask = [0u8; 32];
                for &b in bytes {
                    mask[b as usize / 8] |= 1 << (b % 8);
                }
                let i = masks.iter().position(|m| m == &mask).unwrap_or_else(|| {
                    masks.push(mask);
                    masks.len() - 1
                });
                raw.edge_mask.push(i as i32);
                raw.edge_target.push(*target as i32);
            }
        }
        raw.masks = masks.concat();
        raw
    }

    fn build_of(nfas: &[Nfa], max_states: usize) -> Option<UnionDfa> {
        build(&UnionNfa::new(raw(nfas)).expect("valid"), max_states).expect("trimmed")
    }

    /// The states of `nfa` after `data` (ε-closed), empty once it dies.
    fn simulate(nfa: &Nfa, data: &[u8]) -> Vec<u32> {
        let close = |mut set: Vec<u32>| {
            let mut i = 0;
            while i < set.len() {
                for &r in &nfa.eps[set[i] as usize] {
                    if !set.contains(&r) {
                        set.push(r);
                    }
                }
                i += 1;
            }
            set
        };
        let mut current = close(vec![nfa.start]);
        for &b in data {
            let moved = current
                .iter()
                .filter_map(|&q| nfa.edge[q as usize].as_ref())
                .filter(|(bytes, _)| bytes.contains(&b))
                .map(|&(_, t)| t)
                .collect();
            current = close(moved);
        }
        current
    }

    fn run(dfa: &UnionDfa, data: &[u8]) -> i32 {
        data.iter().fold(0, |s, &b| {
            if s == DEAD {
                DEAD
            } else {
                dfa.trans[s as usize * 256 + b as usize]
            }
        })
    }

    fn row(set: &[u64], s: i32, w: usize) -> &[u64] {
        &set[s as usize * w..(s as usize + 1) * w]
    }

    /// Every string over `alphabet` up to `len` bytes.
    fn strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut i = 0;
        while i < all.len() {
            if all[i].len() < len {
                for &b in alphabet {
                    let mut s = all[i].clone();
                    s.push(b);
                    all.push(s);
                }
            }
            i += 1;
        }
        all
    }

    /// Accept and live after every short string agree with the NFAs; the
    /// numbering is breadth-first; no two states are equivalent (Moore's
    /// refinement of the output splits nothing further).
    fn check(nfas: &[Nfa], dfa: &UnionDfa, alphabet: &[u8], len: usize) {
        let w = dfa.width;
        for data in strings(alphabet, len) {
            let s = run(dfa, &data);
            for (t, nfa) in nfas.iter().enumerate() {
                let states = simulate(nfa, &data);
                let (acc, live) = if s == DEAD {
                    (false, false)
                } else {
                    (
                        bits::test(row(&dfa.accept, s, w), t),
                        bits::test(row(&dfa.live, s, w), t),
                    )
                };
                assert_eq!(acc, states.contains(&nfa.fin), "accept {t} after {data:?}");
                assert_eq!(live, !states.is_empty(), "live {t} after {data:?}");
            }
        }
        let n = dfa.n_states;
        let mut order = vec![0i32];
        let mut i = 0;
        while i < order.len() {
            for &t in &dfa.trans[order[i] as usize * 256..][..256] {
                if t != DEAD && !order.contains(&t) {
                    order.push(t);
                }
            }
            i += 1;
        }
        assert_eq!(
            order,
            (0..n as i32).collect::<Vec<_>>(),
            "not canonical BFS"
        );
        let mut block: Vec<usize> = (0..n)
            .map(|s| row(&dfa.accept, s as i32, w)[0] as usize)
            .collect();
        loop {
            let mut names: Vec<Vec<i64>> = Vec::new();
            let next: Vec<usize> = (0..n)
                .map(|s| {
                    let mut sig = vec![block[s] as i64];
                    sig.extend(dfa.trans[s * 256..][..256].iter().map(|&t| {
                        if t == DEAD {
                            -1
                        } else {
                            block[t as usize] as i64
                        }
                    }));
                    names.iter().position(|x| x == &sig).unwrap_or_else(|| {
                        names.push(sig);
                        names.len() - 1
                    })
                })
                .collect();
            if names.len() == block.iter().collect::<std::collections::HashSet<_>>().len() {
                break;
            }
            block = next;
        }
        let distinct: std::collections::HashSet<_> = block.iter().collect();
        assert_eq!(distinct.len(), n, "two states are equivalent");
    }

    #[test]
    fn keywords_against_an_identifier() {
        const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
        let nfas = [word(b"if"), word(b"in"), chain(&[(LOWER, true)])];
        let dfa = build_of(&nfas, 1000).expect("small");
        // 0 start, 1 identifier, 2 "i", 3 "if", 4 "in" (breadth-first, bytes ascending)
        assert_eq!(dfa.n_states, 5);
        assert_eq!(dfa.width, 1);
        assert_eq!(dfa.accept, [0b000, 0b100, 0b100, 0b101, 0b110]);
        assert_eq!(dfa.live, [0b111, 0b100, 0b111, 0b101, 0b110]);
        assert_eq!(run(&dfa, b"a"), 1);
        assert_eq!(run(&dfa, b"i"), 2);
        assert_eq!(run(&dfa, b"if"), 3);
        assert_eq!(run(&dfa, b"in"), 4);
        assert_eq!(run(&dfa, b"iff"), 1);
        assert_eq!(run(&dfa, b"i1"), DEAD);
        check(&nfas, &dfa, b"finz1", 4);
    }

    #[test]
    fn byte_classes_split_overlapping_sets() {
        let nfas = [
            chain(&[(b"abc", false), (b"x", false)]),
            chain(&[(b"bcd", false), (b"y", false)]),
        ];
        let nfa = UnionNfa::new(raw(&nfas)).expect("valid");
        let classes = ByteClasses::new(&nfa.masks);
        // {a} {b, c} {d} {x} {y} and the rest (class 0: bytes below 'a')
        assert_eq!(classes.n, 6);
        let of = |b: u8| classes.class_of[b as usize];
        assert_eq!(
            (of(0), of(b'a'), of(b'b'), of(b'c'), of(b'd')),
            (0, 1, 2, 2, 3)
        );
        assert_eq!(
            (of(b'e'), of(b'x'), of(b'y'), of(b'z'), of(255)),
            (0, 4, 5, 0, 0)
        );
        let dfa = build(&nfa, 1000).expect("trimmed").expect("small");
        // 0 start, 1 "a", 2 "b"/"c", 3 "d", 4 accept A, 5 accept B
        assert_eq!(dfa.n_states, 6);
        assert_eq!(run(&dfa, b"c"), 2);
        assert_eq!(
            (run(&dfa, b"ax"), run(&dfa, b"cx"), run(&dfa, b"dy")),
            (4, 4, 5)
        );
        assert_eq!(run(&dfa, b"ay"), DEAD);
        check(&nfas, &dfa, b"abcdxy", 3);
    }

    #[test]
    fn minimisation_merges_equivalent_subsets() {
        // After "a" and after "c" the subsets differ ({2}, {4}) but the futures are equal.
        let nfas = [ab_or_cb()];
        let dfa = build_of(&nfas, 1000).expect("small");
        assert_eq!(dfa.n_states, 3);
        assert_eq!(run(&dfa, b"a"), 1);
        assert_eq!(run(&dfa, b"c"), 1);
        assert_eq!(dfa.accept, [0, 0, 1]);
        check(&nfas, &dfa, b"abc", 3);
    }

    #[test]
    fn max_states_bounds_the_subsets_not_the_minimal_states() {
        // ab|cb: four subsets ({1, 3}, {2}, {4}, {5}), three states once minimised.
        assert!(build_of(&[ab_or_cb()], 3).is_none());
        assert_eq!(build_of(&[ab_or_cb()], 4).expect("fits").n_states, 3);
    }

    #[test]
    fn wide_bitsets_and_an_empty_string_terminal() {
        // 70 terminals (two words): x, xx, ..., and one accepting the empty string.
        let mut nfas: Vec<Nfa> = (1..70).map(|k| word(&vec![b'x'; k])).collect();
        nfas.push(Nfa {
            start: 0,
            fin: 1,
            eps: vec![vec![1], vec![]],
            edge: vec![None, None],
        });
        let dfa = build_of(&nfas, 1000).expect("small");
        assert_eq!((dfa.n_states, dfa.width), (70, 2));
        assert_eq!(dfa.accept[..2], [0, 1 << 5]); // state 0 accepts terminal 69 only
        assert!(bits::test(row(&dfa.accept, 69, 2), 68));
        check(&nfas, &dfa, b"x", 72);
    }

    #[test]
    fn random_chains_agree_with_the_nfas() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let sets: [&[u8]; 6] = [b"a", b"b", b"c", b"ab", b"bc", b"abc"];
        for _ in 0..60 {
            let nfas: Vec<Nfa> = (0..1 + next(5))
                .map(|_| {
                    let steps: Vec<(&[u8], bool)> = (0..1 + next(4))
                        .map(|_| (sets[next(6) as usize], next(3) == 0))
                        .collect();
                    chain(&steps)
                })
                .collect();
            let dfa = build_of(&nfas, 10_000).expect("small");
            check(&nfas, &dfa, b"abcd", 6);
        }
    }

    #[test]
    fn malformed_or_untrimmed_input_is_an_error() {
        let good = raw(&[word(b"ab")]);
        let broken = [
            RawUnion {
                sizes: vec![],
                ..good.clone()
            },
            RawUnion {
                starts: vec![7],
                ..good.clone()
            },
            RawUnion {
                eps_targets: vec![0],
                ..good.clone()
            },
            RawUnion {
                edge_target: vec![1, -1, -1],
                ..good.clone()
            },
            RawUnion {
                edge_mask: vec![0, 5, -1],
                ..good.clone()
            },
            RawUnion {
                masks: vec![0; 64],
                ..good.clone()
            },
        ];
        for raw in broken {
            assert!(matches!(
                UnionNfa::new(raw),
                Err(KernelError::InvalidTables { .. })
            ));
        }
        // a branch that never reaches the final state: not trimmed
        let untrimmed = Nfa {
            start: 0,
            fin: 2,
            eps: vec![vec![], vec![], vec![]],
            edge: vec![Some((b"a".to_vec(), 1)), None, None],
        };
        let nfa = UnionNfa::new(raw(&[untrimmed])).expect("well formed");
        assert!(matches!(
            build(&nfa, 1000),
            Err(KernelError::InvalidTables { .. })
        ));
    }
}
