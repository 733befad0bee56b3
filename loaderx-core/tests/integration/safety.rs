//! Data safety, round three: what a routine command or a lying file did to a store. Migration and
//! repair never certify damage, a creator never removes a live writer's store, index fields are
//! checked before they size anything, a set never reads one store twice, and overwriting replaces
//! only a loaderx dataset.

use std::path::Path;

use loaderx_core::format::v2::{self, Entry};
use loaderx_core::format::{Format, Journal};
use loaderx_core::{Codec, DatasetWriter, Error, Layout, Store, StoreOptions, WriteOptions};

use crate::common::snapshot;

/// Records of 64 bytes, record `i` filled with `i`: in every layout record `i` lies at byte
/// `64 i` of chunk 0.
fn records(n: u8) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i; 64]).collect()
}

fn store(dir: &Path, opts: StoreOptions, n: u8) {
    let s = Store::create(dir, opts).unwrap();
    s.append(&records(n), Codec::Raw).unwrap();
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

fn nothing(_: u64, _: u64) {}

#[derive(Debug, Clone, Copy)]
enum To {
    Format(Format),
    Layout(Layout),
}

fn migrate(dir: &Path, to: To) -> loaderx_core::Result<loaderx_core::MigrateReport> {
    match to {
        To::Format(f) => Store::migrate(dir, f, &nothing),
        To::Layout(l) => Store::migrate_layout(dir, l, &nothing),
    }
}

/// One flipped byte in record 37, which `verify` reports, is not certified by a migration in
/// any direction: refused naming the record, every file as it was, the damage still reported.
#[test]
fn migration_refuses_a_damaged_store_in_every_direction_and_changes_nothing() {
    let fixed = To::Layout(Layout::Fixed { record_size: 0, block_records: 0 });
    let (entries, compact) = (To::Layout(Layout::Entries), To::Layout(Layout::Compact));
    let v1 = To::Format(Format::V1);
    let sources: [(&str, StoreOptions, Vec<To>); 4] = [
        ("entries", StoreOptions::new(), vec![compact, fixed, v1]),
        ("compact", StoreOptions::new().compact_entries(true), vec![entries, fixed, v1]),
        ("fixed", StoreOptions::new().fixed_stride(64), vec![entries, compact, v1]),
        ("v1", StoreOptions::new().format(Format::V1), vec![]),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, opts, targets) in sources {
        for to in targets {
            let s = dir.path().join(format!("{name}-{to:?}"));
            store(&s, opts.clone(), 100);
            flip(&s.join("0.zr"), 64 * 37 + 5);
            assert!(!Store::open(&s).unwrap().verify().unwrap().is_ok(), "{name}: verify sees it");
            let before = snapshot(&s);
            let Err(e) = migrate(&s, to) else { panic!("{name} → {to:?} certified a damaged record") };
            let Error::CorruptRecord { index, ref path, .. } = e else { panic!("{name} → {to:?}: {e}") };
            // A fixed-stride store names the first record of the damaged block (64 records).
            let named = if name == "fixed" { index / 64 == 37 / 64 } else { index == 37 };
            assert!(named && path.ends_with("0.zr"), "{name} → {to:?}: {e}");
            assert!(e.to_string().contains("nothing changed"), "{e}");
            assert_eq!(snapshot(&s), before, "{name} → {to:?} changed a file");
            let report = Store::open(&s).unwrap().verify().unwrap();
            assert!(report.bad.iter().any(|(i, _)| *i == 37), "{name} → {to:?}: {report:?}");
        }
    }
}

/// The manifest's checksums are sealed too: a chunk that no longer matches it stops a
/// migration, and a migration between v2 layouts keeps the manifest it had.
#[test]
fn migration_refuses_a_manifest_mismatch_and_keeps_the_manifest_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new(), 50);
    let manifest = std::fs::read(s.join("manifest.zr")).unwrap();
    Store::migrate_layout(&s, Layout::Compact, &nothing).unwrap();
    assert_eq!(std::fs::read(s.join("manifest.zr")).unwrap(), manifest, "carried over, not recomputed");
    // A manifest that decodes, with chunk 0's checksum not the chunk's.
    let mut m = v2::Manifest::decode(&manifest).unwrap();
    m.chunks[0].crc ^= 1;
    std::fs::write(s.join("manifest.zr"), m.encode()).unwrap();
    assert!(!Store::open(&s).unwrap().verify().unwrap().is_ok(), "verify sees it");
    let before = snapshot(&s);
    let e = Store::migrate_layout(&s, Layout::Entries, &nothing).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert_eq!(snapshot(&s), before);
}

