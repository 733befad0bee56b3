//! The conversion: files planned (every schema checked first), row groups decoded in parallel
//! windows, each column appended to its dataset in order.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

use crate::convert::Part;
use crate::convert::arrow::{At, Chunk, Layout, Nulls, fill_fits, layout_of, records};
use crate::convert::block::{catch_decoder_panic, open_input, pipelined};
use crate::convert::safetensors::{NAME_RULE, valid_name};
use crate::convert::summary::{ConvertSummary, finish};
use crate::dataset::{DIRECT_BYTES, DIRECT_RECORDS, remove_dataset_dir};
use crate::{DatasetWriter, Error, Result, WriteOptions};

/// Rows per decoded Arrow batch (a row group is read in batches of this many rows).
const BATCH_ROWS: usize = 8192;

/// One column to convert: the Parquet column's name and the dataset (directory under `out`) it
/// becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetColumn {
    /// The top-level column in the files.
    pub column: String,
    /// The dataset's directory name under the output directory.
    pub stream: String,
}

impl ParquetColumn {
    /// `NAME` or `NAME=STREAM` (the CLI's `--column`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name or a stream that is not a directory name (or
    /// ends in `.partial`, the suffix of a dataset's staging directory).
    pub fn parse(spec: &str) -> Result<ParquetColumn> {
        let (column, stream) = spec.split_once('=').unwrap_or((spec, spec));
        ParquetColumn::new(column, stream)
    }

    /// Column `column` as dataset `stream`.
    ///
    /// # Errors
    /// As [`ParquetColumn::parse`].
    pub fn new(column: &str, stream: &str) -> Result<ParquetColumn> {
        if column.is_empty() || !valid_name(stream) {
            return Err(Error::InvalidArgument(format!(
                "column {column:?} as dataset {stream:?}: a column name is not empty, and a dataset name \
                 is {NAME_RULE}"
            )));
        }
        Ok(ParquetColumn { column: column.to_string(), stream: stream.to_string() })
    }
}

/// One Parquet file's row groups to convert, and what is known of it.
struct Source {
    path: PathBuf,
    /// The root index of each selected column in the file's Arrow schema.
    roots: Vec<usize>,
    /// Each row group's first row and compressed size.
    groups: Vec<(u64, u64)>,
    /// The rows of all its row groups.
    rows: u64,
}

/// The reader of `path`'s footer (metadata and Arrow schema), its decoder's panics caught.
fn open_builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let (f, _) = open_input(path)?;
    let bad = |reason: String, source| Error::BadInput { path: path.to_path_buf(), reason, source };
    catch_decoder_panic(|| ParquetRecordBatchReaderBuilder::try_new(f))
        .map_err(|panic| {
            bad(format!("not a readable Parquet file: its footer broke the decoder ({panic})"), None)
        })?
        .map_err(|e| bad("not a readable Parquet file".into(), Some(e.into())))
}

/// Converts columns of the Parquet files `inputs` (read in order, as one table) into one
/// dataset per column under `out_dir`: `columns` (all top-level columns, named as themselves,
/// when empty). Numbers and fixed-size lists of them become dense datasets (a list of `n`
/// becomes items of shape `[n]`), variable-length lists of them ragged datasets (token ids),
/// strings and binary values `u8` records (UTF-8 bytes; a struct with a binary `bytes` field,
/// as Hugging Face stores images, its bytes). Nulls are an error naming the file, column and
/// row unless `nulls` fills them.
///
/// Read row group by row group (memory bounded by a window of row groups), the row groups of a
/// window decoded in parallel and appended in order; progress is reported in compressed bytes
/// of row groups done. Each dataset is written to `<dir>.partial` and renamed into place when
/// complete. Under `overwrite`, the datasets it replaces (and, OUT being replaced, those of an
/// earlier conversion it does not write) are moved aside first: on error the datasets this call
/// wrote are removed and the old ones put back, so OUT is the old conversion or the new one,
/// never a mix (look 120, L120-2); they are removed once the new ones are placed.
///
/// # Errors
/// [`Error::InvalidArgument`] for no inputs, a column not in the files, or two columns to one
/// dataset; [`Error::BadInput`] naming the file for one that is not Parquet or is malformed
/// (the decoder's panics on damaged files are caught and become this error), one that is not a
/// regular file, a column of a type loaderx cannot hold (naming the type), a column whose name
/// cannot be a dataset's (with all columns converted), another type for the same column in a
/// later file, or a null; [`Error::AlreadyExists`] for an existing dataset without overwrite;
/// the writers' errors.
pub fn parquet<P: AsRef<Path>>(
    inputs: &[P],
    out_dir: impl AsRef<Path>,
    columns: &[ParquetColumn],
    nulls: Nulls,
    opts: WriteOptions,
) -> Result<Vec<(String, ConvertSummary)>> {
    parquet_part(inputs, out_dir, columns, nulls, opts, Part::WHOLE)
}

