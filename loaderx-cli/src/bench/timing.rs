//! Interleaved timing: every contender is timed back to back within each round, so the load
//! drift of a shared machine hits all of them alike and a per-round ratio cancels most of it.

use std::time::{Duration, Instant};

/// One unit of a contender's work (one batch).
pub(crate) type Work<'a> = Box<dyn FnMut() + 'a>;

/// A contender: its name, its work, and how many calls at the start of each round go untimed.
/// A loader needs those: while the others run, its prefetch threads fill their queues, and
/// timing the queued batches would measure a handover, not a loader.
///
/// A unit of work may also be several batches (`batches`, default 1): a whole epoch of a loader
/// whose prefetch is unbounded (burn's `DataLoader`), started from a fresh iterator and run to its
/// end, so that nothing it produced in the background is timed as if it were free. Times are
/// reported per batch.
pub(crate) struct Contender<'a> {
    pub(crate) name: String,
    pub(crate) work: Work<'a>,
    pub(crate) untimed: u32,
    pub(crate) batches: f64,
}

impl<'a> Contender<'a> {
    pub(crate) fn new(name: &str, work: Work<'a>) -> Contender<'a> {
        Contender { name: name.into(), work, untimed: 0, batches: 1.0 }
    }
}

/// Per contender and round, the time of one batch in seconds.
pub(crate) struct Timings {
    names: Vec<String>,
    secs: Vec<Vec<f64>>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl Timings {
    fn index(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap_or_else(|| panic!("no contender {name:?}"))
    }

    /// The median over rounds of the time of one unit of `name`'s work, in seconds.
    pub(crate) fn median_secs(&self, name: &str) -> f64 {
        median(self.secs[self.index(name)].clone())
    }

    /// The median over rounds of `baseline`'s time over `name`'s time in that round: how many
    /// times faster `name` is than `baseline`.
    pub(crate) fn speed_vs(&self, name: &str, baseline: &str) -> f64 {
        let (i, b) = (self.index(name), self.index(baseline));
        median(self.secs[b].iter().zip(&self.secs[i]).map(|(tb, ti)| tb / ti).collect())
    }
}

/// Runs `rounds` rounds; in each, every contender repeats its work enough times to fill about
/// `target` (calibrated once, after `warm` untimed calls that touch every page a contender will
/// read), starting from a rotating contender so none always runs first.
pub(crate) fn interleaved(
    rounds: usize,
    target: Duration,
    warm: usize,
    contenders: &mut [Contender<'_>],
) -> Timings {
    let iters: Vec<u32> = contenders
        .iter_mut()
        .map(|c| {
            for _ in 0..warm.max(1) + c.untimed as usize {
                (c.work)();
            }
            // Calibrate on `untimed + 1` calls: a loader may have refilled its queue while the
            // untimed ones ran, and a single call served from the queue would look free (and ask
            // for millions of iterations); at most `untimed` of these can be.
            let calls = c.untimed + 1;
            let t = Instant::now();
            for _ in 0..calls {
                (c.work)();
            }
            let once = (t.elapsed().as_secs_f64() / f64::from(calls)).max(1e-9);
            (target.as_secs_f64() / once).ceil().clamp(1.0, 1e6) as u32
        })
        .collect();
    let n = contenders.len();
    let mut secs = vec![Vec::with_capacity(rounds); n];
    for r in 0..rounds.max(1) {
        for k in 0..n {
            let i = (k + r) % n;
            for _ in 0..contenders[i].untimed {
                (contenders[i].work)();
            }
            let t = Instant::now();
            for _ in 0..iters[i] {
                (contenders[i].work)();
            }
            secs[i].push(t.elapsed().as_secs_f64() / f64::from(iters[i]) / contenders[i].batches);
        }
    }
    Timings { names: contenders.iter().map(|c| c.name.clone()).collect(), secs }
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
}
