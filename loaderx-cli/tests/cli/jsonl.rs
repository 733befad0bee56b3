// `loaderx convert jsonl`: lines in = records out, in order, across files and thread counts.

use std::path::Path;
use std::process::Command;

use loaderx_core::Store;

fn lines_of(text: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if text.last() == Some(&b'\n') || text.is_empty() {
        v.pop();
    }
    v
}

fn write_big(path: &Path) -> Vec<u8> {
    // ~17 MiB of lines of 0..3000 bytes: more than two planned ranges.
    let mut x = 0x9E37_79B9u64;
    let mut text = Vec::with_capacity(17 << 20);
    let mut i = 0u64;
    while text.len() < 17 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 3000) as usize;
        text.extend_from_slice(format!("{{\"id\":{i},\"p\":\"").as_bytes());
        text.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
        text.extend_from_slice(b"\"}\n");
        i += 1;
    }
    std::fs::write(path, &text).unwrap();
    text
}

#[test]
fn jsonl_round_trips_in_order_across_files_and_threads() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    let big_text = write_big(&big);
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let tail = dir.path().join("tail.jsonl");
    std::fs::write(&tail, b"first\n\nlast without newline").unwrap();
    let mut want: Vec<Vec<u8>> = Vec::new();
    for t in [&big_text[..], b"", b"first\n\nlast without newline", &big_text[..]] {
        want.extend(lines_of(t).into_iter().map(<[u8]>::to_vec));
    }
    for (threads, codec) in [("1", "raw"), ("3", "zstd")] {
        let out = dir.path().join(format!("out{threads}"));
        let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .env("RAYON_NUM_THREADS", threads)
            .args(["convert", "jsonl"])
            .args([&big, &empty, &tail, &big])
            .arg(&out)
            .args(["--codec", codec])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let summary = String::from_utf8_lossy(&o.stdout);
        assert!(summary.contains(&format!("{} records", want.len())), "{summary}");
        let store = Store::open(&out).unwrap();
        assert_eq!(store.len() as usize, want.len());
        let got = store.gather(&(0..store.len()).collect::<Vec<_>>()).unwrap();
        assert!(got == want, "records differ from the lines with {threads} threads");
    }
}

#[test]
fn jsonl_missing_input_is_one_clear_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "jsonl"])
        .arg(dir.path().join("nope.jsonl"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nope.jsonl"), "{err}");
    assert!(!out.exists());
}

/// `--part K --parts N`: N separate runs, in order, hold exactly the records of one run over the
/// whole input; a part out of range, or `--part` without `--parts`, is an error writing nothing.
#[test]
fn jsonl_parts_converted_separately_are_the_whole_input() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    let big_text = write_big(&big);
    let tail = dir.path().join("tail.jsonl");
    std::fs::write(&tail, b"first\n\nlast without newline").unwrap();
    let mut want: Vec<Vec<u8>> = Vec::new();
    for t in [&big_text[..], b"first\n\nlast without newline"] {
        want.extend(lines_of(t).into_iter().map(<[u8]>::to_vec));
    }
    let convert = |out: &Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", "jsonl"])
            .args([&big, &tail])
            .arg(out)
            .args(["--codec", "raw"])
            .args(extra)
            .output()
            .unwrap()
    };
    let parts = 4;
    let mut got: Vec<Vec<u8>> = Vec::new();
    for k in 0..parts {
        let out = dir.path().join(format!("part-{k}"));
        let o = convert(&out, &["--part", &k.to_string(), "--parts", &parts.to_string()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let store = Store::open(&out).unwrap();
        assert!(!store.is_empty(), "part {k} of a 17 MiB input holds records");
        got.extend(store.gather(&(0..store.len()).collect::<Vec<_>>()).unwrap());
    }
    assert!(got == want, "the parts in order are the whole input, record for record");
    let set = dir.path().join("set");
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .arg("stitch")
        .args((0..parts).map(|k| dir.path().join(format!("part-{k}"))))
        .arg(&set)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{} records", want.len())));
    // `info` on the set: its schema, length and parts (it once said "not a loaderx store").
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("info").arg(&set).output().unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.contains("a store set of 4 parts") && t.contains(&format!("length:  {}", want.len())), "{t}");
    assert_eq!(t.matches("part:    ").count(), 4, "{t}");
    let set = loaderx_core::RaggedSource::open(&set).unwrap();
    let all: Vec<u32> = (0..want.len() as u32).collect();
    let batch = set.get_batch(&all).unwrap();
    for (k, w) in want.iter().enumerate() {
        assert_eq!(batch.record::<u8>(k).unwrap(), &w[..], "record {k} of the set");
    }
    for bad in [&["--part", "4", "--parts", "4"][..], &["--part", "0"][..]] {
        let out = dir.path().join("bad");
        let o = convert(&out, bad);
        assert!(!o.status.success(), "{bad:?}");
        assert!(!out.exists(), "{bad:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("part"), "{err}");
    }
}
