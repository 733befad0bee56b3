//! The exports of `mmap_chunker.h`.

use std::ffi::c_char;

use super::*;

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
        unsafe { engine_mut(handle) }?.scan(chunk_size_bytes, b'\n')
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
        unsafe { engine_mut(handle) }?.scan(chunk_size_bytes, delimiter)
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
        // Twentieth look's U4, for this handle too: a view written over the engine would replace
        // its plan (a later scan read wild memory).
        disjoint(&[Span::of(out_chunk, 1, "out_chunk")], &[Span::of(handle, 1, "handle")])
            .map_err(|_| chunker::OUT_OVERLAPS_HANDLE)?;
        // SAFETY: passed on from the caller.
        let out = unsafe { Out::new(out_chunk, "out_chunk") }
            .map_err(|_| if out_chunk.is_null() { chunker::OUT_NULL } else { chunker::OUT_MISALIGNED })?;
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
