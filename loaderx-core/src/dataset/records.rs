//! The records behind a dense or ragged source: one [`Backing`] (a store, a store set, a
//! remote store, values in memory, or sources back to back), so that both kinds of dataset read
//! through the same calls and neither matches on where its records are.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dtype::ArrayData;
use super::selection::{Selection, map_view};
use super::set_open::StoreSet;
use crate::store::{Backing, Parallelism, VarFill};
use crate::sys::Destination;
use crate::{Error, Result, Store};

/// A source's records, and the store they are when they are one (what
/// [`DenseSource::store`](crate::DenseSource::store) and `remote` hand out).
#[derive(Debug, Clone)]
pub(crate) struct Records {
    /// Every read goes through this.
    pub(crate) source: Arc<dyn Backing>,
    origin: Origin,
}

/// What [`Records`] were made from, kept only for the accessors that name it.
#[derive(Debug, Clone)]
enum Origin {
    Store(Arc<Store>),
    #[cfg(feature = "remote")]
    Remote(Arc<crate::remote::RemoteStore>),
    Other,
}

impl Records {
    /// A local store's records.
    pub(crate) fn store(store: Arc<Store>) -> Records {
        Records { source: store.clone(), origin: Origin::Store(store) }
    }

    /// A store set's records, one index space.
    pub(crate) fn set(set: StoreSet) -> Records {
        Records::other(Arc::new(set))
    }

    /// A remote store's records.
    #[cfg(feature = "remote")]
    pub(crate) fn remote(store: Arc<crate::remote::RemoteStore>) -> Records {
        Records { source: store.clone(), origin: Origin::Remote(store) }
    }

    /// `parts` back to back (a dense or ragged concatenation), starting where `starts` says.
    pub(crate) fn concat(parts: Vec<Part>, starts: Vec<u64>, path: PathBuf) -> Records {
        Records::other(Arc::new(Concat::new(parts, starts, path)))
    }

    /// Records of any other source.
    pub(crate) fn other(source: Arc<dyn Backing>) -> Records {
        Records { source, origin: Origin::Other }
    }

    /// The local store, when the records are exactly one.
    pub(crate) fn as_store(&self) -> Option<&Arc<Store>> {
        match &self.origin {
            Origin::Store(s) => Some(s),
            _ => None,
        }
    }

    /// The remote store, when the records are exactly one.
    #[cfg(feature = "remote")]
    pub(crate) fn as_remote(&self) -> Option<&crate::remote::RemoteStore> {
        match &self.origin {
            Origin::Remote(r) => Some(r),
            _ => None,
        }
    }

    /// Asks for the pages of the records `indices` of `view` (or of all the records), to be
    /// read soon ([`Backing::advise`]); `path` names the dataset in errors.
    pub(crate) fn advise(&self, view: Option<&Selection>, indices: &[u32], path: &Path) -> Result<()> {
        let mut mapped = Vec::new();
        let indices = map_view(view, indices, &mut mapped, path)?;
        self.source.advise(indices)
    }

    /// Records in all.
    pub(crate) fn len(&self) -> usize {
        self.source.len() as usize
    }
}

/// Records held in memory, back to back in one typed buffer (a dataset built from values).
#[derive(Debug)]
pub(crate) struct InMemory {
    values: Arc<ArrayData>,
    bounds: Bounds,
    /// For errors: `<memory>`.
    path: PathBuf,
    /// Each record's file, where it was read from one ([`InMemory::with_files`]).
    files: Option<Arc<[PathBuf]>>,
}

/// Where each record of an [`InMemory`] lies in its bytes.
#[derive(Debug)]
enum Bounds {
    /// Record `i` is bytes `i * stride .. (i + 1) * stride` (a dense dataset's items).
    Stride { stride: usize, len: usize },
    /// Record `i` is bytes `offsets[i] .. offsets[i + 1]`.
    Offsets(Vec<usize>),
}

impl InMemory {
    /// Items of `stride` bytes back to back: `values` holds `len` of them.
    pub(crate) fn fixed(values: Arc<ArrayData>, stride: usize, len: usize) -> InMemory {
        InMemory {
            values,
            bounds: Bounds::Stride { stride, len },
            path: PathBuf::from("<memory>"),
            files: None,
        }
    }

    /// Records back to back, record `i` elements `offsets[i] .. offsets[i + 1]` of `values`.
    pub(crate) fn ragged(values: Arc<ArrayData>, offsets: &[usize]) -> InMemory {
        let elem = values.dtype().size();
        let bounds = Bounds::Offsets(offsets.iter().map(|o| o * elem).collect());
        InMemory { values, bounds, path: PathBuf::from("<memory>"), files: None }
    }

