//! Integration tests of `loaderx-burn` against burn 0.22's own contracts, one binary with a
//! module per subject.

mod common;
mod dataset;
mod first_hour;
mod item_store;
mod loader;
mod orders;
mod tokens;
mod train;
mod typed;
