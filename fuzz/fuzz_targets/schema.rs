//! `schema.msgpack`: a decoded schema round-trips and fits a record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::Schema;

fuzz_target!(|data: &[u8]| {
    let at = std::path::Path::new(loaderx_core::SCHEMA_FILE);
    if let Ok(s) = Schema::decode(data, at) {
        assert!(s.unit_bytes() <= loaderx_core::MAX_RECORD_SIZE);
        assert_eq!(Schema::decode(&s.encode(), at).ok().as_ref(), Some(&s));
    }
});
