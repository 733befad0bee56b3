//! [`RemoteStore`]: a read-only store on object storage, its batches fetched ([`super::fetch`]),
//! checked and decoded ([`crate::store`]'s `decode_record`) into the caller's destination.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use bytes::Bytes;

use super::cache::PageCache;
use super::fetch::{ChunkObject, Counters, Fetched};
use super::index::MAX_SMALL_FILE;
use super::link::{Link, Links};
use super::options::RemoteOptions;
use super::url::parse_url;
use crate::format::v2::Entry;
use crate::store::{
    Backing, DecodeError, META_FILE, Parallelism, RecordError, Stored, VarFill, decode_record,
};
use crate::sys::{Destination, MadeIn};
use crate::{Codec, Error, Result};

/// `verify` reads in blocks of at most this many records and (unless one record is larger)
/// bytes, so that an intact store of large records never needs a large batch.
const VERIFY_BLOCK_RECORDS: u64 = 4096;

const VERIFY_BLOCK_BYTES: u64 = 64 << 20;

/// [`RemoteStore::summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteSummary {
    /// Records.
    pub records: u64,
    /// Their bytes as handed out.
    pub logical_bytes: u64,
    /// Their bytes as stored.
    pub stored_bytes: u64,
    /// Records per codec.
    pub codecs: crate::store::CodecCounts,
}

/// What a remote store's reads cost: [`RemoteStore::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Requests sent (GET and HEAD), retries not counted.
    pub requests: u64,
    /// Bytes that came back in range responses.
    pub bytes_fetched: u64,
    /// Cache pages found (open in this process or on disk).
    pub pages_hit: u64,
    /// Cache pages fetched and written.
    pub pages_filled: u64,
    /// Cache pages this process removed to keep the directory under its limit.
    pub pages_evicted: u64,
    /// Pages fetched but not written to the cache (a full disk, say); served all the same.
    pub cache_errors: u64,
}

/// A read-only v2 store on S3-compatible object storage; see the [module documentation](crate::remote).
pub struct RemoteStore {
    pub(super) url: String,
    pub(super) prefix: String,
    /// The client and runtime of this process (a forked child makes its own).
    pub(super) links: Links,
    pub(super) entries: Vec<Entry>,
    pub(super) dict: Option<Arc<crate::store::Dictionary>>,
    pub(super) options: RemoteOptions,
    pub(super) cache: Option<PageCache>,
    /// Each chunk object's token, from its first response: a later one with another token is
    /// [`Error::Changed`].
    pub(super) objects: RwLock<HashMap<u32, ChunkObject>>,
    /// The process `objects` was made in: a child forked while a thread held it refuses.
    pub(super) made_in: MadeIn,
    /// Entry numbers sorted by (chunk, offset), for checking filled pages (built at the first).
    pub(super) by_place: OnceLock<Vec<u64>>,
    pub(super) counters: Counters,
    /// Whether records carry a crc32c (v2), checked on every read.
    pub(super) checksums: bool,
    /// A v2 store of the fixed-stride layout and its record count: `entries` are its blocks.
    pub(super) stride: Option<(crate::format::v2::Stride, u64)>,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore").field("url", &self.url).field("records", &self.entries.len()).finish()
    }
}

impl RemoteStore {
    /// Opens the store at `url` (`s3://bucket/prefix/store`): its index fetched and checked.
    ///
    /// # Errors
    /// [`Error::Remote`] naming the URL for a request that failed after its retries;
    /// [`Error::Corrupt`] naming the object for a damaged index or dictionary;
    /// [`Error::NotAStore`] naming the URL when neither `index.zr` nor `meta.zr` is there;
    /// [`Error::InvalidArgument`] for a bad URL or cache option.
    pub fn open(url: &str, options: RemoteOptions) -> Result<RemoteStore> {
        let (bucket, prefix) = parse_url(url)?;
        let links = Links::new(Link::new(url, options.build(&bucket)?)?);
        let mut r = RemoteStore {
            url: url.to_string(),
            prefix,
            links,
            entries: Vec::new(),
            dict: None,
            cache: None,
            objects: RwLock::new(HashMap::new()),
            made_in: MadeIn::here(),
            by_place: OnceLock::new(),
            counters: Counters::default(),
            checksums: true,
            stride: None,
            options,
        };
        if let Some((dir, limit, page)) = r.options.cache_config()? {
            r.cache = Some(PageCache::new(&dir, limit, page, url)?);
        }
        let index = match r.cached_index() {
            Ok(b) => b,
            Err(_) if r.exists(META_FILE) => {
                r.open_v1()?;
                return Ok(r);
            }
            Err(Error::Remote { reason, .. })
                if reason.contains("not found") || reason.contains("NotFound") =>
            {
                return Err(Error::NotAStore {
                    path: PathBuf::from(url),
                    reason: "neither index.zr (v2) nor meta.zr (v1) is there (or the bucket does not exist)"
                        .into(),
                });
            }
            Err(e) => return Err(e),
        };
        r.open_v2(&index)?;
        Ok(r)
    }

