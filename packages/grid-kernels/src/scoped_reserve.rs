//! Mode 1's reserve over the scoped language: grid-sql's `ScopedReserve`,
//! natively.
//!
//! A scope lexicon's reserve ([`crate::reserve::Reserve`] over that lexicon's
//! engine, its grammar-level tables from [`ScopedEngines`]' provider) prices a
//! completion in that scope's words, but the scope changes while the
//! completion is written, so a state's completion is *simulated* through the
//! scoped lexer (`ScopedReserve._simulate`, rule for rule): the plan of the
//! state's scope lexicon, token by token; where the scoped lexer refuses a
//! token, the plan is recomputed in the scope reached (a first token whose
//! space ends the pending lexeme is written as the space alone first); where a
//! scope's plan cannot complete at all, the pending lexeme is finished with a
//! blank (`_end_pending`). The reserve is the simulated completion's length,
//! [`INF`] where none is written ([`MAX_ENDED`] finishes in a row, no progress,
//! or more than [`MAX_COMPLETION`] tokens). Completions are memoized per state
//! (its stack's LALR states, scope and remainder) in the engines, at most
//! [`MEMO_STATES`] of them (then emptied), as grid-sql memoizes them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::engine::{lock, Stacks};
use crate::error::{KernelError, Result};
use crate::lexer::Config;
use crate::parser::{NodeId, StackArena};
use crate::reserve::{split, INF};
use crate::scanner::Scan;
use crate::scope::ScopeId;
use crate::scoped::ScopedEngines;

/// Tokens a completion may take before it counts as none (`MAX_COMPLETION`).
pub const MAX_COMPLETION: usize = 4_096;
/// Pending lexemes finished in a row before a state counts as stuck (`MAX_ENDED`).
pub const MAX_ENDED: usize = 4;
/// States whose completion the memo holds before it is emptied (`MEMO_STATES`).
pub const MEMO_STATES: usize = 100_000;

/// A state of the scoped lexer: stack, scope, remainder and its scan state in
/// its scope's engine.
#[derive(Clone, Debug)]
pub struct ScopedState {
    pub node: NodeId,
    pub scope: ScopeId,
    pub remainder: Vec<u8>,
    pub scan: Scan,
}

/// The memo key of a state (generation-free: node ids name stacks within one
/// arena generation only).
type StateKey = (Vec<u32>, ScopeId, Vec<u8>);

/// The reserve source of one arena generation (`ScopedReserve`).
#[derive(Debug)]
pub struct ScopedReserve {
    engines: Arc<ScopedEngines>,
    stacks: Arc<Mutex<Stacks>>,
}

/// The completions memo, shared by the reserves of one [`ScopedEngines`].
pub type Completions = Mutex<HashMap<StateKey, Option<Arc<[u32]>>>>;

impl ScopedReserve {
    pub fn new(engines: Arc<ScopedEngines>, stacks: Arc<Mutex<Stacks>>) -> Self {
        Self { engines, stacks }
    }

    /// The arena generation its states' stack nodes live in: a state is this
    /// reserve's to price only if it was made in it.
    pub fn stacks(&self) -> &Arc<Mutex<Stacks>> {
        &self.stacks
    }

    /// The state after `token` (`ScopedReserve.advance`); None where the
    /// scoped lexer refuses it.
    pub fn advance(&self, state: &ScopedState, token: u32) -> Result<Option<ScopedState>> {
        let trie = &self.engines.base().tables.trie;
        let n_vocab = trie.n_vocab();
        if token as usize >= n_vocab {
            let token = i64::from(token);
            return Err(KernelError::TokenOutOfRange { token, n_vocab });
        }
        let arena = &mut lock(&self.stacks).arena;
        self.step(arena, state, trie.spelling(token as usize))
    }

    fn step(
        &self,
        arena: &mut StackArena,
        s: &ScopedState,
        data: &[u8],
    ) -> Result<Option<ScopedState>> {
        let mut buf = s.remainder.clone();
        let from = buf.len();
        buf.extend_from_slice(data);
        let read = self
            .engines
            .read(arena, (s.node, s.scope, 0, s.scan), &buf, from)?;
        Ok(read.map(|(node, scope, start, scan)| ScopedState {
            node,
            scope,
            remainder: buf[start..].to_vec(),
            scan,
        }))
    }

    /// The completion's length, [`INF`] where none is written.
    pub fn reserve(&self, state: &ScopedState) -> Result<u64> {
        Ok(self.completion(state)?.map_or(INF, |c| c.len() as u64))
    }

