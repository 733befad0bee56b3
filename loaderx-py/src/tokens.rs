//! Token files (`loaderx.tokens`): core's `TokenFile`, its samplers as dense datasets, and the
//! writers of Megatron's and llm.c's files.

use std::path::PathBuf;
use std::sync::Mutex;

use loaderx_core::tokens::{MegatronWriter, TokenFile, TokenFormat, TokenType, write_llmc_le};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::arrays::owned;
use crate::dataset::{Dense, Ragged, keep_warm};
use crate::errors::IntoPy;

/// A token type by its engine name (`"u16"`).
fn token_type(name: &str) -> PyResult<TokenType> {
    [
        TokenType::U8,
        TokenType::I8,
        TokenType::I16,
        TokenType::U16,
        TokenType::I32,
        TokenType::U32,
        TokenType::I64,
    ]
    .into_iter()
    .find(|t| t.name() == name)
    .ok_or_else(|| {
        PyValueError::new_err(format!("{name:?} is not a token type (u8, i8, i16, u16, i32, u32, i64)"))
    })
}

/// A token file opened read-only (core's `TokenFile`).
///
/// Threads (free-threaded audit): immutable (a read-only mapping); reads from any threads.
#[pyclass(module = "loaderx._native", name = "TokenFile", frozen)]
pub struct Tokens {
    file: TokenFile,
}

#[pymethods]
impl Tokens {
    #[new]
    #[pyo3(signature = (path, dtype = None, vocab_size = None))]
    fn new(py: Python<'_>, path: PathBuf, dtype: Option<&str>, vocab_size: Option<u64>) -> PyResult<Self> {
        let token = dtype.map(token_type).transpose()?;
        let file = crate::fork::detach(py, || match token {
            None => TokenFile::open(&path),
            Some(t) => TokenFile::open_raw(&path, t),
        })?
        .py()?;
        Ok(Tokens {
            file: match vocab_size {
                Some(v) => file.vocabulary(v),
                None => file,
            },
        })
    }

    fn __len__(&self) -> usize {
        // A mapped file's tokens fit the address space.
        self.file.len() as usize
    }

    /// The tokens' file (a Megatron dataset's `.bin`).
    #[getter]
    fn path(&self) -> PathBuf {
        self.file.path().to_path_buf()
    }

    /// The tokens' engine dtype name (`"u16"`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.file.token_type().name()
    }

    /// `"megatron"`, `"llmc"` or `"raw"`.
    #[getter]
    fn format(&self) -> &'static str {
        match self.file.format() {
            TokenFormat::Megatron { .. } => "megatron",
            TokenFormat::Llmc { .. } => "llmc",
            TokenFormat::Raw => "raw",
        }
    }

    /// Documents, where the layout has them (Megatron's); `None` otherwise.
    #[getter]
    fn documents(&self) -> Option<u64> {
        self.file.documents()
    }

    /// Windows of `n` tokens every `stride` tokens (`None`: 1, or the least stride under 2^32
    /// windows) as a dense dataset.
    #[pyo3(signature = (n, stride = None))]
    fn windows(&self, n: usize, stride: Option<u64>) -> PyResult<Dense> {
        Ok(Dense { source: self.file.windows(n, stride).py()?.keep_warm(keep_warm()) })
    }

    /// Megatron's GPT samples of `n` tokens over `epochs` epochs of the documents, shuffled by
    /// `seed` anew each epoch (`None`: the file's order), as a dense dataset.
    #[pyo3(signature = (n, seed = None, epochs = 1))]
    fn sequences(&self, py: Python<'_>, n: usize, seed: Option<u64>, epochs: u32) -> PyResult<Dense> {
        let source = crate::fork::detach(py, || self.file.sequences_epochs(n, seed, epochs))?.py()?;
        Ok(Dense { source: source.keep_warm(keep_warm()) })
    }

    /// The documents, each a record (a Megatron dataset's), as a ragged dataset: what packing
    /// fills rows with.
    fn documents_source(&self, py: Python<'_>) -> PyResult<Ragged> {
        let source = crate::fork::detach(py, || self.file.documents_source())?.py()?;
        Ok(Ragged { source: source.keep_warm(keep_warm()) })
    }

    /// Tokens `first..first + n` as `int64`.
    fn read<'py>(&self, py: Python<'py>, first: u64, n: u64) -> PyResult<Bound<'py, PyArray1<i64>>> {
        Ok(PyArray1::from_vec(py, self.file.read(first, n).py()?))
    }

    /// Reads every token (and a Megatron index's every sequence and document), checking them.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        crate::fork::detach(py, || self.file.verify())?.py()
    }
}

/// Megatron's writer: `prefix.bin` and `prefix.idx`, a document at a time.
///
/// Threads (free-threaded audit): the writer is behind a mutex taken only with the GIL released
/// (a thread blocked on it while attached would stall the interpreter's stop-the-world pauses,
/// and on a GIL build hold the GIL its holder needs back); documents from several threads are
/// appended whole, one at a time, in the order they take the lock.
#[pyclass(module = "loaderx._native", name = "MegatronWriter", frozen)]
pub struct Writer {
    inner: Mutex<Option<MegatronWriter>>,
    made_in: crate::fork::MadeIn,
}

impl Writer {
    /// Runs `f` on the writer with the GIL released, the lock taken there.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Option<MegatronWriter>) -> PyResult<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut guard = self.made_in.lock(&self.inner).map_err(|held| held.err("writer"))?;
            f(&mut guard)
        })
    }
}

#[pymethods]
impl Writer {
    #[new]
    #[pyo3(signature = (prefix, dtype, overwrite = false))]
    fn new(prefix: PathBuf, dtype: &str, overwrite: bool) -> PyResult<Self> {
        let w = MegatronWriter::create(prefix, token_type(dtype)?, overwrite).py()?;
        Ok(Writer { inner: Mutex::new(Some(w)), made_in: crate::fork::MadeIn::here() })
    }

    /// Appends a document: its tokens' little-endian bytes.
    fn add_document(&self, py: Python<'_>, tokens: &Bound<'_, PyAny>) -> PyResult<()> {
        // Refused in a fork before the array is borrowed (`MadeIn::refuse_write_in_fork`).
        self.made_in.refuse_write_in_fork()?;
        let tokens: PyReadonlyArray1<'_, u8> = tokens.extract()?;
        // A copy taken while attached: another thread may write the array once the GIL (or,
        // free-threaded, this thread's attachment) is let go, and the document must be the bytes
        // given (crate::arrays::owned).
        let bytes = owned(&tokens, "tokens")?;
        self.with(py, |w| {
            let w = w.as_mut().ok_or_else(|| PyRuntimeError::new_err("the writer is finished"))?;
            w.add_document_le(&bytes).py()
        })
    }

    /// Writes the index and puts both files in place; the tokens written.
    fn finish(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |w| {
            let w = w.take().ok_or_else(|| PyRuntimeError::new_err("the writer is finished"))?;
            w.finish().py()
        })
    }
}

/// Writes an llm.c token file of `tokens` (their little-endian bytes) of `dtype` (u16 or u32).
#[pyfunction]
#[pyo3(signature = (path, tokens, dtype, overwrite = false))]
pub fn write_llmc(
    py: Python<'_>,
    path: PathBuf,
    tokens: PyReadonlyArray1<'_, u8>,
    dtype: &str,
    overwrite: bool,
) -> PyResult<()> {
    let token = token_type(dtype)?;
    // Copied while attached, as in `add_document`.
    let bytes = owned(&tokens, "tokens")?;
    py.detach(|| write_llmc_le(&path, token, &bytes, overwrite)).py()
}
