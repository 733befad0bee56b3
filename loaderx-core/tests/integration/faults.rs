//! Failures the operating system reports in the middle of a write: `msync` made to fail with
//! EIO at its Nth call, by a shim preloaded into a child process (Linux, `cc` builds the shim).
//! The child runs one of the ignored `child_*` tests below against a store; the parent then opens
//! the store again and checks what the calls told the child against what the store holds:
//! a call that failed with a plain error changed nothing, one that returned `Committed` (or
//! `Ok`) happened exactly once, reads never return another record's bytes, and the store
//! verifies clean.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use loaderx_core::{Codec, Error, Store, StoreOptions};

const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
static int calls = 0, fired = 0;
/* FAULT_CALL (msync, pwrite, fsync, ftruncate, rename, unlink, renameat or unlinkat; msync when unset) fails with EIO at its
   FAULT_AT'th call; then, when FAULT_THEN names a call, the next call of that kind fails too.
   FAULT_FLAG_CALL fails at every call once the file FAULT_FLAG exists. */
static int fail(const char *name) {
    const char *flag = getenv("FAULT_FLAG");
    const char *flag_call = getenv("FAULT_FLAG_CALL");
    if (flag && flag_call && strcmp(flag_call, name) == 0 && access(flag, F_OK) == 0) {
        errno = EIO;
        return 1;
    }
    const char *call = getenv("FAULT_CALL");
    const char *at = getenv("FAULT_AT");
    const char *then = getenv("FAULT_THEN");
    if (fired == 1 && then && strcmp(then, name) == 0) {
        fired = 2;
        errno = EIO;
        return 1;
    }
    if (strcmp(call ? call : "msync", name) != 0 || !at) return 0;
    if (++calls != atoi(at)) return 0;
    fired = fired ? fired : 1;
    errno = EIO;
    return 1;
}
#define REAL(ret, name, ...) static ret (*real)(__VA_ARGS__) = 0; \
    if (!real) real = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);
int msync(void *a, size_t n, int f) { REAL(int, msync, void *, size_t, int); return fail("msync") ? -1 : real(a, n, f); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) {
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t); return fail("pwrite") ? -1 : real(fd, b, n, o);
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) {
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t); return fail("pwrite") ? -1 : real(fd, b, n, o);
}
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) {
    REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t); return fail("pwrite") ? -1 : real(fd, v, c, o);
}
ssize_t pwritev64(int fd, const struct iovec *v, int c, off_t o) {
    REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t); return fail("pwrite") ? -1 : real(fd, v, c, o);
}
int unlink(const char *p) { REAL(int, unlink, const char *); return fail("unlink") ? -1 : real(p); }
/* The calls relative to a directory held open (a store's own files): failed by their own names. */
int unlinkat(int d, const char *p, int f) {
    REAL(int, unlinkat, int, const char *, int); return fail("unlinkat") ? -1 : real(d, p, f);
}
int renameat(int da, const char *a, int db, const char *b) {
    REAL(int, renameat, int, const char *, int, const char *); return fail("renameat") ? -1 : real(da, a, db, b);
}
int fsync(int fd) { REAL(int, fsync, int); return fail("fsync") ? -1 : real(fd); }
int ftruncate(int fd, off_t l) { REAL(int, ftruncate, int, off_t); return fail("ftruncate") ? -1 : real(fd, l); }
int ftruncate64(int fd, off_t l) { REAL(int, ftruncate64, int, off_t); return fail("ftruncate") ? -1 : real(fd, l); }
int fdatasync(int fd) { REAL(int, fdatasync, int); return fail("fsync") ? -1 : real(fd); }
int rename(const char *a, const char *b) {
    REAL(int, rename, const char *, const char *);
    /* FAULT_SLOW_PARTIAL: a staging directory's rename waits first, widening any window it ends. */
    if (getenv("FAULT_SLOW_PARTIAL") && strstr(a, ".partial") && !strstr(a, ".partial/")) usleep(300000);
    return fail("rename") ? -1 : real(a, b);
}
"#;

