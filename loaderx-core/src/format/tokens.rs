//! The headers of the token files language models train from, as pure functions over their
//! bytes: Megatron-LM's indexed dataset index (`.idx`) and llm.c's token file header. Every
//! field is checked against the length of the file that holds it before anything may use it.
//!
//! Megatron's `.idx` (`megatron/core/datasets/indexed_dataset.py`, `_IndexWriter`), little
//! endian: the magic `MMIDIDX\0\0` (9 bytes), a `u64` version (1), a `u8` dtype code, a `u64`
//! sequence count `S`, a `u64` document count `D` (the length of the document index, one more
//! than the documents), then `S` `i32` sequence lengths (tokens), `S` `i64` byte offsets into the
//! `.bin`, `D` `i64` document boundaries (sequence indices, from 0 to `S`), and, in a multimodal
//! index only, `S` `i8` modes.
//!
//! llm.c's token files (`dev/data/data_common.py`): 256 little-endian `i32`s, `[0]` the magic
//! (20240520: `u16` GPT-2 tokens; 20240801: `u32` Llama-3 tokens), `[1]` the version, `[2]` the
//! token count; the tokens follow from byte 1024.

/// The first 9 bytes of a Megatron `.idx`.
pub const MEGATRON_MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// Bytes before a Megatron index's arrays.
pub const MEGATRON_HEADER_LEN: usize = 34;
/// The one version of the Megatron index there is.
pub const MEGATRON_VERSION: u64 = 1;
/// Bytes of an llm.c header (256 `i32`s).
pub const LLMC_HEADER_LEN: usize = 1024;
/// llm.c's magic for `u16` (GPT-2) tokens.
pub const LLMC_MAGIC_U16: i32 = 20_240_520;
/// llm.c's magic for `u32` (Llama-3) tokens.
pub const LLMC_MAGIC_U32: i32 = 20_240_801;
/// The version llm.c writes with [`LLMC_MAGIC_U16`] (`dev/data/data_common.py`, "gpt-2").
pub const LLMC_VERSION_U16: i32 = 1;
/// The version llm.c writes with [`LLMC_MAGIC_U32`] (`dev/data/data_common.py`, "llama-3").
pub const LLMC_VERSION_U32: i32 = 7;

/// An integer token type of the files' (the dtype codes Megatron gives its integers, and the
/// two llm.c writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// `u8`, Megatron code 1.
    U8,
    /// `i8`, code 2.
    I8,
    /// `i16`, code 3.
    I16,
    /// `i32`, code 4.
    I32,
    /// `i64`, code 5.
    I64,
    /// `u16`, code 8 (and llm.c's GPT-2 files).
    U16,
    /// `u32`: llm.c's Llama-3 files (Megatron has no code for it).
    U32,
}

impl TokenType {
    /// Bytes a token.
    pub const fn size(self) -> usize {
        match self {
            TokenType::U8 | TokenType::I8 => 1,
            TokenType::I16 | TokenType::U16 => 2,
            TokenType::I32 | TokenType::U32 => 4,
            TokenType::I64 => 8,
        }
    }

    /// The type of Megatron's dtype `code`; its float codes (6: `f64`, 7: `f32`) hold no token
    /// ids, and are `None` with the unknown ones.
    pub const fn from_megatron(code: u8) -> Option<TokenType> {
        Some(match code {
            1 => TokenType::U8,
            2 => TokenType::I8,
            3 => TokenType::I16,
            4 => TokenType::I32,
            5 => TokenType::I64,
            8 => TokenType::U16,
            _ => return None,
        })
    }

    /// Megatron's code for this type (`None` for `u32`, which it has no code for).
    pub const fn megatron_code(self) -> Option<u8> {
        Some(match self {
            TokenType::U8 => 1,
            TokenType::I8 => 2,
            TokenType::I16 => 3,
            TokenType::I32 => 4,
            TokenType::I64 => 5,
            TokenType::U16 => 8,
            TokenType::U32 => return None,
        })
    }

