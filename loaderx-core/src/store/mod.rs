//! Zrecord: the on-disk record store.
//!
//! Layout of a store directory (see `format` for the bytes):
//! - `meta.zr`: header + fixed sparse table of 2^24 entries, memory-mapped and used in place;
//! - `0.zr`, `1.zr`, ...: chunk files of densely packed record bytes, at most 4 GiB each;
//! - `dict.zr`: the trained zstd dictionary of `zstd_dict` stores;
//! - `journal.zr`: present only while a delete or compaction batch is being applied;
//! - `write.lock`: the writer's advisory lock, present while a writer has the store open.
//!
//! | module | concern |
//! | --- | --- |
//! | `format` | header, table entry, codec tags, dictionary file: pure functions over bytes |
//! | `codec` | per-record zstd contexts and dictionary training |
//! | `chunk` | positional reads and writes of chunk files |
//! | `journal` | the redo log of delete and compaction |
//! | `lock` | the writer's lock file |
//! | `engine` | [`Store`]: the operations |

mod chunk;
mod codec;
mod engine;
pub(crate) mod format;
mod journal;
mod lock;

pub(crate) use chunk::sync_dir;
pub use engine::{CodecCounts, CompactReport, Store, StoreOptions, StoreStats, VerifyReport};
pub(crate) use engine::{gather_inline, remove_store_dir};
pub use format::{Codec, MAX_RECORD_SIZE, MAX_RECORDS};

/// Decodes a journal and counts its entries (for `loaderx_core::format::journal_decode`).
pub(crate) fn journal_entries(bytes: &[u8]) -> Result<usize, (u64, String)> {
    Ok(match journal::Journal::decode(bytes)? {
        journal::Journal::Delete { entries, .. } | journal::Journal::Move { entries, .. } => entries.len(),
    })
}
