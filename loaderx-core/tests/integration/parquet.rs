//! `convert::parquet` against files written by the `parquet` crate itself (several codecs and
//! row-group sizes, every column kind, nulls) and by pyarrow (installed from PyPI by `.ci/run`:
//! `LOADERX_TEST_PYTHON` names its interpreter; without one the pyarrow test skips unless
//! `LOADERX_REQUIRE_PYARROW` is set).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int32Builder, ListBuilder};
use arrow_array::types::Float32Type;
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, Float16Array, Float32Array, Int64Array,
    RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field};
use loaderx_core::convert::{Nulls, ParquetColumn, parquet};
use loaderx_core::{DenseDataset, Error, RaggedDataset, WriteOptions};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

const ROWS: usize = 1000;

fn tokens(i: usize) -> Vec<i32> {
    (0..(i % 13) as i32).map(|k| i as i32 * 100 + k).collect()
}

/// A table of every column kind, `ROWS` rows; `i` has a null at every 97th row.
fn batch() -> RecordBatch {
    let f = Float32Array::from_iter_values((0..ROWS).map(|i| i as f32 * 0.5));
    let i = Int64Array::from_iter((0..ROWS).map(|r| (r % 97 != 5).then_some(r as i64 * 3)));
    let v = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
        (0..ROWS).map(|r| Some((0..3).map(move |k| Some((r * 3 + k) as f32)))),
        3,
    );
    let mut tok = ListBuilder::new(Int32Builder::new());
    for r in 0..ROWS {
        tok.values().append_slice(&tokens(r));
        tok.append(true);
    }
    let s = StringArray::from_iter_values((0..ROWS).map(|r| format!("text {r} é")));
    let mut b = BinaryBuilder::new();
    for r in 0..ROWS {
        b.append_value(vec![r as u8; r % 7]);
    }
    let b = b.finish();
    let img = StructArray::from(vec![
        (
            Arc::new(Field::new("bytes", DataType::Binary, true)),
            Arc::new(BinaryArray::from_iter_values((0..ROWS).map(|r| format!("png{r}").into_bytes())))
                as ArrayRef,
        ),
        (
            Arc::new(Field::new("path", DataType::Utf8, true)),
            Arc::new(StringArray::from_iter_values((0..ROWS).map(|r| format!("{r}.png")))) as ArrayRef,
        ),
    ]);
    let flag = BooleanArray::from_iter((0..ROWS).map(|r| Some(r % 3 == 0)));
    let h = Float16Array::from_iter_values((0..ROWS).map(|r| half::f16::from_f32(r as f32 / 8.0)));
    RecordBatch::try_from_iter(vec![
        ("f", Arc::new(f) as ArrayRef),
        ("i", Arc::new(i) as ArrayRef),
        ("v", Arc::new(v) as ArrayRef),
        ("tok", Arc::new(tok.finish()) as ArrayRef),
        ("s", Arc::new(s) as ArrayRef),
        ("b", Arc::new(b) as ArrayRef),
        ("img", Arc::new(img) as ArrayRef),
        ("flag", Arc::new(flag) as ArrayRef),
        ("h", Arc::new(h) as ArrayRef),
    ])
    .unwrap()
}