    /// Records in the store.
    pub fn len(&self) -> u64 {
        self.stride.map_or(self.entries.len() as u64, |(_, count)| count)
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The URL it was opened at.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Each record's logical length (from the index: nothing is fetched), for sizing the
    /// batch's buffer.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the URL; [`Error::BatchTooLarge`] for a batch over
    /// [`RemoteOptions::memory_limit`].
    pub fn record_lens(&self, indices: &[u64]) -> Result<Vec<u32>> {
        if let Some((stride, _)) = self.stride {
            self.check_stride_batch(indices)?;
            return Ok(vec![stride.record_size as u32; indices.len()]);
        }
        self.check_batch(indices)?;
        indices.iter().map(|&i| self.entry(i).map(|e| e.logical)).collect()
    }

    /// The logical bytes of the batch `indices`, checked first: its records as handed out and
    /// their stored bytes (both are held at once), by the index's lengths, within
    /// [`RemoteOptions::memory_limit`]. The index may be hostile: this is what keeps its claims
    /// from sizing a request or an allocation.
    pub(super) fn check_batch(&self, indices: &[u64]) -> Result<u64> {
        let (mut logical, mut stored) = (0u64, 0u64);
        for &i in indices {
            let e = self.entry(i)?;
            logical = logical.saturating_add(u64::from(e.logical));
            stored = stored.saturating_add(u64::from(e.stored));
        }
        let (bytes, limit) = (logical.saturating_add(stored), self.options.memory());
        if bytes > limit {
            return Err(Error::BatchTooLarge {
                path: PathBuf::from(&self.url),
                records: indices.len() as u64,
                bytes,
                limit,
            });
        }
        Ok(logical)
    }

    pub(super) fn entry(&self, i: u64) -> Result<&Entry> {
        self.entries.get(i as usize).ok_or_else(|| Error::IndexOutOfRange {
            path: PathBuf::from(&self.url),
            index: i,
            len: self.len(),
        })
    }

    /// The store's format: v2, or v1 (records read without checksums).
    pub fn format(&self) -> crate::Format {
        if self.checksums { crate::Format::V2 } else { crate::Format::V1 }
    }

    /// What this store's reads have cost so far.
    pub fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RemoteStats {
            requests: get(&c.requests),
            bytes_fetched: get(&c.bytes_fetched),
            pages_hit: get(&c.pages_hit),
            pages_filled: get(&c.pages_filled),
            pages_evicted: get(&c.pages_evicted),
            cache_errors: get(&c.cache_errors),
        }
    }

    pub(super) fn corrupt(&self, index: u64, reason: String) -> Error {
        Error::CorruptRecord { path: PathBuf::from(&self.url), index, reason, source: None }
    }

    /// The error for record `index` that does not decode: the decompressor's error its source
    /// (a local decoder's, never an object store's: it holds no credential).
    fn undecodable(&self, index: u64, e: DecodeError) -> Error {
        match e {
            DecodeError::Frame { reason, source } => {
                Error::CorruptRecord { path: PathBuf::from(&self.url), index, reason, source }
            }
            DecodeError::MissingDictionary => Error::MissingDictionary { path: PathBuf::from(&self.url) },
        }
    }

    pub(super) fn crc_mismatch(&self, index: u64) -> Error {
        self.corrupt(index, "its crc32c does not match the index (fetched from the object store)".into())
    }

    /// The records of `indices`, in order: fetched in coalesced, concurrent range requests,
    /// each checked against its crc32c and decoded.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::BatchTooLarge`] for a batch over
    /// [`RemoteOptions::memory_limit`] (nothing fetched); [`Error::Remote`] naming the chunk's
    /// URL and byte range after the last retry; [`Error::CorruptRecord`] naming the URL and index
    /// for a record whose checksum does not match or that does not decode. Never a partial
    /// record.
    pub fn gather(&self, indices: &[u64]) -> Result<Vec<Vec<u8>>> {
        if let Some((stride, _)) = self.stride {
            let flat = self.gather_stride_flat(indices)?;
            return Ok(flat.chunks(stride.record_size as usize).map(<[u8]>::to_vec).collect());
        }
        let flat = self.gather_flat(indices)?;
        let mut at = 0usize;
        Ok(indices
            .iter()
            .map(|&i| {
                // `gather_flat` wrote exactly the sum of these lengths.
                let l = self.entries[i as usize].logical as usize;
                let r = flat[at..at + l].to_vec();
                at += l;
                r
            })
            .collect())
    }

