//! The Zsampler: batches of indices as a pure function of (seed, step).

use loaderx_core::{Sampler as CoreSampler, SamplerMode};
use numpy::{PyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// A stateless, resumable index sampler over `0..length`.
///
/// Threads (free-threaded audit): immutable; a batch is a pure function of (seed, step), so any
/// number of threads draw at once. A caller's `out` array is borrowed through NumPy's borrow
/// flags (a second writer into the same array at once is refused, not raced).
#[pyclass(module = "loaderx._native", frozen)]
pub struct Sampler {
    inner: CoreSampler,
}

/// `mode` by name: sequential, iid, cyclic (core's one table, `SamplerMode::ALL`).
pub fn mode(name: &str) -> PyResult<SamplerMode> {
    name.parse::<SamplerMode>().map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (length, batch_size, mode_name, seed, rank = 0, world = 1))]
    fn new(
        length: u32,
        batch_size: u32,
        mode_name: &str,
        seed: u64,
        rank: u32,
        world: u32,
    ) -> PyResult<Self> {
        let inner = CoreSampler::builder(length)
            .batch_size(batch_size)
            .mode(mode(mode_name)?)
            .seed(seed)
            .rank(rank)
            .world(world)
            .build()
            .py()?;
        Ok(Sampler { inner })
    }

    /// The indices of `step` as a new `uint32` array.
    fn batch<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let mut out = vec![0u32; self.inner.local_batch_size() as usize];
        crate::fork::detach(py, || self.inner.fill(step, &mut out))?.py()?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The indices of `step` written into `out` (a writable, contiguous `uint32` array of the
    /// batch's length).
    fn batch_into(&self, py: Python<'_>, step: u64, mut out: PyReadwriteArray1<'_, u32>) -> PyResult<()> {
        let dst = out.as_slice_mut().map_err(|_| {
            PyValueError::new_err("out must be a writable, C-contiguous, aligned uint32 array")
        })?;
        crate::fork::detach(py, || self.inner.fill(step, dst))?.py()
    }

    /// Indices per batch on this rank.
    #[getter]
    fn batch_size(&self) -> u32 {
        self.inner.local_batch_size()
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }
}
