//! Data safety, round three's eleventh look: what appears at a conversion's output while it
//! runs, and files of the user's under the names loaderx gives its locks and staging
//! directories. Nothing of the user's is replaced, removed or waited on forever.

#[cfg(unix)]
use std::path::Path;
#[cfg(unix)]
use std::time::Duration;

use loaderx_core::{Codec, DatasetWriter, Error, Store, StoreOptions, WriteOptions};

use crate::common::snapshot;

/// Runs `f` on a thread, failing the test (not hanging it) when it takes more than 20 s.
#[cfg(unix)]
fn within_20s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("the call waited: a FIFO was opened as a file")
}

/// K4: a store created at OUT while a conversion without overwrite runs is kept; the
/// conversion is `AlreadyExists` and leaves nothing behind.
#[test]
fn a_store_created_at_out_during_a_conversion_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut w = DatasetWriter::dense::<u32>(&out, vec![1], WriteOptions::new()).unwrap();
    w.append(&[1u32, 2, 3]).unwrap();
    let theirs = Store::create(&out, StoreOptions::new()).unwrap();
    theirs.append(&[b"precious record"], Codec::Raw).unwrap();
    drop(theirs);
    let before = snapshot(&out);
    match w.finish() {
        Err(Error::AlreadyExists { path }) => assert_eq!(path, out),
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot(&out), before);
    assert_eq!(Store::open(&out).unwrap().get(0).unwrap(), b"precious record");
    assert!(!dir.path().join("out.partial").exists(), "the staging directory is removed");
}

/// K5: a directory of the user's at `OUT.partial` holding files with a store's chunk or
/// temporary names (and no lock or index of a crashed writer) is not taken for staging.
#[test]
fn a_users_partial_directory_of_chunk_like_names_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("o3.partial");
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("2024.zr"), b"report").unwrap();
    std::fs::write(staging.join("manifest.zr.tmp"), b"notes").unwrap();
    let before = snapshot(&staging);
    let err = DatasetWriter::dense::<u32>(dir.path().join("o3"), vec![1], WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == staging), "{err}");
    let mut after = snapshot(&staging);
    after.remove("convert.lock");
    assert_eq!(after, before);
    assert!(!dir.path().join("o3").exists());
}

/// K6: a `convert.lock` or `write.lock` of another tool's in a dataset's directory makes it the
/// user's: overwriting it is refused, and the file stays.
#[test]
fn another_tools_lock_file_in_a_dataset_makes_it_not_replaceable() {
    for name in ["convert.lock", "write.lock"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut w = DatasetWriter::dense::<u32>(&out, vec![1], WriteOptions::new()).unwrap();
        w.append(&[1u32]).unwrap();
        w.finish().unwrap();
        std::fs::write(out.join(name), b"held by my build tool").unwrap();
        let before = snapshot(&out);
        let err =
            DatasetWriter::dense::<u32>(&out, vec![1], WriteOptions::new().overwrite(true)).unwrap_err();
        assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == out), "{name}: {err}");
        assert_eq!(snapshot(&out), before, "{name}");
        // A lock file loaderx left (a process id) does not stand in the way.
        std::fs::write(out.join(name), b"4242").unwrap();
        DatasetWriter::dense::<u32>(&out, vec![1], WriteOptions::new().overwrite(true))
            .unwrap()
            .finish()
            .unwrap();
    }
}

/// K7: a FIFO planted as `write.lock` or `convert.lock` is refused at once; before, the writer
/// waited for ever on it (the open, then the read of the holder's id).
#[cfg(unix)]
#[test]
fn a_fifo_planted_as_a_lock_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    Store::create(&store, StoreOptions::new()).unwrap().append(&[b"x"], Codec::Raw).unwrap();
    let fifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    fifo(&store.join("write.lock"));
    let s = store.clone();
    let err = within_20s(move || Store::open_rw(&s, StoreOptions::new()).map(|_| ())).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { .. }), "{err}");
    assert_eq!(Store::open(&store).unwrap().get(0).unwrap(), b"x", "readers take no lock file");

    let staging = dir.path().join("o.partial");
    std::fs::create_dir(&staging).unwrap();
    fifo(&staging.join("convert.lock"));
    let out = dir.path().join("o");
    let err = within_20s(move || DatasetWriter::dense::<u32>(&out, vec![1], WriteOptions::new()).map(|_| ()))
        .unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { .. }), "{err}");
    assert!(staging.join("convert.lock").exists());
}

