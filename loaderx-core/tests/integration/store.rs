//! The Zrecord store: round trips, fixed-stride gathers, delete, readers beside a writer, the
//! store's limits and chunk rollover, in both formats. Compaction: `store_compaction.rs`;
//! damaged stores and failed writes: `store_corruption.rs`; dictionaries: `store_dict.rs`;
//! crashes: `crash.rs`; what only v2 has: `v2.rs`.

use std::path::Path;

use loaderx_core::{Codec, Error, Format, MAX_RECORD_SIZE, MAX_RECORDS, Store};
use proptest::prelude::*;

use crate::common::{FORMATS, check_record, opts, patch, record};

pub(crate) fn create(dir: &Path, format: Format) -> Store {
    Store::create(dir.join("s"), opts(format)).unwrap()
}

pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub(crate) fn codec_strategy() -> impl Strategy<Value = Codec> {
    prop::sample::select(Codec::ALL.to_vec())
}

fn record_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..2000),
        (1usize..5000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        (0usize..4000, any::<u64>()).prop_map(|(n, s)| {
            let mut v = format!("{{\"id\":{s},\"text\":\"").into_bytes();
            v.extend(std::iter::repeat_n(b"abcab"[(s % 5) as usize], n));
            v
        }),
    ]
}

/// A store of 200 records (`common::record`) in `codec`, at `dir/s`.
pub(crate) fn sample_store(dir: &Path, codec: Codec, format: Format) -> std::path::PathBuf {
    let path = dir.join("s");
    let store = Store::create(&path, opts(format)).unwrap();
    crate::common::append(&store, &(0..200).map(record).collect::<Vec<_>>(), codec);
    path
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn append_then_gather_round_trips(
        batches in proptest::collection::vec((proptest::collection::vec(record_strategy(), 0..60), codec_strategy()), 1..4),
        seed in any::<u64>(),
        v2 in any::<bool>(),
    ) {
        let format = if v2 { Format::V2 } else { Format::V1 };
        let dir = tempfile::tempdir().unwrap();
        // Small chunks so rollover happens within the test.
        let store = Store::create(dir.path().join("s"), opts(format).chunk_capacity(64 << 10)).unwrap();
        let mut all: Vec<Vec<u8>> = Vec::new();
        for (records, codec) in &batches {
            // LZ4 is a v2 codec: a v1 store refuses it whole.
            let codec = &if *codec == Codec::Lz4 && format == Format::V1 {
                prop_assert!(matches!(store.append(records, Codec::Lz4), Err(Error::InvalidArgument(_))));
                Codec::Zstd
            } else {
                *codec
            };
            if *codec == Codec::ZstdDict && !store.has_dictionary() {
                // Training is explicit: without a dictionary the batch is refused whole.
                let refused = store.append(records, *codec);
                prop_assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{:?}", refused);
                prop_assert_eq!(store.len() as usize, all.len());
                if !store.train_dictionary(records).unwrap() {
                    continue;
                }
            }
            let range = store.append(records, *codec).unwrap();
            prop_assert_eq!(range.start as usize, all.len());
            all.extend(records.iter().cloned());
        }
        prop_assert_eq!(store.len() as usize, all.len());
        let mut order: Vec<u32> = (0..all.len() as u32).collect();
        let mut x = seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let got = store.gather(&order).unwrap();
        for (k, &i) in order.iter().enumerate() {
            prop_assert_eq!(&got[k], &all[i as usize]);
        }
        let mut flat = vec![0u8; order.iter().map(|&i| all[i as usize].len()).sum()];
        store.gather_into(&order, &mut flat).unwrap();
        prop_assert_eq!(flat, order.iter().flat_map(|&i| all[i as usize].clone()).collect::<Vec<u8>>());
        // In place: every record once, at its position, whatever the split over threads.
        let mapped = store.map_records(&order, |k, bytes| Ok::<_, Error>((k, bytes.to_vec()))).unwrap();
        prop_assert_eq!(mapped.len(), order.len());
        for (k, (pos, bytes)) in mapped.iter().enumerate() {
            prop_assert_eq!(*pos, k);
            prop_assert_eq!(bytes, &all[order[k] as usize]);
        }
        drop(store);
        let reopened = Store::open(dir.path().join("s")).unwrap();
        prop_assert_eq!(reopened.gather(&order).unwrap(), got);
        prop_assert!(reopened.verify().unwrap().bad.is_empty());
    }
}

