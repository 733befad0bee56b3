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
