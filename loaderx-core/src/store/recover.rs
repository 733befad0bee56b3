//! What an open checks, and a writer's open repairs, before anything is read or written: the
//! v2 header's frontier (a torn commit's, or damage, told apart by the manifest), every chunk up
//! to the tail, the bytes a killed append left past the frontier, and `manifest.zr` (kept when it
//! describes the chunks, computed again when missing, refused when damaged).

use super::Store;
use super::files::{JOURNAL_FILE, MANIFEST_FILE, chunk_path, read_manifest, write_atomic_bytes_in};
use super::index::{Index, v2_header_error};
use crate::format::v2::{self, ChunkSummary, Manifest};
use crate::sys::read_exact_at;
use crate::{Error, Result};

impl Store {
    /// What every open checks, readers' too: a fixed-stride header whose checksum holds has its
    /// frontier where its count of records ends (the chunks are then checked for that frontier,
    /// so a count no chunk holds is refused here, not walked). A header whose checksum fails is
    /// the writer's to tell from a commit in flight ([`Store::check_frontier`]).
    pub(super) fn check_fixed_frontier(&self) -> Result<()> {
        let Index::Fixed(map, _) = &self.index else { return Ok(()) };
        match v2::Header::parse(&map.header(), true) {
            Ok(h) => self.fixed_frontier_agrees(&h),
            Err(_) => Ok(()),
        }
    }

    /// What every open of a fixed-stride store checks, readers' too, whatever the header's
    /// checksum says: the chunks hold the bytes of the count's records (those before the
    /// frontier's chunk whole, that one up to the frontier). A count's bytes are durable before
    /// it is published, so an honest store passes, a commit in flight included; a count no chunk
    /// holds (or a truncated chunk) is refused here, not walked record by record.
    pub(super) fn check_fixed_chunks(&self) -> Result<()> {
        let Some(stride) = self.index.stride() else { return Ok(()) };
        let len = self.len();
        let (tail, offset) = stride.frontier(len).ok_or_else(|| Error::Corrupt {
            path: self.index_path.clone(),
            offset: 40,
            reason: format!("{len} records of {} bytes pass the last chunk id", stride.record_size),
            source: None,
        })?;
        let whole = stride.per_chunk.saturating_mul(stride.record_size);
        for id in 0..=tail {
            let need = if id == tail { offset } else { whole };
            let path = chunk_path(&self.dir, id);
            let have = self.chunks.file_len(id)?.unwrap_or(0);
            if have < need {
                return Err(Error::Corrupt {
                    path,
                    offset: have,
                    reason: format!(
                        "{have} bytes, but the store's {len} records of {} bytes need {need} here: a count the \
                         chunks do not hold, or a truncated chunk",
                        stride.record_size
                    ),
                    source: None,
                });
            }
        }
        Ok(())
    }

    /// A fixed-stride frontier is a function of the count; anything else is damage.
    fn fixed_frontier_agrees(&self, h: &v2::Header) -> Result<()> {
        match h.stride() {
            Some(stride) if stride.frontier(h.count) != Some((h.tail_chunk, h.tail_offset)) => {
                Err(Error::Corrupt {
                    path: self.index_path.clone(),
                    offset: 24,
                    reason: format!(
                        "the frontier (chunk {}, byte {}) is not where {} records of {} bytes end",
                        h.tail_chunk, h.tail_offset, h.count, stride.record_size
                    ),
                    source: None,
                })
            }
            _ => Ok(()),
        }
    }

