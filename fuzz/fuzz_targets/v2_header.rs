//! A v2 `index.zr` header, parsed as readers (count only) and the writer (every field) parse it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::{HEADER_SIZE, Header, MAX_RECORDS};

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
        assert_eq!(Header::parse(&h.encode(), true), Ok(h), "an encoded header passes every check");
    }
});
