//! Store → candle `Tensor` on the CPU, against the raw gather ceiling of the same batches and
//! against the common candle pattern of one tensor per sample stacked into a batch.
//!
//! Two workloads, each gathering the same sequence of 64 seeded batches of 256 random indices in
//! every case:
//! - `12KiB_f32`: 20,000 records of `[3072]` f32 (12 KiB each, 240 MiB, `Codec::Raw`: random
//!   floats would not shrink under zstd anyway), written once into a temp dir;
//! - `mnist_u8`: the 8,000 bundled MNIST training digits, `[28, 28]` u8 (784 B each), converted
//!   from `data/mnist-10k`, stored raw like the first (this bench measures tensor building, not
//!   decompression).
//!
//! Cases:
//! - `gather_ceiling`: `DenseSource::gather_into` into one reused buffer (no allocation, no
//!   tensor): the floor of any path that reads the records;
//! - `loaderx_tensor`: `DenseSource::get_batch` + `loaderx_candle::to_tensor` (a fresh buffer per
//!   batch, filled without zeroing and adopted by the tensor without a copy) — what
//!   `CandleLoader` does on a prefetch thread;
//! - `per_sample_stack`: one gather, one `Vec` and one tensor per record, then `Tensor::stack`
//!   (the Dataset-`get`-then-collate pattern).
//!
//! Run: `cargo bench --features candle --bench candle -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use loaderx::candle::candle_core::{Device, Tensor};
use loaderx::candle::{Widen, to_tensor};
use loaderx::{ArrayData, Codec, DatasetWriter, DenseSource, WriteOptions};
use rand::{Rng, SeedableRng};

const BATCH: usize = 256;
const BATCHES: usize = 64;

fn write_f32_store(dir: &Path, records: usize, item: usize) -> DenseSource {
    let path = dir.join("f32");
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut w = DatasetWriter::dense::<f32>(&path, vec![item], WriteOptions::new().codec(Codec::Raw))
        .expect("writer");
    let block: usize = 1000;
    for _ in 0..records / block {
        let values: Vec<f32> = (0..block * item).map(|_| rng.random::<f32>()).collect();
        w.append(&values).expect("append");
    }
    w.finish().expect("finish");
    DenseSource::open(&path).expect("open")
}

fn mnist_store(dir: &Path) -> DenseSource {
    let path = dir.join("mnist");
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k/train-images-idx3-ubyte.gz");
    loaderx::convert::idx(images, &path, WriteOptions::new().codec(Codec::Raw)).expect("convert MNIST");
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
            let one = source.get_batch(&[i]).expect("gather");
            to_tensor(one, &Device::Cpu, Widen::Never).and_then(|t| Ok(t.squeeze(0)?)).expect("tensor")
        })
        .collect();
    Tensor::stack(&items, 0).expect("stack")
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn workload(c: &mut Criterion, name: &str, source: &DenseSource) {
    let records = source.len() as u32;
    let batch_bytes = BATCH * source.item_shape().iter().product::<usize>() * source.dtype().size();
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let batches: Vec<Vec<u32>> =
        (0..BATCHES).map(|_| (0..BATCH).map(|_| rng.random_range(0..records)).collect()).collect();
    // Sanity: both tensor paths build the same batch.
    let reference = loaderx_tensor(source, &batches[0]);
    let stacked = per_sample_stack(source, &batches[0]);
    assert_eq!(reference.dims(), stacked.dims());
    let diff = (reference.to_dtype(loaderx::candle::candle_core::DType::F64).expect("f64")
        - stacked.to_dtype(loaderx::candle::candle_core::DType::F64).expect("f64"))
    .and_then(|d| d.abs()?.sum_all()?.to_scalar::<f64>())
    .expect("diff");
    assert_eq!(diff, 0.0);

    let mut group = c.benchmark_group(format!("candle_batch_256_{name}"));
    group.throughput(Throughput::Elements(1)); // one batch per iteration: elem/s = batches/s
    let mut next = 0usize;
    let mut buf = ArrayData::zeros(source.dtype(), 0);
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
            black_box(loaderx_tensor(source, &batches[next]))
        })
    });
    group.bench_function("per_sample_stack", |b| {
        b.iter(|| {
            next = (next + 1) % BATCHES;
            black_box(per_sample_stack(source, &batches[next]))
        })
    });
    group.finish();

    // Side-by-side ratios in the same process: per round, each case runs the BATCHES batches
    // back to back; ratios are taken per round and the median over rounds is reported.
    let rounds = 21;
    let (mut vs_ceiling, mut vs_stack, mut ceiling_bs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut secs = [0f64; 3];
        // The case that runs first in a round varies from round to round, so that no case
        // always inherits the cache and allocator state another one leaves behind.
        for k in 0..3 {
            let case = (round + k) % 3;
            secs[case] = time(|| {
                for b in &batches {
                    match case {
                        0 => source.gather_into(b, &mut buf).expect("gather"),
                        1 => drop(black_box(loaderx_tensor(source, b))),
                        _ => drop(black_box(per_sample_stack(source, b))),
                    }
                }
            })
            .as_secs_f64();
        }
        vs_ceiling.push(secs[0] / secs[1]);
        vs_stack.push(secs[2] / secs[1]);
        ceiling_bs.push(BATCHES as f64 / secs[0]);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (c_bs, r_ceiling, r_stack) = (med(&mut ceiling_bs), med(&mut vs_ceiling), med(&mut vs_stack));
    let gib = |bs: f64| bs * batch_bytes as f64 / (1u64 << 30) as f64;
    println!(
        "{name}: {} records, batch {BATCH} ({} KiB), median of {rounds} interleaved rounds of {BATCHES} batches:",
        records,
        batch_bytes / 1024
    );
    println!("  gather_ceiling   {c_bs:8.1} batches/s ({:.2} GiB/s)", gib(c_bs));
    println!("  loaderx_tensor   {r_ceiling:8.2}x the ceiling");
    println!("  per_sample_stack loaderx is {r_stack:.1}x faster");
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    let f32s = write_f32_store(dir.path(), 20_000, 3072);
    let mnist = mnist_store(dir.path());
    eprintln!("wrote the stores in {:.1?}", t.elapsed());
    let mut c = Criterion::default().configure_from_args();
    for (name, source) in [("12KiB_f32", &f32s), ("mnist_u8", &mnist)] {
        workload(&mut c, name, source);
    }
    c.final_summary();
}