/// A writer's open repairs the open block's checksum only when a killed commit summed records
/// still past the frontier; a block damaged in place keeps its checksum, and `verify` its error.
#[test]
fn a_writers_open_does_not_reseal_a_damaged_open_block() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new().fixed_stride(64), 10);
    flip(&s.join("0.zr"), 64 * 3 + 1);
    drop(Store::open_rw(&s, StoreOptions::new()).unwrap());
    let report = Store::open(&s).unwrap().verify().unwrap();
    assert!(report.bad.iter().any(|(i, _)| *i == 3), "{report:?}");
}

/// A delete in a fixed-stride store sums the blocks it moves records into again: a damaged
/// block among them refuses the delete with nothing changed.
#[test]
fn a_fixed_stride_delete_refuses_to_sum_a_damaged_block_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new().fixed_stride(64), 200);
    flip(&s.join("0.zr"), 64 * 10 + 1);
    let before = snapshot(&s);
    let mut w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    let e = w.delete(&[20u64]).unwrap_err();
    assert!(matches!(e, Error::CorruptRecord { index: 20, .. }), "{e}");
    assert!(e.to_string().contains("nothing changed"), "{e}");
    assert_eq!(w.len(), 200);
    drop(w);
    let mut after = snapshot(&s);
    after.remove("write.lock");
    assert_eq!(after, before);
    // A block that is intact is deleted from as before.
    let mut w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    w.delete(&[150u64]).unwrap();
    assert_eq!(w.get(150).unwrap(), vec![199u8; 64]);
}

/// A creator, with or without overwrite, is `Locked` while a writer has the store open: the
/// writer's records stay, and so does what it appends next.
#[test]
fn create_never_removes_a_live_writers_store() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let w = Store::create(&s, StoreOptions::new()).unwrap();
    w.append(&records(5), Codec::Raw).unwrap();
    for overwrite in [true, false] {
        let e = Store::create(&s, StoreOptions::new().overwrite(overwrite)).unwrap_err();
        assert!(matches!(e, Error::Locked { .. }), "overwrite {overwrite}: {e}");
    }
    w.append(&records(7), Codec::Raw).unwrap();
    drop(w);
    let r = Store::open(&s).unwrap();
    assert_eq!(r.len(), 12);
    assert_eq!(r.get(4).unwrap(), vec![4u8; 64]);
    assert!(r.verify().unwrap().is_ok());
    drop(r);
    // Closed, it is overwritten as before.
    assert_eq!(Store::create(&s, StoreOptions::new().overwrite(true)).unwrap().len(), 0);
}

