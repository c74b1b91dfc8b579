//! A session's audit chain: grid-core's records (`grid_core.audit`), byte for byte.
//!
//! Every accepted token appends one record `(step, config_hash,
//! mask_entry_id, token, blocked_count, kind, prev_hash)` (DESIGN.md section
//! 9). The record's hash is the BLAKE2b-256 of its 85-byte encoding in the
//! schema `grid.audit/2` (`prev_hash || "grid.audit/2" || u64(step) ||
//! config_hash || entry_id || u32(token) || u32(blocked) || u8(kind)`,
//! big-endian: one BLAKE2b block), chained from the genesis constant
//! `BLAKE2b-256(b"grid.audit.genesis/2")`; the configuration hash is
//! `low64(BLAKE2b-128(H(stack) || u64(|r|) || u64(digest(r))))`
//! (`Config.hash`), with `digest` the remainder's polynomial hash modulo
//! 2^61 - 1 ([`extend_digest`]).
//!
//! What a step stores is the record's fields, not its hashes: the hashes are
//! chained when the records are read ([`Chain::hashes`]), once per record
//! (a rolled-back record is never hashed), so a warm step's audit is a push
//! of a few words. The seal is written by grid-core over the records read.

use std::sync::OnceLock;

use crate::canonical::u64_digits;
use crate::hash::{blake2b, low64, low64_each, Hasher};

/// The audit format's schema name (`grid_core.audit.SCHEMA`).
pub const SCHEMA: &str = "grid.audit/2";

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
    low64(&[&config_input(stack, len, digest)])
}

/// What a configuration hash hashes: the three words, little-endian.
fn config_input(stack: u64, len: u64, digest: u64) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[..8].copy_from_slice(&stack.to_le_bytes());
    out[8..16].copy_from_slice(&len.to_le_bytes());
    out[16..].copy_from_slice(&digest.to_le_bytes());
    out
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
    *GENESIS.get_or_init(|| blake2b::<32>(b"grid.audit.genesis/2"))
}

/// A record's kind (`grid_core.audit.KINDS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sampled = 0,
    Forced = 1,
    Reserve = 2,
    Eos = 3,
}

impl Kind {
    /// The kind's byte in the record encoding: its index in `KINDS`.
    pub fn code(self) -> u8 {
        self as u8
    }

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
    /// The configuration hash of (`stack`, `rem_len`, `rem_digest`) when the
    /// step already knew it (memoized with its row: [`crate::engine::Row`]);
    /// None: [`Chain::hashes`] computes it.
    pub config: Option<u64>,
}

impl Record {
    pub fn config_hash(&self) -> u64 {
        self.config
            .unwrap_or_else(|| config_hash(self.stack, self.rem_len, self.rem_digest))
    }

    /// This record's hash as step `step` after `prev`.
    pub fn hash(&self, step: usize, prev: &[u8; 32]) -> [u8; 32] {
        blake2b::<32>(&self.encode(step, prev, self.config_hash()))
    }

    /// The record encoding `prev || "grid.audit/2" || u64(step) ||
    /// config_hash || entry_id || u32(token) || u32(blocked) || u8(kind)`,
    /// integers big-endian (`grid_core.audit.Record.encoding`).
    fn encode(&self, step: usize, prev: &[u8; 32], config_hash: u64) -> [u8; ENCODING_LEN] {
        let mut out = [0u8; ENCODING_LEN];
        let mut w = Writer {
            buf: out.as_mut_slice(),
            at: 0,
        };
        w.put(prev);
        w.put(SCHEMA.as_bytes());
        w.put(&(step as u64).to_be_bytes());
        w.put(&config_hash.to_be_bytes());
        w.put(&self.entry_id);
        w.put(&self.token.to_be_bytes());
        w.put(&self.blocked.to_be_bytes());
        w.put(&[self.kind.code()]);
        debug_assert_eq!(w.at, ENCODING_LEN);
        out
    }
}

/// The length of a record encoding: the link, the schema's name, the step,
/// the configuration hash, the entry id, the token, the blocked count and the
/// kind. At most 128 bytes: one BLAKE2b compression.
pub const ENCODING_LEN: usize = 32 + SCHEMA.len() + 8 + 8 + 16 + 4 + 4 + 1;
const _: () = assert!(
    ENCODING_LEN <= 128,
    "a record encoding is one BLAKE2b block"
);

