//! The serving engine: one grammar's tables with everything its sessions share.
//!
//! Mirrors `grid_core.guide.Engine`: shared, immutable tables
//! ([`EngineTables`], themselves sharing the tokenizer's trie), the mask cache
//! ([`WalkCache`], grid-core's T1: one walk per key) and the interned stacks
//! with their memoized allowed sets. Sessions ([`crate::session`]) hold an
//! `Arc` of it: no table, trie or cache is copied per request.
//!
//! Keys. A walk is cached under grid-core's key for it (`grid_core.cache`,
//! `Engine.key`): `IdentKey(namespace, root, form, A, schema)` at an identifier
//! position (a lexicon category in A or ignored), else `GenericKey(namespace,
//! root, form, A)`, where the form of a root walk (trie node 0) is its
//! remainder's scanner normal form `(q, ln, p, v)` (`Config.normal`; `ln`
//! dropped from a generic key) and that of a CD sub-walk its raw tail. Within
//! one engine the schema is fixed and the kind is a function of A, so the
//! lookup key is an injective byte string of the remaining fields
//! ([`Engine::walk_key`]); the entry id hashes grid-core's canonical encoding of
//! the whole key ([`Engine::canonical_key`]).
//!
//! Stacks. Sessions of one engine intern their stacks in one shared
//! [`StackArena`] behind a lock ([`Stacks`]), so an allowed set is computed
//! once for every request that reaches its stack. Beside it lives the **row
//! memo**: the packed CI and CD ids of (cached walk, live stack), i.e. the
//! whole mask less EOS, so a configuration seen before is filled with one
//! copy. It is a memo of a pure function: on a miss the CD verdicts are
//! evaluated class by class against the live stack (one shift each, each
//! class's verdict memoized per allowed set), exactly as grid-core does; it
//! holds at most a cap of bytes ([`ROW_MEMO_BYTES`] by default), evicting
//! the least recently used rows ([`crate::lru`]). A new row equal in content
//! to one still memoized is that row ([`RowIndex`]), so its audit fields are
//! computed once per distinct row, not once per stack. Interned nodes
//! are never freed one by one; instead the arena is a *generation*: once it
//! holds more than [`ARENA_CAP`] nodes, sessions created from then on start a
//! fresh one, and the old one is freed with its last session. Memory stays
//! bounded by the caps times the number of generations still in use.
//!
//! Cold walks: every walk goes through the engine's subtree memo
//! ([`crate::chunks`]), so a new stack mostly finds its large subtrees walked.
//! They run on the calling thread unless the engine is given more threads:
//! then a root walk (trie node 0) is shared out over a rayon pool
//! ([`crate::walk::walk_par`], bit-identical to one thread), and a large CD
//! class's verdict is walked run by run over the same pool
//! ([`PAR_VERDICT_NODES`]). Member lists are interned by content
//! ([`crate::cache::Classes`]), so the classes of every walk and terminal
//! with equal members share their verdicts.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::bits;
use crate::cache::{group, Classes, Entry, Members, Payload, Verdict, WalkCache};
use crate::canonical::Canonical;
use crate::chunks::Chunks;
use crate::error::{KernelError, Result};
use crate::lru::Lru;
use crate::mask::EngineTables;
use crate::parser::{NodeId, StackArena};
use crate::remote::{Counter, Lock, Read, Remote};
use crate::scanner::{Allowed, Scan};
use crate::trie::Trie;
use crate::walk::{walk_into, walk_par, WalkOutput};

/// Nodes an arena generation holds before new sessions start a fresh one.
pub const ARENA_CAP: usize = 1 << 18;

/// A verdict whose members' subtrees hold at least this many trie nodes walks
/// them on the engine's threads (run by run, bit-identical to one thread).
pub const PAR_VERDICT_NODES: usize = 1 << 14;

/// Bytes of packed rows a generation's row memo holds by default.
pub const ROW_MEMO_BYTES: usize = 128 << 20;

/// A memoized row: the CI and CD ids of (root entry, stack), and the audit
/// fields (mask entry id, blocked count) of the row without and with the EOS
/// ids, computed on first use by an audited session.
#[derive(Debug)]
pub struct Row {
    pub ids: Payload,
    pub audit: [OnceLock<([u8; 16], u32)>; 2],
}

impl Row {
    pub fn new(ids: Payload) -> Self {
        Self {
            ids,
            audit: [OnceLock::new(), OnceLock::new()],
        }
    }
}

/// A row memo slot, (root entry, stack) -> its row (shared between slots:
/// [`RowIndex`]), with the first audited configuration it served: (stack
/// hash, remainder length, remainder digest, configuration hash).
#[derive(Debug)]
pub struct Kept {
    pub row: Arc<Row>,
    config: OnceLock<[u64; 4]>,
}

impl Kept {
    /// The configuration hash of (`stack`, `len`, `digest`) (`Config.hash`)
    /// if it is the configuration memoized in this slot, the first one that
    /// asked (computed then); None for any other (the caller's
    /// [`crate::audit::Chain`] computes it when the records are read). A
    /// warm step mostly serves a configuration its slot served before (one
    /// slot per walk key and stack; the walk key is the remainder's normal
    /// form), so its record's hash costs a comparison, not a BLAKE2b.
    pub fn config_hash(&self, stack: u64, len: u64, digest: u64) -> Option<u64> {
        let known = self.config.get_or_init(|| {
            [
                stack,
                len,
                digest,
                crate::audit::config_hash(stack, len, digest),
            ]
        });
        (known[..3] == [stack, len, digest]).then_some(known[3])
    }
}

