//! How a batched read splits over the rayon pool: the one shard plan ([`shard_count`]), the
//! pieces taken by whoever is free ([`run_shards`]), and the helpers kept awake between the calls
//! of a caller outside the pool ([`keep_warm`]).

use crate::sys::tuning::{KEEP_WARM_MAX, PIECES_PER_THREAD};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Result;

/// Whether a batched read may split over the rayon pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parallelism {
    /// Split over the pool when the batch is large enough to pay for the hand-offs.
    Pool,
    /// As [`Parallelism::Pool`], and after a split from a thread outside the pool the helpers
    /// stay awake for as long as it took ([`keep_warm`]): for a caller that gathers again within
    /// microseconds (Python's gather calls), whose helpers would otherwise sleep between calls.
    PoolKeepWarm,
    /// Stay on the calling thread: the caller already keeps every core busy (a loader with as
    /// many prefetch threads as the pool has threads), so a split only adds hand-offs.
    CallingThread,
}

/// The one shard plan of every batched read: up to [`PIECES_PER_THREAD`] contiguous shards for
/// each thread of the pool, the same number for each (one for a pool of one), but no more than
/// there are records and no more than leave each shard `min_work` of `work` (bytes to copy, or
/// records to hand a callback); one, on the calling thread, when so asked.
pub(super) fn shard_count(par: Parallelism, records: usize, work: usize, min_work: usize) -> usize {
    match par {
        Parallelism::CallingThread => 1,
        Parallelism::Pool | Parallelism::PoolKeepWarm => match rayon::current_num_threads() {
            1 => 1,
            threads => {
                // A whole number of pieces per thread, so that threads that start together end
                // together.
                let by_work = work / min_work.max(1);
                let per_thread = (by_work / threads).clamp(1, PIECES_PER_THREAD);
                (threads * per_thread).min(records).min(by_work).max(1)
            }
        },
    }
}

/// Runs `f` on every shard, the calling thread and up to one helper per other pool thread each
/// taking the next shard not yet taken until none is left; returns when all are done, with the
/// first error (in no fixed order across shards). A caller outside the pool (a training loop's
/// thread, Python's) works instead of sleeping until the pool has done everything, and a helper
/// the pool wakes late takes only what the caller has not reached: the wake-up overlaps the
/// copy rather than adding to it ([`PIECES_PER_THREAD`]).
pub(super) fn run_shards<S: Send>(
    shards: Vec<S>,
    par: Parallelism,
    f: impl Fn(S) -> Result<()> + Sync + Send,
) -> Result<()> {
    let started = Instant::now();
    let failed = Mutex::new(None);
    let n = shards.len();
    let helpers = rayon::current_num_threads().min(n).saturating_sub(1);
    let slots: Vec<Mutex<Option<S>>> = shards.into_iter().map(|s| Mutex::new(Some(s))).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let work = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = slots.get(k) else { break };
            let shard = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(shard) = shard
                && let Err(e) = f(shard)
            {
                failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
            done.fetch_add(1, Ordering::Release);
        }
    };
    let work = &work;
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(move |_| work());
        }
        work();
        // The pieces left are in a helper's hands and end within a piece's time: wait for them
        // awake rather than asleep in the scope's latch, whose wake-up costs a caller outside
        // the pool about as much as a batch (bounded: a panicking piece never counts as done).
        let deadline = Instant::now() + KEEP_WARM_MAX;
        while done.load(Ordering::Acquire) < n && Instant::now() < deadline {
            std::hint::spin_loop();
        }
    });
    if par == Parallelism::PoolKeepWarm && helpers > 0 && rayon::current_thread_index().is_none() {
        keep_warm(helpers, started.elapsed());
    }
    failed.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(Ok(()), Err)
}

