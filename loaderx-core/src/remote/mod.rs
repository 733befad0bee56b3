//! Stores on S3-compatible object storage, read-only (feature `remote`), through the Apache
//! Arrow project's `object_store` crate on a private tokio runtime.
//!
//! [`RemoteStore::open`] fetches a v2 store's index (`index.zr`, every entry's checksum checked)
//! and dictionary once; a batch's records are sorted by chunk and offset and coalesced into
//! range requests (records closer than [`RemoteOptions::max_gap`], requests up to
//! [`RemoteOptions::max_request`]), issued concurrently (at most
//! [`RemoteOptions::concurrency`]), each record's crc32c checked before it is decoded and handed
//! out in the batch's order. Retries with backoff and per-request timeouts are `object_store`'s
//! (its `RetryConfig`, `ClientOptions::with_timeout`); after the last one the error names the URL
//! and the byte range. Credentials and endpoint come from the standard AWS variables
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ALLOW_HTTP`) or [`RemoteOptions`]; no error or `Debug` string shows a credential, the
//! userinfo of an endpoint URL (`http://user:password@host`) included (see `redact`).
//!
//! Every server is treated as hostile: a response's declared length is checked against what was
//! asked (and against what the object may hold) before anything is allocated and its body read
//! with that cap (`body`); a batch whose records, as the index gives their lengths, would take
//! more than [`RemoteOptions::memory_limit`] is refused before it is fetched or allocated.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, GetOptions, GetRange, ObjectMeta, ObjectStore, RetryConfig};

use crate::format::v2::{ENTRY_SIZE, Entry, HEADER_SIZE, Header};
use crate::store::{RecordError, Stored, decode_record};
use crate::{Codec, Error, Result};

mod body;
pub mod cache;
mod push;
mod redact;

use body::{BodyError, Expect};
use cache::{PageCache, PageKey};
pub use push::push;
pub(crate) use redact::scrub;

/// The most bytes a store's small files (`schema.msgpack`, `dict.zr`) may hold: a zstd
/// dictionary is some hundreds of KiB, a schema less.
const MAX_SMALL_FILE: u64 = 64 << 20;
/// `verify` reads in blocks of at most this many records and (unless one record is larger)
/// bytes, so that an intact store of large records never needs a large batch.
const VERIFY_BLOCK_RECORDS: u64 = 4096;
const VERIFY_BLOCK_BYTES: u64 = 64 << 20;

/// How a remote store is reached and read.
#[derive(Clone, Default)]
pub struct RemoteOptions {
    endpoint: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    allow_http: Option<bool>,
    max_gap: Option<u64>,
    max_request: Option<u64>,
    concurrency: Option<usize>,
    retries: Option<usize>,
    timeout: Option<Duration>,
    cache: Option<(PathBuf, u64)>,
    page_size: Option<u64>,
    memory_limit: Option<u64>,
    anonymous: bool,
}

impl std::fmt::Debug for RemoteOptions {
    // Never the keys: only whether they are set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("endpoint", &self.endpoint.as_deref().map(|e| scrub(e, Some(e))))
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id.as_ref().map(|_| "<set>"))
            .field("secret_access_key", &self.secret_access_key.as_ref().map(|_| "<set>"))
            .field("allow_http", &self.allow_http)
            .field("max_gap", &self.max_gap)
            .field("max_request", &self.max_request)
            .field("concurrency", &self.concurrency)
            .field("cache", &self.cache)
            .field("page_size", &self.page_size)
            .field("memory_limit", &self.memory_limit)
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

impl RemoteOptions {
    /// The defaults: everything from the AWS environment variables; gaps up to 64 KiB
    /// coalesced, requests up to 8 MiB, 16 in flight, 5 retries, 30 s per request.
    pub fn new() -> RemoteOptions {
        RemoteOptions::default()
    }
    /// The endpoint (`http://127.0.0.1:9000`, a MinIO or other S3-compatible server).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }
    /// The region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }
    /// The access key pair.
    pub fn credentials(mut self, key_id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.access_key_id = Some(key_id.into());
        self.secret_access_key = Some(secret.into());
        self
    }
    /// Unsigned requests, for a public bucket (no credentials looked for, none sent).
    pub fn anonymous(mut self, yes: bool) -> Self {
        self.anonymous = yes;
        self
    }
    /// Allow plain HTTP endpoints.
    pub fn allow_http(mut self, yes: bool) -> Self {
        self.allow_http = Some(yes);
        self
    }
    /// Records this close (in bytes) share a request.
    pub fn max_gap(mut self, bytes: u64) -> Self {
        self.max_gap = Some(bytes);
        self
    }
    /// The largest coalesced request.
    pub fn max_request(mut self, bytes: u64) -> Self {
        self.max_request = Some(bytes);
        self
    }
    /// Requests in flight at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }
    /// Retries of a failed request, with exponential backoff.
    pub fn retries(mut self, n: usize) -> Self {
        self.retries = Some(n);
        self
    }
    /// The time one request may take.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
    /// Caches the chunk objects' pages in `dir`, at most `limit_bytes` there (see
    /// [`cache`](self::cache)). Without this, `LOADERX_REMOTE_CACHE` names the directory and
    /// `LOADERX_REMOTE_CACHE_BYTES` the limit (default 8 GiB); with neither, nothing is cached
    /// but the index.
    pub fn cache(mut self, dir: impl Into<PathBuf>, limit_bytes: u64) -> Self {
        self.cache = Some((dir.into(), limit_bytes));
        self
    }
    /// The cache's page size: a multiple of 4 KiB (default 1 MiB). Larger pages cost fewer
    /// requests and more bytes per cold random record.
    pub fn page_size(mut self, bytes: u64) -> Self {
        self.page_size = Some(bytes);
        self
    }

