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
//!   next      cursor <- cursor + size\[cursor\]   (skip the visited subtree)
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

use crate::cache::{or_words, set_ids, Payload};
use crate::chunks::{Chunk, Chunks, Found, Part};
use crate::scanner::{Allowed, Rescan, Scan};
use crate::tables::GrammarTables;
use crate::trie::{Trie, TrieNode, Wide, WIDE_MIN};

/// Subtrees of fewer nodes are walked rather than checked for a run
/// ([`Walker::run_lives`]): the check reads every byte class they hold.
const RUN_MIN: u32 = 16;

/// A run check gives up past this many states reached at one length.
const RUN_STATES: usize = 32;

/// A run check gives up at a state with more successors than this (a trie
/// of literals: walked, not followed).
const RUN_SUCC: usize = 64;

thread_local! {
    /// Nodes stepped by this thread's walkers so far (see [`nodes_stepped`]).
    static STEPPED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many trie nodes this thread's walks have stepped so far: nodes whose
/// edge byte a walker scanned one at a time. A subtree taken whole (a loop or
/// a run, see `Walker::uniform`) or replayed from the subtree memo counts
/// none of its nodes, so the difference across a walk measures what its
/// shortcuts saved (the walk's cost, not its output). A parallel walk's runs
/// count on rayon's threads, not on the caller's.
pub fn nodes_stepped() -> u64 {
    STEPPED.with(std::cell::Cell::get)
}

/// In the CI nodes of a memo chunk's output (never of a walk's): an entry
/// with this bit set stands for every token node of the subtree at the rest,
/// a subtree taken whole ([`Walker::uniform`]). A chunk so keeps one word per
/// such subtree, and its replay adds the subtree's ids as one slice
/// ([`Trie::subtree_ids`]).
pub(crate) const SUBTREE: u32 = 1 << 31;

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
///
/// An output made by [`WalkOutput::ids`] gathers the CI part as token ids
/// instead (an [`IdSet`], alias classes expanded; `ci` stays empty): what an
/// entry or a verdict keeps, so a walk through the subtree memo adds a large
/// chunk's ids with one OR of words ([`crate::chunks`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkOutput {
    pub ci: Vec<u32>,
    pub cd: Vec<CdEntry>,
    /// The CD entries' tails, concatenated.
    pub tails: Vec<u8>,
    /// In id mode: the CI token ids.
    pub ids: Option<IdSet>,
}

impl WalkOutput {
    pub fn tail(&self, e: &CdEntry) -> &[u8] {
        &self.tails[e.tail_start as usize..e.tail_end as usize]
    }

    /// An empty output in id mode over `trie`'s vocabulary.
    pub fn ids(trie: &Trie) -> Self {
        Self {
            ids: Some(IdSet::new(trie.n_words())),
            ..Self::default()
        }
    }

    /// An empty output in the same mode as this one.
    fn like(&self) -> Self {
        Self {
            ids: self.ids.as_ref().map(|s| IdSet::new(s.n_words)),
            ..Self::default()
        }
    }

    /// Add the token at trie node `node` to the CI part.
    #[inline]
    pub(crate) fn push_ci(&mut self, trie: &Trie, node: u32) {
        match &mut self.ids {
            Some(set) => set.add(trie.ids_at(node as usize)),
            None => self.ci.push(node),
        }
    }

    /// Add the CI nodes of a chunk's output (with [`SUBTREE`] entries).
    pub(crate) fn extend_chunk_ci(&mut self, trie: &Trie, nodes: &[u32]) {
        for &n in nodes {
            if n & SUBTREE == 0 {
                self.push_ci(trie, n);
            } else {
                self.add_subtree(trie, (n & !SUBTREE) as usize);
            }
        }
    }

