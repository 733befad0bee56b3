//! [`IndexMap`]: a v2 `index.zr`, memory-mapped: its header and an array that grows with the
//! store, read in place: an entry per record (32 bytes, or 16 in the compact layout), or (the
//! fixed-stride layout) a crc32c per block of records, elements of the size the header names.
//!
//! The file only grows while other handles may have it mapped (the writer extends it before it
//! writes entries past its end), so a mapping made at some length stays backed by the file for
//! its whole life. It shrinks only under compaction, which holds the store alone: no other
//! handle has it open, this handle's own mapping is made again at once, and a forked child maps
//! the file anew for each view ([`MadeIn`]), sized by the file as it is then. A reader maps what the file holds when it needs more entries than its
//! mapping covers; entries below the published count never change while readers exist (delete
//! and compaction take the store exclusively), so reading them races no write.
#![expect(unsafe_code, reason = "the v2 index is read and written in place through a shared mapping")]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use memmap2::{MmapOptions, MmapRaw};

use super::MadeIn;
use crate::format::v2::{COMPACT_ENTRY_SIZE, COUNT_OFFSET, ENTRY_SIZE, HEADER_SIZE};

/// The size of a block checksum, the fixed-stride layout's element.
const BLOCK_CRC_SIZE: usize = 4;
use crate::{Error, Result};

/// Entries the writer adds to the file at least when it grows it: growth in steps, not per
/// append.
const GROW_ENTRIES: u64 = 1 << 15;

/// A mapping of `index.zr` and how many entries it covers.
struct Mapping {
    raw: MmapRaw,
    /// Whole elements the mapping covers after the header.
    entries: u64,
    /// Bytes per element.
    elem: usize,
}

/// The mapped `index.zr` of a v2 store.
pub(crate) struct IndexMap {
    file: File,
    path: PathBuf,
    writable: bool,
    elem: usize,
    map: RwLock<Arc<Mapping>>,
    /// The mapping made at open, never replaced: the header (and the count in it) is the same
    /// bytes in every mapping of the file, so it is read here without the lock.
    first: Arc<Mapping>,
    /// Where `map`'s lock was made: a fork whose parent held it maps the file for the one call
    /// ([`MadeIn`]).
    made_in: MadeIn,
}

/// A snapshot of the index covering at least the entries it was asked for: what a batched read
/// holds while it reads entries (one lock per batch, none per entry).
pub(crate) struct IndexView {
    map: Arc<Mapping>,
}

impl IndexMap {
    /// Maps `file` (at `path`), which must hold at least the header, as an array of `elem`-byte
    /// elements after it (32: entries; 16: compact entries; 4: block checksums).
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a file shorter than the header; [`Error::Io`] naming the path.
    pub(crate) fn map(file: File, path: &Path, writable: bool, elem: usize) -> Result<IndexMap> {
        assert!(
            elem == ENTRY_SIZE || elem == COMPACT_ENTRY_SIZE || elem == BLOCK_CRC_SIZE,
            "index elements are entries or block checksums"
        );
        let first = Arc::new(Self::map_file(&file, path, writable, elem)?);
        Ok(IndexMap {
            file,
            path: path.to_path_buf(),
            writable,
            elem,
            map: RwLock::new(Arc::clone(&first)),
            first,
            made_in: MadeIn::here(),
        })
    }

