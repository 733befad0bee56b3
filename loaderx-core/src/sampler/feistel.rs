//! The keyed Feistel permutation of the cyclic sampler above [`SHUFFLE_MAX_LEN`](super::shuffle::SHUFFLE_MAX_LEN)
//! indices: a bijection of a domain just above `N`, brought into range by cycle-walking.

use super::rng::{GOLDEN, mix64};

/// Feistel rounds per permutation, half of them into each half of the state; must be even. 4 is
/// the least for a keyed pseudo-random permutation (Luby-Rackoff), but with this cheap 16-bit
/// round function 4 rounds leave visible structure (positions `2^k` apart land near each other
/// measurably less or more often than under a random permutation, up to 30 standard deviations
/// off); 6 rounds pass `cyclic_permutation_has_no_visible_structure`.
pub(super) const ROUNDS: usize = 6;

/// The parameters of one cycle's Feistel permutation that do not depend on the cycle.
#[derive(Debug, Clone, Copy)]
pub(super) struct FeistelShape {
    /// Width `k` in bits of the low half of the state, `x mod 2^k`.
    pub(super) lo_bits: u32,
    /// Size `a = ceil(N / 2^k)` of the range of the high half `x >> k`; at most 2^16.
    pub(super) hi_len: u32,
    /// `min(a, 2^16 - 1)`, the multiplier of [`Permutation::round_hi`]. Computed here, once per
    /// sampler, and read from memory at each fill: derived inside the fill, its known range lets
    /// the compiler drop the 16-bit type and multiply in 32-bit lanes (`pmuludq`), not `pmulhuw`.
    pub(super) hi_scale: u16,
}

impl FeistelShape {
    pub(super) fn new(n: u32) -> Self {
        // At least 2 bits, so that the low half is at least one bit wide. The low half takes the
        // larger half of the bits, so the high half's range fits 16 bits: a <= 2^(bits / 2).
        let bits = (u32::BITS - (n - 1).leading_zeros()).max(2);
        let lo_bits = bits - bits / 2;
        let hi_len = n.div_ceil(1 << lo_bits);
        FeistelShape { lo_bits, hi_len, hi_scale: hi_len.min(u32::from(u16::MAX)) as u16 }
    }

    /// Size `a * 2^k` of the permuted domain: at least `n`, and less than `n + 2^k`.
    #[cfg(test)]
    pub(super) fn domain(self) -> u64 {
        u64::from(self.hi_len) << self.lo_bits
    }
}

/// A keyed permutation of `[0, a * 2^k)` (see [`FeistelShape`]), restricted to `[0, n)` by
/// cycle-walking.
///
/// The state `x` is the pair `(l, r) = (x >> k, x mod 2^k)` with `l < a`, each half in a `u16`;
/// `(l << k) | r` is below `n + 2^k`, so only a fraction below `2^k / n` (about `1 / sqrt(n)`) of
/// the values need a second pass of the cycle-walk. Six rounds alternate between the halves:
/// even rounds add a round function of `r`, reduced to `[0, a)`, to `l` modulo `a`; odd rounds
/// XOR the top `k` bits of a round function of `l` into `r`. Each round is a bijection of the
/// domain for any round function, so the network is a permutation.
///
/// Every round is 16-bit arithmetic (an XOR, two 16 x 16-bit products, a fold, a shift or a
/// modular addition), which SSE2 runs eight lanes at a time (`pmullw` / `pmulhuw`):
/// [`block`](Self::block) runs the network over [`BLOCK`] consecutive positions held as two
/// plain `u16` arrays, loops the compiler vectorises.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permutation {
    /// Per-round key XORed into the round input.
    pub(super) keys: [u16; ROUNDS],
    /// Per-round odd multiplier.
    pub(super) muls: [u16; ROUNDS],
    /// `a mod 2^16` (0 when `a = 2^16`), the modulus of the high half.
    pub(super) hi_len: u16,
    /// Multiplier that scales a 16-bit hash into `[0, a)`: `a`, or `2^16 - 1` when `a = 2^16`
    /// (then the value `2^16 - 1` is never added, which leaves the round a bijection; such `a`
    /// only occurs for `n > 2^32 - 2^16`).
    pub(super) hi_scale: u16,
    /// Right shift that leaves the top `k` bits of a 16-bit value.
    pub(super) lo_shift: u32,
    pub(super) lo_bits: u32,
    pub(super) lo_mask: u16,
    pub(super) n: u32,
}

