//! Integration tests of `loaderx-core`, one binary (one link step) with a module per subject.

mod common;
mod convert;
mod dataset;
mod loader;
mod store;
