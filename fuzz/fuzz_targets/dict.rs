//! `dict.zr`: a decoded dictionary file re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::dict;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = dict::decode(data) {
        // Bytes 6..8 are reserved and not checked on decode; the encoder writes zeros.
        if data[6..8] == [0, 0] {
            assert_eq!(dict::encode(body), data);
        }
    }
});
