//! Trains a small convolutional network with candle-nn from a folder of image files, each decoded
//! and augmented on the loader's prefetch threads at every step (the twin of
//! `image_folder_burn`), then prints the accuracy on the held-out digits.
//!
//! ```sh
//! cargo run --release --features candle-nn,images --example image_folder_candle [-- --steps N --batch B --seed S]
//! ```
//!
//! The bundled `data/mnist-10k` digits are written out once as PNG files in torchvision's
//! `ImageFolder` layout (`train/3/00042.png`) in the loaderx cache and converted into encoded image
//! stores (each PNG kept as one record, as `loaderx convert images DIR OUT --encoded` does).
//! Training decodes, crops (85-100% of the area) and normalises each digit on the prefetch
//! threads; evaluation decodes and normalises only, every test digit once, in order.

use std::time::Instant;

use loaderx::candle::candle_core::{D, DType, Device, Module, Tensor};
use loaderx::candle::{CandleLoader, Converter};
use loaderx::{DataLoader, LoaderBuilder, Pass};

#[path = "common/image_folder.rs"]
mod folder;
#[path = "common/candle_net.rs"]
mod net;
use folder::BoxError;

struct Args {
    steps: u64,
    batch: usize,
    seed: u64,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args { steps: 1000, batch: 64, seed: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--steps" => args.steps = value()?.parse()?,
            "--batch" => args.batch = value()?.parse()?,
            "--seed" => args.seed = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(args)
}

/// A loader of `(x, y)`: the pipeline's `[B, 3, 28, 28]` (a grey PNG decodes to three equal
/// channels) cut to `[B, 1, 28, 28]`, and the labels as `u32`, built on the prefetch threads.
fn loader(builder: LoaderBuilder, device: &Device) -> Result<CandleLoader<(Tensor, Tensor)>, BoxError> {
    Ok(CandleLoader::build_with(builder, Converter::new(device), |mut batch, conv| {
        let image = conv.array(batch.take("image").ok_or("no image stream")?)?;
        let label = conv.array(batch.take("label").ok_or("no label stream")?)?;
        Ok::<_, BoxError>((image.narrow(1, 0, 1)?, label.to_dtype(DType::U32)?))
    })?)
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let start = Instant::now();
    let ((train_images, train_labels), (test_images, test_labels)) = folder::digit_stores()?;
    let (train_len, test_len) = (train_labels.len(), test_labels.len());
    let device = Device::Cpu;
    let mut train = loader(
        DataLoader::builder()
            .image_stream("image", train_images, folder::augment())
            .stream("label", train_labels)
            .batch_size(args.batch)
            .seed(args.seed)
            .threads(1),
        &device,
    )?;
    println!("training on {train_len} PNG digits: batch {}, {} steps", args.batch, args.steps);

    let train_start = Instant::now();
    let net = net::train(&device, args.steps, || Ok(train.next_batch()?.ok_or("the loader is endless")?))?;

    // Every test digit once, in order, the last batch partial.
    let mut test = loader(
        DataLoader::builder()
            .image_stream("image", test_images, folder::plain())
            .stream("label", test_labels)
            .batch_size(500)
            .pass(Pass::ordered())
            .threads(1),
        &device,
    )?;
    let mut correct = 0usize;
    while let Some((x, y)) = test.next_batch()? {
        let predicted = net.forward(&x)?.argmax(D::Minus1)?;
        correct += predicted.eq(&y)?.to_dtype(DType::U32)?.sum_all()?.to_scalar::<u32>()? as usize;
    }
    println!(
        "test accuracy: {:.2}% ({correct}/{test_len}); training {:.1?}, total {:.1?}",
        100.0 * correct as f64 / test_len as f64,
        train_start.elapsed(),
        start.elapsed()
    );
    Ok(())
}
