//! [`Backing`]: what a dataset reads its records through, whatever holds them (a local
//! store, a store set, a store on object storage, memory, a concatenation). A batch is one call
//! through the trait, never one per record: the dispatch is per batch and costs nothing beside
//! the gather.

use super::{Parallelism, Store};
use crate::Result;
use crate::sys::Destination;

/// The second half of a variable-length gather, handed to its caller: called once with the
/// batch's record lengths (in order; the caller sizes its buffer from them) and the read that
/// fills a destination of exactly their total size.
pub(crate) type VarFill<'a> = &'a mut dyn FnMut(
    &mut dyn Iterator<Item = u32>,
    &mut dyn FnMut(Destination<'_>) -> Result<()>,
) -> Result<()>;

/// Records by index, gathered into a destination: the face every dataset backing shows.
pub(crate) trait Backing: Send + Sync + std::fmt::Debug {
    /// Records in the source.
    fn len(&self) -> u64;

    /// The logical lengths of the records at `indices`, from the index alone.
    ///
    /// # Errors
    /// [`crate::Error::IndexOutOfRange`]; the source's index errors.
    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>>;

    /// Gathers records that are each exactly `record_len` bytes into `dst` (`indices.len() *
    /// record_len` bytes), split over the pool or not as `par` says.
    ///
    /// # Errors
    /// The source's gather errors; [`crate::Error::CorruptRecord`] naming a record of another
    /// length.
    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        dst: Destination<'_>,
        par: Parallelism,
    ) -> Result<()>;

    /// Gathers the records at `indices`, of any lengths: `fill` gets their lengths, sizes a
    /// buffer, and runs the read into it.
    ///
    /// # Errors
    /// The source's gather errors, or `fill`'s.
    fn gather_var(&self, indices: &[u32], par: Parallelism, fill: VarFill<'_>) -> Result<()>;

    /// Whether hints of batches to come ([`Backing::advise`]) may help: a local store whose
    /// pages are not known to be resident. False by default (memory, remote stores).
    fn wants_hints(&self) -> bool {
        false
    }

    /// Asks for the pages of the records at `indices`, to be read soon (a loader's steps
    /// ahead), without waiting for them; a no-op by default.
    ///
    /// # Errors
    /// The source's index errors; an index out of range is skipped (the read reports it).
    fn advise(&self, indices: &[u32]) -> Result<()> {
        let _ = indices;
        Ok(())
    }

    /// The file record `i` was read from, where each record has one (an image folder read
    /// unconverted): what an error about the record names. None by default.
    fn record_file(&self, i: u32) -> Option<std::path::PathBuf> {
        let _ = i;
        None
    }

    /// A fingerprint of the records from what the source holds in memory of its index (a
    /// remote store's checksums), nothing fetched: another write at the same place (a store
    /// pushed again, a set stitched again over parts pushed again) has another. None where the
    /// source keeps none (a local store's directory tells its own replacement).
    fn fingerprint(&self) -> Option<u64> {
        None
    }
}

impl Backing for Store {
    fn len(&self) -> u64 {
        Store::len(self)
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        Store::record_lens(self, indices)
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
        // Resolved once: the lengths that size the buffer are the entries the read follows.
        let batch = self.resolve_batch(indices)?;
        fill(&mut batch.lens(), &mut |dst| self.read_resolved(&batch, dst, par))
    }

    fn wants_hints(&self) -> bool {
        Store::wants_hints(self)
    }

    fn advise(&self, indices: &[u32]) -> Result<()> {
        Store::advise(self, indices)
    }
}
