//! A short training run from loader batches lowers the loss.

use candle_nn::{Module, Optimizer, VarBuilder, VarMap};
use loaderx_candle::candle_core::{DType, Device, Tensor};
use loaderx_candle::{CandleLoader, Converter, Error};
use loaderx_core::DataLoader;

use crate::common::write_dense;

#[test]
fn a_few_steps_of_a_tiny_model_lower_the_loss() {
    // Two linearly separable classes: label = (a + b > 0), points on a fixed grid.
    let dir = tempfile::tempdir().unwrap();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..512u32 {
        let a = ((i * 37) % 101) as f32 / 50.0 - 1.0;
        let b = ((i * 59) % 97) as f32 / 48.0 - 1.0;
        x.extend([a, b]);
        y.push(u8::from(a + b > 0.0));
    }
    let xp = write_dense(dir.path(), "x", vec![2], &x);
    let yp = write_dense(dir.path(), "y", vec![], &y);
    let builder = DataLoader::builder().open_stream("x", xp).open_stream("y", yp).batch_size(64).seed(5);
    let mut loader = CandleLoader::build_with(builder, Converter::new(&Device::Cpu), |mut b, conv| {
        let x = conv.array(b.take("x").unwrap())?;
        let y = conv.array(b.take("y").unwrap())?.to_dtype(DType::U32)?;
        Ok::<(Tensor, Tensor), Error>((x, y))
    })
    .unwrap();

    let vars = VarMap::new();
    let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
    let model = candle_nn::linear(2, 2, vb.pp("fc")).unwrap();
    // Zero weights: the run is deterministic and starts at loss ln 2.
    for v in vars.all_vars() {
        v.set(&v.zeros_like().unwrap()).unwrap();
    }
    let mut opt = candle_nn::SGD::new(vars.all_vars(), 0.5).unwrap();
    let mut losses = Vec::new();
    for _ in 0..40 {
        let (x, y) = loader.next_batch().unwrap().unwrap();
        let loss = candle_nn::loss::cross_entropy(&model.forward(&x).unwrap(), &y).unwrap();
        opt.backward_step(&loss).unwrap();
        losses.push(loss.to_scalar::<f32>().unwrap());
    }
    let head: f32 = losses[..5].iter().sum::<f32>() / 5.0;
    let tail: f32 = losses[35..].iter().sum::<f32>() / 5.0;
    assert!(tail < 0.6 * head, "loss did not fall: first {head}, last {tail} ({losses:?})");
}