    /// The writer checks the v2 header's frontier against its checksum before anything uses it
    /// (trimming to a damaged frontier would cut committed records). A mismatch is what a
    /// process killed inside a commit's header write leaves (its fields are written one after
    /// another), or damage: either way the frontier is set to the end of the furthest committed
    /// record, which keeps every record the count publishes.
    pub(super) fn check_frontier(&self) -> Result<()> {
        let (Index::V2(map) | Index::Fixed(map, _) | Index::Compact(map)) = &self.index else {
            return Ok(());
        };
        match v2::Header::parse(&map.header(), true) {
            Ok(h) => self.fixed_frontier_agrees(&h),
            Err(v2::HeaderError::Field(28, _)) if self.index.stride().is_some() => {
                self.torn_header_or_damage()?;
                let len = self.len();
                let stride = self.index.stride().expect("checked just above");
                let frontier = stride.frontier(len).ok_or_else(|| Error::Corrupt {
                    path: self.index_path.clone(),
                    offset: 40,
                    reason: format!("{len} records of {} bytes pass the last chunk id", stride.record_size),
                    source: None,
                })?;
                // Nothing is written before the chunks are known to hold the new frontier.
                self.check_chunks_for(frontier, true)?;
                self.index.publish(len, frontier, &self.index_path, true)
            }
            Err(v2::HeaderError::Field(28, _)) => {
                self.torn_header_or_damage()?;
                let len = self.len();
                let mut frontier = (0u32, 0u64);
                let mut first = 0;
                while first < len {
                    let end = (first + (1 << 16)).min(len);
                    for (i, e) in (first..).zip(self.index.entries_checked(first, end)?) {
                        // Only an intact entry says where committed bytes end: a damaged one
                        // would move the frontier anywhere (and certify it with a checksum).
                        let e = e.map_err(|reason| Error::Corrupt {
                            path: self.index_path.clone(),
                            offset: 0,
                            reason: format!(
                                "the header's checksum fails and record {i}'s entry is damaged ({reason}): \
                                 the frontier is not rebuilt from damaged entries; nothing was changed"
                            ),
                            source: None,
                        })?;
                        if e.stored > 0 {
                            frontier = frontier.max((e.chunk, e.end()));
                        }
                    }
                    first = end;
                }
                // A manifest holding the count describes that commit's frontier, which may lie
                // past the furthest record: a rollover to a fresh chunk, a record larger than the
                // capacity, bytes a delete left (and a compaction writes its manifest before its
                // last header). Taken when it is further; the chunks must hold it all the same.
                let manifest = self.manifest_if_sound()?;
                if let Some(m) = manifest.filter(|m| m.count == len)
                    && let Some(last) = m.chunks.last()
                    && let Ok(tail) = u32::try_from(m.chunks.len() - 1)
                {
                    frontier = frontier.max((tail, last.len));
                }
                // Nothing is written before the chunks are known to hold the new frontier.
                self.check_chunks_for(frontier, true)?;
                self.index.publish(len, frontier, &self.index_path, true)
            }
            Err(e) => Err(v2_header_error(&self.index_path, e)),
        }
    }

    /// Before a header whose dynamic fields fail their checksum is repaired from its count: a
    /// commit killed inside its header write leaves the count the previous commit published (it
    /// is stored last, after the fields its checksum covers), which the manifest holds too (a
    /// delete's count is published under its journal, which is replayed instead). A count the
    /// manifest does not hold is damage: a lower one would trim committed records, a higher one
    /// bring deleted entries back (the index is never shrunk in place).
    ///
    /// The manifest, when there is one that reads and decodes (a damaged one is no manifest to
    /// repair from); a reader's failure (out of descriptors or memory) is the error, not taken for
    /// a missing manifest (the forty-second look's S2).
    fn manifest_if_sound(&self) -> Result<Option<Manifest>> {
        match read_manifest(self.chunks.dir(), self.known_chunks()) {
            Err(e) if super::report::readers_failure(&e) => Err(e),
            read => Ok(read.ok().flatten().and_then(|b| Manifest::decode(&b).ok())),
        }
    }

