//! A serving session: one request's guide, the whole step in-kernel.
//!
//! Mirrors `grid_core.guide.GridGuide` (DESIGN.md section 8), with the same
//! contract, the same masks and the same audit records bit for bit:
//!
//! - [`Session::accept_token`]: lexer advance of the token's bytes and
//!   shift/reduce on the interned stack arena (`GridGuide.accept_token`); a
//!   token the mask refuses, a special token, EOS before a sentence or any
//!   token after EOS is a [`KernelError::Guide`] and changes nothing. With
//!   audit on, an accepted token appends its record (configuration hash,
//!   mask entry id and blocked count of the step's mask, token, kind) to the
//!   session's [`Chain`]; the step's mask is the one its last fill wrote, or
//!   is filled into scratch first.
//! - [`Session::fill`]: the packed mask of the current configuration into one
//!   row of a caller's bitmask (`GridGuide.mask`): the CI words of the root
//!   walk's cache entry, then per CD verdict class one shift on the live stack
//!   and its memoized verdict, then the EOS ids iff the EOS gate holds. The CI
//!   and CD ids of (root entry, stack) are memoized as one packed row in the
//!   stack arena's generation ([`Stacks`]), so a configuration seen before is
//!   one copy. Every lookup happens before the first write, so an error (an
//!   empty mask) leaves the row untouched. A fill that may not walk (`cold =
//!   false`) reports a cache miss instead of walking, so the caller can
//!   release the GIL first.
//! - [`Session::rollback`], [`Session::fork`], [`Session::is_terminated`],
//!   [`Session::eos_allowed`]: as on `GridGuide`; rollback drops the
//!   records of the undone steps, a fork copies the chain.
//!
//! Audit cost. A step's configuration hash is kept as its parts (the stack
//! node's rolling hash, the remainder's length and polynomial digest, updated
//! per token in O(|token|)); the mask entry id and blocked count of a row
//! are memoized beside the row memo, keyed by (root entry, stack, EOS), so a
//! warm audited step hashes nothing: the record hashes are chained when the
//! records are read ([`crate::audit`]).
//!
//! State. A session shares its engine (tables, trie, walk cache, stack arena);
//! what it owns is its history: the bytes accepted so far and, per step, the
//! stack node, where the remainder starts in those bytes and its scan state
//! (the remainder is always a suffix of the output). The live state of a step
//! is a node id (the stack's cells live in the shared arena, O(nesting depth)
//! of them on the path) and a scan state; the history that `rollback` needs
//! grows by one fixed-size record and the token's bytes per step.

use std::sync::{Arc, Mutex};

use crate::audit::{extend_digest, mask_entry_id, Chain, Kind, Record};
use crate::cache::{Class, Payload, Verdict, SPARSE};
use crate::engine::{lock, Engine, Lookup, Stacks};
use crate::error::{KernelError, Result};
use crate::events::{At, Emission, Event, EventTables, Tracker};
use crate::parser::NodeId;
use crate::scanner::{Scan, START};

/// One step of a session's history.
#[derive(Clone, Copy, Debug)]
struct Step {
    node: NodeId,
    /// The remainder is `output[rem_start..out_len]`.
    rem_start: u32,
    out_len: u32,
    scan: Scan,
    /// EOS has been accepted.
    terminated: bool,
    /// The EOS gate of this configuration, once computed.
    eos: Option<bool>,
    /// The remainder's polynomial digest (`Config.digest`).
    digest: u64,
    /// The stack's rolling hash (`Node.hash`).
    stack_hash: u64,
    /// The entry id and blocked count of this configuration's mask, once filled.
    mask: Option<([u8; 16], u32)>,
    /// This configuration's hash, when its fill found it memoized with the
    /// row ([`crate::engine::Row::config_hash`]).
    config: Option<u64>,
}

/// What [`Session::fill`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filled {
    /// The row holds the mask, copied from the row memo (cached walk, stack
    /// seen before).
    Row,
    /// The row holds the mask; the root walk was cached, the CD verdicts
    /// were evaluated against the stack (their sub-walks cached).
    Classes,
    /// The row holds the mask; some walk was not cached and was walked.
    Walked,
    /// A walk is not cached and the fill was not allowed to walk; nothing
    /// was written.
    Cold,
}

