//! `partition_files` against a naive oracle over the concatenated bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

type Row = (u64, u64, u64, u64);

/// The obvious planner, written from the documentation of `partition_files`: walk the logical
/// (concatenated) bytes one at a time.
fn oracle(sources: &[&[u8]], parts: usize, delim: u8) -> Vec<Row> {
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
        if target == 0 || target <= cuts.last().copied().unwrap_or(0) {
            continue;
        }
        let mut cut = target;
        if !starts.contains(&target) {
            // Inside a source: search from the cut itself for a delimiter, within the source.
            let (s, mut o) = owner[target];
            loop {
                let byte = sources[s][o];
                cut += 1;
                o += 1;
                if byte == delim || o == sources[s].len() {
                    break;
                }
            }
        }
        if cut >= total {
            break;
        }
        cuts.push(cut);
    }
    let mut rows = Vec::new();
    let mut start = 0;
    let ends: Vec<usize> = cuts.into_iter().chain((total > 0).then_some(total)).collect();
    for (worker, &end) in ends.iter().enumerate() {
        for (s, src) in sources.iter().enumerate() {
            let lo = start.max(starts[s]);
            let hi = end.min(starts[s] + src.len());
            if hi > lo {
                rows.push((worker as u64, s as u64, (lo - starts[s]) as u64, (hi - starts[s]) as u64));
            }
        }
        start = end;
    }
    rows
}

fuzz_target!(|input: &[u8]| {
    let Some((&[p, delim, sep], data)) = input.split_first_chunk::<3>() else { return };
    let parts = usize::from(p);
    // The input splits into sources at each `sep` byte (so empty sources occur).
    let sources: Vec<&[u8]> = data.split(|&b| b == sep).collect();
    // Any input plans without an error; 0 parts plan nothing (mmap-chunker's library API).
    let got = loaderx_core::framing::partition_files(&sources, parts, delim).expect("a plan");
    if parts == 0 {
        assert!(got.is_empty());
        return;
    }
    for r in &got {
        assert_eq!(r.length, r.end - r.start);
    }
    let plan: Vec<Row> = got.iter().map(|r| (r.worker, r.source, r.start, r.end)).collect();
    assert_eq!(plan, oracle(&sources, parts, delim), "parts {parts} delim {delim} sources {}", sources.len());
});
