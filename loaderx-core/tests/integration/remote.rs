//! Remote stores against a real S3-compatible server started here: s3s-fs on 127.0.0.1 and a
//! free port, stores uploaded through the S3 API (`remote::push`), then read with
//! `DenseSource::open_remote` / `RaggedSource::open_remote` and the loader; damage, missing
//! objects, a stopped server and wrong keys as typed errors without a credential in them; the
//! page cache (second epochs without requests, its byte limit, eviction, two processes sharing
//! it); faults (503 SlowDown, dropped connections, delays, a server stopped and restarted) and a
//! chunk replaced under a reader. Hostile servers, indexes, set manifests and endpoints are in
//! `remote_hostile.rs`, on the same server and its fault injector.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use loaderx_core::remote::{RemoteOptions, RemoteStats, RemoteStore, push};
use loaderx_core::{
    Codec, DataLoader, DatasetWriter, DenseSource, Error, Format, RaggedSource, WriteOptions,
};

pub(crate) const KEY: &str = "AKIDLOADERXTEST";
pub(crate) const SECRET: &str = "sEcReT-loaderx-test-key-0123456789";

/// An S3 server over `root` (a bucket is a directory), on a runtime that stops when dropped.
pub(crate) struct Server {
    pub(crate) endpoint: String,
    pub(crate) root: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
}

/// Faults a server injects, by the number of the request: every `every`-th answered 503
/// SlowDown, the one after it dropped (the connection closed, no response), and every request
/// delayed by `delay`; and the lies of `lies`, told of the objects they name.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub(crate) every: u64,
    pub(crate) delay: std::time::Duration,
    pub(crate) seen: AtomicU64,
    pub(crate) injected: AtomicU64,
    pub(crate) lies: Vec<Lie>,
    /// Bytes of the bodies sent past what the objects hold ([`Told::Endless`]).
    pub(crate) overrun: Arc<AtomicU64>,
}

/// A lie about the objects whose key ends with `suffix`, told in answer to a GET (and a HEAD,
/// with `head`).
#[derive(Debug, Clone)]
pub(crate) struct Lie {
    pub(crate) suffix: &'static str,
    pub(crate) head: bool,
    pub(crate) told: Told,
}

/// What a lying server says.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Told {
    /// `Content-Length` is this, the body the object's own (sent in two pieces, a pause between,
    /// so that a client sees more than one).
    Length(u64),
    /// The body goes on past the object's bytes, [`OVERRUN_CAP`] bytes more (and
    /// `Content-Length` says so, `Content-Range` stays what was asked): a bound, so that even a
    /// client that reads it all finishes.
    Endless,
}

/// The most an endless body sends past the object.
pub(crate) const OVERRUN_CAP: u64 = 1 << 30;

/// The body of a lying answer: the object's bytes (each piece split in two, a pause between),
/// then, when `overrun` is set, filler up to [`OVERRUN_CAP`] bytes, counted there. Its length is
/// unknown to hyper, so a `Content-Length` header set on the answer is what goes out.
struct Feed {
    inner: s3s::Body,
    inner_done: bool,
    held: Option<bytes::Bytes>,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    overrun: Option<(Arc<AtomicU64>, u64)>,
}

impl hyper::body::Body for Feed {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Some(p) = &mut this.pause {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.pause = None;
        }
        if let Some(rest) = this.held.take() {
            return Poll::Ready(Some(Ok(hyper::body::Frame::data(rest))));
        }
        while !this.inner_done {
            match futures::StreamExt::poll_next_unpin(&mut this.inner, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.inner_done = true,
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(std::io::Error::other(e.to_string()))));
                }
                Poll::Ready(Some(Ok(mut b))) if b.len() >= 2 => {
                    this.held = Some(b.split_off(b.len() / 2));
                    this.pause = Some(Box::pin(tokio::time::sleep(std::time::Duration::from_millis(30))));
                    return Poll::Ready(Some(Ok(hyper::body::Frame::data(b))));
                }
                Poll::Ready(Some(Ok(b))) => return Poll::Ready(Some(Ok(hyper::body::Frame::data(b)))),
            }
        }
        match &mut this.overrun {
            Some((sent, left)) if *left > 0 => {
                let n = (*left).min(64 << 10);
                *left -= n;
                sent.fetch_add(n, Ordering::Relaxed);
                Poll::Ready(Some(Ok(hyper::body::Frame::data(bytes::Bytes::from(vec![0x5a; n as usize])))))
            }
            _ => Poll::Ready(None),
        }
    }
}