    /// The records of `indices` back to back. The stored bytes are fetched before the output
    /// is allocated (by a fallible reservation): a length the server cannot back with bytes
    /// fails as a request, never as an allocation.
    pub(super) fn gather_flat(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let total = self.check_batch(indices)?;
        let total = usize::try_from(total).map_err(|_| Error::BatchTooLarge {
            path: PathBuf::from(&self.url),
            records: indices.len() as u64,
            bytes: total,
            limit: usize::MAX as u64,
        })?;
        let fetched = self.fetch(indices)?;
        let mut flat = Vec::new();
        crate::sys::fill_vec(&mut flat, total, |mut d| self.write_fetched(indices, &fetched, &mut d))?;
        Ok(flat)
    }

    /// [`RemoteStore::gather`] straight into `dst` (the records back to back, in order): one
    /// copy (or decode) from the response into the destination.
    pub(crate) fn gather_to(&self, indices: &[u64], dst: &mut Destination<'_>) -> Result<()> {
        if self.stride.is_some() {
            return self.gather_stride_to(indices, dst);
        }
        self.check_batch(indices)?;
        let fetched = self.fetch(indices)?;
        self.write_fetched(indices, &fetched, dst)
    }

    /// Writes the records of `indices` from what [`RemoteStore::fetch`] returned for them into
    /// `dst`, each checked against its crc32c (and decoded).
    pub(super) fn write_fetched(
        &self,
        indices: &[u64],
        (fetched, place): &Fetched,
        dst: &mut Destination<'_>,
    ) -> Result<()> {
        let mut decoder = crate::store::Decoder::new(self.dict.as_deref());
        let mut summer = crate::sys::Summer::default();
        let outside = |i: u64| self.corrupt(i, "outside its request".into());
        for (k, &i) in indices.iter().enumerate() {
            let e = self.entry(i)?;
            let codec =
                Codec::from_tag(e.codec).ok_or_else(|| self.corrupt(i, format!("codec tag {}", e.codec)))?;
            let (n, at, pieces) = place[k];
            let (one, many, refetched, refetched_part): (_, _, Bytes, [&[u8]; 1]);
            let mut parts: &[&[u8]] = if pieces == 1 {
                let piece = fetched.get(n).ok_or_else(|| outside(i))?;
                one = [piece.get(at..at + e.stored as usize).ok_or_else(|| outside(i))?];
                &one
            } else {
                many = self.stored_parts(i, e.stored as usize, fetched, place[k])?;
                &many
            };
            // Through the cache a record's bytes may come from a page file damaged since it was
            // filled: they are checked before a byte is written and, on a mismatch, the record's
            // pages are dropped and fetched once from the store (only then is it an error).
            let checked = match &self.cache {
                Some(cache) if self.checksums => {
                    let crc = parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p));
                    if crc != e.crc {
                        refetched = self.refetch(cache, i, e)?;
                        refetched_part = [&refetched[..]];
                        parts = &refetched_part;
                    }
                    true
                }
                _ => false,
            };
            if let [_, _, ..] = parts
                && codec == Codec::Raw
            {
                // Across cache pages: copied a page's part at a time (checked above).
                for part in parts {
                    dst.copy(part);
                }
                continue;
            }
            // A compressed record's decoder takes its frame in one piece.
            let whole;
            let stored: &[u8] = if let [stored] = parts {
                stored
            } else {
                whole = parts.concat();
                &whole
            };
            let rec = Stored { bytes: stored, codec, logical: e.logical as usize, crc: e.crc };
            // A raw record is summed in the copy's pass.
            decode_record(rec, self.checksums && !checked, &mut decoder, Some(&mut summer), dst).map_err(
                |why| match why {
                    RecordError::Checksum(_) => self.crc_mismatch(i),
                    RecordError::Decode(e) => self.undecodable(i, e),
                },
            )?;
        }
        Ok(())
    }

    /// Reads every record and checks it ([`RemoteStore::gather`] in blocks of at most 4096
    /// records and 64 MiB (or the memory limit, when less), a larger record alone): the records checked, or the first damaged
    /// one as the error.
    ///
    /// # Errors
    /// As [`RemoteStore::gather`]; [`Error::BatchTooLarge`] for a record that alone is over
    /// [`RemoteOptions::memory_limit`].
    pub fn verify(&self) -> Result<u64> {
        // Blocks fit the memory limit too: an intact store verifies under any limit that holds
        // its largest record.
        let cap = VERIFY_BLOCK_BYTES.min(self.options.memory());
        // A fixed-stride store's entries are its blocks: each fetched whole and checked.
        let entries = self.entries.len() as u64;
        let mut start = 0u64;
        while start < entries {
            let (mut end, mut bytes) = (start, 0u64);
            while end < entries && end - start < VERIFY_BLOCK_RECORDS {
                let e = &self.entries[end as usize];
                let b = u64::from(e.logical) + u64::from(e.stored);
                if end > start && bytes + b > cap {
                    break;
                }
                bytes += b;
                end += 1;
            }
            self.gather_flat(&(start..end).collect::<Vec<_>>()).map_err(|e| self.block_error(e))?;
            start = end;
        }
        Ok(self.len())
    }

    /// `e` of a fixed-stride store's entry (a block) as an error of its records: the first named,
    /// the block's records said (an entry's index is not a record's; look 77). Else `e`.
    fn block_error(&self, e: Error) -> Error {
        match (e, self.stride) {
            (Error::CorruptRecord { path, index, reason, source }, Some((stride, count))) => {
                let records = stride.block_records(index, count);
                Error::CorruptRecord {
                    path,
                    index: records.start,
                    reason: format!("its block (records {records:?}): {reason}"),
                    source,
                }
            }
            (e, _) => e,
        }
    }

    /// The store's identity, as [`Store::identity`](crate::Store) computes a local store's (its
    /// count, 16 records sampled, every checksum of its index; a v1 store's entries): what a store
    /// set pushed with its parts keeps of each, checked when the set is read (look 80).
    ///
    /// # Errors
    /// As [`RemoteStore::gather`].
    pub(crate) fn identity(&self) -> Result<crate::store::Ids> {
        let mut id = crate::store::Identity::new(self.len());
        let samples = id.samples();
        let records = match self.gather(&samples) {
            // Records too large to fetch at once: one at a time.
            Err(Error::BatchTooLarge { .. }) => {
                samples.iter().map(|&i| Ok(self.gather(&[i])?.remove(0))).collect::<Result<Vec<_>>>()?
            }
            other => other?,
        };
        for rec in &records {
            id.record(rec);
        }
        // A fixed-stride store's entries are its blocks, each with the block's checksum.
        for e in &self.entries {
            if self.checksums { id.checksum(e.crc) } else { id.v1_entry(e) }
        }
        Ok(id.finish())
    }

    /// What the index says of the store, nothing else fetched: records, logical bytes, stored
    /// bytes, and records per codec.
    pub fn summary(&self) -> RemoteSummary {
        let mut s = RemoteSummary { records: self.len(), ..RemoteSummary::default() };
        for e in &self.entries {
            s.logical_bytes += u64::from(e.logical);
            s.stored_bytes += u64::from(e.stored);
            s.codecs.count_tag(e.codec);
        }
        if self.stride.is_some() {
            s.codecs = crate::store::CodecCounts::default();
            s.codecs[Codec::Raw] = self.len();
        }
        s
    }

    /// A small file of the store directory (`schema.msgpack`), whole: at most 64 MiB.
    ///
    /// # Errors
    /// [`Error::Remote`] naming it, for a failed request or a response that declares more than
    /// 64 MiB or sends other than it declares.
    pub fn get_file(&self, name: &str) -> Result<Vec<u8>> {
        Ok(self.get_whole(name, MAX_SMALL_FILE, None)?.to_vec())
    }
}

