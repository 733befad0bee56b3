//! The fixed-stride layout's own work: record `i` lies at an offset its index gives
//! ([`Stride`]), so a batch reads no entry, and its records are checked a block at a time
//! against the crc32c per block that `index.zr` holds.
//!
//! - the gather ([`Store::gather_stride`]): each record's bytes copied from where its index puts
//!   them (adjacent records as one copy), the shards as the pipelined gather plans them;
//! - the block checksums of a commit ([`Store::block_crcs_after`]), extending the open block's;
//! - the check of the blocks a batch reads, under `verify_reads` ([`Store::check_blocks`]), and of
//!   every block, for `verify` ([`Store::verify_blocks`]);
//! - the writer's repair of the open block's checksum after a crash ([`Store::reseal_tail_block`]).
//!
//! The open block's checksum is rewritten by each commit before its count is published, so a
//! reader comparing it against the records below the count it took may see a checksum that
//! covers more of them: a mismatch in a block the writer may still extend is checked again
//! against each longer run of records present in the chunk, and only a block no such run matches
//! is damage.

use std::ops::Range;

use rayon::prelude::*;

use super::Store;
use super::gather::RecordIndex;
use super::index::FixedView;
use super::pool::{Parallelism, shard_count};
use crate::format::v2::Stride;
use crate::sys::{Destination, HINT_FAR, HINT_NEAR, HINT_NONE, MappedFile, prefetch_span};
use crate::{Error, Result};

pub(super) use crate::sys::tuning::COMBINE_FROM;
use crate::sys::tuning::{
    FIXED_SHARD_MIN_BYTES as SHARD_MIN_BYTES, PREFETCH_AHEAD_BYTES, PREFETCH_FROM_BYTES,
};

/// Blocks `verify` checks (in parallel) before handing their failures over: bounds what it holds
/// (a block's failure, a few hundred bytes) whatever the number damaged.
const VERIFY_WINDOW: u64 = 1 << 12;

/// How many times a reader searches the open block again while a writer keeps changing its
/// sum (each change an append) before it reports a mismatch: far more appends than land in
/// one search.
const OPEN_BLOCK_TRIES: usize = 16;

/// The checksum of records `range` (absolute indices; `first` is the index of `records[0]`),
/// extending `acc`: a long record's own checksum combined in, a short one hashed (`crcs` may be
/// empty when every record is shorter than [`COMBINE_FROM`]: none of them is read then).
pub(super) fn fold_crc(acc: u32, range: Range<u64>, first: u64, records: &[&[u8]], crcs: &[u32]) -> u32 {
    range.fold(acc, |acc, idx| {
        let k = (idx - first) as usize;
        let b = records[k];
        if b.len() >= COMBINE_FROM {
            crc32c::crc32c_combine(acc, crcs[k], b.len())
        } else {
            crc32c::crc32c_append(acc, b)
        }
    })
}

impl Store {
    /// The checksums of blocks `block_of(first)..` once `records` (with their crc32c) are
    /// appended at `first`: the open block's extended from its checksum now, the others new.
    pub(super) fn block_crcs_after(
        &self,
        stride: &Stride,
        first: u64,
        records: &[&[u8]],
        crcs: &[u32],
    ) -> Result<(u64, Vec<u32>)> {
        let n = records.len() as u64;
        let (from, to) = (stride.block_of(first), stride.block_of(first + n - 1));
        let open = self.open_block_crc(stride, first)?.map_or(0, |(_, crc)| crc);
        let sums = (from..=to)
            .into_par_iter()
            .map(|b| {
                let r = stride.block_records(b, first + n);
                let acc = if b == from { open } else { 0 };
                fold_crc(acc, r.start.max(first)..r.end, first, records, crcs)
            })
            .collect();
        Ok((from, sums))
    }

