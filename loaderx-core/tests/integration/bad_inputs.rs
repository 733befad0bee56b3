//! Every malformed input of the store and loader issues, table-driven: each case damages a fresh
//! store or dataset, runs one operation, and expects a clean typed error (a panic fails the test)
//! naming the right path or index, with every file of the directory byte-for-byte unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loaderx_core::{
    Codec, DType, DataLoader, DenseDataset, Error, Format, MAX_RECORD_SIZE, MAX_RECORDS, RaggedDataset,
    Sampler, SamplerMode, Store, StoreOptions, WriteOptions, convert, convert::NpyHeader,
};

use crate::common::{entry_at, entry_fields, opts, patch, record};

/// A file's length and its non-zero 64 KiB pieces.
type FileImage = (u64, Vec<(usize, Vec<u8>)>);

/// Every file under `dir`, by relative path: length and the non-zero 64 KiB pieces of its first
/// 4 MiB. Past that, the sparse 256 MiB `meta.zr` holds only table entries of records these
/// 200-record stores do not have, and reading its zeros twice per case would dominate the test.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, FileImage> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let len = std::fs::metadata(&p).unwrap().len();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(std::fs::File::open(&p).unwrap(), 4 << 20),
                &mut bytes,
            )
            .unwrap();
            let zero = [0u8; 1 << 16];
            let pieces = bytes
                .chunks(1 << 16)
                .enumerate()
                .filter(|(_, c)| *c != &zero[..c.len()])
                .map(|(i, c)| (i, c.to_vec()))
                .collect();
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), (len, pieces));
        }
    }
    out
}

fn entry_offset(idx: u64) -> u64 {
    16 * (1 + idx)
}

/// A v1 store of 200 self-describing records at `dir/s`.
fn store(dir: &Path, codec: Codec) -> PathBuf {
    store_in(dir, codec, Format::V1)
}

/// A store of 200 self-describing records at `dir/s` in `format`.
fn store_in(dir: &Path, codec: Codec, format: Format) -> PathBuf {
    let path = dir.join("s");
    let s = Store::create(&path, opts(format)).unwrap();
    crate::common::append(&s, &(0..200).map(record).collect::<Vec<_>>(), codec);
    path
}

/// A v2 store of 200 records.
fn v2(dir: &Path, codec: Codec) -> PathBuf {
    store_in(dir, codec, Format::V2)
}

/// Flips one bit of byte `at` of `path`.
fn flip(path: &Path, at: u64) {
    let b = std::fs::read(path).unwrap()[at as usize];
    patch(path, at, &[b ^ 0x10]);
}

/// Opens read-only with verified reads.
fn verified(s: &Path) -> Result<Store, Error> {
    Store::open_with(s, StoreOptions::new().verify_reads(true))
}

fn ends(p: &Path, name: &str) -> bool {
    p.ends_with(name)
}

