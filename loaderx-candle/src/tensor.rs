//! loaderx arrays and batches as candle tensors.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use loaderx_core::{ArrayData, Batch, DenseArray};

use crate::dtype::{Adoptable, adoptable};
use crate::{Error, Result, Widen};

/// Turns one loaderx array (one stream of a batch) into a tensor of the same shape on `device`.
///
/// On the CPU the array's buffer becomes the tensor's storage: the `Vec` is moved, not copied.
/// On a CUDA device the buffer is copied to the device once. A dtype candle lacks is converted as
/// `widen` says, or refused.
///
/// # Errors
/// [`Error::UnsupportedDType`], [`Error::UnsupportedTarget`] or [`Error::OutOfRange`] from the
/// widening; [`Error::Candle`] when the device allocation or copy fails.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_candle as candle; }
/// use loaderx::candle::{Widen, candle_core::Device, to_tensor};
/// use loaderx::DenseArray;
/// let array = DenseArray::from_vec(vec![2, 3], vec![0f32, 1., 2., 3., 4., 5.])?;
/// let t = to_tensor(array, &Device::Cpu, Widen::Never)?;
/// assert_eq!(t.dims(), &[2, 3]);
/// assert_eq!(t.to_vec2::<f32>()?[1], [3., 4., 5.]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_tensor(array: DenseArray, device: &Device, widen: Widen) -> Result<Tensor> {
    let (shape, data) = array.into_parts();
    tensor_from_parts(shape, data, device, widen)
}

/// A tensor of `shape` over `data`, as [`to_tensor`] makes it, for buffers not wrapped in a
/// [`DenseArray`]. The element count is checked before the buffer is adopted.
///
/// # Errors
/// [`Error::ShapeMismatch`] when the product of `shape` is not `data.len()`; the errors of
/// [`to_tensor`].
pub fn tensor_from_parts(
    shape: Vec<usize>,
    data: ArrayData,
    device: &Device,
    widen: Widen,
) -> Result<Tensor> {
    check_len(&shape, &data)?;
    // `from_vec` moves the Vec into CPU storage, or copies it host→device once.
    let t = match adoptable(data, widen)? {
        Adoptable::U8(v) => Tensor::from_vec(v, shape, device),
        Adoptable::U32(v) => Tensor::from_vec(v, shape, device),
        Adoptable::I16(v) => Tensor::from_vec(v, shape, device),
        Adoptable::I32(v) => Tensor::from_vec(v, shape, device),
        Adoptable::I64(v) => Tensor::from_vec(v, shape, device),
        Adoptable::F16(v) => Tensor::from_vec(v, shape, device),
        Adoptable::BF16(v) => Tensor::from_vec(v, shape, device),
        Adoptable::F32(v) => Tensor::from_vec(v, shape, device),
        Adoptable::F64(v) => Tensor::from_vec(v, shape, device),
    }?;
    Ok(t)
}

/// [`Error::ShapeMismatch`] unless `data` holds exactly the elements of `shape`.
fn check_len(shape: &[usize], data: &ArrayData) -> Result<()> {
    let needs = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if needs != Some(data.len()) {
        return Err(Error::ShapeMismatch { shape: shape.to_vec(), needs, len: data.len() });
    }
    Ok(())
}

/// One step's streams as tensors: what a [`CandleLoader`](crate::CandleLoader) yields by default.
///
/// Read through methods, as core's `Batch` and burn's `DenseBatch` are: `step()`, `indices()`,
/// `get(name)`, `take(name)`, `tensors()`.
#[derive(Debug, Clone)]
pub struct TensorBatch {
    step: u64,
    indices: Vec<u32>,
    tensors: HashMap<String, Tensor>,
}

impl TensorBatch {
    /// The global loader step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The record indices of the rows (this rank's stripe of the global batch).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Each stream by name, shaped `(B, *item_shape)`.
    pub fn tensors(&self) -> &HashMap<String, Tensor> {
        &self.tensors
    }

    /// The streams' tensors by name, taken out.
    pub fn into_tensors(self) -> HashMap<String, Tensor> {
        self.tensors
    }

    /// A batch of `tensors` at `step` for rows `indices` (the CUDA loader's).
    #[cfg(feature = "cuda")]
    pub(crate) fn from_parts(step: u64, indices: Vec<u32>, tensors: HashMap<String, Tensor>) -> Self {
        TensorBatch { step, indices, tensors }
    }

