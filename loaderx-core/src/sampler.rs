//! The stateless index generator: every batch is a pure function of `(config, step)`.
//!
//! A [`Sampler`] holds nothing but its configuration and values derived from it (once, or for
//! small cyclic index spaces once per cycle, cached), so resuming a run is "start at step `s`" and
//! costs nothing: [`Sampler::fill`] for step `s` on a fresh sampler yields exactly the `s`-th
//! batch of a run that started at step 0.
//!
//! Three modes ([`SamplerMode`]):
//! - **Sequential**: global position `p = step * B + j` maps to `p mod N`, a sliding window over a
//!   circular index space, so the tail never truncates.
//! - **IID**: uniform with replacement. The random bits are a pure hash of
//!   `(seed, step, position, attempt)`: two rounds of a bijective 32-bit mixer keyed by a
//!   SplitMix64 hash of `(seed, step)`, then a whitening key (redraws hash the attempt number
//!   too), mapped to `[0, N)` by Lemire's multiply-shift with rejection, so the draw is unbiased
//!   for every `N`. Everything is 32-bit lanes, hashed eight positions per AVX2 instruction.
//! - **Cyclic**: without replacement. Cycle `c` is a fresh permutation of `[0, N)` keyed by
//!   `(seed, c)`. A cycle has `N / B` (floor) steps; its remainder of `N % B` indices is dropped,
//!   a different remainder each cycle since the permutation changes. Two constructions, split at
//!   [`SHUFFLE_MAX_LEN`] = 2^16 indices:
//!   - `N <= 2^16`: an exactly seeded Fisher-Yates shuffle of `[0, N)`, each draw unbiased
//!     (Lemire's multiply-shift with rejection on 32 random bits) from a SplitMix64 stream
//!     ([`SampleRng`]) keyed by `(seed, c)` alone, so every order of `[0, N)` is as likely as
//!     under a true shuffle (up to the quality of SplitMix64 and its 2^64 seeds, fewer than the
//!     `N!` orders from `N = 21` on). A keyed network over a few bits is far from that: at
//!     `N = 8` the Feistel network below reached about 8,400 distinct orders in 20,000 cycles (a
//!     shuffle: 15,800) and repeated the previous cycle 16 times as often. Shuffling costs `O(N)`
//!     per cycle, not per step: the permutations of the last two cycles used are cached as `u16`
//!     ([`ShuffleCache`], shared by the sampler's clones, at most 256 KiB), and a step copies its
//!     stripe out.
//!   - `N > 2^16`: a 6-round Feistel network keyed by `(seed, c)` over `[0, a * 2^k)` with `2^k`
//!     about `sqrt(N)` and `a = ceil(N / 2^k)`, brought into range by cycle-walking (the domain
//!     exceeds `N` by less than `2^k`, so about `1 / sqrt(N)` of the values walk). The state is
//!     a pair of 16-bit halves `(x >> k, x mod 2^k)`; rounds alternate between adding a keyed
//!     hash of the low half to the high half modulo `a` and XORing a keyed hash of the high half
//!     into the low half, each hash a 16 x 16-bit multiply with its high and low words folded
//!     together. The network runs over blocks of consecutive positions: 64 at a time in
//!     hand-written AVX2 (sixteen 16-bit lanes per instruction, [`avx2`]) where the CPU has it,
//!     else 32 at a time as plain `u16` arrays that the compiler vectorises for SSE2; both give
//!     the same bits. Nothing of size `N` is materialised.
//!
//! Sharding: `batch_size` is the *global* batch size `B`; rank `r` of `world` takes the contiguous
//! stripe `[r * B / world, (r + 1) * B / world)` of the global batch. The global sample stream
//! therefore does not depend on the number of ranks, and a run resumed at global step `s` with a
//! different world size loses or repeats no index within a cycle.
//!
//! Per-sample randomness for augmentation comes from [`sample_seed`] and [`SampleRng`], both pure
//! functions of their inputs, so a transform replays its augmentations exactly on resume.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, TryLockError};

use serde::{Deserialize, Serialize};

use crate::mapped::with_avx2;
use crate::{Error, Result};

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;

/// The golden-ratio increment of SplitMix64's Weyl sequence.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Domain separators, so the IID bits, the permutation keys and the per-sample seeds of one seed
/// are unrelated streams.
const DOMAIN_IID: u64 = 0x6969_6420_6269_7473;
const DOMAIN_RETRY: u64 = 0x7265_7472_7920_6269;
const DOMAIN_CYCLIC: u64 = 0x6379_636C_6963_206B;
const DOMAIN_SAMPLE: u64 = 0x7361_6D70_6C65_2073;
const DOMAIN_SHUFFLE: u64 = 0x7368_7566_666C_6520;
/// Largest `N` whose cyclic permutations are Fisher-Yates shuffles ([`shuffle`]) rather than the
/// Feistel network; see the module documentation. The trade-off at this size:
/// - Memory and time of the cached shuffle: a permutation of at most 2^16 indices fits `u16`, so
///   one takes `2N` bytes and the two cached ones at most 256 KiB per sampler (clones share
///   them), small beside the loader's batch buffers and within a core's L2 cache while the
///   shuffle's random swaps run over it. Building one takes about 80 µs at 2^16 (release build),
///   once per cycle of `N / B` steps: at `B = 256` about 0.3 µs per step, against 0.13 µs for the
///   AVX2 network, either negligible beside gathering 256 records. Twice the size would need
///   `u32` entries (1 MiB for the pair); at 2^20, 8 MiB, and a shuffle of about 2.6 ms on the
///   prefetch thread that first reaches each cycle.
/// - Quality of the network: at 2^16 each half of its state is 8 bits and each round function one
///   of at most 2^32 keyed maps of 256 values, far from a random function; the fewer the bits, the
///   fewer the orders it reaches, which the tests `small_cycles_are_as_varied_as_uniform_shuffles`
///   and `small_cycles_have_uniform_successors` catch at `N = 8`, 16 and 100 (the network gave 10
///   repeated orders in 20,000 cycles at `N = 16`, where a shuffle gives none, and its successor
///   statistic was 10 standard deviations off at `N = 100`). Above the threshold the halves are at
///   least 9 bits, the network passes `cyclic_permutation_has_no_visible_structure` (at
///   `N = 100,000`), and it keeps nothing of size `N` in memory.
const SHUFFLE_MAX_LEN: u32 = 1 << 16;
/// Feistel rounds per permutation, half of them into each half of the state; must be even. 4 is
/// the least for a keyed pseudo-random permutation (Luby-Rackoff), but with this cheap 16-bit
/// round function 4 rounds leave visible structure (positions `2^k` apart land near each other
/// measurably less or more often than under a random permutation, up to 30 standard deviations
/// off); 6 rounds pass `cyclic_permutation_has_no_visible_structure`.
const ROUNDS: usize = 6;

