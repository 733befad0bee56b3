//! [`StreamData`]: the data of one loader stream, and the fingerprint of a loader's streams.

use super::adapter::data_fingerprint;
use crate::dataset::{DenseSource, Pad, RaggedSource, Selection};
use crate::{DType, Result};

/// The data of one loader stream: a dense source, or a ragged one with how it is padded (or
/// not: its batches then carry [`RaggedArray`](crate::RaggedArray)s).
#[derive(Debug, Clone)]
pub enum StreamData {
    /// Fixed-shape records.
    Dense(DenseSource),
    /// Variable-length records, padded on the prefetch threads when a [`Pad`] is given.
    Ragged(RaggedSource, Option<Pad>),
    /// Encoded images (their files' bytes), decoded and augmented on the prefetch threads into
    /// dense items ([`LoaderBuilder::image_stream`](crate::LoaderBuilder::image_stream)).
    #[cfg(feature = "images")]
    Image(RaggedSource, std::sync::Arc<crate::vision::ImagePipeline>),
}

impl StreamData {
    /// Records in the stream.
    pub fn len(&self) -> usize {
        match self {
            StreamData::Dense(d) => d.len(),
            StreamData::Ragged(r, _) => r.len(),
            #[cfg(feature = "images")]
            StreamData::Image(r, _) => r.len(),
        }
    }

    /// True when the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            StreamData::Dense(d) => d.dtype(),
            StreamData::Ragged(r, _) => r.dtype(),
            #[cfg(feature = "images")]
            StreamData::Image(_, p) => p.dtype(),
        }
    }

    /// The item shape (dense) or row shape (ragged); an image stream's records are bytes (`[]`:
    /// its items' shape is its pipeline's).
    pub fn shape(&self) -> &[usize] {
        match self {
            StreamData::Dense(d) => d.item_shape(),
            StreamData::Ragged(r, _) => r.row_shape(),
            #[cfg(feature = "images")]
            StreamData::Image(r, _) => r.row_shape(),
        }
    }

    /// Whether hints of steps to come may help (a local store not known to be resident).
    pub(super) fn wants_hints(&self) -> bool {
        match self {
            StreamData::Dense(d) => d.wants_hints(),
            StreamData::Ragged(r, _) => r.wants_hints(),
            #[cfg(feature = "images")]
            StreamData::Image(r, _) => r.wants_hints(),
        }
    }

    /// Asks for the pages of the records at `indices`, to be gathered soon.
    pub(super) fn advise(&self, indices: &[u32]) -> Result<()> {
        match self {
            StreamData::Dense(d) => d.advise(indices),
            StreamData::Ragged(r, _) => r.advise(indices),
            #[cfg(feature = "images")]
            StreamData::Image(r, _) => r.advise(indices),
        }
    }

    pub(super) fn select(&self, s: &Selection) -> Result<StreamData> {
        Ok(match self {
            StreamData::Dense(d) => StreamData::Dense(d.select(s)?),
            StreamData::Ragged(r, p) => StreamData::Ragged(r.select(s)?, *p),
            #[cfg(feature = "images")]
            StreamData::Image(r, p) => StreamData::Image(r.select(s)?, std::sync::Arc::clone(p)),
        })
    }
}

/// The fingerprint of streams (names, kinds, dtypes, shapes, lengths).
pub(super) fn fingerprint_of(streams: &[(String, StreamData)]) -> u64 {
    let mut text = String::new();
    for (name, s) in streams {
        match s {
            // Dense streams' text is the same as before ragged streams and selections existed, so
            // saved states still restore.
            StreamData::Dense(d) => {
                text.push_str(&format!("{name}:{}:{:?}:{};", d.dtype(), d.item_shape(), d.len()))
            }
            StreamData::Ragged(r, p) => text.push_str(&format!(
                "{name}:ragged:{}:{:?}:{}:{:?};",
                r.dtype(),
                r.row_shape(),
                r.len(),
                p.map(|p| p.length)
            )),
            #[cfg(feature = "images")]
            StreamData::Image(r, p) => {
                text.push_str(&format!("{name}:image:{}:{:?}:{};", p.dtype(), p.item_shape(), r.len()))
            }
        }
    }
    data_fingerprint(text.as_bytes())
}
