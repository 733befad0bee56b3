// Every malformed store the CLI can be pointed at: each command exits 1 with one line on stderr
// naming the file (never a panic, never a signal), and leaves the store byte-for-byte unchanged.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use loaderx_core::{Codec, DType, DatasetWriter, Format, WriteOptions};

/// A dense u32 dataset of 300 records (compressible, so zstd frames exist), in a v1 store (the
/// cases patch `meta.zr`).
fn dataset(dir: &Path, codec: Codec) -> PathBuf {
    let out = dir.join("d");
    let opts = WriteOptions::new().codec(codec).format(Format::V1);
    let mut w = DatasetWriter::dense::<u32>(&out, vec![64], opts).unwrap();
    w.append(&(0..300 * 64).map(|i| (i / 64) as u32).collect::<Vec<u32>>()).unwrap();
    w.finish().unwrap();
    out
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

fn entry(idx: u64) -> u64 {
    16 * (1 + idx)
}

/// Length and the first 4 MiB of every file but the writer's lock file.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().is_some_and(|n| n == "write.lock") {
            continue;
        }
        let len = std::fs::metadata(&p).unwrap().len();
        let mut head = vec![0u8; len.min(4 << 20) as usize];
        std::fs::File::open(&p).unwrap().read_exact(&mut head).unwrap();
        out.insert(p, (len, head));
    }
    out
}

type Damage = fn(&Path) -> PathBuf;

fn cases() -> Vec<(&'static str, Damage, &'static str)> {
    vec![
        (
            "wrong magic",
            |d| {
                let s = dataset(d, Codec::Raw);
                patch(&s.join("meta.zr"), 0, b"NOPE");
                s
            },
            "meta.zr",
        ),
        (
            "other byte order",
            |d| {
                let s = dataset(d, Codec::Raw);
                patch(&s.join("meta.zr"), 4, &1u16.swap_bytes().to_ne_bytes());
                s
            },
            "byte order",
        ),
        (
            "other version",
            |d| {
                let s = dataset(d, Codec::Raw);
                patch(&s.join("meta.zr"), 4, &7u16.to_ne_bytes());
                s
            },
            "version 7",
        ),
        (
            "truncated meta",
            |d| {
                let s = dataset(d, Codec::Raw);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(s.join("meta.zr"))
                    .unwrap()
                    .set_len(4096)
                    .unwrap();
                s
            },
            "meta.zr",
        ),
        (
            "truncated chunk",
            |d| {
                let s = dataset(d, Codec::Raw);
                std::fs::OpenOptions::new().write(true).open(s.join("0.zr")).unwrap().set_len(100).unwrap();
                s
            },
            "0.zr",
        ),
        (
            "bad schema",
            |d| {
                let s = dataset(d, Codec::Raw);
                std::fs::write(s.join("schema.msgpack"), b"\xc1 not msgpack").unwrap();
                s
            },
            "schema.msgpack",
        ),
    ]
}

#[test]
fn every_command_refuses_a_damaged_store_cleanly_and_changes_nothing() {
    for (name, damage, needle) in cases() {
        for cmd in [&["info"][..], &["stats"], &["verify"], &["compact"], &["export", "OUT"]] {
            // stats, verify and compact work on the store beneath; only info and export read the
            // schema.
            if name == "bad schema" && !matches!(cmd[0], "info" | "export") {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let store = damage(dir.path());
            let before = snapshot(&store);
            let mut args: Vec<String> = vec![cmd[0].to_string(), store.display().to_string()];
            if cmd[0] == "export" {
                args.push(dir.path().join("out.npy").display().to_string());
            }
            let o = Command::new(env!("CARGO_BIN_EXE_loaderx")).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            let what = format!("{name}: loaderx {}", args.join(" "));
            // A truncated tail chunk loses only the records past the cut: the store still opens
            // for reading (info, stats), verify lists the lost records, and a writer refuses it.
            if name == "truncated chunk" && matches!(cmd[0], "info" | "stats" | "verify") {
                let out = String::from_utf8_lossy(&o.stdout);
                let code = if cmd[0] == "verify" { 1 } else { 0 };
                assert_eq!(o.status.code(), Some(code), "{what}: stderr {err}");
                assert!(err.is_empty(), "{what}: {err}");
                if cmd[0] == "verify" {
                    assert!(out.contains("records damaged") && out.contains(needle), "{what}: {out}");
                }
                assert!(snapshot(&store) == before, "{what}: the store changed");
                continue;
            }
            assert_eq!(o.status.code(), Some(1), "{what}: exit {:?} (a signal?), stderr {err}", o.status);
            assert!(!err.contains("panicked"), "{what}: {err}");
            assert_eq!(err.lines().count(), 1, "{what}: stderr is not one line: {err}");
            assert!(err.contains(needle), "{what}: stderr {err:?} does not name {needle:?}");
            assert!(snapshot(&store) == before, "{what}: the store changed");
            assert!(!dir.path().join("out.npy").exists(), "{what}: export left a file");
        }
    }
}

#[test]
fn verify_names_every_bad_record_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(dir.path(), Codec::Zstd);
    // Record 5: offset past the chunk's end; record 9: unknown codec tag.
    patch(&s.join("meta.zr"), entry(5), &0x7000_0000u32.to_ne_bytes());
    patch(&s.join("meta.zr"), entry(9) + 14, &[9]);
    let before = snapshot(&s);
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("verify").arg(&s).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("record 5") || text.contains(" 5:") || text.contains("index 5"), "{text}");
    assert!(text.contains("record 9") || text.contains(" 9:") || text.contains("index 9"), "{text}");
    assert!(snapshot(&s) == before);
}

