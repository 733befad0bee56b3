//! The v1 `meta.zr`: a 16-byte [`Header`] followed by a fixed table of [`MAX_RECORDS`] 16-byte
//! [`RecordLoc`](super::RecordLoc) entries, in the host's byte order (the header's version field
//! tells a store of the other byte order apart). The file is memory-mapped and used in place (see
//! `crate::sys::MetaMap`); these pure functions validate the same bytes without a mapping, which is
//! what the opener, `verify` and the fuzz targets call.

/// Magic bytes at the start of `meta.zr`.
pub const MAGIC: [u8; 4] = *b"ZREC";
/// Format version written by this build. Stored in native byte order: a store of the other byte
/// order reads as `VERSION.swap_bytes()`.
pub const VERSION: u16 = 1;
/// Maximum size of one record (1 MiB).
pub const MAX_RECORD_SIZE: usize = 1 << 20;
/// Maximum number of records in a store (2^24).
pub const MAX_RECORDS: u32 = 1 << 24;
/// Maximum number of chunk files.
pub const MAX_CHUNKS: u32 = 1 << 12;
/// Maximum size of a chunk file (4 GiB): offsets are `u32`.
pub const MAX_CHUNK_SIZE: u64 = 1 << 32;
/// Size of the header and of one table entry.
pub const ENTRY_SIZE: usize = 16;
/// Size of `meta.zr`: the header plus the full table.
pub const META_SIZE: u64 = (ENTRY_SIZE as u64) * (1 + MAX_RECORDS as u64);

// The store can never run out of chunks before it runs out of record slots: 4096 chunks of
// 4 GiB hold exactly 2^24 records of 1 MiB. That equality is what lets the table be static.
const _: () = assert!(MAX_CHUNKS as u64 * MAX_CHUNK_SIZE / MAX_RECORD_SIZE as u64 == MAX_RECORDS as u64);

/// Global state at the start of `meta.zr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// [`VERSION`], native byte order.
    pub version: u16,
    /// Index of the last chunk; the store holds chunks `0..=tail_chunk`.
    pub tail_chunk: u16,
    /// Write position inside the tail chunk.
    pub tail_offset: u32,
    /// Number of committed records. Published last, atomically.
    pub length: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() == ENTRY_SIZE);

/// Why a header is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than 16 bytes.
    Short(usize),
    /// The magic is not [`MAGIC`].
    Magic([u8; 4]),
    /// The version is [`VERSION`] byte-swapped: a store of the other byte order.
    ByteOrder,
    /// Another version.
    Version(u16),
    /// A field is out of its range.
    Field(String),
}

impl Header {
    /// A fresh header of an empty store.
    pub const fn empty() -> Header {
        Header { magic: MAGIC, version: VERSION, tail_chunk: 0, tail_offset: 0, length: 0 }
    }

    /// Parses and validates a header from the first 16 bytes of `bytes`.
    ///
    /// # Errors
    /// A [`HeaderError`] saying what is wrong; never panics on any input.
    pub fn parse(bytes: &[u8]) -> Result<Header, HeaderError> {
        let raw: [u8; ENTRY_SIZE] =
            bytes.get(..ENTRY_SIZE).and_then(|b| b.try_into().ok()).ok_or(HeaderError::Short(bytes.len()))?;
        let h: Header = bytemuck::cast(raw);
        if h.magic != MAGIC {
            return Err(HeaderError::Magic(h.magic));
        }
        if h.version != VERSION {
            return Err(if h.version.swap_bytes() == VERSION {
                HeaderError::ByteOrder
            } else {
                HeaderError::Version(h.version)
            });
        }
        if h.length > MAX_RECORDS {
            return Err(HeaderError::Field(format!("length {} exceeds {MAX_RECORDS}", h.length)));
        }
        if u32::from(h.tail_chunk) >= MAX_CHUNKS {
            return Err(HeaderError::Field(format!(
                "tail chunk {} exceeds {}",
                h.tail_chunk,
                MAX_CHUNKS - 1
            )));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parse_rejects_other_byte_order() {
        let mut h = Header::empty();
        h.version = VERSION.swap_bytes();
        assert_eq!(Header::parse(bytemuck::bytes_of(&h)), Err(HeaderError::ByteOrder));
    }

    #[test]
    fn header_parse_rejects_bad_magic_and_short_input() {
        assert_eq!(Header::parse(b"short"), Err(HeaderError::Short(5)));
        assert!(matches!(Header::parse(&[0u8; 16]), Err(HeaderError::Magic(_))));
        let mut h = Header::empty();
        h.version = 7;
        assert_eq!(Header::parse(bytemuck::bytes_of(&h)), Err(HeaderError::Version(7)));
        h = Header::empty();
        h.length = MAX_RECORDS + 1;
        assert!(matches!(Header::parse(bytemuck::bytes_of(&h)), Err(HeaderError::Field(_))));
    }
}
