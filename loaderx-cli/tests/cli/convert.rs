// End-to-end tests of the `loaderx` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loaderx_core::convert::NpyHeader;
use loaderx_core::format::RecordLoc;
use loaderx_core::{Codec, DType, Format};

fn loaderx(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn mnist(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k").join(name)
}

/// A little-endian f32 `.npy` of `n` rows of 64 compressible values.
fn write_npy(path: &Path, n: usize) -> Vec<u8> {
    let mut f = NpyHeader::encode(DType::F32, &[n, 64]).unwrap();
    for i in 0..n * 64 {
        f.extend_from_slice(&((i % 97) as f32 / 4.0).to_le_bytes());
    }
    std::fs::write(path, &f).unwrap();
    f
}

#[test]
fn npy_to_store_to_npy_is_byte_for_byte_for_each_codec() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    let original = write_npy(&input, 300);
    for &codec in Format::V1.codecs() {
        let store = dir.path().join(format!("s_{codec}"));
        let out = dir.path().join(format!("out_{codec}.npy"));
        let o = loaderx(&[&"convert", &"npy", &input, &store, &"--codec", &codec.name()]);
        assert!(o.status.success(), "{}", text(&o));
        let summary = String::from_utf8_lossy(&o.stdout);
        assert!(summary.contains("300 records") && summary.contains("ratio"), "{summary}");
        let o = loaderx(&[&"export", &store, &out]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(std::fs::read(&out).unwrap() == original, "codec {codec}");
    }
}

#[test]
fn idx_convert_of_the_bundled_data_then_info() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("train_images");
    let o = loaderx(&[&"convert", &"idx", &mnist("train-images-idx3-ubyte.gz"), &store, &"--codec", &"zstd"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("8000 records"));
    let o = loaderx(&[&"info", &store]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in ["kind:    dense", "dtype:   u8", "[28, 28]", "length:  8000", "1 chunk file"] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
    let o = loaderx(&[&"info", &store, &"--json"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("\"length\":8000") && t.contains("\"shape\":[28,28]") && t.contains("\"kind\":\"dense\""),
        "{t}"
    );
    let o = loaderx(&[&"stats", &store]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("logical_bytes 6272000"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("zstd 8000"), "{}", text(&o));
}

#[test]
fn info_works_on_a_raw_store() {
    let dir = tempfile::tempdir().unwrap();
    let s = loaderx_core::Store::create(dir.path().join("raw"), loaderx_core::StoreOptions::new()).unwrap();
    s.append(&[b"abc".as_slice(), b"de"], Codec::Raw).unwrap();
    drop(s);
    let o = loaderx(&[&"info", &dir.path().join("raw")]);
    let t = text(&o);
    assert!(o.status.success() && t.contains("raw (no schema)") && t.contains("length:  2"), "{t}");
}

#[test]
fn verify_passes_a_good_store_and_names_a_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 50);
    let store = dir.path().join("s");
    let convert = loaderx(&[&"convert", &"npy", &input, &store, &"--codec", &"zstd", &"--format", &"v1"]);
    assert!(convert.status.success(), "{}", text(&convert));
    let o = loaderx(&[&"verify", &store]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A clean v1 run says what it could not check: v1 records carry no checksum.
    let t = text(&o);
    assert!(t.contains("readable") && t.contains("no checksum") && !t.contains("intact"), "{t}");
    let t = text(&loaderx(&[&"verify", &store, &"--json"]));
    assert!(t.contains("\"checksums\":false") && t.contains("\"format\":\"v1\""), "{t}");

    // Flip a byte in the middle of record 7's compressed bytes.
    let meta = std::fs::read(store.join("meta.zr")).unwrap();
    let entry: [u8; 16] = meta[16 * 8..16 * 9].try_into().unwrap();
    let loc = RecordLoc::from_bytes(entry);
    assert_eq!(loc.codec, Codec::Zstd as u8, "{loc:?}");
    let chunk = store.join(format!("{}.zr", loc.chunk_id));
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[(loc.offset + loc.phys_length / 2) as usize] ^= 0x5a;
    std::fs::write(&chunk, bytes).unwrap();

    let o = loaderx(&[&"verify", &store]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("record 7") && t.contains(&store.display().to_string()), "{t}");
}

/// v2 (the default): a flipped bit in a raw record, which no frame checksum covers, is caught
/// by the record's crc32c; `info` names the format; `migrate` goes to v1 and back.
#[test]
fn v2_verify_catches_a_flipped_bit_in_a_raw_record_and_migrate_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 50);
    let store = dir.path().join("s");
    assert!(loaderx(&[&"convert", &"npy", &input, &store, &"--codec", &"raw"]).status.success());
    let info = text(&loaderx(&[&"info", &store]));
    assert!(info.contains("format:  v2"), "{info}");
    let t = text(&loaderx(&[&"verify", &store]));
    assert!(t.contains("all 50 records intact"), "{t}");
    let json = text(&loaderx(&[&"info", &store, &"--json"]));
    assert!(json.contains("\"format\":\"v2\""), "{json}");
    let o = loaderx(&[&"migrate", &store, &"--to", &"v1"]);
    assert!(o.status.success() && text(&o).contains("v2 → v1"), "{}", text(&o));
    assert!(text(&loaderx(&[&"info", &store])).contains("format:  v1"));
    let o = loaderx(&[&"migrate", &store, &"--to", &"v2"]);
    assert!(o.status.success() && text(&o).contains("v1 → v2"), "{}", text(&o));
    // From v1 to a v2 layout: a migration, never "already" (a v1 store's layout reads as entries).
    let o = loaderx(&[&"migrate", &store, &"--to", &"v1"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = loaderx(&[&"migrate", &store, &"--to", &"entries"]);
    assert!(o.status.success() && text(&o).contains("v1 → entries"), "{}", text(&o));
    let o = loaderx(&[&"export", &store, &dir.path().join("back.npy")]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(&input).unwrap(), std::fs::read(dir.path().join("back.npy")).unwrap());

    let index = std::fs::read(store.join("index.zr")).unwrap();
    let e = &index[64 + 32 * 7..64 + 32 * 8];
    let offset = u64::from_le_bytes(e[0..8].try_into().unwrap());
    let chunk = store.join(format!("{}.zr", u32::from_le_bytes(e[16..20].try_into().unwrap())));
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[offset as usize + 3] ^= 0x01;
    std::fs::write(&chunk, bytes).unwrap();
    let o = loaderx(&[&"verify", &store]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("record 7") && t.contains("checksum"), "{t}");
    let o = loaderx(&[&"verify", &store, &"--json"]);
    assert!(text(&o).contains("\"files\":["), "{}", text(&o));
    // A migration to the form the damaged store has already is no check, and says so (look 75).
    let o = loaderx(&[&"migrate", &store, &"--to", &"v2"]);
    let t = text(&o);
    assert!(
        t.contains("already v2, no new index written") && t.contains("`loaderx verify` checks them"),
        "{t}"
    );
    let o = loaderx(&[&"migrate", &store, &"--to", &"v3"]);
    assert_eq!(o.status.code(), Some(1), "a bad format is a usage error");
    assert!(text(&o).contains("v3"), "{}", text(&o));
}

/// A dense raw conversion is written in the fixed-stride layout: `info` says so, `verify` checks
/// its blocks (a flipped bit names a record of the damaged block), and `migrate --to entries`
/// and `--to fixed` go back and forth in place.
#[test]
fn a_dense_raw_dataset_is_fixed_stride_and_migrates_between_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 500);
    let store = dir.path().join("s");
    assert!(loaderx(&[&"convert", &"npy", &input, &store, &"--codec", &"raw"]).status.success());
    let info = text(&loaderx(&[&"info", &store]));
    assert!(info.contains("layout:  fixed ("), "{info}");
    let json = text(&loaderx(&[&"info", &store, &"--json"]));
    assert!(json.contains("\"layout\":\"fixed\""), "{json}");
    let o = loaderx(&[&"migrate", &store, &"--to", &"entries"]);
    assert!(o.status.success() && text(&o).contains("fixed → entries"), "{}", text(&o));
    assert!(text(&loaderx(&[&"info", &store])).contains("layout:  entries"));
    let o = loaderx(&[&"migrate", &store, &"--to", &"fixed"]);
    assert!(o.status.success() && text(&o).contains("entries → fixed"), "{}", text(&o));
    let o = loaderx(&[&"migrate", &store, &"--to", &"fixed"]);
    assert!(o.status.success() && text(&o).contains("already fixed"), "{}", text(&o));
    // An empty dense dataset migrates to fixed with its items' size (look 158, L158-3: "give
    // the size", which the CLI has no option for).
    let (none, empty) = (dir.path().join("none.npy"), dir.path().join("e"));
    write_npy(&none, 0);
    assert!(loaderx(&[&"convert", &"npy", &none, &empty, &"--codec", &"raw"]).status.success());
    for to in ["entries", "fixed"] {
        let o = loaderx(&[&"migrate", &empty, &"--to", &to]);
        assert!(o.status.success(), "{to}: {}", text(&o));
    }
    let info = text(&loaderx(&[&"info", &empty]));
    assert!(info.contains("layout:  fixed (256-byte raw records"), "{info}");
    let t = text(&loaderx(&[&"verify", &store]));
    assert!(t.contains("all 500 records intact"), "{t}");
    let chunk = store.join("0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&chunk, bytes).unwrap();
    let o = loaderx(&[&"verify", &store]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("record 499") && t.contains("block checksum"), "{t}");
    assert!(!t.contains("record 0:"), "{t}");
}

#[test]
fn a_ragged_raw_dataset_has_compact_entries_and_migrates_between_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines: Vec<String> =
        (0..300).map(|i| format!("{{\"line\": {i}, \"pad\": \"{}\"}}", "x".repeat(i % 37))).collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let store = dir.path().join("s");
    assert!(loaderx(&[&"convert", &"jsonl", &input, &store, &"--codec", &"raw"]).status.success());
    let info = text(&loaderx(&[&"info", &store]));
    assert!(info.contains("layout:  compact (a 16-byte index entry per raw record)"), "{info}");
    assert!(text(&loaderx(&[&"info", &store, &"--json"])).contains("\"layout\":\"compact\""));
    let o = loaderx(&[&"migrate", &store, &"--to", &"entries"]);
    assert!(o.status.success() && text(&o).contains("compact → entries"), "{}", text(&o));
    let o = loaderx(&[&"migrate", &store, &"--to", &"compact"]);
    assert!(o.status.success() && text(&o).contains("entries → compact"), "{}", text(&o));
    let t = text(&loaderx(&[&"verify", &store]));
    assert!(t.contains("all 300 records intact"), "{t}");
    // A zstd dataset cannot go compact: refused, naming its first compressed record (short
    // lines are stored raw, they do not shrink), and left as it was.
    let zstd = dir.path().join("z");
    assert!(loaderx(&[&"convert", &"jsonl", &input, &zstd, &"--codec", &"zstd"]).status.success());
    let o = loaderx(&[&"migrate", &zstd, &"--to", &"compact"]);
    assert!(
        !o.status.success() && text(&o).contains(": record ") && text(&o).contains("raw records only"),
        "{}",
        text(&o)
    );
    assert!(text(&loaderx(&[&"info", &zstd])).contains("layout:  entries"));
}

#[test]
fn convert_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 10);
    let store = dir.path().join("s");
    assert!(loaderx(&[&"convert", &"npy", &input, &store]).status.success());
    let o = loaderx(&[&"convert", &"npy", &input, &store]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("already exists") && t.contains(&store.display().to_string()), "{t}");
    assert_eq!(t.lines().count(), 1, "one line of error: {t}");
    let o = loaderx(&[&"convert", &"npy", &input, &store, &"--force", &"--codec", &"raw"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&loaderx(&[&"stats", &store])).contains("raw 10"));
}

