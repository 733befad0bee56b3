//! Delimiter framing with a target chunk size: eager boundaries and a lazy cursor.

use super::search::Needle;
use crate::Result;

/// A lazy cursor over `data` yielding delimiter-aligned chunks, one slice at a time.
///
/// A chunk starting at `start` ends just after the first delimiter that *starts* at or after
/// `start + target`, or at the end of `data` when no delimiter remains (or when
/// `start + target` is already at or past the end). Chunks are contiguous, non-empty and cover
/// `data` exactly; empty input yields nothing. A delimiter that ends exactly at
/// `start + target` does not end the chunk there: the search begins at `start + target`.
///
/// A `target` of 0 is clamped to 1 (as mmap-chunker does), so every chunk then ends just
/// after the first delimiter past its first byte.
///
/// The cursor holds O(1) state and builds no boundary list; [`chunk_boundaries`] is the eager
/// form with the same boundaries.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::framing::ChunkCursor;
///
/// let data = b"aaa\nbbb\nccc\nddd\n";
/// let chunks: Vec<&[u8]> = ChunkCursor::new(data, 4, b'\n').collect();
/// assert_eq!(chunks, [&b"aaa\nbbb\n"[..], &b"ccc\nddd\n"[..]]);
/// ```
#[derive(Clone, Debug)]
pub struct ChunkCursor<'a> {
    data: &'a [u8],
    step: usize,
    needle: Needle,
    position: usize,
}

