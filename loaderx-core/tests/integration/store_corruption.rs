//! Damaged stores and failed writes: what is not a store, a foreign byte order or version, a
//! truncated `meta.zr` or tail chunk, entries pointing outside their chunk, bad codec tags and
//! damaged frames as per-record errors (and `map_records`' errors), a full disk, in both formats.

use loaderx_core::{Codec, Error, Format, Store};

use crate::common::{FORMATS, check_record, entry_fields, opts, patch, record};
use crate::store::sample_store;

#[test]
fn open_rejects_a_directory_that_is_not_a_store() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Store::open(dir.path()), Err(Error::NotAStore { .. })));
    let path = sample_store(dir.path(), Codec::Raw, format);
    patch(&path.join("meta.zr"), 0, b"NOPE");
    match Store::open(&path) {
        Err(Error::NotAStore { path: p, .. }) => assert!(p.ends_with("meta.zr")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_rejects_other_byte_order_and_version() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    patch(&path.join("meta.zr"), 4, &1u16.swap_bytes().to_ne_bytes());
    assert!(matches!(Store::open(&path), Err(Error::ByteOrder { .. })));
    patch(&path.join("meta.zr"), 4, &9u16.to_ne_bytes());
    assert!(matches!(Store::open(&path), Err(Error::Version { found: 9, .. })));
}

#[test]
fn open_rejects_truncated_meta() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    let f = std::fs::OpenOptions::new().write(true).open(path.join("meta.zr")).unwrap();
    f.set_len(4096).unwrap();
    match Store::open(&path) {
        Err(Error::Corrupt { path: p, .. }) => assert!(p.ends_with("meta.zr")),
        other => panic!("{other:?}"),
    }
    f.set_len(10).unwrap();
    assert!(matches!(Store::open(&path), Err(Error::Corrupt { .. })));
}

