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
//!
//! Through the subtree memo ([`crate::chunks`]), a frame that is a memo
//! point has its children's output appended from a chunk (replayed under this
//! walk's allowed set) instead of being walked; a subtree whose every byte
//! loops the frame's live scanner state is admitted whole (the walker's
//! `uniform`). Both give the output of the plain walk, node for node.
//!
//! Parallel walks ([`walk_par`]): the children of the walk's node are cut into
//! runs of consecutive subtrees of about equal size, each run is walked by its
//! own walker (own frames, own allowed-set memos) on rayon's current pool, and
//! the outputs are concatenated in run order. A child's subtree is walked from
//! the same starting frame whoever walks it, so the result is the
//! single-threaded one, node for node and in the same order.

use rayon::prelude::*;

use crate::chunks::{Chunk, Chunks, Found, Part};
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

    /// Append `other` (a walk of later subtrees) after this one.
    pub(crate) fn append(&mut self, other: &WalkOutput) {
        let shift = self.tails.len() as u32;
        self.ci.extend_from_slice(&other.ci);
        self.cd.extend(other.cd.iter().map(|e| CdEntry {
            tail_start: e.tail_start + shift,
            tail_end: e.tail_end + shift,
            ..*e
        }));
        self.tails.extend_from_slice(&other.tails);
    }

    /// Bytes of memory the output takes.
    pub(crate) fn size(&self) -> usize {
        4 * self.ci.len() + std::mem::size_of::<CdEntry>() * self.cd.len() + self.tails.len()
    }

    fn push_cd(&mut self, node: usize, terminal: u32, tail: &[u8]) {
        self.push_cd_parts(node as u32, terminal, &[], tail);
    }

    /// Push the CD entry `(node, terminal, head ++ tail)`.
    fn push_cd_parts(&mut self, node: u32, terminal: u32, head: &[u8], tail: &[u8]) {
        let start = self.tails.len() as u32;
        self.tails.extend_from_slice(head);
        self.tails.extend_from_slice(tail);
        self.cd.push(CdEntry {
            node,
            terminal,
            tail_start: start,
            tail_end: self.tails.len() as u32,
        });
    }
}

/// Subtrees of fewer nodes are stepped, never checked for uniformity: the
/// check reads the subtree's byte set, which costs a small subtree more
/// memory traffic than walking it.
const UNIFORM_MIN: u32 = 8;

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
    walk_with(g, trie, node, pending, &mut a, include_self, None)
}

/// [`walk_from`] under a prepared allowed-set view, whose memos carry over
/// between walks under the same allowed set (the sub-walks of one CD class),
/// and through the subtree memo `chunks` when given (the same output).
pub fn walk_with(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    a: &mut Allowed,
    include_self: bool,
    chunks: Option<&Chunks>,
) -> WalkOutput {
    let mut out = WalkOutput::default();
    let size = trie.node(node).size;
    let Some((scan, start)) = begin(g, trie, node, pending, a, include_self, &mut out) else {
        return out;
    };
    if size == 1 {
        return out;
    }
    if let Some(ch) = chunks {
        if from_memo(
            g,
            trie,
            a,
            ch,
            node,
            size,
            scan,
            &pending[start..],
            &mut out,
        ) {
            return out;
        }
    }
    let end = node + size as usize;
    Walker::new(g, trie, a, pending, &mut out, chunks).run(node + 1, end, (scan, start));
    out
}

