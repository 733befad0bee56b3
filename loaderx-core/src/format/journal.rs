//! `journal.zr`: the redo log that makes delete and compaction moves atomic across a crash.
//!
//! An operation that rewrites live table entries (delete) or live record bytes (compaction) first
//! writes what it will do here, durably (write a temporary file, sync, rename, sync the directory);
//! then applies it; then removes the journal. An opener that finds a complete journal re-applies
//! it, which is idempotent; a torn journal was never renamed into place, so it is never seen.
//!
//! This is also what makes a compaction move that overlaps its own old bytes safe: the record's
//! bytes are in the journal before its old copy is overwritten.
//!
//! Two layouts, one per store format, both little-endian:
//!
//! ```text
//! version 3 (v1 stores)                     version 4 (v2 stores)
//!  0  4 magic "ZJRN"                         0  4 magic "ZJRN"
//!  4  2 version 3                            4  2 version 4
//!  6  2 kind (1 delete, 2 move)              6  2 kind
//!  8  4 entries                              8  4 entries
//! 12  4 new length (delete)                 12  4 zero
//! 16  8 body length                         16  8 new length (delete)
//! 24  4 FNV-1a of the body                  24  8 body length
//! 28  4 FNV-1a of bytes 4..28               32  4 crc32c of the body
//!                                           36  4 crc32c of bytes 4..36
//! body: per entry u32 index + the 16-byte   body: per entry u64 index + the 32-byte v2 entry;
//! v1 entry; then the moved bytes            then the moved bytes (a move), or per block a
//!                                           fixed-stride delete sums again its u64 number, u32
//!                                           planned crc32c and u32 zero (a delete)
//! ```
//!
//! Versions 1 and 2 are the same layouts with zero for the header's checksum, as builds before
//! it wrote them: still read (a crash may have left one), their header unchecked. The header's
//! checksum covers the kind, the counts and the lengths: one bit of a delete's new length,
//! unchecked, cut committed records off and `verify` then called the store intact (look 174,
//! L174-2).

use super::checksum::checksum;
use super::entry::RecordLoc;
use super::v2::Entry;
use super::{Codec, Format};

const MAGIC: [u8; 4] = *b"ZJRN";

/// The bytes of one planned block sum in a delete journal: `u64` block, `u32` crc32c, `u32` zero.
const SUM_ROW: usize = 16;

/// What a journal says to do. Entries are held in the v2 form whatever the store's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Journal {
    /// Set these table entries, then publish `new_length`.
    Delete {
        /// (index, new entry) pairs.
        entries: Vec<(u64, Entry)>,
        /// The length published once the entries are set.
        new_length: u64,
        /// A fixed-stride store's: `(block, crc32c)` of every block the delete sums again, as
        /// planned from the checked blocks before anything moved. Applying the journal (after a
        /// crash too) refuses a block whose bytes then sum otherwise: damage that arrived in
        /// between is reported, never certified. Empty for the entry layouts (and in a journal
        /// written before the sums were kept, which is applied as it was then).
        sums: Vec<(u64, u32)>,
    },
    /// Write each record's bytes (concatenated in `data`, `stored` each) at its new location,
    /// then point its table entry there.
    Move {
        /// (index, new entry) pairs, in the order of their bytes in `data`.
        entries: Vec<(u64, Entry)>,
        /// The moved records' stored bytes.
        data: Vec<u8>,
    },
}

