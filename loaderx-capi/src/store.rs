//! The store behind `lx_store`: a `loaderx_core::Store` behind a lock.
//!
//! The handle is the engine's [`SharedStore`]: gathers, appends, stats and verify share the store
//! (any number at once, from any thread); delete and compact take it alone, as the engine
//! requires, and a forked child only tries its lock. A forked child's calls run on a pool of its
//! own ([`crate::fork`]). Everything here is safe code over slices: `ffi` has checked and made
//! them.

use loaderx_core::{Codec, Format, OpenMode, SharedStore, Store, StoreOptions};
use std::path::Path;

use crate::error::{self, Failure, Outcome};
use crate::fork;

/// `LX_OPEN_READ`: an existing store, read-only.
const OPEN_READ: i32 = 0;
/// `LX_OPEN_APPEND`: read-write, created when the path does not exist.
const OPEN_APPEND: i32 = 1;
/// `LX_OPEN_CREATE`: a new empty store, replacing one that is there.
const OPEN_CREATE: i32 = 2;

/// What an `lx_store` handle points at.
pub(crate) struct LxStore {
    inner: SharedStore,
}

/// `lx_compact_report`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CompactReport {
    moved: u64,
    skipped: u64,
    bytes_before: u64,
    bytes_after: u64,
}

/// `lx_stats`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct StoreStats {
    length: u64,
    logical_bytes: u64,
    live_bytes: u64,
    chunk_bytes: u64,
    chunks: u64,
    dict_bytes: u64,
    index_bytes: u64,
    records_raw: u64,
    records_zstd: u64,
    records_zstd_dict: u64,
    records_lz4: u64,
}

/// `lx_verify_report`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct VerifyReport {
    checked: u64,
    bad_records: u64,
    file_problems: u64,
    first_bad_index: u64,
}

/// A codec by its `LX_CODEC_*` value (its tag on disk).
fn codec(value: i32) -> Outcome<Codec> {
    u8::try_from(value).ok().and_then(Codec::from_tag).ok_or_else(|| {
        let names: Vec<String> =
            Codec::ALL.iter().map(|c| format!("LX_CODEC_{}", c.name().to_uppercase())).collect();
        Failure::argument(format!("unknown codec {value} ({})", names.join(", ")))
    })
}

/// A format by its `LX_FORMAT_*` value; 0 is the default (v2).
fn format(value: i32) -> Outcome<Format> {
    match value {
        0 | 2 => Ok(Format::V2),
        1 => Ok(Format::V1),
        other => Err(Failure::argument(format!("unknown format {other} (LX_FORMAT_V1 or LX_FORMAT_V2)"))),
    }
}

/// The records `data[offsets[i]..offsets[i + 1]]`: offsets must not decrease and stay in `data`.
pub(crate) fn split_records<'a>(data: &'a [u8], offsets: &[u64]) -> Outcome<Vec<&'a [u8]>> {
    offsets
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let range = usize::try_from(w[0]).ok().zip(usize::try_from(w[1]).ok());
            range
                .filter(|(start, end)| start <= end)
                .and_then(|(start, end)| data.get(start..end))
                .ok_or_else(|| {
                    Failure::argument(format!(
                        "record {i}: offsets {}..{} do not lie in the data",
                        w[0], w[1]
                    ))
                })
        })
        .collect()
}

impl LxStore {
    /// Opens or creates the store at `path` in `mode` (`LX_OPEN_*`).
    pub(crate) fn open(path: &Path, mode: i32, format_value: i32) -> Outcome<LxStore> {
        let opts = StoreOptions::new().format(format(format_value)?);
        let mode = match mode {
            OPEN_READ => OpenMode::Read,
            OPEN_APPEND => OpenMode::Append,
            OPEN_CREATE => OpenMode::Create,
            other => {
                return Err(Failure::argument(format!(
                    "unknown open mode {other} (LX_OPEN_READ, LX_OPEN_APPEND or LX_OPEN_CREATE)"
                )));
            }
        };
        let inner = fork::on_own_pool(|| Ok(SharedStore::open(path, mode, opts)?))?;
        Ok(LxStore { inner })
    }

    fn shared<R: Send>(&self, f: impl FnOnce(&Store) -> loaderx_core::Result<R> + Send) -> Outcome<R> {
        fork::on_own_pool(|| Ok(self.inner.read(f)?))
    }

