//! The chunk files `0.zr`, `1.zr`, ...: densely packed record bytes, read and written positionally.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use memmap2::Mmap;

use crate::mapped::map_chunk;
use crate::{Error, Result};

/// The path of chunk `id` in `dir`.
pub(crate) fn chunk_path(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("{id}.zr"))
}

/// Open handles to a store's chunk files, opened lazily: a reader in another process may see a
/// chunk the writer created after the reader opened the store.
pub(crate) struct Chunks {
    dir: PathBuf,
    writable: bool,
    files: RwLock<Vec<Arc<File>>>,
    maps: RwLock<Vec<Option<Arc<Mmap>>>>,
}

impl Chunks {
    pub(crate) fn new(dir: &Path, writable: bool) -> Chunks {
        Chunks {
            dir: dir.to_path_buf(),
            writable,
            files: RwLock::new(Vec::new()),
            maps: RwLock::new(Vec::new()),
        }
    }

    pub(crate) fn path(&self, id: u16) -> PathBuf {
        chunk_path(&self.dir, id)
    }

    /// The handle of chunk `id`, opening (the writer: creating) it on first use.
    pub(crate) fn get(&self, id: u16) -> Result<Arc<File>> {
        if let Some(f) = self.files.read().unwrap_or_else(|e| e.into_inner()).get(id as usize) {
            return Ok(Arc::clone(f));
        }
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        while files.len() <= id as usize {
            let next = files.len() as u16;
            let path = self.path(next);
            let file = OpenOptions::new()
                .read(true)
                .write(self.writable)
                .create(self.writable)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io("open chunk", &path, e))?;
            files.push(Arc::new(file));
        }
        Ok(Arc::clone(&files[id as usize]))
    }

    /// A read-only mapping of chunk `id` covering at least `end` bytes, mapping (again) when the
    /// cached one is shorter: the tail chunk grows while the store is open. `None` when the file
    /// itself is shorter than `end` (a truncated chunk).
    pub(crate) fn view(&self, id: u16, end: u64) -> Result<Option<Arc<Mmap>>> {
        {
            let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
            if let Some(Some(m)) = maps.get(id as usize)
                && m.len() as u64 >= end
            {
                return Ok(Some(Arc::clone(m)));
            }
        }
        let file = self.get(id)?;
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        if maps.len() <= id as usize {
            maps.resize(id as usize + 1, None);
        }
        if let Some(m) = &maps[id as usize]
            && m.len() as u64 >= end
        {
            return Ok(Some(Arc::clone(m)));
        }
        let path = self.path(id);
        let len = file.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
        if len < end {
            return Ok(None);
        }
        let map = map_chunk(&file, &path, len)?.map(Arc::new);
        maps[id as usize] = map.clone();
        Ok(map)
    }

    /// Forgets every handle (after compaction removed files).
    pub(crate) fn reset(&self) {
        self.maps.write().unwrap_or_else(|e| e.into_inner()).clear();
        self.files.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Reads exactly `dst.len()` bytes at `offset` of chunk `id`.
    ///
    /// A short read means the table points past the end of the file: reported as `Ok(false)` so
    /// the caller can name the record.
    pub(crate) fn read_exact(&self, file: &File, id: u16, offset: u64, dst: &mut [u8]) -> Result<bool> {
        match file.read_exact_at(dst, offset) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(Error::io("read", self.path(id), e)),
        }
    }

    /// Writes all of `src` at `offset` of chunk `id`.
    pub(crate) fn write_all(&self, id: u16, offset: u64, src: &[u8]) -> Result<()> {
        let file = self.get(id)?;
        file.write_all_at(src, offset).map_err(|e| Error::io("write", self.path(id), e))
    }

    /// Makes chunk `id`'s data durable.
    pub(crate) fn sync(&self, id: u16) -> Result<()> {
        self.get(id)?.sync_data().map_err(|e| Error::io("sync", self.path(id), e))
    }
}

/// Makes a directory entry change (create, rename, remove) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync directory", dir, e))
}