/// [`parquet()`] of only part `part` of the row groups: whole row groups, each in the part whose
/// rows ([`Part::rows`] of the files' rows, in order) hold the group's first row, so that the
/// parts are balanced by rows as far as whole row groups allow (a part whose range no group
/// starts in, when groups are fewer or larger than parts, is empty). Every file's schema is
/// checked, as for the whole; only the part's row groups are read. Each column's dataset holds
/// the same records as the whole conversion's there; a part of no row groups writes empty
/// datasets of the columns' schemas.
///
/// # Errors
/// As [`parquet()`]; [`Error::InvalidArgument`] for a part out of range.
pub fn parquet_part<P: AsRef<Path>>(
    inputs: &[P],
    out_dir: impl AsRef<Path>,
    columns: &[ParquetColumn],
    nulls: Nulls,
    opts: WriteOptions,
    part: Part,
) -> Result<Vec<(String, ConvertSummary)>> {
    let part = part.checked()?;
    let out_dir = out_dir.as_ref();
    if inputs.is_empty() {
        return Err(Error::InvalidArgument("convert parquet needs at least one input file".into()));
    }
    // The plan: every file's schema checked, before anything is written.
    let (columns, layouts, sources) = plan(inputs, columns)?;
    check_fill(nulls, &columns, &layouts)?;
    for c in &columns {
        let out = out_dir.join(&c.stream);
        if out.exists() && !opts.overwrites() {
            return Err(Error::AlreadyExists { path: out });
        }
    }
    crate::dataset::refuse_dataset_as_dir_of(out_dir)?;
    // Forced: OUT is replaced, the datasets of an earlier conversion this one does not write too.
    let names: Vec<String> = columns.iter().map(|c| c.stream.clone()).collect();
    let others = if opts.overwrites() {
        crate::dataset::others_in_dir_of(out_dir, &names.iter().map(String::as_str).collect::<Vec<_>>())?
    } else {
        Vec::new()
    };
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("create directory", out_dir, e))?;
    // What this call replaces, moved aside until its own are placed (look 120, L120-2).
    let outs: Vec<PathBuf> = columns.iter().map(|c| out_dir.join(&c.stream)).chain(others).collect();
    let aside = crate::dataset::SetAside::take(outs.iter().map(PathBuf::as_path))?;
    match write_columns(out_dir, &columns, &layouts, &sources, nulls, &opts, part) {
        Ok(placed) => {
            aside.remove()?;
            if opts.overwrites() {
                crate::dataset::remove_killed_stagings(out_dir, &names);
            }
            Ok(placed)
        }
        Err(e) => {
            aside.restore();
            Err(e)
        }
    }
}

