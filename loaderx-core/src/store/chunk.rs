//! The chunk files `0.zr`, `1.zr`, ...: densely packed record bytes, read through mappings and
//! written positionally; and [`Placement`], the rule that decides where each record goes.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use super::files::chunk_name;
use super::index::Limits;
use crate::sys::{Access, Dir, MadeIn, MappedFile, read_exact_at, write_all_at};
use crate::{Error, Result};

/// Open handles to a store's chunk files, opened lazily: a reader in another process may see a
/// chunk the writer created after the reader opened the store. Each is opened relative to the
/// store's directory as it was opened ([`Dir`]), never by a path: a directory renamed away (and
/// another store made at its name) or a working directory changed leaves a handle on its own
/// chunks.
///
/// In a process forked from the one that made them, the caches' locks are only tried
/// ([`MadeIn`]): one a thread of the parent held at the fork is held there for good, and a read
/// then does without the cache (a handle opened, a chunk mapped for the one call).
pub(crate) struct Chunks {
    dir: Dir,
    writable: bool,
    files: RwLock<Vec<Arc<File>>>,
    maps: RwLock<Vec<Option<Arc<MappedFile>>>>,
    made_in: MadeIn,
}

impl Chunks {
    pub(crate) fn new(dir: Dir, writable: bool) -> Chunks {
        Chunks {
            dir,
            writable,
            files: RwLock::new(Vec::new()),
            maps: RwLock::new(Vec::new()),
            made_in: MadeIn::here(),
        }
    }

    /// The cached handle of chunk `id`, if any; `None` too in a fork whose parent held the cache.
    fn cached_file(&self, id: u32) -> Option<Arc<File>> {
        self.made_in.read(&self.files).ok()?.get(id as usize).cloned()
    }

    /// The path of chunk `id` (for messages: files are opened through [`Chunks::dir`]).
    pub(crate) fn path(&self, id: u32) -> PathBuf {
        self.dir.join(&chunk_name(id))
    }

