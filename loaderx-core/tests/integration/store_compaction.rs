//! Store compaction: every record kept and the chunks left dense, interrupted compactions
//! finished by the next run, empty records among real ones, overlapping or hostile index entries
//! and journals refused, no chunk truncated under an open reader, a smaller chunk capacity.

use std::path::Path;

use loaderx_core::{Codec, Error, Format, Store};
use proptest::prelude::*;

use crate::common::{FORMATS, opts, patch, record};
use crate::store::{create, noise};

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

/// What the guide's "no SIGBUS" rests on: loaderx itself never shrinks a file a reader maps. The
/// one operation that truncates chunk files, compaction, needs the store exclusively, so with a
/// reader open it is refused and every chunk keeps its length; the reader's mapped reads go on.
/// (A file truncated under a reader by another program is outside that claim: the guide says so.)
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

/// A journal moving a record into a chunk before the tail at an offset past the chunk's
/// capacity (2^40 here) is refused: the chunk does not grow into a sparse file of a TiB that a
/// replay would then certify, and the records read as before.
#[test]
fn a_journal_move_past_a_chunks_capacity_is_refused() {
    use loaderx_core::format::Journal;
    use loaderx_core::format::v2::Entry;
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let small = || opts(format).chunk_capacity(1000);
        let store = Store::create(&path, small()).unwrap();
        let records: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 100]).collect();
        store.append(&records, Codec::Raw).unwrap();
        assert!(store.stats().unwrap().chunks > 1, "{format}: the store spans chunks");
        drop(store);
        let chunk0 = std::fs::metadata(path.join("0.zr")).unwrap().len();
        let far = if format == Format::V1 { u64::from(u32::MAX) - 200 } else { 1 << 40 };
        let e = Entry { offset: far, stored: 100, logical: 100, chunk: 0, codec: Codec::Raw as u8, crc: 0 };
        let j = Journal::Move { entries: vec![(3, e)], data: vec![3u8; 100] };
        std::fs::write(path.join("journal.zr"), j.encode(format)).unwrap();
        let Err(err) = Store::open_rw(&path, small()) else { panic!("{format}: the journal is refused") };
        assert!(matches!(err, Error::Corrupt { .. }), "{format}: {err}");
        // v1 keeps no capacity: its journals are bounded by the format's chunk and contiguity.
        let why = if format == Format::V1 { "leave a hole" } else { "past its capacity" };
        assert!(err.to_string().contains(why), "{format}: {err}");
        assert_eq!(
            std::fs::metadata(path.join("0.zr")).unwrap().len(),
            chunk0,
            "{format}: chunk 0 kept its size"
        );
        std::fs::remove_file(path.join("journal.zr")).unwrap();
        let s = Store::open_rw(&path, small()).unwrap();
        assert_eq!(s.gather(&[3u64]).unwrap(), vec![vec![3u8; 100]]);
        assert!(s.verify().unwrap().is_ok(), "{format}");
    }
}

/// The twenty-fourth look's Y2: a record larger than the chunk capacity (a chunk to itself)
/// moved down by compaction lands at offset 0 of a lower chunk, which the journal's checks
/// accept: the compaction completes and every record reads back.
#[test]
fn compaction_moves_a_record_larger_than_the_capacity() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Store::create(&path, opts(format).chunk_capacity(1000)).unwrap();
        let records = [vec![1u8; 100], vec![2u8; 1500], vec![3u8; 100]];
        for r in &records {
            store.append(std::slice::from_ref(r), Codec::Raw).unwrap();
        }
        store.delete(&[0u64]).unwrap();
        store.compact().unwrap();
        assert!(!path.join("journal.zr").exists(), "{format}");
        let back = store.gather(&[0u64, 1]).unwrap();
        assert_eq!(back, vec![records[2].clone(), records[1].clone()], "{format}");
        assert!(store.verify().unwrap().is_ok(), "{format}");
        drop(store);
        assert_eq!(Store::open(&path).unwrap().len(), 2);
    }
}

