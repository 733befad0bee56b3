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

// ---------------------------------------------------------------------------------------------
// mmap_chunker.h

/// mmap-chunker's ABI version, v1.3.
#[unsafe(no_mangle)]
pub extern "C" fn mmap_engine_abi_version() -> u32 {
    crate::CHUNKER_ABI_VERSION
}

/// mmap-chunker's capability bits: all six.
#[unsafe(no_mangle)]
pub extern "C" fn mmap_engine_capabilities() -> u32 {
    chunker::CAPABILITIES
}

/// The calling thread's last chunker error, or null.
#[unsafe(no_mangle)]
pub extern "C" fn mmap_engine_last_error() -> *const c_char {
    Slot::Chunker.pointer()
}

/// Opens and maps a file; null on failure.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_open(path: *const c_char) -> *mut Engine {
    chunker_call("mmap_engine_open", std::ptr::null_mut(), || {
        // SAFETY: passed on from the caller.
        let path = unsafe { path_in(path) }.ok_or(chunker::PATH_NULL)?.ok_or(chunker::OPEN_FAILED)?;
        let engine = Engine::open(&path).ok_or(chunker::OPEN_FAILED)?;
        Ok(Box::into_raw(Box::new(engine)))
    })
}

/// Delimiter framing on `\n`.
///
/// # Safety
/// `handle` is null or a live handle used by no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_scan_chunks(handle: *mut Engine, chunk_size_bytes: usize) -> usize {
    chunker_call("mmap_engine_scan_chunks", 0, || {
        // SAFETY: passed on from the caller.
        Ok(unsafe { engine_mut(handle) }?.scan(chunk_size_bytes, b'\n'))
    })
}

/// Delimiter framing on one byte.
///
/// # Safety
/// `handle` is null or a live handle used by no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_scan_chunks_ex(
    handle: *mut Engine,
    chunk_size_bytes: usize,
    delimiter: u8,
) -> usize {
    chunker_call("mmap_engine_scan_chunks_ex", 0, || {
        // SAFETY: passed on from the caller.
        Ok(unsafe { engine_mut(handle) }?.scan(chunk_size_bytes, delimiter))
    })
}

/// Delimiter framing on a byte pattern.
///
/// # Safety
/// `handle` is null or a live handle used by no other thread during the call; `delimiter` is
/// null or readable for `delimiter_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_scan_chunks_pattern(
    handle: *mut Engine,
    chunk_size_bytes: usize,
    delimiter: *const u8,
    delimiter_len: usize,
) -> usize {
    chunker_call("mmap_engine_scan_chunks_pattern", 0, || {
        // SAFETY: passed on from the caller.
        let engine = unsafe { engine_mut(handle) }?;
        if delimiter_len == 0 {
            return Err(chunker::DELIMITER_EMPTY);
        }
        if delimiter.is_null() {
            return Err(chunker::DELIMITER_NULL);
        }
        if delimiter_len > isize::MAX as usize {
            return Err(chunker::DELIMITER_TOO_LONG);
        }
        // SAFETY: non-null, `u8` needs no alignment, the length fits an object (checked above);
        // readable for `delimiter_len` bytes (the caller's promise); only read during this call.
        let pattern = unsafe { std::slice::from_raw_parts(delimiter, delimiter_len) };
        engine.scan_pattern(chunk_size_bytes, pattern)
    })
}

/// Fixed-size chunks.
///
/// # Safety
/// `handle` is null or a live handle used by no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_scan_fixed(handle: *mut Engine, chunk_size_bytes: usize) -> usize {
    chunker_call("mmap_engine_scan_fixed", 0, || {
        // SAFETY: passed on from the caller.
        Ok(unsafe { engine_mut(handle) }?.scan_fixed(chunk_size_bytes))
    })
}

