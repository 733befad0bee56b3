//! A fixed-stride store on object storage: its entries are its blocks of records (each with the
//! block's crc32c from `index.zr`), so a batch fetches (through the page cache, coalesced) and
//! checks the blocks holding its records, at most about 4 KiB around each, and copies each
//! record out of its block. A block that fails its check is reported naming the first record
//! asked for in it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::RemoteStore;
use crate::sys::Destination;
use crate::{Error, Result};

impl RemoteStore {
    /// Every index of a batch below the count, and the batch's records within the memory limit
    /// (with the blocks fetched for them).
    pub(super) fn check_stride_batch(&self, indices: &[u64]) -> Result<()> {
        let Some((stride, count)) = self.stride else { return Ok(()) };
        if let Some(&i) = indices.iter().find(|&&i| i >= count) {
            return Err(Error::IndexOutOfRange { path: PathBuf::from(&self.url), index: i, len: count });
        }
        let bytes = (indices.len() as u64).saturating_mul(stride.record_size).saturating_mul(2);
        if bytes > self.options.memory() {
            return Err(Error::BatchTooLarge {
                path: PathBuf::from(&self.url),
                records: indices.len() as u64,
                bytes,
                limit: self.options.memory(),
            });
        }
        Ok(())
    }

    /// The blocks holding `indices` (each once, in order) with the first record asked for in
    /// each, and their bytes fetched and checked; a block's error names that record.
    fn fetch_blocks(&self, indices: &[u64]) -> Result<(BTreeMap<u64, usize>, Vec<u8>)> {
        self.check_stride_batch(indices)?;
        let (stride, _) = self.stride.expect("a fixed-stride store");
        let mut first_asked: BTreeMap<u64, u64> = BTreeMap::new();
        for &i in indices {
            first_asked.entry(stride.block_of(i)).or_insert(i);
        }
        let blocks: Vec<u64> = first_asked.keys().copied().collect();
        let flat = self.gather_flat(&blocks).map_err(|e| match e {
            Error::CorruptRecord { path, index, reason, source } => Error::CorruptRecord {
                path,
                index: first_asked.get(&index).copied().unwrap_or(index),
                reason: format!(
                    "its block (records {:?}): {reason}",
                    stride.block_records(index, self.len())
                ),
                source,
            },
            other => other,
        })?;
        // Where each block starts in `flat`: blocks back to back, in order.
        let mut at = 0usize;
        let starts = blocks
            .iter()
            .map(|&b| {
                let start = at;
                at += self.entries[b as usize].logical as usize;
                (b, start)
            })
            .collect();
        Ok((starts, flat))
    }

    /// The records of `indices` back to back.
    pub(super) fn gather_stride_flat(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let (stride, _) = self.stride.expect("a fixed-stride store");
        let mut out = Vec::new();
        let len = indices.len() * stride.record_size as usize;
        crate::sys::fill_vec(&mut out, len, |mut d| self.gather_stride_to(indices, &mut d))?;
        Ok(out)
    }

    /// [`RemoteStore::gather_stride_flat`] into `dst`.
    pub(super) fn gather_stride_to(&self, indices: &[u64], dst: &mut Destination<'_>) -> Result<()> {
        let (starts, flat) = self.fetch_blocks(indices)?;
        let (stride, _) = self.stride.expect("a fixed-stride store");
        let r = stride.record_size as usize;
        for &i in indices {
            let b = stride.block_of(i);
            let at = starts[&b] + (i - stride.block_records(b, i + 1).start) as usize * r;
            dst.copy(&flat[at..at + r]);
        }
        Ok(())
    }
}
