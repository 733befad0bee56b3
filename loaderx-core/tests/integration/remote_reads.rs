//! Remote stores pushed through the S3 API (`remote::push`) to the server of `remote.rs` and
//! read back with `DenseSource::open_remote` / `RaggedSource::open_remote` and the loader: every
//! codec, v1 stores, multipart uploads, the index cached by ETag, restarted and replaced pushes,
//! store sets, the loader's prefetch; damage, missing objects, a stopped server and wrong keys as
//! typed errors without a credential in them; faults retried, a chunk replaced under a reader.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use loaderx_core::remote::{RemoteStore, push};
use loaderx_core::{
    Codec, DataLoader, DatasetWriter, DenseSource, Error, Format, RaggedSource, WriteOptions,
};

use crate::remote::{Faults, KEY, SECRET, Server, dense, ragged};
#[test]
fn pushed_stores_read_back_record_for_record_through_the_datasets_and_the_loader() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    for codec in Codec::ALL {
        let local = dense(tmp.path(), codec);
        let url = format!("s3://bucket/data/dense-{codec:?}");
        push(&local, &url, opts.clone(), |_| {}).unwrap();
        // Small requests and gaps, to exercise coalescing into several ranges.
        let remote = DenseSource::open_remote(&url, opts.clone().max_request(4096).max_gap(64)).unwrap();
        let local = DenseSource::open(&local).unwrap();
        assert_eq!(remote.len(), 3000);
        let idx: Vec<u32> = (0..700u32).map(|i| i.wrapping_mul(2_654_435_761) % 3000).collect();
        assert_eq!(remote.get_batch(&idx).unwrap(), local.get_batch(&idx).unwrap(), "{codec:?}");
        let mut a = DataLoader::builder().stream("x", remote.clone()).batch_size(64).seed(3).build().unwrap();
        let mut b = DataLoader::builder().stream("x", local).batch_size(64).seed(3).build().unwrap();
        for _ in 0..5 {
            assert_eq!(a.next_batch().unwrap().unwrap().get("x"), b.next_batch().unwrap().unwrap().get("x"));
        }
    }
    let local = ragged(tmp.path());
    push(&local, "s3://bucket/data/ragged", opts.clone(), |_| {}).unwrap();
    let remote = RaggedSource::open_remote("s3://bucket/data/ragged", opts.clone()).unwrap();
    let local = RaggedSource::open(&local).unwrap();
    let idx: Vec<u32> = (0..2000).rev().step_by(3).collect();
    assert_eq!(remote.get_batch(&idx).unwrap(), local.get_batch(&idx).unwrap());
    let store = RemoteStore::open("s3://bucket/data/ragged", opts).unwrap();
    assert_eq!(store.verify().unwrap(), 2000);
}

