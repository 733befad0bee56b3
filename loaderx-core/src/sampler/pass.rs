//! [`PassSampler`]: finite passes over `[0, N)`, every index exactly once per pass: in order or in a
//! keyed shuffle (a new one each epoch), the last batch partial or dropped, sharded over ranks
//! without duplicates; one pass, a number of them, or epochs without end, as one step count.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::feistel::{FeistelShape, Permutation};
use super::rng::{DOMAIN_CYCLIC, GOLDEN, mix64};
use super::shuffle::{SHUFFLE_MAX_LEN, shuffle};
use crate::{Error, Result};

/// Everything that determines a [`PassSampler`]; plain data, saved and restored by the loader.
///
/// Step `s` covers positions `[s B, min((s + 1) B, N))` of the pass's order (identity, or the
/// keyed permutation of `(seed, epoch)`: the one a cyclic sampler with that seed walks in cycle
/// `epoch`). Rank `r` of `world` takes its stripe of each step: in a full step `B / world`
/// positions from `r B / world`; in a partial last step of `R` positions the first `R % world`
/// ranks take `R / world + 1` and the others `R / world`, in rank order, so the ranks together
/// see every index once and no rank sees one twice.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::PassConfig;
/// let config = PassConfig {
///     len: 10, batch_size: 4, shuffle: false, seed: 0, epoch: 0, epochs: Some(2), drop_last: false, rank: 0, world: 1,
/// };
/// let pass = config.build()?;
/// assert_eq!((pass.steps(), pass.total_steps()), (3, Some(6)));
/// assert_eq!(pass.batch(2), vec![8, 9]);
/// assert_eq!(pass.batch(3), vec![0, 1, 2, 3], "step 3 starts the second epoch");
/// assert!(pass.batch(6).is_empty());
/// # Ok::<(), loaderx::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassConfig {
    /// Size `N` of the index space.
    pub len: u32,
    /// Global batch size `B`, summed over ranks.
    pub batch_size: u32,
    /// Shuffled by `(seed, epoch)`, or in index order.
    pub shuffle: bool,
    /// Seed of the shuffle.
    pub seed: u64,
    /// The first pass's epoch: each epoch of a shuffled pass has its own order.
    pub epoch: u64,
    /// Passes run back to back (epochs `epoch`, `epoch + 1`, ...), step `s` being step
    /// `s % steps` of epoch `epoch + s / steps`; `None`: without end. Absent in configs saved
    /// before it existed: one pass.
    #[serde(default = "one_pass")]
    pub epochs: Option<u64>,
    /// Drop the last batch when it is partial (`N % B` indices then go unseen).
    pub drop_last: bool,
    /// This process's rank, in `0..world`.
    pub rank: u32,
    /// Number of ranks sharing each global batch.
    pub world: u32,
}

fn one_pass() -> Option<u64> {
    Some(1)
}

impl PassConfig {
    /// Validates the config and builds its [`PassSampler`].
    ///
    /// # Errors
    /// [`Error::Config`] when `batch_size` or `world` is 0, `rank >= world`, `batch_size` is
    /// not divisible by `world`, or the epochs run past the last epoch or step a pass counts.
    pub fn build(&self) -> Result<PassSampler> {
        let invalid = |reason: String| Err(Error::Config { what: "pass", reason });
        if self.batch_size == 0 {
            return invalid("batch_size must be at least 1".into());
        }
        if self.world == 0 || self.rank >= self.world {
            return invalid(format!("rank {} is not below world {}", self.rank, self.world));
        }
        if !self.batch_size.is_multiple_of(self.world) {
            return invalid(format!(
                "the global batch_size {} is not divisible by world {}",
                self.batch_size, self.world
            ));
        }
        if let Some(e) = self.epochs
            && self.epoch.checked_add(e.saturating_sub(1)).is_none()
        {
            return invalid(format!(
                "{e} epochs from epoch {} run past the last epoch a pass counts (2^64 - 1)",
                self.epoch
            ));
        }
        let pass = PassSampler { config: self.clone(), orders: Arc::new(Mutex::new(Vec::new())) };
        // Counted, not saturated (look 144: `epochs=2**62` of 7 steps said 2^64 - 1 steps).
        if let Some(e) = self.epochs
            && e.checked_mul(pass.steps()).is_none()
        {
            return invalid(format!(
                "{e} epochs of {} steps make more steps than a pass counts (2^64 - 1)",
                pass.steps()
            ));
        }
        pass.order(self.epoch);
        Ok(pass)
    }

    /// The order of epoch `epoch`.
    fn order(&self, epoch: u64) -> Order {
        if !self.shuffle || self.len <= 1 {
            return Order::Identity;
        }
        let key = mix64(mix64(self.seed ^ DOMAIN_CYCLIC).wrapping_add(epoch.wrapping_mul(GOLDEN)));
        if self.len <= SHUFFLE_MAX_LEN {
            Order::Table(shuffle(self.len, key))
        } else {
            Order::Feistel(Permutation::new(FeistelShape::new(self.len), self.len, key))
        }
    }
}

