//! LALR(1) table construction, bit-identical to grid-core's `build_lalr`.
//!
//! Mirrors `grid_core.lalr` step by step, so that the tables (and so their
//! fingerprint) are the same arrays: the LR(0) automaton numbered breadth
//! first from the kernel of rule 0 (closures sorted, successors by symbol
//! ascending, each kernel a sorted item list), DeRemer-Pennello lookaheads
//! (`Read` then `Follow` by the digraph algorithm, with a virtual transition
//! `(0, $start)` whose `Follow` is `{$END}`), then the action and goto tables,
//! completed rules in ascending order, lookahead columns ascending, the first
//! conflict reported. The grammar is validated by grid-core before it gets
//! here (symbol ranges, rule 0 the augmented start rule), and the conflict
//! message (which names the items) is written there too.
//!
//! Symbols: terminals `0..t`, `$END` = `t`, nonterminal `a` = `t + 1 + a`.
//! An action cell is 0 (error), `s + 1` (shift to `s`) or `-r - 1` (reduce by
//! rule `r`); a goto cell is the target state or -1.

use crate::cache::FxMap;

/// The constructed tables (grid-core's `LalrTables` arrays that depend on
/// the automaton; the rest are read off the rules there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    pub n_states: usize,
    pub action: Vec<i32>,
    pub goto: Vec<i32>,
    pub state_symbol: Vec<i32>,
    pub kernel_start: Vec<i32>,
    pub kernel_rule: Vec<i32>,
    pub kernel_dot: Vec<i32>,
}

/// The first conflict met: in `state` on terminal column `symbol`, the
/// item already there (`first`, a shift item or a completed item) and the
/// completed item of the rule that would reduce (`reduce`). Items are
/// numbered as grid-core's `_Grammar` numbers them (`item_base[r] + dot`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub shift_reduce: bool,
    pub state: usize,
    pub symbol: usize,
    pub first: usize,
    pub reduce: usize,
}

/// The most cells (states times symbols) the dense tables may take: about 1.8
/// GiB of `i32` over the action, goto and nonterminal-index tables together.
/// A larger grammar (a JSON Schema of thousands of properties) is refused
/// before it is allocated, where an allocation failure would abort the process.
pub const MAX_TABLE_CELLS: usize = 150_000_000;

/// Why [`build`] built no tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The grammar is not LALR(1).
    Conflict(Conflict),
    /// The automaton has `states` states, whose dense tables would take `cells`
    /// cells, more than [`MAX_TABLE_CELLS`].
    TooLarge { states: usize, cells: usize },
}

/// Terminal sets over `t + 1` symbols ($END included), one per node, as
/// rows of `words` 64-bit words in one vector.
#[derive(Clone, Debug)]
struct Sets {
    words: usize,
    bits: Vec<u64>,
}

impl Sets {
    fn new(n: usize, words: usize) -> Self {
        Self {
            words,
            bits: vec![0; n * words],
        }
    }

    fn row(&self, x: usize) -> &[u64] {
        &self.bits[x * self.words..(x + 1) * self.words]
    }

    fn insert(&mut self, x: usize, c: usize) {
        self.bits[x * self.words + c / 64] |= 1 << (c % 64);
    }

    /// Row `into` |= row `from`.
    fn or_row(&mut self, into: usize, from: usize) {
        for k in 0..self.words {
            let v = self.bits[from * self.words + k];
            self.bits[into * self.words + k] |= v;
        }
    }

    /// Row `into` |= `row` (a row of other sets as wide).
    fn or_from(&mut self, into: usize, row: &[u64]) {
        let w = self.words;
        for (m, f) in self.bits[into * w..(into + 1) * w].iter_mut().zip(row) {
            *m |= f;
        }
    }

    /// Row `into` = row `from`.
    fn copy_row(&mut self, into: usize, from: usize) {
        let w = self.words;
        self.bits.copy_within(from * w..(from + 1) * w, into * w);
    }
}

/// Lists of items stored end to end: list `k` is `get(k)`.
struct Flat<T = u32> {
    items: Vec<T>,
    start: Vec<usize>,
}

