//! Page-locked (pinned) host memory for staging host-to-device copies (feature `cuda`).
#![expect(
    unsafe_code,
    reason = "cudarc's pinned allocation is an unsafe fn; the memory is zeroed before use"
)]

/// `len` zeroed values of `T` in page-locked (pinned) host memory of `ctx`'s device, for staging
/// host-to-device copies: the DMA engine reads pinned memory directly, so a copy from it is
/// asynchronous to the host and runs at the link's speed, where a copy from pageable memory is
/// first staged by the driver on the calling thread.
///
/// Ordinary cached pinned memory (no write-combining), so the host can read it back at full
/// speed. Reading or writing it through [`PinnedHostSlice::as_mut_slice`] first waits for the
/// last copy that used it.
///
/// # Errors
/// The driver's error when the context cannot be bound or the allocation fails.
#[cfg(feature = "cuda")]
pub fn pinned_zeroed<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    len: usize,
) -> std::result::Result<cudarc::driver::PinnedHostSlice<T>, cudarc::driver::DriverError> {
    // SAFETY: the one obligation of `alloc_pinned_with_flags` is that the memory is unset: it is
    // zeroed just below, before anything can read it. Flags 0: plain page-locked memory.
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<T>(len, 0) }?;
    let ptr = pinned.as_mut_ptr()?;
    // SAFETY: `ptr` is the start of the `len` values of `T` just allocated (non-null and aligned:
    // cudarc asserts both), owned by `pinned` and not yet shared; zero bits are a valid `T`
    // (`ValidAsZeroBits`).
    unsafe { std::ptr::write_bytes(ptr, 0, len) };
    Ok(pinned)
}
