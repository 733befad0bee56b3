//! [`Sampler`]: its configuration, its builder, and the dispatch of a step to its mode.

use serde::{Deserialize, Serialize};

use super::feistel::{FeistelShape, Permutation};
use super::iid::{IidFill, IidKey};
use super::rng::{DOMAIN_CYCLIC, DOMAIN_IID, GOLDEN, mix64};

/// Domain separator of the block-cyclic mode's keys.
const DOMAIN_BLOCKS: u64 = 0x626C_6F63_6B73_2063;
use super::shuffle::{SHUFFLE_MAX_LEN, ShuffleCache, shuffle};
use crate::sys::with_avx2;
use crate::{Error, Result};

/// The most rows one rank's batch may hold: 2^26, 256 MiB of indices before any record is read.
pub(crate) const MAX_LOCAL_BATCH: u32 = 1 << 26;

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
    /// Without replacement, in blocks of `block` consecutive records, for stores read over a
    /// network: each cycle cuts the records into blocks (at an offset of the cycle's choosing,
    /// so the fewer than `block` records left over differ from cycle to cycle), walks a keyed
    /// permutation of the blocks, and shuffles the records within each window of `window`
    /// consecutive blocks of that order. A batch then spans about `batch / block + 1` blocks
    /// of one or two windows instead of `batch` scattered records: far fewer range requests,
    /// at the price of randomness: records of one block tend to share batches (their
    /// neighbours in the store are their neighbours in the stream), and a batch draws from
    /// `window * block` records, not all of them. Pure in (seed, step), sharded and resumed as
    /// cyclic mode; `block: 1` is a plain keyed permutation.
    BlockCyclic {
        /// Records per block, `K` (at least 1).
        block: u32,
        /// Blocks per shuffling window, `W` (at least 1).
        window: u32,
    },
}

impl SamplerMode {
    /// The modes a name alone selects, in the order of the specification's integer codes (0
    /// sequential, 1 iid, 2 cyclic): what the Python module and the C ABI number and name them
    /// by. Block-cyclic takes its block and window besides.
    pub const ALL: [SamplerMode; 3] = [SamplerMode::Sequential, SamplerMode::Iid, SamplerMode::Cyclic];

    /// The mode's name, as [`FromStr`](std::str::FromStr) reads it: `sequential`, `iid`,
    /// `cyclic`, `block_cyclic`.
    pub const fn name(self) -> &'static str {
        match self {
            SamplerMode::Sequential => "sequential",
            SamplerMode::Iid => "iid",
            SamplerMode::Cyclic => "cyclic",
            SamplerMode::BlockCyclic { .. } => "block_cyclic",
        }
    }
}

impl std::fmt::Display for SamplerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SamplerMode::BlockCyclic { block, window } => write!(f, "block_cyclic({block} x {window})"),
            m => f.write_str(m.name()),
        }
    }
}

impl std::str::FromStr for SamplerMode {
    type Err = Error;

    /// One of [`SamplerMode::ALL`] by its [`name`](SamplerMode::name).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the modes for any other name (block-cyclic included:
    /// it needs its block and window).
    fn from_str(name: &str) -> Result<SamplerMode> {
        SamplerMode::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| {
            let names: Vec<String> = SamplerMode::ALL.iter().map(|m| format!("'{}'", m.name())).collect();
            Error::InvalidArgument(format!("unknown sampler mode {name:?} (expected {})", names.join(", ")))
        })
    }
}

/// Everything that determines a [`Sampler`]; plain data, saved and restored by the loader.
///
/// Two samplers built from equal configs produce identical batches for every step.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{SamplerConfig, SamplerMode};
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
/// # Ok::<(), loaderx::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// [`Error::Config`] when `len` is 0, `batch_size` is 0, `world` is 0,
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
    pub(super) config: SamplerConfig,
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

