//! Conversions in parts (`convert::*_part`): for every converter, each part holds exactly the
//! records of the same range of the whole conversion, parts of no records are empty datasets,
//! and the parts stitched (`stitch`, `stitch_datasets`) are the whole conversion record for
//! record. Directories of parts (`part_dirs`) are listed in numeric order and refused, naming
//! the parts, when a number is missing or doubled.

use std::io::Write;
use std::path::{Path, PathBuf};

use loaderx_core::convert::{self, NpyHeader, Part, part_dirs, stitch_datasets};
use loaderx_core::{DType, DenseSource, Error, Kind, RaggedSource, Schema, WriteOptions, stitch};

/// Every record of the dataset or store set at `p` as bytes, read through the dataset layer
/// (a set through its parts).
pub fn records_of(p: &Path) -> Vec<Vec<u8>> {
    let schema = Schema::read(p).unwrap();
    let unit = schema.unit_bytes();
    match schema.kind {
        Kind::Dense => {
            let s = DenseSource::open(p).unwrap();
            let all: Vec<u32> = (0..s.len() as u32).collect();
            let mut buf = vec![0u8; all.len() * unit];
            s.gather_bytes(&all, &mut buf).unwrap();
            if unit == 0 {
                vec![Vec::new(); all.len()]
            } else {
                buf.chunks(unit).map(<[u8]>::to_vec).collect()
            }
        }
        Kind::Ragged | Kind::Image => {
            let s = RaggedSource::open(p).unwrap();
            let all: Vec<u32> = (0..s.len() as u32).collect();
            let b = s.get_batch(&all).unwrap();
            let (off, bytes) = (b.offsets(), b.values().as_bytes());
            (0..all.len()).map(|k| bytes[off[k] * unit..off[k + 1] * unit].to_vec()).collect()
        }
    }
}

/// Checks the parts `parts` of `count` (each a dataset) against the whole conversion at
/// `whole`: each part holds the records of its range, and their set is the whole.
fn check_parts(
    whole: &Path,
    parts: &[PathBuf],
    set: &Path,
    range: impl Fn(Part, u64) -> std::ops::Range<u64>,
) {
    let all = records_of(whole);
    let mut joined = Vec::new();
    for (k, p) in parts.iter().enumerate() {
        let got = records_of(p);
        let r = range(Part::new(k, parts.len()).unwrap(), all.len() as u64);
        assert_eq!(
            got,
            all[r.start as usize..r.end as usize],
            "part {k} of {}: {}",
            parts.len(),
            p.display()
        );
        assert_eq!(Schema::read(p).unwrap(), Schema::read(whole).unwrap(), "an empty part keeps the schema");
        joined.extend(got);
    }
    assert_eq!(joined, all, "the parts in order are the whole");
    let s = stitch(parts, set).unwrap();
    assert_eq!((s.parts, s.records), (parts.len(), all.len() as u64));
    assert_eq!(records_of(set), all, "the stitched set is the whole, record for record");
}

/// `n` counts of parts to try on `rows` rows: one, a few, and more parts than rows.
fn counts(rows: usize) -> [usize; 4] {
    [1, 3, 7, rows + 3]
}

pub(crate) fn npy_file(path: &Path, rows: usize) {
    let mut bytes = NpyHeader::encode(DType::F32, &[rows, 2, 3]).unwrap();
    for x in 0..rows * 6 {
        bytes.extend_from_slice(&(x as f32 * 0.25).to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn npy_parts_are_row_ranges_and_stitch_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.npy");
    npy_file(&input, 10);
    let whole = dir.path().join("whole");
    convert::npy(&input, &whole, WriteOptions::new()).unwrap();
    for n in counts(10) {
        let parts: Vec<PathBuf> =
            (0..n).map(|k| dir.path().join(format!("n{n}/{}", Part::new(k, n).unwrap().name()))).collect();
        for (k, p) in parts.iter().enumerate() {
            let s = convert::npy_part(&input, p, WriteOptions::new(), Part::new(k, n).unwrap()).unwrap();
            assert_eq!(s.records, Part::new(k, n).unwrap().rows(10).count() as u64);
            assert_eq!(s.bytes_in, s.records * 24);
        }
        check_parts(&whole, &parts, &dir.path().join(format!("set{n}")), Part::rows);
    }
    let bad = Part { index: 2, count: 2 };
    let e = convert::npy_part(&input, dir.path().join("bad"), WriteOptions::new(), bad).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(m) if m.contains("part 2 of 2")));
    assert!(!dir.path().join("bad").exists());
}