/// N-way record-aligned partitioning.
///
/// # Safety
/// `handle` is null or a live handle used by no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_partition_records(
    handle: *mut Engine,
    requested_partitions: usize,
    delimiter: u8,
) -> usize {
    chunker_call("mmap_engine_partition_records", 0, || {
        // SAFETY: passed on from the caller.
        unsafe { engine_mut(handle) }?.partition(requested_partitions, delimiter)
    })
}

/// `CChunkView`.
#[repr(C)]
pub struct ChunkView {
    data: *const u8,
    len: usize,
}

/// The view of chunk `index`; 0, or -1 on error.
///
/// # Safety
/// `handle` is null or a live handle not being scanned or freed; `out_chunk` is null or valid
/// for a write of one `CChunkView`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_get_chunk(
    handle: *mut Engine,
    index: usize,
    out_chunk: *mut ChunkView,
) -> i32 {
    chunker_call("mmap_engine_get_chunk", -1, || {
        if handle.is_null() {
            return Err(chunker::HANDLE_NULL);
        }
        // SAFETY: passed on from the caller.
        let out = unsafe { Out::new(out_chunk, "out_chunk") }.map_err(|_| chunker::OUT_NULL)?;
        // SAFETY: a live handle (the caller's promise) that nobody scans or frees during the call,
        // so a shared reference is sound while other threads read chunks too.
        let engine = unsafe { &*handle };
        let bytes = engine.chunk(index)?;
        out.set(ChunkView { data: bytes.as_ptr(), len: bytes.len() });
        Ok(0)
    })
}

/// Frees a handle; null is a no-op.
///
/// # Safety
/// `handle` is null or a live handle from `mmap_engine_open`, freed once, with no call in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap_engine_free(handle: *mut Engine) {
    if handle.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `mmap_engine_open` and freed only here, once (the
    // caller's promise).
    let engine = unsafe { Box::from_raw(handle) };
    // Dropping unmaps the file; a panic there leaks nothing worth crossing the boundary for.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(engine)));
}

// ---------------------------------------------------------------------------------------------
// loaderx.h

/// The `lx_*` ABI version.
#[unsafe(no_mangle)]
pub extern "C" fn lx_abi_version() -> u32 {
    crate::ABI_VERSION
}

/// The calling thread's last `lx_*` error, or null after a call that succeeded.
#[unsafe(no_mangle)]
pub extern "C" fn lx_last_error() -> *const c_char {
    Slot::Lx.pointer()
}

/// The `LX_*` name of an error code (a static string).
#[unsafe(no_mangle)]
pub extern "C" fn lx_error_name(code: i32) -> *const c_char {
    error::code_name(code).as_ptr()
}

/// Opens or creates a store.
///
/// # Safety
/// `path` is null or NUL-terminated; `out_store` is null or valid for a write of one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_open(
    path: *const c_char,
    mode: i32,
    format: i32,
    out_store: *mut *mut LxStore,
) -> i32 {
    lx_call("lx_store_open", || {
        // SAFETY: passed on from the caller.
        let out = unsafe { Out::new(out_store, "out_store") }?;
        // SAFETY: passed on from the caller.
        let path = unsafe { lx_path(path, "path") }?;
        let store = LxStore::open(&path, mode, format)?;
        out.set(Box::into_raw(Box::new(store)));
        Ok(())
    })
}

/// Closes a store; null is a no-op.
///
/// # Safety
/// `store` is null or a live store handle, closed once, with no call on it in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_close(store: *mut LxStore) {
    if store.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `lx_store_open` and freed only here, once.
    let store = unsafe { Box::from_raw(store) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(store)));
}

/// The number of records.
///
/// # Safety
/// `store` is null or a live store handle; `out_len` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_len(store: *const LxStore, out_len: *mut u64) -> i32 {
    lx_call("lx_store_len", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe { (handle(store, "store")?, Out::new(out_len, "out_len")?) };
        out.set(store.len()?);
        Ok(())
    })
}

