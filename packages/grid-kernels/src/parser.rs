//! LALR(1) stacks in an arena, allowed sets by reduce-chain simulation.
//!
//! Mirrors `grid_core.parser`. A stack is a node id in a [`StackArena`]: each
//! node holds its parent and the LALR state reached. Nodes are interned on
//! `(parent, state)` (the accessing symbol is a function of the state), so one
//! stack has one id within an arena and anything memoized on a node (its
//! allowed set) is computed once. Push and pop are O(1); rollback is keeping an
//! id. Stacks come from Python as their list of states, bottom first.
//!
//! Allowed terminals A(node) are computed by *simulating* the reduce chain of
//! each non-error column on a virtual overlay of states above the node (nothing
//! is interned while simulating): a terminal is allowed iff the parser shifts it
//! after reductions, `$END` (bit T) iff it reaches ACCEPT. By the correct-prefix
//! property of LR parsers (Aho & Johnson, "LR Parsing", 1974) that is exactly
//! viability. The exact LALR(1) rows have no default reductions, so a non-error
//! cell is necessary, not sufficient; the rows bound the simulation.
//!
//! Contract of one simulated step (`Parser._run`), with `s` the virtual top:
//!   `action[s][t] = k > 0`  shift: push `k - 1` (materialized or reported)
//!   `action[s][t] = 0`      error
//!   `action[s][t] = -1 - r` reduce rule r: pop `len(r)`, push `goto[top][lhs(r)]`;
//!                           rule 0 is ACCEPT (allowed iff `t` is `$END`)

use std::sync::Arc;

use crate::bits;
use crate::cache::FxMap;
use crate::error::{KernelError, Result};
use crate::tables::{GrammarTables, Lalr};

/// A node of a [`StackArena`].
pub type NodeId = u32;

const NO_PARENT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Cell {
    parent: u32,
    state: u32,
    /// The rolling configuration hash of DESIGN.md section 5 (`Node.hash`).
    hash: u64,
}

/// `H(node) = low64(BLAKE2b-128(H(parent) || u32(state) || u32(symbol)))`,
/// little-endian, `symbol` the state's accessing symbol (`Node.__init__`).
pub fn node_hash(parent: u64, state: u32, symbol: u32) -> u64 {
    crate::hash::low64(&[
        &parent.to_le_bytes(),
        &state.to_le_bytes(),
        &symbol.to_le_bytes(),
    ])
}

/// What simulating the reduce chain of one terminal ends in.
enum Outcome {
    Error,
    Accept,
    /// Shift into `state` above `base` (still in the arena) plus `overlay`.
    Shift {
        base: NodeId,
        overlay: Vec<u32>,
        state: u32,
    },
}

/// Interned persistent stacks over one set of LALR tables, with per-node
/// memoized allowed sets. Not `Sync`: a caller that shares one between
/// threads puts it behind a lock (`crate::engine`); the tables behind it are
/// shared read-only.
pub struct StackArena {
    grammar: Arc<GrammarTables>,
    width: usize,
    cells: Vec<Cell>,
    interned: FxMap<(u32, u32), NodeId>,
    allowed: Vec<Option<Box<[u64]>>>,
    /// `shift(node, t)`, memoized (nodes are never freed, so it stays true).
    shifts: FxMap<(NodeId, u32), NodeId>,
}

impl std::fmt::Debug for StackArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StackArena({} nodes)", self.len())
    }
}

impl StackArena {
    /// An empty arena over `grammar`'s LALR tables.
    pub fn new(grammar: Arc<GrammarTables>) -> Self {
        Self {
            width: grammar.width(),
            grammar,
            cells: Vec::new(),
            interned: FxMap::default(),
            allowed: Vec::new(),
            shifts: FxMap::default(),
        }
    }

    #[inline]
    fn lalr(&self) -> &Lalr {
        &self.grammar.lalr
    }

    fn intern(&mut self, parent: u32, state: u32) -> NodeId {
        if let Some(&id) = self.interned.get(&(parent, state)) {
            return id;
        }
        let id = self.cells.len() as NodeId;
        let hash = if parent == NO_PARENT {
            0
        } else {
            let symbol = self.lalr().access[state as usize];
            node_hash(self.cells[parent as usize].hash, state, symbol)
        };
        self.cells.push(Cell {
            parent,
            state,
            hash,
        });
        self.allowed.push(None);
        self.interned.insert((parent, state), id);
        id
    }

