//! BLAKE2b, the one hash of grid's identities: entry ids, stack and
//! configuration hashes, the audit chain (`hashlib.blake2b(digest_size=N)`
//! in grid-core, byte for byte).
//!
//! `blake2b_simd` picks its compression function at run time (AVX2, SSE4.1 or
//! portable), all of them bit-identical; on the reference host (a Xeon with
//! AVX2) a one-block hash takes about 175 ns against 225 ns for the portable
//! RustCrypto `blake2` it replaces, and a two-block one 325 against 425.

use blake2b_simd::many::{hash_many, HashManyJob};
use blake2b_simd::Params;

/// A running BLAKE2b hash with an `N`-byte digest (`N` from 1 to 64).
pub struct Hasher<const N: usize>(blake2b_simd::State);

impl<const N: usize> Hasher<N> {
    pub fn new() -> Self {
        Self(Params::new().hash_length(N).to_state())
    }

    pub fn update(&mut self, data: &[u8]) -> &mut Self {
        self.0.update(data);
        self
    }

    pub fn finalize(&self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(self.0.finalize().as_bytes());
        out
    }
}

impl<const N: usize> Default for Hasher<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// BLAKE2b with an `N`-byte digest of `data`.
pub fn blake2b<const N: usize>(data: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(Params::new().hash_length(N).hash(data).as_bytes());
    out
}

/// The low 64 bits (little-endian) of a BLAKE2b-128 digest of the parts
/// (grid-core's `int.from_bytes(digest[:8], "little")`).
pub fn low64(parts: &[&[u8]]) -> u64 {
    let mut h = Hasher::<16>::new();
    for p in parts {
        h.update(p);
    }
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("16-byte digest"))
}

/// [`low64`] of each input, appended to `out`. The hashes are independent,
/// so they run several to a SIMD pass (`blake2b_simd::many`: four on AVX2);
/// each equals `low64(&[input])`.
pub fn low64_each<const L: usize>(inputs: &[[u8; L]], out: &mut Vec<u64>) {
    let params = Params::new().hash_length(16).clone();
    let mut jobs: Vec<HashManyJob> = inputs
        .iter()
        .map(|input| HashManyJob::new(&params, input))
        .collect();
    hash_many(jobs.iter_mut());
    out.extend(jobs.iter().map(|job| {
        u64::from_le_bytes(
            job.to_hash().as_bytes()[..8]
                .try_into()
                .expect("16-byte digest"),
        )
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_python_s() {
        // hashlib.blake2b(b"abc", digest_size=16).hexdigest()
        assert_eq!(
            crate::audit::hex(&blake2b::<16>(b"abc")),
            "cf4ab791c62b8d2b2109c90275287816"
        );
        // hashlib.blake2b(b"", digest_size=8).hexdigest()
        assert_eq!(crate::audit::hex(&blake2b::<8>(b"")), "e4a6a0577479b2b4");
        let mut h = Hasher::<32>::new();
        h.update(b"a").update(b"bc");
        assert_eq!(h.finalize(), blake2b::<32>(b"abc"));
    }

    #[test]
    fn low64_each_is_low64_of_each() {
        let inputs: Vec<[u8; 24]> = (0..11u8).map(|i| [i.wrapping_mul(37); 24]).collect();
        let mut out = vec![7];
        low64_each(&inputs, &mut out);
        assert_eq!(out.len(), 12);
        for (input, h) in inputs.iter().zip(&out[1..]) {
            assert_eq!(*h, low64(&[input]));
        }
    }
}
