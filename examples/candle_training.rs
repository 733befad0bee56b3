//! A candle program shaped like candle's `mnist-training` example (its linear model, full-batch
//! SGD over the whole training tensor, test accuracy per epoch), on loaderx. Against that example,
//! what changes is where the dataset comes from: `loaderx::candle::mnist::load()` hands out the
//! same four tensors as candle-datasets' `vision::mnist::load()` (images `f32` `[N, 784]` in
//! `0..=1`, labels `u8` `[N]`), read from the IDX files of `data/mnist-10k` (or
//! `$LOADERX_MNIST_DIR`) through loaderx stores converted on first use and cached.
//!
//! ```text
//! cargo run --release --example candle_training --features candle-nn [-- EPOCHS]
//! ```

use loaderx::candle::candle_core::{D, DType, Device};
use loaderx::candle::candle_nn::{self, Module, Optimizer, VarBuilder, VarMap, loss, ops};

const IMAGE_DIM: usize = 784;
const LABELS: usize = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epochs: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("EPOCHS {a:?}: {e}"))?,
        None => 30,
    };
    let m = loaderx::candle::mnist::load()?;
    println!("train-images: {:?}, test-images: {:?}", m.train_images.shape(), m.test_images.shape());
    let dev = Device::Cpu;
    let train_images = m.train_images.to_device(&dev)?;
    let train_labels = m.train_labels.to_dtype(DType::U32)?.to_device(&dev)?;
    let test_images = m.test_images.to_device(&dev)?;
    let test_labels = m.test_labels.to_dtype(DType::U32)?.to_device(&dev)?;

    let varmap = VarMap::new();
    let vs = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let model = candle_nn::linear(IMAGE_DIM, LABELS, vs.pp("linear"))?;
    let mut sgd = candle_nn::SGD::new(varmap.all_vars(), 1.0)?;
    for epoch in 1..=epochs {
        let logits = model.forward(&train_images)?;
        let loss = loss::nll(&ops::log_softmax(&logits, D::Minus1)?, &train_labels)?;
        sgd.backward_step(&loss)?;
        let predicted = model.forward(&test_images)?.argmax(D::Minus1)?;
        let correct = predicted.eq(&test_labels)?.to_dtype(DType::F32)?.sum_all()?.to_scalar::<f32>()?;
        let accuracy = correct / test_labels.dims1()? as f32;
        println!(
            "epoch {epoch:3}: train loss {:8.5}, test accuracy {:5.2}%",
            loss.to_scalar::<f32>()?,
            100.0 * accuracy
        );
    }
    Ok(())
}
