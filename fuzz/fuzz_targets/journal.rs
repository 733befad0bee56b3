//! `journal.zr`: the redo log's decoder never panics and never claims more entries than bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = loaderx_core::format::journal_decode(data) {
        assert!(32 + n * 20 <= data.len());
    }
});
