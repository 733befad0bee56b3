//! Store calls that survive `fork`: a child's calls run on a pool of its own, and a handle's lock
//! is only tried there.
//!
//! rayon's global pool starts once per process; a child made by `fork` (a C program's workers, a
//! Python host's `multiprocessing` over ctypes) inherits the pool's bookkeeping but none of its
//! threads, so a batched read the engine splits over it waits for good on helpers that are not
//! there. Every store call therefore runs through [`on_own_pool`]: in the process that made the
//! library's first store call, as it is; in a process forked from it, inside a one-thread pool
//! the child starts for itself (one thread: a forked worker is one of several processes that
//! share the cores).
//!
//! A handle's own lock has the same hazard: a thread of the parent inside a call when the fork
//! came holds it, and the child's copy is then held for good. [`MadeIn`] keeps the process a
//! handle was made in; in any other process its lock is only tried, and one held is
//! `LX_ERR_LOCKED` naming the fork instead of a wait that never ends.

use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use crate::error::{Failure, IO, LOCKED, Outcome};

/// The process of the library's first store call: rayon's global pool, if any store call
/// started it, is this process's.
static FIRST_CALL_IN: OnceLock<u32> = OnceLock::new();

/// Runs the store call `f` on this process's pool: the global one where the library's first
/// store call was made (or this is that call), a one-thread pool of the child's own in a fork.
pub(crate) fn on_own_pool<R: Send>(f: impl FnOnce() -> Outcome<R> + Send) -> Outcome<R> {
    let pid = std::process::id();
    if *FIRST_CALL_IN.get_or_init(|| pid) == pid {
        return f();
    }
    let pool = loaderx_core::fork::child_pool().map_err(|e| Failure { code: IO, message: e.to_string() })?;
    pool.install(f)
}

/// The process a handle was made in. Its lock is taken as usual there; in a forked child it is
/// only tried (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MadeIn(u32);

impl MadeIn {
    /// This process.
    pub(crate) fn here() -> MadeIn {
        MadeIn(std::process::id())
    }

    /// `lock` shared.
    pub(crate) fn read<T>(self, lock: &RwLock<T>) -> Outcome<RwLockReadGuard<'_, T>> {
        if self.0 == std::process::id() {
            lock.read().map_err(|_| Failure::poisoned())
        } else {
            self.tried(lock.try_read())
        }
    }

    /// `lock` alone.
    pub(crate) fn write<T>(self, lock: &RwLock<T>) -> Outcome<RwLockWriteGuard<'_, T>> {
        if self.0 == std::process::id() {
            lock.write().map_err(|_| Failure::poisoned())
        } else {
            self.tried(lock.try_write())
        }
    }

    fn tried<G>(self, r: Result<G, TryLockError<G>>) -> Outcome<G> {
        r.map_err(|e| match e {
            TryLockError::Poisoned(_) => Failure::poisoned(),
            TryLockError::WouldBlock => Failure {
                code: LOCKED,
                message: format!(
                    "this handle was in use by another thread when process {} was forked from \
                     process {}, which opened it: open the store again in this process",
                    std::process::id(),
                    self.0
                ),
            },
        })
    }
}
