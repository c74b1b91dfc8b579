//! The only pyo3 code: converts Python objects to the core's types and the
//! core's [`KernelError`] to Python exceptions (in one place: [`to_pyerr`]),
//! and releases the GIL around every walk. No algorithm lives here.
//!
//! Conversions:
//! - flat int tables: any object with the buffer protocol (`array('i')`,
//!   `array('B')`) is copied in one go; any other sequence of ints item by item;
//! - terminal bitsets: Python ints <-> fixed-width words (`int.to_bytes` /
//!   `int.from_bytes`, little-endian);
//! - stacks: sequences of LALR states, bottom first;
//! - bitmask outputs: a writable, C-contiguous buffer of 4-byte ints (format
//!   `i`/`I`, native order) or of raw bytes (`bytearray`), sized to the
//!   vocabulary. Anything else raises before a byte is written;
//! - a session's bitmask: a writable, C-contiguous, 4-byte-aligned buffer of
//!   int32 (numpy `int32`, `array('i')`) shaped `(n_words,)` or `(batch,
//!   n_words)`, and a row; the row is written in place, nothing else is;
//! - logits ([`Logits::of`]): a C-contiguous float32 buffer, or a CPU float32
//!   contiguous `torch.Tensor` read through its `data_ptr()` with the GIL held
//!   (no numpy view: about 20 us cold after a CPU forward pass).
//!
//! Errors: caller mistakes are `ValueError` (bad values, sizes, ids, stacks)
//! or `TypeError` (wrong kinds of object, read-only or wrongly typed buffers);
//! a session driven against its contract raises `SessionError` (a
//! `ValueError`) carrying `step`, `token`, `reason` and `kind` (`"guide"`, or
//! `"mask"` for an empty mask). grid-kernels sits below grid-core, so it
//! cannot raise grid-core's `GridError` classes; grid-core wraps these where
//! it calls in.

use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyTuple};

use crate::audit::{self, Kind};
use crate::bits;
use crate::engine::{lock, Engine, Stacks, Threads};
use crate::error::{KernelError, EMPTY_MASK};
use crate::events::EventTables;
use crate::lexer::Config;
use crate::mask::EngineTables;
use crate::reserve::{RawReserve, Reserve};
use crate::scope::{ScopeSpec, TableSpec, Terms};
use crate::scoped::{ReserveProvider, ScopedEngines, ScopedSession};
use crate::scoped_reserve::{ScopedReserve, ScopedState};
use crate::session::{Filled, Session};
use crate::tables::{GrammarTables, Lalr, Lexicon, Lexing, RawGrammar};
use crate::trie::{RawTrie, Trie};

create_exception!(
    _native,
    LogitsError,
    PyTypeError,
    "Logits the kernels do not read (another device, dtype or layout; a tensor that needs grad): the caller may mask them with its framework instead."
);

create_exception!(
    _native,
    SessionError,
    PyValueError,
    "A session driven against its contract (attributes step, token, reason, kind)."
);

/// The one mapping from core errors to Python exceptions.
fn to_pyerr(e: KernelError) -> PyErr {
    let (step, token, reason, kind) = match &e {
        KernelError::Guide {
            step,
            token,
            reason,
        } => (*step, *token, reason.clone(), "guide"),
        KernelError::EmptyMask { step } => (*step, None, EMPTY_MASK.into(), "mask"),
        _ => return PyValueError::new_err(e.to_string()),
    };
    Python::with_gil(|py| {
        let err = SessionError::new_err(e.to_string());
        let value = err.value(py);
        let set = || -> PyResult<()> {
            value.setattr("step", step)?;
            value.setattr("token", token)?;
            value.setattr("reason", reason)?;
            value.setattr("kind", kind)
        };
        set().map(|()| err).unwrap_or_else(|e| e)
    })
}

/// The token ids set in a packed bitmask row, ascending.
fn row_ids(row: &[u32]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (i, &w) in row.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            ids.push(32 * i as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    ids
}

/// A chain's records as `grid_core.audit.AuditLog.lines()` writes them,
/// joined by `\n`, and its head hash (hex).
fn chain_lines<'py>(py: Python<'py>, chain: &mut audit::Chain) -> (Bound<'py, PyBytes>, String) {
    let lines = chain.lines();
    let head = chain
        .hashes()
        .last()
        .copied()
        .unwrap_or_else(audit::genesis);
    (PyBytes::new(py, &lines), audit::hex(&head))
}

// ------------------------------------------------------------------ conversions

/// A Python int as an `i64`, saturated: an int beyond `i64` stands for its
/// bound. A token id, row, count or index that large is refused by the range
/// checks as Python's guide refuses it (`GuideError`, `ValueError`), not with
/// an `OverflowError` from the conversion.
#[derive(Clone, Copy)]
struct Wide(i64);

impl<'py> FromPyObject<'py> for Wide {
    fn extract_bound(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i64>() {
            Ok(v) => Ok(Wide(v)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) => {
                Ok(Wide(if obj.gt(0)? { i64::MAX } else { i64::MIN }))
            }
            Err(e) => Err(e),
        }
    }
}

/// The audit kind given to an `accept_token`: sampled, forced or reserve,
/// else the Python guide's `ValueError` message, word for word (the value as
/// `json.dumps` writes it), raised after the token's conversion and before
/// any other check. Extracting never fails.
struct AuditKind(Result<Kind, PyErr>);

impl AuditKind {
    const SAMPLED: Self = Self(Ok(Kind::Sampled));
}

impl<'py> FromPyObject<'py> for AuditKind {
    fn extract_bound(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Some(k) = obj
            .extract::<&str>()
            .ok()
            .and_then(Kind::parse)
            .filter(|k| *k != Kind::Eos)
        {
            return Ok(Self(Ok(k)));
        }
        let shown = obj
            .py()
            .import("json")
            .and_then(|json| json.getattr("dumps"))
            .and_then(|dumps| dumps.call1((obj,)))
            .and_then(|shown| shown.extract::<String>());
        Ok(Self(Err(match shown {
            Ok(shown) => PyValueError::new_err(format!(
                "an audit kind is 'sampled', 'forced' or 'reserve', not {shown}"
            )),
            Err(e) => e,
        })))
    }
}

/// `e` with the token the caller gave: a refused token beyond 64 bits is
/// reported as given (`operator.index(token)`), not as the clamped [`Wide`].
fn with_token(e: KernelError, token: &Bound<'_, PyAny>) -> PyErr {
    let err = to_pyerr(e);
    let py = token.py();
    if err.is_instance_of::<SessionError>(py) && token.extract::<i64>().is_err() {
        let value = err.value(py);
        let given = py
            .import("operator")
            .and_then(|m| m.getattr("index"))
            .and_then(|index| index.call1((token,)));
        if let Ok(given) = given {
            if value.getattr("token").is_ok_and(|t| !t.is_none())
                && value.setattr("token", given).is_err()
            {
                return err;
            }
        }
    }
    err
}

/// Whether an export's items are in this machine's byte order. pyo3 matches a
/// format's item code and size, not its byte-order prefix: a numpy `>i4`
/// array exports as an `i32` buffer whose words read swapped.
fn native_order<T: pyo3::buffer::Element>(buf: &PyBuffer<T>) -> bool {
    let foreign: &[u8] = if cfg!(target_endian = "little") {
        b">!"
    } else {
        b"<"
    };
    !buf.format()
        .to_bytes()
        .first()
        .is_some_and(|c| foreign.contains(c))
}

/// An export of `obj` as items of `T` in this machine's byte order, if it has one.
fn native_buffer<T: Code>(obj: &Bound<'_, PyAny>) -> Option<PyBuffer<T>> {
    PyBuffer::<T>::get(obj)
        .ok()
        .or_else(|| explicit_order(obj, T::CODE))
        .filter(native_order)
}

/// The items a buffer export is read as, with their one-letter struct code.
trait Code: pyo3::buffer::Element {
    const CODE: &'static str;
}

impl Code for i32 {
    const CODE: &'static str = "i";
}

impl Code for f32 {
    const CODE: &'static str = "f";
}

/// An export of `obj`, whose items' format names this machine's own byte
/// order explicitly (`'<i'` on a little-endian machine, as a ctypes array of
/// c_int32 exports), as items of `T`: pyo3 refuses that format, so it is read
/// through a memoryview cast to the plain `code` (the same memory, shape and
/// writability). None for any other buffer, or one a cast refuses (not
/// C-contiguous).
fn explicit_order<T: pyo3::buffer::Element>(
    obj: &Bound<'_, PyAny>,
    code: &str,
) -> Option<PyBuffer<T>> {
    let own = if cfg!(target_endian = "little") {
        "<"
    } else {
        ">"
    };
    let py = obj.py();
    let view = py
        .import("builtins")
        .ok()?
        .getattr("memoryview")
        .ok()?
        .call1((obj,))
        .ok()?;
    let format: String = view.getattr("format").ok()?.extract().ok()?;
    if format != format!("{own}{code}") {
        let _ = view.call_method0("release");
        return None;
    }
    let shape = view.getattr("shape").ok()?;
    let cast = view
        .call_method1("cast", ("B",))
        .and_then(|bytes| bytes.call_method1("cast", (code, shape)))
        .ok()?;
    PyBuffer::<T>::get(&cast).ok()
}

/// A flat table of ints: buffer fast path, else a sequence of ints.
fn int_table(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    let py = obj.py();
    if let Some(buf) = native_buffer::<i32>(obj) {
        return Ok(buf.to_vec(py)?.into_iter().map(i64::from).collect());
    }
    if let Ok(buf) = PyBuffer::<u8>::get(obj) {
        return Ok(buf.to_vec(py)?.into_iter().map(i64::from).collect());
    }
    obj.extract::<Vec<i64>>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a sequence of ints")))
}

/// A table of ints as `Vec<T>`: an `int32` buffer (`array('i')`, numpy) read
/// as it is (a table of the union DFA or the LALR(1) tables runs to millions
/// of entries), else as [`int_table`] reads it; a value out of `T`'s range is
/// an error naming its index.
fn ints<T: TryFrom<i64> + TryFrom<i32>>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<T>> {
    if let Some(buf) = native_buffer::<i32>(obj) {
        return buf
            .to_vec(obj.py())?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                T::try_from(v).map_err(|_| {
                    PyValueError::new_err(format!("{what}[{i}] = {v} is out of range"))
                })
            })
            .collect();
    }
    narrow(int_table(obj, what)?, what)
}

fn narrow<T: TryFrom<i64>>(values: Vec<i64>, what: &str) -> PyResult<Vec<T>> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            T::try_from(v)
                .map_err(|_| PyValueError::new_err(format!("{what}[{i}] = {v} is out of range")))
        })
        .collect()
}

/// An int bitset (bit i of the little-endian words) as a Python int.
fn words_to_int<'py>(py: Python<'py>, words: &[u64]) -> PyResult<Bound<'py, PyAny>> {
    let bytes = PyBytes::new(py, &bits::to_le_bytes(words));
    py.get_type::<PyInt>()
        .call_method1("from_bytes", (bytes, "little"))
}

/// A non-negative Python int as `width` little-endian words.
fn int_to_words(obj: &Bound<'_, PyAny>, width: usize, what: &str) -> PyResult<Vec<u64>> {
    bitset_words(obj, width).ok_or_else(|| not_a_bitset(obj, width, what))
}

/// The little-endian words of a non-negative int of at most `64 * width` bits;
/// None for anything else. Tables hold thousands of bitsets, so this is a fast
/// path: an int below 2^128 (most: a lexicon's over SQLite's 143 symbols stop at
/// bit 118) is read by C calls alone, any other by one Python call (`to_bytes`
/// refuses a negative or a wider int).
fn bitset_words(obj: &Bound<'_, PyAny>, width: usize) -> Option<Vec<u64>> {
    let int = obj.downcast::<PyInt>().ok()?;
    if let Ok(v) = int.extract::<u128>() {
        let (lo, hi) = (v as u64, (v >> 64) as u64);
        let mut words = vec![0u64; width];
        match width {
            0 if v != 0 => return None,
            0 => {}
            1 if hi != 0 => return None,
            1 => words[0] = lo,
            _ => (words[0], words[1]) = (lo, hi),
        }
        return Some(words);
    }
    let bytes = int.call_method1("to_bytes", (8 * width, "little")).ok()?;
    bits::from_le_bytes(bytes.downcast::<PyBytes>().ok()?.as_bytes(), width)
}

/// Why `obj` is no bitset of `width` words (after [`bitset_words`] refused it).
fn not_a_bitset(obj: &Bound<'_, PyAny>, width: usize, what: &str) -> PyErr {
    let Ok(int) = obj.downcast::<PyInt>() else {
        return PyTypeError::new_err(format!("{what} must be an int bitset"));
    };
    if int.lt(0).unwrap_or(false) {
        return PyValueError::new_err(format!("{what} is a negative bitset"));
    }
    let n_bits: usize = int
        .call_method0("bit_length")
        .and_then(|n| n.extract())
        .unwrap_or(0);
    PyValueError::new_err(format!(
        "{what} has bit {} set; this grammar's sets have {} bits",
        n_bits.saturating_sub(1),
        64 * width
    ))
}

fn int_sets(obj: &Bound<'_, PyAny>, width: usize, what: &str) -> PyResult<Vec<Vec<u64>>> {
    obj.try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a sequence of int bitsets")))?
        .enumerate()
        .map(|(i, x)| {
            let x = x?;
            bitset_words(&x, width).ok_or_else(|| not_a_bitset(&x, width, &format!("{what}[{i}]")))
        })
        .collect()
}

