//! Thompson NFAs of terminal patterns: stage 1 of grid-core's union DFA, from
//! the *pattern program* `grid_core.regex_bytes` writes, state for state the
//! NFA of its reference builder (`_Thompson`).
//!
//! The program is Python's `re` parse tree with the flags already applied to
//! every byte set, as a flat `i32` array of nodes:
//!
//! | node            | layout                          |
//! |-----------------|---------------------------------|
//! | byte edge       | `BYTE, m` (row `m` of the masks) |
//! | sequence        | `SEQ, n, node_1 .. node_n`      |
//! | alternation     | `BRANCH, k, seq_1 .. seq_k`     |
//! | counted repeat  | `REPEAT, low, high, seq` (`high` -1: unbounded) |
//!
//! The whole pattern is one `SEQ`. Construction (Thompson; the fragment form
//! of Aho, Lam, Sethi, Ullman, section 3.7.4) allocates states in exactly the
//! reference's order: a sequence takes an entry state, then its nodes' fragments
//! joined by ε-edges; a byte edge two states; an alternation an entry and an
//! exit around its alternatives; `x{m,n}` an entry, `m` copies of `x`, then a
//! `done` state and `n - m` optional copies (an unbounded repeat: a hub and one
//! copy looping through it). A fresh final state follows. More than
//! `max_states` states is [`Refusal::TooManyStates`], checked at each
//! allocation like the reference.
//!
//! Then the NFA is trimmed (every state reachable from the start and reaching
//! the final state, an edge with the empty byte set counting as none) and
//! renumbered in increasing old order; the reference's two refusals are checked
//! first: the final state in the ε-closure of the start
//! ([`Refusal::MatchesEmpty`]), the final state unreachable
//! ([`Refusal::EmptyLanguage`]). The output is `grid_core.regex_bytes.ByteNFA`'s
//! flat layout: the byte sets deduplicated in order of first use.
//!
//! A malformed program (an unknown node, a count or index out of range, a
//! program that does not end where its `SEQ` does) is
//! [`KernelError::InvalidTables`].

use std::collections::HashMap;

use crate::error::{KernelError, Result};

/// Node tags of the pattern program.
pub const BYTE: i32 = 0;
pub const SEQ: i32 = 1;
pub const BRANCH: i32 = 2;
pub const REPEAT: i32 = 3;

/// Why a well-formed pattern has no NFA (grid-core's `PatternError` reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// More than `max_states` states before trimming.
    TooManyStates,
    /// The language holds the empty string.
    MatchesEmpty,
    /// The language over bytes is empty.
    EmptyLanguage,
}

/// A trimmed NFA in `ByteNFA`'s flat layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nfa {
    pub start: u32,
    pub final_state: u32,
    /// Per state: how many ε-successors it has (they follow in `eps_targets`).
    pub eps_len: Vec<u32>,
    pub eps_targets: Vec<u32>,
    /// Per state: its byte edge's row of `masks`, or -1.
    pub edge_mask: Vec<i32>,
    /// Per state: its byte edge's target, or -1.
    pub edge_target: Vec<i32>,
    /// The distinct byte sets of the edges (32 bytes, little-endian), in order of first use.
    pub masks: Vec<[u8; 32]>,
}

enum Fail {
    Refused(Refusal),
    Bad(String),
}

impl From<Refusal> for Fail {
    fn from(r: Refusal) -> Self {
        Fail::Refused(r)
    }
}

type Step<T> = std::result::Result<T, Fail>;

struct Builder<'p> {
    program: &'p [i32],
    n_masks: usize,
    max_states: usize,
    eps: Vec<Vec<u32>>,
    /// Per state: `(mask row, target)` of its byte edge.
    edge: Vec<Option<(u32, u32)>>,
}

