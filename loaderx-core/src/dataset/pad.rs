//! Padding ragged batches dense: [`Pad`] (to the longest record or a fixed length, truncated
//! or refused, with a fill value), [`RaggedArray::pad`] into values, lengths and mask, and
//! [`pad`] for records as vectors.

use super::dtype::{ArrayData, DType, DenseArray, Element};
use super::ragged_array::RaggedArray;
use crate::{Error, Result};

/// How [`RaggedArray::pad`] makes a ragged batch dense.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pad {
    /// Pad to this many rows; `None`: to the batch's longest record.
    pub length: Option<usize>,
    /// Cut records longer than `length` (otherwise they are an error naming the record).
    pub truncate: bool,
    /// The padding value, as an `f64` converted to the stream's dtype (0 by default).
    pub value: f64,
}

impl Pad {
    /// To the longest record of each batch, with zeros.
    pub fn longest() -> Pad {
        Pad { length: None, truncate: false, value: 0.0 }
    }

    /// To `rows` rows, with zeros; a longer record is an error unless [`Pad::truncate`]d.
    pub fn length(rows: usize) -> Pad {
        Pad { length: Some(rows), truncate: false, value: 0.0 }
    }

    /// Cut records longer than the fixed length.
    pub fn truncate(mut self, yes: bool) -> Pad {
        self.truncate = yes;
        self
    }

    /// The padding value (converted to the stream's dtype; 1 or more is `true` for bool).
    pub fn value(mut self, v: f64) -> Pad {
        self.value = v;
        self
    }
}

/// A padded batch: `(B, L, *row_shape)` values, each record's length in rows (`i64`, capped at
/// `L`), and a `(B, L)` mask of 1 for a real row and 0 for padding (`u8`).
#[derive(Debug, Clone, PartialEq)]
pub struct Padded {
    /// `(B, L, *row_shape)`.
    pub values: DenseArray,
    /// `(B,)`, `i64`.
    pub lengths: DenseArray,
    /// `(B, L)`, `u8`.
    pub mask: DenseArray,
}

impl RaggedArray {
    /// The batch made dense as `pad` says: `(B, L, *row_shape)` values, lengths and mask.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the record (its position in the batch) longer than a
    /// fixed length that does not truncate.
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{Pad, RaggedSource};
    /// let tokens = RaggedSource::from_records(vec![], &[vec![1i32, 2, 3], vec![4], vec![5, 6]])?;
    /// let p = tokens.get_batch(&[0, 1, 2])?.pad(Pad::longest().value(-1.0))?;
    /// assert_eq!(p.values.shape(), &[3, 3]);
    /// assert_eq!(p.values.as_slice::<i32>()?, &[1, 2, 3, 4, -1, -1, 5, 6, -1]);
    /// assert_eq!(p.lengths.as_slice::<i64>()?, &[3, 1, 2]);
    /// assert_eq!(p.mask.as_slice::<u8>()?, &[1, 1, 1, 1, 0, 0, 1, 1, 0]);
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn pad(&self, pad: Pad) -> Result<Padded> {
        let b = self.len();
        let longest = (0..b).map(|k| self.rows(k)).max().unwrap_or(0);
        let l = pad.length.unwrap_or(longest);
        if !pad.truncate
            && let Some(k) = (0..b).find(|&k| self.rows(k) > l)
        {
            return Err(Error::InvalidArgument(format!(
                "record {k} of the batch has {} rows; the padded length is {l}, and truncation was not asked for",
                self.rows(k)
            )));
        }
        let row = self.row_shape().iter().product::<usize>().max(1);
        let elem = self.dtype().size();
        let fill = fill_bytes(self.dtype(), pad.value)?;
        let src = self.values().as_bytes();
        // The padded length is the caller's number: its buffer is checked, and asked of the
        // allocator as an error, never an abort.
        let too_large = || {
            Error::InvalidArgument(format!(
                "a padded batch of {b} records of {l} rows of {row} {} values does not fit in memory: pad to \
                 fewer rows",
                self.dtype()
            ))
        };
        let elems = b.checked_mul(l).and_then(|n| n.checked_mul(row)).ok_or_else(too_large)?;
        elems.checked_mul(elem).filter(|&n| isize::try_from(n).is_ok()).ok_or_else(too_large)?;
        // One zeroed buffer of the dtype, each record copied into its row, the padding filled
        // only when the value is not zero.
        let mut values = ArrayData::try_zeros(self.dtype(), elems).ok_or_else(too_large)?;
        let mut lengths = Vec::with_capacity(b);
        let mut mask = Vec::new();
        mask.try_reserve_exact(b * l).map_err(|_| too_large())?;
        mask.resize(b * l, 0u8);
        {
            let mut bools = Vec::new();
            let out: &mut [u8] = match values.as_bytes_mut() {
                Some(bytes) => bytes,
                None => {
                    bools.try_reserve_exact(elems).map_err(|_| too_large())?;
                    bools.resize(elems, 0u8);
                    &mut bools
                }
            };
            let stride = l * row * elem;
            for k in 0..b {
                let rows = self.rows(k).min(l);
                let n = rows * row * elem;
                let start = self.offsets()[k] * row * elem;
                let dst = &mut out[k * stride..(k + 1) * stride];
                dst[..n].copy_from_slice(&src[start..start + n]);
                if fill[..elem].iter().any(|&b| b != 0) {
                    for e in dst[n..].chunks_exact_mut(elem) {
                        e.copy_from_slice(&fill[..elem]);
                    }
                }
                lengths.push(rows as i64);
                mask[k * l..k * l + rows].fill(1);
            }
            if !bools.is_empty() {
                values = ArrayData::Bool(bools.iter().map(|&b| b == 1).collect());
            }
        }
        let mut shape = vec![b, l];
        shape.extend_from_slice(self.row_shape());
        Ok(Padded {
            values: DenseArray::new(shape, values)?,
            lengths: DenseArray::from_vec(vec![b], lengths)?,
            mask: DenseArray::from_vec(vec![b, l], mask)?,
        })
    }
}

