//! Datasets: dense and ragged round trips for every dtype, and schema mismatches.

use loaderx_core::{
    ArrayData, Codec, DType, DatasetWriter, DenseArray, DenseDataset, DenseSource, Element, Error, Format,
    RaggedDataset, WriteOptions, convert,
};
use proptest::prelude::*;

/// Raw bytes valid for `dtype`: random bits, except `bool`, which is 0 or 1.
pub fn valid_bytes(dtype: DType, raw: &[u8]) -> Vec<u8> {
    let n = raw.len() / dtype.size() * dtype.size();
    raw[..n].iter().map(|&b| if dtype == DType::Bool { b & 1 } else { b }).collect()
}

/// The array of `shape` whose native-endian bytes are `bytes`.
pub fn array_from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> DenseArray {
    fn typed<T: Element>(shape: Vec<usize>, bytes: &[u8]) -> DenseArray {
        DenseArray::from_vec(shape, T::from_bytes(bytes).unwrap()).unwrap()
    }
    match dtype {
        DType::U8 => typed::<u8>(shape, bytes),
        DType::I8 => typed::<i8>(shape, bytes),
        DType::U16 => typed::<u16>(shape, bytes),
        DType::I16 => typed::<i16>(shape, bytes),
        DType::U32 => typed::<u32>(shape, bytes),
        DType::I32 => typed::<i32>(shape, bytes),
        DType::U64 => typed::<u64>(shape, bytes),
        DType::I64 => typed::<i64>(shape, bytes),
        DType::F16 => typed::<half::f16>(shape, bytes),
        DType::BF16 => typed::<half::bf16>(shape, bytes),
        DType::F32 => typed::<f32>(shape, bytes),
        DType::F64 => typed::<f64>(shape, bytes),
        DType::Bool => typed::<bool>(shape, bytes),
        _ => unreachable!("every dtype is listed"),
    }
}

