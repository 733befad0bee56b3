//! Store → candle `Tensor` on the CPU, against the raw gather ceiling of the same batches and
//! against the common candle pattern of one tensor per sample stacked into a batch.
//!
//! 20,000 records of `[3072]` f32 (12 KiB each, 240 MiB, `Codec::Raw`: random floats would not
//! shrink under zstd anyway) are written once into a temp dir; every case gathers the same
//! sequence of 64 seeded batches of 256 random indices:
//!
//! - `gather_ceiling`: `DenseSource::gather_into` into one reused buffer (no allocation, no
//!   tensor): the floor of any path that reads the records;
//! - `loaderx_tensor`: `DenseSource::get_batch` + `loaderx_candle::to_tensor` (a fresh buffer per
//!   batch, adopted by the tensor without a copy) — what `CandleLoader` does on a prefetch thread;
//! - `per_sample_stack`: one gather, one `Vec` and one `Tensor::from_vec` per record, then
//!   `Tensor::stack` (the Dataset-`get`-then-collate pattern).
//!
//! Run: `cargo bench --features candle --bench candle -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use loaderx::candle::candle_core::{Device, Tensor};
use loaderx::candle::{Widen, to_tensor};
use loaderx::{ArrayData, Codec, DatasetWriter, DenseSource, WriteOptions};
use rand::{Rng, SeedableRng};

const RECORDS: usize = 20_000;
const ITEM: usize = 3072;
const BATCH: usize = 256;
const BATCHES: usize = 64;

fn write_store(dir: &std::path::Path) -> DenseSource {
    let path = dir.join("x");
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut w = DatasetWriter::dense::<f32>(&path, vec![ITEM], WriteOptions::new().codec(Codec::Raw))
        .expect("writer");
    let block: usize = 1000;
    for _ in 0..RECORDS / block {
        let values: Vec<f32> = (0..block * ITEM).map(|_| rng.random::<f32>()).collect();
        w.append(&values).expect("append");
    }
    w.finish().expect("finish");
    DenseSource::open(&path).expect("open")
}

fn loaderx_tensor(source: &DenseSource, indices: &[u32]) -> Tensor {
    let array = source.get_batch(indices).expect("gather");
    to_tensor(array, &Device::Cpu, Widen::Never).expect("tensor")
}

fn per_sample_stack(source: &DenseSource, indices: &[u32]) -> Tensor {
    let items: Vec<Tensor> = indices
        .iter()
        .map(|&i| {
            let v: Vec<f32> = source.get_batch(&[i]).expect("gather").into_vec().expect("f32");
            Tensor::from_vec(v, ITEM, &Device::Cpu).expect("tensor")
        })
        .collect();
    Tensor::stack(&items, 0).expect("stack")
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    let source = write_store(dir.path());
    eprintln!("wrote {RECORDS} x {} KiB f32 records in {:.1?}", ITEM * 4 / 1024, t.elapsed());
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let batches: Vec<Vec<u32>> =
        (0..BATCHES).map(|_| (0..BATCH).map(|_| rng.random_range(0..RECORDS as u32)).collect()).collect();
    // Sanity: the three paths build the same batch.
    let reference = loaderx_tensor(&source, &batches[0]);
    let stacked = per_sample_stack(&source, &batches[0]);
    let diff =
        (reference.clone() - stacked).and_then(|d| d.abs()?.sum_all()?.to_scalar::<f32>()).expect("diff");
    assert_eq!(diff, 0.0);

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("candle_batch_256x12KiB");
    group.throughput(Throughput::Elements(1)); // one batch per iteration: elem/s = batches/s
    let mut next = 0usize;
    let mut buf = ArrayData::F32(Vec::new());
    group.bench_function("gather_ceiling", |b| {
        b.iter(|| {
            next = (next + 1) % BATCHES;
            source.gather_into(&batches[next], &mut buf).expect("gather");
            black_box(&buf);
        })
    });
    group.bench_function("loaderx_tensor", |b| {
        b.iter(|| {
            next = (next + 1) % BATCHES;
            black_box(loaderx_tensor(&source, &batches[next]))
        })
    });
    group.bench_function("per_sample_stack", |b| {
        b.iter(|| {
            next = (next + 1) % BATCHES;
            black_box(per_sample_stack(&source, &batches[next]))
        })
    });
    group.finish();
    c.final_summary();

    // Side-by-side ratios in the same process (medians of interleaved rounds of BATCHES batches).
    let rounds = 15;
    let (mut ceiling, mut ours, mut stack) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        ceiling.push(time(|| {
            for b in &batches {
                source.gather_into(b, &mut buf).expect("gather");
            }
        }));
        ours.push(time(|| {
            for b in &batches {
                black_box(loaderx_tensor(&source, b));
            }
        }));
        stack.push(time(|| {
            for b in &batches {
                black_box(per_sample_stack(&source, b));
            }
        }));
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let per_s = |d: Duration| BATCHES as f64 / d.as_secs_f64();
    let (c_bs, o_bs, s_bs) = (per_s(med(&mut ceiling)), per_s(med(&mut ours)), per_s(med(&mut stack)));
    let gib = |bs: f64| bs * (BATCH * ITEM * 4) as f64 / (1u64 << 30) as f64;
    println!("side by side (median of {rounds} interleaved rounds of {BATCHES} batches):");
    println!("  gather_ceiling   {c_bs:8.1} batches/s ({:.2} GiB/s)", gib(c_bs));
    println!(
        "  loaderx_tensor   {o_bs:8.1} batches/s ({:.2} GiB/s)  = {:.2}x the ceiling",
        gib(o_bs),
        o_bs / c_bs
    );
    println!(
        "  per_sample_stack {s_bs:8.1} batches/s ({:.2} GiB/s)  loaderx is {:.1}x faster",
        gib(s_bs),
        o_bs / s_bs
    );
}
