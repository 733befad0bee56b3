//! loaderx is the data layer for Rust training loops on [burn](https://burn.dev) and
//! [candle](https://github.com/huggingface/candle): a persistent record store (**Zrecord**,
//! [`Store`]) that gathers batches straight into the memory a tensor owns and checksums every
//! record; a [`Sampler`] whose batches are a pure function of (seed, step), so a run resumes from
//! a step number on any number of machines; an endless, step-based [`DataLoader`] (or
//! exactly-once passes) with mixtures, packing and padding; converters ([`convert`]) from `.npy`,
//! safetensors, IDX, JSONL, Parquet and image folders; and adapters that hand batches to burn
//! (`loaderx::burn`, feature `burn`) and candle (`loaderx::candle`, feature `candle`) as tensors.
//!
//! Encoded images (JPEG, PNG, WebP) are kept as they ship and decoded and augmented on the
//! loader's threads (`loaderx::vision`, feature `images`). It is not a dataframe library or a
//! key-value store: records are addressed by position.
//!
//! ```
//! use loaderx::{Codec, DenseSource, LoaderBuilder, Store, StoreOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A store: records appended in batches, gathered in any order.
//! let dir = std::env::temp_dir().join(format!("loaderx-doc-{}", std::process::id()));
//! let store = Store::create(&dir, StoreOptions::new().overwrite(true))?;
//! store.append(&[b"alpha".as_slice(), b"beta", b"gamma"], Codec::Zstd)?;
//! assert_eq!(store.gather(&[2, 0])?, vec![b"gamma".to_vec(), b"alpha".to_vec()]);
//! drop(store);
//! std::fs::remove_dir_all(&dir)?;
//!
//! // A loader: batches of named streams, step by step; the same seed gives the same batches.
//! let x = DenseSource::from_vec(vec![2], (0..200).map(|i| i as f32).collect::<Vec<f32>>())?;
//! let mut loader = LoaderBuilder::new().stream("x", x).batch_size(16).seed(7).build()?;
//! let batch = loader.next_batch()?.expect("an endless loader always has one");
//! assert_eq!(batch.get("x").map(|a| a.shape().to_vec()), Some(vec![16, 2]));
//! # Ok(())
//! # }
//! ```
//!
//! Crate features: `burn`, `burn-flex`, `burn-train`, `burn-sqlite` (the burn 0.22 adapter and
//! its backends), `candle`, `candle-nn`, `candle-cuda` (the candle-core 0.11 adapter), `parquet`,
//! `images` (image converters and `vision`), `remote` (stores on S3-compatible object storage).
//! The user guide is `docs/guide` in the repository (an mdBook).
#![forbid(unsafe_code)]
// README.md's and the user guide's code blocks are compiled and run as doctests (`cargo
// test-all` turns on both adapters' features), so a snippet there cannot rot.
#![cfg_attr(all(doctest, feature = "burn-train", feature = "candle-nn"), doc = include_str!("../README.md"))]

pub use loaderx_core::*;

/// burn 0.22 integration (feature `burn`).
#[cfg(feature = "burn")]
pub use loaderx_burn as burn;

/// candle-core 0.11 integration (feature `candle`).
#[cfg(feature = "candle")]
pub use loaderx_candle as candle;

/// The user guide's chapters, as doctests (each chapter's Rust blocks compiled and run).
#[cfg(all(doctest, feature = "burn-train", feature = "candle-nn"))]
mod guide {
    #[doc = include_str!("../docs/guide/src/getting-started.md")]
    struct GettingStarted;
    #[doc = include_str!("../docs/guide/src/stores.md")]
    struct Stores;
    #[doc = include_str!("../docs/guide/src/loader.md")]
    struct Loader;
    #[doc = include_str!("../docs/guide/src/tokens.md")]
    struct Tokens;
    #[doc = include_str!("../docs/guide/src/burn.md")]
    struct Burn;
    #[doc = include_str!("../docs/guide/src/candle.md")]
    struct Candle;
    #[doc = include_str!("../docs/guide/src/larger-than-memory.md")]
    struct LargerThanMemory;
    #[doc = include_str!("../docs/guide/src/remote.md")]
    struct Remote;
    #[doc = include_str!("../docs/guide/src/cli.md")]
    struct Cli;
    #[doc = include_str!("../docs/guide/src/reliability.md")]
    struct Reliability;
}
