//! Integration tests of `loaderx-core`, one binary (one link step) with a module per subject.

mod common;
mod loader;
mod store;
