//! The Zrecord store: round trips, delete, compaction, corruption, concurrency, in both formats
//! (crashes: `crash.rs`; what only v2 has: `v2.rs`).

use std::path::Path;

use loaderx_core::{Codec, Error, Format, MAX_RECORD_SIZE, MAX_RECORDS, Store};
use proptest::prelude::*;

use crate::common::{FORMATS, check_record, entry_fields, opts, patch, record};

fn create(dir: &Path, format: Format) -> Store {
    Store::create(dir.join("s"), opts(format)).unwrap()
}

fn noise(len: usize, seed: u64) -> Vec<u8> {
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

fn codec_strategy() -> impl Strategy<Value = Codec> {
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
                prop_assert!(matches!(refused, Err(Error::MissingDictionary { .. })), "{:?}", refused);
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
fn compaction_preserves_every_record_and_leaves_the_table_dense() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create(dir.path().join("s"), opts(format).chunk_capacity(40 << 10)).unwrap();
        for b in 0..6u64 {
            let recs: Vec<Vec<u8>> = (b * 50..(b + 1) * 50).map(record).collect();
            store.append(&recs, if b % 2 == 0 { Codec::Zstd } else { Codec::Raw }).unwrap();
        }
        let del: Vec<u32> = (0..300).filter(|i| i % 3 == 1).collect();
        store.delete(&del).unwrap();
        let idx: Vec<u64> = (0..store.len()).collect();
        let before = store.gather(&idx).unwrap();
        let stats_before = store.stats().unwrap();
        let report = store.compact().unwrap();
        assert!(report.moved > 0);
        let after = store.stats().unwrap();
        assert_eq!(store.gather(&idx).unwrap(), before);
        assert!(after.chunk_bytes < stats_before.chunk_bytes);
        // Dense: the only slack left is the end of each full chunk, less than one record per chunk.
        assert!(after.chunk_bytes - after.live_bytes < after.chunks * 3100, "{after:?}");
        let again = store.compact().unwrap();
        assert_eq!(again.moved, 0, "a compacted store has nothing to move");
        drop(store);
        let reopened = Store::open(dir.path().join("s")).unwrap();
        assert_eq!(reopened.gather(&idx).unwrap(), before);
        assert!(reopened.verify().unwrap().bad.is_empty());
    }
}

#[test]
fn interrupted_compaction_is_finished_by_a_second_run() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let mut store = create(dir.path(), format);
        // Large records so the 32 MiB journal batch splits the work into several batches.
        let recs: Vec<Vec<u8>> = (0..100u64).map(|i| noise(700 << 10, i)).collect();
        store.append(&recs, Codec::Raw).unwrap();
        store.delete(&[0, 2, 4]).unwrap();
        let idx: Vec<u64> = (0..store.len()).collect();
        let before = store.gather(&idx).unwrap();
        let partial = store.compact_limited(1).unwrap();
        assert!(partial.moved > 0);
        assert_eq!(store.gather(&idx).unwrap(), before, "consistent after an interrupted compaction");
        drop(store);
        let mut store = Store::open_rw(dir.path().join("s"), opts(format)).unwrap();
        let full = store.compact().unwrap();
        assert!(full.moved > 0 && full.skipped > 0, "{full:?}");
        assert_eq!(store.gather(&idx).unwrap(), before);
        let s = store.stats().unwrap();
        assert_eq!(s.chunk_bytes, s.live_bytes);
    }
}

