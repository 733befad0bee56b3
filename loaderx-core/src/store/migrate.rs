//! [`Store::migrate`]: a store from one on-disk format to the other, in place.
//!
//! The formats share the chunk files byte for byte (both pack records the same way, and a v1
//! store's locations all fit v2's fields), so a migration writes only a new index beside the old
//! one and swaps it in with one rename; the record bytes never move, and a migration killed at any
//! point leaves the original store, or the migrated one, intact:
//!
//! - to v2: `manifest.zr`, then `index.zr` (written as a temporary file and renamed into place:
//!   the commit point, since an opener takes `index.zr` over `meta.zr`), then `meta.zr` removed
//!   (a writer's open removes one a crash left);
//! - to v1: `meta.zr` (renamed into place, ignored while `index.zr` exists), then `index.zr`
//!   removed (the commit point), then `manifest.zr`.

use std::fs;

use rayon::prelude::*;

use super::Store;
use super::files::{
    INDEX_FILE, JOURNAL_FILE, MANIFEST_FILE, META_FILE, write_atomic_bytes_in, write_atomic_in,
    write_atomic_in_then,
};
use super::gather::{Located, stored_range};
use super::table::committed;
use crate::format::v2::{self, ChunkSummary, Entry, Layout, Manifest, Stride};
use crate::format::{
    Codec, ENTRY_SIZE, Format, Header, MAX_CHUNK_SIZE, MAX_RECORD_SIZE, META_SIZE, RecordLoc, dict,
};
use crate::sys::write_all_at;
use crate::{Error, Result, StoreOptions};

/// Entries converted and written at a time.
const BLOCK: u64 = 1 << 16;

/// What [`Store::migrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateReport {
    /// The format the store had.
    pub from: Format,
    /// The layout it had (a v1 store's reads as [`Layout::Entries`]).
    pub from_layout: Layout,
    /// The format it has now.
    pub to: Format,
    /// Records carried over.
    pub records: u64,
    /// Record bytes read to compute their checksums (to v2) or 0.
    pub bytes_checked: u64,
    /// Whether a new index was written: false for a store already in the form asked for (left
    /// alone, and not checked: [`Store::verify_each`] is the check).
    pub written: bool,
}

