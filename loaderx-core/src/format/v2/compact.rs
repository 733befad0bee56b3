//! A compact entry (index version 4): 16 little-endian bytes per record, at byte `64 + 16 i` of
//! `index.zr`, for raw records of any size.
//!
//! ```text
//! offset size field
//!  0      5   offset of the record in its chunk (below 2^40)
//!  5      3   chunk id (below 2^24)
//!  8      4   length (a raw record stores exactly its bytes)
//! 12      4   crc32c of the record's bytes
//! ```
//!
//! Half of a full entry: no codec (every record is raw, so the logical length is the stored one)
//! and no checksum of the entry itself. A damaged entry is still found: the record's checksum is
//! over the bytes the entry points at, so a wrong offset, chunk or length reads other bytes than
//! were summed (`verify`, `verify_reads`), and one that happens to point at the same bytes reads
//! the right record. The hot path checks every entry against its chunk's bounds, as for v2.

use super::Entry;
use crate::format::Codec;

/// Size of one compact entry.
pub const COMPACT_ENTRY_SIZE: usize = 16;
/// Offsets in a chunk are below this: 1 TiB.
pub const COMPACT_MAX_OFFSET: u64 = 1 << 40;
/// Chunk ids are below this.
pub const COMPACT_MAX_CHUNKS: u64 = 1 << 24;

/// The 16 bytes of `e`.
///
/// # Errors
/// A sentence naming the field a compact entry cannot hold: a compressed record, a chunk id of
/// 2^24 or more, a record ending past 2^40 bytes in its chunk.
pub fn encode_compact(e: &Entry) -> Result<[u8; COMPACT_ENTRY_SIZE], String> {
    if e.codec != Codec::Raw as u8 || e.stored != e.logical {
        return Err(format!(
            "a compact index holds raw records only (a record of codec tag {}, {} of {} bytes stored)",
            e.codec, e.stored, e.logical
        ));
    }
    if u64::from(e.chunk) >= COMPACT_MAX_CHUNKS {
        return Err(format!("chunk id {} is past a compact index's {COMPACT_MAX_CHUNKS} chunks", e.chunk));
    }
    // An offset of 2^40 does not fit 5 bytes even for an empty record.
    if e.offset >= COMPACT_MAX_OFFSET || e.offset + u64::from(e.stored) > COMPACT_MAX_OFFSET {
        return Err(format!(
            "a record of {} bytes at offset {} ends past a compact index's {COMPACT_MAX_OFFSET}-byte chunks",
            e.stored, e.offset
        ));
    }
    let mut b = [0u8; COMPACT_ENTRY_SIZE];
    b[0..5].copy_from_slice(&e.offset.to_le_bytes()[..5]);
    b[5..8].copy_from_slice(&e.chunk.to_le_bytes()[..3]);
    b[8..12].copy_from_slice(&e.stored.to_le_bytes());
    b[12..16].copy_from_slice(&e.crc.to_le_bytes());
    Ok(b)
}

/// The entry in 16 bytes (any bytes decode: the bounds are checked where records are read).
#[inline(always)]
pub fn decode_compact(b: &[u8; COMPACT_ENTRY_SIZE]) -> Entry {
    let offset = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], 0, 0, 0]);
    let chunk = u32::from_le_bytes([b[5], b[6], b[7], 0]);
    let len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    let crc = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
    Entry { offset, stored: len, logical: len, chunk, codec: Codec::Raw as u8, crc }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_entry_round_trips_at_its_limits_and_refuses_what_it_cannot_hold() {
        let e = Entry {
            offset: (1 << 40) - 10,
            stored: 10,
            logical: 10,
            chunk: (1 << 24) - 1,
            codec: 0,
            crc: 0xDEAD_BEEF,
        };
        assert_eq!(decode_compact(&encode_compact(&e).unwrap()), e);
        let zero = Entry::default();
        assert_eq!(decode_compact(&encode_compact(&zero).unwrap()), zero);
        let says = |e: Entry, what: &str| matches!(encode_compact(&e), Err(m) if m.contains(what));
        let past = "ends past a compact index's 1099511627776-byte chunks";
        assert!(says(Entry { offset: 1 << 40, ..zero }, past));
        assert!(says(Entry { offset: (1 << 40) - 10, stored: 11, logical: 11, ..zero }, past));
        assert!(says(Entry { chunk: 1 << 24, ..zero }, "chunk id 16777216 is past"));
        assert!(says(
            Entry { codec: 1, stored: 5, logical: 9, ..zero },
            "raw records only (a record of codec tag 1"
        ));
        assert!(says(
            Entry { codec: 3, stored: 9, logical: 9, ..zero },
            "raw records only (a record of codec tag 3"
        ));
        // Every field lands in its own bytes.
        let b = encode_compact(&Entry {
            offset: 0x01_0203_0405,
            stored: 0x0607_0809,
            logical: 0x0607_0809,
            chunk: 0x0A_0B0C,
            codec: 0,
            crc: 0x0D0E_0F10,
        })
        .unwrap();
        assert_eq!(b, [5, 4, 3, 2, 1, 0xC, 0xB, 0xA, 9, 8, 7, 6, 0x10, 0xF, 0xE, 0xD]);
    }
}