impl<T: Copy> Flat<T> {
    fn new() -> Self {
        Self {
            items: Vec::new(),
            start: vec![0],
        }
    }

    /// `n` lists: list `k` has the values of the pairs `(k, value)`, in the
    /// order of `pairs` (a counting sort).
    fn grouped(n: usize, pairs: &[(u32, T)]) -> Self {
        let mut start = vec![0usize; n + 1];
        for &(k, _) in pairs {
            start[k as usize + 1] += 1;
        }
        for k in 0..n {
            start[k + 1] += start[k];
        }
        let mut next = start.clone();
        let mut items = Vec::with_capacity(pairs.len());
        // Every slot is written once below; the first pair's value fills it first.
        if let Some(&(_, first)) = pairs.first() {
            items.resize(pairs.len(), first);
        }
        for &(k, value) in pairs {
            items[next[k as usize]] = value;
            next[k as usize] += 1;
        }
        Self { items, start }
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }

    fn get(&self, k: usize) -> &[T] {
        &self.items[self.start[k]..self.start[k + 1]]
    }

    fn push(&mut self, list: &[T]) {
        self.items.extend_from_slice(list);
        self.start.push(self.items.len());
    }

    /// Append one list: `first`'s items, then `more`'s.
    fn push_two(&mut self, first: &[T], more: &[T]) {
        self.items.extend_from_slice(first);
        self.items.extend_from_slice(more);
        self.start.push(self.items.len());
    }

    /// End the list being written (its items pushed onto `items`).
    fn close(&mut self) {
        self.start.push(self.items.len());
    }
}

