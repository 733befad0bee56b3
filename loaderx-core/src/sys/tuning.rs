//! Every tuning constant of the engine in one place, each with why in one line and the run
//! that chose it (the figures are in `docs/benchmarks/tuning.md`, by section). Limits of the
//! format, of memory and of hostile input are not here: each lives beside the check it bounds.

use std::time::Duration;

// ---- Splitting a batch over the pool (docs/benchmarks/tuning.md#splitting)

/// A variable-length gather shard copies at least this much: below it a pool hand-off costs more
/// than the copy it moves to another thread.
pub(crate) const GATHER_SHARD_MIN_BYTES: usize = 128 << 10;
/// A `map_records` shard hands at least this many records to its callback.
pub(crate) const MAP_SHARD_MIN_RECORDS: usize = 32;
/// A fixed-size gather shard copies at least this much (or decodes an eighth of it).
pub(crate) const FIXED_SHARD_MIN_BYTES: usize = 64 << 10;
/// How much more a compressed byte costs to gather than a raw one, for the shard plan (zstd
/// decodes at a tenth to a twentieth of a copy's speed).
pub(crate) const COMPRESSED_WEIGHT: usize = 8;
/// Pieces a gather over the pool is cut into per thread: threads that start late find less
/// left to do, and nobody waits for them.
pub(crate) const PIECES_PER_THREAD: usize = 4;
/// The longest the pool's helpers stay awake after a split read from outside the pool, when
/// the read asks for it (`Parallelism::PoolKeepWarm`).
pub(crate) const KEEP_WARM_MAX: Duration = Duration::from_millis(1);

// ---- Hiding cache misses (docs/benchmarks/tuning.md#prefetching)

/// Records a variable-length gather hints the CPU to fetch ahead of the one it copies.
pub(crate) const PREFETCH_AHEAD: usize = 4;
/// Places of a shuffled document order whose lengths are fetched ahead of their use, when the
/// Megatron sampler sums them (docs/benchmarks/tokens.md, run C).
pub(crate) const ORDER_PREFETCH_AHEAD: usize = 32;
/// Records per stage of the fixed-size gather's pipeline: entries hinted two blocks ahead of the
/// copy, read and checked (their records hinted) one block ahead.
pub(crate) const FIXED_BLOCK: usize = 16;
/// A fixed-stride gather hints about this many bytes of records ahead (8 to 32 records).
pub(crate) const PREFETCH_AHEAD_BYTES: usize = 4 << 10;
/// A chunk this large is taken to be past the caches: its records are hinted into the outer
/// caches, a smaller one's into the L1 (a constant: a VM's sysfs names its host's L3).
pub(crate) const PREFETCH_FROM_BYTES: usize = 64 << 20;
/// Records this long or longer are not hinted: the hardware prefetcher follows the copy.
pub(crate) const PREFETCH_BELOW_RECORD: usize = 8 << 10;
/// The same on AMD family 25, models 0x10-0x1F (Zen 4 EPYC) and family 26, models 0x00-0x0F
/// (Zen 5 EPYC): 12 KiB records gain from the hint there (gather.md, runs H and I).
pub(crate) const PREFETCH_BELOW_RECORD_AMD_ZEN: usize = 16 << 10;
/// Bytes of a record one hint covers at most, a hint per cache line.
#[cfg(target_arch = "x86_64")]
pub(crate) const PREFETCH_BYTES: usize = 1024;

// ---- Copies and checksums (docs/benchmarks/tuning.md#copies)

/// Records at least this long have their checksum combined into a block's rather than hashed
/// again: a combine costs about what hashing 1-2 KiB does.
pub(crate) const COMBINE_FROM: usize = 4096;
/// Records shorter than this are copied, then summed: two passes over a few cache lines cost
/// less than building the fused copy's operators.
pub(crate) const FUSED_MIN_LEN: usize = 1 << 10;
/// Destination-minus-source distances (modulo 4 KiB) below which the copy may avoid `memcpy`,
/// where `rep movsb` runs slow on some CPUs ([`super::NearCopy`] measures which).
pub(crate) const SHORT_DISTANCE: usize = 64;
/// How much faster one copy must measure than the other to move a class of distances off its
/// default: past the measurement's own spread from process to process.
pub(crate) const NEAR_COPY_WIN: f64 = 1.15;
/// Copies shorter than this never reach glibc's `rep movsb` path (its smallest threshold).
pub(crate) const SHORT_DISTANCE_MIN_LEN: usize = 2048;

// ---- Fresh batch buffers (docs/benchmarks/tuning.md#huge-pages)

/// A fresh buffer this large is backed by transparent huge pages where the system lends them: a
/// 2 MiB fault costs a fraction of 512 faults of 4 KiB; below it few whole huge pages fit.
pub(crate) const HUGE_PAGES_FROM_BYTES: usize = 8 << 20;

// ---- Writing (docs/benchmarks/tuning.md#writing)

/// Write pieces are at most this large, so a big append is written by several threads at once.
pub(crate) const WRITE_PIECE: usize = 8 << 20;

// ---- Verifying

/// Records whose places `verify`'s overlap check sorts at once (24 bytes each: 48 MiB), or
/// the store's [`OVERLAP_PASSES`]th part where that is more; a bound, not a measured optimum.
pub(crate) const OVERLAP_PASS_RECORDS: u64 = 1 << 21;
/// The most passes over the index the overlap check makes beyond its count (each sorting a
/// 16th of the records at most: 1.5 bytes a record, a tenth of the smallest index entry).
pub(crate) const OVERLAP_PASSES: u64 = 16;
