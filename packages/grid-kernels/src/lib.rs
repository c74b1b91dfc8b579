//! GRID kernels: the hot path of grid-core, in Rust, bit-identical to its
//! pure-Python reference.
//!
//! The algorithmic core is free of pyo3; `python.rs` (feature `python`) is the
//! only binding layer and only converts types and errors. One module per stage,
//! each mirroring the grid-core module named in its header:
//!
//! | module      | stage                                              | grid-core            |
//! |-------------|----------------------------------------------------|----------------------|
//! | [`bits`]    | fixed-width terminal bitsets (T may exceed 64)     | Python-int bitsets   |
//! | [`nfa`]     | a pattern's Thompson NFA, trimmed                  | regex_bytes          |
//! | [`dfa`]     | the minimal union DFA of the terminal NFAs         | dfa.union_of_nfas    |
//! | [`tables`]  | validated grammar tables: DFA, LALR, lexicon       | dfa, lalr, lexicon   |
//! | [`trie`]    | the packed token trie, alias classes, EOS ids      | trie                 |
//! | [`scanner`] | scan state, step, live, pick, rescan               | lexer.Scanner, walk.rescan |
//! | [`lalr`]    | LALR(1) table construction (DeRemer-Pennello)     | lalr.build_lalr      |
//! | [`parser`]  | interned stack arena, allowed sets, shift          | parser               |
//! | [`lexer`]   | advance, finalize, the EOS gate                    | lexer.Lexer          |
//! | [`walk`]    | the trie walk: CI nodes and CD entries             | walk.walk_from       |
//! | [`chunks`]  | the subtree memo: walks keyed by what they read of A | (kernels only)     |
//! | [`mask`]    | CD verdict classes + EOS: the whole mask           | guide.Engine.compute_mask |
//! | [`fill`]    | alias expansion into a packed int32 bitmask        | guide.Engine.pack    |
//! | [`apply`]   | a packed bitmask applied to float32 logits; the greedy pick under one | (grid-serve's apply_bitmask_, masked_argmax) |
//! | [`canonical`] | grid-core's canonical encoding (entry ids)       | fingerprint.canonical |
//! | [`hash`]    | BLAKE2b (run-time SIMD), the one hash of identities | hashlib.blake2b    |
//! | [`cache`]   | cached walks: payloads, verdict classes, entry ids | cache                |
//! | [`lru`]     | byte-capped memo maps, least recently used evicted | (kernels only)       |
//! | [`engine`]  | tables + walk cache + shared stack arena           | guide.Engine         |
//! | [`remote`]  | the family's walk cache shared on Redis (checked)  | (kernels only)       |
//! | [`resp`]    | a minimal Redis client: URL, one RESP2 connection  | (kernels only)       |
//! | [`session`] | one request's accept and fill, rollback, fork      | guide.GridGuide      |
//! | [`events`]  | the session's parse event stream                   | events.EventTracker  |
//! | [`scope`]   | grid-sql's column scope: a statement's tables, the words it admits | (grid-sql) column_scope.ScopedEngines |
//! | [`scoped`]  | the scoped session: lexicons switched by the scope  | (grid-sql) column_scope.ScopedGuide |
//! | [`scoped_reserve`] | mode 1's reserve, simulated through the scoped lexer | (grid-sql) column_scope.ScopedReserve |
//! | [`audit`]   | the session's record chain                         | audit                |
//!
//! Tables are built once and shared read-only (`Arc`); walks allocate their own
//! scratch, so any number of threads may walk one table set at once. A cold
//! root walk is shared out over a rayon pool, bit-identical to one thread.

pub mod apply;
pub mod audit;
pub mod bits;
pub mod cache;
pub mod canonical;
pub mod chunks;
pub mod dfa;
pub mod engine;
pub mod error;
pub mod events;
pub mod fill;
pub mod hash;
pub mod lalr;
pub mod lexer;
pub mod lru;
pub mod mask;
pub mod nfa;
pub mod parser;
pub mod remote;
pub mod reserve;
pub mod resp;
pub mod scanner;
pub mod scope;
pub mod scoped;
pub mod scoped_reserve;
pub mod session;
pub mod tables;
pub mod trie;
pub mod walk;

#[cfg(feature = "python")]
mod python;

pub use engine::{Engine, Threads};
pub use error::{KernelError, Result};
pub use mask::{EngineTables, MaskOutput};
pub use session::{Filled, Session};
pub use tables::{GrammarTables, Lexing, RawGrammar};
pub use trie::{RawTrie, Trie, TrieNode};
pub use walk::{CdEntry, WalkOutput};

/// Version of the table and buffer layout shared with `grid_core`, and of
/// what the calls promise (12: `EngineTables.reserve` takes the bare pieces of
/// the abutting finish options); a module reporting
/// another version is refused rather than used.
pub const ABI_VERSION: u32 = 12;

/// Whether the named planted fault is on: with feature `planted-faults`, when
/// `GRID_PLANTED_FAULT` names it (grid-core's `tests/test_planted_faults.py`);
/// in every other build a constant `false` that compiles away.
#[cfg(feature = "planted-faults")]
pub fn planted(name: &str) -> bool {
    std::env::var("GRID_PLANTED_FAULT").is_ok_and(|v| v == name)
}

/// Whether the named planted fault is on: never, without `planted-faults`.
#[cfg(not(feature = "planted-faults"))]
#[inline(always)]
pub fn planted(_name: &str) -> bool {
    false
}

/// Bytes as Python would print them (`b'..'` with escapes), for messages.
pub(crate) fn escape_bytes(data: &[u8]) -> String {
    // Python quotes with `"` when the bytes hold `'` and no `"`, else with `'`.
    let quote = if data.contains(&b'\'') && !data.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut s = format!("b{}", quote as char);
    for &b in data {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\'' if quote == b'\'' => s.push_str("\\'"), // (no `"` in data when quoted so)
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push(quote as char);
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_escape_like_python() {
        assert_eq!(super::escape_bytes(b"a'\\\n\xff"), "b\"a'\\\\\\n\\xff\"");
        assert_eq!(super::escape_bytes(b"a'\""), "b'a\\'\"'");
        assert_eq!(super::escape_bytes(b"a\"b"), "b'a\"b'");
        assert_eq!(super::escape_bytes(b"')"), "b\"')\"");
    }
}
