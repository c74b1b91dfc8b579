//! Applying a packed bitmask to a row of logits, in place.
//!
//! The other end of [`crate::fill`]: a mask over a vocabulary of `n` ids is
//! `ceil(n / 32)` words, bit `i % 32` of word `i / 32` set when token `i` is
//! admitted (grid-core's `Engine.pack`). Every logit whose bit is clear, and
//! every column at or past `32 * words` (the padding of a logits row wider
//! than the vocabulary), becomes negative infinity; admitted logits are left
//! as they are, bit for bit. This is grid-serve's `apply_bitmask_` on CPU
//! `float32` logits: one pass over the row, no unpacked copy of the mask.

/// Mask `logits` (one row of `width` floats) with `words`, in place.
pub fn apply_row(logits: &mut [f32], words: &[u32]) {
    let covered = logits.len().min(32 * words.len());
    let (head, tail) = logits.split_at_mut(covered);
    let mut chunks = head.chunks_exact_mut(32);
    for (&w, chunk) in words.iter().zip(&mut chunks) {
        match w {
            u32::MAX => {}
            0 => chunk.fill(f32::NEG_INFINITY),
            _ => {
                // Whole words of 32 lanes, a select per lane: the loop vectorizes.
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x = if w >> j & 1 == 0 {
                        f32::NEG_INFINITY
                    } else {
                        *x
                    };
                }
            }
        }
    }
    // A last partial word (a row narrower than its mask).
    let rest = chunks.into_remainder();
    if let Some(&w) = words.get(covered / 32) {
        for (j, x) in rest.iter_mut().enumerate() {
            if w >> j & 1 == 0 {
                *x = f32::NEG_INFINITY;
            }
        }
    }
    tail.fill(f32::NEG_INFINITY);
}

/// Mask each of the `rows` rows of `logits` (`rows * width` floats) with its
/// row of `words` (`rows * n_words` words). Preconditions: both slices hold
/// exactly that many items and `width > 0` when `rows > 0`.
pub fn apply_rows(logits: &mut [f32], width: usize, words: &[u32], n_words: usize) {
    for (row, mask) in logits.chunks_mut(width).zip(words.chunks(n_words)) {
        apply_row(row, mask);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(width: usize, words: &[u32]) -> Vec<bool> {
        let mut row: Vec<f32> = (0..width).map(|i| i as f32).collect();
        apply_row(&mut row, words);
        row.iter().map(|x| *x == f32::NEG_INFINITY).collect()
    }

    #[test]
    fn clears_exactly_the_unset_bits() {
        let words = [0b1010_u32, u32::MAX, 0];
        let blocked = masked(96, &words);
        for (i, b) in blocked.iter().enumerate() {
            let admitted = words[i / 32] >> (i % 32) & 1 == 1;
            assert_eq!(*b, !admitted, "column {i}");
        }
    }

    #[test]
    fn columns_past_the_mask_are_blocked_and_short_rows_fit() {
        let blocked = masked(70, &[u32::MAX, u32::MAX]);
        assert!(blocked[..64].iter().all(|b| !b));
        assert!(blocked[64..].iter().all(|b| *b));
        // A row narrower than the mask reads only its own columns.
        assert_eq!(masked(5, &[0b101, 0]), [false, true, false, true, true]);
        // A row that ends inside its last word reads that word's low bits.
        let blocked = masked(40, &[u32::MAX, 0b10]);
        assert!(blocked[..32].iter().all(|b| !b));
        assert_eq!(
            &blocked[32..],
            [true, false, true, true, true, true, true, true]
        );
    }

    #[test]
    fn admitted_values_are_untouched_and_rows_are_independent() {
        let mut logits = vec![f32::NAN, 1.5, -2.0, 7.0];
        apply_rows(&mut logits, 2, &[0b01, 0b10], 1);
        assert!(logits[0].is_nan());
        assert_eq!(&logits[1..], [f32::NEG_INFINITY, f32::NEG_INFINITY, 7.0]);
    }
}