type Case = (&'static str, fn(&Path) -> PathBuf, fn(&Path) -> Result<(), Error>, fn(&Error, &Path) -> bool);

#[expect(clippy::too_many_lines, reason = "a table of cases, one entry of a few lines each")]
fn cases() -> Vec<Case> {
    vec![
        (
            "wrong magic",
            |d| {
                let s = store(d, Codec::Raw);
                patch(&s.join("meta.zr"), 0, b"NOPE");
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::NotAStore { path, .. } if *path == s.join("meta.zr")),
        ),
        (
            "truncated meta",
            |d| {
                let s = store(d, Codec::Raw);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(s.join("meta.zr"))
                    .unwrap()
                    .set_len(4096)
                    .unwrap();
                s
            },
            |s| Store::open_rw(s, StoreOptions::new()).map(drop),
            |e, _| matches!(e, Error::Corrupt { path, .. } if ends(path, "meta.zr")),
        ),
        (
            "table entry pointing outside its chunk",
            |d| {
                let s = store(d, Codec::Raw);
                patch(&s.join("meta.zr"), entry_offset(5), &0x7000_0000u32.to_ne_bytes());
                s
            },
            |s| Store::open(s)?.gather(&[4, 5]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 5, path, .. } if ends(path, "0.zr")),
        ),
        (
            "bad codec tag",
            |d| {
                let s = store(d, Codec::Zstd);
                patch(&s.join("meta.zr"), entry_offset(7) + 14, &[9]);
                s
            },
            |s| Store::open(s)?.gather(&[6, 7]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 7, .. }),
        ),
        (
            "corrupt zstd frame",
            |d| {
                let s = store(d, Codec::Zstd);
                let meta = std::fs::read(s.join("meta.zr")).unwrap();
                let e = &meta[entry_offset(1) as usize..entry_offset(1) as usize + 16];
                let off = u32::from_ne_bytes(e[0..4].try_into().unwrap());
                let phys = u32::from_ne_bytes(e[4..8].try_into().unwrap());
                let at = u64::from(off + phys / 2);
                let b = std::fs::read(s.join("0.zr")).unwrap()[at as usize];
                patch(&s.join("0.zr"), at, &[b ^ 0xA5]);
                s
            },
            |s| Store::open(s)?.gather(&[1]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 1, path, .. } if ends(path, "0.zr")),
        ),
        (
            "missing dictionary",
            |d| {
                let s = store(d, Codec::ZstdDict);
                std::fs::remove_file(s.join("dict.zr")).unwrap();
                s
            },
            |s| Store::open(s)?.gather(&[1]).map(drop),
            |e, s| matches!(e, Error::MissingDictionary { path } if path == s),
        ),
        (
            "truncated chunk file (read-write open must not repair it)",
            |d| {
                let s = store(d, Codec::Raw);
                std::fs::OpenOptions::new().write(true).open(s.join("0.zr")).unwrap().set_len(100).unwrap();
                s
            },
            |s| Store::open_rw(s, StoreOptions::new()).map(drop),
            |e, _| matches!(e, Error::Corrupt { path, .. } if ends(path, "0.zr")),
        ),
        (
            "index out of range",
            |d| store(d, Codec::Raw),
            |s| Store::open(s)?.gather(&[0, 200]).map(drop),
            |e, _| matches!(e, Error::IndexOutOfRange { index: 200, len: 200, .. }),
        ),
        (
            "other byte order",
            |d| {
                let s = store(d, Codec::Raw);
                patch(&s.join("meta.zr"), 4, &1u16.swap_bytes().to_ne_bytes());
                s
            },
            |s| Store::open_rw(s, StoreOptions::new()).map(drop),
            |e, s| matches!(e, Error::ByteOrder { path } if *path == s.join("meta.zr")),
        ),
        (
            "other version",
            |d| {
                let s = store(d, Codec::Raw);
                patch(&s.join("meta.zr"), 4, &9u16.to_ne_bytes());
                s
            },
            |s| Store::open(s).map(drop),
            |e, _| e.to_string().ends_with("has format version 9; this build reads version 1"),
        ),
        (
            "record over 1 MiB",
            |d| store(d, Codec::Raw),
            |s| {
                Store::open_rw(s, StoreOptions::new())?
                    .append(&[vec![1u8; 3], vec![0; MAX_RECORD_SIZE + 1]], Codec::Zstd)
                    .map(drop)
            },
            |e, _| matches!(e, Error::RecordTooLarge { index: 1, .. }),
        ),
        (
            "store full",
            |d| {
                let s = d.join("s");
                drop(Store::create(&s, opts(Format::V1)).unwrap());
                patch(&s.join("meta.zr"), 12, &(MAX_RECORDS - 1).to_ne_bytes());
                s
            },
            |s| {
                Store::open_rw(s, StoreOptions::new())?.append(&[b"a".as_slice(), b"b"], Codec::Raw).map(drop)
            },
            |e, _| matches!(e, Error::StoreFull { adding: 2, .. }),
        ),
        (
            "LZ4 on a v1 store",
            |d| store(d, Codec::Raw),
            |s| Store::open_rw(s, StoreOptions::new())?.append(&[b"abc"], Codec::Lz4).map(drop),
            |e, _| matches!(e, Error::InvalidArgument(m) if m.contains("lz4")),
        ),
        (
            "v2: wrong magic",
            |d| {
                let s = v2(d, Codec::Raw);
                patch(&s.join("index.zr"), 0, b"NOPE");
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::NotAStore { path, .. } if *path == s.join("index.zr")),
        ),
        (
            "v2: index shorter than its header",
            |d| {
                let s = v2(d, Codec::Raw);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(s.join("index.zr"))
                    .unwrap()
                    .set_len(40)
                    .unwrap();
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::Corrupt { path, .. } if *path == s.join("index.zr")),
        ),
        (
            "v2: a count past the entries the index holds",
            |d| {
                let s = v2(d, Codec::Raw);
                let len = std::fs::metadata(s.join("index.zr")).unwrap().len();
                patch(&s.join("index.zr"), 40, &((len - 64) / 32 + 1).to_le_bytes());
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::Corrupt { path, .. } if *path == s.join("index.zr")),
        ),
        (
            "v2: a flipped bit in the header's fixed fields",
            |d| {
                let s = v2(d, Codec::Raw);
                flip(&s.join("index.zr"), 9);
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::Corrupt { path, offset: 20, .. } if *path == s.join("index.zr")),
        ),
        (
            "v2: other version",
            |d| {
                let s = v2(d, Codec::Raw);
                patch(&s.join("index.zr"), 4, &9u16.to_le_bytes());
                s
            },
            |s| Store::open(s).map(drop),
            |e, _| {
                matches!(e, Error::Version { found: 9, expected, .. } if *expected == (2..=4))
                    && e.to_string().ends_with("has format version 9; this build reads versions 2 to 4")
            },
        ),
        (
            "v2: entry pointing outside its chunk",
            |d| {
                let s = v2(d, Codec::Raw);
                let (file, at) = entry_at(&s, 5);
                patch(&file, at, &(1u64 << 40).to_le_bytes());
                s
            },
            |s| Store::open(s)?.gather(&[4, 5]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 5, path, .. } if ends(path, "0.zr")),
        ),
        (
            "v2: entry naming a chunk that does not exist",
            |d| {
                let s = v2(d, Codec::Raw);
                let (file, at) = entry_at(&s, 6);
                patch(&file, at + 16, &4_000_000_000u32.to_le_bytes());
                s
            },
            |s| Store::open(s)?.gather(&[6]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 6, path, .. } if ends(path, "4000000000.zr")),
        ),
        (
            "v2: a flipped bit in an entry, verified read",
            |d| {
                let s = v2(d, Codec::Raw);
                let (file, at) = entry_at(&s, 9);
                flip(&file, at + 13);
                s
            },
            |s| verified(s)?.gather(&[8, 9]).map(drop),
            |e, s| matches!(e, Error::CorruptRecord { index: 9, path, .. } if *path == s.join("index.zr")),
        ),
        (
            "v2: a flipped bit in a raw record, verified read",
            |d| {
                let s = v2(d, Codec::Raw);
                let e = entry_fields(&s, 11);
                flip(&s.join("0.zr"), e.offset + e.stored / 2);
                s
            },
            |s| verified(s)?.gather(&[10, 11]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 11, path, .. } if ends(path, "0.zr")),
        ),
        (
            "v2: a flipped bit in a raw record, verified fixed-stride read",
            |d| {
                let s = v2(d, Codec::Raw);
                let e = entry_fields(&s, 12);
                flip(&s.join("0.zr"), e.offset);
                s
            },
            |s| {
                let store = verified(s)?;
                let len = store.record_lens(&[12])?[0] as usize;
                store.gather_fixed(&[12], len, &mut vec![0; len])
            },
            |e, _| matches!(e, Error::CorruptRecord { index: 12, path, .. } if ends(path, "0.zr")),
        ),
        (
            "v2: a flipped bit in an LZ4 record, verified read",
            |d| {
                let s = v2(d, Codec::Lz4);
                let e = entry_fields(&s, 1);
                assert_eq!(e.codec, 3, "record 1 is lz4");
                flip(&s.join("0.zr"), e.offset + e.stored / 2);
                s
            },
            |s| verified(s)?.gather(&[1]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 1, path, .. } if ends(path, "0.zr")),
        ),
        (
            "v2: a damaged LZ4 record, unverified read",
            |d| {
                let s = v2(d, Codec::Lz4);
                let e = entry_fields(&s, 1);
                // The first token: literal and match lengths no longer add up to the record.
                patch(&s.join("0.zr"), e.offset, &[0xFF]);
                s
            },
            |s| Store::open(s)?.gather(&[1]).map(drop),
            |e, _| matches!(e, Error::CorruptRecord { index: 1, path, .. } if ends(path, "0.zr")),
        ),
        (
            "v2: entries claiming records larger than memory (no allocation sized by them aborts)",
            |d| {
                let s = v2(d, Codec::Zstd);
                // 64 compressed records, each now claiming 4 GiB: 256 GiB for the batch.
                let zstd: Vec<u64> = (0..200).filter(|&i| entry_fields(&s, i).codec == 1).take(64).collect();
                assert_eq!(zstd.len(), 64);
                for i in zstd {
                    let (file, at) = entry_at(&s, i);
                    patch(&file, at + 12, &u32::MAX.to_le_bytes());
                }
                s
            },
            |s| Store::open(s)?.gather(&(0..200u64).collect::<Vec<_>>()).map(drop),
            |e, _| {
                // Refused before the allocation, or (where memory overcommits that far) by the
                // first frame that does not decode to its claimed size.
                matches!(e, Error::InvalidArgument(m) if m.contains("cannot be allocated"))
                    || matches!(e, Error::CorruptRecord { .. })
            },
        ),
        (
            "v2: a dict.zr that is not the store's dictionary",
            |d| {
                let s = v2(d, Codec::ZstdDict);
                let other = d.join("other");
                let o = Store::create(&other, StoreOptions::new()).unwrap();
                assert!(o.train_dictionary(&(1000..1400).map(record).collect::<Vec<_>>()).unwrap());
                drop(o);
                std::fs::copy(other.join("dict.zr"), s.join("dict.zr")).unwrap();
                std::fs::remove_dir_all(other).unwrap();
                s
            },
            |s| Store::open(s).map(drop),
            |e, s| matches!(e, Error::Corrupt { path, .. } if *path == s.join("dict.zr")),
        ),
        (
            "v2: record over 4 GiB - 1 (refused before anything is read)",
            |d| v2(d, Codec::Raw),
            |s| {
                // A zero-length slice standing for a record too large: only its length is looked at.
                struct Huge;
                impl AsRef<[u8]> for Huge {
                    fn as_ref(&self) -> &[u8] {
                        static BIG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
                        BIG.get_or_init(|| vec![0u8; u32::MAX as usize + 1])
                    }
                }
                Store::open_rw(s, StoreOptions::new())?.append(&[Huge], Codec::Raw).map(drop)
            },
            |e, _| matches!(e, Error::RecordTooLarge { index: 0, .. }),
        ),
        (
            "bad schema",
            |d| {
                let out = d.join("ds");
                convert::from_bytes(&out, (0..20).map(record), WriteOptions::new()).unwrap();
                std::fs::write(out.join("schema.msgpack"), b"\xff\x00garbage").unwrap();
                out
            },
            |s| RaggedDataset::<u8>::open(s).map(drop),
            |e, _| matches!(e, Error::Corrupt { path, .. } if ends(path, "schema.msgpack")),
        ),
        (
            "ragged opened as dense",
            |d| {
                let out = d.join("ds");
                convert::from_bytes(&out, (0..20).map(record), WriteOptions::new()).unwrap();
                out
            },
            |s| DenseDataset::<u8>::open(s).map(drop),
            |e, s| matches!(e, Error::Schema { path, .. } if path == s),
        ),
        (
            "wrong dtype",
            |d| npy_dataset(d, "ds"),
            |s| DenseDataset::<u8>::open(s).map(drop),
            |e, s| matches!(e, Error::Schema { path, .. } if path == s),
        ),
        (
            "streams of different lengths",
            |d| {
                npy_dataset(d, "a");
                let b = d.join("b");
                convert::npy(write_npy(d, "b.npy", 7), &b, WriteOptions::new()).unwrap();
                d.to_path_buf()
            },
            |d| {
                DataLoader::builder()
                    .open_stream("a", d.join("a"))
                    .open_stream("b", d.join("b"))
                    .build()
                    .map(drop)
            },
            |e, _| matches!(e, Error::Config { what: "streams", reason: m } if m.contains("\"b\"") && m.contains("same length")),
        ),
        (
            "invalid sampler params",
            |d| d.to_path_buf(),
            |_| Sampler::builder(10).batch_size(0).build().map(drop),
            |e, _| matches!(e, Error::Config { what: "sampler", .. }),
        ),
        (
            // Look 78: an iid batch of 2^31 rows (an edited state's) aborted on its indices.
            "a batch past what a rank may hold",
            |d| d.to_path_buf(),
            |_| Sampler::builder(10).batch_size(1 << 31).mode(SamplerMode::Iid).build().map(drop),
            |e, _| matches!(e, Error::Config { what: "sampler", reason } if reason.contains("at most 67108864")),
        ),
        (
            "malformed npy",
            |d| {
                let p = d.join("bad.npy");
                let mut f = NpyHeader::encode(DType::F32, &[4, 4]).unwrap();
                f[8] = 0xFF; // header length past the file
                std::fs::write(&p, f).unwrap();
                d.to_path_buf()
            },
            |d| convert::npy(d.join("bad.npy"), d.join("out"), WriteOptions::new()).map(drop),
            |e, d| matches!(e, Error::BadInput { path, .. } if *path == d.join("bad.npy")),
        ),
        (
            "malformed idx",
            |d| {
                std::fs::write(d.join("bad.idx"), [0u8, 0, 0x08, 3, 0, 0, 0, 10, 0, 0]).unwrap();
                d.to_path_buf()
            },
            |d| convert::idx(d.join("bad.idx"), d.join("out"), WriteOptions::new()).map(drop),
            |e, d| matches!(e, Error::BadInput { path, .. } if *path == d.join("bad.idx")),
        ),
        (
            "malformed safetensors",
            |d| {
                std::fs::write(d.join("bad.safetensors"), b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1")
                    .unwrap();
                d.to_path_buf()
            },
            |d| convert::safetensors(d.join("bad.safetensors"), d.join("out"), WriteOptions::new()).map(drop),
            |e, d| matches!(e, Error::BadInput { path, .. } if *path == d.join("bad.safetensors")),
        ),
    ]
}

