//! Arrow arrays as records: how a column's type becomes a dataset's layout, and a decoded batch
//! of one column its records (numbers and fixed-size lists dense, lists ragged, strings and
//! binary values `u8` records), nulls filled or refused naming the file, column and row.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_schema::DataType;

use super::Nulls;
use crate::convert::block::product;
use crate::{DType, Error, Result, Schema};

/// How a column's values become records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layout {
    /// Fixed-size values: numbers, fixed-size lists of them, fixed-size binary.
    Dense(DType, Vec<usize>),
    /// Variable-length lists of fixed-size values: rows of the shape.
    Ragged(DType, Vec<usize>),
    /// Strings and binary values (and a struct's `bytes` field: encoded images): `u8` records.
    Bytes,
}

/// The layout of an Arrow type, or why it has none.
pub(crate) fn layout_of(t: &DataType) -> std::result::Result<Layout, String> {
    let scalar = |d| Ok(Layout::Dense(d, Vec::new()));
    match t {
        DataType::Boolean => scalar(DType::Bool),
        DataType::Int8 => scalar(DType::I8),
        DataType::Int16 => scalar(DType::I16),
        DataType::Int32 => scalar(DType::I32),
        DataType::Int64 => scalar(DType::I64),
        DataType::UInt8 => scalar(DType::U8),
        DataType::UInt16 => scalar(DType::U16),
        DataType::UInt32 => scalar(DType::U32),
        DataType::UInt64 => scalar(DType::U64),
        DataType::Float16 => scalar(DType::F16),
        DataType::Float32 => scalar(DType::F32),
        DataType::Float64 => scalar(DType::F64),
        DataType::FixedSizeBinary(n) => Ok(Layout::Dense(DType::U8, vec![fixed_size(*n)?])),
        DataType::FixedSizeList(f, n) => match layout_of(f.data_type())? {
            Layout::Dense(d, mut shape) => {
                shape.insert(0, fixed_size(*n)?);
                // The sizes come from the file's schema: their product must be an item size.
                if product(&shape).and_then(|e| e.checked_mul(d.size())).is_none() {
                    return Err(format!("a fixed-size list of shape {shape:?} {d}, whose size overflows"));
                }
                Ok(Layout::Dense(d, shape))
            }
            _ => Err(format!("a fixed-size list of {} (only of fixed-size values)", f.data_type())),
        },
        DataType::List(f) | DataType::LargeList(f) => match layout_of(f.data_type())? {
            Layout::Dense(d, shape) => Ok(Layout::Ragged(d, shape)),
            _ => Err(format!("a list of {} (only of fixed-size values)", f.data_type())),
        },
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Ok(Layout::Bytes),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(Layout::Bytes),
        DataType::Struct(fields) => match fields.iter().find(|f| f.name() == "bytes") {
            Some(f) if layout_of(f.data_type()) == Ok(Layout::Bytes) => Ok(Layout::Bytes),
            _ => Err("a struct without a binary `bytes` field".into()),
        },
        other => Err(format!("{other}")),
    }
}

/// A fixed size from the file's schema as a length (arrow's `i32` can be negative in a damaged
/// file).
fn fixed_size(n: i32) -> std::result::Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("a fixed size of {n}"))
}

impl Layout {
    pub(crate) fn schema(&self) -> Schema {
        match self {
            Layout::Dense(d, s) => Schema::dense(*d, s.clone()),
            Layout::Ragged(d, s) => Schema::ragged(*d, s.clone()),
            Layout::Bytes => Schema::ragged(DType::U8, Vec::new()),
        }
    }
}

/// Where an error happened: the file, the column and the file's first row of the batch, and
/// (inside a list) which row and element of the batch a value's index is.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    pub(crate) path: &'a Path,
    pub(crate) column: &'a str,
    pub(crate) row: u64,
    pub(crate) nulls: Nulls,
    /// Value `i` of the array at hand as (row of the batch, element of that row's list): the
    /// identity at the column's top; a list's values are numbered past its rows (look 100,
    /// L100-3: a null in a list was reported at the value's index as a row).
    locate: &'a dyn Fn(usize) -> (usize, Option<usize>),
}

