//! The cyclic sampler's Feistel network in AVX2 intrinsics: sixteen 16-bit lanes per instruction.
//!
//! Bit for bit the network of [`Permutation::block`] (the test
//! `cyclic_avx2_kernel_equals_the_portable_network` compares them), written by hand because the
//! compiler's own AVX2 build of the portable loops runs at half the speed of its SSE2 build (it
//! widens the 16-bit products and packs across lanes). Here every round stays in 16-bit lanes,
//! the per-round constants are broadcast once per block, and positions are laid out so that the
//! final widening to `u32` (`vpunpck{l,h}wd`, which work within 128-bit lanes) puts them back in
//! order with no cross-lane shuffle.
//!
//! Everything here is safe code but one call: arithmetic intrinsics are safe inside a function
//! compiled with the feature, and vectors are built from and turned back into arrays with
//! `bytemuck`. Calling [`fill`] needs the CPU check, made in [`try_fill`] beside it (the unsafe
//! layer `crate::sys` offers a generic AVX2 dispatch for portable loops, but a hand-written
//! kernel must be called by name, and `sys` imports nothing above it).

use std::arch::x86_64::{
    __m256i, _mm_cvtsi32_si128, _mm256_add_epi16, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi16,
    _mm256_cmpgt_epi16, _mm256_max_epu16, _mm256_min_epu16, _mm256_mulhi_epu16, _mm256_mullo_epi16,
    _mm256_or_si256, _mm256_set1_epi16, _mm256_setzero_si256, _mm256_sll_epi32, _mm256_srl_epi16,
    _mm256_sub_epi16, _mm256_unpackhi_epi16, _mm256_unpacklo_epi16, _mm256_xor_si256,
};

use super::feistel::{Permutation, ROUNDS};

/// 16-bit lanes per vector.
const LANES: usize = 16;
/// Vectors per half of a block: both halves (eight registers) and the round constants fit the
/// sixteen AVX2 registers.
const VECS: usize = 4;
/// Positions per block.
pub(super) const BLOCK: usize = LANES * VECS;

/// Position (within its group of 16) held by each lane. `vpunpcklwd` takes lanes 0-3 and 8-11,
/// `vpunpckhwd` lanes 4-7 and 12-15, so with this layout they yield positions 0-7 and 8-15 in
/// order.
const ORDER: [u16; LANES] = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15];

/// Whether [`fill`] handles this permutation: a block must cross at most one multiple of `2^k`.
pub(crate) fn supports(perm: &Permutation) -> bool {
    perm.lo_bits >= BLOCK.ilog2()
}

/// Runs [`fill`] where the CPU has AVX2 and the kernel handles the permutation's shape; `false`,
/// with nothing written, otherwise.
#[inline]
pub(super) fn try_fill(perm: &Permutation, first: u32, out: &mut [u32]) -> bool {
    if supports(perm) && std::arch::is_x86_feature_detected!("avx2") {
        #[expect(unsafe_code, reason = "calling the AVX2 kernel after the CPU check")]
        // SAFETY: the CPU supports AVX2, checked just above: the kernel is safe code whose only
        // requirement is the target feature it is compiled with.
        unsafe {
            fill(perm, first, out);
        }
        return true;
    }
    false
}

/// [`Permutation::fill`], sixteen lanes at a time. Requires [`supports`].
#[target_feature(enable = "avx2")]
pub(crate) fn fill(perm: &Permutation, first: u32, out: &mut [u32]) {
    debug_assert!(supports(perm));
    if perm.small() {
        perm.fill_with::<BLOCK>(first, out, |p, chunk| block::<true>(perm, p, chunk));
    } else {
        perm.fill_with::<BLOCK>(first, out, |p, chunk| block::<false>(perm, p, chunk));
    }
}

#[target_feature(enable = "avx2")]
#[inline]
fn splat(x: u16) -> __m256i {
    _mm256_set1_epi16(x as i16)
}

