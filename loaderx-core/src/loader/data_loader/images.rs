//! An image stream's step: its records' files decoded and transformed into one batch buffer, in
//! pieces of a few images taken by the step's prefetch thread and by the other threads of the
//! rayon pool. Steps decode one at a time and in order, each on every core: the first batch
//! takes the time of its share of the images, not of all of them on one thread, the step the
//! consumer waits for is never behind a later one, and no more threads decode at once than the
//! pool has (two steps decoding at once, each with helpers, would put twice as many threads on
//! the cores for no more work done).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::Producer;
use crate::loader::batch::Batch;
use crate::vision::{ImagePipeline, Out, Scratch};
use crate::{ArrayData, DType, Error, RaggedArray, RaggedSource, Result};

/// Images a thread takes at a time: an image costs about a millisecond to decode and transform
/// (docs/benchmarks/images.md, run E), so a piece is milliseconds of work against microseconds
/// of hand-off, and a batch of 256 is 64 pieces for whoever is free.
const IMAGES_PER_PIECE: usize = 4;

/// What a loader's image steps share: the decoders' buffers and libjpeg-turbo decompressors,
/// kept from one step to the next (one per thread that decodes at a time, so a step allocates
/// and faults in no decode buffer), and whose turn it is to decode.
pub(super) struct Shared {
    scratches: Mutex<Vec<Scratch>>,
    /// The step whose turn it is: every step the prefetch threads claim takes its turn (the
    /// claimed steps are consecutive, each produced), so the turns go in step order.
    next: Mutex<u64>,
    /// Signalled when a step's turn ends.
    ended: Condvar,
    /// How many other pool threads help a step: the pool's threads but one, as the loader's
    /// builder saw the pool (a forked Python child builds in a one-thread pool of its own, and
    /// must never queue work on the global pool, whose threads it does not have).
    helpers: usize,
}

/// How often a step waiting for its turn looks at whether the loader was dropped.
const TURN_POLL: Duration = Duration::from_millis(20);

impl Shared {
    /// Turns from step `start` on, each step helped by `helpers` pool threads.
    pub(super) fn new(start: u64, helpers: usize) -> Shared {
        Shared { scratches: Mutex::default(), next: Mutex::new(start), ended: Condvar::new(), helpers }
    }

    fn take(&self) -> Scratch {
        self.scratches.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default()
    }

    fn give(&self, scratch: Scratch) {
        self.scratches.lock().unwrap_or_else(|p| p.into_inner()).push(scratch);
    }

    /// Waits for `step`'s turn (every step before it has had its own), then holds it until the
    /// returned guard drops.
    ///
    /// # Errors
    /// [`Error::LoaderStopped`] once the loader is dropped while the step waits.
    pub(super) fn turn(&self, step: u64, dropped: &AtomicBool) -> Result<Turn<'_>> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        while *next < step {
            stop_if_dropped(dropped)?;
            next = self.ended.wait_timeout(next, TURN_POLL).unwrap_or_else(|p| p.into_inner()).0;
        }
        Ok(Turn { shared: self, step })
    }
}

/// A step's turn ([`Shared::turn`]), passed to the next step when dropped (a panic included).
pub(super) struct Turn<'a> {
    shared: &'a Shared,
    step: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut next = self.shared.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = (*next).max(self.step.saturating_add(1));
        drop(next);
        self.shared.ended.notify_all();
    }
}

/// One piece of a step: the batch position of its first image, its items' elements and, when
/// bad images are left out, their `_ok` flags.
type Piece<'a, T> = (usize, &'a mut [T], Option<&'a mut [u8]>);

