//! A store set opened: its parts checked against its manifest and schema ([`check_part`], also
//! what a set on object storage checks), one index space over them, gathers split by part.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::schema::Schema;
use super::set::{SET_FILE, SameStore, read_manifest};
use crate::store::{Backing, Parallelism, Resolved, VarFill};
use crate::sys::Destination;
use crate::{Error, Result, Store, StoreOptions};

pub(crate) use crate::store::check_part;

/// Whether `dir` holds a store set.
pub(crate) fn is_set(dir: &Path) -> bool {
    dir.join(SET_FILE).is_file()
}

/// The parts of an open store set and where each starts in the set's index space.
#[derive(Debug)]
pub(crate) struct StoreSet {
    parts: Vec<Arc<Store>>,
    /// `starts[p]` is part `p`'s first global index; `starts[parts.len()]` the set's length.
    starts: Vec<u64>,
    path: PathBuf,
}

impl StoreSet {
    /// Opens the set in `dir`: every part, checked against the manifest and the set's schema.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the manifest when it does not decode or is too large;
    /// [`Error::Schema`] naming a part whose schema or record count changed since the set was
    /// written; the parts' open errors.
    pub(crate) fn open(dir: &Path, schema: &Schema, opts: &StoreOptions) -> Result<StoreSet> {
        let file = dir.join(SET_FILE);
        let m = read_manifest(dir)?
            .ok_or_else(|| Error::io("read", &file, std::io::ErrorKind::NotFound.into()))?;
        let mut parts = Vec::with_capacity(m.parts.len());
        let mut starts = vec![0u64];
        let mut seen = SameStore::default();
        for e in &m.parts {
            let p = dir.join(&e.path);
            let s = Schema::read(&p)?;
            if s != *schema {
                return Err(Error::Schema {
                    path: p,
                    reason: format!(
                        "the part's schema ({s}) is not the set's ({schema}): it changed after stitching"
                    ),
                });
            }
            let store = Store::open_with(&p, opts.clone())?;
            if let Some(first) = seen.insert(&store, &p)? {
                return Err(Error::Corrupt {
                    path: file,
                    offset: 0,
                    reason: format!(
                        "parts {} and {} are the same store: its records would be read twice",
                        first.display(),
                        e.path
                    ),
                    source: None,
                });
            }
            check_part(p, store.len(), e.records, e.identity, || store.identity())?;
            let end = starts[starts.len() - 1] + e.records;
            if end > u64::from(u32::MAX) {
                return Err(Error::Corrupt {
                    path: file,
                    offset: 0,
                    reason: "the parts hold more than 2^32 - 1 records".into(),
                    source: None,
                });
            }
            starts.push(end);
            parts.push(Arc::new(store));
        }
        Ok(StoreSet { parts, starts, path: dir.to_path_buf() })
    }

    /// Records in the set.
    pub(crate) fn len(&self) -> u64 {
        self.starts[self.parts.len()]
    }

    /// Splits `indices` into runs of consecutive positions in one part: `(part, local indices)`.
    fn runs(&self, indices: &[u32]) -> Result<Vec<(usize, Vec<u64>)>> {
        let mut runs: Vec<(usize, Vec<u64>)> = Vec::new();
        for &i in indices {
            let i = u64::from(i);
            if i >= self.len() {
                return Err(Error::IndexOutOfRange { path: self.path.clone(), index: i, len: self.len() });
            }
            let p = self.starts.partition_point(|&s| s <= i) - 1;
            let local = i - self.starts[p];
            match runs.last_mut() {
                Some((q, v)) if *q == p => v.push(local),
                _ => runs.push((p, vec![local])),
            }
        }
        Ok(runs)
    }

    /// The fixed-stride gather of a dense set: each run of one part is that part's gather into
    /// its own stretch of `dst`.
    fn gather_fixed_to(
        &self,
        indices: &[u32],
        item_bytes: usize,
        mut dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        let runs = self.runs(indices)?;
        if dst.remaining() != indices.len() * item_bytes {
            return Err(Error::InvalidArgument(format!(
                "gather of {} records of {item_bytes} bytes into {} bytes",
                indices.len(),
                dst.remaining()
            )));
        }
        for (p, local) in &runs {
            let sub = dst.split_off(local.len() * item_bytes);
            self.parts[*p].gather_fixed_to(local, item_bytes, sub, par)?;
        }
        Ok(())
    }

    /// The runs of `indices` resolved in their parts (lengths known before the read).
    fn resolve(&self, indices: &[u32]) -> Result<Vec<(usize, Resolved)>> {
        self.runs(indices)?
            .into_iter()
            .map(|(p, local)| Ok((p, self.parts[p].resolve_batch(&local)?)))
            .collect()
    }

    /// Reads resolved runs into `dst`, each into its own stretch.
    fn read_resolved(
        &self,
        runs: &[(usize, Resolved)],
        mut dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        for (p, r) in runs {
            let n = usize::try_from(r.total())
                .map_err(|_| Error::InvalidArgument("a batch over usize".into()))?;
            let sub = dst.split_off(n);
            self.parts[*p].read_resolved(r, sub, par)?;
        }
        Ok(())
    }
}

/// A set read as one index space: each run of one part read by that part.
impl Backing for StoreSet {
    fn len(&self) -> u64 {
        StoreSet::len(self)
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        let mut lens = Vec::with_capacity(indices.len());
        for (p, local) in self.runs(indices)? {
            lens.extend(self.parts[p].record_lens(&local)?);
        }
        Ok(lens)
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()> {
        self.gather_fixed_to(indices, record_len, dst, par)
    }

    fn gather_var(&self, indices: &[u32], par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        let runs = self.resolve(indices)?;
        fill(&mut runs.iter().flat_map(|(_, r)| r.lens()), &mut |dst| self.read_resolved(&runs, dst, par))
    }

    fn wants_hints(&self) -> bool {
        self.parts.iter().any(|p| p.wants_hints())
    }

    fn advise(&self, indices: &[u32]) -> Result<()> {
        for (p, local) in self.runs(indices)? {
            self.parts[p].advise(&local)?;
        }
        Ok(())
    }
}
