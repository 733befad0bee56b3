//! [`SlotRing`]: a fixed ring of reusable buffers (pinned host slots for device copies) that
//! producers lease, fill and hand off with a completion fence, and that take a slot back only
//! once its fence says the device is done with it. Plain bookkeeping, no device code: the
//! fence is a trait ([`Fence`]), a CUDA event on a GPU, a flag in the tests.
//!
//! A slot is `Free` (in the free list), `Leased` (a producer fills it), or `InFlight` (handed
//! off with a fence; the device may still read it). Leasing takes a free slot, or reclaims the
//! oldest in-flight slot whose fence is done, or waits (back-pressure: at most `slots` buffers
//! ever exist). Closing the ring wakes every waiter (their leases fail) and [`SlotRing::drain`]
//! waits out the fences of the slots still in flight before the buffers are dropped, so no
//! buffer is freed while the device reads it.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::{Error, Result};

/// Completion of the device work that reads a slot (a CUDA event recorded after the copy).
pub trait Fence: Send {
    /// Whether the work is done, without waiting.
    fn is_done(&self) -> bool;
    /// Waits until the work is done.
    fn wait(&self);
}

/// A leased slot: its buffer, to fill, then [`SlotRing::submit`] or [`SlotRing::give_back`].
#[derive(Debug)]
pub struct Lease<S> {
    index: usize,
    buffer: S,
}

impl<S> Lease<S> {
    /// The slot's number in the ring.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The buffer.
    pub fn buffer(&mut self) -> &mut S {
        &mut self.buffer
    }
}

struct State<S> {
    free: Vec<(usize, S)>,
    /// In hand-off order: the oldest first.
    in_flight: VecDeque<(usize, S, Box<dyn Fence>)>,
    leased: usize,
    closed: bool,
}

/// A ring of `n` buffers (see [`staging`](crate::staging)).
pub struct SlotRing<S> {
    state: Mutex<State<S>>,
    freed: Condvar,
    slots: usize,
}

impl<S> std::fmt::Debug for SlotRing<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("SlotRing")
            .field("slots", &self.slots)
            .field("free", &s.free.len())
            .field("leased", &s.leased)
            .field("in_flight", &s.in_flight.len())
            .field("closed", &s.closed)
            .finish()
    }
}

