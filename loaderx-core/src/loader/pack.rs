//! Sequence packing: a ragged token stream packed into dense rows of `L` tokens with segment
//! ids, positions and a loss mask ([`LoaderBuilder::pack`](crate::LoaderBuilder::pack)).
//!
//! Each rank reads its own stripe of the sample stream (global position `k * world + rank` is
//! the rank's `k`-th sample; the positions walk keyed shuffles of the stream's records, one per
//! pass, or the records in order in sequential mode) and packs consecutive samples into its
//! `batch / world` rows of each step. Whole samples go first fit: each into the first row of the
//! step with room for it, and the first sample that fits no row starts the next step (a step
//! holds a run of consecutive samples, each row its share of them in stream order; the rest of a
//! row is padding). One longer than a whole row is cut to `L` tokens and takes an empty row.
//! First fit over `R` rows fills more of them than filling rows one after the other: on
//! log-normal lengths of median 300 and rows of 2,048, about 88% for one row, 94% for 4, 96% for
//! 8, 97% for 16. With [`Pack::split`], every sample is cut wherever a row ends and goes on in
//! the next, rows filled in turn (no padding at all). Planning reads only the records' lengths from the index; where a step
//! starts (the sample and the tokens of it already placed) depends on the steps before it, so
//! the planner walks forward from the last step it knows, and the state saves that cursor: two
//! numbers, whatever the run's length.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::batch::Pool;
use crate::dataset::RaggedSource;
use crate::sampler::{PassConfig, PassSampler, mix64};
use crate::{ArrayData, DType, DenseArray, Error, RaggedArray, Result};

const DOMAIN_PACK: u64 = 0x7061_636B_2073_6571;
/// Why a packed stream of nothing but empty records cannot make a step.
const EVERY_RECORD_EMPTY: &str = "every record of the packed stream is empty: nothing to pack";

/// Steps whose start the planner remembers (the prefetch window is far smaller).
const KEEP: usize = 4096;
/// Records per block of the planner's length cache: what one sequential read of the index fills.
const LENGTH_BLOCK: usize = 1 << 12;
/// Streams of more records than this read every length from the index (the cache would pass
/// 256 MiB).
const MAX_CACHED: usize = 1 << 26;

/// The rows of every record, read from the index a block of [`LENGTH_BLOCK`] records at a time
/// (one sequential read of 128 KiB of a v2 index, where a shuffled pass would read its entries
/// one by one, each a cache miss) the first time a record of the block is planned, and kept:
/// every later plan, the walks of prefetch threads ahead of their step and the passes after the
/// first among them, reads no index. Four bytes a record, blocks allocated as they are first
/// touched; none for a stream of more than [`MAX_CACHED`] records or with
/// [`Pack::cache_lengths`] off. A record's length never changes while the stream is open (a
/// store only grows; delete and compaction need it exclusively).
#[derive(Debug)]
struct Lengths {
    records: usize,
    blocks: Box<[OnceLock<Box<[u32]>>]>,
}

impl Lengths {
    fn new(records: usize, cache: bool) -> Lengths {
        let blocks = if cache && records <= MAX_CACHED { records.div_ceil(LENGTH_BLOCK) } else { 0 };
        Lengths { records, blocks: (0..blocks).map(|_| OnceLock::new()).collect() }
    }

    /// The rows of each of `records`.
    ///
    /// # Errors
    /// The source's, for a damaged entry among `records` (a block that fails to fill is left
    /// empty and `records` read one by one, so an error names a record asked for).
    fn rows(&self, source: &RaggedSource, records: &[u32]) -> Result<Vec<u64>> {
        if self.blocks.is_empty() {
            return source.record_rows(records);
        }
        let mut out = Vec::with_capacity(records.len());
        for &r in records {
            let (b, i) = (r as usize / LENGTH_BLOCK, r as usize % LENGTH_BLOCK);
            let block = match self.blocks.get(b).map(|slot| (slot, slot.get())) {
                Some((_, Some(block))) => block,
                Some((slot, None)) => {
                    let start = b * LENGTH_BLOCK;
                    let all: Vec<u32> =
                        (start..(start + LENGTH_BLOCK).min(self.records)).map(|k| k as u32).collect();
                    match source.record_rows(&all) {
                        // At most 2^32 - 1 bytes a record: its rows fit.
                        Ok(rows) => slot.get_or_init(|| rows.iter().map(|&x| x as u32).collect()),
                        Err(_) => return source.record_rows(records),
                    }
                }
                None => return source.record_rows(records),
            };
            out.push(u64::from(block[i]));
        }
        Ok(out)
    }
}

