//! Which loaderx dtypes candle holds, and the explicit widenings for those it does not.

use candle_core::DType as CandleDType;
use half::{bf16, f16};
use loaderx_core::{ArrayData, DType};

use crate::{Error, Result};

/// The candle dtype that holds a loaderx dtype as is, or `None` when candle has no such dtype.
///
/// candle-core 0.11 has `u8 u32 i16 i32 i64 f16 bf16 f32 f64` (and 8/6/4-bit floats loaderx does
/// not store); it has no `i8`, `u16`, `u64` or `bool`. Arrays of those need a [`Widen`].
pub fn candle_dtype(dtype: DType) -> Option<CandleDType> {
    Some(match dtype {
        DType::U8 => CandleDType::U8,
        DType::U32 => CandleDType::U32,
        DType::I16 => CandleDType::I16,
        DType::I32 => CandleDType::I32,
        DType::I64 => CandleDType::I64,
        DType::F16 => CandleDType::F16,
        DType::BF16 => CandleDType::BF16,
        DType::F32 => CandleDType::F32,
        DType::F64 => CandleDType::F64,
        _ => return None,
    })
}

/// What to do with an array whose loaderx dtype candle cannot hold (`i8`, `u16`, `u64`, `bool`).
///
/// A widening is a conversion into a new buffer, chosen by the caller; nothing is ever
/// reinterpreted bit for bit, wrapped or saturated. Arrays of a dtype candle holds are never
/// touched by it: they are adopted as they are, whatever the `Widen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Widen {
    /// Refuse: [`Error::UnsupportedDType`]. The default.
    #[default]
    Never,
    /// The narrowest candle dtype that holds every value exactly: `i8` → `i16`, `u16` → `i32`,
    /// `bool` → `u8` (0 or 1), `u64` → `i64` ([`Error::OutOfRange`] for a value above
    /// `i64::MAX`).
    Exact,
    /// Convert to this candle dtype. Integer targets take values that fit and refuse the rest
    /// ([`Error::OutOfRange`]); float targets round to nearest (a `u64` to `f32` may lose low
    /// bits) and refuse a value that would become infinite (a `u16` above 65504 to `f16`).
    /// `bool` converts to 0 and 1.
    To(CandleDType),
}

impl Widen {
    /// The candle dtype an array of `dtype` becomes under this policy.
    ///
    /// # Errors
    /// [`Error::UnsupportedDType`] when `dtype` needs widening and this is [`Widen::Never`];
    /// [`Error::UnsupportedTarget`] for a `To` of an 8-, 6- or 4-bit float.
    pub fn target(self, dtype: DType) -> Result<CandleDType> {
        if let Some(t) = candle_dtype(dtype) {
            return Ok(t);
        }
        let target = match self {
            Widen::Never => return Err(Error::UnsupportedDType { dtype }),
            Widen::Exact => match dtype {
                DType::I8 => CandleDType::I16,
                DType::U16 => CandleDType::I32,
                DType::U64 => CandleDType::I64,
                DType::Bool => CandleDType::U8,
                _ => return Err(Error::UnsupportedDType { dtype }),
            },
            Widen::To(t) => t,
        };
        match target {
            CandleDType::U8
            | CandleDType::U32
            | CandleDType::I16
            | CandleDType::I32
            | CandleDType::I64
            | CandleDType::F16
            | CandleDType::BF16
            | CandleDType::F32
            | CandleDType::F64 => Ok(target),
            to => Err(Error::UnsupportedTarget { from: dtype, to }),
        }
    }
}

