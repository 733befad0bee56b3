//! Writing beside pushed stores on object storage: a store set's files put over parts already
//! pushed (`put`, `part_path`: the set is written by `dataset::stitch_remote`), and the two calls
//! a distributed writer cleans up with: [`list_dirs`] and [`remove_prefix`].

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::RemoteOptions;
use super::url::parse_url;
use crate::{Error, Result};

/// The object `name` under `prefix`.
fn key(prefix: &str, name: &str) -> ObjectPath {
    if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) }
}

/// A private runtime for one call's requests.
fn runtime(url: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))
}

/// The path of the directory `to` relative to the directory `from`, both `/`-separated prefixes
/// in one bucket; `None` when `to` is `from` or a directory above it (a set cannot hold itself).
fn relative(from: &str, to: &str) -> Option<String> {
    let a: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == b.len() {
        return None;
    }
    let mut parts = vec![".."; a.len() - common];
    parts.extend(&b[common..]);
    Some(parts.join("/"))
}

/// Puts `bytes` as the object `name` under the `s3://` URL `url` (one put: a reader sees the old
/// object or the new one).
///
/// # Errors
/// [`Error::Remote`] naming the object for a failed put.
pub(crate) fn put(url: &str, name: &str, bytes: Vec<u8>, options: &RemoteOptions) -> Result<()> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build(&bucket)?;
    runtime(url)?.block_on(store.put(&key(&prefix, name), PutPayload::from(bytes))).map_err(|e| {
        Error::Remote {
            url: format!("{}/{name}", url.trim_end_matches('/')),
            range: None,
            reason: options.scrub(&e.to_string()),
        }
    })?;
    Ok(())
}

/// Refuses to put a store set at the `s3://` URL `url` when a store is there: readers open a
/// store's index before a set's manifest, so the set would say it was written and never be read
/// (look 78).
///
/// # Errors
/// [`Error::NotReplaceable`] naming the store's index; [`Error::Remote`] for a failed request.
pub(crate) fn refuse_store_at(url: &str, options: &RemoteOptions) -> Result<()> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build(&bucket)?;
    let runtime = runtime(url)?;
    for name in [crate::store::INDEX_FILE, crate::store::META_FILE] {
        let object = format!("{}/{name}", url.trim_end_matches('/'));
        match runtime.block_on(store.head(&key(&prefix, name))) {
            Ok(_) => {
                return Err(Error::NotReplaceable {
                    path: object.into(),
                    reason: format!(
                        "{} holds a store, which readers open before a store set: put the set at \
                         another URL, or remove the store first",
                        crate::redact_urls(url)
                    ),
                });
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                return Err(Error::Remote {
                    url: object,
                    range: None,
                    reason: options.scrub(&e.to_string()),
                });
            }
        }
    }
    Ok(())
}

/// The path of the store at the URL `part` relative to the set at the URL `out`, as a set's
/// manifest names it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a part in another bucket, or at `out` or a directory above it
/// (a set cannot hold itself).
pub(crate) fn part_path(out: &str, part: &str) -> Result<String> {
    let (bucket, out_prefix) = parse_url(out)?;
    let (b, prefix) = parse_url(part)?;
    if b != bucket {
        return Err(Error::InvalidArgument(format!(
            "{part}: a set's parts lie in its bucket ({out} is in {bucket:?})"
        )));
    }
    relative(&out_prefix, &prefix).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{part}: a part of the set {out} is the set's directory or one above it"
        ))
    })
}

/// The names of the "directories" directly under the `s3://` URL `url` (the common prefixes of
/// its objects, one level down), sorted.
///
/// # Errors
/// [`Error::Remote`] naming `url` for a failed listing.
pub fn list_dirs(url: &str, options: RemoteOptions) -> Result<Vec<String>> {
    list_level(url, &options, |page, names| {
        names.extend(page.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)));
    })
}

/// The names of the objects directly under the `s3://` URL `url` taken as a directory (not
/// those of its subdirectories), sorted: what a caller removing a set there checks it holds
/// nothing but the set's files (look 145, L145-1).
///
/// # Errors
/// As [`list_dirs`].
pub fn list_objects(url: &str, options: RemoteOptions) -> Result<Vec<String>> {
    list_level(url, &options, |page, names| {
        names.extend(page.objects.iter().filter_map(|o| o.location.filename().map(str::to_owned)));
    })
}

