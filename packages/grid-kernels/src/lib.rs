//! GRID kernels: the algorithmic core, free of pyo3.
//!
//! This crate is a skeleton until the kernels issue lands: it exposes the ABI
//! version that `grid_core` checks before it trusts a compiled module, so that a
//! stale build is refused instead of silently used.

#[cfg(feature = "python")]
mod python;

/// Version of the table and buffer layout shared with `grid_core`.
pub const ABI_VERSION: u32 = 0;

#[cfg(test)]
mod tests {
    #[test]
    fn abi_version_is_zero_until_kernels_land() {
        assert_eq!(super::ABI_VERSION, 0);
    }
}