/// The two cases an audit found (issue 27): a real record sharing its offset with an empty one
/// was moved, then the empty one's placement reset the packing position backwards, so the next
/// record overwrote the first one's tail (or the chunk was truncated under it).
#[test]
fn compaction_with_empty_records_keeps_every_record() {
    let cases: [(Vec<Vec<u8>>, Vec<u32>); 2] = [
        (vec![vec![b'A'; 100], vec![b'B'; 50], vec![], vec![b'R'; 400], vec![b'Z'; 300]], vec![0, 1]),
        (vec![vec![b'A'; 100], vec![], vec![b'R'; 400]], vec![0]),
    ];
    for format in FORMATS {
        for (records, del) in &cases {
            let dir = tempfile::tempdir().unwrap();
            let mut store = create(dir.path(), format);
            store.append(records, Codec::Raw).unwrap();
            store.delete(del).unwrap();
            let idx: Vec<u64> = (0..store.len()).collect();
            let before = store.gather(&idx).unwrap();
            store.compact().unwrap();
            assert_eq!(store.gather(&idx).unwrap(), before, "{format}: {del:?}");
            let s = store.stats().unwrap();
            assert_eq!(s.chunk_bytes, s.live_bytes, "{format}: {s:?}");
            let again = store.compact().unwrap();
            assert_eq!(again.moved, 0, "{format}: a compacted store has nothing to move: {again:?}");
            drop(store);
            let reopened = Store::open(dir.path().join("s")).unwrap();
            assert_eq!(reopened.gather(&idx).unwrap(), before, "{format}: reopened");
            assert!(reopened.verify().unwrap().bad.is_empty());
        }
    }
}

/// A damaged or hostile index whose entries share bytes is refused by compaction (moving one
/// would tear the other), naming the record, and nothing is changed. (v1: its entries carry no
/// checksum, so a patched offset reaches compaction; v2 refuses it earlier, by the entry's crc.)
#[test]
fn compaction_refuses_entries_that_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = create(dir.path(), Format::V1);
    store.append(&[vec![b'A'; 100], vec![b'B'; 200], vec![b'C'; 300]], Codec::Raw).unwrap();
    store.delete(&[0u32]).unwrap();
    drop(store);
    // After the delete, record 0 is C (300 B at 300) and record 1 is B (200 B at 100); B is made
    // to start at 150, so its bytes run into C's.
    let (file, at) = crate::common::entry_at(&path, 1);
    patch(&file, at, &150u32.to_ne_bytes());
    let before: Vec<u8> = std::fs::read(path.join("0.zr")).unwrap();
    let mut store = Store::open_rw(&path, opts(Format::V1)).unwrap();
    let err = store.compact().unwrap_err();
    assert!(matches!(err, Error::CorruptRecord { index: 0, .. }), "{err}");
    assert!(err.to_string().contains("overlap"), "{err}");
    assert_eq!(std::fs::read(path.join("0.zr")).unwrap(), before, "nothing moved");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random stores with empty records among real ones, random deletes, compaction stopped
    /// after a random number of journal batches (one record each) and then finished: every
    /// surviving record byte-identical, the chunks exactly the live bytes, a second compaction
    /// moving nothing. Both formats.
    #[test]
    fn interrupted_compaction_with_empty_records_keeps_every_record(
        lens in proptest::collection::vec(prop_oneof![Just(0usize), Just(0usize), 1usize..600], 1..60),
        dels in proptest::collection::vec(any::<u16>(), 0..30),
        stop in 0usize..40,
        rounds in 1usize..3,
        v2 in any::<bool>(),
    ) {
        let format = if v2 { Format::V2 } else { Format::V1 };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        // Small chunks, so packing crosses chunk boundaries.
        let mut store = Store::create(&path, opts(format).chunk_capacity(4096)).unwrap();
        let records: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| noise(n, i as u64 + 1)).collect();
        store.append(&records, Codec::Raw).unwrap();
        let mut oracle = records.clone();
        for _ in 0..rounds {
            let del: Vec<u64> = dels.iter().map(|&d| u64::from(d) % (oracle.len() as u64).max(1)).collect();
            if !oracle.is_empty() {
                store.delete(&del).unwrap();
                let mut order = del.clone();
                order.sort_unstable_by(|a, b| b.cmp(a));
                order.dedup();
                for i in order {
                    oracle.swap_remove(i as usize);
                }
            }
            let idx: Vec<u64> = (0..store.len()).collect();
            store.compact_in_batches(stop, 1).unwrap();
            prop_assert_eq!(&store.gather(&idx).unwrap(), &oracle, "after the stopped compaction");
            drop(store);
            store = Store::open_rw(&path, opts(format).chunk_capacity(4096)).unwrap();
            store.compact().unwrap();
            prop_assert_eq!(&store.gather(&idx).unwrap(), &oracle, "after the finished compaction");
            let s = store.stats().unwrap();
            prop_assert!(s.chunk_bytes >= s.live_bytes, "{:?}", s);
            let again = store.compact().unwrap();
            prop_assert_eq!(again.moved, 0, "{:?}", again);
            prop_assert!(store.verify().unwrap().bad.is_empty());
            // Append more (some empty) so the next round deletes and compacts a mixed store.
            let more: Vec<Vec<u8>> = lens.iter().take(7).enumerate().map(|(i, &n)| noise(n / 2, i as u64 + 99)).collect();
            store.append(&more, Codec::Raw).unwrap();
            oracle.extend(more);
        }
    }
}