impl Store {
    /// Migrates the store at `dir` to format `to`, in place: a new index is written beside the
    /// old one and swapped in atomically; the chunk files are shared and never rewritten. To v2
    /// every record's checksum is computed from its stored bytes (and each chunk's, for the
    /// manifest); to v1 every record must fit v1 (at most 2^24 records of at most 1 MiB, no LZ4,
    /// chunks of at most 4 GiB), which is checked before anything is written. `progress(done,
    /// total)` is told the record bytes checked so far. A store already in `to` is left alone.
    ///
    /// The store needs to be closed everywhere else: the migration holds it exclusively.
    ///
    /// # Errors
    /// As [`Store::open_rw`], and [`Error::Locked`] while other handles have it open;
    /// [`Error::StoreFull`], [`Error::RecordTooLarge`] or [`Error::InvalidArgument`] naming the
    /// first record v1 cannot hold; [`Error::CorruptRecord`] for a damaged entry (nothing is
    /// changed then).
    pub fn migrate(
        dir: impl AsRef<std::path::Path>,
        to: Format,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<MigrateReport> {
        Store::migrating(dir.as_ref(), |store| {
            let from = store.format();
            let from_layout = store.index.layout();
            let mut report = MigrateReport {
                from,
                from_layout,
                to,
                records: store.len(),
                bytes_checked: 0,
                written: false,
            };
            if from == to {
                return Ok(report);
            }
            store.refuse_damage("the migration")?;
            report.written = true;
            match to {
                Format::V2 => report.bytes_checked = store.write_v2_index(Layout::Entries, progress)?,
                Format::V1 => store.write_v1_index()?,
            }
            Ok(report)
        })
    }

    /// Runs `migration` on the store at `dir`, opened read-write and held exclusively, with no
    /// journal pending.
    fn migrating(
        dir: &std::path::Path,
        migration: impl FnOnce(&Store) -> Result<MigrateReport>,
    ) -> Result<MigrateReport> {
        let store = Store::open_rw(dir, StoreOptions::new())?;
        let _x = store.exclusive("migrating it")?;
        if store.dir.join(JOURNAL_FILE).exists() {
            return Err(Error::Locked { path: store.dir.clone(), reason: "a journal is pending".into() });
        }
        migration(&store)
    }

    /// Refuses, with nothing changed, a store that is not intact by every check it has (its
    /// records against their checksums, or decoded; its manifest against the chunks): a
    /// migration writes new checksums, or drops them, and must never certify bytes the store's
    /// own checksums say are damaged. The error names the first damaged record (or file) and
    /// counts the rest.
    ///
    /// # Errors
    /// The first problem [`Store::verify_files`] finds; [`Error::CorruptRecord`] for the first
    /// damaged record.
    pub(super) fn refuse_damage(&self, doing: &str) -> Result<()> {
        let (mut first, mut damaged) = (None, 0u64);
        self.verify_each(|_, e| {
            damaged += 1;
            first.get_or_insert(e);
        })?;
        Err(match first {
            None => return self.verify_files()?.into_iter().next().map_or(Ok(()), Err),
            Some(Error::CorruptRecord { path, index, reason, source }) => Error::CorruptRecord {
                path,
                index,
                reason: format!(
                    "{reason} ({damaged} damaged record(s) in all; {doing} refused, nothing changed: \
                     `loaderx verify` lists them)"
                ),
                source,
            },
            Some(other) => other,
        })
    }

    /// → a v2 index of an entry per record, `layout` [`Layout::Entries`] (32 bytes, any record) or
    /// [`Layout::Compact`] (16 bytes, raw records only): every entry checked, its record's
    /// checksum carried over from an index that has one (sealed: [`Store::refuse_damage`] checked
    /// it) or else computed, the manifest (from v1; a v2 store's is kept, its chunks unchanged),
    /// then `index.zr` renamed into place, then (from v1) `meta.zr` removed. The caller has
    /// refused a damaged store.
    fn write_v2_index(&self, layout: Layout, progress: &(dyn Fn(u64, u64) + Sync)) -> Result<u64> {
        let (len, frontier) = self.committed_for_writing()?;
        let total: u64 = self.stats()?.live_bytes;
        let done = std::sync::atomic::AtomicU64::new(0);
        let compact = layout == Layout::Compact;
        let sealed = self.index.has_checksums();
        let refuse = |reason: String| Error::InvalidArgument(format!("{}: {reason}", self.dir.display()));
        if compact && (self.dict.get().is_some() || self.chunk_capacity()? > v2::COMPACT_MAX_OFFSET) {
            return Err(refuse(
                "a compact index holds raw records in chunks below 1 TiB, and no dictionary".into(),
            ));
        }
        let dict_id = self.dict.get().map_or(0, |d| dict::id(&d.raw));
        let header = v2::Header {
            // A fixed-stride store keeps its capacity (its records lie where it put them).
            chunk_capacity: self.chunk_capacity()?,
            dict_id,
            tail_chunk: frontier.0,
            tail_offset: frontier.1,
            count: len,
            layout,
        };
        // Written a block at a time as each is converted: the new index is never whole in
        // memory (look 149, L149-1: 32 bytes a record were, 32 GB for 10^9 records). A bad entry
        // fails the fill, and the temporary goes: nothing changed.
        let landed = write_atomic_in_then(
            self.chunks.dir(),
            INDEX_FILE,
            |file, tmp| {
                let io = |e| Error::io("write", tmp, e);
                write_all_at(file, &header.encode(), 0).map_err(io)?;
                let mut at = v2::HEADER_SIZE as u64;
                let mut first = 0;
                let mut piece: Vec<u8> = Vec::new();
                while first < len {
                    let end = (first + BLOCK).min(len);
                    let block = self.index.entries(first, end)?;
                    let encoded = block
                        .into_par_iter()
                        .enumerate()
                        .map(|(k, entry)| {
                            let index = first + k as u64;
                            let bad = |r: String| self.record_error(index, format!("bad index entry: {r}"));
                            let codec = self.index.check(&entry).map_err(bad)?;
                            committed(&entry, frontier).map_err(bad)?;
                            let l = Located { index, entry, codec };
                            let crc = if sealed {
                                entry.crc
                            } else if entry.stored == 0 {
                                crc32c::crc32c(&[])
                            } else {
                                let map = self
                                    .chunk_view(entry.chunk, entry.end())?
                                    .ok_or_else(|| self.truncated_error(&l))?;
                                let src =
                                    stored_range(&map, &entry).ok_or_else(|| self.truncated_error(&l))?;
                                crc32c::crc32c(src)
                            };
                            let d =
                                done.fetch_add(u64::from(entry.stored), std::sync::atomic::Ordering::Relaxed);
                            if index.is_multiple_of(4096) {
                                progress(d + u64::from(entry.stored), total);
                            }
                            // The entry's bytes in the first `n` of 32.
                            let entry = Entry { crc, ..entry };
                            let mut bytes = [0u8; v2::ENTRY_SIZE];
                            let n = if compact {
                                let c = v2::encode_compact(&entry)
                                    .map_err(|r| refuse(format!("record {index}: {r}")))?;
                                bytes[..c.len()].copy_from_slice(&c);
                                c.len()
                            } else {
                                bytes = entry.encode();
                                v2::ENTRY_SIZE
                            };
                            Ok((bytes, n))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    piece.clear();
                    for (bytes, n) in encoded {
                        piece.extend_from_slice(&bytes[..n]);
                    }
                    write_all_at(file, &piece, at).map_err(io)?;
                    at += piece.len() as u64;
                    first = end;
                }
                Ok(())
            },
            || {
                progress(total, total);
                self.manifest_from_v1(len, frontier)
            },
        );
        self.after_index_renamed(landed)?;
        Ok(total)
    }

    /// Migrates the store at `dir` to the v2 index `to`, in place: from the fixed stride to an
    /// entry per record (every record's checksum computed), or to the fixed stride from an entry
    /// per record of either format, when every record is raw, of one size and lies where the
    /// stride puts it (what appending raw records of one size leaves; each block's checksum
    /// computed). `record_size` 0 in `to` takes the first record's; `block_records` 0 the
    /// default. Only `index.zr` is written (and, from v1, `manifest.zr`), renamed into place in
    /// one step; the record bytes never move. A store already in `to` is left alone.
    ///
    /// # Errors
    /// As [`Store::migrate`]; [`Error::InvalidArgument`] naming the first record that is not raw,
    /// not of the record size or not where the stride puts it (records a delete moved: rewrite
    /// the dataset instead), or a write frontier past the last record (`compact` first).
    pub fn migrate_layout(
        dir: impl AsRef<std::path::Path>,
        to: Layout,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<MigrateReport> {
        Store::migrating(dir.as_ref(), |store| store.relayout(to, progress))
    }

    /// [`Store::migrate_layout`] of this store, held exclusively.
    fn relayout(&self, to: Layout, progress: &(dyn Fn(u64, u64) + Sync)) -> Result<MigrateReport> {
        let (store, from, records) = (self, self.format(), self.len());
        let from_layout = store.index.layout();
        let mut report =
            MigrateReport { from, from_layout, to: Format::V2, records, bytes_checked: 0, written: false };
        let unchanged = match (store.index.layout(), to) {
            (Layout::Entries, Layout::Entries) => from == Format::V2,
            (Layout::Compact, Layout::Compact) => true,
            (Layout::Fixed { record_size: have, .. }, Layout::Fixed { record_size, .. }) => {
                record_size == have || record_size == 0
            }
            _ => false,
        };
        if unchanged {
            return Ok(report);
        }
        store.refuse_damage("the migration")?;
        report.written = true;
        match (store.index.layout(), to) {
            (_, Layout::Entries | Layout::Compact) => {
                report.bytes_checked = store.write_v2_index(to, progress)?;
            }
            (_, Layout::Fixed { record_size, block_records }) => {
                let record_size = match record_size {
                    0 if records > 0 => store.get(0)?.len() as u64,
                    // No record to take the size from: a size made up (1 byte) refused every
                    // later append of the dataset's items (look 95, F3).
                    0 => {
                        return Err(Error::InvalidArgument(format!(
                            "{}: an empty store has no record size for the fixed-stride layout: \
                             migrate it once it holds records, or give the size",
                            store.dir.display()
                        )));
                    }
                    r => u64::from(r),
                };
                report.bytes_checked =
                    store.write_fixed_index(record_size, u64::from(block_records), progress)?;
            }
        }
        Ok(report)
    }

    /// An entry index (v1 or v2) → the fixed stride: every entry checked against the place the
    /// stride gives its record, each block summed, then (from v1) `manifest.zr`, then `index.zr`
    /// renamed into place (the commit), then `meta.zr` removed.
    fn write_fixed_index(
        &self,
        record_size: u64,
        block_records: u64,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<u64> {
        let (len, frontier) = self.committed_for_writing()?;
        // The records tell the capacity they were written with when the tail is past chunk 0
        // (chunk 0 holds K records of the record size); the stride below is then checked against
        // every record. A v1 store records no capacity, and one migrated from v1 holds v1's 4 GiB,
        // not the capacity its chunks were filled to (look 98, L98-1: v2 → v1 → v2 → fixed was
        // refused, blaming a delete). Else the index's own is kept.
        let capacity = if frontier.0 > 0 && len > 0 {
            match (0..len).take_while(|&i| self.index.entry(i).is_ok_and(|e| e.chunk == 0)).count() {
                // No record in chunk 0: nothing to tell, and the stride's check refuses them.
                0 => self.chunk_capacity()?,
                per_chunk => per_chunk as u64 * record_size,
            }
        } else {
            self.chunk_capacity()?
        };
        let bad = |reason: String| Error::InvalidArgument(format!("{}: {reason}", self.dir.display()));
        // FORMAT.md's rule: an index with any other block size does not open.
        let per_block = Stride::default_per_block(record_size);
        if block_records != 0 && block_records != per_block {
            return Err(bad(format!(
                "{block_records} records a block: a fixed-stride index of {record_size}-byte records has {per_block}"
            )));
        }
        // Empty records have no stride (look 126, L126-2: "do not fit its chunks" blamed them).
        if record_size == 0 {
            return Err(bad(
                "its records are empty: a fixed-stride layout holds records of at least one byte".into(),
            ));
        }
        let stride = Stride::new(record_size, capacity, per_block).ok_or_else(|| {
            bad(format!("records of {record_size} bytes do not fit its chunks of {capacity} bytes"))
        })?;
        let total = len * record_size;
        let done = std::sync::atomic::AtomicU64::new(0);
        let sums = (0..stride.blocks(len))
            .into_par_iter()
            .map(|b| {
                let records = stride.block_records(b, len);
                for (index, e) in records.clone().zip(self.index.entries(records.start, records.end)?) {
                    self.index.check(&e).map_err(|r| self.record_error(index, format!("bad index entry: {r}")))?;
                    let why = if e.codec != Codec::Raw as u8 {
                        Some(format!("is {}, not raw", Codec::from_tag(e.codec).map_or("?", |c| c.name())))
                    } else if u64::from(e.logical) != record_size {
                        Some(format!("is {} bytes, not {record_size}", e.logical))
                    } else if stride.locate(index) != Some((e.chunk, e.offset)) {
                        let (c, o) = stride.locate(index).unwrap_or_default();
                        Some(format!(
                            "lies at chunk {} byte {}, not at chunk {c} byte {o} where the fixed stride puts it \
                             (records moved by a delete cannot be migrated in place: rewrite the dataset)",
                            e.chunk, e.offset
                        ))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Err(bad(format!("record {index} {why}")));
                    }
                }
                let sum = self.block_sum(&stride, records.clone())?.ok_or_else(|| {
                    self.block_error(&stride, records.start, "truncated or missing chunk")
                })?;
                let d = done.fetch_add((records.end - records.start) * record_size, std::sync::atomic::Ordering::Relaxed);
                if b.is_multiple_of(1024) {
                    progress(d, total);
                }
                Ok(sum)
            })
            .collect::<Result<Vec<u32>>>()?;
        progress(total, total);
        // The stride's frontier, or the same place before a roll to the next chunk (a capacity
        // that is not a multiple of the record size, as v1 knew it).
        let rolled = frontier.1 == stride.per_chunk * record_size
            && u64::from(frontier.0 + 1) * stride.per_chunk == len;
        if stride.frontier(len) != Some(frontier) && !rolled {
            return Err(bad(format!(
                "its write frontier (chunk {}, byte {}) is past its last record (a delete left bytes behind): \
                 compact it first",
                frontier.0, frontier.1
            )));
        }
        let frontier = stride.frontier(len).unwrap_or(frontier);
        // A frontier that rolled over starts a chunk: its file exists before the index names it,
        // and before the manifest, which lists the chunks up to the new frontier as the header
        // will (review 51: it listed the old frontier's, and `verify` called the manifest
        // corrupt).
        self.here()?;
        self.chunks
            .open_write(frontier.0, true)
            .map_err(|e| Error::io("open", self.chunks.path(frontier.0), e))?;
        self.manifest_from_v1(len, frontier)?;
        let header = v2::Header {
            chunk_capacity: capacity,
            dict_id: 0,
            tail_chunk: frontier.0,
            tail_offset: frontier.1,
            count: len,
            layout: Layout::Fixed {
                record_size: u32::try_from(record_size)
                    .map_err(|_| bad(format!("records of {record_size} bytes")))?,
                block_records: u32::try_from(stride.per_block).unwrap_or(u32::MAX),
            },
        };
        let bytes: Vec<u8> = sums.iter().flat_map(|c| c.to_le_bytes()).collect();
        let landed = write_atomic_in(self.chunks.dir(), INDEX_FILE, |file, tmp| {
            let io = |e| Error::io("write", tmp, e);
            write_all_at(file, &header.encode(), 0).map_err(io)?;
            write_all_at(file, &bytes, v2::HEADER_SIZE as u64).map_err(io)
        });
        self.after_index_renamed(landed)?;
        Ok(total)
    }

    /// From v1, a v2 store's first `manifest.zr`, computed from the chunks (a v2 store keeps
    /// the one it has: its chunks are unchanged, and [`Store::refuse_damage`] checked it).
    fn manifest_from_v1(&self, len: u64, frontier: (u32, u64)) -> Result<()> {
        if self.format() != Format::V1 {
            return Ok(());
        }
        let chunks: Vec<ChunkSummary> = (0..=frontier.0)
            .into_par_iter()
            .map(|id| self.summarise_chunk(id, (id == frontier.0).then_some(frontier.1)))
            .collect::<Result<_>>()?;
        write_atomic_bytes_in(self.chunks.dir(), MANIFEST_FILE, &Manifest { count: len, chunks }.encode())
    }

    /// v2 → v1: every entry checked against v1's fields first, then `meta.zr` renamed into
    /// place, then `index.zr` (the commit) and `manifest.zr` removed.
    fn write_v1_index(&self) -> Result<()> {
        let (len, (tail_chunk, tail_offset)) = self.committed_for_writing()?;
        let limit = Format::V1.max_records();
        if len > limit {
            return Err(Error::StoreFull { path: self.dir.clone(), len, adding: 0, limit });
        }
        // A frontier at exactly 4 GiB starts the next chunk in v1 (its offsets are u32).
        let v1_frontier = match (u16::try_from(tail_chunk), tail_offset) {
            (Ok(c), o) if o < MAX_CHUNK_SIZE => Some((c, o as u32)),
            (Ok(c), MAX_CHUNK_SIZE) => c.checked_add(1).map(|c| (c, 0)),
            _ => None,
        };
        let Some((tail_chunk, tail_offset)) =
            v1_frontier.filter(|(c, _)| u32::from(*c) < crate::format::MAX_CHUNKS)
        else {
            return Err(Error::InvalidArgument(format!(
                "{}: its write frontier (chunk {tail_chunk}, byte {tail_offset}) is past what a v1 store can hold",
                self.dir.display()
            )));
        };
        let mut locs: Vec<RecordLoc> = Vec::with_capacity(len as usize);
        let mut first = 0;
        while first < len {
            let end = (first + BLOCK).min(len);
            for (index, e) in (first..end).zip(self.index.entries(first, end)?) {
                self.index
                    .check(&e)
                    .map_err(|r| self.record_error(index, format!("bad index entry: {r}")))?;
                if let Some(c) = Codec::from_tag(e.codec)
                    && !Format::V1.has_codec(c)
                {
                    // In prose the codec is named in capitals ("is LZ4"), not as on the command line.
                    return Err(Error::InvalidArgument(format!(
                        "record {index} of {} is {}, which v1 stores do not have",
                        self.dir.display(),
                        c.name().to_uppercase()
                    )));
                }
                if e.logical as usize > MAX_RECORD_SIZE {
                    return Err(Error::RecordTooLarge {
                        path: self.dir.clone(),
                        index,
                        size: u64::from(e.logical),
                        limit: MAX_RECORD_SIZE as u64,
                    });
                }
                let loc = RecordLoc::try_from(e).map_err(|r| {
                    Error::InvalidArgument(format!(
                        "record {index} of {} does not fit v1: {r}",
                        self.dir.display()
                    ))
                })?;
                loc.validate_limits().map_err(|r| {
                    Error::InvalidArgument(format!(
                        "record {index} of {} does not fit v1: {r}",
                        self.dir.display()
                    ))
                })?;
                locs.push(loc);
            }
            first = end;
        }
        let header = Header { tail_chunk, tail_offset, length: len as u32, ..Header::empty() };
        write_atomic_in(self.chunks.dir(), META_FILE, |file, tmp| {
            let io = |e| Error::io("write", tmp, e);
            file.set_len(META_SIZE).map_err(|e| Error::io("size", tmp, e))?;
            write_all_at(file, bytemuck::bytes_of(&header), 0).map_err(io)?;
            let mut at = ENTRY_SIZE as u64;
            for piece in locs.chunks(1 << 16) {
                write_all_at(file, bytemuck::cast_slice(piece), at).map_err(io)?;
                at += (piece.len() * ENTRY_SIZE) as u64;
            }
            Ok(())
        })
        .map_err(|(e, _)| e)?;
        // Removing `index.zr` is the commit: a failure from there on leaves a v1 store.
        let index = self.dir.join(INDEX_FILE);
        self.chunks.dir().remove(INDEX_FILE).map_err(|e| Error::io("remove", &index, e))?;
        let manifest = self.dir.join(MANIFEST_FILE);
        self.chunks
            .dir()
            .remove(MANIFEST_FILE)
            .map_err(|e| Error::io("remove", &manifest, e))
            .and_then(|()| self.sync_held_dir())
            .map_err(|e| migrated(&self.dir, e))
    }

    /// After the rename of a migration's new `index.zr` (`landed`: its result), `meta.zr` (a v1
    /// store's) removed. Once the rename is done the migration stands: a failure from there on
    /// is [`Error::Committed`] (the store is in its new format; a v1 `meta.zr` left beside the
    /// new index is ignored, and removed by the next migration or writer).
    fn after_index_renamed(&self, landed: std::result::Result<(), (Error, bool)>) -> Result<()> {
        match landed {
            Err((e, false)) => Err(e),
            Err((e, true)) => Err(migrated(&self.dir, e)),
            Ok(()) => self
                .here()
                .and_then(|dir| remove_if_present(&dir.join(META_FILE)))
                .and_then(|()| self.sync_held_dir())
                .map_err(|e| migrated(&self.dir, e)),
        }
    }
}

/// A migration of the store at `dir` that committed, and then failed with `cause`.
fn migrated(dir: &std::path::Path, cause: Error) -> Error {
    Error::Committed {
        path: dir.to_path_buf(),
        what: "the migration".into(),
        remedy: "nothing to redo: the store is in its new format",
        source: Box::new(cause),
    }
}

/// Removes `path`; a file already gone is fine.
fn remove_if_present(path: &std::path::Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}
