//! Helpers shared by the integration tests.

use std::path::Path;

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
) -> std::ops::Range<u32> {
    if codec == loaderx_core::Codec::ZstdDict
        && !store.has_dictionary()
        && !store.train_dictionary(records).unwrap()
    {
        assert!(store.train_dictionary(&(0..200).map(record).collect::<Vec<_>>()).unwrap());
    }
    store.append(records, codec).unwrap()
}