impl<O> Producer<O> {
    /// The images of `batch`'s records in `source`, decoded and transformed by `pipeline` into
    /// one buffer (a recycled one of stream `name`), each with the random stream of its position
    /// in the global batch: the same bytes whichever thread takes which image.
    pub(super) fn decode_images(
        &self,
        source: &RaggedSource,
        pipeline: &ImagePipeline,
        name: &str,
        batch: &Batch,
    ) -> Result<(ArrayData, Option<Vec<u8>>)> {
        let mut files = RaggedArray::empty(DType::U8, Vec::new());
        source.gather_into_with(&batch.indices, &mut files, self.par)?;
        let item = pipeline.item_elems();
        let n = batch.indices.len();
        let total =
            n.checked_mul(item).ok_or_else(|| Error::InvalidArgument("an image batch past memory".into()))?;
        // The pool keeps the stream's own buffers, all of the pipeline's dtype.
        let mut data = self.pool.get(name, pipeline.dtype());
        let refused = |k: usize, why: String| Error::BadInput {
            path: source.record_file(batch.indices[k]).unwrap_or_else(|| source.path().to_path_buf()),
            reason: format!(
                "record {} (stream {name:?}, step {}): not a decodable image: {why}",
                source.path_record(batch.indices[k]),
                batch.step()
            ),
            source: None,
        };
        // Which images decoded, when the pipeline leaves the others out ([`ImagePipeline::skip_bad`]).
        let mut ok = pipeline.skips_bad().then(|| vec![1u8; n]);
        // Image `k` into `out`: an error naming it, or, left out, its item zeroed and its flag 0
        // (whatever the pipeline wrote of it).
        let one = |k: usize, out: Out<'_>, scratch: &mut Scratch, ok: Option<&mut u8>| -> Result<bool> {
            stop_if_dropped(&self.dropped)?;
            let mut rng = crate::SampleRng::new(crate::sample_seed(
                self.seed,
                batch.step(),
                self.stripe.wrapping_add(k as u32),
            ));
            match (pipeline.apply_with(files.record::<u8>(k)?, &mut rng, out, scratch), ok) {
                (Ok(()), _) => Ok(false),
                (Err(_), Some(ok)) => {
                    *ok = 0;
                    Ok(true)
                }
                (Err(why), None) => Err(refused(k, why)),
            }
        };
        match &mut data {
            ArrayData::U8(v) => self.each_image(v, total, item, ok.as_deref_mut(), |k, out, s, ok| {
                if one(k, Out::U8(&mut *out), s, ok)? {
                    out.fill(0);
                }
                Ok(())
            }),
            ArrayData::F32(v) => self.each_image(v, total, item, ok.as_deref_mut(), |k, out, s, ok| {
                if one(k, Out::F32(&mut *out), s, ok)? {
                    out.fill(0.0);
                }
                Ok(())
            }),
            other => return Err(Error::InvalidArgument(format!("an image stream of {}", other.dtype()))),
        }
        .map_err(|e| match e {
            Error::InvalidArgument(m) => {
                Error::InvalidArgument(format!("stream {name:?} ({}): {m}", source.path().display()))
            }
            other => other,
        })?;
        Ok((data, ok))
    }

    /// `v` made `total` elements (zeros when it was another size), then `f(k, item, scratch,
    /// ok)` called on each item `k` of `item` elements (`ok`: its flag in `oks`), in pieces of
    /// [`IMAGES_PER_PIECE`] taken in order by this thread and by [`Shared`]'s helpers.
    /// The error returned is that of the lowest `k` that failed, as one thread going in order
    /// would meet it first.
    fn each_image<T: bytemuck::Zeroable + Send>(
        &self,
        v: &mut Vec<T>,
        total: usize,
        item: usize,
        oks: Option<&mut [u8]>,
        f: impl Fn(usize, &mut [T], &mut Scratch, Option<&mut u8>) -> Result<()> + Sync,
    ) -> Result<()> {
        // A buffer back from the pool at the batch's size is written over whole (every item,
        // every element): zeroing it first would cost a pass over the batch for nothing.
        if v.len() != total {
            // A fresh buffer comes zeroed from the allocator, not filled with zeros by a pass of
            // its own over the batch. A batch of large outputs fails as an error naming its
            // size, never an abort.
            *v = crate::vision::zeroed_batch(total).ok_or_else(|| {
                Error::InvalidArgument(format!("an image batch of {total} elements cannot be allocated"))
            })?;
        }
        let item = item.max(1);
        let mut ok_pieces = oks.map(|o| o.chunks_mut(IMAGES_PER_PIECE));
        let pieces: Vec<Piece<'_, T>> = v
            .chunks_mut(IMAGES_PER_PIECE * item)
            .enumerate()
            .map(|(p, out)| (p * IMAGES_PER_PIECE, out, ok_pieces.as_mut().and_then(Iterator::next)))
            .collect();
        let helpers = self.images.helpers.min(pieces.len().saturating_sub(1));
        let pieces = Mutex::new(pieces.into_iter());
        // The failure of the lowest image so far: pieces past it are not started.
        let failed: Mutex<Option<(usize, Error)>> = Mutex::new(None);
        let stopped_before = |k: usize| {
            failed.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|(at, _)| *at < k)
        };
        let work = || {
            let mut scratch = self.images.take();
            loop {
                let next = pieces.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((first, out, mut ok)) = next else { break };
                if stopped_before(first) {
                    continue;
                }
                for (j, out) in out.chunks_exact_mut(item).enumerate() {
                    let flag = ok.as_deref_mut().and_then(|o| o.get_mut(j));
                    if let Err(e) = f(first + j, out, &mut scratch, flag) {
                        let mut failed = failed.lock().unwrap_or_else(|p| p.into_inner());
                        if failed.as_ref().is_none_or(|(at, _)| first + j < *at) {
                            *failed = Some((first + j, e));
                        }
                        break;
                    }
                }
            }
            self.images.give(scratch);
        };
        if helpers == 0 {
            work();
        } else {
            let work = &work;
            rayon::in_place_scope(|scope| {
                for _ in 0..helpers {
                    scope.spawn(move |_| work());
                }
                work();
            });
        }
        failed.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(Ok(()), |(_, e)| Err(e))
    }
}