/// One request's guide over a shared [`Engine`] (see the module header).
#[derive(Clone, Debug)]
pub struct Session {
    engine: Arc<Engine>,
    stacks: Arc<Mutex<Stacks>>,
    output: Vec<u8>,
    steps: Vec<Step>,
    /// The namespace and scratch of walk lookups.
    lookup: Lookup,
    /// The audit records of the history (None: audit off).
    chain: Option<Chain>,
    /// The parse event stream (None: events off; [`crate::events`]).
    events: Option<Box<Tracker>>,
    /// The scanner emissions of the token being accepted (events on).
    emissions: Vec<Emission>,
}

impl Session {
    /// A session at the initial configuration; its walks are cached under
    /// `namespace` (grid-core's cache namespace); `audit` turns the record
    /// chain on. Its output is refused past 4 GiB (offsets are `u32`).
    pub fn new(engine: Arc<Engine>, namespace: u64, audit: bool) -> Result<Self> {
        let stacks = engine.stacks();
        let root = lock(&stacks).arena.from_states(&[0])?;
        let mut steps = Vec::with_capacity(64);
        steps.push(Step {
            node: root,
            rem_start: 0,
            out_len: 0,
            scan: START,
            terminated: false,
            eos: None,
            digest: 0,
            stack_hash: 0, // the bottom of every stack hashes to 0
            mask: None,
            config: None,
        });
        Ok(Self {
            engine,
            stacks,
            output: Vec::with_capacity(256),
            steps,
            lookup: Lookup {
                namespace,
                ..Lookup::default()
            },
            chain: audit.then(Chain::default),
            events: None,
            emissions: Vec::new(),
        })
    }

    /// This session with a parse event stream of `tables` (see
    /// [`crate::events`]); only before the first token.
    pub fn with_events(mut self, tables: Arc<EventTables>) -> Result<Self> {
        if self.steps() > 0 {
            return Err(self.guide_error(None, "events are turned on before the first token"));
        }
        let s = self.current();
        let mut guard = lock(&self.stacks);
        let stacks = &mut *guard;
        let at = At {
            grammar: &self.engine.tables.grammar,
            node: s.node,
            scan: s.scan,
            pos: 0,
            rem_len: 0,
            step: 0,
        };
        let tracker = Tracker::new(tables, &mut stacks.arena, &mut stacks.plans, &at)?;
        drop(guard);
        self.events = Some(Box::new(tracker));
        self.emissions.reserve(16);
        Ok(self)
    }

    /// The parse events determined so far (None: events off).
    pub fn events(&self) -> Option<&[Event]> {
        self.events.as_deref().map(Tracker::events)
    }

    fn current(&self) -> Step {
        *self.steps.last().expect("a session has its initial step")
    }

    fn remainder(&self, s: &Step) -> &[u8] {
        &self.output[s.rem_start as usize..s.out_len as usize]
    }

    /// Words of one bitmask row: `ceil(n_vocab / 32)`.
    pub fn n_words(&self) -> usize {
        self.engine.tables.trie.n_words()
    }

    /// Tokens accepted so far (EOS included).
    pub fn steps(&self) -> usize {
        self.steps.len() - 1
    }

    /// EOS has been accepted.
    pub fn is_terminated(&self) -> bool {
        self.current().terminated
    }

    /// The current configuration: the stack's LALR states (bottom first) and
    /// the remainder.
    pub fn config(&self) -> (Vec<u32>, Vec<u8>) {
        let s = self.current();
        (
            lock(&self.stacks).arena.states(s.node),
            self.remainder(&s).to_vec(),
        )
    }

    /// The current configuration as the lexer holds it, with the arena
    /// generation its stack node lives in (what [`crate::reserve::Reserve`]
    /// reads).
    pub fn configuration(&self) -> (Arc<Mutex<Stacks>>, crate::lexer::Config) {
        let s = self.current();
        let config = crate::lexer::Config {
            node: s.node,
            remainder: self.remainder(&s).to_vec(),
            scan: s.scan,
        };
        (Arc::clone(&self.stacks), config)
    }

