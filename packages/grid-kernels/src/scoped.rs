//! A scoped session: grid-sql's covering guide (`grid_sql.column_scope.ScopedGuide`)
//! natively, its lexicon switched by the column scope ([`crate::scope`]).
//!
//! Mirrors `ScopedGuide` step for step, with the same masks and the same audit
//! records:
//!
//! - **Engines by scope.** The lexeme starting in scope `s` under allowed set
//!   `A` is scanned by the engine of `s`'s words ([`ScopedEngines::engine`],
//!   `ScopedEngines.engine`): the base engine's tables (shared DFA, LALR,
//!   trie, walk family) with the `COLUMN_NAME` and `QUALIFIER` words of the
//!   scope where `A` allows them (none where it does not), the scope's
//!   `TABLE_NAME` words in the generation language and its `ALIAS_NAME` words
//!   in the covering language. One engine per distinct lexicon; its tag in the
//!   family's walk cache and verdict memos is a hash of its words, so two
//!   roles or scopes with the same words share walks and verdicts.
//! - **Accept** ([`ScopedSession::accept_token`]): the scoped lexer
//!   (`ScopedEngines.advance`): maximal munch, each emission picked and shifted
//!   in the engine of the scope it started in, then the scope steps
//!   ([`Machine::after`]) and the next lexeme is scanned in the new scope's engine.
//! - **Fill** ([`ScopedSession::fill`]): the mask level by level
//!   (`ScopedGuide.compute`): the root walk in the current scope's engine,
//!   then per CD class one shift; a class whose terminal's lexeme the scope
//!   reads (a table, alias, qualifier or column) is split by the scope each
//!   member's lexeme leads to, and each part's verdict is taken in the engine
//!   of its scope after the shift. A member's lexeme is the last maximal-munch
//!   lexeme of the remainder followed by the member's trie path, up to its
//!   requeued tail (`_last_lexeme`). Rows are memoized per (root entry, stack,
//!   scope, remainder), at most `ROW_BYTES` of them (then emptied).
//! - **EOS** (`ScopedEngines.eos_allowed`): the remainder finalized lexeme by
//!   lexeme, each in its scope's engine, then `$END` reaches ACCEPT.
//!
//! Audit records are the plain session's ([`crate::session`]): a step's
//! configuration hash does not depend on the lexicon, and its mask entry id
//! and blocked count are the row's.
//!
//! Known limits: the row memo keys the remainder, so a step inside a long
//! lexeme costs O(|lexeme|) (as `ScopedGuide`'s steps); the scopes reached,
//! the engine of each (scope, allowed categories) and the split member lists
//! are kept for the engines' lifetime (one role's engines serve a process's
//! requests: `grid ask` builds them per run).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::audit::{extend_digest, mask_entry_id, Chain, Kind, Record};
use crate::bits;
use crate::cache::{group, Class, Members, Payload, Verdict};
use crate::engine::{lock, Engine, Lookup, Stacks, Threads};
use crate::error::{KernelError, Result};
use crate::mask::EngineTables;
use crate::parser::{NodeId, StackArena};
use crate::reserve::{RawReserve, Reserve};
use crate::scanner::{Scan, START};
use crate::scope::{Machine, ScopeId, ScopeSpec, Word};
use crate::scoped_reserve::{Completions, ScopedReserve, ScopedState};
use crate::tables::{GrammarTables, Lexicon};

/// The words of one scope lexicon: `COLUMN_NAME`, `QUALIFIER`, and
/// `TABLE_NAME` and `ALIAS_NAME` where the scope decides them (None: the base
/// lexicon's).
type LexKey = (Vec<Word>, Vec<Word>, Option<Vec<Word>>, Option<Vec<Word>>);

/// A memoized row: the CI and CD ids less EOS, and per EOS gate its audit
/// fields (entry id, blocked count).
#[derive(Debug)]
struct Row {
    ids: Payload,
    audit: [OnceLock<([u8; 16], u32)>; 2],
}

/// A row's key: the root entry's serial, the stack's LALR states (bottom
/// first: node ids name stacks only within one arena generation, and
/// sessions of several generations share the memo), the scope, the remainder.
type RowKey = (u64, Vec<u32>, ScopeId, Vec<u8>);

/// What the scoped lexer reached: stack, scope, remainder start, scan state.
pub(crate) type Read = (NodeId, ScopeId, usize, Scan);

