//! `push` of a store set against a set that changes under it (look 172): a part's schema, the
//! set stitched again, a part's directory swapped during its upload, one store named twice; and
//! of a single store swapped or changed while it goes up (look 177).

use std::path::{Path, PathBuf};

use loaderx_core::remote::push;
use loaderx_core::{Codec, DType, DatasetWriter, DenseArray, DenseSource, Error, Schema, WriteOptions};

use crate::remote::Server;

/// A dense part of 100 rows of 4 u32, row `r`'s values `base + 4r ..`.
fn part(dir: &Path, name: &str, base: u32) -> PathBuf {
    let p = dir.join(name);
    let mut w = DatasetWriter::dense::<u32>(&p, vec![4], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..400u32).map(|v| base + v).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    p
}

/// Row `r` of a part from `base`, as a batch of one.
fn row(base: u32, r: u32) -> DenseArray {
    DenseArray::from_vec(vec![1, 4], (0..4).map(|k| base + 4 * r + k).collect::<Vec<u32>>()).unwrap()
}

/// L172-1: a part whose schema changed after stitching (another dtype of the same width, the
/// same count and identity) went up over a good set, which then did not open. Each part's schema
/// is checked against the set's: refused before anything goes up, the URL keeps its set.
#[test]
fn a_part_of_another_schema_than_the_sets_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b) = (part(tmp.path(), "a", 0), part(tmp.path(), "b", 1000));
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &b], &set).unwrap();
    push(&set, "s3://bucket/k/set", server.options(), |_| {}).unwrap();
    Schema::dense(DType::F32, vec![4]).write(&b).unwrap();
    let e = push(&set, "s3://bucket/k/set", server.options(), |_| {}).unwrap_err();
    assert!(matches!(&e, Error::Schema { path, .. } if path.ends_with("b")), "{e}");
    let got = DenseSource::open_remote("s3://bucket/k/set", server.options()).unwrap();
    assert_eq!(got.get_batch(&[150]).unwrap(), row(1000, 50));
}

/// L172-3 (a): the set stitched again while its parts went up: the manifest that went up was
/// the new one, naming a part that never went up. The manifest that goes up is the one checked.
#[test]
fn the_manifest_that_goes_up_is_the_one_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b, c) = (part(tmp.path(), "a", 0), part(tmp.path(), "b", 1000), part(tmp.path(), "c", 2000));
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &b], &set).unwrap();
    let other = tmp.path().join("other");
    loaderx_core::stitch(&[&a, &c], &other).unwrap();
    let restitched = std::cell::Cell::new(false);
    push(&set, "s3://bucket/m/set", server.options(), |_| {
        if !restitched.replace(true) {
            std::fs::copy(other.join("storeset.msgpack"), set.join("storeset.msgpack")).unwrap();
        }
    })
    .unwrap();
    assert!(restitched.get());
    let got = DenseSource::open_remote("s3://bucket/m/set", server.options()).unwrap();
    assert_eq!((got.len(), got.get_batch(&[150]).unwrap()), (200, row(1000, 50)));
}

/// L172-3 (b): a part's directory swapped for another store while it went up: the push read the
/// new one's files under the old one's lock and said it pushed. The part must be still at its
/// path, unchanged, once it is up, or the set's manifest does not go up.
#[test]
fn a_part_swapped_during_its_upload_stops_the_push() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b) = (part(tmp.path(), "a", 0), part(tmp.path(), "b", 1000));
    let swap = part(tmp.path(), "swap", 5000);
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &b], &set).unwrap();
    let swapped = std::cell::Cell::new(false);
    let e = push(&set, "s3://bucket/w/set", server.options(), |_| {
        if !swapped.replace(true) {
            std::fs::rename(&a, tmp.path().join("a.old")).unwrap();
            std::fs::rename(&swap, &a).unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&e, Error::Locked { path, reason } if path.ends_with("a") && reason.contains("push again")),
        "{e}"
    );
    assert!(DenseSource::open_remote("s3://bucket/w/set", server.options()).is_err());
    // Nor is the part's own URL a store: its index, over the other store's files, was taken down.
    assert!(DenseSource::open_remote("s3://bucket/w/set/a", server.options()).is_err());
}

/// L177-1: a single store swapped for another while it went up went up as a mix of the two
/// (one's chunk, the other's index) and push said it pushed. The store must be still at its
/// path, unchanged, once it is up, or the push fails and the URL's index is taken down.
#[test]
fn a_store_swapped_during_its_push_is_not_left_at_the_url() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, swap) = (part(tmp.path(), "a", 0), part(tmp.path(), "swap", 5000));
    let swapped = std::cell::Cell::new(false);
    let e = push(&a, "s3://bucket/single/a", server.options(), |_| {
        if !swapped.replace(true) {
            std::fs::rename(&a, tmp.path().join("a.old")).unwrap();
            std::fs::rename(&swap, &a).unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&e, Error::Locked { path, reason } if path.ends_with("a") && reason.contains("taken down")),
        "{e}"
    );
    assert!(DenseSource::open_remote("s3://bucket/single/a", server.options()).is_err());
    // Pushed again, unchanged: the store there, whole.
    push(&a, "s3://bucket/single/a", server.options(), |_| {}).unwrap();
    let got = DenseSource::open_remote("s3://bucket/single/a", server.options()).unwrap();
    assert_eq!(got.get_batch(&[50]).unwrap(), row(5000, 50));
}

/// L177-2: a file read at another length than the push listed it with (the store swapped for
/// a longer copy of itself) was blamed on the server ("the upload did not land").
#[test]
fn a_file_changed_since_it_was_listed_is_named_as_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let a = part(tmp.path(), "a", 0);
    let longer = tmp.path().join("longer");
    let mut w = DatasetWriter::dense::<u32>(&longer, vec![4], WriteOptions::new().codec(Codec::Raw)).unwrap();
    // Longer by 40 blocks of records: its index is longer than the store's.
    w.append(&(0..40_000u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let swapped = std::cell::Cell::new(false);
    let e = push(&a, "s3://bucket/longer/a", server.options(), |_| {
        if !swapped.replace(true) {
            std::fs::rename(&a, tmp.path().join("a.old")).unwrap();
            std::fs::rename(&longer, &a).unwrap();
        }
    })
    .unwrap_err();
    assert!(matches!(&e, Error::Locked { reason, .. } if reason.contains("when the push listed it")), "{e}");
}

/// L172-4: a manifest naming one store twice (a tree of hard links to it) went up and read its
/// records twice at the URL, "all intact"; a local open refuses it. So does push, by name.
#[test]
fn a_set_naming_one_store_twice_is_not_pushed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let a = part(tmp.path(), "a", 0);
    let twin = tmp.path().join("twin");
    std::fs::create_dir(&twin).unwrap();
    for e in std::fs::read_dir(&a).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), twin.join(e.file_name())).unwrap();
    }
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &twin], &set).unwrap();
    for e in std::fs::read_dir(&twin).unwrap() {
        let e = e.unwrap();
        std::fs::remove_file(e.path()).unwrap();
        if e.file_name() != "write.lock" {
            std::fs::hard_link(a.join(e.file_name()), e.path()).unwrap();
        }
    }
    assert!(DenseSource::open(&set).is_err());
    let e = push(&set, "s3://bucket/t/set", server.options(), |_| {}).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { reason, .. } if reason.contains("are the same store")), "{e}");
}
