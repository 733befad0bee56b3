//! The endless data loader: batches gathered and transformed on the engine's prefetch threads.

use std::sync::{Arc, Mutex};

use loaderx_core::{Batch, DataLoader, Error as CoreError, LoaderBuilder, LoaderState, Stopper};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::{PyTraverseError, PyVisit};

use crate::errors::{IntoPy, Raised};
use crate::{arrays, lent};

/// The loader, by whether a Python transform runs on its threads.
enum Inner {
    /// Batches converted to a dict of arrays by the consumer.
    Plain(DataLoader<Batch>),
    /// Batches converted and passed to the transform on the prefetch threads.
    Mapped(DataLoader<Py<PyAny>>),
}

impl Inner {
    fn state(&self) -> LoaderState {
        match self {
            Inner::Plain(l) => l.state(),
            Inner::Mapped(l) => l.state(),
        }
    }

    fn stopper(&self) -> Stopper {
        match self {
            Inner::Plain(l) => l.stopper(),
            Inner::Mapped(l) => l.stopper(),
        }
    }
}

/// What one `next` brought back across the released GIL.
enum Out {
    Batch(Batch),
    Object(Py<PyAny>),
}

/// An endless (or, with `epochs`, finite) loader over named streams gathered at the same indices.
///
/// Threads (free-threaded audit): the engine's loader is behind a mutex taken only with the GIL
/// released, so `next` from many threads hands each step's batch to exactly one of them, in step
/// order; `state`, `step` and `close` wait for a `next` in progress. Transforms run on the
/// prefetch threads, each attached to the interpreter while its transform runs (in parallel on a
/// free-threaded build); a transform calling its own loader is refused by a per-thread guard.
#[pyclass(module = "loaderx._native", frozen, weakref)]
pub struct Loader {
    inner: Mutex<Option<Inner>>,
    /// Stops the loader's long steps without its lock, which a `next` in progress holds until
    /// its batch comes: `close` then ends that wait within an image, not a step.
    stopper: Stopper,
    /// The process whose threads these are: in a forked child (another process id) they do not
    /// exist, so the loader refuses to wait for them and is never joined there.
    pid: u32,
    /// This loader's number, which its transform's thread carries while the transform runs
    /// ([`IN_TRANSFORM_OF`]): a call on the loader from its own transform is refused, not
    /// left waiting for the lock the waiting `next` holds.
    id: u64,
    /// A batch a `next` brought back as a signal's exception (Ctrl-C) was raised instead, and
    /// the state before it: the next `next` returns it, `state` and `step` are those before it.
    held: Mutex<Option<(Py<PyAny>, LoaderState)>>,
    /// The transform the prefetch threads call (also held by them): shown to Python's cycle
    /// collector, which otherwise never saw a transform that refers back to its loader (a
    /// trainer's bound method) and kept both, with the threads and the store, for good (look 119,
    /// L119-1).
    transform: Mutex<Option<Arc<Py<PyAny>>>>,
}

