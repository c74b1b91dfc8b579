//! The column scope of a SELECT statement being written: grid-sql's
//! `ScopedEngines` scope machine (`grid_sql.column_scope`), natively.
//!
//! Mirrors `ScopedEngines._after` and the words of a scope (`words`,
//! `tables`, `aliases`) rule for rule, so that a native scoped session can
//! switch lexicons without calling into Python (issue #16: the covering
//! language on the native path). The scope is a persistent value: each
//! distinct [`ScopeState`] is interned once and named by its index, a
//! [`ScopeId`]; `0` is the empty scope a statement starts in.
//!
//! What the machine reads of a lexeme is its meaning in the role's schema,
//! never its spelling: every lexeme whose text matters (a table, alias,
//! qualifier or column word) is a word of a finite lexicon category, and the
//! [`ScopeSpec`] names each such word's table, alias or folded column up front
//! (grid-sql computes them with the dialect's folding, `ScopedEngines.fold`).
//! A lexeme outside those tables is a [`KernelError::InvalidTables`]: the
//! spec does not describe the engine that emitted it.
//!
//! Names are folded identifiers (tables, aliases and columns in one
//! namespace, as in Python), interned as [`Name`]s. Tables are indexed in the
//! order of their catalog names, so the smallest index of a set is the first
//! of `sorted(...)` in Python.

use std::collections::HashMap;

use crate::error::{KernelError, Result};

/// An interned scope (index into [`Machine`]'s scopes); 0 is the empty scope.
pub type ScopeId = u32;
/// An interned folded name.
pub type Name = u32;
/// A word of the spec, interned by [`Machine`] (its bytes: [`Machine::spelling`]).
pub type Word = u32;
/// A granted table (index into [`ScopeSpec::tables`], catalog-name order).
pub type Table = u32;
/// Words as byte strings, as the spec lists them.
pub type Spellings = Vec<Vec<u8>>;

/// Where a SELECT core's writing stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The select list, written before the FROM clause.
    Select,
    /// The FROM clause.
    From,
    /// After the FROM clause: WHERE, GROUP BY, HAVING, WINDOW, a FROM-first
    /// core's select list, a VALUES core.
    Post,
    /// The statement's ORDER BY and LIMIT.
    Order,
}

/// One table reference of a FROM clause (`Ref`): its table, the one folded
/// name it answers to, and the qualifier words that name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ref {
    pub table: Table,
    pub name: Name,
    pub words: std::sync::Arc<[Word]>,
}

/// One SELECT statement being written (`Frame`). Sets are sorted vectors.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub depth: i32,
    pub phase: Phase,
    pub core: Vec<Ref>,
    pub statement: Vec<Ref>,
    pub pending: Vec<Name>,
    pub said: Vec<Name>,
    pub named: Option<Table>,
    pub bare_on: Vec<Name>,
}

impl Frame {
    fn new(depth: i32, phase: Phase, statement: Vec<Ref>) -> Self {
        Self {
            depth,
            phase,
            core: Vec::new(),
            statement,
            pending: Vec::new(),
            said: Vec::new(),
            named: None,
            bare_on: Vec::new(),
        }
    }

    /// The references a column here resolves against; None where unknown.
    fn visible(&self) -> Option<&[Ref]> {
        match self.phase {
            Phase::Select => None,
            Phase::Order => Some(&self.statement),
            _ => Some(&self.core),
        }
    }
}

/// The scope after the lexemes emitted so far (`ScopeState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScopeState {
    pub frames: Vec<Frame>,
    pub depth: i32,
    pub qualifier: Option<Name>,
    pub alias_for: u8,
}

/// The terminal ids and LALR states the scope reads (`_Terms`), and the
/// language's flags.
#[derive(Clone, Debug, Default)]
pub struct Terms {
    pub lpar: Vec<u32>,
    pub rpar: u32,
    pub table: u32,
    pub alias: u32,
    pub qualifier: u32,
    pub as_: u32,
    pub column: u32,
    pub values: u32,
    /// WHERE, GROUP, HAVING, WINDOW.
    pub post: Vec<u32>,
    /// LIMIT, OFFSET, FETCH.
    pub limit: Vec<u32>,
    pub from_states: Vec<u32>,
    pub select_first_states: Vec<u32>,
    pub select_after_from_states: Vec<u32>,
    pub order_states: Vec<u32>,
}