/// The shim, built once for its source and compiler under cargo's per-target scratch directory
/// (`CARGO_TARGET_TMPDIR`), so test runs leave nothing behind in the system's temporary directory
/// and later runs reuse it. Built under a name of this process's own, then renamed into place:
/// two suites running at once each get a whole file.
pub(crate) fn shim() -> &'static Path {
    static SHIM_SO: OnceLock<PathBuf> = OnceLock::new();
    SHIM_SO.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        // The target's compiler where the suite was cross-built (`LOADERX_TEST_CC`).
        let cc = std::env::var("LOADERX_TEST_CC").unwrap_or_else(|_| "cc".into());
        let mut key = std::collections::hash_map::DefaultHasher::new();
        (SHIM, &cc).hash(&mut key);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-shim");
        std::fs::create_dir_all(&dir).unwrap();
        let so = dir.join(format!("shim-{:016x}.so", key.finish()));
        if so.is_file() {
            return so;
        }
        let pid = std::process::id();
        let (c, built) = (dir.join(format!("shim-{pid}.c")), dir.join(format!("shim-{pid}.so")));
        std::fs::write(&c, SHIM).unwrap();
        let status = Command::new(cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&built)
            .arg(&c)
            .arg("-ldl")
            .status()
            .expect("cc builds the fault shim");
        assert!(status.success(), "cc failed on the fault shim");
        std::fs::remove_file(&c).unwrap();
        std::fs::rename(&built, &so).unwrap();
        so
    })
}

/// Runs the ignored test `child` in a child process on the store at `dir`, its `at`th msync
/// failing; what it printed.
fn in_child(child: &str, dir: &Path, layout: &str, at: u32) -> String {
    in_child_failing(child, dir, layout, "msync", at)
}

/// [`in_child`], the `at`th call of `call` (msync, pwrite, fsync or ftruncate) failing.
pub(crate) fn in_child_failing(child: &str, dir: &Path, layout: &str, call: &str, at: u32) -> String {
    in_child_failing_then(child, dir, layout, (call, at), "")
}

