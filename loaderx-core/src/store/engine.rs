//! [`Store`]: create, open, append, gather, delete, stats and verify.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::chunk::{Chunks, Placement, chunk_path, sync_dir};
use super::codec::{self, Decoder, Dictionary, Encoded, Encoder};
use super::format::{
    Codec, ENTRY_SIZE, Header, HeaderError, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, MAX_RECORDS,
    META_SIZE, RecordLoc, dict,
};
use super::journal::{self, Journal};
use super::lock::{LOCK_FILE, WriteLock};
use crate::mapped::{MetaMap, Out, gather_to_slice, gather_to_vec, prefetch};
use crate::{Error, Result};

const META_FILE: &str = "meta.zr";
const DICT_FILE: &str = "dict.zr";
/// Write pieces are at most this large, so a big append is written by several threads at once.
const WRITE_PIECE: usize = 8 << 20;
/// Below this many bytes a gather runs on the calling thread: a pool hand-off costs more.
const INLINE_GATHER_BYTES: usize = 256 << 10;

thread_local! {
    /// Set on threads whose gathers must not fan out over the thread pool ([`gather_inline`]).
    static INLINE_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread so that its gathers run on it alone, never split over the rayon
/// pool: for a loader's prefetch threads when there are as many of them as pool threads, where
/// the loader already keeps every core busy with whole batches and a split only adds hand-offs
/// and oversubscription.
pub(crate) fn gather_inline() {
    INLINE_HERE.with(|c| c.set(true));
}

/// Below this many records per thread, [`Store::map_records`] stays on the calling thread.
const MAP_SHARD_MIN: usize = 32;
/// How many records ahead a gather hints the CPU to fetch ([`prefetch`]).
const PREFETCH_AHEAD: usize = 4;
/// Records sampled to train a dictionary on the first `zstd_dict` append.
const DICT_SAMPLES: usize = 4096;

/// A stored or logical record length as the table holds it: records are at most
/// [`MAX_RECORD_SIZE`] and a compressed frame is kept only when smaller than its record, both
/// checked before placement, so this never saturates.
fn stored_len(len: usize) -> u32 {
    debug_assert!(len <= MAX_RECORD_SIZE);
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Options for creating or opening a store for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    chunk_capacity: u64,
    dict_cap: Option<usize>,
    overwrite: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { chunk_capacity: MAX_CHUNK_SIZE, dict_cap: None, overwrite: false }
    }
}

impl StoreOptions {
    /// Default options: 4 GiB chunks, adaptive dictionary size, no overwrite.
    pub fn new() -> Self {
        Self::default()
    }

    /// Largest chunk file the writer fills before rolling to the next (at most 4 GiB; mainly for
    /// tests of rollover).
    pub fn chunk_capacity(mut self, bytes: u64) -> Self {
        self.chunk_capacity = bytes.clamp(1, MAX_CHUNK_SIZE);
        self
    }

    /// Upper bound on the size of a trained `zstd_dict` dictionary.
    pub fn dict_cap(mut self, bytes: Option<usize>) -> Self {
        self.dict_cap = bytes;
        self
    }

    /// Let [`Store::create`] replace an existing store at the path.
    pub fn overwrite(mut self, yes: bool) -> Self {
        self.overwrite = yes;
        self
    }
}

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

/// What [`Store::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Records moved to a lower address.
    pub moved: u64,
    /// Records already in place.
    pub skipped: u64,
    /// Chunk bytes before.
    pub bytes_before: u64,
    /// Chunk bytes after.
    pub bytes_after: u64,
}

struct Writer {
    // Held for the store's life: one writer process at a time.
    _lock: WriteLock,
    // Serialises appends (and dictionary training) between threads of this process.
    append: Mutex<()>,
}