    /// The most bytes one batch (its records as handed out plus their stored bytes, by the
    /// index's lengths) or the index itself may take in memory: anything claiming more is refused
    /// with a typed error before a request is sent or a buffer allocated, so a damaged or hostile
    /// index cannot make a reader allocate what it cannot hold. Default: half of the host's
    /// physical memory (8 GiB where that cannot be read).
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes.max(1));
        self
    }

    fn memory(&self) -> u64 {
        self.memory_limit.unwrap_or_else(default_memory_limit)
    }

    /// `text` with every credential these options (or the environment) know replaced.
    fn scrub(&self, text: &str) -> String {
        scrub(text, self.endpoint.as_deref())
    }

    /// The cache directory and limit, from the options or the environment.
    fn cache_config(&self) -> Result<Option<(PathBuf, u64, u64)>> {
        let page = self.page_size.unwrap_or(1 << 20);
        if page == 0 || !page.is_multiple_of(4096) {
            return Err(Error::InvalidArgument(format!(
                "a cache page of {page} bytes: use a multiple of 4096"
            )));
        }
        let (dir, limit) = match &self.cache {
            Some((d, l)) => (d.clone(), *l),
            None => match std::env::var_os("LOADERX_REMOTE_CACHE") {
                Some(d) if !d.is_empty() => {
                    let limit = match std::env::var("LOADERX_REMOTE_CACHE_BYTES") {
                        Ok(v) => v.trim().parse::<u64>().map_err(|_| {
                            Error::InvalidArgument(format!(
                                "LOADERX_REMOTE_CACHE_BYTES={v:?} is not a byte count"
                            ))
                        })?,
                        Err(_) => 8 << 30,
                    };
                    (PathBuf::from(d), limit)
                }
                _ => return Ok(None),
            },
        };
        if limit < page {
            return Err(Error::InvalidArgument(format!(
                "a cache limit of {limit} bytes holds no page of {page} bytes"
            )));
        }
        Ok(Some((dir, limit, page)))
    }

    fn gap(&self) -> u64 {
        self.max_gap.unwrap_or(64 << 10)
    }
    fn request(&self) -> u64 {
        self.max_request.unwrap_or(8 << 20).max(1)
    }

    /// The object store of `bucket`.
    fn build(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(e) = &self.endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(r) = &self.region {
            b = b.with_region(r);
        }
        if let (Some(k), Some(s)) = (&self.access_key_id, &self.secret_access_key) {
            b = b.with_access_key_id(k).with_secret_access_key(s);
        }
        if let Some(h) = self.allow_http {
            b = b.with_allow_http(h);
        }
        if self.anonymous {
            b = b.with_skip_signature(true);
        }
        let retry = RetryConfig { max_retries: self.retries.unwrap_or(5), ..RetryConfig::default() };
        // One client setting changed, the others (from the environment, `allow_http`) kept.
        let timeout = self.timeout.unwrap_or(Duration::from_secs(30));
        b = b.with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            format!("{}ms", timeout.as_millis()),
        );
        let store = b.with_retry(retry).build().map_err(|e| Error::Remote {
            url: format!("s3://{bucket}"),
            range: None,
            reason: format!("cannot configure the S3 client: {}", self.scrub(&e.to_string())),
        })?;
        Ok(Arc::new(store))
    }
}

/// Half of the host's physical memory (`MemTotal` of `/proc/meminfo`), 8 GiB where it cannot be
/// read: a bound on what a claim from the index may make a reader allocate, not a budget.
fn default_memory_limit() -> u64 {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
        total.map_or(8 << 30, |t| (t / 2).max(1 << 30))
    })
}

/// What a failed whole-object read says, its credentials removed.
fn body_reason(e: BodyError, options: &RemoteOptions) -> String {
    match e {
        BodyError::Store(e) => options.scrub(&e.to_string()),
        BodyError::Length(why) => why,
    }
}

/// Whether `path` names a remote store (`s3://...`).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("s3://"))
}

/// `url/name` whole, or `None` when there is no such object; refused past `max` bytes (the
/// response's declared length checked before anything is allocated, its body read with that
/// cap).
///
/// # Errors
/// [`Error::Remote`] naming the object for a failed request, one over `max`, or a body other
/// than its declared length.
pub(crate) fn get_optional(
    url: &str,
    name: &str,
    options: &RemoteOptions,
    max: u64,
) -> Result<Option<Vec<u8>>> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build(&bucket)?;
    let key =
        if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) };
    let object = format!("{}/{name}", url.trim_end_matches('/'));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))?;
    let got = runtime.block_on(async {
        let response = store.get(&key).await.map_err(BodyError::Store)?;
        body::read(response, Expect::AtMost(max)).await
    });
    match got {
        Ok(bytes) => Ok(Some(bytes.to_vec())),
        Err(BodyError::Store(object_store::Error::NotFound { .. })) => Ok(None),
        Err(e) => Err(Error::Remote { url: object, range: None, reason: body_reason(e, options) }),
    }
}

/// `rel` (a relative path, `/`-separated, `..` allowed) resolved against the directory `url`;
/// the result stays inside the bucket.
///
/// # Errors
/// [`Error::InvalidArgument`] for an absolute path or one that climbs out of the bucket.
pub(crate) fn join_url(url: &str, rel: &str) -> Result<String> {
    let (bucket, prefix) = parse_url(url)?;
    let rel = rel.replace('\\', "/");
    if rel.starts_with('/') || rel.contains(':') {
        return Err(Error::InvalidArgument(format!(
            "{url}: the part {rel:?} is an absolute path, which names nothing on object storage"
        )));
    }
    let mut parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(Error::InvalidArgument(format!(
                        "{url}: the part {rel:?} climbs out of the bucket"
                    )));
                }
            }
            c => parts.push(c),
        }
    }
    Ok(format!("s3://{bucket}/{}", parts.join("/")))
}

/// `s3://bucket/prefix` as (bucket, prefix).
fn parse_url(url: &str) -> Result<(String, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::InvalidArgument(format!("{url:?} is not an s3:// URL")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    // No bucket name holds `@` or `:`: keys written into the URL would be sent nowhere and
    // shown in every message that names it.
    if bucket.contains(['@', ':']) {
        return Err(Error::InvalidArgument(format!(
            "{:?}: an s3:// URL holds no credentials (give them in AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY)",
            scrub(url, None)
        )));
    }
    if bucket.is_empty() || prefix.split('/').any(|p| p == "..") {
        return Err(Error::InvalidArgument(format!(
            "{url:?}: an s3:// URL names a bucket and a prefix without `..`"
        )));
    }
    Ok((bucket.to_string(), prefix.trim_end_matches('/').to_string()))
}

/// [`RemoteStore::summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteSummary {
    /// Records.
    pub records: u64,
    /// Their bytes as handed out.
    pub logical_bytes: u64,
    /// Their bytes as stored.
    pub stored_bytes: u64,
    /// Records per codec.
    pub codecs: crate::store::CodecCounts,
}

