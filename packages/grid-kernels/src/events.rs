//! Parse events in the session: `grid_core.events.EventTracker`, natively.
//!
//! Same nouns and the same stream as grid-core (docs/events.md): an **event**
//! is a marked rule's reduction or a marked terminal's lexeme, with its byte
//! span and the token step that *determined* it; after each accepted token the
//! stream gains the events the output now forces:
//!
//! 1. **realized**: the reductions and shifts of the lexemes the token emitted
//!    (the scanner's emissions, reported by [`GrammarTables::read_with`]),
//!    applied to the *span stack*: the parser's stack with the byte span of
//!    each symbol;
//! 2. **forced** (virtual, dropped after the step): if the remainder is a
//!    complete lexeme no byte extends within the language, its reductions and
//!    shift; then the reduce chain every possible next terminal shares.
//!
//! A realized event already emitted as forced (the stream's last `ahead`
//! events) is not emitted again; `ahead` is always a suffix of the stream.
//!
//! Cost. Which forced reductions follow is a function of the configuration
//! (stack node, scan state, whether the remainder is empty or one complete
//! lexeme), so it is computed once per configuration as a **plan** of parser
//! operations and memoized in the arena generation ([`crate::engine::Stacks`],
//! byte-capped, least recently used evicted). A warm step applies its plan
//! only when the plan holds a marked operation: otherwise forcing adds
//! nothing and the step costs one memo lookup, or none where the plan is
//! empty by construction (no forced lexeme, and the top state reduces on no
//! terminal that can come next: [`EventTables`]' `plan_is_empty`). Realized emissions walk the
//! span stack's reduce chain through the ACTION table, as the parser does.
//!
//! State. The span stack is an append-only arena of cells owned by the
//! session's tracker; per step the tracker keeps its top cell, the stream
//! length, `ahead` and the arena length, so `rollback` truncates all three and
//! a fork copies them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::bits;
use crate::error::{KernelError, Result};
use crate::parser::{NodeId, StackArena};
use crate::scanner::Scan;
use crate::tables::{GrammarTables, NO_NODE};

/// "Not an event" in [`EventTables`]' code columns.
pub const NOT_MARKED: u32 = u32::MAX;

/// One event: `code` indexes the caller's (kind, name) table; `[start, end)`
/// are byte offsets of the output; `step` is the token step that determined it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub code: u32,
    pub start: u32,
    pub end: u32,
    pub step: u32,
}

impl Event {
    fn key(&self) -> (u32, u32, u32) {
        (self.code, self.start, self.end)
    }
}

/// One parser operation of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reduce this rule.
    Reduce(u32),
    /// Shift this terminal over the whole remainder.
    Shift(u32),
}

/// A configuration's forced operations, and whether any of them is an event.
#[derive(Debug)]
pub struct Plan {
    ops: Box<[Op]>,
    marked: bool,
}

/// The plan memo's key, packed in three words: the event tables' serial, the
/// stack node, the scan state with `la_len` read only as zero or not (all a
/// plan reads of it), and the remainder's shape (0 empty, 1 not a whole
/// lexeme, 2 one whole lexeme).
pub type PlanKey = [u64; 3];

/// The plan memo: `None` for a configuration whose plan forces no event (the
/// common case, answered without reading a plan).
pub type Plans = crate::lru::Lru<PlanKey, Option<Arc<Plan>>>;

fn plan_key(serial: u64, node: NodeId, scan: &Scan, shape: u8) -> PlanKey {
    let flags = u64::from(shape) | (u64::from(scan.la_len > 0) << 2);
    [
        serial << 35 | flags << 32 | u64::from(node),
        u64::from(scan.q) | u64::from(scan.ln as u32) << 32,
        u64::from(scan.la_q) | u64::from(scan.la_ln as u32) << 32,
    ]
}

static SERIAL: AtomicU64 = AtomicU64::new(1);

