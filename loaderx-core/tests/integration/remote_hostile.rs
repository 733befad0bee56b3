//! Remote stores against hostile input (issue 27, 3.4 to 3.6, 3.10 and 3.16), on the S3 server
//! of `remote.rs` and its fault injector: a server that lies about lengths or never ends a body,
//! an index whose entries claim 4 GiB records, a store set whose parts name other directories,
//! a damaged or foreign page in the cache, and credentials written into the endpoint URL. Each
//! is a typed error (or the right records), never an abort or a leak.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use loaderx_core::remote::{RemoteOptions, RemoteStore, push};
use loaderx_core::{Codec, DatasetWriter, DenseSource, Error, Format, WriteOptions};

use super::remote::{Faults, KEY, Lie, OVERRUN_CAP, Server, Told, dense, pages};

/// A unique prefix per test run: the index cache (`LOADERX_CACHE_DIR`) is keyed by URL, and a
/// lie must be told to a reader that has not cached the truth.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("s3://bucket/{name}-{}-{nanos}", std::process::id())
}

/// A server over `root` telling `lies`.
fn liar(root: &Path, lies: Vec<Lie>) -> (Server, Arc<Faults>) {
    let faults = Arc::new(Faults { lies, ..Faults::default() });
    (Server::start_on(root, 0, Some(Arc::clone(&faults))), faults)
}

fn lie(suffix: &'static str, head: bool, told: Told) -> Lie {
    Lie { suffix, head, told }
}

