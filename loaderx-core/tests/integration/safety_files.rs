//! Data safety, round three's sixth look: what the files around an index may do to an open. A
//! fixed-stride count no chunk holds is refused by readers too; a writer's repair of a torn header
//! never rebuilds a frontier from damaged entries, and a refused open changes nothing; the small
//! files every open reads are refused past what they may hold, before they are read; a creator
//! never writes through a `0.zr` it did not make; a fixed-stride verify reports damage over many
//! windows of blocks, every damaged record once, in order.

use std::path::Path;

use loaderx_core::format::v2;
use loaderx_core::{Codec, DatasetWriter, DenseDataset, Error, Layout, Store, StoreOptions, WriteOptions};

use crate::common::snapshot;

fn records(n: u32, size: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; size]).collect()
}

/// Rewrites `index.zr`'s header through `edit`, its checksums made valid again.
fn edit_header(store: &Path, edit: impl FnOnce(&mut v2::Header)) {
    let path = store.join("index.zr");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut h = v2::Header::parse(&bytes, true).unwrap();
    edit(&mut h);
    bytes[..v2::HEADER_SIZE].copy_from_slice(&h.encode());
    std::fs::write(&path, bytes).unwrap();
}

/// A fixed-stride header claiming more records than its frontier (its checksums valid, the
/// block checksums there) is refused at every open, readers' too: before, a reader took the
/// count, and `stats` and `verify` walked records no chunk holds.
#[test]
fn a_fixed_stride_count_no_chunk_holds_is_refused_by_readers_too() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let store = Store::create(&s, StoreOptions::new().fixed_stride(64)).unwrap();
    store.append(&records(100, 64), Codec::Raw).unwrap();
    drop(store);
    // 4 records of 64 bytes a block (4096 / 64 is 64 a block: 100 records are 2 blocks); a
    // count of 128 needs the same 2 blocks' checksums, all there.
    edit_header(&s, |h| h.count = 128);
    for e in [Store::open(&s).unwrap_err(), Store::open_rw(&s, StoreOptions::new()).unwrap_err()] {
        let Error::Corrupt { ref path, offset, ref reason, .. } = e else { panic!("{e}") };
        assert!(path.ends_with("index.zr") && offset == 24 && reason.contains("128 records"), "{e}");
    }
    edit_header(&s, |h| h.count = 100);
    assert_eq!(Store::open(&s).unwrap().len(), 100, "the header as it was opens again");
}

/// A header whose checksum fails beside a damaged entry: the writer's open refuses, naming the
/// record, and writes nothing (before, it rebuilt the frontier from the damaged entry, sealed it
/// with a fresh checksum, then refused: every reader lost the store).
#[test]
fn a_torn_header_is_never_repaired_from_damaged_entries() {
    let dir = tempfile::tempdir().unwrap();
    for (name, layout, entry_size) in
        [("entries", Layout::Entries, 32usize), ("compact", Layout::Compact, 16)]
    {
        let s = dir.path().join(name);
        let store = Store::create(&s, StoreOptions::new().layout(layout)).unwrap();
        store.append(&records(100, 16), Codec::Raw).unwrap();
        drop(store);
        let path = s.join("index.zr");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = v2::HEADER_SIZE + entry_size * 7;
        match layout {
            // Entry 7's offset far past its chunk (its own checksum then fails).
            Layout::Entries => bytes[at..at + 8].copy_from_slice(&(1u64 << 39).to_le_bytes()),
            // Entry 7 names chunk 5, which does not exist (a compact entry has no checksum).
            _ => bytes[at + 5..at + 8].copy_from_slice(&[5, 0, 0]),
        }
        bytes[28] ^= 0xFF; // the header's dynamic checksum fails
        std::fs::write(&path, &bytes).unwrap();
        let before = snapshot(&s);
        let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{name}: {e}");
        assert_eq!(snapshot(&s), before, "{name}: a refused open changes nothing");
        let reader = Store::open(&s).unwrap();
        assert_eq!(reader.get(6).unwrap(), vec![6u8; 16], "{name}: readers still read the intact records");
    }
}

