//! The one module of the workspace allowed `unsafe`: memory-mapping files, using the mapped
//! metadata table in place, gathering records into uninitialised memory, running code compiled
//! for AVX2 on CPUs that have it, and (feature `cuda`) allocating pinned host memory.
//!
//! What a mapping may assume, and what it may not:
//! - A mapping stays valid while the `Mmap`/`MmapRaw` lives; the file may be changed underneath by
//!   another process. Reading a page past the file's current end raises SIGBUS, so every mapping
//!   here is checked against the file's length when it is made, and the files mapped are either
//!   fixed-size (`meta.zr`, never truncated by loaderx) or inputs that the caller promises not to
//!   truncate while they are mapped (framing over immutable inputs).
//! - Pages written by another process through a shared mapping are visible here; ordering between
//!   them is what the atomic `length` field provides.
//!
//! Gather destinations ([`Out`]): a batch buffer handed to a tensor library must be a fresh
//! allocation each batch; zero-filling it first costs a full extra pass over memory (and fresh
//! pages), so the gather writes into the `Vec`'s spare capacity instead. [`Out`] only ever writes
//! initialised bytes, each byte once, and counts them; [`gather_to_vec`] exposes the elements only
//! when the count proves every byte was written.
#![expect(
    unsafe_code,
    reason = "file mappings, the in-place metadata table, uninitialised gather buffers, AVX2 dispatch and pinned memory"
)]

use std::fs::File;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use memmap2::{Mmap, MmapOptions, MmapRaw};
use zstd::bulk::Decompressor;
use zstd::zstd_safe::WriteBuf;

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

    /// Hints the CPU to fetch table entry `idx` ([`prefetch`]); a no-op past the table.
    #[inline]
    pub(crate) fn prefetch_entry(&self, idx: u32) {
        if idx < MAX_RECORDS {
            // No reference is made: the entry may be past the published length and being
            // written by the writer. The address is inside the mapping, as in `entry`.
            prefetch_raw(self.base().wrapping_add(ENTRY_SIZE * (1 + idx as usize)), ENTRY_SIZE);
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

// ------------------------------------------------------------------------------------------------
// Gather destinations

/// The destination of a gather, or one shard of it: bytes that may be uninitialised, written
/// front to back through a cursor.
///
/// Only the bytes before the cursor (`filled`) have been written; writes go at the cursor and
/// advance it by what they actually wrote. Shards split off with [`Out::take`] are disjoint. When
/// an `Out` is dropped it adds its `filled` to the counter its buffer's shards share (once per
/// shard, not per record); each adds at most its length, so a total equal to the buffer's length
/// means every byte of it was written.
pub(crate) struct Out<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    filled: usize,
    written: &'a AtomicUsize,
}

impl<'a> Out<'a> {
    /// Bytes not written yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.filled
    }

    /// Splits off the next `n` unwritten bytes as their own shard; `self` keeps what follows.
    ///
    /// # Panics
    /// When something was written already or `n` exceeds [`Out::remaining`] (the callers size
    /// shards from the same table they checked the buffer's length against).
    pub(crate) fn take(&mut self, n: usize) -> Out<'a> {
        assert_eq!(self.filled, 0, "shards are split off before anything is written");
        let (head, tail) = std::mem::take(&mut self.buf).split_at_mut(n);
        self.buf = tail;
        Out { buf: head, filled: 0, written: self.written }
    }

    /// Writes `src` at the cursor.
    ///
    /// # Panics
    /// When `src` is longer than [`Out::remaining`].
    pub(crate) fn copy(&mut self, src: &[u8]) {
        copy_bytes(&mut self.buf[self.filled..self.filled + src.len()], src);
        self.filled += src.len();
    }

    /// Decompresses one zstd frame at the cursor into at most `max` bytes; returns the
    /// decompressed size (zstd fails rather than write past `max`).
    ///
    /// # Errors
    /// zstd's error for a frame that does not decode or does not fit.
    ///
    /// # Panics
    /// When `max` exceeds [`Out::remaining`].
    pub(crate) fn decompress(
        &mut self,
        ctx: &mut Decompressor<'_>,
        frame: &[u8],
        max: usize,
    ) -> std::io::Result<usize> {
        let mut dst = Frame { buf: &mut self.buf[self.filled..self.filled + max], filled: 0 };
        let result = ctx.decompress_to_buffer(frame, &mut dst);
        self.filled += dst.filled;
        result
    }
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.written.fetch_add(self.filled, Ordering::Relaxed);
    }
}

