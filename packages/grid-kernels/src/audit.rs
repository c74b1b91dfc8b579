//! A session's audit chain: grid-core's records (`grid_core.audit`), byte for byte.
//!
//! Every accepted token appends one record `(step, config_hash,
//! mask_entry_id, token, blocked_count, kind, prev_hash)` (DESIGN.md section
//! 9). The record's hash is `BLAKE2b-256(prev_hash || canonical([schema,
//! step, hex(config_hash), hex(entry_id), token, blocked, kind,
//! hex(prev_hash)]))`, chained from the genesis constant
//! `BLAKE2b-256(b"grid.audit.genesis/1")`; the configuration hash is
//! `low64(BLAKE2b-128(H(stack) || u64(|r|) || u64(digest(r))))`
//! (`Config.hash`), with `digest` the remainder's polynomial hash modulo
//! 2^61 - 1 ([`extend_digest`]).
//!
//! What a step stores is the record's fields, not its hashes: the hashes are
//! chained when the records are read ([`Chain::hashes`]), once per record
//! (a rolled-back record is never hashed), so a warm step's audit is a push
//! of a few words. The seal is written by grid-core over the records read.

use std::sync::OnceLock;

use crate::canonical::{u64_digits, Canonical};
use crate::hash::{blake2b, low64, Hasher};

/// The audit format's schema name (`grid_core.audit.SCHEMA`).
pub const SCHEMA: &str = "grid.audit/1";

/// The modulus of the remainder digest (`grid_core.lexer.DIGEST_MODULUS`).
pub const DIGEST_MODULUS: u64 = (1 << 61) - 1;

/// The digest of `r + data` from that of `r`: the bytes as a base-256 number
/// modulo 2^61 - 1 (`grid_core.lexer.extend_digest`).
pub fn extend_digest(mut digest: u64, data: &[u8]) -> u64 {
    for &b in data {
        digest = ((u128::from(digest) * 256 + u128::from(b)) % u128::from(DIGEST_MODULUS)) as u64;
    }
    digest
}

/// The configuration hash of a stack hash and a remainder's length and digest.
pub fn config_hash(stack: u64, len: u64, digest: u64) -> u64 {
    low64(&[
        &stack.to_le_bytes(),
        &len.to_le_bytes(),
        &digest.to_le_bytes(),
    ])
}

/// The content address of a packed mask row (`grid_core.audit.mask_entry_id`):
/// BLAKE2b-128 of its words as little-endian bytes.
pub fn mask_entry_id(row: &[u32]) -> [u8; 16] {
    let mut h = Hasher::<16>::new();
    let mut buf = [0u8; 512];
    for words in row.chunks(buf.len() / 4) {
        for (i, w) in words.iter().enumerate() {
            buf[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        h.update(&buf[..4 * words.len()]);
    }
    h.finalize()
}

/// The genesis constant a chain starts from.
pub fn genesis() -> [u8; 32] {
    static GENESIS: OnceLock<[u8; 32]> = OnceLock::new();
    *GENESIS.get_or_init(|| blake2b::<32>(b"grid.audit.genesis/1"))
}

/// A record's kind (`grid_core.audit.KINDS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sampled,
    Forced,
    Reserve,
    Eos,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sampled => "sampled",
            Kind::Forced => "forced",
            Kind::Reserve => "reserve",
            Kind::Eos => "eos",
        }
    }

    /// The kind named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Kind> {
        [Kind::Sampled, Kind::Forced, Kind::Reserve, Kind::Eos]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// One step's record, before hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The stack's rolling hash and the remainder's length and digest, at the
    /// configuration the mask was computed at.
    pub stack: u64,
    pub rem_len: u64,
    pub rem_digest: u64,
    pub entry_id: [u8; 16],
    pub token: u32,
    pub blocked: u32,
    pub kind: Kind,
}

impl Record {
    pub fn config_hash(&self) -> u64 {
        config_hash(self.stack, self.rem_len, self.rem_digest)
    }

    /// This record's hash as step `step` after `prev`.
    pub fn hash(&self, step: usize, prev: &[u8; 32]) -> [u8; 32] {
        self.hash_at(step, prev, self.config_hash(), &mut Canonical::new())
    }

    /// [`Self::hash`] given the record's configuration hash, encoding into
    /// `c` (emptied first: one buffer serves a whole chain).
    fn hash_at(
        &self,
        step: usize,
        prev: &[u8; 32],
        config_hash: u64,
        c: &mut Canonical,
    ) -> [u8; 32] {
        c.bytes.clear();
        let (mut config, mut entry, mut link) = ([0u8; 16], [0u8; 32], [0u8; 64]);
        c.list(8)
            .str(SCHEMA)
            .int(step as i64)
            .str(hex_into(&config_hash.to_be_bytes(), &mut config))
            .str(hex_into(&self.entry_id, &mut entry))
            .int(i64::from(self.token))
            .int(i64::from(self.blocked))
            .str(self.kind.name())
            .str(hex_into(prev, &mut link));
        Hasher::<32>::new().update(prev).update(&c.bytes).finalize()
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; 2 * bytes.len()];
    hex_into(bytes, &mut out).to_owned()
}

