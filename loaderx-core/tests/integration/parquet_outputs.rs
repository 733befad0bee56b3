//! `convert::parquet`'s outputs under hostile inputs and failures (looks 100 to 104): fills a
//! column cannot hold, nulls inside lists, hidden names stitched, a forced conversion failing
//! while it places its columns.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, Int64Array, RecordBatch};
use loaderx_core::convert::{Nulls, ParquetColumn, parquet};
use loaderx_core::{DenseDataset, Error, WriteOptions};
use parquet::arrow::ArrowWriter;

/// `dir/name`: a Parquet file of the one batch of `cols`.
fn table(dir: &std::path::Path, name: &str, cols: Vec<(&str, ArrayRef)>) -> PathBuf {
    let file = dir.join(name);
    let batch = RecordBatch::try_from_iter(cols).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    file
}

/// Look 100: a fill a column cannot hold was cast without a word (L100-2: 300 became 255 in a
/// `u8` column, -1 became 0, 1.5 became 1), and a null inside a list was reported at its
/// value's index as a row (L100-3: "row 6" of a table of 4 rows).
#[test]
fn a_fill_is_a_value_of_its_column_and_a_null_in_a_list_names_its_row() {
    use arrow_array::types::{Int32Type, UInt8Type};
    use arrow_array::{ListArray, PrimitiveArray};
    let dir = tempfile::tempdir().unwrap();
    let table = |name: &str, cols: Vec<(&str, ArrayRef)>| table(dir.path(), name, cols);
    let u8s = table(
        "u8.parquet",
        vec![("c", Arc::new(PrimitiveArray::<UInt8Type>::from(vec![Some(7), None])) as ArrayRef)],
    );
    let none: [ParquetColumn; 0] = [];
    for bad in [300.0, -1.0, 1.5, f64::NAN] {
        let out = dir.path().join("o");
        match parquet(&[&u8s], &out, &none, Nulls::Fill(bad), WriteOptions::new()) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("column \"c\" holds u8"), "{m}"),
            other => panic!("{bad}: {other:?}"),
        }
        assert!(!out.exists(), "{bad}: nothing written");
    }
    parquet(&[&u8s], dir.path().join("ok"), &none, Nulls::Fill(255.0), WriteOptions::new()).unwrap();
    let c = DenseDataset::<u8>::open(dir.path().join("ok/c")).unwrap();
    assert_eq!(c.get_batch(&[0, 1]).unwrap().as_slice::<u8>().unwrap(), &[7, 255]);
    // Look 102, L102-3: integers past 2^53 went through an f64 (2^53 + 1 filled 2^53; i64::MAX
    // and u64::MAX refused). Given as integers, they are taken exactly, or refused by range.
    use arrow_array::types::{Int64Type, UInt64Type};
    let i64s = table(
        "i64.parquet",
        vec![("c", Arc::new(PrimitiveArray::<Int64Type>::from(vec![Some(1), None])) as ArrayRef)],
    );
    let u64s = table(
        "u64.parquet",
        vec![("c", Arc::new(PrimitiveArray::<UInt64Type>::from(vec![Some(1), None])) as ArrayRef)],
    );
    for (k, (file, fill, want)) in [
        (&i64s, "9007199254740993", 9007199254740993u64),
        (&i64s, "9223372036854775807", i64::MAX as u64),
        (&i64s, "-9223372036854775808", i64::MIN as u64),
        (&u64s, "18446744073709551615", u64::MAX),
    ]
    .into_iter()
    .enumerate()
    {
        let out = dir.path().join(format!("big{k}"));
        parquet(&[file], &out, &none, Nulls::parse_fill(fill).unwrap(), WriteOptions::new()).unwrap();
        // The bits of an i64 or a u64 alike.
        let c = loaderx_core::DenseSource::open(out.join("c")).unwrap();
        let want: Vec<u8> = [1u64, want].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(c.get_batch(&[0, 1]).unwrap().as_bytes(), &want[..], "{fill}");
    }
    for (file, fill) in [(&i64s, "9223372036854775808"), (&u64s, "-1"), (&u64s, "18446744073709551616")] {
        match parquet(
            &[file],
            dir.path().join("no"),
            &none,
            Nulls::parse_fill(fill).unwrap(),
            WriteOptions::new(),
        ) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains(&format!("nulls filled with {fill}:")), "{m}")
            }
            other => panic!("{fill}: {other:?}"),
        }
    }
    assert!(Nulls::parse_fill("1e400x").is_err());
    // Nulls inside lists: the table's row, and the element.
    let fixed = FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
        vec![Some(vec![Some(1), Some(2)]), Some(vec![Some(3), Some(4)]), Some(vec![Some(5), None]), None],
        2,
    );
    let ragged = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), Some(2), Some(3)]),
        Some(vec![Some(4), Some(5)]),
        Some(vec![Some(6), None]),
    ]);
    let null_row = FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
        vec![Some(vec![Some(1), Some(2)]), None, Some(vec![Some(3), None])],
        2,
    );
    for (name, col, says) in [
        ("fl.parquet", Arc::new(fixed) as ArrayRef, "row 2, element 1 of its list"),
        ("l.parquet", Arc::new(ragged) as ArrayRef, "row 2, element 1 of its list"),
        ("row.parquet", Arc::new(null_row) as ArrayRef, "row 1: a null value"),
    ] {
        let file = table(name, vec![("v", col)]);
        match parquet(
            &[&file],
            dir.path().join(name).with_extension("out"),
            &none,
            Nulls::Error,
            WriteOptions::new(),
        ) {
            Err(Error::BadInput { reason, .. }) => assert!(reason.contains(says), "{name}: {reason}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Look 100, L100-1: a column named `.col` became the dataset `OUT/.col` in every part, and
/// `stitch_datasets` left it out of the set without a word. A hidden name is skipped only when it
/// is no dataset.
#[test]
fn a_dataset_with_a_hidden_name_is_stitched_with_the_others() {
    use loaderx_core::convert::{Part, parquet_part, stitch_datasets};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    let batch = RecordBatch::try_from_iter(vec![
        (".col", Arc::new(Int64Array::from_iter_values(0..10)) as ArrayRef),
        ("y", Arc::new(Int64Array::from_iter_values(100..110)) as ArrayRef),
    ])
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let none: [ParquetColumn; 0] = [];
    let parts: Vec<PathBuf> = (0..2).map(|k| dir.path().join(format!("p{k}"))).collect();
    for (k, p) in parts.iter().enumerate() {
        parquet_part(&[&file], p, &none, Nulls::Error, WriteOptions::new(), Part::new(k, 2).unwrap())
            .unwrap();
        // A hidden file beside them is still no part of the set.
        std::fs::write(p.join(".DS_Store"), b"x").unwrap();
    }
    let set = dir.path().join("set");
    let made = stitch_datasets(&parts, &set).unwrap();
    assert_eq!(made.len(), 2, "{made:?}");
    let col = DenseDataset::<i64>::open(set.join(".col")).unwrap();
    assert_eq!(
        col.get_batch(&(0..10).collect::<Vec<u32>>()).unwrap().as_slice::<i64>().unwrap(),
        &(0..10).collect::<Vec<i64>>()[..]
    );
    assert!(!set.join(".DS_Store").exists());
}

#[test]
#[ignore = "a child of a_forced_conversion_that_fails_leaves_every_column_old_or_new: runs under its shim"]
fn child_forced_parquet() {
    let Some((out, input)) = crate::faults::child_store() else { return };
    let none: [ParquetColumn; 0] = [];
    let r = parquet(&[&input], &out, &none, Nulls::Error, WriteOptions::new().overwrite(true));
    println!("parquet {}", crate::faults::outcome(&r));
}

/// Look 104, L104-1: a forced conversion whose last column failed to be placed removed the
/// columns placed before it, which had replaced their old datasets: neither old nor new was
/// left. Under a `rename` failing at every point of the placing, every column holds its old
/// dataset (the conversion failed) or every column its new one, never nothing, never a mix.
#[cfg(target_os = "linux")]
#[test]
fn a_forced_conversion_that_fails_leaves_every_column_old_or_new() {
    crate::faults::shim();
    let dir = tempfile::tempdir().unwrap();
    let table = |name: &str, base: i64| {
        let file = dir.path().join(name);
        let col = |k: i64| {
            Arc::new(Int64Array::from_iter_values(base + k * 1000..base + k * 1000 + 10)) as ArrayRef
        };
        let batch = RecordBatch::try_from_iter(vec![("a", col(0)), ("b", col(1)), ("c", col(2))]).unwrap();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        file
    };
    let (old, new) = (table("old.parquet", 0), table("new.parquet", 100));
    let none: [ParquetColumn; 0] = [];
    let mut failed = 0;
    for at in 1..=12 {
        let out = dir.path().join(format!("o{at}"));
        parquet(&[&old], &out, &none, Nulls::Error, WriteOptions::new()).unwrap();
        let printed = crate::faults::in_child_failing(
            "parquet_outputs::child_forced_parquet",
            &out,
            new.to_str().unwrap(),
            "rename",
            at,
        );
        let fail = printed.contains("parquet failed");
        failed += usize::from(fail);
        // Look 120, L120-2: all old when it failed, all new when not; never a mix.
        let base = if fail { 0 } else { 100 };
        for (k, col) in ["a", "b", "c"].into_iter().enumerate() {
            let d = DenseDataset::<i64>::open(out.join(col))
                .unwrap_or_else(|e| panic!("rename {at}: {col} is gone ({e}); {printed}"));
            let first = d.get_batch(&[0]).unwrap().as_slice::<i64>().unwrap()[0];
            assert_eq!(first, base + k as i64 * 1000, "rename {at}: {col}; {printed}");
            assert_eq!(d.len(), 10);
        }
        let mut left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        left.sort();
        assert_eq!(left, ["a", "b", "c"], "rename {at}: nothing set aside is left; {printed}");
    }
    assert!(failed > 0, "a rename failed");
}

/// Look 104, L104-5: a dataset (or a store set) given as the output directory took the columns'
/// datasets inside it, and could then no longer be replaced as one. Refused, nothing written.
#[test]
fn a_dataset_is_no_directory_of_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    let batch =
        RecordBatch::try_from_iter(vec![("a", Arc::new(Int64Array::from_iter_values(0..4)) as ArrayRef)])
            .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let ds = dir.path().join("ds");
    let mut dw = loaderx_core::DatasetWriter::dense::<u32>(&ds, vec![], WriteOptions::new()).unwrap();
    dw.append(&[1u32, 2]).unwrap();
    dw.finish().unwrap();
    let before: Vec<PathBuf> = std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().path()).collect();
    let none: [ParquetColumn; 0] = [];
    match parquet(&[&file], &ds, &none, Nulls::Error, WriteOptions::new()) {
        Err(Error::NotReplaceable { path, reason }) => {
            assert_eq!(path, ds);
            assert!(reason.contains("it is a dataset"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let after: Vec<PathBuf> = std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(before.len(), after.len(), "nothing written inside");
}

/// Look 106, L106-2: a part whose forced reconversion was killed after its exchange held the
/// old copies beside the new datasets (`x.partial`, `x.old`): `stitch` counted them as datasets
/// and blamed the other part. They are a replacement's leftovers, not the part's data.
#[test]
fn a_replacements_leftovers_in_a_part_are_no_datasets_of_it() {
    use loaderx_core::convert::stitch_datasets;
    let dir = tempfile::tempdir().unwrap();
    let parts: Vec<PathBuf> = (0..2).map(|k| dir.path().join(format!("p{k}"))).collect();
    for p in &parts {
        for name in ["x", "y"] {
            let mut w =
                loaderx_core::DatasetWriter::dense::<u32>(p.join(name), vec![], WriteOptions::new()).unwrap();
            w.append(&[1u32, 2]).unwrap();
            w.finish().unwrap();
        }
    }
    for (from, to) in [("x", "x.partial"), ("y", "y.old"), ("y", "y.old3")] {
        // Written under another name: no output may be named `*.partial` (look 140, L140-1).
        let made = parts[0].join("made");
        let mut w = loaderx_core::DatasetWriter::dense::<u32>(&made, vec![], WriteOptions::new()).unwrap();
        w.append(&[9u32]).unwrap();
        w.finish().unwrap();
        std::fs::rename(made, parts[0].join(to)).unwrap();
        assert!(parts[0].join(from).exists());
    }
    let made = stitch_datasets(&parts, dir.path().join("set")).unwrap();
    let names: Vec<&str> = made.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["x", "y"]);
    assert_eq!(made[0].1.records, 4);
}

/// Look 121, L121-1: a forced conversion of a file without an earlier column left that column's
/// dataset in OUT beside the new ones; `--force` replaces OUT.
#[test]
fn a_forced_conversion_leaves_no_dataset_of_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, cols: Vec<(&str, ArrayRef)>| table(dir.path(), name, cols);
    let a = write(
        "a.parquet",
        vec![
            ("label", Arc::new(Int64Array::from_iter_values(0..4)) as ArrayRef),
            ("tokens", Arc::new(Int64Array::from_iter_values(10..14)) as ArrayRef),
        ],
    );
    let b = write("b.parquet", vec![("label", Arc::new(Int64Array::from_iter_values(100..104)) as ArrayRef)]);
    let out = dir.path().join("out");
    let none: [ParquetColumn; 0] = [];
    parquet(&[&a], &out, &none, Nulls::Error, WriteOptions::new()).unwrap();
    parquet(&[&b], &out, &none, Nulls::Error, WriteOptions::new().overwrite(true)).unwrap();
    assert!(!out.join("tokens").exists(), "the earlier conversion's tokens went with OUT");
    assert_eq!(DenseDataset::<i64>::open(out.join("label")).unwrap().get_vec(&[0]).unwrap(), vec![100]);
}
