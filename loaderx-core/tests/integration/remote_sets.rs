//! Store sets pushed to object storage and read there: a part replaced on the server, a manifest
//! naming one part twice, a set's own schema, part names that object storage resolves elsewhere
//! than the local file system does; a v1 store pushed over a v2 one (looks 79 to 81).

use std::path::{Path, PathBuf};

use loaderx_core::format::storeset::{SetManifest, SetPart};
use loaderx_core::remote::push;
use loaderx_core::{Codec, DatasetWriter, DenseSource, Format, RaggedSource, Store, WriteOptions};

use crate::remote::Server;

/// A dense part of `rows` rows of 4 u32, each row's values from `base`.
fn dense_part(dir: &Path, name: &str, base: u32, codec: Codec) -> PathBuf {
    let part = dir.join(name);
    let mut w = DatasetWriter::dense::<u32>(&part, vec![4], WriteOptions::new().codec(codec)).unwrap();
    w.append(&(0..400u32).map(|v| base + v).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    part
}

/// A set stitched locally over one part of `dense_part`'s in `codec`, pushed to `url`: (the
/// part, the set).
fn pushed_set(dir: &Path, server: &Server, url: &str, codec: Codec) -> (PathBuf, PathBuf) {
    let p = dense_part(dir, "p", 0, codec);
    let set = dir.join("set");
    loaderx_core::stitch(&[&p], &set).unwrap();
    push(&set, url, server.options(), |_| {}).unwrap();
    (p, set)
}

/// Look 80 (F80-1): a pushed set's part replaced on the server by another store of the same
/// length read as the set, silently (the remote open checked the count alone). Every part's
/// identity, kept by a locally stitched set, is now checked where the set is read, computed from
/// the remote index as a local store computes it: an intact set of every layout opens, the
/// swapped part is refused by name.
#[test]
fn a_pushed_sets_parts_are_checked_by_identity_where_it_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    // Fixed stride (raw), entries (zstd), v1 (migrated), compact (a ragged raw dataset).
    let fixed = dense_part(tmp.path(), "fixed", 0, Codec::Raw);
    let zstd = dense_part(tmp.path(), "zstd", 1000, Codec::Zstd);
    let v1 = dense_part(tmp.path(), "v1", 2000, Codec::Zstd);
    Store::migrate(&v1, Format::V1, &|_, _| {}).unwrap();
    for (i, parts) in [[&fixed, &zstd], [&zstd, &v1]].iter().enumerate() {
        let set = tmp.path().join(format!("set{i}"));
        loaderx_core::stitch(parts, &set).unwrap();
        let url = format!("s3://bucket/sets/set{i}");
        push(&set, &url, server.options(), |_| {}).unwrap();
        let got = DenseSource::open_remote(&url, server.options()).unwrap();
        let want = DenseSource::open(&set).unwrap();
        assert_eq!(got.get_batch(&[0, 99, 100, 199]).unwrap(), want.get_batch(&[0, 99, 100, 199]).unwrap());
    }
    let ragged: Vec<PathBuf> = (0..2)
        .map(|k| {
            let p = tmp.path().join(format!("r{k}"));
            let mut w =
                DatasetWriter::ragged::<u8>(&p, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
            for i in 0..50u8 {
                w.append_record(&vec![i + k; usize::from(i % 7)]).unwrap();
            }
            w.finish().unwrap();
            p
        })
        .collect();
    loaderx_core::stitch(&ragged, tmp.path().join("rset")).unwrap();
    push(&tmp.path().join("rset"), "s3://bucket/sets/rset", server.options(), |_| {}).unwrap();
    assert_eq!(RaggedSource::open_remote("s3://bucket/sets/rset", server.options()).unwrap().len(), 100);
    // The first part of set0 replaced on the server by another store of its length and schema.
    let other = dense_part(tmp.path(), "other", 5000, Codec::Raw);
    push(&other, "s3://bucket/sets/fixed", server.options(), |_| {}).unwrap();
    let e = DenseSource::open_remote("s3://bucket/sets/set0", server.options()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("s3://bucket/sets/fixed") && text.contains("not the store the set was stitched with"),
        "{text}"
    );
}

/// Look 80 (F80-2): a set manifest on the server naming one part twice read its records twice.
#[test]
fn a_remote_manifest_naming_one_part_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = dense_part(tmp.path(), "p", 0, Codec::Zstd);
    push(&p, "s3://bucket/d/p", server.options(), |_| {}).unwrap();
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&p], &set).unwrap();
    push(&set, "s3://bucket/d/set", server.options(), |_| {}).unwrap();
    let part = |path: &str| SetPart { path: path.into(), records: 100, identity: None };
    let m = SetManifest::new(vec![part("../p"), part("../p/./")]);
    std::fs::write(server.root.join("bucket/d/set/storeset.msgpack"), m.encode()).unwrap();
    let e = DenseSource::open_remote("s3://bucket/d/set", server.options()).unwrap_err();
    assert!(e.to_string().contains("parts 0 and 1 are both s3://bucket/d/p"), "{e}");
}