/// [`in_child_failing`], the next call of `then` failing too once the first failure came.
fn in_child_failing_then(
    child: &str,
    dir: &Path,
    layout: &str,
    (call, at): (&str, u32),
    then: &str,
) -> String {
    let out = crate::common::this_binary()
        .env("FAULT_THEN", then)
        .args([
            &if child.contains("::") { child.to_string() } else { format!("faults::{child}") },
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_PRELOAD", shim())
        .env("FAULT_CALL", call)
        .env("FAULT_AT", at.to_string())
        .env("FAULT_STORE", dir)
        .env("FAULT_LAYOUT", layout)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{child} at msync {at}: {text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// A record naming its id, the rest of its bytes a function of it.
pub(crate) fn record(id: u32) -> Vec<u8> {
    let mut r = vec![(id % 251) as u8; 24];
    r[..4].copy_from_slice(&id.to_le_bytes());
    r
}

fn id_of(r: &[u8]) -> Option<u32> {
    let id = u32::from_le_bytes(r.get(..4)?.try_into().ok()?);
    (r == record(id)).then_some(id)
}

/// A record naming its id, of a length that varies with it (8 to 67 bytes).
pub(crate) fn varied(id: u32) -> Vec<u8> {
    let mut r = vec![(id % 251) as u8; 8 + (id as usize * 7919) % 60];
    r[..4].copy_from_slice(&id.to_le_bytes());
    r
}

pub(crate) fn varied_id(r: &[u8]) -> Option<u32> {
    let id = u32::from_le_bytes(r.get(..4)?.try_into().ok()?);
    (r == varied(id)).then_some(id)
}

pub(crate) fn options(layout: &str) -> StoreOptions {
    match layout {
        "fixed" => StoreOptions::new().fixed_stride(24),
        "compact" => StoreOptions::new().compact_entries(true),
        _ => StoreOptions::new(),
    }
    .chunk_capacity(1024)
}

/// The ids the store holds, every record checked whole, after a clean verify.
fn ids(dir: &Path) -> Vec<u32> {
    ids_by(dir, id_of)
}

/// [`ids`] of records that `id` names.
pub(crate) fn ids_by(dir: &Path, id: fn(&[u8]) -> Option<u32>) -> Vec<u32> {
    let store = Store::open_rw(dir, StoreOptions::new()).unwrap();
    let report = store.verify().unwrap();
    assert!(report.is_ok(), "{:?} {:?}", report.bad, report.files);
    (0..store.len()).map(|i| id(&store.get(i).unwrap()).unwrap_or_else(|| panic!("record {i}"))).collect()
}

/// How a call ended, as the child prints it.
pub(crate) fn outcome<T>(r: &loaderx_core::Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::Committed { .. }) => "committed",
        Err(_) => "failed",
    }
}

pub(crate) fn child_store() -> Option<(PathBuf, String)> {
    Some((std::env::var_os("FAULT_STORE")?.into(), std::env::var("FAULT_LAYOUT").ok()?))
}

#[test]
#[ignore = "a child of appends_under_a_failing_msync: runs under its shim"]
fn child_appends() {
    let Some((dir, layout)) = child_store() else { return };
    let store = Store::create(&dir, options(&layout)).unwrap();
    for batch in 0..4u32 {
        let r = store.append(&(batch * 10..batch * 10 + 7).map(record).collect::<Vec<_>>(), Codec::Raw);
        println!("batch {batch} {}", outcome(&r));
    }
}

/// An append whose entries' msync fails changed nothing (the next append extends what was
/// committed, and a fixed-stride block's checksum is not left extended over it); one whose
/// count's msync fails stands, once.
#[test]
fn appends_under_a_failing_msync() {
    shim();
    for layout in ["entries", "fixed", "compact"] {
        for at in 1..=8 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let printed = in_child("child_appends", &dir, layout, at);
            // The harness prints its own text before the first line: each line from "batch" on.
            let lines: Vec<&str> =
                printed.lines().filter_map(|l| l.find("batch ").map(|k| &l[k..])).collect();
            let mut want = Vec::new();
            for line in &lines {
                let mut f = line.split(' ').skip(1);
                let (batch, how): (u32, &str) = (f.next().unwrap().parse().unwrap(), f.next().unwrap());
                if how != "failed" {
                    want.extend(batch * 10..batch * 10 + 7);
                }
            }
            assert_eq!(lines.len(), 4, "{layout} {at}: {printed}");
            assert_eq!(ids(&dir), want, "{layout}, msync {at} failing: {printed}");
        }
    }
}

#[test]
#[ignore = "a child of deletes_and_compactions_under_a_failing_msync: runs under its shim"]
fn child_delete_compact() {
    let Some((dir, _)) = child_store() else { return };
    let mut store = Store::open_rw(&dir, StoreOptions::new()).unwrap();
    let deleted = store.delete(&[3u64, 10, 11]);
    println!("delete {}", outcome(&deleted));
    if deleted.is_ok() {
        println!("compact {}", outcome(&store.compact_in_batches(usize::MAX, 100)));
    }
    // Every read through this handle is the record at that index, or an error: each hole took
    // the last record (11 <- 47, 10 <- 46, 3 <- 45) when the delete happened.
    let want = |i: u64| match (i, deleted.is_err() && !matches!(deleted, Err(Error::Committed { .. }))) {
        (3, false) => 45,
        (10, false) => 46,
        (11, false) => 47,
        (i, _) => i as u32,
    };
    for i in 0..store.len() {
        match store.get(i) {
            Ok(r) if id_of(&r) != Some(want(i)) => println!("WRONG record {i}: {:?}", id_of(&r)),
            _ => {}
        }
    }
}

/// A delete or compaction whose journal fails part-way stands (it is completed by the next
/// open) or changed nothing; the handle never reads another record's bytes meanwhile.
#[test]
fn deletes_and_compactions_under_a_failing_msync() {
    shim();
    for layout in ["entries", "compact", "fixed"] {
        for at in 1..=24 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let store = Store::create(&dir, options(layout)).unwrap();
            for batch in 0..6u32 {
                // The delete leaves holes, so that compaction then has records to move.
                let recs: Vec<Vec<u8>> = (batch * 8..batch * 8 + 8).map(record).collect();
                store.append(&recs, Codec::Raw).unwrap();
            }
            drop(store);
            let printed = in_child("child_delete_compact", &dir, layout, at);
            assert!(!printed.contains("WRONG"), "{layout}, msync {at} failing: {printed}");
            let mut want: Vec<u32> = (0..48).collect();
            if !printed.contains("delete failed") {
                // Each hole takes the last record: 11 <- 47, 10 <- 46, 3 <- 45.
                want.truncate(45);
                want[11] = 47;
                want[10] = 46;
                want[3] = 45;
            }
            let mut got = ids(&dir);
            let mut sorted = want.clone();
            got.sort_unstable();
            sorted.sort_unstable();
            assert_eq!(got, sorted, "{layout}, msync {at} failing: {printed}");
        }
    }
}

