//! The `lx_*` error codes, the failures behind them, and both interfaces' thread-local
//! last-error texts.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use loaderx_core::Error;

/// Success.
pub(crate) const OK: i32 = 0;
/// A null pointer, a bad length, an unknown enum value, a buffer of the wrong size, a sampler
/// configuration refused.
pub(crate) const INVALID_ARGUMENT: i32 = -1;
/// An operating-system I/O call failed (the disk full included).
pub(crate) const IO: i32 = -2;
/// Bytes on disk are damaged: a corrupt file or record, a missing dictionary.
pub(crate) const CORRUPT: i32 = -3;
/// The path holds no store (or no dataset).
pub(crate) const NOT_A_STORE: i32 = -4;
/// A record index is past the store's length.
pub(crate) const OUT_OF_RANGE: i32 = -5;
/// Another process holds a lock the call needs.
pub(crate) const LOCKED: i32 = -6;
/// The store is open read-only.
pub(crate) const READ_ONLY: i32 = -7;
/// Something already exists where a store was to be created.
pub(crate) const ALREADY_EXISTS: i32 = -8;
/// A record or a store over the format's limits.
pub(crate) const LIMIT: i32 = -9;
/// A schema that is missing, damaged or not what the call needs.
pub(crate) const SCHEMA: i32 = -10;
/// A store of a format version or byte order this build does not read.
pub(crate) const UNSUPPORTED: i32 = -11;
/// Any other engine error.
pub(crate) const OTHER: i32 = -12;
/// A panic inside the library (caught) or a lock poisoned by one.
pub(crate) const INTERNAL: i32 = -13;
/// A write committed and stands, but a step after its commit failed: repeating it would apply it
/// twice (ABI v1.1).
pub(crate) const COMMITTED: i32 = -14;

/// The `LX_ERR_*` name of a code, as `lx_error_name` returns it.
pub(crate) fn code_name(code: i32) -> &'static std::ffi::CStr {
    match code {
        OK => c"LX_OK",
        INVALID_ARGUMENT => c"LX_ERR_INVALID_ARGUMENT",
        IO => c"LX_ERR_IO",
        CORRUPT => c"LX_ERR_CORRUPT",
        NOT_A_STORE => c"LX_ERR_NOT_A_STORE",
        OUT_OF_RANGE => c"LX_ERR_OUT_OF_RANGE",
        LOCKED => c"LX_ERR_LOCKED",
        READ_ONLY => c"LX_ERR_READ_ONLY",
        ALREADY_EXISTS => c"LX_ERR_ALREADY_EXISTS",
        LIMIT => c"LX_ERR_LIMIT",
        SCHEMA => c"LX_ERR_SCHEMA",
        UNSUPPORTED => c"LX_ERR_UNSUPPORTED",
        OTHER => c"LX_ERR_OTHER",
        INTERNAL => c"LX_ERR_INTERNAL",
        COMMITTED => c"LX_ERR_COMMITTED",
        _ => c"LX_ERR_UNKNOWN",
    }
}

/// A failed `lx_*` call: its code and the text `lx_last_error` shows.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: i32,
    pub(crate) message: String,
}

/// What the `lx_*` calls return inside the library.
pub(crate) type Outcome<T> = Result<T, Failure>;

impl Failure {
    /// An argument the caller got wrong.
    pub(crate) fn argument(message: impl Into<String>) -> Failure {
        Failure { code: INVALID_ARGUMENT, message: message.into() }
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        Failure { code: code_of(&err), message: loaderx_core::error_chain(&err) }
    }
}

/// The code of an engine error.
fn code_of(err: &Error) -> i32 {
    match err {
        Error::InvalidArgument(_) | Error::Config { .. } => INVALID_ARGUMENT,
        // A file shorter than the index says it is: damage, not a failing disk.
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => CORRUPT,
        Error::Io { .. } | Error::DiskFull { .. } => IO,
        Error::Corrupt { .. } | Error::CorruptRecord { .. } | Error::MissingDictionary { .. } => CORRUPT,
        Error::NotAStore { .. } => NOT_A_STORE,
        Error::IndexOutOfRange { .. } => OUT_OF_RANGE,
        Error::Locked { .. } => LOCKED,
        Error::ReadOnly { .. } => READ_ONLY,
        Error::AlreadyExists { .. } | Error::NotReplaceable { .. } => ALREADY_EXISTS,
        Error::RecordTooLarge { .. } | Error::StoreFull { .. } | Error::BatchTooLarge { .. } => LIMIT,
        Error::Schema { .. } => SCHEMA,
        Error::Version { .. } | Error::ByteOrder { .. } => UNSUPPORTED,
        Error::Committed { .. } => COMMITTED,
        Error::Poisoned { .. } => INTERNAL,
        _ => OTHER,
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// mmap-chunker's error texts are at most 255 bytes (its buffer is 256 with the NUL).
const CHUNKER_MAX: usize = 255;

thread_local! {
    static CHUNKER_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
    static LX_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn c_text(mut text: String, max: usize) -> CString {
    text.retain(|c| c != '\0');
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    CString::new(text).unwrap_or_default()
}

/// Which interface's last error a call sets.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    /// `mmap_engine_last_error`.
    Chunker,
    /// `lx_last_error`.
    Lx,
}

impl Slot {
    /// `f` on this thread's slot; `None` when the thread's locals are being destroyed (a call
    /// from a thread-exit destructor: C's `pthread_key_create` ones), which then keeps no
    /// text rather than panicking across the boundary.
    fn with<R>(self, f: impl FnOnce(&RefCell<Option<CString>>) -> R) -> Option<R> {
        match self {
            Slot::Chunker => CHUNKER_ERROR.try_with(f).ok(),
            Slot::Lx => LX_ERROR.try_with(f).ok(),
        }
    }

    /// Records `text` as this thread's last error.
    pub(crate) fn set(self, text: impl Into<String>) {
        let max = match self {
            Slot::Chunker => CHUNKER_MAX,
            Slot::Lx => usize::MAX,
        };
        let text = c_text(text.into(), max);
        self.with(|cell| *cell.borrow_mut() = Some(text));
    }

    /// Forgets this thread's last error (a call that succeeds leaves none).
    pub(crate) fn clear(self) {
        self.with(|cell| *cell.borrow_mut() = None);
    }

    /// The last error's text, or null when there is none; valid until the next call that sets or
    /// clears it on this thread.
    pub(crate) fn pointer(self) -> *const c_char {
        self.with(|cell| cell.borrow().as_ref().map_or(std::ptr::null(), |text| text.as_ptr()))
            .unwrap_or(std::ptr::null())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunker_texts_are_cut_at_255_bytes_on_a_char_boundary() {
        let text = c_text(format!("{}é", "a".repeat(254)), CHUNKER_MAX);
        assert_eq!(text.as_bytes().len(), 254);
    }

    #[test]
    fn every_code_has_a_name() {
        for code in COMMITTED..=OK {
            assert_ne!(code_name(code), c"LX_ERR_UNKNOWN");
        }
        assert_eq!(code_name(1), c"LX_ERR_UNKNOWN");
    }
}
