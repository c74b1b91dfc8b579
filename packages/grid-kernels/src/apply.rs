//! Applying a packed bitmask to a row of logits, in place; and the greedy
//! pick under one, the logits untouched ([`masked_argmax`]).
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

/// Greedy choice under a mask, without masking: the admitted column of the
/// highest logit, the lowest among ties, NaN never chosen; None when no
/// admitted logit is finite (the best is -inf or +inf, or nothing is
/// admitted). Columns at or past `32 * words` are not admitted; bits past
/// the row are ignored. grid-serve's `masked_argmax` on CPU float32 logits,
/// decision for decision its torch path (unpack, `masked_fill` of the blocked
/// and NaN columns with -inf, first maximum, finite check), over the admitted
/// ids only.
pub fn masked_argmax(logits: &[f32], words: &[u32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (at, &w) in words.iter().enumerate() {
        let mut bits = w;
        while bits != 0 {
            let i = 32 * at + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let Some(&x) = logits.get(i) else {
                return best.filter(|b| b.1.is_finite()).map(|b| b.0);
            };
            if !x.is_nan() && best.is_none_or(|b| x > b.1) {
                best = Some((i, x));
            }
        }
    }
    best.filter(|b| b.1.is_finite()).map(|b| b.0)
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
    fn masked_argmax_takes_the_first_best_admitted_finite_logit() {
        let logits = [9.0, 1.0, 3.0, 3.0, f32::NAN, 2.0];
        assert_eq!(
            masked_argmax(&logits, &[0b11_1110]),
            Some(2),
            "ties: lowest id"
        );
        assert_eq!(masked_argmax(&logits, &[0b01_0000]), None, "NaN only");
        assert_eq!(masked_argmax(&logits, &[0]), None, "nothing admitted");
        assert_eq!(masked_argmax(&logits, &[0b1]), Some(0));
        assert_eq!(masked_argmax(&logits, &[1 << 31]), None, "past the row");
        let inf = [f32::NEG_INFINITY, f32::INFINITY, 1.0];
        assert_eq!(masked_argmax(&inf, &[0b001]), None, "-inf is not finite");
        assert_eq!(
            masked_argmax(&inf, &[0b111]),
            None,
            "+inf is the best, not finite"
        );
        assert_eq!(masked_argmax(&inf, &[0b101]), Some(2));
        let wide: Vec<f32> = (0..70).map(|i| i as f32).collect();
        assert_eq!(
            masked_argmax(&wide, &[u32::MAX, 1]),
            Some(32),
            "no column past the mask"
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