/// Build the tables of a grammar with `t` terminals and `n` nonterminals
/// whose rule `r` is `lhs[r] -> rhs[r]`. Preconditions (checked by
/// grid-core): every symbol is in range and is not `$END`; rule 0 is the
/// augmented start rule.
pub fn build(t: usize, n: usize, lhs: &[u32], rhs: &[Vec<u32>]) -> Result<Built, BuildError> {
    let sym_nt = |x: u32| x as usize - t - 1;
    let is_nt = |x: u32| x as usize > t;
    // Items: item_base[r] + dot; item_next the symbol after the dot or -1.
    let (mut item_base, mut item_rule, mut item_next) = (Vec::new(), Vec::new(), Vec::new());
    for (r, body) in rhs.iter().enumerate() {
        item_base.push(item_rule.len());
        for d in 0..=body.len() {
            item_rule.push(r);
            item_next.push(body.get(d).map_or(-1, |&x| x as i64));
        }
    }
    let mut rules_by_lhs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (r, &a) in lhs.iter().enumerate() {
        rules_by_lhs[a as usize].push(r);
    }
    let mut nullable = vec![false; t + 1 + n];
    let mut changed = true;
    while changed {
        changed = false;
        for (r, body) in rhs.iter().enumerate() {
            let x = t + 1 + lhs[r] as usize;
            if !nullable[x] && body.iter().all(|&y| nullable[y as usize]) {
                nullable[x] = true;
                changed = true;
            }
        }
    }
    // Left corners: the dot-0 items the LR(0) closure adds for a nonterminal.
    let mut first_nts: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (r, body) in rhs.iter().enumerate() {
        if let Some(&x) = body.first() {
            if is_nt(x) && !first_nts[lhs[r] as usize].contains(&sym_nt(x)) {
                first_nts[lhs[r] as usize].push(sym_nt(x));
            }
        }
    }
    let closure_items: Vec<Vec<u32>> = (0..n)
        .map(|a| {
            let mut seen = vec![false; n];
            seen[a] = true;
            let mut todo = vec![a];
            while let Some(x) = todo.pop() {
                for &b in &first_nts[x] {
                    if !seen[b] {
                        seen[b] = true;
                        todo.push(b);
                    }
                }
            }
            (0..n)
                .filter(|&b| seen[b])
                .flat_map(|b| rules_by_lhs[b].iter().map(|&r| item_base[r] as u32))
                .collect()
        })
        .collect();

    // The LR(0) automaton, breadth first. Kernels and closures are stored
    // flat: state `s`'s items are `items[start[s]..start[s + 1]]`.
    let mut kernels = Flat::new();
    kernels.push(&[item_base[0] as u32]);
    let mut closures = Flat::new();
    let mut trans: Flat<(u32, u32)> = Flat::new();
    let mut index: FxMap<Vec<u32>, u32> = FxMap::default();
    index.insert(kernels.get(0).to_vec(), 0);
    // The successor items of the state being closed, by the symbol after the
    // dot (`succ_of[x]`), and the symbols met, in order.
    let mut succ_of: Vec<Vec<u32>> = vec![Vec::new(); t + 1 + n];
    let mut symbols: Vec<u32> = Vec::new();
    // Scratch reused from state to state: the nonterminals after a kernel
    // dot, and the items their closure adds.
    let (mut nts, mut added): (Vec<usize>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut s = 0;
    while s < kernels.len() {
        let kernel = kernels.get(s);
        nts.clear();
        nts.extend(
            kernel
                .iter()
                .filter(|&&i| item_next[i as usize] > t as i64)
                .map(|&i| item_next[i as usize] as usize - t - 1),
        );
        nts.sort_unstable();
        nts.dedup();
        added.clear();
        if !nts.is_empty() {
            added.extend(nts.iter().flat_map(|&a| closure_items[a].iter().copied()));
            added.sort_unstable();
            added.dedup();
        }
        closures.push_two(kernel, &added);
        for &i in closures.get(s) {
            let x = item_next[i as usize];
            if x >= 0 {
                let succ = &mut succ_of[x as usize];
                if succ.is_empty() {
                    symbols.push(x as u32);
                }
                succ.push(i + 1);
            }
        }
        symbols.sort_unstable();
        for x in symbols.drain(..) {
            let succ = &mut succ_of[x as usize];
            succ.sort_unstable();
            let target = match index.get(succ.as_slice()) {
                Some(&target) => target,
                None => {
                    let target = kernels.len() as u32;
                    index.insert(succ.clone(), target);
                    kernels.push(succ);
                    target
                }
            };
            succ.clear(); // keeps its capacity for the next state
            trans.items.push((x, target));
        }
        trans.close();
        s += 1;
    }
    // The shifts and gotos, dense: the tables' cells, and what the
    // lookahead computation follows rule bodies through.
    let (w, n_states) = (t + 1, kernels.len());
    let cells = n_states.saturating_mul(w + 2 * n);
    if cells > MAX_TABLE_CELLS {
        return Err(BuildError::TooLarge {
            states: n_states,
            cells,
        });
    }
    let mut action = vec![0i32; n_states * w];
    let mut goto = vec![-1i32; n_states * n];
    for s in 0..n_states {
        for &(x, target) in trans.get(s) {
            if (x as usize) < t {
                action[s * w + x as usize] = target as i32 + 1;
            } else {
                goto[s * n + sym_nt(x)] = target as i32;
            }
        }
    }
    let goto_of = |q: usize, x: u32| -> usize {
        let target = if (x as usize) < t {
            action[q * w + x as usize] - 1
        } else {
            goto[q * n + sym_nt(x)]
        };
        assert!(target >= 0, "a rule's body is a path of the automaton");
        target as usize
    };

    // Lookaheads (DeRemer-Pennello): nonterminal transitions x = (p, A), and
    // the virtual (0, $start).
    let words = (t + 1).div_ceil(64).max(1);
    let mut nt_from: Vec<usize> = Vec::new();
    let mut nt_sym: Vec<u32> = Vec::new();
    // nt_index[p * n + A]: the transition (p, A) (u32::MAX: none).
    let mut nt_index: Vec<u32> = vec![u32::MAX; n_states * n];
    for p in 0..n_states {
        for &(x, _) in trans.get(p) {
            if is_nt(x) {
                nt_index[p * n + sym_nt(x)] = nt_from.len() as u32;
                nt_from.push(p);
                nt_sym.push(x);
            }
        }
    }
    let start_sym = (t + 1) as u32 + lhs[0];
    let virtual_ = nt_from.len();
    nt_index[sym_nt(start_sym)] = virtual_ as u32;
    nt_from.push(0);
    nt_sym.push(start_sym);
    let n_trans = nt_from.len();

    let mut direct = Sets::new(n_trans, words);
    let mut reads: Flat = Flat::new();
    for x in 0..virtual_ {
        let q = goto_of(nt_from[x], nt_sym[x]);
        for &(c, _) in trans.get(q) {
            if (c as usize) < t {
                direct.insert(x, c as usize);
            } else if is_nt(c) && nullable[c as usize] {
                reads.items.push(nt_index[q * n + sym_nt(c)]);
            }
        }
        reads.close();
    }
    reads.close(); // the virtual transition reads nothing
    direct.insert(virtual_, t);
    let read = digraph(&reads, direct);

    // The completed rules of each state, ascending: (state, rule) is a
    // reduction slot, numbered `completes.start[state] + its rank there`.
    let mut completes: Flat = Flat::new();
    for s in 0..n_states {
        let from = completes.items.len();
        completes.items.extend(
            closures
                .get(s)
                .iter()
                .filter(|&&i| item_next[i as usize] < 0)
                .map(|&i| item_rule[i as usize] as u32),
        );
        completes.items[from..].sort_unstable();
        completes.close();
    }
    let slot_of = |q: usize, r: usize| -> u32 {
        let rank = completes.get(q).binary_search(&(r as u32));
        (completes.start[q] + rank.expect("a lookback ends where its rule is complete")) as u32
    };
    // (x, y) for x includes y; (slot, x) for slot lookback x.
    let mut includes: Vec<(u32, u32)> = Vec::new();
    let mut lookback: Vec<(u32, u32)> = Vec::new();
    let mut path = Vec::new();
    for x in 0..n_trans {
        let (p, a) = (nt_from[x], nt_sym[x]);
        for &r in &rules_by_lhs[sym_nt(a)] {
            let body = &rhs[r];
            path.clear();
            path.push(p);
            let mut q = p;
            for &y in body {
                q = goto_of(q, y);
                path.push(q);
            }
            lookback.push((slot_of(q, r), x as u32));
            for i in (0..body.len()).rev() {
                let y = body[i];
                if is_nt(y) {
                    includes.push((nt_index[path[i] * n + sym_nt(y)], x as u32));
                }
                if !nullable[y as usize] {
                    break;
                }
            }
        }
    }
    let follow = digraph(&Flat::grouped(n_trans, &includes), read);
    // The lookahead set of each reduction slot.
    let mut lookahead = Sets::new(completes.items.len(), words);
    for &(slot, x) in &lookback {
        lookahead.or_from(slot as usize, follow.row(x as usize));
    }

    // The reductions.
    for s in 0..n_states {
        let closure = closures.get(s);
        for (rank, &r) in completes.get(s).iter().enumerate() {
            let r = r as usize;
            for col in set_bits(lookahead.row(completes.start[s] + rank)) {
                let cell = action[s * w + col];
                if cell == 0 {
                    action[s * w + col] = -(r as i32) - 1;
                    continue;
                }
                let reduce = item_base[r] + rhs[r].len();
                let (shift_reduce, first) = if cell > 0 {
                    let i = closure
                        .iter()
                        .find(|&&i| item_next[i as usize] == col as i64)
                        .expect("a shift has its item");
                    (true, *i as usize)
                } else {
                    let other = (-cell - 1) as usize;
                    (false, item_base[other] + rhs[other].len())
                };
                return Err(BuildError::Conflict(Conflict {
                    shift_reduce,
                    state: s,
                    symbol: col,
                    first,
                    reduce,
                }));
            }
        }
    }
    let mut state_symbol = vec![-1i32; n_states];
    for &(x, target) in &trans.items {
        state_symbol[target as usize] = x as i32;
    }
    let mut kernel_start = vec![0i32];
    let (mut kernel_rule, mut kernel_dot) = (Vec::new(), Vec::new());
    for s in 0..n_states {
        for &i in kernels.get(s) {
            let r = item_rule[i as usize];
            kernel_rule.push(r as i32);
            kernel_dot.push((i as usize - item_base[r]) as i32);
        }
        kernel_start.push(kernel_rule.len() as i32);
    }
    Ok(Built {
        n_states,
        action,
        goto,
        state_symbol,
        kernel_start,
        kernel_rule,
        kernel_dot,
    })
}

/// The positions of the set bits of `words` (bit `c % 64` of word `c / 64`),
/// in increasing order.
fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(k, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            let bit = (rest != 0).then(|| rest.trailing_zeros() as usize)?;
            rest &= rest - 1;
            Some(k * 64 + bit)
        })
    })
}

