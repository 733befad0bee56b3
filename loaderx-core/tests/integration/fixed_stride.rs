//! The fixed-stride layout (`StoreOptions::fixed_stride`): records of one size found from their
//! index, a crc32c per block of records. Round trips over chunks and blocks, refusals, damage
//! found by `verify` and `verify_reads`, delete, migration in both directions, the converters'
//! choice of it, and readers verifying while a writer appends.

use std::path::Path;

use loaderx_core::{
    Codec, DType, DatasetWriter, DenseDataset, Error, Format, Layout, Store, StoreOptions, WriteOptions,
};

use crate::common::{patch, record};

/// Records of this many bytes: an odd size, so blocks (4096 / 40 = 102 records) and chunks do
/// not line up with pages.
const SIZE: usize = 40;
/// 25 records a chunk: blocks of 25 (one a chunk), so stores of a few hundred records span
/// many chunks.
const CAPACITY: u64 = 1000;

/// Record `id` of [`SIZE`] bytes: its id, then bytes derived from it.
fn fixed(id: u64) -> Vec<u8> {
    let mut r = record(id);
    r.resize(SIZE, 0);
    r[..8].copy_from_slice(&id.to_le_bytes());
    for (j, b) in r.iter_mut().enumerate().skip(8) {
        *b = (id as usize * 31 + j * 7) as u8;
    }
    r
}

fn id_of(bytes: &[u8]) -> u64 {
    let id = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(bytes, fixed(id), "record with id {id} is not intact");
    id
}

fn create(path: &Path, capacity: u64) -> Store {
    Store::create(path, StoreOptions::new().chunk_capacity(capacity).fixed_stride(SIZE as u32)).unwrap()
}

fn append_ids(store: &Store, ids: std::ops::Range<u64>) {
    let recs: Vec<Vec<u8>> = ids.map(fixed).collect();
    store.append(&recs, Codec::Raw).unwrap();
}

fn all_ids(store: &Store) -> Vec<u64> {
    let n = store.len();
    store.gather(&(0..n).collect::<Vec<_>>()).unwrap().iter().map(|r| id_of(r)).collect()
}

#[test]
fn records_round_trip_over_chunks_and_blocks_with_an_index_of_a_checksum_per_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, CAPACITY);
    // Batches that end inside blocks and chunks.
    for (a, b) in [(0, 1), (1, 24), (24, 26), (26, 300), (300, 311)] {
        append_ids(&store, a..b);
    }
    assert_eq!(store.layout(), Layout::Fixed { record_size: SIZE as u32, block_records: 25 });
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.len(), 311);
    assert_eq!(all_ids(&store), (0..311).collect::<Vec<_>>());
    // Random and sequential fixed-size gathers (adjacent records copied as runs, across chunks).
    let picks: Vec<u64> = vec![310, 0, 24, 25, 26, 27, 28, 150, 149, 3, 3];
    let mut out = vec![0u8; picks.len() * SIZE];
    store.gather_fixed(&picks, SIZE, &mut out).unwrap();
    let got: Vec<u64> = out.chunks(SIZE).map(id_of).collect();
    assert_eq!(got, picks);
    let mut seq = vec![0u8; 100 * SIZE];
    store.gather_fixed(&(20..120u64).collect::<Vec<_>>(), SIZE, &mut seq).unwrap();
    assert_eq!(seq.chunks(SIZE).map(id_of).collect::<Vec<_>>(), (20..120).collect::<Vec<_>>());
    // Out of range and a wrong record size are errors naming what is wrong.
    assert!(matches!(
        store.gather_fixed(&[311u64], SIZE, &mut out[..SIZE]),
        Err(Error::IndexOutOfRange { index: 311, .. })
    ));
    let mut wrong = vec![0u8; 2 * 8];
    assert!(matches!(
        store.gather_fixed(&[5u64, 6], 8, &mut wrong),
        Err(Error::CorruptRecord { index: 5, .. })
    ));
    // The index: the header and one checksum per block (13 chunks of 25 records, one block each).
    let index = std::fs::metadata(path.join("index.zr")).unwrap().len();
    assert!((64 + 4 * 13..=64 + 4096).contains(&index), "index.zr is {index} bytes");
    let v = store.verify().unwrap();
    assert!(v.is_ok(), "{:?}", v.bad.first());
    assert_eq!(v.checked, 311);
    let verified = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
    assert_eq!(all_ids(&verified), (0..311).collect::<Vec<_>>());
    // Compaction has nothing to do.
    drop((store, verified));
    let mut rw = Store::open_rw(&path, StoreOptions::new()).unwrap();
    let report = rw.compact().unwrap();
    assert_eq!((report.moved, report.skipped), (0, 311));
    assert_eq!(all_ids(&rw), (0..311).collect::<Vec<_>>());
}

