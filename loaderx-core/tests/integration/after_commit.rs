//! What follows a commit: a step after it that fails (a derived file's write) never fails the
//! call that committed, since a caller retrying it would apply it twice; a step before it that
//! fails changes nothing. Failures are made by putting a directory where a temporary file goes.

use std::fs;
use std::path::Path;

use loaderx_core::{Codec, Error, Store, StoreOptions};

fn record(i: u32) -> Vec<u8> {
    let mut r = vec![0u8; 16];
    r[..4].copy_from_slice(&i.to_le_bytes());
    r
}

fn records(range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
    range.map(record).collect()
}

/// The store's records, in order.
fn contents(store: &Store) -> Vec<Vec<u8>> {
    (0..store.len()).map(|i| store.get(i).unwrap().to_vec()).collect()
}

/// Reopened read-write (which computes a stale or missing manifest again), the store verifies
/// clean and holds `want`.
fn reopens_clean(dir: &Path, want: &[Vec<u8>]) {
    let store = Store::open_rw(dir, StoreOptions::new()).unwrap();
    assert_eq!(contents(&store), want);
    let report = store.verify().unwrap();
    assert!(report.is_ok(), "{:?} {:?}", report.bad, report.files);
}

/// The layouts of a v2 store of 16-byte records.
fn layouts() -> [(&'static str, StoreOptions); 3] {
    [
        ("entries", StoreOptions::new()),
        ("compact", StoreOptions::new().compact_entries(true)),
        ("fixed", StoreOptions::new().fixed_stride(16)),
    ]
}

#[test]
fn an_append_whose_manifest_write_fails_still_commits_once() {
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, opts).unwrap();
        store.append(&records(0..3), Codec::Raw).unwrap();
        // The manifest's temporary cannot be made: its write fails after the count is published.
        fs::create_dir(path.join("manifest.zr.tmp")).unwrap();
        assert_eq!(store.append(&records(3..5), Codec::Raw).unwrap(), 3..5, "{layout}");
        assert_eq!(store.append(&records(5..6), Codec::Raw).unwrap(), 5..6, "{layout}");
        assert_eq!(store.len(), 6, "{layout}: each record once");
        drop(store);
        fs::remove_dir(path.join("manifest.zr.tmp")).unwrap();
        reopens_clean(&path, &records(0..6));
    }
}

#[test]
fn a_delete_whose_manifest_write_fails_still_deletes_once() {
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts).unwrap();
        store.append(&records(0..40), Codec::Raw).unwrap();
        fs::create_dir(path.join("manifest.zr.tmp")).unwrap();
        store.delete(&[3u64]).unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert_eq!(store.len(), 39, "{layout}: one record deleted");
        // The handle goes on writing (a fixed-stride delete left it without a manifest).
        store.append(&records(40..41), Codec::Raw).unwrap();
        drop(store);
        fs::remove_dir(path.join("manifest.zr.tmp")).unwrap();
        let mut want = records(0..39);
        want[3] = record(39);
        want.push(record(40));
        reopens_clean(&path, &want);
    }
}

#[test]
fn a_delete_whose_journal_cannot_be_written_changes_nothing() {
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts).unwrap();
        store.append(&records(0..40), Codec::Raw).unwrap();
        fs::create_dir(path.join("journal.zr.tmp")).unwrap();
        let e = store.delete(&[3u64, 7]).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{layout}: {e}");
        assert_eq!(contents(&store), records(0..40), "{layout}: nothing deleted");
        // Nothing committed: the handle writes on, and the delete can be tried again.
        fs::remove_dir(path.join("journal.zr.tmp")).unwrap();
        store.delete(&[3u64, 7]).unwrap();
        assert_eq!(store.len(), 38, "{layout}");
        drop(store);
        let mut want = records(0..38);
        want[3] = record(38);
        want[7] = record(39);
        reopens_clean(&path, &want);
    }
}