/// 3.4: a `Content-Length` of 10^12 on `index.zr` (on the GET, and on the HEAD too),
/// `schema.msgpack` and a set's manifest, and bodies that run on past a chunk's range (with and
/// without the page cache) or v1 `meta.zr`'s: each a typed error naming the object, the endless
/// bodies read no further than a little past what was asked.
#[test]
fn lying_lengths_and_endless_bodies_are_refused_before_they_size_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s3");
    let clean = Server::start(&root);
    let local = dense(tmp.path(), Codec::Raw);
    let pushed = |name: &str| {
        let url = unique(name);
        push(&local, &url, clean.options(), |_| {}).unwrap();
        url
    };
    let huge = Told::Length(1_000_000_000_000);
    let is_remote_error =
        |e: &Error, object: &str| matches!(e, Error::Remote { url, .. } if url.ends_with(object));

    for (lies, object) in [
        (vec![lie("/index.zr", false, huge)], "index.zr"),
        (vec![lie("/index.zr", true, huge)], "index.zr"),
        (vec![lie("/schema.msgpack", false, huge)], "schema.msgpack"),
    ] {
        let url = pushed("lies");
        let (server, faults) = liar(&root, lies);
        let e = DenseSource::open_remote(&url, server.options()).unwrap_err();
        assert!(is_remote_error(&e, object), "{object}: {e}");
        assert!(faults.injected.load(Ordering::Relaxed) >= 1, "the lie was told");
    }

    // A body that goes on past a chunk's range: refused as it runs past, the rest never read.
    let cache = tmp.path().join("cache");
    for cached in [false, true] {
        let url = pushed("endless");
        let (server, faults) = liar(&root, vec![lie("/0.zr", false, Told::Endless)]);
        let opts =
            if cached { server.options().cache(&cache, 1 << 26).page_size(4096) } else { server.options() };
        let remote = DenseSource::open_remote(&url, opts).unwrap();
        let e = remote.get_batch(&[0, 1500, 2999]).unwrap_err();
        assert!(
            matches!(&e, Error::Remote { url, range: Some(_), reason } if url.ends_with("/0.zr") && reason.contains("past")),
            "cached {cached}: {e}"
        );
        // Sent past the object before the client hung up: socket buffers' worth, not the
        // gigabyte on offer (a reader that read on to the end would see all of it).
        let overrun = faults.overrun.load(Ordering::Relaxed);
        assert!(overrun < 128 << 20, "cached {cached}: {overrun} of {OVERRUN_CAP} bytes sent past the range");
    }

    // v1: the committed prefix of meta.zr, endless.
    let v1 = tmp.path().join("v1");
    let mut w =
        DatasetWriter::dense::<u32>(&v1, vec![], WriteOptions::new().codec(Codec::Raw).format(Format::V1))
            .unwrap();
    w.append(&(0..500u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let url = unique("endless-v1");
    push(&v1, &url, clean.options(), |_| {}).unwrap();
    let (server, _faults) = liar(&root, vec![lie("/meta.zr", false, Told::Endless)]);
    let e = RemoteStore::open(&url, server.options()).unwrap_err();
    assert!(is_remote_error(&e, "meta.zr"), "{e}");
    drop(server);

    // A store set's manifest with a lying length.
    let part = tmp.path().join("parts").join("p0");
    std::fs::create_dir_all(part.parent().unwrap()).unwrap();
    let mut w = DatasetWriter::dense::<u32>(&part, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..100u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let set = tmp.path().join("sets").join("all");
    std::fs::create_dir_all(set.parent().unwrap()).unwrap();
    loaderx_core::stitch(&[&part], &set).unwrap();
    let base = unique("set");
    let set_url = format!("{base}/sets/all");
    push(&set, &set_url, clean.options(), |_| {}).unwrap();
    assert_eq!(DenseSource::open_remote(&set_url, clean.options()).unwrap().len(), 100);
    let (server, _faults) = liar(&root, vec![lie("/storeset.msgpack", false, huge)]);
    let e = DenseSource::open_remote(&set_url, server.options()).unwrap_err();
    assert!(is_remote_error(&e, "storeset.msgpack"), "{e}");
}

/// The index of a v2 store of `n` raw u32 records, every entry claiming `logical` bytes (stored
/// as many, as a raw record must), each entry's own checksum made right: a hostile index that
/// parses (a compact entry, which has no checksum of its own, its length field set).
fn claim_lengths(store: &Path, logical: u32) {
    use loaderx_core::format::v2::{COMPACT_ENTRY_SIZE, ENTRY_SIZE, Entry, HEADER_SIZE, Header, Layout};
    let path = store.join("index.zr");
    let mut index = std::fs::read(&path).unwrap();
    let h = Header::parse(&index, true).unwrap();
    let n = h.count as usize;
    if h.layout == Layout::Compact {
        for i in 0..n {
            let at = HEADER_SIZE + i * COMPACT_ENTRY_SIZE + 8;
            index[at..at + 4].copy_from_slice(&logical.to_le_bytes());
        }
        std::fs::write(&path, &index).unwrap();
        return;
    }
    for i in 0..n {
        let at = HEADER_SIZE + i * ENTRY_SIZE;
        let mut e = Entry::parse(&index[at..at + ENTRY_SIZE]).unwrap();
        e.stored = logical;
        e.logical = logical;
        index[at..at + ENTRY_SIZE].copy_from_slice(&e.encode());
    }
    std::fs::write(&path, &index).unwrap();
}

/// 3.5: entries claiming 0xFFFFFFFF bytes each: `verify` and `gather` are typed errors, never
/// an allocation of their sum; an intact store verifies within a small memory limit (in blocks
/// that fit it), and a batch over the limit is refused by name.
/// A fixed-stride index whose header claims 2^40 records (its checksums made right) in a file
/// of a few block checksums: refused when opened, before an entry is made for a block.
#[test]
fn a_fixed_stride_index_claiming_more_blocks_than_it_holds_is_refused_on_open() {
    use loaderx_core::format::v2::Header;
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let p = tmp.path().join("fixed");
    let mut w = DatasetWriter::dense::<u32>(&p, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..5000u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let path = p.join("index.zr");
    let mut index = std::fs::read(&path).unwrap();
    let mut h = Header::parse(&index, true).unwrap();
    assert!(h.stride().is_some(), "a dense raw dataset is fixed-stride");
    h.count = 1 << 40;
    index[..64].copy_from_slice(&h.encode());
    std::fs::write(&path, &index).unwrap();
    let url = unique("hostile-fixed");
    push(&p, &url, server.options(), |_| {}).unwrap();
    let e = RemoteStore::open(&url, server.options()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("index.zr") && reason.contains("block checksums")),
        "{e}"
    );
}

#[test]
fn a_hostile_index_is_refused_before_its_lengths_size_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    // An entry per record (32 bytes, and the compact layout's 16): the lengths an index claims.
    for compact in [false, true] {
        let p = tmp.path().join(format!("hostile-{compact}"));
        let opts = WriteOptions::new().codec(Codec::Raw).fixed_stride(false).compact_entries(compact);
        let mut w = DatasetWriter::dense::<u32>(&p, vec![], opts).unwrap();
        w.append(&(0..5000u32).collect::<Vec<_>>()).unwrap();
        w.finish().unwrap();
        claim_lengths(&p, u32::MAX);
        let url = unique("hostile-index");
        push(&p, &url, server.options(), |_| {}).unwrap();
        claimed_lengths_are_refused(&server, &url);
    }
    intact_store_under_a_memory_limit(&tmp, &server);
}

/// What a store at `url` whose entries claim 4 GiB each must do: refuse batches by the memory
/// limit, and fail `verify` as a typed error.
fn claimed_lengths_are_refused(server: &Server, url: &str) {
    let store = RemoteStore::open(url, server.options()).unwrap();
    // The default limit (half of memory): 4096 records of 4 GiB is 32 TiB, over it anywhere.
    let e = store.gather(&(0..4096).collect::<Vec<_>>()).unwrap_err();
    assert!(matches!(&e, Error::BatchTooLarge { records: 4096, .. }), "{e}");
    assert!(e.to_string().contains(url), "{e}");
    let e = store.record_lens(&(0..4096).collect::<Vec<_>>()).unwrap_err();
    assert!(matches!(&e, Error::BatchTooLarge { .. }), "{e}");
    // verify reads such records one at a time; each claims more bytes than its object holds, so
    // it fails as a request (or over the limit, on a host of little memory): never an abort.
    let e = store.verify().unwrap_err();
    assert!(matches!(&e, Error::BatchTooLarge { .. } | Error::Remote { .. }), "{e}");
    let limited = RemoteStore::open(url, server.options().memory_limit(1 << 30)).unwrap();
    let e = limited.verify().unwrap_err();
    assert!(matches!(&e, Error::BatchTooLarge { records: 1, limit, .. } if *limit == 1 << 30), "{e}");
}

fn intact_store_under_a_memory_limit(tmp: &tempfile::TempDir, server: &Server) {
    // An intact store of 8 MiB (1000 records of 4 KiB, stored raw) under a limit of 2 MiB (its
    // index, 1 MiB as written, fits): verify reads it all in blocks that fit, a batch over the
    // limit is refused.
    let p = tmp.path().join("intact");
    let mut w = DatasetWriter::dense::<u8>(&p, vec![4096], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..4096 * 1000).map(|i| (i % 251) as u8).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let url = unique("intact");
    push(&p, &url, server.options(), |_| {}).unwrap();
    let small = RemoteStore::open(&url, server.options().memory_limit(2 << 20)).unwrap();
    assert_eq!(small.verify().unwrap(), 1000);
    let e = small.gather(&(0..300).collect::<Vec<_>>()).unwrap_err();
    assert!(
        matches!(&e, Error::BatchTooLarge { records: 300, bytes: 2_457_600, limit: 2_097_152, .. }),
        "{e}"
    );
    assert_eq!(small.gather(&[0, 999]).unwrap()[1].len(), 4096);
}

/// A store set's manifest with `paths` as its parts.
fn write_set_manifest(set: &Path, paths: &[&str]) {
    #[derive(serde::Serialize)]
    struct Part<'a> {
        path: &'a str,
        records: u64,
    }
    #[derive(serde::Serialize)]
    struct Manifest<'a> {
        version: u32,
        parts: Vec<Part<'a>>,
    }
    let m = Manifest { version: 1, parts: paths.iter().map(|&path| Part { path, records: 100 }).collect() };
    std::fs::write(set.join(loaderx_core::SET_FILE), rmp_serde::to_vec_named(&m).unwrap()).unwrap();
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
                out.push(p);
            }
        }
    }
    out
}

