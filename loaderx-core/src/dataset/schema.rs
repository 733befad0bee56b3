//! `schema.msgpack`: the one piece of loaderx-level metadata beside a store.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::dtype::DType;
use crate::{Error, Result};

pub use crate::store::SCHEMA_FILE;

/// The most dimensions a shape may have (NumPy's own limit).
pub const MAX_DIMS: usize = 64;
/// The most a `schema.msgpack` may hold: a reader refuses a longer file before reading it (a
/// schema of [`MAX_DIMS`] dimensions encodes in under 1 KiB).
const MAX_SCHEMA_LEN: u64 = 64 << 10;

/// Whether every record has the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Every record is one item of exactly `shape`.
    Dense,
    /// Records are variable-length sequences of rows of `shape`.
    Ragged,
    /// Every record is one encoded image file (JPEG, PNG or WebP, as the file was, or
    /// re-encoded when larger than asked): `u8` bytes, shape `[]`. Read as bytes by a ragged
    /// reader; a dense reader refuses it.
    Image,
}

/// What a dataset's records are: kind, element type and shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Dense or ragged.
    pub kind: Kind,
    /// Element type.
    pub dtype: DType,
    /// Dense: the item shape of every record (`[]` for scalars). Ragged: the shape of one row
    /// (`[]` for sequences of scalars).
    pub shape: Vec<usize>,
}

/// A schema as [`Schema::encode`] writes it: its fields and their checksum.
#[derive(Serialize)]
struct Sealed<'a> {
    kind: Kind,
    dtype: DType,
    shape: &'a [usize],
    crc32c: u32,
}

/// A schema as [`Schema::decode`] reads it: the checksum is absent from schemas written before
/// they carried one.
#[derive(Deserialize)]
struct Opened {
    kind: Kind,
    dtype: DType,
    shape: Vec<usize>,
    #[serde(default)]
    crc32c: Option<u32>,
}

/// `dense` or `ragged`, as `schema.msgpack` spells it.
impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Dense => "dense",
            Kind::Ragged => "ragged",
            Kind::Image => "image",
        })
    }
}

/// Kind, element type and shape, as `dense f32 [28, 28]`.
impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {:?}", self.kind, self.dtype, self.shape)
    }
}

impl Schema {
    /// A dense schema.
    pub fn dense(dtype: DType, item_shape: Vec<usize>) -> Schema {
        Schema { kind: Kind::Dense, dtype, shape: item_shape }
    }

    /// A ragged schema.
    pub fn ragged(dtype: DType, row_shape: Vec<usize>) -> Schema {
        Schema { kind: Kind::Ragged, dtype, shape: row_shape }
    }

    /// The schema of encoded image files, one a record: `image u8 []`.
    pub fn image() -> Schema {
        Schema { kind: Kind::Image, dtype: DType::U8, shape: Vec::new() }
    }

    /// Whether its records are variable-length runs of rows (ragged records, and encoded
    /// images: runs of bytes).
    pub fn is_ragged(&self) -> bool {
        matches!(self.kind, Kind::Ragged | Kind::Image)
    }

