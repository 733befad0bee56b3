//! The on-disk format of a Zrecord store, as plain values and pure functions over bytes.
//!
//! `meta.zr` is a 16-byte [`Header`] followed by a fixed table of [`MAX_RECORDS`] 16-byte
//! [`RecordLoc`] entries. The file is memory-mapped and used in place (see `crate::mapped`); the
//! parsers here validate the same bytes without a mapping, which is what the opener, `verify` and
//! the fuzz targets call.

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

/// Where one record lives and how it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct RecordLoc {
    /// Byte offset inside the chunk.
    pub offset: u32,
    /// Stored size in bytes.
    pub phys_length: u32,
    /// Original (decoded) size in bytes.
    pub logic_length: u32,
    /// Containing chunk file `N.zr`.
    pub chunk_id: u16,
    /// Codec tag, see [`Codec`].
    pub codec: u8,
    /// Zero.
    pub reserved: u8,
}

const _: () = assert!(std::mem::size_of::<RecordLoc>() == ENTRY_SIZE);

/// How a record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// Plain zstd, level 3.
    Zstd = 1,
    /// zstd against the store's trained dictionary (`dict.zr`), level 19.
    ZstdDict = 2,
}

impl Codec {
    /// Every codec, by tag.
    pub const ALL: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

    /// The codec of an on-disk tag, `None` for an unknown tag.
    pub const fn from_tag(tag: u8) -> Option<Codec> {
        match tag {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            _ => None,
        }
    }

    /// The name used on the command line and in stats: `raw`, `zstd`, `zstd_dict`.
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd_dict",
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "raw" => Ok(Codec::Raw),
            "zstd" => Ok(Codec::Zstd),
            "zstd_dict" | "zstdict" => Ok(Codec::ZstdDict),
            other => Err(format!("unknown codec {other:?} (expected raw, zstd or zstd_dict)")),
        }
    }
}

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

impl RecordLoc {
    /// Parses a table entry from 16 bytes.
    pub fn from_bytes(bytes: [u8; ENTRY_SIZE]) -> RecordLoc {
        bytemuck::cast(bytes)
    }

    /// Checks an entry against the format's limits and the store's tail.
    ///
    /// # Errors
    /// A sentence saying which field is out of range.
    pub fn validate(&self, header: &Header) -> Result<Codec, String> {
        let codec = self.validate_limits()?;
        if self.chunk_id > header.tail_chunk {
            return Err(format!("chunk {} is past the tail chunk {}", self.chunk_id, header.tail_chunk));
        }
        let end = u64::from(self.offset) + u64::from(self.phys_length);
        if self.chunk_id == header.tail_chunk && end > u64::from(header.tail_offset) {
            return Err(format!(
                "ends at byte {end} of the tail chunk, past its committed end {}",
                header.tail_offset
            ));
        }
        Ok(codec)
    }

    /// Checks an entry against the format's limits alone (what a reader can check without the
    /// writer's tail): codec tag, lengths, chunk number and end offset.
    ///
    /// # Errors
    /// A sentence saying which field is out of range.
    pub fn validate_limits(&self) -> Result<Codec, String> {
        let codec = Codec::from_tag(self.codec).ok_or_else(|| format!("unknown codec tag {}", self.codec))?;
        if self.logic_length as usize > MAX_RECORD_SIZE {
            return Err(format!("logical length {} exceeds the 1 MiB limit", self.logic_length));
        }
        if u32::from(self.chunk_id) >= MAX_CHUNKS {
            return Err(format!("chunk {} is past the last possible chunk", self.chunk_id));
        }
        let end = u64::from(self.offset) + u64::from(self.phys_length);
        if end > MAX_CHUNK_SIZE {
            return Err(format!("ends at byte {end}, past the 4 GiB chunk limit"));
        }
        match codec {
            Codec::Raw if self.phys_length != self.logic_length => Err(format!(
                "raw record stores {} bytes of a {}-byte record",
                self.phys_length, self.logic_length
            )),
            Codec::Zstd | Codec::ZstdDict if self.phys_length == 0 => {
                Err("empty compressed frame".to_string())
            }
            _ => Ok(codec),
        }
    }
}

/// `dict.zr`: the trained zstd dictionary itself, byte for byte what `zstd --train` writes (its
/// magic number and dictionary ID identify it; every frame compressed against it names that ID
/// and carries its own checksum), so `zstd -D dict.zr` decodes a store's `zstd_dict` records.
///
/// Stores written by earlier loaderx builds put a 16-byte header (`ZDCT`, version, length,
/// checksum) in front of the dictionary; those are still read.
pub mod dict {
    /// The magic number that starts a zstd dictionary (`0xEC30A437`, little-endian).
    pub const ZSTD_MAGIC: [u8; 4] = 0xEC30_A437u32.to_le_bytes();
    /// Magic bytes of the legacy headed dictionary file.
    pub const LEGACY_MAGIC: [u8; 4] = *b"ZDCT";
    /// Version of the legacy headed dictionary file.
    pub const LEGACY_VERSION: u16 = 1;

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
        let head = bytes
            .get(..16)
            .ok_or((0, format!("{} bytes is shorter than the 16-byte header", bytes.len())))?;
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
}

/// FNV-1a, 32-bit: enough to tell a damaged small file from an intact one.
pub fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
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

    #[test]
    fn record_loc_validate_rejects_each_bad_field() {
        let h = Header { tail_chunk: 1, tail_offset: 100, ..Header::empty() };
        let ok =
            RecordLoc { offset: 0, phys_length: 10, logic_length: 10, chunk_id: 1, codec: 0, reserved: 0 };
        assert_eq!(ok.validate(&h), Ok(Codec::Raw));
        assert!(RecordLoc { codec: 9, ..ok }.validate(&h).is_err());
        assert!(RecordLoc { chunk_id: 2, ..ok }.validate(&h).is_err());
        assert!(RecordLoc { offset: 95, ..ok }.validate(&h).is_err());
        assert!(RecordLoc { logic_length: 11, ..ok }.validate(&h).is_err());
        assert!(
            RecordLoc { logic_length: (MAX_RECORD_SIZE + 1) as u32, codec: 1, ..ok }.validate(&h).is_err()
        );
    }

    #[test]
    fn dict_file_is_the_bare_dictionary_and_legacy_files_still_decode() {
        let mut d = dict::ZSTD_MAGIC.to_vec();
        d.extend_from_slice(b"\x01\x02\x03\x04 dictionary bytes");
        assert_eq!(dict::encode(&d), d, "dict.zr is the dictionary itself");
        assert_eq!(dict::decode(&d).unwrap(), &d[..]);
        let legacy = dict::encode_legacy(&d);
        assert_eq!(&legacy[..4], b"ZDCT");
        assert_eq!(dict::decode(&legacy).unwrap(), &d[..]);
        let mut bad = legacy.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(dict::decode(&bad).is_err());
        assert!(dict::decode(&legacy[..legacy.len() - 1]).is_err());
        assert!(dict::decode(&legacy[..3]).is_err());
        assert!(dict::decode(b"not a dictionary at all").is_err());
        assert!(dict::decode(&d[..6]).is_err());
    }
}