/// 3.6: `push` of a store set uploads only parts that are stores, and of them only a store's
/// files: a part naming any other directory (a key in it), an empty, absolute or
/// set-enclosing part, or a part that is itself a set is refused by name before anything goes
/// up; a stray file in a store stays local, a store's file that is a link is refused.
#[test]
fn push_sends_only_the_files_of_parts_that_are_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    const KEY_BYTES: &[u8] = b"-----BEGIN OPENSSH PRIVATE KEY----- loaderx-test";
    let secret = tmp.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("id_ed25519"), KEY_BYTES).unwrap();
    let part = tmp.path().join("parts").join("p0");
    std::fs::create_dir_all(part.parent().unwrap()).unwrap();
    let mut w = DatasetWriter::dense::<u32>(&part, vec![], WriteOptions::new()).unwrap();
    w.append(&(0..100u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let set = tmp.path().join("sets").join("all");
    std::fs::create_dir_all(set.parent().unwrap()).unwrap();
    loaderx_core::stitch(&[&part], &set).unwrap();
    let other = tmp.path().join("sets").join("other");
    loaderx_core::stitch(&[&part], &other).unwrap();
    let abs = secret.to_str().unwrap().to_string();

    for (rel, named) in [
        ("../../secret", "secret"),
        ("", "storeset.msgpack"),
        (".", "storeset.msgpack"),
        ("../all", "storeset.msgpack"),
        ("..", "storeset.msgpack"),
        ("../../parts/p0/../..", "storeset.msgpack"),
        (abs.as_str(), "storeset.msgpack"),
        ("../other", "other"),
    ] {
        write_set_manifest(&set, &["../../parts/p0", rel]);
        let e = push(&set, "s3://bucket/sets/all", server.options(), |_| {}).unwrap_err();
        let path = match &e {
            Error::NotAStore { path, .. } | Error::Corrupt { path, .. } => path.clone(),
            other => panic!("{rel:?}: {other}"),
        };
        assert!(path.ends_with(named), "{rel:?}: {e}");
        assert!(e.to_string().contains(&format!("{rel:?}")), "{rel:?}: the error names the part: {e}");
    }
    // Nothing went up before the parts were checked, the key least of all.
    assert!(files_holding(&server.root, KEY_BYTES).is_empty());
    assert!(!server.root.join("bucket/parts/p0/index.zr").exists(), "no part sent before the check");
    // A directory that is no store is not pushed either.
    let e = push(&secret, "s3://bucket/secret", server.options(), |_| {}).unwrap_err();
    assert!(matches!(&e, Error::NotAStore { path, .. } if path.ends_with("secret")), "{e}");

    // A stray file in a store stays local; the store goes up and reads back.
    std::fs::write(part.join("id_rsa"), KEY_BYTES).unwrap();
    write_set_manifest(&set, &["../../parts/p0"]);
    push(&set, "s3://bucket/sets/all", server.options(), |_| {}).unwrap();
    assert!(server.root.join("bucket/parts/p0/index.zr").is_file());
    assert!(files_holding(&server.root, KEY_BYTES).is_empty(), "the stray file was not sent");
    assert_eq!(DenseSource::open_remote("s3://bucket/sets/all", server.options()).unwrap().len(), 100);
    // A store's file that is a link is refused, not followed.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(secret.join("id_ed25519"), part.join("dict.zr")).unwrap();
        let e = push(&part, "s3://bucket/linked", server.options(), |_| {}).unwrap_err();
        assert!(e.to_string().contains("dict.zr"), "{e}");
        assert!(files_holding(&server.root, KEY_BYTES).is_empty(), "the link's target was not sent");
    }
}