/// The store's format (`LX_FORMAT_V1` or `LX_FORMAT_V2`).
///
/// # Safety
/// `store` is null or a live store handle; `out_format` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_format(store: *const LxStore, out_format: *mut i32) -> i32 {
    lx_call("lx_store_format", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe { (handle(store, "store")?, Out::new(out_format, "out_format")?) };
        out.set(store.format()?);
        Ok(())
    })
}

/// The records `data[offsets[i]..offsets[i + 1]]` for `i < count`.
///
/// # Safety
/// `offsets` is null or readable for `count + 1` values, `data` for `offsets[count]` bytes.
unsafe fn records_in<'a>(data: *const u8, offsets: *const u64, count: usize) -> Outcome<Vec<&'a [u8]>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let entries = count.checked_add(1).ok_or_else(|| Failure::argument("count is too large"))?;
    // SAFETY: passed on from the caller.
    let offsets = unsafe { slice_in(offsets, entries, "offsets") }?;
    let end = usize::try_from(offsets[count]).map_err(|_| {
        Failure::argument(format!("offsets[{count}] = {} does not fit in memory", offsets[count]))
    })?;
    // SAFETY: passed on from the caller.
    let data = unsafe { slice_in(data, end, "data") }?;
    store::split_records(data, offsets)
}

/// Appends `count` records in one batch with one codec.
///
/// # Safety
/// `store` is null or a live store handle; `offsets` is null or readable for `count + 1` values,
/// `data` for `offsets[count]` bytes; `out_first` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_append(
    store: *const LxStore,
    data: *const u8,
    offsets: *const u64,
    count: usize,
    codec: i32,
    out_first: *mut u64,
) -> i32 {
    lx_call("lx_store_append", || {
        // SAFETY: passed on from the caller.
        let (store, records, out) = unsafe {
            (
                handle(store, "store")?,
                records_in(data, offsets, count)?,
                Out::optional(out_first, "out_first")?,
            )
        };
        let first = store.append(&records, codec)?;
        if let Some(out) = out {
            out.set(first);
        }
        Ok(())
    })
}

/// Trains the `zstd_dict` dictionary on sample records.
///
/// # Safety
/// As [`lx_store_append`]; `out_trained` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_train_dictionary(
    store: *const LxStore,
    data: *const u8,
    offsets: *const u64,
    count: usize,
    out_trained: *mut i32,
) -> i32 {
    lx_call("lx_store_train_dictionary", || {
        // SAFETY: passed on from the caller.
        let (store, samples, out) = unsafe {
            (
                handle(store, "store")?,
                records_in(data, offsets, count)?,
                Out::optional(out_trained, "out_trained")?,
            )
        };
        let trained = store.train_dictionary(&samples)?;
        if let Some(out) = out {
            out.set(i32::from(trained));
        }
        Ok(())
    })
}

/// The sizes of the records at `indices`.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values,
/// `out_lens` null or writable for `count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_record_lens(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out_lens: *mut u32,
) -> i32 {
    lx_call("lx_store_record_lens", || {
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (
                handle(store, "store")?,
                slice_in(indices, count, "indices")?,
                slice_out(out_lens, count, "out_lens")?,
            )
        };
        store.record_lens(indices, out)
    })
}