/// Of two creators racing on one directory, one wins and the other is `Locked`; the winner's
/// store is whole.
#[test]
fn of_two_racing_creators_one_wins_and_the_other_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let s = dir.path().join(format!("s{round}"));
        let start = std::sync::Barrier::new(2);
        let done = std::sync::Barrier::new(2);
        let results: Vec<Result<u64, Error>> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..2u8)
                .map(|k| {
                    let (s, start, done) = (&s, &start, &done);
                    scope.spawn(move || {
                        start.wait();
                        let r = Store::create(s, StoreOptions::new().overwrite(true));
                        let r = r.and_then(|w| {
                            w.append(&[vec![k; 8]], Codec::Raw)?;
                            Ok(w)
                        });
                        // Held until both have tried.
                        done.wait();
                        r.map(|w| w.len())
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
        assert!(results.iter().any(|r| matches!(r, Err(Error::Locked { .. }))), "{results:?}");
        let r = Store::open(&s).unwrap();
        assert_eq!(r.len(), 1);
        assert!(r.verify().unwrap().is_ok());
    }
}

/// An entry naming chunk 2^32 - 1 (an empty file of that name beside it) is a damaged record,
/// never a cache of 2^32 slots: reads and verify name the record.
#[test]
fn an_entry_naming_the_last_chunk_id_is_a_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new(), 10);
    let index = s.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    let at = v2::HEADER_SIZE + v2::ENTRY_SIZE * 4;
    let e = Entry::decode_unchecked(bytes[at..at + v2::ENTRY_SIZE].try_into().unwrap());
    bytes[at..at + v2::ENTRY_SIZE].copy_from_slice(&Entry { chunk: u32::MAX, ..e }.encode());
    std::fs::write(&index, bytes).unwrap();
    std::fs::write(s.join(format!("{}.zr", u32::MAX)), b"").unwrap();
    let r = Store::open(&s).unwrap();
    for e in [r.get(4).unwrap_err(), r.gather(&[3u64, 4]).unwrap_err()] {
        assert!(matches!(e, Error::CorruptRecord { index: 4, .. }), "{e}");
    }
    assert_eq!(r.get(5).unwrap(), vec![5u8; 64]);
    let report = r.verify().unwrap();
    assert_eq!(report.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [4]);
}

/// A fixed-stride header whose records per block break FORMAT.md's rule does not open: a
/// 68-byte index claiming 2^32 - 1 records under one block checksum is refused at once.
#[test]
fn a_fixed_stride_header_with_a_lying_block_size_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new().fixed_stride(64), 3);
    let h = v2::Header {
        count: u64::from(u32::MAX),
        layout: Layout::Fixed { record_size: 1, block_records: u32::MAX },
        ..v2::Header::empty(1 << 40)
    };
    let mut bytes = h.encode().to_vec();
    bytes.extend_from_slice(&[0; 4]);
    std::fs::write(s.join("index.zr"), &bytes).unwrap();
    for e in [Store::open(&s).unwrap_err(), Store::open_rw(&s, StoreOptions::new()).unwrap_err()] {
        let Error::Corrupt { ref path, offset, .. } = e else { panic!("{e}") };
        assert!(path.ends_with("index.zr") && offset == 52, "{e}");
    }
}

/// A fixed-stride delete's journal whose new length is past the store's is refused on replay:
/// the tail chunk is not extended and the store keeps its records.
#[test]
fn a_fixed_stride_journal_that_grows_the_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new().fixed_stride(64), 6);
    let chunk = std::fs::read(s.join("0.zr")).unwrap();
    let j = Journal::Delete { entries: Vec::new(), new_length: 1000, sums: Vec::new() };
    std::fs::write(s.join("journal.zr"), j.encode(Format::V2)).unwrap();
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    let Error::Corrupt { ref path, .. } = e else { panic!("{e}") };
    assert!(path.ends_with("journal.zr") && e.to_string().contains("new length 1000"), "{e}");
    assert_eq!(std::fs::read(s.join("0.zr")).unwrap(), chunk);
    std::fs::remove_file(s.join("journal.zr")).unwrap();
    let w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    assert_eq!(w.len(), 6);
    assert!(w.verify().unwrap().is_ok());
}

/// A migration's lock error says what is waiting for the store: the migration.
#[test]
fn a_migration_of_a_store_open_elsewhere_says_it_is_the_migration_that_waits() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new(), 3);
    let reader = Store::open(&s).unwrap();
    let e = Store::migrate(&s, Format::V1, &nothing).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }) && e.to_string().contains("migrating it"), "{e}");
    drop(reader);
}