/// A CD entry being split: (trie node, terminal, requeued tail).
type Cd<'a> = (u32, u32, &'a [u8]);

/// Bytes of rows held before the memo is emptied (a simple bound).
const ROW_BYTES: usize = 64 << 20;

/// The grammar-level reserve tables of a scope lexicon, given its words per
/// category terminal (grid-core's `ReserveTable(engine, partial=True)` of the
/// engine with those words: `ScopedEngines.reserve_raw` in grid-sql).
pub type ReserveProvider =
    Box<dyn Fn(&[(usize, Vec<Vec<u8>>)]) -> Result<RawReserve> + Send + Sync>;

/// The engine of one scope lexicon, its words, and its reserve once asked for.
pub(crate) struct ScopeEngine {
    pub(crate) engine: Arc<Engine>,
    words: Vec<(usize, Vec<Vec<u8>>)>,
    reserve: OnceLock<Arc<Reserve>>,
}

/// The scoped engines of one role: the base engine, the scope machine, and
/// the engines of the scope lexicons built so far (`ScopedEngines`).
pub struct ScopedEngines {
    base: Arc<Engine>,
    machine: Mutex<Machine>,
    /// The base lexicon's words, per category terminal.
    words: Vec<(usize, Vec<Vec<u8>>)>,
    lexicons: Mutex<HashMap<LexKey, Arc<ScopeEngine>>>,
    by_scope: Mutex<HashMap<(ScopeId, u8), Arc<ScopeEngine>>>,
    /// Where a scope lexicon's reserve tables come from (None: no reserve).
    reserves: Option<ReserveProvider>,
    /// Split member lists, held so their verdict memos live ([`crate::cache::Classes`]
    /// holds lists weakly).
    pinned: Mutex<HashMap<usize, Arc<Members>>>,
    /// The row memo and the bytes its rows and keys hold.
    rows: Mutex<(HashMap<RowKey, Arc<Row>>, usize)>,
    /// Mode 1's completions per state ([`crate::scoped_reserve`]).
    completions: Completions,
}

impl std::fmt::Debug for ScopedEngines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScopedEngines({} scope lexicons)", self.engines_built())
    }
}

impl ScopedEngines {
    /// `base`: the engine of the role's scoped grammar and base lexicon, whose
    /// words per category terminal are `words`; `spec`: its scope
    /// ([`crate::scope::ScopeSpec`]); `reserves`: where each scope lexicon's
    /// reserve tables come from (mode 1's reserve, [`crate::scoped_reserve`]).
    pub fn new(
        base: Arc<Engine>,
        spec: ScopeSpec,
        words: Vec<(usize, Vec<Vec<u8>>)>,
        reserves: Option<ReserveProvider>,
    ) -> Result<Self> {
        let machine = Machine::new(spec)?;
        let g = &base.tables.grammar;
        let terms = machine.terms();
        for t in [terms.column, terms.qualifier, terms.table, terms.alias] {
            if !bits::test(g.lexicon_categories(), t as usize) {
                return Err(KernelError::InvalidTables {
                    table: "scope",
                    detail: format!("terminal {t} is no lexicon category of the base engine"),
                });
            }
        }
        Ok(Self {
            base,
            machine: Mutex::new(machine),
            words,
            lexicons: Mutex::new(HashMap::new()),
            by_scope: Mutex::new(HashMap::new()),
            reserves,
            pinned: Mutex::new(HashMap::new()),
            rows: Mutex::new((HashMap::new(), 0)),
            completions: Mutex::new(HashMap::new()),
        })
    }

    pub fn base(&self) -> &Arc<Engine> {
        &self.base
    }

    pub(crate) fn completions(&self) -> &Completions {
        &self.completions
    }

    /// The scope after terminal `t` (lexeme `text`) shifted into `state`.
    fn after(&self, scope: ScopeId, t: u32, text: &[u8], state: u32) -> Result<ScopeId> {
        lock(&self.machine).after(scope, t, text, state)
    }

    fn reads_text(&self, t: u32) -> bool {
        lock(&self.machine).reads_text(t)
    }

    /// Distinct scope lexicons built so far.
    pub fn engines_built(&self) -> usize {
        lock(&self.lexicons).len()
    }

