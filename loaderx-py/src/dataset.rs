//! Dense and ragged datasets, and the writer behind the converters.

use std::path::PathBuf;
use std::sync::Mutex;

use loaderx_core::{DType, DatasetWriter, DenseSource, RaggedSource, Schema, WriteOptions};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::arrays::{flat, owned, slice};
use crate::errors::IntoPy;
use crate::store::{codec, format};

/// A dtype by its schema name (`"f32"`, `"u8"`, `"bool"`...).
pub fn dtype(name: &str) -> PyResult<DType> {
    DType::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| PyValueError::new_err(format!("unsupported dtype {name:?}")))
}

/// Where a dataset lives: a local directory, or (feature `remote`) an `s3://` URL.
fn is_url(path: &str) -> bool {
    path.starts_with("s3://")
}

/// `RemoteOptions` from the `remote=` dict of a dataset (over the AWS environment variables,
/// which the engine reads first): `endpoint`, `region`, `access_key_id` with
/// `secret_access_key`, `anonymous`, `allow_http`, `concurrency`, `retries`, `timeout` (seconds),
/// `memory_limit`, `cache_dir` with `cache_bytes`. Credentials are never shown in an error.
#[cfg(feature = "remote")]
pub(crate) fn remote_options(
    given: Option<&Bound<'_, pyo3::types::PyDict>>,
) -> PyResult<loaderx_core::remote::RemoteOptions> {
    let mut o = loaderx_core::remote::RemoteOptions::new();
    // The environment's cache applies where the dict names none (read here, at the face).
    let Some(given) = given else { return o.with_env_cache().py() };
    let get = |k: &str| given.get_item(k);
    for key in given.keys() {
        let key: String = key.extract()?;
        const KNOWN: [&str; 12] = [
            "endpoint",
            "region",
            "access_key_id",
            "secret_access_key",
            "anonymous",
            "allow_http",
            "concurrency",
            "retries",
            "timeout",
            "memory_limit",
            "cache_dir",
            "cache_bytes",
        ];
        if !KNOWN.contains(&key.as_str()) {
            return Err(PyValueError::new_err(format!(
                "unknown remote option {key:?} (known: {})",
                KNOWN.join(", ")
            )));
        }
    }
    if let Some(v) = get("endpoint")? {
        o = o.endpoint(v.extract::<String>()?);
    }
    if let Some(v) = get("region")? {
        o = o.region(v.extract::<String>()?);
    }
    match (get("access_key_id")?, get("secret_access_key")?) {
        (Some(k), Some(s)) => o = o.credentials(k.extract::<String>()?, s.extract::<String>()?),
        (None, None) => {}
        _ => return Err(PyValueError::new_err("access_key_id and secret_access_key are given together")),
    }
    if let Some(v) = get("anonymous")? {
        o = o.anonymous(v.extract()?);
    }
    if let Some(v) = get("allow_http")? {
        o = o.allow_http(v.extract()?);
    }
    if let Some(v) = get("concurrency")? {
        o = o.concurrency(v.extract()?);
    }
    if let Some(v) = get("retries")? {
        o = o.retries(v.extract()?);
    }
    if let Some(v) = get("timeout")? {
        let secs: f64 = v.extract()?;
        let t = std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
            PyValueError::new_err(format!("timeout must be a positive number of seconds, not {secs}"))
        })?;
        o = o.timeout(t);
    }
    if let Some(v) = get("memory_limit")? {
        o = o.memory_limit(v.extract()?);
    }
    match (get("cache_dir")?, get("cache_bytes")?) {
        (Some(d), Some(n)) => o = o.cache(d.extract::<PathBuf>()?, n.extract()?),
        (None, None) => {}
        _ => return Err(PyValueError::new_err("cache_dir and cache_bytes are given together")),
    }
    o.with_env_cache().py()
}

#[cfg(not(feature = "remote"))]
fn no_remote(path: &str, _remote: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyErr {
    PyValueError::new_err(format!(
        "{path}: this build of loaderx reads local stores only (build it with the `remote` feature for s3:// URLs)"
    ))
}

/// What the two dataset classes share: a source opened from a directory or a URL, and views.
trait Source: Sized + Send + Sync {
    fn open_local(path: &std::path::Path) -> loaderx_core::Result<Self>;
    #[cfg(feature = "remote")]
    fn open_url(url: &str, options: loaderx_core::remote::RemoteOptions) -> loaderx_core::Result<Self>;
    fn view(&self, selection: &loaderx_core::Selection) -> loaderx_core::Result<Self>;
    fn records(&self) -> usize;
    fn warm(self, yes: bool) -> Self;
}

/// Whether this process's dataset gathers keep the engine's pool helpers awake between calls
/// (`DenseSource::keep_warm`): Python calls gather again within microseconds, and a helper's
/// wake-up costs about a batch (docs/benchmarks/python.md, run G). On unless
/// `LOADERX_KEEP_WARM=0` is set: the documented override, read once, here at the edge.
pub(crate) fn keep_warm() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOADERX_KEEP_WARM").is_none_or(|v| v != "0"))
}