/// The native-endian bytes of `v` as one element of `dtype` (8 bytes, the first `size` used).
///
/// # Errors
/// [`Error::InvalidArgument`] for a value the dtype does not hold exactly (a fraction, NaN or a
/// value out of range for an integer dtype, anything but 0 or 1 for `bool`, a finite value
/// that a float dtype makes infinite): a pad value is never changed silently (review T1).
pub(crate) fn fill_bytes(dtype: DType, v: f64) -> Result<[u8; 8]> {
    let refuse = || {
        Error::InvalidArgument(format!("the pad value {v} is not a {dtype}: {dtype} cannot hold it exactly"))
    };
    // An integer dtype takes integral values in its range (compared in i128, exact for every
    // f64 integral value that fits).
    let int = |lo: i128, hi: i128| -> Result<i128> {
        if v.is_finite() && v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 {
            Ok(v as i128)
        } else {
            Err(refuse())
        }
    };
    let mut b = [0u8; 8];
    let mut put = |x: &[u8]| b[..x.len()].copy_from_slice(x);
    match dtype {
        DType::U8 => put(&(int(0, u8::MAX.into())? as u8).to_ne_bytes()),
        DType::I8 => put(&(int(i8::MIN.into(), i8::MAX.into())? as i8).to_ne_bytes()),
        DType::U16 => put(&(int(0, u16::MAX.into())? as u16).to_ne_bytes()),
        DType::I16 => put(&(int(i16::MIN.into(), i16::MAX.into())? as i16).to_ne_bytes()),
        DType::U32 => put(&(int(0, u32::MAX.into())? as u32).to_ne_bytes()),
        DType::I32 => put(&(int(i32::MIN.into(), i32::MAX.into())? as i32).to_ne_bytes()),
        // 2^64 - 1 and 2^63 - 1 are no f64: their neighbours below bound the range.
        DType::U64 => put(&(int(0, (u64::MAX - 2047).into())? as u64).to_ne_bytes()),
        DType::I64 => put(&(int(i64::MIN.into(), (i64::MAX - 1023).into())? as i64).to_ne_bytes()),
        DType::F16 => {
            let h = half::f16::from_f64(v);
            if v.is_finite() && h.is_infinite() {
                return Err(refuse());
            }
            put(&h.to_ne_bytes());
        }
        DType::BF16 => {
            let h = half::bf16::from_f64(v);
            if v.is_finite() && h.is_infinite() {
                return Err(refuse());
            }
            put(&h.to_ne_bytes());
        }
        DType::F32 => {
            if v.is_finite() && (v as f32).is_infinite() {
                return Err(refuse());
            }
            put(&(v as f32).to_ne_bytes());
        }
        DType::F64 => put(&v.to_ne_bytes()),
        DType::Bool if v == 0.0 || v == 1.0 => put(&[u8::from(v == 1.0)]),
        DType::Bool => return Err(refuse()),
    }
    Ok(b)
}

/// Pads variable-length records (flat row-major `(len_i, *row_shape)`) into one dense
/// `(B, max_len, *row_shape)` array filled with `fill`, and returns the row counts.
///
/// # Errors
/// [`Error::InvalidArgument`] when a record is not a whole number of rows.
pub fn pad<T: Element>(records: &[Vec<T>], row_shape: &[usize], fill: T) -> Result<(DenseArray, Vec<usize>)> {
    let row: usize = row_shape.iter().product();
    let row = row.max(1);
    let mut lengths = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if r.len() % row != 0 {
            return Err(Error::InvalidArgument(format!(
                "record {i} holds {} elements, not a whole number of {row}-element rows",
                r.len()
            )));
        }
        lengths.push(r.len() / row);
    }
    let max_len = lengths.iter().copied().max().unwrap_or(0);
    let mut out = vec![fill; records.len() * max_len * row];
    for (k, r) in records.iter().enumerate() {
        let start = k * max_len * row;
        out[start..start + r.len()].copy_from_slice(r);
    }
    let mut shape = vec![records.len(), max_len];
    shape.extend_from_slice(row_shape);
    Ok((DenseArray::from_vec(shape, out)?, lengths))
}
