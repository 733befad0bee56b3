//! [`Order`]: which records each step reads, as one choice (the endless sampler, a finite pass,
//! a mixture, a packed stream or length buckets); [`Indexer`]: an order made runnable, the one
//! place a state becomes a step's indices. The core loader and the framework adapters both start
//! from [`LoaderState::indexer`]. A [`LoaderState`] is saved in the shape it had before the order
//! was one type (a field per order, at most one of them set), so states saved by earlier versions
//! restore and saved files stay readable by them.

use serde::{Deserialize, Serialize};

use super::bucket::{BucketConfig, Bucketer};
use super::pack::{PackConfig, Packer};
use super::state::LoaderState;
use super::stream::StreamData;
use crate::sampler::{Mixture, MixtureConfig, PassConfig, PassSampler, Sampler, SamplerConfig, SamplerMode};
use crate::{Error, Result};

/// Which records each step of a loader reads, beyond the [`SamplerConfig`] every order keeps
/// (length, global batch, seed, rank, world): the variants are exclusive, so no state holds, say,
/// a finite pass and a mixture at once.
#[derive(Debug, Clone, PartialEq)]
pub enum Order {
    /// The endless sampler of the state's [`SamplerConfig`] (its mode: cyclic, sequential, IID,
    /// block-cyclic).
    Endless,
    /// Finite passes ([`LoaderBuilder::pass`](crate::LoaderBuilder::pass)): every record
    /// once per epoch.
    Pass(PassConfig),
    /// A weighted mixture of sources ([`LoaderBuilder::mixture`](crate::LoaderBuilder::mixture)).
    Mixture(MixtureConfig),
    /// A packed stream ([`LoaderBuilder::pack`](crate::LoaderBuilder::pack)) and where this
    /// rank's packing stands at the state's step.
    Packed(PackConfig),
    /// The endless sampler's batches bucketed by length
    /// ([`LoaderBuilder::bucket`](crate::LoaderBuilder::bucket)).
    Bucketed(BucketConfig),
}

impl Order {
    /// The finite pass, if this is one.
    pub fn pass(&self) -> Option<&PassConfig> {
        match self {
            Order::Pass(p) => Some(p),
            _ => None,
        }
    }

    /// The mixture, if this is one.
    pub fn mixture(&self) -> Option<&MixtureConfig> {
        match self {
            Order::Mixture(m) => Some(m),
            _ => None,
        }
    }

    /// The packing and its cursor, if this is a packed stream.
    pub fn pack(&self) -> Option<&PackConfig> {
        match self {
            Order::Packed(p) => Some(p),
            _ => None,
        }
    }

    /// The bucketing, if this is one.
    pub fn bucket(&self) -> Option<&BucketConfig> {
        match self {
            Order::Bucketed(b) => Some(b),
            _ => None,
        }
    }
}

/// A [`LoaderState`] as it is serialised: the shape it had when each order was an optional field
/// of its own. A state saved before passes, mixtures, packing or bucketing existed lacks those
/// fields; they default to absent (the endless sampler).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SavedState {
    sampler: SamplerConfig,
    step: u64,
    fingerprint: u64,
    #[serde(default)]
    pass: Option<PassConfig>,
    #[serde(default)]
    mixture: Option<MixtureConfig>,
    #[serde(default)]
    pack: Option<PackConfig>,
    #[serde(default)]
    bucket: Option<BucketConfig>,
}

impl TryFrom<SavedState> for LoaderState {
    type Error = String;

    /// The order is whichever field is present; a saved state with two never came from a loader
    /// (the loader always refused the combination), so it is refused here, when it is read.
    fn try_from(s: SavedState) -> std::result::Result<LoaderState, String> {
        let order = match (s.pass, s.mixture, s.pack, s.bucket) {
            (None, None, None, None) => Order::Endless,
            (Some(p), None, None, None) => Order::Pass(p),
            (None, Some(m), None, None) => Order::Mixture(m),
            (None, None, Some(p), None) => Order::Packed(p),
            (None, None, None, Some(b)) => Order::Bucketed(b),
            _ => {
                return Err("a loader state holds at most one of pass, mixture, pack and bucket".into());
            }
        };
        Ok(LoaderState { sampler: s.sampler, step: s.step, fingerprint: s.fingerprint, order })
    }
}

impl From<LoaderState> for SavedState {
    fn from(s: LoaderState) -> SavedState {
        let (mut pass, mut mixture, mut pack, mut bucket) = (None, None, None, None);
        match s.order {
            Order::Endless => {}
            Order::Pass(p) => pass = Some(p),
            Order::Mixture(m) => mixture = Some(m),
            Order::Packed(p) => pack = Some(p),
            Order::Bucketed(b) => bucket = Some(b),
        }
        SavedState {
            sampler: s.sampler,
            step: s.step,
            fingerprint: s.fingerprint,
            pass,
            mixture,
            pack,
            bucket,
        }
    }
}

