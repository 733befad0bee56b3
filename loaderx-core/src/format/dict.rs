//! `dict.zr`: the trained zstd dictionary itself, byte for byte what `zstd --train` writes (its
//! magic number and dictionary ID identify it; every frame compressed against it names that ID
//! and carries its own checksum), so `zstd -D dict.zr` decodes a store's `zstd_dict` records.
//!
//! Stores written by earlier loaderx builds put a 16-byte header (`ZDCT`, version, length,
//! checksum) in front of the dictionary; those are still read.

/// The magic number that starts a zstd dictionary (`0xEC30A437`, little-endian).
pub const ZSTD_MAGIC: [u8; 4] = 0xEC30_A437u32.to_le_bytes();
/// Magic bytes of the legacy headed dictionary file.
pub const LEGACY_MAGIC: [u8; 4] = *b"ZDCT";
/// Version of the legacy headed dictionary file.
pub const LEGACY_VERSION: u16 = 1;
/// The most a `dict.zr` may hold: a reader refuses a longer file before reading it, and training
/// never makes one longer (zstd's own dictionaries are about 110 KiB by default).
pub const MAX_LEN: u64 = 64 << 20;

/// The dictionary id of a zstd dictionary: bytes 4..8 (little-endian) of one with the magic
/// number; 0 for anything else.
pub fn id(dict: &[u8]) -> u32 {
    match dict {
        [m0, m1, m2, m3, a, b, c, d, ..] if [*m0, *m1, *m2, *m3] == ZSTD_MAGIC => {
            u32::from_le_bytes([*a, *b, *c, *d])
        }
        _ => 0,
    }
}

/// The bytes of `dict.zr` for a dictionary: the dictionary itself.
pub fn encode(dict: &[u8]) -> Vec<u8> {
    dict.to_vec()
}

/// The dictionary held by a `dict.zr`: a bare zstd dictionary, or one behind the legacy
/// header (whose length and checksum are checked).
///
/// # Errors
/// `(offset, reason)` of the first problem; never panics on any input.
pub fn decode(bytes: &[u8]) -> Result<&[u8], (u64, String)> {
    match bytes.get(..4) {
        Some(m) if m == ZSTD_MAGIC => {
            // Magic, dictionary ID, then the entropy tables: a file this short is cut off.
            if bytes.len() < 8 {
                return Err((0, format!("a {}-byte zstd dictionary is truncated", bytes.len())));
            }
            Ok(bytes)
        }
        Some(m) if m == LEGACY_MAGIC => decode_legacy(bytes),
        _ => Err((0, "not a zstd dictionary (no zstd dictionary magic 0xEC30A437)".to_string())),
    }
}

/// The legacy headed file: `ZDCT`, version (u16), two zero bytes, length (u32), FNV-1a
/// checksum (u32), all little-endian, then the dictionary.
fn decode_legacy(bytes: &[u8]) -> Result<&[u8], (u64, String)> {
    let head =
        bytes.get(..16).ok_or((0, format!("{} bytes is shorter than the 16-byte header", bytes.len())))?;
    let version = u16::from_le_bytes([head[4], head[5]]);
    if version != LEGACY_VERSION {
        return Err((4, format!("unsupported dictionary version {version}")));
    }
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let sum = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    let body = &bytes[16..];
    if body.len() != len {
        return Err((8, format!("header says {len} dictionary bytes, file holds {}", body.len())));
    }
    if super::checksum(body) != sum {
        return Err((12, "dictionary checksum mismatch".to_string()));
    }
    Ok(body)
}

/// The legacy headed file of `dict`, as earlier builds wrote it (for compatibility tests).
#[doc(hidden)]
pub fn encode_legacy(dict: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + dict.len());
    out.extend_from_slice(&LEGACY_MAGIC);
    out.extend_from_slice(&LEGACY_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    let len = u32::try_from(dict.len()).expect("a test dictionary is under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&super::checksum(dict).to_le_bytes());
    out.extend_from_slice(dict);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dict_file_is_the_bare_dictionary_and_legacy_files_still_decode() {
        let mut d = ZSTD_MAGIC.to_vec();
        d.extend_from_slice(b"\x01\x02\x03\x04 dictionary bytes");
        assert_eq!(encode(&d), d, "dict.zr is the dictionary itself");
        assert_eq!(decode(&d).unwrap(), &d[..]);
        let legacy = encode_legacy(&d);
        assert_eq!(&legacy[..4], b"ZDCT");
        assert_eq!(decode(&legacy).unwrap(), &d[..]);
        let mut bad = legacy.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(matches!(decode(&bad), Err((12, ref m)) if m.contains("checksum mismatch")));
        assert!(
            matches!(decode(&legacy[..legacy.len() - 1]), Err((8, ref m)) if m.contains("file holds 24"))
        );
        assert!(matches!(decode(&legacy[..3]), Err((0, ref m)) if m.contains("no zstd dictionary magic")));
        assert!(
            matches!(decode(b"not a dictionary at all"), Err((0, ref m)) if m.contains("no zstd dictionary magic"))
        );
        assert!(matches!(decode(&d[..6]), Err((0, ref m)) if m.contains("truncated")));
    }
}