/// Positions per vectorised block of the cyclic sampler: four 128-bit vectors of `u16` lanes per
/// half, so both halves fit the 16 SSE registers (at 64 they spill to the stack); large enough
/// to amortise the per-block cycle-walk check.
pub(super) const BLOCK: usize = 32;

impl Permutation {
    pub(super) fn new(shape: FeistelShape, n: u32, cycle_key: u64) -> Self {
        let (mut keys, mut muls) = ([0; ROUNDS], [0; ROUNDS]);
        for round in 0..ROUNDS {
            let k = mix64(cycle_key.wrapping_add((round as u64 + 1).wrapping_mul(GOLDEN)));
            keys[round] = k as u16;
            muls[round] = (k >> 16) as u16 | 1;
        }
        Permutation {
            keys,
            muls,
            hi_len: shape.hi_len as u16,
            hi_scale: shape.hi_scale,
            lo_shift: u16::BITS - shape.lo_bits,
            lo_bits: shape.lo_bits,
            lo_mask: ((1u32 << shape.lo_bits) - 1) as u16,
            n,
        }
    }

    /// The 16-bit hash of round `round`: the full 32-bit product of the keyed input and an odd
    /// multiplier, its high and low 16 bits folded together by XOR (the "multiply-fold" mixer of
    /// wyhash, at 16 bits). The high half makes the top output bits depend on every input bit;
    /// the low half (arithmetic mod 2^16) breaks the monotonicity of the high half; the XOR
    /// before the product makes the round non-affine in its input.
    #[inline(always)]
    pub(super) fn hash(&self, round: usize, x: u16) -> u16 {
        let (y, m) = (x ^ self.keys[round], self.muls[round]);
        // Written as two 16-bit products (`pmulhuw`, `pmullw`) so that the vectorised loop stays
        // in 16-bit lanes.
        let hi = ((u32::from(y) * u32::from(m)) >> 16) as u16;
        hi ^ y.wrapping_mul(m)
    }

    /// Even round: `l <- (l + F(r)) mod a`, with `F(r)` the hash scaled to `[0, a)` by a
    /// multiply-shift.
    #[inline(always)]
    pub(super) fn round_hi(&self, round: usize, l: u16, r: u16) -> u16 {
        let h = self.hash(round, r);
        let f = ((u32::from(h) * u32::from(self.hi_scale)) >> 16) as u16;
        // (l + f) mod a without leaving 16 bits: l - (a - f), plus a where that wrapped.
        let d = self.hi_len.wrapping_sub(f);
        let t = l.wrapping_sub(d);
        if l < d { t.wrapping_add(self.hi_len) } else { t }
    }

    /// [`round_hi`](Self::round_hi) for `a <= 2^15`, where `l + F(r) < 2^16`: the reduction
    /// modulo `a` is `min(s, s - a)` (wrapping), two instructions fewer per vector.
    #[inline(always)]
    pub(super) fn round_hi_small(&self, round: usize, l: u16, r: u16) -> u16 {
        let h = self.hash(round, r);
        let s = l.wrapping_add(((u32::from(h) * u32::from(self.hi_scale)) >> 16) as u16);
        s.min(s.wrapping_sub(self.hi_len))
    }

    /// Odd round: `r <- r ^ F(l)`, with `F(l)` the top `k` bits of the hash.
    #[inline(always)]
    pub(super) fn round_lo(&self, round: usize, l: u16, r: u16) -> u16 {
        r ^ (self.hash(round, l) >> self.lo_shift)
    }

