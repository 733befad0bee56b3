//! The compact layout (`StoreOptions::compact_entries`): a 16-byte entry per raw record of any
//! size. Round trips over chunks, the index's size, refusals, damage to records and to entries
//! found by `verify` and `verify_reads`, delete and compaction against a model, migration in
//! every direction, the converters' choice of it, and ragged datasets through the loader.

use std::path::Path;

use loaderx_core::{
    Codec, DataLoader, DatasetWriter, Error, Format, Layout, RaggedDataset, Store, StoreOptions, WriteOptions,
};

use crate::common::{patch, record};

/// Record `id`: its id, then `id % 97` bytes derived from it (0 to 96 after the id: records of
/// many sizes, some of 8 bytes).
fn varied(id: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend((0..id % 97).map(|j| (id * 31 + j * 7) as u8));
    r
}

fn id_of(bytes: &[u8]) -> u64 {
    let id = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(bytes, varied(id), "record with id {id} is not intact");
    id
}

fn create(path: &Path, capacity: u64) -> Store {
    Store::create(path, StoreOptions::new().chunk_capacity(capacity).compact_entries(true)).unwrap()
}

fn append_ids(store: &Store, ids: impl Iterator<Item = u64>) {
    let recs: Vec<Vec<u8>> = ids.map(varied).collect();
    store.append(&recs, Codec::Raw).unwrap();
}

fn all_ids(store: &Store) -> Vec<u64> {
    let n = store.len();
    store.gather(&(0..n).collect::<Vec<_>>()).unwrap().iter().map(|r| id_of(r)).collect()
}

#[test]
fn records_of_any_size_round_trip_over_chunks_with_sixteen_bytes_of_index_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, 2000);
    for (a, b) in [(0, 1), (1, 40), (40, 41), (41, 700)] {
        append_ids(&store, a..b);
    }
    assert_eq!(store.layout(), Layout::Compact);
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!((store.len(), store.layout()), (700, Layout::Compact));
    assert_eq!(all_ids(&store), (0..700).collect::<Vec<_>>());
    assert!(path.join("10.zr").exists(), "the records span many chunks");
    let picks = [699u64, 0, 97, 96, 350, 350, 1];
    let got: Vec<u64> = store.gather(&picks).unwrap().iter().map(|r| id_of(r)).collect();
    assert_eq!(got, picks);
    // Records of one size gathered into one buffer (ids 97 apart have the same length).
    let same = [5u64, 102, 199, 296];
    let mut out = vec![0u8; 4 * 13];
    store.gather_fixed(&same, 13, &mut out).unwrap();
    assert_eq!(out.chunks(13).map(id_of).collect::<Vec<_>>(), same);
    assert!(matches!(
        store.gather_fixed(&[5u64, 6], 13, &mut out[..26]),
        Err(Error::CorruptRecord { index: 6, .. })
    ));
    assert!(matches!(store.gather(&[700u64]), Err(Error::IndexOutOfRange { index: 700, .. })));
    let v = store.verify().unwrap();
    assert!(v.is_ok(), "{:?}", v.bad.first());
    assert_eq!(v.checked, 700);
    assert!(store.verify_files().unwrap().is_empty());
    let verified = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
    assert_eq!(all_ids(&verified), (0..700).collect::<Vec<_>>());

    // 100,000 records: the index is the header and 16 bytes a record (grown in steps).
    let big = create(&dir.path().join("big"), 1 << 30);
    big.append(&(0..100_000u64).map(|i| vec![i as u8; (i % 50) as usize]).collect::<Vec<_>>(), Codec::Raw)
        .unwrap();
    let s = big.summary().unwrap();
    assert!(s.index_bytes >= 64 + 16 * 100_000, "{}", s.index_bytes);
    let entries = Store::create(dir.path().join("entries"), StoreOptions::new()).unwrap();
    entries
        .append(&(0..100_000u64).map(|i| vec![i as u8; (i % 50) as usize]).collect::<Vec<_>>(), Codec::Raw)
        .unwrap();
    assert_eq!(
        entries.summary().unwrap().index_bytes - 64,
        2 * (s.index_bytes - 64),
        "half the entry layout's"
    );
}