/// `dict.zr`, `schema.msgpack`, `manifest.zr` and `journal.zr` longer than they may be are
/// refused before they are read (a sparse file of gigabytes cost that much memory before).
#[test]
fn small_files_longer_than_they_may_be_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let make = |name: &str| {
        let d = dir.path().join(name);
        let mut w = DatasetWriter::dense::<u8>(&d, vec![4], WriteOptions::new()).unwrap();
        w.append(&[1u8; 40]).unwrap();
        w.finish().unwrap();
        d
    };
    let grow = |path: &Path, len: u64| {
        std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap()
    };
    let d = make("dict");
    grow(&d.join("dict.zr"), 3 << 30);
    let e = Store::open(&d).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("dict.zr") && reason.contains("may hold")),
        "{e}"
    );
    let d = make("schema");
    grow(&d.join("schema.msgpack"), 3 << 30);
    let e = DenseDataset::<u8>::open(&d).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("schema.msgpack") && reason.contains("may hold")),
        "{e}"
    );
    let d = make("manifest");
    grow(&d.join("manifest.zr"), 3 << 30);
    let e = Store::open_rw(&d, StoreOptions::new()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("manifest.zr") && reason.contains("may hold")),
        "{e}"
    );
    let report = Store::open(&d).unwrap().verify().unwrap();
    assert!(report.files.iter().any(|p| p.to_string().contains("manifest.zr")), "verify names it");
    let d = make("journal");
    grow(&d.join("journal.zr"), 3 << 30);
    let e = Store::open_rw(&d, StoreOptions::new()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("journal.zr") && reason.contains("may hold")),
        "{e}"
    );
}

/// A creator in a directory holding no store never writes through a `0.zr` it did not make:
/// a link there (to a file outside) or a user's file is refused, nothing touched; what a create
/// killed before its index left (an empty `0.zr`, an empty manifest) is taken over.
#[test]
fn create_never_writes_through_a_chunk_file_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let linked = dir.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, linked.join("0.zr")).unwrap();
    #[cfg(not(unix))]
    std::fs::write(linked.join("0.zr"), b"precious").unwrap();
    let users = dir.path().join("users");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("0.zr"), b"a user's notes").unwrap();
    for d in [&linked, &users] {
        let before = snapshot(d);
        for opts in [StoreOptions::new(), StoreOptions::new().overwrite(true)] {
            let e = Store::create(d, opts).unwrap_err();
            assert!(matches!(&e, Error::NotReplaceable { path, .. } if path.ends_with("0.zr")), "{e}");
        }
        assert_eq!(snapshot(d), before, "nothing touched");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // A create killed after its chunk 0 and manifest, before its index: taken over.
    let killed = dir.path().join("killed");
    drop(Store::create(&killed, StoreOptions::new()).unwrap());
    std::fs::remove_file(killed.join("index.zr")).unwrap();
    let s = Store::create(&killed, StoreOptions::new()).unwrap();
    s.append(&records(3, 8), Codec::Raw).unwrap();
    assert_eq!(s.get(2).unwrap(), vec![2u8; 8]);
}

/// Fixed-stride verify hands damage over a window of blocks at a time, before it checks the next
/// (memory flat in the number damaged): damage made while the first window's is handed over is
/// found in a later window, and every damaged record comes out once, in index order. (Before,
/// every block was checked, and every failure held, before the first was handed over.)
#[cfg(unix)]
#[test]
fn fixed_stride_verify_streams_every_damaged_record_window_by_window() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    // 4 KiB records: a block is one record, so 10,000 records are 10,000 blocks (3 windows).
    let store = Store::create(&s, StoreOptions::new().fixed_stride(4096).chunk_capacity(1 << 26)).unwrap();
    for batch in 0..10u32 {
        let rs: Vec<Vec<u8>> = (0..1000).map(|i| vec![(batch * 1000 + i) as u8; 4096]).collect();
        store.append(&rs, Codec::Raw).unwrap();
    }
    drop(store);
    let chunk = s.join("0.zr");
    let damage = |r: u64| {
        let f = std::fs::File::options().read(true).write(true).open(&chunk).unwrap();
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, r * 4096 + 17).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[b[0] ^ 0x40], r * 4096 + 17).unwrap();
    };
    for r in [3, 4100, 4101] {
        damage(r);
    }
    let mut seen = Vec::new();
    let n = Store::open(&s)
        .unwrap()
        .verify_each(|idx, _| {
            if idx == 3 {
                damage(9999);
            }
            seen.push(idx);
        })
        .unwrap();
    assert_eq!(n, 10_000);
    assert_eq!(seen, [3, 4100, 4101, 9999]);
}

