//! Tests of the built `loaderx` binary, one binary (one link step) with a module per subject.

mod bad_inputs;
mod bench;
mod convert;
mod guide;
#[cfg(any(feature = "parquet", feature = "images"))]
mod ingest;
mod jsonl;
mod partition;
mod parts;
#[cfg(feature = "remote")]
mod remote;
mod safety;
mod tokens;
