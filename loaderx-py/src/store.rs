//! Zrecord: the store of raw byte records.

use std::path::PathBuf;

use loaderx_core::{Codec, Format, OpenMode, SharedStore, Store as CoreStore, StoreOptions};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arrays::owned;
use crate::errors::IntoPy;

/// A Zrecord store of byte records.
///
/// Gathers and appends share the store (any number at once, from any thread); `delete` and
/// `compact` take it alone, as the engine requires.
///
/// Threads (free-threaded audit): the engine's shared store ([`SharedStore`]: a read-write lock,
/// only tried in a forked child) is entered only with the GIL released; shared calls (gathers,
/// appends, which the engine serialises itself) run at once on any threads, `delete` and
/// `compact` wait for them and run alone. No Python object is held across the lock.
#[pyclass(module = "loaderx._native", frozen)]
pub struct Store {
    inner: SharedStore,
}

/// A codec by name (raw, zstd, zstd_dict, lz4).
pub fn codec(name: &str) -> PyResult<Codec> {
    name.parse().map_err(PyValueError::new_err)
}

/// A format by name (v1, v2).
pub fn format(name: &str) -> PyResult<Format> {
    name.parse().map_err(PyValueError::new_err)
}

impl Store {
    /// Runs `f` on the shared store with the GIL released: the lock is taken without the GIL, so
    /// a thread waiting for it never holds the GIL another thread's `f` needs back.
    fn shared<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreStore) -> loaderx_core::Result<R> + Send,
    ) -> PyResult<R> {
        crate::fork::detach(py, || self.inner.read(f))?.py()
    }

    /// [`Store::shared`] with the store alone (delete, compact).
    fn exclusive<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreStore) -> loaderx_core::Result<R> + Send,
    ) -> PyResult<R> {
        crate::fork::detach(py, || self.inner.write(f))?.py()
    }
}

/// Records back to back and their offsets (`Store.gather_into`).
type Packed<'py> = (Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<i64>>);

/// What `verify` hands Python: records checked, damaged records counted, the first of them with
/// their errors, file problems.
type Verified = (u64, u64, Vec<(u64, String)>, Vec<String>);

#[pymethods]
impl Store {
    /// Opens (`"r"` read-only, `"a"` read-write, created when `path` does not exist) or creates
    /// (`"w"`, replacing a store that is there) the store at `path`.
    #[new]
    #[pyo3(signature = (path, mode = "a", format_name = "v2"))]
    fn new(py: Python<'_>, path: PathBuf, mode: &str, format_name: &str) -> PyResult<Self> {
        let opts = StoreOptions::new().format(format(format_name)?);
        let mode: OpenMode = mode.parse().map_err(PyValueError::new_err)?;
        // The engine's refusal names its Rust types; a Python user reads such a URL as a dataset.
        if path.to_str().is_some_and(|p| p.starts_with("s3://")) {
            return Err(PyValueError::new_err(format!(
                "{} is on object storage, which is read as a dataset, not opened as a Zrecord: \
                 loaderx.dataset.DenseDataset(url) or RaggedDataset(url) (a build with remote \
                 stores; `remote` takes the endpoint and credentials)",
                loaderx_core::redact_urls(&path.display().to_string())
            )));
        }
        let inner = crate::fork::detach(py, || SharedStore::open(&path, mode, opts))?.py()?;
        Ok(Store { inner })
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.shared(py, |s| Ok(s.len() as usize))
    }

    /// The store's directory.
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<PathBuf> {
        self.shared(py, |s| Ok(s.path().to_path_buf()))
    }

    /// `"v1"` or `"v2"`.
    #[getter]
    fn format(&self, py: Python<'_>) -> PyResult<String> {
        self.shared(py, |s| Ok(s.format().to_string()))
    }

    /// Appends `records` (a sequence of bytes-like objects) in one batch; returns the index of
    /// the first.
    #[pyo3(signature = (records, codec_name = "zstd"))]
    fn append(&self, py: Python<'_>, records: Vec<Vec<u8>>, codec_name: &str) -> PyResult<u64> {
        let codec = codec(codec_name)?;
        Ok(self.shared(py, |s| s.append(&records, codec))?.start)
    }

    /// Trains the dictionary on `samples` (bytes-like objects); False when they are too few.
    fn train_dictionary(&self, py: Python<'_>, samples: Vec<Vec<u8>>) -> PyResult<bool> {
        self.shared(py, |s| s.train_dictionary(&samples))
    }