/// A typed buffer candle can adopt, the output of a widening.
pub(crate) enum Adoptable {
    U8(Vec<u8>),
    U32(Vec<u32>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// An element of a dtype candle lacks, with the exact and rounding conversions a widening needs.
trait Narrow: Copy + std::fmt::Display {
    const DTYPE: DType;
    fn exact(self) -> i128;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
}

macro_rules! narrow {
    ($t:ty, $d:ident) => {
        impl Narrow for $t {
            const DTYPE: DType = DType::$d;
            fn exact(self) -> i128 {
                i128::from(self)
            }
            #[allow(clippy::cast_precision_loss, reason = "a float widening rounds by contract")]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[allow(clippy::cast_precision_loss, reason = "a float widening rounds by contract")]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

narrow!(i8, I8);
narrow!(u16, U16);
narrow!(u64, U64);

impl Narrow for bool {
    const DTYPE: DType = DType::Bool;
    fn exact(self) -> i128 {
        i128::from(self)
    }
    fn to_f32(self) -> f32 {
        f32::from(u8::from(self))
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
}

fn out_of_range<S: Narrow>(to: CandleDType, index: usize, value: S) -> Error {
    Error::OutOfRange { from: S::DTYPE, to, index, value: value.to_string() }
}

fn ints<S: Narrow, D: TryFrom<i128>>(src: &[S], to: CandleDType) -> Result<Vec<D>> {
    src.iter().enumerate().map(|(i, &s)| D::try_from(s.exact()).map_err(|_| out_of_range(to, i, s))).collect()
}

fn floats<S: Narrow, D>(
    src: &[S],
    to: CandleDType,
    f: impl Fn(S) -> D,
    finite: impl Fn(&D) -> bool,
) -> Result<Vec<D>> {
    src.iter()
        .enumerate()
        .map(|(i, &s)| {
            let d = f(s);
            if finite(&d) { Ok(d) } else { Err(out_of_range(to, i, s)) }
        })
        .collect()
}

fn widen_slice<S: Narrow>(src: &[S], to: CandleDType) -> Result<Adoptable> {
    Ok(match to {
        CandleDType::U8 => Adoptable::U8(ints(src, to)?),
        CandleDType::U32 => Adoptable::U32(ints(src, to)?),
        CandleDType::I16 => Adoptable::I16(ints(src, to)?),
        CandleDType::I32 => Adoptable::I32(ints(src, to)?),
        CandleDType::I64 => Adoptable::I64(ints(src, to)?),
        CandleDType::F16 => {
            Adoptable::F16(floats(src, to, |s| f16::from_f64(s.to_f64()), |d| d.is_finite())?)
        }
        CandleDType::BF16 => {
            Adoptable::BF16(floats(src, to, |s| bf16::from_f64(s.to_f64()), |d| d.is_finite())?)
        }
        CandleDType::F32 => Adoptable::F32(floats(src, to, Narrow::to_f32, |d| d.is_finite())?),
        CandleDType::F64 => Adoptable::F64(floats(src, to, Narrow::to_f64, |d| d.is_finite())?),
        to => return Err(Error::UnsupportedTarget { from: S::DTYPE, to }),
    })
}

/// Converts `data` into a buffer candle can adopt: the same `Vec`, moved, when candle holds its
/// dtype; a widened copy when `widen` allows one.
pub(crate) fn adoptable(data: ArrayData, widen: Widen) -> Result<Adoptable> {
    let dtype = data.dtype();
    Ok(match data {
        ArrayData::U8(v) => Adoptable::U8(v),
        ArrayData::U32(v) => Adoptable::U32(v),
        ArrayData::I16(v) => Adoptable::I16(v),
        ArrayData::I32(v) => Adoptable::I32(v),
        ArrayData::I64(v) => Adoptable::I64(v),
        ArrayData::F16(v) => Adoptable::F16(v),
        ArrayData::BF16(v) => Adoptable::BF16(v),
        ArrayData::F32(v) => Adoptable::F32(v),
        ArrayData::F64(v) => Adoptable::F64(v),
        ArrayData::I8(v) => widen_slice(&v, widen.target(dtype)?)?,
        ArrayData::U16(v) => widen_slice(&v, widen.target(dtype)?)?,
        ArrayData::U64(v) => widen_slice(&v, widen.target(dtype)?)?,
        ArrayData::Bool(v) => widen_slice(&v, widen.target(dtype)?)?,
        _ => return Err(Error::UnsupportedDType { dtype }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_widening_picks_the_narrowest_holding_dtype() {
        assert_eq!(Widen::Exact.target(DType::I8).unwrap(), CandleDType::I16);
        assert_eq!(Widen::Exact.target(DType::U16).unwrap(), CandleDType::I32);
        assert_eq!(Widen::Exact.target(DType::U64).unwrap(), CandleDType::I64);
        assert_eq!(Widen::Exact.target(DType::Bool).unwrap(), CandleDType::U8);
    }

    #[test]
    fn supported_dtypes_ignore_the_widening() {
        for d in DType::ALL {
            if let Some(c) = candle_dtype(d) {
                assert_eq!(Widen::To(CandleDType::F64).target(d).unwrap(), c);
                assert_eq!(Widen::Never.target(d).unwrap(), c);
            }
        }
    }

    #[test]
    fn never_refuses_dtypes_candle_lacks() {
        for d in [DType::I8, DType::U16, DType::U64, DType::Bool] {
            assert!(matches!(Widen::Never.target(d), Err(Error::UnsupportedDType { dtype }) if dtype == d));
        }
    }

    #[test]
    fn integer_widening_refuses_values_that_do_not_fit() {
        let err = widen_slice(&[1i8, -3], CandleDType::U32).err().unwrap();
        assert!(matches!(err, Error::OutOfRange { index: 1, .. }), "{err}");
        let err = widen_slice(&[u64::MAX], CandleDType::I64).err().unwrap();
        assert!(matches!(err, Error::OutOfRange { index: 0, .. }), "{err}");
    }

    #[test]
    fn float_widening_refuses_infinities() {
        let err = widen_slice(&[65535u16], CandleDType::F16).err().unwrap();
        assert!(matches!(err, Error::OutOfRange { .. }), "{err}");
        assert!(widen_slice(&[65504u16], CandleDType::F16).is_ok());
    }

    #[test]
    fn low_bit_floats_are_not_targets() {
        let err = Widen::To(CandleDType::F8E4M3).target(DType::U16).err().unwrap();
        assert!(matches!(err, Error::UnsupportedTarget { .. }));
    }
}
