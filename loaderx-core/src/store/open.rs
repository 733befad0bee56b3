//! [`Store`] and its life: create, open (read-only or as the one writer), the locks, and the
//! recovery an opener runs (finish a journal, trim what a crashed append left).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::chunk::Chunks;
use super::codec::Dictionary;
use super::cold::Residency;
use super::files::{
    DICT_FILE, INDEX_FILE, JOURNAL_FILE, MANIFEST_FILE, META_FILE, SCHEMA_FILE, create_chunk_zero,
    holds_a_store, read_capped_in, refuse_set, refuse_strays, remove_store_files, write_atomic,
    write_atomic_with,
};
use super::index::{Index, v1_header_error, v2_header_error};
use super::lock::{WriteLock, lock_out_readers};
use super::options::StoreOptions;
use crate::format::v2::{self, ChunkSummary, Manifest};
use crate::format::{ENTRY_SIZE, Format, Header, META_SIZE, dict};
use crate::sys::{Access, Dir, IndexMap, MetaMap, open_regular, read_exact_at, write_all_at};

use crate::{Error, Result};

pub(super) struct Writer {
    // Held for the store's life: one writer process at a time.
    pub(super) lock: WriteLock,
    // Serialises appends (and dictionary training) between threads of this process; holds the
    // v2 manifest as of the last commit (`None` for v1, and while `manifest.zr` is removed: a
    // delete or compaction whose chunks' checksums are not yet computed again).
    pub(super) append: Mutex<Option<Manifest>>,
    // With deferred sync: the first chunk and the first entry written since the last sync (taken
    // under `append`).
    pub(super) unsynced: Mutex<Option<(u32, u64)>>,
    // Why this handle stopped: a write failed after its commit and left its view behind the
    // files (a journal half applied or not removed, bytes past a new end not removed). No
    // further read or write goes through it.
    pub(super) halted: std::sync::OnceLock<String>,
    /// Set once a sync failed: a later sync is refused too (a second fsync after a failed one may
    /// succeed without the pages the first could not write).
    pub(super) sync_failed: std::sync::atomic::AtomicBool,
    // The count and frontier this handle last published, or found at its open: a write acts
    // only on a header that still says both (one changed from outside is never written from).
    pub(super) frontier: Mutex<Option<(u64, (u32, u64))>>,
}

