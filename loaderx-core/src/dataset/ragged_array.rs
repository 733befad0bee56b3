//! [`RaggedArray`]: one batch of a ragged stream, as a ragged source gathers it.

use super::dtype::{ArrayData, DType, Element};
use crate::{Error, Result};

/// One batch of a ragged stream: the records' values back to back and where each starts, in
/// rows. Record `k` is rows `offsets[k]..offsets[k + 1]` of `values`, each row of `row_shape`.
#[derive(Debug, Clone, PartialEq)]
pub struct RaggedArray {
    pub(super) row_shape: Vec<usize>,
    pub(super) offsets: Vec<usize>,
    pub(super) values: ArrayData,
}

impl RaggedArray {
    /// An empty batch of `dtype` rows of `row_shape`.
    pub fn empty(dtype: DType, row_shape: Vec<usize>) -> RaggedArray {
        RaggedArray { row_shape, offsets: vec![0], values: ArrayData::zeros(dtype, 0) }
    }

    /// A batch from its parts (what [`RaggedArray::into_parts`] gives): `offsets` in rows,
    /// starting at 0 and never decreasing, the last one `values`' rows of `row_shape`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which part does not fit the others.
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{ArrayData, Pad, RaggedArray};
    /// let batch = RaggedArray::from_parts(vec![], vec![0, 3, 4], ArrayData::I32(vec![1, 2, 3, 4]))?;
    /// assert_eq!(batch.pad(Pad::longest())?.values.as_slice::<i32>()?, &[1, 2, 3, 4, 0, 0]);
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn from_parts(row_shape: Vec<usize>, offsets: Vec<usize>, values: ArrayData) -> Result<RaggedArray> {
        let row = row_shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let bad = |why: String| Err(Error::InvalidArgument(format!("a ragged batch's {why}")));
        if offsets.first() != Some(&0) {
            return bad("offsets start at 0".into());
        }
        if let Some(k) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return bad(format!("offset {} is below offset {k}", k + 1));
        }
        if row == Some(0) {
            return bad(format!("rows of shape {row_shape:?} hold no values"));
        }
        let rows = *offsets.last().unwrap_or(&0);
        if row.and_then(|r| rows.checked_mul(r)) != Some(values.len()) {
            return bad(format!(
                "offsets end at row {rows}, but its {} values are not that many rows of {row_shape:?}",
                values.len()
            ));
        }
        Ok(RaggedArray { row_shape, offsets, values })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True for a batch of no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// Shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        &self.row_shape
    }

    /// `B + 1` offsets, in rows: record `k` is rows `offsets[k]..offsets[k + 1]`.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Every record's values back to back.
    pub fn values(&self) -> &ArrayData {
        &self.values
    }

    /// The offsets (in rows) and the values, moved out: what a binding hands to its own arrays
    /// without a copy.
    pub fn into_parts(self) -> (Vec<usize>, ArrayData) {
        (self.offsets, self.values)
    }

    /// Rows of record `k`.
    pub fn rows(&self, k: usize) -> usize {
        self.offsets[k + 1] - self.offsets[k]
    }

    /// The values of record `k`, flat row-major.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `T` is not the dtype.
    pub fn record<T: Element>(&self, k: usize) -> Result<&[T]> {
        let row = self.row_elems();
        let all = T::view(&self.values).ok_or_else(|| {
            Error::InvalidArgument(format!("the ragged stream holds {}, not {}", self.dtype(), T::DTYPE))
        })?;
        Ok(&all[self.offsets[k] * row..self.offsets[k + 1] * row])
    }

    fn row_elems(&self) -> usize {
        self.row_shape.iter().product::<usize>().max(1)
    }
}
