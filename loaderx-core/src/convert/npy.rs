//! NumPy `.npy` files: the header as a pure function over bytes, and the streaming converter.

use std::io::{BufReader, Read};
use std::path::Path;

use super::block::{
    DataSection, check_records, checked_item_bytes, open_input, product, read_full, stream_records, truncated,
};
use super::part::Part;
use super::summary::{ConvertSummary, finish};
use crate::{DType, DatasetWriter, Error, Result, Schema, WriteOptions};

/// The parsed header of a `.npy` file (format versions 1.0, 2.0 and 3.0).
///
/// Layout: the magic `\x93NUMPY`, a major and minor version byte, the header length (`u16` LE in
/// v1, `u32` LE in v2 and v3), then a Python dict literal such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (10, 28, 28), }` padded with spaces and a
/// newline. The data follows at [`NpyHeader::data_offset`].
///
/// bfloat16 has no NumPy type string (`ml_dtypes` saves it as the opaque `'<V2'`), so `.npy`
/// files of bfloat16 are not supported in either direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version `(major, minor)`.
    pub version: (u8, u8),
    /// Element type.
    pub dtype: DType,
    /// Whether multi-byte elements are stored little-endian (`true` for one-byte types).
    pub little_endian: bool,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Byte offset of the data: the total header size.
    pub data_offset: u64,
}

/// The magic bytes that open every `.npy` file.
pub const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Bytes to read to learn the header length: magic, version, and a length of up to 4 bytes.
const PREFIX: usize = 12;
/// NumPy aligns the start of the data to this many bytes.
const ALIGN: usize = 64;
/// NumPy leaves room after the dict so the length of axis 0 can grow in place to this many digits.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;
/// Longest header accepted when reading (NumPy itself refuses more than 10 000 bytes by default).
const MAX_HEADER: usize = 1 << 20;