/// Which rules and terminals of one grammar are events (`EventSpec.compile`).
#[derive(Debug)]
pub struct EventTables {
    serial: u64,
    rule_code: Vec<u32>,
    term_code: Vec<u32>,
    /// Per DFA state: the terminals live after one more byte (`_extensions`).
    extensions: Vec<Vec<u64>>,
    /// Per LALR state, `width` words: the columns (terminals, `$END`) that
    /// reduce there. A reduce chain starts only on one of them.
    reduce_cols: Vec<u64>,
    /// Per LALR state: its ACTION cell when every non-error column holds the
    /// same reduction (a *default reduction*), else 0. A terminal the parser
    /// takes is never an error column, so there its cell is this one.
    default: Vec<i32>,
}

impl EventTables {
    /// The event codes of `grammar`: per rule and per terminal, a code or
    /// [`NOT_MARKED`]. Rule 0 (the augmented start) is never an event.
    pub fn new(grammar: &GrammarTables, rule_code: Vec<u32>, term_code: Vec<u32>) -> Result<Self> {
        let lalr = &grammar.lalr;
        let bad = |detail: String| KernelError::InvalidTerminal {
            terminal: -1,
            detail,
        };
        if rule_code.len() != lalr.rule_lhs.len() {
            return Err(bad(format!(
                "event codes for {} rules, the grammar has {}",
                rule_code.len(),
                lalr.rule_lhs.len()
            )));
        }
        if term_code.len() != grammar.n_terminals {
            return Err(bad(format!(
                "event codes for {} terminals, the grammar has {}",
                term_code.len(),
                grammar.n_terminals
            )));
        }
        if rule_code.first().is_some_and(|&c| c != NOT_MARKED) {
            return Err(bad("the augmented start rule cannot be an event".into()));
        }
        let dfa = &grammar.lexing.dfa;
        let extensions = (0..dfa.n_states())
            .map(|q| {
                let mut grow = vec![0u64; grammar.width];
                for c in 0..dfa.n_classes {
                    let e = dfa.next[q * dfa.n_classes + c];
                    if e >= 0 {
                        for (g, l) in grow.iter_mut().zip(dfa.live.row((e >> 1) as usize)) {
                            *g |= l;
                        }
                    }
                }
                grow
            })
            .collect();
        let width = lalr.width();
        let mut reduce_cols = vec![0u64; lalr.n_states() * grammar.width];
        for st in 0..lalr.n_states() {
            for t in 0..width {
                if lalr.action[st * width + t] < -1 {
                    bits::set(
                        &mut reduce_cols[st * grammar.width..(st + 1) * grammar.width],
                        t,
                    );
                }
            }
        }
        let default = (0..lalr.n_states())
            .map(|st| {
                let mut cells = lalr.action[st * width..(st + 1) * width]
                    .iter()
                    .filter(|&&a| a != 0);
                match cells.next() {
                    Some(&a) if a < -1 && cells.all(|&b| b == a) => a,
                    _ => 0,
                }
            })
            .collect();
        Ok(Self {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            default,
            rule_code,
            term_code,
            extensions,
            reduce_cols,
        })
    }

    /// The plan of a configuration is empty by construction, read from tables
    /// alone: no forced lexeme (`shape` is not 2) and no terminal that can come
    /// next reduces in the top state `state`. Empty remainder: the next terminal
    /// is any of the allowed set, so the state must reduce on nothing. A lexeme in
    /// progress: the next terminal is one the remainder's DFA state keeps live or
    /// one its last accept spells (`_possible`, over-approximated), unless an
    /// ignored terminal is live (then any allowed one).
    fn plan_is_empty(&self, g: &GrammarTables, state: u32, scan: &Scan, shape: u8) -> bool {
        let w = g.width;
        let cols = &self.reduce_cols[state as usize * w..(state as usize + 1) * w];
        match shape {
            0 => bits::is_empty(cols),
            1 => {
                let live = g.lexing.dfa.live.row(scan.q as usize);
                if bits::intersects(live, &g.lexing.ignored) {
                    return bits::is_empty(cols);
                }
                if scan.la_len == 0 {
                    return !bits::intersects(live, cols);
                }
                let accept = g.lexing.dfa.accept.row(scan.la_q as usize);
                (0..w).all(|i| (live[i] | accept[i]) & cols[i] == 0)
            }
            _ => false,
        }
    }
}

