//! `partition` against a naive oracle: every ideal target walked forward byte by byte.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The obvious planner, written from the documentation of `partition`: the cut for target `t`
/// goes just after the first delimiter at an index `>= t` (the target byte itself counts, so a
/// target on a record start moves to that record's end), or to EOF, which ends planning; a
/// target at or before the previous cut is skipped.
fn oracle(data: &[u8], parts: usize, delim: u8) -> Vec<(u64, u64)> {
    let len = data.len();
    let mut cuts: Vec<usize> = Vec::new();
    for i in 1..parts {
        let target = len * i / parts;
        if target == 0 || target <= cuts.last().copied().unwrap_or(0) {
            continue;
        }
        let mut p = target;
        while p < len && data[p] != delim {
            p += 1;
        }
        let cut = if p < len { p + 1 } else { len };
        if cut >= len {
            break;
        }
        cuts.push(cut);
    }
    let mut out = Vec::new();
    let mut start = 0;
    for end in cuts.into_iter().chain((len > 0).then_some(len)) {
        out.push((start as u64, end as u64));
        start = end;
    }
    out
}

fuzz_target!(|input: &[u8]| {
    let Some((&[p, delim], data)) = input.split_first_chunk::<2>() else { return };
    // Part counts up to 255, and past the length of the data.
    let parts = usize::from(p);
    // Any input plans without an error; 0 parts plan nothing (mmap-chunker's library API).
    let got = loaderx_core::framing::partition(data, parts, delim).expect("a plan");
    if parts == 0 {
        assert!(got.is_empty());
        return;
    }
    let plan: Vec<(u64, u64)> = got.iter().map(|r| (r.start, r.end)).collect();
    for (i, r) in got.iter().enumerate() {
        assert_eq!((r.index, r.length), (i as u64, r.end - r.start));
    }
    assert_eq!(plan, oracle(data, parts, delim), "parts {parts} delim {delim} len {}", data.len());
});
