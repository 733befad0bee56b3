//! `dict.zr`: decoding never panics; a bare dictionary decodes to itself, and a legacy headed
//! file decodes to a body that re-encodes to the same file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::dict;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = dict::decode(data) {
        if data.starts_with(&dict::ZSTD_MAGIC) {
            assert_eq!(body, data);
            assert_eq!(dict::encode(body), data);
        } else if data[6..8] == [0, 0] {
            // Legacy: bytes 6..8 are reserved and not checked on decode; the encoder writes zeros.
            assert_eq!(dict::encode_legacy(body), data);
        }
    }
});