    /// Add every token of the subtree at `node` to the CI part.
    #[inline]
    pub(crate) fn add_subtree(&mut self, trie: &Trie, node: usize) {
        match &mut self.ids {
            Some(set) => set.add(trie.subtree_ids(node)),
            None => self.ci.extend_from_slice(trie.token_nodes(node)),
        }
    }

    /// Append `other` (a walk of later subtrees, in the same mode) after this one.
    pub(crate) fn append(&mut self, other: &WalkOutput) {
        let shift = self.tails.len() as u32;
        if let (Some(set), Some(more)) = (&mut self.ids, &other.ids) {
            set.union(more);
        }
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

/// Distinct token ids gathered by a walk in id mode: a list while there are
/// few (a walk's CI ids are distinct, so no more than grid-core's sparse
/// payload holds), else bitmask words; an OR of a bitmask goes to the words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdSet {
    n_words: usize,
    list: Vec<u32>,
    words: Option<Vec<u32>>,
}

impl IdSet {
    /// An empty set over a vocabulary of `n_words` bitmask words.
    pub fn new(n_words: usize) -> Self {
        Self {
            n_words,
            list: Vec::new(),
            words: None,
        }
    }

    /// Add `ids` (not in the set yet).
    #[inline]
    pub fn add(&mut self, ids: &[u32]) {
        match &mut self.words {
            Some(words) => set_ids(words, ids),
            None => {
                self.list.extend_from_slice(ids);
                if self.list.len() > self.n_words {
                    self.spill();
                }
            }
        }
    }

    /// Add the ids set in bitmask `bits`.
    pub fn or(&mut self, bits: &[u32]) {
        or_words(self.spill(), bits);
    }

    /// Add the ids of `other`.
    pub fn union(&mut self, other: &IdSet) {
        match &other.words {
            Some(bits) => self.or(bits),
            None => self.add(&other.list),
        }
    }

    /// Move to bitmask words; returns them.
    fn spill(&mut self) -> &mut Vec<u32> {
        if self.words.is_none() {
            let mut words = vec![0u32; self.n_words];
            set_ids(&mut words, &self.list);
            self.list = Vec::new();
            self.words = Some(words);
        }
        self.words.as_mut().expect("spilled above")
    }

    /// The ids as grid-core's payload over `n_vocab` ids.
    pub fn into_payload(self, n_vocab: usize) -> Payload {
        match self.words {
            Some(words) => Payload::of_words(words, n_vocab),
            None => Payload::of_ids(n_vocab, self.list),
        }
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
    let mut out = WalkOutput::default();
    let mut a = g.allowed_sets(allowed);
    walk_into(g, trie, node, pending, &mut a, include_self, None, &mut out);
    out
}

/// [`walk_from`] appended to `out` (in its mode: nodes or ids), under a
/// prepared allowed-set view whose memos carry over between walks under the
/// same allowed set (the sub-walks of one CD class), and through the subtree
/// memo `chunks` when given (the same output).
#[allow(clippy::too_many_arguments)]
pub fn walk_into(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    a: &mut Allowed,
    include_self: bool,
    chunks: Option<&Chunks>,
    out: &mut WalkOutput,
) {
    let size = trie.node(node).size;
    let Some((scan, start)) = begin(g, trie, node, pending, a, include_self, out) else {
        return;
    };
    if size == 1 {
        return;
    }
    if let Some(ch) = chunks {
        if from_memo(g, trie, a, ch, node, size, scan, &pending[start..], out) {
            return;
        }
    }
    let end = node + size as usize;
    Walker::new(g, trie, a, pending, out, chunks).run(node + 1, end, (scan, start));
}

/// [`walk_into`] an empty `out`, with the node's children shared out over
/// `threads` threads of rayon's current pool (see the module header); the
/// same output, node for node. One thread walks on the calling thread.
#[allow(clippy::too_many_arguments)]
pub fn walk_par(
    g: &GrammarTables,
    trie: &Trie,
    node: usize,
    pending: &[u8],
    allowed: &[u64],
    include_self: bool,
    chunks: Option<&Chunks>,
    out: &mut WalkOutput,
    threads: usize,
) {
    let mut a = g.allowed_sets(allowed);
    if threads <= 1 {
        return walk_into(g, trie, node, pending, &mut a, include_self, chunks, out);
    }
    let Some(start) = begin(g, trie, node, pending, &mut a, include_self, out) else {
        return;
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
                Some(ch.publish(key, Chunk::concat(parts, trie, ch.bits_min())))
            }
            Found::Not => None,
        };
        if let Some(chunk) = chunk {
            replay(g, trie, &mut a, ch, &chunk, &scan, remainder, out);
            return;
        }
    }
    let parts: Vec<WalkOutput> = runs
        .par_iter()
        .map(|&(lo, hi)| {
            let mut a = a.clone();
            let mut part = out.like();
            Walker::new(g, trie, &mut a, pending, &mut part, chunks).run(lo, hi, start);
            part
        })
        .collect();
    for part in &parts {
        out.append(part);
    }
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
        out.push_ci(trie, node as u32);
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
    /// Scratch of [`Walker::run_lives`]: the states reached at one length,
    /// and at the next (kept between checks: no allocation per check).
    run: (Vec<u32>, Vec<u32>),
    /// Nodes stepped, added to [`nodes_stepped`] when the walker is dropped.
    stepped: u64,
}

