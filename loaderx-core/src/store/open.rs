//! [`Store`] and its life: create, open (read-only or as the one writer), the locks, and the
//! recovery an opener runs (finish a journal, trim what a crashed append left).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::chunk::Chunks;
use super::codec::Dictionary;
use super::files::{DICT_FILE, JOURNAL_FILE, META_FILE, chunk_path, remove_store_files, write_atomic_with};
use super::lock::WriteLock;
use crate::format::{ENTRY_SIZE, Header, HeaderError, MAX_CHUNK_SIZE, MAX_CHUNKS, META_SIZE, dict};
use crate::sys::{MetaMap, read_exact_at, write_all_at};
use crate::{Error, Result};

/// Options for creating or opening a store for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    pub(super) chunk_capacity: u64,
    pub(super) dict_cap: Option<usize>,
    pub(super) overwrite: bool,
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

pub(super) struct Writer {
    // Held for the store's life: one writer process at a time.
    _lock: WriteLock,
    // Serialises appends (and dictionary training) between threads of this process.
    pub(super) append: Mutex<()>,
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
    pub(super) dir: PathBuf,
    pub(super) meta_path: PathBuf,
    pub(super) meta_file: File,
    pub(super) meta: MetaMap,
    pub(super) chunks: Chunks,
    pub(super) dict: OnceLock<Arc<Dictionary>>,
    pub(super) writer: Option<Writer>,
    pub(super) opts: StoreOptions,
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
        // Chunk 0 first: a store whose meta.zr exists has every chunk up to its tail.
        File::create(chunk_path(dir, 0)).map_err(|e| Error::io("create", chunk_path(dir, 0), e))?;
        write_atomic_with(dir, META_FILE, |file, tmp| {
            // Sparse: a store with one record allocates a page of its 256 MiB table.
            file.set_len(META_SIZE).map_err(|e| Error::io("size", tmp, e))?;
            write_all_at(file, bytemuck::bytes_of(&Header::empty()), 0)
                .map_err(|e| Error::io("write", tmp, e))
        })?;
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
        let size = meta_file.metadata().map_err(|e| Error::io("stat", &meta_path, e))?.len();
        let mut head = [0u8; ENTRY_SIZE];
        let got = usize::try_from(size).map_or(ENTRY_SIZE, |s| s.min(ENTRY_SIZE));
        read_exact_at(&meta_file, &mut head[..got], 0).map_err(|e| Error::io("read", &meta_path, e))?;
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
        if dir.join(JOURNAL_FILE).exists() {
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

    pub(super) fn load_dictionary(&self) -> Result<()> {
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
    pub(super) fn check_chunks(&self) -> Result<()> {
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
    pub(super) fn trim_uncommitted(&self) -> Result<()> {
        let h = self.meta.header();
        let tail = chunk_path(&self.dir, h.tail_chunk);
        let f = OpenOptions::new().write(true).open(&tail).map_err(|e| Error::io("open", &tail, e))?;
        if f.metadata().map_err(|e| Error::io("stat", &tail, e))?.len() > u64::from(h.tail_offset) {
            f.set_len(u64::from(h.tail_offset)).map_err(|e| Error::io("truncate", &tail, e))?;
        }
        let mut id = u32::from(h.tail_chunk) + 1;
        while id < MAX_CHUNKS {
            let p = chunk_path(&self.dir, id as u16); // id < MAX_CHUNKS = 2^12
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

    pub(super) fn writer(&self) -> Result<&Writer> {
        self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.dir.clone() })
    }

    pub(super) fn index_error(&self, index: u32, len: u32) -> Error {
        Error::IndexOutOfRange { path: self.dir.clone(), index: u64::from(index), len: u64::from(len) }
    }

    pub(super) fn record_error(&self, index: u32, reason: impl Into<String>) -> Error {
        Error::CorruptRecord { path: self.meta_path.clone(), index: u64::from(index), reason: reason.into() }
    }

    /// Takes the store exclusively across processes for the guard's life.
    pub(super) fn exclusive(&self) -> Result<Exclusive<'_>> {
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
}

/// Holds the meta file's exclusive lock; drops back to shared.
pub(super) struct Exclusive<'a>(&'a File);

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
        HeaderError::Version(v) => Error::Version { path, found: v, expected: crate::format::VERSION },
        HeaderError::Field(reason) => Error::Corrupt { path, offset: 0, reason },
    }
}