/// SplitMix64's output mixer (Stafford's variant 13): a bijection of `u64` with full avalanche.
#[inline(always)]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// How a [`Sampler`] turns a step into indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SamplerMode {
    /// In order over a circular index space: global position `p` of the stream is index `p mod N`.
    Sequential,
    /// Uniform with replacement, unbiased (Lemire with rejection on counter-based random bits).
    Iid,
    /// Without replacement: each cycle of `N / B` steps walks a fresh keyed permutation of
    /// `[0, N)`; the cycle's last `N % B` positions are dropped so every batch is full.
    #[default]
    Cyclic,
}

/// Everything that determines a [`Sampler`]; plain data, saved and restored by the loader.
///
/// Two samplers built from equal configs produce identical batches for every step.
///
/// # Examples
/// ```
/// use loaderx_core::{SamplerConfig, SamplerMode};
///
/// let config = SamplerConfig {
///     len: 1000,
///     batch_size: 32,
///     mode: SamplerMode::Cyclic,
///     seed: 7,
///     rank: 0,
///     world: 1,
/// };
/// let sampler = config.build()?;
/// assert_eq!(sampler.config(), config);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SamplerConfig {
    /// Size `N` of the index space `[0, N)`.
    pub len: u32,
    /// Global batch size `B`, summed over all ranks.
    pub batch_size: u32,
    /// How indices are drawn.
    pub mode: SamplerMode,
    /// Seed of the random modes (ignored by [`SamplerMode::Sequential`]).
    pub seed: u64,
    /// This process's rank, in `0..world`.
    pub rank: u32,
    /// Number of ranks sharing each global batch.
    pub world: u32,
}

impl SamplerConfig {
    /// Validates the config and builds its [`Sampler`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `len` is 0, `batch_size` is 0, `world` is 0,
    /// `rank >= world`, `batch_size` is not divisible by `world`, or the mode is
    /// [`SamplerMode::Cyclic`] and `batch_size > len`.
    pub fn build(&self) -> Result<Sampler> {
        Sampler::from_config(self.clone())
    }
}

/// Builder of a [`Sampler`]; see [`Sampler::builder`].
///
/// Defaults: `batch_size` 1, mode [`SamplerMode::Cyclic`], seed 0, rank 0, world 1.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct SamplerBuilder {
    config: SamplerConfig,
}

impl SamplerBuilder {
    /// Sets the global batch size `B` (summed over all ranks).
    pub fn batch_size(mut self, n: u32) -> Self {
        self.config.batch_size = n;
        self
    }

    /// Sets how indices are drawn.
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Sets the seed of the random modes.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// Sets this process's rank, in `0..world`.
    pub fn rank(mut self, rank: u32) -> Self {
        self.config.rank = rank;
        self
    }

    /// Sets the number of ranks sharing each global batch.
    pub fn world(mut self, world: u32) -> Self {
        self.config.world = world;
        self
    }

    /// Validates the parameters and builds the sampler.
    ///
    /// # Errors
    /// As [`SamplerConfig::build`].
    pub fn build(self) -> Result<Sampler> {
        Sampler::from_config(self.config)
    }
}

/// The parameters of one cycle's Feistel permutation that do not depend on the cycle.
#[derive(Debug, Clone, Copy)]
struct FeistelShape {
    /// Width `k` in bits of the low half of the state, `x mod 2^k`.
    lo_bits: u32,
    /// Size `a = ceil(N / 2^k)` of the range of the high half `x >> k`; at most 2^16.
    hi_len: u32,
    /// `min(a, 2^16 - 1)`, the multiplier of [`Permutation::round_hi`]. Computed here, once per
    /// sampler, and read from memory at each fill: derived inside the fill, its known range lets
    /// the compiler drop the 16-bit type and multiply in 32-bit lanes (`pmuludq`), not `pmulhuw`.
    hi_scale: u16,
}

impl FeistelShape {
    fn new(n: u32) -> Self {
        // At least 2 bits, so that the low half is at least one bit wide. The low half takes the
        // larger half of the bits, so the high half's range fits 16 bits: a <= 2^(bits / 2).
        let bits = (u32::BITS - (n - 1).leading_zeros()).max(2);
        let lo_bits = bits - bits / 2;
        let hi_len = n.div_ceil(1 << lo_bits);
        FeistelShape { lo_bits, hi_len, hi_scale: hi_len.min(u32::from(u16::MAX)) as u16 }
    }

    /// Size `a * 2^k` of the permuted domain: at least `n`, and less than `n + 2^k`.
    #[cfg(test)]
    fn domain(self) -> u64 {
        u64::from(self.hi_len) << self.lo_bits
    }
}

/// A keyed permutation of `[0, a * 2^k)` (see [`FeistelShape`]), restricted to `[0, n)` by
/// cycle-walking.
///
/// The state `x` is the pair `(l, r) = (x >> k, x mod 2^k)` with `l < a`, each half in a `u16`;
/// `(l << k) | r` is below `n + 2^k`, so only a fraction below `2^k / n` (about `1 / sqrt(n)`) of
/// the values need a second pass of the cycle-walk. Six rounds alternate between the halves:
/// even rounds add a round function of `r`, reduced to `[0, a)`, to `l` modulo `a`; odd rounds
/// XOR the top `k` bits of a round function of `l` into `r`. Each round is a bijection of the
/// domain for any round function, so the network is a permutation.
///
/// Every round is 16-bit arithmetic (an XOR, two 16 x 16-bit products, a fold, a shift or a
/// modular addition), which SSE2 runs eight lanes at a time (`pmullw` / `pmulhuw`):
/// [`block`](Self::block) runs the network over [`BLOCK`] consecutive positions held as two
/// plain `u16` arrays, loops the compiler vectorises.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permutation {
    /// Per-round key XORed into the round input.
    keys: [u16; ROUNDS],
    /// Per-round odd multiplier.
    muls: [u16; ROUNDS],
    /// `a mod 2^16` (0 when `a = 2^16`), the modulus of the high half.
    hi_len: u16,
    /// Multiplier that scales a 16-bit hash into `[0, a)`: `a`, or `2^16 - 1` when `a = 2^16`
    /// (then the value `2^16 - 1` is never added, which leaves the round a bijection; such `a`
    /// only occurs for `n > 2^32 - 2^16`).
    hi_scale: u16,
    /// Right shift that leaves the top `k` bits of a 16-bit value.
    lo_shift: u32,
    lo_bits: u32,
    lo_mask: u16,
    n: u32,
}