/// The seventy-fifth look's L75-1: a store set's directory opened to append (C `LX_OPEN_APPEND`,
/// Python `Zrecord(set, "a")`) or to create made a store inside it, whose appends no reader of
/// the set ever saw (they open the set's manifest first). Refused, nothing written.
#[test]
fn a_store_set_is_never_taken_for_a_directory_to_make_a_store_in() {
    let dir = tempfile::tempdir().unwrap();
    let parts: Vec<_> = (0..2u32)
        .map(|p| {
            let part = dir.path().join(format!("p{p}"));
            let mut w = DatasetWriter::dense::<u32>(&part, vec![1], WriteOptions::new()).unwrap();
            w.append(&[p, p + 10]).unwrap();
            w.finish().unwrap();
            part
        })
        .collect();
    let set = dir.path().join("set");
    loaderx_core::stitch(&parts, &set).unwrap();
    let before = snapshot(&set);
    for mode in [loaderx_core::OpenMode::Append, loaderx_core::OpenMode::Create] {
        let err = Store::open_mode(&set, mode, StoreOptions::new()).unwrap_err();
        assert!(
            matches!(&err, Error::NotReplaceable { path, .. } if path.ends_with("storeset.msgpack")),
            "{mode:?}: {err}"
        );
        assert!(err.to_string().contains("is a store set"), "{err}");
        let mut after = snapshot(&set);
        after.remove("write.lock");
        assert_eq!(after, before, "{mode:?}");
    }
    assert_eq!(loaderx_core::DenseSource::open(&set).unwrap().len(), 4);
    // A migration of the set says what to do instead: migrate each part, stitch them again.
    let e = Store::migrate(&set, loaderx_core::Format::V1, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("compact or migrate each part and stitch them again"), "{e}");
    let mut after = snapshot(&set);
    after.remove("write.lock");
    assert_eq!(after, before);
    // Look 77's P2: a store already inside the set (made before sets were refused) is not opened
    // to write either.
    let stray = dir.path().join("stray");
    Store::create(&stray, StoreOptions::new()).unwrap().append(&[b"x"], Codec::Raw).unwrap();
    for f in ["index.zr", "manifest.zr", "0.zr"] {
        std::fs::copy(stray.join(f), set.join(f)).unwrap();
    }
    let before = snapshot(&set);
    for mode in [loaderx_core::OpenMode::Append, loaderx_core::OpenMode::Create] {
        let err = Store::open_mode(&set, mode, StoreOptions::new()).unwrap_err();
        assert!(err.to_string().contains("is a store set"), "{mode:?}: {err}");
    }
    assert!(Store::open_rw(&set, StoreOptions::new()).unwrap_err().to_string().contains("is a store set"));
    let mut after = snapshot(&set);
    after.remove("write.lock");
    assert_eq!(after, before);
}