    /// # Errors
    /// [`Error::Corrupt`] naming the count's field, with nothing changed.
    fn torn_header_or_damage(&self) -> Result<()> {
        if self.dir.join(JOURNAL_FILE).exists() {
            return Ok(());
        }
        let manifest = self.manifest_if_sound()?;
        // A v2 store has a manifest from its creation on (create and migration write it before
        // the index); the deletes and compactions that drop one publish their counts under a
        // journal, or (a compaction's last header) with the new manifest written first. So with
        // no manifest to hold the count, the count is not a torn commit's either: nothing tells
        // a damaged count from a good one, and none is repaired.
        if manifest.is_none() {
            return Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: v2::COUNT_OFFSET as u64,
                reason: format!(
                    "the header's checksum of its count ({}) and frontier fails, and there is no manifest \
                     to hold the count: not repaired (nothing was changed; a read-only open still reads \
                     the records)",
                    self.len()
                ),
                source: None,
            });
        }
        match manifest {
            Some(m) if m.count != self.len() => Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: v2::COUNT_OFFSET as u64,
                reason: format!(
                    "the header counts {} records, but the manifest committed {}: the count is damaged, \
                     not a torn commit (nothing was changed; a read-only open still reads the records)",
                    self.len(),
                    m.count
                ),
                source: None,
            }),
            _ => Ok(()),
        }
    }

    /// Every chunk up to the tail exists, and for a writer the tail chunk holds its committed
    /// bytes.
    pub(super) fn check_chunks(&self) -> Result<()> {
        self.check_chunks_for(self.index.frontier(), self.writer.is_some())
    }

    /// [`Store::check_chunks`] for the frontier `(tail_chunk, tail_offset)`; a tail chunk shorter
    /// than the frontier is refused when `whole` (a writer's open, or a frontier not yet written).
    fn check_chunks_for(&self, (tail_chunk, tail_offset): (u32, u64), whole: bool) -> Result<()> {
        for id in 0..=tail_chunk {
            let path = chunk_path(&self.dir, id);
            let len = match self.chunks.stat(id) {
                Ok(m) if !m.file => {
                    return Err(Error::Corrupt {
                        path,
                        offset: 0,
                        reason: format!("chunk {id} is not a regular file (a directory, a FIFO or a device)"),
                        source: None,
                    });
                }
                Ok(m) => m.len,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::Corrupt {
                        path,
                        offset: 0,
                        reason: format!("chunk {id} is missing (the store has chunks 0..={tail_chunk})"),
                        source: None,
                    });
                }
                Err(e) => return Err(Error::io("stat", &path, e)),
            };
            // Shorter than its committed end: not something a crash leaves (record bytes are
            // durable before the frontier moves), so outside damage. The records before the cut
            // are intact and stay readable; those past it are per-record errors. Appending after
            // the hole would hide the loss, so a writer refuses.
            if id == tail_chunk && len < tail_offset && whole {
                return Err(Error::Corrupt {
                    path,
                    offset: len,
                    reason: format!(
                        "truncated: committed data ends at byte {tail_offset}; the records before byte {len} \
                         can still be read from a read-only open"
                    ),
                    source: None,
                });
            }
        }
        Ok(())
    }

    /// Refuses, before a writer trims anything, an index whose frontier is behind the one
    /// `manifest.zr` describes. No crash leaves that (a commit replaces the manifest after the
    /// header; a delete of entries keeps the frontier; compaction and a fixed-stride delete
    /// remove the manifest first and write it for a frontier no further than the index's), but
    /// an older `index.zr` put back does, and trimming to its frontier would drop committed
    /// records that the chunks and the manifest still hold. A manifest that does not decode is
    /// left to [`Store::load_manifest`].
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the index.
    pub(super) fn refuse_manifest_ahead(&self) -> Result<()> {
        let Some(bytes) = read_manifest(self.chunks.dir(), self.known_chunks())? else { return Ok(()) };
        let m = match Manifest::decode(&bytes) {
            Ok(m) => m,
            Err((offset, reason)) => return self.refuse_undecodable_manifest(&bytes, offset, reason),
        };
        let (tail_chunk, tail_offset) = self.index.frontier();
        let Some(last) = m.chunks.last() else { return Ok(()) };
        let chunks = m.chunks.len() as u64;
        let tail = u64::from(tail_chunk) + 1;
        if chunks > tail || (chunks == tail && last.len > tail_offset) {
            return Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: 0,
                reason: format!(
                    "its frontier (chunk {tail_chunk}, byte {tail_offset}, {} records) is behind manifest.zr's \
                     (chunk {}, byte {}, {} records), which no crash leaves: an older index.zr put back? Nothing \
                     trimmed; `loaderx verify` names what differs",
                    self.len(),
                    chunks - 1,
                    last.len,
                    m.count
                ),
                source: None,
            });
        }
        Ok(())
    }

    /// Before a writer trims anything: a manifest that does not decode vouches for no frontier.
    /// One cut off by zeros (a power loss) still has its head: more chunks there than the
    /// index's, or a tail chunk's row (when it survived) longer than the index's frontier, is an
    /// older `index.zr` put back, refused as [`Store::refuse_manifest_ahead`] does. (Its count
    /// says nothing: a delete lowers the count and keeps the manifest, so a stale one counts
    /// more.) Any other is damage, refused here rather than after a trim
    /// ([`Store::load_manifest`] would refuse it then).
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the index or the manifest.
    fn refuse_undecodable_manifest(&self, bytes: &[u8], offset: u64, reason: String) -> Result<()> {
        let path = self.dir.join(MANIFEST_FILE);
        if !super::files::torn_unsynced(bytes) {
            return Err(Error::Corrupt {
                path,
                offset,
                reason: format!(
                    "{reason}; not rebuilt over damage, and nothing trimmed: once `loaderx verify` finds the \
                     records intact, remove it and the next read-write open computes it again from the chunks"
                ),
                source: None,
            });
        }
        let (tail_chunk, tail_offset) = self.index.frontier();
        let sound = super::files::written_sectors(bytes);
        let behind = match Manifest::head(bytes, tail_chunk, sound) {
            Some((chunks, _)) if chunks > tail_chunk + 1 => Some(format!("{chunks} chunks")),
            Some((chunks, Some(len))) if chunks == tail_chunk + 1 && len > tail_offset => {
                Some(format!("chunk {tail_chunk} ending at byte {len}"))
            }
            _ => None,
        };
        match behind {
            Some(theirs) => Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: 0,
                reason: format!(
                    "its frontier (chunk {tail_chunk}, byte {tail_offset}) is behind manifest.zr's (its tail lost to a \
                     power loss, it still says {theirs}), which no crash leaves: an older index.zr put back? Nothing \
                     trimmed"
                ),
                source: None,
            }),
            None => Ok(()),
        }
    }

    /// The writer drops what a crashed append left past the committed tail.
    pub(super) fn trim_uncommitted(&self) -> Result<()> {
        let (tail_chunk, tail_offset) = self.index.frontier();
        let tail = chunk_path(&self.dir, tail_chunk);
        self.here()?;
        let f = self.chunks.open_write(tail_chunk, true).map_err(|e| Error::io("open", &tail, e))?;
        if f.metadata().map_err(|e| Error::io("stat", &tail, e))?.len() > tail_offset {
            f.set_len(tail_offset).map_err(|e| Error::io("truncate", &tail, e))?;
        }
        super::files::remove_chunks_after(self.chunks.dir(), tail_chunk)
    }

    /// The writer reads `manifest.zr`, and rewrites it when a crash left it behind the header
    /// (a commit publishes the header first, then the manifest): the tail chunk's checksum is
    /// computed again from its committed bytes.
    pub(super) fn load_manifest(&self) -> Result<()> {
        let path = self.dir.join(MANIFEST_FILE);
        // Missing is what a crash inside a delete or compaction leaves (each removes it first),
        // and empty, or cut off by zeros, what a power loss leaves of one replaced unsynced (an
        // append's): computed again. One that does not decode otherwise is damage (it is only ever replaced
        // whole), never rebuilt over: that would certify whatever the chunks hold now.
        let read = match read_manifest(self.chunks.dir(), self.known_chunks())? {
            Some(bytes) if Manifest::decode(&bytes).is_err() && super::files::torn_unsynced(&bytes) => None,
            Some(bytes) => Some(Manifest::decode(&bytes).map_err(|(offset, reason)| Error::Corrupt {
                path: path.clone(),
                offset,
                reason: format!(
                    "{reason}; not rebuilt over damage: once `loaderx verify` finds the records intact, \
                     remove it and the next read-write open computes it again from the chunks"
                ),
                source: None,
            })?),
            None => None,
        };
        let (tail_chunk, tail_offset) = self.index.frontier();
        let count = self.len();
        let fits = |m: &Manifest| {
            m.count == count
                && m.chunks.len() == tail_chunk as usize + 1
                && m.chunks.last().is_some_and(|c| c.len == tail_offset)
        };
        match read {
            // A delete's manifest follows its count before its journal goes: one counting more,
            // with no journal, is a count damaged below the records it committed (look 174,
            // L174-3: rebuilt, the records past it were trimmed and `verify` certified the rest).
            Some(m) if m.count > count => Err(Error::Corrupt {
                path: self.index_path.clone(),
                offset: 0,
                reason: format!(
                    "the header counts {count} records, but manifest.zr committed {}: the count is damaged \
                     (nothing trimmed or rebuilt; `loaderx verify` names what differs; a delete of an older \
                     build cut short leaves this too: once `loaderx verify` finds the records intact, remove \
                     manifest.zr and the next read-write open computes it again)",
                    m.count
                ),
                source: None,
            }),
            Some(m) if fits(&m) => {
                *self.writer()?.append.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
                Ok(())
            }
            // The stale manifest's chunks before its own tail were sealed when it was written;
            // its tail may have grown since.
            stale => self.rebuild_manifest(
                stale
                    .map(|mut m| {
                        m.chunks.pop();
                        m.chunks
                    })
                    .unwrap_or_default(),
            ),
        }
    }

    /// Writes `manifest.zr` for the committed store, keeping the summaries in `sealed` of the
    /// chunks before the tail (a manifest known to describe them) and computing the rest from
    /// the chunk files; the writer's copy follows.
    pub(super) fn rebuild_manifest(&self, sealed: Vec<ChunkSummary>) -> Result<()> {
        self.write_manifest_for(self.len(), self.index.frontier(), sealed)
    }

    /// [`Store::rebuild_manifest`] for a store of `count` records ending at `frontier` (one about
    /// to be published: a compaction writes its manifest before its last header, so that a kill
    /// inside that header write leaves a manifest holding the count, and the next writer repairs
    /// the frontier rather than refusing a count nothing vouches for).
    pub(super) fn write_manifest_for(
        &self,
        count: u64,
        frontier: (u32, u64),
        sealed: Vec<ChunkSummary>,
    ) -> Result<()> {
        let m = self.manifest_for(count, frontier, sealed)?;
        write_atomic_bytes_in(self.chunks.dir(), MANIFEST_FILE, &m.encode())?;
        *self.writer()?.append.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
        Ok(())
    }

    /// The manifest of a store of `count` records ending at the frontier `(tail_chunk,
    /// tail_offset)`: the summaries in `sealed` of the chunks before the tail kept, the rest
    /// computed from the chunk files.
    pub(super) fn manifest_for(
        &self,
        count: u64,
        (tail_chunk, tail_offset): (u32, u64),
        mut sealed: Vec<ChunkSummary>,
    ) -> Result<Manifest> {
        sealed.truncate(tail_chunk as usize);
        for id in sealed.len() as u32..=tail_chunk {
            sealed.push(self.summarise_chunk(id, if id == tail_chunk { Some(tail_offset) } else { None })?);
        }
        Ok(Manifest { count, chunks: sealed })
    }

    /// The summary of chunk `id`: its length (or `len`) and the crc32c of those bytes.
    pub(super) fn summarise_chunk(&self, id: u32, len: Option<u64>) -> Result<ChunkSummary> {
        let path = chunk_path(&self.dir, id);
        let missing = || Error::io("open", &path, std::io::ErrorKind::NotFound.into());
        let file = self.chunks.open_read(id)?.ok_or_else(missing)?;
        let len = match len {
            Some(l) => l,
            None => file.metadata().map_err(|e| Error::io("stat", &path, e))?.len(),
        };
        let mut crc = 0u32;
        let mut buf = vec![0u8; 4 << 20];
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(buf.len() as u64) as usize;
            read_exact_at(&file, &mut buf[..n], at).map_err(|e| Error::io("read", &path, e))?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            at += n as u64;
        }
        Ok(ChunkSummary { len, crc })
    }
}
