//! N-way record-aligned partitioning of one buffer.

use super::range::{PartRange, push_planned, ranges_from_cuts};
use super::search::Needle;
use crate::Result;

/// Splits `data` into at most `parts` contiguous, record-aligned byte ranges for independent
/// workers.
///
/// The ideal target `i` (for `i = 1..parts`) is `t = floor(len * i / parts)`. It is projected
/// forward *inclusive* of the target byte: the cut goes just after the first `delimiter` at an
/// index `>= t`, or to the end of `data` when none remains (a cut at the end stops planning).
/// So a target that lands exactly on a record start (the byte before it is a delimiter) is
/// *not* kept: it moves to the end of the record that starts at `t`, as mmap-chunker 0.2.6
/// does. A target at or before the previous cut is skipped, so targets that fall inside one
/// record collapse onto its end and a file with giant records yields fewer ranges than asked;
/// the ranges are re-indexed without gaps. The result is deterministic, covers `0..len`
/// exactly, and never splits a record: every range but the last ends just after a delimiter,
/// and the last ends at `len` whether or not the data ends with a delimiter.
///
/// Planning searches forward from each ideal target only (`memchr`), never scanning the whole
/// buffer: the cost is O(parts) searches, each as long as the record it lands in.
///
/// `parts == 0` asks for no ranges and gets none (an empty plan), as mmap-chunker 0.2.6's Rust
/// API does (`find_partition_boundaries`, `partition_records`); its CLI's refusal of
/// `--parts 0` is the CLI's own check, kept in `loaderx partition`. Empty `data` gives zero
/// ranges; `parts` larger than `data` is fine.
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the plan does not fit in
/// memory (a range per byte: a file of delimiters, cut in as many parts as it has bytes).
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// // len 12, parts 2: the target 6 is the start of "cc\n", so the cut goes after that record.
/// let ranges = loaderx::framing::partition(b"aa\nbb\ncc\ndd\n", 2, b'\n')?;
/// assert_eq!(ranges.len(), 2);
/// assert_eq!((ranges[0].start, ranges[0].end), (0, 9));
/// assert_eq!((ranges[1].start, ranges[1].end), (9, 12));
/// # Ok::<(), loaderx::Error>(())
/// ```
pub fn partition(data: &[u8], parts: usize, delimiter: u8) -> Result<Vec<PartRange>> {
    partition_with(data, parts, &Needle::Byte(delimiter))
}

/// [`partition`] with a multi-byte delimiter `pattern` (e.g. `b"\r\n"`): a record boundary is
/// any position just after a complete occurrence of the pattern.
///
/// The same rule as [`partition`]: the cut for target `t` goes just after the end of the first
/// complete occurrence of the pattern that *starts* at an index `>= t` (an occurrence
/// straddling `t` does not count; one ending exactly at `t` does not keep `t` either), or to
/// the end of `data` when none remains.
///
/// `parts == 0` gives an empty plan, as in [`partition`].
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `pattern` is empty, or the
/// plan does not fit in memory.
pub fn partition_pattern(data: &[u8], parts: usize, pattern: &[u8]) -> Result<Vec<PartRange>> {
    partition_with(data, parts, &Needle::pattern(pattern)?)
}

/// The first `i` whose ideal target `floor(len * i / n)` lies past the previous cut `last`
/// (targets at or before it are skipped): `floor(len * i / n) > last` exactly when
/// `len * i >= (last + 1) * n`.
pub(crate) fn first_index_past(last: u128, len: u128, n: u128) -> u128 {
    ((last + 1) * n).div_ceil(len)
}

