//! The scanner (`src/scanner.rs`) against the raw tables, for the mutation
//! campaign (issue 14): on the fixture's grammar (a lexicon with categories,
//! ignored terminals), every DFA state, lexicon node and a range of allowed
//! sets: liveness (all four forms, memoized or not), candidates, emittable
//! candidates and the pick (memoized or not) computed from the definitions
//! in the module header; `step`, `scan` and `rescan` against a byte-by-byte
//! reference over the raw transition table.

mod common;

use std::sync::Arc;

use grid_kernels::scanner::{Rescan, Scan, START};
use grid_kernels::tables::NO_NODE;
use grid_kernels::{GrammarTables, RawGrammar};

fn has(set: &[u64], t: usize) -> bool {
    set[t / 64] >> (t % 64) & 1 == 1
}

struct Ref<'r> {
    raw: &'r RawGrammar,
    w: usize,
}

impl Ref<'_> {
    fn ok(&self, allowed: &[u64]) -> Vec<u64> {
        (0..self.w)
            .map(|i| allowed[i] | self.raw.ignored[i])
            .collect()
    }

    fn cat(&self, t: usize) -> bool {
        has(&self.raw.lexicon_categories, t)
    }

    fn live(&self, q: usize, ln: i32, allowed: &[u64]) -> bool {
        let ok = self.ok(allowed);
        let t_all = self.raw.n_terminals;
        let dfa = (0..t_all).any(|t| has(&self.raw.dfa_live[q], t) && has(&ok, t) && !self.cat(t));
        let lex = ln != NO_NODE
            && (0..t_all).any(|t| {
                has(&self.raw.lexicon_prefix_cats[ln as usize], t) && has(&ok, t) && self.cat(t)
            });
        dfa || lex
    }

    fn live_dfa(&self, q: usize, allowed: &[u64]) -> bool {
        let ok = self.ok(allowed);
        (0..self.raw.n_terminals)
            .any(|t| has(&self.raw.dfa_live[q], t) && has(&ok, t) && !self.cat(t))
    }

    fn candidates(&self, q: usize, ln: i32) -> Vec<usize> {
        (0..self.raw.n_terminals)
            .filter(|&t| has(&self.raw.dfa_accept[q], t))
            .filter(|&t| {
                !self.cat(t) || (ln != NO_NODE && has(&self.raw.lexicon_word_cats[ln as usize], t))
            })
            .collect()
    }

    fn pick(&self, q: usize, ln: i32, allowed: &[u64]) -> Option<u32> {
        let ok = self.ok(allowed);
        let cands = self.candidates(q, ln);
        self.raw
            .pick_order
            .iter()
            .copied()
            .find(|&t| cands.contains(&(t as usize)) && has(&ok, t as usize))
            .map(|t| t as u32)
    }

    fn emittable(&self, t: usize) -> bool {
        let cols = self.raw.n_terminals + 1;
        has(&self.raw.ignored, t)
            || (0..self.raw.action.len() / cols).any(|s| self.raw.action[s * cols + t] != 0)
    }

    fn child(&self, ln: i32, b: u8) -> i32 {
        if ln == NO_NODE {
            return NO_NODE;
        }
        self.raw.lexicon_children[ln as usize]
            .iter()
            .find(|(x, _)| *x == b)
            .map_or(NO_NODE, |&(_, c)| c)
    }

    /// (q, ln, la_len, la_q, la_ln) after `data`, or None if it dies.
    fn scan(&self, data: &[u8]) -> Option<(usize, i32, usize, usize, i32)> {
        let (mut q, mut ln, mut la) = (0usize, 0i32, (0usize, 0usize, NO_NODE));
        for (i, &b) in data.iter().enumerate() {
            let next = self.raw.dfa_trans[q * 256 + b as usize];
            if next < 0 {
                return None;
            }
            q = next as usize;
            ln = self.child(ln, b);
            if self.raw.dfa_accept[q].iter().any(|&x| x != 0) {
                la = (i + 1, q, ln);
            }
        }
        Some((q, ln, la.0, la.1, la.2))
    }

    /// `rescan` by its definition: the longest prefix that scans is the
    /// lexeme; ignored picks restart after it.
    fn rescan(&self, data: &[u8], allowed: &[u64]) -> Rescan {
        let mut start = 0;
        loop {
            let rest = &data[start..];
            let dies = (1..=rest.len()).find(|&k| self.scan(&rest[..k]).is_none());
            let Some(k) = dies else {
                let (q, ln, la_len, la_q, la_ln) = self.scan(rest).unwrap();
                return Rescan::Stay {
                    scan: Scan {
                        q: q as u32,
                        ln,
                        la_len: la_len as u32,
                        la_q: if la_len == 0 { 0 } else { la_q as u32 },
                        la_ln,
                    },
                    start,
                };
            };
            let (_, _, la_len, la_q, la_ln) = self.scan(&rest[..k - 1]).unwrap();
            if la_len == 0 {
                return Rescan::Dead;
            }
            let Some(t) = self.pick(la_q, la_ln, allowed) else {
                return Rescan::Dead;
            };
            if !has(&self.raw.ignored, t as usize) {
                return Rescan::Emit {
                    terminal: t,
                    tail: start + la_len,
                };
            }
            start += la_len;
        }
    }
}

