//! Converters: .npy of both byte orders, IDX on the bundled MNIST subset, safetensors, directories,
//! all-or-nothing failure and overwrite semantics.

use std::path::{Path, PathBuf};

use loaderx_core::{
    Codec, DType, DenseDataset, DenseSource, Error, Format, RaggedDataset, WriteOptions, convert, export,
};
use proptest::prelude::*;

use crate::dataset::valid_bytes;

/// The little-endian NumPy type string of `dtype` (no bf16).
fn descr(dtype: DType, big: bool) -> String {
    let (kind, size) = match dtype {
        DType::U8 => ("u", 1),
        DType::I8 => ("i", 1),
        DType::Bool => ("b", 1),
        DType::U16 => ("u", 2),
        DType::I16 => ("i", 2),
        DType::U32 => ("u", 4),
        DType::I32 => ("i", 4),
        DType::U64 => ("u", 8),
        DType::I64 => ("i", 8),
        DType::F16 => ("f", 2),
        DType::F32 => ("f", 4),
        DType::F64 => ("f", 8),
        _ => unreachable!(),
    };
    let order = if size == 1 {
        '|'
    } else if big {
        '>'
    } else {
        '<'
    };
    format!("{order}{kind}{size}")
}

/// A `.npy` file laid out as `np.save` writes it, built here by hand (not with `NpyHeader`).
fn npy_bytes(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(n) = shape.first() {
        dict.push_str(&" ".repeat(21 - n.to_string().len()));
    }
    let hlen = dict.len() + 1;
    let pad = 64 - (10 + hlen) % 64;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&((hlen + pad) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

fn swap(bytes: &[u8], size: usize) -> Vec<u8> {
    bytes.chunks(size).flat_map(|c| c.iter().rev().copied()).collect()
}

fn nothing_at(out: &Path) -> bool {
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    !out.exists() && !PathBuf::from(partial).exists()
}

const NPY_DTYPES: [DType; 12] = [
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::U32,
    DType::I32,
    DType::U64,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::Bool,
];

#[test]
fn hand_written_headers_match_numpy() {
    // Bytes np.save (NumPy 2) writes for np.zeros((8, 2, 4), '<f4') and np.zeros((), '|b1').
    let f = npy_bytes("<f4", &[8, 2, 4], &[]);
    assert_eq!(
        &f[..80],
        b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (8, 2, 4), }        "
    );
    assert_eq!(f.len(), 128);
    assert_eq!(npy_bytes("|b1", &[], &[]).len(), 128);
    assert_eq!(convert::NpyHeader::encode(DType::F32, &[8, 2, 4]).unwrap(), f);
    assert_eq!(
        convert::NpyHeader::encode(DType::U64, &[1234567]).unwrap(),
        npy_bytes("<u8", &[1234567], &[])
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// npy (little-endian) → dataset → npy is the identity on bytes; the big-endian file of the
    /// same values converts to the same dataset.
    #[test]
    fn npy_round_trips_both_byte_orders(
        dtype in prop::sample::select(NPY_DTYPES.to_vec()),
        shape in prop::collection::vec(0usize..5, 0..4),
        seed in any::<u64>(),
        codec in prop::sample::select(Format::V1.codecs().to_vec()),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let n: usize = shape.iter().product();
        let mut x = seed | 1;
        let raw: Vec<u8> = (0..n * dtype.size()).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
        let data = valid_bytes(dtype, &raw);
        let le = npy_bytes(&descr(dtype, false), &shape, &data);
        let be = npy_bytes(&descr(dtype, true), &shape, &swap(&data, dtype.size()));
        std::fs::write(dir.path().join("le.npy"), &le).unwrap();
        std::fs::write(dir.path().join("be.npy"), &be).unwrap();
        let opts = WriteOptions::new().codec(codec);
        let s = convert::npy(dir.path().join("le.npy"), dir.path().join("le"), opts.clone()).unwrap();
        let records = shape.first().copied().unwrap_or(1);
        prop_assert_eq!(s.records, records as u64);
        prop_assert_eq!(s.bytes_in, data.len() as u64);
        convert::npy(dir.path().join("be.npy"), dir.path().join("be"), opts).unwrap();
        for ds in ["le", "be"] {
            let src = DenseSource::open(dir.path().join(ds)).unwrap();
            prop_assert_eq!(src.dtype(), dtype);
            prop_assert_eq!(src.item_shape(), shape.get(1..).unwrap_or(&[]));
            let all: Vec<u32> = (0..records as u32).collect();
            let batch = src.get_batch(&all).unwrap();
            prop_assert_eq!(batch.as_bytes(), data.as_slice());
        }
        export::npy(dir.path().join("be"), dir.path().join("back.npy"), false).unwrap();
        let back = std::fs::read(dir.path().join("back.npy")).unwrap();
        if shape.is_empty() {
            // A 0-D array is one scalar record; it comes back as shape (1,).
            prop_assert_eq!(back, npy_bytes(&descr(dtype, false), &[1], &data));
        } else {
            prop_assert_eq!(back, le);
        }
    }
}

#[test]
fn one_d_npy_becomes_scalars() {
    let dir = tempfile::tempdir().unwrap();
    let labels: Vec<u8> = vec![5, 0, 4, 1, 9];
    std::fs::write(dir.path().join("y.npy"), npy_bytes("|u1", &[5], &labels)).unwrap();
    convert::npy(dir.path().join("y.npy"), dir.path().join("y"), WriteOptions::new()).unwrap();
    let ds = DenseDataset::<u8>::open(dir.path().join("y")).unwrap();
    assert_eq!(ds.item_shape(), &[] as &[usize]);
    assert_eq!(ds.get_vec(&[4, 0]).unwrap(), vec![9, 5]);
}

#[test]
fn npy_of_several_blocks_round_trips() {
    // 3 MiB of f32 rows of 1 KiB: several reader blocks and several writer batches.
    let dir = tempfile::tempdir().unwrap();
    let n = 3 * 1024;
    let data: Vec<u8> = (0..n * 256).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let f = npy_bytes("<f4", &[n, 256], &data);
    std::fs::write(dir.path().join("a.npy"), &f).unwrap();
    convert::npy(dir.path().join("a.npy"), dir.path().join("a"), WriteOptions::new().codec(Codec::Raw))
        .unwrap();
    let ds = DenseDataset::<f32>::open(dir.path().join("a")).unwrap();
    assert_eq!(ds.len(), n);
    assert_eq!(ds.get_vec(&[3000]).unwrap()[5], (3000 * 256 + 5) as f32);
    export::npy(dir.path().join("a"), dir.path().join("b.npy"), false).unwrap();
    assert!(std::fs::read(dir.path().join("b.npy")).unwrap() == f);
}

#[test]
fn truncated_npy_is_bad_input_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = npy_bytes("<i4", &[10, 3], &[7u8; 120]);
    f.truncate(f.len() - 5);
    let input = dir.path().join("t.npy");
    std::fs::write(&input, &f).unwrap();
    let out = dir.path().join("t");
    let err = convert::npy(&input, &out, WriteOptions::new()).unwrap_err();
    match &err {
        Error::BadInput { path, reason, .. } => {
            assert_eq!(path, &input);
            assert!(reason.contains("expected 120") && reason.contains("found 115"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(nothing_at(&out));
}

#[test]
fn fortran_order_and_unknown_dtypes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = npy_bytes("<f4", &[2, 3], &[0u8; 24]);
    let at = f.windows(5).position(|w| w == b"False").unwrap();
    f.splice(at..at + 5, b"True ".iter().copied());
    std::fs::write(dir.path().join("f.npy"), &f).unwrap();
    let err = convert::npy(dir.path().join("f.npy"), dir.path().join("f"), WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::BadInput { reason, .. } if reason.contains("fortran")), "{err}");
    std::fs::write(dir.path().join("c.npy"), npy_bytes("<c8", &[2], &[0u8; 16])).unwrap();
    let err = convert::npy(dir.path().join("c.npy"), dir.path().join("c"), WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::BadInput { reason, .. } if reason.contains("<c8")), "{err}");
    assert!(nothing_at(&dir.path().join("f")) && nothing_at(&dir.path().join("c")));
}

#[test]
fn failure_half_way_leaves_nothing() {
    // A bool array whose last element is 2: found only after several batches were appended.
    let dir = tempfile::tempdir().unwrap();
    let n = 5 << 20;
    let mut data = vec![1u8; n];
    data[n - 1] = 2;
    std::fs::write(dir.path().join("b.npy"), npy_bytes("|b1", &[n], &data)).unwrap();
    let out = dir.path().join("b");
    let err =
        convert::npy(dir.path().join("b.npy"), &out, WriteOptions::new().codec(Codec::Raw)).unwrap_err();
    assert!(
        matches!(&err, Error::BadInput { reason, .. } if reason.contains(&format!("element {}", n - 1))),
        "{err}"
    );
    assert!(nothing_at(&out));
}

#[test]
fn overwrite_is_refused_unless_asked_and_a_failed_overwrite_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, bad) = (dir.path().join("a.npy"), dir.path().join("b.npy"), dir.path().join("bad.npy"));
    std::fs::write(&a, npy_bytes("<i2", &[2], &[1, 0, 2, 0])).unwrap();
    std::fs::write(&b, npy_bytes("<i2", &[3], &[7, 0, 8, 0, 9, 0])).unwrap();
    std::fs::write(&bad, npy_bytes("|b1", &[2], &[1, 5])).unwrap();
    let out = dir.path().join("out");
    convert::npy(&a, &out, WriteOptions::new()).unwrap();
    let err = convert::npy(&b, &out, WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::AlreadyExists { path } if path == &out), "{err}");
    assert_eq!(DenseDataset::<i16>::open(&out).unwrap().get_vec(&[0, 1]).unwrap(), vec![1, 2]);
    assert!(convert::npy(&bad, &out, WriteOptions::new().overwrite(true)).is_err());
    assert_eq!(DenseDataset::<i16>::open(&out).unwrap().get_vec(&[0, 1]).unwrap(), vec![1, 2]);
    convert::npy(&b, &out, WriteOptions::new().overwrite(true)).unwrap();
    assert_eq!(DenseDataset::<i16>::open(&out).unwrap().get_vec(&[0, 1, 2]).unwrap(), vec![7, 8, 9]);
    assert!(!dir.path().join("out.old").exists() && !dir.path().join("out.partial").exists());
    // export refuses to overwrite too
    std::fs::write(dir.path().join("e.npy"), b"x").unwrap();
    assert!(matches!(export::npy(&out, dir.path().join("e.npy"), false), Err(Error::AlreadyExists { .. })));
    export::npy(&out, dir.path().join("e.npy"), true).unwrap();
    assert_eq!(std::fs::read(dir.path().join("e.npy")).unwrap(), std::fs::read(&b).unwrap());
}