/// A hostile (or foreign) journal whose moves name chunk 25,000 is refused before anything is
/// created: no chunk files appear, and the refusal repeats on every open.
#[test]
fn a_journal_naming_chunks_past_the_store_creates_nothing() {
    use loaderx_core::format::Journal;
    use loaderx_core::format::v2::Entry;
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = create(dir.path(), format);
        store.append(&[vec![1u8; 10], vec![2u8; 10]], Codec::Raw).unwrap();
        drop(store);
        let e = Entry { offset: 0, stored: 4, logical: 4, chunk: 25_000, codec: Codec::Raw as u8, crc: 0 };
        let j = Journal::Move { entries: vec![(0, e)], data: vec![9u8; 4] };
        std::fs::write(path.join("journal.zr"), j.encode(format)).unwrap();
        for _ in 0..2 {
            let Err(err) = Store::open_rw(&path, opts(format)) else {
                panic!("a hostile journal is refused")
            };
            assert!(matches!(err, Error::Corrupt { .. }), "{format}: {err}");
            assert!(err.to_string().contains("journal"), "{err}");
        }
        let chunks = std::fs::read_dir(&path)
            .unwrap()
            .filter(|f| f.as_ref().unwrap().file_name().to_string_lossy().ends_with(".zr"))
            .filter(|f| {
                f.as_ref().unwrap().file_name().to_string_lossy().chars().next().unwrap().is_ascii_digit()
            })
            .count();
        assert_eq!(chunks, 1, "{format}: only 0.zr");
        let s = Store::open(&path);
        // A read-only open leaves the journal to the next writer; the records still read.
        if let Ok(s) = s {
            assert_eq!(s.gather(&[0u64]).unwrap(), vec![vec![1u8; 10]]);
        }
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

/// What README's "no SIGBUS" rests on: loaderx itself never shrinks a file a reader maps. The
/// one operation that truncates chunk files, compaction, needs the store exclusively, so with a
/// reader open it is refused and every chunk keeps its length; the reader's mapped reads go on.
/// (A file truncated under a reader by another program is outside that claim: README says so.)
#[test]
fn compaction_never_truncates_a_chunk_under_an_open_reader() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut w = Store::create(&path, opts(format).chunk_capacity(4096)).unwrap();
        w.append(&(0..40).map(record).collect::<Vec<_>>(), Codec::Raw).unwrap();
        w.delete(&(0..40u32).step_by(2).collect::<Vec<_>>()).unwrap();
        let lengths = |p: &Path| -> Vec<(std::ffi::OsString, u64)> {
            let mut v: Vec<_> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap())
                .map(|e| (e.file_name(), e.metadata().unwrap().len()))
                .filter(|(n, _)| n.to_string_lossy().trim_end_matches(".zr").parse::<u32>().is_ok())
                .collect();
            v.sort();
            v
        };
        let r = Store::open(&path).unwrap();
        let all: Vec<u64> = (0..r.len()).collect();
        let before = r.gather(&all).unwrap();
        let chunks = lengths(&path);
        assert!(
            matches!(w.compact(), Err(Error::Locked { .. })),
            "{format}: compaction needs the store alone"
        );
        assert_eq!(lengths(&path), chunks, "{format}: no chunk shrank under the reader");
        assert_eq!(r.gather(&all).unwrap(), before);
        drop(r);
        assert!(w.compact().unwrap().moved > 0);
        assert!(
            lengths(&path).iter().map(|(_, n)| n).sum::<u64>() < chunks.iter().map(|(_, n)| n).sum::<u64>()
        );
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

