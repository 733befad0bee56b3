//! Sampler layer: index generation on its own, loaderx's IID and cyclic samplers against a
//! seeded `rand` 0.9 `StdRng` `random_range` loop (the baseline), N = 1,000,000.

use std::hint::black_box;

use loaderx_core::{Sampler, SamplerMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::report::{self, Report, Row, Section};
use crate::run::Config;
use crate::timing::{self, Contender, Work};

const N: u32 = 1_000_000;
const BATCHES: [u32; 3] = [256, 1024, 8192];
const SEED: u64 = 0x5EED;
const BASELINE: &str = "rand StdRng loop";

fn loaderx(mode: SamplerMode, b: u32) -> Work<'static> {
    let sampler =
        Sampler::builder(N).batch_size(b).mode(mode).seed(SEED).build().expect("valid sampler parameters");
    let mut buf = vec![0u32; b as usize];
    let mut step = 0u64;
    Box::new(move || {
        sampler.fill(step, &mut buf).expect("a buffer of the batch size");
        step += 1;
        black_box(&buf);
    })
}

/// Measures every batch size and adds its rows and table.
pub(crate) fn run(cfg: &Config, report: &mut Report) {
    let mut s = Section::new(
        format!(
            "1. Sampler — index generation, N = {}, IID with replacement and cyclic",
            report::thousands(N.into())
        ),
        &["sampler", "batch", "per batch", "indices", "vs rand StdRng"],
    );
    for b in BATCHES {
        let mut rng = StdRng::seed_from_u64(SEED);
        let mut buf = vec![0u32; b as usize];
        let mut contenders = vec![
            Contender::new(
                BASELINE,
                Box::new(move || {
                    for o in buf.iter_mut() {
                        *o = rng.random_range(0..N);
                    }
                    black_box(&buf);
                }),
            ),
            Contender::new("loaderx IID", loaderx(SamplerMode::Iid, b)),
            Contender::new("loaderx cyclic", loaderx(SamplerMode::Cyclic, b)),
        ];
        let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
        let workload = format!("N={N} batch={b}");
        for name in contenders.iter().map(|c| &c.name) {
            let secs = t.median_secs(name);
            let per_s = f64::from(b) / secs;
            let speed = t.speed_vs(name, BASELINE);
            let mut row = Row::new("sampler", name, &workload, per_s, "indices/s");
            if name != BASELINE {
                row = row.vs(BASELINE, speed);
            }
            report.rows.push(row);
            s.rows.push(vec![
                name.clone(),
                report::thousands(b.into()),
                report::duration(secs),
                format!("{:.0} M/s", per_s / 1e6),
                report::ratio(speed),
            ]);
        }
    }
    s.notes.push(
        "The baseline draws `rng.random_range(0..N)` per index from a seeded `StdRng` (ChaCha12). \
         Cyclic is without replacement (a fresh permutation each cycle), so it does more work per \
         index than either IID row."
            .into(),
    );
    report.sections.push(s);
}
