// Data safety, round three, through the CLI where it was found: `migrate` never certifies
// damage, lying index fields are errors (never an abort or a stall), a store set never reads one
// store twice and `info` / `verify` take sets, and `--force` replaces only a loaderx dataset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loaderx_core::format::v2::{self, Entry};
use loaderx_core::{Codec, DatasetWriter, Layout, WriteOptions};

fn loaderx(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A dense u8 dataset of `n` records of 64 bytes (record `i` all `i`), written `codec`: raw is
/// the fixed-stride layout, zstd an entry per record.
fn dataset(out: &Path, n: usize, codec: Codec) -> PathBuf {
    let mut w = DatasetWriter::dense::<u8>(out, vec![64], WriteOptions::new().codec(codec)).unwrap();
    w.append(&(0..n * 64).map(|i| (i / 64) as u8).collect::<Vec<u8>>()).unwrap();
    w.finish().unwrap();
    out.to_path_buf()
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

/// `migrate` to each layout of a store `verify` finds damaged exits 1 naming the record, and
/// `verify` afterwards still finds it (it used to say "all records intact").
#[test]
fn migrate_refuses_a_store_verify_finds_damaged() {
    let dir = tempfile::tempdir().unwrap();
    for (from, to) in
        [("fixed", "entries"), ("fixed", "compact"), ("entries", "compact"), ("entries", "fixed")]
    {
        let s = dataset(&dir.path().join(format!("{from}-{to}")), 100, Codec::Raw);
        if from == "entries" {
            assert!(loaderx(&[&"migrate", &s, &"--to", &"entries"]).status.success());
        }
        flip(&s.join("0.zr"), 64 * 37 + 2);
        let index = std::fs::read(s.join("index.zr")).unwrap();
        let o = loaderx(&[&"migrate", &s, &"--to", &to]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{from} → {to}: {t}");
        assert!(t.contains("nothing changed") && t.contains("0.zr"), "{t}");
        assert_eq!(std::fs::read(s.join("index.zr")).unwrap(), index, "{from} → {to}");
        let o = loaderx(&[&"verify", &s]);
        assert_eq!(o.status.code(), Some(1), "{from} → {to}: {}", text(&o));
    }
}

/// An entry naming chunk 2^32 - 1, with an empty file of that name beside it: `export` and
/// `verify` name the record and exit 1 (it used to abort on a 32 GiB allocation).
#[test]
fn an_entry_naming_chunk_u32_max_is_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(&dir.path().join("d"), 20, Codec::Zstd);
    let index = s.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    let at = v2::HEADER_SIZE + v2::ENTRY_SIZE * 4;
    let e = Entry::decode_unchecked(bytes[at..at + v2::ENTRY_SIZE].try_into().unwrap());
    bytes[at..at + v2::ENTRY_SIZE].copy_from_slice(&Entry { chunk: u32::MAX, ..e }.encode());
    std::fs::write(&index, bytes).unwrap();
    std::fs::write(s.join(format!("{}.zr", u32::MAX)), b"").unwrap();
    let o = loaderx(&[&"export", &s, &dir.path().join("out.npy")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("record 4"), "{}", text(&o));
    let o = loaderx(&[&"verify", &s]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("1 of 20 records damaged"), "{}", text(&o));
}

/// A 68-byte fixed-stride `index.zr` claiming 2^32 - 1 records in one block: `info`, `stats` and
/// `verify` refuse it at once, naming the field (they used to print it, or run for minutes).
#[test]
fn a_fixed_stride_index_with_a_lying_block_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(&dir.path().join("d"), 3, Codec::Raw);
    let h = v2::Header {
        count: u64::from(u32::MAX),
        layout: Layout::Fixed { record_size: 1, block_records: u32::MAX },
        ..v2::Header::empty(1 << 40)
    };
    let mut bytes = h.encode().to_vec();
    bytes.extend_from_slice(&[0; 4]);
    std::fs::write(s.join("index.zr"), &bytes).unwrap();
    for cmd in ["info", "stats", "verify"] {
        let o = loaderx(&[&cmd, &s]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {t}");
        assert!(t.contains("index.zr") && t.contains("records a block"), "{cmd}: {t}");
    }
}

/// `stitch` of one store under two names is refused; `info` of a set whose parts' counts
/// overflow is an error, not a wrapped length; `verify` checks a set part by part, numbering
/// records as the set does.
// Unix: a Windows symbolic link needs a privilege.
#[cfg(unix)]
#[test]
fn sets_refuse_a_store_twice_and_info_and_verify_take_them() {
    let dir = tempfile::tempdir().unwrap();
    let p0 = dataset(&dir.path().join("p0"), 10, Codec::Raw);
    let p1 = dataset(&dir.path().join("p1"), 10, Codec::Raw);
    let alias = dir.path().join("alias");
    std::os::unix::fs::symlink(&p0, &alias).unwrap();
    let o = loaderx(&[&"stitch", &p0, &alias, &dir.path().join("bad")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("same store"), "{}", text(&o));
    let set = dir.path().join("set");
    assert!(loaderx(&[&"stitch", &p0, &p1, &set]).status.success());
    let o = loaderx(&[&"verify", &set]);
    assert!(o.status.success() && text(&o).contains("all 20 records intact"), "{}", text(&o));
    flip(&p1.join("0.zr"), 64 * 3);
    let o = loaderx(&[&"verify", &set]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("record 13:") && !t.contains("record 3:"), "the set's numbering: {t}");
    // Record 3 of p1 is one the set's identity of the part samples: the set says so too.
    assert!(t.contains("the set:") && t.contains("not the store the set was stitched with"), "{t}");
    let m = loaderx_core::format::storeset::SetManifest::new(vec![
        loaderx_core::format::storeset::SetPart { path: "../p0".into(), records: 1 << 63, identity: None },
        loaderx_core::format::storeset::SetPart {
            path: "../p1".into(),
            records: (1 << 63) + 100,
            identity: None,
        },
    ]);
    std::fs::write(set.join(loaderx_core::SET_FILE), m.encode()).unwrap();
    let o = loaderx(&[&"info", &set]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("2^64"), "{}", text(&o));
}

/// `convert --force` over a directory of the user's is refused with nothing moved.
#[test]
fn convert_force_replaces_only_a_loaderx_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    let mut f = loaderx_core::convert::NpyHeader::encode(loaderx_core::DType::U8, &[4, 2]).unwrap();
    f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    std::fs::write(&input, f).unwrap();
    let project = dir.path().join("myproject");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("main.py"), b"print()").unwrap();
    let o = loaderx(&[&"convert", &"npy", &input, &project, &"--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not a loaderx dataset"), "{}", text(&o));
    assert_eq!(std::fs::read(project.join("main.py")).unwrap(), b"print()");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let out = dir.path().join("d");
    assert!(loaderx(&[&"convert", &"npy", &input, &out]).status.success());
    let o = loaderx(&[&"convert", &"npy", &input, &out, &"--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `verify` of a dataset checks each record's length against its schema: a schema that says
/// 32-byte items over 64-byte records is damage (it used to say "all intact" of a dataset that
/// does not open).
#[test]
fn verify_checks_records_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        let s = dataset(&dir.path().join(format!("d-{codec}")), 10, codec);
        assert!(loaderx(&[&"verify", &s]).status.success());
        loaderx_core::Schema::dense(loaderx_core::DType::U8, vec![32]).write(&s).unwrap();
        let o = loaderx(&[&"verify", &s]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{codec}: {t}");
        assert!(
            t.contains("10 of 10 records damaged") && t.contains("the record is 64 bytes"),
            "{codec}: {t}"
        );
    }
}

/// Look 113, L113-2: a dataset of bools holding bytes other than 0 or 1 (written before the
/// writers checked them, or by another tool) passed `verify`, and every reader then refused it:
/// each such record is damage, named with its element.
#[test]
fn verify_checks_the_bytes_of_a_dataset_of_bools() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        // Record i is 64 bytes of i: records 0 and 1 are bools, 2 to 9 are not.
        let s = dataset(&dir.path().join(format!("b-{codec}")), 10, codec);
        loaderx_core::Schema::dense(loaderx_core::DType::Bool, vec![64]).write(&s).unwrap();
        let o = loaderx(&[&"verify", &s]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{codec}: {t}");
        assert!(
            t.contains("8 of 10 records damaged")
                && t.contains("bool element 0 of the record is 9, not 0 or 1"),
            "{codec}: {t}"
        );
    }
}

/// Look 90 (F90-1): one byte of `schema.msgpack` turning `u32` into `f32` (or `u16` into
/// `i16`: any two element types of one width) passed `verify` as "all intact", and every reader
/// then read the records as the other type. The schema carries its checksum: `verify` names the
/// damage and exits 1, and the records are still checked.
#[test]
fn verify_finds_a_schema_whose_element_type_was_changed_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(&dir.path().join("d"), 10, Codec::Raw);
    loaderx_core::Schema::dense(loaderx_core::DType::U32, vec![16]).write(&s).unwrap();
    assert!(loaderx(&[&"verify", &s]).status.success());
    let path = s.join("schema.msgpack");
    let mut b = std::fs::read(&path).unwrap();
    let at = b.windows(3).position(|w| w == b"u32").unwrap();
    b[at] = b'f';
    std::fs::write(&path, b).unwrap();
    let o = loaderx(&[&"verify", &s]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("0 of 10 records damaged") && t.contains("checksum does not match"), "{t}");
    let o = loaderx(&[&"verify", &"--json", &s]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["checked"].as_u64(), Some(10));
    assert!(v["files"][0].as_str().is_some_and(|f| f.contains("schema.msgpack")), "{v}");
    let o = loaderx(&[&"export", &s, &dir.path().join("out.npy")]);
    assert!(!o.status.success() && text(&o).contains("checksum does not match"), "{}", text(&o));
    // Look 93 (F4): a set's own schema damaged is damage reported once, its parts checked.
    let set = dir.path().join("set");
    let part = dataset(&dir.path().join("p0"), 3, Codec::Raw);
    assert!(loaderx(&[&"stitch", &part, &set]).status.success());
    let path = set.join("schema.msgpack");
    let mut b = std::fs::read(&path).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&path, b).unwrap();
    let o = loaderx(&[&"verify", &"--json", &set]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert_eq!((o.status.code(), v["checked"].as_u64()), (Some(1), Some(3)), "{v}");
    assert_eq!(v["files"].as_array().map(Vec::len), Some(1), "{v}");
    // Look 91 (N3): an output that is no regular file was called "not a loaderx dataset".
    let good = dataset(&dir.path().join("good"), 2, Codec::Raw);
    let o = loaderx(&[&"export", &good, &"/dev/null", &"--force"]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("/dev/null is not replaced: it is not a regular file"), "{t}");
    assert!(!t.contains("dataset"), "{t}");
}

/// Look 64 (L64-3): a store path that is an `s3://` URL with credentials written into it was
/// shown whole, twice (the engine's message and the command's prefix).
#[test]
fn a_url_with_credentials_is_never_shown_with_them() {
    for url in [
        "s3://AKIAEXAMPLE:wJalrXUtnFEMI/K7MDENG@mybucket/data",
        "s3://AKIAEXAMPLE:wJalrK7MDENG@mybucket/data",
    ] {
        for cmd in ["info", "verify", "stats"] {
            let out = loaderx(&[&cmd, &url]);
            let said = text(&out);
            assert!(!out.status.success(), "{cmd} {url}: {said}");
            assert!(!said.contains("wJalr") && !said.contains("AKIAEXAMPLE"), "{cmd}: {said}");
            assert!(said.contains("<redacted>@mybucket"), "{cmd}: {said}");
        }
    }
}

/// Look 95 (F1): a conversion whose store could not be created (here a v1 index of 256 MiB over
/// a file-size limit: `EFBIG`, as on a full disk) left `OUT.partial` holding an empty `0.zr`,
/// which every later conversion into `OUT` refused, with `--force` too, as a user's directory.
/// Nothing is left; the next conversion is written.
#[cfg(unix)]
#[test]
fn a_conversion_that_cannot_create_its_store_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"a\": 1}\n{\"a\": 2}\n").unwrap();
    let out = dir.path().join("out");
    let o = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1000; exec \"$0\" convert jsonl \"$1\" \"$2\" --format v1")
        .args([env!("CARGO_BIN_EXE_loaderx").as_ref(), input.as_os_str(), out.as_os_str()])
        .output()
        .unwrap();
    assert!(!o.status.success() && text(&o).contains("File too large"), "{}", text(&o));
    assert!(!dir.path().join("out.partial").exists() && !out.exists(), "{}", text(&o));
    let o = loaderx(&[&"convert", &"jsonl", &input, &out, &"--format", &"v1"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Look 91, N3-2: a write past `ulimit -f` killed the CLI with `SIGXFSZ`, leaving its temporary
/// (`.NAME.PID.0.partial`, or `OUT.partial` of a conversion) beside the output. It is now an
/// error each command cleans up after: exit 1 naming the file, nothing left, the output absent.
#[cfg(unix)]
#[test]
fn a_write_past_the_file_size_limit_is_an_error_that_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&dir.path().join("d"), 4096, Codec::Raw);
    let npy = dir.path().join("a.npy");
    std::fs::write(dir.path().join("big.npy"), {
        let mut b =
            b"\x93NUMPY\x01\x00\x76\x00{'descr': '|u1', 'fortran_order': False, 'shape': (4096, 64), }"
                .to_vec();
        b.resize(10 + 0x76, b' ');
        *b.last_mut().unwrap() = b'\n';
        b.extend((0..4096 * 64).map(|i| (i / 64) as u8));
        b
    })
    .unwrap();
    let converted = dir.path().join("c");
    // 64 KiB at most a file (bash counts blocks of 1,024 bytes), less than either output.
    let limited = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        Command::new("bash")
            .arg("-c")
            .arg("ulimit -f 64 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_loaderx"))
            .args(args.iter().map(|a| a.as_ref()))
            .output()
            .unwrap()
    };
    for (o, out) in [
        (limited(&[&"export", &ds, &npy]), &npy),
        (limited(&[&"convert", &"npy", &dir.path().join("big.npy"), &converted]), &converted),
    ] {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("too large"), "{}", text(&o));
        assert!(!out.exists(), "{}", out.display());
    }
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["big.npy", "d"], "temporaries left behind");
}

/// Look 102, L102-2: `convert ... . --force` run inside a dataset staged in `..partial`, inside
/// the dataset itself, then refused, leaving it there: every later replacement was refused. `.`
/// names the directory it is, staged beside it.
#[test]
fn a_dataset_replaced_from_inside_by_its_dot_is_staged_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&dir.path().join("ds"), 8, Codec::Raw);
    let npy = dir.path().join("a.npy");
    let o = loaderx(&[&"export", &ds, &npy]);
    assert!(o.status.success(), "{}", text(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "npy", "../a.npy", ".", "--force"])
        .current_dir(&ds)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let mut inside: Vec<String> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    inside.sort();
    assert!(inside.iter().all(|n| !n.contains("partial")), "{inside:?}");
    let mut beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["a.npy", "ds"]);
    let o = loaderx(&[&"convert", &"npy", &npy, &ds, &"--force"]);
    assert!(o.status.success(), "{}", text(&o));
}