impl NpyHeader {
    /// The total header size (the data offset) from the file's first bytes (at least 10 for
    /// version 1, 12 for versions 2 and 3).
    ///
    /// # Errors
    /// A sentence naming the byte offset: bad magic, unknown version, too few bytes.
    pub fn header_len(prefix: &[u8]) -> std::result::Result<usize, String> {
        if prefix.get(..6) != Some(NPY_MAGIC.as_slice()) {
            return Err("byte 0: not a .npy file (the magic \\x93NUMPY is missing)".into());
        }
        let (Some(&major), Some(&minor)) = (prefix.get(6), prefix.get(7)) else {
            return Err("byte 6: file ends inside the version".into());
        };
        let (len, at) = match major {
            1 => (prefix.get(8..10).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]]))), 10),
            2 | 3 => (
                prefix
                    .get(8..12)
                    .and_then(|b| usize::try_from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()),
                12,
            ),
            _ => return Err(format!("byte 6: unsupported .npy format version {major}.{minor}")),
        };
        let len = len.ok_or_else(|| "byte 8: file ends inside the header length".to_string())?;
        if len > MAX_HEADER {
            return Err(format!("byte 8: header length {len} is implausibly large"));
        }
        Ok(at + len)
    }

    /// Parses a whole header (`bytes` holds at least [`NpyHeader::header_len`] bytes; more is
    /// ignored). Never panics on any input.
    ///
    /// # Errors
    /// A sentence saying what is wrong and where (a byte offset).
    pub fn parse(bytes: &[u8]) -> std::result::Result<NpyHeader, String> {
        let total = Self::header_len(bytes)?;
        let major = bytes[6];
        let minor = bytes[7];
        let start = if major == 1 { 10 } else { 12 };
        let Some(dict) = bytes.get(start..total) else {
            return Err(format!("byte {}: file ends inside the {}-byte header", bytes.len(), total));
        };
        let mut p = DictParser { s: dict, pos: 0, base: start };
        let entries = p.dict()?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        for (key, value) in entries {
            match (key.as_str(), value) {
                ("descr", Value::Str(s)) => descr = Some(s),
                ("descr", _) => return Err("structured or non-string dtype descr is not supported".into()),
                ("fortran_order", Value::Bool(b)) => fortran = Some(b),
                ("shape", Value::Tuple(t)) => shape = Some(t),
                (k @ ("fortran_order" | "shape"), v) => {
                    return Err(format!("'{k}' has an unexpected value {v:?}"));
                }
                // NumPy ignores nothing else, but extra keys do not make the data unreadable.
                _ => {}
            }
        }
        let descr = descr.ok_or("the header has no 'descr'")?;
        let fortran_order = fortran.ok_or("the header has no 'fortran_order'")?;
        let shape = shape.ok_or("the header has no 'shape'")?;
        let (dtype, little_endian) = parse_descr(&descr)?;
        if product(&shape).and_then(|n| n.checked_mul(dtype.size())).is_none() {
            return Err(format!("shape {shape:?} overflows"));
        }
        Ok(NpyHeader {
            version: (major, minor),
            dtype,
            little_endian,
            fortran_order,
            shape,
            data_offset: total as u64,
        })
    }

    /// Bytes of data the header promises.
    pub fn data_len(&self) -> u64 {
        (product(&self.shape).unwrap_or(usize::MAX) as u64).saturating_mul(self.dtype.size() as u64)
    }

    /// Encodes a little-endian, C-order header exactly as NumPy's `np.save` writes it (version
    /// 1.0 unless the header needs 2.0), so that files written by NumPy round-trip byte for byte.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bfloat16, which has no NumPy type string.
    pub fn encode(dtype: DType, shape: &[usize]) -> Result<Vec<u8>> {
        let descr = descr_of(dtype).ok_or_else(|| {
            Error::InvalidArgument("bfloat16 has no .npy type string; it cannot be exported to .npy".into())
        })?;
        let shape_repr = match shape {
            [] => "()".to_string(),
            [n] => format!("({n},)"),
            dims => format!("({})", dims.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
        };
        let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
        if let Some(first) = shape.first() {
            dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(first.to_string().len())));
        }
        let hlen = dict.len() + 1;
        let wrap = |len_bytes: usize| ALIGN - ((8 + len_bytes + hlen) % ALIGN);
        let (version, len_bytes) = if hlen + wrap(2) <= usize::from(u16::MAX) { (1u8, 2) } else { (2u8, 4) };
        let pad = wrap(len_bytes);
        let mut out = Vec::with_capacity(8 + len_bytes + hlen + pad);
        out.extend_from_slice(NPY_MAGIC);
        out.extend_from_slice(&[version, 0]);
        let n = hlen + pad;
        if version == 1 {
            out.extend_from_slice(&(n as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(out.len() + pad, b' ');
        out.push(b'\n');
        Ok(out)
    }
}

/// The little-endian NumPy type string of `dtype`; `None` for bfloat16.
fn descr_of(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::Bool => "|b1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

/// `'<f4'` → (F32, little-endian).
fn parse_descr(descr: &str) -> std::result::Result<(DType, bool), String> {
    let bad = || format!("unsupported dtype descr '{descr}'");
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(bad)?;
    let little = match order {
        '<' | '|' => true,
        '>' => false,
        '=' => cfg!(target_endian = "little"),
        _ => return Err(bad()),
    };
    let dtype = match chars.as_str() {
        "u1" => DType::U8,
        "i1" => DType::I8,
        "b1" => DType::Bool,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(bad()),
    };
    Ok((dtype, if dtype.size() == 1 { true } else { little }))
}

#[derive(Debug)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A parser of the small Python-literal subset `.npy` headers use.
struct DictParser<'a> {
    s: &'a [u8],
    pos: usize,
    base: usize,
}

impl DictParser<'_> {
    fn err(&self, what: &str) -> String {
        format!("byte {}: {what}", self.base + self.pos)
    }

    fn ws(&mut self) {
        while self.s.get(self.pos).is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) { Ok(()) } else { Err(self.err(&format!("expected '{}'", c as char))) }
    }

    fn dict(&mut self) -> std::result::Result<Vec<(String, Value)>, String> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        loop {
            if self.eat(b'}') {
                return Ok(out);
            }
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.value()?;
            out.push((key, value));
            if !self.eat(b',') {
                self.expect(b'}')?;
                return Ok(out);
            }
        }
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let quote = match self.s.get(self.pos) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("expected a quoted string")),
        };
        let start = self.pos + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == quote)
            .ok_or_else(|| self.err("unterminated string"))?;
        self.pos = start + len + 1;
        String::from_utf8(self.s[start..start + len].to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }

    fn value(&mut self) -> std::result::Result<Value, String> {
        self.ws();
        match self.s.get(self.pos) {
            Some(b'\'' | b'"') => self.string().map(Value::Str),
            Some(b'(') => {
                self.pos += 1;
                let mut dims = Vec::new();
                loop {
                    if self.eat(b')') {
                        return Ok(Value::Tuple(dims));
                    }
                    dims.push(self.int()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        // Python reads `(2)` as the number 2, which NumPy refuses as a shape (look
                        // 100: taken as `(2,)`).
                        if dims.len() == 1 {
                            return Err(self.err("(n) is a number, not a tuple: a shape of one axis is (n,)"));
                        }
                        return Ok(Value::Tuple(dims));
                    }
                }
            }
            _ if self.s[self.pos..].starts_with(b"True") => {
                self.pos += 4;
                Ok(Value::Bool(true))
            }
            _ if self.s[self.pos..].starts_with(b"False") => {
                self.pos += 5;
                Ok(Value::Bool(false))
            }
            Some(b'[') => Err(self.err(
                "a list: a structured dtype (not supported), or a shape not written as a tuple (NumPy writes (n, ...))",
            )),
            _ => Err(self.err("expected a string, a tuple, True or False")),
        }
    }

    fn int(&mut self) -> std::result::Result<usize, String> {
        self.ws();
        let start = self.pos;
        while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("expected a non-negative integer"));
        }
        let digits = std::str::from_utf8(&self.s[start..self.pos]).map_err(|_| self.err("bad integer"))?;
        let n = digits.parse::<usize>().map_err(|_| self.err("integer out of range"))?;
        // Python 2 wrote long integers with an `L` suffix.
        if matches!(self.s.get(self.pos), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        Ok(n)
    }
}

