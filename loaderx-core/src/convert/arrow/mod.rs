//! Apache Arrow arrays as records (feature `arrow`): how a column's type becomes a dataset's
//! layout and a decoded batch of it its records. Parquet files ([`super::parquet`]) and the
//! Python face's Ray sink (its blocks handed over as an Arrow IPC stream, [`ipc_columns`]) share
//! it, so a column becomes the same records whichever way it comes.
//!
//! | type | records |
//! | --- | --- |
//! | numbers, booleans, fixed-size binary, fixed-size lists of them | dense items |
//! | lists (and large lists) of those | ragged records of rows |
//! | strings, binaries (plain, large, views), a struct's binary `bytes` field | `u8` records |
//!
//! | file | what |
//! | --- | --- |
//! | `records` | the layout of a type, a batch's records, nulls filled or refused |

mod records;

use std::path::Path;

#[cfg(feature = "parquet")]
pub(crate) use records::fill_fits;
// `Chunk` and `Layout` by name only in `parquet`.
#[cfg_attr(not(feature = "parquet"), allow(unused_imports))]
pub(crate) use records::{At, Chunk, Layout, layout_of, records};

use crate::{Error, Result, Schema};

/// What to do with a null value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Nulls {
    /// A null is an error naming the file, the column and the row.
    #[default]
    Error,
    /// A null number becomes this value, which must be one of the column's type (an integer
    /// type's exactly, a bool's 0 or 1, a float type's rounded to it), a null list, string or
    /// binary value an empty record.
    Fill(f64),
    /// As [`Nulls::Fill`], an integer given exactly (past 2^53 an `f64` holds it no more: an
    /// integer column takes it as it is, a float column rounded).
    FillInt(i128),
}

impl Nulls {
    /// The fill `text` says: an integer exactly ([`Nulls::FillInt`]), else a number
    /// ([`Nulls::Fill`]: `1.5`, `-inf`, `nan`).
    ///
    /// # Errors
    /// What is not a number, named.
    pub fn parse_fill(text: &str) -> std::result::Result<Nulls, String> {
        let t = text.trim();
        t.parse::<i128>()
            .map(Nulls::FillInt)
            .or_else(|_| t.parse::<f64>().map(Nulls::Fill))
            .map_err(|_| format!("{text:?} is not a number"))
    }
}

impl std::fmt::Display for Nulls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Nulls::Error => f.write_str("an error"),
            Nulls::Fill(v) => write!(f, "{v}"),
            Nulls::FillInt(i) => write!(f, "{i}"),
        }
    }
}

/// One column of an Arrow IPC stream as records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrowColumn {
    /// The column's name in the stream's schema.
    pub name: String,
    /// Its records' kind, element type and shape (dense items, ragged rows, or `u8` bytes).
    pub schema: Schema,
    /// Every record's bytes, back to back, in row order.
    pub bytes: Vec<u8>,
    /// Where each record ends in `bytes`: one per row, ascending.
    pub ends: Vec<usize>,
}

/// The records of every column of the Arrow IPC stream `ipc`, all its batches in order. `what`
/// names the stream in errors. A null, a type without a layout (dates, decimals, maps...) or a
/// stream that does not decode is [`Error::BadInput`] naming `what` (and the column and row).
///
/// # Errors
/// As above.
pub fn ipc_columns(ipc: &[u8], what: &Path) -> Result<Vec<ArrowColumn>> {
    let bad = |reason: String| Error::BadInput { path: what.to_path_buf(), reason, source: None };
    frames_fit(ipc).map_err(|why| bad(format!("not an Arrow IPC stream: {why}")))?;
    // Arrow's reader checks a batch's buffers against its fields, but some damage panics inside
    // it (look 67: a buffer sliced past its end): an error like any other bad input.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode(ipc, what)))
        .unwrap_or_else(|_| Err(bad("an Arrow IPC stream its reader could not decode".to_string())))
}

