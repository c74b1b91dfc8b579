//! The whole mask of a configuration: CI walk, CD verdict classes, EOS gate.
//!
//! Mirrors `grid_core.guide.Engine.compute_mask` without its cache (an engine
//! built with `cache=False`), DESIGN.md sections 4, 6, 8:
//!
//! 1. A <- allowed terminals of the stack;
//! 2. walk the trie from the remainder under A: CI nodes and CD entries;
//! 3. level by level (breadth first): for each stack of the level, in order of
//!    first appearance, group its CD entries by emitted terminal, in order of
//!    first appearance: one verdict class per (stack, terminal). Shift the
//!    terminal on the stack, take A', walk each entry's subtree from its tail;
//!    CD entries found there join the next level under the shifted stack
//!    (stacks are interned, so entries reaching one stack share its classes);
//! 4. admit EOS iff the remainder finalizes and `$END` reaches ACCEPT.
//!
//! grid-core reports each walk's CI part as its token ids, ascending, and the CD
//! part as the concatenation of the sub-walks' parts; [`MaskOutput`] keeps the
//! trie nodes with the sub-walk boundaries, so the same lists can be produced
//! ([`MaskOutput::ci_ids`], [`MaskOutput::cd_ids`]) while a bitmask fill needs no
//! sorting at all.
//!
//! [`EngineTables`] pairs one grammar's tables with one tokenizer's trie; both
//! are shared (`Arc`), so an engine per projection copies neither.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{KernelError, Result};
use crate::lexer::Config;
use crate::parser::{NodeId, StackArena};
use crate::tables::GrammarTables;
use crate::trie::Trie;
use crate::walk::{walk_from, walk_into, WalkOutput};

/// One step's mask as trie nodes plus the EOS verdict, with what it cost
/// (`grid_core.guide.MaskResult`, in nodes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaskOutput {
    /// CI nodes of the root walk, in walk order.
    pub ci_nodes: Vec<u32>,
    /// CI nodes of every sub-walk of a CD class, in evaluation order.
    pub cd_nodes: Vec<u32>,
    /// End of each sub-walk's run in `cd_nodes`.
    pub cd_walk_ends: Vec<u32>,
    pub eos: bool,
    pub cd_entries: usize,
    pub cd_classes: usize,
}

impl MaskOutput {
    /// grid-core's `ci_ids`: the root walk's token ids, ascending.
    pub fn ci_ids(&self, trie: &Trie) -> Vec<u32> {
        sorted_ids(trie, &self.ci_nodes)
    }

    /// grid-core's `cd_ids`: each sub-walk's ids ascending, concatenated.
    pub fn cd_ids(&self, trie: &Trie) -> Vec<u32> {
        let mut out = Vec::new();
        let mut start = 0;
        for &end in &self.cd_walk_ends {
            out.extend(sorted_ids(trie, &self.cd_nodes[start..end as usize]));
            start = end as usize;
        }
        out
    }
}

fn sorted_ids(trie: &Trie, nodes: &[u32]) -> Vec<u32> {
    let mut ids: Vec<u32> = nodes
        .iter()
        .flat_map(|&n| trie.ids_at(n as usize))
        .copied()
        .collect();
    ids.sort_unstable();
    ids
}

/// A CD entry waiting for its verdict on a stack of the next level.
struct Pending {
    node: u32,
    terminal: u32,
    tail: Box<[u8]>,
}

fn pending_of(out: &WalkOutput) -> impl Iterator<Item = Pending> + '_ {
    out.cd.iter().map(|e| Pending {
        node: e.node,
        terminal: e.terminal,
        tail: out.tail(e).into(),
    })
}

/// One grammar's tables with one tokenizer's trie.
#[derive(Clone, Debug)]
pub struct EngineTables {
    pub grammar: Arc<GrammarTables>,
    pub trie: Arc<Trie>,
}

impl EngineTables {
    pub fn new(grammar: Arc<GrammarTables>, trie: Arc<Trie>) -> Self {
        Self { grammar, trie }
    }

    /// Check a trie node id from a caller.
    pub fn check_node(&self, node: i64) -> Result<usize> {
        usize::try_from(node)
            .ok()
            .filter(|&n| n < self.trie.n_nodes())
            .ok_or(KernelError::NodeOutOfRange {
                node,
                n_nodes: self.trie.n_nodes(),
            })
    }