#[test]
fn a_store_of_the_default_capacity_is_its_records_plus_a_tenth_of_a_percent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().fixed_stride(64)).unwrap();
    let recs: Vec<[u8; 64]> = (0..100_000u64).map(|i| [i as u8; 64]).collect();
    store.append(&recs, Codec::Raw).unwrap();
    let s = store.summary().unwrap();
    assert_eq!(s.chunk_bytes, 64 * 100_000);
    // 1,563 blocks of 64 records: 6,252 bytes of checksums, and the index grows in steps.
    let blocks = 100_000u64.div_ceil(64);
    assert!(s.index_bytes >= 64 + 4 * blocks, "{}", s.index_bytes);
    let total = s.chunk_bytes + s.index_bytes + std::fs::metadata(path.join("manifest.zr")).unwrap().len();
    assert!(
        (total as f64) < 1.02 * s.chunk_bytes as f64 + 140_000.0,
        "{total} bytes for {} of records",
        s.chunk_bytes
    );
}

#[test]
fn appends_of_another_size_or_codec_and_dictionaries_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, CAPACITY);
    append_ids(&store, 0..10);
    let mut bad = vec![fixed(10), fixed(11)];
    bad[1].push(0);
    let e = store.append(&bad, Codec::Raw).unwrap_err();
    assert!(e.to_string().contains("record 1 of the batch is 41 bytes"), "{e}");
    let e = store.append(&[fixed(10)], Codec::Zstd).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(matches!(
        store.train_dictionary(&(0..500).map(record).collect::<Vec<_>>()),
        Err(Error::InvalidArgument(m)) if m.contains("is a fixed store of raw records: it has no dictionary")
    ));
    assert_eq!(store.len(), 10);
    assert_eq!(all_ids(&store), (0..10).collect::<Vec<_>>());
    // A record larger than a chunk, an empty one, or a v1 fixed-stride store: refused at creation.
    for opts in [
        StoreOptions::new().chunk_capacity(100).fixed_stride(101),
        StoreOptions::new().fixed_stride(0),
        StoreOptions::new().format(Format::V1).fixed_stride(8),
    ] {
        assert!(matches!(Store::create(dir.path().join("x"), opts), Err(Error::InvalidArgument(_))));
        assert!(!dir.path().join("x").join("index.zr").exists());
    }
}