#[test]
fn records_of_exactly_one_mib_round_trip_in_every_codec() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), format);
    let recs =
        vec![noise(MAX_RECORD_SIZE, 7), vec![3u8; MAX_RECORD_SIZE], Vec::new(), noise(MAX_RECORD_SIZE, 9)];
    for &codec in format.codecs() {
        let r = crate::common::append(&store, &recs, codec);
        let idx: Vec<u64> = r.rev().collect();
        let got = store.gather(&idx).unwrap();
        let want: Vec<Vec<u8>> = recs.iter().rev().cloned().collect();
        assert_eq!(got, want, "codec {codec}");
    }
    let s = store.stats().unwrap();
    assert_eq!(s.length, 12);
    assert!(s.codecs[Codec::Raw] >= 6, "incompressible and empty records are stored raw: {s:?}");
}

#[test]
fn record_over_one_mib_is_refused_in_v1_and_nothing_is_written() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), format);
    let recs = vec![vec![1u8; 10], vec![0u8; MAX_RECORD_SIZE + 1]];
    match store.append(&recs, Codec::Zstd) {
        Err(Error::RecordTooLarge { index: 1, size, .. }) => assert_eq!(size as usize, MAX_RECORD_SIZE + 1),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert_eq!(store.len(), 0);
}

#[test]
fn gather_fixed_fills_a_stride_and_rejects_other_sizes() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        let recs: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 12]).collect();
        store.append(&recs, Codec::Zstd).unwrap();
        let mut dst = vec![0u8; 36];
        store.gather_fixed(&[9, 0, 4], 12, &mut dst).unwrap();
        assert_eq!(&dst[..12], &[9u8; 12]);
        assert_eq!(&dst[24..], &[4u8; 12]);
        store.append(&[vec![1u8; 5]], Codec::Raw).unwrap();
        match store.gather_fixed(&[0, 10, 1], 12, &mut dst) {
            Err(Error::CorruptRecord { index: 10, .. }) => {}
            other => panic!("expected CorruptRecord for index 10, got {other:?}"),
        }
        assert!(matches!(store.gather_fixed(&[0], 12, &mut dst), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn index_out_of_range_names_the_index() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        store.append(&[b"a"], Codec::Raw).unwrap();
        match store.gather(&[0, 1]) {
            Err(Error::IndexOutOfRange { index: 1, len: 1, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn delete_swaps_the_tail_in_descending_order() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let mut store = create(dir.path(), format);
        let recs: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 3]).collect();
        store.append(&recs, Codec::Raw).unwrap();
        // [a b c d e f g h] delete {1, 6, 3, 6}: descending 6 -> [a b c d e f h], 3 -> [a b c h e f],
        // 1 -> [a f c h e].
        store.delete(&[1, 6, 3, 6]).unwrap();
        let got: Vec<u8> =
            store.gather(&(0..store.len()).collect::<Vec<_>>()).unwrap().iter().map(|r| r[0]).collect();
        assert_eq!(got, b"afche");
        assert!(matches!(store.delete(&[5]), Err(Error::IndexOutOfRange { index: 5, len: 5, .. })));
        drop(store);
        let reopened = Store::open(dir.path().join("s")).unwrap();
        assert_eq!(reopened.len(), 5);
        assert_eq!(reopened.get(1).unwrap(), b"fff");
    }
}

#[test]
fn one_writer_many_readers() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut w = Store::create(&path, opts(format)).unwrap();
        assert!(matches!(Store::open_rw(&path, opts(format)), Err(Error::Locked { .. })));
        let r = Store::open(&path).unwrap();
        w.append(&[b"x"], Codec::Raw).unwrap();
        assert_eq!(r.len(), 1, "readers see committed appends");
        assert!(matches!(r.append(&[b"y"], Codec::Raw), Err(Error::ReadOnly { .. })));
        assert!(matches!(w.delete(&[0]), Err(Error::Locked { .. })), "delete needs the store exclusively");
        drop(r);
        w.delete(&[0]).unwrap();
        assert_eq!(w.len(), 0);
    }
}