/// Reads the header of the `.npy` file `path` from `r`.
fn read_header(r: &mut impl Read, path: &Path) -> Result<NpyHeader> {
    let bad = |reason: String| Error::BadInput { path: path.to_path_buf(), reason, source: None };
    let mut buf = vec![0u8; PREFIX];
    let got = read_full(r, &mut buf, path)?;
    buf.truncate(got);
    let total = NpyHeader::header_len(&buf).map_err(bad)?;
    if total > buf.len() {
        let have = buf.len();
        buf.resize(total, 0);
        let more = read_full(r, &mut buf[have..], path)?;
        if more < total - have {
            return Err(bad(format!("byte {}: file ends inside the {total}-byte header", have + more)));
        }
    }
    // The prefix may have read into the data of a tiny v1 header; keep it for the caller.
    let h = NpyHeader::parse(&buf).map_err(bad)?;
    if buf.len() > total {
        return Err(bad(format!(
            "byte 8: header length {} is too short to hold a header",
            total.saturating_sub(10)
        )));
    }
    Ok(h)
}

/// Converts the `.npy` file `input` into a dense dataset at `out`: one record per slice along axis
/// 0 (a 1-D array becomes a dataset of scalars, item shape `[]`), elements turned to native byte
/// order while streaming.
///
/// A 0-D array becomes a dataset of one scalar record (exported back, it has shape `(1,)`).
/// Fortran-order arrays are refused unless at most one axis is longer than 1 (then both orders
/// are the same bytes).
///
/// # Errors
/// [`Error::BadInput`] naming `input` for a malformed header, an unsupported dtype, Fortran order,
/// a data section of the wrong size (expected vs actual bytes), a `bool` byte other than 0/1,
/// more than 2^20 records of zero-byte items, or an input that is not a regular file;
/// [`Error::AlreadyExists`] when `out` exists and `opts` does not overwrite; [`Error::Io`] naming
/// the file. On any error nothing is left at `out` (nor `out.partial`).
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{DenseDataset, WriteOptions, convert, convert::NpyHeader, DType};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-convert-npy-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut file = NpyHeader::encode(DType::F32, &[3, 2])?;
/// for x in 0..6 {
///     file.extend_from_slice(&(x as f32).to_le_bytes());
/// }
/// std::fs::write(dir.join("a.npy"), &file)?;
/// let s = convert::npy(dir.join("a.npy"), dir.join("a"), WriteOptions::new())?;
/// assert_eq!(s.records, 3);
/// let ds = DenseDataset::<f32>::open(dir.join("a"))?;
/// assert_eq!(ds.get_vec(&[2])?, vec![4.0, 5.0]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn npy(input: impl AsRef<Path>, out: impl AsRef<Path>, opts: WriteOptions) -> Result<ConvertSummary> {
    npy_part(input, out, opts, Part::WHOLE)
}