/// A fixed-stride count the chunks do not hold is refused at every open, whatever the header's
/// checksum says: with the dynamic checksum broken (readers used to take the count then), and
/// with a frontier made to agree beside empty chunk files (readers only looked for the files).
#[test]
fn a_fixed_stride_count_is_checked_against_the_chunk_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let store = Store::create(&s, StoreOptions::new().fixed_stride(64).chunk_capacity(64 * 64)).unwrap();
    store.append(&records(100, 64), Codec::Raw).unwrap();
    drop(store);
    // 64 records a chunk: 100 records end at (1, 36 * 64). 1,000 records would end at (15, 40 * 64).
    let index = std::fs::read(s.join("index.zr")).unwrap();
    edit_header(&s, |h| {
        h.count = 1000;
        h.tail_chunk = 15;
        h.tail_offset = 40 * 64;
    });
    // The block checksums the count needs are there (as a lying file would have them).
    let mut bytes = std::fs::read(s.join("index.zr")).unwrap();
    bytes.resize(v2::HEADER_SIZE + 4 * 16, 1);
    std::fs::write(s.join("index.zr"), &bytes).unwrap();
    for id in 2..=15 {
        std::fs::write(s.join(format!("{id}.zr")), b"").unwrap();
    }
    let refused = |what: &str| {
        for e in [Store::open(&s).unwrap_err(), Store::open_rw(&s, StoreOptions::new()).unwrap_err()] {
            assert!(matches!(&e, Error::Corrupt { .. }), "{what}: {e}");
        }
    };
    refused("a frontier agreeing with the count beside empty chunks");
    let mut torn = std::fs::read(s.join("index.zr")).unwrap();
    torn[28] ^= 1;
    std::fs::write(s.join("index.zr"), &torn).unwrap();
    refused("the dynamic checksum broken");
    for id in 2..=15 {
        std::fs::remove_file(s.join(format!("{id}.zr"))).unwrap();
    }
    std::fs::write(s.join("index.zr"), &index).unwrap();
    assert_eq!(Store::open(&s).unwrap().len(), 100, "the store as it was opens");
}

/// The journal's cap comes from the store (its records, one compaction batch, its largest
/// record), not from chunk-named files: a sparse `99.zr` of a terabyte does not let a sparse
/// journal of gigabytes be read whole.
#[test]
fn a_journals_cap_does_not_grow_with_stray_chunk_files() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let store = Store::create(&s, StoreOptions::new().chunk_capacity(1 << 20)).unwrap();
    store.append(&records(10, 16), Codec::Raw).unwrap();
    drop(store);
    let sparse = |name: &str, len: u64| {
        std::fs::File::create(s.join(name)).unwrap().set_len(len).unwrap();
    };
    sparse("99.zr", 1 << 40);
    sparse("journal.zr", 3 << 30);
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("journal.zr") && reason.contains("may hold")),
        "{e}"
    );
}

/// A compaction's journal in a store whose chunks are links to files elsewhere is replayed (the
/// cap once counted a link's own length, and refused an honest journal).
#[cfg(unix)]
#[test]
fn a_journal_replays_in_a_store_of_linked_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let store = Store::create(&s, StoreOptions::new().chunk_capacity(4096)).unwrap();
    store.append(&records(40, 1000), Codec::Raw).unwrap();
    drop(store);
    for entry in std::fs::read_dir(&s).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.strip_suffix(".zr").is_some_and(|n| n.parse::<u32>().is_ok()) {
            std::fs::rename(s.join(&name), elsewhere.join(&name)).unwrap();
            std::os::unix::fs::symlink(elsewhere.join(&name), s.join(&name)).unwrap();
        }
    }
    // A move journal of records 0..8 onto themselves, with their bytes: what a killed
    // compaction leaves, replayed idempotently (8 KB: more than the links' own lengths).
    let entries: Vec<(u64, v2::Entry)> = (0..8u64)
        .map(|i| {
            let (file, at) = crate::common::entry_at(&s, i);
            let raw: [u8; v2::ENTRY_SIZE] =
                std::fs::read(&file).unwrap()[at as usize..at as usize + v2::ENTRY_SIZE].try_into().unwrap();
            (i, v2::Entry::decode_unchecked(&raw))
        })
        .collect();
    let data: Vec<u8> = (0..8u8).flat_map(|i| vec![i; 1000]).collect();
    let j = loaderx_core::format::Journal::Move { entries, data };
    std::fs::write(s.join("journal.zr"), j.encode(loaderx_core::format::Format::V2)).unwrap();
    let w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    assert!(!s.join("journal.zr").exists(), "replayed and removed");
    assert_eq!(w.get(5).unwrap(), vec![5u8; 1000]);
    assert!(w.verify().unwrap().is_ok());
}