/// Positions per vectorised block of the cyclic sampler: four 128-bit vectors of `u16` lanes per
/// half, so both halves fit the 16 SSE registers (at 64 they spill to the stack); large enough
/// to amortise the per-block cycle-walk check.
const BLOCK: usize = 32;

impl Permutation {
    fn new(shape: FeistelShape, n: u32, cycle_key: u64) -> Self {
        let (mut keys, mut muls) = ([0; ROUNDS], [0; ROUNDS]);
        for round in 0..ROUNDS {
            let k = mix64(cycle_key.wrapping_add((round as u64 + 1).wrapping_mul(GOLDEN)));
            keys[round] = k as u16;
            muls[round] = (k >> 16) as u16 | 1;
        }
        Permutation {
            keys,
            muls,
            hi_len: shape.hi_len as u16,
            hi_scale: shape.hi_scale,
            lo_shift: u16::BITS - shape.lo_bits,
            lo_bits: shape.lo_bits,
            lo_mask: ((1u32 << shape.lo_bits) - 1) as u16,
            n,
        }
    }

    /// The 16-bit hash of round `round`: the full 32-bit product of the keyed input and an odd
    /// multiplier, its high and low 16 bits folded together by XOR (the "multiply-fold" mixer of
    /// wyhash, at 16 bits). The high half makes the top output bits depend on every input bit;
    /// the low half (arithmetic mod 2^16) breaks the monotonicity of the high half; the XOR
    /// before the product makes the round non-affine in its input.
    #[inline(always)]
    fn hash(&self, round: usize, x: u16) -> u16 {
        let (y, m) = (x ^ self.keys[round], self.muls[round]);
        // Written as two 16-bit products (`pmulhuw`, `pmullw`) so that the vectorised loop stays
        // in 16-bit lanes.
        let hi = ((u32::from(y) * u32::from(m)) >> 16) as u16;
        hi ^ y.wrapping_mul(m)
    }

    /// Even round: `l <- (l + F(r)) mod a`, with `F(r)` the hash scaled to `[0, a)` by a
    /// multiply-shift.
    #[inline(always)]
    fn round_hi(&self, round: usize, l: u16, r: u16) -> u16 {
        let h = self.hash(round, r);
        let f = ((u32::from(h) * u32::from(self.hi_scale)) >> 16) as u16;
        // (l + f) mod a without leaving 16 bits: l - (a - f), plus a where that wrapped.
        let d = self.hi_len.wrapping_sub(f);
        let t = l.wrapping_sub(d);
        if l < d { t.wrapping_add(self.hi_len) } else { t }
    }

    /// [`round_hi`](Self::round_hi) for `a <= 2^15`, where `l + F(r) < 2^16`: the reduction
    /// modulo `a` is `min(s, s - a)` (wrapping), two instructions fewer per vector.
    #[inline(always)]
    fn round_hi_small(&self, round: usize, l: u16, r: u16) -> u16 {
        let h = self.hash(round, r);
        let s = l.wrapping_add(((u32::from(h) * u32::from(self.hi_scale)) >> 16) as u16);
        s.min(s.wrapping_sub(self.hi_len))
    }

    /// Odd round: `r <- r ^ F(l)`, with `F(l)` the top `k` bits of the hash.
    #[inline(always)]
    fn round_lo(&self, round: usize, l: u16, r: u16) -> u16 {
        r ^ (self.hash(round, l) >> self.lo_shift)
    }

    /// One pass of the network: a bijection of `[0, a * 2^k)`.
    #[inline(always)]
    fn feistel(&self, x: u32) -> u32 {
        let mut l = (x >> self.lo_bits) as u16;
        let mut r = x as u16 & self.lo_mask;
        for pair in 0..ROUNDS / 2 {
            l = self.round_hi(2 * pair, l, r);
            r = self.round_lo(2 * pair + 1, l, r);
        }
        (u32::from(l) << self.lo_bits) | u32::from(r)
    }

    /// [`feistel`](Self::feistel) of the `BLOCK` consecutive values `first, first + 1, ...`
    /// (wrapping), as structure-of-arrays over `u16` lanes so that each loop vectorises.
    #[inline(always)]
    ///
    /// `SMALL` selects [`round_hi_small`](Self::round_hi_small), valid where `a <= 2^15`.
    fn block<const SMALL: bool>(&self, first: u32, out: &mut [u32; BLOCK]) {
        let mut l = [0u16; BLOCK];
        let mut r = [0u16; BLOCK];
        let (l0, r0) = ((first >> self.lo_bits) as u16, first as u16 & self.lo_mask);
        if self.lo_bits >= BLOCK.ilog2() {
            // The block crosses at most one multiple of 2^k, from position `carry` on: split
            // without leaving 16-bit lanes.
            let carry = ((1u32 << self.lo_bits) - u32::from(r0)).min(BLOCK as u32) as u16;
            for ((lj, rj), j) in l.iter_mut().zip(&mut r).zip(0u16..) {
                *lj = l0.wrapping_add(u16::from(j >= carry));
                *rj = r0.wrapping_add(j) & self.lo_mask;
            }
        } else {
            for ((lj, rj), j) in l.iter_mut().zip(&mut r).zip(0u32..) {
                let x = first.wrapping_add(j);
                *lj = (x >> self.lo_bits) as u16;
                *rj = x as u16 & self.lo_mask;
            }
        }
        for pair in 0..ROUNDS / 2 {
            for (lj, &rj) in l.iter_mut().zip(&r) {
                *lj = if SMALL {
                    self.round_hi_small(2 * pair, *lj, rj)
                } else {
                    self.round_hi(2 * pair, *lj, rj)
                };
            }
            for (rj, &lj) in r.iter_mut().zip(&l) {
                *rj = self.round_lo(2 * pair + 1, lj, *rj);
            }
        }
        for ((o, &lj), &rj) in out.iter_mut().zip(&l).zip(&r) {
            *o = (u32::from(lj) << self.lo_bits) | u32::from(rj);
        }
    }

    /// The image of `i < n` under the permutation of `[0, n)`.
    #[cfg(test)]
    fn apply(&self, i: u32) -> u32 {
        self.walk(self.feistel(i))
    }

    /// Finishes the cycle-walk of a value that has been through the network once.
    #[inline(always)]
    fn walk(&self, mut x: u32) -> u32 {
        // Walking the cycle of `i` in the permuted domain reaches a value below `n` before it
        // comes back to `i` itself, so this terminates; the domain is below n + 2^k, so a value
        // lands outside `[0, n)` with probability below 2^k / n.
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }

    /// Writes the images of the consecutive positions `first, first + 1, ...` into `out`: the
    /// network over whole blocks, then the cycle-walks of the rare values that landed in
    /// `[n, a * 2^k)`.
    #[inline(always)]
    fn fill(&self, first: u32, out: &mut [u32]) {
        if self.small() {
            self.fill_with::<BLOCK>(first, out, |p, chunk| self.block::<true>(p, chunk));
        } else {
            self.fill_with::<BLOCK>(first, out, |p, chunk| self.block::<false>(p, chunk));
        }
    }

    /// Whether `a <= 2^15`, where [`round_hi_small`](Self::round_hi_small) applies.
    #[inline(always)]
    fn small(&self) -> bool {
        self.hi_scale <= 1 << 15
    }

    /// [`fill`](Self::fill) with a given block network (`block(first, out)` writes the images of
    /// `B` consecutive positions): whole blocks, a last partial one through a scratch block, and
    /// the cycle-walks. Shared by the portable network and the AVX2 kernel.
    #[inline(always)]
    fn fill_with<const B: usize>(
        &self,
        first: u32,
        out: &mut [u32],
        mut block: impl FnMut(u32, &mut [u32; B]),
    ) {
        let mut chunks = out.chunks_exact_mut(B);
        let mut position = first;
        for chunk in &mut chunks {
            let chunk: &mut [u32; B] = chunk.try_into().expect("chunks_exact_mut yields B");
            block(position, chunk);
            self.walk_block(chunk);
            position = position.wrapping_add(B as u32);
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut tmp = [0u32; B];
            block(position, &mut tmp);
            rest.copy_from_slice(&tmp[..rest.len()]);
            self.walk_block(rest);
        }
    }

    /// Cycle-walks the values of `out` that are not below `n`, after a branch-free scan: most
    /// blocks hold none.
    #[inline(always)]
    fn walk_block(&self, out: &mut [u32]) {
        let n = self.n;
        if out.iter().fold(false, |any, &x| any | (x >= n)) {
            for o in out {
                *o = self.walk(*o);
            }
        }
    }
}

/// A stateless, resumable index generator.
///
/// Batches are a pure function of the [`SamplerConfig`] and the step; see the
/// [module documentation](self) for the modes and the sharding rule.
///
/// # Examples
/// ```
/// use loaderx_core::{Sampler, SamplerMode};
///
/// let sampler = Sampler::builder(10).batch_size(4).mode(SamplerMode::Sequential).build()?;
/// assert_eq!(sampler.batch(2), vec![8, 9, 0, 1]);
///
/// let shuffled = Sampler::builder(1000).batch_size(100).seed(3).build()?;
/// let mut buf = vec![0u32; 100];
/// shuffled.fill(12, &mut buf)?;
/// assert_eq!(buf, shuffled.batch(12));
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplerConfig,
    /// `batch_size / world`.
    local: u32,
    /// Global position of this rank's first index in a batch: `rank * local`.
    stripe_start: u32,
    /// Lemire rejection threshold `2^32 mod N`: a product whose low word is below it is rejected.
    iid_threshold: u32,
    /// Seed-derived key of the IID stream.
    iid_key: u64,
    /// Seed-derived key of the cycle permutations.
    cyclic_key: u64,
    /// Steps of one cycle (cyclic: `N / B`, at least 1; sequential: `ceil(N / B)`).
    steps_per_cycle: u64,
    feistel: FeistelShape,
    /// The cached cycle permutations of the Fisher-Yates path: `Some` exactly in cyclic mode with
    /// `N <= SHUFFLE_MAX_LEN`. Shared by clones, so prefetch threads build each cycle once.
    shuffles: Option<ShuffleCache>,
}

impl Sampler {
    /// A builder over the index space `[0, len)`.
    pub fn builder(len: u32) -> SamplerBuilder {
        SamplerBuilder {
            config: SamplerConfig {
                len,
                batch_size: 1,
                mode: SamplerMode::default(),
                seed: 0,
                rank: 0,
                world: 1,
            },
        }
    }

    fn from_config(config: SamplerConfig) -> Result<Self> {
        let SamplerConfig { len: n, batch_size: b, mode, seed, rank, world } = config;
        let invalid = |msg: String| Err(Error::InvalidArgument(format!("sampler: {msg}")));
        if n == 0 {
            return invalid("the index space is empty (len 0)".into());
        }
        if b == 0 {
            return invalid("batch_size must be at least 1".into());
        }
        if world == 0 {
            return invalid("world must be at least 1".into());
        }
        if rank >= world {
            return invalid(format!("rank {rank} is not below world {world}"));
        }
        if b % world != 0 {
            return invalid(format!("the global batch_size {b} is not divisible by world {world}"));
        }
        if mode == SamplerMode::Cyclic && b > n {
            return invalid(format!("a cyclic batch_size {b} exceeds the {n} indices of a cycle"));
        }
        let local = b / world;
        let steps_per_cycle = match mode {
            SamplerMode::Cyclic => u64::from(n / b),
            _ => u64::from(n.div_ceil(b)),
        };
        Ok(Sampler {
            local,
            stripe_start: rank * local,
            iid_threshold: n.wrapping_neg() % n,
            iid_key: mix64(seed ^ DOMAIN_IID),
            cyclic_key: mix64(seed ^ DOMAIN_CYCLIC),
            steps_per_cycle,
            feistel: FeistelShape::new(n),
            shuffles: (mode == SamplerMode::Cyclic && n <= SHUFFLE_MAX_LEN).then(ShuffleCache::default),
            config,
        })
    }

    /// Writes this rank's indices of global step `step` into `out`.
    ///
    /// `out[k]` is position `stripe_start() + k` of the global batch. Allocates nothing, except
    /// in cyclic mode with `N <= 2^16`, where the first call for a cycle among the sampler and its
    /// clones builds that cycle's shuffle (`2N` bytes, cached; see the module documentation).
    /// Safe to call from several threads at once, on one sampler or on clones.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `out.len()` is not
    /// [`local_batch_size`](Self::local_batch_size).
    pub fn fill(&self, step: u64, out: &mut [u32]) -> Result<()> {
        if out.len() != self.local as usize {
            return Err(Error::InvalidArgument(format!(
                "sampler: the output slice holds {} indices; the local batch size is {}",
                out.len(),
                self.local
            )));
        }
        match self.config.mode {
            SamplerMode::Sequential => self.fill_sequential(step, out),
            SamplerMode::Iid => self.fill_iid(step, out),
            SamplerMode::Cyclic => self.fill_cyclic(step, out),
        }
        Ok(())
    }

    /// This rank's indices of global step `step`, in a new vector.
    pub fn batch(&self, step: u64) -> Vec<u32> {
        let mut out = vec![0; self.local as usize];
        self.fill(step, &mut out).expect("the buffer has the local batch size by construction");
        out
    }

