//! Parquet files (how most Hugging Face datasets ship) into one dataset per column, read row
//! group by row group through the Apache Arrow `parquet` crate (feature `parquet`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

use super::block::{catch_decoder_panic, open_input, pipelined, product};
use super::safetensors::{STAGING_SUFFIX, valid_name};
use super::summary::{ConvertSummary, finish};
use crate::dataset::{DIRECT_BYTES, DIRECT_RECORDS, remove_dataset_dir};
use crate::{DType, DatasetWriter, Error, Result, Schema, WriteOptions};

/// Rows per decoded Arrow batch (a row group is read in batches of this many rows).
const BATCH_ROWS: usize = 8192;

/// What to do with a null value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Nulls {
    /// A null is an error naming the file, the column and the row.
    #[default]
    Error,
    /// A null number becomes this value (cast to the column's type), a null list, string or
    /// binary value an empty record.
    Fill(f64),
}

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
                "column {column:?} as dataset {stream:?}: a column name is not empty and a dataset name \
                 is one directory name, not ending in {STAGING_SUFFIX} (the staging name of another)"
            )));
        }
        Ok(ParquetColumn { column: column.to_string(), stream: stream.to_string() })
    }
}

/// How a column's values become records.
#[derive(Debug, Clone, PartialEq)]
enum Layout {
    /// Fixed-size values: numbers, fixed-size lists of them, fixed-size binary.
    Dense(DType, Vec<usize>),
    /// Variable-length lists of fixed-size values: rows of the shape.
    Ragged(DType, Vec<usize>),
    /// Strings and binary values (and a struct's `bytes` field: encoded images): `u8` records.
    Bytes,
}

/// The layout of an Arrow type, or why it has none.
fn layout_of(t: &DataType) -> std::result::Result<Layout, String> {
    let scalar = |d| Ok(Layout::Dense(d, Vec::new()));
    match t {
        DataType::Boolean => scalar(DType::Bool),
        DataType::Int8 => scalar(DType::I8),
        DataType::Int16 => scalar(DType::I16),
        DataType::Int32 => scalar(DType::I32),
        DataType::Int64 => scalar(DType::I64),
        DataType::UInt8 => scalar(DType::U8),
        DataType::UInt16 => scalar(DType::U16),
        DataType::UInt32 => scalar(DType::U32),
        DataType::UInt64 => scalar(DType::U64),
        DataType::Float16 => scalar(DType::F16),
        DataType::Float32 => scalar(DType::F32),
        DataType::Float64 => scalar(DType::F64),
        DataType::FixedSizeBinary(n) => Ok(Layout::Dense(DType::U8, vec![fixed_size(*n)?])),
        DataType::FixedSizeList(f, n) => match layout_of(f.data_type())? {
            Layout::Dense(d, mut shape) => {
                shape.insert(0, fixed_size(*n)?);
                // The sizes come from the file's schema: their product must be an item size.
                if product(&shape).and_then(|e| e.checked_mul(d.size())).is_none() {
                    return Err(format!("a fixed-size list of shape {shape:?} {d}, whose size overflows"));
                }
                Ok(Layout::Dense(d, shape))
            }
            _ => Err(format!("a fixed-size list of {} (only of fixed-size values)", f.data_type())),
        },
        DataType::List(f) | DataType::LargeList(f) => match layout_of(f.data_type())? {
            Layout::Dense(d, shape) => Ok(Layout::Ragged(d, shape)),
            _ => Err(format!("a list of {} (only of fixed-size values)", f.data_type())),
        },
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Ok(Layout::Bytes),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(Layout::Bytes),
        DataType::Struct(fields) => match fields.iter().find(|f| f.name() == "bytes") {
            Some(f) if layout_of(f.data_type()) == Ok(Layout::Bytes) => Ok(Layout::Bytes),
            _ => Err("a struct without a binary `bytes` field".into()),
        },
        other => Err(format!("{other}")),
    }
}

/// A fixed size from the file's schema as a length (arrow's `i32` can be negative in a damaged
/// file).
fn fixed_size(n: i32) -> std::result::Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("a fixed size of {n}"))
}

impl Layout {
    fn schema(&self) -> Schema {
        match self {
            Layout::Dense(d, s) => Schema::dense(*d, s.clone()),
            Layout::Ragged(d, s) => Schema::ragged(*d, s.clone()),
            Layout::Bytes => Schema::ragged(DType::U8, Vec::new()),
        }
    }
}

/// Where an error happened: the file, the column and the file's first row of the batch.
struct At<'a> {
    path: &'a Path,
    column: &'a str,
    row: u64,
    nulls: Nulls,
}