/// An overwrite removes the old store's index last: one stopped part way (here by a chunk name
/// it cannot remove) leaves a store the next overwrite replaces, never chunks without an index
/// that a creator refuses.
#[test]
fn an_overwrite_stopped_part_way_leaves_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let store = Store::create(&s, StoreOptions::new().chunk_capacity(4096)).unwrap();
    store.append(&records(40, 1000), Codec::Raw).unwrap();
    drop(store);
    std::fs::create_dir(s.join("77.zr")).unwrap();
    std::fs::write(s.join("77.zr").join("x"), b"x").unwrap();
    let e = Store::create(&s, StoreOptions::new().overwrite(true)).unwrap_err();
    assert!(matches!(&e, Error::Io { path, .. } if path.ends_with("77.zr")), "{e}");
    assert!(s.join("index.zr").exists(), "the index is removed last");
    std::fs::remove_dir_all(s.join("77.zr")).unwrap();
    let again = Store::create(&s, StoreOptions::new().overwrite(true)).unwrap();
    assert_eq!(again.len(), 0);
}

/// A FIFO planted under a store file's name is refused at once, not waited on for ever.
#[cfg(unix)]
#[test]
fn a_fifo_under_a_store_files_name_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["dict.zr", "index.zr", "manifest.zr", "schema.msgpack", "0.zr"] {
        let d = dir.path().join(name.replace('.', "_"));
        let mut w = DatasetWriter::dense::<u8>(&d, vec![4], WriteOptions::new()).unwrap();
        w.append(&[1u8; 40]).unwrap();
        w.finish().unwrap();
        let _ = std::fs::remove_file(d.join(name));
        let made = std::process::Command::new("mkfifo").arg(d.join(name)).status().unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let opened = d.clone();
        std::thread::spawn(move || {
            let r = DenseDataset::<u8>::open(&opened).and_then(|ds| {
                let s = Store::open(&opened)?;
                s.verify()?;
                ds.get_batch(&[0]).map(drop)
            });
            let _ = tx.send(r.err().map(|e| loaderx_core::error_chain(&e)));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{name}: waited on"));
        assert!(got.is_some(), "{name}: refused");
        if ["dict.zr", "index.zr", "schema.msgpack"].contains(&name) {
            assert!(got.as_ref().is_some_and(|m| m.contains("not a regular file")), "{name}: {got:?}");
        }
    }
}

/// A file named `index.zr` that is not a store's (no format magic) is a stray: a create with
/// overwrite refuses it and touches nothing, rather than taking the directory for a store and
/// removing the user's `N.zr` files beside it.
#[test]
fn an_index_zr_without_the_magic_is_no_store_to_replace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("u");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("index.zr"), b"not a store").unwrap();
    std::fs::write(d.join("2.zr"), b"season 2").unwrap();
    std::fs::write(d.join("notes.txt"), b"keep").unwrap();
    let before = snapshot(&d);
    let e = Store::create(&d, StoreOptions::new().overwrite(true)).unwrap_err();
    assert!(matches!(&e, Error::NotReplaceable { .. }), "{e}");
    assert_eq!(snapshot(&d), before, "nothing touched");
}

