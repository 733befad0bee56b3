//! Batch → device tensor throughput on a CUDA device (feature `cuda`; runs only where one is
//! visible). For batches of 4, 16 and 64 MiB of f32 records (64 KiB each), in the same run:
//!
//! - the ceiling: a plain cudarc host-to-device copy from pinned memory, synchronised;
//! - candle's own path: `Tensor::from_vec(..)` on the device, from pageable memory;
//! - `CandleLoader` (pinned staging with a host copy and a synchronised copy per batch);
//! - `CudaLoader` (gathered straight into pinned slots, copied on a side stream, event-released).
//!
//! Then the overlap: a consumer whose step is a matmul of fixed time T (sized here to 2–5 ms),
//! alone and fed by `CudaLoader` with 16 MiB batches: the loader's cost is the difference.
//!
//! `cargo bench -p loaderx-candle --features cuda --bench cuda` (scripts/check-cuda.sh builds it
//! and the device command runs it).

use std::time::Instant;

use loaderx_candle::candle_core::cuda::cudarc::driver::CudaContext;
use loaderx_candle::candle_core::{DType, Device, Tensor};
use loaderx_candle::{CandleLoader, Converter, CudaLoader};
use loaderx_core::{DataLoader, DatasetWriter, WriteOptions};

const RECORD_ELEMS: usize = 16 << 10; // 64 KiB of f32

fn gbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new_cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("no CUDA device ({e}): nothing measured");
            return Ok(());
        }
    };
    let Device::Cuda(cuda) = &device else { unreachable!("new_cuda gives a CUDA device") };
    let ctx: std::sync::Arc<CudaContext> = std::sync::Arc::clone(cuda.cuda_stream().context());
    let tmp = tempfile::tempdir()?;
    // 4,096 records of 64 KiB: 256 MiB, enough distinct batches of every size.
    let records = 4096usize;
    let path = tmp.path().join("x");
    let mut w = DatasetWriter::dense::<f32>(&path, vec![RECORD_ELEMS], WriteOptions::new())?;
    for lo in (0..records).step_by(256) {
        let block: Vec<f32> = (lo * RECORD_ELEMS..(lo + 256) * RECORD_ELEMS).map(|v| v as f32).collect();
        w.append(&block)?;
    }
    w.finish()?;
    println!(
        "| batch | pinned ceiling GB/s | from_vec (pageable) GB/s | CandleLoader GB/s | CudaLoader GB/s | CudaLoader / ceiling | CudaLoader / from_vec |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for mib in [4usize, 16, 64] {
        let bytes = mib << 20;
        let batch = bytes / (RECORD_ELEMS * 4);
        let steps = (1024 / mib).max(8);
        let stream = ctx.new_stream()?;
        let mut pinned = loaderx_core::pinned_zeroed::<f32>(&ctx, bytes / 4)?;
        pinned.as_mut_slice()?.fill(1.0);
        let t = Instant::now();
        for _ in 0..steps {
            let d = stream.clone_htod(&pinned)?;
            stream.synchronize()?;
            drop(d);
        }
        let ceiling = gbps(bytes * steps, t.elapsed().as_secs_f64());
        let host: Vec<f32> = vec![1.0; bytes / 4];
        let t = Instant::now();
        for _ in 0..steps {
            let x = Tensor::from_vec(host.clone(), bytes / 4, &device)?;
            device.synchronize()?;
            drop(x);
        }
        let pageable = gbps(bytes * steps, t.elapsed().as_secs_f64());
        let builder =
            || DataLoader::builder().open_stream("x", &path).batch_size(batch).seed(1).threads(4).prefetch(2);
        let mut old = CandleLoader::new(builder(), Converter::new(&device))?;
        old.next_batch()?;
        let t = Instant::now();
        for _ in 0..steps {
            std::hint::black_box(old.next_batch()?);
        }
        device.synchronize()?;
        let staged_old = gbps(bytes * steps, t.elapsed().as_secs_f64());
        drop(old);
        let mut new = CudaLoader::new(builder(), &device)?;
        new.next_batch()?;
        let t = Instant::now();
        for _ in 0..steps {
            std::hint::black_box(new.next_batch()?);
        }
        device.synchronize()?;
        let staged_new = gbps(bytes * steps, t.elapsed().as_secs_f64());
        println!(
            "| {mib} MiB | {ceiling:.1} | {pageable:.1} | {staged_old:.1} | {staged_new:.1} | {:.2} | {:.1} |",
            staged_new / ceiling,
            staged_new / pageable
        );
    }
    // Overlap: a matmul step of fixed time, alone and fed by the loader (16 MiB batches).
    let mut n = 2048usize;
    let step_time = |n: usize| -> Result<f64, Box<dyn std::error::Error>> {
        let a = Tensor::ones((n, n), DType::F32, &device)?;
        let b = a.matmul(&a)?;
        device.synchronize()?;
        let t = Instant::now();
        for _ in 0..10 {
            std::hint::black_box(a.matmul(&b)?);
        }
        device.synchronize()?;
        Ok(t.elapsed().as_secs_f64() / 10.0)
    };
    while step_time(n)? < 2e-3 && n < 16384 {
        n *= 2;
    }
    let a = Tensor::ones((n, n), DType::F32, &device)?;
    let steps = 100;
    let t = Instant::now();
    for _ in 0..steps {
        std::hint::black_box(a.matmul(&a)?);
    }
    device.synchronize()?;
    let alone = t.elapsed().as_secs_f64() / steps as f64;
    let batch = (16usize << 20) / (RECORD_ELEMS * 4);
    let builder = DataLoader::builder().open_stream("x", &path).batch_size(batch).threads(4).prefetch(2);
    let mut loader = CudaLoader::new(builder, &device)?;
    loader.next_batch()?;
    let t = Instant::now();
    for _ in 0..steps {
        let x = loader.next_batch()?.expect("an endless loader");
        let s = x.get("x")?.sum_all()?;
        std::hint::black_box((a.matmul(&a)?, s));
    }
    device.synchronize()?;
    let fed = t.elapsed().as_secs_f64() / steps as f64;
    println!(
        "\nconsumer step (matmul {n}x{n}): alone {:.2} ms, fed 16 MiB batches by CudaLoader {:.2} ms: the loader adds {:.1}%",
        alone * 1e3,
        fed * 1e3,
        (fed / alone - 1.0) * 100.0
    );
    Ok(())
}
