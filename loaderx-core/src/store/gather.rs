//! Batched reads: [`Store::gather`] and its family, and [`Store::map_records`]. Each resolves the
//! batch's index entries once, then copies or decompresses every record straight into the
//! destination (or hands it to a callback where it lies), in contiguous shards over the pool.

use std::sync::Arc;

use rayon::prelude::*;

use super::Store;
use super::codec::{DecodeError, Decoder};
use super::cold::Heat;
use super::decode::{RecordError, Stored, check_record, decode_record};
use super::index::View;
use super::pool::{Parallelism, run_shards, shard_count};
use super::table::Table;
use crate::format::Codec;
use crate::format::v2::Entry;
use crate::sys::{Destination, MappedFile, fill_slice, fill_vec, prefetch};
use crate::{Error, Result};

use crate::sys::tuning::{GATHER_SHARD_MIN_BYTES, MAP_SHARD_MIN_RECORDS, PREFETCH_AHEAD};

/// The integer types a batch of record indices may be given in: `u32` (what the sampler
/// yields), `u64` and `usize` (a v2 store holds more than 2^32 records), and `i32` / `i64` (so a
/// literal `&[2, 0]` needs no suffix; a negative index is an error naming it).
pub trait RecordIndex: Copy + Send + Sync + std::fmt::Display + sealed::Sealed {
    /// The index as a `u64`; `None` when it is negative.
    fn to_u64(self) -> Option<u64>;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! record_index {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl RecordIndex for $t {
            #[inline(always)]
            fn to_u64(self) -> Option<u64> {
                u64::try_from(self).ok()
            }
        }
    )*};
}
record_index!(u32, u64, usize, i32, i64);

/// A batch's entries, resolved once ([`Store::resolve_batch`]), and how its read is to be
/// taken ([`Heat`]).
pub(crate) struct Resolved(Vec<Located>, Heat);

impl Resolved {
    /// Each record's logical length.
    pub(crate) fn lens(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|l| l.entry.logical)
    }

    /// The records' total logical length.
    pub(crate) fn total(&self) -> u64 {
        total(&self.0)
    }
}

/// The total logical length of `locs`.
fn total(locs: &[Located]) -> u64 {
    locs.iter().map(|l| u64::from(l.entry.logical)).sum()
}

/// A record of a batch as resolved from the index: its index, entry and codec.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located {
    pub(super) index: u64,
    pub(super) entry: Entry,
    pub(super) codec: Codec,
}

impl Located {
    /// The record with its stored bytes `bytes`, as [`decode_record`] takes it.
    #[inline(always)]
    pub(super) fn stored<'a>(&self, bytes: &'a [u8]) -> Stored<'a> {
        Stored { bytes, codec: self.codec, logical: self.entry.logical as usize, crc: self.entry.crc }
    }
}

impl Store {
    /// The original sizes of the records at `indices`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::CorruptRecord`] for a bad index entry.
    pub fn record_lens<I: RecordIndex>(&self, indices: &[I]) -> Result<Vec<u32>> {
        Ok(self.resolve(indices)?.iter().map(|l| l.entry.logical).collect())
    }

    /// Whether this handle checks record checksums on its reads (a v2 store opened with
    /// [`StoreOptions::verify_reads`](super::StoreOptions::verify_reads)).
    #[inline]
    pub(super) fn verifies_reads(&self) -> bool {
        self.opts.verify_reads && self.index.has_checksums()
    }

    /// Index `i` (batch position `pos`) as a `u64` below `len`.
    #[inline]
    pub(super) fn check_index<I: RecordIndex>(&self, pos: usize, i: I, len: u64) -> Result<u64> {
        match i.to_u64() {
            Some(x) if x < len => Ok(x),
            Some(x) => Err(self.index_error(x, len)),
            None => Err(Error::InvalidArgument(format!(
                "record index {i} (batch position {pos}) of {} is negative",
                self.dir.display()
            ))),
        }
    }

