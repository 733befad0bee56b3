//! Training the burn book's model with burn's `SupervisedTraining` on two loaders of
//! `MnistBatch`, and its accuracy over a pass of held-out batches: shared by the `mnist_burn` and
//! `image_folder_burn` examples (`#[path]` modules, beside `burn_model.rs`).

use std::sync::Arc;

use loaderx::burn::MnistBatch;
use loaderx::burn::burn;

use burn::data::dataloader::DataLoader;
use burn::optim::AdamConfig;
use burn::tensor::Device;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};

use crate::model::{Model, ModelConfig};

#[cfg(not(feature = "burn-tui"))]
#[path = "epoch_lines.rs"]
mod epoch_lines;

/// Trains a new model for `epochs` at learning rate `lr`, validating on `valid` after each
/// epoch; burn's checkpoints go to a directory named `name` in the system's temporary one.
pub fn fit(
    device: &Device,
    train: Arc<dyn DataLoader<MnistBatch>>,
    valid: Arc<dyn DataLoader<MnistBatch>>,
    (epochs, lr): (usize, f64),
    name: &str,
) -> Result<Model, String> {
    let model = ModelConfig::new(10, 512).init(&device.clone().autodiff());
    let training = SupervisedTraining::new(std::env::temp_dir().join(name), train, valid)
        .metric_train_numeric(AccuracyMetric::new())
        .metric_valid_numeric(AccuracyMetric::new())
        .metric_train_numeric(LossMetric::new())
        .metric_valid_numeric(LossMetric::new())
        .with_application_logger(None)
        .num_epochs(epochs);
    // With `burn-tui`, burn's own dashboard; without it, one line per epoch and split.
    #[cfg(not(feature = "burn-tui"))]
    let training = training.renderer(Box::new(epoch_lines::EpochLines::default()));
    let result = training.launch(Learner::new(model, AdamConfig::new().init(), lr));
    match result.error {
        Some(e) => Err(format!("training failed: {e}")),
        None => Ok(result.model),
    }
}

/// The digits `model` gets right of every batch of `batches`, and how many there were.
pub fn accuracy<E: std::fmt::Display>(
    model: &Model,
    batches: impl Iterator<Item = Result<MnistBatch, E>>,
) -> Result<(usize, usize), String> {
    let (mut correct, mut total) = (0usize, 0usize);
    for batch in batches {
        let batch = batch.map_err(|e| e.to_string())?;
        let predicted = model.forward(batch.images).argmax(1);
        let predicted =
            predicted.into_data().convert::<i64>().try_to_vec::<i64>().map_err(|e| format!("{e:?}"))?;
        let targets =
            batch.targets.into_data().convert::<i64>().try_to_vec::<i64>().map_err(|e| format!("{e:?}"))?;
        correct += predicted.iter().zip(&targets).filter(|(p, t)| p == t).count();
        total += targets.len();
    }
    Ok((correct, total))
}
