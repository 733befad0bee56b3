//! Checksums of small metadata files.

/// FNV-1a, 32-bit: enough to tell a damaged small file from an intact one.
pub fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}
