//! The Fisher-Yates path of the cyclic sampler for index spaces of at most [`SHUFFLE_MAX_LEN`]
//! indices: an exactly seeded shuffle per cycle, cached for the steps of that cycle.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, TryLockError};

use super::rng::{DOMAIN_SHUFFLE, SampleRng, mix64};

/// Largest `N` whose cyclic permutations are Fisher-Yates shuffles ([`shuffle`]) rather than the
/// Feistel network; see the module documentation. The trade-off at this size:
/// - Memory and time of the cached shuffle: a permutation of at most 2^16 indices fits `u16`, so
///   one takes `2N` bytes and the two cached ones at most 256 KiB per sampler (clones share
///   them), small beside the loader's batch buffers and within a core's L2 cache while the
///   shuffle's random swaps run over it. One is built once per cycle of `N / B` steps, so its
///   cost per step is that of the network's order or less, both negligible beside gathering a
///   batch (the sampler bench, `cargo bench --bench sampler`). Twice the size would need `u32`
///   entries (1 MiB for the pair); at 2^20, 8 MiB, and a shuffle that leaves L2 on the prefetch
///   thread that first reaches each cycle.
/// - Quality of the network: at 2^16 each half of its state is 8 bits and each round function one
///   of at most 2^32 keyed maps of 256 values, far from a random function; the fewer the bits, the
///   fewer the orders it reaches, which the tests `small_cycles_are_as_varied_as_uniform_shuffles`
///   and `small_cycles_have_uniform_successors` catch at `N = 8`, 16 and 100 (the network gave 10
///   repeated orders in 20,000 cycles at `N = 16`, where a shuffle gives none, and its successor
///   statistic was 10 standard deviations off at `N = 100`). Above the threshold the halves are at
///   least 9 bits, the network passes `cyclic_permutation_has_no_visible_structure` (at
///   `N = 100,000`), and it keeps nothing of size `N` in memory.
pub(super) const SHUFFLE_MAX_LEN: u32 = 1 << 16;
/// Cycle `cycle_key`'s permutation of `[0, n)` on the Fisher-Yates path (`n <= SHUFFLE_MAX_LEN`):
/// the inside-out form of the Fisher-Yates shuffle (after step `i`, `perm[..=i]` is a uniformly
/// random order of `[0, i]`), its draws from a SplitMix64 stream ([`SampleRng`]) seeded by the
/// cycle key alone, so the result is a pure function of `(seed, cycle)`, fixed across platforms
/// and releases.
///
/// Each draw is 32 random bits mapped to `[0, i]` by Lemire's multiply-shift with rejection
/// (unbiased); the two halves of each 64-bit output serve two consecutive draws, which halves
/// the hashing (which, not the swaps, dominates a shuffle).
pub(super) fn shuffle(n: u32, cycle_key: u64) -> Box<[u16]> {
    debug_assert!((1..=SHUFFLE_MAX_LEN).contains(&n));
    let mut rng = SampleRng::new(mix64(cycle_key ^ DOMAIN_SHUFFLE));
    let mut perm = vec![0u16; n as usize].into_boxed_slice();
    let mut word = 0;
    for i in 1..n {
        // The high half of a fresh output at odd `i`, its low half at the next `i`.
        let bits = if i % 2 == 1 {
            word = rng.next_u64();
            (word >> 32) as u32
        } else {
            word as u32
        };
        let j = shuffle_draw(bits, i + 1, &mut rng) as usize;
        perm[i as usize] = perm[j];
        // i < n <= 2^16.
        perm[j] = i as u16;
    }
    perm
}

/// `bits` mapped to `[0, bound)` by Lemire's multiply-shift; a product among the `2^32 mod bound`
/// surplus ones is rejected and redrawn from the high halves of fresh outputs of `rng`, as
/// [`SampleRng::below`] does.
#[inline(always)]
pub(super) fn shuffle_draw(bits: u32, bound: u32, rng: &mut SampleRng) -> u32 {
    let mut m = u64::from(bits) * u64::from(bound);
    if (m as u32) < bound {
        let threshold = bound.wrapping_neg() % bound;
        while (m as u32) < threshold {
            m = (rng.next_u64() >> 32) * u64::from(bound);
        }
    }
    (m >> 32) as u32
}

/// One cycle's shuffle, built on first use by whichever thread needs it first.
pub(super) type CycleShuffle = Arc<OnceLock<Box<[u16]>>>;