// ---------------------------------------------------------------- IDX

fn mnist(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k").join(name)
}

#[test]
fn idx_converts_the_bundled_mnist_labels() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        convert::idx(mnist("train-labels-idx1-ubyte.gz"), dir.path().join("y"), WriteOptions::new()).unwrap();
    assert_eq!((s.records, s.bytes_in), (8000, 8000));
    let ds = DenseDataset::<u8>::open(dir.path().join("y")).unwrap();
    assert_eq!(ds.item_shape(), &[] as &[usize]);
    let all: Vec<u32> = (0..8000).collect();
    let labels = ds.get_vec(&all).unwrap();
    assert!(labels.iter().all(|&l| l <= 9));
    // `zcat train-labels-idx1-ubyte.gz | xxd | head -1`: 0000 0801 0000 1f40 0300 0503 0309 0709
    assert_eq!(&labels[..8], &[3, 0, 5, 3, 3, 9, 7, 9]);
    let mut counts = [0usize; 10];
    labels.iter().for_each(|&l| counts[l as usize] += 1);
    assert!(counts.iter().all(|&c| (600..1000).contains(&c)), "{counts:?}");
}

#[test]
fn idx_converts_the_bundled_mnist_images() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        convert::idx(mnist("t10k-images-idx3-ubyte.gz"), dir.path().join("x"), WriteOptions::new()).unwrap();
    assert_eq!((s.records, s.bytes_in), (2000, 2000 * 784));
    assert!(s.bytes_on_disk < s.bytes_in / 2, "{s:?}");
    let ds = DenseDataset::<u8>::open(dir.path().join("x")).unwrap();
    assert_eq!(ds.item_shape(), &[28, 28]);
    let all: Vec<u32> = (0..2000).collect();
    let px = ds.get_vec(&all).unwrap();
    let mean = px.iter().map(|&p| f64::from(p)).sum::<f64>() / px.len() as f64;
    assert!((25.0..45.0).contains(&mean), "mean pixel {mean}");
    assert_eq!(px.iter().max(), Some(&255));
    // The border of every MNIST digit is blank.
    assert!((0..2000).all(|i| px[i * 784..i * 784 + 28].iter().all(|&p| p == 0)));
    let y =
        convert::idx(mnist("t10k-labels-idx1-ubyte.gz"), dir.path().join("y"), WriteOptions::new()).unwrap();
    assert_eq!(y.records, 2000);
}