/// How a ragged stream is packed (see [`LoaderBuilder::pack`](crate::LoaderBuilder::pack)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pack {
    /// Tokens per row, `L`.
    pub length: u32,
    /// Cut samples wherever a row ends and go on in the next row (no padding), instead of
    /// starting the next row with a sample that does not fit (whole samples, some padding).
    pub split: bool,
    /// Keep the record lengths the planner reads, read a block of 4,096 records at a time
    /// (4 bytes a record, for streams of up to 2^26 records), so that plans read the index once
    /// per block (default); without it, every plan reads each sample's entry. Changes no batch.
    #[serde(default = "yes")]
    pub cache_lengths: bool,
}

fn yes() -> bool {
    true
}

impl Pack {
    /// Rows of `length` tokens; samples kept whole (one longer than a row cut to `length`).
    pub fn new(length: u32) -> Pack {
        Pack { length, split: false, cache_lengths: true }
    }

    /// Cut samples at row ends and carry the rest into the next row.
    pub fn split(mut self, yes: bool) -> Pack {
        self.split = yes;
        self
    }

    /// Keep the record lengths the planner reads (the field of the same name; default yes).
    pub fn cache_lengths(mut self, yes: bool) -> Pack {
        self.cache_lengths = yes;
        self
    }
}

/// Where a rank's packing stands at the state's step: plain data, two numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PackCursor {
    /// The rank's next sample (its `k`-th: global position `k * world + rank`).
    pub sample: u64,
    /// Tokens of that sample already placed (only with [`Pack::split`]).
    pub offset: u64,
}

/// A packed stream in a [`LoaderState`](crate::LoaderState): the packing and its cursor at the
/// state's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackConfig {
    /// How rows are packed.
    pub pack: Pack,
    /// Where the state's step starts.
    pub cursor: PackCursor,
}

/// A packed step: the records read, in order, and the arrays by name.
pub(crate) type Packed = (Vec<u32>, Vec<(String, DenseArray)>);

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
    order: PassSampler,
    rows: u32,
    rank: u64,
    world: u64,
    starts: Arc<Mutex<BTreeMap<u64, PackCursor>>>,
    lengths: Arc<Lengths>,
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer").field("pack", &self.pack).field("rows", &self.rows).finish_non_exhaustive()
    }
}