impl At<'_> {
    fn null(&self, i: usize) -> Error {
        Error::BadInput {
            path: self.path.to_path_buf(),
            reason: format!(
                "column {:?}, row {}: a null value (fill nulls with a value to convert it)",
                self.column,
                self.row + i as u64
            ),
        }
    }
}

/// A batch of one column's records: bytes back to back and where each record ends.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Chunk {
    fn push(&mut self, record: &[u8]) {
        self.bytes.extend_from_slice(record);
        self.ends.push(self.bytes.len());
    }

    fn records(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let r = &self.bytes[start..e];
                start = e;
                r
            })
            .collect()
    }
}

/// The fixed-size values of `a` (numbers, booleans as 0/1 bytes, fixed-size lists of them,
/// fixed-size binary), flattened to bytes; a null value filled or an error. `k` is the number
/// of leaf values per element of `a`.
fn leaf_bytes(a: &dyn Array, at: &At<'_>, out: &mut Vec<u8>) -> Result<()> {
    macro_rules! prim {
        ($t:ty, $conv:expr) => {{
            let p = a.as_primitive::<$t>();
            match (p.null_count(), at.nulls) {
                (0, _) => out.extend_from_slice(bytemuck::cast_slice(p.values())),
                (_, Nulls::Error) => {
                    let i = (0..p.len()).find(|&i| p.is_null(i)).unwrap_or(0);
                    return Err(at.null(i));
                }
                (_, Nulls::Fill(v)) => {
                    let fill = $conv(v);
                    for i in 0..p.len() {
                        let x = if p.is_null(i) { fill } else { p.value(i) };
                        out.extend_from_slice(bytemuck::bytes_of(&x));
                    }
                }
            }
        }};
    }
    match a.data_type() {
        DataType::Int8 => prim!(Int8Type, |v: f64| v as i8),
        DataType::Int16 => prim!(Int16Type, |v: f64| v as i16),
        DataType::Int32 => prim!(Int32Type, |v: f64| v as i32),
        DataType::Int64 => prim!(Int64Type, |v: f64| v as i64),
        DataType::UInt8 => prim!(UInt8Type, |v: f64| v as u8),
        DataType::UInt16 => prim!(UInt16Type, |v: f64| v as u16),
        DataType::UInt32 => prim!(UInt32Type, |v: f64| v as u32),
        DataType::UInt64 => prim!(UInt64Type, |v: f64| v as u64),
        DataType::Float16 => prim!(Float16Type, half::f16::from_f64),
        DataType::Float32 => prim!(Float32Type, |v: f64| v as f32),
        DataType::Float64 => prim!(Float64Type, |v: f64| v),
        DataType::Boolean => {
            let b = a.as_boolean();
            for i in 0..b.len() {
                let v = if b.is_null(i) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        Nulls::Fill(v) => v != 0.0,
                    }
                } else {
                    b.value(i)
                };
                out.push(u8::from(v));
            }
        }
        DataType::FixedSizeBinary(n) => {
            let f = a.as_fixed_size_binary();
            for i in 0..f.len() {
                if f.is_null(i) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        Nulls::Fill(v) => out.extend(std::iter::repeat_n(v as u8, *n as usize)),
                    }
                } else {
                    out.extend_from_slice(f.value(i));
                }
            }
        }
        DataType::FixedSizeList(_, n) => {
            let l = a.as_fixed_size_list();
            let n = *n as usize;
            let start = out.len();
            // The child values of this list's elements only (a sliced list starts inside them).
            let child = l.values().slice(l.offset() * n, l.len() * n);
            leaf_bytes(child.as_ref(), at, out)?;
            if l.null_count() > 0 {
                let per = (out.len() - start) / l.len().max(1);
                for i in (0..l.len()).filter(|&i| l.is_null(i)) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        Nulls::Fill(v) => {
                            let fill = fill_bytes(a.data_type(), v);
                            let cell = &mut out[start + i * per..start + (i + 1) * per];
                            for (k, b) in cell.iter_mut().enumerate() {
                                *b = fill[k % fill.len()];
                            }
                        }
                    }
                }
            }
        }
        other => {
            return Err(Error::BadInput {
                path: at.path.to_path_buf(),
                reason: format!("column {:?}: {other} is not a fixed-size type", at.column),
            });
        }
    }
    Ok(())
}