/// What turns a step into indices, by order.
#[derive(Debug, Clone)]
enum Kind {
    Endless(Sampler),
    Pass(PassSampler),
    Mixture(Mixture),
    /// A packed stream: its planner, and the stream's name (packing makes whole batches: its
    /// steps have no indices before they are packed).
    Packed(Packer, String),
    Bucketed(Bucketer),
}

/// An [`Order`] made runnable over a loader's streams: a step's indices on this rank, and the
/// loader's length in steps. Made by [`LoaderState::indexer`].
#[derive(Debug, Clone)]
pub struct Indexer {
    sampler: SamplerConfig,
    kind: Kind,
}

impl LoaderState {
    /// This state's order made runnable over `streams` (a loader's, its selection applied):
    /// what the core loader and the framework adapters index their steps with. A packed order
    /// needs its stream (the only one, ragged and unpadded) and a bucketed one the ragged stream
    /// it sorts; the other orders use no stream (an adapter over its own dataset passes none).
    ///
    /// # Errors
    /// [`Error::Config`] for invalid sampler, pass, mixture, packing or bucketing
    /// parameters, or when the stream a packed or bucketed order reads is not in `streams`.
    pub fn indexer(&self, streams: &[(String, StreamData)]) -> Result<Indexer> {
        let config = &self.sampler;
        let kind = match &self.order {
            Order::Endless => Kind::Endless(config.build()?),
            Order::Pass(p) => Kind::Pass(p.build()?),
            Order::Mixture(m) => Kind::Mixture(m.build(config)?),
            Order::Packed(p) => {
                let [(name, StreamData::Ragged(source, None))] = streams else {
                    return Err(Error::Config {
                        what: "pack",
                        reason: "a packed stream is the loader's only stream, ragged and unpadded".into(),
                    });
                };
                let shuffle = config.mode != SamplerMode::Sequential;
                let rows = config.batch_size / config.world.max(1);
                let packer = Packer::new(
                    source.clone(),
                    *p,
                    (config.seed, shuffle),
                    (rows, config.rank, config.world),
                    self.step,
                )?;
                Kind::Packed(packer, name.clone())
            }
            Order::Bucketed(bucket) => {
                let source = streams
                    .iter()
                    .find_map(|(n, s)| match s {
                        StreamData::Ragged(r, _) if *n == bucket.stream => Some(r.clone()),
                        _ => None,
                    })
                    .ok_or_else(|| Error::Config {
                        what: "bucket",
                        reason: format!("no ragged stream {:?} to bucket by", bucket.stream),
                    })?;
                Kind::Bucketed(Bucketer::new(bucket.clone(), config.clone(), source)?)
            }
        };
        Ok(Indexer { sampler: config.clone(), kind })
    }
}

impl Indexer {
    /// This rank's indices of step `step` into `out` (replacing what it held). A packed stream's
    /// steps have none here: its planner reads and packs them (`Indexer::packed`).
    ///
    /// # Errors
    /// [`Error::PassEnded`] past the last step of finite passes; a bucketed window's failure to
    /// read its records' lengths.
    pub fn fill(&self, step: u64, out: &mut Vec<u32>) -> Result<()> {
        match &self.kind {
            Kind::Endless(s) => {
                // Fallibly: a batch size past memory (an edited state's, say) is an error, not an
                // abort of the process (look 78).
                let rows = s.local_batch_size() as usize;
                out.clear();
                out.try_reserve_exact(rows).map_err(|_| Error::Config {
                    what: "batch_size",
                    reason: format!("a batch of {rows} rows a rank: its indices alone do not fit in memory"),
                })?;
                out.resize(rows, 0);
                s.fill(step, out)
            }
            Kind::Pass(p) => {
                if let Some(total) = p.total_steps()
                    && step >= total
                {
                    return Err(Error::PassEnded { steps: total });
                }
                p.fill(step, out);
                Ok(())
            }
            Kind::Mixture(m) => m.fill(step, out),
            Kind::Packed(..) => {
                out.clear();
                Ok(())
            }
            Kind::Bucketed(b) => b.fill(step, out),
        }
    }

    /// The order at `step`, for the state a loader saves there.
    pub(super) fn order_at(&self, step: u64) -> Order {
        match &self.kind {
            Kind::Endless(_) => Order::Endless,
            Kind::Pass(p) => Order::Pass(p.config().clone()),
            Kind::Mixture(m) => Order::Mixture(m.config().clone()),
            // The step's start is known once the step before it was planned (or it is the first);
            // planning forward from there is all cursor_at can need. Where it cannot (the index
            // failed to give a length), the state says no packing, as it always has: restoring it
            // onto the packed builder is refused rather than resumed at a guessed cursor.
            Kind::Packed(p, _) => p
                .cursor_at(step)
                .map_or(Order::Endless, |cursor| Order::Packed(PackConfig { pack: p.pack(), cursor })),
            Kind::Bucketed(b) => Order::Bucketed(b.config().clone()),
        }
    }

    /// The packed stream's planner and name, if the order packs.
    pub(super) fn packed(&self) -> Option<(&Packer, &str)> {
        match &self.kind {
            Kind::Packed(p, name) => Some((p, name)),
            _ => None,
        }
    }

