//! The trie walk: the exact mask of a configuration, split into CI and CD parts.
//!
//! Mirrors `grid_core.walk.walk_from` node for node and in the same order, so
//! that its results are bit-identical (DESIGN.md section 6). A depth-first
//! search over the token trie below `node` carries the scan state of the
//! remainder in every frame. At each trie node the byte on its edge is scanned:
//!
//! - the automaton lives on: the token ending here is admitted (CI) iff the new
//!   remainder is live under A; the subtree is entered iff the remainder is live
//!   or its last accepted lexeme has a viable pick. Otherwise the subtree is
//!   skipped whole: rejection is monotone under extension.
//! - the byte kills the automaton: the last accepted lexeme is emitted. No
//!   accepted prefix, or no viable pick, rejects the subtree. An ignored pick
//!   leaves the stack unchanged and the walk continues inline on the requeued
//!   tail; any other pick makes the subtree one **CD entry** `(node, terminal,
//!   tail)`, decided later against the stack after the shift.
//!
//! Frame contract (the explicit DFS stack; one frame per trie node whose
//! children are being visited):
//!   push(c)   enter c's children with the scan state after c's byte
//!   next      cursor <- cursor + size[cursor]   (skip the visited subtree)
//!   pop       cursor reached the end of the frame's subtree
//!
//! Bytes: one buffer holds the pending remainder followed by the trie path, the
//! byte of a node at depth d at `pending.len() + d`. Every frame's remainder is
//! a suffix of that buffer ending at its children's position (`rstart..pos`),
//! so lengths and tails are offsets and nothing is copied while walking; only
//! CD tails are copied out.

use crate::scanner::{Allowed, Rescan, Scan};
use crate::tables::GrammarTables;
use crate::trie::Trie;

/// One CD entry: the subtree at `node`, whose bytes emit `terminal` and requeue
/// `tails[tail_start..tail_end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CdEntry {
    pub node: u32,
    pub terminal: u32,
    pub tail_start: u32,
    pub tail_end: u32,
}

/// CI nodes and CD entries of one walk, in `walk_from`'s order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkOutput {
    pub ci: Vec<u32>,
    pub cd: Vec<CdEntry>,
    /// The CD entries' tails, concatenated.
    pub tails: Vec<u8>,
}

impl WalkOutput {
    pub fn tail(&self, e: &CdEntry) -> &[u8] {
        &self.tails[e.tail_start as usize..e.tail_end as usize]
    }

    fn push_cd(&mut self, node: usize, terminal: u32, tail: &[u8]) {
        let start = self.tails.len() as u32;
        self.tails.extend_from_slice(tail);
        self.cd.push(CdEntry {
            node: node as u32,
            terminal,
            tail_start: start,
            tail_end: self.tails.len() as u32,
        });
    }
}

#[derive(Clone, Copy)]
struct Frame {
    /// End of this node's subtree (exclusive).
    end: u32,
    /// Next child to visit.
    cursor: u32,
    /// Scan state of the frame's remainder `buf[rstart..pos]`.
    scan: Scan,
    rstart: u32,
    /// Buffer position of the children's byte.
    pos: u32,
}

/// CI nodes and CD entries of the subtree at `node`, whose path ends `pending`
/// (`walk_from`). With `include_self` the token at `node` is judged too.
/// Preconditions: `node < trie.n_nodes()`; `allowed` has `g.width()` words.
pub fn walk_from(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    allowed: &[u64],
    include_self: bool,
) -> WalkOutput {
    let mut a = g.allowed_sets(allowed);
    walk_with(g, trie, node, pending, &mut a, include_self)
}