/// What a power loss leaves of a manifest replaced without a sync (an empty file, or zeros) is
/// computed again by the next writer, not refused as damage; `verify` says what it is.
#[test]
fn an_empty_or_zeroed_manifest_is_computed_again() {
    for (layout, opts) in layouts() {
        for zeros in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let store = Store::create(&path, opts.clone()).unwrap();
            store.append(&records(0..10), Codec::Raw).unwrap();
            drop(store);
            // Its length, zeroed: what a file extended but not yet written out reads as.
            let len = if zeros { fs::metadata(path.join("manifest.zr")).unwrap().len() as usize } else { 0 };
            fs::write(path.join("manifest.zr"), vec![0u8; len]).unwrap();
            let report = Store::open(&path).unwrap().verify().unwrap();
            assert!(
                matches!(&report.files[..], [Error::Corrupt { reason, .. }] if reason.contains("power loss")),
                "{layout}: {:?}",
                report.files
            );
            let store =
                Store::open_rw(&path, StoreOptions::new()).unwrap_or_else(|e| panic!("{layout}: {e}"));
            store.append(&records(10..11), Codec::Raw).unwrap();
            drop(store);
            reopens_clean(&path, &records(0..11));
        }
    }
}

/// A manifest that is neither empty nor zeros and does not decode is still damage: refused.
#[test]
fn a_manifest_of_other_bytes_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    Store::create(&path, StoreOptions::new()).unwrap().append(&records(0..4), Codec::Raw).unwrap();
    let mut bytes = fs::read(path.join("manifest.zr")).unwrap();
    bytes[0] ^= 0xff;
    fs::write(path.join("manifest.zr"), &bytes).unwrap();
    let Err(e) = Store::open_rw(&path, StoreOptions::new()) else { panic!("damage rebuilt over") };
    assert!(matches!(&e, Error::Corrupt { path, .. } if path.ends_with("manifest.zr")), "{e}");
}

/// Compaction refuses a chunk before the tail cut short, naming it and the record past its end,
/// and leaves the manifest as it was: computing it again from the cut chunk would certify the
/// loss. With records to move or without.
#[test]
fn compaction_refuses_a_truncated_chunk_and_names_it() {
    for delete_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, StoreOptions::new().chunk_capacity(64)).unwrap();
        store.append(&records(0..12), Codec::Raw).unwrap();
        if delete_first {
            store.delete(&[1u64]).unwrap();
        }
        drop(store);
        // Chunk 0 holds records 0..4 (bytes 0..64); cut inside record 2.
        fs::OpenOptions::new().write(true).open(path.join("0.zr")).unwrap().set_len(40).unwrap();
        let manifest = fs::read(path.join("manifest.zr")).unwrap();
        let mut store = Store::open_rw(&path, StoreOptions::new()).unwrap();
        let e = store.compact().unwrap_err();
        let Error::CorruptRecord { path: named, index, reason, .. } = &e else { panic!("{e}") };
        assert!(named.ends_with("0.zr"), "{e}");
        assert_eq!(*index, 3, "the chunk's furthest record: {e}");
        assert!(reason.contains("truncated") && reason.contains("of 40 bytes"), "{e}");
        assert_eq!(fs::read(path.join("manifest.zr")).unwrap(), manifest, "delete first: {delete_first}");
    }
}

/// Something at the journal's name (no writer leaves one: an open replays and removes it) is
/// refused before a delete starts: a plain error, nothing deleted, the handle writing on.
#[test]
fn a_delete_with_something_at_the_journals_name_is_refused_unstarted() {
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts).unwrap();
        store.append(&records(0..40), Codec::Raw).unwrap();
        fs::create_dir(path.join("journal.zr")).unwrap();
        let e = store.delete(&[0u64, 1]).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("journal.zr") && reason.contains("not started")),
            "{layout}: {e}"
        );
        assert_eq!(contents(&store), records(0..40), "{layout}");
        fs::remove_dir(path.join("journal.zr")).unwrap();
        store.append(&records(40..41), Codec::Raw).unwrap();
        drop(store);
        reopens_clean(&path, &records(0..41));
    }
}

/// A manifest a delete removed and failed to write again is computed again by the handle's
/// next append: a long-lived handle does not go on without one.
#[test]
fn the_next_append_writes_a_manifest_a_failed_rewrite_left_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = Store::create(&path, StoreOptions::new().fixed_stride(16)).unwrap();
    store.append(&records(0..40), Codec::Raw).unwrap();
    fs::create_dir(path.join("manifest.zr.tmp")).unwrap();
    store.delete(&[3u64]).unwrap();
    assert!(!path.join("manifest.zr").exists(), "removed by the delete, not written again");
    fs::remove_dir(path.join("manifest.zr.tmp")).unwrap();
    store.append(&records(40..41), Codec::Raw).unwrap();
    let report = Store::open(&path).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{:?} {:?}", report.bad, report.files);
}

