//! Tests of `files.rs`: a store's files, their atomic writes and removal.

use super::files::*;
use crate::Error;

#[test]
fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "f", b"one").unwrap();
    write_atomic(dir.path(), "f", b"two!").unwrap();
    assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"two!");
    let failed = write_atomic_with(dir.path(), "f", |_, _| Err(Error::InvalidArgument("no".into())));
    assert!(matches!(failed, Err(Error::InvalidArgument(m)) if m == "no"), "the fill's own error");
    assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"two!", "a failed fill changes nothing");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["f"]);
}

/// Twentieth look, U3: a rename that fails (the target is a directory) left the whole
/// temporary behind, and the error named only the temporary.
#[test]
fn a_failed_rename_removes_the_temporary_and_names_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("d");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("inside"), b"x").unwrap();
    for synced in [true, false] {
        let held = crate::sys::Dir::open(dir.path()).unwrap();
        let err = if synced {
            write_atomic_bytes_in(&held, "d", b"bytes").unwrap_err()
        } else {
            replace_unsynced_in(&held, "d", b"bytes").unwrap_err()
        };
        assert!(matches!(&err, Error::Io { path, .. } if *path == target), "{err}");
        let mut names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["d"], "synced {synced}: no temporary left");
    }
}

/// A link planted where the temporary file goes (`manifest.zr.tmp` pointing at a file
/// outside the store) is replaced, not written through: the outside file keeps its bytes.
#[cfg(unix)]
#[test]
fn an_atomic_write_never_writes_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let store = dir.path().join("s");
    std::fs::create_dir(&store).unwrap();
    for name in ["manifest.zr", "journal.zr"] {
        std::os::unix::fs::symlink(&victim, store.join(format!("{name}.tmp"))).unwrap();
    }
    let held = crate::sys::Dir::open(&store).unwrap();
    write_atomic_bytes_in(&held, "journal.zr", b"new").unwrap();
    replace_unsynced_in(&held, "manifest.zr", b"new").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(std::fs::read(store.join("journal.zr")).unwrap(), b"new");
    assert!(!std::fs::symlink_metadata(store.join("manifest.zr")).unwrap().file_type().is_symlink());
    // A lock file planted as a link is refused, not followed.
    std::os::unix::fs::symlink(&victim, store.join("write.lock")).unwrap();
    assert!(matches!(open_or_create_no_follow(&store.join("write.lock")), Err(Error::Io { .. })));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}

/// Chunk 0 of a new store is made, or the empty one a killed create left is taken; a file
/// with bytes there (one that appeared after the directory was looked at) is refused and
/// kept, never removed or truncated.
#[test]
fn chunk_zero_is_made_or_taken_empty_never_over_a_file_with_bytes() {
    let dir = tempfile::tempdir().unwrap();
    create_chunk_zero(dir.path()).unwrap();
    create_chunk_zero(dir.path()).unwrap();
    std::fs::write(dir.path().join("0.zr"), b"a user's").unwrap();
    let e = create_chunk_zero(dir.path()).unwrap_err();
    assert!(matches!(&e, Error::NotReplaceable { path, .. } if path.ends_with("0.zr")), "{e}");
    assert_eq!(std::fs::read(dir.path().join("0.zr")).unwrap(), b"a user's");
    // An empty file with another name elsewhere (a hard link) is not written through either.
    #[cfg(unix)]
    {
        let other = tempfile::tempdir().unwrap();
        let outside = other.path().join("empty");
        std::fs::write(&outside, b"").unwrap();
        let d = other.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::hard_link(&outside, d.join("0.zr")).unwrap();
        let e = create_chunk_zero(&d).unwrap_err();
        assert!(matches!(&e, Error::NotReplaceable { .. }), "{e}");
    }
}

#[test]
fn only_store_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "meta.zr",
        "0.zr",
        "17.zr",
        "dict.zr",
        "journal.zr",
        "write.lock",
        "meta.zr.tmp",
        "schema.msgpack.tmp",
        "thesis.tmp",
        "notes.txt",
        "x.zr",
        "007.zr",
        "+1.zr",
    ] {
        std::fs::write(dir.path().join(name), b"").unwrap();
    }
    remove_store_files(dir.path()).unwrap();
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["+1.zr", "007.zr", "notes.txt", "thesis.tmp", "write.lock", "x.zr"],
        "a lock is removed only by its holder; a chunk is named as loaderx names one"
    );
}