/// A ragged dataset of raw records (the compact layout: 16 bytes of index a record) pushed and
/// read back record for record; a damaged record named by its index on a remote read and by
/// the remote `verify`.
#[test]
fn a_compact_store_reads_back_remotely_and_its_damage_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = tmp.path().join("compact");
    let mut w = DatasetWriter::ragged::<i32>(&local, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
    for i in 0..1500i32 {
        w.append_record(&vec![i; (i % 19) as usize]).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(loaderx_core::Store::open(&local).unwrap().layout(), loaderx_core::Layout::Compact);
    push(&local, "s3://bucket/compact", server.options(), |_| {}).unwrap();
    let remote = RaggedSource::open_remote("s3://bucket/compact", server.options()).unwrap();
    let idx: Vec<u32> = (0..1500).rev().step_by(2).collect();
    assert_eq!(remote.get_batch(&idx).unwrap(), RaggedSource::open(&local).unwrap().get_batch(&idx).unwrap());
    assert_eq!(RemoteStore::open("s3://bucket/compact", server.options()).unwrap().verify().unwrap(), 1500);
    // Record 1000's first byte flipped in the bucket: named by a read and by verify.
    let store = loaderx_core::Store::open(&local).unwrap();
    let at = 64 + 16 * 1000;
    let index = std::fs::read(local.join("index.zr")).unwrap();
    let offset =
        u64::from_le_bytes([index[at], index[at + 1], index[at + 2], index[at + 3], index[at + 4], 0, 0, 0]);
    drop(store);
    let object = server.root.join("bucket/compact/0.zr");
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[offset as usize] ^= 1;
    std::fs::write(&object, &bytes).unwrap();
    let remote = RemoteStore::open("s3://bucket/compact", server.options()).unwrap();
    assert!(matches!(remote.gather(&[999, 1000]), Err(Error::CorruptRecord { index: 1000, .. })));
    assert!(matches!(remote.verify(), Err(Error::CorruptRecord { index: 1000, .. })));
}

#[test]
fn damage_missing_objects_a_stopped_server_and_wrong_keys_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    let local = dense(tmp.path(), Codec::Raw);
    let first = push(&local, "s3://bucket/d", opts.clone(), |_| {}).unwrap();
    // A second push restarts: the chunk files already there (same size) are skipped, and not
    // counted as uploaded (look 145, L145-2), though progress covers them.
    let sent = std::cell::Cell::new(0);
    let again = push(&local, "s3://bucket/d", opts.clone(), |n| sent.set(n)).unwrap();
    // One chunk: 3,000 records of 16 bytes.
    let chunks = std::fs::metadata(local.join("0.zr")).unwrap().len();
    assert!(!local.join("1.zr").exists());
    assert!(chunks > 0 && again == first - chunks, "{first} {again} {chunks}");
    assert_eq!(sent.get(), first, "progress covers what was there already");
    // A flipped byte in the server's copy of chunk 0: the record's checksum catches it.
    let chunk = server.root.join("bucket/d/0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[16 * 5 + 3] ^= 0x40;
    std::fs::write(&chunk, &bytes).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/d", opts.clone()).unwrap();
    let e = remote.get_batch(&[4, 5, 6]).unwrap_err();
    // A dense raw dataset is fixed-stride: its block's checksum catches it, naming the first
    // record asked for in the block.
    assert!(matches!(&e, Error::CorruptRecord { index: 4, .. }), "{e}");
    // No such store, no such bucket: not a store, naming the URL.
    let e = DenseSource::open_remote("s3://bucket/nothing-here", opts.clone()).unwrap_err();
    assert!(
        matches!(&e, Error::NotAStore { path, .. } if path.to_string_lossy().contains("nothing-here")),
        "{e}"
    );
    let e = RemoteStore::open("s3://no-such-bucket/d", opts.clone()).unwrap_err();
    assert!(matches!(&e, Error::NotAStore { .. }) && e.to_string().contains("s3://no-such-bucket/d"), "{e}");
    // Objects that are not a store: an index.zr of text.
    let junk = tmp.path().join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("index.zr"), b"these are not the bytes of an index").unwrap();
    push(&junk, "s3://bucket/junk", opts.clone(), |_| {}).unwrap();
    let e = RemoteStore::open("s3://bucket/junk", opts.clone()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, .. } if path.to_string_lossy().ends_with("junk/index.zr")),
        "{e}"
    );
    // No credentials (unsigned requests): refused by the server, naming the URL.
    let e = RemoteStore::open("s3://bucket/d", opts.clone().credentials("", "").anonymous(true)).unwrap_err();
    assert!(matches!(&e, Error::Remote { url, .. } if url.contains("bucket/d")), "{e}");
    // Wrong keys: refused, and the error shows neither key.
    let wrong = opts.clone().credentials(KEY, "not-the-secret-at-all");
    let e = DenseSource::open_remote("s3://bucket/d", wrong).unwrap_err().to_string();
    assert!(!e.contains("not-the-secret-at-all") && !e.contains(SECRET), "{e}");
    // A bad URL.
    assert!(matches!(
        DenseSource::open_remote("s3://bucket/../x", opts.clone()),
        Err(Error::InvalidArgument(m)) if m.contains("without `.` or `..`")
    ));
    // No store at the prefix: not a store, naming the URL.
    let ok = DenseSource::open_remote("s3://bucket/data-none", opts.clone());
    assert!(
        matches!(ok, Err(Error::NotAStore { path, .. }) if path.to_string_lossy() == "s3://bucket/data-none")
    );
    // The server stopped: a request fails after its retries, naming the object and range.
    let fresh = tmp.path().join("fresh");
    let fresh_local = dense(&fresh, Codec::Raw);
    push(&fresh_local, "s3://bucket/fresh", opts.clone(), |_| {}).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/fresh", opts).unwrap();
    server.stop();
    let e = remote.get_batch(&[1]).unwrap_err();
    assert!(matches!(&e, Error::Remote { url, range: Some(_), .. } if url.ends_with("fresh/0.zr")), "{e}");
}

