//! A store's files moved under its open handles (issue 40, the fortieth look's T2-T4): a
//! directory renamed away and another store made at its name, the working directory changed
//! after a store was opened by a relative path, a chunk replaced before a deferred `sync`.

use std::fs;
use std::path::Path;

use loaderx_core::{Codec, Error, Store, StoreOptions};

/// A 16-byte record: `tag`, then `i`.
fn record(tag: u8, i: u32) -> Vec<u8> {
    let mut r = vec![tag; 16];
    r[..4].copy_from_slice(&i.to_le_bytes());
    r
}

fn records(tag: u8, range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
    range.map(|i| record(tag, i)).collect()
}

/// Every layout, with chunks of 64 bytes: 40 records lie in ten chunks, opened one by one as a
/// reader reaches them.
fn layouts() -> [(&'static str, StoreOptions); 4] {
    let small = || StoreOptions::new().chunk_capacity(64);
    [
        ("entries", small()),
        ("compact", small().compact_entries(true)),
        ("fixed", small().fixed_stride(16)),
        ("v1", small().format(loaderx_core::Format::V1)),
    ]
}

fn make(dir: &Path, opts: StoreOptions, tag: u8) {
    let s = Store::create(dir, opts).unwrap();
    s.append(&records(tag, 0..40), Codec::Raw).unwrap();
}

/// T4: `mv s old`, then another store made at `s`: a reader opened before keeps reading its own
/// records (checked and unchecked), from chunks it had not opened yet, never the new store's.
#[test]
fn a_reader_whose_directory_was_renamed_away_reads_its_own_records() {
    for (name, opts) in layouts() {
        for verify in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let (s, old) = (tmp.path().join("s"), tmp.path().join("old"));
            make(&s, opts.clone(), 0xAA);
            let reader = Store::open_with(&s, opts.clone().verify_reads(verify)).unwrap();
            assert_eq!(reader.get(0).unwrap().to_vec(), record(0xAA, 0), "{name}: chunk 0 opened");
            fs::rename(&s, &old).unwrap();
            make(&s, opts.clone(), 0xBB);
            let all: Vec<u64> = (0..40).collect();
            assert_eq!(reader.gather(&all).unwrap(), records(0xAA, 0..40), "{name} verify={verify}");
            assert_eq!(Store::open(&s).unwrap().get(39).unwrap().to_vec(), record(0xBB, 39));
        }
    }
}

/// The forty-first look's U1: `verify` on a reader whose directory was renamed away, another
/// store at its name: it checks the manifest of the store it holds (it read the other one's:
/// false damage, or damage of its own hidden).
#[test]
fn verify_of_a_moved_reader_checks_its_own_manifest() {
    for (name, opts) in layouts().into_iter().filter(|(n, _)| *n != "v1") {
        for damaged in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let (s, old) = (tmp.path().join("s"), tmp.path().join("old"));
            make(&s, opts.clone(), 0xAA);
            let reader = Store::open_with(&s, opts.clone()).unwrap();
            fs::rename(&s, &old).unwrap();
            if damaged {
                fs::write(old.join("manifest.zr"), b"not a manifest").unwrap();
                make(&s, opts.clone(), 0xBB);
            } else {
                let other = Store::create(&s, opts.clone()).unwrap();
                other.append(&records(0xBB, 0..20), Codec::Raw).unwrap();
            }
            let report = reader.verify().unwrap();
            assert_eq!(report.is_ok(), !damaged, "{name}: {:?} {:?}", report.bad, report.files);
        }
    }
}