/// `reply` to a request of `method` for `path` as the lies of `faults` would have it.
fn tell_lies(
    faults: &Faults,
    method: &hyper::Method,
    path: &str,
    reply: hyper::Response<s3s::Body>,
) -> hyper::Response<s3s::Body> {
    let Some(lie) = faults.lies.iter().find(|l| {
        path.ends_with(l.suffix)
            && (method == hyper::Method::GET || (l.head && method == hyper::Method::HEAD))
    }) else {
        return reply;
    };
    if !reply.status().is_success() {
        return reply;
    }
    faults.injected.fetch_add(1, Ordering::Relaxed);
    let (mut parts, body) = reply.into_parts();
    let overrun = match lie.told {
        Told::Length(n) => {
            parts.headers.insert(hyper::header::CONTENT_LENGTH, hyper::header::HeaderValue::from(n));
            None
        }
        Told::Endless => {
            let real: u64 = parts
                .headers
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            parts
                .headers
                .insert(hyper::header::CONTENT_LENGTH, hyper::header::HeaderValue::from(real + OVERRUN_CAP));
            Some((Arc::clone(&faults.overrun), OVERRUN_CAP))
        }
    };
    if method == hyper::Method::HEAD {
        return hyper::Response::from_parts(parts, body);
    }
    let feed = Feed { inner: body, inner_done: false, held: None, pause: None, overrun };
    hyper::Response::from_parts(parts, s3s::Body::http_body(feed))
}

type Reply = std::result::Result<hyper::Response<s3s::Body>, std::io::Error>;

impl Server {
    pub(crate) fn start(root: &Path) -> Server {
        Server::start_on(root, 0, None)
    }

    /// A server on `port` (0: a free one), injecting `faults`.
    pub(crate) fn start_on(root: &Path, port: u16, faults: Option<Arc<Faults>>) -> Server {
        std::fs::create_dir_all(root.join("bucket")).unwrap();
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("{e:?}")).unwrap();
        let mut b = s3s::service::S3ServiceBuilder::new(fs);
        b.set_auth(s3s::auth::SimpleAuth::from_single(KEY, SECRET));
        let service = b.build();
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port))).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else { break };
                let (service, faults) = (service.clone(), faults.clone());
                let handler = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (service, faults) = (service.clone(), faults.clone());
                    let (method, path) = (req.method().clone(), req.uri().path().to_string());
                    async move {
                        if let Some(f) = &faults {
                            tokio::time::sleep(f.delay).await;
                            let k = f.seen.fetch_add(1, Ordering::Relaxed);
                            if f.every > 0 && k % f.every == 1 {
                                f.injected.fetch_add(1, Ordering::Relaxed);
                                let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
                                            <Message>Please reduce your request rate.</Message></Error>";
                                let reply = hyper::Response::builder()
                                    .status(503)
                                    .body(s3s::Body::from(body.to_string()))
                                    .unwrap();
                                return Reply::Ok(reply);
                            }
                            if f.every > 0 && k % f.every == 2 {
                                f.injected.fetch_add(1, Ordering::Relaxed);
                                return Reply::Err(std::io::Error::other("dropped by the fault injector"));
                            }
                        }
                        let reply = hyper::service::Service::call(&service, req).await;
                        let reply = reply.map_err(|e| std::io::Error::other(format!("{e:?}")))?;
                        Ok(match &faults {
                            Some(f) => tell_lies(f, &method, &path, reply),
                            None => reply,
                        })
                    }
                });
                let conn = http.serve_connection(TokioIo::new(socket), handler).into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        Server { endpoint, root: root.to_path_buf(), runtime: Some(runtime) }
    }

    pub(crate) fn port(&self) -> u16 {
        self.endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub(crate) fn options(&self) -> RemoteOptions {
        RemoteOptions::new()
            .endpoint(&self.endpoint)
            .region("us-east-1")
            .credentials(KEY, SECRET)
            .allow_http(true)
            .retries(1)
            .timeout(std::time::Duration::from_secs(5))
    }

    pub(crate) fn stop(&mut self) {
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

pub(crate) fn dense(dir: &Path, codec: Codec) -> PathBuf {
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

/// Page files in a cache directory: (path, length).
pub(crate) fn pages(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "pg") {
                out.push((p.clone(), e.metadata().unwrap().len()));
            }
        }
    }
    out
}