/// Lowercase hex of `bytes` written into `out` (twice as long), as a `&str`.
fn hex_into<'a>(bytes: &[u8], out: &'a mut [u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    std::str::from_utf8(out).expect("hex digits are ASCII")
}

/// The records of one history, and the hashes chained so far over a prefix
/// of them (invariant: `hashes.len() == configs.len() <= records.len()`,
/// `hashes[i]` is the hash of `records[i]` as step `i` after `hashes[i - 1]`
/// or genesis, and `configs[i]` is `records[i].config_hash()`).
#[derive(Clone, Debug, Default)]
pub struct Chain {
    records: Vec<Record>,
    hashes: Vec<[u8; 32]>,
    configs: Vec<u64>,
}

impl Chain {
    pub fn push(&mut self, record: Record) {
        self.records.push(record);
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Keep the first `n` records.
    pub fn truncate(&mut self, n: usize) {
        self.records.truncate(n);
        self.hashes.truncate(n);
        self.configs.truncate(n);
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Every record's hash, chaining the ones not hashed yet.
    pub fn hashes(&mut self) -> &[[u8; 32]] {
        let mut c = Canonical::new();
        for i in self.hashes.len()..self.records.len() {
            let prev = self.hashes.last().copied().unwrap_or_else(genesis);
            let config = self.records[i].config_hash();
            self.hashes
                .push(self.records[i].hash_at(i, &prev, config, &mut c));
            self.configs.push(config);
        }
        &self.hashes
    }

    /// Every record as `grid_core.audit.AuditLog.lines()` writes it
    /// (`json.dumps({**asdict(record), "hash": h}, sort_keys=True)`: the keys
    /// in order, `", "` and `": "` between them), joined by `\n`, chaining
    /// the ones not hashed yet.
    pub fn lines(&mut self) -> String {
        self.hashes();
        let mut out = String::with_capacity(self.records.len() * 340);
        let mut prev = genesis();
        let (mut config, mut entry) = ([0u8; 16], [0u8; 32]);
        let (mut link, mut hash, mut digits) = ([0u8; 64], [0u8; 64], [0u8; 21]);
        let records = self.records.iter().zip(&self.hashes).zip(&self.configs);
        for (i, ((r, h), config_hash)) in records.enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("{\"blocked_count\": ");
            out.push_str(u64_digits(u64::from(r.blocked), &mut digits));
            out.push_str(", \"config_hash\": \"");
            out.push_str(hex_into(&config_hash.to_be_bytes(), &mut config));
            out.push_str("\", \"hash\": \"");
            out.push_str(hex_into(h, &mut hash));
            out.push_str("\", \"kind\": \"");
            out.push_str(r.kind.name());
            out.push_str("\", \"mask_entry_id\": \"");
            out.push_str(hex_into(&r.entry_id, &mut entry));
            out.push_str("\", \"prev_hash\": \"");
            out.push_str(hex_into(&prev, &mut link));
            out.push_str("\", \"step\": ");
            out.push_str(u64_digits(i as u64, &mut digits));
            out.push_str(", \"token\": ");
            out.push_str(u64_digits(u64::from(r.token), &mut digits));
            out.push('}');
            prev = *h;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_extends() {
        assert_eq!(extend_digest(0, b""), 0);
        assert_eq!(extend_digest(0, b"\x01\x02"), 258);
        let whole = extend_digest(0, b"select * from employees");
        assert_eq!(
            extend_digest(extend_digest(0, b"select * "), b"from employees"),
            whole
        );
        // 2^61 - 1 wraps: 256^8 mod (2^61 - 1) = 2^64 mod (2^61 - 1) = 8.
        assert_eq!(extend_digest(1, &[0; 8]), 8);
    }

    #[test]
    fn hex_is_lowercase_and_big_endian_for_ints() {
        assert_eq!(hex(&[0x00, 0xab, 0x0f]), "00ab0f");
        let mut buf = [0u8; 16];
        assert_eq!(
            hex_into(&0x0123_4567_89ab_cdefu64.to_be_bytes(), &mut buf),
            "0123456789abcdef"
        );
    }

    #[test]
    fn genesis_is_the_documented_constant() {
        // hashlib.blake2b(b"grid.audit.genesis/1", digest_size=32).hexdigest()[:16]
        assert_eq!(hex(&genesis()).len(), 64);
        assert_ne!(genesis(), [0; 32]);
    }

    #[test]
    fn chain_hashes_once_and_truncates() {
        let r = Record {
            stack: 1,
            rem_len: 0,
            rem_digest: 0,
            entry_id: [7; 16],
            token: 5,
            blocked: 9,
            kind: Kind::Sampled,
        };
        let mut c = Chain::default();
        c.push(r);
        c.push(Record {
            kind: Kind::Eos,
            ..r
        });
        let hs = c.hashes().to_vec();
        assert_eq!(hs[0], r.hash(0, &genesis()));
        assert_eq!(
            hs[1],
            Record {
                kind: Kind::Eos,
                ..r
            }
            .hash(1, &hs[0])
        );
        c.truncate(1);
        c.push(r);
        let again = c.hashes().to_vec();
        assert_eq!(again[0], hs[0]);
        assert_ne!(again[1], hs[1], "a different kind changes the hash");
        assert_eq!(Kind::parse("forced"), Some(Kind::Forced));
        assert_eq!(Kind::parse("nope"), None);
    }
}