fn codec() -> impl Strategy<Value = Codec> {
    prop::sample::select(Format::V1.codecs().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Any dtype, any item shape: what goes in through `from_arrays` comes out of `get_batch`.
    #[test]
    fn dense_round_trips_every_dtype(
        dtype in prop::sample::select(DType::ALL.to_vec()),
        item_shape in prop::collection::vec(1usize..4, 0..3),
        n in 1usize..12,
        seed in prop::collection::vec(any::<u8>(), 0..4096),
        codec in codec(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("d");
        let item: usize = item_shape.iter().product();
        let mut want = Vec::new();
        let arrays: Vec<DenseArray> = (0..n)
            .map(|i| {
                let raw: Vec<u8> = (0..item * dtype.size()).map(|j| seed.get((i * 31 + j) % seed.len().max(1)).copied().unwrap_or(j as u8) ^ (i as u8)).collect();
                let bytes = valid_bytes(dtype, &raw);
                want.extend_from_slice(&bytes);
                array_from_bytes(dtype, item_shape.clone(), &bytes)
            })
            .collect();
        let s = convert::from_arrays(&out, arrays.clone(), WriteOptions::new().codec(codec)).unwrap();
        prop_assert_eq!(s.records, n as u64);
        let src = DenseSource::open(&out).unwrap();
        prop_assert_eq!(src.dtype(), dtype);
        prop_assert_eq!(src.item_shape(), item_shape.as_slice());
        let all: Vec<u32> = (0..n as u32).collect();
        let batch = src.get_batch(&all).unwrap();
        prop_assert_eq!(batch.as_bytes(), want.as_slice());
        // One record at a time, in reverse, matches the source arrays.
        for i in (0..n).rev() {
            let one = src.get_batch(&[i as u32]).unwrap();
            prop_assert_eq!(one.as_bytes(), arrays[i].as_bytes());
        }
    }

    /// Any dtype, any row shape, any lengths: ragged records come back as written.
    #[test]
    fn ragged_round_trips_every_dtype(
        dtype in prop::sample::select(DType::ALL.to_vec()),
        row_shape in prop::collection::vec(1usize..3, 0..2),
        lens in prop::collection::vec(0usize..20, 1..10),
        fill in any::<u8>(),
        codec in codec(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let row: usize = row_shape.iter().product();
        let records: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| valid_bytes(dtype, &(0..l * row * dtype.size()).map(|j| fill.wrapping_add((i * 7 + j) as u8)).collect::<Vec<_>>()))
            .collect();
        let mut w = DatasetWriter::with_schema(&out, loaderx_core::Schema::ragged(dtype, row_shape.clone()), WriteOptions::new().codec(codec)).unwrap();
        w.append_bytes(&records).unwrap();
        prop_assert_eq!(w.finish().unwrap(), records.len() as u64);
        let idx: Vec<u32> = (0..records.len() as u32).rev().collect();
        macro_rules! check {
            ($t:ty) => {{
                let rs = RaggedDataset::<$t>::open(&out).unwrap();
                prop_assert_eq!(rs.row_shape(), row_shape.as_slice());
                let got = rs.get_batch(&idx).unwrap();
                for (k, &i) in idx.iter().enumerate() {
                    let bytes: &[u8] = bytemuck::cast_slice(&got[k]);
                    prop_assert_eq!(bytes, records[i as usize].as_slice());
                }
            }};
        }
        match dtype {
            DType::U8 => check!(u8),
            DType::I8 => check!(i8),
            DType::U16 => check!(u16),
            DType::I16 => check!(i16),
            DType::U32 => check!(u32),
            DType::I32 => check!(i32),
            DType::U64 => check!(u64),
            DType::I64 => check!(i64),
            DType::F16 => check!(half::f16),
            DType::BF16 => check!(half::bf16),
            DType::F32 => check!(f32),
            DType::F64 => check!(f64),
            DType::Bool => {
                let rs = RaggedDataset::<bool>::open(&out).unwrap();
                let got = rs.get_batch(&idx).unwrap();
                for (k, &i) in idx.iter().enumerate() {
                    let bytes: Vec<u8> = got[k].iter().map(|&b| u8::from(b)).collect();
                    prop_assert_eq!(bytes, records[i as usize].clone());
                }
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn from_ragged_and_pad_agree_with_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let seqs: Vec<Vec<i32>> = [3, 1, 4, 1, 5].iter().map(|&l| (0..l).collect()).collect();
    let s = convert::from_ragged::<i32, _>(dir.path().join("t"), vec![], &seqs, WriteOptions::new()).unwrap();
    assert_eq!(s.records, 5);
    let rs = RaggedDataset::<i32>::open(dir.path().join("t")).unwrap();
    assert_eq!(rs.get_batch(&[0, 2, 4]).unwrap(), vec![seqs[0].clone(), seqs[2].clone(), seqs[4].clone()]);
    let (padded, lengths) =
        loaderx_core::pad(&rs.get_batch(&[0, 2, 4]).unwrap(), rs.row_shape(), -1).unwrap();
    assert_eq!(padded.shape(), &[3, 5]);
    assert_eq!(lengths, vec![3, 4, 5]);
}

#[test]
fn from_bytes_writes_ragged_u8() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<&[u8]> = vec![b"jpeg-1", b"", b"png"];
    convert::from_bytes(dir.path().join("b"), &recs, WriteOptions::new().codec(Codec::Raw)).unwrap();
    let rs = RaggedDataset::<u8>::open(dir.path().join("b")).unwrap();
    assert_eq!(rs.get_batch(&[2, 1, 0]).unwrap(), vec![b"png".to_vec(), vec![], b"jpeg-1".to_vec()]);
}

#[test]
fn from_arrays_rejects_a_shape_change_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d");
    let arrays = vec![
        DenseArray::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap(),
        DenseArray::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap(),
    ];
    let err = convert::from_arrays(&out, arrays, WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("array 1")), "{err}");
    assert!(!out.exists() && !dir.path().join("d.partial").exists());
    let none: Vec<DenseArray> = Vec::new();
    assert!(matches!(convert::from_arrays(&out, none, WriteOptions::new()), Err(Error::InvalidArgument(_))));
}

fn dense_and_ragged() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dense = dir.path().join("dense");
    let ragged = dir.path().join("ragged");
    let mut w = DatasetWriter::dense::<f32>(&dense, vec![2], WriteOptions::new()).unwrap();
    w.append(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    w.finish().unwrap();
    convert::from_ragged::<f32, _>(&ragged, vec![], [vec![1.0f32], vec![2.0, 3.0]], WriteOptions::new())
        .unwrap();
    (dir, dense, ragged)
}

#[test]
fn ragged_opened_as_dense_is_a_schema_error() {
    let (_d, _dense, ragged) = dense_and_ragged();
    assert!(matches!(DenseDataset::<f32>::open(&ragged), Err(Error::Schema { .. })));
    assert!(matches!(DenseSource::open(&ragged), Err(Error::Schema { .. })));
}

#[test]
fn dense_opened_as_ragged_is_a_schema_error() {
    let (_d, dense, _ragged) = dense_and_ragged();
    assert!(matches!(RaggedDataset::<f32>::open(&dense), Err(Error::Schema { .. })));
}

#[test]
fn wrong_element_type_is_a_schema_error() {
    let (_d, dense, ragged) = dense_and_ragged();
    let err = DenseDataset::<f64>::open(&dense).unwrap_err();
    assert!(
        matches!(&err, Error::Schema { path, reason } if path == &dense && reason.contains("f32")),
        "{err}"
    );
    assert!(matches!(DenseDataset::<u8>::open(&dense), Err(Error::Schema { .. })));
    assert!(matches!(RaggedDataset::<i32>::open(&ragged), Err(Error::Schema { .. })));
    assert_eq!(DenseDataset::<f32>::open(&dense).unwrap().get_vec(&[1]).unwrap(), vec![3.0, 4.0]);
}

#[test]
fn a_raw_store_has_no_schema() {
    let dir = tempfile::tempdir().unwrap();
    let s = loaderx_core::Store::create(dir.path().join("raw"), loaderx_core::StoreOptions::new()).unwrap();
    s.append(&[b"x"], Codec::Raw).unwrap();
    drop(s);
    assert!(matches!(DenseSource::open(dir.path().join("raw")), Err(Error::Schema { .. })));
    let _ = ArrayData::zeros(DType::U8, 0);
}

/// Two writers of the same output (issue 27): the second fails naming the first, instead of
/// removing its staging files; the first's success means the data in place is its own.
#[test]
fn a_second_writer_of_the_same_output_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut a = DatasetWriter::dense::<u32>(&out, vec![2], WriteOptions::new()).unwrap();
    a.append(&[1u32, 2, 3, 4]).unwrap();
    for overwrite in [false, true] {
        let err = DatasetWriter::dense::<u32>(&out, vec![2], WriteOptions::new().overwrite(overwrite))
            .expect_err("the staging directory is locked");
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("process {}", std::process::id())) && text.contains("out"), "{text}");
    }
    a.append(&[5u32, 6]).unwrap();
    assert_eq!(a.finish().unwrap(), 3);
    let ds = DenseDataset::<u32>::open(&out).unwrap();
    assert_eq!(ds.get_vec(&[0, 1, 2]).unwrap(), [1u32, 2, 3, 4, 5, 6]);
    // The lock went with it: nothing of the writer is left in the dataset or beside it.
    assert!(!out.join("convert.lock").exists() && !dir.path().join("out.partial").exists());
    // A writer that crashed (its lock free, its process id in it) leaves a staging directory
    // the next one reuses.
    std::fs::create_dir(dir.path().join("b.partial")).unwrap();
    std::fs::write(dir.path().join("b.partial").join("convert.lock"), b"12345").unwrap();
    std::fs::write(dir.path().join("b.partial").join("0.zr"), b"stale").unwrap();
    let mut b = DatasetWriter::dense::<u32>(dir.path().join("b"), vec![1], WriteOptions::new()).unwrap();
    b.append(&[7u32]).unwrap();
    assert_eq!(b.finish().unwrap(), 1);
    assert_eq!(DenseDataset::<u32>::open(dir.path().join("b")).unwrap().get_vec(&[0]).unwrap(), [7u32]);
}