fn write_npy(d: &Path, name: &str, rows: usize) -> PathBuf {
    let p = d.join(name);
    let mut f = NpyHeader::encode(DType::F32, &[rows, 4]).unwrap();
    f.extend((0..rows * 4).flat_map(|i| (i as f32).to_le_bytes()));
    std::fs::write(&p, f).unwrap();
    p
}

fn npy_dataset(d: &Path, name: &str) -> PathBuf {
    let out = d.join(name);
    convert::npy(write_npy(d, &format!("{name}.npy"), 5), &out, WriteOptions::new()).unwrap();
    out
}

#[test]
fn every_malformed_input_is_a_clean_error_naming_it_and_changes_nothing() {
    let mut failures = Vec::new();
    for (name, setup, action, expected) in cases() {
        let dir = tempfile::tempdir().unwrap();
        let target = setup(dir.path());
        let before = snapshot(dir.path());
        let outcome = std::panic::catch_unwind(|| action(&target));
        let after = snapshot(dir.path());
        match outcome {
            Err(_) => failures.push(format!("{name}: panicked")),
            Ok(Ok(())) => failures.push(format!("{name}: succeeded")),
            Ok(Err(e)) if !expected(&e, &target) => failures.push(format!("{name}: unexpected error {e:?}")),
            Ok(Err(_)) => {}
        }
        // A lock file an open creates is not a change to the store's contents.
        let strip = |mut s: BTreeMap<PathBuf, _>| {
            s.remove(&PathBuf::from("s/write.lock"));
            s
        };
        if strip(before) != strip(after) {
            failures.push(format!("{name}: files changed"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
