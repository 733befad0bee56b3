//! `journal.zr`: the redo log's decoder never panics, never claims more entries than bytes, and
//! what it decodes survives an encode/decode round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::{Format, Journal};

fuzz_target!(|data: &[u8]| {
    if let Ok(j) = Journal::decode(data) {
        let n = match &j {
            Journal::Delete { entries, .. } | Journal::Move { entries, .. } => entries.len(),
        };
        assert!(32 + n * 20 <= data.len());
        // Re-encoded in the layout it was read from (version 1: v1 stores, 2: v2).
        let format = if data[4] == 1 { Format::V1 } else { Format::V2 };
        assert_eq!(Journal::decode(&j.encode(format)).as_ref(), Ok(&j));
    }
});
