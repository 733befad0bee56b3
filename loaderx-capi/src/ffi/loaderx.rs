//! The exports of `loaderx.h`.

use std::ffi::c_char;

use super::*;

/// The `lx_*` ABI version.
#[unsafe(no_mangle)]
pub extern "C" fn lx_abi_version() -> u32 {
    crate::ABI_VERSION
}

/// The calling thread's last `lx_*` error, or null after a call that succeeded.
#[unsafe(no_mangle)]
pub extern "C" fn lx_last_error() -> *const c_char {
    Slot::Lx.pointer()
}

/// The `LX_*` name of an error code (a static string).
#[unsafe(no_mangle)]
pub extern "C" fn lx_error_name(code: i32) -> *const c_char {
    error::code_name(code).as_ptr()
}

/// Opens or creates a store.
///
/// # Safety
/// `path` is null or NUL-terminated; `out_store` is null or valid for a write of one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_open(
    path: *const c_char,
    mode: i32,
    format: i32,
    out_store: *mut *mut LxStore,
) -> i32 {
    lx_call("lx_store_open", || {
        // SAFETY: passed on from the caller.
        let path_span = unsafe { Span::of_c_str(path, "path") };
        disjoint(&[Span::of(out_store, 1, "out_store")], &[path_span])?;
        // SAFETY: passed on from the caller.
        let out = unsafe { Out::new(out_store, "out_store") }?;
        // SAFETY: passed on from the caller.
        let path = unsafe { lx_path(path, "path") }?;
        let store = LxStore::open(&path, mode, format)?;
        out.set(Box::into_raw(Box::new(store)));
        Ok(())
    })
}

/// Closes a store; null is a no-op.
///
/// # Safety
/// `store` is null or a live store handle, closed once, with no call on it in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_close(store: *mut LxStore) {
    if store.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `lx_store_open` and freed only here, once.
    let store = unsafe { Box::from_raw(store) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(store)));
}

/// The number of records.
///
/// # Safety
/// `store` is null or a live store handle; `out_len` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_len(store: *const LxStore, out_len: *mut u64) -> i32 {
    lx_call("lx_store_len", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe {
            (handle_apart(store, "store", &[Span::of(out_len, 1, "out_len")])?, Out::new(out_len, "out_len")?)
        };
        out.set(store.len()?);
        Ok(())
    })
}

/// The store's format (`LX_FORMAT_V1` or `LX_FORMAT_V2`).
///
/// # Safety
/// `store` is null or a live store handle; `out_format` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_format(store: *const LxStore, out_format: *mut i32) -> i32 {
    lx_call("lx_store_format", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_format, 1, "out_format")])?,
                Out::new(out_format, "out_format")?,
            )
        };
        out.set(store.format()?);
        Ok(())
    })
}

/// The records `data[offsets[i]..offsets[i + 1]]` for `i < count`, once neither `data` nor
/// `offsets` overlaps one of the call's `outputs`.
///
/// # Safety
/// `offsets` is null or readable for `count + 1` values, `data` for `offsets[count]` bytes.
unsafe fn records_in<'a>(
    data: *const u8,
    offsets: *const u64,
    count: usize,
    outputs: &[Span<'_>],
) -> Outcome<Vec<&'a [u8]>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let entries = count.checked_add(1).ok_or_else(|| Failure::argument("count is too large"))?;
    // SAFETY: passed on from the caller.
    let offsets = unsafe { slice_in(offsets, entries, "offsets") }?;
    let end = usize::try_from(offsets[count]).map_err(|_| {
        Failure::argument(format!("offsets[{count}] = {} does not fit in memory", offsets[count]))
    })?;
    disjoint(outputs, &[Span::of(offsets.as_ptr(), entries, "offsets"), Span::of(data, end, "data")])?;
    // SAFETY: passed on from the caller.
    let data = unsafe { slice_in(data, end, "data") }?;
    store::split_records(data, offsets)
}

