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
        arena: &mut StackArena,
        node: NodeId,
        scan: &Scan,
    ) -> Result<Option<NodeId>> {
        Ok(self.emit_pick(arena, node, scan)?.map(|(node, _)| node))
    }

    /// [`Self::emit`], with the terminal picked.
    pub fn emit_pick(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: &Scan,
    ) -> Result<Option<(NodeId, u32)>> {
        if scan.la_len == 0 {
            return Ok(None);
        }
        let allowed = arena.allowed(node)?;
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&self.lexing.ignored)
            .map(|(a, i)| a | i)
            .collect();
        let Some(t) = self.pick(scan, &ok) else {
            return Ok(None);
        };
        if self.is_ignored(t as usize) {
            return Ok(Some((node, t)));
        }
        Ok(Some((arena.shift(node, t as usize)?, t)))
    }

    /// The configuration after reading `data`, or `None` if it leaves the
    /// language (`Lexer.advance`).
    pub fn advance(
        &self,
        arena: &mut StackArena,
        config: &Config,
        data: &[u8],
    ) -> Result<Option<Config>> {
        let mut buf = Vec::with_capacity(config.remainder.len() + data.len());
        buf.extend_from_slice(&config.remainder);
        buf.extend_from_slice(data);
        let read = self.read(
            arena,
            config.node,
            config.scan,
            &buf,
            0,
            config.remainder.len(),
        )?;
        Ok(read.map(|(node, start, scan)| {
            buf.drain(..start);
            Config {
                node,
                remainder: buf,
                scan,
            }
        }))
    }

    /// [`GrammarTables::advance`] on a buffer, without copying it: the
    /// configuration `(node, buf[start..from], scan)` reads `buf[from..]`.
    /// Returns the new stack, the start of the new remainder in `buf` (it runs
    /// to the end) and its scan state, or `None` if the bytes leave the
    /// language. Precondition: `scan` is the scan state of `buf[start..from]`.
    pub fn read(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: Scan,
        buf: &[u8],
        start: usize,
        from: usize,
    ) -> Result<Option<(NodeId, usize, Scan)>> {
        self.read_with(arena, node, scan, buf, start, from, |_, _, _| {})
    }

    /// [`Self::read`], reporting each emission to `on_emit(terminal, start,
    /// end)` (offsets in `buf`; ignored terminals included), in order. A read
    /// that ends in `None` may have reported emissions before it failed.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn read_with(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: Scan,
        buf: &[u8],
        start: usize,
        from: usize,
        mut on_emit: impl FnMut(u32, usize, usize),
    ) -> Result<Option<(NodeId, usize, Scan)>> {
        let (mut node, mut scan, mut start, mut i) = (node, scan, start, from);
        while i < buf.len() {
            if let Some(next) = self.step(scan, (i + 1 - start) as u32, buf[i]) {
                scan = next;
                i += 1;
                continue;
            }
            let Some((emitted, t)) = self.emit_pick(arena, node, &scan)? else {
                return Ok(None);
            };
            on_emit(t, start, start + scan.la_len as usize);
            node = emitted;
            start += scan.la_len as usize;
            i = start;
            scan = START;
        }
        Ok(Some((node, start, scan)))
    }

    /// The emissions that finalize the remainder `buf[start..]` (scan state
    /// `scan`) at stack `node`, reported as [`Self::read_with`] does; `false`
    /// when it does not finalize (`Lexer.finalize`, for the event stream).
    pub fn finalize_with(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: Scan,
        buf: &[u8],
        start: usize,
        mut on_emit: impl FnMut(u32, usize, usize),
    ) -> Result<bool> {
        let (mut node, mut scan, mut start) = (node, scan, start);
        while start < buf.len() {
            let Some((emitted, t)) = self.emit_pick(arena, node, &scan)? else {
                return Ok(false);
            };
            let end = start + scan.la_len as usize;
            on_emit(t, start, end);
            match self.read_with(arena, emitted, START, buf, end, end, &mut on_emit)? {
                Some((n, s, sc)) => (node, start, scan) = (n, s, sc),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The stack once the remainder is lexed to the end of input, or `None`
    /// (`Lexer.finalize`), of `(node, remainder, scan)` without copying the
    /// remainder: the first emission reads only the scan state, so a remainder
    /// whose last accept no stack can take (an open string literal) is refused
    /// in O(1), whatever its length (requirement R); only the tail after an
    /// emission is copied and read again.
    pub fn finalize(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: &Scan,
        remainder: &[u8],
    ) -> Result<Option<NodeId>> {
        if remainder.is_empty() {
            return Ok(Some(node));
        }
        let Some(emitted) = self.emit(arena, node, scan)? else {
            return Ok(None);
        };
        let fresh = Config {
            node: emitted,
            remainder: Vec::new(),
            scan: START,
        };
        match self.advance(arena, &fresh, &remainder[scan.la_len as usize..])? {
            Some(after) => self.finalize(arena, after.node, &after.scan, &after.remainder),
            None => Ok(None),
        }
    }

    /// The remainder (empty or with scan state `scan`) is live under the
    /// stack's allowed set (`Lexer.is_viable`).
    pub fn is_viable(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: &Scan,
        empty: bool,
    ) -> Result<bool> {
        if empty {
            return Ok(true);
        }
        let allowed = arena.allowed(node)?;
        Ok(self.live_under(scan.q, scan.ln, allowed))
    }

    /// EOS gate: the remainder finalizes and `$END` then reaches ACCEPT
    /// (`Lexer.eos_allowed`).
    pub fn eos_allowed(&self, arena: &mut StackArena, config: &Config) -> Result<bool> {
        self.eos_allowed_at(arena, config.node, &config.scan, &config.remainder)
    }

    /// [`Self::eos_allowed`] of `(node, remainder, scan)`, the remainder borrowed.
    pub fn eos_allowed_at(
        &self,
        arena: &mut StackArena,
        node: NodeId,
        scan: &Scan,
        remainder: &[u8],
    ) -> Result<bool> {
        match self.finalize(arena, node, scan, remainder)? {
            Some(node) => arena.accepts(node),
            None => Ok(false),
        }
    }
}
