//! `.npy` headers: a parsed header fits its bytes, and re-encoding it parses back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::convert::NpyHeader;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = NpyHeader::parse(data) else { return };
    assert!(h.data_offset as usize <= data.len());
    assert_eq!(NpyHeader::header_len(data), Ok(h.data_offset as usize));
    // Headers with huge shapes are accepted by the parser (the data length is checked against
    // the file later); only re-encode the ones a converter could meet.
    if h.shape.len() <= 32 {
        if let Ok(enc) = NpyHeader::encode(h.dtype, &h.shape) {
            let back = NpyHeader::parse(&enc).expect("an encoded header parses");
            assert_eq!((back.dtype, &back.shape), (h.dtype, &h.shape));
            assert!(back.little_endian && !back.fortran_order);
            assert_eq!(back.data_offset as usize, enc.len());
            assert_eq!(back.data_offset % 64, 0);
        }
    }
});