    /// Elements in one dense item or one ragged row.
    pub fn unit_elems(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes in one dense item or one ragged row.
    pub fn unit_bytes(&self) -> usize {
        self.unit_elems() * self.dtype.size()
    }

    /// Checks that a record can hold one dense item or one ragged row of this schema: the check
    /// [`Schema::decode`] (so [`Schema::read`]) makes of every schema it reads. A writer that
    /// makes it first never leaves a dataset its readers refuse as corrupt.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the shape and element type when their bytes overflow
    /// or exceed the largest record (a v2 record's 4 GiB - 1 bytes).
    pub fn validate(&self) -> Result<()> {
        self.oversize().map_or(Ok(()), |reason| Err(Error::InvalidArgument(reason)))
    }

    /// Why no record can hold one item (row) of this schema, or `None` when one can.
    fn oversize(&self) -> Option<String> {
        if self.shape.len() > MAX_DIMS {
            return Some(format!("a shape of {} dimensions has more than {MAX_DIMS}", self.shape.len()));
        }
        if self.kind == Kind::Image && (self.dtype != DType::U8 || !self.shape.is_empty()) {
            return Some(format!(
                "encoded images are u8 bytes of shape [], not {} of shape {:?}",
                self.dtype, self.shape
            ));
        }
        // A zero anywhere makes no elements, however large the dimensions before it.
        let elems = if self.shape.contains(&0) {
            Some(0)
        } else {
            self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
        };
        // A ragged record is its rows' bytes: rows of no bytes would lose its row count.
        if self.kind == Kind::Ragged && elems == Some(0) {
            return Some(format!(
                "rows of shape {:?} hold no bytes, so a record's row count would be lost",
                self.shape
            ));
        }
        match elems.and_then(|e| e.checked_mul(self.dtype.size())) {
            Some(b) if b <= crate::format::v2::MAX_RECORD_SIZE => None,
            _ => Some(format!("shape {:?} of {} is larger than a record can be", self.shape, self.dtype)),
        }
    }

    /// Encodes as MessagePack: a map of `kind`, `dtype`, `shape` and `crc32c`, the CRC-32C of
    /// the same map without it, which [`Schema::decode`] checks.
    pub fn encode(&self) -> Vec<u8> {
        let sealed = Sealed { kind: self.kind, dtype: self.dtype, shape: &self.shape, crc32c: self.crc32c() };
        rmp_serde::to_vec_named(&sealed).expect("a schema always serialises")
    }

    /// The CRC-32C of the schema's MessagePack map of `kind`, `dtype` and `shape` (named fields,
    /// the encoder's smallest forms: one schema has one encoding).
    fn crc32c(&self) -> u32 {
        crc32c::crc32c(&rmp_serde::to_vec_named(self).expect("a schema always serialises"))
    }

    /// Decodes the MessagePack bytes of the file `path`; never panics on any input.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `path`: bytes that are no schema (the MessagePack decoder's
    /// error its [`source`](std::error::Error::source)), or a shape larger than a record can be.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Schema> {
        let corrupt =
            |reason: String, source| Error::Corrupt { path: path.to_path_buf(), offset: 0, reason, source };
        // Damage is one of two things: bytes that are no schema, or a schema whose checksum
        // (or, written without one, whose own encoding) is not what the bytes hold.
        let opened: Opened =
            rmp_serde::from_slice(bytes).map_err(|e| corrupt("not a schema".into(), Some(e.into())))?;
        let s = Schema { kind: opened.kind, dtype: opened.dtype, shape: opened.shape };
        if let Some(reason) = s.oversize() {
            return Err(corrupt(reason, None));
        }
        match opened.crc32c {
            // One flipped byte can swap an element type for another of its width (`u32` and
            // `f32`), which no length shows: every record would be read as the other type.
            Some(stored) if stored != s.crc32c() => Err(corrupt(
                format!(
                    "it reads as {s}, but its checksum does not match (crc32c {stored:#010x} stored, \
                     {:#010x} computed): the file is damaged",
                    s.crc32c()
                ),
                None,
            )),
            Some(_) => Ok(s),
            // A schema written before schemas carried their checksum reads as it always did, when
            // its bytes are what loaderx wrote for it: a change that hid a checksum (an array's
            // length that swallows the field) leaves bytes no writer made.
            None if rmp_serde::to_vec_named(&s).is_ok_and(|plain| plain == bytes) => Ok(s),
            None => Err(corrupt(
                format!(
                    "it reads as {s} without a checksum, but not in the bytes loaderx writes: the file is damaged"
                ),
                None,
            )),
        }
    }

    /// Reads `dir/schema.msgpack`.
    ///
    /// # Errors
    /// [`Error::NotAStore`] when `dir` does not exist or holds neither a schema nor a store;
    /// [`Error::Schema`] for a raw store without a schema; [`Error::Corrupt`] when it does not
    /// decode.
    pub fn read(dir: &Path) -> Result<Schema> {
        refuse_empty(dir)?;
        // A converter killed between writing the schema and renaming its staging directory into
        // place leaves a complete-looking `OUT.partial`: never take it for a dataset.
        if dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".partial")) {
            return Err(Error::Schema {
                path: dir.to_path_buf(),
                reason: "this is the staging directory of an unfinished conversion, not a dataset".into(),
            });
        }
        let path = dir.join(SCHEMA_FILE);
        let bytes = match crate::store::read_capped(&path, MAX_SCHEMA_LEN) {
            Ok(Some(b)) => b,
            // A file given as the dataset reads as "not a directory" (its `schema.msgpack`).
            Ok(None) => return Err(missing(dir)),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(missing(dir));
            }
            Err(e) => return Err(e),
        };
        Schema::decode(&bytes, &path)
    }

    /// Writes `dir/schema.msgpack` durably (temporary file, sync, rename, directory sync), once
    /// [`Schema::validate`] has passed: no face writes a schema that [`Schema::read`] refuses.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] from [`Schema::validate`] or for an empty path; [`Error::Io`]
    /// naming the file.
    pub fn write(&self, dir: &Path) -> Result<()> {
        refuse_empty(dir)?;
        self.validate()?;
        // The dataset's directory named when it is none (the temporary file's path was).
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                let e = std::io::Error::from(std::io::ErrorKind::NotADirectory);
                return Err(Error::io("write a schema into", dir, e));
            }
            Err(e) => return Err(Error::io("write a schema into", dir, e)),
        }
        crate::store::write_atomic(dir, SCHEMA_FILE, &self.encode())
    }
}

