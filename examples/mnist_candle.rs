//! Trains a small convolutional network on MNIST with candle-nn, fed by loaderx.
//!
//! The IDX files are converted once into loaderx stores (zstd) under a cache directory; training
//! then reads endless, shuffled, step-ordered batches from a `CandleLoader` whose prefetch threads
//! gather the u8 images, normalise them to f32 and build the tensors, so the training thread only
//! runs the model. The test accuracy on the held-out digits is printed at the end.
//!
//! ```sh
//! cargo run --release --features candle-nn --example mnist_candle
//! # full MNIST (the four IDX files, .gz or not, in one directory), own cache dir, more steps:
//! cargo run --release --features candle-nn --example mnist_candle -- /data/mnist --cache /tmp/mnist-stores --steps 3000
//! # on a GPU: batches gathered into pinned memory and copied asynchronously (CudaLoader),
//! # normalised on the device
//! cargo run --release --features candle-nn,candle-cuda --example mnist_candle -- --device cuda
//! ```
//!
//! Defaults: the bundled `data/mnist-10k` (8,000 training and 2,000 test digits), stores in
//! `target/mnist-stores/mnist-10k`, batch 64, 600 steps (about 5 passes), AdamW at 1e-3.

use std::path::{Path, PathBuf};
use std::time::Instant;

use loaderx::candle::candle_core::{self, D, DType, Device, Module, Tensor};
use loaderx::candle::{CandleLoader, Converter};
use loaderx::{Codec, DataLoader, DenseSource, WriteOptions, convert};

#[path = "common/candle_net.rs"]
mod net;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const MEAN: f32 = 0.1307;
const STD: f32 = 0.3081;

struct Args {
    input: PathBuf,
    cache: PathBuf,
    steps: u64,
    batch: usize,
    seed: u64,
    cuda: bool,
}

fn parse_args() -> Result<Args, BoxError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut input = root.join("data/mnist-10k");
    let mut cache = None;
    let (mut steps, mut batch, mut seed, mut cuda) = (600, 64, 0, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--cache" => cache = Some(PathBuf::from(value()?)),
            "--steps" => steps = value()?.parse()?,
            "--batch" => batch = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            "--device" => {
                cuda = match value()?.as_str() {
                    "cpu" => false,
                    "cuda" => true,
                    other => return Err(format!("--device {other}: cpu or cuda").into()),
                }
            }
            "-h" | "--help" => {
                println!(
                    "usage: mnist_candle [MNIST_IDX_DIR] [--cache DIR] [--steps N] [--batch N] [--seed N] [--device cpu|cuda]"
                );
                std::process::exit(0);
            }
            _ if a.starts_with('-') => return Err(format!("unknown option {a}").into()),
            _ => input = PathBuf::from(a),
        }
    }
    let name = input.file_name().map_or_else(|| "mnist".into(), |n| n.to_string_lossy().into_owned());
    let cache = cache.unwrap_or_else(|| root.join("target/mnist-stores").join(name));
    Ok(Args { input, cache, steps, batch, seed, cuda })
}

/// `dir/stem` or `dir/stem.gz`, whichever exists.
fn idx_file(dir: &Path, stem: &str) -> Result<PathBuf, BoxError> {
    [dir.join(stem), dir.join(format!("{stem}.gz"))]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no {stem}[.gz] in {}", dir.display()).into())
}

/// Converts the four IDX files into stores under `cache` unless they are already there.
fn ensure_stores(input: &Path, cache: &Path) -> Result<(), BoxError> {
    for (store, stem) in [
        ("train-images", "train-images-idx3-ubyte"),
        ("train-labels", "train-labels-idx1-ubyte"),
        ("test-images", "t10k-images-idx3-ubyte"),
        ("test-labels", "t10k-labels-idx1-ubyte"),
    ] {
        let out = cache.join(store);
        if DenseSource::open(&out).is_ok() {
            continue;
        }
        std::fs::create_dir_all(cache)?;
        let t = Instant::now();
        let src = idx_file(input, stem)?;
        convert::idx(&src, &out, WriteOptions::new().codec(Codec::Zstd).overwrite(true))?;
        println!("converted {} -> {} in {:.2?}", src.display(), out.display(), t.elapsed());
    }
    Ok(())
}

/// Where the training batches come from: the CPU loader (normalised on its prefetch threads), or
/// the staged CUDA loader (u8 batches copied to the device, normalised there).
enum Feed {
    Cpu(CandleLoader<(Tensor, Tensor)>),
    #[cfg(feature = "candle-cuda")]
    Cuda(loaderx::candle::CudaLoader),
}