/// Looks 79 and 80: a part named with backslashes (one name here, a path on object storage)
/// went up to the set's own URL (`S\p\..`), over another part (`x\..\q`), or above the set over
/// another dataset (`a\..\..`). Such names are refused before anything goes up, and parts that
/// meet at one URL still are.
#[test]
fn parts_that_meet_at_one_url_are_refused_before_anything_goes_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let victim = dense_part(tmp.path(), "victim", 7, Codec::Raw);
    push(&victim, "s3://bucket/v", server.options(), |_| {}).unwrap();
    let q = dense_part(tmp.path(), "q", 0, Codec::Raw);
    for (i, odd) in ["S\\p\\..", "x\\..\\q"].iter().enumerate() {
        let odd = dense_part(tmp.path(), odd, 1, Codec::Raw);
        let set = tmp.path().join(format!("set{i}"));
        loaderx_core::stitch(&[&odd, &q], &set).unwrap();
        let e = push(&set, &format!("s3://bucket/a{i}/S"), server.options(), |_| {}).unwrap_err();
        assert!(e.to_string().contains("backslash"), "{e}");
        assert!(!server.root.join(format!("bucket/a{i}")).exists(), "nothing went up");
    }
    // A set holding its part under a name that climbs above it on object storage.
    let set = tmp.path().join("cs/S");
    std::fs::create_dir_all(&set).unwrap();
    let climber = dense_part(&set, "a\\..\\..", 100, Codec::Raw);
    let rel = climber.file_name().unwrap().to_str().unwrap().to_string();
    let schema = std::fs::read(climber.join(loaderx_core::SCHEMA_FILE)).unwrap();
    std::fs::write(set.join(loaderx_core::SCHEMA_FILE), schema).unwrap();
    let m = SetManifest::new(vec![SetPart { path: rel, records: 100, identity: None }]);
    std::fs::write(set.join(loaderx_core::SET_FILE), m.encode()).unwrap();
    let e = push(&set, "s3://bucket/v/S", server.options(), |_| {}).unwrap_err();
    assert!(e.to_string().contains("backslash"), "{e}");
    let back = DenseSource::open_remote("s3://bucket/v", server.options()).unwrap();
    assert_eq!(
        back.get_batch(&[0]).unwrap().as_slice::<u32>().unwrap(),
        [7, 8, 9, 10],
        "the victim unharmed"
    );
    // Two spellings of one part, hand-written: refused as meeting at one URL.
    let set = tmp.path().join("twin");
    loaderx_core::stitch(&[&q], &set).unwrap();
    let part = |path: &str| SetPart { path: path.into(), records: 100, identity: None };
    std::fs::write(
        set.join(loaderx_core::SET_FILE),
        SetManifest::new(vec![part("../q"), part("../q/.")]).encode(),
    )
    .unwrap();
    let e = push(&set, "s3://bucket/b/T", server.options(), |_| {}).unwrap_err();
    assert!(e.to_string().contains("where the set or another part goes"), "{e}");
    assert!(!server.root.join("bucket/b").exists(), "nothing went up");
}

