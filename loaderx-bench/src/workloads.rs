//! Deterministic workloads: the records every store contender writes, the indices every gather
//! contender reads, the f32 dataset the loader layers read and the compressed frames of the
//! decompress-only ceilings. `loaderx bench` and the criterion benches of `loaderx` both draw
//! from here, so their figures are of the same bytes.

use std::path::Path;

use loaderx_core::{Codec, DatasetWriter, WriteOptions};
use rayon::prelude::*;
use zstd::bulk::Compressor;
use zstd::dict::EncoderDictionary;

/// xorshift64*: fast deterministic bytes for workloads.
pub struct Gen(pub u64);

impl Gen {
    /// The next value of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The next value reduced into `0..n` (by remainder: a slight bias, fine for workloads).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A structured, mildly compressible record (~1.1x with plain zstd): 7 of every 8 bytes are
/// 7-bit noise, the 8th comes from a 4 KiB template shared by every record, which a trained
/// dictionary can learn.
pub fn structured_record(id: u64, len: usize) -> Vec<u8> {
    let mut g = Gen(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut t = Gen(0xC0FF_EE00_1234_5678);
    let template: Vec<u8> = (0..4096 / 8).flat_map(|_| t.next_u64().to_le_bytes()).collect();
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        let at = out.len() % 4096;
        let noise = g.next_u64().to_le_bytes();
        for (k, &n) in noise.iter().enumerate() {
            out.push(if k == 7 { template[at + k] } else { n & 0x7F });
        }
    }
    out.truncate(len);
    out
}

/// Record `id` of the loader workloads, `elems` f32 values: the [`structured_record`] of
/// `elems * 4` bytes read as little-endian f32, the top byte masked, which keeps every value
/// finite and below 2.
pub fn structured_f32(id: u64, elems: usize) -> Vec<f32> {
    structured_record(id, elems * 4)
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3] & 0x3f]))
        .collect()
}

/// `count` batches of `batch` sorted random indices in `0..n` (the shuffle case).
pub fn random_batches(seed: u64, n: u32, batch: usize, count: usize) -> Vec<Vec<u32>> {
    let mut g = Gen(seed | 1);
    (0..count)
        .map(|_| {
            let mut b: Vec<u32> = (0..batch).map(|_| g.below(u64::from(n)) as u32).collect();
            b.sort_unstable();
            b
        })
        .collect()
}

/// `count` consecutive windows of `batch` indices from 0, starting over at 0 when a window would
/// run past `n` (the epoch-iteration case). `n` must be at least `batch`.
pub fn sequential_batches(n: u32, batch: usize, count: usize) -> Vec<Vec<u32>> {
    let windows = (n as usize / batch).max(1);
    (0..count)
        .map(|k| {
            let start = (k % windows) * batch;
            (start..start + batch).map(|i| i as u32).collect()
        })
        .collect()
}

/// The records `lo..hi` ([`structured_record`] of `len` bytes) generated in parallel, for
/// writing in bounded blocks.
pub fn block(lo: u32, hi: u32, len: usize) -> Vec<Vec<u8>> {
    (lo..hi).into_par_iter().map(|i| structured_record(u64::from(i), len)).collect()
}

/// Block boundaries of about `bytes` each over `0..n` records of `len` bytes.
pub fn blocks(n: u32, len: usize, bytes: usize) -> Vec<(u32, u32)> {
    let per = (bytes / len.max(1)).max(1) as u32;
    (0..n).step_by(per as usize).map(|lo| (lo, (lo + per).min(n))).collect()
}

/// Writes a raw dense f32 dataset of `[elems]` items at `path`: the records
/// [`structured_f32`]`(i, elems)` of every block `(lo, hi)` in turn, one `append` per block.
///
/// # Errors
/// Creating or writing the dataset.
pub fn write_structured_f32(
    path: &Path,
    elems: usize,
    blocks: impl IntoIterator<Item = (u32, u32)>,
) -> anyhow::Result<()> {
    let mut w = DatasetWriter::dense::<f32>(path, vec![elems], WriteOptions::new().codec(Codec::Raw))?;
    for (lo, hi) in blocks {
        let v: Vec<f32> = (lo..hi).flat_map(|i| structured_f32(u64::from(i), elems)).collect();
        w.append(&v)?;
    }
    w.finish()?;
    Ok(())
}

/// The records ([`structured_record`] of `rec` bytes) of every batch, compressed as the store
/// compresses them: level 3, or level 19 against the store's dictionary `dict`, each frame with a
/// checksum. What the decompress-only ceilings decode.
///
/// # Panics
/// If zstd cannot make a compression context or compress a record.
pub fn zstd_frames(rec: usize, batches: &[Vec<u32>], dict: Option<&[u8]>) -> Vec<Vec<Vec<u8>>> {
    let enc = dict.map(|d| EncoderDictionary::copy(d, 19));
    batches
        .par_iter()
        .map(|b| {
            let mut c = match &enc {
                Some(d) => Compressor::with_prepared_dictionary(d),
                None => Compressor::new(3),
            }
            .expect("a zstd compression context");
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).expect("checksum flag");
            b.iter().map(|&i| c.compress(&structured_record(u64::from(i), rec)).expect("compress")).collect()
        })
        .collect()
}

