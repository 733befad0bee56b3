//! Store sets from Python: the parts a distributed write produced, stitched into one dataset.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Writes a store set at `out` listing the datasets `parts` in order (the engine's `stitch`):
/// the parts stay where they are, the set's manifest names them relative to `out`. Returns
/// `(parts, records)`.
#[pyfunction]
pub fn stitch(py: Python<'_>, parts: Vec<PathBuf>, out: PathBuf) -> PyResult<(usize, u64)> {
    let summary = py.detach(|| loaderx_core::stitch(&parts, &out)).py()?;
    Ok((summary.parts, summary.records))
}

/// The parts of the store set in `dir` as its manifest lists them: `(path relative to dir,
/// records)`, or `None` when `dir` holds no set. Only the manifest is read.
#[pyfunction]
pub fn set_parts(py: Python<'_>, dir: PathBuf) -> PyResult<Option<Vec<(String, u64)>>> {
    py.detach(|| loaderx_core::set_parts(&dir)).py()
}