    /// The engine that scans a lexeme starting in `scope` under `allowed`
    /// (`ScopedEngines.engine`).
    pub fn engine(&self, scope: ScopeId, allowed: &[u64]) -> Result<Arc<Engine>> {
        Ok(Arc::clone(&self.scope_engine(scope, allowed)?.engine))
    }

    /// The reserve of a scope lexicon's engine, built on first use from the
    /// provider's tables.
    pub(crate) fn reserve_of(&self, se: &ScopeEngine) -> Result<Arc<Reserve>> {
        if let Some(r) = se.reserve.get() {
            return Ok(Arc::clone(r));
        }
        let provider = self
            .reserves
            .as_ref()
            .ok_or_else(|| KernelError::InvalidTables {
                table: "scope",
                detail: "these scoped engines were built without reserve tables".into(),
            })?;
        let raw = provider(&se.words)?;
        let tables = &se.engine.tables;
        let r = Reserve::new(
            Arc::clone(&tables.grammar),
            Arc::clone(&tables.trie),
            raw,
            crate::reserve::MEMO_BYTES,
        )?;
        Ok(Arc::clone(se.reserve.get_or_init(|| Arc::new(r))))
    }

    /// [`Self::engine`] with its words and reserve.
    pub(crate) fn scope_engine(&self, scope: ScopeId, allowed: &[u64]) -> Result<Arc<ScopeEngine>> {
        let mut m = lock(&self.machine);
        let terms = m.terms();
        let on = [terms.column, terms.qualifier, terms.table, terms.alias]
            .map(|t| bits::test(allowed, t as usize));
        let flags = on
            .iter()
            .enumerate()
            .fold(0u8, |f, (i, &b)| f | (u8::from(b) << i));
        if let Some(e) = lock(&self.by_scope).get(&(scope, flags)) {
            return Ok(Arc::clone(e));
        }
        let words = m.words(scope)?;
        let columns = if on[0] { words.0.clone() } else { Vec::new() };
        let qualifiers = if on[1] { words.1.clone() } else { Vec::new() };
        let tables = if m.unambiguous() && on[2] {
            Some(m.tables(scope)?)
        } else {
            None
        };
        let aliases = if m.covering() && on[3] {
            m.aliases(scope)?
        } else {
            None
        };
        let key: LexKey = (columns, qualifiers, tables, aliases);
        let mut lexicons = lock(&self.lexicons);
        let e = match lexicons.get(&key) {
            Some(e) => Arc::clone(e),
            None => {
                let e = Arc::new(self.build(&m, &key)?);
                lexicons.insert(key, Arc::clone(&e));
                e
            }
        };
        lock(&self.by_scope).insert((scope, flags), Arc::clone(&e));
        Ok(e)
    }

    /// The engine of one scope lexicon: the base words with the scope's.
    fn build(&self, m: &Machine, key: &LexKey) -> Result<ScopeEngine> {
        let terms = m.terms();
        let spell =
            |ws: &[Word]| -> Vec<Vec<u8>> { ws.iter().map(|&w| m.spelling(w).to_vec()).collect() };
        let mut words = self.words.clone();
        let mut replace =
            |t: u32, ws: Vec<Vec<u8>>| match words.iter_mut().find(|(c, _)| *c == t as usize) {
                Some(entry) => entry.1 = ws,
                None => words.push((t as usize, ws)),
            };
        replace(terms.column, spell(&key.0));
        replace(terms.qualifier, spell(&key.1));
        if let Some(ts) = &key.2 {
            replace(terms.table, spell(ts));
        }
        if let Some(ws) = &key.3 {
            replace(terms.alias, spell(ws));
        }
        let g = &*self.base.tables.grammar;
        let lexicon = Lexicon::from_words(
            &words,
            g.lexicon_categories().to_vec(),
            g.n_terminals(),
            bits::width_for(g.n_terminals() + 1),
        )?;
        let grammar = Arc::new(g.with_lexicon(lexicon)?);
        let tables = EngineTables::new(grammar, Arc::clone(&self.base.tables.trie));
        // The tag: a hash of the words (equal lexicons share walks and verdicts
        // across roles and scopes; no grid-core fingerprint has this form).
        let mut text = Vec::new();
        words.sort_unstable_by_key(|(t, _)| *t);
        for (t, ws) in &words {
            let mut ws: Vec<&Vec<u8>> = ws.iter().collect();
            ws.sort_unstable();
            ws.dedup();
            text.extend_from_slice(&(*t as u64).to_le_bytes());
            text.extend_from_slice(&(ws.len() as u64).to_le_bytes());
            for w in ws {
                text.extend_from_slice(&(w.len() as u64).to_le_bytes());
                text.extend_from_slice(w);
            }
        }
        let tag = format!(
            "scope-lexicon:{}",
            crate::audit::hex(&crate::hash::blake2b::<16>(&text))
        );
        let engine = Engine::new(
            tables,
            Threads::default(),
            tag,
            Some(Arc::clone(&self.base.shared)),
        );
        Ok(ScopeEngine {
            engine: Arc::new(engine),
            words,
            reserve: OnceLock::new(),
        })
    }

