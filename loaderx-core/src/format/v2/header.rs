//! The v2 header: the first 64 bytes of `index.zr`, little-endian.
//!
//! ```text
//! offset size field
//!  0      4   magic "ZRC2"
//!  4      2   version: 2 (a 32-byte entry per record), 3 (fixed stride: a crc32c per block) or
//!             4 (compact: a 16-byte entry per raw record)
//!  6      2   entry size: 32, 4 (version 3: an element of the block checksums) or 16 (version 4)
//!  8      8   chunk capacity in bytes (> 0)
//! 16      4   dictionary id of dict.zr (0: none yet)
//! 20      4   static checksum: crc32c of bytes 0..20
//! 24      4   tail chunk: the chunk holding the write frontier
//! 28      4   dynamic checksum: crc32c of bytes 24..28 and 32..48
//! 32      8   tail offset: the write frontier inside the tail chunk
//! 40      8   record count, published last (an atomic store of its own)
//! 48     16   zero (versions 2 and 4); version 3: record size u32, records per block u32, 8 zero
//! ```
//!
//! A version 3 header's static checksum covers bytes 48..64 too: its record size and block
//! length never change, and a reader of version 2 refuses the store by its version.
//!
//! Bytes 0..24 never change after the store is created (the dictionary id is set once, before
//! the first `zstd_dict` record, with the static checksum rewritten). The writer updates 24..48
//! at each commit, the count last; a reader takes only the count (atomically) and never checks
//! the dynamic checksum, which an opener as the one writer does.

/// Magic bytes at the start of a v2 `index.zr`.
pub const MAGIC: [u8; 4] = *b"ZRC2";
/// The version of an index with an entry per record.
pub const VERSION: u16 = 2;
/// The version of a fixed-stride index: records of one size at implied positions, a checksum
/// per block of records.
pub const VERSION_FIXED: u16 = 3;
/// The version of a compact index: a 16-byte entry per record, raw records only.
pub const VERSION_COMPACT: u16 = 4;
/// Size of the header.
pub const HEADER_SIZE: usize = 64;
/// Byte offset of the record count, which is published with an atomic store.
pub const COUNT_OFFSET: usize = 40;

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bytes a chunk file is filled to before the writer rolls to the next.
    pub chunk_capacity: u64,
    /// The dictionary id of `dict.zr` (its zstd dictionary id), 0 when there is none.
    pub dict_id: u32,
    /// The chunk holding the write frontier.
    pub tail_chunk: u32,
    /// The write frontier inside the tail chunk.
    pub tail_offset: u64,
    /// Committed records.
    pub count: u64,
    /// How records are located.
    pub layout: Layout,
}

/// How `index.zr` locates records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// A 32-byte entry per record (version 2): any size, any codec.
    #[default]
    Entries,
    /// Raw records of one size at implied positions, a crc32c per block of records (version 3).
    Fixed {
        /// Bytes per record.
        record_size: u32,
        /// Records per block checksum.
        block_records: u32,
    },
    /// A 16-byte entry per record (version 4): raw records of any size, chunks below 1 TiB,
    /// fewer than 2^24 chunks.
    Compact,
}

impl Layout {
    /// `entries`, `fixed` or `compact`.
    pub const fn name(self) -> &'static str {
        match self {
            Layout::Entries => "entries",
            Layout::Fixed { .. } => "fixed",
            Layout::Compact => "compact",
        }
    }

    /// The size of one element of the array after the header: an entry, or a block checksum.
    pub const fn element_size(self) -> usize {
        match self {
            Layout::Entries => super::ENTRY_SIZE,
            Layout::Fixed { .. } => 4,
            Layout::Compact => super::COMPACT_ENTRY_SIZE,
        }
    }
}

