//! `lx_sampler`: a `loaderx_core::Sampler` (batches as a pure function of seed and step).

use loaderx_core::{Sampler, SamplerMode};

use crate::error::{Failure, Outcome};

/// `lx_sampler_config`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct SamplerConfig {
    seed: u64,
    len: u32,
    batch_size: u32,
    mode: i32,
    block: u32,
    window: u32,
    rank: u32,
    world: u32,
}

/// The sampler a config describes (world 0 counts as 1, so a zeroed config's rank and world
/// mean one process).
pub(crate) fn build(config: &SamplerConfig) -> Outcome<Sampler> {
    // Codes 0-2 are core's named modes in order (LX_SAMPLER_SEQUENTIAL, _IID, _CYCLIC); 3 the
    // block-cyclic mode, which takes its block and window.
    let named = usize::try_from(config.mode).ok().and_then(|c| SamplerMode::ALL.get(c).copied());
    let mode = match (named, config.mode) {
        (Some(m), _) => m,
        (None, 3) => SamplerMode::BlockCyclic { block: config.block, window: config.window },
        (None, other) => {
            return Err(Failure::argument(format!(
                "unknown sampler mode {other} (LX_SAMPLER_SEQUENTIAL, _IID, _CYCLIC or _BLOCK_CYCLIC)"
            )));
        }
    };
    Ok(Sampler::builder(config.len)
        .batch_size(config.batch_size)
        .mode(mode)
        .seed(config.seed)
        .rank(config.rank)
        .world(config.world.max(1))
        .build()?)
}

/// Step `step`'s indices for this rank into `out` (the local batch size long).
pub(crate) fn batch(sampler: &Sampler, step: u64, out: &mut [u32]) -> Outcome<()> {
    Ok(sampler.fill(step, out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_builds_and_matches_the_engine() {
        for mode in 0..4 {
            let config = SamplerConfig {
                seed: 7,
                len: 1000,
                batch_size: 8,
                mode,
                block: 4,
                window: 2,
                ..Default::default()
            };
            let s = build(&config).unwrap();
            let mut out = vec![0; 8];
            batch(&s, 3, &mut out).unwrap();
            assert_eq!(out, s.batch(3));
        }
        let refused = |config: SamplerConfig, says: &str| {
            build(&config)
                .is_err_and(|e| e.code == crate::error::INVALID_ARGUMENT && e.message.starts_with(says))
        };
        assert!(refused(
            SamplerConfig { mode: 4, len: 10, batch_size: 1, ..Default::default() },
            "unknown sampler mode 4"
        ));
        assert!(refused(
            SamplerConfig { mode: 2, len: 0, batch_size: 1, ..Default::default() },
            "sampler: the index space is empty (len 0)"
        ));
    }
}
