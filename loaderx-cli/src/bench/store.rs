//! `loaderx bench --store PATH|URL`: batches gathered from an existing dataset (a store, a store
//! set, or with the `remote` feature an `s3://` URL) in three orders: cyclic (a keyed random
//! permutation), IID, and block-cyclic (blocks of 64 records, windows of B / 64 blocks, so a
//! batch is a few whole blocks). Per order: time per batch, MiB/s, and for a remote store the
//! requests per batch and bytes fetched per byte used, counted on the store. It measures the
//! user's own data where it lives (a disk, a network), not a synthetic workload.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use loaderx_core::{DenseSource, Error, RaggedSource, Sampler, SamplerMode};

enum Source {
    Dense(DenseSource),
    Ragged(RaggedSource),
}

impl Source {
    fn open(path: &Path) -> loaderx_core::Result<Source> {
        match DenseSource::open(path) {
            Ok(d) => Ok(Source::Dense(d)),
            Err(Error::Schema { .. }) => Ok(Source::Ragged(RaggedSource::open(path)?)),
            Err(e) => Err(e),
        }
    }

    fn len(&self) -> usize {
        match self {
            Source::Dense(d) => d.len(),
            Source::Ragged(r) => r.len(),
        }
    }

    /// Gathers a batch; returns its bytes.
    fn gather(&self, indices: &[u32]) -> loaderx_core::Result<usize> {
        Ok(match self {
            Source::Dense(d) => std::hint::black_box(d.get_batch(indices)?).as_bytes().len(),
            Source::Ragged(r) => std::hint::black_box(r.get_batch(indices)?).values().as_bytes().len(),
        })
    }

    /// (requests, bytes fetched) so far, for a remote store.
    fn fetched(&self) -> Option<(u64, u64)> {
        #[cfg(feature = "remote")]
        {
            let remote = match self {
                Source::Dense(d) => d.remote(),
                Source::Ragged(r) => r.remote(),
            };
            remote.map(|r| (r.stats().requests, r.stats().bytes_fetched))
        }
        #[cfg(not(feature = "remote"))]
        None
    }
}

/// Runs `steps` batches of `batch` records per order on the dataset at `path`.
///
/// # Errors
/// Opening the dataset or a gather, naming the path.
pub(crate) fn run(path: &Path, batch: u32, steps: u64, out: &mut impl Write) -> anyhow::Result<()> {
    let ctx = || format!("bench --store {}", path.display());
    let source = Source::open(path).with_context(ctx)?;
    let len = u32::try_from(source.len()).with_context(|| format!("{}: too many records", path.display()))?;
    anyhow::ensure!(len > 0, "{}: no records to gather", path.display());
    let batch = batch.clamp(1, len);
    // Blocks of 64 where the dataset holds a batch of whole ones, else the largest that do (look
    // 95, F2: a dataset of 100 records failed the row, "a batch_size 100 exceeds the 64 records of
    // a cycle of whole blocks of 64").
    let block = (1..=64u32).rev().find(|b| (len / b) * b >= batch).unwrap_or(1);
    let window = (batch / block).max(1);
    writeln!(
        out,
        "{}: {len} records, batches of {batch}, {steps} per order (after one unmeasured)",
        path.display()
    )?;
    writeln!(out, "| order | per batch | MiB/s | requests per batch | bytes fetched per byte used |")?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    for (name, mode) in [
        ("cyclic".to_string(), SamplerMode::Cyclic),
        ("IID".to_string(), SamplerMode::Iid),
        (format!("block-cyclic ({block} x {window})"), SamplerMode::BlockCyclic { block, window }),
    ] {
        let sampler = Sampler::builder(len).batch_size(batch).mode(mode).seed(1).build().with_context(ctx)?;
        source.gather(&sampler.batch(0)).with_context(ctx)?;
        let before = source.fetched();
        let start = Instant::now();
        let mut bytes = 0usize;
        for step in 1..=steps {
            bytes += source.gather(&sampler.batch(step)).with_context(ctx)?;
        }
        let secs = start.elapsed().as_secs_f64();
        let per = secs / steps as f64;
        let mib = bytes as f64 / f64::from(1 << 20) / secs;
        let (requests, ratio) = match (before, source.fetched()) {
            (Some((r0, b0)), Some((r1, b1))) => (
                format!("{:.1}", (r1 - r0) as f64 / steps as f64),
                format!("{:.2}", (b1 - b0) as f64 / bytes.max(1) as f64),
            ),
            _ => ("-".into(), "-".into()),
        };
        writeln!(out, "| {name} | {:.2} ms | {mib:.0} | {requests} | {ratio} |", per * 1e3)?;
    }
    Ok(())
}