fn idx_bytes(type_byte: u8, dims: &[u32], data_be: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, type_byte, dims.len() as u8];
    dims.iter().for_each(|d| v.extend_from_slice(&d.to_be_bytes()));
    v.extend_from_slice(data_be);
    v
}

#[test]
fn idx_reads_big_endian_types_plain_and_gzip() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let vals: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let be: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
    let plain = idx_bytes(0x0D, &[3, 2, 2], &be);
    std::fs::write(dir.path().join("f.idx"), &plain).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    std::fs::write(dir.path().join("f.idx.gz"), gz.finish().unwrap()).unwrap();
    for (input, out) in [("f.idx", "p"), ("f.idx.gz", "g")] {
        convert::idx(dir.path().join(input), dir.path().join(out), WriteOptions::new()).unwrap();
        let ds = DenseDataset::<f32>::open(dir.path().join(out)).unwrap();
        assert_eq!(ds.item_shape(), &[2, 2]);
        assert_eq!(ds.get_vec(&[0, 1, 2]).unwrap(), vals);
    }
    let i16s = idx_bytes(0x0B, &[2], &[0xff, 0xfe, 0x01, 0x00]);
    std::fs::write(dir.path().join("s.idx"), i16s).unwrap();
    convert::idx(dir.path().join("s.idx"), dir.path().join("s"), WriteOptions::new()).unwrap();
    assert_eq!(
        DenseDataset::<i16>::open(dir.path().join("s")).unwrap().get_vec(&[0, 1]).unwrap(),
        vec![-2, 256]
    );
}