impl Builder<'_> {
    fn at(&self, pos: usize) -> Step<i32> {
        self.program
            .get(pos)
            .copied()
            .ok_or_else(|| Fail::Bad(format!("the program ends at {pos}, inside a node")))
    }

    fn count(&self, pos: usize, what: &str) -> Step<usize> {
        let v = self.at(pos)?;
        usize::try_from(v).map_err(|_| Fail::Bad(format!("{what} {v} at {pos} is negative")))
    }

    fn state(&mut self) -> Step<u32> {
        if self.eps.len() >= self.max_states {
            return Err(Refusal::TooManyStates.into());
        }
        self.eps.push(Vec::new());
        self.edge.push(None);
        Ok((self.eps.len() - 1) as u32)
    }

    /// The position after the node at `pos`, nothing built.
    fn skip(&self, pos: usize) -> Step<usize> {
        match self.at(pos)? {
            BYTE => Ok(pos + 2),
            SEQ | BRANCH => {
                let n = self.count(pos + 1, "a length")?;
                (0..n).try_fold(pos + 2, |p, _| self.skip(p))
            }
            REPEAT => self.skip(pos + 3),
            op => Err(Fail::Bad(format!("unknown node {op} at {pos}"))),
        }
    }

    /// The fragment `(entry, exit)` of the `SEQ` at `pos`, and the position after it.
    fn sequence(&mut self, pos: usize) -> Step<(u32, u32, usize)> {
        if self.at(pos)? != SEQ {
            return Err(Fail::Bad(format!("a sequence was expected at {pos}")));
        }
        let n = self.count(pos + 1, "a length")?;
        let entry = self.state()?;
        let mut exit = entry;
        let mut p = pos + 2;
        for _ in 0..n {
            let (first, last, next) = self.node(p)?;
            self.eps[exit as usize].push(first);
            exit = last;
            p = next;
        }
        Ok((entry, exit, p))
    }

    fn node(&mut self, pos: usize) -> Step<(u32, u32, usize)> {
        match self.at(pos)? {
            BYTE => {
                let m = self.count(pos + 1, "a mask row")?;
                if m >= self.n_masks {
                    return Err(Fail::Bad(format!("mask row {m} of {}", self.n_masks)));
                }
                let (entry, exit) = (self.state()?, self.state()?);
                self.edge[entry as usize] = Some((m as u32, exit));
                Ok((entry, exit, pos + 2))
            }
            SEQ => self.sequence(pos),
            BRANCH => {
                let k = self.count(pos + 1, "a length")?;
                let (entry, exit) = (self.state()?, self.state()?);
                let mut p = pos + 2;
                for _ in 0..k {
                    let (first, last, next) = self.sequence(p)?;
                    self.eps[entry as usize].push(first);
                    self.eps[last as usize].push(exit);
                    p = next;
                }
                Ok((entry, exit, p))
            }
            REPEAT => self.repeat(pos),
            op => Err(Fail::Bad(format!("unknown node {op} at {pos}"))),
        }
    }

    fn repeat(&mut self, pos: usize) -> Step<(u32, u32, usize)> {
        let low = self.count(pos + 1, "a repeat's low bound")?;
        let high = self.at(pos + 2)?;
        if high != -1 && (high < 0 || (high as usize) < low) {
            return Err(Fail::Bad(format!("repeat bounds {low}, {high} at {pos}")));
        }
        let sub = pos + 3;
        let end = self.skip(sub)?;
        let entry = self.state()?;
        let mut exit = entry;
        for _ in 0..low {
            let (first, last, _) = self.sequence(sub)?;
            self.eps[exit as usize].push(first);
            exit = last;
        }
        if high == -1 {
            let hub = self.state()?;
            let (first, last, _) = self.sequence(sub)?;
            self.eps[exit as usize].push(hub);
            self.eps[hub as usize].push(first);
            self.eps[last as usize].push(hub);
            return Ok((entry, hub, end));
        }
        let done = self.state()?;
        for _ in low..high as usize {
            let (first, last, _) = self.sequence(sub)?;
            self.eps[exit as usize].extend([done, first]);
            exit = last;
        }
        self.eps[exit as usize].push(done);
        Ok((entry, done, end))
    }

    fn reach(&self, origin: u32, succ: &[Vec<u32>]) -> Vec<bool> {
        let mut seen = vec![false; succ.len()];
        seen[origin as usize] = true;
        let mut stack = vec![origin];
        while let Some(q) = stack.pop() {
            for &r in &succ[q as usize] {
                if !seen[r as usize] {
                    seen[r as usize] = true;
                    stack.push(r);
                }
            }
        }
        seen
    }

    /// Check the refusals, trim and renumber (the module header).
    fn finish(&self, start: u32, final_state: u32, rows: &[[u8; 32]]) -> Step<Nfa> {
        let n = self.eps.len();
        let live_edge = |q: usize| self.edge[q].filter(|&(m, _)| rows[m as usize] != [0; 32]);
        let mut succ = self.eps.clone();
        let mut pred: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (q, out) in succ.iter_mut().enumerate() {
            if let Some((_, target)) = live_edge(q) {
                out.push(target);
            }
            for &r in out.iter() {
                pred[r as usize].push(q as u32);
            }
        }
        if self.reach(start, &self.eps)[final_state as usize] {
            return Err(Refusal::MatchesEmpty.into());
        }
        let reachable = self.reach(start, &succ);
        if !reachable[final_state as usize] {
            return Err(Refusal::EmptyLanguage.into());
        }
        let coreachable = self.reach(final_state, &pred);
        let mut new = vec![u32::MAX; n];
        let mut kept = 0u32;
        for q in 0..n {
            if reachable[q] && coreachable[q] {
                new[q] = kept;
                kept += 1;
            }
        }
        let mut out = Nfa {
            start: new[start as usize],
            final_state: new[final_state as usize],
            eps_len: Vec::with_capacity(kept as usize),
            eps_targets: Vec::new(),
            edge_mask: Vec::with_capacity(kept as usize),
            edge_target: Vec::with_capacity(kept as usize),
            masks: Vec::new(),
        };
        let mut row_of: HashMap<[u8; 32], i32> = HashMap::new();
        for q in (0..n).filter(|&q| new[q] != u32::MAX) {
            let before = out.eps_targets.len();
            let kept_eps = self.eps[q].iter().map(|&r| new[r as usize]);
            out.eps_targets.extend(kept_eps.filter(|&r| r != u32::MAX));
            out.eps_len.push((out.eps_targets.len() - before) as u32);
            match live_edge(q).filter(|&(_, t)| new[t as usize] != u32::MAX) {
                Some((m, target)) => {
                    let row = rows[m as usize];
                    let next = row_of.len() as i32;
                    let index = *row_of.entry(row).or_insert_with(|| {
                        out.masks.push(row);
                        next
                    });
                    out.edge_mask.push(index);
                    out.edge_target.push(new[target as usize] as i32);
                }
                None => {
                    out.edge_mask.push(-1);
                    out.edge_target.push(-1);
                }
            }
        }
        Ok(out)
    }
}

