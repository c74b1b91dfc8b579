//! The one error type of the core. The binding layer maps it to Python
//! exceptions in one place (`python.rs`, `to_pyerr`).
//!
//! Grades (house style): input from the caller (tables, stacks, remainders,
//! node ids) is checked and reported as a [`KernelError`]; internal invariants
//! that validated tables guarantee are `assert!`s; checks only worth their cost
//! while debugging are `debug_assert!`s.

use std::fmt;

/// The detail of an empty mask, word for word `grid_core.errors.EMPTY_MASK`:
/// a bug with grid-sql's dialects; with a user grammar, lexemes that run
/// together so that a prefix the scan accepts has no completion.
pub const EMPTY_MASK: &str = "empty mask at a viable prefix: no continuation completes it \
    (a user grammar whose lexemes run together under maximal munch, see docs/lark.md; \
    otherwise a bug)";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// The artifacts handed to a table constructor break their contract.
    InvalidTables { table: &'static str, detail: String },
    /// A stack (LALR states, bottom first) is empty, out of range or unreachable.
    InvalidStack { detail: String },
    /// A remainder the automaton dies on: it is no lexeme in progress.
    InvalidRemainder { remainder: Vec<u8> },
    /// A trie node id outside `0..n_nodes`.
    NodeOutOfRange { node: i64, n_nodes: usize },
    /// A token id outside `0..n_vocab`.
    TokenOutOfRange { token: i64, n_vocab: usize },
    /// A terminal id outside `0..n_terminals`, or one the stack cannot shift.
    InvalidTerminal { terminal: i64, detail: String },
    /// An allowed set with a bit past `$END`.
    InvalidAllowed { bit_len: usize, n_bits: usize },
    /// A session driven against its contract (`grid_core.errors.GuideError`):
    /// a token outside the vocabulary or the mask, EOS too early, a step after
    /// EOS, a rollback past the start. `step` counts the tokens accepted.
    Guide {
        step: usize,
        token: Option<i64>,
        reason: String,
    },
    /// An empty mask at a viable prefix (`grid_core.errors.MaskError`, detail
    /// [`EMPTY_MASK`]): reported, never written.
    EmptyMask { step: usize },
    /// An output buffer of the wrong size.
    BufferSize {
        expected: usize,
        got: usize,
        unit: &'static str,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidTables { table, detail } => write!(f, "invalid {table} table: {detail}"),
            Self::InvalidStack { detail } => write!(f, "invalid stack: {detail}"),
            Self::InvalidRemainder { remainder } => write!(
                f,
                "invalid remainder {}: the automaton dies inside it",
                crate::escape_bytes(remainder)
            ),
            Self::NodeOutOfRange { node, n_nodes } => {
                write!(f, "trie node {node} is out of range 0..{n_nodes}")
            }
            Self::TokenOutOfRange { token, n_vocab } => {
                write!(f, "token id {token} is out of range 0..{n_vocab}")
            }
            Self::InvalidTerminal { terminal, detail } => {
                write!(f, "terminal {terminal}: {detail}")
            }
            Self::InvalidAllowed { bit_len, n_bits } => write!(
                f,
                "allowed set has bit {} set but only {n_bits} bits (terminals and $END) exist",
                bit_len - 1
            ),
            Self::Guide {
                step,
                token: Some(token),
                reason,
            } => write!(f, "step {step}, token {token}: {reason}"),
            Self::Guide {
                step,
                token: None,
                reason,
            } => write!(f, "step {step}: {reason}"),
            Self::EmptyMask { step } => write!(f, "step {step}: {EMPTY_MASK}"),
            Self::BufferSize {
                expected,
                got,
                unit,
            } => write!(
                f,
                "bitmask buffer has {got} {unit}, expected {expected} {unit}"
            ),
        }
    }
}

impl std::error::Error for KernelError {}

impl KernelError {
    /// A session driven against its contract at `step` (see [`KernelError::Guide`]).
    pub(crate) fn guide(step: usize, token: Option<i64>, reason: impl Into<String>) -> Self {
        Self::Guide {
            step,
            token,
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, KernelError>;

pub(crate) fn bad_table(table: &'static str, detail: impl Into<String>) -> KernelError {
    KernelError::InvalidTables {
        table,
        detail: detail.into(),
    }
}