    /// The engine this session guides over.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// A key of the current step's mask: the stack's LALR states and the
    /// remainder's scanner normal form `(q, ln, p, v)` (grid-core's
    /// `Config.normal`; `v` empty when `p` is). Equal keys, equal masks and
    /// EOS gates (OBL-KEY1); its size is O(stack depth + |v|), never that of a
    /// long pending lexeme (requirement R: a row cache keyed by it stays O(1)
    /// per token inside a string literal).
    pub fn mask_key(&self) -> (Vec<u32>, u32, i32, Vec<u64>, &[u8]) {
        let s = self.current();
        let p = self.engine.tables.grammar.emittable_candidates(&s.scan);
        let rem = self.remainder(&s);
        let v = if crate::bits::is_empty(&p) {
            &rem[..0]
        } else {
            &rem[s.scan.la_len as usize..]
        };
        let states = lock(&self.stacks).arena.states(s.node);
        (states, s.scan.q, s.scan.ln, p, v)
    }

    fn guide_error(&self, token: Option<i64>, reason: impl Into<String>) -> KernelError {
        KernelError::guide(self.steps(), token, reason)
    }

    /// The EOS gate of the current configuration (memoized per step).
    fn gate(&mut self) -> Result<bool> {
        let s = self.current();
        if let Some(eos) = s.eos {
            return Ok(eos);
        }
        let g = &*self.engine.tables.grammar;
        let mut stacks = lock(&self.stacks);
        let arena = &mut stacks.arena;
        let eos = if s.rem_start == s.out_len {
            arena.accepts(s.node)?
        } else if s.scan.la_len == 0 {
            false // a remainder with no accepted prefix cannot finalize
        } else {
            let remainder = &self.output[s.rem_start as usize..s.out_len as usize];
            g.eos_allowed_at(arena, s.node, &s.scan, remainder)?
        };
        drop(stacks);
        self.steps.last_mut().expect("initial step").eos = Some(eos);
        Ok(eos)
    }

    /// EOS is legal now (`GridGuide.eos_allowed`): not terminated, and the
    /// output is a sentence.
    pub fn eos_allowed(&mut self) -> Result<bool> {
        Ok(!self.is_terminated() && self.gate()?)
    }

    /// Audit is on.
    pub fn audited(&self) -> bool {
        self.chain.is_some()
    }

    /// Make sure the current step's mask entry id and blocked count are known
    /// (audit on, not terminated), filling into scratch if no fill did. `cold`
    /// as in [`Self::fill`]: `false` means a missing walk returns `Ok(false)`.
    pub fn prepare_record(&mut self, cold: bool) -> Result<bool> {
        if self.chain.is_none() || self.is_terminated() || self.current().mask.is_some() {
            return Ok(true);
        }
        let mut scratch = vec![0u32; self.n_words()];
        Ok(self.fill(&mut scratch, cold)? != Filled::Cold)
    }

    /// The audit fields of the current step's mask, once a fill has computed
    /// them: (configuration hash, mask entry id, blocked count).
    pub fn step_audit(&self) -> Option<(u64, [u8; 16], u32)> {
        let (id, blocked) = self.current().mask?;
        Some((self.config_hash(), id, blocked))
    }

    /// The configuration hash of the current step (`Config.hash`).
    pub fn config_hash(&self) -> u64 {
        let s = self.current();
        s.config.unwrap_or_else(|| {
            crate::audit::config_hash(s.stack_hash, u64::from(s.out_len - s.rem_start), s.digest)
        })
    }

    /// The audit chain (None: audit off).
    pub fn chain(&mut self) -> Option<&mut Chain> {
        self.chain.as_mut()
    }

    /// Append the record of taking `token` at the current step (audit on;
    /// [`Self::prepare_record`] has run).
    fn record(&mut self, token: u32, kind: Kind) {
        if self.chain.is_none() {
            return;
        }
        let s = self.current();
        let (entry_id, blocked) = s.mask.expect("prepare_record fills the step's mask");
        let chain = self.chain.as_mut().expect("audit on");
        debug_assert_eq!(chain.len(), self.steps.len() - 1);
        chain.push(Record {
            stack: s.stack_hash,
            rem_len: u64::from(s.out_len - s.rem_start),
            rem_digest: s.digest,
            entry_id,
            token,
            blocked,
            kind,
            config: s.config,
        });
    }

