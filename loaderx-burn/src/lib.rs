//! burn 0.22 integration for loaderx.
#![forbid(unsafe_code)]

pub use loaderx_core;
