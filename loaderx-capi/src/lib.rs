//! A stable C ABI over loaderx: mmap-chunker 0.2.6's planning interface and the store and sampler.
//!
//! Two headers describe what this crate's shared library (`libloaderx_capi.so`) and static
//! library (`libloaderx_capi.a`) export:
//!
//! - `include/mmap_chunker.h`: source-compatible with mmap-chunker 0.2.6's header (ABI v1.3,
//!   `mmap_engine_*`): a file mapped once, planned by delimiter, byte pattern, fixed size or N-way
//!   record-aligned partitioning, its chunks handed out as zero-copy views. The plans are
//!   loaderx-core's [`framing`](loaderx_core::framing) planners, so they are byte for byte those
//!   of `loaderx partition` and of the Rust functions.
//! - `include/loaderx.h`: the `lx_*` interface (ABI v1.1, [`ABI_VERSION`]): stores opened or
//!   created, records appended with any codec, batches gathered into caller memory (fixed-size or
//!   variable with offsets), delete, compact, stats, verify, a dense dataset's schema, and the
//!   sampler's batch for (seed, step) in every mode.
//!
//! What it is not: a second engine. Every call checks its pointers and lengths and then calls
//! loaderx-core; no call lets a panic cross the boundary (each runs under `catch_unwind`, a panic
//! becomes an error code and the last-error text). Each interface keeps its own thread-local
//! last error.
//!
//! All the `unsafe` of the crate (raw pointers turned into slices, paths and handles, and the
//! `#[unsafe(no_mangle)]` exports) is in one module, `ffi`; the work behind each export is safe
//! code in `chunker`, `store`, `schema` and `sampler`.
//!
//! Built and tested on Linux (`.so`, `.a`); the same crate builds a `.dylib` on macOS and a
//! `.dll` / `.lib` on Windows, which are not built or tested here.

mod chunker;
mod error;
mod ffi;
mod fork;
mod sampler;
mod schema;
mod store;

/// The `lx_*` interface's version, `(major << 16) | minor`, as `lx_abi_version()` returns it.
pub const ABI_VERSION: u32 = 0x0001_0001;

/// mmap-chunker's interface version (v1.3), as `mmap_engine_abi_version()` returns it.
pub const CHUNKER_ABI_VERSION: u32 = 0x0001_0003;
