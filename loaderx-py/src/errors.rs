//! loaderx-core's errors as Python exceptions.
//!
//! A missing file is `FileNotFoundError` (any other operating-system error an `OSError` of its
//! kind), a bad argument or configuration `ValueError`, an index past the end `IndexError`, and
//! everything the engine itself reports a subclass of `loaderx.Error`: `CorruptError` for a
//! damaged store (naming its file and record), `NotAStoreError` for a path that holds no store
//! (nothing is damaged), `UnsupportedError` for a store this build does not read (a newer
//! format version, another byte order: nothing is damaged either), `SchemaError`, `LockedError`, `CommittedError`, `RemoteError`,
//! `LoaderStoppedError`. A transform's own exception is raised again as it was (a
//! `StopIteration` as a `RuntimeError` caused by it: [`from_transform`]). The message is
//! the error's whole chain, each part once, as the CLI prints it.

use std::io;

use loaderx_core::Error as CoreError;
use pyo3::exceptions::PyBaseException;
use pyo3::exceptions::{
    PyException, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyOSError, PyPermissionError,
    PyRuntimeError, PyStopIteration, PyValueError,
};
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};

create_exception!(loaderx, Error, PyException, "Anything the loaderx engine reports.");
create_exception!(
    loaderx,
    CorruptError,
    Error,
    "A store's bytes do not form what they should: the message names the file and the record."
);
create_exception!(
    loaderx,
    UnsupportedError,
    Error,
    "The store is of a format this build does not read (a newer version, another byte order): nothing is damaged."
);
create_exception!(loaderx, SchemaError, Error, "A dataset's schema does not fit what was asked of it.");
create_exception!(
    loaderx,
    NotAStoreError,
    Error,
    "The path holds no loaderx store or dataset (a file, or a directory of something else): nothing is damaged."
);
create_exception!(loaderx, LockedError, Error, "Another process holds a lock the operation needs.");
create_exception!(
    loaderx,
    CommittedError,
    Error,
    "The write committed and stands, but a step after its commit failed: do not repeat it (the message says what to do)."
);
create_exception!(loaderx, RemoteError, Error, "A request to object storage failed after its retries.");
create_exception!(loaderx, LoaderStoppedError, Error, "The data loader's threads stopped.");
create_exception!(
    loaderx,
    PlanningError,
    PyRuntimeError,
    "Byte-range planning failed (mmap-chunker's `PlanningError`)."
);

/// The error's message and its causes on one line, each part once.
pub use loaderx_core::error_chain as chain;

/// An exception a loader's transform raised, kept as the exception object (its traceback on it)
/// while it waits in the prefetch window: the loader shows it to the cycle collector, which a
/// `PyErr` cannot be (its traceback holds the transform's frames, which may hold the loader's
/// owner: look 120, L120-1).
#[derive(Debug)]
pub struct Raised {
    value: Py<PyBaseException>,
    /// `TypeName: message`, taken when it was raised (shown without the GIL).
    text: String,
}

impl Raised {
    /// `err`, raised in a transform.
    pub fn new(py: Python<'_>, err: PyErr) -> Raised {
        let text = err.to_string();
        Raised { value: err.into_value(py), text }
    }