/// A cached cycle and its shuffle.
pub(super) struct CachedCycle {
    pub(super) cycle: u64,
    pub(super) shuffle: CycleShuffle,
}

/// The shuffles of the last two cycles the Fisher-Yates path used, shared by a [`Sampler`] and its
/// clones (the loader's prefetch threads each hold a clone).
///
/// Two slots, so threads working on steps either side of a cycle boundary do not evict each
/// other's cycle; a new cycle replaces the cached one farthest from it. Each cycle is then built
/// once, whenever the steps being filled at once span at most two cycles (at most `N / B + 1`
/// threads filling consecutive steps); more threads, or seeks back and forth, only rebuild a
/// shuffle (`O(N)`), never change a batch. The lock is held only to look a cycle up or to insert
/// its empty slot, never while a shuffle is built or copied from; a thread that needs a cycle
/// another thread is building waits for it (at most the shuffle's time, once per cycle).
#[derive(Clone, Default)]
pub(super) struct ShuffleCache {
    pub(super) slots: Arc<Mutex<[Option<CachedCycle>; 2]>>,
}

impl ShuffleCache {
    /// The slot of `cycle`, inserted empty (evicting the farthest cached cycle) if absent.
    pub(super) fn slot(&self, cycle: u64) -> CycleShuffle {
        // Nothing panics while the lock is held, and every state of the slots is consistent, so a
        // poisoned lock is used as is.
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = slots.iter().flatten().find(|cached| cached.cycle == cycle) {
            return Arc::clone(&cached.shuffle);
        }
        let victim = slots
            .iter()
            .enumerate()
            .max_by_key(|(_, slot)| slot.as_ref().map_or(u64::MAX, |cached| cached.cycle.abs_diff(cycle)))
            .map_or(0, |(i, _)| i);
        let shuffle = CycleShuffle::default();
        slots[victim] = Some(CachedCycle { cycle, shuffle: Arc::clone(&shuffle) });
        shuffle
    }

