//! Fixed-size chunks: count and bounds by arithmetic, no scan.

/// How many fixed-size chunks a file of `len` bytes splits into.
///
/// A `chunk_size` of 0 is clamped to 1, as in delimiter framing. An empty file has no chunks.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// assert_eq!(loaderx::framing::fixed_chunk_count(9, 4), 3);
/// assert_eq!(loaderx::framing::fixed_chunk_count(0, 4), 0);
/// ```
pub fn fixed_chunk_count(len: u64, chunk_size: u64) -> u64 {
    len.div_ceil(chunk_size.max(1))
}

/// The `(start, end_exclusive)` of fixed-size chunk `index` of a file of `len` bytes, or
/// `None` when `index >= fixed_chunk_count(len, chunk_size)`.
///
/// Every chunk is `chunk_size` bytes (0 is clamped to 1) except a shorter last one.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// assert_eq!(loaderx::framing::fixed_chunk_bounds(9, 4, 2), Some((8, 9)));
/// assert_eq!(loaderx::framing::fixed_chunk_bounds(9, 4, 3), None);
/// ```
pub fn fixed_chunk_bounds(len: u64, chunk_size: u64, index: u64) -> Option<(u64, u64)> {
    let size = chunk_size.max(1);
    if index >= fixed_chunk_count(len, size) {
        return None;
    }
    // index < count implies index * size < len, so the product cannot overflow.
    let start = index * size;
    Some((start, start.saturating_add(size).min(len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_file_has_no_chunks() {
        assert_eq!(fixed_chunk_count(0, 1024), 0);
        assert_eq!(fixed_chunk_bounds(0, 1024, 0), None);
    }

    #[test]
    fn exact_multiple_and_short_last_chunk() {
        assert_eq!(fixed_chunk_count(1024, 256), 4);
        assert_eq!(fixed_chunk_bounds(16, 4, 3), Some((12, 16)));
        assert_eq!(fixed_chunk_count(9, 4), 3);
        assert_eq!(fixed_chunk_bounds(9, 4, 2), Some((8, 9)));
    }

    #[test]
    fn zero_chunk_size_is_clamped_to_one() {
        assert_eq!(fixed_chunk_count(5, 0), 5);
        assert_eq!(fixed_chunk_bounds(5, 0, 4), Some((4, 5)));
        assert_eq!(fixed_chunk_bounds(5, 0, 5), None);
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        assert_eq!(fixed_chunk_count(u64::MAX, u64::MAX), 1);
        assert_eq!(fixed_chunk_bounds(u64::MAX, u64::MAX, 0), Some((0, u64::MAX)));
        assert_eq!(fixed_chunk_bounds(u64::MAX, 2, u64::MAX / 2), Some((u64::MAX - 1, u64::MAX)));
    }

    proptest! {
        #[test]
        fn fixed_chunks_tile_the_file(len in 0u64..5000, size in 0u64..300) {
            let count = fixed_chunk_count(len, size);
            let mut pos = 0;
            for i in 0..count {
                let (s, e) = fixed_chunk_bounds(len, size, i).unwrap();
                prop_assert_eq!(s, pos);
                prop_assert!(e > s && e - s <= size.max(1));
                pos = e;
            }
            prop_assert_eq!(pos, len);
            prop_assert_eq!(fixed_chunk_bounds(len, size, count), None);
        }
    }
}
