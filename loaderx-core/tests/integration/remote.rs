//! Remote stores against a real S3-compatible server started here: s3s-fs on 127.0.0.1 and a
//! free port, stores uploaded through the S3 API (`remote::push`), then read with
//! `DenseSource::open_remote` / `RaggedSource::open_remote` and the loader; damage, missing
//! objects, a stopped server and wrong keys as typed errors without a credential in them.

use std::path::{Path, PathBuf};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use loaderx_core::remote::{RemoteOptions, RemoteStore, push};
use loaderx_core::{
    Codec, DataLoader, DatasetWriter, DenseSource, Error, Format, RaggedSource, WriteOptions,
};

const KEY: &str = "AKIDLOADERXTEST";
const SECRET: &str = "sEcReT-loaderx-test-key-0123456789";

/// An S3 server over `root` (a bucket is a directory), on a runtime that stops when dropped.
struct Server {
    endpoint: String,
    root: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    fn start(root: &Path) -> Server {
        std::fs::create_dir_all(root.join("bucket")).unwrap();
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("{e:?}")).unwrap();
        let mut b = s3s::service::S3ServiceBuilder::new(fs);
        b.set_auth(s3s::auth::SimpleAuth::from_single(KEY, SECRET));
        let service = b.build();
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else { break };
                let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        Server { endpoint, root: root.to_path_buf(), runtime: Some(runtime) }
    }

    fn options(&self) -> RemoteOptions {
        RemoteOptions::new()
            .endpoint(&self.endpoint)
            .region("us-east-1")
            .credentials(KEY, SECRET)
            .allow_http(true)
            .retries(1)
            .timeout(std::time::Duration::from_secs(5))
    }

    fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn dense(dir: &Path, codec: Codec) -> PathBuf {
    let p = dir.join(format!("dense-{codec:?}"));
    let mut w = DatasetWriter::dense::<f32>(&p, vec![4], WriteOptions::new().codec(codec)).unwrap();
    w.append(&(0..4 * 3000).map(|v| (v % 977) as f32 * 0.25).collect::<Vec<f32>>()).unwrap();
    w.finish().unwrap();
    p
}

fn ragged(dir: &Path) -> PathBuf {
    let p = dir.join("ragged");
    let mut w = DatasetWriter::ragged::<i32>(&p, vec![], WriteOptions::new().codec(Codec::Zstd)).unwrap();
    for i in 0..2000i32 {
        w.append_record(&vec![i; (i % 17) as usize]).unwrap();
    }
    w.finish().unwrap();
    p
}

#[test]
fn pushed_stores_read_back_record_for_record_through_the_datasets_and_the_loader() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    for codec in [Codec::Raw, Codec::Zstd, Codec::Lz4] {
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
            assert_eq!(a.next_batch().unwrap().get("x"), b.next_batch().unwrap().get("x"));
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

#[test]
fn damage_missing_objects_a_stopped_server_and_wrong_keys_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Server::start(&tmp.path().join("s3"));
    let opts = server.options();
    let local = dense(tmp.path(), Codec::Raw);
    push(&local, "s3://bucket/d", opts.clone(), |_| {}).unwrap();
    // A second push restarts: the chunk files already there (same size) are skipped.
    let sent = std::cell::Cell::new(0);
    push(&local, "s3://bucket/d", opts.clone(), |n| sent.set(n)).unwrap();
    assert!(sent.get() > 0, "progress reported");
    // A flipped byte in the server's copy of chunk 0: the record's checksum catches it.
    let chunk = server.root.join("bucket/d/0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[16 * 5 + 3] ^= 0x40;
    std::fs::write(&chunk, &bytes).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/d", opts.clone()).unwrap();
    let e = remote.get_batch(&[4, 5, 6]).unwrap_err();
    assert!(matches!(&e, Error::CorruptRecord { index: 5, .. }), "{e}");
    // No such store; a v1 store.
    let e = DenseSource::open_remote("s3://bucket/nothing-here", opts.clone()).unwrap_err();
    assert!(matches!(&e, Error::Remote { url, .. } if url.contains("nothing-here")), "{e}");
    let v1 = tmp.path().join("v1");
    let mut w = DatasetWriter::dense::<u8>(&v1, vec![], WriteOptions::new().format(Format::V1)).unwrap();
    w.append(&[1u8, 2, 3]).unwrap();
    w.finish().unwrap();
    let e = push(&v1, "s3://bucket/v1", opts.clone(), |_| {}).unwrap_err();
    assert!(e.to_string().contains("v1") && e.to_string().contains("migrate"), "{e}");
    // Wrong keys: refused, and the error shows neither key.
    let wrong = opts.clone().credentials(KEY, "not-the-secret-at-all");
    let e = DenseSource::open_remote("s3://bucket/d", wrong).unwrap_err().to_string();
    assert!(!e.contains("not-the-secret-at-all") && !e.contains(SECRET), "{e}");
    // A bad URL.
    assert!(DenseSource::open_remote("s3://bucket/../x", opts.clone()).is_err());
    // The server stopped: a request fails after its retries, naming the object and range.
    let ok = DenseSource::open_remote("s3://bucket/data-none", opts.clone());
    assert!(ok.is_err());
    let fresh = tmp.path().join("fresh");
    let fresh_local = dense(&fresh, Codec::Raw);
    push(&fresh_local, "s3://bucket/fresh", opts.clone(), |_| {}).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/fresh", opts).unwrap();
    server.stop();
    let e = remote.get_batch(&[1]).unwrap_err();
    assert!(matches!(&e, Error::Remote { url, range: Some(_), .. } if url.ends_with("fresh/0.zr")), "{e}");
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
    assert_eq!(std::fs::read(&cached).unwrap(), std::fs::read(small.join("index.zr")).unwrap());
    assert_eq!(RemoteStore::open(&url, opts.clone()).unwrap().len(), 100, "read from the cache");
    // The same URL, another store: 150 records.
    let bigger = tmp.path().join("bigger");
    let mut w = DatasetWriter::dense::<u32>(&bigger, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..150u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    push(&bigger, &url, opts.clone(), |_| {}).unwrap();
    let again = DenseSource::open_remote(&url, opts).unwrap();
    assert_eq!(again.len(), 150, "the changed index is fetched, not the stale cache used");
    let got = again.get_batch(&[149]).unwrap();
    assert_eq!(got.as_slice::<u32>().unwrap(), &[149]);
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
