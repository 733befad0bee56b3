//! [`NearCopy`]: how a gather copies a record whose destination starts just past its source,
//! modulo 4 KiB, chosen by what this CPU measures rather than by its vendor.
//!
//! glibc copies large blocks with `rep movsb`, which some CPUs run several times slower when the
//! destination starts a few bytes past the source modulo 4 KiB (AMD's Zen parts among them, by
//! how much depending on the part and the distance). That is the common case of a gather: glibc's
//! large allocations start 16 bytes into a page, and records sit anywhere in a chunk file. There
//! the bytes can be moved in 256-byte blocks instead, each loaded whole before it is stored (plain
//! vector moves). Which of the two is faster at each distance is measured once per process
//! ([`NearCopy::measured`], a few milliseconds on the first gather), and a store can be told
//! either one ([`StoreOptions::near_copy`](crate::StoreOptions::near_copy)).

use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::time::Instant;

use super::tuning::{NEAR_COPY_WIN, SHORT_DISTANCE, SHORT_DISTANCE_MIN_LEN};

/// How a gather copies a record whose destination starts less than 64 bytes past its source,
/// modulo 4 KiB ([`NearCopy::measured`] says why). Other records are always copied by `memcpy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NearCopy {
    /// At each distance, whichever of the two this CPU ran faster when it was measured (once per
    /// process, at the first gather that needs it).
    #[default]
    Measure,
    /// `memcpy` at every distance (the C library's copy).
    Memcpy,
    /// 256-byte blocks at every distance below 64 bytes.
    Blocks,
}

/// Distance classes measured: one per 8 bytes below [`SHORT_DISTANCE`] (`1..8`, `8..16`, ...,
/// measured at their middle), and distance 0 on its own (a copy between equally aligned
/// addresses, which `rep movsb` runs at full speed where a distance of 1 to 15 costs it ten
/// times as much on some parts).
pub(super) const NEAR_CLASSES: usize = SHORT_DISTANCE / 8 + 1;

/// The distance class of a destination-minus-source distance below [`SHORT_DISTANCE`].
#[inline]
fn class_of(distance: usize) -> usize {
    if distance == 0 { NEAR_CLASSES - 1 } else { distance / 8 }
}

/// The distance [`NearCopy::measured`] times for class `k`.
pub fn class_distance(k: usize) -> usize {
    if k == NEAR_CLASSES - 1 { 0 } else { 8 * k + 4 }
}

/// What [`NearCopy::measured`] found: per distance class (`1..8`, `8..16`, ..., `56..64` bytes,
/// then exactly 0; [`class_distance`] gives the distance timed), the fastest time of each copy of
/// the same records, and the choice.
#[derive(Debug, Clone, PartialEq)]
pub struct NearCopyCalibration {
    /// Nanoseconds per copy of one 12 KiB record by `memcpy`, per distance class.
    pub memcpy_ns: [f64; NEAR_CLASSES],
    /// The same by 256-byte blocks.
    pub blocks_ns: [f64; NEAR_CLASSES],
    /// Bit `k` set: distance class `k` copies by blocks.
    pub blocks_mask: u16,
}

impl NearCopy {
    /// The measurement [`NearCopy::Measure`] follows: records of 12 KiB copied in the L2 by each
    /// copy at each distance class, interleaved, fastest of nine rounds; a class copies by blocks
    /// when `memcpy` takes more than [`NEAR_COPY_WIN`] times as long there. Measured once per
    /// process (a few milliseconds); non-x86 CPUs keep `memcpy` everywhere without measuring.
    pub fn measured() -> &'static NearCopyCalibration {
        static CAL: OnceLock<NearCopyCalibration> = OnceLock::new();
        CAL.get_or_init(calibrate)
    }

    /// The distance classes this choice copies by blocks (bit `k`: class `k`).
    pub(crate) fn mask(self) -> u16 {
        match self {
            NearCopy::Measure => NearCopy::measured().blocks_mask,
            NearCopy::Memcpy => 0,
            NearCopy::Blocks => u16::MAX,
        }
    }
}

impl std::str::FromStr for NearCopy {
    type Err = String;

    fn from_str(s: &str) -> Result<NearCopy, String> {
        match s {
            "measure" => Ok(NearCopy::Measure),
            "memcpy" => Ok(NearCopy::Memcpy),
            "blocks" => Ok(NearCopy::Blocks),
            other => Err(format!("near copy must be 'measure', 'memcpy' or 'blocks', not {other:?}")),
        }
    }
}

