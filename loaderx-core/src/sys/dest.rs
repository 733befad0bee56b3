//! [`Destination`]: where a gather writes, possibly uninitialised memory.
//!
//! A batch buffer handed to a tensor library must be a fresh allocation each batch; zero-filling it
//! first costs a full extra pass over memory (and fresh pages), so the gather writes into the
//! `Vec`'s spare capacity instead. [`Destination`] only ever writes initialised bytes, each byte
//! once, and counts them; [`fill_vec`] exposes the elements only when the count proves every byte
//! was written.
#![expect(unsafe_code, reason = "gathers write into uninitialised memory and hand zstd a raw output buffer")]

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use zstd::bulk::Decompressor;
use zstd::zstd_safe::WriteBuf;

use super::crc::Summer;
use super::near_copy::{NearCopy, copy_bytes};
use crate::Result;

/// The destination of a gather, or one shard of it: bytes that may be uninitialised, written
/// front to back through a cursor.
///
/// Only the bytes before the cursor (`filled`) have been written; writes go at the cursor and
/// advance it by what they actually wrote. Shards split off with [`Destination::split_off`] are disjoint. When
/// an `Out` is dropped it adds its `filled` to the counter its buffer's shards share (once per
/// shard, not per record); each adds at most its length, so a total equal to the buffer's length
/// means every byte of it was written.
pub(crate) struct Destination<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    filled: usize,
    written: &'a AtomicUsize,
    /// How records landing just past their source are copied ([`NearCopy`]).
    near: NearCopy,
}

impl<'a> Destination<'a> {
    /// Bytes not written yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.filled
    }

    /// Splits off the next `n` unwritten bytes as their own shard; `self` keeps what follows.
    ///
    /// # Panics
    /// When something was written already or `n` exceeds [`Destination::remaining`] (the callers size
    /// shards from the same table they checked the buffer's length against).
    pub(crate) fn split_off(&mut self, n: usize) -> Destination<'a> {
        assert_eq!(self.filled, 0, "shards are split off before anything is written");
        let (head, tail) = std::mem::take(&mut self.buf).split_at_mut(n);
        self.buf = tail;
        Destination { buf: head, filled: 0, written: self.written, near: self.near }
    }

    /// Copies records that land just past their source as `how` says ([`NearCopy`]).
    pub(crate) fn near_copy(&mut self, how: NearCopy) {
        self.near = how;
    }

    /// Writes `src` at the cursor.
    ///
    /// # Panics
    /// When `src` is longer than [`Destination::remaining`].
    #[inline]
    pub(crate) fn copy(&mut self, src: &[u8]) {
        copy_bytes(&mut self.buf[self.filled..self.filled + src.len()], src, self.near);
        self.filled += src.len();
    }

    /// Writes `src` at the cursor and returns the crc32c of what was written, summed in the same
    /// pass as the copy ([`Summer::copy`]).
    ///
    /// # Panics
    /// When `src` is longer than [`Destination::remaining`].
    pub(crate) fn copy_crc32c(&mut self, src: &[u8], summer: &mut Summer) -> u32 {
        let crc = summer.copy(&mut self.buf[self.filled..self.filled + src.len()], src);
        self.filled += src.len();
        crc
    }

    /// Decompresses one zstd frame at the cursor into at most `max` bytes; returns the
    /// decompressed size (zstd fails rather than write past `max`).
    ///
    /// # Errors
    /// zstd's error for a frame that does not decode or does not fit.
    ///
    /// # Panics
    /// When `max` exceeds [`Destination::remaining`].
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

    /// Hands `f` the next `len` bytes, zero-filled first (for a decoder that writes only into
    /// initialised memory), and counts as written the `n` bytes `f` reports.
    ///
    /// # Errors
    /// `f`'s error, after which nothing of the `len` bytes counts as written.
    ///
    /// # Panics
    /// When `len` exceeds [`Destination::remaining`], or `f` reports more than `len` bytes.
    pub(crate) fn write_zeroed<E>(
        &mut self,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> std::result::Result<usize, E>,
    ) -> std::result::Result<usize, E> {
        let region = &mut self.buf[self.filled..self.filled + len];
        region.fill(MaybeUninit::new(0));
        // SAFETY: every byte of `region` was just initialised; `[u8]` and `[MaybeUninit<u8>]`
        // have the same layout; the borrow is exclusive for `f`'s call.
        let init = unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr().cast::<u8>(), len) };
        let n = f(init)?;
        assert!(n <= len, "a decoder reported {n} bytes written into {len}");
        self.filled += n;
        Ok(n)
    }
}