/// Regression: a reader opened before the writer's first `zstd_dict` append loaded no dictionary
/// at open and failed every dictionary record with `MissingDictionary` (found by the
/// cross-process concurrency test in `crash.rs`).
#[test]
fn reader_opened_before_the_dictionary_was_trained_reads_dictionary_records() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let w = Store::create(&path, opts(format)).unwrap();
        w.append(&(0..10).map(record).collect::<Vec<_>>(), Codec::Raw).unwrap();
        let r = Store::open(&path).unwrap();
        assert!(!r.has_dictionary());
        let batch: Vec<Vec<u8>> = (10..300).map(record).collect();
        assert!(w.train_dictionary(&batch).unwrap());
        w.append(&batch, Codec::ZstdDict).unwrap();
        assert!(w.stats().unwrap().codecs[Codec::ZstdDict] > 0, "the batch was stored against a dictionary");
        for (i, rec) in r.gather(&(0..300).collect::<Vec<_>>()).unwrap().iter().enumerate() {
            assert_eq!(check_record(rec), Some(i as u64));
        }
        assert!(r.has_dictionary());
        assert!(r.verify().unwrap().bad.is_empty());
    }
}

#[test]
fn concurrent_gather_during_append_sees_only_intact_records() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        store.append(&(0..64).map(record).collect::<Vec<_>>(), Codec::Zstd).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                for b in 1..40u64 {
                    let recs: Vec<Vec<u8>> = (b * 64..(b + 1) * 64).map(record).collect();
                    store.append(&recs, if b % 2 == 0 { Codec::Zstd } else { Codec::Raw }).unwrap();
                }
            });
            for t in 0..2u64 {
                let store = &store;
                s.spawn(move || {
                    let mut x = 0x1234_5678u64 + t;
                    for _ in 0..300 {
                        let n = store.len();
                        let idx: Vec<u64> = (0..64)
                            .map(|_| {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                x % n
                            })
                            .collect();
                        for (k, r) in store.gather(&idx).unwrap().iter().enumerate() {
                            assert_eq!(check_record(r), Some(idx[k]), "record {} torn", idx[k]);
                        }
                    }
                });
            }
        });
        assert_eq!(store.len(), 40 * 64);
    }
}

#[test]
fn store_full_is_refused_before_writing() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, opts(format)).unwrap());
    // Claim MAX - 1 (empty, raw) records: the zero-filled sparse table is exactly that.
    patch(&path.join("meta.zr"), 12, &(MAX_RECORDS - 1).to_ne_bytes());
    let store = Store::open_rw(&path, opts(format)).unwrap();
    assert_eq!(store.get(u64::from(MAX_RECORDS - 2)).unwrap(), b"");
    match store.append(&[b"a".as_slice(), b"b"], Codec::Raw) {
        Err(Error::StoreFull { len, adding: 2, .. }) => assert_eq!(len, u64::from(MAX_RECORDS - 1)),
        other => panic!("{other:?}"),
    }
    store.append(&[b"last"], Codec::Raw).unwrap();
    assert_eq!(store.len(), u64::from(MAX_RECORDS));
    assert_eq!(store.get(u64::from(MAX_RECORDS - 1)).unwrap(), b"last");
}

/// Byte offset in meta.zr of the header's `tail_offset` field.
const TAIL_OFFSET_AT: u64 = 8;

/// Regression: an append that ended exactly at byte 2^32 of a chunk stored the frontier as
/// offset 0 of the same chunk, so the next append overwrote record 0 and the next writable open
/// truncated the chunk. The 4 GiB chunk is a sparse file: only its first and last pages hold data.
#[test]
fn append_ending_exactly_at_4_gib_rolls_over_and_loses_nothing() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, opts(format)).unwrap();
    store.append(&[record(0)], Codec::Raw).unwrap();
    drop(store);
    // Move the frontier to 1 KiB before the end of chunk 0 without writing the bytes between.
    let edge = (1u64 << 32) - 1024;
    std::fs::OpenOptions::new().write(true).open(path.join("0.zr")).unwrap().set_len(edge).unwrap();
    patch(&path.join("meta.zr"), TAIL_OFFSET_AT, &u32::try_from(edge).unwrap().to_ne_bytes());
    let store = Store::open_rw(&path, opts(format)).unwrap();
    let last = vec![0xA7u8; 1024];
    assert_eq!(store.append(std::slice::from_ref(&last), Codec::Raw).unwrap(), 1..2);
    assert_eq!(store.stats().unwrap().chunks, 2, "a frontier at exactly 4 GiB rolls to the next chunk");
    store.append(&[record(2)], Codec::Raw).unwrap();
    drop(store);
    let store = Store::open_rw(&path, opts(format)).unwrap();
    assert_eq!(std::fs::metadata(path.join("0.zr")).unwrap().len(), 1 << 32, "reopening truncated nothing");
    assert_eq!(check_record(&store.get(0).unwrap()), Some(0));
    assert_eq!(store.get(1).unwrap(), last);
    assert_eq!(check_record(&store.get(2).unwrap()), Some(2));
    assert!(store.verify().unwrap().bad.is_empty());
}