#[test]
fn truncated_idx_gz_is_bad_input_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(mnist("train-images-idx3-ubyte.gz")).unwrap();
    let input = dir.path().join("cut.gz");
    std::fs::write(&input, &full[..full.len() * 2 / 3]).unwrap();
    let out = dir.path().join("x");
    let err = convert::idx(&input, &out, WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::BadInput { path, .. } if path == &input), "{err}");
    assert!(nothing_at(&out));
    // Plain, truncated: caught before anything is written, with the byte counts.
    let plain = idx_bytes(0x08, &[4, 2], &[1, 2, 3, 4, 5]);
    std::fs::write(dir.path().join("p.idx"), plain).unwrap();
    let err = convert::idx(dir.path().join("p.idx"), &out, WriteOptions::new()).unwrap_err();
    assert!(
        matches!(&err, Error::BadInput { reason, .. } if reason.contains("expected 8 bytes, found 5")),
        "{err}"
    );
    assert!(nothing_at(&out));
}

// ---------------------------------------------------------------- safetensors

#[test]
fn safetensors_round_trips_each_tensor() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let w: Vec<u8> = (0..24).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..3).flat_map(|i| half::bf16::from_f32(i as f32).to_le_bytes()).collect();
    let flags = vec![1u8, 0, 1, 1];
    let step = 42i64.to_le_bytes().to_vec();
    let tensors = vec![
        ("layer.0.weight", TensorView::new(Dtype::F32, vec![4, 2, 3], &w).unwrap()),
        ("layer.0.bias", TensorView::new(Dtype::BF16, vec![3], &b).unwrap()),
        ("mask", TensorView::new(Dtype::BOOL, vec![4], &flags).unwrap()),
        ("step", TensorView::new(Dtype::I64, vec![], &step).unwrap()),
    ];
    let bytes = safetensors::serialize(tensors, None).unwrap();
    std::fs::write(dir.path().join("m.safetensors"), bytes).unwrap();
    let out = dir.path().join("m");
    let res = convert::safetensors(dir.path().join("m.safetensors"), &out, WriteOptions::new()).unwrap();
    let names: Vec<&str> = res.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["layer.0.bias", "layer.0.weight", "mask", "step"]);
    let weight = DenseDataset::<f32>::open(out.join("layer.0.weight")).unwrap();
    assert_eq!(weight.item_shape(), &[2, 3]);
    assert_eq!(weight.get_vec(&[3]).unwrap(), (18..24).map(|i| i as f32).collect::<Vec<_>>());
    let bias = DenseDataset::<half::bf16>::open(out.join("layer.0.bias")).unwrap();
    assert_eq!(bias.get_vec(&[2]).unwrap(), vec![half::bf16::from_f32(2.0)]);
    assert_eq!(
        DenseDataset::<bool>::open(out.join("mask")).unwrap().get_vec(&[0, 1]).unwrap(),
        vec![true, false]
    );
    let step = DenseDataset::<i64>::open(out.join("step")).unwrap();
    assert_eq!((step.len(), step.get_vec(&[0]).unwrap()), (1, vec![42]));
    // Again without overwrite: refused before anything is written.
    let err = convert::safetensors(dir.path().join("m.safetensors"), &out, WriteOptions::new()).unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }));
}

