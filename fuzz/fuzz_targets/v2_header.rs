//! A v2 `index.zr` header, parsed as readers (count only) and the writer (every field) parse it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::{HEADER_SIZE, Header, Layout, MAX_RECORDS, Stride};

fuzz_target!(|data: &[u8]| {
    let reader = Header::parse(data, false);
    let writer = Header::parse(data, true);
    if let Ok(h) = &writer {
        // What the writer accepts, a reader accepts, and it is the bytes, field for field.
        assert_eq!(reader.as_ref(), Ok(h));
        assert_eq!(&h.encode()[..], &data[..HEADER_SIZE]);
    }
    if let Ok(h) = reader {
        assert!(h.count <= MAX_RECORDS && h.chunk_capacity > 0);
        if let Layout::Fixed { record_size, block_records } = h.layout {
            // FORMAT.md's rule, P = max(1, 4096 / R) (or the records a chunk holds, if fewer).
            let rule = Stride::default_per_block(u64::from(record_size));
            let p = u64::from(block_records);
            assert!(p == rule || p == rule.min(h.chunk_capacity / u64::from(record_size)), "{h:?}");
        }
        assert_eq!(Header::parse(&h.encode(), true), Ok(h), "an encoded header passes every check");
    }
});