/// The bytes of one leaf value `v` of the innermost type of `t`.
fn fill_bytes(t: &DataType, v: f64) -> Vec<u8> {
    match t {
        DataType::FixedSizeList(f, _) => fill_bytes(f.data_type(), v),
        DataType::Int8 => (v as i8).to_ne_bytes().to_vec(),
        DataType::Int16 => (v as i16).to_ne_bytes().to_vec(),
        DataType::Int32 => (v as i32).to_ne_bytes().to_vec(),
        DataType::Int64 => (v as i64).to_ne_bytes().to_vec(),
        DataType::UInt16 => (v as u16).to_ne_bytes().to_vec(),
        DataType::UInt32 => (v as u32).to_ne_bytes().to_vec(),
        DataType::UInt64 => (v as u64).to_ne_bytes().to_vec(),
        DataType::Float16 => half::f16::from_f64(v).to_ne_bytes().to_vec(),
        DataType::Float32 => (v as f32).to_ne_bytes().to_vec(),
        DataType::Float64 => v.to_ne_bytes().to_vec(),
        DataType::Boolean => vec![u8::from(v != 0.0)],
        _ => vec![v as u8],
    }
}

/// One batch of column values `a` as records.
fn records(a: &ArrayRef, layout: &Layout, at: &At<'_>) -> Result<Chunk> {
    let mut chunk = Chunk::default();
    match layout {
        Layout::Dense(..) => {
            let mut bytes = Vec::new();
            leaf_bytes(a.as_ref(), at, &mut bytes)?;
            let per = bytes.len() / a.len().max(1);
            chunk.ends = (1..=a.len()).map(|i| i * per).collect();
            chunk.bytes = bytes;
        }
        Layout::Ragged(..) => match a.data_type() {
            DataType::List(_) => list_records::<i32>(a, at, &mut chunk)?,
            _ => list_records::<i64>(a, at, &mut chunk)?,
        },
        Layout::Bytes => bytes_records(a.as_ref(), at, &mut chunk)?,
    }
    Ok(chunk)
}

fn list_records<O: OffsetSizeTrait>(a: &ArrayRef, at: &At<'_>, chunk: &mut Chunk) -> Result<()> {
    let l = a.as_list::<O>();
    let offsets = l.value_offsets();
    let (first, last) = (offsets[0].as_usize(), offsets[l.len()].as_usize());
    let mut values = Vec::new();
    leaf_bytes(l.values().slice(first, last - first).as_ref(), at, &mut values)?;
    let per = if last > first { values.len() / (last - first) } else { 0 };
    if l.null_count() == 0 {
        // The values are the records back to back: kept as they are, cut at the offsets.
        chunk.ends = offsets[1..].iter().map(|o| (o.as_usize() - first) * per).collect();
        chunk.bytes = values;
        return Ok(());
    }
    for i in 0..l.len() {
        if l.is_null(i) {
            match at.nulls {
                Nulls::Error => return Err(at.null(i)),
                Nulls::Fill(_) => chunk.push(&[]),
            }
            continue;
        }
        let (s, e) = (offsets[i].as_usize() - first, offsets[i + 1].as_usize() - first);
        chunk.push(&values[s * per..e * per]);
    }
    Ok(())
}

fn bytes_records(a: &dyn Array, at: &At<'_>, chunk: &mut Chunk) -> Result<()> {
    let value = |i: usize| -> Option<&[u8]> {
        if a.is_null(i) {
            return None;
        }
        Some(match a.data_type() {
            DataType::Binary => a.as_binary::<i32>().value(i),
            DataType::LargeBinary => a.as_binary::<i64>().value(i),
            DataType::BinaryView => a.as_binary_view().value(i),
            DataType::Utf8 => a.as_string::<i32>().value(i).as_bytes(),
            DataType::LargeUtf8 => a.as_string::<i64>().value(i).as_bytes(),
            DataType::Utf8View => a.as_string_view().value(i).as_bytes(),
            _ => return None,
        })
    };
    if let DataType::Struct(_) = a.data_type() {
        let s = a.as_struct();
        let bytes = s.column_by_name("bytes").ok_or_else(|| Error::BadInput {
            path: at.path.to_path_buf(),
            reason: format!("column {:?}: a struct without a `bytes` field", at.column),
        })?;
        let mut inner = Chunk::default();
        bytes_records(bytes.as_ref(), at, &mut inner)?;
        for (i, r) in inner.records().into_iter().enumerate() {
            if s.is_null(i) && at.nulls == Nulls::Error {
                return Err(at.null(i));
            }
            chunk.push(if s.is_null(i) { &[] } else { r });
        }
        return Ok(());
    }
    // Without nulls, offset-based strings and binaries are their records back to back: one copy.
    if a.null_count() == 0 {
        let mut whole = |data: &[u8], offsets: &mut dyn Iterator<Item = usize>, first: usize| {
            chunk.ends = offsets.map(|o| o - first).collect();
            chunk.bytes = data.to_vec();
        };
        macro_rules! offset_based {
            ($arr:expr) => {{
                let x = $arr;
                let o = x.value_offsets();
                // Offsets of a valid array are non-negative and ascending (arrow checks).
                let (first, last) = (o[0] as usize, o[x.len()] as usize);
                whole(&x.value_data()[first..last], &mut o[1..].iter().map(|&v| v as usize), first);
                return Ok(());
            }};
        }
        match a.data_type() {
            DataType::Binary => offset_based!(a.as_binary::<i32>()),
            DataType::LargeBinary => offset_based!(a.as_binary::<i64>()),
            DataType::Utf8 => offset_based!(a.as_string::<i32>()),
            DataType::LargeUtf8 => offset_based!(a.as_string::<i64>()),
            _ => {}
        }
    }
    for i in 0..a.len() {
        match (value(i), at.nulls) {
            (Some(v), _) => chunk.push(v),
            (None, Nulls::Fill(_)) => chunk.push(&[]),
            (None, Nulls::Error) => return Err(at.null(i)),
        }
    }
    Ok(())
}

