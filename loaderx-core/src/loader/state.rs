//! [`LoaderState`]: where a loader is; [`Pass`]: passes instead of an endless stream.

use serde::{Deserialize, Serialize};

use super::order::{Order, SavedState};
use crate::sampler::{PassConfig, SamplerConfig, SamplerMode};
use crate::{Error, Result};

/// Where a loader is: plain data to save, inspect, edit (skip steps) and restore.
///
/// Serialised in the shape of earlier versions (the order's config under its own optional field:
/// `pass`, `mixture`, `pack` or `bucket`), so states saved by them restore and theirs read ours.
/// A key this version does not know is refused (a damaged key read as absent turned a pass into
/// the endless sampler: look 71, L71-2). The state carries no checksum: it is plain data made to
/// be edited, and a value changed by damage restores as an edit would; keep checkpoints where
/// their storage checks them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SavedState", into = "SavedState")]
pub struct LoaderState {
    /// The sampler: length, global batch size, mode, seed, rank, world.
    pub sampler: SamplerConfig,
    /// The next step to be delivered.
    pub step: u64,
    /// The data fingerprint of the streams (names, dtypes, shapes, length;
    /// [`LoaderBuilder::data_fingerprint`](crate::LoaderBuilder::data_fingerprint)): a state
    /// only restores onto the data it was saved from.
    pub fingerprint: u64,
    /// Which records each step reads: the endless sampler, a finite pass, a mixture, a packed
    /// stream (with where its packing stands at `step`) or length buckets.
    pub order: Order,
}