/// A Zrecord store: a dense index space `0..len` of independent byte records.
///
/// Every operation is batch-shaped; one record is a batch of one. `gather` and `append` take
/// `&self` and may run concurrently from many threads; `delete` and `compact` take `&mut self`
/// and, across processes, need the store exclusively.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{Codec, Store, StoreOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-store-open-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let store = Store::create(dir.join("s"), StoreOptions::new())?;
/// store.append(&[b"alpha".as_slice(), b"beta", b""], Codec::Zstd)?;
/// assert_eq!(store.gather(&[1, 0])?, vec![b"beta".to_vec(), b"alpha".to_vec()]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store {
    pub(super) dir: PathBuf,
    /// `meta.zr` (v1) or `index.zr` (v2): what readers hold a shared lock on.
    pub(super) index_path: PathBuf,
    pub(super) index_file: File,
    pub(super) index: Index,
    pub(super) chunks: Chunks,
    pub(super) dict: OnceLock<Arc<Dictionary>>,
    pub(super) writer: Option<Writer>,
    pub(super) opts: StoreOptions,
    /// Whether this handle's batches find their pages resident ([`super::cold`]).
    pub(super) residency: Residency,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("format", &self.format())
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
    /// overwriting it; [`Error::NotReplaceable`] when it is a file; [`Error::Io`] naming the
    /// path for any failing file operation. Overwriting a dataset's store removes its
    /// `schema.msgpack` too.
    pub fn create(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        super::not_a_store::refuse_empty(dir.as_ref())?;
        // Absolute before anything is made or locked: the lock's path must lead to it after the
        // working directory changes (the open makes it absolute too).
        if dir.as_ref().to_str().is_some_and(|d| d.starts_with("s3://")) {
            // Refused as `open` refuses it, before a local directory of that name is made.
            return Store::open_locked(dir.as_ref(), opts, true, None);
        }
        let dir = &std::path::absolute(dir.as_ref()).map_err(|e| Error::io("resolve", dir.as_ref(), e))?;
        if opts.format == Format::V1 && opts.layout != v2::Layout::Entries {
            return Err(Error::InvalidArgument(format!(
                "{}: the fixed-stride and compact layouts are v2 layouts; v1 stores keep a 16-byte entry per record",
                dir.display()
            )));
        }
        // Checked before anything is created: a fixed stride that does not fit the chunks.
        let header = opts.v2_header(dir)?;
        // A file (or anything but a directory) where the store was to be: something is there,
        // not a failing disk (look 118, L118-1: it was `Io`, LX_ERR_IO to C).
        if fs::symlink_metadata(dir).is_ok() && !dir.is_dir() {
            // Never replaced, with overwrite or not: no option helps (look 120, L120-3).
            return Err(Error::NotReplaceable {
                path: dir.to_path_buf(),
                reason: "it is a file (or a link to no directory), not a store: remove it or write elsewhere"
                    .into(),
            });
        }
        fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        // The writer lock before anything is looked at or touched: a live writer's store (or
        // another creator's) is `Locked`, with or without overwrite, never removed under it.
        let lock = WriteLock::acquire(dir)?;
        refuse_set(dir)?;
        if holds_a_store(dir) {
            if !opts.overwrite {
                return Err(Error::AlreadyExists { path: dir.to_path_buf() });
            }
            // Readers hold their index shared and open chunks by name as they go: removing the
            // files under them would hand them the new store's bytes through the old index.
            let _readers_gone = lock_out_readers(dir)?;
            remove_store_files(dir)?;
            // A dataset's schema described the records replaced: left, it made the new store's
            // records "damaged" to `verify` and unreadable to the dataset readers (look 118,
            // L118-2). Whoever makes the new store a dataset writes its schema again.
            match fs::remove_file(dir.join(SCHEMA_FILE)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", dir.join(SCHEMA_FILE), e)),
            }
        } else {
            refuse_strays(dir)?;
        }
        // Chunk 0 first: a store whose index exists has every chunk up to its tail.
        create_chunk_zero(dir)?;
        match opts.format {
            Format::V1 => write_atomic_with(dir, META_FILE, |file, tmp| {
                // Sparse: a store with one record allocates a page of its 256 MiB table.
                file.set_len(META_SIZE).map_err(|e| Error::io("size", tmp, e))?;
                write_all_at(file, bytemuck::bytes_of(&Header::empty()), 0)
                    .map_err(|e| Error::io("write", tmp, e))
            })?,
            Format::V2 => {
                let empty = Manifest { count: 0, chunks: vec![ChunkSummary::default()] };
                write_atomic(dir, MANIFEST_FILE, &empty.encode())?;
                // The index last: its rename is what makes the directory a store.
                write_atomic(dir, INDEX_FILE, &header.encode())?;
            }
        }
        Store::open_locked(dir, opts, true, Some(lock))
    }

    /// Opens an existing store read-only. Any number of readers may have a store open, in this
    /// process and others, while one writer appends; they see committed records only.
    ///
    /// # Errors
    /// [`Error::NotAStore`], [`Error::Version`], [`Error::ByteOrder`] or [`Error::Corrupt`] for a
    /// bad header or metadata file; [`Error::Locked`] while another process deletes or compacts.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_impl(dir.as_ref(), StoreOptions::default(), false)
    }

    /// [`Store::open`] with options (read-only): [`StoreOptions::verify_reads`], say.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        Store::open_impl(dir.as_ref(), opts, false)
    }

    /// Opens the store at `dir` as `mode` says ([`OpenMode`](super::OpenMode)): read-only,
    /// read-write (created when `dir` holds no store), or created over a store that is there.
    ///
    /// # Errors
    /// As [`Store::open`], [`Store::open_rw`] and [`Store::create`].
    pub fn open_mode(dir: impl AsRef<Path>, mode: super::OpenMode, opts: StoreOptions) -> Result<Store> {
        let dir = dir.as_ref();
        match mode {
            super::OpenMode::Read => Store::open_with(dir, opts),
            // A directory with an index is a store to open; anything else is created (and a
            // creator refuses what is not its to replace).
            super::OpenMode::Append if dir.join(INDEX_FILE).exists() || dir.join(META_FILE).exists() => {
                Store::open_rw(dir, opts)
            }
            // Another process may make the store between the look above and the creator's
            // lock: then it is opened, never `AlreadyExists` to one who asked to append (look
            // 154, L154-1: told to pass overwrite, which would replace the store).
            super::OpenMode::Append => match Store::create(dir, opts.clone().overwrite(false)) {
                Err(Error::AlreadyExists { .. }) => Store::open_rw(dir, opts),
                made => made,
            },
            super::OpenMode::Create => Store::create(dir, opts.overwrite(true)),
        }
    }

    /// Opens an existing store read-write, finishing any delete or compaction a crash
    /// interrupted.
    ///
    /// # Errors
    /// As [`Store::open`], and [`Error::Locked`] when another process has it open for writing.
    pub fn open_rw(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        Store::open_impl(dir.as_ref(), opts, true)
    }

    fn open_impl(dir: &Path, opts: StoreOptions, writable: bool) -> Result<Store> {
        Store::open_locked(dir, opts, writable, None)
    }

    /// [`Store::open_impl`] with the writer lock already held (`lock`: what [`Store::create`]
    /// took before it touched anything), or taken here when `writable`.
    fn open_locked(dir: &Path, opts: StoreOptions, writable: bool, lock: Option<WriteLock>) -> Result<Store> {
        super::not_a_store::refuse_empty(dir)?;
        // A URL names a store on object storage: read-only, through its own type.
        if dir.to_str().is_some_and(|d| d.starts_with("s3://")) {
            return Err(Error::InvalidArgument(format!(
                "{} is on object storage: open it with remote::RemoteStore::open (feature `remote`), \
                 or as a dataset (DenseSource::open, RaggedSource::open, open_stream)",
                crate::redact_urls(&dir.display().to_string())
            )));
        }
        writable.then(|| refuse_set(dir)).transpose()?;
        // Held open, its files opened relative to it: a handle stays on this store's files when
        // the directory is renamed away or the working directory changes (`sys::Dir`).
        let handle = match Dir::open(dir) {
            Ok(h) => h,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotAStore { path: dir.to_path_buf(), reason: "it does not exist".into() });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(Error::NotAStore {
                    path: dir.to_path_buf(),
                    reason: "it is not a directory".into(),
                });
            }
            Err(e) => return Err(Error::io("open directory", dir, e)),
        };
        let dir = handle.path().to_path_buf();
        let (format, index_path, index_file, writer) = Store::open_and_lock(&handle, writable, lock)?;
        let index = map_index(&index_file, &index_path, format, writable)?;
        let store = Store {
            dir: dir.clone(),
            index_path,
            index_file,
            index,
            chunks: Chunks::new(handle, writable),
            dict: OnceLock::new(),
            writer,
            opts,
            residency: Residency::default(),
        };
        store.load_dictionary()?;
        if writable && format == Format::V2 {
            store.check_frontier()?;
        } else {
            store.check_fixed_frontier()?;
        }

        if dir.join(JOURNAL_FILE).exists() {
            if !writable {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: "an interrupted delete or compaction left journal.zr; open it read-write once to finish \
                             it (a read-write open that refuses the journal says why)"
                        .into(),
                });
            }
            let _x = store.exclusive("finishing an interrupted delete or compaction")?;
            store.recover()?;
        }
        store.check_chunks()?;
        store.check_fixed_chunks()?;
        if writable {
            // A commit killed after its block checksums were written, before its count was,
            // left the open block's summing records that are not committed: told from damage
            // by the records past the frontier, so before they are trimmed.
            if format == Format::V2 {
                store.refuse_manifest_ahead()?;
            }
            store.reseal_tail_block()?;
            store.trim_uncommitted()?;
            if format == Format::V2 {
                // What a migration to v2 left once it had committed.
                let stale = dir.join(META_FILE);
                if stale.exists() {
                    fs::remove_file(&stale).map_err(|e| Error::io("remove", &stale, e))?;
                }
                store.load_manifest()?;
            }
            store.remember_frontier(store.index.len(), store.index.frontier());
            store.adopt_dictionary_id()?;
        }
        Ok(store)
    }

    /// Opens `dir`'s index and takes its locks: the writer's (`lock`, or taken here when
    /// `writable`), then the index's shared one. The index is opened by path before it is locked,
    /// so a store replaced in between (a dataset renamed over it, a create that removed its
    /// files) would leave this handle on the old index and the new store's chunks: once locked,
    /// the paths are checked to name what is held, and the open starts over when they do not.
    ///
    /// # Errors
    /// [`Error::NotAStore`]; [`Error::Locked`] (another writer, a delete, compaction or migration,
    /// or a store replaced again at every attempt); [`Error::Io`] naming the file.
    fn open_and_lock(
        handle: &Dir,
        writable: bool,
        mut lock: Option<WriteLock>,
    ) -> Result<(Format, PathBuf, File, Option<Writer>)> {
        const ATTEMPTS: usize = 8;
        let dir = handle.path();
        for _ in 0..ATTEMPTS {
            // A v2 index wins over a v1 table: a migration to v2 commits by renaming index.zr into
            // place and only then removes meta.zr (and one back to v1 removes index.zr last).
            let v2 = !matches!(handle.stat(INDEX_FILE), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
            let format = if v2 { Format::V2 } else { Format::V1 };
            let index_name = if format == Format::V2 { INDEX_FILE } else { META_FILE };
            let index_path = handle.join(index_name);
            let access = if writable { Access::ReadWrite } else { Access::Read };
            let index_file = match handle.open_file(index_name, access) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match super::not_a_store::missing_index(handle, lock.is_some()) {
                        Some(e) => return Err(e),
                        None => continue,
                    }
                }
                Err(e) => return Err(Error::io("open", &index_path, e)),
            };
            if writable && lock.is_none() {
                lock = Some(WriteLock::acquire(dir)?);
            }
            match super::lock::within_grace(|| index_file.try_lock_shared()) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Locked {
                        path: dir.to_path_buf(),
                        reason: "another process is deleting from, compacting, migrating or replacing it"
                            .into(),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("lock", &index_path, e)),
            }
            // The directory opened is still the one the store's path names (the writer lock was
            // taken by that path): a directory renamed or replaced while it was opened is not
            // tried again through the old handle.
            if !handle.still_named().map_err(|e| Error::io("stat", dir, e))? {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: "its directory was renamed or replaced while it was being opened; open it again"
                        .into(),
                });
            }
            let index_here =
                handle.names(&index_file, index_name).map_err(|e| Error::io("stat", &index_path, e))?;
            if lock.as_ref().is_some_and(|l| !l.still_here()) {
                lock = None;
            }
            if index_here && (lock.is_some() || !writable) {
                let writer = lock.map(|l| Writer {
                    lock: l,
                    append: Mutex::new(None),
                    unsynced: Mutex::new(None),
                    halted: std::sync::OnceLock::new(),
                    sync_failed: std::sync::atomic::AtomicBool::new(false),
                    frontier: Mutex::new(None),
                });
                return Ok((format, index_path, index_file, writer));
            }
            // Replaced under us: the shared lock goes with the file; start over.
        }
        Err(Error::Locked { path: dir.to_path_buf(), reason: "its index keeps being replaced".into() })
    }

    pub(super) fn load_dictionary(&self) -> Result<()> {
        let path = self.dir.join(DICT_FILE);
        let Some(bytes) = read_capped_in(self.chunks.dir(), DICT_FILE, dict::MAX_LEN)? else { return Ok(()) };
        let raw = dict::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
            path: path.clone(),
            offset,
            reason,
            source: None,
        })?;
        if let Some(h) = self.index.v2_header(&self.index_path)?
            && h.dict_id != 0
            && h.dict_id != dict::id(raw)
        {
            return Err(Error::Corrupt {
                path,
                offset: 4,
                reason: format!(
                    "dictionary id {} is not the {} the store's records were compressed with",
                    dict::id(raw),
                    h.dict_id
                ),
                source: None,
            });
        }
        let prepared = Dictionary::new(raw.to_vec()).map_err(|reason| Error::Corrupt {
            path,
            offset: 0,
            reason,
            source: None,
        })?;
        let _ = self.dict.set(prepared);
        Ok(())
    }

    /// The mapping of chunk `id` covering `end` bytes ([`Chunks::view`]), for an id at or below
    /// the tail chunk only: an entry naming any other (damage) reads as a missing chunk, which the
    /// caller reports naming the record, before any cache is sized by it.
    pub(super) fn chunk_view(&self, id: u32, end: u64) -> Result<Option<Arc<crate::sys::MappedFile>>> {
        if id > self.index.frontier().0 {
            return Ok(None);
        }
        self.chunks.view(id, end)
    }

    /// The store's directory, made absolute when the store was opened (a relative path against
    /// the working directory of that moment). The handle reads its own files even if the
    /// directory is renamed afterwards.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of committed records.
    pub fn len(&self) -> u64 {
        self.index.len()
    }

    /// The store's on-disk format.
    pub fn format(&self) -> Format {
        self.index.format()
    }

    /// How the store's index locates records: an entry per record (v1, and v2's default), a
    /// compact entry per raw record ([`StoreOptions::compact_entries`]), or the fixed stride
    /// ([`StoreOptions::fixed_stride`]).
    pub fn layout(&self) -> crate::Layout {
        self.index.layout()
    }

    /// The largest record this store holds (1 MiB in v1, 4 GiB - 1 in v2).
    pub fn max_record_size(&self) -> usize {
        self.format().max_record_size()
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

    pub(super) fn writer(&self) -> Result<&Writer> {
        let w = self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.dir.clone() })?;
        self.refuse_forked()?;
        match w.halted.get() {
            None => Ok(w),
            Some(why) => Err(Error::Locked {
                path: self.dir.clone(),
                reason: format!("this handle writes no more: {why}; open the store again (read-write)"),
            }),
        }
    }

    pub(super) fn index_error(&self, index: u64, len: u64) -> Error {
        Error::IndexOutOfRange { path: self.dir.clone(), index, len }
    }

    pub(super) fn record_error(&self, index: u64, reason: impl Into<String>) -> Error {
        Error::CorruptRecord { path: self.index_path.clone(), index, reason: reason.into(), source: None }
    }

    /// The chunk capacity this handle's writes and compactions use: the v2 header's, or the
    /// handle's option for v1.
    pub(super) fn chunk_capacity(&self) -> Result<u64> {
        Ok(match self.index.v2_header(&self.index_path)? {
            Some(h) => h.chunk_capacity,
            None => self.opts.capacity_for(Format::V1),
        })
    }
}

