//! The stateless index generator: every batch is a pure function of `(config, step)`.
//!
//! A [`Sampler`] holds nothing but its configuration and values derived from it (once, or for
//! small cyclic index spaces once per cycle, cached), so resuming a run is "start at step `s`" and
//! costs nothing: [`Sampler::fill`] for step `s` on a fresh sampler yields exactly the `s`-th
//! batch of a run that started at step 0.
//!
//! Four modes ([`SamplerMode`]):
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
//! - **Block-cyclic**: without replacement, in blocks of consecutive records (for stores read
//!   over a network): each cycle walks a keyed permutation of the blocks and shuffles records
//!   within windows of blocks, so a batch spans a few blocks instead of scattered records.
//!
//! Finite passes (exactly once per epoch, a partial last batch or `drop_last`) are [`PassSampler`]; weighted
//! mixtures of sources are [`Mixture`].
//!
//! Sharding: `batch_size` is the *global* batch size `B`; rank `r` of `world` takes the contiguous
//! stripe `[r * B / world, (r + 1) * B / world)` of the global batch. The global sample stream
//! therefore does not depend on the number of ranks, and a run resumed at global step `s` with a
//! different world size loses or repeats no index within a cycle.
//!
//! Per-sample randomness for augmentation comes from [`sample_seed`] and [`SampleRng`], both pure
//! functions of their inputs, so a transform replays its augmentations exactly on resume.
//!
//! | file | what |
//! | --- | --- |
//! | `config` | [`SamplerMode`], [`SamplerConfig`], [`SamplerBuilder`], [`Sampler`] (dispatch to a mode) |
//! | `mixture` | weighted mixtures: a dealing pattern of 2^16 slots, each source's draws from its own keyed passes, the batch shuffled, ranks' stripes |
//! | `pass` | finite exactly-once epochs (ordered or keyed shuffle, partial last batch or `drop_last`, sharded), the per-epoch order cache |
//! | `feistel` | the keyed Feistel permutation (cyclic, N > 2^16) |
//! | `shuffle` | the seeded Fisher-Yates permutation and its per-cycle cache (cyclic, N <= 2^16) |
//! | `avx2` | the Feistel network in AVX2 intrinsics, and its CPU check |
//! | `iid` | counter-based IID draws (Lemire with rejection) |
//! | `rng` | SplitMix64, domain separators, `sample_seed`, [`SampleRng`] |
//! | `tests` | properties of the whole sampler |

mod config;
mod feistel;
mod iid;
mod mixture;
mod pass;
mod rng;
mod shuffle;
#[cfg(test)]
mod tests;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(not(target_arch = "x86_64"))]
mod avx2 {
    //! No AVX2 off x86-64: the portable network runs.
    pub(super) fn try_fill(_: &super::feistel::Permutation, _: u32, _: &mut [u32]) -> bool {
        false
    }
}

pub use config::{Sampler, SamplerBuilder, SamplerConfig, SamplerMode};
pub use mixture::{MIXTURE_SLOTS, Mixture, MixtureConfig};
pub(crate) use pass::shuffle_positions;
pub use pass::{PassConfig, PassSampler};
pub(crate) use rng::{DOMAIN_SPLIT, mix64};
pub use rng::{SampleRng, sample_seed};