    /// The store's directory, held open.
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Opens chunk `id` for reading (a regular file only); `None` when it is missing.
    pub(crate) fn open_read(&self, id: u32) -> Result<Option<File>> {
        match self.dir.open_file(&chunk_name(id), Access::Read) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("open chunk", self.path(id), e)),
        }
    }

    /// Opens chunk `id` for writing, wherever its name leads (made when `create` and missing),
    /// never through the handle cached for it.
    pub(crate) fn open_write(&self, id: u32, create: bool) -> std::io::Result<File> {
        self.dir.open_any(&chunk_name(id), if create { Access::Create } else { Access::ReadWrite })
    }

    /// What chunk `id`'s name leads to now.
    pub(crate) fn stat(&self, id: u32) -> std::io::Result<crate::sys::Stat> {
        self.dir.stat(&chunk_name(id))
    }

    /// The length of chunk `id`'s file now; `None` when it is missing.
    pub(crate) fn file_len(&self, id: u32) -> Result<Option<u64>> {
        match self.dir.stat(&chunk_name(id)) {
            Ok(m) => Ok(Some(m.len)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", self.path(id), e)),
        }
    }

    /// The handle of chunk `id`, opening (the writer: creating) it on first use.
    pub(crate) fn get(&self, id: u32) -> Result<Arc<File>> {
        if let Some(f) = self.cached_file(id) {
            return Ok(f);
        }
        let mut files = match self.made_in.write(&self.files) {
            Ok(files) => files,
            // A fork's reader opens the chunk for this call; a writer never writes from a fork.
            Err(held) if self.writable => {
                return Err(Error::Locked {
                    path: self.path(id),
                    reason: held.reason("the chunk files' cache"),
                });
            }
            Err(_) => {
                let file = self.dir.open_file(&chunk_name(id), Access::Read);
                return file.map(Arc::new).map_err(|e| Error::io("open chunk", self.path(id), e));
            }
        };
        while files.len() <= id as usize {
            let next = u32::try_from(files.len()).expect("chunk ids are u32");
            // A reader takes regular files only (a FIFO would block its open); the writer's
            // open never blocks either, and writes where its chunk files lead.
            let file = if self.writable {
                self.dir.open_any(&chunk_name(next), Access::Create)
            } else {
                self.dir.open_file(&chunk_name(next), Access::Read)
            }
            .map_err(|e| Error::io("open chunk", self.path(next), e))?;
            files.push(Arc::new(file));
        }
        Ok(Arc::clone(&files[id as usize]))
    }

    /// Whether the handle this store holds for chunk `id` (if any) is still the file its path
    /// names: a chunk replaced or removed from outside leaves writes through the handle in a
    /// file with no name.
    pub(crate) fn is_current(&self, id: u32) -> Result<bool> {
        let held = match self.made_in.read(&self.files) {
            Ok(files) => files.get(id as usize).cloned(),
            Err(held) => {
                return Err(Error::Locked {
                    path: self.path(id),
                    reason: held.reason("the chunk files' cache"),
                });
            }
        };
        match held {
            None => Ok(true),
            Some(f) => self.dir.names(&f, &chunk_name(id)).map_err(|e| Error::io("stat", self.path(id), e)),
        }
    }

    /// A read-only mapping of chunk `id` covering at least `end` bytes, mapping (again) when the
    /// cached one is shorter: the tail chunk grows while the store is open. `None` when the file
    /// itself is shorter than `end` (a truncated chunk).
    pub(crate) fn view(&self, id: u32, end: u64) -> Result<Option<Arc<MappedFile>>> {
        if let Ok(maps) = self.made_in.read(&self.maps)
            && let Some(Some(m)) = maps.get(id as usize)
            && m.len() >= end
        {
            return Ok(Some(Arc::clone(m)));
        }
        // A read never creates a chunk (a damaged entry may name any id): a missing one reads
        // as too short, which the caller reports naming the record.
        let file = match self.cached_file(id) {
            Some(f) => f,
            None => match self.open_read(id)? {
                Some(f) => Arc::new(f),
                None => return Ok(None),
            },
        };
        let path = self.path(id);
        let size = || file.metadata().map(|m| m.len()).map_err(|e| Error::io("stat", &path, e));
        let len = size()?;
        if len < end {
            return Ok(None);
        }
        // `None` in a fork whose parent held the cache: the mapping serves this call alone.
        let mut maps = self.made_in.write(&self.maps).ok();
        if let Some(maps) = maps.as_mut() {
            // Sized by an id the store checked against its tail chunk (`Store::chunk_view`), of
            // a file that holds the bytes asked for.
            if maps.len() <= id as usize {
                maps.resize(id as usize + 1, None);
            }
            if let Some(m) = &maps[id as usize]
                && m.len() >= end
            {
                return Ok(Some(Arc::clone(m)));
            }
        }
        // The committed bytes of a chunk are never truncated while the store is open (see
        // `MappedFile::map_prefix`), and only committed bytes are read through a view. Bytes past
        // them may be: a failed append cuts back what it wrote. When that happens between the
        // stat and the mapping, the file as it is now is mapped (it still holds `end`).
        let map = match MappedFile::map_prefix(&file, &path, len) {
            Ok(map) => map,
            Err(_) => match size()? {
                now if now < end => return Ok(None),
                now => MappedFile::map_prefix(&file, &path, now)?,
            },
        };
        let map = Arc::new(map);
        if let Some(maps) = maps.as_mut() {
            maps[id as usize] = Some(Arc::clone(&map));
        }
        Ok(Some(map))
    }

    /// Forgets every handle (after compaction removed files).
    pub(crate) fn reset(&self) {
        self.maps.write().unwrap_or_else(|e| e.into_inner()).clear();
        self.files.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Forgets every mapping, and the handles of the chunks past `tail` (removed, or to be made
    /// anew); the handles up to the tail stay: they hold the records a deferred store has yet to
    /// sync, and tell a file replaced under them from their own (review X4).
    pub(crate) fn reset_past(&self, tail: u32) {
        self.maps.write().unwrap_or_else(|e| e.into_inner()).clear();
        self.files.write().unwrap_or_else(|e| e.into_inner()).truncate(tail as usize + 1);
    }

    /// Bytes of chunk `id` from `offset`, at most `max`, whole `unit`s: what the file holds
    /// there now, read into a buffer (never through a mapping, whose pages past a cut would
    /// fault). For bytes that are not committed, which a failed append may cut off at any
    /// moment: a cut shortens what is returned. `None` when the chunk is missing.
    pub(crate) fn read_uncommitted(
        &self,
        id: u32,
        offset: u64,
        max: u64,
        unit: u64,
    ) -> Result<Option<Vec<u8>>> {
        let path = self.path(id);
        let Some(file) = self.open_read(id)? else { return Ok(None) };
        let size = file.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
        let n = size.saturating_sub(offset).min(max);
        let n = usize::try_from(n - n % unit.max(1)).unwrap_or(0);
        let mut out = vec![0u8; n];
        match crate::sys::read_exact_at(&file, &mut out, offset) {
            Ok(()) => Ok(Some(out)),
            // Cut between the stat and the read: nothing of it is used.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(Some(Vec::new())),
            Err(e) => Err(Error::io("read", path, e)),
        }
    }

    /// Reads exactly `dst.len()` bytes at `offset` of chunk `id`.
    ///
    /// A short read means the table points past the end of the file: reported as `Ok(false)` so
    /// the caller can name the record.
    pub(crate) fn read_exact(&self, file: &File, id: u32, offset: u64, dst: &mut [u8]) -> Result<bool> {
        match read_exact_at(file, dst, offset) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(Error::io("read", self.path(id), e)),
        }
    }

    /// Writes all of `src` at `offset` of chunk `id`.
    pub(crate) fn write_all(&self, id: u32, offset: u64, src: &[u8]) -> Result<()> {
        let file = self.get(id)?;
        write_all_at(&file, src, offset).map_err(|e| Error::io("write", self.path(id), e))
    }

    /// Writes `records` back to back at `offset` of chunk `id`, from where they lie.
    pub(crate) fn write_records<'a>(
        &self,
        id: u32,
        offset: u64,
        records: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<()> {
        let file = self.get(id)?;
        crate::sys::write_records_at(&file, records, offset).map_err(|e| Error::io("write", self.path(id), e))
    }

    /// Starts writing `len` bytes of chunk `id` at `offset` to the disk, without waiting (a hint
    /// for deferred-sync stores: their one sync then finds most of it written).
    pub(crate) fn start_writeback(&self, id: u32, offset: u64, len: u64) -> Result<()> {
        crate::sys::start_writeback(&*self.get(id)?, offset, len);
        Ok(())
    }

    /// Makes chunk `id`'s data durable.
    pub(crate) fn sync(&self, id: u32) -> Result<()> {
        // The handle the records were written through; without one, the file at the name (never
        // made here: a chunk missing is not one to make empty and call synced, review X4).
        let held = self.cached_file(id);
        let file = match held {
            Some(f) => f,
            None => {
                Arc::new(self.open_write(id, false).map_err(|e| Error::io("open chunk", self.path(id), e))?)
            }
        };
        file.sync_data().map_err(|e| Error::io("sync", self.path(id), e))
    }
}

/// The write frontier of a store and the one rule that places records on it: each record gets
/// the next free bytes, a record that would cross the chunk capacity starts a fresh chunk (a
/// record never straddles two), and a frontier that reaches the capacity exactly rolls over to
/// `(chunk + 1, 0)` at once, so a v1 header never has to hold an offset of 2^32.
///
/// Used by append and by compaction alike, in both formats (their [`Limits`] differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    chunk: u32,
    offset: u64,
    capacity: u64,
    limits: Limits,
}

