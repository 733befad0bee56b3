//! [`StoreOptions`]: how a store is created or opened.

use std::path::Path;

use crate::format::v2;
use crate::format::{Format, MAX_CHUNK_SIZE};
use crate::sys::NearCopy;
use crate::{Error, Result};

/// Options for creating or opening a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    pub(super) format: Format,
    pub(super) chunk_capacity: Option<u64>,
    pub(super) dict_cap: Option<usize>,
    pub(super) overwrite: bool,
    pub(super) verify_reads: bool,
    pub(super) max_records: Option<u64>,
    pub(super) deferred_sync: bool,
    pub(super) cold_reads: bool,
    /// The index layout [`Store::create`](crate::Store::create) writes (v2 only).
    pub(super) layout: v2::Layout,
    /// How gathers copy records that land just past their source.
    pub(super) near_copy: NearCopy,
    /// Fixed-stride records shorter than this are hinted ahead; `None`: this CPU's table.
    pub(super) hint_below: Option<usize>,
}

/// How a binding (Python's `Zrecord`, C's `lx_store_open`) opens a store by path: the modes
/// of Python's `open`, one table for every face ([`Store::open_mode`](crate::Store::open_mode)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `"r"`: an existing store, read-only.
    Read,
    /// `"a"`: an existing store read-write, or a new one where there is none.
    Append,
    /// `"w"`: a new store, replacing a store that is there (an `index.zr` or `meta.zr` with its
    /// format's magic). Files a store would overwrite that are not a store's are refused; other
    /// files in the directory are left as they are.
    Create,
}

impl std::str::FromStr for OpenMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<OpenMode, String> {
        match s {
            "r" => Ok(OpenMode::Read),
            "a" => Ok(OpenMode::Append),
            "w" => Ok(OpenMode::Create),
            other => Err(format!("mode must be 'r', 'a' or 'w', not {other:?}")),
        }
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            format: Format::V2,
            chunk_capacity: None,
            dict_cap: None,
            overwrite: false,
            verify_reads: false,
            max_records: None,
            deferred_sync: false,
            cold_reads: true,
            layout: v2::Layout::Entries,
            near_copy: NearCopy::Measure,
            hint_below: None,
        }
    }
}

impl StoreOptions {
    /// Default options: format v2 for new stores, its default chunk size (1 GiB; v1: 4 GiB),
    /// adaptive dictionary size, no overwrite, reads unverified.
    pub fn new() -> Self {
        Self::default()
    }

    /// The format [`Store::create`](crate::Store::create) writes (default [`Format::V2`]); opening reads either.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Largest chunk file the writer fills before rolling to the next. A v2 store records its
    /// capacity when it is created; a v1 store's is at most 4 GiB and applies to this handle's
    /// writes.
    pub fn chunk_capacity(mut self, bytes: u64) -> Self {
        self.chunk_capacity = Some(bytes.max(1));
        self
    }

    /// Upper bound on the size of a trained `zstd_dict` dictionary (clamped to 64 MiB, the most a
    /// reader takes of `dict.zr`).
    pub fn dict_cap(mut self, bytes: Option<usize>) -> Self {
        self.dict_cap = bytes;
        self
    }

    /// Let [`Store::create`](crate::Store::create) replace an existing store at the path.
    pub fn overwrite(mut self, yes: bool) -> Self {
        self.overwrite = yes;
        self
    }

    /// Check every record's crc32c (and its entry's) on every gather of this handle, raw records
    /// included (v2 stores; v1 keeps no checksums). Off by default, because it costs a raw gather
    /// 1-14% (the guide, "Stores and formats"); without it, zstd records are still checked by their frame's
    /// checksum and LZ4 records by their crc32c (an LZ4 block has no checksum of its own), and
    /// only raw records and entries go unchecked. `verify` checks everything whatever this says.
    pub fn verify_reads(mut self, yes: bool) -> Self {
        self.verify_reads = yes;
        self
    }

    /// Commits of this handle publish their records (readers see them at once) without waiting
    /// for the disk; [`Store::sync`](crate::Store::sync) makes everything appended so far durable. Off by default:
    /// each [`Store::append`](crate::Store::append) returns with its records on disk, and a crash leaves a prefix of the
    /// appends. With it, a crash before `sync` returns can leave a store whose index names records
    /// that never reached the disk: for a store built whole and then published, as the converters
    /// build theirs (in `OUT.partial`, synced once, then renamed into place), where it saves a
    /// wait for the disk at every commit. Such a store killed between syncs is rebuilt, not
    /// reopened: its manifest lags its header, so a writer may refuse it as damaged.
    pub fn deferred_sync(mut self, yes: bool) -> Self {
        self.deferred_sync = yes;
        self
    }

    /// Batches of this handle whose pages are not in the page cache ask for all of them at once
    /// (`MADV_WILLNEED` on each index entry's page, then on each record's bytes) before reading,
    /// so their reads reach the disk together; a loader over the store asks for its steps' pages
    /// a prefetch window ahead. On by default; a batch whose pages are resident pays two clock
    /// reads (the guide, "Larger than memory"). Off, every page is faulted in as the copy reaches it,
    /// with the kernel's readahead around each fault. Linux only: elsewhere this does nothing.
    pub fn cold_reads(mut self, yes: bool) -> Self {
        self.cold_reads = yes;
        self
    }

