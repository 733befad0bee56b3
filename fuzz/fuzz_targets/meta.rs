//! `meta.zr`: the header and table entries, parsed as the opener and `verify` parse them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::{Header, RecordLoc};
use loaderx_core::{MAX_RECORD_SIZE, MAX_RECORDS};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = Header::parse(data) else { return };
    // A parsed header is the 16 bytes, field for field, within the format's limits.
    assert_eq!(bytemuck_bytes(&h), &data[..16]);
    assert!(h.length <= MAX_RECORDS);
    for raw in data[16..].chunks_exact(16) {
        let loc = RecordLoc::from_bytes(raw.try_into().unwrap());
        let limits = loc.validate_limits();
        match loc.validate(&h) {
            Ok(codec) => {
                assert_eq!(limits, Ok(codec), "an entry valid against the tail is valid alone");
                assert!(loc.logic_length as usize <= MAX_RECORD_SIZE);
                assert!(loc.chunk_id <= h.tail_chunk);
                if loc.chunk_id == h.tail_chunk {
                    assert!(u64::from(loc.offset) + u64::from(loc.phys_length) <= u64::from(h.tail_offset));
                }
            }
            Err(reason) => assert!(!reason.is_empty()),
        }
    }
});

fn bytemuck_bytes(h: &Header) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&h.magic);
    out.extend_from_slice(&h.version.to_ne_bytes());
    out.extend_from_slice(&h.tail_chunk.to_ne_bytes());
    out.extend_from_slice(&h.tail_offset.to_ne_bytes());
    out.extend_from_slice(&h.length.to_ne_bytes());
    out
}
