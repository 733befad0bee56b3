//! A few steps of `SupervisedTraining` on loaderx loaders: it completes and lowers the loss.

use std::sync::Arc;

use burn::data::dataloader::DataLoader;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor};
use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::{LossMetric, MetricDefinition};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};
use burn::train::{ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep};
use loaderx_burn::{MnistBatch, StepLoaderBuilder};
use loaderx_core::SamplerMode;

use crate::common::{device, mnist_train};

#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    activation: Relu,
    output: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Mlp {
            hidden: LinearConfig::new(28 * 28, 32).init(device),
            activation: Relu::new(),
            output: LinearConfig::new(32, 10).init(device),
        }
    }

    fn forward(&self, batch: &MnistBatch) -> ClassificationOutput {
        let [b, h, w] = batch.images.dims();
        let x = batch.images.clone().reshape([b, h * w]);
        let logits = self.output.forward(self.activation.forward(self.hidden.forward(x)));
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, logits, batch.targets.clone())
    }
}

impl TrainStep for Mlp {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.forward(&batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl InferenceStep for Mlp {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> ClassificationOutput {
        self.forward(&batch)
    }
}

/// A renderer that prints nothing (burn's CLI renderer prints a line per iteration).
struct Quiet;

impl MetricsRendererTraining for Quiet {
    fn update_train(&mut self, _: MetricState) {}
    fn update_valid(&mut self, _: MetricState) {}
}
impl MetricsRendererEvaluation for Quiet {
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}
}
impl TrainingProgressLogger for Quiet {
    fn start(&mut self, _: usize, _: usize, _: Option<usize>, _: Option<&str>) {}
    fn update_epoch(&mut self, _: usize) {}
    fn start_split(&mut self, _: &str, _: usize) {}
    fn update_split(&mut self, _: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _: String) {}
}
impl EvaluationProgressLogger for Quiet {
    fn start_global_progress(&mut self, _: usize) {}
    fn start_test(&mut self, _: &str, _: usize) {}
    fn update_test_progress(&mut self, _: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _: String) {}
}
impl MetricsRenderer for Quiet {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _: MetricDefinition) {}
}

fn mean_loss(model: &Mlp, batch: &MnistBatch) -> f32 {
    let loss: Tensor<1> = model.forward(batch).loss;
    loss.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()[0]
}

#[test]
fn supervised_training_on_step_loaders_completes_and_lowers_the_loss() {
    let (images, labels) = mnist_train();
    let base = StepLoaderBuilder::new().mnist(images, labels).threads(2).set_device(device());
    let train = base.clone().batch_size(32).seed(1).steps_per_epoch(15).build_mnist().unwrap();
    let train = Arc::new(train);
    let valid =
        base.clone().batch_size(100).mode(SamplerMode::Sequential).steps_per_epoch(2).build_mnist().unwrap();
    // A fixed held-out batch to measure the loss before and after.
    let probe = base.batch_size(256).mode(SamplerMode::Sequential).start_step(20).build_mnist().unwrap();
    let probe = probe.iter().next().unwrap().unwrap();

    let dev = device().autodiff();
    let model = Mlp::new(&dev);
    let before = mean_loss(&model.valid(), &probe);
    let dir = tempfile::tempdir().unwrap();
    let training = SupervisedTraining::new(
        dir.path(),
        train.clone() as Arc<dyn DataLoader<MnistBatch>>,
        Arc::new(valid),
    )
    .metric_train_numeric(LossMetric::new())
    .metric_valid_numeric(LossMetric::new())
    .with_application_logger(None)
    .renderer(Box::new(Quiet))
    .num_epochs(2);
    let result = training.launch(Learner::new(model, AdamConfig::new().init(), 1e-3));
    assert!(result.error.is_none(), "{:?}", result.error);
    // Two epochs of 15 steps went through the loader the test kept (to_device shares the step).
    assert_eq!(train.state().step, 30);
    let after = mean_loss(&result.model, &probe);
    assert!(after < 0.7 * before, "loss {before} -> {after}");
}