/// A lexicon's words, `(terminal id, its words as bytes)` pairs, read by C calls
/// (each word's buffer copied whole, not byte by byte).
fn lexicon_words_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(usize, Vec<Vec<u8>>)>> {
    let bad = || PyTypeError::new_err("lexicon_words must be (terminal id, [bytes, ...]) pairs");
    let mut out = Vec::new();
    for pair in obj.try_iter().map_err(|_| bad())? {
        let (t, ws): (usize, Bound<'_, PyAny>) = pair?.extract().map_err(|_| bad())?;
        let mut words = Vec::new();
        for w in ws.try_iter().map_err(|_| bad())? {
            let w = w?;
            words.push(
                w.downcast::<PyBytes>()
                    .map_err(|_| bad())?
                    .as_bytes()
                    .to_vec(),
            );
        }
        out.push((t, words));
    }
    Ok(out)
}

/// A caller's int32 bitmask of rows of `n_words` (named in its errors),
/// exported and checked: writable, C-contiguous, 4-byte aligned. The success
/// path reads nothing of the object but its buffer (a fill runs with the
/// caches cold, where each Python lookup costs about a microsecond): the
/// type's name is looked up for an error only.
fn bitmask_export(obj: &Bound<'_, PyAny>, n_words: usize) -> PyResult<PyBuffer<i32>> {
    let kind = || type_name(obj);
    let got = PyBuffer::<i32>::get(obj).ok();
    let Some(buf) = got.or_else(|| explicit_order(obj, "i")) else {
        let kind = kind();
        let items = obj
            .py()
            .import("builtins")?
            .getattr("memoryview")?
            .call1((obj,))
            .and_then(|v| {
                let format: String = v.getattr("format")?.extract()?;
                let itemsize: usize = v.getattr("itemsize")?.extract()?;
                v.call_method0("release")?;
                Ok((format, itemsize))
            })
            .ok();
        return Err(match items {
            // An int32 buffer pyo3 will not export: empty (no data pointer) or misaligned.
            Some((format, 4)) if matches!(format.as_str(), "i" | "l" | "=i" | "<i" | "@i") => {
                PyValueError::new_err(format!(
                    "the bitmask buffer ({kind}) is empty or not 4-byte aligned; expected \
                     {n_words} 32-bit words per row"
                ))
            }
            _ => PyTypeError::new_err(format!(
                "the bitmask must be a buffer of int32 (numpy int32 array, array('i')), \
                 not {kind}{}",
                items
                    .map(|(format, itemsize)| format!(
                        " (its items are {itemsize}-byte '{format}')"
                    ))
                    .unwrap_or_default()
            )),
        });
    };
    if !native_order(&buf) {
        return Err(PyTypeError::new_err(format!(
            "the bitmask must be int32 in this machine's byte order, not items of format {:?}",
            buf.format().to_string_lossy()
        )));
    }
    if buf.readonly() {
        return Err(PyTypeError::new_err(format!(
            "the bitmask buffer ({}) is read-only",
            kind()
        )));
    }
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "the bitmask buffer must be C-contiguous",
        ));
    }
    if !(buf.buf_ptr() as usize).is_multiple_of(std::mem::align_of::<u32>()) {
        return Err(PyValueError::new_err(
            "the bitmask buffer is not 4-byte aligned",
        ));
    }
    Ok(buf)
}

/// The first item of row `row` of an exported bitmask ([`bitmask_export`])
/// shaped `(n_words,)` or `(batch, n_words)`.
fn bitmask_row(buf: &PyBuffer<i32>, row: i64, n_words: usize) -> PyResult<usize> {
    let (rows, width) = match *buf.shape() {
        [w] => (1, w),
        [r, w] => (r, w),
        ref shape => {
            return Err(PyValueError::new_err(format!(
                "the bitmask must be shaped (n_words,) or (batch, n_words), not {}-D",
                shape.len()
            )))
        }
    };
    if width != n_words {
        return Err(to_pyerr(KernelError::BufferSize {
            expected: n_words,
            got: width,
            unit: "32-bit words per row",
        }));
    }
    let row = usize::try_from(row)
        .ok()
        .filter(|&r| r < rows)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "row {row} is out of range 0..{rows} of the bitmask"
            ))
        })?;
    Ok(row * n_words)
}

// ------------------------------------------------------------------ classes

/// A token trie and the vocabulary facts a bitmask needs; one per tokenizer.
#[pyclass(frozen, module = "grid_kernels._native", name = "TrieTables")]
struct PyTrieTables {
    inner: Arc<Trie>,
}

#[pymethods]
impl PyTrieTables {
    #[new]
    #[pyo3(signature = (*, edge, token, size, alias_offset, alias_ids, n_vocab, eos_ids))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        edge: &Bound<'_, PyAny>,
        token: &Bound<'_, PyAny>,
        size: &Bound<'_, PyAny>,
        alias_offset: &Bound<'_, PyAny>,
        alias_ids: &Bound<'_, PyAny>,
        n_vocab: usize,
        eos_ids: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let raw = RawTrie {
            edge: ints(edge, "edge")?,
            token: ints(token, "token")?,
            size: ints(size, "size")?,
            alias_offset: ints(alias_offset, "alias_offset")?,
            alias_ids: ints(alias_ids, "alias_ids")?,
            n_vocab,
            eos_ids: ints(eos_ids, "eos_ids")?,
        };
        Ok(Self {
            inner: Arc::new(Trie::new(raw).map_err(to_pyerr)?),
        })
    }

    #[getter]
    fn n_nodes(&self) -> usize {
        self.inner.n_nodes()
    }

    #[getter]
    fn n_vocab(&self) -> usize {
        self.inner.n_vocab()
    }

    #[getter]
    fn n_words(&self) -> usize {
        self.inner.n_words()
    }

    #[getter]
    fn max_depth(&self) -> usize {
        self.inner.max_depth()
    }

    #[getter]
    fn eos_ids(&self) -> Vec<u32> {
        self.inner.eos_ids().to_vec()
    }

    /// `token_bytes(id)` read off the trie (`b""` for a special id).
    fn token_bytes<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let n_vocab = self.inner.n_vocab();
        let i = usize::try_from(id)
            .ok()
            .filter(|&i| i < n_vocab)
            .ok_or_else(|| to_pyerr(KernelError::TokenOutOfRange { token: id, n_vocab }))?;
        Ok(PyBytes::new(py, self.inner.spelling(i)))
    }

    fn __repr__(&self) -> String {
        format!(
            "TrieTables(n_nodes={}, n_vocab={})",
            self.inner.n_nodes(),
            self.inner.n_vocab()
        )
    }
}

/// One grammar's tables (DFA, LALR, lexicon, pick order) with a shared trie.
/// The walk cache the engines of one walk family share (grid-core's T2):
/// pass it, with the engine's family, to each `EngineTables` of the family.
#[pyclass(frozen, module = "grid_kernels._native", name = "SharedWalks")]
struct PySharedWalks {
    inner: Arc<crate::engine::Shared>,
}

#[pymethods]
impl PySharedWalks {
    #[new]
    fn new(family: String) -> Self {
        Self {
            inner: Arc::new(crate::engine::Shared::new(family)),
        }
    }

    #[getter]
    fn family(&self) -> &str {
        &self.inner.family
    }

    /// Walks cached for the family.
    #[getter]
    fn cached_walks(&self) -> usize {
        self.inner.cache.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "SharedWalks(family={:?}, cached_walks={})",
            self.inner.family,
            self.inner.cache.len()
        )
    }
}

/// A family's shared tier on Redis (`crate::remote`): `RemoteWalks(url, key,
/// family)`, attached behind an engine's walk cache with `attach_remote`.
#[pyclass(frozen, module = "grid_kernels._native", name = "RemoteWalks")]
struct PyRemoteWalks {
    inner: Arc<crate::remote::Remote>,
}

#[pymethods]
impl PyRemoteWalks {
    #[new]
    fn new(url: &str, key: &[u8], family: &str) -> PyResult<Self> {
        let remote = crate::remote::Remote::new(url, key, family).map_err(PyValueError::new_err)?;
        Ok(Self {
            inner: Arc::new(remote),
        })
    }

    /// The prefix of every Redis key of this tier.
    #[getter]
    fn prefix(&self) -> &str {
        self.inner.prefix()
    }

    /// Every counter by name.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, n) in self.inner.metrics() {
            d.set_item(name, n)?;
        }
        Ok(d)
    }

    /// The oldest event not yet taken (a log line), waiting at most
    /// `timeout` seconds for one with the GIL released; None if none came.
    fn next_event(&self, py: Python<'_>, timeout: f64) -> PyResult<Option<String>> {
        if timeout.is_nan() {
            return Err(PyValueError::new_err("timeout is NaN: give seconds"));
        }
        let wait = std::time::Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
        Ok(py.allow_threads(|| self.inner.next_event(wait)))
    }
}

/// Put `remote` behind the walk cache of `tables` (shared by its family);
/// False if another tier already is. A walk cache of another family than
/// the tier's is refused.
#[pyfunction]
fn attach_remote(tables: &PyEngineTables, remote: &PyRemoteWalks, family: &str) -> PyResult<bool> {
    let shared = &tables.inner.shared;
    if !shared.family.is_empty() && shared.family != family {
        return Err(PyValueError::new_err(format!(
            "a shared tier for family {family:?} cannot serve the walk cache of {:?}",
            shared.family
        )));
    }
    Ok(shared.attach(Arc::clone(&remote.inner)))
}

/// A dialect's union DFA with what the walk derives from it
/// ([`crate::tables::Lexing`]): built once, shared by the `EngineTables` of
/// every projection (`EngineTables(lexing=...)`).
#[pyclass(frozen, module = "grid_kernels._native", name = "Lexing")]
struct PyLexing {
    inner: Arc<Lexing>,
}

#[pymethods]
impl PyLexing {
    #[new]
    #[pyo3(
        signature = (*, n_terminals, dfa_trans, dfa_accept, dfa_live, ignored),
        text_signature = "(*, n_terminals, dfa_trans, dfa_accept, dfa_live, ignored)"
    )]
    fn new(
        n_terminals: usize,
        dfa_trans: &Bound<'_, PyAny>,
        dfa_accept: &Bound<'_, PyAny>,
        dfa_live: &Bound<'_, PyAny>,
        ignored: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let w = bits::width_for(n_terminals + 1);
        let raw = RawGrammar {
            n_terminals,
            dfa_trans: ints(dfa_trans, "dfa_trans")?,
            dfa_accept: int_sets(dfa_accept, w, "dfa_accept")?,
            dfa_live: int_sets(dfa_live, w, "dfa_live")?,
            ignored: int_to_words(ignored, w, "ignored")?,
            ..RawGrammar::default()
        };
        let inner = Lexing::new(&raw).map_err(to_pyerr)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    #[getter]
    fn n_terminals(&self) -> usize {
        self.inner.n_terminals()
    }
}

/// A projection's LALR(1) tables, validated and indexed
/// ([`crate::tables::Lalr`]): built once, shared by the `EngineTables` of
/// every engine of the projection (`EngineTables(parsing=...)`).
#[pyclass(frozen, module = "grid_kernels._native", name = "Parsing")]
struct PyParsing {
    inner: Arc<Lalr>,
}

#[pymethods]
impl PyParsing {
    #[new]
    #[pyo3(
        signature = (*, n_terminals, action, goto, n_nonterminals, rule_lhs, rule_len),
        text_signature = "(*, n_terminals, action, goto, n_nonterminals, rule_lhs, rule_len)"
    )]
    fn new(
        n_terminals: usize,
        action: &Bound<'_, PyAny>,
        goto: &Bound<'_, PyAny>,
        n_nonterminals: usize,
        rule_lhs: &Bound<'_, PyAny>,
        rule_len: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let raw = RawGrammar {
            n_terminals,
            action: ints(action, "action")?,
            goto: ints(goto, "goto")?,
            n_nonterminals,
            rule_lhs: ints(rule_lhs, "rule_lhs")?,
            rule_len: ints(rule_len, "rule_len")?,
            ..RawGrammar::default()
        };
        let inner = Lalr::new(&raw).map_err(to_pyerr)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The terminals some state has an action on, as an int
    /// (`LalrTables.shiftable`).
    fn shiftable<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lalr = &*self.inner;
        let t = lalr.n_terminals;
        let mut set = vec![0u64; bits::width_for(t + 1)];
        for row in lalr.action.chunks_exact(t + 1) {
            for (x, &a) in row[..t].iter().enumerate() {
                if a != 0 {
                    bits::set(&mut set, x);
                }
            }
        }
        words_to_int(py, &set)
    }
}

/// `EngineTables.reserve_pieces`: per terminal its compatible rows and its
/// single-token lexeme.
type Pieces<'py> = (Vec<Bound<'py, PyAny>>, Vec<Option<Bound<'py, PyBytes>>>);

#[pyclass(frozen, module = "grid_kernels._native", name = "EngineTables")]
struct PyEngineTables {
    inner: Arc<Engine>,
    trie: Py<PyTrieTables>,
}

/// `threads` from Python: None is rayon's global pool, else a pool of n
/// threads, `1 <= n <=` [`crate::engine::MAX_THREADS`].
fn threads_of(threads: Option<i64>) -> PyResult<Threads> {
    match threads {
        None => Ok(Threads::Global),
        Some(n) => thread_count(n).map(Threads::Pool),
    }
}

/// A thread count from Python, `1 <= n <=` [`crate::engine::MAX_THREADS`].
fn thread_count(n: i64) -> PyResult<usize> {
    let max = crate::engine::MAX_THREADS;
    match usize::try_from(n) {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "threads must be from 1 to {max} (or None for the global pool), not {n}"
        ))),
    }
}