impl LoaderState {
    /// The state as bytes: MessagePack with named fields, the form the Python module's
    /// `DataLoader.state()` returns and [`save`](Self::save) writes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain data of numbers, strings and sequences: MessagePack encodes it without failing.
        rmp_serde::to_vec_named(self).unwrap_or_default()
    }

    /// A state from [`to_bytes`](Self::to_bytes)'s bytes (or an earlier version's).
    ///
    /// # Errors
    /// [`Error::Config`] (`what: "state"`) for bytes that are not a loader state, the decoder's
    /// error as its source.
    pub fn from_bytes(bytes: &[u8]) -> Result<LoaderState> {
        let mut read = bytes;
        let state = serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut read)).map_err(
            |e: rmp_serde::decode::Error| Error::Config {
                what: "state",
                reason: format!("not a loader state ({} bytes): {e}", bytes.len()),
            },
        )?;
        // A state ends where its bytes do: bytes after it (a checkpoint spliced wrongly) are
        // refused, not dropped (look 109, L109-2).
        if !read.is_empty() {
            return Err(Error::Config {
                what: "state",
                reason: format!(
                    "not a loader state ({} bytes): {} bytes after its end",
                    bytes.len(),
                    read.len()
                ),
            });
        }
        Ok(state)
    }

    /// Writes the state to the file `path`, atomically (a temporary file beside it, synced,
    /// renamed over it): a checkpoint beside a model's, resumed with [`load`](Self::load) and
    /// [`LoaderBuilder::state`](crate::LoaderBuilder::state).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file; [`Error::InvalidArgument`] for a path with no file name.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        let (Some(name), dir) = (path.file_name().and_then(|n| n.to_str()), path.parent()) else {
            return Err(Error::InvalidArgument(format!(
                "{}: a loader state is saved to a file",
                path.display()
            )));
        };
        let dir = dir.filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        // A temporary name of this process's own, created exclusively: a file of the user's
        // beside the checkpoint (say `loader.state.tmp`) is never touched.
        let bytes = self.to_bytes();
        for n in 0u32..64 {
            let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
            let mut f = match std::fs::File::options().write(true).create_new(true).open(&tmp) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io("create", &tmp, e)),
            };
            let written = std::io::Write::write_all(&mut f, &bytes).and_then(|()| f.sync_all());
            drop(f);
            if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::io("write", path, e));
            }
            return crate::store::sync_dir(dir);
        }
        Err(Error::InvalidArgument(format!("{}: no free temporary name beside it", path.display())))
    }

    /// Reads a state [`save`](Self::save) wrote.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file; [`Error::Config`] when it holds no loader state.
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<LoaderState> {
        let path = path.as_ref();
        // A state is a few hundred bytes (a mixture's lengths: 4 bytes a source); 16 MiB bounds
        // what a file of something else can make this allocate.
        let bytes = crate::store::read_capped(path, 16 << 20)?.ok_or_else(|| {
            Error::io("read", path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
        })?;
        LoaderState::from_bytes(&bytes)
    }

    /// This state moved onto a global batch of `batch_size`, resuming from the samples consumed:
    /// the rule when a run restarts with another global batch (elastic resume with the same
    /// global batch needs nothing: [`shard`](crate::LoaderBuilder::shard) the same state onto any world
    /// size). Cyclic mode (and finite passes) keep the cycle (pass) and its keyed permutation,
    /// which does not depend on the batch: the consumed part of the cycle is `f = (step mod S) *
    /// B` positions and the new step is the cycle's first plus `floor(f / B')`, so nothing is
    /// lost and at most `B' - 1` samples of the cycle are seen again (and the cycle's dropped
    /// remainder becomes `N mod B'`). Sequential, IID and mixture streams are streams of global
    /// rows: the new step is `floor(step * B / B')`, the same rule. A packed stream's cursor
    /// says where it stands whatever the rows per step: its step stays.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a batch of 0, one not divisible by the world, one larger
    /// than the data in cyclic mode, or a bucketed stream (its windows are made of batches).
    pub fn rebatched(&self, batch_size: u32) -> Result<LoaderState> {
        let (b, b2) = (u64::from(self.sampler.batch_size), u64::from(batch_size));
        if b2 == 0 || !batch_size.is_multiple_of(self.sampler.world.max(1)) {
            return Err(Error::InvalidArgument(format!(
                "a global batch of {batch_size} over {} ranks",
                self.sampler.world
            )));
        }
        if let Order::Bucketed(_) = self.order {
            return Err(Error::InvalidArgument(
                "a bucketed stream's windows are made of its batches: it restarts, not rebatches".into(),
            ));
        }
        let within = |spc_old: u64, spc_new: u64| -> Result<u64> {
            if spc_old == 0 || spc_new == 0 {
                return Err(Error::InvalidArgument(format!(
                    "a global batch of {batch_size} leaves no whole batch in {} records",
                    self.sampler.len
                )));
            }
            let (cycle, f) = (self.step / spc_old, (self.step % spc_old) * b);
            cycle.checked_mul(spc_new).and_then(|s| s.checked_add(f / b2)).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "step {} at a global batch of {batch_size} is past the last step a loader counts",
                    self.step
                ))
            })
        };
        let mut out = self.clone();
        out.sampler.batch_size = batch_size;
        out.step = match (&self.order, self.sampler.mode) {
            (Order::Packed(_), _) => self.step,
            (Order::Pass(p), _) => {
                let new = PassConfig { batch_size, ..p.clone() };
                let step = within(p.build()?.steps(), new.build()?.steps())?;
                out.order = Order::Pass(new);
                step
            }
            (Order::Endless, SamplerMode::Cyclic) => {
                let n = u64::from(self.sampler.len);
                within(n / b.max(1), n / b2)?
            }
            (Order::Endless, SamplerMode::BlockCyclic { block, .. }) => {
                // A cycle is the records of its whole blocks, whatever the batch.
                let n = u64::from(self.sampler.len / block.max(1) * block);
                within(n / b.max(1), n / b2)?
            }
            (Order::Endless | Order::Mixture(_) | Order::Bucketed(_), _) => self.step.saturating_mul(b) / b2,
        };
        Ok(out)
    }

    /// The same state on rank `rank` of `world` ranks: the global batch (and so each step's
    /// global rows) is the same, each rank reading its stripe of it, so a run stopped on one
    /// world size resumes on another with nothing seen twice or skipped.
    ///
    /// # Errors
    /// [`Error::Config`] for a rank not below the world, a global batch the world does not
    /// divide, or a packed stream on another shard (its cursor is where its own rank's packing
    /// stands: another rank's rows cannot be known from it).
    pub fn resharded(&self, rank: u32, world: u32) -> Result<LoaderState> {
        let s = &self.sampler;
        if (rank, world) == (s.rank, s.world) {
            return Ok(self.clone());
        }
        let refuse = |reason: String| Error::Config { what: "shard", reason };
        if world == 0 || rank >= world || !s.batch_size.is_multiple_of(world) {
            return Err(refuse(format!(
                "rank {rank} of {world}: the rank must be below the world, and the world must divide the state's global batch of {}",
                s.batch_size
            )));
        }
        if let Order::Packed(_) = self.order {
            return Err(refuse(format!(
                "the state was saved on rank {} of {}: a packed stream's cursor is its own rank's, so it resumes on that shard only",
                s.rank, s.world
            )));
        }
        let mut out = self.clone();
        (out.sampler.rank, out.sampler.world) = (rank, world);
        if let Order::Pass(p) = &mut out.order {
            (p.rank, p.world) = (rank, world);
        }
        Ok(out)
    }

    /// [`Error::Config`] when the state's parts disagree: a pass's length, global batch, seed,
    /// rank or world other than its sampler's (a loader never saves such a state; an edited
    /// one would run on the pass's and report the sampler's), or a pass of 0 epochs.
    pub(crate) fn check_consistent(&self) -> Result<()> {
        let Order::Pass(p) = &self.order else { return Ok(()) };
        if p.epochs == Some(0) {
            // No loader saves one (a pass runs one epoch or more): an edit, which would end at once.
            return Err(Error::Config {
                what: "state",
                reason: "the saved loader state's pass runs 0 epochs (1 or more, or none for no end)".into(),
            });
        }
        let s = &self.sampler;
        let fields = [
            ("len", u64::from(p.len), u64::from(s.len)),
            ("batch_size", u64::from(p.batch_size), u64::from(s.batch_size)),
            ("seed", p.seed, s.seed),
            ("rank", u64::from(p.rank), u64::from(s.rank)),
            ("world", u64::from(p.world), u64::from(s.world)),
        ];
        match fields.iter().find(|(_, a, b)| a != b) {
            None => Ok(()),
            Some((field, pass, sampler)) => Err(Error::Config {
                what: "state",
                reason: format!(
                    "the saved loader state contradicts itself: its pass's {field} is {pass}, its sampler's {sampler}"
                ),
            }),
        }
    }
}

