//! [`Batch`]: one step's streams, and the pool that recycles their buffers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::sampler::{SampleRng, sample_seed};
use crate::{ArrayData, DType, DenseArray, RaggedArray};

/// One step's data: every stream gathered at the same indices.
#[derive(Debug)]
pub struct Batch {
    pub(super) step: u64,
    pub(super) seed: u64,
    pub(super) indices: Vec<u32>,
    pub(super) streams: BTreeMap<String, DenseArray>,
    pub(super) ragged: BTreeMap<String, RaggedArray>,
    pub(super) pool: Option<Arc<Pool>>,
}

impl Batch {
    /// The global step this batch is.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The record indices of its rows (this rank's stripe of the global batch).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True for a batch of no rows (never produced by the loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The stream `name`, shaped `(B, *item_shape)`.
    pub fn get(&self, name: &str) -> Option<&DenseArray> {
        self.streams.get(name)
    }

    /// Takes the stream `name` out (its buffer then belongs to the caller, e.g. a tensor).
    pub fn take(&mut self, name: &str) -> Option<DenseArray> {
        self.streams.remove(name)
    }

    /// Takes the stream `name` out on loan: its buffer goes back to the loader's pool when the
    /// [`LentArray`] drops (in the loader's process), so that a later batch of the stream is written over the same pages
    /// instead of faulting in fresh ones (a batch of 256 normalised 224x224 images is 154 MB: the
    /// kernel zeroes and maps every page of a fresh buffer on its first write). For a consumer
    /// that reads or copies the batch and lets it go: a NumPy array viewing it, a copy to a
    /// device. [`LentArray::into_array`] keeps the buffer instead.
    pub fn lend(&mut self, name: &str) -> Option<LentArray> {
        let array = self.streams.remove(name)?;
        Some(LentArray { name: name.to_string(), array: Some(array), pool: self.pool.clone() })
    }

    /// Puts a stream in (a transform's output, say).
    pub fn insert(&mut self, name: impl Into<String>, array: DenseArray) {
        self.streams.insert(name.into(), array);
    }

    /// Stream names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.streams.keys().map(String::as_str)
    }

    /// The unpadded ragged stream `name`: its records' values and offsets.
    pub fn get_ragged(&self, name: &str) -> Option<&RaggedArray> {
        self.ragged.get(name)
    }

    /// Takes the unpadded ragged stream `name` out.
    pub fn take_ragged(&mut self, name: &str) -> Option<RaggedArray> {
        self.ragged.remove(name)
    }

    /// Names of the unpadded ragged streams, sorted.
    pub fn ragged_names(&self) -> impl Iterator<Item = &str> {
        self.ragged.keys().map(String::as_str)
    }

    /// Takes every stream out.
    pub fn into_streams(mut self) -> BTreeMap<String, DenseArray> {
        std::mem::take(&mut self.streams)
    }

    /// A deterministic RNG for row `position` of this batch, seeded from (seed, step, position):
    /// an augmentation drawn from it replays exactly when the run resumes.
    pub fn rng(&self, position: u32) -> SampleRng {
        SampleRng::new(sample_seed(self.seed, self.step, position))
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Streams nobody took go back to the pool: steady state allocates no fresh pages.
        if let Some(pool) = &self.pool {
            for (name, array) in std::mem::take(&mut self.streams) {
                pool.put(&name, array.into_raw_parts().1);
            }
        }
    }
}

/// A stream taken out of a batch on loan ([`Batch::lend`]): its buffer returns to the loader's
/// pool when this drops (the loader may be gone by then: the pool lives as long as a loan).
#[derive(Debug)]
pub struct LentArray {
    name: String,
    /// `None` only once [`LentArray::into_array`] took it.
    array: Option<DenseArray>,
    pool: Option<Arc<Pool>>,
}

impl LentArray {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The array, shaped `(B, *item_shape)`.
    pub fn array(&self) -> &DenseArray {
        self.array.as_ref().expect("a LentArray holds its array until into_array")
    }

    /// The array kept: its buffer no longer goes back to the pool.
    pub fn into_array(mut self) -> DenseArray {
        self.array.take().expect("a LentArray holds its array until into_array")
    }
}

impl Drop for LentArray {
    fn drop(&mut self) {
        if let (Some(pool), Some(array)) = (&self.pool, self.array.take()) {
            pool.put(&self.name, array.into_raw_parts().1);
        }
    }
}

/// Recycled stream buffers, per stream name.
#[derive(Debug)]
pub(super) struct Pool {
    free: Mutex<BTreeMap<String, Vec<ArrayData>>>,
    cap: usize,
    pub(super) fresh: AtomicUsize,
    /// The process the pool was made in ([`Pool::put`]).
    pid: u32,
}

impl Pool {
    /// A pool for `names`, keeping at most `cap` free buffers per stream.
    pub(super) fn new<'a>(names: impl Iterator<Item = &'a str>, cap: usize) -> Pool {
        Pool {
            free: Mutex::new(names.map(|n| (n.to_string(), Vec::new())).collect()),
            cap,
            fresh: AtomicUsize::new(0),
            pid: std::process::id(),
        }
    }

    pub(super) fn get(&self, name: &str, dtype: DType) -> ArrayData {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.get_mut(name).and_then(Vec::pop).unwrap_or_else(|| {
            self.fresh.fetch_add(1, Ordering::Relaxed);
            ArrayData::zeros(dtype, 0)
        })
    }

    /// Keeps `data` for a later batch of stream `name` (at most `cap` of them). In a process
    /// forked from the pool's, the buffer is freed and the lock left alone: a thread of the
    /// parent may have held it at the fork, and no thread of the child would ever release it (a
    /// batch's NumPy array freed in a torch worker, say); the child has no prefetch threads to
    /// take a buffer back anyway.
    pub(super) fn put(&self, name: &str, data: ArrayData) {
        if std::process::id() != self.pid {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = free.get_mut(name)
            && list.len() < self.cap
        {
            list.push(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A batch's buffer dropped in a process forked from the loader's (a torch worker freeing a
    /// NumPy array it inherited) never waits for the pool's lock, which a thread of the parent
    /// may have held at the fork (look 76): here the lock is held, and the pool says it was
    /// made in another process.
    #[test]
    fn a_buffer_dropped_in_a_forked_child_never_waits_for_the_pool() {
        let pool =
            Arc::new(Pool { pid: std::process::id().wrapping_add(1), ..Pool::new(["x"].into_iter(), 4) });
        let held = pool.free.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = Arc::clone(&pool);
        std::thread::spawn(move || {
            p.put("x", ArrayData::zeros(DType::U8, 8));
            let _ = tx.send(());
        });
        let returned = rx.recv_timeout(Duration::from_secs(5)).is_ok();
        drop(held);
        assert!(returned, "the buffer's return waited for the pool's lock");
        assert!(pool.free.lock().unwrap()["x"].is_empty(), "a child's buffer went into the pool");
        // In the pool's own process, it is kept.
        let own = Pool::new(["x"].into_iter(), 4);
        own.put("x", ArrayData::zeros(DType::U8, 8));
        assert_eq!(own.free.lock().unwrap()["x"].len(), 1);
    }
}
