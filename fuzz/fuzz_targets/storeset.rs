//! A store set's `storeset.msgpack`, written by hand from the input: part paths (any string:
//! empty, absolute, `..`, the set itself), record counts and identities. Opening the set never
//! panics, never reads a part outside what the paths name, and is a set of the real part only
//! when the manifest matches it.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use loaderx_core::{DenseDataset, DatasetWriter, SET_FILE, WriteOptions};

/// A directory of this process's own holding one real part, `parts/p0` (10 `u32` items), and
/// the set directory `set` with its schema.
fn work() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("loaderx-fuzz-storeset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let mut w = DatasetWriter::dense::<u32>(d.join("parts/p0"), vec![1], WriteOptions::new()).expect("a writer");
        w.append(&(0..10u32).collect::<Vec<_>>()).expect("appended");
        w.finish().expect("written");
        loaderx_core::stitch(&[d.join("parts/p0")], d.join("set")).expect("stitched");
        d
    })
}

/// MessagePack by hand: a string, an unsigned integer.
fn str_(out: &mut Vec<u8>, s: &[u8]) {
    out.push(0xdb);
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s);
}

fn uint(out: &mut Vec<u8>, v: u64) {
    out.push(0xcf);
    out.extend_from_slice(&v.to_be_bytes());
}

fuzz_target!(|data: &[u8]| {
    let set = work().join("set");
    // Parts separated by 0xff: a path, then (after a 0x00) 8 bytes of record count and 8 of
    // identity, each optional.
    let parts: Vec<&[u8]> = data.split(|&b| b == 0xff).take(4).collect();
    let mut m = vec![0x82];
    str_(&mut m, b"version");
    uint(&mut m, 1);
    str_(&mut m, b"parts");
    m.push(0x90 | parts.len() as u8);
    for p in &parts {
        let (path, nums) = match p.iter().position(|&b| b == 0) {
            Some(i) => (&p[..i], &p[i + 1..]),
            None => (*p, &[][..]),
        };
        let num = |at: usize| nums.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        let identity = num(8);
        m.push(if identity.is_some() { 0x83 } else { 0x82 });
        str_(&mut m, b"path");
        str_(&mut m, path);
        str_(&mut m, b"records");
        uint(&mut m, num(0).unwrap_or(10) % 64);
        if let Some(id) = identity {
            str_(&mut m, b"identity");
            uint(&mut m, id);
        }
    }
    std::fs::write(set.join(SET_FILE), &m).expect("the manifest written");
    if let Ok(ds) = DenseDataset::<u32>::open(&set) {
        let n = ds.len() as u32;
        let all: Vec<u32> = (0..n).collect();
        if let Ok(v) = ds.get_vec(&all) {
            // Only the real part holds records here: whatever opened, it reads as copies of it.
            assert!(v.chunks(10).all(|c| c.iter().enumerate().all(|(i, &x)| x == i as u32)), "{v:?}");
        }
    }
});
