//! `LoaderBuilder`: the loader's settings one call each, as core's [`LoaderBuilder`] takes them
//! (the Python `DataLoader` turns its keyword arguments into these calls), and the Python
//! defaults and the `state=` checks applied at `build`.

use loaderx_core::{LoaderBuilder as Core, LoaderState, Pack, Pad, Pass, SamplerMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::dataset::{Dense, Ragged};
use crate::errors::IntoPy;
use crate::loader::Loader;
use crate::sampler::mode;

/// The seed's defaults, for settings neither given nor taken from a saved state.
const DEFAULT_BATCH_SIZE: usize = 256;
const DEFAULT_SEED: u64 = 42;

/// A stream given to the loader: a dense or a ragged dataset.
#[derive(FromPyObject)]
enum Stream<'py> {
    Dense(PyRef<'py, Dense>),
    Ragged(PyRef<'py, Ragged>),
    #[cfg(feature = "images")]
    Images(PyRef<'py, crate::vision::Images>),
}

/// The settings a saved state decides: those given are checked against it at `build`.
#[derive(Debug, Clone, Default)]
struct Given {
    batch_size: Option<usize>,
    mode: Option<SamplerMode>,
    seed: Option<u64>,
    start_step: Option<u64>,
}

/// Core's loader builder, one setting a call; `build` starts the loader. Each call returns the
/// builder, so calls chain.
///
/// Threads (free-threaded audit): not frozen: each setter borrows the builder mutably through
/// PyO3's borrow flag (atomic on free-threaded builds), so a setter racing another thread's is
/// refused with "Already borrowed", never a data race. A builder is meant for one thread; the
/// loader it builds is for any number.
#[pyclass(module = "loaderx._native", name = "LoaderBuilder")]
#[derive(Debug, Clone, Default)]
pub struct Builder {
    inner: Core,
    given: Given,
    state: Option<LoaderState>,
}

impl Builder {
    /// Applies `f` to the core builder.
    fn with(mut slf: PyRefMut<'_, Self>, f: impl FnOnce(Core) -> Core) -> PyRefMut<'_, Self> {
        let inner = std::mem::take(&mut slf.inner);
        slf.inner = f(inner);
        slf
    }
}

#[pymethods]
impl Builder {
    #[new]
    fn new() -> Self {
        Builder::default()
    }

    /// A weighted mixture of `sources` (each a builder holding the same stream names, padded
    /// alike): each batch draws from them in proportion to the weights.
    #[staticmethod]
    fn mixture(sources: Vec<(f64, PyRef<'_, Builder>)>) -> PyResult<Builder> {
        let sources = sources.into_iter().map(|(w, b)| (w, b.inner.clone())).collect();
        Ok(Builder { inner: Core::mixture(sources).py()?, ..Builder::default() })
    }

    /// Adds the stream `name`: a dense or ragged dataset, gathered at the same indices as the
    /// others.
    fn stream<'py>(slf: PyRefMut<'py, Self>, name: &str, dataset: Stream<'_>) -> PyRefMut<'py, Self> {
        match dataset {
            Stream::Dense(d) => {
                let d = d.source.clone();
                Builder::with(slf, |b| b.stream(name, d))
            }
            Stream::Ragged(r) => {
                let r = r.source.clone();
                Builder::with(slf, |b| b.ragged_stream(name, r))
            }
            #[cfg(feature = "images")]
            Stream::Images(i) => {
                let (source, pipeline) = (i.source.clone(), i.pipeline.clone());
                Builder::with(slf, |b| b.image_stream(name, source, pipeline))
            }
        }
    }

    /// Pads the ragged stream `name` to `length` rows (None: the longest record of the batch)
    /// with `value`; a longer record is an error unless `truncate`.
    #[pyo3(signature = (name, length = None, value = 0.0, truncate = false))]
    fn pad<'py>(
        slf: PyRefMut<'py, Self>,
        name: &str,
        length: Option<usize>,
        value: f64,
        truncate: bool,
    ) -> PyRefMut<'py, Self> {
        let p = length.map_or_else(Pad::longest, Pad::length).value(value).truncate(truncate);
        Builder::with(slf, |b| b.pad(name, p))
    }

    /// The global batch size (default 256).
    fn batch_size(mut slf: PyRefMut<'_, Self>, n: usize) -> PyRefMut<'_, Self> {
        slf.given.batch_size = Some(n);
        slf
    }

    /// Prefetch threads.
    fn threads(slf: PyRefMut<'_, Self>, n: usize) -> PyRefMut<'_, Self> {
        Builder::with(slf, |b| b.threads(n))
    }

    /// Batches each thread keeps ready.
    fn prefetch(slf: PyRefMut<'_, Self>, depth: usize) -> PyRefMut<'_, Self> {
        Builder::with(slf, |b| b.prefetch(depth))
    }

    /// The sampler's mode by name (`_native.SAMPLER_MODES`; default cyclic).
    fn mode<'py>(mut slf: PyRefMut<'py, Self>, name: &str) -> PyResult<PyRefMut<'py, Self>> {
        slf.given.mode = Some(mode(name)?);
        Ok(slf)
    }

    /// The sampler's seed (default 42).
    fn seed(mut slf: PyRefMut<'_, Self>, seed: u64) -> PyRefMut<'_, Self> {
        slf.given.seed = Some(seed);
        slf
    }

    /// This process's rank and the number of ranks sharing each global batch.
    fn shard(slf: PyRefMut<'_, Self>, rank: u32, world: u32) -> PyRefMut<'_, Self> {
        Builder::with(slf, |b| b.shard(rank, world))
    }

    /// Rank and world from torchrun's or Slurm's variables.
    fn shard_from_env(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        let inner = std::mem::take(&mut slf.inner);
        slf.inner = inner.shard_from_env().py()?;
        Ok(slf)
    }

    /// A finite pass of `epochs` epochs (None: without end) instead of the endless sampler,
    /// shuffled or in order, the last partial batch kept unless `drop_last`.
    #[pyo3(signature = (shuffle = true, epochs = Some(1), drop_last = false))]
    fn finite(
        slf: PyRefMut<'_, Self>,
        shuffle: bool,
        epochs: Option<u64>,
        drop_last: bool,
    ) -> PyRefMut<'_, Self> {
        let pass = if shuffle { Pass::shuffled() } else { Pass::ordered() };
        Builder::with(slf, |b| b.pass(pass.epochs(epochs).drop_last(drop_last)))
    }

    /// Packs the ragged token stream `name` into rows of `length` tokens (`split` cuts samples
    /// at row ends).
    #[pyo3(signature = (name, length, split = false))]
    fn pack<'py>(slf: PyRefMut<'py, Self>, name: &str, length: u32, split: bool) -> PyRefMut<'py, Self> {
        Builder::with(slf, |b| b.pack(name, Pack::new(length).split(split)))
    }

    /// Groups records of similar lengths of the ragged stream `name` within windows of
    /// `window` batches.
    fn bucket<'py>(slf: PyRefMut<'py, Self>, name: &str, window: u32) -> PyRefMut<'py, Self> {
        Builder::with(slf, |b| b.bucket(name, window))
    }

    /// Resumes from a saved state (bytes of `Loader.state`): its sampler and step are the
    /// loader's, and a batch size, mode, seed or start step given that it contradicts is a
    /// `ValueError` at `build`.
    fn state<'py>(mut slf: PyRefMut<'py, Self>, saved: &[u8]) -> PyResult<PyRefMut<'py, Self>> {
        let saved = LoaderState::from_bytes(saved)
            .map_err(|e| PyValueError::new_err(loaderx_core::error_chain(&e)))?;
        slf.state = Some(saved);
        Ok(slf)
    }

    /// The first step to deliver (default 0).
    fn start_step(mut slf: PyRefMut<'_, Self>, step: u64) -> PyRefMut<'_, Self> {
        slf.given.start_step = Some(step);
        slf
    }

    /// Starts the loader; `transform` (a callable taking the batch dict) runs on its threads.
    #[pyo3(signature = (transform = None))]
    fn build(&self, py: Python<'_>, transform: Option<Py<PyAny>>) -> PyResult<Loader> {
        let g = &self.given;
        if let Some(saved) = &self.state {
            contradictions(saved, g)?;
        }
        // JAX's CPU client adopts a NumPy buffer only when it is 64-byte aligned (it copies
        // any other): every dense batch starts there, for a few bytes of slack a batch.
        let mut b = self.inner.clone().batch_alignment(64);
        // A restored state brings its own sampler: only the settings given are named beside it
        // (and agree with it, as checked above).
        let defaults = self.state.is_none();
        if let Some(n) = g.batch_size.or(defaults.then_some(DEFAULT_BATCH_SIZE)) {
            b = b.batch_size(n);
        }
        if let Some(mode) = g.mode.or(defaults.then_some(SamplerMode::Cyclic)) {
            b = b.mode(mode);
        }
        if let Some(seed) = g.seed.or(defaults.then_some(DEFAULT_SEED)) {
            b = b.seed(seed);
        }
        if let Some(saved) = &self.state {
            b = b.state(saved.clone());
        }
        if let Some(step) = g.start_step {
            b = b.start_step(step);
        }
        Loader::start(py, b, transform)
    }
}

/// `ValueError` naming every setting given beside a saved state that the state contradicts: a
/// restored state's sampler and step are the loader's, so such a setting would be dropped
/// without a word. Settings not given are taken from the state.
fn contradictions(saved: &LoaderState, g: &Given) -> PyResult<()> {
    let s = &saved.sampler;
    let mut clash = Vec::new();
    if let Some(b) = g.batch_size.filter(|&b| b != s.batch_size as usize) {
        clash.push(format!("batch_size={b} (the state's is {})", s.batch_size));
    }
    if let Some(m) = g.mode.filter(|&m| m != s.mode) {
        clash.push(format!("mode='{m}' (the state's is '{}')", s.mode));
    }
    if let Some(x) = g.seed.filter(|&x| x != s.seed) {
        clash.push(format!("seed={x} (the state's is {})", s.seed));
    }
    if let Some(x) = g.start_step.filter(|&x| x != saved.step) {
        clash.push(format!("start_step={x} (the state's step is {})", saved.step));
    }
    if clash.is_empty() {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "state= contradicts {}: leave these arguments out to resume with the state's values",
        clash.join(", ")
    )))
}