/// What a remote store's reads cost: [`RemoteStore::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Requests sent (GET and HEAD), retries not counted.
    pub requests: u64,
    /// Bytes that came back in range responses.
    pub bytes_fetched: u64,
    /// Cache pages found (open in this process or on disk).
    pub pages_hit: u64,
    /// Cache pages fetched and written.
    pub pages_filled: u64,
    /// Cache pages this process removed to keep the directory under its limit.
    pub pages_evicted: u64,
    /// Pages fetched but not written to the cache (a full disk, say); served all the same.
    pub cache_errors: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes_fetched: AtomicU64,
    pages_hit: AtomicU64,
    pages_filled: AtomicU64,
    pages_evicted: AtomicU64,
    cache_errors: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A chunk object's consistency token (its ETag, or size and modification time on a server that
/// gives none) and, once asked (HEAD), its size.
#[derive(Debug, Clone)]
struct ChunkObject {
    tag: String,
    /// Whether `tag` is the server's ETag.
    etag: bool,
    size: Option<u64>,
}

fn token(meta: &ObjectMeta) -> String {
    meta.e_tag.clone().unwrap_or_else(|| format!("{}@{}", meta.size, meta.last_modified))
}

fn has_etag(meta: &ObjectMeta) -> bool {
    meta.e_tag.is_some()
}

/// A batch's responses (or cache pages), and per position where its stored bytes are: the
/// piece, the offset in it, and how many consecutive pieces they run over (more than one for a
/// record across cache pages: it goes on at the start of the next).
type Fetched = (Vec<Bytes>, Vec<(usize, usize, usize)>);

/// A read-only v2 store on S3-compatible object storage; see the [module documentation](self).
pub struct RemoteStore {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    runtime: tokio::runtime::Runtime,
    entries: Vec<Entry>,
    dict: Option<Arc<crate::store::Dictionary>>,
    options: RemoteOptions,
    cache: Option<PageCache>,
    /// Each chunk object's token, from its first response: a later one with another token is
    /// [`Error::Changed`].
    objects: Mutex<HashMap<u32, ChunkObject>>,
    /// Entry numbers sorted by (chunk, offset), for checking filled pages (built at the first).
    by_place: OnceLock<Vec<u64>>,
    counters: Counters,
    /// Whether records carry a crc32c (v2), checked on every read.
    checksums: bool,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore").field("url", &self.url).field("records", &self.entries.len()).finish()
    }
}

impl RemoteStore {
    /// Opens the store at `url` (`s3://bucket/prefix/store`): its index fetched and checked.
    ///
    /// # Errors
    /// [`Error::Remote`] naming the URL for a request that failed after its retries;
    /// [`Error::Corrupt`] naming the object for a damaged index or dictionary;
    /// [`Error::NotAStore`] naming the URL when neither `index.zr` nor `meta.zr` is there;
    /// [`Error::InvalidArgument`] for a bad URL or cache option.
    pub fn open(url: &str, options: RemoteOptions) -> Result<RemoteStore> {
        let (bucket, prefix) = parse_url(url)?;
        let store = options.build(&bucket)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the runtime of", url, e))?;
        let mut r = RemoteStore {
            url: url.to_string(),
            store,
            prefix,
            runtime,
            entries: Vec::new(),
            dict: None,
            cache: None,
            objects: Mutex::new(HashMap::new()),
            by_place: OnceLock::new(),
            counters: Counters::default(),
            checksums: true,
            options,
        };
        if let Some((dir, limit, page)) = r.options.cache_config()? {
            r.cache = Some(PageCache::new(&dir, limit, page, url)?);
        }
        let index = match r.cached_index() {
            Ok(b) => b,
            Err(_) if r.exists("meta.zr") => {
                r.open_v1()?;
                return Ok(r);
            }
            Err(Error::Remote { reason, .. })
                if reason.contains("not found") || reason.contains("NotFound") =>
            {
                return Err(Error::NotAStore {
                    path: PathBuf::from(url),
                    reason: "neither index.zr (v2) nor meta.zr (v1) is there (or the bucket does not exist)"
                        .into(),
                });
            }
            Err(e) => return Err(e),
        };
        let path = r.object_url("index.zr");
        let corrupt =
            |offset: u64, reason: String| Error::Corrupt { path: PathBuf::from(&path), offset, reason };
        let header =
            Header::parse(&index, true).map_err(|e| crate::store::v2_header_error(Path::new(&path), e))?;
        let count = usize::try_from(header.count).map_err(|_| corrupt(40, "a count past usize".into()))?;
        let need = count.checked_mul(ENTRY_SIZE).and_then(|n| n.checked_add(HEADER_SIZE));
        if need.is_none_or(|n| n > index.len()) {
            return Err(corrupt(40, format!("{count} entries in {} bytes", index.len())));
        }
        r.entries = (0..count)
            .map(|i| {
                let at = HEADER_SIZE + i * ENTRY_SIZE;
                Entry::parse(&index[at..at + ENTRY_SIZE])
                    .map_err(|e| corrupt(at as u64, format!("entry {i}: {e}")))
            })
            .collect::<Result<_>>()?;
        if header.dict_id != 0 {
            r.load_dictionary()?;
        }
        Ok(r)
    }

    fn load_dictionary(&mut self) -> Result<()> {
        let bytes = self.get_whole("dict.zr", MAX_SMALL_FILE, None)?;
        let raw = crate::format::dict::decode(&bytes).map_err(|(o, why)| Error::Corrupt {
            path: PathBuf::from(self.object_url("dict.zr")),
            offset: o,
            reason: why,
        })?;
        let prepared = crate::store::Dictionary::new(raw.to_vec()).map_err(|reason| Error::Corrupt {
            path: PathBuf::from(self.object_url("dict.zr")),
            offset: 0,
            reason,
        })?;
        self.dict = Some(prepared);
        Ok(())
    }

