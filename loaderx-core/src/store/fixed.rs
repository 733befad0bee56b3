//! The fixed-stride gather of a dense dataset ([`Store::gather_fixed`]): one pass that reads each
//! record's table entry a few records ahead of its copy, so the table's cache misses and the
//! records' overlap the copies instead of stalling them.
//!
//! A random batch costs two cache misses per record: its table entry (16 bytes somewhere in a
//! table of up to 256 MiB) and its bytes. Reading every entry first and copying after (the
//! variable-length gathers do, they need the sizes up front) serialises the two phases; here they
//! overlap, a block of [`BLOCK`] records at a time, each stage a tight loop: a record's entry is
//! prefetched two blocks before its copy, read and checked one block before it (its bytes
//! prefetched then), and copied. Records adjacent on disk (a sequential batch) are copied as one
//! run.

use std::sync::Arc;

use super::Store;
use super::codec::Decoder;
use super::gather::{Parallelism, shard_count};
use crate::format::{Codec, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, RecordLoc};
use crate::sys::{Destination, MappedFile, prefetch};
use crate::{Error, Result};

/// Records per pipeline stage: entries are prefetched two blocks ahead of the copy, read and
/// checked (and their records prefetched) one block ahead.
const BLOCK: usize = 16;
/// A gather shard copies at least this many bytes (or decodes an eighth of them): below it a
/// hand-off to another thread costs more than the work it moves.
const SHARD_MIN_BYTES: usize = 64 << 10;
/// How much more a compressed byte costs to gather than a raw one, for the shard plan: zstd
/// decodes at a tenth to a twentieth of the speed of a copy.
const COMPRESSED_WEIGHT: usize = 8;

/// The chunk mappings a shard reads through, cached by chunk id (the last two used: a batch of a
/// store over two chunks does not remap at every boundary).
struct Views<'s> {
    store: &'s Store,
    slots: [Option<(u16, Arc<MappedFile>)>; 2],
}

impl Views<'_> {
    /// The bytes `start..end` of chunk `id`; `Err` naming the record when the chunk is shorter.
    fn get(&mut self, id: u16, start: usize, end: usize, idx: u32) -> Result<&[u8]> {
        let hit =
            self.slots.iter().position(|s| matches!(s, Some((c, m)) if *c == id && m.bytes().len() >= end));
        let slot = match hit {
            Some(i) => i,
            None => {
                let map = self.store.chunks.view(id, end as u64)?.ok_or_else(|| Error::CorruptRecord {
                    path: self.store.chunks.path(id),
                    index: u64::from(idx),
                    reason: format!("truncated chunk: the record needs bytes {start}..{end} of it"),
                })?;
                // Keep the most recently used in slot 0.
                self.slots.swap(0, 1);
                self.slots[0] = Some((id, map));
                0
            }
        };
        let (_, map) = self.slots[slot].as_ref().expect("the slot was just filled or found");
        Ok(&map.bytes()[start..end])
    }

    /// Hints the CPU to fetch a record's bytes if its chunk is mapped already (never maps: a
    /// hint is not worth a lock).
    fn prefetch(&self, loc: &RecordLoc) {
        let (start, end) = (loc.offset as usize, loc.offset as usize + loc.phys_length as usize);
        for (id, map) in self.slots.iter().flatten() {
            if *id == loc.chunk_id {
                if let Some(src) = map.bytes().get(start..end) {
                    prefetch(src);
                }
                return;
            }
        }
    }
}

