//! Zstd dictionaries of a store: a missing, damaged or truncated `dict.zr` as typed errors and
//! never wrong records, `zstd_dict` appends refused without a dictionary, and `dict.zr` as a
//! plain zstd dictionary shared with the `zstd` command-line tool, in both formats.

use std::path::Path;

use loaderx_core::{Codec, Error, Format, Store};

use crate::common::{FORMATS, check_record, entry_fields, opts, patch, record};
use crate::store::{create, sample_store};

#[test]
fn missing_dictionary_is_named() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        assert!(Store::open(&path).unwrap().has_dictionary());
        std::fs::remove_file(path.join("dict.zr")).unwrap();
        let store = Store::open(&path).unwrap();
        assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
        // Record 1 is text (id % 3 != 0), so it was stored against the dictionary.
        assert!(matches!(store.gather(&[1]), Err(Error::MissingDictionary { .. })));
    }
}

/// The thirty-fifth look's M2: with `dict.zr` gone, training a new dictionary is refused while
/// records compressed with the old one are in the store (a new one would replace the id the v2
/// header keeps and leave them undecodable, where restoring the file makes them whole); with
/// the file back they read as before.
#[test]
fn no_new_dictionary_while_records_need_the_lost_one() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        let saved = std::fs::read(path.join("dict.zr")).unwrap();
        std::fs::remove_file(path.join("dict.zr")).unwrap();
        let store = Store::open_rw(&path, opts(format)).unwrap();
        let samples: Vec<Vec<u8>> =
            (0..2000u32).map(|i| format!("other text {i} lorem ipsum {}", i % 13).into_bytes()).collect();
        let e = store.train_dictionary(&samples).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("dict.zr") && reason.contains("restore it")),
            "{format:?}: {e}"
        );
        assert!(!path.join("dict.zr").exists(), "{format:?}: nothing written");
        drop(store);
        std::fs::write(path.join("dict.zr"), saved).unwrap();
        let store = Store::open(&path).unwrap();
        for i in 0..200u64 {
            assert_eq!(store.get(i).unwrap().to_vec(), record(i), "{format:?}: record {i}");
        }
    }
}

/// The thirty-sixth look's N1: a `dict.zr` put in place by hand (as `append`'s docs invite) is
/// named in the v2 header by the writer that loads it, so that once lost it is not trained
/// over either; a store of raw records (compact, fixed stride) refuses a training with nothing
/// written.
#[test]
fn a_dictionary_put_in_place_by_hand_is_kept_as_the_stores() {
    let dir = tempfile::tempdir().unwrap();
    let trained = sample_store(dir.path(), Codec::ZstdDict, Format::V2);
    let path = dir.path().join("b");
    let store = Store::create(&path, opts(Format::V2)).unwrap();
    std::fs::copy(trained.join("dict.zr"), path.join("dict.zr")).unwrap();
    let records: Vec<Vec<u8>> = (0..100u64).map(record).collect();
    store.append(&records, Codec::ZstdDict).unwrap();
    drop(store);
    std::fs::remove_file(path.join("dict.zr")).unwrap();
    let store = Store::open_rw(&path, opts(Format::V2)).unwrap();
    let samples: Vec<Vec<u8>> =
        (0..2000u32).map(|i| format!("other text {i} lorem ipsum {}", i % 13).into_bytes()).collect();
    let e = store.train_dictionary(&samples).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { reason, .. } if reason.contains("header names dictionary")), "{e}");
    assert!(!path.join("dict.zr").exists(), "nothing written");
    drop(store);
    std::fs::copy(trained.join("dict.zr"), path.join("dict.zr")).unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.gather(&(0..100u64).collect::<Vec<_>>()).unwrap(), records);

    for (name, options) in
        [("compact", opts(Format::V2).compact_entries(true)), ("fixed", opts(Format::V2).fixed_stride(16))]
    {
        let raw = dir.path().join(name);
        let store = Store::create(&raw, options).unwrap();
        let e = store.train_dictionary(&samples).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("no dictionary")), "{name}: {e}");
        assert!(!raw.join("dict.zr").exists(), "{name}: nothing written");
    }
}