#[test]
fn a_bad_input_is_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.npy");
    std::fs::write(&input, b"not numpy at all").unwrap();
    let o = loaderx(&[&"convert", &"npy", &input, &dir.path().join("s")]);
    let t = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(t.contains("bad.npy") && t.lines().count() == 1, "{t}");
    assert!(o.stdout.is_empty());
}

#[test]
fn dir_and_safetensors_convert() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("b.jpg"), b"second").unwrap();
    std::fs::write(files.join("a.jpg"), b"first").unwrap();
    let o = loaderx(&[&"convert", &"dir", &files, &dir.path().join("d")]);
    assert!(o.status.success() && text(&o).contains("2 records"), "{}", text(&o));
    let rs = loaderx_core::RaggedDataset::<u8>::open(dir.path().join("d")).unwrap();
    assert_eq!(rs.get_batch(&[0]).unwrap(), vec![b"first".to_vec()]);

    let w: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let view = safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::F32, vec![4, 3], &w).unwrap();
    let st = dir.path().join("m.safetensors");
    std::fs::write(&st, safetensors::serialize(vec![("w", view)], None).unwrap()).unwrap();
    let o = loaderx(&[&"convert", &"safetensors", &st, &dir.path().join("m")]);
    assert!(o.status.success() && text(&o).contains("w: 4 records"), "{}", text(&o));
}

