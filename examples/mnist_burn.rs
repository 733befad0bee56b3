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
//! stores under the system temp directory on the first run and reused afterwards.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use loaderx::burn::burn;
use loaderx::burn::{MnistBatch, StepLoaderBuilder};
use loaderx::{DenseSource, SamplerMode, WriteOptions};

use burn::config::Config;
use burn::data::dataloader::DataLoader;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor};
use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::{AccuracyMetric, LossMetric, MetricDefinition};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};
use burn::train::{ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep};

// ------------------------------------------------------------------ the guide's model

/// The burn book guide's model: two 3×3 convolutions, dropout, adaptive pooling, two linear layers.
#[derive(Module, Debug)]
struct Model {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: AdaptiveAvgPool2d,
    dropout: Dropout,
    linear1: Linear,
    linear2: Linear,
    activation: Relu,
}

#[derive(Config, Debug)]
struct ModelConfig {
    num_classes: usize,
    hidden_size: usize,
    #[config(default = "0.5")]
    dropout: f64,
}

impl ModelConfig {
    fn init(&self, device: &Device) -> Model {
        Model {
            conv1: Conv2dConfig::new([1, 8], [3, 3]).init(device),
            conv2: Conv2dConfig::new([8, 16], [3, 3]).init(device),
            pool: AdaptiveAvgPool2dConfig::new([8, 8]).init(),
            activation: Relu::new(),
            linear1: LinearConfig::new(16 * 8 * 8, self.hidden_size).init(device),
            linear2: LinearConfig::new(self.hidden_size, self.num_classes).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }
}

impl Model {
    /// `images` `[B, 28, 28]` to logits `[B, classes]`.
    fn forward(&self, images: Tensor<3>) -> Tensor<2> {
        let [batch_size, height, width] = images.dims();
        let x = images.reshape([batch_size, 1, height, width]);
        let x = self.conv1.forward(x);
        let x = self.dropout.forward(x);
        let x = self.conv2.forward(x);
        let x = self.dropout.forward(x);
        let x = self.activation.forward(x);
        let x = self.pool.forward(x);
        let x = x.reshape([batch_size, 16 * 8 * 8]);
        let x = self.linear1.forward(x);
        let x = self.dropout.forward(x);
        let x = self.activation.forward(x);
        self.linear2.forward(x)
    }