    /// The tokens of the completion (EOS not included), None where none is written.
    pub fn completion(&self, state: &ScopedState) -> Result<Option<Arc<[u32]>>> {
        let key: StateKey = {
            let arena = &lock(&self.stacks).arena;
            (
                arena.states(state.node),
                state.scope,
                state.remainder.clone(),
            )
        };
        let memo = self.engines.completions();
        if let Some(got) = lock(memo).get(&key) {
            return Ok(got.clone());
        }
        let got = self.simulate(state.clone())?.map(Arc::from);
        let mut memo = lock(memo);
        if memo.len() >= MEMO_STATES {
            memo.clear();
        }
        memo.insert(key, got.clone());
        Ok(got)
    }

    fn eos_allowed(&self, arena: &mut StackArena, s: &ScopedState) -> Result<bool> {
        Ok(
            match self
                .engines
                .finalize(arena, (s.node, s.scope), &s.remainder)?
            {
                Some(node) => arena.accepts(node)?,
                None => false,
            },
        )
    }

    /// `ScopedReserve._simulate`; None where it raises `ReserveError`.
    fn simulate(&self, mut state: ScopedState) -> Result<Option<Vec<u32>>> {
        let engines = &self.engines;
        let trie = Arc::clone(&engines.base().tables.trie);
        let mut out: Vec<u32> = Vec::new();
        let mut ended_in_a_row = 0;
        loop {
            let (table, config) = {
                let arena = &mut lock(&self.stacks).arena;
                if self.eos_allowed(arena, &state)? {
                    return Ok(Some(out));
                }
                let se = engines.scope_engine(state.scope, arena.allowed(state.node)?)?;
                let config = Config {
                    node: state.node,
                    remainder: state.remainder.clone(),
                    scan: state.scan,
                };
                (engines.reserve_of(&se)?, config)
            };
            if table.reserve(&self.stacks, &config)? >= INF {
                ended_in_a_row += 1;
                let ended = self.end_pending(&table, &config, &state)?;
                match ended {
                    Some((tokens, after)) if ended_in_a_row <= MAX_ENDED => {
                        out.extend(tokens);
                        state = after;
                        continue;
                    }
                    _ => return Ok(None),
                }
            }
            ended_in_a_row = 0;
            let mut taken = 0;
            let plan = table.completion(&self.stacks, &config)?.unwrap_or_default();
            for mut token in plan {
                let arena = &mut lock(&self.stacks).arena;
                let mut after = self.step(arena, &state, trie.spelling(token as usize))?;
                if after.is_none()
                    && taken == 0
                    && trie.spelling(token as usize).first() == Some(&b' ')
                {
                    // The piece's space ends the pending lexeme, whose emission
                    // changes the scope its next word is judged in: write the
                    // space alone, then plan in the new scope.
                    let space = split(&trie, b" ").expect("a space is a token");
                    token = space[0];
                    after = self.step(arena, &state, trie.spelling(token as usize))?;
                }
                let Some(next) = after else {
                    break;
                };
                out.push(token);
                state = next;
                taken += 1;
            }
            if taken == 0 || out.len() > MAX_COMPLETION {
                return Ok(None);
            }
        }
    }

    /// Finish the pending lexeme and end it with a blank (`_end_pending`): the
    /// tokens and the state after them, or None.
    fn end_pending(
        &self,
        table: &crate::reserve::Reserve,
        config: &Config,
        state: &ScopedState,
    ) -> Result<Option<(Vec<u32>, ScopedState)>> {
        if config.remainder.is_empty() {
            return Ok(None);
        }
        let trie = Arc::clone(&self.engines.base().tables.trie);
        let suffixes = table.finish_suffixes(&self.stacks, config.scan.q, config.scan.ln);
        for suffix in suffixes {
            for blank in [b' ', b'\n'] {
                let mut text = suffix.clone();
                text.push(blank);
                let Some(tokens) = split(&trie, &text) else {
                    continue;
                };
                let arena = &mut lock(&self.stacks).arena;
                let mut at = Some(state.clone());
                for &token in &tokens {
                    at = match at {
                        Some(s) => self.step(arena, &s, trie.spelling(token as usize))?,
                        None => None,
                    };
                }
                if let Some(at) = at {
                    return Ok(Some((tokens, at)));
                }
            }
        }
        Ok(None)
    }
}
