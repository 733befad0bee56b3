//! A fixed-stride `index.zr` header and its geometry: any header that parses gives places inside
//! their chunks, blocks that hold their records, and a frontier that maps back to its count.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::{HEADER_SIZE, Header, MAX_RECORDS, Stride};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = Header::parse(data, false) else { return };
    let Some(s) = h.stride() else { return };
    assert!(s.record_size > 0 && s.per_chunk > 0 && s.per_block > 0 && s.per_block <= s.per_chunk);
    // A block is FORMAT.md's `max(1, 4096 / R)` records (fewer only when a chunk holds fewer):
    // no header makes one block check billions of records.
    assert_eq!(s.per_block, Stride::default_per_block(s.record_size).min(s.per_chunk));
    // Indices from the bytes after the header (below 2^56, as a store's are), and the ends of the
    // store.
    let tail = data.get(HEADER_SIZE..).unwrap_or_default();
    let picks = tail
        .chunks(8)
        .map(|b| b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x)) % MAX_RECORDS)
        .chain([0, h.count.saturating_sub(1), h.count, s.per_chunk, s.per_chunk - 1]);
    for i in picks {
        if let Some((_, offset)) = s.locate(i) {
            assert!(offset + s.record_size <= h.chunk_capacity, "record {i} ends past its chunk");
        }
        let b = s.block_of(i);
        let count = i.saturating_add(1);
        assert!(s.block_records(b, count).contains(&i), "block {b} does not hold record {i}");
        assert!(s.blocks(count) > b);
        if let Some(f) = s.frontier(i) {
            assert_eq!(s.count_at(f), Some(i), "the frontier of {i} records");
        }
    }
});
