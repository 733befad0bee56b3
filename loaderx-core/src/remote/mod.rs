//! Stores on S3-compatible object storage (feature `remote`): read, pushed and stitched into
//! sets, through the Apache Arrow project's `object_store` crate on a private tokio runtime.
//!
//! [`RemoteStore::open`] fetches a v2 store's index (`index.zr`, every entry's checksum checked)
//! and dictionary once; a batch's records are sorted by chunk and offset and coalesced into
//! range requests (records closer than [`RemoteOptions::max_gap`], requests up to
//! [`RemoteOptions::max_request`]), issued concurrently (at most
//! [`RemoteOptions::concurrency`]), each record's crc32c checked before it is decoded and handed
//! out in the batch's order. Retries with backoff and per-request timeouts are `object_store`'s
//! (its `RetryConfig`, `ClientOptions::with_timeout`); after the last one the error names the URL
//! and the byte range. Credentials and endpoint come from the standard AWS variables
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ALLOW_HTTP`) or [`RemoteOptions`]; no error or `Debug` string shows a credential, the
//! userinfo of an endpoint URL (`http://user:password@host`) included (see `redact`).
//!
//! Every server is treated as hostile: a response's declared length is checked against what was
//! asked (and against what the object may hold) before anything is allocated and its body read
//! with that cap (`body`); a batch whose records, as the index gives their lengths, would take
//! more than [`RemoteOptions::memory_limit`] is refused before it is fetched or allocated.

//!
//! | module | concern |
//! | --- | --- |
//! | `options` | [`RemoteOptions`] and the S3 client they build |
//! | `url` | `s3://` URLs: [`is_remote`], bucket and prefix, part paths inside the bucket |
//! | `index` | the index (v2 `index.zr`, v1 `meta.zr`) and the dictionary, the index's local cache |
//! | `fetch` | range requests, coalescing, the page cache's use, each chunk object's ETag |
//! | `link` | each process's client and runtime (a forked child's its own) |
//! | `store` | [`RemoteStore`]: a batch checked and decoded into its destination |
//! | `manifest` | what `verify` checks of `manifest.zr`: its count, chunks and lengths against the index and the objects |
//! | `cache` | `PageCache`: chunk pages on disk, shared by processes |
//! | `push` | [`push`]: a local store uploaded, each object checked to be as it left it at the end |
//! | `push_local` | the local side of a push: the store held still, its directory held open, its files listed and read |
//! | `push_set` | a local store set uploaded: its parts checked, each held still in turn, its manifest as checked |
//! | `write` | a set's files put over pushed parts; [`list_dirs`], [`list_objects`], [`remove_prefix`] |
//! | `body` | response bodies read with a cap |
//! | `redact` | credentials scrubbed from every error |

mod body;
pub mod cache;
mod fetch;
mod index;
mod link;
mod manifest;
mod options;
mod push;
mod push_local;
mod push_set;
mod redact;
mod store;
mod stride;
mod url;
mod write;

pub(crate) use fetch::get_optional;
pub use options::RemoteOptions;
pub use push::push;
pub use store::{RemoteStats, RemoteStore, RemoteSummary};
pub use url::is_remote;
pub(crate) use url::join_url;
pub use write::{list_dirs, list_objects, remove_prefix};
pub(crate) use write::{part_path, put, refuse_store_at};