impl Drop for Destination<'_> {
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
pub(crate) fn fill_slice<R>(buf: &mut [u8], f: impl FnOnce(Destination<'_>) -> Result<R>) -> Result<R> {
    let written = AtomicUsize::new(0);
    let len = buf.len();
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout. Viewing initialised bytes as
    // maybe-uninitialised is unsound only if uninitialised bytes are then written through the
    // view, and `Out` writes nothing but initialised bytes (copies of slices and zstd output).
    let raw = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<MaybeUninit<u8>>(), len) };
    f(Destination { buf: raw, filled: 0, written: &written, near: NearCopy::Measure })
}

/// [`fill_vec`] with the elements starting at an address that is a multiple of `align` bytes:
/// `v` holds `head` zero elements first (fewer than `align / size_of::<T>()`), then the `elems`
/// the gather writes. Returns `head`. For consumers that adopt a buffer only when it is aligned
/// more than the allocator's 16 bytes (JAX's CPU client: 64); a `Vec<T>` cannot start anywhere
/// but its allocation, so the slack lies inside it.
///
/// # Errors
/// As [`fill_vec`]; [`crate::Error::InvalidArgument`] when `align` is not a power of two that
/// is a multiple of the element size.
///
/// # Panics
/// As [`fill_vec`].
pub(crate) fn fill_vec_aligned<T: bytemuck::Pod>(
    v: &mut Vec<T>,
    elems: usize,
    align: usize,
    f: impl FnOnce(Destination<'_>) -> Result<()>,
) -> Result<usize> {
    let size = size_of::<T>();
    // Aligned as the allocation is already (a plain fill): no head, whatever the element.
    let offset = align > align_of::<T>();
    if offset && (!align.is_power_of_two() || size == 0 || !align.is_multiple_of(size)) {
        return Err(crate::Error::InvalidArgument(format!(
            "an alignment of {align} bytes for elements of {size} bytes: a power of two and a multiple of the element size"
        )));
    }
    v.clear();
    let before = v.capacity();
    let slack = if offset { align / size - 1 } else { 0 };
    // The size comes from index entries, which may be damaged: an allocation that fails is an
    // error naming the size, not an abort.
    v.try_reserve_exact(elems.saturating_add(slack)).map_err(|_| {
        crate::Error::InvalidArgument(format!(
            "a batch of {elems} x {size} bytes cannot be allocated (damaged index entries claim more than memory holds)"
        ))
    })?;
    if v.capacity() != before {
        // A fresh allocation, not yet written: huge pages, where it is large enough.
        super::advise_huge_pages(v.as_ptr().cast(), v.capacity() * size);
    }
    // The allocation is aligned to `align_of::<T>()`, which is `size` for every element type
    // offset here (primitives): the distance to the next multiple of `align` is whole elements.
    let head = if offset { v.as_ptr().cast::<u8>().align_offset(align) / size } else { 0 };
    v.resize(head, T::zeroed());
    let bytes = elems * size; // cannot overflow: `try_reserve_exact` checked it
    let spare = &mut v.spare_capacity_mut()[..elems];
    // SAFETY: the spare capacity past the `head` elements is allocated memory for `elems` values
    // of `T`, exclusively borrowed; `MaybeUninit<u8>` has alignment 1 and no validity
    // requirement, so the same `bytes` bytes viewed as `[MaybeUninit<u8>]` are valid.
    let raw = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<MaybeUninit<u8>>(), bytes) };
    let written = AtomicUsize::new(0);
    if let Err(e) = f(Destination { buf: raw, filled: 0, written: &written, near: NearCopy::Measure }) {
        v.clear();
        return Err(e);
    }
    let written = written.into_inner();
    assert_eq!(written, bytes, "the gather wrote {written} of its {bytes} bytes");
    // SAFETY: every shard of `raw` (all dropped by now: `f` took the `Out` by value) added the
    // bytes it wrote, a prefix of the shard and no more than its length; the shards are disjoint,
    // so `written == bytes` means all `bytes` bytes are initialised; `T: Pod` makes any
    // initialised bytes a valid `T`; the `head` elements before them were set by `resize`.
    unsafe { v.set_len(head + elems) };
    Ok(head)
}

