//! A drop-in for the burn book's MNIST guide: its item, batch and batcher, fed from loaderx
//! stores.

use std::path::Path;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::{Device, Int, Tensor, TensorData};
use loaderx_core::convert::MnistSplit;
use loaderx_core::{Batch, DenseDataset};
use serde::{Deserialize, Serialize};

use crate::dataset::check_indices;
use crate::{Error, Result, StepLoader, StepLoaderBuilder};

/// Image side in pixels.
pub const MNIST_SIDE: usize = 28;
/// Mean of the MNIST training pixels scaled to [0, 1] (the guide's normalisation).
pub const MNIST_MEAN: f32 = 0.1307;
/// Standard deviation of the MNIST training pixels scaled to [0, 1].
pub const MNIST_STD: f32 = 0.3081;

/// One MNIST digit as burn's `MnistDataset` hands it out: pixels 0..=255 as `f32`, and the label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MnistItem {
    /// The 28×28 image, row-major, values 0.0..=255.0.
    pub image: [[f32; MNIST_SIDE]; MNIST_SIDE],
    /// The digit, 0..=9.
    pub label: u8,
}

/// The guide's batch: normalised images and their labels, on one device.
#[derive(Debug, Clone)]
pub struct MnistBatch {
    /// `[B, 28, 28]`, `(x / 255 - 0.1307) / 0.3081`.
    pub images: Tensor<3>,
    /// `[B]`, the digits.
    pub targets: Tensor<1, Int>,
}

/// `1 / (255 * std)` and `-mean / std`: the guide's `(x / 255 - mean) / std` as one multiply-add.
const SCALE: f32 = 1.0 / (255.0 * MNIST_STD);
const OFFSET: f32 = -MNIST_MEAN / MNIST_STD;

/// Normalises 0..=255 pixels the guide's way, as one multiply-add per pixel, vectorised (the two
/// divisions of the formula cost more than the rest of the loader's per-batch work). The result
/// is within 2 ulp of the formula's (the guide's batcher itself rounds differently on other
/// backends).
fn normalise(pixels: &[u8]) -> Vec<f32> {
    loaderx_core::scale_bytes_to_f32(pixels, SCALE, OFFSET)
}

impl MnistBatch {
    /// Builds the batch from a loaderx batch of streams `image` (`u8` `[28, 28]`) and `label`
    /// (`u8` scalars): one normalisation pass into one buffer per batch, then one tensor each.
    ///
    /// # Errors
    /// [`Error::Stream`] when a stream is missing or has another dtype or item shape.
    pub fn from_batch(batch: Batch, device: &Device) -> Result<MnistBatch> {
        // Borrowed, not taken: dropping the batch hands its byte buffers back to the loader.
        let bytes = |name: &str, item_shape: &[usize]| -> Result<&[u8]> {
            let array = batch.get(name).ok_or_else(|| Error::Stream {
                name: name.into(),
                reason: format!(
                    "no such stream in the batch; it has {}",
                    crate::dense::listed(batch.names())
                ),
            })?;
            if array.shape().get(1..) != Some(item_shape) {
                return Err(Error::Stream {
                    name: name.into(),
                    reason: format!("items are shaped {:?}, expected {item_shape:?}", &array.shape()[1..]),
                });
            }
            array.as_slice::<u8>().map_err(|e| Error::Stream { name: name.into(), reason: e.to_string() })
        };
        let pixels = bytes("image", &[MNIST_SIDE, MNIST_SIDE])?;
        let labels = bytes("label", &[])?;
        let b = labels.len();
        let images = TensorData::new(normalise(pixels), [b, MNIST_SIDE, MNIST_SIDE]);
        let targets = TensorData::new(labels.iter().map(|&l| i64::from(l)).collect::<Vec<_>>(), [b]);
        Ok(MnistBatch {
            images: Tensor::from_data(images, device),
            targets: Tensor::from_data(targets, device),
        })
    }
}