/// An error once the loader is dropped: a step no one will take stops at its next image.
fn stop_if_dropped(dropped: &AtomicBool) -> Result<()> {
    if dropped.load(Ordering::Relaxed) {
        return Err(Error::LoaderStopped("the loader was stopped (closed or dropped)".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A later step that asks first still waits for the earlier one (the turn once went to the
    /// earliest step already waiting: a first batch could wait for the second to decode).
    #[test]
    fn turns_go_in_step_order_and_a_stop_ends_the_wait() {
        let shared = Arc::new(Shared::new(0, 0));
        let dropped = Arc::new(AtomicBool::new(false));
        let order = Arc::new(Mutex::new(Vec::new()));
        let later = {
            let (shared, dropped, order) = (Arc::clone(&shared), Arc::clone(&dropped), Arc::clone(&order));
            std::thread::spawn(move || {
                let _turn = shared.turn(1, &dropped).unwrap();
                order.lock().unwrap().push(1);
            })
        };
        // Give step 1 time to ask first.
        std::thread::sleep(Duration::from_millis(100));
        {
            let _turn = shared.turn(0, &dropped).unwrap();
            order.lock().unwrap().push(0);
        }
        later.join().unwrap();
        assert_eq!(*order.lock().unwrap(), [0, 1]);
        // Step 5 waits for 2, 3 and 4, which never come: a stop ends its wait with an error.
        let waiting = {
            let (shared, dropped) = (Arc::clone(&shared), Arc::clone(&dropped));
            std::thread::spawn(move || shared.turn(5, &dropped).map(drop))
        };
        dropped.store(true, Ordering::Relaxed);
        assert!(matches!(waiting.join().unwrap(), Err(Error::LoaderStopped(_))));
    }

    /// A fresh batch buffer large enough is advised huge pages before its first image lands:
    /// every batch a consumer keeps is written over fresh pages.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_fresh_batch_buffer_is_advised_huge_pages() {
        use crate::vision::{IMAGENET_MEAN, IMAGENET_STD, ImagePipeline};
        if !crate::vision::advice_visible() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let png = {
            let img = image::RgbImage::from_fn(8, 8, |x, y| image::Rgb([x as u8 * 30, y as u8 * 30, 9]));
            let mut out = std::io::Cursor::new(Vec::new());
            img.write_to(&mut out, image::ImageFormat::Png).unwrap();
            out.into_inner()
        };
        let mut w = crate::DatasetWriter::with_schema(
            dir.path().join("images"),
            crate::Schema::image(),
            crate::WriteOptions::new(),
        )
        .unwrap();
        w.append_bytes(&[&png, &png, &png, &png]).unwrap();
        w.finish().unwrap();
        // 4 images of 3 x 512 x 512 f32: 12 MiB.
        let pipeline = ImagePipeline::eval(512).normalize(IMAGENET_MEAN, IMAGENET_STD);
        let mut loader = crate::DataLoader::builder()
            .image_stream("image", crate::RaggedSource::open(dir.path().join("images")).unwrap(), pipeline)
            .batch_size(4)
            .threads(1)
            .build()
            .unwrap();
        let batch = loader.next_batch().unwrap().unwrap();
        let x = batch.get("image").unwrap().as_bytes();
        assert_eq!(x.len(), 4 * 3 * 512 * 512 * 4);
        assert!(crate::vision::advised_huge(x[x.len() / 2..].as_ptr()));
    }
}
