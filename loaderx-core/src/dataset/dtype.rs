//! Element types a dataset can hold, and the typed arrays a batch is made of.

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The element type of a dataset, recorded in its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DType {
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `u16`
    U16,
    /// `i16`
    I16,
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `u64`
    U64,
    /// `i64`
    I64,
    /// IEEE half precision (`half::f16`)
    F16,
    /// bfloat16 (`half::bf16`)
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `bool`, stored as one byte that is 0 or 1
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Bool,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The lowercase name used in schemas and on the command line (`"f32"`, `"bool"`...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bool => "bool",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The storage of a [`DenseArray`]: one typed `Vec` per dtype.
///
/// Holding the final element type (rather than bytes) is what lets an adapter hand the `Vec` to a
/// tensor constructor that adopts it without a copy.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum ArrayData {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
}

macro_rules! each_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            ArrayData::U8($v) => $body,
            ArrayData::I8($v) => $body,
            ArrayData::U16($v) => $body,
            ArrayData::I16($v) => $body,
            ArrayData::U32($v) => $body,
            ArrayData::I32($v) => $body,
            ArrayData::U64($v) => $body,
            ArrayData::I64($v) => $body,
            ArrayData::F16($v) => $body,
            ArrayData::BF16($v) => $body,
            ArrayData::F32($v) => $body,
            ArrayData::F64($v) => $body,
            ArrayData::Bool($v) => $body,
        }
    };
}

