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
//!
//! A value that cannot be shared with a forked child at all (a runtime whose worker threads the
//! child lacks, a store handle whose lock is the parent's) is kept [`PerProcess`]: each process
//! forked from the one that made it makes its own at its first call.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
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
            "{what} was in use by a thread when process {} was forked (from process {}, where \
             the store was opened, or from a process forked from that one): open the store \
             again in this process",
            std::process::id(),
            self.made_in
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

/// A value of each process forked from the one that made this: made at the process's first
/// [`get`](Self::get) and kept for its later ones. The value of the process this one was forked
/// from (copied into it by the fork) is never dropped here: dropping a runtime would wait for
/// worker threads that are not in this process, and a store handle's locks are that process's.
pub(crate) struct PerProcess<T> {
    made_in: MadeIn,
    /// The value and the process that made it.
    slot: RwLock<Option<(u32, Arc<T>)>>,
}

impl<T> PerProcess<T> {
    /// Empty, made in this process.
    pub(crate) fn new() -> PerProcess<T> {
        PerProcess { made_in: MadeIn::here(), slot: RwLock::new(None) }
    }

    /// This process's value, made by `make` at its first call (under the slot's lock: threads of
    /// the process calling at once make one). Where the slot was held at a fork of this
    /// process's own, a value is made for the call alone.
    pub(crate) fn get<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        let pid = std::process::id();
        match self.made_in.read(&self.slot) {
            Ok(slot) => {
                if let Some((made_by, value)) = slot.as_ref()
                    && *made_by == pid
                {
                    return Ok(Arc::clone(value));
                }
            }
            Err(HeldAtFork { .. }) => return make().map(Arc::new),
        }
        let Ok(mut slot) = self.made_in.write(&self.slot) else {
            return make().map(Arc::new);
        };
        // Another thread of this process may have made it between the two locks.
        if let Some((made_by, value)) = slot.as_ref()
            && *made_by == pid
        {
            return Ok(Arc::clone(value));
        }
        let value = Arc::new(make()?);
        if let Some(theirs) = slot.replace((pid, Arc::clone(&value))) {
            std::mem::forget(theirs);
        }
        Ok(value)
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((made_by, value)) = slot
            && made_by != std::process::id()
        {
            std::mem::forget(value);
        }
    }
}

impl<T> std::fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerProcess").field("made_in", &self.made_in.pid).finish_non_exhaustive()
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
        assert!(e.reason("the chunk cache").contains("was forked (from process"));
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

    struct Counted(Arc<AtomicU32>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// In a process forked from the one that made it: the value copied from the process before
    /// is left undropped and this process's own made once and kept; a slot held at a fork gives
    /// a value for the call alone; the process's own value is dropped with it.
    #[test]
    fn each_process_makes_its_own_value_once() {
        let drops = Arc::new(AtomicU32::new(0));
        let count = || Ok::<_, ()>(Counted(Arc::clone(&drops)));
        let before = std::process::id().wrapping_add(1);
        let theirs = Arc::new(Counted(Arc::clone(&drops)));
        let per = PerProcess {
            made_in: MadeIn { pid: before, held_in: AtomicU32::new(0) },
            slot: RwLock::new(Some((before, Arc::clone(&theirs)))),
        };
        std::mem::forget(theirs);
        let mine = per.get(count).unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 0, "the value of the process before is not dropped");
        let again = per.get(|| -> Result<Counted, ()> { panic!("made twice") }).unwrap();
        assert!(Arc::ptr_eq(&mine, &again));
        let made: Result<Arc<Counted>, &str> = PerProcess::new().get(|| Err("refused"));
        assert_eq!(made.err(), Some("refused"));
        {
            let _held_at_fork = per.slot.write().unwrap();
            let alone = per.get(count).unwrap();
            assert!(!Arc::ptr_eq(&alone, &mine));
        }
        assert_eq!(drops.load(Ordering::Relaxed), 1, "the call's own value is dropped after it");
        drop((mine, again));
        drop(per);
        assert_eq!(drops.load(Ordering::Relaxed), 2, "this process's value is dropped with the slot");
    }
}