/// Copies `src` into `dst` (same length): by 256-byte blocks where the distance class's bit is
/// set in `mask`, by `memcpy` everywhere else.
#[inline]
pub(super) fn copy_bytes(dst: &mut [MaybeUninit<u8>], src: &[u8], mask: u16) {
    let distance = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
    if src.len() < SHORT_DISTANCE_MIN_LEN
        || distance >= SHORT_DISTANCE
        || (mask >> class_of(distance)) & 1 == 0
    {
        dst.write_copy_of_slice(src);
    } else {
        copy_in_blocks(dst, src);
    }
}

/// The copy for the hazard: 256-byte blocks, each loaded whole before it is stored.
pub(super) fn copy_in_blocks(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    const BLOCK: usize = 256;
    let mut d = dst.chunks_exact_mut(BLOCK);
    let mut s = src.chunks_exact(BLOCK);
    for (d, s) in (&mut d).zip(&mut s) {
        let block: [u8; BLOCK] = s.try_into().expect("chunks_exact yields BLOCK bytes");
        d.write_copy_of_slice(&block);
    }
    d.into_remainder().write_copy_of_slice(s.remainder());
}

/// [`NearCopy::measured`]'s measurement.
fn calibrate() -> NearCopyCalibration {
    if !cfg!(target_arch = "x86_64") {
        return NearCopyCalibration {
            memcpy_ns: [0.0; NEAR_CLASSES],
            blocks_ns: [0.0; NEAR_CLASSES],
            blocks_mask: 0,
        };
    }
    const REC: usize = 12 << 10;
    const RECORDS: usize = 8;
    const PASSES: usize = 4;
    const ROUNDS: usize = 9;
    let page = 4096;
    let src_buf: Vec<u8> = (0..REC * RECORDS + page).map(|i| i as u8).collect();
    let mut dst_buf = vec![MaybeUninit::new(0u8); REC * RECORDS + page + SHORT_DISTANCE];
    let src_at = src_buf.as_ptr().align_offset(page);
    let dst_at = dst_buf.as_ptr().align_offset(page);
    let src = &src_buf[src_at..src_at + REC * RECORDS];
    let mut time = |class: usize, blocks: bool| {
        let at = dst_at + class_distance(class);
        let dst = &mut dst_buf[at..at + REC * RECORDS];
        let start = Instant::now();
        for _ in 0..PASSES {
            for (d, s) in dst.chunks_exact_mut(REC).zip(src.chunks_exact(REC)) {
                if blocks {
                    copy_in_blocks(d, std::hint::black_box(s));
                } else {
                    d.write_copy_of_slice(std::hint::black_box(s));
                }
            }
        }
        std::hint::black_box(&dst);
        start.elapsed().as_nanos() as f64 / (PASSES * RECORDS) as f64
    };
    let mut memcpy_ns = [f64::INFINITY; NEAR_CLASSES];
    let mut blocks_ns = [f64::INFINITY; NEAR_CLASSES];
    // Round 0 warms the caches and the clock and is not counted.
    for round in 0..=ROUNDS {
        for class in 0..NEAR_CLASSES {
            // Each order in turn, so that neither copy always follows the other.
            for blocks in if round % 2 == 0 { [false, true] } else { [true, false] } {
                let ns = time(class, blocks);
                if round == 0 {
                    continue;
                }
                let best = if blocks { &mut blocks_ns[class] } else { &mut memcpy_ns[class] };
                *best = best.min(ns);
            }
        }
    }
    let mut blocks_mask = 0u16;
    for class in 0..NEAR_CLASSES {
        if memcpy_ns[class] > NEAR_COPY_WIN * blocks_ns[class] {
            blocks_mask |= 1 << class;
        }
    }
    NearCopyCalibration { memcpy_ns, blocks_ns, blocks_mask }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_follows_the_mask() {
        assert_eq!(NearCopy::Memcpy.mask(), 0);
        assert_eq!(NearCopy::Blocks.mask(), u16::MAX);
        let cal = NearCopy::measured();
        assert_eq!(NearCopy::Measure.mask(), cal.blocks_mask);
        for class in 0..NEAR_CLASSES {
            let blocks = cal.memcpy_ns[class] > NEAR_COPY_WIN * cal.blocks_ns[class];
            assert_eq!((cal.blocks_mask >> class) & 1 == 1, blocks, "class {class}: {cal:?}");
        }
        assert_eq!("blocks".parse::<NearCopy>(), Ok(NearCopy::Blocks));
        assert!("fast".parse::<NearCopy>().unwrap_err().contains("'measure'"));
    }

    #[test]
    fn every_short_distance_has_a_class_timed_inside_it() {
        for distance in 0..SHORT_DISTANCE {
            let k = class_of(distance);
            assert!(k < NEAR_CLASSES);
            let timed = class_distance(k);
            // Distance 0 alone in its class; the others share a class with the distance timed.
            assert_eq!(distance == 0, timed == 0, "distance {distance}");
            assert_eq!(class_of(timed), k, "distance {distance}");
        }
    }
}