/// [`At::locate`] at a column's top: value `i` is row `i`.
const TOP: &dyn Fn(usize) -> (usize, Option<usize>) = &|i| (i, None);

impl<'a> At<'a> {
    pub(crate) fn new(path: &'a Path, column: &'a str, row: u64, nulls: Nulls) -> At<'a> {
        At { path, column, row, nulls, locate: TOP }
    }

    /// This place inside the values of a list, `locate` naming each value's row and element.
    fn within(&self, locate: &'a dyn Fn(usize) -> (usize, Option<usize>)) -> At<'a> {
        At { locate, ..*self }
    }

    pub(crate) fn null(&self, i: usize) -> Error {
        let (row, element) = (self.locate)(i);
        let element = element.map_or(String::new(), |e| format!(", element {e} of its list"));
        Error::BadInput {
            path: self.path.to_path_buf(),
            reason: format!(
                "column {:?}, row {}{element}: a null value (fill nulls with a value to convert it)",
                self.column,
                self.row + row as u64,
            ),
            source: None,
        }
    }
}

/// Whether the fill `n` is a value of `d`: an integer type's exactly (no fraction, in its range;
/// an integer fill as given, however large), a bool's 0 or 1, a float type's any number within
/// its finite range (rounded to it), infinities and NaN (look 100, L100-2: 300 became 255 in a
/// `u8` column, -1 became 0, 1.5 became 1; look 102, L102-3: 2^53 + 1 became 2^53).
#[cfg(feature = "parquet")]
pub(crate) fn fill_fits(d: DType, n: Nulls) -> bool {
    let (lo, past): (i128, i128) = match d {
        DType::U8 => (0, 1 << 8),
        DType::I8 => (-(1 << 7), 1 << 7),
        DType::U16 => (0, 1 << 16),
        DType::I16 => (-(1 << 15), 1 << 15),
        DType::U32 => (0, 1 << 32),
        DType::I32 => (-(1 << 31), 1 << 31),
        DType::U64 => (0, 1 << 64),
        DType::I64 => (-(1 << 63), 1 << 63),
        DType::Bool => (0, 2),
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
            let max = match d {
                DType::F16 => f64::from(half::f16::MAX),
                DType::BF16 => f64::from(half::bf16::MAX),
                DType::F32 => f64::from(f32::MAX),
                _ => f64::MAX,
            };
            let v = float(n);
            return !v.is_finite() || v.abs() <= max;
        }
    };
    match n {
        Nulls::FillInt(i) => (lo..past).contains(&i),
        // Below 2^64 and integral, an f64 is an i128 exactly.
        Nulls::Fill(v) => v.fract() == 0.0 && v >= lo as f64 && v < past as f64,
        Nulls::Error => true,
    }
}

/// A batch of one column's records: bytes back to back and where each record ends.
#[derive(Default)]
pub(crate) struct Chunk {
    pub(crate) bytes: Vec<u8>,
    pub(crate) ends: Vec<usize>,
}

impl Chunk {
    pub(crate) fn push(&mut self, record: &[u8]) {
        self.bytes.extend_from_slice(record);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn records(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let r = &self.bytes[start..e];
                start = e;
                r
            })
            .collect()
    }
}