impl<S> SlotRing<S> {
    /// A ring of `buffers` (for a loader: prefetch depth + 2, so the consumer's batch, the one in
    /// flight and the prefetched ones each have a slot).
    pub fn new(buffers: Vec<S>) -> SlotRing<S> {
        let slots = buffers.len();
        SlotRing {
            state: Mutex::new(State {
                free: buffers.into_iter().enumerate().rev().collect(),
                in_flight: VecDeque::new(),
                leased: 0,
                closed: false,
            }),
            freed: Condvar::new(),
            slots,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<S>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves every in-flight slot whose fence is done, oldest first, back to the free list.
    fn reclaim(s: &mut State<S>) {
        let mut k = 0;
        while k < s.in_flight.len() {
            if s.in_flight[k].2.is_done() {
                if let Some((i, b, _)) = s.in_flight.remove(k) {
                    s.free.push((i, b));
                }
            } else {
                k += 1;
            }
        }
    }

    /// A free slot, waiting for one when every slot is leased or in flight; a slot in flight is
    /// reused only after its fence is done (the oldest is waited on when nothing else frees).
    ///
    /// # Errors
    /// [`Error::LoaderStopped`] once the ring is closed, or for a ring of no slots.
    pub fn lease(&self) -> Result<Lease<S>> {
        let mut s = self.lock();
        loop {
            if s.closed || self.slots == 0 {
                return Err(Error::LoaderStopped("the slot ring is closed".into()));
            }
            Self::reclaim(&mut s);
            if let Some((index, buffer)) = s.free.pop() {
                s.leased += 1;
                return Ok(Lease { index, buffer });
            }
            if let Some((index, buffer, fence)) = s.in_flight.pop_front() {
                // Every slot is busy and the oldest hand-off is the first to finish: wait for
                // it outside the lock, so other threads can submit and close meanwhile. The
                // slot counts as leased while its fence is waited on (drain waits for it).
                s.leased += 1;
                drop(s);
                fence.wait();
                let mut again = self.lock();
                if again.closed {
                    again.leased -= 1;
                    again.free.push((index, buffer));
                    self.freed.notify_all();
                    return Err(Error::LoaderStopped("the slot ring closed while a slot was awaited".into()));
                }
                return Ok(Lease { index, buffer });
            }
            // Every slot is leased: wait for a hand-off or a give-back.
            s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Hands the slot off: the device reads it until `fence` is done.
    pub fn submit(&self, lease: Lease<S>, fence: Box<dyn Fence>) {
        let mut s = self.lock();
        s.leased -= 1;
        s.in_flight.push_back((lease.index, lease.buffer, fence));
        self.freed.notify_all();
    }

    /// Returns a slot unused (its fill failed).
    pub fn give_back(&self, lease: Lease<S>) {
        let mut s = self.lock();
        s.leased -= 1;
        s.free.push((lease.index, lease.buffer));
        self.freed.notify_all();
    }

    /// Slots free, leased and in flight now.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut s = self.lock();
        Self::reclaim(&mut s);
        (s.free.len(), s.leased, s.in_flight.len())
    }

    /// Closes the ring: waiting and later leases fail with [`Error::LoaderStopped`]; slots in
    /// flight stay until [`drain`](Self::drain).
    pub fn close(&self) {
        self.lock().closed = true;
        self.freed.notify_all();
    }

    /// Closes the ring, waits for every in-flight fence and every lease to come back, and returns
    /// the buffers (for freeing once no device work reads them).
    pub fn drain(&self) -> Vec<S> {
        self.close();
        let mut s = self.lock();
        while s.leased > 0 {
            s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        let in_flight: Vec<(usize, S, Box<dyn Fence>)> = s.in_flight.drain(..).collect();
        let mut out: Vec<(usize, S)> = std::mem::take(&mut s.free);
        drop(s);
        for (i, b, fence) in in_flight {
            fence.wait();
            out.push((i, b));
        }
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, b)| b).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A fence the test completes by hand, counting its waits.
    #[derive(Clone, Default)]
    struct Flag(Arc<AtomicBool>, Arc<AtomicUsize>);

    impl Fence for Flag {
        fn is_done(&self) -> bool {
            self.0.load(Ordering::Acquire)
        }
        fn wait(&self) {
            self.1.fetch_add(1, Ordering::Relaxed);
            while !self.is_done() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    impl Flag {
        fn done(&self) {
            self.0.store(true, Ordering::Release);
        }
    }

    #[test]
    fn a_slot_comes_back_only_after_its_fence() {
        let ring = SlotRing::new(vec![10u32, 11, 12]);
        let a = ring.lease().unwrap();
        let b = ring.lease().unwrap();
        assert_eq!((a.index(), b.index()), (0, 1), "free slots in order");
        let (fa, fb) = (Flag::default(), Flag::default());
        ring.submit(a, Box::new(fa.clone()));
        ring.submit(b, Box::new(fb.clone()));
        assert_eq!(ring.counts(), (1, 0, 2));
        let c = ring.lease().unwrap();
        assert_eq!(c.index(), 2, "the free one before any in flight");
        fb.done();
        let d = ring.lease().unwrap();
        assert_eq!(d.index(), 1, "the slot whose fence is done, not the older one still in flight");
        assert_eq!(fa.1.load(Ordering::Relaxed), 0, "no wait was needed");
        ring.give_back(c);
        ring.give_back(d);
        assert_eq!(ring.counts(), (2, 0, 1));
    }

    #[test]
    fn a_full_ring_waits_for_the_oldest_fence_and_for_leases() {
        let ring = Arc::new(SlotRing::new(vec![(), ()]));
        let first = Flag::default();
        let a = ring.lease().unwrap();
        ring.submit(a, Box::new(first.clone()));
        let b = ring.lease().unwrap();
        // Back-pressure: the third lease waits on the oldest in-flight fence.
        let (r, f) = (Arc::clone(&ring), first.clone());
        let waiter = std::thread::spawn(move || r.lease().map(|l| l.index()));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "the ring is full");
        f.done();
        assert_eq!(waiter.join().unwrap().unwrap(), 0, "slot 0 once its copy is done");
        assert_eq!(first.1.load(Ordering::Relaxed), 1, "waited on exactly that fence");
        // Every slot leased: a lease waits for a give-back.
        let r = Arc::clone(&ring);
        let waiter = std::thread::spawn(move || r.lease().map(|l| l.index()));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        ring.give_back(b);
        assert_eq!(waiter.join().unwrap().unwrap(), 1);
    }

    #[test]
    fn closing_wakes_waiters_and_drain_waits_out_the_fences() {
        let ring = Arc::new(SlotRing::new(vec![String::from("a"), String::from("b")]));
        let a = ring.lease().unwrap();
        let b = ring.lease().unwrap();
        let r = Arc::clone(&ring);
        let waiter = std::thread::spawn(move || r.lease().map(|_| ()));
        std::thread::sleep(Duration::from_millis(20));
        ring.close();
        assert!(
            matches!(waiter.join().unwrap(), Err(Error::LoaderStopped(_))),
            "a waiter is woken, not leased"
        );
        assert!(matches!(ring.lease(), Err(Error::LoaderStopped(_))));
        let slow = Flag::default();
        ring.submit(a, Box::new(slow.clone()));
        let (r, s) = (Arc::clone(&ring), slow.clone());
        let done = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            s.done();
            r.give_back(b);
        });
        let buffers = ring.drain();
        assert!(slow.is_done(), "drain returned only after the in-flight fence");
        assert_eq!(buffers, ["a", "b"], "every buffer back, in slot order");
        done.join().unwrap();
        assert!(matches!(SlotRing::<u8>::new(vec![]).lease(), Err(Error::LoaderStopped(_))));
    }

    #[test]
    fn many_producers_never_share_a_slot() {
        let ring =
            Arc::new(SlotRing::new((0..4).map(|_| Arc::new(AtomicBool::new(false))).collect::<Vec<_>>()));
        let pending: Arc<Mutex<Vec<Flag>>> = Arc::default();
        let workers: Vec<_> = (0..6)
            .map(|_| {
                let (ring, pending) = (Arc::clone(&ring), Arc::clone(&pending));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let mut l = ring.lease().unwrap();
                        let busy = l.buffer().clone();
                        assert!(!busy.swap(true, Ordering::AcqRel), "slot {} leased twice", l.index());
                        busy.store(false, Ordering::Release);
                        let f = Flag::default();
                        pending.lock().unwrap().push(f.clone());
                        ring.submit(l, Box::new(f));
                    }
                })
            })
            .collect();
        // The "device": completes copies in arbitrary order while the producers run.
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (Arc::clone(&pending), Arc::clone(&stop));
        let device = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                let mut fences = p.lock().unwrap();
                if let Some(f) = fences.pop() {
                    f.done();
                }
                if let Some(f) = fences.first() {
                    f.done();
                }
                drop(fences);
                std::thread::yield_now();
            }
        });
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        device.join().unwrap();
        for f in pending.lock().unwrap().iter() {
            f.done();
        }
        assert_eq!(ring.drain().len(), 4);
    }
}