/// A Zrecord store: a dense index space `0..len` of independent byte records.
///
/// Every operation is batch-shaped; one record is a batch of one. `gather` and `append` take
/// `&self` and may run concurrently from many threads; `delete` and `compact` take `&mut self`
/// and, across processes, need the store exclusively.
///
/// # Examples
/// ```
/// use loaderx_core::{Codec, Store, StoreOptions};
/// let dir = tempfile::tempdir()?;
/// let store = Store::create(dir.path().join("s"), StoreOptions::new())?;
/// store.append(&[b"alpha".as_slice(), b"beta", b""], Codec::Zstd)?;
/// assert_eq!(store.gather(&[1, 0])?, vec![b"beta".to_vec(), b"alpha".to_vec()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store {
    dir: PathBuf,
    meta_path: PathBuf,
    meta_file: File,
    meta: MetaMap,
    chunks: Chunks,
    dict: OnceLock<Arc<Dictionary>>,
    writer: Option<Writer>,
    opts: StoreOptions,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("len", &self.len())
            .field("writable", &self.writer.is_some())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Creates an empty store in `dir` (created if missing) and opens it read-write.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when `dir` already holds a store and `opts` does not allow
    /// overwriting it; [`Error::Io`] naming the path for any failing file operation.
    pub fn create(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        let dir = dir.as_ref();
        let meta_path = dir.join(META_FILE);
        if meta_path.exists() {
            if !opts.overwrite {
                return Err(Error::AlreadyExists { path: dir.to_path_buf() });
            }
            remove_store_files(dir)?;
        }
        fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let tmp = dir.join("meta.zr.tmp");
        let file = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        // Sparse: a store with one record allocates a page of its 256 MiB table.
        file.set_len(META_SIZE).map_err(|e| Error::io("size", &tmp, e))?;
        file.write_all_at(bytemuck::bytes_of(&Header::empty()), 0)
            .map_err(|e| Error::io("write", &tmp, e))?;
        file.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
        File::create(chunk_path(dir, 0)).map_err(|e| Error::io("create", chunk_path(dir, 0), e))?;
        fs::rename(&tmp, &meta_path).map_err(|e| Error::io("rename", &tmp, e))?;
        sync_dir(dir)?;
        Store::open_with(dir, opts, true)
    }

    /// Opens an existing store read-only. Any number of readers may have a store open, in this
    /// process and others, while one writer appends; they see committed records only.
    ///
    /// # Errors
    /// [`Error::NotAStore`], [`Error::Version`], [`Error::ByteOrder`] or [`Error::Corrupt`] for a
    /// bad header or metadata file; [`Error::Locked`] while another process deletes or compacts.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(dir.as_ref(), StoreOptions::default(), false)
    }

    /// Opens an existing store read-write, finishing any delete or compaction a crash
    /// interrupted.
    ///
    /// # Errors
    /// As [`Store::open`], and [`Error::Locked`] when another process has it open for writing.
    pub fn open_rw(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        Store::open_with(dir.as_ref(), opts, true)
    }

    fn open_with(dir: &Path, opts: StoreOptions, writable: bool) -> Result<Store> {
        let meta_path = dir.join(META_FILE);
        let meta_file = match OpenOptions::new().read(true).write(writable).open(&meta_path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotAStore { path: dir.to_path_buf(), reason: "it has no meta.zr".into() });
            }
            Err(e) => return Err(Error::io("open", &meta_path, e)),
        };
        let writer = if writable {
            Some(Writer { _lock: WriteLock::acquire(dir)?, append: Mutex::new(()) })
        } else {
            None
        };
        match meta_file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: "another process is deleting from or compacting it".into(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", &meta_path, e)),
        }
        let mut head = [0u8; ENTRY_SIZE];
        let got = meta_file.read_at(&mut head, 0).map_err(|e| Error::io("read", &meta_path, e))?;
        Header::parse(&head[..got]).map_err(|e| header_error(&meta_path, e))?;
        let meta = MetaMap::map(&meta_file, &meta_path, writable)?;
        let store = Store {
            dir: dir.to_path_buf(),
            meta_path,
            meta_file,
            meta,
            chunks: Chunks::new(dir, writable),
            dict: OnceLock::new(),
            writer,
            opts,
        };
        store.load_dictionary()?;
        let jpath = journal::path(dir);
        if jpath.exists() {
            if !writable {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: "an interrupted delete or compaction left journal.zr; open it read-write once to finish it"
                        .into(),
                });
            }
            let _x = store.exclusive()?;
            store.recover()?;
        }
        store.check_chunks()?;
        if writable {
            store.trim_uncommitted()?;
        }
        Ok(store)
    }

    fn load_dictionary(&self) -> Result<()> {
        let path = self.dir.join(DICT_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let raw = dict::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
            path: path.clone(),
            offset,
            reason,
        })?;
        let _ = self.dict.set(Dictionary::new(raw.to_vec()));
        Ok(())
    }

    /// Every chunk up to the tail exists, and for a writer the tail chunk holds its committed
    /// bytes.
    fn check_chunks(&self) -> Result<()> {
        let h = self.meta.header();
        for id in 0..=h.tail_chunk {
            let path = chunk_path(&self.dir, id);
            let len = match fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::Corrupt {
                        path,
                        offset: 0,
                        reason: format!("chunk {id} is missing (the store has chunks 0..={})", h.tail_chunk),
                    });
                }
                Err(e) => return Err(Error::io("stat", &path, e)),
            };
            // Shorter than its committed end: not something a crash leaves (record bytes are
            // durable before the frontier moves), so outside damage. The records before the cut
            // are intact and stay readable; those past it are per-record errors. Appending after
            // the hole would hide the loss, so a writer refuses.
            if id == h.tail_chunk && len < u64::from(h.tail_offset) && self.writer.is_some() {
                return Err(Error::Corrupt {
                    path,
                    offset: len,
                    reason: format!(
                        "truncated: committed data ends at byte {}; the records before byte {len} can still \
                         be read from a read-only open",
                        h.tail_offset
                    ),
                });
            }
        }
        Ok(())
    }

    /// The writer drops what a crashed append left past the committed tail.
    fn trim_uncommitted(&self) -> Result<()> {
        let h = self.meta.header();
        let tail = chunk_path(&self.dir, h.tail_chunk);
        let f = OpenOptions::new().write(true).open(&tail).map_err(|e| Error::io("open", &tail, e))?;
        if f.metadata().map_err(|e| Error::io("stat", &tail, e))?.len() > u64::from(h.tail_offset) {
            f.set_len(u64::from(h.tail_offset)).map_err(|e| Error::io("truncate", &tail, e))?;
        }
        let mut id = u32::from(h.tail_chunk) + 1;
        while id < MAX_CHUNKS {
            let p = chunk_path(&self.dir, id as u16);
            match fs::remove_file(&p) {
                Ok(()) => id += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => return Err(Error::io("remove", &p, e)),
            }
        }
        Ok(())
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of committed records.
    pub fn len(&self) -> u32 {
        self.meta.length()
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when opened read-write.
    pub fn is_writable(&self) -> bool {
        self.writer.is_some()
    }

    /// True when the store has a trained `zstd_dict` dictionary.
    pub fn has_dictionary(&self) -> bool {
        self.dict.get().is_some()
    }

    /// The raw bytes of the trained `zstd_dict` dictionary, if there is one.
    pub fn dictionary(&self) -> Option<&[u8]> {
        self.dict.get().map(|d| d.raw.as_slice())
    }

    fn writer(&self) -> Result<&Writer> {
        self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.dir.clone() })
    }

    fn index_error(&self, index: u32, len: u32) -> Error {
        Error::IndexOutOfRange { path: self.dir.clone(), index: u64::from(index), len: u64::from(len) }
    }

    fn record_error(&self, index: u32, reason: impl Into<String>) -> Error {
        Error::CorruptRecord { path: self.meta_path.clone(), index: u64::from(index), reason: reason.into() }
    }

    // ---------------------------------------------------------------- append

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
        let path = self.dir.join(DICT_FILE);
        let tmp = self.dir.join("dict.zr.tmp");
        fs::write(&tmp, dict::encode(&raw)).map_err(|e| Error::io("write", &tmp, e))?;
        File::open(&tmp).and_then(|f| f.sync_all()).map_err(|e| Error::io("sync", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &tmp, e))?;
        sync_dir(&self.dir)?;
        let _ = self.dict.set(Dictionary::new(raw));
        Ok(true)
    }

    // ---------------------------------------------------------------- gather

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
        gather_to_slice(dst, |out| self.read_all(indices, &locs, out))
    }

    /// Gathers records that are each exactly `record_len` bytes into `dst` (`indices.len() *
    /// record_len` bytes): the fixed-stride gather of a dense dataset.
    ///
    /// # Errors
    /// As [`Store::gather_into`], and [`Error::CorruptRecord`] naming a record of another size.
    pub fn gather_fixed(&self, indices: &[u32], record_len: usize, dst: &mut [u8]) -> Result<()> {
        gather_to_slice(dst, |out| self.gather_fixed_out(indices, record_len, out))
    }

    /// [`Store::gather_fixed`] into a gather destination, possibly uninitialised memory.
    pub(crate) fn gather_fixed_out(&self, indices: &[u32], record_len: usize, dst: Out<'_>) -> Result<()> {
        if Some(dst.remaining()) != indices.len().checked_mul(record_len) {
            return Err(Error::InvalidArgument(format!(
                "gather of {} records of {record_len} bytes needs {} bytes, got {}",
                indices.len(),
                indices.len().saturating_mul(record_len),
                dst.remaining()
            )));
        }
        let locs = self.resolve(indices)?;
        if let Some(k) = locs.iter().position(|(l, _)| l.logic_length as usize != record_len) {
            return Err(self.record_error(
                indices[k],
                format!(
                    "record is {} bytes; the dataset's records are {record_len} bytes",
                    locs[k].0.logic_length
                ),
            ));
        }
        self.read_all(indices, &locs, dst)
    }

    /// Gathers the records at `indices` as owned byte vectors.
    ///
    /// # Errors
    /// As [`Store::gather_into`].
    pub fn gather(&self, indices: &[u32]) -> Result<Vec<Vec<u8>>> {
        let locs = self.resolve(indices)?;
        let mut flat = Vec::new();
        let total = locs.iter().map(|(l, _)| l.logic_length as usize).sum();
        gather_to_vec(&mut flat, total, |out| self.read_all(indices, &locs, out))?;
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

    fn read_all(&self, indices: &[u32], locs: &[(RecordLoc, Codec)], mut dst: Out<'_>) -> Result<()> {
        let threads = rayon::current_num_threads();
        let shards = if dst.remaining() < INLINE_GATHER_BYTES || INLINE_HERE.with(std::cell::Cell::get) {
            1
        } else {
            threads.min(indices.len()).max(1)
        };
        if shards == 1 {
            return self.read_shard(indices, locs, dst);
        }
        // Contiguous blocks of records, each with its slice of the destination.
        let per = indices.len().div_ceil(shards);
        let mut work = Vec::with_capacity(shards);
        for (ix, lc) in indices.chunks(per).zip(locs.chunks(per)) {
            let bytes: usize = lc.iter().map(|(l, _)| l.logic_length as usize).sum();
            work.push((ix, lc, dst.take(bytes)));
        }
        work.into_par_iter().try_for_each(|(ix, lc, d)| self.read_shard(ix, lc, d))
    }

    fn read_shard(&self, indices: &[u32], locs: &[(RecordLoc, Codec)], mut dst: Out<'_>) -> Result<()> {
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
                    gather_to_vec(&mut scratch, len, |mut dst| {
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
        let shards = if INLINE_HERE.with(std::cell::Cell::get) {
            1
        } else {
            rayon::current_num_threads().min(indices.len() / MAP_SHARD_MIN).max(1)
        };
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

    /// The error for a record that does not decompress (`None`: its dictionary is missing).
    fn decode_error(&self, reason: Option<String>, idx: u32, loc: RecordLoc) -> Error {
        match reason {
            None => Error::MissingDictionary { path: self.dir.clone() },
            Some(reason) => {
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
        let mut view: Option<(u16, Arc<memmap2::Mmap>)> = None;
        for (k, (&idx, &(loc, codec))) in indices.iter().zip(locs).enumerate() {
            // Records of a random batch are cache misses each: hint the one `PREFETCH_AHEAD`
            // places on (when it is in the chunk in view) so its misses overlap this one's work.
            if let (Some((id, map)), Some((next, _))) = (&view, locs.get(k + PREFETCH_AHEAD))
                && next.chunk_id == *id
            {
                let start = next.offset as usize;
                if let Some(src) = map.get(start..start + next.phys_length as usize) {
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
                Some((id, m)) if *id == loc.chunk_id && m.len() >= end => m,
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
            f(k, idx, loc, codec, &map[start..end])?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- delete / compact

    /// Takes the store exclusively across processes for the guard's life.
    fn exclusive(&self) -> Result<Exclusive<'_>> {
        match self.meta_file.try_lock() {
            Ok(()) => Ok(Exclusive(&self.meta_file)),
            Err(e) => {
                // A failed conversion may have dropped the shared lock: take it back.
                let _ = self.meta_file.lock_shared();
                match e {
                    TryLockError::WouldBlock => Err(Error::Locked {
                        path: self.dir.clone(),
                        reason: "other handles have it open; delete and compact need it exclusively".into(),
                    }),
                    TryLockError::Error(e) => Err(Error::io("lock", &self.meta_path, e)),
                }
            }
        }
    }

    /// Deletes the records at `indices` by swapping the last record into each hole, in
    /// descending index order (duplicates count once). The index space stays dense `0..len`; an
    /// index is stable only until a delete. The bytes become garbage until [`Store::compact`].
    ///
    /// The change goes through a journal, so a crash leaves either none or all of it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::IndexOutOfRange`] (nothing deleted); [`Error::Locked`] when
    /// other handles have the store open.
    pub fn delete(&mut self, indices: &[u32]) -> Result<()> {
        self.writer()?;
        let len = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
            return Err(self.index_error(bad, len));
        }
        let mut order = indices.to_vec();
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        if order.is_empty() {
            return Ok(());
        }
        let _x = self.exclusive()?;
        let mut changed: std::collections::BTreeMap<u32, RecordLoc> = std::collections::BTreeMap::new();
        let mut n = len;
        for idx in order {
            let last = n - 1;
            if idx != last {
                let moved = changed.get(&last).copied().unwrap_or_else(|| self.meta.entry(last));
                changed.insert(idx, moved);
            }
            n -= 1;
        }
        let entries: Vec<(u32, RecordLoc)> = changed.into_iter().filter(|(i, _)| *i < n).collect();
        self.run_journal(Journal::Delete { entries, new_length: n })
    }

    /// Writes `j` durably, applies it, removes it.
    fn run_journal(&self, j: Journal) -> Result<()> {
        let path = journal::path(&self.dir);
        let tmp = self.dir.join("journal.zr.tmp");
        fs::write(&tmp, j.encode()).map_err(|e| Error::io("write", &tmp, e))?;
        File::open(&tmp).and_then(|f| f.sync_all()).map_err(|e| Error::io("sync", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &tmp, e))?;
        sync_dir(&self.dir)?;
        self.apply(&j)?;
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    /// Re-applies a journal a crash left behind (idempotent).
    fn recover(&self) -> Result<()> {
        let path = journal::path(&self.dir);
        let bytes = fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
        let j = Journal::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
            path: path.clone(),
            offset,
            reason,
        })?;
        self.apply(&j)?;
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        sync_dir(&self.dir)
    }

    fn apply(&self, j: &Journal) -> Result<()> {
        match j {
            Journal::Delete { entries, new_length } => {
                for &(idx, loc) in entries {
                    self.meta.set_entry(idx, loc);
                    self.meta.flush_entries(idx, idx + 1, &self.meta_path)?;
                }
                let mut h = self.meta.header();
                h.length = *new_length;
                self.meta.set_header(h);
                self.meta.flush_header(&self.meta_path)
            }
            Journal::Move { entries, data } => {
                let mut pos = 0usize;
                let mut touched = std::collections::BTreeSet::new();
                for (_, loc) in entries {
                    let n = loc.phys_length as usize;
                    self.chunks.write_all(loc.chunk_id, u64::from(loc.offset), &data[pos..pos + n])?;
                    touched.insert(loc.chunk_id);
                    pos += n;
                }
                for id in touched {
                    self.chunks.sync(id)?;
                }
                for &(idx, loc) in entries {
                    self.meta.set_entry(idx, loc);
                    self.meta.flush_entries(idx, idx + 1, &self.meta_path)?;
                }
                Ok(())
            }
        }
    }

    /// Rewrites the live records densely, in place, in physical order, and drops the chunk files
    /// past the new end.
    ///
    /// A record never moves to a higher address, and each batch of moves goes through the
    /// journal (so a move overlapping the record's own old bytes cannot tear it). An interrupted
    /// compaction leaves a consistent store; running it again finishes the job. Records already
    /// in place are skipped.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Locked`] when other handles have the store open;
    /// [`Error::CorruptRecord`] for a record whose bytes cannot be read.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_limited(usize::MAX)
    }

    /// [`Store::compact`] that stops after `max_batches` journal batches (tests of interrupted
    /// compaction).
    #[doc(hidden)]
    pub fn compact_limited(&mut self, max_batches: usize) -> Result<CompactReport> {
        self.writer()?;
        let _x = self.exclusive()?;
        let before = self.stats()?;
        let mut report = CompactReport { bytes_before: before.chunk_bytes, ..CompactReport::default() };
        let len = self.len();
        let mut live: Vec<(u32, RecordLoc)> = (0..len).map(|i| (i, self.meta.entry(i))).collect();
        live.sort_unstable_by_key(|(_, l)| (l.chunk_id, l.offset));
        let mut place = Placement::new(0, 0, self.opts.chunk_capacity);
        let mut batch: Vec<(u32, RecordLoc)> = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        let mut batches = 0usize;
        for &(idx, loc) in &live {
            loc.validate_limits().map_err(|r| self.record_error(idx, format!("bad table entry: {r}")))?;
            let len = u64::from(loc.phys_length);
            // Records are visited in physical order and repacked from the start. A record must
            // never move up (it would land on bytes not yet moved): with the capacity the store
            // was written with that cannot happen; with a smaller one (this handle's option) a
            // record that would move up stays, and packing goes on after it.
            let here = (loc.chunk_id, loc.offset);
            let (chunk, off) = match place.place(len) {
                Some(to) if to <= here => to,
                _ => {
                    place =
                        Placement::new(loc.chunk_id, u64::from(loc.offset) + len, self.opts.chunk_capacity);
                    here
                }
            };
            if (chunk, off) == here {
                report.skipped += 1;
            } else {
                let start = data.len();
                data.resize(start + len as usize, 0);
                let f = self.chunks.get(loc.chunk_id)?;
                if !self.chunks.read_exact(&f, loc.chunk_id, u64::from(loc.offset), &mut data[start..])? {
                    return Err(self.record_error(idx, "truncated chunk"));
                }
                batch.push((idx, RecordLoc { offset: off, chunk_id: chunk, ..loc }));
                report.moved += 1;
                if data.len() >= 32 << 20 {
                    if batches == max_batches {
                        return Ok(report);
                    }
                    self.run_journal(Journal::Move {
                        entries: std::mem::take(&mut batch),
                        data: std::mem::take(&mut data),
                    })?;
                    batches += 1;
                }
            }
        }
        if !batch.is_empty() {
            if batches == max_batches {
                return Ok(report);
            }
            self.run_journal(Journal::Move { entries: batch, data })?;
        }
        // The packed frontier is never past the old one, so it can always be stored.
        let (chunk, off) = place.frontier().ok_or_else(|| Error::StoreFull {
            path: self.dir.clone(),
            len: u64::from(len),
            adding: 0,
            limit: u64::from(len),
        })?;
        let mut h = self.meta.header();
        let old_tail = h.tail_chunk;
        h.tail_chunk = chunk;
        h.tail_offset = off;
        self.meta.set_header(h);
        self.meta.flush_header(&self.meta_path)?;
        self.chunks.reset();
        let tail = chunk_path(&self.dir, chunk);
        // The packed frontier may have rolled into a chunk that held no record.
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tail)
            .map_err(|e| Error::io("open", &tail, e))?;
        f.set_len(u64::from(off)).map_err(|e| Error::io("truncate", &tail, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &tail, e))?;
        for id in chunk + 1..=old_tail {
            let p = chunk_path(&self.dir, id);
            fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
        sync_dir(&self.dir)?;
        report.bytes_after = self.stats()?.chunk_bytes;
        Ok(report)
    }

    // ---------------------------------------------------------------- stats / verify

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
            let one = gather_to_vec(&mut buf, loc.logic_length as usize, |out| {
                self.read_shard(&[idx], &[(loc, codec)], out)
            });
            if let Err(e) = one {
                bad.push((idx, e));
            }
        }
        bad
    }
}

/// Holds the meta file's exclusive lock; drops back to shared.
struct Exclusive<'a>(&'a File);

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let _ = self.0.lock_shared();
    }
}