/// [`npy`] of only part `part` of the rows: the records [`Part::rows`] of axis 0, the same
/// records (and the same checks of the header and the file's length) as the whole conversion's
/// records there. The part's rows are read from where they lie (the file is seeked, not read up
/// to them); a part of no rows is an empty dataset of the array's item shape.
///
/// # Errors
/// As [`npy`]; [`Error::InvalidArgument`] for a part out of range.
pub fn npy_part(
    input: impl AsRef<Path>,
    out: impl AsRef<Path>,
    opts: WriteOptions,
    part: Part,
) -> Result<ConvertSummary> {
    let part = part.checked()?;
    let (input, out) = (input.as_ref(), out.as_ref());
    let bad = |reason: String| Error::BadInput { path: input.to_path_buf(), reason, source: None };
    let (file, file_len) = open_input(input)?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let h = read_header(&mut r, input)?;
    if h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(bad("fortran_order: True is not supported; save the array in C order".into()));
    }
    let (records, item_shape) = match h.shape.split_first() {
        Some((&n, rest)) => (n, rest.to_vec()),
        None => (1, Vec::new()),
    };
    check_records(records, input, &opts)?;
    let item_bytes = checked_item_bytes(records, h.dtype, &item_shape, input)?;
    let expected = h.data_len();
    let actual = file_len.saturating_sub(h.data_offset);
    if actual < expected {
        return Err(truncated(input, expected, actual));
    }
    if actual > expected {
        return Err(bad(format!(
            "{} trailing bytes after the {expected}-byte data section",
            actual - expected
        )));
    }
    let schema = Schema::dense(h.dtype, item_shape);
    let rows = part.rows(records as u64);
    let skip = rows.start * item_bytes as u64;
    let mut w = DatasetWriter::with_schema(out, schema, opts.clone())?;
    // Within the file: `skip` is below the data's length, checked against the file's above.
    let skip_signed = i64::try_from(skip).map_err(|_| bad(format!("a data offset of {skip} bytes")))?;
    r.seek_relative(skip_signed).map_err(|e| Error::io("seek", input, e))?;
    // A read that comes up short means the file shrank after it was measured.
    let data = DataSection { path: input, offset: h.data_offset, expected, first: rows.start };
    let count = (rows.end - rows.start) as usize;
    stream_records(&mut r, &mut w, (h.dtype, h.little_endian), (count, item_bytes), &data, |read| {
        opts.report(h.data_offset + skip + read)
    })?;
    finish(w, count as u64 * item_bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u8, dict: &str) -> Vec<u8> {
        let mut v = NPY_MAGIC.to_vec();
        v.extend_from_slice(&[version, 0]);
        if version == 1 {
            v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            v.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        v.extend_from_slice(dict.as_bytes());
        v
    }

    #[test]
    fn parses_every_version() {
        let d = "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 28, 28), }  \n";
        for v in [1, 2, 3] {
            let h = NpyHeader::parse(&header(v, d)).unwrap();
            assert_eq!(h.version, (v, 0));
            assert_eq!(h.dtype, DType::F32);
            assert!(h.little_endian && !h.fortran_order);
            assert_eq!(h.shape, vec![10, 28, 28]);
            assert_eq!(h.data_offset as usize, header(v, d).len());
        }
    }

    #[test]
    fn parses_scalar_and_one_d_shapes_and_big_endian() {
        let h = NpyHeader::parse(&header(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (), }\n"))
            .unwrap();
        assert_eq!((h.dtype, h.little_endian, h.shape.as_slice()), (DType::I64, false, &[][..]));
        let h =
            NpyHeader::parse(&header(1, "{\"shape\": (7,), \"fortran_order\": True, \"descr\": \"|b1\"}"))
                .unwrap();
        assert_eq!((h.dtype, h.fortran_order, h.shape.as_slice()), (DType::Bool, true, &[7][..]));
        let h = NpyHeader::parse(&header(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3L, 4L), }"))
            .unwrap();
        assert_eq!(h.shape, vec![3, 4]);
    }

    #[test]
    fn rejects_malformed_headers_without_panicking() {
        for (bad, says) in [
            ("", "byte 10: expected '{'"),
            ("{", "byte 11: expected a quoted string"),
            ("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype descr '<c8'"),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                "byte 20: a list: a structured dtype (not supported)",
            ),
            // Look 100: a shape as a list, and `(2)` (the number 2 to Python, refused by NumPy).
            ("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", "a shape not written as a tuple"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", "a shape of one axis is (n,)"),
            ("{'descr': '<f4', 'shape': (1,), }", "the header has no 'fortran_order'"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
                "byte 61: expected a non-negative integer",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
                "byte 84: integer out of range",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
                "overflows",
            ),
        ] {
            assert!(matches!(NpyHeader::parse(&header(1, bad)), Err(m) if m.contains(says)), "{bad}");
        }
        let says =
            |bytes: &[u8], start: &str| matches!(NpyHeader::parse(bytes), Err(m) if m.starts_with(start));
        assert!(says(b"\x93NUMPY", "byte 6: file ends inside the version"));
        assert!(says(b"PK\x03\x04", "byte 0: not a .npy file"));
        assert!(says(b"\x93NUMPY\x09\x00\x00\x00", "byte 6: unsupported .npy format version 9.0"));
        let mut short = header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }");
        short.truncate(20);
        assert!(says(&short, "byte 20: file ends inside the 67-byte header"));
    }

    #[test]
    fn encode_matches_numpy_layout() {
        // np.save of np.zeros((8, 2, 4), '<f4') writes exactly this 128-byte header.
        let h = NpyHeader::encode(DType::F32, &[8, 2, 4]).unwrap();
        let mut want =
            b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (8, 2, 4), }".to_vec();
        want.resize(127, b' ');
        want.push(b'\n');
        assert_eq!(h, want);
        assert_eq!(h.len() % 64, 0);
        let back = NpyHeader::parse(&h).unwrap();
        assert_eq!((back.dtype, back.shape, back.data_offset), (DType::F32, vec![8, 2, 4], 128));
        let scalar = NpyHeader::encode(DType::Bool, &[]).unwrap();
        assert_eq!(NpyHeader::parse(&scalar).unwrap().shape, Vec::<usize>::new());
        assert!(
            matches!(NpyHeader::encode(DType::BF16, &[1]), Err(Error::InvalidArgument(m)) if m.contains("bfloat16")),
        );
    }
}