    /// The block records from `first` on would extend (one holding records before `first`), with
    /// its checksum now; `None` when `first` starts a block.
    pub(super) fn open_block_crc(&self, stride: &Stride, first: u64) -> Result<Option<(u64, u32)>> {
        let from = stride.block_of(first);
        if stride.block_records(from, first + 1).start == first {
            return Ok(None);
        }
        match self.index.view(first)? {
            super::index::View::Fixed(f) => Ok(Some((from, f.blocks.block_crc(from)))),
            _ => unreachable!("a stride belongs to a fixed-stride index"),
        }
    }

    /// The crc32c of `records` (all in one block) as the chunk holds them (`None` when the chunk
    /// is shorter).
    pub(super) fn block_sum(&self, stride: &Stride, records: Range<u64>) -> Result<Option<u32>> {
        let Some(bytes) = self.block_bytes(stride, records.clone())? else { return Ok(None) };
        Ok(Some(crc32c::crc32c(bytes.bytes_range(&records, stride))))
    }

    /// The mapping of the chunk holding `records` (all in one block), covering their bytes, or
    /// `None` when the chunk is shorter (truncated, or missing).
    pub(super) fn block_bytes(&self, stride: &Stride, records: Range<u64>) -> Result<Option<BlockBytes>> {
        let Some((chunk, start)) = stride.locate(records.start) else { return Ok(None) };
        let end = start + (records.end - records.start) * stride.record_size;
        Ok(self.chunk_view(chunk, end)?.map(|map| BlockBytes { map, chunk }))
    }

    /// Checks every block holding a record of `indices` (each once) against its checksum: what a
    /// batch of a handle with `verify_reads` does before it copies.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] naming the first record asked for in a block that does not
    /// match (or whose bytes are missing).
    pub(super) fn check_blocks<I: RecordIndex>(
        &self,
        view: &FixedView,
        len: u64,
        indices: &[I],
    ) -> Result<()> {
        let stride = &view.stride;
        let mut blocks: Vec<(u64, u64)> = indices
            .iter()
            .filter_map(|i| i.to_u64().filter(|&x| x < len))
            .map(|x| (stride.block_of(x), x))
            .collect();
        blocks.sort_unstable();
        blocks.dedup_by_key(|(b, _)| *b);
        blocks.par_iter().try_for_each(|&(b, first_asked)| self.check_block(view, b, len, first_asked))
    }

    /// Checks block `b` of a store of `len` records; a mismatch names record `asked`.
    fn check_block(&self, view: &FixedView, b: u64, len: u64, asked: u64) -> Result<()> {
        let stride = &view.stride;
        let records = stride.block_records(b, len);
        let Some(committed) = self.block_sum(stride, records.clone())? else {
            return Err(self.block_error(
                stride,
                asked,
                "truncated or missing chunk: the block's bytes are not there",
            ));
        };
        // The open block: the writer may have summed records past the count this batch took.
        // Each longer run of records the chunk holds is tried; a match proves the records below
        // the count are the ones summed. The writer writes records before it extends the sum,
        // so the bytes read after a sum is read hold every record it covers. They are not
        // committed: a failed append may cut them off the chunk at any moment (and put the sum
        // back), so they are read into a buffer, never through the chunk's mapping (a page past
        // the cut would fault), and the search starts again while the sum keeps changing.
        let full = stride.block_records(b, u64::MAX);
        let tail =
            (records.end == len && records.end < full.end).then(|| stride.locate(records.end)).flatten();
        let unit = usize::try_from(stride.record_size).unwrap_or(usize::MAX);
        for _ in 0..OPEN_BLOCK_TRIES {
            let want = view.blocks.block_crc(b);
            if committed == want {
                return Ok(());
            }
            let Some((chunk, at)) = tail else { break };
            let more = self.chunks.read_uncommitted(
                chunk,
                at,
                (full.end - records.end) * stride.record_size,
                stride.record_size,
            )?;
            let mut sum = committed;
            for record in more.as_deref().unwrap_or_default().chunks_exact(unit) {
                sum = crc32c::crc32c_append(sum, record);
                if sum == want {
                    return Ok(());
                }
            }
            if view.blocks.block_crc(b) == want {
                break;
            }
        }
        Err(self.block_error(
            stride,
            asked,
            format!("block checksum mismatch (the block of records {}..{})", records.start, records.end),
        ))
    }