fn delta(a: RemoteStats, b: RemoteStats) -> RemoteStats {
    RemoteStats {
        requests: b.requests - a.requests,
        bytes_fetched: b.bytes_fetched - a.bytes_fetched,
        pages_hit: b.pages_hit - a.pages_hit,
        pages_filled: b.pages_filled - a.pages_filled,
        pages_evicted: b.pages_evicted - a.pages_evicted,
        cache_errors: b.cache_errors - a.cache_errors,
    }
}

/// The records of every codec and the ragged store read through the page cache equal the local
/// store's; a second epoch sends no request; a second reader of the warm cache sends one HEAD per
/// chunk (its consistency token) and fills nothing.
#[test]
fn the_page_cache_serves_a_second_epoch_without_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    let opts = server.options().cache(&cache, 64 << 20).page_size(4096);
    for codec in [Codec::Raw, Codec::Zstd, Codec::Lz4] {
        let local = dense(tmp.path(), codec);
        let url = format!("s3://bucket/cached-{codec:?}");
        push(&local, &url, server.options(), |_| {}).unwrap();
        let remote = DenseSource::open_remote(&url, opts.clone()).unwrap();
        let local = DenseSource::open(&local).unwrap();
        let idx: Vec<u32> = (0..3000u32).map(|i| i.wrapping_mul(2_654_435_761) % 3000).collect();
        for batch in idx.chunks(256) {
            assert_eq!(remote.get_batch(batch).unwrap(), local.get_batch(batch).unwrap(), "{codec:?}");
        }
    }
    // Raw records of 12 bytes: some run across two 4 KiB pages, read from both in place.
    let odd = tmp.path().join("odd");
    let mut w = DatasetWriter::dense::<u32>(&odd, vec![3], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..3 * 2000u32).map(|v| v.wrapping_mul(2_654_435_761)).collect::<Vec<u32>>()).unwrap();
    w.finish().unwrap();
    push(&odd, "s3://bucket/cached-odd", server.options(), |_| {}).unwrap();
    let remote = DenseSource::open_remote("s3://bucket/cached-odd", opts.clone()).unwrap();
    let idx: Vec<u32> = (0..2000u32).rev().collect();
    assert!(idx.iter().any(|&i| (i * 12) / 4096 != (i * 12 + 11) / 4096), "some record spans pages");
    assert_eq!(remote.get_batch(&idx).unwrap(), DenseSource::open(&odd).unwrap().get_batch(&idx).unwrap());
    let local = ragged(tmp.path());
    push(&local, "s3://bucket/cached-ragged", server.options(), |_| {}).unwrap();
    let remote = RaggedSource::open_remote("s3://bucket/cached-ragged", opts.clone()).unwrap();
    let idx: Vec<u32> = (0..2000).rev().step_by(3).collect();
    assert_eq!(remote.get_batch(&idx).unwrap(), RaggedSource::open(&local).unwrap().get_batch(&idx).unwrap());

    // Counted on the store itself: epoch 1 fills every page once, epoch 2 sends nothing.
    let url = "s3://bucket/cached-Raw";
    let chunk = std::fs::metadata(tmp.path().join("dense-Raw/0.zr")).unwrap().len();
    let all_pages = chunk.div_ceil(4096);
    std::fs::remove_dir_all(&cache).unwrap();
    let store = RemoteStore::open(url, opts.clone()).unwrap();
    let all: Vec<u64> = (0..3000u64).map(|i| i.wrapping_mul(2_654_435_761) % 3000).collect();
    let opened = store.stats();
    let first: Vec<Vec<u8>> = all.chunks(100).flat_map(|b| store.gather(b).unwrap()).collect();
    let epoch1 = delta(opened, store.stats());
    assert_eq!(epoch1.pages_filled, all_pages, "{epoch1:?}");
    assert!(epoch1.requests <= all_pages + 1, "one HEAD, then at most a request per page: {epoch1:?}");
    let before = store.stats();
    let second: Vec<Vec<u8>> = all.chunks(100).flat_map(|b| store.gather(b).unwrap()).collect();
    let epoch2 = delta(before, store.stats());
    assert_eq!(first, second);
    assert_eq!((epoch2.requests, epoch2.bytes_fetched, epoch2.pages_filled), (0, 0, 0), "{epoch2:?}");
    assert!(epoch2.pages_hit > 0);
    // Another reader (as another process would): the pages come from the directory.
    let again = RemoteStore::open(url, opts).unwrap();
    let opened = again.stats();
    let third: Vec<Vec<u8>> = all.chunks(100).flat_map(|b| again.gather(b).unwrap()).collect();
    let cold_open = delta(opened, again.stats());
    assert_eq!(first, third);
    assert_eq!((cold_open.requests, cold_open.pages_filled), (1, 0), "one HEAD of chunk 0: {cold_open:?}");
    assert_eq!(pages(&cache).len() as u64, all_pages);
}