/// One granted table: its folded name and its catalog columns, each a folded
/// name with the `COLUMN_NAME` words that spell its catalog name.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    pub columns: Vec<(String, Vec<Vec<u8>>)>,
    /// The folded names of the granted columns.
    pub granted: Vec<String>,
}

/// Everything the machine reads of the role's schema and language, computed by
/// grid-sql (`ScopedEngines.scope_spec`). Words are byte strings; the spec
/// interns them.
#[derive(Clone, Debug, Default)]
pub struct ScopeSpec {
    pub terms: Terms,
    /// The covering language (`ScopedEngines.covering`).
    pub covering: bool,
    /// The generation language (`ScopedEngines.unambiguous`).
    pub unambiguous: bool,
    /// `Dialect.join_condition_sees_right`.
    pub joins_see_right: bool,
    /// The granted tables, in catalog-name order.
    pub tables: Vec<TableSpec>,
    /// `TABLE_NAME` words: (word, the tables it names (indices, sorted),
    /// the qualifier words of its reference).
    pub table_words: Vec<(Vec<u8>, Vec<Table>, Spellings)>,
    /// `ALIAS_NAME` words: (word, folded name, its qualifier words).
    pub alias_words: Vec<(Vec<u8>, String, Vec<Vec<u8>>)>,
    /// `QUALIFIER` words: (word, the folded name it qualifies with).
    pub qualifier_words: Vec<(Vec<u8>, String)>,
    /// `COLUMN_NAME` words: (word, folded name).
    pub column_words: Vec<(Vec<u8>, String)>,
    /// The safe columns (granted wherever they are): (folded name, words).
    pub safe: Vec<(String, Vec<Vec<u8>>)>,
    /// Per table a qualifier may name before FROM (covering): (table, its
    /// qualifier words, its names as an alias).
    pub own_alias: Vec<(Table, Spellings, Spellings)>,
    /// The alias set by folded name: (folded, words).
    pub alias_names: Vec<(String, Vec<Vec<u8>>)>,
}

/// A scope's words: `COLUMN_NAME` and `QUALIFIER` words, sorted.
pub type Words = (Vec<Word>, Vec<Word>);

/// The interned spec and the scopes seen, with the memos of their steps.
#[derive(Debug)]
pub struct Machine {
    terms: Terms,
    covering: bool,
    unambiguous: bool,
    joins_see_right: bool,
    words: Vec<Vec<u8>>,
    /// Per table: its folded name; (folded column -> its words), in catalog
    /// order; the granted folded columns (sorted).
    table_name: Vec<Name>,
    catalog: Vec<Vec<(Name, Vec<Word>)>>,
    granted: Vec<Vec<Name>>,
    /// `TABLE_NAME` word -> (its tables, its reference).
    table_words: HashMap<Word, (Vec<Table>, Ref)>,
    alias_words: HashMap<Word, (Name, std::sync::Arc<[Word]>)>,
    qualifier_words: HashMap<Word, Name>,
    column_words: HashMap<Word, Name>,
    /// Folded safe column -> its words.
    safe: HashMap<Name, Vec<Word>>,
    /// Per `TABLE_NAME` word: the folded columns every table it names has.
    word_columns: HashMap<Word, Vec<Name>>,
    own_alias: HashMap<Table, (Vec<Word>, Vec<Word>)>,
    alias_names: Vec<(Name, Vec<Word>)>,
    table_by_name: HashMap<Name, Table>,
    word_ids: HashMap<Vec<u8>, Word>,
    names: HashMap<String, Name>,
    scopes: Vec<ScopeState>,
    scope_ids: HashMap<ScopeState, ScopeId>,
    steps: HashMap<(ScopeId, u32, Word, u32), ScopeId>,
    scope_words: HashMap<ScopeId, std::sync::Arc<Words>>,
}

fn bad(detail: impl Into<String>) -> KernelError {
    KernelError::InvalidTables {
        table: "scope",
        detail: detail.into(),
    }
}

/// `a | {x}`, sorted.
fn with(a: &[Name], x: Name) -> Vec<Name> {
    let mut out = a.to_vec();
    if let Err(at) = out.binary_search(&x) {
        out.insert(at, x);
    }
    out
}

fn contains(a: &[Name], x: Name) -> bool {
    a.binary_search(&x).is_ok()
}

/// Sorted and deduplicated.
fn normal(mut v: Vec<Word>) -> Vec<Word> {
    v.sort_unstable();
    v.dedup();
    v
}