/// Appends to a fixed buffer (the caller sized it for what it writes).
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    /// The lowercase hex of `bytes`.
    fn hex(&mut self, bytes: &[u8]) {
        hex_into(bytes, &mut self.buf[self.at..self.at + 2 * bytes.len()]);
        self.at += 2 * bytes.len();
    }

    /// Record `r`'s line as step `step`, hashed `h` after `prev` (no `\n`).
    fn line(&mut self, step: u64, r: &Record, config_hash: u64, h: &[u8; 32], prev: &[u8; 32]) {
        let mut digits = [0u8; 21];
        self.put(b"{\"blocked_count\": ");
        self.put(u64_digits(u64::from(r.blocked), &mut digits));
        self.put(b", \"config_hash\": \"");
        self.hex(&config_hash.to_be_bytes());
        self.put(b"\", \"hash\": \"");
        self.hex(h);
        self.put(b"\", \"kind\": \"");
        self.put(r.kind.name().as_bytes());
        self.put(b"\", \"mask_entry_id\": \"");
        self.hex(&r.entry_id);
        self.put(b"\", \"prev_hash\": \"");
        self.hex(prev);
        self.put(b"\", \"step\": ");
        self.put(u64_digits(step, &mut digits));
        self.put(b", \"token\": ");
        self.put(u64_digits(u64::from(r.token), &mut digits));
        self.put(b"}");
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; 2 * bytes.len()];
    hex_into(bytes, &mut out);
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// Lowercase hex of `bytes` written into `out` (twice as long): ASCII.
///
/// Four bytes at a time in one `u64` (SWAR): each byte is spread into a
/// 16-bit lane, its high nibble into the lane's low byte (written first) and
/// its low nibble into the high byte, then every nibble `n` becomes
/// `b'0' + n`, plus `b'a' - b'9' - 1` where `n > 9` (`n + 6` carries into
/// bit 4 exactly then; no lane overflows). About five times the speed of a
/// table lookup per byte; equal to it on every byte value (tested).
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const LOW: u64 = 0x000f_000f_000f_000f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut chunks = bytes.chunks_exact(4);
    let mut outs = out.chunks_exact_mut(8);
    for (quad, oct) in (&mut chunks).zip(&mut outs) {
        let x = u64::from(u32::from_le_bytes(quad.try_into().expect("four bytes")));
        let x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
        let x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
        let n = ((x >> 4) & LOW) | ((x & LOW) << 8);
        let above_nine = ((n + 6 * ONES) >> 4) & ONES;
        let ascii = n + 0x30 * ONES + above_nine * (b'a' - b'9' - 1) as u64;
        oct.copy_from_slice(&ascii.to_le_bytes());
    }
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let rest = chunks.remainder();
    let tail = &mut out[2 * (bytes.len() - rest.len())..];
    for (pair, b) in tail.chunks_exact_mut(2).zip(rest) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
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

    /// Every record's hash, chaining the ones not hashed yet: first the new
    /// records' configuration hashes that no step knew, all together (they do
    /// not depend on each other: [`low64_each`] hashes several per SIMD pass),
    /// then the chain, one record after the other, each encoded into one
    /// stack buffer.
    pub fn hashes(&mut self) -> &[[u8; 32]] {
        let start = self.hashes.len();
        let new = &self.records[start..];
        let inputs: Vec<[u8; 24]> = new
            .iter()
            .filter(|r| r.config.is_none())
            .map(|r| config_input(r.stack, r.rem_len, r.rem_digest))
            .collect();
        let mut computed = Vec::with_capacity(inputs.len());
        low64_each(&inputs, &mut computed);
        let mut computed = computed.into_iter();
        self.configs.extend(new.iter().map(|r| {
            r.config
                .unwrap_or_else(|| computed.next().expect("one hash per unknown"))
        }));
        self.hashes.reserve(new.len());
        for i in start..self.records.len() {
            let prev = self.hashes.last().copied().unwrap_or_else(genesis);
            let enc = self.records[i].encode(i, &prev, self.configs[i]);
            self.hashes.push(blake2b::<32>(&enc));
        }
        &self.hashes
    }

    /// Every record as `grid_core.audit.AuditLog.lines()` writes it
    /// (`json.dumps({**asdict(record), "hash": h}, sort_keys=True)`: the keys
    /// in order, `", "` and `": "` between them), joined by `\n`, chaining
    /// the ones not hashed yet. ASCII bytes.
    pub fn lines(&mut self) -> Vec<u8> {
        self.hashes();
        let mut out = vec![0u8; self.records.len() * LINE_MAX];
        let mut w = Writer {
            buf: out.as_mut_slice(),
            at: 0,
        };
        let mut prev = genesis();
        let records = self.records.iter().zip(&self.hashes).zip(&self.configs);
        for (i, ((r, h), &config_hash)) in records.enumerate() {
            if i > 0 {
                w.put(b"\n");
            }
            w.line(i as u64, r, config_hash, h, &prev);
            prev = *h;
        }
        let n = w.at;
        out.truncate(n);
        out
    }
}

