//! Length bucketing: within each window of `K` steps, the global batches' records sorted by
//! length and cut into `K` batches again, served in a keyed order
//! ([`LoaderBuilder::bucket`](crate::LoaderBuilder::bucket)). A padded batch then holds records
//! of similar lengths, so less of it is padding; which records a window holds, and so every
//! epoch's coverage, is the sampler's. Still a pure function of (seed, step): a window is
//! rebuilt from the sampler and the index's lengths wherever a step needs it.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::dataset::RaggedSource;
use crate::sampler::{Sampler, SamplerConfig, mix64, shuffle_positions};
use crate::{Error, Result};

const DOMAIN_BUCKET: u64 = 0x6275_636B_6574_2073;

/// Length bucketing in a [`LoaderState`](crate::LoaderState): the stream whose lengths sort
/// the window, and the window in steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketConfig {
    /// The ragged stream whose records' lengths are sorted.
    pub stream: String,
    /// Steps per window, `K`.
    pub window: u32,
}

/// The latest windows built, by window number.
type Windows = Arc<Mutex<Vec<(u64, Arc<Vec<u32>>)>>>;

/// The bucketing indexer: the world-1 sampler of the global batches, the lengths' source and
/// the two latest windows.
#[derive(Clone)]
pub(crate) struct Bucketer {
    config: BucketConfig,
    global: Sampler,
    sampler: SamplerConfig,
    source: RaggedSource,
    windows: Windows,
}

impl std::fmt::Debug for Bucketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucketer").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The most records a bucketing window holds: 2^22 (a window's records each take an index, a
/// length, a place and a served slot, about 24 bytes: 100 MiB), far past any window that sorts
/// usefully (256 records a step for 100 steps is 25,600). A bound, not a measurement.
const MAX_WINDOW_RECORDS: u64 = 1 << 22;

impl Bucketer {
    pub(crate) fn new(
        config: BucketConfig,
        sampler: SamplerConfig,
        source: RaggedSource,
    ) -> Result<Bucketer> {
        if config.window == 0 {
            return Err(Error::Config {
                what: "bucket",
                reason: "a bucketing window needs at least one step".into(),
            });
        }
        // A window's bookkeeping is its K global batches' records: a bound checked here rather
        // than an allocation that aborts.
        let records = u64::from(config.window) * u64::from(sampler.batch_size);
        if records > MAX_WINDOW_RECORDS {
            return Err(Error::Config {
                what: "bucket",
                reason: format!(
                    "a window of {} steps of {} records holds {records}, more than {MAX_WINDOW_RECORDS}: \
                     bucket over fewer steps",
                    config.window, sampler.batch_size
                ),
            });
        }
        // Validates rank and world too.
        drop(sampler.build()?);
        let global = SamplerConfig { rank: 0, world: 1, ..sampler.clone() }.build()?;
        Ok(Bucketer { config, global, sampler, source, windows: Arc::new(Mutex::new(Vec::new())) })
    }

    /// Window `w`'s `K` global batches, back to back, in serving order.
    fn window(&self, w: u64) -> Result<Arc<Vec<u32>>> {
        {
            let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, v)) = windows.iter().find(|(k, _)| *k == w) {
                return Ok(Arc::clone(v));
            }
        }
        let k = u64::from(self.config.window);
        let b = self.sampler.batch_size as usize;
        let mut all = vec![0u32; b * k as usize];
        for (j, chunk) in all.chunks_mut(b).enumerate() {
            self.global.fill(w * k + j as u64, chunk)?;
        }
        let lens = self.source.record_rows(&all)?;
        let mut by_len: Vec<usize> = (0..all.len()).collect();
        by_len.sort_by_key(|&p| (lens[p], p));
        let order =
            shuffle_positions(self.config.window, mix64(self.sampler.seed ^ DOMAIN_BUCKET).wrapping_add(w));
        let mut served = Vec::with_capacity(all.len());
        for &batch in &order {
            let batch = batch as usize;
            served.extend(by_len[batch * b..(batch + 1) * b].iter().map(|&p| all[p]));
        }
        let v = Arc::new(served);
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= 2 {
            windows.sort_by_key(|(k, _)| *k);
            windows.remove(0);
        }
        windows.push((w, Arc::clone(&v)));
        Ok(v)
    }

    /// This rank's indices of step `step`.
    pub(crate) fn fill(&self, step: u64, out: &mut Vec<u32>) -> Result<()> {
        let k = u64::from(self.config.window);
        let window = self.window(step / k)?;
        let b = self.sampler.batch_size as usize;
        let per = b / self.sampler.world.max(1) as usize;
        let at = (step % k) as usize * b + self.sampler.rank as usize * per;
        out.clear();
        out.extend_from_slice(&window[at..at + per]);
        Ok(())
    }

    pub(crate) fn config(&self) -> &BucketConfig {
        &self.config
    }
}
