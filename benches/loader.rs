//! The endless loader against the raw gather ceiling of the same batches.
//!
//! 20,000 records of 12 KiB (a dense f32 stream of 3,072 elements) in a raw store, global batch
//! 256, cyclic sampler. Contenders, in one process on the same store and the same batches:
//! - `gather`: `Sampler::fill` + `DenseSource::gather_into` into one reused buffer on the calling
//!   thread (the work the loader cannot avoid: the ceiling);
//! - `loader`: `DataLoader::next_batch` with the identity transform, default threads, batches
//!   dropped (so their buffers are recycled).
//!
//! `cargo bench --bench loader -- --warm-up-time 1 --measurement-time 3`

mod common;

use criterion::{Criterion, Throughput};
use loaderx::{ArrayData, DataLoader, DenseSource, SamplerMode};
use loaderx_bench::timing::{FixedContender, interleaved_fixed};
use loaderx_bench::workloads::{blocks, write_structured_f32};

const BATCH: u32 = 256;
const ELEMS: usize = 3072;

fn main() {
    let n: u32 = std::env::var("LOADERX_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir_in(
        std::env::var_os("LOADERX_BENCH_DIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from),
    )
    .unwrap();
    let path = dir.path().join("x");
    // 1,024 records per append.
    write_structured_f32(&path, ELEMS, blocks(n, ELEMS * 4, 1024 * ELEMS * 4)).unwrap();
    let source = DenseSource::open(&path).unwrap();
    let builder = DataLoader::builder()
        .stream("x", source.clone())
        .batch_size(BATCH as usize)
        .mode(SamplerMode::Cyclic)
        .seed(7);
    let sampler = builder.clone().build().unwrap().sampler().cloned().expect("an endless loader");

    let mut step = 0u64;
    let mut idx = vec![0u32; BATCH as usize];
    let mut data = ArrayData::zeros(loaderx::DType::F32, 0);
    let mut loader = builder.clone().build().unwrap();

    let mut c = Criterion::default().output_directory(&common::criterion_dir()).configure_from_args();
    let mut g = c.benchmark_group("loader_12KiB");
    g.throughput(Throughput::Bytes(u64::from(BATCH) * (ELEMS * 4) as u64));
    g.sample_size(30);
    {
        let mut contenders: Vec<FixedContender<'_>> = vec![
            (
                "gather",
                Box::new(|| {
                    sampler.fill(step, &mut idx).unwrap();
                    source.gather_into(&idx, &mut data).unwrap();
                    step += 1;
                }),
            ),
            (
                "loader",
                Box::new(|| {
                    drop(loader.next_batch().unwrap().unwrap());
                }),
            ),
        ];
        for (name, f) in contenders.iter_mut() {
            g.bench_function(*name, |b| b.iter(&mut *f));
        }
        g.finish();
        c.final_summary();

        let res = interleaved_fixed(15, 50, &mut contenders);
        let batch_mib = f64::from(BATCH) * (ELEMS * 4) as f64 / (1 << 20) as f64;
        println!(
            "\nLoader, {n} records of 12 KiB, batch {BATCH}, identity transform, {} prefetch threads; median of 15 interleaved rounds",
            std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8)
        );
        println!("| contender | batches/s | samples/s | MiB/s | vs gather ceiling |");
        println!("| --- | ---: | ---: | ---: | ---: |");
        for r in &res {
            let bps = 1e9 / r.median_ns;
            println!(
                "| {} | {:.0} | {:.0} | {:.0} | {:.2}x |",
                r.name,
                bps,
                bps * f64::from(BATCH),
                bps * batch_mib,
                r.speed_vs_baseline
            );
        }
    }
    println!("fresh batch buffers allocated over the run: {}", loader.buffers_allocated());
}
