//! The fixed-stride gather of a dense dataset ([`Store::gather_fixed`]): one pass that reads each
//! record's index entry a few records ahead of its copy, so the index's cache misses and the
//! records' overlap the copies instead of stalling them.
//!
//! A random batch costs two cache misses per record: its index entry (16 bytes somewhere in a v1
//! table of up to 256 MiB, 32 in a v2 index) and its bytes. Reading every entry first and copying after (the
//! variable-length gathers do, they need the sizes up front) serialises the two phases; here they
//! overlap, a block of [`BLOCK`] records at a time, each stage a tight loop: a record's entry is
//! prefetched two blocks before its copy, read and checked one block before it (its bytes
//! prefetched then), and copied. Records adjacent on disk (a sequential batch) are copied as one
//! run.

use std::sync::Arc;

use super::Store;
use super::codec::Decoder;
use super::decode::{Stored, decode_record};
use super::gather::{Located, RecordIndex, stored_range};
use super::index::View;
use super::pool::{Parallelism, shard_count};
use super::table::Table;
use crate::format::Codec;
use crate::format::v2::Entry;
use crate::sys::{Destination, MappedFile, Summer, prefetch, prefetch_lanes};
use crate::{Error, Result};

use crate::sys::tuning::{COMPRESSED_WEIGHT, FIXED_BLOCK as BLOCK, FIXED_SHARD_MIN_BYTES as SHARD_MIN_BYTES};

/// The chunk mappings a shard reads through, cached by chunk id (the last two used: a batch of a
/// store over two chunks does not remap at every boundary).
struct Views<'s> {
    store: &'s Store,
    slots: [Option<(u32, Arc<MappedFile>)>; 2],
    /// Verified reads: records are copied and summed in one pass, through three lanes.
    verify: bool,
}

impl Views<'_> {
    /// The stored bytes of record `l`; `Err` naming the record when its chunk is shorter.
    #[inline]
    fn get(&mut self, l: &Located) -> Result<&[u8]> {
        let store = self.store;
        let map = self.range(l, l.entry.end())?;
        stored_range(map, &l.entry).ok_or_else(|| store.truncated_error(l))
    }

    /// The mapping of `l`'s chunk covering at least `end` bytes.
    fn range(&mut self, l: &Located, end: u64) -> Result<&MappedFile> {
        let id = l.entry.chunk;
        let hit = self.slots.iter().position(|s| matches!(s, Some((c, m)) if *c == id && m.len() >= end));
        let slot = match hit {
            Some(i) => i,
            None => {
                let map = self.store.chunk_view(id, end)?.ok_or_else(|| self.store.truncated_error(l))?;
                // Keep the most recently used in slot 0.
                self.slots.swap(0, 1);
                self.slots[0] = Some((id, map));
                0
            }
        };
        Ok(&self.slots[slot].as_ref().expect("the slot was just filled or found").1)
    }

    /// Hints the CPU to fetch a record's bytes if its chunk is mapped already (never maps: a
    /// hint is not worth a lock).
    #[inline]
    fn prefetch(&self, e: &Entry) {
        for (id, map) in self.slots.iter().flatten() {
            if *id == e.chunk {
                if let Some(src) = stored_range(map, e) {
                    if self.verify { prefetch_lanes(src) } else { prefetch(src) }
                }
                return;
            }
        }
    }
}

impl Store {
    /// [`Store::gather_fixed`] into a gather destination, possibly uninitialised memory, split
    /// over the pool or not as `par` says.
    pub(crate) fn gather_fixed_to<I: RecordIndex>(
        &self,
        indices: &[I],
        record_len: usize,
        dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        if Some(dst.remaining()) != indices.len().checked_mul(record_len) {
            return Err(Error::InvalidArgument(format!(
                "gather of {} records of {record_len} bytes needs {} bytes, got {}",
                indices.len(),
                indices.len().saturating_mul(record_len),
                dst.remaining()
            )));
        }
        self.readable()?;
        let len = self.len();
        if len == 0 {
            return match indices.first() {
                Some(&i) => Err(self.check_index(0, i, 0).expect_err("nothing is below 0")),
                None => Ok(()),
            };
        }
        let bytes = dst.remaining();
        let heat = match self.index.view(len)? {
            View::V1(m) => {
                let heat = self.prepare_reads(m, len, indices);
                self.gather_fixed_in(m, len, indices, record_len, dst, par)?;
                heat
            }
            View::V2(v) => {
                let heat = self.prepare_reads(&v, len, indices);
                self.gather_fixed_in(&v, len, indices, record_len, dst, par)?;
                heat
            }
            View::Compact(c) => {
                let heat = self.prepare_reads(&c, len, indices);
                self.gather_fixed_in(&c, len, indices, record_len, dst, par)?;
                heat
            }
            View::Fixed(f) => {
                let heat = self.prepare_reads(&f, len, indices);
                if self.opts.verify_reads {
                    self.check_blocks(&f, len, indices)?;
                }
                if f.stride.record_size == record_len as u64 {
                    self.gather_stride(&f, len, indices, dst, par)?;
                } else {
                    // Names the first record whose length is not the one asked for.
                    self.gather_fixed_in(&f, len, indices, record_len, dst, par)?;
                }
                heat
            }
        };
        self.residency.finish(heat, bytes);
        Ok(())
    }

