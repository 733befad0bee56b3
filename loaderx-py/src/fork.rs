//! Engine calls that survive `fork`: the work of a forked child runs on a pool of its own.
//!
//! rayon's global pool is started once per process; a child made by `fork` (PyTorch's
//! `DataLoader` workers, `multiprocessing`'s default on Linux before Python 3.14) inherits the
//! pool's bookkeeping but none of its threads, so the first read the engine splits over it waits
//! forever for helpers that do not exist (any read made in the parent, even `ds[0]`, starts the
//! pool). Every engine call of this module therefore runs through [`detach`]: in the process that
//! loaded the module, as before; in a forked child, inside a one-thread pool the child starts for
//! itself, where the engine's shard plan sees one thread (no split) and a loader built there
//! gathers on its own prefetch threads (`Parallelism::CallingThread`), never on the dead pool.
//! One thread, because a forked worker is one of several processes that share the cores.
//!
//! The pool's helpers kept awake by `store::pool::keep_warm` are counted in statics a child
//! inherits too: a count of helpers the child does not have. It only stops the child from
//! starting helpers of its own on the global pool, and a child never reaches `keep_warm` through
//! this module (work inside a pool is not a caller outside it).

use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};

use pyo3::prelude::*;

/// The process that loaded the module (set by [`loaded`]).
static LOADED_IN: OnceLock<u32> = OnceLock::new();

/// Records the process that loaded the module: its work uses rayon's global pool.
pub fn loaded() {
    LOADED_IN.get_or_init(std::process::id);
}

/// Whether this process is a fork of the one that loaded the module.
pub fn forked() -> bool {
    LOADED_IN.get().is_some_and(|&pid| pid != std::process::id())
}

/// Runs the engine call `f` without the GIL, on this process's pool (see the module docs).
///
/// # Errors
/// Only in a forked child, when its pool's thread cannot be started.
pub fn detach<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    py.detach(|| {
        if !forked() {
            return Ok(f());
        }
        let pool = loaderx_core::fork::child_pool()
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        Ok(pool.install(f))
    })
}

/// The process a handle was made in. Its lock is taken as usual there; in a forked child it is
/// only tried, because a thread of the parent may have held it when the fork came, and the
/// child's copy of it is then held for good: the call is refused instead of waiting forever. The
/// writers' handles use it; a store's is the engine's `SharedStore`, which does the same.
#[derive(Debug, Clone, Copy)]
pub struct MadeIn(u32);

/// Why a handle's lock was not taken ([`MadeIn`]).
#[derive(Debug)]
pub enum Held {
    /// A panic broke it.
    Poisoned,
    /// Held in this forked child: by a thread of the parent at the fork, or by another thread
    /// of the child.
    AtFork,
}

impl MadeIn {
    /// This process.
    pub fn here() -> MadeIn {
        MadeIn(std::process::id())
    }

    fn forked(self) -> bool {
        self.0 != std::process::id()
    }

    /// A writer's write refused in a fork (the engine refuses it too), before its array is
    /// borrowed: rust-numpy's borrow flags are one process-wide lock, which a thread of the
    /// parent may have held at the fork on a free-threaded CPython (no GIL orders it), and the
    /// child's borrow then waits for good.
    pub fn refuse_write_in_fork(self) -> PyResult<()> {
        if self.forked() {
            return Err(crate::errors::LockedError::new_err(format!(
                "this writer was made by process {}, of which process {} is a fork: make a writer in this \
                 process",
                self.0,
                std::process::id()
            )));
        }
        Ok(())
    }

    /// `lock` taken.
    pub fn lock<T>(self, lock: &Mutex<T>) -> Result<MutexGuard<'_, T>, Held> {
        if self.forked() { tried(lock.try_lock()) } else { lock.lock().map_err(|_| Held::Poisoned) }
    }
}

fn tried<G>(r: Result<G, TryLockError<G>>) -> Result<G, Held> {
    r.map_err(|e| match e {
        TryLockError::Poisoned(_) => Held::Poisoned,
        TryLockError::WouldBlock => Held::AtFork,
    })
}

impl Held {
    /// The Python error for a lock of `what` (a store, a writer) not taken.
    pub fn err(self, what: &str) -> PyErr {
        match self {
            Held::Poisoned => pyo3::exceptions::PyRuntimeError::new_err(format!(
                "the {what}'s lock was poisoned by a panic"
            )),
            Held::AtFork => crate::errors::LockedError::new_err(format!(
                "this {what} was in use by another thread when process {} was forked (from the \
                 one that opened it, or from a process forked from that one): open it again in \
                 this process",
                std::process::id()
            )),
        }
    }
}