impl Journal {
    /// Serialises the journal in the layout of `format`.
    ///
    /// # Panics
    /// For a v1 journal whose entries or length do not fit v1's fields (a v1 store never makes
    /// one).
    pub fn encode(&self, format: Format) -> Vec<u8> {
        let sum_rows: Vec<u8>;
        let (kind, entries, new_length, data): (u16, _, u64, &[u8]) = match self {
            Journal::Delete { entries, new_length, sums } => {
                assert!(sums.is_empty() || format == Format::V2, "a v1 store has no fixed stride");
                sum_rows = sums
                    .iter()
                    .flat_map(|&(b, sum)| [b.to_le_bytes().as_slice(), &sum.to_le_bytes(), &[0; 4]].concat())
                    .collect();
                (1, entries, *new_length, &sum_rows)
            }
            Journal::Move { entries, data } => (2, entries, 0, data),
        };
        let count = u32::try_from(entries.len()).expect("a journal batch holds fewer than 2^32 entries");
        let mut body = Vec::with_capacity(entries.len() * 40 + data.len());
        for (idx, e) in entries {
            match format {
                Format::V1 => {
                    let idx = u32::try_from(*idx).expect("a v1 index fits u32");
                    let loc = RecordLoc::try_from(*e).expect("a v1 store's entries fit v1");
                    body.extend_from_slice(&idx.to_le_bytes());
                    body.extend_from_slice(bytemuck::bytes_of(&loc));
                }
                Format::V2 => {
                    body.extend_from_slice(&idx.to_le_bytes());
                    body.extend_from_slice(&e.encode());
                }
            }
        }
        body.extend_from_slice(data);
        let mut out = Vec::with_capacity(40 + body.len());
        out.extend_from_slice(&MAGIC);
        match format {
            Format::V1 => {
                let new_length = u32::try_from(new_length).expect("a v1 length fits u32");
                out.extend_from_slice(&3u16.to_le_bytes());
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
                out.extend_from_slice(&new_length.to_le_bytes());
                out.extend_from_slice(&(body.len() as u64).to_le_bytes());
                out.extend_from_slice(&checksum(&body).to_le_bytes());
                let head = checksum(&out[4..28]);
                out.extend_from_slice(&head.to_le_bytes());
            }
            Format::V2 => {
                out.extend_from_slice(&4u16.to_le_bytes());
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(&new_length.to_le_bytes());
                out.extend_from_slice(&(body.len() as u64).to_le_bytes());
                out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
                let head = crc32c::crc32c(&out[4..36]);
                out.extend_from_slice(&head.to_le_bytes());
            }
        }
        out.extend_from_slice(&body);
        out
    }

    /// Parses a journal of either layout; never panics on any input.
    ///
    /// # Errors
    /// `(offset, reason)` of the first problem.
    pub fn decode(bytes: &[u8]) -> Result<Journal, (u64, String)> {
        let short = || (0, format!("{} bytes is shorter than the journal header", bytes.len()));
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]));
        if bytes.len() < 8 {
            return Err(short());
        }
        if bytes[..4] != MAGIC {
            return Err((0, "bad journal magic".into()));
        }
        let version = u16_at(4);
        let (head, row, count, new_length, body_len, sum_ok) = match version {
            1 | 3 if bytes.len() >= 32 => {
                let body = &bytes[32..];
                (32, 20, u32_at(8) as usize, u64::from(u32_at(12)), u64_at(16), checksum(body) == u32_at(24))
            }
            2 | 4 if bytes.len() >= 40 => {
                let body = &bytes[40..];
                (40, 40, u32_at(8) as usize, u64_at(16), u64_at(24), crc32c::crc32c(body) == u32_at(32))
            }
            1..=4 => return Err(short()),
            v => return Err((4, format!("unsupported journal version {v}"))),
        };
        check_header(bytes, version)?;
        let kind = u16_at(6);
        let body = &bytes[head..];
        if body.len() as u64 != body_len {
            return Err((
                head as u64 - 16,
                format!("journal body is {} bytes, header says {body_len}", body.len()),
            ));
        }
        if !sum_ok {
            return Err((head as u64 - 8, "journal checksum mismatch".into()));
        }
        let table_len = count
            .checked_mul(row)
            .filter(|&n| n <= body.len())
            .ok_or((8, "entry count exceeds the body".to_string()))?;
        let mut entries = Vec::with_capacity(count);
        for c in body[..table_len].chunks_exact(row) {
            entries.push(if row == 20 {
                let idx = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let loc: [u8; 16] = c[4..20].try_into().unwrap_or([0; 16]);
                (u64::from(idx), Entry::from(RecordLoc::from_bytes(loc)))
            } else {
                let idx = u64::from_le_bytes(c[0..8].try_into().unwrap_or([0; 8]));
                let e = Entry::parse(&c[8..40]).map_err(|e| (head as u64, format!("journal entry: {e}")))?;
                (idx, e)
            });
        }
        let data = &body[table_len..];
        match kind {
            1 if head == 32 && !data.is_empty() => {
                Err((head as u64, "a v1 delete journal holds no data".into()))
            }
            1 => {
                if !data.len().is_multiple_of(SUM_ROW) {
                    return Err((
                        head as u64 + table_len as u64,
                        format!(
                            "a delete journal's block sums are {} bytes, not rows of {SUM_ROW}",
                            data.len()
                        ),
                    ));
                }
                let sums = data
                    .chunks_exact(SUM_ROW)
                    .map(|c| {
                        let block = u64::from_le_bytes(c[0..8].try_into().unwrap_or([0; 8]));
                        (block, u32::from_le_bytes([c[8], c[9], c[10], c[11]]))
                    })
                    .collect();
                // A delete sets entries below the count it publishes (the records that fill its
                // holes): one past it is a count damaged in a journal without a header checksum.
                if let Some(&(idx, _)) = entries.iter().find(|(idx, _)| *idx >= new_length) {
                    return Err((
                        if head == 32 { 12 } else { 16 },
                        format!(
                            "a delete journal sets entry {idx}, past the count {new_length} it publishes"
                        ),
                    ));
                }
                Ok(Journal::Delete { entries, new_length, sums })
            }
            2 => {
                let need: u64 = entries.iter().map(|(_, e)| u64::from(e.stored)).sum();
                if need != data.len() as u64 {
                    return Err((
                        head as u64,
                        format!("move journal holds {} data bytes, entries need {need}", data.len()),
                    ));
                }
                Ok(Journal::Move { entries, data: data.to_vec() })
            }
            k => Err((6, format!("unknown journal kind {k}"))),
        }
    }
}

