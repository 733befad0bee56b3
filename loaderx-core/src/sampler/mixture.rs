//! Weighted mixtures of sources: which source and which record each row of a step reads, as a
//! pure function of ([`MixtureConfig`], [`SamplerConfig`], step).
//!
//! The global rows `t = 0, 1, 2, ...` (step `s` holds rows `s*B .. (s+1)*B`) are dealt to the
//! sources by a fixed pattern of `2^16` slots repeated forever: source `j` holds `q_j` slots
//! (its weight's share of `2^16`, at least one for a positive weight), spread evenly (slot `i`
//! of source `j` sits at the rank of the key `(i + 1/2) / q_j` among all the keys). Over any
//! window of `W` consecutive rows, source `j` therefore gets `w_j * W` rows within
//! `k + 1 + W / 2^16` for `k` sources (`w_j` its normalised weight): the spread plus the
//! quantisation of the weights to `1/2^16`.
//!
//! The `n`-th draw of source `j` (counted from row 0) is position `n` of the source's own
//! endless stream of keyed shuffles (one per pass over it, the same permutations as a finite
//! pass's), so each source cycles through all its records independently of the others. Row
//! `t`'s draw number is `q_j * (t / 2^16) + i`: O(1) from the step, nothing counted. A global
//! batch is then shuffled by a key of (seed, step) and cut into the ranks' stripes, so every
//! rank gets a random share of every source and the union of the ranks is the global batch
//! whatever the world size; within a rank's batch the rows are grouped by source (each group
//! one gather from its source).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::SamplerConfig;
use super::pass::{PassConfig, PassSampler, shuffle_positions};
use super::rng::mix64;
use crate::{Error, Result};

/// Slots of the dealing pattern: the weights are quantised to `1 / SLOTS`.
pub const MIXTURE_SLOTS: u32 = 1 << 16;

const DOMAIN_MIX_SOURCE: u64 = 0x6D69_7820_736F_7572;
const DOMAIN_MIX_BATCH: u64 = 0x6D69_7820_6261_7463;

/// A weighted mixture, as plain data in a [`LoaderState`](crate::LoaderState): one weight and
/// one length per source, in the order the sources were given. Changing the weights of a saved
/// state and resuming at step `s` starts a new schedule from `s`: each source's draws are then
/// those the new weights deal from row 0, not a continuation of the old ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureConfig {
    /// Relative weights (any non-negative finite numbers, not all zero).
    pub weights: Vec<f64>,
    /// Records in each source.
    pub lens: Vec<u32>,
}

