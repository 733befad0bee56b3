//! Index generation throughput: loaderx's IID and cyclic samplers against a plain rand 0.9 loop
//! and a materialised shuffle, side by side over N = 1,000,000 indices.
//!
//! Contenders, per batch of B indices:
//! - `loaderx_iid`, `loaderx_cyclic`: one `Sampler::fill` call into a reused buffer.
//! - `rand_std_loop`: `rng.random_range(0..n)` per index with a seeded `rand::rngs::StdRng`
//!   (ChaCha12), the baseline of the ratios.
//! - `rand_small_loop`: the same loop with a seeded `rand::rngs::SmallRng` (Xoshiro256++), the
//!   fastest generator rand ships.
//! - `shuffle_small`: a `Vec<u32>` of `0..N` shuffled with `SliceRandom::shuffle` (SmallRng) once
//!   every N / B batches; each batch copies out the next B indices, so the shuffle's cost is
//!   amortised per batch exactly as an epoch-based loader pays it.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use loaderx::{Sampler, SamplerMode};
use loaderx_bench::timing::{FixedContender, interleaved_fixed};
use rand::rngs::{SmallRng, StdRng};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const N: u32 = 1_000_000;
const BATCHES: [u32; 3] = [256, 1024, 8192];
const SEED: u64 = 0x5EED;

/// The baseline loops: one `random_range(0..N)` per index.
#[inline(always)]
fn rand_fill(rng: &mut impl Rng, out: &mut [u32]) {
    for o in out {
        *o = rng.random_range(0..N);
    }
}

/// A materialised permutation reshuffled in place every cycle.
struct Shuffled {
    perm: Vec<u32>,
    pos: usize,
    rng: SmallRng,
}

impl Shuffled {
    fn new() -> Self {
        let mut rng = SmallRng::seed_from_u64(SEED);
        let mut perm: Vec<u32> = (0..N).collect();
        perm.shuffle(&mut rng);
        Shuffled { perm, pos: 0, rng }
    }

    fn fill(&mut self, out: &mut [u32]) {
        if self.pos + out.len() > self.perm.len() {
            self.perm.shuffle(&mut self.rng);
            self.pos = 0;
        }
        out.copy_from_slice(&self.perm[self.pos..self.pos + out.len()]);
        self.pos += out.len();
    }
}

fn sampler_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sampler");
    for b in BATCHES {
        group.throughput(Throughput::Elements(u64::from(b)));
        let mut buf = vec![0u32; b as usize];

        for (name, mode) in [("loaderx_iid", SamplerMode::Iid), ("loaderx_cyclic", SamplerMode::Cyclic)] {
            let sampler = Sampler::builder(N)
                .batch_size(b)
                .mode(mode)
                .seed(SEED)
                .build()
                .expect("valid sampler parameters");
            let mut step = 0u64;
            group.bench_function(BenchmarkId::new(name, b), |bench| {
                bench.iter(|| {
                    sampler.fill(step, &mut buf).expect("buffer of the batch size");
                    step += 1;
                    black_box(&buf);
                })
            });
        }

        let mut std_rng = StdRng::seed_from_u64(SEED);
        group.bench_function(BenchmarkId::new("rand_std_loop", b), |bench| {
            bench.iter(|| {
                rand_fill(&mut std_rng, &mut buf);
                black_box(&buf);
            })
        });

        let mut small_rng = SmallRng::seed_from_u64(SEED);
        group.bench_function(BenchmarkId::new("rand_small_loop", b), |bench| {
            bench.iter(|| {
                rand_fill(&mut small_rng, &mut buf);
                black_box(&buf);
            })
        });

        let mut shuffled = Shuffled::new();
        group.bench_function(BenchmarkId::new("shuffle_small", b), |bench| {
            bench.iter(|| {
                shuffled.fill(&mut buf);
                black_box(&buf);
            })
        });
    }
    group.finish();
}

/// The ratios, measured interleaved: per batch size, each contender fills 2,000 batches per
/// round, rounds rotate the starting contender, and the ratio to the `StdRng` loop is taken per
/// round (median of 15). Criterion's rows above time each contender at a different moment, which
/// on a shared VM moves the baseline by tens of percent.
fn side_by_side() {
    println!("\nindices/s and speed vs the rand StdRng loop (median of 15 interleaved rounds, N = {N}):");
    for b in BATCHES {
        let make = |mode| Sampler::builder(N).batch_size(b).mode(mode).seed(SEED).build().expect("sampler");
        let (iid, cyclic) = (make(SamplerMode::Iid), make(SamplerMode::Cyclic));
        let (mut bufs, mut steps) = (vec![vec![0u32; b as usize]; 5], [0u64; 2]);
        let (mut std_rng, mut small_rng) = (StdRng::seed_from_u64(SEED), SmallRng::seed_from_u64(SEED));
        let mut shuffled = Shuffled::new();
        let [b0, b1, b2, b3, b4] = &mut bufs[..] else { unreachable!() };
        let [s_iid, s_cyc] = &mut steps;
        let mut contenders: Vec<FixedContender<'_>> = vec![
            (
                "rand_std_loop",
                Box::new(|| {
                    rand_fill(&mut std_rng, b0);
                    black_box(&b0);
                }),
            ),
            (
                "loaderx_iid",
                Box::new(|| {
                    iid.fill(*s_iid, b1).expect("fill");
                    *s_iid += 1;
                    black_box(&b1);
                }),
            ),
            (
                "loaderx_cyclic",
                Box::new(|| {
                    cyclic.fill(*s_cyc, b2).expect("fill");
                    *s_cyc += 1;
                    black_box(&b2);
                }),
            ),
            (
                "rand_small_loop",
                Box::new(|| {
                    rand_fill(&mut small_rng, b3);
                    black_box(&b3);
                }),
            ),
            (
                "shuffle_small",
                Box::new(|| {
                    shuffled.fill(b4);
                    black_box(&b4);
                }),
            ),
        ];
        let iters = (2_000 * 1024 / b as usize).max(50);
        for r in interleaved_fixed(15, iters, &mut contenders) {
            let rate = f64::from(b) / r.median_ns * 1e3;
            println!("  batch {b:>5}  {:<16} {rate:>8.0} M/s  {:>5.2}x", r.name, r.speed_vs_baseline);
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    sampler_bench(&mut c);
    c.final_summary();
    side_by_side();
}
