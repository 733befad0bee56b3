//! Trains the burn book's MNIST model from a folder of image files, each decoded and augmented on
//! the loader's prefetch threads at every step, then prints the accuracy on the held-out digits.
//!
//! ```text
//! cargo run --release --example image_folder_burn --features burn-train,images [-- [--epochs N] [--lr X] [--batch B]]
//! ```
//!
//! The folders are the bundled `data/mnist-10k` digits written out once as PNG files in the
//! layout torchvision's `ImageFolder` reads (`train/3/00042.png`: one folder per class), in the
//! loaderx cache (`loaderx::convert::cache_dir`). Each is converted into an encoded image store:
//! every PNG kept byte for byte as one record, beside its labels, as
//! `loaderx convert images DIR OUT --encoded` does. Training reads those records and, per step and
//! per sample, decodes each PNG, cuts a random box of 85-100% of its area (the aspect within
//! 0.9-1.1) resized back to 28 x 28, and normalises it with MNIST's mean and deviation; the
//! evaluation decodes and normalises only. Every random choice is a function of (seed, step,
//! sample), so a run is repeatable and resumable.

use std::sync::Arc;
use std::time::Instant;

use loaderx::burn::burn;
use loaderx::burn::{DenseBatch, MnistBatch, StepLoaderBuilder};
use loaderx::{Batch, Pass};

use burn::data::dataloader::DataLoader;
use burn::tensor::{Device, Int, Tensor};

#[path = "common/burn_fit.rs"]
mod fit;
#[path = "common/image_folder.rs"]
mod folder;
#[path = "common/burn_model.rs"]
mod model;

struct Args {
    epochs: usize,
    lr: f64,
    batch: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args { epochs: 8, lr: 2e-3, batch: 64 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--epochs" => args.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--lr" => args.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--batch" => args.batch = value("--batch")?.parse().map_err(|e| format!("--batch: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// A batch of decoded digits as the model takes them: the pipeline's `[B, 3, 28, 28]` (a grey
/// PNG decodes to three equal channels) cut to `[B, 28, 28]`, and the labels.
fn digits(batch: Batch, device: &Device) -> loaderx::burn::Result<MnistBatch> {
    let mut dense = DenseBatch::from_batch(batch, device)?;
    let images: Tensor<4> = dense.float("image")?;
    let [b, _, h, w] = images.dims();
    let targets: Tensor<1, Int> = dense.int("label")?;
    Ok(MnistBatch { images: images.narrow(1, 0, 1).reshape([b, h, w]), targets })
}

fn main() -> Result<(), folder::BoxError> {
    let started = Instant::now();
    let args = args()?;
    let ((train_images, train_labels), (test_images, test_labels)) = folder::digit_stores()?;
    let test_len = test_labels.len();
    let (augment, plain) = (folder::augment(), folder::plain());

    let device = Device::flex();
    // Two cores: one prefetch thread decodes; the rest train.
    let train_len = train_labels.len();
    let train = StepLoaderBuilder::new()
        .image_stream("image", train_images, augment)
        .stream("label", train_labels)
        .batch_size(args.batch)
        .seed(42)
        .threads(1)
        .set_device(device.clone())
        .build_with(digits)?;
    // The validation split: every test digit once per epoch, in order, the last batch partial.
    let valid_builder = StepLoaderBuilder::new()
        .image_stream("image", test_images, plain)
        .stream("label", test_labels)
        .batch_size(500)
        .pass(Pass::ordered())
        .threads(1)
        .set_device(device.clone());
    let valid = valid_builder.clone().build_with(digits)?;
    println!(
        "train: {train_len} PNG digits, {} steps of {} per epoch, {} epochs, lr {}; test: {test_len} digits",
        train.steps_per_epoch(),
        args.batch,
        args.epochs,
        args.lr
    );

    let t = Instant::now();
    let train = Arc::new(train) as Arc<dyn DataLoader<MnistBatch>>;
    let model = fit::fit(
        &device,
        train,
        Arc::new(valid),
        (args.epochs, args.lr),
        "loaderx-image-folder-burn-artifacts",
    )?;
    let train_secs = t.elapsed().as_secs_f64();

    // Accuracy over every held-out digit, exactly once.
    let (correct, total) = fit::accuracy(&model, valid_builder.build_with(digits)?.iter())?;
    println!(
        "test accuracy: {:.2}% ({correct}/{total}); training {train_secs:.1}s, total {:.1}s",
        100.0 * correct as f64 / total as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