    /// Accept one token (`GridGuide.accept_token`); see the module header.
    /// `kind` is the audit record's (EOS is always recorded as `eos`).
    pub fn accept_token(&mut self, token: i64, kind: Kind) -> Result<()> {
        let trie = Arc::clone(&self.engine.tables.trie);
        if self.is_terminated() {
            return Err(self.guide_error(Some(token), "the guide has already accepted EOS"));
        }
        let Some(id) = usize::try_from(token).ok().filter(|&t| t < trie.n_vocab()) else {
            return Err(self.guide_error(Some(token), "outside the vocabulary"));
        };
        let s = self.current();
        if trie.eos_ids().contains(&(id as u32)) {
            if !self.gate()? {
                return Err(self.guide_error(Some(token), "EOS before the output is a sentence"));
            }
            self.prepare_record(true)?;
            self.record(id as u32, Kind::Eos);
            if let Some(tracker) = self.events.as_deref_mut() {
                let g = &*self.engine.tables.grammar;
                let emissions = &mut self.emissions;
                emissions.clear();
                let arena = &mut lock(&self.stacks).arena;
                let ok = g.finalize_with(
                    arena,
                    s.node,
                    s.scan,
                    &self.output,
                    s.rem_start as usize,
                    |t, a, b| emissions.push((t, a, b)),
                )?;
                debug_assert!(ok, "the EOS gate held");
                tracker.finish(g, emissions, self.steps.len() as u32);
            }
            self.steps.push(Step {
                terminated: true,
                eos: Some(true),
                mask: None,
                config: None,
                ..s
            });
            return Ok(());
        }
        let spelling = trie.spelling(id);
        if spelling.is_empty() {
            return Err(self.guide_error(Some(token), "special tokens are never admitted"));
        }
        if self.output.len() + spelling.len() > u32::MAX as usize {
            return Err(self.guide_error(Some(token), "the output would exceed 4 GiB"));
        }
        // The record's mask, made first (a fill reads the current step); its
        // error is raised only for a token the step admits: at a dead end (an
        // empty mask) every token is refused, as by the reference guide.
        let prepared = self.prepare_record(true);
        let engine = Arc::clone(&self.engine);
        let g = &*engine.tables.grammar;
        let from = self.output.len();
        self.output.extend_from_slice(spelling);
        let mut stacks = lock(&self.stacks);
        let arena = &mut stacks.arena;
        let on = self.events.is_some();
        let emissions = &mut self.emissions;
        emissions.clear();
        let read = g.read_with(
            arena,
            s.node,
            s.scan,
            &self.output,
            s.rem_start as usize,
            from,
            |t, a, b| {
                if on {
                    emissions.push((t, a, b));
                }
            },
        )?;
        let next = match read {
            Some((node, start, scan)) => {
                let empty = start == self.output.len();
                g.is_viable(arena, node, &scan, empty)?
                    .then(|| (node, start, scan, arena.hash(node)))
            }
            None => None,
        };
        if let (Some(_), Err(e)) = (next, &prepared) {
            self.output.truncate(from);
            return Err(e.clone());
        }
        if let (Some((node, start, scan, _)), Some(tracker)) = (next, self.events.as_deref_mut()) {
            let at = At {
                grammar: g,
                node,
                scan,
                pos: start,
                rem_len: self.output.len() - start,
                step: self.steps.len() as u32,
            };
            let stacks = &mut *stacks;
            let advanced =
                tracker.advance(&mut stacks.arena, &mut stacks.plans, &self.emissions, &at);
            if let Err(e) = advanced {
                tracker.truncate(self.steps.len() - 1);
                self.output.truncate(from);
                return Err(e);
            }
        }
        drop(stacks);
        let Some((node, start, scan, stack_hash)) = next else {
            self.output.truncate(from);
            let reason = format!("{} is not in the mask", crate::escape_bytes(spelling));
            return Err(self.guide_error(Some(token), reason));
        };
        let digest = if start == s.rem_start as usize {
            extend_digest(s.digest, &self.output[from..])
        } else {
            extend_digest(0, &self.output[start..])
        };
        self.record(id as u32, kind);
        self.steps.push(Step {
            node,
            rem_start: start as u32,
            out_len: self.output.len() as u32,
            scan,
            terminated: false,
            eos: None,
            digest,
            stack_hash,
            mask: None,
            config: None,
        });
        Ok(())
    }