/// `F(x) = base(x) U U{ F(y) : x R y }` by DeRemer-Pennello's digraph
/// (Tarjan's strongly connected components, iterative): grid-core's
/// `_digraph`. The least solution is unique, so the result does not depend
/// on the order of the edges.
fn digraph(relation: &Flat, base: Sets) -> Sets {
    let n = relation.len();
    let mut result = base;
    let mut depth = vec![0usize; n];
    let done = n + 1;
    let mut stack: Vec<usize> = Vec::new();
    // The open nodes of the depth-first walk, their stack heights and edge
    // cursors (reused from root to root).
    let (mut work, mut heights, mut cursor): (Vec<usize>, Vec<usize>, Vec<usize>) =
        (Vec::new(), Vec::new(), Vec::new());
    for root in 0..n {
        if depth[root] != 0 {
            continue;
        }
        stack.push(root);
        depth[root] = stack.len();
        work.push(root);
        heights.push(stack.len());
        cursor.push(0);
        while let Some(&x) = work.last() {
            let i = *cursor.last().expect("one cursor per open node");
            if let Some(&y) = relation.get(x).get(i) {
                let y = y as usize;
                *cursor.last_mut().expect("one cursor per open node") = i + 1;
                if depth[y] == 0 {
                    stack.push(y);
                    depth[y] = stack.len();
                    work.push(y);
                    heights.push(stack.len());
                    cursor.push(0);
                } else {
                    depth[x] = depth[x].min(depth[y]);
                    result.or_row(x, y);
                }
                continue;
            }
            work.pop();
            cursor.pop();
            if depth[x] == heights.pop().expect("one height per open node") {
                loop {
                    let z = stack.pop().expect("x is on the stack");
                    depth[z] = done;
                    result.copy_row(z, x);
                    if z == x {
                        break;
                    }
                }
            }
            if let Some(&parent) = work.last() {
                depth[parent] = depth[parent].min(depth[x]);
                result.or_row(parent, x);
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_pairs_keep_their_order_within_each_list() {
        let pairs = [(2, 'a'), (0, 'b'), (2, 'c'), (0, 'd'), (3, 'e')];
        let lists: Flat<char> = Flat::grouped(5, &pairs);
        assert_eq!(lists.len(), 5);
        let got: Vec<Vec<char>> = (0..5).map(|k| lists.get(k).to_vec()).collect();
        assert_eq!(
            got,
            vec![vec!['b', 'd'], vec![], vec!['a', 'c'], vec!['e'], vec![]]
        );
        let none: Flat<char> = Flat::grouped(2, &[]);
        assert_eq!((none.len(), none.get(1).len()), (2, 0));
    }

    #[test]
    fn set_bits_lists_each_set_bit_in_order() {
        let words = [0b1001u64, 0, 1 << 63 | 1];
        let got: Vec<usize> = set_bits(&words).collect();
        assert_eq!(got, vec![0, 3, 128, 191]);
        assert_eq!(set_bits(&[0, 0]).count(), 0);
        let all: Vec<usize> = set_bits(&[u64::MAX]).collect();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
    }

    /// `S' -> S; S -> S a | b` (t = 2: a, b; n = 2: S', S).
    #[test]
    fn left_recursion_builds() {
        let (a, b, s) = (0, 1, 4);
        let built = build(2, 2, &[0, 1, 1], &[vec![s], vec![s, a], vec![b]]).unwrap();
        assert_eq!(built.n_states, 4);
        // State 0 shifts b to a state that reduces S -> b on a and $END.
        let to = built.action[b as usize] - 1;
        assert!(to > 0);
        let w = 3;
        assert_eq!(built.action[to as usize * w], -3);
        assert_eq!(built.action[to as usize * w + 2], -3);
    }

    /// The kernels index the tables they built without re-checking them
    /// (`Lalr::from_built`): the same value as `Lalr::new` over those arrays.
    #[test]
    fn built_tables_index_as_checked_tables_do() {
        use crate::tables::{Lalr, RawGrammar};
        let (a, b, s) = (0, 1, 4);
        let (lhs, rhs) = (vec![0, 1, 1], vec![vec![s], vec![s, a], vec![b]]);
        let built = build(2, 2, &lhs, &rhs).unwrap();
        let raw = RawGrammar {
            n_terminals: 2,
            action: built.action.clone(),
            goto: built.goto.clone(),
            n_nonterminals: 2,
            rule_lhs: lhs.iter().map(|&x| x as i32).collect(),
            rule_len: rhs.iter().map(|r| r.len() as i32).collect(),
            ..RawGrammar::default()
        };
        let checked = Lalr::new(&raw).unwrap();
        assert_eq!(Lalr::from_built(2, 2, &lhs, &rhs, built), checked);
        // And on random grammars (3 terminals, 4 nonterminals, 3-8 rules of up
        // to 3 symbols) that build without a conflict.
        let (t, n) = (3usize, 4usize);
        let mut seed = 99u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        let mut compared = 0;
        for _ in 0..3000 {
            let mut lhs = vec![0u32];
            let mut rhs = vec![vec![(t + 2) as u32]]; // $start -> nonterminal 1
            for _ in 0..3 + next(6) {
                lhs.push(1 + next(n - 1) as u32);
                let body = (0..next(4))
                    .map(|_| {
                        let x = next(t + n - 1);
                        if x < t {
                            x as u32
                        } else {
                            (t + 2 + x - t) as u32
                        }
                    })
                    .collect();
                rhs.push(body);
            }
            let Ok(built) = build(t, n, &lhs, &rhs) else {
                continue;
            };
            let raw = RawGrammar {
                n_terminals: t,
                action: built.action.clone(),
                goto: built.goto.clone(),
                n_nonterminals: n,
                rule_lhs: lhs.iter().map(|&x| x as i32).collect(),
                rule_len: rhs.iter().map(|r| r.len() as i32).collect(),
                ..RawGrammar::default()
            };
            let checked = Lalr::new(&raw).unwrap();
            assert_eq!(Lalr::from_built(t, n, &lhs, &rhs, built), checked);
            compared += 1;
        }
        assert!(compared > 100, "{compared}");
    }

    /// `S' -> S; S -> a | a` is a reduce/reduce conflict on $END.
    #[test]
    fn conflicts_are_reported() {
        let err = build(1, 2, &[0, 1, 1], &[vec![3], vec![0], vec![0]]).unwrap_err();
        let BuildError::Conflict(err) = err else {
            panic!("{err:?}")
        };
        assert!(!err.shift_reduce);
        assert_eq!(err.symbol, 1);
    }

    /// A grammar whose dense tables would pass [`MAX_TABLE_CELLS`] is refused
    /// before they are allocated: `S -> A0 A1 ... A(k-1)`, `Ai -> ai` over 12,500
    /// terminals has about 2 * 12,500 states of 37,500 cells each.
    #[test]
    fn tables_too_large_are_refused_before_allocation() {
        let k = 12_500u32;
        let (t, n) = (k as usize, k as usize + 2);
        let nt = |i: u32| t as u32 + 1 + i;
        let mut lhs = vec![0, 1];
        let mut rhs = vec![vec![nt(1)], (0..k).map(|i| nt(2 + i)).collect::<Vec<_>>()];
        for i in 0..k {
            lhs.push(2 + i);
            rhs.push(vec![i]);
        }
        match build(t, n, &lhs, &rhs) {
            Err(BuildError::TooLarge { states, cells }) => {
                assert!(
                    cells > MAX_TABLE_CELLS && states > k as usize,
                    "{states} {cells}"
                )
            }
            other => panic!("{:?}", other.map(|b| b.n_states)),
        }
    }
}