    /// The scoped lexer: read `buf[from..]` after `(node, scope)` with the
    /// remainder `buf[start..from]` (scan state `scan` in its scope's engine);
    /// None when the output leaves the language (`ScopedEngines.advance`).
    pub(crate) fn read(
        &self,
        arena: &mut StackArena,
        (mut node, mut scope, mut start, mut scan): Read,
        buf: &[u8],
        from: usize,
    ) -> Result<Option<Read>> {
        let mut e = self.engine(scope, arena.allowed(node)?)?;
        let mut i = from;
        while i < buf.len() {
            let g = &*e.tables.grammar;
            if let Some(next) = g.step(scan, (i + 1 - start) as u32, buf[i]) {
                scan = next;
                i += 1;
                continue;
            }
            let Some((n, s)) = self.emit(arena, g, node, scope, &scan, &buf[start..])? else {
                return Ok(None);
            };
            (node, scope) = (n, s);
            start += scan.la_len as usize;
            i = start;
            scan = START;
            e = self.engine(scope, arena.allowed(node)?)?;
        }
        let g = &*e.tables.grammar;
        if start < buf.len() && !g.live_under(scan.q, scan.ln, arena.allowed(node)?) {
            return Ok(None);
        }
        Ok(Some((node, scope, start, scan)))
    }

    /// Emit the last accepted lexeme of `scan` (its text at the start of
    /// `text`) in `g`: the stack and scope after it, None when it has no pick
    /// (`ScopedEngines._emit`).
    pub(crate) fn emit(
        &self,
        arena: &mut StackArena,
        g: &GrammarTables,
        node: NodeId,
        scope: ScopeId,
        scan: &Scan,
        text: &[u8],
    ) -> Result<Option<(NodeId, ScopeId)>> {
        let Some((shifted, t)) = g.emit_pick(arena, node, scan)? else {
            return Ok(None);
        };
        if g.is_ignored(t as usize) {
            return Ok(Some((node, scope)));
        }
        let lexeme = &text[..scan.la_len as usize];
        let after = self.after(scope, t, lexeme, arena.state(shifted))?;
        Ok(Some((shifted, after)))
    }

    /// The stack once the remainder `rem` of `(node, scope)` is lexed to the
    /// end of input, scope by scope, or None (`ScopedEngines._finalize`).
    pub(crate) fn finalize(
        &self,
        arena: &mut StackArena,
        (mut node, mut scope): (NodeId, ScopeId),
        rem: &[u8],
    ) -> Result<Option<NodeId>> {
        let mut rem = rem.to_vec();
        while !rem.is_empty() {
            let e = self.engine(scope, arena.allowed(node)?)?;
            let g = &*e.tables.grammar;
            let Some(scan) = g.scan(&rem) else {
                return Ok(None);
            };
            let Some((n, sc)) = self.emit(arena, g, node, scope, &scan, &rem)? else {
                return Ok(None);
            };
            let end = scan.la_len as usize;
            let Some((n, sc, start, _)) = self.read(arena, (n, sc, end, START), &rem, end)? else {
                return Ok(None);
            };
            (node, scope) = (n, sc);
            rem.drain(..start);
        }
        Ok(Some(node))
    }

    /// A member list split from a class, interned and held.
    fn pin(&self, members: Arc<Members>) -> Arc<Members> {
        let key = Arc::as_ptr(&members) as usize;
        Arc::clone(lock(&self.pinned).entry(key).or_insert(members))
    }
}