/// One arena generation: the interned stacks and the row memo keyed by them.
#[derive(Debug)]
pub struct Stacks {
    pub arena: StackArena,
    rows: Lru<(u64, NodeId), Arc<Kept>>,
    /// The row memo's rows by parts and by content ([`RowIndex`]).
    same: RowIndex,
    /// The parse-event plans of this generation's nodes ([`crate::events`]).
    pub plans: crate::events::Plans,
}

/// The event plan memo's cap in bytes, per arena generation.
pub const PLAN_MEMO_BYTES: usize = 16 << 20;

/// Two indexes of a generation's memoized rows, so that a (walk, stack) seen
/// for the first time mostly gets a row already built (most first-sight
/// stacks give a row seen before: `docs/performance.md`):
///
/// - **by parts**: (root walk, the verdicts its classes gave against the
///   stack, by identity) -> row. The row is `union(root CI, verdicts' CI)`, a
///   function of that key, so a hit skips the union.
/// - **by content** ([`Payload::content_hash`], confirmed by comparing): a new
///   row equal to one still memoized is that row, so a row's audit fields (a
///   BLAKE2b of the whole row, about 20 us on a 150k vocabulary) are
///   computed once per distinct row.
///
/// Both hold `Weak`s: they keep no row alive, and a verdict's `Weak` pins its
/// address, so no other verdict can take that address while the key lives.
/// Each holds at most 1/`INDEX_SHARE` of the row memo's cap.
#[derive(Debug)]
pub struct RowIndex {
    by_parts: Lru<(u64, Box<[usize]>), Shape>,
    by_content: Lru<u64, Weak<Row>>,
}

/// A row under its parts, and `Weak`s of the verdicts whose addresses its key holds.
#[derive(Debug)]
struct Shape {
    _pins: Box<[Weak<Verdict>]>,
    row: Weak<Row>,
}

/// Bytes an index entry counts for its cap (plus 16 per verdict by parts), and
/// each index's cap as a share of the row memo's: 1/32.
const INDEX_ENTRY_BYTES: usize = 64;
const INDEX_SHARE: usize = 32;

impl RowIndex {
    /// The indexes beside a row memo of `row_cap` bytes.
    pub fn new(row_cap: usize) -> Self {
        Self {
            by_parts: Lru::new(row_cap / INDEX_SHARE),
            by_content: Lru::new(row_cap / INDEX_SHARE),
        }
    }

    /// The row of the root walk `serial` and the verdicts `parts` its classes
    /// gave: the live row indexed under them, else the row of `union()`'s ids
    /// (a live row with equal ids if the content index finds one, else a new
    /// row), indexed both ways. Equal ids give equal rows and equal audit
    /// fields, so which row is returned is invisible in masks and records.
    pub fn row(
        &mut self,
        serial: u64,
        parts: &[Arc<Verdict>],
        union: impl FnOnce() -> Payload,
    ) -> Arc<Row> {
        let key = (serial, addresses(parts));
        if let Some(row) = self.by_parts.get(&key).and_then(|s| s.row.upgrade()) {
            return row;
        }
        let ids = union();
        let row = self.row_under(ids.content_hash(), ids);
        let shape = Shape {
            _pins: parts.iter().map(Arc::downgrade).collect(),
            row: Arc::downgrade(&row),
        };
        self.by_parts.remove(&key);
        let size = INDEX_ENTRY_BYTES + 16 * parts.len();
        self.by_parts.insert(key, shape, size);
        row
    }

    /// The content index's half of [`RowIndex::row`], its key given: a row
    /// found under `hash` is returned only if its ids are `ids` (hashes
    /// collide; rows never do).
    fn row_under(&mut self, hash: u64, ids: Payload) -> Arc<Row> {
        if let Some(row) = self.by_content.get(&hash).and_then(Weak::upgrade) {
            if row.ids == ids {
                return row;
            }
        }
        let row = Arc::new(Row::new(ids));
        self.by_content.remove(&hash);
        let weak = Arc::downgrade(&row);
        self.by_content.insert(hash, weak, INDEX_ENTRY_BYTES);
        row
    }

    /// Follow the row memo's new cap.
    pub fn set_row_cap(&mut self, row_cap: usize) {
        self.by_parts.set_cap(row_cap / INDEX_SHARE);
        self.by_content.set_cap(row_cap / INDEX_SHARE);
    }
}

/// The verdicts' identities, in order.
fn addresses(parts: &[Arc<Verdict>]) -> Box<[usize]> {
    parts.iter().map(|v| Arc::as_ptr(v) as usize).collect()
}

impl Stacks {
    fn new(arena: StackArena, row_cap: usize) -> Self {
        Self {
            arena,
            rows: Lru::new(row_cap),
            same: RowIndex::new(row_cap),
            plans: Lru::new(PLAN_MEMO_BYTES),
        }
    }

    /// The memoized row of (`entry`, `node`).
    pub fn row(&self, entry: &Entry, node: NodeId) -> Option<Arc<Kept>> {
        self.rows.get(&(entry.serial, node)).cloned()
    }

    /// (bytes held, cap, rows evicted so far) of the row memo.
    pub fn usage(&self) -> (usize, usize, u64) {
        self.rows.usage()
    }

    /// Memoize the row of (`entry`, `node`), evicting the least recently used
    /// rows first if the memo would exceed its cap; returns its slot.
    pub fn remember_row(&mut self, entry: &Entry, node: NodeId, row: Arc<Row>) -> Arc<Kept> {
        let size = row.ids.size() + 128; // the row's ids, the slot and the map's entry
        let kept = Arc::new(Kept {
            row,
            config: OnceLock::new(),
        });
        self.rows
            .insert((entry.serial, node), Arc::clone(&kept), size);
        kept
    }

