//! Fixed-width bitsets over terminals, stored as rows of `u64` words.
//!
//! Every terminal set of one grammar (DFA accept/live sets, lexicon category
//! sets, allowed sets with `$END` at bit T) has the same width:
//! `W = ceil((T + 1) / 64)` words, bit `t` in word `t / 64` at position `t % 64`. Grammars with
//! more than 64 terminals (the sqlite dialect has 139) need no special case.
//! A table of per-state sets is one flat `Vec<u64>` of `n * W` words
//! ([`BitRows`]), so a row is a slice and nothing is boxed per state.

/// Words needed for `n_bits` bits (at least one).
pub fn width_for(n_bits: usize) -> usize {
    n_bits.div_ceil(64).max(1)
}

/// Bit `bit` of `set`; bits past the end read as zero.
#[inline]
pub fn test(set: &[u64], bit: usize) -> bool {
    set.get(bit / 64).is_some_and(|w| w >> (bit % 64) & 1 == 1)
}

/// Set bit `bit`. Precondition: `bit < 64 * set.len()`.
#[inline]
pub fn set(set: &mut [u64], bit: usize) {
    set[bit / 64] |= 1 << (bit % 64);
}

/// `a & b` is not empty.
#[inline]
pub fn intersects(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

/// `a` has no bit set.
#[inline]
pub fn is_empty(a: &[u64]) -> bool {
    a.iter().all(|&x| x == 0)
}

/// The highest set bit plus one (0 for the empty set).
pub fn bit_len(a: &[u64]) -> usize {
    a.iter()
        .rposition(|&x| x != 0)
        .map_or(0, |i| i * 64 + 64 - a[i].leading_zeros() as usize)
}

/// Little-endian bytes of `a` (the layout of Python's `int.to_bytes(..., "little")`).
pub fn to_le_bytes(a: &[u64]) -> Vec<u8> {
    a.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `width` words from little-endian bytes; `None` if a set bit does not fit.
pub fn from_le_bytes(bytes: &[u8], width: usize) -> Option<Vec<u64>> {
    let mut out = vec![0u64; width];
    for (i, &b) in bytes.iter().enumerate() {
        if b == 0 {
            continue;
        }
        *out.get_mut(i / 8)? |= u64::from(b) << (8 * (i % 8));
    }
    Some(out)
}

/// `n` bitsets of one width in one flat array: row `i` is `data[i*W..(i+1)*W]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitRows {
    width: usize,
    data: Vec<u64>,
}

impl BitRows {
    /// Rows from owned sets; every set must have exactly `width` words.
    pub fn from_rows(width: usize, rows: &[Vec<u64>]) -> Option<Self> {
        let mut data = Vec::with_capacity(rows.len() * width);
        for row in rows {
            if row.len() != width {
                return None;
            }
            data.extend_from_slice(row);
        }
        Some(Self { width, data })
    }

    /// Rows from one flat array of whole rows (`data.len()` a multiple of `width`).
    pub fn from_flat(width: usize, data: Vec<u64>) -> Self {
        assert!(
            width > 0 && data.len().is_multiple_of(width),
            "a flat array of whole rows"
        );
        Self { width, data }
    }

    #[inline]
    pub fn row(&self, i: usize) -> &[u64] {
        &self.data[i * self.width..(i + 1) * self.width]
    }

    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn width(&self) -> usize {
        self.width
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_past_64_round_trip() {
        let w = width_for(140);
        assert_eq!(w, 3);
        let mut s = vec![0; w];
        set(&mut s, 0);
        set(&mut s, 64);
        set(&mut s, 139);
        assert!(test(&s, 139) && test(&s, 64) && !test(&s, 63) && !test(&s, 500));
        assert_eq!(bit_len(&s), 140);
        assert_eq!(from_le_bytes(&to_le_bytes(&s), w), Some(s.clone()));
        assert_eq!(from_le_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 1], 1), None);
        assert_eq!(
            from_le_bytes(&[1, 0, 0, 0, 0, 0, 0, 0, 0], 1),
            Some(vec![1])
        );
    }

    #[test]
    fn intersection_and_rows() {
        let rows = BitRows::from_rows(2, &[vec![1, 0], vec![0, 2]]).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(intersects(rows.row(1), &[0, 3]));
        assert!(!intersects(rows.row(0), &[0, 3]));
        assert!(is_empty(&[0, 0]) && !is_empty(rows.row(1)));
        assert!(BitRows::from_rows(2, &[vec![1]]).is_none());
        assert_eq!(bit_len(&[0, 0]), 0);
    }
}
