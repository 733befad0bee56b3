//! A store's identity: the fingerprint a store set keeps of each part, computed alike for a
//! local store ([`Store::identity`]) and one on object storage (the remote store's), so that a
//! set pushed with its parts checks them where it is read.

use super::Store;
use super::report::SCAN_BLOCK;
use crate::format::v2::Entry;
use crate::{Error, Result};

/// Records sampled, and the bytes of each hashed.
const SAMPLES: u64 = 16;
const PREFIX: usize = 4096;

/// The fold of an identity: the count, the sampled records' lengths and prefixes, then what the
/// index keeps in index order (checksums, or a v1 entry's place and lengths). The samples and
/// the index are folded apart: folded into one CRC, a sampled record and its own checksum
/// (itself a CRC of the same bytes) cancelled where they stood as far apart in the fold as the
/// record from its block's end, and a part changed there kept its identity (look 163, L163-1:
/// the last record of a store of one fixed-stride block, a one-record store). The one fold is
/// still computed, for the sets stitched before ([`Ids::before`]).
pub(crate) struct Identity {
    n: u64,
    crc: u32,
    samples: u32,
    index: u32,
}

/// A store's identity as sets keep it now, and as sets stitched before look 163 kept it: a part
/// is the one a set was stitched with when either is the set's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ids {
    /// The samples and the index folded apart.
    pub(crate) now: u64,
    /// The one fold of sets stitched before.
    pub(crate) before: u64,
}

impl Ids {
    /// Whether `kept` (a set's) is this store's identity, now or as kept before.
    pub(crate) fn holds(self, kept: u64) -> bool {
        self.now == kept || self.before == kept
    }
}

impl Identity {
    /// A fold over a store of `n` records.
    pub(crate) fn new(n: u64) -> Identity {
        let crc = crc32c::crc32c(&n.to_le_bytes());
        Identity { n, crc, samples: crc, index: crc }
    }

    /// The records to sample, in the order [`Identity::record`] takes them: up to 16, evenly.
    pub(crate) fn samples(&self) -> Vec<u64> {
        let (n, k) = (self.n, self.n.min(SAMPLES));
        (0..k).map(|s| if k < 2 { 0 } else { s * (n - 1) / (k - 1) }).collect()
    }

    /// A sampled record, as decoded.
    pub(crate) fn record(&mut self, rec: &[u8]) {
        for bytes in [&(rec.len() as u64).to_le_bytes()[..], &rec[..rec.len().min(PREFIX)]] {
            self.crc = crc32c::crc32c_append(self.crc, bytes);
            self.samples = crc32c::crc32c_append(self.samples, bytes);
        }
    }

    /// A checksum the index keeps (a v2 entry's or a fixed-stride block's).
    pub(crate) fn checksum(&mut self, crc: u32) {
        self.crc = crc32c::crc32c_append(self.crc, &crc.to_le_bytes());
        self.index = crc32c::crc32c_append(self.index, &crc.to_le_bytes());
    }

    /// A v1 entry, which keeps no checksum: where its record lies and how long it is.
    pub(crate) fn v1_entry(&mut self, e: &Entry) {
        for field in [u64::from(e.chunk), e.offset, u64::from(e.stored), u64::from(e.logical)] {
            self.crc = crc32c::crc32c_append(self.crc, &field.to_le_bytes());
            self.index = crc32c::crc32c_append(self.index, &field.to_le_bytes());
        }
    }

    /// The identity, now and as kept before.
    pub(crate) fn finish(self) -> Ids {
        Ids {
            now: (u64::from(self.samples) << 32) | u64::from(self.index),
            before: u64::from(self.crc) | (self.n << 32),
        }
    }
}