    /// The indexes of the memo's rows ([`RowIndex`]).
    pub fn index(&mut self) -> &mut RowIndex {
        &mut self.same
    }

    /// Set the row memo's cap (and its content index's, in proportion).
    fn set_row_cap(&mut self, cap: usize) {
        self.rows.set_cap(cap);
        self.same.set_row_cap(cap);
    }

    /// Rows memoized now.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }
}

/// How a cold walk is spread over threads.
#[derive(Clone, Debug)]
pub enum Threads {
    /// rayon's global pool (`RAYON_NUM_THREADS`, else one thread per CPU).
    Global,
    /// A pool of this many threads (1: the calling thread only).
    Pool(usize),
}

impl Default for Threads {
    /// The calling thread: through the subtree memo a typical cold walk
    /// costs less than waking another thread (`docs/performance.md`).
    fn default() -> Self {
        Threads::Pool(1)
    }
}

/// The most threads a pool may have (a caller's count past it is refused:
/// each thread is an OS thread, started at once).
pub const MAX_THREADS: usize = 256;

/// How many pools of distinct sizes are kept between calls.
const POOLS_KEPT: usize = 4;

/// A rayon pool of `n` threads (`1 <= n <= MAX_THREADS`), kept for the next
/// call: the [`POOLS_KEPT`] most recently used sizes are kept, an older pool's
/// threads end once its last user is done (so a caller cycling through thread
/// counts starts threads again, but never piles them up).
pub(crate) fn pool(n: usize) -> Arc<ThreadPool> {
    static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());
    let n = n.clamp(1, MAX_THREADS);
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = pools.iter().position(|(k, _)| *k == n) {
        let kept = pools.remove(i);
        let p = Arc::clone(&kept.1);
        pools.push(kept);
        return p;
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("grid-kernels-{n}-{i}"))
            .build()
            .expect("a rayon pool of a few threads builds"),
    );
    if pools.len() == POOLS_KEPT {
        pools.remove(0);
    }
    pools.push((n, Arc::clone(&p)));
    p
}

/// Lock a mutex whose data stays consistent even if a holder panicked (every
/// mutation of an arena or memo completes before it is visible).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the engines of one walk family share: grid-core's T2
/// (`SharedCache`), the one walk cache of every engine built with it.
///
/// A walk family is the engines with the same union DFA, ignored terminals,
/// pick order among a lexeme's candidates and trie (`Engine.family`,
/// `grid_core.guide.family_of`); their walks at a generic position read nothing
/// else of the grammar or the lexicon, so a generic key is shared by all of
/// them, while an identifier key and every verdict carry the lexicon's tag
/// (grid-core's `IdentKey.schema`, its verdict memo key). It holds the walk cache, the
/// interned member lists of the cached walks' verdict classes (with their
/// verdict memos) and the tags of the lexicons seen. With a [`Remote`]
/// attached, its walk cache is the local tier in front of the family's
/// shared tier on Redis ([`crate::remote`]).
#[derive(Debug)]
pub struct Shared {
    /// The family (`Engine.family`): engines of another family are refused.
    pub family: String,
    pub cache: WalkCache,
    /// The member lists of verdict classes, interned (shared verdict memos).
    pub classes: Classes,
    schemas: Mutex<Vec<String>>,
    /// The shared tier behind `cache`, once attached.
    remote: OnceLock<Arc<Remote>>,
}

impl Shared {
    pub fn new(family: impl Into<String>) -> Self {
        Self {
            family: family.into(),
            cache: WalkCache::default(),
            classes: Classes::default(),
            schemas: Mutex::new(Vec::new()),
            remote: OnceLock::new(),
        }
    }

    /// Put `remote` behind the walk cache; false if another one already is
    /// (a tier is attached once, before the first lookup that should use it).
    pub fn attach(&self, remote: Arc<Remote>) -> bool {
        let kept = self.remote.get_or_init(|| Arc::clone(&remote));
        Arc::ptr_eq(kept, &remote)
    }

    /// The shared tier behind the walk cache, if attached.
    pub fn remote(&self) -> Option<&Arc<Remote>> {
        self.remote.get()
    }

    /// The tag of a lexicon fingerprint: its index among those seen, so a key
    /// carries 8 bytes for it (distinct fingerprints, distinct tags).
    pub fn tag(&self, schema: &str) -> u64 {
        let mut schemas = lock(&self.schemas);
        let at = match schemas.iter().position(|s| s == schema) {
            Some(at) => at,
            None => {
                schemas.push(schema.to_owned());
                schemas.len() - 1
            }
        };
        at as u64
    }
}

/// One grammar's tables, the walk cache and the stack arena its sessions share.
#[derive(Debug)]
pub struct Engine {
    pub tables: EngineTables,
    /// The walk cache and verdict classes, shared with the engine's family
    /// when it was built with a [`Shared`] (else its own).
    pub shared: Arc<Shared>,
    /// The subtree memo every cold walk of this engine goes through.
    pub chunks: Chunks,
    stacks: Mutex<Arc<Mutex<Stacks>>>,
    /// The row memo's cap for new arena generations.
    row_cap: AtomicUsize,
    threads: Threads,
    /// The lexicon's fingerprint (`IdentKey.schema`) and its tag in `shared`.
    schema: String,
    schema_tag: u64,
}

