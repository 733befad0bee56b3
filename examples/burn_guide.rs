//! A burn program shaped like the burn book's MNIST guide (its model, batcher, `DataLoaderBuilder`
//! chains and `SupervisedTraining`), on loaderx. Against the guide, what changes is imports and
//! where the datasets come from: `loaderx::burn::prelude::*` brings a `DataLoaderBuilder` with
//! burn's names and types and an `MnistDataset` that reads the IDX files of `data/mnist-10k` (or
//! `$LOADERX_MNIST_DIR`), converted into loaderx stores on first use and cached.
//!
//! ```text
//! cargo run --release --example burn_guide --features burn-train [-- EPOCHS]
//! ```

use std::sync::Arc;

use loaderx::burn::burn;
use loaderx::burn::prelude::*;

use burn::optim::AdamConfig;
use burn::tensor::Device;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};

#[path = "common/burn_model.rs"]
mod model;
use model::ModelConfig;
#[cfg(not(feature = "burn-tui"))]
#[path = "common/epoch_lines.rs"]
mod epoch_lines;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epochs: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("EPOCHS {a:?}: {e}"))?,
        None => 10,
    };
    let device = Device::flex();
    // The guide's two builder chains, unchanged: burn's names, loaderx underneath.
    let train = DataLoaderBuilder::new(MnistBatcher)
        .batch_size(64)
        .shuffle(42)
        .num_workers(2)
        .set_device(device.clone())
        .build(MnistDataset::train());
    let valid = DataLoaderBuilder::new(MnistBatcher)
        .batch_size(64)
        .shuffle(42)
        .num_workers(2)
        .set_device(device.clone())
        .build(MnistDataset::test());

    let model = ModelConfig::new(10, 512).init(&device.clone().autodiff());
    let artifacts = std::env::temp_dir().join("loaderx-burn-guide-artifacts");
    let training = SupervisedTraining::new(&artifacts, train, Arc::clone(&valid))
        .metric_train_numeric(AccuracyMetric::new())
        .metric_valid_numeric(AccuracyMetric::new())
        .metric_train_numeric(LossMetric::new())
        .metric_valid_numeric(LossMetric::new())
        .with_application_logger(None)
        .num_epochs(epochs);
    // With `burn-tui`, burn's own dashboard; without it, one line per epoch and split instead of
    // burn's line per step.
    #[cfg(not(feature = "burn-tui"))]
    let training = training.renderer(Box::new(epoch_lines::EpochLines::default()));
    let result = training.launch(Learner::new(model, AdamConfig::new().init(), 1e-4));
    if let Some(e) = result.error {
        return Err(format!("training failed: {e}").into());
    }

    // Every test digit once (the loader's pass is exactly-once, the last batch partial).
    let (mut correct, mut total) = (0usize, 0usize);
    for batch in valid.iter() {
        let batch = batch?;
        let predicted = result.model.forward(batch.images).argmax(1).into_data().convert::<i64>();
        let targets = batch.targets.into_data().convert::<i64>();
        let (p, t) = (predicted.as_slice::<i64>().unwrap_or(&[]), targets.as_slice::<i64>().unwrap_or(&[]));
        correct += p.iter().zip(t).filter(|(p, t)| p == t).count();
        total += t.len();
    }
    println!("validation accuracy: {:.2}% ({correct}/{total})", 100.0 * correct as f64 / total as f64);
    Ok(())
}