#[test]
#[ignore = "a child of a_migration_that_committed_says_so: runs under its shim"]
fn child_migrate() {
    let Some((dir, layout)) = child_store() else { return };
    let to = if layout == "v2" { loaderx_core::Format::V2 } else { loaderx_core::Format::V1 };
    println!("migrate {}", outcome(&Store::migrate(&dir, to, &|_, _| {})));
}

/// A migration whose directory sync (or a removal after its commit) fails says whether it
/// committed: `Committed` when the store is in its new format, a plain error when it is not.
#[test]
fn a_migration_that_committed_says_so() {
    use loaderx_core::Format;
    shim();
    let mut seen = std::collections::BTreeSet::new();
    for (from, to) in [(Format::V1, "v2"), (Format::V2, "v1")] {
        for at in 1..=8 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let store = Store::create(&dir, StoreOptions::new().format(from)).unwrap();
            store.append(&(0..50).map(record).collect::<Vec<_>>(), Codec::Raw).unwrap();
            drop(store);
            let printed = in_child_failing("child_migrate", &dir, to, "fsync", at);
            let now = Store::open(&dir).unwrap().format();
            let how = ["migrate ok", "migrate committed", "migrate failed"]
                .into_iter()
                .find(|h| printed.contains(h))
                .unwrap_or_else(|| panic!("{printed}"));
            seen.insert(how);
            assert_eq!(now != from, how != "migrate failed", "{from:?} -> {to}, fsync {at}: {printed}");
            assert_eq!(ids(&dir), (0..50).collect::<Vec<_>>());
        }
    }
    assert!(seen.contains("migrate committed") && seen.contains("migrate failed"), "{seen:?}");
}

#[test]
#[ignore = "a child of a_compaction_failing_past_its_new_end_stops_the_handle: runs under its shim"]
fn child_compact_then_append() {
    let Some((dir, _)) = child_store() else { return };
    let mut store = Store::open_rw(&dir, StoreOptions::new()).unwrap();
    println!("compact {}", outcome(&store.compact()));
    println!("append {}", outcome(&store.append(&[varied(900)], Codec::Raw)));
}

