//! Framework layer: the loader layer's records handed to burn and candle as CPU tensors, next to
//! the frameworks' own data paths, all against the same gather ceiling. Built only with the
//! `burn` and/or `candle` features of `loaderx-bench` (which `loaderx-cli`'s features of the same
//! names turn on).
//!
//! Every contender produces a `[256, 3072]` f32 tensor of the same records on the CPU:
//! - burn: loaderx's `StepLoader` (dense fast path: the gathered buffer becomes the tensor's
//!   data) against burn's `DataLoaderBuilder` (2 workers, shuffled) over an `InMemDataset` of the
//!   records and, with `burn-sqlite`, over a `SqliteDataset` of them, both with a batcher that
//!   concatenates the items into one `TensorData` (the cheapest batcher burn allows);
//! - candle: loaderx's `CandleLoader` and `get_batch` + `to_tensor` on the calling thread,
//!   against one tensor per sample `Tensor::stack`ed on the calling thread (the
//!   Dataset-`get`-then-collate pattern).
//!
//! loaderx's loaders prefetch a bounded number of batches, drained untimed at the start of each
//! round as in the loader layer. burn's `DataLoader` workers run ahead without such a bound, so
//! each burn-side contender (loaderx's `StepLoader` included, for symmetry) is timed a whole
//! epoch at a time from a fresh `iter()`, start-up included, and reported per batch.

use std::hint::black_box;

use loaderx_core::{DataLoader, DenseDataset, DenseSource, SamplerMode};

use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing::{self, Contender, Work};

const BATCH: u32 = 256;
const GATHER: &str = "gather (calling thread)";

/// What the adapters share with the loader layer: its records, their shape and its settings.
pub(crate) struct Shared<'a> {
    pub(crate) source: &'a DenseSource,
    pub(crate) elems: usize,
    pub(crate) threads: usize,
    /// Batches a loader can hold ready (drained untimed each round).
    pub(crate) queued: u32,
}

/// A contender's name and the baseline its ratio is taken against.
type Named = (&'static str, &'static str);

/// Measures the framework contenders and adds their rows and table.
///
/// # Errors
/// Reading the records, building a loader, or (with `burn-sqlite`) writing the SQLite database.
pub(crate) fn run(cfg: &Config, report: &mut Report, shared: &Shared<'_>) -> anyhow::Result<()> {
    let typed: DenseDataset<f32> = shared.source.clone().typed()?;
    let builder = DataLoader::builder()
        .stream("x", shared.source.clone())
        .batch_size(BATCH as usize)
        .mode(SamplerMode::Cyclic)
        .seed(7)
        .threads(shared.threads);
    let sampler = crate::loader::sampler_of(&builder)?;
    // Built before the contenders, which borrow its loaders.
    #[cfg(feature = "burn")]
    let burn_parts = burn_side::Parts::new(cfg, shared, &typed, &builder)?;
    let mut contenders: Vec<Contender<'_>> = Vec::new();
    let mut named: Vec<Named> = Vec::new();
    let gather: Work<'_> = {
        let (sampler, typed) = (&sampler, &typed);
        let mut idx = vec![0u32; BATCH as usize];
        let mut out = vec![0f32; BATCH as usize * shared.elems];
        let mut step = 0u64;
        Box::new(move || {
            sampler.fill(step, &mut idx).expect("a buffer of the batch size");
            typed.gather_into(&idx, &mut out).expect("gather from a dataset this run wrote");
            step += 1;
            black_box(&out);
        })
    };
    contenders.push(Contender::new(GATHER, gather));

    #[cfg(feature = "burn")]
    burn_parts.contenders(&mut contenders, &mut named);
    #[cfg(feature = "candle")]
    candle_side::contenders(&builder, shared, &typed, &sampler, &mut contenders, &mut named)?;

    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);

    let batch_mib = f64::from(BATCH) * (shared.elems * 4) as f64 / (1 << 20) as f64;
    let workload = format!("{} records of 12 KiB, batch {BATCH}, CPU tensors", shared.source.len());
    let mut s = Section::new(
        format!(
            "4. Framework adapters — the loader's records as [{BATCH}, {}] f32 CPU tensors, {} threads",
            shared.elems, shared.threads
        ),
        &["contender", "batches/s", "per batch", "throughput", "vs gather", "vs"],
    );
    for (name, base) in std::iter::once((GATHER, GATHER)).chain(named.iter().copied()) {
        let secs = t.median_secs(name);
        let bps = 1.0 / secs;
        let vs = (name != GATHER).then(|| (GATHER, t.speed_vs(name, GATHER)));
        report.push_rates(
            ("adapters", name, &workload),
            &[(bps, "batches/s"), (bps * batch_mib, "MiB/s")],
            vs,
        );
        s.rows.push(vec![
            name.into(),
            format!("{bps:.1}"),
            report::duration(secs),
            format!("{:.0} MiB/s", bps * batch_mib),
            if name == GATHER { "baseline".into() } else { report::ratio(t.speed_vs(name, GATHER)) },
            if base == GATHER {
                String::new()
            } else {
                format!("{} ({base})", report::ratio(t.speed_vs(name, base)))
            },
        ]);
    }
    s.notes.push(
        "Each contender ends with a tensor on the CPU holding the batch. `vs gather`: speed relative to \
         sampling and gathering the same batches into a reused buffer on the calling thread; `vs`: \
         against the framework's own path for the same batch."
            .into(),
    );
    report.sections.push(s);
    Ok(())
}

