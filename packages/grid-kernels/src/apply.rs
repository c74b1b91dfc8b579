//! Applying a packed bitmask to a row of logits, in place; and the greedy
//! pick under one, the logits untouched ([`masked_argmax`]).
//!
//! The other end of [`crate::fill`]: a mask over a vocabulary of `n` ids is
//! `ceil(n / 32)` words, bit `i % 32` of word `i / 32` set when token `i` is
//! admitted (grid-core's `Engine.pack`). Every logit whose bit is clear, and
//! every column at or past `32 * words` (the padding of a logits row wider
//! than the vocabulary), becomes negative infinity; admitted logits are left
//! as they are, bit for bit, unless none of them is finite. Such a row (a
//! caller's processor put -inf on every id the mask admits: transformers'
//! `min_new_tokens` against an EOS-only mask, `forced_eos_token_id` against
//! a mask that refuses EOS) would make a sampler's softmax undefined and a
//! greedy pick a refused id, so its admitted logits all become 0.0: the
//! choice is uniform over the mask, as mode 1 chooses when every admitted
//! logit is -inf (grid-core's `Sampling`). A row with a finite admitted logit
//! is left as it is, a NaN or +inf on another admitted id included (a model's
//! fault: greedy then picks that admitted id and a sampler raises, where mode 1
//! reads a non-finite logit as -inf); the mask stays hard.
//! This is grid-serve's `apply_bitmask_` on CPU `float32` logits: one pass
//! over the row, no unpacked copy of the mask, then a look at admitted
//! logits that usually stops at the first.

/// Mask `logits` (one row of `width` floats) with `words`, in place; a row
/// whose admitted logits hold no finite value gets 0.0 on each of them.
pub fn apply_row(logits: &mut [f32], words: &[u32]) {
    block_refused(logits, words);
    if !admits_finite(logits, words) {
        flatten_admitted(logits, words);
    }
}

/// The admitted ids below `width`, in order.
fn admitted(words: &[u32], width: usize) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(move |(at, &w)| {
        let mut bits = w;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let i = 32 * at + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                i
            })
        })
        .take_while(move |&i| i < width)
    })
}

/// Whether some admitted logit is finite.
fn admits_finite(logits: &[f32], words: &[u32]) -> bool {
    admitted(words, logits.len()).any(|i| logits[i].is_finite())
}

/// Every admitted logit becomes 0.0 (nothing when nothing is admitted).
fn flatten_admitted(logits: &mut [f32], words: &[u32]) {
    for i in admitted(words, logits.len()) {
        logits[i] = 0.0;
    }
}