/// The same placement rule at a small chunk capacity, in append and in compaction: a frontier
/// exactly at the capacity starts the next chunk.
#[test]
fn a_frontier_exactly_at_the_chunk_capacity_rolls_over_in_append_and_compact() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let opts = opts(format).chunk_capacity(4096);
        let mut store = Store::create(&path, opts.clone()).unwrap();
        let recs: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 1024]).collect();
        store.append(&recs[..4], Codec::Raw).unwrap();
        assert_eq!(store.stats().unwrap().chunks, 2);
        assert_eq!(std::fs::metadata(path.join("1.zr")).unwrap().len(), 0);
        store.append(&recs[4..], Codec::Raw).unwrap();
        assert_eq!(std::fs::metadata(path.join("1.zr")).unwrap().len(), 2048);
        // Four records of 1 KiB stay: compaction packs them into exactly one 4 KiB chunk.
        store.delete(&[0, 1]).unwrap();
        let report = store.compact().unwrap();
        assert_eq!(report.bytes_after, 4096);
        assert_eq!(store.stats().unwrap().chunks, 2, "the packed frontier sits at the start of chunk 1");
        store.append(&[vec![9u8; 100]], Codec::Raw).unwrap();
        drop(store);
        let store = Store::open_rw(&path, opts).unwrap();
        let mut got = store.gather(&(0..5).collect::<Vec<_>>()).unwrap();
        got.sort();
        let mut want =
            vec![recs[2].clone(), recs[3].clone(), recs[4].clone(), recs[5].clone(), vec![9u8; 100]];
        want.sort();
        assert_eq!(got, want);
        assert!(store.verify().unwrap().bad.is_empty());
    }
}

/// A closed writer leaves no `write.lock` behind, whatever it did (append, compact).
#[test]
fn closing_a_writer_leaves_no_lock_file() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts(format)).unwrap();
        assert!(path.join("write.lock").exists(), "the lock is held while the writer is open");
        store.append(&(0..50).map(record).collect::<Vec<_>>(), Codec::Zstd).unwrap();
        store.delete(&[3, 7]).unwrap();
        store.compact().unwrap();
        drop(store);
        assert!(!path.join("write.lock").exists());
        let store = Store::open_rw(&path, opts(format)).unwrap();
        assert!(matches!(Store::open_rw(&path, opts(format)), Err(Error::Locked { .. })));
        drop(store);
        assert!(!path.join("write.lock").exists());
        let names: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".zr")), "{names:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The fixed-stride gather (entries and records pipelined a block at a time, adjacent raw
    /// records copied as one run) gives exactly what the plain gather gives, for any mix of
    /// codecs, chunk boundaries, batch lengths around the block size and index orders (random,
    /// sequential runs, repeats).
    #[test]
    fn fixed_gather_equals_the_plain_gather(
        rec in prop_oneof![Just(0usize), 1usize..64, Just(784usize), Just(4096usize)],
        n in 1u32..300,
        codecs in proptest::collection::vec(codec_strategy(), 1..4),
        order in proptest::collection::vec((any::<u32>(), 0u32..40), 0..120),
        cap_kib in 1u64..64,
        v2 in any::<bool>(),
    ) {
        let format = if v2 { Format::V2 } else { Format::V1 };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s"), opts(format).chunk_capacity(cap_kib << 10)).unwrap();
        let records: Vec<Vec<u8>> = (0..n).map(|i| {
            let mut r = record(u64::from(i));
            r.resize(rec, (i % 7) as u8);
            r
        }).collect();
        let per = (n as usize).div_ceil(codecs.len());
        for (part, codec) in records.chunks(per).zip(&codecs) {
            let codec = if format.has_codec(*codec) { *codec } else { Codec::Zstd };
            crate::common::append(&store, part, codec);
        }
        // Random starts with sequential runs after each.
        let indices: Vec<u32> = order.iter().flat_map(|&(s, run)| (0..run.min(5)).map(move |d| (s % n + d) % n)).collect();
        let want: Vec<u8> = store.gather(&indices).unwrap().concat();
        let mut got = vec![0xAAu8; indices.len() * rec];
        store.gather_fixed(&indices, rec, &mut got).unwrap();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn fixed_gather_names_the_first_bad_index_or_record_wherever_it_sits() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        let recs: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 64]).collect();
        store.append(&recs, Codec::Raw).unwrap();
        store.append(&[vec![1u8; 65]], Codec::Raw).unwrap();
        for at in [0usize, 1, 15, 16, 17, 31, 32, 33, 70] {
            let mut idx: Vec<u32> = (0..80).map(|i| i % 100).collect();
            idx[at] = 5000;
            let mut dst = vec![0u8; 80 * 64];
            match store.gather_fixed(&idx, 64, &mut dst) {
                Err(Error::IndexOutOfRange { index: 5000, len: 101, .. }) => {}
                other => panic!("at {at}: {other:?}"),
            }
            idx[at] = 100;
            match store.gather_fixed(&idx, 64, &mut dst) {
                Err(Error::CorruptRecord { index: 100, reason, .. }) => {
                    assert!(reason.contains("65 bytes"), "{reason}")
                }
                other => panic!("at {at}: {other:?}"),
            }
        }
    }
}