#[cfg(feature = "burn")]
mod burn_side {
    use std::sync::Arc;

    use loaderx_burn::burn;
    use loaderx_burn::{DenseBatch, StepLoader, StepLoaderBuilder};

    use burn::data::dataloader::batcher::Batcher;
    use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderBuilder};
    use burn::data::dataset::InMemDataset;
    use burn::tensor::{Device, Tensor, TensorData};
    use loaderx_core::{DenseDataset, LoaderBuilder};
    use serde::{Deserialize, Serialize};

    use super::{BATCH, Contender, GATHER, Named, Shared, black_box};
    use crate::run::Config;

    pub(super) const STEP_LOADER: &str = "loaderx → burn StepLoader";
    pub(super) const IN_MEM: &str = "burn DataLoader, InMemDataset";
    #[cfg(feature = "burn-sqlite")]
    pub(super) const SQLITE: &str = "burn DataLoader, SqliteDataset";

    /// One record as a burn item (also the SQLite row, MessagePack-encoded by burn's writer).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub(super) struct Item {
        x: Vec<f32>,
    }

    /// Concatenates the items into one `TensorData`: a single copy, the cheapest batcher.
    #[derive(Debug, Clone)]
    struct Concat {
        elems: usize,
    }

    impl Batcher<Item, Tensor<2>> for Concat {
        fn batch(&self, items: Vec<Item>, device: &Device) -> Tensor<2> {
            let b = items.len();
            let mut flat = Vec::with_capacity(b * self.elems);
            for item in &items {
                flat.extend_from_slice(&item.x);
            }
            Tensor::from_data(TensorData::new(flat, [b, self.elems]), device)
        }
    }

    /// `SqliteDataset` as `DataLoaderBuilder` takes it: burn's loaders want `Dataset<I>` (error
    /// `DatasetError`), `SqliteDataset` has its own error type, so users wrap it like this.
    #[cfg(feature = "burn-sqlite")]
    struct Sqlite(burn::data::dataset::SqliteDataset<Item>);

    #[cfg(feature = "burn-sqlite")]
    impl burn::data::dataset::Dataset<Item> for Sqlite {
        fn get(&self, index: usize) -> Result<Item, burn::data::dataset::DatasetError> {
            self.0.get(index).map_err(burn::data::dataset::DatasetError::new)
        }

        fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<Item>, burn::data::dataset::DatasetError> {
            self.0.get_many(indexes).map_err(burn::data::dataset::DatasetError::new)
        }

        fn len(&self) -> usize {
            self.0.len()
        }
    }

    /// The burn loaders, built before the contenders that borrow them.
    pub(super) struct Parts {
        in_mem: Arc<dyn BurnDataLoader<Tensor<2>>>,
        #[cfg(feature = "burn-sqlite")]
        sqlite: (tempfile::TempDir, Arc<dyn BurnDataLoader<Tensor<2>>>),
        steps: StepLoader<DenseBatch>,
    }

    fn loader<D>(dataset: D, elems: usize, device: &Device) -> Arc<dyn BurnDataLoader<Tensor<2>>>
    where
        D: burn::data::dataset::Dataset<Item> + 'static,
    {
        DataLoaderBuilder::new(Concat { elems })
            .batch_size(BATCH as usize)
            .shuffle(7)
            .num_workers(2)
            .set_device(device.clone())
            .build(dataset)
    }

    impl Parts {
        pub(super) fn new(
            cfg: &Config,
            shared: &Shared<'_>,
            typed: &DenseDataset<f32>,
            builder: &LoaderBuilder,
        ) -> anyhow::Result<Parts> {
            let device = Device::flex();
            let steps = StepLoaderBuilder::from(builder.clone()).set_device(device.clone()).build()?;
            let all: Vec<u32> = (0..shared.source.len() as u32).collect();
            let items: Vec<Item> =
                typed.get_vec(&all)?.chunks_exact(shared.elems).map(|x| Item { x: x.to_vec() }).collect();
            #[cfg(feature = "burn-sqlite")]
            let sqlite = {
                use burn::data::dataset::{SqliteDataset, SqliteDatasetWriter};
                cfg.progress("adapters: writing the SQLite database");
                let dir = tempfile::Builder::new().prefix("loaderx-bench-").tempdir_in(&cfg.dir)?;
                let db = dir.path().join("items.db");
                let mut w = SqliteDatasetWriter::<Item>::new(&db, true)?;
                for item in &items {
                    w.write("train", item)?;
                }
                w.set_completed()?;
                let ds = SqliteDataset::<Item>::from_db_file(&db, "train")?;
                (dir, loader(Sqlite(ds), shared.elems, &device))
            };
            #[cfg(not(feature = "burn-sqlite"))]
            let _ = cfg;
            let in_mem = loader(InMemDataset::new(items), shared.elems, &device);
            Ok(Parts {
                in_mem,
                #[cfg(feature = "burn-sqlite")]
                sqlite,
                steps,
            })
        }

        pub(super) fn contenders<'a>(&'a self, contenders: &mut Vec<Contender<'a>>, named: &mut Vec<Named>) {
            // `StepLoader` is a burn `DataLoader`: iterated exactly as burn's own.
            contenders.push(epochs(STEP_LOADER, &self.steps, |mut b: DenseBatch| {
                black_box(b.float::<2>("x").expect("stream x"));
            }));
            named.push((STEP_LOADER, IN_MEM));
            contenders.push(epochs(IN_MEM, self.in_mem.as_ref(), |t: Tensor<2>| drop(black_box(t))));
            named.push((IN_MEM, GATHER));
            #[cfg(feature = "burn-sqlite")]
            {
                contenders.push(epochs(SQLITE, self.sqlite.1.as_ref(), |t: Tensor<2>| drop(black_box(t))));
                named.push((SQLITE, GATHER));
            }
        }
    }

    /// One whole epoch per call from a fresh iterator of a burn `DataLoader`, as a contender
    /// whose times are per batch (an epoch's items over the batch size).
    fn epochs<'a, O: 'a>(
        name: &str,
        loader: &'a dyn BurnDataLoader<O>,
        mut consume: impl FnMut(O) + 'a,
    ) -> Contender<'a> {
        let batches = loader.num_items() as f64 / f64::from(BATCH);
        let work: super::Work<'a> = Box::new(move || {
            let mut n = 0;
            for batch in loader.iter() {
                consume(batch.expect("a batch from records this run wrote"));
                n += 1;
            }
            assert!(n > 0, "a burn DataLoader yields batches every epoch");
        });
        Contender { batches, ..Contender::new(name, work) }
    }
}