/// The fixed-size values of `a` (numbers, booleans as 0/1 bytes, fixed-size lists of them,
/// fixed-size binary), flattened to bytes; a null value filled or an error. `k` is the number
/// of leaf values per element of `a`.
fn leaf_bytes(a: &dyn Array, at: &At<'_>, out: &mut Vec<u8>) -> Result<()> {
    macro_rules! prim {
        ($t:ty, $conv:expr) => {{
            let p = a.as_primitive::<$t>();
            match (p.null_count(), at.nulls) {
                (0, _) => out.extend_from_slice(bytemuck::cast_slice(p.values())),
                (_, Nulls::Error) => {
                    let i = (0..p.len()).find(|&i| p.is_null(i)).unwrap_or(0);
                    return Err(at.null(i));
                }
                (_, n) => {
                    let fill = $conv(n);
                    for i in 0..p.len() {
                        let x = if p.is_null(i) { fill } else { p.value(i) };
                        out.extend_from_slice(bytemuck::bytes_of(&x));
                    }
                }
            }
        }};
    }
    match a.data_type() {
        DataType::Int8 => prim!(Int8Type, int::<i8>),
        DataType::Int16 => prim!(Int16Type, int::<i16>),
        DataType::Int32 => prim!(Int32Type, int::<i32>),
        DataType::Int64 => prim!(Int64Type, int::<i64>),
        DataType::UInt8 => prim!(UInt8Type, int::<u8>),
        DataType::UInt16 => prim!(UInt16Type, int::<u16>),
        DataType::UInt32 => prim!(UInt32Type, int::<u32>),
        DataType::UInt64 => prim!(UInt64Type, int::<u64>),
        DataType::Float16 => prim!(Float16Type, |n| half::f16::from_f64(float(n))),
        DataType::Float32 => prim!(Float32Type, |n| float(n) as f32),
        DataType::Float64 => prim!(Float64Type, float),
        DataType::Boolean => {
            let b = a.as_boolean();
            for i in 0..b.len() {
                let v = if b.is_null(i) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        n => float(n) != 0.0,
                    }
                } else {
                    b.value(i)
                };
                out.push(u8::from(v));
            }
        }
        DataType::FixedSizeBinary(n) => {
            let f = a.as_fixed_size_binary();
            for i in 0..f.len() {
                if f.is_null(i) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        fill => out.extend(std::iter::repeat_n(int::<u8>(fill), *n as usize)),
                    }
                } else {
                    out.extend_from_slice(f.value(i));
                }
            }
        }
        DataType::FixedSizeList(_, n) => {
            let l = a.as_fixed_size_list();
            let n = *n as usize;
            let start = out.len();
            // The child values of this list's elements only (a sliced list starts inside them).
            let child = l.values().slice(l.offset() * n, l.len() * n);
            // Value `j` of the child is element `j % n` of this array's value `j / n`.
            let locate = |j: usize| {
                let (row, element) = (at.locate)(j / n);
                (row, Some(element.map_or(j % n, |e| e * n + j % n)))
            };
            let first_null = (at.nulls == Nulls::Error && l.null_count() > 0)
                .then(|| (0..l.len()).find(|&i| l.is_null(i)))
                .flatten();
            if let Some(i) = first_null {
                // A null element, named as itself after any null inside the elements before it
                // (the values under a null element are anything, nulls often).
                leaf_bytes(child.slice(0, i * n).as_ref(), &at.within(&locate), out)?;
                return Err(at.null(i));
            }
            leaf_bytes(child.as_ref(), &at.within(&locate), out)?;
            if l.null_count() > 0 {
                let per = (out.len() - start) / l.len().max(1);
                for i in (0..l.len()).filter(|&i| l.is_null(i)) {
                    match at.nulls {
                        Nulls::Error => return Err(at.null(i)),
                        n => {
                            let fill = fill_bytes(a.data_type(), n);
                            let cell = &mut out[start + i * per..start + (i + 1) * per];
                            for (k, b) in cell.iter_mut().enumerate() {
                                *b = fill[k % fill.len()];
                            }
                        }
                    }
                }
            }
        }
        other => {
            return Err(Error::BadInput {
                path: at.path.to_path_buf(),
                reason: format!("column {:?}: {other} is not a fixed-size type", at.column),
                source: None,
            });
        }
    }
    Ok(())
}

