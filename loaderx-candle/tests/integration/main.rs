//! Integration tests of loaderx-candle: one binary, one module per subject.

mod common;
mod dtype;
mod loader;
mod tensor;
mod train;
