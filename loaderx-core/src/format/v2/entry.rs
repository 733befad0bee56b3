//! A v2 index entry: 32 little-endian bytes per record, at byte `64 + 32 i` of `index.zr`.
//!
//! ```text
//! offset size field
//!  0      8   offset of the stored bytes in their chunk
//!  8      4   stored length
//! 12      4   logical length (what the record decodes to)
//! 16      4   chunk id
//! 20      1   codec tag (0 raw, 1 zstd, 2 zstd_dict, 3 lz4)
//! 21      3   zero
//! 24      4   crc32c of the stored bytes
//! 28      4   crc32c of bytes 0..28 of this entry
//! ```

use crate::format::Codec;

/// Size of one entry.
pub const ENTRY_SIZE: usize = 32;

/// A decoded entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// Offset of the stored bytes in their chunk.
    pub offset: u64,
    /// Stored length in bytes.
    pub stored: u32,
    /// Logical length in bytes.
    pub logical: u32,
    /// Chunk file id.
    pub chunk: u32,
    /// Codec tag.
    pub codec: u8,
    /// crc32c of the stored bytes.
    pub crc: u32,
}

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryError {
    /// The entry's own checksum does not match: a damaged entry.
    Checksum,
    /// A field is out of range: which, and why.
    Field(String),
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryError::Checksum => f.write_str("entry checksum mismatch"),
            EntryError::Field(r) => f.write_str(r),
        }
    }
}

impl Entry {
    /// The 32 bytes of this entry, its checksum computed.
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut b = [0u8; ENTRY_SIZE];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.stored.to_le_bytes());
        b[12..16].copy_from_slice(&self.logical.to_le_bytes());
        b[16..20].copy_from_slice(&self.chunk.to_le_bytes());
        b[20] = self.codec;
        b[24..28].copy_from_slice(&self.crc.to_le_bytes());
        let own = crc32c::crc32c(&b[0..28]);
        b[28..32].copy_from_slice(&own.to_le_bytes());
        b
    }

    /// The fields of an entry, without checking anything (the hot path reads entries this way
    /// and checks their limits; `verify` and verified reads check the entry's checksum too).
    #[inline]
    pub fn decode_unchecked(b: &[u8; ENTRY_SIZE]) -> Entry {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Entry {
            offset: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            stored: u32_at(8),
            logical: u32_at(12),
            chunk: u32_at(16),
            codec: b[20],
            crc: u32_at(24),
        }
    }

    /// Whether the entry's own checksum matches (and its zero bytes are zero).
    pub fn checksum_ok(b: &[u8; ENTRY_SIZE]) -> bool {
        b[21..24] == [0, 0, 0] && crc32c::crc32c(&b[0..28]).to_le_bytes() == b[28..32]
    }

    /// Parses an entry, checking its checksum and [`Entry::validate`].
    ///
    /// # Errors
    /// An [`EntryError`]; never panics on any input.
    pub fn parse(b: &[u8]) -> Result<Entry, EntryError> {
        let b: &[u8; ENTRY_SIZE] = b
            .get(..ENTRY_SIZE)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| EntryError::Field(format!("{} bytes is shorter than an entry", b.len())))?;
        if !Entry::checksum_ok(b) {
            return Err(EntryError::Checksum);
        }
        let e = Entry::decode_unchecked(b);
        e.validate().map_err(EntryError::Field)?;
        Ok(e)
    }

    /// Checks the fields against each other and the format's limits: a known codec, a raw record
    /// storing exactly its length, a compressed one storing something of a record that is not
    /// empty, and an end that does not overflow.
    ///
    /// # Errors
    /// A sentence saying which field is out of range.
    #[inline]
    pub fn validate(&self) -> Result<Codec, String> {
        let codec = Codec::from_tag(self.codec).ok_or_else(|| format!("unknown codec tag {}", self.codec))?;
        if self.offset.checked_add(u64::from(self.stored)).is_none() {
            return Err(format!("offset {} plus {} bytes overflows", self.offset, self.stored));
        }
        match codec {
            Codec::Raw if self.stored != self.logical => {
                Err(format!("raw record stores {} bytes of a {}-byte record", self.stored, self.logical))
            }
            compressed if compressed != Codec::Raw && self.stored == 0 => {
                Err("empty compressed record".into())
            }
            // The writer stores a record compressed only when its frame is smaller: an empty
            // record is stored raw (review Z1: a frame "of no bytes" read as empty or as its frame).
            compressed if compressed != Codec::Raw && self.logical == 0 => {
                Err(format!("compressed record of {} stored bytes decodes to no bytes", self.stored))
            }
            _ => Ok(codec),
        }
    }

    /// Where the stored bytes end in their chunk.
    #[inline]
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review Z1: a compressed record of no bytes (no writer makes one: an empty record is
    /// stored raw) is a bad entry, whatever its checksum, not an empty record or its frame.
    #[test]
    fn a_compressed_entry_of_no_bytes_is_refused() {
        let e = Entry { offset: 0, stored: 41, logical: 0, chunk: 0, codec: 1, crc: 0 };
        assert!(e.validate().is_err_and(|r| r.contains("decodes to no bytes")), "{:?}", e.validate());
        let parsed = Entry::parse(&e.encode());
        assert!(
            matches!(&parsed, Err(EntryError::Field(m)) if m.contains("decodes to no bytes")),
            "{parsed:?}"
        );
        assert_eq!(Entry { codec: 0, stored: 0, ..e }.validate(), Ok(Codec::Raw), "an empty raw record");
    }

    #[test]
    fn an_entry_round_trips_and_any_flipped_bit_is_caught() {
        let e =
            Entry { offset: 1 << 40, stored: 900, logical: 4096, chunk: 70_000, codec: 1, crc: 0xDEAD_BEEF };
        let b = e.encode();
        assert_eq!(Entry::parse(&b), Ok(e));
        for bit in 0..ENTRY_SIZE * 8 {
            let mut bad = b;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Entry::parse(&bad), Err(EntryError::Checksum), "bit {bit}");
        }
    }

    #[test]
    fn fields_are_checked_against_each_other() {
        let ok = Entry { offset: 0, stored: 10, logical: 10, chunk: 0, codec: 0, crc: 0 };
        assert!(ok.validate().is_ok());
        let says = |e: Entry, what: &str| matches!(e.validate(), Err(m) if m.contains(what));
        assert!(says(Entry { logical: 11, ..ok }, "stores 10 bytes of a 11-byte record"));
        assert!(says(Entry { codec: 9, ..ok }, "unknown codec tag 9"));
        assert!(says(Entry { codec: 1, stored: 0, ..ok }, "empty compressed record"));
        assert!(says(Entry { offset: u64::MAX, ..ok }, "plus 10 bytes overflows"));
        assert!(
            matches!(Entry::parse(&[0u8; 5]), Err(EntryError::Field(m)) if m.contains("shorter than an entry"))
        );
    }
}