std::thread_local! {
    /// The loader whose transform this thread is running, 0 for none: a re-entry guard.
    static IN_TRANSFORM_OF: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Loaders' numbers, from 1.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// `batch` as `{name: array}`: a dense stream's array views the loader's buffer (no copy), lent
/// until NumPy drops it ([`lent`]); an unpadded ragged stream is a list of arrays, views of one
/// buffer.
fn batch_dict(py: Python<'_>, mut batch: Batch) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    let ragged: Vec<String> = batch.ragged_names().map(str::to_owned).collect();
    for name in ragged {
        let Some(records) = batch.take_ragged(&name) else { continue };
        let mut shape: Vec<isize> = vec![-1];
        shape.extend(records.row_shape().iter().map(|&d| d as isize));
        let (offsets, values) = records.into_parts();
        let values = arrays::flat(py, values)?.call_method1("reshape", (shape,))?;
        let list = PyList::empty(py);
        for w in offsets.windows(2) {
            list.append(values.get_item(pyo3::types::PySlice::new(py, w[0] as isize, w[1] as isize, 1))?)?;
        }
        dict.set_item(name, list)?;
    }
    let names: Vec<String> = batch.names().map(str::to_owned).collect();
    for name in names {
        if let Some(lent) = batch.lend(&name) {
            dict.set_item(name, lent::array(py, lent)?)?;
        }
    }
    Ok(dict)
}

impl Loader {
    fn locked<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> loaderx_core::Result<R> + Send,
    ) -> PyResult<R> {
        self.not_from_own_transform()?;
        if self.forked() {
            return Err(PyRuntimeError::new_err(format!(
                "this loader's threads belong to process {} and do not exist in this forked one: \
                 make a loader in each process (loaderx.torch.IterableLoader does)",
                self.pid
            )));
        }
        // Not through fork::detach: the prefetch threads do the work, and a transform on one of
        // them may read a dataset, which in a forked child takes that child's one-thread pool.
        py.detach(|| {
            let mut guard = self.inner.lock().map_err(|_| "poisoned by a panic")?;
            let inner = guard.as_mut().ok_or("closed")?;
            Ok::<_, &'static str>(f(inner))
        })
        .map_err(|what| PyRuntimeError::new_err(format!("the loader is {what}")))?
        .py()
    }

    /// Refuses a call made from this loader's own transform: it runs on a prefetch thread while
    /// the caller of `next` holds the loader and waits for that very batch.
    fn not_from_own_transform(&self) -> PyResult<()> {
        if IN_TRANSFORM_OF.with(std::cell::Cell::get) == self.id {
            return Err(PyRuntimeError::new_err(
                "a loader's transform cannot use its own loader (step, state, closed, close, next): it runs \
                 on the loader's threads while the loader waits for its result",
            ));
        }
        Ok(())
    }

    /// Whether this is a forked copy of the process that made the loader.
    fn forked(&self) -> bool {
        self.pid != std::process::id()
    }

    /// Stops the threads. The lock is waited for and the threads joined without the GIL: a
    /// `next` in progress on another thread holds the lock until its batch comes, and that
    /// batch's transform needs the GIL to finish.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.not_from_own_transform()?;
        if self.forked() {
            // Nothing to stop here, and the lock may have been held by a thread of the parent.
            return Ok(());
        }
        drop(self.take_held());
        self.stopper.stop();
        py.detach(|| drop(self.inner.lock().ok().and_then(|mut g| g.take())));
        Ok(())
    }
}

impl Loader {
    /// The batch held back from a `next` a signal interrupted, and the state before it.
    fn take_held(&self) -> Option<(Py<PyAny>, LoaderState)> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The state before a held batch, when one is held (never in a forked copy, which refuses
    /// as `next` does).
    fn held_state(&self) -> Option<LoaderState> {
        if self.forked() {
            return None;
        }
        self.held.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(_, s)| s.clone())
    }

    /// Starts a loader from `b` (the Python builder's settings), `transform` run on its threads.
    pub(crate) fn start(py: Python<'_>, b: LoaderBuilder, transform: Option<Py<PyAny>>) -> PyResult<Loader> {
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut shown = None;
        let inner = match transform {
            None => Inner::Plain(crate::fork::detach(py, || b.build())?.py()?),
            Some(f) => {
                let f = Arc::new(f);
                shown = Some(Arc::clone(&f));
                // Built as the plain loader is (`fork::detach`): in a forked child the builder
                // must see the child's own pool, never the parent's, whose threads it lacks.
                let loader = crate::fork::detach(py, || {
                    b.build_with(move |batch: Batch| {
                        Python::attach(|py| {
                            let dict = batch_dict(py, batch).map_err(|e| Raised::new(py, e))?;
                            let outer = IN_TRANSFORM_OF.with(|c| c.replace(id));
                            let out = f.call1(py, (dict,));
                            IN_TRANSFORM_OF.with(|c| c.set(outer));
                            out.map_err(|e| Raised::new(py, crate::errors::from_transform(py, e)))
                        })
                    })
                })?
                .py()?;
                Inner::Mapped(loader)
            }
        };
        Ok(Loader {
            stopper: inner.stopper(),
            inner: Mutex::new(Some(inner)),
            pid: std::process::id(),
            id,
            held: Mutex::new(None),
            transform: Mutex::new(shown),
        })
    }
}

