//! The chunk files `0.zr`, `1.zr`, ...: densely packed record bytes, read through mappings and
//! written positionally; and [`Placement`], the rule that decides where each record goes.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::files::chunk_path;
use crate::format::{MAX_CHUNK_SIZE, MAX_CHUNKS};
use crate::sys::{MappedFile, read_exact_at, write_all_at};
use crate::{Error, Result};

/// Open handles to a store's chunk files, opened lazily: a reader in another process may see a
/// chunk the writer created after the reader opened the store.
pub(crate) struct Chunks {
    dir: PathBuf,
    writable: bool,
    files: RwLock<Vec<Arc<File>>>,
    maps: RwLock<Vec<Option<Arc<MappedFile>>>>,
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
    pub(crate) fn view(&self, id: u16, end: u64) -> Result<Option<Arc<MappedFile>>> {
        {
            let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
            if let Some(Some(m)) = maps.get(id as usize)
                && m.len() >= end
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
            && m.len() >= end
        {
            return Ok(Some(Arc::clone(m)));
        }
        let path = self.path(id);
        let len = file.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
        if len < end {
            return Ok(None);
        }
        // The committed bytes of a chunk are never truncated while the store is open (see
        // `MappedFile::map_prefix`), and only committed bytes are read through a view.
        let map = Arc::new(MappedFile::map_prefix(&file, &path, len)?);
        maps[id as usize] = Some(Arc::clone(&map));
        Ok(Some(map))
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
        match read_exact_at(file, dst, offset) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(Error::io("read", self.path(id), e)),
        }
    }

    /// Writes all of `src` at `offset` of chunk `id`.
    pub(crate) fn write_all(&self, id: u16, offset: u64, src: &[u8]) -> Result<()> {
        let file = self.get(id)?;
        write_all_at(&file, src, offset).map_err(|e| Error::io("write", self.path(id), e))
    }

    /// Makes chunk `id`'s data durable.
    pub(crate) fn sync(&self, id: u16) -> Result<()> {
        self.get(id)?.sync_data().map_err(|e| Error::io("sync", self.path(id), e))
    }
}

/// The write frontier of a store and the one rule that places records on it: each record gets
/// the next free bytes, a record that would cross the chunk capacity starts a fresh chunk (a
/// record never straddles two), and a frontier that reaches the capacity exactly rolls over to
/// `(chunk + 1, 0)` at once, so the header never has to hold an offset of 2^32.
///
/// Used by append and by compaction alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    chunk: u16,
    offset: u64,
    capacity: u64,
}

impl Placement {
    /// The frontier `(chunk, offset)` of a store written with chunks of `capacity` bytes (at
    /// most [`MAX_CHUNK_SIZE`]).
    pub(crate) fn new(chunk: u16, offset: u64, capacity: u64) -> Placement {
        let mut p = Placement { chunk, offset, capacity: capacity.clamp(1, MAX_CHUNK_SIZE) };
        p.roll_if_full();
        p
    }

    /// Places a record of `len` stored bytes and returns where it goes, or `None` when the store
    /// has no chunk left for it (nothing is changed then).
    pub(crate) fn place(&mut self, len: u64) -> Option<(u16, u32)> {
        let before = *self;
        if self.offset > 0 && self.offset + len > self.capacity && !self.roll() {
            return None;
        }
        let Ok(at) = u32::try_from(self.offset) else {
            *self = before;
            return None;
        };
        let chunk = self.chunk;
        self.offset += len;
        self.roll_if_full();
        Some((chunk, at))
    }

    /// The frontier as the header stores it, or `None` when it cannot be stored: the last
    /// possible chunk is full to its 4 GiB end.
    pub(crate) fn frontier(&self) -> Option<(u16, u32)> {
        Some((self.chunk, u32::try_from(self.offset).ok()?))
    }

    fn roll_if_full(&mut self) {
        if self.offset >= self.capacity {
            self.roll();
        }
    }

    /// Moves to the start of the next chunk; `false` (and no change) past the last one.
    fn roll(&mut self) -> bool {
        if u32::from(self.chunk) + 1 >= MAX_CHUNKS {
            return false;
        }
        self.chunk += 1;
        self.offset = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frontier_exactly_at_capacity_rolls_to_the_next_chunk() {
        let mut p = Placement::new(0, 0, 4096);
        assert_eq!(p.place(1024), Some((0, 0)));
        assert_eq!(p.place(3072), Some((0, 1024)));
        assert_eq!(p.frontier(), Some((1, 0)));
        assert_eq!(p.place(0), Some((1, 0)), "an empty record lands in the fresh chunk");
    }

    #[test]
    fn a_frontier_at_4_gib_never_wraps_to_offset_zero() {
        let mut p = Placement::new(3, MAX_CHUNK_SIZE - 4096, MAX_CHUNK_SIZE);
        assert_eq!(p.place(4096), Some((3, (MAX_CHUNK_SIZE - 4096) as u32)));
        assert_eq!(p.frontier(), Some((4, 0)));
        // An old store whose header already sits at the end of a chunk starts in the next one.
        assert_eq!(Placement::new(7, MAX_CHUNK_SIZE, MAX_CHUNK_SIZE).frontier(), Some((8, 0)));
    }

    #[test]
    fn a_record_that_does_not_fit_starts_a_fresh_chunk() {
        let mut p = Placement::new(0, 0, 100);
        assert_eq!(p.place(60), Some((0, 0)));
        assert_eq!(p.place(60), Some((1, 0)));
        // Larger than the capacity: alone in its chunk.
        assert_eq!(p.place(500), Some((2, 0)));
        assert_eq!(p.frontier(), Some((3, 0)));
    }

    #[test]
    fn the_last_chunk_full_is_reported_not_wrapped() {
        let last = (MAX_CHUNKS - 1) as u16;
        let mut p = Placement::new(last, MAX_CHUNK_SIZE - 10, MAX_CHUNK_SIZE);
        assert_eq!(p.place(11), None, "does not fit and there is no next chunk");
        assert_eq!(
            p.frontier(),
            Some((last, (MAX_CHUNK_SIZE - 10) as u32)),
            "a refused record changes nothing"
        );
        assert!(p.place(10).is_some());
        assert_eq!(p.frontier(), None, "an offset of 2^32 cannot be stored");
        assert_eq!(p.place(0), None);
    }
}
