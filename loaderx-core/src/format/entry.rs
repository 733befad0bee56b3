//! A v1 table entry ([`RecordLoc`]) and the codec table ([`Codec`]: tags, names, which codecs
//! check themselves).

use super::Format;
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
///
/// [`Codec::ALL`] is the table every other codec list derives from: [`Codec::from_tag`],
/// [`Codec::MAX_TAG`], the names `FromStr` accepts, [`Format::codecs`](super::Format::codecs),
/// [`CodecCounts`](crate::CodecCounts). A new codec takes its tag after the last, goes into
/// `ALL`, and the exhaustive matches below (name, checks) then say what else it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
// Test builds derive the tag check, so the table test can find a variant missing from `ALL`.
#[cfg_attr(test, derive(bytemuck::CheckedBitPattern))]
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
    /// How many codecs there are: the length of [`Codec::ALL`].
    pub const COUNT: usize = 4;

    /// Every codec, by tag: `ALL[t]` has tag `t` (checked at compile time). Which of them each
    /// store format holds: [`Format::codecs`](super::Format::codecs).
    pub const ALL: [Codec; Codec::COUNT] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict, Codec::Lz4];

    /// The highest tag in use: a tag above it is no codec.
    pub const MAX_TAG: u8 = (Codec::COUNT - 1) as u8;

    /// The codec of an on-disk tag, `None` for an unknown tag.
    #[inline]
    pub const fn from_tag(tag: u8) -> Option<Codec> {
        if tag <= Codec::MAX_TAG { Some(Codec::ALL[tag as usize]) } else { None }
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

    /// Whether the stored form detects its own damage when decoded: a zstd frame carries a
    /// checksum of its content (the encoder sets the flag), an LZ4 block carries none, and a raw
    /// record is not decoded at all.
    pub const fn self_checking(self) -> bool {
        match self {
            Codec::Zstd | Codec::ZstdDict => true,
            Codec::Raw | Codec::Lz4 => false,
        }
    }

    /// Whether a read checks the record's crc32c (a v2 store's) whatever
    /// [`StoreOptions::verify_reads`](crate::StoreOptions::verify_reads) says: a decoded record
    /// whose stored form does not check itself (LZ4), so no damaged compressed record is handed
    /// out. A raw record is checked only when asked: beside a copy the sum is the whole cost.
    #[inline]
    pub const fn checked_on_every_read(self) -> bool {
        !matches!(self, Codec::Raw) && !self.self_checking()
    }
}