/// The twenty-fifth look's Z1: chunk files left past a gap (a removal of chunks past the tail
/// killed part way: `1.zr` removed, `2.zr` and `3.zr` not) are removed by the next writer, so
/// appends that roll into those ids never write over old bytes.
#[test]
fn chunks_left_past_a_gap_are_removed_before_appends_reach_them() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let small = || opts(format).chunk_capacity(1000);
        let store = Store::create(&path, small()).unwrap();
        store.append(&(0..5u8).map(|i| vec![i; 150]).collect::<Vec<_>>(), Codec::Raw).unwrap();
        drop(store);
        for id in [2, 3] {
            std::fs::write(path.join(format!("{id}.zr")), vec![0xEE; 900]).unwrap();
        }
        let store = Store::open_rw(&path, small()).unwrap();
        assert!(!path.join("2.zr").exists() && !path.join("3.zr").exists(), "{format}");
        let more: Vec<Vec<u8>> = (5..25u8).map(|i| vec![i; 150]).collect();
        store.append(&more, Codec::Raw).unwrap();
        assert!(store.verify().unwrap().is_ok(), "{format}");
        let all = store.gather(&(0..25u64).collect::<Vec<_>>()).unwrap();
        assert!(all.iter().enumerate().all(|(i, r)| *r == vec![i as u8; 150]), "{format}");
    }
}

/// The twenty-fifth look's Z2: a v1 store keeps no capacity, so a compaction run with a larger
/// one than the store was written with packs past it; its journal replays whatever capacity
/// the reopening handle asks for (the format's largest chunk bounds it, with contiguity).
#[test]
fn a_v1_compaction_journal_replays_under_a_smaller_capacity_option() {
    use loaderx_core::format::Journal;
    use loaderx_core::format::v2::Entry;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let small = || opts(Format::V1).chunk_capacity(1000);
    let store = Store::create(&path, small()).unwrap();
    // Six records of 150 bytes a chunk: chunk 0 holds 900 bytes.
    store.append(&(0..9u8).map(|i| vec![i; 150]).collect::<Vec<_>>(), Codec::Raw).unwrap();
    drop(store);
    // Record 7 packed to byte 900 of chunk 0, as a compaction with a 4 GiB capacity places it.
    let e = Entry { offset: 900, stored: 150, logical: 150, chunk: 0, codec: Codec::Raw as u8, crc: 0 };
    let j = Journal::Move { entries: vec![(7, e)], data: vec![7u8; 150] };
    std::fs::write(path.join("journal.zr"), j.encode(Format::V1)).unwrap();
    let store = Store::open_rw(&path, small()).unwrap();
    assert!(!path.join("journal.zr").exists());
    assert_eq!(store.gather(&[7u64, 8]).unwrap(), vec![vec![7u8; 150], vec![8u8; 150]]);
}

/// A damaged length in a v2 index, with its entry's checksum left as it was (entry layout) or
/// in the compact layout, which keeps no entry checksum: compaction refuses the record, moves
/// nothing over its bytes and cuts no chunk; with the length mended the record reads again
/// (review 52: the next record was packed over its last bytes, or the tail chunk cut, and the
/// loss became permanent).
#[test]
fn compaction_refuses_a_record_whose_length_lies_and_moves_nothing_over_it() {
    for (layout, entry_size, length_at) in [("entries", 32u64, 8u64), ("compact", 16, 8)] {
        for (victim, to) in [(5u64, Some(1u32)), (19, Some(1)), (5, None), (19, None)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let o = opts(Format::V2).compact_entries(layout == "compact");
            let mut store = Store::create(&path, o.clone()).unwrap();
            let records: Vec<Vec<u8>> = (0..20u8).map(|k| vec![k; 40 + usize::from(k)]).collect();
            store.append(&records, Codec::Raw).unwrap();
            store.delete(&[0u32]).unwrap(); // a hole at the front: every record moves
            drop(store);
            let want = Store::open(&path).unwrap().gather(&(0..19u64).collect::<Vec<_>>()).unwrap();
            // Record `victim` of the store as it now is (after the delete, 19 records).
            let victim = victim.min(18);
            let at = 64 + entry_size * victim + length_at;
            let index = path.join("index.zr");
            let len = u32::from_le_bytes(
                std::fs::read(&index).unwrap()[at as usize..at as usize + 4].try_into().unwrap(),
            );
            // Lowered by one byte, or (`None`) to 0: an empty record (review 54).
            patch(&index, at, &to.map_or(0, |d| len - d).to_le_bytes());
            let chunks_before = std::fs::read(path.join("0.zr")).unwrap();
            let mut store = Store::open_rw(&path, o.clone()).unwrap();
            let e = store.compact().unwrap_err();
            // Named as `verify` names it: the damaged entry (index.zr), or the bytes that fail
            // their checksum (the chunk: review 53).
            let file = if layout == "entries" { "index.zr" } else { "0.zr" };
            assert!(
                matches!(&e, Error::CorruptRecord { index, path, .. } if *index == victim && path.ends_with(file)),
                "{layout} {victim}: {e}"
            );
            drop(store);
            let after = std::fs::read(path.join("0.zr")).unwrap();
            let v = usize::try_from(victim).unwrap();
            let place = |b: &[u8], r: &[u8]| b.windows(r.len()).position(|w| w == r);
            assert!(
                place(&after, &want[v]).is_some(),
                "{layout} {victim}: the record's bytes are all still there"
            );
            assert_eq!(after, chunks_before, "{layout} {victim}: nothing moved, nothing cut");
            patch(&index, at, &len.to_le_bytes());
            let store = Store::open(&path).unwrap();
            assert_eq!(
                store.gather(&(0..19u64).collect::<Vec<_>>()).unwrap(),
                want,
                "{layout} {victim}: mended"
            );
        }
    }
}

