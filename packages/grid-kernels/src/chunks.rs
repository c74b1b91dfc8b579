//! The subtree memo: walks of large trie subtrees, keyed by what they read of A.
//!
//! A walk's key carries the whole allowed set A, so every new stack is a new
//! key and a cold walk visits a few hundred thousand trie nodes. But most of a
//! walk is spent inside subtrees whose outcome reads only a few of A's bits.
//! Take a frame of the walk: trie node `c`, its remainder's scan state and
//! bytes. Walking the children of `c` asks A three things only:
//!
//! - liveness of the states reached below `c`: `live[q'] & (A | ignored)` for
//!   `q'` reachable from `q`, all within `live[q]` (the DFA's `live` is closed
//!   under successors: `live[s] = accept[s] | live of successors`);
//! - picks among the candidates of the last accept: the frame's own (`p`, its
//!   emittable candidates, as in grid-core's normal form) or one reached below
//!   `c` (within `live[q]`);
//! - lexicon liveness and word categories: the categories of words that extend
//!   the frame's lexicon node (`prefix_cats[ln]`; none once the lexicon node is
//!   dead: it never revives below `c`).
//!
//! A pick of an ignored terminal (whitespace, a comment) requeues the tail
//! from the start state, where every bit of A matters: a chunk does not walk
//! on from there but records a **hole** `(node, tail)` at that point. So the
//! children of every frame walk to a **chunk** that is a function of `(c, q,
//! ln, p, A & R)`, `R = (live[q] - categories) | p | prefix_cats[ln]` (the
//! DFA's liveness ignores categories; the lexicon decides them). `p` is left
//! out (empty) when no walk below can read the frame's last accept before the
//! next accept replaces it (`GrammarTables::la_read`).
//!
//! The bytes after the last accept (`v`) are not in the key: they reach the
//! output only as the head of the tails that start at that accept, and a chunk
//! stores those tails without it, flagged, to be completed with the `v` of the
//! frame it is used at. So one chunk serves every comment after `/*` and
//! every string literal after an escaped quote.
//!
//! A chunk is a list of parts in walk order: walk output, a sub-chunk (a memo
//! point met while it was made, stored by reference, with how its own `v`
//! follows from the frame's), or a hole. Using a chunk **replays** it under
//! the walk's own A: the outputs are appended, the sub-chunks replayed, each
//! hole filled by walking on from it exactly as the walk would have. So a
//! walk through the memo equals the walk without it, node for node and entry
//! for entry (the entry ids too); `tests/fixture.rs` checks it against
//! grid-core's walks with every subtree a memo point. A stack that allows a
//! different mix of keywords still finds the subtrees of `" n"`, of an open
//! literal or of a comment walked; the subtree of `" "` is a chunk of holes,
//! one per word, each filled from the word's own chunk.
//!
//! Not memoized: subtrees of fewer than `min_nodes` trie nodes (they walk in
//! less time than a lookup), and frames whose `R` holds every emittable
//! terminal (the start state: their key would be A itself, which the walk
//! cache already keys). The memo holds at most `cap_bytes` of chunks and is
//! emptied when full.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use crate::cache::{or_words, set_ids};
use crate::lru::Lru;
use crate::scanner::{Allowed, Scan};
use crate::tables::{GrammarTables, NO_NODE};
use crate::trie::Trie;
use crate::walk::{WalkOutput, Walker, SUBTREE};

/// Subtrees of fewer trie nodes than this are walked, not memoized.
pub const MIN_NODES: u32 = 256;

/// Bytes of chunks the memo holds before it is emptied.
pub const CAP_BYTES: usize = 256 << 20;

/// Chunks with at least this many fixed CI nodes get a bitmask of their ids
/// (an OR of `ceil(n_vocab / 32)` words costs about as much as setting the
/// ids of a few hundred nodes one by one).
pub const BITS_MIN: usize = 1024;

/// A memoized walk of a subtree's children (see the module header).
#[derive(Debug, Default)]
pub struct Chunk {
    pub(crate) parts: Vec<Part>,
    /// CI nodes in its outputs and sub-chunks, holes aside: the part of its
    /// CI that does not depend on the allowed set it is replayed under.
    fixed: usize,
    /// No CD entry and no hole in it or its sub-chunks.
    quiet: bool,
    /// The bytes its bitmask takes once made (0: it gets none).
    reserve: usize,
    /// With at least its memo's `bits_min` fixed CI nodes: their token ids
    /// as bitmask words, made at its second replay in id mode.
    bits: OnceLock<Box<[u32]>>,
    /// It was replayed in id mode once without a bitmask (see [`Chunk::bits`]).
    seen: AtomicBool,
}