fn write(path: &Path, codec: Compression, row_group: usize) {
    let batch = batch();
    let props = WriterProperties::builder().set_compression(codec).set_max_row_group_size(row_group).build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn all(n: usize) -> Vec<u32> {
    (0..n as u32).collect()
}

/// The converted datasets of one file (or the same file twice), checked value by value.
fn check(out: &Path, copies: usize) {
    let n = ROWS * copies;
    let f = DenseDataset::<f32>::open(out.join("f")).unwrap();
    let got = f.get_batch(&all(n)).unwrap();
    let want: Vec<f32> = (0..n).map(|r| (r % ROWS) as f32 * 0.5).collect();
    assert_eq!(got.as_slice::<f32>().unwrap(), &want[..]);
    let v = DenseDataset::<f32>::open(out.join("v")).unwrap();
    assert_eq!(v.source().item_shape(), &[3]);
    let got = v.get_batch(&[0, 999]).unwrap();
    assert_eq!(got.as_slice::<f32>().unwrap(), &[0.0, 1.0, 2.0, 2997.0, 2998.0, 2999.0]);
    let tok = RaggedDataset::<i32>::open(out.join("tok")).unwrap();
    let got = tok.get_batch(&all(n)).unwrap();
    for (r, t) in got.iter().enumerate() {
        assert_eq!(t, &tokens(r % ROWS), "tokens of row {r}");
    }
    let s = RaggedDataset::<u8>::open(out.join("s")).unwrap();
    assert_eq!(s.get_batch(&[7]).unwrap()[0], "text 7 é".as_bytes());
    let b = RaggedDataset::<u8>::open(out.join("b")).unwrap();
    assert_eq!(b.get_batch(&[13]).unwrap()[0], vec![13u8; 6]);
    let img = RaggedDataset::<u8>::open(out.join("img")).unwrap();
    assert_eq!(img.get_batch(&[42]).unwrap()[0], b"png42");
    let flag = DenseDataset::<bool>::open(out.join("flag")).unwrap();
    assert_eq!(flag.get_batch(&[0, 1, 3]).unwrap().as_slice::<bool>().unwrap(), &[true, false, true]);
    let h = DenseDataset::<half::f16>::open(out.join("h")).unwrap();
    assert_eq!(h.get_batch(&[12]).unwrap().as_slice::<half::f16>().unwrap()[0].to_f32(), 1.5);
}

#[test]
fn every_column_kind_converts_across_codecs_and_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let columns: Vec<ParquetColumn> = ["f", "v", "tok", "s", "b", "img", "flag", "h"]
        .iter()
        .map(|c| ParquetColumn::parse(c).unwrap())
        .collect();
    for (k, (codec, group)) in [
        (Compression::UNCOMPRESSED, 1000),
        (Compression::SNAPPY, 64),
        (Compression::ZSTD(ZstdLevel::try_new(3).unwrap()), 333),
        (Compression::GZIP(GzipLevel::default()), 128),
        (Compression::LZ4_RAW, 7),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.path().join(format!("t{k}.parquet"));
        write(&file, codec, group);
        let out = dir.path().join(format!("out{k}"));
        let summaries = parquet(&[&file, &file], &out, &columns, Nulls::Error, WriteOptions::new()).unwrap();
        assert_eq!(summaries.len(), 8);
        assert!(summaries.iter().all(|(_, s)| s.records == 2 * ROWS as u64), "{summaries:?}");
        check(&out, 2);
    }
}