/// An empty path names no dataset: a bad argument, nothing read or written (look 168, L168-2:
/// `lx_schema_write("")` replaced the working directory's schema, then said `LX_ERR_IO`).
fn refuse_empty(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument("the dataset's path is empty".into()));
    }
    Ok(())
}

/// Why `dir` is not a dataset when it has no `schema.msgpack` to read.
fn missing(dir: &Path) -> Error {
    let path = dir.to_path_buf();
    if !dir.exists() {
        Error::NotAStore { path, reason: "it does not exist".into() }
    } else if !dir.is_dir() {
        Error::NotAStore { path, reason: not_a_directory(dir) }
    } else if dir.join("index.zr").exists() || dir.join("meta.zr").exists() {
        Error::Schema {
            path,
            reason: "a raw Zrecord store without schema.msgpack: open it with Store".into(),
        }
    } else if let Some(inside) = crate::store::datasets_in(dir) {
        // What `convert images`, `parquet` and `safetensors` write: a directory of datasets.
        Error::NotAStore {
            reason: format!(
                "a directory of datasets ({}), not one: open one of them, e.g. {}",
                inside.join(", "),
                dir.join(&inside[0]).display()
            ),
            path,
        }
    } else {
        Error::NotAStore {
            path,
            reason: "it holds no schema.msgpack and no store (index.zr or meta.zr)".into(),
        }
    }
}