/// The most tokens a packed step holds (rows x length): 2^23 (the tokens, segments and positions
/// as `i32` and the loss mask: 13 bytes a token, 104 MiB a step, and up to 24 steps in flight),
/// past any step a model takes (8 rows of a million tokens). A bound, not a measurement.
const MAX_BATCH_TOKENS: u64 = 1 << 23;

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
            return Err(Error::Config {
                what: "pack",
                reason: "a packed row needs at least one token".into(),
            });
        }
        // A step's arrays (tokens, segments, positions, loss mask) hold rows x length values: a
        // bound checked here rather than an allocation that aborts.
        if u64::from(rows) * u64::from(config.pack.length) > MAX_BATCH_TOKENS {
            return Err(Error::Config {
                what: "pack",
                reason: format!(
                    "{rows} rows of {} tokens a step is more than {MAX_BATCH_TOKENS} tokens: pack shorter rows",
                    config.pack.length
                ),
            });
        }
        if !source.row_shape().is_empty() {
            return Err(Error::Config {
                what: "pack",
                reason: format!(
                    "packing needs records of scalar tokens; these have rows of shape {:?}",
                    source.row_shape()
                ),
            });
        }
        let len = u32::try_from(source.len())
            .map_err(|_| Error::Config { what: "pack", reason: "more records than u32 indices".into() })?;
        if len == 0 {
            return Err(Error::Config { what: "pack", reason: "a packed stream needs records".into() });
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
            lengths: Arc::new(Lengths::new(len as usize, config.pack.cache_lengths)),
        })
    }

    /// The records and lengths of the rank's samples `k..k + n`.
    fn samples(&self, k: u64, n: u64) -> Result<(Vec<u32>, Vec<u64>)> {
        let mut records = Vec::with_capacity(n as usize);
        if self.world == 1 {
            self.order.extend_positions(k, n, &mut records);
        } else {
            for j in k..k + n {
                self.order.extend_positions(j * self.world + self.rank, 1, &mut records);
            }
        }
        let lens = self.lengths.rows(&self.source, &records)?;
        Ok((records, lens))
    }

    /// The run of samples in a row that gave no token, one more: past the stream's length, an
    /// error when this rank will never get a token (every record is empty, or, the stream in
    /// order, every record of the rank's stripe, which a run that long has gone all round), else
    /// the run starts again (a shuffled stream brings the records with tokens round).
    fn after_empty(&self, run: u64) -> Result<u64> {
        let run = run + 1;
        let len = self.source.len();
        if run <= len as u64 {
            return Ok(run);
        }
        let all: Vec<u32> = (0..u32::try_from(len).unwrap_or(u32::MAX)).collect();
        if self.lengths.rows(&self.source, &all)?.iter().all(|&n| n == 0) {
            return Err(Error::InvalidArgument(EVERY_RECORD_EMPTY.into()));
        }
        if !self.order.config().shuffle {
            return Err(Error::InvalidArgument(format!(
                "every record rank {} of {} packs is empty: the stream is in order, so the rank's records never change",
                self.rank, self.world
            )));
        }
        Ok(0)
    }

    /// Packs one step from `cursor`: its pieces and the next step's cursor.
    fn simulate(&self, cursor: PackCursor, collect: bool) -> Result<(Vec<Piece>, PackCursor)> {
        if self.pack.split {
            self.simulate_split(cursor, collect)
        } else {
            self.simulate_first_fit(cursor, collect)
        }
    }

    /// Whole samples, first fit: each into the first row with room; the first that fits none
    /// starts the next step.
    fn simulate_first_fit(&self, mut cursor: PackCursor, collect: bool) -> Result<(Vec<Piece>, PackCursor)> {
        let l = u64::from(self.pack.length);
        let rows = self.rows as usize;
        let mut pieces = Vec::new();
        let (mut fill, mut segments) = (vec![0u64; rows], vec![0u32; rows]);
        let chunk = (u64::from(self.rows) * 8).clamp(16, 4096);
        let (mut first, mut records, mut lens) = (cursor.sample, Vec::new(), Vec::new());
        // Empty samples take no room: a stream of nothing but those would never end a step.
        let mut empty_run = 0u64;
        loop {
            if cursor.sample >= first + records.len() as u64 {
                first = cursor.sample;
                (records, lens) = self.samples(first, chunk)?;
            }
            let j = (cursor.sample - first) as usize;
            let (record, tokens) = (records[j], lens[j].min(l));
            if tokens == 0 {
                empty_run = self.after_empty(empty_run)?;
                cursor.sample += 1;
                continue;
            }
            empty_run = 0;
            let Some(row) = fill.iter().position(|&f| f + tokens <= l) else { break };
            segments[row] += 1;
            if collect {
                pieces.push(Piece {
                    row: row as u32,
                    at: fill[row] as u32,
                    segment: segments[row],
                    record,
                    from: 0,
                    tokens: tokens as u32,
                });
            }
            fill[row] += tokens;
            cursor.sample += 1;
        }
        Ok((pieces, cursor))
    }

    /// Samples cut wherever a row ends, rows filled in turn.
    fn simulate_split(&self, mut cursor: PackCursor, collect: bool) -> Result<(Vec<Piece>, PackCursor)> {
        let l = u64::from(self.pack.length);
        let mut pieces = Vec::new();
        // The upcoming samples' records and lengths, fetched a chunk at a time from the index.
        let chunk = (u64::from(self.rows) * 8).clamp(16, 4096);
        let (mut first, mut records, mut lens) = (cursor.sample, Vec::new(), Vec::new());
        // Samples in a row that gave no token: a stream of nothing but those would never fill a
        // row, as in the first-fit plan.
        let mut empty_run = 0u64;
        for row in 0..self.rows {
            let (mut at, mut segment) = (0u64, 0u32);
            while at < l {
                if cursor.sample >= first + records.len() as u64 {
                    first = cursor.sample;
                    (records, lens) = self.samples(first, chunk)?;
                }
                let j = (cursor.sample - first) as usize;
                let (record, len) = (records[j], lens[j]);
                let left = len.saturating_sub(cursor.offset);
                let space = l - at;
                let (tokens, done) = if left <= space { (left, true) } else { (space, false) };
                if tokens == 0 {
                    empty_run = self.after_empty(empty_run)?;
                } else {
                    empty_run = 0;
                }
                if tokens > 0 {
                    segment += 1;
                    if collect {
                        pieces.push(Piece {
                            row,
                            at: at as u32,
                            segment,
                            record,
                            from: cursor.offset,
                            tokens: tokens as u32,
                        });
                    }
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

    /// The pieces of step `step`, planned forward from the last known step start (outside the
    /// lock: a thread that finds its start unknown walks from the nearest known one itself).
    fn plan(&self, step: u64) -> Result<Vec<Piece>> {
        let (from, mut cursor) = {
            let starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
            match starts.range(..=step).next_back() {
                Some((&from, &cursor)) => (from, cursor),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "step {step} is before the packed loader's first step; a packed stream only goes forward"
                    )));
                }
            }
        };
        let mut learned = Vec::new();
        for s in from..step {
            cursor = self.simulate(cursor, false)?.1;
            learned.push((s + 1, cursor));
        }
        let (pieces, next) = self.simulate(cursor, true)?;
        learned.push((step + 1, next));
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        starts.extend(learned);
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
    pub(crate) fn produce(
        &self,
        step: u64,
        name: &str,
        pool: &Pool,
        par: crate::store::Parallelism,
    ) -> Result<Packed> {
        let pieces = self.plan(step)?;
        let mut records: Vec<u32> = pieces.iter().map(|p| p.record).collect();
        records.dedup();
        let mut gathered = RaggedArray::empty(self.source.dtype(), Vec::new());
        self.source.gather_into_with(&records, &mut gathered, par)?;
        let (rows, l) = (self.rows as usize, self.pack.length as usize);
        let elem = self.source.dtype().size();
        let (seg_name, pos_name, mask_name) =
            (format!("{name}_segments"), format!("{name}_positions"), format!("{name}_loss_mask"));
        // Recycled buffers (a fresh allocation of this size is mapped anew, page by page, every
        // step): each cell is written by a piece, or zeroed below as a row's padding.
        let mut data = recycled(pool, name, self.source.dtype(), rows * l);
        let mut segments = recycled_i32(pool, &seg_name, rows * l);
        let mut positions = recycled_i32(pool, &pos_name, rows * l);
        let mut mask = recycled(pool, &mask_name, DType::U8, rows * l);
        let tokens = data.as_bytes_mut().ok_or_else(|| {
            Error::InvalidArgument(format!("a {} stream cannot be packed", self.source.dtype()))
        })?;
        let mask_bytes = mask.as_bytes_mut().unwrap_or_default();
        let values = gathered.values().as_bytes();
        let offsets = gathered.offsets();
        let mut k = 0usize;
        // Each row's end so far: its padding is what follows it.
        let mut ends = vec![0usize; rows];
        for p in &pieces {
            while records[k] != p.record {
                k += 1;
            }
            let start = offsets[k] + p.from as usize;
            let (cell, n) = (p.row as usize * l + p.at as usize, p.tokens as usize);
            tokens[cell * elem..(cell + n) * elem].copy_from_slice(&values[start * elem..(start + n) * elem]);
            segments[cell..cell + n].fill(p.segment as i32);
            let from = p.from as i32;
            for (j, v) in positions[cell..cell + n].iter_mut().enumerate() {
                *v = from + j as i32;
            }
            mask_bytes[cell..cell + n].fill(1);
            ends[p.row as usize] = p.at as usize + n;
        }
        for (row, &end) in ends.iter().enumerate() {
            let (a, b) = (row * l + end, (row + 1) * l);
            tokens[a * elem..b * elem].fill(0);
            segments[a..b].fill(0);
            positions[a..b].fill(0);
            mask_bytes[a..b].fill(0);
        }
        let shape = vec![rows, l];
        Ok((
            records,
            vec![
                (name.to_string(), DenseArray::new(shape.clone(), data)?),
                (seg_name, DenseArray::new(shape.clone(), ArrayData::I32(segments))?),
                (pos_name, DenseArray::new(shape.clone(), ArrayData::I32(positions))?),
                (mask_name, DenseArray::new(shape, mask)?),
            ],
        ))
    }
}

/// `n` zeros of `dtype`, in the pool's recycled buffer for `name` where there is one.
/// `n` elements of `dtype` in the pool's recycled buffer for `name` where there is one: what a
/// previous batch left there (every element is overwritten: by a piece, or zeroed as padding).
fn recycled(pool: &Pool, name: &str, dtype: DType, n: usize) -> ArrayData {
    let mut a = pool.get(name, dtype);
    if a.dtype() != dtype {
        return ArrayData::zeros(dtype, n);
    }
    a.resize(n);
    a
}

/// [`recycled`] for an `i32` array, as its vector.
fn recycled_i32(pool: &Pool, name: &str, n: usize) -> Vec<i32> {
    match recycled(pool, name, DType::I32, n) {
        ArrayData::I32(v) => v,
        _ => vec![0; n],
    }
}
