//! Rewrites of live data: [`Store::delete`] (swap the tail into each hole) and
//! [`Store::compact`] (repack in physical order, in place), both through the redo journal.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::Store;
use super::chunk::Placement;
use super::files::{JOURNAL_FILE, MANIFEST_FILE, chunk_path, read_capped, sync_dir, write_atomic};
use super::gather::RecordIndex;
use super::table::committed;
use crate::format::v2::Entry;
use crate::format::{Format, Journal};
use crate::{Error, Result};

/// A compaction moves records through the journal in batches of about this many bytes.
const MOVE_BATCH_BYTES: usize = 32 << 20;

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
    /// Deletes the records at `indices` by swapping the last record into each hole, in
    /// descending index order (duplicates count once). The index space stays dense `0..len`; an
    /// index is stable only until a delete. The bytes become garbage until [`Store::compact`].
    ///
    /// The change goes through a journal, so a crash leaves either none or all of it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::IndexOutOfRange`] or [`Error::InvalidArgument`] for a
    /// negative index (nothing deleted); [`Error::Locked`] when other handles have the store open.
    pub fn delete<I: RecordIndex>(&mut self, indices: &[I]) -> Result<()> {
        self.writer()?;
        // Its journal and durable commits stand on durable appends (a deferred-sync store's first).
        self.sync()?;
        let len = self.len();
        let mut order = indices
            .iter()
            .enumerate()
            .map(|(pos, &i)| self.check_index(pos, i, len))
            .collect::<Result<Vec<u64>>>()?;
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        if order.is_empty() {
            return Ok(());
        }
        let _x = self.exclusive("deleting from it")?;
        // Each hole gets the record then last: its index before the delete (a hole filled
        // earlier passes on what filled it).
        let mut changed: BTreeMap<u64, u64> = BTreeMap::new();
        let mut n = len;
        for idx in order {
            let last = n - 1;
            if idx != last {
                let moved = changed.get(&last).copied().unwrap_or(last);
                changed.insert(idx, moved);
            }
            n -= 1;
        }
        let moves: Vec<(u64, u64)> = changed.into_iter().filter(|(i, _)| *i < n).collect();
        let entries: Vec<(u64, Entry)> =
            moves.iter().map(|&(i, from)| Ok((i, self.index.entry(from)?))).collect::<Result<_>>()?;
        if let Some(stride) = self.index.stride() {
            // The blocks summed again after the moves, and those the moved records come from,
            // are checked first: summing a damaged one would certify it. Refused with nothing
            // changed.
            let mut blocks: Vec<(u64, u64)> = moves
                .iter()
                .flat_map(|&(i, from)| [i, from])
                .chain(n.checked_sub(1))
                .map(|i| (stride.block_of(i), i))
                .collect();
            blocks.sort_unstable();
            blocks.dedup_by_key(|(b, _)| *b);
            self.check_stride_blocks(&blocks, len)?;
            // What the blocks summed again will sum to, from the bytes just checked: applying
            // the journal (now, or after a crash) refuses a block that sums otherwise.
            let summed: Vec<u64> = moves
                .iter()
                .map(|&(i, _)| stride.block_of(i))
                .chain(n.checked_sub(1).map(|l| stride.block_of(l)))
                .collect();
            let mut summed = summed;
            summed.sort_unstable();
            summed.dedup();
            let sums = self.planned_sums(&stride, &summed, &moves.iter().copied().collect(), n)?;
            // Records move: the chunks' checksums change under the manifest, which goes first
            // and is computed again (by the next writer, after a crash).
            self.drop_manifest()?;
            self.run_journal(Journal::Delete { entries, new_length: n, sums })?;
            return self.rebuild_manifest(Vec::new());
        }
        self.run_journal(Journal::Delete { entries, new_length: n, sums: Vec::new() })?;
        if self.format() == Format::V2 {
            // The chunks are unchanged; the manifest's count follows the index. (A crash before
            // this write leaves a manifest behind the index, which the next writer repairs.)
            let mut m = self.writer()?.append.lock().unwrap_or_else(|e| e.into_inner());
            m.count = n;
            write_atomic(&self.dir, MANIFEST_FILE, &m.encode())?;
        }
        Ok(())
    }

    /// Writes `j` durably, applies it, removes it. Its entries are checked first, as applying it
    /// checks them: a journal its own replay would refuse is never written.
    fn run_journal(&self, j: Journal) -> Result<()> {
        let (Journal::Delete { entries, .. } | Journal::Move { entries, .. }) = &j;
        self.check_journal(entries)?;
        write_atomic(&self.dir, JOURNAL_FILE, &j.encode(self.format()))?;
        self.apply(&j)?;
        let path = self.dir.join(JOURNAL_FILE);
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    /// The most stored bytes of any record the index holds (a fixed stride's record size): of
    /// the entries that pass their checks, and never more than the format's record limit or the
    /// largest chunk file up to the tail (a record lies whole in one).
    fn largest_stored(&self) -> Result<u64> {
        if let Some(stride) = self.index.stride() {
            return Ok(stride.record_size);
        }
        let (len, mut largest, mut first) = (self.len(), 0u64, 0u64);
        while first < len {
            let end = first.saturating_add(1 << 16).min(len);
            largest = self
                .index
                .entries_checked(first, end)?
                .iter()
                .filter_map(|e| e.as_ref().ok())
                .map(|e| u64::from(e.stored))
                .fold(largest, u64::max);
            first = end;
        }
        let limit = match self.format() {
            Format::V1 => crate::format::MAX_RECORD_SIZE,
            Format::V2 => crate::format::v2::MAX_RECORD_SIZE,
        } as u64;
        let tail = self.index.frontier().0;
        let chunk = (0..=tail)
            .map_while(|id| fs::metadata(chunk_path(&self.dir, id)).ok().map(|m| m.len()))
            .max()
            .unwrap_or(0);
        Ok(largest.min(limit).min(chunk))
    }

    /// Re-applies a journal a crash left behind (idempotent).
    pub(super) fn recover(&self) -> Result<()> {
        let path = self.dir.join(JOURNAL_FILE);
        // A journal holds its header, at most a row (40 bytes at most) per record, and the bytes
        // of one compaction batch: at most MOVE_BATCH_BYTES and the one record that crossed it,
        // no larger than the largest the index holds (a record may be larger than a chunk's
        // capacity: it then has a chunk to itself).
        let record_max = self.largest_stored()?;
        let cap = self
            .len()
            .saturating_add(1)
            .saturating_mul(40)
            .saturating_add(40)
            .saturating_add(MOVE_BATCH_BYTES as u64)
            .saturating_add(record_max);
        let bytes = read_capped(&path, cap)?
            .ok_or_else(|| Error::io("read", &path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
        let j = Journal::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
            path: path.clone(),
            offset,
            reason,
            source: None,
        })?;
        self.apply(&j)?;
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    fn apply(&self, j: &Journal) -> Result<()> {
        let (Journal::Delete { entries, .. } | Journal::Move { entries, .. }) = j;
        match (self.index.stride(), j) {
            (Some(stride), Journal::Delete { entries, new_length, sums }) => {
                return self.apply_stride_delete(&stride, entries, *new_length, sums);
            }
            (Some(_), Journal::Move { .. }) => {
                // No fixed-stride operation writes one (its records never move but by a delete).
                return Err(Error::Corrupt {
                    path: self.dir.join(JOURNAL_FILE),
                    offset: 0,
                    reason:
                        "a journal of moves in a fixed-stride store, which never writes one: not applied \
                             (remove journal.zr and run `loaderx verify`)"
                            .into(),
                    source: None,
                });
            }
            _ => {}
        }
        self.check_journal(entries)?;
        let set = |entries: &[(u64, Entry)]| -> Result<()> {
            for &(idx, e) in entries {
                self.index.set_entries(idx, &[e])?;
                self.index.flush_entries(idx, 1, &self.index_path)?;
            }
            Ok(())
        };
        match j {
            Journal::Delete { entries, new_length, sums } => {
                if !sums.is_empty() {
                    return Err(Error::Corrupt {
                        path: self.dir.join(JOURNAL_FILE),
                        offset: 0,
                        reason:
                            "a delete journal with block sums in a store of entries, which has no blocks: \
                                 not applied (remove journal.zr and run `loaderx verify`)"
                                .into(),
                        source: None,
                    });
                }
                set(entries)?;
                let new_length = (*new_length).min(self.len());
                self.index.publish(new_length, self.index.frontier(), &self.index_path, true)
            }
            Journal::Move { entries, data } => {
                let mut pos = 0usize;
                let mut touched = BTreeSet::new();
                for (_, e) in entries {
                    let n = e.stored as usize;
                    if n == 0 {
                        // An empty record's entry moves; no chunk is written (or created).
                        continue;
                    }
                    let bytes = data.get(pos..pos + n).ok_or_else(|| Error::Corrupt {
                        path: self.dir.join(JOURNAL_FILE),
                        offset: 0,
                        reason: format!(
                            "the journal's moves need more than its {} bytes of data",
                            data.len()
                        ),
                        source: None,
                    })?;
                    self.chunks.write_all(e.chunk, e.offset, bytes)?;
                    touched.insert(e.chunk);
                    pos += n;
                }
                for id in touched {
                    self.chunks.sync(id)?;
                }
                set(entries)
            }
        }
    }

    /// Refuses, before anything is written or created, a journal whose entries this store could
    /// not hold: an index past the count it was written against, an entry the format cannot
    /// store, bytes past the committed frontier (deletes and compaction only ever point below
    /// it) or past a chunk's capacity. A journal from elsewhere, or a hostile one, is an error on every retry, not
    /// thousands of chunk files.
    pub(super) fn check_journal(&self, entries: &[(u64, Entry)]) -> Result<()> {
        let (len, frontier) = (self.len(), self.index.frontier());
        let path = self.dir.join(JOURNAL_FILE);
        // A v1 store keeps no capacity: this handle's option is not the one it was compacted
        // with, so v1 journals are bounded by the format's largest chunk (and the contiguity
        // rule below).
        let capacity = match self.format() {
            Format::V1 => crate::format::MAX_CHUNK_SIZE,
            Format::V2 => self.chunk_capacity()?,
        };
        for &(idx, e) in entries {
            let bad = if idx >= len {
                Some(format!("the journal rewrites entry {idx} of a store of {len} records"))
            } else {
                self.index
                    .check(&e)
                    .err()
                    .or_else(|| committed(&e, frontier).err())
                    .or_else(|| self.within_chunk(&e, frontier, capacity).err())
                    .map(|r| format!("the journal's entry for record {idx} is not storable here: {r}"))
            };
            if let Some(reason) = bad {
                return Err(Error::Corrupt { path, offset: 0, reason, source: None });
            }
        }
        // The capacity is the header's word, no more trusted than the journal: past a chunk's
        // file, a journal may only extend it contiguously (compaction packs records densely), so
        // a chunk grows by no more than the journal's own bytes, never into a sparse hole.
        let mut past: Vec<&Entry> = entries.iter().map(|(_, e)| e).filter(|e| e.chunk < frontier.0).collect();
        past.sort_unstable_by_key(|e| (e.chunk, e.offset));
        let mut reach: Option<(u32, u64)> = None;
        for e in past {
            let held = match reach {
                Some((c, r)) if c == e.chunk => r,
                _ => fs::metadata(chunk_path(&self.dir, e.chunk)).map_or(0, |m| m.len()),
            };
            if e.offset > held {
                return Err(Error::Corrupt {
                    path,
                    offset: 0,
                    reason: format!(
                        "the journal writes chunk {} from byte {}, past the {held} bytes it holds: it would leave a \
                         hole (a compaction only packs records)",
                        e.chunk, e.offset
                    ),
                    source: None,
                });
            }
            reach = Some((e.chunk, held.max(e.end())));
        }
        Ok(())
    }

    /// Whether an entry of a chunk before the tail ends within what that chunk can hold: its
    /// capacity, or its file's length when longer (a record larger than the capacity has a chunk
    /// to itself). Compaction only packs records into a chunk up to its capacity and a delete
    /// points at records already there; a journal entry past both would grow the chunk into a
    /// sparse file of any size. (The tail chunk is bounded by the frontier: [`committed`].)
    fn within_chunk(
        &self,
        e: &Entry,
        frontier: (u32, u64),
        capacity: u64,
    ) -> std::result::Result<(), String> {
        if e.chunk >= frontier.0 {
            return Ok(());
        }
        let file = chunk_path(&self.dir, e.chunk);
        let held = fs::metadata(&file).map_or(0, |m| m.len());
        // A record larger than the capacity has a chunk to itself: at offset 0, of any length.
        if e.offset != 0 && e.end() > capacity.max(held) {
            return Err(format!(
                "ends at byte {} of chunk {}, past its capacity of {capacity} bytes and the {held} bytes its file holds",
                e.end(),
                e.chunk
            ));
        }
        Ok(())
    }

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
        self.sync()?;
        let _x = self.exclusive("compacting it")?;
        let before = self.stats()?;
        if self.index.stride().is_some() {
            // Dense by construction: every record lies where its index says, with no gap.
            return Ok(CompactReport {
                moved: 0,
                skipped: before.length,
                bytes_before: before.chunk_bytes,
                bytes_after: before.chunk_bytes,
            });
        }
        let mut report = CompactReport { bytes_before: before.chunk_bytes, ..CompactReport::default() };
        let len = self.len();
        let frontier = self.index.frontier();
        let (capacity, limits) = (self.chunk_capacity()?, self.index.limits());
        let live = self.live_in_physical_order(len, frontier)?;
        let mut place = Placement::new(0, 0, capacity, limits);
        let mut batch: Vec<(u64, Entry)> = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        let mut batches = 0usize;
        let mut manifest_dropped = false;
        let mut run = |store: &Store, batch: &mut Vec<(u64, Entry)>, data: &mut Vec<u8>| -> Result<bool> {
            if batches == max_batches {
                return Ok(false);
            }
            if store.format() == Format::V2 && !manifest_dropped {
                // Moves change the chunks' bytes under their checksums: the manifest goes first,
                // and is computed again from the chunks when compaction ends (or by the next
                // writer, after a crash).
                store.drop_manifest()?;
                manifest_dropped = true;
            }
            store
                .run_journal(Journal::Move { entries: std::mem::take(batch), data: std::mem::take(data) })?;
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
                return Err(self.record_error(idx, "truncated chunk"));
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
        report.bytes_after = self.stats()?.chunk_bytes;
        Ok(report)
    }

    /// Every live record `(index, entry)`, each entry checked, in the order compaction visits
    /// them.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] naming a record whose entry is damaged or overlaps another's.
    fn live_in_physical_order(&self, len: u64, frontier: (u32, u64)) -> Result<Vec<(u64, Entry)>> {
        let entries = self.index.entries(0, len)?;
        let mut live: Vec<(u64, Entry)> = (0..len).zip(entries).collect();
        for (idx, e) in &live {
            self.index.check(e).map_err(|r| self.record_error(*idx, format!("bad index entry: {r}")))?;
            committed(e, frontier).map_err(|r| self.record_error(*idx, format!("bad index entry: {r}")))?;
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
        self.index.publish(len, (chunk, off), &self.index_path, true)?;
        self.drop_chunks_past((chunk, off))
    }

    /// Drops the chunk bytes past a frontier just published: the tail chunk truncated there
    /// (created when the frontier rolled into a chunk that held no record), every chunk after it
    /// removed (whatever gaps a removal interrupted earlier left), the directory synced.
    pub(super) fn drop_chunks_past(&self, (chunk, off): (u32, u64)) -> Result<()> {
        self.chunks.reset();
        let tail = chunk_path(&self.dir, chunk);
        let f = super::open_or_create(&tail)?;
        f.set_len(off).map_err(|e| Error::io("truncate", &tail, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tail, e))?;
        super::files::remove_chunks_after(&self.dir, chunk)?;
        sync_dir(&self.dir)
    }

    /// A compaction stopped early ([`Store::compact_limited`]) leaves a consistent store; a v2
    /// one gets its manifest back.
    fn compaction_stopped(&self, report: CompactReport) -> Result<CompactReport> {
        if self.format() == Format::V2 {
            self.rebuild_manifest(Vec::new())?;
        }
        Ok(report)
    }

    /// Removes `manifest.zr` (durably): the next writer computes it again from the chunks.
    pub(super) fn drop_manifest(&self) -> Result<()> {
        let path = self.dir.join(MANIFEST_FILE);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }
}