impl Placement {
    /// The frontier `(chunk, offset)` of a store written with chunks of `capacity` bytes (at
    /// most the format's chunk size).
    pub(crate) fn new(chunk: u32, offset: u64, capacity: u64, limits: Limits) -> Placement {
        let mut p = Placement { chunk, offset, capacity: capacity.clamp(1, limits.max_chunk_size), limits };
        p.roll_if_full();
        p
    }

    /// Places a record of `len` stored bytes and returns where it goes, or `None` when the store
    /// has no chunk left for it (nothing is changed then).
    pub(crate) fn place(&mut self, len: u64) -> Option<(u32, u64)> {
        let fits = |p: &Placement| p.offset.checked_add(len).is_some_and(|end| end <= p.capacity);
        if self.offset > 0 && !fits(self) && !self.roll() {
            return None;
        }
        // A record larger than the capacity goes alone at the start of a chunk, but must still
        // end inside the format's chunk size, and its start must be storable.
        let end = self.offset.checked_add(len)?;
        if end > self.limits.max_chunk_size || self.offset >= self.limits.max_chunk_size {
            return None;
        }
        let at = (self.chunk, self.offset);
        self.offset = end;
        self.roll_if_full();
        Some(at)
    }

    /// The frontier as the header stores it, or `None` when it cannot be stored: the last
    /// possible chunk is full to the format's chunk size (2^32 in v1).
    pub(crate) fn frontier(&self) -> Option<(u32, u64)> {
        (self.offset < self.limits.max_chunk_size).then_some((self.chunk, self.offset))
    }

