//! What a write checks before it acts, and what a stopped handle refuses: the frontier this
//! writer published (a header changed from outside is never written from), and reads through a
//! handle whose journal failed part-way.

use super::Store;
use crate::{Error, Result};

impl Store {
    /// Refuses reads through a handle whose journal failed part-way ([`Writer::halted`]): its
    /// index may point at bytes the journal's moves have since overwritten. The files are whole
    /// again once the store is opened again (the journal completes it).
    #[inline]
    pub(super) fn readable(&self) -> Result<()> {
        match self.writer.as_ref().and_then(|w| w.halted.get()) {
            None => Ok(()),
            Some(why) => Err(Error::Locked {
                path: self.dir.clone(),
                reason: format!(
                    "this handle reads no more: {why}, and its view of the index may be stale; open the \
                     store again"
                ),
            }),
        }
    }

    /// [`Error::Locked`] when this handle's write lock was taken by another process (this one
    /// is a fork of it).
    pub(crate) fn refuse_forked(&self) -> Result<()> {
        // A handle carried into a forked child shares its parent's write lock: both appending
        // at once would overwrite each other's acknowledged records. Checked before any of the
        // handle's own locks, which a thread of the parent may have held when the fork came
        // (the child's copy of such a lock is held for good).
        match &self.writer {
            Some(w) if !w.lock.held_here() => Err(Error::Locked {
                path: self.dir.clone(),
                reason: format!(
                    "this handle was opened for writing by process {}, of which process {} is a fork: \
                     open the store in this process to write to it",
                    w.lock.holder(),
                    std::process::id()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The count and frontier a write places, trims or publishes from: refused when the header
    /// no longer vouches for them (its checksum failing under this writer) or says other than
    /// this writer published (changed from outside: an older header put back, the same frontier
    /// with fewer records), before anything is written over committed bytes, a count taken from
    /// outside published again or a damaged frontier certified again.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the index.
    pub(super) fn committed_for_writing(&self) -> Result<(u64, (u32, u64))> {
        self.refuse_forked()?;
        let remembered =
            self.writer.as_ref().and_then(|w| *w.frontier.lock().unwrap_or_else(|e| e.into_inner()));
        // The header checked below is the one of the file this handle holds: it must still be
        // the store's (a copy renamed over it, a restore, would take every later write to a
        // file with no name, acknowledged and lost).
        self.refuse_replaced(&self.index_file, &self.index_path)?;
        // And the write lock must still be the one at its name: removed (a "stale lock" clean-up)
        // or replaced, it would let a second writer in beside this one.
        if let Some(w) = &self.writer
            && !w.lock.still_here()
        {
            return Err(self.replaced(w.lock.path()));
        }
        match self.index.checked_state() {
            Some(found) if remembered.is_none_or(|r| r == found) => Ok(found),
            found => Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: 0,
                reason: match (found, remembered) {
                    (Some((n, f)), Some((rn, r))) => format!(
                        "its header says {n} records to chunk {}, byte {}; this writer published {rn} records \
                         to chunk {}, byte {} (changed from outside?): nothing written",
                        f.0, f.1, r.0, r.1
                    ),
                    _ => "its header's frontier or count fails its checksum under this writer (changed from \
                          outside?): nothing written; `loaderx verify` says what differs"
                        .into(),
                },
                source: None,
            }),
        }
    }

    /// The frontier of [`Store::committed_for_writing`].
    ///
    /// # Errors
    /// As [`Store::committed_for_writing`].
    pub(super) fn frontier_for_writing(&self) -> Result<(u32, u64)> {
        self.committed_for_writing().map(|(_, f)| f)
    }

    /// Refuses, and stops this handle, when `path` no longer names `held` (replaced or removed
    /// from outside under this writer): nothing is written.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `path`; [`Error::Io`] when it cannot be examined.
    pub(super) fn refuse_replaced(&self, held: &std::fs::File, path: &std::path::Path) -> Result<()> {
        if crate::sys::same_file(held, path).map_err(|e| Error::io("stat", path, e))? {
            return Ok(());
        }
        Err(self.replaced(path))
    }

    /// [`Store::refuse_replaced`] for the tail chunk `chunk`, written from byte `offset`: the
    /// handle held for it, or (none held yet) a file holding at least the committed bytes.
    pub(super) fn refuse_tail_replaced(&self, chunk: u32, offset: u64) -> Result<()> {
        let path = self.chunks.path(chunk);
        let short = || self.chunks.file_len(chunk).map_or(true, |len| len.is_none_or(|l| l < offset));
        if self.chunks.is_current(chunk)? && (offset == 0 || !short()) {
            return Ok(());
        }
        Err(self.replaced(&path))
    }

    /// Refuses when a chunk of `ids` this handle holds open no longer has its name: what was
    /// just written or synced through the handle is in a file no name leads to.
    pub(super) fn refuse_chunks_replaced(&self, ids: std::ops::RangeInclusive<u32>) -> Result<()> {
        for id in ids {
            if !self.chunks.is_current(id)? {
                return Err(self.replaced(&self.chunks.path(id)));
            }
        }
        Ok(())
    }

    /// The store's directory, for a file operation by path: checked first to still name the
    /// directory this handle holds open (`sys::Dir`). A directory renamed away, another made at
    /// its name, would otherwise take the operation into another store. (The window between
    /// the check and the operation stays: R1's class, docs/reliability.md.)
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the directory (a writer's handle stops), or the stat's error.
    pub(super) fn here(&self) -> Result<&std::path::Path> {
        match self.chunks.dir().still_named() {
            Ok(true) => Ok(&self.dir),
            Ok(false) => Err(self.replaced(&self.dir)),
            Err(e) => Err(Error::io("stat", &self.dir, e)),
        }
    }

    /// Makes the entries of the directory this handle holds durable (its descriptor synced,
    /// whatever its path leads to now).
    pub(super) fn sync_held_dir(&self) -> Result<()> {
        self.chunks.dir().sync().map_err(|e| Error::io("sync directory", &self.dir, e))
    }

    /// The chunks the index's frontier names (a bound for reading the manifest).
    pub(super) fn known_chunks(&self) -> u64 {
        u64::from(self.index.frontier().0) + 1
    }

    /// The error of a file replaced, removed or cut under this writer, the handle stopped.
    pub(super) fn replaced(&self, path: &std::path::Path) -> Error {
        let why = format!("{} was replaced or removed under this writer", path.display());
        self.halt_handle(why.clone());
        Error::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: format!(
                "replaced, removed or cut under this writer (its name leads to another file now): \
                 nothing written, and this handle stops; open the store again ({why})"
            ),
            source: None,
        }
    }

    /// Records `count` and `frontier` as the ones this handle published last.
    pub(super) fn remember_frontier(&self, count: u64, frontier: (u32, u64)) {
        if let Some(w) = &self.writer {
            *w.frontier.lock().unwrap_or_else(|e| e.into_inner()) = Some((count, frontier));
        }
    }

    /// [`Index::publish`](super::index::Index::publish), the count and frontier remembered once
    /// the header holds them (also when only its msync failed).
    pub(super) fn publish(&self, count: u64, frontier: (u32, u64), durable: bool) -> Result<()> {
        let published = self.index.publish(count, frontier, &self.index_path, durable);
        if self.index.len() == count && self.index.frontier() == frontier {
            self.remember_frontier(count, frontier);
        }
        published
    }
}
