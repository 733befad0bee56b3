//! A v1 table entry ([`RecordLoc`]) and the codec tags ([`Codec`]).

use super::header::{ENTRY_SIZE, Header, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE};

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
    /// LZ4 (block format, `lz4_flex`): compression at close to a copy's speed. v2 stores only.
    Lz4 = 3,
}

impl Codec {
    /// Every codec of a v1 store, by tag.
    pub const ALL: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
    /// Every codec of a v2 store, by tag.
    pub const ALL_V2: [Codec; 4] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict, Codec::Lz4];

    /// The codec of an on-disk tag, `None` for an unknown tag.
    pub const fn from_tag(tag: u8) -> Option<Codec> {
        match tag {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            3 => Some(Codec::Lz4),
            _ => None,
        }
    }

    /// The name used on the command line and in stats: `raw`, `zstd`, `zstd_dict`, `lz4`.
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd_dict",
            Codec::Lz4 => "lz4",
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
            "lz4" => Ok(Codec::Lz4),
            other => Err(format!("unknown codec {other:?} (expected raw, zstd, zstd_dict or lz4)")),
        }
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
        let codec = Codec::from_tag(self.codec)
            .filter(|c| *c != Codec::Lz4)
            .ok_or_else(|| format!("unknown codec tag {}", self.codec))?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
