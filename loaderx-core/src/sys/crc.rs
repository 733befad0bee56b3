//! A copy that computes the crc32c of what it copies in the same pass: what a verified gather
//! (`StoreOptions::verify_reads`) runs for each raw record.
//!
//! Copying a record from memory and then summing it costs the sum of the two even with the
//! record in L1 for the second pass (figures: docs/benchmarks/kernels.md). Fused, the
//! record is split in three lanes, each summed by its own `crc32` chain (the instruction's
//! latency is 3 cycles, its throughput 1 per cycle) while its words are stored, so the sums run
//! in the shadow of the loads; the three lane sums are joined with the "shift by n zero bytes"
//! operators of the lanes' lengths (linear maps over GF(2), computed once per record length from
//! `crc32c_combine` and kept as byte tables).
#![cfg_attr(
    target_arch = "x86_64",
    expect(unsafe_code, reason = "the SSE4.2 crc32 instruction in a kernel compiled for AVX2")
)]
// The lanes' plans are read by the x86-64 kernel alone; elsewhere the copy and the sum run apart.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, OnceLock, TryLockError};

use super::MadeIn;

use super::cpu::{Kernel, with_avx2};

pub(crate) use super::tuning::FUSED_MIN_LEN;
/// Record lengths whose operators are kept; past this the cache starts over (a fixed-stride
/// dataset has one length).
const CACHED_LENGTHS: usize = 64;

/// The linear map "append `n` zero bytes" on a finalised crc32c, as four byte tables.
struct Shift([[u32; 256]; 4]);

impl Shift {
    fn new(n: usize) -> Shift {
        // The images of the 32 basis vectors: crc32c_combine(x, 0, n) is the shift of x by n
        // zero bytes, and linear in x.
        let basis: [u32; 32] = std::array::from_fn(|i| crc32c::crc32c_combine(1 << i, 0, n));
        let mut t = [[0u32; 256]; 4];
        for (k, table) in t.iter_mut().enumerate() {
            for (b, slot) in table.iter_mut().enumerate() {
                *slot = (0..8).filter(|bit| b >> bit & 1 == 1).fold(0, |acc, bit| acc ^ basis[8 * k + bit]);
            }
        }
        Shift(t)
    }

    #[inline]
    fn apply(&self, x: u32) -> u32 {
        let t = &self.0;
        t[0][(x & 0xFF) as usize]
            ^ t[1][(x >> 8 & 0xFF) as usize]
            ^ t[2][(x >> 16 & 0xFF) as usize]
            ^ t[3][(x >> 24) as usize]
    }
}

/// How a record of one length is split and joined: lane lengths and the two shifts.
struct Plan {
    lane: usize,
    /// Shift by the lengths of lanes 1 and 2 (applied to lane 0's sum).
    by_two: Shift,
    /// Shift by the length of lane 2 (applied to lane 1's sum).
    by_last: Shift,
}

fn plan(len: usize) -> Arc<Plan> {
    /// The plans cache, with the process that made it.
    type Plans = (MadeIn, Mutex<HashMap<usize, Arc<Plan>>>);
    static PLANS: OnceLock<Plans> = OnceLock::new();
    let (made_in, plans) = PLANS.get_or_init(|| (MadeIn::here(), Mutex::new(HashMap::new())));
    // Waited for in the process that made the cache; in a child forked while a thread of its
    // parent held it (held there for good) a plan is made without it: the same plan, made in
    // microseconds. The lock is held for a lookup or an insert, never while a plan is made.
    let tried = || match plans.try_lock() {
        Ok(map) => Some(map),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) if made_in.is_here() => {
            Some(plans.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
        }
        Err(TryLockError::WouldBlock) => None,
    };
    if let Some(p) = tried().and_then(|m| m.get(&len).cloned()) {
        return p;
    }
    let lane = len / 3 / 8 * 8;
    let last = len - 2 * lane;
    let p = Arc::new(Plan { lane, by_two: Shift::new(lane + last), by_last: Shift::new(last) });
    if let Some(mut map) = tried() {
        if map.len() >= CACHED_LENGTHS {
            map.clear();
        }
        map.insert(len, Arc::clone(&p));
    }
    p
}