/// A compaction whose cut of the bytes past its new end fails has committed (the new end is in
/// the header): it says so, and its handle appends nothing over those bytes; the next open
/// removes them and the store verifies clean.
#[test]
fn a_compaction_failing_past_its_new_end_stops_the_handle() {
    shim();
    let mut committed = 0;
    for at in 1..=3 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let mut store = Store::create(&dir, StoreOptions::new().chunk_capacity(1024)).unwrap();
        store.append(&(0..200).map(varied).collect::<Vec<_>>(), Codec::Raw).unwrap();
        store.delete(&(0..100u64).collect::<Vec<_>>()).unwrap();
        let mut want: Vec<u32> =
            (0..store.len()).map(|i| varied_id(&store.get(i).unwrap()).unwrap()).collect();
        drop(store);
        let printed = in_child_failing("child_compact_then_append", &dir, "entries", "ftruncate", at);
        if printed.contains("compact committed") {
            committed += 1;
            assert!(printed.contains("append failed"), "{printed}");
        } else if printed.contains("append ok") {
            want.push(900);
        }
        assert_eq!(ids_by(&dir, varied_id), want, "ftruncate {at}: {printed}");
    }
    assert!(committed > 0, "the failure reached the cut");
}

#[test]
#[ignore = "a child of a_stopped_handle_still_syncs_what_it_committed: runs under its shim"]
fn child_deferred_then_stopped() {
    let Some((dir, _)) = child_store() else { return };
    let Ok(store) = Store::create(&dir, StoreOptions::new().deferred_sync(true).chunk_capacity(1024)) else {
        return println!("setup failed");
    };
    if store.append(&(0..40).map(varied).collect::<Vec<_>>(), Codec::Raw).is_err() {
        return println!("setup failed");
    }
    println!("b {}", outcome(&store.append(&(100..160).map(varied).collect::<Vec<_>>(), Codec::Raw)));
    let stopped = matches!(store.append(&[varied(900)], Codec::Raw), Err(Error::Locked { .. }));
    println!("stopped {stopped}");
    println!("sync {}", outcome(&store.sync()));
}

/// The thirtieth look's G2: a handle stopped because a failed append's clean-up failed too
/// still makes the records it committed before durable (`sync`, and on drop).
#[test]
fn a_stopped_handle_still_syncs_what_it_committed() {
    shim();
    let mut stopped = 0;
    for at in 1..=12 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let printed = in_child_failing_then(
            "child_deferred_then_stopped",
            &dir,
            "entries",
            ("pwrite", at),
            "ftruncate",
        );
        if printed.contains("setup failed") {
            continue;
        }
        if printed.contains("stopped true") {
            stopped += 1;
            assert!(printed.contains("sync ok"), "pwrite {at}: {printed}");
        }
    }
    assert!(stopped > 0, "the clean-up's failure was reached");
}

/// A record of 4 KiB naming its id (zstd takes a while over thousands of them).
fn big(id: u32) -> Vec<u8> {
    let mut r: Vec<u8> =
        (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(id) >> 7) as u8).collect();
    r[..4].copy_from_slice(&id.to_le_bytes());
    r
}

fn big_or_small_id(r: &[u8]) -> Option<u32> {
    let id = u32::from_le_bytes(r.get(..4)?.try_into().ok()?);
    (r == big(id) || r == record(id)).then_some(id)
}

#[test]
#[ignore = "a child of an_append_waiting_while_the_handle_stops: runs under its shim"]
fn child_append_waiting_while_the_handle_stops() {
    let Some((dir, layout)) = child_store() else { return };
    let store = Store::open_rw(&dir, StoreOptions::new().deferred_sync(layout == "deferred")).unwrap();
    let many: Vec<Vec<u8>> = (1000..5000).map(big).collect();
    std::thread::scope(|s| {
        // A holds the append lock while it compresses; B waits for it.
        let a = s.spawn(|| store.append(&many, Codec::Zstd));
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = s.spawn(|| store.append(&[record(7777), record(7778)], Codec::Raw));
        println!("A {}", outcome(&a.join().unwrap()));
        println!("B {}", outcome(&b.join().unwrap()));
    });
    println!("sync {}", outcome(&store.sync()));
}