// ------------------------------------------------------------------ corruption

fn sample_store(dir: &Path, codec: Codec, format: Format) -> std::path::PathBuf {
    let path = dir.join("s");
    let store = Store::create(&path, opts(format)).unwrap();
    crate::common::append(&store, &(0..200).map(record).collect::<Vec<_>>(), codec);
    path
}

#[test]
fn open_rejects_a_directory_that_is_not_a_store() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Store::open(dir.path()), Err(Error::NotAStore { .. })));
    let path = sample_store(dir.path(), Codec::Raw, format);
    patch(&path.join("meta.zr"), 0, b"NOPE");
    match Store::open(&path) {
        Err(Error::NotAStore { path: p, .. }) => assert!(p.ends_with("meta.zr")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_rejects_other_byte_order_and_version() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    patch(&path.join("meta.zr"), 4, &1u16.swap_bytes().to_ne_bytes());
    assert!(matches!(Store::open(&path), Err(Error::ByteOrder { .. })));
    patch(&path.join("meta.zr"), 4, &9u16.to_ne_bytes());
    assert!(matches!(Store::open(&path), Err(Error::Version { found: 9, .. })));
}

#[test]
fn open_rejects_truncated_meta() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    let f = std::fs::OpenOptions::new().write(true).open(path.join("meta.zr")).unwrap();
    f.set_len(4096).unwrap();
    match Store::open(&path) {
        Err(Error::Corrupt { path: p, .. }) => assert!(p.ends_with("meta.zr")),
        other => panic!("{other:?}"),
    }
    f.set_len(10).unwrap();
    assert!(matches!(Store::open(&path), Err(Error::Corrupt { .. })));
}

