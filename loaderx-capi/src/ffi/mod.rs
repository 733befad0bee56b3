//! The exported C functions of both headers, and the one place raw pointers are dereferenced.
//!
//! Each export checks its pointers (null, alignment, a length that fits an object), turns them
//! into slices, paths and handle references through the helpers at the top, and calls the safe
//! code of `chunker`, `store`, `schema` and `sampler` inside `catch_unwind`: no panic crosses the
//! boundary. What the helpers cannot check (that a non-null pointer really is valid for the
//! length given, that a handle is live and came from this library) is the caller's promise, as
//! each header says.
#![expect(unsafe_code, reason = "the C ABI: exported symbols and the caller's raw pointers")]

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use loaderx_core::Sampler;

use crate::chunker::{self, Engine};
use crate::error::{self, Failure, Outcome, Slot};
use crate::sampler::{self, SamplerConfig};
use crate::schema::{self, LxSchema};
use crate::store::{self, CompactReport, LxStore, StoreStats, VerifyReport};

/// Integers every bit pattern of which is a value: a caller's output array of them may be zeroed
/// and then handed out as a slice.
trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for u32 {}
impl Plain for u64 {}

/// Checks what can be checked of a pointer to `len` values of `T`.
fn check_ptr<T>(p: *const T, len: usize, what: &str) -> Outcome<()> {
    if p.is_null() {
        return Err(Failure::argument(format!("{what} is null")));
    }
    if !p.is_aligned() {
        return Err(Failure::argument(format!("{what} is not aligned for its element type")));
    }
    if len.checked_mul(size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(Failure::argument(format!("{what}: {len} elements are more than an object can hold")));
    }
    Ok(())
}

/// The caller's `len` values at `p` (null is allowed when `len` is 0).
///
/// # Safety
/// When `len > 0`, `p` is valid for reads of `len` values of `T`, not written during the call.
unsafe fn slice_in<'a, T>(p: *const T, len: usize, what: &str) -> Outcome<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    check_ptr(p, len, what)?;
    // SAFETY: non-null, aligned and of a size an object can have (checked above); valid for
    // reads of `len` values and unchanged during the call (the caller's promise).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The caller's output array of `len` values at `p`, zeroed so that it is initialised.
///
/// # Safety
/// When `len > 0`, `p` is valid for writes of `len` values of `T`, not read or written by
/// anything else during the call.
unsafe fn slice_out<'a, T: Plain>(p: *mut T, len: usize, what: &str) -> Outcome<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_ptr(p, len, what)?;
    // SAFETY: `p` is valid for writes of `len` values (the caller's promise), non-null and
    // aligned (checked above); zero is a value of every `Plain` type.
    unsafe { std::ptr::write_bytes(p, 0, len) };
    // SAFETY: as above, and every value is now initialised; nothing else touches the array
    // during the call (the caller's promise).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// A NUL-terminated path (on Unix any bytes, elsewhere UTF-8).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
unsafe fn path_in(p: *const c_char) -> Option<Option<PathBuf>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (the caller's promise).
    let bytes = unsafe { CStr::from_ptr(p) };
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Some(Some(PathBuf::from(std::ffi::OsStr::from_bytes(bytes.to_bytes()))))
    }
    #[cfg(not(unix))]
    {
        Some(bytes.to_str().ok().map(PathBuf::from))
    }
}

/// [`path_in`] for the `lx_*` calls: null or not UTF-8 (where paths must be) is an argument error.
///
/// # Safety
/// As [`path_in`].
unsafe fn lx_path(p: *const c_char, what: &str) -> Outcome<PathBuf> {
    // SAFETY: passed on from the caller.
    match unsafe { path_in(p) } {
        None => Err(Failure::argument(format!("{what} is null"))),
        Some(None) => Err(Failure::argument(format!("{what} is not UTF-8"))),
        Some(Some(path)) => Ok(path),
    }
}

/// A live handle.
///
/// # Safety
/// `p` is null or a handle of this type this library returned and nobody has freed.
unsafe fn handle<'a, T>(p: *const T, what: &str) -> Outcome<&'a T> {
    check_ptr(p, 1, what)?;
    // SAFETY: a live handle made by `Box::into_raw` (the caller's promise), non-null (checked).
    Ok(unsafe { &*p })
}

/// Where a result goes: a checked, non-null pointer written once the call has succeeded.
struct Out<T>(*mut T);

impl<T> Out<T> {
    /// # Safety
    /// `p` is null or valid for a write of one `T` until the call returns.
    unsafe fn new(p: *mut T, what: &str) -> Outcome<Out<T>> {
        check_ptr(p, 1, what)?;
        Ok(Out(p))
    }

    /// An output the caller may leave out (null); a misaligned one is still refused.
    ///
    /// # Safety
    /// As [`Out::new`].
    unsafe fn optional(p: *mut T, what: &str) -> Outcome<Option<Out<T>>> {
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: passed on from the caller.
        unsafe { Out::new(p, what) }.map(Some)
    }

    fn set(self, value: T) {
        // SAFETY: valid for a write of one `T` (the promise taken in `Out::new`), aligned and
        // non-null (checked there); `T`s here are plain values or pointers, nothing to drop.
        unsafe { self.0.write(value) };
    }
}

/// Runs an `lx_*` call: the last error cleared, a failure or a caught panic turned into its code
/// and text.
fn lx_call(name: &str, f: impl FnOnce() -> Outcome<()>) -> i32 {
    Slot::Lx.clear();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => error::OK,
        Ok(Err(failure)) => {
            Slot::Lx.set(failure.message);
            failure.code
        }
        Err(payload) => {
            Slot::Lx.set(format!("internal error: panic in {name}: {}", error::panic_text(&*payload)));
            error::INTERNAL
        }
    }
}

/// Runs an `mmap_engine_*` call the way mmap-chunker does: the last error cleared, an error's
/// text recorded and `failed` returned, a caught panic recorded as an internal error.
fn chunker_call<R>(name: &str, failed: R, f: impl FnOnce() -> Result<R, &'static str>) -> R {
    Slot::Chunker.clear();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => value,
        Ok(Err(text)) => {
            Slot::Chunker.set(text);
            failed
        }
        Err(_) => {
            Slot::Chunker.set(format!("internal error: panic in {name}"));
            failed
        }
    }
}

/// The engine behind a chunker handle, for a scan (the caller runs no other call on it).
///
/// # Safety
/// `h` is null or a live handle from `mmap_engine_open` that no other thread uses during the call.
unsafe fn engine_mut<'a>(h: *mut Engine) -> Result<&'a mut Engine, &'static str> {
    if h.is_null() {
        return Err(chunker::HANDLE_NULL);
    }
    // SAFETY: a live, exclusively used handle made by `Box::into_raw` (the caller's promise).
    Ok(unsafe { &mut *h })
}

// The exports, one file per header.
mod loaderx;
mod mmap_chunker;
