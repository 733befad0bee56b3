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

/// L177-1, L179-1: a single store swapped for another while it went up went up as a mix of the
/// two (one's chunk, the other's index, or a manifest vouching for the wrong chunk, which every
/// later push skipped). Its files are read through the directory held open: the store the push
/// began with goes up whole; the one now at the path goes up whole when pushed next.
#[test]
fn a_store_swapped_during_its_push_goes_up_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, swap) = (part(tmp.path(), "a", 0), part(tmp.path(), "swap", 5000));
    let swapped = std::cell::Cell::new(false);
    push(&a, "s3://bucket/single/a", server.options(), |_| {
        if !swapped.replace(true) {
            std::fs::rename(&a, tmp.path().join("a.old")).unwrap();
            std::fs::rename(&swap, &a).unwrap();
        }
    })
    .unwrap();
    assert!(swapped.get());
    let got = DenseSource::open_remote("s3://bucket/single/a", server.options()).unwrap();
    assert_eq!(got.get_batch(&[50]).unwrap(), row(0, 50));
    let remote = loaderx_core::remote::RemoteStore::open("s3://bucket/single/a", server.options()).unwrap();
    assert_eq!(remote.verify().unwrap(), 100, "the store the push began with, whole");
    push(&a, "s3://bucket/single/a", server.options(), |_| {}).unwrap();
    let got = DenseSource::open_remote("s3://bucket/single/a", server.options()).unwrap();
    assert_eq!(got.get_batch(&[50]).unwrap(), row(5000, 50));
    let remote = loaderx_core::remote::RemoteStore::open("s3://bucket/single/a", server.options()).unwrap();
    assert_eq!(remote.verify().unwrap(), 100, "the store now at the path, whole");
}

/// L177-2: a file read at another length than the push listed it with (a writer of other rights
/// appending in place) was blamed on the server ("the upload did not land"). It is named as
/// changed, and the URL's index and manifest are taken down.
#[test]
fn a_file_changed_since_it_was_listed_is_named_as_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let a = part(tmp.path(), "a", 0);
    push(&a, "s3://bucket/longer/a", server.options(), |_| {}).unwrap();
    let b = part(tmp.path(), "b", 7000);
    let grown = std::cell::Cell::new(false);
    let e = push(&b, "s3://bucket/longer/a", server.options(), |_| {
        if !grown.replace(true) {
            use std::io::Write;
            let mut index = std::fs::OpenOptions::new().append(true).open(b.join("index.zr")).unwrap();
            index.write_all(&[0; 64]).unwrap();
        }
    })
    .unwrap_err();
    assert!(matches!(&e, Error::Locked { reason, .. } if reason.contains("when the push listed it")), "{e}");
    assert!(DenseSource::open_remote("s3://bucket/longer/a", server.options()).is_err());
}

/// L179-2: two pushes of different stores to one URL at once both said they pushed, and left
/// one's chunk under the other's index, which pushing again never repaired. Each push asks at
/// its end whether every object is still as it left it: the one that finds another's is refused
/// and takes the URL's index down; pushed again, the URL holds it whole.
#[test]
fn two_pushes_to_one_url_never_leave_a_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (q, p) = (part(tmp.path(), "q", 0), part(tmp.path(), "p", 9000));
    let url = "s3://bucket/race/s";
    let raced = std::cell::Cell::new(false);
    let e = push(&q, url, server.options(), |_| {
        if !raced.replace(true) {
            // The other push, start to end, after this one's chunk went up (on a thread of its
            // own: this one's runtime is entered here).
            let (p, options) = (p.clone(), server.options());
            std::thread::spawn(move || push(&p, url, options, |_| {}).unwrap()).join().unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&e, Error::Remote { reason, .. } if reason.contains("another push") && reason.contains("taken down")),
        "{e}"
    );
    assert!(DenseSource::open_remote(url, server.options()).is_err(), "no store, never a mix");
    push(&q, url, server.options(), |_| {}).unwrap();
    let remote = loaderx_core::remote::RemoteStore::open(url, server.options()).unwrap();
    assert_eq!(remote.verify().unwrap(), 100);
    let got = DenseSource::open_remote(url, server.options()).unwrap();
    assert_eq!(got.get_batch(&[50]).unwrap(), row(0, 50));
}

/// L181-1: a store without a schema pushed while a dataset went up to the same URL: both said
/// they pushed, and the URL read the store's raw records as the dataset's type, "all intact".
/// What a push removed as its store's lack must still be absent at its end, or the push fails
/// and the URL is no store.
#[test]
fn a_schema_another_push_put_back_fails_the_push() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let raw = tmp.path().join("raw");
    // The dataset's records as raw bytes: its chunk object is the dataset's, byte for byte, so
    // only the schema the other push put back tells them apart.
    let store = loaderx_core::Store::create(&raw, loaderx_core::StoreOptions::default()).unwrap();
    let records: Vec<Vec<u8>> =
        (0..100u32).map(|r| (0..4).flat_map(|k| (4 * r + k).to_le_bytes()).collect()).collect();
    store.append(&records, Codec::Raw).unwrap();
    drop(store);
    let dataset = part(tmp.path(), "d", 0);
    let url = "s3://bucket/mixed/s";
    let raced = std::cell::Cell::new(false);
    let e = push(&raw, url, server.options(), |_| {
        if !raced.replace(true) {
            let (d, options) = (dataset.clone(), server.options());
            std::thread::spawn(move || push(&d, url, options, |_| {}).unwrap()).join().unwrap();
        }
    })
    .unwrap_err();
    assert!(matches!(&e, Error::Remote { reason, .. } if reason.contains("another push")), "{e}");
    assert!(DenseSource::open_remote(url, server.options()).is_err(), "no store, never raw bytes as u32");
    assert!(loaderx_core::remote::RemoteStore::open(url, server.options()).is_err());
}

/// L183-1: a store pushed to a URL while a store set went up there: both said they pushed, and
/// the URL read the store's records under the set's schema, "all intact". A set's end check asks
/// that no store's index appeared; failing, it takes down the set's manifest and the index.
#[test]
fn a_store_pushed_where_a_set_goes_fails_the_set_push() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b) = (part(tmp.path(), "a", 0), part(tmp.path(), "b", 1000));
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &b], &set).unwrap();
    let raw = tmp.path().join("raw");
    let mut w = DatasetWriter::dense::<u8>(&raw, vec![4], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..400u32).map(|v| v as u8).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let url = "s3://bucket/setrace/u";
    let raced = std::cell::Cell::new(false);
    let e = push(&set, url, server.options(), |_| {
        if !raced.replace(true) {
            let (raw, options) = (raw.clone(), server.options());
            std::thread::spawn(move || push(&raw, url, options, |_| {}).unwrap()).join().unwrap();
        }
    })
    .unwrap_err();
    assert!(matches!(&e, Error::Remote { reason, .. } if reason.contains("another push")), "{e}");
    assert!(DenseSource::open_remote(url, server.options()).is_err(), "neither the set nor the store");
    push(&set, url, server.options(), |_| {}).unwrap();
    let got = DenseSource::open_remote(url, server.options()).unwrap();
    assert_eq!((got.len(), got.get_batch(&[150]).unwrap()), (200, row(1000, 50)));
}