    /// A v1 store: the header of `meta.zr` and its committed entries (one range request each;
    /// the rest of the fixed 256 MiB table is never fetched), the dictionary when there is one.
    /// v1 records carry no checksum, so they are read unchecked (as a v1 store is locally).
    fn open_v1(&mut self) -> Result<()> {
        use crate::format::{ENTRY_SIZE as V1_ENTRY, Header as V1Header, RecordLoc};
        self.checksums = false;
        let path = PathBuf::from(self.object_url("meta.zr"));
        let corrupt = |offset: u64, reason: String| Error::Corrupt { path: path.clone(), offset, reason };
        let head = self.get_range("meta.zr", 0..V1_ENTRY as u64)?;
        let header = V1Header::parse(&head).map_err(|e| crate::store::v1_header_error(&path, e))?;
        let count = u64::from(header.length);
        let table = if count == 0 {
            Bytes::new()
        } else {
            self.get_range("meta.zr", V1_ENTRY as u64..V1_ENTRY as u64 * (1 + count))?
        };
        self.entries = table
            .chunks_exact(V1_ENTRY)
            .enumerate()
            .map(|(i, b)| {
                let at = (V1_ENTRY * (i + 1)) as u64;
                let loc =
                    RecordLoc::from_bytes(b.try_into().map_err(|_| corrupt(at, "a short entry".into()))?);
                loc.validate(&header).map_err(|why| corrupt(at, format!("entry {i}: {why}")))?;
                Ok(Entry {
                    offset: u64::from(loc.offset),
                    stored: loc.phys_length,
                    logical: loc.logic_length,
                    chunk: u32::from(loc.chunk_id),
                    codec: loc.codec,
                    crc: 0,
                })
            })
            .collect::<Result<_>>()?;
        if self.entries.iter().any(|e| e.codec == Codec::ZstdDict as u8) {
            self.load_dictionary()?;
        }
        Ok(())
    }