    /// Size `N` of the index space.
    #[expect(
        clippy::len_without_is_empty,
        reason = "a sampler is never empty: len 0 is a construction error"
    )]
    pub fn len(&self) -> u32 {
        self.config.len
    }

    /// Global batch size `B`, summed over all ranks.
    pub fn global_batch_size(&self) -> u32 {
        self.config.batch_size
    }

    /// This rank's share of each batch: `B / world`, the length [`fill`](Self::fill) expects.
    pub fn local_batch_size(&self) -> u32 {
        self.local
    }

    /// Global position of this rank's first index in each batch: `rank * B / world`.
    ///
    /// Pass `stripe_start() + k` as the position to [`sample_seed`] so that per-sample
    /// randomness does not depend on the world size.
    pub fn stripe_start(&self) -> u32 {
        self.stripe_start
    }

    /// Steps of one cycle: `N / B` (floor) for cyclic, `ceil(N / B)` for sequential (the steps of
    /// one pass, the last of which may wrap into the next), `None` for IID, which has no cycles.
    pub fn steps_per_cycle(&self) -> Option<u64> {
        match self.config.mode {
            SamplerMode::Iid => None,
            _ => Some(self.steps_per_cycle),
        }
    }

    /// The configuration this sampler was built from; [`SamplerConfig::build`] rebuilds it.
    pub fn config(&self) -> SamplerConfig {
        self.config.clone()
    }

    fn fill_sequential(&self, step: u64, out: &mut [u32]) {
        let n = self.config.len;
        let first = (u128::from(step) * u128::from(self.config.batch_size) + u128::from(self.stripe_start))
            % u128::from(n);
        let mut i = first as u32;
        for o in out {
            *o = i;
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    fn fill_iid(&self, step: u64, out: &mut [u32]) {
        let key = IidKey::new(self.iid_key, step);
        let (n, threshold, start) = (self.config.len, self.iid_threshold, self.stripe_start);
        with_avx2(|| iid_fill(&key, n, threshold, start, out));
    }

    fn fill_cyclic(&self, step: u64, out: &mut [u32]) {
        let spc = self.steps_per_cycle;
        let (cycle, step_in_cycle) = (step / spc, step % spc);
        let cycle_key = mix64(self.cyclic_key.wrapping_add(cycle.wrapping_mul(GOLDEN)));
        // Below spc * B <= N <= u32::MAX, so every position of the cycle fits a u32.
        let first = (step_in_cycle * u64::from(self.config.batch_size)) as u32 + self.stripe_start;
        if let Some(cache) = &self.shuffles {
            // Outside the cache's lock: a thread that needs this cycle while another builds it
            // waits on the `OnceLock` (it would compute the same values); one that needs the
            // other cached cycle does not wait.
            let slot = cache.slot(cycle);
            let perm = slot.get_or_init(|| shuffle(self.config.len, cycle_key));
            let stripe = &perm[first as usize..first as usize + out.len()];
            for (o, &i) in out.iter_mut().zip(stripe) {
                *o = u32::from(i);
            }
            return;
        }
        let perm = Permutation::new(self.feistel, self.config.len, cycle_key);
        // The hand-written AVX2 kernel where the CPU has it (the compiler's own AVX2 build of the
        // portable loops is slower than their SSE2 build, so `with_avx2` would not help).
        if !crate::mapped::fill_cyclic_avx2(&perm, first, out) {
            perm.fill(first, out);
        }
    }
}

/// Cycle `cycle_key`'s permutation of `[0, n)` on the Fisher-Yates path (`n <= SHUFFLE_MAX_LEN`):
/// the inside-out form of the Fisher-Yates shuffle (after step `i`, `perm[..=i]` is a uniformly
/// random order of `[0, i]`), its draws from a SplitMix64 stream ([`SampleRng`]) seeded by the
/// cycle key alone, so the result is a pure function of `(seed, cycle)`, fixed across platforms
/// and releases.
///
/// Each draw is 32 random bits mapped to `[0, i]` by Lemire's multiply-shift with rejection
/// (unbiased); the two halves of each 64-bit output serve two consecutive draws, which takes a
/// third off the time of a shuffle (the hashing, not the swaps, dominates it: about 80 µs rather
/// than 120 µs at 2^16 in a release build).
fn shuffle(n: u32, cycle_key: u64) -> Box<[u16]> {
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
fn shuffle_draw(bits: u32, bound: u32, rng: &mut SampleRng) -> u32 {
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
type CycleShuffle = Arc<OnceLock<Box<[u16]>>>;

/// A cached cycle and its shuffle.
struct CachedCycle {
    cycle: u64,
    shuffle: CycleShuffle,
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
struct ShuffleCache {
    slots: Arc<Mutex<[Option<CachedCycle>; 2]>>,
}

impl ShuffleCache {
    /// The slot of `cycle`, inserted empty (evicting the farthest cached cycle) if absent.
    fn slot(&self, cycle: u64) -> CycleShuffle {
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
    fn cycles(&self) -> Option<Vec<u64>> {
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

/// Indices per IID chunk: large enough to amortise the rejection check, small enough that a
/// chunk rarely holds a rejected draw (at N = 10^6, one chunk in 70).
const IID_CHUNK: usize = 64;

/// The per-step keys of the IID stream.
#[derive(Debug, Clone, Copy)]
struct IidKey {
    /// Keys of the two hash rounds and the final whitening.
    k: [u32; 3],
    /// Key of the redraws of rejected draws.
    retry: u64,
}

impl IidKey {
    fn new(iid_key: u64, step: u64) -> Self {
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
    fn bits(&self, position: u32) -> u32 {
        mix32(mix32(position ^ self.k[0]) ^ self.k[1]) ^ self.k[2]
    }
}

/// A bijective 32-bit mixer with near-ideal avalanche: "lowbias32" (Chris Wellons' hash
/// prospector, with the constants of its best published variant).
#[inline(always)]
fn mix32(mut x: u32) -> u32 {
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
#[inline(always)]
fn iid_fill(key: &IidKey, n: u32, threshold: u32, start: u32, out: &mut [u32]) {
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
fn iid_redraw(retry_key: u64, position: u32, n: u32, threshold: u32) -> u32 {
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

/// The seed of the sample at global `position` of step `step`'s batch, for per-sample
/// augmentation.
///
/// A pure hash of `(seed, step, position)`: a transform that seeds a [`SampleRng`] with it replays
/// exactly the same augmentation when the run is resumed at `step`. Use the position in the
/// *global* batch ([`Sampler::stripe_start`] plus the local position) so the augmentation does not
/// depend on the number of ranks. The stream is unrelated to the sampler's own index stream for the
/// same seed.
///
/// # Examples
/// ```
/// use loaderx_core::{SampleRng, sample_seed};
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
    state: u64,
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

    use proptest::prelude::*;

    use super::*;

    fn sampler(n: u32, b: u32, mode: SamplerMode, seed: u64, rank: u32, world: u32) -> Sampler {
        Sampler::builder(n).batch_size(b).mode(mode).seed(seed).rank(rank).world(world).build().unwrap()
    }

    fn any_mode() -> impl Strategy<Value = SamplerMode> {
        prop_oneof![Just(SamplerMode::Sequential), Just(SamplerMode::Iid), Just(SamplerMode::Cyclic)]
    }

    fn is_invalid(r: Result<Sampler>) -> bool {
        matches!(r, Err(Error::InvalidArgument(_)))
    }

    #[test]
    fn feistel_is_a_bijection_of_its_domain() {
        for n in [1u32, 2, 3, 5, 16, 17, 1000, 4096, 5000] {
            let s = sampler(n, 1, SamplerMode::Cyclic, 9, 0, 1);
            let perm = Permutation::new(s.feistel, n, 12345);
            let domain = s.feistel.domain();
            assert!(domain >= u64::from(n) && domain < u64::from(n) + (1 << s.feistel.lo_bits));
            let images: HashSet<u64> = (0..domain).map(|x| u64::from(perm.feistel(x as u32))).collect();
            assert_eq!(images.len() as u64, domain, "n = {n}");
            assert!(images.iter().all(|&y| y < domain));
            let walked: HashSet<u32> = (0..n).map(|i| perm.apply(i)).collect();
            assert_eq!(walked.len(), n as usize);
            assert!(walked.iter().all(|&y| y < n));
        }
    }

    #[test]
    fn block_network_equals_the_scalar_network() {
        // Small n take the 32-bit split of a block, larger n the 16-bit one; blocks that start
        // just before a multiple of 2^k cross into the next high-half value mid-block.
        for n in [3u32, 40, 1000, 4096, 5000, 1_000_000, (1 << 31) + 12345, u32::MAX] {
            let shape = FeistelShape::new(n);
            let perm = Permutation::new(shape, n, 777);
            let k = 1u64 << shape.lo_bits;
            let firsts = [
                0,
                1,
                k - 1,
                k.saturating_sub(5),
                k.saturating_sub(63),
                k,
                3 * k - 2,
                shape.domain().saturating_sub(64),
            ];
            for first in firsts {
                let first = first.min(shape.domain().saturating_sub(1)) as u32;
                let (mut out, mut small) = ([0u32; BLOCK], [0u32; BLOCK]);
                perm.block::<false>(first, &mut out);
                perm.block::<true>(first, &mut small);
                for (j, (&y, &z)) in out.iter().zip(&small).enumerate() {
                    let x = u64::from(first) + j as u64;
                    if x < shape.domain() {
                        assert_eq!(y, perm.feistel(x as u32), "n = {n}, x = {x}");
                        if shape.hi_len <= 1 << 15 {
                            assert_eq!(z, y, "n = {n}, x = {x}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn high_half_round_is_a_bijection_modulo_a() {
        // a = 2^16 scales the hash by 2^16 - 1 and adds modulo 2^16.
        for (n, a) in
            [(2u32, 1u32), (4, 2), (9, 3), (1_000_000, 977), (u32::MAX / 2 + 2, 32769), (u32::MAX, 65536)]
        {
            let shape = FeistelShape::new(n);
            assert_eq!(shape.hi_len, a, "n = {n}");
            let perm = Permutation::new(shape, n, 31);
            for r in [0u16, 1, perm.lo_mask] {
                let images: Vec<u16> = (0..a).map(|l| perm.round_hi(0, l as u16, r)).collect();
                let distinct: HashSet<u16> = images.iter().copied().collect();
                assert_eq!(distinct.len() as u32, a);
                assert!(images.iter().all(|&y| u32::from(y) < a));
                if a <= 1 << 15 {
                    let small: Vec<u16> = (0..a).map(|l| perm.round_hi_small(0, l as u16, r)).collect();
                    assert_eq!(small, images);
                }
            }
        }
    }

    #[test]
    fn cyclic_permutation_has_no_visible_structure() {
        // One whole cycle of n = 100_000 (k = 9 low bits, a = 196 high values; 352 values of the
        // domain cycle-walk).
        let n = 100_000u32;
        let s = sampler(n, n, SamplerMode::Cyclic, 21, 0, 1);
        let perm = s.batch(5);
        // Position and index jointly uniform: chi-square over a 16 x 16 grid (225 degrees of
        // freedom: mean 225, standard deviation 21; 400 is over 8 deviations out).
        let mut grid = [[0u32; 16]; 16];
        for (p, &x) in perm.iter().enumerate() {
            grid[p * 16 / n as usize][x as usize * 16 / n as usize] += 1;
        }
        let expected = f64::from(n) / 256.0;
        let chi2: f64 = grid.iter().flatten().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        assert!(chi2 < 400.0, "chi-square {chi2}");
        // Neighbouring positions land on unrelated indices: under a random permutation
        // |pi(p + 1) - pi(p)| < n / 64 with probability about 2 / 64 = 0.031 (standard deviation
        // of the fraction 0.00055 here; 0.003 is over 5 deviations). A network that mixed too little would keep neighbours
        // near each other far more often.
        let near = perm.windows(2).filter(|w| w[0].abs_diff(w[1]) < n / 64).count();
        let fraction = near as f64 / f64::from(n - 1);
        assert!((fraction - 2.0 / 64.0).abs() < 0.003, "fraction of near neighbours {fraction}");
        // Same for positions 2^k apart (neighbours in the high half), where 4 rounds fail.
        let near = perm.iter().zip(&perm[512..]).filter(|(a, b)| a.abs_diff(**b) < n / 64).count();
        let fraction = near as f64 / f64::from(n - 512);
        assert!((fraction - 2.0 / 64.0).abs() < 0.003, "fraction of near high-half neighbours {fraction}");
    }

    #[test]
    fn sequential_wraps_around() {
        let s = sampler(10, 4, SamplerMode::Sequential, 0, 0, 1);
        assert_eq!(s.batch(0), [0, 1, 2, 3]);
        assert_eq!(s.batch(1), [4, 5, 6, 7]);
        assert_eq!(s.batch(2), [8, 9, 0, 1]);
        assert_eq!(s.batch(3), [2, 3, 4, 5]);
        assert_eq!(s.steps_per_cycle(), Some(3));
        // A batch larger than the index space wraps within the batch.
        let s = sampler(3, 8, SamplerMode::Sequential, 0, 0, 1);
        assert_eq!(s.batch(1), [2, 0, 1, 2, 0, 1, 2, 0]);
        // The product step * B does not overflow.
        let s = sampler(7, 6, SamplerMode::Sequential, 0, 1, 2);
        let expected = ((u128::from(u64::MAX) * 6 + 3) % 7) as u32;
        assert_eq!(s.batch(u64::MAX)[0], expected);
    }

    #[test]
    fn each_invalid_parameter_is_an_error() {
        let ok = || Sampler::builder(100).batch_size(8).world(4).rank(3);
        assert!(ok().build().is_ok());
        assert!(is_invalid(Sampler::builder(0).batch_size(1).build()));
        assert!(is_invalid(ok().batch_size(0).build()));
        assert!(is_invalid(ok().world(0).rank(0).build()));
        assert!(is_invalid(ok().rank(4).build()));
        assert!(is_invalid(ok().batch_size(10).build()));
        assert!(is_invalid(Sampler::builder(10).batch_size(11).mode(SamplerMode::Cyclic).build()));
        // Batches larger than N are fine where indices may repeat.
        for mode in [SamplerMode::Sequential, SamplerMode::Iid] {
            assert!(Sampler::builder(10).batch_size(11).mode(mode).build().is_ok());
        }
        assert!(Sampler::builder(10).batch_size(10).mode(SamplerMode::Cyclic).build().is_ok());
    }

    #[test]
    fn fill_rejects_a_wrong_length() {
        let s = sampler(100, 8, SamplerMode::Iid, 0, 1, 2);
        assert_eq!(s.local_batch_size(), 4);
        for len in [0, 3, 5, 8] {
            let mut buf = vec![0; len];
            assert!(matches!(s.fill(0, &mut buf), Err(Error::InvalidArgument(_))));
        }
        assert!(s.fill(0, &mut [0; 4]).is_ok());
    }

    #[test]
    fn accessors_report_the_config() {
        let s = sampler(1003, 12, SamplerMode::Cyclic, 5, 2, 3);
        assert_eq!(s.len(), 1003);
        assert_eq!(s.global_batch_size(), 12);
        assert_eq!(s.local_batch_size(), 4);
        assert_eq!(s.stripe_start(), 8);
        assert_eq!(s.steps_per_cycle(), Some(83));
        let c = s.config();
        assert_eq!(
            (c.len, c.batch_size, c.mode, c.seed, c.rank, c.world),
            (1003, 12, SamplerMode::Cyclic, 5, 2, 3)
        );
        assert_eq!(sampler(1003, 12, SamplerMode::Iid, 5, 2, 3).steps_per_cycle(), None);
        assert_eq!(sampler(1003, 12, SamplerMode::Sequential, 5, 2, 3).steps_per_cycle(), Some(84));
    }

    #[test]
    fn cycles_use_different_permutations_and_drop_different_remainders() {
        let s = sampler(1000, 300, SamplerMode::Cyclic, 1, 0, 1);
        assert_eq!(s.steps_per_cycle(), Some(3));
        let cycle = |c: u64| -> Vec<u32> { (3 * c..3 * c + 3).flat_map(|t| s.batch(t)).collect() };
        let (c0, c1) = (cycle(0), cycle(1));
        assert_ne!(c0, c1);
        let dropped = |v: &[u32]| -> HashSet<u32> {
            let seen: HashSet<u32> = v.iter().copied().collect();
            (0..1000).filter(|i| !seen.contains(i)).collect()
        };
        assert_eq!(dropped(&c0).len(), 100);
        assert_ne!(dropped(&c0), dropped(&c1));
        // Every record is reached over a few cycles.
        let reached: HashSet<u32> = (0..5).flat_map(cycle).collect();
        assert_eq!(reached.len(), 1000);
    }

    #[test]
    fn cyclic_order_looks_shuffled() {
        // Where a cycle starts is uniform over the index space across cycles: chi-square of the
        // first index of 5000 cycles in 10 buckets (9 degrees of freedom; 40 is over 7
        // deviations out).
        let s = sampler(1000, 10, SamplerMode::Cyclic, 8, 0, 1);
        let spc = s.steps_per_cycle().unwrap();
        let mut buckets = [0u32; 10];
        for cycle in 0..5000 {
            buckets[(s.batch(cycle * spc)[0] / 100) as usize] += 1;
        }
        let chi2: f64 = buckets.iter().map(|&c| (f64::from(c) - 500.0).powi(2) / 500.0).sum();
        assert!(chi2 < 40.0, "chi-square {chi2}, buckets {buckets:?}");
        // Within a cycle, the position and the index drawn there are uncorrelated.
        let n = 10_000u32;
        let s = sampler(n, n, SamplerMode::Cyclic, 8, 0, 1);
        let perm = s.batch(3);
        let mean = f64::from(n - 1) / 2.0;
        let (mut cov, mut var) = (0.0, 0.0);
        for (i, &x) in perm.iter().enumerate() {
            cov += (i as f64 - mean) * (f64::from(x) - mean);
            var += (i as f64 - mean).powi(2);
        }
        // Under a random permutation the correlation has standard deviation 1 / sqrt(n) = 0.01.
        assert!((cov / var).abs() < 0.06, "correlation {}", cov / var);
    }

    #[test]
    fn largest_index_space_stays_in_range() {
        for mode in [SamplerMode::Sequential, SamplerMode::Iid, SamplerMode::Cyclic] {
            let s = sampler(u32::MAX, 64, mode, 3, 1, 2);
            for step in [0, 1, 1 << 40, u64::MAX] {
                let b = s.batch(step);
                assert_eq!(b.len(), 32);
                assert!(b.iter().all(|&i| i < u32::MAX));
            }
        }
        let s = sampler(u32::MAX, 64, SamplerMode::Cyclic, 3, 0, 1);
        let distinct: HashSet<u32> = s.batch(77).into_iter().collect();
        assert_eq!(distinct.len(), 64);
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
    #[cfg(target_arch = "x86_64")]
    fn cyclic_avx2_kernel_equals_the_portable_network() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: kernel not compared");
            return;
        }
        // Small and large `a` (the two reductions), k from 6 (the kernel's least) to 16, blocks
        // crossing multiples of 2^k, cycle-walks, and lengths that end mid-block.
        let shapes = [2_049, 5_000, 100_000, 1_000_000, 40_000_000, (3 << 30) + 1, u32::MAX];
        let mut checked = 0;
        for (i, n) in shapes.into_iter().enumerate() {
            let shape = FeistelShape::new(n);
            for key in [0, 1, u64::MAX, 0xDEAD_BEEF] {
                let perm = Permutation::new(shape, n, key ^ i as u64);
                assert!(avx2::supports(&perm), "n {n}");
                for (first, len) in [(0, 2048), (60, 333), (n - 70, 70), (n / 2 + 7, 64), (n - 1, 1)] {
                    let (mut portable, mut simd) = (vec![0u32; len], vec![1u32; len]);
                    perm.fill(first, &mut portable);
                    assert!(crate::mapped::fill_cyclic_avx2(&perm, first, &mut simd));
                    assert_eq!(simd, portable, "n {n} key {key} first {first}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 7 * 4 * 5);
        // Below k = 6 the portable network runs.
        let perm = Permutation::new(FeistelShape::new(1000), 1000, 3);
        assert!(!crate::mapped::fill_cyclic_avx2(&perm, 0, &mut [0; 8]));
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
    fn sampler_is_shareable_across_prefetch_threads() {
        use std::panic::{RefUnwindSafe, UnwindSafe};
        fn assert_shareable<
            T: Clone + Send + Sync + std::fmt::Debug + UnwindSafe + RefUnwindSafe + 'static,
        >() {
        }
        assert_shareable::<Sampler>();
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
        #[test]
        fn cycle_is_a_permutation(
            // Small index spaces (the Fisher-Yates path) and, in a quarter of the cases, both
            // sides of its threshold.
            n in prop_oneof![3 => 1u32..3000, 1 => SHUFFLE_MAX_LEN - 500..SHUFFLE_MAX_LEN + 4000],
            b_frac in 0.0f64..1.0,
            seed: u64,
            cycle in 0u64..1000,
        ) {
            // At most 64 steps per cycle for the large index spaces, to keep the test quick.
            let least = if n > 3000 { n / 64 } else { 1 };
            let b = ((f64::from(n) * b_frac) as u32).clamp(least, n);
            let s = sampler(n, b, SamplerMode::Cyclic, seed, 0, 1);
            let spc = s.steps_per_cycle().unwrap();
            prop_assert_eq!(spc, u64::from(n / b));
            // A bitmap rather than a set: at N near 2^16 the unoptimised set was most of the time.
            // An index repeated within a batch also repeats within the cycle.
            let (mut seen, mut count) = (vec![false; n as usize], 0u32);
            for step in cycle * spc..(cycle + 1) * spc {
                let batch = s.batch(step);
                prop_assert_eq!(batch.len(), b as usize);
                for i in batch {
                    prop_assert!(i < n);
                    let repeated = std::mem::replace(&mut seen[i as usize], true);
                    prop_assert!(!repeated, "index {} repeats within cycle {}", i, cycle);
                    count += 1;
                }
            }
            prop_assert_eq!(count, n - n % b);
        }

        #[test]
        fn shards_are_disjoint_and_cover_the_global_batch(
            mode in any_mode(),
            // The Fisher-Yates path and the Feistel network.
            n in prop_oneof![1u32..5000, 65_000u32..200_000],
            k in 1u32..40,
            world in prop::sample::select(vec![1u32, 2, 3, 4, 5, 8]),
            seed: u64,
            step: u64,
        ) {
            let b = world * k;
            prop_assume!(mode != SamplerMode::Cyclic || b <= n);
            let global = sampler(n, b, mode, seed, 0, 1).batch(step);
            let mut union = Vec::new();
            for rank in 0..world {
                let shard = sampler(n, b, mode, seed, rank, world).batch(step);
                prop_assert_eq!(shard.len(), k as usize);
                prop_assert!(shard.iter().all(|&i| i < n));
                union.extend(shard);
            }
            // The stripes, in rank order, are the global batch: disjoint positions covering it.
            prop_assert_eq!(&union, &global);
            if mode == SamplerMode::Cyclic {
                let distinct: HashSet<u32> = union.iter().copied().collect();
                prop_assert_eq!(distinct.len(), union.len());
            }
        }

        #[test]
        fn elastic_resume_keeps_the_global_stream(
            mode in any_mode(),
            n in prop_oneof![8u32..5000, 65_000u32..200_000],
            k in 1u32..32,
            seed: u64,
            step in 0u64..10_000,
        ) {
            let b = 4 * k;
            prop_assume!(mode != SamplerMode::Cyclic || b <= n);
            let one = sampler(n, b, mode, seed, 0, 1).batch(step);
            for world in [2u32, 4] {
                let concatenated: Vec<u32> = (0..world)
                    .flat_map(|rank| sampler(n, b, mode, seed, rank, world).batch(step))
                    .collect();
                prop_assert_eq!(&concatenated, &one);
            }
        }

        #[test]
        fn seek_equals_iterate(
            mode in any_mode(),
            n in prop_oneof![1u32..2000, 65_000u32..200_000],
            b in 1u32..64,
            seed: u64,
            target in 0u64..200,
        ) {
            prop_assume!(mode != SamplerMode::Cyclic || b <= n);
            let running = sampler(n, b, mode, seed, 0, 1);
            let mut buf = vec![0; b as usize];
            let mut iterated = Vec::new();
            for step in 0..=target {
                running.fill(step, &mut buf).unwrap();
                iterated = buf.clone();
            }
            let fresh = sampler(n, b, mode, seed, 0, 1);
            prop_assert_eq!(fresh.batch(target), iterated);
        }

        #[test]
        fn batches_are_pure_in_seed_and_step(
            mode in any_mode(),
            // Both sides of SHUFFLE_MAX_LEN.
            n in 1u32..100_000,
            b in 1u32..256,
            seed: u64,
            step: u64,
        ) {
            prop_assume!(mode != SamplerMode::Cyclic || b <= n);
            let a = sampler(n, b, mode, seed, 0, 1);
            // Through the serialised config, as the loader saves and restores it.
            let bytes = rmp_serde::to_vec(&a.config()).unwrap();
            let config: SamplerConfig = rmp_serde::from_slice(&bytes).unwrap();
            prop_assert_eq!(&config, &a.config());
            let b2 = config.build().unwrap();
            prop_assert_eq!(a.batch(step), b2.batch(step));
            prop_assert_eq!(a.batch(step), a.batch(step));
            prop_assert!(a.batch(step).iter().all(|&i| i < n));
        }

        #[test]
        fn random_modes_depend_on_seed_and_step(
            mode in prop_oneof![Just(SamplerMode::Iid), Just(SamplerMode::Cyclic)],
            seed: u64,
            step in 0u64..1_000_000,
        ) {
            // With N = 2^20 and 64 indices, two independent batches coincide with negligible
            // probability.
            let n = 1 << 20;
            let s = sampler(n, 64, mode, seed, 0, 1);
            let other = sampler(n, 64, mode, seed ^ 1, 0, 1);
            prop_assert_ne!(s.batch(step), other.batch(step));
            prop_assert_ne!(s.batch(step), s.batch(step + 1));
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