    /// The tensor of stream `name`.
    ///
    /// # Errors
    /// [`Error::MissingStream`] when there is no such stream.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| self.missing(name))
    }

    /// Takes the tensor of stream `name` out.
    ///
    /// # Errors
    /// [`Error::MissingStream`] when there is no such stream.
    pub fn take(&mut self, name: &str) -> Result<Tensor> {
        self.tensors.remove(name).ok_or_else(|| self.missing(name))
    }

    /// The same batch with every tensor on `device` (no copy for tensors already there).
    ///
    /// # Errors
    /// [`Error::Candle`] when a copy fails.
    pub fn to_device(self, device: &Device) -> Result<TensorBatch> {
        let tensors =
            self.tensors.into_iter().map(|(k, t)| Ok((k, t.to_device(device)?))).collect::<Result<_>>()?;
        Ok(TensorBatch { step: self.step, indices: self.indices, tensors })
    }

    fn missing(&self, name: &str) -> Error {
        let mut available: Vec<String> = self.tensors.keys().cloned().collect();
        available.sort_unstable();
        Error::MissingStream { name: name.to_string(), available }
    }
}

/// A device and a widening policy: turns loaderx arrays and batches into tensors.
///
/// Cheap to clone; a [`CandleLoader`](crate::CandleLoader) hands one to its transform on every
/// prefetch thread.
#[derive(Debug, Clone)]
pub struct Converter {
    device: Device,
    widen: Widen,
    /// Float streams converted to this dtype, when set.
    floats: Option<candle_core::DType>,
    /// Pinned buffers for CUDA devices, shared by the clones.
    #[cfg(feature = "cuda")]
    staging: crate::cuda::Staging,
}

impl Converter {
    /// Tensors on `device`; dtypes candle lacks are refused ([`Widen::Never`]).
    pub fn new(device: &Device) -> Converter {
        Converter {
            device: device.clone(),
            widen: Widen::Never,
            floats: None,
            #[cfg(feature = "cuda")]
            staging: crate::cuda::Staging::default(),
        }
    }

    /// Sets the policy for dtypes candle lacks.
    #[must_use]
    pub fn widen(mut self, widen: Widen) -> Converter {
        self.widen = widen;
        self
    }

    /// Converts every float stream (f16, bf16, f32, f64) to `dtype` (a float dtype): an `f64`
    /// stream (NumPy's default) then arrives as the model's `f32`. Without it a stream keeps its
    /// dtype, `f64` included (candle then fails in the first op that mixes it with `f32`). The
    /// conversion is one more pass over the batch, on the prefetch thread.
    #[must_use]
    pub fn floats_as(mut self, dtype: candle_core::DType) -> Converter {
        self.floats = Some(dtype);
        self
    }

    /// The policy for dtypes candle lacks.
    pub fn widening(&self) -> Widen {
        self.widen
    }

    /// The device tensors are made on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// [`to_tensor`] on this converter's device and policy.
    ///
    /// With the `cuda` feature, on a CUDA device, a non-empty buffer is copied into pinned host
    /// memory (a pool shared by this converter's clones) and to the device from there, the
    /// calling thread waiting for that transfer (not the thread that uses the tensor), instead of
    /// `to_tensor`'s copy from pageable memory.
    ///
    /// # Errors
    /// As [`to_tensor`].
    pub fn array(&self, array: DenseArray) -> Result<Tensor> {
        let t = self.array_as_is(array)?;
        match self.floats {
            Some(d) if t.dtype().is_float() && t.dtype() != d => Ok(t.to_dtype(d)?),
            _ => Ok(t),
        }
    }

    fn array_as_is(&self, array: DenseArray) -> Result<Tensor> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(device) = &self.device
            && !array.is_empty()
        {
            let (shape, data) = array.into_parts();
            check_len(&shape, &data)?;
            return self.staging.tensor(device, shape, adoptable(data, self.widen)?);
        }
        to_tensor(array, &self.device, self.widen)
    }

    /// Every stream of `streams` as a tensor.
    ///
    /// # Errors
    /// As [`to_tensor`], for the first stream that fails.
    pub fn streams(&self, streams: BTreeMap<String, DenseArray>) -> Result<HashMap<String, Tensor>> {
        streams.into_iter().map(|(name, a)| Ok((name, self.array(a)?))).collect()
    }

    /// Every stream of `batch` as a tensor, with its step and indices.
    ///
    /// # Errors
    /// As [`to_tensor`], for the first stream that fails.
    pub fn batch(&self, batch: Batch) -> Result<TensorBatch> {
        let step = batch.step();
        let indices = batch.indices().to_vec();
        let tensors = self.streams(batch.into_streams())?;
        Ok(TensorBatch { step, indices, tensors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_overflow_is_an_error() {
        let err =
            tensor_from_parts(vec![usize::MAX, 2], ArrayData::F32(vec![0.0; 4]), &Device::Cpu, Widen::Never)
                .unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { needs: None, len: 4, .. }), "{err}");
    }

    #[test]
    fn scalar_items_make_a_rank_one_batch() {
        let t =
            to_tensor(DenseArray::from_vec(vec![3], vec![7u8, 8, 9]).unwrap(), &Device::Cpu, Widen::Never)
                .unwrap();
        assert_eq!(t.dims(), &[3]);
        assert_eq!(t.to_vec1::<u8>().unwrap(), [7, 8, 9]);
    }
}
