//! A serving session (`src/session.rs`) by hand on `tests/toy.rs`'s tables,
//! for the mutation campaign (issue 14): the mask key and the EOS gate of
//! each configuration, what each fill reports (cold, walked, from the
//! verdict classes, from the row memo), the audit fields of a step, refused
//! tokens (outside the vocabulary, special, after EOS), `validate_tokens`,
//! rollback and batch fills with one failing session.
//!
//! Toy ids: "a" 0, "b" 1, " " 2, "ab" 3, "a b" 4, "  " 5, "ba" 6, EOS 7;
//! terminals A 0, B 1, WS 2 (ignored); grammar `start: A B`.

mod common;

use std::sync::Arc;

use grid_kernels::audit::{config_hash, extend_digest, mask_entry_id, Kind};
use grid_kernels::session::fill_batch;
use grid_kernels::{
    Engine, EngineTables, Filled, GrammarTables, KernelError, RawTrie, Session, Threads, Trie,
};

fn serving() -> Arc<Engine> {
    Arc::new(Engine::new(common::toy(), Threads::Global, "toy", None))
}

fn fill(s: &mut Session) -> u32 {
    let mut row = vec![0u32; 1];
    s.fill(&mut row, true).unwrap();
    row[0]
}

fn reason(r: Result<(), KernelError>) -> (usize, Option<i64>, String) {
    match r {
        Err(KernelError::Guide {
            step,
            token,
            reason,
        }) => (step, token, reason),
        other => panic!("expected a guide error, got {other:?}"),
    }
}

#[test]
fn mask_keys_gates_and_masks_step_by_step() {
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 0, false).unwrap();
    assert_eq!((s.steps(), s.n_words(), s.output()), (0, 1, &b""[..]));
    assert!(!s.audited() && s.events().is_none() && s.chain().is_none());
    // Start: no accepted prefix, so p is empty and v too; the empty stack [0]
    // does not accept.
    assert_eq!(s.mask_key(), (vec![0], 0, 0, vec![0], &b""[..]));
    assert!(!s.eos_allowed().unwrap());
    assert_eq!(fill(&mut s), 0b0011_1101); // a, " ", ab, a b, "  "
                                           // "a": A pending (DFA state 1, no lexicon node), p = {A}, v = "".
    s.accept_token(0, Kind::Sampled).unwrap();
    assert_eq!(s.config(), (vec![0], b"a".to_vec()));
    assert_eq!(s.mask_key(), (vec![0], 1, -1, vec![1], &b""[..]));
    assert!(!s.eos_allowed().unwrap(), "A alone is no sentence");
    // After "a": " " and "  " end A (then WS), "b" ends A (then B); "ba"
    // would leave "a" after B, which $END alone may follow; "a..." is dead.
    assert_eq!(fill(&mut s), 0b0010_0110);
    // "b": A shifted, "b" pending: B = state 2, p = {B}.
    s.accept_token(1, Kind::Sampled).unwrap();
    assert_eq!(s.config(), (vec![0, 1], b"b".to_vec()));
    assert_eq!(s.mask_key(), (vec![0, 1], 2, -1, vec![2], &b""[..]));
    assert!(s.eos_allowed().unwrap());
    assert_eq!(fill(&mut s), 0b1010_0100); // " ", "  ", EOS
                                           // "  ": B shifted, whitespace pending: WS = state 3, p = {WS}.
    s.accept_token(5, Kind::Sampled).unwrap();
    assert_eq!(s.config(), (vec![0, 1, 2], b"  ".to_vec()));
    assert_eq!(s.mask_key(), (vec![0, 1, 2], 3, -1, vec![4], &b""[..]));
    assert!(s.eos_allowed().unwrap());
    assert_eq!(s.output(), b"ab  ");
    assert_eq!(s.steps(), 3);
    s.accept_token(7, Kind::Sampled).unwrap();
    assert!(s.is_terminated() && !s.eos_allowed().unwrap());
    assert_eq!((s.steps(), s.output()), (4, &b"ab  "[..]));
    s.check_invariants();
}

