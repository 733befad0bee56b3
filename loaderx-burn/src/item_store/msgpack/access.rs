//! The serde accessors the decoder hands visitors: sequences, maps and enum variants, each
//! reading its elements off the same [`Fast`] decoder.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Visitor};

use super::{Fallback, Fast, Res, fail};

pub(super) struct Seq<'a, 'de> {
    pub(super) de: &'a mut Fast<'de>,
    pub(super) left: &'a mut u32,
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

pub(super) struct Map<'a, 'de> {
    pub(super) de: &'a mut Fast<'de>,
    pub(super) left: u32,
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
pub(super) struct UnitVariant<'a, 'de> {
    pub(super) de: &'a mut Fast<'de>,
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
pub(super) struct Variant<'a, 'de> {
    pub(super) de: &'a mut Fast<'de>,
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