/// A manifest longer than a sector whose tail a power loss left as zeros (its first sectors
/// written, its length already durable) is computed again too.
#[test]
fn a_manifest_cut_off_by_zeros_is_computed_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    // 4 records a chunk of 64 bytes: 50 chunks, a manifest of more than 512 bytes.
    let store = Store::create(&path, StoreOptions::new().chunk_capacity(64)).unwrap();
    store.append(&records(0..200), Codec::Raw).unwrap();
    drop(store);
    let mut bytes = fs::read(path.join("manifest.zr")).unwrap();
    assert!(bytes.len() > 700, "{}", bytes.len());
    bytes[512..].fill(0);
    fs::write(path.join("manifest.zr"), &bytes).unwrap();
    reopens_clean(&path, &records(0..200));
}

/// The thirtieth look's G1: a header damaged under a live writer (its fixed fields no longer
/// parse) makes the append fail, and the failure's clean-up, which has no frontier to trust,
/// removes nothing.
#[cfg(unix)]
#[test]
fn an_append_under_a_header_that_does_not_parse_removes_nothing() {
    use std::os::unix::fs::FileExt;
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, opts.chunk_capacity(64)).unwrap();
        store.append(&records(0..40), Codec::Raw).unwrap();
        let index = fs::OpenOptions::new().read(true).write(true).open(path.join("index.zr")).unwrap();
        let mut byte = [0u8; 1];
        index.read_exact_at(&mut byte, 0).unwrap();
        index.write_all_at(&[byte[0] ^ 1], 0).unwrap();
        let e = store.append(&records(40..41), Codec::Raw).unwrap_err();
        assert!(matches!(&e, Error::Corrupt { path, .. } if path.ends_with("index.zr")), "{layout}: {e}");
        index.write_all_at(&byte, 0).unwrap();
        drop(store);
        reopens_clean(&path, &records(0..40));
    }
}

/// The thirtieth look's G3: an older `index.zr` put back beside a manifest whose tail a power
/// loss zeroed is refused before anything is trimmed (the manifest's head still counts more
/// chunks); the newer index put back again opens with every record. (Within the older index's
/// own tail chunk the tail's row is what would tell, and a power loss may have taken it.)
#[test]
fn an_older_index_beside_a_torn_manifest_is_refused_before_any_trim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().chunk_capacity(64)).unwrap();
    store.append(&records(0..198), Codec::Raw).unwrap();
    drop(store);
    let older = fs::read(path.join("index.zr")).unwrap();
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    store.append(&records(198..203), Codec::Raw).unwrap();
    drop(store);
    let newer = fs::read(path.join("index.zr")).unwrap();
    fs::write(path.join("index.zr"), &older).unwrap();
    let mut manifest = fs::read(path.join("manifest.zr")).unwrap();
    assert!(manifest.len() > 700);
    manifest[512..].fill(0);
    fs::write(path.join("manifest.zr"), &manifest).unwrap();
    let files = fs::read_dir(&path).unwrap().count();
    let Err(e) = Store::open_rw(&path, StoreOptions::new()) else { panic!("an older index opened") };
    assert!(
        matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with("index.zr") && reason.contains("older")),
        "{e}"
    );
    assert_eq!(fs::read_dir(&path).unwrap().count(), files, "nothing removed");
    fs::write(path.join("index.zr"), &newer).unwrap();
    reopens_clean(&path, &records(0..203));
}

/// The thirty-first look's H1: a delete lowers the count and keeps the manifest, so a manifest
/// a power loss left stale and torn counts more records than the index: that is no older index,
/// and the writer opens (and computes the manifest again).
#[test]
fn a_torn_manifest_a_delete_left_stale_is_computed_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().chunk_capacity(64)).unwrap();
    store.append(&records(0..200), Codec::Raw).unwrap();
    drop(store);
    let mut stale = fs::read(path.join("manifest.zr")).unwrap();
    let mut store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    store.delete(&[0u64]).unwrap();
    drop(store);
    assert!(stale.len() > 700);
    stale[512..].fill(0);
    fs::write(path.join("manifest.zr"), &stale).unwrap();
    let mut want = records(0..199);
    want[0] = record(199);
    reopens_clean(&path, &want);
}