    /// The token at `at` of `bytes` (little endian), widened; `None` past the end.
    pub fn read(self, bytes: &[u8], at: usize) -> Option<i64> {
        let size = self.size();
        let b = bytes.get(at.checked_mul(size)?..at.checked_mul(size)?.checked_add(size)?)?;
        Some(match self {
            TokenType::U8 => i64::from(b[0]),
            TokenType::I8 => i64::from(b[0] as i8),
            TokenType::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            TokenType::U16 => i64::from(u16::from_le_bytes([b[0], b[1]])),
            TokenType::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            TokenType::U32 => i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            TokenType::I64 => i64::from_le_bytes(b.try_into().ok()?),
        })
    }

    /// The position (in tokens) of the first token of `bytes` outside `0..vocab`, if any.
    pub fn first_outside(self, bytes: &[u8], vocab: u64) -> Option<(usize, i64)> {
        // One loop per type, so that each compiles to a plain compare over the slice.
        fn find<const N: usize>(
            bytes: &[u8],
            ok: impl Fn([u8; N]) -> bool,
            get: impl Fn([u8; N]) -> i64,
        ) -> Option<(usize, i64)> {
            bytes.chunks_exact(N).enumerate().find_map(|(i, c)| {
                let c: [u8; N] = c.try_into().expect("chunks of N");
                (!ok(c)).then(|| (i, get(c)))
            })
        }
        let v = vocab;
        match self {
            TokenType::U8 => find::<1>(bytes, |c| u64::from(c[0]) < v, |c| i64::from(c[0])),
            TokenType::I8 => find::<1>(
                bytes,
                |c| (c[0] as i8) >= 0 && ((c[0] as i8) as u64) < v,
                |c| i64::from(c[0] as i8),
            ),
            TokenType::U16 => find::<2>(
                bytes,
                |c| u64::from(u16::from_le_bytes(c)) < v,
                |c| i64::from(u16::from_le_bytes(c)),
            ),
            TokenType::I16 => find::<2>(
                bytes,
                |c| u64::try_from(i16::from_le_bytes(c)).is_ok_and(|t| t < v),
                |c| i64::from(i16::from_le_bytes(c)),
            ),
            TokenType::U32 => find::<4>(
                bytes,
                |c| u64::from(u32::from_le_bytes(c)) < v,
                |c| i64::from(u32::from_le_bytes(c)),
            ),
            TokenType::I32 => find::<4>(
                bytes,
                |c| u64::try_from(i32::from_le_bytes(c)).is_ok_and(|t| t < v),
                |c| i64::from(i32::from_le_bytes(c)),
            ),
            TokenType::I64 => find::<8>(
                bytes,
                |c| u64::try_from(i64::from_le_bytes(c)).is_ok_and(|t| t < v),
                i64::from_le_bytes,
            ),
        }
    }

    /// The type's name (`"u16"`), as loaderx names dtypes.
    pub const fn name(self) -> &'static str {
        match self {
            TokenType::U8 => "u8",
            TokenType::I8 => "i8",
            TokenType::I16 => "i16",
            TokenType::I32 => "i32",
            TokenType::I64 => "i64",
            TokenType::U16 => "u16",
            TokenType::U32 => "u32",
        }
    }
}

/// Why a header is refused: the field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    /// The field (`"magic"`, `"sequence_count"`...).
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

fn refuse(field: &'static str, reason: impl Into<String>) -> HeaderError {
    HeaderError { field, reason: reason.into() }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A Megatron index's header, its arrays' places checked against the index's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegatronHeader {
    /// The tokens' type.
    pub token: TokenType,
    /// Sequences (`S`).
    pub sequences: usize,
    /// Entries of the document index (`D`: the documents plus one).
    pub document_entries: usize,
    /// Whether the index holds the multimodal modes after the document index.
    pub multimodal: bool,
}

impl MegatronHeader {
    /// Byte offset of the `i32` sequence lengths.
    pub const fn lengths_at(&self) -> usize {
        MEGATRON_HEADER_LEN
    }

    /// Byte offset of the `i64` sequence byte offsets.
    pub const fn pointers_at(&self) -> usize {
        MEGATRON_HEADER_LEN + 4 * self.sequences
    }

    /// Byte offset of the `i64` document index.
    pub const fn documents_at(&self) -> usize {
        self.pointers_at() + 8 * self.sequences
    }

