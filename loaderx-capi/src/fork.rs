//! Store calls that survive `fork`: a child's calls run on a pool of its own.
//!
//! rayon's global pool starts once per process; a child made by `fork` (a C program's workers, a
//! Python host's `multiprocessing` over ctypes) inherits the pool's bookkeeping but none of its
//! threads, so a batched read the engine splits over it waits for good on helpers that are not
//! there. Every store call therefore runs through [`on_own_pool`]: in the process that made the
//! library's first store call, as it is; in a process forked from it, inside a one-thread pool
//! the child starts for itself (one thread: a forked worker is one of several processes that
//! share the cores).
//!
//! A handle's own lock has the same hazard (a thread of the parent inside a call when the fork
//! came holds it for good in the child): the engine's [`SharedStore`](loaderx_core::SharedStore)
//! only tries it in a fork, and one held is `LX_ERR_LOCKED` naming the fork.

use std::sync::OnceLock;

use crate::error::{Failure, IO, Outcome};

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
