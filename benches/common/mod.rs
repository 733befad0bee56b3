//! Shared by the benches: workload generation and reading criterion's medians back for the
//! ratio tables.

#![allow(dead_code)]

use std::path::PathBuf;

/// Where criterion writes its estimates (and where [`median_ns`] reads them).
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("criterion")
}

/// The median time in nanoseconds criterion measured for `group/id`, if it ran.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir().join(group).join(id).join("new").join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let at = text.find("\"median\"")?;
    let rest = &text[at..];
    let pe = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let num: String = rest[pe..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
        .collect();
    num.parse().ok()
}

/// xorshift64*: fast deterministic bytes for workloads.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A structured, mildly compressible record, like the seed's benchmark data (~1.1x with plain
/// zstd): 7 of every 8 bytes are 7-bit noise, the 8th comes from a 4 KiB template shared by every
/// record (which a trained dictionary can learn).
pub fn structured_record(id: u64, len: usize) -> Vec<u8> {
    let mut g = Gen(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let template: Vec<u8> = {
        let mut t = Gen(0xC0FF_EE00_1234_5678);
        (0..4096 / 8).flat_map(|_| t.next().to_le_bytes()).collect()
    };
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        let at = out.len() % 4096;
        let noise = g.next().to_le_bytes();
        for (k, &n) in noise.iter().enumerate() {
            out.push(if k == 7 { template[at + k] } else { n & 0x7F });
        }
    }
    out.truncate(len);
    out
}

/// `count` batches of `batch` sorted random indices in `0..n`.
pub fn random_batches(seed: u64, n: u32, batch: usize, count: usize) -> Vec<Vec<u32>> {
    let mut g = Gen(seed | 1);
    (0..count)
        .map(|_| {
            let mut b: Vec<u32> = (0..batch).map(|_| g.below(u64::from(n)) as u32).collect();
            b.sort_unstable();
            b
        })
        .collect()
}

/// One contender of an interleaved comparison: a name and one unit of work.
pub type Contender<'a> = (&'a str, Box<dyn FnMut() + 'a>);

/// Medians of an interleaved run: per contender, the median time of one unit of work and the
/// median over rounds of (baseline time / its time), i.e. its speed relative to the baseline.
pub struct Interleaved {
    pub name: String,
    pub median_ns: f64,
    pub speed_vs_baseline: f64,
}

/// Runs every contender `iters` times per round, alternating contenders within each round, for
/// `rounds` rounds; contender 0 is the baseline. On a shared machine the load drifts; because
/// each round times every contender back to back, the per-round ratio cancels most of it.
pub fn interleaved(rounds: usize, iters: usize, contenders: &mut [Contender<'_>]) -> Vec<Interleaved> {
    let n = contenders.len();
    let mut times = vec![Vec::with_capacity(rounds); n];
    for (_, f) in contenders.iter_mut() {
        f(); // warm up
    }
    for r in 0..rounds {
        // Rotate the starting contender so none always runs first.
        for k in 0..n {
            let i = (k + r) % n;
            let t = std::time::Instant::now();
            for _ in 0..iters {
                (contenders[i].1)();
            }
            times[i].push(t.elapsed().as_secs_f64() * 1e9 / iters as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (0..n)
        .map(|i| {
            let mut ratios: Vec<f64> = (0..rounds).map(|r| times[0][r] / times[i][r]).collect();
            Interleaved {
                name: contenders[i].0.to_string(),
                median_ns: median(&mut times[i].clone()),
                speed_vs_baseline: median(&mut ratios),
            }
        })
        .collect()
}
