//! What a store holds and whether it is intact: [`Store::stats`] and [`Store::verify`].

use std::fs;

use rayon::prelude::*;

use super::Store;
use super::files::chunk_path;
use crate::format::{Codec, Header};
use crate::sys::fill_vec;
use crate::{Error, Result};

/// Records stored under each codec.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodecCounts {
    /// Stored as is (including records that did not shrink).
    pub raw: u64,
    /// Plain zstd.
    pub zstd: u64,
    /// zstd with the store's dictionary.
    pub zstd_dict: u64,
}

/// Space accounting of a store, from [`Store::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Number of records.
    pub length: u64,
    /// Sum of the records' original sizes.
    pub logical_bytes: u64,
    /// Sum of the records' stored sizes: what compaction would keep.
    pub live_bytes: u64,
    /// Bytes used in chunk files up to the write position. `chunk_bytes - live_bytes` is an upper
    /// bound on what compaction reclaims (up to one record per chunk is slack at its end).
    pub chunk_bytes: u64,
    /// Number of chunk files.
    pub chunks: u32,
    /// Size of the dictionary, 0 without one.
    pub dict_bytes: u64,
    /// Records per codec.
    pub codecs: CodecCounts,
}

/// What [`Store::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Records checked.
    pub checked: u64,
    /// Every record that is not intact, with the reason.
    pub bad: Vec<(u32, Error)>,
}

impl Store {
    /// Length, live and chunk bytes, and records per codec.
    ///
    /// # Errors
    /// [`Error::Io`] when a chunk file cannot be inspected.
    pub fn stats(&self) -> Result<StoreStats> {
        let h = self.meta.header();
        let mut s = StoreStats {
            length: u64::from(h.length),
            chunks: u32::from(h.tail_chunk) + 1,
            ..Default::default()
        };
        for i in 0..h.length {
            let l = self.meta.entry(i);
            s.logical_bytes += u64::from(l.logic_length);
            s.live_bytes += u64::from(l.phys_length);
            match Codec::from_tag(l.codec) {
                Some(Codec::Raw) => s.codecs.raw += 1,
                Some(Codec::Zstd) => s.codecs.zstd += 1,
                Some(Codec::ZstdDict) => s.codecs.zstd_dict += 1,
                None => {}
            }
        }
        for id in 0..h.tail_chunk {
            let p = chunk_path(&self.dir, id);
            s.chunk_bytes += fs::metadata(&p).map_err(|e| Error::io("stat", &p, e))?.len();
        }
        s.chunk_bytes += u64::from(h.tail_offset);
        s.dict_bytes = self.dict.get().map_or(0, |d| d.raw.len() as u64);
        Ok(s)
    }

    /// Reads and decodes every record, checking each table entry against the committed tail and
    /// each decoded length against the table. Nothing is changed.
    ///
    /// Every damaged record is listed; on a badly damaged store that is a long list, which
    /// [`Store::verify_each`] streams instead.
    ///
    /// # Errors
    /// Only for failures that stop the scan as a whole; bad records are listed in the report.
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut bad = Vec::new();
        let checked = self.verify_each(|idx, e| bad.push((idx, e)))?;
        Ok(VerifyReport { checked, bad })
    }

    /// [`Store::verify`] that hands each damaged record to `f`, in index order, as the scan
    /// finds it (records are checked in parallel, a block at a time), and returns the number of
    /// records checked. Memory stays bounded however many records are damaged.
    ///
    /// # Errors
    /// Only for failures that stop the scan as a whole.
    pub fn verify_each(&self, mut f: impl FnMut(u32, Error)) -> Result<u64> {
        /// Records checked between two hand-overs to `f`.
        const BLOCK: u32 = 1 << 16;
        let h = self.meta.header();
        let mut first = 0u32;
        while first < h.length {
            let end = first.saturating_add(BLOCK).min(h.length);
            let ids: Vec<u32> = (first..end).collect();
            let bad: Vec<Vec<(u32, Error)>> =
                ids.par_chunks(1024).map(|ids| self.verify_records(&h, ids)).collect();
            for (idx, e) in bad.into_iter().flatten() {
                f(idx, e);
            }
            first = end;
        }
        Ok(u64::from(h.length))
    }

    /// The damaged records among `ids`, with what is wrong with each.
    fn verify_records(&self, h: &Header, ids: &[u32]) -> Vec<(u32, Error)> {
        let mut bad = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        for &idx in ids {
            let loc = self.meta.entry(idx);
            let codec = match loc.validate(h) {
                Ok(c) => c,
                Err(r) => {
                    bad.push((idx, self.record_error(idx, format!("bad table entry: {r}"))));
                    continue;
                }
            };
            let one = fill_vec(&mut buf, loc.logic_length as usize, |out| {
                self.read_shard(&[idx], &[(loc, codec)], out)
            });
            if let Err(e) = one {
                bad.push((idx, e));
            }
        }
        bad
    }
}
