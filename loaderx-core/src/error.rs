//! The one error type of `loaderx-core`.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in `loaderx-core`.
///
/// Every variant that concerns a file names its path; every variant that concerns a record names
/// its index. Bytes read from disk never panic: they become [`Error::Corrupt`] or a more specific
/// variant. A message says what failed and where, once; the cause (an operating-system error, a
/// transform's error) is the [`source`](std::error::Error::source), not pasted into the message,
/// so a caller printing the chain (`loaderx` prints `message: cause: ...`) shows each part once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed. Its text ends with the cause (a burn or candle program
    /// printing `{err}` sees why); [`error_chain`] does not repeat it.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "open", "read", "write", "sync".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The disk (or quota) is full; nothing of the failed operation was committed (a failure
    /// after a commit is [`Error::Committed`]).
    #[error("no space left on device writing {}", path.display())]
    DiskFull {
        /// The file that could not be written.
        path: PathBuf,
        /// The operating system's error (ENOSPC or EDQUOT).
        #[source]
        source: io::Error,
    },
    /// Bytes on disk do not form what they should.
    #[error("corrupt {} at byte {offset}: {reason}", path.display())]
    Corrupt {
        /// The file holding the bad bytes.
        path: PathBuf,
        /// Byte offset in that file where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The error that caused it (a decoder's, a parser's, the operating system's), when there
        /// is one: the [`source`](std::error::Error::source), its text not repeated in `reason`.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A stored record could not be read back intact.
    #[error("record {index} in {}: {reason}", path.display())]
    CorruptRecord {
        /// The store (or chunk file) holding the record.
        path: PathBuf,
        /// The record's index.
        index: u64,
        /// What is wrong: truncated chunk, bad codec tag, bad zstd frame, length mismatch...
        reason: String,
        /// The error that caused it (a decoder's, a parser's, the operating system's), when there
        /// is one: the [`source`](std::error::Error::source), its text not repeated in `reason`.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The path is not a store of this format (wrong magic).
    #[error("{} is not a loaderx store: {reason}", path.display())]
    NotAStore {
        /// The file that was expected to be a store header.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The store was written by an unsupported format version (for `index.zr`, the version
    /// field also names the layout: 2 entries, 3 fixed stride, 4 compact).
    #[error(
        "{} has format version {found}; this build reads {}",
        path.display(),
        if expected.start() == expected.end() {
            format!("version {}", expected.start())
        } else {
            format!("versions {} to {}", expected.start(), expected.end())
        }
    )]
    Version {
        /// The store's header file.
        path: PathBuf,
        /// Version in the file.
        found: u16,
        /// The versions this build reads from that file.
        expected: std::ops::RangeInclusive<u16>,
    },
    /// The store was written on a machine of the other byte order.
    #[error(
        "{} was written on a machine of the other byte order; stores are not portable across endianness",
        path.display()
    )]
    ByteOrder {
        /// The store's header file.
        path: PathBuf,
    },
    /// An index is outside `0..len`.
    #[error("index {index} out of range for {} of length {len}", path.display())]
    IndexOutOfRange {
        /// The store.
        path: PathBuf,
        /// The offending index.
        index: u64,
        /// The store's length when the call was made.
        len: u64,
    },
    /// A record is larger than its store's format holds
    /// ([`Format::max_record_size`](crate::Format::max_record_size): 1 MiB in v1, 4 GiB - 1 byte
    /// in v2).
    #[error("record {index} of the batch is {size} bytes; the limit is {limit} bytes (store {})", path.display())]
    RecordTooLarge {
        /// The store.
        path: PathBuf,
        /// Position of the record in the batch (or its line / row in the source).
        index: u64,
        /// Its size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Appending would exceed the maximum number of records.
    #[error("store {} holds {len} records; {}", path.display(), past_limit(*adding, *limit))]
    StoreFull {
        /// The store.
        path: PathBuf,
        /// Current length.
        len: u64,
        /// Records in the rejected batch.
        adding: u64,
        /// Maximum number of records.
        limit: u64,
    },
    /// A zstd_dict record (or store) needs a dictionary that is not there.
    #[error("{} needs a zstd dictionary (dict.zr) but none is present", path.display())]
    MissingDictionary {
        /// The store.
        path: PathBuf,
    },
    /// A lock this operation needs is held (by another process, other handles, or a journal a
    /// read-write open must finish): the reason says which.
    #[error("{} is locked: {reason}", path.display())]
    Locked {
        /// The store.
        path: PathBuf,
        /// Which lock and why it is needed.
        reason: String,
    },
    /// A [`SharedStore`](crate::SharedStore) a panic inside an earlier call left unusable: its
    /// files are as the engine's last commit left them.
    #[error("{}: a panic inside an earlier call on this handle left it unusable: open the store again", path.display())]
    Poisoned {
        /// The store.
        path: PathBuf,
    },
    /// The operation needs a store opened read-write.
    #[error("{} is open read-only", path.display())]
    ReadOnly {
        /// The store.
        path: PathBuf,
    },
    /// Something already exists where a new store was to be created.
    #[error("{} already exists (pass overwrite/--force to replace it)", path.display())]
    AlreadyExists {
        /// The path.
        path: PathBuf,
    },
    /// Something that is not a loaderx store or dataset (or, for a file written whole, not a
    /// regular file) is where one was to be written: it is never replaced, even with overwrite,
    /// and nothing there is moved.
    #[error("{} is not replaced: {reason}", path.display())]
    NotReplaceable {
        /// The path.
        path: PathBuf,
        /// What is there instead.
        reason: String,
    },
    /// A caller-provided buffer, shape or argument does not fit the operation.
    #[error("{0}")]
    InvalidArgument(String),
    /// A builder's or sampler's configuration is not valid: found when it is built, before any
    /// thread starts or any file is read.
    #[error("{what}: {reason}")]
    Config {
        /// The option (or combination of options) at fault, e.g. "batch_size", "pack".
        what: &'static str,
        /// Why it is refused, with the value given.
        reason: String,
    },
    /// A dataset's schema does not match what the caller asked for.
    #[error("schema mismatch in {}: {reason}", path.display())]
    Schema {
        /// The store directory.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// An input file given to a converter is malformed.
    #[error("bad input {}: {reason}", path.display())]
    BadInput {
        /// The input file.
        path: PathBuf,
        /// What is wrong, with the byte offset, line or element where it applies.
        reason: String,
        /// The error that caused it (a decoder's, a parser's, the operating system's), when there
        /// is one: the [`source`](std::error::Error::source), its text not repeated in `reason`.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A user transform (collate step) failed or panicked. Its message carries the cause too
    /// (unlike the others, which leave it to `source`): a training framework's loop prints an
    /// error's `Display` alone, and "failed at step 3" says nothing a user can act on.
    /// [`error_chain`] does not repeat it.
    #[error("transform failed at step {step}: {source}")]
    Transform {
        /// The loader step whose batch failed.
        step: u64,
        /// The transform's error (for a panic: its message).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A finite pass's order was asked for a step after its last ([`Indexer::fill`](crate::adapter::Indexer::fill);
    /// a loader's [`next_batch`](crate::DataLoader::next_batch) says `Ok(None)` there instead).
    #[error("the pass is over: all {steps} steps were delivered")]
    PassEnded {
        /// Steps the pass had.
        steps: u64,
    },
    /// A request to object storage failed after its retries (feature `remote`). The message
    /// never holds a credential.
    #[error("{url}{}: {reason}", range.as_ref().map(|r| format!(" bytes {}..{}", r.start, r.end)).unwrap_or_default())]
    Remote {
        /// The object's URL.
        url: String,
        /// The byte range asked for, when it was a range request.
        range: Option<std::ops::Range<u64>>,
        /// What went wrong, scrubbed of credentials.
        // A string, not a `#[source]`: the object store's error can hold the credentials it was
        // given (a presigned URL, a header), so only its scrubbed text is kept.
        reason: String,
    },
    /// An object of a remote store changed while it was being read (its ETag is not the one it
    /// had): the store was rewritten under the reader, which reopens it rather than mix versions.
    #[error("{url} changed while it was being read (ETag {expected:?}, now {found:?}): open the store again")]
    Changed {
        /// The object's URL.
        url: String,
        /// The token it had.
        expected: String,
        /// The token it has now.
        found: String,
    },
    /// The data loader's worker threads stopped unexpectedly.
    #[error("data loader stopped: {0}")]
    LoaderStopped(String),
    /// A batch whose records, as the index gives their lengths, would take more memory than the
    /// reader may use (feature `remote`: `RemoteOptions::memory_limit`): refused before anything
    /// was fetched or allocated. A damaged or hostile index, or a batch too large.
    #[error(
        "a batch of {records} records from {} needs {bytes} bytes by its index entries, more than the limit of {limit}",
        path.display()
    )]
    BatchTooLarge {
        /// The store.
        path: PathBuf,
        /// Records in the batch.
        records: u64,
        /// The bytes its records (and their stored bytes) claim.
        bytes: u64,
        /// What the reader may hold.
        limit: u64,
    },
    /// A write was committed, and stands, but a step after its commit failed (making it durable,
    /// removing its journal): repeating the write would apply it twice. `remedy` says what to do
    /// instead; the cause is the [`source`](std::error::Error::source).
    #[error("{what} in {} committed and stands (do not repeat it), but a step after the commit failed: {remedy}", path.display())]
    Committed {
        /// The store.
        path: PathBuf,
        /// What was committed, e.g. "records 10..20".
        what: String,
        /// What to do: call `sync`, or open the store again.
        remedy: &'static str,
        /// What failed after the commit.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`, mapping "disk full" to [`Error::DiskFull`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::StorageFull || source.kind() == io::ErrorKind::QuotaExceeded {
            return Error::DiskFull { path, source };
        }
        Error::Io { op, path, source }
    }
}

