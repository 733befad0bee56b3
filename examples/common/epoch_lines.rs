//! A burn metrics renderer printing one line per epoch and split (mean loss and accuracy), shared
//! by the `mnist_burn` and `burn_guide` examples.

use std::collections::HashMap;
use std::time::Instant;

use loaderx::burn::burn;

use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};

/// Prints one line per split (its mean loss and accuracy) instead of burn's line per iteration.
#[derive(Default)]
pub struct EpochLines {
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