/// One part of a [`Chunk`], in walk order.
#[derive(Debug)]
pub(crate) enum Part {
    /// CI nodes and CD entries; the tail of a CD entry flagged in `from_v`
    /// is stored without the frame's `v`, which it starts with.
    Out { out: WalkOutput, from_v: Vec<bool> },
    /// A memo point below: its chunk, used with `v` = (the frame's `v` if
    /// `inherit`) followed by `v`.
    Sub {
        chunk: Arc<Chunk>,
        inherit: bool,
        v: Box<[u8]>,
    },
    /// An ignored pick at trie node `node` requeueing `tail` (preceded by
    /// the frame's `v` if `from_v`): walk on from there.
    Hole {
        node: u32,
        from_v: bool,
        tail: Box<[u8]>,
    },
}

/// What [`Chunks::find`] found.
pub(crate) enum Found {
    Hit(Arc<Chunk>),
    /// A memo point not memoized: the key to publish its chunk under.
    Miss(Vec<u8>),
    /// Not a memo point.
    Not,
}

impl Chunk {
    /// The chunk of `parts` over `trie`'s vocabulary, which gets a bitmask
    /// if it has at least `bits_min` fixed CI nodes.
    pub(crate) fn new(parts: Vec<Part>, trie: &Trie, bits_min: usize) -> Chunk {
        let mut fixed = 0;
        let mut quiet = true;
        for p in &parts {
            match p {
                Part::Out { out, .. } => {
                    fixed += out
                        .ci
                        .iter()
                        .map(|&n| match n & SUBTREE {
                            0 => 1,
                            _ => trie.token_nodes((n & !SUBTREE) as usize).len(),
                        })
                        .sum::<usize>();
                    quiet &= out.cd.is_empty();
                }
                Part::Sub { chunk, .. } => {
                    fixed += chunk.fixed;
                    quiet &= chunk.quiet;
                }
                Part::Hole { .. } => quiet = false,
            }
        }
        let reserve = if fixed >= bits_min {
            4 * trie.n_words()
        } else {
            0
        };
        Chunk {
            parts,
            fixed,
            quiet,
            reserve,
            bits: OnceLock::new(),
            seen: AtomicBool::new(false),
        }
    }

    /// The chunk of consecutive sibling runs, from the chunks of the runs.
    pub(crate) fn concat(runs: Vec<Chunk>, trie: &Trie, bits_min: usize) -> Chunk {
        Chunk::new(
            runs.into_iter().flat_map(|c| c.parts).collect(),
            trie,
            bits_min,
        )
    }

    /// No CD entry and no hole in it or its sub-chunks: replayed with its
    /// fixed CI already added, it adds nothing.
    #[inline]
    pub(crate) fn quiet(&self) -> bool {
        self.quiet
    }

    /// The token ids of its fixed CI nodes as bitmask words over `trie`'s
    /// vocabulary; `None` when it gets no bitmask, and at its first use: a
    /// chunk made by a cold walk and never met again would cost a zeroed
    /// bitmask and an OR of it on top of setting its ids, so the bitmask is
    /// made at the second use (the caller sets the ids one by one before).
    pub(crate) fn bits(&self, trie: &Trie) -> Option<&[u32]> {
        if self.reserve == 0 {
            return None;
        }
        if self.bits.get().is_none() && !self.seen.swap(true, Ordering::Relaxed) {
            return None;
        }
        Some(self.bits.get_or_init(|| {
            let mut words = vec![0u32; trie.n_words()];
            self.add_fixed(trie, &mut words);
            words.into()
        }))
    }