/// The thirty-seventh look's P2: a read-write open names only the dictionary the records were
/// compressed with (their frames say which): a foreign `dict.zr` in a store whose header names
/// none (as builds before the thirty-sixth look left hand-placed ones) is not named, and putting
/// the right file back makes the store whole.
#[test]
fn a_foreign_dictionary_is_not_named_for_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let ours = sample_store(dir.path(), Codec::ZstdDict, Format::V2);
    let good = std::fs::read(ours.join("dict.zr")).unwrap();
    let foreign = dir.path().join("other");
    let store = Store::create(&foreign, opts(Format::V2)).unwrap();
    let samples: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("<row n='{i}'><val>{}</val></row>", i * 31 % 977).into_bytes())
        .collect();
    assert!(store.train_dictionary(&samples).unwrap());
    drop(store);
    // The header naming no dictionary, the other store's dict.zr in place.
    let index = ours.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    let mut h = loaderx_core::format::v2::Header::parse(&bytes[..64], true).unwrap();
    h.dict_id = 0;
    bytes[..64].copy_from_slice(&h.encode());
    std::fs::write(&index, &bytes).unwrap();
    std::fs::copy(foreign.join("dict.zr"), ours.join("dict.zr")).unwrap();
    drop(Store::open_rw(&ours, opts(Format::V2)).unwrap());
    let h = loaderx_core::format::v2::Header::parse(&std::fs::read(&index).unwrap()[..64], true).unwrap();
    assert_eq!(h.dict_id, 0, "the foreign dictionary is not named");
    std::fs::write(ours.join("dict.zr"), good).unwrap();
    drop(Store::open_rw(&ours, opts(Format::V2)).unwrap());
    let store = Store::open(&ours).unwrap();
    for i in 0..200u64 {
        assert_eq!(store.get(i).unwrap().to_vec(), record(i), "record {i}");
    }
    let h = loaderx_core::format::v2::Header::parse(&std::fs::read(&index).unwrap()[..64], true).unwrap();
    assert_ne!(h.dict_id, 0, "the right dictionary is named once a writer loads it");
}

#[test]
fn damaged_dictionary_file_is_refused_on_open() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        patch(&path.join("dict.zr"), 1, &[0x00]);
        match Store::open(&path) {
            Err(Error::Corrupt { path: p, .. }) => assert!(p.ends_with("dict.zr")),
            other => panic!("{other:?}"),
        }
    }
}

/// A `dict.zr` truncated, or with its entropy tables damaged, makes zstd refuse to load it: a
/// `Corrupt` error naming the file on open, never a panic (issue 27: exit 101 in zstd-safe).
#[test]
fn a_truncated_or_damaged_dictionary_is_an_error_not_a_panic() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        let good = std::fs::read(path.join("dict.zr")).unwrap();
        let mut refused = 0;
        let mut cases: Vec<Vec<u8>> =
            [9usize, 12, 40, good.len() / 2].iter().map(|&n| good[..n].to_vec()).collect();
        for at in (8..good.len().min(300)).step_by(3) {
            let mut bad = good.clone();
            bad[at] ^= 0xA5;
            cases.push(bad);
        }
        for bad in cases {
            std::fs::write(path.join("dict.zr"), &bad).unwrap();
            match std::panic::catch_unwind(|| Store::open(&path).map(|s| s.gather(&[1u64, 2]).is_ok())) {
                Ok(Err(Error::Corrupt { path: p, .. })) => {
                    assert!(p.ends_with("dict.zr"), "{}", p.display());
                    refused += 1;
                }
                Ok(_) => {}
                Err(_) => panic!("{format}: a damaged dictionary of {} bytes panicked", bad.len()),
            }
        }
        assert!(refused >= 4, "{format}: only {refused} damaged dictionaries were refused");
    }
}

/// `dict.zr` is the bare dictionary, so damage inside it is caught by the frames it decodes
/// (each names the dictionary ID and carries a checksum of its content): a record either comes
/// back intact or is an error, never wrong bytes.
#[test]
fn damage_inside_the_dictionary_never_hands_out_wrong_records() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        let len = std::fs::metadata(path.join("dict.zr")).unwrap().len();
        let at = len - len / 3;
        let b = std::fs::read(path.join("dict.zr")).unwrap()[at as usize];
        patch(&path.join("dict.zr"), at, &[b ^ 0xFF]);
        let store = Store::open(&path).unwrap();
        let mut failed = 0;
        for i in 0..200u64 {
            match store.get(i) {
                Ok(rec) => assert_eq!(check_record(&rec), Some(i)),
                Err(Error::CorruptRecord { index, .. }) => {
                    assert_eq!(index, i);
                    failed += 1;
                }
                Err(other) => panic!("{other:?}"),
            }
        }
        assert!(failed > 0, "the damaged dictionary went unnoticed");
        assert_eq!(store.verify().unwrap().bad.len(), failed);
    }
}