/// One cell of the span stack: LALR state and the span of its symbol.
#[derive(Clone, Copy, Debug)]
struct Cell {
    parent: u32,
    state: u32,
    start: u32,
    end: u32,
}

/// The tracker's record of one step.
#[derive(Clone, Copy, Debug)]
struct Mark {
    top: u32,
    n_events: u32,
    ahead: u32,
    n_cells: u32,
}

/// A scanner emission of the step: terminal, span.
pub type Emission = (u32, usize, usize);

/// One session's event stream (see the module header).
#[derive(Clone, Debug)]
pub struct Tracker {
    tables: Arc<EventTables>,
    cells: Vec<Cell>,
    events: Vec<Event>,
    marks: Vec<Mark>,
    /// The forced events of the step in progress.
    forced: Vec<Event>,
    /// Of the events emitted ahead, those the step in progress has not yet
    /// realized (they are the stream's last `ahead`).
    ahead: u32,
}

/// What the tracker reads of the session's configuration after a step.
pub struct At<'a> {
    pub grammar: &'a GrammarTables,
    pub node: NodeId,
    pub scan: Scan,
    /// Where the remainder starts and its length.
    pub pos: usize,
    pub rem_len: usize,
    pub step: u32,
}

impl Tracker {
    /// A stream at the root, with the events the empty output forces.
    pub fn new(
        tables: Arc<EventTables>,
        arena: &mut StackArena,
        plans: &mut Plans,
        at: &At<'_>,
    ) -> Result<Self> {
        let mut cells = Vec::with_capacity(256);
        cells.push(Cell {
            parent: u32::MAX,
            state: 0,
            start: 0,
            end: 0,
        });
        let mut t = Self {
            tables,
            cells,
            events: Vec::with_capacity(64),
            marks: Vec::with_capacity(128),
            forced: Vec::with_capacity(16),
            ahead: 0,
        };
        t.settle(arena, plans, at, 0, 0)?;
        Ok(t)
    }

