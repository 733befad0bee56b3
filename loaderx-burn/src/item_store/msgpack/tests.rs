//! The decoder held against rmp-serde: round trips, damaged and arbitrary bytes, what it leaves
//! to rmp-serde, errors, nesting limits.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Empty,
    Circle(f32),
    Pair(u8, i64),
    Rect { w: f64, h: f64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Unit;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Newtype(u16);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    image: [[f32; 3]; 2],
    label: u8,
    id: u64,
    delta: i32,
    small: i8,
    flag: bool,
    name: String,
    tags: Vec<String>,
    maybe: Option<Option<u32>>,
    shapes: Vec<Shape>,
    counts: BTreeMap<String, u32>,
    unit: Unit,
    newtype: Newtype,
    tuple: (char, f64),
    raw: Vec<u8>,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Empty),
        any::<f32>().prop_map(Shape::Circle),
        (any::<u8>(), any::<i64>()).prop_map(|(a, b)| Shape::Pair(a, b)),
        (any::<f64>(), any::<f64>()).prop_map(|(w, h)| Shape::Rect { w, h }),
    ]
}

prop_compose! {
    fn item()(
        image in any::<[[f32; 3]; 2]>(), label in any::<u8>(), id in any::<u64>(),
        delta in any::<i32>(), small in any::<i8>(), flag in any::<bool>(),
        name in ".{0,40}", tags in prop::collection::vec("[a-z]{0,300}", 0..4),
        maybe in any::<Option<u32>>().prop_map(|o| o.map(Some)), shapes in prop::collection::vec(shape(), 0..5),
        counts in prop::collection::btree_map("[a-z]{1,8}", any::<u32>(), 0..20),
        newtype in any::<u16>(), tuple in any::<(char, f64)>(),
        raw in prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..300),
            1 => prop::collection::vec(any::<u8>(), 65_530..65_540),
        ],
    ) -> Item {
        Item { image, label, id, delta, small, flag, name, tags, maybe, shapes, counts,
            unit: Unit, newtype: Newtype(newtype), tuple, raw }
    }
}

// `maybe` is never `Some(None)`: MessagePack writes it as nil, which reads back as `None`
// (rmp-serde's documented limit, the same here).

/// Both decoders' outcome, compared through `Debug` (NaN-safe).
fn outcome<'de, T: Deserialize<'de> + fmt::Debug>(bytes: &'de [u8]) -> (String, String) {
    let ours = match from_slice::<T>(bytes) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    };
    let theirs = match rmp_serde::from_slice::<T>(bytes) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    };
    (ours, theirs)
}

/// Whether the fast path itself decodes `bytes` (no fallback).
fn on_fast_path<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> bool {
    fast::<T>(bytes).is_some()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trips_as_arrays_and_maps_on_the_fast_path(item in item()) {
        for bytes in [rmp_serde::to_vec(&item).unwrap(), rmp_serde::to_vec_named(&item).unwrap()] {
            prop_assert!(on_fast_path::<Item>(&bytes));
            let got: Item = from_slice(&bytes).unwrap();
            prop_assert_eq!(format!("{got:?}"), format!("{item:?}"));
        }
    }

    #[test]
    fn agrees_with_rmp_serde_on_damaged_records(item in item(), cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let mut bytes = rmp_serde::to_vec(&item).unwrap();
        for (at, byte) in flips {
            let k = at.index(bytes.len());
            bytes[k] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        let (ours, theirs) = outcome::<Item>(&bytes);
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn agrees_with_rmp_serde_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let (a, b) = outcome::<Vec<Shape>>(&bytes);
        prop_assert_eq!(a, b);
        let (a, b) = outcome::<(Option<u8>, String, BTreeMap<u8, bool>)>(&bytes);
        prop_assert_eq!(a, b);
        let (a, b) = outcome::<(i16, u32, f32, f64, Unit, Newtype)>(&bytes);
        prop_assert_eq!(a, b);
    }
}

#[test]
fn what_the_fast_path_leaves_to_rmp_serde_still_decodes() {
    // 128-bit integers, binary read as a sequence, ext types.
    let wide = rmp_serde::to_vec(&(u128::MAX, i128::MIN)).unwrap();
    assert!(!on_fast_path::<(u128, i128)>(&wide));
    assert_eq!(from_slice::<(u128, i128)>(&wide).unwrap(), (u128::MAX, i128::MIN));
    let bin = [0xc4, 3, 1, 2, 3];
    assert!(!on_fast_path::<Vec<u8>>(&bin));
    assert_eq!(from_slice::<Vec<u8>>(&bin).unwrap(), vec![1, 2, 3]);
    // rmp-serde's ext convention: a newtype named `_ExtStruct` around (tag, data).
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename = "_ExtStruct")]
    struct Ext((i8, Bytes));
    let ext = [0xd4, 5, 9];
    assert!(!on_fast_path::<Ext>(&ext));
    assert_eq!(from_slice::<Ext>(&ext).unwrap(), Ext((5, Bytes(vec![9]))));
}