    /// Checks blocks `(block, record asked)` of a store of `len` records before an operation
    /// sums them again (a delete's moves).
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] naming the first damaged block's record, saying nothing changed.
    pub(super) fn check_stride_blocks(&self, blocks: &[(u64, u64)], len: u64) -> Result<()> {
        let super::index::View::Fixed(view) = self.index.view(len)? else { return Ok(()) };
        blocks.par_iter().try_for_each(|&(b, asked)| {
            self.check_block(&view, b, len, asked).map_err(|e| match e {
                Error::CorruptRecord { path, index, reason, source } => Error::CorruptRecord {
                    path,
                    index,
                    reason: format!("{reason}; the delete would sum it again: refused, nothing changed"),
                    source,
                },
                other => other,
            })
        })
    }

    /// The error for the block of record `asked` failing its check, naming the record and its
    /// chunk file.
    pub(super) fn block_error(&self, stride: &Stride, asked: u64, reason: impl Into<String>) -> Error {
        let chunk = stride.locate(asked).map_or(0, |(c, _)| c);
        Error::CorruptRecord {
            path: self.chunks.path(chunk),
            index: asked,
            reason: reason.into(),
            source: None,
        }
    }

    /// Checks every block of the store (`verify`): each record of a block that fails, in index
    /// order, handed to `f` with why (which of a block's records is damaged cannot be told: none
    /// of them is verified).
    pub(super) fn verify_blocks(&self, f: &mut dyn FnMut(u64, Error)) -> Result<()> {
        let len = self.len();
        let super::index::View::Fixed(view) = self.index.view(len)? else { return Ok(()) };
        let stride = view.stride;
        // A window of blocks at a time, its failures handed over before the next is checked:
        // memory stays flat in the number of damaged blocks (as `verify_each` scans entries).
        let blocks = stride.blocks(len);
        let mut first = 0u64;
        while first < blocks {
            let end = first.saturating_add(VERIFY_WINDOW).min(blocks);
            let bad: Vec<(Range<u64>, Error)> = (first..end)
                .into_par_iter()
                .filter_map(|b| {
                    let records = stride.block_records(b, len);
                    let e = self.check_block(&view, b, len, records.start).err()?;
                    Some((records, e))
                })
                .collect();
            for (records, e) in bad {
                if super::report::readers_failure(&e) {
                    return Err(e);
                }
                let reason = match &e {
                    Error::CorruptRecord { reason, .. } => reason.clone(),
                    other => crate::error_chain(other),
                };
                for idx in records {
                    f(idx, self.block_error(&stride, idx, reason.clone()));
                }
            }
            first = end;
        }
        Ok(())
    }

    /// The writer sums the open block again from the chunk: a commit killed after writing its
    /// block checksums and before publishing its count left one covering records that are not
    /// committed. Run before the chunk bytes past the frontier are trimmed: only a checksum that
    /// matches a longer run of the records still there is such a commit's, and is replaced; one
    /// that matches no run is damage, and is kept, so that `verify` still reports it (summing
    /// the block again would certify whatever bytes are there now).
    pub(super) fn reseal_tail_block(&self) -> Result<()> {
        let (Some(stride), len) = (self.index.stride(), self.len()) else { return Ok(()) };
        if len == 0 {
            return Ok(());
        }
        let b = stride.block_of(len - 1);
        let records = stride.block_records(b, len);
        let sum = self.block_sum(&stride, records)?.ok_or_else(|| {
            self.block_error(
                &stride,
                len - 1,
                "truncated or missing chunk: the last block's bytes are not there",
            )
        })?;
        let super::index::View::Fixed(view) = self.index.view(len)? else { return Ok(()) };
        if view.blocks.block_crc(b) != sum && self.check_block(&view, b, len, len - 1).is_ok() {
            self.index.set_block_crcs(b, &[sum])?;
            self.index.flush_entries(len - 1, 1, &self.index_path)?;
        }
        Ok(())
    }

    /// [`Store::gather_fixed_to`] of a fixed-stride store: each record copied from where its
    /// index puts it, records adjacent in a chunk as one copy, no entry read.
    pub(super) fn gather_stride<I: RecordIndex>(
        &self,
        view: &FixedView,
        len: u64,
        indices: &[I],
        dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        let r = view.stride.record_size as usize;
        let shards = shard_count(par, indices.len(), dst.remaining(), SHARD_MIN_BYTES);
        if shards == 1 {
            return self.gather_stride_shard(&view.stride, len, indices, dst);
        }
        let mut dst = dst;
        let per = indices.len().div_ceil(shards);
        let parts: Vec<(&[I], Destination<'_>)> =
            indices.chunks(per).map(|ix| (ix, dst.split_off(ix.len() * r))).collect();
        super::pool::run_shards(parts, par, |(ix, d)| self.gather_stride_shard(&view.stride, len, ix, d))
    }

    /// Records shorter than this are hinted ahead ([`StoreOptions::hint_records_below`](super::StoreOptions::hint_records_below)).
    fn hint_below(&self) -> usize {
        self.opts.hint_below.unwrap_or_else(crate::sys::fixed_stride_hint_below)
    }

    fn gather_stride_shard<I: RecordIndex>(
        &self,
        stride: &Stride,
        len: u64,
        indices: &[I],
        mut dst: Destination<'_>,
    ) -> Result<()> {
        dst.near_copy(self.opts.near_copy);
        let r = stride.record_size;
        let per_chunk = stride.per_chunk;
        // Every index checked in one pass: the copy loops below have no error path of their own.
        if let Some(k) = indices.iter().position(|i| i.to_u64().is_none_or(|x| x >= len)) {
            return Err(self.check_index(k, indices[k], len).expect_err("out of range"));
        }
        if len <= per_chunk
            && let Some(map) = self.chunk_view(0, len * r)?
        {
            let far = map.bytes().len() >= PREFETCH_FROM_BYTES;
            copy_one_chunk(map.bytes(), r as usize, indices, (far, self.hint_below()), &mut dst);
            return Ok(());
        }
        // The mapping of the chunk last read: a batch of a one-chunk store maps once.
        let mut cur: Option<(u64, std::sync::Arc<MappedFile>)> = None;
        let ahead_by = (r < self.hint_below() as u64).then(|| prefetch_ahead(r as usize));
        let mut k = 0;
        while k < indices.len() {
            let idx = indices[k].to_u64().unwrap_or_default();
            // A run: the records that follow this one in its chunk.
            let mut run = 1;
            while let Some(next) = indices.get(k + run).and_then(|i| i.to_u64()) {
                if next != idx + run as u64 || next % per_chunk == 0 {
                    break;
                }
                run += 1;
            }
            let chunk = idx / per_chunk;
            let start = (idx % per_chunk) * r;
            let end = start + run as u64 * r;
            let map = match &cur {
                Some((c, m)) if *c == chunk && m.len() >= end => m,
                _ => {
                    // The chunk's committed bytes mapped once; a truncated chunk still gives the
                    // records before the cut.
                    let id = u32::try_from(chunk).unwrap_or(u32::MAX);
                    let m = match self.chunk_view(id, len_of_chunk(stride, chunk, len))? {
                        Some(m) => Some(m),
                        None => self.chunk_view(id, end)?,
                    };
                    let m = m.ok_or_else(|| Error::CorruptRecord {
                        path: self.chunks.path(id),
                        index: idx,
                        reason: format!(
                            "truncated or missing chunk: the record needs bytes {start}..{end} of it"
                        ),
                        source: None,
                    })?;
                    &cur.insert((chunk, m)).1
                }
            };
            // The record a few places on, when it lies in this chunk (a store of several
            // chunks is past the caches: see `PREFETCH_FROM_BYTES`).
            if let Some(by) = ahead_by
                && let Some(ahead) = indices.get(k + by).and_then(|i| i.to_u64())
                && ahead / per_chunk == chunk
            {
                prefetch_span::<HINT_FAR>(map.bytes(), ((ahead % per_chunk) * r) as usize, r as usize);
            }
            dst.copy(&map.bytes()[start as usize..end as usize]);
            k += run;
        }
        Ok(())
    }
}