/// Look 81 (F81-2): a store migrated to v1 and pushed again over its v2 self left the v2
/// `index.zr` on the server, which readers open first: "pushed", and every reader read the old
/// store. A v1 push removes an index there before anything goes up.
#[test]
fn a_v1_store_pushed_over_a_v2_one_is_what_readers_read() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = dense_part(tmp.path(), "p", 0, Codec::Zstd);
    push(&p, "s3://bucket/m/p", server.options(), |_| {}).unwrap();
    Store::migrate(&p, Format::V1, &|_, _| {}).unwrap();
    let store = Store::open_rw(&p, loaderx_core::StoreOptions::new()).unwrap();
    let rows: Vec<Vec<u8>> =
        (0..20u32).map(|r| (0..4).flat_map(|c| (9000 + 4 * r + c).to_le_bytes()).collect()).collect();
    store.append(&rows, Codec::Zstd).unwrap();
    drop(store);
    push(&p, "s3://bucket/m/p", server.options(), |_| {}).unwrap();
    assert!(!server.root.join("bucket/m/p/index.zr").exists());
    let got = DenseSource::open_remote("s3://bucket/m/p", server.options()).unwrap();
    assert_eq!(got.len(), 120);
    let want = DenseSource::open(&p).unwrap();
    assert_eq!(got.get_batch(&[0, 99, 100, 119]).unwrap(), want.get_batch(&[0, 99, 100, 119]).unwrap());
}

/// Look 81 (F81-3): a set on object storage was read by its parts' schema, its own missing, of
/// another kind or shape. It is checked as a local set's is.
#[test]
fn a_remote_sets_own_schema_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    pushed_set(tmp.path(), &server, "s3://bucket/k/set", Codec::Zstd);
    assert_eq!(DenseSource::open_remote("s3://bucket/k/set", server.options()).unwrap().len(), 100);
    let schema = server.root.join("bucket/k/set").join(loaderx_core::SCHEMA_FILE);
    let other = |name: &str, shape: Vec<usize>, ragged: bool| {
        let d = tmp.path().join(name);
        if ragged {
            let mut w = DatasetWriter::ragged::<u32>(&d, shape, WriteOptions::new()).unwrap();
            w.append_record(&[1u32]).unwrap();
            w.finish().unwrap();
        } else {
            let mut w = DatasetWriter::dense::<u32>(&d, shape, WriteOptions::new()).unwrap();
            w.append(&[1u32, 2]).unwrap();
            w.finish().unwrap();
        }
        std::fs::read(d.join(loaderx_core::SCHEMA_FILE)).unwrap()
    };
    let cases =
        [(other("ragged", vec![], true), "ragged"), (other("shape", vec![2], false), "is not the set's")];
    for (bytes, says) in cases {
        std::fs::write(&schema, bytes).unwrap();
        let e = DenseSource::open_remote("s3://bucket/k/set", server.options()).unwrap_err();
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    std::fs::remove_file(&schema).unwrap();
    let e = DenseSource::open_remote("s3://bucket/k/set", server.options()).unwrap_err();
    assert!(e.to_string().contains("has no schema"), "{e}");
}

/// Look 82: a compaction, delete or append during a push said "pushed" over a remote copy that
/// was wrong (v1) or unreadable (v2). A push holds the store still: a store a writer has open is
/// refused, nothing put; readers beside it are no hindrance.
#[test]
fn a_store_is_held_still_while_it_goes_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = dense_part(tmp.path(), "p", 0, Codec::Zstd);
    let writer = Store::open_rw(&p, loaderx_core::StoreOptions::new()).unwrap();
    let e = push(&p, "s3://bucket/h/p", server.options(), |_| {}).unwrap_err();
    assert!(
        matches!(&e, loaderx_core::Error::Locked { reason, .. } if reason.contains("a push needs it unchanged")),
        "{e}"
    );
    assert!(!server.root.join("bucket/h").exists(), "nothing went up");
    drop(writer);
    let reader = Store::open(&p).unwrap();
    push(&p, "s3://bucket/h/p", server.options(), |_| {}).unwrap();
    assert_eq!(DenseSource::open_remote("s3://bucket/h/p", server.options()).unwrap().len(), 100);
    // The push let go of the store: a writer opens it again.
    drop(reader);
    Store::open_rw(&p, loaderx_core::StoreOptions::new()).unwrap();
}