#[test]
fn damage_is_found_by_block_by_verify_and_by_verified_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, 4096); // 102 records a chunk, one block of 102
    append_ids(&store, 0..250);
    drop(store);
    // A byte of record 130 (chunk 1, offset 28 * 40) flipped.
    let chunk1 = path.join("1.zr");
    let at = 28 * SIZE as u64 + 9;
    let was = std::fs::read(&chunk1).unwrap()[at as usize];
    patch(&chunk1, at, &[was ^ 0x40]);
    let store = Store::open(&path).unwrap();
    let v = store.verify().unwrap();
    let bad: Vec<u64> = v.bad.iter().map(|(i, _)| *i).collect();
    assert_eq!(bad, (102..204).collect::<Vec<_>>(), "every record of the damaged block, no other");
    assert!(
        matches!(&v.bad[0].1, Error::CorruptRecord { path, reason, .. } if path.ends_with("1.zr") && reason.contains("block checksum"))
    );
    let verified = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
    let e = verified.gather(&[5u64, 150, 103]).unwrap_err();
    assert!(
        matches!(e, Error::CorruptRecord { index: 103, .. } | Error::CorruptRecord { index: 150, .. }),
        "{e}"
    );
    let mut out = vec![0u8; SIZE];
    assert!(matches!(
        verified.gather_fixed(&[120u64], SIZE, &mut out),
        Err(Error::CorruptRecord { index: 120, reason, .. }) if reason.contains("block checksum mismatch")
    ));
    verified.gather_fixed(&[210u64], SIZE, &mut out).unwrap();
    assert_eq!(id_of(&out), 210);
    // Unverified reads hand out the bytes as they are.
    assert!(store.gather(&[130u64]).unwrap()[0] != fixed(130));
    patch(&chunk1, at, &[was]);
    assert!(Store::open(&path).unwrap().verify().unwrap().is_ok());

    // A block checksum damaged in index.zr: that block's records, by verify and verified reads.
    let crc_at = 64 + 4 * 2;
    let idx = std::fs::read(path.join("index.zr")).unwrap();
    patch(&path.join("index.zr"), crc_at, &[idx[crc_at as usize] ^ 1]);
    let bad: Vec<u64> = Store::open(&path).unwrap().verify().unwrap().bad.iter().map(|(i, _)| *i).collect();
    assert_eq!(bad, (204..250).collect::<Vec<_>>());
    let verified_too = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
    assert!(matches!(verified_too.gather(&[249u64]), Err(Error::CorruptRecord { index: 249, .. })));
    patch(&path.join("index.zr"), crc_at, &[idx[crc_at as usize]]);

    // The record size in the header is covered by its checksum.
    patch(&path.join("index.zr"), 48, &[SIZE as u8 + 1]);
    assert!(matches!(Store::open(&path), Err(Error::Corrupt { .. })));
    patch(&path.join("index.zr"), 48, &[SIZE as u8]);

    // A truncated chunk: the count is the store's only index, so chunks that do not hold its
    // records are refused at every open, readers' too, naming the chunk and what it holds
    // (a count no chunk holds would otherwise be walked record by record).
    let tail = path.join("2.zr");
    // Closed first: Windows refuses to cut a file another handle maps.
    drop((store, verified, verified_too));
    std::fs::OpenOptions::new().write(true).open(&tail).unwrap().set_len(10 * SIZE as u64 + 3).unwrap();
    for e in [Store::open(&path).unwrap_err(), Store::open_rw(&path, StoreOptions::new()).unwrap_err()] {
        assert!(
            matches!(&e, Error::Corrupt { path: p, offset, .. } if p.ends_with("2.zr") && *offset == 10 * SIZE as u64 + 3),
            "{e}"
        );
    }
}

#[test]
fn delete_swaps_the_tail_into_holes_and_appends_go_on_where_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = create(&path, CAPACITY);
    append_ids(&store, 0..120);
    let mut model: Vec<u64> = (0..120).collect();
    for doomed in [vec![3u64, 50, 50, 119, 0, 99], (0..40).step_by(3).collect(), vec![]] {
        store.delete(&doomed).unwrap();
        let mut d = doomed.clone();
        d.sort_unstable();
        d.dedup();
        for &i in d.iter().rev() {
            model.swap_remove(i as usize);
        }
        assert_eq!(all_ids(&store), model);
    }
    assert!(store.verify().unwrap().is_ok());
    // The frontier follows the count: the next records go right after the last.
    append_ids(&store, 1000..1030);
    model.extend(1000..1030);
    assert_eq!(all_ids(&store), model);
    drop(store);
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    let v = store.verify().unwrap();
    assert!(v.is_ok(), "{:?} {:?}", v.bad.first(), v.files.first());
    assert_eq!(all_ids(&store), model);
    // Every chunk past the tail is gone, and the tail ends at the last record.
    let tail = (model.len() as u64 - 1) / 25;
    assert!(!path.join(format!("{}.zr", tail + 1)).exists());
    let last_len = std::fs::metadata(path.join(format!("{tail}.zr"))).unwrap().len();
    assert_eq!(last_len, (model.len() as u64 - tail * 25) * SIZE as u64);
}

