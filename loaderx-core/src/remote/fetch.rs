//! Fetching a remote store's bytes: whole objects and exact ranges with capped bodies, a batch's
//! records coalesced into concurrent range requests (or read through the page cache, pages
//! checked before they are kept), each chunk object's ETag held and compared.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta};

use super::RemoteStore;
use super::body::{self, BodyError, Expect};
use super::cache::{PageCache, PageKey};
use super::link::Link;
use super::options::RemoteOptions;
use super::url::parse_url;
use crate::format::v2::Entry;
use crate::store::chunk_name;
use crate::sys::HeldAtFork;
use crate::{Error, Result};

/// What a failed whole-object read says, its credentials removed.
fn body_reason(e: BodyError, options: &RemoteOptions) -> String {
    match e {
        BodyError::Store(e) => options.scrub(&e.to_string()),
        BodyError::Length(why) => why,
    }
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

/// What a store's reads have cost, counted as they happen ([`RemoteStats`](super::RemoteStats)
/// is a snapshot: its fields are these).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) bytes_fetched: AtomicU64,
    pub(super) pages_hit: AtomicU64,
    pub(super) pages_filled: AtomicU64,
    pub(super) pages_evicted: AtomicU64,
    pub(super) cache_errors: AtomicU64,
}

pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A chunk object's consistency token (its ETag, or size and modification time on a server that
/// gives none) and, once asked (HEAD), its size.
#[derive(Debug, Clone)]
pub(super) struct ChunkObject {
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
pub(super) type Fetched = (Vec<Bytes>, Vec<(usize, usize, usize)>);

impl RemoteStore {
    /// This process's client and runtime (a forked child's made at its first request).
    pub(super) fn link(&self) -> Result<Arc<Link>> {
        self.links.get(|| {
            let (bucket, _) = parse_url(&self.url)?;
            Link::new(&self.url, self.options.build(&bucket)?)
        })
    }

    /// The chunk objects' tokens, shared; in a child forked while a thread held them,
    /// [`Error::Locked`] (the tokens are what tells a replaced object: never done without).
    fn objects_read(&self) -> Result<RwLockReadGuard<'_, HashMap<u32, ChunkObject>>> {
        self.made_in.read(&self.objects).map_err(|held| self.objects_held(held))
    }

