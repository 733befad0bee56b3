//! From a [`LoaderBuilder`] to a [`DataLoader`]: the settings checked into one plan (a
//! [`LoaderState`]), the streams selected, the loader built.

use std::sync::Arc;

use super::batch::Batch;
use super::builder::LoaderBuilder;
use super::chosen::{Chosen, MIXTURE_WHOLE, PACKED_ALONE};
use super::data_loader::{BoxError, DataLoader, Transform};
use super::order::Order;
use super::pack::PackConfig;
use super::state::LoaderState;
use super::stream::{StreamData, fingerprint_of};
use crate::sampler::{MixtureConfig, PassConfig, SamplerConfig};
use crate::{Error, Result};

impl LoaderBuilder {
    /// Builds a loader delivering [`Batch`]es.
    ///
    /// # Errors
    /// As [`LoaderBuilder::build_with`].
    pub fn build(self) -> Result<DataLoader<Batch>> {
        self.build_with(|b: Batch| Ok::<_, BoxError>(b))
    }

    /// [`LoaderBuilder::build_with`] for a transform whose error is any boxed error: `?` works on
    /// every error type inside it, and `Ok(x)` needs no type annotation.
    ///
    /// # Errors
    /// As [`LoaderBuilder::build_with`].
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{DataLoader, DenseSource};
    /// let x = DenseSource::from_vec(vec![2], vec![1f32; 40])?;
    /// let mut loader = DataLoader::builder().stream("x", x).batch_size(4).build_map(|mut b| {
    ///     let x = b.take("x").ok_or("no stream x")?.into_vec::<f32>()?;
    ///     Ok(x.iter().sum::<f32>())
    /// })?;
    /// assert_eq!(loader.next_batch()?, Some(8.0));
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn build_map<O, F>(self, transform: F) -> Result<DataLoader<O>>
    where
        O: Send + 'static,
        F: Fn(Batch) -> std::result::Result<O, BoxError> + Send + Sync + 'static,
    {
        self.build_with(transform)
    }