/// Copies and sums records ([`Summer::copy`]), keeping the operators of the last record length
/// it saw: one per gather shard, so a batch of one length looks them up once.
#[derive(Default)]
pub(crate) struct Summer {
    last: Option<(usize, Arc<Plan>)>,
}

impl Summer {
    /// Copies `src` into `dst` (the same length) and returns the crc32c of the bytes.
    pub(crate) fn copy(&mut self, dst: &mut [MaybeUninit<u8>], src: &[u8]) -> u32 {
        assert_eq!(dst.len(), src.len(), "copy_crc32c of unequal lengths");
        if src.len() < FUSED_MIN_LEN {
            dst.write_copy_of_slice(src);
            return crc32c::crc32c(src);
        }
        let p = match &self.last {
            Some((len, p)) if *len == src.len() => p,
            _ => &self.last.insert((src.len(), plan(src.len()))).1,
        };
        with_avx2(Fused { dst, src, plan: p })
    }
}

/// Hints the CPU to fetch the starts of a record's three lanes (a fused copy opens three
/// streams through it, not one).
#[inline]
pub(crate) fn prefetch_lanes(src: &[u8]) {
    let lane = src.len() / 3 / 8 * 8;
    super::cpu::prefetch_raw(src.as_ptr(), src.len());
    if src.len() >= FUSED_MIN_LEN {
        super::cpu::prefetch_raw(src.as_ptr().wrapping_add(lane), lane);
        super::cpu::prefetch_raw(src.as_ptr().wrapping_add(2 * lane), src.len() - 2 * lane);
    }
}

/// The fused copy as a [`Kernel`]: compiled for AVX2 (which implies SSE4.2's `crc32`) where the
/// CPU has it; elsewhere a copy and then the crc32c crate's sum.
struct Fused<'a> {
    dst: &'a mut [MaybeUninit<u8>],
    src: &'a [u8],
    plan: &'a Plan,
}

impl Kernel for Fused<'_> {
    type Output = u32;

    #[inline(always)]
    fn run(self) -> u32 {
        let Fused { dst, src, plan } = self;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return fused_lanes(dst, src, plan);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = plan;
        dst.write_copy_of_slice(src);
        crc32c::crc32c(src)
    }
}

