//! The only pyo3 code: converts types and errors, nothing else.

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI_VERSION", crate::ABI_VERSION)?;
    Ok(())
}