/// Every message frame of `ipc` (a continuation marker, a metadata length, the metadata, a body)
/// lies within it, each length checked against the bytes left before anything is read: Arrow's
/// reader sizes a zeroed buffer by the length a message claims (look 67: 2^40 bytes asked for a
/// 264-byte stream, the process aborted).
fn frames_fit(ipc: &[u8]) -> std::result::Result<(), String> {
    let word = |at: usize| ipc.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    let mut at = 0;
    // A stream may end at a message boundary without its end-of-stream marker.
    while let Some(mut len) = word(at) {
        at += 4;
        if len == u32::MAX {
            len = word(at).ok_or("a message cut short after its continuation marker")?;
            at += 4;
        }
        if len == 0 {
            return Ok(());
        }
        let meta_len = usize::try_from(len).ok().filter(|&n| n <= ipc.len() - at && len <= i32::MAX as u32);
        let meta_len =
            meta_len.ok_or_else(|| format!("{len} bytes of metadata where {} remain", ipc.len() - at))?;
        let message = arrow_ipc::root_as_message(&ipc[at..at + meta_len])
            .map_err(|e| format!("a message whose metadata does not parse ({e})"))?;
        at += meta_len;
        let body = message.bodyLength();
        let fits = usize::try_from(body).ok().filter(|&n| n <= ipc.len() - at);
        at +=
            fits.ok_or_else(|| format!("a message body of {body} bytes where {} remain", ipc.len() - at))?;
    }
    Ok(())
}