#[test]
fn errors_are_rmp_serdes() {
    let bytes = rmp_serde::to_vec(&(1u8, "x")).unwrap();
    let ours = from_slice::<(u8, u8)>(&bytes).unwrap_err().to_string();
    let theirs = rmp_serde::from_slice::<(u8, u8)>(&bytes).unwrap_err().to_string();
    assert_eq!(ours, theirs);
    // A container its visitor does not read to the end.
    let long = rmp_serde::to_vec(&(1u8, 2u8, 3u8)).unwrap();
    assert!(!on_fast_path::<(u8, u8)>(&long));
    let ours = from_slice::<(u8, u8)>(&long).unwrap_err().to_string();
    assert_eq!(ours, rmp_serde::from_slice::<(u8, u8)>(&long).unwrap_err().to_string());
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let mut bytes = vec![0x91; 100_000];
    bytes.push(0x01);
    assert!(!on_fast_path::<serde::de::IgnoredAny>(&bytes));
}

#[test]
fn the_depth_limit_is_rmp_serdes_to_the_level() {
    // A thousand levels of unoptimised recursion need more than a test thread's stack.
    let check = || {
        for levels in [1022, 1023, 1024, 1025] {
            let mut bytes = vec![0x91; levels];
            bytes.push(0x01);
            let theirs = rmp_serde::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok();
            assert_eq!(on_fast_path::<serde::de::IgnoredAny>(&bytes), theirs, "{levels} levels");
            assert_eq!(levels < 1024, theirs);
        }
    };
    std::thread::Builder::new().stack_size(256 << 20).spawn(check).unwrap().join().unwrap();
}

#[test]
fn an_error_a_deserialize_impl_swallows_still_sends_the_record_to_rmp_serde() {
    // A lenient field: the fast path leaves u128 to rmp-serde, and this impl would turn that
    // into a 0 and go on reading from the wrong place.
    fn lenient<'de, D: de::Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        Ok(u128::deserialize(d).unwrap_or(0))
    }
    #[derive(Debug, PartialEq, Deserialize)]
    struct Lenient {
        #[serde(deserialize_with = "lenient")]
        big: u128,
        after: u8,
    }
    let bytes = rmp_serde::to_vec(&(u128::MAX, 7u8)).unwrap();
    assert!(!on_fast_path::<Lenient>(&bytes));
    assert_eq!(from_slice::<Lenient>(&bytes).unwrap(), Lenient { big: u128::MAX, after: 7 });
}

/// A byte buffer read through `deserialize_bytes`, for the ext type check above.
#[derive(Debug, PartialEq)]
struct Bytes(Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl Visitor<'_> for BytesVisitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
        }
        d.deserialize_bytes(BytesVisitor)
    }
}
