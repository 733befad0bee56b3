//! [`LoaderBuilder::mixture`]: one builder over weighted sources, each stream the sources' same
//! stream concatenated.

use super::builder::LoaderBuilder;
use super::chosen::Chosen;
use super::stream::StreamData;
use crate::dataset::{DenseSource, RaggedSource};
use crate::{Error, Result};

impl LoaderBuilder {
    /// A builder over a weighted mixture of `sources`: each a builder with streams of the same
    /// names, dtypes and shapes as the others (its own selections applied), each with a
    /// non-negative weight. Row `r` of step `s` reads a source and a record chosen from
    /// (seed, `s`, `r`) alone: the sources are dealt rows in proportion to their weights (within
    /// `k + 1 + W / 2^16` rows over any `W` consecutive global rows, for `k` sources), and each
    /// cycles through its own keyed shuffles independently ([`Mixture`](crate::Mixture)). Batch
    /// size, seed, sharding, threads and resume are set on the returned builder as on any other;
    /// the sources' own such settings are not used. A rank's rows arrive grouped by source.
    ///
    /// # Errors
    /// [`Error::Config`] for no sources, a source without streams or with streams of
    /// different lengths, a negative, NaN or infinite weight, all weights zero, streams whose
    /// names differ between sources, or a ragged stream padded differently in two sources;
    /// [`Error::Schema`] naming the first source whose stream has another dtype or shape; a
    /// source's setter's refusal ([`adapter::checked`](crate::adapter::checked)).
    pub fn mixture(sources: Vec<(f64, LoaderBuilder)>) -> Result<LoaderBuilder> {
        if sources.is_empty() {
            return Err(Error::Config {
                what: "mixture",
                reason: "a mixture needs at least one source".into(),
            });
        }
        let mut weights = Vec::with_capacity(sources.len());
        let mut lens = Vec::with_capacity(sources.len());
        let mut per_source: Vec<Vec<(String, StreamData)>> = Vec::with_capacity(sources.len());
        for (j, (w, b)) in sources.into_iter().enumerate() {
            let b = b.checked()?;
            if !w.is_finite() || w < 0.0 {
                return Err(Error::Config {
                    what: "mixture",
                    reason: format!("mixture weight {j} is {w}: weights are finite and non-negative"),
                });
            }
            let mut streams = b.selected_streams()?;
            let Some((_, first)) = streams.first() else {
                return Err(Error::Config {
                    what: "mixture",
                    reason: format!("mixture source {j} has no streams"),
                });
            };
            let len = first.len();
            if let Some((name, s)) = streams.iter().find(|(_, s)| s.len() != len) {
                return Err(Error::Config {
                    what: "mixture",
                    reason: format!(
                        "mixture source {j}: stream {name:?} has {} records, {:?} has {len}",
                        s.len(),
                        streams[0].0
                    ),
                });
            }
            streams.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(first) = per_source.first() {
                let names = |v: &[(String, StreamData)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
                if names(first) != names(&streams) {
                    return Err(Error::Config {
                        what: "mixture",
                        reason: format!(
                            "mixture source {j} has streams {:?}, source 0 {:?}",
                            names(&streams),
                            names(first)
                        ),
                    });
                }
            }
            weights.push(w);
            lens.push(u32::try_from(len).map_err(|_| Error::Config {
                what: "mixture",
                reason: format!("mixture source {j} has more records than u32 indices"),
            })?);
            per_source.push(streams);
        }
        if weights.iter().all(|&w| w == 0.0) {
            return Err(Error::Config { what: "mixture", reason: "every mixture weight is zero".into() });
        }
        let mut out = LoaderBuilder::default();
        for (k, (name, first)) in per_source[0].iter().enumerate() {
            let stream = concat_column(name, first, per_source.iter().map(|s| s[k].1.clone()))?;
            out.streams.push((name.clone(), stream));
        }
        out.order = Chosen::Mixture { weights, lens };
        Ok(out)
    }
}

/// One stream of a mixture: the same stream of every source (`first` the first source's),
/// concatenated; the sources must hold it alike (dense, or ragged padded the same way).
fn concat_column(
    name: &str,
    first: &StreamData,
    column: impl Iterator<Item = StreamData>,
) -> Result<StreamData> {
    Ok(match first {
        StreamData::Dense(_) => {
            let parts = column
                .map(|s| match s {
                    StreamData::Dense(d) => Ok(d),
                    _ => Err(Error::Config {
                        what: "mixture",
                        reason: format!("stream {name:?} is dense in one source, not in another"),
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            StreamData::Dense(DenseSource::concat(parts)?)
        }
        #[cfg(feature = "images")]
        StreamData::Image(_, pipeline) => {
            let parts = column
                .map(|s| match s {
                    StreamData::Image(r, p) if p == *pipeline => Ok(r),
                    // Naming what differs (look 141, L141-2: sources differing only in
                    // skipping bad images were said to be transformed differently).
                    StreamData::Image(_, p) if p.skips_bad() != pipeline.skips_bad() => Err(Error::Config {
                        what: "mixture",
                        reason: format!(
                            "image stream {name:?} skips bad images in one source, not in another"
                        ),
                    }),
                    StreamData::Image(..) => Err(Error::Config {
                        what: "mixture",
                        reason: format!("image stream {name:?} is transformed differently in two sources"),
                    }),
                    _ => Err(Error::Config {
                        what: "mixture",
                        reason: format!("stream {name:?} is an image stream in one source, not in another"),
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            StreamData::Image(RaggedSource::concat(parts)?, std::sync::Arc::clone(pipeline))
        }
        StreamData::Ragged(_, pad) => {
            let parts = column
                .map(|s| match s {
                    StreamData::Ragged(r, p) if p == *pad => Ok(r),
                    StreamData::Ragged(..) => Err(Error::Config {
                        what: "mixture",
                        reason: format!("ragged stream {name:?} is padded differently in two sources"),
                    }),
                    _ => Err(Error::Config {
                        what: "mixture",
                        reason: format!("stream {name:?} is ragged in one source, not in another"),
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            StreamData::Ragged(RaggedSource::concat(parts)?, *pad)
        }
    })
}
