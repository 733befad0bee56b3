//! `manifest.zr`: the decoder never panics and never allocates for chunks it has no bytes for;
//! what decodes round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::decode(data) {
        assert!(m.chunks.len() * 16 <= data.len());
        assert_eq!(Manifest::decode(&m.encode()), Ok(m.clone()));
        assert_eq!(m.encode(), data, "a manifest has one encoding");
    }
});