/// Every logit whose bit is clear, and every column past the mask, becomes
/// -inf; admitted logits are untouched.
fn block_refused(logits: &mut [f32], words: &[u32]) {
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

/// The index of the first maximum of `row`, a NaN counting as above every
/// number (numpy's `argmax`: the first NaN when there is one). Precondition:
/// `row` is not empty. Two passes the compiler vectorizes (the maximum and a
/// NaN flag over lanes, then the first chunk holding the maximum), not a
/// branch per logit, with AVX2 where the CPU has it (checked at run time).
pub fn first_argmax(row: &[f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { first_argmax_avx2(row) };
    }
    first_argmax_lanes(row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn first_argmax_avx2(row: &[f32]) -> usize {
    first_argmax_lanes(row)
}

#[inline(always)]
fn first_argmax_lanes(row: &[f32]) -> usize {
    const LANES: usize = 32;
    // The maximum and whether a NaN came, over independent lanes.
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut nans = [0u32; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            let x = chunk[k];
            nans[k] |= u32::from(x.is_nan());
            acc[k] = if x > acc[k] { x } else { acc[k] };
        }
    }
    if nans.iter().any(|&n| n != 0) || rest.iter().any(|x| x.is_nan()) {
        return row.iter().position(|x| x.is_nan()).unwrap_or(0);
    }
    let mut max = acc
        .iter()
        .fold(f32::NEG_INFINITY, |m, &a| if a > m { a } else { m });
    for &x in rest {
        if x > max {
            max = x;
        }
    }
    // The first logit equal to the maximum is numpy's first maximum (-0.0 == 0.0).
    for (k, chunk) in row.chunks(4 * LANES).enumerate() {
        if chunk.iter().fold(false, |found, &x| found | (x == max)) {
            let at = chunk.iter().position(|&x| x == max).unwrap_or(0);
            return k * 4 * LANES + at;
        }
    }
    0
}

/// The exit intent of one row (grid-serve's `GridLogitsProcessor` with
/// `stop_on_exit`): when `words` admits `eos` and refuses the row's own top
/// token (its [`first_argmax`], before masking), `words` becomes `eos_row`.
/// Returns whether it did. Columns at or past `32 * words.len()` are refused.
pub fn exit_intent(logits: &[f32], words: &mut [u32], eos: usize, eos_row: &[u32]) -> bool {
    let admits =
        |words: &[u32], i: usize| words.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 == 1);
    if logits.is_empty() || !admits(words, eos) || admits(words, first_argmax(logits)) {
        return false;
    }
    words.copy_from_slice(eos_row);
    true
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

    #[test]
    fn first_argmax_is_numpys() {
        assert_eq!(first_argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(first_argmax(&[1.0, f32::NAN, 9.0, f32::NAN]), 1);
        assert_eq!(first_argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(first_argmax(&[-1.0, f32::INFINITY, f32::INFINITY]), 1);
        assert_eq!(first_argmax(&[-0.0, 0.0]), 0);
        // Rows of few distinct values (ties everywhere), -inf and NaN among
        // them, against the plain scan, at every length up to 100.
        let naive = |row: &[f32]| {
            let mut best = 0;
            for (i, &x) in row.iter().enumerate() {
                if x.is_nan() {
                    return i;
                }
                if x > row[best] {
                    best = i;
                }
            }
            best
        };
        let values = [f32::NEG_INFINITY, -1.0, -0.0, 0.0, 2.0, 2.0, 3.0];
        let mut seed = 12345u64;
        for n in 1..=100 {
            for _ in 0..20 {
                let row: Vec<f32> = (0..n)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let pick = (seed >> 33) as usize % 64;
                        // a NaN for about one logit in 64, else one of 7 values
                        if pick == 0 {
                            f32::NAN
                        } else {
                            values[pick % 7]
                        }
                    })
                    .collect();
                assert_eq!(first_argmax(&row), naive(&row), "{row:?}");
            }
        }
        // Past the vectorized lanes and chunks: every position of a long row.
        for n in [1, 15, 16, 17, 63, 64, 65, 200] {
            for at in 0..n {
                let mut row: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 10.0).collect();
                row[at] = 1.0;
                assert_eq!(first_argmax(&row), at, "max at {at} of {n}");
                row[n - 1 - (n - 1 - at) / 2] = f32::NAN;
                let nan_at = n - 1 - (n - 1 - at) / 2;
                assert_eq!(first_argmax(&row), nan_at, "NaN at {nan_at} of {n}");
            }
        }
    }

    #[test]
    fn exit_intent_takes_eos_only_when_the_top_token_is_refused() {
        let eos_row = [0b100_u32, 0];
        let logits = [0.0, 5.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        // EOS (2) admitted, the top token (1) refused: EOS only.
        let mut words = [0b101_u32, 0];
        assert!(exit_intent(&logits, &mut words, 2, &eos_row));
        assert_eq!(words, eos_row);
        // The top token admitted: the mask stays.
        let mut words = [0b110_u32, 0];
        assert!(!exit_intent(&logits, &mut words, 2, &eos_row));
        assert_eq!(words, [0b110, 0]);
        // EOS refused: the mask stays, whatever the top token.
        let mut words = [0b001_u32, 0];
        assert!(!exit_intent(&logits, &mut words, 2, &eos_row));
        assert_eq!(words, [0b001, 0]);
    }

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
    fn a_row_with_no_finite_admitted_logit_is_uniform_over_its_mask() {
        let inf = f32::INFINITY;
        // Every admitted logit -inf, +inf or NaN: each becomes 0.0, the rest -inf.
        for admitted in [[-inf, -inf], [inf, -inf], [f32::NAN, -inf], [inf, f32::NAN]] {
            let mut row = vec![1.0, admitted[0], 2.0, admitted[1], 3.0];
            apply_row(&mut row, &[0b01010]);
            assert_eq!(row, [-inf, 0.0, -inf, 0.0, -inf], "{admitted:?}");
        }
        // One finite admitted logit: the row is masked as always, bit for bit.
        let mut row = vec![1.0, -inf, 2.0, 5.0, 3.0];
        apply_row(&mut row, &[0b01010]);
        assert_eq!(row, [-inf, -inf, -inf, 5.0, -inf]);
        let mut row = vec![1.0, inf, f32::NAN, -inf, 3.0];
        apply_row(&mut row, &[0b10110]);
        assert!(row[1] == inf && row[2].is_nan() && row[4] == 3.0);
        // Nothing admitted inside the row: all -inf, nothing to be uniform over.
        let mut row = vec![1.0, 2.0];
        apply_row(&mut row, &[0b100]);
        assert_eq!(row, [-inf, -inf]);
        // Admitted only past a full word, the first admitted finite far in.
        let mut row: Vec<f32> = vec![-inf; 70];
        row[69] = 4.0;
        apply_row(&mut row, &[0, 1 << 3, 1 << 5 | 1 << 6]);
        assert_eq!((row[35], row[69], row[70 - 2]), (-inf, 4.0, -inf));
        let mut row: Vec<f32> = vec![-inf; 70];
        apply_row(&mut row, &[0, 1 << 3, 1 << 5 | 1 << 6]);
        let zeros: Vec<usize> = (0..70).filter(|&i| row[i] == 0.0).collect();
        assert_eq!(
            zeros,
            [35, 69],
            "bit 6 of word 2 is column 70, past the row"
        );
    }

    #[test]
    fn admitted_values_are_untouched_and_rows_are_independent() {
        let mut logits = vec![f32::NAN, 1.5, -2.0, 7.0];
        apply_rows(&mut logits, 2, &[0b11, 0b10], 1);
        assert!(logits[0].is_nan());
        assert_eq!(&logits[1..], [1.5, f32::NEG_INFINITY, 7.0]);
    }
}
