//! Trains the burn book's MNIST guide model with burn's `SupervisedTraining` on loaderx loaders,
//! then prints the accuracy on the held-out test digits.
//!
//! ```text
//! cargo run --release --example mnist_burn --features burn-train [-- [MNIST_DIR] [--epochs N] [--lr X] [--batch B]]
//! ```
//!
//! `MNIST_DIR` holds the four IDX files (`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
//! `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, each plain or `.gz`); the default is the
//! bundled `data/mnist-10k` (8,000 train / 2,000 test digits). They are converted into loaderx
//! stores in the loaderx cache (`loaderx::convert::cache_dir`) on the first run and reused
//! afterwards. Each epoch prints its train loss and accuracy and the validation pass's (every
//! test digit once, in order).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use loaderx::burn::burn;
use loaderx::burn::{MnistBatch, StepLoaderBuilder};
use loaderx::convert::{MnistSplit, cache_dir, mnist_stores};
use loaderx::{DenseSource, Pass};

use burn::data::dataloader::DataLoader;
use burn::tensor::Device;

#[path = "common/burn_fit.rs"]
mod fit;
#[path = "common/burn_model.rs"]
mod model;

// ------------------------------------------------------------------ main

struct Args {
    dir: PathBuf,
    epochs: usize,
    lr: f64,
    batch: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k"),
        epochs: 6,
        lr: 2e-3,
        batch: 64,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--epochs" => args.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--lr" => args.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--batch" => args.batch = value("--batch")?.parse().map_err(|e| format!("--batch: {e}"))?,
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            dir => args.dir = PathBuf::from(dir),
        }
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let args = args()?;
    let dir = args.dir.canonicalize().map_err(|e| format!("{}: {e}", args.dir.display()))?;
    // Converted on the first run, reused afterwards.
    let (train_images, train_labels) = mnist_stores(&dir, MnistSplit::Train, &cache_dir())?;
    let (test_images, test_labels) = mnist_stores(&dir, MnistSplit::Test, &cache_dir())?;
    for (what, path) in [("train images", &train_images), ("test images", &test_images)] {
        let s = DenseSource::open(path)?;
        let stats = s.store().map(|st| st.stats()).transpose()?.unwrap_or_default();
        println!(
            "{what}: {} records of {:?} {}, {:.1} MiB in {}",
            s.len(),
            s.item_shape(),
            s.dtype(),
            stats.chunk_bytes as f64 / (1 << 20) as f64,
            path.display()
        );
    }

    let device = Device::flex();
    // Two cores: one prefetch thread keeps up with the model; the rest train.
    let train = StepLoaderBuilder::new()
        .mnist(&train_images, &train_labels)
        .batch_size(args.batch)
        .seed(42)
        .threads(1)
        .set_device(device.clone())
        .build_mnist()?;
    let test_len = DenseSource::open(&test_labels)?.len();
    // The validation split: every test digit once per epoch, in order, the last batch partial.
    let valid_builder = StepLoaderBuilder::new()
        .mnist(&test_images, &test_labels)
        .batch_size(500)
        .pass(Pass::ordered())
        .threads(1)
        .set_device(device.clone());
    let valid = valid_builder.clone().build_mnist()?;
    println!(
        "train: {} digits, {} steps of {} per epoch, {} epochs, lr {}; test: {test_len} digits",
        train.sampler().len,
        train.steps_per_epoch(),
        args.batch,
        args.epochs,
        args.lr
    );

    let t = Instant::now();
    let train = Arc::new(train) as Arc<dyn DataLoader<MnistBatch>>;
    let model =
        fit::fit(&device, train, Arc::new(valid), (args.epochs, args.lr), "loaderx-mnist-burn-artifacts")?;
    let train_secs = t.elapsed().as_secs_f64();

    // Accuracy over every held-out digit, exactly once.
    let test = valid_builder.set_device(device.clone()).build_mnist()?;
    let (correct, total) = fit::accuracy(&model, test.iter())?;
    println!(
        "test accuracy: {:.2}% ({correct}/{total}); training {train_secs:.1}s, total {:.1}s",
        100.0 * correct as f64 / total as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
