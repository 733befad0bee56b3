//! A fast serde decoder for MessagePack records written by `rmp_serde` (what burn's
//! `SqliteDataset` and loaderx's item stores hold), giving exactly the values
//! `rmp_serde::from_slice` gives.
//!
//! Why not rmp-serde itself: it reads every value through a generic reader, a stored-marker
//! check and a marker dispatch that is not inlined, so decoding an image item costs more than a
//! store takes to find and copy it. Here every value is read straight off a borrowed slice (an
//! `f32` is one compare and one load, its slow cases kept out of line), and errors carry no
//! data, leaving mostly the call serde's derived visitors make per value (figures:
//! docs/benchmarks/kernels.md).
//!
//! Compatibility is by construction: this decoder mirrors rmp-serde's deserializer method by
//! method (the same visitor calls for the same bytes: numbers, strings that fall back to bytes,
//! arrays and maps with their length checks, options, unit structs, enums as a variant name or a
//! one-entry map), and whatever it does not handle or cannot decode (ext types, 128-bit integers,
//! binary read as a sequence, any malformed input) is decoded again by `rmp_serde::from_slice`,
//! whose value or error is returned. So a caller sees rmp-serde's results and errors, faster.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Visitor};

/// Nesting limit of containers (rmp-serde's default).
const MAX_DEPTH: u16 = 1024;

/// Decodes one MessagePack value as `T`, as `rmp_serde::from_slice` does (trailing bytes are
/// ignored, as there).
///
/// # Errors
/// rmp-serde's error for input it cannot decode as `T`.
///
/// # Examples
/// ```
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Item { pixels: [f32; 4], label: u8, name: String }
///
/// let item = Item { pixels: [0.0, 1.5, 2.0, 255.0], label: 7, name: "seven".into() };
/// let bytes = rmp_serde::to_vec(&item)?;
/// assert_eq!(loaderx_burn::msgpack::from_slice::<Item>(&bytes)?, item);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn from_slice<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, rmp_serde::decode::Error> {
    match fast(bytes) {
        Some(value) => Ok(value),
        None => rmp_serde::from_slice(bytes),
    }
}

thread_local! {
    /// Set whenever the fast path raises an error on this thread, even one a `Deserialize` impl
    /// catches and recovers from (`unwrap_or_default` around a field, say): the fast path's
    /// errors do not stop where rmp-serde's do, so a value decoded past one may differ from
    /// rmp-serde's, and is decoded again by it.
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

/// The fast path's value, or `None` when it raised any error on the way.
fn fast<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Option<T> {
    let outer = FAILED.replace(false);
    let value = T::deserialize(&mut Fast { input: bytes, depth: MAX_DEPTH });
    let failed = FAILED.replace(outer);
    value.ok().filter(|_| !failed)
}

/// Raises the fast path's error.
#[cold]
fn fail() -> Fallback {
    FAILED.set(true);
    Fallback
}

/// The fast path's only error: "let rmp-serde decode this". Zero-sized, so results stay in
/// registers; made only by [`fail`].
#[derive(Debug)]
struct Fallback;

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not decoded by the fast MessagePack path")
    }
}

impl std::error::Error for Fallback {}

impl de::Error for Fallback {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        fail()
    }
}

type Res<T> = Result<T, Fallback>;

struct Fast<'de> {
    input: &'de [u8],
    depth: u16,
}

impl<'de> Fast<'de> {
    #[inline]
    fn peek(&self) -> Res<u8> {
        self.input.first().copied().ok_or_else(fail)
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Res<[u8; N]> {
        let (head, rest) = self.input.split_first_chunk::<N>().ok_or_else(fail)?;
        self.input = rest;
        Ok(*head)
    }

    #[inline]
    fn slice(&mut self, len: usize) -> Res<&'de [u8]> {
        if len > self.input.len() {
            return Err(fail());
        }
        let (head, rest) = self.input.split_at(len);
        self.input = rest;
        Ok(head)
    }

    #[inline]
    fn len16(&mut self) -> Res<u32> {
        Ok(u32::from(u16::from_be_bytes(self.take()?)))
    }

