//! Token file headers: a Megatron `.idx` (the whole file's bytes) and an llm.c header. Parsing
//! never panics; an accepted index's arrays are all inside the bytes (every sequence and
//! document entry reads), its counts fill the file, and an encoded header reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::tokens::{
    MEGATRON_HEADER_LEN, encode_llmc_header, encode_megatron_header, llmc_header, megatron_header,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = megatron_header(data) {
        let arrays = 12 * h.sequences + 8 * h.document_entries + if h.multimodal { h.sequences } else { 0 };
        assert_eq!(MEGATRON_HEADER_LEN + arrays, data.len());
        for i in 0..h.sequences.min(4096) {
            assert!(h.sequence(data, i).is_some());
        }
        for k in 0..h.document_entries.min(4096) {
            assert!(h.document_entry(data, k).is_some());
        }
        assert!(h.sequence(data, h.sequences).is_none() && h.document_entry(data, h.document_entries).is_none());
        let again = encode_megatron_header(h.token, h.sequences as u64, h.document_entries as u64).unwrap();
        assert_eq!(&again[..], &data[..MEGATRON_HEADER_LEN]);
    }
    if let Ok(h) = llmc_header(data, data.len() as u64) {
        assert_eq!(1024 + h.tokens * h.token.size() as u64, data.len() as u64);
        // The magic and the count read back (the version is carried as written).
        let again = encode_llmc_header(h.token, h.tokens).unwrap();
        assert_eq!((&again[..4], &again[8..12]), (&data[..4], &data[8..12]));
    }
});
