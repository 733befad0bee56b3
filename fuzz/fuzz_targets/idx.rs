//! MNIST IDX headers: a parsed header has the dimensions its magic announces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::convert::IdxHeader;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = IdxHeader::parse(data) else { return };
    let magic: [u8; 4] = data[..4].try_into().unwrap();
    assert_eq!(h.dims.len(), usize::from(magic[3]));
    assert!(IdxHeader::len_from_magic(magic) <= data.len());
    for (k, &d) in h.dims.iter().enumerate() {
        let at = 4 + 4 * k;
        assert_eq!(d as u64, u64::from(u32::from_be_bytes(data[at..at + 4].try_into().unwrap())));
    }
});