/// Replaces the contents of `v` with `elems` elements whose bytes the gather `f` writes, without
/// zero-filling them first; `v`'s allocation is kept where it is large enough.
///
/// # Errors
/// `f`'s error, after which `v` is empty; [`crate::Error::InvalidArgument`] when `elems` cannot
/// be allocated.
///
/// # Panics
/// When `f` returns `Ok` without having written every byte (a bug in the gather, never bad data).
pub(crate) fn fill_vec<T: bytemuck::Pod>(
    v: &mut Vec<T>,
    elems: usize,
    f: impl FnOnce(Destination<'_>) -> Result<()>,
) -> Result<()> {
    // At the allocation's own alignment: no head, the elements from its start.
    fill_vec_aligned(v, elems, align_of::<T>(), f).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::sys::near_copy::copy_in_blocks;

    #[test]
    fn copies_are_exact_at_every_relative_alignment() {
        // Source offsets 0 and 1 against destination offsets around the short-distance window,
        // lengths below, at and past the block size with a remainder.
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for len in [0, 1, 255, 1023, 1024, 4096, 5000, 12_289] {
            for src_off in [0, 1, 4096] {
                for dst_off in [0, 1, 8, 16, 63, 64, 100] {
                    // Both copies, whichever one the addresses of this run would pick.
                    let by_mask = |d: &mut [MaybeUninit<u8>], s: &[u8]| copy_bytes(d, s, NearCopy::Blocks);
                    let by_memcpy = |d: &mut [MaybeUninit<u8>], s: &[u8]| copy_bytes(d, s, NearCopy::Memcpy);
                    let blocks = |d: &mut [MaybeUninit<u8>], s: &[u8]| copy_in_blocks(d, s);
                    for copy in [&by_mask as &dyn Fn(&mut [MaybeUninit<u8>], &[u8]), &by_memcpy, &blocks] {
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
        fill_vec(&mut v, 3, |mut out| {
            out.split_off(2).copy(&[1, 0]);
            let mut rest = out.split_off(4);
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
        let _ = fill_vec(&mut v, 4, |mut out| {
            out.copy(&[1, 2]);
            Ok(())
        });
    }

    #[test]
    fn a_failed_gather_leaves_the_vec_empty() {
        let mut v = vec![7u32; 4];
        let r = fill_vec(&mut v, 4, |_| Err(Error::InvalidArgument("no".into())));
        assert!(matches!(r, Err(Error::InvalidArgument(m)) if m == "no"), "the fill's own error");
        assert!(v.is_empty());
    }

    #[test]
    fn zstd_output_counts_only_what_it_wrote() {
        let frame = zstd::bulk::compress(b"hello, world", 3).unwrap();
        let mut ctx = Decompressor::new().unwrap();
        let mut v: Vec<u8> = Vec::new();
        fill_vec(&mut v, 12, |mut out| {
            assert_eq!(out.decompress(&mut ctx, &frame, 12).unwrap(), 12);
            Ok(())
        })
        .unwrap();
        assert_eq!(v, b"hello, world");
        // Too small a piece: zstd refuses and nothing is exposed.
        let r = fill_slice(&mut [0u8; 4], |mut out| Ok(out.decompress(&mut ctx, &frame, 4)));
        assert!(matches!(
            r.unwrap(),
            Err(e) if e.kind() == std::io::ErrorKind::Other && e.to_string().contains("too small")
        ));
    }

    /// A fresh batch buffer large enough is advised huge pages before the gather writes it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_fresh_buffer_is_advised_huge_pages() {
        if !super::super::pages::advice_visible() {
            return;
        }
        let n = crate::sys::tuning::HUGE_PAGES_FROM_BYTES + (4 << 20);
        let src = vec![7u8; n];
        let mut v: Vec<u8> = Vec::new();
        fill_vec(&mut v, n, |mut out| {
            out.copy(&src);
            Ok(())
        })
        .unwrap();
        assert_eq!(v, src);
        assert!(super::super::pages::advised_huge(v[n / 2..].as_ptr()));
    }
}