/// The thirty-first look's H2 and H3: a frontier changed under a live writer (its checksum no
/// longer vouching for it) is neither appended at, nor cut back to, nor published again: the
/// append and the delete are refused with nothing written.
#[cfg(unix)]
#[test]
fn a_frontier_changed_under_a_writer_is_not_written_from() {
    use std::os::unix::fs::FileExt;
    for (layout, opts) in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts.chunk_capacity(64)).unwrap();
        store.append(&records(0..40), Codec::Raw).unwrap();
        let index = fs::OpenOptions::new().read(true).write(true).open(path.join("index.zr")).unwrap();
        // Byte 24 is the tail chunk's lowest byte: 9 becomes 8.
        let mut byte = [0u8; 1];
        index.read_exact_at(&mut byte, 24).unwrap();
        index.write_all_at(&[byte[0] ^ 1], 24).unwrap();
        let e = store.append(&records(40..41), Codec::Raw).unwrap_err();
        assert!(matches!(&e, Error::Corrupt { path, .. } if path.ends_with("index.zr")), "{layout}: {e}");
        let e = store.delete(&[39u64]).unwrap_err();
        assert!(matches!(&e, Error::Corrupt { .. }), "{layout}: {e}");
        if layout == "entries" {
            // The thirty-second look's J1: training writes the header again whole.
            let samples: Vec<Vec<u8>> =
                (0..2000u32).map(|i| format!("sample {i} of some text").into_bytes()).collect();
            let e = store.train_dictionary(&samples).unwrap_err();
            assert!(matches!(&e, Error::Corrupt { .. }), "a dictionary over a changed frontier: {e}");
        }
        index.write_all_at(&byte, 24).unwrap();
        drop(store);
        reopens_clean(&path, &records(0..40));
    }
}

/// The thirty-second look's J3: a v1 store's `meta.zr` keeps no checksum, so its frontier is
/// checked against the one this writer last published: one changed from outside is not
/// appended at.
#[cfg(unix)]
#[test]
fn a_v1_frontier_changed_under_a_writer_is_not_written_from() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().format(loaderx_core::Format::V1).chunk_capacity(64))
        .unwrap();
    store.append(&records(0..40), Codec::Raw).unwrap();
    let meta = fs::OpenOptions::new().read(true).write(true).open(path.join("meta.zr")).unwrap();
    let mut byte = [0u8; 1];
    meta.read_exact_at(&mut byte, 6).unwrap();
    meta.write_all_at(&[byte[0] ^ 1], 6).unwrap();
    let e = store.append(&records(40..41), Codec::Raw).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { reason, .. } if reason.contains("this writer published")), "{e}");
    meta.write_all_at(&byte, 6).unwrap();
    drop(store);
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    assert_eq!(contents(&store), records(0..40));
}

/// The thirty-third look's K1: an older header put back under a live writer (a genuine one:
/// its checksum passes) makes the append refused, and the refusal's clean-up cuts nothing
/// back: the committed bytes past that older frontier stay.
#[cfg(unix)]
#[test]
fn an_append_refused_over_an_older_header_cuts_nothing() {
    use std::os::unix::fs::FileExt;
    for (name, header, format) in
        [("index.zr", 64, loaderx_core::Format::V2), ("meta.zr", 16, loaderx_core::Format::V1)]
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, StoreOptions::new().format(format)).unwrap();
        store.append(&records(0..10), Codec::Raw).unwrap();
        let file = fs::OpenOptions::new().read(true).write(true).open(path.join(name)).unwrap();
        let mut older = vec![0u8; header];
        file.read_exact_at(&mut older, 0).unwrap();
        store.append(&records(10..20), Codec::Raw).unwrap();
        let mut newer = vec![0u8; header];
        file.read_exact_at(&mut newer, 0).unwrap();
        file.write_all_at(&older, 0).unwrap();
        let e = store.append(&records(20..21), Codec::Raw).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { reason, .. } if reason.contains("this writer published")),
            "{name}: {e}"
        );
        assert_eq!(fs::metadata(path.join("0.zr")).unwrap().len(), 20 * 16, "{name}: nothing cut");
        file.write_all_at(&newer, 0).unwrap();
        drop(store);
        reopens_clean(&path, &records(0..20));
    }
}

