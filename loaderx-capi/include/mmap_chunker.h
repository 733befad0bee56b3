/*
 * mmap_chunker.h: record-aligned byte-range planning over one immutable file, from C.
 *
 * This is loaderx's implementation of the mmap-chunker 0.2.6 interface (ABI v1.3): a program
 * written against that library's header compiles against this one unchanged and links
 * -lloaderx_capi (libloaderx_capi.so or libloaderx_capi.a) instead. The plans are loaderx-core's
 * framing planners, the same as `loaderx partition` and the Rust functions.
 *
 * The model: open a file (it is mapped read-only once), plan it with one of the scan or
 * partition calls, read its chunks as views into the mapping, free the handle. A handle holds
 * one plan at a time; every scan or partition call replaces it.
 *
 * Errors: a call that fails returns its failure value (NULL, 0 or -1) and records a text for
 * mmap_engine_last_error(); every call except the version, capability and last-error queries
 * and mmap_engine_free() clears that text first, so after a successful call it is NULL.
 * No call lets a panic (or any other unwinding) out of the library.
 *
 * Threading: open, scan, partition and free are single-threaded per handle: nothing else may use
 * that handle while they run. Once a plan is made, any number of threads may call
 * mmap_engine_get_chunk() on the handle at once. Different handles are independent. The last
 * error is per thread.
 *
 * File mutation: the file must stay as it was when opened for as long as its handle lives. The
 * mapping is not a copy: if the file is truncated, reading a view past its new end raises
 * SIGBUS on Linux and macOS (an access violation on Windows), and bytes rewritten in place show
 * through the views. Map a snapshot when the file may change.
 *
 * Platforms: built and tested on Linux (x86-64). The same sources build a .dylib on macOS and a
 * .dll on Windows (there, paths are UTF-8), which are not built or tested here.
 */
#ifndef MMAP_CHUNKER_H
#define MMAP_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open, mapped file and its current plan. Opaque: only pointers to it exist. */
typedef struct CEngineHandle CEngineHandle;

/*
 * One chunk: `len` bytes at `data`, inside the file's mapping (read only; no copy was made).
 * Layout: `data` at offset 0, `len` at offset sizeof(void *); 16 bytes on 64-bit targets.
 */
typedef struct {
    const uint8_t *data;
    size_t len;
} CChunkView;

/* (major << 16) | minor: v1.3. */
#define MMAP_ENGINE_ABI_VERSION 0x00010003U

/* Capability bits, as mmap_engine_capabilities() reports them (all six here: 0x3F). */
#define MMAP_ENGINE_CAP_ZERO_COPY              (1U << 0) /* views point into the mapping */
#define MMAP_ENGINE_CAP_CONFIGURABLE_DELIMITER (1U << 1) /* mmap_engine_scan_chunks_ex() */
#define MMAP_ENGINE_CAP_ERROR_STRINGS          (1U << 2) /* mmap_engine_last_error() */
#define MMAP_ENGINE_CAP_FIXED_SIZE_CHUNKING    (1U << 3) /* mmap_engine_scan_fixed() (v1.1) */
#define MMAP_ENGINE_CAP_RECORD_PARTITIONING    (1U << 4) /* mmap_engine_partition_records() (v1.2) */
#define MMAP_ENGINE_CAP_MULTI_BYTE_DELIMITER   (1U << 5) /* mmap_engine_scan_chunks_pattern() (v1.3) */

/*
 * The library's interface version, (major << 16) | minor: 0x00010003. Compare the major part
 * with MMAP_ENGINE_ABI_VERSION's at load time; a minor version only adds functions.
 */
uint32_t mmap_engine_abi_version(void);

/* The MMAP_ENGINE_CAP_* bits this library offers (0x3F). */
uint32_t mmap_engine_capabilities(void);

/*
 * The calling thread's last error text, or NULL when the last call that clears it succeeded.
 * The text is at most 255 bytes; it stays valid until the next chunker call on this thread, so
 * copy it to keep it. The texts:
 *   "path is null"                        mmap_engine_open(NULL)
 *   "failed to open or map file"          missing, unreadable, a directory, not mappable
 *   "handle is null"                      any call given a NULL handle
 *   "out_chunk is null"                   mmap_engine_get_chunk() without a view to fill
 *   "out_chunk is misaligned for a CChunkView"  its view not aligned (this library checks)
 *   "chunk index out of bounds"           index >= the current plan's chunk count
 *   "delimiter is null"                   a pattern scan's NULL pattern (with a length > 0)
 *   "delimiter_len must be > 0"           a pattern scan's empty pattern
 *   "delimiter_len exceeds supported range"
 *   "requested_partitions must be > 0"    partitioning a non-empty file into 0 parts
 *   "internal error: panic in <function>" a bug in the library, caught at the boundary
 */
