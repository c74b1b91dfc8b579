//! The audit chain (`src/audit.rs`) against values Python's hashlib computes
//! from the format's definition (DESIGN.md section 9; checked equal to
//! `grid_core.audit.Record.digest` and `grid_core.lexer.extend_digest`), for
//! the mutation campaign (issue 14). The Python that made them:
//!
//! ```python
//! M = (1 << 61) - 1
//! def ext(d, data):                      # extend_digest
//!     for b in data: d = (d * 256 + b) % M
//!     return d
//! def ch(stack, n, d):                   # Config.hash
//!     data = stack.to_bytes(8, "little") + n.to_bytes(8, "little") + d.to_bytes(8, "little")
//!     return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")
//! KINDS = ["sampled", "forced", "reserve", "eos"]
//! def rec(step, stack, n, d, eid, tok, blk, kind, prev):  # grid.audit/2
//!     enc = (bytes.fromhex(prev) + b"grid.audit/2" + step.to_bytes(8, "big")
//!            + ch(stack, n, d).to_bytes(8, "big") + eid + tok.to_bytes(4, "big")
//!            + blk.to_bytes(4, "big") + bytes([KINDS.index(kind)]))
//!     return hashlib.blake2b(enc, digest_size=32).hexdigest()
//! ```

use grid_kernels::audit::{
    config_hash, extend_digest, genesis, hex, mask_entry_id, Chain, Kind, Record, DIGEST_MODULUS,
    SCHEMA,
};

const GENESIS: &str = "8068ccc0b7b754a5eef0e043498f86ed18dbce91ed895728c163e4390c35750e";
const H0: &str = "76b87067d8e52585c5594f5f2f216fbd9fb4daa5654517abec120c3933ebcb06";
const H1: &str = "a4d6f588654dfc1ce9d07dae06fbc688f78ee30238d11fae0b4b1dd09d9d067f";
const H2: &str = "2ef72f354b513956126c38cd3a03c5a057557edb80d824f478ebcd5758f0bfef";
const H3: &str = "bd6553fb603db1490ac76d78651d7f99a5f682304a9550a57d5f547bfcc685cf";

/// The four records hashed above: steps 0-3, one of each kind.
fn records() -> [Record; 4] {
    let r0 = Record {
        stack: 1,
        rem_len: 2,
        rem_digest: 3,
        entry_id: std::array::from_fn(|i| i as u8),
        token: 5,
        blocked: 9,
        kind: Kind::Sampled,
        config: None,
    };
    let r1 = Record {
        stack: u64::MAX,
        rem_len: 300,
        rem_digest: DIGEST_MODULUS - 1,
        entry_id: [0xab; 16],
        token: u32::MAX,
        blocked: 0,
        kind: Kind::Forced,
        config: None,
    };
    let r2 = Record {
        stack: 7,
        rem_len: 0,
        rem_digest: 0,
        entry_id: [0; 16],
        token: 12,
        blocked: 3,
        kind: Kind::Reserve,
        config: None,
    };
    let r3 = Record {
        kind: Kind::Eos,
        ..r2
    };
    [r0, r1, r2, r3]
}

#[test]
fn genesis_and_schema_are_the_documented_constants() {
    assert_eq!(hex(&genesis()), GENESIS);
    assert_eq!(SCHEMA, "grid.audit/2");
    assert_eq!(DIGEST_MODULUS, 2_305_843_009_213_693_951);
}

#[test]
fn digests_are_base_256_modulo_the_mersenne_prime() {
    assert_eq!(extend_digest(0, b""), 0);
    assert_eq!(extend_digest(7, b""), 7);
    assert_eq!(extend_digest(0, b"abc"), 6_382_179);
    assert_eq!(extend_digest(12345, b"xyz"), 207_122_626_938);
    // 20 bytes of 0xff: 256^20 - 1 mod 2^61 - 1.
    assert_eq!(extend_digest(0, &[0xff; 20]), 274_877_906_943);
    assert_eq!(
        extend_digest(DIGEST_MODULUS - 1, b"\x00"),
        DIGEST_MODULUS - 256
    );
}

#[test]
fn config_hashes_and_entry_ids_match_python() {
    assert_eq!(config_hash(1, 2, 3), 0x0b94_3cd0_42ad_ccab);
    assert_eq!(config_hash(0xdead_beef, 7, 99), 0xcefa_3b0c_2a4a_b72d);
    assert_eq!(records()[0].config_hash(), 0x0b94_3cd0_42ad_ccab);
    assert_eq!(
        hex(&mask_entry_id(&[1, 0x8000_0000, 5])),
        "8263b87aca4ce4dfcc58d40e84b11e3f"
    );
}