    /// Write the mask of the current configuration into `row` (see the module
    /// header). `row` has `ceil(n_vocab / 32)` words.
    pub fn fill(&mut self, row: &mut [u32], cold: bool) -> Result<Filled> {
        let n_words = self.engine.tables.trie.n_words();
        if row.len() != n_words {
            return Err(KernelError::BufferSize {
                expected: n_words,
                got: row.len(),
                unit: "32-bit words",
            });
        }
        if self.is_terminated() {
            return Err(self.guide_error(None, "the guide has accepted EOS; it has no next mask"));
        }
        let s = self.current();
        let engine = Arc::clone(&self.engine);
        let allowed = lock(&self.stacks).arena.allowed(s.node)?.to_vec();
        let rem = &self.output[s.rem_start as usize..s.out_len as usize];
        self.lookup.cold = cold;
        self.lookup.walks = 0;
        let Some(root) = engine.entry(&mut self.lookup, 0, rem, Some(&s.scan), &allowed)? else {
            return Ok(Filled::Cold);
        };
        let kept = lock(&self.stacks).row(&root, s.node);
        let memo_hit = kept.is_some();
        let kept = match kept {
            Some(kept) => kept,
            None => {
                let mut parts: Vec<Arc<Verdict>> = Vec::new();
                let mut walk = Gather {
                    engine: &engine,
                    stacks: &self.stacks,
                    lookup: &mut self.lookup,
                    parts: &mut parts,
                    key: Vec::new(),
                };
                if !walk.classes(s.node, &root.classes)? {
                    return Ok(Filled::Cold);
                }
                let mut stacks = lock(&self.stacks);
                let union = || union(&root.ci, &parts, n_words);
                let memo = stacks.index().row(root.serial, &parts, union);
                stacks.remember_row(&root, s.node, memo)
            }
        };
        let memo = &kept.row;
        let ids = &memo.ids;
        let filled = match (memo_hit, self.lookup.walks) {
            (true, _) => Filled::Row,
            (false, 0) => Filled::Classes,
            _ => Filled::Walked,
        };
        let eos = self.gate()?;
        if !eos && ids.is_empty() {
            return Err(KernelError::EmptyMask { step: self.steps() });
        }
        ids.write(row);
        if eos && !crate::planted("fill-skips-eos") {
            for &id in engine.tables.trie.eos_ids() {
                row[id as usize / 32] |= 1 << (id % 32);
            }
        }
        if self.chain.is_some() && self.current().mask.is_none() {
            let mask = *memo.audit[usize::from(eos)].get_or_init(|| {
                let admitted: u32 = row.iter().map(|w| w.count_ones()).sum();
                let n_vocab = engine.tables.trie.n_vocab() as u32;
                (mask_entry_id(row), n_vocab - admitted)
            });
            let s = self.current();
            let config =
                kept.config_hash(s.stack_hash, u64::from(s.out_len - s.rem_start), s.digest);
            let step = self.steps.last_mut().expect("initial step");
            step.mask = Some(mask);
            step.config = config;
        }
        Ok(filled)
    }

    /// How many leading `tokens` would be accepted (`GridGuide.validate_tokens`):
    /// accepted with audit off, then rolled back; the session is unchanged.
    pub fn validate_tokens(&mut self, tokens: &[i64]) -> Result<usize> {
        let chain = self.chain.take();
        let events = self.events.take();
        let mut n = 0;
        for &t in tokens {
            if self.accept_token(t, Kind::Sampled).is_err() {
                break;
            }
            n += 1;
        }
        let undone = self.rollback(n);
        self.chain = chain;
        self.events = events;
        undone.map(|()| n)
    }

