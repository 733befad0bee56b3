//! The one module of the workspace allowed `unsafe`: memory-mapping files and using the mapped
//! metadata table in place.
//!
//! What a mapping may assume, and what it may not:
//! - A mapping stays valid while the `Mmap`/`MmapRaw` lives; the file may be changed underneath by
//!   another process. Reading a page past the file's current end raises SIGBUS, so every mapping
//!   here is checked against the file's length when it is made, and the files mapped are either
//!   fixed-size (`meta.zr`, never truncated by loaderx) or inputs that the caller promises not to
//!   truncate while they are mapped (framing over immutable inputs).
//! - Pages written by another process through a shared mapping are visible here; ordering between
//!   them is what the atomic `length` field provides.
#![expect(unsafe_code, reason = "file mappings and the in-place metadata table need unsafe")]

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::{Mmap, MmapOptions, MmapRaw};

use crate::store::format::{ENTRY_SIZE, Header, MAX_RECORDS, META_SIZE, RecordLoc};
use crate::{Error, Result};

/// Maps a whole file read-only.
///
/// The caller promises the file is not truncated while the mapping lives (an immutable input).
///
/// # Errors
/// [`Error::Io`] naming `path` when the mapping fails.
pub(crate) fn map_readonly(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: the mapping is read-only and private to this process's view; the only hazard is a
    // concurrent truncation of the file, which the caller rules out by contract (immutable input),
    // exactly as documented on the public entry points that take a path.
    unsafe { MmapOptions::new().map(file) }.map_err(|e| Error::io("mmap", path, e))
}

/// Maps the first `len` bytes of a chunk file read-only; `None` when `len` is 0.
///
/// The caller checks `len` against the file's size first. A committed chunk region is never
/// truncated while the store is open by anyone: the writer only trims bytes past the committed
/// tail (which no reader reads), and compaction, which truncates, takes the store exclusively
/// across processes. So every byte a reader reads through this mapping stays backed by the file.
pub(crate) fn map_chunk(file: &File, path: &Path, len: u64) -> Result<Option<Mmap>> {
    if len == 0 {
        return Ok(None);
    }
    let len = usize::try_from(len)
        .map_err(|_| Error::InvalidArgument("chunk larger than the address space".into()))?;
    // SAFETY: read-only mapping of `len` bytes, which the caller checked are within the file;
    // the bytes read through it are never truncated away or rewritten while mapped (see above).
    let map = unsafe { MmapOptions::new().len(len).map(file) }.map_err(|e| Error::io("mmap", path, e))?;
    Ok(Some(map))
}

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