fn header_error(path: &Path, e: HeaderError) -> Error {
    let path = path.to_path_buf();
    match e {
        HeaderError::Short(n) => Error::Corrupt {
            path,
            offset: n as u64,
            reason: "truncated header (meta.zr is shorter than 16 bytes)".into(),
        },
        HeaderError::Magic(m) => {
            Error::NotAStore { path, reason: format!("bad magic {m:?}, expected \"ZREC\"") }
        }
        HeaderError::ByteOrder => Error::ByteOrder { path },
        HeaderError::Version(v) => Error::Version { path, found: v, expected: super::format::VERSION },
        HeaderError::Field(reason) => Error::Corrupt { path, offset: 0, reason },
    }
}

/// Removes a dataset directory: the store's files, the schema, then the directory itself if that
/// leaves it empty (anything else in it is kept).
pub(crate) fn remove_store_dir(dir: &Path) -> Result<()> {
    remove_store_files(dir)?;
    for name in ["schema.msgpack", "schema.msgpack.tmp"] {
        let p = dir.join(name);
        if p.exists() {
            fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
    }
    let _ = fs::remove_dir(dir);
    Ok(())
}

/// Removes the files of a store (and nothing else) from `dir`.
pub(crate) fn remove_store_files(dir: &Path) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = matches!(name.as_ref(), "meta.zr" | "dict.zr" | "journal.zr" | LOCK_FILE)
            || name.strip_suffix(".zr").is_some_and(|n| n.parse::<u16>().is_ok())
            || name.ends_with(".tmp");
        if ours {
            let p = entry.path();
            fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
    }
    Ok(())
}