/// A store named twice in a set (a second path, a link) is refused by stitch, and by the set's
/// open when a manifest lists it twice. (Unix: a Windows symbolic link needs a privilege.)
#[cfg(unix)]
#[test]
fn a_set_refuses_a_store_named_twice_however_it_is_spelt() {
    let dir = tempfile::tempdir().unwrap();
    let p0 = dir.path().join("p0");
    let w = DatasetWriter::dense::<u8>(&p0, vec![4], WriteOptions::new()).unwrap();
    let mut w = w;
    w.append(&[1u8, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    w.finish().unwrap();
    let alias = dir.path().join("alias");
    std::os::unix::fs::symlink(&p0, &alias).unwrap();
    let dotted = dir.path().join("p0/../p0");
    for second in [&alias, &dotted, &p0] {
        let e = loaderx_core::stitch(&[&p0, second], dir.path().join("set")).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("same store")), "{e}");
        assert!(!dir.path().join("set").exists());
    }
    loaderx_core::stitch(&[&p0], dir.path().join("set")).unwrap();
    // A manifest that lists the part twice (as a hand-written one could).
    let m = loaderx_core::format::storeset::SetManifest::new(vec![
        loaderx_core::format::storeset::SetPart { path: "../p0".into(), records: 2, identity: None },
        loaderx_core::format::storeset::SetPart { path: "../alias".into(), records: 2, identity: None },
    ]);
    std::fs::write(dir.path().join("set").join(loaderx_core::SET_FILE), m.encode()).unwrap();
    let e = loaderx_core::DenseSource::open(dir.path().join("set")).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("same store"), "{e}");
}

/// Overwriting replaces a loaderx dataset and nothing else: a directory holding a user's file,
/// or a file, is refused before anything is created or moved.
#[test]
fn overwrite_replaces_only_a_loaderx_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::new().overwrite(true);
    let write = |out: &Path| -> loaderx_core::Result<u64> {
        let mut w = DatasetWriter::dense::<u8>(out, vec![2], opts.clone())?;
        w.append(&[9u8, 9])?;
        w.finish()
    };
    let project = dir.path().join("myproject");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("notes.txt"), b"mine").unwrap();
    let file = dir.path().join("file.bin");
    std::fs::write(&file, b"mine too").unwrap();
    for out in [&project, &file] {
        let e = write(out).unwrap_err();
        assert!(matches!(e, Error::NotReplaceable { ref path, .. } if path == out), "{e}");
    }
    assert_eq!(std::fs::read(project.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine too");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "nothing created beside them: {names:?}");
    // A dataset is replaced, with a user's `.old` beside it left alone.
    let data = dir.path().join("data");
    write(&data).unwrap();
    std::fs::create_dir(dir.path().join("data.old")).unwrap();
    std::fs::write(dir.path().join("data.old/keep"), b"k").unwrap();
    assert_eq!(write(&data).unwrap(), 1);
    assert_eq!(std::fs::read(dir.path().join("data.old/keep")).unwrap(), b"k");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["data", "data.old", "file.bin", "myproject"]);
    // A live writer's dataset is not moved from under it, and that is known before anything is
    // written; nor is one readers have open.
    let held = Store::open_rw(&data, StoreOptions::new()).unwrap();
    let e = DatasetWriter::dense::<u8>(&data, vec![2], opts.clone()).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    assert!(!dir.path().join("data.partial").exists());
    assert_eq!(held.len(), 1);
    drop(held);
    let reader = Store::open(&data).unwrap();
    let e = write(&data).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    assert_eq!(reader.get(0).unwrap(), vec![9u8, 9]);
}