    /// One pass of the network: a bijection of `[0, a * 2^k)`.
    #[inline(always)]
    pub(super) fn feistel(&self, x: u32) -> u32 {
        let mut l = (x >> self.lo_bits) as u16;
        let mut r = x as u16 & self.lo_mask;
        for pair in 0..ROUNDS / 2 {
            l = self.round_hi(2 * pair, l, r);
            r = self.round_lo(2 * pair + 1, l, r);
        }
        (u32::from(l) << self.lo_bits) | u32::from(r)
    }

    /// [`feistel`](Self::feistel) of the `BLOCK` consecutive values `first, first + 1, ...`
    /// (wrapping), as structure-of-arrays over `u16` lanes so that each loop vectorises.
    #[inline(always)]
    ///
    /// `SMALL` selects [`round_hi_small`](Self::round_hi_small), valid where `a <= 2^15`.
    pub(super) fn block<const SMALL: bool>(&self, first: u32, out: &mut [u32; BLOCK]) {
        let mut l = [0u16; BLOCK];
        let mut r = [0u16; BLOCK];
        let (l0, r0) = ((first >> self.lo_bits) as u16, first as u16 & self.lo_mask);
        if self.lo_bits >= BLOCK.ilog2() {
            // The block crosses at most one multiple of 2^k, from position `carry` on: split
            // without leaving 16-bit lanes.
            let carry = ((1u32 << self.lo_bits) - u32::from(r0)).min(BLOCK as u32) as u16;
            for ((lj, rj), j) in l.iter_mut().zip(&mut r).zip(0u16..) {
                *lj = l0.wrapping_add(u16::from(j >= carry));
                *rj = r0.wrapping_add(j) & self.lo_mask;
            }
        } else {
            for ((lj, rj), j) in l.iter_mut().zip(&mut r).zip(0u32..) {
                let x = first.wrapping_add(j);
                *lj = (x >> self.lo_bits) as u16;
                *rj = x as u16 & self.lo_mask;
            }
        }
        for pair in 0..ROUNDS / 2 {
            for (lj, &rj) in l.iter_mut().zip(&r) {
                *lj = if SMALL {
                    self.round_hi_small(2 * pair, *lj, rj)
                } else {
                    self.round_hi(2 * pair, *lj, rj)
                };
            }
            for (rj, &lj) in r.iter_mut().zip(&l) {
                *rj = self.round_lo(2 * pair + 1, lj, *rj);
            }
        }
        for ((o, &lj), &rj) in out.iter_mut().zip(&l).zip(&r) {
            *o = (u32::from(lj) << self.lo_bits) | u32::from(rj);
        }
    }

    /// The image of `i < n` under the permutation of `[0, n)`.
    pub(super) fn apply(&self, i: u32) -> u32 {
        self.walk(self.feistel(i))
    }

    /// Finishes the cycle-walk of a value that has been through the network once.
    #[inline(always)]
    pub(super) fn walk(&self, mut x: u32) -> u32 {
        // Walking the cycle of `i` in the permuted domain reaches a value below `n` before it
        // comes back to `i` itself, so this terminates; the domain is below n + 2^k, so a value
        // lands outside `[0, n)` with probability below 2^k / n.
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }

    /// Writes the images of the consecutive positions `first, first + 1, ...` into `out`: the
    /// network over whole blocks, then the cycle-walks of the rare values that landed in
    /// `[n, a * 2^k)`.
    #[inline(always)]
    pub(super) fn fill(&self, first: u32, out: &mut [u32]) {
        if self.small() {
            self.fill_with::<BLOCK>(first, out, |p, chunk| self.block::<true>(p, chunk));
        } else {
            self.fill_with::<BLOCK>(first, out, |p, chunk| self.block::<false>(p, chunk));
        }
    }

