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
//! def canon(v):                          # grid_core.fingerprint.canonical
//!     if isinstance(v, int): s = str(v).encode(); return b"i" + len(s).to_bytes(4, "big") + s
//!     if isinstance(v, str): s = v.encode(); return b"s" + len(s).to_bytes(8, "big") + s
//!     return b"l" + len(v).to_bytes(8, "big") + b"".join(canon(x) for x in v)
//! def ch(stack, n, d):                   # Config.hash
//!     data = stack.to_bytes(8, "little") + n.to_bytes(8, "little") + d.to_bytes(8, "little")
//!     return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest()[:8], "little")
//! def rec(step, stack, n, d, eid, tok, blk, kind, prev):
//!     f = ["grid.audit/1", step, f"{ch(stack, n, d):016x}", eid.hex(), tok, blk, kind, prev]
//!     return hashlib.blake2b(bytes.fromhex(prev) + canon(f), digest_size=32).hexdigest()
//! ```

use grid_kernels::audit::{
    config_hash, extend_digest, genesis, hex, mask_entry_id, Chain, Kind, Record, DIGEST_MODULUS,
    SCHEMA,
};

const GENESIS: &str = "b9c449758048132f1bcf4f2df0aaf93307ce6ad04da1ae29140ed7087cf51d9c";
const H0: &str = "cd9f6f03ec0c7eca23b5aff6ace8fec9314894e5fcf085299a658ba1ed4ccca7";
const H1: &str = "687e30e8cd251e28bef6be7a1150425b752607046dca4105efa08cd7dff1f120";
const H2: &str = "3f8103a901219ccf8495f05454dd4392d076d9a6f80dd89c06fc1cdb36f48f4c";
const H3: &str = "95eeb3685a43149ce764905d9ed7b575495cc388fe55fdea3a660a65d4750d96";

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
    assert_eq!(SCHEMA, "grid.audit/1");
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
        \"cd9f6f03ec0c7eca23b5aff6ace8fec9314894e5fcf085299a658ba1ed4ccca7\", \"kind\": \
        \"sampled\", \"mask_entry_id\": \"000102030405060708090a0b0c0d0e0f\", \"prev_hash\": \
        \"b9c449758048132f1bcf4f2df0aaf93307ce6ad04da1ae29140ed7087cf51d9c\", \"step\": 0, \
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