/// A delete's journal carries the sums it planned for the blocks it sums again: replayed after a
/// crash it refuses a block that was damaged in between (a record it moves, or one it leaves in
/// place), writing no checksum; undamaged, it lands as the delete would have.
#[test]
fn a_delete_replayed_after_a_crash_refuses_damage_that_arrived_in_between() {
    use loaderx_core::format::v2::Entry;
    use loaderx_core::format::{Format, Journal};
    // Record 2 gets record 9's bytes; 9 records remain, all in block 0 of chunk 0.
    let moved = Entry {
        offset: 9 * SIZE as u64,
        stored: SIZE as u32,
        logical: SIZE as u32,
        chunk: 0,
        codec: 0,
        crc: 0,
    };
    let after: Vec<u8> = [0, 1, 9, 3, 4, 5, 6, 7, 8].iter().flat_map(|&id| fixed(id)).collect();
    let journal =
        Journal::Delete { entries: vec![(2, moved)], new_length: 9, sums: vec![(0, crc32c::crc32c(&after))] };
    let crashed = |damage: Option<u64>| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, StoreOptions::new().fixed_stride(SIZE as u32)).unwrap();
        append_ids(&store, 0..10);
        drop(store);
        // What a delete leaves when killed after its journal: the manifest removed, the journal.
        std::fs::remove_file(path.join("manifest.zr")).unwrap();
        std::fs::write(path.join("journal.zr"), journal.encode(Format::V2)).unwrap();
        if let Some(id) = damage {
            patch(&path.join("0.zr"), id * SIZE as u64 + 12, b"\xff\x00");
        }
        let opened = Store::open_rw(&path, StoreOptions::new());
        (dir, path, opened)
    };
    let (_dir, path, store) = crashed(None);
    let store = store.unwrap();
    assert_eq!(all_ids(&store), [0, 1, 9, 3, 4, 5, 6, 7, 8]);
    assert!(store.verify().unwrap().is_ok());
    assert!(!path.join("journal.zr").exists());
    // Damage to a record left in place (5) and to the one moved (9): neither is certified.
    for id in [5, 9] {
        let (_dir, path, opened) = crashed(Some(id));
        let e = opened.unwrap_err();
        let Error::CorruptRecord { path: ref chunk, index: 0, ref reason, .. } = e else {
            panic!("{id}: {e}")
        };
        assert!(chunk.ends_with("0.zr") && reason.contains("damaged since the delete was planned"), "{e}");
        assert!(path.join("journal.zr").exists(), "the journal is kept");
        let bytes = std::fs::read(path.join("0.zr")).unwrap();
        assert_eq!(&bytes[2 * SIZE..3 * SIZE], fixed(2), "refused before the hole was written");
        let again = Store::open_rw(&path, StoreOptions::new()).unwrap_err();
        assert!(again.to_string().contains("damaged since"), "{again}");
    }
}