/// A record larger than the chunk capacity (it has a chunk to itself) in a compaction's journal:
/// the journal's cap allows the largest record the index holds, so a killed compaction's honest
/// journal replays.
#[test]
fn a_journal_moving_a_record_larger_than_a_chunk_replays() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let big = vec![7u8; 40 << 20];
    let store = Store::create(&s, StoreOptions::new().chunk_capacity(1 << 20)).unwrap();
    store.append(&[vec![1u8; 100], big.clone(), vec![2u8; 100]], Codec::Raw).unwrap();
    drop(store);
    let (file, at) = crate::common::entry_at(&s, 1);
    let raw: [u8; v2::ENTRY_SIZE] =
        std::fs::read(&file).unwrap()[at as usize..at as usize + v2::ENTRY_SIZE].try_into().unwrap();
    let j = loaderx_core::format::Journal::Move {
        entries: vec![(1, v2::Entry::decode_unchecked(&raw))],
        data: big,
    };
    std::fs::write(s.join("journal.zr"), j.encode(loaderx_core::format::Format::V2)).unwrap();
    let w = Store::open_rw(&s, StoreOptions::new()).unwrap();
    assert!(!s.join("journal.zr").exists(), "replayed and removed");
    assert_eq!(w.get(2).unwrap(), vec![2u8; 100]);
    assert!(w.verify().unwrap().is_ok());
}

/// A deferred-sync writer whose records end exactly at a chunk's capacity: readers open the
/// store while it writes (the frontier's chunk exists), and a handle dropped without `sync`
/// leaves it as a sync would (its manifest written).
#[test]
fn a_deferred_store_at_a_chunk_boundary_opens_and_a_dropped_writer_syncs() {
    for opts in [
        StoreOptions::new(),
        StoreOptions::new().fixed_stride(1),
        StoreOptions::new().layout(Layout::Compact),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s");
        let w = Store::create(&s, opts.chunk_capacity(8).deferred_sync(true)).unwrap();
        w.append(&records(8, 1), Codec::Raw).unwrap();
        assert_eq!(Store::open(&s).unwrap().len(), 8, "a reader while the writer is open");
        w.append(&records(5, 1), Codec::Raw).unwrap();
        drop(w);
        let r = Store::open(&s).unwrap();
        assert_eq!(r.len(), 13);
        assert!(r.verify().unwrap().is_ok(), "{:?}", r.verify().unwrap());
        drop(r);
        assert_eq!(Store::open_rw(&s, StoreOptions::new()).unwrap().len(), 13);
    }
}

/// The journal's cap is not raised by one lying index entry: the largest record it allows is of
/// entries that pass their checks, within the format's record limit and the chunk files, so a
/// sparse journal of gigabytes beside a v1 entry claiming 4 GiB is refused before it is read.
#[test]
fn a_lying_entry_does_not_raise_the_journals_cap() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let store = Store::create(&s, StoreOptions::new().format(loaderx_core::format::Format::V1)).unwrap();
    store.append(&records(10, 16), Codec::Raw).unwrap();
    drop(store);
    let (file, at) = crate::common::entry_at(&s, 3);
    crate::common::patch(&file, at + 4, &0xFFFF_FFF0u32.to_ne_bytes());
    std::fs::File::create(s.join("journal.zr")).unwrap().set_len(3 << 30).unwrap();
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { path, offset: 0, reason, .. } if path.ends_with("journal.zr") && reason.contains("may hold")),
        "{e}"
    );
}

/// The twenty-third look's X1: an older `index.zr` put back over a store (its checksums valid)
/// has a frontier behind `manifest.zr`'s. A writer's open refuses it before trimming anything:
/// the records past the old frontier stay in the chunks, for `verify` to name. In each layout.
#[test]
fn an_older_index_put_back_is_refused_before_anything_is_trimmed() {
    for opts in [StoreOptions::new(), StoreOptions::new().fixed_stride(64)] {
        let dir = tempfile::tempdir().unwrap();
        let (y, x) = (dir.path().join("y"), dir.path().join("x"));
        Store::create(&y, opts.clone()).unwrap().append(&records(1000, 64), Codec::Raw).unwrap();
        Store::create(&x, opts.clone()).unwrap().append(&records(500, 64), Codec::Raw).unwrap();
        std::fs::copy(x.join("index.zr"), y.join("index.zr")).unwrap();
        let before = snapshot(&y);
        let e = Store::open_rw(&y, StoreOptions::new()).unwrap_err();
        let Error::Corrupt { ref path, ref reason, .. } = e else { panic!("{e}") };
        assert!(path.ends_with("index.zr") && reason.contains("behind manifest.zr's"), "{e}");
        assert!(reason.contains("1000 records"), "{e}");
        assert_eq!(snapshot(&y), before, "nothing trimmed or rewritten");
    }
}

