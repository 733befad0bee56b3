//! The on-disk layouts, as plain values and pure functions over `&[u8]`: nothing here touches a
//! file, so a fuzz target over any of them is a few lines.
//!
//! | module | file |
//! | --- | --- |
//! | `header` | `meta.zr`'s header and the v1 limits |
//! | `entry` | a `meta.zr` table entry and the codec tags |
//! | `dict` | `dict.zr`, the bare zstd dictionary (and the legacy headed file) |
//! | `journal` | `journal.zr`, the redo log of delete and compaction |
//! | `checksum` | the checksum of small metadata files |

mod checksum;
pub mod dict;
mod entry;
mod header;
mod journal;

pub use checksum::checksum;
pub use entry::{Codec, RecordLoc};
pub use header::{
    ENTRY_SIZE, Header, HeaderError, MAGIC, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, MAX_RECORDS,
    META_SIZE, VERSION,
};
pub use journal::Journal;