impl Store {
    /// A fingerprint of what the store holds: its count, the first 4 KiB of up to 16 records
    /// sampled evenly (as decoded), and every checksum its index keeps in index order (a v2
    /// entry's, or a fixed-stride block's: one record changed anywhere changes it, a delete and
    /// an append that keep the count included). What a store set keeps of each part, so that a
    /// part replaced or rewritten after stitching is noticed on open. Compaction and migration
    /// between entries and compact keep it (neither changes a record's bytes); migration to or
    /// from the fixed stride, or from v1, changes it: stitch again. v1 keeps no checksums: every
    /// entry's chunk, offset and lengths stand in (a compaction changes them too), which do not
    /// depend on the records' bytes: bytes edited in place outside the sampled prefixes, or a
    /// whole other store of the same shape whose sampled prefixes match (look 81), go unnoticed.
    /// Reads the index once (a v2 store's 32 or 16 bytes a record).
    ///
    /// # Errors
    /// The errors of reading those records and the index.
    pub(crate) fn identity(&self) -> Result<Ids> {
        let n = self.len();
        let mut id = Identity::new(n);
        for idx in id.samples() {
            id.record(&self.get(idx)?);
        }
        match self.index.view(n)? {
            super::index::View::Fixed(f) => {
                for b in 0..f.stride.blocks(n) {
                    id.checksum(f.blocks.block_crc(b));
                }
            }
            view => {
                let v1 = matches!(view, super::index::View::V1(_));
                let mut first = 0;
                while first < n {
                    let end = (first + SCAN_BLOCK).min(n);
                    for e in self.index.entries(first, end)? {
                        if v1 { id.v1_entry(&e) } else { id.checksum(e.crc) }
                    }
                    first = end;
                }
            }
        }
        Ok(id.finish())
    }
}

/// Checks a part at `path` against what its set keeps of it: the `holds` records it has against
/// the `records` it was stitched with, then its identity (`identity` called only when the set
/// keeps one: `kept`).
///
/// # Errors
/// [`Error::Schema`] naming the part; `identity`'s.
pub(crate) fn check_part(
    path: std::path::PathBuf,
    holds: u64,
    records: u64,
    kept: Option<u64>,
    identity: impl FnOnce() -> Result<Ids>,
) -> Result<()> {
    if holds != records {
        return Err(Error::Schema {
            path,
            reason: format!(
                "the part holds {holds} records, the set was stitched with {records}: it changed after stitching \
                 (appended to, or records deleted); stitch the set again once its parts are complete"
            ),
        });
    }
    if let Some(want) = kept
        && !identity()?.holds(want)
    {
        // Its identity hashes how the index places the records (review 51): a part migrated or
        // compacted since holds the same records under another index, so the message names
        // every cause and the way out, never only "replaced".
        return Err(Error::Schema {
            path,
            reason: "the part is not the store the set was stitched with (its index differs): replaced, \
                     damaged, or rewritten by migrate or compact after stitching; verify the part, and stitch \
                     the set again if its records are the ones wanted"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets stitched before look 163 keep the one fold (the count, samples and checksums in one
    /// CRC, the count in the high half): `before` is it, so their parts still open; `now` is
    /// another, and `holds` takes either.
    #[test]
    fn the_fold_of_sets_stitched_before_is_kept_beside_the_new() {
        let (n, rec, crc) = (3u64, b"abc".as_slice(), 0xdead_beef_u32);
        let mut one = crc32c::crc32c(&n.to_le_bytes());
        one = crc32c::crc32c_append(one, &(rec.len() as u64).to_le_bytes());
        one = crc32c::crc32c_append(one, rec);
        one = crc32c::crc32c_append(one, &crc.to_le_bytes());
        let mut id = Identity::new(n);
        id.record(rec);
        id.checksum(crc);
        let ids = id.finish();
        assert_eq!(ids.before, u64::from(one) | (n << 32));
        assert_ne!(ids.now, ids.before);
        assert!(ids.holds(ids.now) && ids.holds(ids.before) && !ids.holds(ids.now ^ 1));
    }
}