/// v1 stores (raw, zstd, zstd_dict, dense and ragged) pushed (only the committed prefix of
/// `meta.zr`) and read back record for record, directly and through the page cache.
#[test]
fn v1_stores_read_back_remotely() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    for (i, &codec) in Format::V1.codecs().iter().enumerate() {
        let p = tmp.path().join(format!("v1-{i}"));
        let mut w =
            DatasetWriter::dense::<f32>(&p, vec![8], WriteOptions::new().codec(codec).format(Format::V1))
                .unwrap();
        w.append(&(0..8 * 2500).map(|v| (v % 613) as f32).collect::<Vec<f32>>()).unwrap();
        w.finish().unwrap();
        assert!(p.join("meta.zr").exists(), "a v1 store");
        let url = format!("s3://bucket/v1-{i}");
        push(&p, &url, server.options(), |_| {}).unwrap();
        let local = DenseSource::open(&p).unwrap();
        let idx: Vec<u32> = (0..2500u32).map(|i| i.wrapping_mul(2_654_435_761) % 2500).collect();
        for opts in [server.options(), server.options().cache(&cache, 1 << 26).page_size(8192)] {
            let remote = DenseSource::open_remote(&url, opts).unwrap();
            assert_eq!(remote.len(), 2500);
            assert_eq!(remote.get_batch(&idx).unwrap(), local.get_batch(&idx).unwrap(), "{codec:?}");
        }
        let meta = server.root.join(format!("bucket/v1-{i}/meta.zr"));
        assert_eq!(std::fs::metadata(meta).unwrap().len(), 16 * 2501, "only the committed prefix went up");
    }
    let p = tmp.path().join("v1-ragged");
    let mut w =
        DatasetWriter::ragged::<i32>(&p, vec![], WriteOptions::new().codec(Codec::Zstd).format(Format::V1))
            .unwrap();
    for i in 0..900i32 {
        w.append_record(&vec![i; (i % 13) as usize]).unwrap();
    }
    w.finish().unwrap();
    push(&p, "s3://bucket/v1-ragged", server.options(), |_| {}).unwrap();
    let idx: Vec<u32> = (0..900).rev().step_by(2).collect();
    let remote = RaggedSource::open_remote("s3://bucket/v1-ragged", server.options()).unwrap();
    assert_eq!(remote.get_batch(&idx).unwrap(), RaggedSource::open(&p).unwrap().get_batch(&idx).unwrap());
}

/// A chunk file over the multipart threshold goes up in parts and reads back intact.
#[test]
fn a_large_chunk_goes_up_in_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = tmp.path().join("big");
    let mut w = DatasetWriter::dense::<u8>(&p, vec![4096], WriteOptions::new().codec(Codec::Raw)).unwrap();
    let data: Vec<u8> = (0..9000 * 4096).map(|i| (i % 251) as u8).collect();
    w.append(&data).unwrap();
    w.finish().unwrap();
    assert!(std::fs::metadata(p.join("0.zr")).unwrap().len() > 32 << 20);
    push(&p, "s3://bucket/big", server.options(), |_| {}).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/big", server.options()).unwrap();
    let got = remote.get_batch(&[0, 8999, 4500]).unwrap();
    let want = DenseSource::open(&p).unwrap().get_batch(&[0, 8999, 4500]).unwrap();
    assert_eq!(got, want);
}