#[test]
fn safetensors_with_an_unsupported_dtype_writes_nothing() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let a = vec![0u8; 8];
    let tensors = vec![
        ("a", TensorView::new(Dtype::U8, vec![8], &a).unwrap()),
        ("z", TensorView::new(Dtype::F8_E4M3, vec![8], &a).unwrap()),
    ];
    std::fs::write(dir.path().join("m.st"), safetensors::serialize(tensors, None).unwrap()).unwrap();
    let out = dir.path().join("m");
    let err = convert::safetensors(dir.path().join("m.st"), &out, WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::BadInput { reason, .. } if reason.contains("'z'")), "{err}");
    assert!(!out.join("a").exists());
    std::fs::write(dir.path().join("junk.st"), b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage").unwrap();
    assert!(matches!(
        convert::safetensors(dir.path().join("junk.st"), &out, WriteOptions::new()),
        Err(Error::BadInput { .. })
    ));
}

// ---------------------------------------------------------------- directories

#[test]
fn dir_records_follow_byte_wise_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    for name in ["b", "a", "B", "10", "9", ".hidden"] {
        std::fs::write(input.join(name), format!("file {name}")).unwrap();
    }
    std::fs::create_dir(input.join("sub")).unwrap();
    std::fs::write(input.join("sub").join("x"), b"not a record").unwrap();
    let s = convert::dir(&input, dir.path().join("d"), WriteOptions::new().codec(Codec::Zstd)).unwrap();
    assert_eq!(s.records, 6);
    let rs = RaggedDataset::<u8>::open(dir.path().join("d")).unwrap();
    let got: Vec<String> = rs
        .get_batch(&[0, 1, 2, 3, 4, 5])
        .unwrap()
        .into_iter()
        .map(|r| String::from_utf8(r).unwrap())
        .collect();
    assert_eq!(got, ["file .hidden", "file 10", "file 9", "file B", "file a", "file b"]);
}

#[test]
fn dir_with_a_file_over_1_mib_names_it_and_writes_nothing_in_v1_and_takes_it_in_v2() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("small"), b"ok").unwrap();
    let huge: Vec<u8> = (0..(1 << 20) + 1).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(input.join("huge.bin"), &huge).unwrap();
    let out = dir.path().join("d");
    let err = convert::dir(&input, &out, WriteOptions::new().format(loaderx_core::Format::V1)).unwrap_err();
    assert!(matches!(&err, Error::BadInput { path, .. } if path.ends_with("huge.bin")), "{err}");
    assert!(nothing_at(&out));
    // v2 records go to 4 GiB - 1.
    convert::dir(&input, &out, WriteOptions::new()).unwrap();
    let d = RaggedDataset::<u8>::open(&out).unwrap();
    assert_eq!(d.get_batch(&[0, 1]).unwrap(), vec![huge, b"ok".to_vec()]);
}