/// An npy part's bad `bool` is named at its offset in the whole file, and a part elsewhere in
/// the same file converts.
#[test]
fn npy_part_errors_name_offsets_in_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("b.npy");
    let mut bytes = NpyHeader::encode(DType::Bool, &[8]).unwrap();
    let header = bytes.len();
    bytes.extend_from_slice(&[0, 1, 0, 1, 0, 1, 7, 1]);
    std::fs::write(&input, bytes).unwrap();
    let e = convert::npy_part(&input, dir.path().join("p1"), WriteOptions::new(), Part::new(1, 2).unwrap())
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("element 6") && msg.contains(&format!("offset {}", header + 6)), "{msg}");
    assert!(!dir.path().join("p1").exists());
    convert::npy_part(&input, dir.path().join("p0"), WriteOptions::new(), Part::new(0, 2).unwrap()).unwrap();
    assert_eq!(records_of(&dir.path().join("p0")), vec![vec![0], vec![1], vec![0], vec![1]]);
}

fn idx_bytes(rows: u32) -> Vec<u8> {
    let mut v = vec![0, 0, 0x0B, 2];
    v.extend_from_slice(&rows.to_be_bytes());
    v.extend_from_slice(&3u32.to_be_bytes());
    for x in 0..rows as i16 * 3 {
        v.extend_from_slice(&(x * 7 - 100).to_be_bytes());
    }
    v
}

#[test]
fn idx_parts_plain_and_gzip_are_row_ranges_and_stitch_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("a.idx");
    std::fs::write(&plain, idx_bytes(11)).unwrap();
    let gz = dir.path().join("a.idx.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&idx_bytes(11)).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    for (name, input) in [("plain", &plain), ("gz", &gz)] {
        let whole = dir.path().join(format!("{name}-whole"));
        convert::idx(input, &whole, WriteOptions::new()).unwrap();
        for n in counts(11) {
            let parts: Vec<PathBuf> = (0..n).map(|k| dir.path().join(format!("{name}{n}/p{k}"))).collect();
            for (k, p) in parts.iter().enumerate() {
                convert::idx_part(input, p, WriteOptions::new(), Part::new(k, n).unwrap()).unwrap();
            }
            check_parts(&whole, &parts, &dir.path().join(format!("{name}-set{n}")), Part::rows);
        }
    }
    // Trailing bytes after the data are refused by every part, as by the whole.
    let mut long = idx_bytes(4);
    long.push(0);
    let trailing = dir.path().join("t.idx");
    std::fs::write(&trailing, &long).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&long).unwrap();
    let trailing_gz = dir.path().join("t.idx.gz");
    std::fs::write(&trailing_gz, enc.finish().unwrap()).unwrap();
    for input in [&trailing, &trailing_gz] {
        for k in 0..2 {
            let out = dir.path().join(format!("t{k}"));
            let e =
                convert::idx_part(input, &out, WriteOptions::new(), Part::new(k, 2).unwrap()).unwrap_err();
            assert!(
                matches!(&e, Error::BadInput { path, reason, .. } if path == input && reason.contains("trailing")),
                "{e}"
            );
            assert!(!out.exists());
        }
    }
}

#[test]
fn dir_parts_are_ranges_of_the_sorted_files_and_stitch_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    for (i, name) in ["b", "a", "C", "a0", ".h", "z", "m"].iter().enumerate() {
        std::fs::write(input.join(name), vec![i as u8; i * 3]).unwrap();
    }
    std::fs::create_dir(input.join("sub")).unwrap();
    let whole = dir.path().join("whole");
    convert::dir(&input, &whole, WriteOptions::new()).unwrap();
    for n in counts(7) {
        let parts: Vec<PathBuf> = (0..n).map(|k| dir.path().join(format!("n{n}/p{k}"))).collect();
        for (k, p) in parts.iter().enumerate() {
            convert::dir_part(&input, p, WriteOptions::new(), Part::new(k, n).unwrap()).unwrap();
        }
        check_parts(&whole, &parts, &dir.path().join(format!("set{n}")), Part::rows);
    }
}