    /// Whether `a <= 2^15`, where [`round_hi_small`](Self::round_hi_small) applies.
    #[inline(always)]
    pub(super) fn small(&self) -> bool {
        self.hi_scale <= 1 << 15
    }

    /// [`fill`](Self::fill) with a given block network (`block(first, out)` writes the images of
    /// `B` consecutive positions): whole blocks, a last partial one through a scratch block, and
    /// the cycle-walks. Shared by the portable network and the AVX2 kernel.
    #[inline(always)]
    pub(super) fn fill_with<const B: usize>(
        &self,
        first: u32,
        out: &mut [u32],
        mut block: impl FnMut(u32, &mut [u32; B]),
    ) {
        let mut chunks = out.chunks_exact_mut(B);
        let mut position = first;
        for chunk in &mut chunks {
            let chunk: &mut [u32; B] = chunk.try_into().expect("chunks_exact_mut yields B");
            block(position, chunk);
            self.walk_block(chunk);
            position = position.wrapping_add(B as u32);
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut tmp = [0u32; B];
            block(position, &mut tmp);
            rest.copy_from_slice(&tmp[..rest.len()]);
            self.walk_block(rest);
        }
    }

    /// Cycle-walks the values of `out` that are not below `n`, after a branch-free scan: most
    /// blocks hold none.
    #[inline(always)]
    pub(super) fn walk_block(&self, out: &mut [u32]) {
        let n = self.n;
        if out.iter().fold(false, |any, &x| any | (x >= n)) {
            for o in out {
                *o = self.walk(*o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::{Sampler, SamplerMode};

    fn sampler(n: u32, b: u32, mode: SamplerMode, seed: u64, rank: u32, world: u32) -> Sampler {
        Sampler::builder(n).batch_size(b).mode(mode).seed(seed).rank(rank).world(world).build().unwrap()
    }

    #[test]
    fn feistel_is_a_bijection_of_its_domain() {
        for n in [1u32, 2, 3, 5, 16, 17, 1000, 4096, 5000] {
            let s = sampler(n, 1, SamplerMode::Cyclic, 9, 0, 1);
            let perm = Permutation::new(s.feistel, n, 12345);
            let domain = s.feistel.domain();
            assert!(domain >= u64::from(n) && domain < u64::from(n) + (1 << s.feistel.lo_bits));
            let images: HashSet<u64> = (0..domain).map(|x| u64::from(perm.feistel(x as u32))).collect();
            assert_eq!(images.len() as u64, domain, "n = {n}");
            assert!(images.iter().all(|&y| y < domain));
            let walked: HashSet<u32> = (0..n).map(|i| perm.apply(i)).collect();
            assert_eq!(walked.len(), n as usize);
            assert!(walked.iter().all(|&y| y < n));
        }
    }

    #[test]
    fn block_network_equals_the_scalar_network() {
        // Small n take the 32-bit split of a block, larger n the 16-bit one; blocks that start
        // just before a multiple of 2^k cross into the next high-half value mid-block.
        for n in [3u32, 40, 1000, 4096, 5000, 1_000_000, (1 << 31) + 12345, u32::MAX] {
            let shape = FeistelShape::new(n);
            let perm = Permutation::new(shape, n, 777);
            let k = 1u64 << shape.lo_bits;
            let firsts = [
                0,
                1,
                k - 1,
                k.saturating_sub(5),
                k.saturating_sub(63),
                k,
                3 * k - 2,
                shape.domain().saturating_sub(64),
            ];
            for first in firsts {
                let first = first.min(shape.domain().saturating_sub(1)) as u32;
                let (mut out, mut small) = ([0u32; BLOCK], [0u32; BLOCK]);
                perm.block::<false>(first, &mut out);
                perm.block::<true>(first, &mut small);
                for (j, (&y, &z)) in out.iter().zip(&small).enumerate() {
                    let x = u64::from(first) + j as u64;
                    if x < shape.domain() {
                        assert_eq!(y, perm.feistel(x as u32), "n = {n}, x = {x}");
                        if shape.hi_len <= 1 << 15 {
                            assert_eq!(z, y, "n = {n}, x = {x}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn high_half_round_is_a_bijection_modulo_a() {
        // a = 2^16 scales the hash by 2^16 - 1 and adds modulo 2^16.
        for (n, a) in
            [(2u32, 1u32), (4, 2), (9, 3), (1_000_000, 977), (u32::MAX / 2 + 2, 32769), (u32::MAX, 65536)]
        {
            let shape = FeistelShape::new(n);
            assert_eq!(shape.hi_len, a, "n = {n}");
            let perm = Permutation::new(shape, n, 31);
            for r in [0u16, 1, perm.lo_mask] {
                let images: Vec<u16> = (0..a).map(|l| perm.round_hi(0, l as u16, r)).collect();
                let distinct: HashSet<u16> = images.iter().copied().collect();
                assert_eq!(distinct.len() as u32, a);
                assert!(images.iter().all(|&y| u32::from(y) < a));
                if a <= 1 << 15 {
                    let small: Vec<u16> = (0..a).map(|l| perm.round_hi_small(0, l as u16, r)).collect();
                    assert_eq!(small, images);
                }
            }
        }
    }

    #[test]
    fn cyclic_permutation_has_no_visible_structure() {
        // One whole cycle of n = 100_000 (k = 9 low bits, a = 196 high values; 352 values of the
        // domain cycle-walk).
        let n = 100_000u32;
        let s = sampler(n, n, SamplerMode::Cyclic, 21, 0, 1);
        let perm = s.batch(5);
        // Position and index jointly uniform: chi-square over a 16 x 16 grid (225 degrees of
        // freedom: mean 225, standard deviation 21; 400 is over 8 deviations out).
        let mut grid = [[0u32; 16]; 16];
        for (p, &x) in perm.iter().enumerate() {
            grid[p * 16 / n as usize][x as usize * 16 / n as usize] += 1;
        }
        let expected = f64::from(n) / 256.0;
        let chi2: f64 = grid.iter().flatten().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        assert!(chi2 < 400.0, "chi-square {chi2}");
        // Neighbouring positions land on unrelated indices: under a random permutation
        // |pi(p + 1) - pi(p)| < n / 64 with probability about 2 / 64 = 0.031 (standard deviation
        // of the fraction 0.00055 here; 0.003 is over 5 deviations). A network that mixed too little would keep neighbours
        // near each other far more often.
        let near = perm.windows(2).filter(|w| w[0].abs_diff(w[1]) < n / 64).count();
        let fraction = near as f64 / f64::from(n - 1);
        assert!((fraction - 2.0 / 64.0).abs() < 0.003, "fraction of near neighbours {fraction}");
        // Same for positions 2^k apart (neighbours in the high half), where 4 rounds fail.
        let near = perm.iter().zip(&perm[512..]).filter(|(a, b)| a.abs_diff(**b) < n / 64).count();
        let fraction = near as f64 / f64::from(n - 512);
        assert!((fraction - 2.0 / 64.0).abs() < 0.003, "fraction of near high-half neighbours {fraction}");
    }

    #[test]
    fn largest_index_space_stays_in_range() {
        for mode in [SamplerMode::Sequential, SamplerMode::Iid, SamplerMode::Cyclic] {
            let s = sampler(u32::MAX, 64, mode, 3, 1, 2);
            for step in [0, 1, 1 << 40, u64::MAX] {
                let b = s.batch(step);
                assert_eq!(b.len(), 32);
                assert!(b.iter().all(|&i| i < u32::MAX));
            }
        }
        let s = sampler(u32::MAX, 64, SamplerMode::Cyclic, 3, 0, 1);
        let distinct: HashSet<u32> = s.batch(77).into_iter().collect();
        assert_eq!(distinct.len(), 64);
    }
}
