//! Interleaved timing: every contender is timed back to back within each round, so the load
//! drift of a shared machine hits all of them alike and a per-round ratio cancels most of it.
//!
//! Two forms: [`interleaved`] (`loaderx bench`) calibrates how often each contender runs per
//! round to fill a target time and can leave a loader's queued batches untimed;
//! [`interleaved_fixed`] (the criterion benches' side-by-side tables) runs every contender a
//! fixed number of times per round and takes the first as the baseline.

use std::time::{Duration, Instant};

/// One unit of a contender's work (one batch).
pub type Work<'a> = Box<dyn FnMut() + 'a>;

/// A contender: its name, its work, and how many calls at the start of each round go untimed.
/// A loader needs those: while the others run, its prefetch threads fill their queues, and
/// timing the queued batches would measure a handover, not a loader.
///
/// A unit of work may also be several batches (`batches`, default 1): a whole epoch of a loader
/// whose prefetch is unbounded (burn's `DataLoader`), started from a fresh iterator and run to its
/// end, so that nothing it produced in the background is timed as if it were free. Times are
/// reported per batch.
pub struct Contender<'a> {
    /// The name its timings are looked up by.
    pub name: String,
    /// One unit of its work.
    pub work: Work<'a>,
    /// Calls at the start of each round that go untimed.
    pub untimed: u32,
    /// Batches per unit of work; times are divided by it.
    pub batches: f64,
    /// Run after each of its timed stretches, untimed: waits until the contender's background
    /// work is done (a loader refilling its queue), so that it does not steal cores from the
    /// contender timed next.
    pub settle: Option<Work<'a>>,
    /// A contender that times itself: runs `n` units of its work and returns their seconds, as
    /// measured on its side (another process, so that the hand-over is not timed). `work` is not
    /// called when this is set.
    pub timed: Option<Box<dyn FnMut(u32) -> f64 + 'a>>,
}