/// The last maximal-munch lexeme of `data` (ignored ones before it skipped),
/// which ends at a lexeme's end (`_last_lexeme`). Boundaries are the union
/// DFA's: any lexicon gives them.
fn last_lexeme<'d>(g: &GrammarTables, data: &'d [u8]) -> &'d [u8] {
    let (mut scan, mut start, mut i) = (START, 0usize, 0usize);
    while i < data.len() {
        if let Some(next) = g.step(scan, (i + 1 - start) as u32, data[i]) {
            scan = next;
            i += 1;
            continue;
        }
        if scan.la_len == 0 {
            break;
        }
        start += scan.la_len as usize;
        i = start;
        scan = START;
    }
    &data[start..]
}

/// One step of a scoped session's history.
#[derive(Clone, Copy, Debug)]
struct Step {
    node: NodeId,
    rem_start: u32,
    out_len: u32,
    /// The remainder's scan state in its scope's engine.
    scan: Scan,
    scope: ScopeId,
    terminated: bool,
    eos: Option<bool>,
    digest: u64,
    stack_hash: u64,
    mask: Option<([u8; 16], u32)>,
}

/// One request's guide over [`ScopedEngines`] (see the module header).
#[derive(Clone, Debug)]
pub struct ScopedSession {
    engines: Arc<ScopedEngines>,
    stacks: Arc<Mutex<Stacks>>,
    output: Vec<u8>,
    steps: Vec<Step>,
    lookup: Lookup,
    chain: Option<Chain>,
}

impl ScopedSession {
    pub fn new(engines: Arc<ScopedEngines>, namespace: u64, audit: bool) -> Result<Self> {
        let stacks = engines.base.stacks();
        let root = lock(&stacks).arena.from_states(&[0])?;
        Ok(Self {
            engines,
            stacks,
            output: Vec::new(),
            steps: vec![Step {
                node: root,
                rem_start: 0,
                out_len: 0,
                scan: START,
                scope: 0,
                terminated: false,
                eos: None,
                digest: 0,
                stack_hash: 0,
                mask: None,
            }],
            lookup: Lookup {
                namespace,
                ..Lookup::default()
            },
            chain: audit.then(Chain::default),
        })
    }

    fn current(&self) -> Step {
        *self.steps.last().expect("a session has its initial step")
    }

    pub fn n_words(&self) -> usize {
        self.engines.base.tables.trie.n_words()
    }

    /// Tokens accepted so far (EOS included).
    pub fn steps(&self) -> usize {
        self.steps.len() - 1
    }

    pub fn is_terminated(&self) -> bool {
        self.current().terminated
    }

    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// The current configuration: the stack's LALR states (bottom first) and
    /// the remainder.
    pub fn config(&self) -> (Vec<u32>, Vec<u8>) {
        let s = self.current();
        let states = lock(&self.stacks).arena.states(s.node);
        (
            states,
            self.output[s.rem_start as usize..s.out_len as usize].to_vec(),
        )
    }

    /// Mode 1's reserve from the current configuration: the source and its
    /// start state ([`crate::scoped_reserve`]).
    pub fn reserve_source(&self) -> (ScopedReserve, ScopedState) {
        let s = self.current();
        let state = ScopedState {
            node: s.node,
            scope: s.scope,
            remainder: self.output[s.rem_start as usize..s.out_len as usize].to_vec(),
            scan: s.scan,
        };
        let source = ScopedReserve::new(Arc::clone(&self.engines), Arc::clone(&self.stacks));
        (source, state)
    }

    /// The current scope.
    pub fn scope(&self) -> ScopeId {
        self.current().scope
    }

    pub fn audited(&self) -> bool {
        self.chain.is_some()
    }

    pub fn chain(&mut self) -> Option<&mut Chain> {
        self.chain.as_mut()
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
        let stacks = Arc::clone(&self.stacks);
        let mut stacks = lock(&stacks);
        let arena = &mut stacks.arena;
        let rem = &self.output[s.rem_start as usize..s.out_len as usize];
        let eos = match self.engines.finalize(arena, (s.node, s.scope), rem)? {
            Some(node) => arena.accepts(node)?,
            None => false,
        };
        drop(stacks);
        self.steps.last_mut().expect("initial step").eos = Some(eos);
        Ok(eos)
    }