/// How many records ahead of the one it copies a gather of records of `r` bytes hints: about
/// [`PREFETCH_AHEAD_BYTES`] ahead, and between 8 and 32 records. A short record's copy takes a
/// few nanoseconds, so eight records ahead leaves the miss most of its latency to wait out.
fn prefetch_ahead(r: usize) -> usize {
    (PREFETCH_AHEAD_BYTES / r.max(1)).clamp(8, 32)
}

/// The gather of a store whose records all lie in one chunk (`bytes`, holding every index):
/// record `i` is `bytes[i × r..]`, records adjacent in the batch and on disk copied as one run,
/// and (records shorter than `below`, [`StoreOptions::hint_records_below`](crate::StoreOptions::hint_records_below)) the record [`prefetch_ahead`] places on
/// hinted to the CPU as each is copied, into the outer caches when the chunk is `far` (past the
/// caches: [`PREFETCH_FROM_BYTES`]), else into the L1.
fn copy_one_chunk<I: RecordIndex>(
    bytes: &[u8],
    r: usize,
    indices: &[I],
    (far, below): (bool, usize),
    dst: &mut Destination<'_>,
) {
    // One loop per kind of hint, so that the loop itself holds no test of which.
    match (r < below, far) {
        (false, _) => copy_hinted::<I, HINT_NONE>(bytes, r, indices, dst),
        (true, true) => copy_hinted::<I, HINT_FAR>(bytes, r, indices, dst),
        (true, false) => copy_hinted::<I, HINT_NEAR>(bytes, r, indices, dst),
    }
}

