//! MNIST as candle-datasets' `vision::mnist` hands it out (same names, shapes and dtypes), read
//! from MNIST's IDX files through loaderx stores converted once and cached: switching candle's
//! `mnist-training` example is its `load` lines.

use std::path::Path;

use candle_core::{Device, Tensor};
use loaderx_core::DenseSource;
use loaderx_core::convert::{MnistSplit, cache_dir, mnist_dir, mnist_stores};

use crate::Result;

/// The four tensors of candle-datasets' `vision::Dataset`: images `f32` `[N, 784]` scaled to
/// `0..=1`, labels `u8` `[N]`, on the CPU.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// `[N, 784]`, `f32`, pixel / 255.
    pub train_images: Tensor,
    /// `[N]`, `u8`.
    pub train_labels: Tensor,
    /// `[M, 784]`, `f32`.
    pub test_images: Tensor,
    /// `[M]`, `u8`.
    pub test_labels: Tensor,
    /// Classes: 10.
    pub labels: usize,
}

/// MNIST from `$LOADERX_MNIST_DIR` or the first `data/mnist-10k` at or above the current
/// directory ([`loaderx_core::convert::mnist_dir`]), cached as loaderx stores on first use.
///
/// # Errors
/// Where the files were looked for; the conversion's errors naming the file.
pub fn load() -> Result<Dataset> {
    load_dir(mnist_dir()?)
}

/// MNIST from the IDX files (each `NAME` or `NAME.gz`) in `dir`.
///
/// # Errors
/// [`loaderx_core::Error::NotAStore`] naming `dir` for a missing file; the conversion's errors.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_candle as candle; }
/// let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k");
/// let m = loaderx::candle::mnist::load_dir(root)?;
/// assert_eq!(m.train_images.dims(), &[8000, 784]);
/// assert_eq!(m.test_labels.dims(), &[2000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load_dir(dir: impl AsRef<Path>) -> Result<Dataset> {
    let (train_images, train_labels) = split(dir.as_ref(), MnistSplit::Train)?;
    let (test_images, test_labels) = split(dir.as_ref(), MnistSplit::Test)?;
    Ok(Dataset { train_images, train_labels, test_images, test_labels, labels: 10 })
}

fn split(dir: &Path, which: MnistSplit) -> Result<(Tensor, Tensor)> {
    let (images, labels) = mnist_stores(dir, which, &cache_dir())?;
    let (images, labels) = (DenseSource::open(images)?, DenseSource::open(labels)?);
    let all: Vec<u32> = (0..images.len() as u32).collect();
    let pixels = images.get_batch(&all)?.into_vec::<u8>()?;
    let scaled = loaderx_core::scale_bytes_to_f32(&pixels, 1.0 / 255.0, 0.0);
    let n = all.len();
    let images = Tensor::from_vec(scaled, (n, 784), &Device::Cpu)?;
    let labels = Tensor::from_vec(labels.get_batch(&all)?.into_vec::<u8>()?, n, &Device::Cpu)?;
    Ok((images, labels))
}
