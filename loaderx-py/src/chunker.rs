//! mmap-chunker 0.2.6's planning for Python: the ranges `loaderx partition` prints.

use pyo3::prelude::*;

use crate::errors::{PlanningError, chain};

/// The reference's ABI version (v1.3), reported as its Python package does.
const ABI_VERSION: u32 = 0x0001_0003;
/// Zero copy, configurable delimiter, error strings, fixed-size chunking, record partitioning,
/// multi-byte delimiter: the reference's six capability bits.
const CAPABILITIES: u32 = 0x3F;

/// `(index, start, end, length)` of each record-aligned range of `path` for `parts` workers,
/// records ending at `delimiter`; the file is mapped, planned and released inside the call.
#[pyfunction]
pub fn plan_file(
    py: Python<'_>,
    path: std::path::PathBuf,
    parts: usize,
    delimiter: u8,
) -> PyResult<Vec<(u64, u64, u64, u64)>> {
    let ranges = py
        .detach(|| loaderx_core::framing::plan_file(&path, parts, delimiter))
        .map_err(|e| PlanningError::new_err(format!("native partition planning failed: {}", chain(&e))))?;
    Ok(ranges.into_iter().map(|r| (r.index, r.start, r.end, r.length)).collect())
}

/// The C ABI version this planning follows.
#[pyfunction]
pub fn abi_version() -> u32 {
    ABI_VERSION
}

/// The capability bits of that ABI.
#[pyfunction]
pub fn capabilities() -> u32 {
    CAPABILITIES
}
