//! Integration tests of `loaderx-core`, one binary (one link step) with a module per subject.

mod bad_inputs;
mod causes;
mod common;
mod convert;
mod crash;
mod dataset;
#[cfg(feature = "images")]
mod images;
mod layering;
mod loader;
mod mixtures;
mod packing;
#[cfg(feature = "parquet")]
mod parquet;
mod passes;
mod ragged_loader;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod remote_hostile;
mod saved_states;
mod staged;
mod store;
mod v2;
mod views;
