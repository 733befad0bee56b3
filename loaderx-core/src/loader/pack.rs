//! Sequence packing: a ragged token stream packed into dense rows of `L` tokens with segment
//! ids, positions and a loss mask ([`LoaderBuilder::pack`](crate::LoaderBuilder::pack)).
//!
//! Each rank reads its own stripe of the sample stream (global position `k * world + rank` is
//! the rank's `k`-th sample; the positions walk keyed shuffles of the stream's records, one per
//! pass, or the records in order in sequential mode) and packs consecutive samples into its
//! `batch / world` rows of each step, in order. A sample that does not fit the rest of a row
//! starts the next row (the rest is padding); one longer than a whole row is cut to `L` tokens,
//! or, with [`Pack::split`], every sample is cut wherever a row ends and goes on in the next
//! (no padding at all). Planning reads only the records' lengths from the index; where a step
//! starts (the sample and the tokens of it already placed) depends on the steps before it, so
//! the planner walks forward from the last step it knows, and the state saves that cursor: two
//! numbers, whatever the run's length.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::dataset::RaggedSource;
use crate::sampler::{Pass, PassConfig, mix64};
use crate::{ArrayData, DType, DenseArray, Error, RaggedArray, Result};

const DOMAIN_PACK: u64 = 0x7061_636B_2073_6571;
/// Steps whose start the planner remembers (the prefetch window is far smaller).
const KEEP: usize = 4096;

/// How a ragged stream is packed; see the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pack {
    /// Tokens per row, `L`.
    pub length: u32,
    /// Cut samples wherever a row ends and go on in the next row (no padding), instead of
    /// starting the next row with a sample that does not fit (whole samples, some padding).
    pub split: bool,
}

impl Pack {
    /// Rows of `length` tokens; samples kept whole (one longer than a row cut to `length`).
    pub fn new(length: u32) -> Pack {
        Pack { length, split: false }
    }

    /// Cut samples at row ends and carry the rest into the next row.
    pub fn split(mut self, yes: bool) -> Pack {
        self.split = yes;
        self
    }
}

/// Where a rank's packing stands at the state's step: plain data, two numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PackCursor {
    /// The rank's next sample (its `k`-th: global position `k * world + rank`).
    pub sample: u64,
    /// Tokens of that sample already placed (only with [`Pack::split`]).
    pub offset: u64,
}

/// A packed stream in a [`LoaderState`](crate::LoaderState): the packing and its cursor at the
/// state's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackConfig {
    /// How rows are packed.
    pub pack: Pack,
    /// Where the state's step starts.
    pub cursor: PackCursor,
}

/// One placed piece: `tokens` of sample `record` from token `from`, in segment `segment` of
/// row `row` at column `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    row: u32,
    at: u32,
    segment: u32,
    record: u32,
    from: u64,
    tokens: u32,
}