macro_rules! source {
    ($t:ty) => {
        impl Source for $t {
            fn open_local(path: &std::path::Path) -> loaderx_core::Result<Self> {
                <$t>::open(path)
            }
            #[cfg(feature = "remote")]
            fn open_url(
                url: &str,
                options: loaderx_core::remote::RemoteOptions,
            ) -> loaderx_core::Result<Self> {
                <$t>::open_remote(url, options)
            }
            fn view(&self, selection: &loaderx_core::Selection) -> loaderx_core::Result<Self> {
                self.select(selection)
            }
            fn records(&self) -> usize {
                self.len()
            }
            fn warm(self, yes: bool) -> Self {
                self.keep_warm(yes)
            }
        }
    };
}
source!(DenseSource);
source!(RaggedSource);

/// The source at `path`: a directory (any name the OS takes: Python hands over `str` with
/// surrogates or `bytes` as the OS path, look 103, L103-1), or an `s3://` URL reached as
/// `remote` says.
fn open<S: Source>(
    py: Python<'_>,
    path: &std::path::Path,
    remote: Option<&Bound<'_, pyo3::types::PyDict>>,
) -> PyResult<S> {
    if let Some(url) = path.to_str().filter(|p| is_url(p)) {
        #[cfg(feature = "remote")]
        {
            let options = remote_options(remote)?;
            return Ok(crate::fork::detach(py, || S::open_url(url, options))?.py()?.warm(keep_warm()));
        }
        #[cfg(not(feature = "remote"))]
        return Err(no_remote(url, remote));
    }
    Ok(crate::fork::detach(py, || S::open_local(path))?.py()?.warm(keep_warm()))
}

/// The records of `indices` of `source` as a source of their own (nothing copied).
fn selected<S: Source>(source: &S, indices: &PyReadonlyArray1<'_, u32>) -> PyResult<S> {
    let selection = loaderx_core::Selection::indices(owned(indices, "indices")?);
    source.view(&selection).py()
}

/// A seeded split `(first, rest)`: `first` holds `round(len * fraction)` records chosen by a
/// permutation keyed by `seed` (the engine's `Selection::split`), each part in record order.
fn split<S: Source>(source: &S, fraction: f64, seed: u64) -> PyResult<(S, S)> {
    let (a, b) = loaderx_core::Selection::split(source.records(), fraction, seed).py()?;
    Ok((source.view(&a).py()?, source.view(&b).py()?))
}

/// A dense dataset: fixed-shape records of one dtype.
///
/// Threads (free-threaded audit): immutable after `__init__` (a read-only mapping or a remote
/// source whose caches lock themselves); gathers from any number of threads at once.
#[pyclass(module = "loaderx._native", frozen)]
pub struct Dense {
    pub(crate) source: DenseSource,
}

#[pymethods]
impl Dense {
    #[new]
    #[pyo3(signature = (path, remote = None))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        remote: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Self> {
        Ok(Dense { source: open(py, &path, remote)? })
    }

    fn __len__(&self) -> usize {
        self.source.len()
    }

    /// A fingerprint of a dataset on object storage, from its index in memory (another write at
    /// its URL has another); None for a local one.
    fn fingerprint(&self) -> Option<u64> {
        self.source.fingerprint()
    }

    /// The schema name of the dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.source.dtype().name()
    }

    /// The shape of one record.
    #[getter]
    fn item_shape(&self) -> Vec<usize> {
        self.source.item_shape().to_vec()
    }

    /// Bytes of one record.
    #[getter]
    fn item_bytes(&self) -> usize {
        self.source.item_elems() * self.source.dtype().size()
    }

    /// The dataset's directory (or URL).
    #[getter]
    fn path(&self) -> PathBuf {
        self.source.path().to_path_buf()
    }

    /// The records at `indices` straight into `out`: a writable, contiguous `uint8` view of
    /// exactly `len(indices)` records.
    fn gather_into(
        &self,
        py: Python<'_>,
        indices: PyReadonlyArray1<'_, u32>,
        mut out: PyReadwriteArray1<'_, u8>,
    ) -> PyResult<()> {
        let indices = owned(&indices, "indices")?;
        let dst = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        crate::fork::detach(py, || self.source.gather_bytes(&indices, dst))?.py()
    }

    /// The bench's baseline from Rust: each of `batches` gathered into `out` in turn, `reps`
    /// times over, in one call without the GIL; returns the seconds per gather. It is what a Rust
    /// program making the same gathers sees, measured in this process on the same data.
    fn gather_loop(
        &self,
        py: Python<'_>,
        batches: Vec<PyReadonlyArray1<'_, u32>>,
        mut out: PyReadwriteArray1<'_, u8>,
        reps: usize,
    ) -> PyResult<f64> {
        let batches = batches.iter().map(|b| owned(b, "a batch")).collect::<PyResult<Vec<Vec<u32>>>>()?;
        let dst = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        let gathers = (reps * batches.len()).max(1) as f64;
        crate::fork::detach(py, || {
            let start = std::time::Instant::now();
            for _ in 0..reps {
                for b in &batches {
                    self.source.gather_bytes(b, dst)?;
                }
            }
            Ok(start.elapsed().as_secs_f64() / gathers)
        })?
        .py()
    }

    /// The records of `indices` of this dataset, as a dataset of its own (nothing copied).
    fn select(&self, indices: PyReadonlyArray1<'_, u32>) -> PyResult<Dense> {
        Ok(Dense { source: selected(&self.source, &indices)? })
    }

    /// A seeded split `(first, rest)`: `first` holds `round(len * fraction)` records chosen by a
    /// permutation keyed by `seed` (the engine's `Selection::split`), each part in record order.
    fn split(&self, fraction: f64, seed: u64) -> PyResult<(Dense, Dense)> {
        let (a, b) = split(&self.source, fraction, seed)?;
        Ok((Dense { source: a }, Dense { source: b }))
    }
}