/// The index of a store, mapped: its header parsed (a v1 one checked whole; a v2 one for its
/// count, which the file must hold, without holes among the published entries).
///
/// # Errors
/// [`Error::Io`] naming `index_path`; the header's errors; [`Error::Corrupt`] for a v2 count past
/// the file or over a hole.
fn map_index(index_file: &File, index_path: &Path, format: Format, writable: bool) -> Result<Index> {
    let size = index_file.metadata().map_err(|e| Error::io("stat", index_path, e))?.len();
    Ok(match format {
        Format::V1 => {
            let mut head = [0u8; ENTRY_SIZE];
            let got = usize::try_from(size).map_or(ENTRY_SIZE, |s| s.min(ENTRY_SIZE));
            read_exact_at(index_file, &mut head[..got], 0).map_err(|e| Error::io("read", index_path, e))?;
            Header::parse(&head[..got]).map_err(|e| v1_header_error(index_path, e))?;
            Index::V1(MetaMap::map(index_file, index_path, writable)?)
        }
        Format::V2 => {
            let mut head = [0u8; v2::HEADER_SIZE];
            let got = usize::try_from(size).map_or(v2::HEADER_SIZE, |s| s.min(v2::HEADER_SIZE));
            read_exact_at(index_file, &mut head[..got], 0).map_err(|e| Error::io("read", index_path, e))?;
            // Readers take only the count; the one writer checks the fields a commit writes
            // below ([`Store::check_frontier`]).
            let h = v2::Header::parse(&head[..got], false).map_err(|e| v2_header_error(index_path, e))?;
            let file = index_file.try_clone().map_err(|e| Error::io("open", index_path, e))?;
            let elem = h.layout.element_size();
            let map = IndexMap::map(file, index_path, writable, elem)?;
            let stride = h.stride();
            let elements = stride.map_or(h.count, |s| s.blocks(h.count));
            map.view(elements)?;
            // Every published entry was written before its count was: a hole among them is
            // a sparse file claiming records it never held (a few KB on disk claiming 2^34
            // entries would otherwise be scanned for hours by `verify`).
            let entries_end = (v2::HEADER_SIZE as u64).saturating_add(elements.saturating_mul(elem as u64));
            if let Some(hole) =
                crate::sys::first_hole(index_file, v2::HEADER_SIZE as u64).filter(|&hole| hole < entries_end)
            {
                return Err(Error::Corrupt {
                    path: index_path.to_path_buf(),
                    offset: hole,
                    reason: format!(
                        "the header publishes {} entries, but the file holds no data from byte {hole} on \
                         (a sparse file: entry {} onwards was never written)",
                        h.count,
                        (hole - v2::HEADER_SIZE as u64) / elem as u64
                    ),
                    source: None,
                });
            }
            match (stride, h.layout) {
                (Some(stride), _) => Index::Fixed(map, stride),
                (None, v2::Layout::Compact) => Index::Compact(map),
                (None, _) => Index::V2(map),
            }
        }
    })
}

