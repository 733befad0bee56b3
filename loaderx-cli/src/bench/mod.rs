//! `loaderx bench`: the sampler, the store and the loader measured against their baselines and
//! physical ceilings, every contender in this one process, on the same generated data and the
//! same indices.
//!
//! The machine this runs on is usually shared and noisy, so no ratio is a quotient of two
//! separately measured medians: contenders run in interleaved rounds ([`timing`]), the ratio is
//! taken per round, and the median over rounds is reported. Absolute figures are medians of the
//! per-round times. Data is generated into a temporary directory and read with a warm page cache.
//!
//! The criterion benches under `benches/` keep their own copy of the interleaving and the
//! workload generators: they are a separate crate (`loaderx`), and moving the helpers would have
//! meant a shared crate for forty lines.

#[cfg(any(feature = "burn", feature = "candle"))]
mod adapters;
mod data;
mod loader;
mod machine;
mod plot;
mod report;
mod run;
mod sampler;
mod store;
mod timing;

pub(crate) use run::{BenchArgs, run};
