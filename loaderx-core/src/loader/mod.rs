//! The endless, step-based [`DataLoader`].
//!
//! By default there are no epochs and no final partial batch: step `s` is a pure function of the
//! sampler config and `s`, so resuming is starting at step `s`. A finite loader
//! ([`LoaderBuilder::pass`]) runs exact passes instead (every record once per epoch, a
//! partial last batch unless `drop_last`), as pure in `(seed, epoch, step)`. Each step gathers every named stream at
//! the same indices (record `i` of every stream lands in the same row), runs the transform on a
//! prefetch thread, and is delivered in step order whichever thread finishes first.
//!
//! Prefetch threads claim the next step from a shared counter, so a thread that is slowed down
//! (sharing its core with the consumer, say) holds up only its own step while the others take
//! the rest; finished steps wait in a reorder window until the consumer reaches them. At most
//! `threads * (prefetch + 1)` steps are claimed and not yet delivered.
//!
//! | module | job |
//! | --- | --- |
//! | `builder` | [`LoaderBuilder`], [`LoaderState`] and the data fingerprint |
//! | `mixture` | [`LoaderBuilder::mixture`]: weighted sources, each stream concatenated |
//! | `chosen` | the order a builder's setters chose, one of them, and why each stands alone |
//! | `data_loader` | [`DataLoader`]: one step = gather every stream + the transform |
//! | `batch` | [`Batch`] and the pool that recycles its buffers |
//! | `prefetch` | [`Prefetcher`]: threads producing steps in order, for any per-step function |
//! | `window` | the reorder window between the prefetch threads and the consumer |
//! | `order` | [`Order`]: which records each step reads, one choice; [`Indexer`]: a state's order made runnable; the saved shape of a state |
//! | `bucket` | length bucketing: batches of similar lengths within a window of steps |
//! | `ring` | [`SlotRing`]: reusable buffers handed off with a completion fence (device staging) |
//! | `staged` | staged loaders: steps gathered straight into a ring's slots, then a stage function |
//! | `pack` | sequence packing: [`Pack`], the planner and its cursor |
//! | `launch` | [`Launch`]: rank and world from torchrun's or Slurm's environment |
//! | `adapter` | the hooks framework adapters build their own loaders from (`loaderx_core::adapter`) |

pub(crate) mod adapter;
mod batch;
mod bucket;
mod build;
mod builder;
mod chosen;
mod data_loader;
mod launch;
mod mixture;
mod order;
mod pack;
mod prefetch;
mod ring;
mod staged;
mod state;
mod stream;
mod window;

pub use batch::{Batch, LentArray};
pub use bucket::BucketConfig;
pub use builder::LoaderBuilder;
pub use data_loader::{BoxError, DataLoader, Stopper};
pub use launch::Launch;
pub use order::{Indexer, Order};
pub use pack::{Pack, PackConfig, PackCursor};
pub use prefetch::Prefetcher;
pub use ring::{Fence, Lease, SlotRing};
pub use staged::{SlotBuffers, Staged, StagedStream};
pub use state::{LoaderState, Pass};
pub use stream::StreamData;