/// The bytes the records at `indices` take back to back (the buffer `lx_store_gather` needs).
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out_total` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather_size(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out_total: *mut u64,
) -> i32 {
    lx_call("lx_store_gather_size", || {
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (handle(store, "store")?, slice_in(indices, count, "indices")?, Out::new(out_total, "out_total")?)
        };
        out.set(store.gather_size(indices)?);
        Ok(())
    })
}

/// Gathers records of exactly `record_len` bytes each into `out` (`count * record_len` bytes).
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out` is null or writable for `out_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather_fixed(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    record_len: usize,
    out: *mut u8,
    out_len: usize,
) -> i32 {
    lx_call("lx_store_gather_fixed", || {
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (handle(store, "store")?, slice_in(indices, count, "indices")?, slice_out(out, out_len, "out")?)
        };
        store.gather_fixed(indices, record_len, out)
    })
}

/// Gathers records of any size back to back into `out`, with their offsets.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out` is null or writable for `out_capacity` bytes; `out_offsets` null or writable for
/// `count + 1` values; `out_total` null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out: *mut u8,
    out_capacity: usize,
    out_offsets: *mut u64,
    out_total: *mut u64,
) -> i32 {
    lx_call("lx_store_gather", || {
        let entries = count.checked_add(1).ok_or_else(|| Failure::argument("count is too large"))?;
        // SAFETY: passed on from the caller.
        let (store, indices, offsets, total) = unsafe {
            (
                handle(store, "store")?,
                slice_in(indices, count, "indices")?,
                slice_out(out_offsets, entries, "out_offsets")?,
                Out::optional(out_total, "out_total")?,
            )
        };
        // SAFETY: passed on from the caller.
        let out = unsafe { slice_out(out, out_capacity, "out") }?;
        let written = store.gather(indices, out, offsets)?;
        if let Some(total) = total {
            total.set(written);
        }
        Ok(())
    })
}

/// Deletes the records at `indices`.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_delete(store: *const LxStore, indices: *const u64, count: usize) -> i32 {
    lx_call("lx_store_delete", || {
        // SAFETY: passed on from the caller.
        let (store, indices) = unsafe { (handle(store, "store")?, slice_in(indices, count, "indices")?) };
        store.delete(indices)
    })
}

/// Compacts the store.
///
/// # Safety
/// `store` is null or a live store handle; `out_report` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_compact(store: *const LxStore, out_report: *mut CompactReport) -> i32 {
    lx_call("lx_store_compact", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe { (handle(store, "store")?, Out::optional(out_report, "out_report")?) };
        let report = store.compact()?;
        if let Some(out) = out {
            out.set(report);
        }
        Ok(())
    })
}

/// Space accounting.
///
/// # Safety
/// `store` is null or a live store handle; `out_stats` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_stats(store: *const LxStore, out_stats: *mut StoreStats) -> i32 {
    lx_call("lx_store_stats", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe { (handle(store, "store")?, Out::new(out_stats, "out_stats")?) };
        out.set(store.stats()?);
        Ok(())
    })
}

/// Reads back every record; `LX_ERR_CORRUPT` (and the first problem's text) when any is damaged.
///
/// # Safety
/// `store` is null or a live store handle; `out_report` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_verify(store: *const LxStore, out_report: *mut VerifyReport) -> i32 {
    lx_call("lx_store_verify", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe { (handle(store, "store")?, Out::optional(out_report, "out_report")?) };
        let (report, problem) = store.verify()?;
        if let Some(out) = out {
            out.set(report);
        }
        problem.map_or(Ok(()), Err)
    })
}

/// Makes every committed record durable.
///
/// # Safety
/// `store` is null or a live store handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_sync(store: *const LxStore) -> i32 {
    lx_call("lx_store_sync", || {
        // SAFETY: passed on from the caller.
        unsafe { handle(store, "store") }?.sync()
    })
}

/// Reads a dataset's schema.
///
/// # Safety
/// `dir` is null or NUL-terminated; `out_schema` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_schema_read(dir: *const c_char, out_schema: *mut LxSchema) -> i32 {
    lx_call("lx_schema_read", || {
        // SAFETY: passed on from the caller.
        let (dir, out) = unsafe { (lx_path(dir, "dir")?, Out::new(out_schema, "out_schema")?) };
        out.set(schema::read(&dir)?);
        Ok(())
    })
}