    /// Bytes `range` of the store's file `name`, exactly (the body read with that cap).
    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        add(&self.counters.requests, 1);
        let options = GetOptions { range: Some(GetRange::Bounded(range.clone())), ..GetOptions::default() };
        let len = range.end - range.start;
        self.runtime
            .block_on(async {
                let response =
                    self.store.get_opts(&self.key(name), options).await.map_err(BodyError::Store)?;
                body::read(response, Expect::Exactly(len)).await
            })
            .map_err(|e| self.body_err(name, Some(range), e))
    }

    /// The error of a failed read of `name`.
    fn body_err(&self, name: &str, range: Option<Range<u64>>, e: BodyError) -> Error {
        Error::Remote { url: self.object_url(name), range, reason: body_reason(e, &self.options) }
    }

    fn key(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn object_url(&self, name: &str) -> String {
        format!("{}/{name}", self.url.trim_end_matches('/'))
    }

    fn remote_err(&self, name: &str, range: Option<std::ops::Range<u64>>, e: &object_store::Error) -> Error {
        Error::Remote { url: self.object_url(name), range, reason: self.options.scrub(&e.to_string()) }
    }

    fn exists(&self, name: &str) -> bool {
        add(&self.counters.requests, 1);
        self.runtime.block_on(self.store.head(&self.key(name))).is_ok()
    }

    /// The index, from the local cache when the object's ETag is the cached copy's (the
    /// consistency token: a store rewritten under the same URL has another), else fetched and
    /// cached (temporary file, then rename). The cache is `$LOADERX_CACHE_DIR/remote/...`
    /// (the cache directory, `convert::cache_dir`); it is an optimisation: any failure to use it fetches.
    fn cached_index(&self) -> Result<Bytes> {
        let key = self.key("index.zr");
        add(&self.counters.requests, 1);
        let meta = self
            .runtime
            .block_on(self.store.head(&key))
            .map_err(|e| self.remote_err("index.zr", None, &e))?;
        let token = meta.e_tag.clone().unwrap_or_default();
        // Checked before the cached copy is read or the object fetched: an index larger than
        // memory may hold is refused, whatever the server says next.
        let limit = self.options.memory();
        if meta.size > limit {
            return Err(Error::Remote {
                url: self.object_url("index.zr"),
                range: None,
                reason: format!(
                    "the server gives it {} bytes, more than the memory limit of {limit} (RemoteOptions::memory_limit)",
                    meta.size
                ),
            });
        }
        let dir = crate::sys::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::format::hash64(self.url.as_bytes())));
        let (cached, tag) = (dir.join("index.zr"), dir.join("etag"));
        if !token.is_empty()
            && std::fs::read_to_string(&tag).is_ok_and(|t| t == token)
            && let Ok(bytes) = std::fs::read(&cached)
            && bytes.len() as u64 == meta.size
        {
            return Ok(Bytes::from(bytes));
        }
        let bytes = self.get_whole("index.zr", limit, meta.e_tag.clone())?;
        if bytes.len() as u64 != meta.size {
            return Err(Error::Remote {
                url: self.object_url("index.zr"),
                range: None,
                reason: format!(
                    "{} bytes came back where the server gave its size as {}",
                    bytes.len(),
                    meta.size
                ),
            });
        }
        if !token.is_empty() && std::fs::create_dir_all(&dir).is_ok() {
            let _ = crate::store::write_atomic(&dir, "index.zr", &bytes)
                .and_then(|()| crate::store::write_atomic(&dir, "etag", token.as_bytes()));
        }
        Ok(bytes)
    }

    /// Where this store's index is cached locally.
    pub fn index_cache(&self) -> PathBuf {
        crate::sys::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::format::hash64(self.url.as_bytes())))
            .join("index.zr")
    }

    /// The store's file `name` whole, at most `max` bytes (the response's declared length
    /// checked before anything is allocated, its body read with that cap); with `if_match`, only
    /// the object of that ETag.
    fn get_whole(&self, name: &str, max: u64, if_match: Option<String>) -> Result<Bytes> {
        let key = self.key(name);
        add(&self.counters.requests, 1);
        let options = GetOptions { if_match, ..GetOptions::default() };
        self.runtime
            .block_on(async {
                let response = self.store.get_opts(&key, options).await.map_err(BodyError::Store)?;
                body::read(response, Expect::AtMost(max)).await
            })
            .map_err(|e| self.body_err(name, None, e))
    }

    /// Records in the store.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The URL it was opened at.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Each record's logical length (from the index: nothing is fetched), for sizing the
    /// batch's buffer.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the URL; [`Error::BatchTooLarge`] for a batch over
    /// [`RemoteOptions::memory_limit`].
    pub fn record_lens(&self, indices: &[u64]) -> Result<Vec<u32>> {
        self.check_batch(indices)?;
        indices.iter().map(|&i| self.entry(i).map(|e| e.logical)).collect()
    }

    /// The logical bytes of the batch `indices`, checked first: its records as handed out and
    /// their stored bytes (both are held at once), by the index's lengths, within
    /// [`RemoteOptions::memory_limit`]. The index may be hostile: this is what keeps its claims
    /// from sizing a request or an allocation.
    fn check_batch(&self, indices: &[u64]) -> Result<u64> {
        let (mut logical, mut stored) = (0u64, 0u64);
        for &i in indices {
            let e = self.entry(i)?;
            logical = logical.saturating_add(u64::from(e.logical));
            stored = stored.saturating_add(u64::from(e.stored));
        }
        let (bytes, limit) = (logical.saturating_add(stored), self.options.memory());
        if bytes > limit {
            return Err(Error::BatchTooLarge {
                path: PathBuf::from(&self.url),
                records: indices.len() as u64,
                bytes,
                limit,
            });
        }
        Ok(logical)
    }

    fn entry(&self, i: u64) -> Result<&Entry> {
        self.entries.get(i as usize).ok_or_else(|| Error::IndexOutOfRange {
            path: PathBuf::from(&self.url),
            index: i,
            len: self.len(),
        })
    }

    /// Fetches the stored bytes of `indices`: through the page cache when there is one, else
    /// sorted by chunk and offset, coalesced into range requests, issued concurrently. Returns
    /// the pieces and, per position of `indices`, its piece and offset there.
    fn fetch(&self, indices: &[u64]) -> Result<Fetched> {
        if let Some(cache) = &self.cache {
            return self.fetch_paged(cache, indices);
        }
        let mut order: Vec<(usize, &Entry)> = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            order.push((k, self.entry(i)?));
        }
        order.sort_by_key(|(_, e)| (e.chunk, e.offset));
        let (gap, max) = (self.options.gap(), self.options.request());
        let mut requests: Vec<(u32, Range<u64>)> = Vec::new();
        let mut place = vec![(0usize, 0usize, 1usize); indices.len()];
        for (k, e) in order {
            match requests.last_mut() {
                Some((c, r))
                    if *c == e.chunk && e.offset <= r.end + gap && e.end().max(r.end) - r.start <= max =>
                {
                    r.end = r.end.max(e.end());
                }
                _ => requests.push((e.chunk, e.offset..e.end())),
            }
            let n = requests.len() - 1;
            place[k] = (n, (e.offset - requests[n].1.start) as usize, 1);
        }
        Ok((self.get_ranges(&requests)?, place))
    }

    /// Range requests `(chunk, bytes)`, concurrently (at most [`RemoteOptions::concurrency`]).
    /// Each is sent with the chunk object's token as `If-Match` once it is known and its
    /// response's token compared: an object replaced under the reader is [`Error::Changed`].
    fn get_ranges(&self, requests: &[(u32, Range<u64>)]) -> Result<Vec<Bytes>> {
        let tags: Vec<Option<String>> = {
            let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
            // Only a real ETag goes out as If-Match (the stand-in token is checked here alone).
            requests.iter().map(|(c, _)| objects.get(c).filter(|o| o.etag).map(|o| o.tag.clone())).collect()
        };
        let concurrency = self.options.concurrency.unwrap_or(16);
        add(&self.counters.requests, requests.len() as u64);
        type Got = std::result::Result<(Bytes, (String, bool)), BodyError>;
        let fetched: Vec<(usize, Got)> = self.runtime.block_on(
            futures::stream::iter(requests.iter().enumerate().map(|(n, (c, r))| {
                let key = self.key(&format!("{c}.zr"));
                let store = Arc::clone(&self.store);
                let options = GetOptions {
                    range: Some(GetRange::Bounded(r.clone())),
                    if_match: tags[n].clone(),
                    ..GetOptions::default()
                };
                async move {
                    let len = r.end - r.start;
                    let got = async {
                        let response = store.get_opts(&key, options).await.map_err(BodyError::Store)?;
                        let tag = (token(&response.meta), has_etag(&response.meta));
                        Ok((body::read(response, Expect::Exactly(len)).await?, tag))
                    };
                    (n, got.await)
                }
            }))
            .buffer_unordered(concurrency)
            .collect(),
        );
        let mut out = vec![Bytes::new(); requests.len()];
        for (n, got) in fetched {
            let (c, range) = &requests[n];
            let name = format!("{c}.zr");
            let (bytes, tag) = match got {
                Ok(g) => g,
                Err(BodyError::Store(object_store::Error::Precondition { .. })) => {
                    return Err(self.changed(*c, tags[n].as_deref().unwrap_or(""), "another"));
                }
                Err(e) => return Err(self.body_err(&name, Some(range.clone()), e)),
            };
            self.learn(*c, &tag, None)?;
            add(&self.counters.bytes_fetched, bytes.len() as u64);
            out[n] = bytes;
        }
        Ok(out)
    }

    fn changed(&self, chunk: u32, expected: &str, found: &str) -> Error {
        Error::Changed {
            url: self.object_url(&format!("{chunk}.zr")),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    /// Records chunk `c`'s token (and size), or checks it against the one already recorded.
    fn learn(&self, c: u32, (tag, etag): &(String, bool), size: Option<u64>) -> Result<ChunkObject> {
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        let o = objects.entry(c).or_insert_with(|| ChunkObject { tag: tag.clone(), etag: *etag, size: None });
        if o.tag != *tag {
            return Err(self.changed(c, &o.tag, tag));
        }
        if size.is_some() {
            o.size = size;
        }
        Ok(o.clone())
    }

    /// Chunk `c`'s token and size (a HEAD the first time the size is needed).
    fn chunk_object(&self, c: u32) -> Result<(String, u64)> {
        let known = self.objects.lock().unwrap_or_else(PoisonError::into_inner).get(&c).cloned();
        if let Some(ChunkObject { tag, size: Some(size), .. }) = known {
            return Ok((tag, size));
        }
        let name = format!("{c}.zr");
        add(&self.counters.requests, 1);
        let meta = self
            .runtime
            .block_on(self.store.head(&self.key(&name)))
            .map_err(|e| self.remote_err(&name, None, &e))?;
        let o = self.learn(c, &(token(&meta), has_etag(&meta)), Some(meta.size))?;
        Ok((o.tag, meta.size))
    }

    /// [`RemoteStore::fetch`] through the page cache: each record's pages found open, on disk,
    /// or fetched (under their stripes' locks, contiguous pages of a chunk in one request),
    /// checked, written and kept open. A record is read in place, from as many consecutive pages
    /// as it runs over.
    fn fetch_paged(&self, cache: &PageCache, indices: &[u64]) -> Result<Fetched> {
        let p = cache.page_size();
        let mut entries = Vec::with_capacity(indices.len());
        let mut keys: Vec<PageKey> = Vec::new();
        for &i in indices {
            let e = self.entry(i)?;
            entries.push(e);
            if e.stored > 0 {
                keys.extend((e.offset / p..=(e.end() - 1) / p).map(|page| PageKey { chunk: e.chunk, page }));
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let mut pages: Vec<Option<Bytes>> = keys.iter().map(|&k| cache.get_open(k)).collect();
        let mut hits = pages.iter().filter(|p| p.is_some()).count() as u64;
        // The page's file and length, from its chunk object's token and size.
        let span = |k: PageKey| -> Result<(PathBuf, u64, u64)> {
            let (tag, size) = self.chunk_object(k.chunk)?;
            let start = k.page * p;
            if start >= size {
                return Err(Error::Remote {
                    url: self.object_url(&format!("{}.zr", k.chunk)),
                    range: Some(start..start + p),
                    reason: format!("the index reads past the object's {size} bytes"),
                });
            }
            Ok((cache.path(k, &tag), start, p.min(size - start)))
        };
        let mut misses = Vec::new();
        for (n, &k) in keys.iter().enumerate() {
            if pages[n].is_none() {
                let (path, _, len) = span(k)?;
                match cache.load(k, &path, len) {
                    Some(b) => {
                        pages[n] = Some(b);
                        hits += 1;
                    }
                    None => misses.push(n),
                }
            }
        }
        if !misses.is_empty() {
            let _locks = cache.lock(misses.iter().map(|&n| keys[n]))?;
            // Another process (or thread) may have filled some while this one waited.
            let mut still = Vec::with_capacity(misses.len());
            for n in misses {
                let (path, _, len) = span(keys[n])?;
                match cache.load(keys[n], &path, len) {
                    Some(b) => {
                        pages[n] = Some(b);
                        hits += 1;
                    }
                    None => still.push(n),
                }
            }
            let max = self.options.request().max(p);
            let mut requests: Vec<(u32, Range<u64>, Vec<usize>)> = Vec::new();
            for n in still {
                let (_, start, len) = span(keys[n])?;
                match requests.last_mut() {
                    Some((c, r, ns))
                        if *c == keys[n].chunk && r.end == start && r.end + len - r.start <= max =>
                    {
                        r.end += len;
                        ns.push(n);
                    }
                    _ => requests.push((keys[n].chunk, start..start + len, vec![n])),
                }
            }
            let ranges: Vec<(u32, Range<u64>)> = requests.iter().map(|(c, r, _)| (*c, r.clone())).collect();
            let got = self.get_ranges(&ranges)?;
            for ((_, r, ns), bytes) in requests.iter().zip(got) {
                for &n in ns {
                    let (path, start, len) = span(keys[n])?;
                    let at = (start - r.start) as usize;
                    let page = bytes.slice(at..at + len as usize);
                    self.check_page(keys[n], start, &page)?;
                    match cache.store(&path, &page) {
                        Ok(evicted) => {
                            add(&self.counters.pages_filled, 1);
                            add(&self.counters.pages_evicted, evicted);
                            // Kept open from its file, so the response's memory goes.
                            pages[n] = Some(cache.load(keys[n], &path, len).unwrap_or(page));
                        }
                        Err(_) => {
                            add(&self.counters.cache_errors, 1);
                            pages[n] = Some(page);
                        }
                    }
                }
            }
        }
        add(&self.counters.pages_hit, hits);
        let mut out: Vec<Bytes> = pages.into_iter().map(Option::unwrap_or_default).collect();
        let mut place = Vec::with_capacity(indices.len());
        for e in entries {
            if e.stored == 0 {
                place.push((out.len(), 0, 1));
                out.push(Bytes::new());
                continue;
            }
            let (first, last) = (e.offset / p, (e.end() - 1) / p);
            // The record's pages are consecutive keys (sorted by chunk, then page).
            let n = keys.partition_point(|k| (k.chunk, k.page) < (e.chunk, first));
            place.push((n, (e.offset - first * p) as usize, (last - first + 1) as usize));
        }
        Ok((out, place))
    }

    /// Checks every record lying wholly inside a fetched page (chunk `k.chunk`, bytes from
    /// `start`) against its crc32c, before the page is cached.
    fn check_page(&self, k: PageKey, start: u64, page: &[u8]) -> Result<()> {
        if !self.checksums {
            return Ok(());
        }
        let by_place = self.by_place.get_or_init(|| {
            let mut order: Vec<u64> = (0..self.entries.len() as u64).collect();
            order.sort_by_key(|&i| {
                let e = &self.entries[i as usize];
                (e.chunk, e.offset)
            });
            order
        });
        let end = start + page.len() as u64;
        let from = by_place.partition_point(|&i| {
            let e = &self.entries[i as usize];
            (e.chunk, e.offset) < (k.chunk, start)
        });
        for &i in &by_place[from..] {
            let e = &self.entries[i as usize];
            if e.chunk != k.chunk || e.offset >= end {
                break;
            }
            if e.end() <= end {
                let bytes = &page[(e.offset - start) as usize..(e.end() - start) as usize];
                if crc32c::crc32c(bytes) != e.crc {
                    return Err(Error::CorruptRecord {
                        path: PathBuf::from(&self.url),
                        index: i,
                        reason: format!(
                            "bytes {}..{} of {} fail their crc32c as fetched; the page was not cached",
                            e.offset,
                            e.end(),
                            self.object_url(&format!("{}.zr", k.chunk))
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The store's format: v2, or v1 (records read without checksums).
    pub fn format(&self) -> crate::Format {
        if self.checksums { crate::Format::V2 } else { crate::Format::V1 }
    }

    /// What this store's reads have cost so far.
    pub fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RemoteStats {
            requests: get(&c.requests),
            bytes_fetched: get(&c.bytes_fetched),
            pages_hit: get(&c.pages_hit),
            pages_filled: get(&c.pages_filled),
            pages_evicted: get(&c.pages_evicted),
            cache_errors: get(&c.cache_errors),
        }
    }

    /// Record `index`'s stored bytes at `(piece, offset, pieces)` of `fetched`: one slice, or
    /// (across cache pages) one per page it runs over.
    fn stored_parts<'b>(
        &self,
        index: u64,
        len: usize,
        fetched: &'b [Bytes],
        (n, at, pieces): (usize, usize, usize),
    ) -> Result<Vec<&'b [u8]>> {
        let outside = || self.corrupt(index, "outside its request".into());
        let mut parts = Vec::with_capacity(pieces);
        let mut left = len;
        for (j, piece) in fetched.get(n..n + pieces).ok_or_else(outside)?.iter().enumerate() {
            let from = if j == 0 { at } else { 0 };
            let take = piece.len().saturating_sub(from).min(left);
            parts.push(piece.get(from..from + take).ok_or_else(outside)?);
            left -= take;
        }
        if left != 0 {
            return Err(outside());
        }
        Ok(parts)
    }

    fn corrupt(&self, index: u64, reason: String) -> Error {
        Error::CorruptRecord { path: PathBuf::from(&self.url), index, reason }
    }

    fn crc_mismatch(&self, index: u64) -> Error {
        self.corrupt(index, "its crc32c does not match the index (fetched from the object store)".into())
    }

    /// The records of `indices`, in order: fetched in coalesced, concurrent range requests,
    /// each checked against its crc32c and decoded.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::BatchTooLarge`] for a batch over
    /// [`RemoteOptions::memory_limit`] (nothing fetched); [`Error::Remote`] naming the chunk's
    /// URL and byte range after the last retry; [`Error::CorruptRecord`] naming the URL and index
    /// for a record whose checksum does not match or that does not decode. Never a partial
    /// record.
    pub fn gather(&self, indices: &[u64]) -> Result<Vec<Vec<u8>>> {
        let flat = self.gather_flat(indices)?;
        let mut at = 0usize;
        Ok(indices
            .iter()
            .map(|&i| {
                // `gather_flat` wrote exactly the sum of these lengths.
                let l = self.entries[i as usize].logical as usize;
                let r = flat[at..at + l].to_vec();
                at += l;
                r
            })
            .collect())
    }

    /// The records of `indices` back to back. The stored bytes are fetched before the output
    /// is allocated (by a fallible reservation): a length the server cannot back with bytes
    /// fails as a request, never as an allocation.
    fn gather_flat(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let total = self.check_batch(indices)?;
        let total = usize::try_from(total).map_err(|_| Error::BatchTooLarge {
            path: PathBuf::from(&self.url),
            records: indices.len() as u64,
            bytes: total,
            limit: usize::MAX as u64,
        })?;
        let fetched = self.fetch(indices)?;
        let mut flat = Vec::new();
        crate::sys::fill_vec(&mut flat, total, |mut d| self.write_fetched(indices, &fetched, &mut d))?;
        Ok(flat)
    }

    /// [`RemoteStore::gather`] straight into `dst` (the records back to back, in order): one
    /// copy (or decode) from the response into the destination.
    pub(crate) fn gather_to(&self, indices: &[u64], dst: &mut crate::sys::Destination<'_>) -> Result<()> {
        self.check_batch(indices)?;
        let fetched = self.fetch(indices)?;
        self.write_fetched(indices, &fetched, dst)
    }

    /// Writes the records of `indices` from what [`RemoteStore::fetch`] returned for them into
    /// `dst`, each checked against its crc32c (and decoded).
    fn write_fetched(
        &self,
        indices: &[u64],
        (fetched, place): &Fetched,
        dst: &mut crate::sys::Destination<'_>,
    ) -> Result<()> {
        let mut decoder = crate::store::Decoder::new(self.dict.as_deref());
        let mut summer = crate::sys::Summer::default();
        let outside = |i: u64| self.corrupt(i, "outside its request".into());
        for (k, &i) in indices.iter().enumerate() {
            let e = self.entry(i)?;
            let codec =
                Codec::from_tag(e.codec).ok_or_else(|| self.corrupt(i, format!("codec tag {}", e.codec)))?;
            let (n, at, pieces) = place[k];
            let (one, many, refetched, refetched_part): (_, _, Bytes, [&[u8]; 1]);
            let mut parts: &[&[u8]] = if pieces == 1 {
                let piece = fetched.get(n).ok_or_else(|| outside(i))?;
                one = [piece.get(at..at + e.stored as usize).ok_or_else(|| outside(i))?];
                &one
            } else {
                many = self.stored_parts(i, e.stored as usize, fetched, place[k])?;
                &many
            };
            // Through the cache a record's bytes may come from a page file damaged since it was
            // filled: they are checked before a byte is written and, on a mismatch, the record's
            // pages are dropped and fetched once from the store (only then is it an error).
            let checked = match &self.cache {
                Some(cache) if self.checksums => {
                    let crc = parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p));
                    if crc != e.crc {
                        refetched = self.refetch(cache, i, e)?;
                        refetched_part = [&refetched[..]];
                        parts = &refetched_part;
                    }
                    true
                }
                _ => false,
            };
            if let [_, _, ..] = parts
                && codec == Codec::Raw
            {
                // Across cache pages: copied a page's part at a time (checked above).
                for part in parts {
                    dst.copy(part);
                }
                continue;
            }
            // A compressed record's decoder takes its frame in one piece.
            let whole;
            let stored: &[u8] = if let [stored] = parts {
                stored
            } else {
                whole = parts.concat();
                &whole
            };
            let rec = Stored { bytes: stored, codec, logical: e.logical as usize, crc: e.crc };
            // A raw record is summed in the copy's pass.
            decode_record(rec, self.checksums && !checked, &mut decoder, Some(&mut summer), dst).map_err(
                |why| match why {
                    RecordError::Checksum(_) => self.crc_mismatch(i),
                    RecordError::Decode(why) => self.corrupt(i, format!("{why:?}")),
                },
            )?;
        }
        Ok(())
    }

    /// Record `i`'s stored bytes fetched from the store again, after they failed their crc32c
    /// as read from the cache: its pages are dropped (this process's open copies and the page
    /// files) and refilled from the response, under their stripes' locks.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] when the store's bytes fail too (the store is damaged);
    /// [`Error::Remote`] for a failed request.
    fn refetch(&self, cache: &PageCache, i: u64, e: &Entry) -> Result<Bytes> {
        let p = cache.page_size();
        let keys: Vec<PageKey> =
            (e.offset / p..=(e.end() - 1) / p).map(|page| PageKey { chunk: e.chunk, page }).collect();
        let _locks = cache.lock(keys.iter().copied())?;
        let (tag, size) = self.chunk_object(e.chunk)?;
        let start = keys[0].page * p;
        let end = ((keys[keys.len() - 1].page + 1) * p).min(size);
        if e.end() > end {
            return Err(Error::Remote {
                url: self.object_url(&format!("{}.zr", e.chunk)),
                range: Some(e.offset..e.end()),
                reason: format!("the index reads past the object's {size} bytes"),
            });
        }
        let bytes = self.get_ranges(&[(e.chunk, start..end)])?.pop().unwrap_or_default();
        let stored = bytes.slice((e.offset - start) as usize..(e.end() - start) as usize);
        if crc32c::crc32c(&stored) != e.crc {
            return Err(self.corrupt(
                i,
                "its crc32c does not match the index, read from the cache and fetched again from the object store"
                    .into(),
            ));
        }
        for k in keys {
            let path = cache.path(k, &tag);
            cache.discard(k, &path);
            let from = k.page * p - start;
            let page = bytes.slice(from as usize..(from + p).min(end - start) as usize);
            // A page that fails its own records' checksums is left out (the next read fetches it).
            if self.check_page(k, k.page * p, &page).is_ok() {
                match cache.store(&path, &page) {
                    Ok(evicted) => {
                        add(&self.counters.pages_filled, 1);
                        add(&self.counters.pages_evicted, evicted);
                    }
                    Err(_) => add(&self.counters.cache_errors, 1),
                }
            }
        }
        Ok(stored)
    }

    /// Reads every record and checks it ([`RemoteStore::gather`] in blocks of at most 4096
    /// records and 64 MiB (or the memory limit, when less), a larger record alone): the records checked, or the first damaged
    /// one as the error.
    ///
    /// # Errors
    /// As [`RemoteStore::gather`]; [`Error::BatchTooLarge`] for a record that alone is over
    /// [`RemoteOptions::memory_limit`].
    pub fn verify(&self) -> Result<u64> {
        // Blocks fit the memory limit too: an intact store verifies under any limit that holds
        // its largest record.
        let cap = VERIFY_BLOCK_BYTES.min(self.options.memory());
        let mut start = 0u64;
        while start < self.len() {
            let (mut end, mut bytes) = (start, 0u64);
            while end < self.len() && end - start < VERIFY_BLOCK_RECORDS {
                let e = &self.entries[end as usize];
                let b = u64::from(e.logical) + u64::from(e.stored);
                if end > start && bytes + b > cap {
                    break;
                }
                bytes += b;
                end += 1;
            }
            self.gather_flat(&(start..end).collect::<Vec<_>>())?;
            start = end;
        }
        Ok(self.len())
    }

    /// What the index says of the store, nothing else fetched: records, logical bytes, stored
    /// bytes, and records per codec.
    pub fn summary(&self) -> RemoteSummary {
        let mut s = RemoteSummary { records: self.len(), ..RemoteSummary::default() };
        for e in &self.entries {
            s.logical_bytes += u64::from(e.logical);
            s.stored_bytes += u64::from(e.stored);
            s.codecs.count_tag(e.codec);
        }
        s
    }

    /// A small file of the store directory (`schema.msgpack`), whole: at most 64 MiB.
    ///
    /// # Errors
    /// [`Error::Remote`] naming it, for a failed request or a response that declares more than
    /// 64 MiB or sends other than it declares.
    pub fn get_file(&self, name: &str) -> Result<Vec<u8>> {
        Ok(self.get_whole(name, MAX_SMALL_FILE, None)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_paths_resolve_inside_the_bucket() {
        assert_eq!(join_url("s3://b/sets/all", "../../parts/p0").unwrap(), "s3://b/parts/p0");
        assert_eq!(join_url("s3://b/sets/all/", "p0/./x").unwrap(), "s3://b/sets/all/p0/x");
        assert!(join_url("s3://b/sets/all", "../../../up").is_err(), "out of the bucket");
        assert!(join_url("s3://b/all", "/abs/p0").is_err());
        assert!(join_url("s3://b/all", "C:\\data\\p0").is_err());
    }
}