/// The trimmed NFA of the pattern `program` over the byte sets `rows`, or the
/// refusal the reference raises (module header).
pub fn thompson(
    program: &[i32],
    rows: &[[u8; 32]],
    max_states: usize,
) -> Result<std::result::Result<Nfa, Refusal>> {
    let mut b = Builder {
        program,
        n_masks: rows.len(),
        max_states,
        eps: Vec::new(),
        edge: Vec::new(),
    };
    let built = (|| -> Step<Nfa> {
        let (start, exit, end) = b.sequence(0)?;
        if end != program.len() {
            return Err(Fail::Bad(format!(
                "the pattern's sequence ends at {end} of {}",
                program.len()
            )));
        }
        let final_state = b.state()?;
        b.eps[exit as usize].push(final_state);
        b.finish(start, final_state, rows)
    })();
    match built {
        Ok(nfa) => Ok(Ok(nfa)),
        Err(Fail::Refused(r)) => Ok(Err(r)),
        Err(Fail::Bad(detail)) => Err(KernelError::InvalidTables {
            table: "pattern program",
            detail,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(bytes: &[u8]) -> [u8; 32] {
        let mut r = [0u8; 32];
        for &b in bytes {
            r[b as usize / 8] |= 1 << (b % 8);
        }
        r
    }

    #[test]
    fn one_byte() {
        // "a": SEQ[BYTE 0]; states: seq entry 0, edge 1 -a-> 2, final 3.
        let nfa = thompson(&[SEQ, 1, BYTE, 0], &[row(b"a")], 100)
            .unwrap()
            .unwrap();
        assert_eq!((nfa.start, nfa.final_state), (0, 3));
        assert_eq!(nfa.eps_len, vec![1, 0, 1, 0]);
        assert_eq!(nfa.eps_targets, vec![1, 3]);
        assert_eq!(nfa.edge_mask, vec![-1, 0, -1, -1]);
        assert_eq!(nfa.edge_target, vec![-1, 2, -1, -1]);
        assert_eq!(nfa.masks, vec![row(b"a")]);
    }

    #[test]
    fn refusals() {
        let a = [row(b"a"), [0; 32]];
        // a* matches the empty string.
        let star = [SEQ, 1, REPEAT, 0, -1, SEQ, 1, BYTE, 0];
        assert_eq!(
            thompson(&star, &a, 100).unwrap(),
            Err(Refusal::MatchesEmpty)
        );
        // [^\x00-\xff]: the empty byte set.
        let none = [SEQ, 1, BYTE, 1];
        assert_eq!(
            thompson(&none, &a, 100).unwrap(),
            Err(Refusal::EmptyLanguage)
        );
        // a{50} needs 1 + 1 + 50 * 3 + 1 states.
        let fifty = [SEQ, 1, REPEAT, 50, 50, SEQ, 1, BYTE, 0];
        assert_eq!(
            thompson(&fifty, &a, 150).unwrap(),
            Err(Refusal::TooManyStates)
        );
        assert!(thompson(&fifty, &a, 155).unwrap().is_ok());
    }

    #[test]
    fn dead_alternatives_are_trimmed() {
        // a[^\x00-\xff]b|ac: the first alternative dies after "a".
        let rows = [row(b"a"), [0; 32], row(b"b"), row(b"c")];
        let alt1 = [SEQ, 3, BYTE, 0, BYTE, 1, BYTE, 2];
        let alt2 = [SEQ, 2, BYTE, 0, BYTE, 3];
        let program: Vec<i32> = [&[SEQ, 1, BRANCH, 2][..], &alt1, &alt2].concat();
        let nfa = thompson(&program, &rows, 100).unwrap().unwrap();
        assert_eq!(nfa.masks, vec![row(b"a"), row(b"c")]);
        assert!(!nfa.masks.contains(&row(b"b")));
    }

    #[test]
    fn malformed_programs_are_errors() {
        let a = [row(b"a")];
        for program in [
            &[SEQ, 2, BYTE, 0][..],
            &[SEQ, 1, BYTE, 1],
            &[SEQ, 1, 9, 0],
            &[SEQ, 1, BYTE, 0, BYTE, 0],
            &[BYTE, 0],
            &[SEQ, 1, REPEAT, 2, 1, SEQ, 0],
            &[SEQ, -1],
        ] {
            assert!(thompson(program, &a, 100).is_err(), "{program:?}");
        }
    }
}
