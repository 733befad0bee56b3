//! Integration tests of `loaderx-core`, one binary (one link step) with a module per subject.

mod after_commit;
mod bad_inputs;
mod causes;
mod cold;
mod common;
mod compact;
mod concurrency;
mod convert;
mod convert_formats;
mod convert_hostile;
mod crash;
mod dataset;
#[cfg(feature = "images")]
mod encoded_images;
mod faults;
mod faults_convert;
mod faults_manifest;
mod faults_sync;
mod fixed_stride;
#[cfg(feature = "images")]
mod images;
#[cfg(all(unix, feature = "images"))]
mod images_asides;
mod layering;
mod loader;
mod mixtures;
mod moved;
mod packing;
#[cfg(feature = "parquet")]
mod parquet;
#[cfg(feature = "parquet")]
mod parquet_outputs;
mod parts;
mod passes;
mod ragged_loader;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod remote_hostile;
#[cfg(feature = "remote")]
mod remote_reads;
#[cfg(feature = "remote")]
mod remote_sets;
#[cfg(feature = "remote")]
mod remote_sets_push;
mod safety;
mod safety_files;
mod safety_locks;
mod saved_states;
mod staged;
mod stitch_races;
mod store;
mod store_compaction;
mod store_corruption;
mod store_dict;
mod tokens;
mod tokens_safety;
mod v2;
mod views;