/// The index is cached locally after the first open and used while the object's ETag matches;
/// a store pushed anew under the same URL is fetched again (its ETag changed).
#[test]
fn the_index_is_cached_by_etag_and_refetched_when_the_store_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    let small = tmp.path().join("small");
    let mut w = DatasetWriter::dense::<u32>(&small, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..100u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let url = format!("s3://bucket/cache-test-{}", std::process::id());
    push(&small, &url, opts.clone(), |_| {}).unwrap();
    let first = RemoteStore::open(&url, opts.clone()).unwrap();
    let cached = first.index_cache();
    assert!(cached.is_file(), "cached at {}", cached.display());
    // The tag and the index in one file (look 115, L115-1).
    let file = std::fs::read(&cached).unwrap();
    assert!(
        file.starts_with(b"LXIDXC1\n") && file.ends_with(&std::fs::read(small.join("index.zr")).unwrap())
    );
    // Another version's index under this one's tag (what two files written apart could be
    // left holding): a mismatch of the lengths, so fetched again, never used.
    let mut stale = file.clone();
    stale.truncate(file.len() - 8);
    std::fs::write(&cached, &stale).unwrap();
    assert_eq!(RemoteStore::open(&url, opts.clone()).unwrap().len(), 100, "fetched again");
    assert_eq!(std::fs::read(&cached).unwrap(), file, "and cached again");
    assert_eq!(RemoteStore::open(&url, opts.clone()).unwrap().len(), 100, "read from the cache");
    // The same URL, another store: 150 records.
    let bigger = tmp.path().join("bigger");
    let mut w = DatasetWriter::dense::<u32>(&bigger, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..150u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    push(&bigger, &url, opts.clone(), |_| {}).unwrap();
    let again = DenseSource::open_remote(&url, opts.clone()).unwrap();
    assert_eq!(again.len(), 150, "the changed index is fetched, not the stale cache used");
    let got = again.get_batch(&[149]).unwrap();
    assert_eq!(got.as_slice::<u32>().unwrap(), &[149]);
    // L115-1: two readers caching two versions at once left the old index (`index.zr`) under
    // the new tag (`etag`), the objects of the same size: every later reader took 100 records.
    // Those files are not the cache's now.
    let file = std::fs::read(&cached).unwrap();
    let tag_len = usize::from(u16::from_le_bytes([file[8], file[9]]));
    let dir = cached.parent().unwrap();
    std::fs::write(dir.join("etag"), &file[10..10 + tag_len]).unwrap();
    std::fs::write(dir.join("index.zr"), std::fs::read(small.join("index.zr")).unwrap()).unwrap();
    std::fs::remove_file(&cached).unwrap();
    // A killed reader's temporary (look 116, L116-2): an old one is reclaimed at the next write,
    // a recent one (another reader's, maybe still writing) kept.
    let (stale, recent) = (dir.join("index.cache.1.0.tmp"), dir.join("index.cache.2.0.tmp"));
    for t in [&stale, &recent] {
        std::fs::write(t, b"part of an index").unwrap();
    }
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(an_hour_ago).unwrap();
    assert_eq!(DenseSource::open_remote(&url, opts).unwrap().len(), 150);
    assert!(!stale.exists() && recent.exists());
}

/// Another store of the same sizes pushed under the same URL replaces every chunk: a chunk is
/// skipped only when the manifests give it the same checksum.
#[test]
fn a_different_store_of_the_same_size_is_uploaded_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    let write = |name: &str, base: u32| {
        let p = tmp.path().join(name);
        let mut w = DatasetWriter::dense::<u32>(&p, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
        w.append(&(base..base + 100).collect::<Vec<_>>()).unwrap();
        w.finish().unwrap();
        p
    };
    let (a, b) = (write("a", 0), write("b", 1000));
    assert_eq!(
        std::fs::metadata(a.join("0.zr")).unwrap().len(),
        std::fs::metadata(b.join("0.zr")).unwrap().len()
    );
    push(&a, "s3://bucket/same", opts.clone(), |_| {}).unwrap();
    push(&b, "s3://bucket/same", opts.clone(), |_| {}).unwrap();
    let got = DenseSource::open_remote("s3://bucket/same", opts).unwrap().get_batch(&[0, 99]).unwrap();
    assert_eq!(got.as_slice::<u32>().unwrap(), &[1000, 1099]);
}

/// 503 SlowDown answers, dropped connections and delays are retried and the data is right; a
/// server stopped under a batch is a typed error, and the same reader recovers when it returns.
#[test]
fn faults_are_retried_and_a_restarted_server_is_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s3");
    let clean = Server::start(&root);
    let local = dense(tmp.path(), Codec::Zstd);
    push(&local, "s3://bucket/faulty", clean.options(), |_| {}).unwrap();
    let faults =
        Arc::new(Faults { every: 10, delay: std::time::Duration::from_millis(2), ..Faults::default() });
    let mut faulty = Server::start_on(&root, 0, Some(Arc::clone(&faults)));
    let opts = faulty.options().retries(8).max_request(2048).max_gap(0);
    let remote = DenseSource::open_remote("s3://bucket/faulty", opts.clone()).unwrap();
    let want = DenseSource::open(&local).unwrap();
    let idx: Vec<u32> = (0..3000u32).step_by(7).collect();
    assert_eq!(remote.get_batch(&idx).unwrap(), want.get_batch(&idx).unwrap());
    assert!(faults.injected.load(Ordering::Relaxed) >= 4, "{faults:?}");
    // Stopped while a batch waits on slow requests: an error naming a chunk and range.
    let port = faulty.port();
    faulty.stop();
    let slow = Arc::new(Faults { delay: std::time::Duration::from_millis(300), ..Faults::default() });
    let mut server = Server::start_on(&root, port, Some(slow));
    let opts = server.options().retries(1).timeout(std::time::Duration::from_secs(2));
    let reader =
        Arc::new(DenseSource::open_remote("s3://bucket/faulty", opts.max_request(1024).max_gap(0)).unwrap());
    let r = Arc::clone(&reader);
    let batch = std::thread::spawn(move || r.get_batch(&(0..3000u32).step_by(5).collect::<Vec<_>>()));
    std::thread::sleep(std::time::Duration::from_millis(100));
    server.stop();
    let e = batch.join().unwrap().unwrap_err();
    assert!(matches!(&e, Error::Remote { url, .. } if url.contains("faulty/0.zr")), "{e}");
    // Back on the same port: the same reader reads again.
    let _back = Server::start_on(&root, port, None);
    assert_eq!(reader.get_batch(&[1, 2999]).unwrap(), want.get_batch(&[1, 2999]).unwrap());
}