/// One Parquet file's row groups to convert, and what is known of it.
struct Source {
    path: PathBuf,
    /// The root index of each selected column in the file's Arrow schema.
    roots: Vec<usize>,
    /// Each row group's first row and compressed size.
    groups: Vec<(u64, u64)>,
}

/// The reader of `path`'s footer (metadata and Arrow schema), its decoder's panics caught.
fn open_builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let (f, _) = open_input(path)?;
    let bad = |reason: String| Error::BadInput { path: path.to_path_buf(), reason };
    catch_decoder_panic(|| ParquetRecordBatchReaderBuilder::try_new(f))
        .map_err(|panic| bad(format!("not a readable Parquet file: its footer broke the decoder ({panic})")))?
        .map_err(|e| bad(format!("not a readable Parquet file: {e}")))
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
/// complete; on error none of this call's datasets is left.
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
    let out_dir = out_dir.as_ref();
    if inputs.is_empty() {
        return Err(Error::InvalidArgument("convert parquet needs at least one input file".into()));
    }
    // The plan: every file's schema checked, before anything is written.
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
                        "column {:?} cannot be a dataset's name (one directory name, not ending in \
                         {STAGING_SUFFIX}, the staging name of another): name its dataset (NAME=DATASET)",
                        f.name()
                    ),
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
            })?;
            if f.data_type() != t {
                return Err(Error::BadInput {
                    path: path.to_path_buf(),
                    reason: format!("column {:?} is {}, {t} in the first file", c.column, f.data_type()),
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
        sources.push(Source { path: path.to_path_buf(), roots, groups });
    }
    for c in &columns {
        let out = out_dir.join(&c.stream);
        if out.exists() && !opts.overwrite_of() {
            return Err(Error::AlreadyExists { path: out });
        }
    }
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("create directory", out_dir, e))?;

    let mut writers: Vec<DatasetWriter> = Vec::with_capacity(columns.len());
    for (c, l) in columns.iter().zip(&layouts) {
        writers.push(DatasetWriter::with_schema(out_dir.join(&c.stream), l.schema(), opts.clone())?);
    }
    let mut logical = vec![0u64; columns.len()];
    let mut pending: Vec<(Vec<Chunk>, usize)> = (0..columns.len()).map(|_| (Vec::new(), 0)).collect();
    let tasks: Vec<(usize, usize)> =
        sources.iter().enumerate().flat_map(|(s, src)| (0..src.groups.len()).map(move |g| (s, g))).collect();
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
                catch_decoder_panic(|| decode_group(src, g, &columns, &layouts, nulls)).unwrap_or_else(
                    |panic| {
                        Err(Error::BadInput {
                            path: src.path.clone(),
                            reason: format!("row group {g} broke the Parquet decoder ({panic})"),
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
            let s = finish(w, &out, bytes);
            (out, s)
        })
        .collect();
    let (mut finished, mut failed) = (Vec::with_capacity(done.len()), None);
    for (c, (dir, s)) in columns.iter().zip(done) {
        match s {
            Ok(s) => finished.push((dir, (c.stream.clone(), s))),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        for (dir, _) in finished {
            let _ = remove_dataset_dir(&dir);
        }
        return Err(e);
    }
    Ok(finished.into_iter().map(|(_, r)| r).collect())
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
    let reader = b
        .with_row_groups(vec![g])
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| Error::BadInput { path: src.path.clone(), reason: format!("row group {g}: {e}") })?;
    let mut out = Vec::new();
    let mut row = src.groups[g].0;
    for batch in reader {
        let batch = batch
            .map_err(|e| Error::BadInput { path: src.path.clone(), reason: format!("row group {g}: {e}") })?;
        for (c, layout) in columns.iter().zip(layouts) {
            let a = batch.column_by_name(&c.column).ok_or_else(|| Error::BadInput {
                path: src.path.clone(),
                reason: format!("row group {g} has no column {:?}", c.column),
            })?;
            out.push(records(a, layout, &At { path: &src.path, column: &c.column, row, nulls })?);
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
