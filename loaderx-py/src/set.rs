//! Store sets from Python: the parts a distributed write produced, stitched into one dataset.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Writes a store set at `out` listing the datasets `parts` in order (the engine's `stitch`):
/// the parts stay where they are, the set's manifest names them relative to `out`. Returns
/// `(parts, records)`.
#[pyfunction]
pub fn stitch(py: Python<'_>, parts: Vec<PathBuf>, out: PathBuf) -> PyResult<(usize, u64)> {
    let summary = crate::fork::detach(py, || loaderx_core::stitch(&parts, &out))?.py()?;
    Ok((summary.parts, summary.records))
}

/// The parts of the store set in `dir` as its manifest lists them: `(path relative to dir,
/// records)`, or `None` when `dir` holds no set. Only the manifest is read.
#[pyfunction]
pub fn set_parts(py: Python<'_>, dir: PathBuf) -> PyResult<Option<Vec<(String, u64)>>> {
    crate::fork::detach(py, || loaderx_core::set_parts(&dir))?.py()
}

/// Object storage for the distributed writers of `loaderx.ray`: a finished local store pushed,
/// a set stitched over pushed parts, and the listing and removal they clean up with.
#[cfg(feature = "remote")]
pub mod remote {
    use std::path::PathBuf;

    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    use crate::dataset::remote_options;
    use crate::errors::IntoPy;

    /// Uploads the local store (or set) `dir` to `url` (the engine's `push`); returns the bytes.
    #[pyfunction]
    #[pyo3(signature = (dir, url, remote=None))]
    pub fn push(
        py: Python<'_>,
        dir: PathBuf,
        url: String,
        remote: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u64> {
        let options = remote_options(remote)?;
        crate::fork::detach(py, || loaderx_core::remote::push(&dir, &url, options, |_| {}))?.py()
    }

    /// Writes a store set at the URL `out` over the stores at the URLs `parts`, in order (the
    /// engine's `stitch_remote`); returns `(parts, records)`.
    #[pyfunction]
    #[pyo3(signature = (parts, out, remote=None))]
    pub fn stitch_remote(
        py: Python<'_>,
        parts: Vec<String>,
        out: String,
        remote: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(usize, u64)> {
        let options = remote_options(remote)?;
        let s = crate::fork::detach(py, || loaderx_core::stitch_remote(&parts, &out, options))?.py()?;
        Ok((s.parts, s.records))
    }

    /// The directories directly under the URL `url`, sorted.
    #[pyfunction]
    #[pyo3(signature = (url, remote=None))]
    pub fn list_remote_dirs(
        py: Python<'_>,
        url: String,
        remote: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<String>> {
        let options = remote_options(remote)?;
        crate::fork::detach(py, || loaderx_core::remote::list_dirs(&url, options))?.py()
    }

    /// The URLs of the parts the store set at the URL `url` names; None when there is no set
    /// manifest there (for the Ray sink's reruns: a column's set it may remove).
    #[pyfunction]
    #[pyo3(signature = (url, remote=None))]
    pub fn remote_set_parts(
        py: Python<'_>,
        url: String,
        remote: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<Vec<String>>> {
        let options = remote_options(remote)?;
        let parts = crate::fork::detach(py, || loaderx_core::remote_set_parts(&url, &options))?.py()?;
        Ok(parts.map(|parts| parts.into_iter().map(|p| p.url).collect()))
    }

    /// The objects directly under the URL `url` (as a directory), sorted.
    #[pyfunction]
    #[pyo3(signature = (url, remote=None))]
    pub fn list_remote_objects(
        py: Python<'_>,
        url: String,
        remote: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<String>> {
        let options = remote_options(remote)?;
        crate::fork::detach(py, || loaderx_core::remote::list_objects(&url, options))?.py()
    }

    /// Removes every object under the URL `url` (as a directory); returns how many.
    #[pyfunction]
    #[pyo3(signature = (url, remote=None))]
    pub fn remove_remote(py: Python<'_>, url: String, remote: Option<&Bound<'_, PyDict>>) -> PyResult<u64> {
        let options = remote_options(remote)?;
        crate::fork::detach(py, || loaderx_core::remote::remove_prefix(&url, options))?.py()
    }
}