    /// The records at `indices` (a contiguous `uint64` array), each as `bytes`.
    fn gather<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let indices = owned(&indices, "indices")?;
        let records = self.shared(py, |s| s.gather(&indices))?;
        Ok(records.iter().map(|r| PyBytes::new(py, r)).collect())
    }

    /// The stored lengths of the records at `indices`.
    fn record_lens<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let indices = owned(&indices, "indices")?;
        let lens = self.shared(py, |s| s.record_lens(&indices))?;
        Ok(PyArray1::from_vec(py, lens))
    }

    /// The records at `indices` back to back, in `out` (a writable contiguous `uint8` array of
    /// exactly their total length) or a new array, and their offsets (`len + 1`, from 0). Their
    /// lengths and their bytes are read in one hold of the store: a delete on another thread
    /// comes before both or after both (review 46, finding 2: lengths read in one call and bytes
    /// in another gave torn records).
    #[pyo3(signature = (indices, out = None))]
    fn gather_into<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'_, u64>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Packed<'py>> {
        let indices = owned(&indices, "indices")?;
        let out = out
            .map(|o| {
                o.cast_into::<PyArray1<u8>>()
                    .map_err(|_| PyTypeError::new_err("out must be a one-dimensional uint8 numpy array"))
            })
            .transpose()?;
        let sum = |lens: &[u32]| lens.iter().map(|&l| u64::from(l)).sum::<u64>();
        let (out, lens) = match out {
            Some(arr) => {
                let lens = {
                    let mut rw = arr.try_readwrite().map_err(|e| {
                        PyValueError::new_err(format!(
                            "out must be writable and share no memory with indices ({e})"
                        ))
                    })?;
                    let dst = rw
                        .as_slice_mut()
                        .map_err(|_| PyValueError::new_err("out must be a C-contiguous uint8 array"))?;
                    self.shared(py, |s| {
                        let lens = s.record_lens(&indices)?;
                        let total = sum(&lens);
                        if total != dst.len() as u64 {
                            return Err(loaderx_core::Error::InvalidArgument(format!(
                                "out must be a uint8 array of shape ({total},), the records' total length (it holds {})",
                                dst.len()
                            )));
                        }
                        s.gather_into(&indices, dst)?;
                        Ok(lens)
                    })?
                };
                (arr, lens)
            }
            None => {
                // Written as read, never zero-filled first: a length a damaged entry claims
                // touches no memory before the read refuses it (review 47, finding 4).
                let (buf, lens) = self.shared(py, |s| s.gather_flat(&indices))?;
                (PyArray1::from_vec(py, buf), lens)
            }
        };
        let mut offsets = Vec::with_capacity(lens.len() + 1);
        let mut at = 0i64;
        offsets.push(at);
        for l in lens {
            at += i64::from(l);
            offsets.push(at);
        }
        Ok((out, PyArray1::from_vec(py, offsets)))
    }

    /// Deletes the records at `indices` (the last record moves into each hole).
    fn delete(&self, py: Python<'_>, indices: PyReadonlyArray1<'_, u64>) -> PyResult<()> {
        let indices = owned(&indices, "indices")?;
        self.exclusive(py, |s| s.delete(&indices))
    }

    /// Rewrites the live records densely in place; returns what moved.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.exclusive(py, CoreStore::compact)?;
        let d = PyDict::new(py);
        d.set_item("moved", report.moved)?;
        d.set_item("skipped", report.skipped)?;
        d.set_item("bytes_before", report.bytes_before)?;
        d.set_item("bytes_after", report.bytes_after)?;
        Ok(d)
    }

    /// Space accounting: length, logical, live and chunk bytes, chunks, dictionary and index
    /// bytes, records per codec.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.shared(py, CoreStore::stats)?;
        let d = PyDict::new(py);
        d.set_item("length", s.length)?;
        d.set_item("logical_bytes", s.logical_bytes)?;
        d.set_item("live_bytes", s.live_bytes)?;
        d.set_item("chunk_bytes", s.chunk_bytes)?;
        d.set_item("chunks", s.chunks)?;
        d.set_item("dict_bytes", s.dict_bytes)?;
        d.set_item("index_bytes", s.index_bytes)?;
        let codecs = PyDict::new(py);
        for (c, n) in s.codecs.iter() {
            codecs.set_item(c.name(), n)?;
        }
        d.set_item("codecs", codecs)?;
        Ok(d)
    }

    /// Reads back every record: `(checked, damaged, [(index, message)], [file problems])`, the
    /// list holding the first `limit` damaged records (all of them when `limit` is None).
    ///
    /// Streamed as the CLI's verify is (`Store::verify_each`): memory stays flat however many
    /// records are damaged, where a list of every one of them took about 230 bytes a record.
    #[pyo3(signature = (limit = Some(100)))]
    fn verify(&self, py: Python<'_>, limit: Option<usize>) -> PyResult<Verified> {
        self.shared(py, |s| {
            let files = s.verify_files()?.iter().map(|e| crate::errors::chain(e)).collect();
            let (mut damaged, mut bad) = (0u64, Vec::new());
            let checked = s.verify_each(|idx, e| {
                damaged += 1;
                if limit.is_none_or(|l| bad.len() < l) {
                    bad.push((idx, crate::errors::chain(&e)));
                }
            })?;
            Ok((checked, damaged, bad, files))
        })
    }

    /// Makes every committed record durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.shared(py, CoreStore::sync)
    }
}
