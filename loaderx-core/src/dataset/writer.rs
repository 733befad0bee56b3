//! [`DatasetWriter`]: writes a dataset (store + schema) in bounded batches, all or nothing.

use std::path::{Path, PathBuf};

use super::dtype::{DType, Element};
use super::replace::{check_free_to_replace, only_loaderx_files};
use super::schema::SCHEMA_FILE;
use super::schema::{Kind, Schema};
use super::staging::{lock_staging, remove_dataset_dir, remove_dataset_files};
use crate::store::{WriteLock, sync_dir};
use crate::{Codec, Error, Format, Result, Store, StoreOptions};

/// The lock a [`DatasetWriter`] holds in its staging directory from creation until the dataset is
/// in place: a second writer of the same output fails naming the first, instead of removing its
/// files. (Beside the store's own `write.lock`, which is released before the rename.)
pub(crate) const STAGING_LOCK: &str = "convert.lock";

/// Records buffered before they are compressed and appended as one batch.
const BATCH_RECORDS: usize = 1 << 16;
/// Bytes buffered before a batch is appended. The store holds up to two more copies of a batch
/// while it compresses and writes it, so this bounds a converter's memory at a few times 16 MiB.
const BATCH_BYTES: usize = 16 << 20;
/// An [`DatasetWriter::append_bytes`] of at least this many records, or of at least
/// [`DIRECT_BYTES`], goes to the store as it is; a smaller one is copied into the writer's batch.
pub(crate) const DIRECT_RECORDS: usize = BATCH_RECORDS / 4;
/// See [`DIRECT_RECORDS`].
pub(crate) const DIRECT_BYTES: usize = BATCH_BYTES / 4;

/// Dense items of at most this many bytes are written raw, in the fixed-stride layout, whatever
/// the codec: a compressed record costs at least a zstd frame's 9 bytes plus its 32-byte entry,
/// more than such an item raw (whose index is a checksum per 4 KiB). A bound, not a measurement.
const RAW_ITEM_MAX: usize = 40;

/// A callback told how many input bytes a converter has consumed so far.
pub type ProgressFn = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// How a converter writes a dataset.
#[derive(Clone)]
pub struct WriteOptions {
    codec: Codec,
    format: Format,
    dict_cap: Option<usize>,
    overwrite: bool,
    fixed_stride: bool,
    compact_entries: bool,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("codec", &self.codec)
            .field("format", &self.format)
            .field("dict_cap", &self.dict_cap)
            .field("overwrite", &self.overwrite)
            .field("fixed_stride", &self.fixed_stride)
            .field("compact_entries", &self.compact_entries)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

// Two options are equal when they write the same bytes: the progress callback is not compared.
impl PartialEq for WriteOptions {
    fn eq(&self, other: &Self) -> bool {
        self.codec == other.codec
            && self.format == other.format
            && self.dict_cap == other.dict_cap
            && self.overwrite == other.overwrite
            && self.fixed_stride == other.fixed_stride
            && self.compact_entries == other.compact_entries
    }
}

impl Eq for WriteOptions {}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            codec: Codec::Zstd,
            format: Format::V2,
            dict_cap: None,
            overwrite: false,
            fixed_stride: true,
            compact_entries: true,
            progress: None,
        }
    }
}

impl WriteOptions {
    /// Plain zstd, format v2, no dictionary cap, no overwrite.
    pub fn new() -> Self {
        Self::default()
    }

    /// The codec records are written with (default `zstd`). With `zstd_dict` the writer trains
    /// the dictionary on a sample of its first batch of records (up to 4,096 records or 16 MiB)
    /// before writing any of them; a dataset too small to train on is written as plain `zstd`.
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// The store format the dataset is written in (default [`Format::V2`]; v1 holds records of
    /// at most 1 MiB and no LZ4).
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// The store format chosen ([`format`](Self::format)). The getters are named for what they
    /// return (`store_format`, `record_codec`, `overwrites`), since the setters hold the plain
    /// names.
    pub fn store_format(&self) -> Format {
        self.format
    }

    /// The largest record the chosen format holds.
    pub fn max_record_size(&self) -> usize {
        self.format.max_record_size()
    }

    /// Upper bound on the `zstd_dict` dictionary size.
    pub fn dict_cap(mut self, bytes: Option<usize>) -> Self {
        self.dict_cap = bytes;
        self
    }