/// A count damaged below what the manifest committed is not taken for a torn commit: a writer's
/// open (a migration's, a compaction's) refuses it, and nothing is trimmed.
#[test]
fn a_damaged_count_is_refused_by_a_writer_never_trimmed_to() {
    let dir = tempfile::tempdir().unwrap();
    for (name, opts) in [("entries", StoreOptions::new()), ("fixed", StoreOptions::new().fixed_stride(64))] {
        let s = dir.path().join(name);
        store(&s, opts, 100);
        let mut index = std::fs::read(s.join("index.zr")).unwrap();
        index[v2::COUNT_OFFSET..v2::COUNT_OFFSET + 8].copy_from_slice(&48u64.to_le_bytes());
        std::fs::write(s.join("index.zr"), &index).unwrap();
        let before = snapshot(&s);
        for e in [
            Store::open_rw(&s, StoreOptions::new()).unwrap_err(),
            Store::migrate(&s, Format::V1, &nothing).unwrap_err(),
        ] {
            let Error::Corrupt { ref path, offset, .. } = e else { panic!("{name}: {e}") };
            assert!(path.ends_with("index.zr") && offset == 40, "{name}: {e}");
        }
        assert_eq!(snapshot(&s), before, "{name}: nothing trimmed");
    }
    // A count raised after a delete (whose entries past the count are still in the index, with
    // valid checksums) would bring deleted records back: refused as well.
    let s = dir.path().join("raised");
    store(&s, StoreOptions::new(), 100);
    let mut w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    w.delete(&(0..100u64).step_by(10).collect::<Vec<_>>()).unwrap();
    drop(w);
    let mut index = std::fs::read(s.join("index.zr")).unwrap();
    index[v2::COUNT_OFFSET..v2::COUNT_OFFSET + 8].copy_from_slice(&95u64.to_le_bytes());
    std::fs::write(s.join("index.zr"), &index).unwrap();
    let before = snapshot(&s);
    for e in [
        Store::open_rw(&s, StoreOptions::new()).unwrap_err(),
        Store::migrate_layout(&s, Layout::Compact, &nothing).unwrap_err(),
    ] {
        assert!(matches!(e, Error::Corrupt { offset: 40, .. }), "{e}");
    }
    assert_eq!(snapshot(&s), before, "nothing rewritten");
    // With the manifest gone too (the remedy for a damaged manifest), nothing holds the count:
    // still refused, not repaired from the raised count.
    std::fs::remove_file(s.join("manifest.zr")).unwrap();
    let before = snapshot(&s);
    let e = Store::migrate_layout(&s, Layout::Compact, &nothing).unwrap_err();
    assert!(matches!(e, Error::Corrupt { offset: 40, .. }), "{e}");
    assert_eq!(snapshot(&s), before, "nothing rewritten");
}

/// A manifest that does not decode is damage, refused by a writer's open, not rebuilt over
/// (a missing one is what a crash leaves, and is computed again).
#[test]
fn an_undecodable_manifest_is_refused_not_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new(), 20);
    let path = s.join("manifest.zr");
    flip(&path, std::fs::read(&path).unwrap().len() - 1);
    let damaged = std::fs::read(&path).unwrap();
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    assert!(matches!(e, Error::Corrupt { ref path, .. } if path.ends_with("manifest.zr")), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), damaged);
    std::fs::remove_file(&path).unwrap();
    drop(Store::open_rw(&s, StoreOptions::new()).unwrap());
    assert!(Store::open(&s).unwrap().verify().unwrap().is_ok());
}

/// A store is not replaced under its readers: they open chunks by name as they read, and would
/// read the new store's bytes through the old index.
#[test]
fn overwrite_waits_for_the_readers_of_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new(), 5);
    let reader = Store::open(&s).unwrap();
    let e = Store::create(&s, StoreOptions::new().overwrite(true)).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    assert_eq!(reader.get(4).unwrap(), vec![4u8; 64]);
    drop(reader);
    assert_eq!(Store::create(&s, StoreOptions::new().overwrite(true)).unwrap().len(), 0);
}

