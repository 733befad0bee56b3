//! The plan values: byte ranges that outlive the mapping they were planned from.

use std::ops::Range;

use crate::{Error, Result};

/// One record-aligned byte range of a single-file plan.
///
/// `start` is inclusive, `end` exclusive, `length == end - start`; `index` is the zero-based
/// position of the range in the plan (ranges are compacted, so indices have no gaps). A plain
/// `Copy` value: it holds no reference to the file or its mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartRange {
    /// Zero-based position of this range in the plan.
    pub index: u64,
    /// First byte of the range.
    pub start: u64,
    /// One past the last byte of the range.
    pub end: u64,
    /// `end - start`, in bytes.
    pub length: u64,
}

/// One row of a multi-file plan: the bytes `start..end` of source `source` go to `worker`.
///
/// Offsets are local to the source. `worker` is compact and zero-based; one worker may own
/// rows from several sources. A plain `Copy` value, holding no reference to any mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilePartRange {
    /// Zero-based worker receiving these bytes.
    pub worker: u64,
    /// Zero-based index of the source in the ordered input list.
    pub source: u64,
    /// First byte of the range within the source.
    pub start: u64,
    /// One past the last byte of the range within the source.
    pub end: u64,
    /// `end - start`, in bytes.
    pub length: u64,
}

impl PartRange {
    /// The range's bytes within `data` (the bytes the plan was made from), or `None` when the
    /// range does not fit in `data`.
    pub fn slice<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        data.get(to_usize_range(self.start, self.end)?)
    }

    /// `start..end` as a `usize` range for indexing, or `None` where it does not fit `usize`.
    pub fn to_range(&self) -> Option<Range<usize>> {
        to_usize_range(self.start, self.end)
    }
}

impl FilePartRange {
    /// The row's bytes within `data` (the bytes of source `source`), or `None` when the range
    /// does not fit in `data`.
    pub fn slice<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        data.get(to_usize_range(self.start, self.end)?)
    }

    /// `start..end` as a `usize` range for indexing, or `None` where it does not fit `usize`.
    pub fn to_range(&self) -> Option<Range<usize>> {
        to_usize_range(self.start, self.end)
    }
}

fn to_usize_range(start: u64, end: u64) -> Option<Range<usize>> {
    Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
}

/// Appends `value` to a plan, growing it fallibly: a plan is as long as its input asks (a
/// range per byte, for a file of delimiters cut every byte), so one that does not fit in memory
/// is an error, not an abort.
///
/// # Errors
/// [`Error::InvalidArgument`] when the plan cannot grow.
pub(crate) fn push_planned<T>(plan: &mut Vec<T>, value: T) -> Result<()> {
    if plan.len() == plan.capacity() {
        plan.try_reserve(plan.len().max(64)).map_err(|_| too_large(plan.len()))?;
    }
    plan.push(value);
    Ok(())
}

fn too_large(len: usize) -> Error {
    Error::InvalidArgument(format!(
        "a plan of more than {len} ranges does not fit in memory (ask for larger chunks or fewer parts)"
    ))
}

/// Turns ascending interior cut points into compact [`PartRange`]s covering `0..len`.
///
/// # Errors
/// [`Error::InvalidArgument`] when the ranges do not fit in memory.
pub(crate) fn ranges_from_cuts(cuts: &[usize], len: usize) -> Result<Vec<PartRange>> {
    let mut out = Vec::new();
    out.try_reserve_exact(cuts.len() + 1).map_err(|_| too_large(cuts.len()))?;
    let mut start = 0usize;
    for &end in cuts.iter().chain(std::iter::once(&len)) {
        if end > start {
            out.push(PartRange {
                index: out.len() as u64,
                start: start as u64,
                end: end as u64,
                length: (end - start) as u64,
            });
            start = end;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_become_contiguous_compact_ranges() {
        let r = ranges_from_cuts(&[3, 3, 7], 10).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].index, r[0].start, r[0].end, r[0].length), (0, 0, 3, 3));
        assert_eq!((r[1].index, r[1].start, r[1].end), (1, 3, 7));
        assert_eq!((r[2].index, r[2].start, r[2].end, r[2].length), (2, 7, 10, 3));
        assert!(ranges_from_cuts(&[], 0).unwrap().is_empty());
    }

    #[test]
    fn slice_reads_the_range_or_refuses_out_of_bounds() {
        let r = PartRange { index: 0, start: 1, end: 3, length: 2 };
        assert_eq!(r.slice(b"abcd"), Some(&b"bc"[..]));
        assert_eq!(r.slice(b"ab"), None);
        assert_eq!(r.to_range(), Some(1..3));
        let f = FilePartRange { worker: 0, source: 2, start: 0, end: 2, length: 2 };
        assert_eq!(f.slice(b"xyz"), Some(&b"xy"[..]));
    }
}
