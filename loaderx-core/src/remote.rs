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
//! `AWS_ALLOW_HTTP`) or [`RemoteOptions`]; no error or log shows a credential.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ObjectStore, PutPayload, RetryConfig};

use crate::format::v2::{ENTRY_SIZE, Entry, HEADER_SIZE, Header};
use crate::{Codec, Error, Result};

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
}

impl std::fmt::Debug for RemoteOptions {
    // Never the keys: only whether they are set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id.as_ref().map(|_| "<set>"))
            .field("secret_access_key", &self.secret_access_key.as_ref().map(|_| "<set>"))
            .field("allow_http", &self.allow_http)
            .field("max_gap", &self.max_gap)
            .field("max_request", &self.max_request)
            .field("concurrency", &self.concurrency)
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
            reason: format!("cannot configure the S3 client: {}", scrub(&e.to_string())),
        })?;
        Ok(Arc::new(store))
    }
}

/// `text` without anything that looks like a credential from the environment.
fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    for k in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"] {
        if let Ok(v) = std::env::var(k)
            && v.len() >= 4
        {
            out = out.replace(&v, "<redacted>");
        }
    }
    out
}

/// Whether `path` names a remote store (`s3://...`).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("s3://"))
}

/// `s3://bucket/prefix` as (bucket, prefix).
fn parse_url(url: &str) -> Result<(String, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::InvalidArgument(format!("{url:?} is not an s3:// URL")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
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
    /// Records stored raw, zstd, zstd_dict and lz4.
    pub codecs: [u64; 4],
}

/// A batch's responses, and per position its response and offset there.
type Fetched = (Vec<bytes::Bytes>, Vec<(usize, usize)>);

/// A read-only v2 store on S3-compatible object storage; see the [module documentation](self).
pub struct RemoteStore {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    runtime: tokio::runtime::Runtime,
    entries: Vec<Entry>,
    dict: Option<Arc<crate::store::Dictionary>>,
    options: RemoteOptions,
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
    /// [`Error::InvalidArgument`] for a v1 store (not read remotely yet) or a bad URL.
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
            options,
        };
        let index = match r.cached_index() {
            Ok(b) => b,
            Err(e) if r.exists("meta.zr") => {
                return Err(Error::InvalidArgument(format!(
                    "{url} is a v1 store; remote reading needs v2 (loaderx migrate STORE --to v2): {e}"
                )));
            }
            Err(e) => return Err(e),
        };
        let path = r.object_url("index.zr");
        let corrupt =
            |offset: u64, reason: String| Error::Corrupt { path: PathBuf::from(&path), offset, reason };
        let header = Header::parse(&index, true).map_err(|e| corrupt(0, format!("{e:?}")))?;
        let count = usize::try_from(header.count).map_err(|_| corrupt(40, "a count past usize".into()))?;
        let need = count.checked_mul(ENTRY_SIZE).and_then(|n| n.checked_add(HEADER_SIZE));
        if need.is_none_or(|n| n > index.len()) {
            return Err(corrupt(40, format!("{count} entries in {} bytes", index.len())));
        }
        r.entries = (0..count)
            .map(|i| {
                let at = HEADER_SIZE + i * ENTRY_SIZE;
                Entry::parse(&index[at..at + ENTRY_SIZE])
                    .map_err(|e| corrupt(at as u64, format!("entry {i}: {e:?}")))
            })
            .collect::<Result<_>>()?;
        if header.dict_id != 0 {
            let bytes = r.get_whole("dict.zr")?;
            let raw = crate::format::dict::decode(&bytes).map_err(|(o, why)| Error::Corrupt {
                path: PathBuf::from(r.object_url("dict.zr")),
                offset: o,
                reason: why,
            })?;
            r.dict = Some(crate::store::Dictionary::new(raw.to_vec()));
        }
        Ok(r)
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
        Error::Remote { url: self.object_url(name), range, reason: scrub(&e.to_string()) }
    }

    fn exists(&self, name: &str) -> bool {
        self.runtime.block_on(self.store.head(&self.key(name))).is_ok()
    }

    /// The index, from the local cache when the object's ETag is the cached copy's (the
    /// consistency token: a store rewritten under the same URL has another), else fetched and
    /// cached (temporary file, then rename). The cache is `$LOADERX_CACHE_DIR/remote/...`
    /// ([`crate::convert::cache_dir`]); it is an optimisation: any failure to use it fetches.
    fn cached_index(&self) -> Result<Vec<u8>> {
        let key = self.key("index.zr");
        let meta = self
            .runtime
            .block_on(self.store.head(&key))
            .map_err(|e| self.remote_err("index.zr", None, &e))?;
        let token = meta.e_tag.clone().unwrap_or_default();
        let dir = crate::convert::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::fingerprint(self.url.as_bytes())));
        let (cached, tag) = (dir.join("index.zr"), dir.join("etag"));
        if !token.is_empty()
            && std::fs::read_to_string(&tag).is_ok_and(|t| t == token)
            && let Ok(bytes) = std::fs::read(&cached)
            && bytes.len() as u64 == meta.size
        {
            return Ok(bytes);
        }
        let bytes = self.get_whole("index.zr")?;
        if !token.is_empty() && std::fs::create_dir_all(&dir).is_ok() {
            let _ = crate::store::write_atomic(&dir, "index.zr", &bytes)
                .and_then(|()| crate::store::write_atomic(&dir, "etag", token.as_bytes()));
        }
        Ok(bytes)
    }

    /// Where this store's index is cached locally.
    pub fn index_cache(&self) -> PathBuf {
        crate::convert::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::fingerprint(self.url.as_bytes())))
            .join("index.zr")
    }

    fn get_whole(&self, name: &str) -> Result<Vec<u8>> {
        let key = self.key(name);
        self.runtime
            .block_on(async { self.store.get(&key).await?.bytes().await })
            .map(|b| b.to_vec())
            .map_err(|e| self.remote_err(name, None, &e))
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

    /// Each record's logical length (from the index: nothing is fetched).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the URL.
    pub fn record_lens(&self, indices: &[u64]) -> Result<Vec<u32>> {
        indices.iter().map(|&i| self.entry(i).map(|e| e.logical)).collect()
    }

    fn entry(&self, i: u64) -> Result<&Entry> {
        self.entries.get(i as usize).ok_or_else(|| Error::IndexOutOfRange {
            path: PathBuf::from(&self.url),
            index: i,
            len: self.len(),
        })
    }

    /// Fetches the stored bytes of `indices`: sorted by chunk and offset, coalesced into range
    /// requests, issued concurrently. Returns each request's bytes and, per position of
    /// `indices`, its request and offset in it.
    fn fetch(&self, indices: &[u64]) -> Result<Fetched> {
        let mut order: Vec<(usize, &Entry)> = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            order.push((k, self.entry(i)?));
        }
        order.sort_by_key(|(_, e)| (e.chunk, e.offset));
        let (gap, max) = (self.options.gap(), self.options.request());
        let mut requests: Vec<(u32, std::ops::Range<u64>)> = Vec::new();
        let mut place = vec![(0usize, 0usize); indices.len()];
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
            place[k] = (n, (e.offset - requests[n].1.start) as usize);
        }
        let concurrency = self.options.concurrency.unwrap_or(16);
        let fetched: Vec<(usize, std::result::Result<bytes::Bytes, object_store::Error>)> =
            self.runtime.block_on(
                futures::stream::iter(requests.iter().enumerate().map(|(n, (c, r))| {
                    let key = self.key(&format!("{c}.zr"));
                    let store = Arc::clone(&self.store);
                    let r = r.clone();
                    async move { (n, store.get_range(&key, r).await) }
                }))
                .buffer_unordered(concurrency)
                .collect(),
            );
        let mut out = vec![bytes::Bytes::new(); requests.len()];
        for (n, got) in fetched {
            let (c, range) = &requests[n];
            let name = format!("{c}.zr");
            let bytes = got.map_err(|e| self.remote_err(&name, Some(range.clone()), &e))?;
            if bytes.len() as u64 != range.end - range.start {
                return Err(Error::Remote {
                    url: self.object_url(&name),
                    range: Some(range.clone()),
                    reason: format!("{} bytes came back", bytes.len()),
                });
            }
            out[n] = bytes;
        }
        Ok((out, place))
    }

    /// Record `index`'s stored bytes at `(request, offset)` of `fetched`, checked against its
    /// crc32c, with its entry and codec.
    fn checked<'b>(
        &self,
        index: u64,
        fetched: &'b [bytes::Bytes],
        (n, at): (usize, usize),
    ) -> Result<(&Entry, Codec, &'b [u8])> {
        let e = self.entry(index)?;
        let bad = |reason: String| Error::CorruptRecord { path: PathBuf::from(&self.url), index, reason };
        let stored =
            fetched[n].get(at..at + e.stored as usize).ok_or_else(|| bad("outside its request".into()))?;
        if crc32c::crc32c(stored) != e.crc {
            return Err(bad("its crc32c does not match the index (fetched from the object store)".into()));
        }
        let codec = Codec::from_tag(e.codec).ok_or_else(|| bad(format!("codec tag {}", e.codec)))?;
        Ok((e, codec, stored))
    }

    /// The records of `indices`, in order: fetched in coalesced, concurrent range requests,
    /// each checked against its crc32c and decoded.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::Remote`] naming the chunk's URL and byte range
    /// after the last retry; [`Error::CorruptRecord`] naming the URL and index for a record
    /// whose checksum does not match or that does not decode. Never a partial record.
    pub fn gather(&self, indices: &[u64]) -> Result<Vec<Vec<u8>>> {
        let lens = self.record_lens(indices)?;
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut flat = vec![0u8; total];
        crate::sys::fill_slice(&mut flat, |mut d| self.gather_to(indices, &mut d))?;
        let mut at = 0usize;
        Ok(lens
            .iter()
            .map(|&l| {
                let r = flat[at..at + l as usize].to_vec();
                at += l as usize;
                r
            })
            .collect())
    }

    /// [`RemoteStore::gather`] straight into `dst` (the records back to back, in order): one
    /// copy (or decode) from the response into the destination.
    pub(crate) fn gather_to(&self, indices: &[u64], dst: &mut crate::sys::Destination<'_>) -> Result<()> {
        let (fetched, place) = self.fetch(indices)?;
        let mut decoder = crate::store::Decoder::new(self.dict.as_deref());
        for (k, &i) in indices.iter().enumerate() {
            let (e, codec, stored) = self.checked(i, &fetched, place[k])?;
            if codec == Codec::Raw {
                dst.copy(stored);
            } else {
                decoder.decode(codec, stored, dst, e.logical as usize).map_err(|why| {
                    Error::CorruptRecord {
                        path: PathBuf::from(&self.url),
                        index: i,
                        reason: format!("{why:?}"),
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Reads every record and checks it ([`RemoteStore::gather`] in blocks): the records
    /// checked, or the first damaged one as the error.
    ///
    /// # Errors
    /// As [`RemoteStore::gather`].
    pub fn verify(&self) -> Result<u64> {
        let mut start = 0u64;
        while start < self.len() {
            let end = (start + 4096).min(self.len());
            self.gather(&(start..end).collect::<Vec<_>>())?;
            start = end;
        }
        Ok(self.len())
    }

    /// What the index says of the store, nothing else fetched: records, logical bytes, stored
    /// bytes, and records per codec (raw, zstd, zstd_dict, lz4).
    pub fn summary(&self) -> RemoteSummary {
        let mut s = RemoteSummary { records: self.len(), ..RemoteSummary::default() };
        for e in &self.entries {
            s.logical_bytes += u64::from(e.logical);
            s.stored_bytes += u64::from(e.stored);
            if let Some(c) = s.codecs.get_mut(usize::from(e.codec)) {
                *c += 1;
            }
        }
        s
    }

    /// A file of the store directory (`schema.msgpack`), whole.
    ///
    /// # Errors
    /// [`Error::Remote`] naming it.
    pub fn get_file(&self, name: &str) -> Result<Vec<u8>> {
        self.get_whole(name)
    }
}

/// Files larger than this go up as multipart uploads, in parts of [`PART`] bytes.
const MULTIPART_OVER: u64 = 32 << 20;
const PART: u64 = 16 << 20;

/// Uploads the local store (or dataset) directory `dir` to `url`: every regular file, a chunk
/// file skipped when it is already there with the same length and (by the store's manifests)
/// the same crc32c, so an interrupted push restarts where it stopped, the index last (a reader opening the store during a push sees the old index or
/// none). `progress` is called with the bytes sent so far.
///
/// # Errors
/// [`Error::Io`] naming a local file; [`Error::Remote`] naming the object for a failed upload;
/// [`Error::InvalidArgument`] for a v1 store (migrate it to v2 first).
pub fn push(dir: &Path, url: &str, options: RemoteOptions, progress: impl Fn(u64)) -> Result<u64> {
    let (bucket, prefix) = parse_url(url)?;
    if dir.join("meta.zr").exists() {
        return Err(Error::InvalidArgument(format!(
            "{} is a v1 store (a fixed 256 MiB index): remote stores are v2; `loaderx migrate {} --to v2` first",
            dir.display(),
            dir.display()
        )));
    }
    let store = options.build(&bucket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))?;
    // The multipart writer spawns its part uploads on the current runtime.
    let _entered = runtime.enter();
    let mut files: Vec<(String, PathBuf, u64)> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let e = e.map_err(|e| Error::io("read directory", dir, e))?;
        let meta = e.metadata().map_err(|err| Error::io("stat", e.path(), err))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if meta.is_file() && name != "write.lock" {
            files.push((name, e.path(), meta.len()));
        }
    }
    // The index goes last: its count publishes the records.
    files.sort_by_key(|(n, _, _)| (n == "index.zr" || n == "meta.zr", n.clone()));
    let key = |name: &str| {
        if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) }
    };
    // A chunk file is skipped only when the remote manifest (what an earlier push of this store
    // finished with) and the local one give it the same committed length and crc32c, and the
    // object there has that length: a restarted push resumes, another store under the same URL
    // is uploaded whole.
    let manifest = |bytes: &[u8]| crate::format::v2::Manifest::decode(bytes).ok();
    let local_manifest = std::fs::read(dir.join("manifest.zr")).ok().and_then(|b| manifest(&b));
    let remote_manifest = runtime
        .block_on(async { store.get(&key("manifest.zr")).await?.bytes().await })
        .ok()
        .and_then(|b| manifest(&b));
    let same_chunk = |name: &str| -> bool {
        let Some(id) = name.strip_suffix(".zr").and_then(|n| n.parse::<usize>().ok()) else { return false };
        match (&local_manifest, &remote_manifest) {
            (Some(l), Some(r)) => l.chunks.get(id).is_some_and(|c| r.chunks.get(id) == Some(c)),
            _ => false,
        }
    };
    let mut sent = 0u64;
    for (name, path, len) in files {
        let k = key(&name);
        let there = runtime.block_on(store.head(&k)).ok().map(|m| m.size);
        if there != Some(len) || !same_chunk(&name) {
            let failed = |e: object_store::Error| Error::Remote {
                url: format!("{}/{name}", url.trim_end_matches('/')),
                range: None,
                reason: scrub(&e.to_string()),
            };
            if len <= MULTIPART_OVER {
                let bytes = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
                runtime.block_on(store.put(&k, PutPayload::from(bytes))).map_err(failed)?;
            } else {
                // Large chunk files go up in parts, read a part at a time.
                use std::io::Read;
                let mut f = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
                let upload = runtime.block_on(store.put_multipart(&k)).map_err(failed)?;
                let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART as usize);
                let mut buf = vec![0u8; PART as usize];
                let mut done = 0u64;
                loop {
                    let n = f.read(&mut buf).map_err(|e| Error::io("read", &path, e))?;
                    if n == 0 {
                        break;
                    }
                    runtime.block_on(w.wait_for_capacity(4)).map_err(failed)?;
                    w.write(&buf[..n]);
                    done += n as u64;
                    progress(sent + done);
                }
                runtime.block_on(w.finish()).map_err(failed)?;
            }
        }
        sent += len;
        progress(sent);
    }
    Ok(sent)
}
