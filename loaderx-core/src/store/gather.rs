//! Batched reads: [`Store::gather`] and its family, and [`Store::map_records`]. Each resolves the
//! batch's table entries once, then copies or decompresses every record straight into the
//! destination (or hands it to a callback where it lies), in contiguous shards over the pool.

use std::sync::Arc;

use rayon::prelude::*;

use super::Store;
use super::codec::{DecodeError, Decoder};
use crate::format::{Codec, RecordLoc};
use crate::sys::{Destination, MappedFile, fill_slice, fill_vec, prefetch};
use crate::{Error, Result};

/// A shard of a variable-length gather copies at least this many bytes: below it a pool
/// hand-off costs more than the copy it moves to another thread.
const GATHER_SHARD_MIN_BYTES: usize = 128 << 10;
/// A [`Store::map_records`] shard hands at least this many records to its callback.
const MAP_SHARD_MIN_RECORDS: usize = 32;
/// How many records ahead a gather hints the CPU to fetch ([`prefetch`]).
const PREFETCH_AHEAD: usize = 4;

/// Whether a batched read may split over the rayon pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parallelism {
    /// Split over the pool when the batch is large enough to pay for the hand-offs.
    Pool,
    /// Stay on the calling thread: the caller already keeps every core busy (a loader with as
    /// many prefetch threads as the pool has threads), so a split only adds hand-offs.
    CallingThread,
}

/// The one shard plan of every batched read: as many contiguous shards as the pool has threads,
/// but no more than there are records and no more than leave each shard `min_work` of `work`
/// (bytes to copy, or records to hand a callback); one, on the calling thread, when so asked.
pub(super) fn shard_count(par: Parallelism, records: usize, work: usize, min_work: usize) -> usize {
    match par {
        Parallelism::CallingThread => 1,
        Parallelism::Pool => rayon::current_num_threads().min(records).min(work / min_work.max(1)).max(1),
    }
}

/// Runs `f` on every shard over the pool, the first on the calling thread; the first error (in
/// no fixed order across shards) is returned.
pub(super) fn run_shards<S: Send>(shards: Vec<S>, f: impl Fn(S) -> Result<()> + Sync + Send) -> Result<()> {
    shards.into_par_iter().try_for_each(f)
}