/// Why a header is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than [`HEADER_SIZE`] bytes.
    Short(usize),
    /// Not a v2 header.
    Magic([u8; 4]),
    /// Another version of this layout.
    Version(u16),
    /// A field is out of range or a checksum does not match: what, and at which byte.
    Field(usize, String),
}

impl Header {
    /// The header of an empty store.
    pub fn empty(chunk_capacity: u64) -> Header {
        Header {
            chunk_capacity,
            dict_id: 0,
            tail_chunk: 0,
            tail_offset: 0,
            count: 0,
            layout: Layout::Entries,
        }
    }

    /// The geometry of a fixed-stride store; `None` for the entry layout, or fields no store has.
    pub fn stride(&self) -> Option<super::Stride> {
        match self.layout {
            Layout::Entries | Layout::Compact => None,
            Layout::Fixed { record_size, block_records } => {
                super::Stride::new(u64::from(record_size), self.chunk_capacity, u64::from(block_records))
            }
        }
    }

    /// The 64 bytes of this header, both checksums computed.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..4].copy_from_slice(&MAGIC);
        let version = match self.layout {
            Layout::Entries => VERSION,
            Layout::Compact => VERSION_COMPACT,
            Layout::Fixed { record_size, block_records } => {
                b[48..52].copy_from_slice(&record_size.to_le_bytes());
                b[52..56].copy_from_slice(&block_records.to_le_bytes());
                VERSION_FIXED
            }
        };
        b[4..6].copy_from_slice(&version.to_le_bytes());
        b[6..8].copy_from_slice(&(self.layout.element_size() as u16).to_le_bytes());
        b[8..16].copy_from_slice(&self.chunk_capacity.to_le_bytes());
        b[16..20].copy_from_slice(&self.dict_id.to_le_bytes());
        let stat = static_crc(&b);
        b[20..24].copy_from_slice(&stat.to_le_bytes());
        b[24..28].copy_from_slice(&self.tail_chunk.to_le_bytes());
        b[32..40].copy_from_slice(&self.tail_offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.count.to_le_bytes());
        let dynamic = dynamic_crc(&b);
        b[28..32].copy_from_slice(&dynamic.to_le_bytes());
        b
    }

    /// Parses a header, checking the static fields and their checksum, and (when `check_dynamic`,
    /// as the one writer does) the dynamic ones and theirs.
    ///
    /// # Errors
    /// A [`HeaderError`] saying what is wrong; never panics on any input.
    pub fn parse(bytes: &[u8], check_dynamic: bool) -> Result<Header, HeaderError> {
        let b: &[u8; HEADER_SIZE] = bytes
            .get(..HEADER_SIZE)
            .and_then(|b| b.try_into().ok())
            .ok_or(HeaderError::Short(bytes.len()))?;
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(HeaderError::Magic(magic));
        }
        let layout = match u16_at(4) {
            VERSION => Layout::Entries,
            VERSION_FIXED => Layout::Fixed { record_size: u32_at(48), block_records: u32_at(52) },
            VERSION_COMPACT => Layout::Compact,
            other => return Err(HeaderError::Version(other)),
        };
        if static_crc(b) != u32_at(20) {
            let covers =
                if let Layout::Fixed { .. } = layout { "bytes 0..20 and 48..64" } else { "bytes 0..20" };
            return Err(HeaderError::Field(20, format!("header checksum mismatch ({covers})")));
        }
        if usize::from(u16_at(6)) != layout.element_size() {
            return Err(HeaderError::Field(
                6,
                format!("entry size {} (expected {})", u16_at(6), layout.element_size()),
            ));
        }
        let h = Header {
            chunk_capacity: u64_at(8),
            dict_id: u32_at(16),
            tail_chunk: u32_at(24),
            tail_offset: u64_at(32),
            count: u64_at(COUNT_OFFSET),
            layout,
        };
        if h.chunk_capacity == 0 {
            return Err(HeaderError::Field(8, "chunk capacity 0".into()));
        }
        if let Layout::Fixed { record_size, block_records } = layout {
            if h.stride().is_none() {
                return Err(HeaderError::Field(
                    48,
                    format!(
                        "fixed-stride record size {record_size} with {block_records} records a block does not \
                         fit chunks of {} bytes",
                        h.chunk_capacity
                    ),
                ));
            }
            // FORMAT.md's rule, `P = max(1, 4096 / R)` (a writer may store it clamped to the
            // records a chunk holds): any other value is damage, and one of billions would let
            // a 68-byte index claim billions of records under a single block checksum.
            let rule = super::Stride::default_per_block(u64::from(record_size));
            let per_chunk = h.chunk_capacity / u64::from(record_size).max(1);
            let per_block = u64::from(block_records);
            if per_block != rule && per_block != rule.min(per_chunk) {
                return Err(HeaderError::Field(
                    52,
                    format!("{block_records} records a block; {record_size}-byte records have {rule}"),
                ));
            }
            if h.dict_id != 0 {
                return Err(HeaderError::Field(16, "a fixed-stride store names a dictionary".into()));
            }
            if b[56..].iter().any(|&x| x != 0) {
                return Err(HeaderError::Field(56, "reserved bytes are not zero".into()));
            }
        }
        if layout == Layout::Compact {
            if h.dict_id != 0 {
                return Err(HeaderError::Field(
                    16,
                    "a compact store of raw records names a dictionary".into(),
                ));
            }
            if h.chunk_capacity > super::COMPACT_MAX_OFFSET {
                return Err(HeaderError::Field(
                    8,
                    format!("chunk capacity {} past a compact index's 2^40 bytes", h.chunk_capacity),
                ));
            }
        }
        if h.count > super::MAX_RECORDS {
            return Err(HeaderError::Field(
                COUNT_OFFSET,
                format!("count {} exceeds {}", h.count, super::MAX_RECORDS),
            ));
        }
        if check_dynamic {
            if dynamic_crc(b) != u32_at(28) {
                return Err(HeaderError::Field(28, "header checksum mismatch (bytes 24..48)".into()));
            }
            if matches!(layout, Layout::Entries | Layout::Compact) && b[48..].iter().any(|&x| x != 0) {
                return Err(HeaderError::Field(48, "reserved bytes are not zero".into()));
            }
        }
        Ok(h)
    }
}