/// The thirty-fourth look's L1: an older header put back under a live writer with the same
/// frontier as the one it published (empty records appended since, or a delete, which keeps
/// the frontier) but another count is refused too: appending from its count would drop the
/// empty records or bring a deleted one back, and return success.
#[cfg(unix)]
#[test]
fn an_older_header_with_the_same_frontier_is_not_written_from() {
    use std::os::unix::fs::FileExt;
    for (name, header, format) in
        [("index.zr", 64, loaderx_core::Format::V2), ("meta.zr", 16, loaderx_core::Format::V1)]
    {
        for change in ["empty records", "a delete"] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let mut store = Store::create(&path, StoreOptions::new().format(format)).unwrap();
            store.append(&records(0..10), Codec::Raw).unwrap();
            let file = fs::OpenOptions::new().read(true).write(true).open(path.join(name)).unwrap();
            let mut older = vec![0u8; header];
            file.read_exact_at(&mut older, 0).unwrap();
            let mut want = records(0..10);
            if change == "empty records" {
                store.append(&vec![Vec::<u8>::new(); 5], Codec::Raw).unwrap();
                want.extend(std::iter::repeat_n(Vec::new(), 5));
            } else {
                store.delete(&[3u64]).unwrap();
                want.swap_remove(3);
            }
            let mut newer = vec![0u8; header];
            file.read_exact_at(&mut newer, 0).unwrap();
            file.write_all_at(&older, 0).unwrap();
            let published = |e: &Error| matches!(e, Error::Corrupt { reason, .. } if reason.contains("this writer published"));
            let e = store.append(&records(20..21), Codec::Raw).unwrap_err();
            assert!(published(&e), "{name}, {change}: {e}");
            let e = store.delete(&[0u64]).unwrap_err();
            assert!(published(&e), "{name}, {change}: {e}");
            let mut now = vec![0u8; header];
            file.read_exact_at(&mut now, 0).unwrap();
            assert_eq!(now, older, "{name}, {change}: nothing written");
            file.write_all_at(&newer, 0).unwrap();
            drop(store);
            reopens_clean(&path, &want);
        }
    }
}

/// Replaces `path` by a copy of itself (the same bytes, another file), as a restore or
/// `cp --remove-destination` does.
#[cfg(unix)]
fn swap_for_a_copy(path: &Path) {
    let copy = path.with_extension("copy");
    fs::copy(path, &copy).unwrap();
    fs::rename(&copy, path).unwrap();
}

/// The thirty-eighth look's Q1 and Q2: the index (`index.zr`, `meta.zr`) or the tail chunk
/// replaced by an identical copy under a live writer: its writes would go to files with no name,
/// acknowledged and lost. The first write after it is refused with nothing written and the
/// handle stops; reopened, the store holds every record it acknowledged.
#[cfg(unix)]
#[test]
fn a_file_replaced_under_a_writer_is_never_written_through() {
    let cases = [
        ("index.zr", StoreOptions::new()),
        ("index.zr", StoreOptions::new().fixed_stride(16)),
        ("meta.zr", StoreOptions::new().format(loaderx_core::Format::V1)),
        ("0.zr", StoreOptions::new()),
        ("0.zr", StoreOptions::new().compact_entries(true)),
        ("0.zr", StoreOptions::new().format(loaderx_core::Format::V1)),
    ];
    for (name, opts) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts).unwrap();
        store.append(&records(0..10), Codec::Raw).unwrap();
        swap_for_a_copy(&path.join(name));
        let e = store.append(&records(10..20), Codec::Raw).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { path, reason, .. } if path.ends_with(name) && reason.contains("replaced")),
            "{name}: {e}"
        );
        assert!(matches!(store.delete(&[0u64]), Err(Error::Locked { .. } | Error::Corrupt { .. })), "{name}");
        let e = store.append(&records(20..21), Codec::Raw).unwrap_err();
        assert!(
            matches!(&e, Error::Locked { reason, .. } if reason.contains("writes no more")),
            "{name}: {e}"
        );
        drop(store);
        reopens_clean(&path, &records(0..10));
    }
}

/// Q1b: with the index replaced, a writer's delete (or compaction) would take the lock of a file
/// no reader holds any more, and move records under a reader of the new one.
#[cfg(unix)]
#[test]
fn no_delete_under_readers_of_a_replaced_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = Store::create(&path, StoreOptions::new()).unwrap();
    store.append(&records(0..50), Codec::Raw).unwrap();
    swap_for_a_copy(&path.join("index.zr"));
    let reader = Store::open(&path).unwrap();
    assert_eq!(contents(&reader), records(0..50));
    let e = store.delete(&[0u64, 1, 2]).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { .. } | Error::Locked { .. }), "{e}");
    let e = store.compact().unwrap_err();
    assert!(matches!(&e, Error::Corrupt { .. } | Error::Locked { .. }), "{e}");
    assert_eq!(contents(&reader), records(0..50), "the reader's records unmoved");
    drop((store, reader));
    reopens_clean(&path, &records(0..50));
}

