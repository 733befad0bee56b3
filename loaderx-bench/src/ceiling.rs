//! The ceilings the store, gather and format layers compare loaderx with, written once: the
//! memcpy of the same records from a flat file ([`copy_rows`]) and the decode of the same zstd
//! frames from memory ([`decompress`]), both split over the current rayon pool as loaderx splits
//! a batch; and the pooled contenders of the gather and format layers (one rayon pool of one
//! thread, one of every core).

use std::hint::black_box;
use std::time::Instant;

use loaderx_core::Store;
use rayon::ThreadPool;
use rayon::prelude::*;
use zstd::bulk::Decompressor;
use zstd::dict::DecoderDictionary;

use crate::timing::Contender;
use crate::workloads::{Dst, DstBuf};

/// The memcpy ceilings of the pooled layers, by where their destination starts.
pub(crate) const PAGE: &str = "memcpy → page-aligned buffer";
pub(crate) const HALF: &str = "memcpy → page + 2 KiB";
pub(crate) const VEC: &str = "memcpy → Vec";

/// Copies the records at `idx` of `rec` bytes from `src` into `dst`, one contiguous block of
/// the batch per thread of the current pool.
pub(crate) fn copy_rows(src: &[u8], idx: &[u32], rec: usize, dst: &mut [u8]) {
    let threads = rayon::current_num_threads();
    if threads == 1 {
        for (j, &i) in idx.iter().enumerate() {
            let at = i as usize * rec;
            dst[j * rec..(j + 1) * rec].copy_from_slice(&src[at..at + rec]);
        }
        return;
    }
    let per = idx.len().div_ceil(threads);
    idx.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(ix, d)| {
        for (j, &i) in ix.iter().enumerate() {
            let at = i as usize * rec;
            d[j * rec..(j + 1) * rec].copy_from_slice(&src[at..at + rec]);
        }
    });
}

/// Decodes one batch of frames into `dst`, split as [`copy_rows`] splits.
pub(crate) fn decompress(
    frames: &[Vec<u8>],
    dict: Option<&DecoderDictionary<'_>>,
    rec: usize,
    dst: &mut [u8],
) {
    let per = frames.len().div_ceil(rayon::current_num_threads());
    frames.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(fs, d)| {
        let mut dc = match dict {
            Some(dd) => Decompressor::with_prepared_dictionary(dd),
            None => Decompressor::new(),
        }
        .expect("a zstd decompression context");
        for (j, f) in fs.iter().enumerate() {
            dc.decompress_to_buffer(f, &mut d[j * rec..(j + 1) * rec]).expect("a frame this run compressed");
        }
    });
}

/// The pools the pooled layers time in: one thread, and every core where there is more than one.
pub(crate) struct Pools {
    one: ThreadPool,
    all: Option<(usize, ThreadPool)>,
}

impl Pools {
    /// # Errors
    /// A pool that cannot start its threads.
    pub(crate) fn new() -> anyhow::Result<Pools> {
        let cores = rayon::current_num_threads();
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
        let all = rayon::ThreadPoolBuilder::new().num_threads(cores).build()?;
        Ok(Pools { one, all: (cores > 1).then_some((cores, all)) })
    }

    /// `(threads, pool)`, the one-thread pool first.
    pub(crate) fn list(&self) -> Vec<(usize, &ThreadPool)> {
        std::iter::once((1, &self.one)).chain(self.all.as_ref().map(|(n, p)| (*n, p))).collect()
    }
}

/// Names of the contenders of one configuration.
pub(crate) fn name(what: &str, threads: usize) -> String {
    format!("{what}, {threads} thread{}", if threads == 1 { "" } else { "s" })
}

/// The names of the three memcpy ceilings on `threads` threads ([`PAGE`], [`HALF`], [`VEC`]).
pub(crate) fn memcpy_names(threads: usize) -> [String; 3] {
    [PAGE, HALF, VEC].map(|m| name(m, threads))
}

/// A contender whose `batch(k, dst)` fills `dst` with batch `k`, its timed loop run inside
/// `pool`.
pub(crate) fn pooled<'a>(
    name: String,
    pool: &'a ThreadPool,
    at: Dst,
    len: usize,
    mut batch: impl FnMut(usize, &mut [u8]) + Send + 'a,
) -> Contender<'a> {
    let mut buf = DstBuf::new(at, len);
    let mut k = 0usize;
    Contender::self_timed(
        &name,
        Box::new(move |n| {
            let dst = buf.slice();
            pool.install(|| {
                let t = Instant::now();
                for _ in 0..n {
                    batch(k, dst);
                    k += 1;
                    black_box(&mut *dst);
                }
                t.elapsed().as_secs_f64()
            })
        }),
    )
}

/// The three memcpy ceilings of `batches` (records of `rec` bytes from `src`) on `pool` of
/// `threads` threads, named by [`memcpy_names`].
pub(crate) fn memcpy_contenders<'a>(
    (threads, pool): (usize, &'a ThreadPool),
    src: &'a [u8],
    batches: &'a [Vec<u32>],
    rec: usize,
) -> [Contender<'a>; 3] {
    let len = batches[0].len() * rec;
    [(PAGE, Dst::Page), (HALF, Dst::HalfPage), (VEC, Dst::Vec)].map(|(what, at)| {
        pooled(name(what, threads), pool, at, len, move |k, d| {
            copy_rows(src, &batches[k % batches.len()], rec, d);
        })
    })
}

/// `Store::gather_fixed` of `batches` in turn into a `Vec`, on `pool`, named `name`.
pub(crate) fn store_contender<'a>(
    name: String,
    pool: &'a ThreadPool,
    store: &'a Store,
    batches: &'a [Vec<u32>],
    rec: usize,
) -> Contender<'a> {
    store_contender_into(name, pool, Dst::Vec, store, batches, rec)
}

/// [`store_contender`] into the destination `at`.
pub(crate) fn store_contender_into<'a>(
    name: String,
    pool: &'a ThreadPool,
    at: Dst,
    store: &'a Store,
    batches: &'a [Vec<u32>],
    rec: usize,
) -> Contender<'a> {
    let len = batches[0].len() * rec;
    pooled(name, pool, at, len, move |k, d| {
        store.gather_fixed(&batches[k % batches.len()], rec, d).expect("gather from a store this run wrote");
    })
}