/// The forty-first look's U3 and the forty-second's V2: a compaction, or a fixed-stride delete,
/// whose directory is renamed away while it runs, and another store (with more chunks) renamed
/// to its name. Whatever the operation returns, it never touches the other store (it removed
/// that store's chunks past its own new tail, or its manifest, or misread its files' sizes), and
/// both reopen clean: the other with its records, this one with its records before or after the
/// operation. The rename lands at points spread over the time one such operation takes here.
#[test]
fn an_operation_whose_directory_is_renamed_away_leaves_the_new_store_alone() {
    const N: u32 = 6000;
    let compact = StoreOptions::new().chunk_capacity(4096);
    let fixed = StoreOptions::new().chunk_capacity(4096).fixed_stride(16);
    let every_seventh: Vec<u64> = (0..u64::from(N)).step_by(7).collect();
    let contents = |w: &Store| w.gather(&(0..w.len()).collect::<Vec<u64>>()).unwrap();
    for (what, opts) in [("compact", compact), ("fixed-stride delete", fixed)] {
        let prepare = |s: &Path| {
            let mut w = Store::create(s, opts.clone()).unwrap();
            w.append(&records(0xAA, 0..N), Codec::Raw).unwrap();
            if what == "compact" {
                w.delete(&(0..u64::from(N)).step_by(2).collect::<Vec<u64>>()).unwrap();
            }
            let before = contents(&w);
            (w, before)
        };
        let run =
            |w: &mut Store| if what == "compact" { w.compact().map(drop) } else { w.delete(&every_seventh) };
        let tmp = tempfile::tempdir().unwrap();
        let (mut w, _) = prepare(&tmp.path().join("timed"));
        let started = std::time::Instant::now();
        run(&mut w).unwrap();
        let took = started.elapsed();
        let after = contents(&w);
        for percent in [0u32, 5, 10, 20, 30, 50, 70, 90, 97] {
            let delay = took * percent / 100;
            let tmp = tempfile::tempdir().unwrap();
            let (s, old, next) = (tmp.path().join("s"), tmp.path().join("old"), tmp.path().join("next"));
            let (mut w, before) = prepare(&s);
            Store::create(&next, opts.clone()).unwrap().append(&records(0xBB, 0..N), Codec::Raw).unwrap();
            let mover = {
                let (s, old, next) = (s.clone(), old.clone(), next.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    fs::rename(&s, &old).unwrap();
                    fs::rename(&next, &s).unwrap();
                })
            };
            let result = run(&mut w);
            mover.join().unwrap();
            drop(w);
            let at = format!("{what}, rename at {percent}% of {took:?}: {result:?}");
            // Read-only first: a read-write open would write a removed manifest again (V2).
            let report = Store::open(&s).unwrap().verify().unwrap();
            assert!(report.is_ok(), "{at}: {:?}", report.files);
            let other = Store::open_rw(&s, opts.clone()).unwrap();
            let all: Vec<u64> = (0..u64::from(N)).collect();
            assert_eq!(other.gather(&all).unwrap(), records(0xBB, 0..N), "{at}");
            let mine = Store::open_rw(&old, opts.clone()).unwrap();
            let now = contents(&mine);
            assert!(now == before || now == after, "{at}");
            assert!(mine.verify().unwrap().is_ok(), "{at}");
        }
    }
}

/// T4 for a writer: its directory renamed away and another store made at the name. The writer
/// never writes into the other store; it is refused (its index's name leads elsewhere now), and
/// both stores reopen clean with their own records.
#[test]
fn a_writer_whose_directory_was_renamed_away_never_writes_into_the_new_store() {
    for (name, opts) in layouts() {
        let tmp = tempfile::tempdir().unwrap();
        let (s, old) = (tmp.path().join("s"), tmp.path().join("old"));
        let writer = Store::create(&s, opts.clone()).unwrap();
        writer.append(&records(0xAA, 0..40), Codec::Raw).unwrap();
        fs::rename(&s, &old).unwrap();
        make(&s, opts.clone(), 0xBB);
        // Records that roll into chunks neither store has yet.
        let e = writer.append(&records(0xAA, 40..80), Codec::Raw).unwrap_err();
        assert!(matches!(&e, Error::Corrupt { reason, .. } if reason.contains("replaced")), "{name}: {e}");
        drop(writer);
        for (dir, tag) in [(&old, 0xAA), (&s, 0xBB)] {
            let store = Store::open_rw(dir, StoreOptions::new()).unwrap();
            assert_eq!(store.len(), 40, "{name}: {}", dir.display());
            let all: Vec<u64> = (0..40).collect();
            assert_eq!(store.gather(&all).unwrap(), records(tag, 0..40), "{name}");
            let report = store.verify().unwrap();
            assert!(report.is_ok(), "{name}: {:?} {:?}", report.bad, report.files);
        }
    }
}