    fn forward_classification(&self, batch: MnistBatch) -> ClassificationOutput {
        let output = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

impl TrainStep for Model {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.forward_classification(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl InferenceStep for Model {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> ClassificationOutput {
        self.forward_classification(batch)
    }
}

// ------------------------------------------------------------------ data

/// The IDX file `name` in `dir`, plain or gzip.
fn idx_file(dir: &Path, name: &str) -> Result<PathBuf, String> {
    [dir.join(name), dir.join(format!("{name}.gz"))]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{} has no {name} or {name}.gz", dir.display()))
}

/// Converts `dir/name` into the dense store `out` unless a complete one is already there.
fn store(dir: &Path, name: &str, out: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    if DenseSource::open(out).is_err() {
        let summary = loaderx::convert::idx(idx_file(dir, name)?, out, WriteOptions::new().overwrite(true))?;
        println!("converted {name} -> {} ({summary:?})", out.display());
    }
    Ok(out.to_path_buf())
}

// ------------------------------------------------------------------ a one-line-per-epoch renderer

/// Prints one line per split instead of burn's line per iteration.
struct EpochLines {
    start: Instant,
    epoch: usize,
    epochs: usize,
}

impl MetricsRendererTraining for EpochLines {
    fn update_train(&mut self, _: MetricState) {}
    fn update_valid(&mut self, _: MetricState) {}
}
impl MetricsRendererEvaluation for EpochLines {
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}
}
impl TrainingProgressLogger for EpochLines {
    fn start(&mut self, epochs: usize, _: usize, _: Option<usize>, _: Option<&str>) {
        self.epochs = epochs;
    }
    fn update_epoch(&mut self, epoch: usize) {
        self.epoch = epoch;
    }
    fn start_split(&mut self, split: &str, items: usize) {
        println!(
            "[{:6.1}s] epoch {}/{}: {split} ({items} items)",
            self.start.elapsed().as_secs_f64(),
            self.epoch + 1,
            self.epochs
        );
    }
    fn update_split(&mut self, _: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _: String) {}
}
impl EvaluationProgressLogger for EpochLines {
    fn start_global_progress(&mut self, _: usize) {}
    fn start_test(&mut self, _: &str, _: usize) {}
    fn update_test_progress(&mut self, _: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _: String) {}
}
impl MetricsRenderer for EpochLines {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _: MetricDefinition) {}
}

// ------------------------------------------------------------------ main

struct Args {
    dir: PathBuf,
    epochs: usize,
    lr: f64,
    batch: u32,
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
    let key = loaderx_key(&dir);
    let stores = std::env::temp_dir().join(format!("loaderx-mnist-burn-{key:016x}"));
    std::fs::create_dir_all(&stores)?;
    let train_images = store(&dir, "train-images-idx3-ubyte", &stores.join("train-images"))?;
    let train_labels = store(&dir, "train-labels-idx1-ubyte", &stores.join("train-labels"))?;
    let test_images = store(&dir, "t10k-images-idx3-ubyte", &stores.join("test-images"))?;
    let test_labels = store(&dir, "t10k-labels-idx1-ubyte", &stores.join("test-labels"))?;

    let device = Device::flex();
    // Two cores: one prefetch thread keeps up with the model; the rest train.
    let train = StepLoaderBuilder::new()
        .mnist(&train_images, &train_labels)?
        .batch_size(args.batch)
        .seed(42)
        .threads(1)
        .device(&device)
        .build_mnist()?;
    let test_len = DenseSource::open(&test_labels)?.len() as u32;
    // The validation split: every test digit once per epoch, in order.
    let eval_batch = largest_divisor_at_most(test_len, 500);
    let valid_builder = StepLoaderBuilder::new()
        .mnist(&test_images, &test_labels)?
        .batch_size(eval_batch)
        .mode(SamplerMode::Sequential)
        .threads(1)
        .device(&device);
    let valid = valid_builder.clone().build_mnist()?;
    println!(
        "train: {} digits, {} steps of {} per epoch, {} epochs, lr {}; test: {test_len} digits",
        train.sampler().len,
        train.steps_per_epoch(),
        args.batch,
        args.epochs,
        args.lr
    );

    let model = ModelConfig::new(10, 512).init(&device.clone().autodiff());
    let artifacts = stores.join("artifacts");
    let training = SupervisedTraining::new(
        &artifacts,
        Arc::new(train) as Arc<dyn DataLoader<MnistBatch>>,
        Arc::new(valid),
    )
    .metric_train_numeric(AccuracyMetric::new())
    .metric_valid_numeric(AccuracyMetric::new())
    .metric_train_numeric(LossMetric::new())
    .metric_valid_numeric(LossMetric::new())
    .with_application_logger(None)
    .renderer(Box::new(EpochLines { start: Instant::now(), epoch: 0, epochs: 0 }))
    .num_epochs(args.epochs);
    let t = Instant::now();
    let result = training.launch(Learner::new(model, AdamConfig::new().init(), args.lr));
    if let Some(e) = result.error {
        return Err(format!("training failed: {e}").into());
    }
    let train_secs = t.elapsed().as_secs_f64();

    // Accuracy over every held-out digit, exactly once.
    let model = result.model;
    let test = valid_builder.device(&device).build_mnist()?;
    let (mut correct, mut total) = (0usize, 0usize);
    for batch in test.iter() {
        let batch = batch?;
        let targets: Tensor<1, Int> = batch.targets.clone();
        let predicted = model.forward(batch.images).argmax(1);
        let predicted =
            predicted.into_data().convert::<i64>().try_to_vec::<i64>().map_err(|e| format!("{e:?}"))?;
        let targets =
            targets.into_data().convert::<i64>().try_to_vec::<i64>().map_err(|e| format!("{e:?}"))?;
        correct += predicted.iter().zip(&targets).filter(|(p, t)| p == t).count();
        total += targets.len();
    }
    println!(
        "test accuracy: {:.2}% ({correct}/{total}); training {train_secs:.1}s, total {:.1}s",
        100.0 * correct as f64 / total as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The largest divisor of `n` not above `cap`, so a sequential epoch covers `n` exactly.
fn largest_divisor_at_most(n: u32, cap: u32) -> u32 {
    (1..=cap.min(n)).rev().find(|&d| n.is_multiple_of(d)).unwrap_or(1)
}

/// FNV-1a of the data directory's path: one set of stores per input directory.
fn loaderx_key(dir: &Path) -> u64 {
    dir.to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