/// Files that only look like a store's (`thesis.tmp`, `2024.zr` with no store beside them) are
/// the user's: not replaced; nor is a directory of the user's that bears the staging name.
#[test]
fn names_that_look_like_a_stores_are_not_taken_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::new().overwrite(true);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for f in ["thesis.tmp", "2024.zr"] {
        std::fs::write(out.join(f), b"mine").unwrap();
    }
    let e = DatasetWriter::dense::<u8>(&out, vec![2], opts.clone()).unwrap_err();
    assert!(matches!(e, Error::NotReplaceable { .. }), "{e}");
    let staged = dir.path().join("other");
    let partial = dir.path().join("other.partial");
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("notes.txt"), b"mine").unwrap();
    let e = DatasetWriter::dense::<u8>(&staged, vec![2], WriteOptions::new()).unwrap_err();
    assert!(matches!(e, Error::NotReplaceable { ref path, .. } if *path == partial), "{e}");
    assert_eq!(std::fs::read(partial.join("notes.txt")).unwrap(), b"mine");
    for f in ["thesis.tmp", "2024.zr"] {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), b"mine");
    }
}

/// A journal of moves in a fixed-stride store (no operation writes one) is refused as corrupt,
/// with the store as it was.
#[test]
fn a_move_journal_in_a_fixed_stride_store_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    store(&s, StoreOptions::new().fixed_stride(64), 4);
    let j = Journal::Move { entries: Vec::new(), data: Vec::new() };
    std::fs::write(s.join("journal.zr"), j.encode(Format::V2)).unwrap();
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    assert!(matches!(e, Error::Corrupt { ref path, .. } if path.ends_with("journal.zr")), "{e}");
}

/// A compaction killed inside its last header write (the tail offset still the old one, the
/// checksum the new one's) leaves its new manifest, which holds the count: the next writer
/// repairs the frontier and every record reads.
#[test]
fn a_compaction_killed_inside_its_last_header_write_reopens() {
    let dir = tempfile::tempdir().unwrap();
    for (name, opts) in
        [("entries", StoreOptions::new()), ("compact", StoreOptions::new().compact_entries(true))]
    {
        let s = dir.path().join(name);
        store(&s, opts, 200);
        let mut w = Store::open_rw(&s, StoreOptions::new()).unwrap();
        w.delete(&(0..200u64).step_by(10).collect::<Vec<_>>()).unwrap();
        let before_index = std::fs::read(s.join("index.zr")).unwrap();
        let chunk_len = std::fs::metadata(s.join("0.zr")).unwrap().len();
        w.compact().unwrap();
        drop(w);
        // The torn write: bytes 32..40 (the tail offset) as before, the rest as after.
        let mut index = std::fs::read(s.join("index.zr")).unwrap();
        index[32..40].copy_from_slice(&before_index[32..40]);
        std::fs::write(s.join("index.zr"), &index).unwrap();
        std::fs::OpenOptions::new().write(true).open(s.join("0.zr")).unwrap().set_len(chunk_len).unwrap();
        let w = Store::open_rw(&s, StoreOptions::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(w.len(), 180);
        assert!(w.verify().unwrap().is_ok(), "{name}");
    }
}

/// A v1 store of 64-byte records in chunks of 127 bytes, its last chunk exactly full, migrated
/// to the fixed-stride layout: its manifest lists the chunks its header names, and `verify`
/// finds it intact (review 51: the manifest was written from the frontier before it rolled to
/// the next chunk, and `verify` called it corrupt).
#[test]
fn a_rolled_v1_frontier_migrates_to_fixed_with_a_manifest_that_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("rolled");
    let records: Vec<Vec<u8>> = (0..3u8).map(|k| vec![k; 64]).collect();
    let store = Store::create(&s, StoreOptions::new().format(Format::V1).chunk_capacity(127)).unwrap();
    store.append(&records, Codec::Raw).unwrap();
    drop(store);
    assert!(Store::open(&s).unwrap().verify().unwrap().is_ok());
    migrate(&s, To::Layout(Layout::Fixed { record_size: 0, block_records: 0 })).unwrap();
    let store = Store::open(&s).unwrap();
    let report = store.verify().unwrap();
    assert!(report.is_ok(), "{:?} {:?}", report.bad, report.files);
    assert_eq!(store.gather(&[0u64, 1, 2]).unwrap(), records);
}
