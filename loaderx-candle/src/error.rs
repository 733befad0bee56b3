//! The one error type of `loaderx-candle`.

use loaderx_core::DType;

/// Everything that can go wrong turning loaderx batches into candle tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The loader or a store failed (gather, open, sampler, a transform, a stopped thread).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// candle refused an operation (allocation, device copy, a tensor op in a transform).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// The array's dtype has no candle counterpart and the caller asked for no widening
    /// ([`Widen::Never`](crate::Widen::Never)).
    #[error(
        "candle has no {dtype} tensors; choose a widening to convert them: Widen::Exact (the \
         smallest candle dtype holding every value), or Widen::To(DType::U32) for class labels \
         (candle's gather and cross-entropy take u8, u32 and i64 indices)"
    )]
    UnsupportedDType {
        /// The loaderx dtype.
        dtype: DType,
    },
    /// A widening target that is not a plain numeric candle dtype (an 8-, 6- or 4-bit float).
    #[error(
        "cannot widen {from} to candle {}: only u8 u32 i16 i32 i64 f16 bf16 f32 f64 are targets",
        to.as_str()
    )]
    UnsupportedTarget {
        /// The loaderx dtype being widened.
        from: DType,
        /// The requested candle dtype.
        to: candle_core::DType,
    },
    /// A value does not fit the widening target (a negative `i8` to `u32`, a `u64` above
    /// `i64::MAX` to `i64`, a `u16` above the `f16` range...). Nothing is wrapped or saturated.
    #[error("element {index} ({value}) of a {from} array does not fit candle {}", to.as_str())]
    OutOfRange {
        /// The loaderx dtype being widened.
        from: DType,
        /// The candle dtype it was widened to.
        to: candle_core::DType,
        /// Position of the first offending element in the flat array.
        index: usize,
        /// The offending value, as text.
        value: String,
    },
    /// A shape whose element count is not the buffer's length.
    #[error(
        "shape {shape:?} needs {} elements but the buffer holds {len}",
        .needs.map_or_else(|| "an overflowing number of".to_string(), |n| n.to_string())
    )]
    ShapeMismatch {
        /// The shape asked for.
        shape: Vec<usize>,
        /// Elements it needs (`None` when the product overflows `usize`).
        needs: Option<usize>,
        /// Elements in the buffer.
        len: usize,
    },
    /// A stream the converter cannot make a tensor of, found when the loader is built. Its
    /// text is the stream's and the cause's together (the cause is no `source()` as well, so a
    /// printer of error chains shows it once).
    #[error("stream {name:?}: {cause}")]
    Stream {
        /// The stream's name.
        name: String,
        /// Why ([`Error::UnsupportedDType`] or [`Error::UnsupportedTarget`]).
        cause: Box<Error>,
    },
    /// A stream asked of a [`TensorBatch`](crate::TensorBatch) is not in it.
    #[error(
        "stream {name:?}: no such stream in the batch; it has {}",
        if available.is_empty() { "no streams".to_string() } else { available.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ") }
    )]
    MissingStream {
        /// The name asked for.
        name: String,
        /// The names it has.
        available: Vec<String>,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
