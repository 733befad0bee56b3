//! `journal.zr`: the redo log that makes delete and compaction moves atomic across a crash.
//!
//! An operation that rewrites live table entries (delete) or live record bytes (compaction) first
//! writes what it will do here, durably (write a temporary file, sync, rename, sync the directory);
//! then applies it; then removes the journal. An opener that finds a complete journal re-applies
//! it, which is idempotent; a torn journal was never renamed into place, so it is never seen.
//!
//! This is also what makes a compaction move that overlaps its own old bytes safe: the record's
//! bytes are in the journal before its old copy is overwritten.

use super::checksum::checksum;
use super::entry::RecordLoc;

const MAGIC: [u8; 4] = *b"ZJRN";
const VERSION: u16 = 1;
const HEAD: usize = 32;

/// What a journal says to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Journal {
    /// Set these table entries, then publish `new_length`.
    Delete {
        /// (index, new entry) pairs.
        entries: Vec<(u32, RecordLoc)>,
        /// The length published once the entries are set.
        new_length: u32,
    },
    /// Write each record's bytes (concatenated in `data`, `phys_length` each) at its new location,
    /// then point its table entry there.
    Move {
        /// (index, new entry) pairs, in the order of their bytes in `data`.
        entries: Vec<(u32, RecordLoc)>,
        /// The moved records' stored bytes.
        data: Vec<u8>,
    },
}

impl Journal {
    /// Serialises the journal.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, entries, new_length, data): (u16, _, u32, &[u8]) = match self {
            Journal::Delete { entries, new_length } => (1, entries, *new_length, &[]),
            Journal::Move { entries, data } => (2, entries, 0, data),
        };
        let mut body = Vec::with_capacity(entries.len() * 20 + data.len());
        for (idx, loc) in entries {
            body.extend_from_slice(&idx.to_le_bytes());
            body.extend_from_slice(bytemuck::bytes_of(loc));
        }
        body.extend_from_slice(data);
        let mut out = Vec::with_capacity(HEAD + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        out.extend_from_slice(&new_length.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&checksum(&body).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&body);
        out
    }

    /// Parses a journal; never panics on any input.
    ///
    /// # Errors
    /// `(offset, reason)` of the first problem.
    pub fn decode(bytes: &[u8]) -> Result<Journal, (u64, String)> {
        let head = bytes
            .get(..HEAD)
            .ok_or((0, format!("{} bytes is shorter than the journal header", bytes.len())))?;
        let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        if head[..4] != MAGIC {
            return Err((0, "bad journal magic".into()));
        }
        if u16_at(4) != VERSION {
            return Err((4, format!("unsupported journal version {}", u16_at(4))));
        }
        let kind = u16_at(6);
        let count = u32_at(8) as usize;
        let new_length = u32_at(12);
        let body_len = u64::from_le_bytes(head[16..24].try_into().unwrap_or([0; 8]));
        let body = &bytes[HEAD..];
        if body.len() as u64 != body_len {
            return Err((16, format!("journal body is {} bytes, header says {body_len}", body.len())));
        }
        if checksum(body) != u32_at(24) {
            return Err((24, "journal checksum mismatch".into()));
        }
        let table_len = count
            .checked_mul(20)
            .filter(|&n| n <= body.len())
            .ok_or((8, "entry count exceeds the body".to_string()))?;
        let entries: Vec<(u32, RecordLoc)> = body[..table_len]
            .chunks_exact(20)
            .map(|c| {
                let idx = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let loc: [u8; 16] = c[4..20].try_into().unwrap_or([0; 16]);
                (idx, RecordLoc::from_bytes(loc))
            })
            .collect();
        let data = &body[table_len..];
        match kind {
            1 if data.is_empty() => Ok(Journal::Delete { entries, new_length }),
            2 => {
                let need: u64 = entries.iter().map(|(_, l)| u64::from(l.phys_length)).sum();
                if need != data.len() as u64 {
                    return Err((
                        HEAD as u64,
                        format!("move journal holds {} data bytes, entries need {need}", data.len()),
                    ));
                }
                Ok(Journal::Move { entries, data: data.to_vec() })
            }
            k => Err((6, format!("unknown journal kind {k}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(o: u32) -> RecordLoc {
        RecordLoc { offset: o, phys_length: 3, logic_length: 3, chunk_id: 0, codec: 0, reserved: 0 }
    }

    #[test]
    fn journal_round_trips() {
        let d = Journal::Delete { entries: vec![(4, loc(9)), (1, loc(0))], new_length: 3 };
        assert_eq!(Journal::decode(&d.encode()).unwrap(), d);
        let m = Journal::Move { entries: vec![(0, loc(0)), (2, loc(3))], data: b"abcdef".to_vec() };
        assert_eq!(Journal::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn journal_rejects_damage_and_truncation() {
        let m = Journal::Move { entries: vec![(0, loc(0))], data: b"abc".to_vec() }.encode();
        for cut in [0, 5, 31, m.len() - 1] {
            assert!(Journal::decode(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = m.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(Journal::decode(&bad).is_err());
    }
}
