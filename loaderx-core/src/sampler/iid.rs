//! IID draws: counter-based random bits per (seed, step, position), mapped to `[0, N)` by
//! Lemire's method with rejection.

use super::rng::{DOMAIN_RETRY, GOLDEN, mix64};
use crate::sys::Kernel;

/// Indices per IID chunk: large enough to amortise the rejection check, small enough that a
/// chunk rarely holds a rejected draw (at N = 10^6, one chunk in 70).
pub(super) const IID_CHUNK: usize = 64;

/// The per-step keys of the IID stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct IidKey {
    /// Keys of the two hash rounds and the final whitening.
    pub(super) k: [u32; 3],
    /// Key of the redraws of rejected draws.
    pub(super) retry: u64,
}

impl IidKey {
    pub(super) fn new(iid_key: u64, step: u64) -> Self {
        let a = mix64(iid_key.wrapping_add(step.wrapping_mul(GOLDEN)));
        let b = mix64(a ^ DOMAIN_RETRY);
        IidKey { k: [a as u32, (a >> 32) as u32, b as u32], retry: mix64(b) }
    }

    /// The 32 random bits of the first attempt at global `position`: two rounds of a keyed
    /// 32-bit mixer, then a whitening key. For a random step key each position's bits are
    /// exactly uniform (the final XOR), and distinct positions of a step get distinct bits (each
    /// round is a bijection of `u32`).
    ///
    /// 32-bit lanes, so a batch is hashed eight positions per AVX2 instruction (`vpmulld`).
    #[inline(always)]
    pub(super) fn bits(&self, position: u32) -> u32 {
        mix32(mix32(position ^ self.k[0]) ^ self.k[1]) ^ self.k[2]
    }
}

/// A bijective 32-bit mixer with near-ideal avalanche: "lowbias32" (Chris Wellons' hash
/// prospector, with the constants of its best published variant).
#[inline(always)]
pub(super) fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x21F0_AAAD);
    x ^= x >> 15;
    x = x.wrapping_mul(0x735A_2D97);
    x ^ (x >> 15)
}

/// Fills `out` with the IID draws of global positions `start, start + 1, ...`: Lemire's
/// multiply-shift maps 32 random bits to `[0, n)`; a low word below `threshold` marks one of the
/// `2^32 mod n` surplus products, which is redrawn.
///
/// Written as plain loops over 32-bit lanes that the compiler vectorises (and, under
/// [`with_avx2`], with AVX2): the hot pass only folds the rare rejection into a flag; a second
/// pass over the chunk finds the rejected draws.
/// [`iid_fill`] as a [`Kernel`] for the AVX2 dispatch.
pub(super) struct IidFill<'a> {
    pub(super) key: &'a IidKey,
    pub(super) n: u32,
    pub(super) threshold: u32,
    pub(super) start: u32,
    pub(super) out: &'a mut [u32],
}

impl Kernel for IidFill<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        iid_fill(self.key, self.n, self.threshold, self.start, self.out);
    }
}

#[inline(always)]
pub(super) fn iid_fill(key: &IidKey, n: u32, threshold: u32, start: u32, out: &mut [u32]) {
    let map = |bits: u32| {
        let m = u64::from(bits) * u64::from(n);
        ((m >> 32) as u32, m as u32)
    };
    let mut first = start;
    for chunk in out.chunks_mut(IID_CHUNK) {
        let mut rejected = 0u32;
        for (j, o) in chunk.iter_mut().enumerate() {
            let (i, low) = map(key.bits(first.wrapping_add(j as u32)));
            *o = i;
            rejected |= u32::from(low < threshold);
        }
        if rejected != 0 {
            for (j, o) in chunk.iter_mut().enumerate() {
                let p = first.wrapping_add(j as u32);
                if map(key.bits(p)).1 < threshold {
                    *o = iid_redraw(key.retry, p, n, threshold);
                }
            }
        }
        first = first.wrapping_add(chunk.len() as u32);
    }
}

