//! A v2 entry array: every 32-byte entry parsed (its own checksum and its fields' limits) as
//! `verify` and verified reads parse it; what parses re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::{ENTRY_SIZE, Entry, EntryError};

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
});