#[pymethods]
impl PyEngineTables {
    #[new]
    #[pyo3(signature = (
        *, trie, n_terminals, lexicon_words, lexicon_categories, pick_order, ignored,
        action = None, goto = None,
        n_nonterminals = None, rule_lhs = None, rule_len = None, parsing = None,
        dfa_trans = None, dfa_accept = None, dfa_live = None, lexing = None, schema = None,
        threads = Some(1), shared = None, family = None
    ), text_signature = "(*, trie, n_terminals, lexicon_words, lexicon_categories, \
        pick_order, ignored, action=None, goto=None, \
        n_nonterminals=None, rule_lhs=None, rule_len=None, parsing=None, dfa_trans=None, \
        dfa_accept=None, dfa_live=None, lexing=None, schema=None, threads=1, shared=None, \
        family=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        trie: Py<PyTrieTables>,
        n_terminals: usize,
        lexicon_words: &Bound<'_, PyAny>,
        lexicon_categories: &Bound<'_, PyAny>,
        pick_order: &Bound<'_, PyAny>,
        ignored: &Bound<'_, PyAny>,
        action: Option<&Bound<'_, PyAny>>,
        goto: Option<&Bound<'_, PyAny>>,
        n_nonterminals: Option<usize>,
        rule_lhs: Option<&Bound<'_, PyAny>>,
        rule_len: Option<&Bound<'_, PyAny>>,
        parsing: Option<Py<PyParsing>>,
        dfa_trans: Option<&Bound<'_, PyAny>>,
        dfa_accept: Option<&Bound<'_, PyAny>>,
        dfa_live: Option<&Bound<'_, PyAny>>,
        lexing: Option<Py<PyLexing>>,
        schema: Option<String>,
        threads: Option<i64>,
        shared: Option<Py<PySharedWalks>>,
        family: Option<String>,
    ) -> PyResult<Self> {
        let family_walks = match (shared, family) {
            (None, _) => None,
            (Some(s), Some(f)) if s.get().inner.family == f => Some(Arc::clone(&s.get().inner)),
            (Some(s), f) => {
                return Err(PyValueError::new_err(format!(
                    "a shared walk cache serves one family ({:?}), not {:?}",
                    s.get().inner.family,
                    f
                )))
            }
        };
        let w = bits::width_for(n_terminals + 1);
        let (dfa_trans, dfa_accept, dfa_live) =
            match (&lexing, dfa_trans, dfa_accept, dfa_live) {
                (Some(_), None, None, None) => (Vec::new(), Vec::new(), Vec::new()),
                (None, Some(t), Some(a), Some(l)) => (
                    ints(t, "dfa_trans")?,
                    int_sets(a, w, "dfa_accept")?,
                    int_sets(l, w, "dfa_live")?,
                ),
                _ => return Err(PyTypeError::new_err(
                    "give the DFA either as lexing= or as dfa_trans=, dfa_accept= and dfa_live=",
                )),
            };
        let lalr = match (parsing, action, goto, n_nonterminals, rule_lhs, rule_len) {
            (Some(p), None, None, None, None, None) => Some(Arc::clone(&p.get().inner)),
            (None, Some(action), Some(goto), Some(n_nonterminals), Some(lhs), Some(len)) => {
                let raw = RawGrammar {
                    n_terminals,
                    action: ints(action, "action")?,
                    goto: ints(goto, "goto")?,
                    n_nonterminals,
                    rule_lhs: ints(lhs, "rule_lhs")?,
                    rule_len: ints(len, "rule_len")?,
                    ..RawGrammar::default()
                };
                Some(Arc::new(Lalr::new(&raw).map_err(to_pyerr)?))
            }
            _ => None,
        };
        let Some(lalr) = lalr else {
            return Err(PyTypeError::new_err(
                "give the LALR tables either as parsing= or as action=, goto=, \
                 n_nonterminals=, rule_lhs= and rule_len=",
            ));
        };
        let raw = RawGrammar {
            n_terminals,
            dfa_trans,
            dfa_accept,
            dfa_live,
            lexicon_words: Some(lexicon_words_of(lexicon_words)?),
            lexicon_categories: int_to_words(lexicon_categories, w, "lexicon_categories")?,
            pick_order: ints(pick_order, "pick_order")?,
            ignored: int_to_words(ignored, w, "ignored")?,
            ..RawGrammar::default()
        };
        let lexing = match lexing {
            Some(lexing) => Arc::clone(&lexing.get().inner),
            None => Arc::new(Lexing::new(&raw).map_err(to_pyerr)?),
        };
        let grammar = GrammarTables::with_parts(raw, lexing, lalr);
        let grammar = Arc::new(grammar.map_err(to_pyerr)?);
        let shared = Arc::clone(&trie.get().inner);
        let tables = EngineTables::new(grammar, shared);
        Ok(Self {
            inner: Arc::new(Engine::new(
                tables,
                threads_of(threads)?,
                schema.unwrap_or_default(),
                family_walks,
            )),
            trie,
        })
    }

    #[getter]
    fn trie(&self, py: Python<'_>) -> Py<PyTrieTables> {
        self.trie.clone_ref(py)
    }

    #[getter]
    fn n_terminals(&self) -> usize {
        self.inner.tables.grammar.n_terminals()
    }

    #[getter]
    fn n_words(&self) -> usize {
        self.inner.tables.trie.n_words()
    }

    #[getter]
    fn n_vocab(&self) -> usize {
        self.inner.tables.trie.n_vocab()
    }

    /// CI nodes and CD entries below `node` (the GIL is released while
    /// walking; a root walk on `threads` threads, None: the engine's pool).
    #[pyo3(
        signature = (node, pending, allowed, include_self = false, threads = Some(1)),
        text_signature = "(self, /, node, pending, allowed, include_self=False, threads=1)"
    )]
    fn walk<'py>(
        &self,
        py: Python<'py>,
        node: i64,
        pending: Vec<u8>,
        allowed: &Bound<'py, PyAny>,
        include_self: bool,
        threads: Option<i64>,
    ) -> PyResult<(Vec<u32>, Bound<'py, PyList>)> {
        let w = self.inner.tables.grammar.width();
        let allowed = int_to_words(allowed, w, "allowed")?;
        let threads = threads.map(|n| threads_of(Some(n))).transpose()?;
        let engine = &*self.inner;
        let out = py
            .allow_threads(|| {
                gil_probe::point();
                engine.walk(node, &pending, &allowed, include_self, threads.as_ref())
            })
            .map_err(to_pyerr)?;
        let cd = out.cd.iter().map(|e| {
            PyTuple::new(
                py,
                [
                    e.node.into_pyobject(py)?.into_any(),
                    e.terminal.into_pyobject(py)?.into_any(),
                    PyBytes::new(py, out.tail(e)).into_any(),
                ],
            )
        });
        let cd = cd.collect::<PyResult<Vec<_>>>()?;
        Ok((out.ci, PyList::new(py, cd)?))
    }

    /// What the reserve tables read of the vocabulary
    /// ([`crate::reserve::single_token_pieces`]): per terminal its compatible
    /// rows (an int) and its single-token lexeme x (`b" " + x` is one token),
    /// or None. The GIL is released.
    fn reserve_pieces<'py>(&self, py: Python<'py>) -> PyResult<Pieces<'py>> {
        let tables = &self.inner.tables;
        let (compat, pieces) =
            py.allow_threads(|| crate::reserve::single_token_pieces(&tables.grammar, &tables.trie));
        let compat = compat
            .iter()
            .map(|c| words_to_int(py, c))
            .collect::<PyResult<Vec<_>>>()?;
        let pieces = pieces
            .iter()
            .map(|x| x.as_ref().map(|x| PyBytes::new(py, x)))
            .collect();
        Ok((compat, pieces))
    }

    /// The fewest token ids spelling each of `data`, smallest id per spelling,
    /// or None (`ReserveTable.split`, [`crate::reserve::split`]).
    fn token_splits(&self, data: Vec<Vec<u8>>) -> Vec<Option<Vec<u32>>> {
        let trie = &self.inner.tables.trie;
        data.iter()
            .map(|d| crate::reserve::split(trie, d))
            .collect()
    }

    /// This engine's mode-1 reserve ([`crate::reserve`]) over the grammar-level
    /// tables grid-core's `ReserveTable` computed (its attributes of the same
    /// names; `items` per LALR state, `classes` as (representative, members),
    /// `bare` per terminal as (first byte, `bare_tokens`) or None);
    /// each of its five memos holds at most `memo_bytes` (default 8 MiB).
    #[pyo3(signature = (term_tokens, lead_tokens, nt_rule, rhs, start_cost, items, classes, safe, bare, memo_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn reserve(
        &self,
        term_tokens: Vec<Option<Vec<u32>>>,
        lead_tokens: Vec<Vec<u32>>,
        nt_rule: Vec<i32>,
        rhs: Vec<Vec<u32>>,
        start_cost: u64,
        items: Vec<Vec<(u64, u32, u32, u32)>>,
        classes: Vec<(u8, Vec<u8>)>,
        safe: Vec<u32>,
        bare: Vec<Option<(u8, Vec<u32>)>>,
        memo_bytes: Option<usize>,
    ) -> PyResult<PyReserve> {
        let raw = RawReserve {
            term_tokens,
            lead_tokens,
            nt_rule,
            rhs,
            start_cost,
            items,
            classes,
            safe,
            bare,
        };
        let tables = &self.inner.tables;
        let memo_bytes = memo_bytes.unwrap_or(crate::reserve::MEMO_BYTES);
        let inner = Reserve::new(
            Arc::clone(&tables.grammar),
            Arc::clone(&tables.trie),
            raw,
            memo_bytes,
        )
        .map_err(to_pyerr)?;
        Ok(PyReserve {
            inner: Arc::new(inner),
            engine: Arc::clone(&self.inner),
        })
    }

    /// A new session at the initial configuration, caching its walks under
    /// `namespace`; `audit` turns its record chain on; `events` (from
    /// [`Self::event_tables`]) its parse event stream. `errors` and `views`
    /// make it speak a caller's protocol (grid-core's guide protocol):
    /// `errors(e)` is raised instead of each `SessionError` `e` the session
    /// raises, and a bitmask that is no buffer is filled through `views(b)`
    /// (a buffer, or None to refuse it), the last one kept while `b` is
    /// passed again.
    #[pyo3(signature = (namespace = 0, audit = false, events = None, errors = None, views = None))]
    fn session(
        &self,
        namespace: u64,
        audit: bool,
        events: Option<&PyEventTables>,
        errors: Option<Py<PyAny>>,
        views: Option<Py<PyAny>>,
    ) -> PyResult<PySession> {
        let mut inner =
            Session::new(Arc::clone(&self.inner), namespace, audit).map_err(to_pyerr)?;
        if let Some(events) = events {
            if !Arc::ptr_eq(&events.grammar, &self.inner.tables.grammar) {
                return Err(PyValueError::new_err(
                    "these event tables were made for another engine's grammar",
                ));
            }
            inner = inner
                .with_events(Arc::clone(&events.inner))
                .map_err(to_pyerr)?;
        }
        let protocol = match (errors, views) {
            (None, None) => None,
            (errors, views) => Some(Arc::new(Protocol { errors, views })),
        };
        Ok(PySession {
            inner,
            last: None,
            protocol,
            view: None,
            export: None,
        })
    }

    /// The parse event tables of this engine's grammar: per rule and per
    /// terminal an event code (an index into the caller's table of kinds and
    /// names), or -1 (`grid_core.events.EventSpec.compile`).
    fn event_tables(&self, rule_codes: Vec<i64>, term_codes: Vec<i64>) -> PyResult<PyEventTables> {
        let code = |c: i64| -> PyResult<u32> {
            if c == -1 {
                Ok(crate::events::NOT_MARKED)
            } else {
                u32::try_from(c)
                    .ok()
                    .filter(|&c| c != crate::events::NOT_MARKED)
                    .ok_or_else(|| PyValueError::new_err(format!("bad event code {c}")))
            }
        };
        let rules = rule_codes
            .into_iter()
            .map(code)
            .collect::<PyResult<Vec<_>>>()?;
        let terms = term_codes
            .into_iter()
            .map(code)
            .collect::<PyResult<Vec<_>>>()?;
        let grammar = Arc::clone(&self.inner.tables.grammar);
        let inner = EventTables::new(&grammar, rules, terms).map_err(to_pyerr)?;
        Ok(PyEventTables {
            inner: Arc::new(inner),
            grammar,
        })
    }

    /// The cold miss of `Engine.walk` in one call with the GIL released: key,
    /// walk, CD classes, payload, entry id, publication in the engine's cache
    /// (where sessions find it). Returns the entry's handle.
    #[pyo3(signature = (namespace, root, pending, allowed, raw_key = false, threads = None))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &self,
        py: Python<'_>,
        namespace: u64,
        root: i64,
        pending: Vec<u8>,
        allowed: &Bound<'_, PyAny>,
        raw_key: bool,
        threads: Option<i64>,
    ) -> PyResult<PyEntry> {
        let allowed = int_to_words(allowed, self.inner.tables.grammar.width(), "allowed")?;
        let threads = threads.map(|n| threads_of(Some(n))).transpose()?;
        let engine = &*self.inner;
        let (entry, id) = py
            .allow_threads(|| {
                gil_probe::point();
                engine.register(
                    namespace,
                    root,
                    &pending,
                    &allowed,
                    raw_key,
                    threads.as_ref(),
                )
            })
            .map_err(to_pyerr)?;
        Ok(PyEntry {
            entry,
            id,
            n_vocab: engine.tables.trie.n_vocab(),
            ident: engine.tables.grammar.ident_position(&allowed),
        })
    }

    /// Walks in the engine's cache (its family's, when shared).
    #[getter]
    fn cached_walks(&self) -> usize {
        self.inner.shared.cache.len()
    }

    /// The walk cache's (walks held, hits, misses): lookups of fills and
    /// registrations answered from it, and those that walked or read the
    /// shared tier. With a shared family these are the family's, counted by
    /// every engine of it.
    #[getter]
    fn walk_stats(&self) -> (usize, u64, u64) {
        let (hits, misses) = self.inner.shared.cache.stats();
        (self.inner.shared.cache.len(), hits, misses)
    }

    /// The subtree memo's (chunks held, hits, misses).
    #[getter]
    fn memo_stats(&self) -> (usize, u64, u64) {
        let (hits, misses) = self.inner.chunks.stats();
        (self.inner.chunks.len(), hits, misses)
    }

    /// Empty the subtree memo (benchmarks of cold walks).
    fn clear_memo(&self) {
        self.inner.chunks.clear();
    }

    /// Set the memory caps in bytes of the walk cache, the subtree memo and
    /// the row memo; each evicts its least recently used entries (at once if
    /// it holds more).
    fn set_caps(&self, walks: usize, chunks: usize, rows: usize) {
        self.inner.set_caps(walks, chunks, rows);
    }

    /// `{"walks" | "chunks" | "rows": (bytes held, cap, evicted so far)}`
    /// (rows: the current arena generation's memo).
    fn memory(&self) -> std::collections::HashMap<&'static str, (usize, usize, u64)> {
        let [walks, chunks, rows] = self.inner.usage();
        [("walks", walks), ("chunks", chunks), ("rows", rows)]
            .into_iter()
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "EngineTables(n_terminals={}, n_vocab={})",
            self.inner.tables.grammar.n_terminals(),
            self.inner.tables.trie.n_vocab()
        )
    }
}