    /// The same records, record `i` read from `files[i]` (as errors about it say).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where `files` is not one per record.
    pub(crate) fn with_files(self, files: Arc<[PathBuf]>) -> Result<InMemory> {
        if files.len() as u64 != Backing::len(&self) {
            return Err(Error::InvalidArgument(format!(
                "{} files for {} records",
                files.len(),
                Backing::len(&self)
            )));
        }
        Ok(InMemory { files: Some(files), ..self })
    }

    /// Record `i`'s bytes in `values`.
    fn range(&self, i: u32) -> Result<Range<usize>> {
        let i = i as usize;
        let n = Backing::len(self) as usize;
        if i >= n {
            return Err(Error::IndexOutOfRange { path: self.path.clone(), index: i as u64, len: n as u64 });
        }
        Ok(match &self.bounds {
            Bounds::Stride { stride, .. } => i * stride..(i + 1) * stride,
            Bounds::Offsets(o) => o[i]..o[i + 1],
        })
    }
}

impl Backing for InMemory {
    fn record_file(&self, i: u32) -> Option<PathBuf> {
        self.files.as_ref()?.get(i as usize).cloned()
    }

    fn len(&self) -> u64 {
        match &self.bounds {
            Bounds::Stride { len, .. } => *len as u64,
            Bounds::Offsets(o) => (o.len() - 1) as u64,
        }
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        // An in-memory dataset's records are below 2^32 bytes: its values are a Vec.
        indices.iter().map(|&i| self.range(i).map(|r| r.len() as u32)).collect()
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
        _par: Parallelism,
    ) -> Result<()> {
        let bytes = self.values.as_bytes();
        for &i in indices {
            let r = self.range(i)?;
            if r.len() != record_len {
                return Err(Error::CorruptRecord {
                    path: self.path.clone(),
                    index: u64::from(i),
                    reason: format!("{} bytes, the dataset's records are {record_len}", r.len()),
                    source: None,
                });
            }
            dst.copy(&bytes[r]);
        }
        Ok(())
    }

    fn gather_var(&self, indices: &[u32], _par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        let ranges = indices.iter().map(|&i| self.range(i)).collect::<Result<Vec<_>>>()?;
        let bytes = self.values.as_bytes();
        fill(&mut ranges.iter().map(|r| r.len() as u32), &mut |mut dst| {
            for r in &ranges {
                dst.copy(&bytes[r.clone()]);
            }
            Ok(())
        })
    }
}

/// One part of a [`Concat`]: a source's records and its view.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) records: Arc<dyn Backing>,
    pub(crate) view: Option<Selection>,
    pub(crate) path: PathBuf,
}

impl Part {
    /// Records in the part (of its view).
    fn len(&self) -> u64 {
        match &self.view {
            Some(v) => v.len() as u64,
            None => self.records.len(),
        }
    }
}

/// Sources back to back (`DenseSource::concat`, `RaggedSource::concat`): record `i` is record
/// `i - starts[p]` of the part `p` whose range holds `i`; a batch's runs of one part are read by
/// that part into their stretch.
#[derive(Debug)]
pub(crate) struct Concat {
    parts: Vec<Part>,
    /// `starts[p]` is part `p`'s first index, then the total.
    starts: Vec<u64>,
    path: PathBuf,
}

impl Concat {
    /// `parts` back to back, starting where `starts` says (from `concat_plan`).
    pub(crate) fn new(parts: Vec<Part>, starts: Vec<u64>, path: PathBuf) -> Concat {
        debug_assert_eq!(parts.len() + 1, starts.len());
        debug_assert!(parts.iter().zip(starts.windows(2)).all(|(p, w)| p.len() == w[1] - w[0]));
        Concat { parts, starts, path }
    }

    /// `indices` split into runs of one part, each mapped through the part's view: `(part,
    /// indices in the part's records)`.
    fn runs(&self, indices: &[u32]) -> Result<Vec<(usize, Vec<u32>)>> {
        let mut runs = concat_runs(indices, &self.starts, &self.path)?;
        for (p, local) in &mut runs {
            let part = &self.parts[*p];
            if let Some(view) = &part.view {
                let mut mapped = Vec::new();
                map_view(Some(view), local, &mut mapped, &part.path)?;
                *local = mapped;
            }
        }
        Ok(runs)
    }
}

impl Backing for Concat {
    fn len(&self) -> u64 {
        self.starts[self.starts.len() - 1]
    }

    /// The parts' fingerprints folded, where each has one and reads all its records.
    fn fingerprint(&self) -> Option<u64> {
        let mut crc = 0u32;
        for part in &self.parts {
            if part.view.is_some() {
                return None;
            }
            crc = crc32c::crc32c_append(crc, &part.records.fingerprint()?.to_le_bytes());
        }
        Some(u64::from(crc) | (self.len() << 32))
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        let mut lens = Vec::with_capacity(indices.len());
        for (p, local) in self.runs(indices)? {
            lens.extend(self.parts[p].records.record_lens(&local)?);
        }
        Ok(lens)
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        for (p, local) in self.runs(indices)? {
            let sub = dst.split_off(local.len() * record_len);
            self.parts[p].records.gather_fixed(&local, record_len, sub, par)?;
        }
        Ok(())
    }

