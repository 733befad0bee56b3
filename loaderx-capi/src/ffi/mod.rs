//! The exported C functions of both headers, and the one place raw pointers are dereferenced.
//!
//! Each export checks its pointers (null, alignment, a length that fits an object, an output
//! that shares no byte with another buffer of the call), turns them into slices, paths and
//! handle references through the helpers at the top, and calls the safe code of `chunker`,
//! `store`, `schema` and `sampler` inside `catch_unwind`: no panic crosses the boundary. What
//! the helpers cannot check (that a non-null pointer really is valid for the length given, that
//! a handle is live and came from this library) is the caller's promise, as each header says.
//!
//! Of `mmap_chunker.h`'s calls none takes both a buffer of the caller's to read and one to write
//! (a pattern scan reads its delimiter and writes only into the handle; `mmap_engine_get_chunk`
//! writes its view and reads nothing of the caller's), so none needs the overlap check.
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
    // No object runs past the end of the address space (look 67: such a pointer was zeroed).
    if p.addr().checked_add(len * size_of::<T>()).is_none() {
        return Err(Failure::argument(format!(
            "{what}: {len} elements from there run past the end of memory"
        )));
    }
    Ok(())
}

/// The bytes one of the caller's buffers covers, named as the error text names it.
#[derive(Clone, Copy)]
struct Span<'n> {
    what: &'n str,
    start: usize,
    end: usize,
    /// Whether the buffer would run past the end of the address space (no object does).
    wraps: bool,
}

impl<'n> Span<'n> {
    /// `len` values of `T` at `p`. A null pointer covers nothing: its own check refuses it (or
    /// it is an output left out), with a text saying so rather than that it overlaps.
    fn of<T>(p: *const T, len: usize, what: &'n str) -> Span<'n> {
        let start = p.addr();
        let bytes = if p.is_null() { 0 } else { len.saturating_mul(size_of::<T>()) };
        Span { what, start, end: start.saturating_add(bytes), wraps: start.checked_add(bytes).is_none() }
    }

    /// A NUL-terminated string, its NUL included.
    ///
    /// # Safety
    /// `p` is null or points to a NUL-terminated string.
    unsafe fn of_c_str(p: *const c_char, what: &'n str) -> Span<'n> {
        let len = if p.is_null() {
            0
        } else {
            // SAFETY: non-null and NUL-terminated (the caller's promise).
            unsafe { CStr::from_ptr(p) }.count_bytes() + 1
        };
        Span::of(p, len, what)
    }

    /// Whether the two share a byte (an empty span shares none, wherever it points).
    fn overlaps(&self, other: &Span<'_>) -> bool {
        let nonempty = self.start < self.end && other.start < other.end;
        nonempty && self.start < other.end && other.start < self.end
    }
}

/// Refuses a call given an output buffer that shares a byte with another output or with an
/// input (inputs may share bytes with each other: they are only read).
///
/// A call writes its outputs while it still reads its inputs (a gather's offsets while it reads
/// its indices), and the slices made of them may not alias: overlapping buffers would give
/// wrong bytes, not an error. Checked before any output is touched (zeroed or written), so a
/// refused call leaves every buffer as it was.
fn disjoint(outputs: &[Span<'_>], inputs: &[Span<'_>]) -> Outcome<()> {
    // Said as such, not as an overlap with everything after it (look 67).
    if let Some(s) = outputs.iter().chain(inputs).find(|s| s.wraps) {
        return Err(Failure::argument(format!("{}: the buffer runs past the end of memory", s.what)));
    }
    for (k, out) in outputs.iter().enumerate() {
        if let Some(other) = outputs[k + 1..].iter().chain(inputs).find(|other| out.overlaps(other)) {
            return Err(Failure::argument(format!(
                "{} overlaps {}: an output buffer may share no byte with another buffer of the call",
                out.what, other.what
            )));
        }
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

/// A live handle none of whose bytes is one of the call's `outputs`: an output pointing into the
/// handle (its lock, its engine pointer) is refused before anything is written, as every other
/// overlap is.
///
/// # Safety
/// As [`handle`].
unsafe fn handle_apart<'a, T>(p: *const T, what: &str, outputs: &[Span<'_>]) -> Outcome<&'a T> {
    disjoint(outputs, &[Span::of(p, 1, what)])?;
    // SAFETY: passed on from the caller.
    unsafe { handle(p, what) }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, len: usize, what: &str) -> Span<'_> {
        Span::of(std::ptr::without_provenance::<u8>(start), len, what)
    }

    /// Look 67: a buffer whose range wraps the address space was zeroed (SIGSEGV), or said to
    /// overlap another; both are refused as running past the end of memory.
    #[test]
    fn a_buffer_past_the_end_of_memory_is_refused_as_such() {
        let near_end = std::ptr::without_provenance::<u8>(usize::MAX - 10);
        let err = check_ptr(near_end, 100, "out").unwrap_err();
        assert!(
            err.code == error::INVALID_ARGUMENT && err.message.contains("past the end of memory"),
            "{}",
            err.message
        );
        assert!(check_ptr(near_end, 10, "out").is_ok());
        let err =
            disjoint(&[span(usize::MAX / 2, usize::MAX - 1, "out")], &[span(64, 8, "indices")]).unwrap_err();
        assert!(err.message.starts_with("out: the buffer runs past the end of memory"), "{}", err.message);
    }

    #[test]
    fn outputs_may_touch_but_not_share_a_byte_with_any_other_buffer() {
        let (input, out) = (span(100, 8, "indices"), span(108, 8, "out"));
        assert!(disjoint(&[out], &[input]).is_ok(), "adjacent buffers do not overlap");
        let err = disjoint(&[span(107, 8, "out")], &[input]).unwrap_err();
        assert_eq!(err.code, error::INVALID_ARGUMENT);
        assert_eq!(
            err.message,
            "out overlaps indices: an output buffer may share no byte with another buffer of the call"
        );
        let err = disjoint(&[out, span(115, 1, "out_offsets")], &[]).unwrap_err();
        assert!(err.message.starts_with("out overlaps out_offsets"), "{}", err.message);
    }

    #[test]
    fn inputs_may_overlap_and_empty_or_null_buffers_overlap_nothing() {
        let (data, offsets) = (span(1000, 300, "data"), span(1000, 300, "offsets"));
        assert!(disjoint(&[span(1300, 8, "out")], &[data, offsets]).is_ok());
        let err = disjoint(&[span(1299, 8, "out")], &[data, offsets]).unwrap_err();
        assert!(
            err.code == error::INVALID_ARGUMENT && err.message.starts_with("out overlaps data:"),
            "{}",
            err.message
        );
        assert!(disjoint(&[span(1150, 0, "out")], &[span(1100, 100, "indices")]).is_ok());
        let null = Span::of(std::ptr::null::<u64>(), 4, "out");
        assert!(disjoint(&[null, null], &[span(1, 64, "indices")]).is_ok());
    }
}