/// A one-thread pool of the calling process's own, for the work of a child made by `fork` from a
/// process whose rayon pool ran: the child inherits the pool's bookkeeping but none of its
/// threads, so work queued there waits for good. Started on the first call in each process and
/// kept for its later calls (a child of a child starts its own); one thread, because a forked
/// worker is one of several processes that share the cores. For the faces whose callers fork
/// (Python's workers, a C program's): they run a forked child's engine calls inside it.
///
/// # Errors
/// When the pool's thread cannot be started.
pub fn forked_child_pool() -> std::io::Result<std::sync::Arc<rayon::ThreadPool>> {
    static POOLS: Mutex<Option<(u32, std::sync::Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    // Tried, not waited for: a thread of the process this one was forked from may have held it
    // (a child that forks again); a pool started without the cache is as good, only slower.
    let mut slot = POOLS.try_lock().ok();
    if let Some((owner, pool)) = slot.as_deref().and_then(Option::as_ref)
        && *owner == pid
    {
        return Ok(std::sync::Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "loaderx-forked".into())
        .build()
        .map(std::sync::Arc::new)
        .map_err(|e| std::io::Error::other(format!("cannot start a thread in forked process {pid}: {e}")))?;
    if let Some(slot) = slot.as_deref_mut() {
        *slot = Some((pid, std::sync::Arc::clone(&pool)));
    }
    Ok(pool)
}

/// Until when the helpers [`keep_warm`] started stay awake, in nanoseconds since [`now`]'s epoch.
static WARM_UNTIL: AtomicU64 = AtomicU64::new(0);
/// How many of those helpers are running.
static WARM_HELPERS: AtomicUsize = AtomicUsize::new(0);

/// Nanoseconds since the first call in this process: a monotonic clock that fits an atomic.
fn now() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    u64::try_from(EPOCH.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// After a split read from a caller outside the pool (Python's thread, a training loop's), keeps
/// `helpers` pool threads awake, spinning and taking any pool work that arrives, for as long as
/// that read took (at most [`KEEP_WARM_MAX`]): a caller that reads again within that time finds
/// its helpers running instead of asleep: a sleeping thread's wake-up costs about as much as a
/// gather of a few MiB ([`KEEP_WARM_MAX`]), so without this a caller that does anything between
/// its reads gathers nearly alone. The time spent spinning is
/// at most the time the read itself took, so a core is never burnt for more than the work it
/// waits for; reads made from the pool's own threads (the loader's prefetch threads keep
/// themselves busy) start no spinning. A parameter of the read ([`Parallelism::PoolKeepWarm`]):
/// the face that measured the gain asks for it (Python's gather calls), nothing else does.
fn keep_warm(helpers: usize, took: Duration) {
    let window = u64::try_from(took.min(KEEP_WARM_MAX).as_nanos()).unwrap_or(0);
    WARM_UNTIL.fetch_max(now().saturating_add(window), Ordering::Relaxed);
    let mut running = WARM_HELPERS.load(Ordering::Relaxed);
    while running < helpers {
        match WARM_HELPERS.compare_exchange_weak(running, running + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                rayon::spawn(stay_awake);
                running += 1;
            }
            Err(seen) => running = seen,
        }
    }
}

/// One helper kept awake: runs pool work as it arrives until [`WARM_UNTIL`] passes. A read that
/// extends the window after this helper has decided to stop starts no other one; it wakes the
/// pool as it would have without [`keep_warm`].
fn stay_awake() {
    loop {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            continue;
        }
        if now() >= WARM_UNTIL.load(Ordering::Relaxed) {
            break;
        }
        std::hint::spin_loop();
    }
    WARM_HELPERS.fetch_sub(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn every_shard_runs_once_whoever_takes_it_and_the_first_error_is_returned() {
        let ran = std::sync::Mutex::new(Vec::new());
        run_shards((0..37).collect(), Parallelism::Pool, |k: usize| {
            ran.lock().unwrap().push(k);
            Ok(())
        })
        .unwrap();
        let mut ran = ran.into_inner().unwrap();
        ran.sort_unstable();
        assert_eq!(ran, (0..37).collect::<Vec<_>>());
        let e = run_shards((0..9).collect(), Parallelism::Pool, |k: usize| {
            if k == 4 { Err(Error::InvalidArgument("shard 4".into())) } else { Ok(()) }
        });
        assert!(matches!(e, Err(Error::InvalidArgument(m)) if m == "shard 4"));
    }

    /// Keeping the helpers awake is the read's parameter: a split read asks for it or not, and
    /// nothing else (no environment, no caller's thread) turns it on.
    #[test]
    fn only_a_read_that_asks_keeps_the_helpers_awake() {
        if rayon::current_num_threads() < 2 {
            return;
        }
        let read = |par| {
            let before = WARM_UNTIL.load(Ordering::Relaxed);
            run_shards((0..8).collect(), par, |_: usize| {
                std::thread::sleep(Duration::from_micros(50));
                Ok(())
            })
            .unwrap();
            WARM_UNTIL.load(Ordering::Relaxed) > before
        };
        assert!(!read(Parallelism::Pool), "a plain split read keeps nobody awake");
        assert!(read(Parallelism::PoolKeepWarm), "one that asks does");
    }

    #[test]
    fn the_shard_plan_gives_each_shard_enough_work() {
        let threads = rayon::current_num_threads();
        assert_eq!(shard_count(Parallelism::CallingThread, 1000, 1 << 30, 1), 1);
        assert_eq!(shard_count(Parallelism::Pool, 1000, 100, 128), 1, "too little work to split");
        assert_eq!(shard_count(Parallelism::Pool, 0, 0, 128), 1);
        assert_eq!(shard_count(Parallelism::Pool, 1, 1 << 30, 128), 1, "never more shards than records");
        // A pool of one thread: no split; of more: a few pieces per thread ([`run_shards`]).
        let pieces = if threads == 1 { 1 } else { threads * PIECES_PER_THREAD };
        assert_eq!(shard_count(Parallelism::Pool, 1000, 1 << 30, 128), pieces);
        // Work for three shards: one a thread (never a third shard for one of two threads).
        assert_eq!(shard_count(Parallelism::Pool, 1000, 3 * 128, 128), threads.min(3));
    }
}