    #[inline]
    fn len32(&mut self) -> Res<u32> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    /// rmp-serde's `any_inner`: any value; binary goes to the visitor as bytes only when
    /// `allow_bytes` (else rmp-serde hands it over as a sequence of `u8`: left to it).
    #[inline]
    fn any<V: Visitor<'de>>(&mut self, visitor: V, allow_bytes: bool) -> Res<V::Value> {
        let [m] = self.take()?;
        match m {
            0x00..=0x7f => visitor.visit_u8(m),
            0x80..=0x8f => self.map(u32::from(m & 0x0f), visitor),
            0x90..=0x9f => self.seq(u32::from(m & 0x0f), visitor),
            0xa0..=0xbf => {
                let s = self.slice(usize::from(m & 0x1f))?;
                str_or_bytes(s, visitor)
            }
            0xc0 => visitor.visit_unit(),
            0xc2 => visitor.visit_bool(false),
            0xc3 => visitor.visit_bool(true),
            0xc4..=0xc6 if allow_bytes => {
                let len = match m {
                    0xc4 => u32::from(self.take::<1>()?[0]),
                    0xc5 => self.len16()?,
                    _ => self.len32()?,
                };
                visitor.visit_borrowed_bytes(self.slice(len as usize)?)
            }
            0xca => visitor.visit_f32(f32::from_be_bytes(self.take()?)),
            0xcb => visitor.visit_f64(f64::from_be_bytes(self.take()?)),
            0xcc => visitor.visit_u8(u8::from_be_bytes(self.take()?)),
            0xcd => visitor.visit_u16(u16::from_be_bytes(self.take()?)),
            0xce => visitor.visit_u32(u32::from_be_bytes(self.take()?)),
            0xcf => visitor.visit_u64(u64::from_be_bytes(self.take()?)),
            0xd0 => visitor.visit_i8(i8::from_be_bytes(self.take()?)),
            0xd1 => visitor.visit_i16(i16::from_be_bytes(self.take()?)),
            0xd2 => visitor.visit_i32(i32::from_be_bytes(self.take()?)),
            0xd3 => visitor.visit_i64(i64::from_be_bytes(self.take()?)),
            0xd9..=0xdb => {
                let len = match m {
                    0xd9 => u32::from(self.take::<1>()?[0]),
                    0xda => self.len16()?,
                    _ => self.len32()?,
                };
                let s = self.slice(len as usize)?;
                str_or_bytes(s, visitor)
            }
            0xdc => {
                let len = self.len16()?;
                self.seq(len, visitor)
            }
            0xdd => {
                let len = self.len32()?;
                self.seq(len, visitor)
            }
            0xde => {
                let len = self.len16()?;
                self.map(len, visitor)
            }
            0xdf => {
                let len = self.len32()?;
                self.map(len, visitor)
            }
            0xe0..=0xff => visitor.visit_i8(m as i8),
            // Reserved (0xc1), binary read as a sequence, ext types (0xc7..=0xc9, 0xd4..=0xd8).
            _ => Err(fail()),
        }
    }

    /// [`Fast::num`] off the hot path, so that the fast cases around a call of it stay small
    /// enough to be inlined into the visitor's loop.
    #[cold]
    #[inline(never)]
    fn num_cold<V: Visitor<'de>>(&mut self, visitor: V) -> Res<V::Value> {
        self.num(visitor)
    }

    /// rmp-serde's `any_num`: the scalar markers only (nil, booleans, integers, floats).
    #[inline]
    fn num<V: Visitor<'de>>(&mut self, visitor: V) -> Res<V::Value> {
        match self.peek()? {
            0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xca..=0xd3 | 0xe0..=0xff => self.any(visitor, false),
            _ => Err(fail()),
        }
    }

    #[inline]
    fn enter(&mut self) -> Res<()> {
        // rmp-serde's rule: the counter is decremented, and reaching 0 is an error (so at most
        // `MAX_DEPTH - 1` levels).
        self.depth = self.depth.checked_sub(1).filter(|&d| d > 0).ok_or_else(fail)?;
        Ok(())
    }

    #[inline]
    fn seq<V: Visitor<'de>>(&mut self, len: u32, visitor: V) -> Res<V::Value> {
        self.enter()?;
        // By value, so the visitor calls `Seq::next_element` itself (inlined into its loop)
        // rather than through serde's out-of-line forwarding impl for `&mut A`.
        let mut left = len;
        let value = visitor.visit_seq(Seq { de: &mut *self, left: &mut left })?;
        // rmp-serde refuses a container its visitor did not read to the end.
        if left != 0 {
            return Err(fail());
        }
        self.depth += 1;
        Ok(value)
    }

    #[inline]
    fn map<V: Visitor<'de>>(&mut self, len: u32, visitor: V) -> Res<V::Value> {
        self.enter()?;
        let mut access = Map { de: self, left: len };
        let value = visitor.visit_map(&mut access)?;
        if access.left != 0 {
            return Err(fail());
        }
        self.depth += 1;
        Ok(value)
    }
}

/// A string, or its bytes when they are not UTF-8 and the visitor takes bytes (rmp-serde's rule).
#[inline]
fn str_or_bytes<'de, V: Visitor<'de>>(s: &'de [u8], visitor: V) -> Res<V::Value> {
    match std::str::from_utf8(s) {
        Ok(s) => visitor.visit_borrowed_str(s),
        Err(_) => visitor.visit_borrowed_bytes(s),
    }
}

macro_rules! scalars {
    ($($method:ident)*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Res<V::Value> {
            self.num(visitor)
        }
    )*};
}