/// T2: a store opened by a relative path keeps working after the process changes its working
/// directory: a reader's lazily opened chunks and a writer's next appends. Run in a child
/// process (the working directory is the whole process's).
#[test]
fn a_relative_store_path_survives_a_change_of_working_directory() {
    const CHILD: &str = "LOADERX_TEST_CWD_CHILD";
    if let Ok(base) = std::env::var(CHILD) {
        for (name, opts) in layouts() {
            let dir = Path::new(&base).join(name);
            fs::create_dir(&dir).unwrap();
            std::env::set_current_dir(&dir).unwrap();
            make(Path::new("s"), opts.clone(), 0xAA);
            // U2: a writer made by a relative path, too.
            let made = Store::create("made", opts.clone().deferred_sync(true)).unwrap();
            made.append(&records(0xCC, 0..10), Codec::Raw).unwrap();
            let reader = Store::open_with("s", opts.clone().verify_reads(true)).unwrap();
            let writer = Store::open_rw("s", opts.clone()).unwrap();
            std::env::set_current_dir(&base).unwrap();
            let all: Vec<u64> = (0..40).collect();
            assert_eq!(reader.gather(&all).unwrap(), records(0xAA, 0..40), "{name}");
            writer.append(&records(0xAA, 40..60), Codec::Raw).unwrap();
            drop(writer);
            made.append(&records(0xCC, 10..20), Codec::Raw).unwrap();
            made.sync().unwrap();
            drop(made);
            assert!(!dir.join("made/write.lock").exists(), "{name}: the lock released");
            let all: Vec<u64> = (0..20).collect();
            assert_eq!(Store::open(dir.join("made")).unwrap().gather(&all).unwrap(), records(0xCC, 0..20));
            let store = Store::open(dir.join("s")).unwrap();
            let all: Vec<u64> = (0..60).collect();
            assert_eq!(store.gather(&all).unwrap(), records(0xAA, 0..60), "{name}");
            assert!(store.verify().unwrap().is_ok(), "{name}");
        }
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::common::this_binary()
        .args([
            "--exact",
            "moved::a_relative_store_path_survives_a_change_of_working_directory",
            "--nocapture",
        ])
        .env(CHILD, tmp.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// T3: with deferred sync, the tail chunk replaced by a copy after an append: `sync` would
/// fsync the orphan and say the records are durable. It says they stand but were not made
/// durable ([`Error::Committed`], the replaced chunk named), and the handle stops.
#[cfg(unix)]
#[test]
fn a_sync_after_the_tail_chunk_was_replaced_says_nothing_was_made_durable() {
    for (name, opts) in layouts() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("s");
        let store = Store::create(&s, opts.clone().chunk_capacity(1 << 20).deferred_sync(true)).unwrap();
        store.append(&records(0xAA, 0..10), Codec::Raw).unwrap();
        let copy = s.join("0.copy");
        fs::copy(s.join("0.zr"), &copy).unwrap();
        fs::rename(&copy, s.join("0.zr")).unwrap();
        let e = store.sync().unwrap_err();
        assert!(
            matches!(&e, Error::Committed { what, source, .. }
                if what == "records 0..10"
                    && matches!(&**source, Error::Corrupt { path, .. } if path.ends_with("0.zr"))),
            "{name}: {e}"
        );
        let e = store.append(&records(0xAA, 10..11), Codec::Raw).unwrap_err();
        assert!(
            matches!(&e, Error::Locked { reason, .. } if reason.contains("writes no more")),
            "{name}: {e}"
        );
    }
}

/// A path that names nothing, or a file, is no store (the directory is opened first).
#[test]
fn a_missing_directory_or_a_file_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Store::open(tmp.path().join("missing")).unwrap_err();
    assert!(matches!(&e, Error::NotAStore { reason, .. } if reason.contains("does not exist")), "{e}");
    fs::write(tmp.path().join("file"), b"x").unwrap();
    let e = Store::open(tmp.path().join("file")).unwrap_err();
    assert!(matches!(&e, Error::NotAStore { reason, .. } if reason.contains("not a directory")), "{e}");
    // An empty path is a bad argument, whatever the mode (look 165, L165-3: create said `Io`).
    for mode in [loaderx_core::OpenMode::Read, loaderx_core::OpenMode::Append, loaderx_core::OpenMode::Create]
    {
        let e = Store::open_mode("", mode, StoreOptions::new()).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("path is empty")), "{mode:?}: {e}");
    }
    // A dataset's schema too, read or written (look 168, L168-2: written over the working
    // directory's, then `Io`).
    let e = loaderx_core::Schema::read(Path::new("")).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("path is empty")), "{e}");
    let d = tmp.path().join("d");
    let mut w =
        loaderx_core::DatasetWriter::dense::<u32>(&d, vec![1], loaderx_core::WriteOptions::new()).unwrap();
    w.append(&[1u32]).unwrap();
    w.finish().unwrap();
    let e = loaderx_core::Schema::read(&d).unwrap().write(Path::new("")).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("path is empty")), "{e}");
    // A file or a missing directory named as itself, not by the temporary file inside it.
    for at in [tmp.path().join("file"), tmp.path().join("missing")] {
        let e = loaderx_core::Schema::read(&d).unwrap().write(&at).unwrap_err();
        assert!(matches!(&e, Error::Io { path, .. } if *path == at), "{e}");
        assert!(!e.to_string().contains("schema.msgpack"), "{e}");
    }
    assert_eq!(fs::read(tmp.path().join("file")).unwrap(), b"x");
}