/// The byte limit holds; eviction removes the least recently used pages (a page read by another
/// reader is kept, an older one goes); a page fetched damaged is not cached.
#[test]
fn the_cache_keeps_its_byte_limit_and_evicts_the_least_recently_used() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw); // 16-byte records: 256 to a 4 KiB page
    push(&local, "s3://bucket/lru", server.options(), |_| {}).unwrap();
    let cache = tmp.path().join("cache");
    let opts = server.options().cache(&cache, 5 * 4096).page_size(4096);
    let page_of = |p: u64| vec![p * 256 + 7];
    let page_file = |p: u64| {
        pages(&cache).into_iter().find(|(f, _)| f.file_name().unwrap() == format!("{p}.pg").as_str())
    };
    let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
    let a = RemoteStore::open("s3://bucket/lru", opts.clone()).unwrap();
    for p in 0..4 {
        a.gather(&page_of(p)).unwrap();
        pause();
    }
    assert_eq!(pages(&cache).len(), 4);
    // Page 0 used again by another reader: it becomes the most recently used.
    let b = RemoteStore::open("s3://bucket/lru", opts.clone()).unwrap();
    b.gather(&page_of(0)).unwrap();
    assert_eq!(b.stats().pages_hit, 1);
    pause();
    a.gather(&page_of(4)).unwrap();
    pause();
    assert_eq!(a.stats().pages_evicted, 0, "five pages fit");
    a.gather(&page_of(5)).unwrap();
    assert!(a.stats().pages_evicted >= 2, "{:?}", a.stats());
    assert!(page_file(0).is_some(), "the page used last is kept");
    assert!(page_file(1).is_none() && page_file(2).is_none(), "the oldest go first");
    for p in 6..12 {
        a.gather(&page_of(p)).unwrap();
        let total: u64 = pages(&cache).iter().map(|(_, n)| n).sum();
        assert!(total <= 5 * 4096, "{total} bytes cached, limit {}", 5 * 4096);
    }
    // Records still right after all that eviction, from pages evicted and refetched.
    let want = DenseSource::open(&local).unwrap().get_batch(&[7, 263, 2999]).unwrap();
    let got = DenseSource::open_remote("s3://bucket/lru", opts.clone())
        .unwrap()
        .get_batch(&[7, 263, 2999])
        .unwrap();
    assert_eq!(got, want);
    // A flipped byte on the server: the page that holds it is refused, and not cached.
    let chunk = server.root.join("bucket/lru/0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[16 * 2000 + 1] ^= 0x10;
    std::fs::write(&chunk, &bytes).unwrap();
    let c = RemoteStore::open("s3://bucket/lru", opts.clone()).unwrap();
    let cached = pages(&cache).len();
    let e = c.gather(&[2001]).unwrap_err();
    assert!(matches!(&e, Error::CorruptRecord { index: 2000, .. }), "{e}");
    assert_eq!((c.stats().pages_filled, pages(&cache).len()), (0, cached), "the damaged page is not cached");
    // Bad options.
    let e = RemoteStore::open("s3://bucket/lru", server.options().cache(&cache, 1 << 20).page_size(1000))
        .unwrap_err();
    assert!(e.to_string().contains("4096"), "{e}");
    let e = RemoteStore::open("s3://bucket/lru", server.options().cache(&cache, 100).page_size(4096))
        .unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
}

