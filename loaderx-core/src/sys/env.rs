//! What the environment says about where files go: the cache directory.

use std::path::PathBuf;

/// Where converted datasets (and remote stores' page caches) are cached: `$LOADERX_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/loaderx`, else `~/.cache/loaderx`, else `loaderx-cache` in the system
/// temporary directory.
pub fn cache_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("LOADERX_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("loaderx")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/loaderx")))
        .unwrap_or_else(|| std::env::temp_dir().join("loaderx-cache"))
}