macro_rules! anything {
    ($allow_bytes:literal => $($method:ident)*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Res<V::Value> {
            self.any(visitor, $allow_bytes)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Fast<'de> {
    type Error = Fallback;

    fn is_human_readable(&self) -> bool {
        false
    }

    scalars! { deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
    deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f64 }

    anything! { true => deserialize_any deserialize_bytes deserialize_byte_buf deserialize_unit
    deserialize_map deserialize_identifier deserialize_str deserialize_string deserialize_char
    deserialize_ignored_any }

    anything! { false => deserialize_seq }

    /// The hot path of image-like items: one compare and one load per value.
    #[inline(always)]
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Res<V::Value> {
        if let [0xca, a, b, c, d, ref rest @ ..] = *self.input {
            self.input = rest;
            return visitor.visit_f32(f32::from_be_bytes([a, b, c, d]));
        }
        self.num_cold(visitor)
    }

    #[inline]
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Res<V::Value> {
        if let [m @ 0x00..=0x7f, ref rest @ ..] = *self.input {
            self.input = rest;
            return visitor.visit_u8(m);
        }
        self.num_cold(visitor)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, _visitor: V) -> Res<V::Value> {
        Err(fail())
    }

    fn deserialize_u128<V: Visitor<'de>>(self, _visitor: V) -> Res<V::Value> {
        Err(fail())
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Res<V::Value> {
        if self.peek()? == 0xc0 {
            self.input = &self.input[1..];
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Res<V::Value> {
        // rmp-serde writes a unit struct as `[]` and reads `nil` or `[]` as one.
        if matches!(self.peek()?, 0xc0 | 0x90) {
            self.input = &self.input[1..];
            visitor.visit_unit()
        } else {
            self.any(visitor, true)
        }
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Res<V::Value> {
        if name == rmp_serde::MSGPACK_EXT_STRUCT_NAME {
            return Err(fail());
        }
        visitor.visit_newtype_struct(self)
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Res<V::Value> {
        self.any(visitor, false)
    }

    #[inline]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Res<V::Value> {
        self.any(visitor, false)
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Res<V::Value> {
        self.any(visitor, false)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Res<V::Value> {
        // A variant with data is a one-entry map {variant: data}; a unit variant may also be
        // the bare variant (its name or index).
        let len = match self.peek()? {
            m @ 0x80..=0x8f => {
                self.input = &self.input[1..];
                u32::from(m & 0x0f)
            }
            0xde => {
                self.input = &self.input[1..];
                self.len16()?
            }
            0xdf => {
                self.input = &self.input[1..];
                self.len32()?
            }
            _ => return visitor.visit_enum(UnitVariant { de: self }),
        };
        if len != 1 {
            return Err(fail());
        }
        // Counted like a container, so nested enums cannot recurse without bound.
        self.enter()?;
        let value = visitor.visit_enum(Variant { de: &mut *self })?;
        self.depth += 1;
        Ok(value)
    }
}

struct Seq<'a, 'de> {
    de: &'a mut Fast<'de>,
    left: &'a mut u32,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Fallback;

    #[inline(always)]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Res<Option<T::Value>> {
        if *self.left == 0 {
            return Ok(None);
        }
        *self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    #[inline(always)]
    fn next_element<T: Deserialize<'de>>(&mut self) -> Res<Option<T>> {
        if *self.left == 0 {
            return Ok(None);
        }
        *self.left -= 1;
        T::deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(*self.left).ok()
    }
}

struct Map<'a, 'de> {
    de: &'a mut Fast<'de>,
    left: u32,
}

impl<'de> de::MapAccess<'de> for Map<'_, 'de> {
    type Error = Fallback;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Res<Option<K::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Res<V::Value> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok()
    }
}

/// A variant written as its bare name or index: a unit variant only.
struct UnitVariant<'a, 'de> {
    de: &'a mut Fast<'de>,
}

impl<'a, 'de> de::EnumAccess<'de> for UnitVariant<'a, 'de> {
    type Error = Fallback;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Res<(V::Value, Self)> {
        let variant = seed.deserialize(&mut *self.de)?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariant<'_, 'de> {
    type Error = Fallback;

    fn unit_variant(self) -> Res<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Res<T::Value> {
        Err(fail())
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Res<V::Value> {
        Err(fail())
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], _visitor: V) -> Res<V::Value> {
        Err(fail())
    }
}

/// A variant written as a one-entry map `{variant: data}`.
struct Variant<'a, 'de> {
    de: &'a mut Fast<'de>,
}

impl<'a, 'de> de::EnumAccess<'de> for Variant<'a, 'de> {
    type Error = Fallback;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Res<(V::Value, Self)> {
        let variant = seed.deserialize(&mut *self.de)?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Fallback;

    fn unit_variant(self) -> Res<()> {
        match self.de.take()? {
            [0xc0] => Ok(()),
            _ => Err(fail()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Res<T::Value> {
        seed.deserialize(self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Res<V::Value> {
        de::Deserializer::deserialize_tuple(self.de, len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Res<V::Value> {
        de::Deserializer::deserialize_tuple(self.de, fields.len(), visitor)
    }
}

#[cfg(test)]
mod tests {
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
        assert!(from_slice::<(u8, u8)>(&long).is_err());
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
}