/// A chunk object replaced while a reader has the store open: its next request is a typed
/// consistency error, with and without the cache, never records of two versions.
#[test]
fn a_chunk_replaced_under_a_reader_is_a_consistency_error() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let write = |name: &str, base: u32| {
        let p = tmp.path().join(name);
        let mut w = DatasetWriter::dense::<u32>(&p, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
        w.append(&(base..base + 5000).collect::<Vec<_>>()).unwrap();
        w.finish().unwrap();
        p
    };
    let (a, b) = (write("a", 0), write("b", 100_000));
    let cache = tmp.path().join("cache");
    for (url, opts) in [
        ("s3://bucket/swap", server.options()),
        ("s3://bucket/swap-cached", server.options().cache(&cache, 1 << 20).page_size(4096)),
    ] {
        push(&a, url, server.options(), |_| {}).unwrap();
        let reader = DenseSource::open_remote(url, opts).unwrap();
        assert_eq!(reader.get_batch(&[0]).unwrap().as_slice::<u32>().unwrap(), &[0]);
        push(&b, url, server.options(), |_| {}).unwrap();
        let e = reader.get_batch(&[4000]).unwrap_err();
        assert!(matches!(&e, Error::Changed { url: u, .. } if u.ends_with("/0.zr")), "{url}: {e}");
    }
}

