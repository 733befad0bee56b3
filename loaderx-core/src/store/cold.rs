//! Cold batches: a batch whose pages are not in the page cache asks for all of them at once
//! (`MADV_WILLNEED` on each index entry's page, then on each record's bytes) before the copy
//! touches the first, so its reads reach the disk together, at the disk's queue depth, instead of
//! one page fault (and the kernel's readahead around it) at a time.
//!
//! Residency is not an error path: a store whose batches are warm pays nothing per record. Each
//! handle keeps a [`Residency`] state:
//! - *unknown* (a fresh handle, or a warm batch that took long): the next batch probes a few of
//!   its records (`mincore` on their entry's page and on their first byte's page);
//! - *warm*: no probe; the batch is timed (two clock reads), and one far slower than a copy of its
//!   bytes makes the state unknown again;
//! - *cold*: every batch advises all its pages first. A batch is probed before it is advised,
//!   and [`WARM_STREAK`] batches in a row found resident make the store warm again; batches the
//!   loader hinted ahead ([`Store::advise`]) are not counted (their pages are resident because
//!   they were hinted).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::Store;
use super::gather::RecordIndex;
use super::index::View;
use super::table::Table;
use crate::Result;
use crate::sys::MappedFile;

/// Records of a batch probed to decide whether it is cold.
const PROBES: usize = 4;
/// Probed batches in a row found resident before a cold store is taken as warm again.
const WARM_STREAK: u8 = 8;
/// A warm batch slower than this, plus [`SLOW_NS_PER_BYTE`] for each byte it reads, probably
/// waited on page faults: the next batch is probed.
const SLOW_BASE: Duration = Duration::from_micros(500);
/// See [`SLOW_BASE`]: four times what decompressing zstd costs per byte here.
const SLOW_NS_PER_BYTE: u64 = 4;

const UNKNOWN: u8 = 0;
const WARM: u8 = 1;
/// `COLD + k`: cold, the last `k` probes found resident.
const COLD: u8 = 2;

/// What a handle knows of its pages' residency (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Residency {
    state: AtomicU8,
    /// Hints ([`Store::advise`]) since the last gather: their batches are not probed.
    hints: AtomicU32,
}

/// How a batch was read: timed (taken as warm) or advised (taken as cold).
#[derive(Debug, Clone, Copy)]
pub(super) enum Heat {
    /// Taken as warm, started at this instant.
    Warm(Instant),
    /// Its pages were asked for first.
    Advised,
    /// Not watched: the handle's [`cold_reads`](crate::StoreOptions::cold_reads) is off.
    Off,
}

impl Residency {
    /// Whether the store is taken as warm (no hint is worth issuing).
    pub(crate) fn is_warm(&self) -> bool {
        self.state.load(Ordering::Relaxed) == WARM
    }

    /// A probe found the batch's sampled pages all resident (`true`) or not.
    fn probed(&self, resident: bool) {
        let s = self.state.load(Ordering::Relaxed);
        let next = match (resident, s) {
            (false, _) => COLD,
            (true, UNKNOWN | WARM) => WARM,
            (true, c) if c - COLD + 1 >= WARM_STREAK => WARM,
            (true, c) => c + 1,
        };
        self.state.store(next, Ordering::Relaxed);
    }