/// A tail chunk cut short by outside damage: the records before the cut stay readable, those
/// past it are per-record errors naming the chunk, and a writer refuses the store (appending
/// after the hole would hide the loss).
#[test]
fn truncated_tail_chunk_opens_for_reading_with_per_record_errors() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::Raw, format);
        let ends: Vec<u64> = (0..200u64)
            .map(|i| {
                let e = entry_fields(&path, i);
                e.offset + e.stored
            })
            .collect();
        let cut = ends[99];
        let f = std::fs::OpenOptions::new().write(true).open(path.join("0.zr")).unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let store = Store::open(&path).unwrap();
        let intact: Vec<u32> = (0..200).filter(|&i| ends[i as usize] <= cut).collect();
        assert!(intact.len() >= 100);
        for (k, rec) in store.gather(&intact).unwrap().iter().enumerate() {
            assert_eq!(check_record(rec), Some(u64::from(intact[k])));
        }
        match store.gather(&[199]) {
            Err(Error::CorruptRecord { index: 199, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        let report = store.verify().unwrap();
        assert_eq!(report.bad.len(), 200 - intact.len());
        assert!(report.bad.iter().all(|(i, e)| ends[*i as usize] > cut
            && matches!(e, Error::CorruptRecord { path, .. } if path.ends_with("0.zr"))));
        match Store::open_rw(&path, opts(format)) {
            Err(Error::Corrupt { path: p, reason, .. }) => {
                assert!(p.ends_with("0.zr"));
                assert!(reason.contains("truncated"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            std::fs::metadata(path.join("0.zr")).unwrap().len(),
            cut,
            "the refused writer changed nothing"
        );
    }
}

/// Byte offset of table entry `idx` in meta.zr.
fn entry_offset(idx: u64) -> u64 {
    16 * (1 + idx)
}

#[test]
fn entry_pointing_outside_its_chunk_is_a_record_error() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Raw, format);
    // offset field of entry 5 -> far past the end of 0.zr.
    patch(&path.join("meta.zr"), entry_offset(5), &0x7000_0000u32.to_ne_bytes());
    let store = Store::open(&path).unwrap();
    match store.gather(&[4, 5]) {
        Err(Error::CorruptRecord { index: 5, path: p, .. }) => assert!(p.ends_with("0.zr")),
        other => panic!("{other:?}"),
    }
    let report = store.verify().unwrap();
    assert_eq!(report.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![5]);
}

#[test]
fn bad_codec_tag_is_a_record_error() {
    let format = Format::V1;
    let dir = tempfile::tempdir().unwrap();
    let path = sample_store(dir.path(), Codec::Zstd, format);
    patch(&path.join("meta.zr"), entry_offset(7) + 14, &[9]);
    let store = Store::open(&path).unwrap();
    assert!(matches!(store.gather(&[7]), Err(Error::CorruptRecord { index: 7, .. })));
    assert!(store.gather(&[6, 8]).is_ok());
}

#[test]
fn corrupt_zstd_frame_is_a_record_error() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::Zstd, format);
        let store = Store::open(&path).unwrap();
        // Record 1 compresses (id % 3 != 0): flip a byte in the middle of its frame.
        let e = entry_fields(&path, 1);
        assert_eq!(e.codec, 1, "record 1 is zstd");
        let chunk = std::fs::read(path.join("0.zr")).unwrap();
        let at = e.offset + e.stored / 2;
        patch(&path.join("0.zr"), at, &[chunk[at as usize] ^ 0xA5]);
        match store.gather(&[1]) {
            Err(Error::CorruptRecord { index: 1, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        let many: Vec<u32> = (0..200).rev().collect();
        match store.map_records(&many, |_, b| Ok::<_, Error>(b.len())) {
            Err(Error::CorruptRecord { index: 1, path: p, .. }) => assert!(p.ends_with("0.zr")),
            other => panic!("{other:?}"),
        }
        assert_eq!(store.verify().unwrap().bad.len(), 1);
    }
}

#[test]
fn map_records_hands_over_records_in_place_and_stops_at_the_first_error() {
    #[derive(Debug)]
    enum Failure {
        Store(Error),
        Record(usize),
    }
    impl From<Error> for Failure {
        fn from(e: Error) -> Self {
            Failure::Store(e)
        }
    }
    for (format, codec) in FORMATS.into_iter().flat_map(|f| f.codecs().iter().map(move |&c| (f, c))) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(sample_store(dir.path(), codec, format)).unwrap();
        let order: Vec<u32> = (0..200).map(|k| (k * 7) % 200).collect();
        let ok = store.map_records(&order, |k, b| Ok::<_, Failure>((k, b.to_vec()))).unwrap();
        for (k, (pos, bytes)) in ok.into_iter().enumerate() {
            assert_eq!((pos, bytes), (k, record(u64::from(order[k]))), "{codec:?}");
        }
        // The callback's own error comes back as it is.
        match store.map_records(&order, |k, _| if k == 150 { Err(Failure::Record(k)) } else { Ok(k) }) {
            Err(Failure::Record(150)) => {}
            other => panic!("{other:?}"),
        }
        // The store's errors arrive converted.
        match store.map_records(&[3, 200], |_, b| Ok::<_, Failure>(b.len())) {
            Err(Failure::Store(Error::IndexOutOfRange { index: 200, .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(store.map_records(&[0u32; 0], |_, b| Ok::<_, Failure>(b.len())).unwrap().is_empty());
    }
}

#[test]
fn missing_dictionary_is_named() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        assert!(Store::open(&path).unwrap().has_dictionary());
        std::fs::remove_file(path.join("dict.zr")).unwrap();
        let store = Store::open(&path).unwrap();
        assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
        // Record 1 is text (id % 3 != 0), so it was stored against the dictionary.
        assert!(matches!(store.gather(&[1]), Err(Error::MissingDictionary { .. })));
    }
}

#[test]
fn damaged_dictionary_file_is_refused_on_open() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        patch(&path.join("dict.zr"), 1, &[0x00]);
        match Store::open(&path) {
            Err(Error::Corrupt { path: p, .. }) => assert!(p.ends_with("dict.zr")),
            other => panic!("{other:?}"),
        }
    }
}

/// A `dict.zr` truncated, or with its entropy tables damaged, makes zstd refuse to load it: a
/// `Corrupt` error naming the file on open, never a panic (issue 27: exit 101 in zstd-safe).
#[test]
fn a_truncated_or_damaged_dictionary_is_an_error_not_a_panic() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        let good = std::fs::read(path.join("dict.zr")).unwrap();
        let mut refused = 0;
        let mut cases: Vec<Vec<u8>> =
            [9usize, 12, 40, good.len() / 2].iter().map(|&n| good[..n].to_vec()).collect();
        for at in (8..good.len().min(300)).step_by(3) {
            let mut bad = good.clone();
            bad[at] ^= 0xA5;
            cases.push(bad);
        }
        for bad in cases {
            std::fs::write(path.join("dict.zr"), &bad).unwrap();
            match std::panic::catch_unwind(|| Store::open(&path).map(|s| s.gather(&[1u64, 2]).is_ok())) {
                Ok(Err(Error::Corrupt { path: p, .. })) => {
                    assert!(p.ends_with("dict.zr"), "{}", p.display());
                    refused += 1;
                }
                Ok(_) => {}
                Err(_) => panic!("{format}: a damaged dictionary of {} bytes panicked", bad.len()),
            }
        }
        assert!(refused >= 4, "{format}: only {refused} damaged dictionaries were refused");
    }
}