/// A staging path planted as a symbolic link is refused, not written through; an output that is
/// a link is replaced by `overwrite` without deleting anything where the link points.
#[cfg(unix)]
#[test]
fn writers_never_delete_or_write_through_symbolic_links() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    let mut w = DatasetWriter::dense::<u8>(&elsewhere, vec![1], WriteOptions::new()).unwrap();
    w.append(&[1u8, 2, 3]).unwrap();
    w.finish().unwrap();
    let files = |p: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name()).collect();
        v.sort();
        v
    };
    let before = files(&elsewhere);
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("out.partial")).unwrap();
    let err = DatasetWriter::dense::<u8>(dir.path().join("out"), vec![1], WriteOptions::new()).unwrap_err();
    assert!(matches!(err, Error::BadInput { .. }) && err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(files(&elsewhere), before, "nothing removed through the link");
    std::fs::remove_file(dir.path().join("out.partial")).unwrap();

    std::os::unix::fs::symlink(&elsewhere, dir.path().join("out")).unwrap();
    let mut w =
        DatasetWriter::dense::<u8>(dir.path().join("out"), vec![1], WriteOptions::new().overwrite(true))
            .unwrap();
    w.append(&[9u8]).unwrap();
    w.finish().unwrap();
    assert_eq!(files(&elsewhere), before, "the link's target keeps its files");
    assert_eq!(DenseDataset::<u8>::open(&elsewhere).unwrap().len(), 3);
    assert!(!std::fs::symlink_metadata(dir.path().join("out")).unwrap().file_type().is_symlink());
    assert_eq!(DenseDataset::<u8>::open(dir.path().join("out")).unwrap().len(), 1);
}

/// Look 113, L113-2: a writer of bools given bytes other than 0 or 1 (NumPy's `.view(bool)`
/// writes whatever the bytes were) refuses them, naming the record and element, with nothing of
/// the call written; the readers refused them only at a training step.
#[test]
fn a_writer_of_bools_refuses_other_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, schema) in [
        ("d", loaderx_core::Schema::dense(DType::Bool, vec![2])),
        ("r", loaderx_core::Schema::ragged(DType::Bool, vec![])),
    ] {
        let out = dir.path().join(name);
        let mut w = DatasetWriter::with_schema(&out, schema, WriteOptions::new()).unwrap();
        w.append_bytes(&[[0u8, 1]]).unwrap();
        let e = w.append_bytes(&[[1u8, 0], [1, 7]]).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("record 2: bool element 1 is 7")),
            "{name}: {e}"
        );
        w.append_bytes(&[[1u8, 1]]).unwrap();
        w.finish().unwrap();
        let store = loaderx_core::Store::open(&out).unwrap();
        assert_eq!(store.len(), 2, "{name}: the refused call wrote nothing");
        assert_eq!(store.get(1).unwrap(), [1, 1]);
    }
}