/// A piece of a gather buffer as zstd's output buffer: capacity the piece, contents the prefix
/// zstd reports as written.
struct Frame<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    filled: usize,
}

// SAFETY: `as_slice` covers only the first `filled` bytes, which zstd reported as initialised
// through `filled_until` (zstd-safe asserts `filled <= capacity`); `capacity` is the length of the
// memory `as_mut_ptr` points at, all of it owned by this piece for the borrow.
unsafe impl WriteBuf for Frame<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes were written by zstd (see the impl's comment).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.filled) }
    }

    fn capacity(&self) -> usize {
        self.buf.len()
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast::<u8>()
    }

    unsafe fn filled_until(&mut self, n: usize) {
        self.filled = n;
    }
}

/// Runs a gather `f` into an initialised buffer.
pub(crate) fn gather_to_slice<R>(buf: &mut [u8], f: impl FnOnce(Out<'_>) -> Result<R>) -> Result<R> {
    let written = AtomicUsize::new(0);
    let len = buf.len();
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout. Viewing initialised bytes as
    // maybe-uninitialised is unsound only if uninitialised bytes are then written through the
    // view, and `Out` writes nothing but initialised bytes (copies of slices and zstd output).
    let raw = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<MaybeUninit<u8>>(), len) };
    f(Out { buf: raw, filled: 0, written: &written })
}

/// Replaces the contents of `v` with `elems` elements whose bytes the gather `f` writes, without
/// zero-filling them first; `v`'s allocation is kept where it is large enough.
///
/// # Errors
/// `f`'s error, after which `v` is empty.
///
/// # Panics
/// When `f` returns `Ok` without having written every byte (a bug in the gather, never bad data).
pub(crate) fn gather_to_vec<T: bytemuck::Pod>(
    v: &mut Vec<T>,
    elems: usize,
    f: impl FnOnce(Out<'_>) -> Result<()>,
) -> Result<()> {
    v.clear();
    v.reserve_exact(elems);
    let bytes = elems * size_of::<T>(); // cannot overflow: `reserve_exact` checked it
    let spare = &mut v.spare_capacity_mut()[..elems];
    // SAFETY: the spare capacity is allocated memory for `elems` values of `T`, exclusively
    // borrowed; `MaybeUninit<u8>` has alignment 1 and no validity requirement, so the same
    // `bytes` bytes viewed as `[MaybeUninit<u8>]` are valid.
    let raw = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<MaybeUninit<u8>>(), bytes) };
    let written = AtomicUsize::new(0);
    f(Out { buf: raw, filled: 0, written: &written })?;
    let written = written.into_inner();
    assert_eq!(written, bytes, "the gather wrote {written} of its {bytes} bytes");
    // SAFETY: every shard of `raw` (all dropped by now: `f` took the `Out` by value) added the
    // bytes it wrote, a prefix of the shard and no more than its length; the shards are disjoint,
    // so `written == bytes` means all `bytes` bytes are initialised; `T: Pod` makes any
    // initialised bytes a valid `T`.
    unsafe { v.set_len(elems) };
    Ok(())
}

/// Copies `src` into `dst` (same length), around a `memcpy` hazard.
///
/// glibc copies large blocks with `rep movsb`, which some CPUs (AMD Zen 3 among them) run 2.5-4x
/// slower when the destination starts just past the source modulo 4 KiB. That is the common case
/// of a gather: glibc's large allocations start 16 bytes into a page and raw records of
/// page-multiple size sit at page boundaries of the chunk file. There, the bytes are moved in
/// 256-byte blocks, each loaded whole before it is stored (plain vector moves, as fast as the
/// best `memcpy` alignments); everywhere else `memcpy` runs.
#[inline]
fn copy_bytes(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let distance = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
    if src.len() < SHORT_DISTANCE_MIN_LEN || distance >= SHORT_DISTANCE {
        dst.write_copy_of_slice(src);
    } else {
        copy_in_blocks(dst, src);
    }
}