/// The names `pick` takes from each page of the listing one level under `url`, sorted, once each.
fn list_level(
    url: &str,
    options: &RemoteOptions,
    pick: impl Fn(&object_store::ListResult, &mut Vec<String>),
) -> Result<Vec<String>> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build_s3(&bucket)?;
    let rt = runtime(url)?;
    let mut names = Vec::new();
    rt.block_on(list_pages(&store, url, options, &prefix, true, |page| pick(&page, &mut names)))?;
    names.sort();
    names.dedup();
    Ok(names)
}

/// The most entries (objects and common prefixes) one listing takes: a server whose listing
/// never ends (its continuation token repeating, or a new one every page) held a command for
/// good, and a removal's memory grew without end (look 112, L112-1). About a million: the
/// chunks of a store of 64 TB at 64 MiB a chunk.
const MAX_LISTED: usize = 1 << 20;

/// Lists the objects under `prefix` (a directory: `prefix/...`; the bucket's root when empty),
/// one level down when `delimiter`, handing each page to `page` as it comes. Refused when a
/// page's continuation token is one an earlier page gave, or past [`MAX_LISTED`] entries.
async fn list_pages(
    store: &object_store::aws::AmazonS3,
    url: &str,
    options: &RemoteOptions,
    prefix: &str,
    delimiter: bool,
    mut page: impl FnMut(object_store::ListResult),
) -> Result<()> {
    use object_store::list::{PaginatedListOptions, PaginatedListStore};
    let refused = |reason: String| Error::Remote { url: url.into(), range: None, reason };
    // Unlike `ObjectStore::list`, a paginated listing takes the prefix as it is.
    let at = (!prefix.is_empty()).then(|| format!("{}/", prefix.trim_end_matches('/')));
    let (mut token, mut tokens, mut listed) = (None, std::collections::HashSet::new(), 0usize);
    loop {
        let opts = PaginatedListOptions {
            delimiter: delimiter.then_some("/".into()),
            page_token: token.take(),
            ..PaginatedListOptions::default()
        };
        let got = store
            .list_paginated(at.as_deref(), opts)
            .await
            .map_err(|e| refused(options.scrub(&e.to_string())))?;
        listed = listed.saturating_add(got.result.objects.len() + got.result.common_prefixes.len());
        if listed > MAX_LISTED {
            return Err(refused(format!(
                "the server's listing goes on past {MAX_LISTED} entries: refusing to follow it further"
            )));
        }
        page(got.result);
        match got.page_token {
            None => return Ok(()),
            Some(t) if !tokens.insert(t.clone()) => {
                return Err(refused(
                    "the server's listing gave a continuation token a second time: it would never end".into(),
                ));
            }
            Some(t) => token = Some(t),
        }
    }
}

/// Removes every object under the `s3://` URL `url` taken as a directory (`url/...`, never an
/// object merely starting with its name); returns how many. A URL naming a bucket's root is
/// refused: this removes one store or set, never a bucket's contents.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bucket's root; [`Error::Remote`] naming `url` for a failed
/// listing or delete.
pub fn remove_prefix(url: &str, options: RemoteOptions) -> Result<u64> {
    let (bucket, prefix) = parse_url(url)?;
    if prefix.is_empty() {
        return Err(Error::InvalidArgument(format!("{url}: refusing to remove a bucket's contents")));
    }
    let store = options.build_s3(&bucket)?;
    let rt = runtime(url)?;
    let failed = |e: object_store::Error| Error::Remote {
        url: url.into(),
        range: None,
        reason: options.scrub(&e.to_string()),
    };
    rt.block_on(async {
        let mut objects: Vec<ObjectPath> = Vec::new();
        list_pages(&store, url, &options, &prefix, false, |page| {
            objects.extend(page.objects.into_iter().map(|m| m.location));
        })
        .await?;
        objects.sort_unstable();
        objects.dedup();
        let n = objects.len() as u64;
        for o in objects {
            match store.delete(&o).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed(e)),
            }
        }
        Ok(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_relative_to_the_set_and_never_hold_it() {
        assert_eq!(
            relative("train/tokens", "train/_parts/tokens/p0").as_deref(),
            Some("../_parts/tokens/p0")
        );
        assert_eq!(relative("sets/all", "sets/all/p0").as_deref(), Some("p0"));
        assert_eq!(relative("", "p0").as_deref(), Some("p0"));
        assert_eq!(relative("a/b", "c").as_deref(), Some("../../c"));
        assert_eq!(relative("a/b", "a/b"), None);
        assert_eq!(relative("a/b", "a"), None);
        assert_eq!(relative("a/b", ""), None);
    }
}