/// Flips a bit of the byte at `at` of `path`, in place (the file neither truncated nor replaced:
/// a reader that has it mapped sees the damage).
fn flip(path: &Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x55]).unwrap();
}

/// 3.10: a cached page damaged on disk is dropped and fetched once from the store (the records
/// right, `verify` passes, the page file intact again); readers of two page sizes sharing one
/// cache directory never read each other's pages (a v1 store, no checksum to catch it).
#[test]
fn a_damaged_cached_page_is_fetched_again_and_page_sizes_keep_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw); // 3000 records of 16 bytes
    let url = unique("heal");
    push(&local, &url, server.options(), |_| {}).unwrap();
    let cache = tmp.path().join("cache");
    let opts = server.options().cache(&cache, 1 << 26).page_size(4096);
    let all: Vec<u64> = (0..3000).collect();
    let want = RemoteStore::open(&url, server.options()).unwrap().gather(&all).unwrap();
    let first = RemoteStore::open(&url, opts.clone()).unwrap();
    assert_eq!(first.gather(&all).unwrap(), want);
    // Damage page 2 on disk (records 512..768) in place, at record 518.
    let (page, _) = pages(&cache).into_iter().find(|(p, _)| p.file_name().unwrap() == "2.pg").unwrap();
    let intact = std::fs::read(&page).unwrap();
    flip(&page, 100);
    let second = RemoteStore::open(&url, opts.clone()).unwrap();
    assert_eq!(
        second.gather(&[600, 518, 9]).unwrap(),
        vec![want[600].clone(), want[518].clone(), want[9].clone()]
    );
    assert!(second.stats().pages_filled >= 1, "fetched again: {:?}", second.stats());
    assert_eq!(std::fs::read(&page).unwrap(), intact, "the page file is whole again");
    assert_eq!(RemoteStore::open(&url, opts.clone()).unwrap().verify().unwrap(), 3000);
    // The reader that had the page open when it was damaged heals too (its mapping is of the
    // damaged file, which the second reader replaced).
    assert_eq!(first.gather(&all).unwrap(), want);
    // Damaged in the store as well: an error naming the record, after one more request.
    let chunk = server.root.join(url.trim_start_matches("s3://")).join("0.zr");
    let mut stored = std::fs::read(&chunk).unwrap();
    stored[2 * 4096 + 100] ^= 0x55;
    std::fs::write(&chunk, &stored).unwrap();
    flip(&page, 100);
    let third = RemoteStore::open(&url, opts).unwrap();
    let e = third.gather(&[518]).unwrap_err();
    assert!(matches!(&e, Error::CorruptRecord { index: 518, .. }), "{e}");

    // v1, 3072 records of 4 bytes: page 1 of 4 KiB (bytes 4096..8192) and page 1 of 8 KiB
    // (bytes 8192..12288) are both 4096 bytes long.
    let v1 = tmp.path().join("v1");
    let mut w =
        DatasetWriter::dense::<u32>(&v1, vec![], WriteOptions::new().codec(Codec::Raw).format(Format::V1))
            .unwrap();
    w.append(&(0..3072u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    assert_eq!(std::fs::metadata(v1.join("0.zr")).unwrap().len(), 12288);
    let url = unique("pagesizes");
    push(&v1, &url, server.options(), |_| {}).unwrap();
    let shared = tmp.path().join("shared");
    let small = RemoteStore::open(&url, server.options().cache(&shared, 1 << 26).page_size(4096)).unwrap();
    let idx: Vec<u64> = (0..3072).collect();
    let values = |records: Vec<Vec<u8>>| -> Vec<u32> {
        records.iter().map(|r| u32::from_le_bytes(r[..].try_into().unwrap())).collect()
    };
    assert_eq!(values(small.gather(&idx).unwrap()), (0..3072).collect::<Vec<_>>());
    let large = RemoteStore::open(&url, server.options().cache(&shared, 1 << 26).page_size(8192)).unwrap();
    let tail: Vec<u64> = (2048..3072).collect();
    let got = values(large.gather(&tail).unwrap());
    assert!(got == (2048..3072).collect::<Vec<_>>(), "records 2048.. read as {}..", got[0]);
    assert_eq!(large.stats().pages_hit, 0, "no page of the other size taken: {:?}", large.stats());
}

/// 3.16: user and password in the endpoint URL (or keys written into an `s3://` URL) appear in
/// no error, `Debug` string or message: a refused connection, a refused request, a failed push.
#[test]
fn credentials_in_the_endpoint_reach_no_error() {
    const USER: &str = "loaderx-user";
    const PASSWORD: &str = "Pa55-w0rd-in-the-url";
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw);
    push(&local, "s3://bucket/creds", server.options(), |_| {}).unwrap();
    // A port nothing listens on: bound, then let go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let shown = |what: &str, text: String| {
        assert!(!text.contains(PASSWORD) && !text.contains(&format!("{USER}:")), "{what}: {text}");
    };
    for endpoint in [
        format!("http://{USER}:{PASSWORD}@127.0.0.1:{closed}"),
        format!("http://{USER}:{PASSWORD}@{}", server.endpoint.trim_start_matches("http://")),
    ] {
        // A wrong secret as well, so that the live server refuses the request.
        let opts = RemoteOptions::new()
            .endpoint(&endpoint)
            .region("us-east-1")
            .credentials(KEY, "not-the-secret")
            .allow_http(true)
            .retries(0)
            .timeout(std::time::Duration::from_secs(5));
        shown("options", format!("{opts:?}"));
        let e = RemoteStore::open("s3://bucket/creds", opts.clone()).unwrap_err();
        shown("open", format!("{e} / {e:?}"));
        let e = DenseSource::open_remote("s3://bucket/creds", opts.clone()).unwrap_err();
        shown("open_remote", format!("{e} / {e:?}"));
        let e = push(&local, "s3://bucket/elsewhere", opts.clone(), |_| {}).unwrap_err();
        shown("push", format!("{e} / {e:?}"));
    }
    // A reader whose requests fail once open: the server stopped under it.
    let mut live = Server::start(&tmp.path().join("s3"));
    let endpoint = format!("http://{USER}:{PASSWORD}@{}", live.endpoint.trim_start_matches("http://"));
    let opts = live.options().endpoint(&endpoint).retries(0);
    match RemoteStore::open("s3://bucket/creds", opts) {
        Ok(store) => {
            live.stop();
            let e = store.gather(&[1]).unwrap_err();
            shown("gather", format!("{e} / {e:?}"));
        }
        Err(e) => shown("open on a live server", format!("{e} / {e:?}")),
    }
    let e = RemoteStore::open("s3://AKID:keys-in-the-url@bucket/x", server.options()).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(_)) && !e.to_string().contains("keys-in-the-url"), "{e}");
}

