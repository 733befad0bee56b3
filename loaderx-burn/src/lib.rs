//! burn 0.22 integration for loaderx.
//!
//! - [`StepLoader`]: a native burn `DataLoader<O>` driven by loaderx's endless, step-based loader:
//!   whole-batch gathers on prefetch threads, batches in step order, one global step across
//!   epochs, `progress()` in items, `to_device`, `slice` as loaderx sharding, resumable from a
//!   saved [`LoaderState`](loaderx_core::LoaderState). Bring a burn `Batcher` and any burn
//!   `Dataset` ([`StepLoaderBuilder::build_batcher`]), a transform of loaderx batches
//!   ([`StepLoaderBuilder::build_with`]), or take the dense fast path ([`DenseBatch`]: one
//!   `TensorData` per stream adopting the gathered buffer).
//! - burn `Dataset`s over loaderx stores whose `get_many` is one batched gather:
//!   [`DenseItems`] (dense records as `Vec<T>`), [`MnistItems`], and [`ItemStore`], serde items as
//!   MessagePack records, the fast stand-in for `SqliteDataset`, with a one-call migration from
//!   any burn dataset ([`ItemStore::from_dataset`]); [`msgpack`] is its decoder, a serde
//!   `Deserializer` that gives exactly `rmp_serde::from_slice`'s values and errors, faster.
//! - The burn book's MNIST guide types: [`MnistItem`], [`MnistBatch`], [`MnistBatcher`].
//!
//! It is not a training framework: models, learners and optimisers are burn's own, re-exported
//! as [`burn`].
//!
//! # Example
//! ```
//! # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
//! use burn::data::dataloader::DataLoader;
//! use burn::data::dataset::Dataset;
//! use loaderx::burn::{ItemStore, StepLoaderBuilder};
//! use loaderx::WriteOptions;
//!
//! #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
//! struct Pair { x: f32, y: f32 }
//!
//! let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-lib-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let mut w = ItemStore::<Pair>::create(dir.join("pairs"), WriteOptions::new())?;
//! for i in 0..100 {
//!     w.push(&Pair { x: i as f32, y: 2.0 * i as f32 })?;
//! }
//! let store = w.finish()?;
//! // A burn batcher is any `Fn(Vec<I>, &Device) -> O` wrapped in a type; here a plain one.
//! struct Sum;
//! impl burn::data::dataloader::batcher::Batcher<Pair, f32> for Sum {
//!     fn batch(&self, items: Vec<Pair>, _: &burn::tensor::Device) -> f32 {
//!         items.iter().map(|p| p.y - 2.0 * p.x).sum()
//!     }
//! }
//! let loader = StepLoaderBuilder::new().batch_size(10).build_batcher(store, Sum)?;
//! assert_eq!(loader.num_items(), 100);
//! for residual in loader.iter() {
//!     assert_eq!(residual?, 0.0);
//! }
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//! - `train`: burn's `train` (learner, metrics), `autodiff` and the Flex CPU backend with SIMD
//!   and rayon, for the `mnist_burn` example.
//! - `sqlite`: burn's `SqliteDataset`, for migrating from it ([`ItemStore::from_dataset`]) and
//!   the side-by-side bench.
#![forbid(unsafe_code)]

mod builder;
mod dataset;
mod dense;
mod error;
mod item_store;
mod loader;
mod mnist;
mod typed;

pub use builder::DataLoaderBuilder;
pub use dataset::{DenseItems, Zip};
pub use dense::{DenseBatch, tensor_data};
pub use error::{Error, Result};
pub use item_store::{ItemStore, ItemWriter, msgpack};
pub use loader::{StepLoader, StepLoaderBuilder};
pub use typed::{Field, FieldKind, TypedBatch, check as check_typed};

/// What [`typed_batch!`] expands to names (burn's tensor types), not a public API.
#[doc(hidden)]
pub mod __private {
    pub use burn::tensor::{Bool, Int, Tensor};
}
pub use loaderx_core::convert::MnistSplit;
pub use mnist::{
    MNIST_MEAN, MNIST_SIDE, MNIST_STD, MnistBatch, MnistBatcher, MnistDataset, MnistItem, MnistItems,
};

/// The common imports of a burn program: `use loaderx::burn::prelude::*;`. loaderx's own loader
/// is [`LoaderBuilder`](loaderx_core::LoaderBuilder) here (its `DataLoader` would clash with
/// burn's trait of that name, which this prelude brings in for its methods, unnamed).
pub mod prelude {
    pub use burn::data::dataloader::DataLoader as _;
    pub use burn::data::dataset::Dataset as _;
    pub use loaderx_core::{
        BoxError, Codec, DenseSource, LoaderBuilder, LoaderState, Pad, Pass, RaggedSource, SamplerMode,
        Selection, WriteOptions,
    };

    pub use crate::{
        DataLoaderBuilder, DenseBatch, DenseItems, ItemStore, MnistBatch, MnistBatcher, MnistDataset,
        MnistItem, MnistItems, StepLoader, StepLoaderBuilder, TypedBatch, Zip, typed_batch,
    };
}

/// burn itself, re-exported so users (and the `loaderx` facade) name one version of it.
pub use burn;
pub use loaderx_core;