/// The longest record line, its `\n` included: the keys and punctuation
/// (121 bytes), four hex strings (16 + 64 + 32 + 64), the step's at most 20
/// digits (a `u64`), the token's and the blocked count's at most 10 (`u32`)
/// and the longest kind (7). Exact: a line of the widest fields is one byte
/// shorter (tested).
const LINE_MAX: usize = 121 + 16 + 64 + 32 + 64 + 20 + 10 + 10 + 7 + 1;

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
        assert_eq!(
            hex(&0x0123_4567_89ab_cdefu64.to_be_bytes()),
            "0123456789abcdef"
        );
    }

    #[test]
    fn hex_matches_a_digit_table_on_every_byte_and_length() {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for len in 0..=all.len().min(40) {
            for start in [0, 1, 100, 250, 460] {
                let bytes = &all[start.min(all.len() - len)..][..len];
                let want: String = bytes
                    .iter()
                    .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
                    .map(char::from)
                    .collect();
                assert_eq!(hex(bytes), want, "{bytes:?}");
            }
        }
        assert_eq!(
            hex(&all),
            all.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
    }

    #[test]
    fn a_mask_entry_id_is_blake2b_128_of_the_rows_le_bytes() {
        // Rows shorter than, as long as and longer than one 128-word chunk of
        // the streaming hash, up to a Qwen row (4,746 words).
        for len in [0usize, 1, 127, 128, 129, 300, 4746] {
            let row: Vec<u32> = (0..len as u32)
                .map(|i| i.wrapping_mul(0x9e37_79b9))
                .collect();
            let bytes: Vec<u8> = row.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(mask_entry_id(&row), blake2b::<16>(&bytes), "{len} words");
        }
    }

    #[test]
    fn the_widest_line_and_its_newline_are_line_max() {
        let widest = Record {
            stack: u64::MAX,
            rem_len: u64::MAX,
            rem_digest: u64::MAX,
            entry_id: [0xff; 16],
            token: u32::MAX,
            blocked: u32::MAX,
            kind: Kind::Reserve,
            config: None,
        };
        let mut buf = vec![0u8; LINE_MAX - 1];
        let mut w = Writer {
            buf: buf.as_mut_slice(),
            at: 0,
        };
        w.line(u64::MAX, &widest, u64::MAX, &[0xff; 32], &[0xff; 32]);
        assert_eq!(w.at, LINE_MAX - 1);
        let line = String::from_utf8(buf).expect("ASCII");
        assert!(line.contains("\"step\": 18446744073709551615, \"token\": 4294967295}"));
        let kinds = [Kind::Sampled, Kind::Forced, Kind::Reserve, Kind::Eos];
        assert!(kinds
            .iter()
            .all(|k| k.name().len() <= Kind::Reserve.name().len()));
    }

    #[test]
    fn genesis_is_the_documented_constant() {
        // hashlib.blake2b(b"grid.audit.genesis/2", digest_size=32).hexdigest(): tests/audit_mutants.rs
        assert_eq!(hex(&genesis()).len(), 64);
        assert_ne!(genesis(), [0; 32]);
    }

    #[test]
    fn encoding_is_the_fixed_layout_and_one_block() {
        let widest = Record {
            stack: u64::MAX,
            rem_len: u64::MAX,
            rem_digest: DIGEST_MODULUS - 1,
            entry_id: [0xff; 16],
            token: u32::MAX,
            blocked: u32::MAX,
            kind: Kind::Reserve,
            config: None,
        };
        let narrow = Record {
            stack: 0,
            rem_len: 0,
            rem_digest: 0,
            entry_id: std::array::from_fn(|i| i as u8),
            token: 0x0102_0304,
            blocked: 7,
            kind: Kind::Eos,
            config: None,
        };
        for (r, step) in [(widest, usize::MAX), (narrow, 0), (widest, 7)] {
            let prev = [0xa5; 32];
            let config = r.config_hash();
            let mut want = prev.to_vec();
            want.extend_from_slice(b"grid.audit/2");
            want.extend_from_slice(&(step as u64).to_be_bytes());
            want.extend_from_slice(&config.to_be_bytes());
            want.extend_from_slice(&r.entry_id);
            want.extend_from_slice(&r.token.to_be_bytes());
            want.extend_from_slice(&r.blocked.to_be_bytes());
            want.push(
                ["sampled", "forced", "reserve", "eos"]
                    .iter()
                    .position(|k| *k == r.kind.name())
                    .expect("a kind") as u8,
            );
            assert_eq!(r.encode(step, &prev, config).as_slice(), want.as_slice());
            assert_eq!(r.hash(step, &prev), blake2b::<32>(&want));
        }
        let mut chain = Chain::default();
        chain.push(widest);
        chain.push(widest);
        let lines = String::from_utf8(chain.lines()).expect("ASCII");
        assert!(lines.split('\n').all(|l| l.len() < LINE_MAX), "{lines}");
    }

    #[test]
    fn a_configuration_hash_known_to_the_step_is_the_one_computed() {
        let mut plain = Chain::default();
        let mut known = Chain::default();
        for i in 0..11u64 {
            let r = Record {
                stack: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                rem_len: i % 3,
                rem_digest: i * 977,
                entry_id: [i as u8; 16],
                token: i as u32,
                blocked: 3,
                kind: Kind::Sampled,
                config: None,
            };
            plain.push(r);
            // Every other record arrives with its hash, as a memoized row gives it.
            let config = (i % 2 == 0).then(|| r.config_hash());
            known.push(Record { config, ..r });
        }
        assert_eq!(plain.lines(), known.lines());
        assert_eq!(plain.hashes(), known.hashes());
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
            config: None,
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