/// Fifteenth look, P2 and P3: the page cache keeps to its own files. A user's `*.pg` two levels
/// down the cache directory, and a link out of it to a directory of theirs, are never evicted or
/// followed; a link planted where a page's temporary would go is never written through.
#[cfg(unix)]
#[test]
fn the_page_cache_keeps_to_its_own_files() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw); // 16-byte records: 256 to a 4 KiB page
    push(&local, "s3://bucket/own", server.options(), |_| {}).unwrap();
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(cache.join("thesis/figures")).unwrap();
    std::fs::write(cache.join("thesis/figures/1.pg"), b"mine").unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(victim.join("notes")).unwrap();
    std::fs::write(victim.join("notes/budget.pg"), b"budget").unwrap();
    std::os::unix::fs::symlink(&victim, cache.join("shared")).unwrap();
    let target = tmp.path().join("target.txt");
    std::fs::write(&target, b"the user's own file").unwrap();

    let opts = server.options().cache(&cache, 5 * 4096).page_size(4096);
    let a = RemoteStore::open("s3://bucket/own", opts).unwrap();
    a.gather(&[7]).unwrap();
    // Links at the temporary names this process would try first, for pages not filled yet.
    let page0 =
        super::remote::pages(&cache).into_iter().map(|(p, _)| p).find(|p| p.ends_with("0.pg")).unwrap();
    let chunk_dir = page0.parent().unwrap().to_path_buf();
    for p in 1..12 {
        let link = chunk_dir.join(format!(".{p}.pg.{}.0.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, link).unwrap();
        // And where the fills wrote before (`<page>.tmp`, a fixed name).
        std::os::unix::fs::symlink(&target, chunk_dir.join(format!("{p}.tmp"))).unwrap();
    }
    for p in 1..12u64 {
        a.gather(&[p * 256 + 7]).unwrap();
    }
    assert!(a.stats().pages_evicted > 0, "the limit made the cache evict: {:?}", a.stats());
    assert_eq!(std::fs::read(cache.join("thesis/figures/1.pg")).unwrap(), b"mine");
    assert_eq!(std::fs::read(victim.join("notes/budget.pg")).unwrap(), b"budget");
    assert_eq!(std::fs::read(&target).unwrap(), b"the user's own file");
}

/// Sixteenth look, Q1 and Q2: a FIFO planted as a page is never waited on (the page is fetched
/// and put in its place), and a link planted as the store's cache directory refuses the cache
/// (nothing written where it points).
#[cfg(unix)]
#[test]
fn a_fifo_or_a_link_planted_in_the_page_cache_is_neither_waited_on_nor_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("s3"));
    let local = dense(tmp.path(), Codec::Raw);
    push(&local, "s3://bucket/fifo", server.options(), |_| {}).unwrap();
    let cache = tmp.path().join("cache");
    let opts = server.options().cache(&cache, 1 << 26).page_size(4096);
    RemoteStore::open("s3://bucket/fifo", opts.clone()).unwrap().gather(&[7]).unwrap();
    let page0 =
        super::remote::pages(&cache).into_iter().map(|(p, _)| p).find(|p| p.ends_with("0.pg")).unwrap();
    std::fs::remove_file(&page0).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&page0).status().unwrap().success());
    let o = opts.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ =
            tx.send(RemoteStore::open("s3://bucket/fifo", o).and_then(|s| s.gather(&[7])).map(|r| r.len()));
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a FIFO page was waited on");
    assert_eq!(got.unwrap(), 1);
    // The store's cache directory replaced by a link to a directory of the user's.
    let store_dir = page0.parent().unwrap().parent().unwrap().to_path_buf();
    std::fs::remove_dir_all(&store_dir).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, &store_dir).unwrap();
    let e = RemoteStore::open("s3://bucket/fifo", opts).unwrap_err();
    assert!(e.to_string().contains("cache"), "{e}");
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "nothing written through the link");
}

