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
        path: String,
        crop: (String, u32, f32, f32, f32, f32),
        flip: f32,
        normalize: Option<([f32; 3], [f32; 3])>,
        jitter: (f32, f32, f32),
        skip_bad: bool,
    ) -> PyResult<Self> {
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
        let source = crate::fork::detach(py, || RaggedSource::open(&path))?.py()?;
        if source.dtype() != loaderx_core::DType::U8 || !source.row_shape().is_empty() {
            return Err(PyValueError::new_err(format!(
                "{path}: records of {} rows of shape {:?}, not encoded images",
                source.dtype(),
                source.row_shape()
            )));
        }
        Ok(Images { source, pipeline })
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