#[test]
fn malformed_inputs_to_convert_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad_npy = dir.path().join("bad.npy");
    let mut npy = loaderx_core::convert::NpyHeader::encode(DType::F32, &[10, 4]).unwrap();
    npy.extend_from_slice(&[0u8; 12]); // 160 bytes promised, 12 given
    std::fs::write(&bad_npy, npy).unwrap();
    let bad_idx = dir.path().join("bad-idx3-ubyte");
    std::fs::write(&bad_idx, [0u8, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28]).unwrap();
    let bad_st = dir.path().join("bad.safetensors");
    std::fs::write(&bad_st, b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header").unwrap();
    for (format, input) in [("npy", &bad_npy), ("idx", &bad_idx), ("safetensors", &bad_st)] {
        let out = dir.path().join(format!("out-{format}"));
        let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", format])
            .arg(input)
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {err}");
        assert_eq!(err.lines().count(), 1, "{format}: {err}");
        assert!(err.contains(&input.display().to_string()), "{format}: {err}");
        assert!(!out.exists(), "{format}: left {}", out.display());
        let mut partial = out.clone().into_os_string();
        partial.push(".partial");
        assert!(!PathBuf::from(partial).exists(), "{format}: left a staging directory");
    }
}

/// A badly damaged store: `verify` lists the first 20 damaged records and counts the rest
/// (`--all` lists every one, `--json` gives tools the same in one object).
#[test]
fn verify_lists_the_first_damaged_records_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(dir.path(), Codec::Raw);
    // Every record but the first two points past the end of its chunk.
    for i in 2..300 {
        patch(&s.join("meta.zr"), entry(i), &0x7000_0000u32.to_ne_bytes());
    }
    let run = |args: &[&str]| {
        let o =
            Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("verify").args(args).arg(&s).output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8(o.stdout).unwrap()
    };
    let text = run(&[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 20 + 1, "{text}");
    assert!(lines[0].ends_with(": 298 of 300 records damaged"), "{}", lines[0]);
    assert!(lines[1].starts_with("  record 2: "), "{}", lines[1]);
    assert!(lines[20].starts_with("  record 21: "), "{}", lines[20]);
    assert_eq!(lines[21], "  ... and 278 more (--all lists every one)");

    let all = run(&["--all"]);
    assert_eq!(all.lines().count(), 1 + 298);
    assert!(all.lines().last().unwrap().starts_with("  record 299: "));

    let json: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    assert_eq!(json["checked"], 300);
    assert_eq!(json["damaged"], 298);
    assert_eq!(json["listed"], 20);
    assert_eq!(json["records"][0]["index"], 2);
    assert!(json["records"][0]["error"].as_str().unwrap().contains("record 2"));
    let json: serde_json::Value = serde_json::from_str(&run(&["--json", "--all"])).unwrap();
    assert_eq!(json["records"].as_array().unwrap().len(), 298);
}

#[test]
fn compact_leaves_no_lock_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = dataset(dir.path(), Codec::Zstd);
    assert!(!s.join("write.lock").exists(), "a finished conversion leaves no lock file");
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("compact").arg(&s).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!s.join("write.lock").exists());
}

/// `convert jsonl /dev/stdin` with a pipe as stdin (issue 27, 3.13) used to succeed with 0
/// records: the input was never read. It fails with one line naming the path, writing nothing.
#[cfg(target_os = "linux")]
#[test]
fn convert_refuses_a_pipe_as_input_instead_of_reading_it_as_empty() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    for format in ["jsonl", "npy"] {
        let out = dir.path().join(format!("out-{format}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", format, "/dev/stdin"])
            .arg(&out)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // The pipe holds data and stays open: an empty result would be a lie about it.
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"{\"a\": 1}\n{\"a\": 2}\n");
        let o = child.wait_with_output().unwrap();
        drop(stdin);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {err}");
        assert_eq!(err.lines().count(), 1, "{format}: {err}");
        assert!(err.contains("/dev/stdin") && err.contains("not a regular file"), "{format}: {err}");
        assert!(!out.exists(), "{format}: wrote {}", out.display());
    }
}