/// A ragged dataset: records of any number of rows of one row shape.
///
/// Threads (free-threaded audit): immutable after `__init__`, as [`Dense`].
#[pyclass(module = "loaderx._native", frozen)]
pub struct Ragged {
    pub(crate) source: RaggedSource,
}

#[pymethods]
impl Ragged {
    #[new]
    #[pyo3(signature = (path, remote = None))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        remote: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Self> {
        Ok(Ragged { source: open(py, &path, remote)? })
    }

    fn __len__(&self) -> usize {
        self.source.len()
    }

    /// A fingerprint of a dataset on object storage, from its index in memory (another write at
    /// its URL has another); None for a local one.
    fn fingerprint(&self) -> Option<u64> {
        self.source.fingerprint()
    }

    /// The schema name of the dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.source.dtype().name()
    }

    /// The shape of one row.
    #[getter]
    fn row_shape(&self) -> Vec<usize> {
        self.source.row_shape().to_vec()
    }

    /// The dataset's directory (or URL).
    #[getter]
    fn path(&self) -> PathBuf {
        self.source.path().to_path_buf()
    }

    /// The records at `indices` in one gather: `(values, offsets)`, every record's values back
    /// to back (the engine's buffer, not copied) and `len(indices) + 1` offsets in rows.
    fn gather<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray1<usize>>)> {
        let indices = owned(&indices, "indices")?;
        let batch = crate::fork::detach(py, || self.source.get_batch(&indices))?.py()?;
        let (offsets, values) = batch.into_parts();
        Ok((flat(py, values)?, PyArray1::from_vec(py, offsets)))
    }

    /// Rows of each record of `indices`, from the index alone.
    fn record_rows<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let indices = owned(&indices, "indices")?;
        let rows = crate::fork::detach(py, || self.source.record_rows(&indices))?.py()?;
        Ok(PyArray1::from_vec(py, rows))
    }

    /// The records of `indices` of this dataset, as a dataset of its own (nothing copied).
    fn select(&self, indices: PyReadonlyArray1<'_, u32>) -> PyResult<Ragged> {
        Ok(Ragged { source: selected(&self.source, &indices)? })
    }

    /// A seeded split `(first, rest)`: `first` holds `round(len * fraction)` records chosen by a
    /// permutation keyed by `seed` (the engine's `Selection::split`), each part in record order.
    fn split(&self, fraction: f64, seed: u64) -> PyResult<(Ragged, Ragged)> {
        let (a, b) = split(&self.source, fraction, seed)?;
        Ok((Ragged { source: a }, Ragged { source: b }))
    }
}

/// A dataset being written: records appended in batches, published at `finish` (until then the
/// output is `PATH.partial`, removed if the writer is dropped unfinished).
///
/// Threads (free-threaded audit): the writer is behind a mutex taken only with the GIL released;
/// batches appended from several threads go in whole, one at a time.
#[pyclass(module = "loaderx._native", frozen)]
pub struct Writer {
    inner: Mutex<Option<DatasetWriter>>,
    made_in: crate::fork::MadeIn,
}

