//! The endless loader yielding candle tensors.

use candle_core::Device;
use loaderx_core::{Batch, DType, DataLoader, LoaderBuilder, LoaderState};

use crate::{Converter, Result, TensorBatch};

/// loaderx's endless, step-ordered, resumable loader, yielding candle tensors (a
/// [`TensorBatch`]) or whatever a transform makes of them.
///
/// Gathering, the tensor construction and the transform all run on the loader's prefetch
/// threads, so the training thread only receives finished batches. On the CPU a stream's
/// gathered buffer becomes its tensor's storage without a copy; on CUDA it is copied to the device
/// once, on the prefetch thread (see the crate docs for what was and was not verified there).
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_candle as candle; }
/// use loaderx::candle::{CandleLoader, Converter, candle_core::Device};
/// use loaderx::{DataLoader, DatasetWriter, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-candle-loader-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut w = DatasetWriter::dense::<f32>(dir.join("x"), vec![4], WriteOptions::new())?;
/// w.append(&(0..400).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let builder = DataLoader::builder().open_stream("x", dir.join("x")).batch_size(8).seed(3);
/// let mut loader = CandleLoader::new(builder, Converter::new(&Device::Cpu))?;
/// let batch = loader.next_batch()?.expect("endless: None only ends a finite pass");
/// assert_eq!((batch.step(), batch.get("x")?.dims()), (0, &[8, 4][..]));
/// let saved = loader.state(); // `.state(saved)` on a new builder resumes at step 1
/// assert_eq!(saved.step, 1);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CandleLoader<O = TensorBatch> {
    loader: DataLoader<O>,
    converter: Converter,
}

impl CandleLoader<TensorBatch> {
    /// A loader of [`TensorBatch`]es made by `converter` from `builder`'s streams. Every
    /// stream's dtype is checked against the converter's widening here, not at the first batch.
    ///
    /// # Errors
    /// The loader's build errors ([`loaderx_core::LoaderBuilder::build_with`]);
    /// [`Error::Stream`](crate::Error::Stream) naming a stream of a dtype candle lacks that the
    /// converter does not widen (its source says which [`Widen`](crate::Widen) would).
    pub fn new(builder: LoaderBuilder, converter: Converter) -> Result<CandleLoader<TensorBatch>> {
        if let Some(name) = loaderx_core::adapter::unpadded_ragged(&builder).first() {
            return Err(crate::Error::Core(loaderx_core::Error::Config {
                what: "stream",
                reason: format!(
                    "stream {name:?} is ragged (records of different lengths), which no tensor holds: \
                     pad it, builder.pad({name:?}, Pad::longest()), or convert it in a transform of your \
                     own (CandleLoader::build_with)"
                ),
            }));
        }
        let loader = CandleLoader::build_with(builder, converter, |batch, conv| conv.batch(batch))?;
        let widen = loader.converter.widening();
        for (name, dtype, _) in loader.streams() {
            widen
                .target(*dtype)
                .map_err(|e| crate::Error::Stream { name: name.clone(), cause: Box::new(e) })?;
        }
        Ok(loader)
    }
}

impl<O: Send + 'static> CandleLoader<O> {
    /// A loader whose prefetch threads run `transform` on each raw batch, with `converter` to
    /// make tensors of its streams (after, say, drawing augmentations from
    /// [`Batch::rng`] or normalising bytes to floats).
    ///
    /// # Errors
    /// The loader's build errors ([`loaderx_core::LoaderBuilder::build_with`]).
    pub fn build_with<E, F>(
        builder: LoaderBuilder,
        converter: Converter,
        transform: F,
    ) -> Result<CandleLoader<O>>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
        F: Fn(Batch, &Converter) -> std::result::Result<O, E> + Send + Sync + 'static,
    {
        let conv = converter.clone();
        let loader = builder.build_with(move |batch| transform(batch, &conv))?;
        Ok(CandleLoader { loader, converter })
    }

    /// [`CandleLoader::build_with`] for a transform whose error is any boxed error: `?` on
    /// any error type inside it, and no `Ok::<_, E>` annotation.
    ///
    /// # Errors
    /// As [`CandleLoader::build_with`].
    pub fn build_map<F>(builder: LoaderBuilder, converter: Converter, transform: F) -> Result<CandleLoader<O>>
    where
        F: Fn(Batch, &Converter) -> std::result::Result<O, loaderx_core::BoxError> + Send + Sync + 'static,
    {
        CandleLoader::build_with(builder, converter, transform)
    }

    /// Steps of a finite pass (`LoaderBuilder::pass`), `None` for an endless loader.
    pub fn steps(&self) -> Option<u64> {
        self.loader.steps()
    }

    /// Steps of one epoch: a finite pass's, or one cycle of the endless sampler.
    pub fn steps_per_epoch(&self) -> u64 {
        self.loader.steps_per_epoch()
    }

    /// Records this rank reads in one finite pass (`None` for an endless loader).
    pub fn num_items(&self) -> Option<u64> {
        self.loader.num_items()
    }

    /// The next batch, in step order.
    ///
    /// # Errors
    /// A gather failure, or the transform's (or tensor construction's) failure as
    /// [`loaderx_core::Error::Transform`] naming the step; the loader goes on with the next step
    /// afterwards. [`loaderx_core::Error::LoaderStopped`] if a prefetch thread died.
    pub fn next_batch(&mut self) -> Result<Option<O>> {
        Ok(self.loader.next_batch()?)
    }

    /// The next step to be delivered.
    pub fn step(&self) -> u64 {
        self.loader.step()
    }

    /// Batches ready and waiting, and the most that may be in flight (see
    /// `loaderx_core::Prefetcher::prefetched`).
    pub fn prefetched(&self) -> (usize, usize) {
        self.loader.prefetched()
    }

    /// The state to save: a builder given it with [`LoaderBuilder::state`] resumes at the next
    /// undelivered step.
    pub fn state(&self) -> LoaderState {
        self.loader.state()
    }

    /// The device tensors are made on.
    pub fn device(&self) -> &Device {
        self.converter.device()
    }

    /// The converter the transform is given.
    pub fn converter(&self) -> &Converter {
        &self.converter
    }

    /// Rows per batch on this rank.
    pub fn batch_size(&self) -> usize {
        self.loader.batch_size()
    }

    /// Number of records in every stream.
    pub fn len(&self) -> usize {
        self.loader.len()
    }

    /// True when the streams are empty (never: the loader refuses that).
    pub fn is_empty(&self) -> bool {
        self.loader.is_empty()
    }

    /// (name, dtype, item shape) of each stream.
    pub fn streams(&self) -> &[(String, DType, Vec<usize>)] {
        self.loader.streams()
    }

    /// The loaderx loader underneath.
    pub fn loader(&self) -> &DataLoader<O> {
        &self.loader
    }

    /// The loaderx loader underneath, taken out.
    pub fn into_inner(self) -> DataLoader<O> {
        self.loader
    }
}

impl<O: Send + 'static> Iterator for CandleLoader<O> {
    type Item = Result<O>;

    /// Never `None` for an endless loader; `None` after the last step of a finite pass.
    fn next(&mut self) -> Option<Result<O>> {
        self.next_batch().transpose()
    }
}
