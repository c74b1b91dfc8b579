//! grid-core's canonical encoding (`grid_core.fingerprint.canonical`), for the
//! values an entry id hashes: `None`, bools, non-negative ints (machine words
//! or multi-word bitsets), strings, bytes and lists.
//!
//! The encoding is type-tagged and length-prefixed, so it is injective:
//!
//! | value  | bytes                                                   |
//! |--------|---------------------------------------------------------|
//! | None   | `N`                                                     |
//! | bool   | `T` or `F`                                              |
//! | int    | `i` + u32 big-endian length + the decimal digits (ASCII) |
//! | str    | `s` + u64 big-endian length + UTF-8                      |
//! | bytes  | `b` + u64 big-endian length + the bytes                  |
//! | list   | `l` + u64 big-endian item count + each item              |
//!
//! Ints are written in decimal (Python's `str(int)`); a bitset over terminals
//! is a multi-word unsigned int, converted by repeated division by 10^19.

/// `n` in decimal (Python's `str(n)`: ASCII digits), written at the end of
/// `buf`: the digits, a suffix of `buf`.
pub fn u64_digits(mut n: u64, buf: &mut [u8; 21]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// An encoder appending to one buffer.
#[derive(Clone, Debug, Default)]
pub struct Canonical {
    pub bytes: Vec<u8>,
}

impl Canonical {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn none(&mut self) -> &mut Self {
        self.bytes.push(b'N');
        self
    }

    pub fn bool(&mut self, b: bool) -> &mut Self {
        self.bytes.push(if b { b'T' } else { b'F' });
        self
    }

    pub fn int(&mut self, v: i64) -> &mut Self {
        // Python's str(int).
        let mut buf = [0u8; 21];
        let mut at = buf.len() - u64_digits(v.unsigned_abs(), &mut buf).len();
        if v < 0 {
            at -= 1;
            buf[at] = b'-';
        }
        self.int_digits(&buf[at..])
    }

    /// A non-negative int (Python's `str(int)`, all of `u64`'s range).
    pub fn uint(&mut self, v: u64) -> &mut Self {
        let mut buf = [0u8; 21];
        self.int_digits(u64_digits(v, &mut buf))
    }

    /// A non-negative int given as little-endian 64-bit words (a bitset).
    pub fn uint_words(&mut self, words: &[u64]) -> &mut Self {
        self.int_digits(decimal(words).as_bytes())
    }

    fn int_digits(&mut self, digits: &[u8]) -> &mut Self {
        self.bytes.push(b'i');
        self.bytes
            .extend_from_slice(&(digits.len() as u32).to_be_bytes());
        self.bytes.extend_from_slice(digits);
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes.push(b's');
        self.bytes
            .extend_from_slice(&(s.len() as u64).to_be_bytes());
        self.bytes.extend_from_slice(s.as_bytes());
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.bytes.push(b'b');
        self.bytes
            .extend_from_slice(&(b.len() as u64).to_be_bytes());
        self.bytes.extend_from_slice(b);
        self
    }

    /// The header of a list of `n` items; the items follow.
    pub fn list(&mut self, n: usize) -> &mut Self {
        self.bytes.push(b'l');
        self.bytes.extend_from_slice(&(n as u64).to_be_bytes());
        self
    }
}

/// The decimal digits of a non-negative int given as little-endian words.
pub fn decimal(words: &[u64]) -> String {
    const CHUNK: u64 = 10_000_000_000_000_000_000; // 10^19 < 2^64
    let mut n: Vec<u64> = words.to_vec();
    while n.last() == Some(&0) {
        n.pop();
    }
    if n.is_empty() {
        return "0".into();
    }
    let mut chunks: Vec<u64> = Vec::new();
    while !n.is_empty() {
        let mut rem: u128 = 0;
        for w in n.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*w);
            *w = (cur / u128::from(CHUNK)) as u64;
            rem = cur % u128::from(CHUNK);
        }
        chunks.push(rem as u64);
        while n.last() == Some(&0) {
            n.pop();
        }
    }
    let mut s = chunks.pop().expect("n was not zero").to_string();
    for c in chunks.iter().rev() {
        s.push_str(&format!("{c:019}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uint_is_python_str_over_all_of_u64() {
        // A namespace past i64::MAX once came out negative ("-1" for u64::MAX).
        for v in [0, 7, i64::MAX as u64, 1 << 63, u64::MAX] {
            let mut c = Canonical::new();
            c.uint(v);
            let digits = v.to_string();
            let mut want = vec![b'i'];
            want.extend_from_slice(&(digits.len() as u32).to_be_bytes());
            want.extend_from_slice(digits.as_bytes());
            assert_eq!(c.bytes, want, "{v}");
        }
    }

    #[test]
    fn decimal_of_multiword_ints() {
        assert_eq!(decimal(&[]), "0");
        assert_eq!(decimal(&[0, 0]), "0");
        assert_eq!(decimal(&[12345]), "12345");
        assert_eq!(decimal(&[u64::MAX]), "18446744073709551615");
        // 2^64 and 2^139 + 1, as Python prints them.
        assert_eq!(decimal(&[0, 1]), "18446744073709551616");
        assert_eq!(
            decimal(&[1, 0, 1 << 11]),
            "696898287454081973172991196020261297061889"
        );
    }

    #[test]
    fn ints_are_pythons_decimal() {
        for v in [0, 7, 10, -1, -10, 1234567890, i64::MAX, i64::MIN] {
            let mut c = Canonical::new();
            c.int(v);
            let digits = v.to_string();
            assert_eq!(&c.bytes[5..], digits.as_bytes(), "{v}");
            assert_eq!(c.bytes[..5], [b'i', 0, 0, 0, digits.len() as u8]);
        }
    }

    #[test]
    fn encodes_like_grid_core() {
        // canonical(("generic", 0, [True, None], b"a")) from grid_core.fingerprint.
        let mut c = Canonical::new();
        c.list(4)
            .str("generic")
            .int(0)
            .list(2)
            .bool(true)
            .none()
            .bytes(b"a");
        let mut expected = vec![b'l'];
        expected.extend_from_slice(&4u64.to_be_bytes());
        expected.push(b's');
        expected.extend_from_slice(&7u64.to_be_bytes());
        expected.extend_from_slice(b"generic");
        expected.extend_from_slice(b"i\0\0\0\x010");
        expected.push(b'l');
        expected.extend_from_slice(&2u64.to_be_bytes());
        expected.extend_from_slice(b"TN");
        expected.push(b'b');
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.push(b'a');
        assert_eq!(c.bytes, expected);
    }
}