#[test]
fn each_fill_says_where_its_mask_came_from() {
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 5, false).unwrap();
    let mut row = vec![0u32; 1];
    assert_eq!(s.fill(&mut row, false).unwrap(), Filled::Cold);
    assert_eq!(s.fill(&mut row, true).unwrap(), Filled::Walked);
    assert_eq!(row, vec![0b0011_1101]);
    row[0] = 0;
    assert_eq!(s.fill(&mut row, false).unwrap(), Filled::Row);
    assert_eq!(row, vec![0b0011_1101]);
    // No row memo: the root walk is cached, its one CD class is answered
    // from the verdict memo.
    engine.set_caps(1 << 20, 1 << 20, 0);
    let mut fresh = Session::new(Arc::clone(&engine), 5, false).unwrap();
    let mut again = vec![0u32; 1];
    assert_eq!(fresh.fill(&mut again, false).unwrap(), Filled::Classes);
    assert_eq!(again, vec![0b0011_1101]);
    // A configuration whose walk has no CD entry fills from the CI part alone.
    fresh.accept_token(3, Kind::Sampled).unwrap(); // "ab": "b" pending
    assert_eq!(fresh.fill(&mut again, true).unwrap(), Filled::Walked);
    assert_eq!(again, vec![0b1010_0100]);
}

#[test]
fn audit_fields_of_a_step() {
    let engine = serving();
    let mut s = Session::new(Arc::clone(&engine), 9, true).unwrap();
    assert!(s.audited());
    assert!(s.step_audit().is_none(), "nothing filled yet");
    // A fill that may not walk reports the miss.
    assert!(!s.prepare_record(false).unwrap());
    assert!(s.step_audit().is_none());
    assert!(s.prepare_record(true).unwrap());
    let (h, id, blocked) = s.step_audit().unwrap();
    assert_eq!(id, mask_entry_id(&[0b0011_1101]));
    assert_eq!(blocked, 3, "8 ids, 5 admitted");
    assert_eq!(h, config_hash(0, 0, 0));
    assert_eq!(h, s.config_hash());
    assert!(s.prepare_record(false).unwrap(), "known: nothing to do");
    s.accept_token(3, Kind::Forced).unwrap(); // "ab"
    assert!(s.step_audit().is_none(), "a new step");
    // The configuration hash of ([0, 1], "b").
    let stack = {
        let mut arena = engine.tables.arena();
        let node = arena.from_states(&[0, 1]).unwrap();
        arena.hash(node)
    };
    assert_eq!(
        s.config_hash(),
        config_hash(stack, 1, extend_digest(0, b"b"))
    );
    assert_ne!(stack, 0);
    // With EOS admitted: " ", "  ", EOS = 3 of 8.
    let mut row = vec![0u32; 1];
    s.fill(&mut row, true).unwrap();
    assert_eq!(s.step_audit().unwrap().1, mask_entry_id(&[0b1010_0100]));
    assert_eq!(s.step_audit().unwrap().2, 5);
    s.accept_token(2, Kind::Sampled).unwrap(); // " ": B shifted, " " pending
    assert_eq!(s.config(), (vec![0, 1, 2], b" ".to_vec()));
    s.accept_token(5, Kind::Sampled).unwrap(); // "  " more whitespace
    assert_eq!(s.config(), (vec![0, 1, 2], b"   ".to_vec()));
    // The remainder grew in place: its digest was extended, not restarted.
    let stack2 = {
        let mut arena = engine.tables.arena();
        let node = arena.from_states(&[0, 1, 2]).unwrap();
        arena.hash(node)
    };
    assert_eq!(
        s.config_hash(),
        config_hash(stack2, 3, extend_digest(0, b"   "))
    );
    // The step before EOS filled (its mask known), then EOS: the terminated
    // step has no mask of its own.
    assert!(s.prepare_record(true).unwrap());
    assert!(s.step_audit().is_some());
    s.accept_token(7, Kind::Sampled).unwrap();
    assert!(s.step_audit().is_none());
    // Terminated: nothing left to prepare.
    assert!(s.prepare_record(false).unwrap());
    let records = s.chain().unwrap().records().to_vec();
    let kinds: Vec<Kind> = records.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [Kind::Forced, Kind::Sampled, Kind::Sampled, Kind::Eos]
    );
    let tokens: Vec<u32> = records.iter().map(|r| r.token).collect();
    assert_eq!(tokens, [3, 2, 5, 7]);
    assert_eq!(records[0].blocked, 3);
    assert_eq!(records[1].blocked, 5);
    assert_eq!((records[1].rem_len, records[1].stack), (1, stack));
    assert_eq!(records[1].rem_digest, extend_digest(0, b"b"));
    assert_eq!((records[3].rem_len, records[3].stack), (3, stack2));
    s.check_invariants();
    // Rollback drops the records of the undone steps; a fork copies them.
    let f = s.fork();
    s.rollback(3).unwrap();
    assert_eq!(s.chain().unwrap().len(), 1);
    assert_eq!(f.output(), b"ab   ");
    assert_eq!(s.output(), b"ab");
    s.rollback(0).unwrap();
    assert_eq!(s.steps(), 1);
    assert_eq!(
        reason(s.rollback(2)),
        (1, None, "cannot roll back 2 of 1 tokens".into())
    );
    s.rollback(1).unwrap();
    assert_eq!((s.steps(), s.chain().unwrap().len()), (0, 0));
    s.check_invariants();
}