/// Look 118: a file where a store was to be created is `NotReplaceable` (`LX_ERR_ALREADY_EXISTS`
/// to C; it was `Io`, which a C caller takes for a failing disk, then advice to pass overwrite,
/// which cannot help: look 120, L120-3), and a store created over a dataset's takes the dataset's
/// schema with it (left, it called the new store's records damaged).
#[test]
fn create_over_a_file_or_a_dataset_says_so_and_leaves_no_old_schema() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    for opts in [loaderx_core::StoreOptions::new(), loaderx_core::StoreOptions::new().overwrite(true)] {
        let e = Store::create(&file, opts).unwrap_err();
        assert!(
            matches!(&e, Error::NotReplaceable { path, reason } if path.ends_with("afile") && reason.contains("it is a file")),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    let ds = dir.path().join("ds");
    let mut w =
        loaderx_core::DatasetWriter::dense::<f32>(&ds, vec![3], loaderx_core::WriteOptions::new()).unwrap();
    w.append(&[1.0f32, 2.0, 3.0]).unwrap();
    w.finish().unwrap();
    assert!(ds.join("schema.msgpack").exists());
    let store = Store::create(&ds, loaderx_core::StoreOptions::new().overwrite(true)).unwrap();
    store.append(&[vec![1u8; 5]], loaderx_core::Codec::Raw).unwrap();
    assert!(!ds.join("schema.msgpack").exists(), "the replaced records' schema went with them");
    assert!(store.verify().unwrap().is_ok());
}

/// Look 152, L152-1: a store being created (its creator holds the writer lock, its index not
/// written yet) is `Locked` to a writer and to a reader, not "not a loaderx store" (a `compact`
/// racing a creator said so); a creator finishing meanwhile is waited for; with no creator
/// there, a directory without an index is still not a store.
#[test]
fn a_store_being_created_is_locked_not_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let aside = dir.path().join("index.zr");
    let creator = Store::create(&path, StoreOptions::default()).unwrap();
    // The creator's window: its lock held, its index not there yet.
    std::fs::rename(path.join("index.zr"), &aside).unwrap();
    for opened in [Store::open_rw(&path, StoreOptions::default()), Store::open(&path)] {
        match opened {
            Err(Error::Locked { reason, .. }) => {
                assert!(reason.contains(&format!("process {}", std::process::id())), "{reason}")
            }
            Err(e) => panic!("a store being created: {e}"),
            Ok(_) => panic!("a store without an index opened"),
        }
    }
    // The creator finishes within the grace: the opener waits for it (or, on a slow machine,
    // says it is locked), never that no store is there.
    let (back, store_path) = (aside.clone(), path.clone());
    let finish = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::rename(&back, store_path.join("index.zr")).unwrap();
        drop(creator);
    });
    match Store::open_rw(&path, StoreOptions::default()) {
        Ok(_) | Err(Error::Locked { .. }) => {}
        Err(e) => panic!("a creator finishing: {e}"),
    }
    finish.join().unwrap();
    // No writer there: a directory without an index is not a store.
    std::fs::rename(path.join("index.zr"), &aside).unwrap();
    for opened in [Store::open_rw(&path, StoreOptions::default()), Store::open(&path)] {
        assert!(matches!(opened, Err(Error::NotAStore { .. })), "no creator: not a store");
    }
}

/// Look 154, L154-1: appenders starting together on a path without a store each open it (one
/// creates it, the others find it made) or are told `Locked` while another holds it; none is
/// told it "already exists" (which asked to pass overwrite), and every append lands.
#[test]
fn appenders_starting_together_never_hear_it_already_exists() {
    const ROUNDS: usize = 20;
    const APPENDERS: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let path = dir.path().join(format!("s{round}"));
        let start = std::sync::Arc::new(std::sync::Barrier::new(APPENDERS));
        let appenders: Vec<_> = (0..APPENDERS)
            .map(|k| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..2000 {
                        match Store::open_mode(&path, loaderx_core::OpenMode::Append, StoreOptions::new()) {
                            Ok(s) => return s.append(&[format!("r{k}").as_bytes()], Codec::Raw).unwrap(),
                            Err(Error::Locked { .. }) => {
                                std::thread::sleep(std::time::Duration::from_millis(1))
                            }
                            Err(e) => panic!("appender {k}, round {round}: {e}"),
                        }
                    }
                    panic!("appender {k} never opened the store");
                })
            })
            .collect();
        for a in appenders {
            a.join().unwrap();
        }
        assert_eq!(Store::open(&path).unwrap().len(), APPENDERS as u64, "round {round}");
    }
}

/// Look 178, L178-3: an output that is a link to nothing, written with overwrite, was reported
/// as a missing file ("stat OUT: No such file"): it is named as a link to nothing and kept.
#[cfg(unix)]
#[test]
fn an_output_linking_to_nothing_is_named_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dang");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &out).unwrap();
    let e = match DatasetWriter::dense::<u8>(&out, vec![2], WriteOptions::new().overwrite(true)) {
        Err(e) => e,
        Ok(mut w) => {
            w.append(&[1u8, 2]).unwrap();
            w.finish().unwrap_err()
        }
    };
    assert!(
        matches!(&e, Error::NotReplaceable { path, reason } if path == &out && reason.contains("which is not there")),
        "{e}"
    );
    assert!(std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink(), "the link is kept");
}