/// Appends `count` records in one batch with one codec.
///
/// # Safety
/// `store` is null or a live store handle; `offsets` is null or readable for `count + 1` values,
/// `data` for `offsets[count]` bytes; `out_first` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_append(
    store: *const LxStore,
    data: *const u8,
    offsets: *const u64,
    count: usize,
    codec: i32,
    out_first: *mut u64,
) -> i32 {
    lx_call("lx_store_append", || {
        // SAFETY: passed on from the caller.
        let (store, records, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_first, 1, "out_first")])?,
                records_in(data, offsets, count, &[Span::of(out_first, 1, "out_first")])?,
                Out::optional(out_first, "out_first")?,
            )
        };
        let first = store.append(&records, codec)?;
        if let Some(out) = out {
            out.set(first);
        }
        Ok(())
    })
}

/// Trains the `zstd_dict` dictionary on sample records.
///
/// # Safety
/// As [`lx_store_append`]; `out_trained` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_train_dictionary(
    store: *const LxStore,
    data: *const u8,
    offsets: *const u64,
    count: usize,
    out_trained: *mut i32,
) -> i32 {
    lx_call("lx_store_train_dictionary", || {
        // SAFETY: passed on from the caller.
        let (store, samples, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_trained, 1, "out_trained")])?,
                records_in(data, offsets, count, &[Span::of(out_trained, 1, "out_trained")])?,
                Out::optional(out_trained, "out_trained")?,
            )
        };
        let trained = store.train_dictionary(&samples)?;
        if let Some(out) = out {
            out.set(i32::from(trained));
        }
        Ok(())
    })
}

/// The sizes of the records at `indices`.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values,
/// `out_lens` null or writable for `count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_record_lens(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out_lens: *mut u32,
) -> i32 {
    lx_call("lx_store_record_lens", || {
        disjoint(&[Span::of(out_lens, count, "out_lens")], &[Span::of(indices, count, "indices")])?;
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_lens, count, "out_lens")])?,
                slice_in(indices, count, "indices")?,
                slice_out(out_lens, count, "out_lens")?,
            )
        };
        store.record_lens(indices, out)
    })
}