/// The copy [`copy_bytes`] uses for the hazard: 256-byte blocks, each loaded whole before it is stored.
fn copy_in_blocks(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    const BLOCK: usize = 256;
    let mut d = dst.chunks_exact_mut(BLOCK);
    let mut s = src.chunks_exact(BLOCK);
    for (d, s) in (&mut d).zip(&mut s) {
        let block: [u8; BLOCK] = s.try_into().expect("chunks_exact yields BLOCK bytes");
        d.write_copy_of_slice(&block);
    }
    d.into_remainder().write_copy_of_slice(s.remainder());
}

/// Destination-minus-source distances (modulo 4 KiB) below which [`copy_bytes`] avoids `memcpy`:
/// measured slow at 0, 8 and 16, full speed from 32 on.
const SHORT_DISTANCE: usize = 64;
/// Copies shorter than this never reach glibc's `rep movsb` path.
const SHORT_DISTANCE_MIN_LEN: usize = 1024;

/// Asks the CPU to start loading the first bytes of `src` into cache (at most [`PREFETCH_BYTES`],
/// one hint per cache line) and returns at once: a gather hints the next records while it copies
/// this one, so their cache misses overlap instead of queueing one after another.
#[inline]
pub(crate) fn prefetch(src: &[u8]) {
    prefetch_raw(src.as_ptr(), src.len());
}

/// [`prefetch`] of the `len` bytes at `ptr`. Any address is allowed: a prefetch hint never faults.
#[inline]
fn prefetch_raw(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..len.min(PREFETCH_BYTES)).step_by(64) {
        // SAFETY: `_mm_prefetch` is an SSE instruction (part of the x86_64 baseline) that reads
        // and changes no memory and never faults, whatever the address (computed with
        // `wrapping_add`, so no pointer-arithmetic rule applies either).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                ptr.wrapping_add(offset).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

/// Bytes of a record [`prefetch`] hints: the hardware prefetcher follows a longer record once
/// the copy streams through it.
const PREFETCH_BYTES: usize = 1024;

// ------------------------------------------------------------------------------------------------
// Pinned host memory (feature `cuda`)

/// `len` zeroed values of `T` in page-locked (pinned) host memory of `ctx`'s device, for staging
/// host-to-device copies: the DMA engine reads pinned memory directly, so a copy from it is
/// asynchronous to the host and runs at the link's speed, where a copy from pageable memory is
/// first staged by the driver on the calling thread.
///
/// Ordinary cached pinned memory (no write-combining), so the host can read it back at full
/// speed. Reading or writing it through [`PinnedHostSlice::as_mut_slice`] first waits for the
/// last copy that used it.
///
/// # Errors
/// The driver's error when the context cannot be bound or the allocation fails.
#[cfg(feature = "cuda")]
pub fn pinned_zeroed<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    len: usize,
) -> std::result::Result<cudarc::driver::PinnedHostSlice<T>, cudarc::driver::DriverError> {
    // SAFETY: the one obligation of `alloc_pinned_with_flags` is that the memory is unset: it is
    // zeroed just below, before anything can read it. Flags 0: plain page-locked memory.
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<T>(len, 0) }?;
    let ptr = pinned.as_mut_ptr()?;
    // SAFETY: `ptr` is the start of the `len` values of `T` just allocated (non-null and aligned:
    // cudarc asserts both), owned by `pinned` and not yet shared; zero bits are a valid `T`
    // (`ValidAsZeroBits`).
    unsafe { std::ptr::write_bytes(ptr, 0, len) };
    Ok(pinned)
}

// ------------------------------------------------------------------------------------------------
// CPU dispatch