    /// Whether a dense dataset of raw records (codec `raw`, format v2) is written in the
    /// fixed-stride layout ([`StoreOptions::fixed_stride`]: no per-record entry, a checksum per
    /// block of records). On by default; off, such a dataset keeps an entry per record.
    pub fn fixed_stride(mut self, yes: bool) -> Self {
        self.fixed_stride = yes;
        self
    }

    /// Whether any other dataset of raw records (ragged, or dense not written fixed-stride; codec
    /// `raw`, format v2) is written in the compact layout ([`StoreOptions::compact_entries`]: a
    /// 16-byte entry per record instead of 32). On by default; off, it keeps 32-byte entries.
    pub fn compact_entries(mut self, yes: bool) -> Self {
        self.compact_entries = yes;
        self
    }

    /// Replace an existing dataset at the output path (only once the new one is complete).
    pub fn overwrite(mut self, yes: bool) -> Self {
        self.overwrite = yes;
        self
    }

    /// Calls `f` with the number of input bytes consumed so far, after each block a converter
    /// reads (for a progress bar). Not called by [`DatasetWriter`] itself.
    pub fn progress(mut self, f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.progress = Some(std::sync::Arc::new(f));
        self
    }

    /// The record size of the fixed-stride store a dataset of `schema` is written to, `None`
    /// for an entry per record: dense, raw, v2, items of 1 byte up to a chunk (1 GiB).
    fn stride_for(&self, schema: &Schema) -> Option<u32> {
        let unit = schema.unit_bytes();
        let fits = unit > 0 && unit as u64 <= crate::format::v2::DEFAULT_CHUNK_CAPACITY;
        (self.fixed_stride
            && schema.kind == Kind::Dense
            && (self.codec == Codec::Raw || unit <= RAW_ITEM_MAX)
            && self.format == Format::V2
            && fits)
            .then(|| u32::try_from(unit).ok())
            .flatten()
    }

    /// The codec records are written with ([`codec`](Self::codec)).
    pub fn record_codec(&self) -> Codec {
        self.codec
    }

    /// Whether an existing output is replaced ([`overwrite`](Self::overwrite)).
    pub fn overwrites(&self) -> bool {
        self.overwrite
    }

    /// Reports `bytes_done` input bytes to the progress callback, if there is one.
    pub fn report(&self, bytes_done: u64) {
        if let Some(f) = &self.progress {
            f(bytes_done);
        }
    }
}

/// Writes a dense or ragged dataset.
///
/// Records go to a staging directory beside the output (`OUT.partial`) and are appended in
/// bounded batches, so memory stays bounded whatever the input size. [`DatasetWriter::finish`]
/// writes the schema and renames the staging directory into place; a writer dropped before that
/// (an error half way) removes it, so nothing that opens as a complete dataset is left behind.
#[derive(Debug)]
pub struct DatasetWriter {
    pub(super) out: PathBuf,
    pub(super) staging: PathBuf,
    store: Option<Store>,
    /// Held for the writer's life, through the rename (see [`STAGING_LOCK`]); dropped after
    /// `store` (fields drop in order), so nothing in the staging directory is unguarded.
    pub(super) lock: WriteLock,
    schema: Schema,
    opts: WriteOptions,
    pending: Vec<Vec<u8>>,
    pending_bytes: usize,
    count: u64,
}

/// Refuses a dictionary size that would be ignored (a codec that trains none) or bent (below
/// what zstd builds, above what `dict.zr` holds): look 101, L101-7, both without a word.
fn check_dict_cap(opts: &WriteOptions) -> Result<()> {
    let Some(cap) = opts.dict_cap else { return Ok(()) };
    let most = crate::format::dict::MAX_LEN as usize;
    if opts.codec != Codec::ZstdDict {
        return Err(Error::InvalidArgument(format!(
            "a dictionary size ({cap} bytes) is for the zstd_dict codec: {} trains no dictionary",
            opts.codec
        )));
    }
    if !(256..=most).contains(&cap) {
        return Err(Error::InvalidArgument(format!(
            "a zstd_dict dictionary of at most {cap} bytes: its size is 256 to {most} bytes"
        )));
    }
    Ok(())
}

impl DatasetWriter {
    /// A writer of a dense dataset of `T` items of `item_shape`.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when `out` exists and `opts` does not allow overwriting it.
    pub fn dense<T: Element>(
        out: impl AsRef<Path>,
        item_shape: Vec<usize>,
        opts: WriteOptions,
    ) -> Result<Self> {
        Self::with_schema(out, Schema::dense(T::DTYPE, item_shape), opts)
    }