/// int64 labels converted with the default codec (zstd) land in the fixed-stride layout: eight
/// bytes never pay for a frame and a 32-byte entry, so the index is a checksum per block, not a
/// 32-byte entry per label (it was 1.5 MiB for 390 KiB of labels).
#[test]
fn small_labels_are_stored_raw_in_the_fixed_stride_whatever_the_codec() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("labels.npy");
    let mut f = NpyHeader::encode(DType::I64, &[50_000]).unwrap();
    for i in 0..50_000i64 {
        f.extend_from_slice(&(i % 10).to_le_bytes());
    }
    std::fs::write(&input, &f).unwrap();
    let store = dir.path().join("labels");
    assert!(loaderx(&[&"convert", &"npy", &input, &store]).status.success());
    let info = text(&loaderx(&[&"info", &store]));
    assert!(info.contains("layout:  fixed ("), "{info}");
    assert!(std::fs::metadata(store.join("index.zr")).unwrap().len() < 1024, "one checksum per 512 labels");
}

/// Look 121, L121-4: `--max-side` beside `--size`, and `--quality` without `--max-side` (nothing
/// is re-encoded then), were accepted and ignored: refused, naming the options.
#[test]
#[cfg(feature = "images")]
fn image_options_that_would_be_ignored_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("a")).unwrap(); // refused before it is read
    for (k, args) in
        [&["--size", "8x8", "--max-side", "10"][..], &["--encoded", "--quality", "50"]].iter().enumerate()
    {
        let out = dir.path().join(format!("o{k}"));
        let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", "images"])
            .arg(&input)
            .arg(&out)
            .args(*args)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && t.contains("--max-side"), "{args:?}: {t}");
        assert!(!out.exists());
    }
}

