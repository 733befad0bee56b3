//! Selections (splits, ranges, lists) as views over datasets, and datasets held in memory, in
//! the loader and the datasets' own reads.

use loaderx_core::{
    DataLoader, DatasetWriter, DenseDataset, DenseSource, Error, Pass, RaggedDataset, Selection, WriteOptions,
};

#[test]
fn a_split_feeds_two_loaders_that_together_see_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::dense::<u32>(dir.path().join("x"), vec![2], WriteOptions::new()).unwrap();
    w.append(&(0..2000u32).flat_map(|i| [i, i * 10]).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let (train, valid) = Selection::split(1000, 0.9, 5).unwrap();
    let pass = |sel: Selection| -> Vec<u32> {
        DataLoader::builder()
            .open_stream("x", dir.path().join("x"))
            .select(Selection::range(1000..2000))
            .select(sel)
            .batch_size(32)
            .pass(Pass::ordered())
            .build()
            .unwrap()
            .flat_map(|b| {
                let x = b.unwrap().take("x").unwrap().into_vec::<u32>().unwrap();
                assert!(x.chunks(2).all(|r| r[1] == r[0] * 10), "rows stay whole");
                x.chunks(2).map(|r| r[0] - 1000).collect::<Vec<_>>()
            })
            .collect()
    };
    let (t, v) = (pass(train), pass(valid));
    assert_eq!((t.len(), v.len()), (900, 100));
    let mut all = [t, v].concat();
    all.sort_unstable();
    assert_eq!(all, (0..1000).collect::<Vec<_>>());
}

#[test]
fn views_of_datasets_read_the_records_they_name() {
    let ds = DenseDataset::<f32>::from_vec(vec![3], (0..300).map(|v| v as f32).collect()).unwrap();
    let tail = ds.select(&Selection::range(90..100)).unwrap();
    assert_eq!(tail.len(), 10);
    assert_eq!(tail.get_vec(&[0, 9]).unwrap(), vec![270.0, 271.0, 272.0, 297.0, 298.0, 299.0]);
    let picked = tail.select(&Selection::indices(vec![9u32, 0])).unwrap();
    assert_eq!(picked.get_vec(&[0]).unwrap(), vec![297.0, 298.0, 299.0], "views compose");
    assert!(matches!(picked.get_vec(&[2]), Err(Error::IndexOutOfRange { index: 2, len: 2, .. })));
    assert!(matches!(ds.select(&Selection::range(99..101)), Err(Error::IndexOutOfRange { index: 100, .. })));
    let tokens = RaggedDataset::<i32>::from_records(vec![], &[vec![1], vec![2, 2], vec![3, 3, 3]]).unwrap();
    let odd = tokens.select(&Selection::indices(vec![2u32, 0])).unwrap();
    assert_eq!(odd.get_batch(&[0, 1]).unwrap(), vec![vec![3, 3, 3], vec![1]]);
}

#[test]
fn in_memory_datasets_read_like_stored_ones() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<u16> = (0..600).collect();
    let mut w = DatasetWriter::dense::<u16>(dir.path().join("x"), vec![2, 3], WriteOptions::new()).unwrap();
    w.append(&values).unwrap();
    w.finish().unwrap();
    let stored = DenseSource::open(dir.path().join("x")).unwrap();
    let memory = DenseSource::from_vec(vec![2, 3], values).unwrap();
    assert_eq!((memory.len(), memory.store().is_none()), (100, true));
    let idx = [7u32, 99, 0, 7];
    assert_eq!(memory.get_batch(&idx).unwrap(), stored.get_batch(&idx).unwrap());
    let batches = |s: DenseSource| -> Vec<Vec<u16>> {
        let loader = DataLoader::builder().stream("x", s).batch_size(10).seed(4).build().unwrap();
        loader.take(12).map(|b| b.unwrap().take("x").unwrap().into_vec::<u16>().unwrap()).collect()
    };
    assert_eq!(batches(memory), batches(stored), "the same batches from memory as from the store");
    assert!(
        matches!(
            DenseSource::from_vec(vec![4], vec![1u8; 10]),
            Err(Error::InvalidArgument(m)) if m.contains("10 values are not a whole number of items")
        ),
        "not a whole number of items"
    );
    assert!(
        matches!(
            RaggedDataset::<f32>::from_records(vec![2], &[vec![1.0; 3]]),
            Err(Error::InvalidArgument(m)) if m.contains("record 0 holds 3 elements")
        ),
        "not a whole number of rows"
    );
}