impl MixtureConfig {
    /// The mixture sampler for batches of `sampler` (its `len` the sum of the sources', its
    /// batch, seed, rank and world).
    ///
    /// # Errors
    /// [`Error::Config`] for no sources, as many weights as lengths not given, a
    /// negative, NaN or infinite weight, all weights zero, a weighted source with no records, a
    /// `len` other than the sources' sum, or the sampler's own invalid parameters (batch 0,
    /// batch not divisible by world, rank not below world).
    pub fn build(&self, sampler: &SamplerConfig) -> Result<Mixture> {
        let bad = |reason: String| Err(Error::Config { what: "mixture", reason });
        let k = self.weights.len();
        if k == 0 || k != self.lens.len() {
            return bad(format!("a mixture of {k} weights and {} sources", self.lens.len()));
        }
        if k > usize::from(u16::MAX) {
            return bad(format!("a mixture of {k} sources (at most {})", u16::MAX));
        }
        if let Some((j, w)) = self.weights.iter().enumerate().find(|(_, w)| !w.is_finite() || **w < 0.0) {
            return bad(format!("mixture weight {j} is {w}: weights are finite and non-negative"));
        }
        let sum: f64 = self.weights.iter().sum();
        if sum <= 0.0 {
            return bad("every mixture weight is zero".into());
        }
        // Each finite, their sum not: the quotas came out of nothing and a step read past the
        // pattern (look 169, L169-2: a panic on the loader's threads).
        if !sum.is_finite() {
            return bad(format!(
                "the mixture weights sum to {sum}: only their ratios count, scale them down"
            ));
        }
        if let Some(j) = (0..k).find(|&j| self.weights[j] > 0.0 && self.lens[j] == 0) {
            return bad(format!("mixture source {j} has weight {} and no records", self.weights[j]));
        }
        let total: u64 = self.lens.iter().map(|&l| u64::from(l)).sum();
        if total != u64::from(sampler.len) {
            return bad(format!("the sources hold {total} records, the sampler {}", sampler.len));
        }
        let (b, world) = (sampler.batch_size, sampler.world);
        if b == 0 || world == 0 || sampler.rank >= world || !b.is_multiple_of(world) {
            return bad(format!(
                "a global batch of {b} over rank {} of world {world}: the batch must be positive \
                 and divisible by the world, the rank below it",
                sampler.rank
            ));
        }
        if b > super::config::MAX_LOCAL_BATCH {
            // Each step draws the whole global batch before taking this rank's stripe (look 79:
            // a batch of 2^31 aborted the process on its 32 GiB of draws).
            return bad(format!(
                "a global batch of {b}: a mixture draws the whole batch at every step, at most {}",
                super::config::MAX_LOCAL_BATCH
            ));
        }
        let quotas = quotas(&self.weights, sum);
        let pattern = pattern(&quotas);
        let mut starts = Vec::with_capacity(k + 1);
        starts.push(0u32);
        for &l in &self.lens {
            starts.push(starts[starts.len() - 1] + l);
        }
        let passes = (0..k)
            .map(|j| {
                PassConfig {
                    len: self.lens[j],
                    batch_size: 1,
                    shuffle: true,
                    seed: mix64(
                        sampler.seed ^ DOMAIN_MIX_SOURCE ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    ),
                    epoch: 0,
                    epochs: None,
                    drop_last: false,
                    rank: 0,
                    world: 1,
                }
                .build()
            })
            .collect::<Result<Vec<PassSampler>>>()?;
        Ok(Mixture {
            config: self.clone(),
            sampler: sampler.clone(),
            quotas,
            pattern: pattern.into(),
            starts,
            passes,
        })
    }
}

/// `SLOTS` split in proportion to `weights` (largest remainder), every positive weight given
/// at least one slot (taken from the largest).
fn quotas(weights: &[f64], sum: f64) -> Vec<u32> {
    let slots = f64::from(MIXTURE_SLOTS);
    let exact: Vec<f64> = weights.iter().map(|w| w / sum * slots).collect();
    let mut q: Vec<u32> = exact.iter().map(|e| e.floor() as u32).collect();
    let mut left = MIXTURE_SLOTS - q.iter().sum::<u32>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b))
    });
    for &j in order.iter().cycle().take(weights.len() * 2) {
        if left == 0 {
            break;
        }
        if weights[j] > 0.0 {
            q[j] += 1;
            left -= 1;
        }
    }
    for j in 0..weights.len() {
        if weights[j] > 0.0 && q[j] == 0 {
            let big = (0..weights.len()).max_by_key(|&i| q[i]).unwrap_or(0);
            q[big] -= 1;
            q[j] = 1;
        }
    }
    q
}

/// The dealing pattern: slot `o` is `(source, i)`, the `i`-th slot of that source in the period,
/// ordered by the keys `(2i + 1) / (2 q_j)` (ties by source).
fn pattern(quotas: &[u32]) -> Vec<(u16, u32)> {
    let mut slots: Vec<(u16, u32)> =
        quotas.iter().enumerate().flat_map(|(j, &q)| (0..q).map(move |i| (j as u16, i))).collect();
    let key = |&(j, i): &(u16, u32)| (u64::from(2 * i + 1), 2 * u64::from(quotas[usize::from(j)]));
    slots.sort_by(|a, b| {
        let ((na, da), (nb, db)) = (key(a), key(b));
        (u128::from(na) * u128::from(db)).cmp(&(u128::from(nb) * u128::from(da))).then(a.0.cmp(&b.0))
    });
    slots
}

