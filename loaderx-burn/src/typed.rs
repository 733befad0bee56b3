//! Typed batches: a struct of burn tensors, one field per stream, declared with
//! [`typed_batch!`](crate::typed_batch) and checked against the loader's streams when the loader
//! is built ([`StepLoaderBuilder::build_typed`](crate::StepLoaderBuilder::build_typed)), so that
//! a model's `TrainStep::step` takes the fields as they are, with no `Result` inside it.

use loaderx_core::DType;

use crate::{DenseBatch, Error, Result};

/// How a field takes its stream: the [`DenseBatch`] method of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// [`DenseBatch::float`]: any numeric stream, converted to the backend's float type.
    Float,
    /// [`DenseBatch::int`]: a stream of integers (a stream of floats is refused).
    Int,
    /// [`DenseBatch::int_from_float`]: any numeric stream, floats cast toward zero, as asked.
    IntFromFloat,
    /// [`DenseBatch::bool`]: a stream of booleans.
    Bool,
}

/// One field of a [`TypedBatch`]: the struct's field, the stream it takes, how, at what rank
/// (the batch axis included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The struct's field.
    pub field: &'static str,
    /// The batch's stream.
    pub stream: &'static str,
    /// The [`DenseBatch`] method taking it.
    pub kind: FieldKind,
    /// The tensor's rank: the batch axis and the item's.
    pub rank: usize,
}

/// A batch type made from a [`DenseBatch`], whose fields are declared up front so that a
/// loader can check them against its streams before it starts. Implemented by
/// [`typed_batch!`](crate::typed_batch).
pub trait TypedBatch: Sized + Send + 'static {
    /// The fields, in declaration order.
    fn fields() -> Vec<Field>;

    /// The fields taken out of `batch`.
    ///
    /// # Errors
    /// [`Error::Stream`] for a stream missing or of another rank or kind: what
    /// [`check`] refuses when the loader is built, so never from a loader that built.
    fn from_batch(batch: &mut DenseBatch) -> Result<Self>;
}

/// Checks `T`'s fields against the `(name, dtype, item shape)` of a batch's dense arrays
/// ([`loaderx_core::adapter::batch_streams`]).
///
/// # Errors
/// [`Error::Stream`] naming the stream and the field: no such stream (naming those there
/// are), another rank, an `int` field over floats, a `bool` field over another dtype; or two
/// fields taking one stream.
pub fn check<T: TypedBatch>(streams: &[(String, DType, Vec<usize>)]) -> Result<()> {
    let fields = T::fields();
    for (k, f) in fields.iter().enumerate() {
        let refuse = |reason: String| Error::Stream { name: f.stream.to_string(), reason };
        if let Some(other) = fields[..k].iter().find(|o| o.stream == f.stream) {
            return Err(refuse(format!(
                "taken by both fields `{}` and `{}`: a stream moves into one tensor",
                other.field, f.field
            )));
        }
        let Some((_, dtype, item)) = streams.iter().find(|(n, _, _)| n == f.stream) else {
            let names: Vec<String> = streams.iter().map(|(n, _, _)| format!("{n:?}")).collect();
            return Err(refuse(format!(
                "field `{}` takes it, but the batch has no such stream; it has {}",
                f.field,
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            )));
        };
        let rank = item.len() + 1;
        if rank != f.rank {
            return Err(refuse(format!(
                "field `{}` is of rank {}, the stream's batches are of rank {rank} (items of shape {item:?})",
                f.field, f.rank
            )));
        }
        match f.kind {
            FieldKind::Int if matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64) => {
                return Err(refuse(format!(
                    "holds {dtype} values, which field `{}` (int) would truncate: declare it int_from_float, or \
                     store the stream as integers",
                    f.field
                )));
            }
            FieldKind::Bool if *dtype != DType::Bool => {
                return Err(refuse(format!(
                    "holds {dtype} values; field `{}` (bool) takes booleans",
                    f.field
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Declares a struct of burn tensors, one field per stream, and implements [`TypedBatch`] for
/// it: each field is `name: kind<rank> = "stream"`, `kind` one of `float` (a `Tensor<rank>`),
/// `int` and `int_from_float` (`Tensor<rank, Int>`) and `bool` (`Tensor<rank, Bool>`), the rank
/// counting the batch axis. Attributes (a `derive`, docs) and visibilities pass through.
/// [`StepLoaderBuilder::build_typed`](crate::StepLoaderBuilder::build_typed) checks the fields
/// against the streams when the loader is built.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// loaderx::burn::typed_batch! {
///     /// A batch of digits.
///     #[derive(Debug, Clone)]
///     pub struct Digits {
///         pub images: float<3> = "images",
///         pub targets: int<1> = "labels",
///     }
/// }
/// ```
#[macro_export]
macro_rules! typed_batch {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $kind:ident < $rank:literal > = $stream:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $crate::typed_batch!(@type $kind $rank), )*
        }

        impl $crate::TypedBatch for $name {
            fn fields() -> ::std::vec::Vec<$crate::Field> {
                ::std::vec![$(
                    $crate::Field {
                        field: ::std::stringify!($field),
                        stream: $stream,
                        kind: $crate::typed_batch!(@kind $kind),
                        rank: $rank,
                    }
                ),*]
            }

            fn from_batch(batch: &mut $crate::DenseBatch) -> $crate::Result<Self> {
                ::std::result::Result::Ok($name { $( $field: batch.$kind::<$rank>($stream)?, )* })
            }
        }
    };
    (@type float $r:literal) => { $crate::__private::Tensor<$r> };
    (@type int $r:literal) => { $crate::__private::Tensor<$r, $crate::__private::Int> };
    (@type int_from_float $r:literal) => { $crate::__private::Tensor<$r, $crate::__private::Int> };
    (@type bool $r:literal) => { $crate::__private::Tensor<$r, $crate::__private::Bool> };
    (@kind float) => { $crate::FieldKind::Float };
    (@kind int) => { $crate::FieldKind::Int };
    (@kind int_from_float) => { $crate::FieldKind::IntFromFloat };
    (@kind bool) => { $crate::FieldKind::Bool };
}