/// `dict.zr` is the bare dictionary, so damage inside it is caught by the frames it decodes
/// (each names the dictionary ID and carries a checksum of its content): a record either comes
/// back intact or is an error, never wrong bytes.
#[test]
fn damage_inside_the_dictionary_never_hands_out_wrong_records() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = sample_store(dir.path(), Codec::ZstdDict, format);
        let len = std::fs::metadata(path.join("dict.zr")).unwrap().len();
        let at = len - len / 3;
        let b = std::fs::read(path.join("dict.zr")).unwrap()[at as usize];
        patch(&path.join("dict.zr"), at, &[b ^ 0xFF]);
        let store = Store::open(&path).unwrap();
        let mut failed = 0;
        for i in 0..200u64 {
            match store.get(i) {
                Ok(rec) => assert_eq!(check_record(&rec), Some(i)),
                Err(Error::CorruptRecord { index, .. }) => {
                    assert_eq!(index, i);
                    failed += 1;
                }
                Err(other) => panic!("{other:?}"),
            }
        }
        assert!(failed > 0, "the damaged dictionary went unnoticed");
        assert_eq!(store.verify().unwrap().bad.len(), failed);
    }
}

#[test]
#[cfg(target_os = "linux")]
fn disk_full_commits_nothing() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::create(&path, opts(format).chunk_capacity(8)).unwrap();
        store.append(&[b"first"], Codec::Raw).unwrap();
        // The next record rolls over to chunk 1, which is /dev/full: every write fails with ENOSPC.
        std::os::unix::fs::symlink("/dev/full", path.join("1.zr")).unwrap();
        match store.append(&[b"second!!"], Codec::Raw) {
            Err(Error::DiskFull { path: p, source }) => {
                assert!(p.ends_with("1.zr"), "{}", p.display());
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "the cause is kept");
            }
            other => panic!("expected DiskFull, got {other:?}"),
        }
        assert_eq!(store.len(), 1);
        drop(store);
        std::fs::remove_file(path.join("1.zr")).unwrap();
        let store = Store::open_rw(&path, opts(format).chunk_capacity(8)).unwrap();
        assert_eq!(store.gather(&[0]).unwrap(), vec![b"first".to_vec()]);
        store.append(&[b"second!!"], Codec::Raw).unwrap();
        assert_eq!(store.get(1).unwrap(), b"second!!");
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