/// Cuts the v2 `index.zr` in `dir`, which no handle has open (a finished dataset's staging
/// directory, before it is renamed into place), to the elements its header publishes: a writer
/// grows the file in steps (by doubling) and never shrinks it while the store is open, since a
/// reader's mapping must stay backed. A v1 store (no `index.zr`) is left alone.
///
/// # Errors
/// [`Error::Io`] naming the file; [`Error::Corrupt`] for a header that does not parse.
pub(crate) fn trim_index(dir: &Path) -> Result<()> {
    let path = dir.join(INDEX_FILE);
    let file = match open_regular(OpenOptions::new().read(true).write(true), &path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let mut head = [0u8; v2::HEADER_SIZE];
    read_exact_at(&file, &mut head, 0).map_err(|e| Error::io("read", &path, e))?;
    let h = v2::Header::parse(&head, true).map_err(|e| v2_header_error(&path, e))?;
    let elements = h.stride().map_or(h.count, |s| s.blocks(h.count));
    let len =
        (v2::HEADER_SIZE as u64).saturating_add(elements.saturating_mul(h.layout.element_size() as u64));
    if file.metadata().map_err(|e| Error::io("stat", &path, e))?.len() > len {
        file.set_len(len).map_err(|e| Error::io("truncate", &path, e))?;
        file.sync_all().map_err(|e| Error::io("sync", &path, e))?;
    }
    Ok(())
}