#[test]
fn safetensors_parts_stitch_to_one_set_per_tensor() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let w: Vec<u8> = (0..9 * 4 * 2).map(|x| x as u8).collect();
    let b: Vec<u8> = (0..5u16).flat_map(|x| (x * 1000).to_le_bytes()).collect();
    let s = 7.5f32.to_le_bytes();
    let tensors = vec![
        ("w", TensorView::new(Dtype::I16, vec![9, 4], &w).unwrap()),
        ("b", TensorView::new(Dtype::U16, vec![5], &b).unwrap()),
        ("scalar", TensorView::new(Dtype::F32, vec![], &s).unwrap()),
    ];
    let input = dir.path().join("m.safetensors");
    std::fs::write(&input, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let whole = dir.path().join("whole");
    convert::safetensors(&input, &whole, WriteOptions::new()).unwrap();
    for n in [1usize, 2, 4, 12] {
        let parts: Vec<PathBuf> =
            (0..n).map(|k| dir.path().join(format!("n{n}/{}", Part::new(k, n).unwrap().name()))).collect();
        for (k, p) in parts.iter().enumerate() {
            let got =
                convert::safetensors_part(&input, p, WriteOptions::new(), Part::new(k, n).unwrap()).unwrap();
            assert_eq!(got.len(), 3);
        }
        let set = dir.path().join(format!("set{n}"));
        let sets = stitch_datasets(&parts, &set).unwrap();
        let names: Vec<&str> = sets.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["b", "scalar", "w"]);
        for name in names {
            let all = records_of(&whole.join(name));
            for (k, p) in parts.iter().enumerate() {
                let r = Part::new(k, n).unwrap().rows(all.len() as u64);
                assert_eq!(
                    records_of(&p.join(name)),
                    all[r.start as usize..r.end as usize],
                    "{name}, part {k} of {n}"
                );
            }
            assert_eq!(records_of(&set.join(name)), all, "{name} stitched from {n} parts");
        }
    }
}

/// Parts of no records, as many as there are (even every part), stitch; part directories are
/// listed in numeric order whatever their width, and missing or doubled numbers are refused.
#[test]
fn empty_parts_stitch_and_part_directories_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.npy");
    npy_file(&input, 2);
    let parts_dir = dir.path().join("parts");
    // Four parts of 2 rows: parts 0 and 2 are empty.
    for k in 0..4 {
        let name = if k == 3 { "part-3".to_string() } else { Part::new(k, 4).unwrap().name() };
        convert::npy_part(&input, parts_dir.join(name), WriteOptions::new(), Part::new(k, 4).unwrap())
            .unwrap();
    }
    std::fs::write(parts_dir.join("slurm-1.out"), b"log").unwrap();
    std::fs::create_dir(parts_dir.join("part-00004.partial")).unwrap();
    let listed = part_dirs(&parts_dir, None).unwrap();
    let names: Vec<String> =
        listed.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["part-00000", "part-00001", "part-00002", "part-3"]);
    assert_eq!(part_dirs(&parts_dir, Some(4)).unwrap(), listed);
    let s = stitch(&listed, dir.path().join("set")).unwrap();
    assert_eq!((s.parts, s.records), (4, 2));
    let whole = dir.path().join("whole");
    convert::npy(&input, &whole, WriteOptions::new()).unwrap();
    assert_eq!(records_of(&dir.path().join("set")), records_of(&whole));
    // A set of only empty parts is an empty set.
    let empty = [listed[0].clone(), listed[2].clone()];
    assert_eq!(stitch(&empty, dir.path().join("empty")).unwrap().records, 0);
    assert!(DenseSource::open(dir.path().join("empty")).unwrap().is_empty());

    let bad = |e: Error| match e {
        Error::BadInput { path, reason, .. } => {
            assert_eq!(path, parts_dir);
            reason
        }
        other => panic!("{other:?}"),
    };
    let why = bad(part_dirs(&parts_dir, Some(6)).unwrap_err());
    assert!(why.contains("2 of 6 parts missing: part-00004, part-00005"), "{why}");
    std::fs::rename(parts_dir.join("part-00001"), parts_dir.join("part-00001.old")).unwrap();
    let why = bad(part_dirs(&parts_dir, None).unwrap_err());
    assert!(why.contains("1 of 4 parts missing: part-00001"), "{why}");
    std::fs::rename(parts_dir.join("part-00001.old"), parts_dir.join("part-00001")).unwrap();
    std::fs::create_dir(parts_dir.join("part-00003")).unwrap();
    let why = bad(part_dirs(&parts_dir, None).unwrap_err());
    assert!(why.contains("part-00003 and part-3"), "{why}");
    let e = part_dirs(dir.path().join("whole"), None).unwrap_err();
    assert!(
        matches!(&e, Error::BadInput { path, reason, .. } if *path == whole && reason.contains("no parts")),
        "{e}"
    );
}