impl<'a> ChunkCursor<'a> {
    /// A cursor framing `data` on the single byte `delimiter` with chunks of about `target`
    /// bytes (0 is clamped to 1).
    pub fn new(data: &'a [u8], target: usize, delimiter: u8) -> ChunkCursor<'a> {
        ChunkCursor::with_needle(data, target, Needle::Byte(delimiter))
    }

    /// A cursor framing `data` on a multi-byte `pattern` (e.g. `b"\r\n"` or `b"\r\n\r\n"`)
    /// with chunks of about `target` bytes (0 is clamped to 1). The whole pattern ends the
    /// chunk.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `pattern` is empty.
    pub fn with_pattern(data: &'a [u8], target: usize, pattern: &[u8]) -> Result<ChunkCursor<'a>> {
        Ok(ChunkCursor::with_needle(data, target, Needle::pattern(pattern)?))
    }

    fn with_needle(data: &'a [u8], target: usize, needle: Needle) -> ChunkCursor<'a> {
        ChunkCursor { data, step: target.max(1), needle, position: 0 }
    }

    /// Byte offset where the next chunk starts (`data.len()` once exhausted).
    pub fn position(&self) -> usize {
        self.position
    }

    /// The next chunk as `(start, end_exclusive)` offsets, advancing the cursor.
    fn next_bounds(&mut self) -> Option<(usize, usize)> {
        let len = self.data.len();
        let start = self.position;
        if start >= len {
            return None;
        }
        let probe = start.saturating_add(self.step);
        let end = if probe >= len {
            len
        } else {
            self.needle.end_after(self.data, probe).map_or(len, |end| end.min(len))
        };
        self.position = end;
        Some((start, end))
    }
}

impl<'a> Iterator for ChunkCursor<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (start, end) = self.next_bounds()?;
        Some(&self.data[start..end])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = self.data.len() - self.position.min(self.data.len());
        if remaining == 0 {
            return (0, Some(0));
        }
        // At least one chunk remains; every chunk holds at least one byte.
        (1, Some(remaining))
    }
}

impl std::iter::FusedIterator for ChunkCursor<'_> {}

/// The `(start, end_exclusive)` offsets of every delimiter-aligned chunk of `data`.
///
/// Same boundaries as [`ChunkCursor::new`]: each chunk ends just after the first `delimiter`
/// at or after `start + target` (0 is clamped to 1), the last one at the end of `data`,
/// whether or not it ends with a delimiter. Empty input gives no chunks.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// let chunks = loaderx::framing::chunk_boundaries(b"a,b,c,d,e", 2, b',')?;
/// assert_eq!(chunks, [(0, 4), (4, 8), (8, 9)]);
/// # Ok::<(), loaderx::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the plan does not fit in
/// memory (a chunk per byte: a file of delimiters with `target` 1). [`ChunkCursor`] walks the
/// same chunks holding none.
pub fn chunk_boundaries(data: &[u8], target: usize, delimiter: u8) -> Result<Vec<(usize, usize)>> {
    collect_bounds(ChunkCursor::new(data, target, delimiter))
}

/// [`chunk_boundaries`] for a multi-byte `pattern` (CRLF, `\r\n\r\n`, ...).
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `pattern` is empty, or the
/// plan does not fit in memory.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// let chunks = loaderx::framing::chunk_boundaries_pattern(b"ab\r\ncd\r\nef", 1, b"\r\n")?;
/// assert_eq!(chunks, [(0, 4), (4, 8), (8, 10)]);
/// # Ok::<(), loaderx::Error>(())
/// ```
pub fn chunk_boundaries_pattern(data: &[u8], target: usize, pattern: &[u8]) -> Result<Vec<(usize, usize)>> {
    collect_bounds(ChunkCursor::with_pattern(data, target, pattern)?)
}

fn collect_bounds(mut cursor: ChunkCursor<'_>) -> Result<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    while let Some(bounds) = cursor.next_bounds() {
        super::range::push_planned(&mut out, bounds)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious byte loop: from `start + step`, walk until the pattern ends.
    fn naive(data: &[u8], target: usize, pat: &[u8]) -> Vec<(usize, usize)> {
        let step = target.max(1);
        let mut out = Vec::new();
        let mut start = 0;
        while start < data.len() {
            let mut end = data.len();
            let mut p = start + step;
            while p + pat.len() <= data.len() {
                if &data[p..p + pat.len()] == pat {
                    end = p + pat.len();
                    break;
                }
                p += 1;
            }
            out.push((start, end));
            start = end;
        }
        out
    }

    #[test]
    fn empty_input_gives_no_chunks() {
        assert!(chunk_boundaries(b"", 10, b'\n').unwrap().is_empty());
        assert_eq!(ChunkCursor::new(b"", 10, b'\n').next(), None);
    }

    #[test]
    fn chunk_ends_after_first_delimiter_at_or_after_target() {
        let data = b"aaa\nbbb\nccc\nddd\neee\n";
        assert_eq!(chunk_boundaries(data, 6, b'\n').unwrap(), [(0, 8), (8, 16), (16, 20)]);
        // The delimiter ending exactly at start + target does not end the chunk.
        assert_eq!(chunk_boundaries(b"aaa\nbbb\n", 4, b'\n').unwrap(), [(0, 8)]);
    }

    #[test]
    fn last_chunk_runs_to_eof_without_trailing_delimiter() {
        assert_eq!(chunk_boundaries(b"hello\nworld", 100, b'\n').unwrap(), [(0, 11)]);
        let data = b"aaa\nbbb\ncccccccccccccccc";
        assert_eq!(chunk_boundaries(data, 4, b'\n').unwrap(), [(0, 8), (8, data.len())]);
        assert_eq!(chunk_boundaries(b"no_newlines", 5, b'\n').unwrap(), [(0, 11)]);
    }

    #[test]
    fn zero_target_is_clamped_to_one() {
        assert_eq!(
            chunk_boundaries(b"a\nb\nc\n", 0, b'\n').unwrap(),
            chunk_boundaries(b"a\nb\nc\n", 1, b'\n').unwrap()
        );
        assert_eq!(chunk_boundaries(b"a\nb\nc\n", 1, b'\n').unwrap(), [(0, 2), (2, 4), (4, 6)]);
        assert_eq!(chunk_boundaries(b"\n\n\n", 1, b'\n').unwrap(), [(0, 2), (2, 3)]);
    }

    #[test]
    fn huge_target_gives_one_chunk() {
        assert_eq!(chunk_boundaries(b"tiny\n", usize::MAX, b'\n').unwrap(), [(0, 5)]);
    }

    #[test]
    fn other_delimiters_frame_raw_bytes() {
        assert_eq!(chunk_boundaries(b"one\ttwo\tthree", 4, b'\t').unwrap(), [(0, 8), (8, 13)]);
        assert_eq!(chunk_boundaries(b"x\x00y\x00z", 2, 0).unwrap(), [(0, 4), (4, 5)]);
    }

    #[test]
    fn crlf_and_blank_line_patterns() {
        let data = b"GET /\r\nHost: a\r\n\r\nGET /b\r\n\r\n";
        assert_eq!(chunk_boundaries_pattern(data, 1, b"\r\n\r\n").unwrap(), [(0, 18), (18, data.len())]);
        // A CR alone or LF alone is not a CRLF delimiter.
        assert_eq!(chunk_boundaries_pattern(b"a\rb\nc\r\nd", 1, b"\r\n").unwrap(), [(0, 7), (7, 8)]);
        let empty = |m: &str| m.contains("must not be empty");
        assert!(
            matches!(chunk_boundaries_pattern(b"abc", 1, b""), Err(crate::Error::InvalidArgument(m)) if empty(&m))
        );
        assert!(
            matches!(ChunkCursor::with_pattern(b"abc", 1, b""), Err(crate::Error::InvalidArgument(m)) if empty(&m))
        );
    }

    #[test]
    fn cursor_reports_its_position() {
        let mut c = ChunkCursor::new(b"aa\nbb\n", 1, b'\n');
        assert_eq!(c.position(), 0);
        assert_eq!(c.next(), Some(&b"aa\n"[..]));
        assert_eq!(c.position(), 3);
        assert_eq!(c.next(), Some(&b"bb\n"[..]));
        assert_eq!(c.next(), None);
        assert_eq!(c.next(), None);
    }

    proptest! {
        #[test]
        fn eager_and_cursor_match_the_naive_loop(
            data in prop::collection::vec(prop::sample::select(vec![b'a', b'\n', b'\r', 0u8]), 0..300),
            target in 0usize..40,
            pat_choice in 0usize..4,
        ) {
            let pat: &[u8] = [&b"\n"[..], b"\r\n", b"\r\n\r\n", b"\0"][pat_choice];
            let expected = naive(&data, target, pat);
            let eager = chunk_boundaries_pattern(&data, target, pat).unwrap();
            prop_assert_eq!(&eager, &expected);
            if pat.len() == 1 {
                prop_assert_eq!(&chunk_boundaries(&data, target, pat[0]).unwrap(), &expected);
            }
            let slices: Vec<&[u8]> = ChunkCursor::with_pattern(&data, target, pat).unwrap().collect();
            let from_bounds: Vec<&[u8]> = expected.iter().map(|&(s, e)| &data[s..e]).collect();
            prop_assert_eq!(slices, from_bounds);
        }
    }
}
