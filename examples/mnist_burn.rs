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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use loaderx::burn::burn;
use loaderx::burn::{MnistBatch, StepLoaderBuilder};
use loaderx::convert::{MnistSplit, cache_dir, mnist_stores};
use loaderx::{DenseSource, Finite};

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
use burn::train::metric::{AccuracyMetric, LossMetric, MetricDefinition, MetricId, NumericEntry};
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

// ------------------------------------------------------------------ a one-line-per-epoch renderer

/// Prints one line per split (its mean loss and accuracy) instead of burn's line per iteration.
#[derive(Default)]
struct EpochLines {
    start: Option<Instant>,
    epoch: usize,
    epochs: usize,
    split: String,
    items: usize,
    names: HashMap<MetricId, String>,
    /// Per metric of the split under way: weighted sum and weight.
    sums: HashMap<MetricId, (f64, f64)>,
}

impl EpochLines {
    fn add(&mut self, state: MetricState) {
        if let MetricState::Numeric(entry, Some(value)) = state {
            let (v, w) = match value {
                NumericEntry::Value(v) => (v, 1.0),
                NumericEntry::Aggregated { aggregated_value, count } => (aggregated_value, count as f64),
                // The epoch's own final value: the split's mean from here on.
                NumericEntry::Final(v) => {
                    self.sums.insert(entry.metric_id, (v, 1.0));
                    return;
                }
            };
            let s = self.sums.entry(entry.metric_id).or_default();
            s.0 += v * w;
            s.1 += w;
        }
    }
}

impl MetricsRendererTraining for EpochLines {
    fn update_train(&mut self, state: MetricState) {
        self.add(state);
    }
    fn update_valid(&mut self, state: MetricState) {
        self.add(state);
    }
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
        self.start.get_or_insert_with(Instant::now);
        self.split = split.to_string();
        self.items = items;
        self.sums.clear();
    }
    fn update_split(&mut self, _: usize) {}
    fn end_split(&mut self) {
        let mut metrics: Vec<String> = self
            .sums
            .iter()
            .filter(|(_, (_, w))| *w > 0.0)
            .map(|(id, (s, w))| {
                let name = self.names.get(id).map_or("metric", String::as_str);
                format!("{} {:.4}", name.to_lowercase(), s / w)
            })
            .collect();
        metrics.sort();
        println!(
            "[{:6.1}s] epoch {}/{} {:>5}: {} ({} digits)",
            self.start.map_or(0.0, |t| t.elapsed().as_secs_f64()),
            self.epoch + 1,
            self.epochs,
            self.split,
            metrics.join(", "),
            self.items
        );
    }
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
    fn register_metric(&mut self, def: MetricDefinition) {
        self.names.insert(def.metric_id, def.name.to_string());
    }
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
        .mnist(&train_images, &train_labels)?
        .batch_size(args.batch)
        .seed(42)
        .threads(1)
        .device(&device)
        .build_mnist()?;
    let test_len = DenseSource::open(&test_labels)?.len();
    // The validation split: every test digit once per epoch, in order, the last batch partial.
    let valid_builder = StepLoaderBuilder::new()
        .mnist(&test_images, &test_labels)?
        .batch_size(500)
        .finite(Finite::ordered())
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
    let artifacts = std::env::temp_dir().join("loaderx-mnist-burn-artifacts");
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
    .renderer(Box::new(EpochLines::default()))
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
