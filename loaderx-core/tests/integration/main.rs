//! Integration tests of `loaderx-core`, one binary (one link step) with a module per subject.

mod bad_inputs;
mod common;
mod convert;
mod crash;
mod dataset;
mod loader;
mod mixtures;
mod packing;
mod passes;
mod ragged_loader;
mod store;
mod v2;
mod views;