/// The packer of one loader: the sample order, the rows, and the planner's known step starts.
#[derive(Clone)]
pub(crate) struct Packer {
    pack: Pack,
    source: RaggedSource,
    order: Pass,
    rows: u32,
    rank: u64,
    world: u64,
    starts: Arc<Mutex<BTreeMap<u64, PackCursor>>>,
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer").field("pack", &self.pack).field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl Packer {
    /// A packer of `source` for `rows` rows per step on `rank` of `world`, starting at `step`
    /// from `cursor`; samples in keyed shuffles of `seed` (or in order).
    pub(crate) fn new(
        source: RaggedSource,
        config: PackConfig,
        (seed, shuffle): (u64, bool),
        (rows, rank, world): (u32, u32, u32),
        step: u64,
    ) -> Result<Packer> {
        if config.pack.length == 0 {
            return Err(Error::InvalidArgument("a packed row needs at least one token".into()));
        }
        if !source.row_shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "packing needs records of scalar tokens; these have rows of shape {:?}",
                source.row_shape()
            )));
        }
        let len = u32::try_from(source.len())
            .map_err(|_| Error::InvalidArgument("more records than u32 indices".into()))?;
        if len == 0 {
            return Err(Error::InvalidArgument("a packed stream needs records".into()));
        }
        let order = PassConfig {
            len,
            batch_size: 1,
            shuffle,
            seed: mix64(seed ^ DOMAIN_PACK),
            epoch: 0,
            epochs: None,
            drop_last: false,
            rank: 0,
            world: 1,
        }
        .build()?;
        let starts = BTreeMap::from([(step, config.cursor)]);
        Ok(Packer {
            pack: config.pack,
            source,
            order,
            rows,
            rank: u64::from(rank),
            world: u64::from(world.max(1)),
            starts: Arc::new(Mutex::new(starts)),
        })
    }

    /// The record of the rank's `k`-th sample.
    fn record(&self, k: u64, out: &mut Vec<u32>) {
        self.order.extend_positions(k * self.world + self.rank, 1, out);
    }

    /// Packs one step from `cursor`: its pieces and the next step's cursor.
    fn simulate(&self, mut cursor: PackCursor) -> Result<(Vec<Piece>, PackCursor)> {
        let l = u64::from(self.pack.length);
        let mut pieces = Vec::new();
        let mut rec = Vec::with_capacity(1);
        for row in 0..self.rows {
            let (mut at, mut segment) = (0u64, 0u32);
            while at < l {
                rec.clear();
                self.record(cursor.sample, &mut rec);
                let record = rec[0];
                let len = self.source.record_rows(&[record])?[0];
                let left = len.saturating_sub(cursor.offset);
                let space = l - at;
                let (tokens, done) = if left <= space {
                    (left, true)
                } else if self.pack.split {
                    (space, false)
                } else if at == 0 {
                    (l, true) // longer than a row: cut to L, the rest dropped
                } else {
                    break; // does not fit: the next row starts with it
                };
                if tokens > 0 {
                    segment += 1;
                    pieces.push(Piece {
                        row,
                        at: at as u32,
                        segment,
                        record,
                        from: cursor.offset,
                        tokens: tokens as u32,
                    });
                    at += tokens;
                }
                if done {
                    cursor = PackCursor { sample: cursor.sample + 1, offset: 0 };
                } else {
                    cursor.offset += tokens;
                }
            }
        }
        Ok((pieces, cursor))
    }

    /// The pieces of step `step`, planning forward from the last known step start.
    fn plan(&self, step: u64) -> Result<Vec<Piece>> {
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        let Some((&from, &cursor)) = starts.range(..=step).next_back() else {
            return Err(Error::InvalidArgument(format!(
                "step {step} is before the packed loader's first step; a packed stream only goes forward"
            )));
        };
        let mut cursor = cursor;
        for s in from..step {
            cursor = self.simulate(cursor)?.1;
            starts.insert(s + 1, cursor);
        }
        let (pieces, next) = self.simulate(cursor)?;
        starts.insert(step + 1, next);
        while starts.len() > KEEP {
            starts.pop_first();
        }
        Ok(pieces)
    }

    /// The cursor where step `step` starts.
    pub(crate) fn cursor_at(&self, step: u64) -> Result<PackCursor> {
        {
            let starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = starts.get(&step) {
                return Ok(*c);
            }
        }
        if step > 0 {
            self.plan(step - 1)?;
        }
        let starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        starts.get(&step).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("step {step} is before the packed loader's first step"))
        })
    }

    /// The packing.
    pub(crate) fn pack(&self) -> Pack {
        self.pack
    }

    /// Step `step`'s arrays: `{name}` (tokens), `{name}_segments` and `{name}_positions` (`i32`,
    /// segment ids from 1 and positions from 0, 0 in padding) and `{name}_loss_mask` (`u8`, 1 on
    /// a token), each `[rows, L]`; and the records read, in order.
    pub(crate) fn produce(&self, step: u64, name: &str) -> Result<(Vec<u32>, Vec<(String, DenseArray)>)> {
        let pieces = self.plan(step)?;
        let mut records: Vec<u32> = pieces.iter().map(|p| p.record).collect();
        records.dedup();
        let mut gathered = RaggedArray::empty(self.source.dtype(), Vec::new());
        self.source.gather_into_with(&records, &mut gathered, crate::store::Parallelism::Pool)?;
        let (rows, l) = (self.rows as usize, self.pack.length as usize);
        let elem = self.source.dtype().size();
        let mut tokens = vec![0u8; rows * l * elem];
        let mut segments = vec![0i32; rows * l];
        let mut positions = vec![0i32; rows * l];
        let mut mask = vec![0u8; rows * l];
        let values = gathered.values().as_bytes();
        let mut k = 0usize;
        for p in &pieces {
            while records[k] != p.record {
                k += 1;
            }
            let start = gathered.offsets()[k] + p.from as usize;
            let (cell, n) = (p.row as usize * l + p.at as usize, p.tokens as usize);
            tokens[cell * elem..(cell + n) * elem].copy_from_slice(&values[start * elem..(start + n) * elem]);
            for j in 0..n {
                segments[cell + j] = p.segment as i32;
                positions[cell + j] = (p.from as usize + j) as i32;
                mask[cell + j] = 1;
            }
        }
        let data = bytes_to(self.source.dtype(), &tokens)?;
        let shape = vec![rows, l];
        Ok((
            records,
            vec![
                (name.to_string(), DenseArray::new(shape.clone(), data)?),
                (format!("{name}_segments"), DenseArray::new(shape.clone(), ArrayData::I32(segments))?),
                (format!("{name}_positions"), DenseArray::new(shape.clone(), ArrayData::I32(positions))?),
                (format!("{name}_loss_mask"), DenseArray::new(shape, ArrayData::U8(mask))?),
            ],
        ))
    }
}

/// Token bytes as an array of `dtype`.
fn bytes_to(dtype: DType, bytes: &[u8]) -> Result<ArrayData> {
    let mut a = ArrayData::zeros(dtype, bytes.len() / dtype.size().max(1));
    match a.as_bytes_mut() {
        Some(dst) => dst.copy_from_slice(bytes),
        None => return Err(Error::InvalidArgument(format!("a {dtype} stream cannot be packed"))),
    }
    Ok(a)
}