/// Writes a dataset's schema beside its store.
///
/// # Safety
/// `dir` is null or NUL-terminated; `schema` is null or readable as one `lx_schema`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_schema_write(dir: *const c_char, schema: *const LxSchema) -> i32 {
    lx_call("lx_schema_write", || {
        // SAFETY: passed on from the caller (`lx_schema` is plain integers: any bytes are a value).
        let (dir, value) = unsafe { (lx_path(dir, "dir")?, handle(schema, "schema")?) };
        schema::write(&dir, value)
    })
}

/// Builds a sampler.
///
/// # Safety
/// `config` is null or readable as one `lx_sampler_config`; `out_sampler` is null or valid for
/// a write of one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_new(config: *const SamplerConfig, out_sampler: *mut *mut Sampler) -> i32 {
    lx_call("lx_sampler_new", || {
        // SAFETY: passed on from the caller (`lx_sampler_config` is plain integers).
        let (config, out) = unsafe { (handle(config, "config")?, Out::new(out_sampler, "out_sampler")?) };
        let built = sampler::build(config)?;
        out.set(Box::into_raw(Box::new(built)));
        Ok(())
    })
}

/// Frees a sampler; null is a no-op.
///
/// # Safety
/// `sampler` is null or a live sampler handle, freed once, with no call on it in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_free(sampler: *mut Sampler) {
    if sampler.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `lx_sampler_new` and freed only here, once.
    let sampler = unsafe { Box::from_raw(sampler) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(sampler)));
}

/// This rank's indices per batch.
///
/// # Safety
/// `sampler` is null or a live sampler handle; `out_size` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_batch_size(sampler: *const Sampler, out_size: *mut u32) -> i32 {
    lx_call("lx_sampler_batch_size", || {
        // SAFETY: passed on from the caller.
        let (sampler, out) = unsafe { (handle(sampler, "sampler")?, Out::new(out_size, "out_size")?) };
        out.set(sampler.local_batch_size());
        Ok(())
    })
}

/// Step `step`'s indices for this rank into `out` (exactly the local batch size long).
///
/// # Safety
/// `sampler` is null or a live sampler handle; `out` is null or writable for `out_len` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_batch(
    sampler: *const Sampler,
    step: u64,
    out: *mut u32,
    out_len: usize,
) -> i32 {
    lx_call("lx_sampler_batch", || {
        // SAFETY: passed on from the caller.
        let (sampler, out) = unsafe { (handle(sampler, "sampler")?, slice_out(out, out_len, "out")?) };
        sampler::batch(sampler, step, out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: *const c_char) -> Option<String> {
        // SAFETY: null or a NUL-terminated string of this thread's last-error slot, read at once.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    #[test]
    fn a_panic_in_an_lx_call_is_lx_err_internal_with_its_message() {
        let code = lx_call("lx_test", || panic!("boom"));
        assert_eq!(code, error::INTERNAL);
        assert_eq!(text(lx_last_error()).unwrap(), "internal error: panic in lx_test: boom");
        assert_eq!(lx_call("lx_test", || Ok(())), error::OK);
        assert_eq!(text(lx_last_error()), None);
    }

    #[test]
    fn a_panic_in_a_chunker_call_is_its_failure_value_and_an_internal_error_text() {
        let count: usize = chunker_call("mmap_engine_scan_chunks", 0, || panic!("boom"));
        assert_eq!(count, 0);
        assert_eq!(
            text(mmap_engine_last_error()).unwrap(),
            "internal error: panic in mmap_engine_scan_chunks"
        );
        // The two interfaces keep their own last errors.
        assert_eq!(lx_call("lx_test", || Err(Failure::argument("x"))), error::INVALID_ARGUMENT);
        assert!(text(mmap_engine_last_error()).is_some());
        assert_eq!(chunker_call("mmap_engine_scan_fixed", 0, || Ok(3usize)), 3);
        assert_eq!(text(mmap_engine_last_error()), None);
        assert_eq!(text(lx_last_error()).unwrap(), "x");
    }
}