    /// After a batch of `bytes` read as `heat`: a warm batch that took far longer than a copy
    /// makes the state unknown.
    pub(super) fn finish(&self, heat: Heat, bytes: usize) {
        if let Heat::Warm(start) = heat {
            let budget = SLOW_BASE + Duration::from_nanos(SLOW_NS_PER_BYTE.saturating_mul(bytes as u64));
            if start.elapsed() > budget {
                let _ = self.state.compare_exchange(WARM, UNKNOWN, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
    }
}

impl Store {
    /// Whether hints of batches to come may help: cold reads on, the pages not known resident.
    pub(crate) fn wants_hints(&self) -> bool {
        self.opts.cold_reads && !self.residency.is_warm()
    }

    /// Before a batch's reads (the count is `len`, the entries read through `table`): a warm
    /// store's batch is timed; otherwise it is probed and, cold, its pages are asked for.
    pub(super) fn prepare_reads<T: Table, I: RecordIndex>(&self, table: &T, len: u64, indices: &[I]) -> Heat {
        if !self.opts.cold_reads {
            return Heat::Off;
        }
        let r = &self.residency;
        let state = r.state.load(Ordering::Relaxed);
        if state == WARM {
            return Heat::Warm(Instant::now());
        }
        let hinted = r.hints.swap(0, Ordering::Relaxed) > 0;
        // A cold store whose loader hints its steps: not probed (hinted pages would read as
        // resident), but asked for again: a loader's first steps are never hinted, and asking
        // for pages already on their way costs little beside the disk.
        let asked = if state >= COLD && hinted {
            self.will_need(table, len, indices);
            true
        } else {
            self.probe_and_ask(table, len, indices)
        };
        if asked { Heat::Advised } else { Heat::Warm(Instant::now()) }
    }

    /// Asks for the pages of a batch that will be read soon (the loader's steps ahead), unless
    /// the store is warm: the batch is probed and, cold, its pages are asked for. Returns at
    /// once for a warm store; otherwise once the batch's index entries are read (their pages
    /// asked for together first), not waiting for the records.
    ///
    /// # Errors
    /// The index's errors (a v2 index shorter than its count).
    pub(crate) fn advise<I: RecordIndex>(&self, indices: &[I]) -> Result<()> {
        let r = &self.residency;
        if !self.wants_hints() || indices.is_empty() {
            return Ok(());
        }
        let len = self.len();
        match self.index.view(len)? {
            View::V1(m) => self.probe_and_ask(m, len, indices),
            View::V2(v) => self.probe_and_ask(&v, len, indices),
            View::Fixed(f) => self.probe_and_ask(&f, len, indices),
            View::Compact(c) => self.probe_and_ask(&c, len, indices),
        };
        r.hints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Probes a batch (the state follows what it finds) and, unless the store is warm after it,
    /// asks for the batch's pages; whether it asked.
    fn probe_and_ask<T: Table, I: RecordIndex>(&self, table: &T, len: u64, indices: &[I]) -> bool {
        let r = &self.residency;
        r.probed(self.probe(table, len, indices));
        let cold = !r.is_warm();
        if cold {
            self.will_need(table, len, indices);
        }
        cold
    }

    /// Whether the sampled records of a batch (up to [`PROBES`], spread over it) have their
    /// entry's page and their first byte's page resident.
    fn probe<T: Table, I: RecordIndex>(&self, table: &T, len: u64, indices: &[I]) -> bool {
        let step = indices.len().div_ceil(PROBES).max(1);
        indices.iter().step_by(step).filter_map(|i| i.to_u64().filter(|&x| x < len)).all(|i| {
            if !table.resident(i) {
                return false;
            }
            let e = table.get(i);
            if T::check(&e).is_err() || e.stored == 0 {
                return true;
            }
            match self.chunk_view(e.chunk, e.end()) {
                Ok(Some(map)) => usize::try_from(e.offset).map_or(true, |o| map.resident(o)),
                _ => true,
            }
        })
    }

    /// Asks for every page a batch reads: all its index entries' pages first (they arrive
    /// together), then, reading the entries, every record's bytes (a run of records adjacent in
    /// a chunk asked for as one range). Entries that are out of range or fail their checks are
    /// skipped: the read reports them.
    fn will_need<T: Table, I: RecordIndex>(&self, table: &T, len: u64, indices: &[I]) {
        let valid = || indices.iter().filter_map(|i| i.to_u64().filter(|&x| x < len));
        for i in valid() {
            table.will_need(i);
        }
        let mut view: Option<(u32, Arc<MappedFile>)> = None;
        // The range being gathered: chunk, start, end.
        let mut run: Option<(u32, u64, u64)> = None;
        let flush = |run: Option<(u32, u64, u64)>, view: &Option<(u32, Arc<MappedFile>)>| {
            if let (Some((c, start, end)), Some((id, map))) = (run, view)
                && c == *id
                && let (Ok(s), Ok(e)) = (usize::try_from(start), usize::try_from(end))
            {
                map.will_need(s, e - s);
            }
        };
        for i in valid() {
            let e = table.get(i);
            if T::check(&e).is_err() || e.stored == 0 {
                continue;
            }
            if let Some((c, _, end)) = &mut run
                && *c == e.chunk
                && e.offset == *end
            {
                *end = e.end();
                continue;
            }
            flush(run, &view);
            if view.as_ref().is_none_or(|(id, m)| *id != e.chunk || m.len() < e.end()) {
                view = match self.chunk_view(e.chunk, e.end()) {
                    Ok(Some(m)) => Some((e.chunk, m)),
                    _ => None,
                };
            }
            run = Some((e.chunk, e.offset, e.end()));
        }
        flush(run, &view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_move_the_state_between_unknown_warm_and_cold() {
        let r = Residency::default();
        assert!(!r.is_warm(), "a fresh handle is probed");
        r.probed(true);
        assert!(r.is_warm(), "one resident probe of an unknown store: warm");
        r.probed(false);
        assert_eq!(r.state.load(Ordering::Relaxed), COLD);
        for k in 1..WARM_STREAK {
            r.probed(true);
            assert!(!r.is_warm(), "{k} resident probes do not make a cold store warm");
        }
        r.probed(true);
        assert!(r.is_warm(), "{WARM_STREAK} in a row do");
    }

    #[test]
    fn a_slow_warm_batch_makes_the_store_unknown_and_a_fast_one_does_not() {
        let r = Residency::default();
        r.probed(true);
        r.finish(Heat::Warm(Instant::now()), 1 << 20);
        assert!(r.is_warm(), "a batch faster than its budget");
        let long_ago = Instant::now().checked_sub(Duration::from_secs(1)).expect("a second ago");
        r.finish(Heat::Warm(long_ago), 1 << 20);
        assert_eq!(r.state.load(Ordering::Relaxed), UNKNOWN);
        r.finish(Heat::Advised, 0);
        r.finish(Heat::Off, 0);
        assert_eq!(r.state.load(Ordering::Relaxed), UNKNOWN, "only a warm batch's time counts");
    }
}