/// The network over the [`BLOCK`] consecutive positions `first, first + 1, ...` (wrapping).
#[target_feature(enable = "avx2")]
#[inline]
fn block<const SMALL: bool>(perm: &Permutation, first: u32, out: &mut [u32; BLOCK]) {
    let (l0, r0) = ((first >> perm.lo_bits) as u16, first as u16 & perm.lo_mask);
    // The block crosses at most one multiple of 2^k (`supports`), from position `carry` on.
    // `1 <= carry <= BLOCK`, so `carry - 1` and the positions compare exactly as signed lanes.
    let carry = ((1u32 << perm.lo_bits) - u32::from(r0)).min(BLOCK as u32) as i16;
    let order: __m256i = bytemuck::cast(ORDER);
    let (mask, before_carry) = (splat(perm.lo_mask), _mm256_set1_epi16(carry - 1));
    let mut l = [_mm256_setzero_si256(); VECS];
    let mut r = [_mm256_setzero_si256(); VECS];
    for (i, (li, ri)) in l.iter_mut().zip(&mut r).enumerate() {
        let j = _mm256_add_epi16(order, splat((i * LANES) as u16));
        *ri = _mm256_and_si256(_mm256_add_epi16(j, splat(r0)), mask);
        // `cmpgt` is -1 where the position is past the carry: subtracting it adds one.
        *li = _mm256_sub_epi16(splat(l0), _mm256_cmpgt_epi16(j, before_carry));
    }

    let (hi_len, hi_scale) = (splat(perm.hi_len), splat(perm.hi_scale));
    let lo_shift = _mm_cvtsi32_si128(perm.lo_shift as i32);
    // `Permutation::hash`: (y * m) >> 16 XOR (y * m) mod 2^16, with y = x ^ key.
    let hash = |x: __m256i, key: __m256i, mul: __m256i| {
        let y = _mm256_xor_si256(x, key);
        _mm256_xor_si256(_mm256_mulhi_epu16(y, mul), _mm256_mullo_epi16(y, mul))
    };
    for pair in 0..ROUNDS / 2 {
        let (key, mul) = (splat(perm.keys[2 * pair]), splat(perm.muls[2 * pair]));
        for (li, &ri) in l.iter_mut().zip(&r) {
            let f = _mm256_mulhi_epu16(hash(ri, key, mul), hi_scale);
            *li = if SMALL {
                // `round_hi_small`: min(s, s - a) with s = l + f.
                let s = _mm256_add_epi16(*li, f);
                _mm256_min_epu16(s, _mm256_sub_epi16(s, hi_len))
            } else {
                // `round_hi`: l - (a - f), plus a where l < a - f.
                let d = _mm256_sub_epi16(hi_len, f);
                let at_least = _mm256_cmpeq_epi16(_mm256_max_epu16(*li, d), *li);
                _mm256_add_epi16(_mm256_sub_epi16(*li, d), _mm256_andnot_si256(at_least, hi_len))
            };
        }
        let (key, mul) = (splat(perm.keys[2 * pair + 1]), splat(perm.muls[2 * pair + 1]));
        for (ri, &li) in r.iter_mut().zip(&l) {
            *ri = _mm256_xor_si256(*ri, _mm256_srl_epi16(hash(li, key, mul), lo_shift));
        }
    }

    let (zero, lo_bits) = (_mm256_setzero_si256(), _mm_cvtsi32_si128(perm.lo_bits as i32));
    let join = |l: __m256i, r: __m256i| -> [u32; 8] {
        bytemuck::cast(_mm256_or_si256(_mm256_sll_epi32(l, lo_bits), r))
    };
    for ((o, &li), &ri) in out.chunks_exact_mut(LANES).zip(&l).zip(&r) {
        let low = join(_mm256_unpacklo_epi16(li, zero), _mm256_unpacklo_epi16(ri, zero));
        let high = join(_mm256_unpackhi_epi16(li, zero), _mm256_unpackhi_epi16(ri, zero));
        o[..8].copy_from_slice(&low);
        o[8..].copy_from_slice(&high);
    }
}

#[cfg(test)]
mod tests {
    use super::super::feistel::FeistelShape;
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn cyclic_avx2_kernel_equals_the_portable_network() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: kernel not compared");
            return;
        }
        // Small and large `a` (the two reductions), k from 6 (the kernel's least) to 16, blocks
        // crossing multiples of 2^k, cycle-walks, and lengths that end mid-block.
        let shapes = [2_049, 5_000, 100_000, 1_000_000, 40_000_000, (3 << 30) + 1, u32::MAX];
        let mut checked = 0;
        for (i, n) in shapes.into_iter().enumerate() {
            let shape = FeistelShape::new(n);
            for key in [0, 1, u64::MAX, 0xDEAD_BEEF] {
                let perm = Permutation::new(shape, n, key ^ i as u64);
                assert!(supports(&perm), "n {n}");
                for (first, len) in [(0, 2048), (60, 333), (n - 70, 70), (n / 2 + 7, 64), (n - 1, 1)] {
                    let (mut portable, mut simd) = (vec![0u32; len], vec![1u32; len]);
                    perm.fill(first, &mut portable);
                    assert!(try_fill(&perm, first, &mut simd));
                    assert_eq!(simd, portable, "n {n} key {key} first {first}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 7 * 4 * 5);
        // Below k = 6 the portable network runs.
        let perm = Permutation::new(FeistelShape::new(1000), 1000, 3);
        assert!(!try_fill(&perm, 0, &mut [0; 8]));
    }
}
