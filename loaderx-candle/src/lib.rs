//! candle-core 0.11 integration for loaderx.
#![forbid(unsafe_code)]

pub use loaderx_core;
