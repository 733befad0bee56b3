//! [`Prefetcher`]: the one ordered prefetch engine. Threads claim steps from a shared counter and
//! produce them with a per-step function; the consumer receives them in step order.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::window::{DeathWatch, Window};
use crate::{Error, Result};

/// Steps `start, start + 1, ...` produced ahead of the consumer by `threads` threads running a
/// per-step function, and handed out in step order whichever thread finishes first.
///
/// A thread claims the next unclaimed step, so one slowed down (sharing its core with the
/// consumer, say) holds up only its own step; at most `threads * (depth + 1)` steps are claimed
/// and not yet delivered, which bounds memory. A step whose function fails is delivered as that
/// error and the next steps go on; a step whose function panics is delivered as
/// [`Error::LoaderStopped`] naming the step and the panic, and its thread goes on too.
/// [`DataLoader`](crate::DataLoader) is a `Prefetcher` of gathered, transformed batches; an
/// adapter can run one over its own per-step function (a framework's batched dataset reads).
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::Prefetcher;
/// let mut squares = Prefetcher::spawn("squares", 2, 2, 10, |step| Ok(step * step))?;
/// assert_eq!(squares.next()?, 100);
/// assert_eq!(squares.next()?, 121);
/// assert_eq!(squares.step(), 12);
/// # Ok::<(), loaderx::Error>(())
/// ```
pub struct Prefetcher<O> {
    window: Arc<Window<O>>,
    workers: Vec<JoinHandle<()>>,
    step: u64,
}

impl<O> std::fmt::Debug for Prefetcher<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetcher").field("step", &self.step).field("threads", &self.workers.len()).finish()
    }
}

impl<O> Prefetcher<O> {
    /// The next step [`next`](Self::next) delivers.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Steps finished and waiting for the consumer, and the most that may be in flight
    /// (`threads * (depth + 1)`): when the two are equal, the threads are idle until the consumer
    /// takes a step. For benchmarks that must not time one contender while a loader refills.
    pub fn prefetched(&self) -> (usize, usize) {
        self.window.fill()
    }

    /// Calls `f` on each finished step waiting for the consumer, without waiting: `false`, and
    /// nothing visited, while a thread is handing a step in or taking one. For a binding whose
    /// garbage collector must see the objects a loader holds (Python's cycle collector).
    pub fn try_for_each_prefetched(&self, f: impl FnMut(&Result<O>)) -> bool {
        self.window.try_for_each_finished(f)
    }
}

impl<O: Send + 'static> Prefetcher<O> {
    /// Starts `threads` threads (at least one) named `name-0`, `name-1`, ... producing steps
    /// from `start` on with `produce`, each thread at most `depth` (at least one) steps ahead.
    ///
    /// # Errors
    /// [`Error::Config`] for more than 1,024 threads or a depth over 1,024 (the loader
    /// builder's limits); [`Error::LoaderStopped`] when a thread cannot be started (the ones
    /// already started are stopped).
    pub fn spawn<F>(name: &str, threads: usize, depth: usize, start: u64, produce: F) -> Result<Prefetcher<O>>
    where
        F: Fn(u64) -> Result<O> + Send + Sync + 'static,
    {
        super::builder::check_threads(threads)?;
        super::builder::check_prefetch(depth)?;
        let threads = threads.max(1);
        let size = threads.saturating_mul(depth.max(1).saturating_add(1)) as u64;
        let window = Arc::new(Window::new(start, size, threads));
        let produce = Arc::new(produce);
        // Built before the threads start, so an early return stops the ones already running.
        let mut prefetcher = Prefetcher { window, workers: Vec::with_capacity(threads), step: start };
        for w in 0..threads {
            let (window, produce) = (Arc::clone(&prefetcher.window), Arc::clone(&produce));
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{w}"))
                .spawn(move || run(&window, &*produce));
            match spawned {
                Ok(handle) => prefetcher.workers.push(handle),
                Err(e) => {
                    for _ in w..threads {
                        prefetcher.window.not_started();
                    }
                    return Err(Error::LoaderStopped(format!("cannot start a prefetch thread: {e}")));
                }
            }
        }
        Ok(prefetcher)
    }

    /// The next step's result, in step order, waiting for it.
    ///
    /// # Errors
    /// The step's own error (its function failed or panicked; the next call goes on with the
    /// next step); [`Error::LoaderStopped`], without consuming a step, when no thread is left.
    #[expect(clippy::should_implement_trait, reason = "fallible and endless: not an Iterator of steps")]
    pub fn next(&mut self) -> Result<O> {
        let out = self.window.take()?;
        self.step += 1;
        out
    }
}

