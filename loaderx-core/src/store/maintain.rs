//! Rewrites of live data through the redo journal: [`Store::delete`] (swap the tail into each
//! hole) here, [`Store::compact`] in `compact.rs`; the journal's replay by the next writer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::Store;
use super::compact::MOVE_BATCH_BYTES;
use super::files::{JOURNAL_FILE, MANIFEST_FILE, read_capped, write_atomic_bytes_in, write_atomic_in_then};
use super::gather::RecordIndex;
use super::table::committed;
use crate::format::v2::Entry;
use crate::format::{Format, Journal};
use crate::{Error, Result};

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
        self.sync_before()?;
        // The count this writer published: a header changed from outside (an older one put back
        // with the same frontier) must not choose which records are dropped.
        let (len, _) = self.committed_for_writing()?;
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
        self.frontier_for_writing()?;
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
        // Each moved entry with its own checksum: a damaged one written into a hole would be
        // encoded with a fresh checksum over its damaged fields, its damage then blamed on the
        // chunk or not seen at all (review 55). Refused with nothing changed.
        let entries: Vec<(u64, Entry)> = moves
            .iter()
            .map(|&(i, from)| {
                let e = self.index.entry_checked(from)?;
                let e = e.map_err(|r| {
                    self.record_error(from, format!("bad index entry: {r}; not moved by the delete"))
                })?;
                Ok((i, e))
            })
            .collect::<Result<_>>()?;
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
            // Records move: the chunks' checksums change under the manifest, which goes once the
            // journal is written and before it lands, and is computed again (by the next writer,
            // after a crash).
            let journal = Journal::Delete { entries, new_length: n, sums };
            self.run_journal_dropping_manifest(journal, &deleted(len - n), true)?;
            // Derived: when this write fails the file stays removed, and the next writer computes
            // it. The delete stands, so the call does not fail.
            let _ = self.rebuild_manifest(Vec::new());
            return Ok(());
        }
        // The chunks are unchanged; the manifest's count follows the index's before the journal
        // goes ([`Store::manifest_follows_delete`]).
        self.run_journal(Journal::Delete { entries, new_length: n, sums: Vec::new() }, &deleted(len - n))
    }

    /// The manifest's count made a delete's `n` (its chunks are unchanged by a delete of the
    /// entry layouts), as the delete's journal is applied and before it goes: a manifest counting
    /// more records than the index, with no journal, then comes from no crash, and a writer
    /// refuses it as a damaged count (look 174, L174-3: written after the journal went, a crash
    /// between left a good store that `verify` called damaged, and writers took a lowered count
    /// for that crash's and trimmed the records past it). The writer's manifest when it holds
    /// one; else (a journal replayed at open) the file's, when it decodes and counts more.
    fn manifest_follows_delete(&self, n: u64) -> Result<()> {
        if self.format() != Format::V2 {
            return Ok(());
        }
        let held = self.writer.as_ref().and_then(|w| {
            let mut m = w.append.lock().unwrap_or_else(|e| e.into_inner());
            m.as_mut().map(|m| {
                m.count = n;
                m.encode()
            })
        });
        let bytes = match held {
            Some(bytes) => bytes,
            None => {
                let read = super::files::read_manifest(self.chunks.dir(), self.known_chunks())?;
                match read.and_then(|b| crate::format::v2::Manifest::decode(&b).ok()) {
                    Some(mut m) if m.count > n => {
                        m.count = n;
                        m.encode()
                    }
                    _ => return Ok(()),
                }
            }
        };
        // One that cannot be written goes: a missing manifest is computed by the next writer,
        // never taken for a damaged count (the delete stands, and its call does not fail).
        write_atomic_bytes_in(self.chunks.dir(), MANIFEST_FILE, &bytes)
            .or_else(|e| self.drop_manifest().map_err(|_| e))
    }

    /// Writes `j` durably, applies it, removes it. Its entries are checked first, as applying it
    /// checks them: a journal its own replay would refuse is never written.
    ///
    /// Once `journal.zr` is in the directory the operation (`what`) is committed: the next
    /// read-write open completes it. A failure from there on is [`Error::Committed`], and this
    /// handle writes no more: its view may be half applied, and a journal left behind, replayed
    /// after later appends, would cut them off.
    pub(super) fn run_journal(&self, j: Journal, what: &str) -> Result<()> {
        self.run_journal_dropping_manifest(j, what, false)
    }

    /// [`Store::run_journal`], `manifest.zr` removed first when `drop_manifest` (the journal's
    /// moves change the chunks' bytes under its checksums): once the journal is written and
    /// synced, before it lands. A journal that cannot be written (a full disk) leaves the
    /// manifest; one that fails to land after the manifest went has it written again (look 111,
    /// L111-2: a compaction failing on a full disk left `verify` reporting the store damaged).
    pub(super) fn run_journal_dropping_manifest(
        &self,
        j: Journal,
        what: &str,
        drop_manifest: bool,
    ) -> Result<()> {
        let (Journal::Delete { entries, .. } | Journal::Move { entries, .. }) = &j;
        self.check_journal(entries)?;
        let path = self.dir.join(JOURNAL_FILE);
        // The writer's open replays and removes a journal, so whatever is at its name now is not
        // one of ours: refused, nothing done. Then a file there after a failure is this journal,
        // renamed into place.
        if fs::symlink_metadata(&path).is_ok() {
            return Err(Error::Corrupt {
                path,
                offset: 0,
                reason: format!(
                    "something is at the journal's name, which no writer leaves: {what} not started"
                ),
                source: None,
            });
        }
        let bytes = j.encode(self.format());
        let mut dropped = false;
        let written = write_atomic_in_then(
            self.chunks.dir(),
            JOURNAL_FILE,
            |file, tmp| crate::sys::write_all_at(file, &bytes, 0).map_err(|e| Error::io("write", tmp, e)),
            || {
                if drop_manifest {
                    // Before the call: its directory sync can fail after the removal.
                    dropped = true;
                    self.drop_manifest()?;
                }
                Ok(())
            },
        )
        .map_err(|(e, _)| e);
        if let Err(e) = written {
            if self.chunks.dir().stat(JOURNAL_FILE).is_ok_and(|m| m.file) {
                return Err(self.halt(what, JOURNAL_REMEDY, e));
            }
            // Failed before its rename landed (the temporary is removed): nothing happened, and
            // a manifest removed for it describes the chunks still (best effort: the next
            // writer computes a missing one).
            if dropped {
                let _ = self.rebuild_manifest(Vec::new());
            }
            return Err(e);
        }
        let finished = self.apply(&j).and_then(|()| {
            self.chunks.dir().remove(JOURNAL_FILE).map_err(|e| Error::io("remove", &path, e))?;
            self.sync_held_dir()
        });
        finished.map_err(|e| self.halt(what, JOURNAL_REMEDY, e))
    }

    /// Stops this handle's reads and writes after `what` committed and then failed with
    /// `cause`, its view of the files possibly stale; `remedy` says what opening the store
    /// again does.
    pub(super) fn halt(&self, what: &str, remedy: &'static str, cause: Error) -> Error {
        self.halt_handle(format!("{what} failed after its commit"));
        Error::Committed { path: self.dir.clone(), what: what.to_owned(), remedy, source: Box::new(cause) }
    }

    /// Stops this handle's reads and writes, for `why`.
    pub(super) fn halt_handle(&self, why: String) {
        if let Some(w) = &self.writer {
            let _ = w.halted.set(why);
        }
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
        let chunk = (0..=tail).map_while(|id| self.chunks.file_len(id).ok().flatten()).max().unwrap_or(0);
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
        self.sync_held_dir()
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
        // Every entry set, then the span they lie in flushed once: the journal is durable and
        // its replay sets the same entries, so they need to be durable only before it goes.
        // Flushed one at a time, a compaction of 100,000 records made 100,000 synchronous msyncs
        // (look 126, L126-1: 33 s for 6.4 MB).
        let set = |entries: &[(u64, Entry)]| -> Result<()> {
            for &(idx, e) in entries {
                self.index.set_entries(idx, &[e])?;
            }
            let first = entries.iter().map(|&(idx, _)| idx).min();
            let last = entries.iter().map(|&(idx, _)| idx).max();
            if let (Some(first), Some(last)) = (first, last) {
                self.index.flush_entries(first, last - first + 1, &self.index_path)?;
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
                // A delete keeps the frontier: the one checked, not whatever the header says now.
                let frontier = self.frontier_for_writing()?;
                self.publish(new_length, frontier, true)?;
                self.manifest_follows_delete(new_length)
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
                _ => self.chunks.file_len(e.chunk).ok().flatten().unwrap_or(0),
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
        let held = self.chunks.file_len(e.chunk).ok().flatten().unwrap_or(0);
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

    /// Removes `manifest.zr` (durably): the next writer computes it again from the chunks.
    pub(super) fn drop_manifest(&self) -> Result<()> {
        // This handle's copy goes first: its checksums stop describing the chunks below.
        *self.writer()?.append.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Removed from the directory this handle holds (never from another store's at its name).
        let path = self.dir.join(MANIFEST_FILE);
        match self.chunks.dir().remove(MANIFEST_FILE) {
            Ok(()) => self.sync_held_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }
}

/// What to do after a journal failed once it was in the directory.
const JOURNAL_REMEDY: &str = "open the store again (read-write): its journal.zr completes it";

/// What a delete of `n` records is called in an [`Error::Committed`].
fn deleted(n: u64) -> String {
    format!("the delete of {n} record{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, StoreOptions};

    /// A journal that fails once it is in the directory stands (the next writer completes or
    /// refuses it): the call says so, and the handle writes no more, since a journal left behind
    /// and replayed after later appends would cut them off.
    #[test]
    fn a_failure_after_the_journal_is_written_halts_the_handle() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s"), StoreOptions::new()).unwrap();
        store.append(&[[1u8; 8], [2u8; 8]], Codec::Raw).unwrap();
        // A move whose data is missing passes the entry checks and fails in its apply.
        let moved = store.index.entry(1).unwrap();
        let e =
            store.run_journal(Journal::Move { entries: vec![(1, moved)], data: Vec::new() }, "a test's move");
        let e = e.unwrap_err();
        assert!(
            matches!(&e, Error::Committed { what, source, .. }
                if what == "a test's move" && matches!(**source, Error::Corrupt { .. })),
            "{e}"
        );
        assert!(e.to_string().contains("do not repeat it"), "{e}");
        let e = store.append(&[[3u8; 8]], Codec::Raw).unwrap_err();
        assert!(matches!(&e, Error::Locked { reason, .. } if reason.contains("a test's move failed")), "{e}");
        assert_eq!(store.len(), 2);
        // `sync` still makes what was committed before durable: here, nothing is left to.
        store.sync().unwrap();
    }
}