/// Look 87 (F87-4): a store set given as a part of a set, locally or by URL, was refused as
/// "not a loaderx store"; the refusal now says it is a set, and that sets do not nest.
#[test]
fn a_set_given_as_a_part_is_refused_as_a_set() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = dense_part(tmp.path(), "p", 0, Codec::Raw);
    let q = dense_part(tmp.path(), "q", 500, Codec::Raw);
    let inner = tmp.path().join("inner");
    loaderx_core::stitch(&[&q], &inner).unwrap();
    let e = loaderx_core::stitch(&[&p, &inner], tmp.path().join("outer")).unwrap_err();
    assert!(e.to_string().contains("is a store set: sets do not nest"), "{e}");
    assert!(!tmp.path().join("outer").exists());
    push(&p, "s3://bucket/n/p", server.options(), |_| {}).unwrap();
    push(&inner, "s3://bucket/n/inner", server.options(), |_| {}).unwrap();
    let parts = ["s3://bucket/n/p".to_owned(), "s3://bucket/n/inner".to_owned()];
    let e = loaderx_core::stitch_remote(&parts, "s3://bucket/n/outer", server.options()).unwrap_err();
    assert!(e.to_string().contains("s3://bucket/n/inner is a store set: sets do not nest"), "{e}");
}

/// Look 91 (N1): a store pushed over a URL holding a dataset, or a set, kept the files the new
/// store lacks: a raw store read as the old dataset's type (`verify` "intact", `export` of its
/// bytes as the other dtype). What the pushed store lacks is removed; its own schema replaces
/// another; the URL reads as exactly what was pushed.
#[test]
fn a_store_pushed_over_another_dataset_or_set_reads_as_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let objects = tmp.path().join("s3/bucket/u");
    let dataset = dense_part(tmp.path(), "dataset", 0, Codec::Zstd);
    std::fs::write(dataset.join("classes.txt"), "cat\ndog\n").unwrap();
    let raw = tmp.path().join("raw");
    let store = Store::create(&raw, loaderx_core::StoreOptions::new()).unwrap();
    store.append(&[[1u8; 16], [2u8; 16]], Codec::Raw).unwrap();
    drop(store);
    let url = "s3://bucket/u";
    push(&dataset, url, server.options(), |_| {}).unwrap();
    assert!(objects.join("schema.msgpack").exists() && objects.join("classes.txt").exists());
    push(&raw, url, server.options(), |_| {}).unwrap();
    for gone in ["schema.msgpack", "classes.txt"] {
        assert!(!objects.join(gone).exists(), "{gone} is left of the dataset");
    }
    let e = DenseSource::open_remote(url, server.options()).unwrap_err();
    assert!(e.to_string().contains("schema"), "{e}");
    let back = loaderx_core::remote::RemoteStore::open(url, server.options()).unwrap();
    assert_eq!((back.len(), back.gather(&[1]).unwrap()), (2, vec![vec![2u8; 16]]));
    // Another dataset's schema is replaced by this one's. Look 93 (F1): the URL's index goes
    // first, so that from the first file sent until the new index is up the URL is no store (a
    // push cut short there leaves none, not this index with the old schema, or without one).
    let other = tmp.path().join("other");
    let mut w = DatasetWriter::dense::<u8>(&other, vec![16], WriteOptions::new()).unwrap();
    w.append(&[5u8; 48]).unwrap();
    w.finish().unwrap();
    push(&dataset, url, server.options(), |_| {}).unwrap();
    let sent_with_no_index = std::cell::Cell::new(0);
    push(&other, url, server.options(), |_| {
        let opened = loaderx_core::remote::RemoteStore::open(url, server.options());
        if opened.is_err() && !objects.join("index.zr").exists() {
            sent_with_no_index.set(sent_with_no_index.get() + 1);
        }
    })
    .unwrap();
    assert!(sent_with_no_index.get() >= 2, "{}", sent_with_no_index.get());
    let got = DenseSource::open_remote(url, server.options()).unwrap();
    assert_eq!((got.len(), got.get_batch(&[2]).unwrap().as_slice::<u8>().unwrap()), (3, &[5u8; 16][..]));
    assert!(!objects.join("classes.txt").exists());
    // A store pushed over a set: the set's manifest and schema go.
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&dataset], &set).unwrap();
    push(&set, "s3://bucket/s", server.options(), |_| {}).unwrap();
    push(&raw, "s3://bucket/s", server.options(), |_| {}).unwrap();
    let s = tmp.path().join("s3/bucket/s");
    assert!(!s.join("storeset.msgpack").exists() && !s.join("schema.msgpack").exists());
}

