//! [`Store::compact`]: the live records repacked in physical order, in place, through the redo
//! journal (`maintain.rs`), and the chunk bytes past the new end dropped.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::Store;
use super::chunk::Placement;
use super::files::{JOURNAL_FILE, MANIFEST_FILE, chunk_path};
use super::gather::Located;
use super::table::committed;
use crate::format::v2::Entry;
use crate::format::{Format, Journal};
use crate::sys::fill_vec;
use crate::{Error, Result};

/// A compaction moves records through the journal in batches of about this many bytes.
pub(super) const MOVE_BATCH_BYTES: usize = 32 << 20;

/// What [`Store::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Records moved to a lower address.
    pub moved: u64,
    /// Records already in place.
    pub skipped: u64,
    /// Chunk bytes before.
    pub bytes_before: u64,
    /// Chunk bytes after.
    pub bytes_after: u64,
}

impl Store {
    /// Rewrites the live records densely, in place, in physical order, and drops the chunk files
    /// past the new end.
    ///
    /// A record never moves to a higher address, and each batch of moves goes through the
    /// journal (so a move overlapping the record's own old bytes cannot tear it). An interrupted
    /// compaction leaves a consistent store; running it again finishes the job. Records already
    /// in place are skipped. A v2 store's chunk manifest is computed again from the chunks.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Locked`] when other handles have the store open;
    /// [`Error::CorruptRecord`] for a record whose entry is damaged or whose bytes cannot be read.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_limited(usize::MAX)
    }

    /// [`Store::compact`] that stops after `max_batches` journal batches (tests of interrupted
    /// compaction).
    #[doc(hidden)]
    pub fn compact_limited(&mut self, max_batches: usize) -> Result<CompactReport> {
        self.compact_in_batches(max_batches, MOVE_BATCH_BYTES)
    }

    /// [`Store::compact_limited`] with journal batches of about `batch_bytes` (tests that stop a
    /// compaction of a small store at any record).
    #[doc(hidden)]
    pub fn compact_in_batches(&mut self, max_batches: usize, batch_bytes: usize) -> Result<CompactReport> {
        // No batch is larger than a reopening writer takes of a journal (`recover`).
        let batch_bytes = batch_bytes.min(MOVE_BATCH_BYTES);
        self.writer()?;
        self.sync_before()?;
        let _x = self.exclusive("compacting it")?;
        let compacted = self.compact_held(max_batches, batch_bytes);
        if let Err(e) = &compacted
            && !matches!(e, Error::Committed { .. })
            && self.format() == Format::V2
            && self.chunks.dir().stat(MANIFEST_FILE).is_err()
            && self.chunks.dir().stat(JOURNAL_FILE).is_err()
        {
            // Stopped between batches, none pending (a full disk, a read failing): the batches
            // done stand, and the manifest their first removed describes the chunks again (look
            // 111, L111-2; best effort: the next writer computes a missing one).
            let _ = self.rebuild_manifest(Vec::new());
        }
        compacted
    }

    /// [`Store::compact_in_batches`] once the store is held alone.
    fn compact_held(&self, max_batches: usize, batch_bytes: usize) -> Result<CompactReport> {
        let before = self.stats()?;
        if self.index.stride().is_some() {
            // Dense by construction: every record lies where its index says, with no gap. Only
            // the blocks' checksums past the count deletes left go.
            self.index.shrink(self.committed_for_writing()?.0)?;
            return Ok(CompactReport {
                moved: 0,
                skipped: before.length,
                bytes_before: before.chunk_bytes,
                bytes_after: before.chunk_bytes,
            });
        }
        let mut report = CompactReport { bytes_before: before.chunk_bytes, ..CompactReport::default() };
        let (len, frontier) = self.committed_for_writing()?;
        let (capacity, limits) = (self.chunk_capacity()?, self.index.limits());
        let live = self.live_in_physical_order(len, frontier)?;
        self.check_chunks_hold(&live)?;
        self.check_records(&live)?;
        let mut place = Placement::new(0, 0, capacity, limits);
        let mut batch: Vec<(u64, Entry)> = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        let mut batches = 0usize;
        let mut manifest_dropped = false;
        let mut run = |store: &Store, batch: &mut Vec<(u64, Entry)>, data: &mut Vec<u8>| -> Result<bool> {
            if batches == max_batches {
                return Ok(false);
            }
            // Moves change the chunks' bytes under their checksums: the manifest goes before the
            // first batch lands, and is computed again from the chunks when compaction ends (or
            // by the next writer, after a crash).
            let drop = store.format() == Format::V2 && !manifest_dropped;
            store.run_journal_dropping_manifest(
                Journal::Move { entries: std::mem::take(batch), data: std::mem::take(data) },
                "a compaction's batch of moves",
                drop,
            )?;
            manifest_dropped |= drop;
            batches += 1;
            Ok(true)
        };
        for &(idx, e) in &live {
            let len = u64::from(e.stored);
            // Records are visited in physical order and repacked from the start. A record must
            // never move up (it would land on bytes not yet moved): with the capacity the store
            // was written with that cannot happen; with a smaller one (this handle's option) a
            // record that would move up stays, and packing goes on after it.
            let here = (e.chunk, e.offset);
            if len == 0 {
                // An empty record goes to the current packing position (`place(0)` changes
                // nothing), even when that is past its old one: it has no bytes to land on
                // anything, and the packing position only ever grows.
                let to = place.place(0).unwrap_or(here);
                if to == here {
                    report.skipped += 1;
                } else {
                    batch.push((idx, Entry { chunk: to.0, offset: to.1, ..e }));
                    report.moved += 1;
                }
                continue;
            }
            let to = match place.place(len) {
                Some(to) if to <= here => to,
                _ => {
                    // Never backwards: real records do not overlap (checked above), so
                    // everything packed so far ends at or before this record's start.
                    place = Placement::new(e.chunk, e.end(), capacity, limits);
                    here
                }
            };
            if to == here {
                report.skipped += 1;
                continue;
            }
            let start = data.len();
            data.resize(start + len as usize, 0);
            let f = self.chunks.get(e.chunk)?;
            if !self.chunks.read_exact(&f, e.chunk, e.offset, &mut data[start..])? {
                return Err(self.truncated_under(idx, e, None));
            }
            batch.push((idx, Entry { chunk: to.0, offset: to.1, ..e }));
            report.moved += 1;
            if data.len() >= batch_bytes.max(1) && !run(self, &mut batch, &mut data)? {
                return self.compaction_stopped(report);
            }
        }
        if !batch.is_empty() && !run(self, &mut batch, &mut data)? {
            return self.compaction_stopped(report);
        }
        self.publish_packed(len, place)?;
        // The entries past the count that deletes left go too (look 97, F97-1: 200,000 records
        // deleted down to 1,000 kept a 6.4 MB index), while the store is still held alone.
        self.index.shrink(len)?;
        report.bytes_after = self.stats()?.chunk_bytes;
        Ok(report)
    }

    /// Every live record `(index, entry)`, each entry checked, in the order compaction visits
    /// them.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] naming a record whose entry is damaged or overlaps another's.
    fn live_in_physical_order(&self, len: u64, frontier: (u32, u64)) -> Result<Vec<(u64, Entry)>> {
        // Each entry with its own checksum where the layout keeps one (review 52: a damaged
        // entry's length let the next record be packed over its bytes).
        let entries = self.index.entries_checked(0, len)?;
        let mut live: Vec<(u64, Entry)> = Vec::with_capacity(entries.len());
        for (idx, e) in (0..len).zip(entries) {
            let e = e.map_err(|r| self.record_error(idx, format!("bad index entry: {r}")))?;
            self.index.check(&e).map_err(|r| self.record_error(idx, format!("bad index entry: {r}")))?;
            committed(&e, frontier).map_err(|r| self.record_error(idx, format!("bad index entry: {r}")))?;
            live.push((idx, e));
        }
        // A total order: physical position, then empty records before the real one that starts
        // where they do (an empty record sits at the frontier of its time, so it shares the next
        // record's offset), then the index. Empty records take no bytes and never move the
        // packing position; real records must not overlap (a damaged or hostile index could
        // claim shared bytes, and moving one would tear the other).
        live.sort_unstable_by_key(|(idx, e)| (e.chunk, e.offset, e.stored != 0, *idx));
        let mut last_real: Option<(u64, Entry)> = None;
        for &(idx, e) in live.iter().filter(|(_, e)| e.stored != 0) {
            if let Some((prev_idx, prev)) = last_real
                && prev.chunk == e.chunk
                && prev.end() > e.offset
            {
                return Err(self.record_error(
                    idx,
                    format!(
                        "bad index entry: its bytes {}..{} of chunk {} overlap record {prev_idx}'s",
                        e.offset,
                        e.end(),
                        e.chunk
                    ),
                ));
            }
            last_real = Some((idx, e));
        }
        Ok(live)
    }

    /// Reads every live record as `verify` reads it (its crc32c in v2, its frame decoded where
    /// it is compressed), before anything moves: a record whose entry lies about its length
    /// would have the next one packed over its true bytes and the loss made permanent (reviews
    /// 52 and 53), so a damaged record stops compaction with nothing changed, named as `verify`
    /// names it (its chunk file). A v1 raw record has nothing to check.
    ///
    /// # Errors
    /// The read's error for the first damaged record, in index order.
    fn check_records(&self, live: &[(u64, Entry)]) -> Result<()> {
        let checksums = self.index.has_checksums();
        let bad: Vec<(u64, Error)> = live
            // Empty records too: a length damaged to 0 reads as an empty record whose crc32c
            // (0) is not the entry's (review 54: it was left to the packing, which moved the
            // next record over its bytes).
            .par_iter()
            .map_init(Vec::new, |buf: &mut Vec<u8>, &(index, entry)| {
                let checked = self
                    .index
                    .check(&entry)
                    .map_err(|r| self.record_error(index, format!("bad index entry: {r}")))
                    .and_then(|codec| {
                        let l = Located { index, entry, codec };
                        fill_vec(buf, entry.logical as usize, |out| self.read_shard(&[l], out, checksums))
                    });
                checked.err().map(|e| (index, e))
            })
            .flatten()
            .collect();
        match bad.into_iter().min_by_key(|(i, _)| *i) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Refuses, before anything moves, a chunk file shorter than the live records it holds end:
    /// packing over it, or computing the manifest again from it, would certify the loss.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] naming the chunk and the first record past its end.
    fn check_chunks_hold(&self, live: &[(u64, Entry)]) -> Result<()> {
        // The furthest-reaching record of each chunk (`live` is in physical order).
        let mut ends: BTreeMap<u32, (u64, Entry)> = BTreeMap::new();
        for &(idx, e) in live.iter().filter(|(_, e)| e.stored != 0) {
            ends.insert(e.chunk, (idx, e));
        }
        for (chunk, (idx, e)) in ends {
            let missing = || Error::io("stat", self.chunks.path(chunk), std::io::ErrorKind::NotFound.into());
            let held = self.chunks.file_len(chunk)?.ok_or_else(missing)?;
            if held < e.end() {
                return Err(self.truncated_under(idx, e, Some(held)));
            }
        }
        Ok(())
    }

    /// Record `idx` (at `e`) runs past the end of its chunk file (of `held` bytes, when known).
    fn truncated_under(&self, idx: u64, e: Entry, held: Option<u64>) -> Error {
        let held = held.map(|h| format!(" of {h} bytes")).unwrap_or_default();
        Error::CorruptRecord {
            path: chunk_path(&self.dir, e.chunk),
            index: idx,
            reason: format!(
                "truncated: the record's bytes {}..{} run past the end of chunk {}{held}; compaction stops here \
                 (`loaderx verify` names every record it lost)",
                e.offset,
                e.end(),
                e.chunk
            ),
            source: None,
        }
    }

    /// Publishes the packed frontier of a finished compaction and drops the chunk bytes past it:
    /// the tail chunk truncated there, the chunks after it removed, a v2 manifest computed again.
    fn publish_packed(&self, len: u64, place: Placement) -> Result<()> {
        // The packed frontier is never past the old one, so it can always be stored.
        let (chunk, off) = place.frontier().ok_or_else(|| Error::StoreFull {
            path: self.dir.clone(),
            len,
            adding: 0,
            limit: len,
        })?;
        // The manifest first (the chunks are final below the packed frontier): the header's
        // write is the one step of a compaction under neither a journal nor a manifest, and a
        // kill inside it must leave a manifest holding the count (`Store::torn_header_or_damage`).
        if self.format() == Format::V2 {
            self.write_manifest_for(len, (chunk, off), Vec::new())?;
        }
        // The new frontier is the commit. Once it is in the header (its msync may still have
        // failed), the bytes past it must go before anything is appended there: a failure from
        // here on stops the handle, and the next writer's open removes them.
        let published = self.publish(len, (chunk, off), true);
        if published.is_err() && self.index.frontier() != (chunk, off) {
            return published;
        }
        published.and_then(|()| self.drop_chunks_past((chunk, off))).map_err(|e| {
            self.halt(
                "the compaction",
                "open the store again (read-write): its writer removes what lies past the new end",
                e,
            )
        })
    }

    /// Drops the chunk bytes past a frontier just published: the tail chunk truncated there
    /// (created when the frontier rolled into a chunk that held no record), every chunk after it
    /// removed (whatever gaps a removal interrupted earlier left), the directory synced.
    pub(super) fn drop_chunks_past(&self, (chunk, off): (u32, u64)) -> Result<()> {
        self.chunks.reset_past(chunk);
        let tail = self.chunks.path(chunk);
        // Only ever shortened: a tail chunk missing or shorter than the committed bytes is
        // damage to report (at the next open), not a file to make or fill with zeros. A tail
        // chunk that holds nothing yet (a compaction's frontier at the start of the next chunk)
        // is made, empty. Opened in the directory this handle holds, checked to be the store's.
        self.here()?;
        let f = match self.chunks.open_write(chunk, false) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && off == 0 => {
                self.chunks.open_write(chunk, true)
            }
            opened => opened,
        }
        .map_err(|e| Error::io("open chunk", &tail, e))?;
        if !f.metadata().map_err(|e| Error::io("stat", &tail, e))?.is_file() {
            return Err(Error::io("open chunk", &tail, std::io::ErrorKind::InvalidInput.into()));
        }
        let size = f.metadata().map_err(|e| Error::io("stat", &tail, e))?.len();
        if size < off {
            return Err(Error::Corrupt {
                path: tail,
                offset: size,
                reason: format!("shorter ({size} bytes) than the committed {off}: not extended"),
                source: None,
            });
        }
        f.set_len(off).map_err(|e| Error::io("truncate", &tail, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tail, e))?;
        super::files::remove_chunks_after(self.chunks.dir(), chunk)?;
        // And after: a mapping a reader made in between covers bytes now cut, or a file now
        // removed that a later append would make anew.
        self.chunks.reset_past(chunk);
        self.sync_held_dir()
    }

    /// A compaction stopped early ([`Store::compact_limited`]) leaves a consistent store; a v2
    /// one gets its manifest back.
    fn compaction_stopped(&self, report: CompactReport) -> Result<CompactReport> {
        if self.format() == Format::V2 {
            self.rebuild_manifest(Vec::new())?;
        }
        Ok(report)
    }
}
