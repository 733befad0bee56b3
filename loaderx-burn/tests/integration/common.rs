//! Shared fixtures: small generated datasets and the bundled MNIST subset as stores.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::Device;
use loaderx_core::{DatasetWriter, WriteOptions};

/// The bundled MNIST subset (8,000 train / 2,000 test digits, IDX gzip).
pub fn mnist_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k")
}

/// The bundled train split as (images, labels) stores, converted on first use into the target
/// directory's test scratch space and reused by later runs.
pub fn mnist_train() -> &'static (PathBuf, PathBuf) {
    static STORES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    STORES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("loaderx-burn-mnist-train");
        let (images, labels) = (dir.join("images"), dir.join("labels"));
        let ready = loaderx_core::DenseSource::open(&images).is_ok_and(|s| s.len() == 8000)
            && loaderx_core::DenseSource::open(&labels).is_ok_and(|s| s.len() == 8000);
        if !ready {
            std::fs::create_dir_all(&dir).unwrap();
            let opts = WriteOptions::new().overwrite(true);
            loaderx_core::convert::idx(mnist_dir().join("train-images-idx3-ubyte.gz"), &images, opts.clone())
                .unwrap();
            loaderx_core::convert::idx(mnist_dir().join("train-labels-idx1-ubyte.gz"), &labels, opts)
                .unwrap();
        }
        (images, labels)
    })
}

/// Writes `n` records: stream `x` (f32 `[3]`, record `i` is `[i, i + 0.5, -i]`) and stream `y`
/// (u8 scalar `i % 251`), into `dir/x` and `dir/y`.
pub fn write_xy(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let (x, y) = (dir.join("x"), dir.join("y"));
    let mut w = DatasetWriter::dense::<f32>(&x, vec![3], WriteOptions::new()).unwrap();
    let data: Vec<f32> = (0..n).flat_map(|i| [i as f32, i as f32 + 0.5, -(i as f32)]).collect();
    w.append(&data).unwrap();
    w.finish().unwrap();
    let mut w = DatasetWriter::dense::<u8>(&y, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..n).map(|i| (i % 251) as u8).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    (x, y)
}

/// A batcher that hands the items back unchanged (burn's `TestBatcher` is test-only in burn).
#[derive(Debug, Clone, Copy)]
pub struct Items;

impl<I: Send + Sync> Batcher<I, Vec<I>> for Items {
    fn batch(&self, items: Vec<I>, _device: &Device) -> Vec<I> {
        items
    }
}

/// The CPU device of the tests.
pub fn device() -> Device {
    Device::flex()
}