/// The checksum of the fields that never change: bytes 0..20, and in a version 3 header (the
/// fixed stride's geometry) bytes 48..64 too.
fn static_crc(b: &[u8; HEADER_SIZE]) -> u32 {
    let head = crc32c::crc32c(&b[0..20]);
    if u16::from_le_bytes([b[4], b[5]]) == VERSION_FIXED {
        crc32c::crc32c_append(head, &b[48..])
    } else {
        head
    }
}

/// The checksum of the fields a commit changes: bytes 24..28 and 32..48.
fn dynamic_crc(b: &[u8; HEADER_SIZE]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&b[24..28]), &b[32..48])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `bad`, a header with a flip at `byte`, is refused for what that byte holds: the
    /// magic (0..4), the version (4..6), the static checksum (a flip in the bytes 6..24 it covers
    /// or holds, or in a fixed stride's 48..64: reported at byte 20) or the dynamic one (24..48,
    /// at byte 28). A flip in the count's top byte (47) makes a count over the limit, refused
    /// before the dynamic checksum is looked at.
    fn flip_refused(bad: &[u8], byte: usize) -> bool {
        match Header::parse(bad, true) {
            Err(HeaderError::Magic(_)) => byte < 4,
            Err(HeaderError::Version(_)) => (4..6).contains(&byte),
            Err(HeaderError::Field(20, r)) => {
                ((6..24).contains(&byte) || (48..64).contains(&byte))
                    && r.starts_with("header checksum mismatch")
            }
            Err(HeaderError::Field(28, r)) => {
                (24..47).contains(&byte) && r == "header checksum mismatch (bytes 24..48)"
            }
            Err(HeaderError::Field(40, r)) => byte == 47 && r.contains("exceeds"),
            _ => false,
        }
    }

    #[test]
    fn a_header_round_trips_and_every_damage_is_caught() {
        let h = Header {
            chunk_capacity: 1 << 30,
            dict_id: 77,
            tail_chunk: 3,
            tail_offset: 12345,
            count: 1 << 40,
            layout: Layout::Entries,
        };
        let b = h.encode();
        assert_eq!(Header::parse(&b, true), Ok(h));
        for byte in 0..48 {
            let mut bad = b;
            bad[byte] ^= 0x10;
            // A flipped count is caught by the writer's dynamic check; a reader trusts the count.
            assert!(flip_refused(&bad, byte), "a flip at byte {byte}: {:?}", Header::parse(&bad, true));
        }
        assert!(matches!(Header::parse(&b[..63], true), Err(HeaderError::Short(63))));
        let mut v1 = b;
        v1[0..4].copy_from_slice(b"ZREC");
        assert!(matches!(Header::parse(&v1, false), Err(HeaderError::Magic(_))));
    }

    #[test]
    fn a_fixed_stride_header_round_trips_and_its_geometry_is_checked() {
        let h = Header {
            layout: Layout::Fixed { record_size: 784, block_records: 5 },
            count: 60_000,
            tail_chunk: 0,
            tail_offset: 784 * 60_000,
            ..Header::empty(1 << 30)
        };
        let b = h.encode();
        assert_eq!(&b[4..8], &[3, 0, 4, 0]);
        assert_eq!(Header::parse(&b, true), Ok(h));
        assert_eq!(h.stride().map(|s| s.per_chunk), Some((1 << 30) / 784));
        for byte in (0..48).chain(48..64) {
            let mut bad = b;
            bad[byte] ^= 0x10;
            assert!(flip_refused(&bad, byte), "a flip at byte {byte}: {:?}", Header::parse(&bad, true));
        }
        // A record larger than a chunk, or empty, is refused even with its checksum right.
        for (record_size, block_records) in [(0, 1), (1 << 20, 1), (8, 0)] {
            let odd = Header { layout: Layout::Fixed { record_size, block_records }, ..Header::empty(4096) };
            assert!(matches!(Header::parse(&odd.encode(), false), Err(HeaderError::Field(48, _))));
        }
    }

    #[test]
    fn a_compact_header_round_trips_and_refuses_a_dictionary_or_chunks_past_its_offsets() {
        let h = Header { layout: Layout::Compact, count: 5, tail_offset: 99, ..Header::empty(1 << 30) };
        let b = h.encode();
        assert_eq!(&b[4..8], &[4, 0, 16, 0]);
        assert_eq!(Header::parse(&b, true), Ok(h));
        for byte in 0..48 {
            let mut bad = b;
            bad[byte] ^= 0x10;
            assert!(flip_refused(&bad, byte), "a flip at byte {byte}: {:?}", Header::parse(&bad, true));
        }
        let dict = Header { dict_id: 7, ..h };
        assert!(matches!(Header::parse(&dict.encode(), false), Err(HeaderError::Field(16, _))));
        let huge = Header { chunk_capacity: (1 << 40) + 1, ..h };
        assert!(matches!(Header::parse(&huge.encode(), false), Err(HeaderError::Field(8, _))));
    }

    #[test]
    fn a_reader_does_not_check_what_the_writer_is_changing() {
        let h = Header::empty(4096);
        let mut b = h.encode();
        b[40] = 9; // a count published after the dynamic checksum was read
        assert_eq!(Header::parse(&b, false).map(|h| h.count), Ok(9));
        assert!(
            matches!(Header::parse(&b, true), Err(HeaderError::Field(28, r)) if r.contains("checksum mismatch"))
        );
    }
}
