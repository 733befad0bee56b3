//! Records whose bytes overlap another's: no layout writes two records over the same bytes
//! (compaction refuses a store that has them), so an index claiming it is damaged, though each
//! entry and each record's checksum may be right (an entry copied over another's, look 68,
//! L68-1). [`Store::verify_overlaps`] finds them for `verify`, and so for the damage check of
//! every migration, in memory bounded by [`OVERLAP_PASS_RECORDS`] or a fixed fraction of the
//! index, whatever the store's size.

use std::collections::BTreeMap;

use super::Store;
use super::table::committed;
use crate::format::v2::Entry;
use crate::sys::tuning::{OVERLAP_PASS_RECORDS, OVERLAP_PASSES};
use crate::{Error, Result};

/// Entries read at a time.
const BLOCK: u64 = 1 << 16;

/// Stretches a chunk of more records than a pass takes is counted in, to cut it into windows of
/// about a pass each (32 KiB of counts a chunk).
const HISTOGRAM: usize = 4096;

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

/// The records of one chunk starting at offsets `lo..hi`: what a pass sorts, a chunk whole or,
/// one of more records than a pass takes, a stretch of it.
#[derive(Debug, Clone, Copy)]
struct Window {
    chunk: u32,
    lo: u64,
    hi: u64,
}

impl Store {
    /// Hands `f` each record whose bytes overlap another's in its chunk, naming the other: both
    /// records of a pair, since the index alone cannot say which one reads the other's bytes
    /// (look 70, L70-1). Empty records take no bytes and are never compared; a record the record
    /// scan found `damaged` (its entry or its bytes) is reported there and left out here. A
    /// fixed-stride store places records by their index and has none.
    ///
    /// The records are sorted by place a window at a time: whole chunks, or stretches of a chunk
    /// holding more than a pass takes (cut where a count of its records by place says), each
    /// pass at most [`OVERLAP_PASS_RECORDS`] records or a [`OVERLAP_PASSES`]th of the store, so
    /// that the index is read a bounded number of times (passes packed greedily: at most about
    /// twice that many); the record reaching furthest is carried from one window of a chunk to
    /// the next. The index is read once to count, once more to count a large chunk's records by
    /// place, and once per pass.
    ///
    /// # Errors
    /// Only for failures that stop the scan (the index unreadable).
    pub(super) fn verify_overlaps(&self, damaged: &Damaged, f: &mut impl FnMut(u64, Error)) -> Result<()> {
        let budget = OVERLAP_PASS_RECORDS.max(self.len().div_ceil(OVERLAP_PASSES));
        self.overlaps_in_passes(budget, damaged, f)
    }