/// The conversion's writing: every column's dataset written from the row groups of `part`, then
/// placed (none of them, if one fails).
#[allow(clippy::too_many_arguments)]
fn write_columns(
    out_dir: &Path,
    columns: &[ParquetColumn],
    layouts: &[Layout],
    sources: &[Source],
    nulls: Nulls,
    opts: &WriteOptions,
    part: Part,
) -> Result<Vec<(String, ConvertSummary)>> {
    // What was there before: a dataset this call replaces is never removed on an error.
    let existed: Vec<bool> = columns.iter().map(|c| out_dir.join(&c.stream).exists()).collect();
    let mut writers: Vec<DatasetWriter> = Vec::with_capacity(columns.len());
    for (c, l) in columns.iter().zip(layouts) {
        writers.push(DatasetWriter::with_schema(out_dir.join(&c.stream), l.schema(), opts.clone())?);
    }
    let mut logical = vec![0u64; columns.len()];
    let mut pending: Vec<(Vec<Chunk>, usize)> = (0..columns.len()).map(|_| (Vec::new(), 0)).collect();
    let tasks = part_groups(sources, part);
    let window = 2 * rayon::current_num_threads();
    let mut done = 0u64;
    let groups: Vec<&[(usize, usize)]> = tasks.chunks(window).collect();
    let decode = |k: usize| -> Result<Vec<Vec<Chunk>>> {
        // Every row group's result, then the first error in file order: the one named is the
        // first bad row, whichever thread found its error first.
        let decoded: Vec<Result<Vec<Chunk>>> = groups[k]
            .par_iter()
            .map(|&(s, g)| {
                let src = &sources[s];
                catch_decoder_panic(|| decode_group(src, g, columns, layouts, nulls)).unwrap_or_else(
                    |panic| {
                        Err(Error::BadInput {
                            path: src.path.clone(),
                            reason: format!("row group {g} broke the Parquet decoder ({panic})"),
                            source: None,
                        })
                    },
                )
            })
            .collect();
        decoded.into_iter().collect()
    };
    let write = |k: usize, decoded: Vec<Vec<Chunk>>| -> Result<()> {
        for (chunks, &(s, g)) in decoded.into_iter().zip(groups[k].iter()) {
            for (c, chunks) in group_columns(chunks, columns.len()).into_iter().enumerate() {
                for chunk in chunks {
                    logical[c] += chunk.bytes.len() as u64;
                    pending[c].1 += chunk.bytes.len();
                    pending[c].0.push(chunk);
                }
                // Appended as soon as the writer takes them as they are (not copied into its own
                // batch): a commit of the staging store waits for no disk.
                if pending[c].1 >= DIRECT_BYTES
                    || pending[c].0.iter().map(|k| k.ends.len()).sum::<usize>() >= DIRECT_RECORDS
                {
                    flush(&mut writers[c], &mut pending[c])?;
                }
            }
            done += sources[s].groups[g].1;
        }
        opts.report(done);
        Ok(())
    };
    pipelined(groups.len(), out_dir, decode, write)?;
    for (w, p) in writers.iter_mut().zip(&mut pending) {
        flush(w, p)?;
    }
    // The datasets are synced and moved into place in parallel (each waits on its own disk
    // writes); if any fails, none of this call's is left.
    let jobs: Vec<(&ParquetColumn, DatasetWriter, u64)> =
        columns.iter().zip(writers).zip(logical).map(|((c, w), b)| (c, w, b)).collect();
    let done: Vec<(PathBuf, Result<ConvertSummary>)> = jobs
        .into_par_iter()
        .map(|(c, w, bytes)| {
            let out = out_dir.join(&c.stream);
            let s = finish(w, bytes);
            (out, s)
        })
        .collect();
    gathered(columns, done, existed)
}

