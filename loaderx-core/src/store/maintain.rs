//! Rewrites of live data: [`Store::delete`] (swap the tail into each hole) and
//! [`Store::compact`] (repack in physical order, in place), both through the redo journal.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};

use super::Store;
use super::chunk::Placement;
use super::files::{JOURNAL_FILE, chunk_path, sync_dir, write_atomic};
use crate::format::{Journal, RecordLoc};
use crate::{Error, Result};

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
    /// [`Error::ReadOnly`]; [`Error::IndexOutOfRange`] (nothing deleted); [`Error::Locked`] when
    /// other handles have the store open.
    pub fn delete(&mut self, indices: &[u32]) -> Result<()> {
        self.writer()?;
        let len = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
            return Err(self.index_error(bad, len));
        }
        let mut order = indices.to_vec();
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        if order.is_empty() {
            return Ok(());
        }
        let _x = self.exclusive()?;
        let mut changed: BTreeMap<u32, RecordLoc> = BTreeMap::new();
        let mut n = len;
        for idx in order {
            let last = n - 1;
            if idx != last {
                let moved = changed.get(&last).copied().unwrap_or_else(|| self.meta.entry(last));
                changed.insert(idx, moved);
            }
            n -= 1;
        }
        let entries: Vec<(u32, RecordLoc)> = changed.into_iter().filter(|(i, _)| *i < n).collect();
        self.run_journal(Journal::Delete { entries, new_length: n })
    }

    /// Writes `j` durably, applies it, removes it.
    fn run_journal(&self, j: Journal) -> Result<()> {
        write_atomic(&self.dir, JOURNAL_FILE, &j.encode())?;
        self.apply(&j)?;
        let path = self.dir.join(JOURNAL_FILE);
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    /// Re-applies a journal a crash left behind (idempotent).
    pub(super) fn recover(&self) -> Result<()> {
        let path = self.dir.join(JOURNAL_FILE);
        let bytes = fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
        let j = Journal::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
            path: path.clone(),
            offset,
            reason,
        })?;
        self.apply(&j)?;
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    fn apply(&self, j: &Journal) -> Result<()> {
        match j {
            Journal::Delete { entries, new_length } => {
                for &(idx, loc) in entries {
                    self.meta.set_entry(idx, loc);
                    self.meta.flush_entries(idx, idx + 1, &self.meta_path)?;
                }
                let mut h = self.meta.header();
                h.length = *new_length;
                self.meta.set_header(h);
                self.meta.flush_header(&self.meta_path)
            }
            Journal::Move { entries, data } => {
                let mut pos = 0usize;
                let mut touched = BTreeSet::new();
                for (_, loc) in entries {
                    let n = loc.phys_length as usize;
                    self.chunks.write_all(loc.chunk_id, u64::from(loc.offset), &data[pos..pos + n])?;
                    touched.insert(loc.chunk_id);
                    pos += n;
                }
                for id in touched {
                    self.chunks.sync(id)?;
                }
                for &(idx, loc) in entries {
                    self.meta.set_entry(idx, loc);
                    self.meta.flush_entries(idx, idx + 1, &self.meta_path)?;
                }
                Ok(())
            }
        }
    }

    /// Rewrites the live records densely, in place, in physical order, and drops the chunk files
    /// past the new end.
    ///
    /// A record never moves to a higher address, and each batch of moves goes through the
    /// journal (so a move overlapping the record's own old bytes cannot tear it). An interrupted
    /// compaction leaves a consistent store; running it again finishes the job. Records already
    /// in place are skipped.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Locked`] when other handles have the store open;
    /// [`Error::CorruptRecord`] for a record whose bytes cannot be read.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_limited(usize::MAX)
    }

    /// [`Store::compact`] that stops after `max_batches` journal batches (tests of interrupted
    /// compaction).
    #[doc(hidden)]
    pub fn compact_limited(&mut self, max_batches: usize) -> Result<CompactReport> {
        self.writer()?;
        let _x = self.exclusive()?;
        let before = self.stats()?;
        let mut report = CompactReport { bytes_before: before.chunk_bytes, ..CompactReport::default() };
        let len = self.len();
        let mut live: Vec<(u32, RecordLoc)> = (0..len).map(|i| (i, self.meta.entry(i))).collect();
        live.sort_unstable_by_key(|(_, l)| (l.chunk_id, l.offset));
        let mut place = Placement::new(0, 0, self.opts.chunk_capacity);
        let mut batch: Vec<(u32, RecordLoc)> = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        let mut batches = 0usize;
        for &(idx, loc) in &live {
            loc.validate_limits().map_err(|r| self.record_error(idx, format!("bad table entry: {r}")))?;
            let len = u64::from(loc.phys_length);
            // Records are visited in physical order and repacked from the start. A record must
            // never move up (it would land on bytes not yet moved): with the capacity the store
            // was written with that cannot happen; with a smaller one (this handle's option) a
            // record that would move up stays, and packing goes on after it.
            let here = (loc.chunk_id, loc.offset);
            let (chunk, off) = match place.place(len) {
                Some(to) if to <= here => to,
                _ => {
                    place =
                        Placement::new(loc.chunk_id, u64::from(loc.offset) + len, self.opts.chunk_capacity);
                    here
                }
            };
            if (chunk, off) == here {
                report.skipped += 1;
            } else {
                let start = data.len();
                data.resize(start + len as usize, 0);
                let f = self.chunks.get(loc.chunk_id)?;
                if !self.chunks.read_exact(&f, loc.chunk_id, u64::from(loc.offset), &mut data[start..])? {
                    return Err(self.record_error(idx, "truncated chunk"));
                }
                batch.push((idx, RecordLoc { offset: off, chunk_id: chunk, ..loc }));
                report.moved += 1;
                if data.len() >= 32 << 20 {
                    if batches == max_batches {
                        return Ok(report);
                    }
                    self.run_journal(Journal::Move {
                        entries: std::mem::take(&mut batch),
                        data: std::mem::take(&mut data),
                    })?;
                    batches += 1;
                }
            }
        }
        if !batch.is_empty() {
            if batches == max_batches {
                return Ok(report);
            }
            self.run_journal(Journal::Move { entries: batch, data })?;
        }
        // The packed frontier is never past the old one, so it can always be stored.
        let (chunk, off) = place.frontier().ok_or_else(|| Error::StoreFull {
            path: self.dir.clone(),
            len: u64::from(len),
            adding: 0,
            limit: u64::from(len),
        })?;
        let mut h = self.meta.header();
        let old_tail = h.tail_chunk;
        h.tail_chunk = chunk;
        h.tail_offset = off;
        self.meta.set_header(h);
        self.meta.flush_header(&self.meta_path)?;
        self.chunks.reset();
        let tail = chunk_path(&self.dir, chunk);
        // The packed frontier may have rolled into a chunk that held no record.
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tail)
            .map_err(|e| Error::io("open", &tail, e))?;
        f.set_len(u64::from(off)).map_err(|e| Error::io("truncate", &tail, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tail, e))?;
        for id in chunk + 1..=old_tail {
            let p = chunk_path(&self.dir, id);
            fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
        sync_dir(&self.dir)?;
        report.bytes_after = self.stats()?.chunk_bytes;
        Ok(report)
    }
}
