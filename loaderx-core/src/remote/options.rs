//! [`RemoteOptions`]: how a remote store is reached (endpoint, credentials, retries, timeouts)
//! and read (coalescing, concurrency, the page cache, the memory limit), and the S3 client they
//! build.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};

use super::redact::scrub;
use crate::{Error, Result};

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
    /// Every object read from the server, no local copy (see [`RemoteOptions::uncached`]).
    uncached: bool,
}

impl std::fmt::Debug for RemoteOptions {
    // Never the keys: only whether they are set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("endpoint", &self.endpoint.as_deref().map(|e| scrub(e, Some(e), &[])))
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
            .field("uncached", &self.uncached)
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
    /// Reads every object from the server: no cached index, no page cache (what `verify` asks:
    /// the objects as the server holds them, not a copy kept here under an ETag the server
    /// keeps after its bytes changed; look 100).
    pub fn uncached(mut self) -> Self {
        self.uncached = true;
        self.cache = None;
        self
    }

    /// Whether [`RemoteOptions::uncached`] was asked.
    pub(crate) fn is_uncached(&self) -> bool {
        self.uncached
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
    /// [`cache`](crate::remote::cache)). Without this, `LOADERX_REMOTE_CACHE` names the directory and
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

    pub(super) fn memory(&self) -> u64 {
        self.memory_limit.unwrap_or_else(default_memory_limit)
    }

    /// `text` with every credential these options (or the environment) know replaced, cut to a
    /// few KiB.
    pub(super) fn scrub(&self, text: &str) -> String {
        let known: Vec<&str> = [&self.access_key_id, &self.secret_access_key]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        scrub(text, self.endpoint.as_deref(), &known)
    }

    /// These options with the page cache the environment names when none is set:
    /// `LOADERX_REMOTE_CACHE=DIR` and `LOADERX_REMOTE_CACHE_BYTES` (default 8 GiB). The one
    /// documented override of the remote engine, read where a face builds its options (the
    /// CLI, Python, `DenseSource::open` of a URL), never by the engine below them (issue 41:
    /// a policy is a parameter).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `LOADERX_REMOTE_CACHE_BYTES` that is no byte count.
    pub fn with_env_cache(self) -> Result<Self> {
        self.with_cache_from(|k| std::env::var_os(k))
    }

    /// [`RemoteOptions::with_env_cache`] with the variables looked up by `var`.
    pub(crate) fn with_cache_from(self, var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Self> {
        if self.cache.is_some() || self.uncached {
            return Ok(self);
        }
        let Some(dir) = var("LOADERX_REMOTE_CACHE").filter(|d| !d.is_empty()) else { return Ok(self) };
        let limit = match var("LOADERX_REMOTE_CACHE_BYTES") {
            Some(v) => v.to_str().and_then(|v| v.trim().parse::<u64>().ok()).ok_or_else(|| {
                Error::InvalidArgument(format!("LOADERX_REMOTE_CACHE_BYTES={v:?} is not a byte count"))
            })?,
            None => 8 << 30,
        };
        Ok(self.cache(PathBuf::from(dir), limit))
    }

    /// The cache directory, limit and page, from the options.
    pub(super) fn cache_config(&self) -> Result<Option<(PathBuf, u64, u64)>> {
        let page = self.page_size.unwrap_or(1 << 20);
        if page == 0 || !page.is_multiple_of(4096) {
            return Err(Error::InvalidArgument(format!(
                "a cache page of {page} bytes: use a multiple of 4096"
            )));
        }
        let Some((dir, limit)) = self.cache.clone().filter(|_| !self.uncached) else { return Ok(None) };
        if limit < page {
            return Err(Error::InvalidArgument(format!(
                "a cache limit of {limit} bytes holds no page of {page} bytes"
            )));
        }
        Ok(Some((dir, limit, page)))
    }

    pub(super) fn gap(&self) -> u64 {
        self.max_gap.unwrap_or(64 << 10)
    }
    /// Requests in flight at once ([`RemoteOptions::concurrency`], default 16).
    pub(super) fn in_flight(&self) -> usize {
        self.concurrency.unwrap_or(16)
    }
    pub(super) fn request(&self) -> u64 {
        self.max_request.unwrap_or(8 << 20).max(1)
    }

    /// The object store of `bucket`.
    pub(super) fn build(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        Ok(Arc::new(self.build_s3(bucket)?))
    }

    /// [`RemoteOptions::build`], as the S3 client itself (whose listings go a page at a time).
    pub(super) fn build_s3(&self, bucket: &str) -> Result<object_store::aws::AmazonS3> {
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
        b.with_retry(retry).build().map_err(|e| Error::Remote {
            url: format!("s3://{bucket}"),
            range: None,
            reason: format!("cannot configure the S3 client: {}", self.scrub(&e.to_string())),
        })
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

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    /// The environment's cache is read by `with_env_cache` alone, where a face builds its
    /// options: the options' own cache wins, a missing or empty directory sets none, the limit
    /// defaults to 8 GiB and a limit that is no byte count is an error naming the variable.
    #[test]
    fn the_environments_cache_is_read_where_options_are_built() {
        fn env(dir: Option<&'static str>, bytes: Option<&'static str>) -> impl Fn(&str) -> Option<OsString> {
            move |k| match k {
                "LOADERX_REMOTE_CACHE" => dir.map(OsString::from),
                "LOADERX_REMOTE_CACHE_BYTES" => bytes.map(OsString::from),
                _ => None,
            }
        }
        let cache = |o: RemoteOptions| o.cache_config().unwrap().map(|(d, l, _)| (d, l));
        assert_eq!(cache(RemoteOptions::new()), None, "no cache unless asked for");
        let none = RemoteOptions::new().with_cache_from(env(None, Some("5"))).unwrap();
        assert_eq!(cache(none), None);
        let empty = RemoteOptions::new().with_cache_from(env(Some(""), None)).unwrap();
        assert_eq!(cache(empty), None);
        let dir = RemoteOptions::new().with_cache_from(env(Some("/c"), None)).unwrap();
        assert_eq!(cache(dir), Some((PathBuf::from("/c"), 8 << 30)));
        let sized = RemoteOptions::new().with_cache_from(env(Some("/c"), Some(" 16777216 "))).unwrap();
        assert_eq!(cache(sized), Some((PathBuf::from("/c"), 16 << 20)));
        let own = RemoteOptions::new()
            .cache("/mine", 32 << 20)
            .with_cache_from(env(Some("/c"), Some("x")))
            .unwrap();
        assert_eq!(cache(own), Some((PathBuf::from("/mine"), 32 << 20)));
        let bad = RemoteOptions::new().with_cache_from(env(Some("/c"), Some("lots")));
        assert!(
            matches!(&bad, Err(Error::InvalidArgument(m)) if m.contains("LOADERX_REMOTE_CACHE_BYTES")),
            "{bad:?}"
        );
    }
}