const char *mmap_engine_last_error(void);

/*
 * Opens and maps `path` (NUL-terminated; on POSIX any bytes, passed to open(2) as they are).
 * Returns a handle to free with mmap_engine_free(), or NULL on failure (see the last error).
 * An empty file opens: every plan of it has 0 chunks, with no error.
 */
CEngineHandle *mmap_engine_open(const char *path);

/* mmap_engine_scan_chunks_ex() on '\n' (the v1.0 call). */
size_t mmap_engine_scan_chunks(CEngineHandle *handle, size_t chunk_size_bytes);

/*
 * Plans chunks of about `chunk_size_bytes` ending on `delimiter` (a raw byte: no quoting or
 * escaping is understood). A chunk starting at `s` ends just after the first `delimiter` at or
 * after `s + chunk_size_bytes` (that byte itself included), or at the end of the file when there
 * is none (or when `s + chunk_size_bytes` is past the end). A size of 0 counts as 1.
 * Returns the number of chunks: 0 for an empty file, or on error (a NULL handle; a plan with
 * more chunks than memory holds, a chunk per byte of a large file of delimiters, which keeps the
 * previous plan).
 */
size_t mmap_engine_scan_chunks_ex(CEngineHandle *handle, size_t chunk_size_bytes, uint8_t delimiter);

/*
 * mmap_engine_scan_chunks_ex() with a delimiter of `delimiter_len` bytes (NULs allowed): a chunk
 * ends just after the first whole occurrence of the pattern that starts at or after its target.
 * The pattern is read during the call only. An empty or NULL pattern, or a plan larger than
 * memory holds, returns 0, sets the last error and keeps the previous plan. A pattern longer than the file is fine (one chunk).
 */
size_t mmap_engine_scan_chunks_pattern(CEngineHandle *handle, size_t chunk_size_bytes,
                                       const uint8_t *delimiter, size_t delimiter_len);

/*
 * Plans chunks of exactly `chunk_size_bytes` (0 counts as 1), the last one shorter when the size
 * does not divide the file: chunk i is [i * size, min((i + 1) * size, file_len)). Computed, not
 * listed: a plan of any count costs no memory. Returns the count (0 for an empty file).
 */
size_t mmap_engine_scan_fixed(CEngineHandle *handle, size_t chunk_size_bytes);

/*
 * Plans at most `requested_partitions` contiguous ranges covering the file, each but the last
 * ending just after a `delimiter`, for N workers. Target i (i = 1 .. N-1) is
 * floor(file_len * i / N); a target at or before the previous cut is skipped, and a cut is
 * placed just after the first delimiter at or after each other target, so giant records (or a
 * file without the delimiter: one range) give fewer ranges than asked (a 10-byte file of ten
 * delimiters, N = 10: cuts at 2, 4, 6 and 8, five ranges); asking for more than file_len is
 * asking for file_len. The plan only probes forward from each target; it never reads the
 * whole file.
 * Returns the number of ranges; 0 for an empty file (no error), 0 and the error
 * "requested_partitions must be > 0" (the previous plan kept) for N = 0 on a non-empty file,
 * and 0 with an error, the previous plan kept, for a plan larger than memory holds.
 */
size_t mmap_engine_partition_records(CEngineHandle *handle, size_t requested_partitions, uint8_t delimiter);

/*
 * Fills `*out_chunk` with chunk `index` of the current plan: 0, or -1 on error (a NULL argument,
 * an index out of bounds; `*out_chunk` is then left as it was). The view points into the file's
 * mapping, which lives until mmap_engine_free(): a later scan replaces the plan, not the
 * mapping, so views already taken keep reading the same bytes. Never write through a view.
 */
int32_t mmap_engine_get_chunk(CEngineHandle *handle, size_t index, CChunkView *out_chunk);

/* Unmaps the file and frees the handle; NULL is a no-op. Every view of it is then invalid. */
void mmap_engine_free(CEngineHandle *handle);

#ifdef __cplusplus
}
#endif

#endif /* MMAP_CHUNKER_H */
