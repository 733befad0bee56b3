//! [`MetaMap`]: the v1 `meta.zr`, memory-mapped and used in place (header + fixed table).
#![expect(unsafe_code, reason = "the metadata table is read and written in place through a shared mapping")]

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::format::{ENTRY_SIZE, Header, MAX_RECORDS, META_SIZE, RecordLoc};
use crate::{Error, Result};

/// The memory-mapped `meta.zr`: a header followed by the record table, used in place.
pub(crate) struct MetaMap {
    raw: MmapRaw,
    writable: bool,
}

// Byte offset of `Header::length` inside the header.
const LENGTH_OFFSET: usize = 12;

impl MetaMap {
    /// Maps `meta.zr`, which must be exactly [`META_SIZE`] bytes.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the file has another size; [`Error::Io`] when mapping fails.
    pub(crate) fn map(file: &File, path: &Path, writable: bool) -> Result<MetaMap> {
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        if len != META_SIZE {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                offset: len,
                reason: format!("meta.zr is {len} bytes; it must be {META_SIZE} (truncated or not a store)"),
                source: None,
            });
        }
        let opts = MmapOptions::new();
        let raw = if writable { opts.map_raw(file) } else { opts.map_raw_read_only(file) };
        let raw = raw.map_err(|e| Error::io("mmap", path, e))?;
        Ok(MetaMap { raw, writable })
    }

    fn base(&self) -> *mut u8 {
        self.raw.as_mut_ptr()
    }

    /// A copy of the header's 16 bytes (the length field read atomically first).
    pub(crate) fn header(&self) -> Header {
        let length = self.length();
        // SAFETY: the mapping is META_SIZE (> 16) bytes, checked in `map`; a page-aligned base is
        // aligned for `Header` (align 4). The bytes other than `length` are only written by the
        // single writer while it holds the store's write lock, so a reader may see a stale tail,
        // which it never uses for anything but validation of entries below `length`.
        let mut h = unsafe { std::ptr::read_volatile(self.base().cast::<Header>()) };
        h.length = length;
        h
    }

    fn length_atomic(&self) -> &AtomicU32 {
        // SAFETY: offset 12 of a page-aligned mapping of META_SIZE bytes is in bounds and 4-byte
        // aligned; every access to this field, in any process, goes through an atomic.
        unsafe { AtomicU32::from_ptr(self.base().add(LENGTH_OFFSET).cast::<u32>()) }
    }

    /// The published number of records (acquire).
    pub(crate) fn length(&self) -> u32 {
        self.length_atomic().load(Ordering::Acquire)
    }

    /// Table entry `idx`.
    ///
    /// # Panics
    /// When `idx >= MAX_RECORDS` (callers check against the length first).
    #[inline]
    pub(crate) fn entry(&self, idx: u32) -> RecordLoc {
        assert!(idx < MAX_RECORDS, "table index {idx} out of the table");
        // SAFETY: 16 + idx*16 + 16 <= META_SIZE for idx < MAX_RECORDS, and the address is 4-byte
        // aligned. Entries below the published length are immutable while readers exist (delete
        // and compact take the store exclusively, across processes through the meta lock), so
        // this read does not race a write.
        unsafe {
            std::ptr::read_volatile(self.base().add(ENTRY_SIZE * (1 + idx as usize)).cast::<RecordLoc>())
        }
    }

    /// Starts reading table entry `idx`'s page into the page cache (`MADV_WILLNEED`), without
    /// waiting; a no-op past the table.
    #[inline]
    pub(crate) fn will_need_entry(&self, idx: u32) {
        // Off Unix there is no such advice: nothing.
        #[cfg(not(unix))]
        let _ = idx;
        #[cfg(unix)]
        if idx < MAX_RECORDS {
            let _ =
                self.raw.advise_range(memmap2::Advice::WillNeed, ENTRY_SIZE * (1 + idx as usize), ENTRY_SIZE);
        }
    }

    /// Whether table entry `idx`'s page is in the page cache (true past the table).
    #[inline]
    pub(crate) fn entry_resident(&self, idx: u32) -> bool {
        idx >= MAX_RECORDS
            || super::pages::page_resident(self.base().wrapping_add(ENTRY_SIZE * (1 + idx as usize)))
    }

    /// Hints the CPU to fetch table entry `idx` ([`prefetch`]); a no-op past the table.
    #[inline]
    pub(crate) fn prefetch_entry(&self, idx: u32) {
        if idx < MAX_RECORDS {
            // No reference is made: the entry may be past the published length and being
            // written by the writer. The address is inside the mapping, as in `entry`.
            super::cpu::prefetch_raw(self.base().wrapping_add(ENTRY_SIZE * (1 + idx as usize)), ENTRY_SIZE);
        }
    }

    /// Writes table entry `idx`. Only the writer calls this, for entries no reader can see yet
    /// (at or past the published length) or while it holds the store exclusively.
    pub(crate) fn set_entry(&self, idx: u32, loc: RecordLoc) {
        assert!(self.writable && idx < MAX_RECORDS, "set_entry on a read-only map or out of the table");
        // SAFETY: bounds and alignment as in `entry`; the mapping is writable (asserted); no reader
        // reads this entry concurrently (see the method's contract).
        unsafe {
            std::ptr::write_volatile(
                self.base().add(ENTRY_SIZE * (1 + idx as usize)).cast::<RecordLoc>(),
                loc,
            )
        }
    }

    /// Writes the whole header except `length`, then publishes `length` (release).
    pub(crate) fn set_header(&self, h: Header) {
        assert!(self.writable, "set_header on a read-only map");
        let mut without_len = h;
        without_len.length = self.length();
        // SAFETY: bounds and alignment as in `header`; only the writer (holding the write lock)
        // writes the non-length fields, and it writes `length` back unchanged here.
        unsafe { std::ptr::write_volatile(self.base().cast::<[u8; 12]>(), first12(&without_len)) };
        self.length_atomic().store(h.length, Ordering::Release);
    }

    /// Flushes table entries `from..to` and the header to disk.
    pub(crate) fn flush_entries(&self, from: u32, to: u32, path: &Path) -> Result<()> {
        if to > from {
            let start = ENTRY_SIZE * (1 + from as usize);
            let len = ENTRY_SIZE * (to - from) as usize;
            self.raw.flush_range(start, len).map_err(|e| Error::io("msync", path, e))?;
        }
        Ok(())
    }

    /// Flushes the header page to disk.
    pub(crate) fn flush_header(&self, path: &Path) -> Result<()> {
        self.raw.flush_range(0, ENTRY_SIZE).map_err(|e| Error::io("msync", path, e))
    }
}

fn first12(h: &Header) -> [u8; 12] {
    let b = bytemuck::bytes_of(h);
    let mut out = [0u8; 12];
    out.copy_from_slice(&b[..12]);
    out
}