/// Look 98, L98-1: v2 → v1 → v2 left the v1 handle's 4 GiB as the index's chunk capacity, and
/// a fixed stride of that capacity put record `K` (the first of chunk 1) in chunk 0: the
/// migration to the fixed stride was refused, blaming a delete that never happened. The
/// capacity is told by the records now, and checked against every one of them.
#[test]
fn a_round_trip_through_v1_migrates_to_the_fixed_stride_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().chunk_capacity(CAPACITY)).unwrap();
    append_ids(&store, 0..260);
    drop(store);
    let fixed = Layout::Fixed { record_size: 0, block_records: 0 };
    Store::migrate_layout(&path, fixed, &|_, _| {}).unwrap();
    Store::migrate(&path, Format::V1, &|_, _| {}).unwrap();
    Store::migrate(&path, Format::V2, &|_, _| {}).unwrap();
    let r = Store::migrate_layout(&path, fixed, &|_, _| {}).unwrap();
    assert!(r.written);
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    assert!(matches!(store.layout(), Layout::Fixed { record_size: 40, .. }));
    // Appends go on where the stride puts them, every chunk as full as before.
    append_ids(&store, 260..300);
    assert_eq!(all_ids(&store), (0..300).collect::<Vec<_>>());
    assert!(store.verify().unwrap().is_ok());
    drop(store);
    let chunk0 = std::fs::metadata(path.join("0.zr")).unwrap().len();
    assert_eq!(chunk0, (CAPACITY / SIZE as u64) * SIZE as u64);
}

#[test]
fn migration_between_layouts_keeps_every_record_and_refuses_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    for format in [Format::V1, Format::V2] {
        let path = dir.path().join(format!("entries-{format}"));
        let store =
            Store::create(&path, StoreOptions::new().format(format).chunk_capacity(CAPACITY)).unwrap();
        append_ids(&store, 0..260);
        drop(store);
        let before =
            std::fs::metadata(path.join(if format == Format::V1 { "meta.zr" } else { "index.zr" })).unwrap();
        let r = Store::migrate_layout(&path, Layout::Fixed { record_size: 0, block_records: 0 }, &|_, _| {})
            .unwrap();
        assert_eq!((r.records, r.bytes_checked), (260, 260 * SIZE as u64));
        let store = Store::open(&path).unwrap();
        assert!(matches!(store.layout(), Layout::Fixed { record_size: 40, .. }), "{format}");
        assert_eq!(all_ids(&store), (0..260).collect::<Vec<_>>());
        assert!(store.verify().unwrap().is_ok());
        assert!(!path.join("meta.zr").exists());
        assert!(std::fs::metadata(path.join("index.zr")).unwrap().len() < before.len().min(64 + 32 * 260));
        drop(store);
        // And back: an entry per record, every checksum computed.
        Store::migrate_layout(&path, Layout::Entries, &|_, _| {}).unwrap();
        let store = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
        assert_eq!(store.layout(), Layout::Entries);
        assert_eq!(all_ids(&store), (0..260).collect::<Vec<_>>());
        assert!(store.verify().unwrap().is_ok());
    }
    // Records that are compressed, of two sizes, or moved by a delete stay where they are.
    type Change = Box<dyn Fn(&mut Store)>;
    let cases: [(&str, Change, &str); 4] = [
        (
            "zstd",
            Box::new(|s: &mut Store| {
                s.append(&[vec![7u8; SIZE]], Codec::Zstd).unwrap();
            }),
            "record 20 is zstd",
        ),
        (
            "sizes",
            Box::new(|s: &mut Store| {
                s.append(&[vec![7u8; SIZE + 1]], Codec::Raw).unwrap();
            }),
            "record 20 is 41 bytes",
        ),
        (
            "deleted",
            Box::new(|s: &mut Store| s.delete(&[2u64]).unwrap()),
            "record 2 lies at chunk 0 byte 760",
        ),
        ("tail", Box::new(|s: &mut Store| s.delete(&[19u64]).unwrap()), "compact it first"),
    ];
    for (name, damage, says) in cases {
        let path = dir.path().join(name);
        let mut store = Store::create(&path, StoreOptions::new().chunk_capacity(CAPACITY)).unwrap();
        append_ids(&store, 0..20);
        damage(&mut store);
        drop(store);
        let e = Store::migrate_layout(&path, Layout::Fixed { record_size: 40, block_records: 0 }, &|_, _| {})
            .unwrap_err();
        assert!(e.to_string().contains(says), "{name}: {e}");
        assert_eq!(Store::open(&path).unwrap().layout(), Layout::Entries);
    }
}