#[pymethods]
impl Loader {
    /// The next batch: a dict of arrays, or what the transform returned.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.not_from_own_transform()?;
        if !self.forked()
            && let Some((batch, _)) = self.take_held()
        {
            return Ok(batch);
        }
        let (before, out) = self.locked(py, |inner| {
            let before = inner.state();
            let out = match inner {
                Inner::Plain(l) => l.next_batch().map(|b| b.map(Out::Batch)),
                Inner::Mapped(l) => l.next_batch().map(|o| o.map(Out::Object)),
            };
            out.map(|o| (before, o))
        })?;
        let batch = match out {
            Some(Out::Batch(b)) => batch_dict(py, b)?.into_any().unbind(),
            Some(Out::Object(o)) => o,
            None => return Err(pyo3::exceptions::PyStopIteration::new_err("the pass is over")),
        };
        // A signal that came during the wait (Ctrl-C) is raised as this call returns, and the
        // batch would be lost though the state counts it (look 111, L111-1: a checkpoint taken
        // on Ctrl-C resumed past a batch never seen). Raised here instead, the batch kept for
        // the next call and the state put back before it.
        if let Err(signal) = py.check_signals() {
            *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some((batch, before));
            return Err(signal);
        }
        Ok(batch)
    }

    /// The global batch size (given, or the restored state's).
    fn batch_size(&self, py: Python<'_>) -> PyResult<u32> {
        self.locked(py, |inner| Ok(inner.state().sampler.batch_size))
    }

    /// The next step to be delivered.
    fn step(&self, py: Python<'_>) -> PyResult<u64> {
        if let Some(state) = self.held_state() {
            return Ok(state.step);
        }
        self.locked(py, |inner| Ok(inner.state().step))
    }

    /// Steps in the pass (finite loaders), None when endless.
    fn steps(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.locked(py, |inner| {
            Ok(match inner {
                Inner::Plain(l) => l.steps(),
                Inner::Mapped(l) => l.steps(),
            })
        })
    }

    /// Batch buffers allocated so far; the others were recycled from batches NumPy let go.
    #[pyo3(name = "_buffers_allocated")]
    fn buffers_allocated(&self, py: Python<'_>) -> PyResult<usize> {
        self.locked(py, |inner| {
            Ok(match inner {
                Inner::Plain(l) => l.buffers_allocated(),
                Inner::Mapped(l) => l.buffers_allocated(),
            })
        })
    }

    /// Where the loader is, as bytes a new loader resumes from (`state=`).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let state = match self.held_state() {
            Some(state) => state,
            None => self.locked(py, |inner| Ok(inner.state()))?,
        };
        Ok(PyBytes::new(py, &state.to_bytes()))
    }

    /// Stops and joins every thread; later calls raise.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.stop(py)
    }

    /// The Python objects this loader holds, for the cycle collector: its transform, the
    /// transform's results and exceptions waiting in the prefetch window (look 120, L120-1) and a
    /// held batch, each skipped while another thread has it locked (a collection then keeps the
    /// loader, and a later one sees it whole).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(t) = self.transform.try_lock()
            && let Some(t) = t.as_ref()
        {
            visit.call(&**t)?;
        }
        if let Ok(inner) = self.inner.try_lock()
            && let Some(Inner::Mapped(loader)) = inner.as_ref()
        {
            let mut visited = Ok(());
            loader.try_for_each_prefetched(|out| {
                if visited.is_ok() {
                    visited = match out {
                        Ok(object) => visit.call(object),
                        Err(CoreError::Transform { source, .. }) => {
                            source.downcast_ref::<Raised>().map_or(Ok(()), |r| visit.call(r.value()))
                        }
                        Err(_) => Ok(()),
                    };
                }
            });
            visited?;
        }
        if let Ok(h) = self.held.try_lock()
            && let Some((batch, _)) = h.as_ref()
        {
            visit.call(batch)?;
        }
        Ok(())
    }

    /// A cycle through this loader broken by the collector: the loader stopped and its threads
    /// joined without the GIL (their closure drops its hold on the transform), then its own
    /// holds dropped. Skipped in a forked copy, on the loader's own prefetch thread (it cannot
    /// join itself), and while a `next` holds the loader (then it is not garbage).
    fn __clear__(&self) {
        if self.forked() || IN_TRANSFORM_OF.with(|c| c.get()) == self.id {
            return;
        }
        let Ok(mut guard) = self.inner.try_lock() else { return };
        self.stopper.stop();
        let inner = guard.take();
        drop(guard);
        Python::attach(|py| py.detach(move || drop(inner)));
        drop(self.transform.lock().unwrap_or_else(|e| e.into_inner()).take());
        drop(self.held.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Whether `close` was called (the lock waited for without the GIL, as in `stop`).
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        self.not_from_own_transform()?;
        // A forked copy delivers nothing: closed.
        Ok(self.forked() || py.detach(|| self.inner.lock().map_or(true, |g| g.is_none())))
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().ok().and_then(Option::take);
        if self.forked() {
            // Joining threads of another process is undefined: the copy is left as it is.
            std::mem::forget(inner);
            return;
        }
        if inner.is_some() {
            // Dropped by the garbage collector, with the GIL: joined without it.
            Python::attach(|py| py.detach(move || drop(inner)));
        }
    }
}
