//! `export`, `migrate` and `compact`: rewriting a store, or a dataset out of it.

use std::path::Path;

use anyhow::Context;
use loaderx_core::{Format, Store, StoreOptions};

use crate::convert::{human, progress_bar};
use crate::inspect::layout_text;

/// `loaderx export STORE OUT.npy`.
pub fn export(dir: &Path, out: &Path, force: bool, megatron: bool) -> anyhow::Result<()> {
    if megatron {
        let n = loaderx_core::export::megatron(dir, out, force)
            .with_context(|| format!("export {} → {}.bin/.idx", dir.display(), out.display()))?;
        return crate::print(&format!("{}.bin, {}.idx: {n} tokens\n", out.display(), out.display()));
    }
    let n = loaderx_core::export::npy(dir, out, force)
        .with_context(|| format!("export {} → {}", dir.display(), out.display()))?;
    crate::print(&format!("{}: {n} records\n", out.display()))
}

/// What `loaderx migrate --to` names: a format, or a v2 index layout.
#[derive(Debug, Clone, Copy)]
pub enum MigrateTo {
    /// `v1` or `v2`.
    Format(Format),
    /// `fixed`, `compact` or `entries`.
    Layout(loaderx_core::Layout),
}

impl std::str::FromStr for MigrateTo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => {
                Ok(MigrateTo::Layout(loaderx_core::Layout::Fixed { record_size: 0, block_records: 0 }))
            }
            "entries" => Ok(MigrateTo::Layout(loaderx_core::Layout::Entries)),
            "compact" => Ok(MigrateTo::Layout(loaderx_core::Layout::Compact)),
            other => other.parse().map(MigrateTo::Format).map_err(|_| {
                format!("unknown target {other:?} (expected v1, v2, fixed, compact or entries)")
            }),
        }
    }
}

impl std::fmt::Display for MigrateTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrateTo::Format(x) => write!(f, "{x}"),
            MigrateTo::Layout(l) => f.write_str(l.name()),
        }
    }
}

/// `layout`, and for `fixed` the size of a dense dataset's items where `dir` is one: an empty
/// store has no record to take it from, and the CLI no option to give it (look 158, L158-3).
fn sized(dir: &Path, layout: loaderx_core::Layout) -> loaderx_core::Layout {
    match layout {
        loaderx_core::Layout::Fixed { record_size: 0, block_records } => {
            let item = loaderx_core::DenseSource::open(dir).ok().map(|d| d.item_elems() * d.dtype().size());
            let record_size = item.and_then(|b| u32::try_from(b).ok()).unwrap_or(0);
            loaderx_core::Layout::Fixed { record_size, block_records }
        }
        other => other,
    }
}

/// `loaderx migrate STORE --to FORMAT|LAYOUT`: the index rewritten in the other format (or v2
/// layout) beside the old one and swapped in atomically (the chunk files are shared), with a
/// progress bar over the record bytes checksummed.
pub fn migrate(dir: &Path, to: MigrateTo) -> anyhow::Result<()> {
    let pb = progress_bar(0);
    let bar = pb.clone();
    let step = move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = match to {
        MigrateTo::Format(f) => Store::migrate(dir, f, &step),
        MigrateTo::Layout(l) => Store::migrate_layout(dir, sized(dir, l), &step),
    }
    .with_context(|| format!("migrate {} to {to}", dir.display()))?;
    pb.finish_and_clear();
    if !report.written {
        // A no-op is no check (look 75: "already" read as a clean bill on a damaged store).
        return crate::print(&format!(
            "{}: already {to}, no new index written (its records were not read: `loaderx verify` checks them)\n",
            dir.display()
        ));
    }
    let (from, to) = match to {
        MigrateTo::Layout(_) => {
            // A v1 store's layout reads as `entries` too: its format says what it was.
            let from = match report.from {
                Format::V1 => "v1".to_string(),
                Format::V2 => report.from_layout.name().to_string(),
            };
            let after = Store::open(dir).with_context(|| format!("open {}", dir.display()))?;
            (from, layout_text(after.layout()))
        }
        MigrateTo::Format(_) => (report.from.to_string(), report.to.to_string()),
    };
    crate::print(&format!(
        "{}: {from} → {to}, {} records, {} checksummed\n",
        dir.display(),
        report.records,
        human(report.bytes_checked)
    ))
}

/// `loaderx compact STORE`.
pub fn compact(dir: &Path) -> anyhow::Result<()> {
    let ctx = || format!("compact {}", dir.display());
    let mut store = Store::open_rw(dir, StoreOptions::new()).with_context(ctx)?;
    let r = store.compact().with_context(ctx)?;
    crate::print(&format!(
        "{}: {} → {} chunk bytes ({} reclaimed), {} records moved\n",
        dir.display(),
        r.bytes_before,
        r.bytes_after,
        human(r.bytes_before.saturating_sub(r.bytes_after)),
        r.moved
    ))
}
