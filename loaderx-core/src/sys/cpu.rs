//! What depends on the CPU: code compiled for AVX2 where the CPU has it, and prefetch hints.
#![cfg_attr(
    target_arch = "x86_64",
    expect(unsafe_code, reason = "calling AVX2-compiled code after the CPU check, and prefetch intrinsics")
)]

/// A computation [`with_avx2`] runs compiled for AVX2: its `run` must be `#[inline(always)]` over
/// `#[inline(always)]` loops, so that its whole body lands in the AVX2 copy. (A closure would not
/// do: its body is a separate function that the compiler may leave out of line, compiled for the
/// baseline CPU.)
pub(crate) trait Kernel {
    /// What the computation returns.
    type Output;
    /// The computation; `#[inline(always)]`.
    fn run(self) -> Self::Output;
}

/// Runs `kernel`, inlined into a copy compiled for AVX2 where the CPU has it (checked once, then a
/// cached load), else as is. The result is the same either way: only the instructions differ.
#[inline(always)]
pub(crate) fn with_avx2<K: Kernel>(kernel: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2<K: Kernel>(kernel: K) -> K::Output {
            kernel.run()
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above: the only requirement for calling
            // a function compiled with `target_feature(enable = "avx2")`.
            return unsafe { avx2(kernel) };
        }
    }
    kernel.run()
}

/// Asks the CPU to start loading the first bytes of `src` into cache (at most [`PREFETCH_BYTES`],
/// one hint per cache line) and returns at once: a gather hints the next records while it copies
/// this one, so their cache misses overlap instead of queueing one after another.
///
/// The hint is `T2` (into the outer caches, the L2 on AMD Zen), not `T0`: with a dozen records
/// in flight a `T0` hint waits for one of the L1's few miss buffers and stalls the copy it was
/// meant to overlap (the runs: docs/benchmarks/tuning.md#prefetching).
#[inline]
pub(crate) fn prefetch(src: &[u8]) {
    prefetch_raw(src.as_ptr(), src.len());
}

/// [`prefetch`] of the `len` bytes at `ptr`. Any address is allowed: a prefetch hint never faults.
#[inline]
pub(super) fn prefetch_raw(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T2 }>(ptr, len);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

/// The kinds of hint [`prefetch_span`] gives: none, into the L1 ([`HINT_NEAR`]), into the outer
/// caches ([`HINT_FAR`], [`prefetch`]'s).
pub(crate) const HINT_NONE: u8 = 0;
/// A hint into the L1 (`T0`), for records that are already in the caches: there the
/// outer-cache hint only takes queue slots from the copy, while a hint into the L1 a few records
/// ahead saves the copy the walk from the L3 (the runs: docs/benchmarks/tuning.md#prefetching).
pub(crate) const HINT_NEAR: u8 = 1;
/// See [`HINT_NONE`].
pub(crate) const HINT_FAR: u8 = 2;

/// A hint of kind `HINT` ([`HINT_NONE`] and the others) for the first bytes of the `len` bytes
/// at `offset` in `bytes`, with no bounds check (a hint never faults, wherever it points): for a
/// gather's loop over records already checked to lie in `bytes`, where a slice per hint costs
/// more than the hint.
#[inline(always)]
pub(crate) fn prefetch_span<const HINT: u8>(bytes: &[u8], offset: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let ptr = bytes.as_ptr().wrapping_add(offset);
        if HINT == HINT_NEAR {
            prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr, len);
        } else if HINT == HINT_FAR {
            prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T2 }>(ptr, len);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, offset, len);
}

/// One hint of kind `HINT` per cache line of the first `len` bytes (at most [`PREFETCH_BYTES`])
/// at `ptr`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch_lines<const HINT: i32>(ptr: *const u8, len: usize) {
    let end = len.min(PREFETCH_BYTES);
    let mut offset = 0;
    while offset < end {
        // SAFETY: `_mm_prefetch` is an SSE instruction (part of the x86_64 baseline) that reads
        // and changes no memory and never faults, whatever the address (computed with
        // `wrapping_add`, so no pointer-arithmetic rule applies either).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<HINT>(ptr.wrapping_add(offset).cast());
        }
        offset += 64;
    }
}

#[cfg(target_arch = "x86_64")]
use super::tuning::PREFETCH_BYTES;

/// The CPU as `cpuid` names it: vendor string, family and model (the extended fields added as
/// the vendors' manuals say), or `None` off x86_64.
pub fn cpu_signature() -> Option<(String, u32, u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        let id = std::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
        let eax = std::arch::x86_64::__cpuid(1).eax;
        let base_family = (eax >> 8) & 0xF;
        let family = if base_family == 0xF { base_family + ((eax >> 20) & 0xFF) } else { base_family };
        let base_model = (eax >> 4) & 0xF;
        let model = if base_family == 0xF || base_family == 6 {
            base_model | (((eax >> 16) & 0xF) << 4)
        } else {
            base_model
        };
        Some((String::from_utf8_lossy(&vendor).into_owned(), family, model))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Records shorter than this are hinted ahead by a fixed-stride gather on this CPU: the per-CPU
/// table of docs/benchmarks/tuning.md#prefetching (AMD family 25, models 0x10-0x1F, and family
/// 26, models 0x00-0x0F, hint 12 KiB records, which the Intel Xeon measured did better without; a
/// CPU not in the table keeps the default), read once.
pub fn fixed_stride_hint_below() -> usize {
    static BELOW: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BELOW.get_or_init(|| hint_below_for(cpu_signature()))
}

/// The row of the table for the CPU `sig` ([`cpu_signature`]'s).
fn hint_below_for(sig: Option<(String, u32, u32)>) -> usize {
    match sig {
        Some((vendor, 25, 0x10..=0x1F) | (vendor, 26, 0x00..=0x0F)) if vendor == "AuthenticAMD" => {
            PREFETCH_BELOW_RECORD_AMD_ZEN
        }
        _ => PREFETCH_BELOW_RECORD,
    }
}

use super::tuning::{PREFETCH_BELOW_RECORD, PREFETCH_BELOW_RECORD_AMD_ZEN};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_read_and_the_table_follows_it() {
        let sig = cpu_signature();
        #[cfg(target_arch = "x86_64")]
        {
            let (vendor, family, _) = sig.clone().expect("x86_64 has cpuid");
            assert_eq!(vendor.len(), 12);
            assert!(family >= 5, "family {family}");
        }
        assert_eq!(fixed_stride_hint_below(), hint_below_for(sig));
        let amd = |family, model| Some(("AuthenticAMD".to_string(), family, model));
        for (family, model) in [(25, 0x11), (26, 0x02)] {
            assert_eq!(hint_below_for(amd(family, model)), PREFETCH_BELOW_RECORD_AMD_ZEN, "{family} {model}");
        }
        for (family, model) in [(25, 0x01), (26, 0x11), (23, 0x31)] {
            assert_eq!(hint_below_for(amd(family, model)), PREFETCH_BELOW_RECORD, "{family} {model}");
        }
        let xeon = Some(("GenuineIntel".to_string(), 6, 0x8F));
        assert_eq!(hint_below_for(xeon), PREFETCH_BELOW_RECORD);
        assert_eq!(hint_below_for(None), PREFETCH_BELOW_RECORD);
    }
}
