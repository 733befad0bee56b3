//! Ordered multi-file partitioning: one logical dataset of independent sources, split over
//! workers without any record crossing a source or a worker boundary.

use super::partition::first_index_past;
use super::range::{FilePartRange, push_planned};
use super::search::Needle;
use crate::Result;

/// Splits an ordered list of independent sources into at most `parts` workers' byte ranges.
///
/// The sources are never concatenated; each keeps its own local offsets. The ideal cut `i`
/// (for `i = 1..parts`) is at `floor(total * i / parts)` over the logical sum `total` of all
/// source lengths. A cut that lands exactly on a source boundary is kept (file boundaries are
/// record boundaries). A cut inside a source moves forward to just after the first `delimiter`
/// at or after it within that source, or to that source's end when none remains. As in
/// [`partition`](crate::partition), a cut inside a source that lands just after a delimiter
/// is *not* kept as is: the search starts at the cut itself (the target byte counts), as
/// mmap-chunker's `partition-files` does. A cut at or before the previous one is skipped, so
/// cuts that collapse onto one record's end are merged and fewer workers than `parts` may
/// receive bytes.
///
/// The rows are ordered by `worker` (compact, zero-based: only workers that received bytes),
/// then by ascending `source`. One worker may hold rows from several sources; empty sources
/// produce no rows; if every source is empty (or there are none) the plan is empty. Duplicate
/// sources are simply distinct entries. Records never cross a source or worker boundary.
///
/// `parts == 0` gives an empty plan, as in [`partition`](crate::partition) (and as the planner
/// of mmap-chunker 0.2.6's `partition-files` does; its CLI refuses `--parts 0` before planning).
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the plan does not fit in
/// memory (a range per byte: a file of delimiters, cut in as many parts as it has bytes).
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// let a: &[u8] = b"a1\na2\n";
/// let b: &[u8] = b"b1\nb2\n";
/// let rows = loaderx::framing::partition_files(&[a, b], 2, b'\n')?;
/// let flat: Vec<_> = rows.iter().map(|r| (r.worker, r.source, r.start, r.end)).collect();
/// assert_eq!(flat, [(0, 0, 0, 6), (1, 1, 0, 6)]);
/// # Ok::<(), loaderx::Error>(())
/// ```
pub fn partition_files<S: AsRef<[u8]>>(
    sources: &[S],
    parts: usize,
    delimiter: u8,
) -> Result<Vec<FilePartRange>> {
    let needle = Needle::Byte(delimiter);
    // prefixes[s] is the logical offset where source s starts; prefixes[len] is the total.
    let mut prefixes = Vec::with_capacity(sources.len() + 1);
    let mut total = 0u128;
    prefixes.push(0u128);
    for source in sources {
        total += source.as_ref().len() as u128;
        prefixes.push(total);
    }
    if total == 0 || parts == 0 {
        return Ok(Vec::new());
    }

    let n = (parts as u128).min(total);
    let mut cuts = Vec::new();
    let mut i = 1u128;
    while i < n {
        let target = total * i / n;
        let cut = if prefixes.binary_search(&target).is_ok() {
            target
        } else {
            // The source holding byte `target`: the last one starting at or before it.
            let s = prefixes.partition_point(|&p| p <= target) - 1;
            let data = sources[s].as_ref();
            let local = (target - prefixes[s]) as usize;
            let end = needle.end_after(data, local).unwrap_or(data.len());
            prefixes[s] + end as u128
        };
        if cut >= total {
            break;
        }
        push_planned(&mut cuts, cut)?;
        i = (i + 1).max(first_index_past(cut, total, n));
    }

    let mut rows = Vec::new();
    let mut start = 0u128;
    let mut s = 0usize;
    for (worker, end) in cuts.into_iter().chain(std::iter::once(total)).enumerate() {
        // Skip the sources that end at or before this worker's first byte.
        while prefixes[s + 1] <= start {
            s += 1;
        }
        let mut k = s;
        while k < sources.len() && prefixes[k] < end {
            let lo = start.max(prefixes[k]);
            let hi = end.min(prefixes[k + 1]);
            if hi > lo {
                let (lo, hi) = ((lo - prefixes[k]) as u64, (hi - prefixes[k]) as u64);
                let row = FilePartRange {
                    worker: worker as u64,
                    source: k as u64,
                    start: lo,
                    end: hi,
                    length: hi - lo,
                };
                push_planned(&mut rows, row)?;
            }
            k += 1;
        }
        start = end;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Row = (u64, u64, u64, u64, u64);

    fn rows(r: &[FilePartRange]) -> Vec<Row> {
        r.iter().map(|r| (r.worker, r.source, r.start, r.end, r.length)).collect()
    }

    /// The slow obvious planner: walk the logical bytes one at a time.
    fn naive(sources: &[Vec<u8>], parts: usize, delim: u8) -> Vec<Row> {
        let mut owner = Vec::new(); // (source, local offset) of every logical byte
        let mut starts = vec![0usize];
        for (s, src) in sources.iter().enumerate() {
            owner.extend((0..src.len()).map(|o| (s, o)));
            starts.push(owner.len());
        }
        let total = owner.len();
        let mut cuts: Vec<usize> = Vec::new();
        for i in 1..parts {
            let target = total * i / parts;
            if target <= cuts.last().copied().unwrap_or(0) {
                continue;
            }
            let mut cut = target;
            if !starts.contains(&target) {
                let (s, _) = owner[target];
                // Walk within the source until just past a delimiter or to its end.
                loop {
                    let (_, o) = owner[cut];
                    cut += 1;
                    if sources[s][o] == delim || cut == starts[s + 1] {
                        break;
                    }
                }
            }
            if cut >= total {
                break;
            }
            cuts.push(cut);
        }
        let mut out: Vec<Row> = Vec::new();
        let mut start = 0;
        for (w, end) in cuts.into_iter().chain(std::iter::once(total)).enumerate() {
            for &(s, o) in &owner[start..end] {
                match out.last_mut() {
                    Some(row) if row.0 == w as u64 && row.1 == s as u64 => {
                        row.3 += 1;
                        row.4 += 1;
                    }
                    _ => out.push((w as u64, s as u64, o as u64, o as u64 + 1, 1)),
                }
            }
            start = end;
        }
        out
    }

    #[test]
    fn parts_zero_gives_an_empty_plan() {
        let none: [&[u8]; 0] = [];
        assert_eq!(partition_files(&none, 0, b'\n').unwrap(), []);
        assert_eq!(partition_files(&[&b"a\n"[..], b"", b"bb\ncc"], 0, b'\n').unwrap(), []);
        assert_eq!(partition_files(&[&[b'\n'; 1000][..]], 0, 0).unwrap(), []);
    }

    #[test]
    fn no_sources_or_all_empty_gives_no_rows() {
        let none: [&[u8]; 0] = [];
        assert!(partition_files(&none, 3, b'\n').unwrap().is_empty());
        assert!(partition_files(&[b"", b""], 3, b'\n').unwrap().is_empty());
    }

    #[test]
    fn a_target_on_a_file_boundary_is_kept() {
        // total 8, parts 2: target 4 is the boundary between the sources.
        let r = partition_files(&[&b"aaaa"[..], b"bb\nb"], 2, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 4, 4), (1, 1, 0, 4, 4)]);
    }

    #[test]
    fn a_target_inside_a_source_moves_to_the_next_delimiter_or_source_eof() {
        // total 12, parts 2: target 6 lies in source 0 ("aa\nbbbbbbb", no delimiter after 6).
        let r = partition_files(&[&b"aa\nbbbbbbb"[..], b"c\n"], 2, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 10, 10), (1, 1, 0, 2, 2)]);
        // total 12, parts 3: targets 4 and 8 in source 0, just after delimiters: not kept.
        let r = partition_files(&[b"aaa\nbbb\nccc\n"], 3, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 8, 8), (1, 0, 8, 12, 4)]);
    }

    #[test]
    fn a_worker_may_span_several_sources_and_empty_sources_give_no_rows() {
        let r = partition_files(&[&b"a\n"[..], b"", b"b\n", b"cccccc\n"], 2, b'\n').unwrap();
        // total 11, target 5 lands in source 3 at local 1: cut at its end (7).
        assert_eq!(rows(&r), [(0, 0, 0, 2, 2), (0, 2, 0, 2, 2), (0, 3, 0, 7, 7)]);
    }

    #[test]
    fn duplicate_sources_are_distinct() {
        let a: &[u8] = b"x\ny\n";
        let r = partition_files(&[a, a], 2, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 4, 4), (1, 1, 0, 4, 4)]);
    }

    #[test]
    fn giant_records_compact_worker_indices() {
        let big = vec![b'x'; 100];
        let r = partition_files(&[big.as_slice(), b"a\nb\n"], 8, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 100, 100), (1, 1, 0, 4, 4)]);
    }

    #[test]
    fn more_parts_than_bytes_works() {
        let r = partition_files(&[&b"a\n"[..], b"\n"], 1000, b'\n').unwrap();
        assert_eq!(rows(&r), [(0, 0, 0, 2, 2), (1, 1, 0, 1, 1)]);
    }

    fn source() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(Vec::new()),
            prop::collection::vec(prop::sample::select(vec![b'a', b'\n', 0u8]), 0..60),
            (1usize..300).prop_map(|n| vec![b'x'; n]),
        ]
    }

    proptest! {
        #[test]
        fn planner_matches_naive(
            sources in prop::collection::vec(source(), 0..6),
            parts in 1usize..80,
            nul in any::<bool>(),
        ) {
            let delim = if nul { 0 } else { b'\n' };
            let plan = partition_files(&sources, parts, delim).unwrap();
            prop_assert_eq!(rows(&plan), naive(&sources, parts, delim));
            // Rows are ordered by worker then source, workers are compact, and every row
            // ends at a delimiter or its source's end.
            let mut prev: Option<(u64, u64)> = None;
            for r in &plan {
                if let Some((w, s)) = prev {
                    prop_assert!(r.worker == w && r.source > s || r.worker == w + 1);
                } else {
                    prop_assert_eq!(r.worker, 0);
                }
                let src = &sources[r.source as usize];
                prop_assert!(r.end as usize == src.len() || src[r.end as usize - 1] == delim);
                prev = Some((r.worker, r.source));
            }
        }
    }
}