impl Machine {
    pub fn new(spec: ScopeSpec) -> Result<Self> {
        let mut m = Self {
            terms: spec.terms,
            covering: spec.covering,
            unambiguous: spec.unambiguous,
            joins_see_right: spec.joins_see_right,
            words: Vec::new(),
            table_name: Vec::new(),
            catalog: Vec::new(),
            granted: Vec::new(),
            table_words: HashMap::new(),
            alias_words: HashMap::new(),
            qualifier_words: HashMap::new(),
            column_words: HashMap::new(),
            safe: HashMap::new(),
            word_columns: HashMap::new(),
            own_alias: HashMap::new(),
            alias_names: Vec::new(),
            table_by_name: HashMap::new(),
            word_ids: HashMap::new(),
            names: HashMap::new(),
            scopes: vec![ScopeState::default()],
            scope_ids: HashMap::new(),
            steps: HashMap::new(),
            scope_words: HashMap::new(),
        };
        m.scope_ids.insert(ScopeState::default(), 0);
        let n_tables = spec.tables.len();
        let table = |t: Table| -> Result<Table> {
            if (t as usize) < n_tables {
                Ok(t)
            } else {
                Err(bad(format!("table index {t} out of range 0..{n_tables}")))
            }
        };
        for (i, t) in spec.tables.iter().enumerate() {
            let name = m.name(&t.name);
            m.table_name.push(name);
            m.table_by_name.insert(name, i as Table);
            let columns = t
                .columns
                .iter()
                .map(|(c, ws)| (m.name(c), m.word_list(ws)))
                .collect();
            m.catalog.push(columns);
            let mut granted: Vec<Name> = t.granted.iter().map(|c| m.name(c)).collect();
            granted.sort_unstable();
            granted.dedup();
            m.granted.push(granted);
        }
        for (word, tables, qualifiers) in &spec.table_words {
            if tables.is_empty() {
                return Err(bad("a TABLE_NAME word names no table"));
            }
            let tables: Vec<Table> = tables.iter().map(|&t| table(t)).collect::<Result<_>>()?;
            let first = tables[0];
            let r = Ref {
                table: first,
                name: m.table_name[first as usize],
                words: m.word_list(qualifiers).into(),
            };
            let mut common: Vec<Name> = m.catalog[first as usize].iter().map(|c| c.0).collect();
            common.sort_unstable();
            for &t in &tables[1..] {
                common.retain(|&c| m.catalog[t as usize].iter().any(|x| x.0 == c));
            }
            let w = m.word(word);
            m.word_columns.insert(w, common);
            m.table_words.insert(w, (tables, r));
        }
        for (word, name, qualifiers) in &spec.alias_words {
            let w = m.word(word);
            let n = m.name(name);
            let qs = m.word_list(qualifiers).into();
            m.alias_words.insert(w, (n, qs));
        }
        for (word, name) in &spec.qualifier_words {
            let (w, n) = (m.word(word), m.name(name));
            m.qualifier_words.insert(w, n);
        }
        for (word, name) in &spec.column_words {
            let (w, n) = (m.word(word), m.name(name));
            m.column_words.insert(w, n);
        }
        for (name, words) in &spec.safe {
            let n = m.name(name);
            let ws = m.word_list(words);
            m.safe.insert(n, ws);
        }
        for (t, qualifiers, aliases) in &spec.own_alias {
            let t = table(*t)?;
            let entry = (m.word_list(qualifiers), m.word_list(aliases));
            m.own_alias.insert(t, entry);
        }
        for (name, words) in &spec.alias_names {
            let n = m.name(name);
            let ws = m.word_list(words);
            m.alias_names.push((n, ws));
        }
        Ok(m)
    }

    fn name(&mut self, s: &str) -> Name {
        let next = self.names.len() as Name;
        *self.names.entry(s.to_owned()).or_insert(next)
    }

    fn word(&mut self, w: &[u8]) -> Word {
        if let Some(&id) = self.word_ids.get(w) {
            return id;
        }
        let id = self.words.len() as Word;
        self.words.push(w.to_vec());
        self.word_ids.insert(w.to_vec(), id);
        id
    }

    fn word_list(&mut self, ws: &[Vec<u8>]) -> Vec<Word> {
        ws.iter().map(|w| self.word(w)).collect()
    }

    /// The terminals and states the machine reads.
    pub fn terms(&self) -> &Terms {
        &self.terms
    }

    /// The covering language (aliases and tables by scope).
    pub fn covering(&self) -> bool {
        self.covering
    }

    /// The generation language (tables by scope).
    pub fn unambiguous(&self) -> bool {
        self.unambiguous
    }