#[test]
fn converters_write_dense_raw_datasets_in_the_fixed_stride_and_the_rest_with_entries() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..3000).map(|i| i as f32 * 0.5).collect();
    let write = |name: &str, opts: WriteOptions| {
        let out = dir.path().join(name);
        let mut w = DatasetWriter::dense::<f32>(&out, vec![3], opts).unwrap();
        w.append(&values).unwrap();
        w.finish().unwrap();
        out
    };
    let fixed = write("fixed", WriteOptions::new().codec(Codec::Raw));
    let compact = write("compact", WriteOptions::new().codec(Codec::Raw).fixed_stride(false));
    let entries =
        write("entries", WriteOptions::new().codec(Codec::Raw).fixed_stride(false).compact_entries(false));
    let zstd = write("zstd", WriteOptions::new().codec(Codec::Zstd));
    let layout = |p: &Path| Store::open(p).unwrap().layout();
    assert_eq!(layout(&fixed), Layout::Fixed { record_size: 12, block_records: 341 });
    assert_eq!(layout(&compact), Layout::Compact);
    assert_eq!(layout(&entries), Layout::Entries);
    // Items of at most 40 bytes are stored raw whatever the codec (no frame and entry pay for
    // themselves there); larger zstd items keep an entry per record.
    assert_eq!(layout(&zstd), Layout::Fixed { record_size: 12, block_records: 341 });
    let wide = dir.path().join("wide");
    let mut w = DatasetWriter::dense::<f32>(&wide, vec![12], WriteOptions::new().codec(Codec::Zstd)).unwrap();
    w.append(&values).unwrap();
    w.finish().unwrap();
    assert_eq!(layout(&wide), Layout::Entries);
    for out in [&fixed, &compact, &entries, &zstd] {
        let ds = DenseDataset::<f32>::open(out).unwrap();
        assert_eq!(ds.len(), 1000);
        let mut got = vec![0f32; 6];
        ds.gather_into(&[999, 2], &mut got).unwrap();
        assert_eq!(got, [2997.0, 2998.0, 2999.0, 6.0, 7.0, 8.0].map(|x| x * 0.5));
    }
    let size = |p: &Path| std::fs::metadata(p.join("index.zr")).unwrap().len();
    assert!(size(&fixed) < 64 + 4 * 3 + 4096 && size(&entries) >= 64 + 32 * 1000);
    let _ = DType::F32;
}

#[test]
fn readers_verifying_blocks_never_see_damage_while_a_writer_extends_the_open_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    // Blocks of 102 records: most appends extend an open block.
    let store = std::sync::Arc::new(create(&path, 1 << 20));
    append_ids(&store, 0..1);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut next = 1u64;
            for k in 0..400u64 {
                let n = 1 + k % 7;
                append_ids(&store, next..next + n);
                next += n;
            }
            done.store(true, std::sync::atomic::Ordering::Release);
            next
        });
        for t in 0..2u64 {
            let path = path.clone();
            let done = &done;
            s.spawn(move || {
                let reader = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
                let mut reads = 0u64;
                while !done.load(std::sync::atomic::Ordering::Acquire) || reads < 50 {
                    let n = reader.len();
                    let last = n - 1;
                    let picks = [last, last.saturating_sub(1 + t), last / 2];
                    let mut out = vec![0u8; picks.len() * SIZE];
                    reader.gather_fixed(&picks, SIZE, &mut out).unwrap();
                    for (k, r) in out.chunks(SIZE).enumerate() {
                        assert_eq!(id_of(r), picks[k]);
                    }
                    reads += 1;
                }
            });
        }
        let total = writer.join().unwrap();
        assert_eq!(store.len(), total);
    });
    assert!(store.verify().unwrap().is_ok());
}

