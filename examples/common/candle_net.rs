//! The small convolutional network the candle examples train on 28 x 28 digits, shared by
//! `mnist_candle` and `image_folder_candle` (`#[path]` modules).

use std::time::Instant;

use loaderx::candle::candle_core::{self, DType, Device, Module, Tensor};
use loaderx::candle::candle_nn::{self, Conv2d, Linear, Optimizer, VarBuilder, VarMap};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Two 5 x 5 convolutions with max pooling, then two linear layers: `[B, 1, 28, 28]` to logits
/// `[B, 10]`.
pub struct Net {
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
}

impl Net {
    pub fn new(vb: VarBuilder) -> candle_core::Result<Net> {
        let cfg = Default::default();
        Ok(Net {
            conv1: candle_nn::conv2d(1, 16, 5, cfg, vb.pp("conv1"))?,
            conv2: candle_nn::conv2d(16, 32, 5, cfg, vb.pp("conv2"))?,
            fc1: candle_nn::linear(32 * 4 * 4, 128, vb.pp("fc1"))?,
            fc2: candle_nn::linear(128, 10, vb.pp("fc2"))?,
        })
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        // 28 → conv 24 → pool 12 → conv 8 → pool 4
        let x = self.conv1.forward(x)?.relu()?.max_pool2d(2)?;
        let x = self.conv2.forward(&x)?.relu()?.max_pool2d(2)?;
        self.fc2.forward(&self.fc1.forward(&x.flatten_from(1)?)?.relu()?)
    }
}

/// A new network trained for `steps` AdamW steps (learning rate 1e-3) on the `(x, y)` batches
/// `next` gives, the mean loss printed every 100 steps.
pub fn train(
    device: &Device,
    steps: u64,
    mut next: impl FnMut() -> Result<(Tensor, Tensor), BoxError>,
) -> Result<Net, BoxError> {
    let vars = VarMap::new();
    let net = Net::new(VarBuilder::from_varmap(&vars, DType::F32, device))?;
    let mut opt = candle_nn::AdamW::new_lr(vars.all_vars(), 1e-3)?;
    let start = Instant::now();
    let mut running = 0f32;
    for step in 0..steps {
        let (x, y) = next()?;
        let loss = candle_nn::loss::cross_entropy(&net.forward(&x)?, &y)?;
        opt.backward_step(&loss)?;
        running += loss.to_scalar::<f32>()?;
        if (step + 1) % 100 == 0 {
            println!("step {:5}  loss {:.4}  ({:.1?})", step + 1, running / 100.0, start.elapsed());
            running = 0.0;
        }
    }
    Ok(net)
}