#[test]
fn refused_tokens_and_validation() {
    // The toy trie over 9 ids: id 8 is special (no spelling), EOS stays 7.
    let g = common::toy().grammar;
    let mut raw = RawTrie {
        edge: vec![0, b' ', b' ', b'a', b' ', b'b', b'b', b'b', b'a'],
        token: vec![-1, 2, 5, 0, -1, 4, 3, 1, 6],
        size: vec![9, 2, 1, 4, 2, 1, 1, 2, 1],
        alias_offset: vec![0, 0, 1, 2, 3, 3, 4, 5, 6, 7],
        alias_ids: vec![2, 5, 0, 4, 3, 1, 6],
        n_vocab: 9,
        eos_ids: vec![7],
    };
    let t = Trie::new(raw.clone()).unwrap();
    let tables = EngineTables::new(Arc::clone(&g), Arc::new(t));
    let engine = Arc::new(Engine::new(tables, Threads::Global, "toy", None));
    let mut s = Session::new(Arc::clone(&engine), 0, true).unwrap();
    assert_eq!(
        reason(s.accept_token(8, Kind::Sampled)),
        (0, Some(8), "special tokens are never admitted".into())
    );
    assert_eq!(
        reason(s.accept_token(9, Kind::Sampled)).2,
        "outside the vocabulary"
    );
    assert_eq!(
        reason(s.accept_token(-1, Kind::Sampled)).2,
        "outside the vocabulary"
    );
    assert_eq!(s.chain().unwrap().len(), 0);
    // validate_tokens: "ab", EOS, then nothing after EOS: 2; unchanged after.
    assert_eq!(s.validate_tokens(&[3, 7, 0]).unwrap(), 2);
    assert_eq!(s.validate_tokens(&[1, 0]).unwrap(), 0);
    assert_eq!(s.validate_tokens(&[0, 2, 1, 2]).unwrap(), 4);
    assert_eq!((s.steps(), s.output()), (0, &b""[..]));
    assert!(s.audited() && s.chain().unwrap().is_empty());
    s.accept_token(0, Kind::Sampled).unwrap();
    assert_eq!(s.validate_tokens(&[6]).unwrap(), 0, "\"aba\" is refused");
    assert_eq!(
        s.validate_tokens(&[1, 7, 2]).unwrap(),
        2,
        "nothing after EOS"
    );
    assert_eq!((s.steps(), s.chain().unwrap().len()), (1, 1));
    s.check_invariants();
    // An EOS id outside the trie's spellings is still EOS when the vocabulary says so.
    raw.eos_ids = vec![7, 8];
    let t = Trie::new(raw).unwrap();
    let engine = Arc::new(Engine::new(
        EngineTables::new(g, Arc::new(t)),
        Threads::Global,
        "toy",
        None,
    ));
    let mut s = Session::new(engine, 0, false).unwrap();
    s.accept_token(3, Kind::Sampled).unwrap();
    let mut row = vec![0u32; 1];
    s.fill(&mut row, true).unwrap();
    assert_eq!(row, vec![0b1_1010_0100]);
    s.accept_token(8, Kind::Sampled).unwrap();
    assert!(s.is_terminated());
}