#[test]
fn compressed_records_and_dictionaries_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, 1 << 20);
    append_ids(&store, 0..10);
    for codec in [Codec::Zstd, Codec::Lz4] {
        let e = store.append(&[varied(10)], codec).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("compact store of raw records")), "{e}");
    }
    assert!(matches!(
        store.train_dictionary(&(0..500).map(record).collect::<Vec<_>>()),
        Err(Error::InvalidArgument(m)) if m.contains("is a compact store of raw records: it has no dictionary")
    ));
    assert_eq!(all_ids(&store), (0..10).collect::<Vec<_>>());
    for opts in [
        StoreOptions::new().format(Format::V1).compact_entries(true),
        // (The layout is one option since it became a type: compact then fixed is fixed, the
        // last setter's; what is left to refuse in it is a block size off FORMAT.md's rule.)
        StoreOptions::new().layout(loaderx_core::Layout::Fixed { record_size: 8, block_records: 7 }),
        StoreOptions::new().compact_entries(true).chunk_capacity((1 << 40) + 1),
    ] {
        assert!(matches!(Store::create(dir.path().join("x"), opts), Err(Error::InvalidArgument(_))));
        assert!(!dir.path().join("x").join("index.zr").exists());
    }
}

#[test]
fn damage_to_a_record_or_to_its_entry_is_found_by_verify_and_by_verified_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, 1 << 20);
    append_ids(&store, 0..300);
    let e = |i: u64| -> (u64, u32) {
        let idx = std::fs::read(path.join("index.zr")).unwrap();
        let at = 64 + 16 * i as usize;
        let offset =
            u64::from_le_bytes([idx[at], idx[at + 1], idx[at + 2], idx[at + 3], idx[at + 4], 0, 0, 0]);
        (offset, u32::from_le_bytes(idx[at + 8..at + 12].try_into().unwrap()))
    };
    drop(store);
    // A record's byte flipped: that record only.
    let (offset, len) = e(150);
    assert_eq!(len as usize, varied(150).len());
    let chunk = path.join("0.zr");
    let was = std::fs::read(&chunk).unwrap()[offset as usize + 3];
    patch(&chunk, offset + 3, &[was ^ 0x20]);
    let v = Store::open(&path).unwrap().verify().unwrap();
    assert_eq!(v.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [150]);
    let verified = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
    assert!(matches!(verified.gather(&[3u64, 150]), Err(Error::CorruptRecord { index: 150, .. })));
    assert_eq!(id_of(&verified.gather(&[151u64]).unwrap()[0]), 151);
    assert!(
        Store::open(&path).unwrap().gather(&[150u64]).unwrap()[0] != varied(150),
        "unverified reads copy"
    );
    patch(&chunk, offset + 3, &[was]);
    // Each field of an entry damaged in turn (its offset, chunk, length and checksum): no entry
    // checksum of its own, but the record's, over the bytes it points at, finds each.
    let idx_path = path.join("index.zr");
    let original = std::fs::read(&idx_path).unwrap();
    for byte in [0usize, 5, 8, 12] {
        let at = 64 + 16 * 200 + byte;
        patch(&idx_path, at as u64, &[original[at] ^ 0x01]);
        let store = Store::open(&path).unwrap();
        let bad: Vec<u64> = store.verify().unwrap().bad.iter().map(|(i, _)| *i).collect();
        assert_eq!(bad, [200], "a flip at byte {byte} of entry 200");
        let verified = Store::open_with(&path, StoreOptions::new().verify_reads(true)).unwrap();
        assert!(
            matches!(verified.gather(&[200u64]), Err(Error::CorruptRecord { index: 200, .. })),
            "byte {byte}"
        );
        patch(&idx_path, at as u64, &[original[at]]);
    }
    // An entry pointing past its chunk, even unverified: an error naming the record.
    let at = 64 + 16 * 7 + 5;
    patch(&idx_path, at as u64, &[9]);
    let e = Store::open(&path).unwrap().gather(&[7u64]).unwrap_err();
    assert!(matches!(e, Error::CorruptRecord { index: 7, .. }), "{e}");
    patch(&idx_path, at as u64, &[original[at]]);
    assert!(Store::open(&path).unwrap().verify().unwrap().is_ok());
}