/// `len` bytes starting `skew` bytes past a 4 KiB boundary, inside a vector that owns them (safe
/// alignment: the vector is over-allocated and the slice starts where the address is right).
pub struct PageAligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageAligned {
    /// A zeroed buffer of `len` bytes, `skew` bytes past a page boundary.
    pub fn new(len: usize, skew: usize) -> PageAligned {
        let buf = vec![0u8; len + 8192];
        let start = buf.as_ptr().align_offset(4096) + skew;
        PageAligned { buf, start, len }
    }

    /// The buffer.
    pub fn slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// Where a contender's destination buffer starts.
#[derive(Clone, Copy)]
pub enum Dst {
    /// At a page boundary.
    Page,
    /// Half a page past one: as far from the short-distance hazard as an offset gets.
    HalfPage,
    /// Wherever the allocator puts a `Vec`.
    Vec,
}

/// A destination buffer of `len` bytes placed as a [`Dst`] says.
pub enum DstBuf {
    /// At a page boundary plus a skew.
    Aligned(PageAligned),
    /// A plain vector.
    Vec(Vec<u8>),
}

impl DstBuf {
    /// A zeroed buffer of `len` bytes placed as `at` says.
    pub fn new(at: Dst, len: usize) -> DstBuf {
        match at {
            Dst::Page => DstBuf::Aligned(PageAligned::new(len, 0)),
            Dst::HalfPage => DstBuf::Aligned(PageAligned::new(len, 2048)),
            Dst::Vec => DstBuf::Vec(vec![0u8; len]),
        }
    }

    /// The buffer.
    pub fn slice(&mut self) -> &mut [u8] {
        match self {
            DstBuf::Aligned(a) => a.slice(),
            DstBuf::Vec(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_windows_are_consecutive_and_in_range() {
        let b = sequential_batches(1000, 256, 5);
        assert_eq!(b[0][0], 0);
        assert_eq!(b[1][0], 256);
        assert_eq!(b[3][0], 0);
        assert!(b.iter().flatten().all(|&i| i < 1000));
    }

    /// The workloads are the bytes `loaderx bench` and the criterion benches have always
    /// measured (hashes taken from their former copies, FNV-1a over the bytes in order, as core's
    /// `hash64`): a change here makes old figures incomparable with new ones.
    #[test]
    fn workloads_are_pinned() {
        use loaderx_core::format::hash64;

        let mut bytes = Vec::new();
        for id in [0u64, 1, 2, 41, 19_999] {
            for len in [4096usize, 12 << 10, 128 << 10, 1000] {
                bytes.extend(structured_record(id, len));
            }
        }
        assert_eq!(hash64(&bytes), 0x76f3_782e_72d3_6481, "structured_record changed");
        let batches =
            random_batches(42, 20_000, 256, 16).into_iter().chain(sequential_batches(2000, 256, 16));
        let bytes: Vec<u8> = batches.flatten().flat_map(u32::to_le_bytes).collect();
        assert_eq!(hash64(&bytes), 0x9553_5a77_6cfa_0b48, "random_batches or sequential_batches changed");
        let bytes: Vec<u8> = [0u64, 1, 5460, 5461, 19_999]
            .into_iter()
            .flat_map(|i| structured_f32(i, 3072))
            .flat_map(|x| x.to_bits().to_le_bytes())
            .collect();
        assert_eq!(hash64(&bytes), 0xed05_be6e_bcd0_f60b, "structured_f32 changed");
    }

    #[test]
    fn parallel_blocks_are_the_records_in_order() {
        let recs = block(3, 9, 100);
        assert_eq!(recs.len(), 6);
        for (k, r) in recs.iter().enumerate() {
            assert_eq!(*r, structured_record(3 + k as u64, 100));
        }
    }

    #[test]
    fn the_f32_dataset_holds_the_f32_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        write_structured_f32(&path, 16, blocks(10, 64, 3 * 64)).unwrap();
        let source = loaderx_core::DenseSource::open(&path).unwrap();
        assert_eq!(source.len(), 10);
        let got = source.typed::<f32>().unwrap().get_vec(&[0, 4, 9]).unwrap();
        let want: Vec<f32> = [0u64, 4, 9].iter().flat_map(|&i| structured_f32(i, 16)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn frames_decode_to_the_records() {
        let batches = vec![vec![0u32, 5], vec![7]];
        let frames = zstd_frames(300, &batches, None);
        assert_eq!(frames.len(), 2);
        let mut dc = zstd::bulk::Decompressor::new().unwrap();
        for (b, fs) in batches.iter().zip(&frames) {
            for (&i, f) in b.iter().zip(fs) {
                assert_eq!(dc.decompress(f, 300).unwrap(), structured_record(u64::from(i), 300));
            }
        }
    }

    #[test]
    fn blocks_cover_every_record_once() {
        let b = blocks(10, 3, 7);
        assert_eq!(b, vec![(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]);
    }
}