/// A compaction with a smaller chunk capacity than the store was written with never moves a
/// record up onto bytes not yet moved. 40 MiB, so that the compaction runs in more than one
/// journal batch (32 MiB each): a batch that wrote over records of a later batch would show.
#[test]
fn compaction_with_a_smaller_capacity_keeps_every_record() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts(format).chunk_capacity(1 << 20)).unwrap();
        let rec = |i: u32| {
            let mut r = vec![(i % 251) as u8; 64 << 10];
            r[..4].copy_from_slice(&i.to_le_bytes());
            r
        };
        store.append(&(0..640).map(rec).collect::<Vec<_>>(), Codec::Raw).unwrap();
        store.delete(&[0, 5, 9]).unwrap();
        drop(store);
        let mut store = Store::open_rw(&path, opts(format).chunk_capacity(512 << 10)).unwrap();
        store.compact().unwrap();
        let mut ids = Vec::new();
        for r in store.gather(&(0..637).collect::<Vec<_>>()).unwrap() {
            let i = u32::from_le_bytes(r[..4].try_into().unwrap());
            assert_eq!(r, rec(i), "record {i} is intact");
            ids.push(i);
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..640).filter(|i| ![0, 5, 9].contains(i)).collect::<Vec<_>>());
        assert!(store.verify().unwrap().bad.is_empty());
    }
}

/// `zstd_dict` needs the store's dictionary: without one the append is an error and nothing is
/// written (no silent plain-zstd fallback, no implicit training).
#[test]
fn zstd_dict_append_without_a_dictionary_is_refused_whole() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let store = create(dir.path(), format);
        let recs: Vec<Vec<u8>> = (0..3000).map(record).collect();
        for batch in [&recs[..0], &recs[..5], &recs[..]] {
            match store.append(batch, Codec::ZstdDict) {
                Err(Error::MissingDictionary { path }) => assert_eq!(path, dir.path().join("s")),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(store.len(), 0);
        assert!(!store.has_dictionary(), "no dictionary was trained behind the caller's back");
        assert!(!dir.path().join("s/dict.zr").exists());
        assert!(store.train_dictionary(&recs).unwrap());
        store.append(&recs, Codec::ZstdDict).unwrap();
        assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
    }
}

/// The `zstd` command-line tool, or `None` (a failure where CI asks for it).
fn zstd_cli() -> Option<&'static str> {
    let found =
        std::process::Command::new("zstd").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("LOADERX_REQUIRE_ZSTD_CLI").is_some() {
        panic!("the zstd command-line tool is required (LOADERX_REQUIRE_ZSTD_CLI) but not on PATH");
    }
    if !found {
        eprintln!("skipped: no zstd command-line tool on PATH");
    }
    found.then_some("zstd")
}

/// The stored bytes (frame) of record `idx`, read through the documented layout.
fn stored_frame(path: &Path, idx: u64) -> (u8, Vec<u8>) {
    let e = entry_fields(path, idx);
    let data = std::fs::read(path.join(format!("{}.zr", e.chunk))).unwrap();
    (e.codec, data[e.offset as usize..(e.offset + e.stored) as usize].to_vec())
}