impl ArrayData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            ArrayData::U8(_) => DType::U8,
            ArrayData::I8(_) => DType::I8,
            ArrayData::U16(_) => DType::U16,
            ArrayData::I16(_) => DType::I16,
            ArrayData::U32(_) => DType::U32,
            ArrayData::I32(_) => DType::I32,
            ArrayData::U64(_) => DType::U64,
            ArrayData::I64(_) => DType::I64,
            ArrayData::F16(_) => DType::F16,
            ArrayData::BF16(_) => DType::BF16,
            ArrayData::F32(_) => DType::F32,
            ArrayData::F64(_) => DType::F64,
            ArrayData::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_variant!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as native-endian bytes.
    pub fn as_bytes(&self) -> &[u8] {
        each_variant!(self, v => bytemuck::cast_slice(v.as_slice()))
    }

    /// Removes the first `n` elements (moving the rest to the front).
    pub(crate) fn drop_front(&mut self, n: usize) {
        each_variant!(self, v => drop(v.drain(..n)))
    }

    /// A zero-filled array of `len` elements of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> ArrayData {
        match dtype {
            DType::U8 => ArrayData::U8(vec![0; len]),
            DType::I8 => ArrayData::I8(vec![0; len]),
            DType::U16 => ArrayData::U16(vec![0; len]),
            DType::I16 => ArrayData::I16(vec![0; len]),
            DType::U32 => ArrayData::U32(vec![0; len]),
            DType::I32 => ArrayData::I32(vec![0; len]),
            DType::U64 => ArrayData::U64(vec![0; len]),
            DType::I64 => ArrayData::I64(vec![0; len]),
            DType::F16 => ArrayData::F16(vec![f16::ZERO; len]),
            DType::BF16 => ArrayData::BF16(vec![bf16::ZERO; len]),
            DType::F32 => ArrayData::F32(vec![0.0; len]),
            DType::F64 => ArrayData::F64(vec![0.0; len]),
            DType::Bool => ArrayData::Bool(vec![false; len]),
        }
    }

    /// [`ArrayData::zeros`], or `None` when the allocator cannot give `len` elements (an
    /// allocation sized by a caller's number fails as an error, never an abort).
    pub fn try_zeros(dtype: DType, len: usize) -> Option<ArrayData> {
        fn vec<T: Clone>(len: usize, zero: T) -> Option<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).ok()?;
            v.resize(len, zero);
            Some(v)
        }
        Some(match dtype {
            DType::U8 => ArrayData::U8(vec(len, 0)?),
            DType::I8 => ArrayData::I8(vec(len, 0)?),
            DType::U16 => ArrayData::U16(vec(len, 0)?),
            DType::I16 => ArrayData::I16(vec(len, 0)?),
            DType::U32 => ArrayData::U32(vec(len, 0)?),
            DType::I32 => ArrayData::I32(vec(len, 0)?),
            DType::U64 => ArrayData::U64(vec(len, 0)?),
            DType::I64 => ArrayData::I64(vec(len, 0)?),
            DType::F16 => ArrayData::F16(vec(len, f16::ZERO)?),
            DType::BF16 => ArrayData::BF16(vec(len, bf16::ZERO)?),
            DType::F32 => ArrayData::F32(vec(len, 0.0)?),
            DType::F64 => ArrayData::F64(vec(len, 0.0)?),
            DType::Bool => ArrayData::Bool(vec(len, false)?),
        })
    }

    /// Resizes to `len` elements (zero-filling growth) keeping the allocation where it fits.
    pub fn resize(&mut self, len: usize) {
        match self {
            ArrayData::F16(v) => v.resize(len, f16::ZERO),
            ArrayData::BF16(v) => v.resize(len, bf16::ZERO),
            ArrayData::F32(v) => v.resize(len, 0.0),
            ArrayData::F64(v) => v.resize(len, 0.0),
            ArrayData::Bool(v) => v.resize(len, false),
            ArrayData::U8(v) => v.resize(len, 0),
            ArrayData::I8(v) => v.resize(len, 0),
            ArrayData::U16(v) => v.resize(len, 0),
            ArrayData::I16(v) => v.resize(len, 0),
            ArrayData::U32(v) => v.resize(len, 0),
            ArrayData::I32(v) => v.resize(len, 0),
            ArrayData::U64(v) => v.resize(len, 0),
            ArrayData::I64(v) => v.resize(len, 0),
        }
    }

    /// Writable bytes of every dtype whose every bit pattern is valid (all but `bool`).
    ///
    /// `None` for `bool`, whose bytes must be validated (0 or 1) before they become `bool`s.
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(match self {
            ArrayData::Bool(_) => return None,
            ArrayData::U8(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::I8(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::U16(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::I16(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::U32(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::I32(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::U64(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::I64(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::F16(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::BF16(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::F32(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
            ArrayData::F64(v) => bytemuck::cast_slice_mut(v.as_mut_slice()),
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element of one [`DType`].
///
/// Implemented for `u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64 bool`; sealed.
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + 'static + std::fmt::Debug + bytemuck::NoUninit
{
    /// The dtype this type is the element of.
    const DTYPE: DType;
    /// Wraps a vector as [`ArrayData`] without copying.
    fn wrap(v: Vec<Self>) -> ArrayData;
    /// Takes the vector back out without copying; gives the data back when the dtype differs.
    fn unwrap(data: ArrayData) -> std::result::Result<Vec<Self>, ArrayData>;
    /// Borrows the elements when the dtype matches.
    fn view(data: &ArrayData) -> Option<&[Self]>;
    /// Decodes native-endian bytes of this dtype, validating `bool`s.
    fn from_bytes(bytes: &[u8]) -> Option<Vec<Self>>;
    /// The elements as writable bytes; `None` for `bool`, whose bytes must be validated.
    fn bytes_mut(slice: &mut [Self]) -> Option<&mut [u8]>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(v: Vec<Self>) -> ArrayData {
                ArrayData::$variant(v)
            }
            fn unwrap(data: ArrayData) -> std::result::Result<Vec<Self>, ArrayData> {
                match data {
                    ArrayData::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
            fn view(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn from_bytes(bytes: &[u8]) -> Option<Vec<Self>> {
                if bytes.len() % std::mem::size_of::<Self>() != 0 {
                    return None;
                }
                Some(
                    bytes
                        .chunks_exact(std::mem::size_of::<Self>())
                        .map(bytemuck::pod_read_unaligned)
                        .collect(),
                )
            }
            fn bytes_mut(slice: &mut [Self]) -> Option<&mut [u8]> {
                Some(bytemuck::cast_slice_mut(slice))
            }
        }
    };
}

element!(u8, U8);
element!(i8, I8);
element!(u16, U16);
element!(i16, I16);
element!(u32, U32);
element!(i32, I32);
element!(u64, U64);
element!(i64, I64);
element!(f16, F16);
element!(bf16, BF16);
element!(f32, F32);
element!(f64, F64);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn wrap(v: Vec<Self>) -> ArrayData {
        ArrayData::Bool(v)
    }
    fn unwrap(data: ArrayData) -> std::result::Result<Vec<Self>, ArrayData> {
        match data {
            ArrayData::Bool(v) => Ok(v),
            other => Err(other),
        }
    }
    fn view(data: &ArrayData) -> Option<&[Self]> {
        match data {
            ArrayData::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn from_bytes(bytes: &[u8]) -> Option<Vec<Self>> {
        bytes
            .iter()
            .map(|&b| match b {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            })
            .collect()
    }
    fn bytes_mut(_: &mut [Self]) -> Option<&mut [u8]> {
        None
    }
}

/// A dense n-dimensional array: a typed buffer plus its shape, row-major.
///
/// The first axis of a batch stream is the batch axis: `(B, *item_shape)`.
///
/// A loader asked for aligned batches ([`LoaderBuilder::batch_alignment`]) hands out arrays
/// whose storage holds a few elements before the array's own ([`DenseArray::head`]), so that
/// the elements start at the alignment asked for; every method but [`DenseArray::data`] and
/// [`DenseArray::into_raw_parts`] sees only the array's elements.
///
/// [`LoaderBuilder::batch_alignment`]: crate::LoaderBuilder::batch_alignment
#[derive(Debug, Clone)]
pub struct DenseArray {
    shape: Vec<usize>,
    data: ArrayData,
    /// Elements of `data` before the array's first.
    head: usize,
}

/// Same shape, dtype and elements (wherever each storage starts them).
impl PartialEq for DenseArray {
    fn eq(&self, other: &Self) -> bool {
        if self.head == other.head {
            return self.shape == other.shape && self.data == other.data;
        }
        self.shape == other.shape && self.dtype() == other.dtype() && self.as_bytes() == other.as_bytes()
    }
}

impl DenseArray {
    /// An array of `shape` over `data`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the product of `shape` is not the number of elements.
    pub fn new(shape: Vec<usize>, data: ArrayData) -> Result<Self> {
        let want = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if want != Some(data.len()) {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} needs {} elements but the buffer holds {}",
                want.map_or_else(|| "overflowing".to_string(), |n| n.to_string()),
                data.len()
            )));
        }
        Ok(DenseArray { shape, data, head: 0 })
    }

    /// An array of `shape` over the elements of `data` past its first `head`.
    ///
    /// # Errors
    /// As [`DenseArray::new`], for the elements past `head`.
    pub(crate) fn with_head(shape: Vec<usize>, data: ArrayData, head: usize) -> Result<Self> {
        let want = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if head > data.len() || want != Some(data.len() - head) {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} past {head} elements of a buffer of {}",
                data.len()
            )));
        }
        Ok(DenseArray { shape, data, head })
    }

    /// An array of `shape` over a typed vector, adopted without a copy.
    ///
    /// # Errors
    /// As [`DenseArray::new`].
    pub fn from_vec<T: Element>(shape: Vec<usize>, v: Vec<T>) -> Result<Self> {
        DenseArray::new(shape, T::wrap(v))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The shape, batch axis first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() - self.head
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The storage: the array's elements after [`DenseArray::head`] others.
    pub fn data(&self) -> &ArrayData {
        &self.data
    }

    /// The elements of the storage before the array's first: 0, but in the batches of a loader
    /// asked for aligned batches, where the array's elements start at the alignment asked for.
    pub fn head(&self) -> usize {
        self.head
    }

    /// The elements as native-endian bytes.
    pub fn as_bytes(&self) -> &[u8] {
        let size = self.dtype().size();
        &self.data.as_bytes()[self.head * size..]
    }

    /// Borrows the elements as `T`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `T` is not the array's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        T::view(&self.data).map(|v| &v[self.head..]).ok_or_else(|| dtype_mismatch(T::DTYPE, self.dtype()))
    }

    /// Takes the elements out as a `Vec<T>`, without copying when [`DenseArray::head`] is 0
    /// (otherwise they move to the front of their storage, a copy within it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `T` is not the array's dtype.
    pub fn into_vec<T: Element>(self) -> Result<Vec<T>> {
        let have = self.dtype();
        let mut v = T::unwrap(self.data).map_err(|_| dtype_mismatch(T::DTYPE, have))?;
        v.drain(..self.head);
        Ok(v)
    }

    /// Splits into shape and storage, without copying when [`DenseArray::head`] is 0 (otherwise
    /// the elements move to the front of their storage, a copy within it).
    pub fn into_parts(self) -> (Vec<usize>, ArrayData) {
        let (shape, mut data, head) = self.into_raw_parts();
        if head > 0 {
            data.drop_front(head);
        }
        (shape, data)
    }

    /// Splits into shape, storage and [`DenseArray::head`], never copying: for a consumer that
    /// adopts the storage from an offset (NumPy, through `ndarray`).
    pub fn into_raw_parts(self) -> (Vec<usize>, ArrayData, usize) {
        (self.shape, self.data, self.head)
    }
}

fn dtype_mismatch(want: DType, have: DType) -> Error {
    Error::InvalidArgument(format!("asked for {want} elements but the array holds {have}"))
}