/// The thirty-ninth look's S1: the tail chunk removed or cut under a live writer: the refused
/// append's clean-up made it again (or extended it) with zeros, which v1 then verified clean.
/// Now nothing is written, and the next open names the missing or cut chunk.
#[cfg(unix)]
#[test]
fn a_removed_or_cut_tail_chunk_is_not_made_again() {
    for opts in [StoreOptions::new(), StoreOptions::new().format(loaderx_core::Format::V1)] {
        for cut in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let store = Store::create(&path, opts.clone()).unwrap();
            store.append(&records(0..10), Codec::Raw).unwrap();
            let chunk = path.join("0.zr");
            if cut {
                fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(48).unwrap();
            } else {
                fs::remove_file(&chunk).unwrap();
            }
            let e = store.append(&records(10..15), Codec::Raw).unwrap_err();
            assert!(matches!(&e, Error::Corrupt { path, .. } if path.ends_with("0.zr")), "cut {cut}: {e}");
            drop(store);
            match fs::metadata(&chunk) {
                Ok(m) => assert_eq!(m.len(), 48, "cut {cut}: not extended"),
                Err(_) => assert!(!cut, "removed: not made again"),
            }
            // The damage is reported at the next open.
            let e = Store::open_rw(&path, StoreOptions::new()).unwrap_err();
            assert!(matches!(&e, Error::Corrupt { path: p, .. } if p.ends_with("0.zr")), "cut {cut}: {e}");
        }
    }
}

/// S2: a non-tail chunk replaced by a copy under a writer holding its handle, then compaction:
/// the moves went into the file with no name. The exclusive operations open the chunks again by
/// name, so they act on the store's files.
#[cfg(unix)]
#[test]
fn compaction_moves_records_in_the_files_the_names_lead_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = Store::create(&path, StoreOptions::new().chunk_capacity(64)).unwrap();
    store.append(&records(0..11), Codec::Raw).unwrap();
    store.delete(&[0u64, 1]).unwrap();
    let want = contents(&store);
    swap_for_a_copy(&path.join("0.zr"));
    store.compact().unwrap();
    assert_eq!(contents(&store), want);
    drop(store);
    reopens_clean(&path, &want);
}

/// S3: `write.lock` removed under a live writer (a "stale lock" clean-up) lets a second writer
/// open; the first refuses its next write instead of racing it.
#[cfg(unix)]
#[test]
fn a_writer_whose_lock_was_removed_writes_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let first = Store::create(&path, StoreOptions::new()).unwrap();
    first.append(&records(0..3), Codec::Raw).unwrap();
    fs::remove_file(path.join("write.lock")).unwrap();
    let second = Store::open_rw(&path, StoreOptions::new()).unwrap();
    let e = first.append(&records(3..4), Codec::Raw).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { path, .. } if path.ends_with("write.lock")), "{e}");
    second.append(&records(3..6), Codec::Raw).unwrap();
    drop((first, second));
    reopens_clean(&path, &records(0..6));
}

/// The fortieth look's T1: a v1 store compacted through a handle whose chunk capacity is smaller
/// than the chunk its records lie in: packing rolls the new frontier to the start of a chunk no
/// record made, which compaction makes (empty) rather than refuse after its commit.
#[test]
fn compaction_may_end_at_the_start_of_a_chunk_no_record_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let v1 = || StoreOptions::new().format(loaderx_core::Format::V1);
    let store = Store::create(&path, v1().chunk_capacity(4096)).unwrap();
    let big: Vec<Vec<u8>> = (0..3u32).map(|i| vec![i as u8; 500]).collect();
    store.append(&big, Codec::Raw).unwrap();
    drop(store);
    let mut store = Store::open_rw(&path, v1().chunk_capacity(1000)).unwrap();
    store.compact().unwrap();
    assert_eq!(contents(&store), big);
    drop(store);
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    assert_eq!(contents(&store), big);
    assert!(store.verify().unwrap().is_ok());
}