#[test]
fn opening_what_is_not_a_dataset_names_the_path_and_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    match DenseSource::open(&missing) {
        Err(Error::NotAStore { path, reason }) => {
            assert!(path == missing && reason.contains("does not exist"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match DataLoader::builder().open_stream("x", dir.path()).build() {
        Err(Error::NotAStore { path, reason }) => {
            assert!(path == dir.path() && reason.contains("no schema.msgpack"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let store = dir.path().join("raw");
    drop(loaderx_core::Store::create(&store, loaderx_core::StoreOptions::new()).unwrap());
    match DenseSource::open(&store) {
        Err(Error::Schema { reason, .. }) => assert!(reason.contains("open it with Store"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

/// A store set of JSONL parts converted separately is the single conversion of the whole input,
/// record for record, through the dataset, the loader and a dense set; a part changed after
/// stitching, mismatched schemas and a damaged manifest are typed errors naming the path.
#[test]
fn a_store_set_of_parts_is_the_whole_conversion() {
    use loaderx_core::convert::{Part, jsonl, jsonl_part};
    use loaderx_core::{Codec, DataLoader, DatasetWriter, DenseSource, Error, RaggedSource, Store, stitch};
    let dir = tempfile::tempdir().unwrap();
    let mut text = Vec::new();
    for i in 0..3000 {
        text.extend_from_slice(format!("{{\"id\":{i},\"x\":\"{}\"}}\n", "y".repeat(i % 61)).as_bytes());
    }
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &text).unwrap();
    jsonl(&[&input], dir.path().join("whole"), WriteOptions::new()).unwrap();
    let parts: Vec<std::path::PathBuf> = (0..3)
        .map(|k| {
            let out = dir.path().join(format!("parts/p{k}"));
            jsonl_part(&[&input], &out, WriteOptions::new(), Part::new(k, 3).unwrap()).unwrap();
            out
        })
        .collect();
    let summary = stitch(&parts, dir.path().join("set")).unwrap();
    assert_eq!((summary.parts, summary.records), (3, 3000));
    let whole = RaggedSource::open(dir.path().join("whole")).unwrap();
    let set = RaggedSource::open(dir.path().join("set")).unwrap();
    assert_eq!(set.len(), 3000);
    let all: Vec<u32> = (0..3000).collect();
    assert_eq!(set.get_batch(&all).unwrap(), whole.get_batch(&all).unwrap(), "record for record");
    let shuffled: Vec<u32> = (0..3000).map(|i| (i * 1237) % 3000).collect();
    assert_eq!(
        set.get_batch(&shuffled).unwrap(),
        whole.get_batch(&shuffled).unwrap(),
        "random batches across parts"
    );
    let mut from_set = DataLoader::builder()
        .open_stream("t", dir.path().join("set"))
        .batch_size(64)
        .seed(5)
        .build()
        .unwrap();
    let mut from_whole = DataLoader::builder()
        .open_stream("t", dir.path().join("whole"))
        .batch_size(64)
        .seed(5)
        .build()
        .unwrap();
    for _ in 0..5 {
        let (a, b) = (from_set.next_batch().unwrap().unwrap(), from_whole.next_batch().unwrap().unwrap());
        assert_eq!(a.get_ragged("t"), b.get_ragged("t"));
    }
    assert!(matches!(set.get_batch(&[3000]), Err(Error::IndexOutOfRange { index: 3000, .. })));

    // A dense set: two parts of f32 rows.
    let dense: Vec<std::path::PathBuf> = (0..2)
        .map(|k| {
            let p = dir.path().join(format!("d{k}"));
            let mut w =
                DatasetWriter::dense::<f32>(&p, vec![2], WriteOptions::new().codec(Codec::Raw)).unwrap();
            w.append(&(0..20).map(|v| (k * 100 + v) as f32).collect::<Vec<f32>>()).unwrap();
            w.finish().unwrap();
            p
        })
        .collect();
    stitch(&dense, dir.path().join("dset")).unwrap();
    let d = DenseSource::open(dir.path().join("dset")).unwrap().typed::<f32>().unwrap();
    assert_eq!(d.len(), 20);
    let rows = d.get_batch(&[9, 10, 0]).unwrap();
    assert_eq!(rows.as_slice::<f32>().unwrap(), [18.0, 19.0, 100.0, 101.0, 0.0, 1.0]);
    assert!(
        matches!(
            RaggedSource::open(dir.path().join("dset")),
            Err(Error::Schema { path, reason }) if path == dir.path().join("dset") && reason.contains("is dense")
        ),
        "a dense set is not ragged"
    );

    // Mismatched schemas, a changed part, a damaged manifest.
    let e = stitch(&[&parts[0], &dense[0]], dir.path().join("mixed")).unwrap_err();
    assert!(matches!(&e, Error::Schema { path, .. } if path == &dense[0]), "{e}");
    assert!(!dir.path().join("mixed").exists());
    let store = Store::open_rw(&parts[1], loaderx_core::StoreOptions::new()).unwrap();
    store.append(&[b"one more".as_slice()], Codec::Raw).unwrap();
    drop(store);
    let e = RaggedSource::open(dir.path().join("set")).unwrap_err();
    assert!(
        matches!(&e, Error::Schema { path, reason } if path.ends_with("p1") && reason.contains("changed")),
        "{e}"
    );
    std::fs::write(dir.path().join("dset").join(loaderx_core::SET_FILE), b"\xc1 not msgpack").unwrap();
    let e = DenseSource::open(dir.path().join("dset")).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { .. }), "{e}");
}

/// A store set stitched through a symbolic link on its output's way relates its parts through
/// the directories the kernel follows (not the lexical path), so it opens its own parts; a part
/// replaced afterwards by another dataset of the same schema and length is refused on open
/// (issue 27).
#[cfg(unix)]
#[test]
fn stitch_resolves_links_and_a_replaced_part_is_refused() {
    use loaderx_core::stitch;
    let dir = tempfile::tempdir().unwrap();
    let write = |p: &std::path::Path, base: u32| {
        let mut w = DatasetWriter::dense::<u32>(p, vec![1], WriteOptions::new()).unwrap();
        w.append(&(base..base + 10).collect::<Vec<u32>>()).unwrap();
        w.finish().unwrap();
    };
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    write(&parts.join("p0"), 0);
    write(&parts.join("p1"), 100);
    // `sets` is a link into a deeper directory: `sets/s` is really `real/deep/s`, two levels
    // further from `parts` than the lexical path says.
    std::fs::create_dir_all(dir.path().join("real/deep")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real/deep"), dir.path().join("sets")).unwrap();
    // A decoy where the lexical relative path would land, with the same schema and length.
    std::fs::create_dir_all(dir.path().join("real/parts")).unwrap();
    write(&dir.path().join("real/parts/p0"), 5000);
    write(&dir.path().join("real/parts/p1"), 6000);
    stitch(&[parts.join("p0"), parts.join("p1")], dir.path().join("sets/s")).unwrap();
    let set = DenseDataset::<u32>::open(dir.path().join("sets/s")).unwrap();
    assert_eq!(set.get_vec(&[0, 10, 19]).unwrap(), [0, 100, 109], "the set reads its own parts");

    // p1 replaced by another dataset of the same schema and length.
    std::fs::rename(parts.join("p1"), dir.path().join("p1-old")).unwrap();
    write(&parts.join("p1"), 7000);
    let Err(e) = DenseDataset::<u32>::open(dir.path().join("sets/s")) else {
        panic!("a replaced part is refused")
    };
    assert!(
        matches!(&e, Error::Schema { path, reason } if path.ends_with("p1") && reason.contains("replaced")),
        "{e}"
    );
}

/// A split made for another count than the data's is refused where it is applied, naming the
/// records it would leave out (a count typed by hand: 40,000 of 50,000 records).
#[test]
fn a_split_of_another_length_is_refused_where_it_is_applied() {
    let x = loaderx_core::DenseSource::from_vec(vec![], (0..50u32).collect::<Vec<u32>>()).unwrap();
    let (train, _) = Selection::split(40, 0.9, 1).unwrap();
    let e = x.select(&train).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("last 10 records")), "{e}");
    let e = loaderx_core::LoaderBuilder::new().stream("x", x.clone()).select(train).build().err().unwrap();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("split of 40")), "{e}");
    let (train, valid) = Selection::split(50, 0.9, 1).unwrap();
    assert_eq!(x.select(&train).unwrap().len() + x.select(&valid).unwrap().len(), 50);
}

/// A part rewritten in place after stitching, keeping its count and the records a sample would
/// read (a delete and an append of the same bytes), is refused on open in each layout and in
/// v1: the set's fingerprint of a part covers every checksum its index keeps (v1, which keeps
/// none: where each record lies).
#[test]
fn a_part_rewritten_in_place_with_its_count_kept_is_refused() {
    use loaderx_core::{Format, Store, StoreOptions, stitch};
    for (fixed, compact, format) in [
        (true, false, Format::V2),
        (false, true, Format::V2),
        (false, false, Format::V2),
        (false, false, Format::V1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = WriteOptions::new().fixed_stride(fixed).compact_entries(compact).format(format);
        let (p0, p1) = (dir.path().join("p0"), dir.path().join("p1"));
        for (p, base) in [(&p0, 0u32), (&p1, 100)] {
            let mut w = DatasetWriter::dense::<u32>(p, vec![1], opts.clone()).unwrap();
            w.append(&(base..base + 40).collect::<Vec<u32>>()).unwrap();
            w.finish().unwrap();
        }
        stitch(&[&p0, &p1], dir.path().join("s")).unwrap();
        assert_eq!(DenseDataset::<u32>::open(dir.path().join("s")).unwrap().get_vec(&[43]).unwrap(), [103]);
        // Record 3 (no sample reads it) becomes a copy of the last, which is appended again.
        let mut store = Store::open_rw(&p1, StoreOptions::new()).unwrap();
        store.delete(&[3u64]).unwrap();
        store.append(&[139u32.to_le_bytes().to_vec()], loaderx_core::Codec::Raw).unwrap();
        drop(store);
        let Err(e) = DenseDataset::<u32>::open(dir.path().join("s")) else {
            panic!("fixed {fixed}, compact {compact}, {format:?}: a rewritten part is refused")
        };
        assert!(
            matches!(&e, Error::Schema { path, reason } if path.ends_with("p1") && reason.contains("not the store the set was stitched with")),
            "{e}"
        );
    }
}

/// Look 163 (L163-1): a part rewritten after stitching with one sampled record changed kept its
/// identity where the record and its own checksum cancelled in the one CRC they were folded
/// into (the last record of a store of one fixed-stride block, a one-record store). Every
/// record of stores of 1 to 40 records, in each layout, changed in turn, is refused.
#[test]
fn a_part_with_any_one_record_changed_is_refused() {
    use loaderx_core::stitch;
    for (fixed, compact) in [(true, false), (false, true), (false, false)] {
        let opts = WriteOptions::new().fixed_stride(fixed).compact_entries(compact).overwrite(true);
        for n in [1u64, 2, 5, 17, 40] {
            let dir = tempfile::tempdir().unwrap();
            let (p, s) = (dir.path().join("p"), dir.path().join("s"));
            let write = |changed: Option<u64>| {
                let mut w = DatasetWriter::dense::<i64>(&p, vec![1], opts.clone()).unwrap();
                let values: Vec<i64> =
                    (0..n).map(|i| if Some(i) == changed { -1 } else { i as i64 }).collect();
                w.append(&values).unwrap();
                w.finish().unwrap();
            };
            write(None);
            stitch(&[&p], &s).unwrap();
            for at in 0..n {
                write(Some(at));
                let opened = DenseDataset::<i64>::open(&s);
                assert!(
                    matches!(&opened, Err(Error::Schema { reason, .. }) if reason.contains("not the store the set was stitched with")),
                    "fixed {fixed}, compact {compact}: {n} records, record {at} changed: {:?}",
                    opened.map(|d| d.get_vec(&[at as u32]).unwrap())
                );
            }
        }
    }
}

/// The fourth first-hour trial: a damaged raw record reached the model unchecked, and
/// `verify_reads` was out of a loader's reach. `open_stream_with` opens the dataset's stores with
/// options: with `verify_reads` the damaged record's batch is an error naming the record.
#[test]
fn open_stream_with_verify_reads_refuses_a_damaged_raw_record() {
    use loaderx_core::{Codec, StoreOptions};
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x");
    let mut w = DatasetWriter::dense::<u32>(&x, vec![2], WriteOptions::new().codec(Codec::Raw)).unwrap();
    w.append(&(0..100u32).flat_map(|i| [i, i * 10]).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let chunk = x.join("0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&chunk, &bytes).unwrap();
    let rows = |b: loaderx_core::LoaderBuilder| -> Result<Vec<u32>, Error> {
        let mut all = Vec::new();
        for batch in b.batch_size(10).pass(Pass::ordered()).build()? {
            all.extend(batch?.take("x").unwrap().into_vec::<u32>().unwrap());
        }
        Ok(all)
    };
    let unchecked = rows(DataLoader::builder().open_stream("x", &x)).unwrap();
    let want: Vec<u32> = (0..100u32).flat_map(|i| [i, i * 10]).collect();
    assert_eq!(
        unchecked.iter().zip(&want).filter(|(a, b)| a != b).count(),
        1,
        "one damaged value read as data"
    );
    let checked = StoreOptions::new().verify_reads(true);
    let e = rows(DataLoader::builder().open_stream_with("x", &x, &checked)).unwrap_err();
    assert!(matches!(e, Error::CorruptRecord { .. } | Error::Corrupt { .. }), "{e}");
}