/// First uses of the MNIST cache racing each other (threads here; processes are the same case:
/// each conversion writes a directory of its own): every caller gets whole stores, the first
/// rename wins, nothing is left behind, and later calls reuse the cache.
#[test]
fn concurrent_first_uses_of_the_mnist_cache_all_get_whole_stores() {
    use loaderx_core::convert::{MnistSplit, mnist_stores};
    let cache = tempfile::tempdir().unwrap();
    let dir = mnist("");
    let got: Vec<(PathBuf, PathBuf)> = std::thread::scope(|s| {
        let calls: Vec<_> =
            (0..6).map(|_| s.spawn(|| mnist_stores(&dir, MnistSplit::Test, cache.path()).unwrap())).collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    for (images, labels) in &got {
        assert_eq!(got[0], (images.clone(), labels.clone()), "one cached copy");
        assert_eq!(DenseSource::open(images).unwrap().len(), 2000);
        assert_eq!(DenseSource::open(labels).unwrap().len(), 2000);
    }
    let root = got[0].0.parent().unwrap();
    let mut left: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["images", "labels"], "no temporary copies left");
    let modified = std::fs::metadata(&got[0].0).unwrap().modified().unwrap();
    assert_eq!(mnist_stores(&dir, MnistSplit::Test, cache.path()).unwrap(), got[0]);
    assert_eq!(std::fs::metadata(&got[0].0).unwrap().modified().unwrap(), modified, "reused");
}

// ---------------------------------------------------------------- hostile inputs

/// `err` is a [`Error::BadInput`] naming `path` whose reason holds `needle`.
fn bad_input_naming(err: Error, path: &Path, needle: &str) {
    match err {
        Error::BadInput { path: p, reason, .. } => {
            assert_eq!(p, path, "{reason}");
            assert!(reason.contains(needle), "{needle:?} not in {reason:?}");
        }
        other => panic!("not BadInput naming {}: {other:?}", path.display()),
    }
}

/// A header alone can promise any number of records of zero-byte items (issue 27, 3.7: a
/// 128-byte `.npy` of shape `(2^40, 0)` wrote 4.4 GB in 30 s): past 2^20 of them the three
/// converters of fixed-size items refuse before writing anything; fewer still convert.
#[test]
fn records_of_empty_items_that_no_bytes_back_are_refused_before_writing() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let over = (1usize << 20) + 1;
    let npy_file = |name: &str, shape: &[usize]| {
        let p = d.join(name);
        std::fs::write(&p, convert::NpyHeader::encode(DType::U8, shape).unwrap()).unwrap();
        p
    };
    let idx_file = |name: &str, dims: &[u32]| {
        let p = d.join(name);
        let mut bytes = vec![0, 0, 8, dims.len() as u8];
        bytes.extend(dims.iter().flat_map(|x| x.to_be_bytes()));
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let st_file = |name: &str, shape: Vec<usize>| {
        let p = d.join(name);
        let t = TensorView::new(Dtype::F32, shape, &[]).unwrap();
        std::fs::write(&p, safetensors::serialize(vec![("t", t)], None).unwrap()).unwrap();
        p
    };
    let out = d.join("out");
    let npy = npy_file("big.npy", &[over, 0]);
    bad_input_naming(convert::npy(&npy, &out, WriteOptions::new()).unwrap_err(), &npy, "0 bytes each");
    let idx = idx_file("big-idx2-ubyte", &[over as u32, 0]);
    bad_input_naming(convert::idx(&idx, &out, WriteOptions::new()).unwrap_err(), &idx, "0 bytes each");
    let st = st_file("big.safetensors", vec![over, 3, 0]);
    bad_input_naming(convert::safetensors(&st, &out, WriteOptions::new()).unwrap_err(), &st, "0 bytes each");
    assert!(nothing_at(&out) && !out.join("t").exists() && !out.join("t.partial").exists());
    // An axis 0 of 0 promises no data, so the item's size was never checked against the file.
    let huge = 1usize << 32;
    let npy = npy_file("wide.npy", &[0, huge, huge, huge]);
    bad_input_naming(convert::npy(&npy, &out, WriteOptions::new()).unwrap_err(), &npy, "overflows");
    let idx = idx_file("wide-idx4-ubyte", &[0, u32::MAX, u32::MAX, u32::MAX]);
    bad_input_naming(convert::idx(&idx, &out, WriteOptions::new()).unwrap_err(), &idx, "overflows");
    assert!(nothing_at(&out));
    // A few empty items are data like any other.
    let few = npy_file("few.npy", &[1000, 0]);
    assert_eq!(convert::npy(&few, &out, WriteOptions::new()).unwrap().records, 1000);
    let few = st_file("few.safetensors", vec![7, 0]);
    assert_eq!(convert::safetensors(&few, d.join("st"), WriteOptions::new()).unwrap()[0].1.records, 7);
}

/// Tensors `a` and `a.partial` (issue 27, 3.17): each dataset `D` is written as `D.partial`
/// first, so one tensor's dataset would be the other's staging directory. Refused, naming the
/// file, before anything is written.
#[test]
fn a_tensor_named_as_another_tensors_staging_directory_is_refused() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let data = [0u8; 8];
    let tensors = vec![
        ("a", TensorView::new(Dtype::U8, vec![8], &data).unwrap()),
        ("a.partial", TensorView::new(Dtype::U8, vec![8], &data).unwrap()),
    ];
    let input = dir.path().join("m.safetensors");
    std::fs::write(&input, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let out = dir.path().join("m");
    let e = convert::safetensors(&input, &out, WriteOptions::new()).unwrap_err();
    bad_input_naming(e, &input, "'a.partial'");
    assert!(!out.exists(), "nothing written");
}

/// Converts `input` to `out` with the converter `name` of one input file.
fn convert_one(name: &str, input: &Path, out: &Path) -> Result<(), Error> {
    match name {
        "npy" => convert::npy(input, out, WriteOptions::new()).map(drop),
        "idx" => convert::idx(input, out, WriteOptions::new()).map(drop),
        "safetensors" => convert::safetensors(input, out, WriteOptions::new()).map(drop),
        "jsonl" => convert::jsonl(&[input], out, WriteOptions::new()).map(drop),
        other => unreachable!("{other}"),
    }
}

/// What is not a regular file whose size is its content reads as empty (issue 27, 3.13:
/// `convert jsonl /dev/stdin` succeeded with 0 records): every converter of files refuses it,
/// naming the path, and a FIFO with no writer does not make the open wait.
#[cfg(target_os = "linux")]
#[test]
fn inputs_that_are_not_regular_files_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = dir.path().join("out");
    let null = Path::new("/dev/null");
    let status = Path::new("/proc/self/status");
    for (input, needle) in [(null, "character device"), (fifo.as_path(), "pipe"), (status, "size of 0")] {
        for name in ["npy", "idx", "safetensors", "jsonl"] {
            let e = convert_one(name, input, &out).expect_err(name);
            bad_input_naming(e, input, needle);
            assert!(nothing_at(&out), "{name} of {}", input.display());
        }
    }
    // A part of a jsonl conversion, and a /proc file listed by `dir` through a link.
    let e = convert::jsonl_part(&[status], &out, WriteOptions::new(), convert::Part::new(0, 2).unwrap());
    bad_input_naming(e.unwrap_err(), status, "size of 0");
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("a"), b"a").unwrap();
    std::os::unix::fs::symlink(status, files.join("b")).unwrap();
    let e = convert::dir(&files, &out, WriteOptions::new()).unwrap_err();
    bad_input_naming(e, &files.join("b"), "size of 0");
    assert!(nothing_at(&out));
}