fn partition_with(data: &[u8], parts: usize, needle: &Needle) -> Result<Vec<PartRange>> {
    let len = data.len();
    if len == 0 || parts == 0 {
        return Ok(Vec::new());
    }
    // More parts than bytes only repeats cut positions; capping keeps the loop bounded.
    let n = parts.min(len) as u128;
    let total = len as u128;
    let mut cuts = Vec::new();
    let mut i = 1u128;
    while i < n {
        let target = (total * i / n) as usize;
        // Inclusive of the target byte: a target on a record start moves to that record's end.
        let cut = needle.end_after(data, target).unwrap_or(len);
        if cut >= len {
            break;
        }
        push_planned(&mut cuts, cut)?;
        // Skip the targets at or before the cut just planned (giant records swallow several).
        i = (i + 1).max(first_index_past(cut as u128, total, n));
    }
    ranges_from_cuts(&cuts, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The slow obvious planner: every ideal target in turn, a byte loop from the target itself
    /// (inclusive) to the first pattern occurrence starting there or later; the cut is its end.
    fn naive(data: &[u8], parts: usize, pat: &[u8]) -> Vec<(u64, u64)> {
        let len = data.len();
        let starts_at = |p: usize| p + pat.len() <= len && &data[p..p + pat.len()] == pat;
        let mut cuts: Vec<usize> = Vec::new();
        for i in 1..parts {
            let target = len * i / parts;
            if target <= cuts.last().copied().unwrap_or(0) {
                continue;
            }
            let mut p = target;
            while p < len && !starts_at(p) {
                p += 1;
            }
            let cut = if p < len { p + pat.len() } else { len };
            if cut >= len {
                break;
            }
            cuts.push(cut);
        }
        let mut out = Vec::new();
        let mut start = 0;
        for end in cuts.into_iter().chain(std::iter::once(len)) {
            if end > start {
                out.push((start as u64, end as u64));
                start = end;
            }
        }
        out
    }

    fn bounds(r: &[PartRange]) -> Vec<(u64, u64)> {
        r.iter().map(|r| (r.start, r.end)).collect()
    }

    fn check_plan(data: &[u8], parts: usize, pat: &[u8], plan: &[PartRange]) {
        let len = data.len() as u64;
        assert!(plan.len() <= parts);
        let mut pos = 0;
        for (i, r) in plan.iter().enumerate() {
            assert_eq!(r.index, i as u64);
            assert_eq!(r.start, pos, "ranges are contiguous");
            assert!(r.end > r.start);
            assert_eq!(r.length, r.end - r.start);
            if r.end < len {
                let e = r.end as usize;
                assert!(e >= pat.len() && &data[e - pat.len()..e] == pat, "ends at a boundary");
            }
            pos = r.end;
        }
        assert_eq!(pos, len, "ranges cover the data");
    }

    /// mmap-chunker 0.2.6's `find_partition_boundaries(data, 0, d)` and `partition_records(0, d)`
    /// return no ranges; so do ours, for any data and delimiter.
    #[test]
    fn parts_zero_gives_an_empty_plan() {
        for data in [&b""[..], b"a\n", b"aaa\nbbbbbb\ncc\ndddd\ne", &[b'\n'; 1000]] {
            for delimiter in [b'\n', 0, 0xff] {
                assert_eq!(partition(data, 0, delimiter).unwrap(), []);
            }
            assert_eq!(partition_pattern(data, 0, b"\r\n").unwrap(), []);
        }
    }

    #[test]
    fn an_empty_pattern_is_an_error() {
        for parts in [0, 2] {
            assert!(matches!(partition_pattern(b"a\n", parts, b""), Err(crate::Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn empty_input_gives_zero_ranges() {
        assert!(partition(b"", 4, b'\n').unwrap().is_empty());
    }

    #[test]
    fn one_part_is_the_whole_file() {
        assert_eq!(bounds(&partition(b"a\nb\nc", 1, b'\n').unwrap()), [(0, 5)]);
    }

    #[test]
    fn targets_move_forward_to_the_next_record_boundary() {
        // len 20, parts 4: targets 5, 10, 15; 5 moves to 11, which swallows 10; 15 moves to 19.
        let data = b"aaa\nbbbbbb\ncc\ndddd\ne";
        assert_eq!(bounds(&partition(data, 4, b'\n').unwrap()), [(0, 11), (11, 19), (19, 20)]);
    }

    #[test]
    fn a_target_on_a_record_start_moves_to_that_records_end() {
        // len 12, parts 3: target 4 starts "bbb\n" and moves to 8; target 8 is then skipped.
        let data = b"aaa\nbbb\nccc\n";
        assert_eq!(bounds(&partition(data, 3, b'\n').unwrap()), [(0, 8), (8, 12)]);
    }

    /// mmap-chunker 0.2.6's `partition` output on these inputs, row for row.
    #[test]
    fn matches_the_reference_examples() {
        // len 8, parts 2: target 4 starts "bbb\n", whose end is EOF: one range.
        assert_eq!(bounds(&partition(b"aaa\nbbb\n", 2, b'\n').unwrap()), [(0, 8)]);
        // len 6, parts 3: target 2 starts "b\n" -> 4; target 4 is at the cut: skipped.
        assert_eq!(bounds(&partition(b"a\nb\nc\n", 3, b'\n').unwrap()), [(0, 4), (4, 6)]);
        // len 32, parts 2: target 16 starts "record3\n" -> 24.
        let data = b"record1\nrecord2\nrecord3\nrecord4\n";
        assert_eq!(bounds(&partition(data, 2, b'\n').unwrap()), [(0, 24), (24, 32)]);
        // 1,000 newlines, parts 2: target 500 is itself a delimiter -> 501.
        let plan = partition(&[b'\n'; 1000], 2, b'\n').unwrap();
        assert_eq!(bounds(&plan), [(0, 501), (501, 1000)]);
        assert_eq!((plan[1].index, plan[1].length), (1, 499));
    }

    #[test]
    fn a_target_on_a_delimiter_cuts_just_after_it() {
        // len 6, parts 3: target 2 is the '\n' ending "ab\n" -> 3; target 4 -> 6 (EOF).
        assert_eq!(bounds(&partition(b"ab\ncd\n", 3, b'\n').unwrap()), [(0, 3), (3, 6)]);
    }

    #[test]
    fn giant_record_collapses_targets() {
        let mut data = b"a\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', 100));
        data.extend(b"\nb\n");
        let plan = partition(&data, 8, b'\n').unwrap();
        assert_eq!(bounds(&plan), [(0, 103), (103, 105)]);
        assert_eq!(plan[1].index, 1);
    }

    #[test]
    fn no_delimiter_gives_one_range() {
        assert_eq!(bounds(&partition(b"no delimiters here", 4, b'\n').unwrap()), [(0, 18)]);
    }

    #[test]
    fn no_trailing_delimiter_ends_at_eof() {
        let plan = partition(b"aa\nbb\ncc", 3, b'\n').unwrap();
        assert_eq!(bounds(&plan), [(0, 3), (3, 6), (6, 8)]);
    }

    #[test]
    fn more_parts_than_bytes_works() {
        let plan = partition(b"a\nb\n", 1000, b'\n').unwrap();
        assert_eq!(bounds(&plan), [(0, 2), (2, 4)]);
        // len 3: targets 1 and 2; 1 is a delimiter -> 2, then 2 is at the cut: skipped.
        assert_eq!(bounds(&partition(b"\n\n\n", usize::MAX, b'\n').unwrap()), [(0, 2), (2, 3)]);
    }

    #[test]
    fn nul_and_high_delimiters() {
        // len 9, parts 3: target 3 starts "cd\0" -> 6; target 6 is at the cut: skipped.
        assert_eq!(bounds(&partition(b"ab\0cd\0ef\0", 3, 0).unwrap()), [(0, 6), (6, 9)]);
        // len 6, parts 2: target 3 starts "cd\xff", whose end is EOF: one range.
        assert_eq!(bounds(&partition(b"ab\xffcd\xff", 2, 0xff).unwrap()), [(0, 6)]);
        assert_eq!(bounds(&partition(b"ab\xffcd\xffef", 2, 0xff).unwrap()), [(0, 6), (6, 8)]);
    }

    #[test]
    fn crlf_pattern_partitions_on_whole_pattern() {
        // len 12, parts 3: target 4 starts "cd\r\n" -> 8; target 8 is at the cut: skipped.
        let data = b"ab\r\ncd\r\nef\r\n";
        assert_eq!(bounds(&partition_pattern(data, 3, b"\r\n").unwrap()), [(0, 8), (8, 12)]);
        // A pattern straddling the target starts before it and does not count: len 9, parts 3,
        // target 3 is the '\n' of the first "\r\n", so the cut goes after the next one.
        let data = b"ab\r\nc\r\nd\n";
        assert_eq!(bounds(&partition_pattern(data, 3, b"\r\n").unwrap()), [(0, 7), (7, 9)]);
        // An occurrence starting exactly at the target counts: len 6, parts 3, target 2 -> 4.
        assert_eq!(bounds(&partition_pattern(b"ab\r\ncd", 3, b"\r\n").unwrap()), [(0, 4), (4, 6)]);
        // A lone LF is not a CRLF boundary.
        assert_eq!(bounds(&partition_pattern(b"a\nb\nc\r\nd", 2, b"\r\n").unwrap()), [(0, 7), (7, 8)]);
    }

    #[test]
    fn first_index_past_matches_the_definition() {
        for len in 1u128..40 {
            for n in 1u128..=len {
                for last in 0..len {
                    let i = first_index_past(last, len, n);
                    assert!(len * i / n > last);
                    assert!(i == 0 || len * (i - 1) / n <= last);
                }
            }
        }
    }

    /// Records of random sizes (some giant), optionally without a trailing delimiter.
    fn records() -> impl Strategy<Value = Vec<u8>> {
        (prop::collection::vec((0usize..20, prop::bool::weighted(0.1)), 0..40), any::<bool>()).prop_map(
            |(recs, trailing)| {
                let mut data = Vec::new();
                for (k, (len, giant)) in recs.iter().enumerate() {
                    let len = if *giant { len * 50 } else { *len };
                    data.extend(std::iter::repeat_n(b'x', len));
                    if trailing || k + 1 < recs.len() {
                        data.push(b'\n');
                    }
                }
                data
            },
        )
    }

    proptest! {
        #[test]
        fn planner_matches_naive_on_record_files(data in records(), parts in 1usize..70) {
            let plan = partition(&data, parts, b'\n').unwrap();
            prop_assert_eq!(bounds(&plan), naive(&data, parts, b"\n"));
            check_plan(&data, parts, b"\n", &plan);
        }

        #[test]
        fn planner_matches_naive_on_random_bytes(
            data in prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'\n', b'\r', 0u8, 0xff]), 0..400),
            parts in 1usize..500,
            pat_choice in 0usize..6,
        ) {
            let pat: &[u8] = [&b"\n"[..], b"\0", b"\xff", b"\r\n", b"\r\n\r\n", b"ab"][pat_choice];
            let plan = partition_pattern(&data, parts, pat).unwrap();
            prop_assert_eq!(bounds(&plan), naive(&data, parts, pat));
            check_plan(&data, parts, pat, &plan);
            if pat.len() == 1 {
                prop_assert_eq!(partition(&data, parts, pat[0]).unwrap(), plan);
            }
        }
    }
}
