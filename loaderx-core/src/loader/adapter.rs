//! What framework adapters (loaderx-burn, loaderx-candle) build their own loaders from: a
//! builder's settings checked into a [`LoaderState`] without building a loader, its thread
//! settings, the data fingerprint of a framework's dataset. Re-exported as `loaderx_core::adapter`.

use super::builder::LoaderBuilder;
use super::state::LoaderState;
use crate::Result;

/// `builder`, or the first refusal of one of its chained setters
/// ([`LoaderBuilder::pad`], [`pack`](LoaderBuilder::pack), [`bucket`](LoaderBuilder::bucket),
/// [`open_stream`](LoaderBuilder::open_stream)) as it was made: what every `build` checks first.
///
/// # Errors
/// The refusal ([`Error::Config`](crate::Error::Config) from `pad`, `pack` and `bucket`,
/// `open_stream`'s own error).
pub fn checked(builder: LoaderBuilder) -> Result<LoaderBuilder> {
    builder.checked()
}

/// The state a loader built from `builder` starts in: the streams checked (at least one, the
/// same length, distinct names), their [data fingerprint](LoaderBuilder::data_fingerprint)
/// taken, and [`plan`] applied. An adapter running its own producers over these streams starts
/// from it.
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) for no streams, streams of different lengths or
/// with the same name, more records than `u32` indices, invalid sampler parameters, a refused
/// setter, or a restored state whose fingerprint does not match the streams.
pub fn resolve(builder: &LoaderBuilder) -> Result<LoaderState> {
    builder.resolve()
}

/// Where a loader over `len` records of data with `fingerprint` ([`data_fingerprint`]) starts:
/// `builder`'s restored state when it has one, else its sampler settings at its start step.
/// An adapter feeding the loader's sampler from its own data (a framework's dataset) starts
/// from this.
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) when a restored state belongs to other data
/// (another fingerprint or length), the sampler parameters are invalid or a setter was refused.
pub fn plan(builder: &LoaderBuilder, len: u32, fingerprint: u64) -> Result<LoaderState> {
    builder.plan(len, fingerprint)
}

/// (name, dtype, item shape) of every dense array a batch of a loader built from `builder`
/// holds ([`DataLoader::streams`](crate::DataLoader::streams)), known before the loader starts:
/// what an adapter checks a typed batch against when it is built. A padded stream's length is 0
/// when it is padded to each batch's longest record.
///
/// # Errors
/// As [`resolve`].
pub fn batch_streams(builder: &LoaderBuilder) -> Result<Vec<(String, crate::DType, Vec<usize>)>> {
    let state = builder.resolve()?;
    let streams = builder.clone().into_streams()?;
    let indexer = state.indexer(&streams)?;
    Ok(super::data_loader::batch_meta(&streams, &indexer))
}

/// The ragged streams of `builder` that reach a batch unpadded (no [`pad`](LoaderBuilder::pad),
/// not the packed stream): records of different lengths, which no tensor holds, so an adapter
/// that makes tensors of every stream names them instead of saying they are missing.
pub fn unpadded_ragged(builder: &LoaderBuilder) -> Vec<String> {
    let packed = match &builder.order {
        super::chosen::Chosen::Pack(name, _) => Some(name.as_str()),
        _ => None,
    };
    builder
        .streams
        .iter()
        .filter(|(name, data)| {
            matches!(data, super::stream::StreamData::Ragged(_, None)) && Some(name.as_str()) != packed
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The number of prefetch threads a loader built from `builder` runs.
pub fn thread_count(builder: &LoaderBuilder) -> usize {
    builder.threads
}

/// Batches per prefetch thread that may be ready ahead of the consumer
/// ([`LoaderBuilder::prefetch`]).
pub fn prefetch_depth(builder: &LoaderBuilder) -> usize {
    builder.prefetch
}

/// The data fingerprint of a description of data (64-bit FNV-1a of `description`): what
/// [`LoaderState::fingerprint`] holds. [`LoaderBuilder::data_fingerprint`] describes the
/// builder's streams; an adapter over other data describes it in its own words (a dataset's
/// length, say).
pub fn data_fingerprint(description: &[u8]) -> u64 {
    crate::format::hash64(description)
}