    /// Steps of all the finite passes, `None` for an endless order (or passes without end).
    pub fn steps(&self) -> Option<u64> {
        match &self.kind {
            Kind::Pass(p) => p.total_steps(),
            Kind::Endless(_) | Kind::Mixture(_) | Kind::Packed(..) | Kind::Bucketed(_) => None,
        }
    }

    /// Steps of one epoch: a finite pass's steps; for the endless sampler one cycle (cyclic:
    /// `N / B`, the remainder dropped), `ceil(N / B)` (sequential, and IID by convention); for a
    /// mixture, packing or bucketing `ceil(N / B)`, as many rows as the data holds.
    pub fn steps_per_epoch(&self) -> u64 {
        let rows = || u64::from(self.sampler.len).div_ceil(u64::from(self.sampler.batch_size));
        match &self.kind {
            Kind::Pass(p) => p.steps(),
            Kind::Endless(s) => s.steps_per_cycle().unwrap_or_else(rows),
            Kind::Mixture(_) | Kind::Packed(..) | Kind::Bucketed(_) => rows(),
        }
    }

    /// Records this rank reads in one pass (`None` for an endless order).
    pub fn num_items(&self) -> Option<u64> {
        match &self.kind {
            Kind::Pass(p) => Some(p.num_items()),
            _ => None,
        }
    }

    /// The endless sampler, if the order is one.
    pub fn sampler(&self) -> Option<&Sampler> {
        match &self.kind {
            Kind::Endless(s) => Some(s),
            _ => None,
        }
    }

    /// The finite pass, if the order is one.
    pub fn pass(&self) -> Option<&PassSampler> {
        match &self.kind {
            Kind::Pass(p) => Some(p),
            _ => None,
        }
    }

    /// The weighted mixture, if the order is one.
    pub fn mixture(&self) -> Option<&Mixture> {
        match &self.kind {
            Kind::Mixture(m) => Some(m),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler() -> SamplerConfig {
        SamplerConfig { len: 100, batch_size: 10, mode: SamplerMode::Cyclic, seed: 3, rank: 0, world: 1 }
    }

    /// The three fields a state had before passes, mixtures, packing and bucketing existed.
    #[derive(Serialize)]
    struct Oldest {
        sampler: SamplerConfig,
        step: u64,
        fingerprint: u64,
    }

    #[test]
    fn a_state_saved_before_orders_existed_reads_as_endless() {
        let bytes = rmp_serde::to_vec_named(&Oldest { sampler: sampler(), step: 7, fingerprint: 9 }).unwrap();
        let state: LoaderState = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(state, LoaderState { sampler: sampler(), step: 7, fingerprint: 9, order: Order::Endless });
    }

    /// A pass of 100 records in batches of 10, `epochs` of them.
    fn pass(epochs: u64) -> PassConfig {
        PassConfig {
            len: 100,
            batch_size: 10,
            shuffle: false,
            seed: 3,
            epoch: 0,
            epochs: Some(epochs),
            drop_last: false,
            rank: 0,
            world: 1,
        }
    }

    #[test]
    fn a_saved_state_with_two_orders_is_refused_when_read() {
        let pass = pass(1);
        let two = SavedState {
            sampler: sampler(),
            step: 0,
            fingerprint: 9,
            pass: Some(pass),
            mixture: None,
            pack: None,
            bucket: Some(BucketConfig { stream: "t".into(), window: 4 }),
        };
        let bytes = rmp_serde::to_vec_named(&two).unwrap();
        let e = rmp_serde::from_slice::<LoaderState>(&bytes).unwrap_err();
        assert!(e.to_string().contains("at most one of"), "{e}");
    }

    /// A key changed in a saved state (look 71, L71-2: `pass` read as `paSs` restored a finite
    /// pass as the endless sampler, `epochs` as `epOchs` one epoch instead of two, silently):
    /// an unknown key is refused, at the top and inside each order's config.
    #[test]
    fn a_saved_state_with_a_key_it_does_not_know_is_refused() {
        let pass = pass(2);
        let state = LoaderState { sampler: sampler(), step: 5, fingerprint: 9, order: Order::Pass(pass) };
        let bytes = state.to_bytes();
        assert_eq!(LoaderState::from_bytes(&bytes).unwrap(), state);
        for (from, to) in
            [(&b"pass"[..], &b"paSs"[..]), (b"epochs", b"epOchs"), (b"seed", b"sEed"), (b"step", b"stEp")]
        {
            let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
            let mut changed = bytes.clone();
            changed[at..at + from.len()].copy_from_slice(to);
            let e = LoaderState::from_bytes(&changed).unwrap_err();
            assert!(e.to_string().contains("unknown field"), "{}: {e}", String::from_utf8_lossy(to));
        }
        // Bytes after its end (look 109, L109-2: a state with a byte, or a second state,
        // appended was taken as the first alone).
        for tail in [&b"\0"[..], b"garbage", &bytes[..]] {
            let e = LoaderState::from_bytes(&[&bytes[..], tail].concat()).unwrap_err();
            assert!(e.to_string().contains(&format!("{} bytes after its end", tail.len())), "{e}");
        }
    }
}