    /// The bytes accepted so far (EOS excluded).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// Undo the last `n` accepted tokens (`GridGuide.rollback`).
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.steps() {
            let reason = format!("cannot roll back {n} of {} tokens", self.steps());
            return Err(self.guide_error(None, reason));
        }
        let n = if n > 0 && crate::planted("rollback-keeps-one-cell") {
            n - 1
        } else {
            n
        };
        self.steps.truncate(self.steps.len() - n);
        let len = self.current().out_len as usize;
        self.output.truncate(len);
        let kept = self.steps();
        if let Some(chain) = self.chain.as_mut() {
            chain.truncate(kept);
        }
        if let Some(tracker) = self.events.as_deref_mut() {
            tracker.truncate(kept);
        }
        Ok(())
    }

    /// Assert the session's invariants (for tests): the history starts at
    /// the root with nothing read, each step's remainder lies within its
    /// output, outputs only grow along the history, the output buffer ends
    /// where the last step does, only the last step may be terminated, and
    /// the shared arena is consistent.
    pub fn check_invariants(&self) {
        let first = self.steps[0];
        assert_eq!((first.rem_start, first.out_len), (0, 0));
        for w in self.steps.windows(2) {
            assert!(w[0].out_len <= w[1].out_len);
            assert!(!w[0].terminated, "a step after EOS");
        }
        for s in &self.steps {
            assert!(s.rem_start <= s.out_len);
        }
        assert_eq!(self.current().out_len as usize, self.output.len());
        let stacks = lock(&self.stacks);
        for s in &self.steps {
            let rem = &self.output[s.rem_start as usize..s.out_len as usize];
            assert_eq!(s.digest, extend_digest(0, rem), "a step's remainder digest");
            assert_eq!(
                s.stack_hash,
                stacks.arena.hash(s.node),
                "a step's stack hash"
            );
        }
        drop(stacks);
        if let Some(chain) = &self.chain {
            assert_eq!(chain.len(), self.steps(), "one record per accepted token");
        }
        lock(&self.stacks).arena.check_invariants();
    }

    /// An independent session at the same point (`GridGuide.fork`): it
    /// shares the engine and the arena, and copies the history.
    pub fn fork(&self) -> Self {
        self.clone()
    }
}

/// The CD verdicts of one fill, level by level (`Engine.compute_mask`).
struct Gather<'a> {
    engine: &'a Engine,
    stacks: &'a Mutex<Stacks>,
    lookup: &'a mut Lookup,
    parts: &'a mut Vec<Arc<Verdict>>,
    /// The current class's verdict key ([`Engine::verdict_key_into`]), one
    /// buffer for the whole fill.
    key: Vec<u64>,
}

impl Gather<'_> {
    /// Shift each class's terminal on `node` and collect its verdict, then
    /// the verdicts of the classes found one shift deeper. `false`: a walk is
    /// missing and the fill may not walk.
    fn classes(&mut self, node: NodeId, classes: &[Class]) -> Result<bool> {
        for class in classes {
            let shifted = {
                let arena = &mut lock(self.stacks).arena;
                let shifted = arena.shift(node, class.terminal as usize)?;
                self.engine
                    .verdict_key_into(arena.allowed(shifted)?, &mut self.key);
                shifted
            };
            let v = self
                .engine
                .verdict(self.lookup, &class.members, &self.key)?;
            let Some(v) = v else {
                return Ok(false);
            };
            if !v.deeper.is_empty() && !self.classes(shifted, &v.deeper)? {
                return Ok(false);
            }
            self.parts.push(v);
        }
        Ok(true)
    }
}

/// The CI ids of a root walk and of its CD verdicts, as one payload in
/// grid-core's adaptive encoding. When every part is sparse the id lists are
/// merged without a dense row (most rows at identifier positions are a few
/// hundred ids among 150k); the payload is the same either way.
pub(crate) fn union(ci: &Payload, parts: &[Arc<Verdict>], n_words: usize) -> Payload {
    if parts.is_empty() {
        return ci.clone();
    }
    if ci.encoding == SPARSE && parts.iter().all(|v| v.ci.encoding == SPARSE) {
        let total = ci.data.len() + parts.iter().map(|v| v.ci.data.len()).sum::<usize>();
        let mut ids = Vec::with_capacity(total);
        ids.extend_from_slice(&ci.data);
        for v in parts {
            ids.extend_from_slice(&v.ci.data);
        }
        ids.sort_unstable();
        ids.dedup();
        return Payload::of_ids(32 * n_words, ids);
    }
    let mut words = vec![0u32; n_words];
    ci.write(&mut words);
    for v in parts {
        v.ci.or_into(&mut words);
    }
    Payload::of_words(words, 32 * n_words)
}