/// The forty-second look's V1: a deferred-sync writer's directory renamed (nothing at the old
/// name), then `sync`: the records its appends acknowledged stand, so the error says they were
/// committed ([`Error::Committed`], naming them), never that nothing was written (a caller would
/// append them again).
#[test]
fn a_failing_sync_says_the_acknowledged_records_stand() {
    for (name, opts) in layouts() {
        let tmp = tempfile::tempdir().unwrap();
        let (s, moved) = (tmp.path().join("s"), tmp.path().join("moved"));
        let w = Store::create(&s, opts.clone().deferred_sync(true)).unwrap();
        w.append(&records(0xAA, 0..40), Codec::Raw).unwrap();
        w.sync().unwrap();
        w.append(&records(0xAA, 40..80), Codec::Raw).unwrap();
        fs::rename(&s, &moved).unwrap();
        let e = w.sync().unwrap_err();
        assert!(matches!(&e, Error::Committed { what, .. } if what == "records 40..80"), "{name}: {e}");
        drop(w);
        let store = Store::open_rw(&moved, StoreOptions::new()).unwrap();
        let all: Vec<u64> = (0..80).collect();
        assert_eq!(store.gather(&all).unwrap(), records(0xAA, 0..80), "{name}");
    }
}

/// The forty-second look's V3: a reader out of file descriptors is not a damaged store. `verify`
/// with almost none left stops with the error (naming the path) instead of listing intact records
/// or chunks as damaged. Run in a child process with a low descriptor limit.
#[cfg(unix)]
#[test]
fn verify_out_of_descriptors_is_an_error_not_damage() {
    const CHILD: &str = "LOADERX_TEST_FD_CHILD";
    if let Ok(base) = std::env::var(CHILD) {
        for (name, _) in layouts() {
            let s = Path::new(&base).join(name);
            let store = Store::open(&s).unwrap();
            // Every descriptor but `spare` taken.
            for spare in [0usize, 1, 2] {
                let mut held = Vec::new();
                while let Ok(f) = fs::File::open("/dev/null") {
                    held.push(f);
                }
                held.truncate(held.len().saturating_sub(spare));
                match store.verify() {
                    Ok(report) => {
                        assert!(report.is_ok(), "{name}, {spare} spare: {:?} {:?}", report.bad, report.files)
                    }
                    Err(e) => assert!(e.to_string().contains(&*s.to_string_lossy()), "{name}: {e}"),
                }
                drop(held);
            }
        }
        println!("CHILD DONE");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for (name, opts) in layouts() {
        make(&tmp.path().join(name), opts, 0xAA);
    }
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$@\" --exact moved::verify_out_of_descriptors_is_an_error_not_damage --nocapture"])
        .arg("sh")
        .args(crate::common::this_binary_argv())
        .env(CHILD, tmp.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("CHILD DONE"), "{text}");
}

/// The forty-third look's X1 and X2: a delete, a compaction or a dataset's finish whose first
/// step, a sync of the deferred appends, fails has not started: its error is the sync's cause,
/// never [`Error::Committed`] (which says the operation stands: a caller would take the records
/// for deleted, or the dataset for written).
#[test]
fn an_operation_whose_first_sync_fails_says_it_did_not_start() {
    for op in ["delete", "compact"] {
        let tmp = tempfile::tempdir().unwrap();
        let (s, moved) = (tmp.path().join("s"), tmp.path().join("moved"));
        let mut w = Store::create(&s, StoreOptions::new().deferred_sync(true)).unwrap();
        w.append(&records(0xAA, 0..10), Codec::Raw).unwrap();
        w.sync().unwrap();
        w.append(&records(0xAA, 10..20), Codec::Raw).unwrap();
        fs::rename(&s, &moved).unwrap();
        let e = if op == "delete" { w.delete(&[0]).unwrap_err() } else { w.compact().unwrap_err() };
        assert!(!matches!(e, Error::Committed { .. }), "{op}: {e}");
        drop(w);
        let store = Store::open_rw(&moved, StoreOptions::new()).unwrap();
        assert_eq!(store.len(), 20, "{op}: nothing deleted");
        assert_eq!(store.get(0).unwrap().to_vec(), record(0xAA, 0), "{op}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut w =
        loaderx_core::DatasetWriter::dense::<u32>(&out, vec![], loaderx_core::WriteOptions::new()).unwrap();
    w.append(&(0..1000u32).collect::<Vec<_>>()).unwrap();
    fs::rename(tmp.path().join("out.partial"), tmp.path().join("elsewhere")).unwrap();
    let e = w.finish().unwrap_err();
    assert!(!matches!(e, Error::Committed { .. }), "finish: {e}");
    assert!(!out.exists(), "nothing placed");
}
