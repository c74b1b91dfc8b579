//! The kernels' mask cache: one entry per walk key, its CI ids pre-packed,
//! its CD entries grouped into verdict classes.
//!
//! Mirrors `grid_core.cache` (DESIGN.md section 6). What is cached is one
//! **walk** (`walk_from` of a trie node, a pending remainder and an allowed set
//! A): its CI token ids as a [`Payload`] and its CD entries. The payload is
//! grid-core's: dense (a bitmask over the vocabulary, bit `i % 32` of word
//! `i / 32`) when the CI set is large, sparse (the ids ascending) when `4 *
//! ids <= ceil(n_vocab / 8)`; its bytes and the entry id
//! (`BLAKE2b-128(canonical(key) || encoding || canonical((payload, cd)))`) are
//! byte-identical to `make_entry`'s.
//!
//! The CD entries of an entry are grouped by emitted terminal, in order of
//! first appearance: one [`Class`] per terminal, whose verdict against a live
//! stack depends only on the allowed set A' after shifting the terminal. Its
//! [`Members`] memoize the [`Verdict`] per A' (the union of the members'
//! sub-walk CI ids, and their own CD entries grouped again, one shift
//! deeper), so a warm step evaluates one shift and one lookup per class. The
//! verdicts are never cached in grid-core; here they are a memo of a pure
//! function of (members, A'): the members' sub-walks (`walk_from` of each,
//! what grid-core's cached sub-walks hold). The terminal is not an argument
//! (it only decides A', through the shift), and member lists are interned by
//! content ([`Classes`]), so the classes of every entry and every terminal
//! with these members share the memo: the class of tokens that end an
//! identifier is one memo for every column name, keyword and literal.
//!
//! Entries are immutable once published; a racing publisher of the same key
//! gets the entry that won (both walked the same key, so they are equal).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use crate::canonical::Canonical;
use crate::hash::Hasher as Blake2b;
use crate::lru::Lru;
use crate::trie::Trie;
use crate::walk::{CdEntry, WalkOutput};

/// grid-core's payload encoding tags.
pub const DENSE: u8 = b'D';
pub const SPARSE: u8 = b'S';

/// Set the bits of token ids `ids` in bitmask `words` (bit `i % 32` of word
/// `i / 32`).
#[inline]
pub(crate) fn set_ids(words: &mut [u32], ids: &[u32]) {
    for &id in ids {
        words[id as usize / 32] |= 1 << (id % 32);
    }
}

/// `words |= more`, word by word.
#[inline]
pub(crate) fn or_words(words: &mut [u32], more: &[u32]) {
    for (w, m) in words.iter_mut().zip(more) {
        *w |= m;
    }
}

/// CI token ids of one walk, in grid-core's adaptive encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// [`DENSE`] or [`SPARSE`].
    pub encoding: u8,
    /// Dense: `ceil(n_vocab / 32)` bitmask words. Sparse: the ids, ascending.
    pub data: Box<[u32]>,
}

impl Payload {
    /// The payload of the token ids spelled at `nodes` (alias classes
    /// expanded); the nodes are distinct.
    pub fn of_nodes(trie: &Trie, nodes: &[u32]) -> Self {
        let count: usize = nodes.iter().map(|&n| trie.ids_at(n as usize).len()).sum();
        let n_vocab = trie.n_vocab();
        if 4 * count <= n_vocab.div_ceil(8) {
            let mut ids: Vec<u32> = nodes
                .iter()
                .flat_map(|&n| trie.ids_at(n as usize))
                .copied()
                .collect();
            ids.sort_unstable();
            return Self {
                encoding: SPARSE,
                data: ids.into(),
            };
        }
        let mut words = vec![0u32; trie.n_words()];
        for &n in nodes {
            set_ids(&mut words, trie.ids_at(n as usize));
        }
        Self {
            encoding: DENSE,
            data: words.into(),
        }
    }

