//! The byte scanner: maximal munch over the union DFA beside the lexicon trie.
//!
//! Mirrors `grid_core.lexer.Scanner` and `grid_core.walk.rescan`. Vocabulary as
//! there: the **remainder** is the lexeme in progress; its **scan state** is
//! updated in O(1) per byte; the **candidates** of a lexeme are the terminals
//! whose language contains it (a lexicon category only for a whole word); the
//! **pick** is the first candidate in pick order that is allowed or ignored.
//!
//! Representation: grid-core's scan state is `(q, ln, la_len, la_cands)`. Here
//! `la_cands` is not stored: it is a function of the DFA state and lexicon node
//! at the last accept, `candidates(accept[la_q], la_ln)`, so the state is five
//! machine words and copying it allocates nothing.

use crate::bits;
use crate::tables::{GrammarTables, NO_NODE};

/// Scan state of a remainder (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scan {
    /// DFA state after the remainder.
    pub q: u32,
    /// Lexicon node after the remainder, or [`NO_NODE`].
    pub ln: i32,
    /// Length of the longest accepted prefix (0: none).
    pub la_len: u32,
    /// DFA state right after that prefix (meaningless while `la_len == 0`).
    pub la_q: u32,
    /// Lexicon node right after that prefix.
    pub la_ln: i32,
}

/// The scan state of the empty remainder.
pub const START: Scan = Scan {
    q: 0,
    ln: 0,
    la_len: 0,
    la_q: 0,
    la_ln: NO_NODE,
};

/// What scanning a byte string from the start state under a fixed allowed set
/// gives (`grid_core.walk.rescan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rescan {
    /// An emission fails (no accepted prefix, or no viable pick).
    Dead,
    /// The first emission that would shift: terminal, tail start in the input.
    Emit { terminal: u32, tail: usize },
    /// The input stays on the stack: the scan state of `input[start..]`.
    Stay { scan: Scan, start: usize },
}

/// What one allowed set A induces, for a walk: the sets the scanner tests
/// against, and per-DFA-state memos of the two questions the walk asks at
/// almost every trie node (is the remainder live? what does its last accept
/// pick?). The memos start empty (one `memset` per walk) and fill on first use,
/// so a walk touching a few states pays for a few states.
#[derive(Clone, Debug)]
pub struct Allowed {
    /// A itself (bit T is `$END`).
    pub allowed: Vec<u64>,
    /// A or ignored: what a pick may choose.
    pub ok: Vec<u64>,
    /// `ok` minus the lexicon categories (liveness from the DFA).
    pub ok_plain: Vec<u64>,
    /// `ok` within the lexicon categories (liveness from the lexicon).
    pub ok_lex: Vec<u64>,
    /// A lexicon category is allowed or ignored (an identifier position).
    lex_visible: bool,
    /// Per DFA state: 0 unknown, 1 `live[q] & ok_plain` empty, 2 not empty.
    live_q: Vec<u8>,
    /// Per DFA state: the pick among `accept[q]` minus the categories
    /// ([`PICK_UNKNOWN`], [`PICK_NONE`] or a terminal).
    pick_q: Vec<u32>,
}

const PICK_UNKNOWN: u32 = u32::MAX;
const PICK_NONE: u32 = u32::MAX - 1;

impl GrammarTables {
    /// The per-walk view of allowed set `allowed` (`width` words).
    pub fn allowed_sets(&self, allowed: &[u64]) -> Allowed {
        debug_assert_eq!(allowed.len(), self.width);
        let cats = &self.lexicon.categories;
        let ok: Vec<u64> = allowed
            .iter()
            .zip(&self.lexing.ignored)
            .map(|(a, i)| a | i)
            .collect();
        let ok_lex: Vec<u64> = ok.iter().zip(cats).map(|(o, c)| o & c).collect();
        Allowed {
            allowed: allowed.to_vec(),
            ok_plain: ok.iter().zip(cats).map(|(o, c)| o & !c).collect(),
            lex_visible: !bits::is_empty(&ok_lex),
            ok_lex,
            ok,
            live_q: vec![0; self.n_dfa_states()],
            pick_q: vec![PICK_UNKNOWN; self.n_dfa_states()],
        }
    }