/// The header checksum of a journal of `version` (3 and 4 carry one, in the header's last 4
/// bytes; `bytes` holds at least the header).
fn check_header(bytes: &[u8], version: u16) -> Result<(), (u64, String)> {
    let (end, sum): (usize, fn(&[u8]) -> u32) = match version {
        3 => (28, checksum),
        4 => (36, crc32c::crc32c),
        // Written before the header's checksum, with zero there: a newer journal whose version
        // was damaged down to one of these keeps its checksum, and is refused (look 175, L175-1:
        // the version and the count damaged together replayed the count unchecked).
        1 | 2 => {
            let at = if version == 1 { 28 } else { 36 };
            if bytes[at..at + 4] != [0; 4] {
                return Err((
                    4,
                    format!(
                        "journal version {version} with a header checksum, which that version has not: damaged"
                    ),
                ));
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    if sum(&bytes[4..end]).to_le_bytes()[..] != bytes[end..end + 4] {
        return Err((
            end as u64,
            "journal header checksum mismatch (its kind, counts or lengths damaged)".into(),
        ));
    }
    Ok(())
}

/// A v1 entry as the v2 form every layer above the format uses.
impl From<RecordLoc> for Entry {
    fn from(l: RecordLoc) -> Entry {
        Entry {
            offset: u64::from(l.offset),
            stored: l.phys_length,
            logical: l.logic_length,
            chunk: u32::from(l.chunk_id),
            codec: l.codec,
            crc: 0,
        }
    }
}

/// The v1 entry of a v2-form entry, when its fields fit v1's (and its codec exists in v1).
impl TryFrom<Entry> for RecordLoc {
    type Error = String;

    fn try_from(e: Entry) -> Result<RecordLoc, String> {
        let offset =
            u32::try_from(e.offset).map_err(|_| format!("offset {} does not fit v1's u32", e.offset))?;
        let chunk_id =
            u16::try_from(e.chunk).map_err(|_| format!("chunk {} does not fit v1's u16", e.chunk))?;
        // An unknown tag is left to the v1 entry's own validation, which names it.
        if let Some(c) = Codec::from_tag(e.codec)
            && !Format::V1.has_codec(c)
        {
            return Err(format!("{c} records do not exist in v1"));
        }
        Ok(RecordLoc {
            offset,
            phys_length: e.stored,
            logic_length: e.logical,
            chunk_id,
            codec: e.codec,
            reserved: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(o: u64) -> Entry {
        Entry { offset: o, stored: 3, logical: 3, chunk: 0, codec: 0, crc: 0 }
    }

    #[test]
    fn journal_round_trips_in_both_layouts() {
        for format in [Format::V1, Format::V2] {
            let d = Journal::Delete { entries: vec![(4, loc(9)), (1, loc(0))], new_length: 5, sums: vec![] };
            assert_eq!(Journal::decode(&d.encode(format)).unwrap(), d);
            let m = Journal::Move { entries: vec![(0, loc(0)), (2, loc(3))], data: b"abcdef".to_vec() };
            assert_eq!(Journal::decode(&m.encode(format)).unwrap(), m);
        }
        let big = Journal::Delete {
            entries: vec![(1 << 40, Entry { offset: 1 << 35, ..loc(0) })],
            new_length: 1 << 41,
            sums: vec![(0, 7), (1 << 33, u32::MAX)],
        };
        assert_eq!(Journal::decode(&big.encode(Format::V2)).unwrap(), big);
        // Sums that are not whole rows are refused, naming where they start.
        let mut odd = big.encode(Format::V2);
        odd.pop();
        let body_len = (odd.len() - 40) as u64;
        odd[24..32].copy_from_slice(&body_len.to_le_bytes());
        let sum = crc32c::crc32c(&odd[40..]);
        odd[32..36].copy_from_slice(&sum.to_le_bytes());
        let head = crc32c::crc32c(&odd[4..36]);
        odd[36..40].copy_from_slice(&head.to_le_bytes());
        let e = Journal::decode(&odd).unwrap_err();
        assert_eq!(e.0, 80, "{e:?}");
        assert!(e.1.contains("not rows of 16"), "{e:?}");
    }

    #[test]
    fn journal_rejects_damage_and_truncation() {
        // (byte of the body length, byte of the checksum) in each layout's header.
        for (format, body_at, sum_at) in [(Format::V1, 16, 24), (Format::V2, 24, 32)] {
            let m = Journal::Move { entries: vec![(0, loc(0))], data: b"abc".to_vec() }.encode(format);
            for cut in [0, 5, 31] {
                let short = format!("{cut} bytes is shorter than the journal header");
                assert!(matches!(Journal::decode(&m[..cut]), Err((0, ref r)) if *r == short), "cut at {cut}");
            }
            let cut = m.len() - 1;
            assert!(
                matches!(Journal::decode(&m[..cut]), Err((o, ref r)) if o == body_at && r.contains("journal body is")),
                "cut at {cut}"
            );
            let mut bad = m.clone();
            *bad.last_mut().unwrap() ^= 1;
            assert!(
                matches!(Journal::decode(&bad), Err((o, ref r)) if o == sum_at && r.contains("checksum mismatch"))
            );
        }
    }

    /// Look 174 (L174-2): a delete's new count sat outside every checksum; one bit of it cut
    /// committed records off. The header's checksum covers it; a journal of the versions before
    /// (header unchecked) is still read, a delete of one setting an entry past its count refused.
    #[test]
    fn a_journal_header_is_checked() {
        for (format, count_at, head_at) in [(Format::V1, 12, 28), (Format::V2, 16, 36)] {
            let d =
                Journal::Delete { entries: vec![(10, loc(9)), (3, loc(0))], new_length: 16, sums: vec![] };
            let bytes = d.encode(format);
            let mut bad = bytes.clone();
            bad[count_at] ^= 0x10;
            let e = Journal::decode(&bad).unwrap_err();
            assert!(e.0 == head_at as u64 && e.1.contains("header checksum mismatch"), "{e:?}");
            // As a build before the header's checksum wrote it: read; its count lowered past an
            // entry, refused by name.
            let mut old = bytes.clone();
            old[4] -= 2;
            old[head_at..head_at + 4].fill(0);
            assert_eq!(Journal::decode(&old).unwrap(), d);
            // The version alone damaged down: the header's checksum is still there (L175-1).
            let mut down = bytes.clone();
            down[4] -= 2;
            let e = Journal::decode(&down).unwrap_err();
            assert!(e.0 == 4 && e.1.contains("with a header checksum"), "{e:?}");
            old[count_at] = 8;
            let e = Journal::decode(&old).unwrap_err();
            assert!(e.0 == count_at as u64 && e.1.contains("sets entry 10, past the count 8"), "{e:?}");
        }
    }

    #[test]
    fn entries_convert_between_the_formats_where_they_fit() {
        let l = RecordLoc { offset: 7, phys_length: 5, logic_length: 9, chunk_id: 3, codec: 1, reserved: 0 };
        assert_eq!(RecordLoc::try_from(Entry::from(l)), Ok(l));
        let says = |e: Entry, what: &str| matches!(RecordLoc::try_from(e), Err(m) if m.contains(what));
        assert!(says(Entry { offset: 1 << 32, ..loc(0) }, "offset 4294967296 does not fit v1's u32"));
        assert!(says(Entry { chunk: 1 << 16, ..loc(0) }, "chunk 65536 does not fit v1's u16"));
        assert!(says(Entry { codec: Codec::Lz4 as u8, ..loc(0) }, "lz4 records do not exist in v1"));
    }
}
