//! [`Store::append`]: compress in parallel, place serially, flush in parallel, commit in order.

use std::ops::Range;

use rayon::prelude::*;

use super::Store;
use super::chunk::Placement;
use super::codec::{self, Dictionary, Encoded, Encoder};
use super::files::{DICT_FILE, MANIFEST_FILE, replace_unsynced_in, write_atomic_bytes_in};
use super::stride::COMBINE_FROM;
use crate::format::v2::{ChunkSummary, Entry, Layout, Manifest};
use crate::format::{Codec, Format, dict};
use crate::{Error, Result};

use crate::sys::tuning::WRITE_PIECE;
/// Records sampled to train a dictionary ([`Store::train_dictionary`]).
const DICT_SAMPLES: usize = 4096;

/// A record as it goes to disk: its stored bytes, codec and logical length.
pub(super) struct Stored<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) codec: Codec,
    pub(super) logical: usize,
}

/// A length the entry holds: records are at most the format's record size (checked before
/// placement, a `u32` in both formats) and a compressed frame is kept only when smaller than its
/// record, so this never saturates.
fn entry_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl Store {
    /// Appends `records` under `codec` and returns their indices.
    ///
    /// Compression runs in parallel; a record that does not shrink is stored raw. `ZstdDict`
    /// needs the store's dictionary: train it first with [`Store::train_dictionary`] (the
    /// converters do) or put a `zstd --train` dictionary in place as `dict.zr`. The whole batch
    /// is validated before anything is written, and committed in order: record bytes durable,
    /// then index entries, then the count, published atomically (v2: then the chunk manifest). A
    /// crash leaves a prefix of what was appended.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::InvalidArgument`] for `ZstdDict` on a store without a
    /// dictionary (train one first), and for LZ4 on a v1 store; [`Error::RecordTooLarge`]
    /// naming the batch position of a record over the format's limit (1 MiB in v1, 4 GiB - 1 in
    /// v2); [`Error::StoreFull`]; [`Error::DiskFull`] or [`Error::Io`] naming the file. Nothing of
    /// a failed batch is visible.
    pub fn append<R: AsRef<[u8]> + Sync>(&self, records: &[R], codec: Codec) -> Result<Range<u64>> {
        let writer = self.writer()?;
        let format = self.format();
        if !format.has_codec(codec) {
            return Err(Error::InvalidArgument(format!("{} stores have no {codec} codec", format.name())));
        }
        let limit = format.max_record_size();
        if let Some((i, r)) = records.iter().enumerate().find(|(_, r)| r.as_ref().len() > limit) {
            return Err(Error::RecordTooLarge {
                path: self.dir.clone(),
                index: i as u64,
                size: r.as_ref().len() as u64,
                limit: limit as u64,
            });
        }
        self.check_layout(records, codec)?;
        let mut manifest = writer.append.lock().unwrap_or_else(|e| e.into_inner());
        // Again under the lock: the call that held it may have stopped the handle.
        self.writer()?;
        self.check_room(records.len())?;
        // Training is explicit ([`Store::train_dictionary`]): a dictionary is a snapshot of the
        // data, chosen by whoever knows when the data is final.
        if codec == Codec::ZstdDict && self.dict.get().is_none() {
            self.load_dictionary()?;
            if self.dict.get().is_none() {
                // The caller's order of calls, not damage: `MissingDictionary` is a store that
                // lost its dictionary, which the faces report as corrupt (look 92, F1).
                return Err(Error::InvalidArgument(format!(
                    "{}: codec zstd_dict needs the store's dictionary, and it has none yet: train \
                     one first (train_dictionary), or append with zstd",
                    self.dir.display()
                )));
            }
            self.adopt_dictionary_id()?;
        }
        if records.is_empty() {
            return Ok(self.len()..self.len());
        }
        fn raw<R: AsRef<[u8]>>(r: &R) -> Stored<'_> {
            Stored { bytes: r.as_ref(), codec: Codec::Raw, logical: r.as_ref().len() }
        }
        if codec == Codec::Raw {
            let stored: Vec<Stored<'_>> = records.iter().map(raw).collect();
            return self.commit(&mut manifest, &stored);
        }
        let encoded = self.encode(records, codec)?;
        let stored: Vec<Stored<'_>> = records
            .iter()
            .zip(&encoded)
            .map(|(r, e)| match e {
                Encoded::Raw => raw(r),
                Encoded::Packed(b, c) => Stored { bytes: b, codec: *c, logical: r.as_ref().len() },
            })
            .collect();
        self.commit(&mut manifest, &stored)
    }

    /// A fixed-stride store takes raw records of its record size only, a compact store raw
    /// records only.
    fn check_layout<R: AsRef<[u8]>>(&self, records: &[R], codec: Codec) -> Result<()> {
        if self.index.layout() == crate::Layout::Compact && codec != Codec::Raw {
            return Err(Error::InvalidArgument(format!(
                "{} is a compact store of raw records: {codec} records cannot be appended to it",
                self.dir.display()
            )));
        }
        let Some(stride) = self.index.stride() else { return Ok(()) };
        if codec != Codec::Raw {
            return Err(Error::InvalidArgument(format!(
                "{} is a fixed-stride store of raw records: {codec} records cannot be appended to it",
                self.dir.display()
            )));
        }
        match records.iter().position(|r| r.as_ref().len() as u64 != stride.record_size) {
            None => Ok(()),
            Some(i) => Err(Error::InvalidArgument(format!(
                "record {i} of the batch is {} bytes; the fixed-stride store {} holds records of {} bytes",
                records[i].as_ref().len(),
                self.dir.display(),
                stride.record_size
            ))),
        }
    }

    /// [`Error::StoreFull`] when `adding` more records would pass the format's limit.
    fn check_room(&self, adding: usize) -> Result<()> {
        let format_limit = self.format().max_records();
        let (len, limit) = (self.len(), self.opts.max_records.map_or(format_limit, |m| m.min(format_limit)));
        if len.saturating_add(adding as u64) > limit {
            return Err(Error::StoreFull { path: self.dir.clone(), len, adding: adding as u64, limit });
        }
        Ok(())
    }

    /// [`Store::commit_placed`], and when it fails before its commit, what it wrote past the
    /// frontier removed (the tail chunk cut back, the chunks it made removed): the next append
    /// must not seal a chunk with those bytes at its end, which no manifest would describe. When
    /// that removal fails too, the handle stops (its next writer's open removes them).
    pub(super) fn commit(
        &self,
        manifest: &mut Option<Manifest>,
        records: &[Stored<'_>],
    ) -> Result<Range<u64>> {
        let before = self.committed_for_writing()?;
        let committed = self.commit_placed(manifest, records, before);
        // Only past the count and frontier this writer published, which the header still holds
        // (checksum and all) before and after: a header changed from outside says nothing of
        // where the committed bytes end, and an append it refused wrote nothing to cut back.
        // Not on a stopped handle either (a file replaced or removed under it): nothing of it is
        // touched again.
        let stopped = || self.writer.as_ref().is_some_and(|w| w.halted.get().is_some());
        if committed.is_err()
            && !records.is_empty()
            && !stopped()
            && self.committed_for_writing().ok() == Some(before)
            && let Err(e) = self.drop_chunks_past(before.1)
        {
            self.halt_handle(format!(
                "an append failed, and removing what it wrote past the committed end failed too ({})",
                crate::error_chain(&e)
            ));
        }
        committed
    }

    /// Places, writes and commits records already encoded, under the append lock (whose
    /// `manifest` it updates): record bytes durable, then entries, then the count, then (v2) the
    /// manifest.
    /// `published` is the count and frontier [`Store::committed_for_writing`] vouched for.
    fn commit_placed(
        &self,
        manifest: &mut Option<Manifest>,
        records: &[Stored<'_>],
        published: (u64, (u32, u64)),
    ) -> Result<Range<u64>> {
        self.check_room(records.len())?;
        let v2 = self.format() == Format::V2;
        let (first, (tail_chunk, tail_offset)) = published;
        let n = records.len() as u64;
        let crcs = self.record_crcs(records);

        // Placement is serial: each record gets the next position ([`Placement`]).
        let full = |placed: usize| Error::StoreFull {
            path: self.dir.clone(),
            len: first,
            adding: n - placed as u64,
            limit: first + placed as u64,
        };
        // The tail chunk appended to must still be the file its name leads to.
        self.refuse_tail_replaced(tail_chunk, tail_offset)?;
        let mut place = Placement::new(tail_chunk, tail_offset, self.chunk_capacity()?, self.index.limits());
        let mut entries = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            let (chunk, offset) = place.place(r.bytes.len() as u64).ok_or_else(|| full(i))?;
            entries.push(Entry {
                offset,
                stored: entry_len(r.bytes.len()),
                logical: entry_len(r.logical),
                chunk,
                codec: r.codec as u8,
                crc: crcs.get(i).copied().unwrap_or(0),
            });
        }
        let frontier = place.frontier().ok_or_else(|| full(records.len()))?;

        // Flush in parallel, in pieces of consecutive records of one chunk; each piece's crc32c
        // (v2) extends its chunk's running checksum in the manifest. Deferred sync starts each
        // piece's writeback at once, so that the disk writes while the caller goes on.
        let durable = !self.opts.deferred_sync;
        let pieces = pieces_of(&entries);
        let piece_crcs: Vec<(u32, u32, u64)> = pieces
            .par_iter()
            .map(|p| {
                let bytes = || p.clone().map(|i| records[i].bytes);
                let len: u64 = bytes().map(|b| b.len() as u64).sum();
                let first = entries[p.start];
                self.chunks.write_records(first.chunk, first.offset, bytes())?;
                if !durable {
                    self.chunks.start_writeback(first.chunk, first.offset, len)?;
                }
                // The piece's checksum from its records': a long record's own checksum is combined
                // in (no second pass over its bytes), a short one hashed again (cheaper than a
                // combine).
                let crc = if v2 {
                    let bytes: Vec<&[u8]> = p.clone().map(|i| records[i].bytes).collect();
                    let r = p.start as u64..p.end as u64;
                    super::stride::fold_crc(
                        0,
                        r.clone(),
                        r.start,
                        &bytes,
                        crcs.get(p.clone()).unwrap_or_default(),
                    )
                } else {
                    0
                };
                Ok((first.chunk, crc, len))
            })
            .collect::<Result<_>>()?;
        if durable {
            // The frontier's chunk exists before the header names it (a rollover to a chunk no
            // record is in yet makes it here, empty); a sync never makes one.
            self.chunks.get(frontier.0)?;
            self.sync_chunks(tail_chunk..=frontier.0, frontier.0 != tail_chunk)?;
            // Made durable where the names still lead, or not committed at all.
            self.refuse_chunks_replaced(tail_chunk..=frontier.0)?;
        } else if frontier.0 != tail_chunk {
            // The header is about to name the frontier's chunk: it exists (not yet synced)
            // before it does, as every chunk up to the tail must for an open to succeed.
            self.chunks.get(frontier.0)?;
        }

        // Then the entries (or the blocks' checksums), then the count.
        self.index.reserve(first + n)?;
        self.index_records(first, &entries, records, &crcs, durable)?;

        // The count is the commit. Its write reaches the mapping before its msync: when only the
        // msync fails, the records are in the store (readers see them), and an error that let the
        // caller append them again would duplicate them.
        let mut after_commit = None;
        if let Err(e) = self.publish(first + n, frontier, durable) {
            if self.len() != first + n {
                return Err(e);
            }
            after_commit = Some(e);
        }
        if (!durable || after_commit.is_some())
            && let Some(writer) = self.writer.as_ref()
        {
            // What `sync` (or dropping the handle) makes durable; also on a handle stopped since
            // (the commit stands, and a stopped handle still syncs what it committed).
            writer.unsynced.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert((tail_chunk, first));
        }

        if v2 && manifest.is_none() {
            // Removed by a delete or compaction whose rewrite of it failed: computed again from
            // the chunks (as the next writer would), so that a long-lived handle does not go on
            // without the manifest a torn header's repair needs.
            *manifest = self.manifest_for(first + n, frontier, Vec::new()).ok();
        } else if let Some(manifest) = manifest.as_mut().filter(|_| v2) {
            extend_manifest(manifest, &piece_crcs, frontier.0, first + n);
        }
        if let Some(manifest) = manifest.as_ref().filter(|_| v2) {
            // Derived from the durable files and rebuilt from them by the next writer when it is
            // behind: no fsync on the commit path (with deferred sync, written by the sync). A
            // failed write leaves the old file, behind the count, and this handle's copy right:
            // the records stand, so the call does not fail.
            if durable && after_commit.is_none() {
                let _ = replace_unsynced_in(self.chunks.dir(), MANIFEST_FILE, &manifest.encode());
            }
        }
        match after_commit {
            None => Ok(first..first + n),
            Some(e) => Err(Error::Committed {
                path: self.dir.clone(),
                what: format!("records {first}..{}", first + n),
                remedy: "call sync() to make them durable",
                source: Box::new(e),
            }),
        }
    }

    /// Writes the index for `records` placed at `entries` from record `first` on
    /// ([`Store::write_index`]) and flushes it (or starts its writeback): everything of a commit
    /// before its count. On failure nothing of it counts.
    fn index_records(
        &self,
        first: u64,
        entries: &[Entry],
        records: &[Stored<'_>],
        crcs: &[u32],
        durable: bool,
    ) -> Result<()> {
        let n = records.len() as u64;
        // The open block's checksum (fixed stride), which the index write extends in place: put
        // back when the write fails, so that the next append does not extend a sum of records
        // never committed.
        let open_block = match self.index.stride() {
            Some(stride) => self.open_block_crc(&stride, first)?,
            None => None,
        };
        let indexed = self.write_index(first, entries, records, crcs).and_then(|()| {
            if durable {
                self.index.flush_entries(first, n, &self.index_path)
            } else {
                self.index.start_writeback(first, n);
                Ok(())
            }
        });
        if let Err(e) = indexed {
            if let Some((block, crc)) = open_block {
                let _ = self.index.set_block_crcs(block, &[crc]);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Each record's crc32c: a v2 entry holds it. A fixed-stride store keeps none, and its block
    /// and piece checksums hash records shorter than [`COMBINE_FROM`] again anyway: for those,
    /// none (v1 keeps none either).
    fn record_crcs(&self, records: &[Stored<'_>]) -> Vec<u32> {
        let small_fixed = self.index.stride().is_some_and(|s| s.record_size < COMBINE_FROM as u64);
        if self.format() == Format::V2 && !small_fixed {
            records.par_iter().map(|r| crc32c::crc32c(r.bytes)).collect()
        } else {
            Vec::new()
        }
    }

    /// Writes the index for `records` placed at `entries` from record `first` on: their entries,
    /// or, in a fixed-stride store, the checksums of the blocks they fill.
    fn write_index(&self, first: u64, entries: &[Entry], records: &[Stored<'_>], crcs: &[u32]) -> Result<()> {
        let Some(stride) = self.index.stride() else { return self.index.set_entries(first, entries) };
        // Placement put every record where its index says (records of one size, in order).
        debug_assert!(
            entries
                .iter()
                .enumerate()
                .all(|(k, e)| stride.locate(first + k as u64) == Some((e.chunk, e.offset)))
        );
        let bytes: Vec<&[u8]> = records.iter().map(|r| r.bytes).collect();
        let (from, sums) = self.block_crcs_after(&stride, first, &bytes, crcs)?;
        self.index.set_block_crcs(from, &sums)
    }

    /// Compresses `records` under `codec` (not raw: raw records are stored as they are).
    fn encode<R: AsRef<[u8]> + Sync>(&self, records: &[R], codec: Codec) -> Result<Vec<Encoded>> {
        let dict = self.dict.get().map(|d| &**d);
        // Contiguous blocks, one compression context per block.
        let block = records.len().div_ceil(rayon::current_num_threads()).max(1);
        let blocks: Vec<Vec<Encoded>> = records
            .par_chunks(block)
            .map(|blk| {
                let mut enc = Encoder::new(codec, dict)?;
                blk.iter().map(|r| enc.encode(r.as_ref())).collect::<std::io::Result<Vec<_>>>()
            })
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io("compress", &self.dir, e))?;
        Ok(blocks.into_iter().flatten().collect())
    }

    /// Trains the `zstd_dict` dictionary on `samples` (record bytes) and stores it as `dict.zr`.
    ///
    /// Returns `false` when the store already has a dictionary or there is too little data to
    /// train one. Train once the data is final: the dictionary is a snapshot of it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Io`] naming `dict.zr`.
    pub fn train_dictionary<R: AsRef<[u8]>>(&self, samples: &[R]) -> Result<bool> {
        let writer = self.writer()?;
        let _g = writer.append.lock().unwrap_or_else(|e| e.into_inner());
        // Again under the lock: the call that held it may have stopped the handle.
        self.writer()?;
        self.train_locked(&codec::sample(samples, DICT_SAMPLES))
    }

    fn train_locked(&self, samples: &[&[u8]]) -> Result<bool> {
        if self.dict.get().is_some() {
            // One a failed training left in place, or put there by hand: named in the header.
            self.adopt_dictionary_id()?;
            return Ok(false);
        }
        self.refuse_lost_dictionary()?;
        let Some(raw) = codec::train(samples, self.opts.dict_cap) else { return Ok(false) };
        // The header is written again whole below: only over a frontier it still vouches for,
        // checked before anything is written.
        self.frontier_for_writing()?;
        write_atomic_bytes_in(self.chunks.dir(), DICT_FILE, &dict::encode(&raw))?;
        // v2 names the dictionary in its header: a dict.zr swapped under the store is refused.
        self.index.set_dict_id(dict::id(&raw), &self.index_path)?;
        // A dictionary zstd itself just trained always loads; refused, it is an internal error.
        let prepared = Dictionary::new(raw).map_err(|reason| Error::Corrupt {
            path: self.dir.join(DICT_FILE),
            offset: 0,
            reason: format!("the dictionary just trained: {reason}"),
            source: None,
        })?;
        let _ = self.dict.set(prepared);
        Ok(true)
    }
}

impl Store {
    /// Names the dictionary this writer loaded in a v2 header that names none (a `dict.zr` put
    /// in place by hand, or one a training that failed after its rename left): from then on a
    /// `dict.zr` swapped under the store is refused, and a lost one is not trained over. Only
    /// the dictionary the records were compressed with is named: when the first `zstd_dict`
    /// record's frame names another (a foreign `dict.zr`), or none, the header is left as it
    /// is (its reads fail as they would have, and putting the right file back mends them).
    pub(super) fn adopt_dictionary_id(&self) -> Result<()> {
        let (Some(d), Some(_)) = (self.dict.get(), self.writer.as_ref()) else { return Ok(()) };
        let id = dict::id(&d.raw);
        match self.index.v2_header(&self.index_path)? {
            Some(h) if h.dict_id == 0 && h.layout == Layout::Entries && id != 0 => {
                if self.first_dictionary_frame()?.is_some_and(|named| named != id) {
                    return Ok(());
                }
                self.frontier_for_writing()?;
                self.index.set_dict_id(id, &self.index_path)
            }
            _ => Ok(()),
        }
    }

    /// The dictionary id the frame of the first `zstd_dict` record names (0 when it names none
    /// or its bytes are not there); `None` when no record was compressed with a dictionary.
    fn first_dictionary_frame(&self) -> Result<Option<u32>> {
        let len = self.len();
        let mut first = 0;
        while first < len {
            let end = first.saturating_add(1 << 16).min(len);
            let found = self
                .index
                .entries_checked(first, end)?
                .into_iter()
                .flatten()
                .find(|e| e.codec == Codec::ZstdDict as u8);
            if let Some(e) = found {
                let map = self.chunk_view(e.chunk, e.offset.saturating_add(u64::from(e.stored)))?;
                let frame = map.as_deref().and_then(|m| super::gather::stored_range(m, &e));
                return Ok(Some(frame.map_or(0, codec::frame_dict_id)));
            }
            first = end;
        }
        Ok(None)
    }

    /// Refuses to train a dictionary a store of raw records cannot have (compact, fixed stride),
    /// and while records compressed with another one are in the store (its `dict.zr` lost or
    /// removed): a new one would replace the id the header keeps and leave them undecodable,
    /// where restoring the file would have made them whole. The records' codecs say (a header
    /// may name no dictionary: one put in place by hand before its id was kept).
    fn refuse_lost_dictionary(&self) -> Result<()> {
        let header = self.index.v2_header(&self.index_path)?;
        if let Some(h) = header.filter(|h| h.layout != Layout::Entries) {
            return Err(Error::InvalidArgument(format!(
                "{} is a {} store of raw records: it has no dictionary",
                self.dir.display(),
                h.layout.name()
            )));
        }
        let named = header.map(|h| h.dict_id).filter(|&id| id != 0);
        let used = self.stats()?.codecs[Codec::ZstdDict];
        if used == 0 {
            return Ok(());
        }
        let names = named.map_or(String::new(), |id| format!(" (the header names dictionary {id})"));
        Err(Error::Corrupt {
            path: self.dir.join(DICT_FILE),
            offset: 0,
            reason: format!(
                "missing, while {used} records were compressed with it{names}: restore it; a new \
                 dictionary would leave them undecodable, so none is trained"
            ),
            source: None,
        })
    }
}

/// The write pieces of a batch's entries: runs of consecutive records in one chunk, each of
/// about [`WRITE_PIECE`] bytes (the last of a run shorter), written in parallel.
fn pieces_of(entries: &[Entry]) -> Vec<Range<usize>> {
    let mut pieces: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut size = 0usize;
    for i in 0..entries.len() {
        if i > start && (entries[i].chunk != entries[start].chunk || size >= WRITE_PIECE) {
            pieces.push(start..i);
            start = i;
            size = 0;
        }
        size += entries[i].stored as usize;
    }
    pieces.push(start..entries.len());
    pieces
}

/// A writer with deferred syncs makes what it appended durable when it is dropped (best effort:
/// a drop cannot report a failure), so a handle let go without `sync` leaves the store as its
/// last `sync` would, not one whose manifest lags its header.
impl Drop for Store {
    fn drop(&mut self) {
        let unsynced = self
            .writer
            .as_ref()
            // Not in a fork: its copy of the lock may be held for good, and its writes are not its own.
            .is_some_and(|w| {
                w.lock.held_here() && w.unsynced.lock().unwrap_or_else(|e| e.into_inner()).is_some()
            });
        if unsynced {
            let _ = self.sync_impl();
        }
    }
}

/// `manifest` after a commit of `count` records whose pieces `(chunk, crc32c, bytes)` extend
/// their chunks' running checksums, up to the frontier's chunk `tail` (one it rolled into
/// without a record, on an exact fill, included).
fn extend_manifest(manifest: &mut Manifest, pieces: &[(u32, u32, u64)], tail: u32, count: u64) {
    for &(chunk, crc, len) in pieces {
        while manifest.chunks.len() <= chunk as usize {
            manifest.chunks.push(ChunkSummary::default());
        }
        let c = &mut manifest.chunks[chunk as usize];
        c.crc = crc32c::crc32c_combine(c.crc, crc, len as usize);
        c.len += len;
    }
    while manifest.chunks.len() <= tail as usize {
        manifest.chunks.push(ChunkSummary::default());
    }
    manifest.count = count;
}
