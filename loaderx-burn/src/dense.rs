//! The dense fast path: a batch's streams as burn `TensorData` adopting the gathered buffers.

use std::collections::BTreeMap;

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use loaderx_core::{ArrayData, Batch, DenseArray};

use crate::{Error, Result};

/// Wraps a loaderx array as burn `TensorData` of the same element type and shape, taking its
/// `Vec` without a copy.
///
/// # Errors
/// [`Error::InvalidArgument`] for a dtype burn has no element type for (none today; the enum
/// is non-exhaustive).
pub fn tensor_data(array: DenseArray) -> Result<TensorData> {
    let (shape, data) = array.into_parts();
    Ok(match data {
        ArrayData::U8(v) => TensorData::new(v, shape),
        ArrayData::I8(v) => TensorData::new(v, shape),
        ArrayData::U16(v) => TensorData::new(v, shape),
        ArrayData::I16(v) => TensorData::new(v, shape),
        ArrayData::U32(v) => TensorData::new(v, shape),
        ArrayData::I32(v) => TensorData::new(v, shape),
        ArrayData::U64(v) => TensorData::new(v, shape),
        ArrayData::I64(v) => TensorData::new(v, shape),
        ArrayData::F16(v) => TensorData::new(v, shape),
        ArrayData::BF16(v) => TensorData::new(v, shape),
        ArrayData::F32(v) => TensorData::new(v, shape),
        ArrayData::F64(v) => TensorData::new(v, shape),
        ArrayData::Bool(v) => TensorData::new(v, shape),
        other => {
            return Err(Error::InvalidArgument(format!("burn has no element type for {}", other.dtype())));
        }
    })
}

/// One step of a dense [`StepLoader`](crate::StepLoader): every stream as `TensorData` shaped
/// `(B, *item_shape)` in the stream's stored element type, built on the prefetch thread straight
/// from the gathered buffer.
///
/// [`float`](Self::float), [`int`](Self::int) and [`bool`](Self::bool) take a stream out as a
/// tensor on the batch's device, in that device's default float, int or bool dtype.
#[derive(Debug, Clone)]
pub struct DenseBatch {
    step: u64,
    indices: Vec<u32>,
    streams: BTreeMap<String, TensorData>,
    device: Device,
}

impl DenseBatch {
    /// Converts a loaderx batch, adopting every stream's buffer.
    ///
    /// # Errors
    /// As [`tensor_data`].
    pub fn from_batch(batch: Batch, device: &Device) -> Result<DenseBatch> {
        let step = batch.step();
        let indices = batch.indices().to_vec();
        let streams = batch
            .into_streams()
            .into_iter()
            .map(|(name, array)| Ok((name, tensor_data(array)?)))
            .collect::<Result<_>>()?;
        Ok(DenseBatch { step, indices, streams, device: device.clone() })
    }

    /// The global step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The record indices of the rows.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True for a batch of no rows (never produced by a loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The device tensors are built on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Stream names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.streams.keys().map(String::as_str)
    }

    /// The stream `name`.
    pub fn get(&self, name: &str) -> Option<&TensorData> {
        self.streams.get(name)
    }

    /// Takes the stream `name` out.
    pub fn take(&mut self, name: &str) -> Option<TensorData> {
        self.streams.remove(name)
    }

    fn take_rank<const D: usize>(&mut self, name: &str) -> Result<TensorData> {
        let Some(data) = self.streams.remove(name) else {
            return Err(Error::Stream {
                name: name.to_string(),
                reason: format!("no such stream in the batch; it has {}", listed(self.names())),
            });
        };
        if data.shape().len() != D {
            let reason =
                format!("has rank {} (shape {:?}), asked for rank {D}", data.shape().len(), data.shape());
            self.streams.insert(name.to_string(), data);
            return Err(Error::Stream { name: name.to_string(), reason });
        }
        Ok(data)
    }

    /// Takes stream `name` out as a float tensor of rank `D` (batch axis first). The values are
    /// converted to the backend's float type, whatever the stream's dtype (an `f64` stream,
    /// NumPy's default, becomes `f32` on an `f32` backend, silently, as burn's `from_data` does).
    ///
    /// # Errors
    /// [`Error::Stream`] when there is no such stream or its rank is not `D`.
    pub fn float<const D: usize>(&mut self, name: &str) -> Result<Tensor<D>> {
        Ok(Tensor::from_data(self.take_rank::<D>(name)?, &self.device))
    }

    /// Takes stream `name` out as an int tensor of rank `D`. A stream of floats is refused
    /// (labels stored as `f32` would be truncated without a word): ask for the cast with
    /// [`DenseBatch::int_from_float`].
    ///
    /// # Errors
    /// As [`DenseBatch::float`]; [`Error::Stream`] for a stream of floats (left in the batch).
    pub fn int<const D: usize>(&mut self, name: &str) -> Result<Tensor<D, Int>> {
        if let Some(data) = self.streams.get(name)
            && data.dtype().is_float()
        {
            return Err(Error::Stream {
                name: name.to_string(),
                reason: format!(
                    "holds {} values, which int() would truncate: use int_from_float to ask for the cast, \
                     or store the stream as integers",
                    // burn's dtype spelt as loaderx's (`f32`, not `F32`), as the typed batches' errors do.
                    format!("{:?}", data.dtype()).to_lowercase()
                ),
            });
        }
        Ok(Tensor::from_data(self.take_rank::<D>(name)?, &self.device))
    }

    /// Takes stream `name` out as an int tensor of rank `D`, a stream of floats cast toward zero
    /// (burn's conversion), as asked.
    ///
    /// # Errors
    /// As [`DenseBatch::float`].
    pub fn int_from_float<const D: usize>(&mut self, name: &str) -> Result<Tensor<D, Int>> {
        Ok(Tensor::from_data(self.take_rank::<D>(name)?, &self.device))
    }

    /// Takes stream `name` out as a bool tensor of rank `D`.
    ///
    /// # Errors
    /// As [`DenseBatch::float`].
    pub fn bool<const D: usize>(&mut self, name: &str) -> Result<Tensor<D, Bool>> {
        Ok(Tensor::from_data(self.take_rank::<D>(name)?, &self.device))
    }
}

/// `"a", "b"` (or `no streams`), for an error naming what there is.
pub(crate) fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("{n:?}")).collect();
    if names.is_empty() { "no streams".into() } else { names.join(", ") }
}
