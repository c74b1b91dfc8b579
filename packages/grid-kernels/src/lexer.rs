//! Advancing configurations: the scanner driving the parser.
//!
//! Mirrors `grid_core.lexer.Lexer`. A **configuration** is (stack node,
//! remainder, scan state of the remainder). Reading bytes scans them; a byte
//! that kills the automaton emits the last accepted lexeme with its pick under
//! the stack's allowed set (an ignored pick leaves the stack, another shifts)
//! and requeues the bytes after it. The EOS gate: the remainder *finalizes*
//! (lexes to the end of input with viable picks) and `$END` then reaches ACCEPT.

use crate::error::Result;
use crate::parser::{NodeId, StackArena};
use crate::scanner::{Scan, START};
use crate::tables::GrammarTables;

/// A configuration (DESIGN.md section 5) over a [`StackArena`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub node: NodeId,
    pub remainder: Vec<u8>,
    pub scan: Scan,
}

impl GrammarTables {
    /// Emit the last accepted lexeme of a remainder: the new stack, or `None`
    /// when there is none or no candidate is viable (`Lexer._emit`).
    pub fn emit(
        &self,
        arena: &mut StackArena<'_>,
        node: NodeId,
        scan: &Scan,
    ) -> Result<Option<NodeId>> {
        if scan.la_len == 0 {
            return Ok(None);
        }
        let allowed = arena.allowed(node)?;
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&self.ignored)
            .map(|(a, i)| a | i)
            .collect();
        let Some(t) = self.pick(scan, &ok) else {
            return Ok(None);
        };
        if self.is_ignored(t as usize) {
            return Ok(Some(node));
        }
        arena.shift(node, t as usize).map(Some)
    }

    /// The configuration after reading `data`, or `None` if it leaves the
    /// language (`Lexer.advance`).
    pub fn advance(
        &self,
        arena: &mut StackArena<'_>,
        config: &Config,
        data: &[u8],
    ) -> Result<Option<Config>> {
        let mut node = config.node;
        let mut scan = config.scan;
        let mut buf = Vec::with_capacity(config.remainder.len() + data.len());
        buf.extend_from_slice(&config.remainder);
        buf.extend_from_slice(data);
        let (mut start, mut i) = (0usize, config.remainder.len());
        while i < buf.len() {
            if let Some(next) = self.step(scan, (i + 1 - start) as u32, buf[i]) {
                scan = next;
                i += 1;
                continue;
            }
            let Some(emitted) = self.emit(arena, node, &scan)? else {
                return Ok(None);
            };
            node = emitted;
            start += scan.la_len as usize;
            i = start;
            scan = START;
        }
        buf.drain(..start);
        Ok(Some(Config {
            node,
            remainder: buf,
            scan,
        }))
    }

    /// The stack once the remainder is lexed to the end of input, or `None`
    /// (`Lexer.finalize`).
    pub fn finalize(&self, arena: &mut StackArena<'_>, config: &Config) -> Result<Option<NodeId>> {
        let mut config = config.clone();
        while !config.remainder.is_empty() {
            let Some(emitted) = self.emit(arena, config.node, &config.scan)? else {
                return Ok(None);
            };
            let tail = config.remainder[config.scan.la_len as usize..].to_vec();
            let fresh = Config {
                node: emitted,
                remainder: Vec::new(),
                scan: START,
            };
            let Some(after) = self.advance(arena, &fresh, &tail)? else {
                return Ok(None);
            };
            config = after;
        }
        Ok(Some(config.node))
    }

    /// EOS gate: the remainder finalizes and `$END` then reaches ACCEPT
    /// (`Lexer.eos_allowed`).
    pub fn eos_allowed(&self, arena: &mut StackArena<'_>, config: &Config) -> Result<bool> {
        match self.finalize(arena, config)? {
            Some(node) => arena.accepts(node),
            None => Ok(false),
        }
    }
}