    /// The cached cycles, for `Debug` and the tests; `None` while another thread holds the lock.
    pub(super) fn cycles(&self) -> Option<Vec<u64>> {
        let slots = match self.slots.try_lock() {
            Ok(slots) => slots,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(slots.iter().flatten().map(|cached| cached.cycle).collect())
    }
}

impl fmt::Debug for ShuffleCache {
    /// The cached cycles, not their permutations (up to 2^16 indices each).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cycles() {
            Some(cycles) => f.debug_struct("ShuffleCache").field("cycles", &cycles).finish(),
            None => f.write_str("ShuffleCache { <in use> }"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;
    use crate::sampler::rng::GOLDEN;
    use crate::{Sampler, SamplerMode};

    fn sampler(n: u32, b: u32, mode: SamplerMode, seed: u64, rank: u32, world: u32) -> Sampler {
        Sampler::builder(n).batch_size(b).mode(mode).seed(seed).rank(rank).world(world).build().unwrap()
    }

    /// Mean and standard deviation of the number of distinct values among `c` independent uniform
    /// draws from `k` values (the occupancy problem). Written with `ln_1p` / `exp_m1` so that it
    /// stays exact where `k` dwarfs `c` (then nearly every draw is new).
    fn distinct_of_uniform_draws(k: f64, c: f64) -> (f64, f64) {
        // ln of the probability that `c` draws all miss a given value.
        let miss = c * (-1.0 / k).ln_1p();
        let mean = -k * miss.exp_m1();
        // Var = k q1 + k (k - 1) q2 - k^2 q1^2 with q1 = (1 - 1/k)^c, q2 = (1 - 2/k)^c, regrouped
        // as k (q1 - q2) + k^2 (q2 - q1^2) so that no two large terms cancel.
        let var = -k * miss.exp() * (c * (-1.0 / (k - 1.0)).ln_1p()).exp_m1()
            + k * k * (2.0 * miss).exp() * (c * (-1.0 / ((k - 1.0) * (k - 1.0))).ln_1p()).exp_m1();
        (mean, var.max(0.0).sqrt())
    }

    /// The orders of the first `cycles` cycles: each cycle's batches, concatenated.
    fn cycle_orders(n: u32, b: u32, seed: u64, cycles: u64) -> Vec<Vec<u32>> {
        let s = sampler(n, b, SamplerMode::Cyclic, seed, 0, 1);
        let spc = s.steps_per_cycle().unwrap();
        let mut buf = vec![0; b as usize];
        (0..cycles)
            .map(|cycle| {
                let mut order = Vec::with_capacity((spc * u64::from(b)) as usize);
                for step in cycle * spc..(cycle + 1) * spc {
                    s.fill(step, &mut buf).unwrap();
                    order.extend_from_slice(&buf);
                }
                order
            })
            .collect()
    }

    #[test]
    fn small_cycles_are_as_varied_as_uniform_shuffles() {
        // C cycles of a uniform shuffle are C independent draws from the K = N! orders: the
        // number of distinct orders is the occupancy count above, and the number of cycles equal
        // to the one before is Poisson with mean (C - 1) / K. For N = 8 (K = 40,320) and
        // C = 20,000: about 15,770 distinct orders (standard deviation 47) and 0.5 repeats; the
        // 6-round Feistel network over 3 bits gave 8,368 distinct orders and 8 repeats, and at
        // N = 16 10 orders that had already occurred.
        // For N = 16 and 100, K is so large that every order should be new. Orders beyond
        // 10^30 change nothing at these counts, and 100! would overflow the variance's k^2.
        for (n, b) in [(8u32, 8u32), (16, 16), (100, 10)] {
            const CYCLES: u64 = 20_000;
            let orders = cycle_orders(n, b, 0x5EED_0000 + u64::from(n), CYCLES);
            let c = CYCLES as f64;
            let k = (1..=n).map(f64::from).product::<f64>().min(1e30);
            let distinct = orders.iter().collect::<HashSet<_>>().len() as f64;
            let (mean, sd) = distinct_of_uniform_draws(k, c);
            assert!(
                (distinct - mean).abs() <= 6.0 * sd + 0.5,
                "n {n}: {distinct} distinct orders in {CYCLES} cycles, expected {mean:.1} +- {sd:.1}"
            );
            let repeats = orders.windows(2).filter(|w| w[0] == w[1]).count() as f64;
            let expected = (c - 1.0) / k;
            assert!(
                repeats <= expected + 6.0 * expected.sqrt() + 0.5,
                "n {n}: {repeats} cycles equal to the previous one, expected {expected:.3}"
            );
        }
    }

    #[test]
    fn small_cycles_have_uniform_successors() {
        // Which index follows which: under a uniform shuffle "v right after u" has probability
        // 1 / N in each cycle for each of the N (N - 1) pairs u != v. Pearson's statistic over
        // those cells, from C cycles, has mean (N - 1)^2 and variance
        // 2 (N - 1) / N * (N^2 - 2 + (N - 2) / (N - 1)) (from the covariances of the successor
        // indicators: 0 for pairs sharing a first or a second index, 1 / (N (N - 1)) for any
        // other two pairs; about 2 N^2). With C = 40,000 the 6-round Feistel network was 500, 22
        // and 10 standard deviations out at N = 8, 16 and 100 (a bias that grows with C).
        const CYCLES: u64 = 40_000;
        for (n, b) in [(8u32, 8u32), (16, 16), (100, 10)] {
            let orders = cycle_orders(n, b, 0x5AC_0000 + u64::from(n), CYCLES);
            let len = n as usize;
            let mut follows = vec![0u32; len * len];
            for order in &orders {
                for w in order.windows(2) {
                    follows[w[0] as usize * len + w[1] as usize] += 1;
                }
            }
            let expected = CYCLES as f64 / f64::from(n);
            let chi2: f64 = (0..len * len)
                .filter(|cell| cell / len != cell % len)
                .map(|cell| (f64::from(follows[cell]) - expected).powi(2) / expected)
                .sum();
            let n = f64::from(n);
            let mean = (n - 1.0).powi(2);
            let sd = (2.0 * (n - 1.0) / n * (n * n - 2.0 + (n - 2.0) / (n - 1.0))).sqrt();
            assert!(chi2 < mean + 6.0 * sd, "n {n}: successor chi-square {chi2}, expected {mean} +- {sd:.1}");
        }
    }

    #[test]
    fn eight_index_cycles_are_uniform_in_position_and_parity() {
        const CYCLES: u64 = 20_000;
        let orders = cycle_orders(8, 8, 0xC0FFEE, CYCLES);
        // Position table: how often value v lands at position p. Each cycle is one permutation
        // matrix, not 8 independent draws, so Pearson's statistic over the 8 x 8 table is 8/7
        // times a chi-square with 49 degrees of freedom: mean 56, standard deviation 11.3; 125 is
        // 6 deviations out.
        let mut table = [[0u32; 8]; 8];
        let mut even = 0u32;
        for order in &orders {
            for (p, &v) in order.iter().enumerate() {
                table[v as usize][p] += 1;
            }
            // Parity: a permutation of 8 elements with `c` cycles is even when 8 - c is.
            let mut seen = [false; 8];
            let mut cycles = 0;
            for start in 0..8 {
                if !seen[start] {
                    cycles += 1;
                    let mut i = start;
                    while !seen[i] {
                        seen[i] = true;
                        i = order[i] as usize;
                    }
                }
            }
            even += u32::from((8 - cycles) % 2 == 0);
        }
        let expected = CYCLES as f64 / 8.0;
        let chi2: f64 = table.iter().flatten().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        assert!(chi2 < 125.0, "chi-square {chi2}, table {table:?}");
        // Half the permutations are even: standard deviation sqrt(C) / 2 = 71; 430 is 6 out. (A
        // network of nothing but XOR rounds over halves of 2 or more bits would give only even
        // ones; a shuffle gives both.)
        let off = (f64::from(even) - CYCLES as f64 / 2.0).abs();
        assert!(off < 430.0, "{even} even permutations in {CYCLES} cycles");
    }

    #[test]
    fn fisher_yates_stream_is_pinned() {
        // The small-N cyclic stream is part of the resume contract: a saved run must replay the
        // same batches after an upgrade. These values pin it (seed 42, N = 10, one cycle a step);
        // an independent Python transcription of `shuffle` gives the same.
        let s = sampler(10, 10, SamplerMode::Cyclic, 42, 0, 1);
        assert_eq!(s.batch(0), [2, 3, 1, 7, 4, 5, 9, 6, 8, 0]);
        assert_eq!(s.batch(1), [5, 8, 3, 9, 7, 2, 6, 1, 0, 4]);
        assert_eq!(s.batch(u64::MAX), [4, 7, 3, 0, 8, 9, 1, 6, 5, 2]);
    }

    #[test]
    fn fisher_yates_path_covers_exactly_the_small_cyclic_samplers() {
        let cached = |n, b, mode| sampler(n, b, mode, 1, 0, 1).shuffles.is_some();
        assert!(cached(1, 1, SamplerMode::Cyclic));
        assert!(cached(SHUFFLE_MAX_LEN, 64, SamplerMode::Cyclic));
        assert!(!cached(SHUFFLE_MAX_LEN + 1, 64, SamplerMode::Cyclic));
        assert!(!cached(100, 10, SamplerMode::Iid));
        assert!(!cached(100, 10, SamplerMode::Sequential));
        // Either side of the threshold a whole-cycle batch is a permutation; at 2^16 the largest
        // index, 2^16 - 1, is the largest `u16`.
        for n in [SHUFFLE_MAX_LEN - 1, SHUFFLE_MAX_LEN, SHUFFLE_MAX_LEN + 1] {
            let s = sampler(n, n, SamplerMode::Cyclic, 4, 0, 1);
            for step in [0, 1, u64::MAX] {
                let mut batch = s.batch(step);
                batch.sort_unstable();
                assert!(batch.iter().copied().eq(0..n), "n {n} step {step}");
            }
        }
    }

    #[test]
    fn shuffle_cache_keeps_the_two_cycles_nearest_the_latest() {
        // N = 100, B = 10: cycle c is steps 10c..10c + 9.
        let s = sampler(100, 10, SamplerMode::Cyclic, 1, 0, 1);
        let cycles = |s: &Sampler| {
            let mut c = s.shuffles.as_ref().unwrap().cycles().unwrap();
            c.sort_unstable();
            c
        };
        assert_eq!(cycles(&s), [] as [u64; 0]);
        let first = s.batch(3);
        assert_eq!(cycles(&s), [0]);
        s.batch(15);
        assert_eq!(cycles(&s), [0, 1]);
        // A clone shares the cache: cycle 2 evicts cycle 0, the farthest from it.
        let clone = s.clone();
        clone.batch(27);
        assert_eq!(cycles(&s), [1, 2]);
        s.batch(12);
        assert_eq!(cycles(&clone), [1, 2]);
        // Seeking back rebuilds cycle 0, evicting cycle 2; the batch is the same.
        assert_eq!(clone.batch(3), first);
        assert_eq!(cycles(&s), [0, 1]);
        // A fresh sampler from the same config starts with its own, empty cache.
        let fresh = s.config().build().unwrap();
        assert_eq!(cycles(&fresh), [] as [u64; 0]);
        assert_eq!(fresh.batch(3), first);
        // Debug shows the cached cycles, not up to 2^16 indices per permutation.
        let big = sampler(SHUFFLE_MAX_LEN, SHUFFLE_MAX_LEN, SamplerMode::Cyclic, 1, 0, 1);
        big.batch(5);
        let debug = format!("{big:?}");
        assert!(debug.contains("ShuffleCache { cycles: [5] }"), "{debug}");
        assert!(debug.len() < 1000, "{} bytes of Debug output", debug.len());
    }

    #[test]
    fn fisher_yates_path_is_pure_across_clones_and_threads() {
        // N = 1000, B = 100: 10 steps per cycle, 6 cycles. The reference takes each step from a
        // fresh sampler, so no cache is reused; the threads share one cache and walk the steps
        // in different orders, crossing cycle boundaries both ways and evicting each other's
        // cycles (4 threads, 2 slots).
        const STEPS: u64 = 60;
        let build = || sampler(1000, 100, SamplerMode::Cyclic, 0xFEED, 0, 1);
        let reference: Vec<Vec<u32>> = (0..STEPS).map(|step| build().batch(step)).collect();
        let shared = build();
        let orders: [Vec<u64>; 4] = [
            (0..STEPS).collect(),
            (0..STEPS).rev().collect(),
            (0..STEPS).map(|i| (i * 37) % STEPS).collect(),
            (0..STEPS).map(|i| if i % 2 == 0 { i / 2 } else { STEPS - 1 - i / 2 }).collect(),
        ];
        let results: Vec<Vec<(u64, Vec<u32>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = orders
                .iter()
                .map(|order| {
                    let sampler = shared.clone();
                    scope.spawn(move || {
                        let mut buf = vec![0; 100];
                        let mut out = Vec::new();
                        for _ in 0..3 {
                            for &step in order {
                                sampler.fill(step, &mut buf).unwrap();
                                out.push((step, buf.clone()));
                            }
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (thread, result) in results.iter().enumerate() {
            assert_eq!(result.len(), 3 * STEPS as usize);
            for (step, batch) in result {
                assert_eq!(batch, &reference[*step as usize], "thread {thread} step {step}");
            }
        }
        // The shared sampler itself, after all that, and a sharded run agree too.
        for step in [0, 9, 10, 59, 30] {
            assert_eq!(shared.batch(step), reference[step as usize]);
            let stripes: Vec<u32> = (0..4)
                .flat_map(|r| sampler(1000, 100, SamplerMode::Cyclic, 0xFEED, r, 4).batch(step))
                .collect();
            assert_eq!(stripes, reference[step as usize]);
        }
    }

    proptest! {
        // Each case shuffles up to 2^16 indices several times in the unoptimised test build.
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fisher_yates_batches_are_pure_in_seed_and_step(
            n in prop_oneof![1u32..300, 1u32..=SHUFFLE_MAX_LEN],
            b_frac in 0.0f64..1.0,
            seed: u64,
            step: u64,
            other: u64,
        ) {
            let b = ((f64::from(n) * b_frac) as u32).clamp(1, n);
            let s = sampler(n, b, SamplerMode::Cyclic, seed, 0, 1);
            let first = s.batch(step);
            // The batch is its stripe of the cycle's shuffle, a function of (seed, cycle) alone.
            let spc = u64::from(n / b);
            let cycle_key = mix64(s.cyclic_key.wrapping_add((step / spc).wrapping_mul(GOLDEN)));
            let start = ((step % spc) * u64::from(b)) as usize;
            let perm = shuffle(n, cycle_key);
            let expected: Vec<u32> = perm[start..start + b as usize].iter().map(|&i| u32::from(i)).collect();
            prop_assert_eq!(&first, &expected);
            // Other cycles, through a clone, evict it from the shared cache; rebuilt, it is the same.
            let clone = s.clone();
            for k in 0..3 {
                clone.batch(other.wrapping_add(k * spc));
            }
            prop_assert_eq!(&s.batch(step), &first);
            prop_assert_eq!(&sampler(n, b, SamplerMode::Cyclic, seed, 0, 1).batch(step), &first);
        }
    }
}