    /// Whether a step of terminal `t` may read its lexeme's text (a table,
    /// alias, qualifier or column word); any other step's result is the same
    /// for every lexeme.
    pub fn reads_text(&self, t: u32) -> bool {
        let terms = &self.terms;
        t == terms.table || t == terms.alias || t == terms.qualifier || t == terms.column
    }

    /// The bytes of a word.
    pub fn spelling(&self, w: Word) -> &[u8] {
        &self.words[w as usize]
    }

    /// The id of a word's bytes, if the spec has it.
    pub fn word_id(&self, w: &[u8]) -> Option<Word> {
        self.word_ids.get(w).copied()
    }

    /// The scope named `id`.
    pub fn scope(&self, id: ScopeId) -> Result<&ScopeState> {
        self.scopes
            .get(id as usize)
            .ok_or_else(|| bad(format!("scope {id} out of range 0..{}", self.scopes.len())))
    }

    /// How many distinct scopes have been reached.
    pub fn n_scopes(&self) -> usize {
        self.scopes.len()
    }

    fn intern(&mut self, s: ScopeState) -> ScopeId {
        if let Some(&id) = self.scope_ids.get(&s) {
            return id;
        }
        let id = self.scopes.len() as ScopeId;
        self.scopes.push(s.clone());
        self.scope_ids.insert(s, id);
        id
    }

    fn catalog_has(&self, t: Table, c: Name) -> bool {
        self.catalog[t as usize].iter().any(|x| x.0 == c)
    }

    fn catalog_words(&self, t: Table, c: Name) -> &[Word] {
        self.catalog[t as usize]
            .iter()
            .find(|x| x.0 == c)
            .map_or(&[], |x| &x.1)
    }

    // ------------------------------------------------------------ steps

    /// The scope after terminal `t` (lexeme `text`) is shifted into LALR state
    /// `state` (`ScopedEngines.after`), memoized.
    pub fn after(&mut self, scope: ScopeId, t: u32, text: &[u8], state: u32) -> Result<ScopeId> {
        // The text matters only as a word of the spec; any other lexeme is one
        // key (u32::MAX), since no rule that reads text fires for it.
        let w = self.word_id(text).unwrap_or(u32::MAX);
        let key = (scope, t, w, state);
        if let Some(&got) = self.steps.get(&key) {
            return Ok(got);
        }
        let next = self.step(self.scope(scope)?.clone(), t, w, state)?;
        let id = self.intern(next);
        self.steps.insert(key, id);
        Ok(id)
    }

    fn meaning<T: Clone>(map: &HashMap<Word, T>, w: Word, what: &str) -> Result<T> {
        map.get(&w)
            .cloned()
            .ok_or_else(|| bad(format!("a {what} lexeme the scope spec does not list")))
    }