/// `convert images DIR out` with a bare relative OUT (issue 27, 3.9) failed after writing
/// everything: the parent of `out` is "", and syncing "" fails.
#[cfg(feature = "images")]
#[test]
fn convert_images_into_a_bare_relative_out_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    // A 2x2 red PNG (as in ingest.rs).
    const RED_PNG: [u8; 73] = [
        137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0,
        253, 212, 154, 115, 0, 0, 0, 16, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 68, 12, 16, 10, 0,
        31, 238, 3, 253, 139, 95, 20, 212, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
    ];
    std::fs::create_dir_all(dir.path().join("in/cat")).unwrap();
    std::fs::write(dir.path().join("in/cat/a.png"), RED_PNG).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .current_dir(dir.path())
        .args(["convert", "images", "in", "out", "--size", "4x4"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("out/images").is_dir() && dir.path().join("out/classes.txt").is_file());
}

/// A conversion refused because of a third-party error (the safetensors parser's, the Parquet
/// reader's) prints each part of the chain once: the cause's text is not pasted into the
/// message that carries it.
#[test]
fn convert_prints_each_part_of_the_error_chain_once() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("bad.safetensors");
    std::fs::write(&st, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all").unwrap();
    let mut cases = vec![("safetensors", st.clone())];
    if cfg!(feature = "parquet") {
        let pq = dir.path().join("bad.parquet");
        std::fs::write(&pq, b"PAR1 these bytes are no Parquet footer PAR1").unwrap();
        cases.push(("parquet", pq));
    }
    for (format, input) in cases {
        let out = dir.path().join(format!("out-{format}"));
        let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", format])
            .arg(&input)
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {err}");
        assert_eq!(err.lines().count(), 1, "{format}: {err}");
        // The same conversion in this process: its error's chain, part by part.
        let e = match format {
            "safetensors" => loaderx_core::convert::safetensors(&input, &out, WriteOptions::new()).map(drop),
            #[cfg(feature = "parquet")]
            _ => loaderx_core::convert::parquet(
                &[&input],
                &out,
                &[],
                loaderx_core::convert::Nulls::Error,
                WriteOptions::new(),
            )
            .map(drop),
            #[cfg(not(feature = "parquet"))]
            _ => unreachable!(),
        }
        .unwrap_err();
        let mut parts = vec![e.to_string()];
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            parts.push(c.to_string());
            cause = c.source();
        }
        assert!(parts.len() >= 2, "{format}: the parser's error is the source of {e}");
        assert!(!parts[0].contains(&parts[1]), "{format}: the cause is pasted into {e}");
        for part in &parts {
            assert_eq!(err.matches(part.as_str()).count(), 1, "{format}: {part:?} is not once in {err}");
        }
    }
}

/// A record damaged two ways at once (look 74, L74-1: a dense item lengthened over its
/// neighbour, its checksum recomputed: its bytes overlap record 1's and its length is not the
/// schema's) counts once, listed with both reasons; its neighbour is named too.
#[test]
fn verify_counts_a_record_damaged_two_ways_once() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("x.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1), }".to_string();
    header.push_str(&" ".repeat(63 - (10 + header.len()) % 64));
    header.push('\n');
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend([7u8, 8, 9, 10]);
    std::fs::write(&npy, bytes).unwrap();
    let s = dir.path().join("s");
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args).output().unwrap();
    assert!(
        run(&["convert", "npy", "--codec", "raw", npy.to_str().unwrap(), s.to_str().unwrap()])
            .status
            .success()
    );
    assert!(run(&["migrate", "--to", "compact", s.to_str().unwrap()]).status.success());
    // Entry 0 (16 bytes at 64): its stored length (bytes 8..12) 2, its crc32c (12..16) of the
    // two bytes it now covers.
    let index = s.join("index.zr");
    let mut idx = std::fs::read(&index).unwrap();
    idx[64 + 8..64 + 12].copy_from_slice(&2u32.to_le_bytes());
    idx[64 + 12..64 + 16].copy_from_slice(&crc32c(&[7, 8]).to_le_bytes());
    std::fs::write(&index, idx).unwrap();
    let o = run(&["verify", "--json", "--all", s.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["damaged"], 2, "{json}");
    let mut listed: Vec<u64> =
        json["records"].as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect();
    listed.sort();
    assert_eq!(listed, [0, 0, 1], "{json}");
}

/// CRC-32C (Castagnoli), bit by bit: the record checksum v2 keeps.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}
