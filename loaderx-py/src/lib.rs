//! `loaderx._native`: the extension module under the `loaderx` Python package.
//!
//! Each class wraps one engine type of loaderx-core and each hot call is one call into Rust with
//! the GIL released: a gather writes straight into the NumPy array it returns (or the caller's),
//! a batch's arrays are the loader's own buffers lent to NumPy without a copy (back to the
//! loader's pool when NumPy lets them go). The Python package (`python/loaderx`) gives them the
//! seeds' names and argument checking; nothing here implements what loaderx-core already does.

// `unsafe` only in `lent` (a NumPy array over a buffer its base object owns).
#![deny(unsafe_code)]

mod arrays;
mod arrow;
mod builder;
mod chunker;
mod dataset;
mod errors;
mod fork;
mod lent;
mod loader;
mod sampler;
mod set;
mod store;
mod tokens;
#[cfg(feature = "images")]
mod vision;

use pyo3::prelude::*;

/// The native half of the `loaderx` package.
///
/// Declared free-threading-ready (`gil_used = false`): a free-threaded CPython (3.14t) loading it
/// keeps the GIL off. The audit behind that is a "Threads" paragraph on each class: every class
/// is frozen with its engine state behind a lock taken with the GIL released, or immutable, except
/// `LoaderBuilder` (PyO3's borrow flag refuses a racing setter); the module's statics are
/// `OnceLock`s, a mutex and an atomic counter, and its one thread-local is a per-thread re-entry
/// guard. tests/test_threads.py shares one loader, one store and one sampler among many threads.
/// (The abi3 wheel loads on GIL builds only; a free-threaded one gets its own `cp314t` wheel.)
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::loaded();
    // NumPy's C API and rust-numpy's borrow flags are set up at their first use, behind
    // once-cells that a thread fills while it imports NumPy with the GIL let go: a child forked
    // in that window waited for them for good (its first `delete` hung, 1 run in 11 with a
    // thread's first gather racing the fork). Filled here, at import, before any other thread
    // can use them. NumPy is a dependency of the package; without it the first array says so.
    if m.py().import("numpy").is_ok() {
        let probe = numpy::PyArray1::<u8>::zeros(m.py(), 1, false);
        drop(numpy::PyArrayMethods::readonly(&probe));
    }
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("REMOTE", cfg!(feature = "remote"))?;
    // The sampler's modes by name, in the order of their integer codes: core's one table.
    let modes: Vec<&str> = loaderx_core::SamplerMode::ALL.iter().map(|m| m.name()).collect();
    m.add("SAMPLER_MODES", pyo3::types::PyTuple::new(m.py(), modes)?)?;
    m.add_class::<store::Store>()?;
    m.add_class::<dataset::Dense>()?;
    m.add_class::<dataset::Ragged>()?;
    #[cfg(feature = "images")]
    m.add_class::<vision::Images>()?;
    m.add_class::<dataset::Writer>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<loader::Loader>()?;
    m.add_class::<builder::Builder>()?;
    m.add_class::<tokens::Tokens>()?;
    m.add_class::<tokens::Writer>()?;
    m.add_function(wrap_pyfunction!(tokens::write_llmc, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::pad_records, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::arrow_records, m)?)?;
    m.add_function(wrap_pyfunction!(vision::image_folder, m)?)?;
    m.add_function(wrap_pyfunction!(set::stitch, m)?)?;
    m.add_function(wrap_pyfunction!(set::set_parts, m)?)?;
    #[cfg(feature = "remote")]
    {
        m.add_function(wrap_pyfunction!(set::remote::push, m)?)?;
        m.add_function(wrap_pyfunction!(set::remote::stitch_remote, m)?)?;
        m.add_function(wrap_pyfunction!(set::remote::list_remote_dirs, m)?)?;
        m.add_function(wrap_pyfunction!(set::remote::remove_remote, m)?)?;
        m.add_function(wrap_pyfunction!(set::remote::remote_set_parts, m)?)?;
        m.add_function(wrap_pyfunction!(set::remote::list_remote_objects, m)?)?;
    }
    m.add_function(wrap_pyfunction!(chunker::plan_file, m)?)?;
    m.add_function(wrap_pyfunction!(chunker::abi_version, m)?)?;
    m.add_function(wrap_pyfunction!(chunker::capabilities, m)?)?;
    Ok(())
}
