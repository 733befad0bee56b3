//! The on-disk layouts, as plain values and pure functions over `&[u8]`: nothing here touches a
//! file, so a fuzz target over any of them is a few lines.
//!
//! | module | file |
//! | --- | --- |
//! | `header` | `meta.zr`'s header and the v1 limits |
//! | `entry` | a `meta.zr` table entry and the codec tags |
//! | `dict` | `dict.zr`, the bare zstd dictionary (and the legacy headed file) |
//! | `journal` | `journal.zr`, the redo log of delete and compaction |
//! | `checksum` | the checksum of small metadata files, the 64-bit hash of descriptions |
//! | `storeset` | `storeset.msgpack`, a store set's manifest |
//! | `tokens` | token files: Megatron's `.idx` header and arrays, llm.c's header |
//! | `v2` | format v2: its header, entries and manifest |

mod checksum;
pub mod dict;
mod entry;
mod header;
mod journal;
pub mod storeset;
pub mod tokens;
pub mod v2;

/// Which on-disk layout a store has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// The specification's layout, byte for byte: a fixed sparse table of 2^24 16-byte entries in
    /// host byte order, `u32` offsets in chunks of at most 4 GiB, records of at most 1 MiB, no
    /// record checksums.
    V1,
    /// No walls: a dense little-endian index growing with the data (`u64` counts and offsets),
    /// records up to 4 GiB - 1, chunk files of any size, a crc32c per record and per entry, a chunk
    /// manifest, LZ4. The default for new stores.
    #[default]
    V2,
}

impl Format {
    /// `v1` or `v2`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::V1 => "v1",
            Format::V2 => "v2",
        }
    }

    /// The largest record this format stores.
    pub const fn max_record_size(self) -> usize {
        match self {
            Format::V1 => MAX_RECORD_SIZE,
            Format::V2 => v2::MAX_RECORD_SIZE,
        }
    }

    /// The most records a store of this format holds.
    pub const fn max_records(self) -> u64 {
        match self {
            Format::V1 => MAX_RECORDS as u64,
            Format::V2 => v2::MAX_RECORDS,
        }
    }

    /// The codecs this format holds, by tag: the first of [`Codec::ALL`] (checked at compile
    /// time), so a tag up to [`Format::max_codec_tag`] is one of them. v1 predates LZ4.
    pub const fn codecs(self) -> &'static [Codec] {
        match self {
            Format::V1 => &[Codec::Raw, Codec::Zstd, Codec::ZstdDict],
            Format::V2 => &Codec::ALL,
        }
    }

    /// The highest codec tag this format holds: an entry's tag is one of its codecs exactly when
    /// it is at most this (the gathers' branch-free entry check).
    #[inline]
    pub const fn max_codec_tag(self) -> u8 {
        (self.codecs().len() - 1) as u8
    }

    /// Whether `codec` exists in this format.
    #[inline]
    pub const fn has_codec(self, codec: Codec) -> bool {
        codec as u8 <= self.max_codec_tag()
    }
}

// `max_codec_tag` and `has_codec` rest on each format's codecs being a prefix of `Codec::ALL`.
const _: () = {
    let formats = [Format::V1, Format::V2];
    let mut f = 0;
    while f < formats.len() {
        let codecs = formats[f].codecs();
        assert!(!codecs.is_empty() && codecs.len() <= Codec::COUNT);
        let mut t = 0;
        while t < codecs.len() {
            assert!(codecs[t] as usize == t, "a format's codecs are not the first of Codec::ALL");
            t += 1;
        }
        f += 1;
    }
};

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "v1" | "1" => Ok(Format::V1),
            "v2" | "2" => Ok(Format::V2),
            other => Err(format!("unknown store format {other:?} (expected v1 or v2)")),
        }
    }
}

pub use checksum::{checksum, hash64};
pub use entry::{Codec, RecordLoc};
pub use header::{
    ENTRY_SIZE, Header, HeaderError, MAGIC, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, MAX_RECORDS,
    META_SIZE, VERSION,
};
pub use journal::Journal;