    fn map_file(file: &File, path: &Path, writable: bool, elem: usize) -> Result<Mapping> {
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        if len < HEADER_SIZE as u64 {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                offset: len,
                reason: format!("index.zr is {len} bytes, shorter than its {HEADER_SIZE}-byte header"),
                source: None,
            });
        }
        let opts = MmapOptions::new();
        let raw = if writable { opts.map_raw(file) } else { opts.map_raw_read_only(file) };
        let raw = raw.map_err(|e| Error::io("mmap", path, e))?;
        Ok(Mapping { raw, entries: (len - HEADER_SIZE as u64) / elem as u64, elem })
    }

    fn current(&self) -> Arc<Mapping> {
        Arc::clone(&self.map.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The header's 64 bytes (the count among them read atomically).
    pub(crate) fn header(&self) -> [u8; HEADER_SIZE] {
        let m = &self.first;
        let count = count_atomic(m).load(Ordering::Acquire);
        // SAFETY: the mapping holds at least HEADER_SIZE bytes (checked when it was made); only
        // the single writer writes the header, and a torn read of its dynamic fields is caught by
        // their checksum where it matters (the writer's own open). The count is overwritten with
        // its atomic load.
        let mut h = unsafe { std::ptr::read_volatile(m.raw.as_ptr().cast::<[u8; HEADER_SIZE]>()) };
        h[COUNT_OFFSET..COUNT_OFFSET + 8].copy_from_slice(&count.to_le_bytes());
        h
    }

    /// The published record count (acquire).
    pub(crate) fn count(&self) -> u64 {
        count_atomic(&self.first).load(Ordering::Acquire)
    }

    /// A view covering at least `entries` entries, remapping when the file has grown past the
    /// current mapping (another process appended).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the file holds fewer entries than asked (a count past the file's
    /// end); [`Error::Io`] naming the path.
    pub(crate) fn view(&self, entries: u64) -> Result<IndexView> {
        let Ok(m) = self.made_in.read(&self.map).map(|m| Arc::clone(&m)) else {
            return self.view_uncached(entries);
        };
        if m.entries >= entries {
            return Ok(IndexView { map: m });
        }
        let Ok(mut slot) = self.made_in.write(&self.map) else {
            return self.view_uncached(entries);
        };
        if slot.entries < entries {
            *slot = Arc::new(self.remap(entries)?);
        }
        Ok(IndexView { map: Arc::clone(&slot) })
    }

    /// The file mapped anew, covering at least `entries` elements.
    fn remap(&self, entries: u64) -> Result<Mapping> {
        let fresh = Self::map_file(&self.file, &self.path, self.writable, self.elem)?;
        if fresh.entries < entries {
            let what = if self.elem == BLOCK_CRC_SIZE { "block checksums" } else { "entries" };
            return Err(Error::Corrupt {
                path: self.path.clone(),
                offset: HEADER_SIZE as u64 + fresh.entries * self.elem as u64,
                reason: format!("the index holds {} {what}; the header publishes {entries}", fresh.entries),
                source: None,
            });
        }
        Ok(fresh)
    }

    /// [`IndexMap::view`] in a fork whose parent held the mapping's lock: the file mapped for
    /// this view alone.
    fn view_uncached(&self, entries: u64) -> Result<IndexView> {
        Ok(IndexView { map: Arc::new(self.remap(entries)?) })
    }

    /// The writer makes room for `entries` entries: the file grows (in steps) and is remapped.
    ///
    /// # Errors
    /// [`Error::Io`] (or [`Error::DiskFull`]) naming the path.
    pub(crate) fn reserve(&self, entries: u64) -> Result<()> {
        assert!(self.writable, "reserve on a read-only index");
        let mut slot = self.map.write().unwrap_or_else(|e| e.into_inner());
        if slot.entries >= entries {
            return Ok(());
        }
        // Entries grow by at least 1 MiB; block checksums by a page (a store of a few thousand
        // records keeps a small index).
        let step = if self.elem == BLOCK_CRC_SIZE { 4096 / BLOCK_CRC_SIZE as u64 } else { GROW_ENTRIES };
        let want = entries.max(slot.entries.saturating_mul(2)).max(slot.entries + step);
        let bytes = (HEADER_SIZE as u64).saturating_add(want.saturating_mul(self.elem as u64));
        self.file.set_len(bytes).map_err(|e| Error::io("grow", &self.path, e))?;
        *slot = Arc::new(Self::map_file(&self.file, &self.path, true, self.elem)?);
        Ok(())
    }

    /// The writer, holding the store alone (compaction: no other handle has the file open), cuts
    /// the file down to `entries` elements when it holds more (what deletes left past the count),
    /// and maps it anew. The header mapping ([`Self::header`]) is never past the cut.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub(crate) fn shrink(&self, entries: u64) -> Result<()> {
        assert!(self.writable, "shrink on a read-only index");
        let mut slot = self.map.write().unwrap_or_else(|e| e.into_inner());
        let bytes = (HEADER_SIZE as u64).saturating_add(entries.saturating_mul(self.elem as u64));
        let len = self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?.len();
        if len <= bytes {
            return Ok(());
        }
        self.file.set_len(bytes).map_err(|e| Error::io("truncate", &self.path, e))?;
        // The old mapping reaches past the end now: replaced before anything reads through it
        // (no view of it is held: the writer holds the store alone).
        *slot = Arc::new(Self::map_file(&self.file, &self.path, true, self.elem)?);
        self.file.sync_all().map_err(|e| Error::io("sync", &self.path, e))
    }

    /// The writer writes entries `first..` (already [`reserve`](Self::reserve)d), which no reader
    /// reads yet (they are at or past the published count, or the store is held exclusively).
    ///
    /// One positional write of the file, not stores through the mapping: a mapping's first touch
    /// of each page faults (a hole read in, then made writable), and flushing pages dirtied
    /// through a mapping write-protects every one of them again (a TLB flush on each CPU); a write
    /// copies into the same page cache the mappings read, so readers see the entries as before.
    ///
    /// # Errors
    /// [`Error::Io`] (or [`Error::DiskFull`]) naming the path.
    pub(crate) fn set_entries(&self, first: u64, entries: &[[u8; ENTRY_SIZE]]) -> Result<()> {
        assert_eq!(self.elem, ENTRY_SIZE, "entries written to an index of block checksums");
        self.write_elements(first, entries.len(), entries.as_flattened())
    }

    /// The writer writes compact entries `first..` (already reserved), as
    /// [`IndexMap::set_entries`] writes entries.
    ///
    /// # Errors
    /// [`Error::Io`] (or [`Error::DiskFull`]) naming the path.
    pub(crate) fn set_compact_entries(&self, first: u64, entries: &[[u8; COMPACT_ENTRY_SIZE]]) -> Result<()> {
        assert_eq!(self.elem, COMPACT_ENTRY_SIZE, "compact entries written to another index");
        self.write_elements(first, entries.len(), entries.as_flattened())
    }

    /// The writer writes block checksums `first..` (already reserved) of a fixed-stride index, as
    /// [`IndexMap::set_entries`] writes entries: the open block's may be rewritten while readers
    /// read it (they check a block against the count they took, and retry: `store::stride`).
    ///
    /// # Errors
    /// [`Error::Io`] (or [`Error::DiskFull`]) naming the path.
    pub(crate) fn set_block_crcs(&self, first: u64, crcs: &[u32]) -> Result<()> {
        assert_eq!(self.elem, BLOCK_CRC_SIZE, "block checksums written to an index of entries");
        let bytes: Vec<u8> = crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        self.write_elements(first, crcs.len(), &bytes)
    }

    fn write_elements(&self, first: u64, n: usize, bytes: &[u8]) -> Result<()> {
        let m = self.current();
        assert!(self.writable && first + n as u64 <= m.entries, "a write past the reserved index");
        let at = HEADER_SIZE as u64 + self.elem as u64 * first;
        super::io::write_all_at(&self.file, bytes, at).map_err(|e| Error::io("write", &self.path, e))
    }

    /// Starts writing elements `first..first + n` to the disk without waiting for them.
    pub(crate) fn start_writeback(&self, first: u64, n: u64) {
        let at = HEADER_SIZE as u64 + self.elem as u64 * first;
        super::io::start_writeback(&self.file, at, self.elem as u64 * n);
    }

    /// Flushes entries `first..first + n` to disk.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub(crate) fn flush_entries(&self, first: u64, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let m = self.current();
        let start = HEADER_SIZE + self.elem * first as usize;
        m.raw.flush_range(start, self.elem * n as usize).map_err(|e| Error::io("msync", &self.path, e))
    }

    /// The writer writes the header: every byte but the count, then publishes the count (release),
    /// then (`durable`) flushes the header to disk.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub(crate) fn set_header(&self, h: &[u8; HEADER_SIZE], durable: bool) -> Result<()> {
        assert!(self.writable, "set_header on a read-only index");
        let m = self.current();
        let base = m.raw.as_mut_ptr();
        // SAFETY: the mapping holds the header (checked when made) and is writable; only the writer
        // writes these bytes. The count (bytes 40..48) is left to the atomic store below.
        unsafe {
            std::ptr::write_volatile(
                base.cast::<[u8; COUNT_OFFSET]>(),
                h[..COUNT_OFFSET].try_into().expect("40 bytes"),
            );
            std::ptr::write_volatile(
                base.add(COUNT_OFFSET + 8).cast::<[u8; HEADER_SIZE - COUNT_OFFSET - 8]>(),
                h[COUNT_OFFSET + 8..].try_into().expect("16 bytes"),
            );
        }
        let count = u64::from_le_bytes(h[COUNT_OFFSET..COUNT_OFFSET + 8].try_into().expect("8 bytes"));
        count_atomic(&m).store(count, Ordering::Release);
        if !durable {
            return Ok(());
        }
        m.raw.flush_range(0, HEADER_SIZE).map_err(|e| Error::io("msync", &self.path, e))
    }
}