fn allowed_sets(raw: &RawGrammar, configs: &[common::Config]) -> Vec<Vec<u64>> {
    let w = raw.ignored.len();
    let mut sets: Vec<Vec<u64>> = configs.iter().map(|c| c.allowed.clone()).collect();
    sets.push(vec![0; w]);
    sets.push(vec![u64::MAX; w]);
    // The ignored terminals themselves allowed; each category alone.
    sets.push(raw.ignored.clone());
    for t in 0..raw.n_terminals {
        if has(&raw.lexicon_categories, t) {
            let mut s = vec![0; w];
            s[t / 64] |= 1 << (t % 64);
            sets.push(s);
        }
    }
    sets.sort();
    sets.dedup();
    sets
}

#[test]
fn liveness_candidates_and_picks_match_their_definitions() {
    let (raw, _, configs) = common::fixture();
    let g = GrammarTables::new(raw.clone()).unwrap();
    let w = g.width();
    let r = Ref { raw: &raw, w };
    let n_q = raw.dfa_accept.len();
    let n_ln = raw.lexicon_children.len() as i32;
    let sets = allowed_sets(&raw, &configs);
    assert!(sets.len() > 10);
    let (mut live, mut dead, mut picked, mut lex_live) = (0, 0, 0, 0);
    for allowed in &sets {
        let mut a = g.allowed_sets(allowed);
        let ok = r.ok(allowed);
        assert_eq!(a.allowed, *allowed);
        assert_eq!(a.ok, ok);
        let cats = &raw.lexicon_categories;
        assert_eq!(
            a.ok_plain,
            (0..w).map(|i| ok[i] & !cats[i]).collect::<Vec<_>>()
        );
        assert_eq!(
            a.ok_lex,
            (0..w).map(|i| ok[i] & cats[i]).collect::<Vec<_>>()
        );
        let ident = (0..raw.n_terminals).any(|t| r.cat(t) && has(&ok, t));
        assert_eq!(g.ident_position(allowed), ident);
        for round in 0..2 {
            for q in 0..n_q {
                assert_eq!(g.live_dfa_in(q as u32, &mut a), r.live_dfa(q, allowed));
                for ln in -1..n_ln {
                    let want = r.live(q, ln, allowed);
                    assert_eq!(g.live(q as u32, ln, &a), want, "q {q} ln {ln}");
                    assert_eq!(g.live_under(q as u32, ln, allowed), want, "q {q} ln {ln}");
                    assert_eq!(
                        g.live_in(q as u32, ln, &mut a),
                        want,
                        "q {q} ln {ln} {round}"
                    );
                    live += usize::from(want);
                    dead += usize::from(!want);
                    lex_live += usize::from(want && !r.live_dfa(q, allowed));
                    let scan = Scan {
                        q: 0,
                        ln: 0,
                        la_len: 1,
                        la_q: q as u32,
                        la_ln: ln,
                    };
                    let want = r.pick(q, ln, allowed);
                    assert_eq!(g.pick(&scan, &ok), want, "pick q {q} ln {ln}");
                    assert_eq!(g.pick_in(&scan, &mut a), want, "pick_in q {q} ln {ln}");
                    picked += usize::from(want.is_some());
                }
            }
        }
    }
    assert!(
        live > 0 && dead > 0 && picked > 0 && lex_live > 0,
        "{live} {dead} {picked} {lex_live}"
    );
    // Candidates, emittable or not.
    for q in 0..n_q {
        for ln in -1..n_ln {
            let scan = Scan {
                q: 0,
                ln: 0,
                la_len: 3,
                la_q: q as u32,
                la_ln: ln,
            };
            let cands = r.candidates(q, ln);
            let set = |ts: &[usize]| {
                let mut s = vec![0u64; w];
                for &t in ts {
                    s[t / 64] |= 1 << (t % 64);
                }
                s
            };
            assert_eq!(g.candidates(&scan), set(&cands), "q {q} ln {ln}");
            let emittable: Vec<usize> = cands.iter().copied().filter(|&t| r.emittable(t)).collect();
            assert_eq!(g.emittable_candidates(&scan), set(&emittable));
            let none = Scan { la_len: 0, ..scan };
            assert_eq!(g.candidates(&none), vec![0; w]);
            assert_eq!(g.emittable_candidates(&none), vec![0; w]);
        }
    }
}

