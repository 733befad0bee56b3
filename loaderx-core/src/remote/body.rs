//! Response bodies read with a cap: a server's declared length is checked against what was
//! asked before anything is allocated, and the body is read a piece at a time and refused as
//! soon as it runs past that length (`object_store`'s `GetResult::bytes` allocates whatever
//! `Content-Length` says and reads a body to its end, however long).

use bytes::Bytes;
use futures::StreamExt;
use object_store::GetResult;

/// Why a body was refused.
pub(super) enum BodyError {
    /// The request or the body's stream failed.
    Store(object_store::Error),
    /// Its length is not what was asked (or is more than may be held).
    Length(String),
}

/// What a response may hold.
#[derive(Clone, Copy)]
pub(super) enum Expect {
    /// Exactly this many bytes (a range request).
    Exactly(u64),
    /// A whole object of at most this many bytes; its declared length is then what must come.
    AtMost(u64),
}

/// The first allocation for a body: more is reserved only as bytes arrive, so a length that was
/// declared (and checked) but never sent costs no more than this.
const FIRST_RESERVE: u64 = 8 << 20;

/// The body of `result`, of the length `expect` gives.
///
/// # Errors
/// [`BodyError::Length`] for a declared length other than the one asked (or over the most), a
/// body longer than that (refused when it runs past, the rest never read) or shorter;
/// [`BodyError::Store`] for a failed stream.
pub(super) async fn read(result: GetResult, expect: Expect) -> Result<Bytes, BodyError> {
    let declared = result.range.end.saturating_sub(result.range.start);
    let want = match expect {
        Expect::Exactly(n) if declared != n => {
            return Err(BodyError::Length(format!(
                "the response declares {declared} bytes where {n} were asked"
            )));
        }
        Expect::Exactly(n) => n,
        Expect::AtMost(max) if declared > max => {
            return Err(BodyError::Length(format!(
                "the response declares {declared} bytes, more than the {max} this object may hold"
            )));
        }
        Expect::AtMost(_) => declared,
    };
    let mut stream = result.into_stream();
    let mut first: Option<Bytes> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut got = 0u64;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(BodyError::Store)?;
        got += piece.len() as u64;
        if got > want {
            // Dropping the stream closes the connection: the rest is never read.
            return Err(BodyError::Length(format!("the body runs past the {want} bytes asked")));
        }
        match first.take() {
            None if buf.is_empty() => first = Some(piece),
            held => {
                if buf.is_empty() {
                    let reserve = want.min(FIRST_RESERVE.max(got)) as usize;
                    buf.try_reserve(reserve).map_err(|_| {
                        BodyError::Length(format!("{reserve} bytes for the body cannot be allocated"))
                    })?;
                }
                if let Some(h) = held {
                    buf.extend_from_slice(&h);
                }
                buf.try_reserve(piece.len()).map_err(|_| {
                    BodyError::Length(format!("{got} bytes for the body cannot be allocated"))
                })?;
                buf.extend_from_slice(&piece);
            }
        }
    }
    if got != want {
        return Err(BodyError::Length(format!("{got} bytes came back where {want} were asked")));
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buf)))
}