/// Fill many sessions' rows in one call (llguidance's
/// `fill_next_token_bitmask_par`, xgrammar's batch matcher): `work[i]` is a
/// session and the row it writes, rows disjoint. First [`fill_warm`] on the
/// calling thread, then [`fill_cold`] over `threads` threads. Each fill is the
/// session's own [`Session::fill`], so the rows are bit-identical to filling
/// them one by one, in any order. One result per session: a failed fill (a
/// terminated session, an empty mask) leaves its row untouched and the others
/// go on.
pub fn fill_batch(work: &mut [(&mut Session, &mut [u32])], threads: usize) -> Vec<Result<Filled>> {
    let mut out = fill_warm(work);
    fill_cold(work, &mut out, threads);
    out
}

/// The warm pass of [`fill_batch`]: every row that needs no walk (about a
/// microsecond each: less than waking a thread, or than handing the GIL
/// over) is filled; the others are `Ok(Filled::Cold)`, their rows untouched.
pub fn fill_warm(work: &mut [(&mut Session, &mut [u32])]) -> Vec<Result<Filled>> {
    work.iter_mut().map(|(s, row)| s.fill(row, false)).collect()
}

/// The cold pass of [`fill_batch`]: the rows `out` marks `Ok(Filled::Cold)`
/// are walked and filled, shared out over a pool of `threads` threads when
/// there are two or more of them, and their results replace the marks.
pub fn fill_cold(
    work: &mut [(&mut Session, &mut [u32])],
    out: &mut [Result<Filled>],
    threads: usize,
) {
    use rayon::prelude::*;
    let mut cold: Vec<(usize, &mut (&mut Session, &mut [u32]))> = work
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| matches!(out[*i], Ok(Filled::Cold)))
        .collect();
    let walked: Vec<(usize, Result<Filled>)> = if threads <= 1 || cold.len() <= 1 {
        cold.iter_mut()
            .map(|(i, (s, row))| (*i, s.fill(row, true)))
            .collect()
    } else {
        crate::engine::pool(threads).install(|| {
            cold.par_iter_mut()
                .map(|(i, (s, row))| (*i, s.fill(row, true)))
                .collect()
        })
    };
    for (i, r) in walked {
        out[i] = r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::DENSE;

    /// The union by a dense row, whatever the parts' encodings.
    fn dense_union(ci: &Payload, parts: &[Arc<Verdict>], n_words: usize) -> Payload {
        let mut words = vec![0u32; n_words];
        ci.write(&mut words);
        for v in parts {
            v.ci.or_into(&mut words);
        }
        Payload::of_words(words, 32 * n_words)
    }

    fn part(ci: Payload) -> Arc<Verdict> {
        Arc::new(Verdict {
            ci,
            deeper: Vec::new(),
        })
    }

    #[test]
    fn sparse_unions_merge_to_the_dense_rows_payload() {
        let n_words = 4;
        let sparse = |ids: &[u32]| Payload::of_ids(32 * n_words, ids.to_vec());
        let dense = |ids: &[u32]| {
            let mut words = vec![0u32; n_words];
            crate::cache::set_ids(&mut words, ids);
            Payload {
                encoding: DENSE,
                data: words.into(),
            }
        };
        let few: &[u32] = &[3, 64, 127];
        let more: &[u32] = &[0, 3, 5, 31, 32, 100];
        let cases = [
            (sparse(few), vec![sparse(more)]),
            (sparse(&[]), vec![sparse(few), sparse(few)]),
            (sparse(few), vec![sparse(more), sparse(&[1, 2])]), // past the sparse limit: dense
            (sparse(few), vec![dense(more)]),
            (dense(more), vec![sparse(few)]),
        ];
        let mut encodings = Vec::new();
        for (ci, parts) in cases {
            let parts: Vec<Arc<Verdict>> = parts.into_iter().map(part).collect();
            let got = union(&ci, &parts, n_words);
            assert_eq!(got, dense_union(&ci, &parts, n_words));
            encodings.push(got.encoding);
        }
        assert_eq!(encodings, [DENSE, SPARSE, DENSE, DENSE, DENSE]);
    }
}