impl<O> Drop for Prefetcher<O> {
    fn drop(&mut self) {
        self.window.stop();
        // Dropped on one of its own threads (the last handle let go inside a transform): that
        // thread is not joined (it would wait for itself); it ends when its step returns.
        let me = std::thread::current().id();
        for h in self.workers.drain(..) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

/// A prefetch thread: claim, produce, hand in, until the window stops.
fn run<O>(window: &Window<O>, produce: &(dyn Fn(u64) -> Result<O> + Send + Sync)) {
    let mut watch = DeathWatch { window, step: None };
    while let Some(step) = window.claim() {
        watch.step = Some(step);
        let out = catch_unwind(AssertUnwindSafe(|| produce(step))).unwrap_or_else(|panic| {
            Err(Error::LoaderStopped(format!(
                "the prefetch thread producing step {step} panicked: {}",
                panic_message(&*panic)
            )))
        });
        window.finish(step, out);
        watch.step = None;
    }
}

/// The message of a panic payload (`panic!` with a literal or a formatted message).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a payload that is not a string)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_arrive_in_order_whichever_thread_finishes_first() {
        let mut p = Prefetcher::spawn("t", 3, 2, 5, |step| {
            // Later steps finish first.
            std::thread::sleep(std::time::Duration::from_millis(8u64.saturating_sub(step - 5) * 2));
            Ok(step)
        })
        .unwrap();
        let got: Vec<u64> = (0..8).map(|_| p.next().unwrap()).collect();
        assert_eq!(got, (5..13).collect::<Vec<_>>());
        assert_eq!(p.step(), 13);
    }

    #[test]
    fn the_window_fills_to_its_capacity_and_then_the_threads_wait() {
        let mut p = Prefetcher::spawn("t", 2, 3, 0, Ok).unwrap();
        assert_eq!(p.next().unwrap(), 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.prefetched().0 < p.prefetched().1 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(p.prefetched(), (8, 8), "2 threads x (depth 3 + 1)");
        let mut seen = Vec::new();
        assert!(p.try_for_each_prefetched(|out| seen.push(*out.as_ref().unwrap())));
        assert_eq!(seen, (1..9).collect::<Vec<_>>(), "the finished steps, in order");
        assert_eq!(p.next().unwrap(), 1);
        assert!(p.prefetched().0 <= 8);
    }

    #[test]
    fn a_failing_or_panicking_step_is_its_own_error_and_the_stream_goes_on() {
        let mut p = Prefetcher::spawn("t", 2, 1, 0, |step| match step {
            1 => Err(Error::InvalidArgument("step one".into())),
            2 => panic!("boom at {step}"),
            _ => Ok(step),
        })
        .unwrap();
        assert_eq!(p.next().unwrap(), 0);
        assert!(matches!(p.next(), Err(Error::InvalidArgument(m)) if m == "step one"));
        match p.next() {
            Err(Error::LoaderStopped(m)) => assert!(m.contains("step 2") && m.contains("boom at 2"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Both threads are still there.
        assert_eq!((3..10).map(|_| p.next().unwrap()).collect::<Vec<_>>(), (3..10).collect::<Vec<_>>());
    }
}