/// The bytes of one leaf value, the fill `n`, of the innermost type of `t`.
fn fill_bytes(t: &DataType, n: Nulls) -> Vec<u8> {
    match t {
        DataType::FixedSizeList(f, _) => fill_bytes(f.data_type(), n),
        DataType::Int8 => int::<i8>(n).to_ne_bytes().to_vec(),
        DataType::Int16 => int::<i16>(n).to_ne_bytes().to_vec(),
        DataType::Int32 => int::<i32>(n).to_ne_bytes().to_vec(),
        DataType::Int64 => int::<i64>(n).to_ne_bytes().to_vec(),
        DataType::UInt16 => int::<u16>(n).to_ne_bytes().to_vec(),
        DataType::UInt32 => int::<u32>(n).to_ne_bytes().to_vec(),
        DataType::UInt64 => int::<u64>(n).to_ne_bytes().to_vec(),
        DataType::Float16 => half::f16::from_f64(float(n)).to_ne_bytes().to_vec(),
        DataType::Float32 => (float(n) as f32).to_ne_bytes().to_vec(),
        DataType::Float64 => float(n).to_ne_bytes().to_vec(),
        DataType::Boolean => vec![u8::from(float(n) != 0.0)],
        _ => vec![int::<u8>(n)],
    }
}

/// The fill `n` as a float (an integer fill rounded to the nearest).
fn float(n: Nulls) -> f64 {
    match n {
        Nulls::FillInt(i) => i as f64,
        Nulls::Fill(v) => v,
        Nulls::Error => 0.0,
    }
}

/// The fill `n` as an integer of `T`, exactly ([`fill_fits`] checked it first: a value out of
/// range, never reached, is 0).
fn int<T: TryFrom<i128> + Default>(n: Nulls) -> T {
    let i = match n {
        Nulls::FillInt(i) => Some(i),
        // Integral and within i64 or u64 (checked), so within i128 exactly.
        Nulls::Fill(v) => (v.fract() == 0.0 && v.abs() < 3.5e38).then_some(v as i128),
        Nulls::Error => None,
    };
    i.and_then(|i| T::try_from(i).ok()).unwrap_or_default()
}

/// One batch of column values `a` as records.
pub(crate) fn records(a: &ArrayRef, layout: &Layout, at: &At<'_>) -> Result<Chunk> {
    let mut chunk = Chunk::default();
    match layout {
        Layout::Dense(..) => {
            let mut bytes = Vec::new();
            leaf_bytes(a.as_ref(), at, &mut bytes)?;
            let per = bytes.len() / a.len().max(1);
            chunk.ends = (1..=a.len()).map(|i| i * per).collect();
            chunk.bytes = bytes;
        }
        Layout::Ragged(..) => match a.data_type() {
            DataType::List(_) => list_records::<i32>(a, at, &mut chunk)?,
            _ => list_records::<i64>(a, at, &mut chunk)?,
        },
        Layout::Bytes => bytes_records(a.as_ref(), at, &mut chunk)?,
    }
    Ok(chunk)
}

fn list_records<O: OffsetSizeTrait>(a: &ArrayRef, at: &At<'_>, chunk: &mut Chunk) -> Result<()> {
    let l = a.as_list::<O>();
    let offsets = l.value_offsets();
    let (first, last) = (offsets[0].as_usize(), offsets[l.len()].as_usize());
    if at.nulls == Nulls::Error
        && let Some(i) = (0..l.len()).find(|&i| l.is_null(i))
    {
        // A null row, named as itself after any null value in the rows before it.
        let end = offsets[i].as_usize();
        let mut ignored = Vec::new();
        leaf_bytes(
            l.values().slice(first, end - first).as_ref(),
            &at.within(&|j| list_place(offsets, first, j)),
            &mut ignored,
        )?;
        return Err(at.null(i));
    }
    let mut values = Vec::new();
    let locate = |j: usize| list_place(offsets, first, j);
    leaf_bytes(l.values().slice(first, last - first).as_ref(), &at.within(&locate), &mut values)?;
    let per = if last > first { values.len() / (last - first) } else { 0 };
    if l.null_count() == 0 {
        // The values are the records back to back: kept as they are, cut at the offsets.
        chunk.ends = offsets[1..].iter().map(|o| (o.as_usize() - first) * per).collect();
        chunk.bytes = values;
        return Ok(());
    }
    for i in 0..l.len() {
        if l.is_null(i) {
            match at.nulls {
                Nulls::Error => return Err(at.null(i)),
                _ => chunk.push(&[]),
            }
            continue;
        }
        let (s, e) = (offsets[i].as_usize() - first, offsets[i + 1].as_usize() - first);
        chunk.push(&values[s * per..e * per]);
    }
    Ok(())
}