impl Engine {
    /// `schema`: the fingerprint of the lexicon in `tables` (grid-core's
    /// `Lexicon.fingerprint`), which identifier keys carry. `shared`: the
    /// family's shared tier (None: the engine's own); the caller vouches that
    /// `tables` belong to its family.
    pub fn new(
        tables: EngineTables,
        threads: Threads,
        schema: impl Into<String>,
        shared: Option<Arc<Shared>>,
    ) -> Self {
        let arena = tables.arena();
        let schema = schema.into();
        let shared = shared.unwrap_or_else(|| Arc::new(Shared::new("")));
        let schema_tag = shared.tag(&schema);
        Self {
            tables,
            shared,
            chunks: Chunks::default(),
            stacks: Mutex::new(Arc::new(Mutex::new(Stacks::new(arena, ROW_MEMO_BYTES)))),
            row_cap: AtomicUsize::new(ROW_MEMO_BYTES),
            threads,
            schema,
            schema_tag,
        }
    }

    /// Write into `key` the verdict memo key of `allowed` (the allowed set
    /// after a shift) in this engine: the set, then the lexicon's tag.
    pub fn verdict_key_into(&self, allowed: &[u64], key: &mut Vec<u64>) {
        key.clear();
        key.extend_from_slice(allowed);
        key.push(self.schema_tag);
    }

    /// The arena generation a new session interns its stacks in.
    pub fn stacks(&self) -> Arc<Mutex<Stacks>> {
        let mut current = lock(&self.stacks);
        if lock(&current).arena.len() > ARENA_CAP {
            let cap = self.row_cap.load(Ordering::Relaxed);
            *current = Arc::new(Mutex::new(Stacks::new(self.tables.arena(), cap)));
        }
        Arc::clone(&current)
    }

    /// Set the memory caps in bytes: the walk cache (the family's, when
    /// shared), the subtree memo and the row memo (of the current and later
    /// arena generations). Each evicts its least recently used entries at
    /// once if it holds more.
    pub fn set_caps(&self, walks: usize, chunks: usize, rows: usize) {
        self.shared.cache.set_cap(walks);
        self.chunks.set_cap(chunks);
        self.row_cap.store(rows, Ordering::Relaxed);
        lock(&lock(&self.stacks)).set_row_cap(rows);
    }

    /// Bytes held, cap and evictions of the walk cache, the subtree memo and
    /// the current generation's row memo.
    pub fn usage(&self) -> [(usize, usize, u64); 3] {
        let rows = lock(&lock(&self.stacks)).usage();
        [self.shared.cache.usage(), self.chunks.usage(), rows]
    }