    /// Sequence `i`'s length in tokens and byte offset into the `.bin`, from the index's bytes
    /// (`None` for `i` out of range); the values are as written, unchecked.
    pub fn sequence(&self, idx: &[u8], i: usize) -> Option<(i32, i64)> {
        if i >= self.sequences {
            return None;
        }
        let l = idx.get(self.lengths_at() + 4 * i..self.lengths_at() + 4 * i + 4)?;
        let p = idx.get(self.pointers_at() + 8 * i..self.pointers_at() + 8 * i + 8)?;
        Some((i32::from_le_bytes(l.try_into().ok()?), i64::from_le_bytes(p.try_into().ok()?)))
    }

    /// Entry `k` of the document index, as written; `None` out of range.
    pub fn document_entry(&self, idx: &[u8], k: usize) -> Option<i64> {
        if k >= self.document_entries {
            return None;
        }
        let at = self.documents_at() + 8 * k;
        Some(i64::from_le_bytes(idx.get(at..at + 8)?.try_into().ok()?))
    }
}

/// Reads the header of the Megatron index `idx` (the whole file's bytes), checking that its
/// counts describe arrays that fill the file exactly (with or without the multimodal modes).
///
/// # Errors
/// [`HeaderError`] naming the field: a short file, another magic, a version other than 1, a
/// dtype code that is not an integer type, counts whose arrays do not fit the file.
pub fn megatron_header(idx: &[u8]) -> Result<MegatronHeader, HeaderError> {
    if idx.len() < MEGATRON_HEADER_LEN {
        return Err(refuse("header", format!("{} bytes, a header is {MEGATRON_HEADER_LEN}", idx.len())));
    }
    if &idx[..9] != MEGATRON_MAGIC {
        return Err(refuse("magic", "not MMIDIDX\\0\\0: not a Megatron index"));
    }
    let version = u64_at(idx, 9);
    if version != MEGATRON_VERSION {
        return Err(refuse("version", format!("{version}, the one version known is {MEGATRON_VERSION}")));
    }
    let code = idx[17];
    let token = TokenType::from_megatron(code)
        .ok_or_else(|| refuse("dtype", format!("code {code} is not an integer token type (1-5, 8)")))?;
    let (s, d) = (u64_at(idx, 18), u64_at(idx, 26));
    let body = (idx.len() - MEGATRON_HEADER_LEN) as u64;
    // 20 bytes a sequence (and one more with modes), 8 an entry of the document index: counts
    // are checked against the bytes present before any product of them is formed unchecked.
    let arrays = s.checked_mul(12).and_then(|a| d.checked_mul(8).and_then(|b| a.checked_add(b)));
    let Some(arrays) = arrays.filter(|&a| a <= body) else {
        return Err(refuse(
            "sequence_count",
            format!(
                "{s} sequences and {d} document entries need more than the {body} bytes after the header"
            ),
        ));
    };
    let multimodal = match body - arrays {
        0 => false,
        rest if rest == s => true,
        rest => {
            return Err(refuse(
                "document_count",
                format!("{s} sequences and {d} document entries leave {rest} bytes of the index unexplained"),
            ));
        }
    };
    if d == 0 {
        return Err(refuse(
            "document_count",
            "0: the document index starts with 0 and ends with the sequence count",
        ));
    }
    // Both fit in memory: their arrays are in `idx`.
    Ok(MegatronHeader { token, sequences: s as usize, document_entries: d as usize, multimodal })
}

/// An llm.c token file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmcHeader {
    /// The tokens' type (by the magic).
    pub token: TokenType,
    /// `header[1]`, as written.
    pub version: i32,
    /// Tokens after the header.
    pub tokens: u64,
}

/// Whether `head` (a file's first bytes) starts with an llm.c magic.
pub fn is_llmc(head: &[u8]) -> bool {
    head.len() >= 4
        && matches!(i32::from_le_bytes([head[0], head[1], head[2], head[3]]), LLMC_MAGIC_U16 | LLMC_MAGIC_U32)
}

