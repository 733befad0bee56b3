//! [`NearCopy`]: how a gather copies a record whose destination starts just past its source,
//! modulo 4 KiB, chosen by what this CPU measures rather than by its vendor.
//!
//! glibc copies large blocks with `rep movsb`, which some CPUs run many times slower when the
//! destination starts a few bytes past the source modulo 4 KiB, by how much depending on the part,
//! the distance (whether it is a multiple of 16) and whether the bytes are in the caches. That is
//! the common case of a gather: glibc's large allocations start 16 bytes into a page, and records
//! sit anywhere in a chunk file. There the bytes can be moved in 256-byte pieces instead (each
//! under the size at which `memcpy` turns to `rep movsb`). The first copy that meets such a
//! distance times both copies at each class of distances, once per process
//! ([`NearCopy::measured`]); a store can be told either copy outright
//! ([`StoreOptions::near_copy`](crate::StoreOptions::near_copy)).

use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::tuning::{NEAR_COPY_WIN, SHORT_DISTANCE, SHORT_DISTANCE_MIN_LEN};

/// How a gather copies a record whose destination starts less than 64 bytes past its source,
/// modulo 4 KiB (the module's doc says why). Other records are always copied by `memcpy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NearCopy {
    /// At each class of distances, what this CPU measured ([`NearCopy::measured`]).
    #[default]
    Measure,
    /// `memcpy` at every distance (the C library's copy).
    Memcpy,
    /// 256-byte pieces at every distance below 64 bytes.
    Blocks,
}

/// Classes of distances: 0, 16, 32 and 48 bytes (equal alignment modulo 16), then the distances
/// between them (`1..16`, `17..32`, `33..48`, `49..64`).
const NEAR_CLASSES: usize = 8;

/// The class of a destination-minus-source distance below [`SHORT_DISTANCE`].
#[inline]
fn class_of(distance: usize) -> usize {
    if distance.is_multiple_of(16) { distance / 16 } else { 4 + distance / 16 }
}

/// The distance timed for class `k`: the class's own, or the middle of its range.
fn class_distance(k: usize) -> usize {
    if k < 4 { 16 * k } else { 16 * (k - 4) + 8 }
}

/// What [`NearCopy::measured`] found, per class of distances.
#[derive(Debug, Clone, PartialEq)]
pub struct NearCopyCalibration {
    /// The destination-minus-source distance (bytes) timed for each class.
    pub distances: [usize; NEAR_CLASSES],
    /// Nanoseconds per copy of one 12 KiB record by `memcpy`, at each distance.
    pub memcpy_ns: [f64; NEAR_CLASSES],
    /// The same by 256-byte pieces.
    pub blocks_ns: [f64; NEAR_CLASSES],
    /// Bit `k` set: the class of `distances[k]` copies by pieces.
    pub blocks_mask: u8,
}

/// The measurement, once taken.
static MEASURED: OnceLock<NearCopyCalibration> = OnceLock::new();
/// Whether a thread has begun taking it.
static BEGUN: AtomicBool = AtomicBool::new(false);