#[test]
fn delete_and_compaction_keep_the_live_records_as_a_model_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = create(&path, 3000);
    append_ids(&store, 0..500);
    drop(store);
    let mut rw = Store::open_rw(&path, StoreOptions::new()).unwrap();
    let mut model: Vec<u64> = (0..500).collect();
    for del in [vec![0u64, 499, 250], vec![10, 11, 12, 13, 100], vec![3]] {
        rw.delete(&del).unwrap();
        // The model of delete: each hole, largest first, takes the current last record.
        let mut holes = del.clone();
        holes.sort_unstable_by(|a, b| b.cmp(a));
        for h in holes {
            let last = model.pop().unwrap();
            if (h as usize) < model.len() {
                model[h as usize] = last;
            }
        }
        assert_eq!(all_ids(&rw), model);
    }
    let report = rw.compact().unwrap();
    assert!(report.moved > 0 || report.skipped > 0);
    assert_eq!(all_ids(&rw), model);
    assert_eq!(rw.layout(), Layout::Compact);
    append_ids(&rw, 1000..1010);
    model.extend(1000..1010);
    assert_eq!(all_ids(&rw), model);
    drop(rw);
    let store = Store::open(&path).unwrap();
    assert!(store.verify().unwrap().is_ok());
    assert!(store.verify_files().unwrap().is_empty());
    assert_eq!(all_ids(&store), model);
}

#[test]
fn migration_goes_every_way_and_refuses_compressed_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, StoreOptions::new().chunk_capacity(4000)).unwrap();
    append_ids(&store, 0..400);
    drop(store);
    let none = |_: u64, _: u64| {};
    // entries → compact → entries → v1 → compact, every record intact after each.
    for (to, layout) in [
        (Layout::Compact, Layout::Compact),
        (Layout::Compact, Layout::Compact),
        (Layout::Entries, Layout::Entries),
    ] {
        Store::migrate_layout(&path, to, &none).unwrap();
        let s = Store::open(&path).unwrap();
        assert_eq!(s.layout(), layout);
        assert_eq!(all_ids(&s), (0..400).collect::<Vec<_>>());
        assert!(s.verify().unwrap().is_ok());
    }
    Store::migrate(&path, Format::V1, &none).unwrap();
    Store::migrate_layout(&path, Layout::Compact, &none).unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!((s.format(), s.layout()), (Format::V2, Layout::Compact));
    assert_eq!(all_ids(&s), (0..400).collect::<Vec<_>>());
    assert!(s.verify().unwrap().is_ok() && s.verify_files().unwrap().is_empty());
    drop(s);
    // compact → fixed (records of one size) → compact.
    let one = dir.path().join("one");
    let store = create(&one, 1 << 20);
    store.append(&(0..100u32).map(|i| i.to_le_bytes()).collect::<Vec<_>>(), Codec::Raw).unwrap();
    drop(store);
    Store::migrate_layout(&one, Layout::Fixed { record_size: 0, block_records: 0 }, &none).unwrap();
    assert!(matches!(Store::open(&one).unwrap().layout(), Layout::Fixed { record_size: 4, .. }));
    Store::migrate_layout(&one, Layout::Compact, &none).unwrap();
    let s = Store::open(&one).unwrap();
    assert_eq!(s.layout(), Layout::Compact);
    let got: Vec<u32> = s
        .gather(&(0..100u64).collect::<Vec<_>>())
        .unwrap()
        .iter()
        .map(|r| u32::from_le_bytes(r[..4].try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    // Look 126, L126-2: empty records are refused as empty, not as too large for the chunks.
    let empty = dir.path().join("empty");
    let store = create(&empty, 4096);
    store.append(&vec![Vec::<u8>::new(); 5], Codec::Raw).unwrap();
    drop(store);
    let e =
        Store::migrate_layout(&empty, Layout::Fixed { record_size: 0, block_records: 0 }, &none).unwrap_err();
    assert!(e.to_string().contains("its records are empty"), "{e}");
    // A store with a compressed record is refused by name, and left as it was.
    let mixed = dir.path().join("mixed");
    let store = Store::create(&mixed, StoreOptions::new()).unwrap();
    append_ids(&store, 0..20);
    store.append(&[vec![7u8; 1000]], Codec::Zstd).unwrap();
    drop(store);
    let before = std::fs::read(mixed.join("index.zr")).unwrap();
    let e = Store::migrate_layout(&mixed, Layout::Compact, &none).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("record 20") && m.contains("raw records only")),
        "{e}"
    );
    assert_eq!(std::fs::read(mixed.join("index.zr")).unwrap(), before);
}

