//! loaderx: a persistent record store, a stateless resumable sampler and an endless data loader,
//! with adapters for burn (`burn` feature) and candle (`candle` feature).
#![forbid(unsafe_code)]
// README.md's code blocks are compiled and run as doctests (`cargo test-all` turns on both
// adapters' features), so a snippet there cannot rot.
#![cfg_attr(all(doctest, feature = "burn-train", feature = "candle-nn"), doc = include_str!("../README.md"))]

pub use loaderx_core::*;

/// burn 0.22 integration (feature `burn`).
#[cfg(feature = "burn")]
pub use loaderx_burn as burn;

/// candle-core 0.11 integration (feature `candle`).
#[cfg(feature = "candle")]
pub use loaderx_candle as candle;
