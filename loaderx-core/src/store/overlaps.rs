//! Records whose bytes overlap another's: no layout writes two records over the same bytes
//! (compaction refuses a store that has them), so an index claiming it is damaged, though each
//! entry and each record's checksum may be right (an entry copied over another's, look 68,
//! L68-1). [`Store::verify_overlaps`] finds them for `verify`, and so for the damage check of
//! every migration, in memory bounded by [`OVERLAP_PASS_RECORDS`] whatever the store's size.

use std::collections::BTreeMap;

use super::Store;
use super::table::committed;
use crate::format::v2::Entry;
use crate::sys::tuning::OVERLAP_PASS_RECORDS;
use crate::{Error, Result};

/// Entries read at a time.
const BLOCK: u64 = 1 << 16;

/// Where a record's bytes are: what the check sorts (24 bytes a record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Extent {
    chunk: u32,
    offset: u64,
    stored: u32,
    index: u64,
}

impl Extent {
    fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.stored))
    }
}

/// The records the record scan found damaged, one bit each (allocated at the first): an entry
/// whose offset or length was damaged points over its neighbours' bytes, and its own checksum
/// reports it; the neighbours are not named for it.
#[derive(Debug, Default)]
pub(super) struct Damaged {
    bits: Vec<u64>,
}

impl Damaged {
    /// Marks record `index` of a store of `len` records.
    pub(super) fn insert(&mut self, index: u64, len: u64) {
        if self.bits.is_empty() {
            self.bits = vec![0; len.div_ceil(64) as usize];
        }
        if let Some(word) = self.bits.get_mut((index / 64) as usize) {
            *word |= 1 << (index % 64);
        }
    }

    fn contains(&self, index: u64) -> bool {
        self.bits.get((index / 64) as usize).is_some_and(|w| w & (1 << (index % 64)) != 0)
    }
}

impl Store {
    /// Hands `f` each record whose bytes overlap those of a record before it in its chunk (in
    /// the order of their place in the chunk), naming that record. Empty records take no bytes
    /// and are never compared; a record the record scan found `damaged` (its entry or its bytes)
    /// is reported there and left out here. A fixed-stride store places records by their index
    /// and has none.
    ///
    /// The chunks are taken a group at a time, each group's records no more than
    /// [`OVERLAP_PASS_RECORDS`] (a chunk with more is a group of its own: its records are at
    /// most its bytes), the index read once to count and once per group.
    ///
    /// # Errors
    /// Only for failures that stop the scan (the index unreadable).
    pub(super) fn verify_overlaps(&self, damaged: &Damaged, f: &mut impl FnMut(u64, Error)) -> Result<()> {
        self.overlaps_in_passes(OVERLAP_PASS_RECORDS, damaged, f)
    }

    /// [`Store::verify_overlaps`], `budget` records sorted at a time.
    fn overlaps_in_passes(
        &self,
        budget: u64,
        damaged: &Damaged,
        f: &mut impl FnMut(u64, Error),
    ) -> Result<()> {
        if self.index.stride().is_some() {
            return Ok(());
        }
        let mut per_chunk: BTreeMap<u32, u64> = BTreeMap::new();
        self.each_extent(damaged, |e| *per_chunk.entry(e.chunk).or_default() += 1)?;
        let mut groups: Vec<(u32, u32, u64)> = Vec::new();
        for (&chunk, &n) in &per_chunk {
            match groups.last_mut() {
                Some((_, last, total)) if *total + n <= budget => (*last, *total) = (chunk, *total + n),
                _ => groups.push((chunk, chunk, n)),
            }
        }
        for (first, last, total) in groups {
            let mut extents = Vec::with_capacity(total as usize);
            self.each_extent(damaged, |e| {
                if (first..=last).contains(&e.chunk) {
                    extents.push(e);
                }
            })?;
            extents.sort_unstable();
            // The record reaching furthest so far in the chunk: an overlap with any earlier
            // record is one with it.
            let mut reach: Option<Extent> = None;
            for e in extents {
                match reach {
                    Some(r) if r.chunk == e.chunk && r.end() > e.offset => {
                        f(
                            e.index,
                            self.record_error(
                                e.index,
                                format!(
                                    "bad index entry: its bytes {}..{} of chunk {} overlap record {}'s",
                                    e.offset,
                                    e.end(),
                                    e.chunk,
                                    r.index
                                ),
                            ),
                        );
                        if e.end() > r.end() {
                            reach = Some(e);
                        }
                    }
                    _ => reach = Some(e),
                }
            }
        }
        Ok(())
    }

    /// Each committed record that takes bytes, its entry sound in itself and the record not
    /// among the `damaged`, in index order.
    fn each_extent(&self, damaged: &Damaged, mut f: impl FnMut(Extent)) -> Result<()> {
        let (len, frontier) = (self.len(), self.index.frontier());
        let mut first = 0u64;
        while first < len {
            let end = (first + BLOCK).min(len);
            for (index, e) in (first..end).zip(self.index.entries_checked(first, end)?) {
                let Ok(e): std::result::Result<Entry, _> = e else { continue };
                if e.stored != 0
                    && !damaged.contains(index)
                    && self.index.check(&e).is_ok()
                    && committed(&e, frontier).is_ok()
                {
                    f(Extent { chunk: e.chunk, offset: e.offset, stored: e.stored, index });
                }
            }
            first = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Damaged;
    use crate::{Codec, Store, StoreOptions};

    /// Overlaps within a chunk and across records far apart in the index are found alike
    /// whether the chunks are sorted all at once or one pass per chunk; records that only meet
    /// (one ends where the next starts) and empty records are not overlaps.
    #[test]
    fn overlaps_are_found_in_one_pass_or_many() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let opts = StoreOptions::new().compact_entries(true).chunk_capacity(64);
        let store = Store::create(&path, opts).unwrap();
        let records: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i; if i == 3 { 0 } else { 20 }]).collect();
        store.append(&records, Codec::Raw).unwrap();
        drop(store);
        // Entry 9 copied over entry 10 (a record of another chunk); entry 1 over entry 2 (one chunk).
        let index = path.join("index.zr");
        let mut bytes = std::fs::read(&index).unwrap();
        let entry = |i: usize| 64 + 16 * i;
        bytes.copy_within(entry(9)..entry(10), entry(10));
        bytes.copy_within(entry(1)..entry(2), entry(2));
        std::fs::write(&index, bytes).unwrap();
        let store = Store::open(&path).unwrap();
        for budget in [1, 3, 1 << 20] {
            let mut found = Vec::new();
            let none = Damaged::default();
            store.overlaps_in_passes(budget, &none, &mut |i, e| found.push((i, e.to_string()))).unwrap();
            found.sort();
            assert_eq!(
                found.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                [2, 10],
                "budget {budget}: {found:?}"
            );
            assert!(found[0].1.contains("overlap record 1's") && found[1].1.contains("overlap record 9's"));
        }
        // A record the record scan found damaged is reported there, not here.
        let mut damaged = Damaged::default();
        damaged.insert(2, store.len());
        let mut found = Vec::new();
        store.overlaps_in_passes(1 << 20, &damaged, &mut |i, _| found.push(i)).unwrap();
        assert_eq!(found, [10]);
    }
}