/// The fixed-stride gather loads a dictionary trained after the reader opened, as the plain one.
#[test]
fn fixed_gather_of_a_reader_opened_before_the_dictionary_loads_it() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let w = Store::create(&path, opts(format)).unwrap();
        let fixed = |i: u64| {
            let mut r = record(i);
            r.resize(512, b'x');
            r
        };
        w.append(&(0..10).map(fixed).collect::<Vec<_>>(), Codec::Zstd).unwrap();
        let r = Store::open(&path).unwrap();
        let batch: Vec<Vec<u8>> = (10..300).map(fixed).collect();
        assert!(w.train_dictionary(&batch).unwrap());
        w.append(&batch, Codec::ZstdDict).unwrap();
        assert!(!r.has_dictionary());
        let idx: Vec<u32> = (0..300).rev().collect();
        let mut got = vec![0u8; 300 * 512];
        r.gather_fixed(&idx, 512, &mut got).unwrap();
        let want: Vec<u8> = idx.iter().flat_map(|&i| fixed(u64::from(i))).collect();
        assert_eq!(got, want);
    }
}

/// The one table of open modes the bindings use (`"r"`, `"a"`, `"w"`): read-only, read-write
/// created where there is no store, and created over a store (only a store).
#[test]
fn open_modes_read_append_and_create() {
    use loaderx_core::{OpenMode, StoreOptions};
    assert_eq!("r".parse::<OpenMode>(), Ok(OpenMode::Read));
    assert_eq!("a".parse::<OpenMode>(), Ok(OpenMode::Append));
    assert_eq!("w".parse::<OpenMode>(), Ok(OpenMode::Create));
    assert!("rw".parse::<OpenMode>().unwrap_err().contains("'r', 'a' or 'w'"));
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let open = |mode| Store::open_mode(&s, mode, StoreOptions::new());
    assert!(matches!(open(OpenMode::Read), Err(Error::NotAStore { .. })), "read needs a store");
    open(OpenMode::Append).unwrap().append(&[b"one"], Codec::Raw).unwrap();
    open(OpenMode::Append).unwrap().append(&[b"two"], Codec::Raw).unwrap();
    let r = open(OpenMode::Read).unwrap();
    assert_eq!((r.len(), r.get(1).unwrap()), (2, b"two".to_vec()), "append opens what is there");
    assert!(matches!(r.append(&[b"x"], Codec::Raw), Err(Error::ReadOnly { .. })));
    drop(r);
    assert_eq!(open(OpenMode::Create).unwrap().len(), 0, "create replaces a store");
    // An empty directory is a place to create one, in append mode too.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(Store::open_mode(&empty, OpenMode::Append, StoreOptions::new()).unwrap().len(), 0);
}