    fn roll_if_full(&mut self) {
        if self.offset >= self.capacity {
            self.roll();
        }
    }

    /// Moves to the start of the next chunk; `false` (and no change) past the last one.
    fn roll(&mut self) -> bool {
        if u64::from(self.chunk) + 1 >= self.limits.max_chunks {
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
    use crate::format::{MAX_CHUNK_SIZE, MAX_CHUNKS};

    const V1: Limits = Limits::V1;

    #[test]
    fn a_frontier_exactly_at_capacity_rolls_to_the_next_chunk() {
        let mut p = Placement::new(0, 0, 4096, V1);
        assert_eq!(p.place(1024), Some((0, 0)));
        assert_eq!(p.place(3072), Some((0, 1024)));
        assert_eq!(p.frontier(), Some((1, 0)));
        assert_eq!(p.place(0), Some((1, 0)), "an empty record lands in the fresh chunk");
    }

    #[test]
    fn a_frontier_at_4_gib_never_wraps_to_offset_zero() {
        let mut p = Placement::new(3, MAX_CHUNK_SIZE - 4096, MAX_CHUNK_SIZE, V1);
        assert_eq!(p.place(4096), Some((3, MAX_CHUNK_SIZE - 4096)));
        assert_eq!(p.frontier(), Some((4, 0)));
        // An old store whose header already sits at the end of a chunk starts in the next one.
        assert_eq!(Placement::new(7, MAX_CHUNK_SIZE, MAX_CHUNK_SIZE, V1).frontier(), Some((8, 0)));
    }

    #[test]
    fn a_record_that_does_not_fit_starts_a_fresh_chunk() {
        let mut p = Placement::new(0, 0, 100, V1);
        assert_eq!(p.place(60), Some((0, 0)));
        assert_eq!(p.place(60), Some((1, 0)));
        // Larger than the capacity: alone in its chunk.
        assert_eq!(p.place(500), Some((2, 0)));
        assert_eq!(p.frontier(), Some((3, 0)));
    }

    #[test]
    fn the_last_chunk_full_is_reported_not_wrapped() {
        let last = MAX_CHUNKS - 1;
        let mut p = Placement::new(last, MAX_CHUNK_SIZE - 10, MAX_CHUNK_SIZE, V1);
        assert_eq!(p.place(11), None, "does not fit and there is no next chunk");
        assert_eq!(p.frontier(), Some((last, MAX_CHUNK_SIZE - 10)), "a refused record changes nothing");
        assert!(p.place(10).is_some());
        assert_eq!(p.frontier(), None, "an offset of 2^32 cannot be stored");
        assert_eq!(p.place(0), None);
    }

    #[test]
    fn v2_chunks_go_past_4_gib_and_past_4096() {
        let mut p = Placement::new(5000, (1 << 33) - 10, 1 << 34, Limits::V2);
        assert_eq!(p.place(10), Some((5000, (1 << 33) - 10)));
        assert_eq!(p.frontier(), Some((5000, 1 << 33)));
        let mut big = Placement::new(0, 0, 1 << 20, Limits::V2);
        assert_eq!(big.place(u64::from(u32::MAX)), Some((0, 0)), "a 4 GiB record alone in its chunk");
        assert_eq!(big.frontier(), Some((1, 0)));
    }
}