    fn objects_write(&self) -> Result<RwLockWriteGuard<'_, HashMap<u32, ChunkObject>>> {
        self.made_in.write(&self.objects).map_err(|held| self.objects_held(held))
    }

    fn objects_held(&self, held: HeldAtFork) -> Error {
        Error::Locked { path: self.url.clone().into(), reason: held.reason("the chunk objects' tokens") }
    }

    /// Bytes `range` of the store's file `name`, exactly (the body read with that cap).
    pub(super) fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        add(&self.counters.requests, 1);
        let options = GetOptions { range: Some(GetRange::Bounded(range.clone())), ..GetOptions::default() };
        let len = range.end - range.start;
        let link = self.link()?;
        link.runtime
            .block_on(async {
                let response =
                    link.store.get_opts(&self.key(name), options).await.map_err(BodyError::Store)?;
                body::read(response, Expect::Exactly(len)).await
            })
            .map_err(|e| self.body_err(name, Some(range), e))
    }

    /// The error of a failed read of `name`.
    pub(super) fn body_err(&self, name: &str, range: Option<Range<u64>>, e: BodyError) -> Error {
        Error::Remote { url: self.object_url(name), range, reason: body_reason(e, &self.options) }
    }

    pub(super) fn key(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    pub(super) fn object_url(&self, name: &str) -> String {
        format!("{}/{name}", self.url.trim_end_matches('/'))
    }

    pub(super) fn remote_err(
        &self,
        name: &str,
        range: Option<std::ops::Range<u64>>,
        e: &object_store::Error,
    ) -> Error {
        Error::Remote { url: self.object_url(name), range, reason: self.options.scrub(&e.to_string()) }
    }

    pub(super) fn exists(&self, name: &str) -> bool {
        add(&self.counters.requests, 1);
        self.link().is_ok_and(|link| link.runtime.block_on(link.store.head(&self.key(name))).is_ok())
    }

    /// The store's file `name` whole, at most `max` bytes (the response's declared length
    /// checked before anything is allocated, its body read with that cap); with `if_match`, only
    /// the object of that ETag.
    pub(super) fn get_whole(&self, name: &str, max: u64, if_match: Option<String>) -> Result<Bytes> {
        let key = self.key(name);
        add(&self.counters.requests, 1);
        let options = GetOptions { if_match, ..GetOptions::default() };
        let link = self.link()?;
        link.runtime
            .block_on(async {
                let response = link.store.get_opts(&key, options).await.map_err(BodyError::Store)?;
                body::read(response, Expect::AtMost(max)).await
            })
            .map_err(|e| self.body_err(name, None, e))
    }

    /// Fetches the stored bytes of `indices`: through the page cache when there is one, else
    /// sorted by chunk and offset, coalesced into range requests, issued concurrently. Returns
    /// the pieces and, per position of `indices`, its piece and offset there.
    pub(super) fn fetch(&self, indices: &[u64]) -> Result<Fetched> {
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
        // An empty record asks for no bytes: an empty range is no request a server takes (look
        // 143, L143-1: "Range started at 112 and ended at 112"). It reads an empty piece.
        let mut empty = Vec::new();
        for (k, e) in order {
            if e.stored == 0 {
                empty.push(k);
                continue;
            }
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
        let mut pieces = self.get_ranges(&requests)?;
        if !empty.is_empty() {
            for k in empty {
                place[k] = (pieces.len(), 0, 1);
            }
            pieces.push(Bytes::new());
        }
        Ok((pieces, place))
    }

    /// Range requests `(chunk, bytes)`, concurrently (at most [`RemoteOptions::concurrency`]).
    /// Each is sent with the chunk object's token as `If-Match` once it is known and its
    /// response's token compared: an object replaced under the reader is [`Error::Changed`].
    pub(super) fn get_ranges(&self, requests: &[(u32, Range<u64>)]) -> Result<Vec<Bytes>> {
        let tags: Vec<Option<String>> = {
            let objects = self.objects_read()?;
            // Only a real ETag goes out as If-Match (the stand-in token is checked here alone).
            requests.iter().map(|(c, _)| objects.get(c).filter(|o| o.etag).map(|o| o.tag.clone())).collect()
        };
        let concurrency = self.options.in_flight();
        add(&self.counters.requests, requests.len() as u64);
        type Got = std::result::Result<(Bytes, (String, bool)), BodyError>;
        let link = self.link()?;
        let fetched: Vec<(usize, Got)> = link.runtime.block_on(
            futures::stream::iter(requests.iter().enumerate().map(|(n, (c, r))| {
                let key = self.key(&chunk_name(*c));
                let store = Arc::clone(&link.store);
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
            let name = chunk_name(*c);
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

    /// The error of chunk `chunk`'s object changing from the token `expected` to `found`: both
    /// the server's words, scrubbed of credentials and cut to 200 characters (look 112, L112-3:
    /// a server echoing the security token as an ETag had it printed).
    pub(super) fn changed(&self, chunk: u32, expected: &str, found: &str) -> Error {
        let shown = |tag: &str| {
            let tag = self.options.scrub(tag);
            match tag.char_indices().nth(200) {
                Some((cut, _)) => format!("{}...", &tag[..cut]),
                None => tag,
            }
        };
        Error::Changed {
            url: self.object_url(&chunk_name(chunk)),
            expected: shown(expected),
            found: shown(found),
        }
    }

    /// Records chunk `c`'s token (and size), or checks it against the one already recorded.
    pub(super) fn learn(
        &self,
        c: u32,
        (tag, etag): &(String, bool),
        size: Option<u64>,
    ) -> Result<ChunkObject> {
        let mut objects = self.objects_write()?;
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
    pub(super) fn chunk_object(&self, c: u32) -> Result<(String, u64)> {
        let known = self.objects_read()?.get(&c).cloned();
        if let Some(ChunkObject { tag, size: Some(size), .. }) = known {
            return Ok((tag, size));
        }
        let name = chunk_name(c);
        add(&self.counters.requests, 1);
        let link = self.link()?;
        let meta = link
            .runtime
            .block_on(link.store.head(&self.key(&name)))
            .map_err(|e| self.remote_err(&name, None, &e))?;
        let o = self.learn(c, &(token(&meta), has_etag(&meta)), Some(meta.size))?;
        Ok((o.tag, meta.size))
    }

    /// [`RemoteStore::fetch`] through the page cache: each record's pages found open, on disk,
    /// or fetched (under their stripes' locks, contiguous pages of a chunk in one request),
    /// checked, written and kept open. A record is read in place, from as many consecutive pages
    /// as it runs over.
    pub(super) fn fetch_paged(&self, cache: &PageCache, indices: &[u64]) -> Result<Fetched> {
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
                    url: self.object_url(&chunk_name(k.chunk)),
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
            let requests = coalesce(&keys, still, &span, self.options.request().max(p))?;
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
    pub(super) fn check_page(&self, k: PageKey, start: u64, page: &[u8]) -> Result<()> {
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
                            self.object_url(&chunk_name(k.chunk))
                        ),
                        source: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// Record `index`'s stored bytes at `(piece, offset, pieces)` of `fetched`: one slice, or
    /// (across cache pages) one per page it runs over.
    pub(super) fn stored_parts<'b>(
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

    /// Record `i`'s stored bytes fetched from the store again, after they failed their crc32c
    /// as read from the cache: its pages are dropped (this process's open copies and the page
    /// files) and refilled from the response, under their stripes' locks.
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] when the store's bytes fail too (the store is damaged);
    /// [`Error::Remote`] for a failed request.
    pub(super) fn refetch(&self, cache: &PageCache, i: u64, e: &Entry) -> Result<Bytes> {
        let p = cache.page_size();
        let keys: Vec<PageKey> =
            (e.offset / p..=(e.end() - 1) / p).map(|page| PageKey { chunk: e.chunk, page }).collect();
        let _locks = cache.lock(keys.iter().copied())?;
        let (tag, size) = self.chunk_object(e.chunk)?;
        let start = keys[0].page * p;
        let end = ((keys[keys.len() - 1].page + 1) * p).min(size);
        if e.end() > end {
            return Err(Error::Remote {
                url: self.object_url(&chunk_name(e.chunk)),
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
}

/// One range request of a chunk and the pages (indices into the sorted keys) it carries.
type Request = (u32, Range<u64>, Vec<usize>);

/// The range requests that fetch the pages `still` (indices into the sorted `keys`): runs of
/// consecutive pages of one chunk joined while a request stays within `max` bytes, each with
/// the pages it carries.
fn coalesce(
    keys: &[PageKey],
    still: Vec<usize>,
    span: &dyn Fn(PageKey) -> Result<(PathBuf, u64, u64)>,
    max: u64,
) -> Result<Vec<Request>> {
    let mut requests: Vec<Request> = Vec::new();
    for n in still {
        let (_, start, len) = span(keys[n])?;
        match requests.last_mut() {
            Some((c, r, ns)) if *c == keys[n].chunk && r.end == start && r.end + len - r.start <= max => {
                r.end += len;
                ns.push(n);
            }
            _ => requests.push((keys[n].chunk, start..start + len, vec![n])),
        }
    }
    Ok(requests)
}