    /// EOS is legal now: not terminated, and the output is a sentence.
    pub fn eos_allowed(&mut self) -> Result<bool> {
        Ok(!self.is_terminated() && self.gate()?)
    }

    /// Accept one token (`ScopedGuide.accept_token`); `kind` is the audit
    /// record's (EOS is recorded as `eos`).
    pub fn accept_token(&mut self, token: i64, kind: Kind) -> Result<()> {
        let trie = Arc::clone(&self.engines.base.tables.trie);
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
            self.prepare_record()?;
            self.record(id as u32, Kind::Eos);
            self.steps.push(Step {
                terminated: true,
                eos: Some(true),
                mask: None,
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
        self.prepare_record()?;
        let from = self.output.len();
        self.output.extend_from_slice(spelling);
        let stacks = Arc::clone(&self.stacks);
        let mut stacks = lock(&stacks);
        let arena = &mut stacks.arena;
        let at = (s.node, s.scope, s.rem_start as usize, s.scan);
        let read = self.engines.read(arena, at, &self.output, from);
        let read = match read {
            Ok(Some((node, scope, start, scan))) => (node, scope, start, scan, arena.hash(node)),
            Ok(None) => {
                drop(stacks);
                self.output.truncate(from);
                let reason = format!("{} is not in the mask", crate::escape_bytes(spelling));
                return Err(self.guide_error(Some(token), reason));
            }
            Err(e) => {
                drop(stacks);
                self.output.truncate(from);
                return Err(e);
            }
        };
        drop(stacks);
        let (node, scope, start, scan, stack_hash) = read;
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
            scope,
            terminated: false,
            eos: None,
            digest,
            stack_hash,
            mask: None,
        });
        Ok(())
    }

    /// Make sure the current step's audit fields are known (audit on).
    fn prepare_record(&mut self) -> Result<()> {
        if self.chain.is_none() || self.is_terminated() || self.current().mask.is_some() {
            return Ok(());
        }
        let mut scratch = vec![0u32; self.n_words()];
        self.fill(&mut scratch)
    }

    fn record(&mut self, token: u32, kind: Kind) {
        let s = self.current();
        let Some(chain) = self.chain.as_mut() else {
            return;
        };
        let (entry_id, blocked) = s.mask.expect("prepare_record fills the step's mask");
        chain.push(Record {
            stack: s.stack_hash,
            rem_len: u64::from(s.out_len - s.rem_start),
            rem_digest: s.digest,
            entry_id,
            token,
            blocked,
            kind,
            config: None,
        });
    }

    /// The audit fields of the current step's mask once a fill has computed
    /// them (audit on or off: one hash per distinct row, memoized with it):
    /// (configuration hash, mask entry id, blocked count).
    pub fn step_audit(&self) -> Option<(u64, [u8; 16], u32)> {
        let s = self.current();
        let (id, blocked) = s.mask?;
        let hash =
            crate::audit::config_hash(s.stack_hash, u64::from(s.out_len - s.rem_start), s.digest);
        Some((hash, id, blocked))
    }

    /// Write the mask of the current configuration into `row`
    /// (`ceil(n_vocab / 32)` words; see the module header).
    pub fn fill(&mut self, row: &mut [u32]) -> Result<()> {
        let n_words = self.n_words();
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
        let rem = self.output[s.rem_start as usize..s.out_len as usize].to_vec();
        let allowed = lock(&self.stacks).arena.allowed(s.node)?.to_vec();
        let e = self.engines.engine(s.scope, &allowed)?;
        self.lookup.cold = true;
        let root = e
            .entry(&mut self.lookup, 0, &rem, Some(&s.scan), &allowed)?
            .expect("a cold lookup walks");
        let states = lock(&self.stacks).arena.states(s.node);
        let key = (root.serial, states, s.scope, rem);
        let kept = lock(&self.engines.rows).0.get(&key).cloned();
        let kept = match kept {
            Some(kept) => kept,
            None => {
                let mut parts = Vec::new();
                self.gather(s.node, s.scope, &root.classes, &key.3, &mut parts)?;
                let ids = crate::session::union(&root.ci, &parts, n_words);
                let kept = Arc::new(Row {
                    ids,
                    audit: [OnceLock::new(), OnceLock::new()],
                });
                let size = 64 + kept.ids.size() + 4 * key.1.len() + key.3.len();
                let mut guard = lock(&self.engines.rows);
                let (rows, bytes) = &mut *guard;
                if *bytes + size > ROW_BYTES {
                    rows.clear();
                    *bytes = 0;
                }
                *bytes += size;
                Arc::clone(rows.entry(key).or_insert(kept))
            }
        };
        let eos = self.gate()?;
        if !eos && kept.ids.is_empty() {
            return Err(KernelError::EmptyMask { step: self.steps() });
        }
        kept.ids.write(row);
        let trie = &self.engines.base.tables.trie;
        if eos {
            for &id in trie.eos_ids() {
                row[id as usize / 32] |= 1 << (id % 32);
            }
        }
        if self.current().mask.is_none() {
            let mask = *kept.audit[usize::from(eos)].get_or_init(|| {
                let admitted: u32 = row.iter().map(|w| w.count_ones()).sum();
                (mask_entry_id(row), trie.n_vocab() as u32 - admitted)
            });
            self.steps.last_mut().expect("initial step").mask = Some(mask);
        }
        Ok(())
    }

