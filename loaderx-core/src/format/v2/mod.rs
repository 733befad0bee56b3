//! Format v2: no 2^24-record or 1 MiB walls, every record checksummed, an index that grows with
//! the data, explicit little-endian bytes on every host. `FORMAT.md` at the repository root has
//! every field, offset and invariant; this module is those layouts as pure functions.
//!
//! | module | file |
//! | --- | --- |
//! | `header` | the 64-byte header at the start of `index.zr` |
//! | `entry` | a 32-byte entry of `index.zr`'s record array |
//! | `compact` | a 16-byte entry of a compact index (raw records of any size) |
//! | `manifest` | `manifest.zr`: every chunk's committed length and checksum |
//! | `stride` | the fixed-stride layout: where a record lies, which block checks it |

mod compact;
mod entry;
mod header;
mod manifest;
mod stride;

pub use compact::{
    COMPACT_ENTRY_SIZE, COMPACT_MAX_CHUNKS, COMPACT_MAX_OFFSET, decode_compact, encode_compact,
};
pub use entry::{ENTRY_SIZE, Entry, EntryError};
pub use header::{
    COUNT_OFFSET, HEADER_SIZE, Header, HeaderError, Layout, MAGIC, VERSION, VERSION_COMPACT, VERSION_FIXED,
};
pub use manifest::{ChunkSummary, MAGIC as MANIFEST_MAGIC, Manifest, manifest_len};
pub use stride::{BLOCK_TARGET, Stride};

/// Largest number of records a v2 store holds: the index is `64 + 32 N` bytes, which must stay
/// addressable (and mappable) on a 64-bit host. 2^56 records is 2 EiB of index.
pub const MAX_RECORDS: u64 = 1 << 56;
/// Largest record: its stored and logical lengths are `u32`.
pub const MAX_RECORD_SIZE: usize = u32::MAX as usize;
/// Largest number of chunk files: their ids are `u32`.
pub const MAX_CHUNKS: u64 = 1 << 32;
/// Default size of a chunk file before the writer rolls to the next (a store option).
pub const DEFAULT_CHUNK_CAPACITY: u64 = 1 << 30;