    fn exclusive<R: Send>(&self, f: impl FnOnce(&mut Store) -> loaderx_core::Result<R> + Send) -> Outcome<R> {
        fork::on_own_pool(|| Ok(self.inner.write(f)?))
    }

    /// Records in the store.
    pub(crate) fn len(&self) -> Outcome<u64> {
        self.shared(|s| Ok(s.len()))
    }

    /// `LX_FORMAT_V1` or `LX_FORMAT_V2`.
    pub(crate) fn format(&self) -> Outcome<i32> {
        self.shared(|s| Ok(if s.format() == Format::V1 { 1 } else { 2 }))
    }

    /// Appends `records` in one batch; the index of the first.
    pub(crate) fn append(&self, records: &[&[u8]], codec_value: i32) -> Outcome<u64> {
        let codec = codec(codec_value)?;
        self.shared(|s| s.append(records, codec)).map(|range| range.start)
    }

    /// Trains the `zstd_dict` dictionary; false when there is one already or too little data.
    pub(crate) fn train_dictionary(&self, samples: &[&[u8]]) -> Outcome<bool> {
        self.shared(|s| s.train_dictionary(samples))
    }

    /// The sizes of the records at `indices`, into `out` (as long as `indices`).
    pub(crate) fn record_lens(&self, indices: &[u64], out: &mut [u32]) -> Outcome<()> {
        let lens = self.shared(|s| s.record_lens(indices))?;
        out.copy_from_slice(&lens);
        Ok(())
    }

    /// The bytes the records at `indices` take back to back.
    pub(crate) fn gather_size(&self, indices: &[u64]) -> Outcome<u64> {
        Ok(self.shared(|s| s.record_lens(indices))?.iter().map(|&n| u64::from(n)).sum())
    }

    /// Records of exactly `record_len` bytes each, back to back in `out`.
    pub(crate) fn gather_fixed(&self, indices: &[u64], record_len: usize, out: &mut [u8]) -> Outcome<()> {
        let needed = indices.len().checked_mul(record_len);
        if needed != Some(out.len()) {
            return Err(Failure::argument(format!(
                "a gather of {} records of {record_len} bytes needs a buffer of exactly that many bytes, got {}",
                indices.len(),
                out.len()
            )));
        }
        self.shared(|s| s.gather_fixed(indices, record_len, out))
    }

    /// The records at `indices` back to back at the start of `out`, record `i` at
    /// `offsets[i]..offsets[i + 1]` (`offsets` has one more entry than `indices`); the bytes
    /// written.
    pub(crate) fn gather(&self, indices: &[u64], out: &mut [u8], offsets: &mut [u64]) -> Outcome<u64> {
        self.shared(|s| {
            let lens = s.record_lens(indices)?;
            let total: u64 = lens.iter().map(|&n| u64::from(n)).sum();
            let room = out.len() as u64;
            let used = out.get_mut(..usize::try_from(total).unwrap_or(usize::MAX)).ok_or_else(|| {
                loaderx_core::Error::InvalidArgument(format!(
                    "a gather of {} records needs {total} bytes, the buffer holds {room}",
                    indices.len()
                ))
            })?;
            s.gather_into(indices, used)?;
            let mut at = 0u64;
            offsets[0] = 0;
            for (slot, len) in offsets[1..].iter_mut().zip(&lens) {
                at += u64::from(*len);
                *slot = at;
            }
            Ok(total)
        })
    }

    /// Deletes the records at `indices` (the last record moves into each hole).
    pub(crate) fn delete(&self, indices: &[u64]) -> Outcome<()> {
        self.exclusive(|s| s.delete(indices))
    }

    /// Rewrites the live records densely.
    pub(crate) fn compact(&self) -> Outcome<CompactReport> {
        let r = self.exclusive(Store::compact)?;
        Ok(CompactReport {
            moved: r.moved,
            skipped: r.skipped,
            bytes_before: r.bytes_before,
            bytes_after: r.bytes_after,
        })
    }

