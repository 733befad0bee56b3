//! `stitch` and `push`: store sets from parts, local or on object storage, and stores copied up
//! to it.

use std::path::PathBuf;

use anyhow::Context;

#[cfg(feature = "remote")]
use crate::convert;

/// `loaderx push STORE URL`.
#[cfg(feature = "remote")]
pub fn push(store: &std::path::Path, url: &str) -> anyhow::Result<()> {
    // Named as what it is (look 151, L151-3: both were "not a loaderx store").
    if store.to_str().is_some_and(|s| s.starts_with("s3://")) {
        anyhow::bail!(
            "push {}: STORE is the local directory and URL the s3:// one (push STORE URL)",
            store.display()
        );
    }
    if std::fs::symlink_metadata(store).is_err() {
        anyhow::bail!("push {}: it does not exist", store.display());
    }
    // A directory of datasets is pushed a dataset at a time, and said so (look 128, L128-1: "not
    // a loaderx store").
    let datasets = datasets_in(store);
    if !datasets.is_empty() && !store.join("index.zr").exists() && !store.join("meta.zr").exists() {
        anyhow::bail!(
            "push {}: a directory of datasets ({}); push each one: loaderx push {}/{} {url}/{}",
            store.display(),
            datasets.join(", "),
            store.display(),
            datasets[0],
            datasets[0]
        );
    }
    let total: u64 = std::fs::read_dir(store)
        .map(|rd| rd.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0);
    let pb = convert::progress_bar(total);
    let start = std::time::Instant::now();
    let sent = loaderx_core::remote::push(store, url, loaderx_core::remote::RemoteOptions::new(), |n| {
        pb.set_position(n)
    })
    .with_context(|| format!("push {} → {url}", store.display()))?;
    pb.finish_and_clear();
    // What went up: the files found there already are not counted (look 145, L145-2: a push
    // that skipped every chunk said the whole store was pushed).
    crate::print(&format!(
        "{url}: {} uploaded, {:.2}s\n",
        convert::human(sent),
        start.elapsed().as_secs_f64()
    ))
}

/// `loaderx stitch PART... OUT` and `loaderx stitch DIR OUT [--parts N]`.
pub fn stitch(paths: &[PathBuf], count: Option<usize>) -> anyhow::Result<()> {
    let (out, given) = crate::convert::in_and_out(paths, "stitch")?;
    let ctx = || format!("stitch → {}", out.display());
    let urls = paths.iter().filter(|p| p.to_str().is_some_and(|s| s.starts_with("s3://"))).count();
    if urls == paths.len() {
        return stitch_remote(paths, count);
    }
    if urls > 0 {
        anyhow::bail!("stitch: the parts and the set are all local paths or all s3:// URLs");
    }
    let is_dataset = |p: &std::path::Path| p.join(loaderx_core::SCHEMA_FILE).is_file();
    let parts: Vec<PathBuf> = match given {
        [dir] if !is_dataset(dir) => loaderx_core::convert::part_dirs(dir, count).with_context(ctx)?,
        _ if count.is_some() => {
            anyhow::bail!("stitch: --parts N counts the parts of one directory; list PART... without it")
        }
        _ => given.to_vec(),
    };
    if parts.first().is_none_or(|p| is_dataset(p)) {
        let s = loaderx_core::stitch(&parts, out).with_context(ctx)?;
        return crate::print(&format!(
            "{}: a store set of {} parts, {} records\n",
            out.display(),
            s.parts,
            s.records
        ));
    }
    let all = loaderx_core::convert::stitch_datasets(&parts, out).with_context(ctx)?;
    let mut text = String::new();
    for (name, s) in &all {
        text.push_str(&format!("  {name}: a store set of {} parts, {} records\n", s.parts, s.records));
    }
    text.push_str(&format!("{}: {} store sets of {} parts\n", out.display(), all.len(), parts.len()));
    crate::print(&text)
}

/// `loaderx stitch` on object storage: parts pushed to `s3://` URLs (or one URL prefix holding
/// them as part-00000, ...), the set's schema and manifest put at the last URL.
#[cfg(feature = "remote")]
fn stitch_remote(paths: &[PathBuf], count: Option<usize>) -> anyhow::Result<()> {
    let urls: Vec<String> = paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let (out, given) = urls.split_last().context("stitch needs PART... OUT")?;
    let options = loaderx_core::remote::RemoteOptions::new();
    let ctx = || format!("stitch → {out}");
    let parts = match given {
        [prefix] if count.is_some() || holds_parts(prefix, &options).with_context(ctx)? => {
            loaderx_core::convert::remote_part_urls(prefix, count, options.clone()).with_context(ctx)?
        }
        _ if count.is_some() => {
            anyhow::bail!("stitch: --parts N counts the parts under one URL; list PART... without it")
        }
        _ => given.to_vec(),
    };
    let s = match loaderx_core::stitch_remote(&parts, out, options.clone()) {
        Ok(s) => s,
        // A directory of datasets pushed dataset by dataset: said so, with the command that
        // stitches one of them (look 128, L128-1: "not a loaderx store").
        Err(e @ loaderx_core::Error::NotAStore { .. }) => {
            let names = parts
                .first()
                .and_then(|p| loaderx_core::remote::list_dirs(p, options).ok())
                .unwrap_or_default();
            let Some(name) = names.first() else { return Err(e).with_context(ctx) };
            let each: Vec<String> = parts.iter().map(|p| format!("{p}/{name}")).collect();
            anyhow::bail!(
                "stitch → {out}: {} holds no store but {} ({}); on object storage a set is stitched a dataset at a \
                 time: loaderx stitch {} {out}/{name}",
                parts[0],
                if names.len() == 1 { "a directory" } else { "directories" },
                names.join(", "),
                each.join(" ")
            );
        }
        Err(e) => return Err(e).with_context(ctx),
    };
    crate::print(&format!("{out}: a store set of {} parts, {} records\n", s.parts, s.records))
}

/// The datasets directly in `dir` (directories holding a schema), in name order.
#[cfg(feature = "remote")]
fn datasets_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().join(loaderx_core::SCHEMA_FILE).is_file())
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Whether `url` is a prefix of parts (`part-NNNNN` under it), not one part given alone: one
/// listing, as a local directory of parts is told apart by its entries.
#[cfg(feature = "remote")]
fn holds_parts(url: &str, options: &loaderx_core::remote::RemoteOptions) -> loaderx_core::Result<bool> {
    let names = loaderx_core::remote::list_dirs(url, options.clone())?;
    Ok(names.iter().any(|n| n.starts_with(loaderx_core::convert::PART_PREFIX)))
}

#[cfg(not(feature = "remote"))]
fn stitch_remote(_: &[PathBuf], _: Option<usize>) -> anyhow::Result<()> {
    anyhow::bail!("stitch: s3:// URLs need a build with the `remote` feature")
}