/// The twenty-third look's X2: the capacity in a header is no more trusted than a journal. With
/// a header claiming 2^62-byte chunks, a move journal into chunk 0 at byte 2^40 is refused (it
/// would leave a hole past the chunk's bytes), and chunk 0 does not become a sparse TiB file.
#[test]
fn a_journal_hole_is_refused_whatever_capacity_the_header_claims() {
    use loaderx_core::format::{Format, Journal};
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    Store::create(&s, StoreOptions::new().chunk_capacity(1000).compact_entries(false))
        .unwrap()
        .append(&records(20, 150), Codec::Raw)
        .unwrap();
    edit_header(&s, |h| h.chunk_capacity = 1 << 62);
    let held = std::fs::metadata(s.join("0.zr")).unwrap().len();
    let e =
        v2::Entry { offset: 1 << 40, stored: 150, logical: 150, chunk: 0, codec: Codec::Raw as u8, crc: 0 };
    let j = Journal::Move { entries: vec![(0, e)], data: vec![0u8; 150] };
    std::fs::write(s.join("journal.zr"), j.encode(Format::V2)).unwrap();
    let e = Store::open_rw(&s, StoreOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { reason, .. } if reason.contains("leave a hole")), "{e}");
    assert_eq!(std::fs::metadata(s.join("0.zr")).unwrap().len(), held);
}

/// The twenty-third look's X5: a chunk that is a directory is named as such, not as truncated.
#[test]
fn a_chunk_that_is_not_a_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    Store::create(&s, StoreOptions::new().chunk_capacity(1000))
        .unwrap()
        .append(&records(20, 150), Codec::Raw)
        .unwrap();
    std::fs::remove_file(s.join("0.zr")).unwrap();
    std::fs::create_dir(s.join("0.zr")).unwrap();
    for e in [Store::open_rw(&s, StoreOptions::new()).unwrap_err(), Store::open(&s).unwrap_err()] {
        assert!(
            matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("0.zr") && reason.contains("not a regular file")),
            "{e}"
        );
    }
    // A socket (which cannot be opened, only looked at: the forty-second look's V4).
    #[cfg(unix)]
    {
        std::fs::remove_dir(s.join("0.zr")).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(s.join("0.zr")).unwrap();
        for e in [Store::open_rw(&s, StoreOptions::new()).unwrap_err(), Store::open(&s).unwrap_err()] {
            assert!(
                matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("0.zr") && reason.contains("not a regular file")),
                "{e}"
            );
        }
    }
}

/// The twenty-fourth look's Y1: a header torn after a commit whose frontier lies past the
/// furthest record (a rollover to a fresh chunk; bytes a delete left) is repaired to the
/// frontier the manifest holds, and the store opens, verifies and takes appends.
#[test]
fn a_torn_header_past_the_furthest_record_is_repaired_to_the_manifests_frontier() {
    for (records, capacity, doomed) in [(10u32, 1000u64, None), (10, 100_000, Some(9u64))] {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s");
        let mut store = Store::create(&s, StoreOptions::new().chunk_capacity(capacity)).unwrap();
        store.append(&records_of_100(records), Codec::Raw).unwrap();
        if let Some(i) = doomed {
            store.delete(&[i]).unwrap();
        }
        let len = store.len();
        drop(store);
        // The frontier's offset rewritten without its checksum: a kill inside the header write.
        let mut bytes = std::fs::read(s.join("index.zr")).unwrap();
        bytes[32..40].copy_from_slice(&7u64.to_le_bytes());
        std::fs::write(s.join("index.zr"), &bytes).unwrap();
        let w = Store::open_rw(&s, StoreOptions::new()).unwrap();
        assert_eq!(w.len(), len);
        assert!(w.verify().unwrap().is_ok(), "{records} of 100 bytes in chunks of {capacity}");
        w.append(&records_of_100(1), Codec::Raw).unwrap();
        drop(w);
        let again = Store::open_rw(&s, StoreOptions::new()).unwrap();
        assert_eq!(again.len(), len + 1);
        assert!(again.verify().unwrap().is_ok());
    }
}

fn records_of_100(n: u32) -> Vec<Vec<u8>> {
    records(n, 100)
}