/// [`walk_with`] with the node's children shared out over rayon's current
/// pool (see the module header); the same output, node for node. A pool of
/// one thread walks on the calling thread.
pub fn walk_par(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    allowed: &[u64],
    include_self: bool,
    chunks: Option<&Chunks>,
) -> WalkOutput {
    let mut a = g.allowed_sets(allowed);
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        return walk_with(g, trie, node, pending, &mut a, include_self, chunks);
    }
    let mut out = WalkOutput::default();
    let Some(start) = begin(g, trie, node, pending, &mut a, include_self, &mut out) else {
        return out;
    };
    let size = trie.node(node).size;
    let runs = child_runs(trie, node, 8 * threads);
    if let (Some(ch), true) = (chunks, size > 1) {
        // A memo point: its chunk, made run by run in parallel on a miss.
        let (scan, rstart) = start;
        let remainder = &pending[rstart..];
        let chunk = match ch.find(g, node, size, &scan, &a) {
            Found::Hit(chunk) => Some(chunk),
            Found::Miss(key) => {
                let parts: Vec<Chunk> = runs
                    .par_iter()
                    .map(|&(lo, hi)| {
                        let mut a = a.clone();
                        let mut scratch = WalkOutput::default();
                        let mut w = Walker::new(g, trie, &mut a, remainder, &mut scratch, chunks)
                            .building(&scan);
                        w.run(lo, hi, (scan, 0));
                        w.finish()
                    })
                    .collect();
                Some(ch.publish(key, Chunk::concat(parts)))
            }
            Found::Not => None,
        };
        if let Some(chunk) = chunk {
            replay(g, trie, &mut a, ch, &chunk, &scan, remainder, &mut out);
            return out;
        }
    }
    let runs = child_runs(trie, node, 8 * threads);
    let parts: Vec<WalkOutput> = runs
        .par_iter()
        .map(|&(lo, hi)| {
            let mut a = a.clone();
            let mut part = WalkOutput::default();
            Walker::new(g, trie, &mut a, pending, &mut part, chunks).run(lo, hi, start);
            part
        })
        .collect();
    for part in &parts {
        out.append(part);
    }
    out
}

/// Walk the children of `node` (a subtree of `size` nodes) from the frame
/// `(scan, remainder)` by replaying its chunk into `out`; false, writing
/// nothing, when the frame is not a memo point.
#[allow(clippy::too_many_arguments)]
fn from_memo(
    g: &GrammarTables,
    trie: &Trie,
    a: &mut Allowed,
    chunks: &Chunks,
    node: usize,
    size: u32,
    scan: Scan,
    remainder: &[u8],
    out: &mut WalkOutput,
) -> bool {
    let Some(chunk) = chunks.chunk(g, trie, a, node, size, scan, remainder) else {
        return false;
    };
    replay(g, trie, a, chunks, &chunk, &scan, remainder, out);
    true
}

/// Replay `chunk` into `out` as used at the frame `(scan, remainder)`.
#[allow(clippy::too_many_arguments)]
fn replay(
    g: &GrammarTables,
    trie: &Trie,
    a: &mut Allowed,
    chunks: &Chunks,
    chunk: &Chunk,
    scan: &Scan,
    remainder: &[u8],
    out: &mut WalkOutput,
) {
    let v = if scan.la_len == 0 {
        &[][..]
    } else {
        &remainder[scan.la_len as usize..]
    };
    Walker::new(g, trie, a, &[], out, Some(chunks)).replay(chunk, v);
}

/// The children of `node` cut into at most about `n` runs `[lo, hi)` of
/// consecutive subtrees of about equal size, in order.
fn child_runs(trie: &Trie, node: usize, n: usize) -> Vec<(usize, usize)> {
    let end = node + trie.node(node).size as usize;
    let target = (end - node - 1).div_ceil(n.max(1)).max(1);
    let mut runs = Vec::new();
    let (mut lo, mut c) = (node + 1, node + 1);
    while c < end {
        c += trie.node(c).size as usize;
        if c - lo >= target || c >= end {
            runs.push((lo, c));
            lo = c;
        }
    }
    runs
}