/// Look 93 (F2): a dataset pushed again after appends, its schema written since in another
/// encoding of the same schema (before schemas carried a checksum), was removed first and put
/// back last: the URL read as a raw store for the whole push. The same schema is no change: the
/// URL stays the dataset at every file sent.
#[test]
fn a_dataset_pushed_again_stays_readable_throughout() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let d = dense_part(tmp.path(), "d", 0, Codec::Zstd);
    // dense u32 [4], as rmp-serde wrote schemas before they carried their checksum.
    let mut legacy = vec![0x83, 0xa4];
    legacy.extend(b"kind\xa5dense\xa5dtype\xa3u32\xa5shape\x91\x04");
    std::fs::write(d.join("schema.msgpack"), &legacy).unwrap();
    let url = "s3://bucket/d";
    push(&d, url, server.options(), |_| {}).unwrap();
    assert_eq!(DenseSource::open_remote(url, server.options()).unwrap().len(), 100);
    loaderx_core::Schema::dense(loaderx_core::DType::U32, vec![4]).write(&d).unwrap();
    let store = Store::open_rw(&d, loaderx_core::StoreOptions::new()).unwrap();
    store.append(&[[7u8; 16]], Codec::Raw).unwrap();
    drop(store);
    let calls = std::cell::Cell::new(0);
    push(&d, url, server.options(), |_| {
        let n = DenseSource::open_remote(url, server.options()).map(|s| s.len());
        assert!(matches!(n, Ok(100 | 101)), "{n:?}");
        calls.set(calls.get() + 1);
    })
    .unwrap();
    assert!(calls.get() >= 2);
    assert_eq!(DenseSource::open_remote(url, server.options()).unwrap().len(), 101);
}

/// Look 150, L150-2: a set whose later part's URL holds a character object storage keys hold
/// escaped had its earlier parts pushed, replacing those of the set already at the URL, before
/// it was refused. Refused now before anything goes up: the set there reads as it did.
#[test]
fn a_set_with_a_refused_part_url_is_refused_before_anything_goes_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let old = [dense_part(tmp.path(), "p0", 0, Codec::Raw), dense_part(tmp.path(), "p1", 1000, Codec::Raw)];
    let set = tmp.path().join("S");
    loaderx_core::stitch(&old, &set).unwrap();
    push(&set, "s3://bucket/S", server.options(), |_| {}).unwrap();
    let before =
        DenseSource::open_remote("s3://bucket/S", server.options()).unwrap().get_batch(&[0, 199]).unwrap();
    std::fs::remove_dir_all(&set).unwrap();
    std::fs::remove_dir_all(&old[0]).unwrap();
    let new =
        [dense_part(tmp.path(), "p0", 5000, Codec::Raw), dense_part(tmp.path(), "pé", 6000, Codec::Raw)];
    loaderx_core::stitch(&new, &set).unwrap();
    let e = push(&set, "s3://bucket/S", server.options(), |_| {}).unwrap_err().to_string();
    assert!(e.contains("'é'"), "{e}");
    let after =
        DenseSource::open_remote("s3://bucket/S", server.options()).unwrap().get_batch(&[0, 199]).unwrap();
    assert_eq!(after, before, "the set at the URL as it was");
}