    /// The key of a walk (see the module header): a root walk's is its
    /// remainder's normal form unless `raw` (grid-core's `Engine.walk(0,
    /// bytes)` keys by the raw bytes). `scan` is the scan state of a root
    /// walk's remainder when the caller knows it.
    pub fn key_of<'p>(
        &self,
        root: u32,
        pending: &'p [u8],
        scan: Option<&Scan>,
        allowed: &[u64],
        raw: bool,
    ) -> Result<WalkKey<'p>> {
        let g = &*self.tables.grammar;
        let ident = g.ident_position(allowed);
        if root != 0 || raw {
            return Ok(WalkKey {
                root,
                ident,
                form: Form::Raw(pending),
            });
        }
        let scan = match scan {
            Some(s) => *s,
            None => g
                .scan(pending)
                .ok_or_else(|| KernelError::InvalidRemainder {
                    remainder: pending.to_vec(),
                })?,
        };
        let p = g.emittable_candidates(&scan);
        let form = if bits::is_empty(&p) {
            Form::Normal {
                q: scan.q,
                ln: scan.ln,
                p,
                v: &[],
            }
        } else {
            Form::Normal {
                q: scan.q,
                ln: scan.ln,
                p,
                v: &pending[scan.la_len as usize..],
            }
        };
        Ok(WalkKey { root, ident, form })
    }

    /// The lookup bytes of `key` under `namespace` and `allowed`, into `out`:
    /// `ns u64 | kind | root u32 | A | [lexicon tag u64 if ident] | ('N' q u32
    /// [ln i32 if ident] p v  or  'R' tail)`, kind `I` (identifier) or `G`
    /// (generic), fixed-width fields first (A and p have the family's width),
    /// so the bytes are injective over the family's engines.
    pub fn walk_key(&self, out: &mut Vec<u8>, namespace: u64, key: &WalkKey<'_>, allowed: &[u64]) {
        out.clear();
        out.extend_from_slice(&namespace.to_le_bytes());
        out.push(if key.ident { b'I' } else { b'G' });
        out.extend_from_slice(&key.root.to_le_bytes());
        for w in allowed {
            out.extend_from_slice(&w.to_le_bytes());
        }
        if key.ident {
            out.extend_from_slice(&self.schema_tag.to_le_bytes());
        }
        match &key.form {
            Form::Raw(tail) => {
                out.push(b'R');
                out.extend_from_slice(tail);
            }
            Form::Normal { q, ln, p, v } => {
                out.push(b'N');
                out.extend_from_slice(&q.to_le_bytes());
                if key.ident {
                    out.extend_from_slice(&ln.to_le_bytes());
                }
                for w in p {
                    out.extend_from_slice(&w.to_le_bytes());
                }
                out.extend_from_slice(v);
            }
        }
    }

    /// grid-core's `canonical(_key_fields(key))` of `key` under `namespace`
    /// and `allowed`: what an entry id hashes first.
    pub fn canonical_key(&self, namespace: u64, key: &WalkKey<'_>, allowed: &[u64]) -> Vec<u8> {
        let mut c = Canonical::new();
        c.list(if key.ident { 6 } else { 5 })
            .str(if key.ident { "ident" } else { "generic" })
            .uint(namespace)
            .int(i64::from(key.root));
        match &key.form {
            Form::Raw(tail) => {
                c.bytes(tail);
            }
            Form::Normal { q, ln, p, v } => {
                c.list(if key.ident { 4 } else { 3 }).int(i64::from(*q));
                if key.ident {
                    c.int(i64::from(*ln));
                }
                c.uint_words(p).bytes(v);
            }
        }
        c.uint_words(allowed);
        if key.ident {
            c.str(&self.schema);
        }
        c.bytes
    }

    /// Run `f` on the pool of `threads`, or on the calling thread when that
    /// is one thread (no other thread is woken); `f` gets the number of
    /// threads it may spread work over.
    pub fn install<R: Send>(&self, threads: &Threads, f: impl FnOnce(usize) -> R + Send) -> R {
        match threads {
            Threads::Pool(n) if *n <= 1 => f(1),
            Threads::Global => f(rayon::current_num_threads()),
            Threads::Pool(n) => pool(*n).install(|| f(*n)),
        }
    }

    /// One uncached walk (`Engine._walk_from`), its CI part as token ids: a
    /// root walk spread over the engine's threads (or `threads`, when given),
    /// a sub-walk on this thread.
    /// Preconditions: `root` is a trie node; `allowed` has the grammar's width.
    pub fn cold_walk(
        &self,
        root: u32,
        pending: &[u8],
        allowed: &[u64],
        threads: Option<&Threads>,
    ) -> WalkOutput {
        let (g, trie) = (&*self.tables.grammar, &*self.tables.trie);
        let (sub, chunks) = (root != 0, Some(&self.chunks));
        let threads = match sub {
            true => &Threads::Pool(1),
            false => threads.unwrap_or(&self.threads),
        };
        let mut out = WalkOutput::ids(trie);
        self.install(threads, |n| {
            walk_par(
                g,
                trie,
                root as usize,
                pending,
                allowed,
                sub,
                chunks,
                &mut out,
                n,
            )
        });
        out
    }

    /// The walk below `node` (`walk_from`), checked, spread over `threads`
    /// (None: the engine's pool); the same output whatever the threads. It
    /// does not go through the subtree memo: it is the reference the memo is
    /// tested against.
    pub fn walk(
        &self,
        node: i64,
        pending: &[u8],
        allowed: &[u64],
        include_self: bool,
        threads: Option<&Threads>,
    ) -> Result<WalkOutput> {
        let (node, allowed) = self.tables.check_walk(node, allowed)?;
        let (g, trie) = (&*self.tables.grammar, &*self.tables.trie);
        let mut out = WalkOutput::default();
        self.install(threads.unwrap_or(&self.threads), |n| {
            walk_par(
                g,
                trie,
                node,
                pending,
                &allowed,
                include_self,
                None,
                &mut out,
                n,
            )
        });
        Ok(out)
    }

    /// The cached walk of `(root, pending, allowed)` under `namespace`; on a
    /// miss, walked (counted in `ctx.walks`) and published when `ctx.cold`,
    /// else `None`. `scan` is the scan state of a root walk's remainder, when
    /// known.
    pub fn entry(
        &self,
        ctx: &mut Lookup,
        root: u32,
        pending: &[u8],
        scan: Option<&Scan>,
        allowed: &[u64],
    ) -> Result<Option<Arc<Entry>>> {
        let (namespace, cold, buf) = (ctx.namespace, ctx.cold, &mut ctx.key);
        let key = self.key_of(root, pending, scan, allowed, false)?;
        self.walk_key(buf, namespace, &key, allowed);
        if let Some(e) = self.shared.cache.get(buf) {
            self.shared.cache.count(true);
            return Ok(Some(e));
        }
        if !cold {
            return Ok(None);
        }
        self.shared.cache.count(false);
        let (e, walked) = self.miss(namespace, &key, root, pending, allowed, None);
        ctx.walks += usize::from(walked);
        Ok(Some(self.shared.cache.publish(buf, e)))
    }

    /// The entry of a local miss, and whether it was walked here: walked,
    /// or, with a shared tier attached, read from it when there (checked:
    /// [`crate::remote`]), else (missing or rejected) walked and published
    /// under the walker's lock (a rejected entry is overwritten), or, when
    /// another process holds the lock, its entry once there (within the
    /// tier's wait), or, when the lock goes with no entry (its holder died),
    /// walked and published here under the lock taken over, else (at the
    /// wait's end) walked here unpublished. A tier that fails costs a local
    /// walk. Every path gives the same entry content.
    fn miss(
        &self,
        namespace: u64,
        key: &WalkKey<'_>,
        root: u32,
        pending: &[u8],
        allowed: &[u64],
        threads: Option<&Threads>,
    ) -> (Entry, bool) {
        let walk = || {
            let w = self.cold_walk(root, pending, allowed, threads);
            Entry::of_walk(&self.tables.trie, w, &self.shared.classes)
        };
        let Some(remote) = self.shared.remote() else {
            return (walk(), true);
        };
        let canonical = self.canonical_key(namespace, key, allowed);
        let keys = remote.keys(&canonical);
        let (trie, n_terminals) = (&*self.tables.trie, self.tables.grammar.n_terminals());
        let read = || remote.read(&keys, &canonical, trie, n_terminals, &self.shared.classes);
        remote.bump(Counter::Lookups);
        match read() {
            Read::Found(e) => {
                remote.bump(Counter::Hits);
                return (e, false);
            }
            Read::Failed => return (walk(), true),
            Read::Missing => remote.bump(Counter::Misses),
            Read::Rejected => {}
        }
        let publish = |token| {
            let e = walk();
            let id = e.entry_id(&canonical, trie.n_vocab());
            remote.publish(&keys, &token, &e, &id, trie.n_vocab());
            (e, true)
        };
        match remote.try_lock(&keys) {
            Lock::Taken(token) => publish(token),
            Lock::Unavailable => (walk(), true),
            Lock::Held => {
                remote.bump(Counter::Waits);
                let deadline = Instant::now() + remote.settings.wait;
                while Instant::now() < deadline {
                    std::thread::sleep(remote.settings.poll);
                    // The lock before the entry: a holder stores its entry
                    // before it releases, so a lock seen gone and then no
                    // entry means an unpublished holder.
                    let held = remote.lock_held(&keys);
                    match read() {
                        Read::Found(e) => {
                            remote.bump(Counter::WaitHits);
                            return (e, false);
                        }
                        Read::Failed | Read::Rejected => return (walk(), true),
                        Read::Missing => {}
                    }
                    match held {
                        Some(true) => {}
                        None => return (walk(), true),
                        Some(false) => match remote.try_lock(&keys) {
                            Lock::Taken(token) => {
                                remote.bump(Counter::WaitTakeovers);
                                return publish(token);
                            }
                            // Another waiter took it first: wait for its entry.
                            Lock::Held => {}
                            Lock::Unavailable => return (walk(), true),
                        },
                    }
                }
                remote.bump(Counter::WaitTimeouts);
                (walk(), true)
            }
        }
    }

    /// The cold miss of grid-core's `Engine.walk`, whole: key, lookup, walk
    /// (spread over `threads`, None: the engine's pool), CD classes, payload
    /// encoding, entry id and publication, in one call. Returns the entry and
    /// its id (`make_entry(key, ...)`'s, byte for byte). Inputs from a caller
    /// are checked: a trie node, an allowed set within the grammar, a remainder
    /// the automaton does not die in. `raw`: key a root walk by its raw bytes.
    pub fn register(
        &self,
        namespace: u64,
        root: i64,
        pending: &[u8],
        allowed: &[u64],
        raw: bool,
        threads: Option<&Threads>,
    ) -> Result<(Arc<Entry>, [u8; 16])> {
        let (root, allowed) = self.tables.check_walk(root, allowed)?;
        let root = root as u32;
        let key = self.key_of(root, pending, None, &allowed, raw)?;
        let mut buf = Vec::new();
        self.walk_key(&mut buf, namespace, &key, &allowed);
        let found = self.shared.cache.get(&buf);
        self.shared.cache.count(found.is_some());
        let entry = match found {
            Some(e) => e,
            None => {
                let (e, _) = self.miss(namespace, &key, root, pending, &allowed, threads);
                self.shared.cache.publish(&buf, e)
            }
        };
        let canonical = self.canonical_key(namespace, &key, &allowed);
        let id = entry.entry_id(&canonical, self.tables.trie.n_vocab());
        Ok((entry, id))
    }

    /// The verdict of a class with `members` under the allowed set after
    /// shifting its terminal, given as its memo key ([`Engine::verdict_key_into`]:
    /// the set, then the lexicon's tag): memoized, else computed when `ctx.cold`
    /// (counted as a walk), else `None`.
    ///
    /// Each member's sub-walk (`walk_from` of its subtree from its tail) is
    /// walked in place through the subtree memo, its CI part gathered as ids
    /// (members whose subtrees hold [`PAR_VERDICT_NODES`] nodes or more are
    /// cut into runs walked on the engine's threads, the outputs concatenated
    /// in member order). A member's walk is not cached on its own: the verdict
    /// memo (shared by every class with these members, see
    /// [`crate::cache::Classes`]) already holds what it contributes, and its
    /// large subtrees are in the subtree memo.
    pub fn verdict(
        &self,
        ctx: &mut Lookup,
        members: &Members,
        key: &[u64],
    ) -> Result<Option<Arc<Verdict>>> {
        let (memo, allowed) = (key, &key[..key.len() - 1]);
        if let Some(v) = members.verdict(memo) {
            return Ok(Some(v));
        }
        if !ctx.cold {
            return Ok(None);
        }
        ctx.walks += 1;
        let (g, trie) = (&*self.tables.grammar, &*self.tables.trie);
        let chunks = Some(&self.chunks);
        let list: Vec<(u32, &[u8])> = members.iter().collect();
        // Members walked in order, run by run; the runs' outputs concatenated.
        let walk_run = |a: &mut Allowed, run: &[(u32, &[u8])]| {
            let mut walk = WalkOutput::ids(trie);
            for &(node, tail) in run {
                walk_into(g, trie, node as usize, tail, a, true, chunks, &mut walk);
            }
            walk
        };
        let mut a = g.allowed_sets(allowed);
        let mut walk = self.install(&self.threads, |threads| {
            let nodes: usize = list
                .iter()
                .map(|&(n, _)| trie.node(n as usize).size as usize)
                .sum();
            if threads <= 1 || nodes < PAR_VERDICT_NODES {
                return walk_run(&mut a, &list);
            }
            let runs = member_runs(trie, &list, 8 * threads);
            let parts: Vec<WalkOutput> = runs
                .par_iter()
                .map(|run| walk_run(&mut a.clone(), &list[run.clone()]))
                .collect();
            let mut walk = WalkOutput::ids(trie);
            for part in &parts {
                walk.append(part);
            }
            walk
        });
        let deeper = walk.cd.iter().map(|c| (c.node, c.terminal, walk.tail(c)));
        let verdict = Verdict {
            deeper: group(deeper, &self.shared.classes),
            ci: walk
                .ids
                .take()
                .expect("walked in id mode")
                .into_payload(trie.n_vocab()),
        };
        Ok(Some(members.remember(memo, verdict)))
    }
}