/// The start of every walk: scan the pending remainder (it may emit at once:
/// a CD entry, or death), judge the node itself when asked, and return the
/// scan state and remainder start its children are walked from, or `None`
/// when they are not walked.
fn begin(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    a: &mut Allowed,
    include_self: bool,
    out: &mut WalkOutput,
) -> Option<(Scan, usize)> {
    let (scan0, start0) = match g.rescan(pending, a) {
        Rescan::Dead => return None,
        Rescan::Emit { terminal, tail } => {
            out.push_cd(node, terminal, &pending[tail..]);
            return None;
        }
        Rescan::Stay { scan, start } => (scan, start),
    };
    let has_pref0 = start0 < pending.len();
    let live0 = has_pref0 && g.live_in(scan0.q, scan0.ln, a);
    if has_pref0 && !live0 && !viable_emission(g, &scan0, a) {
        return None;
    }
    if include_self && trie.node(node).token >= 0 && (!has_pref0 || live0) {
        out.ci.push(node as u32);
    }
    Some((scan0, start0))
}

/// The last accepted lexeme exists and has a viable pick.
#[inline]
fn viable_emission(g: &GrammarTables, scan: &Scan, a: &mut Allowed) -> bool {
    scan.la_len > 0 && g.pick_in(scan, a).is_some()
}

/// One depth-first walk over sibling subtrees (see the module header).
pub(crate) struct Walker<'w> {
    g: &'w GrammarTables,
    trie: &'w Trie,
    a: &'w mut Allowed,
    /// Length of the pending remainder at the start of `buf`.
    plen: usize,
    /// The pending remainder, then the trie path (sized for the deepest path).
    buf: Vec<u8>,
    frames: Vec<Frame>,
    out: &'w mut WalkOutput,
    /// The subtree memo, when the walk goes through one.
    chunks: Option<&'w Chunks>,
    /// While a memo chunk is made: its parts so far (see [`crate::chunks`]).
    build: Option<Build>,
}

/// A chunk being made: the parts before `out`, the flags of `out`'s CD
/// entries, and the length of the chunk frame's last accept (0: none), where
/// its `v` starts.
struct Build {
    parts: Vec<Part>,
    from_v: Vec<bool>,
    la0: u32,
}

