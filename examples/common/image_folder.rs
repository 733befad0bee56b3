//! The image-folder examples' data, shared by `image_folder_burn` and `image_folder_candle`
//! (`#[path]` modules): the bundled MNIST digits written out once as PNG files in the layout
//! torchvision's `ImageFolder` reads, each folder converted into an encoded image store, and the
//! two image pipelines.

use std::path::{Path, PathBuf};

use loaderx::convert::{EncodedOptions, MnistSplit, cache_dir, encoded_images, mnist_stores};
use loaderx::vision::{Crop, ImagePipeline};
use loaderx::{DenseSource, RaggedSource, WriteOptions};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A split's encoded images and their labels.
pub type Stores = (RaggedSource, DenseSource);

/// MNIST's pixel mean and standard deviation on the 0..1 scale (the burn book's).
const MEAN: f32 = 0.1307;
const STD: f32 = 0.3081;

/// Training's transform: a random box of 85-100% of the digit's area (its aspect within
/// 0.9-1.1) resized back to 28 x 28, then normalised, `f32` `[3, 28, 28]`.
pub fn augment() -> ImagePipeline {
    ImagePipeline::new(28, 28, Crop::RandomResized { scale: (0.85, 1.0), ratio: (0.9, 1.1) })
        .normalize([MEAN; 3], [STD; 3])
}

/// Evaluation's transform: decoded and normalised only.
pub fn plain() -> ImagePipeline {
    ImagePipeline::new(28, 28, Crop::Center { resize: 28 }).normalize([MEAN; 3], [STD; 3])
}

/// The train and test splits as encoded image stores, written and converted on the first run
/// (in the loaderx cache) and reused afterwards.
pub fn digit_stores() -> Result<(Stores, Stores), BoxError> {
    let root = cache_dir().join("mnist-10k-png");
    std::fs::create_dir_all(&root)?;
    let train = image_folder(MnistSplit::Train, "train", &root)?;
    let test = image_folder(MnistSplit::Test, "test", &root)?;
    Ok((encoded_store(&train, &root.join("train-store"))?, encoded_store(&test, &root.join("test-store"))?))
}

/// Writes the bundled digits of `split` as `DIR/<digit>/<index>.png` (once: an existing folder
/// is kept), staged beside it and renamed into place whole.
pub fn image_folder(split: MnistSplit, name: &str, root: &Path) -> Result<PathBuf, BoxError> {
    let dir = root.join(name);
    if dir.is_dir() {
        return Ok(dir);
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k");
    let (images, labels) = mnist_stores(&data, split, &cache_dir())?;
    let (images, labels) = (DenseSource::open(images)?, DenseSource::open(labels)?.typed::<u8>()?);
    let all: Vec<u32> = (0..images.len() as u32).collect();
    let mut pixels = vec![0u8; all.len() * 28 * 28];
    images.gather_bytes(&all, &mut pixels)?;
    let labels = labels.get_vec(&all)?;
    let staging = root.join(format!(".{name}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    for (i, (digit, image)) in labels.iter().zip(pixels.chunks_exact(28 * 28)).enumerate() {
        let class = staging.join(digit.to_string());
        std::fs::create_dir_all(&class)?;
        image::GrayImage::from_raw(28, 28, image.to_vec())
            .ok_or("a digit of other than 28 x 28 pixels")?
            .save_with_format(class.join(format!("{i:05}.png")), image::ImageFormat::Png)?;
    }
    std::fs::rename(&staging, &dir)?;
    Ok(dir)
}

/// The encoded image store of the folder `dir` (converted once), as `loaderx convert images DIR
/// OUT --encoded` writes it: `OUT/images` and `OUT/labels`.
pub fn encoded_store(dir: &Path, out: &Path) -> Result<Stores, BoxError> {
    if !out.is_dir() {
        let summary = encoded_images(dir, out, EncodedOptions::default(), WriteOptions::default())?;
        println!(
            "converted {}: {} images, {} classes, {:.1} MiB of PNG kept as they are",
            dir.display(),
            summary.images.records,
            summary.classes.len(),
            summary.images.bytes_in as f64 / (1 << 20) as f64
        );
    }
    Ok((RaggedSource::open(out.join("images"))?, DenseSource::open(out.join("labels"))?))
}