#[derive(Clone)]
enum Order {
    Identity,
    Table(Box<[u16]>),
    Feistel(Permutation),
}

/// The orders built so far, by epoch.
type OrderCache = Arc<Mutex<Vec<(u64, Arc<Order>)>>>;

/// Finite passes; see [`PassConfig`]. Clones share the orders built so far (the two latest
/// epochs are kept: prefetch threads straddle at most one epoch boundary).
#[derive(Clone)]
pub struct PassSampler {
    config: PassConfig,
    orders: OrderCache,
}

impl std::fmt::Debug for PassSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassSampler").field("config", &self.config).field("steps", &self.steps()).finish()
    }
}

impl PassSampler {
    /// Steps in one pass: `ceil(N / B)`, or `floor(N / B)` with `drop_last`.
    pub fn steps(&self) -> u64 {
        let (n, b) = (u64::from(self.config.len), u64::from(self.config.batch_size));
        if self.config.drop_last { n / b } else { n.div_ceil(b) }
    }

    /// Steps of all the passes (`epochs * steps`), `None` without end.
    pub fn total_steps(&self) -> Option<u64> {
        self.config.epochs.map(|e| e.saturating_mul(self.steps()))
    }

    /// The epoch global step `step` belongs to (the last epoch counted, `u64::MAX`, for steps
    /// past [`Self::last_step`]).
    pub fn epoch_of(&self, step: u64) -> u64 {
        self.config.epoch.saturating_add(step / self.steps().max(1))
    }

    /// The last step whose epoch can be counted: `u64::MAX` unless passes without end start
    /// within reach of epoch 2^64 - 1.
    pub fn last_step(&self) -> u64 {
        let steps = self.steps().max(1);
        (u64::MAX - self.config.epoch)
            .checked_mul(steps)
            .and_then(|s| s.checked_add(steps - 1))
            .unwrap_or(u64::MAX)
    }

    /// Indices this rank sees in one pass.
    pub fn num_items(&self) -> u64 {
        (0..self.steps()).map(|s| self.stripe(s).1 as u64).sum()
    }

    /// The order of epoch `epoch`, built once and shared.
    fn order(&self, epoch: u64) -> Arc<Order> {
        let mut orders = self.orders.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, o)) = orders.iter().find(|(e, _)| *e == epoch) {
            return Arc::clone(o);
        }
        let o = Arc::new(self.config.order(epoch));
        if orders.len() >= 2 {
            orders.sort_by_key(|(e, _)| *e);
            orders.remove(0);
        }
        orders.push((epoch, Arc::clone(&o)));
        o
    }

    /// The global positions of this rank's stripe of step `step`: (first, count); count 0 past
    /// the end.
    fn stripe(&self, step: u64) -> (u64, usize) {
        let (n, b, w, r) = (
            u64::from(self.config.len),
            u64::from(self.config.batch_size),
            u64::from(self.config.world),
            u64::from(self.config.rank),
        );
        if step >= self.steps() {
            return (0, 0);
        }
        let start = step * b;
        let here = (n - start).min(b);
        let (per, extra) = (here / w, here % w);
        let first = start + r * per + r.min(extra);
        (first, (per + u64::from(r < extra)) as usize)
    }

    /// This rank's indices of global step `step`, written over `out` (resized); empty past the
    /// last pass.
    pub fn fill(&self, step: u64, out: &mut Vec<u32>) {
        out.clear();
        let steps = self.steps();
        if steps == 0 || self.total_steps().is_some_and(|t| step >= t) {
            return;
        }
        let (first, count) = self.stripe(step % steps);
        // Positions are below N <= u32::MAX.
        let first = first as u32;
        let order = self.order(self.epoch_of(step));
        match &*order {
            Order::Identity => out.extend(first..first + count as u32),
            Order::Table(t) => {
                out.extend(t[first as usize..first as usize + count].iter().map(|&i| u32::from(i)))
            }
            Order::Feistel(p) => {
                out.resize(count, 0);
                if !super::avx2::try_fill(p, first, out) {
                    p.fill(first, out);
                }
            }
        }
    }

    /// Appends the indices at positions `first..first + count` of the endless stream of passes
    /// (position `k` is position `k mod N` of the pass `k div N` after the first), ignoring
    /// batches and ranks: a weighted mixture's draws from one source.
    pub(crate) fn extend_positions(&self, mut first: u64, mut count: u64, out: &mut Vec<u32>) {
        let n = u64::from(self.config.len);
        if n == 0 {
            return;
        }
        while count > 0 {
            let (epoch, pos) = (self.config.epoch.saturating_add(first / n), first % n);
            let take = count.min(n - pos);
            let order = self.order(epoch);
            let (pos, end) = (pos as usize, (pos + take) as usize);
            match &*order {
                Order::Identity => out.extend(pos as u32..end as u32),
                Order::Table(t) => out.extend(t[pos..end].iter().map(|&i| u32::from(i))),
                Order::Feistel(p) => {
                    let at = out.len();
                    out.resize(at + take as usize, 0);
                    if !super::avx2::try_fill(p, pos as u32, &mut out[at..]) {
                        p.fill(pos as u32, &mut out[at..]);
                    }
                }
            }
            first += take;
            count -= take;
        }
    }

    /// This rank's indices of step `step`, in a new vector.
    pub fn batch(&self, step: u64) -> Vec<u32> {
        let mut out = Vec::new();
        self.fill(step, &mut out);
        out
    }

    /// The configuration.
    pub fn config(&self) -> &PassConfig {
        &self.config
    }
}