    /// A writer of a ragged dataset of `T` rows of `row_shape`.
    ///
    /// # Errors
    /// As [`DatasetWriter::dense`].
    pub fn ragged<T: Element>(
        out: impl AsRef<Path>,
        row_shape: Vec<usize>,
        opts: WriteOptions,
    ) -> Result<Self> {
        Self::with_schema(out, Schema::ragged(T::DTYPE, row_shape), opts)
    }

    /// A writer for `schema` (the dtype known at run time, as converters have it).
    ///
    /// # Errors
    /// As [`DatasetWriter::dense`], and [`Error::InvalidArgument`] for a dense item larger than
    /// the format's records (1 MiB in v1, 4 GiB - 1 in v2), or for LZ4 in v1.
    pub fn with_schema(out: impl AsRef<Path>, schema: Schema, opts: WriteOptions) -> Result<Self> {
        let (out, staging) = super::staging::out_and_staging(out.as_ref())?;
        if schema.kind == Kind::Dense && schema.unit_bytes() > opts.max_record_size() {
            return Err(Error::InvalidArgument(format!(
                "an item of shape {:?} {} is {} bytes; a {} record holds at most {} bytes",
                schema.shape,
                schema.dtype,
                schema.unit_bytes(),
                opts.format,
                opts.max_record_size()
            )));
        }
        if !opts.format.has_codec(opts.codec) {
            return Err(Error::InvalidArgument(format!(
                "{} stores have no {} codec",
                opts.format, opts.codec
            )));
        }
        check_dict_cap(&opts)?;
        if std::fs::symlink_metadata(&out).is_ok() {
            if !opts.overwrite {
                return Err(Error::AlreadyExists { path: out });
            }
            // Asked now as well as at the rename: a dataset a writer or readers have open is
            // refused before a whole conversion is spent on replacing it.
            check_free_to_replace(&out)?;
        }
        // What a crashed writer left is this writer's to remove; a directory of the user's that
        // happens to bear the staging name is not, nor a store of the user's there without a
        // writer's lock (look 140, L140-1). Store files are a crashed writer's only beside its
        // lock, there before this writer's.
        let crashed_writer = super::staging::killed_writers(&staging);
        let lock = lock_staging(&staging, &out)?;
        only_loaderx_files(&staging, crashed_writer)?;
        // What a crashed writer left (its lock is free, so no writer is using it); the lock
        // file itself stays: it is what this writer holds.
        remove_dataset_files(&staging, &[SCHEMA_FILE])?;
        // Synced once, in `finish`: a crash before it leaves only a staging directory, which is
        // never opened and is removed by the next writer.
        let mut store_opts =
            StoreOptions::new().format(opts.format).dict_cap(opts.dict_cap).deferred_sync(true);
        let mut opts = opts;
        if let Some(record_size) = opts.stride_for(&schema) {
            store_opts = store_opts.fixed_stride(record_size);
            // Items too small for any codec to pay for its entry (RAW_ITEM_MAX) are stored raw.
            opts.codec = Codec::Raw;
        } else if opts.compact_entries && opts.codec == Codec::Raw && opts.format == Format::V2 {
            store_opts = store_opts.compact_entries(true);
        }
        let store = match Store::create(&staging, store_opts) {
            Ok(store) => store,
            Err(e) => {
                // What the failed create made (an empty `0.zr`, a `.tmp`) is this writer's, removed
                // as a dropped writer's staging is: left, it was a directory no later conversion
                // could tell from a user's, refused even with overwrite (look 95, F1).
                let _ = remove_dataset_dir(&staging);
                if cfg!(windows) && staging.exists() {
                    let mut lock = lock;
                    lock.release();
                    let _ = std::fs::remove_dir(&staging);
                }
                return Err(e);
            }
        };
        Ok(DatasetWriter {
            out,
            staging,
            store: Some(store),
            lock,
            schema,
            opts,
            pending: Vec::new(),
            pending_bytes: 0,
            count: 0,
        })
    }

    /// The dataset's directory as this writer names it: `out` without trailing separators, a
    /// `.` or `..` in it resolved (what `finish` places; a caller measuring the result reads it
    /// here, since `.` may have been moved aside).
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// The schema being written.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Records written so far (including buffered ones).
    pub fn count(&self) -> u64 {
        self.count + self.pending.len() as u64
    }

