//! The random streams of the sampler: SplitMix64's mixer, the domain separators that keep the
//! streams of one seed apart, and the per-sample RNG for augmentations.

/// The golden-ratio increment of SplitMix64's Weyl sequence.
pub(super) const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Domain separators, so the IID bits, the permutation keys and the per-sample seeds of one seed
/// are unrelated streams.
pub(super) const DOMAIN_IID: u64 = 0x6969_6420_6269_7473;
pub(super) const DOMAIN_RETRY: u64 = 0x7265_7472_7920_6269;
pub(super) const DOMAIN_CYCLIC: u64 = 0x6379_636C_6963_206B;
pub(super) const DOMAIN_SAMPLE: u64 = 0x7361_6D70_6C65_2073;
pub(super) const DOMAIN_SHUFFLE: u64 = 0x7368_7566_666C_6520;
/// Domain of `Selection::split`'s membership permutation.
pub(crate) const DOMAIN_SPLIT: u64 = 0x7370_6C69_7420_7365;
/// SplitMix64's output mixer (Stafford's variant 13): a bijection of `u64` with full avalanche.
#[inline(always)]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of the sample at global `position` of step `step`'s batch, for per-sample
/// augmentation.
///
/// A pure hash of `(seed, step, position)`: a transform that seeds a [`SampleRng`] with it replays
/// exactly the same augmentation when the run is resumed at `step`. Use the position in the
/// *global* batch ([`Sampler::stripe_start`](crate::Sampler::stripe_start) plus the local position) so the augmentation does not
/// depend on the number of ranks. The stream is unrelated to the sampler's own index stream for the
/// same seed.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{SampleRng, sample_seed};
///
/// let mut a = SampleRng::new(sample_seed(42, 1000, 3));
/// let mut b = SampleRng::new(sample_seed(42, 1000, 3));
/// assert_eq!(a.next_u64(), b.next_u64());
/// let flip = a.next_f32() < 0.5;
/// let crop = a.below(8);
/// assert!(crop < 8);
/// # let _ = flip;
/// ```
pub fn sample_seed(seed: u64, step: u64, position: u32) -> u64 {
    let step_key = mix64(mix64(seed ^ DOMAIN_SAMPLE).wrapping_add(step.wrapping_mul(GOLDEN)));
    mix64(step_key.wrapping_add(u64::from(position).wrapping_mul(GOLDEN)))
}

/// A small deterministic random number generator (SplitMix64) for per-sample augmentation.
///
/// Seed it with [`sample_seed`]; its output is a pure function of the seed and the number of
/// values drawn, fixed across platforms and releases. Not cryptographic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRng {
    pub(super) state: u64,
}

impl SampleRng {
    /// A generator whose stream is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        SampleRng { state: seed }
    }

    /// The next 64 uniformly random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A uniform `f32` in `[0, 1)`, with 24 bits of precision.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// A uniform integer in `[0, n)`, unbiased (Lemire's multiply-shift with rejection).
    ///
    /// # Panics
    /// When `n` is 0: the range is empty.
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        assert!(n > 0, "SampleRng::below(0): the range is empty");
        let mut m = (self.next_u64() >> 32) * u64::from(n);
        if (m as u32) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u32) < threshold {
                m = (self.next_u64() >> 32) * u64::from(n);
            }
        }
        (m >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn sample_rng_is_deterministic_and_in_range() {
        let mut a = SampleRng::new(sample_seed(1, 2, 3));
        let mut b = a.clone();
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            let f = a.next_f32();
            assert!((0.0..1.0).contains(&f));
            counts[a.below(7) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert_eq!(a.below(1), 0);
        // Seeds differ across steps, positions and seeds, and are reproducible.
        let seeds: HashSet<u64> = (0..4u64)
            .flat_map(|seed| {
                (0..8u64).flat_map(move |step| (0..32u32).map(move |p| sample_seed(seed, step, p)))
            })
            .collect();
        assert_eq!(seeds.len(), 4 * 8 * 32);
        assert_eq!(sample_seed(9, 8, 7), sample_seed(9, 8, 7));
    }

    #[test]
    #[should_panic(expected = "empty")]
    fn sample_rng_below_zero_panics() {
        SampleRng::new(0).below(0);
    }
}
