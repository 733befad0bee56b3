//! Deterministic workloads: the records every store contender writes and the indices every
//! gather contender reads (the same generators as the criterion benches in `benches/common`).

/// xorshift64*: fast deterministic bytes for workloads.
pub(crate) struct Gen(pub(crate) u64);

impl Gen {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A structured, mildly compressible record (~1.1x with plain zstd): 7 of every 8 bytes are
/// 7-bit noise, the 8th comes from a 4 KiB template shared by every record, which a trained
/// dictionary can learn.
pub(crate) fn structured_record(id: u64, len: usize) -> Vec<u8> {
    let mut g = Gen(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut t = Gen(0xC0FF_EE00_1234_5678);
    let template: Vec<u8> = (0..4096 / 8).flat_map(|_| t.next().to_le_bytes()).collect();
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

/// `count` batches of `batch` sorted random indices in `0..n` (the shuffle case).
pub(crate) fn random_batches(seed: u64, n: u32, batch: usize, count: usize) -> Vec<Vec<u32>> {
    let mut g = Gen(seed | 1);
    (0..count)
        .map(|_| {
            let mut b: Vec<u32> = (0..batch).map(|_| g.below(u64::from(n)) as u32).collect();
            b.sort_unstable();
            b
        })
        .collect()
}

/// `count` consecutive windows of `batch` indices from 0, starting over at 0 when a window would
/// run past `n` (the epoch-iteration case). `n` must be at least `batch`.
pub(crate) fn sequential_batches(n: u32, batch: usize, count: usize) -> Vec<Vec<u32>> {
    let windows = (n as usize / batch).max(1);
    (0..count)
        .map(|k| {
            let start = (k % windows) * batch;
            (start..start + batch).map(|i| i as u32).collect()
        })
        .collect()
}

/// The records `lo..hi` generated in parallel, for writing in bounded blocks.
pub(crate) fn block(lo: u32, hi: u32, len: usize) -> Vec<Vec<u8>> {
    use rayon::prelude::*;
    (lo..hi).into_par_iter().map(|i| structured_record(u64::from(i), len)).collect()
}

/// Block boundaries of about `bytes` each over `0..n` records of `len` bytes.
pub(crate) fn blocks(n: u32, len: usize, bytes: usize) -> Vec<(u32, u32)> {
    let per = (bytes / len.max(1)).max(1) as u32;
    (0..n).step_by(per as usize).map(|lo| (lo, (lo + per).min(n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_windows_are_consecutive_and_in_range() {
        let b = sequential_batches(1000, 256, 5);
        assert_eq!(b[0][0], 0);
        assert_eq!(b[1][0], 256);
        assert_eq!(b[3][0], 0);
        assert!(b.iter().flatten().all(|&i| i < 1000));
    }

    #[test]
    fn blocks_cover_every_record_once() {
        let b = blocks(10, 3, 7);
        assert_eq!(b, vec![(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]);
    }
}