    /// Dense: appends whole items given as one flat slice of `T` (a multiple of the item size).
    /// Ragged: appends the slice as one record.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a dtype other than the schema's or a partial item.
    pub fn append<T: Element>(&mut self, items: &[T]) -> Result<()> {
        self.check_dtype(T::DTYPE)?;
        let bytes: &[u8] = bytemuck::cast_slice(items);
        match self.schema.kind {
            Kind::Ragged | Kind::Image => self.append_bytes(&[bytes]),
            Kind::Dense => {
                let item = self.schema.unit_bytes();
                if item == 0 {
                    return Err(Error::InvalidArgument(
                        "dense items of zero size cannot be counted from a slice".into(),
                    ));
                }
                if !bytes.len().is_multiple_of(item) {
                    return Err(Error::InvalidArgument(format!(
                        "{} elements is not a whole number of {}-element items",
                        items.len(),
                        self.schema.unit_elems()
                    )));
                }
                for block in bytes.chunks(item * BATCH_RECORDS) {
                    let recs: Vec<&[u8]> = block.chunks(item).collect();
                    self.append_bytes(&recs)?;
                }
                Ok(())
            }
        }
    }

    /// Appends one record of `T` (a whole item for dense, any number of rows for ragged).
    ///
    /// # Errors
    /// As [`DatasetWriter::append_bytes`].
    pub fn append_record<T: Element>(&mut self, record: &[T]) -> Result<()> {
        self.check_dtype(T::DTYPE)?;
        self.append_bytes(&[bytemuck::cast_slice::<T, u8>(record)])
    }

    fn check_dtype(&self, dtype: DType) -> Result<()> {
        if dtype != self.schema.dtype {
            return Err(Error::InvalidArgument(format!(
                "the dataset holds {}, got {dtype}",
                self.schema.dtype
            )));
        }
        Ok(())
    }

