//! The loaderx bench harness: the sampler, the store and the loader measured against their
//! baselines and physical ceilings, every contender in one process, on the same generated data
//! and the same indices. `loaderx bench` (loaderx-cli) parses its command line into [`Options`]
//! and calls [`run`]; the criterion benches of `loaderx` (`benches/`) draw their data from
//! [`workloads`] and time their side-by-side ratios with [`timing::interleaved_fixed`], so the
//! figures of both describe the same bytes.
//!
//! The machine this runs on is usually shared and noisy, so no ratio is a quotient of two
//! separately measured medians: contenders run in interleaved rounds ([`timing`]), the ratio is
//! taken per round, and the median over rounds is reported. Absolute figures are medians of the
//! per-round times. Data is generated into a temporary directory and read with a warm page cache.
//!
//! Modules: [`workloads`] (deterministic records, indices and data files), [`timing`]
//! (interleaved rounds, calibration), and, private to [`run`], the report (tables, JSON rows),
//! the plot (SVG), the machine table, the ceilings the layers share (memcpy and decompress-only)
//! and the per-layer measurements: sampler, store, loader and, with the `burn` and/or `candle`
//! features, the framework adapters.

#[cfg(any(feature = "burn", feature = "candle"))]
mod adapters;
mod ceiling;
mod cold;
mod format;
mod gather;
mod gather_numpy;
#[cfg(feature = "images")]
mod images;
#[cfg(any(feature = "parquet", feature = "images"))]
mod ingest;
mod loader;
mod machine;
mod plot;
mod report;
mod run;
mod sampler;
mod store;
pub mod timing;
mod tokens;
pub mod workloads;

pub use run::{Layer, Options, run};
