//! `manifest.zr`: every chunk's committed length and checksum, rewritten (atomically) at each
//! commit. A remote reader compares it to detect a store rewritten under it; `verify` checks the
//! chunks against it.
//!
//! ```text
//! offset       size field
//!  0            4   magic "ZMAN"
//!  4            2   version (1)
//!  6            2   zero
//!  8            8   record count the manifest was written with
//! 16            4   number of chunks C
//! 20            4   zero
//! 24 + 16 k     8   chunk k: committed length
//! 32 + 16 k     4   chunk k: crc32c of its committed bytes
//! 36 + 16 k     4   zero
//! 24 + 16 C     4   crc32c of every byte before it
//! ```

/// Magic bytes of `manifest.zr`.
pub const MAGIC: [u8; 4] = *b"ZMAN";
const VERSION: u16 = 1;
const HEAD: usize = 24;
const ROW: usize = 16;

/// One chunk's line of the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkSummary {
    /// Committed bytes of the chunk.
    pub len: u64,
    /// crc32c of those bytes.
    pub crc: u32,
}

/// The length of a manifest of `chunks` chunks: what a reader may read of one (saturating).
pub const fn manifest_len(chunks: u64) -> u64 {
    chunks.saturating_mul(ROW as u64).saturating_add((HEAD + 4) as u64)
}

/// The decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// The record count it was written with.
    pub count: u64,
    /// Chunk `k`'s summary at index `k`.
    pub chunks: Vec<ChunkSummary>,
}

impl Manifest {
    /// The bytes of the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEAD + ROW * self.chunks.len() + 4);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.count.to_le_bytes());
        let chunks = u32::try_from(self.chunks.len()).unwrap_or(u32::MAX);
        b.extend_from_slice(&chunks.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        for c in &self.chunks {
            b.extend_from_slice(&c.len.to_le_bytes());
            b.extend_from_slice(&c.crc.to_le_bytes());
            b.extend_from_slice(&[0; 4]);
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// The chunk count in the head of `bytes`, and the committed length of chunk `k` when its
    /// row lies whole in the first `sound` bytes, when the magic and version are a manifest's:
    /// what is left to read of one whose tail a power loss left as zeros.
    pub fn head(bytes: &[u8], k: u32, sound: usize) -> Option<(u32, Option<u64>)> {
        let head = bytes.get(..HEAD)?;
        if head[0..4] != MAGIC || u16::from_le_bytes([head[4], head[5]]) != VERSION {
            return None;
        }
        let chunks = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
        let row = HEAD + ROW * k as usize;
        let len = (row + ROW <= sound.min(bytes.len()))
            .then(|| bytes[row..row + 8].try_into().ok().map(u64::from_le_bytes))
            .flatten();
        Some((chunks, len))
    }

    /// Parses a manifest; the chunk count is checked against the file's length before anything
    /// is allocated.
    ///
    /// # Errors
    /// `(offset, reason)` of the first problem; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, (u64, String)> {
        let head = bytes
            .get(..HEAD)
            .ok_or((0, format!("{} bytes is shorter than the manifest header", bytes.len())))?;
        if head[0..4] != MAGIC {
            return Err((0, "bad manifest magic".into()));
        }
        let version = u16::from_le_bytes([head[4], head[5]]);
        if version != VERSION {
            return Err((4, format!("unsupported manifest version {version}")));
        }
        let count = u64::from_le_bytes(head[8..16].try_into().unwrap_or([0; 8]));
        let chunks = u32::from_le_bytes([head[16], head[17], head[18], head[19]]) as usize;
        let want = chunks.checked_mul(ROW).and_then(|n| n.checked_add(HEAD + 4));
        if want != Some(bytes.len()) {
            return Err((16, format!("{chunks} chunks do not fit a manifest of {} bytes", bytes.len())));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body).to_le_bytes() != tail {
            return Err((body.len() as u64, "manifest checksum mismatch".into()));
        }
        if head[6..8] != [0, 0]
            || head[20..24] != [0; 4]
            || body[HEAD..].chunks_exact(ROW).any(|r| r[12..16] != [0; 4])
        {
            return Err((6, "reserved bytes are not zero".into()));
        }
        let chunks = body[HEAD..]
            .chunks_exact(ROW)
            .map(|r| ChunkSummary {
                len: u64::from_le_bytes(r[0..8].try_into().unwrap_or([0; 8])),
                crc: u32::from_le_bytes([r[8], r[9], r[10], r[11]]),
            })
            .collect();
        Ok(Manifest { count, chunks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_damage_is_caught() {
        let m = Manifest {
            count: 12,
            chunks: vec![ChunkSummary { len: 1 << 33, crc: 7 }, ChunkSummary { len: 5, crc: 9 }],
        };
        let b = m.encode();
        assert_eq!(Manifest::decode(&b), Ok(m.clone()));
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x40;
            // The magic, the version and the chunk count are checked before the checksum (at
            // the manifest's last 4 bytes).
            let (at, what) = match i {
                0..4 => (0, "magic"),
                4..6 => (4, "version"),
                16..20 => (16, "chunks do not fit"),
                _ => (b.len() as u64 - 4, "checksum mismatch"),
            };
            assert!(
                matches!(Manifest::decode(&bad), Err((o, ref r)) if o == at && r.contains(what)),
                "byte {i}"
            );
        }
        assert!(
            matches!(Manifest::decode(&b[..b.len() - 1]), Err((16, ref r)) if r.contains("2 chunks do not fit"))
        );
        assert_eq!(Manifest::decode(&Manifest::default().encode()), Ok(Manifest::default()));
    }

    #[test]
    fn a_huge_chunk_count_is_refused_before_allocating() {
        let mut b = Manifest::default().encode();
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            matches!(Manifest::decode(&b), Err((16, ref r)) if r.contains("4294967295 chunks do not fit"))
        );
    }
}