    /// A 64-bit hash of the encoding and data, for indexing rows by content
    /// (not cryptographic: equal hashes are confirmed by comparing). Four
    /// independent lanes of multiply-rotate over 64-bit words, so a dense
    /// 150k-token row hashes in about a microsecond.
    pub fn content_hash(&self) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(29);
        let mut lanes = [u64::from(self.encoding), 1, 2, 3];
        let mut chunks = self.data.chunks_exact(8);
        for c in &mut chunks {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane = mix(*lane, u64::from(c[2 * l]) | (u64::from(c[2 * l + 1]) << 32));
            }
        }
        let mut h = self.data.len() as u64;
        for &x in chunks.remainder() {
            h = mix(h, u64::from(x));
        }
        lanes.iter().fold(h, |h, &l| mix(h, l))
    }

    /// The payload of distinct token ids in any order.
    pub fn of_ids(n_vocab: usize, mut ids: Vec<u32>) -> Self {
        if 4 * ids.len() <= n_vocab.div_ceil(8) {
            ids.sort_unstable();
            return Self {
                encoding: SPARSE,
                data: ids.into(),
            };
        }
        let mut words = vec![0u32; n_vocab.div_ceil(32)];
        set_ids(&mut words, &ids);
        Self {
            encoding: DENSE,
            data: words.into(),
        }
    }

    /// The payload of the ids set in bitmask `words` (`ceil(n_vocab / 32)`).
    pub fn of_words(words: Vec<u32>, n_vocab: usize) -> Self {
        let count: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        let dense = Self {
            encoding: DENSE,
            data: words.into(),
        };
        if 4 * count <= n_vocab.div_ceil(8) {
            return Self {
                encoding: SPARSE,
                data: dense.ids().into(),
            };
        }
        dense
    }

    /// Bytes of memory the ids take.
    pub fn size(&self) -> usize {
        4 * self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        match self.encoding {
            DENSE => self.data.iter().all(|&w| w == 0),
            _ => self.data.is_empty(),
        }
    }

    /// The ids, ascending.
    pub fn ids(&self) -> Vec<u32> {
        if self.encoding == SPARSE {
            return self.data.to_vec();
        }
        let mut out = Vec::new();
        for (i, &w) in self.data.iter().enumerate() {
            let mut x = w;
            while x != 0 {
                out.push(i as u32 * 32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        out
    }

    /// Overwrite `row` (`ceil(n_vocab / 32)` words) with these ids.
    #[inline]
    pub fn write(&self, row: &mut [u32]) {
        if self.encoding == DENSE {
            row.copy_from_slice(&self.data);
        } else {
            row.fill(0);
            set_ids(row, &self.data);
        }
    }

    /// Add these ids to `row`.
    #[inline]
    pub fn or_into(&self, row: &mut [u32]) {
        if self.encoding == DENSE {
            or_words(row, &self.data);
        } else {
            set_ids(row, &self.data);
        }
    }

    /// The payload whose grid-core bytes ([`Payload::to_bytes`]) are `bytes`
    /// under `encoding`, if they are what `make_entry` writes for some id set
    /// over `n_vocab` tokens: sparse, ascending ids below `n_vocab`, at most
    /// `ceil(n_vocab / 8) / 4` of them; dense, `ceil(n_vocab / 8)` bytes with
    /// no bit at or past `n_vocab` and more ids than sparse allows.
    pub fn from_bytes(encoding: u8, bytes: &[u8], n_vocab: usize) -> Option<Self> {
        let limit = n_vocab.div_ceil(8);
        match encoding {
            SPARSE => {
                if !bytes.len().is_multiple_of(4) || bytes.len() > limit {
                    return None;
                }
                let ids: Vec<u32> = bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect();
                let ascending = ids.windows(2).all(|w| w[0] < w[1]);
                let inside = ids.last().is_none_or(|&id| (id as usize) < n_vocab);
                (ascending && inside).then(|| Self {
                    encoding: SPARSE,
                    data: ids.into(),
                })
            }
            DENSE => {
                if bytes.len() != limit {
                    return None;
                }
                let mut words = vec![0u32; n_vocab.div_ceil(32)];
                for (i, &b) in bytes.iter().enumerate() {
                    words[i / 4] |= u32::from(b) << (8 * (i % 4));
                }
                let tail = n_vocab % 32;
                if tail != 0 && words.last().is_some_and(|&w| w >> tail != 0) {
                    return None;
                }
                let count: usize = words.iter().map(|w| w.count_ones() as usize).sum();
                (4 * count > limit).then(|| Self {
                    encoding: DENSE,
                    data: words.into(),
                })
            }
            _ => None,
        }
    }

    /// grid-core's payload bytes: little-endian int32 ids (sparse) or the
    /// `ceil(n_vocab / 8)`-byte little-endian bitmask (dense).
    pub fn to_bytes(&self, n_vocab: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self.data.iter().flat_map(|w| w.to_le_bytes()).collect();
        if self.encoding == DENSE {
            out.truncate(n_vocab.div_ceil(8));
        }
        out
    }
}

/// The CD entries of one walk that emit one terminal (a verdict class).
#[derive(Clone, Debug)]
pub struct Class {
    pub terminal: u32,
    /// The entries, interned: their verdicts are memoized there.
    pub members: Arc<Members>,
}

/// The members of a verdict class, with their verdicts memoized per allowed
/// set after the shift. Member `i` is the subtree at `nodes[i]`, whose bytes
/// emitted the class's terminal and requeued `tails[ends[i - 1]..ends[i]]`
/// (stored flat: one allocation per class, not per member).
#[derive(Debug)]
pub struct Members {
    nodes: Vec<u32>,
    ends: Vec<u32>,
    tails: Vec<u8>,
    /// The verdict key (allowed set after the shift, lexicon tag) -> the verdict, at most
    /// [`VERDICT_MEMO_BYTES`] per member list (least recently used evicted).
    verdicts: Mutex<Lru<Box<[u64]>, Arc<Verdict>>>,
}

/// Bytes of verdicts one member list's memo holds. The memos live and die
/// with their member lists, which live as long as an entry (or a verdict)
/// of the walk cache refers to them ([`Classes`] holds them weakly), so the
/// verdicts held are bounded by the walk cache's cap times this.
pub const VERDICT_MEMO_BYTES: usize = 1 << 20;

/// A class's verdict under one allowed set A' (after shifting its terminal):
/// the CI ids of its members' sub-walks, and the CD entries those found,
/// grouped again (their verdicts need the stack one shift deeper).
#[derive(Debug)]
pub struct Verdict {
    pub ci: Payload,
    pub deeper: Vec<Class>,
}

impl Members {
    fn new() -> Self {
        Self {
            nodes: Vec::new(),
            ends: Vec::new(),
            tails: Vec::new(),
            verdicts: Mutex::new(Lru::new(VERDICT_MEMO_BYTES)),
        }
    }

    fn push(&mut self, node: u32, tail: &[u8]) {
        self.nodes.push(node);
        self.tails.extend_from_slice(tail);
        self.ends.push(self.tails.len() as u32);
    }

    /// The members, in order: (subtree node, requeued tail).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.nodes
            .iter()
            .zip(starts.zip(&self.ends))
            .map(|(&n, (lo, &hi))| (n, &self.tails[lo as usize..hi as usize]))
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The same members.
    fn same(&self, other: &Members) -> bool {
        self.nodes == other.nodes && self.ends == other.ends && self.tails == other.tails
    }

    /// The memoized verdict under `key` (the allowed set after the shift,
    /// then the lexicon's tag: [`crate::engine::Engine::verdict_key_into`]), if computed.
    pub fn verdict(&self, key: &[u64]) -> Option<Arc<Verdict>> {
        let memo = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        memo.get(key).cloned()
    }

    /// Memoize `verdict` under `key`; a verdict already there wins.
    pub fn remember(&self, key: &[u64], verdict: Verdict) -> Arc<Verdict> {
        let allowed = key;
        let size = 64
            + 8 * allowed.len()
            + verdict.ci.size()
            + verdict.deeper.len() * std::mem::size_of::<Class>();
        let verdict = Arc::new(verdict);
        let mut memo = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        match memo.insert(allowed.into(), Arc::clone(&verdict), size) {
            Some(kept) => Arc::clone(kept),
            None => verdict,
        }
    }
}

/// Group CD entries by emitted terminal, classes and members in order of
/// first appearance (`Engine.compute_mask`'s `by_terminal`); each member
/// list interned in `table`.
pub fn group<'a>(
    entries: impl IntoIterator<Item = (u32, u32, &'a [u8])>,
    table: &Classes,
) -> Vec<Class> {
    let mut classes: Vec<(u32, Members)> = Vec::new();
    for (node, terminal, tail) in entries {
        let at = match classes.iter().position(|(t, _)| *t == terminal) {
            Some(at) => at,
            None => {
                classes.push((terminal, Members::new()));
                classes.len() - 1
            }
        };
        classes[at].1.push(node, tail);
    }
    classes
        .into_iter()
        .map(|(terminal, members)| Class {
            terminal,
            members: table.intern(members),
        })
        .collect()
}

/// Member lists interned by content, so that the classes of different walks
/// and terminals with the same members (the same remainder under two allowed
/// sets that pick alike, a sub-walk met again, every word that ends at the
/// same bytes) share one verdict memo.
#[derive(Debug, Default)]
pub struct Classes {
    /// Content hash -> the member lists alive with that hash (held weakly: a
    /// list lives as long as a class of a cached entry or verdict holds it).
    map: Mutex<Interned>,
}

#[derive(Debug, Default)]
struct Interned {
    lists: FxMap<u64, Vec<Weak<Members>>>,
    /// Sweep the dead lists when this many hashes are held (then twice what stays).
    sweep_at: usize,
}

impl Classes {
    /// The interned member list equal to `members`.
    pub fn intern(&self, members: Members) -> Arc<Members> {
        let mut h = FxHasher::default();
        for n in [&members.nodes, &members.ends] {
            h.write_usize(n.len());
            for &x in n {
                h.write_u32(x);
            }
        }
        h.write(&members.tails);
        let mut guard = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let interned = &mut *guard;
        if interned.lists.len() >= interned.sweep_at.max(1024) {
            // Drop the hashes whose lists all died (amortized O(1) per intern).
            interned.lists.retain(|_, bucket| {
                bucket.retain(|m| m.strong_count() > 0);
                !bucket.is_empty()
            });
            interned.sweep_at = 2 * interned.lists.len();
        }
        let bucket = interned.lists.entry(h.finish()).or_default();
        bucket.retain(|m| m.strong_count() > 0);
        if let Some(m) = bucket
            .iter()
            .filter_map(Weak::upgrade)
            .find(|m| m.same(&members))
        {
            return m;
        }
        let m = Arc::new(members);
        bucket.push(Arc::downgrade(&m));
        m
    }

    /// Distinct member lists interned and alive.
    pub fn len(&self) -> usize {
        let interned = self.map.lock().unwrap_or_else(|e| e.into_inner());
        interned
            .lists
            .values()
            .map(|b| b.iter().filter(|m| m.strong_count() > 0).count())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cached walk: CI payload, CD entries in walk order, their classes.
#[derive(Debug)]
pub struct Entry {
    /// Unique in the process: what memos keyed by an entry use.
    pub serial: u64,
    pub ci: Payload,
    /// The CD entries as the walk found them (tails in `tails`).
    pub cd: Vec<CdEntry>,
    pub tails: Vec<u8>,
    pub classes: Vec<Class>,
    id: OnceLock<[u8; 16]>,
}

impl Entry {
    /// Bytes of memory the entry takes, about (what the walk cache counts).
    pub fn size(&self) -> usize {
        64 + self.ci.size()
            + self.cd.len() * std::mem::size_of::<CdEntry>()
            + self.tails.len()
            + self.classes.len() * std::mem::size_of::<Class>()
    }

    /// Pack a walk's output: CI payload, CD entries and their classes
    /// (interned in `table`).
    pub fn of_walk(trie: &Trie, mut walk: WalkOutput, table: &Classes) -> Self {
        let ci = match walk.ids.take() {
            Some(set) => set.into_payload(trie.n_vocab()),
            None => Payload::of_nodes(trie, &walk.ci),
        };
        Self::new(ci, walk.cd, walk.tails, table)
    }

    /// An entry of these parts, its CD entries' classes interned in `table`.
    /// Precondition: each CD entry's tail range lies within `tails`.
    pub fn new(ci: Payload, cd: Vec<CdEntry>, tails: Vec<u8>, table: &Classes) -> Self {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let entries = cd.iter().map(|e| {
            (
                e.node,
                e.terminal,
                &tails[e.tail_start as usize..e.tail_end as usize],
            )
        });
        let classes = group(entries, table);
        Self {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            ci,
            cd,
            tails,
            classes,
            id: OnceLock::new(),
        }
    }

    pub fn tail(&self, e: &CdEntry) -> &[u8] {
        &self.tails[e.tail_start as usize..e.tail_end as usize]
    }

    /// The entry id under the canonical key encoding `key` (grid-core's
    /// `canonical(_key_fields(key))`), computed once: later calls return the
    /// first id whatever key they pass (an entry is published under one key).
    pub fn entry_id(&self, key: &[u8], n_vocab: usize) -> [u8; 16] {
        *self.id.get_or_init(|| {
            let mut rest = Canonical {
                bytes: Vec::with_capacity(64 + 4 * self.ci.data.len() + 40 * self.cd.len()),
            };
            rest.list(2)
                .bytes(&self.ci.to_bytes(n_vocab))
                .list(self.cd.len());
            for e in &self.cd {
                rest.list(3)
                    .int(i64::from(e.node))
                    .int(i64::from(e.terminal))
                    .bytes(self.tail(e));
            }
            let mut h = Blake2b::<16>::new();
            h.update(key)
                .update(&[self.ci.encoding])
                .update(&rest.bytes);
            h.finalize()
        })
    }
}

/// FxHash (rustc's hasher): the walk keys are short byte strings hashed on
/// every step, where SipHash's DoS resistance buys nothing.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Walk key bytes -> entry; thread-safe, entries immutable, at most a cap of
/// bytes held (least recently used evicted: [`crate::lru`]).
#[derive(Debug)]
pub struct WalkCache {
    map: RwLock<Lru<Box<[u8]>, Arc<Entry>>>,
    /// Lookups of a fill or a registration answered from the cache, and
    /// those that walked (or read the shared tier): [`WalkCache::count`].
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for WalkCache {
    fn default() -> Self {
        Self::new(WALK_CACHE_BYTES)
    }
}

/// Bytes of entries a walk cache holds by default before it evicts.
pub const WALK_CACHE_BYTES: usize = 256 << 20;

impl WalkCache {
    /// An empty cache of at most `cap` bytes of entries (least recently used evicted).
    pub fn new(cap: usize) -> Self {
        Self {
            map: RwLock::new(Lru::new(cap)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Count one lookup that needed an entry: found here (`hit`), or not and
    /// then made. A probe that may not walk (a warm-only fill) is not counted.
    pub fn count(&self, hit: bool) {
        let n = if hit { &self.hits } else { &self.misses };
        n.fetch_add(1, Ordering::Relaxed);
    }

    /// (hits, misses) counted so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    pub fn get(&self, key: &[u8]) -> Option<Arc<Entry>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.get(key).cloned()
    }

    /// Publish `entry` under `key` unless present; returns the entry stored
    /// (an entry larger than the cap is returned, not kept).
    pub fn publish(&self, key: &[u8], entry: Entry) -> Arc<Entry> {
        let size = entry.size() + key.len();
        let entry = Arc::new(entry);
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        match map.insert(key.into(), Arc::clone(&entry), size) {
            Some(kept) => Arc::clone(kept),
            None => entry,
        }
    }

    /// (bytes held, cap, entries evicted so far).
    pub fn usage(&self) -> (usize, usize, u64) {
        self.map.read().unwrap_or_else(|e| e.into_inner()).usage()
    }

    /// Change the cap (evicting at once if the cache holds more).
    pub fn set_cap(&self, cap: usize) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.set_cap(cap);
        map.check_invariants();
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_choose_grid_cores_encoding() {
        // 100 ids: ceil(100 / 8) = 13 bytes, so up to 3 ids are sparse.
        let sparse = Payload::of_ids(100, vec![70, 3, 5]);
        assert_eq!(sparse.encoding, SPARSE);
        assert_eq!(&*sparse.data, &[3, 5, 70]);
        assert_eq!(sparse.to_bytes(100), [3, 0, 0, 0, 5, 0, 0, 0, 70, 0, 0, 0]);
        let dense = Payload::of_ids(100, vec![0, 9, 33, 99]);
        assert_eq!(dense.encoding, DENSE);
        assert_eq!(dense.ids(), vec![0, 9, 33, 99]);
        let bytes = dense.to_bytes(100);
        assert_eq!(bytes.len(), 13);
        assert_eq!((bytes[0], bytes[1], bytes[4], bytes[12]), (1, 2, 2, 8));
        let mut row = vec![u32::MAX; 4];
        sparse.write(&mut row);
        assert_eq!(row, [0b101000, 0, 1 << 6, 0]);
        dense.or_into(&mut row);
        assert_eq!(row, [0b101000 | 1 | 1 << 9, 2, 1 << 6, 1 << 3]);
        assert!(Payload::of_ids(100, vec![]).is_empty());
        let mut words = vec![0u32; 4];
        words[2] = 1 << 6;
        words[0] = 0b101000;
        assert_eq!(Payload::of_words(words, 100), sparse);
        let mut words = vec![0u32; 4];
        for id in [0, 9, 33, 99] {
            words[id / 32] |= 1 << (id % 32);
        }
        assert_eq!(Payload::of_words(words, 100), dense);
    }

    #[test]
    fn classes_keep_first_appearance_order() {
        let table = Classes::default();
        let classes = group(
            [(5, 2, &b"x"[..]), (7, 1, &b""[..]), (9, 2, &b"y"[..])],
            &table,
        );
        let shape: Vec<(u32, Vec<u32>)> = classes
            .iter()
            .map(|c| (c.terminal, c.members.iter().map(|(n, _)| n).collect()))
            .collect();
        assert_eq!(shape, vec![(2, vec![5, 9]), (1, vec![7])]);
        let tails: Vec<&[u8]> = classes[0].members.iter().map(|(_, t)| t).collect();
        assert_eq!(tails, [b"x", b"y"]);
        let v = classes[0].members.remember(
            &[1],
            Verdict {
                ci: Payload::of_ids(10, vec![]),
                deeper: vec![],
            },
        );
        let members = &classes[0].members;
        assert!(Arc::ptr_eq(&members.verdict(&[1]).unwrap(), &v));
        assert!(members.verdict(&[2]).is_none());
        // Equal members of another walk, or of another terminal, are the
        // same members, memo included.
        let again = group([(5, 2, &b"x"[..]), (9, 2, &b"y"[..])], &table);
        assert!(Arc::ptr_eq(&again[0].members, members));
        let other_terminal = group([(5, 3, &b"x"[..]), (9, 3, &b"y"[..])], &table);
        assert_eq!(other_terminal[0].terminal, 3);
        assert!(Arc::ptr_eq(&other_terminal[0].members, members));
        let other = group([(5, 2, &b"x"[..])], &table);
        assert!(!Arc::ptr_eq(&other[0].members, members));
        assert_eq!(table.len(), 3);
    }
}