impl<'w> Walker<'w> {
    pub(crate) fn new(
        g: &'w GrammarTables,
        trie: &'w Trie,
        a: &'w mut Allowed,
        pending: &[u8],
        out: &'w mut WalkOutput,
        chunks: Option<&'w Chunks>,
    ) -> Self {
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
            out,
            chunks,
            build: None,
        }
    }

    /// Make a chunk of the frame whose scan state is `scan` and whose
    /// remainder is this walk's pending bytes: at ignored picks record holes
    /// instead of walking on; keep memo points met as sub-chunks; store the
    /// tails that start at the frame's last accept without its `v`. Take the
    /// chunk with [`Walker::finish`] after [`Walker::run`].
    pub(crate) fn building(mut self, scan: &Scan) -> Self {
        self.build = Some(Build {
            parts: Vec::new(),
            from_v: Vec::new(),
            la0: scan.la_len,
        });
        self
    }

    /// The chunk made (see [`Walker::building`]).
    pub(crate) fn finish(mut self) -> Chunk {
        self.cut();
        Chunk {
            parts: self.build.take().map(|b| b.parts).unwrap_or_default(),
        }
    }

    /// While a chunk is made: close the current output part.
    fn cut(&mut self) {
        if let Some(b) = &mut self.build {
            if !self.out.ci.is_empty() || !self.out.cd.is_empty() {
                b.parts.push(Part::Out {
                    out: std::mem::take(self.out),
                    from_v: std::mem::take(&mut b.from_v),
                });
            }
        }
    }

    /// While a chunk is made, a tail `buf[tail_start..=pos]` starts with the
    /// chunk frame's `v` iff it starts at that frame's last accept (in a
    /// chunk's walk `rstart` is 0 and every later accept ends past the
    /// pending bytes). Returns whether it does and where its stored part
    /// starts.
    fn tail_from(&self, tail_start: usize) -> (bool, usize) {
        match &self.build {
            Some(b) if b.la0 > 0 && tail_start == b.la0 as usize => (true, self.plen),
            _ => (false, tail_start),
        }
    }

    /// Emit the CD entry `(c, t, buf[tail_start..=pos])`.
    fn emit_cd(&mut self, c: usize, t: u32, tail_start: usize, pos: usize) {
        let (from_v, from) = self.tail_from(tail_start);
        self.out.push_cd(c, t, &self.buf[from..=pos]);
        if let Some(b) = &mut self.build {
            b.from_v.push(from_v);
        }
    }

    /// Walk the sibling subtrees `first..end` (children of the walk's node)
    /// from the scan state and remainder start `start` of that node.
    pub(crate) fn run(&mut self, first: usize, end: usize, (scan0, start0): (Scan, usize)) {
        self.frames.push(Frame {
            end: end as u32,
            cursor: first as u32,
            scan: scan0,
            rstart: start0 as u32,
            pos: self.plen as u32,
        });
        self.drain();
    }

    /// Walk until every pushed frame is done.
    fn drain(&mut self) {
        let (g, nodes) = (self.g, &self.trie.nodes);
        while let Some(frame) = self.frames.last_mut() {
            let c = frame.cursor as usize;
            if c >= frame.end as usize {
                self.frames.pop();
                continue;
            }
            let here = nodes[c];
            frame.cursor += here.size;
            let f = *frame;
            if here.size >= UNIFORM_MIN && self.uniform(c, &f.scan) {
                // Every byte below keeps the (live) state: every token is CI.
                self.out.ci.extend_from_slice(self.trie.token_nodes(c));
                continue;
            }
            let b = here.edge;
            let pos = f.pos as usize;
            self.buf[pos] = b;
            if let Some(next) = g.step(f.scan, f.pos + 1 - f.rstart, b) {
                self.judge(c, next, f.rstart, f.pos + 1);
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
                self.emit_cd(c, t, tail_start, pos);
            } else if self.build.is_some() {
                let (from_v, from) = self.tail_from(tail_start);
                let tail = self.buf[from..=pos].into();
                self.cut();
                if let Some(b) = &mut self.build {
                    b.parts.push(Part::Hole {
                        node: c as u32,
                        from_v,
                        tail,
                    });
                }
            } else {
                self.requeue(c, tail_start, pos);
            }
        }
    }

    /// No path of the subtree at `c` (its edge included) can leave the state
    /// `scan.q` for good, and `q` is live under A by the DFA alone: the walk
    /// below `c` would admit every token it spells and meet no death (so no
    /// pick, no CD entry), whatever the lexicon node or the last accept.
    /// Either every byte in the subtree leads `q` back to itself, or every
    /// ASCII byte does, `q` is a text state (every UTF-8 character leads it
    /// back, through live states) and every path is a prefix of valid UTF-8.
    #[inline]
    fn uniform(&mut self, c: usize, scan: &Scan) -> bool {
        let q = scan.q as usize;
        let (bytes, loops) = (self.trie.subtree_bytes(c), &self.g.loops[q]);
        let escape = |i: usize| bytes[i] & !loops[i] != 0;
        // Words 0-1 hold the ASCII bytes, 2-3 the others.
        let ascii_closed = !escape(0) && !escape(1);
        let closed = ascii_closed
            && ((!escape(2) && !escape(3)) || (self.g.text[q] && self.trie.utf8_subtree(c)));
        closed && self.g.live_dfa_in(scan.q, self.a)
    }

    /// After an ignored pick at node `c`: scan its requeued tail
    /// `buf[tail_start..=pos]` from the start state and judge `c` and its
    /// subtree from there (pushing its frame, or using its chunk).
    fn requeue(&mut self, c: usize, tail_start: usize, pos: usize) {
        let g = self.g;
        match g.rescan(&self.buf[tail_start..=pos], self.a) {
            Rescan::Dead => {}
            Rescan::Emit { terminal, tail } => {
                self.out
                    .push_cd(c, terminal, &self.buf[tail_start + tail..=pos]);
            }
            Rescan::Stay { scan, start } => {
                // As in grid-core, liveness is asked even of an empty
                // requeued remainder (the start state).
                self.judge(c, scan, (tail_start + start) as u32, pos as u32 + 1);
            }
        }
    }

    /// Node `c`, whose remainder `buf[rstart..pos]` has scan state `scan`:
    /// its token is CI iff the remainder is live; its children are walked iff
    /// it is live or its last accept can still be picked.
    #[inline]
    fn judge(&mut self, c: usize, scan: Scan, rstart: u32, pos: u32) {
        let here = self.trie.nodes[c];
        if self.g.live_in(scan.q, scan.ln, self.a) {
            if here.token >= 0 {
                self.out.ci.push(c as u32);
            }
        } else if !viable_emission(self.g, &scan, self.a) {
            return;
        }
        if here.size > 1 {
            self.enter(c, here.size, scan, rstart, pos);
        }
    }

    /// Append `chunk` as used at a frame whose `v` is `v`, under this walk's
    /// allowed set: outputs with their flagged tails completed, sub-chunks
    /// replayed, holes filled by walking on from them (as the walk that made
    /// the chunk would have). Precondition: no frame is pending.
    pub(crate) fn replay(&mut self, chunk: &Chunk, v: &[u8]) {
        debug_assert!(self.frames.is_empty() && self.build.is_none());
        for part in &chunk.parts {
            match part {
                Part::Out { out, from_v } => {
                    self.out.ci.extend_from_slice(&out.ci);
                    for (e, &flag) in out.cd.iter().zip(from_v) {
                        let head = if flag { v } else { &[] };
                        self.out
                            .push_cd_parts(e.node, e.terminal, head, out.tail(e));
                    }
                }
                Part::Sub {
                    chunk,
                    inherit,
                    v: more,
                } => {
                    let sub_v = if *inherit {
                        [v, &more[..]].concat()
                    } else {
                        more.to_vec()
                    };
                    self.replay(chunk, &sub_v);
                }
                Part::Hole { node, from_v, tail } => {
                    let head = if *from_v { v } else { &[] };
                    let len = head.len() + tail.len();
                    let need = len + self.trie.max_depth() + 1;
                    if self.buf.len() < need {
                        self.buf.resize(need, 0);
                    }
                    self.buf[..head.len()].copy_from_slice(head);
                    self.buf[head.len()..len].copy_from_slice(tail);
                    self.requeue(*node as usize, 0, len - 1);
                    self.drain();
                }
            }
        }
    }

    /// Walk the children of `c` from the frame `(scan, buf[rstart..pos])`:
    /// through the subtree memo when it is a memo point (replayed, or kept as
    /// a sub-chunk of the chunk being made), else by pushing its frame.
    #[inline]
    fn enter(&mut self, c: usize, size: u32, scan: Scan, rstart: u32, pos: u32) {
        match self.chunks {
            Some(ch) if size >= ch.min_nodes() => self.enter_memo(ch, c, size, scan, rstart, pos),
            _ => self.push(c, size, scan, rstart, pos),
        }
    }

    /// [`Walker::enter`] at a subtree large enough to be a memo point.
    #[inline(never)]
    fn enter_memo(&mut self, ch: &Chunks, c: usize, size: u32, scan: Scan, rstart: u32, pos: u32) {
        let (r0, p) = (rstart as usize, pos as usize);
        let Some(chunk) = ch.chunk(self.g, self.trie, self.a, c, size, scan, &self.buf[r0..p])
        else {
            return self.push(c, size, scan, rstart, pos);
        };
        let la = r0 + scan.la_len as usize;
        if self.build.is_some() {
            let (inherit, from) = match scan.la_len {
                0 => (false, p),
                _ => {
                    let (from_v, from) = self.tail_from(la);
                    (from_v, from)
                }
            };
            let v = self.buf[from..p].into();
            self.cut();
            if let Some(b) = &mut self.build {
                b.parts.push(Part::Sub { chunk, inherit, v });
            }
        } else {
            let v = if scan.la_len == 0 {
                Vec::new()
            } else {
                self.buf[la..p].to_vec()
            };
            Walker::new(self.g, self.trie, self.a, &[], self.out, self.chunks).replay(&chunk, &v);
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