/// [`Error::StoreFull`]'s reason: an append of `adding` records past `limit`, or (`adding` 0: a
/// migration to a format holding fewer) the store past the limit itself (look 134, L134-2:
/// "appending 0 would exceed the limit").
fn past_limit(adding: u64, limit: u64) -> String {
    if adding == 0 {
        format!("the format asked for holds at most {limit}")
    } else {
        format!("appending {adding} would exceed the limit of {limit}")
    }
}

/// `err` and its causes on one line, joined by ": ": each part once. loaderx's messages say what
/// failed and where and leave the cause to `source`; a third-party error that prints its own
/// source and also returns it would show that source twice, so a cause whose text already ends
/// the line is not added again. What the CLI prints, and the C and Python bindings' error text.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        next = cause.source();
    }
    line
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What replaces a credential in a message.
pub(crate) const REDACTED: &str = "<redacted>";

/// `text` as a message may show it: the userinfo of every URL in it (credentials written into
/// it, `s3://key:secret@bucket/x`, `http://user:password@host/x`) replaced by `<redacted>`. The
/// authority runs to the first `/`, `?`, `#`, white space, quote or bracket, and an `@` in it
/// ends the userinfo; a secret may hold those characters itself (AWS secret keys hold `/`), so
/// where the authority has no `@` but the URL's text up to the next white space or quote has one
/// with a `:` before it, everything from `://` to the last such `@` is the userinfo.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let ends = |delimiters: &[char]| {
            tail.find(|c: char| delimiters.contains(&c) || c.is_whitespace()).unwrap_or(tail.len())
        };
        let end = ends(&['/', '?', '#', '"', '\'', '(', ')', '<', '>', '[', ']', '`']);
        let word = &tail[..ends(&['"', '\'', '<', '>', '`'])];
        let info = match tail[..end].rfind('@') {
            Some(k) => Some(k),
            None => word.rfind('@').filter(|&k| word[..k].contains(':')),
        };
        match info {
            Some(k) => {
                out.push_str(REDACTED);
                rest = &tail[k..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Look 64 (L64-2): a secret holding `/` or `(` ended the authority before its `@`, and the
    /// whole URL, secret and all, was kept.
    #[test]
    fn credentials_in_a_url_are_removed_whatever_they_hold() {
        for (url, shown) in [
            ("s3://AKIA:wJalr/K7MDENG/bPxRfiCY@mybucket/data", "s3://<redacted>@mybucket/data"),
            ("s3://user:pa(ss@b/x", "s3://<redacted>@b/x"),
            ("s3://TOKEN@bucket/x", "s3://<redacted>@bucket/x"),
            ("http://u:p@127.0.0.1:9/b/k", "http://<redacted>@127.0.0.1:9/b/k"),
        ] {
            let text = format!("\"{url}\": refused (at {url}) and more");
            assert_eq!(redact_urls(&text), format!("\"{shown}\": refused (at {shown}) and more"));
        }
        for kept in ["s3://bucket/a/b and http://127.0.0.1:9000/x", "s3://bucket/key@v2/x", "no URL: a@b"] {
            assert_eq!(redact_urls(kept), kept);
        }
    }

    /// Look 134, L134-2: a migration to a format holding fewer records said "appending 0".
    #[test]
    fn a_store_past_a_formats_limit_says_so_without_an_append() {
        let full = |adding| Error::StoreFull { path: "s".into(), len: 16_777_221, adding, limit: 16_777_216 };
        assert_eq!(
            full(0).to_string(),
            "store s holds 16777221 records; the format asked for holds at most 16777216"
        );
        assert!(full(3).to_string().ends_with("appending 3 would exceed the limit of 16777216"));
    }
}
