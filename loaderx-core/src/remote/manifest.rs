//! What `verify` checks of a v2 store's `manifest.zr` on the server, as a local verify checks
//! it (look 100, L100-4: a manifest missing, empty or another store's was not looked at): there
//! and decoding, its count and chunks the index header's, and each chunk object the length it
//! gives. The chunks' checksums of a manifest that agrees with the header are not compared: that
//! would fetch every chunk's bytes a second time, where [`RemoteStore::verify`] checks every
//! record's own; a manifest behind the header (a store pushed between a writer's syncs, or
//! another store's) has its chunks' prefixes summed, as a local verify sums them.

use std::path::PathBuf;

use super::RemoteStore;
use super::fetch::{add, get_optional};
use crate::format::v2::{Header, Manifest};
use crate::store::{INDEX_FILE, MANIFEST_FILE, chunk_name};
use crate::{Error, Format, Result};

/// The most a remote `manifest.zr` is read: 16 bytes a chunk, and a store of 2^20 chunks is
/// past any real one.
pub(super) const MAX_MANIFEST: u64 = 64 << 20;

/// The bytes read at a time to sum a chunk's prefix: memory flat whatever the chunk's size.
const SUM_PIECE: u64 = 8 << 20;

impl RemoteStore {
    /// The problems of this v2 store's manifest on the server (none for v1, which has none).
    ///
    /// # Errors
    /// [`Error::Remote`] for a request that failed after its retries; the problems found are
    /// the `Ok` value, each an [`Error::Corrupt`] naming the object.
    pub fn manifest_problems(&self) -> Result<Vec<Error>> {
        if self.format() != Format::V2 {
            return Ok(Vec::new());
        }
        let index = self.cached_index()?;
        let h = Header::parse(&index, true).map_err(|e| {
            crate::store::v2_header_error(std::path::Path::new(&self.object_url(INDEX_FILE)), e)
        })?;
        let path = PathBuf::from(self.object_url(MANIFEST_FILE));
        let corrupt =
            |offset: u64, reason: String| Error::Corrupt { path: path.clone(), offset, reason, source: None };
        add(&self.counters.requests, 1);
        let manifest = match get_optional(&self.url, MANIFEST_FILE, &self.options, MAX_MANIFEST)? {
            None => return Ok(vec![corrupt(0, "missing".into())]),
            Some(bytes) => match Manifest::decode(&bytes) {
                Ok(m) => m,
                Err((offset, reason)) => return Ok(vec![corrupt(offset, reason)]),
            },
        };
        let mut problems = Vec::new();
        let tail = u64::from(h.tail_chunk);
        // Behind the header as a deferred store's is between syncs: true as far as it goes.
        let behind = manifest.count < h.count && manifest.chunks.len() as u64 <= tail + 1;
        if !behind && manifest.count != h.count {
            problems
                .push(corrupt(0, format!("counts {} records; the index header {}", manifest.count, h.count)));
        }
        if !behind && manifest.chunks.len() as u64 != tail + 1 {
            problems.push(corrupt(
                0,
                format!(
                    "lists {} chunks; the index header's tail is chunk {}",
                    manifest.chunks.len(),
                    h.tail_chunk
                ),
            ));
        }
        if !behind && manifest.chunks.last().is_some_and(|c| c.len != h.tail_offset) {
            problems.push(corrupt(
                0,
                format!(
                    "gives the tail chunk {} bytes; the index header {}",
                    manifest.chunks.last().map_or(0, |c| c.len),
                    h.tail_offset
                ),
            ));
        }
        if behind {
            // Only true as far as it goes if its chunks' bytes are the ones it sums (a manifest
            // of another, smaller store is behind too): read a piece at a time and summed.
            for (id, want) in manifest.chunks.iter().enumerate() {
                let name = chunk_name(id as u32);
                let mut crc = 0u32;
                for start in (0..want.len).step_by(SUM_PIECE as usize) {
                    let piece = self.get_range(&name, start..want.len.min(start + SUM_PIECE))?;
                    crc = crc32c::crc32c_append(crc, &piece);
                }
                if crc != want.crc {
                    problems.push(corrupt(
                        0,
                        format!(
                            "behind the index header ({} records of {}), and chunk {id}'s first {} bytes sum to crc32c \
                             {crc:#010x}, not its {:#010x}: another store's, or damaged",
                            manifest.count, h.count, want.len, want.crc
                        ),
                    ));
                }
            }
        }
        let link = self.link()?;
        for (id, want) in manifest.chunks.iter().enumerate().take(tail as usize + 1) {
            let name = chunk_name(id as u32);
            add(&self.counters.requests, 1);
            let size = match link.runtime.block_on(link.store.head(&self.key(&name))) {
                Ok(meta) => meta.size,
                Err(object_store::Error::NotFound { .. }) => {
                    problems.push(Error::Corrupt {
                        path: PathBuf::from(self.object_url(&name)),
                        offset: 0,
                        reason: format!("missing; the manifest gives it {} bytes", want.len),
                        source: None,
                    });
                    continue;
                }
                Err(e) => return Err(self.remote_err(&name, None, &e)),
            };
            // The tail object may hold bytes past the committed end; every other is whole.
            let fits = if id as u64 == tail { size >= want.len } else { size == want.len };
            if !fits {
                problems.push(Error::Corrupt {
                    path: PathBuf::from(self.object_url(&name)),
                    offset: 0,
                    reason: format!("{size} bytes; the manifest gives it {}", want.len),
                    source: None,
                });
            }
        }
        Ok(problems)
    }
}
