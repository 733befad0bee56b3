//! Helpers shared by the integration tests.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use loaderx_core::{Format, StoreOptions};

/// Both on-disk formats: the tests of what they share run on each.
pub const FORMATS: [Format; 2] = [Format::V1, Format::V2];

/// The words that run this test binary again in a child process: the binary itself, after
/// `LOADERX_TEST_RUNNER`'s words where it is set (a cross-built suite under an emulator:
/// `scripts/cross-test.sh` sets it to its qemu command, since this machine has no binfmt entry
/// to run a foreign binary by itself). Tests only: nothing in the engine reads it.
pub fn this_binary_argv() -> Vec<OsString> {
    let mut argv: Vec<OsString> = std::env::var("LOADERX_TEST_RUNNER")
        .map(|r| r.split_whitespace().map(OsString::from).collect())
        .unwrap_or_default();
    argv.push(std::env::current_exe().unwrap().into_os_string());
    argv
}

/// A command running this test binary again ([`this_binary_argv`]).
pub fn this_binary() -> Command {
    let argv = this_binary_argv();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// Store options for a new store of `format`.
pub fn opts(format: Format) -> StoreOptions {
    StoreOptions::new().format(format)
}

/// An index entry as the tests read it from the files (either format's layout).
#[derive(Debug, Clone, Copy)]
pub struct EntryFields {
    pub offset: u64,
    pub stored: u64,
    pub chunk: u32,
    pub codec: u8,
}

/// Byte offset of entry `idx` in the index file of the store at `path`, and that file's name.
pub fn entry_at(path: &Path, idx: u64) -> (std::path::PathBuf, u64) {
    if path.join("index.zr").exists() {
        (path.join("index.zr"), 64 + 32 * idx)
    } else {
        (path.join("meta.zr"), 16 * (1 + idx))
    }
}

/// Entry `idx` of the store at `path`, read through the documented layouts (v1: host byte order
/// u32 offset, u32 stored, u32 logical, u16 chunk, u8 codec; v2: little-endian u64 offset, u32
/// stored, u32 logical, u32 chunk, u8 codec).
pub fn entry_fields(path: &Path, idx: u64) -> EntryFields {
    let (file, at) = entry_at(path, idx);
    let bytes = std::fs::read(&file).unwrap();
    let e = &bytes[at as usize..];
    if file.ends_with("index.zr") {
        EntryFields {
            offset: u64::from_le_bytes(e[0..8].try_into().unwrap()),
            stored: u64::from(u32::from_le_bytes(e[8..12].try_into().unwrap())),
            chunk: u32::from_le_bytes(e[16..20].try_into().unwrap()),
            codec: e[20],
        }
    } else {
        EntryFields {
            offset: u64::from(u32::from_ne_bytes(e[0..4].try_into().unwrap())),
            stored: u64::from(u32::from_ne_bytes(e[4..8].try_into().unwrap())),
            chunk: u32::from(u16::from_ne_bytes(e[12..14].try_into().unwrap())),
            codec: e[14],
        }
    }
}

/// A deterministic, self-describing record: 8 bytes of id, then a payload derived from the id.
/// Lengths vary with the id; some payloads compress, some do not.
pub fn record(id: u64) -> Vec<u8> {
    let len = (id.wrapping_mul(2_654_435_761) % 3000) as usize;
    let mut out = id.to_le_bytes().to_vec();
    let mut x = id ^ 0x9E37_79B9_7F4A_7C15;
    for j in 0..len {
        if id.is_multiple_of(3) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(x as u8);
        } else {
            out.push(b"loaderx-record "[(j + id as usize) % 15]);
        }
    }
    out
}

/// The id of a record made by [`record`], if it is intact.
pub fn check_record(bytes: &[u8]) -> Option<u64> {
    let id = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    (record(id) == bytes).then_some(id)
}

/// Overwrites `bytes` at `offset` of `path`.
pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

/// `store.append(records, codec)`, training the store's dictionary first where `codec` needs
/// one (training is explicit): on the batch itself, or on a standard sample when the batch is
/// too small to train on.
pub fn append<R: AsRef<[u8]> + Sync>(
    store: &loaderx_core::Store,
    records: &[R],
    codec: loaderx_core::Codec,
) -> std::ops::Range<u64> {
    if codec == loaderx_core::Codec::ZstdDict
        && !store.has_dictionary()
        && !store.train_dictionary(records).unwrap()
    {
        assert!(store.train_dictionary(&(0..200).map(record).collect::<Vec<_>>()).unwrap());
    }
    store.append(records, codec).unwrap()
}

/// Every file of `dir` by name, with its bytes.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}
