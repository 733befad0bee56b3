//! A hostile `journal.zr` replayed on open: whatever entries and bytes a well-formed journal
//! holds, opening the store never panics, never creates a chunk file, and either refuses the
//! journal (`Corrupt`) or leaves a store whose records read (or report their damage) cleanly.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use loaderx_core::format::v2::Entry;
use loaderx_core::format::{Format, Journal, RecordLoc};
use loaderx_core::{Codec, Store, StoreOptions};

/// A directory of this process's own, reused by every input.
fn work() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("loaderx-fuzz-journal-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a working directory");
        d
    })
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    for (i, v) in b.iter().skip(at).take(8).enumerate() {
        x[i] = *v;
    }
    u64::from_le_bytes(x)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let format = if mode & 1 == 0 { Format::V1 } else { Format::V2 };
    // Mode bit 3: a fixed-stride store of six 16-byte records (its deletes replay through the
    // stride's own path, where a longer `new_length` must be refused, never extend the tail).
    let fixed = format == Format::V2 && mode & 8 != 0;
    let path = work().join("s");
    let opts = StoreOptions::new().format(format).overwrite(true);
    let opts = if fixed { opts.fixed_stride(16) } else { opts };
    let store = Store::create(&path, opts).expect("a store");
    if fixed {
        let records: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 16]).collect();
        store.append(&records, Codec::Raw).expect("appended");
    } else {
        store.append(&[vec![1u8; 40], Vec::new(), vec![2u8; 90], vec![3u8; 7]], Codec::Raw).expect("appended");
    }
    let stored = store.len();
    drop(store);
    // The journal's entries from the input, 24 bytes each: index, offset, lengths and chunk
    // (small values more likely than not, so some land inside the store).
    let entries: Vec<(u64, Entry)> = rest
        .chunks(24)
        .take(8)
        .map(|c| {
            let (idx, off, lens) = (u64_at(c, 0), u64_at(c, 8), u64_at(c, 16));
            let small = mode & 2 != 0;
            let e = Entry {
                offset: if small { off % 256 } else { off },
                stored: if small { (lens as u32) % 128 } else { lens as u32 },
                logical: (lens >> 32) as u32 % 256,
                chunk: if small { (lens >> 40) as u32 % 3 } else { (lens >> 32) as u32 },
                codec: Codec::Raw as u8,
                crc: 0,
            };
            (if small { idx % 6 } else { idx }, e)
        })
        .collect();
    let need: u64 = entries.iter().map(|(_, e)| u64::from(e.stored)).sum();
    if need > 1 << 16 {
        return;
    }
    let j = if mode & 4 == 0 {
        Journal::Move { entries, data: vec![0xAB; need as usize] }
    } else {
        Journal::Delete { entries, new_length: u64_at(rest, 0) % 9, sums: Vec::new() }
    };
    // A v1 journal holds v1's field widths (its encoder refuses others by panicking: a v1 store
    // never makes one), so inputs v1 cannot express are skipped.
    if format == Format::V1 {
        let (Journal::Move { entries, .. } | Journal::Delete { entries, .. }) = &j;
        let fits = |(i, e): &(u64, Entry)| u32::try_from(*i).is_ok() && RecordLoc::try_from(*e).is_ok();
        if !entries.iter().all(fits) {
            return;
        }
    }
    std::fs::write(path.join("journal.zr"), j.encode(format)).expect("the journal written");
    if let Ok(store) = Store::open_rw(&path, StoreOptions::new()) {
        let n = store.len();
        assert!(n <= stored, "a journal grew the store from {stored} to {n} records");
        for i in 0..n {
            let _ = store.get(i);
        }
        let _ = store.verify();
    }
    let chunks = std::fs::read_dir(&path)
        .expect("the store directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().trim_end_matches(".zr").parse::<u32>().is_ok())
        .count();
    assert!(chunks <= 1, "a journal made the store create {chunks} chunk files");
});