/// Look 112, L112-1: a listing whose continuation token comes back forever held `stitch` (and
/// Python's listing) for good, and a removal collected its objects with memory growing without
/// end. Both are refused, naming the URL, and the removal deleted nothing.
#[test]
fn a_listing_that_never_ends_is_refused() {
    use loaderx_core::remote::{list_dirs, remove_prefix};
    let tmp = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults { endless_listing: true, ..Default::default() });
    let server = Server::start_on(&tmp.path().join("s3"), 0, Some(Arc::clone(&faults)));
    for e in [
        list_dirs("s3://bucket/set", server.options()).map(drop).unwrap_err(),
        remove_prefix("s3://bucket/set", server.options()).map(drop).unwrap_err(),
    ] {
        assert!(
            matches!(&e, Error::Remote { url, reason, .. } if url == "s3://bucket/set" && reason.contains("a second time")),
            "{e}"
        );
    }
    assert!(faults.seen.load(std::sync::atomic::Ordering::Relaxed) <= 4, "two pages each at most");
}

/// Look 112, L112-3: a server answering with an ETag that echoes a credential (here the secret
/// key) after a reader learnt the object's own: the consistency error shows the server's tag
/// scrubbed.
#[test]
fn a_changed_objects_tag_is_shown_without_credentials() {
    use super::remote::SECRET;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s3");
    let mut server = Server::start(&root);
    let port = server.port();
    let p = tmp.path().join("d");
    let mut w = DatasetWriter::dense::<u32>(&p, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..5000).collect::<Vec<u32>>()).unwrap();
    w.finish().unwrap();
    push(&p, "s3://bucket/echo", server.options(), |_| {}).unwrap();
    let reader = DenseSource::open_remote("s3://bucket/echo", server.options()).unwrap();
    assert_eq!(reader.get_batch(&[0]).unwrap().as_slice::<u32>().unwrap(), &[0]);
    server.stop();
    let lies = vec![Lie { suffix: "0.zr", head: true, told: Told::Etag(SECRET) }];
    let _liar = Server::start_on(&root, port, Some(Arc::new(Faults { lies, ..Faults::default() })));
    let e = reader.get_batch(&[4000]).unwrap_err();
    assert!(matches!(&e, Error::Changed { .. }), "{e}");
    assert!(!e.to_string().contains(SECRET) && e.to_string().contains("now \"<redacted>\""), "{e}");
}