impl Store {
    /// [`Store::gather_fixed`] into a gather destination, possibly uninitialised memory, split
    /// over the pool or not as `par` says.
    pub(crate) fn gather_fixed_to(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
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
        // The plan weighs the batch by its first record's codec: a dataset is written with one
        // codec (its records that did not shrink aside), and reading every entry first is the
        // pass this gather exists to avoid.
        let weight = match indices.first() {
            Some(&i) if i < self.len() && self.meta.entry(i).codec != Codec::Raw as u8 => COMPRESSED_WEIGHT,
            _ => 1,
        };
        let work = dst.remaining().saturating_mul(weight);
        let shards = shard_count(par, indices.len(), work, SHARD_MIN_BYTES);
        if shards == 1 {
            return self.gather_fixed_shard(indices, record_len, dst);
        }
        let per = indices.len().div_ceil(shards);
        let parts: Vec<(&[u32], Destination<'_>)> =
            indices.chunks(per).map(|ix| (ix, dst.split_off(ix.len() * record_len))).collect();
        super::gather::run_shards(parts, |(ix, d)| self.gather_fixed_shard(ix, record_len, d))
    }

    /// One shard of [`Store::gather_fixed_to`], on the calling thread: the pipelined pass, a
    /// block of [`BLOCK`] records at a time. While block `b` is copied, block `b + 1`'s entries
    /// (prefetched one block earlier) are read and checked in one tight loop and its records
    /// prefetched, and block `b + 2`'s entries prefetched.
    fn gather_fixed_shard(&self, indices: &[u32], record_len: usize, mut dst: Destination<'_>) -> Result<()> {
        let block = |b: usize| indices.get(b * BLOCK..((b + 1) * BLOCK).min(indices.len()));
        let blocks = indices.len().div_ceil(BLOCK);
        let mut views = Views { store: self, slots: [None, None] };
        let mut decoder: Option<Decoder<'_>> = None;
        let mut cur = [RecordLoc::default(); BLOCK];
        let mut next = [RecordLoc::default(); BLOCK];
        for &idx in indices.iter().take(2 * BLOCK) {
            self.meta.prefetch_entry(idx);
        }
        if let Some(first) = block(0) {
            self.resolve_block(first, record_len, &mut cur)?;
            for loc in &cur[..first.len()] {
                views.prefetch(loc);
            }
        }
        for b in 0..blocks {
            if let Some(following) = block(b + 1) {
                self.resolve_block(following, record_len, &mut next)?;
                for loc in &next[..following.len()] {
                    views.prefetch(loc);
                }
            }
            for &idx in block(b + 2).unwrap_or_default() {
                self.meta.prefetch_entry(idx);
            }
            let this = block(b).unwrap_or_default();
            self.copy_block(this, &cur[..this.len()], record_len, &mut views, &mut decoder, &mut dst)?;
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(())
    }

    /// Reads the entries of `block` into `out` and checks them in one branch-light loop; on any
    /// failure, finds the first bad one and names it.
    #[inline]
    fn resolve_block(&self, block: &[u32], record_len: usize, out: &mut [RecordLoc; BLOCK]) -> Result<()> {
        let len = self.len();
        let mut bad = false;
        for (o, &idx) in out.iter_mut().zip(block) {
            // An index past the end reads entry 0 (valid memory) and is reported below.
            let inside = idx < len;
            let loc = self.meta.entry(if inside { idx } else { 0 });
            bad |= !inside | !entry_fits(&loc, record_len);
            *o = loc;
        }
        if !bad {
            return Ok(());
        }
        for (&idx, loc) in block.iter().zip(out.iter()) {
            if idx >= len {
                return Err(self.index_error(idx, len));
            }
            loc.validate_limits().map_err(|r| self.record_error(idx, format!("bad table entry: {r}")))?;
            if loc.logic_length as usize != record_len {
                return Err(self.record_error(
                    idx,
                    format!(
                        "record is {} bytes; the dataset's records are {record_len} bytes",
                        loc.logic_length
                    ),
                ));
            }
        }
        unreachable!("entry_fits refused an entry that validate_limits accepts")
    }

    /// Copies (or decodes) the records of one checked block into `dst`; raw records lying back to
    /// back in one chunk go as one copy.
    #[inline]
    fn copy_block<'d>(
        &'d self,
        block: &[u32],
        locs: &[RecordLoc],
        record_len: usize,
        views: &mut Views<'_>,
        decoder: &mut Option<Decoder<'d>>,
        dst: &mut Destination<'_>,
    ) -> Result<()> {
        let mut k = 0;
        while k < locs.len() {
            let loc = locs[k];
            let idx = block[k];
            let start = loc.offset as usize;
            let mut end = start + loc.phys_length as usize;
            if loc.codec == Codec::Raw as u8 {
                let mut run = 1;
                while let Some(next) = locs.get(k + run) {
                    if next.codec != Codec::Raw as u8
                        || next.chunk_id != loc.chunk_id
                        || next.offset as usize != end
                    {
                        break;
                    }
                    end += next.phys_length as usize;
                    run += 1;
                }
                if end > start {
                    dst.copy(views.get(loc.chunk_id, start, end, idx)?);
                }
                k += run;
                continue;
            }
            let codec = Codec::from_tag(loc.codec).expect("resolve_block checked the tag");
            let src = views.get(loc.chunk_id, start, end, idx)?;
            // A handle opened before the writer trained the dictionary loads it now (it is
            // durable before any record that needs it is committed).
            if codec == Codec::ZstdDict && self.dict.get().is_none() {
                self.load_dictionary()?;
                *decoder = None;
            }
            let dec = decoder.get_or_insert_with(|| Decoder::new(self.dict.get().map(|d| &**d)));
            dec.decode(codec, src, dst, record_len).map_err(|e| self.decode_error(e, idx, loc))?;
            k += 1;
        }
        Ok(())
    }
}

/// Whether an entry passes every check of `RecordLoc::validate_limits` and holds `record_len`
/// bytes, as one branch-free expression (the slow path names what failed).
#[inline(always)]
fn entry_fits(loc: &RecordLoc, record_len: usize) -> bool {
    let end = u64::from(loc.offset) + u64::from(loc.phys_length);
    let raw = loc.codec == Codec::Raw as u8;
    (loc.codec <= Codec::ZstdDict as u8)
        & (loc.logic_length as usize == record_len)
        & (record_len <= MAX_RECORD_SIZE)
        & (u32::from(loc.chunk_id) < MAX_CHUNKS)
        & (end <= MAX_CHUNK_SIZE)
        & (!raw | (loc.phys_length == loc.logic_length))
        & (raw | (loc.phys_length > 0))
}
