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
#![expect(missing_docs, reason = "criterion_group! generates an undocumented pub fn")]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loaderx::{Sampler, SamplerMode};
use rand::rngs::{SmallRng, StdRng};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const N: u32 = 1_000_000;
const BATCHES: [u32; 3] = [256, 1024, 8192];
const SEED: u64 = 0x5EED;

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
                for o in buf.iter_mut() {
                    *o = std_rng.random_range(0..N);
                }
                black_box(&buf);
            })
        });

        let mut small_rng = SmallRng::seed_from_u64(SEED);
        group.bench_function(BenchmarkId::new("rand_small_loop", b), |bench| {
            bench.iter(|| {
                for o in buf.iter_mut() {
                    *o = small_rng.random_range(0..N);
                }
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

criterion_group!(benches, sampler_bench);
criterion_main!(benches);