/// A dense zstd dataset at `p` of the records `[i, 3 i]` for `i` in `range`.
fn pairs(p: &std::path::Path, range: std::ops::Range<u32>) -> std::path::PathBuf {
    let mut w = DatasetWriter::dense::<u32>(p, vec![2], WriteOptions::new().codec(Codec::Zstd)).unwrap();
    w.append(&range.flat_map(|i| [i, i * 3]).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    p.to_path_buf()
}

/// A store set pushed as one directory (its parts go to the URLs its manifest names relative to
/// it) opens remotely as one dataset, through the datasets and `open_stream` with explicit
/// options; a part replaced by one of another length is an error naming it.
#[test]
fn a_store_set_pushed_whole_opens_remotely_as_one_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let part = |name: &str, range: std::ops::Range<u32>| pairs(&tmp.path().join("parts").join(name), range);
    let parts = [part("p0", 0..700), part("p1", 700..1000), part("p2", 1000..1800)];
    let set = tmp.path().join("sets").join("all");
    loaderx_core::stitch(&parts, &set).unwrap();
    push(&set, "s3://bucket/sets/all", server.options(), |_| {}).unwrap();
    assert!(server.root.join("bucket/parts/p1/index.zr").is_file(), "the parts went up beside the set");
    let local = DenseSource::open(&set).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/sets/all", server.options()).unwrap();
    assert_eq!(remote.len(), 1800);
    let idx: Vec<u32> = (0..1800u32).map(|i| i.wrapping_mul(2_654_435_761) % 1800).collect();
    assert_eq!(remote.get_batch(&idx).unwrap(), local.get_batch(&idx).unwrap());
    // open_stream on the URL with explicit options (no environment), and a ragged dataset too.
    let rag = ragged(tmp.path());
    push(&rag, "s3://bucket/r", server.options(), |_| {}).unwrap();
    let mut a = DataLoader::builder()
        .remote_options(server.options())
        .open_stream("x", "s3://bucket/sets/all")
        .batch_size(50)
        .seed(9)
        .build()
        .unwrap();
    let mut b = DataLoader::builder().open_stream("x", &set).batch_size(50).seed(9).build().unwrap();
    for _ in 0..4 {
        assert_eq!(a.next_batch().unwrap().unwrap().get("x"), b.next_batch().unwrap().unwrap().get("x"));
    }
    let r = DataLoader::builder().remote_options(server.options()).open_stream("t", "s3://bucket/r");
    let mut r = r.batch_size(8).build().unwrap();
    assert_eq!(r.next_batch().unwrap().unwrap().get_ragged("t").unwrap().len(), 8);
    // A part replaced by a store of another length: the set no longer holds.
    let other = part("other", 0..10);
    push(&other, "s3://bucket/parts/p1", server.options(), |_| {}).unwrap();
    let e = DenseSource::open_remote("s3://bucket/sets/all", server.options()).unwrap_err();
    assert!(matches!(&e, Error::Schema { path, .. } if path.to_string_lossy().ends_with("parts/p1")), "{e}");
}

/// A set stitched on object storage over parts pushed one by one (what a distributed writer
/// does): read as one dataset, equal to the same set stitched locally; a part of another schema
/// or bucket, or the set itself as a part, refused; a rerun's stitch replaces the set; the
/// parts listed and removed by prefix, never a bucket's root.
#[test]
fn a_store_set_stitched_remotely_over_pushed_parts_reads_as_one_dataset() {
    use loaderx_core::remote::{list_dirs, remove_prefix};
    use loaderx_core::stitch_remote;
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let part = |name: &str, range: std::ops::Range<u32>| {
        let p = pairs(&tmp.path().join("parts").join(name), range);
        push(&p, &format!("s3://bucket/out/_parts/x/{name}"), server.options(), |_| {}).unwrap();
        p
    };
    let parts = [part("p0", 0..700), part("p1", 700..1000), part("p2", 1000..1800)];
    let urls: Vec<String> =
        ["p0", "p1", "p2"].iter().map(|n| format!("s3://bucket/out/_parts/x/{n}")).collect();
    let s = stitch_remote(&urls, "s3://bucket/out/x", server.options()).unwrap();
    assert_eq!((s.parts, s.records), (3, 1800));
    let local = tmp.path().join("local-set");
    loaderx_core::stitch(&parts, &local).unwrap();
    let want = DenseSource::open(&local).unwrap();
    let got = DenseSource::open_remote("s3://bucket/out/x", server.options()).unwrap();
    assert_eq!(got.len(), 1800);
    let idx: Vec<u32> = (0..1800u32).map(|i| i.wrapping_mul(2_654_435_761) % 1800).collect();
    assert_eq!(got.get_batch(&idx).unwrap(), want.get_batch(&idx).unwrap());
    // The manifest names the parts relative to the set, as a local stitch does.
    let manifest = std::fs::read(server.root.join("bucket/out/x/storeset.msgpack")).unwrap();
    let m = loaderx_core::format::storeset::SetManifest::decode(&manifest).unwrap();
    assert_eq!(
        m.parts.iter().map(|p| p.path.as_str()).collect::<Vec<_>>(),
        ["../_parts/x/p0", "../_parts/x/p1", "../_parts/x/p2"]
    );
    // A rerun over two of the parts replaces the set.
    stitch_remote(&urls[1..], "s3://bucket/out/x", server.options()).unwrap();
    assert_eq!(DenseSource::open_remote("s3://bucket/out/x", server.options()).unwrap().len(), 1100);
    // Refusals, nothing written: another schema, another bucket, the set as its own part, none.
    let other = tmp.path().join("other");
    let mut w = DatasetWriter::dense::<u32>(&other, vec![3], WriteOptions::new()).unwrap();
    w.append(&[1u32, 2, 3]).unwrap();
    w.finish().unwrap();
    push(&other, "s3://bucket/out/_parts/x/q", server.options(), |_| {}).unwrap();
    let mixed = [urls[0].clone(), "s3://bucket/out/_parts/x/q".to_string()];
    let e = stitch_remote(&mixed, "s3://bucket/out/y", server.options()).unwrap_err();
    assert!(
        matches!(&e, Error::Schema { path, .. } if path.to_string_lossy().ends_with("_parts/x/q")),
        "{e}"
    );
    let e = stitch_remote(&["s3://other/p0".to_string()], "s3://bucket/out/y", server.options()).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("bucket")), "{e}");
    let e =
        stitch_remote(&["s3://bucket/out".to_string()], "s3://bucket/out/y", server.options()).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("one above it")), "{e}");
    assert!(matches!(
        stitch_remote(&[], "s3://bucket/out/y", server.options()),
        Err(Error::InvalidArgument(m)) if m.contains("at least one part")
    ));
    assert!(!server.root.join("bucket/out/y").exists(), "a refused stitch wrote nothing");
    // Listing and removal by prefix.
    assert_eq!(list_dirs("s3://bucket/out/_parts/x", server.options()).unwrap(), ["p0", "p1", "p2", "q"]);
    assert!(remove_prefix("s3://bucket/out/_parts/x/q", server.options()).unwrap() >= 3);
    assert_eq!(list_dirs("s3://bucket/out/_parts/x", server.options()).unwrap(), ["p0", "p1", "p2"]);
    assert!(matches!(remove_prefix("s3://bucket", server.options()), Err(Error::InvalidArgument(_))));
    assert!(matches!(remove_prefix("s3://bucket/", server.options()), Err(Error::InvalidArgument(_))));
    assert_eq!(DenseSource::open_remote("s3://bucket/out/x", server.options()).unwrap().len(), 1100);
}