    /// The exception object.
    pub fn value(&self) -> &Py<PyBaseException> {
        &self.value
    }
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Raised {}

/// `err`, raised by a loader's transform, as the loader raises it again: a `StopIteration`
/// becomes a `RuntimeError` caused by it, as PEP 479 does for generators. Raised from `next` as
/// it was, it ended the caller's `for` loop, the rest of the pass dropped without a word (look
/// 124, L124-1: a transform's `next()` on an exhausted iterator).
pub fn from_transform(py: Python<'_>, err: PyErr) -> PyErr {
    if !err.is_instance_of::<PyStopIteration>(py) {
        return err;
    }
    let raised = PyRuntimeError::new_err(
        "the transform raised StopIteration: raised as it was, it would end the loop over the loader and drop \
         the rest of the pass",
    );
    raised.set_cause(py, Some(err));
    raised
}

/// The Python exception for `err`.
pub fn to_py(err: CoreError) -> PyErr {
    if let CoreError::Transform { source, .. } = err {
        return match source.downcast::<Raised>() {
            Ok(raised) => Python::attach(|py| PyErr::from_value(raised.value.into_bound(py).into_any())),
            Err(other) => Error::new_err(format!("transform failed: {}", chain(other.as_ref()))),
        };
    }
    let msg = chain(&err);
    match &err {
        CoreError::Io { source, path, .. } => os_error(source, msg, path.display().to_string()),
        CoreError::DiskFull { source, path } => os_error(source, msg, path.display().to_string()),
        // "Not a store" because nothing is there at all: the missing path Python names so.
        CoreError::NotAStore { path, .. } if !path.exists() => {
            PyFileNotFoundError::new_err((libc_errno::ENOENT, msg, path.display().to_string()))
        }
        CoreError::IndexOutOfRange { .. } => PyIndexError::new_err(msg),
        // A batch past the limit is a request too large, as a record is (review 46, finding 6).
        CoreError::InvalidArgument(_)
        | CoreError::Config { .. }
        | CoreError::RecordTooLarge { .. }
        | CoreError::BatchTooLarge { .. } => PyValueError::new_err(msg),
        CoreError::AlreadyExists { path } | CoreError::NotReplaceable { path, .. } => {
            PyFileExistsError::new_err((libc_errno::EEXIST, msg, path.display().to_string()))
        }
        CoreError::Corrupt { .. } | CoreError::CorruptRecord { .. } | CoreError::MissingDictionary { .. } => {
            CorruptError::new_err(msg)
        }
        // Not damage: a user must not discard a healthy store of a newer build (the C ABI's
        // LX_ERR_UNSUPPORTED; review 46, finding 6).
        CoreError::Version { .. } | CoreError::ByteOrder { .. } => UnsupportedError::new_err(msg),
        CoreError::Schema { .. } => SchemaError::new_err(msg),
        CoreError::NotAStore { .. } => NotAStoreError::new_err(msg),
        CoreError::Locked { .. } => LockedError::new_err(msg),
        CoreError::Committed { .. } => CommittedError::new_err(msg),
        CoreError::Remote { .. } | CoreError::Changed { .. } => RemoteError::new_err(msg),
        CoreError::LoaderStopped(_) => LoaderStoppedError::new_err(msg),
        // A bug's aftermath (a panic inside an earlier call), as Python's own are.
        CoreError::Poisoned { .. } => pyo3::exceptions::PyRuntimeError::new_err(msg),
        CoreError::PassEnded { .. } => PyStopIteration::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// The `OSError` subclass Python gives `source`'s kind, with its errno and the path.
fn os_error(source: &io::Error, msg: String, path: String) -> PyErr {
    let errno = source.raw_os_error().unwrap_or(0);
    match source.kind() {
        io::ErrorKind::NotFound => PyFileNotFoundError::new_err((libc_errno::ENOENT, msg, path)),
        io::ErrorKind::PermissionDenied => PyPermissionError::new_err((errno, msg, path)),
        // A path no file can have (a NUL byte): Python's own open() says ValueError (look 92,
        // F5: an OSError of errno 0).
        io::ErrorKind::InvalidInput if source.raw_os_error().is_none() => PyValueError::new_err(msg),
        _ => PyOSError::new_err((errno, msg, path)),
    }
}

/// The two errno values named above (POSIX's, the same on every platform Python runs on).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EEXIST: i32 = 17;
}

/// `?` for loaderx-core results.
pub trait IntoPy<T> {
    /// The result with its error as a Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for loaderx_core::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Adds the exception types to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("NotAStoreError", py.get_type::<NotAStoreError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("CommittedError", py.get_type::<CommittedError>())?;
    m.add("RemoteError", py.get_type::<RemoteError>())?;
    m.add("LoaderStoppedError", py.get_type::<LoaderStoppedError>())?;
    m.add("PlanningError", py.get_type::<PlanningError>())?;
    Ok(())
}