/// The members of a verdict class cut into at most about `n` runs of
/// consecutive members whose subtrees hold about equal numbers of trie
/// nodes, in order.
fn member_runs(trie: &Trie, members: &[(u32, &[u8])], n: usize) -> Vec<Range<usize>> {
    let size = |&(node, _): &(u32, &[u8])| trie.node(node as usize).size as usize;
    let total: usize = members.iter().map(size).sum();
    let target = total.div_ceil(n.max(1)).max(1);
    let mut runs = Vec::new();
    let (mut lo, mut acc) = (0, 0);
    for (i, m) in members.iter().enumerate() {
        acc += size(m);
        if acc >= target || i + 1 == members.len() {
            runs.push(lo..i + 1);
            (lo, acc) = (i + 1, 0);
        }
    }
    runs
}

/// How one fill looks walks up: its namespace, whether it may walk, scratch
/// for keys, and how many walks it did.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    pub namespace: u64,
    pub cold: bool,
    pub key: Vec<u8>,
    pub walks: usize,
}

/// What a walk's remainder contributes to its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form<'p> {
    /// A root walk: the scanner normal form `(q, ln, p, v)` of its remainder
    /// (`p`: the last accept's candidates some stack can pick; `p` and `v`
    /// empty when there are none).
    Normal {
        q: u32,
        ln: i32,
        p: Vec<u64>,
        v: &'p [u8],
    },
    /// A CD sub-walk (or a root walk keyed by its bytes): the raw bytes.
    Raw(&'p [u8]),
}