/// `zstd_dict` needs the store's dictionary: without one the append is an error and nothing is
/// written (no silent plain-zstd fallback, no implicit training).
#[test]
fn zstd_dict_append_without_a_dictionary_is_refused_whole() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        let recs: Vec<Vec<u8>> = (0..3000).map(record).collect();
        for batch in [&recs[..0], &recs[..5], &recs[..]] {
            match store.append(batch, Codec::ZstdDict) {
                // The caller's order of calls, not a damaged store (look 92, F1: Python's
                // CorruptError).
                Err(Error::InvalidArgument(m)) => {
                    assert!(
                        m.contains(&dir.path().join("s").display().to_string()) && m.contains("train"),
                        "{m}"
                    )
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(store.len(), 0);
        assert!(!store.has_dictionary(), "no dictionary was trained behind the caller's back");
        assert!(!dir.path().join("s/dict.zr").exists());
        assert!(store.train_dictionary(&recs).unwrap());
        store.append(&recs, Codec::ZstdDict).unwrap();
        assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
    }
}

/// The `zstd` command-line tool, or `None` (a failure where CI asks for it).
fn zstd_cli() -> Option<&'static str> {
    let found =
        std::process::Command::new("zstd").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("LOADERX_REQUIRE_ZSTD_CLI").is_some() {
        panic!("the zstd command-line tool is required (LOADERX_REQUIRE_ZSTD_CLI) but not on PATH");
    }
    if !found {
        eprintln!("skipped: no zstd command-line tool on PATH");
    }
    found.then_some("zstd")
}

/// The stored bytes (frame) of record `idx`, read through the documented layout.
fn stored_frame(path: &Path, idx: u64) -> (u8, Vec<u8>) {
    let e = entry_fields(path, idx);
    let data = std::fs::read(path.join(format!("{}.zr", e.chunk))).unwrap();
    (e.codec, data[e.offset as usize..(e.offset + e.stored) as usize].to_vec())
}

/// Decodes `frame` with `zstd -d -D dict`.
fn zstd_cli_decode(zstd: &str, dir: &Path, dict: &Path, frame: &[u8]) -> Vec<u8> {
    let input = dir.join("frame.zst");
    let output = dir.join("frame.out");
    std::fs::write(&input, frame).unwrap();
    let st = std::process::Command::new(zstd)
        .args(["-q", "-f", "-d", "-D"])
        .arg(dict)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
        .unwrap();
    assert!(st.success(), "zstd -d -D failed");
    std::fs::read(output).unwrap()
}

/// `dict.zr` is the bare zstd dictionary: one trained by `zstd --train` works as a store's
/// dictionary, `zstd -d -D dict.zr` decodes loaderx's `zstd_dict` records, and stores written
/// with the earlier headed `dict.zr` still read.
#[test]
fn dict_zr_interoperates_with_the_zstd_command_line_tool() {
    let format = Format::V1;
    let Some(zstd) = zstd_cli() else { return };
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = (0..400).map(record).collect();
    let text: Vec<u64> = (0..400).filter(|i| i % 3 != 0).collect();

    // A dictionary trained by the command-line tool, dropped into a fresh store.
    let samples = dir.path().join("samples");
    std::fs::create_dir(&samples).unwrap();
    for &i in &text {
        std::fs::write(samples.join(format!("{i}")), &recs[i as usize]).unwrap();
    }
    let cli_dict = dir.path().join("cli.dict");
    let st = std::process::Command::new(zstd)
        .args(["-q", "-f", "--train", "--maxdict=16384", "-r"])
        .arg(&samples)
        .arg("-o")
        .arg(&cli_dict)
        .status()
        .unwrap();
    assert!(st.success(), "zstd --train failed");
    let path = dir.path().join("cli");
    drop(Store::create(&path, opts(format)).unwrap());
    std::fs::copy(&cli_dict, path.join("dict.zr")).unwrap();
    let store = Store::open_rw(&path, opts(format)).unwrap();
    assert_eq!(store.dictionary(), Some(&std::fs::read(&cli_dict).unwrap()[..]));
    store.append(&recs, Codec::ZstdDict).unwrap();
    assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
    assert_eq!(store.gather(&(0..400).collect::<Vec<_>>()).unwrap(), recs);
    let (tag, frame) = stored_frame(&path, 1);
    assert_eq!(tag, 2, "record 1 is a zstd_dict frame");
    assert_eq!(zstd_cli_decode(zstd, dir.path(), &path.join("dict.zr"), &frame), recs[1]);
    drop(store);

    // A dictionary trained by loaderx is a plain zstd dictionary file too.
    let path = dir.path().join("ours");
    let store = Store::create(&path, opts(format)).unwrap();
    assert!(store.train_dictionary(&recs).unwrap());
    store.append(&recs, Codec::ZstdDict).unwrap();
    let dict = std::fs::read(path.join("dict.zr")).unwrap();
    assert_eq!(dict[..4], 0xEC30_A437u32.to_le_bytes(), "dict.zr starts with the zstd dictionary magic");
    assert_eq!(store.dictionary(), Some(&dict[..]));
    let (tag, frame) = stored_frame(&path, 2);
    assert_eq!(tag, 2);
    assert_eq!(zstd_cli_decode(zstd, dir.path(), &path.join("dict.zr"), &frame), recs[2]);
    drop(store);

    // The headed dict.zr of earlier builds still opens and reads identically.
    std::fs::write(path.join("dict.zr"), loaderx_core::format::dict::encode_legacy(&dict)).unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.dictionary(), Some(&dict[..]));
    assert_eq!(store.gather(&(0..400).collect::<Vec<_>>()).unwrap(), recs);
}
