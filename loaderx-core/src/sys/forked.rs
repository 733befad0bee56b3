//! Locks a forked child never waits on for good.
//!
//! A child made by `fork` copies every lock as it stood: one a thread of the parent held at that
//! moment is held in the child for good, since that thread is not there to release it (a Python
//! host's torch workers and `multiprocessing`, a C program's children, all reading through
//! handles the parent made while its own threads gathered). A cache's lock therefore keeps the
//! process it was made in ([`MadeIn`]): there it is taken as usual; in any other process it is
//! tried for up to [`PATIENCE`], which a holder among the child's own threads hardly needs (their
//! critical sections map a file or insert into a cache), and then reported as [`HeldAtFork`]
//! for the caller to refuse with [`crate::Error::Locked`] or to do without its cache. The first
//! such report is remembered for the process: its later calls go without the cache at once
//! instead of waiting out the patience again.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

/// How long a forked child waits for a lock made before the fork: a holder among its own
/// threads releases it within microseconds (a mapping, an open); one still held after this was
/// most likely held at the fork, and a read goes on without the cache either way.
pub(crate) const PATIENCE: Duration = Duration::from_millis(100);

/// The process the locks of a cache were made in, and the process (if any) that found one of
/// them held at its fork.
#[derive(Debug)]
pub(crate) struct MadeIn {
    pid: u32,
    held_in: AtomicU32,
}

/// A lock still held after [`PATIENCE`] in a process forked from the one that made it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldAtFork {
    made_in: u32,
}

impl HeldAtFork {
    /// Why a call is refused, for [`crate::Error::Locked`]'s reason.
    pub(crate) fn reason(self, what: &str) -> String {
        format!(
            "{what} was in use by a thread of process {} when process {} was forked from it: \
             open the store again in this process",
            self.made_in,
            std::process::id()
        )
    }
}

impl MadeIn {
    /// This process.
    pub(crate) fn here() -> MadeIn {
        MadeIn { pid: std::process::id(), held_in: AtomicU32::new(0) }
    }

    /// Whether this is the process it names.
    pub(crate) fn is_here(&self) -> bool {
        self.pid == std::process::id()
    }

    /// `lock` shared (a poisoned lock's data as it is: every cache here stays consistent). A
    /// free lock is taken at once; only a held one asks which process this is (`getpid`, a
    /// system call: never on a gather's uncontended path).
    pub(crate) fn read<'a, T>(&self, lock: &'a RwLock<T>) -> Result<RwLockReadGuard<'a, T>, HeldAtFork> {
        if let Some(guard) = tried(lock.try_read()) {
            return Ok(guard);
        }
        if self.is_here() {
            return Ok(lock.read().unwrap_or_else(PoisonError::into_inner));
        }
        self.patiently(|| tried(lock.try_read()))
    }

    /// `lock` alone (asking which process this is only when it is held, as [`MadeIn::read`]).
    pub(crate) fn write<'a, T>(&self, lock: &'a RwLock<T>) -> Result<RwLockWriteGuard<'a, T>, HeldAtFork> {
        if let Some(guard) = tried(lock.try_write()) {
            return Ok(guard);
        }
        if self.is_here() {
            return Ok(lock.write().unwrap_or_else(PoisonError::into_inner));
        }
        self.patiently(|| tried(lock.try_write()))
    }

    fn patiently<G>(&self, mut take: impl FnMut() -> Option<G>) -> Result<G, HeldAtFork> {
        let pid = std::process::id();
        let start = Instant::now();
        loop {
            if let Some(guard) = take() {
                return Ok(guard);
            }
            if self.held_in.load(Ordering::Relaxed) == pid || start.elapsed() >= PATIENCE {
                self.held_in.store(pid, Ordering::Relaxed);
                return Err(HeldAtFork { made_in: self.pid });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn tried<G>(r: Result<G, TryLockError<G>>) -> Option<G> {
    match r {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made elsewhere: a lock held for good is reported after the patience, and at once after
    /// that in this process while it is held; one free or released in time is taken; made here:
    /// taken as usual.
    #[test]
    fn a_lock_made_elsewhere_is_tried_patiently() {
        let elsewhere = MadeIn { pid: std::process::id().wrapping_add(1), held_in: AtomicU32::new(0) };
        let lock = RwLock::new(1);
        let held = lock.write().unwrap();
        let start = Instant::now();
        let e = elsewhere.read(&lock).unwrap_err();
        assert!(start.elapsed() >= PATIENCE);
        assert!(e.reason("the chunk cache").contains("when process"));
        let again = Instant::now();
        assert!(elsewhere.read(&lock).is_err());
        assert!(again.elapsed() < PATIENCE, "no second wait in this process");
        drop(held);
        assert_eq!(*elsewhere.read(&lock).unwrap(), 1);
        let elsewhere = MadeIn { pid: std::process::id().wrapping_add(1), held_in: AtomicU32::new(0) };
        let (taken, wait) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _held = lock.write().unwrap();
                taken.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            });
            wait.recv().unwrap();
            assert_eq!(*elsewhere.write(&lock).unwrap(), 1, "released within the patience");
        });
        assert_eq!(*MadeIn::here().write(&lock).unwrap(), 1);
    }
}