    /// Builds a loader whose prefetch threads run `transform` (the collate step) on each batch.
    ///
    /// # Errors
    /// As [`adapter::resolve`](crate::adapter::resolve), and [`Error::LoaderStopped`] when a thread cannot start.
    pub fn build_with<O, E, F>(self, transform: F) -> Result<DataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch) -> std::result::Result<O, E> + Send + Sync + 'static,
    {
        let transform: Transform<O> = Arc::new(move |b| transform(b).map_err(Into::into));
        DataLoader::start(self.checked()?, transform)
    }

    /// The state a loader built from this builder starts in: the streams checked (at least one,
    /// the same length, distinct names), their [data fingerprint](Self::data_fingerprint) taken, and
    /// [`plan`](Self::plan) applied. Adapters that run their own producers over these streams
    /// start from it without building a loader.
    ///
    /// # Errors
    /// [`Error::Config`] for no streams, streams of different lengths or with the same
    /// name, more records than `u32` indices, invalid sampler parameters, or a restored state
    /// whose fingerprint does not match the streams.
    pub(crate) fn resolve(&self) -> Result<LoaderState> {
        self.refusal()?;
        let streams = self.selected_streams()?;
        let Some((_, first)) = streams.first() else {
            return Err(Error::Config {
                what: "streams",
                reason: "a data loader needs at least one stream".into(),
            });
        };
        let len = first.len();
        if let Some((name, s)) = streams.iter().find(|(_, s)| s.len() != len) {
            return Err(Error::Config {
                what: "streams",
                reason: format!(
                    "stream {name:?} has {} records but stream {:?} has {len}; all streams must have the same length",
                    s.len(),
                    streams[0].0
                ),
            });
        }
        let mut names: Vec<&str> = self.streams.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config {
                what: "streams",
                reason: format!("two streams are named {:?}", w[0]),
            });
        }
        let len = u32::try_from(len)
            .map_err(|_| Error::Config { what: "streams", reason: "more records than u32 indices".into() })?;
        self.plan(len, fingerprint_of(&streams))
    }

    /// The streams with the [selection](Self::select) applied.
    pub(super) fn selected_streams(&self) -> Result<Vec<(String, StreamData)>> {
        let mut streams = self.streams.clone();
        for sel in &self.selections {
            streams = streams.into_iter().map(|(n, s)| Ok((n, s.select(sel)?))).collect::<Result<_>>()?;
        }
        Ok(streams)
    }

    /// How a restored state's data differ from these streams' (`len` records with `fingerprint`)
    /// and the builder's order; `None` when they are its own. A restored state's order is its own
    /// (a pass is not compared with the builder's `finite`); a mixture, packing or bucketing must
    /// be the builder's.
    fn other_data(&self, state: &LoaderState, len: u32, fingerprint: u64) -> Option<String> {
        let saved_len = match state.order.pass() {
            Some(p) if state.sampler.len == len => p.len,
            _ => state.sampler.len,
        };
        if saved_len != len {
            Some(format!("it was saved over {saved_len} records, and these streams hold {len}"))
        } else if state.fingerprint != fingerprint {
            Some("the streams' names, dtypes or shapes are not those it was saved from".into())
        } else if state.order.mixture().map(|m| &m.lens) != self.order.mixture_lens() {
            Some("its mixture's sources are not the builder's".into())
        } else if let (Some(saved), Some(given)) =
            (state.order.mixture().map(|m| &m.weights), self.order.mixture_weights())
            && saved != given
        {
            // Weights are part of the mixture a caller must give: dropped for the state's, the
            // draw went on at the old proportions, or another source's (look 96, finding 1).
            Some(format!("its mixture's weights {saved:?} are not the builder's {given:?}"))
        } else if state.order.pack().map(|p| p.pack) != self.order.pack() {
            Some("its packing is not the builder's".into())
        } else if state.order.bucket() != self.order.bucket() {
            Some("its bucketing is not the builder's".into())
        } else {
            None
        }
    }

    /// [`Error::Config`] naming each setting the caller gave beside a restored state that the
    /// state contradicts: the state's sampler and step are the loader's, so such a setting
    /// would otherwise be dropped without a word.
    fn agrees_with(&self, state: &LoaderState) -> Result<()> {
        let (s, named) = (&state.sampler, self.named);
        let mut clash = Vec::new();
        if named.batch_size && self.batch_size != s.batch_size {
            clash.push(format!(
                "batch_size {} (the state's is {}; LoaderState::rebatched changes it)",
                self.batch_size, s.batch_size
            ));
        }
        if named.mode && self.mode != s.mode {
            clash.push(format!("mode {} (the state's is {})", self.mode, s.mode));
        }
        if named.seed && self.seed != s.seed {
            clash.push(format!("seed {} (the state's is {})", self.seed, s.seed));
        }
        if named.start_step && self.start_step != state.step {
            clash.push(format!("start_step {} (the state's step is {})", self.start_step, state.step));
        }
        // A pass named beside the state: the state's order must be that pass (look 63, L63-2: an
        // endless state kept reading endlessly beside `pass(..)`, a state's epochs beside others).
        if let Chosen::Pass(p) = &self.order {
            // Its kind and length, not its first epoch: a state's epoch is where it stands.
            let asked = |shuffle: bool, drop_last: bool, epochs: Option<u64>| {
                let epochs = epochs.map_or("without end".to_string(), |n| n.to_string());
                format!("shuffle {shuffle}, drop_last {drop_last}, epochs {epochs}")
            };
            let wanted = asked(p.shuffle, p.drop_last, p.epochs);
            match state.order.pass() {
                None => clash.push(format!("pass ({wanted}; the state's order is not a pass)")),
                Some(s) if (s.shuffle, s.drop_last, s.epochs) != (p.shuffle, p.drop_last, p.epochs) => {
                    clash.push(format!(
                        "pass ({wanted}; the state's is {})",
                        asked(s.shuffle, s.drop_last, s.epochs)
                    ));
                }
                Some(_) => {}
            }
        }
        if clash.is_empty() {
            return Ok(());
        }
        Err(Error::Config {
            what: "state",
            reason: format!(
                "the saved loader state contradicts {}: leave these settings out to resume with the state's",
                clash.join(", ")
            ),
        })
    }

    /// Where a loader over `len` records of data with `fingerprint` starts: the restored
    /// [`state`](Self::state) when there is one, else the builder's sampler settings at its
    /// [`start_step`](Self::start_step). Adapters that feed the loader's sampler from their own
    /// data (a framework's dataset) start from this too.
    ///
    /// # Errors
    /// [`Error::Config`] when a restored state belongs to other data (another
    /// fingerprint or length) or contradicts a setting named beside it, or the sampler
    /// parameters are invalid.
    pub(crate) fn plan(&self, len: u32, fingerprint: u64) -> Result<LoaderState> {
        self.refusal()?;
        let state = match &self.state {
            Some(state) => {
                if let Some(why) = self.other_data(state, len, fingerprint) {
                    return Err(Error::Config {
                        what: "state",
                        reason: format!("the saved loader state belongs to other data: {why}"),
                    });
                }
                self.agrees_with(state)?;
                state.check_consistent()?;
                match self.shard {
                    Some((rank, world)) => state.resharded(rank, world)?,
                    None => state.clone(),
                }
            }
            None => LoaderState {
                sampler: SamplerConfig {
                    len,
                    batch_size: self.batch_size,
                    mode: self.mode,
                    seed: self.seed,
                    rank: self.shard.map_or(0, |(r, _)| r),
                    world: self.shard.map_or(1, |(_, w)| w),
                },
                step: self.start_step,
                fingerprint,
                order: self.order(len),
            },
        };
        // Every order counts the next step in a u64 (the last step is below u64::MAX); a mixture
        // also numbers its rows from row 0 in one (`Mixture::last_step`).
        let mut last = u64::MAX - 1;
        match &state.order {
            Order::Packed(p) => {
                if self.state.is_none() && state.step > 0 {
                    // Step k's samples follow from where packing stood after step k - 1, which
                    // only a state records (look 105, L105-1: a cursor at sample 0 delivered step
                    // 0's samples as step k's, without a word).
                    return Err(Error::Config {
                        what: "start_step",
                        reason: format!(
                            "a packed loader resumes from its state, not a step: where step {} starts in \
                             the stream is known only to the state saved then (state=)",
                            state.step
                        ),
                    });
                }
                let (b, w, r) = (state.sampler.batch_size, state.sampler.world, state.sampler.rank);
                // A rank's sample `k` is the stream's position `k * world + rank`: a cursor leaving
                // half the positions a u64 counts (centuries of reading) never overflows them.
                let most = u64::MAX / 2 / u64::from(w.max(1));
                if p.cursor.sample > most {
                    return Err(Error::Config {
                        what: "state",
                        reason: format!(
                            "a packed cursor at sample {} is past any stream a loader reads (at most {most} on a world of {w})",
                            p.cursor.sample
                        ),
                    });
                }
                if self.streams.len() != 1 {
                    return Err(Error::Config { what: "pack", reason: PACKED_ALONE.into() });
                }
                if b == 0 || w == 0 || r >= w || !b.is_multiple_of(w) {
                    return Err(Error::Config {
                        what: "pack",
                        reason: format!(
                            "{b} rows over rank {r} of world {w}: the rows must be positive and divisible by the world"
                        ),
                    });
                }
            }
            Order::Mixture(_) if !self.selections.is_empty() => {
                return Err(Error::Config { what: "mixture", reason: MIXTURE_WHOLE.into() });
            }
            Order::Mixture(m) => last = last.min(m.build(&state.sampler)?.last_step()),
            // A pass has no sampler of its own; its config is checked instead (a batch larger
            // than the data is fine in a pass: one partial batch).
            Order::Pass(p) => {
                let pass = p.build()?;
                last = last.min(pass.last_step());
                // A finite pass ends: its end is a step to resume at (a finished pass's state), a
                // step past it names no batch (look 96: accepted, then "the pass is over").
                if let Some(total) = pass.total_steps()
                    && state.step > total
                {
                    return Err(Error::Config {
                        what: if self.state.is_some() { "state" } else { "start_step" },
                        reason: format!(
                            "step {} is past the end of this finite pass, step {total} ({} x {} steps)",
                            state.step,
                            p.epochs.unwrap_or(1),
                            pass.steps()
                        ),
                    });
                }
            }
            Order::Endless | Order::Bucketed(_) => drop(state.sampler.build()?),
        }
        if state.step > last {
            return Err(Error::Config {
                what: if self.state.is_some() { "state" } else { "start_step" },
                reason: format!("step {} is past the last step this loader can deliver ({last})", state.step),
            });
        }
        Ok(state)
    }

    /// The order the builder's setters chose ([`Chosen`]), over `len` records.
    fn order(&self, len: u32) -> Order {
        match &self.order {
            Chosen::Endless => Order::Endless,
            Chosen::Pass(f) => Order::Pass(PassConfig {
                len,
                batch_size: self.batch_size,
                shuffle: f.shuffle,
                seed: self.seed,
                epoch: f.epoch,
                epochs: f.epochs,
                drop_last: f.drop_last,
                rank: self.shard.map_or(0, |(r, _)| r),
                world: self.shard.map_or(1, |(_, w)| w),
            }),
            Chosen::Mixture { weights, lens } => {
                Order::Mixture(MixtureConfig { weights: weights.clone(), lens: lens.clone() })
            }
            Chosen::Pack(_, p) => Order::Packed(PackConfig { pack: *p, cursor: Default::default() }),
            Chosen::Bucket(b) => Order::Bucketed(b.clone()),
        }
    }

    /// The data fingerprint of the streams (names, dtypes, item shapes, lengths, the selection)
    /// that a [`LoaderState`] carries: ranks can compare it at start-up, and a state restores
    /// only onto data with the same one. ([`run_fingerprint`](Self::run_fingerprint) adds the
    /// sampler's and pass's settings.)
    pub fn data_fingerprint(&self) -> u64 {
        match self.selected_streams() {
            Ok(streams) => fingerprint_of(&streams),
            Err(_) => fingerprint_of(&self.streams),
        }
    }

    /// The streams, the selection applied.
    pub(super) fn into_streams(self) -> Result<Vec<(String, StreamData)>> {
        self.selected_streams()
    }
}
