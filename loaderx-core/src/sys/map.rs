//! [`MappedFile`]: the one type that maps a file, for immutable inputs and for store chunks.
#![expect(unsafe_code, reason = "memory-mapping a file is unsafe: the file may change underneath")]

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

#[cfg(unix)]
use memmap2::Advice;
use memmap2::{Mmap, MmapOptions};

use crate::{Error, Result};

/// A file (or its first bytes) mapped read-only, exposing its bytes for planning, converting and
/// gathering.
///
/// An empty file is not mapped (mapping zero bytes fails on most systems); its
/// [`bytes`](MappedFile::bytes) are simply empty. `MappedFile` is `Send + Sync`, so one mapping
/// can be shared by the workers reading the ranges of a plan.
///
/// The file must not be truncated or rewritten while it is mapped (an immutable input):
/// reading a page past a shrunken end raises SIGBUS.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    map: Option<Mmap>,
}

impl MappedFile {
    /// Opens and maps `path` read-only: a file (a link to one followed) whose size is its
    /// content.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when it cannot be opened or mapped, is a directory
    /// (`IsADirectory`), a pipe or a FIFO (its open never waits for a writer; nothing is read
    /// from it), or reports a size of 0 bytes but has content (`InvalidData`: a `/proc` file,
    /// a device), which a plan would find empty (review 49). One that reads empty
    /// (`/dev/null`) is an empty file.
    pub fn open(path: impl AsRef<Path>) -> Result<MappedFile> {
        let path = path.as_ref();
        let mut opts = File::options();
        let file =
            super::io::non_blocking(opts.read(true)).open(path).map_err(|e| Error::io("open", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
        if meta.is_dir() {
            return Err(Error::io("open", path, io::Error::from(io::ErrorKind::IsADirectory)));
        }
        if !meta.is_file() || meta.len() == 0 {
            // No size to map by: empty when it reads empty (`/dev/null`, as mmap-chunker plans
            // it); one with content cannot be mapped. A positional read, so a pipe or FIFO is
            // refused (`ESPIPE`) with nothing taken from it (review 50: a byte was).
            let mut probe = [0u8; 1];
            return match super::io::read_at(&file, &mut probe, 0) {
                Ok(0) => Ok(MappedFile { path: path.to_path_buf(), map: None }),
                Ok(_) => {
                    let why = "it reports a size of 0 bytes but has content (a /proc or /sys file, a \
                               pipe, a device): save it to a file";
                    Err(Error::io("open", path, io::Error::new(io::ErrorKind::InvalidData, why)))
                }
                Err(e) => Err(Error::io("read", path, e)),
            };
        }
        MappedFile::map_prefix(&file, path, meta.len())
    }

    /// Maps the first `len` bytes of `file` (at `path`) read-only.
    ///
    /// The contract that makes this sound is the caller's: none of those bytes is truncated
    /// away while the mapping lives. Inputs keep it by the documented promise of every public
    /// entry point that takes a path (an immutable input); store chunks keep it by the commit
    /// protocol: a committed chunk region is never truncated while the store is open by anyone
    /// (the writer trims only bytes past the committed tail, which no reader reads, and
    /// compaction, which truncates, takes the store exclusively across processes).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when the file is shorter than `len` or cannot be mapped.
    pub(crate) fn map_prefix(file: &File, path: &Path, len: u64) -> Result<MappedFile> {
        let path = path.to_path_buf();
        if len == 0 {
            return Ok(MappedFile { path, map: None });
        }
        let size = file.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
        if size < len {
            return Err(Error::io("mmap", &path, io::Error::from(io::ErrorKind::UnexpectedEof)));
        }
        let len = usize::try_from(len).map_err(|_| {
            Error::io(
                "mmap",
                &path,
                io::Error::new(io::ErrorKind::OutOfMemory, "larger than the address space"),
            )
        })?;
        // SAFETY: a read-only mapping of `len` bytes, all within the file (checked just above),
        // which stay backed by it while mapped (the caller's contract above). Reads through the
        // mapping never race a write to those bytes: inputs are immutable, committed chunk bytes
        // are never rewritten while readers exist.
        let map =
            unsafe { MmapOptions::new().len(len).map(file) }.map_err(|e| Error::io("mmap", &path, e))?;
        Ok(MappedFile { path, map: Some(map) })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes, as mapped.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// Whether nothing is mapped (an empty file).
    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }

    /// Maps all of an open `file` (at `path`).
    pub(crate) fn open_file(file: &File, path: &Path) -> Result<MappedFile> {
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        MappedFile::map_prefix(file, path, len)
    }

    /// Starts reading bytes `offset..offset + len` (clipped to the mapping) into the page cache
    /// and returns without waiting (`MADV_WILLNEED`). A hint: a failure is ignored (the read that
    /// follows faults the pages in as it would have). Off Unix there is no such advice: nothing.
    #[inline]
    pub(crate) fn will_need(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        if let Some(m) = &self.map
            && offset < m.len()
        {
            let _ = m.advise_range(Advice::WillNeed, offset, len.min(m.len() - offset));
        }
        #[cfg(not(unix))]
        let _ = (offset, len);
    }

    /// Whether the page holding byte `offset` is in the page cache (true past the end, and off
    /// Linux).
    #[inline]
    pub(crate) fn resident(&self, offset: usize) -> bool {
        match &self.map {
            Some(m) if offset < m.len() => super::pages::page_resident(m.as_ptr().wrapping_add(offset)),
            _ => true,
        }
    }
}