#[test]
fn batch_fills_leave_a_failed_row_alone() {
    let engine = serving();
    for threads in [1, 3] {
        let mut a = Session::new(Arc::clone(&engine), 0, false).unwrap();
        let mut b = Session::new(Arc::clone(&engine), 0, false).unwrap();
        b.accept_token(3, Kind::Sampled).unwrap();
        let mut c = Session::new(Arc::clone(&engine), 0, false).unwrap();
        c.accept_token(3, Kind::Sampled).unwrap();
        c.accept_token(7, Kind::Sampled).unwrap();
        let (mut ra, mut rb, mut rc) = (vec![0u32; 1], vec![0u32; 1], vec![9u32; 1]);
        let mut work: Vec<(&mut Session, &mut [u32])> =
            vec![(&mut a, &mut ra), (&mut b, &mut rb), (&mut c, &mut rc)];
        let results = fill_batch(&mut work, threads);
        assert_eq!(results.len(), 3);
        assert!(results[0].is_ok() && results[1].is_ok());
        assert!(matches!(
            results[2],
            Err(KernelError::Guide { step: 2, .. })
        ));
        assert_eq!(
            (ra, rb, rc),
            (vec![0b0011_1101], vec![0b1010_0100], vec![9])
        );
        // One session alone, many threads: the same.
        let mut one = vec![0u32; 1];
        let mut work: Vec<(&mut Session, &mut [u32])> = vec![(&mut a, &mut one)];
        assert!(fill_batch(&mut work, 4)[0].is_ok());
        assert_eq!(one, vec![0b0011_1101]);
    }
}

#[test]
fn batch_fills_walk_only_the_cold_rows_and_report_each_in_its_place() {
    // Two sessions at a configuration already filled (warm) around one that is
    // not (cold): the warm rows are served from the memo, the cold one walked,
    // each result at its session's index, on one thread and on a pool.
    for threads in [1, 3] {
        let engine = serving();
        let mut warm = Session::new(Arc::clone(&engine), 0, false).unwrap();
        fill(&mut warm);
        let mut a = warm.fork();
        let mut b = Session::new(Arc::clone(&engine), 0, false).unwrap();
        b.accept_token(3, Kind::Sampled).unwrap();
        let mut c = warm.fork();
        let (mut ra, mut rb, mut rc) = (vec![0u32; 1], vec![0u32; 1], vec![0u32; 1]);
        let mut work: Vec<(&mut Session, &mut [u32])> =
            vec![(&mut a, &mut ra), (&mut b, &mut rb), (&mut c, &mut rc)];
        let filled: Vec<Filled> = fill_batch(&mut work, threads)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(filled, vec![Filled::Row, Filled::Walked, Filled::Row]);
        assert_eq!(
            (ra, rb, rc),
            (vec![0b0011_1101], vec![0b1010_0100], vec![0b0011_1101])
        );
    }
}

#[test]
fn a_tables_check_for_the_toy() {
    // The toy grammar's emittable terminals are A, B and WS: a remainder's
    // p is its accepted terminal (see the mask keys above).
    let g: Arc<GrammarTables> = common::toy().grammar;
    assert_eq!(g.emittable_candidates(&g.scan(b" ").unwrap()), vec![4]);
    assert_eq!(g.emittable_candidates(&g.scan(b"").unwrap()), vec![0]);
}

