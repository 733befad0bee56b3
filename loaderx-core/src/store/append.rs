//! [`Store::append`]: compress in parallel, place serially, flush in parallel, commit in order.

use std::ops::Range;

use rayon::prelude::*;

use super::Store;
use super::chunk::Placement;
use super::codec::{self, Dictionary, Encoded, Encoder};
use super::files::{DICT_FILE, sync_dir, write_atomic};
use crate::format::{Codec, MAX_RECORD_SIZE, MAX_RECORDS, RecordLoc, dict};
use crate::{Error, Result};

/// Write pieces are at most this large, so a big append is written by several threads at once.
const WRITE_PIECE: usize = 8 << 20;
/// Records sampled to train a dictionary ([`Store::train_dictionary`]).
const DICT_SAMPLES: usize = 4096;

/// A stored or logical record length as the table holds it: records are at most
/// [`MAX_RECORD_SIZE`] and a compressed frame is kept only when smaller than its record, both
/// checked before placement, so this never saturates.
fn stored_len(len: usize) -> u32 {
    debug_assert!(len <= MAX_RECORD_SIZE);
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl Store {
    /// Appends `records` under `codec` and returns their indices.
    ///
    /// Compression runs in parallel; a record that does not shrink is stored raw. `ZstdDict`
    /// needs the store's dictionary: train it first with [`Store::train_dictionary`] (the
    /// converters do) or put a `zstd --train` dictionary in place as `dict.zr`. The whole batch
    /// is validated before anything is written, and committed in order: record bytes durable,
    /// then table entries, then the length, published atomically. A crash leaves a prefix of
    /// what was appended.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::MissingDictionary`] for `ZstdDict` on a store without a
    /// dictionary; [`Error::RecordTooLarge`] naming the batch position of a record over 1 MiB;
    /// [`Error::StoreFull`]; [`Error::DiskFull`] or [`Error::Io`] naming the file. Nothing of a
    /// failed batch is visible.
    pub fn append<R: AsRef<[u8]> + Sync>(&self, records: &[R], codec: Codec) -> Result<Range<u32>> {
        let writer = self.writer()?;
        if let Some((i, r)) = records.iter().enumerate().find(|(_, r)| r.as_ref().len() > MAX_RECORD_SIZE) {
            return Err(Error::RecordTooLarge {
                path: self.dir.clone(),
                index: i as u64,
                size: r.as_ref().len() as u64,
                limit: MAX_RECORD_SIZE as u64,
            });
        }
        let _g = writer.append.lock().unwrap_or_else(|e| e.into_inner());
        let mut h = self.meta.header();
        let n = records.len() as u64;
        if u64::from(h.length) + n > u64::from(MAX_RECORDS) {
            return Err(Error::StoreFull {
                path: self.dir.clone(),
                len: u64::from(h.length),
                adding: n,
                limit: u64::from(MAX_RECORDS),
            });
        }
        // Training is explicit ([`Store::train_dictionary`]): a dictionary is a snapshot of the
        // data, chosen by whoever knows when the data is final.
        if codec == Codec::ZstdDict && self.dict.get().is_none() {
            self.load_dictionary()?;
            if self.dict.get().is_none() {
                return Err(Error::MissingDictionary { path: self.dir.clone() });
            }
        }
        if records.is_empty() {
            return Ok(h.length..h.length);
        }
        let encoded = self.encode(records, codec)?;

        // Placement is serial: each record gets the next position ([`Placement`]).
        let full = |placed: usize| Error::StoreFull {
            path: self.dir.clone(),
            len: u64::from(h.length),
            adding: n - placed as u64,
            limit: u64::from(h.length) + placed as u64,
        };
        let mut place = Placement::new(h.tail_chunk, u64::from(h.tail_offset), self.opts.chunk_capacity);
        let mut locs = Vec::with_capacity(records.len());
        for (i, (r, e)) in records.iter().zip(&encoded).enumerate() {
            let (len, tag) = match e {
                Encoded::Raw => (r.as_ref().len(), Codec::Raw),
                Encoded::Packed(b, c) => (b.len(), *c),
            };
            let (chunk, offset) = place.place(len as u64).ok_or_else(|| full(i))?;
            locs.push(RecordLoc {
                offset,
                phys_length: stored_len(len),
                logic_length: stored_len(r.as_ref().len()),
                chunk_id: chunk,
                codec: tag as u8,
                reserved: 0,
            });
        }
        let (chunk, off) = place.frontier().ok_or_else(|| full(records.len()))?;

        // Flush in parallel, in pieces of consecutive records of one chunk.
        let bytes = |i: usize| -> &[u8] {
            match &encoded[i] {
                Encoded::Raw => records[i].as_ref(),
                Encoded::Packed(b, _) => b,
            }
        };
        let mut pieces: Vec<Range<usize>> = Vec::new();
        let mut start = 0;
        let mut size = 0usize;
        for i in 0..locs.len() {
            if i > start && (locs[i].chunk_id != locs[start].chunk_id || size >= WRITE_PIECE) {
                pieces.push(start..i);
                start = i;
                size = 0;
            }
            size += locs[i].phys_length as usize;
        }
        pieces.push(start..locs.len());
        pieces.par_iter().try_for_each(|p| {
            let mut buf = Vec::with_capacity(p.clone().map(|i| locs[i].phys_length as usize).sum());
            for i in p.clone() {
                buf.extend_from_slice(bytes(i));
            }
            let first = locs[p.start];
            self.chunks.write_all(first.chunk_id, u64::from(first.offset), &buf)
        })?;
        let touched: Vec<u16> = (h.tail_chunk..=chunk).collect();
        touched.par_iter().try_for_each(|&id| self.chunks.sync(id))?;
        if chunk != h.tail_chunk {
            sync_dir(&self.dir)?;
        }

        // Then the table, then the length.
        for (k, loc) in locs.iter().enumerate() {
            self.meta.set_entry(h.length + k as u32, *loc);
        }
        self.meta.flush_entries(h.length, h.length + n as u32, &self.meta_path)?;
        let first = h.length;
        h.tail_chunk = chunk;
        h.tail_offset = off;
        h.length += n as u32;
        self.meta.set_header(h);
        self.meta.flush_header(&self.meta_path)?;
        Ok(first..h.length)
    }

    fn encode<R: AsRef<[u8]> + Sync>(&self, records: &[R], codec: Codec) -> Result<Vec<Encoded>> {
        if codec == Codec::Raw {
            return Ok(records.iter().map(|_| Encoded::Raw).collect());
        }
        let dict = self.dict.get().map(|d| &**d);
        // Contiguous blocks, one compression context per block.
        let block = records.len().div_ceil(rayon::current_num_threads()).max(1);
        let blocks: Vec<Vec<Encoded>> = records
            .par_chunks(block)
            .map(|blk| {
                let mut enc = Encoder::new(codec, dict)?;
                blk.iter().map(|r| enc.encode(r.as_ref())).collect::<std::io::Result<Vec<_>>>()
            })
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io("compress", &self.dir, e))?;
        Ok(blocks.into_iter().flatten().collect())
    }

    /// Trains the `zstd_dict` dictionary on `samples` (record bytes) and stores it as `dict.zr`.
    ///
    /// Returns `false` when the store already has a dictionary or there is too little data to
    /// train one. Train once the data is final: the dictionary is a snapshot of it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Io`] naming `dict.zr`.
    pub fn train_dictionary<R: AsRef<[u8]>>(&self, samples: &[R]) -> Result<bool> {
        let writer = self.writer()?;
        let _g = writer.append.lock().unwrap_or_else(|e| e.into_inner());
        self.train_locked(&codec::sample(samples, DICT_SAMPLES))
    }

    fn train_locked(&self, samples: &[&[u8]]) -> Result<bool> {
        if self.dict.get().is_some() {
            return Ok(false);
        }
        let Some(raw) = codec::train(samples, self.opts.dict_cap) else { return Ok(false) };
        write_atomic(&self.dir, DICT_FILE, &dict::encode(&raw))?;
        let _ = self.dict.set(Dictionary::new(raw));
        Ok(true)
    }
}
