//! Checksums of small metadata files, and the 64-bit hash of descriptions of data (the loader's
//! state, cache directory names): FNV-1a, written once here.

/// FNV-1a, 32-bit: enough to tell a damaged small file from an intact one.
pub fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// FNV-1a, 64-bit: stable across builds and platforms (it names cache directories and is saved
/// in loader states), not a defence against collisions made on purpose.
pub fn hash64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
