//! Converters: .npy of both byte orders (built here by hand, checked against numpy's headers),
//! all-or-nothing failure and overwrite semantics. IDX, safetensors and directories:
//! `convert_formats.rs`; hostile inputs: `convert_hostile.rs`.

use std::path::{Path, PathBuf};

use loaderx_core::{Codec, DType, DenseDataset, DenseSource, Error, Format, WriteOptions, convert, export};
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
pub(crate) fn npy_bytes(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
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

pub(crate) fn nothing_at(out: &Path) -> bool {
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
    assert!(matches!(
        convert::npy(&bad, &out, WriteOptions::new().overwrite(true)),
        Err(Error::BadInput { path, reason, .. }) if path == bad && reason.contains("bool element 1")
    ));
    assert_eq!(DenseDataset::<i16>::open(&out).unwrap().get_vec(&[0, 1]).unwrap(), vec![1, 2]);
    // Look 125, L125-1: what a replacement killed while removing the old dataset left (an
    // `out.old1` of chunks and a lock, its index gone) goes at the next forced run; a whole
    // dataset there (`out.old2`), and directories that may be the user's (`out.old`, empty;
    // `out.old3`, a lock file alone; `out.older`: look 128, L128-2) stay.
    let left = |name: &str, files: &[&str]| {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        for f in files {
            std::fs::write(dir.path().join(name).join(f), b"12345").unwrap();
        }
    };
    left("out.old", &[]);
    // Its schema with it (look 132, L132-3: a schema-only `out.old1` stayed for good).
    left("out.old1", &["0.zr", "1.zr", "write.lock", "schema.msgpack"]);
    convert::npy(&a, dir.path().join("out.old2"), WriteOptions::new()).unwrap();
    left("out.old3", &["write.lock"]);
    left("out.older", &[]);
    convert::npy(&b, &out, WriteOptions::new().overwrite(true)).unwrap();
    assert_eq!(DenseDataset::<i16>::open(&out).unwrap().get_vec(&[0, 1, 2]).unwrap(), vec![7, 8, 9]);
    assert!(!dir.path().join("out.partial").exists() && !dir.path().join("out.old1").exists());
    assert_eq!(DenseDataset::<i16>::open(dir.path().join("out.old2")).unwrap().len(), 2);
    for kept in ["out.old", "out.old3", "out.older"] {
        assert!(dir.path().join(kept).is_dir(), "{kept}");
    }
    // export refuses to overwrite too
    std::fs::write(dir.path().join("e.npy"), b"x").unwrap();
    assert!(matches!(export::npy(&out, dir.path().join("e.npy"), false), Err(Error::AlreadyExists { .. })));
    export::npy(&out, dir.path().join("e.npy"), true).unwrap();
    assert_eq!(std::fs::read(dir.path().join("e.npy")).unwrap(), std::fs::read(&b).unwrap());
}