impl Drop for Walker<'_> {
    fn drop(&mut self) {
        STEPPED.with(|n| n.set(n.get() + self.stepped));
    }
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
            run: (Vec::new(), Vec::new()),
            stepped: 0,
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
        let parts = self.build.take().map(|b| b.parts).unwrap_or_default();
        let bits_min = self.chunks.map_or(usize::MAX, Chunks::bits_min);
        Chunk::new(parts, self.trie, bits_min)
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
            // Subtrees of fewer nodes are stepped, never checked for
            // uniformity: walking them costs less than reading the check's
            // record.
            if here.size >= WIDE_MIN && self.uniform(&here, &f.scan) {
                // Every byte below keeps the (live) state: every token is CI.
                if self.build.is_some() {
                    self.out.ci.push(SUBTREE | c as u32);
                } else {
                    self.out.add_subtree(self.trie, c);
                }
                continue;
            }
            self.stepped += 1;
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

    /// No path of the subtree at `here` (its edge included) can kill the
    /// automaton from `scan.q`, and every state the paths reach is live under
    /// A by the DFA alone: the walk below it would admit every token it
    /// spells and meet no death (so no pick, no CD entry), whatever the
    /// lexicon node or the last accept. Two shapes are recognised:
    ///
    /// - a **loop**: every byte in the subtree leads `q` back to itself, or
    ///   every ASCII byte does, `q` is a text state (every UTF-8 character
    ///   leads it back, through live states) and every path is a prefix of
    ///   valid UTF-8;
    /// - a **run** (a counted repetition such as `[^"]{0,256}`, or several
    ///   terminals read side by side): [`Walker::run_lives`].
    ///
    /// Precondition: `here` roots a subtree of at least [`WIDE_MIN`] nodes.
    #[inline]
    fn uniform(&mut self, here: &TrieNode, scan: &Scan) -> bool {
        let q = scan.q as usize;
        let (wide, loops) = (self.trie.wide(here), &self.g.lexing.loops[q]);
        let escape = |i: usize| wide.bytes[i] & !loops[i] != 0;
        // Words 0-1 hold the ASCII bytes, 2-3 the others.
        let ascii_closed = !escape(0) && !escape(1);
        let closed = ascii_closed
            && ((!escape(2) && !escape(3)) || (self.g.lexing.text_next[q] == scan.q && wide.utf8));
        if closed {
            return self.g.live_dfa_in(scan.q, self.a);
        }
        here.size >= RUN_MIN && self.run_lives(here.edge, wide, scan.q)
    }

    /// Every path of the subtree leads `q` through states that are live
    /// under A by the DFA alone, and none dies. Checked over characters, a
    /// superset of the paths: the subtree's ASCII bytes and, when it holds
    /// others (and its paths are valid UTF-8), any multi-byte character
    /// ([`GrammarTables::text_next`]), `wide.height` times (no path has more
    /// characters than bytes), following the set of states reached (at most
    /// [`RUN_STATES`]), each checked live; a state inside a character holds
    /// the live set of the one it leads to. `edge` (the subtree's first
    /// byte) is tried first: most subtrees die there.
    fn run_lives(&mut self, edge: u8, wide: &Wide, q: u32) -> bool {
        let g = self.g;
        let dfa = &g.lexing.dfa;
        if dfa.next[q as usize * dfa.n_classes + dfa.class_of[edge as usize] as usize] < 0 {
            return false;
        }
        let ascii = [wide.bytes[0], wide.bytes[1]];
        let multi = wide.bytes[2] | wide.bytes[3] != 0;
        if multi && !wide.utf8 {
            return false;
        }
        let (mut states, mut next) = std::mem::take(&mut self.run);
        states.clear();
        states.push(q);
        let lives = self.run_from(&mut states, &mut next, ascii, multi, wide.height);
        self.run = (states, next);
        lives
    }

    /// The loop of [`Walker::run_lives`] from `states` (the frame's state).
    fn run_from(
        &mut self,
        states: &mut Vec<u32>,
        next: &mut Vec<u32>,
        ascii: [u64; 2],
        multi: bool,
        height: u16,
    ) -> bool {
        let g = self.g;
        for _ in 0..height {
            next.clear();
            for &s in states.iter() {
                let s = s as usize;
                let mut reach = |t: u32, a: &mut Allowed| -> bool {
                    if next.contains(&t) {
                        return true;
                    }
                    next.push(t);
                    next.len() <= RUN_STATES && g.live_dfa_in(t, a)
                };
                if multi
                    && (g.lexing.text_next[s] == u32::MAX || !reach(g.lexing.text_next[s], self.a))
                {
                    return false;
                }
                let dead = &g.lexing.dead[s];
                if ascii[0] & dead[0] != 0 || ascii[1] & dead[1] != 0 {
                    return false;
                }
                let succ =
                    &g.lexing.succ[g.lexing.succ_at[s] as usize..g.lexing.succ_at[s + 1] as usize];
                if succ.len() > RUN_SUCC {
                    return false; // a trie of literals: walked, not followed
                }
                for (t, bytes) in succ {
                    if (ascii[0] & bytes[0] != 0 || ascii[1] & bytes[1] != 0) && !reach(*t, self.a)
                    {
                        return false;
                    }
                }
            }
            // The same set from here on (compared inline: the sets are a few
            // words, and a library memcmp per length was a sixth of a cold
            // walk through a counted string).
            if states.len() == next.len() && states.iter().zip(next.iter()).all(|(x, y)| x == y) {
                break;
            }
            std::mem::swap(states, next);
        }
        true
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
                self.out.push_ci(self.trie, c as u32);
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
        self.replay_parts(chunk, v, true);
    }

    /// [`Walker::replay`], adding the chunk's fixed CI nodes iff `with_ci`
    /// (else an enclosing chunk's bitmask held them). In id mode a chunk
    /// with a bitmask adds them with one OR.
    fn replay_parts(&mut self, chunk: &Chunk, v: &[u8], mut with_ci: bool) {
        if let (true, Some(set)) = (with_ci, &mut self.out.ids) {
            if let Some(bits) = chunk.bits(self.trie) {
                set.or(bits);
                with_ci = false;
            }
        }
        if !with_ci && chunk.quiet() {
            return;
        }
        for part in &chunk.parts {
            match part {
                Part::Out { out, from_v } => {
                    if with_ci {
                        self.out.extend_chunk_ci(self.trie, &out.ci);
                    }
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
                    self.replay_parts(chunk, &sub_v, with_ci);
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
        if self.build.is_none() {
            let remainder = &self.buf[r0..p];
            return replay(
                self.g, self.trie, self.a, ch, &chunk, &scan, remainder, self.out,
            );
        }
        let (inherit, from) = match scan.la_len {
            0 => (false, p),
            la => self.tail_from(r0 + la as usize),
        };
        let v = self.buf[from..p].into();
        self.cut();
        if let Some(b) = &mut self.build {
            b.parts.push(Part::Sub { chunk, inherit, v });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{DENSE, SPARSE};

    /// The trie of `words` (no special tokens).
    fn trie_of(words: &[&str]) -> Trie {
        let refs: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        Trie::new(crate::trie::RawTrie::pack(&refs, &vec![false; refs.len()])).unwrap()
    }

    #[test]
    fn child_runs_close_at_the_first_subtree_reaching_the_target() {
        // The root's children, in order, with their subtree sizes: a 1, b 2,
        // c 4, d 1, e 3, f 1, g 1, h 5 (18 nodes; h's children are 15-18).
        let t = trie_of(&[
            "a", "b", "bb", "c", "ca", "cb", "cc", "d", "e", "ea", "eb", "f", "g", "h", "ha", "hb",
            "hc", "hd",
        ]);
        assert_eq!(t.node(0).size, 19);
        assert_eq!(t.node(14).size, 5);
        // n = 4: target 5 (18 / 4 rounded up); a run closes at the first
        // child boundary where it holds at least 5 nodes, the last at the end.
        assert_eq!(child_runs(&t, 0, 4), vec![(1, 8), (8, 13), (13, 19)]);
        // n = 6: target 3.
        assert_eq!(
            child_runs(&t, 0, 6),
            vec![(1, 4), (4, 8), (8, 12), (12, 19)]
        );
        assert_eq!(child_runs(&t, 0, 1), vec![(1, 19)]);
        assert_eq!(child_runs(&t, 0, 0), vec![(1, 19)], "n is at least 1");
        // Target 1: one run per child.
        let each = vec![
            (1, 2),
            (2, 4),
            (4, 8),
            (8, 9),
            (9, 12),
            (12, 13),
            (13, 14),
            (14, 19),
        ];
        assert_eq!(child_runs(&t, 0, 100), each);
        // Below another node: h's four leaves in two runs of two.
        assert_eq!(child_runs(&t, 14, 2), vec![(15, 17), (17, 19)]);
        assert_eq!(child_runs(&t, 14, 3), vec![(15, 17), (17, 19)]);
        assert_eq!(child_runs(&t, 1, 4), vec![], "a leaf has no children");
    }

    #[test]
    fn id_sets_spill_to_words_and_pack_like_grid_core() {
        // 100 ids: 4 words; a list of up to 4 ids, then words.
        let mut set = IdSet::new(4);
        set.add(&[70, 3]);
        set.add(&[5]);
        assert!(set.words.is_none());
        let sparse = set.clone().into_payload(100);
        assert_eq!((sparse.encoding, &*sparse.data), (SPARSE, &[3, 5, 70][..]));
        set.add(&[9, 33]);
        assert!(set.words.is_some(), "5 ids spill");
        let mut other = IdSet::new(4);
        other.add(&[99]);
        set.union(&other);
        let mut more = IdSet::new(4);
        more.or(&[1 << 1, 0, 0, 0]);
        set.union(&more);
        let dense = set.into_payload(100);
        assert_eq!(dense.encoding, DENSE);
        assert_eq!(dense.ids(), vec![1, 3, 5, 9, 33, 70, 99]);
        // A bitmask with few ids still packs sparse.
        let mut few = IdSet::new(4);
        few.or(&[0, 1, 0, 0]);
        assert_eq!(few.into_payload(100).data.as_ref(), &[32]);
    }
}