/// The count field of a mapping's header, as an atomic.
fn count_atomic(m: &Mapping) -> &AtomicU64 {
    // SAFETY: offset 40 of a page-aligned mapping of at least HEADER_SIZE bytes is in bounds and
    // 8-byte aligned; every access to this field, in any process, goes through an atomic.
    unsafe { AtomicU64::from_ptr(m.raw.as_mut_ptr().add(COUNT_OFFSET).cast::<u64>()) }
}

impl IndexView {
    /// Block checksum `b` of a fixed-stride index (read as it is now: the open block's may
    /// change under a reader).
    ///
    /// # Panics
    /// When `b` is not below the elements the view covers, or the index holds entries.
    #[inline]
    pub(crate) fn block_crc(&self, b: u64) -> u32 {
        assert!(
            self.map.elem == BLOCK_CRC_SIZE && b < self.map.entries,
            "block checksum {b} past the mapped index"
        );
        // SAFETY: in bounds (asserted: the mapping covers `entries` whole 4-byte elements after
        // the 64-byte header, so the read is 4-byte aligned in a page-aligned mapping). A
        // concurrent rewrite of the open block's checksum by the writer is a racy read of plain
        // bytes, which a volatile read of an aligned u32 makes whole: the reader checks the
        // value against the records and retries (`store::stride`).
        let v = unsafe {
            std::ptr::read_volatile(
                self.map.raw.as_ptr().add(HEADER_SIZE + BLOCK_CRC_SIZE * b as usize).cast::<u32>(),
            )
        };
        u32::from_le(v)
    }