/// The bytes the records at `indices` take back to back (the buffer `lx_store_gather` needs).
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out_total` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather_size(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out_total: *mut u64,
) -> i32 {
    lx_call("lx_store_gather_size", || {
        disjoint(&[Span::of(out_total, 1, "out_total")], &[Span::of(indices, count, "indices")])?;
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_total, 1, "out_total")])?,
                slice_in(indices, count, "indices")?,
                Out::new(out_total, "out_total")?,
            )
        };
        out.set(store.gather_size(indices)?);
        Ok(())
    })
}

/// Gathers records of exactly `record_len` bytes each into `out` (`count * record_len` bytes).
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out` is null or writable for `out_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather_fixed(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    record_len: usize,
    out: *mut u8,
    out_len: usize,
) -> i32 {
    lx_call("lx_store_gather_fixed", || {
        disjoint(&[Span::of(out, out_len, "out")], &[Span::of(indices, count, "indices")])?;
        // SAFETY: passed on from the caller.
        let (store, indices, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out, out_len, "out")])?,
                slice_in(indices, count, "indices")?,
                slice_out(out, out_len, "out")?,
            )
        };
        store.gather_fixed(indices, record_len, out)
    })
}

/// Gathers records of any size back to back into `out`, with their offsets.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values;
/// `out` is null or writable for `out_capacity` bytes; `out_offsets` null or writable for
/// `count + 1` values; `out_total` null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_gather(
    store: *const LxStore,
    indices: *const u64,
    count: usize,
    out: *mut u8,
    out_capacity: usize,
    out_offsets: *mut u64,
    out_total: *mut u64,
) -> i32 {
    lx_call("lx_store_gather", || {
        let entries = count.checked_add(1).ok_or_else(|| Failure::argument("count is too large"))?;
        disjoint(
            &[
                Span::of(out, out_capacity, "out"),
                Span::of(out_offsets, entries, "out_offsets"),
                Span::of(out_total, 1, "out_total"),
            ],
            &[Span::of(indices, count, "indices")],
        )?;
        // SAFETY: passed on from the caller.
        let (store, indices, offsets, total) = unsafe {
            (
                handle_apart(
                    store,
                    "store",
                    &[
                        Span::of(out, out_capacity, "out"),
                        Span::of(out_offsets, entries, "out_offsets"),
                        Span::of(out_total, 1, "out_total"),
                    ],
                )?,
                slice_in(indices, count, "indices")?,
                slice_out(out_offsets, entries, "out_offsets")?,
                Out::optional(out_total, "out_total")?,
            )
        };
        // SAFETY: passed on from the caller.
        let out = unsafe { slice_out(out, out_capacity, "out") }?;
        let written = store.gather(indices, out, offsets)?;
        if let Some(total) = total {
            total.set(written);
        }
        Ok(())
    })
}

/// Deletes the records at `indices`.
///
/// # Safety
/// `store` is null or a live store handle; `indices` is null or readable for `count` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_delete(store: *const LxStore, indices: *const u64, count: usize) -> i32 {
    lx_call("lx_store_delete", || {
        // SAFETY: passed on from the caller.
        let (store, indices) = unsafe { (handle(store, "store")?, slice_in(indices, count, "indices")?) };
        store.delete(indices)
    })
}

/// Compacts the store.
///
/// # Safety
/// `store` is null or a live store handle; `out_report` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_compact(store: *const LxStore, out_report: *mut CompactReport) -> i32 {
    lx_call("lx_store_compact", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_report, 1, "out_report")])?,
                Out::optional(out_report, "out_report")?,
            )
        };
        let report = store.compact()?;
        if let Some(out) = out {
            out.set(report);
        }
        Ok(())
    })
}

/// Space accounting.
///
/// # Safety
/// `store` is null or a live store handle; `out_stats` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_stats(store: *const LxStore, out_stats: *mut StoreStats) -> i32 {
    lx_call("lx_store_stats", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_stats, 1, "out_stats")])?,
                Out::new(out_stats, "out_stats")?,
            )
        };
        out.set(store.stats()?);
        Ok(())
    })
}

/// Reads back every record; `LX_ERR_CORRUPT` (and the first problem's text) when any is damaged.
///
/// # Safety
/// `store` is null or a live store handle; `out_report` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_verify(store: *const LxStore, out_report: *mut VerifyReport) -> i32 {
    lx_call("lx_store_verify", || {
        // SAFETY: passed on from the caller.
        let (store, out) = unsafe {
            (
                handle_apart(store, "store", &[Span::of(out_report, 1, "out_report")])?,
                Out::optional(out_report, "out_report")?,
            )
        };
        let (report, problem) = store.verify()?;
        if let Some(out) = out {
            out.set(report);
        }
        problem.map_or(Ok(()), Err)
    })
}

/// Makes every committed record durable.
///
/// # Safety
/// `store` is null or a live store handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_store_sync(store: *const LxStore) -> i32 {
    lx_call("lx_store_sync", || {
        // SAFETY: passed on from the caller.
        unsafe { handle(store, "store") }?.sync()
    })
}

/// Reads a dataset's schema.
///
/// # Safety
/// `dir` is null or NUL-terminated; `out_schema` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_schema_read(dir: *const c_char, out_schema: *mut LxSchema) -> i32 {
    lx_call("lx_schema_read", || {
        // SAFETY: passed on from the caller.
        let dir_span = unsafe { Span::of_c_str(dir, "dir") };
        disjoint(&[Span::of(out_schema, 1, "out_schema")], &[dir_span])?;
        // SAFETY: passed on from the caller.
        let (dir, out) = unsafe { (lx_path(dir, "dir")?, Out::new(out_schema, "out_schema")?) };
        out.set(schema::read(&dir)?);
        Ok(())
    })
}

/// Writes a dataset's schema beside its store.
///
/// # Safety
/// `dir` is null or NUL-terminated; `schema` is null or readable as one `lx_schema`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_schema_write(dir: *const c_char, schema: *const LxSchema) -> i32 {
    lx_call("lx_schema_write", || {
        // SAFETY: passed on from the caller (`lx_schema` is plain integers: any bytes are a value).
        let (dir, value) = unsafe { (lx_path(dir, "dir")?, handle(schema, "schema")?) };
        schema::write(&dir, value)
    })
}

/// Builds a sampler.
///
/// # Safety
/// `config` is null or readable as one `lx_sampler_config`; `out_sampler` is null or valid for
/// a write of one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_new(config: *const SamplerConfig, out_sampler: *mut *mut Sampler) -> i32 {
    lx_call("lx_sampler_new", || {
        disjoint(&[Span::of(out_sampler, 1, "out_sampler")], &[Span::of(config, 1, "config")])?;
        // SAFETY: passed on from the caller (`lx_sampler_config` is plain integers).
        let (config, out) = unsafe { (handle(config, "config")?, Out::new(out_sampler, "out_sampler")?) };
        let built = sampler::build(config)?;
        out.set(Box::into_raw(Box::new(built)));
        Ok(())
    })
}

/// Frees a sampler; null is a no-op.
///
/// # Safety
/// `sampler` is null or a live sampler handle, freed once, with no call on it in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_free(sampler: *mut Sampler) {
    if sampler.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `lx_sampler_new` and freed only here, once.
    let sampler = unsafe { Box::from_raw(sampler) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(sampler)));
}

/// This rank's indices per batch.
///
/// # Safety
/// `sampler` is null or a live sampler handle; `out_size` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_batch_size(sampler: *const Sampler, out_size: *mut u32) -> i32 {
    lx_call("lx_sampler_batch_size", || {
        // SAFETY: passed on from the caller.
        let (sampler, out) = unsafe {
            (
                handle_apart(sampler, "sampler", &[Span::of(out_size, 1, "out_size")])?,
                Out::new(out_size, "out_size")?,
            )
        };
        out.set(sampler.local_batch_size());
        Ok(())
    })
}

/// Step `step`'s indices for this rank into `out` (exactly the local batch size long).
///
/// # Safety
/// `sampler` is null or a live sampler handle; `out` is null or writable for `out_len` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lx_sampler_batch(
    sampler: *const Sampler,
    step: u64,
    out: *mut u32,
    out_len: usize,
) -> i32 {
    lx_call("lx_sampler_batch", || {
        // SAFETY: passed on from the caller.
        let (sampler, out) = unsafe {
            (
                handle_apart(sampler, "sampler", &[Span::of(out, out_len, "out")])?,
                slice_out(out, out_len, "out")?,
            )
        };
        sampler::batch(sampler, step, out)
    })
}

#[cfg(test)]
mod tests {
    use super::super::mmap_chunker::mmap_engine_last_error;
    use super::*;

    fn text(p: *const c_char) -> Option<String> {
        // SAFETY: null or a NUL-terminated string of this thread's last-error slot, read at once.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    #[test]
    fn a_panic_in_an_lx_call_is_lx_err_internal_with_its_message() {
        let code = lx_call("lx_test", || panic!("boom"));
        assert_eq!(code, error::INTERNAL);
        assert_eq!(text(lx_last_error()).unwrap(), "internal error: panic in lx_test: boom");
        assert_eq!(lx_call("lx_test", || Ok(())), error::OK);
        assert_eq!(text(lx_last_error()), None);
    }

    #[test]
    fn a_panic_in_a_chunker_call_is_its_failure_value_and_an_internal_error_text() {
        let count: usize = chunker_call("mmap_engine_scan_chunks", 0, || panic!("boom"));
        assert_eq!(count, 0);
        assert_eq!(
            text(mmap_engine_last_error()).unwrap(),
            "internal error: panic in mmap_engine_scan_chunks"
        );
        // The two interfaces keep their own last errors.
        assert_eq!(lx_call("lx_test", || Err(Failure::argument("x"))), error::INVALID_ARGUMENT);
        assert!(text(mmap_engine_last_error()).is_some());
        assert_eq!(chunker_call("mmap_engine_scan_fixed", 0, || Ok(3usize)), 3);
        assert_eq!(text(mmap_engine_last_error()), None);
        assert_eq!(text(lx_last_error()).unwrap(), "x");
    }
}