    pub(super) fn resolve<I: RecordIndex>(&self, indices: &[I]) -> Result<Vec<Located>> {
        self.readable()?;
        let len = self.len();
        match self.index.view(len)? {
            View::V1(m) => self.resolve_in(m, len, indices),
            View::V2(v) => self.resolve_in(&v, len, indices),
            View::Fixed(f) => self.resolve_in(&f, len, indices),
            View::Compact(c) => self.resolve_in(&c, len, indices),
        }
    }

    /// [`Store::resolve`] for a read that follows: a cold batch's pages are asked for first
    /// ([`Store::prepare_reads`]); the read ends with [`Residency::finish`](super::cold) of the heat.
    fn resolve_reading<I: RecordIndex>(&self, indices: &[I]) -> Result<(Vec<Located>, Heat)> {
        self.readable()?;
        let len = self.len();
        let view = self.index.view(len)?;
        let (heat, locs) = match &view {
            View::V1(m) => {
                let heat = self.prepare_reads(*m, len, indices);
                (heat, self.resolve_in(*m, len, indices)?)
            }
            View::V2(v) => {
                let heat = self.prepare_reads(v, len, indices);
                (heat, self.resolve_in(v, len, indices)?)
            }
            View::Compact(c) => {
                let heat = self.prepare_reads(c, len, indices);
                (heat, self.resolve_in(c, len, indices)?)
            }
            View::Fixed(f) => {
                let heat = self.prepare_reads(f, len, indices);
                let locs = self.resolve_in(f, len, indices)?;
                if self.opts.verify_reads {
                    self.check_blocks(f, len, indices)?;
                }
                (heat, locs)
            }
        };
        Ok((locs, heat))
    }

