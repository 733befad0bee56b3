//! Remote stores against a real S3-compatible server started here: s3s-fs on 127.0.0.1 and a
//! free port (`Server`), with its fault injector (`Faults`: 503 SlowDown, dropped connections,
//! delays, lies about lengths), and the stores the tests push (`dense`, `ragged`); the tests of
//! the page cache (second epochs without requests, its byte limit, eviction, two processes
//! sharing it). Stores pushed and read back, typed errors, faults and replaced objects:
//! `remote_reads.rs`. Hostile servers, indexes, set manifests and endpoints:
//! `remote_hostile.rs`, on the same server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use loaderx_core::remote::{RemoteOptions, RemoteStats, RemoteStore, push};
use loaderx_core::{Codec, DatasetWriter, DenseSource, Error, RaggedSource, WriteOptions};

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
    /// Every listing answered with one object and one directory and a continuation token, the
    /// same every time: a listing that never ends.
    pub(crate) endless_listing: bool,
}

/// The page of a listing that never ends ([`Faults::endless_listing`]).
fn endless_listing_page() -> Reply {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult \
        xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bucket</Name><KeyCount>2</KeyCount>\
        <MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>again</NextContinuationToken>\
        <Contents><Key>set/x.zr</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>\"e\"</ETag>\
        <Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>\
        <CommonPrefixes><Prefix>set/p0/</Prefix></CommonPrefixes></ListBucketResult>";
    Ok(hyper::Response::builder().status(200).body(s3s::Body::from(body.to_string())).unwrap())
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
    /// The body the object's own, its `ETag` this.
    Etag(&'static str),
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
        Told::Etag(tag) => {
            parts.headers.insert(hyper::header::ETAG, hyper::header::HeaderValue::from_static(tag));
            return hyper::Response::from_parts(parts, body);
        }
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
                    let listing = req.uri().query().is_some_and(|q| q.contains("list-type=2"));
                    async move {
                        if let Some(f) = faults.as_ref().filter(|f| f.endless_listing && listing) {
                            f.seen.fetch_add(1, Ordering::Relaxed);
                            return endless_listing_page();
                        }
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

pub(crate) fn ragged(dir: &Path) -> PathBuf {
    let p = dir.join("ragged");
    let mut w = DatasetWriter::ragged::<i32>(&p, vec![], WriteOptions::new().codec(Codec::Zstd)).unwrap();
    for i in 0..2000i32 {
        w.append_record(&vec![i; (i % 17) as usize]).unwrap();
    }
    w.finish().unwrap();
    p
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
    // A fixed-stride store checks blocks: the error names the record asked for in the block.
    assert!(matches!(&e, Error::CorruptRecord { index: 2001, .. }), "{e}");
    assert_eq!((c.stats().pages_filled, pages(&cache).len()), (0, cached), "the damaged page is not cached");
    // verify names the damaged block's first record and its records (look 77: it named the
    // block's index, 7, as if it were a record's).
    match c.verify().unwrap_err() {
        Error::CorruptRecord { index, reason, .. } => {
            assert!(index <= 2000 && 2000 - index < 4096 / 16, "{index}: {reason}");
            assert!(reason.contains(&format!("its block (records {index}..")), "{reason}");
        }
        e => panic!("{e}"),
    }
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
            crate::common::this_binary()
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

/// Look 112, L112-4: a server that answers a put with success without keeping the bytes (here,
/// one saying it holds 3 bytes of `index.zr`) made push report the store pushed. Push asks what
/// the server holds after each upload, and refuses naming the object.
#[test]
fn a_push_the_server_did_not_keep_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let lies = vec![Lie { suffix: "/index.zr", head: true, told: Told::Length(3) }];
    let server =
        Server::start_on(&tmp.path().join("s3"), 0, Some(Arc::new(Faults { lies, ..Faults::default() })));
    let d = dense(tmp.path(), Codec::Raw);
    let e = push(&d, "s3://bucket/kept", server.options(), |_| {}).unwrap_err();
    assert!(
        matches!(&e, Error::Remote { url, reason, .. }
            if url == "s3://bucket/kept/index.zr" && reason.contains("holds 3")),
        "{e}"
    );
}

/// Look 143, L143-1: a read of empty records only, without a page cache, asked the server for
/// an empty range, which it refuses; they read as the local store's, alone and among others.
#[test]
fn empty_records_read_alone_without_a_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = ragged(tmp.path()); // record i holds i % 17 values: 0, 17, 34... are empty
    push(&local, "s3://bucket/empty", server.options(), |_| {}).unwrap();
    let remote = RaggedSource::open_remote("s3://bucket/empty", server.options()).unwrap();
    let local = RaggedSource::open(&local).unwrap();
    for idx in [vec![0u32], vec![34, 17], vec![17, 1, 34, 1999], vec![1700, 1701, 0]] {
        assert_eq!(remote.get_batch(&idx).unwrap(), local.get_batch(&idx).unwrap(), "{idx:?}");
    }
}