/// [`copy_one_chunk`] with hints of kind `HINT`.
#[inline(always)]
fn copy_hinted<I: RecordIndex, const HINT: u8>(
    bytes: &[u8],
    r: usize,
    indices: &[I],
    dst: &mut Destination<'_>,
) {
    let at = |k: usize| indices[k].to_u64().unwrap_or(0) as usize * r;
    let n = indices.len();
    let distance = prefetch_ahead(r);
    let mut k = 0;
    while k < n {
        if HINT != HINT_NONE && k + distance < n {
            // Every index is in the chunk (checked before the copy), so is the hinted record.
            prefetch_span::<HINT>(bytes, at(k + distance), r);
        }
        let start = at(k);
        let mut end = start + r;
        let mut run = 1;
        while k + run < n && at(k + run) == end {
            end += r;
            run += 1;
        }
        dst.copy(&bytes[start..end]);
        k += run;
    }
}

/// The committed bytes of `chunk` in a store of `len` records.
fn len_of_chunk(stride: &Stride, chunk: u64, len: u64) -> u64 {
    let records = len.saturating_sub(chunk * stride.per_chunk).min(stride.per_chunk);
    records * stride.record_size
}

/// A chunk's mapping covering a block's records.
pub(super) struct BlockBytes {
    map: std::sync::Arc<MappedFile>,
    chunk: u32,
}

impl BlockBytes {
    /// The bytes of `records` (in this chunk).
    pub(super) fn bytes_range(&self, records: &Range<u64>, stride: &Stride) -> &[u8] {
        let (chunk, start) = stride.locate(records.start).unwrap_or((self.chunk, 0));
        debug_assert_eq!(chunk, self.chunk);
        let end = start + (records.end - records.start) * stride.record_size;
        &self.map.bytes()[start as usize..end as usize]
    }
}
