//! The platform and the only `unsafe` code of the crate, as a leaf: it imports nothing of the
//! crate but the on-disk layouts of [`crate::format`] and the error type.
//!
//! | module | job |
//! | --- | --- |
//! | `map` | [`MappedFile`]: the one type that maps a file (inputs, chunk files) |
//! | `meta_map` | [`MetaMap`]: the v1 `meta.zr` table, mapped and used in place |
//! | `index_map` | [`IndexMap`]: the v2 `index.zr`, a mapped array that grows |
//! | `dest` | [`Destination`]: gather destinations in possibly uninitialised memory |
//! | `near_copy` | [`NearCopy`]: `memcpy` or 256-byte blocks where a record lands just past its source, as measured |
//! | `env` | where caches go (`LOADERX_CACHE_DIR`, XDG, home) |
//! | `cpu` | AVX2 dispatch for portable loops, prefetch hints |
//! | `crc` | a copy that sums its bytes (crc32c) in the same pass: verified reads |
//! | `io` | positional reads and writes, file identity (Unix and Windows) |
//! | `dir` | [`Dir`]: a store's directory held open, its files opened relative to it (`openat`) |
//! | `pages` | the page cache: residency (`mincore`), read-ahead advice, eviction; huge pages for fresh buffers (Linux) |
//! | `jpeg` | libjpeg-turbo: a JPEG's header, then only a crop's region, DCT-scaled (feature `turbojpeg`) |
//! | `pinned` | page-locked host memory (feature `cuda`) |
//! | `signals` | what a program may set at its edge: a write past `ulimit -f` an error, not `SIGXFSZ` |
//! | `tuning` | every tuning constant, each with why in one line (the runs: docs/benchmarks/tuning.md) |
//!
//! What a mapping may assume, and what it may not:
//! - A mapping stays valid while the `Mmap`/`MmapRaw` lives; the file may be changed underneath by
//!   another process. Reading a page past the file's current end raises SIGBUS, so every mapping
//!   here is checked against the file's length when it is made, and the files mapped are either
//!   fixed-size (`meta.zr`, never truncated by loaderx), only grown while open (`index.zr`),
//!   committed chunk regions (never truncated
//!   while anyone has the store open), or inputs that the caller promises not to truncate while
//!   they are mapped (framing over immutable inputs).
//! - Pages written by another process through a shared mapping are visible here; ordering between
//!   them is what the atomic `length` field provides.

mod cpu;
mod crc;
mod dest;
mod dir;
mod env;
mod forked;
mod index_map;
mod io;
#[cfg(feature = "turbojpeg")]
mod jpeg;
mod map;
mod meta_map;
mod near_copy;
mod pages;
#[cfg(feature = "cuda")]
mod pinned;
mod signals;
pub(crate) mod tuning;

pub(crate) use cpu::{HINT_FAR, HINT_NEAR, HINT_NONE, Kernel, prefetch, prefetch_span, with_avx2};
pub use cpu::{cpu_signature, fixed_stride_hint_below};
pub(crate) use crc::{Summer, prefetch_lanes};
pub(crate) use dest::{Destination, fill_slice, fill_vec, fill_vec_aligned};
pub(crate) use dir::{Access, Dir, Stat};
pub use env::cache_dir;
#[cfg(feature = "remote")]
pub(crate) use forked::HeldAtFork;
pub(crate) use forked::MadeIn;
pub(crate) use forked::PerProcess;
pub(crate) use index_map::{IndexMap, IndexView};
pub(crate) use io::{
    create_own_temporary, file_key, first_hole, is_a_readers_failure, link_count, no_follow,
    no_follow_non_blocking, non_blocking, open_regular, read_exact_at, rename_exchange, rename_no_replace,
    same_file, start_writeback, write_all_at, write_records_at,
};
#[cfg(feature = "images")]
pub(crate) use io::{meta_changed, meta_key};
#[cfg(feature = "turbojpeg")]
pub(crate) use jpeg::{Decoded, Jpeg, JpegHeader, Region};
pub use map::MappedFile;
pub(crate) use meta_map::MetaMap;
pub use near_copy::{NearCopy, NearCopyCalibration};
pub(crate) use pages::advise_huge_pages;
pub use pages::{PageCount, evict, resident_pages};
#[cfg(all(test, target_os = "linux", feature = "images"))]
pub(crate) use pages::{advice_visible, advised_huge};
#[cfg(feature = "cuda")]
pub use pinned::pinned_zeroed;
pub use signals::file_size_limit_as_error;