    fn gather_fixed_in<T: Table + Sync, I: RecordIndex>(
        &self,
        table: &T,
        len: u64,
        indices: &[I],
        record_len: usize,
        mut dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        // The plan weighs the batch by its first record's codec: a dataset is written with one
        // codec (its records that did not shrink aside), and reading every entry first is the
        // pass this gather exists to avoid.
        let weight = match indices.first().and_then(|i| i.to_u64()) {
            Some(i) if i < len && table.get(i).codec != Codec::Raw as u8 => COMPRESSED_WEIGHT,
            _ => 1,
        };
        let work = dst.remaining().saturating_mul(weight);
        let shards = shard_count(par, indices.len(), work, SHARD_MIN_BYTES);
        if shards == 1 {
            return self.gather_fixed_shard(table, len, indices, record_len, dst);
        }
        let per = indices.len().div_ceil(shards);
        let parts: Vec<(&[I], Destination<'_>)> =
            indices.chunks(per).map(|ix| (ix, dst.split_off(ix.len() * record_len))).collect();
        super::pool::run_shards(parts, par, |(ix, d)| self.gather_fixed_shard(table, len, ix, record_len, d))
    }

    /// One shard of [`Store::gather_fixed_to`], on the calling thread: the pipelined pass, a
    /// block of [`BLOCK`] records at a time. While block `b` is copied, block `b + 1`'s entries
    /// (prefetched one block earlier) are read and checked in one tight loop and its records
    /// prefetched, and block `b + 2`'s entries prefetched.
    fn gather_fixed_shard<T: Table, I: RecordIndex>(
        &self,
        table: &T,
        len: u64,
        indices: &[I],
        record_len: usize,
        mut dst: Destination<'_>,
    ) -> Result<()> {
        dst.near_copy(self.opts.near_copy);
        let block = |b: usize| indices.get(b * BLOCK..((b + 1) * BLOCK).min(indices.len()));
        let prefetch_entries = |ix: &[I]| {
            for &i in ix {
                table.prefetch(i.to_u64().unwrap_or(u64::MAX));
            }
        };
        let blocks = indices.len().div_ceil(BLOCK);
        let verify = T::CHECKSUMS && self.verifies_reads();
        let mut views = Views { store: self, slots: [None, None], verify };
        let mut summer = Summer::default();
        let mut decoder = Decoder::new(self.dict.get().map(|d| &**d));
        let mut cur = [Entry::default(); BLOCK];
        let mut next = [Entry::default(); BLOCK];
        prefetch_entries(&indices[..indices.len().min(2 * BLOCK)]);
        if let Some(first) = block(0) {
            self.resolve_block(table, len, first, record_len, verify, &mut cur)?;
            for e in &cur[..first.len()] {
                views.prefetch(e);
            }
        }
        for b in 0..blocks {
            if let Some(following) = block(b + 1) {
                self.resolve_block(table, len, following, record_len, verify, &mut next)?;
                for e in &next[..following.len()] {
                    views.prefetch(e);
                }
            }
            prefetch_entries(block(b + 2).unwrap_or_default());
            let this = block(b).unwrap_or_default();
            self.copy_block(
                this,
                &cur[..this.len()],
                verify,
                &mut views,
                &mut summer,
                &mut decoder,
                &mut dst,
            )?;
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(())
    }

    /// Reads the entries of `block` into `out` and checks them in one branch-light loop; on any
    /// failure, finds the first bad one and names it.
    #[inline]
    fn resolve_block<T: Table, I: RecordIndex>(
        &self,
        table: &T,
        len: u64,
        block: &[I],
        record_len: usize,
        verify: bool,
        out: &mut [Entry; BLOCK],
    ) -> Result<()> {
        let mut bad = false;
        for (o, &i) in out.iter_mut().zip(block) {
            // An index past the end (or negative) reads entry 0 (there is one: the store is not
            // empty) and is reported below.
            let idx = i.to_u64().unwrap_or(u64::MAX);
            let inside = idx < len;
            let e = table.get(if inside { idx } else { 0 });
            bad |= !inside | !T::fits(&e, record_len);
            *o = e;
        }
        if verify {
            for &i in block {
                bad |= table.get_checked(i.to_u64().unwrap_or(0).min(len - 1)).is_err();
            }
        }
        if !bad {
            return Ok(());
        }
        for (pos, &i) in block.iter().enumerate() {
            let idx = self.check_index(pos, i, len)?;
            let l = self.locate(table, idx, verify)?;
            if l.entry.logical as usize != record_len {
                return Err(self.record_error(
                    idx,
                    format!(
                        "record is {} bytes, not the {record_len} bytes each record of this gather \
                         holds (a dataset's item size, or the record_len asked)",
                        l.entry.logical
                    ),
                ));
            }
            if !T::fits(&l.entry, record_len) {
                return Err(self.record_error(idx, "bad index entry: past the format's limits".to_string()));
            }
        }
        unreachable!("the fast check refused a block whose every entry passes the slow one")
    }

    /// Copies (or decodes) the records of one checked block into `dst`; raw records lying back to
    /// back in one chunk go as one copy (each checked against its checksum when `verify`).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn copy_block<'d, I: RecordIndex>(
        &'d self,
        block: &[I],
        entries: &[Entry],
        verify: bool,
        views: &mut Views<'_>,
        summer: &mut Summer,
        decoder: &mut Decoder<'d>,
        dst: &mut Destination<'_>,
    ) -> Result<()> {
        let located = |k: usize| {
            let e = entries[k];
            Located {
                index: block[k].to_u64().unwrap_or_default(),
                entry: e,
                codec: Codec::from_tag(e.codec).unwrap_or(Codec::Raw),
            }
        };
        let mut k = 0;
        while k < entries.len() {
            let e = entries[k];
            if e.codec == Codec::Raw as u8 {
                let mut run = 1;
                let mut end = e.end();
                while let Some(next) = entries.get(k + run) {
                    if next.codec != Codec::Raw as u8 || next.chunk != e.chunk || next.offset != end {
                        break;
                    }
                    end = next.end();
                    run += 1;
                }
                // An empty run maps nothing: its records (all empty) are only checked.
                let src: &[u8] = if end > e.offset {
                    let map = views.range(&located(k), end)?;
                    &map.bytes()[e.offset as usize..end as usize]
                } else {
                    &[]
                };
                if verify {
                    // Each record summed as it is copied; the destination of a record that
                    // fails holds no usable data (the gather's contract on error).
                    let mut at = 0;
                    for (j, e) in entries.iter().enumerate().skip(k).take(run) {
                        let n = e.stored as usize;
                        let rec =
                            Stored { bytes: &src[at..at + n], codec: Codec::Raw, logical: n, crc: e.crc };
                        decode_record(rec, true, decoder, Some(summer), dst)
                            .map_err(|err| self.record_failure(err, &located(j)))?;
                        at += n;
                    }
                } else {
                    dst.copy(src);
                }
                k += run;
                continue;
            }
            let l = located(k);
            let src = views.get(&l)?;
            // A handle opened before the writer trained the dictionary loads it now (it is
            // durable before any record that needs it is committed). Each shard's decoder is
            // made again once the dictionary is there: another shard may have loaded it after
            // this one's decoder was made without it.
            if l.codec == Codec::ZstdDict && !decoder.has_dictionary() {
                if self.dict.get().is_none() {
                    self.load_dictionary()?;
                }
                *decoder = Decoder::new(self.dict.get().map(|d| &**d));
            }
            decode_record(l.stored(src), verify, decoder, Some(summer), dst)
                .map_err(|err| self.record_failure(err, &l))?;
            k += 1;
        }
        Ok(())
    }
}