    /// [`GrammarTables::live`] through the walk's memo.
    #[inline(always)]
    pub fn live_in(&self, q: u32, ln: i32, a: &mut Allowed) -> bool {
        let memo = &mut a.live_q[q as usize];
        if *memo == 0 {
            *memo = 1 + u8::from(bits::intersects(
                self.lexing.dfa.live.row(q as usize),
                &a.ok_plain,
            ));
        }
        *memo == 2
            || (a.lex_visible
                && ln != NO_NODE
                && bits::intersects(self.lexicon.prefix_cats.row(ln as usize), &a.ok_lex))
    }

    /// The DFA alone makes a remainder in state `q` live under the allowed set
    /// (the first half of [`GrammarTables::live_in`]).
    #[inline(always)]
    pub fn live_dfa_in(&self, q: u32, a: &mut Allowed) -> bool {
        let memo = &mut a.live_q[q as usize];
        if *memo == 0 {
            *memo = 1 + u8::from(bits::intersects(
                self.lexing.dfa.live.row(q as usize),
                &a.ok_plain,
            ));
        }
        *memo == 2
    }

    /// [`GrammarTables::pick`] through the walk's memo. The pick depends on the
    /// lexicon node only when the accepting state accepts a category and a
    /// word is in progress; every other pick is a function of the state.
    #[inline]
    pub fn pick_in(&self, scan: &Scan, a: &mut Allowed) -> Option<u32> {
        debug_assert!(scan.la_len > 0);
        if scan.la_ln != NO_NODE && self.accepts_category[scan.la_q as usize] {
            return self.pick(scan, &a.ok);
        }
        let memo = &mut a.pick_q[scan.la_q as usize];
        if *memo == PICK_UNKNOWN {
            let plain = Scan {
                la_ln: NO_NODE,
                ..*scan
            };
            *memo = self.pick(&plain, &a.ok).unwrap_or(PICK_NONE);
        }
        (*memo != PICK_NONE).then_some(*memo)
    }

    /// One more byte of a remainder now `length` bytes long (byte included);
    /// `None` when the byte kills the automaton (`Scanner.step`).
    #[inline(always)]
    pub fn step(&self, scan: Scan, length: u32, byte: u8) -> Option<Scan> {
        let dfa = &self.lexing.dfa;
        let e = dfa.next[scan.q as usize * dfa.n_classes + dfa.class_of[byte as usize] as usize];
        if e < 0 {
            return None;
        }
        let q = (e >> 1) as u32;
        let ln = self.lexicon.step(scan.ln, byte);
        if e & 1 == 0 {
            Some(Scan { q, ln, ..scan })
        } else {
            Some(Scan {
                q,
                ln,
                la_len: length,
                la_q: q,
                la_ln: ln,
            })
        }
    }

    /// The remainder with DFA state `q` and lexicon node `ln` is live under the
    /// allowed set (`Scanner.live`; the remainder is not empty).
    #[inline]
    pub fn live(&self, q: u32, ln: i32, a: &Allowed) -> bool {
        bits::intersects(self.lexing.dfa.live.row(q as usize), &a.ok_plain)
            || (ln != NO_NODE
                && bits::intersects(self.lexicon.prefix_cats.row(ln as usize), &a.ok_lex))
    }

    /// [`GrammarTables::live`] under a bare allowed set (no walk memos), for
    /// one-off questions such as `Lexer.is_viable`.
    pub fn live_under(&self, q: u32, ln: i32, allowed: &[u64]) -> bool {
        let cats = &self.lexicon.categories;
        let live = self.lexing.dfa.live.row(q as usize);
        let ok = |i: usize| allowed[i] | self.lexing.ignored[i];
        (0..self.width).any(|i| live[i] & ok(i) & !cats[i] != 0)
            || (ln != NO_NODE && {
                let prefix = self.lexicon.prefix_cats.row(ln as usize);
                (0..self.width).any(|i| prefix[i] & ok(i) & cats[i] != 0)
            })
    }

    /// An identifier position: a lexicon category is in `allowed` or ignored
    /// (the walk's key then carries the schema and the lexicon state).
    pub fn ident_position(&self, allowed: &[u64]) -> bool {
        (0..self.width)
            .any(|i| (allowed[i] | self.lexing.ignored[i]) & self.lexicon.categories[i] != 0)
    }