/// What a file given where a dataset directory was expected is, and how to make it one.
fn not_a_directory(file: &Path) -> String {
    let mut magic = [0u8; 6];
    // A regular file's first bytes only: a FIFO under the name would block the open and the
    // read until a writer came (look 56, H1).
    let npy = crate::sys::open_regular(std::fs::OpenOptions::new().read(true), file)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == *b"\x93NUMPY");
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
    if npy || ext == "npy" {
        "it is a NumPy .npy file, not a dataset directory: convert it once (`loaderx convert npy FILE OUT`, \
         `loaderx::convert::npy`, or `loaderx.converter.from_numpy` in Python) and open OUT"
            .into()
    } else if ext == "safetensors" {
        "it is a safetensors file, not a dataset directory: convert it once (`loaderx convert safetensors \
         FILE OUT`) and open OUT/<tensor name>"
            .into()
    } else if std::fs::metadata(file).is_ok_and(|m| m.is_file()) {
        "it is a file, not a dataset directory".into()
    } else {
        "it is not a directory (a device, socket or FIFO)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Look 56, H1: a FIFO given as a dataset blocked its open for good, reading its first
    /// bytes for a NumPy header.
    #[cfg(unix)]
    #[test]
    fn a_fifo_given_as_a_dataset_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("data");
        // std has no mkfifo: the coreutils command makes one.
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(Schema::read(&path).map(|_| ())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the open returns");
        let Err(Error::NotAStore { reason, .. }) = got else { panic!("{got:?}") };
        assert!(reason.contains("not a directory"), "{reason}");
    }

    #[test]
    fn a_staging_directory_never_reads_as_a_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("out.partial");
        std::fs::create_dir(&staging).unwrap();
        Schema::dense(DType::U8, vec![]).write(&staging).unwrap();
        assert!(matches!(Schema::read(&staging), Err(Error::Schema { .. })));
        let done = dir.path().join("out");
        std::fs::rename(&staging, &done).unwrap();
        assert_eq!(Schema::read(&done).unwrap(), Schema::dense(DType::U8, vec![]));
    }

    #[test]
    fn a_file_given_as_a_dataset_says_what_it_is_and_how_to_convert_it() {
        let dir = tempfile::tempdir().unwrap();
        let npy = dir.path().join("x.npy");
        std::fs::write(&npy, b"\x93NUMPY\x01\x00").unwrap();
        let named = dir.path().join("labels.bin");
        std::fs::write(&named, b"\x93NUMPY\x01\x00").unwrap();
        for f in [&npy, &named] {
            let e = Schema::read(f).unwrap_err();
            let Error::NotAStore { ref path, ref reason } = e else { panic!("{e}") };
            assert!(path == f && reason.contains(".npy file") && reason.contains("convert npy"), "{e}");
        }
        let other = dir.path().join("notes.txt");
        std::fs::write(&other, b"hello").unwrap();
        let e = Schema::read(&other).unwrap_err();
        assert!(matches!(e, Error::NotAStore { ref reason, .. } if reason.contains("a file")), "{e}");
    }

    #[test]
    fn schema_round_trips_and_rejects_garbage() {
        let s = Schema::dense(DType::F32, vec![28, 28]);
        let at = Path::new(SCHEMA_FILE);
        assert_eq!(Schema::decode(&s.encode(), at).unwrap(), s);
        let garbage = Schema::decode(b"\xff\x00garbage", at).unwrap_err();
        let cause = std::error::Error::source(&garbage).expect("the decoder's error is the source");
        assert!(cause.downcast_ref::<rmp_serde::decode::Error>().is_some(), "{cause}");
        let huge = Schema::dense(DType::F64, vec![1 << 20, 1 << 20]);
        assert!(matches!(
            Schema::decode(&huge.encode(), at),
            Err(Error::Corrupt { path, offset: 0, reason, .. })
                if path == at && reason.contains("larger than a record can be")
        ));
    }

    #[test]
    fn no_one_byte_change_reads_as_another_schema() {
        let at = Path::new(SCHEMA_FILE);
        for s in [
            Schema::dense(DType::U32, vec![4]),
            Schema::ragged(DType::U16, vec![]),
            Schema::dense(DType::F64, vec![3, 300, 70_000]),
            Schema::image(),
        ] {
            let bytes = s.encode();
            let mut damaged = 0;
            for at_byte in 0..bytes.len() {
                for value in 0..=u8::MAX {
                    let mut b = bytes.clone();
                    if b[at_byte] == value {
                        continue;
                    }
                    b[at_byte] = value;
                    // A change in a field's name drops the checksum and leaves the schema whole;
                    // every other change is refused.
                    match Schema::decode(&b, at) {
                        Ok(read) => assert_eq!(read, s, "byte {at_byte} = {value:#04x} of {s}"),
                        Err(e) => {
                            assert!(matches!(e, Error::Corrupt { ref path, .. } if path == at), "{e}");
                            damaged += 1;
                        }
                    }
                }
            }
            assert!(damaged > 0);
        }
        // u32 read as f32: the one-byte change that no record's length shows.
        let s = Schema::dense(DType::U32, vec![4]);
        let mut b = s.encode();
        let i = b.windows(3).position(|w| w == b"u32").unwrap();
        b[i] = b'f';
        let e = Schema::decode(&b, at).unwrap_err();
        assert!(e.to_string().contains("checksum does not match"), "{e}");
    }

    #[test]
    fn a_schema_written_without_a_checksum_still_reads() {
        let s = Schema::ragged(DType::I64, vec![2, 3]);
        let unsealed = rmp_serde::to_vec_named(&s).unwrap();
        assert_eq!(Schema::decode(&unsealed, Path::new(SCHEMA_FILE)).unwrap(), s);
    }

    #[test]
    fn validate_refuses_exactly_the_shapes_decode_refuses() {
        let at = Path::new(SCHEMA_FILE);
        let largest = crate::format::v2::MAX_RECORD_SIZE;
        for (s, fits) in [
            (Schema::dense(DType::U8, vec![largest]), true),
            (Schema::dense(DType::U8, vec![largest + 1]), false),
            (Schema::dense(DType::U8, vec![8 << 30]), false),
            (Schema::ragged(DType::F32, vec![1 << 30]), false),
            (Schema::dense(DType::U8, vec![usize::MAX, 2]), false),
            (Schema::dense(DType::F32, vec![0, usize::MAX]), true),
            // A zero after dimensions whose product overflows: still no bytes.
            (Schema::dense(DType::F64, vec![1 << 62, 4, 0]), true),
            (Schema::ragged(DType::U16, vec![]), true),
            // Ragged rows of no bytes: a record's row count would be lost.
            (Schema::ragged(DType::F32, vec![0]), false),
            (Schema::ragged(DType::F32, vec![3, 0]), false),
            (Schema::dense(DType::F32, vec![65; 65]), false),
        ] {
            let decoded = Schema::decode(&s.encode(), at);
            assert_eq!(s.validate().is_ok(), fits, "{s}");
            assert_eq!(decoded.is_ok(), fits, "{s}");
            if !fits {
                assert!(matches!(s.validate(), Err(Error::InvalidArgument(_))), "{s}");
                assert!(matches!(decoded, Err(Error::Corrupt { .. })), "{s}");
            }
        }
    }
}