    /// The walk below `node` (`walk_from`), checked.
    pub fn walk(
        &self,
        node: i64,
        pending: &[u8],
        allowed: &[u64],
        include_self: bool,
    ) -> Result<WalkOutput> {
        let (node, allowed) = self.check_walk(node, allowed)?;
        Ok(walk_from(
            &self.grammar,
            &self.trie,
            node,
            pending,
            &allowed,
            include_self,
        ))
    }

    /// A caller's trie node and allowed set, checked; the set widened to the
    /// grammar's width.
    pub fn check_walk(&self, node: i64, allowed: &[u64]) -> Result<(usize, Vec<u64>)> {
        let node = self.check_node(node)?;
        let n_bits = self.grammar.n_terminals() + 1;
        let bit_len = crate::bits::bit_len(allowed);
        if bit_len > n_bits {
            return Err(KernelError::InvalidAllowed { bit_len, n_bits });
        }
        let mut allowed = allowed.to_vec();
        allowed.resize(self.grammar.width(), 0);
        Ok((node, allowed))
    }

    /// A fresh arena over these tables.
    pub fn arena(&self) -> StackArena {
        StackArena::new(Arc::clone(&self.grammar))
    }

    /// The configuration of a stack and remainder from a caller.
    pub fn config(
        &self,
        arena: &mut StackArena,
        states: &[i64],
        remainder: &[u8],
    ) -> Result<Config> {
        let node = arena.from_states(states)?;
        let scan = self
            .grammar
            .scan(remainder)
            .ok_or_else(|| KernelError::InvalidRemainder {
                remainder: remainder.to_vec(),
            })?;
        Ok(Config {
            node,
            remainder: remainder.to_vec(),
            scan,
        })
    }

    /// The exact mask of a configuration (see the module header).
    pub fn compute_mask(&self, arena: &mut StackArena, config: &Config) -> Result<MaskOutput> {
        let g = &*self.grammar;
        let trie = &*self.trie;
        let allowed = arena.allowed(config.node)?.to_vec();
        let root = walk_from(g, trie, 0, &config.remainder, &allowed, false);
        let mut out = MaskOutput {
            ci_nodes: root.ci.clone(),
            cd_entries: root.cd.len(),
            ..MaskOutput::default()
        };
        // A level: stacks in order of first appearance, each with its entries.
        let mut level: Vec<(NodeId, Vec<Pending>)> = Vec::new();
        if !root.cd.is_empty() {
            level.push((config.node, pending_of(&root).collect()));
        }
        let mut slot = vec![usize::MAX; g.n_terminals()];
        while !level.is_empty() {
            let mut deeper: Vec<(NodeId, Vec<Pending>)> = Vec::new();
            let mut deeper_slot: HashMap<NodeId, usize> = HashMap::new();
            for (node, entries) in &level {
                // Classes in order of first appearance: (terminal, entry indices).
                let mut classes: Vec<(u32, Vec<usize>)> = Vec::new();
                for (k, e) in entries.iter().enumerate() {
                    let t = e.terminal as usize;
                    if slot[t] == usize::MAX {
                        slot[t] = classes.len();
                        classes.push((e.terminal, Vec::new()));
                    }
                    classes[slot[t]].1.push(k);
                }
                for (t, _) in &classes {
                    slot[*t as usize] = usize::MAX;
                }
                out.cd_classes += classes.len();
                for (t, members) in classes {
                    let shifted = arena.shift(*node, t as usize)?;
                    let mut a = g.allowed_sets(arena.allowed(shifted)?);
                    for k in members {
                        let e = &entries[k];
                        let sub = e.node as usize;
                        let mut more = WalkOutput::default();
                        walk_into(g, trie, sub, &e.tail, &mut a, sub != 0, None, &mut more);
                        out.cd_nodes.extend_from_slice(&more.ci);
                        out.cd_walk_ends.push(out.cd_nodes.len() as u32);
                        if !more.cd.is_empty() {
                            out.cd_entries += more.cd.len();
                            let at = *deeper_slot.entry(shifted).or_insert_with(|| {
                                deeper.push((shifted, Vec::new()));
                                deeper.len() - 1
                            });
                            deeper[at].1.extend(pending_of(&more));
                        }
                    }
                }
            }
            level = deeper;
        }
        out.eos = g.eos_allowed(arena, config)?;
        Ok(out)
    }
}