    /// The 32 bytes of entry `idx`.
    ///
    /// # Panics
    /// When `idx` is not below the entries the view covers (callers check against the count,
    /// which the view covers), or the index holds other elements.
    #[inline]
    pub(crate) fn entry_bytes(&self, idx: u64) -> [u8; ENTRY_SIZE] {
        self.element(idx)
    }

    /// The 16 bytes of compact entry `idx`.
    ///
    /// # Panics
    /// As [`IndexView::entry_bytes`].
    #[inline]
    pub(crate) fn compact_entry_bytes(&self, idx: u64) -> [u8; COMPACT_ENTRY_SIZE] {
        self.element(idx)
    }

    /// Element `idx`, of `N` bytes.
    #[inline(always)]
    fn element<const N: usize>(&self, idx: u64) -> [u8; N] {
        assert!(
            self.map.elem == N && idx < self.map.entries,
            "index entry {idx} past the mapped {}",
            self.map.entries
        );
        // SAFETY: in bounds (asserted; the mapping covers `entries` whole `N`-byte elements after
        // the header). Entries below the published count are immutable while readers exist.
        unsafe {
            std::ptr::read_volatile(
                self.map.raw.as_ptr().add(HEADER_SIZE + N * idx as usize).cast::<[u8; N]>(),
            )
        }
    }

    /// Starts reading element `idx`'s page into the page cache (`MADV_WILLNEED`), without
    /// waiting; a no-op past the mapping.
    #[inline]
    pub(crate) fn will_need(&self, idx: u64) {
        // Off Unix there is no such advice: nothing.
        #[cfg(unix)]
        if idx < self.map.entries {
            let at = HEADER_SIZE + self.map.elem * idx as usize;
            let _ = self.map.raw.advise_range(memmap2::Advice::WillNeed, at, self.map.elem);
        }
        #[cfg(not(unix))]
        let _ = idx;
    }

    /// Whether element `idx`'s page is in the page cache (true past the mapping).
    #[inline]
    pub(crate) fn resident(&self, idx: u64) -> bool {
        idx >= self.map.entries
            || super::pages::page_resident(
                self.map.raw.as_ptr().wrapping_add(HEADER_SIZE + self.map.elem * idx as usize),
            )
    }

    /// Hints the CPU to fetch element `idx`; a no-op past the mapping.
    #[inline]
    pub(crate) fn prefetch(&self, idx: u64) {
        if idx < self.map.entries {
            super::cpu::prefetch_raw(
                self.map.raw.as_ptr().wrapping_add(HEADER_SIZE + self.map.elem * idx as usize),
                self.map.elem,
            );
        }
    }
}
