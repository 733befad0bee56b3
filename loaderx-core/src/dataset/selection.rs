//! [`Selection`]: a view of some of a dataset's records, in a chosen order, without a copy.

use std::sync::Arc;

use crate::sampler::{DOMAIN_SPLIT, mix64, shuffle_positions};
use crate::{Error, Result};

/// Which records of a dataset a view holds, in order: a range or a list of indices. Applied to a
/// source (`DenseSource::select`, `RaggedSource::select`, `LoaderBuilder::select`), index `k` of
/// the view is record `selection[k]` of the source; nothing is copied.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::Selection;
/// // 80/20 by a seed: disjoint, together every record once, each part in record order.
/// let (train, valid) = Selection::split(1000, 0.8, 42)?;
/// assert_eq!((train.len(), valid.len()), (800, 200));
/// let first = Selection::range(0..100);
/// assert_eq!(first.get(7), Some(7));
/// # Ok::<(), loaderx::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(Repr, Option<u32>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Range(u32, u32),
    List(Arc<[u32]>),
}

impl Selection {
    /// Records `range.start..range.end`.
    pub fn range(range: std::ops::Range<u32>) -> Selection {
        Selection(Repr::Range(range.start, range.end.max(range.start)), None)
    }

    /// Records at `indices`, in that order (repeats allowed).
    pub fn indices(indices: impl Into<Arc<[u32]>>) -> Selection {
        Selection(Repr::List(indices.into()), None)
    }

    /// A `train`/`rest` split of `len` records: `round(len * fraction)` chosen by a permutation
    /// keyed by `seed`, the others in the second part; each part in record order (reads stay in
    /// storage order). The same `(len, fraction, seed)` gives the same split on every machine.
    ///
    /// `len` is a `usize`, as batch sizes and burn's and candle's lengths are.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `fraction` is not within `0.0..=1.0`, or `len` is past
    /// the sampler's `u32` record indices.
    pub fn split(len: usize, fraction: f64, seed: u64) -> Result<(Selection, Selection)> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(Error::InvalidArgument(format!(
                "a split fraction must be within 0..=1, got {fraction}"
            )));
        }
        let len = u32::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!(
                "a split of {len} records is past the sampler's {} record indices",
                u32::MAX
            ))
        })?;
        let first = ((f64::from(len) * fraction).round() as u32).min(len);
        let order = shuffle_positions(len, mix64(seed ^ DOMAIN_SPLIT));
        let mut a: Vec<u32> = order[..first as usize].to_vec();
        let mut b: Vec<u32> = order[first as usize..].to_vec();
        a.sort_unstable();
        b.sort_unstable();
        // Each part remembers the count it splits: applied to a dataset of another length, the
        // records past it would never be read (or the split would not be the one asked for).
        Ok((Selection(Repr::List(a.into()), Some(len)), Selection(Repr::List(b.into()), Some(len))))
    }

    /// The number of records this selection partitions, when it is a part of a
    /// [`split`](Self::split): applied to a dataset of any other length it is refused.
    pub fn split_of(&self) -> Option<u32> {
        self.1
    }

    /// Records in the view.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Range(a, b) => (b - a) as usize,
            Repr::List(l) => l.len(),
        }
    }

    /// True when the view holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The source record of view index `k`.
    #[inline]
    pub fn get(&self, k: u32) -> Option<u32> {
        match &self.0 {
            Repr::Range(a, b) => a.checked_add(k).filter(|i| i < b),
            Repr::List(l) => l.get(k as usize).copied(),
        }
    }

    /// The largest source record the view names, `None` when empty.
    pub(crate) fn max(&self) -> Option<u32> {
        match &self.0 {
            Repr::Range(a, b) => (b > a).then(|| b - 1),
            Repr::List(l) => l.iter().copied().max(),
        }
    }

    /// This view applied to a source that is itself viewed by `inner`: the composition.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]-like [`Error::InvalidArgument`] when this view names a record
    /// past `inner`.
    pub(crate) fn within(&self, inner: &Selection) -> Result<Selection> {
        let map = |k: u32| {
            inner.get(k).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a selection names record {k} of a view of {} records",
                    inner.len()
                ))
            })
        };
        Ok(match &self.0 {
            Repr::Range(a, b) => Selection::indices((*a..*b).map(map).collect::<Result<Vec<_>>>()?),
            Repr::List(l) => Selection::indices(l.iter().map(|&k| map(k)).collect::<Result<Vec<_>>>()?),
        })
    }

    /// Maps view indices to source records into `out`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] (naming `path`) for a view index past the view.
    pub(crate) fn map_into(&self, indices: &[u32], out: &mut Vec<u32>, path: &std::path::Path) -> Result<()> {
        out.clear();
        out.reserve(indices.len());
        for &k in indices {
            let i = self.get(k).ok_or_else(|| Error::IndexOutOfRange {
                path: path.to_path_buf(),
                index: u64::from(k),
                len: self.len() as u64,
            })?;
            out.push(i);
        }
        Ok(())
    }
}

