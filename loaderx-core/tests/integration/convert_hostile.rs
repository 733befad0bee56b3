//! Hostile inputs to the converters and `export`: headers promising records of zero-byte items,
//! a tensor named as another's staging directory, inputs that are not regular files, and
//! schemas that do not describe the dataset's bytes, an image folder whose every file is bad.

use std::path::Path;

use loaderx_core::{DType, Error, WriteOptions, convert};

use crate::convert::nothing_at;
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
#[cfg(target_os = "linux")]
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

/// A header whose count was lowered without its checksum (look 68, L68-3): `export` wrote the
/// records below it as the whole dataset; now it refuses, naming `index.zr`, in each v2 layout.
#[test]
fn export_refuses_a_header_that_fails_its_checksum() {
    use loaderx_core::{Codec, DType, Error, Schema, Store, StoreOptions};
    let dir = tempfile::tempdir().unwrap();
    for (name, o) in [
        ("entries", StoreOptions::new()),
        ("compact", StoreOptions::new().compact_entries(true)),
        ("fixed", StoreOptions::new().fixed_stride(4)),
    ] {
        let path = dir.path().join(name);
        let store = Store::create(&path, o).unwrap();
        store.append(&vec![vec![1u8, 2, 3, 4]; 25], Codec::Raw).unwrap();
        drop(store);
        Schema::dense(DType::U8, vec![4]).write(&path).unwrap();
        // The count: bytes 40..48 of the header.
        crate::common::patch(&path.join("index.zr"), 40, &2u64.to_le_bytes());
        let out = dir.path().join(format!("{name}.npy"));
        match loaderx_core::export::npy(&path, &out, false) {
            Err(Error::Corrupt { path: p, reason, .. }) => {
                assert!(p.ends_with("index.zr") && reason.contains("checksum"), "{name}: {reason}")
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(!out.exists(), "{name}: nothing exported");
    }
}

/// Twentieth look, U1-U3: `export --force` into the dataset it reads replaced the dataset's own
/// chunk or index (records lost, success reported); `export` removed a user's `OUT.tmp`; a failed
/// rename left a complete temporary behind.
#[test]
fn export_never_writes_into_its_dataset_over_a_users_file_or_leaves_a_temporary() {
    use loaderx_core::{Codec, DenseSource, Schema, Store, StoreOptions};
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let store = Store::create(&ds, StoreOptions::new()).unwrap();
    store.append(&(0..20u32).map(|i| i.to_le_bytes()).collect::<Vec<_>>(), Codec::Raw).unwrap();
    drop(store);
    Schema::dense(DType::U32, vec![]).write(&ds).unwrap();
    let before: Vec<(std::path::PathBuf, Vec<u8>)> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    for name in ["0.zr", "index.zr", "schema.msgpack", "new.npy"] {
        let err = loaderx_core::export::npy(&ds, ds.join(name), true).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("which the export reads"),
            "{err}"
        );
    }
    // Twenty-first look, V1: a store set's parts live beside it (`../ds`), and are as much the
    // data the export reads.
    let set = dir.path().join("set");
    loaderx_core::stitch(&[&ds], &set).unwrap();
    for name in ["0.zr", "index.zr"] {
        let err = loaderx_core::export::npy(&set, ds.join(name), true).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("which the export reads"),
            "{err}"
        );
    }
    for (path, bytes) in &before {
        assert_eq!(&std::fs::read(path).unwrap(), bytes, "{} unchanged", path.display());
    }
    assert_eq!(std::fs::read_dir(&ds).unwrap().count(), before.len(), "nothing added to the dataset");
    assert_eq!(DenseSource::open(&ds).unwrap().len(), 20);

    // A user's OUT.tmp (and OUT.partial) are theirs.
    let out = dir.path().join("results.npy");
    for own in ["results.npy.tmp", "results.npy.partial"] {
        std::fs::write(dir.path().join(own), b"my notes").unwrap();
    }
    assert_eq!(loaderx_core::export::npy(&ds, &out, false).unwrap(), 20);
    for own in ["results.npy.tmp", "results.npy.partial"] {
        assert_eq!(std::fs::read(dir.path().join(own)).unwrap(), b"my notes");
    }
    let again = loaderx_core::export::npy(&ds, &out, false).unwrap_err();
    assert!(matches!(again, Error::AlreadyExists { .. }), "{again}");

    // A directory at OUT is refused before anything is written; nothing is left beside it.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir(&blocked).unwrap();
    let err = loaderx_core::export::npy(&ds, &blocked, true).unwrap_err();
    assert!(matches!(err, Error::NotReplaceable { .. }), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["blocked", "ds", "results.npy", "results.npy.partial", "results.npy.tmp", "set"]);
}

/// Look 110, L110-3: a folder whose every file is skipped was an error naming `OUT.partial`
/// (gone by then) without one file's reason: it names the folder, and each file and why.
#[test]
#[cfg(feature = "images")]
fn a_folder_whose_every_file_is_skipped_names_them() {
    use loaderx_core::convert::{EncodedOptions, ImageOptions, encoded_images, images};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("cat")).unwrap();
    std::fs::write(input.join("cat/a.png"), b"\x89PNG\r\n\x1a\n cut").unwrap();
    std::fs::write(input.join("cat/b.txt"), b"not an image").unwrap();
    let encoded = encoded_images(
        &input,
        dir.path().join("e"),
        EncodedOptions { skip_bad: true, ..EncodedOptions::default() },
        WriteOptions::new(),
    );
    let decoded = images(
        &input,
        dir.path().join("d"),
        ImageOptions { skip_bad: true, ..ImageOptions::new(8, 8) },
        WriteOptions::new(),
    );
    for e in [encoded.map(drop).unwrap_err(), decoded.map(drop).unwrap_err()] {
        let Error::BadInput { path, reason, .. } = &e else { panic!("{e}") };
        assert_eq!(path, &input, "{e}");
        assert!(
            reason.contains("all 2 images were skipped")
                && reason.contains("a.png: ")
                && reason.contains("b.txt: "),
            "{e}"
        );
    }
    assert!(!dir.path().join("e").exists() && !dir.path().join("d").exists());
}

/// A 4 x 2 RGB PNG whose one deflate block is stored (uncompressed), a pixel byte then changed
/// and the chunk's CRC recomputed: it inflates, and only the zlib stream's Adler-32 tells.
#[cfg(feature = "images")]
pub(crate) fn adler_damaged_png() -> Vec<u8> {
    let rows: Vec<u8> =
        (0..2u8).flat_map(|y| std::iter::once(0).chain((0..12).map(move |x| x * 20 + y))).collect();
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::none());
    std::io::Write::write_all(&mut z, &rows).unwrap();
    let mut idat = z.finish().unwrap();
    idat[2 + 5 + 3] ^= 0x40; // past the zlib header and the stored block's header: a pixel byte
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        [&(data.len() as u32).to_be_bytes()[..], kind, data, &crc.sum().to_be_bytes()].concat()
    };
    let ihdr = [&4u32.to_be_bytes()[..], &2u32.to_be_bytes(), &[8, 2, 0, 0, 0]].concat();
    [&b"\x89PNG\r\n\x1a\n"[..], &chunk(b"IHDR", &ihdr), &chunk(b"IDAT", &idat), &chunk(b"IEND", &[])].concat()
}