// `from_tag` indexes `ALL` by tag: every codec must sit at its own tag.
const _: () = {
    let mut t = 0;
    while t < Codec::COUNT {
        assert!(Codec::ALL[t] as usize == t, "Codec::ALL is not in tag order");
        t += 1;
    }
};

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // "zstdict": an alias, still accepted.
        if s == "zstdict" {
            return Ok(Codec::ZstdDict);
        }
        if let Some(c) = Codec::ALL.into_iter().find(|c| c.name() == s) {
            return Ok(c);
        }
        let names: Vec<&str> = Codec::ALL.iter().map(|c| c.name()).collect();
        let (last, rest) = names.split_last().expect("there are codecs");
        Err(format!("unknown codec {s:?} (expected {} or {last})", rest.join(", ")))
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
            .filter(|c| Format::V1.has_codec(*c))
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
            compressed if compressed != Codec::Raw && self.phys_length == 0 => {
                Err("empty compressed frame".to_string())
            }
            // An empty record is stored raw (review Z1).
            compressed if compressed != Codec::Raw && self.logic_length == 0 => {
                Err(format!("compressed record of {} stored bytes decodes to no bytes", self.phys_length))
            }
            _ => Ok(codec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review Z1, in v1's entries: a compressed record of no bytes is a bad entry.
    #[test]
    fn a_compressed_entry_of_no_bytes_is_refused() {
        let e = RecordLoc { offset: 0, phys_length: 41, logic_length: 0, chunk_id: 0, codec: 1, reserved: 0 };
        assert!(e.validate_limits().is_err_and(|r| r.contains("decodes to no bytes")));
        let raw = RecordLoc { phys_length: 0, codec: 0, ..e };
        assert_eq!(raw.validate_limits(), Ok(Codec::Raw), "an empty raw record");
    }

    #[test]
    fn codec_table_lists_every_codec_at_its_tag() {
        // The variants themselves decide which bytes the derived check accepts: a codec added to
        // the enum but not to `ALL` (or at a gap) fails here.
        for tag in 0..=u8::MAX {
            let variant = bytemuck::checked::try_cast::<u8, Codec>(tag).ok();
            assert_eq!(Codec::from_tag(tag), variant, "tag {tag}");
        }
        assert_eq!(Codec::from_tag(Codec::MAX_TAG).map(|c| c as usize), Some(Codec::COUNT - 1));
        assert_eq!(Codec::from_tag(Codec::MAX_TAG + 1), None);
        let mut names = Vec::new();
        for (tag, c) in Codec::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, tag, "{c} out of place");
            assert_eq!(c.name().parse::<Codec>(), Ok(c));
            assert_eq!(c.to_string(), c.name());
            names.push(c.name());
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Codec::COUNT, "two codecs share a name");
        assert_eq!("zstdict".parse::<Codec>(), Ok(Codec::ZstdDict));
        assert_eq!(
            "lz5".parse::<Codec>(),
            Err("unknown codec \"lz5\" (expected raw, zstd, zstd_dict or lz4)".to_string())
        );
    }

    #[test]
    fn codecs_check_themselves_except_lz4_and_raw() {
        let checking: Vec<Codec> = Codec::ALL.into_iter().filter(|c| c.self_checking()).collect();
        assert_eq!(checking, [Codec::Zstd, Codec::ZstdDict]);
        let always: Vec<Codec> = Codec::ALL.into_iter().filter(|c| c.checked_on_every_read()).collect();
        assert_eq!(always, [Codec::Lz4]);
    }

    #[test]
    fn each_format_holds_the_first_codecs_of_the_table() {
        assert_eq!(Format::V1.codecs(), [Codec::Raw, Codec::Zstd, Codec::ZstdDict], "v1's tags are fixed");
        assert_eq!(Format::V2.codecs(), Codec::ALL);
        for format in [Format::V1, Format::V2] {
            for c in Codec::ALL {
                assert_eq!(format.has_codec(c), format.codecs().contains(&c), "{format} {c}");
            }
            for tag in 0..=u8::MAX {
                let held = Codec::from_tag(tag).is_some_and(|c| format.codecs().contains(&c));
                assert_eq!(tag <= format.max_codec_tag(), held, "{format} tag {tag}");
            }
        }
    }

    #[test]
    fn record_loc_validate_rejects_each_bad_field() {
        let h = Header { tail_chunk: 1, tail_offset: 100, ..Header::empty() };
        let ok =
            RecordLoc { offset: 0, phys_length: 10, logic_length: 10, chunk_id: 1, codec: 0, reserved: 0 };
        assert_eq!(ok.validate(&h), Ok(Codec::Raw));
        let says = |loc: RecordLoc, what: &str| matches!(loc.validate(&h), Err(m) if m.contains(what));
        assert!(says(RecordLoc { codec: 9, ..ok }, "unknown codec tag 9"));
        assert!(says(RecordLoc { codec: Codec::Lz4 as u8, ..ok }, "unknown codec tag 3"), "v1 has no LZ4");
        assert!(says(RecordLoc { chunk_id: 2, ..ok }, "chunk 2 is past the tail chunk 1"));
        assert!(says(RecordLoc { offset: 95, ..ok }, "past its committed end 100"));
        assert!(says(RecordLoc { logic_length: 11, ..ok }, "stores 10 bytes of a 11-byte record"));
        assert!(says(
            RecordLoc { logic_length: (MAX_RECORD_SIZE + 1) as u32, codec: 1, ..ok },
            "exceeds the 1 MiB limit"
        ));
    }
}
