//! [`SharedStore`]: one store handle shared by threads, the way the Python and C faces hand a
//! store out.

use std::path::{Path, PathBuf};
use std::sync::{RwLock, TryLockError};

use super::{OpenMode, Store, StoreOptions};
use crate::{Error, Result};

/// A [`Store`] shared by threads: [`read`](Self::read) calls (gathers, appends, stats, verify,
/// sync: the engine orders what must be ordered itself) run at once, [`write`](Self::write) calls
/// (delete, compact: they need the store alone) wait for them and run alone.
///
/// Forks: a child made by `fork` while a thread of the parent was inside a call holds that
/// call's lock for good (the thread is not in the child). In any process but the one that made
/// the handle the lock is therefore only tried, and one held is [`Error::Locked`] naming the
/// fork instead of a wait that never ends; the engine refuses a fork's writes on its own. A
/// panic inside a call leaves the handle refusing later calls ([`Error::Poisoned`]); the store's
/// files are as the engine's last commit left them.
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
}

impl From<Store> for SharedStore {
    fn from(store: Store) -> SharedStore {
        let path = store.path().to_path_buf();
        SharedStore { store: RwLock::new(store), path, made_in: std::process::id() }
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
    /// [`Error::Locked`] in a forked child whose parent had a `write` call running at the fork;
    /// [`Error::Poisoned`] after a panic inside a call; what `f` returns.
    pub fn read<R>(&self, f: impl FnOnce(&Store) -> Result<R>) -> Result<R> {
        let store = if self.made_in == std::process::id() {
            self.store.read().map_err(|_| self.poisoned())?
        } else {
            self.tried(self.store.try_read())?
        };
        f(&store)
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
                    "this handle was in use by another thread when process {} was forked from \
                     process {}, which opened it: open the store again in this process",
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