    /// The node of a stack given as its LALR states, bottom first.
    pub fn from_states(&mut self, states: &[i64]) -> Result<NodeId> {
        if states.is_empty() {
            return Err(KernelError::InvalidStack {
                detail: "a stack has at least its bottom state".into(),
            });
        }
        let mut node = NO_PARENT;
        for &s in states {
            let s = usize::try_from(s)
                .ok()
                .filter(|&s| s < self.lalr().n_states)
                .ok_or_else(|| KernelError::InvalidStack {
                    detail: format!("state {s} is out of range 0..{}", self.lalr().n_states),
                })?;
            node = self.intern(node, s as u32);
        }
        Ok(node)
    }

    /// Push `state` on `parent`.
    pub fn push(&mut self, parent: NodeId, state: u32) -> NodeId {
        debug_assert!((state as usize) < self.lalr().n_states);
        self.intern(parent, state)
    }

    pub fn state(&self, node: NodeId) -> u32 {
        self.cells[node as usize].state
    }

    /// The stack's rolling configuration hash (`Node.hash`; 0 at the bottom).
    pub fn hash(&self, node: NodeId) -> u64 {
        self.cells[node as usize].hash
    }

    pub fn parent(&self, node: NodeId) -> Option<NodeId> {
        let p = self.cells[node as usize].parent;
        (p != NO_PARENT).then_some(p)
    }

    /// The states from the bottom of the stack to `node`.
    pub fn states(&self, node: NodeId) -> Vec<u32> {
        let mut out = Vec::new();
        let mut n = Some(node);
        while let Some(id) = n {
            out.push(self.state(id));
            n = self.parent(id);
        }
        out.reverse();
        out
    }

    /// Nodes interned so far.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Reduce on a virtual overlay, then report whether `t` shifts (`Parser._run`).
    fn run(&self, node: NodeId, t: usize) -> Result<Outcome> {
        let lalr = self.lalr();
        let w = lalr.width();
        let mut base = node;
        let mut overlay: Vec<u32> = Vec::new();
        let mut state = self.state(node) as usize;
        loop {
            let a = lalr.action[state * w + t];
            if a > 0 {
                return Ok(Outcome::Shift {
                    base,
                    overlay,
                    state: (a - 1) as u32,
                });
            }
            if a == 0 {
                return Ok(Outcome::Error);
            }
            let rule = (-(a as i64) - 1) as usize;
            if rule == 0 {
                return Ok(if t == lalr.n_terminals {
                    Outcome::Accept
                } else {
                    Outcome::Error
                });
            }
            (base, overlay) = self.reduce(base, overlay, rule)?;
            state = *overlay.last().expect("a reduction pushes its goto") as usize;
        }
    }

    /// The stack `overlay` on `base` after reducing by `rule` (not ACCEPT):
    /// pop `len(rule)` states, push `goto[top][lhs(rule)]` on the overlay.
    fn reduce(
        &self,
        mut base: NodeId,
        mut overlay: Vec<u32>,
        rule: usize,
    ) -> Result<(NodeId, Vec<u32>)> {
        let lalr = self.lalr();
        let n = lalr.rule_len[rule] as usize;
        if n <= overlay.len() {
            overlay.truncate(overlay.len() - n);
        } else {
            for _ in 0..n - overlay.len() {
                base = self.parent(base).ok_or_else(|| KernelError::InvalidStack {
                    detail: "a reduction pops past the bottom of the stack".into(),
                })?;
            }
            overlay.clear();
        }
        let top = overlay.last().copied().unwrap_or_else(|| self.state(base)) as usize;
        let g = lalr.goto[top * lalr.n_nonterminals + lalr.rule_lhs[rule] as usize];
        if g < 0 {
            return Err(KernelError::InvalidStack {
                detail: format!("goto from state {top} on a reduced nonterminal is undefined"),
            });
        }
        overlay.push(g as u32);
        Ok((base, overlay))
    }

