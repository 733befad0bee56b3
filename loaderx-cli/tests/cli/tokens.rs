// Token files through `info` and `verify` (issue 45): what the headers say, and every index
// entry and id checked, a lying field named.

use std::path::Path;
use std::process::{Command, Output};

use loaderx_core::tokens::{MegatronWriter, TokenType, write_llmc};

fn loaderx(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn megatron(prefix: &Path) {
    let mut w = MegatronWriter::create(prefix, TokenType::U16, false).unwrap();
    for k in 0..20u16 {
        w.add_document(&(0..50 + k).map(|j| k * 100 + j).collect::<Vec<u16>>()).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn info_and_verify_read_token_files() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    megatron(&prefix);
    let tokens: u64 = (0..20).map(|k| 50 + k).sum();
    let o = loaderx(&[&"info", &prefix, &"--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "megatron");
    assert_eq!(v["dtype"], "u16");
    assert_eq!(v["tokens"], tokens);
    assert_eq!((v["sequences"].as_u64(), v["documents"].as_u64()), (Some(20), Some(20)));
    let bin = dir.path().join("corpus.bin");
    let o = loaderx(&[&"info", &bin]);
    assert!(o.status.success() && text(&o).contains("documents: 20"), "{}", text(&o));
    let o = loaderx(&[&"verify", &bin]);
    assert!(o.status.success() && text(&o).contains("intact"), "{}", text(&o));

    // Ids past a vocabulary (document 10 starts at token 545 with id 1000), and a pointer out
    // of the .bin: exit 1, the token or field named.
    let o = loaderx(&[&"verify", &prefix, &"--vocab-size", &"1000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("token 545 is 1000, outside the vocabulary of 1000"), "{}", text(&o));
    let idx = dir.path().join("corpus.idx");
    let mut b = std::fs::read(&idx).unwrap();
    let pointer = 34 + 4 * 20 + 8 * 5;
    b[pointer..pointer + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
    std::fs::write(&idx, b).unwrap();
    let o = loaderx(&[&"verify", &prefix]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("sequence_pointers") && text(&o).contains("corpus.idx"), "{}", text(&o));

    // llm.c by its magic; a headerless file with --dtype, refused without it.
    let l = dir.path().join("gpt2.bin");
    write_llmc(&l, &[5u16; 77], false).unwrap();
    let o = loaderx(&[&"info", &l, &"--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["format"].as_str(), v["tokens"].as_u64()), (Some("llmc"), Some(77)));
    let raw = dir.path().join("train.bin");
    std::fs::write(&raw, [1u8, 0, 2, 0, 3, 0]).unwrap();
    let o = loaderx(&[&"info", &raw]);
    assert!(!o.status.success() && text(&o).contains("give --dtype"), "{}", text(&o));
    let o = loaderx(&[&"info", &raw, &"--dtype", &"uint16", &"--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["format"].as_str(), v["tokens"].as_u64()), (Some("raw"), Some(3)));
    let o = loaderx(&[&"verify", &raw, &"--dtype", &"u16", &"--vocab-size", &"3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// `verify --json` of a token file is one JSON object, its first problem named; a vocabulary of
/// no ids is refused before anything is read.
#[test]
fn verify_json_of_token_files_and_an_empty_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    megatron(&prefix);
    let o = loaderx(&[&"verify", &prefix, &"--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["format"].as_str(), v["intact"].as_bool()), (Some("megatron"), Some(true)));
    assert!(v["error"].is_null() && v["vocab_size"].is_null(), "{v}");
    let o = loaderx(&[&"verify", &prefix, &"--json", &"--vocab-size", &"1000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["intact"].as_bool(), v["vocab_size"].as_u64()), (Some(false), Some(1000)));
    assert!(v["error"].as_str().unwrap().contains("token 545 is 1000"), "{v}");
    let o = loaderx(&[&"verify", &prefix, &"--vocab-size", &"0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("'0' for '--vocab-size"), "{}", text(&o));
}

/// A prefix whose `.idx` is a FIFO, or a FIFO named itself, is refused by name as no regular
/// file, never opened (which would wait for a writer) nor called "not a loaderx store".
#[test]
fn a_fifo_for_a_token_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("corpus.idx");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(std::env::var_os("LOADERX_REQUIRE_C").is_none(), "mkfifo failed");
        return;
    }
    for path in [dir.path().join("corpus"), fifo] {
        let o = loaderx(&[&"info", &path]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("corpus.idx") && text(&o).contains("not a regular file"), "{}", text(&o));
    }
}

/// `convert tokens` into a dataset and `export --megatron` back: the same files, byte for byte.
#[test]
fn convert_tokens_and_export_megatron_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    megatron(&prefix);
    let ds = dir.path().join("ds");
    let o = loaderx(&[&"convert", &"tokens", &prefix, &ds]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("20 records"), "{}", text(&o));
    let back = dir.path().join("back");
    let o = loaderx(&[&"export", &ds, &back, &"--megatron"]);
    assert!(o.status.success(), "{}", text(&o));
    for ext in ["bin", "idx"] {
        assert_eq!(
            std::fs::read(back.with_extension(ext)).unwrap(),
            std::fs::read(prefix.with_extension(ext)).unwrap(),
            "{ext}"
        );
    }
    let o = loaderx(&[&"export", &ds, &back, &"--megatron"]);
    assert!(!o.status.success() && text(&o).contains("exists"), "{}", text(&o));
    // Look 97, F97-3: `export` to .npy of the ragged token dataset names the flag that exports
    // it, not a library type, and writes nothing.
    let npy = dir.path().join("tokens.npy");
    let o = loaderx(&[&"export", &ds, &npy]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("ragged") && text(&o).contains("--megatron"), "{}", text(&o));
    assert!(!npy.exists());
}

/// Look 97, F97-2: a command that takes one store, given a store set or a directory of
/// datasets, says which it is and what to open instead of only "it has no index".
#[test]
fn store_commands_given_a_set_or_a_directory_of_datasets_say_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    megatron(&prefix);
    let (p0, p1, set, outer) =
        (dir.path().join("p0"), dir.path().join("p1"), dir.path().join("set"), dir.path().join("outer"));
    for p in [&p0, &p1] {
        let o = loaderx(&[&"convert", &"tokens", &prefix, p]);
        assert!(o.status.success(), "{}", text(&o));
    }
    assert!(loaderx(&[&"stitch", &p0, &p1, &set]).status.success());
    std::fs::create_dir(&outer).unwrap();
    std::fs::rename(&p1, outer.join("tokens")).unwrap();
    for cmd in ["stats", "compact"] {
        let o = loaderx(&[&cmd, &set]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        assert!(text(&o).contains("store set"), "{cmd}: {}", text(&o));
    }
    for cmd in ["stats", "info", "verify", "compact"] {
        let o = loaderx(&[&cmd, &outer]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        let want = format!(
            "a directory of datasets (tokens), not one: open one of them, e.g. {}",
            outer.join("tokens").display()
        );
        assert!(text(&o).contains(&want), "{cmd}: {}", text(&o));
    }
}

/// Look 85, F85-1: a Megatron document of 2^32 tokens or more (three sequences of 2^31 - 1,
/// legal in the format) is past a limit of the reader: `verify` says "not checked", never
/// "damaged", and its JSON's `intact` is null.
#[test]
fn a_document_past_the_readers_limit_is_not_called_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let m = i32::MAX;
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(1); // u8 tokens
    idx.extend(3u64.to_le_bytes());
    idx.extend(2u64.to_le_bytes());
    (0..3).for_each(|_| idx.extend(m.to_le_bytes()));
    (0..3i64).for_each(|s| idx.extend((s * i64::from(m)).to_le_bytes()));
    [0i64, 3].iter().for_each(|d| idx.extend(d.to_le_bytes()));
    std::fs::write(dir.path().join("big.idx"), idx).unwrap();
    std::fs::File::create(dir.path().join("big.bin")).unwrap().set_len(3 * m as u64).unwrap();
    let prefix = dir.path().join("big");
    let o = loaderx(&[&"verify", &prefix]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not checked") && !text(&o).contains("damaged"), "{}", text(&o));
    let o = loaderx(&[&"verify", &prefix, &"--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["intact"].is_null() && v["error"].as_str().unwrap().contains("limit of this reader"), "{v}");
}

/// Look 108's kept low: a token file that does not open was named twice ("open X: open X: ...").
#[test]
fn a_token_file_that_does_not_open_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("other.idx.idx"), b"x").unwrap();
    for name in ["other.idx", "other.idx.idx"] {
        let path = dir.path().join(name);
        let o = loaderx(&[&"info", &path]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert_eq!(t.matches(&*path.to_string_lossy()).count(), 1, "{t}");
    }
}

/// Look 121, L121-2: `info` or `verify` of the user's own file (not yet converted) answered in
/// the engine's words, naming a Rust call and a Python argument: it says to convert it, or to give
/// --dtype.
#[test]
fn info_of_a_file_that_is_no_store_says_to_convert_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("features.npy");
    std::fs::write(&path, b"\x93NUMPY not converted").unwrap();
    for cmd in ["info", "verify"] {
        let o = loaderx(&[&cmd, &path]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert!(
            t.contains("convert it to a dataset first") && t.contains("--dtype") && !t.contains("open_raw"),
            "{t}"
        );
    }
}

/// Look 151: a Megatron `.idx` given a token type was read as headerless tokens and verified
/// intact (L151-1); `convert tokens --chunk` of a file with documents ignored it, and its help
/// listed part options it always refused (L151-2); `push` of a missing or `s3://` STORE said
/// "not a loaderx store" (L151-3).
#[test]
fn a_first_hours_token_and_push_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    megatron(&prefix);
    let idx = dir.path().join("corpus.idx");
    for args in [
        vec!["info", idx.to_str().unwrap(), "--dtype", "u16"],
        vec!["verify", idx.to_str().unwrap(), "--dtype", "u16"],
    ] {
        let o = loaderx(&args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>).collect::<Vec<_>>());
        assert!(!o.status.success() && text(&o).contains("Megatron dataset's index"), "{}", text(&o));
    }
    let o = loaderx(&[&"convert", &"tokens", &prefix, &dir.path().join("cc"), &"--chunk", &"10"]);
    assert!(
        !o.status.success() && text(&o).contains("--chunk cuts a file without documents"),
        "{}",
        text(&o)
    );
    assert!(!text(&loaderx(&[&"convert", &"tokens", &"--help"])).contains("--part"));
    if cfg!(feature = "remote") {
        let o = loaderx(&[&"push", &"s3://bucket/x", &dir.path().join("new")]);
        assert!(!o.status.success() && text(&o).contains("STORE is the local directory"), "{}", text(&o));
        let o = loaderx(&[&"push", &dir.path().join("missing"), &"s3://bucket/x"]);
        assert!(!o.status.success() && text(&o).contains("does not exist"), "{}", text(&o));
    }
}
