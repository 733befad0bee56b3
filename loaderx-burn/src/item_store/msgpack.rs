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
use serde::de::{self, Visitor};

use access::{Map, Seq, UnitVariant, Variant};

mod access;
#[cfg(test)]
mod tests;

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
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Item { pixels: [f32; 4], label: u8, name: String }
///
/// let item = Item { pixels: [0.0, 1.5, 2.0, 255.0], label: 7, name: "seven".into() };
/// let bytes = rmp_serde::to_vec(&item)?;
/// assert_eq!(loaderx::burn::msgpack::from_slice::<Item>(&bytes)?, item);
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