/// Decodes `frame` with `zstd -d -D dict`.
fn zstd_cli_decode(zstd: &str, dir: &Path, dict: &Path, frame: &[u8]) -> Vec<u8> {
    let input = dir.join("frame.zst");
    let output = dir.join("frame.out");
    std::fs::write(&input, frame).unwrap();
    let st = std::process::Command::new(zstd)
        .args(["-q", "-f", "-d", "-D"])
        .arg(dict)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
        .unwrap();
    assert!(st.success(), "zstd -d -D failed");
    std::fs::read(output).unwrap()
}

/// `dict.zr` is the bare zstd dictionary: one trained by `zstd --train` works as a store's
/// dictionary, `zstd -d -D dict.zr` decodes loaderx's `zstd_dict` records, and stores written
/// with the earlier headed `dict.zr` still read.
#[test]
fn dict_zr_interoperates_with_the_zstd_command_line_tool() {
    let format = Format::V1;
    let Some(zstd) = zstd_cli() else { return };
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = (0..400).map(record).collect();
    let text: Vec<u64> = (0..400).filter(|i| i % 3 != 0).collect();

    // A dictionary trained by the command-line tool, dropped into a fresh store.
    let samples = dir.path().join("samples");
    std::fs::create_dir(&samples).unwrap();
    for &i in &text {
        std::fs::write(samples.join(format!("{i}")), &recs[i as usize]).unwrap();
    }
    let cli_dict = dir.path().join("cli.dict");
    let st = std::process::Command::new(zstd)
        .args(["-q", "-f", "--train", "--maxdict=16384", "-r"])
        .arg(&samples)
        .arg("-o")
        .arg(&cli_dict)
        .status()
        .unwrap();
    assert!(st.success(), "zstd --train failed");
    let path = dir.path().join("cli");
    drop(Store::create(&path, opts(format)).unwrap());
    std::fs::copy(&cli_dict, path.join("dict.zr")).unwrap();
    let store = Store::open_rw(&path, opts(format)).unwrap();
    assert_eq!(store.dictionary(), Some(&std::fs::read(&cli_dict).unwrap()[..]));
    store.append(&recs, Codec::ZstdDict).unwrap();
    assert!(store.stats().unwrap().codecs[Codec::ZstdDict] > 0);
    assert_eq!(store.gather(&(0..400).collect::<Vec<_>>()).unwrap(), recs);
    let (tag, frame) = stored_frame(&path, 1);
    assert_eq!(tag, 2, "record 1 is a zstd_dict frame");
    assert_eq!(zstd_cli_decode(zstd, dir.path(), &path.join("dict.zr"), &frame), recs[1]);
    drop(store);

    // A dictionary trained by loaderx is a plain zstd dictionary file too.
    let path = dir.path().join("ours");
    let store = Store::create(&path, opts(format)).unwrap();
    assert!(store.train_dictionary(&recs).unwrap());
    store.append(&recs, Codec::ZstdDict).unwrap();
    let dict = std::fs::read(path.join("dict.zr")).unwrap();
    assert_eq!(dict[..4], 0xEC30_A437u32.to_le_bytes(), "dict.zr starts with the zstd dictionary magic");
    assert_eq!(store.dictionary(), Some(&dict[..]));
    let (tag, frame) = stored_frame(&path, 2);
    assert_eq!(tag, 2);
    assert_eq!(zstd_cli_decode(zstd, dir.path(), &path.join("dict.zr"), &frame), recs[2]);
    drop(store);

    // The headed dict.zr of earlier builds still opens and reads identically.
    std::fs::write(path.join("dict.zr"), loaderx_core::format::dict::encode_legacy(&dict)).unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.dictionary(), Some(&dict[..]));
    assert_eq!(store.gather(&(0..400).collect::<Vec<_>>()).unwrap(), recs);
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