/// A cached walk (the handle `register` returns): what grid-core's
/// `cache.Entry` holds, read out on demand.
#[pyclass(frozen, module = "grid_kernels._native", name = "Entry")]
struct PyEntry {
    entry: Arc<crate::cache::Entry>,
    id: [u8; 16],
    n_vocab: usize,
    ident: bool,
}

#[pymethods]
impl PyEntry {
    /// `"ident"` or `"generic"`: the kind of key it is published under.
    #[getter]
    fn kind(&self) -> &'static str {
        if self.ident {
            "ident"
        } else {
            "generic"
        }
    }

    /// BLAKE2b-128 of (key, encoding, payload and CD entries), hex.
    #[getter]
    fn entry_id(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `b"D"` (dense bitmask) or `b"S"` (sparse ids).
    #[getter]
    fn encoding<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &[self.entry.ci.encoding])
    }

    /// grid-core's payload bytes.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.entry.ci.to_bytes(self.n_vocab))
    }

    /// The CD entries `(trie node, terminal, tail)`, in walk order.
    #[getter]
    fn cd<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items = self
            .entry
            .cd
            .iter()
            .map(|e| {
                PyTuple::new(
                    py,
                    [
                        e.node.into_pyobject(py)?.into_any(),
                        e.terminal.into_pyobject(py)?.into_any(),
                        PyBytes::new(py, self.entry.tail(e)).into_any(),
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, items)
    }

    /// The CD verdict classes: `(terminal, number of entries)`, in order.
    #[getter]
    fn classes(&self) -> Vec<(u32, usize)> {
        self.entry
            .classes
            .iter()
            .map(|c| (c.terminal, c.members.len()))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("Entry({}, {})", self.kind(), self.entry_id())
    }
}

/// Which rules and terminals of one engine's grammar are parse events.
#[pyclass(frozen, module = "grid_kernels._native", name = "EventTables")]
struct PyEventTables {
    inner: Arc<EventTables>,
    grammar: Arc<GrammarTables>,
}

/// One engine's mode-1 reserve (`grid_core.reserve.ReserveTable.reserve` and
/// `.completion`, answer for answer) over configurations of its sessions.
#[pyclass(frozen, module = "grid_kernels._native", name = "Reserve")]
struct PyReserve {
    inner: Arc<Reserve>,
    engine: Arc<Engine>,
}

/// A configuration (stack node, remainder, scan state) in one arena
/// generation: what a [`PyReserve`] prices.
#[pyclass(frozen, module = "grid_kernels._native", name = "ReserveState")]
struct PyReserveState {
    /// The engine whose session it was taken from: only its reserve prices it.
    engine: Arc<Engine>,
    stacks: Arc<Mutex<Stacks>>,
    config: Config,
}

#[pymethods]
impl PyReserveState {
    /// The remainder's bytes.
    #[getter]
    fn remainder<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.config.remainder)
    }
}

impl PyReserve {
    /// `state`, checked to be of this reserve's engine.
    fn own<'s>(&self, state: &'s PyReserveState) -> PyResult<&'s PyReserveState> {
        if !Arc::ptr_eq(&state.engine, &self.engine) {
            return Err(PyValueError::new_err(
                "this reserve was made for another engine's states",
            ));
        }
        Ok(state)
    }
}

#[pymethods]
impl PyReserve {
    /// The configuration `session` is at (a session of this engine).
    fn start(&self, session: PyRef<'_, PySession>) -> PyResult<PyReserveState> {
        if !Arc::ptr_eq(session.inner.engine(), &self.engine) {
            return Err(PyValueError::new_err(
                "this reserve was made for another engine's sessions",
            ));
        }
        let (stacks, config) = session.inner.configuration();
        let engine = Arc::clone(&self.engine);
        Ok(PyReserveState {
            engine,
            stacks,
            config,
        })
    }

    /// The configuration after `token`'s bytes, or None if they leave the language.
    fn advance(&self, state: &PyReserveState, token: i64) -> PyResult<Option<PyReserveState>> {
        let state = self.own(state)?;
        let tables = &self.engine.tables;
        let n_vocab = tables.trie.n_vocab();
        let id = usize::try_from(token)
            .ok()
            .filter(|&i| i < n_vocab)
            .ok_or_else(|| to_pyerr(KernelError::TokenOutOfRange { token, n_vocab }))?;
        let mut stacks = lock(&state.stacks);
        let next = tables
            .grammar
            .advance(&mut stacks.arena, &state.config, tables.trie.spelling(id))
            .map_err(to_pyerr)?;
        Ok(next.map(|config| PyReserveState {
            engine: Arc::clone(&state.engine),
            stacks: Arc::clone(&state.stacks),
            config,
        }))
    }

    /// Tokens of the shortest completion the guide writes from `state` (EOS
    /// not counted); `grid_core.reserve.INF` where none is writable.
    fn reserve(&self, state: &PyReserveState) -> PyResult<u64> {
        let state = self.own(state)?;
        self.inner
            .reserve(&state.stacks, &state.config)
            .map_err(to_pyerr)
    }

    /// (bytes held, cap, evicted) of each memo: cells, finishes, discounts,
    /// finish options, token splits.
    fn usage(&self) -> Vec<(usize, usize, u64)> {
        self.inner.usage().to_vec()
    }

    /// The token ids of that completion, or None where there is none.
    fn completion(&self, state: &PyReserveState) -> PyResult<Option<Vec<u32>>> {
        let state = self.own(state)?;
        self.inner
            .completion(&state.stacks, &state.config)
            .map_err(to_pyerr)
    }
}

/// A caller's protocol for its sessions ([`PyEngineTables::session`]).
struct Protocol {
    /// Maps a `SessionError` to the exception raised instead.
    errors: Option<Py<PyAny>>,
    /// Views a bitmask that is no buffer as one (or returns None).
    views: Option<Py<PyAny>>,
}

impl Protocol {
    /// `err` as the caller's exception: `errors(value)` for a `SessionError`.
    fn error(&self, err: PyErr) -> PyErr {
        let Some(errors) = &self.errors else {
            return err;
        };
        Python::with_gil(|py| {
            if !err.is_instance_of::<SessionError>(py) {
                return err;
            }
            match errors.call1(py, (err.value(py),)) {
                Ok(mapped) => PyErr::from_value(mapped.into_bound(py)),
                Err(e) => e,
            }
        })
    }
}

/// One request's guide (`GridGuide`), the whole step and its audit record in
/// Rust. Made with a protocol (see [`PyEngineTables::session`]), its verbs
/// are the protocol's verbs themselves: no layer of Python between a caller
/// and Rust on the hot path.
#[pyclass(module = "grid_kernels._native", name = "Session")]
struct PySession {
    inner: Session,
    /// How the last fill was served.
    last: Option<Filled>,
    /// The caller's protocol, shared with forks.
    protocol: Option<Arc<Protocol>>,
    /// The last bitmask filled through the protocol's view, its view, and its
    /// dtype then (a tensor's `.data` can be swapped for another dtype's).
    view: Option<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>,
    /// The view of a tensor the last fill wrote and its export, held until
    /// another bitmask is filled or the session drops: a serving loop fills
    /// one tensor step after step, and viewing and exporting it anew costs
    /// microseconds. Each fill checks the view against the tensor
    /// (`view_current`). A bitmask that is a buffer itself is exported at
    /// every fill (about 60 ns warm) and released after it: a held export
    /// would miss a change of its shape, and numpy's `resize(refcheck=False)`
    /// frees memory an export still points at.
    export: Option<(Py<PyAny>, PyBuffer<i32>)>,
}

impl PySession {
    /// A core error as the caller's exception.
    fn err(protocol: &Option<Arc<Protocol>>, e: KernelError) -> PyErr {
        let err = to_pyerr(e);
        match protocol {
            Some(p) => p.error(err),
            None => err,
        }
    }

    /// The buffer to fill for `bitmask`: `bitmask` itself, or, when it is no
    /// buffer and the protocol views it, its view (kept for the next fill).
    fn target<'py>(&mut self, bitmask: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = bitmask.py();
        let Some(views) = self.protocol.as_ref().and_then(|p| p.views.as_ref()) else {
            return Ok(bitmask.clone());
        };
        if let Some((obj, view, dtype)) = &self.view {
            let same = obj.is(bitmask) && bitmask.getattr(intern!(py, "dtype"))?.is(dtype);
            if same && self.view_current(bitmask, view.bind(py))? {
                return Ok(view.bind(py).clone());
            }
        }
        // SAFETY: a type check on a live object, with the GIL held.
        if unsafe { pyo3::ffi::PyObject_CheckBuffer(bitmask.as_ptr()) } == 1 {
            return Ok(bitmask.clone());
        }
        let view = views.call1(py, (bitmask,))?;
        if view.is_none(py) {
            return Ok(bitmask.clone());
        }
        let dtype = bitmask.getattr(intern!(py, "dtype"))?.unbind();
        self.view = Some((bitmask.clone().unbind(), view.clone_ref(py), dtype));
        Ok(view.into_bound(py))
    }
}

impl PySession {
    /// Whether `view`, the view kept for the tensor `bitmask` (of the dtype it
    /// had then), is still that tensor's memory: the export held of it starts
    /// at the tensor's `data_ptr()`, with its shape, and the tensor is
    /// contiguous. A tensor
    /// pointed at new storage (`Tensor.set_`, a batch that grew) is viewed
    /// anew; its old storage may be freed already.
    fn view_current(&self, bitmask: &Bound<'_, PyAny>, view: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Some((obj, buf)) = &self.export else {
            return Ok(false);
        };
        if !obj.is(view) {
            return Ok(false);
        }
        let py = bitmask.py();
        let ptr: usize = bitmask.call_method0(intern!(py, "data_ptr"))?.extract()?;
        if ptr != buf.buf_ptr() as usize {
            return Ok(false);
        }
        let shape: Vec<usize> = bitmask.getattr(intern!(py, "shape"))?.extract()?;
        if shape.as_slice() != buf.shape() {
            return Ok(false);
        }
        bitmask
            .call_method0(intern!(py, "is_contiguous"))?
            .extract()
    }
}