/// The loader's prefetch threads request the next steps' records before the consumer asks
/// (counted on the store); `Store::open` on a URL says where to open it.
#[test]
fn the_loader_fetches_the_next_steps_ahead() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw);
    push(&local, "s3://bucket/ahead", server.options(), |_| {}).unwrap();
    // One request per record: requests count records.
    let source =
        DenseSource::open_remote("s3://bucket/ahead", server.options().max_gap(0).max_request(1)).unwrap();
    let stats = || source.remote().unwrap().stats().requests;
    let opened = stats();
    let mut loader = DataLoader::builder()
        .stream("x", source.clone())
        .batch_size(8)
        .prefetch(3)
        .threads(2)
        .build()
        .unwrap();
    loader.next_batch().unwrap().unwrap();
    // Steps 1..=3 are fetched without being asked for (bounded wait: 10 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stats() - opened < 8 * 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(stats() - opened >= 8 * 4, "{} records requested after one batch", stats() - opened);
    let e = loaderx_core::Store::open("s3://bucket/ahead").unwrap_err();
    assert!(e.to_string().contains("RemoteStore"), "{e}");
}

/// A remote stitch whose manifest cannot be put leaves the set's schema as it was (review 48,
/// finding 6: the new schema was put first and stayed, beside the old manifest).
#[test]
fn a_failed_remote_stitch_leaves_the_old_sets_schema() {
    use loaderx_core::stitch_remote;
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = pairs(&tmp.path().join("p0"), 0..100);
    push(&p, "s3://bucket/out/_parts/x/p0", server.options(), |_| {}).unwrap();
    stitch_remote(&["s3://bucket/out/_parts/x/p0".to_string()], "s3://bucket/out/x", server.options())
        .unwrap();
    let set = server.root.join("bucket/out/x");
    let schema = std::fs::read(set.join("schema.msgpack")).unwrap();
    let other = tmp.path().join("other");
    let mut w = DatasetWriter::dense::<u32>(&other, vec![3], WriteOptions::new()).unwrap();
    w.append(&[1u32, 2, 3]).unwrap();
    w.finish().unwrap();
    push(&other, "s3://bucket/out/_parts/x/q", server.options(), |_| {}).unwrap();
    // The manifest's object made unwritable: a directory holding a file where it is stored.
    std::fs::remove_file(set.join("storeset.msgpack")).unwrap();
    std::fs::create_dir_all(set.join("storeset.msgpack/held")).unwrap();
    let e = stitch_remote(&["s3://bucket/out/_parts/x/q".to_string()], "s3://bucket/out/x", server.options());
    assert!(matches!(e, Err(Error::Remote { .. })), "{e:?}");
    assert_eq!(std::fs::read(set.join("schema.msgpack")).unwrap(), schema, "the old schema put back");
}