    /// Appends records given as native-endian bytes of the schema's dtype.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the record (its number in the dataset) whose size does
    /// not fit the schema, or a bool element of which is not 0 or 1 (nothing of the call is
    /// written); [`Error::RecordTooLarge`]; the store's write errors.
    pub fn append_bytes<R: AsRef<[u8]> + Sync>(&mut self, records: &[R]) -> Result<()> {
        // In a fork even a batch only buffered is refused: nothing of it could ever be written.
        self.store.as_ref().map_or(Ok(()), |s| s.refuse_forked())?;
        let (unit, base, mut bytes) = (self.schema.unit_bytes(), self.count(), 0usize);
        for (k, r) in records.iter().enumerate() {
            let r = r.as_ref();
            let n = base + k as u64;
            let fits = match self.schema.kind {
                Kind::Dense => r.len() == unit,
                Kind::Ragged | Kind::Image => unit == 0 || r.len() % unit == 0,
            };
            if !fits {
                return Err(Error::InvalidArgument(format!(
                    "record {n} is {} bytes; the schema's {} are {unit} bytes",
                    r.len(),
                    if self.schema.kind == Kind::Dense { "items" } else { "rows" }
                )));
            }
            // A bool is one byte, 0 or 1: the readers refuse any other (look 113, L113-2: the
            // Python writers stored them, `verify` passed them, training stopped on them).
            if self.schema.dtype == DType::Bool
                && let Some(at) = r.iter().position(|&b| b > 1)
            {
                return Err(Error::InvalidArgument(format!(
                    "record {n}: bool element {at} is {}, not 0 or 1",
                    r[at]
                )));
            }
            if r.len() > self.opts.max_record_size() {
                return Err(Error::RecordTooLarge {
                    path: self.out.clone(),
                    index: n,
                    size: r.len() as u64,
                    limit: self.opts.max_record_size() as u64,
                });
            }
            bytes += r.len();
        }
        if records.len() < DIRECT_RECORDS && bytes < DIRECT_BYTES {
            // Small appends are gathered into one batch so compression still runs in parallel.
            for r in records {
                self.pending_bytes += r.as_ref().len();
                self.pending.push(r.as_ref().to_vec());
                if self.pending.len() >= BATCH_RECORDS || self.pending_bytes >= BATCH_BYTES {
                    self.flush()?;
                }
            }
            return Ok(());
        }
        // Large appends go to the store as they are, without a copy, in bounded batches.
        self.flush()?;
        let store = self.store.as_ref().expect("store lives until finish");
        let mut start = 0;
        while start < records.len() {
            let mut end = start;
            let mut size = 0;
            while end < records.len() && end - start < BATCH_RECORDS && size < BATCH_BYTES {
                size += records[end].as_ref().len();
                end += 1;
            }
            append_batch(store, &records[start..end], self.opts.codec)?;
            self.count += (end - start) as u64;
            start = end;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let store = self.store.as_ref().expect("store lives until finish");
        append_batch(store, &self.pending, self.opts.codec)?;
        self.count += self.pending.len() as u64;
        self.pending.clear();
        self.pending_bytes = 0;
        Ok(())
    }

    /// Writes the remaining records and the schema, and moves the dataset into place, replacing
    /// an existing one only now if overwriting was asked for. Returns the number of records.
    ///
    /// # Errors
    /// The store's write errors; [`Error::Io`] naming the path of a failed rename.
    pub fn finish(mut self) -> Result<u64> {
        self.flush()?;
        self.store.as_ref().expect("store lives until finish").sync_before()?;
        self.schema.write(&self.staging)?;
        drop(self.store.take());
        // From here a failure removes the staging directory itself: the drop no longer does (it
        // removes one whose store is still open; look 102: `..partial` was left in the output).
        let unstaged = |_: &Error| {
            let _ = remove_dataset_dir(&self.staging);
        };
        // The index as long as what it holds (the writer grew it by doubling).
        crate::store::trim_index(&self.staging).inspect_err(unstaged)?;
        // Still this writer's staging directory (its lock is held on the file in it): the
        // rename moves exactly the data written here.
        // Without overwrite, whatever appeared at OUT since the start (another conversion's
        // output, a user's store) stays: refused, this writer's staging removed.
        let mut replaced = None;
        if std::fs::symlink_metadata(&self.out).is_ok() && self.opts.overwrite {
            replaced = Some(self.replace_out().inspect_err(|_| {
                let _ = remove_dataset_dir(&self.staging);
            })?);
        } else {
            if let Err(e) = crate::sys::rename_no_replace(&self.staging, &self.out) {
                let _ = remove_dataset_dir(&self.staging);
                let exists = matches!(
                    e.kind(),
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty
                );
                return Err(if exists {
                    Error::AlreadyExists { path: self.out.clone() }
                } else {
                    Error::io("rename", &self.staging, e)
                });
            }
            self.lock.moved_to(&self.out);
        }
        // In place from here: a failure says so (a caller would convert again, or take the old
        // dataset for the one standing; review Y1). Its name made durable before the old one
        // is removed.
        let placed = |source: Error| Error::Committed {
            path: self.out.clone(),
            what: format!("the dataset of {} records", self.count),
            remedy: "it is in place; its name may not be durable yet, and an old dataset it replaced may be \
                     left beside it (OUT.old, OUT.old1, ...)",
            source: Box::new(source),
        };
        // A bare name's parent is the working directory (look 132, L132-2: `ds` was never
        // synced, `./ds` was).
        let parent = self.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sync_dir(parent).map_err(placed)?;
        if let Some(replaced) = replaced {
            replaced.remove().map_err(placed)?;
        }
        Ok(self.count)
    }
}

/// Appends one batch; for `zstd_dict` on a store without a dictionary yet, trains it on the
/// batch first, or writes the batch as plain zstd when it is too small to train on.
fn append_batch<R: AsRef<[u8]> + Sync>(store: &Store, records: &[R], codec: Codec) -> Result<()> {
    let codec = if codec == Codec::ZstdDict && !store.has_dictionary() && !store.train_dictionary(records)? {
        Codec::Zstd
    } else {
        codec
    };
    store.append(records, codec)?;
    Ok(())
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        // A fork's copy leaves the writer's staging directory to the process that made it.
        if self.store.take().is_some() && self.lock.held_here() {
            let _ = remove_dataset_dir(&self.staging);
            // Windows keeps a directory holding a file still open (the lock's, removed but held):
            // once the lock is released, so can the directory be. Windows only: elsewhere it is
            // gone already, and a second removal could take another writer's made since (review 50).
            if cfg!(windows) && self.staging.exists() {
                self.lock.release();
                let _ = std::fs::remove_dir(&self.staging);
            }
        }
    }
}