/// Look 56, S1: a part's `classes.txt` that was a link was left out of the set without a word.
/// A link to a file inside the part is copied as that file; one leading out is refused, named.
#[cfg(unix)]
#[test]
fn stitch_datasets_copies_a_link_inside_its_part_and_refuses_one_leading_out() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |part: &str| {
        let mut w = loaderx_core::DatasetWriter::dense::<u32>(
            dir.path().join(part).join("labels"),
            vec![],
            WriteOptions::new(),
        )
        .unwrap();
        w.append(&[1u32, 2]).unwrap();
        w.finish().unwrap();
        dir.path().join(part)
    };
    let (a, b) = (mk("a"), mk("b"));
    for p in [&a, &b] {
        std::fs::write(p.join("names.txt"), b"cat\ndog\n").unwrap();
        std::os::unix::fs::symlink("names.txt", p.join("classes.txt")).unwrap();
    }
    let out = dir.path().join("out");
    stitch_datasets(&[&a, &b], &out).unwrap();
    assert_eq!(std::fs::read(out.join("classes.txt")).unwrap(), b"cat\ndog\n");
    assert!(!std::fs::symlink_metadata(out.join("classes.txt")).unwrap().file_type().is_symlink());
    // Look 140, L140-2: the list of copies a stitch keeps while staging is gone from the set.
    let mut names: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["classes.txt", "labels", "names.txt"]);
    // A link out of the part (a shared file beside the parts): refused, nothing written.
    std::fs::write(dir.path().join("shared.txt"), b"cat\n").unwrap();
    for p in [&a, &b] {
        std::fs::remove_file(p.join("classes.txt")).unwrap();
        std::os::unix::fs::symlink("../shared.txt", p.join("classes.txt")).unwrap();
    }
    let out2 = dir.path().join("out2");
    let e = stitch_datasets(&[&a, &b], &out2).unwrap_err();
    assert!(
        matches!(&e, Error::BadInput { path, reason, .. } if *path == a.join("classes.txt") && reason.contains("link")),
        "{e}"
    );
    assert!(!out2.exists());
    // Look 57: a link to a dataset outside the part was taken as the part's dataset.
    for p in [&a, &b] {
        std::fs::remove_file(p.join("classes.txt")).unwrap();
        std::fs::write(p.join("classes.txt"), b"cat\n").unwrap();
    }
    std::os::unix::fs::symlink(a.join("labels"), b.join("extra")).unwrap();
    std::os::unix::fs::symlink("labels", a.join("extra")).unwrap();
    let e = stitch_datasets(&[&a, &b], &out2).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if *path == b.join("extra")), "{e}");
    assert!(!out2.exists());
    // A link to a dataset inside its part is that dataset.
    std::fs::remove_file(b.join("extra")).unwrap();
    std::os::unix::fs::symlink("labels", b.join("extra")).unwrap();
    let sets = stitch_datasets(&[&a, &b], &out2).unwrap();
    assert_eq!(sets.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["extra", "labels"]);
}

