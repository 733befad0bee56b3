//! Zrecord: the on-disk record store.
//!
//! The files of a store directory are listed in `files`; their bytes are [`crate::format`]'s.
//!
//! | module | concern |
//! | --- | --- |
//! | `open` | [`Store`]: create, open (the index opened and locked, checked to be the one its path names) |
//! | `recover` | what an open checks and a writer's open repairs: the frontier (a torn commit's or damage), the chunks, the bytes past the frontier, the manifest |
//! | `options` | [`StoreOptions`] |
//! | `append` | append: compress, place, flush, commit |
//! | `sync` | `sync`: a deferred store's commits made durable; a durable append's chunk syncs |
//! | `gather` | gather and `map_records`: the batched reads, one shard plan |
//! | `cold` | cold batches: residency probed, a batch's pages asked for together |
//! | `gather_fixed` | the fixed-size gather, entries and records pipelined in one pass |
//! | `stride` | the fixed-stride layout: its gather (no entries), block checksums written and checked |
//! | `stride_delete` | a fixed-stride delete: its journal's planned block checksums, applied without certifying damage |
//! | `maintain` | delete and compaction through the journal |
//! | `migrate` | a store from one format to the other, in place |
//! | `report` | stats and verify |
//! | `backing` | [`Backing`](backing::Backing): records by index, whatever holds them (what datasets read through) |
//! | `index` | the index of any layout behind one face: the writer's [`Index`](index::Index), a batch's [`View`](index::View) |
//! | `table` | a batch's reads and checks of entries, per layout: [`Table`](table::Table) |
//! | `chunk` | chunk files (mapped reads, positional writes) and the placement rule |
//! | `codec` | per-record zstd contexts and dictionary training |
//! | `decode` | one record into a gather's destination: checked as the codec table says, copied or decoded |
//! | `files` | file names, atomic replacement, directory sync |
//! | `not_a_store` | what a directory without an index is instead (a store set, a directory of datasets), for the refusal |
//! | `lock` | the writer's lock file, and the index's lock: shared by every handle, exclusive for delete, compaction, migration and replacement ([`StoreKey`](lock::StoreKey): a store's identity) |

mod append;
mod backing;
mod chunk;
mod codec;
mod cold;
mod compact;
mod decode;
mod files;
#[cfg(test)]
mod files_tests;
mod gather;
mod gather_fixed;
mod guard;
mod identity;
mod index;
mod lock;
mod maintain;
mod migrate;
mod not_a_store;
mod open;
mod options;
mod overlaps;
mod pool;
mod publish;
mod recover;
mod report;
mod shared;
mod stride;
mod stride_delete;
mod sync;
mod table;

pub(crate) use backing::{Backing, VarFill};
#[cfg(feature = "remote")]
pub(crate) use codec::{DecodeError, Decoder, Dictionary};
pub use compact::CompactReport;
#[cfg(feature = "remote")]
pub(crate) use decode::{RecordError, Stored, decode_record};
pub use files::SCHEMA_FILE;
pub(crate) use files::TMP_SUFFIX;
#[cfg(feature = "remote")]
pub(crate) use files::{
    DICT_FILE, INDEX_FILE, MANIFEST_FILE, META_FILE, chunk_name, open_or_create_no_follow,
};
pub(crate) use files::{
    LOCK_FILE, is_store_file, read_capped, remove_store_files, sync_dir, write_atomic, write_atomic_with,
};
pub use gather::RecordIndex;
pub(crate) use gather::Resolved;
#[cfg(feature = "remote")]
pub(crate) use identity::Identity;
#[cfg(feature = "remote")]
pub(crate) use identity::Ids;
pub(crate) use identity::check_part;
#[cfg(feature = "remote")]
pub(crate) use index::{v1_header_error, v2_header_error};
pub(crate) use lock::WriteLock;
pub(crate) use lock::{StoreKey, is_loaderx_lock_file, lock_out_readers};
#[cfg(feature = "remote")]
pub(crate) use lock::{WriterThere, writer_there};
pub use migrate::MigrateReport;
pub(crate) use not_a_store::datasets_in;
pub use open::Store;
pub(crate) use open::trim_index;
pub use options::{OpenMode, StoreOptions};
pub(crate) use pool::Parallelism;
pub use pool::forked_child_pool;
pub(crate) use publish::{Temporary, check_target};
pub use report::{CodecCounts, StoreStats, StoreSummary, VerifyReport};
pub use shared::SharedStore;