/// The datasets `done` (each column's, with whether it existed before) as the call's result, or
/// the first failure, with the datasets this call created removed.
fn gathered(
    columns: &[ParquetColumn],
    done: Vec<(PathBuf, Result<ConvertSummary>)>,
    existed: Vec<bool>,
) -> Result<Vec<(String, ConvertSummary)>> {
    let (mut finished, mut failed) = (Vec::with_capacity(done.len()), None);
    for ((c, (dir, s)), existed) in columns.iter().zip(done).zip(existed) {
        match s {
            Ok(s) => finished.push((dir, existed, (c.stream.clone(), s))),
            // Placed, then its directory sync failed: one dataset's commit, not the call's,
            // which fails (look 117, L117-2: "committed, do not repeat it" was reported of a
            // conversion left incomplete). Removed with the others this call created.
            Err(Error::Committed { source, .. }) => {
                if !existed {
                    let _ = remove_dataset_dir(&dir);
                }
                failed.get_or_insert(*source);
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        for (dir, existed, _) in finished {
            if !existed {
                let _ = remove_dataset_dir(&dir);
            }
        }
        return Err(e);
    }
    Ok(finished.into_iter().map(|(_, _, r)| r).collect())
}

/// The plan of a conversion: the columns (all of the first file's, when `columns` is empty),
/// each one's layout, and every file's row groups, with every file's schema checked against the
/// first's.
///
/// # Errors
/// As [`parquet`], for everything found before a byte is written.
fn plan<P: AsRef<Path>>(
    inputs: &[P],
    columns: &[ParquetColumn],
) -> Result<(Vec<ParquetColumn>, Vec<Layout>, Vec<Source>)> {
    let first = open_builder(inputs[0].as_ref())?;
    let arrow = Arc::clone(first.schema());
    let columns: Vec<ParquetColumn> = if columns.is_empty() {
        arrow
            .fields()
            .iter()
            .map(|f| {
                ParquetColumn::new(f.name(), f.name()).map_err(|_| Error::BadInput {
                    path: inputs[0].as_ref().to_path_buf(),
                    reason: format!(
                        "column {:?} cannot be a dataset's name ({NAME_RULE}): name its dataset (NAME=DATASET)",
                        f.name()
                    ),
                    source: None,
                })
            })
            .collect::<Result<_>>()?
    } else {
        columns.to_vec()
    };
    let mut streams: Vec<&str> = columns.iter().map(|c| c.stream.as_str()).collect();
    streams.sort_unstable();
    if let Some(w) = streams.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::InvalidArgument(format!("two columns are written to dataset {:?}", w[0])));
    }
    let mut layouts = Vec::with_capacity(columns.len());
    let mut types = Vec::with_capacity(columns.len());
    for c in &columns {
        let field = arrow.field_with_name(&c.column).map_err(|_| {
            let names: Vec<&String> = arrow.fields().iter().map(|f| f.name()).collect();
            Error::InvalidArgument(format!(
                "no column {:?} in {}; the columns are {names:?}",
                c.column,
                inputs[0].as_ref().display()
            ))
        })?;
        let layout = layout_of(field.data_type()).map_err(|t| Error::BadInput {
            path: inputs[0].as_ref().to_path_buf(),
            reason: format!("column {:?} is {t}, which loaderx cannot hold as records", c.column),
            source: None,
        })?;
        layouts.push(layout);
        types.push(field.data_type().clone());
    }
    let mut sources = Vec::with_capacity(inputs.len());
    for p in inputs {
        let path = p.as_ref();
        let b = open_builder(path)?;
        let schema = b.schema();
        let mut roots = Vec::with_capacity(columns.len());
        for (c, t) in columns.iter().zip(&types) {
            let (i, f) = schema.column_with_name(&c.column).ok_or_else(|| Error::BadInput {
                path: path.to_path_buf(),
                reason: format!("no column {:?} (the first file has it)", c.column),
                source: None,
            })?;
            if f.data_type() != t {
                return Err(Error::BadInput {
                    path: path.to_path_buf(),
                    reason: format!("column {:?} is {}, {t} in the first file", c.column, f.data_type()),
                    source: None,
                });
            }
            roots.push(i);
        }
        let mut groups = Vec::new();
        let mut row = 0u64;
        for g in b.metadata().row_groups() {
            groups.push((row, g.compressed_size().max(0) as u64));
            row += g.num_rows().max(0) as u64;
        }
        sources.push(Source { path: path.to_path_buf(), roots, groups, rows: row });
    }
    Ok((columns, layouts, sources))
}