/// Parts that are directories of datasets must hold the same datasets and the same other
/// files; a refused stitch leaves nothing at its output.
#[test]
fn stitch_datasets_refuses_parts_that_differ_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |part: &str, names: &[&str], extra: &[u8]| {
        for name in names {
            let mut w = loaderx_core::DatasetWriter::dense::<u32>(
                dir.path().join(part).join(name),
                vec![],
                WriteOptions::new(),
            )
            .unwrap();
            w.append(&[1u32, 2]).unwrap();
            w.finish().unwrap();
        }
        std::fs::write(dir.path().join(part).join("classes.txt"), extra).unwrap();
        dir.path().join(part)
    };
    let a = mk("a", &["images", "labels"], b"cat\n");
    let b = mk("b", &["images"], b"cat\n");
    let c = mk("c", &["images", "labels"], b"dog\n");
    let out = dir.path().join("out");
    let e = stitch_datasets(&[&a, &b], &out).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if *path == b), "{e}");
    let e = stitch_datasets(&[&a, &c], &out).unwrap_err();
    assert!(
        matches!(&e, Error::BadInput { path, reason, .. } if *path == c.join("classes.txt") && reason.contains("differs")),
        "{e}"
    );
    let e = stitch_datasets(&[dir.path().join("a/images")], &out).unwrap_err();
    assert!(matches!(&e, Error::BadInput { reason, .. } if reason.contains("neither a dataset")), "{e}");
    assert!(!out.exists());
    // The same part twice would read each record twice: refused, nothing written.
    let e = stitch_datasets(&[&a, &a.clone()], &out).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("same store")), "{e}");
    assert!(!out.exists());
    let d = mk("d", &["images", "labels"], b"cat\n");
    // A user's link at OUT, dangling (`exists` says no): refused, and left where it was.
    #[cfg(unix)]
    {
        let link = dir.path().join("lnk");
        std::os::unix::fs::symlink(dir.path().join("nowhere/nd"), &link).unwrap();
        let e = stitch_datasets(&[&a, &d], &link).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("exists")), "{e}");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    }
    let sets = stitch_datasets(&[&a, &d], &out).unwrap();
    assert_eq!(sets.len(), 2);
    assert_eq!(std::fs::read(out.join("classes.txt")).unwrap(), b"cat\n");
    assert_eq!(records_of(&out.join("labels")).len(), 4);
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_parts_are_whole_row_groups_and_stitch_per_column() {
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    let dir = tempfile::tempdir().unwrap();
    let write = |path: &Path, rows: usize, group: usize, base: usize| {
        let x = Float64Array::from_iter_values((0..rows).map(|r| (base + r) as f64));
        let s = StringArray::from_iter_values((0..rows).map(|r| format!("row {}", base + r)));
        let mut tok = ListBuilder::new(Int32Builder::new());
        for r in 0..rows {
            tok.values().append_slice(&vec![(base + r) as i32; r % 5]);
            tok.append(true);
        }
        let batch = RecordBatch::try_from_iter(vec![
            ("x", Arc::new(x) as ArrayRef),
            ("s", Arc::new(s) as ArrayRef),
            ("tok", Arc::new(tok.finish()) as ArrayRef),
        ])
        .unwrap();
        let props = WriterProperties::builder().set_max_row_group_size(group).build();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    };
    // Row groups of 100, 100, 50 rows, then 30, 30, 30, 10: 350 rows in 7 groups.
    let (f1, f2) = (dir.path().join("1.parquet"), dir.path().join("2.parquet"));
    write(&f1, 250, 100, 0);
    write(&f2, 100, 30, 250);
    let starts = [0u64, 100, 200, 250, 280, 310, 340];
    let inputs = [&f1, &f2];
    let whole = dir.path().join("whole");
    convert::parquet(&inputs, &whole, &[], convert::Nulls::Error, WriteOptions::new()).unwrap();
    for n in [1usize, 2, 3, 5, 10] {
        let parts: Vec<PathBuf> =
            (0..n).map(|k| dir.path().join(format!("n{n}/{}", Part::new(k, n).unwrap().name()))).collect();
        for (k, p) in parts.iter().enumerate() {
            convert::parquet_part(
                &inputs,
                p,
                &[],
                convert::Nulls::Error,
                WriteOptions::new(),
                Part::new(k, n).unwrap(),
            )
            .unwrap();
        }
        let set = dir.path().join(format!("set{n}"));
        let sets = stitch_datasets(&parts, &set).unwrap();
        assert_eq!(sets.len(), 3);
        for name in ["x", "s", "tok"] {
            let all = records_of(&whole.join(name));
            assert_eq!(all.len(), 350);
            let mut at = 0usize;
            for (k, p) in parts.iter().enumerate() {
                // Whole row groups: the groups whose first row is in the part's rows.
                let rows = Part::new(k, n).unwrap().rows(350);
                let mine: Vec<usize> = (0..starts.len()).filter(|&g| rows.contains(&starts[g])).collect();
                let end = mine.last().map_or(at, |&g| starts.get(g + 1).map_or(350, |&s| s as usize));
                assert_eq!(records_of(&p.join(name)), all[at..end], "{name}, part {k} of {n}");
                at = end;
            }
            assert_eq!(at, 350);
            assert_eq!(records_of(&set.join(name)), all, "{name} stitched from {n} parts");
        }
    }
}