/// Redraws a rejected IID draw at `position` with attempts 1, 2, ... until one is accepted.
///
/// Rare (probability `threshold / 2^32 < N / 2^32` per draw), so kept out of the hot loop.
#[cold]
#[inline(never)]
pub(super) fn iid_redraw(retry_key: u64, position: u32, n: u32, threshold: u32) -> u32 {
    let mut attempt: u64 = 1;
    loop {
        let bits = mix64(retry_key.wrapping_add(((u64::from(position) << 32) | attempt).wrapping_mul(GOLDEN)))
            as u32;
        let m = u64::from(bits) * u64::from(n);
        if (m as u32) >= threshold {
            return (m >> 32) as u32;
        }
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Sampler, SamplerMode};

    fn sampler(n: u32, b: u32, mode: SamplerMode, seed: u64, rank: u32, world: u32) -> Sampler {
        Sampler::builder(n).batch_size(b).mode(mode).seed(seed).rank(rank).world(world).build().unwrap()
    }

    #[test]
    fn iid_is_uniform_by_chi_square() {
        const N: u32 = 100;
        const DRAWS: usize = 200_000;
        let s = sampler(N, 1000, SamplerMode::Iid, 2024, 0, 1);
        let mut counts = [0u64; N as usize];
        for step in 0..(DRAWS / 1000) as u64 {
            for i in s.batch(step) {
                counts[i as usize] += 1;
            }
        }
        let expected = DRAWS as f64 / f64::from(N);
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        // 99 degrees of freedom: mean 99, standard deviation 14; 200 is over 7 deviations out.
        assert!(chi2 < 200.0, "chi-square {chi2}");
    }

    #[test]
    fn iid_is_unbiased_on_a_large_index_space() {
        // N = 3 * 2^30: a 32-bit draw taken `% N` hits [0, 2^30) twice as often, so 3/4 of the
        // indices would fall below 2^31 instead of 2/3; a multiply-shift without rejection gives
        // every index `y` with `y % 3 == 0` two preimages, so half the indices instead of a third
        // would be multiples of 3. About a quarter of the draws here are rejected.
        const N: u32 = 3 << 30;
        let s = sampler(N, 1000, SamplerMode::Iid, 11, 0, 1);
        let (mut total, mut below, mut multiple_of_3) = (0u32, 0u32, 0u32);
        for step in 0..120 {
            for i in s.batch(step) {
                assert!(i < N);
                total += 1;
                below += u32::from(i < 1 << 31);
                multiple_of_3 += u32::from(i % 3 == 0);
            }
        }
        let below = f64::from(below) / f64::from(total);
        let multiple_of_3 = f64::from(multiple_of_3) / f64::from(total);
        // Standard deviation of each fraction over 120_000 draws is about 0.0014.
        assert!((below - 2.0 / 3.0).abs() < 0.015, "fraction below 2^31: {below}");
        assert!((multiple_of_3 - 1.0 / 3.0).abs() < 0.015, "fraction of multiples of 3: {multiple_of_3}");
    }

    #[test]
    fn iid_avx2_build_equals_the_portable_build() {
        for (n, seed) in [(1_000_000, 1), ((3 << 30) + 1, 2), (7, 3), (u32::MAX, 4)] {
            let s = sampler(n, 1000, SamplerMode::Iid, seed, 0, 1);
            for step in [0, 1, 99, u64::MAX] {
                let key = IidKey::new(s.iid_key, step);
                let mut portable = vec![0u32; 1000];
                iid_fill(&key, n, s.iid_threshold, 0, &mut portable);
                assert_eq!(s.batch(step), portable, "n {n} step {step}");
            }
        }
    }

    #[test]
    fn iid_neighbours_are_independent_by_chi_square() {
        // Counter-based bits: adjacent positions must not be correlated. Pairs (draw i mod 16,
        // draw i + 1 mod 16) over 256 cells.
        let s = sampler(1_000_000, 1024, SamplerMode::Iid, 77, 0, 1);
        let mut counts = [0u64; 256];
        for step in 0..200 {
            for w in s.batch(step).windows(2) {
                counts[((w[0] % 16) * 16 + w[1] % 16) as usize] += 1;
            }
        }
        let total: u64 = counts.iter().sum();
        let expected = total as f64 / 256.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        // 255 degrees of freedom: mean 255, standard deviation 22.6; 420 is over 7 deviations out.
        assert!(chi2 < 420.0, "chi-square {chi2}");
    }

    #[test]
    fn iid_rejection_path_is_pure_in_the_position() {
        // Heavily rejecting N; every local stripe must agree with the global batch, redraws
        // included.
        const N: u32 = (3 << 30) + 1;
        let global = sampler(N, 6, SamplerMode::Iid, 4, 0, 1).batch(9);
        let stripes: Vec<u32> =
            (0..3).flat_map(|r| sampler(N, 6, SamplerMode::Iid, 4, r, 3).batch(9)).collect();
        assert_eq!(global, stripes);
    }
}