    /// The candidates of the last accepted lexeme of `scan` that can ever be
    /// picked (within `GrammarTables::emittable`): the `p` of grid-core's
    /// normal form (`Lexer.config`).
    pub fn emittable_candidates(&self, scan: &Scan) -> Vec<u64> {
        let mut p = self.candidates(scan);
        for (w, e) in p.iter_mut().zip(&self.emittable) {
            *w &= e;
        }
        p
    }

    /// The candidates of the last accepted lexeme of `scan` as a terminal set
    /// (grid-core's `la_cands`; empty while `la_len == 0`).
    pub fn candidates(&self, scan: &Scan) -> Vec<u64> {
        if scan.la_len == 0 {
            return vec![0; self.width];
        }
        self.candidates_at(scan.la_q as usize, scan.la_ln)
    }

    /// The candidates of a lexeme that ends in DFA state `q` and lexicon node
    /// `ln` (`Scanner.candidates(accept[q], ln)`).
    pub fn candidates_at(&self, q: usize, ln: i32) -> Vec<u64> {
        let accept = self.lexing.dfa.accept.row(q);
        let cats = &self.lexicon.categories;
        let words = (ln != NO_NODE).then(|| self.lexicon.word_cats.row(ln as usize));
        (0..self.width)
            .map(|i| (accept[i] & !cats[i]) | (accept[i] & cats[i] & words.map_or(0, |w| w[i])))
            .collect()
    }

    /// The first of `cands` in pick order within `ok` (allowed or ignored):
    /// `Scanner.pick(cands, allowed)` for a candidate set given whole.
    pub fn pick_among(&self, cands: &[u64], ok: &[u64]) -> Option<u32> {
        let mut best = u32::MAX;
        for i in 0..self.width {
            let mut x = cands[i] & ok[i];
            while x != 0 {
                best = best.min(self.rank[i * 64 + x.trailing_zeros() as usize]);
                x &= x - 1;
            }
        }
        (best != u32::MAX).then(|| self.order[best as usize])
    }

    /// The pick among the candidates of the last accepted lexeme of `scan`
    /// under `ok` (allowed or ignored), or `None` (`Scanner.pick`).
    /// Precondition: `scan.la_len > 0`.
    #[inline]
    pub fn pick(&self, scan: &Scan, ok: &[u64]) -> Option<u32> {
        debug_assert!(scan.la_len > 0);
        let accept = self.lexing.dfa.accept.row(scan.la_q as usize);
        let cats = &self.lexicon.categories;
        let words =
            (scan.la_ln != NO_NODE).then(|| self.lexicon.word_cats.row(scan.la_ln as usize));
        let mut best = u32::MAX;
        for i in 0..self.width {
            let a = accept[i];
            // candidates(accept, ln): every plain terminal, a category only for a word.
            let cands = (a & !cats[i]) | (a & cats[i] & words.map_or(0, |w| w[i]));
            let mut x = cands & ok[i];
            while x != 0 {
                let t = i * 64 + x.trailing_zeros() as usize;
                best = best.min(self.rank[t]);
                x &= x - 1;
            }
        }
        (best != u32::MAX).then(|| self.order[best as usize])
    }

    /// The scan state of `data` as one remainder, or `None` if it dies inside
    /// (`Scanner.scan`).
    pub fn scan(&self, data: &[u8]) -> Option<Scan> {
        let mut scan = START;
        for (i, &b) in data.iter().enumerate() {
            scan = self.step(scan, i as u32 + 1, b)?;
        }
        Some(scan)
    }

    /// Scan `data` from the start state under a fixed allowed set
    /// (`grid_core.walk.rescan`): ignored picks are skipped inline, the first
    /// other pick is reported with its requeued tail.
    pub fn rescan(&self, data: &[u8], a: &mut Allowed) -> Rescan {
        let mut scan = START;
        let (mut start, mut i) = (0usize, 0usize);
        while i < data.len() {
            if let Some(next) = self.step(scan, (i + 1 - start) as u32, data[i]) {
                scan = next;
                i += 1;
                continue;
            }
            if scan.la_len == 0 {
                return Rescan::Dead;
            }
            let Some(t) = self.pick_in(&scan, a) else {
                return Rescan::Dead;
            };
            if !self.is_ignored(t as usize) {
                return Rescan::Emit {
                    terminal: t,
                    tail: start + scan.la_len as usize,
                };
            }
            start += scan.la_len as usize;
            i = start;
            scan = START;
        }
        Rescan::Stay { scan, start }
    }
}