/// Look 147, L147-2: an option between the inputs and OUT (`IN --codec raw OUT`) was "2 values
/// required by '<IN... OUT>'; only 1 was provided"; it is taken, for `convert jsonl` and
/// `stitch` alike, and one path alone says what is needed.
#[test]
fn options_between_the_inputs_and_out_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"a\": 1}\n{\"a\": 2}\n").unwrap();
    let (j1, j2, set) = (dir.path().join("j1"), dir.path().join("j2"), dir.path().join("set"));
    for out in [&j1, &j2] {
        let o = loaderx(&[&"convert", &"jsonl", &input, &"--codec", &"raw", out]);
        assert!(o.status.success(), "{}", text(&o));
    }
    assert!(text(&loaderx(&[&"info", &j1])).contains("length:  2"));
    let o = loaderx(&[&"stitch", &j1, &"--parts", &"2", &j2, &set]);
    // Parsed: refused by stitch itself (an option of the directory form), not by the parser.
    assert!(text(&o).contains("--parts N counts the parts of one directory"), "{}", text(&o));
    assert!(loaderx(&[&"stitch", &j1, &j2, &set]).status.success());
    let o = loaderx(&[&"convert", &"jsonl", &input]);
    assert!(
        !o.status.success() && text(&o).contains("needs at least one input and then the output"),
        "{}",
        text(&o)
    );
}