#[pymethods]
impl PySession {
    /// Accept one token: lexer advance and shift/reduce, one call; with audit
    /// on, its record (`kind`: sampled, forced or reserve; EOS is recorded as
    /// eos). A record whose mask must be walked first releases the GIL.
    #[pyo3(
        signature = (token, kind = AuditKind::SAMPLED),
        text_signature = "($self, token, kind='sampled')"
    )]
    fn accept_token(
        &mut self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        kind: AuditKind,
    ) -> PyResult<()> {
        let Wide(t) = token.extract()?;
        let kind = kind.0?;
        let (session, p) = (&mut self.inner, &self.protocol);
        // The record's mask, walked with the GIL released when it must be; a
        // failure is the accept's to raise, after its token check.
        if session.audited() && !session.prepare_record(false).unwrap_or(true) {
            let _ = py.allow_threads(|| session.prepare_record(true));
        }
        session.accept_token(t, kind).map_err(|e| match p {
            Some(p) => p.error(with_token(e, token)),
            None => with_token(e, token),
        })
    }

    /// The parse events determined so far, from index `since` on, each
    /// `(code, start, end, step)`; empty with events off.
    #[pyo3(signature = (since = Wide(0)), text_signature = "($self, since=0)")]
    fn events(&self, since: Wide) -> PyResult<Vec<(u32, u32, u32, u32)>> {
        let Ok(since) = usize::try_from(since.0) else {
            let why = format!("events from index {}: an index is not negative", since.0);
            return Err(PyValueError::new_err(why));
        };
        let all = self.inner.events().unwrap_or(&[]);
        Ok(all
            .get(since..)
            .unwrap_or(&[])
            .iter()
            .map(|e| (e.code, e.start, e.end, e.step))
            .collect())
    }

    /// How many parse events are determined so far (None: events off).
    #[getter]
    fn event_count(&self) -> Option<usize> {
        self.inner.events().map(<[_]>::len)
    }

    /// How many leading `tokens` would be accepted; the session is unchanged.
    ///
    /// As the Python guide, tokens are read one at a time: an item that is no
    /// integer raises only where the tokens before it are all accepted.
    fn validate_tokens(&mut self, tokens: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut read = Vec::new();
        let mut bad = None;
        for item in tokens.try_iter()? {
            match item.and_then(|t| t.extract::<Wide>()) {
                Ok(Wide(t)) => read.push(t),
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        let p = &self.protocol;
        let n = self
            .inner
            .validate_tokens(&read)
            .map_err(|e| Self::err(p, e))?;
        match bad {
            Some(e) if n == read.len() => Err(e),
            _ => Ok(n),
        }
    }

    /// The bytes accepted so far (EOS excluded).
    fn output<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.output())
    }

    /// The ids of the current mask, ascending (EOS ids included when legal).
    fn mask_ids(&mut self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let mut row = vec![0u32; self.inner.n_words()];
        let (session, p) = (&mut self.inner, &self.protocol);
        let err = |e| Self::err(p, e);
        let mut filled = session.fill(&mut row, false).map_err(err)?;
        if filled == Filled::Cold {
            filled = py
                .allow_threads(|| session.fill(&mut row, true))
                .map_err(err)?;
        }
        self.last = Some(filled);
        Ok(row_ids(&row))
    }

    /// Audit is on.
    #[getter]
    fn audited(&self) -> bool {
        self.inner.audited()
    }

    /// The configuration hash of the current step (`Config.hash`).
    #[getter]
    fn config_hash(&self) -> u64 {
        self.inner.config_hash()
    }

    /// The audit fields of the current step's mask once a fill (audit on)
    /// computed them: (configuration hash, mask entry id hex, blocked
    /// count), else None.
    fn step_audit(&self) -> Option<(u64, String, u32)> {
        self.inner
            .step_audit()
            .map(|(h, id, blocked)| (h, audit::hex(&id), blocked))
    }

    /// The records as `grid_core.audit.AuditLog.lines()` writes them, joined
    /// by `\n` (ASCII bytes: no str is built unless grid-core needs one), and
    /// the chain's head hash (hex); None with audit off.
    fn audit_lines<'py>(&mut self, py: Python<'py>) -> Option<(Bound<'py, PyBytes>, String)> {
        Some(chain_lines(py, self.inner.chain()?))
    }

    /// Write the mask into row `row` of `bitmask`. A warm fill runs with the
    /// GIL held; a fill that must walk releases it.
    #[pyo3(signature = (bitmask, row = Wide(0)), text_signature = "($self, bitmask, row=0)")]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        row: Wide,
    ) -> PyResult<()> {
        let Wide(row) = row;
        let n_words = self.inner.n_words();
        let target = self.target(bitmask)?;
        // A tensor's view was just checked against the tensor (`view_current`):
        // its export is kept. A buffer given as such is exported anew, as its
        // shape may have changed since (numpy's `a.shape = ...`).
        let viewed = !target.is(bitmask);
        let buf = match self.export.take() {
            Some((obj, buf)) if viewed && obj.is(&target) => buf,
            _ => bitmask_export(&target, n_words)?,
        };
        let offset = bitmask_row(&buf, row, n_words)?;
        // SAFETY: `buf` is a writable, C-contiguous, 4-byte-aligned export of
        // at least `offset + n_words` int32 items (shape checked above), held
        // (and so neither freed nor resized: PEP 3118) until the end of this
        // call or, for a view, until the session drops it; u32 and i32 share
        // size and alignment. Only this row is written.
        let words: &mut [u32] = unsafe {
            std::slice::from_raw_parts_mut((buf.buf_ptr() as *mut u32).add(offset), n_words)
        };
        let _held = if viewed {
            self.export = Some((target.unbind(), buf));
            None
        } else {
            Some(buf)
        };
        let (session, p) = (&mut self.inner, &self.protocol);
        let err = |e| Self::err(p, e);
        let mut filled = session.fill(words, false).map_err(err)?;
        if filled == Filled::Cold {
            filled = py
                .allow_threads(|| {
                    gil_probe::point();
                    session.fill(words, true)
                })
                .map_err(err)?;
        }
        self.last = Some(filled);
        Ok(())
    }

    /// Undo the last `n` accepted tokens.
    #[pyo3(signature = (n = Wide(1)), text_signature = "($self, n=1)")]
    fn rollback(&mut self, n: Wide) -> PyResult<()> {
        let Wide(n) = n;
        let (steps, p) = (self.inner.steps(), &self.protocol);
        let n = usize::try_from(n).map_err(|_| {
            Self::err(
                p,
                KernelError::guide(
                    steps,
                    None,
                    format!("cannot roll back {n} of {steps} tokens"),
                ),
            )
        })?;
        self.inner.rollback(n).map_err(|e| Self::err(p, e))
    }

    /// An independent session at the same point (the same protocol).
    fn fork(&self) -> PySession {
        PySession {
            inner: self.inner.fork(),
            last: None,
            protocol: self.protocol.clone(),
            view: None,
            export: None,
        }
    }

    /// How the last fill was served: `"row"` (cached walk, stack seen before:
    /// one copy), `"classes"` (cached walks, CD verdicts evaluated against the
    /// stack), `"walked"` (some walk was cold), or None before any fill.
    #[getter]
    fn last_fill(&self) -> Option<&'static str> {
        self.last.map(|f| match f {
            Filled::Row => "row",
            Filled::Classes => "classes",
            Filled::Walked | Filled::Cold => "walked",
        })
    }

    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    fn eos_allowed(&mut self) -> PyResult<bool> {
        let p = &self.protocol;
        self.inner.eos_allowed().map_err(|e| Self::err(p, e))
    }

    /// Tokens accepted so far (EOS included).
    #[getter]
    fn steps(&self) -> usize {
        self.inner.steps()
    }

    #[getter]
    fn n_words(&self) -> usize {
        self.inner.n_words()
    }

    /// The current configuration: (LALR states bottom first, remainder).
    fn config<'py>(&self, py: Python<'py>) -> (Vec<u32>, Bound<'py, PyBytes>) {
        let (states, remainder) = self.inner.config();
        (states, PyBytes::new(py, &remainder))
    }

    /// A key of the current step's mask (`Session::mask_key`): `(states, q,
    /// ln, p, v)`, `p` as little-endian words; O(stack depth + |v|).
    fn mask_key<'py>(
        &self,
        py: Python<'py>,
    ) -> (Vec<u32>, u32, i32, Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
        let (states, q, ln, p, v) = self.inner.mask_key();
        let p: Vec<u8> = p.iter().flat_map(|w| w.to_le_bytes()).collect();
        (states, q, ln, PyBytes::new(py, &p), PyBytes::new(py, v))
    }

    fn __repr__(&self) -> String {
        format!("Session(steps={})", self.inner.steps())
    }
}

/// Fill the rows of many sessions in one call: the warm rows with the GIL
/// held, the rows that must walk with it released, over `threads` threads
/// (`crate::session::fill_batch`): session `i` writes row `rows[i]` (default: row `i`) of
/// `bitmask`, a `(batch, n_words)` int32 buffer. Returns one entry per
/// session: None, or the `SessionError` its fill raised (its row untouched).
#[pyfunction]
#[pyo3(signature = (sessions, bitmask, rows = None, threads = 1))]
fn fill_next_token_bitmasks(
    py: Python<'_>,
    mut sessions: Vec<PyRefMut<'_, PySession>>,
    bitmask: &Bound<'_, PyAny>,
    rows: Option<Vec<Wide>>,
    threads: i64,
) -> PyResult<Vec<Option<PyObject>>> {
    let threads = thread_count(threads)?;
    let Some(first) = sessions.first() else {
        return Ok(Vec::new());
    };
    let n_words = first.inner.n_words();
    if sessions.iter().any(|s| s.inner.n_words() != n_words) {
        return Err(PyValueError::new_err(
            "the sessions of one batch must share one vocabulary width",
        ));
    }
    let rows: Vec<i64> = match rows {
        Some(rows) => rows.into_iter().map(|Wide(r)| r).collect(),
        None => (0..sessions.len() as i64).collect(),
    };
    if rows.len() != sessions.len() {
        return Err(PyValueError::new_err(format!(
            "{} rows for {} sessions",
            rows.len(),
            sessions.len()
        )));
    }
    let buf = bitmask_export(bitmask, n_words)?;
    bitmask_row(&buf, 0, n_words)?;
    let total = buf.item_count() / n_words;
    // SAFETY: `buf` is a writable, C-contiguous, 4-byte-aligned export of
    // `total * n_words` int32 items (checked by `bitmask_row`), kept alive
    // until it drops at the end of this function, after every write; u32
    // and i32 share size and alignment. The slice is split into disjoint rows
    // below, each handed to at most one session.
    let all: &mut [u32] =
        unsafe { std::slice::from_raw_parts_mut(buf.buf_ptr() as *mut u32, total * n_words) };
    let mut free: Vec<Option<&mut [u32]>> = all.chunks_mut(n_words).map(Some).collect();
    let mut work: Vec<(&mut Session, &mut [u32])> = Vec::with_capacity(sessions.len());
    for (s, &r) in sessions.iter_mut().zip(&rows) {
        let row = usize::try_from(r)
            .ok()
            .and_then(|r| free.get_mut(r))
            .ok_or_else(|| {
                PyValueError::new_err(format!("row {r} is out of range 0..{total} of the bitmask"))
            })?
            .take()
            .ok_or_else(|| PyValueError::new_err(format!("row {r} is given to two sessions")))?;
        work.push((&mut s.inner, row));
    }
    // Warm rows with the GIL held (handing it over and back costs more, and
    // another thread may keep it for a switch interval), the cold ones without.
    let mut results = crate::session::fill_warm(&mut work);
    if results.iter().any(|r| matches!(r, Ok(Filled::Cold))) {
        py.allow_threads(|| {
            gil_probe::point();
            crate::session::fill_cold(&mut work, &mut results, threads)
        });
    }
    drop(work);
    drop(buf);
    let mut out = Vec::with_capacity(results.len());
    for (s, r) in sessions.iter_mut().zip(results) {
        match r {
            Ok(filled) => {
                s.last = Some(filled);
                out.push(None);
            }
            Err(e) => out.push(Some(to_pyerr(e).value(py).clone().into_any().unbind())),
        }
    }
    Ok(out)
}

/// grid-core's `build_lalr` automaton (`crate::lalr::build`), the GIL
/// released: rule `r` is `rule_lhs[r] -> rhs[rhs_start[r]..rhs_start[r + 1]]`
/// (grid-core's `RuleArrays`, int32 buffers or sequences of ints) over
/// `n_terminals` terminals and `n_nonterminals` nonterminals (symbol ids as
/// grid-core numbers them; rule 0 the augmented start rule). Returns `(None,
/// (n_states, action, goto, state_symbol, kernel_start, kernel_rule,
/// kernel_dot, parsing))`, the arrays as little-endian int32 bytes and
/// `parsing` the [`PyParsing`] of those tables (built from them here, not read
/// back from Python), or `((kind, state, symbol, first_item, reduce_item),
/// None)` at the first conflict (kind `"shift/reduce"` or `"reduce/reduce"`).
/// A symbol out of range, or offsets that do not delimit one right-hand side
/// per rule, is a `ValueError`.
#[pyfunction]
fn lalr_tables<'py>(
    py: Python<'py>,
    n_terminals: usize,
    n_nonterminals: usize,
    rule_lhs: &Bound<'py, PyAny>,
    rhs_start: &Bound<'py, PyAny>,
    rhs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (t, n) = (n_terminals, n_nonterminals);
    let rule_lhs: Vec<u32> = ints(rule_lhs, "rule_lhs")?;
    let rhs_start: Vec<usize> = ints(rhs_start, "rhs_start")?;
    let rhs: Vec<u32> = ints(rhs, "rhs")?;
    if rule_lhs.is_empty()
        || rhs_start.len() != rule_lhs.len() + 1
        || rhs_start[0] != 0
        || rhs_start[rule_lhs.len()] != rhs.len()
        || rhs_start.windows(2).any(|w| w[0] > w[1])
    {
        return Err(PyValueError::new_err(format!(
            "{} left-hand sides, {} offsets for {} symbols: not one right-hand side \
             per rule (at least the start rule)",
            rule_lhs.len(),
            rhs_start.len(),
            rhs.len()
        )));
    }
    let rule_rhs: Vec<Vec<u32>> = rhs_start
        .windows(2)
        .map(|w| rhs[w[0]..w[1]].to_vec())
        .collect();
    let start = rule_lhs[0];
    for (r, (&a, body)) in rule_lhs.iter().zip(&rule_rhs).enumerate() {
        let symbol_ok = |x: &u32| (*x as usize) < t || (t < *x as usize && (*x as usize) <= t + n);
        if a as usize >= n || !body.iter().all(symbol_ok) {
            return Err(PyValueError::new_err(format!(
                "rule {r} has a symbol out of range"
            )));
        }
        if (r > 0 && a == start) || body.contains(&(start + t as u32 + 1)) {
            return Err(PyValueError::new_err(format!(
                "rule 0 must be the augmented start rule (rule {r} uses its lhs)"
            )));
        }
    }
    let built = py.allow_threads(|| crate::lalr::build(t, n, &rule_lhs, &rule_rhs));
    // Each array written straight into its bytes object (no copy between).
    let le = |v: &[i32]| -> PyResult<Bound<'py, PyAny>> {
        let bytes = PyBytes::new_with(py, 4 * v.len(), |buf| {
            for (out, x) in buf.chunks_exact_mut(4).zip(v) {
                out.copy_from_slice(&x.to_le_bytes());
            }
            Ok(())
        })?;
        Ok(bytes.into_any())
    };
    match built {
        Ok(b) => {
            let mut items = vec![
                b.n_states.into_pyobject(py)?.into_any(),
                le(&b.action)?,
                le(&b.goto)?,
                le(&b.state_symbol)?,
                le(&b.kernel_start)?,
                le(&b.kernel_rule)?,
                le(&b.kernel_dot)?,
            ];
            let parsing = PyParsing {
                inner: Arc::new(Lalr::from_built(t, n, &rule_lhs, &rule_rhs, b)),
            };
            items.push(Bound::new(py, parsing)?.into_any());
            let tables = PyTuple::new(py, items)?;
            PyTuple::new(py, [py.None().into_bound(py), tables.into_any()])
        }
        Err(crate::lalr::BuildError::TooLarge { states, cells }) => {
            Err(pyo3::exceptions::PyMemoryError::new_err(format!(
                "its LALR(1) automaton has {states} states, whose tables would take {cells} \
                 cells (at most {})",
                crate::lalr::MAX_TABLE_CELLS
            )))
        }
        Err(crate::lalr::BuildError::Conflict(c)) => {
            let kind = if c.shift_reduce {
                "shift/reduce"
            } else {
                "reduce/reduce"
            };
            let conflict = (kind, c.state, c.symbol, c.first, c.reduce).into_pyobject(py)?;
            PyTuple::new(py, [conflict.into_any(), py.None().into_bound(py)])
        }
    }
}

