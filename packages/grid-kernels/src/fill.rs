//! The packed bitmask: CI ids + CD ids + EOS ids into caller-provided words.
//!
//! Layout (`grid_core.guide.Engine.pack`): `ceil(n_vocab / 32)` 32-bit words,
//! bit `i % 32` of word `i / 32` is token `i`. A trie node stands for its whole
//! alias class (DESIGN.md section 2: masks are over ids, never spellings).
//! Every check (buffer size, id range) happens before the first write.

use crate::error::{KernelError, Result};
use crate::mask::{EngineTables, MaskOutput};

impl EngineTables {
    fn check_words(&self, words: &[u32]) -> Result<()> {
        let expected = self.trie.n_words();
        if words.len() != expected {
            return Err(KernelError::BufferSize {
                expected,
                got: words.len(),
                unit: "32-bit words",
            });
        }
        Ok(())
    }

    fn set_eos(&self, words: &mut [u32]) {
        for &id in self.trie.eos_ids() {
            words[id as usize / 32] |= 1 << (id % 32);
        }
    }

    /// Write the given token ids (and the EOS ids when `eos`) into `words`,
    /// clearing every other bit. Returns the number of ids set.
    pub fn fill_ids(&self, ids: &[&[u32]], eos: bool, words: &mut [u32]) -> Result<usize> {
        self.check_words(words)?;
        let n_vocab = self.trie.n_vocab();
        if let Some(&bad) = ids
            .iter()
            .flat_map(|s| s.iter())
            .find(|&&i| i as usize >= n_vocab)
        {
            return Err(KernelError::TokenOutOfRange {
                token: i64::from(bad),
                n_vocab,
            });
        }
        words.fill(0);
        for &id in ids.iter().flat_map(|s| s.iter()) {
            words[id as usize / 32] |= 1 << (id % 32);
        }
        if eos {
            self.set_eos(words);
        }
        Ok(words.iter().map(|w| w.count_ones() as usize).sum())
    }

    /// Write a computed mask (every alias of its CI and CD nodes, EOS when
    /// legal) into `words`, clearing every other bit. Returns the ids set.
    pub fn fill_mask(&self, mask: &MaskOutput, words: &mut [u32]) -> Result<usize> {
        self.check_words(words)?;
        words.fill(0);
        for &n in mask.ci_nodes.iter().chain(&mask.cd_nodes) {
            for &id in self.trie.ids_at(n as usize) {
                words[id as usize / 32] |= 1 << (id % 32);
            }
        }
        if mask.eos {
            self.set_eos(words);
        }
        Ok(words.iter().map(|w| w.count_ones() as usize).sum())
    }
}