/// The sampler of a weighted mixture; see [`MixtureConfig`] for how its batches are drawn.
#[derive(Clone)]
pub struct Mixture {
    config: MixtureConfig,
    sampler: SamplerConfig,
    quotas: Vec<u32>,
    pattern: Arc<[(u16, u32)]>,
    /// `starts[j]`: source `j`'s first index in the concatenation of the sources.
    starts: Vec<u32>,
    passes: Vec<PassSampler>,
}

impl std::fmt::Debug for Mixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mixture").field("config", &self.config).field("quotas", &self.quotas).finish()
    }
}

impl Mixture {
    /// The source of global row `t` and its draw number within that source (which fits a
    /// `u64` for every `t`: at most `q * (2^48 - 1) + q - 1 < q * 2^48 <= 2^64`).
    fn deal(&self, t: u64) -> (usize, u64) {
        let slots = u64::from(MIXTURE_SLOTS);
        let (j, i) = self.pattern[(t % slots) as usize];
        let j = usize::from(j);
        (j, u64::from(self.quotas[j]) * (t / slots) + u64::from(i))
    }

    /// The last step whose rows can be numbered: rows are counted from row 0 in a `u64`, so
    /// step `s` (rows `s*B .. (s+1)*B`) needs `(s + 1) * B <= u64::MAX`.
    pub fn last_step(&self) -> u64 {
        // B >= 1 (checked at build): the quotient is at least 1.
        u64::MAX / u64::from(self.sampler.batch_size.max(1)) - 1
    }

    /// Step `step`'s first global row, or the error naming the step past
    /// [`last_step`](Self::last_step).
    fn first_row(&self, step: u64) -> Result<u64> {
        let b = u64::from(self.sampler.batch_size);
        match step.checked_mul(b) {
            Some(first) if first.checked_add(b).is_some() => Ok(first),
            _ => Err(Error::InvalidArgument(format!(
                "mixture: step {step} is past the last step a global batch of {b} can reach ({})",
                self.last_step()
            ))),
        }
    }

    /// Rows of each source in the global rows `first..first + count` (a range that fits a
    /// `u64`, as [`first_row`](Self::first_row) makes sure), and the first draw of each.
    fn draws(&self, first: u64, count: u64) -> Vec<(u64, u64)> {
        let mut d: Vec<(u64, u64)> = vec![(u64::MAX, 0); self.quotas.len()];
        for t in first..first + count {
            let (j, n) = self.deal(t);
            if d[j].1 == 0 {
                d[j].0 = n;
            }
            d[j].1 += 1;
        }
        d
    }