/// The thirty-fifth look's M1: an append that waited for the lock while the call holding it
/// stopped the handle (its write failed, then its clean-up) is refused with nothing written, or
/// stands and says so, and is synced: never an error that invites a retry after its records
/// were committed.
#[test]
fn an_append_waiting_while_the_handle_stops() {
    shim();
    for mode in ["deferred", "durable"] {
        for at in [2, 3] {
            for then in ["fsync", "ftruncate"] {
                let tmp = tempfile::tempdir().unwrap();
                let dir = tmp.path().join("s");
                drop(Store::create(&dir, StoreOptions::new().chunk_capacity(1 << 20)).unwrap());
                let printed = in_child_failing_then(
                    "child_append_waiting_while_the_handle_stops",
                    &dir,
                    mode,
                    ("pwrite", at),
                    then,
                );
                let said = |who: &str| {
                    printed.lines().find_map(|l| l.find(who).map(|k| l[k + who.len()..].trim().to_string()))
                };
                let held = ids_by(&dir, big_or_small_id);
                for (who, id, n) in [("A ", 1000, 4000), ("B ", 7777, 2)] {
                    let said = said(who).unwrap_or_else(|| panic!("{mode} {at} {then}: {printed}"));
                    let present = held.iter().filter(|&&i| (id..id + n).contains(&i)).count();
                    let want = if said == "failed" { 0 } else { n as usize };
                    assert_eq!(present, want, "{mode}, pwrite {at} then {then}: {who}said {said}: {printed}");
                }
            }
        }
    }
}

#[test]
#[ignore = "a child of a_reader_survives_failed_appends_cutting_its_block: runs under its shim"]
fn child_reader_while_appends_fail() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (Some((dir, _)), Ok(flag)) = (child_store(), std::env::var("FAULT_FLAG")) else { return };
    // 24-byte records: a block of the fixed stride crosses a page, the open block's tail too.
    let store = Store::create(&dir, StoreOptions::new().fixed_stride(24).verify_reads(true)).unwrap();
    let committed = 341u32;
    store.append(&(0..committed).map(record).collect::<Vec<_>>(), Codec::Raw).unwrap();
    std::fs::write(&flag, b"").unwrap(); // every msync fails from here
    let (stop, errors) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match store.get(u64::from(committed - 1)) {
                    Ok(r) => assert_eq!(r.to_vec(), record(committed - 1)),
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("read: {e}");
                    }
                }
            }
        });
        let t = std::time::Instant::now();
        let mut failed = 0;
        while t.elapsed() < std::time::Duration::from_secs(2) {
            let batch: Vec<Vec<u8>> = (100_000..100_169).map(record).collect();
            if store.append(&batch, Codec::Raw).is_ok() {
                break;
            }
            failed += 1;
        }
        stop.store(true, Ordering::Relaxed);
        println!("failed appends {failed}");
    });
    println!("read errors {}", errors.load(Ordering::Relaxed));
}

/// The thirty-seventh look's P1: a reader checking the open block of a fixed stride reads the
/// records past the count (an append not yet committed) to match the block's sum; a failed
/// append cuts them off the chunk meanwhile. Read through the chunk's mapping, a page past the
/// cut killed the process (SIGBUS); they are read into a buffer now, and the reader gets its
/// committed record every time.
#[test]
fn a_reader_survives_failed_appends_cutting_its_block() {
    for run in 0..3 {
        let tmp = tempfile::tempdir().unwrap();
        let out = crate::common::this_binary()
            .args([
                "faults::child_reader_while_appends_fail",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LD_PRELOAD", shim())
            .env("FAULT_FLAG", tmp.path().join("flag"))
            .env("FAULT_FLAG_CALL", "msync")
            .env("FAULT_STORE", tmp.path().join("s"))
            .env("FAULT_LAYOUT", "fixed")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("read errors 0"),
            "run {run}: {:?}: {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