/// Two processes reading the same store through one cache directory at the same time fetch
/// each page once between them (the stripe locks), and read the right records.
#[test]
fn two_processes_share_one_cache_and_fetch_each_page_once() {
    let records = 40_000u64;
    if let Ok(spec) = std::env::var("LOADERX_TEST_CACHE_CHILD") {
        let [endpoint, cache] = spec.split('|').collect::<Vec<_>>()[..] else { panic!("{spec}") };
        let opts = RemoteOptions::new()
            .endpoint(endpoint)
            .region("us-east-1")
            .credentials(KEY, SECRET)
            .allow_http(true)
            .cache(cache, 1 << 30)
            .page_size(4096);
        let store = RemoteStore::open("s3://bucket/shared", opts).unwrap();
        let all: Vec<u64> = (0..records).collect();
        for batch in all.chunks(128) {
            for (i, r) in batch.iter().zip(store.gather(batch).unwrap()) {
                assert_eq!(r, (*i as u32).to_le_bytes(), "record {i}");
            }
        }
        println!("FILLED {}", store.stats().pages_filled);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = tmp.path().join("shared");
    let mut w = DatasetWriter::dense::<u32>(&local, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..records as u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    push(&local, "s3://bucket/shared", server.options(), |_| {}).unwrap();
    let all_pages = std::fs::metadata(local.join("0.zr")).unwrap().len().div_ceil(4096);
    let cache = tmp.path().join("cache");
    let name = "remote::two_processes_share_one_cache_and_fetch_each_page_once";
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads", "1", "--nocapture"])
                .env("LOADERX_TEST_CACHE_CHILD", format!("{}|{}", server.endpoint, cache.display()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut filled = 0u64;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        // libtest prints the test's output on its "test ... " line.
        let at = text.find("FILLED ").expect("a FILLED line") + "FILLED ".len();
        let n: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
        filled += n.parse::<u64>().unwrap();
    }
    assert_eq!(filled, all_pages, "every page fetched once between the two processes");
    assert_eq!(pages(&cache).len() as u64, all_pages);
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

/// A store set pushed as one directory (its parts go to the URLs its manifest names relative to
/// it) opens remotely as one dataset, through the datasets and `open_stream` with explicit
/// options; a part replaced by one of another length is an error naming it.
#[test]
fn a_store_set_pushed_whole_opens_remotely_as_one_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let part = |name: &str, range: std::ops::Range<u32>| {
        let p = tmp.path().join("parts").join(name);
        let mut w = DatasetWriter::dense::<u32>(&p, vec![2], WriteOptions::new().codec(Codec::Zstd)).unwrap();
        w.append(&range.flat_map(|i| [i, i * 3]).collect::<Vec<_>>()).unwrap();
        w.finish().unwrap();
        p
    };
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
        assert_eq!(a.next_batch().unwrap().get("x"), b.next_batch().unwrap().get("x"));
    }
    let r = DataLoader::builder().remote_options(server.options()).open_stream("t", "s3://bucket/r");
    let mut r = r.batch_size(8).build().unwrap();
    assert_eq!(r.next_batch().unwrap().get_ragged("t").unwrap().len(), 8);
    // A part replaced by a store of another length: the set no longer holds.
    let other = part("other", 0..10);
    push(&other, "s3://bucket/parts/p1", server.options(), |_| {}).unwrap();
    let e = DenseSource::open_remote("s3://bucket/sets/all", server.options()).unwrap_err();
    assert!(matches!(&e, Error::Schema { path, .. } if path.to_string_lossy().ends_with("parts/p1")), "{e}");
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
    loader.next_batch().unwrap();
    // Steps 1..=3 are fetched without being asked for (bounded wait: 10 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stats() - opened < 8 * 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(stats() - opened >= 8 * 4, "{} records requested after one batch", stats() - opened);
    let e = loaderx_core::Store::open("s3://bucket/ahead").unwrap_err();
    assert!(e.to_string().contains("RemoteStore"), "{e}");
}
