//! `_native.Images`: an encoded image dataset with the transform its loader stream applies on
//! the prefetch threads (`loaderx.vision.ImageDataset` builds it from torchvision-like steps).

use loaderx_core::RaggedSource;
use loaderx_core::vision::{Crop, ImagePipeline};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// An encoded image dataset and its transform.
///
/// Threads (free-threaded audit): immutable after `__init__` (a source is `Sync`, the pipeline
/// plain data), as `Ragged`.
#[pyclass(module = "loaderx._native", frozen)]
pub struct Images {
    pub(crate) source: RaggedSource,
    pub(crate) pipeline: ImagePipeline,
}

/// A crop as Python hands it over: `("random_resized", size, scale_lo, scale_hi, ratio_lo,
/// ratio_hi)` or `("center", size, resize, 0, 0, 0)`.
type CropArgs = (String, u32, f32, f32, f32, f32);

/// The pipeline of these steps, checked.
fn pipeline(
    crop: CropArgs,
    flip: f32,
    normalize: Option<([f32; 3], [f32; 3])>,
    jitter: (f32, f32, f32),
    skip_bad: bool,
) -> PyResult<ImagePipeline> {
    let (kind, size, a, b, c, d) = crop;
    let crop = match kind.as_str() {
        "random_resized" => Crop::RandomResized { scale: (a, b), ratio: (c, d) },
        // `a` carries the resize of the shorter side.
        "center" => Crop::Center { resize: a as u32 },
        other => return Err(PyValueError::new_err(format!("unknown crop {other:?}"))),
    };
    let mut pipeline = ImagePipeline::new(size, size, crop)
        .flip(flip)
        .jitter(jitter.0, jitter.1, jitter.2)
        .skip_bad(skip_bad);
    if let Some((mean, std)) = normalize {
        pipeline = pipeline.normalize(mean, std);
    }
    pipeline.check().map_err(PyValueError::new_err)?;
    Ok(pipeline)
}

impl Images {
    /// `source`'s records, which must be bytes (one encoded image each), with `pipeline`.
    fn with(source: RaggedSource, pipeline: ImagePipeline) -> PyResult<Self> {
        if source.dtype() != loaderx_core::DType::U8 || !source.row_shape().is_empty() {
            return Err(PyValueError::new_err(format!(
                "{}: records of {} rows of shape {:?}, not encoded images",
                source.path().display(),
                source.dtype(),
                source.row_shape()
            )));
        }
        Ok(Images { source, pipeline })
    }
}

/// The image folder `root` (one subdirectory per class, torchvision's ImageFolder layout) read
/// into memory with no conversion: each file's bytes a record (class order, then file name
/// order), its class index a `u32` label, the class names by label and each record's file. Nothing is decoded
/// here; a folder of more than 4 GiB of files is refused (convert it).
#[pyfunction]
pub fn image_folder(py: Python<'_>, root: std::path::PathBuf) -> PyResult<Folder> {
    let folder = crate::fork::detach(py, || loaderx_core::convert::image_folder(&root))?.py()?;
    Ok((
        crate::dataset::Ragged { source: folder.images },
        crate::dataset::Dense { source: folder.labels },
        folder.classes,
        folder.files,
    ))
}

/// What `image_folder` hands Python: the images, the labels, the class names, each record's file.
type Folder = (crate::dataset::Ragged, crate::dataset::Dense, Vec<String>, Vec<std::path::PathBuf>);

#[pymethods]
impl Images {
    /// The images at `path` with the steps `crop` (`("random_resized", size, scale_lo,
    /// scale_hi, ratio_lo, ratio_hi)` or `("center", size, resize)`), `flip` (a probability),
    /// `normalize` (`(mean, std)` or None), `jitter` (brightness, contrast, saturation) and
    /// `skip_bad` (images that do not decode left out as zeros, marked in `{name}_ok`).
    #[new]
    #[pyo3(signature = (path, crop, flip, normalize = None, jitter = (0.0, 0.0, 0.0), skip_bad = false))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        crop: CropArgs,
        flip: f32,
        normalize: Option<([f32; 3], [f32; 3])>,
        jitter: (f32, f32, f32),
        skip_bad: bool,
    ) -> PyResult<Self> {
        let pipeline = pipeline(crop, flip, normalize, jitter, skip_bad)?;
        let source = crate::fork::detach(py, || RaggedSource::open(&path))?.py()?;
        Images::with(source, pipeline)
    }

    /// The encoded images of `ragged` (what `image_folder` read) with these steps, as `new`.
    #[staticmethod]
    #[pyo3(signature = (ragged, crop, flip, normalize = None, jitter = (0.0, 0.0, 0.0), skip_bad = false))]
    fn from_ragged(
        ragged: PyRef<'_, crate::dataset::Ragged>,
        crop: CropArgs,
        flip: f32,
        normalize: Option<([f32; 3], [f32; 3])>,
        jitter: (f32, f32, f32),
        skip_bad: bool,
    ) -> PyResult<Self> {
        Images::with(ragged.source.clone(), pipeline(crop, flip, normalize, jitter, skip_bad)?)
    }

    fn __len__(&self) -> usize {
        self.source.len()
    }

    /// The dtype name of a batch's images: `f32` when normalised, else `u8`.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.pipeline.dtype().name()
    }

    /// The shape of one image of a batch: `(3, H, W)` when normalised, else `(H, W, 3)`.
    #[getter]
    fn item_shape(&self) -> Vec<usize> {
        self.pipeline.item_shape()
    }

    /// The dataset's directory.
    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.source.path().to_path_buf()
    }
}