#[test]
fn events_are_turned_on_before_the_first_token() {
    use grid_kernels::events::{Event, EventTables, NOT_MARKED};
    let engine = serving();
    let g = Arc::clone(&engine.tables.grammar);
    // Codes: rule 1 (S -> A B) is event 0, A is 1, B is 2; WS is no event.
    let tables =
        Arc::new(EventTables::new(&g, vec![NOT_MARKED, 0], vec![1, 2, NOT_MARKED]).unwrap());
    let s = Session::new(Arc::clone(&engine), 0, false).unwrap();
    let mut s = s.with_events(Arc::clone(&tables)).unwrap();
    assert_eq!(s.events(), Some(&[][..]));
    s.accept_token(0, Kind::Sampled).unwrap(); // "a": a whole lexeme, forced at step 1
    let ev = |code, start, end, step| Event {
        code,
        start,
        end,
        step,
    };
    assert_eq!(s.events().unwrap(), [ev(1, 0, 1, 1)]);
    s.accept_token(1, Kind::Sampled).unwrap(); // "b": B forced, then S -> A B
    assert_eq!(
        s.events().unwrap(),
        [ev(1, 0, 1, 1), ev(2, 1, 2, 2), ev(0, 0, 2, 2)]
    );
    s.accept_token(7, Kind::Sampled).unwrap();
    assert_eq!(s.events().unwrap().len(), 3);
    // After the first token, too late.
    let mut late = Session::new(Arc::clone(&engine), 0, false).unwrap();
    late.accept_token(0, Kind::Sampled).unwrap();
    match late.with_events(tables) {
        Err(KernelError::Guide {
            step: 1,
            token: None,
            reason,
        }) => {
            assert_eq!(reason, "events are turned on before the first token")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(Session::new(engine, 0, false).unwrap().events().is_none());
}

#[test]
fn rows_of_a_two_word_vocabulary() {
    // The toy trie over 40 ids (8..39 special, no spelling): rows of 2 words.
    let g = common::toy().grammar;
    let mut raw = common::toy_trie();
    raw.n_vocab = 40;
    raw.eos_ids = vec![7, 39];
    let t = Trie::new(raw).unwrap();
    let engine = Arc::new(Engine::new(
        EngineTables::new(g, Arc::new(t)),
        Threads::Global,
        "toy",
        None,
    ));
    let mut s = Session::new(engine, 0, true).unwrap();
    assert_eq!(s.n_words(), 2);
    let mut row = vec![u32::MAX; 2];
    s.fill(&mut row, true).unwrap();
    assert_eq!(row, vec![0b0011_1101, 0]);
    assert_eq!(s.step_audit().unwrap().2, 35, "40 ids, 5 admitted");
    s.accept_token(3, Kind::Sampled).unwrap();
    s.fill(&mut row, true).unwrap();
    assert_eq!(row, vec![0b1010_0100, 1 << 7], "EOS ids 7 and 39");
    let mut short = vec![0u32; 1];
    assert!(matches!(
        s.fill(&mut short, true),
        Err(KernelError::BufferSize {
            expected: 2,
            got: 1,
            ..
        })
    ));
}

/// The toy grammar over `words` (ids in order) and EOS, the next id.
fn toy_over(words: &[&[u8]]) -> Arc<Engine> {
    let mut all = words.to_vec();
    all.push(b"<eos>");
    let mut special = vec![false; all.len()];
    special[words.len()] = true;
    let mut raw = RawTrie::pack(&all, &special);
    raw.eos_ids = vec![words.len() as i32];
    let t = Trie::new(raw).unwrap();
    Arc::new(Engine::new(
        EngineTables::new(common::toy().grammar, Arc::new(t)),
        Threads::Global,
        "toy",
        None,
    ))
}

#[test]
fn a_mask_of_eos_alone_is_a_mask() {
    // The toy grammar over "a", "b" and EOS (no whitespace token): after "ab"
    // nothing but EOS may follow, and that one-bit row is a fill, not an
    // empty mask. With audit off a fill computes no audit fields.
    let engine = toy_over(&[b"a", b"b"]);
    let mut s = Session::new(engine, 0, false).unwrap();
    assert_eq!(fill(&mut s), 0b001);
    s.accept_token(0, Kind::Sampled).unwrap();
    assert_eq!(fill(&mut s), 0b010);
    s.accept_token(1, Kind::Sampled).unwrap();
    assert_eq!(fill(&mut s), 0b100, "EOS alone");
    assert!(
        s.step_audit().is_none(),
        "audit off: no mask entry id computed"
    );
    s.accept_token(2, Kind::Sampled).unwrap();
    assert!(s.is_terminated());
}

#[test]
fn long_tokens_are_measured_by_their_sum() {
    // A token of 2^16 spaces (WS = " +"): taken twice after "a", the output
    // is 1 + 2^17 bytes, far below the 4 GiB bound on the output's length
    // (output + token), though output x token would pass it.
    let spaces = vec![b' '; 1 << 16];
    let engine = toy_over(&[b"a", b"b", &spaces]);
    let mut s = Session::new(engine, 0, true).unwrap();
    for token in [0, 2, 2, 2, 1, 3] {
        fill(&mut s);
        s.accept_token(token, Kind::Sampled).unwrap();
    }
    assert!(s.is_terminated());
    assert_eq!(s.output().len(), 2 + 3 * (1 << 16));
    s.check_invariants();
}

#[test]
fn masks_are_the_tokens_accept_takes() {
    // The fixture's SQL grammar over its vocabulary plus tokens of three or
    // more lexemes (a CD entry whose tail emits again: verdict classes one
    // shift deeper). Along three statements, every fill (audit on) admits
    // exactly the tokens a fork accepts, and EOS iff the gate holds.
    let (raw, trie, _) = common::fixture();
    let mut words = common::spellings(&trie);
    let eos = words.pop().expect("EOS is the last id");
    for w in [
        "sal=1",
        "sal <> 1",
        "1,2",
        "=1 and",
        "1 or sal",
        " where sal=1",
        "yer >= 1.5;",
        "1.5;",
        "s, y",
        "' and",
        "'' and yer",
        "* from",
        "r from o",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    words.push(eos);
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let mut special = vec![false; refs.len()];
    *special.last_mut().unwrap() = true;
    let mut t = RawTrie::pack(&refs, &special);
    t.eos_ids = vec![(refs.len() - 1) as i32];
    let tables = EngineTables::new(
        Arc::new(GrammarTables::new(raw).unwrap()),
        Arc::new(Trie::new(t).unwrap()),
    );
    let engine = Arc::new(Engine::new(tables, Threads::Global, "sql", None));
    let n = refs.len();
    let mut deeper_tokens = 0;
    for script in [
        &b"select * from employees;"[..],
        b"select sal, yer from orders where sal <> 'it''s' and yer >= 1.5;",
        b"select sal, yer from orders where sal=1 and yer <> 1;",
    ] {
        let mut s = Session::new(Arc::clone(&engine), 0, true).unwrap();
        let mut at = 0;
        loop {
            let mut row = vec![0u32; s.n_words()];
            s.fill(&mut row, true).unwrap();
            for id in 0..n - 1 {
                let admitted = row[id / 32] >> (id % 32) & 1 == 1;
                let takes = s.fork().accept_token(id as i64, Kind::Sampled).is_ok();
                assert_eq!(admitted, takes, "{:?} after {:?}", refs[id], s.output());
            }
            let eos_bit = row[(n - 1) / 32] >> ((n - 1) % 32) & 1 == 1;
            assert_eq!(eos_bit, s.eos_allowed().unwrap());
            if at == script.len() {
                break;
            }
            // The longest admitted token that spells on along the script.
            let id = (0..n - 1)
                .filter(|&i| row[i / 32] >> (i % 32) & 1 == 1 && script[at..].starts_with(refs[i]))
                .max_by_key(|&i| refs[i].len())
                .unwrap_or_else(|| panic!("{:?} stays in the language", s.output()));
            deeper_tokens += usize::from(id >= n - 14);
            s.accept_token(id as i64, Kind::Sampled).unwrap();
            at += refs[id].len();
        }
        s.check_invariants();
    }
    assert!(deeper_tokens >= 3, "{deeper_tokens}");
}