/// Look 156 (L156-1): a stitch on object storage whose schema changes puts the set's schema
/// file, then its manifest (the commit); killed between the two, the old manifest was read
/// against the new schema, and every read of the old set failed ("the part's schema is not the
/// set's"). The manifest now carries the schema it was stitched with, which readers take.
#[test]
fn a_remote_stitch_killed_after_its_schema_leaves_the_old_set_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = dense_part(tmp.path(), "p", 0, Codec::Raw);
    push(&p, "s3://bucket/c/p0", server.options(), |_| {}).unwrap();
    let q = tmp.path().join("q");
    let mut w = DatasetWriter::dense::<u32>(&q, vec![2], WriteOptions::new()).unwrap();
    w.append(&[7u32, 8, 9, 10]).unwrap();
    w.finish().unwrap();
    push(&q, "s3://bucket/c/q0", server.options(), |_| {}).unwrap();
    loaderx_core::stitch_remote(&["s3://bucket/c/p0".to_string()], "s3://bucket/c/set", server.options())
        .unwrap();
    // Killed after the new schema's put, before the manifest's.
    let schema = |at: &str| server.root.join("bucket/c").join(at).join(loaderx_core::SCHEMA_FILE);
    std::fs::copy(schema("q0"), schema("set")).unwrap();
    let old = DenseSource::open_remote("s3://bucket/c/set", server.options()).unwrap();
    assert_eq!((old.len(), old.item_shape().to_vec()), (100, vec![4]), "the old set, as it was");
    // The commit finished: the new set.
    loaderx_core::stitch_remote(&["s3://bucket/c/q0".to_string()], "s3://bucket/c/set", server.options())
        .unwrap();
    let new = DenseSource::open_remote("s3://bucket/c/set", server.options()).unwrap();
    assert_eq!((new.len(), new.item_shape().to_vec()), (2, vec![2]));
}