/// grid-core's `build_trie` arrays for a vocabulary (`crate::trie::RawTrie::pack`):
/// `token_bytes[i]` spells id `i`; ids in `special_ids` and empty spellings are
/// left out. Returns `(edge, token, size, alias_offset, alias_ids)` as
/// little-endian bytes: uint8 edges, int32 for the rest.
#[pyfunction]
fn pack_trie<'py>(
    py: Python<'py>,
    token_bytes: Vec<Bound<'py, PyBytes>>,
    special_ids: Vec<i64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let spellings: Vec<&[u8]> = token_bytes.iter().map(|b| b.as_bytes()).collect();
    let mut special = vec![false; spellings.len()];
    for id in special_ids {
        let slot = usize::try_from(id).ok().and_then(|i| special.get_mut(i));
        *slot.ok_or_else(|| {
            PyValueError::new_err(format!(
                "special id {id} is outside the vocabulary of {} ids",
                spellings.len()
            ))
        })? = true;
    }
    let raw = RawTrie::pack(&spellings, &special);
    let le = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    PyTuple::new(
        py,
        [
            PyBytes::new(py, &raw.edge),
            PyBytes::new(py, &le(&raw.token)),
            PyBytes::new(py, &le(&raw.size)),
            PyBytes::new(py, &le(&raw.alias_offset)),
            PyBytes::new(py, &le(&raw.alias_ids)),
        ],
    )
}

/// grid-core's union DFA of the terminal NFAs (`crate::dfa::build`), the GIL
/// released. The NFAs as flat arrays, per terminal `sizes`, `starts`, `finals`
/// (local ids), per state `eps_len`, `edge_mask` (index of a 32-byte row of
/// `masks`, or -1) and `edge_target` (-1 for none), and `eps_targets`. Returns
/// `(n_states, trans, accept, live)`, `trans` as little-endian int32 bytes,
/// `accept`/`live` as lists of int bitsets; None past `max_states` subsets.
/// `mask_base` (per terminal): the row of `masks` its `edge_mask` values count
/// from. Malformed or untrimmed NFAs are a `ValueError`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn union_dfa<'py>(
    py: Python<'py>,
    sizes: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    finals: &Bound<'py, PyAny>,
    eps_len: &Bound<'py, PyAny>,
    eps_targets: &Bound<'py, PyAny>,
    edge_mask: &Bound<'py, PyAny>,
    edge_target: &Bound<'py, PyAny>,
    masks: &Bound<'py, PyBytes>,
    max_states: usize,
    mask_base: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let raw = crate::dfa::RawUnion {
        mask_base: ints(mask_base, "mask_base")?,
        sizes: ints(sizes, "sizes")?,
        starts: ints(starts, "starts")?,
        finals: ints(finals, "finals")?,
        eps_len: ints(eps_len, "eps_len")?,
        eps_targets: ints(eps_targets, "eps_targets")?,
        edge_mask: ints(edge_mask, "edge_mask")?,
        edge_target: ints(edge_target, "edge_target")?,
        masks: masks.as_bytes().to_vec(),
    };
    let built = py
        .allow_threads(|| {
            crate::dfa::UnionNfa::new(raw).and_then(|u| crate::dfa::build(&u, max_states))
        })
        .map_err(to_pyerr)?;
    let Some(dfa) = built else {
        return Ok(None);
    };
    // Bitsets repeat (most states accept nothing): one Python int per distinct row.
    let mut ints: std::collections::HashMap<Vec<u64>, Bound<'py, PyAny>> = Default::default();
    let mut sets = |rows: &[u64]| -> PyResult<Bound<'py, PyList>> {
        let items = rows
            .chunks_exact(dfa.width)
            .map(|row| match ints.get(row) {
                Some(int) => Ok(int.clone()),
                None => words_to_int(py, row).inspect(|int| {
                    ints.insert(row.to_vec(), int.clone());
                }),
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    };
    let trans: Vec<u8> = dfa.trans.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (accept, live) = (sets(&dfa.accept)?, sets(&dfa.live)?);
    Ok(Some(PyTuple::new(
        py,
        [
            dfa.n_states.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &trans).into_any(),
            accept.into_any(),
            live.into_any(),
        ],
    )?))
}

/// The trimmed Thompson NFA of one pattern (`crate::nfa::thompson`), the GIL
/// released: `program` the pattern program (int32s), `masks` its byte sets in
/// 32-byte little-endian rows. Returns `(start, final, eps_len, eps_targets,
/// edge_mask, edge_target, masks)`, the arrays as little-endian int32 bytes
/// and `masks` as 32-byte rows, or the refusal's name: `"states"` (more than
/// `max_states`), `"empty string"` or `"empty language"`. A malformed program
/// is a `ValueError`.
#[pyfunction]
fn thompson<'py>(
    py: Python<'py>,
    program: &Bound<'py, PyAny>,
    masks: &Bound<'py, PyBytes>,
    max_states: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let program: Vec<i32> = ints(program, "program")?;
    let rows = masks.as_bytes();
    if rows.len() % 32 != 0 {
        return Err(PyValueError::new_err("masks must be 32-byte rows"));
    }
    let rows: Vec<[u8; 32]> = rows
        .chunks_exact(32)
        .map(|r| r.try_into().expect("32 bytes"))
        .collect();
    let built = py
        .allow_threads(|| crate::nfa::thompson(&program, &rows, max_states))
        .map_err(to_pyerr)?;
    let nfa = match built {
        Ok(nfa) => nfa,
        Err(refusal) => {
            let name = match refusal {
                crate::nfa::Refusal::TooManyStates => "states",
                crate::nfa::Refusal::MatchesEmpty => "empty string",
                crate::nfa::Refusal::EmptyLanguage => "empty language",
            };
            return Ok(name.into_pyobject(py)?.into_any());
        }
    };
    let le = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let le_i = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    Ok(PyTuple::new(
        py,
        [
            nfa.start.into_pyobject(py)?.into_any(),
            nfa.final_state.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &le(&nfa.eps_len)).into_any(),
            PyBytes::new(py, &le(&nfa.eps_targets)).into_any(),
            PyBytes::new(py, &le_i(&nfa.edge_mask)).into_any(),
            PyBytes::new(py, &le_i(&nfa.edge_target)).into_any(),
            PyBytes::new(py, &nfa.masks.concat()).into_any(),
        ],
    )?
    .into_any())
}

/// torch's `Tensor` class and the two values a maskable tensor has
/// (`torch.float32`, `torch.strided`), looked up once torch is imported.
struct Torch {
    tensor: Py<PyAny>,
    float32: Py<PyAny>,
    strided: Py<PyAny>,
}

static TORCH: pyo3::sync::GILOnceCell<Torch> = pyo3::sync::GILOnceCell::new();

/// torch's handles, or None while torch is not imported (then no object is a
/// tensor; this never imports it).
fn torch(py: Python<'_>) -> PyResult<Option<&Torch>> {
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    let modules = py.import("sys")?.getattr("modules")?;
    let Some(module) = modules.get_item("torch").ok() else {
        return Ok(None);
    };
    let handles = Torch {
        tensor: module.getattr("Tensor")?.unbind(),
        float32: module.getattr("float32")?.unbind(),
        strided: module.getattr("strided")?.unbind(),
    };
    Ok(Some(TORCH.get_or_init(py, || handles)))
}

/// Hint the CPU to bring the first `bytes` (at most 512 KiB) at `addr` into
/// its caches. A hint only: it never faults, whatever the address (so it may
/// run before the memory is known to be the tensor's), and changes no state.
/// On a SmolLM2 row (196 KB) it took the first pass over the logits from 15 to
/// 8 us, the processor's call 5% (the same questions back to back).
fn prefetch(addr: usize, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..bytes.min(512 << 10)).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults and writes nothing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(addr.wrapping_add(line) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, bytes);
}

/// Float32 logits a call reads or masks in place: a buffer's export (held
/// while the memory is used, so the GIL may be released), or a torch tensor's
/// own memory (used with the GIL held: a tensor has no export to pin it).
struct Logits {
    export: Option<PyBuffer<f32>>,
    addr: usize,
    shape: Vec<usize>,
}

impl Logits {
    /// The logits of `obj`: a C-contiguous float32 buffer (`writable` when the
    /// call writes), or a `torch.Tensor` (that class exactly) on the CPU,
    /// float32, strided, C-contiguous, not requiring grad and without a lazy
    /// negation: what `Tensor.numpy()` would view, read through `data_ptr()`
    /// without making the array (about 20 us after a CPU forward pass). Else a
    /// `LogitsError` (a `TypeError`) saying why: the caller may use torch.
    fn of(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Self> {
        let py = obj.py();
        if let Some(torch) = torch(py)? {
            if obj.get_type().is(torch.tensor.bind(py)) {
                return Self::of_tensor(obj, torch);
            }
        }
        let export = native_buffer::<f32>(obj).ok_or_else(|| {
            let kind = type_name(obj);
            LogitsError::new_err(format!(
                "the logits must be a buffer of float32 (in this machine's byte order) or a \
                 torch.Tensor, not {kind}"
            ))
        })?;
        if !export.is_c_contiguous() {
            return Err(PyValueError::new_err("the logits must be C-contiguous"));
        }
        if writable && export.readonly() {
            return Err(PyTypeError::new_err("the logits buffer is read-only"));
        }
        let (addr, shape) = (export.buf_ptr() as usize, export.shape().to_vec());
        Self::aligned(Self {
            export: Some(export),
            addr,
            shape,
        })
    }

    /// `self`, unless its address is not 4-byte aligned (a slice over it
    /// needs one even when empty).
    fn aligned(self) -> PyResult<Self> {
        if !self.addr.is_multiple_of(4) {
            return Err(PyValueError::new_err("the logits must be 4-byte aligned"));
        }
        Ok(self)
    }

    /// The tensor's address and shape come first: its memory, usually cold
    /// after a forward pass, is then prefetched ([`prefetch`]) while torch is
    /// asked the rest (about 10 us of torch getters, each cold too).
    fn of_tensor(obj: &Bound<'_, PyAny>, torch: &Torch) -> PyResult<Self> {
        let py = obj.py();
        let refuse = |why: &str| Err(LogitsError::new_err(format!("a tensor {why}")));
        let size = obj.getattr(intern!(py, "shape"))?; // a torch.Size: a tuple
        let shape = size
            .downcast::<PyTuple>()?
            .iter()
            .map(|n| n.extract::<usize>())
            .collect::<PyResult<Vec<usize>>>()?;
        let data_ptr = obj.call_method0(intern!(py, "data_ptr"));
        let Ok(addr) = data_ptr.and_then(|p| p.extract::<usize>()) else {
            return refuse("without storage (sparse, or opaque)");
        };
        prefetch(addr, 4 * shape.iter().product::<usize>());
        if !obj.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
            return refuse("not on the CPU");
        }
        if !obj
            .getattr(intern!(py, "dtype"))?
            .is(torch.float32.bind(py))
        {
            return refuse("not of float32");
        }
        if !obj
            .getattr(intern!(py, "layout"))?
            .is(torch.strided.bind(py))
        {
            return refuse("not strided");
        }
        if obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
            return refuse("that requires grad");
        }
        if !obj
            .call_method0(intern!(py, "is_contiguous"))?
            .is_truthy()?
            || obj.call_method0(intern!(py, "is_neg"))?.is_truthy()?
        {
            return refuse("not contiguous, or with a lazy negation");
        }
        Self::aligned(Self {
            export: None,
            addr,
            shape,
        })
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The name of `obj`'s type, for an error message.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// The int32 bitmask buffer of the functions below, C-contiguous and 4-byte
/// aligned (errors name what was passed).
fn mask_buffer(bitmask: &Bound<'_, PyAny>) -> PyResult<PyBuffer<i32>> {
    let words = native_buffer::<i32>(bitmask).ok_or_else(|| {
        let kind = type_name(bitmask);
        PyTypeError::new_err(format!(
            "the bitmask must be a buffer of int32 in this machine's byte order, not {kind}"
        ))
    })?;
    if !words.is_c_contiguous() {
        return Err(PyValueError::new_err("the bitmask must be C-contiguous"));
    }
    if !(words.buf_ptr() as usize).is_multiple_of(4) {
        return Err(PyValueError::new_err("the bitmask must be 4-byte aligned"));
    }
    Ok(words)
}

/// Runs `f`, the GIL released when `logits` are a buffer's export (pinned by
/// it), held when they are a tensor's memory (nothing else then frees it).
fn with_logits<T: Send>(py: Python<'_>, logits: &Logits, f: impl FnOnce() -> T + Send) -> T {
    if logits.export.is_some() {
        py.allow_threads(f)
    } else {
        f()
    }
}

/// `(rows, width)` of a 1-D or 2-D shape.
fn matrix(shape: &[usize], what: &str) -> PyResult<(usize, usize)> {
    match *shape {
        [n] => Ok((1, n)),
        [r, n] => Ok((r, n)),
        ref s => Err(PyValueError::new_err(format!(
            "the {what} must be 1-D or 2-D, not {}-D",
            s.len()
        ))),
    }
}

/// A row's exit intent: the token and the row its mask becomes.
type Exit<'a> = Option<(usize, &'a [u32])>;