    fn step(&self, s: ScopeState, t: u32, w: Word, state: u32) -> Result<ScopeState> {
        let terms = &self.terms;
        let mut frames = s.frames.clone();
        let mut depth = s.depth;
        let mut qualifier = None;
        let mut alias_for = 0u8;
        let top = frames.last().cloned();
        if terms.lpar.contains(&t) {
            depth += 1;
        } else if t == terms.rpar {
            depth -= 1;
            while frames.last().is_some_and(|f| f.depth > depth) {
                frames.pop();
            }
        } else if t == terms.qualifier {
            let q = Self::meaning(&self.qualifier_words, w, "QUALIFIER")?;
            qualifier = Some(q);
            if self.covering && top.as_ref().is_some_and(|f| f.phase == Phase::Select) {
                let table =
                    self.table_by_name.get(&q).copied().ok_or_else(|| {
                        bad("a qualifier before FROM that names no granted table")
                    })?;
                frames.last_mut().expect("top").named = Some(table);
            }
        } else if terms.from_states.contains(&state) {
            match &top {
                Some(f) if f.depth == depth && f.phase == Phase::Select => {
                    frames.last_mut().expect("top").phase = Phase::From;
                }
                Some(f) if f.depth == depth => {
                    *frames.last_mut().expect("top") =
                        Frame::new(depth, Phase::From, f.statement.clone());
                }
                _ => frames.push(Frame::new(depth, Phase::From, Vec::new())),
            }
        } else if terms.select_first_states.contains(&state) {
            match &top {
                Some(f) if f.depth == depth => {
                    *frames.last_mut().expect("top") =
                        Frame::new(depth, Phase::Select, f.statement.clone());
                }
                _ => frames.push(Frame::new(depth, Phase::Select, Vec::new())),
            }
        } else if t == terms.values {
            match &top {
                Some(f) if f.depth == depth => {
                    *frames.last_mut().expect("top") =
                        Frame::new(depth, Phase::Post, f.statement.clone());
                }
                _ => frames.push(Frame::new(depth, Phase::Post, Vec::new())),
            }
        } else if terms.select_after_from_states.contains(&state) {
            let f = frames
                .last_mut()
                .filter(|f| f.phase == Phase::From)
                .ok_or_else(|| bad("a select list after a FROM clause that is not open"))?;
            f.phase = Phase::Post;
        } else if top.as_ref().is_some_and(|f| f.depth == depth) {
            let f = frames.last_mut().expect("top");
            if terms.order_states.contains(&state) || terms.limit.contains(&t) {
                f.phase = Phase::Order;
            } else if terms.post.contains(&t) && f.phase == Phase::From {
                f.phase = Phase::Post;
            }
        }
        if t == terms.table
            && top.is_some()
            && frames.last().is_some_and(|f| f.phase == Phase::From)
        {
            let (_, r) = Self::meaning(&self.table_words, w, "TABLE_NAME")?;
            let f = frames.last_mut().expect("top");
            f.core.push(r.clone());
            f.statement.push(r);
            alias_for = 1;
        } else if t == terms.as_ && s.alias_for == 1 {
            alias_for = 2;
        } else if t == terms.alias && s.alias_for != 0 && !frames.is_empty() {
            let (name, words) = Self::meaning(&self.alias_words, w, "ALIAS_NAME")?;
            let f = frames.last_mut().expect("top");
            let last = f
                .core
                .last()
                .cloned()
                .ok_or_else(|| bad("an alias with no table reference before it"))?;
            let r = Ref {
                table: last.table,
                name,
                words,
            };
            *f.core.last_mut().expect("core") = r.clone();
            *f.statement
                .last_mut()
                .ok_or_else(|| bad("an alias with no statement reference before it"))? = r;
        } else if self.covering
            && t == terms.column
            && frames.last().is_some_and(|f| f.phase == Phase::Select)
        {
            let name = Self::meaning(&self.column_words, w, "COLUMN_NAME")?;
            let f = frames.last_mut().expect("top");
            if s.qualifier.is_none() {
                f.pending = with(&f.pending, name);
            }
            if depth == f.depth {
                f.said = with(&f.said, name);
            }
        }
        if t == terms.column && s.qualifier.is_none() && self.unambiguous && self.joins_see_right {
            let name = Self::meaning(&self.column_words, w, "COLUMN_NAME")?;
            self.note_bare(&mut frames, name);
        }
        Ok(ScopeState {
            frames,
            depth,
            qualifier,
            alias_for,
        })
    }

    /// Record bare column `name` in the `bare_on` of the frame whose open FROM
    /// clause it resolves against, if any (`_note_bare`).
    fn note_bare(&self, frames: &mut [Frame], name: Name) {
        for f in frames.iter_mut().rev() {
            if f.phase == Phase::From {
                f.bare_on = with(&f.bare_on, name);
                return;
            }
            match f.visible() {
                None => return,
                Some(refs) if refs.iter().any(|r| self.catalog_has(r.table, name)) => return,
                Some(_) => {}
            }
        }
    }

    // ------------------------------------------------------------ words