#[test]
fn converters_write_ragged_raw_datasets_compact_and_the_loader_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let seqs: Vec<Vec<i32>> = (0..3000i32).map(|i| (0..i % 23).map(|j| i * 100 + j).collect()).collect();
    let write = |name: &str, opts: WriteOptions| {
        let p = dir.path().join(name);
        let mut w = DatasetWriter::ragged::<i32>(&p, vec![], opts).unwrap();
        for s in &seqs {
            w.append_record(s).unwrap();
        }
        w.finish().unwrap();
        p
    };
    let raw = write("raw", WriteOptions::new().codec(Codec::Raw));
    let entries = write("entries", WriteOptions::new().codec(Codec::Raw).compact_entries(false));
    let zstd = write("zstd", WriteOptions::new().codec(Codec::Zstd));
    assert_eq!(Store::open(&raw).unwrap().layout(), Layout::Compact);
    // A finished dataset's index holds exactly its entries: 16 bytes a record (32 with entries).
    let index_len = |p: &Path| std::fs::metadata(p.join("index.zr")).unwrap().len();
    assert_eq!((index_len(&raw), index_len(&entries)), (64 + 16 * 3000, 64 + 32 * 3000));
    assert_eq!(Store::open(&entries).unwrap().layout(), Layout::Entries);
    assert_eq!(Store::open(&zstd).unwrap().layout(), Layout::Entries);
    let ds = RaggedDataset::<i32>::open(&raw).unwrap();
    let idx: Vec<u32> = (0..3000u32).rev().step_by(7).collect();
    let got = ds.get_batch(&idx).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(got[k], seqs[i as usize]);
    }
    // The loader over the compact dataset: every record of 20 batches as written.
    let mut l = DataLoader::builder().open_stream("t", &raw).batch_size(64).seed(5).build().unwrap();
    for _ in 0..20 {
        let b = l.next_batch().unwrap().unwrap();
        let r = b.get_ragged("t").unwrap();
        for (k, &i) in b.indices().iter().enumerate() {
            assert_eq!(r.record::<i32>(k).unwrap(), seqs[i as usize], "record {i}");
        }
    }
}

/// Look 97, F97-1: `compact` left `index.zr` at the size deletes left it (a store of 200,000
/// records deleted down to 1,000 kept 6.4 MB). Compaction now cuts the index to the entries (or
/// the blocks' checksums) its count needs, in every v2 layout; the store reads, verifies and
/// takes appends after, reopened or not.
#[test]
fn compaction_cuts_the_index_down_to_the_records_left() {
    let dir = tempfile::tempdir().unwrap();
    type Case = (&'static str, StoreOptions, usize, fn(u64) -> Vec<u8>);
    let layouts: [Case; 3] = [
        ("entries", StoreOptions::new(), 32, varied),
        ("compact", StoreOptions::new().compact_entries(true), 16, varied),
        ("fixed", StoreOptions::new().fixed_stride(16), 4, |id| {
            [id.to_le_bytes(), (!id).to_le_bytes()].concat()
        }),
    ];
    for (name, opts, elem, make) in layouts {
        let path = dir.path().join(name);
        let mut store = Store::create(&path, opts).unwrap();
        store.append(&(0..5000).map(make).collect::<Vec<_>>(), Codec::Raw).unwrap();
        let index = || std::fs::metadata(path.join("index.zr")).unwrap().len();
        let grown = index();
        // The last 4,900 deleted (each delete of the tail moves nothing), then compaction.
        store.delete(&(100..5000).collect::<Vec<u64>>()).unwrap();
        assert_eq!(index(), grown, "{name}: a delete keeps the index's size");
        store.compact().unwrap();
        // 100 records: 100 entries, or 1 block of 256 16-byte records' checksum.
        let want = 64 + if name == "fixed" { elem as u64 } else { 100 * elem as u64 };
        assert!(grown > 10 * want, "{name}: {grown}");
        assert_eq!(index(), want, "{name}");
        assert_eq!(store.stats().unwrap().index_bytes, want, "{name}");
        let read = |s: &Store| s.gather(&(0..s.len()).collect::<Vec<_>>()).unwrap();
        assert_eq!(read(&store), (0..100).map(make).collect::<Vec<_>>(), "{name}");
        store.append(&(100..400).map(make).collect::<Vec<_>>(), Codec::Raw).unwrap();
        assert!(store.verify().unwrap().is_ok(), "{name}");
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(read(&store), (0..400).map(make).collect::<Vec<_>>(), "{name}");
        assert!(store.verify().unwrap().is_ok(), "{name}");
    }
}
