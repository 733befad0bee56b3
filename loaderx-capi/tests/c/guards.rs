//! The guards of issue 40 that live in loaderx-core (the writer's lock taken before a create
//! touches anything; index fields that name a far chunk or a giant block refused), from C. Before
//! them a create under a live writer deleted its files, and the other two aborted on an
//! allocation or ran for hours (capped by guards.c, so that a regression fails, never hangs).

use std::path::Path;

use loaderx_core::{Codec, Store, StoreOptions};

use super::{programs, run_ok, scratch};

/// Runs guards.c (statically linked) with `args`, failing with its output unless it exits 0.
fn run_guards(args: &[&Path]) {
    let Some(p) = programs() else { return };
    let out = run_ok(&p.guards.fixed, args);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn creating_over_a_live_writer_is_locked_and_keeps_its_records() {
    let dir = scratch("guards-create");
    run_guards(&[Path::new("create-under-writer"), &dir]);
}

/// Look 75, L75-1: `LX_OPEN_APPEND` (or `LX_OPEN_CREATE`) on a store set's directory made a
/// store inside it whose appends no reader of the set saw: `LX_ERR_ALREADY_EXISTS` now.
#[test]
fn a_store_set_is_not_opened_to_append_or_create_from_c() {
    let dir = scratch("guards-store-set");
    let parts: Vec<_> = (0..2u64)
        .map(|p| {
            let part = dir.join(format!("p{p}"));
            let mut w = loaderx_core::DatasetWriter::dense::<u64>(&part, vec![], Default::default()).unwrap();
            w.append(&[p, p + 10]).unwrap();
            w.finish().unwrap();
            part
        })
        .collect();
    let set = dir.join("set");
    loaderx_core::stitch(&parts, &set).unwrap();
    run_guards(&[Path::new("store-set"), &set]);
}

/// Twentieth look, U4: an output pointing into a store or sampler handle (`lx_store_len(s,
/// (uint64_t *)s)`) was written over the handle's lock, and the next compact waited forever.
/// Now every call refuses an output that shares a byte with its handle, and the handle works on.
#[test]
fn an_output_pointing_into_its_handle_is_refused_and_the_handle_works_on() {
    let dir = scratch("guards-handle-alias");
    run_guards(&[Path::new("handle-alias"), &dir.join("store")]);
}

/// crc32c (Castagnoli), bit by bit: the checksums of the index fields the tests below rewrite.
fn crc32c(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |crc, &b| {
        (0..8).fold(crc ^ u32::from(b), |c, _| if c & 1 == 1 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 })
    })
}

/// Calls from a thread-exit destructor (C's `pthread_key_create`), after the thread's Rust
/// locals were destroyed, return their error codes instead of aborting the process; a
/// misaligned `out_chunk` is named as such, not as null.
#[test]
fn calls_from_a_thread_exit_destructor_return_codes_and_never_abort() {
    run_guards(&[Path::new("thread-exit")]);
}

/// guards.c's record `i`: 64 bytes, byte `j` being `i * 31 + j`.
fn guards_record(i: u64) -> Vec<u8> {
    (0..64).map(|j| (i * 31 + j) as u8).collect()
}

/// Tenth look, J4: a plan of a range per byte (a file of delimiters, chunk size 1 or as many
/// partitions as bytes) costs 16 bytes or more per byte of file; one that does not fit in memory
/// aborted the process. Now 0 and an error, the previous plan kept (guards.c caps the address
/// space at 384 MiB; the 64 MiB file of NULs is sparse).
#[test]
fn a_plan_larger_than_memory_is_an_error_from_c_not_an_abort() {
    let dir = scratch("guards-huge-plan");
    let file = dir.join("nuls");
    std::fs::File::create(&file).unwrap().set_len(64 << 20).unwrap();
    run_guards(&[Path::new("huge-plan"), &file]);
}

#[test]
fn an_entry_naming_chunk_u32_max_is_corrupt_from_c_not_an_abort() {
    let dir = scratch("guards-far-chunk");
    let store_dir = dir.join("store");
    let store = Store::create(&store_dir, StoreOptions::new()).unwrap();
    store.append(&(0..3).map(guards_record).collect::<Vec<_>>(), Codec::Raw).unwrap();
    drop(store);
    // Entry 1 (bytes 64 + 32 .. 64 + 64 of index.zr): chunk id at 16..20, its crc32c at 28..32,
    // rewritten so that the lie is consistent.
    let index = store_dir.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    let entry = &mut bytes[96..128];
    entry[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc32c(&entry[..28]);
    entry[28..32].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&index, bytes).unwrap();
    std::fs::write(store_dir.join(format!("{}.zr", u32::MAX)), b"").unwrap();
    run_guards(&[Path::new("far-chunk"), &store_dir]);
}

#[test]
fn a_stride_header_claiming_u32_max_records_a_block_is_corrupt_from_c() {
    let dir = scratch("guards-huge-blocks");
    let store_dir = dir.join("store");
    // One-byte records in 4 GiB chunks: a block of 2^32 - 1 records fits one chunk, so the
    // header's geometry passes as a stride.
    let opts = StoreOptions::new().fixed_stride(1).chunk_capacity(1 << 32);
    let store = Store::create(&store_dir, opts).unwrap();
    store.append(&[[7u8]; 10], Codec::Raw).unwrap();
    drop(store);
    // The fixed-stride header (FORMAT.md): records a block at 52..56, the count at 40..48, the
    // frontier at 24..28 (tail chunk) and 32..40 (tail offset); the static checksum at 20..24
    // covers 0..20 and 48..64, the dynamic one at 28..32 covers 24..28 and 32..48.
    let index = store_dir.join("index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    let claimed = u64::from(u32::MAX);
    bytes[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[40..48].copy_from_slice(&claimed.to_le_bytes());
    bytes[24..28].copy_from_slice(&0u32.to_le_bytes());
    bytes[32..40].copy_from_slice(&claimed.to_le_bytes());
    let stat = crc32c(&[&bytes[0..20], &bytes[48..64]].concat());
    bytes[20..24].copy_from_slice(&stat.to_le_bytes());
    let dynamic = crc32c(&[&bytes[24..28], &bytes[32..48]].concat());
    bytes[28..32].copy_from_slice(&dynamic.to_le_bytes());
    std::fs::write(&index, bytes).unwrap();
    run_guards(&[Path::new("huge-blocks"), &store_dir]);
}

/// Sixty-second look's remainder (the C ABI's handles): a child forked after the parent's
/// gathers started rayon's pool waited for good on the pool's threads, which a fork does not
/// copy; a child forked while a thread of the parent compacted waited for good on the handle's
/// lock, held by that thread at the fork. Now a fork's calls run on a pool of its own, and the
/// handle's lock is only tried there (`LX_ERR_LOCKED`, naming the fork).
#[test]
fn forked_children_read_or_are_refused_never_wait() {
    let dir = scratch("guards-fork");
    run_guards(&[Path::new("fork"), &dir.join("store")]);
}