/// A tail chunk cut short by outside damage: the records before the cut stay readable, those
/// past it are per-record errors naming the chunk, and a writer refuses the store (appending
/// after the hole would hide the loss).
#[test]
fn truncated_tail_chunk_opens_for_reading_with_per_record_errors() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::Raw, format);
        let ends: Vec<u64> = (0..200u64)
            .map(|i| {
                let e = entry_fields(&path, i);
                e.offset + e.stored
            })
            .collect();
        let cut = ends[99];
        let f = std::fs::OpenOptions::new().write(true).open(path.join("0.zr")).unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let store = Store::open(&path).unwrap();
        let intact: Vec<u32> = (0..200).filter(|&i| ends[i as usize] <= cut).collect();
        assert!(intact.len() >= 100);
        for (k, rec) in store.gather(&intact).unwrap().iter().enumerate() {
            assert_eq!(check_record(rec), Some(u64::from(intact[k])));
        }
        match store.gather(&[199]) {
            Err(Error::CorruptRecord { index: 199, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        let report = store.verify().unwrap();
        assert_eq!(report.bad.len(), 200 - intact.len());
        assert!(report.bad.iter().all(|(i, e)| ends[*i as usize] > cut
            && matches!(e, Error::CorruptRecord { path, .. } if path.ends_with("0.zr"))));
        match Store::open_rw(&path, opts(format)) {
            Err(Error::Corrupt { path: p, reason, .. }) => {
                assert!(p.ends_with("0.zr"));
                assert!(reason.contains("truncated"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            std::fs::metadata(path.join("0.zr")).unwrap().len(),
            cut,
            "the refused writer changed nothing"
        );
    }
}

/// Byte offset of table entry `idx` in meta.zr.
fn entry_offset(idx: u64) -> u64 {
    16 * (1 + idx)
}

#[test]
fn entry_pointing_outside_its_chunk_is_a_record_error() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    // offset field of entry 5 -> far past the end of 0.zr.
    patch(&path.join("meta.zr"), entry_offset(5), &0x7000_0000u32.to_ne_bytes());
    let store = Store::open(&path).unwrap();
    match store.gather(&[4, 5]) {
        Err(Error::CorruptRecord { index: 5, path: p, .. }) => assert!(p.ends_with("0.zr")),
        other => panic!("{other:?}"),
    }
    let report = store.verify().unwrap();
    assert_eq!(report.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![5]);
}

#[test]
fn bad_codec_tag_is_a_record_error() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Zstd, format);
    patch(&path.join("meta.zr"), entry_offset(7) + 14, &[9]);
    let store = Store::open(&path).unwrap();
    assert!(matches!(store.gather(&[7]), Err(Error::CorruptRecord { index: 7, .. })));
    assert!(store.gather(&[6, 8]).is_ok());
}

#[test]
fn corrupt_zstd_frame_is_a_record_error() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::Zstd, format);
        let store = Store::open(&path).unwrap();
        // Record 1 compresses (id % 3 != 0): flip a byte in the middle of its frame.
        let e = entry_fields(&path, 1);
        assert_eq!(e.codec, 1, "record 1 is zstd");
        let chunk = std::fs::read(path.join("0.zr")).unwrap();
        let at = e.offset + e.stored / 2;
        patch(&path.join("0.zr"), at, &[chunk[at as usize] ^ 0xA5]);
        match store.gather(&[1]) {
            Err(Error::CorruptRecord { index: 1, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        let many: Vec<u32> = (0..200).rev().collect();
        match store.map_records(&many, |_, b| Ok::<_, Error>(b.len())) {
            Err(Error::CorruptRecord { index: 1, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        assert_eq!(store.verify().unwrap().bad.len(), 1);
    }
}

#[test]
fn map_records_hands_over_records_in_place_and_stops_at_the_first_error() {
    #[derive(Debug)]
    enum Failure {
        Store(Error),
        Record(usize),
    }
    impl From<Error> for Failure {
        fn from(e: Error) -> Self {
            Failure::Store(e)
        }
    }
    for (format, codec) in FORMATS.into_iter().flat_map(|f| f.codecs().iter().map(move |&c| (f, c))) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(sample_store(dir.path(), codec, format)).unwrap();
        let order: Vec<u32> = (0..200).map(|k| (k * 7) % 200).collect();
        let ok = store.map_records(&order, |k, b| Ok::<_, Failure>((k, b.to_vec()))).unwrap();
        for (k, (pos, bytes)) in ok.into_iter().enumerate() {
            assert_eq!((pos, bytes), (k, record(u64::from(order[k]))), "{codec:?}");
        }
        // The callback's own error comes back as it is.
        match store.map_records(&order, |k, _| if k == 150 { Err(Failure::Record(k)) } else { Ok(k) }) {
            Err(Failure::Record(150)) => {}
            other => panic!("{other:?}"),
        }
        // The store's errors arrive converted.
        match store.map_records(&[3, 200], |_, b| Ok::<_, Failure>(b.len())) {
            Err(Failure::Store(Error::IndexOutOfRange { index: 200, .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(store.map_records(&[0u32; 0], |_, b| Ok::<_, Failure>(b.len())).unwrap().is_empty());
    }
}

#[test]
#[cfg(target_os = "linux")]
fn disk_full_commits_nothing() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, opts(format).chunk_capacity(8)).unwrap();
        store.append(&[b"first"], Codec::Raw).unwrap();
        // The next record rolls over to chunk 1, which is /dev/full: every write fails with ENOSPC.
        std::os::unix::fs::symlink("/dev/full", path.join("1.zr")).unwrap();
        match store.append(&[b"second!!"], Codec::Raw) {
            Err(Error::DiskFull { path: p, source }) => {
                assert!(p.ends_with("1.zr"), "{}", p.display());
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "the cause is kept");
            }
            other => panic!("expected DiskFull, got {other:?}"),
        }
        assert_eq!(store.len(), 1);
        // What the failed append made past the tail is gone with it.
        assert!(std::fs::symlink_metadata(path.join("1.zr")).is_err(), "chunk 1 removed");
        drop(store);
        let store = Store::open_rw(&path, opts(format).chunk_capacity(8)).unwrap();
        assert_eq!(store.gather(&[0]).unwrap(), vec![b"first".to_vec()]);
        store.append(&[b"second!!"], Codec::Raw).unwrap();
        assert_eq!(store.get(1).unwrap(), b"second!!");
    }
}

/// An entry copied over another's (look 68, L68-1): each entry sound in itself and each
/// record's checksum right, record 5 reading record 0's bytes. `verify` said "intact" and a
/// migration carried the alias into a new index with fresh checksums; now `verify` names both
/// records and every migration refuses, nothing changed. In each layout that keeps entries: v1, v2's
/// 32-byte entries and its 16-byte compact ones.
#[test]
fn an_entry_copied_over_another_is_damage_verify_reports_and_migration_refuses() {
    use loaderx_core::{Layout, StoreOptions};
    let none = |_: u64, _: u64| {};
    let layouts = [
        ("v1", opts(Format::V1), 16u64, 16),
        ("entries", opts(Format::V2), 64, 32),
        ("compact", StoreOptions::new().compact_entries(true), 64, 16),
    ];
    for (name, o, base, size) in layouts {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let store = Store::create(&path, o).unwrap();
        store.append(&(0..10u64).map(record).collect::<Vec<_>>(), Codec::Raw).unwrap();
        drop(store);
        let file = path.join(if name == "v1" { "meta.zr" } else { "index.zr" });
        let bytes = std::fs::read(&file).unwrap();
        let first = &bytes[base as usize..(base + size) as usize];
        patch(&file, base + 5 * size, first);
        // Both of the pair (look 70, L70-1: the index cannot say which reads the other's bytes;
        // naming only the later one, a user deleting it kept the wrong bytes as intact).
        let report = Store::open(&path).unwrap().verify().unwrap();
        let mut bad: Vec<(u64, String)> = report.bad.iter().map(|(i, e)| (*i, e.to_string())).collect();
        bad.sort();
        assert_eq!(bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 5], "{name}: {bad:?}");
        assert!(
            bad[0].1.contains("overlap record 5's") && bad[1].1.contains("overlap record 0's"),
            "{name}: {bad:?}"
        );
        let to = if name == "v1" { Format::V2 } else { Format::V1 };
        let e = Store::migrate(&path, to, &none).unwrap_err();
        assert!(matches!(&e, Error::CorruptRecord { index: 5, .. }), "{name}: {e}");
        if name != "v1" {
            let other = if name == "compact" { Layout::Entries } else { Layout::Compact };
            let e = Store::migrate_layout(&path, other, &none).unwrap_err();
            assert!(matches!(&e, Error::CorruptRecord { index: 5, .. }), "{name}: {e}");
        }
        assert_eq!(
            std::fs::read(&file).unwrap()[(base + 5 * size) as usize..][..size as usize],
            *first,
            "{name}"
        );
    }
}