/// The exit row of `exit_token` and `exit_row`, given both or neither.
fn exit_of(
    exit_token: Option<usize>,
    exit_row: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<(usize, Vec<u32>)>> {
    match (exit_token, exit_row) {
        (None, None) => Ok(None),
        (Some(token), Some(row)) => {
            let words = native_buffer::<i32>(row).ok_or_else(|| {
                PyTypeError::new_err("exit_row must be a buffer of int32 in this machine's order")
            })?;
            // The words' bits, as the bitmask's are read (bit 31 included).
            let bits = words.to_vec(row.py())?.into_iter().map(|w| w as u32);
            Ok(Some((token, bits.collect())))
        }
        _ => Err(PyTypeError::new_err(
            "give both exit_token and exit_row, or neither",
        )),
    }
}

/// [`apply_token_bitmask`]'s work once its arguments are read: checks the
/// shapes, then takes each row's exit intent and masks it, in place.
fn apply_in_place(
    py: Python<'_>,
    scores: &Logits,
    words: &PyBuffer<i32>,
    exit: Exit<'_>,
) -> PyResult<()> {
    if exit.is_some() && words.readonly() {
        return Err(PyTypeError::new_err(
            "the bitmask buffer is read-only (an exit intent rewrites its rows)",
        ));
    }
    let (rows, width) = matrix(&scores.shape, "logits")?;
    let (mask_rows, n_words) = matrix(words.shape(), "bitmask")?;
    if rows != mask_rows || scores.shape.len() != words.dimensions() {
        return Err(PyValueError::new_err(format!(
            "logits shaped {:?} for a bitmask shaped {:?}",
            scores.shape,
            words.shape()
        )));
    }
    if let Some((_, row)) = exit {
        if row.len() != n_words {
            return Err(PyValueError::new_err(format!(
                "exit_row has {} words for a bitmask of {n_words}",
                row.len()
            )));
        }
    }
    if rows == 0 || width == 0 {
        return Ok(());
    }
    if n_words == 0 {
        return Err(PyValueError::new_err(
            "the bitmask has no words: a row of n_words int32 words masks 32 * n_words tokens",
        ));
    }
    let (out, mask) = (scores.addr, words.buf_ptr() as usize);
    let (out_end, mask_end) = (out + 4 * rows * width, mask + 4 * rows * n_words);
    if out < mask_end && mask < out_end {
        return Err(PyValueError::new_err(
            "the logits and the bitmask share memory: give the bitmask a buffer of its own",
        ));
    }
    with_logits(py, scores, || {
        // SAFETY: `scores` is writable, C-contiguous, aligned memory of
        // `rows * width` float32 and `words` an export of `rows * n_words`
        // int32 (checked above; writable when `exit` is given), both alive
        // until this function returns (a buffer's export pins its memory, a
        // tensor's is not freed while the GIL is held); u32 and i32 share
        // size and alignment. The caller writes neither meanwhile.
        let logits = unsafe { std::slice::from_raw_parts_mut(out as *mut f32, rows * width) };
        if let Some((token, eos_row)) = exit {
            let words = unsafe { std::slice::from_raw_parts_mut(mask as *mut u32, rows * n_words) };
            for (row, mask) in logits.chunks(width).zip(words.chunks_mut(n_words)) {
                crate::apply::exit_intent(row, mask, token, eos_row);
            }
        }
        let words = unsafe { std::slice::from_raw_parts(mask as *const u32, rows * n_words) };
        crate::apply::apply_rows(logits, width, words, n_words);
    });
    Ok(())
}

/// Set every logit of `logits` whose token `bitmask` does not admit to -inf,
/// in place (`crate::apply`), the GIL released for a buffer. `logits`: a
/// writable, C-contiguous float32 buffer, or a CPU float32 contiguous
/// `torch.Tensor` ([`Logits::of`]), shaped `(width,)` or `(batch, width)`;
/// `bitmask`: a C-contiguous int32 buffer shaped `(n_words,)` or `(batch,
/// n_words)`, with as many rows. Columns at or past `32 * n_words` are blocked;
/// a row whose admitted logits hold no finite value gets 0.0 on each of them.
/// With `exit_token` and `exit_row` (a C-contiguous int32 buffer of `n_words`),
/// each row first takes its exit intent (`crate::apply::exit_intent`): where
/// its mask admits `exit_token` and refuses the row's own top token, its row of
/// `bitmask` (then writable) becomes `exit_row`, before the row is masked.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, exit_token = None, exit_row = None))]
fn apply_token_bitmask(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    exit_token: Option<usize>,
    exit_row: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let scores = Logits::of(logits, true)?;
    let words = mask_buffer(bitmask)?;
    let exit = exit_of(exit_token, exit_row)?;
    apply_in_place(
        py,
        &scores,
        &words,
        exit.as_ref().map(|(t, r)| (*t, &r[..])),
    )
}

/// [`apply_token_bitmask`] with its bitmask (and exit intent) held: the
/// rows a processor fills and applies at every step, the bitmask's export
/// taken once (it pins the buffer's memory while this object lives).
#[pyclass(frozen, module = "grid_kernels._native", name = "BitmaskApplier")]
struct PyBitmaskApplier {
    words: PyBuffer<i32>,
    exit: Option<(usize, Vec<u32>)>,
}

#[pymethods]
impl PyBitmaskApplier {
    #[new]
    #[pyo3(signature = (bitmask, exit_token = None, exit_row = None))]
    fn new(
        bitmask: &Bound<'_, PyAny>,
        exit_token: Option<usize>,
        exit_row: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let words = mask_buffer(bitmask)?;
        matrix(words.shape(), "bitmask")?;
        let exit = exit_of(exit_token, exit_row)?;
        Ok(Self { words, exit })
    }

    /// `apply_token_bitmask(logits, bitmask, exit_token, exit_row)` with the
    /// held ones. Precondition: nothing writes the bitmask during the call.
    fn apply(&self, py: Python<'_>, logits: &Bound<'_, PyAny>) -> PyResult<()> {
        let scores = Logits::of(logits, true)?;
        let exit = self.exit.as_ref().map(|(t, r)| (*t, &r[..]));
        apply_in_place(py, &scores, &self.words, exit)
    }
}

/// Greedy choice under a mask (`crate::apply::masked_argmax`), the logits
/// untouched: `logits` one row of float32 ([`Logits::of`]: a C-contiguous
/// buffer or a CPU float32 contiguous `torch.Tensor`), `bitmask` a
/// C-contiguous int32 buffer of its words. The admitted column of the highest
/// logit, the lowest among ties, or None when no admitted logit is finite.
#[pyfunction]
fn masked_argmax(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
) -> PyResult<Option<usize>> {
    let scores = Logits::of(logits, false)?;
    let words = mask_buffer(bitmask)?;
    let (width, n_words) = (scores.len(), words.item_count());
    if width == 0 || n_words == 0 {
        return Ok(None); // nothing admitted (an empty tensor's address may be null)
    }
    let (row, mask) = (scores.addr, words.buf_ptr() as usize);
    Ok(with_logits(py, &scores, || {
        // SAFETY: C-contiguous, aligned memory of `width` float32 and an
        // export of `n_words` int32 (checked above), alive until this
        // function returns (as in `apply_token_bitmask`), only read; u32 and
        // i32 share size and alignment.
        let logits = unsafe { std::slice::from_raw_parts(row as *const f32, width) };
        let words = unsafe { std::slice::from_raw_parts(mask as *const u32, n_words) };
        crate::apply::masked_argmax(logits, words)
    }))
}

/// The first maximum of one row of float32 logits ([`Logits::of`]), a NaN
/// counting as above every number (numpy's and torch's `argmax`); None for
/// an empty row.
#[pyfunction]
fn first_argmax(py: Python<'_>, logits: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let scores = Logits::of(logits, false)?;
    let (width, row) = (scores.len(), scores.addr);
    if width == 0 {
        return Ok(None);
    }
    Ok(Some(with_logits(py, &scores, || {
        // SAFETY: C-contiguous, aligned memory of `width` float32, alive
        // until this function returns (as in `apply_token_bitmask`), only read.
        let logits = unsafe { std::slice::from_raw_parts(row as *const f32, width) };
        crate::apply::first_argmax(logits)
    })))
}

/// A deterministic check that a call releases the GIL (the tests' probe, no
/// timing involved): armed, the GIL-free part of a cold walk, a cold session
/// fill or a batch fill first waits until a *Python* thread calls
/// `_probe_release()`, for at most 30 seconds. If the call held the GIL no
/// Python thread could run meanwhile: the wait times out and `_probe_disarm()`
/// reports it. Unarmed, a probe point is one uncontended lock.
mod gil_probe {
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    #[derive(Default)]
    pub struct Probe {
        released: Mutex<bool>,
        cv: Condvar,
        reached: Mutex<bool>,
        timed_out: Mutex<bool>,
    }

    pub static PROBE: Mutex<Option<Arc<Probe>>> = Mutex::new(None);

    fn get<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for the release if armed (see the module doc).
    pub fn point() {
        let Some(p) = get(&PROBE).clone() else {
            return;
        };
        *get(&p.reached) = true;
        let guard = get(&p.released);
        let (guard, wait) =
            p.cv.wait_timeout_while(guard, Duration::from_secs(30), |released| !*released)
                .unwrap_or_else(|e| e.into_inner());
        drop(guard);
        if wait.timed_out() {
            *get(&p.timed_out) = true;
        }
    }

    pub fn arm() {
        *get(&PROBE) = Some(Arc::new(Probe::default()));
    }

    pub fn reached() -> bool {
        get(&PROBE).as_ref().is_some_and(|p| *get(&p.reached))
    }

    pub fn release() {
        if let Some(p) = get(&PROBE).clone() {
            *get(&p.released) = true;
            p.cv.notify_all();
        }
    }

    /// Disarm; whether a probe point timed out (the GIL was held).
    pub fn disarm() -> bool {
        get(&PROBE).take().is_some_and(|p| *get(&p.timed_out))
    }
}

/// Arm the GIL probe (tests only; see `gil_probe`).
#[pyfunction]
fn _probe_arm() {
    gil_probe::arm();
}

/// A call reached an armed probe point.
#[pyfunction]
fn _probe_reached() -> bool {
    gil_probe::reached()
}

/// Let the call waiting at the probe point go on.
#[pyfunction]
fn _probe_release() {
    gil_probe::release();
}

/// Disarm the probe; True if a probe point timed out (its call held the GIL).
#[pyfunction]
fn _probe_disarm() -> bool {
    gil_probe::disarm()
}

/// The lexicon trie `EngineTables(lexicon_words=...)` builds, as grid-core's
/// `Lexicon` holds it: (children as dicts byte -> node, prefix categories, word
/// categories as int bitsets). grid-core's differential tests compare it with
/// `build_lexicon`'s, node for node.
#[pyfunction]
#[pyo3(signature = (words, n_terminals))]
fn lexicon_trie<'py>(
    py: Python<'py>,
    words: &Bound<'py, PyAny>,
    n_terminals: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let w = bits::width_for(n_terminals + 1);
    let words = lexicon_words_of(words)?;
    let mut categories = vec![0u64; w];
    for (t, _) in &words {
        if *t < n_terminals {
            bits::set(&mut categories, *t);
        }
    }
    let lexicon = Lexicon::from_words(&words, categories, n_terminals, w).map_err(to_pyerr)?;
    let (kids, prefix, whole) = (PyList::empty(py), PyList::empty(py), PyList::empty(py));
    for node in 0..lexicon.n_nodes() {
        let d = PyDict::new(py);
        for (b, c) in lexicon.edges(node) {
            d.set_item(b, c)?;
        }
        kids.append(d)?;
        prefix.append(words_to_int(py, lexicon.prefix_cats(node))?)?;
        whole.append(words_to_int(py, lexicon.word_cats(node))?)?;
    }
    PyTuple::new(py, [kids.into_any(), prefix.into_any(), whole.into_any()])
}

// ------------------------------------------------------------------ column scope

/// `spec[key]`, extracted; a missing key names itself.
fn spec_item<'py, T: FromPyObject<'py>>(spec: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    spec.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("scope spec: no {key:?}")))?
        .extract()
        .map_err(|e| PyValueError::new_err(format!("scope spec {key:?}: {e}")))
}