impl NearCopy {
    /// The measurement [`NearCopy::Measure`] follows, taken now if no thread has begun it:
    /// records of 12 KiB in the L2 copied by each copy at each class's distance, interleaved,
    /// fastest of nine rounds. Distance 0 (equal alignment) takes the pieces only where `memcpy`
    /// is more than 1.15 times slower (`NEAR_COPY_WIN`); every other class keeps them unless they are
    /// that much slower than `memcpy`, because the caches hide part of the hazard that a copy
    /// from memory meets (docs/benchmarks/tuning.md#copies). `None` while another thread takes it,
    /// and in a child forked while one did (copies there follow that default rule, without
    /// waiting). Off x86_64 nothing is timed and `memcpy` is used everywhere.
    pub fn measured() -> Option<&'static NearCopyCalibration> {
        if let Some(m) = MEASURED.get() {
            return Some(m);
        }
        if BEGUN.swap(true, Ordering::AcqRel) {
            return MEASURED.get();
        }
        Some(MEASURED.get_or_init(calibrate))
    }

    /// Whether a copy at `distance` (below [`SHORT_DISTANCE`]) goes by pieces.
    #[inline]
    fn pieces_at(self, distance: usize) -> bool {
        let class = class_of(distance);
        match self {
            NearCopy::Memcpy => false,
            NearCopy::Blocks => true,
            NearCopy::Measure => match NearCopy::measured() {
                Some(m) => (m.blocks_mask >> class) & 1 == 1,
                None => cfg!(target_arch = "x86_64") && class != 0,
            },
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

/// Copies `src` into `dst` (same length): by 256-byte pieces where `how` says so for the
/// distance, by `memcpy` everywhere else. The measurement is looked up (and taken, the first
/// time) only for a copy long enough to meet the hazard at a short distance.
#[inline]
pub(super) fn copy_bytes(dst: &mut [MaybeUninit<u8>], src: &[u8], how: NearCopy) {
    let distance = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
    if src.len() < SHORT_DISTANCE_MIN_LEN || distance >= SHORT_DISTANCE || !how.pieces_at(distance) {
        dst.write_copy_of_slice(src);
    } else {
        copy_in_blocks(dst, src);
    }
}

/// The copy for the hazard: 256-byte pieces, each under the size at which `memcpy` turns to
/// `rep movsb`.
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
    let distances = std::array::from_fn(class_distance);
    if !cfg!(target_arch = "x86_64") {
        let zero = [0.0; NEAR_CLASSES];
        return NearCopyCalibration { distances, memcpy_ns: zero, blocks_ns: zero, blocks_mask: 0 };
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
    let blocks_mask = decide(&memcpy_ns, &blocks_ns);
    NearCopyCalibration { distances, memcpy_ns, blocks_ns, blocks_mask }
}

/// The classes that copy by pieces, from the two copies' times ([`NearCopy::measured`]'s rule).
fn decide(memcpy_ns: &[f64; NEAR_CLASSES], blocks_ns: &[f64; NEAR_CLASSES]) -> u8 {
    let mut mask = 0u8;
    for class in 0..NEAR_CLASSES {
        let pieces = if class == 0 {
            memcpy_ns[class] > NEAR_COPY_WIN * blocks_ns[class]
        } else {
            blocks_ns[class] <= NEAR_COPY_WIN * memcpy_ns[class]
        };
        mask |= u8::from(pieces) << class;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_follows_the_measurement_and_the_rule() {
        assert!(!NearCopy::Memcpy.pieces_at(16));
        assert!(NearCopy::Blocks.pieces_at(0) && NearCopy::Blocks.pieces_at(63));
        // Another test's gather may be taking the measurement: wait for it (milliseconds).
        let m = (0..10_000)
            .find_map(|_| {
                NearCopy::measured().or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    None
                })
            })
            .expect("the measurement is taken");
        for d in 0..SHORT_DISTANCE {
            let k = class_of(d);
            assert_eq!(NearCopy::Measure.pieces_at(d), (m.blocks_mask >> k) & 1 == 1, "distance {d}: {m:?}");
        }
        if cfg!(target_arch = "x86_64") {
            assert_eq!(m.blocks_mask, decide(&m.memcpy_ns, &m.blocks_ns));
        } else {
            // Nothing timed off x86_64: memcpy everywhere.
            assert_eq!(m.blocks_mask, 0);
        }
        // Distance 0 needs a clear win for the pieces; the others a clear loss to leave them.
        let even = [100.0; NEAR_CLASSES];
        assert_eq!(decide(&even, &even), 0b1111_1110);
        let mut slow = even;
        slow[0] = 200.0;
        slow[5] = 200.0;
        assert_eq!(decide(&slow, &even), 0b1111_1111);
        assert_eq!(decide(&even, &slow), 0b1101_1110);
        assert_eq!("blocks".parse::<NearCopy>(), Ok(NearCopy::Blocks));
        assert!("fast".parse::<NearCopy>().unwrap_err().contains("'measure'"));
    }

    #[test]
    fn every_short_distance_has_a_class_timed_inside_it() {
        for distance in 0..SHORT_DISTANCE {
            let k = class_of(distance);
            assert!(k < NEAR_CLASSES);
            let timed = class_distance(k);
            // Multiples of 16 alone in their class; the others share one with the distance timed.
            assert_eq!(distance.is_multiple_of(16), timed.is_multiple_of(16), "distance {distance}");
            assert_eq!(class_of(timed), k, "distance {distance}");
        }
    }
}
