//! Integration tests of loaderx-candle: one binary, one module per subject.

mod common;
#[cfg(feature = "cuda")]
mod cuda;
mod dtype;
mod loader;
mod tensor;
mod train;