/// The burn guide's MNIST batcher, item by item, for burn's own `DataLoaderBuilder`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MnistBatcher;

impl Batcher<MnistItem, MnistBatch> for MnistBatcher {
    fn batch(&self, items: Vec<MnistItem>, device: &Device) -> MnistBatch {
        let images = items
            .iter()
            .map(|item| TensorData::new(item.image.as_flattened().to_vec(), [MNIST_SIDE, MNIST_SIDE]))
            .map(|data| Tensor::<2>::from_data(data, device))
            .map(|tensor| tensor.reshape([1, MNIST_SIDE, MNIST_SIDE]))
            .map(|tensor| ((tensor / 255) - MNIST_MEAN) / MNIST_STD)
            .collect();
        let targets = items
            .iter()
            .map(|item| {
                Tensor::<1, Int>::from_data(TensorData::new(vec![i64::from(item.label)], [1]), device)
            })
            .collect();
        MnistBatch { images: Tensor::cat(images, 0), targets: Tensor::cat(targets, 0) }
    }
}

/// MNIST from two dense loaderx stores (images `u8` `[28, 28]`, labels `u8` scalars) as a burn
/// [`Dataset`] of [`MnistItem`]s, a stand-in for burn's `MnistDataset`. `get_many` is one gather
/// per store.
#[derive(Debug, Clone)]
pub struct MnistItems {
    images: DenseDataset<u8>,
    labels: DenseDataset<u8>,
}

impl MnistItems {
    /// Opens the image and label stores.
    ///
    /// # Errors
    /// [`Error::Core`] when either is not a dense `u8` dataset; [`Error::InvalidArgument`] when
    /// the shapes are not `[28, 28]` and `[]` or the lengths differ.
    pub fn open(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Self> {
        let images = DenseDataset::<u8>::open(images)?;
        let labels = DenseDataset::<u8>::open(labels)?;
        if images.item_shape() != [MNIST_SIDE, MNIST_SIDE] || !labels.item_shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "MNIST needs [28, 28] images and scalar labels, got {:?} and {:?}",
                images.item_shape(),
                labels.item_shape()
            )));
        }
        if images.len() != labels.len() {
            return Err(Error::InvalidArgument(format!(
                "{} images but {} labels",
                images.len(),
                labels.len()
            )));
        }
        Ok(MnistItems { images, labels })
    }

    fn gather(&self, indices: &[u32]) -> Result<Vec<MnistItem>> {
        let pixels = self.images.get_vec(indices)?;
        let labels = self.labels.get_vec(indices)?;
        Ok(pixels
            .chunks_exact(MNIST_SIDE * MNIST_SIDE)
            .zip(labels)
            .map(|(px, label)| {
                let mut image = [[0f32; MNIST_SIDE]; MNIST_SIDE];
                for (dst, &src) in image.as_flattened_mut().iter_mut().zip(px) {
                    *dst = f32::from(src);
                }
                MnistItem { image, label }
            })
            .collect())
    }
}

impl Dataset<MnistItem> for MnistItems {
    fn get(&self, index: usize) -> Result<MnistItem, DatasetError> {
        let idx = check_indices("MnistItems", &[index], self.len());
        let mut items = self.gather(&idx).map_err(Error::into_dataset_error)?;
        Ok(items.pop().expect("one index gives one item"))
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<MnistItem>, DatasetError> {
        let idx = check_indices("MnistItems", &indexes, self.len());
        self.gather(&idx).map_err(Error::into_dataset_error)
    }

    fn len(&self) -> usize {
        self.labels.len()
    }
}

/// burn's `MnistDataset`, same names, from MNIST's IDX files in a directory instead of a
/// download: converted into loaderx stores on first use and cached, then read with one gather
/// per batch ([`MnistItems`]).
///
/// The directory is `$LOADERX_MNIST_DIR`, else the first `data/mnist-10k` found in the current
/// directory or above it (this repository bundles 10,000 digits there); each file is read as
/// `NAME` or `NAME.gz`. The cache is `$LOADERX_CACHE_DIR`, else `$XDG_CACHE_HOME/loaderx`, else
/// `~/.cache/loaderx`, else the system temporary directory; a cached copy is keyed by the IDX
/// files' paths, sizes and modification times, so changed files are converted again.
#[derive(Debug, Clone)]
pub struct MnistDataset {
    items: MnistItems,
}

impl MnistDataset {
    /// The training digits.
    ///
    /// # Panics
    /// When the IDX files cannot be found or read, as burn's `MnistDataset::train` panics when
    /// it cannot download them; [`MnistDataset::try_train`] returns the error instead.
    pub fn train() -> Self {
        Self::try_train().unwrap_or_else(|e| panic!("MnistDataset::train: {e}"))
    }