/// [`ipc_columns`] of a stream whose frames fit.
fn decode(ipc: &[u8], what: &Path) -> Result<Vec<ArrowColumn>> {
    let bad = |reason: String| Error::BadInput { path: what.to_path_buf(), reason, source: None };
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(ipc), None)
        .map_err(|e| bad(format!("not an Arrow IPC stream: {e}")))?;
    let fields = reader.schema().fields().clone();
    let mut columns = Vec::with_capacity(fields.len());
    for f in &fields {
        // An extension type's values are its storage's only by the extension's own rules (Ray's
        // pickled objects are binary, a tensor's shape is in its metadata): refused by name
        // rather than written as the storage (look 66).
        if let Some(name) = f.metadata().get("ARROW:extension:name") {
            return Err(bad(format!(
                "column {:?} is of the Arrow extension type {name:?}, which has no loaderx layout",
                f.name()
            )));
        }
        let layout = layout_of(f.data_type()).map_err(|why| {
            bad(format!("column {:?} is of Arrow type {why}, which has no loaderx layout", f.name()))
        })?;
        columns.push((
            ArrowColumn {
                name: f.name().clone(),
                schema: layout.schema(),
                bytes: Vec::new(),
                ends: Vec::new(),
            },
            layout,
        ));
    }
    let mut row = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| bad(format!("a batch that does not decode: {e}")))?;
        for ((column, layout), array) in columns.iter_mut().zip(batch.columns()) {
            let at = At::new(what, &column.name, row, Nulls::Error);
            let chunk = records(array, layout, &at)?;
            let base = column.bytes.len();
            column.ends.extend(chunk.ends.iter().map(|e| base + e));
            column.bytes.extend_from_slice(&chunk.bytes);
        }
        row += batch.num_rows() as u64;
    }
    Ok(columns.into_iter().map(|(c, _)| c).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder, StringBuilder};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};

    use super::*;
    use crate::DType;
    use crate::Kind;

    fn ipc(batches: &[RecordBatch]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &batches[0].schema()).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
        drop(w);
        out
    }

    /// Numbers, fixed-size lists, lists and strings, over two batches: each column's records in
    /// row order with the layout its type gives.
    #[test]
    fn every_column_of_a_stream_becomes_its_records() {
        let batch = |first: i64| {
            let mut image = FixedSizeListBuilder::new(Float32Builder::new(), 2);
            let mut tokens = ListBuilder::new(Float32Builder::new());
            let mut text = StringBuilder::new();
            for i in 0..3 {
                let v = (first + i) as f32;
                image.values().append_slice(&[v, -v]);
                image.append(true);
                tokens.values().append_slice(&vec![v; i as usize]);
                tokens.append(true);
                text.append_value("ab".repeat(i as usize));
            }
            let columns: Vec<(&str, ArrayRef)> = vec![
                ("label", Arc::new(Int64Array::from_iter_values(first..first + 3))),
                ("image", Arc::new(image.finish())),
                ("tokens", Arc::new(tokens.finish())),
                ("text", Arc::new(text.finish())),
            ];
            RecordBatch::try_from_iter(columns).unwrap()
        };
        let cols = ipc_columns(&ipc(&[batch(0), batch(10)]), Path::new("block")).unwrap();
        let names: Vec<_> = cols.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["label", "image", "tokens", "text"]);
        assert_eq!(cols[0].schema, Schema { kind: Kind::Dense, dtype: DType::I64, shape: vec![] });
        assert_eq!(
            cols[0].bytes,
            [0i64, 1, 2, 10, 11, 12].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()
        );
        assert_eq!(cols[1].schema, Schema { kind: Kind::Dense, dtype: DType::F32, shape: vec![2] });
        assert_eq!(cols[1].ends, [8, 16, 24, 32, 40, 48]);
        assert_eq!(cols[2].schema, Schema { kind: Kind::Ragged, dtype: DType::F32, shape: vec![] });
        assert_eq!(cols[2].ends, [0, 4, 12, 12, 16, 24]);
        assert_eq!(cols[3].schema, Schema { kind: Kind::Ragged, dtype: DType::U8, shape: vec![] });
        assert_eq!(cols[3].bytes, b"ababab".repeat(2));
        assert_eq!(cols[3].ends, [0, 2, 6, 6, 8, 12]);
    }

    /// Look 67: lengths inside a stream sized allocations before anything checked them (2^40
    /// bytes for a 264-byte stream: the process aborted), and other damage panicked inside
    /// Arrow's reader. Every i64 of the batch's metadata set to 2^40 and to -1, a metadata
    /// length of 2^31 - 1, and 2,000 single-byte changes: each an `Ok` or an error, the test
    /// process alive.
    #[test]
    fn lengths_a_stream_claims_are_checked_before_they_size_anything() {
        let batch = RecordBatch::try_from_iter([
            ("x", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            ("s", Arc::new(arrow_array::StringArray::from(vec!["a", "bc", ""])) as ArrayRef),
        ])
        .unwrap();
        let good = ipc(&[batch]);
        assert_eq!(ipc_columns(&good, Path::new("b")).unwrap().len(), 2);
        // The second message (the batch): after the schema message's frame.
        let schema_len = u32::from_le_bytes(good[4..8].try_into().unwrap()) as usize;
        let schema_body = 8 + schema_len;
        let meta = schema_body + 8;
        let meta_len = u32::from_le_bytes(good[schema_body + 4..meta].try_into().unwrap()) as usize;
        for at in (meta..meta + meta_len - 8).step_by(4) {
            for v in [1i64 << 40, -1] {
                let mut bad = good.clone();
                bad[at..at + 8].copy_from_slice(&v.to_le_bytes());
                let _ = ipc_columns(&bad, Path::new("b"));
            }
        }
        let mut long = good.clone();
        long[schema_body + 4..meta].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let e = ipc_columns(&long, Path::new("b")).unwrap_err().to_string();
        assert!(e.contains("2147483647 bytes of metadata"), "{e}");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut bad = good.clone();
            bad[(x % good.len() as u64) as usize] ^= (x >> 32) as u8 | 1;
            let _ = ipc_columns(&bad, Path::new("b"));
        }
    }

    /// A null, a type without a layout and bytes that are no stream: errors naming the stream
    /// (and the column and row), never a panic.
    #[test]
    fn nulls_unknown_types_and_damage_are_errors() {
        let with_null =
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef)])
                .unwrap();
        let e = ipc_columns(&ipc(&[with_null]), Path::new("block 3")).unwrap_err().to_string();
        assert!(e.contains("block 3") && e.contains("\"x\", row 1: a null"), "{e}");
        let date = RecordBatch::try_from_iter([(
            "d",
            Arc::new(arrow_array::Date32Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        let e = ipc_columns(&ipc(&[date]), Path::new("b")).unwrap_err().to_string();
        assert!(e.contains("column \"d\" is of Arrow type Date32"), "{e}");
        let ext = arrow_schema::Field::new("p", arrow_schema::DataType::LargeBinary, false).with_metadata(
            [("ARROW:extension:name".to_string(), "ray.data.arrow_pickled_object".to_string())].into(),
        );
        let pickled = RecordBatch::try_new(
            Arc::new(arrow_schema::Schema::new(vec![ext])),
            vec![Arc::new(arrow_array::LargeBinaryArray::from_vec(vec![b"\x80\x05".as_slice()]))],
        )
        .unwrap();
        let e = ipc_columns(&ipc(&[pickled]), Path::new("b")).unwrap_err().to_string();
        assert!(e.contains("extension type \"ray.data.arrow_pickled_object\""), "{e}");
        let good =
            ipc(&[RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)])
                .unwrap()]);
        for cut in [0, 8, good.len() / 2, good.len() - 9] {
            assert!(
                matches!(ipc_columns(&good[..cut], Path::new("b")), Err(Error::BadInput { .. })),
                "{cut}"
            );
        }
    }
}
