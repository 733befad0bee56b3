//! Criterion-specific helpers shared by the benches: where criterion writes its estimates and
//! reading its medians back. The workloads and the interleaved side-by-side timing are
//! `loaderx_bench::workloads` and `loaderx_bench::timing`, shared with `loaderx bench`.

#![allow(dead_code)]

use std::path::PathBuf;

/// Where criterion writes its estimates (and where [`median_ns`] reads them).
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("criterion")
}

/// The median time in nanoseconds criterion measured for `group/id`, if it ran.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir().join(group).join(id).join("new").join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let at = text.find("\"median\"")?;
    let rest = &text[at..];
    let pe = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let num: String = rest[pe..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
        .collect();
    num.parse().ok()
}