/// The `(file, row group)`s of `part`, in order: those whose first row, counted over the
/// files in order, lies in the part's rows (row groups of no rows after the last row: the last
/// part's, so that every row group is read by one part, as by the whole conversion).
fn part_groups(sources: &[Source], part: Part) -> Vec<(usize, usize)> {
    let total: u64 = sources.iter().map(|s| s.rows).sum();
    let rows = part.rows(total);
    let last = part.index + 1 == part.count;
    let mut first = 0u64;
    let mut tasks = Vec::new();
    for (s, src) in sources.iter().enumerate() {
        let mine = |g: &usize| {
            let r = first + src.groups[*g].0;
            rows.contains(&r) || (last && r >= total)
        };
        tasks.extend((0..src.groups.len()).filter(mine).map(|g| (s, g)));
        first += src.rows;
    }
    tasks
}

/// The decoded batches of one row group, column after column: `columns.len()` chunks per batch.
fn decode_group(
    src: &Source,
    g: usize,
    columns: &[ParquetColumn],
    layouts: &[Layout],
    nulls: Nulls,
) -> Result<Vec<Chunk>> {
    let b = open_builder(&src.path)?;
    let mask = ProjectionMask::roots(b.parquet_schema(), src.roots.iter().copied());
    let bad = |e: parquet::errors::ParquetError| Error::BadInput {
        path: src.path.clone(),
        reason: format!("row group {g}"),
        source: Some(e.into()),
    };
    let reader =
        b.with_row_groups(vec![g]).with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(bad)?;
    let mut out = Vec::new();
    let mut row = src.groups[g].0;
    for batch in reader {
        let batch = batch.map_err(|e| Error::BadInput {
            path: src.path.clone(),
            reason: format!("row group {g}"),
            source: Some(e.into()),
        })?;
        for (c, layout) in columns.iter().zip(layouts) {
            let a = batch.column_by_name(&c.column).ok_or_else(|| Error::BadInput {
                path: src.path.clone(),
                reason: format!("row group {g} has no column {:?}", c.column),
                source: None,
            })?;
            out.push(records(a, layout, &At::new(&src.path, &c.column, row, nulls))?);
        }
        row += batch.num_rows() as u64;
    }
    Ok(out)
}

/// Appends a column's pending chunks as one batch of records.
fn flush(w: &mut DatasetWriter, pending: &mut (Vec<Chunk>, usize)) -> Result<()> {
    if pending.0.is_empty() {
        return Ok(());
    }
    let records: Vec<&[u8]> = pending.0.iter().flat_map(Chunk::records).collect();
    w.append_bytes(&records)?;
    pending.0.clear();
    pending.1 = 0;
    Ok(())
}

/// Batch-major chunks regrouped by column.
fn group_columns(chunks: Vec<Chunk>, n: usize) -> Vec<Vec<Chunk>> {
    let mut by: Vec<Vec<Chunk>> = (0..n).map(|_| Vec::new()).collect();
    for (i, c) in chunks.into_iter().enumerate() {
        by[i % n].push(c);
    }
    by
}

/// Refuses a null fill that some numeric column of the plan cannot hold (see [`fill_fits`]).
fn check_fill(nulls: Nulls, columns: &[ParquetColumn], layouts: &[Layout]) -> Result<()> {
    if nulls == Nulls::Error {
        return Ok(());
    }
    for (c, l) in columns.iter().zip(layouts) {
        if let Layout::Dense(d, _) | Layout::Ragged(d, _) = l
            && !fill_fits(*d, nulls)
        {
            return Err(Error::InvalidArgument(format!(
                "nulls filled with {nulls}: column {:?} holds {d}, which has no such value (fill with one it holds)",
                c.column
            )));
        }
    }
    Ok(())
}
