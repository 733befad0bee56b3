//! [`Store::sync`]: what a deferred-sync store's appends committed, made durable (chunks, the
//! directory held, entries, the count, the manifest), and the chunk syncs a durable append runs.

use rayon::prelude::*;

use super::Store;
use super::files::{MANIFEST_FILE, replace_unsynced_in};
use crate::{Error, Result};

impl Store {
    /// Makes every record appended so far durable, in the order a commit does: record bytes,
    /// then entries, then the count. Only a store opened with [`StoreOptions::deferred_sync`]
    /// has anything to do here; on any other it returns at once.
    ///
    /// [`StoreOptions::deferred_sync`]: crate::StoreOptions::deferred_sync
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Committed`] for any failure (the records the appends
    /// acknowledged stand, but may not be durable), its cause the
    /// [`source`](std::error::Error::source). The handle then stops: a failed fsync may have
    /// dropped the pages it could not write, and a second one would report them written.
    pub fn sync(&self) -> Result<()> {
        self.sync_impl()
    }

    /// [`Store::sync`] before an operation that has not started yet (a delete, a compaction, a
    /// dataset's finish): a failure is its cause, not [`Error::Committed`], which would say the
    /// operation stands.
    pub(crate) fn sync_before(&self) -> Result<()> {
        self.sync_impl().map_err(|e| match e {
            Error::Committed { source, .. } => *source,
            e => e,
        })
    }

    pub(super) fn sync_impl(&self) -> Result<()> {
        // Also on a handle stopped after a failure ([`Store::halt_handle`]): what it committed
        // before is made durable all the same (a delete or compaction syncs before it starts, so
        // a stopped one has nothing left to sync).
        let writer = self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.dir.clone() })?;
        self.refuse_forked()?;
        let manifest = writer.append.lock().unwrap_or_else(|e| e.into_inner());
        let mut unsynced = writer.unsynced.lock().unwrap_or_else(|e| e.into_inner());
        let Some((chunk, entry)) = *unsynced else { return Ok(()) };
        if writer.sync_failed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Committed {
                path: self.dir.clone(),
                what: format!("records {entry}..{}", self.len().max(entry)),
                remedy: "a sync of this handle failed before, and a second one could report pages the first \
                         could not write as durable: open the store again (read-write) and verify it",
                source: Box::new(Error::Locked {
                    path: self.dir.clone(),
                    reason: "this handle's sync failed before".into(),
                }),
            });
        }
        let synced = (|| -> Result<u64> {
            let (count, frontier) = self.committed_for_writing()?;
            self.sync_chunks(chunk..=frontier.0, true)?;
            // A chunk replaced since its records were written: the fsync reached a file no name
            // leads to, and the records are not durable where the store reads them.
            self.refuse_chunks_replaced(chunk..=frontier.0)?;
            self.index.flush_entries(entry, count - entry, &self.index_path)?;
            self.publish(count, frontier, true)?;
            Ok(count)
        })();
        match synced {
            Ok(_) => {
                *unsynced = None;
                // Derived from the durable files and rebuilt from them when behind (as an
                // append's): a failed write of it fails nothing (review Y2).
                if let Some(manifest) = manifest.as_ref() {
                    let _ = replace_unsynced_in(self.chunks.dir(), MANIFEST_FILE, &manifest.encode());
                }
                Ok(())
            }
            // The records the appends acknowledged stand whatever failed here: never an error
            // that says nothing was written (a caller would append them again). The handle
            // stops: after a failed fsync the kernel may have dropped the pages it could not
            // write, and a second fsync would succeed without them (review X3).
            Err(e) => {
                writer.sync_failed.store(true, std::sync::atomic::Ordering::Release);
                self.halt_handle(format!("a sync failed ({})", crate::error_chain(&e)));
                Err(Error::Committed {
                    path: self.dir.clone(),
                    what: format!("records {entry}..{}", self.len().max(entry)),
                    remedy: "they are in the store but may not be durable: open the store again (read-write) \
                             and verify it",
                    source: Box::new(e),
                })
            }
        }
    }

    /// Syncs chunks `ids` in parallel, then (`new_files`) the directory that names them (the one
    /// this handle holds).
    pub(super) fn sync_chunks(&self, ids: std::ops::RangeInclusive<u32>, new_files: bool) -> Result<()> {
        let touched: Vec<u32> = ids.collect();
        touched.par_iter().try_for_each(|&id| self.chunks.sync(id))?;
        if new_files {
            self.sync_held_dir()?;
        }
        Ok(())
    }
}