#[test]
fn record_hashes_match_python() {
    let [r0, r1, r2, r3] = records();
    let h0 = r0.hash(0, &genesis());
    assert_eq!(hex(&h0), H0);
    let h1 = r1.hash(1, &h0);
    assert_eq!(hex(&h1), H1);
    let h2 = r2.hash(2, &h1);
    assert_eq!(hex(&h2), H2);
    assert_eq!(hex(&r3.hash(3, &h2)), H3);
}

#[test]
fn kinds_have_their_names() {
    let kinds = [Kind::Sampled, Kind::Forced, Kind::Reserve, Kind::Eos];
    let names = ["sampled", "forced", "reserve", "eos"];
    for (k, n) in kinds.into_iter().zip(names) {
        assert_eq!(k.name(), n);
        assert_eq!(Kind::parse(n), Some(k));
    }
    assert_eq!(Kind::parse(""), None);
    assert_eq!(Kind::parse("Sampled"), None);
}

#[test]
fn chains_hash_in_order_and_rehash_after_a_truncation() {
    let rs = records();
    let mut c = Chain::default();
    assert!(c.is_empty() && c.hashes().is_empty());
    assert_eq!(c.len(), 0);
    c.push(rs[0]);
    assert!(!c.is_empty() && c.len() == 1);
    assert_eq!(hex(&c.hashes()[0]), H0);
    for r in &rs[1..] {
        c.push(*r);
    }
    assert_eq!(c.len(), 4);
    assert_eq!(c.records(), &rs[..]);
    let all: Vec<String> = c.hashes().iter().map(|h| hex(h)).collect();
    assert_eq!(all, [H0, H1, H2, H3]);
    // Read again: the same hashes, none added.
    assert_eq!(c.hashes().len(), 4);
    // Keep two, then push the third record's eos twin as step 2 and the
    // reserve record as step 3: the hashes past the cut are made anew.
    c.truncate(2);
    assert_eq!((c.len(), c.records()), (2, &rs[..2]));
    c.push(rs[3]);
    c.push(rs[2]);
    let again: Vec<String> = c.hashes().iter().map(|h| hex(h)).collect();
    assert_eq!(&again[..2], [H0, H1]);
    let h1: [u8; 32] = c.hashes()[1];
    let h2 = rs[3].hash(2, &h1);
    assert_eq!(again[2], hex(&h2));
    assert_eq!(again[3], hex(&rs[2].hash(3, &h2)));
    assert_ne!(again[2], H2);
    // Truncated to nothing: the chain starts again from genesis.
    c.truncate(0);
    assert!(c.is_empty());
    c.push(rs[0]);
    assert_eq!(hex(&c.hashes()[0]), H0);
    // Records whose step knew its configuration hash (a memoized row's) chain
    // to the same hashes.
    let mut known = Chain::default();
    for r in rs {
        known.push(Record {
            config: Some(r.config_hash()),
            ..r
        });
    }
    let all_known: Vec<String> = known.hashes().iter().map(|h| hex(h)).collect();
    assert_eq!(all_known, [H0, H1, H2, H3]);
}

/// `Chain::lines` writes what grid-core's `AuditLog.lines()` writes:
/// `json.dumps({**record, "hash": h}, sort_keys=True)`. The first line below
/// is Python's own output for record 0 (its hash pinned above), character for
/// character; the second checks the fields of a later record in their places.
#[test]
fn lines_are_python_json_lines() {
    let rs = records();
    let mut c = Chain::default();
    let text = |c: &mut Chain| String::from_utf8(c.lines()).expect("lines are ASCII");
    assert_eq!(text(&mut c), "");
    c.push(rs[0]);
    let first = "{\"blocked_count\": 9, \"config_hash\": \"0b943cd042adccab\", \"hash\": \
        \"76b87067d8e52585c5594f5f2f216fbd9fb4daa5654517abec120c3933ebcb06\", \"kind\": \
        \"sampled\", \"mask_entry_id\": \"000102030405060708090a0b0c0d0e0f\", \"prev_hash\": \
        \"8068ccc0b7b754a5eef0e043498f86ed18dbce91ed895728c163e4390c35750e\", \"step\": 0, \
        \"token\": 5}";
    assert_eq!(text(&mut c), first);
    c.push(rs[1]);
    let lines = text(&mut c);
    let (line0, line1) = lines.split_once('\n').expect("two lines");
    assert_eq!(line0, first);
    let second = format!(
        "{{\"blocked_count\": 0, \"config_hash\": \"{:016x}\", \"hash\": \"{H1}\", \"kind\": \
         \"forced\", \"mask_entry_id\": \"abababababababababababababababab\", \"prev_hash\": \
         \"{H0}\", \"step\": 1, \"token\": 4294967295}}",
        rs[1].config_hash()
    );
    assert_eq!(line1, second);
}