/// Value `j` of a list's values (from the value at offset `first`) as (row, element of the row).
fn list_place<O: OffsetSizeTrait>(offsets: &[O], first: usize, j: usize) -> (usize, Option<usize>) {
    let at = first + j;
    // The last row starting at or before the value: rows of no values start where the next does.
    let row = offsets.partition_point(|o| o.as_usize() <= at).saturating_sub(1);
    (row, Some(at - offsets[row].as_usize()))
}

fn bytes_records(a: &dyn Array, at: &At<'_>, chunk: &mut Chunk) -> Result<()> {
    let value = |i: usize| -> Option<&[u8]> {
        if a.is_null(i) {
            return None;
        }
        Some(match a.data_type() {
            DataType::Binary => a.as_binary::<i32>().value(i),
            DataType::LargeBinary => a.as_binary::<i64>().value(i),
            DataType::BinaryView => a.as_binary_view().value(i),
            DataType::Utf8 => a.as_string::<i32>().value(i).as_bytes(),
            DataType::LargeUtf8 => a.as_string::<i64>().value(i).as_bytes(),
            DataType::Utf8View => a.as_string_view().value(i).as_bytes(),
            _ => return None,
        })
    };
    if let DataType::Struct(_) = a.data_type() {
        let s = a.as_struct();
        let bytes = s.column_by_name("bytes").ok_or_else(|| Error::BadInput {
            path: at.path.to_path_buf(),
            reason: format!("column {:?}: a struct without a `bytes` field", at.column),
            source: None,
        })?;
        let mut inner = Chunk::default();
        bytes_records(bytes.as_ref(), at, &mut inner)?;
        for (i, r) in inner.records().into_iter().enumerate() {
            if s.is_null(i) && at.nulls == Nulls::Error {
                return Err(at.null(i));
            }
            chunk.push(if s.is_null(i) { &[] } else { r });
        }
        return Ok(());
    }
    // Without nulls, offset-based strings and binaries are their records back to back: one copy.
    if a.null_count() == 0 {
        let mut whole = |data: &[u8], offsets: &mut dyn Iterator<Item = usize>, first: usize| {
            chunk.ends = offsets.map(|o| o - first).collect();
            chunk.bytes = data.to_vec();
        };
        macro_rules! offset_based {
            ($arr:expr) => {{
                let x = $arr;
                let o = x.value_offsets();
                // Offsets of a valid array are non-negative and ascending (arrow checks).
                let (first, last) = (o[0] as usize, o[x.len()] as usize);
                whole(&x.value_data()[first..last], &mut o[1..].iter().map(|&v| v as usize), first);
                return Ok(());
            }};
        }
        match a.data_type() {
            DataType::Binary => offset_based!(a.as_binary::<i32>()),
            DataType::LargeBinary => offset_based!(a.as_binary::<i64>()),
            DataType::Utf8 => offset_based!(a.as_string::<i32>()),
            DataType::LargeUtf8 => offset_based!(a.as_string::<i64>()),
            _ => {}
        }
    }
    for i in 0..a.len() {
        match (value(i), at.nulls) {
            (Some(v), _) => chunk.push(v),
            (None, Nulls::Error) => return Err(at.null(i)),
            (None, _) => chunk.push(&[]),
        }
    }
    Ok(())
}