    /// The verdicts of `classes` emitted at stack `node` in `scope`, level by
    /// level, into `parts` (`ScopedGuide.compute`'s loop). `rem`: the
    /// remainder the step's token follows (every member's lexeme is read off
    /// it and the member's trie path).
    fn gather(
        &mut self,
        node: NodeId,
        scope: ScopeId,
        classes: &[Class],
        rem: &[u8],
        parts: &mut Vec<Arc<Verdict>>,
    ) -> Result<()> {
        let engines = Arc::clone(&self.engines);
        let base = &*engines.base.tables.grammar;
        let trie = &*engines.base.tables.trie;
        let mut key = Vec::new();
        for class in classes {
            let t = class.terminal;
            let (shifted, allowed, state) = {
                let arena = &mut lock(&self.stacks).arena;
                let shifted = arena.shift(node, t as usize)?;
                (
                    shifted,
                    arena.allowed(shifted)?.to_vec(),
                    arena.state(shifted),
                )
            };
            let split: Vec<(ScopeId, Arc<Members>)> = if engines.reads_text(t) {
                let mut by_scope: Vec<(ScopeId, Vec<Cd<'_>>)> = Vec::new();
                for (member, tail) in class.members.iter() {
                    let mut text = rem.to_vec();
                    text.extend_from_slice(&trie.path(member as usize));
                    let ending = text.len() - tail.len();
                    let lexeme = last_lexeme(base, &text[..ending]);
                    let after = engines.after(scope, t, lexeme, state)?;
                    match by_scope.iter_mut().find(|(s, _)| *s == after) {
                        Some((_, list)) => list.push((member, t, tail)),
                        None => by_scope.push((after, vec![(member, t, tail)])),
                    }
                }
                if by_scope.len() == 1 {
                    vec![(by_scope[0].0, Arc::clone(&class.members))]
                } else {
                    by_scope
                        .into_iter()
                        .map(|(s, list)| {
                            let mut grouped = group(list, &engines.base.shared.classes);
                            let members = grouped.pop().expect("one terminal, one class").members;
                            (s, engines.pin(members))
                        })
                        .collect()
                }
            } else {
                let after = engines.after(scope, t, b"", state)?;
                vec![(after, Arc::clone(&class.members))]
            };
            for (after, members) in split {
                let e = engines.engine(after, &allowed)?;
                e.verdict_key_into(&allowed, &mut key);
                let v = e
                    .verdict(&mut self.lookup, &members, &key)?
                    .expect("a cold lookup walks");
                if !v.deeper.is_empty() {
                    self.gather(shifted, after, &v.deeper, rem, parts)?;
                }
                parts.push(v);
            }
        }
        Ok(())
    }

    /// Undo the last `n` steps (`ScopedGuide.rollback`).
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.steps() {
            return Err(self.guide_error(
                None,
                format!("cannot roll back {n} of {} tokens", self.steps()),
            ));
        }
        self.steps.truncate(self.steps.len() - n);
        self.output.truncate(self.current().out_len as usize);
        if let Some(chain) = self.chain.as_mut() {
            chain.truncate(self.steps.len() - 1);
        }
        Ok(())
    }

    /// An independent session at the same point (`ScopedGuide.fork`).
    pub fn fork(&self) -> Self {
        self.clone()
    }
}