    fn gather_var(&self, indices: &[u32], par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        // The lengths come from the index alone (nothing is read twice); each run is then
        // read by its part straight into its stretch of the caller's buffer.
        let runs = self.runs(indices)?;
        let mut lens = Vec::with_capacity(indices.len());
        for (p, local) in &runs {
            lens.extend(self.parts[*p].records.record_lens(local)?);
        }
        fill(&mut lens.iter().copied(), &mut |mut dst| {
            for (p, local) in &runs {
                self.parts[*p].records.gather_var(local, par, &mut |part_lens, read| {
                    let n: usize = part_lens.map(|l| l as usize).sum();
                    if n > dst.remaining() {
                        return Err(Error::InvalidArgument(format!(
                            "a part's records grew from their sizes as planned: {n} bytes into {}",
                            dst.remaining()
                        )));
                    }
                    read(dst.split_off(n))
                })?;
            }
            Ok(())
        })
    }

    fn wants_hints(&self) -> bool {
        self.parts.iter().any(|p| p.records.wants_hints())
    }

    fn advise(&self, indices: &[u32]) -> Result<()> {
        for (p, local) in self.runs(indices)? {
            self.parts[p].records.advise(&local)?;
        }
        Ok(())
    }
}

/// `indices` of a concatenation split into runs of consecutive positions in one part, each as
/// `(part, indices within the part)`.
fn concat_runs(indices: &[u32], starts: &[u64], path: &Path) -> Result<Vec<(usize, Vec<u32>)>> {
    let len = starts[starts.len() - 1];
    let mut runs: Vec<(usize, Vec<u32>)> = Vec::new();
    for &i in indices {
        let g = u64::from(i);
        if g >= len {
            return Err(Error::IndexOutOfRange { path: path.to_path_buf(), index: g, len });
        }
        let p = starts.partition_point(|&s| s <= g) - 1;
        let local = (g - starts[p]) as u32;
        match runs.last_mut() {
            Some((q, v)) if *q == p => v.push(local),
            _ => runs.push((p, vec![local])),
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fill_vec;

    fn values(n: u8) -> Arc<ArrayData> {
        Arc::new(ArrayData::U8((0..n).collect()))
    }

    fn gather_var(src: &dyn Backing, indices: &[u32]) -> Result<(Vec<u32>, Vec<u8>)> {
        let mut out = (Vec::new(), Vec::new());
        src.gather_var(indices, Parallelism::CallingThread, &mut |lens, read| {
            out.0 = lens.collect();
            let total = out.0.iter().map(|&l| l as usize).sum();
            fill_vec(&mut out.1, total, read)
        })?;
        Ok(out)
    }

    #[test]
    fn a_concatenation_reads_each_run_from_its_part_through_its_view() {
        // Part 0: records [0,1] [2,3,4] [5]; part 1: a view (reversed) of items of 2 bytes.
        let ragged = InMemory::ragged(values(6), &[0, 2, 5, 6]);
        let fixed = InMemory::fixed(values(6), 2, 3);
        let view = Selection::indices(vec![2, 1, 0]);
        let parts = vec![
            Part { records: Arc::new(ragged), view: None, path: "a".into() },
            Part { records: Arc::new(fixed), view: Some(view), path: "b".into() },
        ];
        let concat = Concat::new(parts, vec![0, 3, 6], "c".into());
        assert_eq!(concat.len(), 6);
        let (lens, bytes) = gather_var(&concat, &[3, 1, 5, 0]).unwrap();
        assert_eq!(lens, [2, 3, 2, 2]);
        assert_eq!(bytes, [4, 5, 2, 3, 4, 0, 1, 0, 1]);
        assert!(matches!(gather_var(&concat, &[6]), Err(Error::IndexOutOfRange { index: 6, len: 6, .. })));
        assert!(matches!(concat.record_lens(&[0, 7]), Err(Error::IndexOutOfRange { index: 7, .. })));
    }

    #[test]
    fn an_in_memory_fixed_gather_refuses_a_record_of_another_length() {
        let ragged = InMemory::ragged(values(6), &[0, 2, 5, 6]);
        let mut out = vec![0u8; 4];
        let r = crate::sys::fill_slice(&mut out, |d| ragged.gather_fixed(&[0, 1], 2, d, Parallelism::Pool));
        assert!(matches!(r, Err(Error::CorruptRecord { index: 1, .. })));
    }
}