    fn resolve_in<T: Table, I: RecordIndex>(
        &self,
        table: &T,
        len: u64,
        indices: &[I],
    ) -> Result<Vec<Located>> {
        // The entries of a random batch are scattered over the index: start all their loads
        // before reading the first.
        for &i in indices {
            match i.to_u64() {
                Some(x) if x < len => table.prefetch(x),
                _ => {}
            }
        }
        let verify = T::CHECKSUMS && self.verifies_reads();
        indices
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let index = self.check_index(pos, i, len)?;
                self.locate(table, index, verify)
            })
            .collect()
    }

    /// Entry `index` (below the count) read and checked: its fields against the format's limits,
    /// and its own checksum when `verify`.
    #[inline]
    pub(super) fn locate<T: Table>(&self, table: &T, index: u64, verify: bool) -> Result<Located> {
        let entry = if verify {
            table.get_checked(index).map_err(|r| self.record_error(index, r))?
        } else {
            table.get(index)
        };
        let codec =
            T::check(&entry).map_err(|r| self.record_error(index, format!("bad index entry: {r}")))?;
        Ok(Located { index, entry, codec })
    }

    /// Gathers the records at `indices` into `dst`, packed back to back in the order given.
    ///
    /// `dst.len()` must be the sum of the records' sizes ([`Store::record_lens`]). Raw records
    /// are read straight into `dst`; compressed ones are decompressed straight into it. The work
    /// is split over the thread pool in contiguous blocks, one zstd context per block.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::InvalidArgument`] when `dst` has the wrong size or an
    /// index is negative; [`Error::CorruptRecord`] (truncated chunk, bad frame, a checksum that
    /// does not match under [`verify_reads`](super::StoreOptions::verify_reads)...) or
    /// [`Error::MissingDictionary`] naming the record. On error `dst` holds no usable data.
    pub fn gather_into<I: RecordIndex>(&self, indices: &[I], dst: &mut [u8]) -> Result<()> {
        let (locs, heat) = self.resolve_reading(indices)?;
        let total = total(&locs);
        if total != dst.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "gather of {} records needs a {total}-byte buffer, got {} bytes",
                indices.len(),
                dst.len()
            )));
        }
        fill_slice(dst, |out| self.read_batch(&locs, out, Parallelism::Pool))?;
        self.residency.finish(heat, dst.len());
        Ok(())
    }

    /// The index entries of `indices`, resolved once: their lengths size a buffer, then
    /// [`Store::read_resolved`] fills it (the ragged gather of the dataset layer).
    ///
    /// # Errors
    /// As [`Store::record_lens`].
    pub(crate) fn resolve_batch<I: RecordIndex>(&self, indices: &[I]) -> Result<Resolved> {
        let (locs, heat) = self.resolve_reading(indices)?;
        Ok(Resolved(locs, heat))
    }

    /// Reads a resolved batch into a destination of exactly its total size.
    ///
    /// # Errors
    /// As [`Store::gather_into`].
    pub(crate) fn read_resolved(
        &self,
        batch: &Resolved,
        dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        if batch.total() != dst.remaining() as u64 {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} bytes read into {} bytes",
                batch.total(),
                dst.remaining()
            )));
        }
        let bytes = dst.remaining();
        self.read_batch(&batch.0, dst, par)?;
        self.residency.finish(batch.1, bytes);
        Ok(())
    }

    /// Gathers records that are each exactly `record_len` bytes into `dst` (`indices.len() *
    /// record_len` bytes): the fixed-stride gather of a dense dataset.
    ///
    /// # Errors
    /// As [`Store::gather_into`], and [`Error::CorruptRecord`] naming a record of another size.
    pub fn gather_fixed<I: RecordIndex>(
        &self,
        indices: &[I],
        record_len: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        fill_slice(dst, |out| self.gather_fixed_to(indices, record_len, out, Parallelism::Pool))
    }

    /// Gathers the records at `indices` as owned byte vectors.
    ///
    /// # Errors
    /// As [`Store::gather_into`], and [`Error::InvalidArgument`] for a batch larger than memory
    /// can address.
    pub fn gather<I: RecordIndex>(&self, indices: &[I]) -> Result<Vec<Vec<u8>>> {
        let (flat, lens) = self.gather_flat(indices)?;
        let mut out = Vec::with_capacity(lens.len());
        let mut pos = 0;
        for n in lens {
            let n = n as usize;
            out.push(flat[pos..pos + n].to_vec());
            pos += n;
        }
        Ok(out)
    }

    /// The records at `indices` back to back in one new buffer, and each one's length: both
    /// from one resolution of the indices (a delete between them cannot tear a record), the
    /// buffer allocated without being written first (a size claimed by a damaged entry is an
    /// error when the allocation fails or the record is read, never memory touched for it).
    ///
    /// # Errors
    /// As [`Store::gather_into`]; [`Error::InvalidArgument`] when the records' total length
    /// cannot be allocated.
    pub fn gather_flat<I: RecordIndex>(&self, indices: &[I]) -> Result<(Vec<u8>, Vec<u32>)> {
        let (locs, heat) = self.resolve_reading(indices)?;
        let mut flat = Vec::new();
        let total = total(&locs);
        let total = usize::try_from(total).map_err(|_| {
            Error::InvalidArgument(format!("a gather of {total} bytes does not fit in memory"))
        })?;
        fill_vec(&mut flat, total, |out| self.read_batch(&locs, out, Parallelism::Pool))?;
        self.residency.finish(heat, total);
        Ok((flat, locs.iter().map(|l| l.entry.logical).collect()))
    }

    /// Reads one record.
    ///
    /// # Errors
    /// As [`Store::gather_into`].
    pub fn get(&self, index: u64) -> Result<Vec<u8>> {
        Ok(self.gather(&[index])?.pop().unwrap_or_default())
    }

    /// Reads one batch into `dst`: contiguous shards of records over the pool ([`shard_count`]),
    /// each with its slice of the destination.
    fn read_batch(&self, locs: &[Located], mut dst: Destination<'_>, par: Parallelism) -> Result<()> {
        let shards = shard_count(par, locs.len(), dst.remaining(), GATHER_SHARD_MIN_BYTES);
        if shards == 1 {
            return self.read_shard(locs, dst, self.verifies_reads());
        }
        let per = locs.len().div_ceil(shards);
        let mut work = Vec::with_capacity(shards);
        for lc in locs.chunks(per) {
            let bytes: usize = lc.iter().map(|l| l.entry.logical as usize).sum();
            work.push((lc, dst.split_off(bytes)));
        }
        run_shards(work, par, |(lc, d)| self.read_shard(lc, d, self.verifies_reads()))
    }

    /// Reads `locs` into `dst` on the calling thread, checking record checksums when `verify`
    /// ([`decode_record`]: a raw record summed, then copied: its lengths vary, so a fused sum's
    /// per-length plan would cost more than it saves).
    pub(super) fn read_shard(&self, locs: &[Located], mut dst: Destination<'_>, verify: bool) -> Result<()> {
        dst.near_copy(self.opts.near_copy);
        self.ensure_dictionary(locs)?;
        let mut decoder = Decoder::new(self.dict.get().map(|d| &**d));
        self.walk_stored(locs, |_, l, bytes| {
            decode_record(l.stored(bytes), verify, &mut decoder, None, &mut dst)
                .map_err(|e| self.record_failure(e, l))
        })
    }

    /// Hands each record at `indices` to `f` where it lies, and collects what `f` returns in the
    /// order of `indices`: a raw record is a slice of its chunk's map (no copy at all), a
    /// compressed one is decompressed into a scratch buffer reused by the thread. `f(k, bytes)`
    /// gets the position `k` in `indices` and the record.
    ///
    /// For decoding records in place (an item store's MessagePack items, say) without first
    /// gathering them into a buffer. A batch of at least 32 records is split over the thread
    /// pool in contiguous blocks, unless the calling thread gathers inline (a loader's prefetch
    /// threads).
    ///
    /// # Errors
    /// The store's errors, as [`Store::gather_into`]'s, converted into `E`; or an error of `f`'s.
    /// Each block stops at its first error; with the batch split over threads, which block's
    /// error is returned is not fixed.
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{Codec, Store, StoreOptions};
    ///
    /// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-store-gather-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let store = Store::create(dir.join("s"), StoreOptions::new())?;
    /// store.append(&[b"alpha".as_slice(), b"be", b"gamma"], Codec::Zstd)?;
    /// let lens = store.map_records(&[2, 0], |_, bytes| Ok::<_, loaderx::Error>(bytes.len()))?;
    /// assert_eq!(lens, [5, 5]);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_records<I, T, E, F>(&self, indices: &[I], f: F) -> std::result::Result<Vec<T>, E>
    where
        I: RecordIndex,
        T: Send,
        E: From<Error> + Send,
        F: Fn(usize, &[u8]) -> std::result::Result<T, E> + Sync,
    {
        let (locs, heat) = self.resolve_reading(indices)?;
        self.ensure_dictionary(&locs)?;
        let shard = |base: usize, lc: &[Located]| -> std::result::Result<Vec<T>, E> {
            let mut out = Vec::with_capacity(lc.len());
            let mut decoder = Decoder::new(self.dict.get().map(|d| &**d));
            let mut scratch = Vec::new();
            let verify = self.verifies_reads();
            self.walk_stored(lc, |k, l, src| {
                let rec = l.stored(src);
                let bytes = if l.codec == Codec::Raw || l.entry.logical == 0 {
                    check_record(&rec, verify).map_err(|e| E::from(self.record_failure(e, l)))?;
                    src
                } else {
                    fill_vec(&mut scratch, rec.logical, |mut dst| {
                        decode_record(rec, verify, &mut decoder, None, &mut dst)
                            .map_err(|e| self.record_failure(e, l))
                    })
                    .map_err(E::from)?;
                    &scratch[..]
                };
                out.push(f(base + k, bytes)?);
                Ok::<(), E>(())
            })?;
            Ok(out)
        };
        let shards = shard_count(Parallelism::Pool, locs.len(), locs.len(), MAP_SHARD_MIN_RECORDS);
        let bytes = usize::try_from(total(&locs)).unwrap_or(usize::MAX);
        if shards == 1 {
            let out = shard(0, &locs)?;
            self.residency.finish(heat, bytes);
            return Ok(out);
        }
        let per = locs.len().div_ceil(shards);
        let parts = locs
            .par_chunks(per)
            .enumerate()
            .map(|(s, lc)| shard(s * per, lc))
            .collect::<std::result::Result<Vec<_>, E>>()?;
        let mut all = Vec::with_capacity(locs.len());
        for part in parts {
            all.extend(part);
        }
        self.residency.finish(heat, bytes);
        Ok(all)
    }

    /// Loads the dictionary when a record in `locs` needs it and this handle has none: one
    /// opened before the writer (perhaps in another process) trained it. `dict.zr` is durable
    /// before any record that needs it is committed, so it is there to load now.
    fn ensure_dictionary(&self, locs: &[Located]) -> Result<()> {
        if self.dict.get().is_none() && locs.iter().any(|l| l.codec == Codec::ZstdDict) {
            self.load_dictionary()?;
        }
        Ok(())
    }

    /// The error for record `l` that failed its checksum or did not decode.
    pub(super) fn record_failure(&self, e: RecordError, l: &Located) -> Error {
        match e {
            RecordError::Checksum(got) => self.checksum_error(l, got),
            RecordError::Decode(e) => self.decode_error(e, l),
        }
    }

    /// The error for a record that does not decompress.
    pub(super) fn decode_error(&self, e: DecodeError, l: &Located) -> Error {
        match e {
            DecodeError::MissingDictionary => Error::MissingDictionary { path: self.dir.clone() },
            DecodeError::Frame { reason, source } => {
                Error::CorruptRecord { path: self.chunks.path(l.entry.chunk), index: l.index, reason, source }
            }
        }
    }

    /// The error for record `l` whose stored bytes sum to `got`, not to its entry's checksum.
    pub(super) fn checksum_error(&self, l: &Located, got: u32) -> Error {
        Error::CorruptRecord {
            path: self.chunks.path(l.entry.chunk),
            index: l.index,
            reason: format!(
                "stored bytes {}..{} fail their checksum (crc32c {got:#010x}, the index says {:#010x})",
                l.entry.offset,
                l.entry.end(),
                l.entry.crc
            ),
            source: None,
        }
    }

    /// The error for a record whose bytes lie past the end of its chunk file (or whose chunk is
    /// missing).
    pub(super) fn truncated_error(&self, l: &Located) -> Error {
        Error::CorruptRecord {
            path: self.chunks.path(l.entry.chunk),
            index: l.index,
            reason: format!(
                "truncated or missing chunk: the record needs bytes {}..{} of it",
                l.entry.offset,
                l.entry.end()
            ),
            source: None,
        }
    }

    /// Walks the records `locs` (from [`Store::resolve`]) in order, handing `f` each one's
    /// position and its stored bytes (a slice of its chunk's map; empty for an empty record),
    /// unchecked: `f` checks them ([`decode_record`], [`check_record`]).
    fn walk_stored<E: From<Error>>(
        &self,
        locs: &[Located],
        mut f: impl FnMut(usize, &Located, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut view: Option<(u32, Arc<MappedFile>)> = None;
        for (k, l) in locs.iter().enumerate() {
            // Records of a random batch are cache misses each: hint the one `PREFETCH_AHEAD`
            // places on (when it is in the chunk in view) so its misses overlap this one's work.
            if let (Some((id, map)), Some(next)) = (&view, locs.get(k + PREFETCH_AHEAD))
                && next.entry.chunk == *id
                && let Some(src) = stored_range(map, &next.entry)
            {
                prefetch(src);
            }
            if l.entry.stored == 0 {
                f(k, l, &[])?;
                continue;
            }
            let end = l.entry.end();
            let map = match &view {
                Some((id, m)) if *id == l.entry.chunk && m.len() >= end => m,
                _ => match self.chunk_view(l.entry.chunk, end)? {
                    Some(m) => &view.insert((l.entry.chunk, m)).1,
                    None => return Err(self.truncated_error(l).into()),
                },
            };
            let src = stored_range(map, &l.entry).ok_or_else(|| self.truncated_error(l))?;
            f(k, l, src)?;
        }
        Ok(())
    }
}

/// The stored bytes of `e` in its chunk's map, `None` when they lie past the map's end.
#[inline]
pub(super) fn stored_range<'m>(map: &'m MappedFile, e: &Entry) -> Option<&'m [u8]> {
    let start = usize::try_from(e.offset).ok()?;
    let end = start.checked_add(e.stored as usize)?;
    map.bytes().get(start..end)
}