/// A remote store read as a dataset's records: the batch fetched as one (its requests already
/// concurrent, so `Parallelism` does not apply).
impl Backing for RemoteStore {
    fn len(&self) -> u64 {
        RemoteStore::len(self)
    }

    /// The count and every checksum of the index fetched at open (a v1 store's entries, which
    /// keep none: its places and lengths).
    fn fingerprint(&self) -> Option<u64> {
        let mut id = crate::store::Identity::new(self.len());
        for e in &self.entries {
            if self.checksums { id.checksum(e.crc) } else { id.v1_entry(e) }
        }
        Some(id.finish().now)
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        RemoteStore::record_lens(self, &widen(indices))
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
        _par: Parallelism,
    ) -> Result<()> {
        let wide = widen(indices);
        // Every length checked before anything is fetched: a record of another size would
        // misplace every record after it.
        if let Some((k, len)) = RemoteStore::record_lens(self, &wide)?
            .iter()
            .enumerate()
            .find(|(_, l)| **l as usize != record_len)
        {
            return Err(Error::CorruptRecord {
                path: PathBuf::from(&self.url),
                index: wide[k],
                reason: format!("{len} bytes, the schema's items are {record_len}"),
                source: None,
            });
        }
        self.gather_to(&wide, &mut dst)
    }

    fn gather_var(&self, indices: &[u32], _par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        let wide = widen(indices);
        let lens = RemoteStore::record_lens(self, &wide)?;
        fill(&mut lens.into_iter(), &mut |mut dst| self.gather_to(&wide, &mut dst))
    }
}

/// A dataset's `u32` indices as the remote store's `u64` ones.
fn widen(indices: &[u32]) -> Vec<u64> {
    indices.iter().map(|&i| u64::from(i)).collect()
}
