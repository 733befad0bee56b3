//! `s3://bucket/prefix` URLs: what names a remote store, a URL split into bucket and prefix, and
//! a store set's relative part paths resolved inside the bucket.

use std::path::Path;

use super::redact::scrub;
use crate::{Error, Result};

/// Whether `path` names a remote store (`s3://...`).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("s3://"))
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
pub(super) fn parse_url(url: &str) -> Result<(String, String)> {
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
            scrub(url, None, &[])
        )));
    }
    if bucket.is_empty() || prefix.split('/').any(|p| p == ".." || p == ".") {
        return Err(Error::InvalidArgument(format!(
            "{url:?}: an s3:// URL names a bucket and a prefix without `.` or `..`"
        )));
    }
    // Keys are written escaped (`x[0]` as `x%5B0%5D`, `café` as `caf%C3%A9`) and without empty
    // segments (`a//b` as `a/b`), but a listing is asked by the prefix as it is: with such a
    // character the two disagree, and what one lists the other never removes, or removes
    // another's (looks 146 and 148, L146-1, L148-1). Refused, naming it.
    if prefix.trim_end_matches('/').split('/').any(str::is_empty) && !prefix.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{:?}: an s3:// URL's path may not hold an empty segment (`//`): object storage keys drop it",
            scrub(url, None, &[])
        )));
    }
    if let Some(c) = prefix.chars().find(|&c| c.is_control() || !c.is_ascii() || ESCAPED_IN_KEYS.contains(c))
    {
        return Err(Error::InvalidArgument(format!(
            "{:?}: an s3:// URL's path may not hold {c:?} (object storage keys hold it escaped, and \
             listings would not find them): name it in ASCII, without any of {ESCAPED_IN_KEYS}",
            scrub(url, None, &[])
        )));
    }
    Ok((bucket.to_string(), prefix.trim_end_matches('/').to_string()))
}

/// The characters `object_store` writes escaped in a key's path (besides control characters).
pub(crate) const ESCAPED_IN_KEYS: &str = "\\{^}%`]\">[~<#|*?";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_paths_resolve_inside_the_bucket() {
        assert_eq!(join_url("s3://b/sets/all", "../../parts/p0").unwrap(), "s3://b/parts/p0");
        assert_eq!(join_url("s3://b/sets/all/", "p0/./x").unwrap(), "s3://b/sets/all/p0/x");
        let says = |base: &str, part: &str, what: &str| {
            let r = join_url(base, part);
            matches!(r, Err(Error::InvalidArgument(m)) if m.contains(what))
        };
        assert!(says("s3://b/sets/all", "../../../up", "climbs out of the bucket"));
        assert!(says("s3://b/all", "/abs/p0", "\"/abs/p0\" is an absolute path"));
        assert!(says("s3://b/all", "C:\\data\\p0", "\"C:/data/p0\" is an absolute path"));
        // Look 146, L146-1: a character keys hold escaped is refused, named.
        for (url, c) in [("s3://b/out/x[0]", "'['"), ("s3://b/a#b/c", "'#'"), ("s3://b/a%23b", "'%'")] {
            let e = parse_url(url).unwrap_err().to_string();
            assert!(e.contains(c) && e.contains("may not hold"), "{e}");
        }
        assert!(parse_url("s3://b/out/x_0-1.2 (copy)").is_ok() && parse_url("s3://b/out/").is_ok());
        // Look 148, L148-1: non-ASCII characters and empty segments, which keys change too.
        for (url, what) in
            [("s3://b/café", "'é'"), ("s3://b/a//b", "empty segment"), ("s3://b//x", "empty segment")]
        {
            let e = parse_url(url).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
    }
}