    /// Global step `step`: for each row of this rank's stripe, `(source, index in the source)`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a step past [`last_step`](Self::last_step).
    pub fn rows(&self, step: u64) -> Result<Vec<(usize, u32)>> {
        let b = u64::from(self.sampler.batch_size);
        let first = self.first_row(step)?;
        // The global batch: each source's draws are consecutive in its own stream.
        let mut global: Vec<(usize, u32)> = Vec::with_capacity(b as usize);
        let mut idx = Vec::new();
        for (j, (first, count)) in self.draws(first, b).into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            idx.clear();
            self.passes[j].extend_positions(first, count, &mut idx);
            global.extend(idx.iter().map(|&i| (j, i)));
        }
        // Shuffled by (seed, step), then this rank's stripe, grouped by source.
        let key = mix64(mix64(self.sampler.seed ^ DOMAIN_MIX_BATCH).wrapping_add(step));
        let order = shuffle_positions(self.sampler.batch_size, key);
        let per = (self.sampler.batch_size / self.sampler.world) as usize;
        let r = self.sampler.rank as usize;
        let mut mine: Vec<(usize, u32)> =
            order[r * per..(r + 1) * per].iter().map(|&o| global[o as usize]).collect();
        mine.sort_by_key(|&(j, _)| j);
        Ok(mine)
    }

    /// This rank's rows of step `step` as indices into the sources back to back (source `j`'s
    /// records from `starts[j]`), written over `out`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a step past [`last_step`](Self::last_step) (`out` then
    /// empty).
    pub fn fill(&self, step: u64, out: &mut Vec<u32>) -> Result<()> {
        out.clear();
        out.extend(self.rows(step)?.into_iter().map(|(j, i)| self.starts[j] + i));
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &MixtureConfig {
        &self.config
    }

    /// Slots of `2^16` each source holds: its quantised weight.
    pub fn quotas(&self) -> &[u32] {
        &self.quotas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SamplerMode;

    fn sampler(len: u32, batch: u32, seed: u64, rank: u32, world: u32) -> SamplerConfig {
        SamplerConfig { len, batch_size: batch, mode: SamplerMode::Cyclic, seed, rank, world }
    }

    fn mixture(weights: &[f64], lens: &[u32], batch: u32, rank: u32, world: u32) -> Mixture {
        let cfg = MixtureConfig { weights: weights.to_vec(), lens: lens.to_vec() };
        cfg.build(&sampler(lens.iter().sum(), batch, 7, rank, world)).unwrap()
    }

    #[test]
    fn shares_stay_within_the_stated_bound_over_any_window() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for case in 0..40 {
            x = mix64(x);
            let k = 1 + (x % 6) as usize;
            let weights: Vec<f64> =
                (0..k).map(|j| ((mix64(x ^ j as u64) % 1000) as f64 + 1.0) / 7.0).collect();
            let sum: f64 = weights.iter().sum();
            let m = mixture(&weights, &vec![1000; k], 64, 0, 1);
            for w in [1u64, 7, 64, 1000, 70_000, 200_000] {
                let start = mix64(x ^ w) % 500_000;
                let mut count = vec![0u64; k];
                for t in start..start + w {
                    count[m.deal(t).0] += 1;
                }
                for j in 0..k {
                    let want = weights[j] / sum * w as f64;
                    let bound = (k + 1) as f64 + w as f64 / f64::from(MIXTURE_SLOTS);
                    assert!(
                        (count[j] as f64 - want).abs() <= bound,
                        "case {case}: source {j} of {k} got {} of {w}, want {want:.1} ± {bound:.2}",
                        count[j]
                    );
                }
            }
        }
    }

    #[test]
    fn each_source_cycles_through_all_its_records_independently() {
        let m = mixture(&[3.0, 1.0], &[50, 20], 8, 0, 1);
        // Each source's draw numbers, row by row, are 0, 1, 2, ...: nothing skipped or repeated.
        let mut next = [0u64; 2];
        for t in 0..1600 {
            let (j, n) = m.deal(t);
            assert_eq!(n, next[j], "row {t}");
            next[j] += 1;
        }
        assert_eq!(next, [1200, 400], "3:1");
        // Each pass over a source (N consecutive draws) is a permutation of its records, and a
        // step's rows are exactly its draws.
        for (j, n) in [(0usize, 50u64), (1, 20)] {
            for cycle in 0..next[j] / n {
                let mut c = Vec::new();
                m.passes[j].extend_positions(cycle * n, n, &mut c);
                c.sort_unstable();
                assert_eq!(c, (0..n as u32).collect::<Vec<_>>(), "source {j}, pass {cycle}");
            }
        }
        for step in [0u64, 6, 199] {
            let mut want: Vec<(usize, u32)> = (step * 8..step * 8 + 8)
                .map(|t| {
                    let (j, n) = m.deal(t);
                    let mut i = Vec::new();
                    m.passes[j].extend_positions(n, 1, &mut i);
                    (j, i[0])
                })
                .collect();
            let mut got = m.rows(step).unwrap();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "step {step}");
        }
    }

    #[test]
    fn batches_are_pure_and_ranks_union_is_the_global_batch() {
        let lens = [300, 1000, 77];
        let w = [0.5, 0.3, 0.2];
        let global = |s: u64| {
            let mut g = mixture(&w, &lens, 48, 0, 1).rows(s).unwrap();
            g.sort_unstable();
            g
        };
        for s in [0u64, 1, 99, 5000] {
            assert_eq!(
                mixture(&w, &lens, 48, 0, 1).rows(s).unwrap(),
                mixture(&w, &lens, 48, 0, 1).rows(s).unwrap()
            );
            for world in [1u32, 2, 3, 4, 8] {
                let mut union: Vec<(usize, u32)> =
                    (0..world).flat_map(|r| mixture(&w, &lens, 48, r, world).rows(s).unwrap()).collect();
                union.sort_unstable();
                assert_eq!(union, global(s), "step {s}, world {world}");
            }
        }
    }

    #[test]
    fn steps_past_the_last_numbered_row_are_errors_not_wrapped_rows() {
        for batch in [1u32, 8, 48, 1 << 20] {
            let m = mixture(&[0.5, 0.3, 0.2], &[300, 1000, 77], batch, 0, 1);
            let last = m.last_step();
            let rows_to = |s: u64| (u128::from(s) + 1) * u128::from(batch);
            assert!(rows_to(last) <= u128::from(u64::MAX), "batch {batch}");
            assert!(rows_to(last + 1) > u128::from(u64::MAX), "batch {batch}: last is the last");
            assert_eq!(
                m.rows(last).unwrap().len(),
                batch as usize,
                "batch {batch}: the last step has its rows"
            );
            for step in [last + 1, u64::MAX] {
                let mut out = vec![7];
                match m.fill(step, &mut out) {
                    Err(Error::InvalidArgument(msg)) => {
                        assert!(
                            msg.contains(&format!("step {step}")) && msg.contains(&last.to_string()),
                            "{msg}"
                        )
                    }
                    other => panic!("batch {batch}, step {step}: {other:?}"),
                }
                assert!(out.is_empty());
            }
        }
    }

    #[test]
    fn bad_weights_and_shapes_are_errors() {
        let s = sampler(30, 4, 0, 0, 1);
        for (weights, lens, what) in [
            (vec![1.0, -1.0], vec![10, 20], "finite and non-negative"),
            (vec![f64::NAN, 1.0], vec![10, 20], "finite and non-negative"),
            (vec![f64::INFINITY, 1.0], vec![10, 20], "finite and non-negative"),
            (vec![0.0, 0.0], vec![10, 20], "every mixture weight is zero"),
            // Each finite, their sum not (look 169, L169-2: a panic at the first step).
            (vec![1e308, 1e308], vec![10, 20], "scale them down"),
            (vec![1.0], vec![10, 20], "a mixture of 1 weights"),
            (vec![1.0, 1.0], vec![30, 0], "no records"),
            (vec![1.0, 1.0], vec![10, 10], "the sampler 30"),
        ] {
            match (MixtureConfig { weights, lens }).build(&s) {
                Err(Error::Config { what: "mixture", reason: m }) => assert!(m.contains(what), "{m}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        let zero_weight = MixtureConfig { weights: vec![1.0, 0.0], lens: vec![30, 0] };
        assert!(zero_weight.build(&s).is_ok(), "a source of weight 0 may be empty");
        let tiny = MixtureConfig { weights: vec![1.0, 1e-9], lens: vec![20, 10] };
        assert_eq!(tiny.build(&s).unwrap().quotas(), [MIXTURE_SLOTS - 1, 1], "a positive weight gets a slot");
    }
}