#[test]
fn steps_scans_and_rescans_match_the_raw_tables() {
    let (raw, _, configs) = common::fixture();
    let g = GrammarTables::new(raw.clone()).unwrap();
    let r = Ref {
        raw: &raw,
        w: g.width(),
    };
    let n_q = raw.dfa_accept.len();
    for q in 0..n_q {
        for ln in [NO_NODE, 0, 1, 5] {
            for b in 0..=255u8 {
                let from = Scan {
                    q: q as u32,
                    ln,
                    la_len: 2,
                    la_q: 7,
                    la_ln: 3,
                };
                let got = g.step(from, 9, b);
                let next = raw.dfa_trans[q * 256 + b as usize];
                if next < 0 {
                    assert_eq!(got, None);
                    continue;
                }
                let q2 = next as u32;
                let ln2 = r.child(ln, b);
                let accepting = raw.dfa_accept[next as usize].iter().any(|&x| x != 0);
                let want = if accepting {
                    Scan {
                        q: q2,
                        ln: ln2,
                        la_len: 9,
                        la_q: q2,
                        la_ln: ln2,
                    }
                } else {
                    Scan {
                        q: q2,
                        ln: ln2,
                        ..from
                    }
                };
                assert_eq!(got, Some(want), "q {q} ln {ln} byte {b}");
            }
        }
    }
    let mut inputs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"select".to_vec(),
        b"select sal".to_vec(),
        b"sal, yer from".to_vec(),
        b"'it''s' ".to_vec(),
        b"1.5 -- c\n x".to_vec(),
        b"  \t\nfrom".to_vec(),
        b"employees_public;".to_vec(),
        b"<>=".to_vec(),
        b"\xff".to_vec(),
        b"sel ect".to_vec(),
        b"a.b".to_vec(),
    ];
    for c in &configs {
        inputs.push(c.remainder.clone());
        inputs.push([&c.remainder[..], b" x"].concat());
    }
    let sets = allowed_sets(&raw, &configs);
    let (mut emits, mut stays, mut deads) = (0, 0, 0);
    for data in &inputs {
        let want = r.scan(data).map(|(q, ln, la_len, la_q, la_ln)| Scan {
            q: q as u32,
            ln,
            la_len: la_len as u32,
            la_q: if la_len == 0 { 0 } else { la_q as u32 },
            la_ln,
        });
        assert_eq!(g.scan(data), want, "{data:?}");
        for allowed in &sets {
            let mut a = g.allowed_sets(allowed);
            let got = g.rescan(data, &mut a);
            assert_eq!(got, r.rescan(data, allowed), "{data:?} under {allowed:?}");
            match got {
                Rescan::Emit { .. } => emits += 1,
                Rescan::Stay { .. } => stays += 1,
                Rescan::Dead => deads += 1,
            }
        }
    }
    assert!(
        emits > 10 && stays > 10 && deads > 10,
        "{emits} {stays} {deads}"
    );
    assert_eq!(g.scan(b""), Some(START));
    let _ = Arc::new(g);
}

#[test]
fn a_transition_back_to_the_start_state_is_a_step() {
    // The toy DFA with 'c' looping on the start state (a terminal `c*a`):
    // the byte leads to state 0, a live transition, not a death.
    let mut raw = common::toy_grammar();
    raw.dfa_trans[b'c' as usize] = 0;
    let g = GrammarTables::new(raw).expect("a loop on the start state is valid");
    assert_eq!(
        g.step(START, 1, b'c'),
        Some(Scan {
            ln: NO_NODE,
            ..START
        })
    );
    assert_eq!(g.scan(b"cca").map(|s| (s.q, s.la_len)), Some((1, 3)));
    assert_eq!(g.scan(b"cd"), None);
}

/// `ident_position`: a category allowed or ignored. On the toy grammar
/// (A 1, B 2, WS 4 ignored) with A as the category, then with WS (ignored:
/// every allowed set is an identifier position, WS allowed too).
#[test]
fn identifier_positions_by_hand() {
    let mut raw = common::toy_grammar();
    raw.lexicon_categories = vec![1];
    let g = GrammarTables::new(raw).unwrap();
    assert!(g.ident_position(&[1]) && g.ident_position(&[3]));
    assert!(!g.ident_position(&[2]) && !g.ident_position(&[4]) && !g.ident_position(&[0]));
    let mut raw = common::toy_grammar();
    raw.lexicon_categories = vec![4];
    let g = GrammarTables::new(raw).unwrap();
    for allowed in [0u64, 1, 2, 4, 5, 7] {
        assert!(g.ident_position(&[allowed]), "{allowed}");
    }
}