/// [`walk_from`] under a prepared allowed-set view, whose memos carry over
/// between walks under the same allowed set (the sub-walks of one CD class).
pub fn walk_with(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    a: &mut Allowed,
    include_self: bool,
) -> WalkOutput {
    let mut out = WalkOutput::default();
    let (scan0, start0) = match g.rescan(pending, a) {
        Rescan::Dead => return out,
        Rescan::Emit { terminal, tail } => {
            out.push_cd(node, terminal, &pending[tail..]);
            return out;
        }
        Rescan::Stay { scan, start } => (scan, start),
    };
    let has_pref0 = start0 < pending.len();
    let live0 = has_pref0 && g.live_in(scan0.q, scan0.ln, a);
    if has_pref0 && !live0 && !viable_emission(g, &scan0, a) {
        return out;
    }
    if include_self && trie.node(node).token >= 0 && (!has_pref0 || live0) {
        out.ci.push(node as u32);
    }
    let mut buf = Vec::with_capacity(pending.len() + trie.max_depth() + 1);
    buf.extend_from_slice(pending);
    buf.resize(pending.len() + trie.max_depth() + 1, 0);
    Walker {
        g,
        trie,
        a,
        plen: pending.len(),
        buf,
        frames: Vec::with_capacity(trie.max_depth() + 1),
        out: &mut out,
    }
    .run(node, scan0, start0);
    out
}

/// The last accepted lexeme exists and has a viable pick.
#[inline]
fn viable_emission(g: &GrammarTables, scan: &Scan, a: &mut Allowed) -> bool {
    scan.la_len > 0 && g.pick_in(scan, a).is_some()
}

struct Walker<'w> {
    g: &'w GrammarTables,
    trie: &'w Trie,
    a: &'w mut Allowed,
    /// Length of the pending remainder at the start of `buf`.
    plen: usize,
    /// The pending remainder, then the trie path (sized for the deepest path).
    buf: Vec<u8>,
    frames: Vec<Frame>,
    out: &'w mut WalkOutput,
}

impl Walker<'_> {
    fn run(&mut self, node: usize, scan0: Scan, start0: usize) {
        let (g, nodes) = (self.g, &self.trie.nodes);
        let plen = self.plen as u32;
        self.frames.push(Frame {
            end: (node + nodes[node].size as usize) as u32,
            cursor: node as u32 + 1,
            scan: scan0,
            rstart: start0 as u32,
            pos: plen,
        });
        while let Some(frame) = self.frames.last_mut() {
            let c = frame.cursor as usize;
            if c >= frame.end as usize {
                self.frames.pop();
                continue;
            }
            let here = nodes[c];
            frame.cursor += here.size;
            let f = *frame;
            let b = here.edge;
            let pos = f.pos as usize;
            self.buf[pos] = b;
            if let Some(next) = g.step(f.scan, f.pos + 1 - f.rstart, b) {
                if g.live_in(next.q, next.ln, self.a) {
                    if here.token >= 0 {
                        self.out.ci.push(c as u32);
                    }
                } else if !viable_emission(g, &next, self.a) {
                    continue;
                }
                if here.size > 1 {
                    self.push(c, here.size, next, f.rstart, f.pos + 1);
                }
                continue;
            }
            // The byte kills the automaton: emit the last accepted lexeme.
            if f.scan.la_len == 0 {
                continue;
            }
            let Some(t) = g.pick_in(&f.scan, self.a) else {
                continue;
            };
            let tail_start = (f.rstart + f.scan.la_len) as usize;
            if !g.is_ignored(t as usize) {
                self.out.push_cd(c, t, &self.buf[tail_start..=pos]);
                continue;
            }
            match g.rescan(&self.buf[tail_start..=pos], self.a) {
                Rescan::Dead => continue,
                Rescan::Emit { terminal, tail } => {
                    self.out
                        .push_cd(c, terminal, &self.buf[tail_start + tail..=pos]);
                    continue;
                }
                Rescan::Stay { scan, start } => {
                    // As in grid-core, liveness is asked even of an empty
                    // requeued remainder (the start state).
                    if g.live_in(scan.q, scan.ln, self.a) {
                        if here.token >= 0 {
                            self.out.ci.push(c as u32);
                        }
                    } else if !viable_emission(g, &scan, self.a) {
                        continue;
                    }
                    if here.size > 1 {
                        let rstart = (tail_start + start) as u32;
                        self.push(c, here.size, scan, rstart, f.pos + 1);
                    }
                }
            }
        }
    }

    #[inline]
    fn push(&mut self, c: usize, size: u32, scan: Scan, rstart: u32, pos: u32) {
        self.frames.push(Frame {
            end: c as u32 + size,
            cursor: c as u32 + 1,
            scan,
            rstart,
            pos,
        });
    }
}