/// `indices` of a source seen through `view`: mapped into `buf` when there is a view, as they
/// are otherwise.
///
/// # Errors
/// [`Error::IndexOutOfRange`] naming `path` for an index past the view.
pub(crate) fn map_view<'a>(
    view: Option<&Selection>,
    indices: &'a [u32],
    buf: &'a mut Vec<u32>,
    path: &std::path::Path,
) -> Result<&'a [u32]> {
    match view {
        Some(v) => {
            v.map_into(indices, buf, path)?;
            Ok(&buf[..])
        }
        None => Ok(indices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_is_a_partition_fixed_by_its_seed() {
        for (len, f) in [(1000u32, 0.8), (7, 0.5), (1, 1.0), (10, 0.0), (65_537, 0.1)] {
            let (a, b) = Selection::split(len as usize, f, 9).unwrap();
            assert_eq!(a.len() as u32, (f64::from(len) * f).round() as u32);
            let mut all: Vec<u32> = (0..a.len() as u32).map(|k| a.get(k).unwrap()).collect();
            all.extend((0..b.len() as u32).map(|k| b.get(k).unwrap()));
            all.sort_unstable();
            assert_eq!(all, (0..len).collect::<Vec<_>>(), "every record once");
            assert_eq!(Selection::split(len as usize, f, 9).unwrap(), (a.clone(), b), "deterministic");
            if len > 100 && f > 0.0 && f < 1.0 {
                assert_ne!(
                    Selection::split(len as usize, f, 10).unwrap().0,
                    a,
                    "another seed, another split"
                );
            }
        }
        let refused = |f: f64| {
            let got = format!("got {f}");
            matches!(Selection::split(10, f, 0), Err(Error::InvalidArgument(m)) if m.ends_with(&got))
        };
        assert!(refused(1.5));
        assert!(refused(f64::NAN));
        #[cfg(target_pointer_width = "64")]
        assert!(matches!(
            Selection::split(1 << 32, 0.5, 0),
            Err(Error::InvalidArgument(m)) if m.contains("a split of 4294967296 records is past")
        ));
    }

    #[test]
    fn views_compose_and_check_their_bounds() {
        let inner = Selection::range(100..200);
        let outer = Selection::indices(vec![5u32, 0, 99]);
        let both = outer.within(&inner).unwrap();
        assert_eq!(
            (both.get(0), both.get(1), both.get(2), both.get(3)),
            (Some(105), Some(100), Some(199), None)
        );
        assert!(matches!(
            Selection::indices(vec![100u32]).within(&inner),
            Err(Error::InvalidArgument(m)) if m.contains("names record 100 of a view of 100 records")
        ));
        let mut out = Vec::new();
        assert!(matches!(
            inner.map_into(&[0, 100], &mut out, std::path::Path::new("d")),
            Err(Error::IndexOutOfRange { path, index: 100, len: 100 }) if path == std::path::Path::new("d")
        ));
        inner.map_into(&[0, 99], &mut out, std::path::Path::new("d")).unwrap();
        assert_eq!(out, [100, 199]);
    }
}
