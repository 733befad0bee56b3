//! The delimiter search shared by every framing mode: one byte through `memchr`, a multi-byte
//! pattern through `memchr::memmem`.

use memchr::memmem::Finder;

use crate::{Error, Result};

/// A record delimiter ready to search with: a single byte or a precompiled multi-byte pattern.
///
/// A record boundary is any position `p` such that the `len()` bytes just before `p` are the
/// delimiter; offset 0 is a record start but never a boundary produced by a search.
#[derive(Clone, Debug)]
pub(crate) enum Needle {
    /// A single raw byte (`memchr`).
    Byte(u8),
    /// A pattern of two or more bytes (`memmem`, owned so cursors carry no pattern lifetime).
    Pattern(Box<Finder<'static>>),
}

impl Needle {
    /// A needle for a pattern; a one-byte pattern takes the faster single-byte path.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `pattern` is empty: an empty delimiter would match
    /// everywhere and frame nothing.
    pub(crate) fn pattern(pattern: &[u8]) -> Result<Needle> {
        match pattern {
            [] => Err(Error::InvalidArgument("the delimiter pattern must not be empty".to_owned())),
            [byte] => Ok(Needle::Byte(*byte)),
            _ => Ok(Needle::Pattern(Box::new(Finder::new(pattern).into_owned()))),
        }
    }

    /// The delimiter's length in bytes (at least 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            Needle::Byte(_) => 1,
            Needle::Pattern(finder) => finder.needle().len(),
        }
    }

    /// The position just past the first delimiter that starts at or after `from`, or `None`
    /// when no delimiter starts in `data[from..]`.
    pub(crate) fn end_after(&self, data: &[u8], from: usize) -> Option<usize> {
        let rest = data.get(from..)?;
        let found = match self {
            Needle::Byte(byte) => memchr::memchr(*byte, rest),
            Needle::Pattern(finder) => finder.find(rest),
        };
        found.map(|rel| from + rel + self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_pattern_is_rejected() {
        assert!(matches!(Needle::pattern(b""), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn one_byte_pattern_takes_the_byte_path() {
        assert!(matches!(Needle::pattern(b"\n"), Ok(Needle::Byte(b'\n'))));
    }

    #[test]
    fn end_after_finds_the_first_delimiter_at_or_after_from() {
        let n = Needle::Byte(b'\n');
        assert_eq!(n.end_after(b"ab\ncd\n", 0), Some(3));
        assert_eq!(n.end_after(b"ab\ncd\n", 2), Some(3));
        assert_eq!(n.end_after(b"ab\ncd\n", 3), Some(6));
        assert_eq!(n.end_after(b"ab\ncd", 3), None);
        assert_eq!(n.end_after(b"ab", 7), None);
        let crlf = Needle::pattern(b"\r\n").unwrap();
        assert_eq!(crlf.end_after(b"a\r\nb\r\n", 0), Some(3));
        // A pattern straddling `from` does not count: it starts before `from`.
        assert_eq!(crlf.end_after(b"a\r\nb\r\n", 2), Some(6));
    }
}
