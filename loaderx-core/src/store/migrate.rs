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
    INDEX_FILE, JOURNAL_FILE, MANIFEST_FILE, META_FILE, sync_dir, write_atomic, write_atomic_with,
};
use super::gather::{Located, stored_range};
use super::table::committed;
use crate::format::v2::{self, ChunkSummary, Entry, Manifest};
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
    /// The format it has now.
    pub to: Format,
    /// Records carried over.
    pub records: u64,
    /// Record bytes read to compute their checksums (to v2) or 0.
    pub bytes_checked: u64,
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
        let store = Store::open_rw(dir.as_ref(), StoreOptions::new())?;
        let _x = store.exclusive()?;
        let from = store.format();
        let records = store.len();
        let mut report = MigrateReport { from, to, records, bytes_checked: 0 };
        if from == to {
            return Ok(report);
        }
        if store.dir.join(JOURNAL_FILE).exists() {
            return Err(Error::Locked { path: store.dir.clone(), reason: "a journal is pending".into() });
        }
        match to {
            Format::V2 => report.bytes_checked = store.write_v2_index(progress)?,
            Format::V1 => store.write_v1_index()?,
        }
        Ok(report)
    }

    /// v1 → v2: the manifest, then `index.zr` renamed into place, then `meta.zr` removed.
    fn write_v2_index(&self, progress: &(dyn Fn(u64, u64) + Sync)) -> Result<u64> {
        let len = self.len();
        let frontier = self.index.frontier();
        let total: u64 = self.stats()?.live_bytes;
        let done = std::sync::atomic::AtomicU64::new(0);
        let mut entries: Vec<[u8; v2::ENTRY_SIZE]> = Vec::new();
        let mut first = 0;
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
                    let crc = if entry.stored == 0 {
                        crc32c::crc32c(&[])
                    } else {
                        let map = self
                            .chunks
                            .view(entry.chunk, entry.end())?
                            .ok_or_else(|| self.truncated_error(&l))?;
                        let src = stored_range(&map, &entry).ok_or_else(|| self.truncated_error(&l))?;
                        crc32c::crc32c(src)
                    };
                    let d = done.fetch_add(u64::from(entry.stored), std::sync::atomic::Ordering::Relaxed);
                    if index.is_multiple_of(4096) {
                        progress(d + u64::from(entry.stored), total);
                    }
                    Ok(Entry { crc, ..entry }.encode())
                })
                .collect::<Result<Vec<_>>>()?;
            entries.extend(encoded);
            first = end;
        }
        progress(total, total);
        let chunks: Vec<ChunkSummary> = (0..=frontier.0)
            .into_par_iter()
            .map(|id| self.summarise_chunk(id, (id == frontier.0).then_some(frontier.1)))
            .collect::<Result<_>>()?;
        write_atomic(&self.dir, MANIFEST_FILE, &Manifest { count: len, chunks }.encode())?;
        let dict_id = self.dict.get().map_or(0, |d| dict::id(&d.raw));
        let header = v2::Header {
            chunk_capacity: self.opts.capacity_for(Format::V1),
            dict_id,
            tail_chunk: frontier.0,
            tail_offset: frontier.1,
            count: len,
        };
        write_atomic_with(&self.dir, INDEX_FILE, |file, tmp| {
            let io = |e| Error::io("write", tmp, e);
            write_all_at(file, &header.encode(), 0).map_err(io)?;
            let mut at = v2::HEADER_SIZE as u64;
            for piece in entries.chunks(1 << 15) {
                write_all_at(file, piece.as_flattened(), at).map_err(io)?;
                at += (piece.len() * v2::ENTRY_SIZE) as u64;
            }
            Ok(())
        })?;
        let meta = self.dir.join(META_FILE);
        fs::remove_file(&meta).map_err(|e| Error::io("remove", &meta, e))?;
        sync_dir(&self.dir)?;
        Ok(total)
    }

    /// v2 → v1: every entry checked against v1's fields first, then `meta.zr` renamed into
    /// place, then `index.zr` (the commit) and `manifest.zr` removed.
    fn write_v1_index(&self) -> Result<()> {
        let len = self.len();
        let (tail_chunk, tail_offset) = self.index.frontier();
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
        write_atomic_with(&self.dir, META_FILE, |file, tmp| {
            let io = |e| Error::io("write", tmp, e);
            file.set_len(META_SIZE).map_err(|e| Error::io("size", tmp, e))?;
            write_all_at(file, bytemuck::bytes_of(&header), 0).map_err(io)?;
            let mut at = ENTRY_SIZE as u64;
            for piece in locs.chunks(1 << 16) {
                write_all_at(file, bytemuck::cast_slice(piece), at).map_err(io)?;
                at += (piece.len() * ENTRY_SIZE) as u64;
            }
            Ok(())
        })?;
        for name in [INDEX_FILE, MANIFEST_FILE] {
            let p = self.dir.join(name);
            fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
        sync_dir(&self.dir)
    }
}