impl<'a> Contender<'a> {
    /// A contender whose unit of work is one batch, every call timed.
    pub fn new(name: &str, work: Work<'a>) -> Contender<'a> {
        Contender { name: name.into(), work, untimed: 0, batches: 1.0, settle: None, timed: None }
    }

    /// A contender that times itself ([`Contender::timed`]).
    pub fn self_timed(name: &str, timed: Box<dyn FnMut(u32) -> f64 + 'a>) -> Contender<'a> {
        Contender { timed: Some(timed), ..Contender::new(name, Box::new(|| {})) }
    }

    /// Runs `n` units untimed (the warm-up and the untimed calls).
    fn run_untimed(&mut self, n: u32) {
        match &mut self.timed {
            Some(timed) if n > 0 => {
                timed(n);
            }
            Some(_) => {}
            None => {
                for _ in 0..n {
                    (self.work)();
                }
            }
        }
    }

    /// Runs `n` units and returns their seconds.
    fn run_timed(&mut self, n: u32) -> f64 {
        if let Some(timed) = &mut self.timed {
            return timed(n);
        }
        let t = Instant::now();
        for _ in 0..n {
            (self.work)();
        }
        t.elapsed().as_secs_f64()
    }

    fn settle(&mut self) {
        if let Some(settle) = &mut self.settle {
            settle();
        }
    }
}

/// Per contender and round, the time of one batch in seconds.
pub struct Timings {
    names: Vec<String>,
    secs: Vec<Vec<f64>>,
}

/// The middle of `v` (its upper middle for an even count; NaN when every value is NaN).
///
/// # Panics
/// If `v` is empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl Timings {
    fn index(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap_or_else(|| panic!("no contender {name:?}"))
    }

    /// The median over rounds of the time of one unit of `name`'s work, in seconds.
    ///
    /// # Panics
    /// If no contender is called `name`.
    pub fn median_secs(&self, name: &str) -> f64 {
        median(self.secs[self.index(name)].clone())
    }

    /// The median over rounds of the fastest of `baselines`' times in that round over `name`'s:
    /// how `name` compares with the best of several ways to do the same work.
    ///
    /// # Panics
    /// If a name is not a contender's, or `baselines` is empty.
    pub fn speed_vs_best(&self, name: &str, baselines: &[&str]) -> f64 {
        let i = self.index(name);
        let bs: Vec<usize> = baselines.iter().map(|b| self.index(b)).collect();
        let ratios = (0..self.secs[i].len())
            .map(|r| bs.iter().map(|&b| self.secs[b][r]).fold(f64::INFINITY, f64::min) / self.secs[i][r])
            .collect();
        median(ratios)
    }

    /// The median over rounds of `baseline`'s time over `name`'s time in that round: how many
    /// times faster `name` is than `baseline`.
    ///
    /// # Panics
    /// If no contender is called `name` or `baseline`.
    pub fn speed_vs(&self, name: &str, baseline: &str) -> f64 {
        let (i, b) = (self.index(name), self.index(baseline));
        median(self.secs[b].iter().zip(&self.secs[i]).map(|(tb, ti)| tb / ti).collect())
    }
}

/// Runs `rounds` rounds; in each, every contender repeats its work enough times to fill about
/// `target` (calibrated once, after `warm` untimed calls that touch every page a contender will
/// read), starting from a rotating contender so none always runs first.
pub fn interleaved(
    rounds: usize,
    target: Duration,
    warm: usize,
    contenders: &mut [Contender<'_>],
) -> Timings {
    let iters: Vec<u32> = contenders
        .iter_mut()
        .map(|c| {
            c.run_untimed(warm.max(1) as u32 + c.untimed);
            // Calibrate on `untimed + 1` calls: a loader may have refilled its queue while the
            // untimed ones ran, and a single call served from the queue would look free (and ask
            // for millions of iterations); at most `untimed` of these can be.
            let calls = c.untimed + 1;
            let once = (c.run_timed(calls) / f64::from(calls)).max(1e-9);
            c.settle();
            (target.as_secs_f64() / once).ceil().clamp(1.0, 1e6) as u32
        })
        .collect();
    let n = contenders.len();
    let mut secs = vec![Vec::with_capacity(rounds); n];
    for r in 0..rounds.max(1) {
        for k in 0..n {
            let i = (k + r) % n;
            let c = &mut contenders[i];
            c.run_untimed(c.untimed);
            let elapsed = c.run_timed(iters[i]);
            secs[i].push(elapsed / f64::from(iters[i]) / c.batches);
            c.settle();
        }
    }
    Timings { names: contenders.iter().map(|c| c.name.clone()).collect(), secs }
}

/// Waits (sleeping in steps of 100 µs, for at most a second) until `fill` reports a full prefetch
/// window: (ready, capacity) with ready == capacity, the loader's threads idle. For
/// `Contender::settle`.
pub fn settle(fill: impl Fn() -> (usize, usize)) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let (ready, capacity) = fill();
        if ready >= capacity {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// One contender of a fixed-iteration comparison ([`interleaved_fixed`]): a name and one unit of
/// work.
pub type FixedContender<'a> = (&'a str, Work<'a>);

/// Medians of a fixed-iteration interleaved run, per contender.
pub struct Interleaved {
    /// The contender's name.
    pub name: String,
    /// The median time of one unit of its work, in nanoseconds.
    pub median_ns: f64,
    /// The median over rounds of (baseline time / its time): its speed relative to the baseline.
    pub speed_vs_baseline: f64,
}

/// Runs every contender `iters` times per round, alternating contenders within each round, for
/// `rounds` rounds; contender 0 is the baseline. Every contender is called once untimed first
/// (a warm-up), and each round starts from a rotating contender so none always runs first.
///
/// # Panics
/// If `rounds` is 0.
pub fn interleaved_fixed(
    rounds: usize,
    iters: usize,
    contenders: &mut [FixedContender<'_>],
) -> Vec<Interleaved> {
    interleaved_fixed_tidy(rounds, iters, contenders, &mut || {})
}

/// [`interleaved_fixed`], calling `tidy` untimed before every timed run (to remove what the
/// previous run wrote, say, so that no contender pays for another's clean-up).
///
/// # Panics
/// If `rounds` is 0.
pub fn interleaved_fixed_tidy(
    rounds: usize,
    iters: usize,
    contenders: &mut [FixedContender<'_>],
    tidy: &mut dyn FnMut(),
) -> Vec<Interleaved> {
    let n = contenders.len();
    let mut times = vec![Vec::with_capacity(rounds); n];
    for (_, f) in contenders.iter_mut() {
        tidy();
        f(); // warm up
    }
    for r in 0..rounds {
        // Rotate the starting contender so none always runs first.
        for k in 0..n {
            let i = (k + r) % n;
            tidy();
            let t = Instant::now();
            for _ in 0..iters {
                (contenders[i].1)();
            }
            times[i].push(t.elapsed().as_secs_f64() * 1e9 / iters as f64);
        }
    }
    (0..n)
        .map(|i| Interleaved {
            name: contenders[i].0.to_string(),
            median_ns: median(times[i].clone()),
            speed_vs_baseline: median((0..rounds).map(|r| times[0][r] / times[i][r]).collect()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_is_a_per_round_ratio() {
        let t = Timings {
            names: vec!["a".into(), "b".into()],
            secs: vec![vec![2.0, 4.0, 6.0], vec![1.0, 1.0, 3.0]],
        };
        assert_eq!(t.speed_vs("b", "a"), 2.0);
        assert_eq!(t.speed_vs("a", "a"), 1.0);
        assert_eq!(t.median_secs("a"), 4.0);
    }

    #[test]
    fn fixed_rounds_call_each_contender_warm_up_plus_rounds_times_iters() {
        let (mut a, mut b) = (0u32, 0u32);
        let mut contenders: Vec<FixedContender<'_>> =
            vec![("a", Box::new(|| a += 1)), ("b", Box::new(|| b += 1))];
        let res = interleaved_fixed(3, 4, &mut contenders);
        drop(contenders);
        assert_eq!((a, b), (1 + 3 * 4, 1 + 3 * 4));
        assert_eq!(res.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    }
}