/// A [`ScopeSpec`] from `ScopedEngines.scope_spec()`'s dict.
fn scope_spec_of(spec: &Bound<'_, PyDict>) -> PyResult<ScopeSpec> {
    let terms = Terms {
        lpar: spec_item(spec, "lpar")?,
        rpar: spec_item(spec, "rpar")?,
        table: spec_item(spec, "table")?,
        alias: spec_item(spec, "alias")?,
        qualifier: spec_item(spec, "qualifier")?,
        as_: spec_item(spec, "as")?,
        column: spec_item(spec, "column")?,
        values: spec_item(spec, "values")?,
        post: spec_item(spec, "post")?,
        limit: spec_item(spec, "limit")?,
        from_states: spec_item(spec, "from_states")?,
        select_first_states: spec_item(spec, "select_first_states")?,
        select_after_from_states: spec_item(spec, "select_after_from_states")?,
        order_states: spec_item(spec, "order_states")?,
    };
    type RawTable = (String, Vec<(String, Vec<Vec<u8>>)>, Vec<String>);
    let tables: Vec<RawTable> = spec_item(spec, "tables")?;
    Ok(ScopeSpec {
        terms,
        covering: spec_item(spec, "covering")?,
        unambiguous: spec_item(spec, "unambiguous")?,
        joins_see_right: spec_item(spec, "joins_see_right")?,
        tables: tables
            .into_iter()
            .map(|(name, columns, granted)| TableSpec {
                name,
                columns,
                granted,
            })
            .collect(),
        table_words: spec_item(spec, "table_words")?,
        alias_words: spec_item(spec, "alias_words")?,
        qualifier_words: spec_item(spec, "qualifier_words")?,
        column_words: spec_item(spec, "column_words")?,
        safe: spec_item(spec, "safe")?,
        own_alias: spec_item(spec, "own_alias")?,
        alias_names: spec_item(spec, "alias_names")?,
    })
}

/// grid-sql's scoped engines natively (`ScopedEngines`: the base engine's
/// tables with the lexicon of each scope, [`crate::scoped`]): built from the
/// base engine's tables, `ScopedEngines.scope_spec()` and the base lexicon's
/// words per category terminal.
#[pyclass(frozen, module = "grid_kernels._native", name = "ScopedEngines")]
struct PyScopedEngines {
    inner: Arc<ScopedEngines>,
}

#[pymethods]
impl PyScopedEngines {
    /// `reserve(words)`: the grammar-level reserve tables of the engine with
    /// `words` (per category terminal, `(id, [bytes])`), as
    /// `EngineTables.reserve`'s first nine arguments (grid-core's
    /// `ReserveTable.raw()`); called with the GIL once per scope lexicon whose
    /// reserve mode 1 asks for. None: the sessions have no reserve source.
    #[new]
    #[pyo3(signature = (base, spec, words, reserve = None))]
    fn new(
        base: &PyEngineTables,
        spec: &Bound<'_, PyDict>,
        words: &Bound<'_, PyAny>,
        reserve: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let spec = scope_spec_of(spec)?;
        let words = lexicon_words_of(words)?;
        let provider = reserve.map(|f| -> ReserveProvider {
            Box::new(move |words: &[(usize, Vec<Vec<u8>>)]| {
                Python::with_gil(|py| -> PyResult<RawReserve> {
                    let arg = PyList::empty(py);
                    for (t, ws) in words {
                        let ws = PyList::new(py, ws.iter().map(|w| PyBytes::new(py, w)))?;
                        arg.append((*t, ws))?;
                    }
                    type Raw = (
                        Vec<Option<Vec<u32>>>,
                        Vec<Vec<u32>>,
                        Vec<i32>,
                        Vec<Vec<u32>>,
                        u64,
                        Vec<Vec<(u64, u32, u32, u32)>>,
                        Vec<(u8, Vec<u8>)>,
                        Vec<u32>,
                        Vec<Option<(u8, Vec<u32>)>>,
                    );
                    let raw: Raw = f.call1(py, (arg,))?.extract(py)?;
                    Ok(RawReserve {
                        term_tokens: raw.0,
                        lead_tokens: raw.1,
                        nt_rule: raw.2,
                        rhs: raw.3,
                        start_cost: raw.4,
                        items: raw.5,
                        classes: raw.6,
                        safe: raw.7,
                        bare: raw.8,
                    })
                })
                .map_err(|e| KernelError::InvalidTables {
                    table: "reserve",
                    detail: format!("the scope lexicon's reserve tables: {e}"),
                })
            })
        });
        let inner =
            ScopedEngines::new(Arc::clone(&base.inner), spec, words, provider).map_err(to_pyerr)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// A session at the start of a statement; its walks are cached under
    /// `namespace`; `audit` turns its records on.
    #[pyo3(signature = (namespace = 0, audit = true))]
    fn session(&self, namespace: u64, audit: bool) -> PyResult<PyScopedSession> {
        let inner =
            ScopedSession::new(Arc::clone(&self.inner), namespace, audit).map_err(to_pyerr)?;
        Ok(PyScopedSession { inner })
    }

    /// Distinct scope lexicons built so far.
    #[getter]
    fn engines_built(&self) -> usize {
        self.inner.engines_built()
    }
}

/// One request's scoped guide (`grid_sql.column_scope.ScopedGuide`), each
/// step one call into Rust, its audit records included.
#[pyclass(module = "grid_kernels._native", name = "ScopedSession")]
struct PyScopedSession {
    inner: ScopedSession,
}

#[pymethods]
impl PyScopedSession {
    /// Accept one token (`kind`: sampled, forced or reserve; EOS is recorded
    /// as eos).
    #[pyo3(
        signature = (token, kind = AuditKind::SAMPLED),
        text_signature = "($self, token, kind='sampled')"
    )]
    fn accept_token(&mut self, token: &Bound<'_, PyAny>, kind: AuditKind) -> PyResult<()> {
        let Wide(t) = token.extract()?;
        let kind = kind.0?;
        self.inner
            .accept_token(t, kind)
            .map_err(|e| with_token(e, token))
    }

    /// Write the mask into row `row` of `bitmask` (int32, C-contiguous).
    #[pyo3(signature = (bitmask, row = Wide(0)), text_signature = "($self, bitmask, row=0)")]
    fn fill_next_token_bitmask(&mut self, bitmask: &Bound<'_, PyAny>, row: Wide) -> PyResult<()> {
        let n_words = self.inner.n_words();
        let buf = bitmask_export(bitmask, n_words)?;
        let offset = bitmask_row(&buf, row.0, n_words)?;
        // SAFETY: `buf` is a writable, C-contiguous, 4-byte-aligned export of
        // at least `offset + n_words` int32 items (checked above), held for
        // this call; u32 and i32 share size and alignment. The fill writes the
        // row only once it has the whole mask (an error leaves it untouched).
        let out: &mut [u32] = unsafe {
            std::slice::from_raw_parts_mut((buf.buf_ptr() as *mut u32).add(offset), n_words)
        };
        self.inner.fill(out).map_err(to_pyerr)
    }

    /// The admitted token ids, ascending (EOS ids when EOS is legal).
    fn mask_ids(&mut self) -> PyResult<Vec<u32>> {
        let mut row = vec![0u32; self.inner.n_words()];
        self.inner.fill(&mut row).map_err(to_pyerr)?;
        Ok(row_ids(&row))
    }

    fn eos_allowed(&mut self) -> PyResult<bool> {
        self.inner.eos_allowed().map_err(to_pyerr)
    }

    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    /// Undo the last `n` accepted tokens.
    #[pyo3(signature = (n = Wide(1)), text_signature = "($self, n=1)")]
    fn rollback(&mut self, n: Wide) -> PyResult<()> {
        let steps = self.inner.steps();
        let n = usize::try_from(n.0).map_err(|_| {
            to_pyerr(KernelError::guide(
                steps,
                None,
                format!("cannot roll back {} of {steps} tokens", n.0),
            ))
        })?;
        self.inner.rollback(n).map_err(to_pyerr)
    }

    fn fork(&self) -> PyScopedSession {
        PyScopedSession {
            inner: self.inner.fork(),
        }
    }

    /// Tokens accepted so far (EOS included).
    #[getter]
    fn steps(&self) -> usize {
        self.inner.steps()
    }

    #[getter]
    fn n_words(&self) -> usize {
        self.inner.n_words()
    }

    /// The current configuration: (LALR states bottom first, remainder).
    fn config<'py>(&self, py: Python<'py>) -> (Vec<u32>, Bound<'py, PyBytes>) {
        let (states, remainder) = self.inner.config();
        (states, PyBytes::new(py, &remainder))
    }

    /// Mode 1's reserve source, and its start: this session's configuration.
    fn reserve_source(&self) -> (PyScopedReserve, PyScopedState) {
        let (inner, state) = self.inner.reserve_source();
        let stacks = Arc::clone(inner.stacks());
        (
            PyScopedReserve {
                inner: Arc::new(inner),
            },
            PyScopedState {
                inner: state,
                stacks,
            },
        )
    }

    /// The scope of the pending lexeme (the scope machine's ids, `crate::scope::Machine`).
    #[getter]
    fn scope(&self) -> u32 {
        self.inner.scope()
    }

    fn output<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.output())
    }

    #[getter]
    fn audited(&self) -> bool {
        self.inner.audited()
    }

    /// (configuration hash, mask entry id hex, blocked count) of the current
    /// step once its mask is filled; None before.
    fn step_audit(&self) -> Option<(u64, String, u32)> {
        self.inner
            .step_audit()
            .map(|(h, id, blocked)| (h, audit::hex(&id), blocked))
    }

    /// The records as `grid_core.audit.AuditLog.lines()` writes them, joined
    /// by `\n`, and the chain's head hash (hex); None with audit off.
    fn audit_lines<'py>(&mut self, py: Python<'py>) -> Option<(Bound<'py, PyBytes>, String)> {
        Some(chain_lines(py, self.inner.chain()?))
    }
}

/// Mode 1's reserve over the scoped language (`ScopedReserve`), natively.
#[pyclass(frozen, module = "grid_kernels._native", name = "ScopedReserve")]
struct PyScopedReserve {
    inner: Arc<ScopedReserve>,
}

/// A state of the scoped lexer (stack, scope, remainder) a [`PyScopedReserve`] prices.
#[pyclass(frozen, module = "grid_kernels._native", name = "ScopedState")]
struct PyScopedState {
    inner: ScopedState,
    /// The arena generation its stack node lives in (its reserve's).
    stacks: Arc<Mutex<Stacks>>,
}

#[pymethods]
impl PyScopedState {
    /// The remainder's bytes.
    #[getter]
    fn remainder<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.remainder)
    }

    /// The scope (the scope machine's ids, `crate::scope::Machine`).
    #[getter]
    fn scope(&self) -> u32 {
        self.inner.scope
    }
}

impl PyScopedReserve {
    /// `state`'s own state, checked to be of this reserve's arena generation
    /// (its stack node names a stack there only).
    fn own<'s>(&self, state: &'s PyScopedState) -> PyResult<&'s ScopedState> {
        if !Arc::ptr_eq(&state.stacks, self.inner.stacks()) {
            return Err(PyValueError::new_err(
                "this state was made by another reserve source (another engine or arena)",
            ));
        }
        Ok(&state.inner)
    }
}

#[pymethods]
impl PyScopedReserve {
    /// The state after `token`, None where the scoped lexer refuses it.
    fn advance(&self, state: &PyScopedState, token: u32) -> PyResult<Option<PyScopedState>> {
        let next = self
            .inner
            .advance(self.own(state)?, token)
            .map_err(to_pyerr)?;
        let stacks = Arc::clone(&state.stacks);
        Ok(next.map(|inner| PyScopedState { inner, stacks }))
    }

    /// Tokens of the simulated completion (EOS not counted);
    /// `grid_core.reserve.INF` where none is written.
    fn reserve(&self, state: &PyScopedState) -> PyResult<u64> {
        self.inner.reserve(self.own(state)?).map_err(to_pyerr)
    }

    /// That completion's token ids, or None where there is none.
    fn completion(&self, state: &PyScopedState) -> PyResult<Option<Vec<u32>>> {
        let got = self.inner.completion(self.own(state)?).map_err(to_pyerr)?;
        Ok(got.map(|c| c.to_vec()))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI_VERSION", crate::ABI_VERSION)?;
    m.add("SessionError", m.py().get_type::<SessionError>())?;
    m.add("LogitsError", m.py().get_type::<LogitsError>())?;
    m.add_class::<PyTrieTables>()?;
    m.add_class::<PyEngineTables>()?;
    m.add_class::<PyLexing>()?;
    m.add_class::<PyParsing>()?;
    m.add_class::<PySharedWalks>()?;
    m.add_class::<PyRemoteWalks>()?;
    m.add_function(wrap_pyfunction!(attach_remote, m)?)?;
    m.add_class::<PySession>()?;
    m.add_class::<PyEventTables>()?;
    m.add_class::<PyReserve>()?;
    m.add_class::<PyReserveState>()?;
    m.add_class::<PyEntry>()?;
    m.add_class::<PyScopedEngines>()?;
    m.add_class::<PyScopedSession>()?;
    m.add_class::<PyScopedReserve>()?;
    m.add_class::<PyScopedState>()?;
    m.add_class::<PyBitmaskApplier>()?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(apply_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(masked_argmax, m)?)?;
    m.add_function(wrap_pyfunction!(first_argmax, m)?)?;
    m.add_function(wrap_pyfunction!(union_dfa, m)?)?;
    m.add_function(wrap_pyfunction!(thompson, m)?)?;
    m.add_function(wrap_pyfunction!(pack_trie, m)?)?;
    m.add_function(wrap_pyfunction!(lalr_tables, m)?)?;
    m.add_function(wrap_pyfunction!(lexicon_trie, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_arm, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_reached, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_release, m)?)?;
    m.add_function(wrap_pyfunction!(_probe_disarm, m)?)?;
    Ok(())
}
