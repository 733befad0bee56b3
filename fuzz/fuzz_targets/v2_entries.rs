//! A v2 entry array: every 32-byte entry parsed (its own checksum and its fields' limits) as
//! `verify` and verified reads parse it; what parses re-encodes to the same bytes. The same bytes
//! as compact entries (16 bytes each): every one decodes to a raw record, and one whose record
//! ends within a compact chunk re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::{
    COMPACT_ENTRY_SIZE, COMPACT_MAX_OFFSET, ENTRY_SIZE, Entry, EntryError, decode_compact, encode_compact,
};

fuzz_target!(|data: &[u8]| {
    for raw in data.chunks(ENTRY_SIZE) {
        match Entry::parse(raw) {
            Ok(e) => {
                assert_eq!(&e.encode()[..], raw);
                assert!(e.validate().is_ok());
                assert!(e.offset.checked_add(u64::from(e.stored)).is_some());
            }
            Err(EntryError::Field(reason)) => assert!(!reason.is_empty()),
            Err(EntryError::Checksum) => assert!(raw.len() == ENTRY_SIZE),
        }
    }
    for raw in data.chunks_exact(COMPACT_ENTRY_SIZE) {
        let b: &[u8; COMPACT_ENTRY_SIZE] = raw.try_into().unwrap();
        let e = decode_compact(b);
        assert!(e.validate().is_ok(), "a compact entry is raw");
        match encode_compact(&e) {
            Ok(again) => assert_eq!(&again, b),
            Err(reason) => assert!(e.end() > COMPACT_MAX_OFFSET && !reason.is_empty()),
        }
    }
});