    /// Space accounting.
    pub(crate) fn stats(&self) -> Outcome<StoreStats> {
        let s = self.shared(Store::stats)?;
        Ok(StoreStats {
            length: s.length,
            logical_bytes: s.logical_bytes,
            live_bytes: s.live_bytes,
            chunk_bytes: s.chunk_bytes,
            chunks: s.chunks,
            dict_bytes: s.dict_bytes,
            index_bytes: s.index_bytes,
            records_raw: s.codecs.get(Codec::Raw),
            records_zstd: s.codecs.get(Codec::Zstd),
            records_zstd_dict: s.codecs.get(Codec::ZstdDict),
            records_lz4: s.codecs.get(Codec::Lz4),
        })
    }

    /// Reads back every record: the report, and the first problem as a failure (`LX_ERR_CORRUPT`
    /// unless the problem says otherwise) when there is one.
    ///
    /// The scan streams ([`Store::verify_each`], as `loaderx verify` does): of the damaged
    /// records only the count and the first, whose reason becomes the failure's text, are kept,
    /// so memory stays flat however many are damaged.
    pub(crate) fn verify(&self) -> Outcome<(VerifyReport, Option<Failure>)> {
        let mut report = VerifyReport { first_bad_index: u64::MAX, ..VerifyReport::default() };
        let mut first_bad = None;
        let files = self.shared(|s| {
            let files = s.verify_files()?;
            report.checked = s.verify_each(|index, err| {
                report.bad_records += 1;
                // The lowest index: records overlapping another's come after the scan's.
                if index < report.first_bad_index {
                    report.first_bad_index = index;
                    first_bad = Some(err);
                }
            })?;
            Ok(files)
        })?;
        report.file_problems = files.len() as u64;
        let first = files.into_iter().next().or(first_bad);
        Ok((
            report,
            first.map(|e| {
                let failure = Failure::from(e);
                if failure.code == error::OTHER {
                    Failure { code: error::CORRUPT, ..failure }
                } else {
                    failure
                }
            }),
        ))
    }

    /// Makes every committed record durable.
    pub(crate) fn sync(&self) -> Outcome<()> {
        self.shared(Store::sync)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_outside_the_data_or_decreasing_are_refused() {
        let data = b"abcdef";
        assert_eq!(split_records(data, &[0, 2, 6]).unwrap(), [&b"ab"[..], &b"cdef"[..]]);
        let refused = |offsets: &[u64], says: &str| {
            split_records(data, offsets)
                .is_err_and(|e| e.code == error::INVALID_ARGUMENT && e.message == says)
        };
        assert!(refused(&[0, 7], "record 0: offsets 0..7 do not lie in the data"));
        assert!(refused(&[3, 2], "record 0: offsets 3..2 do not lie in the data"));
        assert!(split_records(data, &[0]).unwrap().is_empty());
    }

    /// loaderx.h's codec constants and the stats' per-codec counts are core's one codec table
    /// (`Codec::ALL`): a codec added there and not here fails this test.
    #[test]
    fn the_headers_codecs_are_the_codec_table() {
        let header =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/loaderx.h")).unwrap();
        let defined: Vec<(String, u8)> = header
            .lines()
            .filter_map(|l| l.strip_prefix("#define LX_CODEC_"))
            .map(|l| {
                let mut it = l.split_whitespace();
                (it.next().unwrap().to_string(), it.next().unwrap().parse().unwrap())
            })
            .collect();
        let table: Vec<(String, u8)> =
            Codec::ALL.iter().map(|c| (c.name().to_uppercase(), *c as u8)).collect();
        assert_eq!(defined, table);
        let counts: Vec<String> = Codec::ALL.iter().map(|c| format!("records_{}", c.name())).collect();
        assert!(header.contains(&format!("uint64_t {};", counts.join(", "))), "lx_store_stats counts");
        let e = codec(9).unwrap_err();
        assert!(
            e.message.contains("LX_CODEC_ZSTD_DICT") && e.message.contains("LX_CODEC_LZ4"),
            "{}",
            e.message
        );
    }

    #[test]
    fn unknown_codecs_formats_and_modes_are_argument_errors() {
        assert_eq!(codec(4).unwrap_err().code, error::INVALID_ARGUMENT);
        assert_eq!(codec(-1).unwrap_err().code, error::INVALID_ARGUMENT);
        assert_eq!(format(3).unwrap_err().code, error::INVALID_ARGUMENT);
        let dir = tempfile::tempdir().unwrap();
        let err = LxStore::open(&dir.path().join("s"), 7, 0).err().unwrap();
        assert_eq!(err.code, error::INVALID_ARGUMENT);
    }
}