impl Writer {
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut DatasetWriter) -> loaderx_core::Result<R> + Send,
    ) -> PyResult<R> {
        crate::fork::detach(py, || {
            let mut guard = self.made_in.lock(&self.inner).map_err(Some)?;
            let writer = guard.as_mut().ok_or(None)?;
            Ok::<_, Option<crate::fork::Held>>(f(writer))
        })?
        .map_err(|held| match held {
            Some(held) => held.err("writer"),
            None => PyRuntimeError::new_err("the writer is finished"),
        })?
        .py()
    }
}

#[pymethods]
impl Writer {
    /// A writer of a `kind` (`"dense"` or `"ragged"`) dataset of `dtype_name` at `path`.
    #[new]
    #[pyo3(signature = (path, kind, dtype_name, shape, codec_name = "zstd", format_name = "v2", dict_size = None, overwrite = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        kind: &str,
        dtype_name: &str,
        shape: Vec<usize>,
        codec_name: &str,
        format_name: &str,
        dict_size: Option<usize>,
        overwrite: bool,
    ) -> PyResult<Self> {
        let dtype = dtype(dtype_name)?;
        let schema = match kind {
            "dense" => Schema::dense(dtype, shape),
            "ragged" => Schema::ragged(dtype, shape),
            other => {
                return Err(PyValueError::new_err(format!(
                    "kind must be 'dense' or 'ragged', not {other:?}"
                )));
            }
        };
        let opts = WriteOptions::new()
            .codec(codec(codec_name)?)
            .format(format(format_name)?)
            .dict_cap(dict_size)
            .overwrite(overwrite);
        let writer = crate::fork::detach(py, || DatasetWriter::with_schema(&path, schema, opts))?.py()?;
        Ok(Writer { inner: Mutex::new(Some(writer)), made_in: crate::fork::MadeIn::here() })
    }

    /// Dense: appends the whole items in `items` (a contiguous `uint8` view of them).
    fn append_items(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
        // Refused in a fork before the array is borrowed (`MadeIn::refuse_write_in_fork`).
        self.made_in.refuse_write_in_fork()?;
        let items: PyReadonlyArray1<'_, u8> = items.extract()?;
        let bytes = owned(&items, "items")?;
        self.with(py, |w| {
            let unit = w.schema().unit_bytes().max(1);
            if !bytes.len().is_multiple_of(unit) {
                return Err(loaderx_core::Error::InvalidArgument(format!(
                    "{} bytes is not a whole number of {unit}-byte items",
                    bytes.len()
                )));
            }
            let records: Vec<&[u8]> = bytes.chunks_exact(unit).collect();
            w.append_bytes(&records)
        })
    }

    /// Ragged: appends each of `records` (contiguous `uint8` views) as one record.
    fn append_records(&self, py: Python<'_>, records: Vec<PyReadonlyArray1<'_, u8>>) -> PyResult<()> {
        let records = records.iter().map(|r| owned(r, "a record")).collect::<PyResult<Vec<Vec<u8>>>>()?;
        self.with(py, |w| w.append_bytes(&records))
    }

    /// Ragged: appends one record per byte range of `values`: record `i` is
    /// `values[offsets[i]..offsets[i + 1]]` (`len(offsets) - 1` records, offsets in bytes, from
    /// any start, never decreasing): a whole block of records in one call, no array per record.
    fn append_ragged(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray1<'_, u8>,
        offsets: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        let values = owned(&values, "values")?;
        let offsets = slice(&offsets, "offsets")?;
        let mut records = Vec::with_capacity(offsets.len().saturating_sub(1));
        for (i, w) in offsets.windows(2).enumerate() {
            let record = match (usize::try_from(w[0]), usize::try_from(w[1])) {
                (Ok(a), Ok(b)) if a <= b => values.get(a..b),
                _ => None,
            };
            records.push(record.ok_or_else(|| {
                PyValueError::new_err(format!(
                    "record {i}: offsets {}..{} are not a range of the {} bytes of values",
                    w[0],
                    w[1],
                    values.len()
                ))
            })?);
        }
        self.with(py, |w| w.append_bytes(&records))
    }

    /// Records written so far.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |w| Ok(w.count()))
    }

    /// Publishes the dataset at its path; returns the number of records.
    fn finish(&self, py: Python<'_>) -> PyResult<u64> {
        crate::fork::detach(py, || {
            let writer = self.made_in.lock(&self.inner)?.take();
            Ok(writer.map(DatasetWriter::finish))
        })?
        .map_err(|held: crate::fork::Held| held.err("writer"))?
        .ok_or_else(|| PyRuntimeError::new_err("the writer is finished"))?
        .py()
    }

    /// Drops what was written: nothing is published and the staging directory is removed.
    fn abort(&self, py: Python<'_>) {
        // In a fork whose parent held the lock, there is nothing of this process's to drop.
        py.detach(|| drop(self.made_in.lock(&self.inner).ok().and_then(|mut g| g.take())));
    }
}