#[cfg(feature = "candle")]
mod candle_side {
    use loaderx_candle::candle_core::{Device, Tensor};
    use loaderx_candle::{CandleLoader, Converter, Widen, to_tensor};
    use loaderx_core::{DenseDataset, LoaderBuilder, Sampler};

    use super::{BATCH, Contender, GATHER, Named, Shared, Work, black_box};

    const LOADER: &str = "loaderx → CandleLoader";
    const CALLING: &str = "loaderx get_batch + to_tensor (calling thread)";
    const STACK: &str = "candle per-sample tensors + stack (calling thread)";

    pub(super) fn contenders<'a>(
        builder: &LoaderBuilder,
        shared: &'a Shared<'_>,
        typed: &'a DenseDataset<f32>,
        sampler: &'a Sampler,
        contenders: &mut Vec<Contender<'a>>,
        named: &mut Vec<Named>,
    ) -> anyhow::Result<()> {
        let loader = std::rc::Rc::new(std::cell::RefCell::new(CandleLoader::new(
            builder.clone(),
            Converter::new(&Device::Cpu),
        )?));
        let watched = std::rc::Rc::clone(&loader);
        contenders.push(Contender {
            untimed: shared.queued,
            settle: Some(Box::new(move || crate::timing::settle(|| watched.borrow().prefetched()))),
            ..Contender::new(
                LOADER,
                Box::new(move || {
                    let mut b =
                        loader.borrow_mut().next_batch().expect("a batch").expect("an endless loader");
                    black_box(b.take("x").expect("stream x"));
                }),
            )
        });
        named.push((LOADER, GATHER));
        let serial = |per_sample: bool| -> Work<'a> {
            let mut idx = vec![0u32; BATCH as usize];
            let mut step = 0u64;
            let source = shared.source;
            Box::new(move || {
                sampler.fill(step, &mut idx).expect("a buffer of the batch size");
                step += 1;
                let t = if per_sample {
                    let items: Vec<Tensor> = idx
                        .iter()
                        .map(|&i| {
                            let one = typed.get_vec(&[i]).expect("gather");
                            Tensor::from_vec(one, source.item_shape(), &Device::Cpu).expect("tensor")
                        })
                        .collect();
                    Tensor::stack(&items, 0).expect("stack")
                } else {
                    to_tensor(source.get_batch(&idx).expect("gather"), &Device::Cpu, Widen::Never)
                        .expect("tensor")
                };
                black_box(t);
            })
        };
        contenders.push(Contender::new(CALLING, serial(false)));
        named.push((CALLING, STACK));
        contenders.push(Contender::new(STACK, serial(true)));
        named.push((STACK, GATHER));
        Ok(())
    }
}