/// Runs `f`, inlined into a copy compiled for AVX2 where the CPU has it (checked once, then a
/// cached load), else as is. `f` should be a small closure over `#[inline(always)]` loops, so
/// that its whole body lands in the AVX2 copy. The result is the same either way: only the
/// instructions differ.
#[inline(always)]
pub(crate) fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above: the only requirement for calling
            // a function compiled with `target_feature(enable = "avx2")`.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Runs the cyclic sampler's AVX2 kernel ([`crate::sampler::avx2::fill`]) where the CPU has AVX2
/// and the kernel handles the permutation's shape; `false`, with nothing written, otherwise.
#[inline]
pub(crate) fn fill_cyclic_avx2(perm: &crate::sampler::Permutation, first: u32, out: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::sampler::avx2::supports(perm) && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above: the kernel is safe code whose only
        // requirement is the target feature it is compiled with.
        unsafe { crate::sampler::avx2::fill(perm, first, out) };
        return true;
    }
    let _ = (perm, first, out);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_exact_at_every_relative_alignment() {
        // Source offsets 0 and 1 against destination offsets around the short-distance window,
        // lengths below, at and past the block size with a remainder.
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for len in [0, 1, 255, 1023, 1024, 4096, 5000, 12_289] {
            for src_off in [0, 1, 4096] {
                for dst_off in [0, 1, 8, 16, 63, 64, 100] {
                    // Both copies, whichever one the addresses of this run would pick.
                    for copy in [copy_bytes, copy_in_blocks] {
                        let mut buf = vec![MaybeUninit::new(0xAAu8); 20_000];
                        let s = &src[src_off..src_off + len];
                        copy(&mut buf[dst_off..dst_off + len], s);
                        // SAFETY: the whole buffer was initialised by `vec!` above.
                        let got: Vec<u8> = buf.iter().map(|b| unsafe { b.assume_init() }).collect();
                        assert_eq!(&got[dst_off..dst_off + len], s, "len {len} src {src_off} dst {dst_off}");
                        assert!(got[..dst_off].iter().chain(&got[dst_off + len..]).all(|&b| b == 0xAA));
                    }
                }
            }
        }
    }

    #[test]
    fn pieces_fill_a_vec_and_keep_its_allocation() {
        let mut v: Vec<u16> = Vec::with_capacity(8);
        let before = v.as_ptr();
        gather_to_vec(&mut v, 3, |mut out| {
            out.take(2).copy(&[1, 0]);
            let mut rest = out.take(4);
            rest.copy(&[2, 0]);
            rest.copy(&[3, 0]);
            assert_eq!(out.remaining(), 0);
            Ok(())
        })
        .unwrap();
        assert_eq!(v, [1, 2, 3]);
        assert_eq!(v.as_ptr(), before);
    }

    #[test]
    #[should_panic(expected = "wrote 2 of its 4 bytes")]
    fn a_short_gather_is_never_exposed() {
        let mut v: Vec<u8> = Vec::new();
        let _ = gather_to_vec(&mut v, 4, |mut out| {
            out.copy(&[1, 2]);
            Ok(())
        });
    }

    #[test]
    fn a_failed_gather_leaves_the_vec_empty() {
        let mut v = vec![7u32; 4];
        let r = gather_to_vec(&mut v, 4, |_| Err(Error::InvalidArgument("no".into())));
        assert!(r.is_err());
        assert!(v.is_empty());
    }

    #[test]
    fn zstd_output_counts_only_what_it_wrote() {
        let frame = zstd::bulk::compress(b"hello, world", 3).unwrap();
        let mut ctx = Decompressor::new().unwrap();
        let mut v: Vec<u8> = Vec::new();
        gather_to_vec(&mut v, 12, |mut out| {
            assert_eq!(out.decompress(&mut ctx, &frame, 12).unwrap(), 12);
            Ok(())
        })
        .unwrap();
        assert_eq!(v, b"hello, world");
        // Too small a piece: zstd refuses and nothing is exposed.
        let r = gather_to_slice(&mut [0u8; 4], |mut out| Ok(out.decompress(&mut ctx, &frame, 4)));
        assert!(r.unwrap().is_err());
    }
}
