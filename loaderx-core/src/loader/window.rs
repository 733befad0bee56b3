//! The reorder window between the prefetch threads and the consumer: producers claim steps in
//! order and hand them in in any order; the consumer takes them in order.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::{Error, Result};

/// The steps between the prefetch threads and the consumer.
pub(super) struct Window<O> {
    state: Mutex<WindowState<O>>,
    /// The consumer waits here for its next step.
    ready: Condvar,
    /// Prefetch threads wait here for room in the window.
    room: Condvar,
}

struct WindowState<O> {
    /// The next step a prefetch thread claims.
    claim: u64,
    /// The next step the consumer takes.
    deliver: u64,
    /// How far `claim` may run ahead of `deliver`.
    size: u64,
    /// Finished steps `deliver..`, `None` while one is being produced.
    slots: VecDeque<Option<Result<O>>>,
    consumer_waiting: bool,
    producers_waiting: usize,
    /// The loader is being dropped.
    stop: bool,
    /// Prefetch threads still running.
    live: usize,
}

impl<O> Window<O> {
    /// A window whose first step is `start`, letting claims run `size` steps ahead of delivery,
    /// with `live` producer threads.
    pub(super) fn new(start: u64, size: u64, live: usize) -> Window<O> {
        Window {
            state: Mutex::new(WindowState {
                claim: start,
                deliver: start,
                size,
                slots: VecDeque::new(),
                consumer_waiting: false,
                producers_waiting: 0,
                stop: false,
                live,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
        }
    }

    /// A producer that never started: it will not hand in anything.
    pub(super) fn not_started(&self) {
        self.lock().live -= 1;
        self.ready.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, WindowState<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims the next step, waiting for room; `None` once the loader stops.
    pub(super) fn claim(&self) -> Option<u64> {
        let mut st = self.lock();
        loop {
            // Past the last step (u64::MAX - 1) there is nothing to claim: the thread ends, and
            // so do the others waiting for room (the window's far edge saturates at the same
            // u64::MAX, so room would never come).
            if st.stop || st.claim == u64::MAX {
                drop(st);
                self.room.notify_all();
                return None;
            }
            if st.claim < st.deliver.saturating_add(st.size) {
                break;
            }
            st.producers_waiting += 1;
            st = self.room.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.producers_waiting -= 1;
        }
        let step = st.claim;
        st.claim += 1;
        st.slots.push_back(None);
        Some(step)
    }

    /// Hands in a claimed step's result, waking the consumer if it waits for this step.
    pub(super) fn finish(&self, step: u64, out: Result<O>) {
        let mut st = self.lock();
        if st.stop {
            return;
        }
        let at = (step - st.deliver) as usize;
        st.slots[at] = Some(out);
        let wake = at == 0 && st.consumer_waiting;
        // Woken after the unlock, so the consumer does not wake only to wait for the lock.
        drop(st);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The next step's result, in order, waiting for it; `Err` (and no step delivered) when no
    /// prefetch thread is left to produce it.
    pub(super) fn take(&self) -> Result<Result<O>> {
        let mut st = self.lock();
        loop {
            if let Some(Some(_)) = st.slots.front() {
                let out = st.slots.pop_front().flatten().expect("checked just above");
                st.deliver += 1;
                let wake = st.producers_waiting > 0;
                drop(st);
                if wake {
                    self.room.notify_one();
                }
                return Ok(out);
            }
            if st.live == 0 {
                // Every step a u64 counts was delivered (a state restored near its end, look 63).
                let why = if st.deliver == u64::MAX {
                    format!("step {} was the last a loader counts (its steps are a u64)", u64::MAX - 1)
                } else {
                    "no prefetch thread is running".to_string()
                };
                return Err(Error::LoaderStopped(why));
            }
            st.consumer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.consumer_waiting = false;
        }
    }

    /// (finished steps waiting for the consumer, steps the window holds at most).
    pub(super) fn fill(&self) -> (usize, usize) {
        let st = self.lock();
        (st.slots.iter().filter(|s| s.is_some()).count(), usize::try_from(st.size).unwrap_or(usize::MAX))
    }

    /// Calls `f` on each finished step waiting for the consumer, unless another thread holds the
    /// window (then nothing is visited and `false` is returned): for a caller that must not wait.
    pub(super) fn try_for_each_finished(&self, mut f: impl FnMut(&Result<O>)) -> bool {
        let Ok(st) = self.state.try_lock() else { return false };
        st.slots.iter().flatten().for_each(&mut f);
        true
    }

    pub(super) fn stop(&self) {
        self.lock().stop = true;
        self.room.notify_all();
        self.ready.notify_all();
    }
}

/// Counts a prefetch thread out when it ends. One that unwinds (a panic outside the transform,
/// which is caught) hands in an error for the step it was producing, so the consumer gets that
/// step as an error and goes on with the others' steps instead of waiting for it.
pub(super) struct DeathWatch<'a, O> {
    pub(super) window: &'a Window<O>,
    /// The step being produced.
    pub(super) step: Option<u64>,
}

impl<O> Drop for DeathWatch<'_, O> {
    fn drop(&mut self) {
        let mut st = self.window.lock();
        st.live -= 1;
        if let Some(step) = self.step
            && std::thread::panicking()
            && !st.stop
        {
            let at = (step - st.deliver) as usize;
            st.slots[at] = Some(Err(Error::LoaderStopped(format!(
                "the prefetch thread producing step {step} panicked"
            ))));
        }
        drop(st);
        self.window.ready.notify_all();
    }
}
