//! [`SharedStore`]: one store handle shared by threads, the way the Python and C faces hand a
//! store out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, TryLockError};

use super::lock::StoreKey;
use super::{OpenMode, Store, StoreOptions};
use crate::sys::PerProcess;
use crate::{Error, Result};

/// A [`Store`] shared by threads: [`read`](Self::read) calls (gathers, appends, stats, verify,
/// sync: the engine orders what must be ordered itself) run at once, [`write`](Self::write) calls
/// (delete, compact: they need the store alone) wait for them and run alone.
///
/// Forks: a child made by `fork` while a thread of the parent was inside a call holds that
/// call's lock for good (the thread is not in the child). In any process but the one that made
/// the handle the lock is therefore only tried, and one held is [`Error::Locked`] naming the
/// fork instead of a wait that never ends; the engine refuses a fork's writes on its own. A
/// panic inside a `write` call (delete, compaction: they hold the lock alone) leaves the handle
/// refusing later calls ([`Error::Poisoned`]); the store's files are as the engine's last commit
/// left them.
///
/// A forked child reads a read-write handle through a read-only handle of its own, opened at its
/// first call (look 64, L64-1): the parent's shared lock on the index is the child's too (one
/// open file description), so the parent's delete and compaction found it alone and rewrote the
/// records under the child's reads, which came back with other bytes as success. The child's
/// own handle holds a lock of its own, which keeps the parent's rewrites out while it lives, and
/// sees the store as it is when the child opens it. Writes from a fork stay refused. A process
/// forked from that child carries the child's handle, never closed there (its lock is the
/// child's too), and makes its own: the parent's rewrites wait for the child and every process
/// forked from it after its first read to end, whether or not they read (look 69, L69-5).
///
/// What a face adds is its own: Python releases the GIL around the calls, and both run a forked
/// child's calls on a pool of its own ([`crate::fork::child_pool`]).
#[derive(Debug)]
pub struct SharedStore {
    store: RwLock<Store>,
    /// The store's directory, for errors that cannot take the lock to ask.
    path: PathBuf,
    /// The process that made the handle.
    made_in: u32,
    /// Whether the handle writes: a forked child then reads through `forked`.
    writable: bool,
    opts: StoreOptions,
    /// The store's identity (its index file's), which a child's own handle must have: the path
    /// may lead elsewhere by then (a link repointed, the directory renamed and another made).
    key: Option<StoreKey>,
    /// A forked child's own read-only handle.
    forked: PerProcess<Store>,
}

impl From<Store> for SharedStore {
    fn from(store: Store) -> SharedStore {
        let path = store.path().to_path_buf();
        let (writable, opts) = (store.is_writable(), store.opts.clone());
        let key = if writable { store.key().ok() } else { None };
        SharedStore {
            store: RwLock::new(store),
            path,
            made_in: std::process::id(),
            writable,
            opts,
            key,
            forked: PerProcess::new(),
        }
    }
}

impl SharedStore {
    /// Opens the store at `path` in `mode` ([`Store::open_mode`]) to share it.
    ///
    /// # Errors
    /// As [`Store::open_mode`].
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, opts: StoreOptions) -> Result<SharedStore> {
        Store::open_mode(path, mode, opts).map(SharedStore::from)
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the store beside other `read` calls.
    ///
    /// # Errors
    /// [`Error::Locked`] in a forked child whose parent had a `write` call running at the fork,
    /// or (a read-write handle) while the parent rewrites the store, and for a write from a
    /// fork; [`Error::Poisoned`] after a panic inside a call; what `f` returns.
    pub fn read<R>(&self, f: impl FnOnce(&Store) -> Result<R>) -> Result<R> {
        let store = if self.made_in == std::process::id() {
            self.store.read().map_err(|_| self.poisoned())?
        } else if self.writable {
            // A write through the child's read-only handle is a write from a fork: refused.
            return f(&*self.own_reader()?).map_err(|e| match e {
                Error::ReadOnly { .. } => self.in_a_fork("writes from a fork are refused"),
                e => e,
            });
        } else {
            self.tried(self.store.try_read())?
        };
        f(&store)
    }

    /// A forked child's own read-only handle of the store (opened at its first call; one made
    /// for the call alone where the slot was held at a fork of the child's own). One of the
    /// process this one was forked from stays undropped: its lock is that process's too.
    fn own_reader(&self) -> Result<Arc<Store>> {
        self.forked.get(|| self.open_own())
    }

    /// A read-only handle of the store this handle opened, in this (forked) process.
    fn open_own(&self) -> Result<Store> {
        let store = Store::open_mode(&self.path, OpenMode::Read, self.opts.clone()).map_err(|e| match e {
            // The parent rewriting it now (delete, compaction): the child's reads wait for none.
            Error::Locked { reason, .. } => {
                self.in_a_fork(&format!("no handle of its own opened ({reason})"))
            }
            e => e,
        })?;
        // The store this handle opened, not whatever its path leads to now (look 65, L65-1: a
        // child read another store's records as success); a handle whose identity could not be
        // taken refuses.
        if self.key.is_none() || store.key().ok() != self.key {
            return Err(self.in_a_fork(&format!(
                "{} is no longer the store this handle opened (renamed, replaced or relinked since)",
                self.path.display()
            )));
        }
        Ok(store)
    }

    fn in_a_fork(&self, what: &str) -> Error {
        Error::Locked {
            path: self.path.clone(),
            reason: format!(
                "{what}: process {} was forked from process {}, which opened this handle, or \
                 from a process forked from that one; open the store again in this process",
                std::process::id(),
                self.made_in
            ),
        }
    }

    /// Runs `f` on the store alone.
    ///
    /// # Errors
    /// [`Error::Locked`] in a forked child whose parent had any call running at the fork;
    /// [`Error::Poisoned`] after a panic inside a call; what `f` returns.
    pub fn write<R>(&self, f: impl FnOnce(&mut Store) -> Result<R>) -> Result<R> {
        let mut store = if self.made_in == std::process::id() {
            self.store.write().map_err(|_| self.poisoned())?
        } else {
            self.tried(self.store.try_write())?
        };
        f(&mut store)
    }

    fn poisoned(&self) -> Error {
        Error::Poisoned { path: self.path.clone() }
    }

    fn tried<G>(&self, r: std::result::Result<G, TryLockError<G>>) -> Result<G> {
        r.map_err(|e| match e {
            TryLockError::Poisoned(_) => self.poisoned(),
            TryLockError::WouldBlock => Error::Locked {
                path: self.path.clone(),
                reason: format!(
                    "this handle was in use by another thread when process {} was forked (from \
                     process {}, which opened it, or from a process forked from that one): open \
                     the store again in this process",
                    std::process::id(),
                    self.made_in
                ),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside a call leaves the handle refusing later calls, naming the store.
    #[test]
    fn a_panic_inside_a_call_poisons_the_handle() {
        let dir = tempfile::tempdir().unwrap();
        let shared = SharedStore::open(dir.path().join("s"), OpenMode::Create, StoreOptions::new()).unwrap();
        shared.read(|s| s.append(&[b"a".as_slice()], crate::Codec::Raw)).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.write(|_| -> Result<()> { panic!("inside a call") })
        }));
        assert!(panicked.is_err());
        let e = shared.read(|s| Ok(s.len())).unwrap_err();
        assert!(matches!(&e, Error::Poisoned { path } if path.ends_with("s")), "{e}");
        assert!(e.to_string().contains("open the store again"), "{e}");
    }
}