/// `export` refuses what the dataset's schema does not describe (issue 27): a dense schema of
/// zero-byte items over records that hold bytes (it exported an empty array, successfully), and
/// a bool dataset whose bytes are not 0 or 1 (exported as they were).
#[test]
fn export_refuses_zero_byte_items_over_bytes_and_bools_that_are_not_0_or_1() {
    use loaderx_core::{Codec, DType, Error, Schema, Store, StoreOptions};
    let dir = tempfile::tempdir().unwrap();
    for (name, schema, records) in [
        ("zero", Schema::dense(DType::F32, vec![0]), vec![vec![1u8, 2, 3, 4]; 3]),
        ("bool", Schema::dense(DType::Bool, vec![2]), vec![vec![0u8, 1], vec![1, 7], vec![0, 0]]),
    ] {
        let path = dir.path().join(name);
        let store = Store::create(&path, StoreOptions::new()).unwrap();
        store.append(&records, Codec::Raw).unwrap();
        drop(store);
        schema.write(&path).unwrap();
        let out = dir.path().join(format!("{name}.npy"));
        let err = loaderx_core::export::npy(&path, &out, false).unwrap_err();
        match (name, &err) {
            ("zero", Error::Schema { .. }) => assert!(err.to_string().contains("0 bytes"), "{err}"),
            ("bool", Error::CorruptRecord { index: 1, .. }) => {
                assert!(err.to_string().contains("byte 7"), "{err}")
            }
            _ => panic!("{name}: {err}"),
        }
        assert!(!out.exists(), "{name}: nothing exported");
    }
}