    /// A(node): the terminals the parser can take (bit T = `$END`), memoized.
    pub fn allowed(&mut self, node: NodeId) -> Result<&[u64]> {
        if self.allowed[node as usize].is_none() {
            let mut a = vec![0u64; self.width];
            let terms = self.lalr().row_terms(self.state(node) as usize);
            self.allowed_of(node, Vec::new(), terms, &mut a)?;
            self.allowed[node as usize] = Some(a.into_boxed_slice());
        }
        Ok(self.allowed[node as usize]
            .as_deref()
            .expect("memoized above"))
    }

    /// Set in `a` each terminal of `terms` that the stack `overlay` on `base`
    /// shifts after reductions (or, `$END`, accepts): what [`Self::run`]
    /// decides per terminal, with the terminals that reduce by the same rule
    /// carried down one reduction together (the stack it leaves does not
    /// depend on the terminal), so each reduce chain is simulated once.
    fn allowed_of(
        &self,
        base: NodeId,
        overlay: Vec<u32>,
        terms: &[u32],
        a: &mut [u64],
    ) -> Result<()> {
        let lalr = self.lalr();
        let w = lalr.width();
        let state = overlay.last().copied().unwrap_or_else(|| self.state(base)) as usize;
        let mut by_rule: Vec<(usize, Vec<u32>)> = Vec::new();
        for &t in terms {
            let act = lalr.action[state * w + t as usize];
            if act > 0 {
                bits::set(a, t as usize);
            } else if act < 0 {
                let rule = (-(act as i64) - 1) as usize;
                if rule == 0 {
                    if t as usize == lalr.n_terminals {
                        bits::set(a, t as usize);
                    }
                } else if let Some((_, ts)) = by_rule.iter_mut().find(|(r, _)| *r == rule) {
                    ts.push(t);
                } else {
                    by_rule.push((rule, vec![t]));
                }
            }
        }
        for (rule, ts) in by_rule {
            let (base, overlay) = self.reduce(base, overlay.clone(), rule)?;
            self.allowed_of(base, overlay, &ts, a)?;
        }
        Ok(())
    }

    /// The stack after reducing and shifting terminal `t` (`Parser.shift`).
    pub fn shift(&mut self, node: NodeId, t: usize) -> Result<NodeId> {
        if t >= self.lalr().n_terminals {
            return Err(KernelError::InvalidTerminal {
                terminal: t as i64,
                detail: format!("out of range 0..{}", self.lalr().n_terminals),
            });
        }
        if let Some(&n) = self.shifts.get(&(node, t as u32)) {
            return Ok(n);
        }
        match self.run(node, t)? {
            Outcome::Shift {
                base,
                overlay,
                state,
            } => {
                let mut n = base;
                for s in overlay {
                    n = self.push(n, s);
                }
                let n = self.push(n, state);
                self.shifts.insert((node, t as u32), n);
                Ok(n)
            }
            _ => Err(KernelError::InvalidTerminal {
                terminal: t as i64,
                detail: "the stack cannot shift it".into(),
            }),
        }
    }

    /// `$END` reaches ACCEPT from `node`.
    pub fn accepts(&mut self, node: NodeId) -> Result<bool> {
        let end = self.lalr().n_terminals;
        Ok(bits::test(self.allowed(node)?, end))
    }

    /// Assert the arena's invariants (for tests): parents precede children,
    /// interning is a bijection, states are in range, hashes roll.
    pub fn check_invariants(&self) {
        assert_eq!(self.cells.len(), self.interned.len());
        assert_eq!(self.cells.len(), self.allowed.len());
        for (i, c) in self.cells.iter().enumerate() {
            assert!(c.parent == NO_PARENT || (c.parent as usize) < i);
            assert!((c.state as usize) < self.lalr().n_states);
            assert_eq!(self.interned[&(c.parent, c.state)], i as NodeId);
            if c.parent != NO_PARENT {
                let p = self.cells[c.parent as usize].hash;
                assert_eq!(
                    c.hash,
                    node_hash(p, c.state, self.lalr().access[c.state as usize])
                );
            }
        }
    }
}