    /// The events so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    fn mark(&self) -> Mark {
        *self.marks.last().expect("a tracker has its initial mark")
    }

    /// The step after a token whose scanner emissions were `emissions`
    /// (the session has accepted it; `at` is its new configuration).
    pub fn advance(
        &mut self,
        arena: &mut StackArena,
        plans: &mut Plans,
        emissions: &[Emission],
        at: &At<'_>,
    ) -> Result<()> {
        let m = self.mark();
        self.ahead = m.ahead;
        let mut top = m.top;
        for &(t, start, end) in emissions {
            if at.grammar.is_ignored(t as usize) {
                continue;
            }
            top = self.shift(at.grammar, top, t, start as u32, end as u32, at.step, true);
        }
        self.settle(arena, plans, at, top, self.ahead)
    }

    /// The step after EOS: the remainder's final emissions `emissions`,
    /// then `$END` reduced up to ACCEPT.
    pub fn finish(&mut self, grammar: &GrammarTables, emissions: &[Emission], step: u32) {
        let m = self.mark();
        self.ahead = m.ahead;
        let mut top = m.top;
        for &(t, start, end) in emissions {
            if grammar.is_ignored(t as usize) {
                continue;
            }
            top = self.shift(grammar, top, t, start as u32, end as u32, step, true);
        }
        top = self.reduce_all(grammar, top, grammar.n_terminals as u32, step, true);
        self.marks.push(Mark {
            top,
            n_events: self.events.len() as u32,
            ahead: self.ahead,
            n_cells: self.cells.len() as u32,
        });
    }

    /// Keep the history of the first `steps` steps (`rollback`).
    pub fn truncate(&mut self, steps: usize) {
        self.marks.truncate(steps + 1);
        let m = self.mark();
        self.events.truncate(m.n_events as usize);
        self.cells.truncate(m.n_cells as usize);
    }

    /// The event `code` (none when [`NOT_MARKED`]) spanning `[start, end)`.
    fn event(&mut self, code: u32, start: u32, end: u32, step: u32, real: bool) {
        if code != NOT_MARKED {
            let e = Event {
                code,
                start,
                end,
                step,
            };
            self.emit(e, real);
        }
    }

    /// An event of the step: realized (`real`: appended unless it is the
    /// next of those emitted ahead) or forced (kept for [`Self::settle`]).
    fn emit(&mut self, e: Event, real: bool) {
        if !real {
            self.forced.push(e);
        } else if self.ahead > 0 {
            let emitted = self.events[self.events.len() - self.ahead as usize];
            debug_assert_eq!(emitted.key(), e.key(), "forced, then realized otherwise");
            self.ahead -= 1;
        } else {
            self.events.push(e);
        }
    }

    /// Reduce as terminal `t` (`$END`: up to ACCEPT) makes the stack at `top`
    /// reduce; marked reductions are emitted ([`Self::emit`]). Cells are
    /// appended; the new top is returned.
    fn reduce_all(
        &mut self,
        g: &GrammarTables,
        mut top: u32,
        t: u32,
        step: u32,
        real: bool,
    ) -> u32 {
        let lalr = &g.lalr;
        let width = lalr.width();
        loop {
            let state = self.cells[top as usize].state as usize;
            let mut a = self.tables.default[state];
            if a == 0 {
                a = lalr.action[state * width + t as usize];
            }
            if a >= 0 || a == -1 {
                return top;
            }
            top = self.reduce(g, top, (-a - 1) as u32, step, real);
        }
    }

    fn reduce(&mut self, g: &GrammarTables, top: u32, rule: u32, step: u32, real: bool) -> u32 {
        let lalr = &g.lalr;
        let n = lalr.rule_len[rule as usize];
        let top_cell = self.cells[top as usize];
        let (mut below, mut first) = (top, top_cell);
        for _ in 0..n {
            first = self.cells[below as usize];
            below = first.parent;
        }
        let base = self.cells[below as usize];
        let (start, end) = if n > 0 {
            (first.start, top_cell.end)
        } else {
            (base.end, base.end)
        };
        let state = lalr.goto
            [base.state as usize * lalr.n_nonterminals + lalr.rule_lhs[rule as usize] as usize];
        self.event(self.tables.rule_code[rule as usize], start, end, step, real);
        self.push(below, state as u32, start, end)
    }

    #[allow(clippy::too_many_arguments)]
    fn shift(
        &mut self,
        g: &GrammarTables,
        top: u32,
        t: u32,
        start: u32,
        end: u32,
        step: u32,
        real: bool,
    ) -> u32 {
        let top = self.reduce_all(g, top, t, step, real);
        let lalr = &g.lalr;
        let a = lalr.action[self.cells[top as usize].state as usize * lalr.width() + t as usize];
        debug_assert!(a > 0, "the terminal shifts after its reductions");
        self.event(self.tables.term_code[t as usize], start, end, step, real);
        self.push(top, (a - 1) as u32, start, end)
    }

    fn push(&mut self, parent: u32, state: u32, start: u32, end: u32) -> u32 {
        self.cells.push(Cell {
            parent,
            state,
            start,
            end,
        });
        (self.cells.len() - 1) as u32
    }

    /// Emit what the configuration `at` forces (its plan, applied to a copy
    /// of the span stack when it holds an event) and record the step.
    fn settle(
        &mut self,
        arena: &mut StackArena,
        plans: &mut Plans,
        at: &At<'_>,
        top: u32,
        ahead: u32,
    ) -> Result<()> {
        let shape = match at.rem_len {
            0 => 0,
            n if n == at.scan.la_len as usize => 2,
            _ => 1,
        };
        let state = self.cells[top as usize].state;
        if self
            .tables
            .plan_is_empty(at.grammar, state, &at.scan, shape)
        {
            self.record(top, ahead);
            return Ok(());
        }
        let key = plan_key(self.tables.serial, at.node, &at.scan, shape);
        let made;
        let plan: &Plan = match plans.get_mut(&key) {
            Some(None) => {
                self.record(top, ahead);
                return Ok(());
            }
            Some(Some(p)) => p,
            None => {
                let p = self.plan(arena, at, shape)?;
                if !p.marked {
                    plans.insert(key, None, 48);
                    self.record(top, ahead);
                    return Ok(());
                }
                let p = Arc::new(p);
                plans.insert(key, Some(Arc::clone(&p)), 64 + 8 * p.ops.len());
                made = p;
                &made
            }
        };
        let n_cells = self.cells.len() as u32;
        self.forced.clear();
        let (pos, end) = (at.pos as u32, (at.pos + at.rem_len) as u32);
        let mut t_top = top;
        for &op in plan.ops.iter() {
            t_top = match op {
                Op::Reduce(rule) => self.reduce(at.grammar, t_top, rule, at.step, false),
                Op::Shift(t) => {
                    let lalr = &at.grammar.lalr;
                    let a = lalr.action
                        [self.cells[t_top as usize].state as usize * lalr.width() + t as usize];
                    self.event(self.tables.term_code[t as usize], pos, end, at.step, false);
                    self.push(t_top, (a - 1) as u32, pos, end)
                }
            };
        }
        self.cells.truncate(n_cells as usize);
        let base = self.events.len() - ahead as usize;
        debug_assert!(
            (0..self.forced.len().min(ahead as usize))
                .all(|i| self.events[base + i].key() == self.forced[i].key()),
            "forced events disagree with those emitted ahead"
        );
        for i in ahead as usize..self.forced.len() {
            self.events.push(self.forced[i]);
        }
        self.record(top, ahead.max(self.forced.len() as u32));
        Ok(())
    }

    /// Close the step: its top cell, the stream's length, `ahead`.
    fn record(&mut self, top: u32, ahead: u32) {
        self.marks.push(Mark {
            top,
            n_events: self.events.len() as u32,
            ahead,
            n_cells: self.cells.len() as u32,
        });
    }

    /// The forced operations of configuration `at` (see the module header;
    /// `EventTracker._settle`, `_forced`, `_possible`, `_common_chain`).
    fn plan(&self, arena: &mut StackArena, at: &At<'_>, shape: u8) -> Result<Plan> {
        let g = at.grammar;
        let lalr = &g.lalr;
        let width = lalr.width();
        let mut states = arena.states(at.node);
        let mut ops = Vec::new();
        let mut allowed = arena.allowed(at.node)?.to_vec();
        let possible = if shape == 0 {
            allowed
        } else {
            match self.forced_terminal(g, &at.scan, shape, &allowed) {
                None => self.possible(g, &at.scan, &allowed),
                Some(t) => {
                    if !g.is_ignored(t as usize) {
                        reduce_states(g, &mut states, t as usize, &mut ops);
                        let top = *states.last().expect("a stack has its root");
                        let a = lalr.action[top as usize * width + t as usize];
                        states.push((a - 1) as u32);
                        ops.push(Op::Shift(t));
                        let shifted = arena.shift(at.node, t as usize)?;
                        allowed = arena.allowed(shifted)?.to_vec();
                    }
                    allowed
                }
            }
        };
        // the reduce chain every terminal of `possible` shares
        if !bits::is_empty(&possible) {
            loop {
                let top = *states.last().expect("a stack has its root") as usize;
                let mut only: Option<i32> = None;
                let mut agree = true;
                for (w, &word) in possible.iter().enumerate() {
                    let mut x = word;
                    while x != 0 {
                        let t = 64 * w + x.trailing_zeros() as usize;
                        x &= x - 1;
                        let a = lalr.action[top * width + t];
                        match only {
                            None => only = Some(a),
                            Some(b) if b == a => {}
                            Some(_) => agree = false,
                        }
                    }
                }
                let Some(a) = only.filter(|&a| agree && a < -1) else {
                    break;
                };
                let rule = (-a - 1) as usize;
                pop_reduce(g, &mut states, rule);
                ops.push(Op::Reduce(rule as u32));
            }
        }
        let marked = ops.iter().any(|op| match *op {
            Op::Reduce(r) => self.tables.rule_code[r as usize] != NOT_MARKED,
            Op::Shift(t) => self.tables.term_code[t as usize] != NOT_MARKED,
        });
        Ok(Plan {
            ops: ops.into_boxed_slice(),
            marked,
        })
    }

    /// The terminal picked for a remainder that is one complete lexeme no
    /// byte extends within the language (`_forced`); `shape` 2 means the
    /// remainder is exactly its last accept.
    fn forced_terminal(
        &self,
        g: &GrammarTables,
        scan: &Scan,
        shape: u8,
        allowed: &[u64],
    ) -> Option<u32> {
        if shape != 2 {
            return None;
        }
        let cats = &g.lexicon.categories;
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&g.lexing.ignored)
            .map(|(a, i)| a | i)
            .collect();
        let ext = &self.tables.extensions[scan.q as usize];
        let grow: Vec<u64> = ext.iter().zip(&ok).map(|(e, o)| e & o).collect();
        if grow.iter().zip(cats).any(|(g, c)| g & !c != 0) {
            return None;
        }
        if grow.iter().zip(cats).any(|(g, c)| g & c != 0) && scan.ln != NO_NODE {
            let lex = &g.lexicon;
            let n = scan.ln as usize;
            for k in lex.start[n] as usize..lex.start[n + 1] as usize {
                let child = lex.child[k];
                let pc = lex.prefix_cats.row(child as usize);
                if pc
                    .iter()
                    .zip(&ok)
                    .zip(cats)
                    .any(|((p, o), c)| p & o & c != 0)
                {
                    return None;
                }
            }
        }
        g.pick(scan, &ok)
    }

    /// The terminals the next lexeme can be, for a remainder that may still
    /// grow (`_possible`).
    fn possible(&self, g: &GrammarTables, scan: &Scan, allowed: &[u64]) -> Vec<u64> {
        let cats = &g.lexicon.categories;
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&g.lexing.ignored)
            .map(|(a, i)| a | i)
            .collect();
        let mut live: Vec<u64> = g
            .lexing
            .dfa
            .live
            .row(scan.q as usize)
            .iter()
            .zip(&ok)
            .map(|(l, o)| l & o)
            .collect();
        if live.iter().zip(cats).any(|(l, c)| l & c != 0) {
            let words = (scan.ln != NO_NODE).then(|| g.lexicon.prefix_cats.row(scan.ln as usize));
            for (i, l) in live.iter_mut().enumerate() {
                let w = words.map_or(0, |w| w[i]);
                *l = (*l & !cats[i]) | (*l & cats[i] & w);
            }
        }
        if scan.la_len > 0 {
            if let Some(t) = g.pick(scan, &ok) {
                bits::set(&mut live, t as usize);
            }
        }
        if live.iter().zip(&g.lexing.ignored).any(|(l, i)| l & i != 0) {
            return allowed.to_vec();
        }
        let mut out: Vec<u64> = live.iter().zip(allowed).map(|(l, a)| l & a).collect();
        let end = g.n_terminals;
        out[end / 64] &= !(1u64 << (end % 64));
        out
    }
}

/// Reduce `states` as terminal `t` makes them, recording the rules.
fn reduce_states(g: &GrammarTables, states: &mut Vec<u32>, t: usize, ops: &mut Vec<Op>) {
    let lalr = &g.lalr;
    loop {
        let top = *states.last().expect("a stack has its root") as usize;
        let a = lalr.action[top * lalr.width() + t];
        if a >= 0 || a == -1 {
            return;
        }
        let rule = (-a - 1) as usize;
        pop_reduce(g, states, rule);
        ops.push(Op::Reduce(rule as u32));
    }
}

fn pop_reduce(g: &GrammarTables, states: &mut Vec<u32>, rule: usize) {
    let lalr = &g.lalr;
    let n = lalr.rule_len[rule] as usize;
    states.truncate(states.len() - n);
    let below = *states.last().expect("reduce popped past the root") as usize;
    let goto = lalr.goto[below * lalr.n_nonterminals + lalr.rule_lhs[rule] as usize];
    states.push(goto as u32);
}