/// Reads the llm.c header at the start of `head` (at least its 1024 bytes), checking its token
/// count against `file_len`, the whole file's length.
///
/// # Errors
/// [`HeaderError`]: a short file, an unknown magic, a negative token count or one the file's
/// length does not hold exactly.
pub fn llmc_header(head: &[u8], file_len: u64) -> Result<LlmcHeader, HeaderError> {
    if head.len() < LLMC_HEADER_LEN || file_len < LLMC_HEADER_LEN as u64 {
        return Err(refuse("header", format!("{file_len} bytes, an llm.c header is {LLMC_HEADER_LEN}")));
    }
    let int = |k: usize| i32::from_le_bytes(head[4 * k..4 * k + 4].try_into().expect("4 bytes"));
    let (token, version) = match int(0) {
        LLMC_MAGIC_U16 => (TokenType::U16, LLMC_VERSION_U16),
        LLMC_MAGIC_U32 => (TokenType::U32, LLMC_VERSION_U32),
        m => return Err(refuse("header[0] (magic)", format!("{m}, not 20240520 or 20240801"))),
    };
    if int(1) != version {
        return Err(refuse(
            "header[1] (version)",
            format!("{}, the version llm.c writes with magic {} is {version}", int(1), int(0)),
        ));
    }
    let count = int(2);
    let tokens = u64::try_from(count).map_err(|_| refuse("header[2] (token count)", format!("{count}")))?;
    let have = (file_len - LLMC_HEADER_LEN as u64) / token.size() as u64;
    if tokens != have || !(file_len - LLMC_HEADER_LEN as u64).is_multiple_of(token.size() as u64) {
        return Err(refuse(
            "header[2] (token count)",
            format!(
                "{tokens} tokens of {} bytes after the header, the file holds {} bytes there",
                token.size(),
                file_len - LLMC_HEADER_LEN as u64
            ),
        ));
    }
    Ok(LlmcHeader { token, version: int(1), tokens })
}

/// The header of a Megatron index of `sequences` sequences and `document_entries` document
/// entries of `token` tokens (the arrays follow; [`megatron_header`] reads it back).
pub fn encode_megatron_header(
    token: TokenType,
    sequences: u64,
    document_entries: u64,
) -> Option<[u8; MEGATRON_HEADER_LEN]> {
    let mut h = [0u8; MEGATRON_HEADER_LEN];
    h[..9].copy_from_slice(MEGATRON_MAGIC);
    h[9..17].copy_from_slice(&MEGATRON_VERSION.to_le_bytes());
    h[17] = token.megatron_code()?;
    h[18..26].copy_from_slice(&sequences.to_le_bytes());
    h[26..34].copy_from_slice(&document_entries.to_le_bytes());
    Some(h)
}