impl Store {
    /// The original sizes of the records at `indices`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::CorruptRecord`] for a bad table entry.
    pub fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        Ok(self.resolve(indices)?.iter().map(|(l, _)| l.logic_length).collect())
    }

    fn resolve(&self, indices: &[u32]) -> Result<Vec<(RecordLoc, Codec)>> {
        let len = self.len();
        // The entries of a random batch are scattered over the table: start all their loads
        // before reading the first.
        for &idx in indices {
            self.meta.prefetch_entry(idx);
        }
        indices
            .iter()
            .map(|&idx| {
                if idx >= len {
                    return Err(self.index_error(idx, len));
                }
                let loc = self.meta.entry(idx);
                let codec = loc
                    .validate_limits()
                    .map_err(|r| self.record_error(idx, format!("bad table entry: {r}")))?;
                Ok((loc, codec))
            })
            .collect()
    }

    /// Gathers the records at `indices` into `dst`, packed back to back in the order given.
    ///
    /// `dst.len()` must be the sum of the records' sizes ([`Store::record_lens`]). Raw records
    /// are read straight into `dst`; compressed ones are decompressed straight into it. The work
    /// is split over the thread pool in contiguous blocks, one zstd context per block.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::InvalidArgument`] when `dst` has the wrong size;
    /// [`Error::CorruptRecord`] (truncated chunk, bad frame...) or [`Error::MissingDictionary`]
    /// naming the record. On error `dst` holds no usable data.
    pub fn gather_into(&self, indices: &[u32], dst: &mut [u8]) -> Result<()> {
        let locs = self.resolve(indices)?;
        let total: usize = locs.iter().map(|(l, _)| l.logic_length as usize).sum();
        if total != dst.len() {
            return Err(Error::InvalidArgument(format!(
                "gather of {} records needs a {total}-byte buffer, got {} bytes",
                indices.len(),
                dst.len()
            )));
        }
        fill_slice(dst, |out| self.read_batch(indices, &locs, out, Parallelism::Pool))
    }

    /// Gathers records that are each exactly `record_len` bytes into `dst` (`indices.len() *
    /// record_len` bytes): the fixed-stride gather of a dense dataset.
    ///
    /// # Errors
    /// As [`Store::gather_into`], and [`Error::CorruptRecord`] naming a record of another size.
    pub fn gather_fixed(&self, indices: &[u32], record_len: usize, dst: &mut [u8]) -> Result<()> {
        fill_slice(dst, |out| self.gather_fixed_to(indices, record_len, out, Parallelism::Pool))
    }

    /// Gathers the records at `indices` as owned byte vectors.
    ///
    /// # Errors
    /// As [`Store::gather_into`].
    pub fn gather(&self, indices: &[u32]) -> Result<Vec<Vec<u8>>> {
        let locs = self.resolve(indices)?;
        let mut flat = Vec::new();
        let total = locs.iter().map(|(l, _)| l.logic_length as usize).sum();
        fill_vec(&mut flat, total, |out| self.read_batch(indices, &locs, out, Parallelism::Pool))?;
        let mut out = Vec::with_capacity(locs.len());
        let mut pos = 0;
        for (l, _) in &locs {
            let n = l.logic_length as usize;
            out.push(flat[pos..pos + n].to_vec());
            pos += n;
        }
        Ok(out)
    }

    /// Reads one record.
    ///
    /// # Errors
    /// As [`Store::gather_into`].
    pub fn get(&self, index: u32) -> Result<Vec<u8>> {
        Ok(self.gather(&[index])?.pop().unwrap_or_default())
    }

    /// Reads one batch into `dst`: contiguous shards of records over the pool ([`shard_count`]),
    /// each with its slice of the destination.
    fn read_batch(
        &self,
        indices: &[u32],
        locs: &[(RecordLoc, Codec)],
        mut dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        let shards = shard_count(par, indices.len(), dst.remaining(), GATHER_SHARD_MIN_BYTES);
        if shards == 1 {
            return self.read_shard(indices, locs, dst);
        }
        let per = indices.len().div_ceil(shards);
        let mut work = Vec::with_capacity(shards);
        for (ix, lc) in indices.chunks(per).zip(locs.chunks(per)) {
            let bytes: usize = lc.iter().map(|(l, _)| l.logic_length as usize).sum();
            work.push((ix, lc, dst.split_off(bytes)));
        }
        run_shards(work, |(ix, lc, d)| self.read_shard(ix, lc, d))
    }

    pub(super) fn read_shard(
        &self,
        indices: &[u32],
        locs: &[(RecordLoc, Codec)],
        mut dst: Destination<'_>,
    ) -> Result<()> {
        self.ensure_dictionary(locs)?;
        let mut decoder = Decoder::new(self.dict.get().map(|d| &**d));
        self.walk_stored(indices, locs, |_, idx, loc, codec, src| {
            let len = loc.logic_length as usize;
            if len == 0 {
                Ok(())
            } else if codec == Codec::Raw {
                // `resolve` checked that a raw record stores exactly its length.
                dst.copy(src);
                Ok(())
            } else {
                decoder.decode(codec, src, &mut dst, len).map_err(|e| self.decode_error(e, idx, loc))
            }
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
    /// use loaderx_core::{Codec, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path().join("s"), StoreOptions::new())?;
    /// store.append(&[b"alpha".as_slice(), b"be", b"gamma"], Codec::Zstd)?;
    /// let lens = store.map_records(&[2, 0], |_, bytes| Ok::<_, loaderx_core::Error>(bytes.len()))?;
    /// assert_eq!(lens, [5, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_records<T, E, F>(&self, indices: &[u32], f: F) -> std::result::Result<Vec<T>, E>
    where
        T: Send,
        E: From<Error> + Send,
        F: Fn(usize, &[u8]) -> std::result::Result<T, E> + Sync,
    {
        let locs = self.resolve(indices)?;
        self.ensure_dictionary(&locs)?;
        let shard = |base: usize, ix: &[u32], lc: &[(RecordLoc, Codec)]| {
            let mut out = Vec::with_capacity(ix.len());
            let mut decoder = Decoder::new(self.dict.get().map(|d| &**d));
            let mut scratch = Vec::new();
            self.walk_stored(ix, lc, |k, idx, loc, codec, src| {
                let bytes = if codec == Codec::Raw || loc.logic_length == 0 {
                    src
                } else {
                    let len = loc.logic_length as usize;
                    fill_vec(&mut scratch, len, |mut dst| {
                        decoder.decode(codec, src, &mut dst, len).map_err(|e| self.decode_error(e, idx, loc))
                    })
                    .map_err(E::from)?;
                    &scratch[..]
                };
                out.push(f(base + k, bytes)?);
                Ok::<(), E>(())
            })?;
            Ok(out)
        };
        let shards = shard_count(Parallelism::Pool, indices.len(), indices.len(), MAP_SHARD_MIN_RECORDS);
        if shards == 1 {
            return shard(0, indices, &locs);
        }
        let per = indices.len().div_ceil(shards);
        let parts = indices
            .par_chunks(per)
            .zip(locs.par_chunks(per))
            .enumerate()
            .map(|(s, (ix, lc))| shard(s * per, ix, lc))
            .collect::<std::result::Result<Vec<_>, E>>()?;
        let mut all = Vec::with_capacity(indices.len());
        for part in parts {
            all.extend(part);
        }
        Ok(all)
    }

    /// Loads the dictionary when a record in `locs` needs it and this handle has none: one
    /// opened before the writer (perhaps in another process) trained it. `dict.zr` is durable
    /// before any record that needs it is committed, so it is there to load now.
    fn ensure_dictionary(&self, locs: &[(RecordLoc, Codec)]) -> Result<()> {
        if self.dict.get().is_none() && locs.iter().any(|(_, c)| *c == Codec::ZstdDict) {
            self.load_dictionary()?;
        }
        Ok(())
    }

    /// The error for a record that does not decompress.
    pub(super) fn decode_error(&self, e: DecodeError, idx: u32, loc: RecordLoc) -> Error {
        match e {
            DecodeError::MissingDictionary => Error::MissingDictionary { path: self.dir.clone() },
            DecodeError::Frame(reason) => {
                Error::CorruptRecord { path: self.chunks.path(loc.chunk_id), index: u64::from(idx), reason }
            }
        }
    }

    /// Walks the records at `indices` (table entries `locs`, from [`Store::resolve`]) in order,
    /// handing `f` each one's position, index, entry, codec and stored bytes (a slice of its
    /// chunk's map; empty for an empty record).
    fn walk_stored<E: From<Error>>(
        &self,
        indices: &[u32],
        locs: &[(RecordLoc, Codec)],
        mut f: impl FnMut(usize, u32, RecordLoc, Codec, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut view: Option<(u16, Arc<MappedFile>)> = None;
        for (k, (&idx, &(loc, codec))) in indices.iter().zip(locs).enumerate() {
            // Records of a random batch are cache misses each: hint the one `PREFETCH_AHEAD`
            // places on (when it is in the chunk in view) so its misses overlap this one's work.
            if let (Some((id, map)), Some((next, _))) = (&view, locs.get(k + PREFETCH_AHEAD))
                && next.chunk_id == *id
            {
                let start = next.offset as usize;
                if let Some(src) = map.bytes().get(start..start + next.phys_length as usize) {
                    prefetch(src);
                }
            }
            if loc.logic_length == 0 {
                f(k, idx, loc, codec, &[])?;
                continue;
            }
            let start = loc.offset as usize;
            let end = start + loc.phys_length as usize;
            let map = match &view {
                Some((id, m)) if *id == loc.chunk_id && m.bytes().len() >= end => m,
                _ => match self.chunks.view(loc.chunk_id, end as u64)? {
                    Some(m) => &view.insert((loc.chunk_id, m)).1,
                    None => {
                        return Err(Error::CorruptRecord {
                            path: self.chunks.path(loc.chunk_id),
                            index: u64::from(idx),
                            reason: format!("truncated chunk: the record needs bytes {start}..{end} of it"),
                        }
                        .into());
                    }
                },
            };
            f(k, idx, loc, codec, &map.bytes()[start..end])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_plan_gives_each_shard_enough_work() {
        let threads = rayon::current_num_threads();
        assert_eq!(shard_count(Parallelism::CallingThread, 1000, 1 << 30, 1), 1);
        assert_eq!(shard_count(Parallelism::Pool, 1000, 100, 128), 1, "too little work to split");
        assert_eq!(shard_count(Parallelism::Pool, 0, 0, 128), 1);
        assert_eq!(shard_count(Parallelism::Pool, 1, 1 << 30, 128), 1, "never more shards than records");
        assert_eq!(shard_count(Parallelism::Pool, 1000, 1 << 30, 128), threads);
        assert_eq!(shard_count(Parallelism::Pool, 1000, 3 * 128, 128), threads.min(3));
    }
}