/// Finite passes over the data: every record exactly once per pass (one pass by default), then
/// the loader ends; see [`LoaderBuilder::pass`](crate::LoaderBuilder::pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// In a keyed shuffle of the builder's seed and the epoch, or in record order.
    pub shuffle: bool,
    /// Drop the last batch of each pass when it is partial.
    pub drop_last: bool,
    /// The first pass's epoch: each has its own shuffle.
    pub epoch: u64,
    /// Passes run back to back, the prefetch threads going on across the boundary; `None`:
    /// without end (exactly-once training epochs: [`DataLoader::steps_per_epoch`](crate::DataLoader::steps_per_epoch) steps each).
    pub epochs: Option<u64>,
}

impl Default for Pass {
    fn default() -> Self {
        Pass { shuffle: false, drop_last: false, epoch: 0, epochs: Some(1) }
    }
}

impl Pass {
    /// Every record once, in record order, the last batch partial: an evaluation pass.
    pub fn ordered() -> Pass {
        Pass::default()
    }

    /// Every record once, in a shuffle of the builder's seed and the epoch.
    pub fn shuffled() -> Pass {
        Pass { shuffle: true, ..Pass::default() }
    }

    /// `n` passes back to back (epochs `epoch..epoch + n`); `None`: without end.
    pub fn epochs(mut self, n: Option<u64>) -> Pass {
        self.epochs = n;
        self
    }

    /// Drop the last batch when it is partial.
    pub fn drop_last(mut self, yes: bool) -> Pass {
        self.drop_last = yes;
        self
    }

    /// The epoch (its own shuffle).
    pub fn epoch(mut self, epoch: u64) -> Pass {
        self.epoch = epoch;
        self
    }
}