    /// The test digits.
    ///
    /// # Panics
    /// As [`MnistDataset::train`]; [`MnistDataset::try_test`] returns the error instead.
    pub fn test() -> Self {
        Self::try_test().unwrap_or_else(|e| panic!("MnistDataset::test: {e}"))
    }

    /// [`MnistDataset::train`], the failure as an error.
    ///
    /// # Errors
    /// [`Error::Core`] naming where the files were looked for, or the conversion's errors naming
    /// the file.
    pub fn try_train() -> Result<Self> {
        Self::from_idx_dir(loaderx_core::convert::mnist_dir()?, MnistSplit::Train)
    }

    /// [`MnistDataset::test`], the failure as an error.
    ///
    /// # Errors
    /// As [`MnistDataset::try_train`].
    pub fn try_test() -> Result<Self> {
        Self::from_idx_dir(loaderx_core::convert::mnist_dir()?, MnistSplit::Test)
    }

    /// One split from the IDX files in `dir`, converted and cached on first use.
    ///
    /// # Errors
    /// As [`MnistDataset::try_train`].
    pub fn from_idx_dir(dir: impl AsRef<Path>, split: MnistSplit) -> Result<Self> {
        Self::cached_in(dir, split, loaderx_core::convert::cache_dir())
    }

    /// [`MnistDataset::from_idx_dir`] with the cache in `cache`.
    ///
    /// # Errors
    /// As [`MnistDataset::try_train`].
    pub fn cached_in(dir: impl AsRef<Path>, split: MnistSplit, cache: impl AsRef<Path>) -> Result<Self> {
        let (images, labels) = loaderx_core::convert::mnist_stores(dir.as_ref(), split, cache.as_ref())?;
        Ok(MnistDataset { items: MnistItems::open(&images, &labels)? })
    }

    /// The items, as a loaderx dataset.
    pub fn items(&self) -> &MnistItems {
        &self.items
    }
}

impl Dataset<MnistItem> for MnistDataset {
    fn get(&self, index: usize) -> Result<MnistItem, DatasetError> {
        self.items.get(index)
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<MnistItem>, DatasetError> {
        self.items.get_many(indexes)
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

impl StepLoaderBuilder {
    /// Opens MNIST image and label stores as the streams `image` and `label`.
    ///
    /// # Errors
    /// `build_*` reports [`Error::Core`] when either directory holds no dense dataset.
    pub fn mnist(self, images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Self {
        self.open_stream("image", images).open_stream("label", labels)
    }

    /// A loader of the guide's [`MnistBatch`]es from the streams `image` and `label`, built on
    /// the prefetch threads.
    ///
    /// # Errors
    /// As [`StepLoaderBuilder::build_with`].
    pub fn build_mnist(self) -> Result<StepLoader<MnistBatch>> {
        self.build_with(MnistBatch::from_batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_is_the_guides_formula() {
        let all: Vec<u8> = (0..=255).collect();
        for (p, got) in all.iter().zip(normalise(&all)) {
            let formula = (f32::from(*p) / 255.0 - MNIST_MEAN) / MNIST_STD;
            assert!((got - formula).abs() <= 2.0 * f32::EPSILON * formula.abs().max(1.0), "pixel {p}");
        }
    }
}