/// The layout is one option of one type: the shorthands set it (the last one wins), a block size
/// other than FORMAT.md's rule is refused before anything is created, and v1 has entries only.
#[test]
fn the_layout_is_one_typed_option() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(dir.path().join("a"), StoreOptions::new().compact_entries(true).fixed_stride(8))
        .unwrap();
    assert!(matches!(s.layout(), Layout::Fixed { record_size: 8, block_records: 512 }), "{:?}", s.layout());
    let s = Store::create(dir.path().join("b"), StoreOptions::new().layout(Layout::Compact)).unwrap();
    assert_eq!(s.layout(), Layout::Compact);
    let bad = StoreOptions::new().layout(Layout::Fixed { record_size: 8, block_records: 7 });
    let e = Store::create(dir.path().join("c"), bad).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("512")), "{e}");
    assert!(!dir.path().join("c").exists(), "refused before anything is created");
    let v1 = StoreOptions::new().format(Format::V1).layout(Layout::Compact);
    assert!(matches!(Store::create(dir.path().join("d"), v1), Err(Error::InvalidArgument(_))));
}

/// Every copy and hint a gather can be told to use gathers the same bytes, at record sizes past
/// the block copy's minimum and at destination offsets inside and past the near-copy window, in
/// one chunk (the hinted loop) and over many (the run loop).
#[test]
fn near_copies_and_hints_chosen_outright_gather_the_same_bytes() {
    use loaderx_core::NearCopy;
    let dir = tempfile::tempdir().unwrap();
    for (size, capacity) in [(1100usize, 1 << 30), (12_288, 1 << 30), (12_288, 5 * 12_288)] {
        let path = dir.path().join(format!("s{size}-{capacity}"));
        let opts = StoreOptions::new().chunk_capacity(capacity).fixed_stride(size as u32);
        let store = Store::create(&path, opts).unwrap();
        let recs: Vec<Vec<u8>> =
            (0..40u32).map(|i| (0..size).map(|j| (i as usize * 131 + j * 7) as u8).collect()).collect();
        store.append(&recs, Codec::Raw).unwrap();
        drop(store);
        let idx: Vec<u64> = (0..40u64).rev().chain([3, 4, 5, 17]).collect();
        let want: Vec<u8> = idx.iter().flat_map(|&i| recs[i as usize].clone()).collect();
        for near in [NearCopy::Measure, NearCopy::Memcpy, NearCopy::Blocks] {
            for below in [None, Some(0), Some(1 << 10), Some(64 << 10)] {
                let store =
                    Store::open_with(&path, StoreOptions::new().near_copy(near).hint_records_below(below))
                        .unwrap();
                // Destinations 0, 4, 16 and 100 bytes past an 8-byte boundary.
                for off in [0usize, 4, 16, 100] {
                    let mut buf = vec![0u8; want.len() + off];
                    store.gather_fixed(&idx, size, &mut buf[off..]).unwrap();
                    assert!(
                        buf[off..] == want[..],
                        "{size} B, {near:?}, hints below {below:?}, offset {off}"
                    );
                }
            }
        }
    }
}

/// Look 95 (F3): an empty store migrated to the fixed stride took a record size of 1 byte, made
/// up, and every later append of the dataset's items was refused. Refused, naming the store; a
/// size given is taken.
#[test]
fn an_empty_store_is_not_given_a_made_up_record_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    drop(Store::create(&path, StoreOptions::new()).unwrap());
    let e = Store::migrate_layout(&path, Layout::Fixed { record_size: 0, block_records: 0 }, &|_, _| {})
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("an empty store has no record size")),
        "{e}"
    );
    assert_eq!(Store::open(&path).unwrap().layout(), Layout::Entries);
    Store::migrate_layout(&path, Layout::Fixed { record_size: 784, block_records: 0 }, &|_, _| {}).unwrap();
    let store = Store::open_rw(&path, StoreOptions::new()).unwrap();
    store.append(&[vec![3u8; 784]], Codec::Raw).unwrap();
    assert!(matches!(store.layout(), Layout::Fixed { record_size: 784, .. }));
}