/// Looks 156, 158 and 160 (L158-1, L160-1): a set pushed over another, its parts going up to
/// the old parts' URLs, put its parts, then its schema, then its manifest; cut short anywhere,
/// the old manifest was read against new parts (of another schema: damage; of the same schema,
/// under a manifest stitched on object storage, without identities: old and new records mixed,
/// "all intact") or the new schema. The URL's manifest now goes before anything else whenever
/// it is not the new set's: until the new one is up, no set is there.
#[test]
fn a_set_push_over_another_cut_short_leaves_no_set_read_against_it() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
    let p = dense_part(&a, "p", 0, Codec::Raw);
    let q = b.join("p");
    let mut w = DatasetWriter::dense::<u32>(&q, vec![2], WriteOptions::new()).unwrap();
    w.append(&[7u32, 8, 9, 10]).unwrap();
    w.finish().unwrap();
    let same_schema = dense_part(&c, "p", 1000, Codec::Raw);
    for (dir, part) in [(&a, &p), (&b, &q), (&c, &same_schema)] {
        loaderx_core::stitch(&[part], dir.join("set")).unwrap();
    }
    for (new, says) in [(b.join("set"), "another schema"), (c.join("set"), "the same schema")] {
        // Where a push elsewhere reports its steps: the first (a file of the part), the last
        // but one (the set's schema; its manifest is last).
        let steps = std::sync::Mutex::new(Vec::new());
        push(&new, "s3://bucket/elsewhere/set", server.options(), |n| steps.lock().unwrap().push(n)).unwrap();
        let steps = steps.into_inner().unwrap();
        for (cut_at, remotely) in [(steps[0], false), (steps[0], true), (steps[steps.len() - 2], false)] {
            // The old set pushed whole, or stitched on object storage over its pushed part.
            if remotely {
                push(&p, "s3://bucket/s/p", server.options(), |_| {}).unwrap();
                let part = ["s3://bucket/s/p".to_string()];
                loaderx_core::stitch_remote(&part, "s3://bucket/s/set", server.options()).unwrap();
            } else {
                push(&a.join("set"), "s3://bucket/s/set", server.options(), |_| {}).unwrap();
            }
            assert_eq!(DenseSource::open_remote("s3://bucket/s/set", server.options()).unwrap().len(), 100);
            let cut = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let stop = |n: u64| assert!(n < cut_at, "cut short");
                push(&new, "s3://bucket/s/set", server.options(), stop).unwrap();
            }));
            assert!(cut.is_err());
            let at = format!("{says}, cut at {cut_at}, stitched remotely {remotely}");
            match DenseSource::open_remote("s3://bucket/s/set", server.options()) {
                Err(loaderx_core::Error::NotAStore { path, .. })
                    if path == Path::new("s3://bucket/s/set") => {}
                Err(e) => panic!("{at}: a set read against another's parts or schema: {e}"),
                Ok(d) => panic!("{at}: a set of {} records at the URL while the push was cut short", d.len()),
            }
        }
        push(&new, "s3://bucket/s/set", server.options(), |_| {}).unwrap();
        let d = DenseSource::open_remote("s3://bucket/s/set", server.options()).unwrap();
        assert_eq!(d.item_shape().to_vec(), DenseSource::open(&new).unwrap().item_shape().to_vec());
    }
}

/// Look 168 (L168-1): a set whose part was appended to (or replaced) after stitching went up,
/// the part over the good one, and the set at the URL then refused it. Each part is checked as
/// a reader checks it before anything goes up: the URL keeps the set it had.
#[test]
fn a_set_whose_part_changed_since_stitching_is_refused_before_anything_goes_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (p, set) = pushed_set(tmp.path(), &server, "s3://bucket/g/set", Codec::Raw);
    let store = Store::open_rw(&p, loaderx_core::StoreOptions::new()).unwrap();
    store.append(&[vec![0u8; 16]], Codec::Raw).unwrap();
    drop(store);
    let e = push(&set, "s3://bucket/g/set", server.options(), |_| {}).unwrap_err();
    assert!(
        matches!(&e, loaderx_core::Error::Schema { reason, .. } if reason.contains("stitched with 100")),
        "{e}"
    );
    assert_eq!(DenseSource::open_remote("s3://bucket/g/set", server.options()).unwrap().len(), 100);
}

/// Look 170 (L170-1): each part was checked, then let go until its own upload began, so a part
/// appended to while an earlier one went up was sent changed ("pushed", and the set at the URL
/// damaged). Each part is now checked again under its lock when its turn comes (one part held at
/// a time: look 172, L172-7): the append goes through locally, the push refuses the part by name
/// and the set's manifest does not go up.
#[test]
fn a_part_changed_while_an_earlier_part_goes_up_stops_the_push() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let a = dense_part(tmp.path(), "a", 0, Codec::Raw);
    let b = dense_part(tmp.path(), "b", 1000, Codec::Raw);
    let set = tmp.path().join("set");
    loaderx_core::stitch(&[&a, &b], &set).unwrap();
    let appended = std::cell::Cell::new(false);
    let e = push(&set, "s3://bucket/h/set", server.options(), |_| {
        if !appended.replace(true) {
            let s = Store::open_rw(&b, loaderx_core::StoreOptions::new()).unwrap();
            s.append(&[vec![0u8; 16]], Codec::Raw).unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&e, loaderx_core::Error::Schema { path, reason } if path.ends_with("b") && reason.contains("holds 101 records")),
        "{e}"
    );
    assert!(DenseSource::open_remote("s3://bucket/h/set", server.options()).is_err());
}
