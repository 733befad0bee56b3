//! `schema.msgpack`: a decoded schema round-trips and fits a record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::Schema;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Schema::decode(data) {
        assert!(s.unit_bytes() <= loaderx_core::MAX_RECORD_SIZE);
        assert_eq!(Schema::decode(&s.encode()).as_ref(), Ok(&s));
    }
});