/// The same in v1, which keeps no checksums: a zstd record whose length was lowered by one
/// byte no longer decodes, which `verify` and `migrate` report; compaction refuses it too, with
/// nothing moved (review 53: it packed the next record over the frame's last byte).
#[test]
fn v1_compaction_refuses_a_compressed_record_that_does_not_decode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut store = create(dir.path(), Format::V1);
    let records: Vec<Vec<u8>> =
        (0..10u32).map(|k| (0..250u32).map(|i| ((i * 7 + k) % 13) as u8).collect()).collect();
    store.append(&records, Codec::Zstd).unwrap();
    store.delete(&[0u32]).unwrap();
    drop(store);
    let want = Store::open(&path).unwrap().gather(&(0..9u64).collect::<Vec<_>>()).unwrap();
    let (file, at) = crate::common::entry_at(&path, 4);
    let bytes = std::fs::read(&file).unwrap();
    let stored = u32::from_ne_bytes(bytes[at as usize + 4..at as usize + 8].try_into().unwrap());
    patch(&file, at + 4, &(stored - 1).to_ne_bytes());
    let before = std::fs::read(path.join("0.zr")).unwrap();
    let mut store = Store::open_rw(&path, opts(Format::V1)).unwrap();
    let e = store.compact().unwrap_err();
    assert!(matches!(&e, Error::CorruptRecord { index: 4, .. }), "{e}");
    drop(store);
    assert_eq!(std::fs::read(path.join("0.zr")).unwrap(), before, "nothing moved");
    patch(&file, at + 4, &stored.to_ne_bytes());
    assert_eq!(Store::open(&path).unwrap().gather(&(0..9u64).collect::<Vec<_>>()).unwrap(), want, "mended");
}

/// A delete that would move a last record whose entry fails its own checksum refuses, nothing
/// changed, the damage still reported as the index's (review 55: the entry was written into the
/// hole with a fresh checksum over its damaged fields, the damage then blamed on the chunk or
/// not seen at all).
#[test]
fn a_delete_never_moves_a_damaged_entry_into_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, opts(Format::V2)).unwrap();
    store
        .append(&[b"r0".repeat(10), b"r1".repeat(10), b"r2".repeat(10), b"r3".repeat(10)], Codec::Raw)
        .unwrap();
    drop(store);
    let index = path.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[64 + 32 * 3 + 24] ^= 1; // record 3's crc32c field; the entry's own checksum left as it was
    std::fs::write(&index, &bytes).unwrap();
    let mut store = Store::open_rw(&path, opts(Format::V2)).unwrap();
    let e = store.delete(&[0u32]).unwrap_err();
    assert!(
        matches!(&e, Error::CorruptRecord { index: 3, reason, .. } if reason.contains("bad index entry")),
        "{e}"
    );
    drop(store);
    assert_eq!(std::fs::read(&index).unwrap(), bytes, "nothing changed");
    let report = Store::open(&path).unwrap().verify().unwrap();
    assert!(
        matches!(report.bad.as_slice(), [(3, Error::CorruptRecord { path, .. })] if path.ends_with("index.zr")),
        "{:?}",
        report.bad
    );
}