impl Feed {
    fn next(&mut self) -> Result<(Tensor, Tensor), BoxError> {
        match self {
            Feed::Cpu(l) => Ok(l.next_batch()?.ok_or("the loader is endless")?),
            #[cfg(feature = "candle-cuda")]
            Feed::Cuda(l) => {
                let b = l.next_batch()?.ok_or("the loader is endless")?;
                let image = b.get("image")?;
                let x = ((image.to_dtype(DType::F32)? / 255.0)? - f64::from(MEAN))? / f64::from(STD);
                let x = x?.reshape((image.dims()[0], 1, 28, 28))?;
                Ok((x, b.get("label")?.to_dtype(DType::U32)?))
            }
        }
    }

    fn step(&self) -> u64 {
        match self {
            Feed::Cpu(l) => l.state().step,
            #[cfg(feature = "candle-cuda")]
            Feed::Cuda(l) => l.state().step,
        }
    }
}

#[cfg(feature = "candle-cuda")]
fn cuda_feed(builder: loaderx::LoaderBuilder, device: &Device) -> Result<Feed, BoxError> {
    Ok(Feed::Cuda(loaderx::candle::CudaLoader::new(builder, device)?))
}

#[cfg(not(feature = "candle-cuda"))]
fn cuda_feed(_: loaderx::LoaderBuilder, _: &Device) -> Result<Feed, BoxError> {
    Err("--device cuda needs the candle-cuda feature (and the CUDA toolkit to build it)".into())
}

/// u8 pixels → normalised f32, `(B, 1, 28, 28)`.
fn normalise(pixels: &[u8], device: &Device) -> candle_core::Result<Tensor> {
    let v: Vec<f32> = pixels.iter().map(|&p| (f32::from(p) / 255.0 - MEAN) / STD).collect();
    Tensor::from_vec(v, (pixels.len() / 784, 1, 28, 28), device)
}

/// Accuracy over every record of the test stores, in batches of 500.
fn evaluate(net: &net::Net, cache: &Path, device: &Device) -> Result<(usize, usize), BoxError> {
    let images = DenseSource::open(cache.join("test-images"))?;
    let labels = DenseSource::open(cache.join("test-labels"))?;
    let mut correct = 0usize;
    let n = images.len();
    for start in (0..n).step_by(500) {
        let idx: Vec<u32> = (start as u32..(start + 500).min(n) as u32).collect();
        let x = normalise(images.get_batch(&idx)?.as_slice::<u8>()?, device)?;
        let y = Tensor::from_vec(labels.get_batch(&idx)?.into_vec::<u8>()?, idx.len(), device)?
            .to_dtype(DType::U32)?;
        let pred = net.forward(&x)?.argmax(D::Minus1)?;
        correct += pred.eq(&y)?.to_dtype(DType::U32)?.sum_all()?.to_scalar::<u32>()? as usize;
    }
    Ok((correct, n))
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let start = Instant::now();
    ensure_stores(&args.input, &args.cache)?;
    let device = if args.cuda { Device::new_cuda(0)? } else { Device::Cpu };

    let builder = DataLoader::builder()
        .open_stream("image", args.cache.join("train-images"))
        .open_stream("label", args.cache.join("train-labels"))
        .batch_size(args.batch)
        .seed(args.seed)
        .threads(2)
        .prefetch(4);
    println!(
        "training on {} digits: batch {}, {} steps, 2 prefetch threads, on {device:?}",
        DenseSource::open(args.cache.join("train-labels"))?.len(),
        args.batch,
        args.steps,
    );
    let mut loader = if args.cuda {
        cuda_feed(builder, &device)?
    } else {
        // Runs on the prefetch threads: normalise the gathered bytes and build both tensors.
        Feed::Cpu(CandleLoader::build_with(builder, Converter::new(&device), |mut batch, conv| {
            let image = batch.take("image").ok_or("no image stream")?;
            let label = batch.take("label").ok_or("no label stream")?;
            let x = normalise(image.as_slice::<u8>()?, conv.device())?;
            let y = conv.array(label)?.to_dtype(DType::U32)?;
            Ok::<_, BoxError>((x, y))
        })?)
    };

    let train_start = Instant::now();
    let net = net::train(&device, args.steps, || loader.next())?;
    let (correct, n) = evaluate(&net, &args.cache, &device)?;
    let trained = train_start.elapsed();
    println!(
        "test accuracy: {:.2}% ({correct}/{n}); training {trained:.1?} ({:.2} ms per step), total {:.1?}; resume state: step {}",
        100.0 * correct as f64 / n as f64,
        trained.as_secs_f64() * 1e3 / args.steps.max(1) as f64,
        start.elapsed(),
        loader.step()
    );
    Ok(())
}