    /// Set the ids of its fixed CI nodes in `words`.
    fn add_fixed(&self, trie: &Trie, words: &mut [u32]) {
        for p in &self.parts {
            match p {
                Part::Out { out, .. } => {
                    for &n in &out.ci {
                        if n & SUBTREE == 0 {
                            set_ids(words, trie.ids_at(n as usize));
                        } else {
                            set_ids(words, trie.subtree_ids((n & !SUBTREE) as usize));
                        }
                    }
                }
                // A sub-chunk's own bitmask is used if made, not made here.
                Part::Sub { chunk, .. } => match chunk.bits.get() {
                    Some(bits) => or_words(words, bits),
                    None => chunk.add_fixed(trie, words),
                },
                Part::Hole { .. } => {}
            }
        }
    }

    /// Bytes of memory the chunk's own parts take (sub-chunks by reference),
    /// its bitmask included.
    fn size(&self) -> usize {
        let parts: usize = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Out { out, from_v } => out.size() + from_v.len(),
                Part::Sub { v, .. } => 32 + v.len(),
                Part::Hole { tail, .. } => 16 + tail.len(),
            })
            .sum();
        parts + self.reserve
    }
}

/// The subtree memo of one engine (see the module header).
#[derive(Debug)]
pub struct Chunks {
    map: RwLock<Memo>,
    min_nodes: u32,
    bits_min: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

type Memo = Lru<Box<[u8]>, Arc<Chunk>>;

impl Default for Chunks {
    fn default() -> Self {
        Self::new(MIN_NODES, BITS_MIN, CAP_BYTES)
    }
}

impl Chunks {
    /// A memo of subtrees of at least `min_nodes` nodes, holding at most
    /// `cap_bytes` of chunks; chunks of at least `bits_min` fixed CI nodes
    /// get a bitmask of their ids.
    pub fn new(min_nodes: u32, bits_min: usize, cap_bytes: usize) -> Self {
        Self {
            map: RwLock::new(Lru::new(cap_bytes)),
            min_nodes: min_nodes.max(1),
            bits_min: bits_min.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The smallest subtree (in trie nodes) this memo keeps.
    #[inline]
    pub fn min_nodes(&self) -> u32 {
        self.min_nodes
    }

    /// The fewest fixed CI nodes of a chunk with a bitmask.
    #[inline]
    pub fn bits_min(&self) -> usize {
        self.bits_min
    }

    /// Memoized subtrees now.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// (bytes held, cap, chunks evicted so far).
    pub fn usage(&self) -> (usize, usize, u64) {
        self.read().usage()
    }

    /// Change the cap (evicting at once if the memo holds more).
    pub fn set_cap(&self, cap: usize) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .set_cap(cap);
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every chunk (the counters stay).
    pub fn clear(&self) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Memo> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Look the frame `(c, scan)` up under `a` (`c` roots a subtree of `size`
    /// nodes): its chunk, or the key to publish it under, or not a memo
    /// point.
    pub(crate) fn find(
        &self,
        g: &GrammarTables,
        c: usize,
        size: u32,
        scan: &Scan,
        a: &Allowed,
    ) -> Found {
        if size < self.min_nodes {
            return Found::Not;
        }
        let Some(key) = memo_key(g, c, scan, a) else {
            return Found::Not;
        };
        if let Some(chunk) = self.read().get(&key[..]) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Found::Hit(Arc::clone(chunk));
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        Found::Miss(key)
    }

    /// The chunk of the children of trie node `c` (a subtree of `size` nodes)
    /// walked from the frame `(scan, remainder)` under `a`, made on a miss; or
    /// `None` when the frame is not a memo point. `remainder` is the frame's
    /// remainder, whose scan state is `scan`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn chunk(
        &self,
        g: &GrammarTables,
        trie: &Trie,
        a: &mut Allowed,
        c: usize,
        size: u32,
        scan: Scan,
        remainder: &[u8],
    ) -> Option<Arc<Chunk>> {
        let key = match self.find(g, c, size, &scan, a) {
            Found::Hit(chunk) => return Some(chunk),
            Found::Not => return None,
            Found::Miss(key) => key,
        };
        let mut scratch = WalkOutput::default();
        let mut w = Walker::new(g, trie, a, remainder, &mut scratch, Some(self)).building(&scan);
        w.run(c + 1, c + size as usize, (scan, 0));
        Some(self.publish(key, w.finish()))
    }

    /// Publish `chunk` under `key` unless present (evicting the least
    /// recently used chunks first if it would exceed its cap); returns the
    /// chunk stored.
    pub(crate) fn publish(&self, key: Vec<u8>, chunk: Chunk) -> Arc<Chunk> {
        let size = chunk.size() + key.len();
        let chunk = Arc::new(chunk);
        let mut memo = self.map.write().unwrap_or_else(|e| e.into_inner());
        match memo.insert(key.into(), Arc::clone(&chunk), size) {
            Some(kept) => Arc::clone(kept),
            None => chunk,
        }
    }
}

/// The memo key of the frame `(c, scan)` under `a`: `c u32 | q u32 | ln i32 |
/// p | A & R`, every field of fixed width, so the bytes are injective; `None`
/// when `R` holds every emittable terminal.
fn memo_key(g: &GrammarTables, c: usize, scan: &Scan, a: &Allowed) -> Option<Vec<u8>> {
    let live = g.lexing.dfa.live.row(scan.q as usize);
    let p = if g.lexing.la_read[scan.q as usize] {
        g.emittable_candidates(scan)
    } else {
        vec![0; g.width()]
    };
    // Categories matter only through the lexicon: below a dead lexicon node
    // no word, hence no category, can be live or picked.
    let cats = &g.lexicon.categories;
    let words = (scan.ln != NO_NODE).then(|| g.lexicon.prefix_cats.row(scan.ln as usize));
    let r: Vec<u64> = (0..g.width())
        .map(|i| (live[i] & !cats[i]) | p[i] | words.map_or(0, |x| x[i]))
        .collect();
    if r.iter().zip(&g.emittable).all(|(r, e)| e & !r == 0) {
        return None;
    }
    let mut key = Vec::with_capacity(12 + 16 * g.width());
    key.extend_from_slice(&(c as u32).to_le_bytes());
    key.extend_from_slice(&scan.q.to_le_bytes());
    key.extend_from_slice(&scan.ln.to_le_bytes());
    for w in &p {
        key.extend_from_slice(&w.to_le_bytes());
    }
    for (w, r) in a.allowed.iter().zip(&r) {
        key.extend_from_slice(&(w & r).to_le_bytes());
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trie::RawTrie;

    /// "a", "ab", "b", "ba" with "ab" and "b" also spelled by ids 4 and 5:
    /// nodes root 0, a 1, ab 2, b 3, ba 4.
    fn trie() -> Trie {
        let spellings: [&[u8]; 6] = [b"a", b"ab", b"b", b"ba", b"ab", b"b"];
        Trie::new(RawTrie::pack(&spellings, &[false; 6])).unwrap()
    }

    #[test]
    fn subtree_entries_stand_for_every_token_below() {
        let t = trie();
        assert_eq!(t.token_nodes(1), &[1, 2]);
        let mut sub = t.subtree_ids(1).to_vec();
        sub.sort_unstable();
        assert_eq!(sub, vec![0, 1, 4]);
        // One plain CI node (b) and one subtree entry (a and ab): four ids.
        let out = WalkOutput {
            ci: vec![3, SUBTREE | 1],
            ..WalkOutput::default()
        };
        let parts = vec![Part::Out {
            out,
            from_v: Vec::new(),
        }];
        let chunk = Chunk::new(parts, &t, 4);
        assert_eq!(chunk.fixed, 3, "nodes b, a, ab");
        assert_eq!(chunk.reserve, 0, "3 fixed nodes: no bitmask at bits_min 4");
        let mut words = vec![0u32; t.n_words()];
        chunk.add_fixed(&t, &mut words);
        assert_eq!(words, vec![0b11_0111]);
    }

    #[test]
    fn the_bitmask_is_made_at_the_second_use() {
        let t = trie();
        let out = WalkOutput {
            ci: vec![SUBTREE],
            ..WalkOutput::default()
        };
        let parts = vec![Part::Out {
            out,
            from_v: Vec::new(),
        }];
        let chunk = Chunk::new(parts, &t, 1);
        assert_eq!(chunk.fixed, 4);
        assert_eq!(chunk.reserve, 4 * t.n_words(), "counted from the start");
        assert!(chunk.bits(&t).is_none(), "first use: no bitmask");
        assert!(chunk.bits.get().is_none());
        let bits = chunk.bits(&t).expect("second use: the bitmask").to_vec();
        assert_eq!(bits, vec![0b11_1111]);
        assert_eq!(chunk.bits(&t), Some(&bits[..]), "kept");
    }
}
