//! `ItemStore`: round trips of arbitrary serde items, migration from burn datasets, errors.

use burn::data::dataset::{Dataset, InMemDataset};
use loaderx_burn::{Error, ItemStore};
use loaderx_core::{Codec, WriteOptions};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Empty,
    Point(i32, i32),
    Named { name: String, sides: u8 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    text: String,
    values: Vec<f32>,
    maybe: Option<i16>,
    shape: Shape,
    nested: Vec<(bool, String)>,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Empty),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Shape::Point(a, b)),
        (".{0,12}", any::<u8>()).prop_map(|(name, sides)| Shape::Named { name, sides }),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (
        any::<u64>(),
        ".{0,40}",
        prop::collection::vec(-1.0e6f32..1.0e6, 0..300),
        any::<Option<i16>>(),
        shape(),
        prop::collection::vec((any::<bool>(), "[a-z]{0,5}"), 0..4),
    )
        .prop_map(|(id, text, values, maybe, shape, nested)| Record {
            id,
            text,
            values,
            maybe,
            shape,
            nested,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn items_round_trip_through_the_store(
        items in prop::collection::vec(record(), 1..120),
        raw in any::<bool>(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..80),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = WriteOptions::new().codec(if raw { Codec::Raw } else { Codec::Zstd });
        let mut w = ItemStore::<Record>::create(dir.path().join("s"), opts).unwrap();
        // Half one by one, half in a batch: both writer paths.
        let half = items.len() / 2;
        for item in &items[..half] {
            w.push(item).unwrap();
        }
        w.extend(&items[half..]).unwrap();
        let store = w.finish().unwrap();
        prop_assert_eq!(store.len(), items.len());
        let order: Vec<usize> = picks.iter().map(|p| p.index(items.len())).collect();
        let got = store.get_many(order.clone()).unwrap();
        let want: Vec<Record> = order.iter().map(|&i| items[i].clone()).collect();
        prop_assert_eq!(got, want);
        let reopened = ItemStore::<Record>::open(dir.path().join("s")).unwrap();
        prop_assert_eq!(reopened.get(items.len() - 1).unwrap(), items[items.len() - 1].clone());
    }
}

#[test]
fn migration_from_in_memory_preserves_every_item_in_order() {
    let items: Vec<Record> = (0..2500u64)
        .map(|i| Record {
            id: i,
            text: format!("item {i}"),
            values: (0..(i % 17)).map(|v| v as f32 * 0.25).collect(),
            maybe: (i % 3 == 0).then_some(i as i16),
            shape: if i % 2 == 0 { Shape::Point(i as i32, -(i as i32)) } else { Shape::Empty },
            nested: vec![(i % 5 == 0, "x".repeat((i % 4) as usize))],
        })
        .collect();
    let source = InMemDataset::new(items.clone());
    let dir = tempfile::tempdir().unwrap();
    let store = ItemStore::from_dataset(&source, dir.path().join("m"), WriteOptions::new()).unwrap();
    assert_eq!(store.len(), items.len());
    let all = store.get_many((0..items.len()).collect()).unwrap();
    assert_eq!(all, items);
}

/// Needs burn's `sqlite` (turso_core, a very large build): `cargo test -p loaderx-burn --features sqlite`.
#[cfg(feature = "sqlite")]
#[test]
fn migration_from_sqlite_reads_the_same_msgpack_items() {
    use burn::data::dataset::{SqliteDataset, SqliteDatasetWriter};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data.db");
    let items: Vec<Record> = (0..300u64)
        .map(|i| Record {
            id: i,
            text: "t".repeat((i % 9) as usize),
            values: vec![i as f32; (i % 5) as usize],
            maybe: None,
            shape: Shape::Named { name: format!("n{i}"), sides: (i % 7) as u8 },
            nested: Vec::new(),
        })
        .collect();
    let mut writer = SqliteDatasetWriter::<Record>::new(&db, true).unwrap();
    for item in &items {
        writer.write("train", item).unwrap();
    }
    writer.set_completed().unwrap();
    let sqlite = SqliteDataset::<Record>::from_db_file(&db, "train").unwrap();
    let store = ItemStore::from_dataset(&sqlite, dir.path().join("s"), WriteOptions::new()).unwrap();
    assert_eq!(store.len(), 300);
    assert_eq!(store.get_many((0..300).collect()).unwrap(), items);
    // The bytes are the same encoding SqliteDataset stores: a record decodes as rmp_serde wrote it.
    let raw = store.store().get(42).unwrap();
    assert_eq!(raw, rmp_serde::to_vec(&items[42]).unwrap());
}

#[test]
fn a_record_of_another_type_is_a_decode_error_naming_the_record() {
    #[derive(Debug, Serialize, Deserialize)]
    struct Other {
        a: Vec<String>,
        b: [u8; 3],
    }
    let dir = tempfile::tempdir().unwrap();
    let mut w = ItemStore::<u32>::create(dir.path().join("s"), WriteOptions::new()).unwrap();
    w.push(&7).unwrap();
    w.finish().unwrap();
    let wrong = ItemStore::<Other>::open(dir.path().join("s")).unwrap();
    let err = wrong.get_batch(&[0]).unwrap_err();
    assert!(matches!(err, Error::Decode { index: 0, .. }), "{err:?}");
    let err = wrong.get(0).unwrap_err();
    assert!(std::error::Error::source(&err).unwrap().downcast_ref::<Error>().is_some());
}

#[test]
fn an_existing_store_is_not_overwritten_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut w = ItemStore::<u8>::create(&path, WriteOptions::new()).unwrap();
    w.push(&1).unwrap();
    w.finish().unwrap();
    assert!(matches!(ItemStore::<u8>::create(&path, WriteOptions::new()), Err(Error::Core(_))));
    let mut w = ItemStore::<u8>::create(&path, WriteOptions::new().overwrite(true)).unwrap();
    w.extend(&[5, 6]).unwrap();
    assert_eq!(w.finish().unwrap().get_many(vec![1, 0]).unwrap(), vec![6, 5]);
}