/// Look 77's P1: a push of another store to the same URL, stopped after it replaced chunk 0 with
/// one of the same length, left the first store's manifest vouching for that chunk; pushing the
/// first store again skipped it, said it had pushed, and its records failed their checksums. The
/// remote manifest now goes before the first chunk object is replaced.
#[test]
fn a_push_stopped_mid_way_leaves_no_chunk_a_later_push_skips() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    // Two stores of one shape and other bytes: their chunk 0 is of one length.
    for (dir, byte) in [(&a, 1u8), (&b, 2u8)] {
        let s = loaderx_core::Store::create(dir, loaderx_core::StoreOptions::new()).unwrap();
        let records: Vec<Vec<u8>> = (0..50u8).map(|i| vec![byte.wrapping_add(i); 100]).collect();
        s.append(&records.iter().map(Vec::as_slice).collect::<Vec<_>>(), Codec::Raw).unwrap();
    }
    let url = "s3://bucket/same";
    push(&a, url, server.options(), |_| {}).unwrap();
    // B's push stops after its first object, chunk 0, as a kill would stop it.
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        push(&b, url, server.options(), |_| panic!("stopped after the first object"))
    }));
    assert!(stopped.is_err());
    push(&a, url, server.options(), |_| {}).unwrap();
    let remote = RemoteStore::open(url, server.options()).unwrap();
    assert_eq!(remote.verify().unwrap(), 50);
    assert_eq!(
        std::fs::read(server.root.join("bucket/same/0.zr")).unwrap(),
        std::fs::read(a.join("0.zr")).unwrap()
    );
}

/// Look 78's F1: a store set pushed or stitched to a URL holding a store said it was written,
/// and every reader went on reading the store (they open a store's index first). Refused now,
/// nothing put; the store reads as before.
#[test]
fn a_store_set_is_never_put_where_a_store_is() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let parts: Vec<_> = (0..2u32)
        .map(|p| {
            let part = tmp.path().join(format!("set/p{p}"));
            let mut w = DatasetWriter::dense::<u32>(&part, vec![], WriteOptions::new()).unwrap();
            w.append(&[p, p + 10]).unwrap();
            w.finish().unwrap();
            part
        })
        .collect();
    loaderx_core::stitch(&parts, tmp.path().join("set/all")).unwrap();
    let store = tmp.path().join("store");
    let mut w = DatasetWriter::dense::<u32>(&store, vec![], WriteOptions::new()).unwrap();
    w.append(&[7u32, 8, 9]).unwrap();
    w.finish().unwrap();
    let url = "s3://bucket/u";
    push(&store, url, server.options(), |_| {}).unwrap();
    let e = push(&tmp.path().join("set/all"), url, server.options(), |_| {}).unwrap_err();
    assert!(matches!(&e, Error::NotReplaceable { .. }) && e.to_string().contains("holds a store"), "{e}");
    push(&parts[0], "s3://bucket/p0", server.options(), |_| {}).unwrap();
    let e = loaderx_core::stitch_remote(&["s3://bucket/p0".to_string()], url, server.options()).unwrap_err();
    assert!(e.to_string().contains("holds a store"), "{e}");
    assert!(!server.root.join("bucket/u/storeset.msgpack").exists());
    let back = DenseSource::open_remote(url, server.options()).unwrap();
    assert_eq!(back.get_batch(&[0, 1, 2]).unwrap().as_slice::<u32>().unwrap(), [7, 8, 9]);
}