#[cfg(feature = "images")]
#[test]
fn image_parts_are_ranges_of_the_files_and_stitch_with_the_classes() {
    use image::{ImageFormat, Rgb, RgbImage};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("folder");
    for (i, f) in
        ["cat/a.png", "cat/b.png", "cat/c.png", "dog/a.png", "dog/z.png", "eel/q.png"].iter().enumerate()
    {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        RgbImage::from_pixel(10 + i as u32, 8, Rgb([i as u8 * 40, 0, 255 - i as u8]))
            .save_with_format(&p, ImageFormat::Png)
            .unwrap();
    }
    std::fs::write(root.join("dog/bad.png"), b"not a png").unwrap();
    let options = convert::ImageOptions { skip_bad: true, ..convert::ImageOptions::new(6, 4) };
    let whole = dir.path().join("whole");
    let s = convert::images(&root, &whole, options, WriteOptions::new()).unwrap();
    assert_eq!((s.images.records, s.skipped.len()), (6, 1));
    for n in [1usize, 2, 3, 9] {
        let parts: Vec<PathBuf> =
            (0..n).map(|k| dir.path().join(format!("n{n}/{}", Part::new(k, n).unwrap().name()))).collect();
        let mut skipped = 0;
        for (k, p) in parts.iter().enumerate() {
            let s = convert::images_part(&root, p, options, WriteOptions::new(), Part::new(k, n).unwrap())
                .unwrap();
            assert_eq!(s.classes, ["cat", "dog", "eel"]);
            skipped += s.skipped.len();
        }
        assert_eq!(skipped, 1, "the bad file is skipped by the one part that holds it");
        let set = dir.path().join(format!("set{n}"));
        stitch_datasets(&parts, &set).unwrap();
        for name in ["images", "labels"] {
            assert_eq!(records_of(&set.join(name)), records_of(&whole.join(name)), "{name} from {n} parts");
        }
        assert_eq!(std::fs::read(set.join("classes.txt")).unwrap(), b"cat\ndog\neel\n");
    }
    // Without skip_bad the bad file fails only the part that holds it (files in order: cat/a,
    // cat/b, cat/c, dog/a, dog/bad, dog/z, eel/q: the fifth of seven is in part 1 of 2).
    let strict = convert::ImageOptions::new(6, 4);
    let e = convert::images_part(
        &root,
        dir.path().join("s1"),
        strict,
        WriteOptions::new(),
        Part::new(1, 2).unwrap(),
    )
    .unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if *path == root.join("dog/bad.png")), "{e}");
    convert::images_part(&root, dir.path().join("s0"), strict, WriteOptions::new(), Part::new(0, 2).unwrap())
        .unwrap();
}

/// A part whose path from the set is not UTF-8 is refused before anything is written: the set's
/// manifest names its parts by UTF-8 paths, and a lossy one named another path, so the set
/// stitched and then never opened (review 46, finding 4).
#[cfg(unix)]
#[test]
fn a_part_whose_path_is_not_utf8_is_refused_before_the_set_is_written() {
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.npy");
    npy_file(&input, 2);
    let good = dir.path().join("p1");
    convert::npy(&input, &good, WriteOptions::new()).unwrap();
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"q\xff"));
    convert::npy(&input, &odd, WriteOptions::new()).unwrap();
    let set = dir.path().join("set");
    let e = stitch(&[good.clone(), odd], &set).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("UTF-8")), "{e}");
    assert!(!set.exists(), "nothing written");
    assert_eq!(stitch(&[good], &set).unwrap().records, 2);
}

/// A part migrated to another layout after stitching holds the same records under another
/// index: the set's refusal names that cause and the way out (review 51: it said the part was
/// replaced, inviting a user to discard a good one); stitched again, the set reads the same.
#[test]
fn a_part_migrated_after_stitching_is_named_as_such_and_stitches_again() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.npy");
    npy_file(&input, 6);
    let (p0, p1) = (dir.path().join("p0"), dir.path().join("p1"));
    for p in [&p0, &p1] {
        convert::npy(&input, p, WriteOptions::new().codec(loaderx_core::Codec::Raw)).unwrap();
    }
    let set = dir.path().join("set");
    stitch(&[&p0, &p1], &set).unwrap();
    let before = records_of(&set);
    loaderx_core::Store::migrate_layout(&p1, loaderx_core::Layout::Compact, &|_, _| {}).unwrap();
    let e = DenseSource::open(&set).unwrap_err();
    assert!(
        matches!(&e, Error::Schema { reason, .. } if reason.contains("migrate or compact") && reason.contains("stitch the set again")),
        "{e}"
    );
    std::fs::remove_dir_all(&set).unwrap();
    stitch(&[&p0, &p1], &set).unwrap();
    assert_eq!(records_of(&set), before);
}