/// A keyed permutation of `[0, len)` (a split's membership).
pub(crate) fn shuffle_positions(len: u32, key: u64) -> Vec<u32> {
    if len <= 1 {
        return (0..len).collect();
    }
    if len <= SHUFFLE_MAX_LEN {
        return shuffle(len, key).iter().map(|&i| u32::from(i)).collect();
    }
    let p = Permutation::new(FeistelShape::new(len), len, key);
    let mut out = vec![0u32; len as usize];
    if !super::avx2::try_fill(&p, 0, &mut out) {
        p.fill(0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(len: u32, batch: u32, shuffle: bool, drop_last: bool, rank: u32, world: u32) -> PassConfig {
        PassConfig {
            len,
            batch_size: batch,
            shuffle,
            seed: 5,
            epoch: 1,
            epochs: Some(1),
            drop_last,
            rank,
            world,
        }
    }

    #[test]
    fn epochs_run_back_to_back_each_with_its_own_order() {
        let one = cfg(100, 16, true, false, 0, 1);
        let many = PassConfig { epochs: Some(3), ..one.clone() }.build().unwrap();
        let endless = PassConfig { epochs: None, ..one.clone() }.build().unwrap();
        assert_eq!((many.total_steps(), endless.total_steps()), (Some(21), None));
        for e in 0..3u64 {
            let single = PassConfig { epoch: 1 + e, ..one.clone() }.build().unwrap();
            for s in 0..7 {
                assert_eq!(many.batch(e * 7 + s), single.batch(s), "epoch {e} step {s}");
                assert_eq!(endless.batch(e * 7 + s), single.batch(s));
            }
        }
        assert_ne!(many.batch(0), many.batch(7), "a new order each epoch");
        assert!(many.batch(21).is_empty());
        assert_eq!(endless.epoch_of(700), 101);
    }

    #[test]
    fn every_index_once_across_ranks_with_or_without_the_partial_batch() {
        for len in [1u32, 7, 64, 1000, 65_536, 70_001] {
            for (batch, world) in [(1u32, 1u32), (64, 1), (64, 4), (6, 3), (1024, 8)] {
                for shuffle in [false, true] {
                    for drop_last in [false, true] {
                        let passes: Vec<PassSampler> = (0..world)
                            .map(|r| cfg(len, batch, shuffle, drop_last, r, world).build().unwrap())
                            .collect();
                        let steps = passes[0].steps();
                        let mut seen = Vec::new();
                        for s in 0..steps {
                            let mut rows = 0;
                            for p in &passes {
                                let b = p.batch(s);
                                assert!(b.len() <= (batch / world) as usize + 1);
                                rows += b.len();
                                seen.extend(b);
                            }
                            assert!(
                                rows as u32 == batch || (s == steps - 1 && !drop_last),
                                "a full step is a full batch"
                            );
                        }
                        for p in &passes {
                            assert!(p.batch(steps).is_empty(), "nothing past the end");
                        }
                        let total: u64 = passes.iter().map(PassSampler::num_items).sum();
                        assert_eq!(total as usize, seen.len());
                        let mut sorted = seen.clone();
                        sorted.sort_unstable();
                        sorted.dedup();
                        assert_eq!(sorted.len(), seen.len(), "no index twice: {len} {batch} {world}");
                        let want = if drop_last { (len / batch * batch) as usize } else { len as usize };
                        assert_eq!(seen.len(), want);
                        if !drop_last {
                            assert_eq!(sorted, (0..len).collect::<Vec<_>>(), "every index once");
                        }
                        if !shuffle && world == 1 {
                            assert_eq!(seen, (0..want as u32).collect::<Vec<_>>(), "in order");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_shuffled_pass_depends_on_seed_and_epoch_only() {
        let a = cfg(1000, 10, true, false, 0, 1).build().unwrap();
        let b = cfg(1000, 10, true, false, 0, 1).build().unwrap();
        assert_eq!(a.batch(3), b.batch(3));
        let other_epoch = PassConfig { epoch: 2, ..a.config().clone() }.build().unwrap();
        assert_ne!(a.batch(0), other_epoch.batch(0));
        let ordered = cfg(1000, 10, false, false, 0, 1).build().unwrap();
        assert_ne!(a.batch(0), ordered.batch(0));
        assert!(
            matches!(
                cfg(10, 4, false, false, 0, 3).build(),
                Err(Error::Config { what: "pass", reason }) if reason.contains("4 is not divisible by world 3")
            ),
            "4 is not divisible by 3"
        );
        assert!(matches!(
            cfg(10, 0, false, false, 0, 1).build(),
            Err(Error::Config { what: "pass", reason }) if reason.contains("batch_size must be at least 1")
        ));
    }
}