#[test]
fn nulls_are_an_error_naming_the_row_or_filled() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    write(&file, Compression::SNAPPY, 100);
    let col = [ParquetColumn::parse("i=ids").unwrap()];
    let e = parquet(&[&file], dir.path().join("o"), &col, Nulls::Error, WriteOptions::new()).unwrap_err();
    match &e {
        Error::BadInput { path, reason, .. } => {
            assert_eq!(path, &file);
            assert!(reason.contains("\"i\"") && reason.contains("row 5"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(!dir.path().join("o").join("ids").exists() && !dir.path().join("o/ids.partial").exists());
    parquet(&[&file], dir.path().join("o"), &col, Nulls::Fill(-1.0), WriteOptions::new()).unwrap();
    let ids = DenseDataset::<i64>::open(dir.path().join("o/ids")).unwrap();
    assert_eq!(ids.get_batch(&[4, 5, 6, 102]).unwrap().as_slice::<i64>().unwrap(), &[12, -1, 18, -1]);
}

#[test]
fn bad_inputs_are_typed_errors_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    write(&file, Compression::SNAPPY, 100);
    let not = dir.path().join("not.parquet");
    std::fs::write(&not, b"PAR1 this is not parquet").unwrap();
    let out = dir.path().join("o");
    let none: [ParquetColumn; 0] = [];
    let e = parquet(&[&not], &out, &none, Nulls::Error, WriteOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if path == &not), "{e}");
    let e =
        parquet(&[&file], &out, &[ParquetColumn::parse("nope").unwrap()], Nulls::Error, WriteOptions::new())
            .unwrap_err();
    assert!(e.to_string().contains("\"tok\""), "lists the columns: {e}");
    // Every column: `i` has nulls, so the whole conversion fails and leaves no dataset.
    let e = parquet(&[&file], &out, &none, Nulls::Error, WriteOptions::new()).unwrap_err();
    assert!(e.to_string().contains("null"), "{e}");
    let left: Vec<PathBuf> =
        std::fs::read_dir(&out).map(|r| r.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "nothing left: {left:?}");
    assert!(
        matches!(ParquetColumn::parse("a=../x"), Err(Error::InvalidArgument(m)) if m.contains("dataset \"../x\"")),
        "a dataset name is one directory"
    );
    let two = [ParquetColumn::parse("f=x").unwrap(), ParquetColumn::parse("v=x").unwrap()];
    assert!(matches!(
        parquet(&[&file], &out, &two, Nulls::Error, WriteOptions::new()),
        Err(Error::InvalidArgument(m)) if m.contains("two columns are written to dataset \"x\"")
    ));
}

/// The interpreter with pyarrow, or `None` (the test then skips, unless pyarrow is required).
fn python() -> Option<String> {
    let py = std::env::var("LOADERX_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&py)
        .args(["-c", "import pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("LOADERX_REQUIRE_PYARROW").is_none(),
            "pyarrow is required here but {py} lacks it"
        );
        eprintln!("skipping: no pyarrow for {py}");
        return None;
    }
    Some(py)
}

#[test]
fn files_written_by_pyarrow_convert_value_for_value() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
n = 3000
table = pa.table({
    "label": pa.array([i % 10 for i in range(n)], pa.int64()),
    "x": pa.array([float(i) / 3 for i in range(n)], pa.float64()),
    "emb": pa.array([[float(i), float(i) + 0.5] for i in range(n)], pa.list_(pa.float32(), 2)),
    "ids": pa.array([list(range(i % 9)) for i in range(n)], pa.list_(pa.int32())),
    "text": pa.array(["row %d" % i for i in range(n)], pa.string()),
    "image": pa.array([{"bytes": b"\x89PNG%d" % i, "path": "%d.png" % i} for i in range(n)],
                      pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
})
for codec in ["snappy", "gzip", "zstd", "lz4", "none"]:
    pq.write_table(table, sys.argv[1] + "/" + codec + ".parquet", compression=codec, row_group_size=700)
"#;
    let o = std::process::Command::new(&py).args(["-c", script]).arg(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for codec in ["snappy", "gzip", "zstd", "lz4", "none"] {
        let out = dir.path().join(format!("out-{codec}"));
        let none: [ParquetColumn; 0] = [];
        let file = dir.path().join(format!("{codec}.parquet"));
        let s = parquet(&[&file], &out, &none, Nulls::Error, WriteOptions::new()).unwrap();
        assert_eq!(s.len(), 6);
        let label = DenseDataset::<i64>::open(out.join("label")).unwrap();
        assert_eq!(label.get_batch(&[0, 11, 2999]).unwrap().as_slice::<i64>().unwrap(), &[0, 1, 9]);
        let x = DenseDataset::<f64>::open(out.join("x")).unwrap();
        assert_eq!(x.get_batch(&[3]).unwrap().as_slice::<f64>().unwrap(), &[1.0]);
        let emb = DenseDataset::<f32>::open(out.join("emb")).unwrap();
        assert_eq!(
            emb.get_batch(&[700]).unwrap().as_slice::<f32>().unwrap(),
            &[700.0, 700.5],
            "across row groups"
        );
        let ids = RaggedDataset::<i32>::open(out.join("ids")).unwrap();
        assert_eq!(ids.get_batch(&[17]).unwrap()[0], (0..8).collect::<Vec<i32>>());
        let text = RaggedDataset::<u8>::open(out.join("text")).unwrap();
        assert_eq!(text.get_batch(&[2345]).unwrap()[0], b"row 2345");
        let image = RaggedDataset::<u8>::open(out.join("image")).unwrap();
        assert_eq!(image.get_batch(&[9]).unwrap()[0], b"\x89PNG9");
    }
}

/// A small file of levels, lists and dictionary strings (nulls in each), uncompressed so that
/// damaged bytes reach the decoders: 40 rows in row groups of 20.
fn small_file(path: &Path) {
    let n = 40;
    let i = Int64Array::from_iter((0..n).map(|r| (r % 7 != 3).then_some(r as i64)));
    let mut tok = ListBuilder::new(Int32Builder::new());
    for r in 0..n {
        tok.values().append_slice(&tokens(r));
        tok.append(r % 5 != 1);
    }
    let s = StringArray::from_iter_values((0..n).map(|r| format!("w{}", r % 4)));
    let batch = RecordBatch::try_from_iter(vec![
        ("i", Arc::new(i) as ArrayRef),
        ("tok", Arc::new(tok.finish()) as ArrayRef),
        ("s", Arc::new(s) as ArrayRef),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_max_row_group_size(20)
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Damaged files (issue 27, 3.8: parquet 57.3.2 and arrow-ipc 57.3.2 panic on many: an RLE
/// bit width past the type, a negative column start, `Option::unwrap` in the thrift decoding,
/// an unknown type): every byte of the footer set to a value that breaks lengths, offsets or
/// enums, and each page's first bytes to each of them. Each conversion converts or fails with
/// `BadInput` naming the file (the decoder's panic caught, its message kept); none panics.
#[test]
fn damaged_files_are_typed_errors_never_panics() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    // Two thousand conversions, each synced when it succeeds: on a memory file system where
    // there is one, so that the disk's sync latency does not make the test minutes long.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let file = dir.path().join("t.parquet");
    small_file(&file);
    let good = std::fs::read(&file).unwrap();
    let footer = u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap()) as usize;
    const VALUES: [u8; 3] = [0x00, 0xFF, 0x7F];
    let mut cases: Vec<(usize, u8)> =
        (good.len() - 8 - footer..good.len() - 8).map(|p| (p, VALUES[p % 3])).collect();
    let meta = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap().metadata().clone();
    for g in meta.row_groups() {
        for c in g.columns() {
            for start in [Some(c.data_page_offset()), c.dictionary_page_offset()].into_iter().flatten() {
                let page = start as usize..(start as usize + 32).min(good.len());
                cases.extend(page.flat_map(|p| VALUES.map(|v| (p, v))));
            }
        }
    }
    let out = dir.path().join("o");
    let none: [ParquetColumn; 0] = [];
    let (mut caught, mut converted) = (0, 0);
    for &(p, v) in &cases {
        let mut bytes = good.clone();
        bytes[p] = v;
        std::fs::write(&file, &bytes).unwrap();
        let opts = WriteOptions::new().overwrite(true);
        match parquet(&[&file], &out, &none, Nulls::Fill(0.0), opts) {
            Ok(_) => converted += 1,
            Err(Error::BadInput { path, reason, .. }) => {
                assert_eq!(path, file, "byte {p} = {v:#x}: {reason}");
                caught += usize::from(reason.contains("broke"));
            }
            // A damaged name or length can make two datasets of one name, or a record too
            // large for the store: typed errors too.
            Err(Error::RecordTooLarge { .. } | Error::InvalidArgument(_)) => {}
            Err(e) => panic!("byte {p} = {v:#x}: {e:?}"),
        }
    }
    eprintln!("{} damaged files: {converted} converted, {caught} panics of the decoder caught", cases.len());
}

/// Columns `a` and `a.partial` (issue 27, 3.17): each dataset `D` is written as `D.partial`
/// first, so the second column's dataset would be the first's staging directory. A dataset name
/// ending in `.partial` is refused, naming the file when it comes from the file's columns; the
/// column converts under another name. So are `a.old` and `a.old1`, the names a replacement
/// parks the old `a` under, which `stitch` leaves out (look 113, L113-1: the column was dropped
/// from the set without a word), and a store file's name (L113-3).
#[test]
fn a_column_named_as_another_columns_staging_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    let out = dir.path().join("o");
    for bad in ["a.old", "a.old1", "index.zr", "a.partial"] {
        let a = Int64Array::from_iter_values(0..10);
        let b = Int64Array::from_iter_values(100..110);
        let batch =
            RecordBatch::try_from_iter(vec![("a", Arc::new(a) as ArrayRef), (bad, Arc::new(b) as ArrayRef)])
                .unwrap();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let none: [ParquetColumn; 0] = [];
        match parquet(&[&file], &out, &none, Nulls::Error, WriteOptions::new()).unwrap_err() {
            Error::BadInput { path, reason, .. } => {
                assert_eq!(path, file);
                assert!(reason.contains(&format!("{bad:?}")) && reason.contains("NAME=DATASET"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!out.exists(), "nothing written");
    }
    assert!(matches!(ParquetColumn::parse("a=b.partial"), Err(Error::InvalidArgument(_))));
    let cols = [ParquetColumn::parse("a").unwrap(), ParquetColumn::parse("a.partial=a_partial").unwrap()];
    parquet(&[&file], &out, &cols, Nulls::Error, WriteOptions::new()).unwrap();
    let a = DenseDataset::<i64>::open(out.join("a")).unwrap();
    let b = DenseDataset::<i64>::open(out.join("a_partial")).unwrap();
    assert_eq!(a.get_batch(&[9]).unwrap().as_slice::<i64>().unwrap(), &[9]);
    assert_eq!(b.get_batch(&[9]).unwrap().as_slice::<i64>().unwrap(), &[109]);
}

/// A pipe or a device is not a Parquet file that happens to be empty (issue 27, 3.13): refused
/// naming the path, and a FIFO without a writer does not make the open wait.
#[cfg(target_os = "linux")]
#[test]
fn inputs_that_are_not_regular_files_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let none: [ParquetColumn; 0] = [];
    for (input, needle) in [(Path::new("/dev/null"), "character device"), (fifo.as_path(), "pipe")] {
        match parquet(&[input], dir.path().join("o"), &none, Nulls::Error, WriteOptions::new()).unwrap_err() {
            Error::BadInput { path, reason, .. } => {
                assert_eq!(path, input);
                assert!(reason.contains(needle) && reason.contains("not a regular file"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A schema whose fixed sizes multiply past `usize` (found by the `parquet` fuzz target: the
/// item size overflowed in the writer's schema check): refused as a type loaderx cannot hold,
/// naming the file.
#[test]
fn fixed_sizes_that_overflow_an_item_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    let side = 1 << 21;
    let mut t = DataType::Float32;
    for _ in 0..3 {
        t = DataType::FixedSizeList(Arc::new(Field::new("item", t, true)), side);
    }
    let schema = Arc::new(arrow_schema::Schema::new(vec![Field::new("x", t, true)]));
    let batch = RecordBatch::new_empty(schema.clone());
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let none: [ParquetColumn; 0] = [];
    match parquet(&[&file], dir.path().join("o"), &none, Nulls::Error, WriteOptions::new()).unwrap_err() {
        Error::BadInput { path, reason, .. } => {
            assert_eq!(path, file);
            assert!(reason.contains("overflows"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
