//! MNIST from its IDX files, converted once into cached stores: what the adapters' drop-in
//! `MnistDataset` (burn) and `mnist::load` (candle) read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Codec, DenseSource, Error, Result, WriteOptions};

/// Which half of MNIST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MnistSplit {
    /// `train-*-idx?-ubyte`.
    Train,
    /// `t10k-*-idx?-ubyte`.
    Test,
}

/// The (images, labels) stores of one split of the IDX files in `dir` (each `NAME` or
/// `NAME.gz`), converted into `cache` on first use (raw codec) and reused after: the cached copy
/// is keyed by the files' paths, sizes and modification times, so changed files are converted
/// again. Concurrent first uses are safe: each conversion is all-or-nothing, and a loser of the
/// final rename uses the winner's store.
///
/// # Errors
/// [`Error::NotAStore`] naming `dir` when a file is missing; the conversion's errors naming the
/// file.
pub fn mnist_stores(dir: &Path, split: MnistSplit, cache: &Path) -> Result<(PathBuf, PathBuf)> {
    let prefix = match split {
        MnistSplit::Train => "train",
        MnistSplit::Test => "t10k",
    };
    let images = idx_file(dir, &format!("{prefix}-images-idx3-ubyte"))?;
    let labels = idx_file(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
    let mut key = String::new();
    for f in [&images, &labels] {
        let meta = std::fs::metadata(f).map_err(|e| Error::io("stat", f, e))?;
        let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        key.push_str(&format!("{}:{}:{:?};", f.display(), meta.len(), mtime));
    }
    let root = cache.join(format!("mnist-{prefix}-{:016x}", crate::format::hash64(key.as_bytes())));
    let (img_store, lbl_store) = (root.join("images"), root.join("labels"));
    for (src, out) in [(&images, &img_store), (&labels, &lbl_store)] {
        if DenseSource::open(out).is_err() {
            std::fs::create_dir_all(&root).map_err(|e| Error::io("create directory", &root, e))?;
            convert_once(src, out)?;
        }
    }
    Ok((img_store, lbl_store))
}

/// Converts `src` into `out` through a directory of this call's own (so concurrent first uses,
/// from threads or processes, never write the same files), renamed into place; when another
/// caller's copy got there first (a directory is not renamed over a non-empty one), that copy is
/// used and this one removed.
fn convert_once(src: &Path, out: &Path) -> Result<()> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("store");
    let tmp = out.with_file_name(format!(
        ".{name}-{}-{}-{nanos}.tmp",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    let converted = super::idx(src, &tmp, WriteOptions::new().codec(Codec::Raw));
    let placed = converted.and_then(|_| {
        std::fs::rename(&tmp, out).or_else(|e| {
            if DenseSource::open(out).is_ok() { Ok(()) } else { Err(Error::io("rename into", out, e)) }
        })
    });
    if tmp.exists() {
        // The loser's copy (or a failed conversion's remains): nothing else refers to it.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    match placed {
        Err(_) if DenseSource::open(out).is_ok() => Ok(()),
        other => other,
    }
}

/// `dir/name` or `dir/name.gz`.
fn idx_file(dir: &Path, name: &str) -> Result<PathBuf> {
    [dir.join(name), dir.join(format!("{name}.gz"))].into_iter().find(|p| p.is_file()).ok_or_else(|| {
        Error::NotAStore {
            path: dir.to_path_buf(),
            reason: format!("MNIST: neither {name} nor {name}.gz is there"),
        }
    })
}

/// Where MNIST's IDX files are: `$LOADERX_MNIST_DIR`, else the first `data/mnist-10k` at or
/// above the current directory (this repository bundles 10,000 digits there).
///
/// # Errors
/// [`Error::InvalidArgument`] saying where it looked.
pub fn mnist_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("LOADERX_MNIST_DIR") {
        return Ok(d.into());
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", ".", e))?;
    cwd.ancestors().map(|a| a.join("data/mnist-10k")).find(|p| p.is_dir()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "MNIST: set LOADERX_MNIST_DIR to a directory of its IDX files (no data/mnist-10k at or above {})",
            cwd.display()
        ))
    })
}