    /// [`Store::verify_overlaps`], about `budget` records sorted at a time.
    fn overlaps_in_passes(
        &self,
        budget: u64,
        damaged: &Damaged,
        f: &mut impl FnMut(u64, Error),
    ) -> Result<()> {
        if self.index.stride().is_some() {
            return Ok(());
        }
        // Each chunk's records, the first offset and one past the last.
        let mut per_chunk: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
        self.each_extent(damaged, |e| {
            let c = per_chunk.entry(e.chunk).or_insert((0, u64::MAX, 0));
            *c = (c.0 + 1, c.1.min(e.offset), c.2.max(e.offset.saturating_add(1)));
        })?;
        let budget = budget.max(1);
        // A chunk of more records than a pass takes: its records counted by place, in
        // HISTOGRAM stretches of equal width (look 72, L72-1: windows of equal width assumed
        // records spread evenly, and a chunk of millions of small records beside one large one
        // was sorted nearly whole).
        let stretch = |off: u64, lo: u64, hi: u64| {
            ((u128::from(off - lo) * HISTOGRAM as u128) / u128::from(hi - lo)) as usize
        };
        let mut histograms: BTreeMap<u32, Vec<u64>> = per_chunk
            .iter()
            .filter(|(_, c)| c.0 > budget)
            .map(|(&chunk, _)| (chunk, vec![0; HISTOGRAM]))
            .collect();
        if !histograms.is_empty() {
            self.each_extent(damaged, |e| {
                if let Some(h) = histograms.get_mut(&e.chunk) {
                    let (_, lo, hi) = per_chunk[&e.chunk];
                    // Records a writer appended since the count lie past `hi`: not checked here.
                    if (lo..hi).contains(&e.offset) {
                        h[stretch(e.offset, lo, hi)] += 1;
                    }
                }
            })?;
        }
        // Windows of at most `budget` records where the stretches allow (one stretch of more is a
        // window of its own), packed into passes of at most `budget` records.
        let mut passes: Vec<(Vec<Window>, u64)> = Vec::new();
        let mut add = |w: Window, n: u64| match passes.last_mut() {
            Some((ws, total)) if *total + n <= budget => {
                ws.push(w);
                *total += n;
            }
            _ => passes.push((vec![w], n)),
        };
        for (&chunk, &(n, lo, hi)) in &per_chunk {
            let Some(h) = histograms.get(&chunk) else {
                add(Window { chunk, lo, hi }, n);
                continue;
            };
            // Where stretch `k` starts: the least offset `stretch` puts in it.
            let start = |k: usize| lo + (u128::from(hi - lo) * k as u128).div_ceil(HISTOGRAM as u128) as u64;
            let (mut from, mut count) = (0usize, 0u64);
            for (k, &c) in h.iter().enumerate() {
                if count > 0 && count + c > budget {
                    add(Window { chunk, lo: start(from), hi: start(k) }, count);
                    (from, count) = (k, 0);
                }
                count += c;
            }
            add(Window { chunk, lo: start(from), hi }, count);
        }
        let mut named = Damaged::default();
        let mut name = |e: &Extent, other: u64| {
            if !named.contains(e.index) {
                named.insert(e.index, self.len());
                let reason = format!(
                    "bad index entry: its bytes {}..{} of chunk {} overlap record {other}'s",
                    e.offset,
                    e.end(),
                    e.chunk
                );
                f(e.index, self.record_error(e.index, reason));
            }
        };
        // The record reaching furthest so far in its chunk (carried from one stretch to the
        // next): an overlap with any earlier record is one with it.
        let mut reach: Option<Extent> = None;
        for (windows, total) in passes {
            let mut extents = Vec::with_capacity(total.min(budget) as usize);
            self.each_extent(damaged, |e| {
                let k = windows.partition_point(|w| (w.chunk, w.lo) <= (e.chunk, e.offset));
                if k > 0 && windows[k - 1].chunk == e.chunk && e.offset < windows[k - 1].hi {
                    extents.push(e);
                }
            })?;
            extents.sort_unstable();
            for e in extents {
                match reach {
                    Some(r) if r.chunk == e.chunk && r.end() > e.offset => {
                        name(&e, r.index);
                        name(&r, e.index);
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

    /// Overlaps within a chunk, between records far apart in the index and across the stretches
    /// of a chunk cut into several are found alike whether everything is sorted at once or one
    /// record's worth at a time, both records of each pair named; records that only meet (one
    /// ends where the next starts) and empty records are not overlaps.
    #[test]
    fn overlaps_are_found_in_one_pass_or_many() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let opts = StoreOptions::new().compact_entries(true).chunk_capacity(64);
        let store = Store::create(&path, opts).unwrap();
        let records: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i; if i == 3 { 0 } else { 20 }]).collect();
        store.append(&records, Codec::Raw).unwrap();
        drop(store);
        // Entry 9 copied over entry 10 (a record of another chunk); entry 1 over entry 2 (one
        // chunk); entry 4 (at the start of its chunk) made 45 bytes long, over 5 and into 6.
        let index = path.join("index.zr");
        let mut bytes = std::fs::read(&index).unwrap();
        let entry = |i: usize| 64 + 16 * i;
        bytes.copy_within(entry(9)..entry(10), entry(10));
        bytes.copy_within(entry(1)..entry(2), entry(2));
        bytes[entry(4) + 8..entry(4) + 12].copy_from_slice(&45u32.to_le_bytes());
        std::fs::write(&index, bytes).unwrap();
        let store = Store::open(&path).unwrap();
        for budget in [1, 2, 3, 1 << 20] {
            let mut found = Vec::new();
            let none = Damaged::default();
            store.overlaps_in_passes(budget, &none, &mut |i, e| found.push((i, e.to_string()))).unwrap();
            found.sort();
            let named: Vec<u64> = found.iter().map(|(i, _)| *i).collect();
            assert_eq!(named, [1, 2, 4, 5, 6, 9, 10], "budget {budget}: {found:?}");
            assert!(found[0].1.contains("overlap record 2's") && found[1].1.contains("overlap record 1's"));
        }
        // A record the record scan found damaged is reported there, not here.
        let mut damaged = Damaged::default();
        damaged.insert(4, store.len());
        let mut found = Vec::new();
        store.overlaps_in_passes(1 << 20, &damaged, &mut |i, _| found.push(i)).unwrap();
        found.sort();
        assert_eq!(found, [1, 2, 9, 10]);
    }

    /// Records a writer appends while the check runs lie past the chunk's counted places: left
    /// out, never counted into a stretch past the histogram (an index out of bounds before),
    /// nothing reported. The writer appends a bounded number of batches; the check runs until
    /// it is done.
    #[test]
    fn records_appended_during_the_check_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let writer = Store::create(&path, StoreOptions::new().compact_entries(true)).unwrap();
        writer.append(&vec![vec![1u8; 3]; 64], Codec::Raw).unwrap();
        let reader = Store::open(&path).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..2000 {
                    writer.append(&vec![vec![2u8; 3]; 4], Codec::Raw).unwrap();
                }
                done.store(true, std::sync::atomic::Ordering::Release);
            });
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let mut found = Vec::new();
                reader.overlaps_in_passes(4, &Damaged::default(), &mut |i, _| found.push(i)).unwrap();
                assert!(found.is_empty(), "{found:?}");
            }
        });
    }
}