/// A walk's key, less the namespace and allowed set that accompany it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkKey<'p> {
    pub root: u32,
    /// An identifier position: a lexicon category is allowed or ignored.
    pub ident: bool,
    pub form: Form<'p>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{DENSE, SPARSE};

    fn ids(encoding: u8, data: &[u32]) -> Payload {
        Payload {
            encoding,
            data: data.into(),
        }
    }

    fn verdict(data: &[u32]) -> Arc<Verdict> {
        Arc::new(Verdict {
            ci: ids(SPARSE, data),
            deeper: Vec::new(),
        })
    }

    /// The row `RowIndex::row` finds under `serial` and `parts` without building one.
    fn found(index: &mut RowIndex, serial: u64, parts: &[Arc<Verdict>]) -> Option<Arc<Row>> {
        let mut built = false;
        let row = index.row(serial, parts, || {
            built = true;
            ids(DENSE, &[u32::MAX])
        });
        (!built).then_some(row)
    }

    #[test]
    fn rows_equal_in_content_are_one_row() {
        let mut index = RowIndex::new(1 << 20);
        let a = index.row(1, &[], || ids(DENSE, &[0b1011, 7, 0]));
        let b = index.row(2, &[], || ids(DENSE, &[0b1011, 7, 0]));
        assert!(
            Arc::ptr_eq(&a, &b),
            "equal ids, one row (its audit fields once)"
        );
        let c = index.row(3, &[], || ids(SPARSE, &[0b1011, 7, 0]));
        let d = index.row(4, &[], || ids(DENSE, &[0b1011, 7, 1]));
        assert!(!Arc::ptr_eq(&a, &c) && !Arc::ptr_eq(&a, &d));
        assert_eq!(
            (c.ids.encoding, &*d.ids.data),
            (SPARSE, &[0b1011, 7, 1][..])
        );
        assert_ne!(a.ids.content_hash(), c.ids.content_hash());
        assert_ne!(a.ids.content_hash(), d.ids.content_hash());
    }

    #[test]
    fn a_colliding_hash_never_gives_another_rows_ids() {
        let mut index = RowIndex::new(1 << 20);
        let a = index.row_under(42, ids(DENSE, &[1, 2]));
        let b = index.row_under(42, ids(DENSE, &[1, 3]));
        assert_eq!(
            &*b.ids.data,
            &[1, 3][..],
            "the index found a row with other ids"
        );
        assert!(!Arc::ptr_eq(&a, &b));
        // The newer row now holds the slot; the older one is still itself.
        assert!(Arc::ptr_eq(&b, &index.row_under(42, ids(DENSE, &[1, 3]))));
        assert_eq!(&*a.ids.data, &[1, 2][..]);
    }

    #[test]
    fn rows_are_found_by_their_root_and_verdicts() {
        let mut index = RowIndex::new(1 << 20);
        let (v, w) = (verdict(&[1]), verdict(&[1]));
        let row = index.row(7, &[Arc::clone(&v), Arc::clone(&w)], || ids(SPARSE, &[1]));
        let kept = found(&mut index, 7, &[Arc::clone(&v), Arc::clone(&w)]);
        assert!(kept.is_some_and(|f| Arc::ptr_eq(&f, &row)));
        // Another root, other verdicts (equal in content), another order: not found.
        assert!(found(&mut index, 8, &[Arc::clone(&v), Arc::clone(&w)]).is_none());
        assert!(found(&mut index, 7, &[Arc::clone(&v), verdict(&[1])]).is_none());
        assert!(found(&mut index, 7, &[Arc::clone(&w), Arc::clone(&v)]).is_none());
        assert!(found(&mut index, 7, &[Arc::clone(&v)]).is_none());
        // A dropped verdict's address is pinned: a new verdict never takes it.
        let address = Arc::as_ptr(&w) as usize;
        drop(w);
        let fresh: Vec<Arc<Verdict>> = (0..64).map(|_| verdict(&[2])).collect();
        assert!(fresh.iter().all(|f| Arc::as_ptr(f) as usize != address));
        // The row itself is not kept alive by the index.
        drop(row);
        assert!(found(&mut index, 7, &[Arc::clone(&v)]).is_none());
    }

    #[test]
    fn a_slot_hashes_only_the_configuration_it_memoized() {
        let kept = Kept {
            row: Arc::new(Row::new(ids(SPARSE, &[1]))),
            config: OnceLock::new(),
        };
        let first = crate::audit::config_hash(7, 3, 99);
        assert_eq!(kept.config_hash(7, 3, 99), Some(first), "the first asks");
        assert_eq!(kept.config_hash(7, 3, 99), Some(first), "and again");
        // Another configuration of the same slot: its chain computes its hash.
        for other in [(8, 3, 99), (7, 4, 99), (7, 3, 98)] {
            assert_eq!(
                kept.config_hash(other.0, other.1, other.2),
                None,
                "{other:?}"
            );
        }
    }

    #[test]
    fn the_index_counts_its_entries_and_takes_its_share_of_the_cap() {
        let mut index = RowIndex::new(INDEX_SHARE * 1000);
        assert_eq!((index.by_parts.cap(), index.by_content.cap()), (1000, 1000));
        let parts = [verdict(&[1]), verdict(&[2])];
        let _row = index.row(1, &parts, || ids(SPARSE, &[1, 2]));
        // By parts: the entry and 16 bytes per verdict; by content: the entry.
        assert_eq!(index.by_parts.bytes(), INDEX_ENTRY_BYTES + 16 * 2);
        assert_eq!(index.by_content.bytes(), INDEX_ENTRY_BYTES);
        index.set_row_cap(INDEX_SHARE * 3000);
        assert_eq!((index.by_parts.cap(), index.by_content.cap()), (3000, 3000));
    }

    #[test]
    fn a_pool_has_the_threads_asked_for() {
        for n in [2, 3, 2] {
            assert_eq!(pool(n).current_num_threads(), n);
        }
        assert!(Arc::ptr_eq(&pool(3), &pool(3)), "built once per size");
    }

    #[test]
    fn member_runs_cut_the_members_in_order_into_about_n_runs_of_equal_nodes() {
        // Subtrees of 1 to 27 nodes: "x", "x" + one letter, "x" + two letters.
        let mut words: Vec<Vec<u8>> = Vec::new();
        for (i, x) in (b'a'..=b'z').enumerate() {
            words.push(vec![x]);
            for y in b'a'..b'a' + (i % 5) as u8 {
                words.push(vec![x, y]);
                if i % 3 == 0 {
                    words.push(vec![x, y, b'q']);
                }
            }
        }
        let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let trie = Trie::new(crate::trie::RawTrie::pack(&refs, &vec![false; refs.len()])).unwrap();
        // The root's children, each subtree in turn.
        let mut members: Vec<(u32, &[u8])> = Vec::new();
        let mut child = 1;
        while child < trie.n_nodes() {
            members.push((child as u32, &b""[..]));
            child += trie.node(child).size as usize;
        }
        assert_eq!(members.len(), 26);
        let size = |r: &Range<usize>| -> usize {
            members[r.clone()]
                .iter()
                .map(|&(n, _)| trie.node(n as usize).size as usize)
                .sum()
        };
        let total: usize = size(&(0..members.len()));
        for n in [1, 2, 3, 4, 8, 26, 100] {
            let runs = member_runs(&trie, &members, n);
            // A partition of the members, in order, into non-empty runs.
            assert_eq!(runs.first().map(|r| r.start), Some(0), "n = {n}");
            assert_eq!(runs.last().map(|r| r.end), Some(members.len()), "n = {n}");
            assert!(runs.windows(2).all(|w| w[0].end == w[1].start), "n = {n}");
            assert!(runs.iter().all(|r| !r.is_empty()), "n = {n}");
            // Each run but the last holds at least its share of the nodes,
            // so there are at most n runs.
            let target = total.div_ceil(n).max(1);
            assert!(
                runs[..runs.len() - 1].iter().all(|r| size(r) >= target),
                "n = {n}"
            );
            assert!(runs.len() <= n, "{} runs for n = {n}", runs.len());
            // A run closes as soon as it holds its share.
            assert!(runs
                .iter()
                .all(|r| r.len() == 1 || size(&(r.start..r.end - 1)) < target));
        }
        assert_eq!(member_runs(&trie, &members, 1), vec![0..26]);
    }

    #[test]
    fn lexicon_tags_are_the_order_of_first_sight() {
        let shared = Shared::new("family");
        assert_eq!(
            ["s0", "s1", "s0", "s2", "s1"].map(|s| shared.tag(s)),
            [0, 1, 0, 2, 1]
        );
        assert!(shared.remote().is_none());
    }

    #[test]
    fn the_index_keeps_no_row_alive_and_follows_the_memo_cap() {
        let mut index = RowIndex::new(1 << 20);
        let v = verdict(&[5]);
        let first = index.row(1, &[Arc::clone(&v)], || ids(DENSE, &[5]));
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the index held the row");
        assert!(found(&mut index, 1, &[Arc::clone(&v)]).is_none());
        let again = index.row(1, &[Arc::clone(&v)], || ids(DENSE, &[5]));
        assert_eq!(&*again.ids.data, &[5][..]);
        index.set_row_cap(0);
        assert_eq!(
            (index.by_content.usage().1, index.by_parts.usage().1),
            (0, 0)
        );
        let other = index.row(1, &[Arc::clone(&v)], || ids(DENSE, &[5]));
        assert!(
            !Arc::ptr_eq(&again, &other),
            "a memo without room indexes nothing"
        );
        assert!(index.by_content.is_empty() && index.by_parts.is_empty());
        assert!(found(&mut index, 1, &[v]).is_none());
    }
}