    /// Per enclosing frame, innermost first: its visible references (`_visible`).
    fn visible<'a>(&self, s: &'a ScopeState) -> Vec<Option<&'a [Ref]>> {
        let mut out = Vec::new();
        for f in s.frames.iter().rev() {
            out.push(f.visible());
            if f.phase == Phase::From && self.joins_see_right {
                break;
            }
        }
        out
    }

    /// (`COLUMN_NAME` words, `QUALIFIER` words) of the next lexeme (`words`).
    pub fn words(&mut self, scope: ScopeId) -> Result<std::sync::Arc<Words>> {
        if let Some(got) = self.scope_words.get(&scope) {
            return Ok(std::sync::Arc::clone(got));
        }
        let got = std::sync::Arc::new(self.compute_words(self.scope(scope)?));
        self.scope_words.insert(scope, std::sync::Arc::clone(&got));
        Ok(got)
    }

    fn compute_words(&self, s: &ScopeState) -> Words {
        let frames = self.visible(s);
        if self.covering && matches!(frames.first(), Some(None)) {
            return self.before_from(s);
        }
        let columns = match s.qualifier {
            Some(q) => self.qualified(&frames, q),
            None => self.unqualified(&frames),
        };
        let spelled = columns
            .iter()
            .flat_map(|&(t, c)| self.catalog_words(t, c).iter().copied())
            .collect();
        let mut qualifiers = Vec::new();
        let mut seen: Vec<Name> = Vec::new();
        for refs in &frames {
            let Some(refs) = refs else { break };
            for r in refs.iter() {
                if seen.contains(&r.name) {
                    continue;
                }
                if !self.qualified(&frames, r.name).is_empty() {
                    qualifiers.extend(r.words.iter().copied());
                }
            }
            seen.extend(refs.iter().map(|r| r.name));
        }
        (normal(spelled), normal(qualifiers))
    }

    /// The words of a select list written before its FROM clause (`_before_from`).
    fn before_from(&self, s: &ScopeState) -> Words {
        let frame = s.frames.last().expect("a select list is in a frame");
        let said: &[Name] = if s.depth == frame.depth {
            &frame.said
        } else {
            &[]
        };
        let table = match s.qualifier {
            Some(q) => Some(
                *self
                    .table_by_name
                    .get(&q)
                    .expect("a qualifier names a granted table"),
            ),
            None => frame.named,
        };
        if let Some(t) = table {
            let columns = self.granted[t as usize]
                .iter()
                .filter(|c| !contains(said, **c))
                .flat_map(|&c| self.catalog_words(t, c).iter().copied())
                .collect();
            let qualifiers = if s.qualifier.is_some() {
                Vec::new()
            } else {
                self.own_alias
                    .get(&t)
                    .map(|o| o.0.clone())
                    .unwrap_or_default()
            };
            return (normal(columns), normal(qualifiers));
        }
        let having: Vec<Table> = (0..self.catalog.len() as Table)
            .filter(|&t| frame.pending.iter().all(|&c| self.catalog_has(t, c)))
            .collect();
        let mut columns = Vec::new();
        let mut qualifiers = Vec::new();
        for &t in &having {
            for (c, _) in &self.catalog[t as usize] {
                if let Some(ws) = self.safe.get(c) {
                    if !contains(said, *c) {
                        columns.extend(ws.iter().copied());
                    }
                }
            }
            if let Some(o) = self.own_alias.get(&t) {
                qualifiers.extend(o.0.iter().copied());
            }
        }
        (normal(columns), normal(qualifiers))
    }

    /// The (table, folded column) pairs a qualifier `name` admits (`_qualified`).
    fn qualified(&self, frames: &[Option<&[Ref]>], name: Name) -> Vec<(Table, Name)> {
        for refs in frames {
            let Some(refs) = refs else { return Vec::new() };
            let named: Vec<&Ref> = refs.iter().filter(|r| r.name == name).collect();
            if self.unambiguous && named.len() > 1 {
                return Vec::new();
            }
            if let Some(first) = named.iter().map(|r| r.table).min() {
                return self.granted[first as usize]
                    .iter()
                    .filter(|&&c| {
                        named
                            .iter()
                            .all(|r| contains(&self.granted[r.table as usize], c))
                    })
                    .map(|&c| (first, c))
                    .collect();
            }
        }
        Vec::new()
    }

    /// The (table, folded column) pairs an unqualified column admits (`_unqualified`).
    fn unqualified(&self, frames: &[Option<&[Ref]>]) -> Vec<(Table, Name)> {
        let mut out = Vec::new();
        let mut decided: Vec<Name> = Vec::new();
        for refs in frames {
            let Some(refs) = refs else { break };
            let mut here: Vec<(Name, Vec<Table>)> = Vec::new();
            for r in refs.iter() {
                for (c, _) in &self.catalog[r.table as usize] {
                    if contains(&decided, *c) {
                        continue;
                    }
                    match here.iter_mut().find(|h| h.0 == *c) {
                        Some(h) => h.1.push(r.table),
                        None => here.push((*c, vec![r.table])),
                    }
                }
            }
            for (c, having) in &here {
                if self.unambiguous && having.len() > 1 {
                    continue;
                }
                if having
                    .iter()
                    .all(|&t| contains(&self.granted[t as usize], *c))
                {
                    out.push((having[0], *c));
                }
            }
            for (c, _) in here {
                decided = with(&decided, c);
            }
            // a name a reference answers to resolves here (its whole row), never
            // past this frame
            for r in refs.iter() {
                decided = with(&decided, r.name);
            }
        }
        out
    }

    /// The `TABLE_NAME` words of the generation language (`tables`), sorted.
    pub fn tables(&self, scope: ScopeId) -> Result<Vec<Word>> {
        let s = self.scope(scope)?;
        let frame = s.frames.last();
        let taken: Vec<Name> =
            frame.map_or(Vec::new(), |f| f.core.iter().map(|r| r.name).collect());
        let bare: &[Name] = frame.map_or(&[], |f| &f.bare_on);
        let mut all: Vec<Word> = self.table_words.keys().copied().collect();
        all.sort_unstable();
        let untaken: Vec<Word> = all
            .iter()
            .copied()
            .filter(|w| {
                let tables = &self.table_words[w].0;
                !tables
                    .iter()
                    .any(|&t| taken.contains(&self.table_name[t as usize]))
            })
            .collect();
        let clear: Vec<Word> = all
            .iter()
            .copied()
            .filter(|w| {
                let tables = &self.table_words[w].0;
                !tables
                    .iter()
                    .any(|&t| bare.iter().any(|&c| self.catalog_has(t, c)))
            })
            .collect();
        let both: Vec<Word> = untaken
            .iter()
            .copied()
            .filter(|w| clear.contains(w))
            .collect();
        let mut free = if !both.is_empty() {
            both
        } else if !clear.is_empty() {
            clear
        } else {
            untaken
        };
        if let Some(f) = frame {
            if self.covering && (!f.pending.is_empty() || f.named.is_some()) {
                free = self.covering_tables(f, free);
            }
        }
        Ok(if free.is_empty() { all } else { free })
    }

    /// Of `free`, the tables a FROM clause after a select list naming
    /// `frame.pending` is best continued with (`_covering`).
    fn covering_tables(&self, frame: &Frame, free: Vec<Word>) -> Vec<Word> {
        let cols = |w: &Word| &self.word_columns[w];
        if frame.core.is_empty() {
            if let Some(named) = frame.named {
                let got: Vec<Word> = free
                    .iter()
                    .copied()
                    .filter(|w| self.table_words[w].0[0] == named)
                    .collect();
                return if got.is_empty() { free } else { got };
            }
            let all: Vec<Word> = free
                .iter()
                .copied()
                .filter(|w| frame.pending.iter().all(|c| contains(cols(w), *c)))
                .collect();
            if !all.is_empty() {
                return all;
            }
            let some: Vec<Word> = free
                .iter()
                .copied()
                .filter(|w| frame.pending.iter().any(|c| contains(cols(w), *c)))
                .collect();
            return if some.is_empty() { free } else { some };
        }
        let have = |c: Name| frame.core.iter().any(|r| self.catalog_has(r.table, c));
        let clash: Vec<Name> = frame.pending.iter().copied().filter(|&c| have(c)).collect();
        let missing: Vec<Name> = frame
            .pending
            .iter()
            .copied()
            .filter(|&c| !have(c))
            .collect();
        let ok: Vec<Word> = free
            .iter()
            .copied()
            .filter(|w| !clash.iter().any(|c| contains(cols(w), *c)))
            .collect();
        let best: Vec<Word> = ok
            .iter()
            .copied()
            .filter(|w| missing.iter().any(|c| contains(cols(w), *c)))
            .collect();
        if !best.is_empty() {
            best
        } else if !ok.is_empty() {
            ok
        } else {
            free
        }
    }

    /// The `ALIAS_NAME` words of the covering language (`aliases`); None for the
    /// whole alias set.
    pub fn aliases(&self, scope: ScopeId) -> Result<Option<Vec<Word>>> {
        let s = self.scope(scope)?;
        let Some(frame) = s.frames.last() else {
            return Ok(None);
        };
        if s.alias_for == 0 {
            return Ok(None);
        }
        if let Some(named) = frame.named {
            if frame.core.len() == 1 && frame.core[0].table == named {
                let own = self
                    .own_alias
                    .get(&named)
                    .map(|o| o.1.clone())
                    .unwrap_or_default();
                return Ok(Some(normal(own)));
            }
        }
        let n = frame.core.len().saturating_sub(1);
        let taken: Vec<Name> = frame.core[..n]
            .iter()
            .map(|r| r.name)
            .filter(|n| self.alias_names.iter().any(|a| a.0 == *n))
            .collect();
        if taken.is_empty() {
            return Ok(None);
        }
        let words = self
            .alias_names
            .iter()
            .filter(|a| !taken.contains(&a.0))
            .flat_map(|a| a.1.iter().copied())
            .collect();
        Ok(Some(normal(words)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELECT: u32 = 11;
    const FROM: u32 = 12;
    const JOIN: u32 = 13;

    /// Two tables, `a(x, y)` and `b(x, z)`, every column granted; the terminals
    /// and states are made up (SELECT shifts into state 101, FROM into 100).
    fn machine() -> Machine {
        let w = |s: &str| s.as_bytes().to_vec();
        let column = |c: &str| (c.to_owned(), vec![w(c)]);
        let spec = ScopeSpec {
            terms: Terms {
                lpar: vec![1],
                rpar: 2,
                table: 3,
                alias: 4,
                qualifier: 5,
                as_: 6,
                column: 7,
                values: 8,
                post: vec![9],
                limit: vec![10],
                from_states: vec![100],
                select_first_states: vec![101],
                ..Terms::default()
            },
            covering: true,
            unambiguous: true,
            joins_see_right: false,
            tables: vec![
                TableSpec {
                    name: "a".into(),
                    columns: vec![column("x"), column("y")],
                    granted: vec!["x".into(), "y".into()],
                },
                TableSpec {
                    name: "b".into(),
                    columns: vec![column("x"), column("z")],
                    granted: vec!["x".into(), "z".into()],
                },
            ],
            table_words: vec![
                (w("a"), vec![0], vec![w("a.")]),
                (w("b"), vec![1], vec![w("b.")]),
            ],
            alias_words: vec![(w("t1"), "t1".into(), vec![w("t1.")])],
            qualifier_words: vec![(w("a."), "a".into()), (w("b."), "b".into())],
            column_words: ["x", "y", "z"]
                .iter()
                .map(|c| (w(c), (*c).into()))
                .collect(),
            safe: vec![column("x"), column("y"), column("z")],
            own_alias: vec![
                (0, vec![w("a.")], vec![w("a")]),
                (1, vec![w("b.")], vec![w("b")]),
            ],
            alias_names: vec![("t1".into(), vec![w("t1")])],
        };
        Machine::new(spec).expect("a valid spec")
    }

    fn spelled(m: &Machine, ws: &[Word]) -> Vec<String> {
        ws.iter()
            .map(|&w| String::from_utf8(m.spelling(w).to_vec()).expect("ascii"))
            .collect()
    }

    fn columns(m: &mut Machine, s: ScopeId) -> Vec<String> {
        let got = m.words(s).expect("a scope");
        spelled(m, &got.0)
    }

    #[test]
    fn a_covering_select_list_then_its_from_clause() {
        let mut m = machine();
        let s = m.after(0, SELECT, b"SELECT", 101).unwrap();
        assert_eq!(columns(&mut m, s), ["x", "y", "z"]);
        let qualifiers = m.words(s).unwrap().1.clone();
        assert_eq!(spelled(&m, &qualifiers), ["a.", "b."]);
        // `x` is said: not again at the list's depth; both tables still have it.
        let s = m.after(s, 7, b"x", 200).unwrap();
        assert_eq!(columns(&mut m, s), ["y", "z"]);
        let s = m.after(s, FROM, b"FROM", 100).unwrap();
        assert!(columns(&mut m, s).is_empty(), "nothing is declared yet");
        let s = m.after(s, 3, b"a", 201).unwrap();
        assert_eq!(columns(&mut m, s), ["x", "y"]);
        // A later table should not have `x` too (the select list's bare `x`
        // would be ambiguous), but b has it: with no better table, the free
        // ones are left (a is taken).
        assert_eq!(spelled(&m, &m.tables(s).unwrap()), ["b"]);
        assert_eq!(m.aliases(s).unwrap(), None);
        let s = m.after(s, JOIN, b"JOIN", 202).unwrap();
        let s = m.after(s, 3, b"b", 203).unwrap();
        assert_eq!(columns(&mut m, s), ["y", "z"], "x is ambiguous");
        let s = m.after(s, 5, b"a.", 204).unwrap();
        assert_eq!(columns(&mut m, s), ["x", "y"]);
        assert_eq!(m.n_scopes(), 8);
    }

    #[test]
    fn a_lexeme_the_spec_does_not_list_is_an_error() {
        let mut m = machine();
        let s = m.after(0, FROM, b"FROM", 100).unwrap();
        let err = m.after(s, 3, b"c", 201).unwrap_err();
        assert!(err.to_string().contains("TABLE_NAME"), "{err}");
    }
}