    /// The index layout [`Store::create`](crate::Store::create) writes (default
    /// [`Layout::Entries`](v2::Layout::Entries), any record): one of the three, by type.
    /// [`Layout::Fixed`](v2::Layout::Fixed)'s `block_records` is 0 (FORMAT.md's rule) or that
    /// rule's value; [`fixed_stride`](Self::fixed_stride) and
    /// [`compact_entries`](Self::compact_entries) are shorthands. Opening takes the layout from
    /// the store.
    pub fn layout(mut self, layout: v2::Layout) -> Self {
        self.layout = layout;
        self
    }

    /// [`Store::create`](crate::Store::create) makes a v2 store of the fixed-stride layout:
    /// every record raw and exactly `record_size` bytes, found from its index alone (no
    /// per-record entry: the index is a crc32c per block of about 4 KiB of records, so the store
    /// is its records' size plus 0.1%, and a gather is the copy of the records). Appends of
    /// another size or codec are refused; reads, `verify`, delete and migration work as for
    /// any store (FORMAT.md, "Fixed-stride layout"). Dense datasets of raw records are written
    /// this way by the converters. Opening takes the layout from the store.
    pub fn fixed_stride(self, record_size: u32) -> Self {
        self.layout(v2::Layout::Fixed { record_size, block_records: 0 })
    }

    /// [`Store::create`](crate::Store::create) makes a v2 store of the compact layout: a 16-byte
    /// entry per record instead of 32, for raw records of any size (a chunk offset below 1 TiB,
    /// fewer than 2^24 chunks, each record's crc32c kept; FORMAT.md, "v2 compact layout").
    /// Appends of compressed records are refused; reads, `verify`, delete, compaction and
    /// migration work as for any store. Ragged datasets of raw records are written this way by
    /// the converters. Opening takes the layout from the store.
    /// With `false`, a compact layout asked for before goes back to the entry layout.
    pub fn compact_entries(self, yes: bool) -> Self {
        match (yes, self.layout) {
            (true, _) => self.layout(v2::Layout::Compact),
            (false, v2::Layout::Compact) => self.layout(v2::Layout::Entries),
            (false, _) => self,
        }
    }

    /// How this handle's gathers copy a record whose destination starts less than 64 bytes past
    /// its source, modulo 4 KiB, where some CPUs' `memcpy` runs several times slower: by default
    /// ([`NearCopy::Measure`]) the copy this CPU's measurement picks for that distance (taken once per
    /// process, [`NearCopy::measured`]); [`NearCopy::Memcpy`] or [`NearCopy::Blocks`] to choose
    /// one (`loaderx bench gather --near-copy-ab` measures both). The bytes are the same.
    pub fn near_copy(mut self, how: NearCopy) -> Self {
        self.near_copy = how;
        self
    }

    /// A fixed-stride gather hints the CPU to fetch the records a few places ahead of the one it
    /// copies when they are shorter than `bytes` (longer ones the hardware prefetcher follows by
    /// itself); `Some(0)` hints nothing. `None` (the default) takes this CPU's row of the table
    /// ([`cpu::fixed_stride_hint_below`](crate::cpu::fixed_stride_hint_below)). The bytes
    /// gathered are the same.
    pub fn hint_records_below(mut self, bytes: Option<usize>) -> Self {
        self.hint_below = bytes;
        self
    }

    /// Lowers the number of records this handle lets the store grow to below the format's limit
    /// (tests of the limit's error path without writing 2^24 or 2^56 records).
    #[doc(hidden)]
    pub fn max_records(mut self, n: u64) -> Self {
        self.max_records = Some(n);
        self
    }

    /// The chunk capacity a new store of `format` gets.
    pub(super) fn capacity_for(&self, format: Format) -> u64 {
        match format {
            Format::V1 => self.chunk_capacity.unwrap_or(MAX_CHUNK_SIZE).min(MAX_CHUNK_SIZE),
            Format::V2 => self.chunk_capacity.unwrap_or(v2::DEFAULT_CHUNK_CAPACITY),
        }
    }
}

impl StoreOptions {
    /// The header of a new v2 store with these options: the entry layout, the compact one (its
    /// chunks below 1 TiB), or the fixed stride checked against the chunk capacity.
    pub(super) fn v2_header(&self, dir: &Path) -> Result<v2::Header> {
        let capacity = self.capacity_for(Format::V2);
        let mut header = v2::Header::empty(capacity);
        let refuse = |reason: String| Error::InvalidArgument(format!("{}: {reason}", dir.display()));
        header.layout = match self.layout {
            v2::Layout::Entries => v2::Layout::Entries,
            v2::Layout::Compact if capacity > v2::COMPACT_MAX_OFFSET => {
                return Err(refuse(format!(
                    "a compact store's chunks hold at most 1 TiB (capacity {capacity})"
                )));
            }
            v2::Layout::Compact => v2::Layout::Compact,
            v2::Layout::Fixed { record_size, block_records } => {
                let rule = v2::Stride::default_per_block(u64::from(record_size));
                if block_records != 0 && u64::from(block_records) != rule {
                    return Err(refuse(format!(
                        "{block_records} records a block: a fixed-stride store of {record_size}-byte records has {rule}"
                    )));
                }
                v2::Layout::Fixed { record_size, block_records: u32::try_from(rule).unwrap_or(u32::MAX) }
            }
        };
        if let v2::Layout::Fixed { record_size, .. } = header.layout
            && header.stride().is_none()
        {
            return Err(refuse(format!(
                "fixed-stride records of {record_size} bytes do not fit chunks of {capacity} bytes \
                 (records must be 1 byte to the chunk capacity)"
            )));
        }
        Ok(header)
    }
}