/// A stateless, resumable index generator.
///
/// Batches are a pure function of the [`SamplerConfig`] and the step; see [`SamplerMode`] for
/// the modes and [`SamplerBuilder::world`] for the sharding rule.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{Sampler, SamplerMode};
///
/// let sampler = Sampler::builder(10).batch_size(4).mode(SamplerMode::Sequential).build()?;
/// assert_eq!(sampler.batch(2), vec![8, 9, 0, 1]);
///
/// let shuffled = Sampler::builder(1000).batch_size(100).seed(3).build()?;
/// let mut buf = vec![0u32; 100];
/// shuffled.fill(12, &mut buf)?;
/// assert_eq!(buf, shuffled.batch(12));
/// # Ok::<(), loaderx::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Sampler {
    pub(super) config: SamplerConfig,
    /// `batch_size / world`.
    pub(super) local: u32,
    /// Global position of this rank's first index in a batch: `rank * local`.
    pub(super) stripe_start: u32,
    /// Lemire rejection threshold `2^32 mod N`: a product whose low word is below it is rejected.
    pub(super) iid_threshold: u32,
    /// Seed-derived key of the IID stream.
    pub(super) iid_key: u64,
    /// Seed-derived key of the cycle permutations.
    pub(super) cyclic_key: u64,
    /// Steps of one cycle (cyclic: `N / B`, at least 1; sequential: `ceil(N / B)`).
    pub(super) steps_per_cycle: u64,
    pub(super) feistel: FeistelShape,
    /// The cached cycle permutations of the Fisher-Yates path: `Some` exactly in cyclic mode with
    /// `N <= SHUFFLE_MAX_LEN`. Shared by clones, so prefetch threads build each cycle once.
    pub(super) shuffles: Option<ShuffleCache>,
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
        let invalid = |reason: String| Err(Error::Config { what: "sampler", reason });
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
        if b / world > MAX_LOCAL_BATCH {
            // Its indices alone would be gigabytes before any record is read (look 78: an edited
            // state's batch size aborted the process on that allocation).
            return invalid(format!(
                "a batch of {} rows a rank (batch_size {b}, world {world}): at most {MAX_LOCAL_BATCH}",
                b / world
            ));
        }
        if mode == SamplerMode::Cyclic && b > n {
            return invalid(format!("a cyclic batch_size {b} exceeds the {n} indices of a cycle"));
        }
        if let SamplerMode::BlockCyclic { block, window } = mode {
            if block == 0 || window == 0 {
                return invalid(format!(
                    "blocks of {block} records in windows of {window} blocks: both at least 1"
                ));
            }
            let per_cycle = (n / block) * block;
            if b > per_cycle {
                return invalid(format!(
                    "a batch_size {b} exceeds the {per_cycle} records of a cycle of whole blocks of {block}"
                ));
            }
        }
        let local = b / world;
        let steps_per_cycle = match mode {
            SamplerMode::Cyclic => u64::from(n / b),
            SamplerMode::BlockCyclic { block, .. } => u64::from((n / block) * block / b),
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
            SamplerMode::BlockCyclic { block, window } => self.fill_block_cyclic(step, out, block, window),
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
    /// PassSampler `stripe_start() + k` as the position to [`sample_seed`](crate::sample_seed) so that per-sample
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
        with_avx2(IidFill { key: &key, n, threshold, start, out });
    }

    fn fill_block_cyclic(&self, step: u64, out: &mut [u32], k: u32, w: u32) {
        let n = self.config.len;
        let blocks = n / k;
        let slack = n - blocks * k;
        let spc = self.steps_per_cycle;
        let (cycle, step_in_cycle) = (step / spc, step % spc);
        let key = mix64(self.cyclic_key.wrapping_add(cycle.wrapping_mul(GOLDEN)) ^ DOMAIN_BLOCKS);
        // This cycle's block grid starts at `offset`: the records before it and after the last
        // whole block sit this cycle out.
        let offset = if slack == 0 { 0 } else { (mix64(key) % u64::from(slack + 1)) as u32 };
        let perm = |len: u32, key: u64| Permutation::new(FeistelShape::new(len), len, key);
        let order = (blocks > 1).then(|| perm(blocks, key));
        let per_window = u64::from(w) * u64::from(k);
        let mut window: Option<(u64, Option<Permutation>)> = None;
        let first = step_in_cycle * u64::from(self.config.batch_size) + u64::from(self.stripe_start);
        for (j, o) in out.iter_mut().enumerate() {
            let p = first + j as u64;
            let (wi, within) = (p / per_window, (p % per_window) as u32);
            if window.as_ref().is_none_or(|(i, _)| *i != wi) {
                // The window's records: its whole blocks (the last window may have fewer).
                let m = (u64::from(blocks) - wi * u64::from(w)).min(u64::from(w)) as u32 * k;
                let wkey = mix64(key.wrapping_add((wi + 1).wrapping_mul(GOLDEN)));
                window = Some((wi, (m > 1).then(|| perm(m, wkey))));
            }
            let q = match &window {
                Some((_, Some(pw))) => pw.apply(within),
                _ => within,
            };
            let slot = (wi * u64::from(w)) as u32 + q / k;
            let b = order.as_ref().map_or(slot, |o| o.apply(slot));
            *o = offset + b * k + q % k;
        }
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
        if !super::avx2::try_fill(&perm, first, out) {
            perm.fill(first, out);
        }
    }
}