/// The three-lane loop. Only reached on a CPU with AVX2 (so SSE4.2), inside [`with_avx2`]'s
/// AVX2 copy of the kernel.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fused_lanes(dst: &mut [MaybeUninit<u8>], src: &[u8], plan: &Plan) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let lane = plan.lane;
    let (s0, rest) = src.split_at(lane);
    let (s1, s2) = rest.split_at(lane);
    let (d0, rest) = dst.split_at_mut(lane);
    let (d1, d2) = rest.split_at_mut(lane);
    let (mut c0, mut c1, mut c2) = (u64::from(u32::MAX), u64::from(u32::MAX), u64::from(u32::MAX));
    let word = |s: &[u8]| u64::from_le_bytes(s.try_into().expect("8 bytes"));
    let pair = |s: &[u8]| u128::from_le_bytes(s.try_into().expect("16 bytes"));
    // Two words per lane per turn (16-byte loads and stores); a lane's odd last word after.
    let whole = lane / 16 * 16;
    let (p0, r0) = (s0.split_at(whole), d0.split_at_mut(whole));
    let (p1, r1) = (s1.split_at(whole), d1.split_at_mut(whole));
    let (p2, r2) = (s2.split_at(whole), d2.split_at_mut(whole));
    for ((((a, b), c), (da, db)), dc) in
        p0.0.chunks_exact(16)
            .zip(p1.0.chunks_exact(16))
            .zip(p2.0.chunks_exact(16))
            .zip(r0.0.chunks_exact_mut(16).zip(r1.0.chunks_exact_mut(16)))
            .zip(r2.0.chunks_exact_mut(16))
    {
        let (x, y, z) = (pair(a), pair(b), pair(c));
        // SAFETY: this function runs only where the CPU has AVX2 (checked by the caller), which
        // implies SSE4.2, the `crc32` instruction's only requirement; it touches no memory.
        unsafe {
            c0 = _mm_crc32_u64(c0, x as u64);
            c1 = _mm_crc32_u64(c1, y as u64);
            c2 = _mm_crc32_u64(c2, z as u64);
            c0 = _mm_crc32_u64(c0, (x >> 64) as u64);
            c1 = _mm_crc32_u64(c1, (y >> 64) as u64);
            c2 = _mm_crc32_u64(c2, (z >> 64) as u64);
        }
        da.write_copy_of_slice(&x.to_le_bytes());
        db.write_copy_of_slice(&y.to_le_bytes());
        dc.write_copy_of_slice(&z.to_le_bytes());
    }
    let (s0, d0, s1, d1, s2, d2) = (p0.1, r0.1, p1.1, r1.1, p2.1, r2.1);
    for ((a, da), (b, db)) in
        s0.chunks_exact(8).zip(d0.chunks_exact_mut(8)).zip(s1.chunks_exact(8).zip(d1.chunks_exact_mut(8)))
    {
        let (x, y) = (word(a), word(b));
        // SAFETY: as above.
        unsafe {
            c0 = _mm_crc32_u64(c0, x);
            c1 = _mm_crc32_u64(c1, y);
        }
        da.write_copy_of_slice(&x.to_le_bytes());
        db.write_copy_of_slice(&y.to_le_bytes());
    }
    let mut d2w = d2.chunks_exact_mut(8);
    let mut s2w = s2.chunks_exact(8);
    // Lane 2 is longer by up to 23 bytes: its remaining words, then bytes.
    for (s, d) in (&mut s2w).zip(&mut d2w) {
        let z = word(s);
        // SAFETY: as above.
        c2 = unsafe { _mm_crc32_u64(c2, z) };
        d.write_copy_of_slice(&z.to_le_bytes());
    }
    let (s_tail, d_tail) = (s2w.remainder(), d2w.into_remainder());
    d_tail.write_copy_of_slice(s_tail);
    let mut c2 = c2 as u32;
    for &b in s_tail {
        // SAFETY: as above.
        c2 = unsafe { _mm_crc32_u8(c2, b) };
    }
    let (f0, f1, f2) = (!(c0 as u32), !(c1 as u32), !c2);
    plan.by_two.apply(f0) ^ plan.by_last.apply(f1) ^ f2
}

#[cfg(test)]
#[cfg_attr(
    not(target_arch = "x86_64"),
    expect(unsafe_code, reason = "reading back the bytes the copy wrote (the module's own is x86-64's)")
)]
mod tests {
    use super::*;

    #[test]
    fn the_fused_copy_equals_a_copy_and_the_crate_sum_at_every_length() {
        let src: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0, 1, 7, 1023, 1024, 1025, 1031, 1047, 3000, 4096, 12_288, 12_311, 65_536, 70_000] {
            for off in [0, 3] {
                let s = &src[off..off + len.min(src.len() - off)];
                let mut dst = vec![MaybeUninit::<u8>::uninit(); s.len()];
                let crc = Summer::default().copy(&mut dst, s);
                assert_eq!(crc, crc32c::crc32c(s), "length {len}, offset {off}");
                let out: Vec<u8> = dst
                    .iter()
                    // SAFETY: `Summer::copy` wrote every byte of `dst` (its length is `s`'s).
                    .map(|b| unsafe { b.assume_init() })
                    .collect();
                assert_eq!(out, s, "length {len}, offset {off}");
            }
        }
    }
}