/// The llm.c header of `tokens` tokens of `token` (`u16` or `u32`; `None` for other types, or a
/// count over `i32::MAX`).
pub fn encode_llmc_header(token: TokenType, tokens: u64) -> Option<[u8; LLMC_HEADER_LEN]> {
    let (magic, version) = match token {
        TokenType::U16 => (LLMC_MAGIC_U16, LLMC_VERSION_U16),
        TokenType::U32 => (LLMC_MAGIC_U32, LLMC_VERSION_U32),
        _ => return None,
    };
    let count = i32::try_from(tokens).ok()?;
    let mut h = [0u8; LLMC_HEADER_LEN];
    h[..4].copy_from_slice(&magic.to_le_bytes());
    h[4..8].copy_from_slice(&i32::to_le_bytes(version));
    h[8..12].copy_from_slice(&count.to_le_bytes());
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(token: TokenType, lengths: &[i32], docs: &[i64]) -> Vec<u8> {
        let mut b = encode_megatron_header(token, lengths.len() as u64, docs.len() as u64).unwrap().to_vec();
        let mut at = 0i64;
        b.extend(lengths.iter().flat_map(|l| l.to_le_bytes()));
        for l in lengths {
            b.extend(at.to_le_bytes());
            at += i64::from(*l) * token.size() as i64;
        }
        b.extend(docs.iter().flat_map(|d| d.to_le_bytes()));
        b
    }

    #[test]
    fn a_megatron_header_round_trips_and_each_lying_field_is_named() {
        let good = index(TokenType::U16, &[3, 5, 2], &[0, 2, 3]);
        let h = megatron_header(&good).unwrap();
        assert_eq!((h.token, h.sequences, h.document_entries, h.multimodal), (TokenType::U16, 3, 3, false));
        assert_eq!(h.sequence(&good, 1), Some((5, 6)));
        assert_eq!(h.document_entry(&good, 2), Some(3));
        let mut modes = good.clone();
        modes.extend([0u8; 3]);
        assert!(megatron_header(&modes).unwrap().multimodal);

        let field = |b: &[u8]| megatron_header(b).unwrap_err().field;
        assert_eq!(field(&good[..20]), "header");
        let mut b = good.clone();
        b[0] = b'X';
        assert_eq!(field(&b), "magic");
        let mut b = good.clone();
        b[9] = 2;
        assert_eq!(field(&b), "version");
        for code in [0u8, 6, 7, 9, 255] {
            let mut b = good.clone();
            b[17] = code;
            assert_eq!(field(&b), "dtype", "{code}");
        }
        for s in [4u64, u64::MAX, u64::MAX / 12 + 1] {
            let mut b = good.clone();
            b[18..26].copy_from_slice(&s.to_le_bytes());
            assert_eq!(field(&b), "sequence_count", "{s}");
        }
        let mut b = good.clone();
        b[26..34].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(field(&b), "sequence_count");
        let mut b = good.clone();
        b[26..34].copy_from_slice(&2u64.to_le_bytes());
        assert_eq!(field(&b), "document_count", "8 bytes unexplained");
        let mut b = good;
        b.push(0);
        assert_eq!(field(&b), "document_count");
    }

    #[test]
    fn an_llmc_header_round_trips_and_its_count_must_match_the_file() {
        for (t, n) in [(TokenType::U16, 10u64), (TokenType::U32, 7)] {
            let h = encode_llmc_header(t, n).unwrap();
            assert!(is_llmc(&h));
            let len = LLMC_HEADER_LEN as u64 + n * t.size() as u64;
            assert_eq!(llmc_header(&h, len).unwrap().tokens, n);
            assert_eq!(llmc_header(&h, len + 1).unwrap_err().field, "header[2] (token count)");
            assert_eq!(llmc_header(&h, len - t.size() as u64).unwrap_err().field, "header[2] (token count)");
            // Each magic with its own version only (the other's, or any other, is refused).
            for v in [0, 2, 1 + 7 - (if t == TokenType::U16 { 1 } else { 7 }), i32::MAX] {
                let mut h = h;
                h[4..8].copy_from_slice(&v.to_le_bytes());
                assert_eq!(llmc_header(&h, len).unwrap_err().field, "header[1] (version)", "{t:?} {v}");
            }
        }
        let mut h = encode_llmc_header(TokenType::U16, 0).unwrap();
        h[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(llmc_header(&h, 1024).unwrap_err().field, "header[2] (token count)");
        h[..4].copy_from_slice(&7i32.to_le_bytes());
        assert!(!is_llmc(&h));
        assert_eq!(llmc_header(&h, 1024).unwrap_err().field, "header[0] (magic)");
        assert_eq!(llmc_header(&h[..100], 1024).unwrap_err().field, "header");
        assert!(encode_llmc_header(TokenType::I32, 1).is_none());
        assert!(encode_llmc_header(TokenType::U16, 1 << 31).is_none());
    }

    #[test]
    fn tokens_outside_the_vocabulary_are_found_at_their_position() {
        let v: Vec<u8> = [1u16, 5, 70, 2].iter().flat_map(|t| t.to_le_bytes()).collect();
        assert_eq!(TokenType::U16.first_outside(&v, 71), None);
        assert_eq!(TokenType::U16.first_outside(&v, 70), Some((2, 70)));
        let v: Vec<u8> = [1i32, -3].iter().flat_map(|t| t.to_le_bytes()).collect();
        assert_eq!(TokenType::I32.first_outside(&v, 100), Some((1, -3)));
        assert_eq!(TokenType::I8.first_outside(&[0xff], 100), Some((0, -1)));
        assert_eq!(TokenType::I64.read(&(-9i64).to_le_bytes(), 0), Some(-9));
        assert_eq!(TokenType::U16.read(&[1, 0], 1), None);
    }
}
